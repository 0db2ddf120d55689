//! wavelet's own cache: what decisions need and no more, plus the reverse index from a
//! ConfigMap/Secret to the workloads that reference it.
//!
//! One writer per kind (its watch thread), many readers (reconcile workers). Entries are
//! immutable `Arc`s: a reader keeps a consistent snapshot while the writer swaps in a new
//! one. Secret values never get here, only per-key digests.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};

use crate::annotations::{self, Flavor};
use crate::objects::{
    ConfigKey, ConfigKind, ConfigObject, Digest, Resource, WorkloadKey, WorkloadObject,
};
use crate::references::{self, Reference};

/// A ConfigMap or Secret as wavelet remembers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigEntry {
    pub uid: String,
    pub resource_version: String,
    /// Per-key digests, sorted by key.
    pub digests: Vec<(String, Digest)>,
    /// The delete-mode selector annotation, when set (either key).
    pub pod_delete_match: Option<String>,
    /// The delete-mode strategy annotation, when set.
    pub pod_delete_strategy: Option<String>,
}

impl ConfigEntry {
    pub fn from_object(obj: ConfigObject) -> ConfigEntry {
        let annotations = &obj.metadata.annotations;
        let pod_delete_match = annotations
            .get(annotations::WAVELET_POD_DELETE_MATCH)
            .or_else(|| annotations.get(annotations::MAGALIX_POD_DELETE_MATCH))
            .cloned();
        ConfigEntry {
            pod_delete_strategy: annotations
                .get(annotations::WAVELET_POD_DELETE_STRATEGY)
                .cloned(),
            pod_delete_match,
            uid: obj.metadata.uid,
            resource_version: obj.metadata.resource_version,
            digests: obj.digests,
        }
    }
}

/// How an upserted ConfigMap/Secret differs from what was cached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigChange {
    /// Not cached before.
    Created,
    /// Some key was added, removed or changed value (or the object was re-created).
    DataChanged,
    /// Only metadata changed: nothing to roll.
    MetadataOnly,
    /// Same resourceVersion (a relist returning what was known).
    Unchanged,
}

/// An opted-in workload (or one with wavelet's annotations left to clean up).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkloadEntry {
    pub uid: String,
    pub resource_version: String,
    /// `None`: opted out, kept only until wavelet's metadata annotations are removed.
    pub flavor: Option<Flavor>,
    pub references: Vec<Reference>,
    /// The hash on the pod template under the flavor's key.
    pub template_hash: Option<String>,
    /// The hash on the workload's metadata (adoption) under the flavor's key.
    pub metadata_hash: Option<String>,
    /// wavelet/Wave hash keys present on the metadata (for opt-out clean-up).
    pub metadata_hash_keys: Vec<&'static str>,
}

impl WorkloadEntry {
    /// The entry to cache for a workload, or `None` when wavelet has nothing to do with it.
    pub fn from_object(obj: &WorkloadObject) -> Option<WorkloadEntry> {
        let meta = &obj.metadata;
        let flavor = Flavor::from_annotations(&meta.annotations);
        let metadata_hash_keys: Vec<&'static str> =
            [annotations::WAVELET_HASH, annotations::WAVE_HASH]
                .into_iter()
                .filter(|k| meta.annotations.contains_key(*k))
                .collect();
        if flavor.is_none() && metadata_hash_keys.is_empty() {
            return None;
        }
        let hash_key = flavor.map(Flavor::hash_key);
        let lookup = |map: &BTreeMap<String, String>| hash_key.and_then(|k| map.get(k)).cloned();
        Some(WorkloadEntry {
            uid: meta.uid.clone(),
            resource_version: meta.resource_version.clone(),
            references: if flavor.is_some() {
                references::references(obj)
            } else {
                Vec::new()
            },
            template_hash: lookup(&obj.spec.template.metadata.annotations),
            metadata_hash: lookup(&meta.annotations),
            flavor,
            metadata_hash_keys,
        })
    }

    /// The hash the running Pods were given: the template's, else the adopted one.
    pub fn recorded_hash(&self) -> Option<&str> {
        self.template_hash
            .as_deref()
            .or(self.metadata_hash.as_deref())
    }
}

#[derive(Default)]
struct Workloads {
    entries: HashMap<WorkloadKey, Arc<WorkloadEntry>>,
    /// ConfigMap/Secret → the workloads that reference it.
    dependents: HashMap<ConfigKey, Vec<WorkloadKey>>,
}

