//! The impact of a proposed change, as a pure function of what the cluster holds (or
//! the manifests say) and the objects as they would be applied. It asks the same code
//! `run` decides by, on a cache of the world before (each object applied to it in turn,
//! then taken back) and one with every object applied:
//!
//! 1. Per object: which keys change (names only); unchanged or metadata only → it rolls
//!    nothing.
//! 2. Per opted-in workload that counts it (`model::counted`): its hash before and after
//!    (`model::hash`, with only this object changed). Different → it rolls; the same →
//!    it rolls nothing, because it uses only keys that did not change; a workload that
//!    misses a required key after the change is not rolled (its Pods could not start),
//!    one that misses some other object waits for it; one whose Namespace is outside
//!    `--namespace-selector` is not acted on. A workload that missed this object (a new
//!    one) waited for it and rolls now.
//! 3. The fan-out plan of the object's change (`hashmode::fanout::waves::decide`, played
//!    wave after wave as if each finished healthy): wave 1 with the canaries, then the
//!    rest; or at once.
//! 4. Delete mode: the Pods its selector matches (when the Pods are known).
//! 5. Per workload that rolls (all objects applied): when, as `run`'s gates decide it
//!    (`hashmode::fanout::gates`, as `status` shows it): paused; held, or not yet
//!    released, by a fan-out under way of another object it uses; after an earlier wave
//!    of this change's fan-out; at the next opening of its restart window; or now.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::Serialize;

use crate::annotations::Annotations;
use crate::config::{FanOut, Policy};
use crate::deletemode::decide::{validate_selector, Strategy};
use crate::hashmode::fanout::gates::{self, UrgentDecision};
use crate::hashmode::fanout::record::{display_id, workload_id, Record};
use crate::hashmode::fanout::waves::{self, Decision, Member};
use crate::hashmode::fanout::Judge;
use crate::impact::input::NamespaceDoc;
use crate::model::cache::{Cache, ConfigEntry};
use crate::model::counted::counted;
use crate::model::hash::{self, ConfigHash};
use crate::model::rollout_status::RolloutStatus;
use crate::model::workload::{Gates, WorkloadEntry};
use crate::objects::{
    ConfigKey, ConfigKind, ConfigObject, KeyDigest, Pod, Resource, WorkloadKey, WorkloadObject,
};
use crate::selector::Selector;
use crate::watch::scope::NamespaceScope;

/// What the cluster holds (or the manifests and `--base` say), before the change.
#[derive(Debug, Default)]
pub struct World {
    pub configs: Vec<(ConfigKind, ConfigObject)>,
    pub workloads: Vec<(Arc<Resource>, WorkloadObject)>,
    /// The Namespaces known, with their labels (for `--namespace-selector`) and
    /// annotations (pause, restart window).
    pub namespaces: Vec<NamespaceDoc>,
    /// The Pods of the changed objects' namespaces; `None`: not known (offline).
    pub pods: Option<Vec<(String, Pod)>>,
    /// `wavelet pause` in effect since (Unix seconds).
    pub paused_since: Option<u64>,
    /// The fan-outs recorded in `wavelet-state`: (object as `configmap ns/name`, record).
    pub fan_outs: Vec<(String, Record)>,
}

/// The settings `run` would decide by.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    pub policy: Policy,
    pub fan_out: FanOut,
    /// `--namespace-selector`: only namespaces whose labels match are acted on.
    pub namespace_selector: Option<Selector>,
    /// `--hash-key-file`'s key: the data hashes fan-out records carry are HMACs under it.
    pub hmac_key: Option<Vec<u8>>,
    /// Unix seconds.
    pub now: i64,
}

/// The whole report.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Impact {
    pub objects: Vec<ObjectImpact>,
    /// Every workload that rolls, once, with when and why.
    pub workloads: Vec<WorkloadImpact>,
}

impl Impact {
    /// How many workloads roll (for `--max-rolls`).
    pub fn rolls(&self) -> usize {
        self.workloads.len()
    }
}

/// What changes in one object.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Change {
    /// Not in the cluster (or `--base`) yet.
    New,
    Unchanged,
    MetadataOnly,
    Data,
}

/// The impact of one object of `-f`.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct ObjectImpact {
    /// `configmap ns/name`.
    pub object: String,
    pub change: Change,
    pub keys_added: Vec<String>,
    pub keys_removed: Vec<String>,
    pub keys_changed: Vec<String>,
    /// The workloads this object's change rolls, with why.
    pub rolls: Vec<Affected>,
    /// Workloads that count it and do not roll, with why.
    pub rolls_not: Vec<Affected>,
    /// The fan-out plan: the workload ids of each wave; empty when they roll at once.
    pub waves: Vec<Vec<String>>,
    /// Why there are no waves, or how the waves are sized.
    pub fan_out: String,
    pub delete_mode: Option<DeleteMode>,
}

