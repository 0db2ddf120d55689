//! The 13 scenarios of Reloader's load test (`test/loadtest/internal/scenarios/scenarios.go`
//! of stakater/Reloader): what each creates, at Reloader's sizes times `scale`; which updates
//! it makes and when (Reloader's tickers; a seeded choice where Reloader calls
//! `rand.Intn`, so every controller gets the same sequence); and the reload count
//! Reloader's harness expects of them.

use std::time::Duration;

use serde_json::{json, Value};

use super::objects::{self, OptIn};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Id {
    S1,
    S2,
    S3,
    S4,
    S5,
    S6,
    S7,
    S8,
    S9,
    S10,
    S11,
    S12,
    S13,
}

impl Id {
    pub const ALL: [Id; 13] = [
        Id::S1,
        Id::S2,
        Id::S3,
        Id::S4,
        Id::S5,
        Id::S6,
        Id::S7,
        Id::S8,
        Id::S9,
        Id::S10,
        Id::S11,
        Id::S12,
        Id::S13,
    ];

    pub fn name(self) -> &'static str {
        [
            "S1", "S2", "S3", "S4", "S5", "S6", "S7", "S8", "S9", "S10", "S11", "S12", "S13",
        ][self as usize]
    }

    pub fn parse(text: &str) -> Option<Id> {
        Id::ALL
            .into_iter()
            .find(|id| id.name().eq_ignore_ascii_case(text.trim()))
    }

    /// How often the scenario changes data (one lane's ticker; S7 has ten such lanes).
    pub fn update_every(self) -> Duration {
        Duration::from_millis(match self {
            Id::S1 | Id::S4 | Id::S7 => 100,
            Id::S3 | Id::S6 => 200,
            Id::S10 | Id::S11 => 500,
            Id::S5 | Id::S8 | Id::S12 | Id::S13 => 2_000,
            Id::S2 | Id::S9 => 5_000,
        })
    }

    /// Reloader's title, with the sizes at `scale`.
    pub fn title(self, scale: usize) -> String {
        let k = scale;
        match self {
            Id::S1 => format!("burst updates: {} ConfigMaps, {} Deployments, one update every 100 ms", 10 * k, 10 * k),
            Id::S2 => format!("fan-out: 1 ConfigMap used by {} Deployments, one update every 5 s", 50 * k),
            Id::S3 => format!("high cardinality: {} namespaces × 20 ConfigMaps and Deployments, one update every 200 ms", 1 + 10 * k),
            Id::S4 => format!("no-op updates (an annotation only): {} ConfigMaps and Deployments, every 100 ms", 10 * k),
            Id::S5 => format!("workload churn: a Deployment created every 500 ms, ~{} alive, its ConfigMap updated every 2 s", 10 * k),
            Id::S6 => format!("controller restart: {} ConfigMaps and Deployments, one update every 200 ms, restarted after 20 s", 20 * k),
            Id::S7 => format!("API pressure: {} ConfigMaps and Deployments, 10 writers each every 100 ms", 50 * k),
            Id::S8 => format!("large objects: {} ConfigMaps of 2 × 100 KiB, one update every 2 s", 10 * k),
            Id::S9 => format!("workload kinds: 1 ConfigMap, {} Deployments, {} StatefulSets, {} DaemonSets, one update every 5 s", 5 * k, 3 * k, 2 * k),
            Id::S10 => format!("Secrets and mixed: {} Secrets, {} ConfigMaps, {} Deployments, a Secret or a ConfigMap every 500 ms", 5 * k, 5 * k, 10 * k),
            Id::S11 => format!("annotation strategy (Reloader --reload-strategy=annotations): {} ConfigMaps and Deployments, every 500 ms", 10 * k),
            Id::S12 => format!("pause period 15 s: {} ConfigMaps and Deployments, one update every 2 s", 10 * k),
            Id::S13 => format!("complex references (init container, valueFrom, volume, projected): {} ConfigMaps and Deployments, every 2 s", 5 * k),
        }
    }
}

/// When updates happen, as Reloader's `--duration` decides them.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    /// Reloader's `--duration` (60 s by default): updates run for this minus 5 s, S11's
    /// for this minus 10 s.
    pub duration: Duration,
    /// S3 and S7 run updates for at least this long (Reloader: 30 s).
    pub min_window: Duration,
    /// S6 restarts the controller this long after the updates began (Reloader: 20 s).
    pub restart_after: Duration,
    /// S6: how long the controller stays down, the time a new pod takes to start.
    pub downtime: Duration,
    /// Every scenario makes at least this many updates: its window runs longer than
    /// `duration` says where its updates are too sparse for that (0: Reloader's timing).
    /// A p95 of fewer than 20 changes is their maximum; S2 and S9 change every 5 s.
    pub min_changes: usize,
}

