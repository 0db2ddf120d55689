//! Delete mode (`magalix.com/podDeleteMatch`): when the data of an annotated ConfigMap or
//! Secret changes, replace the Pods of its namespace that match the annotation's selector
//! and were created before the change was observed.
//!
//! The story of one reconcile, with early returns (what is remembered in memory, and the
//! copy of `wavelet-state`, hold for one leader term: a new term takes both up again from
//! the API server; a state write whose entry another writer changed decides again):
//! 1. Object gone or no longer annotated → drop any replacement in progress. An opt-out
//!    also forgets the state entry, so opting in again is a first sight (adding an
//!    annotation never replaces Pods); a deleted object keeps its entry until it has been
//!    gone for `--resync` (then a later state write prunes it, see `ledger.rs`), so
//!    re-creating it sooner with other data is a change like any other (as in hash mode).
//!    A Secret nothing else uses is not kept in the cache once it loses its selector: the
//!    watch says it opted out ([`DeleteMode::opted_out`]), so its absence is not taken
//!    for a deletion.
//! 2. A replacement for the current data is in progress → take its next step.
//! 3. The selector is empty, invalid or does not require a label, or the strategy is
//!    unknown → Warning Event, nothing deleted, state not advanced.
//! 4. No state entry → first sight: record the data hash, delete nothing.
//! 5. State hash = data hash → up to date (a label or annotation edit ends here).
//! 6. The state says a replacement for this data was in progress (wavelet restarted) →
//!    resume it for the Pods listed back then.
//! 7. Otherwise the data changed → list the matching Pods (the *observation*), write the
//!    state as "replacing" with their UIDs, and start replacing them.
//!    When they belong to several workloads, they are replaced workload by workload behind
//!    safe fan-out's gate (`waves.rs`: the next wave once the last is Ready again, a hold
//!    past `--rollout-timeout`, recorded as a `fanout.*` entry before a wave is touched).
//!
//! A replacement is a small state machine (`replacement.rs`: [`Replacement`], its
//! [`Phase`], and the pure [`next_step`] that decides what it does next) stepped once per
//! reconcile; a step never blocks for long: waiting (for Ready Pods, or for a PDB that
//! refuses evictions) is expressed as an [`Action`], and the work queue brings the key back.
//! When the last Pod is replaced the state records the data hash and a `PodsReplaced`
//! Event goes on the object. A newer data change during a replacement abandons it and
//! starts over from a new observation: Pods replaced already are gone, Pods created after
//! the new observation are left alone, so no Pod is replaced twice for the same data.
//!
//! **Which Pods count as created before the change** ([`created_before`]): every Pod in
//! the listing taken at observation, whatever its `creationTimestamp` says (the API
//! server's clock may run ahead of wavelet's), plus — for a replacement resumed after a
//! restart — a Pod not listed then whose `creationTimestamp` is in an earlier second than
//! the observation. `creationTimestamp` has whole seconds: a Pod created in the same second
//! as the observation counts only if it was listed. This assumes wavelet's clock and the API
//! server's agree to within a second (NTP); the listing, which is what decides in all but
//! the restart case, needs no clock at all.

pub(crate) mod decide;
pub(crate) mod ledger;
pub(crate) mod replacement;
pub(crate) mod waves;

use decide::{count_pods, name_list, past_tense, targets, Target};
pub use decide::{
    created_before, ready_again, uids_to_record, validate_selector, Observation, Strategy,
};
use replacement::{next_step, Facts, Next, Phase, Replacement};
use waves::{WaveStep, HELD_POLL};

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::client::{Client, Shape, PAGE_SIZE};
use crate::config::FanOut;
use crate::deletemode::ledger::{state_key, Entry, Listed, Pruning, StateStore, Written};
use crate::deletemode::ledger::{
    MAX_RECORDED_PODS, MAX_STATE_BYTES, STATE_CONFIGMAP, WARN_STATE_BYTES,
};
use crate::error::Error;
use crate::model::cache::Cache;
use crate::model::hash;
use crate::objects::{ConfigKey, ConfigKind, Pod, Resource};
use crate::ops::events::{ObjectRef, Recorded, Recorder};
use crate::ops::leader::Gate;
use crate::ops::metrics;
use crate::selector::{percent_encode_query_value, Selector};
use crate::watch::queue::{Backoff, WorkQueue};
use crate::watch::source::read_config_now;
use crate::watch::worker::{run_worker, Action, Work};

/// Retries of refused evictions and failed steps: 250ms doubling up to 5s (the interval at
/// which `kubectl drain` retries a 429).
/// A Warning that could not be queued (the Event queue full) is said again this long after.
const UNSAID_WARNING_AGAIN: Duration = Duration::from_secs(30);

const BACKOFF: Backoff = Backoff {
    initial: Duration::from_millis(250),
    max: Duration::from_secs(5),
};

/// Settings of delete mode.
#[derive(Debug, Clone)]
pub struct DeleteModeSettings {
    pub dry_run: bool,
    /// `--rolling-timeout`.
    pub rolling_timeout: Duration,
    /// `--eviction-warning-after`.
    pub eviction_warning_after: Duration,
    /// `--debounce`: changes closer together than this are acted on once.
    pub debounce: Duration,
    /// `--hash-key-file`: the data hash in the state ConfigMap is an HMAC under this key.
    pub hmac_key: Option<Vec<u8>>,
    /// `--fan-out`, `--first-wave`, `--wave-size`, `--rollout-timeout`: the Pods of
    /// several workloads are replaced in waves (`waves.rs`).
    pub fan_out: FanOut,
}

