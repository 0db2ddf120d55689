//! Safe fan-out: a change of a ConfigMap or Secret that several workloads use rolls them
//! in waves behind a health gate (`waves`); pauses and restart windows hold rollouts as
//! pending (`gates`); what was decided is kept in `wavelet-state` (`record`), so a
//! restarted wavelet or a new leader goes on exactly where the last one was. A first wave
//! is the exception: its PATCHes go first, each carrying the change's mark on the workload
//! (`record::Mark`), and its record follows ([`FanOuts::write_released`]); until then the
//! record is in memory, and a restart finds the wave by its marks (`waves::recovered`).
//!
//! [`FanOuts`] is asked by hash mode's reconcile, for a workload whose hash is due to
//! change, whether it may roll now ([`FanOuts::check`]), and told of every workload found
//! up to date ([`FanOuts::observe`]): a workload of a fan-out's current wave finishing
//! (or failing) its rollout is what releases the next wave (or holds the rest). A fan-out
//! belongs to the object whose change made the workloads due (`baseline`); a workload
//! waiting on its own (pause, pause period, restart window) joins no wave; records of
//! objects and workloads gone are dropped (`tidy`). The I/O is here; every decision is
//! one of the pure functions of `waves`, `gates`, `baseline` and `tidy`.

pub(crate) mod baseline;
pub(crate) mod gates;
pub(crate) mod record;
pub(crate) mod tidy;
mod warned;
pub(crate) mod waves;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::config::{parse_fan_out, FanOut, WaveSize};
use crate::error::Error;
use crate::hashmode::fanout::baseline::Baselines;
use crate::hashmode::fanout::gates::{Pending, UrgentDecision};
use crate::hashmode::fanout::record::{workload_id, Mark, Record, Urgent, FANOUT, URGENT};
use crate::hashmode::fanout::warned::Warned;
use crate::hashmode::fanout::waves::{Decision, Member, Settings};
use crate::hashmode::throttle::Debounce;
use crate::model::cache::{Cache, ConfigEntry};
use crate::model::counted::counted;
use crate::model::hash;
use crate::model::rollout_status::RolloutStatus;
use crate::model::state::{object_key, StateConfigMap, Written, PAUSE_KEY};

/// Decisions of one fan-out step in a row that find their record changed by another
/// writer before wavelet gives up (an error, retried by the work queue).
const MAX_DECISIONS: usize = 3;
use crate::model::workload::WorkloadEntry;
use crate::objects::{ConfigKey, WorkloadKey};
use crate::ops::events::{ObjectRef, Recorder};
use crate::ops::metrics;

/// What hash mode needs to judge the workloads of a change as `run` does.
#[derive(Clone)]
pub struct Judge {
    pub cache: Arc<Cache>,
    pub fan_out: FanOut,
    pub hmac_key: Option<Vec<u8>>,
    /// `--resource-label-selector`: an absent object is filtered out, not missing.
    pub absent_is_filtered: bool,
    /// What each workload last ran with: which object's change made it due.
    pub baselines: Baselines,
}

/// The hash a dependent records: on it in the cache, or (its first 8 bytes) our adoption
/// the cache does not show yet.
enum Recorded<'a> {
    Full(&'a str),
    Short(u64),
}

/// One workload that uses a changed object, as the cache shows it.
#[derive(Debug, Clone)]
pub struct Dependent {
    pub key: WorkloadKey,
    pub id: String,
    pub canary: bool,
    /// Not due for this object's change: it carries the hash of its current configuration,
    /// or it is due for another object's change only (`baseline`).
    pub current: bool,
    pub status: RolloutStatus,
    /// Its mark of the first wave of a change of this object (`wavelet.dev/first-wave-of`),
    /// if its last rollout was one.
    pub first_wave: Option<Mark>,
}

/// A change of one shared ConfigMap or Secret that rolls in waves.
#[derive(Debug, Clone)]
pub struct Change {
    pub config: ConfigKey,
    pub entry: Arc<ConfigEntry>,
    /// Its data hash (what a record is about).
    pub hash: String,
    pub settings: Settings,
}

impl Judge {
    /// The change of `config` as a fan-out: `None` when it is not one (fan-out `at-once`,
    /// fewer than two workloads use it, or its data is not read yet). Unreadable
    /// annotations are returned as problems (the global setting applies instead).
    /// Whether a change of `config` is a fan-out: waves (`--fan-out`, or its
    /// `wavelet.dev/fan-out`) and two or more workloads that use it, as [`Judge::change`]
    /// decides.
    pub fn fans_out(&self, config: &ConfigKey) -> bool {
        let Some(entry) = self.cache.config(config) else {
            return false;
        };
        let waves = match entry.gates().fan_out.as_deref().map(parse_fan_out) {
            Some(Ok(waves)) => waves,
            _ => self.fan_out.waves,
        };
        waves && self.cache.dependents(config).len() >= 2
    }

    pub fn change(&self, config: &ConfigKey) -> (Option<Change>, Vec<String>) {
        let mut problems = Vec::new();
        let Some(entry) = self.cache.config(config) else {
            return (None, problems);
        };
        let gates = entry.gates();
        let waves = match gates.fan_out.as_deref().map(parse_fan_out) {
            Some(Ok(waves)) => waves,
            Some(Err(why)) => {
                problems.push(format!("wavelet.dev/fan-out on {config}: {why}"));
                self.fan_out.waves
            }
            None => self.fan_out.waves,
        };
        let wave_size = match gates.wave_size.as_deref().map(WaveSize::parse) {
            Some(Ok(size)) => size,
            Some(Err(why)) => {
                problems.push(format!("wavelet.dev/wave-size on {config}: {why}"));
                self.fan_out.wave_size
            }
            None => self.fan_out.wave_size,
        };
        let Some(digests) = entry.digests() else {
            return (None, problems);
        };
        if !waves || self.cache.dependents(config).len() < 2 {
            return (None, problems);
        }
        let change = Change {
            config: config.clone(),
            hash: hash::data_hash(digests, self.hmac_key.as_deref()),
            settings: Settings {
                first_wave: self.fan_out.first_wave,
                wave_size,
                rollout_timeout_secs: self.fan_out.rollout_timeout.as_secs().max(1),
            },
            entry,
        };
        (Some(change), problems)
    }