impl Timing {
    /// Reloader's own timing for a `--duration`.
    pub fn reloader(duration: Duration) -> Timing {
        Timing {
            duration,
            min_window: Duration::from_secs(30),
            restart_after: Duration::from_secs(20),
            downtime: Duration::from_secs(1),
            min_changes: 0,
        }
    }

    /// How long the scenario makes updates.
    pub fn window(&self, id: Id) -> Duration {
        let reloader = self.reloader_window(id);
        if self.min_changes == 0 {
            return reloader;
        }
        // Ticks come at every period up to, not at, the window's end; S5's updates
        // 250 ms after its ticks.
        let enough = id.update_every() * self.min_changes as u32 + Duration::from_millis(500);
        reloader.max(enough)
    }

    fn reloader_window(&self, id: Id) -> Duration {
        match id {
            Id::S11 => self.duration.saturating_sub(Duration::from_secs(10)),
            Id::S3 | Id::S7 => self
                .duration
                .saturating_sub(Duration::from_secs(5))
                .max(self.min_window),
            _ => self.duration.saturating_sub(Duration::from_secs(5)),
        }
    }
}

/// One thing a scenario does to the cluster.
#[derive(Clone, Debug)]
pub enum Action {
    /// Reloader's Get + Update of a ConfigMap (`data`) or a Secret (`stringData`), these
    /// keys set to these values.
    SetData {
        kind: &'static str,
        ns: String,
        name: String,
        values: Vec<(String, String)>,
    },
    /// S4: Get + Update of an annotation only; the data stays as it is.
    Annotate {
        ns: String,
        name: String,
        value: String,
    },
    /// S5: create this workload.
    Create(Value),
    /// S5: delete a Deployment.
    Delete { ns: String, name: String },
    /// S6: restart the controller.
    Restart,
}

/// An action at a time after the updates began.
#[derive(Clone, Debug)]
pub struct Step {
    pub at: Duration,
    pub action: Action,
}

/// A scenario instantiated for one controller: its namespaces, the objects created
/// before the controller starts, and the steps of each lane (Reloader's goroutines).
#[derive(Clone, Debug)]
pub struct Scenario {
    pub id: Id,
    pub scale: usize,
    pub namespaces: Vec<String>,
    /// ConfigMaps and Secrets first, then the workloads that reference them.
    pub objects: Vec<Value>,
    pub lanes: Vec<Vec<Step>>,
    /// S11: Reloader runs with `--reload-strategy=annotations`.
    pub annotations_strategy: bool,
}

/// Reloader's `rand.Intn`, seeded: the same choices for every controller.
struct Choice(u64);

impl Choice {
    fn new(id: Id, lane: usize) -> Choice {
        Choice(
            (id as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
                ^ (lane as u64 + 1).wrapping_mul(0xD1B5_4A32_D192_ED03),
        )
    }

    fn below(&mut self, n: usize) -> usize {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) as usize % n.max(1)
    }
}

/// Ticks of `every` from `every` on (a Go ticker's first tick), while before `window`.
fn ticks(every: Duration, window: Duration) -> impl Iterator<Item = Duration> {
    (1..)
        .map(move |k| every * k)
        .take_while(move |t| *t < window)
}

/// One update every `id.update_every()` until `window`; the `n`-th (from 0) does
/// `change(n)`.
fn updates(id: Id, window: Duration, mut change: impl FnMut(usize) -> Action) -> Vec<Step> {
    ticks(id.update_every(), window)
        .enumerate()
        .map(|(n, at)| Step {
            at,
            action: change(n),
        })
        .collect()
}

fn set(kind: &'static str, ns: &str, name: &str, values: &[(&str, String)]) -> Action {
    Action::SetData {
        kind,
        ns: ns.into(),
        name: name.into(),
        values: values
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
    }
}

