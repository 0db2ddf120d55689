//! The configuration a soak run plays with, what it did to it, and what wavelet must have
//! made of it: ConfigMaps and Secrets, the opted-in workloads that reference them (with the
//! number of times each one's configuration changed), and the delete-mode objects (with
//! the Pods each of their data changes owes a replacement). Now and then an edit writes a
//! crashing value (the fake's Pods that read it never get Ready), so a shared change's
//! waves hold; a later edit of that object supersedes the hold.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::fake::{FakeApi, CRASHING_VALUE};
use crate::util::{expected_hash, pod_replacements, workload};

use super::rng::Rng;

pub const NAMESPACES: &[&str] = &["soak-a", "soak-b"];
pub const STATE_NS: &str = "wavelet-system";
const HASH: &str = "wavelet.dev/config-hash";
const OPT_IN: &str = "wavelet.dev/update-on-config-change";
const CONFIGS_PER_KIND: usize = 3;
const INITIAL_WORKLOADS: usize = 6;
const MAX_WORKLOADS: usize = 14;
const DELETE_MODE_REPLICAS: u64 = 2;
/// How often (percent) a data edit writes the crashing value.
const CRASH_PERCENT: u64 = 5;
/// How long a crashing value stays before an edit may fix it: past the soak's
/// `--rollout-timeout`, so that the fan-out of the crashing change holds first.
const CRASH_KEPT: Duration = Duration::from_secs(15);
/// The keys of wavelet's fan-out records and urgent grants in `wavelet-state`.
const FAN_OUT_PREFIXES: [&str; 2] = ["fanout.", "urgent."];

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    ConfigMap,
    Secret,
}

impl Kind {
    fn plural(self) -> &'static str {
        match self {
            Kind::ConfigMap => "configmaps",
            Kind::Secret => "secrets",
        }
    }

    fn state_prefix(self) -> &'static str {
        match self {
            Kind::ConfigMap => "configmap",
            Kind::Secret => "secret",
        }
    }
}

/// A ConfigMap or Secret (keys `k0`, `k1`, sometimes `k2`).
struct Config {
    kind: Kind,
    namespace: String,
    name: String,
    exists: bool,
    /// When an edit wrote the crashing value into it, and into which key, until a later
    /// edit fixes that key (or the object is re-created).
    crashing: Option<(Instant, &'static str)>,
}

impl Config {
    /// Whether the run leaves it crashing for now: long enough that the fan-out of the
    /// crashing change holds (`--rollout-timeout`) before an edit fixes it.
    fn left_crashing(&self) -> bool {
        self.crashing
            .is_some_and(|(since, _)| since.elapsed() < CRASH_KEPT)
    }