/// A workload and why it is listed.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Affected {
    /// `deployment ns/name`.
    pub workload: String,
    pub why: String,
}

/// What delete mode does on a change of the object's data.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct DeleteMode {
    pub selector: String,
    pub strategy: String,
    /// Pods it would replace; `None`: not known (offline, or nothing changes).
    pub pods: Option<Vec<String>>,
    /// Why it replaces nothing (a refused selector or strategy, no data change).
    pub problem: Option<String>,
}

/// When a workload rolls.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(tag = "at", rename_all = "kebab-case")]
pub enum When {
    Now,
    /// At the next opening of its restart window.
    Window {
        opens_at: String,
        windows: String,
    },
    /// Paused until lifted.
    Paused {
        by: String,
    },
    /// After the earlier waves of a fan-out finished healthy.
    AfterWave {
        fan_out: String,
        wave: usize,
    },
    /// Behind a fan-out that is held: a workload of an earlier wave failed its rollout.
    Held {
        fan_out: String,
        reason: String,
    },
}

/// One workload that rolls.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct WorkloadImpact {
    pub workload: String,
    /// Its wave in each fan-out it is part of: (object, wave).
    pub waves: Vec<(String, usize)>,
    pub when: When,
    pub why: String,
}

/// One cached workload.
struct Workload {
    key: WorkloadKey,
    entry: WorkloadEntry,
    in_scope: bool,
}

/// Steps 1 to 5 above.
pub fn plan(world: &World, proposed: &[(ConfigKind, ConfigObject)], settings: &Settings) -> Impact {
    let workloads = workloads_of(world, settings);
    let before = cache_of(world, &workloads, settings, &[]);
    let after_all = cache_of(world, &workloads, settings, proposed);
    let mut objects = Vec::new();
    // Per workload: (object, wave) of each fan-out that has it.
    let mut waves_of: BTreeMap<String, Vec<(String, usize)>> = BTreeMap::new();
    for one in proposed {
        let object = object_impact(one, &before, &workloads, world, settings);
        for (i, wave) in object.waves.iter().enumerate() {
            for id in wave {
                waves_of
                    .entry(id.clone())
                    .or_default()
                    .push((object.object.clone(), i + 1));
            }
        }
        objects.push(object);
    }
    let mut rolling = Vec::new();
    for w in workloads.iter().filter(|w| w.in_scope) {
        let was = hash_of(&before, w);
        let will = hash_of(&after_all, w);
        if was.hash == will.hash || !will.missing.is_empty() {
            continue;
        }
        let id = workload_id(&w.key);
        let waves = waves_of.remove(&display_id(&id)).unwrap_or_default();
        let (when, why) = when_of(w, &after_all, &waves, world, proposed, settings);
        rolling.push(WorkloadImpact {
            workload: display_id(&id),
            waves,
            when,
            why,
        });
    }
    Impact {
        objects,
        workloads: rolling,
    }
}

/// The opted-in workloads, with whether their Namespace is acted on.
fn workloads_of(world: &World, settings: &Settings) -> Vec<Workload> {
    let mut out: Vec<Workload> = world
        .workloads
        .iter()
        .filter_map(|(resource, object)| {
            let entry = WorkloadEntry::from_object(resource, object, &settings.policy)
                .filter(|e| e.flavor.is_some())?;
            let namespace = &object.metadata.namespace;
            let in_scope = match &settings.namespace_selector {
                None => true,
                Some(selector) => world
                    .namespaces
                    .iter()
                    .find(|n| n.name == *namespace)
                    .is_some_and(|n| selector.matches(&n.labels)),
            };
            Some(Workload {
                key: WorkloadKey::new(Arc::clone(resource), namespace, &object.metadata.name),
                entry,
                in_scope,
            })
        })
        .collect();
    out.sort_by_key(|w| workload_id(&w.key));
    out
}

