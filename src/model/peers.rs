//! What Wave and Reloader recorded on a workload of the configuration its Pods run, and
//! their own hashes of configuration, so that wavelet takes a workload over from them
//! without a rollout when nothing changed since, and with one when something did.
//!
//! - **Wave v0.11** writes `wave.pusher.com/config-hash` on the pod template: the SHA-256
//!   of the JSON `{"configMaps":{<name>:{<key>:<base64 of the value>}},"secrets":{...}}`
//!   (Go's `encoding/json`: object keys in byte order, `[]byte` as standard base64 with
//!   padding) over its children, found its own way ([`wave_children`]): volumes
//!   (all keys, `items` or not), projected sources (their `items` keys, else all), the
//!   `extra-configmaps`/`extra-secrets` annotations, and `envFrom` and `env` key refs of
//!   `containers` (not `initContainers`). Objects are keyed by name alone; an absent
//!   object is left out, an absent key too; a ConfigMap's `binaryData` value wins over a
//!   `data` value of the same key.
//! - **Reloader v1.4** writes, per ConfigMap/Secret it reloaded for, the env var
//!   `STAKATER_<NAME>_CONFIGMAP` / `_SECRET` (its default env-vars strategy; `<NAME>` the
//!   name upper-cased, each run of other characters one `_`), or the pod template
//!   annotation `reloader.stakater.com/last-reloaded-from` (annotations strategy, the last
//!   object only): the SHA-1 hex of `k=v` items sorted and joined with `;` (a ConfigMap's
//!   `data` as is and its `binaryData` base64-encoded; a Secret's decoded bytes).

use std::collections::BTreeMap;

use serde::Deserialize;
use sha2::{Digest as _, Sha256};

use crate::annotations::{
    RELOADER_LAST_RELOADED_FROM, WAVE_EXTRA_CONFIGMAPS, WAVE_EXTRA_SECRETS, WAVE_HASH,
};
use crate::model::hash::hex;
use crate::model::sha1::sha1;
use crate::objects::base64;
use crate::objects::{ConfigKey, ConfigKind, WorkloadObject};

/// What another controller left on a workload's pod template of what its Pods run, kept
/// only for a workload wavelet has not recorded a hash on yet.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PeerRecords {
    /// Wave's hash on the template and the children it hashed.
    pub wave: Option<WaveRecord>,
    /// Reloader's records: the object (by kind, and by its env var name or its name) and
    /// the SHA-1 of its data when Reloader last reloaded for it.
    pub reloader: Vec<ReloaderRecord>,
}

