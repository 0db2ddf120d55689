//! The simulated workload controllers: they count pod-template revisions of Deployments,
//! StatefulSets, DaemonSets and custom resources (Argo Rollouts report Healthy at once),
//! give every Deployment template a
//! ReplicaSet, keep each ReplicaSet's Pods (scheduled, Ready after `ready_delay`), collect
//! garbage by ownerReferences, and write status back through the store like real ones.
//! A Pod whose ConfigMaps/Secrets hold the value [`CRASHING_VALUE`] when it is created never
//! gets Ready, as a kubelet's container in CrashLoopBackOff (its rollout never finishes);
//! a StatefulSet or DaemonSet (whose Pods are not simulated) synced with such a template
//! reports none Ready.
//!
//! Writes only enqueue work; the outermost writer drains the queue, so the controllers
//! never re-enter themselves and see the level state, as a real work queue does.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

use super::ids::fnv1a;
use super::managed::Writer;
use super::resources::ResourceType;
use super::selector::object_selects;
use super::state::State;
use super::store::{name_of, namespace_of};

/// How long a deleted namespace stays Terminating (about 5 s on the recorded server).
pub const NAMESPACE_FINALIZE_DELAY: Duration = Duration::from_millis(200);
const REVISION_ANNOTATION: &str = "deployment.kubernetes.io/revision";
const NODE_NAME: &str = "node-1";
/// A ConfigMap/Secret value (a Secret's decoded) that makes the Pods using it crash.
pub const CRASHING_VALUE: &str = "crash";

#[derive(Clone, Debug, PartialEq)]
enum Work {
    Workload {
        key: String,
        namespace: String,
        name: String,
    },
    ReplicaSet {
        namespace: String,
        name: String,
    },
    CollectDependents {
        namespace: String,
        owner_uid: String,
        owner: Owner,
    },
}

/// What kind of object a deleted owner was: where its dependents can be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Owner {
    /// A Deployment, StatefulSet, DaemonSet, Job...: ReplicaSets, Pods.
    Workload,
    /// Its Pods.
    ReplicaSet,
    /// Only objects of installed CRDs (the CSI driver's pod statuses): a Pod owns no
    /// ReplicaSet or Pod.
    Pod,
}

#[derive(Debug, Default)]
pub struct Controller {
    /// (type key, namespace, name) → (revisions rolled out, current template hash).
    revisions: HashMap<(String, String, String), (u64, String)>,
    queue: VecDeque<Work>,
    running: bool,
    pub ready_delay: Duration,
    /// Pods that become Ready at the given time.
    pending_ready: Vec<(String, String, Instant)>,
}

fn uid_of(object: &Value) -> &str {
    object["metadata"]["uid"].as_str().unwrap_or("")
}

/// The owner of a kind named in `ownerReferences`, as (name, uid).
fn owner(object: &Value, kind: &str) -> Option<(String, String)> {
    let refs = object.pointer("/metadata/ownerReferences")?.as_array()?;
    let r = refs.iter().find(|r| r["kind"] == kind)?;
    Some((
        r["name"].as_str()?.to_string(),
        r["uid"].as_str().unwrap_or("").to_string(),
    ))
}

fn owned_by(object: &Value, owner_uid: &str) -> bool {
    // Indexing, not `pointer`: the controllers call this for every object of a namespace.
    let refs = object["metadata"]["ownerReferences"].as_array();
    refs.is_some_and(|refs| refs.iter().any(|r| r["uid"] == owner_uid))
}

fn owner_reference(owner: &Value) -> Value {
    json!([{
        "apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"], "controller": true, "blockOwnerDeletion": true
    }])
}

/// `pod-template-hash`: 10 hex digits of a hash of the template.
pub fn template_hash(template: &Value) -> String {
    format!(
        "{:010x}",
        fnv1a(template.to_string().as_bytes()) & 0xff_ffff_ffff
    )
}

pub fn is_pod_ready(pod: &Value) -> bool {
    let conditions = pod.pointer("/status/conditions").and_then(Value::as_array);
    conditions.is_some_and(|c| {
        c.iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    })
}

