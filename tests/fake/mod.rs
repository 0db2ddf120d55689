//! A fake Kubernetes API server for integration tests: real HTTP/1.1 on 127.0.0.1, one
//! store with a global resourceVersion, list/watch/patch/delete/eviction with the wire
//! behaviour of the recordings in ../shared/k8s-wire, a simulated workload controller,
//! and injectable faults. `FakeApi` is the handle tests hold.
#![allow(dead_code)]

pub mod access;
pub mod api;
pub mod base64;
pub mod client;
pub mod clock;
pub mod controller;
pub mod eviction;
pub mod faults;
pub mod gzip;
pub mod http;
pub mod ids;
pub mod list;
pub mod managed;
pub mod patch;
pub mod resources;
pub mod selector;
pub mod server;
pub mod state;
pub mod status;
pub mod store;
pub mod tls;
pub mod validate;
pub mod watch;
pub mod write;

#[cfg(test)]
mod tests;

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use serde_json::Value;

pub use controller::CRASHING_VALUE;
pub use faults::Fault;
pub use http::Request;

use resources::{route, ResourceType};
use server::Shared;
use state::State;
use store::{name_of, namespace_of};

/// A running fake API server. Dropping it stops the server and ends open watches.
pub struct FakeApi {
    shared: Arc<Shared>,
    address: SocketAddr,
    /// `http`, or `https` when it terminates TLS.
    scheme: &'static str,
    threads: Vec<JoinHandle<()>>,
}

impl FakeApi {
    /// Binds 127.0.0.1 on a free port and starts serving.
    pub fn start() -> FakeApi {
        FakeApi::serve(None)
    }

    /// The same fake serving HTTPS with the fixture certificate (tests/fixtures/tls, for
    /// 127.0.0.1; its CA is `ca.crt`), terminated in the fake as a real API server does.
    pub fn start_tls() -> FakeApi {
        FakeApi::serve(Some(tls::server_config()))
    }

    fn serve(tls: Option<Arc<rustls::ServerConfig>>) -> FakeApi {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let address = listener.local_addr().expect("local address");
        let shared = Arc::new(Shared::new());
        let scheme = if tls.is_some() { "https" } else { "http" };
        let accept = {
            let shared = Arc::clone(&shared);
            thread::spawn(move || server::accept_loop(shared, listener, tls))
        };
        let ticker = {
            let shared = Arc::clone(&shared);
            thread::spawn(move || server::tick_loop(shared))
        };
        FakeApi {
            shared,
            address,
            scheme,
            threads: vec![accept, ticker],
        }
    }

    /// `http://127.0.0.1:PORT` (`https://` from [`FakeApi::start_tls`])
    pub fn url(&self) -> String {
        format!("{}://{}", self.scheme, self.address)
    }