    /// The opted-in, adopted workloads that count `config`, each with whether it carries
    /// the hash of its current configuration and how its rollout is doing.
    pub fn dependents(&self, config: &ConfigKey) -> Vec<Dependent> {
        let mut out = Vec::new();
        for key in self.cache.dependents(config) {
            let Some(entry) = self.cache.workload(&key) else {
                continue;
            };
            if entry.flavor.is_none() || !self.cache.in_scope(&key.namespace) {
                continue;
            }
            // The hash it records: the cache's, or, while the cache does not show our
            // adoption of it yet (a change right after the adoption PATCH), the one we
            // wrote; it is a dependent either way, or it would roll outside the waves.
            // Not adopted at all: adoption rolls nothing.
            let (recorded, before) = match entry.recorded_hash() {
                Some(recorded) => (
                    Recorded::Full(recorded),
                    self.baselines.of(&key, Some(recorded)),
                ),
                None => match self.baselines.newest(&key) {
                    Some((written, parts)) => (Recorded::Short(written), Some(parts)),
                    None => continue,
                },
            };
            let resolved = counted(&self.cache, &key, &entry);
            if !resolved.iter().any(|(r, _)| r.config == *config) {
                continue;
            }
            // Data not read yet: it cannot be told up to date, so it counts as due.
            let unread = resolved
                .iter()
                .any(|(_, e)| e.as_ref().is_some_and(|e| !e.is_current()));
            let computed = hash::compute(
                resolved
                    .iter()
                    .map(|(r, e)| (r, e.as_ref().and_then(|e| e.digests()))),
                self.hmac_key.as_deref(),
            );
            if !computed.missing.is_empty() && !self.absent_is_filtered {
                continue; // held by its missing configuration, not by the fan-out
            }
            let id = workload_id(&key);
            let differs = match recorded {
                Recorded::Full(recorded) => recorded != computed.hash,
                Recorded::Short(written) => written != baseline::short(&computed.hash),
            };
            let due = (unread || differs)
                && baseline::changed(config, &baseline::parts(&resolved), before.as_deref());
            let first_wave = Mark::of(entry.gates().first_wave_of.as_deref(), config);
            out.push(Dependent {
                id,
                canary: entry.gates().canary,
                current: !due,
                status: entry.rollout.clone(),
                first_wave,
                key,
            });
        }
        out.sort_by(|a, b| a.id.cmp(&b.id));
        out
    }

    /// The record of `change` in `state`, if it is about this data.
    pub fn record(state: &StateConfigMap, change: &Change) -> Result<Option<Record>, Error> {
        Ok(state
            .get(&object_key(FANOUT, &change.config))?
            .and_then(|text| Record::decode(&text))
            .filter(|r| r.hash == change.hash))
    }
}

/// What `wavelet status` shows of a workload whose hash is due to change: why it waits, if
/// it does — the decisions of [`FanOuts::check`], read-only (nothing recorded).
pub fn pending_of(
    judge: &Judge,
    state: Option<&StateConfigMap>,
    key: &WorkloadKey,
    entry: &WorkloadEntry,
    now: u64,
) -> Option<Pending> {
    let resolved = counted(&judge.cache, key, entry);
    let global = state
        .and_then(|s| s.get(PAUSE_KEY).ok().flatten())
        .map(|e| record::paused_since(&e));
    let namespace_gates = judge.cache.namespace_gates(&key.namespace);
    let paused_configs: Vec<String> = resolved
        .iter()
        .filter(|(_, e)| e.as_ref().is_some_and(|e| e.gates().pause))
        .map(|(r, _)| r.config.to_string())
        .collect();
    if let Some(by) = gates::paused_by(
        global,
        namespace_gates
            .as_ref()
            .filter(|g| g.pause)
            .map(|_| &*key.namespace),
        entry.gates().pause,
        &paused_configs,
    ) {
        return Some(Pending::Paused(by));
    }
    let id = workload_id(key);
    let parts = baseline::parts(&resolved);
    let before = judge.baselines.of(key, entry.recorded_hash());
    for (reference, _) in &resolved {
        if !baseline::changed(&reference.config, &parts, before.as_deref()) {
            continue;
        }
        let (Some(change), _) = judge.change(&reference.config) else {
            continue;
        };
        let name = format!("{}'s fan-out", change.config);
        let record = state.and_then(|s| Judge::record(s, &change).ok().flatten());
        // Without a record, the dependents say what was released: the first wave their
        // marks name (`waves::recovered`), or what the first decision would release.
        let dependents = match record {
            Some(_) => Vec::new(),
            None => judge.dependents(&change.config),
        };
        let members: Vec<Member> = dependents
            .iter()
            .map(|d| Member {
                first_wave: d.first_wave.as_ref(),
                ..Member::new(&d.id, d.canary, d.current, &d.status)
            })
            .collect();
        let record = record.or_else(|| waves::recovered(&change.hash, &members));
        if let Some(record) = &record {
            if let Some(hold) = &record.held {
                return Some(Pending::Held {
                    fan_out: name,
                    reason: hold_text(&change, hold),
                });
            }
            if record.released(&id) {
                continue;
            }
            return Some(Pending::Wave {
                fan_out: name,
                wave: record.waves.len() + 1,
            });
        }
        if let Decision::Release { workloads, .. } =
            waves::decide(None, &members, change.settings, now)
        {
            if !workloads.contains(&id) {
                return Some(Pending::Wave {
                    fan_out: name,
                    wave: 2,
                });
            }
        }
    }
    let namespace_window = namespace_gates.as_ref().and_then(|g| g.window.as_deref());
    let (windows, _) = gates::window_for(
        &[
            (entry.gates().window.as_deref(), "the workload"),
            (namespace_window, "its Namespace"),
        ],
        judge.fan_out.restart_window.as_ref(),
    );
    gates::outside_window(windows.as_ref(), false, now as i64)
}

