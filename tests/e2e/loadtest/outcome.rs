//! What a played scenario amounts to, from the recorder's events alone: reloads done
//! (pod-template changes of the scenario's workloads), those no data change prompted,
//! change → rollout latency per dependent workload, each change's own write-to-watch
//! time, and the reload count wavelet's semantics require (as a range when a change
//! fell so close to a boundary that either answer is right).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::drive::{created_workloads, Did, Played};
use super::objects::references;
use super::recorder::{Event, What};
use super::scenarios::Scenario;

/// `(kind, namespace, name)`.
pub type Key = (&'static str, String, String);

/// A change this close to the end of a pause window may land on either side of it.
const WINDOW_MARGIN: Duration = Duration::from_millis(200);

#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// Successful data updates (ConfigMaps + Secrets), annotation-only updates.
    pub data_updates: usize,
    pub noop_updates: usize,
    /// Data updates made while the controller was down (S6).
    pub down_updates: usize,
    /// What Reloader's harness expects, where it states a number.
    pub reloader_expected: Option<usize>,
    /// Rollouts wavelet's semantics require: `(least, most)`.
    pub wavelet_expected: (usize, usize),
    /// Pod-template changes of the scenario's workloads once the controller was ready.
    pub reloads: usize,
    /// Of those, the ones no data change had prompted (e.g. Wave rolling a new
    /// workload): each rollout serves the oldest change to its workload not yet served.
    pub unprompted: usize,
    /// Pod-template changes between the controller's start and its ready.
    pub startup_rollouts: usize,
    /// ReplicaSets created once the controller was ready (rollouts the Deployment
    /// controller actually started; fewer than reloads while a Deployment is paused).
    pub new_replicasets: usize,
    /// Change (the update's PUT sent) → the dependent's pod template changed, per
    /// dependent; changes made while the controller was down are not in it.
    pub latency: Vec<Duration>,
    /// Changes whose dependent still had a rollout owed for an earlier change (its
    /// first rollout after may be the earlier one's): not in `latency`.
    pub overlapping: usize,
    /// Changes after which the dependent never rolled.
    pub missed: usize,
    /// Each update's own PUT sent → its new version seen on the watch: the API server's
    /// write plus watch delivery.
    pub write_to_watch: Vec<Duration>,
    /// Per change (not per dependent): sent → the first pod template changed of the
    /// dependents it clearly reached (each owed no earlier change when it was sent, and
    /// rolled after). A dependent still owed an earlier rollout is left out, since its
    /// next rollout may be that one's; a change that reached none clearly (or made while
    /// the controller was down) is not in it. Requiring every dependent to be clear would
    /// keep only the changes a controller that falls behind met while idle.
    pub first_rollout: Vec<Duration>,
    /// The part of `first_rollout` that comes from changes of Secrets (S10 mixes both
    /// kinds; a controller may read a Secret differently).
    pub first_rollout_of_secrets: Vec<Duration>,
    /// Per change with two or more dependents, all reached clearly: sent → the last of
    /// its dependents rolled (the whole fan-out done).
    pub fan_out_done: Vec<Duration>,
    /// Per change: sent → the first new ReplicaSet of a dependent Deployment (the
    /// rollout actually started; a paused Deployment starts none until resumed).
    pub first_started: Vec<Duration>,
    /// Per change, the same first new ReplicaSet, timed from when the workload's pause
    /// period let it start: the end of the pause that the first change of its batch opened
    /// (Reloader's `pause-period`). A rollout that started before that end did not hold the
    /// pause (Wave has none): timed from the change, as `first_started`.
    pub first_beyond_pause: Vec<Duration>,
}

/// How one change reached one of its dependents.
#[derive(Clone, Copy)]
struct Dependent {
    reached: Reached,
    /// The first ReplicaSet of the dependent created after the change.
    started: Option<Instant>,
    /// That ReplicaSet beyond the pause period (see `Outcome::first_beyond_pause`).
    beyond_pause: Option<Duration>,
}

