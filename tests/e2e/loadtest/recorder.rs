//! What the API server shows, timed from outside every controller: one list+watch per
//! resource (workloads, ReplicaSets, ConfigMaps, Secrets) over the namespaces of a run,
//! recording when each pod template changed, when each ConfigMap or Secret version
//! arrived, and when objects came and went.

use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::Value;
use wavelet::client::{Client, Shape};

/// The resources recorded: (kind, collection path).
const RESOURCES: [(&str, &str); 6] = [
    ("Deployment", "/apis/apps/v1/deployments"),
    ("StatefulSet", "/apis/apps/v1/statefulsets"),
    ("DaemonSet", "/apis/apps/v1/daemonsets"),
    ("ReplicaSet", "/apis/apps/v1/replicasets"),
    ("ConfigMap", "/api/v1/configmaps"),
    ("Secret", "/api/v1/secrets"),
];

/// What an event showed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum What {
    /// First seen (listed at start, or created).
    Created,
    /// A workload's pod template differs from the last one seen: a rollout was written.
    TemplateChanged,
    /// A ConfigMap's or Secret's new version (`data_changed`: its data differs).
    Version {
        resource_version: String,
        data_changed: bool,
    },
    Deleted,
}

#[derive(Clone, Debug)]
pub struct Event {
    pub at: Instant,
    pub kind: &'static str,
    pub ns: String,
    pub name: String,
    pub what: What,
    /// ReplicaSets: the workload that owns it.
    pub owner: Option<String>,
    /// Whether the object existed before the recorder started (its initial list).
    pub listed: bool,
}

/// The running recorder; stops on drop.
pub struct Recorder {
    stop: Arc<AtomicBool>,
    _threads: Vec<JoinHandle<()>>,
    events: Arc<Mutex<Vec<Event>>>,
}

fn digest(value: &Value) -> u64 {
    let mut h = DefaultHasher::new();
    // serde_json's maps are sorted: the text is canonical.
    value.to_string().hash(&mut h);
    h.finish()
}

/// The part of an object whose change is recorded: a workload's pod template, a
/// ConfigMap's or Secret's data.
fn watched_part(kind: &str, object: &Value) -> u64 {
    match kind {
        "ConfigMap" => digest(&Value::Array(vec![
            object["data"].clone(),
            object["binaryData"].clone(),
        ])),
        "Secret" => digest(&object["data"]),
        _ => digest(&object["spec"]["template"]),
    }
}

struct Stream {
    kind: &'static str,
    path: &'static str,
    prefix: String,
    last: HashMap<(String, String), u64>,
    events: Arc<Mutex<Vec<Event>>>,
}

impl Stream {
    fn record(&mut self, kind_of_event: &str, object: &Value, listed: bool) {
        let at = Instant::now();
        let ns = object["metadata"]["namespace"].as_str().unwrap_or_default();
        if !ns.starts_with(&self.prefix) {
            return;
        }
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        let key = (ns.to_string(), name.to_string());
        let part = watched_part(self.kind, object);
        let what = match kind_of_event {
            "DELETED" => {
                self.last.remove(&key);
                What::Deleted
            }
            _ => match self.last.insert(key, part) {
                None => What::Created,
                Some(before) => match self.kind {
                    "ConfigMap" | "Secret" => What::Version {
                        resource_version: object["metadata"]["resourceVersion"]
                            .as_str()
                            .unwrap_or_default()
                            .to_string(),
                        data_changed: before != part,
                    },
                    "ReplicaSet" => return,
                    _ if before != part => What::TemplateChanged,
                    _ => return,
                },
            },
        };
        let owner = object["metadata"]["ownerReferences"][0]["name"]
            .as_str()
            .map(String::from);
        self.events.lock().unwrap().push(Event {
            at,
            kind: self.kind,
            ns: ns.to_string(),
            name: name.to_string(),
            what,
            owner,
            listed,
        });
    }

    /// Lists everything (recorded as `listed`), returns the list's resourceVersion.
    fn list(&mut self, client: &Client, listed: bool) -> Result<String, wavelet::error::Error> {
        let mut token: Option<String> = None;
        loop {
            let mut path = format!("{}?limit=500", self.path);
            if let Some(t) = &token {
                path.push_str(&format!("&continue={t}"));
            }
            let mut items = Vec::new();
            let meta = client.list(&path, Shape::Whole, &mut |item: Value| items.push(item))?;
            for item in &items {
                self.record("ADDED", item, listed);
            }
            match meta.continue_token.filter(|t| !t.is_empty()) {
                Some(t) => token = Some(wavelet::selector::percent_encode_query_value(&t)),
                None => return Ok(meta.resource_version),
            }
        }
    }

