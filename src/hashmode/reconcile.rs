//! Hash mode: bring one workload's pod template hash in line with its configuration.
//!
//! The story of one reconcile, with early returns:
//! 1. Forgotten workload → forget it. Outside `--namespace-selector` → nothing. Opted out
//!    → remove wavelet's metadata annotations.
//! 2. Hash the referenced configuration from the cache.
//! 3. Required configuration missing → Warning Event, no rollout until it appears.
//! 4. Hash already recorded → nothing to do.
//! 5. No hash recorded yet → adopt: record the hash it was first seen with (`baseline`) on
//!    the workload's metadata, no rollout; changed since, it rolls once right after.
//!    Wave's hash or Reloader's records on the template (`takeover`): equal to their hash
//!    of the configuration now → adopt; different → roll.
//! 6. Configuration changed within `--debounce` (or the workload's pause period), or storm
//!    rules say wait → come back later.
//! 7. Only the set of counted objects changed, no data (a template edit, a reload list,
//!    Reloader's `ignore`/`match`, a SecretProviderClass whose versions are read for the
//!    first time), or what changed was written before wavelet first saw the workload it
//!    adopted (a lagging watch delivered it late: `baseline`) → record on the metadata, no
//!    rollout.
//! 8. Paused (globally, its Namespace, itself, or a ConfigMap/Secret it uses), a shared
//!    change rolling in waves that has not released it yet (or is held), or outside its
//!    restart window → pending until that changes (`fanout/`).
//! 9. Patch the template annotation (the workload's controller rolls) and emit an Event.
//!
//! An up-to-date workload of a fan-out's current wave reports its rollout to the fan-out
//! (step 4), which releases the next wave or holds the rest.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::annotations::{Flavor, WAVELET_BASIS, WAVELET_FIRST_WAVE_OF};
use crate::client::{Client, PatchType};
use crate::error::Error;
use crate::hashmode::baseline::{
    made_before_sight, sight, unknown_input, Baseline, Baselines, Unknown,
};
use crate::hashmode::basis::{self, Across, Basis};
use crate::hashmode::confirm;
use crate::hashmode::fanout::gates::Pending;
use crate::hashmode::fanout::record::Mark;
use crate::hashmode::fanout::{FanOuts, Verdict};
use crate::hashmode::parts::{hash_with_parts, parts_under, Fingerprint};
use crate::hashmode::rollout;
use crate::hashmode::takeover::{self, TakeOver};
use crate::hashmode::throttle::{Debounce, RolloutThrottle, Throttled};
use crate::model::cache::Cache;
use crate::model::counted::{counted, Counted};
use crate::model::hash;
use crate::model::workload::Style;
use crate::model::workload::WorkloadEntry;
use crate::objects::{ConfigKey, ConfigKind, Resource, WorkloadKey};
use crate::ops::events::{ObjectRef, Recorded, Recorder};
use crate::watch::worker::Action;

/// How often a workload waiting for a ConfigMap/Secret list to complete looks again.
const RELIST_WAIT: Duration = Duration::from_millis(250);

/// What one reconcile did, for logs, metrics and tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Forgotten,
    UpToDate,
    Adopted {
        hash: String,
    },
    /// Only what counts changed, not data: the new hash recorded on the metadata.
    Recorded {
        hash: String,
    },
    Rolled {
        from: String,
        to: String,
        /// When the change that caused the rollout was first noticed (its debounce window
        /// opened), for the change-to-patch latency; `None` for a change made while
        /// wavelet was not running.
        changed_at: Option<Instant>,
        /// The ConfigMaps and Secrets whose part of the hash changed or that are newly
        /// referenced; empty when wavelet has no memory of the workload (the change was made
        /// while it was not running).
        changed: Vec<ConfigKey>,
    },
    MissingConfig,
    /// The storm rules hold the rollout back; `first` the first time for this change of
    /// this workload (what `/metrics` counts: one change waiting is one, however often it
    /// is looked at).
    Throttled {
        rule: Throttled,
        first: bool,
    },
    /// A referenced object changed less than `--debounce` ago: more may follow.
    Debouncing,
    OptOutCleaned,
    /// Our own patch is not in the cache yet.
    AwaitingWatch,
    /// A referenced Secret's data at its current version is not read yet; its fetch
    /// wakes the workload.
    AwaitingData,
    /// Its namespace does not match `--namespace-selector`.
    OutOfScope,
    /// Paused, outside its restart window, or waiting for (or held by) a fan-out.
    Pending(Pending),
}

/// Settings of hash mode.
pub struct HashModeSettings {
    pub hmac_key: Option<Vec<u8>>,
    pub dry_run: bool,
    pub max_rollouts_per_second: f64,
    pub rollout_burst: u32,
    pub min_rollout_interval: Duration,
    /// Roll only once the referenced data has been quiet this long (`--debounce`).
    pub debounce: Duration,
    /// `--resource-label-selector`: the API server filters ConfigMaps and Secrets, so an
    /// absent one may exist without the label; it does not count and is not missing.
    pub absent_is_filtered: bool,
    /// The settings that shape the hash, recorded beside it (`basis`).
    pub basis: basis::Settings,
}

/// How long wavelet waits for its watch to show its own write before it believes a cache
/// that still lacks it (a watch delivers within milliseconds; a relist within minutes).
const OWN_WRITE_SEEN_WITHIN: Duration = Duration::from_secs(60);

/// One write of wavelet's on a workload's hash annotations.
struct Written {
    hash: String,
    /// What the cache may still show of the workload while it has not shown this write:
    /// the hash it recorded when the write was decided, and, when an earlier write of ours
    /// was not shown yet either, what that one's cache might still show and its hash.
    before: Vec<Option<String>>,
    at: Instant,
}

/// A `ConfigMissing` Warning that could not be queued (the Event queue full) is said
/// again this long after.
const UNSAID_WARNING_AGAIN: Duration = Duration::from_secs(30);

/// Writes of ours in a row that the cache has not shown, at most (older states beyond it
/// are taken as the cache having moved on).
const UNSEEN_CHAIN: usize = 4;

impl Written {
    /// Our write of `hash`, decided while the cache recorded `cached`; `previous`, our
    /// write before it.
    fn new(hash: &str, cached: Option<&str>, previous: Option<&Written>) -> Written {
        let mut before = match previous {
            Some(p) if own_write_unseen(cached, Some(p.view())).is_some() => {
                let mut chain = p.before.clone();
                chain.push(Some(p.hash.clone()));
                chain
            }
            _ => vec![cached.map(str::to_owned)],
        };
        if before.len() > UNSEEN_CHAIN {
            before.drain(..before.len() - UNSEEN_CHAIN);
        }
        Written {
            hash: hash.to_string(),
            before,
            at: Instant::now(),
        }
    }

    fn view(&self) -> (&str, &[Option<String>], Duration) {
        (&self.hash, &self.before, self.at.elapsed())
    }
}

