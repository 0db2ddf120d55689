//! First-seen baselines: the hash a workload not adopted yet is adopted with is the hash of
//! its configuration as wavelet first knew it, not the hash when the adoption write goes
//! out. Adoption writes queue behind the request budget (minutes at thousands of
//! workloads); a change in between must roll once after adoption, not be taken in.
//!
//! A workload's baseline is noted at the first of:
//! - a change of one of its ConfigMaps/Secrets, just *before* the new data enters the cache
//!   (or, for a Secret watched as metadata, before its new version makes its data stale)
//!   ([`Baselines::before_change`], called by whoever applies the change);
//! - its first reconcile ([`Baselines::first_seen`]).
//!
//! Either only once all its inputs are known (no ConfigMap/Secret list in progress, the
//! Secrets its reload lists match listed, every referenced Secret's data read at its
//! current version): before that there is no configuration to have first seen, and the
//! first one known is the baseline. Baselines are
//! in memory only, dropped at adoption or when the workload goes.
//!
//! A workload whose hash was recorded under a key no longer in `--hash-key-file` is
//! treated the same until wavelet re-records it: its record cannot tell a change from the
//! rotation, so a change after wavelet first saw it rolls once, not taken in with the
//! rotation ([`Baselines::record_unjudgeable`]).
//!
//! "First seen" is in the API server's order, not in the order the watches deliver: a
//! baseline notes the workload's resourceVersion at that moment ([`Baseline::seen_at`]).
//! A ConfigMap/Secret written before it (a smaller resourceVersion) and delivered late by
//! a lagging watch (reconnecting, stalled) was part of the configuration when wavelet
//! first saw the workload, whatever the cache held then: it is taken into the baseline,
//! never rolled for ([`made_before_sight`]). Both must be the numbers an etcd-backed
//! server gives; an opaque resourceVersion never orders, and such a change rolls once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::hashmode::basis;
use crate::hashmode::parts::{hash_with_parts, Fingerprint};
use crate::model::cache::Cache;
use crate::model::counted::{counted, Counted};
use crate::model::workload::WorkloadEntry;
use crate::objects::{ConfigKey, ConfigKind, WorkloadKey};

/// The configuration a workload was first known with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Baseline {
    pub(crate) hash: String,
    pub(crate) fingerprints: Box<[Fingerprint]>,
    /// The workload's resourceVersion when it was first seen (this baseline noted), when
    /// it is a number: what came before it in the API server's order was part of it.
    pub(crate) seen_at: Option<u64>,
}

/// The workload's resourceVersion as an etcd revision, if it is one.
pub(crate) fn sight(entry: &WorkloadEntry) -> Option<u64> {
    entry.resource_version.number()
}

/// The objects whose part of the hash differs from `before` (the fingerprints of the
/// configuration a workload was first seen with, at resourceVersion `seen_at`), when every
/// one of them was written before that sight: a lagging watch delivered them after the
/// workload, but the API server had them first, so they were part of what wavelet first
/// saw (and of what the workload's Pods started with). `None` when any changed object is
/// newer, gone, of an opaque resourceVersion, or when one was dropped from what counts:
/// that is a change since, judged as ever; so is a SecretProviderClass's (what its Pods
/// mounted has no resourceVersion of the class). `resolved` and `now` are in the same
/// order (`hash_with_parts`).
pub(crate) fn made_before_sight(
    seen_at: u64,
    before: &[Fingerprint],
    resolved: &[Counted],
    now: &[(&ConfigKey, Fingerprint)],
) -> Option<Vec<ConfigKey>> {
    // A SecretProviderClass's part is the versions its Pods mounted (their statuses), not
    // the class object: its resourceVersion does not date that part.
    let written = resolved.iter().map(|(reference, entry)| {
        entry
            .as_ref()
            .filter(|_| reference.config.kind != ConfigKind::SecretProviderClass)
            .and_then(|e| e.resource_version.number())
    });
    let now: Vec<(&ConfigKey, Fingerprint, Option<u64>)> = now
        .iter()
        .zip(written)
        .map(|((config, part), written)| (*config, *part, written))
        .collect();
    older_than_sight(seen_at, before, &now)
}