/// A ReplicaSet's `deployment.kubernetes.io/revision`.
fn revision_of(rs: &Value) -> u64 {
    rs.pointer(&format!(
        "/metadata/annotations/{}",
        REVISION_ANNOTATION.replace('/', "~1")
    ))
    .and_then(Value::as_str)
    .and_then(|r| r.parse::<u64>().ok())
    .unwrap_or(0)
}

fn replicas_of(object: &Value) -> u64 {
    object
        .pointer("/spec/replicas")
        .and_then(Value::as_u64)
        .unwrap_or(1)
}

fn with_label(mut labels: Value, key: &str, value: &str) -> Value {
    if !labels.is_object() {
        labels = json!({});
    }
    labels[key] = value.into();
    labels
}

impl Controller {
    pub fn revisions(&self, key: &str, namespace: &str, name: &str) -> u64 {
        self.revisions
            .get(&(key.to_string(), namespace.to_string(), name.to_string()))
            .map_or(0, |r| r.0)
    }

    /// Called after every store write: queue what the controllers must look at, and drain
    /// the queue unless an outer call is already draining it.
    pub fn after_write(
        state: &mut State,
        resource: &ResourceType,
        old: Option<&Value>,
        new: Option<&Value>,
    ) {
        let object = new.or(old).expect("a write has an object");
        let namespace = namespace_of(object).to_string();
        let name = name_of(object).to_string();
        let mut work = Vec::new();
        if resource.is_workload() {
            match new {
                Some(_) => work.push(Work::Workload {
                    key: resource.key.clone(),
                    namespace,
                    name,
                }),
                None => {
                    state.controller.revisions.remove(&(
                        resource.key.clone(),
                        namespace.clone(),
                        name,
                    ));
                    work.push(Work::CollectDependents {
                        namespace,
                        owner_uid: uid_of(object).into(),
                        owner: Owner::Workload,
                    });
                }
            }
        } else if resource.plural == "replicasets" {
            if new.is_some() {
                work.push(Work::ReplicaSet { namespace, name });
            } else {
                work.push(Work::CollectDependents {
                    namespace,
                    owner_uid: uid_of(object).into(),
                    owner: Owner::ReplicaSet,
                });
            }
        } else if resource.plural == "pods" {
            if new.is_none() {
                // What a Pod owns (the CSI driver's pod statuses) goes with it.
                work.push(Work::CollectDependents {
                    namespace: namespace.clone(),
                    owner_uid: uid_of(object).into(),
                    owner: Owner::Pod,
                });
            }
            if let Some((rs, _)) = owner(object, "ReplicaSet") {
                work.push(Work::ReplicaSet {
                    namespace,
                    name: rs,
                });
            }
        }
        for item in work {
            if !state.controller.queue.contains(&item) {
                state.controller.queue.push_back(item);
            }
        }
        if state.controller.running {
            return;
        }
        state.controller.running = true;
        let writer = std::mem::replace(&mut state.writer, Writer::controllers());
        while let Some(item) = state.controller.queue.pop_front() {
            match item {
                Work::Workload {
                    key,
                    namespace,
                    name,
                } => sync_workload(state, &key, &namespace, &name),
                Work::ReplicaSet { namespace, name } => sync_replica_set(state, &namespace, &name),
                Work::CollectDependents {
                    namespace,
                    owner_uid,
                    owner,
                } => collect_dependents(state, &namespace, &owner_uid, owner),
            }
        }
        state.writer = writer;
        state.controller.running = false;
    }

    /// Every Pod waiting for its ready delay is due now.
    pub fn ready_delay_passed(&mut self) {
        let now = Instant::now();
        for (_, _, at) in &mut self.pending_ready {
            *at = now;
        }
    }

    /// Pods whose readiness delay has passed become Running and Ready.
    pub fn tick(state: &mut State, now: Instant) {
        let (due, pending): (Vec<_>, Vec<_>) = state
            .controller
            .pending_ready
            .drain(..)
            .partition(|(_, _, at)| *at <= now);
        state.controller.pending_ready = pending;
        for (namespace, name, _) in due {
            make_ready(state, &namespace, &name);
        }
    }
}

