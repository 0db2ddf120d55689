//! Fan-out records and urgent grants that nothing will ever finish leave `wavelet-state`,
//! on delete mode's schedule for its ledger (`model::state::prune_pass`): an entry goes
//! once it has been seen stale for `--resync` (every watch relists within it, so a
//! deletion seen on a lagging watch only is confirmed by a complete list; an object
//! deleted and re-created sooner keeps its entry), looked at four times per period.
//!
//! Stale ([`stale`]): the entry's ConfigMap/Secret is gone (not in the cache, in a
//! namespace and of a kind wavelet lists), or, for a fan-out, the workload that held it
//! is gone, or every workload it released is, or its object no longer fans out (fewer than
//! two opted-in workloads use it, or its `wavelet.dev/fan-out` says at-once now): no
//! decision ever reads or finishes that record again (found by the soak, seed 11: both
//! other users of a ConfigMap opted out mid-fan-out and its line stayed for good).
//! A held fan-out of a deleted ConfigMap thus stops counting in `wavelet_fanouts_held`
//! within a resync period, and its alert clears.

use crate::hashmode::fanout::record::{Record, FANOUT, URGENT};
use crate::objects::{ConfigKey, ConfigKind};

/// What a pass needs to know of the cluster, as wavelet's cache shows it.
pub trait Present {
    /// `None` when wavelet cannot tell (a namespace or kind it does not list, or a list
    /// under way): never stale then.
    fn object(&self, key: &ConfigKey) -> Option<bool>;
    /// Whether the workload of this id (`deployments.apps/ns/name`) exists.
    fn workload(&self, id: &str) -> bool;
    /// Whether a change of this (present) object is a fan-out: waves, and two or more
    /// opted-in workloads that use it.
    fn fans_out(&self, key: &ConfigKey) -> bool;
}

/// The object an entry's key names: `<prefix>.<kind>.<namespace>.<name>`; `None` for a
/// key of another writer and for a long name kept as its hash (`h-…`), which cannot be
/// told back.
pub fn object_of(key: &str) -> Option<ConfigKey> {
    let rest = key
        .strip_prefix(&format!("{FANOUT}."))
        .or_else(|| key.strip_prefix(&format!("{URGENT}.")))?;
    let mut parts = rest.splitn(3, '.');
    let kind = match parts.next()? {
        "configmap" => ConfigKind::ConfigMap,
        "secret" => ConfigKind::Secret,
        "secretproviderclass" => ConfigKind::SecretProviderClass,
        _ => return None,
    };
    let (namespace, name) = (parts.next()?, parts.next()?);
    let hashed = name
        .strip_prefix("h-")
        .is_some_and(|h| h.len() == 32 && h.bytes().all(|b| b.is_ascii_hexdigit()));
    (!hashed).then(|| ConfigKey::new(kind, namespace, name))
}

/// Whether the entry `key: value` is stale (see the top of this file).
pub fn stale(key: &str, value: &str, present: &dyn Present) -> bool {
    let Some(object) = object_of(key) else {
        return false;
    };
    match present.object(&object) {
        None => return false,
        Some(false) => return true,
        Some(true) => {}
    }
    if !key.starts_with(&format!("{FANOUT}.")) {
        return false;
    }
    if !present.fans_out(&object) {
        return true;
    }
    let Some(record) = Record::decode(value) else {
        return false;
    };
    if record
        .held
        .as_ref()
        .is_some_and(|h| !present.workload(&h.workload))
    {
        return true;
    }
    !record.waves.iter().flatten().any(|id| present.workload(id))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    struct Cluster {
        objects: HashSet<&'static str>,
        unknown: HashSet<&'static str>,
        workloads: HashSet<&'static str>,
        /// Present objects used by fewer than two workloads (or at-once).
        not_shared: HashSet<&'static str>,
    }

    impl Present for Cluster {
        fn object(&self, key: &ConfigKey) -> Option<bool> {
            let name: &str = &key.name;
            if self.unknown.contains(name) {
                return None;
            }
            Some(self.objects.contains(name))
        }
        fn workload(&self, id: &str) -> bool {
            self.workloads.contains(id)
        }
        fn fans_out(&self, key: &ConfigKey) -> bool {
            !self.not_shared.contains(&*key.name)
        }
    }

    const HELD: &str = "ab since=2026-11-22T03:14:40Z waves=deployments.apps/ns/a held=deployments.apps/ns/a reason=x";
    const ROLLING: &str =
        "ab since=2026-11-22T03:14:40Z waves=deployments.apps/ns/a;deployments.apps/ns/b";

    #[test]
    fn entries_of_objects_or_workloads_gone_are_stale_and_the_rest_are_kept() {
        let cluster = Cluster {
            objects: HashSet::from(["here", "alone"]),
            unknown: HashSet::from(["unlisted"]),
            workloads: HashSet::from(["deployments.apps/ns/b"]),
            not_shared: HashSet::from(["alone"]),
        };
        let table = [
            ("fanout.configmap.ns.gone", ROLLING, true),
            ("urgent.secret.ns.gone", "ab INC-1", true),
            ("urgent.configmap.ns.here", "ab INC-1", false),
            ("fanout.configmap.ns.unlisted", ROLLING, false),
            ("fanout.configmap.ns.here", ROLLING, false),
            // Its other users opted out mid-fan-out: no decision reads it again.
            ("fanout.configmap.ns.alone", ROLLING, true),
            ("urgent.configmap.ns.alone", "ab INC-1", false),
            ("fanout.configmap.ns.here", HELD, true),
            (
                "fanout.configmap.ns.here",
                "ab since=2026-11-22T03:14:40Z waves=deployments.apps/ns/z",
                true,
            ),
            (
                "fanout.configmap.ns.h-0123456789abcdef0123456789abcdef",
                ROLLING,
                false,
            ),
            ("configmap.ns.gone", "ab", false),
            ("pause", "paused since=2026-11-22T03:14:40Z", false),
        ];
        for (key, value, expected) in table {
            assert_eq!(stale(key, value, &cluster), expected, "{key}: {value}");
        }
    }

    #[test]
    fn keys_name_their_object_back() {
        assert_eq!(
            object_of("fanout.configmap.shop.app.config"),
            Some(ConfigKey::new(ConfigKind::ConfigMap, "shop", "app.config"))
        );
        assert_eq!(
            object_of("urgent.secret.shop.db"),
            Some(ConfigKey::new(ConfigKind::Secret, "shop", "db"))
        );
        assert_eq!(object_of("fanout.widget.shop.db"), None);
    }
}