    fn id(&self) -> String {
        format!("{} {}/{}", self.kind.plural(), self.namespace, self.name)
    }
}

/// A workload that opts in (or has opted out) of hash mode.
struct Workload {
    plural: &'static str,
    namespace: String,
    name: String,
    opted_in: bool,
    /// How often the hash of its configuration changed since it was created.
    changes: u64,
    expected: String,
}

impl Workload {
    fn id(&self) -> String {
        format!("{} {}/{}", self.plural, self.namespace, self.name)
    }
}

/// A ConfigMap or Secret in delete mode, and the Deployment whose Pods it selects.
struct DeleteMode {
    kind: Kind,
    namespace: String,
    name: String,
    app: String,
    /// Pods that some data change of this object owes a replacement (by name).
    owed: BTreeSet<String>,
    changes: u64,
}

impl DeleteMode {
    fn id(&self) -> String {
        format!("{} {}/{}", self.kind.plural(), self.namespace, self.name)
    }
}

/// A label-only edit of a ConfigMap/Secret: nothing may roll or be replaced for it.
fn touch_labels(fake: &FakeApi, kind: Kind, namespace: &str, name: &str, label: String) {
    let patch = json!({"metadata": {"labels": {"touched": label}}});
    fake.merge_patch(kind.plural(), namespace, name, patch);
}

pub struct World {
    configs: Vec<Config>,
    workloads: Vec<Workload>,
    delete_mode: Vec<DeleteMode>,
    log: Vec<String>,
    /// ConfigMaps/Secrets that held the crashing value at some time (by id).
    crashed: BTreeSet<String>,
    /// Every hold seen in `wavelet-state`: (key, record) as first seen.
    holds: BTreeSet<(String, String)>,
    /// Every fan-out seen in `wavelet-state`: (key, data hash) → the most waves released.
    fan_outs: BTreeMap<(String, String), usize>,
    crash_edits: usize,
    started: Instant,
    next_value: u64,
    pub actions: usize,
}

fn data(kind: Kind, values: &[(&str, String)]) -> Value {
    let map: BTreeMap<String, String> = values
        .iter()
        .map(|(k, v)| {
            let v = match kind {
                Kind::ConfigMap => v.clone(),
                Kind::Secret => wavelet::objects::base64::encode(v.as_bytes()),
            };
            (k.to_string(), v)
        })
        .collect();
    json!(map)
}

fn config_object(kind: Kind, namespace: &str, name: &str, data: Value) -> Value {
    let mut object = json!({
        "apiVersion": "v1",
        "metadata": {"name": name, "namespace": namespace},
        "data": data,
    });
    match kind {
        Kind::ConfigMap => object["kind"] = "ConfigMap".into(),
        Kind::Secret => {
            object["kind"] = "Secret".into();
            object["type"] = "Opaque".into();
        }
    }
    object
}

/// Pods of `namespace` labelled `app`, not terminating, by name.
fn live_pods(fake: &FakeApi, namespace: &str, app: &str) -> BTreeSet<String> {
    fake.pods(namespace)
        .iter()
        .filter(|p| {
            p["metadata"]["labels"]["app"] == app && p["metadata"]["deletionTimestamp"].is_null()
        })
        .filter_map(|p| p["metadata"]["name"].as_str().map(String::from))
        .collect()
}

fn all_pods(fake: &FakeApi, namespace: &str) -> BTreeSet<String> {
    fake.pods(namespace)
        .iter()
        .filter_map(|p| p["metadata"]["name"].as_str().map(String::from))
        .collect()
}

impl World {
    /// Creates the namespaces, configuration, workloads and delete-mode objects.
    pub fn create(fake: &FakeApi, rng: &mut Rng) -> World {
        let mut world = World {
            configs: Vec::new(),
            workloads: Vec::new(),
            delete_mode: Vec::new(),
            log: Vec::new(),
            crashed: BTreeSet::new(),
            holds: BTreeSet::new(),
            fan_outs: BTreeMap::new(),
            crash_edits: 0,
            started: Instant::now(),
            next_value: 0,
            actions: 0,
        };
        fake.apply(
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": STATE_NS}}),
        );
        for namespace in NAMESPACES {
            for kind in [Kind::ConfigMap, Kind::Secret] {
                for n in 0..CONFIGS_PER_KIND {
                    let prefix = if kind == Kind::ConfigMap { "cm" } else { "sec" };
                    world.configs.push(Config {
                        kind,
                        namespace: namespace.to_string(),
                        name: format!("{prefix}-{n}"),
                        exists: false,
                        crashing: None,
                    });
                    let index = world.configs.len() - 1;
                    world.recreate(fake, index);
                }
            }
        }
        for _ in 0..INITIAL_WORKLOADS {
            world.new_workload(fake, rng);
        }
        let delete_mode = [
            (
                "soak-a",
                Kind::ConfigMap,
                "dm-a",
                "magalix.com/podDeleteMatch",
                "app=dm-a",
                "evict",
            ),
            (
                "soak-b",
                Kind::Secret,
                "dm-b",
                "wavelet.dev/pod-delete-match",
                "app in (dm-b)",
                "delete",
            ),
            (
                "soak-a",
                Kind::Secret,
                "dm-c",
                "magalix.com/podDeleteMatch",
                "app=dm-c",
                "rolling",
            ),
        ];
        for (namespace, kind, name, annotation, selector, strategy) in delete_mode {
            fake.apply(json!({
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {
                    "replicas": DELETE_MODE_REPLICAS,
                    "selector": {"matchLabels": {"app": name}},
                    "template": {"metadata": {"labels": {"app": name}},
                                 "spec": {"containers": [{"name": "app", "image": "nginx"}]}},
                }
            }));
            let mut object =
                config_object(kind, namespace, name, data(kind, &[("k0", "v0".into())]));
            object["metadata"]["annotations"] = json!({
                annotation: selector, "wavelet.dev/pod-delete-strategy": strategy,
            });
            fake.apply(object);
            world.delete_mode.push(DeleteMode {
                kind,
                namespace: namespace.into(),
                name: name.into(),
                app: name.into(),
                owed: BTreeSet::new(),
                changes: 0,
            });
        }
        world.refresh(fake);
        world
    }