fn type_named(state: &State, plural: &str) -> ResourceType {
    state.find_type(plural).expect("built-in type")
}

fn sync_workload(state: &mut State, key: &str, namespace: &str, name: &str) {
    let Some(resource) = state.types.iter().find(|t| t.key == key).cloned() else {
        return;
    };
    let Some(workload) = state.get(&resource, namespace, name) else {
        return;
    };
    let Some(template) = workload.pointer("/spec/template") else {
        return;
    };
    let hash = template_hash(template);
    let id = (key.to_string(), namespace.to_string(), name.to_string());
    let rollout = state
        .controller
        .revisions
        .entry(id)
        .or_insert((0, String::new()));
    let template_changed = rollout.1 != hash;
    if template_changed {
        rollout.0 += 1;
        rollout.1 = hash.clone();
    }
    match resource.plural.as_str() {
        "deployments" => sync_deployment(state, &resource, workload, &hash, template_changed),
        "statefulsets" | "daemonsets" => {
            let generation = workload
                .pointer("/metadata/generation")
                .cloned()
                .unwrap_or(json!(1));
            let revision = format!("{name}-{hash}");
            let mut status = workload.get("status").cloned().unwrap_or(json!({}));
            // Its Pods (not simulated) crash on a crashing configuration: none Ready.
            let crashing = crashes(state, namespace, &template["spec"]);
            if resource.plural == "statefulsets" {
                let replicas = replicas_of(&workload);
                for field in [
                    "replicas",
                    "readyReplicas",
                    "currentReplicas",
                    "updatedReplicas",
                    "availableReplicas",
                ] {
                    status[field] = replicas.into();
                }
                if crashing {
                    status["readyReplicas"] = 0.into();
                    status["availableReplicas"] = 0.into();
                }
                status["currentRevision"] = revision.clone().into();
                status["updateRevision"] = revision.into();
            } else {
                for field in [
                    "desiredNumberScheduled",
                    "currentNumberScheduled",
                    "numberReady",
                    "updatedNumberScheduled",
                    "numberAvailable",
                ] {
                    status[field] = 1.into();
                }
                if crashing {
                    status["numberReady"] = 0.into();
                    status["numberAvailable"] = 0.into();
                }
            }
            status["observedGeneration"] = generation;
            let mut updated = workload.clone();
            updated["status"] = status;
            state.update_status(&resource, &workload, updated);
        }
        // Argo Rollouts' controller: healthy at once, its observedGeneration a string.
        "rollouts" if resource.group == "argoproj.io" => {
            let generation = workload
                .pointer("/metadata/generation")
                .and_then(Value::as_u64)
                .unwrap_or(1);
            let mut status = workload.get("status").cloned().unwrap_or(json!({}));
            if status["observedGeneration"] == json!(generation.to_string()) {
                return;
            }
            status["observedGeneration"] = generation.to_string().into();
            status["phase"] = "Healthy".into();
            let mut updated = workload.clone();
            updated["status"] = status;
            state.update_status(&resource, &workload, updated);
        }
        _ => {}
    }
}

