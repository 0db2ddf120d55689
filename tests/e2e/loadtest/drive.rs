//! Playing a scenario against a real API server: create its namespaces and objects and
//! wait until its workloads are ready (the kubelet stand-in plays their Pods); play its
//! lanes (Reloader's goroutines) on their tickers, holding them while the controller
//! stops and starts, so that every change is made while the controller is either up or
//! down; delete it all afterwards.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use wavelet::client::{Client, Shape};

use super::scenarios::{is_workload, Action, Scenario, Step};

/// What one played step did.
#[derive(Clone, Debug)]
pub struct Performed {
    pub did: Did,
    pub kind: &'static str,
    pub ns: String,
    pub name: String,
    /// The write was sent (after the Get that precedes an update).
    pub sent: Instant,
    /// Its response arrived.
    pub done: Instant,
    pub ok: bool,
    /// Of the object the write returned.
    pub resource_version: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Did {
    SetData,
    Annotate,
    Create,
    Delete,
}

/// One restart of the controller (S6).
#[derive(Clone, Copy, Debug)]
pub struct Restarted {
    /// The controller was asked to stop (the lanes held first).
    pub stopping: Instant,
    /// It had exited; the lanes went on.
    pub down: Instant,
    /// It was started again (the lanes held first).
    pub starting: Instant,
    /// It was ready; the lanes went on.
    pub ready: Instant,
}

/// Everything a play did.
#[derive(Clone, Debug)]
pub struct Played {
    pub began: Instant,
    pub ended: Instant,
    pub performed: Vec<Performed>,
    pub restarts: Vec<Restarted>,
}

impl Played {
    /// Successful data updates of ConfigMaps and of Secrets.
    pub fn data_updates(&self) -> (usize, usize) {
        let ok = |kind| {
            self.performed
                .iter()
                .filter(|p| p.ok && p.did == Did::SetData && p.kind == kind)
                .count()
        };
        (ok("ConfigMap"), ok("Secret"))
    }

    pub fn count(&self, did: Did) -> usize {
        self.performed
            .iter()
            .filter(|p| p.ok && p.did == did)
            .count()
    }
}

/// What the controller is asked to do during a play.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Control {
    /// Stop (SIGTERM) and return once it has exited.
    Stop,
    /// Start and return once it is ready.
    Start,
}

/// The collection a namespaced object of `kind` is created in.
pub fn collection(kind: &str, ns: &str) -> String {
    let (prefix, plural) = match kind {
        "ConfigMap" => ("/api/v1", "configmaps"),
        "Secret" => ("/api/v1", "secrets"),
        "Deployment" => ("/apis/apps/v1", "deployments"),
        "StatefulSet" => ("/apis/apps/v1", "statefulsets"),
        "DaemonSet" => ("/apis/apps/v1", "daemonsets"),
        other => panic!("no collection for kind {other}"),
    };
    format!("{prefix}/namespaces/{ns}/{plural}")
}

fn name_of(object: &Value) -> (&str, &str) {
    (
        object["metadata"]["namespace"].as_str().unwrap_or_default(),
        object["metadata"]["name"].as_str().unwrap_or_default(),
    )
}