    /// Adds a line to the run's log.
    pub fn note(&mut self, line: impl AsRef<str>) {
        let at = self.started.elapsed().as_secs_f64();
        self.log.push(format!("[{at:8.3}s] {}", line.as_ref()));
    }

    /// The log lines that name `namespace/name`, the last `max` of them.
    pub fn log_about(&self, namespaced_name: &str, max: usize) -> String {
        let lines: Vec<&String> = self
            .log
            .iter()
            .filter(|l| super::mentions(l, namespaced_name))
            .collect();
        let skip = lines.len().saturating_sub(max);
        lines[skip..].iter().map(|l| format!("  {l}\n")).collect()
    }

    pub fn full_log(&self) -> String {
        self.log.join("\n")
    }

    fn fresh_value(&mut self) -> String {
        self.next_value += 1;
        format!("v{}", self.next_value)
    }

    fn recreate(&mut self, fake: &FakeApi, index: usize) {
        let (a, b) = (self.fresh_value(), self.fresh_value());
        let config = &mut self.configs[index];
        let values = [("k0", a), ("k1", b)];
        fake.apply(config_object(
            config.kind,
            &config.namespace,
            &config.name,
            data(config.kind, &values),
        ));
        config.exists = true;
        let id = config.id();
        self.note(format!("create {id}"));
    }

    /// A pod spec referencing 1 to 3 configs of `namespace` in the ways the spec lists.
    fn pod_spec(&self, namespace: &str, rng: &mut Rng) -> Value {
        let candidates: Vec<&Config> = self
            .configs
            .iter()
            .filter(|c| c.namespace == namespace)
            .collect();
        let mut volumes = Vec::new();
        let mut env = Vec::new();
        let mut env_from = Vec::new();
        for i in 0..1 + rng.below(3) {
            let config = *rng.pick(&candidates);
            let optional = rng.chance(25);
            let (name, kind) = (config.name.as_str(), config.kind);
            let key = *rng.pick(&["k0", "k1"]);
            match (rng.below(4), kind) {
                (0, Kind::ConfigMap) => volumes.push(
                    json!({"name": format!("v{i}"), "configMap": {"name": name, "optional": optional}}),
                ),
                (0, Kind::Secret) => volumes.push(
                    json!({"name": format!("v{i}"), "secret": {"secretName": name, "optional": optional}}),
                ),
                (1, _) => {
                    let source = if kind == Kind::ConfigMap { "configMap" } else { "secret" };
                    volumes.push(json!({"name": format!("v{i}"), "projected": {"sources": [
                        {source: {"name": name, "items": [{"key": key, "path": key}], "optional": optional}}
                    ]}}));
                }
                (2, _) => {
                    let source = if kind == Kind::ConfigMap { "configMapKeyRef" } else { "secretKeyRef" };
                    env.push(json!({"name": format!("E{i}"), "valueFrom": {source: {"name": name, "key": key, "optional": optional}}}));
                }
                _ => {
                    let source = if kind == Kind::ConfigMap { "configMapRef" } else { "secretRef" };
                    env_from.push(json!({source: {"name": name, "optional": optional}}));
                }
            }
        }
        let container = json!({"name": "app", "image": "nginx", "env": env, "envFrom": env_from});
        let mut spec = json!({"containers": [container], "volumes": volumes});
        if rng.chance(30) {
            // The same references from an init container count too.
            spec["initContainers"] = json!([{"name": "init", "image": "busybox",
                "envFrom": spec["containers"][0]["envFrom"].clone()}]);
        }
        spec
    }

