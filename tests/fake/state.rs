//! The server's whole state behind one mutex, and the write operations every path shares
//! (HTTP handlers, the `FakeApi` helpers, the simulated controllers): create, update and
//! delete with the metadata the API server maintains (uid, timestamps, generation).

use std::collections::BTreeMap;
use std::time::Instant;

use serde_json::{json, Map, Value};

use super::base64;
use super::clock::Clock;
use super::controller::Controller;
use super::faults::Faults;
use super::http::Request;
use super::ids::Ids;
use super::managed::{self, Writer};
use super::resources::{builtin_types, ResourceType};
use super::store::{name_of, Store};

/// The first resourceVersion handed out; a fresh real cluster is already in the thousands.
const FIRST_RV: u64 = 1000;
/// Namespaces that exist from the start, as in a real cluster.
const INITIAL_NAMESPACES: [&str; 3] = ["default", "kube-system", "kube-public"];

/// A registered watch, for `open_watches` and `bookmark`.
#[derive(Clone, Debug)]
pub struct OpenWatch {
    pub resource: String,
    pub bookmarks: bool,
}

#[derive(Debug)]
pub struct State {
    pub types: Vec<ResourceType>,
    pub store: Store,
    pub clock: Clock,
    pub ids: Ids,
    pub requests: Vec<Request>,
    pub faults: Faults,
    pub token: Option<String>,
    pub watches: BTreeMap<u64, OpenWatch>,
    next_watch_id: u64,
    /// Bumped by `bookmark()`; watches that asked for bookmarks send one when it changes.
    pub bookmark_generation: u64,
    /// Bumped by `close_watches()`; every open watch ends cleanly when it changes.
    pub close_generation: u64,
    /// Bumped by `heal()`; stalled watches resume when it changes.
    pub heal_generation: u64,
    /// Bumped by `restart()`: a request held by a `Slow` fault across it dies with the
    /// server that received it (never applied after the requests of the new one).
    pub restart_generation: u64,
    /// The `WatchList` feature gate is off (kube-apiserver 1.33, or before 1.27): a watch
    /// with `sendInitialEvents` gets 422 (§2.7).
    pub watch_list_disabled: bool,
    pub shutdown: bool,
    pub controller: Controller,
    /// Namespaces being deleted, and when their deletion finishes.
    pub terminating_namespaces: Vec<(String, Instant)>,
    /// Who the write under way is by, for `metadata.managedFields`: the request's manager
    /// while one is served, the controllers while they react, else the harness.
    pub writer: Writer,
}

impl State {
    pub fn new() -> State {
        let mut state = State {
            types: builtin_types(),
            store: Store::new(FIRST_RV),
            clock: Clock::default(),
            ids: Ids::default(),
            requests: Vec::new(),
            faults: Faults::default(),
            token: None,
            watches: BTreeMap::new(),
            next_watch_id: 1,
            bookmark_generation: 0,
            close_generation: 0,
            heal_generation: 0,
            restart_generation: 0,
            watch_list_disabled: false,
            shutdown: false,
            controller: Controller::default(),
            terminating_namespaces: Vec::new(),
            writer: Writer::harness(),
        };
        for namespace in INITIAL_NAMESPACES {
            state.ensure_namespace(namespace);
        }
        state
    }

    /// The type served under this plural (core `events` before `events.k8s.io`).
    pub fn find_type(&self, plural: &str) -> Option<ResourceType> {
        self.types.iter().find(|t| t.plural == plural).cloned()
    }

    pub fn type_of_kind(&self, api_version: &str, kind: &str) -> Option<ResourceType> {
        self.types
            .iter()
            .find(|t| t.kind == kind && t.api_version() == api_version)
            .cloned()
    }

    pub fn register_watch(&mut self, watch: OpenWatch) -> u64 {
        let id = self.next_watch_id;
        self.next_watch_id += 1;
        self.watches.insert(id, watch);
        id
    }

    pub fn get(&self, resource: &ResourceType, namespace: &str, name: &str) -> Option<Value> {
        self.store.get(&resource.key, namespace, name).cloned()
    }

    /// Objects of a type, in one namespace or all, sorted by namespace/name.
    pub fn list(&self, resource: &ResourceType, namespace: Option<&str>) -> Vec<Value> {
        match namespace {
            Some(ns) => self.store.list_in(&resource.key, ns),
            None => self.store.list(&resource.key),
        }
    }

