//! The ConfigMaps and Secrets that count for one workload, resolved against the cache: its
//! references (already filtered by type and exclusions when it was cached) and the
//! objects its reload lists name, less what Reloader's object annotations leave out
//! (`ignore`, and for `search` the objects without `match`). An object left out on
//! purpose does not count and is not missing. `run`, `status` and `hash` all hash what
//! this returns.

use std::sync::Arc;

use crate::model::cache::{Cache, ConfigEntry};
use crate::model::references::Reference;
use crate::model::workload::WorkloadEntry;

/// One counted object and what the cache holds of it (`None`: it does not exist).
pub type Counted = (Reference, Option<Arc<ConfigEntry>>);

/// What counts for `entry` (a workload of `namespace`), sorted by object.
pub fn counted(cache: &Cache, namespace: &str, entry: &WorkloadEntry) -> Vec<Counted> {
    let counting = &entry.counting;
    let mut out: Vec<Counted> = Vec::with_capacity(entry.references.len());
    for reference in entry.references.iter() {
        let object = cache.config(&reference.config);
        let by_name = entry.counts_by_name(&reference.config);
        let counts = match &object {
            Some(o) => counting.counts_object(o.reloader_ignore, o.reloader_match, by_name),
            // An absent object carries no `match`: under `search` it does not count.
            None => !counting.search || by_name,
        };
        if counts {
            let mut reference = reference.clone();
            // Named in a reload list: every key counts.
            if by_name {
                reference.all_keys = true;
            }
            out.push((reference, object));
        }
    }
    for key in cache.counted_by_name(namespace, entry) {
        if out.iter().any(|(r, _)| r.config == key) {
            continue;
        }
        let Some(object) = cache.config(&key) else {
            continue;
        };
        if object.reloader_ignore {
            continue;
        }
        out.push((
            Reference {
                config: key,
                all_keys: true,
                keys: Default::default(),
                required: false,
            },
            Some(object),
        ));
    }
    out.sort_by(|a, b| a.0.config.cmp(&b.0.config));
    out
}