impl PeerRecords {
    pub fn is_empty(&self) -> bool {
        self.wave.is_none() && self.reloader.is_empty()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaveRecord {
    pub hash: Box<str>,
    pub children: Vec<WaveChild>,
}

/// One object Wave hashes for a workload: all its keys (`keys: None`) or those named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaveChild {
    pub config: ConfigKey,
    pub keys: Option<Vec<String>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReloaderRecord {
    pub kind: ConfigKind,
    /// Which object: the env var name Reloader derives from its name, or (from the
    /// annotation) the namespace and name themselves.
    pub object: RecordedObject,
    pub sha1: Box<str>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordedObject {
    EnvVar(Box<str>),
    Named { namespace: Box<str>, name: Box<str> },
}

impl ReloaderRecord {
    /// Whether this record is about `config`.
    pub fn is_about(&self, config: &ConfigKey) -> bool {
        if self.kind != config.kind {
            return false;
        }
        match &self.object {
            RecordedObject::EnvVar(var) => **var == reloader_env_var(config),
            RecordedObject::Named { namespace, name } => {
                **namespace == *config.namespace && **name == *config.name
            }
        }
    }
}

/// The records on `obj`'s pod template (Wave's under `wave_opted_in` only).
pub fn records(obj: &WorkloadObject, wave_opted_in: bool) -> PeerRecords {
    let template = obj.pod_template();
    let wave = template
        .metadata
        .annotations
        .get(WAVE_HASH)
        .filter(|_| wave_opted_in)
        .map(|hash| WaveRecord {
            hash: hash.into(),
            children: wave_children(obj),
        });
    let mut reloader = Vec::new();
    for container in template
        .spec
        .init_containers
        .iter()
        .chain(&template.spec.containers)
    {
        for env in &container.env {
            let (Some(kind), Some(value)) = (env_var_kind(&env.name), &env.value) else {
                continue;
            };
            reloader.push(ReloaderRecord {
                kind,
                object: RecordedObject::EnvVar(env.name.as_str().into()),
                sha1: value.as_str().into(),
            });
        }
    }
    if let Some(last) = template
        .metadata
        .annotations
        .get(RELOADER_LAST_RELOADED_FROM)
        .and_then(|json| serde_json::from_str::<ReloadSource>(json).ok())
    {
        let kind = match last.type_.as_str() {
            "CONFIGMAP" => Some(ConfigKind::ConfigMap),
            "SECRET" => Some(ConfigKind::Secret),
            _ => None,
        };
        if let Some(kind) = kind {
            reloader.push(ReloaderRecord {
                kind,
                object: RecordedObject::Named {
                    namespace: last.namespace.into(),
                    name: last.name.into(),
                },
                sha1: last.hash.into(),
            });
        }
    }
    PeerRecords { wave, reloader }
}

/// The JSON of `reloader.stakater.com/last-reloaded-from`.
#[derive(Deserialize)]
struct ReloadSource {
    #[serde(rename = "type")]
    type_: String,
    name: String,
    namespace: String,
    hash: String,
}

fn env_var_kind(name: &str) -> Option<ConfigKind> {
    let rest = name.strip_prefix("STAKATER_")?;
    if rest.ends_with("_CONFIGMAP") {
        Some(ConfigKind::ConfigMap)
    } else if rest.ends_with("_SECRET") {
        Some(ConfigKind::Secret)
    } else {
        None
    }
}

/// The env var Reloader keeps its record of `config` in: `STAKATER_` + the name
/// upper-cased with each run of characters other than `A-Z0-9` one `_` (none at the
/// start) + `_CONFIGMAP` or `_SECRET`.
pub fn reloader_env_var(config: &ConfigKey) -> String {
    let mut out = String::from("STAKATER_");
    let mut last_valid = false;
    for ch in config.name.bytes().map(|b| b.to_ascii_uppercase()) {
        if ch.is_ascii_uppercase() || ch.is_ascii_digit() {
            out.push(char::from(ch));
            last_valid = true;
        } else {
            if last_valid {
                out.push('_');
            }
            last_valid = false;
        }
    }
    out.push_str(match config.kind {
        ConfigKind::Secret => "_SECRET",
        _ => "_CONFIGMAP",
    });
    out
}

/// The children Wave v0.11 hashes for `obj`, its own way (see the module's doc).
pub fn wave_children(obj: &WorkloadObject) -> Vec<WaveChild> {
    let ns = &obj.metadata.namespace;
    let spec = &obj.pod_template().spec;
    let child = |kind, namespace: &str, name: &str, keys: Option<Vec<String>>| WaveChild {
        config: ConfigKey::new(kind, namespace, name),
        keys,
    };
    let items = |items: &Option<Vec<crate::objects::KeyToPath>>| {
        items
            .as_ref()
            .map(|items| items.iter().map(|i| i.key.clone()).collect())
    };
    let mut out = Vec::new();
    for volume in &spec.volumes {
        if let Some(cm) = &volume.config_map {
            out.push(child(ConfigKind::ConfigMap, ns, &cm.name, None));
        }
        if let Some(secret) = &volume.secret {
            out.push(child(ConfigKind::Secret, ns, &secret.secret_name, None));
        }
        for source in volume.projected.iter().flat_map(|p| &p.sources) {
            if let Some(cm) = &source.config_map {
                out.push(child(ConfigKind::ConfigMap, ns, &cm.name, items(&cm.items)));
            }
            if let Some(secret) = &source.secret {
                out.push(child(
                    ConfigKind::Secret,
                    ns,
                    &secret.name,
                    items(&secret.items),
                ));
            }
        }
    }
    for (annotation, kind) in [
        (WAVE_EXTRA_CONFIGMAPS, ConfigKind::ConfigMap),
        (WAVE_EXTRA_SECRETS, ConfigKind::Secret),
    ] {
        let Some(list) = obj.metadata.annotations.get(annotation) else {
            continue;
        };
        for entry in list.split(',') {
            match entry.split('/').collect::<Vec<_>>()[..] {
                [name] => out.push(child(kind, ns, name, None)),
                [namespace, name] => out.push(child(kind, namespace, name, None)),
                _ => {}
            }
        }
    }
    for container in &spec.containers {
        for from in &container.env_from {
            if let Some(cm) = &from.config_map_ref {
                out.push(child(ConfigKind::ConfigMap, ns, &cm.name, None));
            }
            if let Some(secret) = &from.secret_ref {
                out.push(child(ConfigKind::Secret, ns, &secret.name, None));
            }
        }
    }
    for container in &spec.containers {
        for source in container.env.iter().filter_map(|e| e.value_from.as_ref()) {
            if let Some(r) = &source.config_map_key_ref {
                out.push(child(
                    ConfigKind::ConfigMap,
                    ns,
                    &r.name,
                    Some(vec![r.key.clone()]),
                ));
            }
            if let Some(r) = &source.secret_key_ref {
                out.push(child(
                    ConfigKind::Secret,
                    ns,
                    &r.name,
                    Some(vec![r.key.clone()]),
                ));
            }
        }
    }
    out
}

/// The values of one ConfigMap or Secret, read for a take-over and dropped after it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Values {
    /// A ConfigMap's `data`, or a Secret's decoded `data`.
    pub data: BTreeMap<String, Vec<u8>>,
    /// A ConfigMap's decoded `binaryData`.
    pub binary: BTreeMap<String, Vec<u8>>,
}

impl Values {
    /// From a ConfigMap or Secret as the API server returns it.
    pub fn from_object(kind: ConfigKind, object: &serde_json::Value) -> Values {
        let map = |field: &str, decode: bool| -> BTreeMap<String, Vec<u8>> {
            object[field]
                .as_object()
                .into_iter()
                .flatten()
                .filter_map(|(k, v)| {
                    let text = v.as_str()?;
                    let bytes = if decode {
                        base64::decode(text.as_bytes()).ok()?
                    } else {
                        text.as_bytes().to_vec()
                    };
                    Some((k.clone(), bytes))
                })
                .collect()
        };
        match kind {
            ConfigKind::Secret => Values {
                data: map("data", true),
                binary: BTreeMap::new(),
            },
            _ => Values {
                data: map("data", false),
                binary: map("binaryData", true),
            },
        }
    }
}

/// Wave v0.11's hash of `children` with the values read (`None`: the object is absent).
pub fn wave_hash(children: &[(WaveChild, Option<Values>)]) -> String {
    let mut config_maps: BTreeMap<&str, BTreeMap<&str, &[u8]>> = BTreeMap::new();
    let mut secrets: BTreeMap<&str, BTreeMap<&str, &[u8]>> = BTreeMap::new();
    for (child, values) in children {
        let Some(values) = values else { continue };
        let into = match child.config.kind {
            ConfigKind::Secret => &mut secrets,
            _ => &mut config_maps,
        };
        let data = into.entry(&child.config.name).or_default();
        let mut add = |key: &str| {
            // binaryData last: it wins, as in Wave.
            for source in [&values.data, &values.binary] {
                if let Some((k, v)) = source.get_key_value(key) {
                    data.insert(k.as_str(), v.as_slice());
                }
            }
        };
        match &child.keys {
            None => {
                let keys: Vec<&String> = values.data.keys().chain(values.binary.keys()).collect();
                keys.into_iter().for_each(|k| add(k));
            }
            Some(keys) => keys.iter().for_each(|k| add(k)),
        }
    }
    let object = |objects: &BTreeMap<&str, BTreeMap<&str, &[u8]>>| {
        let mut out = String::from("{");
        for (i, (name, data)) in objects.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&json_string(name));
            out.push_str(":{");
            for (j, (key, value)) in data.iter().enumerate() {
                if j > 0 {
                    out.push(',');
                }
                out.push_str(&json_string(key));
                out.push(':');
                out.push_str(&json_string(&base64::encode(value)));
            }
            out.push('}');
        }
        out.push('}');
        out
    };
    let json = format!(
        "{{\"configMaps\":{},\"secrets\":{}}}",
        object(&config_maps),
        object(&secrets)
    );
    hex(&Sha256::digest(json.as_bytes()))
}