    /// The objects of a type in one namespace that pass `keep`; only those are copied (the
    /// simulated controllers look for the few owned objects among many).
    pub fn list_where(
        &self,
        resource: &ResourceType,
        namespace: &str,
        keep: impl Fn(&Value) -> bool,
    ) -> Vec<Value> {
        self.store
            .iter_in(&resource.key, namespace)
            .filter(|object| keep(object))
            .cloned()
            .collect()
    }

    /// The objects of a namespace that `owner` made, as `list_where` with `keep`: the fake's
    /// controllers name what they make after its owner (`<deployment>-<pod-template-hash>`,
    /// `<replicaset>-<suffix>`), as the real ones do, so only names starting with
    /// `<owner>-` are looked at (a namespace of thousands of Deployments stays fast).
    pub fn list_owned(
        &self,
        resource: &ResourceType,
        namespace: &str,
        owner: &str,
        keep: impl Fn(&Value) -> bool,
    ) -> Vec<Value> {
        self.iter_owned(resource, namespace, owner)
            .filter(|object| keep(object))
            .cloned()
            .collect()
    }

    /// The objects `list_owned` would look at, borrowed where they are stored (for the
    /// controllers that only count or pick a few fields).
    pub fn iter_owned<'a>(
        &'a self,
        resource: &ResourceType,
        namespace: &'a str,
        owner: &str,
    ) -> impl Iterator<Item = &'a Value> {
        let prefix = format!("{owner}-");
        self.store.iter_prefixed(&resource.key, namespace, prefix)
    }

    /// `Some(true)` active, `Some(false)` terminating, `None` missing.
    pub fn namespace_active(&self, namespace: &str) -> Option<bool> {
        let ns = self.store.get("namespaces", "", namespace)?;
        Some(ns.pointer("/metadata/deletionTimestamp").is_none())
    }

    pub fn ensure_namespace(&mut self, namespace: &str) {
        if namespace.is_empty() || self.store.get("namespaces", "", namespace).is_some() {
            return;
        }
        let namespaces = self
            .find_type("namespaces")
            .expect("namespaces are built in");
        self.create(&namespaces, json!({"metadata": {"name": namespace}}));
    }

    /// Stores a new object with the metadata and defaults the API server fills in, then lets
    /// the controllers react. Returns the object as created.
    pub fn create(&mut self, resource: &ResourceType, mut object: Value) -> Value {
        set_type_meta(resource, &mut object);
        let metadata = object["metadata"]
            .as_object_mut()
            .expect("metadata is an object");
        metadata.remove("resourceVersion");
        if metadata
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .is_empty()
        {
            let prefix = metadata
                .get("generateName")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            metadata.insert(
                "name".into(),
                format!("{prefix}{}", self.ids.name_suffix()).into(),
            );
        }
        metadata.insert("uid".into(), self.ids.uid().into());
        let created = if resource.plural == "pods" {
            self.clock.strictly_later()
        } else {
            self.clock.now()
        };
        metadata.insert("creationTimestamp".into(), created.into());
        if resource.has_generation() {
            metadata.insert("generation".into(), 1.into());
        }
        apply_defaults(resource, &mut object);
        object["metadata"]
            .as_object_mut()
            .map(|m| m.remove("managedFields"));
        let time = self.clock.now();
        managed::record(
            None,
            &mut object,
            &self.writer,
            None,
            &time,
            &resource.api_version(),
        );
        let stored = self.store.put(&resource.key, object);
        Controller::after_write(self, resource, None, Some(&stored));
        stored
    }

    /// Writes a new version of an existing object. Identity metadata is kept, generation is
    /// bumped per §3.5, and a write that changes nothing is skipped (no RV, no event).
    pub fn update(&mut self, resource: &ResourceType, old: &Value, object: Value) -> Value {
        self.write_update(resource, old, object, true)
    }

    /// A write through a status path (controllers): no generation bump.
    pub fn update_status(&mut self, resource: &ResourceType, old: &Value, object: Value) -> Value {
        self.write_update(resource, old, object, false)
    }

    fn write_update(
        &mut self,
        resource: &ResourceType,
        old: &Value,
        mut object: Value,
        bump: bool,
    ) -> Value {
        set_type_meta(resource, &mut object);
        for key in [
            "name",
            "namespace",
            "uid",
            "creationTimestamp",
            "generation",
            "resourceVersion",
        ] {
            match old["metadata"].get(key) {
                Some(value) => object["metadata"][key] = value.clone(),
                None => {
                    object["metadata"].as_object_mut().map(|m| m.remove(key));
                }
            }
        }
        if resource.plural == "secrets" {
            fold_string_data(&mut object);
        }
        apply_spec_defaults(resource, &mut object);
        // The server keeps managedFields; a body without them changes nothing.
        match old["metadata"].get("managedFields") {
            Some(fields) => object["metadata"]["managedFields"] = fields.clone(),
            None => {
                object["metadata"]
                    .as_object_mut()
                    .map(|m| m.remove("managedFields"));
            }
        }
        if object == *old {
            return old.clone();
        }
        let time = self.clock.now();
        let subresource = (!bump).then_some("status");
        managed::record(
            Some(old),
            &mut object,
            &self.writer,
            subresource,
            &time,
            &resource.api_version(),
        );
        if bump && resource.has_generation() && generation_changes(resource, old, &object) {
            let generation = old
                .pointer("/metadata/generation")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            object["metadata"]["generation"] = (generation + 1).into();
        }
        let stored = self.store.put(&resource.key, object);
        Controller::after_write(self, resource, Some(old), Some(&stored));
        stored
    }

    /// Deletes an object. Pods are first written with `deletionTimestamp` (MODIFIED) and then
    /// removed (DELETED), as an immediate deletion does (§4.2); the returned object is that
    /// MODIFIED state. Namespaces turn Terminating and their contents go.
    pub fn delete(
        &mut self,
        resource: &ResourceType,
        namespace: &str,
        name: &str,
    ) -> Option<Value> {
        let old = self.get(resource, namespace, name)?;
        if resource.plural == "namespaces" {
            return Some(self.terminate_namespace(old));
        }
        let mut returned = old.clone();
        if resource.plural == "pods" {
            let mut marked = old.clone();
            marked["metadata"]["deletionTimestamp"] = self.clock.now().into();
            marked["metadata"]["deletionGracePeriodSeconds"] = 0.into();
            let generation = old
                .pointer("/metadata/generation")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            marked["metadata"]["generation"] = (generation + 1).into();
            returned = self.store.put(&resource.key, marked);
        }
        let removed = self.store.remove(&resource.key, namespace, name)?;
        Controller::after_write(self, resource, Some(&removed), None);
        Some(returned)
    }

    fn terminate_namespace(&mut self, namespace: Value) -> Value {
        if namespace.pointer("/metadata/deletionTimestamp").is_some() {
            return namespace;
        }
        let name = name_of(&namespace).to_string();
        let mut terminating = namespace.clone();
        terminating["metadata"]["deletionTimestamp"] = self.clock.now().into();
        terminating["status"]["phase"] = "Terminating".into();
        let returned = self.store.put("namespaces", terminating);
        for resource in self.types.clone().iter().filter(|t| t.namespaced) {
            for object in self.list(resource, Some(&name)) {
                self.delete(resource, &name, name_of(&object));
            }
        }
        let finish_at = Instant::now() + super::controller::NAMESPACE_FINALIZE_DELAY;
        self.terminating_namespaces.push((name, finish_at));
        returned
    }

    /// Time-driven work: namespaces whose deletion is due, pods that become Ready.
    pub fn tick(&mut self, now: Instant) {
        let (due, pending): (Vec<_>, Vec<_>) = self
            .terminating_namespaces
            .drain(..)
            .partition(|(_, at)| *at <= now);
        self.terminating_namespaces = pending;
        for (name, _) in due {
            self.store.remove("namespaces", "", &name);
        }
        Controller::tick(self, now);
    }
}