/// The cache shared by watch threads and workers.
#[derive(Default)]
pub struct Cache {
    configs: RwLock<HashMap<ConfigKey, Arc<ConfigEntry>>>,
    workloads: RwLock<Workloads>,
}

impl Cache {
    pub fn new() -> Cache {
        Cache::default()
    }

    pub fn config(&self, key: &ConfigKey) -> Option<Arc<ConfigEntry>> {
        self.configs.read().unwrap().get(key).cloned()
    }

    /// Stores a ConfigMap/Secret; says whether its data changed.
    pub fn upsert_config(&self, kind: ConfigKind, obj: ConfigObject) -> (ConfigKey, ConfigChange) {
        let key = ConfigKey::new(kind, &obj.metadata.namespace, &obj.metadata.name);
        let entry = ConfigEntry::from_object(obj);
        let mut configs = self.configs.write().unwrap();
        let change = match configs.get(&key) {
            None => ConfigChange::Created,
            Some(old) if old.resource_version == entry.resource_version && old.uid == entry.uid => {
                return (key, ConfigChange::Unchanged)
            }
            Some(old) if old.digests != entry.digests || old.uid != entry.uid => {
                ConfigChange::DataChanged
            }
            Some(_) => ConfigChange::MetadataOnly,
        };
        configs.insert(key.clone(), Arc::new(entry));
        (key, change)
    }

    pub fn remove_config(&self, key: &ConfigKey) -> Option<Arc<ConfigEntry>> {
        self.configs.write().unwrap().remove(key)
    }

    /// Cached ConfigMaps/Secrets of one kind, in one namespace or all.
    pub fn config_keys(&self, kind: ConfigKind, namespace: Option<&str>) -> Vec<ConfigKey> {
        self.configs
            .read()
            .unwrap()
            .keys()
            .filter(|k| k.kind == kind && namespace.is_none_or(|ns| k.namespace == ns))
            .cloned()
            .collect()
    }

    /// ConfigMaps/Secrets carrying a delete-mode annotation.
    pub fn delete_mode_configs(&self) -> Vec<(ConfigKey, Arc<ConfigEntry>)> {
        self.configs
            .read()
            .unwrap()
            .iter()
            .filter(|(_, e)| e.pod_delete_match.is_some())
            .map(|(k, e)| (k.clone(), Arc::clone(e)))
            .collect()
    }

    /// Workloads that reference `key`.
    pub fn dependents(&self, key: &ConfigKey) -> Vec<WorkloadKey> {
        self.workloads
            .read()
            .unwrap()
            .dependents
            .get(key)
            .cloned()
            .unwrap_or_default()
    }

    pub fn workload(&self, key: &WorkloadKey) -> Option<Arc<WorkloadEntry>> {
        self.workloads.read().unwrap().entries.get(key).cloned()
    }

    /// Stores (or, for `None`, forgets) a workload and re-indexes its references.
    /// Returns whether the cached state changed.
    pub fn upsert_workload(&self, key: &WorkloadKey, entry: Option<WorkloadEntry>) -> bool {
        let mut workloads = self.workloads.write().unwrap();
        let old = match entry {
            Some(entry) => {
                if workloads.entries.get(key).is_some_and(|old| **old == entry) {
                    return false;
                }
                workloads.entries.insert(key.clone(), Arc::new(entry))
            }
            None => workloads.entries.remove(key),
        };
        let new = workloads.entries.get(key).cloned();
        let old_refs = old
            .as_ref()
            .map(|e| e.references.as_slice())
            .unwrap_or_default();
        let new_refs = new
            .as_ref()
            .map(|e| e.references.as_slice())
            .unwrap_or_default();
        for r in old_refs {
            if !new_refs.iter().any(|n| n.config == r.config) {
                if let Some(list) = workloads.dependents.get_mut(&r.config) {
                    list.retain(|k| k != key);
                    if list.is_empty() {
                        workloads.dependents.remove(&r.config);
                    }
                }
            }
        }
        for r in new_refs {
            let list = workloads.dependents.entry(r.config.clone()).or_default();
            if !list.contains(key) {
                list.push(key.clone());
            }
        }
        old.is_some() || new.is_some()
    }

    /// Cached workloads of one resource, in one namespace or all.
    pub fn workload_keys(&self, resource: &Resource, namespace: Option<&str>) -> Vec<WorkloadKey> {
        self.workloads
            .read()
            .unwrap()
            .entries
            .keys()
            .filter(|k| *k.resource == *resource && namespace.is_none_or(|ns| k.namespace == ns))
            .cloned()
            .collect()
    }