/// What the reconciler remembers per workload between reconciles (lost on restart, which
/// is fine: the API server holds the hash that matters). Every opted-in workload has one,
/// so what only some have at times is boxed apart ([`Rare`]): 40 bytes, not 80.
#[derive(Default)]
struct Memory {
    /// Per referenced object, a digest of its part of the canonical form.
    fingerprints: Box<[Fingerprint]>,
    /// Adopted as first seen: the workload's resourceVersion then ([`Baseline::seen_at`]).
    /// A change of an object written before it, that a lagging watch delivers only now, is
    /// recorded without a rollout ([`made_before_sight`]).
    first_sight: Option<u64>,
    /// `None` while the workload has none of it: most workloads, most of the time.
    rare: Option<Box<Rare>>,
}

/// What a workload's memory holds only at times: after a write of ours until the watch
/// shows it, after a Warning, while throttled, while an opt-out's clean-up is unseen.
#[derive(Default)]
struct Rare {
    /// The hash last patched, what the workload recorded before, and when: while the
    /// cache still records what it recorded before the write, the cache is older than the
    /// write (see [`own_write_unseen`]).
    written: Option<Written>,
    /// The Warnings emitted, so each is emitted once.
    warned: Warned,
    /// Opted out: wavelet's metadata annotations were removed, and the watch has not shown
    /// the removal yet.
    cleaned: bool,
    /// The hash of the change the storm rules hold back (counted once), while they do.
    throttled: Option<Box<str>>,
}

#[derive(Default, PartialEq)]
struct Warned {
    /// The missing-configuration message last warned about.
    missing: Option<String>,
    /// A throttling Warning was emitted and the workload has not rolled since.
    throttle: bool,
    /// The annotation problems last warned about.
    problems: Option<Vec<String>>,
}

impl Memory {
    fn rare(&mut self) -> &mut Rare {
        self.rare.get_or_insert_with(Box::default)
    }

    fn written(&self) -> Option<&Written> {
        self.rare.as_ref()?.written.as_ref()
    }

    fn set_written(&mut self, written: Option<Written>) {
        if written.is_some() || self.rare.is_some() {
            self.rare().written = written;
        }
    }

    fn warned(&self) -> Option<&Warned> {
        self.rare.as_ref().map(|rare| &rare.warned)
    }

    fn warned_mut(&mut self) -> &mut Warned {
        &mut self.rare().warned
    }

    fn warned_missing(&self) -> Option<&str> {
        self.warned()?.missing.as_deref()
    }

    fn cleaned(&self) -> bool {
        self.rare.as_ref().is_some_and(|rare| rare.cleaned)
    }

    fn set_cleaned(&mut self, cleaned: bool) {
        if cleaned || self.rare.is_some() {
            self.rare().cleaned = cleaned;
        }
    }

    fn throttled(&self) -> Option<&str> {
        self.rare.as_ref()?.throttled.as_deref()
    }

    fn take_throttled(&mut self) -> Option<Box<str>> {
        self.rare.as_mut()?.throttled.take()
    }

    /// Drops the box once nothing is in it, before the memory is put back.
    fn shed(mut self: Box<Memory>) -> Box<Memory> {
        if self.rare.as_deref().is_some_and(Rare::is_empty) {
            self.rare = None;
        }
        self
    }
}

impl Rare {
    fn is_empty(&self) -> bool {
        let Rare {
            written,
            warned,
            cleaned,
            throttled,
        } = self;
        written.is_none() && *warned == Warned::default() && !cleaned && throttled.is_none()
    }
}

pub struct Reconciler {
    client: Client,
    cache: Arc<Cache>,
    recorder: Recorder,
    settings: HashModeSettings,
    /// The basis of the hashes made under `settings` ([`basis::under`]), made once.
    basis_under: Basis,
    throttle: Mutex<RolloutThrottle<WorkloadKey>>,
    debounce: Arc<Debounce<WorkloadKey>>,
    memory: Mutex<HashMap<WorkloadKey, Box<Memory>>>,
    fanouts: Arc<FanOuts>,
    baselines: Arc<Baselines>,
    /// Versions of objects found current in etcd before a rollout, for a few seconds.
    confirmations: confirm::Confirmations,
}

impl Reconciler {
    pub fn new(
        client: Client,
        cache: Arc<Cache>,
        recorder: Recorder,
        settings: HashModeSettings,
        debounce: Arc<Debounce<WorkloadKey>>,
        fanouts: Arc<FanOuts>,
    ) -> Reconciler {
        let throttle = RolloutThrottle::new(
            settings.max_rollouts_per_second,
            settings.rollout_burst,
            settings.min_rollout_interval,
            Instant::now(),
        );
        let baselines = Arc::new(Baselines::new(
            Arc::clone(&cache),
            &settings.basis,
            settings.absent_is_filtered,
        ));
        Reconciler {
            client,
            cache,
            baselines,
            recorder,
            basis_under: basis::under(&settings.basis),
            settings,
            throttle: Mutex::new(throttle),
            debounce,
            memory: Mutex::new(HashMap::new()),
            fanouts,
            confirmations: confirm::Confirmations::default(),
        }
    }

    /// The first-seen baselines, which whoever applies a ConfigMap/Secret change to the
    /// cache notes before the change ([`Baselines::before_change`]).
    pub fn baselines(&self) -> Arc<Baselines> {
        Arc::clone(&self.baselines)
    }

    /// Workloads whose rollout waits for a token of `--max-rollouts-per-second` now.
    pub fn rollouts_waiting(&self) -> usize {
        self.throttle.lock().unwrap().waiting()
    }

    /// Reconciles one workload. The work queue never hands the same key to two workers, so
    /// the workload's memory is taken out of the map for the duration (no lock held over I/O).
    pub fn reconcile(&self, key: &WorkloadKey) -> Result<(Action, Outcome), Error> {
        let started = Instant::now();
        let result = self.reconcile_once(key);
        // Everything noticed before this reconcile started is now reflected (or waits for
        // the object to appear); a later change keeps its own window.
        if let Ok((Action::Done, _)) = &result {
            self.debounce.settle(key, started);
        }
        result
    }

