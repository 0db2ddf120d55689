//! The harness's own API calls, through wavelet's library client with the admin
//! kubeconfig: create objects, read them, patch them, wait for a condition.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use wavelet::client::{Client, PatchType};

use crate::cluster::wait_for;

/// An admin connection to the cluster under test.
#[derive(Clone)]
pub struct Kube {
    pub client: Client,
    /// The namespaces the suite created, deleted at the end.
    namespaces: Arc<Mutex<Vec<String>>>,
}

/// `/api/v1/namespaces/NS/configmaps` for `("", "v1", "configmaps")`, or the `/apis/...`
/// form for a group.
pub fn collection(group_version: &str, ns: Option<&str>, plural: &str) -> String {
    let prefix = if group_version.contains('/') {
        format!("/apis/{group_version}")
    } else {
        format!("/api/{group_version}")
    };
    match ns {
        Some(ns) => format!("{prefix}/namespaces/{ns}/{plural}"),
        None => format!("{prefix}/{plural}"),
    }
}

/// The group version and plural of a kind the suite uses.
pub fn resource_of(kind: &str) -> (&'static str, &'static str) {
    match kind {
        "ConfigMap" => ("v1", "configmaps"),
        "Secret" => ("v1", "secrets"),
        "Pod" => ("v1", "pods"),
        "ServiceAccount" => ("v1", "serviceaccounts"),
        "Deployment" => ("apps/v1", "deployments"),
        "StatefulSet" => ("apps/v1", "statefulsets"),
        "DaemonSet" => ("apps/v1", "daemonsets"),
        "ReplicaSet" => ("apps/v1", "replicasets"),
        "ControllerRevision" => ("apps/v1", "controllerrevisions"),
        "PodDisruptionBudget" => ("policy/v1", "poddisruptionbudgets"),
        "Lease" => ("coordination.k8s.io/v1", "leases"),
        "Event" => ("v1", "events"),
        other => panic!("the suite does not know kind {other}"),
    }
}

impl Kube {
    pub fn new(client: Client) -> Kube {
        Kube {
            client,
            namespaces: Arc::default(),
        }
    }

    /// Deletes every namespace the suite created (a borrowed cluster is left as found).
    pub fn delete_namespaces_of_suite(&self) {
        for ns in self.namespaces.lock().unwrap().drain(..) {
            self.delete_namespace(&ns);
        }
    }

    /// Creates a namespaced object (its kind says where) and returns it.
    pub fn create(&self, object: Value) -> Value {
        let kind = object["kind"].as_str().expect("kind");
        let ns = object["metadata"]["namespace"].as_str().expect("namespace");
        let (gv, plural) = resource_of(kind);
        self.client
            .post::<Value>(&collection(gv, Some(ns), plural), &object)
            .unwrap_or_else(|e| panic!("creating {kind} {ns}/{}: {e}", object["metadata"]["name"]))
    }

    pub fn get(&self, kind: &str, ns: &str, name: &str) -> Option<Value> {
        let (gv, plural) = resource_of(kind);
        match self
            .client
            .get::<Value>(&format!("{}/{name}", collection(gv, Some(ns), plural)))
        {
            Ok(v) => Some(v),
            Err(e) if e.is_not_found() => None,
            Err(e) => panic!("reading {kind} {ns}/{name}: {e}"),
        }
    }

    pub fn list(&self, kind: &str, ns: &str) -> Vec<Value> {
        let (gv, plural) = resource_of(kind);
        let list: Value = self
            .client
            .get(&collection(gv, Some(ns), plural))
            .unwrap_or_else(|e| panic!("listing {kind} in {ns}: {e}"));
        list["items"].as_array().cloned().unwrap_or_default()
    }

    pub fn merge_patch(&self, kind: &str, ns: &str, name: &str, patch: Value) -> Value {
        let (gv, plural) = resource_of(kind);
        self.client
            .patch::<Value>(
                &format!("{}/{name}", collection(gv, Some(ns), plural)),
                PatchType::Merge,
                &patch,
            )
            .unwrap_or_else(|e| panic!("patching {kind} {ns}/{name}: {e}"))
    }