impl Scenario {
    /// Scenario `id` at `scale` × Reloader's sizes, in namespaces named after `tag` (one
    /// controller's run), its workloads opted in with `opt_in`.
    pub fn new(id: Id, scale: usize, tag: &str, opt_in: OptIn, timing: &Timing) -> Scenario {
        let k = scale.max(1);
        let ns = format!("lt-{}-{tag}", id.name().to_lowercase());
        let window = timing.window(id);
        let mut objects = Vec::new();
        let mut configs = Vec::new();
        let mut namespaces = vec![ns.clone()];
        let mut lanes = Vec::new();
        let mut rng = Choice::new(id, 0);
        let one_key = |key: &str, value: &str| json!({ key: value });
        match id {
            Id::S1 => {
                objects::one_to_one(
                    &ns,
                    "burst",
                    10 * k,
                    &one_key("key", "initial-value"),
                    opt_in,
                    &mut configs,
                    &mut objects,
                );
                lanes.push(updates(id, window, |n| {
                    set(
                        "ConfigMap",
                        &ns,
                        &format!("burst-cm-{}", rng.below(10 * k)),
                        &[("key", format!("value-{n}"))],
                    )
                }));
            }
            Id::S2 => {
                configs.push(objects::configmap(
                    &ns,
                    "shared-cm",
                    one_key("config", "initial"),
                ));
                for i in 0..50 * k {
                    objects.push(objects::deployment(
                        &ns,
                        &format!("fanout-deploy-{i}"),
                        "shared-cm",
                        opt_in,
                    ));
                }
                lanes.push(updates(id, window, |n| {
                    set(
                        "ConfigMap",
                        &ns,
                        "shared-cm",
                        &[("config", format!("update-{n}"))],
                    )
                }));
            }
            Id::S3 => {
                for i in 0..10 * k {
                    namespaces.push(format!("{ns}-{i}"));
                }
                for n in &namespaces {
                    objects::one_to_one(
                        n,
                        "hc",
                        20,
                        &one_key("key", "value"),
                        opt_in,
                        &mut configs,
                        &mut objects,
                    );
                }
                lanes.push(updates(id, window, |n| {
                    let target = &namespaces[rng.below(namespaces.len())];
                    set(
                        "ConfigMap",
                        target,
                        &format!("hc-cm-{}", rng.below(20)),
                        &[("key", format!("update-{n}"))],
                    )
                }));
            }
            Id::S4 => {
                objects::one_to_one(
                    &ns,
                    "noop",
                    10 * k,
                    &one_key("key", "static-value"),
                    opt_in,
                    &mut configs,
                    &mut objects,
                );
                lanes.push(updates(id, window, |n| Action::Annotate {
                    ns: ns.clone(),
                    name: format!("noop-cm-{}", rng.below(10 * k)),
                    value: n.to_string(),
                }));
            }
            Id::S5 => {
                configs.push(objects::configmap(&ns, "churn-cm", one_key("key", "value")));
                // Create churn-deploy-N every 500 ms; once more than 10 were created,
                // delete the one created 10 before (Reloader's counters).
                let alive = 10 * k;
                let churn = ticks(Duration::from_millis(500), window)
                    .enumerate()
                    .flat_map(|(c, at)| {
                        let mut steps = vec![Step {
                            at,
                            action: Action::Create(objects::deployment(
                                &ns,
                                &format!("churn-deploy-{c}"),
                                "churn-cm",
                                opt_in,
                            )),
                        }];
                        if c + 1 > alive {
                            steps.push(Step {
                                at,
                                action: Action::Delete {
                                    ns: ns.clone(),
                                    name: format!("churn-deploy-{}", c + 1 - alive),
                                },
                            });
                        }
                        steps
                    });
                lanes.push(churn.collect());
                // Reloader starts both tickers at once, so every 4th creation falls on an
                // update; 250 ms apart here, so that which Deployments an update reaches
                // does not depend on which request the API server takes first.
                let phase = Duration::from_millis(250);
                let updates = ticks(id.update_every(), window.saturating_sub(phase))
                    .enumerate()
                    .map(|(n, at)| Step {
                        at: at + phase,
                        action: set(
                            "ConfigMap",
                            &ns,
                            "churn-cm",
                            &[("key", format!("update-{n}"))],
                        ),
                    });
                lanes.push(updates.collect());
            }
            Id::S6 => {
                objects::one_to_one(
                    &ns,
                    "restart",
                    20 * k,
                    &one_key("key", "initial"),
                    opt_in,
                    &mut configs,
                    &mut objects,
                );
                lanes.push(updates(id, window, |n| {
                    set(
                        "ConfigMap",
                        &ns,
                        &format!("restart-cm-{}", rng.below(20 * k)),
                        &[("key", format!("update-{n}"))],
                    )
                }));
                if timing.restart_after < window {
                    lanes.push(vec![Step {
                        at: timing.restart_after,
                        action: Action::Restart,
                    }]);
                }
            }
            Id::S7 => {
                objects::one_to_one(
                    &ns,
                    "api",
                    50 * k,
                    &one_key("key", "value"),
                    opt_in,
                    &mut configs,
                    &mut objects,
                );
                for g in 0..10 {
                    let mut rng = Choice::new(id, g);
                    lanes.push(updates(id, window, |n| {
                        set(
                            "ConfigMap",
                            &ns,
                            &format!("api-cm-{}", rng.below(50 * k)),
                            &[("key", format!("g{g}-update-{n}"))],
                        )
                    }));
                }
            }
            Id::S8 => {
                let large: String = (0..100 * 1024)
                    .map(|i| (b'a' + (i % 26) as u8) as char)
                    .collect();
                objects::one_to_one(
                    &ns,
                    "large",
                    10 * k,
                    &json!({"large-key-1": large, "large-key-2": large}),
                    opt_in,
                    &mut configs,
                    &mut objects,
                );
                lanes.push(updates(id, window, |n| {
                    set(
                        "ConfigMap",
                        &ns,
                        &format!("large-cm-{}", rng.below(10 * k)),
                        &[("large-key-1", format!("{}-{n}", &large[..large.len() - 10]))],
                    )
                }));
            }
            Id::S9 => {
                configs.push(objects::configmap(
                    &ns,
                    "multi-type-cm",
                    one_key("config", "initial"),
                ));
                for i in 0..5 * k {
                    objects.push(objects::deployment(
                        &ns,
                        &format!("multi-deploy-{i}"),
                        "multi-type-cm",
                        opt_in,
                    ));
                }
                for i in 0..3 * k {
                    objects.push(objects::statefulset(
                        &ns,
                        &format!("multi-sts-{i}"),
                        "multi-type-cm",
                        opt_in,
                    ));
                }
                for i in 0..2 * k {
                    objects.push(objects::daemonset(
                        &ns,
                        &format!("multi-ds-{i}"),
                        "multi-type-cm",
                        opt_in,
                    ));
                }
                lanes.push(updates(id, window, |n| {
                    set(
                        "ConfigMap",
                        &ns,
                        "multi-type-cm",
                        &[("config", format!("update-{n}"))],
                    )
                }));
            }
            Id::S10 => {
                let (secrets, cms) = (5 * k, 5 * k);
                for i in 0..secrets {
                    configs.push(objects::secret(
                        &ns,
                        &format!("mixed-secret-{i}"),
                        one_key("password", &format!("initial-secret-{i}")),
                    ));
                }
                for i in 0..cms {
                    configs.push(objects::configmap(
                        &ns,
                        &format!("mixed-cm-{i}"),
                        one_key("config", &format!("initial-config-{i}")),
                    ));
                }
                for i in 0..5 * k {
                    objects.push(objects::deployment_with_secret(
                        &ns,
                        &format!("secret-only-deploy-{i}"),
                        &format!("mixed-secret-{}", i % secrets),
                        opt_in,
                    ));
                }
                for i in 0..3 * k {
                    objects.push(objects::deployment(
                        &ns,
                        &format!("cm-only-deploy-{i}"),
                        &format!("mixed-cm-{}", i % cms),
                        opt_in,
                    ));
                }
                for i in 0..2 * k {
                    objects.push(objects::deployment_with_both(
                        &ns,
                        &format!("mixed-deploy-{i}"),
                        &format!("mixed-cm-{}", i % cms),
                        &format!("mixed-secret-{}", i % secrets),
                        opt_in,
                    ));
                }
                // Alternating, a Secret first; each counter counts its own kind.
                let (mut secret_n, mut cm_n) = (0, 0);
                lanes.push(updates(id, window, |t| {
                    if t % 2 == 0 {
                        let i = rng.below(secrets);
                        secret_n += 1;
                        set(
                            "Secret",
                            &ns,
                            &format!("mixed-secret-{i}"),
                            &[("password", format!("updated-secret-{i}-{}", secret_n - 1))],
                        )
                    } else {
                        let i = rng.below(cms);
                        cm_n += 1;
                        set(
                            "ConfigMap",
                            &ns,
                            &format!("mixed-cm-{i}"),
                            &[("config", format!("updated-config-{i}-{}", cm_n - 1))],
                        )
                    }
                }));
            }
            Id::S11 | Id::S12 => {
                let (cm, deploy) = if id == Id::S11 {
                    ("annot-cm", "annot-deploy")
                } else {
                    ("pause-cm", "pause-deploy")
                };
                for i in 0..10 * k {
                    configs.push(objects::configmap(
                        &ns,
                        &format!("{cm}-{i}"),
                        one_key("key", "initial-value"),
                    ));
                    objects.push(if id == Id::S11 {
                        objects::deployment(
                            &ns,
                            &format!("{deploy}-{i}"),
                            &format!("{cm}-{i}"),
                            opt_in,
                        )
                    } else {
                        objects::deployment_with_pause(
                            &ns,
                            &format!("{deploy}-{i}"),
                            &format!("{cm}-{i}"),
                            PAUSE_PERIOD.as_secs(),
                            opt_in,
                        )
                    });
                }
                lanes.push(updates(id, window, |n| {
                    let i = rng.below(10 * k);
                    set(
                        "ConfigMap",
                        &ns,
                        &format!("{cm}-{i}"),
                        &[("key", format!("update-{i}-{n}"))],
                    )
                }));
            }
            Id::S13 => {
                let count = 5 * k;
                for i in 0..count {
                    configs.push(objects::configmap(&ns, &format!("complex-cm-{i}"), json!({"key1": format!("value1-{i}"), "key2": format!("value2-{i}"), "config": format!("config-{i}")})));
                }
                for i in 0..count {
                    objects.push(objects::complex_deployment(
                        &ns,
                        &format!("complex-deploy-{i}"),
                        &format!("complex-cm-{i}"),
                        &format!("complex-cm-{}", (i + 1) % count),
                        opt_in,
                    ));
                }
                lanes.push(updates(id, window, |n| {
                    let i = rng.below(count);
                    set(
                        "ConfigMap",
                        &ns,
                        &format!("complex-cm-{i}"),
                        &[
                            ("key1", format!("updated-value1-{i}-{n}")),
                            ("config", format!("updated-config-{i}-{n}")),
                        ],
                    )
                }));
            }
        }
        configs.extend(objects);
        Scenario {
            id,
            scale: k,
            namespaces,
            objects: configs,
            lanes,
            annotations_strategy: id == Id::S11,
        }
    }

