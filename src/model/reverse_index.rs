//! The reverse index of the cache: from a ConfigMap, Secret or SecretProviderClass to the
//! workloads that reference it.
//!
//! It has a row per referenced object (70,000 at the start-up benchmark's ×10), and the
//! hash table keeps room for about as many again, so the size of a row counts: an object's
//! workloads are filed under an 8-byte slot of its key (a hash keyed at random per
//! process, so no set of names can be made to share slots), not under its 40-byte key.
//! Two objects may still share a slot. Every workload in a slot that only one object ever
//! used names that object, so the first one's references tell whether a lookup asked for
//! it; a slot two objects used is marked shared until it empties, and a lookup there keeps
//! the workloads whose references name the object asked for.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher as _, RandomState};
use std::sync::Arc;

use crate::model::references::Reference;
use crate::model::workload::WorkloadEntry;
use crate::objects::{ConfigKey, WorkloadKey};

/// Every cached workload, by key: what a lookup checks references against.
pub type Entries = HashMap<WorkloadKey, Arc<WorkloadEntry>>;

#[derive(Default)]
pub struct ReverseIndex {
    rows: HashMap<u64, Box<[WorkloadKey]>>,
    /// Slots that held workloads of two objects at once, until they empty.
    shared: HashSet<u64>,
    slots: RandomState,
    /// Tests file every object under one slot, to see lookups stay exact when objects
    /// share one.
    #[cfg(test)]
    pub one_slot: bool,
}

/// Whether the entry of `workload` references `config`.
fn names(entries: &Entries, workload: &WorkloadKey, config: &ConfigKey) -> bool {
    entries
        .get(workload)
        .is_some_and(|e| e.references.iter().any(|r| r.config == *config))
}

impl ReverseIndex {
    fn slot(&self, config: &ConfigKey) -> u64 {
        #[cfg(test)]
        if self.one_slot {
            return 0;
        }
        self.slots.hash_one(config)
    }

    /// The workloads whose references name `config`.
    pub fn referencing<'a>(
        &'a self,
        config: &'a ConfigKey,
        entries: &'a Entries,
    ) -> impl Iterator<Item = &'a WorkloadKey> {
        let slot = self.slot(config);
        let row: &[WorkloadKey] = self.rows.get(&slot).map_or(&[], |row| row);
        let shared = self.shared.contains(&slot);
        // One object's slot: its first workload tells whether it is `config`'s.
        let all = !shared && row.first().is_some_and(|w| names(entries, w, config));
        row.iter()
            .filter(move |w| all || (shared && names(entries, w, config)))
    }

    /// Files `workload` under what it references now (`new`) instead of what it did
    /// (`old`); `entries` holds its new entry already.
    pub fn refile(
        &mut self,
        workload: &WorkloadKey,
        old: &[Reference],
        new: &[Reference],
        entries: &Entries,
    ) {
        let new: Vec<(u64, &ConfigKey)> = new
            .iter()
            .map(|r| (self.slot(&r.config), &r.config))
            .collect();
        for reference in old {
            let slot = self.slot(&reference.config);
            if !new.iter().any(|(s, _)| *s == slot) {
                self.unfile(slot, workload);
            }
        }
        for (i, &(slot, config)) in new.iter().enumerate() {
            let own_two = new[..i].iter().any(|(s, c)| *s == slot && *c != config);
            let row = self.rows.entry(slot).or_default();
            let others = row
                .iter()
                .find(|w| *w != workload)
                .is_some_and(|other| !names(entries, other, config));
            if own_two || others {
                self.shared.insert(slot);
            }
            if !row.contains(workload) {
                let mut keys = std::mem::take(row).into_vec();
                keys.push(workload.clone());
                *row = keys.into_boxed_slice();
            }
        }
    }

    fn unfile(&mut self, slot: u64, workload: &WorkloadKey) {
        let Some(row) = self.rows.get_mut(&slot) else {
            return;
        };
        if row.contains(workload) {
            let mut keys = std::mem::take(row).into_vec();
            keys.retain(|k| k != workload);
            *row = keys.into_boxed_slice();
        }
        if row.is_empty() {
            self.rows.remove(&slot);
            self.shared.remove(&slot);
        }
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty() && self.shared.is_empty()
    }
}
