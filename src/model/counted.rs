//! The ConfigMaps, Secrets and SecretProviderClasses that count for one workload, resolved
//! against the cache: its references (already filtered by type and exclusions when it was
//! cached) and the objects its reload lists name, less what Reloader's object annotations
//! leave out (`ignore`, and for `search` the objects without `match`). An object left out
//! on purpose does not count and is not missing. A SecretProviderClass the workload mounts
//! counts with the versions its own running Pods mounted (told by owner references); one
//! it only names in a reload list, with every running Pod's; one that no such Pod has a pod status for yet is not read yet: it does not
//! count at all (and is never missing). `run`, `status` and `hash` all hash what this
//! returns.

use std::sync::Arc;

use crate::model::cache::{Cache, ConfigEntry};
use crate::model::references::Reference;
use crate::model::workload::WorkloadEntry;
use crate::objects::{ConfigKind, WorkloadKey};

/// One counted object and what the cache holds of it (`None`: it does not exist).
pub type Counted = (Reference, Option<Arc<ConfigEntry>>);

/// What counts for `entry` (the workload `key`), sorted by object.
pub fn counted(cache: &Cache, key: &WorkloadKey, entry: &WorkloadEntry) -> Vec<Counted> {
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
        if !counts {
            continue;
        }
        let mut reference = reference.clone();
        // Named in a reload list: every key counts.
        if by_name {
            reference.all_keys = true;
        }
        if reference.config.kind == ConfigKind::SecretProviderClass {
            let own_pods = |pod: &str| cache.is_running_pod_of(key, pod);
            match cache.class_view(&reference.config, Some(key), own_pods) {
                Some(view) => {
                    let mounted =
                        ConfigEntry::mounted(&reference.config, object.as_deref(), view.objects);
                    out.push((reference, Some(Arc::new(mounted))));
                }
                None => continue, // not read yet
            }
            continue;
        }
        out.push((reference, object));
    }
    let workload = key;
    for key in cache.counted_by_name(&workload.namespace, entry) {
        if out.iter().any(|(r, _)| r.config == key) {
            continue;
        }
        let Some(object) = cache.config(&key) else {
            continue;
        };
        if object.reloader_ignore {
            continue;
        }
        // A class counted by name counts with every Pod's versions; with no pod status
        // yet, it is not read yet.
        if key.kind == ConfigKind::SecretProviderClass {
            let running = |pod: &str| cache.pod_runs(&workload.namespace, pod);
            let Some(view) = cache.class_view(&key, Some(workload), running) else {
                continue;
            };
            let mounted = ConfigEntry::mounted(&key, Some(&object), view.objects);
            out.push((
                Reference {
                    config: key,
                    all_keys: true,
                    keys: Default::default(),
                    required: false,
                },
                Some(Arc::new(mounted)),
            ));
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