/// What one reconcile did, for logs and tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Gone or opted out; nothing in progress any more.
    Forgotten,
    /// Seen for the first time: data hash recorded, nothing deleted.
    Recorded,
    /// The Secret's data at its current version is not read yet; its fetch wakes it.
    AwaitingData,
    UpToDate,
    InvalidSelector,
    UnknownStrategy,
    /// A replacement started (or resumed after a restart) for this many Pods.
    Started {
        pods: usize,
    },
    /// A replacement took a step and is not finished.
    InProgress,
    /// Evictions are being refused (PodDisruptionBudget).
    Blocked,
    /// The replacement finished.
    Replaced {
        pods: usize,
    },
    /// Stopped between two Pods: shutting down, or this replica may not write any more.
    /// The state still says "replacing"; the next leader resumes from it.
    Interrupted,
    /// The object's entry in `wavelet-state` was changed by another writer since it was
    /// read: nothing written; decided again at once from what is there now.
    StateChanged,
    /// Replacing in waves, held: a workload's Pods were not Ready again in time; the rest
    /// waits for `wavelet resume` or a new change.
    Held,
    /// `--dry-run`: this many Pods would have been replaced.
    DryRun {
        pods: usize,
    },
}

/// A data change delete mode is about to act on, with the annotations it acts by.
struct Observed<'a> {
    key: &'a ConfigKey,
    about: &'a ObjectRef,
    data_hash: String,
    selector: Selector,
    strategy: Strategy,
}

/// What the reconciler remembers per object between reconciles, within one leader term.
#[derive(Debug, Default)]
struct Memory {
    /// The leader term the replacement was stepped in.
    term: u64,
    replacement: Option<Replacement>,
    /// The last Warning about the annotations, with the data hash, so it is not repeated.
    warned: Option<(String, String)>,
}

/// How one round of replacing the remaining Pods ended.
enum Round {
    /// Every remaining Pod went (`rolling`: the next one did, or nothing was left).
    Went,
    /// Refused by a PodDisruptionBudget; the message says why.
    Refused(String),
    /// Stopped before the next Pod; the reason is for the log.
    Interrupted(&'static str),
}

/// The outcome of replacing one Pod.
enum Attempt {
    Replaced,
    /// Already gone (404), or replaced by a successor of the same name (409 on the UID
    /// precondition).
    Gone,
    /// Refused by a PodDisruptionBudget; the message says why.
    Blocked(String),
}

/// The delete-mode reconciler and its work queue.
pub struct DeleteMode {
    queue: WorkQueue<ConfigKey>,
    client: Client,
    /// Checked between two Pods: a replica shutting down or no longer leading stops there.
    gate: Arc<Gate>,
    cache: Arc<Cache>,
    recorder: Recorder,
    state: StateStore,
    /// Safe fan-out's policy and records, for replacing in waves (`waves.rs`).
    fan_out: waves::FanOutRecords,
    settings: DeleteModeSettings,
    memory: Mutex<HashMap<ConfigKey, Memory>>,
    /// Said that `wavelet-state` fills up (reset once it is below the mark again).
    warned_full: AtomicBool,
    /// Objects that lost their selector and were dropped from the cache (unused Secrets)
    /// since their last reconcile: gone from the cache, yet opted out, not deleted.
    opted_out: Mutex<HashSet<ConfigKey>>,
}

impl DeleteMode {
    pub fn new(
        client: Client,
        gate: Arc<Gate>,
        cache: Arc<Cache>,
        recorder: Recorder,
        state: StateStore,
        fan_out: waves::FanOutRecords,
        settings: DeleteModeSettings,
    ) -> DeleteMode {
        DeleteMode {
            queue: WorkQueue::new(BACKOFF),
            client,
            gate,
            cache,
            recorder,
            state,
            fan_out,
            settings,
            memory: Mutex::new(HashMap::new()),
            warned_full: AtomicBool::new(false),
            opted_out: Mutex::new(HashSet::new()),
        }
    }

    /// Keys and values of `wavelet-state` in bytes, as last read, written or tried.
    pub fn state_bytes(&self) -> u64 {
        self.state.bytes()
    }

    /// An object lost its selector and is not kept in the cache (a Secret nothing else
    /// uses): look at it as opted out, not as deleted, after the debounce window.
    pub fn opted_out(&self, key: ConfigKey) {
        self.opted_out.lock().unwrap().insert(key.clone());
        self.enqueue(key);
    }

    /// An annotated object was created, changed, opted out or removed: look at it after the
    /// debounce window.
    pub fn enqueue(&self, key: ConfigKey) {
        self.queue.add_after(key, self.settings.debounce);
    }

    /// Makes the workers return.
    pub fn shut_down(&self) {
        self.queue.shut_down();
    }

    /// Keys waiting or in progress (for metrics).
    pub fn queue_len(&self) -> usize {
        self.queue.len()
    }

    /// Runs the one worker loop over the delete-mode queue; only the leader writes.
    pub fn work(&self) {
        run_worker(&self.queue, Some(&self.gate), self);
    }

    /// Reconciles one object. The queue never hands a key to two workers at once, so its
    /// memory is taken out of the map for the duration (no lock held over I/O).
    pub fn reconcile(&self, key: &ConfigKey) -> Result<(Action, Outcome), Error> {
        let mut memory = self.memory.lock().unwrap().remove(key).unwrap_or_default();
        let result = self.reconcile_with(key, &mut memory);
        if memory.replacement.is_some() || memory.warned.is_some() {
            self.memory.lock().unwrap().insert(key.clone(), memory);
        }
        result
    }

