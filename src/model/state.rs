//! wavelet's own ConfigMap `wavelet-state` as a store of one-line entries under keys of its
//! own, for what hash mode keeps in the API server: fan-outs in progress or held, urgent
//! changes let through, and the global pause (`wavelet pause`). Delete mode's ledger keeps
//! its entries in the same ConfigMap under other keys; each writer keeps the other's.
//!
//! `wavelet run` keeps the copy current with a watch of this one ConfigMap (the
//! controller feeds [`StateConfigMap::observed`]), so a `wavelet pause` typed on a laptop
//! is seen within a second; the one-shot commands read it once. Every writer of the
//! ConfigMap (these entries, delete mode's ledger, `wavelet pause` and `resume`) writes it
//! through [`write`], with its one conflict rule: a PUT carrying the resourceVersion last
//! seen (a POST when the ConfigMap does not exist yet); on 409 re-read, and merge the change
//! onto the newer record only if its entry is still what the change was decided from.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

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

/// The ConfigMap as last read or written.
#[derive(Debug, Default, Clone)]
pub struct Snapshot {
    /// `None`: the ConfigMap does not exist.
    pub resource_version: Option<String>,
    pub data: BTreeMap<String, String>,
}

impl Snapshot {
    /// Whether `self` is older than `other`: resourceVersions are opaque, but those of one
    /// object from one etcd grow, so a smaller number is older.
    fn older_than(&self, other: &Snapshot) -> bool {
        let version = |s: &Snapshot| {
            s.resource_version
                .as_deref()
                .and_then(|v| v.parse::<u64>().ok())
        };
        matches!((version(self), version(other)), (Some(a), Some(b)) if a < b)
    }
}

/// One change of one entry, and the entry it was decided from.
#[derive(Debug, Clone, Copy)]
pub struct Edit<'a> {
    pub key: &'a str,
    /// What the entry was when the change was decided (`Some(None)`: absent); `None` for a
    /// change that holds whatever the entry is (the global pause, a removal).
    pub decided_from: Option<Option<&'a str>>,
    /// The new entry; `None` removes it.
    pub value: Option<&'a str>,
}

/// What [`write`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum Written {
    /// The entry is stored (or already was).
    Done,
    /// The entry is no longer what the change was decided from (another writer changed
    /// it): nothing written; the snapshot is the newer record, to decide again from.
    Changed,
}

/// The one way `wavelet-state` is written, by every writer (fan-outs, urgent grants and the
/// pause through [`StateConfigMap`], delete mode's ledger, `wavelet pause` and `resume`).
///
/// The conflict rule: the edit is merged onto `snapshot` (with `tidy`, a writer's own
/// clean-up of the whole map, such as pruning) and PUT with its resourceVersion (POST when
/// the ConfigMap does not exist). On 409 Conflict (or 404 on a PUT: deleted meanwhile) the
/// ConfigMap is read again; if the entry is still what the edit was decided from, the edit
/// is merged onto the newer record and written again, else nothing is written
/// ([`Written::Changed`]). A newer record is never overwritten blindly, and entries of
/// other keys are always kept as the newer record has them. `snapshot` ends as the
/// ConfigMap now is. Errors are the writer's to explain.
pub fn write(
    client: &Client,
    namespace: &str,
    dry_run: bool,
    snapshot: &mut Snapshot,
    edit: Edit<'_>,
    tidy: &mut dyn FnMut(&mut BTreeMap<String, String>),
) -> Result<Written, Error> {
    for _ in 0..MAX_CONFLICT_RETRIES {
        let now = snapshot.data.get(edit.key).map(String::as_str);
        if edit.decided_from.is_some_and(|from| from != now) {
            return Ok(Written::Changed);
        }
        if now == edit.value {
            return Ok(Written::Done);
        }
        let mut data = snapshot.data.clone();
        match edit.value {
            Some(v) => data.insert(edit.key.to_string(), v.to_string()),
            None => data.remove(edit.key),
        };
        tidy(&mut data);
        if dry_run {
            snapshot.data = data;
            return Ok(Written::Done);
        }
        match store(
            client,
            namespace,
            snapshot.resource_version.as_deref(),
            &data,
        ) {
            Ok(resource_version) => {
                *snapshot = Snapshot {
                    resource_version: Some(resource_version),
                    data,
                };
                return Ok(Written::Done);
            }
            // Changed (409 Conflict), created (409 AlreadyExists) or deleted (404 on PUT)
            // behind our back: re-read, and merge onto what is there now if still valid.
            Err(Error::Api(status))
                if status.is_conflict()
                    || (status.is_not_found() && snapshot.resource_version.is_some()) =>
            {
                log::debug!(
                    "ConfigMap {namespace}/{STATE_CONFIGMAP} changed meanwhile; re-reading"
                );
                *snapshot = read(client, namespace)?;
            }
            Err(err) => return Err(err),
        }
    }
    Err(Error::Config(format!(
        "ConfigMap {namespace}/{STATE_CONFIGMAP} keeps changing under wavelet (409 Conflict {MAX_CONFLICT_RETRIES} times): is another wavelet writing it? Run one leader per --state-namespace"
    )))
}

/// The ConfigMap as the API server holds it now (empty when it does not exist).
pub fn read(client: &Client, namespace: &str) -> Result<Snapshot, Error> {
    Ok(match fetch(client, namespace)? {
        Some((resource_version, data)) => Snapshot {
            resource_version: Some(resource_version),
            data,
        },
        None => Snapshot::default(),
    })
}