/// Gives the current template its ReplicaSet (new revision when the template changed),
/// scales the others to zero and writes the revision annotation and status.
fn sync_deployment(
    state: &mut State,
    resource: &ResourceType,
    deployment: Value,
    hash: &str,
    template_changed: bool,
) {
    let namespace = namespace_of(&deployment).to_string();
    let name = name_of(&deployment).to_string();
    let replicas = replicas_of(&deployment);
    let replica_sets = type_named(state, "replicasets");
    let current_name = format!("{name}-{hash}");
    // Only the current ReplicaSet and the old ones still scaled up are copied: a
    // Deployment keeps up to revisionHistoryLimit old ones, and this runs on every write.
    let (mut max_revision, mut existing, mut scaled_up) = (0, None, Vec::new());
    for rs in replica_sets_of(state, &replica_sets, &deployment) {
        max_revision = max_revision.max(revision_of(rs));
        if name_of(rs) == current_name {
            existing = Some(rs.clone());
        } else if replicas_of(rs) != 0 {
            scaled_up.push(rs.clone());
        }
    }
    let revision = match &existing {
        Some(rs) if !template_changed || revision_of(rs) == max_revision => revision_of(rs),
        _ => max_revision + 1,
    };
    let template = deployment
        .pointer("/spec/template")
        .cloned()
        .unwrap_or(json!({}));
    let mut rs_template = template.clone();
    rs_template["metadata"]["labels"] = with_label(
        template["metadata"]["labels"].clone(),
        "pod-template-hash",
        hash,
    );
    let mut selector = deployment
        .pointer("/spec/selector")
        .cloned()
        .unwrap_or(json!({}));
    selector["matchLabels"] =
        with_label(selector["matchLabels"].clone(), "pod-template-hash", hash);
    let annotations = json!({
        "deployment.kubernetes.io/desired-replicas": replicas.to_string(),
        "deployment.kubernetes.io/max-replicas": (replicas + replicas.div_ceil(4)).to_string(),
        REVISION_ANNOTATION: revision.to_string(),
    });
    match existing {
        Some(rs) => {
            let mut updated = rs.clone();
            updated["spec"]["replicas"] = replicas.into();
            updated["metadata"]["annotations"] = annotations;
            state.update(&replica_sets, &rs, updated);
        }
        None => {
            let rs = json!({
                "metadata": {
                    "name": current_name, "namespace": namespace,
                    "labels": rs_template["metadata"]["labels"].clone(),
                    "annotations": annotations,
                    "ownerReferences": owner_reference(&deployment),
                },
                "spec": {"replicas": replicas, "selector": selector, "template": rs_template},
            });
            state.create(&replica_sets, rs);
        }
    }
    for old in &scaled_up {
        let mut scaled = old.clone();
        scaled["spec"]["replicas"] = 0.into();
        state.update(&replica_sets, old, scaled);
    }
    write_deployment_status(state, resource, &namespace, &name, Some(revision));
}

/// A Deployment's ReplicaSets, borrowed where they are stored.
fn replica_sets_of<'a>(
    state: &'a State,
    replica_sets: &ResourceType,
    deployment: &'a Value,
) -> impl Iterator<Item = &'a Value> {
    state
        .iter_owned(replica_sets, namespace_of(deployment), name_of(deployment))
        .filter(move |rs| owned_by(rs, uid_of(deployment)))
}

fn write_deployment_status(
    state: &mut State,
    resource: &ResourceType,
    namespace: &str,
    name: &str,
    revision: Option<u64>,
) {
    let Some(deployment) = state.get(resource, namespace, name) else {
        return;
    };
    let replica_sets = type_named(state, "replicasets");
    let pods = type_named(state, "pods");
    // Counted where they are stored, not copied: a Deployment keeps up to
    // revisionHistoryLimit old ReplicaSets, and this runs on every write of its Pods.
    let owned: Vec<&str> = replica_sets_of(state, &replica_sets, &deployment)
        .map(uid_of)
        .collect();
    let hash = deployment
        .pointer("/spec/template")
        .map(template_hash)
        .unwrap_or_default();
    let (mut pod_count, mut updated_count, mut ready) = (0, 0, 0);
    for p in state
        .iter_owned(&pods, namespace, name)
        .filter(|p| owned.iter().any(|uid| owned_by(p, uid)))
    {
        pod_count += 1;
        if p.pointer("/metadata/labels/pod-template-hash")
            .and_then(Value::as_str)
            == Some(&hash)
        {
            updated_count += 1;
        }
        if is_pod_ready(p) {
            ready += 1;
        }
    }
    let mut updated = deployment.clone();
    if let Some(revision) = revision {
        updated["metadata"]["annotations"][REVISION_ANNOTATION] = revision.to_string().into();
    }
    let status = &mut updated["status"];
    if !status.is_object() {
        *status = json!({});
    }
    status["observedGeneration"] = deployment
        .pointer("/metadata/generation")
        .cloned()
        .unwrap_or(json!(1));
    status["replicas"] = pod_count.into();
    status["updatedReplicas"] = updated_count.into();
    status["readyReplicas"] = ready.into();
    status["availableReplicas"] = ready.into();
    let wanted = replicas_of(&deployment) as usize;
    let now = state.clock.now();
    let rs_name = format!("{name}-{hash}");
    let (available, available_reason, available_message) = if ready >= wanted {
        (
            "True",
            "MinimumReplicasAvailable",
            "Deployment has minimum availability.".to_string(),
        )
    } else {
        (
            "False",
            "MinimumReplicasUnavailable",
            "Deployment does not have minimum availability.".to_string(),
        )
    };
    let (progress_reason, progress_message) = if updated_count >= wanted && ready >= wanted {
        (
            "NewReplicaSetAvailable",
            format!("ReplicaSet \"{rs_name}\" has successfully progressed."),
        )
    } else {
        (
            "ReplicaSetUpdated",
            format!("ReplicaSet \"{rs_name}\" is progressing."),
        )
    };
    set_condition(
        status,
        "Available",
        available,
        available_reason,
        &available_message,
        &now,
    );
    set_condition(
        status,
        "Progressing",
        "True",
        progress_reason,
        &progress_message,
        &now,
    );
    let complete = updated_count == wanted && pod_count == wanted && ready >= wanted;
    state.update_status(resource, &deployment, updated);
    if complete {
        clean_up_old_replica_sets(state, &deployment, &rs_name);
    }
}