    fn reconcile_with(
        &self,
        key: &ConfigKey,
        memory: &mut Memory,
    ) -> Result<(Action, Outcome), Error> {
        // A new leader term starts from the API server's state: another leader may have
        // finished (or restarted) this replacement meanwhile; the state says which.
        let term = self.state.term();
        if memory.term != term {
            if memory.replacement.take().is_some() {
                log::info!("{key}: new leader term; the replacement in progress is taken up again from {STATE_CONFIGMAP}");
            }
            memory.term = term;
        }
        // 1.
        let Some(entry) = self.cache.config(key) else {
            let opted_out = self.opted_out.lock().unwrap().contains(key);
            if memory.replacement.take().is_some() {
                let why = if opted_out {
                    "delete-mode annotation removed"
                } else {
                    "deleted"
                };
                log::info!("{key}: {why}; replacing its Pods stops");
            }
            memory.warned = None;
            self.forget_waves(key)?;
            if opted_out {
                self.state.forget(key)?;
                self.opted_out.lock().unwrap().remove(key);
            }
            return Ok((Action::Done, Outcome::Forgotten));
        };
        // Cached: the entry says whether it is opted in.
        self.opted_out.lock().unwrap().remove(key);
        let Some(selector_text) = entry.pod_delete_match().map(str::to_owned) else {
            if memory.replacement.take().is_some() {
                log::info!("{key}: delete-mode annotation removed; replacing its Pods stops");
            }
            memory.warned = None;
            self.forget_waves(key)?;
            self.state.forget(key)?;
            return Ok((Action::Done, Outcome::Forgotten));
        };
        let Some(digests) = entry.digests() else {
            return Ok((Action::Done, Outcome::AwaitingData));
        };
        let uid = entry.uid.to_string();
        let about = ObjectRef::new(&key.kind.resource(), &key.namespace, &key.name, &uid);
        let data_hash = hash::data_hash(digests, self.settings.hmac_key.as_deref());

        // 2.
        if let Some(replacement) = memory.replacement.as_mut() {
            if replacement.hash == data_hash {
                return self.step(key, &about, memory);
            }
            log::info!(
                "{key}: data changed again ({}) while replacing Pods for {}; starting over for the new data",
                hash::short(&data_hash),
                hash::short(&replacement.hash)
            );
            memory.replacement = None;
        }

        // 3.
        let selector = match validate_selector(&selector_text) {
            Ok(selector) => selector,
            Err(message) => {
                return Ok(self.refuse(
                    key,
                    &about,
                    memory,
                    "InvalidSelector",
                    message,
                    data_hash,
                    Outcome::InvalidSelector,
                ))
            }
        };
        let strategy = match Strategy::parse(entry.pod_delete_strategy()) {
            Ok(strategy) => strategy,
            Err(message) => {
                return Ok(self.refuse(
                    key,
                    &about,
                    memory,
                    "UnknownStrategy",
                    message,
                    data_hash,
                    Outcome::UnknownStrategy,
                ))
            }
        };
        memory.warned = None;

        // 4. and 5.
        let recorded = self.state.get(key)?;
        let observation = match recorded.clone() {
            None => {
                let first = Entry::Acted {
                    hash: data_hash.clone(),
                };
                if self.write_state(key, &about, None, &first)? == Written::Changed {
                    return Ok(state_changed());
                }
                log::info!("{key}: delete mode for Pods matching {selector}: first seen, data hash {} recorded, nothing replaced", hash::short(&data_hash));
                return Ok((Action::Done, Outcome::Recorded));
            }
            Some(Entry::Acted { hash }) if hash == data_hash => {
                return Ok((Action::Done, Outcome::UpToDate))
            }
            // 6.
            Some(Entry::Replacing {
                hash,
                observed,
                pods,
            }) if hash == data_hash => {
                log::info!(
                    "{key}: resuming the replacement of Pods matching {selector} for data {}",
                    hash::short(&data_hash)
                );
                Some(Observation {
                    at: observed,
                    listed: pods.into_iter().collect(),
                })
            }
            Some(_) => None,
        };

        // 7. A change as this replica's cache shows it; the cache may be behind the data the
        // recorded hash was taken from (another leader wrote it, this replica's watch
        // lags or was cut). Pods are replaced only for data the API server holds now. (A
        // SecretProviderClass's data is what its Pods mounted, not in the object.)
        if observation.is_none() && key.kind != ConfigKind::SecretProviderClass {
            if let Some(recorded) = &recorded {
                match self.data_hash_now(key)? {
                    Some(now) if now == data_hash => {}
                    now => {
                        let behind = if now.as_deref() == Some(recorded.hash()) {
                            format!("the data {STATE_CONFIGMAP} recorded")
                        } else {
                            "a newer version".to_string()
                        };
                        log::info!(
                            "{key}: the cached data ({}) is behind the API server's ({behind}): nothing replaced until the watch brings it",
                            hash::short(&data_hash)
                        );
                        return Ok((Action::Done, Outcome::AwaitingData));
                    }
                }
            }
        }
        let change = Observed {
            key,
            about: &about,
            data_hash,
            selector,
            strategy,
        };
        self.begin(change, recorded, observation, memory)
    }

    /// The data hash of `key` as the API server holds it now; `None` when it is gone.
    fn data_hash_now(&self, key: &ConfigKey) -> Result<Option<String>, Error> {
        Ok(read_config_now(&self.client, key)?
            .map(|object| hash::data_hash(object.digests(), self.settings.hmac_key.as_deref())))
    }