fn poll(timeout: Duration, what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !done() {
        assert!(
            Instant::now() < deadline,
            "loadtest: timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Creates a namespace labelled as the suite's (the e2e kubelet serves those) and waits
/// for its `default` ServiceAccount; one left over from an earlier run is waited out.
pub fn create_namespace(client: &Client, ns: &str) {
    let body = json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": ns, "labels": {"wavelet-e2e": "true", "wavelet-loadtest": "true"}}});
    poll(
        Duration::from_secs(180),
        &format!("namespace {ns} to be created"),
        || match client.post::<Value>("/api/v1/namespaces", &body) {
            Ok(_) => true,
            Err(e) if e.status().is_some_and(|s| s.is_conflict()) => false,
            Err(e) => panic!("creating namespace {ns}: {e}"),
        },
    );
    poll(
        Duration::from_secs(60),
        &format!("ServiceAccount {ns}/default"),
        || {
            client
                .get::<Value>(&format!("/api/v1/namespaces/{ns}/serviceaccounts/default"))
                .is_ok()
        },
    );
}

/// Creates objects with a few threads of POSTs, in order within each thread's share
/// (ConfigMaps and Secrets come before the workloads in `objects`, and all of them are
/// created before any workload).
pub fn create_all(client: &Client, objects: &[Value]) {
    let split = objects.partition_point(|o| !is_workload(o));
    for part in [&objects[..split], &objects[split..]] {
        let next = AtomicUsize::new(0);
        std::thread::scope(|scope| {
            for _ in 0..6 {
                let (next, client) = (&next, client.clone());
                scope.spawn(move || loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(object) = part.get(i) else { return };
                    let (ns, name) = name_of(object);
                    let kind = object["kind"].as_str().unwrap_or_default();
                    match client.post::<serde::de::IgnoredAny>(&collection(kind, ns), object) {
                        Ok(_) => {}
                        Err(e) if e.status().is_some_and(|s| s.is_conflict()) => {}
                        Err(e) => panic!("creating {kind} {ns}/{name}: {e}"),
                    }
                });
            }
        });
    }
}

/// Creates the scenario's namespaces and objects and waits until every workload is
/// ready (Reloader's `waitForDeploymentsReady` and friends).
pub fn set_up(client: &Client, scenario: &Scenario, timeout: Duration) {
    for ns in &scenario.namespaces {
        create_namespace(client, ns);
    }
    create_all(client, &scenario.objects);
    let expected = scenario.workloads().count();
    poll(
        timeout,
        &format!("{} workloads to be ready", expected),
        || ready_workloads(client, scenario) >= expected,
    );
}

/// How many workloads in the scenario's namespaces are ready.
pub fn ready_workloads(client: &Client, scenario: &Scenario) -> usize {
    let mut ready = 0;
    for (kind, path) in [
        ("Deployment", "/apis/apps/v1/deployments"),
        ("StatefulSet", "/apis/apps/v1/statefulsets"),
        ("DaemonSet", "/apis/apps/v1/daemonsets"),
    ] {
        let result = client.list(path, Shape::Whole, &mut |o: Value| {
            let ns = o["metadata"]["namespace"].as_str().unwrap_or_default();
            if !scenario.namespaces.iter().any(|n| n == ns) {
                return;
            }
            let status = &o["status"];
            let is_ready = match kind {
                "DaemonSet" => {
                    let desired = status["desiredNumberScheduled"].as_u64().unwrap_or(0);
                    desired > 0 && status["numberReady"].as_u64().unwrap_or(0) >= desired
                }
                _ => {
                    status["readyReplicas"].as_u64().unwrap_or(0)
                        >= o["spec"]["replicas"].as_u64().unwrap_or(1)
                }
            };
            ready += usize::from(is_ready);
        });
        if result.is_err() {
            return 0;
        }
    }
    ready
}

/// Deletes the scenario's namespaces; with `wait`, returns once they are gone.
pub fn tear_down(client: &Client, scenario: &Scenario, wait: Option<Duration>) {
    for ns in &scenario.namespaces {
        let _ = client.delete::<Value>(&format!("/api/v1/namespaces/{ns}"), None);
    }
    if let Some(timeout) = wait {
        for ns in &scenario.namespaces {
            poll(timeout, &format!("namespace {ns} to be deleted"), || {
                matches!(client.get::<Value>(&format!("/api/v1/namespaces/{ns}")),
                    Err(e) if e.is_not_found())
            });
        }
    }
}

/// The lanes' common clock: holding it stops every lane before its next step (and
/// waits for the steps in flight), and shifts all later steps by the time held.
struct Gate {
    state: Mutex<GateState>,
    changed: Condvar,
}

#[derive(Default)]
struct GateState {
    held_since: Option<Instant>,
    held_before: Duration,
    in_flight: usize,
}

impl GateState {
    fn held_total(&self) -> Duration {
        self.held_before + self.held_since.map_or(Duration::ZERO, |s| s.elapsed())
    }
}

impl Gate {
    fn new() -> Gate {
        Gate {
            state: Mutex::new(GateState::default()),
            changed: Condvar::new(),
        }
    }

    /// Waits until `began + at` (shifted by the time held) and the gate is open, then
    /// counts the caller in flight.
    fn enter(&self, began: Instant, at: Duration) {
        let mut state = self.state.lock().unwrap();
        loop {
            if state.held_since.is_some() {
                state = self.changed.wait(state).unwrap();
                continue;
            }
            let due = began + at + state.held_total();
            let now = Instant::now();
            if now >= due {
                state.in_flight += 1;
                return;
            }
            state = self.changed.wait_timeout(state, due - now).unwrap().0;
        }
    }

    fn leave(&self) {
        self.state.lock().unwrap().in_flight -= 1;
        self.changed.notify_all();
    }

    /// Closes the gate and waits for the steps in flight.
    fn hold(&self) {
        let mut state = self.state.lock().unwrap();
        state.held_since = Some(Instant::now());
        while state.in_flight > 0 {
            state = self.changed.wait(state).unwrap();
        }
    }

    fn release(&self) {
        let mut state = self.state.lock().unwrap();
        if let Some(since) = state.held_since.take() {
            state.held_before += since.elapsed();
        }
        self.changed.notify_all();
    }
}

/// Get + Update as Reloader's harness writes: the object read, changed, and PUT back.
fn update(
    client: &Client,
    kind: &'static str,
    ns: &str,
    name: &str,
    change: impl FnOnce(&mut Value),
) -> Performed {
    let path = format!("{}/{name}", collection(kind, ns));
    let did = Did::SetData;
    match client.get::<Value>(&path) {
        Ok(mut object) => {
            change(&mut object);
            let sent = Instant::now();
            let result = client.put::<Value>(&path, &object);
            let done = Instant::now();
            Performed {
                did,
                kind,
                ns: ns.into(),
                name: name.into(),
                sent,
                done,
                ok: result.is_ok(),
                resource_version: result
                    .ok()
                    .and_then(|o| o["metadata"]["resourceVersion"].as_str().map(String::from)),
            }
        }
        Err(_) => {
            let now = Instant::now();
            Performed {
                did,
                kind,
                ns: ns.into(),
                name: name.into(),
                sent: now,
                done: now,
                ok: false,
                resource_version: None,
            }
        }
    }
}

fn perform(client: &Client, action: &Action) -> Performed {
    match action {
        Action::SetData {
            kind,
            ns,
            name,
            values,
        } => update(client, kind, ns, name, |object| {
            let field = if *kind == "Secret" {
                "stringData"
            } else {
                "data"
            };
            if !object[field].is_object() {
                object[field] = json!({});
            }
            for (k, v) in values {
                object[field][k] = json!(v);
            }
        }),
        Action::Annotate { ns, name, value } => {
            let mut p = update(client, "ConfigMap", ns, name, |object| {
                if !object["metadata"]["annotations"].is_object() {
                    object["metadata"]["annotations"] = json!({});
                }
                object["metadata"]["annotations"]["noop-counter"] = json!(value);
            });
            p.did = Did::Annotate;
            p
        }
        Action::Create(object) => {
            let (ns, name) = name_of(object);
            let kind = object["kind"].as_str().unwrap_or("Deployment");
            let sent = Instant::now();
            let result = client.post::<Value>(&collection(kind, ns), object);
            Performed {
                did: Did::Create,
                kind: "Deployment",
                ns: ns.into(),
                name: name.into(),
                sent,
                done: Instant::now(),
                ok: result.is_ok(),
                resource_version: None,
            }
        }
        Action::Delete { ns, name } => {
            let sent = Instant::now();
            let result =
                client.delete::<Value>(&format!("{}/{name}", collection("Deployment", ns)), None);
            Performed {
                did: Did::Delete,
                kind: "Deployment",
                ns: ns.clone(),
                name: name.clone(),
                sent,
                done: Instant::now(),
                ok: result.is_ok(),
                resource_version: None,
            }
        }
        Action::Restart => unreachable!("restarts are played by the control lane"),
    }
}

/// How long the lanes hold before the controller is stopped, so that what it was doing
/// for the changes before finishes first.
const SETTLE_BEFORE_STOP: Duration = Duration::from_secs(1);

/// Plays the scenario's lanes from now on; `control` stops and starts the controller
/// (S6). Returns once every lane is done.
pub fn play(
    client: &Client,
    scenario: &Scenario,
    downtime: Duration,
    control: &mut dyn FnMut(Control),
) -> Played {
    let gate = Gate::new();
    let began = Instant::now();
    let performed = Mutex::new(Vec::new());
    let (control_steps, data_lanes): (Vec<&Vec<Step>>, Vec<&Vec<Step>>) = scenario
        .lanes
        .iter()
        .partition(|lane| lane.iter().any(|s| matches!(s.action, Action::Restart)));
    let mut restarts = Vec::new();
    std::thread::scope(|scope| {
        for lane in data_lanes {
            let (gate, performed, client) = (&gate, &performed, client.clone());
            scope.spawn(move || {
                let mut mine = Vec::with_capacity(lane.len());
                for step in lane {
                    gate.enter(began, step.at);
                    mine.push(perform(&client, &step.action));
                    gate.leave();
                }
                performed.lock().unwrap().extend(mine);
            });
        }
        for step in control_steps.into_iter().flatten() {
            gate.enter(began, step.at);
            gate.leave();
            gate.hold();
            std::thread::sleep(SETTLE_BEFORE_STOP);
            let stopping = Instant::now();
            control(Control::Stop);
            let down = Instant::now();
            gate.release();
            std::thread::sleep(downtime);
            gate.hold();
            let starting = Instant::now();
            control(Control::Start);
            let ready = Instant::now();
            gate.release();
            restarts.push(Restarted {
                stopping,
                down,
                starting,
                ready,
            });
        }
    });
    let mut performed = performed.into_inner().unwrap();
    performed.sort_by_key(|p| p.sent);
    Played {
        began,
        ended: Instant::now(),
        performed,
        restarts,
    }
}

/// The workloads a scenario creates while it plays (S5).
pub fn created_workloads(scenario: &Scenario) -> Vec<Value> {
    scenario
        .lanes
        .iter()
        .flatten()
        .filter_map(|s| match &s.action {
            Action::Create(o) => Some(o.clone()),
            _ => None,
        })
        .collect()
}