    fn reconcile_once(&self, key: &WorkloadKey) -> Result<(Action, Outcome), Error> {
        // 1.
        let Some(entry) = self.cache.workload(key) else {
            self.memory.lock().unwrap().remove(key);
            self.baselines.forget(key);
            self.throttle.lock().unwrap().forget(key);
            self.fanouts.settled(key);
            return Ok((Action::Done, Outcome::Forgotten));
        };
        if !self.cache.in_scope(&key.namespace) {
            // --namespace-selector: its namespace entering the scope wakes it again.
            return Ok((Action::Done, Outcome::OutOfScope));
        }
        let Some(flavor) = entry.flavor else {
            self.baselines.forget(key);
            self.fanouts.settled(key);
            let mut remembered = self.memory.lock().unwrap().remove(key).unwrap_or_default();
            if remembered.take_throttled().is_some() {
                self.throttle.lock().unwrap().cancel(key);
            }
            // Opted in again, it is first seen anew.
            remembered.first_sight = None;
            let result = self.clean_up_opt_out(key, &entry, &mut remembered);
            if remembered.cleaned() {
                self.memory
                    .lock()
                    .unwrap()
                    .insert(key.clone(), remembered.shed());
            }
            return result;
        };
        let mut remembered = self.memory.lock().unwrap().remove(key).unwrap_or_default();
        // Opted in (again): the clean-up of an earlier opt-out is over, whether or not the
        // watch showed it (a relist may have skipped it); the next opt-out cleans anew.
        remembered.set_cleaned(false);
        let result = self.reconcile_opted_in(key, &entry, flavor, &mut remembered);
        self.memory
            .lock()
            .unwrap()
            .insert(key.clone(), remembered.shed());
        result
    }