/// [`made_before_sight`] on each object's (key, part now, resourceVersion it was written
/// at, if a number).
fn older_than_sight(
    seen_at: u64,
    before: &[Fingerprint],
    now: &[(&ConfigKey, Fingerprint, Option<u64>)],
) -> Option<Vec<ConfigKey>> {
    if before.is_empty()
        || before
            .iter()
            .any(|old| !now.iter().any(|(_, f, _)| f.object == old.object))
    {
        return None;
    }
    let mut older = Vec::new();
    for (config, part, written) in now {
        if before.contains(part) {
            continue;
        }
        match written {
            Some(written) if *written < seen_at => older.push((*config).clone()),
            _ => return None,
        }
    }
    (!older.is_empty()).then_some(older)
}

/// What of a workload's configuration is not known yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Unknown {
    /// Its reload lists name Secrets, and its namespace's Secrets are being listed.
    SecretsListing,
    /// This referenced object's data at its current version is not read yet.
    Data(ConfigKey),
}

/// Whether everything `resolved` (what counts for `entry`) depends on is known.
pub(crate) fn unknown_input(
    cache: &Cache,
    key: &WorkloadKey,
    entry: &WorkloadEntry,
    resolved: &[Counted],
) -> Option<Unknown> {
    let counts_secrets_by_name = entry.counting.secret_patterns().next().is_some();
    if counts_secrets_by_name && cache.is_listing_secrets(&key.namespace) {
        return Some(Unknown::SecretsListing);
    }
    // A Secret's data not read at its current version, or a Secret not read at all (unused
    // Secrets are not cached, so one not cached may just be unread).
    resolved
        .iter()
        .find(|(r, e)| match e {
            Some(e) => !e.is_current(),
            None => r.config.kind == ConfigKind::Secret && !cache.is_known_absent(&r.config),
        })
        .map(|(r, _)| Unknown::Data(r.config.clone()))
}

/// The baselines of the workloads not adopted yet, and of those whose record cannot be
/// judged (made under a hash key no longer given).
pub struct Baselines {
    cache: Arc<Cache>,
    /// `--hash-key-file`'s key, which hashes are made with.
    hmac_key: Option<Vec<u8>>,
    /// The ids of the keys a recorded basis can be judged under (`none`, the key, the
    /// previous keys), worked out once: every change asks, for each of its dependents.
    judgeable_key_ids: Vec<String>,
    /// `--resource-label-selector`: an absent object may just lack the label.
    absent_is_filtered: bool,
    noted: Mutex<HashMap<WorkloadKey, Baseline>>,
}

impl Baselines {
    pub fn new(cache: Arc<Cache>, basis: &basis::Settings, absent_is_filtered: bool) -> Baselines {
        let mut judgeable_key_ids = vec![basis::key_id(None), basis.key_id()];
        judgeable_key_ids.extend(basis.previous_key_ids());
        Baselines {
            cache,
            hmac_key: basis.hmac_key.clone(),
            judgeable_key_ids,
            absent_is_filtered,
            noted: Mutex::new(HashMap::new()),
        }
    }

    /// The data of a ConfigMap/Secret that `dependents` count is about to change in the
    /// cache: each of them that is opted in, records no hash yet (or one whose record
    /// cannot be judged, [`Baselines::record_unjudgeable`]), has all its inputs known (none
    /// missing) and no baseline yet gets one now, from the data as it still is.
    pub fn before_change(&self, dependents: &[WorkloadKey]) {
        for key in dependents {
            if self.noted.lock().unwrap().contains_key(key) {
                continue;
            }
            let Some(entry) = self.cache.workload(key) else {
                continue;
            };
            if entry.flavor.is_none()
                || (entry.recorded_hash().is_some() && !self.record_unjudgeable(&entry))
            {
                continue;
            }
            if let Some(baseline) = self.current(key, &entry) {
                log::debug!("{key}: first-seen configuration noted before a change");
                self.noted
                    .lock()
                    .unwrap()
                    .entry(key.clone())
                    .or_insert(baseline);
            }
        }
    }

    /// The baseline of `key`, noted now as `current` unless one was noted before.
    pub(crate) fn first_seen(&self, key: &WorkloadKey, current: Baseline) -> Baseline {
        self.noted
            .lock()
            .unwrap()
            .entry(key.clone())
            .or_insert(current)
            .clone()
    }

