//! The kubelet's part for the Pods of the suite's namespaces (there is no kubelet): one
//! Ready Node, and a loop that binds unscheduled Pods to it (`pods/binding`), reports
//! them Running and Ready (`pods/status`), and finishes graceful deletions (a Pod with a
//! `deletionTimestamp` is removed with `gracePeriodSeconds: 0`, as a kubelet does once
//! its containers stopped). Without it Deployments never become available and evictions
//! against a PodDisruptionBudget cannot be tested. The benchmark plays thousands of Pods
//! with the same steps driven by a watch (`Kubelet::start_watching`).
//!
//! A Pod whose ConfigMap (a volume or `envFrom`) holds a value containing [`BAD_VALUE`]
//! when it starts is reported Running but never Ready, as an application that cannot
//! start on a bad configuration: its Deployment then really reports
//! `ProgressDeadlineExceeded` (with a short `progressDeadlineSeconds`). The benchmark's
//! kubelet does not look (every Pod becomes Ready), so it adds no reads of its own.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::{json, Value};
use wavelet::client::{Client, PatchType, Shape};

pub const NODE: &str = "e2e-node";

/// A ConfigMap value containing this keeps the Pods that use it from becoming Ready.
pub const BAD_VALUE: &str = "fail-readiness";

/// The running loop; stops on drop.
pub struct Kubelet {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

fn now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    wavelet::time::rfc3339(secs)
}

impl Kubelet {
    /// Registers the Node and starts the loop over Pods of namespaces labelled
    /// `wavelet-e2e=true` (the suite's; a borrowed cluster's own Pods are left alone).
    pub fn start(client: Client) -> Kubelet {
        register_node(&client);
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = Arc::clone(&stop);
            std::thread::Builder::new()
                .name("kubelet".into())
                .spawn(move || {
                    let mut ips: HashMap<String, u32> = HashMap::new();
                    while !stop.load(Ordering::Relaxed) {
                        if let Err(e) = tick(&client, &mut ips) {
                            eprintln!("e2e kubelet: {e}");
                        }
                        std::thread::sleep(Duration::from_millis(150));
                    }
                })
                .expect("spawning the kubelet loop")
        };
        Kubelet {
            stop,
            thread: Some(thread),
        }
    }
}

impl Kubelet {
    /// The benchmark's variant: registers the Node and plays the Pods of namespaces whose
    /// names start with `prefix`, from a watch.
    #[allow(dead_code)] // the benchmark's
    pub fn start_watching(client: Client, prefix: &str) -> Kubelet {
        register_node(&client);
        // The API server taints a new Node `not-ready` (NoSchedule) and the node
        // lifecycle controller, which does not run here, lifts it once the Node is Ready:
        // without this, DaemonSets schedule no Pod.
        client
            .patch::<Value>(
                &format!("/api/v1/nodes/{NODE}"),
                PatchType::Merge,
                &json!({"spec": {"taints": []}}),
            )
            .unwrap_or_else(|e| panic!("untainting node {NODE}: {e}"));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (stop, prefix) = (Arc::clone(&stop), prefix.to_string());
            std::thread::Builder::new()
                .name("kubelet".into())
                .spawn(move || watch_loop(&client, &prefix, &stop))
                .expect("spawning the kubelet watch")
        };
        Kubelet {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Kubelet {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn register_node(client: &Client) {
    let node = json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": NODE, "labels": {"kubernetes.io/hostname": NODE, "kubernetes.io/os": "linux"}}});
    match client.post::<Value>("/api/v1/nodes", &node) {
        Ok(_) => {}
        Err(e) if e.status().is_some_and(|s| s.is_conflict()) => {}
        Err(e) => panic!("registering node {NODE}: {e}"),
    }
    let status = json!({"status": {
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
            "message": "the e2e harness plays the kubelet", "lastHeartbeatTime": now(), "lastTransitionTime": now()}],
        "capacity": {"cpu": "64", "memory": "256Gi", "pods": "1000"},
        "allocatable": {"cpu": "64", "memory": "256Gi", "pods": "1000"},
        "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
    }});
    client
        .patch::<Value>(
            &format!("/api/v1/nodes/{NODE}/status"),
            PatchType::Merge,
            &status,
        )
        .unwrap_or_else(|e| panic!("marking node {NODE} Ready: {e}"));
}

fn tick(client: &Client, ips: &mut HashMap<String, u32>) -> Result<(), wavelet::error::Error> {
    let pods: Value = client.get("/api/v1/pods?labelSelector=")?;
    let namespaces: Value = client.get("/api/v1/namespaces?labelSelector=wavelet-e2e%3Dtrue")?;
    let ours: Vec<&str> = namespaces["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|n| n["metadata"]["name"].as_str())
        .collect();
    // ConfigMaps read this tick: (namespace, name) → holds a bad value.
    let mut bad: HashMap<(String, String), bool> = HashMap::new();
    for pod in pods["items"].as_array().into_iter().flatten() {
        let ns = pod["metadata"]["namespace"].as_str().unwrap_or_default();
        if ours.contains(&ns) {
            act(client, pod, ips, Some(&mut bad));
        }
    }
    Ok(())
}

/// The kubelet's next step for one Pod: finish its deletion, bind it, or report it
/// Running (and Ready unless `bad`, the ConfigMaps read this tick, says it uses a bad
/// value); nothing once it runs.
fn act(
    client: &Client,
    pod: &Value,
    ips: &mut HashMap<String, u32>,
    bad: Option<&mut HashMap<(String, String), bool>>,
) {
    let ns = pod["metadata"]["namespace"].as_str().unwrap_or_default();
    let name = pod["metadata"]["name"].as_str().unwrap_or_default();
    let path = format!("/api/v1/namespaces/{ns}/pods/{name}");
    let result = if !pod["metadata"]["deletionTimestamp"].is_null() {
        client
            .delete::<Value>(
                &path,
                Some(
                    &json!({"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}),
                ),
            )
            .map(drop)
    } else if pod["spec"]["nodeName"].as_str().unwrap_or("").is_empty() {
        let binding = json!({"apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": name, "namespace": ns},
            "target": {"apiVersion": "v1", "kind": "Node", "name": NODE}});
        client
            .post::<Value>(&format!("{path}/binding"), &binding)
            .map(drop)
    } else if pod["status"]["phase"] != "Running" {
        let ready = bad.is_none_or(|bad| !uses_bad_configmap(client, ns, pod, bad));
        let ready_text = if ready { "True" } else { "False" };
        let n = ips.len() as u32 + 2;
        let ip = *ips.entry(format!("{ns}/{name}")).or_insert(n);
        let containers: Vec<Value> = pod["spec"]["containers"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                json!({"name": c["name"], "image": c["image"], "imageID": "",
                    "ready": ready, "started": true, "restartCount": 0,
                    "state": {"running": {"startedAt": now()}}})
            })
            .collect();
        let status = json!({"status": {
            "phase": "Running",
            "hostIP": "127.0.0.1",
            "podIP": format!("10.244.{}.{}", (ip >> 8) & 255, ip & 255),
            "startTime": now(),
            "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": now()},
                {"type": "Initialized", "status": "True", "lastTransitionTime": now()},
                {"type": "ContainersReady", "status": ready_text, "lastTransitionTime": now()},
                {"type": "Ready", "status": ready_text, "lastTransitionTime": now()}],
            "containerStatuses": containers,
        }});
        client
            .patch::<Value>(&format!("{path}/status"), PatchType::Merge, &status)
            .map(drop)
    } else {
        Ok(())
    };
    match result {
        Ok(()) => {}
        // Gone or changed meanwhile: the next look sees the new state.
        Err(e)
            if e.status()
                .is_some_and(|s| s.is_not_found() || s.is_conflict()) => {}
        Err(e) => eprintln!("e2e kubelet: {ns}/{name}: {e}"),
    }
}