    /// Runs `f` on the state, then wakes the watches.
    fn with_state<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        let mut state = self.shared.lock();
        let result = f(&mut state);
        drop(state);
        self.shared.notify();
        result
    }

    fn resource_type(state: &State, plural: &str) -> ResourceType {
        state
            .find_type(plural)
            .unwrap_or_else(|| panic!("the fake API server does not serve {plural:?}"))
    }

    /// Creates or replaces an object (by apiVersion+kind+namespace+name) as a user with
    /// kubectl would: uid, resourceVersion, creationTimestamp and generation are filled in,
    /// Secret `stringData` is folded into `data`, a missing namespace is created. Unlike the
    /// HTTP API this also writes `status` when given (a test's stand-in for other
    /// controllers); PDBs count as processed by the disruption controller at once.
    /// Returns the object as stored now (after the simulated controllers reacted).
    pub fn apply(&self, object: Value) -> Value {
        self.with_state(|state| {
            let (resource, namespace, stored) = apply_to(state, object);
            let name = name_of(&stored).to_string();
            state.get(&resource, &namespace, &name).unwrap_or(stored)
        })
    }

    /// `apply` for many objects under one lock, without returning them: how a benchmark
    /// loads a large cluster quickly. Each object is stored exactly as `apply` stores it.
    pub fn apply_all(&self, objects: impl IntoIterator<Item = Value>) {
        self.with_state(|state| {
            for object in objects {
                apply_to(state, object);
            }
        })
    }

    /// RFC 7386 merge patch of an object (status included), through the same store.
    /// Panics when the object does not exist.
    pub fn merge_patch(&self, resource: &str, ns: &str, name: &str, patch: Value) -> Value {
        self.with_state(|state| {
            let resource = Self::resource_type(state, resource);
            let old = state.get(&resource, ns, name).unwrap_or_else(|| {
                panic!(
                    "merge_patch: {} {ns}/{name} does not exist",
                    resource.plural
                )
            });
            let patched = patch::merge_patch(&old, &patch);
            let processed = resource.plural == "poddisruptionbudgets"
                && patch.pointer("/status/observedGeneration").is_none();
            let stored = state.update(&resource, &old, patched);
            if processed {
                mark_pdb_processed(state, &resource, &stored);
            }
            state.get(&resource, ns, name).unwrap_or(stored)
        })
    }

    /// Deletes an object (pods: MODIFIED with deletionTimestamp, then DELETED).
    pub fn delete(&self, resource: &str, ns: &str, name: &str) -> bool {
        self.with_state(|state| {
            let resource = Self::resource_type(state, resource);
            state.delete(&resource, ns, name).is_some()
        })
    }

    pub fn get(&self, resource: &str, ns: &str, name: &str) -> Option<Value> {
        self.with_state(|state| {
            let resource = Self::resource_type(state, resource);
            state.get(&resource, ns, name)
        })
    }

    /// Objects of a type (with kind/apiVersion), sorted by namespace/name.
    pub fn list(&self, resource: &str, ns: Option<&str>) -> Vec<Value> {
        self.with_state(|state| {
            let resource = Self::resource_type(state, resource);
            state.list(&resource, ns)
        })
    }

    /// Pods of a namespace.
    pub fn pods(&self, ns: &str) -> Vec<Value> {
        self.list("pods", Some(ns))
    }

    /// Serves a namespaced custom resource, e.g. ("argoproj.io", "v1alpha1", "rollouts",
    /// "Rollout"). Custom resources take merge and JSON patches and answer strategic merge
    /// patches with 415, like the real server.
    pub fn register_resource(&self, group: &str, version: &str, plural: &str, kind: &str) {
        self.with_state(|state| {
            let custom = ResourceType::custom(group, version, plural, kind);
            if !state.types.contains(&custom) {
                state.types.push(custom);
            }
        })
    }

    /// Serves the resources of a `CustomResourceDefinition` read from a YAML file (e.g.
    /// the Secrets Store CSI driver's, in ../shared/third-party), every served version, with
    /// the scope and status subresource it declares.
    pub fn install_crd(&self, path: &std::path::Path) {
        let text = std::fs::read_to_string(path)
            .unwrap_or_else(|e| panic!("reading CRD {}: {e}", path.display()));
        let crd = wavelet::client::yaml::parse(&text)
            .unwrap_or_else(|e| panic!("CRD {}: {e}", path.display()));
        assert_eq!(
            crd["kind"],
            "CustomResourceDefinition",
            "{}",
            path.display()
        );
        self.with_state(|state| {
            for served in ResourceType::from_crd(&crd) {
                if !state.types.contains(&served) {
                    state.types.push(served);
                }
            }
        })
    }

    /// Every request received, in arrival order (including rejected ones).
    pub fn requests(&self) -> Vec<Request> {
        self.shared.lock().requests.clone()
    }

    /// The requests the `wavelet` binary sent, in RBAC terms (see `access`).
    pub fn accesses(&self) -> Vec<access::Access> {
        let state = self.shared.lock();
        state
            .requests
            .iter()
            .filter_map(|r| access::access(&state.types, r))
            .collect()
    }

    /// Requests received so far (cheaper than `requests().len()`).
    pub fn request_count(&self) -> usize {
        self.shared.lock().requests.len()
    }

    /// Requests received so far, and how many of those after the first `skip` are
    /// `counted` (nothing copied).
    pub fn count_since(&self, skip: usize, counted: impl Fn(&Request) -> bool) -> (usize, usize) {
        let state = self.shared.lock();
        let matching = state
            .requests
            .iter()
            .skip(skip)
            .filter(|r| counted(r))
            .count();
        (state.requests.len(), matching)
    }

    /// Requests received after the first `skip`.
    pub fn requests_since(&self, skip: usize) -> Vec<Request> {
        self.shared
            .lock()
            .requests
            .iter()
            .skip(skip)
            .cloned()
            .collect()
    }

    pub fn clear_requests(&self) {
        self.shared.lock().requests.clear();
    }

    /// PATCH requests addressed to this object, successful or not.
    pub fn patches(&self, resource: &str, ns: &str, name: &str) -> Vec<Request> {
        let state = self.shared.lock();
        state
            .requests
            .iter()
            .filter(|r| r.method == "PATCH")
            .filter(|r| {
                route(&state.types, &r.path).is_some_and(|route| {
                    route.resource.plural == resource
                        && route.namespace.as_deref().unwrap_or("") == ns
                        && route.name.as_deref() == Some(name)
                        && route.subresource.is_none()
                })
            })
            .cloned()
            .collect()
    }

    /// How many distinct pod templates the simulated controller has rolled out for this
    /// workload: 1 after creation, +1 per `spec.template` change; 0 if never seen.
    pub fn revisions(&self, resource: &str, ns: &str, name: &str) -> u64 {
        let state = self.shared.lock();
        let key = Self::resource_type(&state, resource).key;
        state.controller.revisions(&key, ns, name)
    }

    /// core/v1 Events about `name` (involvedObject.name) and events.k8s.io/v1 Events
    /// (regarding.name) in a namespace.
    pub fn events_for(&self, ns: &str, name: &str) -> Vec<Value> {
        let state = self.shared.lock();
        let about = |event: &Value, reference: &str| {
            event
                .pointer(&format!("/{reference}/name"))
                .and_then(Value::as_str)
                == Some(name)
        };
        state
            .types
            .iter()
            .filter(|t| t.plural == "events")
            .flat_map(|t| state.list(t, Some(ns)))
            .filter(|e| about(e, "involvedObject") || about(e, "regarding"))
            .collect()
    }

    /// Polls `cond` every ~10 ms until it holds or the timeout passes.
    pub fn wait_until(&self, timeout: Duration, mut cond: impl FnMut(&FakeApi) -> bool) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if cond(self) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// Queues a fault; the next matching request or watch event consumes it.
    pub fn inject(&self, fault: Fault) {
        self.with_state(|state| state.faults.push(fault));
    }

    /// `Some(t)`: requests without `Authorization: Bearer t` get 401. `None`: no auth.
    pub fn require_token(&self, token: Option<&str>) {
        self.with_state(|state| state.token = token.map(str::to_string));
    }

    /// Drops the watch history and list snapshots: watches from an older RV get 200 + ERROR
    /// 410, and outstanding continue tokens expire (410 with a fresh token).
    pub fn compact(&self) {
        self.with_state(|state| state.store.compact());
    }

    /// Ends the faults: queued ones are dropped and stalled watches resume at once.
    pub fn heal(&self) {
        self.with_state(|state| {
            state.faults.clear();
            state.heal_generation += 1;
        });
    }

    /// The current (global) resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.shared.lock().store.current_rv()
    }

    /// How many injected faults have not been consumed yet.
    pub fn pending_faults(&self) -> usize {
        self.shared.lock().faults.len()
    }

    /// An API server restart, as clients see it: every open connection (watches included)
    /// is dropped without a terminating chunk, and the new server's watch cache starts at
    /// the current RV, so watches and continue tokens from before get 410 Expired. The
    /// objects stay (they live in etcd). A request still held by a `Slow` fault (not yet
    /// applied) dies with the old server: it is never applied.
    pub fn restart(&self) {
        self.with_state(|state| {
            state.store.compact();
            state.restart_generation += 1;
        });
        self.shared.close_connections();
    }

    /// Turns the `WatchList` feature gate off, as on kube-apiserver 1.33: streaming lists
    /// (`sendInitialEvents`) get 422.
    pub fn disable_watch_list(&self) {
        self.with_state(|state| state.watch_list_disabled = true);
    }

    /// Sends a BOOKMARK at the current RV to every open watch that allowed bookmarks.
    pub fn bookmark(&self) {
        self.with_state(|state| state.bookmark_generation += 1);
    }

    /// Ends every open watch cleanly (terminating chunk), as at `timeoutSeconds`.
    pub fn close_watches(&self) {
        self.with_state(|state| state.close_generation += 1);
    }

    /// How many watches of this resource are open.
    pub fn open_watches(&self, resource: &str) -> usize {
        self.shared
            .lock()
            .watches
            .values()
            .filter(|w| w.resource == resource)
            .count()
    }

    /// How long pods made by ReplicaSets stay Pending before turning Running and Ready
    /// (default zero: at once).
    pub fn set_ready_delay(&self, delay: Duration) {
        self.with_state(|state| state.controller.ready_delay = delay);
    }

    /// The kubelet starts every Pod still waiting for its ready delay now: they turn
    /// Running and Ready (Pods created later still wait for the delay).
    pub fn make_pending_pods_ready(&self) {
        self.with_state(|state| {
            state.controller.ready_delay_passed();
            state.tick(Instant::now());
        });
    }
}