    /// Lists the matching Pods and starts replacing those created before the change:
    /// `resumed` is the observation recorded in the state by a previous run, `None` for
    /// a change observed now; `recorded` is the state entry the decision was made from.
    fn begin(
        &self,
        change: Observed<'_>,
        recorded: Option<Entry>,
        resumed: Option<Observation>,
        memory: &mut Memory,
    ) -> Result<(Action, Outcome), Error> {
        let Observed {
            key,
            about,
            data_hash,
            selector,
            strategy,
        } = change;
        let pods = self.list_pods(&key.namespace, &selector)?;
        let is_resumed = resumed.is_some();
        let observation = resumed.unwrap_or_else(|| Observation {
            at: crate::time::unix_now(),
            listed: pods.iter().map(|p| p.metadata.uid.clone()).collect(),
        });
        let targets = targets(&pods, &observation);
        let short = hash::short(&data_hash);

        if self.settings.dry_run {
            let message = format!(
                "Dry run, nothing deleted: the data changed (hash {short}); wavelet would {strategy} {} matching {selector}: {}.",
                count_pods(targets.len()),
                name_list(&targets)
            );
            log::info!("{key}: {message}");
            if !targets.is_empty() {
                self.recorder.normal(about, "PodsReplaced", &message);
            }
            // Kept in memory only: the state ConfigMap is not written in a dry run.
            let acted = Entry::Acted { hash: data_hash };
            if self.write_state(key, about, recorded.as_ref(), &acted)? == Written::Changed {
                return Ok(state_changed());
            }
            return Ok((
                Action::Done,
                Outcome::DryRun {
                    pods: targets.len(),
                },
            ));
        }
        if targets.is_empty() {
            log::info!(
                "{key}: data changed ({short}); no Pods match {selector}, nothing to replace"
            );
            let acted = Entry::Acted { hash: data_hash };
            if self.write_state(key, about, recorded.as_ref(), &acted)? == Written::Changed {
                return Ok(state_changed());
            }
            return Ok((Action::Done, Outcome::Replaced { pods: 0 }));
        }
        let entry = match recorded {
            Some(entry) if is_resumed => entry,
            recorded => {
                // Before the first Pod is touched: a restart from here on resumes, not
                // repeats.
                let (listed, left_out) = uids_to_record(&pods, &observation, MAX_RECORDED_PODS);
                if left_out > 0 {
                    log::warn!(
                        "{key}: {left_out} of the Pods listed now were created in this second or later by the API server's clock; the state keeps {MAX_RECORDED_PODS} of their UIDs, so a replacement resumed after a restart replaces the others only if their creationTimestamp is earlier than now (is wavelet's clock behind the API server's?)"
                    );
                }
                let entry = Entry::Replacing {
                    hash: data_hash.clone(),
                    observed: observation.at,
                    pods: listed,
                };
                if self.write_state(key, about, recorded.as_ref(), &entry)? == Written::Changed {
                    return Ok(state_changed());
                }
                entry
            }
        };
        log::info!(
            "{key}: data changed ({short}); replacing {} Pod(s) matching {selector} ({strategy}): {}",
            targets.len(),
            name_list(&targets)
        );
        let count = targets.len();
        let (remaining, waves) = self.plan_waves(key, &data_hash, targets, &pods)?;
        let phase = Phase::first(strategy, Instant::now() + self.settings.rolling_timeout);
        memory.replacement = Some(Replacement {
            hash: data_hash,
            entry,
            strategy,
            selector,
            remaining,
            replaced: 0,
            phase,
            want: pods.iter().filter(|p| !p.is_terminating()).count(),
            blocked_since: None,
            warned_blocked: false,
            waves,
        });
        match self.step(key, about, memory)? {
            (next, Outcome::InProgress | Outcome::Blocked | Outcome::Held) => {
                Ok((next, Outcome::Started { pods: count }))
            }
            done => Ok(done),
        }
    }

    /// Annotations delete mode cannot act on: a Warning Event and an error log, once per
    /// message and data hash; nothing deleted, state not advanced.
    #[allow(clippy::too_many_arguments)]
    fn refuse(
        &self,
        key: &ConfigKey,
        about: &ObjectRef,
        memory: &mut Memory,
        reason: &str,
        message: String,
        data_hash: String,
        outcome: Outcome,
    ) -> (Action, Outcome) {
        let warned = (message, data_hash);
        if memory.warned.as_ref() != Some(&warned) {
            log::error!("{key}: {}", warned.0);
            if self.recorder.warning(about, reason, &warned.0) == Recorded::NotQueued {
                // Not said: not remembered as said, and said again a while later.
                return (Action::RequeueAfter(UNSAID_WARNING_AGAIN), outcome);
            }
            memory.warned = Some(warned);
        }
        (Action::Done, outcome)
    }