/// Sets `kind`/`apiVersion`, and makes sure `metadata` is an object.
pub fn set_type_meta(resource: &ResourceType, object: &mut Value) {
    if !object.is_object() {
        *object = json!({});
    }
    object["kind"] = resource.kind.clone().into();
    object["apiVersion"] = resource.api_version().into();
    if !object["metadata"].is_object() {
        object["metadata"] = Value::Object(Map::new());
    }
}

/// Secret `stringData` is folded into base64 `data` (winning on a clash) and not stored.
fn fold_string_data(object: &mut Value) {
    let Some(Value::Object(string_data)) =
        object.as_object_mut().and_then(|o| o.remove("stringData"))
    else {
        return;
    };
    if !object["data"].is_object() {
        object["data"] = json!({});
    }
    for (key, value) in string_data {
        let text = value.as_str().unwrap_or("").as_bytes().to_vec();
        object["data"][key] = base64::encode_standard(&text).into();
    }
}

/// Fills `field` of `object` with `value` when it is absent.
fn default(object: &mut Value, field: &str, value: Value) {
    if let Some(map) = object.as_object_mut() {
        map.entry(field).or_insert(value);
    }
}

/// The defaults the API server gives a pod spec (what `kubectl get -o json` of a real
/// Deployment shows, wire 039–044): every write is defaulted, so they never read as a change.
fn default_pod_spec(spec: &mut Value) {
    if !spec.is_object() {
        return;
    }
    default(spec, "restartPolicy", "Always".into());
    default(spec, "terminationGracePeriodSeconds", 30.into());
    default(spec, "dnsPolicy", "ClusterFirst".into());
    default(spec, "securityContext", json!({}));
    default(spec, "schedulerName", "default-scheduler".into());
    for list in ["initContainers", "containers"] {
        let containers = spec.get_mut(list).and_then(Value::as_array_mut);
        for container in containers.into_iter().flatten() {
            let image = container["image"].as_str().unwrap_or("");
            let latest =
                !image.rsplit('/').next().unwrap_or("").contains(':') || image.ends_with(":latest");
            default(container, "resources", json!({}));
            default(
                container,
                "terminationMessagePath",
                "/dev/termination-log".into(),
            );
            default(container, "terminationMessagePolicy", "File".into());
            default(
                container,
                "imagePullPolicy",
                if latest { "Always" } else { "IfNotPresent" }.into(),
            );
        }
    }
    let volumes = spec.get_mut("volumes").and_then(Value::as_array_mut);
    for volume in volumes.into_iter().flatten() {
        for source in ["configMap", "secret", "projected"] {
            if volume.get(source).is_some_and(Value::is_object) {
                default(&mut volume[source], "defaultMode", 420.into());
            }
        }
    }
}

