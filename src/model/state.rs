//! wavelet's own ConfigMap `wavelet-state` as a store of one-line entries under keys of its
//! own, for what hash mode keeps in the API server: fan-outs in progress or held, urgent
//! changes let through, and the global pause (`wavelet pause`). Delete mode's ledger keeps
//! its entries in the same ConfigMap under other keys; each writer keeps the other's.
//!
//! `wavelet run` keeps the copy current with a watch of this one ConfigMap (the
//! controller feeds [`StateConfigMap::observed`]), so a `wavelet pause` typed on a laptop
//! is seen within a second; the one-shot commands read it once. A write is a PUT carrying
//! the resourceVersion last seen (a POST when the ConfigMap does not exist yet); a 409
//! re-reads it and applies the change again.

use std::collections::BTreeMap;
use std::sync::Mutex;

use serde_json::json;
use sha2::{Digest as _, Sha256};

use crate::client::Client;
use crate::error::Error;
use crate::objects::{ConfigKey, Resource};

/// Name of the ConfigMap (shared with delete mode's ledger).
pub const STATE_CONFIGMAP: &str = "wavelet-state";

/// The key of the global pause.
pub const PAUSE_KEY: &str = "pause";

/// Longest ConfigMap data key the API accepts.
const MAX_KEY_LEN: usize = 253;

/// Attempts of a write that keeps meeting 409 Conflict.
const MAX_CONFLICT_RETRIES: usize = 5;

/// The data key of an entry about one ConfigMap/Secret: `<prefix>.configmap.<ns>.<name>`
/// (a kind and a namespace hold no `.`, so it is unambiguous; every character is valid in
/// a ConfigMap key). Past the API's 253 characters the name becomes `h-` and 32 hex
/// digits of its SHA-256.
pub fn object_key(prefix: &str, object: &ConfigKey) -> String {
    let key = format!(
        "{prefix}.{}.{}.{}",
        object.kind.as_str(),
        object.namespace,
        object.name
    );
    if key.len() <= MAX_KEY_LEN {
        return key;
    }
    let digest = crate::model::hash::hex(&Sha256::digest(object.name.as_bytes()));
    format!(
        "{prefix}.{}.{}.h-{}",
        object.kind.as_str(),
        object.namespace,
        &digest[..32]
    )
}

#[derive(Default, Clone)]
struct Copy {
    /// `None`: the ConfigMap does not exist.
    resource_version: Option<String>,
    data: BTreeMap<String, String>,
}

/// The state ConfigMap of one namespace.
pub struct StateConfigMap {
    client: Client,
    namespace: String,
    /// `--dry-run`: changes are kept in memory only.
    dry_run: bool,
    /// `None` until read or watched.
    copy: Mutex<Option<Copy>>,
}

#[derive(serde::Deserialize)]
struct Wire {
    #[serde(default)]
    metadata: MetaWire,
    #[serde(default)]
    data: Option<BTreeMap<String, String>>,
}

#[derive(serde::Deserialize, Default)]
struct MetaWire {
    #[serde(default, rename = "resourceVersion")]
    resource_version: String,
}

/// The state ConfigMap as a watch delivers it (its values in clear: they are wavelet's
/// own one-line entries, never configuration).
#[derive(Debug, Clone, Default, serde::Deserialize)]
pub struct StateObject {
    #[serde(default)]
    pub metadata: crate::objects::ObjectMeta,
    #[serde(default)]
    pub data: Option<BTreeMap<String, String>>,
}

impl crate::watch::watcher::Object for StateObject {
    fn metadata(&self) -> &crate::objects::ObjectMeta {
        &self.metadata
    }
}

impl StateConfigMap {
    pub fn new(client: Client, namespace: String, dry_run: bool) -> StateConfigMap {
        StateConfigMap {
            client,
            namespace,
            dry_run,
            copy: Mutex::new(None),
        }
    }

    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The entry under `key` (the first call reads the ConfigMap unless a watch filled it).
    pub fn get(&self, key: &str) -> Result<Option<String>, Error> {
        self.with_copy(|copy| copy.data.get(key).cloned())
    }