    /// Moves the replacement in `memory` forward as far as it goes without waiting: asks
    /// [`next_step`] what now, carries it out, and asks again.
    fn step(
        &self,
        key: &ConfigKey,
        about: &ObjectRef,
        memory: &mut Memory,
    ) -> Result<(Action, Outcome), Error> {
        let r = memory
            .replacement
            .as_mut()
            .expect("a replacement in progress");
        let mut listed: Option<Vec<Pod>> = None;
        let mut refusal: Option<String> = None;
        loop {
            let facts = Facts {
                listed: listed.as_deref(),
                refused: refusal.is_some(),
                eviction_warning_after: self.settings.eviction_warning_after,
            };
            match next_step(r, &facts, Instant::now()) {
                Next::Finish if r.waves.is_some() => match self.next_wave(key, about, r, None)? {
                    WaveStep::Released => listed = None,
                    WaveStep::Wait(wait) => {
                        return Ok((Action::RequeueAfter(wait), Outcome::InProgress))
                    }
                    WaveStep::Held => return Ok((Action::RequeueAfter(HELD_POLL), Outcome::Held)),
                    WaveStep::Complete => break,
                },
                Next::Finish => break,
                Next::ListPods => listed = Some(self.list_pods(&key.namespace, &r.selector)?),
                Next::ReadyAgain { live } => {
                    r.want = live;
                    r.phase = Phase::Replace;
                    listed = None;
                }
                Next::AwaitReady(wait) => {
                    return Ok((Action::RequeueAfter(wait), Outcome::InProgress))
                }
                Next::TimedOut => {
                    let message = format!(
                        "The Pods matching {} were not all Ready {:?} (--rolling-timeout) after one was replaced; going on with the next.",
                        r.selector, self.settings.rolling_timeout
                    );
                    log::warn!("{key}: {message}");
                    self.recorder.warning(about, "RollingTimeout", &message);
                    r.phase = Phase::Replace;
                    listed = None;
                }
                Next::Replace { one_at_a_time } => {
                    match self.replace_remaining(key, r, one_at_a_time)? {
                        Round::Went => refusal = None,
                        Round::Refused(message) => refusal = Some(message),
                        Round::Interrupted(why) => {
                            log::info!(
                                "{key}: {why}; stopping with {} left to replace, which the next leader replaces as {STATE_CONFIGMAP} says",
                                count_pods(r.remaining.len())
                            );
                            return Ok((
                                Action::RequeueAfter(Duration::ZERO),
                                Outcome::Interrupted,
                            ));
                        }
                    }
                }
                Next::Blocked { warn } => {
                    r.blocked_since.get_or_insert_with(Instant::now);
                    if warn {
                        let message = format!(
                            "Evictions of {} matching {} have been refused for {:?}: {} wavelet keeps trying.",
                            count_pods(r.remaining.len()),
                            r.selector,
                            self.settings.eviction_warning_after,
                            refusal.as_deref().unwrap_or_default()
                        );
                        log::warn!("{key}: {message}");
                        self.recorder.warning(about, "EvictionBlocked", &message);
                        r.warned_blocked = true;
                    }
                    if r.waves.is_some()
                        && self.next_wave(key, about, r, refusal.as_deref())? == WaveStep::Held
                    {
                        return Ok((Action::Backoff, Outcome::Held));
                    }
                    return Ok((Action::Backoff, Outcome::Blocked));
                }
            }
        }

        // Done: record the data hash.
        let r = memory
            .replacement
            .take()
            .expect("a replacement in progress");
        let acted = Entry::Acted {
            hash: r.hash.clone(),
        };
        if self.write_state(key, about, Some(&r.entry), &acted)? == Written::Changed {
            return Ok(state_changed());
        }
        let message = format!(
            "Replaced {} matching {} (strategy {}) after a data change (hash {}).",
            count_pods(r.replaced),
            r.selector,
            r.strategy,
            hash::short(&r.hash)
        );
        log::info!("{key}: {message}");
        self.recorder.normal(about, "PodsReplaced", &message);
        Ok((Action::Done, Outcome::Replaced { pods: r.replaced }))
    }

    /// Writes `entry` as the state of `key` (see [`StateStore::set`]); once the state has
    /// grown to [`WARN_STATE_BYTES`], says so, once, in a Warning Event on the object
    /// whose write found it so and in the log.
    fn write_state(
        &self,
        key: &ConfigKey,
        about: &ObjectRef,
        decided_from: Option<&Entry>,
        entry: &Entry,
    ) -> Result<Written, Error> {
        let written = self.state.set(key, decided_from, Some(entry));
        let bytes = self.state.bytes() as usize;
        if bytes < WARN_STATE_BYTES {
            self.warned_full.store(false, Ordering::Relaxed);
        } else if !self.warned_full.swap(true, Ordering::Relaxed) {
            let message = format!(
                "ConfigMap {}/{STATE_CONFIGMAP} holds {bytes} bytes of keys and values, {}% of the {MAX_STATE_BYTES} bytes the API server allows a ConfigMap: when it is full, delete mode replaces no Pods anywhere. It keeps one entry per delete-mode ConfigMap/Secret; entries of objects gone for --resync leave it with the next write.",
                self.state.namespace(),
                bytes * 100 / MAX_STATE_BYTES
            );
            log::warn!("{key}: {message}");
            self.recorder.warning(about, "StateNearlyFull", &message);
        }
        written
    }

    /// Why this replica must not touch another Pod now, if it must not: SIGTERM (shutdown
    /// must not wait for the rest of a list whose requests may each take up to 90 s), or
    /// the gate closed (another replica may lead by now).
    fn must_stop(&self) -> Option<&'static str> {
        if self.gate.is_shut_down() {
            Some("shutting down")
        } else if !self.gate.may_write() {
            Some("this replica may not write any more (it is not the leader)")
        } else {
            None
        }
    }