    fn new_workload(&mut self, fake: &FakeApi, rng: &mut Rng) {
        let namespace = rng.pick(NAMESPACES).to_string();
        let kind = *rng.pick(&["Deployment", "StatefulSet", "DaemonSet"]);
        let name = format!("w{}", self.workloads.len());
        let spec = self.pod_spec(&namespace, rng);
        fake.apply(workload(
            kind,
            &namespace,
            &name,
            json!({OPT_IN: "true"}),
            spec,
        ));
        let plural = crate::util::plural(kind);
        let expected = expected_hash(fake, plural, &namespace, &name);
        self.workloads.push(Workload {
            plural,
            namespace,
            name,
            opted_in: true,
            changes: 0,
            expected,
        });
        let id = self.workloads.last().unwrap().id();
        self.note(format!("create {id} (opted in)"));
    }

    /// Recomputes every workload's expected hash; each change of it is one configuration
    /// change that may justify one more revision.
    fn refresh(&mut self, fake: &FakeApi) {
        let mut changed = Vec::new();
        for w in &mut self.workloads {
            let now = expected_hash(fake, w.plural, &w.namespace, &w.name);
            if now != w.expected {
                w.changes += 1;
                w.expected = now;
                changed.push(format!(
                    "  config of {} changed ({} changes)",
                    w.id(),
                    w.changes
                ));
            }
        }
        for line in changed {
            self.note(line);
        }
    }

    /// Whether a delete-mode object may change its data now: every Pod owed a replacement
    /// is gone, its Deployment has all its Pods again, and wavelet has recorded the end of
    /// the replacement. Changing it sooner would blur which Pods a change owes.
    fn settled(&self, fake: &FakeApi, dm: &DeleteMode) -> bool {
        let present = all_pods(fake, &dm.namespace);
        dm.owed.iter().all(|p| !present.contains(p))
            && live_pods(fake, &dm.namespace, &dm.app).len() == DELETE_MODE_REPLICAS as usize
            && state_entry(fake, dm).is_some_and(|e| !e.contains("replacing"))
    }