/// Spec defaults of workloads and Pods, applied on create and on every update.
fn apply_spec_defaults(resource: &ResourceType, object: &mut Value) {
    if !object.get("spec").is_some_and(Value::is_object) {
        return;
    }
    let spec = &mut object["spec"];
    match resource.plural.as_str() {
        "deployments" => {
            default(
                spec,
                "strategy",
                json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}}),
            );
            default(spec, "revisionHistoryLimit", 10.into());
            default(spec, "progressDeadlineSeconds", 600.into());
        }
        "statefulsets" => {
            default(spec, "podManagementPolicy", "OrderedReady".into());
            default(
                spec,
                "updateStrategy",
                json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}),
            );
            default(spec, "revisionHistoryLimit", 10.into());
            default(
                spec,
                "persistentVolumeClaimRetentionPolicy",
                json!({"whenDeleted": "Retain", "whenScaled": "Retain"}),
            );
        }
        "daemonsets" => {
            default(
                spec,
                "updateStrategy",
                json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}),
            );
            default(spec, "revisionHistoryLimit", 10.into());
        }
        "pods" => {
            default_pod_spec(spec);
            return;
        }
        _ => {}
    }
    if spec.get("template").is_some_and(Value::is_object) {
        default_pod_spec(&mut spec["template"]["spec"]);
    }
}

fn apply_defaults(resource: &ResourceType, object: &mut Value) {
    apply_spec_defaults(resource, object);
    match resource.plural.as_str() {
        "secrets" => {
            fold_string_data(object);
            if object.get("type").is_none() {
                object["type"] = "Opaque".into();
            }
        }
        "namespaces" => {
            let name = name_of(object).to_string();
            object["metadata"]["labels"]["kubernetes.io/metadata.name"] = name.into();
            object["spec"]["finalizers"] = json!(["kubernetes"]);
            object["status"]["phase"] = "Active".into();
        }
        "poddisruptionbudgets" if object.get("status").is_none() => {
            object["status"] = json!({"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0});
        }
        "pods" if object.get("status").is_none() => {
            object["status"] = json!({"phase": "Pending"});
        }
        "deployments" | "statefulsets" | "replicasets" => {
            if object.pointer("/spec/replicas").is_none()
                && object.get("spec").is_some_and(Value::is_object)
            {
                object["spec"]["replicas"] = 1.into();
            }
            if object.get("status").is_none() {
                object["status"] = json!({});
            }
        }
        "daemonsets" if object.get("status").is_none() => {
            object["status"] = json!({});
        }
        _ => {}
    }
}

/// §3.5: Deployments on spec or annotation changes, everything else on spec changes.
fn generation_changes(resource: &ResourceType, old: &Value, new: &Value) -> bool {
    let spec_changed = old.get("spec") != new.get("spec");
    if resource.plural == "deployments" {
        spec_changed || old.pointer("/metadata/annotations") != new.pointer("/metadata/annotations")
    } else {
        spec_changed
    }
}