    pub fn delete(&self, kind: &str, ns: &str, name: &str) {
        let (gv, plural) = resource_of(kind);
        match self.client.delete::<Value>(
            &format!("{}/{name}", collection(gv, Some(ns), plural)),
            None,
        ) {
            Ok(_) => {}
            Err(e) if e.is_not_found() => {}
            Err(e) => panic!("deleting {kind} {ns}/{name}: {e}"),
        }
    }

    /// Creates a namespace labelled as the suite's and waits for its `default`
    /// ServiceAccount (Pods are refused without it).
    pub fn create_namespace(&self, name: &str) {
        let body = json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": {"wavelet-e2e": "true"}}});
        match self.client.post::<Value>("/api/v1/namespaces", &body) {
            Ok(_) => self.namespaces.lock().unwrap().push(name.to_string()),
            Err(e) if e.status().is_some_and(|s| s.is_conflict()) => {}
            Err(e) => panic!("creating namespace {name}: {e}"),
        }
        self.until(
            Duration::from_secs(60),
            &format!("ServiceAccount {name}/default"),
            || self.get("ServiceAccount", name, "default").is_some(),
        );
    }

    /// Labels a namespace something else created (`kubectl apply`) as the suite's, so the
    /// kubelet stand-in plays its Pods and the suite deletes it at the end.
    pub fn adopt_namespace(&self, name: &str) {
        let body = json!({"metadata": {"labels": {"wavelet-e2e": "true"}}});
        self.client
            .patch::<Value>(
                &format!("/api/v1/namespaces/{name}"),
                PatchType::Merge,
                &body,
            )
            .unwrap_or_else(|e| panic!("labelling namespace {name}: {e}"));
        self.namespaces.lock().unwrap().push(name.to_string());
    }

    /// Deletes a namespace (the namespace controller removes what is in it).
    pub fn delete_namespace(&self, name: &str) {
        let _ = self
            .client
            .delete::<Value>(&format!("/api/v1/namespaces/{name}"), None);
    }

    /// Waits up to `timeout` for `cond`, panicking with `what` otherwise.
    pub fn until(&self, timeout: Duration, what: &str, cond: impl FnMut() -> bool) {
        if wait_for(timeout, cond).is_err() {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
    }
}

/// A ConfigMap.
pub fn configmap(ns: &str, name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns}, "data": data})
}

/// A workload (Deployment, StatefulSet, DaemonSet) of one `busybox`-like container with
/// this pod spec part merged in, opted in with these annotations.
pub fn workload(kind: &str, ns: &str, name: &str, annotations: Value, pod: Value) -> Value {
    let mut pod_spec = json!({"containers": [{"name": "app", "image": "registry.invalid/app:1"}],
        "terminationGracePeriodSeconds": 1});
    if let Some(extra) = pod.as_object() {
        for (k, v) in extra {
            if k == "container" {
                for (ck, cv) in v.as_object().unwrap() {
                    pod_spec["containers"][0][ck] = cv.clone();
                }
            } else {
                pod_spec[k] = v.clone();
            }
        }
    }
    let mut spec = json!({
        "selector": {"matchLabels": {"app": name}},
        "template": {"metadata": {"labels": {"app": name}}, "spec": pod_spec},
    });
    match kind {
        "Deployment" => spec["replicas"] = json!(2),
        "StatefulSet" => {
            spec["replicas"] = json!(1);
            spec["serviceName"] = json!(name);
        }
        _ => {}
    }
    json!({"apiVersion": "apps/v1", "kind": kind,
        "metadata": {"name": name, "namespace": ns, "annotations": annotations},
        "spec": spec})
}

/// The pod spec part that mounts ConfigMap `name` as a volume.
pub fn mounts_configmap(name: &str) -> Value {
    json!({"volumes": [{"name": "cfg", "configMap": {"name": name}}],
        "container": {"volumeMounts": [{"name": "cfg", "mountPath": "/cfg"}]}})
}

pub fn opted_in() -> Value {
    json!({"wavelet.dev/update-on-config-change": "true"})
}

/// The template and metadata hash annotations of an object.
pub fn hashes(object: &Value) -> (Option<String>, Option<String>) {
    let key = "wavelet.dev/config-hash";
    let text = |v: &Value| v.as_str().map(String::from);
    (
        text(&object["spec"]["template"]["metadata"]["annotations"][key]),
        text(&object["metadata"]["annotations"][key]),
    )
}