/// A workload's changes `(index, sent, reached, first ReplicaSet after)`, each with the
/// delay of that ReplicaSet beyond what the workload's pause period asked. The changes one
/// ReplicaSet serves are a batch; the pause the batch's first change opened ends `period`
/// after it was sent. Without a pause, or where the ReplicaSet came before the pause ended
/// (the controller did not hold it), the delay is from the change itself.
fn beyond_pause(
    changes: &[(usize, Instant, Reached, Option<Instant>)],
    pause: Option<Duration>,
) -> Vec<(usize, Reached, Option<Instant>, Option<Duration>)> {
    changes
        .iter()
        .map(|&(change, sent, reached, started)| {
            let beyond = started.map(|started| {
                let opened = changes
                    .iter()
                    .filter(|c| c.3 == Some(started))
                    .map(|c| c.1)
                    .min()
                    .unwrap_or(sent);
                match pause.map(|period| opened + period) {
                    Some(end) if started + WINDOW_MARGIN >= end => {
                        started.saturating_duration_since(end)
                    }
                    _ => started - sent,
                }
            });
            (change, reached, started, beyond)
        })
        .collect()
}

/// How one change reached one dependent.
#[derive(Clone, Copy)]
enum Reached {
    /// Its pod template changed after `at`, and it owed no earlier change.
    Rolled(Instant),
    /// It still owed an earlier change's rollout, or never rolled.
    Unclear,
}

struct Life {
    from: Option<Instant>,
    until: Option<Instant>,
    pause: Option<Duration>,
}

impl Life {
    /// Whether a change sent at `sent` (answered at `done`) reaches this workload.
    fn reached_by(&self, sent: Instant, done: Instant) -> bool {
        self.from.is_none_or(|f| f < sent) && self.until.is_none_or(|u| u > done)
    }
}

fn key_of(object: &Value) -> Key {
    let kind = match object["kind"].as_str() {
        Some("StatefulSet") => "StatefulSet",
        Some("DaemonSet") => "DaemonSet",
        _ => "Deployment",
    };
    (
        kind,
        object["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default()
            .into(),
        object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .into(),
    )
}

fn pause_of(object: &Value) -> Option<Duration> {
    let text = object["metadata"]["annotations"]["deployment.reloader.stakater.com/pause-period"]
        .as_str()?;
    text.strip_suffix('s')?
        .parse()
        .ok()
        .map(Duration::from_secs)
}

/// Nearest-rank percentile (`p` in 0..=100) of durations, in milliseconds.
pub fn percentile_ms(values: &[Duration], p: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort();
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1].as_secs_f64() * 1000.0)
}