    /// One random change of the configuration.
    pub fn act(&mut self, fake: &FakeApi, rng: &mut Rng) {
        self.actions += 1;
        match rng.weighted(&[30, 8, 6, 6, 3, 6, 8, 5]) {
            0 => {
                let index = rng.below(self.configs.len() as u64) as usize;
                if self.configs[index].left_crashing() {
                    return;
                }
                if !self.configs[index].exists {
                    // A change like any other: refreshed below, not lumped in with the next
                    // action's (wavelet rolls for each one apart by more than --debounce).
                    self.recreate(fake, index);
                    return self.refresh(fake);
                }
                let value = self.fresh_value();
                let crash = rng.chance(CRASH_PERCENT);
                let config = &mut self.configs[index];
                let (key, value) = match config.crashing.take() {
                    // The fix of a crashing value: supersedes the change that crashed.
                    Some((_, key)) => (key, value),
                    None if crash => {
                        let key = *rng.pick(&["k0", "k1"]);
                        config.crashing = Some((Instant::now(), key));
                        (key, CRASHING_VALUE.to_string())
                    }
                    None => (*rng.pick(&["k0", "k1", "k2"]), value),
                };
                if config.crashing.is_some() {
                    let id = config.id();
                    self.crashed.insert(id);
                    self.crash_edits += 1;
                }
                let config = &self.configs[index];
                let patch = if key == "k2" && rng.chance(50) {
                    json!({"data": {"k2": null}})
                } else {
                    json!({"data": data(config.kind, &[(key, value.clone())])})
                };
                fake.merge_patch(
                    config.kind.plural(),
                    &config.namespace,
                    &config.name,
                    patch.clone(),
                );
                let id = config.id();
                self.note(format!("edit {id}: {}", patch["data"]));
            }
            1 => {
                let config = rng.pick(&self.configs);
                if config.exists {
                    let label = self.next_value.to_string();
                    touch_labels(fake, config.kind, &config.namespace, &config.name, label);
                    let id = config.id();
                    self.note(format!("label-only edit of {id}"));
                }
            }
            2 => {
                let index = rng.below(self.configs.len() as u64) as usize;
                let config = &mut self.configs[index];
                if config.exists && !config.left_crashing() {
                    fake.delete(config.kind.plural(), &config.namespace, &config.name);
                    config.exists = false;
                    config.crashing = None;
                    let id = config.id();
                    self.note(format!("delete {id}"));
                }
            }
            3 => {
                if let Some(index) = self.configs.iter().position(|c| !c.exists) {
                    self.recreate(fake, index);
                }
            }
            4 => {
                if self.workloads.len() < MAX_WORKLOADS {
                    self.new_workload(fake, rng);
                }
            }
            5 => {
                let index = rng.below(self.workloads.len() as u64) as usize;
                let w = &mut self.workloads[index];
                w.opted_in = !w.opted_in;
                let value = if w.opted_in {
                    json!("true")
                } else if rng.chance(50) {
                    Value::Null
                } else {
                    json!("false")
                };
                fake.merge_patch(
                    w.plural,
                    &w.namespace,
                    &w.name,
                    json!({"metadata": {"annotations": {OPT_IN: value}}}),
                );
                let line = format!(
                    "{} {}",
                    if w.opted_in { "opt in" } else { "opt out" },
                    w.id()
                );
                self.note(line);
            }
            6 => {
                let index = rng.below(self.delete_mode.len() as u64) as usize;
                if !self.settled(fake, &self.delete_mode[index]) {
                    return;
                }
                let value = self.fresh_value();
                let dm = &mut self.delete_mode[index];
                let owed = live_pods(fake, &dm.namespace, &dm.app);
                fake.merge_patch(
                    dm.kind.plural(),
                    &dm.namespace,
                    &dm.name,
                    json!({"data": data(dm.kind, &[("k0", value)])}),
                );
                dm.changes += 1;
                let pods: Vec<String> = owed
                    .iter()
                    .map(|p| format!("{}/{p}", dm.namespace))
                    .collect();
                let line = format!(
                    "edit {} data: owes {} a replacement",
                    dm.id(),
                    pods.join(" ")
                );
                dm.owed.extend(owed);
                self.note(line);
            }
            _ => {
                let dm = rng.pick(&self.delete_mode);
                let label = self.next_value.to_string();
                touch_labels(fake, dm.kind, &dm.namespace, &dm.name, label);
                let id = dm.id();
                self.note(format!("label-only edit of {id}"));
            }
        }
        self.refresh(fake);
    }

    /// Edits the data of every existing ConfigMap/Secret: the last changes of the run, made
    /// while the faults still go on. Each edit is a change of its own for the workloads
    /// that count it: made within microseconds, two of them may still reach wavelet in
    /// different debounce windows when a fault holds one watch back (a 500 with
    /// `Retry-After: 1` on the Secrets watch, seed 1795628980734686241).
    pub fn sweep(&mut self, fake: &FakeApi) {
        for index in 0..self.configs.len() {
            if !self.configs[index].exists {
                continue;
            }
            let values = [("k0", self.fresh_value()), ("k1", self.fresh_value())];
            self.configs[index].crashing = None;
            let config = &self.configs[index];
            // Every key: no crashing value survives the sweep.
            let mut patch = json!({"data": data(config.kind, &values)});
            patch["data"]["k2"] = Value::Null;
            fake.merge_patch(config.kind.plural(), &config.namespace, &config.name, patch);
            let id = config.id();
            self.note(format!("final edit of {id}"));
            self.refresh(fake);
        }
    }