/// The state ConfigMap of one namespace.
pub struct StateConfigMap {
    client: Client,
    namespace: String,
    /// `--dry-run`: changes are kept in memory only.
    dry_run: bool,
    /// `None` until read or watched. Locked only to look or to swap, never over I/O, so
    /// readers of memory (the probes) never wait for a request.
    copy: Mutex<Option<Snapshot>>,
    /// One write at a time (it holds across the write's requests).
    writing: Mutex<()>,
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
            writing: Mutex::new(()),
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
        self.with_copy(|copy| with_prefix(copy, prefix))
    }

    /// Every entry whose key starts with `prefix`, from memory only: empty while the
    /// ConfigMap was never read nor watched. Never sends a request nor waits for one (what
    /// the probes and `/metrics` read).
    pub fn cached_entries(&self, prefix: &str) -> Vec<(String, String)> {
        self.copy
            .lock()
            .unwrap()
            .as_ref()
            .map(|copy| with_prefix(copy, prefix))
            .unwrap_or_default()
    }

    fn with_copy<T>(&self, f: impl FnOnce(&Snapshot) -> T) -> Result<T, Error> {
        if let Some(copy) = self.copy.lock().unwrap().as_ref() {
            return Ok(f(copy));
        }
        let read = self.read()?;
        let mut copy = self.copy.lock().unwrap();
        self.install(&mut copy, read);
        Ok(f(copy.as_ref().expect("installed above")))
    }

    /// Keeps `fresh` unless what is there is newer (a watch event or another write that
    /// came in meanwhile).
    fn install(&self, copy: &mut Option<Snapshot>, fresh: Snapshot) {
        if !copy.as_ref().is_some_and(|c| fresh.older_than(c)) {
            *copy = Some(fresh);
        }
    }

    /// What the watch reports of the ConfigMap (`None`: deleted); returns the keys whose
    /// entries changed.
    pub fn observed(&self, object: Option<StateObject>) -> Vec<String> {
        let new = match object {
            Some(o) => Snapshot {
                resource_version: Some(o.metadata.resource_version),
                data: o.data.unwrap_or_default(),
            },
            None => Snapshot::default(),
        };
        let mut copy = self.copy.lock().unwrap();
        // An event older than wavelet's own last write (still in flight when the write's
        // answer came) would undo it for a moment.
        if copy.as_ref().is_some_and(|c| new.older_than(c)) {
            return Vec::new();
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

    /// Stores `value` under `key` (`None` removes it), whatever the entry is now.
    pub fn set(&self, key: &str, value: Option<&str>) -> Result<(), Error> {
        match self.set_if(key, None, value)? {
            Written::Done | Written::Changed => Ok(()),
        }
    }

    /// Stores `value` under `key` if the entry is still `decided_from` (`Some(None)`:
    /// absent; `None`: whatever it is), by [`write`]'s rule; [`Written::Changed`] when
    /// another writer changed it (the copy then holds the newer record).
    pub fn set_if(
        &self,
        key: &str,
        decided_from: Option<Option<&str>>,
        value: Option<&str>,
    ) -> Result<Written, Error> {
        let _one_writer = self.writing.lock().unwrap();
        let current = self.copy.lock().unwrap().clone();
        let mut snapshot = match current {
            Some(copy) => copy,
            None => self.read()?,
        };
        let edit = Edit {
            key,
            decided_from,
            value,
        };
        let result = write(
            &self.client,
            &self.namespace,
            self.dry_run,
            &mut snapshot,
            edit,
            &mut |_| {},
        )
        .map_err(|err| self.explain(err));
        // What was read or written is kept, also after a failed write's re-read.
        let mut copy = self.copy.lock().unwrap();
        if self.dry_run {
            *copy = Some(snapshot);
        } else {
            self.install(&mut copy, snapshot);
        }
        result
    }

    fn read(&self) -> Result<Snapshot, Error> {
        read(&self.client, &self.namespace).map_err(|err| self.explain(err))
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

fn with_prefix(copy: &Snapshot, prefix: &str) -> Vec<(String, String)> {
    copy.data
        .range(prefix.to_string()..)
        .take_while(|(k, _)| k.starts_with(prefix))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// One pruning pass at `now` over the keys of the state (every writer's entries of things
/// gone leave on this schedule: delete mode's ledger, fan-outs and urgent grants): remembers since when the object
/// of each entry has been `gone`, forgets that for an object present again (or an entry
/// no longer there), and returns the keys whose object has been gone for `grace` or more.
pub fn prune_pass<'a>(
    keys: impl Iterator<Item = &'a String>,
    absent_since: &mut HashMap<String, Instant>,
    gone: impl Fn(&str) -> bool,
    now: Instant,
    grace: Duration,
) -> Vec<String> {
    let mut seen = HashMap::with_capacity(absent_since.len());
    let mut expired = Vec::new();
    for key in keys {
        if !gone(key) {
            continue;
        }
        let since = absent_since.get(key).copied().unwrap_or(now);
        if now.saturating_duration_since(since) >= grace {
            expired.push(key.clone());
        } else {
            seen.insert(key.clone(), since);
        }
    }
    *absent_since = seen;
    expired
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
        let client = Client::for_tests(&crate::config::ConnectionFlags {
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