/// A JSON string as Go's `encoding/json` writes it (names and keys of Kubernetes objects
/// and base64 text never hold what Go escapes differently from serde).
fn json_string(text: &str) -> String {
    serde_json::to_string(text).expect("a string serializes")
}

/// Reloader v1.4's SHA-1 of one ConfigMap's or Secret's values.
pub fn reloader_sha1(kind: ConfigKind, values: &Values) -> String {
    let mut items: Vec<Vec<u8>> = Vec::new();
    for (key, value) in &values.data {
        let mut item = format!("{key}=").into_bytes();
        item.extend_from_slice(value);
        items.push(item);
    }
    if kind == ConfigKind::ConfigMap {
        for (key, value) in &values.binary {
            items.push(format!("{key}={}", base64::encode(value)).into_bytes());
        }
    }
    items.sort();
    let joined = items.join(&b';');
    hex(&sha1(&joined))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(pairs: &[(&str, &[u8])]) -> Values {
        Values {
            data: pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_vec()))
                .collect(),
            binary: BTreeMap::new(),
        }
    }

    fn child(kind: ConfigKind, name: &str, keys: Option<&[&str]>) -> WaveChild {
        WaveChild {
            config: ConfigKey::new(kind, "default", name),
            keys: keys.map(|k| k.iter().map(ToString::to_string).collect()),
        }
    }

    fn deployment(annotations: serde_json::Value, pod_spec: serde_json::Value) -> WorkloadObject {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web", "namespace": "default", "uid": "u", "resourceVersion": "1",
                         "annotations": annotations},
            "spec": {"template": {"metadata": {"annotations": {"wave.pusher.com/config-hash": "h"}},
                                  "spec": pod_spec}}
        }))
        .unwrap()
    }

    /// Reproduce with: printf '%s' '{"configMaps":{"app-config":{"color":"Ymx1ZQ=="}},"secrets":{"db":{"password":"aHVudGVyMg=="}}}' | sha256sum
    #[test]
    fn waves_hash_is_the_sha256_of_gos_json_of_the_base64_values() {
        let children = [
            (
                child(ConfigKind::ConfigMap, "app-config", None),
                Some(values(&[("color", b"blue")])),
            ),
            (
                child(ConfigKind::Secret, "db", None),
                Some(values(&[("password", b"hunter2")])),
            ),
        ];
        assert_eq!(
            wave_hash(&children),
            "6aaecb48ad2bf90cc85b1f6e4524679ea6ad4d5a1e94cdc748498928cae40f48"
        );
    }

    /// Written by the real Wave v0.11.0 (tests/e2e/takeover.rs, `takeover_from_real_wave`)
    /// for ConfigMap `same` {k: "1"} mounted as a volume.
    #[test]
    fn waves_hash_equals_what_the_real_wave_wrote() {
        let children = [(
            child(ConfigKind::ConfigMap, "same", None),
            Some(values(&[("k", b"1")])),
        )];
        assert_eq!(
            wave_hash(&children),
            "d857162e3df6dd4ea660a8ac60aa6d967f51afec5388d43f8781c789035e290d"
        );
    }

    #[test]
    fn waves_hash_leaves_out_absent_objects_and_keys_and_ignores_child_order() {
        let empty = "100444e91862dd77d7ebe29f050c1e9a7f357c771e1a7b7650aae27e6a3a031d";
        assert_eq!(
            wave_hash(&[(child(ConfigKind::ConfigMap, "gone", None), None)]),
            empty
        );
        let cm = |keys| {
            (
                child(ConfigKind::ConfigMap, "app-config", keys),
                Some(values(&[("color", b"blue"), ("size", b"L")])),
            )
        };
        let db = (
            child(ConfigKind::Secret, "db", None),
            Some(values(&[("password", b"hunter2")])),
        );
        // Only `color` named, plus a key it does not have: as if all keys were `color`.
        let named = wave_hash(&[cm(Some(&["color", "missing"])), db.clone()]);
        assert_eq!(
            named,
            "6aaecb48ad2bf90cc85b1f6e4524679ea6ad4d5a1e94cdc748498928cae40f48"
        );
        assert_eq!(
            wave_hash(&[db.clone(), cm(Some(&["color"]))]),
            named,
            "children in another order"
        );
        assert_ne!(wave_hash(&[cm(None), db]), named, "all keys count");
    }

    #[test]
    fn wave_finds_children_its_own_way() {
        let obj = deployment(
            serde_json::json!({"wave.pusher.com/extra-secrets": "other/s,t"}),
            serde_json::json!({
                "volumes": [
                    {"name": "a", "configMap": {"name": "vol", "items": [{"key": "k", "path": "p"}]}},
                    {"name": "b", "projected": {"sources": [{"configMap": {"name": "proj", "items": [{"key": "k", "path": "p"}]}}]}}
                ],
                "initContainers": [{"name": "i", "envFrom": [{"configMapRef": {"name": "init-only"}}]}],
                "containers": [{"name": "c", "env": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "db", "key": "pw"}}}]}]
            }),
        );
        let children = wave_children(&obj);
        let shown: Vec<String> = children
            .iter()
            .map(|c| format!("{} {:?}", c.config, c.keys))
            .collect();
        assert_eq!(
            shown,
            [
                "configmap default/vol None",
                "configmap default/proj Some([\"k\"])",
                "secret other/s None",
                "secret default/t None",
                "secret default/db Some([\"pw\"])",
            ],
            "volume items ignored, projected items kept, init containers not followed"
        );
    }

    #[test]
    fn reloaders_env_var_name_upper_cases_and_joins_runs_of_other_characters() {
        let key = |kind, name| ConfigKey::new(kind, "ns", name);
        assert_eq!(
            reloader_env_var(&key(ConfigKind::ConfigMap, "app-config")),
            "STAKATER_APP_CONFIG_CONFIGMAP"
        );
        assert_eq!(
            reloader_env_var(&key(ConfigKind::Secret, "db.v2--x")),
            "STAKATER_DB_V2_X_SECRET"
        );
    }

    /// Reproduce with: printf 'a.b=2;a=1;bin=AAE=' | sha1sum
    #[test]
    fn reloaders_sha1_sorts_key_value_items_and_base64s_binary_data() {
        let mut cm = values(&[("a", b"1"), ("a.b", b"2")]);
        cm.binary.insert("bin".into(), vec![0, 1]);
        assert_eq!(
            reloader_sha1(ConfigKind::ConfigMap, &cm),
            "a43ba0333296a9367fabe917a143b0bd44948650"
        );
        assert_eq!(
            reloader_sha1(ConfigKind::Secret, &values(&[("password", b"hunter2")])),
            "ef1c496a196ff5903e51873eea66100d635fdfd2"
        );
    }

    /// Written by the real Reloader v1.4.21 (tests/e2e/takeover.rs,
    /// `takeover_from_real_reloader`) as `STAKATER_SAME_CONFIGMAP` for {k: "3"}.
    #[test]
    fn reloaders_sha1_equals_what_the_real_reloader_wrote() {
        assert_eq!(
            reloader_sha1(ConfigKind::ConfigMap, &values(&[("k", b"3")])),
            "b650f578912e3ea307670e560cc3cc39529ed335"
        );
        let same = ConfigKey::new(ConfigKind::ConfigMap, "e2e-from-reloader", "same");
        assert_eq!(reloader_env_var(&same), "STAKATER_SAME_CONFIGMAP");
    }

    #[test]
    fn reloaders_records_are_read_from_env_vars_and_the_last_reloaded_from_annotation() {
        let obj: WorkloadObject = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web", "namespace": "ns", "uid": "u", "resourceVersion": "1"},
            "spec": {"template": {
                "metadata": {"annotations": {"reloader.stakater.com/last-reloaded-from":
                    "{\"type\":\"SECRET\",\"name\":\"db\",\"namespace\":\"ns\",\"hash\":\"abc\",\"containerRefs\":[\"c\"],\"observedAt\":1}"}},
                "spec": {"containers": [{"name": "c", "env": [
                    {"name": "STAKATER_APP_CONFIG_CONFIGMAP", "value": "def"},
                    {"name": "OTHER", "value": "x"}
                ]}]}
            }}
        }))
        .unwrap();
        let records = records(&obj, false);
        assert!(records.wave.is_none());
        let cm = ConfigKey::new(ConfigKind::ConfigMap, "ns", "app-config");
        let db = ConfigKey::new(ConfigKind::Secret, "ns", "db");
        let about = |key: &ConfigKey| {
            records
                .reloader
                .iter()
                .find(|r| r.is_about(key))
                .map(|r| r.sha1.to_string())
        };
        assert_eq!(about(&cm).as_deref(), Some("def"));
        assert_eq!(about(&db).as_deref(), Some("abc"));
        assert_eq!(records.reloader.len(), 2);
    }
}
