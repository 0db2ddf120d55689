//! The floor of change → rollout: no controller, the benchmark itself as the fastest one
//! possible. It watches the scenario's ConfigMaps and Secrets and, the moment a new
//! version with changed data arrives, PATCHes one annotation onto the pod template of
//! each workload that references it (four writers, as wavelet's four workers). What it
//! measures is the API server's own work: the change's write and watch delivery, then the
//! rollout's write and watch delivery.

use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use wavelet::client::{Client, PatchType, Shape};

use crate::loadtest::drive::{collection, created_workloads};
use crate::loadtest::objects::references;
use crate::loadtest::Scenario;

pub struct Floor {
    stop: Arc<AtomicBool>,
}

type Dependents = HashMap<(String, String, String), Vec<(String, String, String)>>;

fn dependents(scenario: &Scenario) -> Dependents {
    let mut map: Dependents = HashMap::new();
    for w in scenario
        .workloads()
        .cloned()
        .chain(created_workloads(scenario))
    {
        let kind = w["kind"].as_str().unwrap_or("Deployment").to_string();
        let ns = w["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let name = w["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        for (ref_kind, ref_name) in references(&w) {
            map.entry((ref_kind.to_string(), ns.clone(), ref_name))
                .or_default()
                .push((kind.clone(), ns.clone(), name.clone()));
        }
    }
    map
}

fn data_digest(object: &Value) -> u64 {
    let mut h = DefaultHasher::new();
    object["data"].to_string().hash(&mut h);
    object["binaryData"].to_string().hash(&mut h);
    h.finish()
}

/// Where one watch thread sends its work, and when it stops.
struct Wiring {
    deps: Arc<Dependents>,
    work: Sender<(String, String, String, String)>,
    stop: Arc<AtomicBool>,
    listed: Sender<()>,
}

fn watch_kind(client: &Client, kind: &'static str, path: &'static str, prefix: &str, w: Wiring) {
    let Wiring {
        deps,
        work,
        stop,
        listed,
    } = w;
    let mut last: HashMap<(String, String), u64> = HashMap::new();
    let mut items = Vec::new();
    let Ok(meta) = client.list(path, Shape::Whole, &mut |o: Value| items.push(o)) else {
        return;
    };
    for o in &items {
        let key = (
            o["metadata"]["namespace"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            o["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        );
        last.insert(key, data_digest(o));
    }
    let mut rv = meta.resource_version;
    let _ = listed.send(());
    while !stop.load(Ordering::Relaxed) {
        let watch = format!("{path}?watch=true&resourceVersion={rv}&timeoutSeconds=30");
        let Ok(mut stream) = client.watch(&watch, Duration::from_secs(30), Shape::Whole) else {
            return;
        };
        while let Ok(Some(line)) = stream.next_line() {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            let Ok(event) = serde_json::from_slice::<Value>(&line) else {
                continue;
            };
            let o = &event["object"];
            if let Some(v) = o["metadata"]["resourceVersion"].as_str() {
                rv = v.to_string();
            }
            let ns = o["metadata"]["namespace"].as_str().unwrap_or_default();
            if event["type"] != "MODIFIED" || !ns.starts_with(prefix) {
                continue;
            }
            let name = o["metadata"]["name"].as_str().unwrap_or_default();
            let digest = data_digest(o);
            if last.insert((ns.into(), name.into()), digest) == Some(digest) {
                continue;
            }
            for (wk, wns, wname) in deps
                .get(&(kind.to_string(), ns.to_string(), name.to_string()))
                .into_iter()
                .flatten()
            {
                let _ = work.send((wk.clone(), wns.clone(), wname.clone(), rv.clone()));
            }
        }
    }
}

impl Floor {
    /// Starts acting for `scenario` (its namespaces start with `prefix`).
    pub fn start(client: &Client, scenario: &Scenario, prefix: &str) -> Floor {
        let stop = Arc::new(AtomicBool::new(false));
        let deps = Arc::new(dependents(scenario));
        let (tx, rx) = channel::<(String, String, String, String)>();
        let rx = Arc::new(Mutex::new(rx));
        for _ in 0..4 {
            let (rx, client) = (Arc::clone(&rx), client.clone());
            std::thread::spawn(move || loop {
                let Ok((kind, ns, name, rv)) = rx.lock().unwrap().recv() else {
                    return;
                };
                let patch = json!({"spec": {"template": {"metadata": {"annotations": {"bench.wavelet.dev/floor": rv}}}}});
                let _ = client.patch::<serde::de::IgnoredAny>(
                    &format!("{}/{name}", collection(&kind, &ns)),
                    PatchType::Strategic,
                    &patch,
                );
            });
        }
        let (listed_tx, listed) = channel();
        for (kind, path) in [
            ("ConfigMap", "/api/v1/configmaps"),
            ("Secret", "/api/v1/secrets"),
        ] {
            let wiring = Wiring {
                deps: Arc::clone(&deps),
                work: tx.clone(),
                stop: Arc::clone(&stop),
                listed: listed_tx.clone(),
            };
            let (client, prefix) = (client.clone(), prefix.to_string());
            std::thread::spawn(move || watch_kind(&client, kind, path, &prefix, wiring));
        }
        for _ in 0..2 {
            listed
                .recv_timeout(Duration::from_secs(60))
                .expect("the floor's lists");
        }
        Floor { stop }
    }
}

impl Drop for Floor {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}