    /// Evicts or deletes the remaining Pods in order, `one_at_a_time` (`rolling`): until the
    /// first goes through, then awaits Ready. The refused Pods go back in front, in their
    /// order; so does the rest when it must stop between two Pods ([`DeleteMode::must_stop`]).
    fn replace_remaining(
        &self,
        key: &ConfigKey,
        r: &mut Replacement,
        one_at_a_time: bool,
    ) -> Result<Round, Error> {
        let mut blocked = Vec::new();
        let mut refusal = None;
        let mut stopped = None;
        while let Some(target) = r.remaining.pop_front() {
            if let Some(why) = self.must_stop() {
                r.remaining.push_front(target);
                stopped = Some(why);
                break;
            }
            let attempt = match self.replace(&key.namespace, &target, r.strategy) {
                Ok(attempt) => attempt,
                Err(err) => {
                    r.remaining.push_front(target);
                    r.remaining.extend(blocked);
                    return Err(err);
                }
            };
            match attempt {
                Attempt::Replaced => {
                    log::info!(
                        "{key}: {} Pod {}/{}",
                        past_tense(r.strategy),
                        key.namespace,
                        target.name
                    );
                    r.replaced += 1;
                    r.blocked_since = None;
                    r.warned_blocked = false;
                    if one_at_a_time {
                        r.phase = Phase::AwaitReady {
                            deadline: Instant::now() + self.settings.rolling_timeout,
                        };
                        break;
                    }
                }
                Attempt::Gone => log::debug!(
                    "{key}: Pod {}/{} is already gone",
                    key.namespace,
                    target.name
                ),
                Attempt::Blocked(message) => {
                    metrics::global().pod_replacement_retries.inc(&["blocked"]);
                    log::debug!(
                        "{key}: eviction of Pod {}/{} refused: {message}",
                        key.namespace,
                        target.name
                    );
                    refusal = Some(message);
                    blocked.push(target);
                    if one_at_a_time {
                        break;
                    }
                }
            }
        }
        for target in blocked.into_iter().rev() {
            r.remaining.push_front(target);
        }
        Ok(match (stopped, refusal) {
            (Some(why), _) => Round::Interrupted(why),
            (None, Some(message)) => Round::Refused(message),
            (None, None) => Round::Went,
        })
    }

    /// Evicts or deletes one Pod, on condition that it is still the Pod that was listed.
    fn replace(
        &self,
        namespace: &str,
        target: &Target,
        strategy: Strategy,
    ) -> Result<Attempt, Error> {
        let path = Resource::pods().object_path(namespace, &target.name);
        let preconditions = json!({"uid": target.uid});
        let result = match strategy {
            Strategy::Delete => {
                let body = json!({"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": preconditions});
                self.client
                    .delete::<serde::de::IgnoredAny>(&path, Some(&body))
            }
            Strategy::Evict | Strategy::Rolling => {
                let body = json!({
                    "apiVersion": "policy/v1",
                    "kind": "Eviction",
                    "metadata": {"name": target.name, "namespace": namespace},
                    "deleteOptions": {"preconditions": preconditions},
                });
                self.client
                    .post::<serde::de::IgnoredAny>(&format!("{path}/eviction"), &body)
            }
        };
        match result {
            Ok(_) => Ok(Attempt::Replaced),
            Err(Error::Api(status)) if status.is_not_found() || status.is_conflict() => {
                Ok(Attempt::Gone)
            }
            Err(Error::Api(status)) if status.is_too_many_requests() => {
                Ok(Attempt::Blocked(status.explained()))
            }
            // "This pod has more than one PodDisruptionBudget, which the eviction subresource
            // does not support." — a 500 that will not go away by itself.
            Err(Error::Api(status))
                if status.code == 500 && status.message.contains("PodDisruptionBudget") =>
            {
                Ok(Attempt::Blocked(status.explained()))
            }
            Err(err) => Err(err),
        }
    }

    /// The Pods of `namespace` matching `selector`, listed with `labelSelector` and checked
    /// again here (a proxy that dropped the query must not widen the match).
    fn list_pods(&self, namespace: &str, selector: &Selector) -> Result<Vec<Pod>, Error> {
        let base = format!(
            "{}?labelSelector={}&limit={PAGE_SIZE}",
            Resource::pods().collection_path(Some(namespace)),
            percent_encode_query_value(&selector.to_query_string())
        );
        let mut pods = Vec::new();
        let mut path = base.clone();
        loop {
            let page = self.client.list(&path, Shape::Whole, &mut |pod: Pod| {
                if selector.matches(&pod.metadata.labels) {
                    pods.push(pod);
                }
            })?;
            match page.continue_token.filter(|t| !t.is_empty()) {
                Some(token) => {
                    path = format!("{base}&continue={}", percent_encode_query_value(&token))
                }
                None => return Ok(pods),
            }
        }
    }
}

/// Pruning of `wavelet-state` (see [`Pruning`]) as judged by the cache: an object is
/// present while the cache holds it with a delete-mode annotation in a namespace in scope;
/// nothing is judged while a ConfigMap or Secret list is under way.
pub fn pruning(cache: Arc<Cache>, listed: Listed, grace: Duration) -> Pruning {
    Pruning {
        grace,
        listed,
        present: Box::new(move || {
            if cache.configs_relisting() {
                return None;
            }
            Some(
                cache
                    .delete_mode_configs()
                    .into_iter()
                    .filter(|(key, _)| cache.in_scope(&key.namespace))
                    .map(|(key, _)| state_key(&key))
                    .collect(),
            )
        }),
    }
}

/// Another writer changed the object's state entry: reconcile again at once, deciding
/// from what is there now.
fn state_changed() -> (Action, Outcome) {
    (Action::RequeueAfter(Duration::ZERO), Outcome::StateChanged)
}