    fn reconcile_opted_in(
        &self,
        key: &WorkloadKey,
        entry: &WorkloadEntry,
        flavor: Flavor,
        remembered: &mut Memory,
    ) -> Result<(Action, Outcome), Error> {
        // 2.
        let resolved = counted(&self.cache, key, entry);
        let unknown = unknown_input(&self.cache, key, entry, &resolved);
        if unknown == Some(Unknown::SecretsListing) {
            log::debug!("{key}: waiting for the Secrets of its namespace to be listed");
            return Ok((Action::Done, Outcome::AwaitingData));
        }
        self.warn_problems(key, entry, remembered);
        if let Some(Unknown::Data(config)) = unknown {
            // Its read wakes the workload.
            log::debug!("{key}: waiting for the data of {config}");
            return Ok((Action::Done, Outcome::AwaitingData));
        }
        let (computed, named) = hash_with_parts(&resolved, self.settings.hmac_key.as_deref());
        let fingerprints: Box<[Fingerprint]> = named.iter().map(|(_, f)| *f).collect();
        let uid = entry.uid.to_string();
        let about = ObjectRef::new(&key.resource, &key.namespace, &key.name, &uid);

        // Recorded under a key no longer given, it is judged by what wavelet first saw,
        // like a workload not adopted yet (`Baselines::record_unjudgeable`).
        let unjudgeable =
            entry.recorded_hash().is_some() && self.baselines.record_unjudgeable(entry);
        if entry.recorded_hash().is_some() && !unjudgeable {
            // Adopted (by us, or by the leader while this replica stood by).
            self.baselines.forget(key);
        }
        // 3.–7., decided from the facts alone (`next_step`).
        let missing = !computed.missing.is_empty() && !self.settings.absent_is_filtered;
        let unseen = own_write_unseen(
            entry.recorded_hash(),
            remembered.written().map(Written::view),
        );
        let recorded = recorded_hash(entry.recorded_hash(), unseen, &computed.hash);
        // Taken over from Wave or Reloader: their record says what the Pods run.
        let takeover = match &entry.peers {
            Some(records) if remembered.written().is_none() && !missing => {
                takeover::decide(&self.client, records, &resolved)?
            }
            _ => None,
        };
        let recorded = match &takeover {
            Some(TakeOver::Same(_)) => None,
            Some(TakeOver::Changed { recorded, .. }) => Some(recorded.clone()),
            None => recorded,
        };
        // Our own write of this very hash is not in the cache yet: wait for the watch.
        let written_unseen = unseen == Some(computed.hash.as_str());
        // Computed under other settings (a flag, the key, wavelet's hash version): the
        // objects' parts tell a data change from a change of settings only.
        let basis_now = basis::of(&self.basis_under, &fingerprints);
        let recorded_basis = entry.basis.as_ref();
        // Under a previous key still given, the parts now are recomputed under it.
        let under_recorded_key = recorded_basis
            .filter(|recorded| recorded.key_id() != basis_now.key_id())
            .and_then(|recorded| self.settings.basis.key_by_id(recorded.key_id()))
            .map(|key| parts_under(&resolved, key));
        let across = match (&takeover, unseen) {
            (Some(_), _) => Across::SameBasis,
            // The hash it records is our own write, not shown yet: made under the settings
            // now, whatever older basis the cache still shows.
            (None, Some(_)) => Across::SameBasis,
            (None, None) => {
                basis::compare(recorded_basis, &basis_now, under_recorded_key.as_deref())
            }
        };
        let window = entry
            .counting
            .pause_period()
            .unwrap_or(self.settings.debounce);
        // Adopted as first seen: what changed since may have been written before that sight.
        let before_sight = match (remembered.first_sight, recorded.as_deref()) {
            (Some(seen_at), Some(recorded)) if recorded != computed.hash => {
                made_before_sight(seen_at, &remembered.fingerprints, &resolved, &named)
            }
            _ => None,
        };
        let facts = Facts {
            missing,
            recorded: recorded.as_deref(),
            computed: &computed.hash,
            written_unseen,
            // The window opens at the first data change since the workload was last
            // settled; deciding it here means any wake-up (the workload's own update, a
            // retry) respects it.
            quiet_at: self.debounce.window_opened(key).map(|at| at + window),
            membership_only: only_membership_changed(&remembered.fingerprints, &fingerprints)
                || before_sight.is_some()
                || matches!(across, Across::SettingsOnly | Across::KeyUnavailable)
                || classes_left_out(&resolved, &self.settings)
                    .is_some_and(|without| recorded.as_deref() == Some(without.as_str())),
        };
        let step = next_step(&facts, Instant::now());
        let nothing_to_roll = matches!(
            step,
            Step::Hold | Step::UpToDate | Step::Adopt | Step::Record
        );
        if nothing_to_roll && remembered.take_throttled().is_some() {
            // Reverted, missing, recorded: the reserved token goes back. (A workload that
            // debounces a newer change keeps its place in line.)
            self.throttle.lock().unwrap().cancel(key);
        }
        if step != Step::Hold {
            if let Some(rare) = &mut remembered.rare {
                rare.warned.missing = None;
            }
        }
        match step {
            Step::Hold => {
                let message = format!(
                    "Not rolling: {}. Pods would not start without it; wavelet rolls once it exists.",
                    computed
                        .missing
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join("; ")
                );
                if remembered.warned_missing() != Some(message.as_str()) {
                    // The first thing missing is the cause: a burst of workloads missing one
                    // ConfigMap is one Event on it, beside the first few workloads' own.
                    let cause = computed.missing.first().map(|m| {
                        let config = m.config();
                        ObjectRef::new(&config.kind.resource(), &config.namespace, &config.name, "")
                    });
                    let recorded = match &cause {
                        Some(cause) => self.recorder.warning_caused_by(
                            &about,
                            "ConfigMissing",
                            &message,
                            cause,
                        ),
                        None => self.recorder.warning(&about, "ConfigMissing", &message),
                    };
                    match recorded {
                        Recorded::Own => log::warn!("{key}: {message}"),
                        Recorded::Summed => log::debug!("{key}: {message}"),
                        // Its namespace is being deleted: nothing to say, nor again.
                        Recorded::Gone => log::debug!("{key}: {message}"),
                        // Not said: not remembered as said, and said again a while later.
                        Recorded::NotQueued => {
                            log::warn!("{key}: {message}");
                            return Ok((
                                Action::RequeueAfter(UNSAID_WARNING_AGAIN),
                                Outcome::MissingConfig,
                            ));
                        }
                    }
                    remembered.warned_mut().missing = Some(message);
                }
                return Ok((Action::Done, Outcome::MissingConfig));
            }
            Step::UpToDate => {
                // A hash recorded without a basis (by a wavelet before bases) gets one with
                // its next write, not now: a write per workload after an upgrade would
                // queue thousands of PATCHes before real changes.
                remembered.fingerprints = fingerprints;
                remembered.set_written(None);
                // A workload of a fan-out's current wave: its rollout moves the fan-out.
                let action = match self.fanouts.observe(key, entry, crate::time::unix_now())? {
                    Some(recheck) => Action::RequeueAfter(recheck),
                    None => Action::Done,
                };
                return Ok((action, Outcome::UpToDate));
            }
            // The watch showing the write wakes it (or, past the wait, the next relist).
            Step::AwaitingWatch => return Ok((Action::Done, Outcome::AwaitingWatch)),
            Step::Debounce(wait) => return Ok((Action::RequeueAfter(wait), Outcome::Debouncing)),
            // A first hash from ConfigMaps/Secrets that a failing list keeps out of date
            // would be followed by a rollout once the list lands: adopt after it.
            Step::Adopt if self.cache.configs_relisting() => {
                log::debug!("{key}: adopting once the ConfigMaps and Secrets are listed");
                return Ok((Action::RequeueAfter(RELIST_WAIT), Outcome::AwaitingData));
            }
            Step::Adopt | Step::Record => {
                // Adopted with the configuration as first seen: a change since rolls once,
                // right after, through the normal path.
                let current = Baseline {
                    hash: computed.hash.clone(),
                    fingerprints: fingerprints.clone(),
                    seen_at: sight(entry),
                };
                let first_seen = (step == Step::Adopt
                    || (step == Step::Record && across == Across::KeyUnavailable))
                    .then(|| {
                        let noted = self.baselines.first_seen(key, current.clone());
                        // Noted from a cache that a lagging watch kept behind the workload:
                        // what it missed came before the workload, and is part of the baseline.
                        let missed = noted.seen_at.and_then(|seen_at| {
                            made_before_sight(seen_at, &noted.fingerprints, &resolved, &named)
                        });
                        match missed {
                            Some(_) => Baseline {
                                seen_at: noted.seen_at,
                                ..current
                            },
                            None => noted,
                        }
                    });
                let hash = first_seen
                    .as_ref()
                    .map_or(computed.hash.as_str(), |b| b.hash.as_str())
                    .to_string();
                let written_basis = match &first_seen {
                    Some(baseline) => basis::of(&self.basis_under, &baseline.fingerprints),
                    None => basis_now.clone(),
                };
                let body = json!({"metadata": {"annotations": {
                    flavor.hash_key(): hash,
                    WAVELET_BASIS: written_basis.render(),
                }}});
                let short = hash::short(&hash);
                let line = if step == Step::Adopt && hash != computed.hash {
                    format!(
                        "adopted with config hash {short}, as first seen (no rollout); it changed since to {}: rolling once",
                        hash::short(&computed.hash)
                    )
                } else if let Some(TakeOver::Same(peer)) = &takeover {
                    format!(
                        "taken over from {}, whose record matches the configuration: adopted with config hash {short} (no rollout)",
                        peer.name()
                    )
                } else if step == Step::Adopt {
                    format!("adopted with config hash {short} (no rollout)")
                } else if let (Across::KeyUnavailable, Some(recorded), true) =
                    (across, &recorded_basis, hash != computed.hash)
                {
                    format!(
                        "recorded config hash {short} without a rollout, as first seen: the key it was recorded under (k={}) is no longer in --hash-key-file; it changed since to {}: rolling once",
                        recorded.key_id(),
                        hash::short(&computed.hash)
                    )
                } else if let (Across::KeyUnavailable, Some(recorded)) = (across, &recorded_basis) {
                    format!(
                        "recorded config hash {short} without a rollout: the hash key changed, and the key it was recorded under (k={}) is no longer in --hash-key-file: a change made while wavelet was stopped could not be checked in {}",
                        recorded.key_id(),
                        not_checked(recorded, &named)
                    )
                } else if let Some(objects) = &before_sight {
                    let names: Vec<String> = objects.iter().map(ToString::to_string).collect();
                    let verb = if names.len() == 1 { "was" } else { "were" };
                    format!(
                        "recorded config hash {short} without a rollout: {} {verb} written before wavelet first saw the workload (a lagging watch delivered it after), so its Pods started with it",
                        and_list(&names)
                    )
                } else if across == Across::SettingsOnly {
                    format!(
                        "recorded config hash {short} without a rollout: the settings that shape the hash changed (--resource-label-selector, --ignore-configmaps/--ignore-secrets, --hash-key-file or wavelet's hash version), and no data it counted before changed"
                    )
                } else {
                    format!(
                        "recorded config hash {short} without a rollout: {}",
                        describe_changes(&remembered.fingerprints, &named)
                    )
                };
                if self.settings.dry_run {
                    let line = line.replacen("adopted with", "adopt with", 1);
                    log::info!("{key}: dry run: would {line}");
                } else {
                    self.patch(key, &body)?;
                    log::info!("{key}: {line}");
                }
                self.baselines.forget(key);
                let changed_since = hash != computed.hash;
                // The fan-out judges a later change by the parts behind the hash the
                // workload carries: known here only when that is the current hash (adopted
                // as first seen with an older one, it has no memory: every shared object it
                // uses counts, as after a restart).
                if changed_since {
                    self.fanouts.adopted_before_a_change(key, &hash);
                } else {
                    self.fanouts.carries(key, &computed.hash, &resolved);
                }
                remembered.fingerprints = match first_seen {
                    Some(baseline) => {
                        remembered.first_sight = baseline.seen_at;
                        baseline.fingerprints
                    }
                    None => fingerprints,
                };
                let written = Written::new(&hash, entry.recorded_hash(), remembered.written());
                remembered.set_written(Some(written));
                let outcome = if step == Step::Adopt {
                    Outcome::Adopted { hash }
                } else {
                    Outcome::Recorded { hash }
                };
                // Changed since first seen: the rollout follows (its debounce window,
                // opened by the change, still holds).
                let action = if changed_since {
                    Action::RequeueAfter(Duration::ZERO)
                } else {
                    Action::Done
                };
                return Ok((action, outcome));
            }
            Step::Roll => {}
        }
        let recorded = recorded.expect("a rollout has a recorded hash");
        // A record this replica did not make may be of data newer than its cache
        // (`confirm`): the objects it differs on are read before anything rolls.
        if !confirm::record_explained(entry.basis.as_ref(), &remembered.fingerprints) {
            let objects = confirm::to_confirm(entry.basis.as_ref(), &resolved, &named);
            if let Some(config) =
                confirm::first_behind(&self.client, &self.confirmations, &objects)?
            {
                log::info!(
                    "{key}: not rolled: its record is of other data than this replica's cache holds, and the cache is behind the API server on {config}; the watch brings it, and the workload is decided again"
                );
                return Ok((Action::Done, Outcome::AwaitingData));
            }
        }
        // 8.
        let (note, marks) = match self.fanouts.check(key, entry, crate::time::unix_now())? {
            Verdict::Go { note, marks } => (note, marks),
            Verdict::Wait { pending, requeue } => {
                let action = requeue.map_or(Action::Done, Action::RequeueAfter);
                return Ok((action, Outcome::Pending(pending)));
            }
        };
        // The storm rules apply to rollouts only.
        if let Err(rule) = self.throttle.lock().unwrap().admit(key, Instant::now()) {
            if let Throttled::MinInterval(wait) = rule {
                if !remembered.warned().is_some_and(|w| w.throttle) {
                    let message = format!(
                        "The configuration keeps changing: rolling at most every {:?} (--min-rollout-interval). The next rollout, with the latest configuration, is in {:?}.",
                        self.settings.min_rollout_interval, wait
                    );
                    log::warn!("{key}: {message}");
                    self.recorder.warning(&about, "RolloutThrottled", &message);
                    remembered.warned_mut().throttle = true;
                }
            } else {
                log::debug!("{key}: rollout waits {:?} for its token", rule.wait());
            }
            let first = remembered.throttled() != Some(computed.hash.as_str());
            if first {
                remembered.rare().throttled = Some(computed.hash.as_str().into());
            }
            return Ok((
                Action::RequeueAfter(rule.wait()),
                Outcome::Throttled { rule, first },
            ));
        }
        remembered.take_throttled();

        // 9.
        let (changed, changed_keys) = match takeover {
            Some(TakeOver::Changed { peer, changed, .. }) => {
                let names: Vec<String> = changed.iter().map(ToString::to_string).collect();
                let verb = if changed.len() == 1 { "has" } else { "have" };
                (
                    format!(
                        "{} {verb} changed since {} last acted on it.",
                        and_list(&names),
                        peer.name()
                    ),
                    changed,
                )
            }
            _ => (
                describe_changes(&remembered.fingerprints, &named),
                changed_objects(&remembered.fingerprints, &named),
            ),
        };
        let mut message = format!(
            "{changed} Config hash {} → {}.",
            hash::short(&recorded),
            hash::short(&computed.hash)
        );
        if let Some(note) = note {
            message.push_str(&format!(" Released by {note}."));
        }
        if self.settings.dry_run {
            log::info!("{key}: dry run: would roll: {message}");
            self.recorder.normal(
                &about,
                "ConfigChanged",
                &format!("Dry run, not rolled: {message}"),
            );
        } else {
            let mut body = rollout::patch(
                entry.style,
                flavor.hash_key(),
                &computed.hash,
                &crate::time::rfc3339(crate::time::unix_now()),
            );
            body["metadata"]["annotations"][WAVELET_BASIS] = json!(basis_now.render());
            // Released by a fan-out's first wave: the mark that lets a restart before the
            // wave's record find it; any other rollout drops a mark of an earlier one.
            if !marks.is_empty() {
                body["metadata"]["annotations"][WAVELET_FIRST_WAVE_OF] =
                    json!(Mark::encode(&marks));
            } else if entry.gates().first_wave_of.is_some() {
                body["metadata"]["annotations"][WAVELET_FIRST_WAVE_OF] = Value::Null;
            }
            let patched = match self.patch_returning(key, &body) {
                Ok(patched) => patched,
                Err(err) => {
                    // The rollout did not happen: it must not count against the interval,
                    // and a fan-out that released it holds once it stays refused.
                    self.throttle.lock().unwrap().forget(key);
                    self.fanouts.refused(key, &err.to_string());
                    return Err(err);
                }
            };
            self.fanouts.carries(key, &computed.hash, &resolved);
            log::info!("{key}: rolled: {message}");
            if let (Style::CronJob { run_now: true }, Some(cronjob)) = (entry.style, patched) {
                self.start_job(key, &about, &cronjob, &computed.hash);
            }
            self.recorder.normal(&about, "ConfigChanged", &message);
        }
        // Released by a first wave: its record goes after the PATCH, never before it.
        if !marks.is_empty() {
            if let Err(err) = self.fanouts.write_released() {
                log::warn!("{key}: the record of the first wave that released it is not written yet ({err}): the next write of its fan-out includes it; until then the wave's marks stand for it");
            }
        }
        remembered.fingerprints = fingerprints;
        let written = Written::new(&computed.hash, entry.recorded_hash(), remembered.written());
        remembered.set_written(Some(written));
        if let Some(rare) = &mut remembered.rare {
            rare.warned.throttle = false;
        }
        Ok((
            Action::Done,
            Outcome::Rolled {
                from: recorded,
                to: computed.hash,
                changed_at: self.debounce.window_opened(key),
                changed: changed_keys,
            },
        ))
    }

