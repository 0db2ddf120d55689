//! Which ConfigMaps, Secrets and SecretProviderClasses a pod template references, and
//! which of their keys count.
//!
//! Followed in `initContainers` and `containers` alike: volumes, projected sources (with and
//! without `items`), `env[].valueFrom` key refs (that key only), `envFrom`, and the
//! `extra-configmaps`/`extra-secrets` annotations (wavelet's and Wave's); CSI volumes with
//! a `secretProviderClass` attribute (the Secrets Store CSI driver's), whose every object
//! counts and which are never required (their versions are known only once Pods mounted
//! them). `ephemeralContainers` are ignored: they cannot be rolled.

use std::collections::BTreeMap;

use crate::annotations;
use crate::objects::{ConfigKey, ConfigKind, KeyToPath, WorkloadObject};

/// Everything one workload uses of one ConfigMap or Secret, merged over all its references.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    pub config: ConfigKey,
    /// Every key counts (a volume without `items`, `envFrom`, an extra-* annotation).
    pub all_keys: bool,
    /// Keys named one by one, each with whether the Pods fail to start without it.
    pub keys: NamedKeys,
    /// The Pods fail to start when the object does not exist.
    pub required: bool,
}

/// Keys named one by one (a key ref, a volume's `items`), sorted, each with whether the
/// Pods fail to start without it. Most references name one or two keys: a sorted slice
/// costs their names, where a `BTreeMap`'s first node alone is ~290 bytes per workload.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NamedKeys(Box<[(Box<str>, bool)]>);

impl NamedKeys {
    /// Adds `key`; named twice, it is required if either names it so.
    pub fn add(&mut self, key: &str, required: bool) {
        match self.0.binary_search_by(|(k, _)| (**k).cmp(key)) {
            Ok(i) => self.0[i].1 |= required,
            Err(i) => {
                let mut keys = std::mem::take(&mut self.0).into_vec();
                keys.insert(i, (key.into(), required));
                self.0 = keys.into_boxed_slice();
            }
        }
    }

    /// Each key with whether it is required, in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, bool)> {
        self.0.iter().map(|(k, required)| (&**k, *required))
    }

    /// The key names, in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(k, _)| &**k)
    }

    /// Whether `key` is named, and if so whether it is required.
    pub fn get(&self, key: &str) -> Option<bool> {
        self.0
            .binary_search_by(|(k, _)| (**k).cmp(key))
            .ok()
            .map(|i| self.0[i].1)
    }
}