/// What a workload held by a fan-out says: which change, which workload failed, how to
/// go on (the reason itself is in the Events and in `status`'s fan-out table).
fn hold_text(change: &Change, hold: &record::Hold) -> String {
    format!(
        "change {} stopped: {} failed its rollout; fix the {} or `wavelet resume -n {} {}/{}`",
        hash::short(&change.hash),
        record::display_id(&hold.workload),
        change.config.kind.kind(),
        change.config.namespace,
        change.config.kind.as_str(),
        change.config.name
    )
}

/// The fan-outs recorded in `state`: (ConfigMap/Secret as named in its key, record).
pub fn recorded(state: &StateConfigMap) -> Vec<(String, Record)> {
    state
        .entries(&format!("{FANOUT}."))
        .unwrap_or_default()
        .into_iter()
        .filter_map(|(k, v)| {
            let rest = k.strip_prefix(&format!("{FANOUT}."))?.to_string();
            let mut parts = rest.splitn(3, '.');
            let name = format!("{} {}/{}", parts.next()?, parts.next()?, parts.next()?);
            Some((name, Record::decode(&v)?))
        })
        .collect()
}

/// What a tidying pass sees of the cluster: wavelet's cache.
struct CachePresent<'a> {
    cache: &'a Cache,
    judge: &'a Judge,
    lists: &'a dyn Fn(&ConfigKey) -> bool,
    workloads: HashSet<String>,
}

impl tidy::Present for CachePresent<'_> {
    fn object(&self, key: &ConfigKey) -> Option<bool> {
        if !(self.lists)(key) || self.cache.configs_relisting() {
            return None;
        }
        Some(self.cache.config(key).is_some())
    }

    fn workload(&self, id: &str) -> bool {
        self.workloads.contains(id)
    }

    fn fans_out(&self, key: &ConfigKey) -> bool {
        self.judge.fans_out(key)
    }
}

/// How one fan-out gates one workload: `Ok` released by a wave, `Err((why, recheck))`
/// waiting.
type Gate = Result<Released, (Pending, Option<Duration>)>;

/// A workload a fan-out's wave released.
#[derive(Debug)]
struct Released {
    /// Which wave of which fan-out, for its Event.
    note: String,
    /// The first wave's mark, which its rollout carries (`record::Mark`).
    mark: Option<Mark>,
}

impl Released {
    /// `id`, released by `record` (of `change`): wave 1, while it is the current wave,
    /// carries the change's mark.
    fn by(change: &Change, record: &Record, id: &str) -> Option<Released> {
        let wave = record.wave_of(id)?;
        Some(Released {
            note: format!("wave {wave} of {}'s fan-out", change.config),
            mark: (wave == 1 && record.waves.len() == 1)
                .then(|| Mark::new(&change.config, &change.hash, record.since)),
        })
    }
}

/// What [`FanOuts::check`] says of one rollout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Roll now; the note says which wave released it, if one did; `marks` are the first
    /// waves it is part of, which its rollout carries (`wavelet.dev/first-wave-of`).
    Go {
        note: Option<String>,
        marks: Vec<Mark>,
    },
    /// Pending; look again after `requeue` (a window opening, a timeout), or when woken.
    Wait {
        pending: Pending,
        requeue: Option<Duration>,
    },
}

#[derive(Default)]
struct Memory {
    /// When each released workload was first seen carrying its new hash (Unix seconds).
    rolled_at: waves::RolledAt,
    /// The API server's refusal of each workload's last rollout, while it is refused.
    refused: HashMap<WorkloadKey, String>,
    /// The workloads waiting now, and why (for `/metrics` and one Event per reason).
    pending: HashMap<WorkloadKey, Pending>,
    /// Annotations that cannot be read, told once while they stand: a workload's restart
    /// window, an object's fan-out settings.
    warned_workloads: Warned<WorkloadKey>,
    warned_objects: Warned<ConfigKey>,
    /// First waves released here whose record is not written yet, by state key: their
    /// PATCHes go first, carrying their marks; the record follows
    /// ([`FanOuts::write_released`]).
    unwritten: HashMap<String, Unwritten>,
}

/// The record of a first wave released here, not written yet, the entry it was decided
/// from (what its write must still find), and the leader term it was decided in (in a
/// later term another leader may have gone on from the wave's marks: it is dropped).
#[derive(Debug, Clone)]
struct Unwritten {
    record: Record,
    stored: Option<String>,
    term: u64,
}

/// The coordinator of fan-outs, pauses and windows for `wavelet run`.
pub struct FanOuts {
    judge: Judge,
    state: Arc<StateConfigMap>,
    recorder: Recorder,
    /// Enqueues a workload ahead of the line (a released wave, a lifted hold): the other
    /// workloads of its fan-out are only told to wait for it.
    wake: Box<dyn Fn(WorkloadKey) + Send + Sync>,
    /// Hash mode's debounce windows: a workload whose own window (its pause period) is
    /// still open waits on its own.
    debounce: Arc<Debounce<WorkloadKey>>,
    /// The leader term now (`ops::leader::Gate::term`; always 0 without leader election).
    term: Box<dyn Fn() -> u64 + Send + Sync>,
    /// One fan-out decision (and its record's write) at a time.
    deciding: Mutex<()>,
    /// Since when each stale entry has been seen stale, and when the last pass ran.
    tidying: Mutex<(
        HashMap<String, std::time::Instant>,
        Option<std::time::Instant>,
    )>,
    memory: Mutex<Memory>,
}

impl FanOuts {
    pub fn new(
        judge: Judge,
        state: Arc<StateConfigMap>,
        recorder: Recorder,
        wake: Box<dyn Fn(WorkloadKey) + Send + Sync>,
        debounce: Arc<Debounce<WorkloadKey>>,
        term: Box<dyn Fn() -> u64 + Send + Sync>,
    ) -> FanOuts {
        FanOuts {
            judge,
            state,
            recorder,
            wake,
            debounce,
            term,
            deciding: Mutex::new(()),
            tidying: Mutex::new((HashMap::new(), None)),
            memory: Mutex::new(Memory::default()),
        }
    }