impl Work<ConfigKey> for DeleteMode {
    fn process(&self, key: &ConfigKey) -> Result<Action, Error> {
        let (action, outcome) = self.reconcile(key)?;
        log::debug!("{key}: delete mode: {outcome:?}");
        match &outcome {
            Outcome::Replaced { pods } => metrics::global()
                .pod_replacements
                .add(&["replaced"], *pods as u64),
            Outcome::DryRun { pods } => metrics::global()
                .pod_replacements
                .add(&["dry_run"], *pods as u64),
            _ => {}
        }
        Ok(action)
    }

    fn failed(&self, key: &ConfigKey, err: &Error, delay: Duration) {
        metrics::global().pod_replacement_retries.inc(&["error"]);
        log::warn!("{key}: delete mode failed, retrying in {delay:?}: {err}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::hash::data_hash;
    use crate::objects::KeyDigest;
    use sha2::{Digest as _, Sha256};
    use std::collections::{HashSet, VecDeque};

    fn pod(uid: &str, created: &str, ready: bool, terminating: bool) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": uid, "uid": uid, "creationTimestamp": created,
                         "deletionTimestamp": if terminating { json!("2026-11-22T03:15:00Z") } else { json!(null) }},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}
        }))
        .unwrap()
    }

    fn digests(pairs: &[(&str, &str)]) -> Vec<KeyDigest> {
        pairs
            .iter()
            .map(|(k, v)| (Box::from(*k), Sha256::digest(v.as_bytes()).into()))
            .collect()
    }

    #[test]
    fn data_hash_is_sha256_of_one_line_per_key_in_key_order() {
        let d = digests(&[("b", "2"), ("a", "1")]);
        let expected = format!(
            "a sha256:{}\nb sha256:{}\n",
            hash::hex(&Sha256::digest(b"1")),
            hash::hex(&Sha256::digest(b"2"))
        );
        assert_eq!(
            data_hash(&d, None),
            hash::hex(&Sha256::digest(expected.as_bytes()))
        );
        let reordered = digests(&[("a", "1"), ("b", "2")]);
        assert_eq!(data_hash(&d, None), data_hash(&reordered, None));
    }

    #[test]
    fn data_hash_changes_with_any_value_or_key_and_under_an_hmac_key() {
        let base = data_hash(&digests(&[("a", "1")]), None);
        assert_ne!(base, data_hash(&digests(&[("a", "2")]), None));
        assert_ne!(base, data_hash(&digests(&[("b", "1")]), None));
        assert_ne!(base, data_hash(&digests(&[("a", "1"), ("b", "")]), None));
        assert_ne!(base, data_hash(&digests(&[("a", "1")]), Some(b"key")));
        assert_ne!(data_hash(&[], None), base);
    }

    #[test]
    fn strategy_defaults_to_evict_and_refuses_unknown_names() {
        assert_eq!(Strategy::parse(None), Ok(Strategy::Evict));
        assert_eq!(Strategy::parse(Some("")), Ok(Strategy::Evict));
        assert_eq!(Strategy::parse(Some("evict")), Ok(Strategy::Evict));
        assert_eq!(Strategy::parse(Some(" delete ")), Ok(Strategy::Delete));
        assert_eq!(Strategy::parse(Some("rolling")), Ok(Strategy::Rolling));
        let err = Strategy::parse(Some("Rolling")).unwrap_err();
        assert!(
            err.contains("Unknown wavelet.dev/pod-delete-strategy \"Rolling\""),
            "{err}"
        );
    }

    #[test]
    fn selectors_that_could_hit_unrelated_pods_are_refused() {
        assert!(validate_selector("app=web").is_ok());
        assert!(validate_selector("app in (web, api),!canary").is_ok());
        assert!(validate_selector("app").is_ok());
        for bad in [
            "",
            "   ",
            "!canary",
            "tier notin (db)",
            "app!=web",
            "app=web,",
            "=web",
            "app in web",
        ] {
            assert!(validate_selector(bad).is_err(), "{bad:?} accepted");
        }
        assert!(validate_selector("")
            .unwrap_err()
            .starts_with("The empty pod selector"));
        assert!(validate_selector("app=web,")
            .unwrap_err()
            .starts_with("Invalid pod selector"));
    }

    #[test]
    fn listed_pods_count_as_created_before_whatever_their_timestamp() {
        let observation = Observation {
            at: crate::time::parse_rfc3339("2026-11-22T03:14:40Z").unwrap(),
            listed: HashSet::from(["listed".into()]),
        };
        // The API server's clock may run ahead of wavelet's.
        assert!(created_before(
            &pod("listed", "2026-11-22T03:14:45Z", true, false),
            &observation
        ));
    }

    #[test]
    fn pods_from_an_earlier_second_count_as_created_before() {
        let observation = Observation {
            at: crate::time::parse_rfc3339("2026-11-22T03:14:40Z").unwrap(),
            listed: HashSet::new(),
        };
        assert!(created_before(
            &pod("p", "2026-11-22T03:14:39Z", true, false),
            &observation
        ));
    }

    #[test]
    fn a_pod_from_the_same_second_counts_only_if_it_was_listed() {
        let at = crate::time::parse_rfc3339("2026-11-22T03:14:40Z").unwrap();
        let observation = Observation {
            at,
            listed: HashSet::from(["old".into()]),
        };
        assert!(created_before(
            &pod("old", "2026-11-22T03:14:40Z", true, false),
            &observation
        ));
        assert!(!created_before(
            &pod("new", "2026-11-22T03:14:40Z", true, false),
            &observation
        ));
        assert!(!created_before(
            &pod("later", "2026-11-22T03:14:41Z", true, false),
            &observation
        ));
        assert!(!created_before(
            &pod("no-timestamp", "", true, false),
            &observation
        ));
    }

    #[test]
    fn ready_again_needs_enough_live_pods_all_ready() {
        let ready = pod("a", "2026-11-22T03:14:40Z", true, false);
        let unready = pod("b", "2026-11-22T03:14:40Z", false, false);
        let leaving = pod("c", "2026-11-22T03:14:40Z", false, true);
        assert!(ready_again(
            &[ready.clone(), ready.clone(), leaving.clone()],
            2
        ));
        assert!(
            !ready_again(&[ready.clone(), leaving], 2),
            "a terminating Pod does not count"
        );
        assert!(!ready_again(&[ready.clone(), unready], 2));
        assert!(ready_again(&[], 0));
    }

    #[test]
    fn parses_the_api_servers_timestamps() {
        assert_eq!(crate::time::parse_rfc3339("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            crate::time::parse_rfc3339("2026-11-22T03:14:40Z"),
            Some(1_795_317_280)
        );
        assert_eq!(
            crate::time::parse_rfc3339("2026-11-22T03:14:40.123456Z"),
            Some(1_795_317_280)
        );
        assert_eq!(
            crate::time::parse_rfc3339("2000-02-29T00:00:00Z"),
            Some(951_782_400)
        );
        for (secs, text) in [
            (0u64, "1970-01-01T00:00:00Z"),
            (1_795_144_481, "2026-11-20T03:14:41Z"),
        ] {
            assert_eq!(crate::time::rfc3339(secs), text);
            assert_eq!(crate::time::parse_rfc3339(text), Some(secs));
        }
        for bad in [
            "",
            "2026-11-22",
            "2026-11-22T03:14:40",
            "2026-13-22T03:14:40Z",
            "2026-11-22T3:14:40Z",
            "x026-11-22T03:14:40Z",
        ] {
            assert_eq!(crate::time::parse_rfc3339(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn targets_are_the_live_pods_from_before_the_change_oldest_first() {
        let mut newer = pod("newer", "2026-11-22T03:14:30Z", true, false);
        newer.metadata.name = "a-newer".into();
        let mut older = pod("older", "2026-11-22T03:14:20Z", true, false);
        older.metadata.name = "z-older".into();
        let leaving = pod("leaving", "2026-11-22T03:14:10Z", true, true);
        let late = pod("late", "2026-11-22T03:14:40Z", true, false);
        let observation = Observation {
            at: crate::time::parse_rfc3339("2026-11-22T03:14:40Z").unwrap(),
            listed: HashSet::from(["newer".into(), "older".into(), "leaving".into()]),
        };
        let chosen = targets(&[newer, late, leaving, older], &observation);
        let names: Vec<&str> = chosen.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["z-older", "a-newer"]);
        assert_eq!(chosen[0].uid, "older");
    }

    #[test]
    fn the_state_lists_only_the_pods_their_timestamp_cannot_tell() {
        let at = crate::time::parse_rfc3339("2026-11-22T03:14:40Z").unwrap();
        let pods = [
            pod("older", "2026-11-22T03:14:39Z", true, false),
            pod("same-second", "2026-11-22T03:14:40Z", true, false),
            pod("ahead", "2026-11-22T03:14:45Z", true, false),
            pod("no-timestamp", "", true, false),
            pod("not-listed", "2026-11-22T03:14:40Z", true, false),
        ];
        let observation = Observation {
            at,
            listed: ["older", "same-second", "ahead", "no-timestamp"]
                .map(String::from)
                .into(),
        };
        let (recorded, left_out) = uids_to_record(&pods, &observation, 10);
        assert_eq!(recorded, ["ahead", "no-timestamp", "same-second"]);
        assert_eq!(left_out, 0);
        // A replacement resumed from what the state lists chooses the same Pods.
        let resumed = Observation {
            at,
            listed: recorded.into_iter().collect(),
        };
        assert_eq!(targets(&pods, &resumed), targets(&pods, &observation));
    }

    #[test]
    fn thousands_of_listed_pods_from_before_the_change_need_no_room_in_the_state() {
        let at = crate::time::parse_rfc3339("2026-11-22T03:14:40Z").unwrap();
        let pods: Vec<Pod> = (0..28_000)
            .map(|i| pod(&format!("{i:036}"), "2026-11-22T03:10:00Z", true, false))
            .collect();
        let observation = Observation {
            at,
            listed: pods.iter().map(|p| p.metadata.uid.clone()).collect(),
        };
        assert_eq!(uids_to_record(&pods, &observation, 1000), (vec![], 0));
        // Created in the same second by the API server's clock: at most `max`, sorted.
        let same: Vec<Pod> = (0..1500)
            .map(|i| pod(&format!("{i:04}"), "2026-11-22T03:14:40Z", true, false))
            .collect();
        let observation = Observation {
            at,
            listed: same.iter().map(|p| p.metadata.uid.clone()).collect(),
        };
        let (recorded, left_out) = uids_to_record(&same, &observation, 1000);
        assert_eq!((recorded.len(), left_out), (1000, 500));
        assert_eq!(recorded[0], "0000");
    }

    #[test]
    fn long_name_lists_are_cut_after_ten() {
        let many: VecDeque<Target> = (0..12)
            .map(|i| Target {
                name: format!("p{i}"),
                uid: String::new(),
            })
            .collect();
        assert_eq!(
            name_list(&many),
            "p0, p1, p2, p3, p4, p5, p6, p7, p8, p9 and 2 more"
        );
        assert_eq!(name_list(&many.iter().take(2).cloned().collect()), "p0, p1");
    }
}