impl Outcome {
    /// `started` and `ready`: the controller's first start and ready; events after
    /// `until` are not counted.
    pub fn of(
        scenario: &Scenario,
        played: &Played,
        events: &[Event],
        started: Instant,
        ready: Instant,
        until: Instant,
    ) -> Outcome {
        // Workloads, their lives and what they depend on.
        let mut lives: HashMap<Key, Life> = HashMap::new();
        let mut dependents: HashMap<Key, Vec<Key>> = HashMap::new();
        let created = created_workloads(scenario);
        for object in scenario.workloads().chain(created.iter()) {
            let key = key_of(object);
            let (from, until) = if scenario.workloads().any(|w| key_of(w) == key) {
                (None, None)
            } else {
                let done = |did| {
                    played
                        .performed
                        .iter()
                        .find(|p| p.ok && p.did == did && p.ns == key.1 && p.name == key.2)
                };
                (
                    done(Did::Create).map(|p| p.done),
                    done(Did::Delete).map(|p| p.sent),
                )
            };
            if !scenario.workloads().any(|w| key_of(w) == key) && from.is_none() {
                continue; // never created
            }
            for (kind, name) in references(object) {
                dependents
                    .entry((kind, key.1.clone(), name))
                    .or_default()
                    .push(key.clone());
            }
            lives.insert(
                key,
                Life {
                    from,
                    until,
                    pause: pause_of(object),
                },
            );
        }

        // The recorder's view.
        let mut templates: HashMap<Key, Vec<Instant>> = HashMap::new();
        let mut versions: HashMap<(String, String, String), Instant> = HashMap::new();
        let mut new_replicasets = 0;
        let mut started_rollouts: HashMap<Key, Vec<Instant>> = HashMap::new();
        for e in events.iter().filter(|e| e.at <= until) {
            match &e.what {
                What::TemplateChanged => templates
                    .entry((e.kind, e.ns.clone(), e.name.clone()))
                    .or_default()
                    .push(e.at),
                What::Version {
                    resource_version, ..
                } => {
                    versions.insert(
                        (e.ns.clone(), e.name.clone(), resource_version.clone()),
                        e.at,
                    );
                }
                What::Created
                    if e.kind == "ReplicaSet"
                        && !e.listed
                        && e.at >= ready
                        && e.owner.as_ref().is_some_and(|o| {
                            lives.contains_key(&("Deployment", e.ns.clone(), o.clone()))
                        }) =>
                {
                    new_replicasets += 1;
                    if let Some(owner) = &e.owner {
                        started_rollouts
                            .entry(("Deployment", e.ns.clone(), owner.clone()))
                            .or_default()
                            .push(e.at);
                    }
                }
                _ => {}
            }
        }

        let (cm_updates, secret_updates) = played.data_updates();
        let mut outcome = Outcome {
            data_updates: cm_updates + secret_updates,
            noop_updates: played.count(Did::Annotate),
            reloader_expected: scenario.reloader_expected(cm_updates, secret_updates),
            new_replicasets,
            ..Outcome::default()
        };

        // Each update's own write → watch.
        for p in played
            .performed
            .iter()
            .filter(|p| p.ok && p.did == Did::SetData)
        {
            if let Some(rv) = &p.resource_version {
                if let Some(at) = versions.get(&(p.ns.clone(), p.name.clone(), rv.clone())) {
                    outcome
                        .write_to_watch
                        .push(at.saturating_duration_since(p.sent));
                }
            }
        }

        // Per workload: the changes that reach it, its rollouts.
        let down = |t: Instant| {
            played
                .restarts
                .iter()
                .any(|r| t >= r.stopping && t <= r.ready)
        };
        outcome.down_updates = played
            .performed
            .iter()
            .filter(|p| p.ok && p.did == Did::SetData && down(p.sent))
            .count();
        let mut least = 0;
        let mut most = 0;
        // Per change (its index in `played.performed`): how it reached each dependent.
        let mut per_change: HashMap<usize, Vec<Dependent>> = HashMap::new();
        for (key, life) in &lives {
            let rollouts = templates.get(key).cloned().unwrap_or_default();
            outcome.startup_rollouts += rollouts
                .iter()
                .filter(|t| **t >= started && **t < ready)
                .count();
            let counted: Vec<Instant> = rollouts.iter().copied().filter(|t| *t >= ready).collect();
            outcome.reloads += counted.len();
            // The changes that reach this workload: their index in `played.performed`,
            // sent and answered.
            let reaching: Vec<(usize, Instant, Instant)> = played
                .performed
                .iter()
                .enumerate()
                .filter(|(_, p)| p.ok && p.did == Did::SetData)
                .filter(|(_, p)| {
                    dependents
                        .get(&(p.kind, p.ns.clone(), p.name.clone()))
                        .is_some_and(|ws| ws.contains(key))
                })
                .filter(|(_, p)| life.reached_by(p.sent, p.done))
                .map(|(i, p)| (i, p.sent, p.done))
                .collect();
            let triggers: Vec<(Instant, Instant)> = reaching
                .iter()
                .map(|(_, sent, done)| (*sent, *done))
                .collect();

            // Unprompted rollouts: each rollout serves the oldest change not yet served
            // (a controller that coalesces leaves some owed); one with none owed had no
            // reason.
            let mut owed = 0usize;
            let mut next = triggers.iter().peekable();
            for t in &counted {
                while next.peek().is_some_and(|(sent, _)| sent < t) {
                    next.next();
                    owed += 1;
                }
                match owed {
                    0 => outcome.unprompted += 1,
                    _ => owed -= 1,
                }
            }

            // Latency, change by change.
            let mut matched: Vec<Option<Instant>> = Vec::new();
            let mut this_workload: Vec<(usize, Instant, Reached, Option<Instant>)> = Vec::new();
            for (i, (sent, _)) in triggers.iter().enumerate() {
                let first = rollouts.iter().copied().find(|t| t > sent);
                matched.push(first);
                if down(*sent) {
                    continue;
                }
                let owed = triggers[..i]
                    .iter()
                    .zip(&matched)
                    .any(|((s, _), m)| !down(*s) && m.is_none_or(|m| m > *sent));
                let started = started_rollouts
                    .get(key)
                    .and_then(|rs| rs.iter().copied().find(|t| t > sent));
                let reached = match first {
                    None => {
                        outcome.missed += 1;
                        Reached::Unclear
                    }
                    Some(_) if owed => {
                        outcome.overlapping += 1;
                        Reached::Unclear
                    }
                    Some(t) => {
                        outcome.latency.push(t - *sent);
                        Reached::Rolled(t)
                    }
                };
                this_workload.push((reaching[i].0, *sent, reached, started));
            }
            for (change, reached, started, beyond) in beyond_pause(&this_workload, life.pause) {
                per_change.entry(change).or_default().push(Dependent {
                    reached,
                    started,
                    beyond_pause: beyond,
                });
            }

            // wavelet's count: changes while it was down roll once at its start; a pause
            // period coalesces a window; otherwise one rollout per change.
            let (mut lo, mut hi) = (0, 0);
            for r in &played.restarts {
                if triggers
                    .iter()
                    .any(|(s, _)| *s >= r.stopping && *s <= r.ready)
                {
                    lo += 1;
                    hi += 1;
                }
            }
            let live: Vec<Instant> = triggers
                .iter()
                .map(|(s, _)| *s)
                .filter(|s| !down(*s))
                .collect();
            match life.pause {
                Some(period) => {
                    let mut window_end: Option<Instant> = None;
                    for s in &live {
                        match window_end {
                            Some(end) if *s < end => {
                                if end - *s < WINDOW_MARGIN {
                                    hi += 1;
                                }
                            }
                            _ => {
                                // Just after the last window closed: it may have joined it.
                                if window_end.is_none_or(|end| *s - end >= WINDOW_MARGIN) {
                                    lo += 1;
                                }
                                hi += 1;
                                window_end = Some(*s + period);
                            }
                        }
                    }
                }
                None => {
                    // One rollout per change; but a change made while the workload's
                    // rollout for the one before was still owed (not written yet) may
                    // be rolled by it: wavelet's queue holds a workload once, and its
                    // reconcile reads the latest data.
                    for (i, s) in live.iter().enumerate() {
                        hi += 1;
                        let owed = i > 0
                            && rollouts
                                .iter()
                                .find(|t| **t > live[i - 1])
                                .is_none_or(|t| t > s);
                        if !owed {
                            lo += 1;
                        }
                    }
                }
            }
            least += lo;
            most += hi;
        }
        outcome.wavelet_expected = (least, most);
        outcome.per_change(played, &per_change);
        outcome
    }