impl<'a, const N: usize> From<[(&'a str, bool); N]> for NamedKeys {
    fn from(keys: [(&'a str, bool); N]) -> NamedKeys {
        let mut named = NamedKeys::default();
        for (key, required) in keys {
            named.add(key, required);
        }
        named
    }
}

/// The references of a workload, one per object, sorted by object.
pub fn references(workload: &WorkloadObject) -> Vec<Reference> {
    let namespace = workload.metadata.namespace.as_str();
    let mut found = Found::default();
    let spec = &workload.pod_template().spec;

    for volume in &spec.volumes {
        if let Some(cm) = &volume.config_map {
            found.items(
                ConfigKind::ConfigMap,
                namespace,
                &cm.name,
                cm.items.as_deref(),
                cm.optional,
            );
        }
        if let Some(secret) = &volume.secret {
            found.items(
                ConfigKind::Secret,
                namespace,
                &secret.secret_name,
                secret.items.as_deref(),
                secret.optional,
            );
        }
        if let Some(class) = volume
            .csi
            .as_ref()
            .and_then(|csi| csi.volume_attributes.secret_provider_class.as_deref())
        {
            found.all(ConfigKind::SecretProviderClass, namespace, class, false);
        }
        for source in volume.projected.iter().flat_map(|p| &p.sources) {
            if let Some(cm) = &source.config_map {
                found.items(
                    ConfigKind::ConfigMap,
                    namespace,
                    &cm.name,
                    cm.items.as_deref(),
                    cm.optional,
                );
            }
            if let Some(secret) = &source.secret {
                found.items(
                    ConfigKind::Secret,
                    namespace,
                    &secret.name,
                    secret.items.as_deref(),
                    secret.optional,
                );
            }
        }
    }

    for container in spec.init_containers.iter().chain(&spec.containers) {
        for env in &container.env {
            let Some(source) = &env.value_from else {
                continue;
            };
            if let Some(r) = &source.config_map_key_ref {
                found.key(
                    ConfigKind::ConfigMap,
                    namespace,
                    &r.name,
                    &r.key,
                    r.optional,
                );
            }
            if let Some(r) = &source.secret_key_ref {
                found.key(ConfigKind::Secret, namespace, &r.name, &r.key, r.optional);
            }
        }
        for env_from in &container.env_from {
            if let Some(r) = &env_from.config_map_ref {
                found.all(
                    ConfigKind::ConfigMap,
                    namespace,
                    &r.name,
                    !r.optional.unwrap_or(false),
                );
            }
            if let Some(r) = &env_from.secret_ref {
                found.all(
                    ConfigKind::Secret,
                    namespace,
                    &r.name,
                    !r.optional.unwrap_or(false),
                );
            }
        }
    }

    let meta = &workload.metadata.annotations;
    for (key, kind) in [
        (annotations::WAVELET_EXTRA_CONFIGMAPS, ConfigKind::ConfigMap),
        (annotations::WAVE_EXTRA_CONFIGMAPS, ConfigKind::ConfigMap),
        (annotations::WAVELET_EXTRA_SECRETS, ConfigKind::Secret),
        (annotations::WAVE_EXTRA_SECRETS, ConfigKind::Secret),
    ] {
        for (ns, name) in meta
            .get(key)
            .map(|v| parse_extra_list(v, namespace))
            .unwrap_or_default()
        {
            found.all(kind, &ns, &name, false);
        }
    }

    found.by_object.into_values().collect()
}

/// Parses an extra-* annotation: comma-separated `name` or `namespace/name`, blanks
/// ignored. Entries with more than one `/` are skipped (they cannot name an object).
pub fn parse_extra_list(value: &str, default_namespace: &str) -> Vec<(String, String)> {
    value
        .split(',')
        .map(str::trim)
        .filter(|entry| !entry.is_empty())
        .filter_map(|entry| match entry.split_once('/') {
            None => Some((default_namespace.to_string(), entry.to_string())),
            Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
                Some((ns.to_string(), name.to_string()))
            }
            Some(_) => None,
        })
        .collect()
}

#[derive(Default)]
struct Found {
    by_object: BTreeMap<ConfigKey, Reference>,
}

impl Found {
    fn entry(&mut self, kind: ConfigKind, namespace: &str, name: &str) -> Option<&mut Reference> {
        if name.is_empty() {
            return None;
        }
        let config = ConfigKey::new(kind, namespace, name);
        Some(self.by_object.entry(config.clone()).or_insert(Reference {
            config,
            all_keys: false,
            keys: NamedKeys::default(),
            required: false,
        }))
    }

    fn all(&mut self, kind: ConfigKind, namespace: &str, name: &str, required: bool) {
        if let Some(r) = self.entry(kind, namespace, name) {
            r.all_keys = true;
            r.required |= required;
        }
    }

    fn key(
        &mut self,
        kind: ConfigKind,
        namespace: &str,
        name: &str,
        key: &str,
        optional: Option<bool>,
    ) {
        let required = !optional.unwrap_or(false);
        if let Some(r) = self.entry(kind, namespace, name) {
            r.required |= required;
            r.keys.add(key, required);
        }
    }

