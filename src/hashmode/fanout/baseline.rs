//! Which shared object's change made a workload due: a fan-out belongs to the
//! ConfigMap/Secret whose change it rolls, never to another one the same workloads use.
//!
//! The workload's hash covers everything it uses, so it cannot say which object changed.
//! wavelet therefore remembers, whenever it finds a workload up to date, a fingerprint of
//! each object's part of its hash ([`Baselines::learn`]); an object whose part differs
//! from that is what changed ([`changed`]). With no memory of the workload (wavelet
//! started after the change), every object it uses may be the one, as before.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use sha2::{Digest as _, Sha256};

use crate::hashmode::parts::object_id;
use crate::model::counted::Counted;
use crate::model::hash;
use crate::objects::{ConfigKey, WorkloadKey};

/// Each object a workload uses, by its id ([`object_id`]), with the fingerprint of its part
/// of the hash: 16 bytes a part.
pub type Parts = Vec<(u64, u64)>;

/// The parts of `resolved` (a workload's counted references) as they are now.
pub fn parts(resolved: &[Counted]) -> Parts {
    resolved
        .iter()
        .map(|(reference, entry)| {
            let text =
                hash::canonical_form(&[(reference, entry.as_ref().and_then(|e| e.digests()))]);
            let digest = Sha256::digest(text.as_bytes());
            let first8 = u64::from_le_bytes(digest[..8].try_into().expect("8 bytes"));
            (object_id(&reference.config), first8)
        })
        .collect()
}

/// Whether the change of `config` is one the workload is due for: its part differs from
/// what the workload last ran with. Unknown (no memory of the workload, or of this object
/// in it): it may be, unless another object's part is known to have changed, which then
/// explains why the workload is due.
pub fn changed(config: &ConfigKey, now: &[(u64, u64)], before: Option<&[(u64, u64)]>) -> bool {
    let Some(before) = before else {
        return true;
    };
    let part =
        |parts: &[(u64, u64)], id: u64| parts.iter().find(|(k, _)| *k == id).map(|(_, p)| *p);
    let config = object_id(config);
    match part(before, config) {
        Some(was) => part(now, config) != Some(was),
        None => !now
            .iter()
            .any(|(k, p)| *k != config && part(before, *k).is_some_and(|was| was != *p)),
    }
}

/// The parts behind the hash each workload carries, learnt when wavelet gave it that hash
/// (adopted, recorded, rolled) or found it up to date; the two latest per workload, so a
/// rollout not yet shown by the watch leaves the parts of the hash it still shows. Per
/// workload one map entry (its key shares the cache's strings) holding the newest inline
/// and the older one boxed (only workloads that rolled have one), and per object it uses
/// an id and a fingerprint (16 bytes), once or twice: at 10,000 workloads this memory was
/// 3.6 MB with a `ConfigKey` a part and a `Vec` of both; now it is about 1 MB.
#[derive(Clone, Default)]
pub struct Baselines(Arc<Mutex<HashMap<WorkloadKey, Known>>>);

/// The first 8 bytes of a hash the workload was given, and its parts.
type Learnt = (u64, Box<[(u64, u64)]>);

/// What is known of one workload: the hash last learnt, and the one before it.
struct Known {
    newest: Learnt,
    older: Option<Box<Learnt>>,
}

impl Known {
    fn learnt(&self) -> impl Iterator<Item = &Learnt> {
        std::iter::once(&self.newest).chain(self.older.as_deref())
    }
}

/// The first 8 bytes of a hash, as learnt.
pub fn short(hash: &str) -> u64 {
    u64::from_str_radix(hash.get(..16).unwrap_or(hash), 16).unwrap_or(0)
}

impl Baselines {
    /// The workload carries (or is being given) `hash`, computed from `parts`.
    pub fn learn(&self, key: &WorkloadKey, hash: &str, parts: Parts) {
        let hash = short(hash);
        let parts = parts.into_boxed_slice();
        let mut known = self.0.lock().unwrap();
        let Some(known) = known.get_mut(key) else {
            let newest = (hash, parts);
            known.insert(
                key.clone(),
                Known {
                    newest,
                    older: None,
                },
            );
            return;
        };
        // Newest first, two kept; learning a hash again moves it to the front (the older
        // one never has the newest's hash, so it stays when the newest is learnt again).
        let was = std::mem::replace(&mut known.newest, (hash, parts));
        if was.0 != hash {
            known.older = Some(Box::new(was));
        }
    }

