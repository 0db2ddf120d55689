//! Before a rollout for a record this replica did not make: is its cache behind the data
//! the record was made from?
//!
//! A rollout is owed when the hash a workload records differs from the hash of its
//! configuration in the cache. That holds only if the cache is at least as new as what
//! the record was computed from. A replica's own records are (its cache only moves
//! forward), but a record another writer made may be from data this replica's watch has
//! not delivered yet: the previous leader's, written while this standby's ConfigMap watch
//! was stalled; Reloader's or Wave's while both run during a switch. Rolling then would
//! write the older hash back (a rollout no change owed), and the watch catching up would
//! roll again.
//!
//! So a rollout whose recorded parts are not what this replica remembers the workload
//! to carry (its memory after its last reconcile: empty after a start or a leader change)
//! first reads, from etcd, each object whose part differs from the record, and compares
//! its data with the cache's. Behind: nothing rolls, and the watch bringing the newer data
//! wakes the workload. The common path (this replica made or saw the record) reads
//! nothing.
//!
//! One shared ConfigMap changed while wavelet was down is one such difference for each of
//! its thousands of workloads, rolled at the storm limits over minutes: a version of an
//! object found current stands for [`CONFIRMED_FOR`] ([`Confirmations`]), so that is one
//! read per object every few seconds, not one per workload.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::client::Client;
use crate::error::Error;
use crate::hashmode::basis::Basis;
use crate::hashmode::parts::Fingerprint;
use crate::model::counted::Counted;
use crate::objects::compact::ResourceVersion;
use crate::objects::{ConfigKey, ConfigKind};
use crate::watch::source::read_config_now;

/// How long a version found current in etcd stands for every workload that uses it. A
/// record made from newer data after the read needs the object changed after it, which
/// its watch delivers within this much but for a stalled stream; then the next read, at
/// most this much later, finds it.
pub(crate) const CONFIRMED_FOR: Duration = Duration::from_secs(5);

/// The versions of objects found current in etcd, each for [`CONFIRMED_FOR`]; entries past
/// it are dropped at the next note, so the map holds what was read in the last few seconds.
#[derive(Default)]
pub(crate) struct Confirmations {
    found: Mutex<HashMap<ConfigKey, (ResourceVersion, Instant)>>,
}

impl Confirmations {
    fn current(&self, config: &ConfigKey, version: &ResourceVersion, now: Instant) -> bool {
        self.found
            .lock()
            .unwrap()
            .get(config)
            .is_some_and(|(found, at)| found == version && now.duration_since(*at) < CONFIRMED_FOR)
    }

    fn note(&self, config: &ConfigKey, version: &ResourceVersion, now: Instant) {
        let mut found = self.found.lock().unwrap();
        found.retain(|_, (_, at)| now.duration_since(*at) < CONFIRMED_FOR);
        found.insert(config.clone(), (version.clone(), now));
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.found.lock().unwrap().len()
    }
}

/// Whether the recorded basis is what this replica remembers the workload to carry: the
/// parts of the objects present, as its last reconcile left them. No basis (a peer's
/// record, a wavelet before bases) and no memory (a start, a leader change) explain
/// nothing.
pub(crate) fn record_explained(recorded: Option<&Basis>, remembered: &[Fingerprint]) -> bool {
    let Some(recorded) = recorded else {
        return false;
    };
    let present: Vec<(u64, u64)> = remembered
        .iter()
        .filter(|f| f.present)
        .map(|f| (f.object, f.part))
        .collect();
    !present.is_empty()
        && present.len() == recorded.parts.len()
        && present.iter().all(|part| recorded.parts.contains(part))
}

/// The objects to confirm: each present one (not a SecretProviderClass, whose part is what
/// its Pods mounted, not the class's data) whose part differs from the recorded basis's,
/// or every one when there is no basis. `resolved` and `named` are in the same order.
pub(crate) fn to_confirm<'a>(
    recorded: Option<&Basis>,
    resolved: &'a [Counted],
    named: &[(&ConfigKey, Fingerprint)],
) -> Vec<&'a Counted> {
    resolved
        .iter()
        .zip(named)
        .filter(|((reference, entry), (_, part))| {
            entry.is_some()
                && part.present
                && reference.config.kind != ConfigKind::SecretProviderClass
                && !recorded.is_some_and(|b| b.parts.contains(&(part.object, part.part)))
        })
        .map(|(counted, _)| counted)
        .collect()
}

/// The first of `objects` whose data in the cache is not what the API server holds now
/// (changed since, or gone): the cache is behind it. Versions found current within
/// [`CONFIRMED_FOR`] are not read again.
pub(crate) fn first_behind(
    client: &Client,
    confirmations: &Confirmations,
    objects: &[&Counted],
) -> Result<Option<ConfigKey>, Error> {
    for (reference, entry) in objects {
        let Some(entry) = entry else { continue };
        let config = &reference.config;
        if confirmations.current(config, &entry.resource_version, Instant::now()) {
            continue;
        }
        let now = read_config_now(client, config)?;
        if now.as_ref().map(|o| o.digests()) != entry.digests() {
            return Ok(Some(config.clone()));
        }
        confirmations.note(config, &entry.resource_version, Instant::now());
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hashmode::basis::HASH_VERSION;

    fn part(object: u64, part: u64) -> Fingerprint {
        Fingerprint {
            object,
            part,
            present: true,
        }
    }

    fn basis(parts: &[(u64, u64)]) -> Basis {
        Basis::new(HASH_VERSION, "none", "00", parts)
    }

    #[test]
    fn a_version_found_current_stands_for_a_few_seconds_and_is_then_forgotten() {
        let confirmations = Confirmations::default();
        let config = ConfigKey::new(ConfigKind::ConfigMap, "ns", "shared");
        let other = ConfigKey::new(ConfigKind::ConfigMap, "ns", "other");
        let (v1, v2) = (ResourceVersion::Number(1), ResourceVersion::Number(2));
        let t0 = Instant::now();
        assert!(!confirmations.current(&config, &v1, t0));
        confirmations.note(&config, &v1, t0);
        assert!(confirmations.current(&config, &v1, t0 + Duration::from_secs(4)));
        // Another version of it is not vouched for.
        assert!(!confirmations.current(&config, &v2, t0));
        assert!(!confirmations.current(&config, &v1, t0 + CONFIRMED_FOR));
        // The expired entry goes at the next note: the map does not grow.
        confirmations.note(&other, &v1, t0 + CONFIRMED_FOR);
        assert_eq!(confirmations.len(), 1);
    }

    #[test]
    fn a_record_is_explained_only_by_the_same_parts_remembered() {
        let recorded = basis(&[(1, 10), (2, 20)]);
        assert!(record_explained(
            Some(&recorded),
            &[part(2, 20), part(1, 10)]
        ));
        // Another writer's record: one part this replica never carried.
        assert!(!record_explained(
            Some(&recorded),
            &[part(1, 10), part(2, 21)]
        ));
        // No memory: a start or a leader change.
        assert!(!record_explained(Some(&recorded), &[]));
        // No basis: a peer's record.
        assert!(!record_explained(None, &[part(1, 10)]));
        // An object more or less.
        assert!(!record_explained(Some(&recorded), &[part(1, 10)]));
        // An absent object has no part in a basis.
        let absent = Fingerprint {
            present: false,
            ..part(3, 30)
        };
        assert!(record_explained(
            Some(&recorded),
            &[part(1, 10), part(2, 20), absent]
        ));
    }
}