/// What `apply` does under the lock: returns the type, the namespace and the object as
/// written (before the simulated controllers' follow-up writes).
fn apply_to(state: &mut State, mut object: Value) -> (ResourceType, String, Value) {
    let api_version = object["apiVersion"].as_str().unwrap_or("");
    let kind = object["kind"].as_str().unwrap_or("");
    let resource = state.type_of_kind(api_version, kind).unwrap_or_else(|| {
        panic!("apply: the fake API server does not serve {api_version} {kind}")
    });
    let namespace = if resource.namespaced {
        let namespace = match namespace_of(&object) {
            "" => "default".to_string(),
            namespace => namespace.to_string(),
        };
        object["metadata"]["namespace"] = namespace.clone().into();
        state.ensure_namespace(&namespace);
        namespace
    } else {
        String::new()
    };
    let name = name_of(&object).to_string();
    let processed_by_disruption_controller = resource.plural == "poddisruptionbudgets"
        && object.pointer("/status/observedGeneration").is_none();
    let stored = match state.get(&resource, &namespace, &name) {
        Some(old) => {
            if object.get("status").is_none() {
                if let Some(status) = old.get("status") {
                    object["status"] = status.clone();
                }
            }
            state.update(&resource, &old, object)
        }
        None => state.create(&resource, object),
    };
    if processed_by_disruption_controller {
        mark_pdb_processed(state, &resource, &stored);
    }
    (resource, namespace, stored)
}

/// The fake's disruption controller: a PDB written by a test counts as processed.
fn mark_pdb_processed(state: &mut State, resource: &ResourceType, pdb: &Value) {
    let Some(current) = state.get(resource, namespace_of(pdb), name_of(pdb)) else {
        return;
    };
    let mut processed = current.clone();
    processed["status"]["observedGeneration"] = current["metadata"]["generation"].clone();
    state.update_status(resource, &current, processed);
}

impl Drop for FakeApi {
    fn drop(&mut self) {
        self.shared.lock().shutdown = true;
        self.shared.notify();
        self.shared.close_connections();
        // Wake the accept loop so it sees the shutdown.
        let _ = TcpStream::connect(self.address);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}