    /// Watches from `rv` until the stream ends; returns the last resourceVersion seen,
    /// or `None` when the watch must be started over from a new list (410).
    fn watch(&mut self, client: &Client, rv: &str, stop: &AtomicBool) -> Option<String> {
        let path = format!(
            "{}?watch=true&allowWatchBookmarks=true&resourceVersion={rv}&timeoutSeconds=60",
            self.path
        );
        let mut stream = client
            .watch(&path, Duration::from_secs(60), Shape::Whole)
            .ok()?;
        let mut last = rv.to_string();
        while !stop.load(Ordering::Relaxed) {
            let Ok(Some(line)) = stream.next_line() else {
                break;
            };
            let Ok(event) = serde_json::from_slice::<Value>(&line) else {
                continue;
            };
            let object = &event["object"];
            if let Some(v) = object["metadata"]["resourceVersion"].as_str() {
                last = v.to_string();
            }
            match event["type"].as_str() {
                Some("ERROR") => return None,
                Some("BOOKMARK") => {}
                Some(kind) => self.record(kind, object, false),
                None => {}
            }
        }
        Some(last)
    }
}

impl Recorder {
    /// Starts recording the namespaces whose names start with `prefix`; returns once
    /// every initial list is in.
    pub fn start(client: &Client, prefix: &str) -> Recorder {
        let stop = Arc::new(AtomicBool::new(false));
        let events = Arc::new(Mutex::new(Vec::new()));
        let mut threads = Vec::new();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        for (kind, path) in RESOURCES {
            let mut stream = Stream {
                kind,
                path,
                prefix: prefix.to_string(),
                last: HashMap::new(),
                events: Arc::clone(&events),
            };
            let (client, stop, ready) = (client.clone(), Arc::clone(&stop), ready_tx.clone());
            threads.push(
                std::thread::Builder::new()
                    .name(format!("record-{kind}"))
                    .spawn(move || {
                        let mut rv = stream
                            .list(&client, true)
                            .unwrap_or_else(|e| panic!("recorder: listing {path}: {e}"));
                        let _ = ready.send(());
                        while !stop.load(Ordering::Relaxed) {
                            match stream.watch(&client, &rv, &stop) {
                                Some(last) => rv = last,
                                None => {
                                    std::thread::sleep(Duration::from_millis(100));
                                    if let Ok(new) = stream.list(&client, false) {
                                        rv = new;
                                    }
                                }
                            }
                        }
                    })
                    .expect("spawning a recorder thread"),
            );
        }
        for _ in RESOURCES {
            ready_rx
                .recv_timeout(Duration::from_secs(120))
                .expect("the recorder's initial lists");
        }
        Recorder {
            stop,
            _threads: threads,
            events,
        }
    }

    /// The events so far.
    pub fn events(&self) -> Vec<Event> {
        self.events.lock().unwrap().clone()
    }

    /// When the last pod-template change was seen, if any.
    pub fn last_template_change(&self) -> Option<Instant> {
        self.events
            .lock()
            .unwrap()
            .iter()
            .rev()
            .find(|e| e.what == What::TemplateChanged)
            .map(|e| e.at)
    }

    /// How many pod-template changes were seen so far.
    pub fn template_changes(&self) -> usize {
        self.events
            .lock()
            .unwrap()
            .iter()
            .filter(|e| e.what == What::TemplateChanged)
            .count()
    }

    /// Waits until no pod template changed for `quiet` (at most `max`).
    pub fn wait_quiet(&self, quiet: Duration, max: Duration) {
        let started = Instant::now();
        while started.elapsed() < max {
            let last = self.last_template_change().unwrap_or(started).max(started);
            if last.elapsed() >= quiet {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Stops and returns everything recorded. The threads are not waited for: one
    /// blocked on a quiet watch ends when the server closes it (60 s).
    pub fn finish(self) -> Vec<Event> {
        self.stop.store(true, Ordering::Relaxed);
        self.events()
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}