    /// (ConfigMaps and Secrets, workloads) cached.
    pub fn sizes(&self) -> (usize, usize) {
        (
            self.configs.read().unwrap().len(),
            self.workloads.read().unwrap().entries.len(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn configmap(
        name: &str,
        rv: &str,
        data: &[(&str, &str)],
        labels: &[(&str, &str)],
    ) -> ConfigObject {
        let json = serde_json::json!({
            "metadata": {"name": name, "namespace": "ns", "uid": "u", "resourceVersion": rv,
                         "labels": labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>()},
            "data": data.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>(),
        });
        ConfigObject::configmap(json).unwrap()
    }

    fn deployment(
        name: &str,
        annotations: serde_json::Value,
        volumes: serde_json::Value,
    ) -> WorkloadObject {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "ns", "uid": "u1", "resourceVersion": "1", "annotations": annotations},
            "spec": {"template": {"spec": {"volumes": volumes, "containers": []}}}
        }))
        .unwrap()
    }

    fn key(name: &str) -> WorkloadKey {
        WorkloadKey {
            resource: Arc::new(Resource::deployments()),
            namespace: "ns".into(),
            name: name.into(),
        }
    }

    #[test]
    fn a_label_only_change_is_metadata_only() {
        let cache = Cache::new();
        assert_eq!(
            cache
                .upsert_config(
                    ConfigKind::ConfigMap,
                    configmap("a", "1", &[("k", "v")], &[])
                )
                .1,
            ConfigChange::Created
        );
        assert_eq!(
            cache
                .upsert_config(
                    ConfigKind::ConfigMap,
                    configmap("a", "2", &[("k", "v")], &[("x", "y")])
                )
                .1,
            ConfigChange::MetadataOnly
        );
        assert_eq!(
            cache
                .upsert_config(
                    ConfigKind::ConfigMap,
                    configmap("a", "3", &[("k", "w")], &[])
                )
                .1,
            ConfigChange::DataChanged
        );
        assert_eq!(
            cache
                .upsert_config(
                    ConfigKind::ConfigMap,
                    configmap("a", "3", &[("k", "w")], &[])
                )
                .1,
            ConfigChange::Unchanged
        );
    }

    #[test]
    fn the_reverse_index_follows_reference_changes() {
        let cache = Cache::new();
        let opted = serde_json::json!({"wavelet.dev/update-on-config-change": "true"});
        let web = deployment(
            "web",
            opted.clone(),
            serde_json::json!([{"name": "v", "configMap": {"name": "one"}}]),
        );
        cache.upsert_workload(&key("web"), WorkloadEntry::from_object(&web));
        let one = ConfigKey::new(ConfigKind::ConfigMap, "ns", "one");
        let two = ConfigKey::new(ConfigKind::ConfigMap, "ns", "two");
        assert_eq!(cache.dependents(&one), vec![key("web")]);

        let moved = deployment(
            "web",
            opted,
            serde_json::json!([{"name": "v", "configMap": {"name": "two"}}]),
        );
        cache.upsert_workload(&key("web"), WorkloadEntry::from_object(&moved));
        assert!(cache.dependents(&one).is_empty());
        assert_eq!(cache.dependents(&two), vec![key("web")]);

        cache.upsert_workload(&key("web"), None);
        assert!(cache.dependents(&two).is_empty());
    }

    #[test]
    fn workloads_that_never_opted_in_are_not_cached() {
        let plain = deployment("plain", serde_json::json!({}), serde_json::json!([]));
        assert!(WorkloadEntry::from_object(&plain).is_none());
        let leftover = deployment(
            "old",
            serde_json::json!({"wavelet.dev/config-hash": "abc"}),
            serde_json::json!([]),
        );
        let entry = WorkloadEntry::from_object(&leftover).unwrap();
        assert_eq!(entry.flavor, None);
        assert_eq!(entry.metadata_hash_keys, vec![annotations::WAVELET_HASH]);
    }

    #[test]
    fn recorded_hash_prefers_the_template() {
        let obj: WorkloadObject = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "w", "namespace": "ns", "annotations": {
                "wavelet.dev/update-on-config-change": "true", "wavelet.dev/config-hash": "meta"}},
            "spec": {"template": {"metadata": {"annotations": {"wavelet.dev/config-hash": "tmpl"}}}}
        }))
        .unwrap();
        assert_eq!(
            WorkloadEntry::from_object(&obj).unwrap().recorded_hash(),
            Some("tmpl")
        );
    }
}