/// The benchmark's kubelet: the same steps, driven by a watch of all Pods instead of a
/// poll (thousands of Pods), for the Pods of namespaces whose names start with `prefix`.
#[allow(dead_code)]
fn watch_loop(client: &Client, prefix: &str, stop: &AtomicBool) {
    let mut ips: HashMap<String, u32> = HashMap::new();
    let ours = |pod: &Value| {
        pod["metadata"]["namespace"]
            .as_str()
            .is_some_and(|ns| ns.starts_with(prefix))
    };
    while !stop.load(Ordering::Relaxed) {
        let Ok(list) = client.get::<Value>("/api/v1/pods") else {
            std::thread::sleep(Duration::from_millis(500));
            continue;
        };
        for pod in list["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|p| ours(p))
        {
            act(client, pod, &mut ips, None);
        }
        let mut rv = list["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        // Re-watch from the last version until the server says it is too old.
        'watching: while !stop.load(Ordering::Relaxed) {
            let path = format!(
                "/api/v1/pods?watch=true&allowWatchBookmarks=true&resourceVersion={rv}&timeoutSeconds=30"
            );
            let Ok(mut stream) = client.watch(&path, Duration::from_secs(30), Shape::Whole) else {
                break 'watching;
            };
            while let Ok(Some(line)) = stream.next_line() {
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                let Ok(event) = serde_json::from_slice::<Value>(&line) else {
                    continue;
                };
                let pod = &event["object"];
                if let Some(v) = pod["metadata"]["resourceVersion"].as_str() {
                    rv = v.to_string();
                }
                match event["type"].as_str() {
                    Some("ERROR") => break 'watching,
                    Some("ADDED" | "MODIFIED") if ours(pod) => act(client, pod, &mut ips, None),
                    _ => {}
                }
            }
        }
    }
}

/// Whether a ConfigMap the Pod uses (a volume or `envFrom`) holds [`BAD_VALUE`] now.
fn uses_bad_configmap(
    client: &Client,
    ns: &str,
    pod: &Value,
    bad: &mut HashMap<(String, String), bool>,
) -> bool {
    let spec = &pod["spec"];
    let volumes = spec["volumes"].as_array().into_iter().flatten();
    let from_volumes = volumes.filter_map(|v| v["configMap"]["name"].as_str());
    let containers = spec["containers"].as_array().into_iter().flatten();
    let from_env = containers
        .flat_map(|c| c["envFrom"].as_array().into_iter().flatten())
        .filter_map(|e| e["configMapRef"]["name"].as_str());
    let names: Vec<&str> = from_volumes.chain(from_env).collect();
    names.into_iter().any(|name| {
        *bad.entry((ns.to_string(), name.to_string()))
            .or_insert_with(|| {
                let path = format!("/api/v1/namespaces/{ns}/configmaps/{name}");
                client.get::<Value>(&path).is_ok_and(|cm| {
                    cm["data"].as_object().is_some_and(|d| {
                        d.values()
                            .any(|v| v.as_str().is_some_and(|v| v.contains(BAD_VALUE)))
                    })
                })
            })
    })
}