    /// Every entry whose key starts with `prefix`, in key order.
    pub fn entries(&self, prefix: &str) -> Result<Vec<(String, String)>, Error> {
        self.with_copy(|copy| {
            copy.data
                .range(prefix.to_string()..)
                .take_while(|(k, _)| k.starts_with(prefix))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
    }

    fn with_copy<T>(&self, f: impl FnOnce(&Copy) -> T) -> Result<T, Error> {
        let mut copy = self.copy.lock().unwrap();
        if copy.is_none() {
            *copy = Some(self.read()?);
        }
        Ok(f(copy.as_ref().expect("read above")))
    }

    /// What the watch reports of the ConfigMap (`None`: deleted); returns the keys whose
    /// entries changed.
    pub fn observed(&self, object: Option<StateObject>) -> Vec<String> {
        let new = match object {
            Some(o) => Copy {
                resource_version: Some(o.metadata.resource_version),
                data: o.data.unwrap_or_default(),
            },
            None => Copy::default(),
        };
        let mut copy = self.copy.lock().unwrap();
        // An event older than wavelet's own last write (still in flight when the write's
        // answer came) would undo it for a moment: resourceVersions are opaque, but those
        // of one object from one etcd grow, so a smaller number is older.
        let version = |c: &Copy| {
            c.resource_version
                .as_deref()
                .and_then(|v| v.parse::<u64>().ok())
        };
        if let (Some(current), Some(seen)) = (copy.as_ref().and_then(version), version(&new)) {
            if seen < current {
                return Vec::new();
            }
        }
        let old = copy.take().unwrap_or_default();
        let changed = old
            .data
            .iter()
            .filter(|(k, v)| new.data.get(*k) != Some(*v))
            .map(|(k, _)| k.clone())
            .chain(
                new.data
                    .keys()
                    .filter(|k| !old.data.contains_key(*k))
                    .cloned(),
            )
            .collect();
        *copy = Some(new);
        changed
    }

    /// Stores `value` under `key` (`None` removes it) and writes the ConfigMap.
    pub fn set(&self, key: &str, value: Option<&str>) -> Result<(), Error> {
        let mut copy = self.copy.lock().unwrap();
        if copy.is_none() {
            *copy = Some(self.read()?);
        }
        for _ in 0..MAX_CONFLICT_RETRIES {
            let state = copy.as_mut().expect("read above");
            if state.data.get(key).map(String::as_str) == value {
                return Ok(());
            }
            let mut data = state.data.clone();
            match value {
                Some(v) => data.insert(key.to_string(), v.to_string()),
                None => data.remove(key),
            };
            if self.dry_run {
                state.data = data;
                return Ok(());
            }
            match self.write(state.resource_version.as_deref(), &data) {
                Ok(resource_version) => {
                    *state = Copy {
                        resource_version: Some(resource_version),
                        data,
                    };
                    return Ok(());
                }
                // Changed (409 Conflict), created (409 AlreadyExists) or deleted (404 on
                // PUT) behind our back: re-read and apply the change to what is there now.
                Err(Error::Api(status))
                    if status.is_conflict()
                        || (status.is_not_found() && state.resource_version.is_some()) =>
                {
                    *copy = Some(self.read()?);
                }
                Err(err) => return Err(self.explain(err)),
            }
        }
        Err(Error::Config(format!(
            "ConfigMap {}/{STATE_CONFIGMAP} keeps changing under wavelet (409 Conflict {MAX_CONFLICT_RETRIES} times): is another wavelet writing it? Run one leader per --state-namespace",
            self.namespace
        )))
    }

    fn read(&self) -> Result<Copy, Error> {
        match fetch(&self.client, &self.namespace) {
            Ok(Some((resource_version, data))) => Ok(Copy {
                resource_version: Some(resource_version),
                data,
            }),
            Ok(None) => Ok(Copy::default()),
            Err(err) => Err(self.explain(err)),
        }
    }

    fn write(
        &self,
        resource_version: Option<&str>,
        data: &BTreeMap<String, String>,
    ) -> Result<String, Error> {
        store(&self.client, &self.namespace, resource_version, data)
    }

    fn explain(&self, err: Error) -> Error {
        match err {
            Error::Api(status) if status.code == 403 || status.code == 404 => Error::Config(format!(
                "cannot read or write ConfigMap {ns}/{STATE_CONFIGMAP} ({status}): check that namespace {ns} exists and that you (or wavelet) may get, create and update ConfigMaps there, or choose another --state-namespace",
                ns = self.namespace
            )),
            other => other,
        }
    }
}

fn path(namespace: &str) -> String {
    Resource::configmaps().object_path(namespace, STATE_CONFIGMAP)
}

/// The ConfigMap as the API server holds it: its resourceVersion and its data.
pub type Stored = (String, BTreeMap<String, String>);

/// The ConfigMap as the API server holds it now: its resourceVersion and data, or `None`
/// when it does not exist. Both of its writers (this store and delete mode's ledger) read
/// it through here; errors are theirs to explain.
pub fn fetch(client: &Client, namespace: &str) -> Result<Option<Stored>, Error> {
    match client.get::<Wire>(&path(namespace)) {
        Ok(cm) => Ok(Some((
            cm.metadata.resource_version,
            cm.data.unwrap_or_default(),
        ))),
        Err(err) if err.is_not_found() => Ok(None),
        Err(err) => Err(err),
    }
}

/// Creates the ConfigMap with `data` (`resource_version` `None`: it did not exist) or
/// replaces it, only if it is still at `resource_version` (409 Conflict otherwise);
/// returns its new resourceVersion.
pub fn store(
    client: &Client,
    namespace: &str,
    resource_version: Option<&str>,
    data: &BTreeMap<String, String>,
) -> Result<String, Error> {
    let mut body = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": STATE_CONFIGMAP,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/managed-by": "wavelet"},
        },
        "data": data,
    });
    let written: Wire = match resource_version {
        None => client.post(
            &Resource::configmaps().collection_path(Some(namespace)),
            &body,
        )?,
        Some(rv) => {
            body["metadata"]["resourceVersion"] = json!(rv);
            client.put(&path(namespace), &body)?
        }
    };
    Ok(written.metadata.resource_version)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::ConfigKind;

    fn object(rv: &str, pairs: &[(&str, &str)]) -> Option<StateObject> {
        Some(StateObject {
            metadata: serde_json::from_value(serde_json::json!({"resourceVersion": rv})).unwrap(),
            data: Some(
                pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
        })
    }

    #[test]
    fn a_watched_change_reports_the_keys_that_changed_and_an_older_event_is_ignored() {
        let client = Client::from_flags(&crate::config::ConnectionFlags {
            server: Some("http://127.0.0.1:1".into()),
            ..Default::default()
        })
        .unwrap();
        let state = StateConfigMap::new(client, "ns".into(), true);
        assert_eq!(
            state.observed(object("5", &[("pause", "x"), ("a", "1")])),
            ["a", "pause"]
        );
        assert_eq!(state.observed(object("7", &[("a", "2")])), ["a", "pause"]);
        assert!(
            state.observed(object("6", &[("a", "1")])).is_empty(),
            "older than what is known"
        );
        assert_eq!(state.get("a").unwrap().as_deref(), Some("2"));
        assert_eq!(state.observed(None), ["a"]);
        assert_eq!(state.get("a").unwrap(), None);
    }

    #[test]
    fn object_keys_carry_a_prefix_kind_namespace_and_name_and_stay_valid_when_long() {
        assert_eq!(
            object_key(
                "fanout",
                &ConfigKey::new(ConfigKind::ConfigMap, "shop", "app.config")
            ),
            "fanout.configmap.shop.app.config"
        );
        let long = ConfigKey::new(ConfigKind::Secret, &"n".repeat(63), &"a".repeat(253));
        let key = object_key("urgent", &long);
        assert!(key.len() <= MAX_KEY_LEN, "{key}");
        assert!(key.starts_with(&format!("urgent.secret.{}.h-", "n".repeat(63))));
    }
}