    /// The workloads created before the controller starts.
    pub fn workloads(&self) -> impl Iterator<Item = &Value> {
        self.objects.iter().filter(|o| is_workload(o))
    }

    /// How long after the last update a controller may still be owed a rollout by its
    /// semantics: S12's pause period (a window opened by the last update closes then).
    pub fn settle(&self) -> Duration {
        match self.id {
            Id::S12 => PAUSE_PERIOD + Duration::from_secs(1),
            _ => Duration::ZERO,
        }
    }

    /// The scenario's steps that are not restarts, and the restart's time if any.
    pub fn restart_at(&self) -> Option<Duration> {
        self.lanes
            .iter()
            .flatten()
            .find(|s| matches!(s.action, Action::Restart))
            .map(|s| s.at)
    }

    /// What Reloader's harness expects (`ExpectedMetrics.ActionTotal`), from the updates
    /// that succeeded (`ConfigMap` and `Secret` data updates by kind); `None` where it
    /// states no number (S5, S6 and S12 only describe).
    pub fn reloader_expected(
        &self,
        configmap_updates: usize,
        secret_updates: usize,
    ) -> Option<usize> {
        let k = self.scale;
        let updates = configmap_updates + secret_updates;
        match self.id {
            Id::S1 | Id::S3 | Id::S7 | Id::S8 | Id::S11 => Some(updates),
            Id::S2 => Some(updates * 50 * k),
            Id::S4 => Some(0),
            Id::S5 | Id::S6 | Id::S12 => None,
            Id::S9 => Some(updates * 10 * k),
            // avg reloads per Secret update (5 secret-only + 2 mixed) / 5 Secrets, per
            // ConfigMap update (3 + 2) / 5, each truncated as Go's int() does.
            Id::S10 => Some((secret_updates as f64 * 7.0 / 5.0) as usize + configmap_updates),
            Id::S13 => Some(updates * 2),
        }
    }
}

/// S12's `deployment.reloader.stakater.com/pause-period`.
pub const PAUSE_PERIOD: Duration = Duration::from_secs(15);

pub fn is_workload(object: &Value) -> bool {
    matches!(
        object["kind"].as_str(),
        Some("Deployment" | "StatefulSet" | "DaemonSet")
    )
}