    /// Re-creates the deleted ConfigMaps/Secrets that an opted-in workload requires, so that
    /// none ends up rightly waiting for its configuration; the others stay deleted, and
    /// the workloads that reference them optionally must end on a hash of their absence.
    pub fn restore(&mut self, fake: &FakeApi) {
        let required = self.required_configs(fake);
        for index in 0..self.configs.len() {
            let config = &self.configs[index];
            let id = (
                config.kind.plural(),
                config.namespace.clone(),
                config.name.clone(),
            );
            if !config.exists && required.contains(&id) {
                self.recreate(fake, index);
            }
        }
        self.refresh(fake);
    }

    /// (plural, namespace, name) of every object an opted-in workload cannot start without.
    fn required_configs(&self, fake: &FakeApi) -> BTreeSet<(&'static str, String, String)> {
        use wavelet::objects::{ConfigKind, WorkloadObject};
        let mut required = BTreeSet::new();
        for w in self.workloads.iter().filter(|w| w.opted_in) {
            let object = fake
                .get(w.plural, &w.namespace, &w.name)
                .expect("workload exists");
            let object: WorkloadObject = serde_json::from_value(object).expect("a workload");
            for reference in wavelet::model::references::references(&object) {
                if reference.required {
                    let plural = match reference.config.kind {
                        ConfigKind::ConfigMap => "configmaps",
                        ConfigKind::Secret => "secrets",
                        ConfigKind::SecretProviderClass => continue, // never required
                    };
                    let (namespace, name) = (reference.config.namespace, reference.config.name);
                    required.insert((plural, namespace.to_string(), name.to_string()));
                }
            }
        }
        required
    }

    /// Whether wavelet has seen everything once: every workload adopted, every delete-mode
    /// object recorded in its state.
    pub fn first_sight_done(&self, fake: &FakeApi) -> bool {
        self.workloads
            .iter()
            .all(|w| recorded_hash(fake, w).is_some())
            && self
                .delete_mode
                .iter()
                .all(|dm| state_entry(fake, dm).is_some())
    }

    /// What is not (yet) as it must end up, one line per object.
    pub fn unconverged(&self, fake: &FakeApi) -> Vec<String> {
        let mut problems = Vec::new();
        for w in &self.workloads {
            let (template, metadata) = hashes(fake, w);
            if w.opted_in {
                let recorded = template.as_deref().or(metadata.as_deref());
                if recorded != Some(w.expected.as_str()) {
                    problems.push(format!(
                        "{}: recorded hash {recorded:?} (template {template:?}), expected {} after {} configuration changes",
                        w.id(), w.expected, w.changes
                    ));
                }
            } else if metadata.is_some() {
                problems.push(format!(
                    "{}: opted out but still carries wavelet's metadata hash {metadata:?}",
                    w.id()
                ));
            }
        }
        for dm in &self.delete_mode {
            let present = all_pods(fake, &dm.namespace);
            let left: Vec<&String> = dm.owed.iter().filter(|p| present.contains(*p)).collect();
            if !left.is_empty() {
                problems.push(format!(
                    "{}: Pods owed a replacement still exist: {left:?}",
                    dm.id()
                ));
            }
            let entry = state_entry(fake, dm);
            if entry.as_deref().is_none_or(|e| e.contains("replacing")) {
                problems.push(format!("{}: state entry {entry:?}", dm.id()));
            }
        }
        // Every fan-out finished (the last sweep superseded every hold), every grant used,
        // and the lines of objects that are gone pruned.
        for (key, line) in fan_out_lines(fake) {
            problems.push(format!(
                "configmaps {STATE_NS}/wavelet-state: left {key}: {line}"
            ));
        }
        problems
    }