    /// Opted out: remove wavelet's hash annotations from the metadata. The template's stays:
    /// removing it would roll the workload.
    fn clean_up_opt_out(
        &self,
        key: &WorkloadKey,
        entry: &WorkloadEntry,
        remembered: &mut Memory,
    ) -> Result<(Action, Outcome), Error> {
        if entry.metadata_hash_keys.is_empty() {
            remembered.set_cleaned(false);
            return Ok((Action::Done, Outcome::UpToDate));
        }
        // Removed already, and the watch has not shown the removal yet (another event of
        // the workload, such as its controller's status update, woke us): once is enough.
        if remembered.cleaned() {
            return Ok((Action::Done, Outcome::AwaitingWatch));
        }
        let annotations: serde_json::Map<String, Value> = entry
            .metadata_hash_keys
            .iter()
            .map(|k| (k.to_string(), Value::Null))
            .collect();
        if self.settings.dry_run {
            log::info!(
                "{key}: dry run: would remove {:?} after opt-out",
                entry.metadata_hash_keys
            );
        } else {
            self.patch(key, &json!({"metadata": {"annotations": annotations}}))?;
            log::info!("{key}: opted out; removed wavelet's metadata annotations (the template is left alone)");
            remembered.set_cleaned(true);
            // What wavelet wrote before is gone now: after an opt-in it adopts anew, without
            // waiting for the watch to show an old write.
            remembered.set_written(None);
        }
        Ok((Action::Done, Outcome::OptOutCleaned))
    }