    /// The first rollout and the whole fan-out of each change, from how it reached each
    /// of its dependents.
    fn per_change(&mut self, played: &Played, per_change: &HashMap<usize, Vec<Dependent>>) {
        let mut changes: Vec<_> = per_change.iter().collect();
        changes.sort_by_key(|(i, _)| **i);
        for (i, reached) in changes {
            let sent = played.performed[*i].sent;
            if let Some(started) = reached.iter().filter_map(|d| d.started).min() {
                self.first_started.push(started - sent);
            }
            if let Some(beyond) = reached.iter().filter_map(|d| d.beyond_pause).min() {
                self.first_beyond_pause.push(beyond);
            }
            let rolled: Vec<Instant> = reached
                .iter()
                .filter_map(|d| match d.reached {
                    Reached::Rolled(t) => Some(t),
                    Reached::Unclear => None,
                })
                .collect();
            if let Some(first) = rolled.iter().min() {
                self.first_rollout.push(*first - sent);
                if played.performed[*i].kind == "Secret" {
                    self.first_rollout_of_secrets.push(*first - sent);
                }
            }
            if let Some(last) = rolled.iter().max() {
                if rolled.len() == reached.len() && rolled.len() > 1 {
                    self.fan_out_done.push(*last - sent);
                }
            }
        }
    }

    /// Whether the reloads are what wavelet's semantics require (within the range).
    pub fn wavelet_exact(&self) -> bool {
        let (lo, hi) = self.wavelet_expected;
        self.reloads >= lo && self.reloads <= hi && self.unprompted == 0
    }

    /// Reloader's pass rule: within 15% of what its harness expects.
    pub fn within_reloader_rule(&self) -> Option<bool> {
        self.reloader_expected.map(|e| {
            let e = e as f64;
            (self.reloads as f64 - e).abs() <= 0.15 * e
        })
    }
}