    /// The workloads pending now, by reason label (`pause`, `window`, `wave`, `held`).
    pub fn pending_counts(&self) -> Vec<(&'static str, usize)> {
        let memory = self.memory.lock().unwrap();
        let mut counts: Vec<(&'static str, usize)> = ["pause", "window", "wave", "held"]
            .into_iter()
            .map(|label| (label, 0))
            .collect();
        for pending in memory.pending.values() {
            if let Some(c) = counts.iter_mut().find(|(l, _)| *l == pending.label()) {
                c.1 += 1;
            }
        }
        counts
    }

    /// Fan-outs held now, from the copy of the state in memory (every replica watches it);
    /// never a request: `/metrics` and the probes read it.
    pub fn held_count(&self) -> usize {
        self.state
            .cached_entries(&format!("{FANOUT}."))
            .iter()
            .filter(|(_, v)| Record::decode(v).is_some_and(|r| r.held.is_some()))
            .count()
    }

    /// Drops the fan-out records and urgent grants that have been stale (`tidy`) for
    /// `grace` (`--resync`), as delete mode's ledger drops its entries; `lists` says
    /// whether wavelet lists an object's kind and namespace (only there can it see one
    /// gone). Passes run at most four times per `grace`: call it as often as you like.
    pub fn tidy(
        &self,
        now: std::time::Instant,
        grace: Duration,
        lists: &dyn Fn(&ConfigKey) -> bool,
    ) -> Result<(), Error> {
        let entries: HashMap<String, String> = self
            .state
            .cached_entries(&format!("{FANOUT}."))
            .into_iter()
            .chain(self.state.cached_entries(&format!("{URGENT}.")))
            .collect();
        let expired = {
            let mut tidying = self.tidying.lock().unwrap();
            let (marks, last) = &mut *tidying;
            if last.is_some_and(|l| now.saturating_duration_since(l) < grace / 4) {
                return Ok(());
            }
            *last = Some(now);
            let present = CachePresent {
                cache: &self.judge.cache,
                judge: &self.judge,
                lists,
                workloads: self
                    .judge
                    .cache
                    .workload_keys()
                    .iter()
                    .map(workload_id)
                    .collect(),
            };
            crate::model::state::prune_pass(
                entries.keys(),
                marks,
                |key| tidy::stale(key, &entries[key], &present),
                now,
                grace,
            )
        };
        {
            // What was told of objects and workloads gone goes with them.
            let cache = &self.judge.cache;
            let mut memory = self.memory.lock().unwrap();
            memory
                .warned_objects
                .retain(|config| cache.config(config).is_some());
            memory
                .warned_workloads
                .retain(|key| cache.workload(key).is_some());
        }
        for key in expired {
            let value = &entries[&key];
            if self.state.set_if(&key, Some(Some(value)), None)? == Written::Done {
                log::info!(
                    "ConfigMap {}/{}: dropped {key:?}: its object or workloads have been gone for {:?} or more",
                    self.state.namespace(),
                    crate::model::state::STATE_CONFIGMAP,
                    grace
                );
            }
        }
        Ok(())
    }

    /// The workload is forgotten or opted out: not pending any more, nor a dependent.
    pub fn settled(&self, key: &WorkloadKey) {
        self.not_pending(key);
        self.judge.baselines.forget(key);
        let mut memory = self.memory.lock().unwrap();
        if !memory.refused.is_empty() {
            memory.refused.remove(key);
        }
        memory.warned_workloads.forget(key);
    }

    /// The workload carries (or was just given) `hash`, computed from `resolved`: what a
    /// later change is judged by.
    pub fn carries(
        &self,
        key: &WorkloadKey,
        hash: &str,
        resolved: &[crate::model::counted::Counted],
    ) {
        self.judge
            .baselines
            .learn(key, hash, baseline::parts(resolved));
        let mut memory = self.memory.lock().unwrap();
        if !memory.refused.is_empty() {
            memory.refused.remove(key);
        }
    }

    /// The workload was just adopted with `hash`, older than its configuration (as first
    /// seen; it rolls once right after): which objects' parts are behind it is not known,
    /// but until the cache shows the adoption, it is what the workload carries.
    pub fn adopted_before_a_change(&self, key: &WorkloadKey, hash: &str) {
        self.judge.baselines.learn(key, hash, Vec::new());
    }

    /// The API server refused the rollout of `key` (`why`): a fan-out that released it
    /// holds with this reason once `--rollout-timeout` has passed since the release.
    pub fn refused(&self, key: &WorkloadKey, why: &str) {
        self.memory
            .lock()
            .unwrap()
            .refused
            .insert(key.clone(), why.to_string());
    }

    fn not_pending(&self, key: &WorkloadKey) {
        let mut memory = self.memory.lock().unwrap();
        if !memory.pending.is_empty() {
            memory.pending.remove(key);
        }
    }

    /// Whether `key`, due to roll to a new hash, may roll now: pauses first, then the
    /// fan-outs of the shared objects it uses (which may start one, or hold it), then its
    /// restart window.
    pub fn check(
        &self,
        key: &WorkloadKey,
        entry: &WorkloadEntry,
        now: u64,
    ) -> Result<Verdict, Error> {
        let verdict = self.decide(key, entry, now)?;
        let mut memory = self.memory.lock().unwrap();
        match &verdict {
            Verdict::Go { .. } => {
                memory.pending.remove(key);
            }
            Verdict::Wait { pending, .. } => {
                let before = memory.pending.insert(key.clone(), pending.clone());
                if before.as_ref().map(Pending::label) != Some(pending.label()) {
                    let text = pending.describe(now as i64);
                    log::info!("{key}: {text}");
                    if let Some(about) = self.workload_ref(key, entry) {
                        self.recorder.normal(&about, "RolloutPending", &text);
                    }
                }
            }
        }
        Ok(verdict)
    }

    fn decide(&self, key: &WorkloadKey, entry: &WorkloadEntry, now: u64) -> Result<Verdict, Error> {
        let resolved = counted(&self.judge.cache, key, entry);
        // Pauses.
        let namespace_gates = self.judge.cache.namespace_gates(&key.namespace);
        if let Some(by) = self.paused(key, entry, &resolved)? {
            return Ok(Verdict::Wait {
                pending: Pending::Paused(by),
                requeue: None,
            });
        }
        // Fan-outs: those of the objects whose change made it due.
        let mut notes = Vec::new();
        let mut marks = Vec::new();
        let mut rechecks = Vec::new();
        let parts = baseline::parts(&resolved);
        let before = self.judge.baselines.of(key, entry.recorded_hash());
        for (reference, _) in &resolved {
            if !baseline::changed(&reference.config, &parts, before.as_deref()) {
                continue;
            }
            let (change, problems) = self.judge.change(&reference.config);
            self.warn(&reference.config, problems);
            let Some(change) = change else { continue };
            match self.gate_by(key, &change, now)? {
                None => {}
                Some(Ok(released)) => {
                    notes.push(released.note);
                    marks.extend(released.mark);
                }
                Some(Err((pending, recheck))) => {
                    if matches!(pending, Pending::Held { .. }) {
                        return Ok(Verdict::Wait {
                            pending,
                            requeue: None,
                        });
                    }
                    rechecks.push((pending, recheck));
                }
            }
        }
        if let Some((pending, recheck)) = rechecks.into_iter().next() {
            return Ok(Verdict::Wait {
                pending,
                requeue: recheck,
            });
        }
        // Restart window.
        let namespace_window = namespace_gates.as_ref().and_then(|g| g.window.as_deref());
        let (windows, problems) = gates::window_for(
            &[
                (entry.gates().window.as_deref(), "the workload"),
                (namespace_window, "its Namespace"),
            ],
            self.judge.fan_out.restart_window.as_ref(),
        );
        let texts = problems
            .into_iter()
            .map(|(place, why)| format!("wavelet.dev/restart-window on {place} cannot be read: {why}; the next window out applies"))
            .collect();
        let untold = self
            .memory
            .lock()
            .unwrap()
            .warned_workloads
            .stand(key, texts);
        if !untold.is_empty() {
            let about = self.workload_ref(key, entry);
            for text in untold {
                log::warn!("{key}: {text}");
                if let Some(about) = &about {
                    self.recorder.warning(about, "InvalidAnnotation", &text);
                }
            }
        }
        // A grant lets through the change of the object it is on only.
        let changed: Vec<_> = resolved
            .iter()
            .filter(|(r, _)| baseline::changed(&r.config, &parts, before.as_deref()))
            .cloned()
            .collect();
        let urgent = windows.is_some() && self.urgent(&changed)?;
        if let Some(pending) = gates::outside_window(windows.as_ref(), urgent, now as i64) {
            let opens_in = match &pending {
                Pending::Window { opens_at, .. } => (*opens_at - now as i64).max(1) as u64,
                _ => 1,
            };
            return Ok(Verdict::Wait {
                pending,
                requeue: Some(Duration::from_secs(opens_in)),
            });
        }
        if urgent {
            notes.push("wavelet.dev/urgent, past its restart window".into());
        }
        Ok(Verdict::Go {
            note: (!notes.is_empty()).then(|| notes.join("; ")),
            marks,
        })
    }

    /// What pauses `key`, if anything does: the global pause, its Namespace, itself, or a
    /// ConfigMap/Secret it uses.
    fn paused(
        &self,
        key: &WorkloadKey,
        entry: &WorkloadEntry,
        resolved: &[crate::model::counted::Counted],
    ) -> Result<Option<String>, Error> {
        let global = self.state.get(PAUSE_KEY)?.map(|e| record::paused_since(&e));
        let namespace_gates = self.judge.cache.namespace_gates(&key.namespace);
        let paused_configs: Vec<String> = resolved
            .iter()
            .filter(|(_, e)| e.as_ref().is_some_and(|e| e.gates().pause))
            .map(|(r, _)| r.config.to_string())
            .collect();
        Ok(gates::paused_by(
            global,
            namespace_gates
                .as_ref()
                .filter(|g| g.pause)
                .map(|_| &*key.namespace),
            entry.gates().pause,
            &paused_configs,
        ))
    }

    /// Why `key`, due to roll, waits on its own, if it does: paused, in its pause period,
    /// or outside its restart window. Such a workload joins no
    /// wave and gates no one; it rolls once its wait is over, with the configuration of
    /// then.
    fn own_wait(&self, key: &WorkloadKey, now: u64) -> Result<Option<String>, Error> {
        let Some(entry) = self.judge.cache.workload(key) else {
            return Ok(None);
        };
        let resolved = counted(&self.judge.cache, key, &entry);
        if let Some(by) = self.paused(key, &entry, &resolved)? {
            return Ok(Some(format!("paused ({by})")));
        }
        // Its own debounce window, the pause period (`--debounce` is everyone's: the
        // workloads of one change leave it together).
        if let (Some(period), Some(opened)) = (
            entry.counting.pause_period(),
            self.debounce.window_opened(key),
        ) {
            let left = (opened + period).saturating_duration_since(std::time::Instant::now());
            if !left.is_zero() {
                return Ok(Some(format!(
                    "waiting for its pause period ({}s left)",
                    left.as_secs().max(1)
                )));
            }
        }
        let namespace_gates = self.judge.cache.namespace_gates(&key.namespace);
        let (windows, _) = gates::window_for(
            &[
                (entry.gates().window.as_deref(), "the workload"),
                (
                    namespace_gates.as_ref().and_then(|g| g.window.as_deref()),
                    "its Namespace",
                ),
            ],
            self.judge.fan_out.restart_window.as_ref(),
        );
        Ok(gates::outside_window(windows.as_ref(), false, now as i64)
            .map(|pending| pending.describe(now as i64)))
    }

    /// The fan-out of `change` for workload `key`: `None` when it does not gate it,
    /// `Some(Ok(note))` when a wave released it, `Some(Err(why, recheck))` when it waits.
    fn gate_by(&self, key: &WorkloadKey, change: &Change, now: u64) -> Result<Option<Gate>, Error> {
        let id = workload_id(key);
        let name = format!("{}'s fan-out", change.config);
        // The common case, without a decision: released already, or held.
        if let Some(gate) = self.recorded_gate(change, &id, &name)? {
            return Ok(Some(gate));
        }
        let _one_at_a_time = self.deciding.lock().unwrap();
        // Decided while this one waited for the lock: the decision that released its wave
        // (or held the fan-out) was another workload's, recorded already. A wave's
        // workloads often wait here for the record of their own release; deciding again
        // would only hold up their rollout.
        if let Some(gate) = self.recorded_gate(change, &id, &name)? {
            return Ok(Some(gate));
        }
        let (decision, record) = self.advance_locked(change, now)?;
        let Some(record) = record else {
            return Ok(None); // not a fan-out
        };
        if let Some(released) = Released::by(change, &record, &id) {
            return Ok(Some(Ok(released)));
        }
        Ok(Some(Err(match decision {
            Decision::Held | Decision::Hold(_) => (
                Pending::Held {
                    fan_out: name,
                    reason: record
                        .held
                        .as_ref()
                        .map(|h| hold_text(change, h))
                        .unwrap_or_default(),
                },
                None,
            ),
            Decision::Rolling { recheck_in, .. } => (
                Pending::Wave {
                    fan_out: name,
                    wave: record.waves.len() + 1,
                },
                Some(Duration::from_secs(recheck_in)),
            ),
            _ => (
                Pending::Wave {
                    fan_out: name,
                    wave: record.waves.len() + 1,
                },
                None,
            ),
        })))
    }

    /// What the record of `change` already says of workload `id`: released by a wave, or
    /// held; `None` when a decision has to say it.
    fn recorded_gate(&self, change: &Change, id: &str, name: &str) -> Result<Option<Gate>, Error> {
        let Some(record) = self.record_of(change)? else {
            return Ok(None);
        };
        if let Some(hold) = &record.held {
            return Ok(Some(Err((
                Pending::Held {
                    fan_out: name.to_string(),
                    reason: hold_text(change, hold),
                },
                None,
            ))));
        }
        Ok(Released::by(change, &record, id).map(Ok))
    }

    /// The record of `change`: in `wavelet-state`, else the first wave released here and
    /// not written yet. Never a request, never the decision lock.
    fn record_of(&self, change: &Change) -> Result<Option<Record>, Error> {
        if let Some(record) = Judge::record(&self.state, change)? {
            return Ok(Some(record));
        }
        Ok(self.unwritten(&object_key(FANOUT, &change.config), &change.hash))
    }

    /// The first wave of change `hash` released here under `key` in this leader term,
    /// whose record is not written yet.
    fn unwritten(&self, key: &str, hash: &str) -> Option<Record> {
        let term = (self.term)();
        let mut memory = self.memory.lock().unwrap();
        if memory.unwritten.get(key).is_some_and(|u| u.term != term) {
            memory.unwritten.remove(key);
        }
        memory
            .unwritten
            .get(key)
            .filter(|u| u.record.hash == hash)
            .map(|u| u.record.clone())
    }

    /// Writes the records of the first waves released here and not written yet: called
    /// after the PATCH of a first wave's workload (reconcile, step 9), so that PATCH never
    /// waits for it. Until then decisions are made from the record in memory without
    /// writing it (a workload told to wait must not hold the decision lock over a write
    /// while the wave's workloads wait for a worker); the next write of the fan-out's entry
    /// (the next wave, a hold) includes it. Meanwhile the marks the wave's PATCHes carry
    /// stand for it.
    pub fn write_released(&self) -> Result<(), Error> {
        if self.memory.lock().unwrap().unwritten.is_empty() {
            return Ok(());
        }
        let _one_at_a_time = self.deciding.lock().unwrap();
        let keys: Vec<String> = self
            .memory
            .lock()
            .unwrap()
            .unwritten
            .keys()
            .cloned()
            .collect();
        for key in keys {
            self.write_unwritten(&key)?;
        }
        Ok(())
    }

    /// Writes the first wave's record under `key` if it was released here and is not
    /// written yet; the decision lock held.
    fn write_unwritten(&self, key: &str) -> Result<(), Error> {
        let Some(unwritten) = self.memory.lock().unwrap().unwritten.get(key).cloned() else {
            return Ok(());
        };
        if unwritten.term != (self.term)() {
            self.memory.lock().unwrap().unwritten.remove(key);
            return Ok(());
        }
        let written = self.record(key, &unwritten.stored, Some(&unwritten.record.encode()))?;
        self.memory.lock().unwrap().unwritten.remove(key);
        if !written {
            // Another writer changed the entry meanwhile: the next decision is made from
            // theirs, and from the marks of the PATCHes that went out.
            log::warn!(
                "ConfigMap {}/{}: {key:?} changed under wavelet before it recorded the first wave it released; deciding again from the newer entry",
                self.state.namespace(),
                crate::model::state::STATE_CONFIGMAP
            );
        }
        Ok(())
    }

    /// Up to date: if `key` is in the current wave of a fan-out, its rollout may release
    /// the next wave or hold the rest. Returns when to look again (a wave's timeout).
    pub fn observe(
        &self,
        key: &WorkloadKey,
        entry: &WorkloadEntry,
        now: u64,
    ) -> Result<Option<Duration>, Error> {
        self.not_pending(key);
        let id = workload_id(key);
        let mut recheck: Option<Duration> = None;
        let resolved = counted(&self.judge.cache, key, entry);
        // It carries its hash: what it runs with is what a change is judged by (read
        // again here, so learnt only if a change that came in meanwhile is not in it).
        let computed = hash::compute(
            resolved
                .iter()
                .map(|(r, e)| (r, e.as_ref().and_then(|e| e.digests()))),
            self.judge.hmac_key.as_deref(),
        );
        if entry.recorded_hash() == Some(computed.hash.as_str()) {
            self.carries(key, &computed.hash, &resolved);
        }
        for (reference, _) in &resolved {
            let (Some(change), _) = self.judge.change(&reference.config) else {
                continue;
            };
            let Some(record) = self.record_of(&change)? else {
                continue;
            };
            if record.held.is_some() || !record.waves.last().is_some_and(|w| w.contains(&id)) {
                continue;
            }
            self.memory.lock().unwrap().rolled_at.seen(
                &object_key(FANOUT, &change.config),
                &change.hash,
                &id,
                now,
            );
            if let (Decision::Rolling { recheck_in, .. }, _) = self.advance(&change, now)? {
                let d = Duration::from_secs(recheck_in);
                recheck = Some(recheck.map_or(d, |r| r.min(d)));
            }
        }
        Ok(recheck)
    }

    /// Decides the next step of `change`'s fan-out and carries it out (records it, emits
    /// Events, wakes the released workloads). Returns the decision and the record after.
    fn advance(&self, change: &Change, now: u64) -> Result<(Decision, Option<Record>), Error> {
        let _one_at_a_time = self.deciding.lock().unwrap();
        self.advance_locked(change, now)
    }

    /// [`FanOuts::advance`], the decision lock held.
    fn advance_locked(
        &self,
        change: &Change,
        now: u64,
    ) -> Result<(Decision, Option<Record>), Error> {
        // Another writer (`wavelet resume`, another leader) changed the record while this
        // decision was made: decide again from the newer one.
        for _ in 0..MAX_DECISIONS {
            if let Some(done) = self.try_advance(change, now)? {
                return Ok(done);
            }
        }
        Err(Error::Config(format!(
            "{}: its fan-out's record in ConfigMap {}/{} keeps changing under wavelet: is another wavelet writing it? Run one leader per --state-namespace",
            change.config,
            self.state.namespace(),
            crate::model::state::STATE_CONFIGMAP
        )))
    }

    /// One decision of [`FanOuts::advance`]; `None` when the record changed meanwhile.
    fn try_advance(
        &self,
        change: &Change,
        now: u64,
    ) -> Result<Option<(Decision, Option<Record>)>, Error> {
        let state_key = object_key(FANOUT, &change.config);
        let stored = self.state.get(&state_key)?;
        let recorded = stored
            .as_deref()
            .and_then(Record::decode)
            .filter(|r| r.hash == change.hash);
        // A first wave released here, its record not written yet ([`FanOuts::write_released`]).
        let unwritten = match &recorded {
            Some(_) => None,
            None => self.unwritten(&state_key, &change.hash),
        };
        let dependents = self.judge.dependents(&change.config);
        let waiting: Vec<Option<String>> = dependents
            .iter()
            .map(|d| {
                if d.current {
                    Ok(None)
                } else {
                    self.own_wait(&d.key, now)
                }
            })
            .collect::<Result<_, Error>>()?;
        let members: Vec<Member> = {
            let memory = self.memory.lock().unwrap();
            dependents
                .iter()
                .zip(waiting)
                .map(|(d, waiting)| Member {
                    id: &d.id,
                    canary: d.canary,
                    current: d.current,
                    status: &d.status,
                    rolled_at: memory.rolled_at.of(&state_key, &change.hash, &d.id),
                    waiting,
                    refused: memory.refused.get(&d.key).cloned(),
                    first_wave: d.first_wave.as_ref(),
                })
                .collect()
        };
        // No record of this change: its first wave may have rolled, and its record been
        // lost to a restart before it was written (`waves::recovered`).
        let rebuilt = match (&recorded, &unwritten) {
            (None, None) => waves::recovered(&change.hash, &members),
            _ => None,
        };
        let record = recorded.or(unwritten).or_else(|| rebuilt.clone());
        let decision = waves::decide(record.as_ref(), &members, change.settings, now);
        let about = self.config_ref(change);
        let short = hash::short(&change.hash);
        let name_of = |id: &str| {
            dependents
                .iter()
                .find(|d| d.id == id)
                .map_or(id.to_string(), |d| d.key.to_string())
        };
        let after = match &decision {
            Decision::NotShared => {
                if stored.is_some() {
                    // An older change's record: this one is not a fan-out.
                    if !self.record(&state_key, &stored, None)? {
                        return Ok(None);
                    }
                }
                None
            }
            Decision::Release { wave, workloads } => {
                let mut next = record.clone().unwrap_or(Record {
                    hash: change.hash.clone(),
                    since: now,
                    waves: Vec::new(),
                    skipped: Vec::new(),
                    held: None,
                });
                let took = now.saturating_sub(next.since);
                next.waves.push(workloads.clone());
                next.since = now;
                if record.is_none() {
                    // The first wave: its PATCHes go first, each carrying the change's mark
                    // (a restart before the record finds the wave by them); the record
                    // follows ([`FanOuts::write_released`]).
                    self.memory.lock().unwrap().unwritten.insert(
                        state_key.clone(),
                        Unwritten {
                            record: next.clone(),
                            stored: stored.clone(),
                            term: (self.term)(),
                        },
                    );
                } else if !self.record(&state_key, &stored, Some(&next.encode()))? {
                    // A later wave is recorded before any of it is patched: a restart from
                    // here on goes on with this wave, never repeats one.
                    return Ok(None);
                }
                let total = dependents
                    .iter()
                    .filter(|d| !d.current || next.released(&d.id))
                    .count();
                let names = workloads
                    .iter()
                    .map(|w| name_of(w))
                    .collect::<Vec<_>>()
                    .join(", ");
                let message = if *wave == 1 {
                    format!(
                        "Change {short} rolls the {total} workloads that use this {} in waves: wave 1 rolls {names}; each next wave follows once the one before finished its rollout healthy.",
                        change.config.kind.kind()
                    )
                } else {
                    metrics::global()
                        .fanout_wave_duration
                        .observe(Duration::from_secs(took));
                    let rolled = next.waves.iter().map(Vec::len).sum::<usize>();
                    format!(
                        "Change {short}: wave {} finished its rollout healthy in {}; wave {wave} rolls {names} ({rolled} of {total} released).",
                        wave - 1,
                        gates::human(took)
                    )
                };
                log::info!("{}: {message}", change.config);
                self.recorder.normal(&about, "FanOutWave", &message);
                for workload in workloads {
                    if let Some(d) = dependents.iter().find(|d| &d.id == workload) {
                        (self.wake)(d.key.clone());
                    }
                }
                Some(next)
            }
            Decision::Hold(hold) => {
                let mut held = record.clone().expect("a hold has a record");
                held.held = Some(hold.clone());
                if !self.record(&state_key, &stored, Some(&held.encode()))? {
                    return Ok(None);
                }
                metrics::global()
                    .fanouts_halted
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let not_rolled = dependents
                    .iter()
                    .filter(|d| !d.current && !held.released(&d.id))
                    .count();
                let failed = name_of(&hold.workload);
                let resume = format!(
                    "wavelet resume -n {} {}/{}",
                    change.config.namespace,
                    change.config.kind.as_str(),
                    change.config.name
                );
                let message = format!(
                    "Change {short} held after wave {}: {failed} {}. {not_rolled} workload(s) using this {} are not rolled. To go on: fix the {} (its next change starts a new fan-out), or roll the rest anyway with `{resume}`.",
                    held.waves.len(),
                    hold.reason,
                    change.config.kind.kind(),
                    change.config.kind.kind(),
                );
                log::warn!("{}: {message}", change.config);
                self.recorder.warning(&about, "FanOutHeld", &message);
                // The ones waiting for a wave now wait for a fix or a resume: say so.
                for d in dependents
                    .iter()
                    .filter(|d| !d.current && !held.released(&d.id))
                {
                    (self.wake)(d.key.clone());
                }
                if let Some(d) = dependents.iter().find(|d| d.id == hold.workload) {
                    if let Some(entry) = self.judge.cache.workload(&d.key) {
                        if let Some(workload) = self.workload_ref(&d.key, &entry) {
                            self.recorder.warning(
                                &workload,
                                "FanOutHeld",
                                &format!(
                                    "Change {short} of {} failed here: {}; wavelet holds the {not_rolled} other workload(s) that use it. To go on: fix {}, or `{resume}`.",
                                    change.config, hold.reason, change.config
                                ),
                            );
                        }
                    }
                }
                Some(held)
            }
            Decision::Complete { waves } => {
                let rolled = record
                    .as_ref()
                    .map_or(0, |r| r.waves.iter().map(Vec::len).sum());
                if let Some(r) = &record {
                    metrics::global()
                        .fanout_wave_duration
                        .observe(Duration::from_secs(now.saturating_sub(r.since)));
                }
                if !self.record(&state_key, &stored, None)? {
                    return Ok(None);
                }
                let message = format!(
                    "Change {short} rolled out to all {rolled} workloads in {waves} wave(s), each finished healthy."
                );
                log::info!("{}: {message}", change.config);
                self.recorder.normal(&about, "FanOutComplete", &message);
                self.memory.lock().unwrap().rolled_at.forget(&state_key);
                None
            }
            Decision::Held | Decision::Rolling { .. } => {
                if let Some(rebuilt) = &rebuilt {
                    // The first wave's record, lost to a restart: written now.
                    if !self.record(&state_key, &stored, Some(&rebuilt.encode()))? {
                        return Ok(None);
                    }
                    log::info!(
                        "{}: change {short}: its first wave ({}) rolled, but its record was not written: recorded again from the wave's marks; the next wave waits for its health",
                        change.config,
                        rebuilt.waves[0]
                            .iter()
                            .map(|w| name_of(w))
                            .collect::<Vec<_>>()
                            .join(", ")
                    );
                }
                record.clone()
            }
        };
        Ok(Some((decision, after)))
    }

    /// Writes a fan-out's record decided from `stored`; `false` when it is not `stored`
    /// any more (nothing written). What is written was decided from the first wave not
    /// written yet, if there was one: it is written now.
    fn record(
        &self,
        key: &str,
        stored: &Option<String>,
        value: Option<&str>,
    ) -> Result<bool, Error> {
        let done = self.state.set_if(key, Some(stored.as_deref()), value)? == Written::Done;
        if done {
            self.memory.lock().unwrap().unwritten.remove(key);
        }
        Ok(done)
    }

    /// Whether an object the workload uses lets its change through restart windows
    /// (`wavelet.dev/urgent`), recording a new grant.
    fn urgent(&self, resolved: &[crate::model::counted::Counted]) -> Result<bool, Error> {
        let mut urgent = false;
        for (reference, entry) in resolved {
            let Some(entry) = entry else { continue };
            let Some(digests) = entry.digests() else {
                continue;
            };
            let data = hash::data_hash(digests, self.judge.hmac_key.as_deref());
            let state_key = object_key(URGENT, &reference.config);
            let stored = self.state.get(&state_key)?;
            let recorded = stored.as_deref().and_then(Urgent::decode);
            match gates::urgent(entry.gates().urgent.as_deref(), recorded.as_ref(), &data) {
                UrgentDecision::No => {
                    if recorded.is_some() {
                        self.state.set(&state_key, None)?;
                    }
                }
                UrgentDecision::Used => {}
                UrgentDecision::Granted(grant) => {
                    if let Some(grant) = grant {
                        log::info!(
                            "{}: wavelet.dev/urgent {:?} lets change {} through restart windows (once)",
                            reference.config,
                            grant.value,
                            hash::short(&data)
                        );
                        if self.state.set_if(
                            &state_key,
                            Some(stored.as_deref()),
                            Some(&grant.encode()),
                        )? == Written::Changed
                        {
                            continue; // another writer's grant: judged on the next look
                        }
                    }
                    urgent = true;
                }
            }
        }
        Ok(urgent)
    }

    /// Tells the problems of `config`'s fan-out annotations not told while they stand.
    fn warn(&self, config: &ConfigKey, problems: Vec<String>) {
        let untold = self
            .memory
            .lock()
            .unwrap()
            .warned_objects
            .stand(config, problems);
        for problem in untold {
            log::warn!("{problem}; the global setting applies");
            if let Some(entry) = self.judge.cache.config(config) {
                let about = ObjectRef::new(
                    &config.kind.resource(),
                    &config.namespace,
                    &config.name,
                    &entry.uid.to_string(),
                );
                self.recorder.warning(
                    &about,
                    "InvalidAnnotation",
                    &format!("{problem}; the global setting applies"),
                );
            }
        }
    }

    fn config_ref(&self, change: &Change) -> ObjectRef {
        ObjectRef::new(
            &change.config.kind.resource(),
            &change.config.namespace,
            &change.config.name,
            &change.entry.uid.to_string(),
        )
    }

    fn workload_ref(&self, key: &WorkloadKey, entry: &WorkloadEntry) -> Option<ObjectRef> {
        Some(ObjectRef::new(
            &key.resource,
            &key.namespace,
            &key.name,
            &entry.uid.to_string(),
        ))
    }
}