    /// Reload-list entries and pause periods that could not be read: one Warning Event each
    /// time the set of problems changes.
    fn warn_problems(&self, key: &WorkloadKey, entry: &WorkloadEntry, remembered: &mut Memory) {
        let problems = entry.counting.problems();
        let warned = remembered.warned().and_then(|w| w.problems.as_deref());
        if problems.is_empty() || warned == Some(problems) {
            return;
        }
        let uid = entry.uid.to_string();
        let about = ObjectRef::new(&key.resource, &key.namespace, &key.name, &uid);
        for problem in problems {
            log::warn!("{key}: {problem}");
            self.recorder.warning(&about, "InvalidAnnotation", problem);
        }
        remembered.warned_mut().problems = Some(problems.to_vec());
    }

    /// Starts one Job from a CronJob's (just patched) job template, as Reloader does for
    /// the CronJobs it reloads. Never retried: the CronJob already carries the new hash,
    /// so a failure is a Warning Event and its next scheduled run uses the new
    /// configuration anyway.
    fn start_job(&self, key: &WorkloadKey, about: &ObjectRef, cronjob: &Value, hash: &str) {
        let name = rollout::job_name(&key.name, hash);
        let job = match rollout::job_from_cronjob(cronjob, &name) {
            Ok(job) => job,
            Err(reason) => {
                log::warn!("{key}: not starting a Job: {reason}");
                return;
            }
        };
        let path = format!(
            "{}?fieldManager=wavelet",
            Resource::jobs().collection_path(Some(&key.namespace))
        );
        match self.client.post::<serde::de::IgnoredAny>(&path, &job) {
            Ok(_) => {
                log::info!("{key}: started Job {name} with the new configuration");
                self.recorder.normal(
                    about,
                    "JobStarted",
                    &format!("Started Job {name} from the job template, which now carries the new configuration."),
                );
            }
            Err(err) if err.is_already_exists() => log::info!(
                "{key}: Job {name} for this configuration already exists; not starting another"
            ),
            Err(err) => {
                log::warn!("{key}: could not start Job {name}: {err}");
                self.recorder.warning(
                    about,
                    "JobNotStarted",
                    &format!("Could not start Job {name} for the new configuration: {err}. The next scheduled run uses it."),
                );
            }
        }
    }

    /// Patches the workload and returns it as the API server answered, for a CronJob whose
    /// Job is started from it; `None` for other kinds (their answer is not parsed) and when
    /// the workload is gone.
    fn patch_returning(&self, key: &WorkloadKey, body: &Value) -> Result<Option<Value>, Error> {
        if !key.resource.is_cronjobs() {
            return self.patch(key, body).map(|()| None);
        }
        let path = format!(
            "{}?fieldManager=wavelet",
            key.resource.object_path(&key.namespace, &key.name)
        );
        match self
            .client
            .patch::<Value>(&path, PatchType::Strategic, body)
        {
            Ok(object) => Ok(Some(object)),
            Err(err) if err.is_not_found() => Ok(None),
            Err(err) => Err(err),
        }
    }

    fn patch(&self, key: &WorkloadKey, body: &Value) -> Result<(), Error> {
        let path = format!(
            "{}?fieldManager=wavelet",
            key.resource.object_path(&key.namespace, &key.name)
        );
        // Custom resources do not support strategic merge; for a map of annotations both
        // mean the same.
        let patch_type = if key.resource.is_builtin() {
            PatchType::Strategic
        } else {
            PatchType::Merge
        };
        match self
            .client
            .patch::<serde::de::IgnoredAny>(&path, patch_type, body)
        {
            Ok(_) => Ok(()),
            // Deleted meanwhile: its DELETED event forgets it.
            Err(err) if err.is_not_found() => Ok(()),
            Err(err) => Err(err),
        }
    }
}

/// What a reconcile does next, decided from the facts alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// A required object or key is missing: no rollout to Pods that would not start.
    Hold,
    UpToDate,
    /// wavelet wrote this hash and its watch has not shown the write yet.
    AwaitingWatch,
    /// No hash recorded yet: record it on the metadata, no rollout.
    Adopt,
    /// A referenced object changed less than the debounce window ago: more may follow.
    Debounce(Duration),
    /// Only which objects count changed, no data: record it, no rollout.
    Record,
    /// Roll, within the storm rules.
    Roll,
}

/// What [`next_step`] decides from.
pub(crate) struct Facts<'a> {
    /// A required object or key is missing (and not filtered out on purpose).
    pub missing: bool,
    pub recorded: Option<&'a str>,
    pub computed: &'a str,
    pub written_unseen: bool,
    /// When the debounce window of the latest change closes.
    pub quiet_at: Option<Instant>,
    pub membership_only: bool,
}

/// Steps 3 to 7 of the story, as a pure function of the facts and the time.
pub(crate) fn next_step(f: &Facts, now: Instant) -> Step {
    if f.missing {
        return Step::Hold;
    }
    if f.recorded == Some(f.computed) {
        return Step::UpToDate;
    }
    if f.written_unseen {
        return Step::AwaitingWatch;
    }
    if f.recorded.is_none() {
        return Step::Adopt;
    }
    if let Some(quiet_at) = f.quiet_at.filter(|q| *q > now) {
        return Step::Debounce(quiet_at - now);
    }
    if f.membership_only {
        return Step::Record;
    }
    Step::Roll
}

/// Our own last write (`written`: its hash, what the cache may show of the workload before
/// it, how long ago) while the cache does not show it yet: the cache still shows one of the
/// states before the write (see [`Written::new`]), and the write is recent (a watch shows a
/// write within milliseconds; when watching is forbidden and workloads are polled, within
/// the poll period). A cache that records anything else has seen the write or a later one
/// (two writes reordered in flight, someone else's), and is believed: at worst wavelet
/// writes the same hash again, which changes nothing on the workload.
fn own_write_unseen<'a>(
    cached: Option<&str>,
    written: Option<(&'a str, &[Option<String>], Duration)>,
) -> Option<&'a str> {
    match written {
        Some((hash, before, ago))
            if before.iter().any(|b| b.as_deref() == cached)
                && cached != Some(hash)
                && ago < OWN_WRITE_SEEN_WITHIN =>
        {
            Some(hash)
        }
        _ => None,
    }
}

/// The hash the workload records: the cache's, unless our own write is not in the cache
/// yet (`unseen`, see [`own_write_unseen`]) and the configuration has changed since (the
/// same hash is [`Facts::written_unseen`]): a change in between must roll rather than be
/// taken for a first sight.
fn recorded_hash(cached: Option<&str>, unseen: Option<&str>, computed: &str) -> Option<String> {
    match unseen {
        Some(written) if written != computed => Some(written.to_string()),
        _ => cached.map(str::to_owned),
    }
}