/// The Deployment controller's `cleanupDeployment` once a rollout is complete: old
/// ReplicaSets beyond `spec.revisionHistoryLimit` (10 by default) are deleted, the lowest
/// revisions first, each only when it has no replicas left (wanted or running).
fn clean_up_old_replica_sets(state: &mut State, deployment: &Value, current: &str) {
    let Some(limit) = deployment
        .pointer("/spec/revisionHistoryLimit")
        .and_then(Value::as_u64)
    else {
        return;
    };
    let replica_sets = type_named(state, "replicasets");
    let namespace = namespace_of(deployment);
    // (revision, name, whether it has no replicas left) of each old ReplicaSet.
    let mut old: Vec<(u64, String, bool)> = replica_sets_of(state, &replica_sets, deployment)
        .filter(|rs| name_of(rs) != current && rs.pointer("/metadata/deletionTimestamp").is_none())
        .map(|rs| {
            let running = rs
                .pointer("/status/replicas")
                .and_then(Value::as_u64)
                .unwrap_or(0);
            let empty = running == 0 && replicas_of(rs) == 0;
            (revision_of(rs), name_of(rs).to_string(), empty)
        })
        .collect();
    let Some(excess) = old.len().checked_sub(limit as usize).filter(|n| *n > 0) else {
        return;
    };
    old.sort_by_key(|(revision, _, _)| *revision);
    for (_, name, empty) in old.iter().take(excess) {
        if *empty {
            state.delete(&replica_sets, namespace, name);
        }
    }
}

/// Sets a status condition as a real controller does: its transition time moves only when
/// its status changes, its update time only when anything of it does.
fn set_condition(
    status: &mut Value,
    kind: &str,
    value: &str,
    reason: &str,
    message: &str,
    now: &str,
) {
    if !status["conditions"].is_array() {
        status["conditions"] = json!([]);
    }
    let conditions = status["conditions"].as_array_mut().expect("an array");
    let position = conditions.iter().position(|c| c["type"] == kind);
    if let Some(i) = position {
        let old = &conditions[i];
        if old["status"] == value && old["reason"] == reason && old["message"] == message {
            return;
        }
    }
    let transition = match position {
        Some(i) if conditions[i]["status"] == value => conditions[i]["lastTransitionTime"].clone(),
        _ => now.into(),
    };
    let condition = json!({"type": kind, "status": value, "lastUpdateTime": now,
        "lastTransitionTime": transition, "reason": reason, "message": message});
    match position {
        Some(i) => conditions[i] = condition,
        None => conditions.push(condition),
    }
}