    /// A volume or projected source: `items` lists the keys that count, else all keys.
    fn items(
        &mut self,
        kind: ConfigKind,
        namespace: &str,
        name: &str,
        items: Option<&[KeyToPath]>,
        optional: Option<bool>,
    ) {
        match items {
            Some(items) if !items.is_empty() => {
                for item in items {
                    self.key(kind, namespace, name, &item.key, optional);
                }
            }
            _ => self.all(kind, namespace, name, !optional.unwrap_or(false)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workload(json: serde_json::Value) -> WorkloadObject {
        serde_json::from_value(json).unwrap()
    }

    fn template(spec: serde_json::Value) -> WorkloadObject {
        workload(serde_json::json!({
            "metadata": {"name": "web", "namespace": "ns"},
            "spec": {"template": {"spec": spec}}
        }))
    }

    fn key(kind: ConfigKind, name: &str) -> ConfigKey {
        ConfigKey::new(kind, "ns", name)
    }

    #[test]
    fn volume_without_items_counts_all_keys_and_is_required() {
        let refs = references(&template(serde_json::json!({
            "volumes": [{"name": "v", "configMap": {"name": "app"}}]
        })));
        assert_eq!(refs.len(), 1);
        assert_eq!(refs[0].config, key(ConfigKind::ConfigMap, "app"));
        assert!(refs[0].all_keys && refs[0].required);
    }

    #[test]
    fn secret_volume_is_named_by_secret_name() {
        let refs = references(&template(serde_json::json!({
            "volumes": [{"name": "v", "secret": {"secretName": "creds", "optional": true}}]
        })));
        assert_eq!(refs[0].config, key(ConfigKind::Secret, "creds"));
        assert!(refs[0].all_keys && !refs[0].required);
    }

    #[test]
    fn projected_items_count_only_the_listed_keys() {
        let refs = references(&template(serde_json::json!({
            "volumes": [{"name": "v", "projected": {"sources": [
                {"configMap": {"name": "app", "items": [{"key": "a", "path": "a"}]}},
                {"secret": {"name": "creds"}}
            ]}}]
        })));
        assert_eq!(refs.len(), 2);
        assert!(!refs[0].all_keys);
        assert_eq!(refs[0].keys, NamedKeys::from([("a", true)]));
        assert_eq!(refs[1].config, key(ConfigKind::Secret, "creds"));
        assert!(refs[1].all_keys);
    }

    #[test]
    fn env_key_ref_counts_only_that_key() {
        let refs = references(&template(serde_json::json!({
            "containers": [{"name": "c", "env": [
                {"name": "A", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "a"}}},
                {"name": "B", "valueFrom": {"configMapKeyRef": {"name": "app", "key": "b", "optional": true}}},
                {"name": "C", "value": "literal"}
            ]}]
        })));
        assert_eq!(refs.len(), 2);
        let app = &refs[0];
        assert_eq!(app.config, key(ConfigKind::ConfigMap, "app"));
        assert!(!app.all_keys && !app.required);
        assert_eq!(app.keys, NamedKeys::from([("b", false)]));
        let creds = &refs[1];
        assert_eq!(creds.keys, NamedKeys::from([("a", true)]));
        assert!(creds.required);
    }

    #[test]
    fn init_containers_env_from_is_tracked() {
        let refs = references(&template(serde_json::json!({
            "initContainers": [{"name": "init", "envFrom": [{"configMapRef": {"name": "init-cfg"}}]}],
            "containers": [{"name": "c"}]
        })));
        assert_eq!(refs[0].config, key(ConfigKind::ConfigMap, "init-cfg"));
        assert!(refs[0].all_keys && refs[0].required);
    }

    #[test]
    fn references_to_one_object_merge_with_all_keys_and_required_winning() {
        let refs = references(&template(serde_json::json!({
            "volumes": [{"name": "v", "configMap": {"name": "app", "optional": true}}],
            "containers": [{"name": "c", "env": [
                {"name": "A", "valueFrom": {"configMapKeyRef": {"name": "app", "key": "a"}}}
            ]}]
        })));
        assert_eq!(refs.len(), 1);
        assert!(refs[0].all_keys && refs[0].required);
        assert_eq!(refs[0].keys.get("a"), Some(true));
    }

    #[test]
    fn extra_annotations_accept_names_and_namespace_slash_name() {
        let refs = references(&workload(serde_json::json!({
            "metadata": {"name": "web", "namespace": "ns", "annotations": {
                "wavelet.dev/extra-configmaps": "one, other/two,,",
                "wave.pusher.com/extra-secrets": "s"
            }},
            "spec": {"template": {"spec": {"containers": []}}}
        })));
        let keys: Vec<String> = refs.iter().map(|r| r.config.to_string()).collect();
        assert_eq!(
            keys,
            ["configmap ns/one", "configmap other/two", "secret ns/s"]
        );
        assert!(refs.iter().all(|r| r.all_keys && !r.required));
    }

    #[test]
    fn extra_list_skips_malformed_entries() {
        assert_eq!(
            parse_extra_list("a/b/c, /x, y/, ok", "d"),
            vec![("d".to_string(), "ok".to_string())]
        );
    }

    #[test]
    fn a_csi_volume_references_its_secret_provider_class_with_every_object_and_never_required() {
        let refs = references(&template(serde_json::json!({
            "volumes": [
                {"name": "s", "csi": {"driver": "secrets-store.csi.k8s.io", "readOnly": true,
                    "volumeAttributes": {"secretProviderClass": "vault-db"}}},
                {"name": "other", "csi": {"driver": "ebs.csi.aws.com", "volumeAttributes": {"type": "gp3"}}}
            ]
        })));
        assert_eq!(refs.len(), 1);
        assert_eq!(
            refs[0].config,
            key(ConfigKind::SecretProviderClass, "vault-db")
        );
        assert!(refs[0].all_keys && !refs[0].required);
    }

    #[test]
    fn a_template_without_configuration_has_no_references() {
        assert!(references(&template(
            serde_json::json!({"containers": [{"name": "c"}]})
        ))
        .is_empty());
    }
}