/// The hash of what counts without its SecretProviderClasses, when some count: a hash
/// recorded before the classes' versions were read (adopted before the Pods mounted them,
/// scaled to zero, or before `--enable-csi-integration`). Recorded, it makes their coming
/// a change of what counts only, even with no memory of the workload (after a restart):
/// the Pods running mounted these versions when they started, and are not rolled for them.
fn classes_left_out(resolved: &[Counted], settings: &HashModeSettings) -> Option<String> {
    let is_class = |(r, _): &&Counted| r.config.kind == ConfigKind::SecretProviderClass;
    if !resolved.iter().any(|c| is_class(&c)) {
        return None;
    }
    let without = hash::compute(
        resolved
            .iter()
            .filter(|c| !is_class(c))
            .map(|(r, e)| (r, e.as_ref().and_then(|e| e.digests()))),
        settings.hmac_key.as_deref(),
    );
    Some(without.hash)
}

/// Whether the change from `before` to `after` is only in which objects count: no object
/// that counted before and still counts has a different part. With no memory (wavelet
/// started after the change) it cannot tell, and the change rolls.
fn only_membership_changed(before: &[Fingerprint], after: &[Fingerprint]) -> bool {
    if before.is_empty() {
        return false;
    }
    let kept_changed = after.iter().any(|now| {
        before
            .iter()
            .any(|old| old.object == now.object && old.part != now.part)
    });
    let same_set = before.len() == after.len()
        && after
            .iter()
            .all(|now| before.iter().any(|old| old.object == now.object));
    !kept_changed && !same_set
}

/// The objects whose data a basis recorded under a key no longer given cannot vouch for:
/// those counted then and now (any other could not be checked under any key).
fn not_checked(recorded: &Basis, named: &[(&ConfigKey, Fingerprint)]) -> String {
    let objects: Vec<String> = named
        .iter()
        .filter(|(_, f)| f.present && recorded.parts.iter().any(|(o, _)| *o == f.object))
        .map(|(config, _)| config.to_string())
        .collect();
    if objects.is_empty() {
        "no object (none counted then still counts)".into()
    } else {
        objects.join(", ")
    }
}

/// A sentence for people saying what changed, from the fingerprints before and after:
/// "ConfigMap ns/app changed.", "Secret ns/db is now referenced; 1 object is no longer
/// referenced." When wavelet has no memory of the workload (it started after the
/// change), says so.
fn describe_changes(before: &[Fingerprint], after: &[(&ConfigKey, Fingerprint)]) -> String {
    if before.is_empty() {
        return "The configuration changed while wavelet was not watching.".into();
    }
    let named = |key: &ConfigKey| format!("{} {}/{}", key.kind.kind(), key.namespace, key.name);
    let known = |now: &Fingerprint| before.iter().any(|old| old.object == now.object);
    let changed: Vec<String> = after
        .iter()
        .filter(|(_, now)| known(now) && !before.contains(now))
        .map(|(key, _)| named(key))
        .collect();
    let added: Vec<String> = after
        .iter()
        .filter(|(_, now)| !known(now))
        .map(|(key, _)| named(key))
        .collect();
    let dropped = before
        .iter()
        .filter(|old| !after.iter().any(|(_, now)| now.object == old.object))
        .count();
    let mut clauses = Vec::new();
    if !changed.is_empty() {
        clauses.push(format!("{} changed", and_list(&changed)));
    }
    if !added.is_empty() {
        let verb = if added.len() == 1 { "is" } else { "are" };
        clauses.push(format!("{} {verb} now referenced", and_list(&added)));
    }
    match dropped {
        0 => {}
        1 => clauses.push("1 object is no longer referenced".into()),
        n => clauses.push(format!("{n} objects are no longer referenced")),
    }
    if clauses.is_empty() {
        return "The configuration changed.".into();
    }
    format!("{}.", clauses.join("; "))
}

/// The objects whose part of the hash changed or that are newly referenced, in the order
/// of `after`; none when there is nothing before to compare with.
fn changed_objects(before: &[Fingerprint], after: &[(&ConfigKey, Fingerprint)]) -> Vec<ConfigKey> {
    if before.is_empty() {
        return Vec::new();
    }
    after
        .iter()
        .filter(|(_, now)| !before.contains(now))
        .map(|(key, _)| (*key).clone())
        .collect()
}