/// Keeps `spec.replicas` live Pods for a ReplicaSet and writes its status.
fn sync_replica_set(state: &mut State, namespace: &str, name: &str) {
    let replica_sets = type_named(state, "replicasets");
    let pods = type_named(state, "pods");
    let Some(rs) = state.get(&replica_sets, namespace, name) else {
        return;
    };
    let want = replicas_of(&rs) as usize;
    // Active Pods, as the real ReplicaSet controller counts them (`FilterActivePods`): a
    // Failed or Succeeded Pod (an Evicted one) stays until Pod GC, but is replaced.
    let mut live = state.list_owned(&pods, namespace, name, |p| {
        owned_by(p, uid_of(&rs))
            && p.pointer("/metadata/deletionTimestamp").is_none()
            && !matches!(
                p.pointer("/status/phase").and_then(Value::as_str),
                Some("Failed" | "Succeeded")
            )
    });
    while live.len() < want {
        live.push(create_pod(state, &pods, &rs));
    }
    if live.len() > want {
        live.sort_by(|a, b| {
            b["metadata"]["creationTimestamp"]
                .as_str()
                .cmp(&a["metadata"]["creationTimestamp"].as_str())
        });
        for extra in live.drain(..live.len() - want) {
            state.delete(&pods, namespace, name_of(&extra));
        }
    }
    let live: Vec<Value> = live
        .iter()
        .filter_map(|p| state.get(&pods, namespace, name_of(p)))
        .collect();
    let ready = live.iter().filter(|p| is_pod_ready(p)).count();
    let mut updated = rs.clone();
    updated["status"] = json!({
        "replicas": live.len(), "fullyLabeledReplicas": live.len(), "readyReplicas": ready,
        "availableReplicas": ready, "observedGeneration": rs["metadata"]["generation"].clone(),
    });
    state.update_status(&replica_sets, &rs, updated);
    if let Some((deployment, _)) = owner(&rs, "Deployment") {
        let deployments = type_named(state, "deployments");
        write_deployment_status(state, &deployments, namespace, &deployment, None);
    }
}

fn create_pod(state: &mut State, pods: &ResourceType, rs: &Value) -> Value {
    let template = rs.pointer("/spec/template").cloned().unwrap_or(json!({}));
    let mut metadata = Map::new();
    metadata.insert("generateName".into(), format!("{}-", name_of(rs)).into());
    metadata.insert("namespace".into(), namespace_of(rs).into());
    for key in ["labels", "annotations"] {
        if let Some(value) = template.pointer(&format!("/metadata/{key}")) {
            metadata.insert(key.into(), value.clone());
        }
    }
    metadata.insert("ownerReferences".into(), owner_reference(rs));
    let mut spec = template.get("spec").cloned().unwrap_or(json!({}));
    if !spec.is_object() {
        spec = json!({});
    }
    spec["nodeName"] = NODE_NAME.into();
    let pod = state.create(
        pods,
        json!({"metadata": metadata, "spec": spec, "status": {"phase": "Pending"}}),
    );
    let (namespace, name) = (namespace_of(&pod).to_string(), name_of(&pod).to_string());
    if crashes(state, &namespace, &pod["spec"]) {
        return pod;
    }
    if state.controller.ready_delay.is_zero() {
        make_ready(state, &namespace, &name);
    } else {
        let due = Instant::now() + state.controller.ready_delay;
        state.controller.pending_ready.push((namespace, name, due));
    }
    pod
}