    /// Whether `entry` records a hash under a key no longer in `--hash-key-file`: its
    /// basis cannot tell a change of data from the rotation ([`basis::Across::KeyUnavailable`]),
    /// so, as for a workload not adopted yet, what wavelet first saw is what its Pods run,
    /// and a change after that sight rolls once.
    pub(crate) fn record_unjudgeable(&self, entry: &WorkloadEntry) -> bool {
        entry.basis.as_ref().is_some_and(|recorded| {
            !self
                .judgeable_key_ids
                .iter()
                .any(|id| id == recorded.key_id())
        })
    }

    /// Adopted, recorded by someone else, opted out or gone: no baseline any more.
    pub(crate) fn forget(&self, key: &WorkloadKey) {
        self.noted.lock().unwrap().remove(key);
    }

    /// The configuration of `key` as the cache holds it now, if all of it is known.
    fn current(&self, key: &WorkloadKey, entry: &WorkloadEntry) -> Option<Baseline> {
        // A failing relist keeps the cache's ConfigMaps/Secrets out of date: what it holds
        // may be older than the workload, which was created with the data in the cluster.
        if self.cache.configs_relisting() {
            return None;
        }
        let resolved = counted(&self.cache, key, entry);
        if unknown_input(&self.cache, key, entry, &resolved).is_some() {
            return None;
        }
        let (computed, named) = hash_with_parts(&resolved, self.hmac_key.as_deref());
        // Missing what it needs, its Pods do not start: what it was first seen with does
        // not run anywhere, and the object's coming is no change to roll for.
        if !computed.missing.is_empty() && !self.absent_is_filtered {
            return None;
        }
        Some(Baseline {
            hash: computed.hash,
            fingerprints: named.into_iter().map(|(_, f)| f).collect(),
            seen_at: sight(entry),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> ConfigKey {
        ConfigKey::new(ConfigKind::ConfigMap, "ns", name)
    }

    fn part(name: &str, data: &str) -> Fingerprint {
        Fingerprint::new(&key(name), data, true, None)
    }

    #[test]
    fn a_change_written_before_the_workload_was_first_seen_is_part_of_its_baseline() {
        let (cfg, other) = (key("cfg"), key("other"));
        let before = [part("cfg", "blue"), part("other", "x")];
        // cfg changed at revision 90, the workload was first seen at 100.
        let now = [
            (&cfg, part("cfg", "green"), Some(90)),
            (&other, part("other", "x"), Some(5)),
        ];
        assert_eq!(
            older_than_sight(100, &before, &now),
            Some(vec![cfg.clone()])
        );
        // Written after the sight: a change since.
        let now = [
            (&cfg, part("cfg", "green"), Some(110)),
            (&other, part("other", "x"), Some(5)),
        ];
        assert_eq!(older_than_sight(100, &before, &now), None);
        // One older, one newer: the newer one rolls (with the older in it).
        let now = [
            (&cfg, part("cfg", "green"), Some(90)),
            (&other, part("other", "y"), Some(110)),
        ];
        assert_eq!(older_than_sight(100, &before, &now), None);
    }

    #[test]
    fn opaque_versions_gone_objects_and_no_change_never_count_as_before_the_sight() {
        let (cfg, other) = (key("cfg"), key("other"));
        let before = [part("cfg", "blue"), part("other", "x")];
        let opaque = [
            (&cfg, part("cfg", "green"), None),
            (&other, part("other", "x"), None),
        ];
        assert_eq!(older_than_sight(100, &before, &opaque), None);
        let dropped = [(&cfg, part("cfg", "green"), Some(90))];
        assert_eq!(older_than_sight(100, &before, &dropped), None);
        let same = [
            (&cfg, part("cfg", "blue"), Some(90)),
            (&other, part("other", "x"), Some(5)),
        ];
        assert_eq!(older_than_sight(100, &before, &same), None);
        assert_eq!(older_than_sight(100, &[], &same), None, "no baseline");
        // Newly counted, written before the sight: it existed then.
        let added = [
            (&cfg, part("cfg", "blue"), Some(90)),
            (&other, part("other", "x"), Some(5)),
            (&key("new"), part("new", "n"), Some(95)),
        ];
        assert_eq!(
            older_than_sight(100, &before, &added),
            Some(vec![key("new")])
        );
    }
}