    /// Notes every fan-out and hold in `wavelet-state` not seen before (called while the
    /// run goes on).
    pub fn watch_state(&mut self, fake: &FakeApi) {
        for (key, line) in fan_out_lines(fake) {
            if key.starts_with("fanout.") {
                let hash = line.split(' ').next().unwrap_or("").to_string();
                let waves = line
                    .split(' ')
                    .find_map(|w| w.strip_prefix("waves="))
                    .map_or(0, |w| w.split(';').count());
                let most = self.fan_outs.entry((key.clone(), hash)).or_default();
                *most = (*most).max(waves);
            }
            if line.contains(" held=") && self.holds.insert((key.clone(), line.clone())) {
                self.note(format!("hold {key}: {line}"));
            }
        }
    }

    /// What the run exercised: (crashing edits, fan-outs, fan-outs of two waves or more,
    /// holds).
    pub fn exercised(&self) -> (usize, usize, usize, usize) {
        let waved = self.fan_outs.values().filter(|w| **w >= 2).count();
        (
            self.crash_edits,
            self.fan_outs.len(),
            waved,
            self.holds.len(),
        )
    }

    /// Holds that nothing explains: every hold must name a workload with a reason, and
    /// the workload must read a ConfigMap/Secret that held the crashing value (a healthy
    /// configuration's rollout finishes within `--rollout-timeout`, faults or not).
    pub fn unexplained_holds(&self, fake: &FakeApi) -> Vec<String> {
        let mut problems = Vec::new();
        for (key, line) in &self.holds {
            // `... held=<workload id> reason=<text to the end>`
            let Some((head, reason)) = line.split_once(" reason=") else {
                problems.push(format!(
                    "configmaps {STATE_NS}/wavelet-state: {key}: a hold without a reason: {line}"
                ));
                continue;
            };
            let workload = head.rsplit_once(" held=").map_or("", |(_, w)| w);
            let parts: Vec<&str> = workload.splitn(3, '/').collect();
            let plural = parts[0].split('.').next().unwrap_or("");
            let uses_crashed = parts.len() == 3
                && self.workloads.iter().any(|w| {
                    w.plural == plural
                        && w.namespace == parts[1]
                        && w.name == parts[2]
                        && self.reads_crashed(fake, w)
                });
            if reason.trim().is_empty() || !uses_crashed {
                problems.push(format!(
                    "{} {}: held {key} without a crashing configuration: {reason}",
                    plural,
                    parts[1..].join("/")
                ));
            }
        }
        problems
    }

    /// The most waves any one change can take now: for each ConfigMap/Secret, the waves
    /// of a change that rolls every opted-in workload using it (the first wave 1, each
    /// later one `wave_size_percent` of them, at least 1).
    pub fn most_waves(&self, fake: &FakeApi, wave_size_percent: usize) -> usize {
        let users = |c: &Config| {
            self.workloads
                .iter()
                .filter(|w| w.opted_in && w.namespace == c.namespace && reads(fake, w, &c.name))
                .count()
        };
        self.configs
            .iter()
            .map(|c| waves(users(c), wave_size_percent))
            .max()
            .unwrap_or(0)
    }

    fn reads_crashed(&self, fake: &FakeApi, w: &Workload) -> bool {
        self.configs.iter().any(|c| {
            c.namespace == w.namespace && self.crashed.contains(&c.id()) && reads(fake, w, &c.name)
        })
    }