/// "a", "a and b", "a, b and c".
fn and_list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::ConfigKind;

    fn key(name: &str) -> ConfigKey {
        ConfigKey::new(ConfigKind::ConfigMap, "ns", name)
    }

    fn fp(name: &str, part: &str) -> Fingerprint {
        Fingerprint::new(&key(name), part, true, None)
    }

    #[test]
    fn a_workloads_memory_boxes_what_it_holds_at_times_only_while_it_holds_any() {
        assert!(std::mem::size_of::<Memory>() <= 40);
        let mut memory = Box::<Memory>::default();
        memory.set_written(None);
        memory.set_cleaned(false);
        assert!(
            memory.rare.is_none(),
            "clearing what is not there boxes nothing"
        );
        memory.set_written(Some(Written::new("a", None, None)));
        memory.rare().throttled = Some("b".into());
        let mut memory = memory.shed();
        assert_eq!(memory.written().map(|w| w.hash.as_str()), Some("a"));
        assert_eq!(memory.throttled(), Some("b"));
        memory.set_written(None);
        let mut memory = memory.shed();
        assert!(memory.rare.is_some(), "still throttled");
        memory.take_throttled();
        memory.warned_mut().throttle = true;
        let mut memory = memory.shed();
        assert!(memory.rare.is_some(), "a Warning said is remembered");
        memory.warned_mut().throttle = false;
        assert!(memory.shed().rare.is_none(), "nothing left: the box goes");
    }

    #[test]
    fn names_the_objects_whose_part_of_the_hash_changed() {
        let before = [fp("a", "1"), fp("b", "1")];
        let (a, b) = (key("a"), key("b"));
        let after = [(&a, fp("a", "1")), (&b, fp("b", "2"))];
        assert_eq!(describe_changes(&before, &after), "ConfigMap ns/b changed.");
        let after = [(&a, fp("a", "2")), (&b, fp("b", "2"))];
        assert_eq!(
            describe_changes(&before, &after),
            "ConfigMap ns/a and ConfigMap ns/b changed."
        );
    }

    #[test]
    fn our_own_write_the_cache_does_not_show_yet_is_what_the_workload_records() {
        let second = Duration::from_secs(1);
        // Adopted with "a", not in the cache yet (it records nothing, as before the write),
        // and the configuration changed to "b": a rollout from "a", not a second adoption.
        let none: &[Option<String>] = &[None];
        let x: &[Option<String>] = &[Some("x".into())];
        let unseen = own_write_unseen(None, Some(("a", none, second)));
        assert_eq!(unseen, Some("a"));
        assert_eq!(recorded_hash(None, unseen, "b").as_deref(), Some("a"));
        // Rolled from "x" to "a", the cache still at "x": "a".
        let unseen = own_write_unseen(Some("x"), Some(("a", x, second)));
        assert_eq!(recorded_hash(Some("x"), unseen, "b").as_deref(), Some("a"));
        // The hash computed now is the one written and unseen: awaiting the watch.
        assert_eq!(recorded_hash(None, Some("b"), "b"), None);
        // The cache shows the write, or it is too old to trust: the cache's.
        assert_eq!(own_write_unseen(Some("a"), Some(("a", none, second))), None);
        let long_ago = OWN_WRITE_SEEN_WITHIN + second;
        assert_eq!(own_write_unseen(None, Some(("a", none, long_ago))), None);
        assert_eq!(recorded_hash(Some("x"), None, "b").as_deref(), Some("x"));
    }

    /// Regression (found by the soak, seed 1795690460422969795): a PATCH whose connection
    /// dropped was applied after the retry's, so the workload recorded the older hash
    /// "old" after wavelet's "new". The cache then showed neither what the workload
    /// recorded before ("before") nor the write, and wavelet waited 60 s for its write to
    /// show (the soak's bound is 7 s). A cache past the state before the write is believed.
    #[test]
    fn a_cache_that_shows_a_third_hash_has_seen_the_write_and_is_believed() {
        let second = Duration::from_secs(1);
        let before: &[Option<String>] = &[Some("before".into())];
        let written = Some(("new", before, second));
        assert_eq!(own_write_unseen(Some("before"), written), Some("new"));
        assert_eq!(own_write_unseen(Some("old"), written), None);
        assert_eq!(
            recorded_hash(Some("old"), own_write_unseen(Some("old"), written), "new").as_deref(),
            Some("old")
        );
    }

    /// Adopted (our write "h0", the cache still without it), then rolled (our write "h1",
    /// decided from "h0" as recorded): until the cache shows "h1", it may show the state
    /// before the adoption or the adoption itself, and neither is believed over "h1". Seen
    /// as a second rollout when a template edit's late event carried the pre-adoption state.
    #[test]
    fn writes_in_a_row_that_the_cache_has_not_shown_chain_their_states_before() {
        let adopted = Written::new("h0", None, None);
        let rolled = Written::new("h1", None, Some(&adopted));
        assert_eq!(rolled.before, [None, Some("h0".to_string())]);
        assert_eq!(own_write_unseen(None, Some(rolled.view())), Some("h1"));
        assert_eq!(
            own_write_unseen(Some("h0"), Some(rolled.view())),
            Some("h1")
        );
        assert_eq!(own_write_unseen(Some("h1"), Some(rolled.view())), None);
        assert_eq!(own_write_unseen(Some("other"), Some(rolled.view())), None);
        // Once the cache showed the adoption, the next write starts a chain of its own.
        let again = Written::new("h2", Some("h1"), Some(&rolled));
        assert_eq!(again.before, [Some("h1".to_string())]);
    }

    #[test]
    fn the_changed_objects_are_the_changed_and_the_newly_referenced_ones() {
        let (a, b, c) = (key("a"), key("b"), key("c"));
        let before = [fp("a", "1"), fp("b", "1")];
        let after = [(&a, fp("a", "2")), (&b, fp("b", "1")), (&c, fp("c", "1"))];
        assert_eq!(changed_objects(&before, &after), [key("a"), key("c")]);
        assert!(
            changed_objects(&[], &after).is_empty(),
            "nothing to compare with"
        );
    }

    #[test]
    fn says_when_the_change_happened_while_not_watching() {
        let a = key("a");
        assert_eq!(
            describe_changes(&[], &[(&a, fp("a", "1"))]),
            "The configuration changed while wavelet was not watching."
        );
    }

    #[test]
    fn names_references_that_were_added_and_counts_dropped_ones_in_a_sentence() {
        let before = [fp("a", "1")];
        let b = key("b");
        let after = [(&b, fp("b", "1"))];
        assert_eq!(
            describe_changes(&before, &after),
            "ConfigMap ns/b is now referenced; 1 object is no longer referenced."
        );
    }

    fn facts<'a>(recorded: Option<&'a str>, computed: &'a str) -> Facts<'a> {
        Facts {
            missing: false,
            recorded,
            computed,
            written_unseen: false,
            quiet_at: None,
            membership_only: false,
        }
    }

    #[test]
    fn a_missing_required_object_holds_whatever_else_is_true() {
        let now = Instant::now();
        let f = Facts {
            missing: true,
            ..facts(Some("a"), "b")
        };
        assert_eq!(next_step(&f, now), Step::Hold);
    }

    #[test]
    fn the_same_hash_is_up_to_date_and_no_hash_yet_is_adopted_without_a_rollout() {
        let now = Instant::now();
        assert_eq!(next_step(&facts(Some("a"), "a"), now), Step::UpToDate);
        assert_eq!(next_step(&facts(None, "a"), now), Step::Adopt);
    }

    #[test]
    fn our_own_write_not_yet_seen_is_waited_for_not_written_again() {
        let f = Facts {
            written_unseen: true,
            ..facts(Some("a"), "b")
        };
        assert_eq!(next_step(&f, Instant::now()), Step::AwaitingWatch);
    }

    #[test]
    fn a_change_inside_its_debounce_window_waits_for_the_rest_of_it() {
        let now = Instant::now();
        let f = Facts {
            quiet_at: Some(now + Duration::from_millis(300)),
            ..facts(Some("a"), "b")
        };
        assert_eq!(
            next_step(&f, now),
            Step::Debounce(Duration::from_millis(300))
        );
        let closed = Facts {
            quiet_at: Some(now),
            ..facts(Some("a"), "b")
        };
        assert_eq!(next_step(&closed, now), Step::Roll);
    }

    #[test]
    fn a_change_only_in_what_counts_is_recorded_and_a_data_change_rolls() {
        let now = Instant::now();
        let f = Facts {
            membership_only: true,
            ..facts(Some("a"), "b")
        };
        assert_eq!(next_step(&f, now), Step::Record);
        assert_eq!(next_step(&facts(Some("a"), "b"), now), Step::Roll);
    }

    #[test]
    fn membership_only_compares_the_parts_of_objects_that_count_before_and_after() {
        let (a1, a2, b1) = (fp("a", "1"), fp("a", "2"), fp("b", "1"));
        assert!(only_membership_changed(&[a1], &[a1, b1]), "b now counts");
        assert!(
            only_membership_changed(&[a1, b1], &[a1]),
            "b no longer counts"
        );
        assert!(
            !only_membership_changed(&[a1], &[a2, b1]),
            "a's data changed too"
        );
        assert!(!only_membership_changed(&[a1], &[a2]), "a data change");
        assert!(
            !only_membership_changed(&[], &[a1]),
            "no memory: a restart rolls"
        );
    }
}