    /// The parts behind `hash`, the hash the workload carries, if wavelet knows them.
    pub fn of(&self, key: &WorkloadKey, hash: Option<&str>) -> Option<Parts> {
        let hash = short(hash?);
        let known = self.0.lock().unwrap();
        let parts = known
            .get(key)?
            .learnt()
            .find(|(h, _)| *h == hash)
            .map(|(_, p)| p.to_vec());
        parts
    }

    /// The hash wavelet last gave the workload (its first 8 bytes) and the parts behind it
    /// (none known: adopted with a hash older than its configuration): what it carries
    /// while the cache does not show wavelet's adoption of it yet.
    pub fn newest(&self, key: &WorkloadKey) -> Option<(u64, Parts)> {
        let known = self.0.lock().unwrap();
        let (hash, parts) = &known.get(key)?.newest;
        Some((*hash, parts.to_vec()))
    }

    /// The workload is gone, or no longer opted in.
    pub fn forget(&self, key: &WorkloadKey) {
        self.0.lock().unwrap().remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::ConfigKind;

    fn key(name: &str) -> ConfigKey {
        ConfigKey::new(ConfigKind::ConfigMap, "ns", name)
    }

    /// Parts as remembered.
    fn known(parts: &[(ConfigKey, u64)]) -> Parts {
        parts.iter().map(|(k, p)| (object_id(k), *p)).collect()
    }

    #[test]
    fn only_the_object_whose_part_changed_made_the_workload_due() {
        let before = known(&[(key("cfg"), 1), (key("cfg2"), 7)]);
        let now = known(&[(key("cfg"), 2), (key("cfg2"), 7)]);
        assert!(changed(&key("cfg"), &now, Some(&before)));
        assert!(!changed(&key("cfg2"), &now, Some(&before)));
    }

    #[test]
    fn without_memory_every_object_may_be_the_one_unless_another_is_known_to_have_changed() {
        let now = known(&[(key("cfg"), 2), (key("cfg2"), 7), (key("new"), 3)]);
        assert!(changed(&key("cfg2"), &now, None));
        let before = known(&[(key("cfg"), 1), (key("cfg2"), 7)]);
        assert!(
            !changed(&key("new"), &now, Some(&before)),
            "cfg explains it"
        );
        let same = known(&[(key("cfg"), 2), (key("cfg2"), 7)]);
        assert!(changed(&key("new"), &now, Some(&same)), "nothing else does");
    }

    #[test]
    fn a_workload_s_memory_is_the_newest_hash_inline_and_16_bytes_a_part() {
        assert_eq!(std::mem::size_of::<Known>(), 32);
        assert_eq!(std::mem::size_of::<(u64, u64)>(), 16);
    }

    #[test]
    fn the_parts_are_those_behind_the_hash_the_workload_carries() {
        let web = WorkloadKey {
            resource: Arc::new(crate::objects::Resource::deployments()),
            namespace: "ns".into(),
            name: "web".into(),
        };
        let baselines = Baselines::default();
        let h = |c: char| c.to_string().repeat(64);
        baselines.learn(&web, &h('a'), known(&[(key("cfg"), 1)]));
        // Rolled to b: until the watch shows b, the workload still carries a.
        baselines.learn(&web, &h('b'), known(&[(key("cfg"), 2)]));
        assert_eq!(
            baselines.of(&web, Some(&h('a'))),
            Some(known(&[(key("cfg"), 1)]))
        );
        assert_eq!(
            baselines.of(&web, Some(&h('b'))),
            Some(known(&[(key("cfg"), 2)]))
        );
        baselines.learn(&web, &h('c'), known(&[(key("cfg"), 3)]));
        assert_eq!(baselines.of(&web, Some(&h('a'))), None, "two kept");
        // Learnt again, b is the newest, c the older one.
        baselines.learn(&web, &h('b'), known(&[(key("cfg"), 2)]));
        assert_eq!(
            baselines.of(&web, Some(&h('c'))),
            Some(known(&[(key("cfg"), 3)]))
        );
        assert_eq!(baselines.newest(&web).map(|(h, _)| h), Some(short(&h('b'))));
        baselines.learn(&web, &h('c'), known(&[(key("cfg"), 3)]));
        assert_eq!(baselines.of(&web, None), None);
        assert_eq!(
            baselines.newest(&web),
            Some((short(&h('c')), known(&[(key("cfg"), 3)])))
        );
        baselines.forget(&web);
        assert_eq!(baselines.newest(&web), None);
    }
}