    /// What must never happen, whenever it is checked: more revisions than configuration
    /// changes justify, a Pod replaced that no data change owed a replacement, or one
    /// replaced more than once.
    pub fn violations(&self, fake: &FakeApi) -> Vec<String> {
        let mut problems = Vec::new();
        for w in &self.workloads {
            let revisions = fake.revisions(w.plural, &w.namespace, &w.name);
            if revisions > 1 + w.changes {
                problems.push(format!(
                    "{}: {revisions} revisions for {} configuration changes",
                    w.id(),
                    w.changes
                ));
            }
        }
        let owed: BTreeSet<(String, String)> = self
            .delete_mode
            .iter()
            .flat_map(|dm| dm.owed.iter().map(|p| (dm.namespace.clone(), p.clone())))
            .collect();
        let mut tries: BTreeMap<(String, String), usize> = BTreeMap::new();
        for (ns, name, _) in pod_replacements(fake) {
            *tries.entry((ns, name)).or_default() += 1;
        }
        for ((namespace, pod), count) in tries {
            if !owed.contains(&(namespace.clone(), pod.clone())) {
                problems.push(format!(
                    "pods {namespace}/{pod}: replaced ({count} requests) but no data change owed it a replacement"
                ));
            }
        }
        problems
    }

    /// A one-line summary for the final report.
    pub fn summary(&self, fake: &FakeApi) -> String {
        let changes: u64 = self.workloads.iter().map(|w| w.changes).sum();
        let revisions: u64 = self
            .workloads
            .iter()
            .map(|w| fake.revisions(w.plural, &w.namespace, &w.name))
            .sum();
        let dm_changes: u64 = self.delete_mode.iter().map(|dm| dm.changes).sum();
        let replaced: usize = self.delete_mode.iter().map(|dm| dm.owed.len()).sum();
        format!(
            "{} actions, {} workloads, {changes} configuration changes → {revisions} revisions, {dm_changes} delete-mode changes → {replaced} Pods replaced",
            self.actions,
            self.workloads.len()
        )
    }
}

/// wavelet's hash annotations of a workload: (template, metadata).
fn hashes(fake: &FakeApi, w: &Workload) -> (Option<String>, Option<String>) {
    crate::util::hashes(fake, w.plural, &w.namespace, &w.name, HASH)
}

fn recorded_hash(fake: &FakeApi, w: &Workload) -> Option<String> {
    let (template, metadata) = hashes(fake, w);
    template.or(metadata)
}

/// Whether the pod template of `w` names `config` (the soak's names are distinct words:
/// `cm-0`, `sec-1`, ...).
fn reads(fake: &FakeApi, w: &Workload, config: &str) -> bool {
    fake.get(w.plural, &w.namespace, &w.name).is_some_and(|o| {
        o["spec"]["template"]["spec"]
            .to_string()
            .contains(&format!("\"{config}\""))
    })
}

/// The waves of a fan-out over `workloads` (first wave 1, later ones `percent` of all rounded up, at
/// least 1); 0 and 1 workloads are no fan-out (one "wave" each at most).
pub fn waves(workloads: usize, percent: usize) -> usize {
    if workloads < 2 {
        return workloads;
    }
    let size = (workloads * percent).div_ceil(100).max(1);
    1 + (workloads - 1).div_ceil(size)
}

/// wavelet's fan-out records and urgent grants in `wavelet-state`: (key, line).
fn fan_out_lines(fake: &FakeApi) -> Vec<(String, String)> {
    let Some(state) = fake.get("configmaps", STATE_NS, "wavelet-state") else {
        return Vec::new();
    };
    let Some(data) = state["data"].as_object() else {
        return Vec::new();
    };
    data.iter()
        .filter(|(key, _)| FAN_OUT_PREFIXES.iter().any(|p| key.starts_with(p)))
        .map(|(key, line)| (key.clone(), line.as_str().unwrap_or("").to_string()))
        .collect()
}

/// The line of `wavelet-state` about a delete-mode object.
fn state_entry(fake: &FakeApi, dm: &DeleteMode) -> Option<String> {
    let state = fake.get("configmaps", STATE_NS, "wavelet-state")?;
    let key = format!("{}.{}.{}", dm.kind.state_prefix(), dm.namespace, dm.name);
    state["data"][key].as_str().map(String::from)
}