/// The ConfigMaps and Secrets a pod spec reads, as (plural, name): volumes (projected ones
/// too), and the env and envFrom of every container and init container.
fn config_references(spec: &Value) -> Vec<(&'static str, String)> {
    let mut found = Vec::new();
    let mut add = |plural: &'static str, name: &Value| {
        if let Some(name) = name.as_str() {
            found.push((plural, name.to_string()));
        }
    };
    for volume in spec["volumes"].as_array().into_iter().flatten() {
        add("configmaps", &volume["configMap"]["name"]);
        add("secrets", &volume["secret"]["secretName"]);
        for source in volume["projected"]["sources"]
            .as_array()
            .into_iter()
            .flatten()
        {
            add("configmaps", &source["configMap"]["name"]);
            add("secrets", &source["secret"]["name"]);
        }
    }
    for list in ["containers", "initContainers"] {
        for container in spec[list].as_array().into_iter().flatten() {
            for env in container["env"].as_array().into_iter().flatten() {
                add("configmaps", &env["valueFrom"]["configMapKeyRef"]["name"]);
                add("secrets", &env["valueFrom"]["secretKeyRef"]["name"]);
            }
            for from in container["envFrom"].as_array().into_iter().flatten() {
                add("configmaps", &from["configMapRef"]["name"]);
                add("secrets", &from["secretRef"]["name"]);
            }
        }
    }
    found
}

/// Whether a Pod of this spec would crash: one of its ConfigMaps/Secrets holds
/// [`CRASHING_VALUE`].
fn crashes(state: &State, namespace: &str, spec: &Value) -> bool {
    let encoded = super::base64::encode_standard(CRASHING_VALUE.as_bytes());
    config_references(spec).iter().any(|(plural, name)| {
        let resource = type_named(state, plural);
        let crashing = if *plural == "secrets" {
            encoded.as_str()
        } else {
            CRASHING_VALUE
        };
        state.get(&resource, namespace, name).is_some_and(|object| {
            object["data"]
                .as_object()
                .is_some_and(|data| data.values().any(|v| v == crashing))
        })
    })
}

/// What a kubelet would report once the containers run.
fn make_ready(state: &mut State, namespace: &str, name: &str) {
    let pods = type_named(state, "pods");
    let Some(pod) = state.get(&pods, namespace, name) else {
        return;
    };
    let now = state.clock.now();
    let mut updated = pod.clone();
    let conditions: Vec<Value> = [
        "PodReadyToStartContainers",
        "Initialized",
        "Ready",
        "ContainersReady",
        "PodScheduled",
    ]
    .iter()
    .map(|t| json!({"type": t, "status": "True", "lastTransitionTime": now}))
    .collect();
    updated["status"] = json!({"phase": "Running", "conditions": conditions, "hostIP": "10.0.0.1", "podIP": "10.244.0.10", "startTime": now});
    state.update_status(&pods, &pod, updated);
}

/// Garbage collection: objects whose owner is gone are deleted (ReplicaSets, Pods, and
/// the objects of installed CRDs, such as the pod statuses a Pod owns). Only the kinds
/// `owner` can own are looked through: every rollout deletes Pods and old ReplicaSets,
/// and a walk through every ReplicaSet of the namespace for each (under the fake's lock)
/// made each write slower as ReplicaSets piled up.
fn collect_dependents(state: &mut State, namespace: &str, owner_uid: &str, owner: Owner) {
    let builtin: &[&str] = match owner {
        Owner::Workload => &["replicasets", "pods"],
        Owner::ReplicaSet => &["pods"],
        Owner::Pod => &[],
    };
    let mut kinds: Vec<ResourceType> = builtin.iter().map(|p| type_named(state, p)).collect();
    for custom in state.types.iter().filter(|t| !t.builtin && t.namespaced) {
        if !kinds.iter().any(|k| k.key == custom.key) {
            kinds.push(custom.clone());
        }
    }
    for resource in kinds {
        for dependent in state.list_where(&resource, namespace, |o| owned_by(o, owner_uid)) {
            state.delete(&resource, namespace, name_of(&dependent));
        }
    }
}

/// PDBs of a namespace whose selector matches the pod's labels.
pub fn pdbs_covering(state: &State, pod: &Value) -> Vec<Value> {
    let pdbs = type_named(state, "poddisruptionbudgets");
    let empty = Map::new();
    let labels = pod
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    state
        .list(&pdbs, Some(namespace_of(pod)))
        .into_iter()
        .filter(|pdb| {
            object_selects(
                pdb.pointer("/spec/selector").unwrap_or(&Value::Null),
                labels,
            )
        })
        .collect()
}