/// A cache as `run` would hold it: the world's objects, then `proposed` applied over them.
fn cache_of(
    world: &World,
    workloads: &[Workload],
    settings: &Settings,
    proposed: &[(ConfigKind, ConfigObject)],
) -> Arc<Cache> {
    let scope = match settings.namespace_selector {
        None => NamespaceScope::everywhere(),
        Some(_) => NamespaceScope::selected(),
    };
    let cache = Arc::new(Cache::with_scope(scope));
    for (kind, object) in world.configs.iter().chain(proposed) {
        if !settings.policy.ignores(*kind) {
            cache.upsert_config(*kind, object.clone());
        }
    }
    for w in workloads {
        if w.in_scope {
            cache.scope().insert(&w.key.namespace);
        }
        cache.upsert_workload(&w.key, Some(w.entry.clone()));
    }
    for ns in &world.namespaces {
        let annotations =
            Annotations::from_pairs(ns.annotations.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        cache.set_namespace_gates(&ns.name, Some(Gates::from_annotations(&annotations)));
    }
    cache
}

fn hash_of(cache: &Cache, w: &Workload) -> ConfigHash {
    let resolved = counted(cache, &w.key, &w.entry);
    hash::compute(
        resolved
            .iter()
            .map(|(r, e)| (r, e.as_ref().and_then(|e| e.digests()))),
        None,
    )
}

/// The impact of one object alone: `cache` holds the world before; the object is applied
/// to it for the time of the judgement, then the world before is put back.
fn object_impact(
    one: &(ConfigKind, ConfigObject),
    cache: &Arc<Cache>,
    workloads: &[Workload],
    world: &World,
    settings: &Settings,
) -> ObjectImpact {
    let (kind, object) = one;
    let key = ConfigKey::new(*kind, &object.metadata.namespace, &object.metadata.name);
    let before_object = world.configs.iter().find(|(k, o)| {
        *k == *kind && o.metadata.namespace == *key.namespace && o.metadata.name == *key.name
    });
    // Only the workloads that name it (or may count it by a reload list) can roll for it.
    let dependents: Vec<&Workload> = {
        let named: std::collections::HashSet<WorkloadKey> =
            cache.dependents(&key).into_iter().collect();
        workloads
            .iter()
            .filter(|w| named.contains(&w.key) || !w.entry.counting.patterns().is_empty())
            .collect()
    };
    let was: Vec<ConfigHash> = dependents.iter().map(|w| hash_of(cache, w)).collect();
    let ignored = settings.policy.ignores(*kind);
    if !ignored {
        cache.upsert_config(*kind, object.clone());
    }
    let out = judge_object(
        one,
        &key,
        before_object,
        cache,
        &dependents,
        &was,
        world,
        settings,
    );
    if !ignored {
        match before_object {
            Some((kind, o)) => {
                cache.upsert_config(*kind, o.clone());
            }
            None => {
                cache.remove_config(&key);
            }
        }
    }
    out
}

/// [`object_impact`] with the object applied to `after`; `was` are the hashes of
/// `dependents` before.
#[allow(clippy::too_many_arguments)]
fn judge_object(
    (kind, object): &(ConfigKind, ConfigObject),
    key: &ConfigKey,
    before_object: Option<&(ConfigKind, ConfigObject)>,
    after: &Arc<Cache>,
    dependents: &[&Workload],
    was: &[ConfigHash],
    world: &World,
    settings: &Settings,
) -> ObjectImpact {
    let key = key.clone();
    let new = after.config(&key);
    let (added, removed, changed) = key_diff(
        before_object.map(|(_, o)| o.digests()).unwrap_or_default(),
        object.digests(),
    );
    let change = match before_object {
        None => Change::New,
        Some(_) if !(added.is_empty() && removed.is_empty() && changed.is_empty()) => Change::Data,
        Some((_, o)) if o.metadata.annotations == object.metadata.annotations => Change::Unchanged,
        Some(_) => Change::MetadataOnly,
    };
    let mut out = ObjectImpact {
        object: key.to_string(),
        change,
        keys_added: added,
        keys_removed: removed,
        keys_changed: changed,
        rolls: Vec::new(),
        rolls_not: Vec::new(),
        waves: Vec::new(),
        fan_out: String::new(),
        delete_mode: None,
    };
    if settings.policy.ignores(*kind) {
        out.fan_out = format!(
            "{}s are ignored (--ignore-{}s): nothing rolls",
            kind.as_str(),
            kind.as_str()
        );
        return out;
    }
    let changed_keys: BTreeSet<&str> = out
        .keys_added
        .iter()
        .chain(&out.keys_removed)
        .chain(&out.keys_changed)
        .map(String::as_str)
        .collect();
    let mut rolling: Vec<&Workload> = Vec::new();
    for (w, was) in dependents.iter().copied().zip(was) {
        let resolved = counted(after, &w.key, &w.entry);
        let Some((reference, _)) = resolved.iter().find(|(r, _)| r.config == key) else {
            continue;
        };
        let name = display_id(&workload_id(&w.key));
        let will = hash_of(after, w);
        let uses = if reference.all_keys {
            "every key".to_string()
        } else {
            let names: Vec<&str> = reference.keys.names().collect();
            let noun = if names.len() == 1 { "key" } else { "keys" };
            format!("{noun} {}", names.join(", "))
        };
        let (rolls, why) = if !w.in_scope {
            (
                false,
                format!(
                    "its Namespace {} is outside --namespace-selector: not acted on",
                    w.key.namespace
                ),
            )
        } else if !will.missing.is_empty() {
            let missing: Vec<String> = will.missing.iter().map(ToString::to_string).collect();
            let why = if will.missing.iter().any(|m| *m.config() == key) {
                format!(
                    "not rolled: after the change {} (its Pods could not start; wavelet warns instead)",
                    missing.join(", ")
                )
            } else {
                format!("waits for missing configuration: {}", missing.join(", "))
            };
            (false, why)
        } else if was.hash == will.hash {
            let why = match out.change {
                Change::Data => format!("uses only {uses}, unchanged"),
                _ => "the data does not change".to_string(),
            };
            (false, why)
        } else if was.missing.iter().any(|m| *m.config() == key) {
            (
                true,
                format!("waits for it (missing {key}): rolls once it exists"),
            )
        } else {
            let used: Vec<&str> = if reference.all_keys {
                changed_keys.iter().copied().collect()
            } else {
                reference
                    .keys
                    .names()
                    .filter(|k| changed_keys.contains(k))
                    .collect()
            };
            let why = if used.is_empty() {
                format!("uses {uses}: its data changes")
            } else {
                format!("uses {uses}; changed: {}", used.join(", "))
            };
            (true, why)
        };
        let affected = Affected {
            workload: name,
            why,
        };
        if rolls {
            out.rolls.push(affected);
            rolling.push(w);
        } else {
            out.rolls_not.push(affected);
        }
    }
    (out.waves, out.fan_out) = fan_out_plan(&key, after, &rolling, settings);
    out.delete_mode = delete_mode(&key, new.as_deref(), out.change, world);
    out
}

/// Names of keys added, removed and changed, each sorted.
fn key_diff(old: &[KeyDigest], new: &[KeyDigest]) -> (Vec<String>, Vec<String>, Vec<String>) {
    let old: BTreeMap<&str, _> = old.iter().map(|(k, d)| (&**k, d)).collect();
    let new: BTreeMap<&str, _> = new.iter().map(|(k, d)| (&**k, d)).collect();
    let added = new
        .keys()
        .filter(|k| !old.contains_key(*k))
        .map(|k| k.to_string())
        .collect();
    let removed = old
        .keys()
        .filter(|k| !new.contains_key(*k))
        .map(|k| k.to_string())
        .collect();
    let changed = new
        .iter()
        .filter(|(k, d)| old.get(*k).is_some_and(|o| o != *d))
        .map(|(k, _)| k.to_string())
        .collect();
    (added, removed, changed)
}

/// The waves `run` would release, each as if the one before finished healthy: the real
/// decision (`waves::decide`) asked again with a record of the waves so far.
fn fan_out_plan(
    key: &ConfigKey,
    after: &Arc<Cache>,
    rolling: &[&Workload],
    settings: &Settings,
) -> (Vec<Vec<String>>, String) {
    if rolling.is_empty() {
        return (Vec::new(), "rolls nothing".into());
    }
    let judge = Judge {
        cache: Arc::clone(after),
        fan_out: settings.fan_out.clone(),
        hmac_key: settings.hmac_key.clone(),
        absent_is_filtered: false,
        baselines: Default::default(),
    };
    let (Some(change), _) = judge.change(key) else {
        let why = if rolling.len() < 2 {
            "at once: one workload rolls"
        } else {
            "at once: fan-out is at-once (--fan-out or wavelet.dev/fan-out)"
        };
        return (Vec::new(), why.into());
    };
    let ids: Vec<(String, bool)> = rolling
        .iter()
        .map(|w| (workload_id(&w.key), w.entry.gates().canary))
        .collect();
    let done = RolloutStatus::Done;
    let now = settings.now.max(0) as u64;
    let mut planned: Vec<Vec<String>> = Vec::new();
    loop {
        let record = (!planned.is_empty()).then(|| Record {
            hash: change.hash.clone(),
            since: now,
            waves: planned.clone(),
            skipped: Vec::new(),
            held: None,
        });
        let members: Vec<Member> = ids
            .iter()
            .map(|(id, canary)| Member {
                rolled_at: Some(now),
                ..Member::new(
                    id,
                    *canary,
                    planned.iter().flatten().any(|r| r == id),
                    &done,
                )
            })
            .collect();
        match waves::decide(record.as_ref(), &members, change.settings, now) {
            Decision::Release { workloads, .. } if !workloads.is_empty() => planned.push(workloads),
            Decision::NotShared => return (Vec::new(), "at once: one workload rolls".into()),
            _ => break,
        }
    }
    let how = format!(
        "{} wave(s): wave 1 {}, then {} per wave, each after the one before is healthy (--rollout-timeout {}s)",
        planned.len(),
        if ids.iter().any(|(_, c)| *c) { "the canaries" } else { "the first in name order" },
        change.settings.wave_size,
        change.settings.rollout_timeout_secs
    );
    let planned = planned
        .into_iter()
        .map(|wave| wave.iter().map(|id| display_id(id)).collect())
        .collect();
    (planned, how)
}

fn delete_mode(
    key: &ConfigKey,
    entry: Option<&ConfigEntry>,
    change: Change,
    world: &World,
) -> Option<DeleteMode> {
    let entry = entry?;
    let selector_text = entry.pod_delete_match()?;
    let strategy_text = entry.pod_delete_strategy();
    let mut out = DeleteMode {
        selector: selector_text.to_string(),
        strategy: strategy_text.unwrap_or("evict").to_string(),
        pods: None,
        problem: None,
    };
    let selector = match validate_selector(selector_text) {
        Ok(s) => s,
        Err(why) => {
            out.problem = Some(why);
            return Some(out);
        }
    };
    if let Err(why) = Strategy::parse(strategy_text) {
        out.problem = Some(why);
        return Some(out);
    }
    if change != Change::Data {
        out.problem = Some("its data does not change: no Pod is replaced".into());
        return Some(out);
    }
    out.pods = world.pods.as_ref().map(|pods| {
        let mut names: Vec<String> = pods
            .iter()
            .filter(|(ns, pod)| *ns == *key.namespace && selector.matches(&pod.metadata.labels))
            .map(|(_, pod)| pod.metadata.name.clone())
            .collect();
        names.sort();
        names
    });
    Some(out)
}

/// When `w` rolls and why, as `run`'s gates decide: pauses, then waves, then its window.
fn when_of(
    w: &Workload,
    after: &Cache,
    waves: &[(String, usize)],
    world: &World,
    proposed: &[(ConfigKind, ConfigObject)],
    settings: &Settings,
) -> (When, String) {
    let resolved = counted(after, &w.key, &w.entry);
    let namespace_gates = after.namespace_gates(&w.key.namespace);
    let paused_configs: Vec<String> = resolved
        .iter()
        .filter(|(_, e)| e.as_ref().is_some_and(|e| e.gates().pause))
        .map(|(r, _)| r.config.to_string())
        .collect();
    if let Some(by) = gates::paused_by(
        world.paused_since,
        namespace_gates
            .as_ref()
            .filter(|g| g.pause)
            .map(|_| &*w.key.namespace),
        w.entry.gates().pause,
        &paused_configs,
    ) {
        return (When::Paused { by: by.clone() }, format!("paused: {by}"));
    }
    // A fan-out under way of another object it uses (as recorded for that object's
    // current data): held, or not yet at its wave.
    let id = workload_id(&w.key);
    let changed = |config: &ConfigKey| {
        proposed.iter().any(|(kind, o)| {
            *kind == config.kind
                && o.metadata.namespace == *config.namespace
                && o.metadata.name == *config.name
        })
    };
    for (reference, entry) in &resolved {
        let (Some(entry), false) = (entry, changed(&reference.config)) else {
            continue;
        };
        let object = reference.config.to_string();
        let data = hash::data_hash(
            entry.digests().unwrap_or_default(),
            settings.hmac_key.as_deref(),
        );
        let Some((_, record)) = world
            .fan_outs
            .iter()
            .find(|(o, r)| *o == object && r.hash == data)
        else {
            continue;
        };
        let fan_out = format!("{object}'s fan-out");
        if let Some(hold) = &record.held {
            let why = format!(
                "held: {fan_out} stopped at {} ({}); `wavelet resume -n {} {}/{}` goes on",
                display_id(&hold.workload),
                hold.reason,
                reference.config.namespace,
                reference.config.kind.as_str(),
                reference.config.name
            );
            let reason = hold.reason.clone();
            return (When::Held { fan_out, reason }, why);
        }
        if !record.released(&id) {
            let wave = record.waves.len() + 1;
            let why = format!(
                "waits for wave {} of {fan_out}, under way: rolls in wave {wave} at the earliest",
                record.waves.len()
            );
            return (When::AfterWave { fan_out, wave }, why);
        }
    }
    let namespace_window = namespace_gates.as_ref().and_then(|g| g.window.as_deref());
    let (windows, problems) = gates::window_for(
        &[
            (w.entry.gates().window.as_deref(), "the workload"),
            (namespace_window, "its Namespace"),
        ],
        settings.fan_out.restart_window.as_ref(),
    );
    let mut notes: Vec<String> = problems
        .iter()
        .map(|(place, why)| {
            format!("the restart window of {place} cannot be read ({why}): the next one applies")
        })
        .collect();
    // An urgent change of an object it counts goes through the window.
    let urgent = proposed.iter().any(|(kind, object)| {
        let key = ConfigKey::new(*kind, &object.metadata.namespace, &object.metadata.name);
        resolved.iter().any(|(r, e)| {
            r.config == key
                && e.as_ref().is_some_and(|e| {
                    let data = hash::data_hash(
                        e.digests().unwrap_or_default(),
                        settings.hmac_key.as_deref(),
                    );
                    matches!(
                        gates::urgent(e.gates().urgent.as_deref(), None, &data),
                        UrgentDecision::Granted(_)
                    )
                })
        })
    });
    if urgent {
        notes.push("wavelet.dev/urgent lets it through its restart window".into());
    }
    let last = waves.iter().max_by_key(|(_, wave)| *wave);
    let window = gates::outside_window(windows.as_ref(), urgent, settings.now);
    let (when, mut why) = match (last, window) {
        (Some((object, wave)), window) if *wave > 1 => {
            let mut why = format!(
                "wave {wave} of {object}'s fan-out: rolls once wave {} is healthy",
                wave - 1
            );
            if let Some(windows) = &windows {
                why.push_str(&format!(", within its restart window {windows}"));
            }
            if let Some(gates::Pending::Window { opens_at, .. }) = &window {
                why.push_str(&format!(
                    " (closed now; it opens next at {})",
                    crate::time::rfc3339((*opens_at).max(0) as u64)
                ));
            }
            (
                When::AfterWave {
                    fan_out: format!("{object}'s fan-out"),
                    wave: *wave,
                },
                why,
            )
        }
        (_, Some(gates::Pending::Window { opens_at, windows })) => {
            let at = crate::time::rfc3339(opens_at.max(0) as u64);
            let why = format!(
                "outside its restart window {windows}: rolls when it opens at {at} (in {})",
                gates::human(opens_at.saturating_sub(settings.now).max(0) as u64)
            );
            (
                When::Window {
                    opens_at: at,
                    windows,
                },
                why,
            )
        }
        (Some((object, _)), _) => (
            When::Now,
            format!("wave 1 of {object}'s fan-out: rolls now"),
        ),
        (None, _) => (When::Now, "rolls now".to_string()),
    };
    for note in notes {
        why.push_str("; ");
        why.push_str(&note);
    }
    (when, why)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::impact::input::{read, Documents};

    const MONDAY_3AM_UTC: i64 = 1_767_582_000; // 2026-01-05T03:00:00Z

    fn docs(text: &str) -> Documents {
        let mut out = Documents::default();
        read(text, "test", "team", &mut out).unwrap();
        out
    }

    /// A Deployment: `uses` is the pod spec's container `env`/`envFrom` YAML.
    fn deployment(name: &str, annotations: &str, container: &str) -> String {
        format!(
            "---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: {name}, annotations: {{{annotations}}}}}\n\
             spec: {{template: {{spec: {{containers: [{{name: c, image: i, {container}}}]}}}}}}\n"
        )
    }

    const OPT_IN: &str = "wavelet.dev/update-on-config-change: 'true'";

    /// Team's ConfigMaps a {x, y} and b {z}; web-1, web-2 use every key of a, only-x its
    /// key x, uses-b b, not-opted-in every key of a without opting in.
    fn world() -> World {
        let mut text = String::from(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {x: '1', y: '1'}\n---\n\
             apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\ndata: {z: '1'}\n",
        );
        let all_of_a = "envFrom: [{configMapRef: {name: a}}]";
        text += &deployment("web-1", OPT_IN, all_of_a);
        text += &deployment("web-2", OPT_IN, all_of_a);
        text += &deployment(
            "only-x",
            OPT_IN,
            "env: [{name: X, valueFrom: {configMapKeyRef: {name: a, key: x}}}]",
        );
        text += &deployment("uses-b", OPT_IN, "envFrom: [{configMapRef: {name: b}}]");
        text += &deployment("not-opted-in", "", all_of_a);
        let read = docs(&text);
        World {
            configs: read.configs,
            workloads: read.workloads,
            namespaces: vec![NamespaceDoc {
                name: "team".into(),
                ..NamespaceDoc::default()
            }],
            pods: Some(Vec::new()),
            paused_since: None,
            fan_outs: Vec::new(),
        }
    }

    fn a_with(data: &str, annotations: &str) -> Vec<(ConfigKind, ConfigObject)> {
        docs(&format!(
            "kind: ConfigMap\nmetadata: {{name: a, annotations: {{{annotations}}}}}\ndata: {{{data}}}\n"
        ))
        .configs
    }

    fn settings() -> Settings {
        Settings {
            now: MONDAY_3AM_UTC,
            ..Settings::default()
        }
    }

    fn names(affected: &[Affected]) -> Vec<&str> {
        affected.iter().map(|a| a.workload.as_str()).collect()
    }

    #[test]
    fn a_changed_key_rolls_the_workloads_that_use_it_and_names_those_that_do_not() {
        let impact = plan(&world(), &a_with("x: '1', y: '2'", ""), &settings());
        let a = &impact.objects[0];
        assert_eq!(a.object, "configmap team/a");
        assert_eq!(a.change, Change::Data);
        assert_eq!(a.keys_changed, ["y"]);
        assert_eq!(
            names(&a.rolls),
            ["deployment team/web-1", "deployment team/web-2"]
        );
        assert_eq!(a.rolls[0].why, "uses every key; changed: y");
        assert_eq!(names(&a.rolls_not), ["deployment team/only-x"]);
        assert_eq!(a.rolls_not[0].why, "uses only key x, unchanged");
        // Two workloads: a fan-out, the first in name order, then the rest.
        assert_eq!(
            a.waves,
            [vec!["deployment team/web-1"], vec!["deployment team/web-2"]]
        );
        assert_eq!(impact.rolls(), 2);
        assert_eq!(impact.workloads[0].when, When::Now);
        assert_eq!(
            impact.workloads[1].when,
            When::AfterWave {
                fan_out: "configmap team/a's fan-out".into(),
                wave: 2
            }
        );
    }

    #[test]
    fn an_unchanged_or_metadata_only_object_rolls_nothing() {
        for (annotations, change) in [
            ("", Change::Unchanged),
            ("wavelet.dev/pause: 'true'", Change::MetadataOnly),
        ] {
            let impact = plan(
                &world(),
                &a_with("x: '1', y: '1'", annotations),
                &settings(),
            );
            assert_eq!(impact.objects[0].change, change);
            assert!(impact.objects[0].rolls.is_empty());
            assert_eq!(impact.rolls(), 0);
            assert_eq!(impact.objects[0].fan_out, "rolls nothing");
        }
    }

    #[test]
    fn removing_a_key_a_workload_requires_does_not_roll_it_and_says_why() {
        let impact = plan(&world(), &a_with("y: '1'", ""), &settings());
        let a = &impact.objects[0];
        assert_eq!(a.keys_removed, ["x"]);
        let only_x = a
            .rolls_not
            .iter()
            .find(|w| w.workload == "deployment team/only-x")
            .unwrap();
        assert_eq!(
            only_x.why,
            "not rolled: after the change configmap team/a has no key \"x\" (its Pods could not start; wavelet warns instead)"
        );
        assert_eq!(
            names(&a.rolls),
            ["deployment team/web-1", "deployment team/web-2"]
        );
    }

    #[test]
    fn a_new_object_rolls_the_workloads_that_wait_for_it() {
        let mut world = world();
        world.workloads.extend(
            docs(&deployment(
                "waits",
                OPT_IN,
                "envFrom: [{configMapRef: {name: c}}]",
            ))
            .workloads,
        );
        let c = docs("kind: ConfigMap\nmetadata: {name: c}\ndata: {k: v}\n").configs;
        let impact = plan(&world, &c, &settings());
        assert_eq!(impact.objects[0].change, Change::New);
        assert_eq!(names(&impact.objects[0].rolls), ["deployment team/waits"]);
        assert!(
            impact.objects[0].rolls[0]
                .why
                .starts_with("waits for it (missing configmap team/c)"),
            "{:?}",
            impact.objects[0].rolls[0]
        );
        assert_eq!(impact.objects[0].fan_out, "at once: one workload rolls");
    }

    #[test]
    fn a_closed_restart_window_says_when_it_opens_and_a_pause_holds_all() {
        let mut settings = settings();
        settings.fan_out.restart_window =
            Some(crate::window::Windows::parse("Sat 01:00-02:00").unwrap());
        let impact = plan(&world(), &a_with("x: '2', y: '1'", ""), &settings);
        // x changed: every user of a rolls, three of them.
        assert_eq!(impact.rolls(), 3);
        let first = &impact.workloads[0];
        assert_eq!(first.workload, "deployment team/only-x");
        assert_eq!(
            first.when,
            When::Window {
                opens_at: "2026-01-10T01:00:00Z".into(),
                windows: "Sat 01:00-02:00".into()
            }
        );
        let mut world = world();
        world.paused_since = Some(1_767_500_000);
        let impact = plan(&world, &a_with("x: '2', y: '1'", ""), &settings);
        assert!(impact
            .workloads
            .iter()
            .all(|w| matches!(w.when, When::Paused { .. })));
    }

    #[test]
    fn a_held_fan_out_of_another_object_it_uses_holds_it() {
        // web-2 also uses b, whose fan-out (of b's current data) is held.
        let mut world = world();
        world.workloads.retain(|(_, w)| w.metadata.name != "web-2");
        world.workloads.extend(
            docs(&deployment(
                "web-2",
                OPT_IN,
                "envFrom: [{configMapRef: {name: a}}, {configMapRef: {name: b}}]",
            ))
            .workloads,
        );
        let b = world
            .configs
            .iter()
            .find(|(_, o)| o.metadata.name == "b")
            .unwrap();
        let record = Record {
            hash: hash::data_hash(b.1.digests(), None),
            since: 1_767_500_000,
            waves: vec![vec!["deployments.apps/team/uses-b".into()]],
            skipped: Vec::new(),
            held: Some(crate::hashmode::fanout::record::Hold {
                workload: "deployments.apps/team/uses-b".into(),
                reason: "its rollout failed".into(),
            }),
        };
        world.fan_outs = vec![("configmap team/b".into(), record.clone())];
        let impact = plan(&world, &a_with("x: '1', y: '2'", ""), &settings());
        let web_2 = impact
            .workloads
            .iter()
            .find(|w| w.workload == "deployment team/web-2")
            .unwrap();
        assert_eq!(
            web_2.when,
            When::Held {
                fan_out: "configmap team/b's fan-out".into(),
                reason: "its rollout failed".into()
            }
        );
        assert!(
            web_2.why.contains("`wavelet resume -n team configmap/b`"),
            "{}",
            web_2.why
        );
        // Recorded by a run with --hash-key-file: recognised with the same key only.
        world.fan_outs[0].1.hash = hash::data_hash(b.1.digests(), Some(b"key"));
        let impact = plan(&world, &a_with("x: '1', y: '2'", ""), &settings());
        let web_2 = impact
            .workloads
            .iter()
            .find(|w| w.workload == "deployment team/web-2")
            .unwrap();
        assert!(matches!(web_2.when, When::AfterWave { .. }), "{web_2:?}");
        let mut keyed = settings();
        keyed.hmac_key = Some(b"key".to_vec());
        let impact = plan(&world, &a_with("x: '1', y: '2'", ""), &keyed);
        let web_2 = impact
            .workloads
            .iter()
            .find(|w| w.workload == "deployment team/web-2")
            .unwrap();
        assert!(matches!(web_2.when, When::Held { .. }), "{web_2:?}");
        world.fan_outs[0].1.hash = hash::data_hash(b.1.digests(), None);
        // The same fan-out under way, web-2 not released yet: after its current wave.
        world.fan_outs[0].1.held = None;
        let impact = plan(&world, &a_with("x: '1', y: '2'", ""), &settings());
        let web_2 = impact
            .workloads
            .iter()
            .find(|w| w.workload == "deployment team/web-2")
            .unwrap();
        assert!(
            matches!(web_2.when, When::AfterWave { wave: 2, .. }),
            "{web_2:?}"
        );
        // A record of other data of b says nothing: only a's own fan-out places it.
        world.fan_outs[0].1.hash = "other".into();
        let impact = plan(&world, &a_with("x: '1', y: '2'", ""), &settings());
        let web_2 = impact
            .workloads
            .iter()
            .find(|w| w.workload == "deployment team/web-2")
            .unwrap();
        assert_eq!(
            web_2.when,
            When::AfterWave {
                fan_out: "configmap team/a's fan-out".into(),
                wave: 2
            }
        );
    }

    #[test]
    fn canaries_make_the_first_wave_and_the_wave_size_the_rest() {
        let mut world = world();
        let canary = format!("{OPT_IN}, wavelet.dev/canary: 'true'");
        let mut text = String::new();
        for i in 0..6 {
            let annotations = if i == 4 { canary.as_str() } else { OPT_IN };
            text += &deployment(
                &format!("w-{i}"),
                annotations,
                "envFrom: [{configMapRef: {name: b}}]",
            );
        }
        world.workloads = docs(&text).workloads;
        let b = docs("kind: ConfigMap\nmetadata: {name: b, annotations: {wavelet.dev/wave-size: '2'}}\ndata: {z: '2'}\n").configs;
        let impact = plan(&world, &b, &settings());
        let waves: Vec<Vec<&str>> = impact.objects[0]
            .waves
            .iter()
            .map(|w| {
                w.iter()
                    .map(|n| n.trim_start_matches("deployment team/"))
                    .collect()
            })
            .collect();
        assert_eq!(
            waves,
            [
                vec!["w-4"],
                vec!["w-0", "w-1"],
                vec!["w-2", "w-3"],
                vec!["w-5"]
            ]
        );
        assert_eq!(impact.workloads.len(), 6);
    }

    #[test]
    fn a_namespace_outside_the_selector_is_not_acted_on() {
        let mut settings = settings();
        settings.namespace_selector = Some(Selector::parse("tier=web").unwrap());
        let impact = plan(&world(), &a_with("x: '1', y: '2'", ""), &settings);
        assert_eq!(impact.rolls(), 0);
        assert!(impact.objects[0].rolls_not[0]
            .why
            .contains("outside --namespace-selector"));
        let mut world = world();
        world.namespaces[0]
            .labels
            .insert("tier".into(), "web".into());
        assert_eq!(
            plan(&world, &a_with("x: '1', y: '2'", ""), &settings).rolls(),
            2
        );
    }

    #[test]
    fn delete_mode_names_the_pods_its_selector_matches() {
        let mut world = world();
        let pod = |name: &str, app: &str| -> (String, Pod) {
            let pod: Pod = serde_json::from_value(serde_json::json!({
                "metadata": {"name": name, "labels": {"app": app}}
            }))
            .unwrap();
            ("team".to_string(), pod)
        };
        world.pods = Some(vec![pod("front-1", "front"), pod("back-1", "back")]);
        let a = a_with("x: '1', y: '2'", "wavelet.dev/pod-delete-match: app=front");
        let impact = plan(&world, &a, &settings());
        let delete = impact.objects[0].delete_mode.as_ref().unwrap();
        assert_eq!(delete.pods.as_deref(), Some(&["front-1".to_string()][..]));
        assert_eq!(delete.strategy, "evict");
        world.pods = None;
        let impact = plan(&world, &a, &settings());
        assert_eq!(impact.objects[0].delete_mode.as_ref().unwrap().pods, None);
    }
}
