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

use crate::model::counted::Counted;
use crate::model::hash;
use crate::objects::ConfigKey;

/// Each object a workload uses with the fingerprint of its part of the hash.
pub type Parts = Vec<(ConfigKey, u64)>;

/// The parts of `resolved` (a workload's counted references) as they are now.
pub fn parts(resolved: &[Counted]) -> Parts {
    resolved
        .iter()
        .map(|(reference, entry)| {
            let text =
                hash::canonical_form(&[(reference, entry.as_ref().and_then(|e| e.digests()))]);
            let digest = Sha256::digest(text.as_bytes());
            let first8 = u64::from_le_bytes(digest[..8].try_into().expect("8 bytes"));
            (reference.config.clone(), first8)
        })
        .collect()
}

/// Whether the change of `config` is one the workload is due for: its part differs from
/// what the workload last ran with. Unknown (no memory of the workload, or of this object
/// in it): it may be, unless another object's part is known to have changed, which then
/// explains why the workload is due.
pub fn changed(
    config: &ConfigKey,
    now: &[(ConfigKey, u64)],
    before: Option<&[(ConfigKey, u64)]>,
) -> bool {
    let Some(before) = before else {
        return true;
    };
    let part = |parts: &[(ConfigKey, u64)], key: &ConfigKey| {
        parts.iter().find(|(k, _)| k == key).map(|(_, p)| *p)
    };
    match part(before, config) {
        Some(was) => part(now, config) != Some(was),
        None => !now
            .iter()
            .any(|(k, p)| k != config && part(before, k).is_some_and(|was| was != *p)),
    }
}

/// What each workload (by id) last ran with, learnt when it was found up to date.
#[derive(Clone, Default)]
pub struct Baselines(Arc<Mutex<HashMap<String, Parts>>>);

impl Baselines {
    /// The workload `id` carries the hash of `parts`.
    pub fn learn(&self, id: &str, parts: Parts) {
        let mut known = self.0.lock().unwrap();
        match known.get_mut(id) {
            Some(was) => *was = parts,
            None => {
                known.insert(id.to_string(), parts);
            }
        }
    }

    pub fn of(&self, id: &str) -> Option<Parts> {
        self.0.lock().unwrap().get(id).cloned()
    }

    /// The workload is gone.
    pub fn forget(&self, id: &str) {
        self.0.lock().unwrap().remove(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::ConfigKind;

    fn key(name: &str) -> ConfigKey {
        ConfigKey::new(ConfigKind::ConfigMap, "ns", name)
    }

    #[test]
    fn only_the_object_whose_part_changed_made_the_workload_due() {
        let before = vec![(key("cfg"), 1), (key("cfg2"), 7)];
        let now = vec![(key("cfg"), 2), (key("cfg2"), 7)];
        assert!(changed(&key("cfg"), &now, Some(&before)));
        assert!(!changed(&key("cfg2"), &now, Some(&before)));
    }

    #[test]
    fn without_memory_every_object_may_be_the_one_unless_another_is_known_to_have_changed() {
        let now = vec![(key("cfg"), 2), (key("cfg2"), 7), (key("new"), 3)];
        assert!(changed(&key("cfg2"), &now, None));
        let before = vec![(key("cfg"), 1), (key("cfg2"), 7)];
        assert!(
            !changed(&key("new"), &now, Some(&before)),
            "cfg explains it"
        );
        let same = vec![(key("cfg"), 2), (key("cfg2"), 7)];
        assert!(changed(&key("new"), &now, Some(&same)), "nothing else does");
    }
}
