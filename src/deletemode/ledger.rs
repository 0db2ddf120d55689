//! The `wavelet-state` ConfigMap: what delete mode has acted on, kept in the API server so
//! that it survives restarts (never written to users' objects).
//!
//! One data key per delete-mode ConfigMap/Secret ([`state_key`]: `configmap.<ns>.<name>`)
//! whose value is one line ([`Entry`]):
//!
//! ```text
//! <data hash>                                                  acted on (or first seen)
//! <data hash> replacing since=<RFC 3339> pods=<uid>,<uid>,...  replacement in progress
//! ```
//!
//! The second form is written before the first Pod is touched, so a wavelet restarted in
//! the middle of a replacement resumes it for the Pods listed then instead of replacing
//! their successors a second time.
//!
//! The ConfigMap is created (POST) on the first write and updated with a PUT carrying the
//! resourceVersion last read. Writes are serialized inside the process, and only one
//! wavelet (the leader) writes it, so the copy read is kept in memory, but only for one
//! leader term ([`Gate::term`]): another replica may have led and written in between, so
//! a new term starts by reading the ConfigMap again. Every write says which entry its
//! decision was made from; when the entry is not that any more (a 409 Conflict showed
//! another writer, or a new term's read differs), nothing is written and the caller
//! decides again from what is there now ([`Written::Changed`]). A 409 caused by a change
//! to other objects' entries only is retried with the new resourceVersion.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde_json::json;
use sha2::{Digest as _, Sha256};

use crate::client::Client;
use crate::error::Error;
use crate::objects::{ConfigKey, Resource};
use crate::ops::leader::Gate;

/// Name of the ConfigMap.
pub const STATE_CONFIGMAP: &str = "wavelet-state";

/// Longest ConfigMap data key the API accepts.
const MAX_KEY_LEN: usize = 253;

/// Attempts of a write that keeps meeting 409 Conflict.
const MAX_CONFLICT_RETRIES: usize = 5;

/// The data key of one delete-mode object: `configmap.<namespace>.<name>`.
///
/// Unambiguous because a kind and a namespace (a DNS label) contain no `.`. Every
/// character of the result is in `[-._a-z0-9]`, valid in a ConfigMap key. A key longer
/// than the API's 253 characters (a long name in a long namespace) keeps the kind and
/// namespace and replaces the name with `h-` and 32 hex digits of its SHA-256.
pub fn state_key(object: &ConfigKey) -> String {
    let key = format!(
        "{}.{}.{}",
        object.kind.as_str(),
        object.namespace,
        object.name
    );
    if key.len() <= MAX_KEY_LEN {
        return key;
    }
    let digest = crate::hashmode::hash::hex(&Sha256::digest(object.name.as_bytes()));
    format!(
        "{}.{}.h-{}",
        object.kind.as_str(),
        object.namespace,
        &digest[..32]
    )
}

/// What the state says about one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// This data hash has been acted on (or was recorded at first sight).
    Acted { hash: String },
    /// Pods are being replaced for this data hash: the change was observed at `observed`
    /// (Unix seconds) and these Pod UIDs were listed then.
    Replacing {
        hash: String,
        observed: u64,
        pods: Vec<String>,
    },
}

impl Entry {
    /// The data hash the entry is about.
    pub fn hash(&self) -> &str {
        match self {
            Entry::Acted { hash } | Entry::Replacing { hash, .. } => hash,
        }
    }

    /// The one-line form stored in the ConfigMap.
    pub fn encode(&self) -> String {
        match self {
            Entry::Acted { hash } => hash.clone(),
            Entry::Replacing {
                hash,
                observed,
                pods,
            } => {
                format!(
                    "{hash} replacing since={} pods={}",
                    crate::time::rfc3339(*observed),
                    pods.join(",")
                )
            }
        }
    }

    /// Parses [`Entry::encode`]'s form; `None` for anything else.
    pub fn decode(text: &str) -> Option<Entry> {
        let mut words = text.split_whitespace();
        let hash = words.next().filter(|h| is_hash(h))?.to_string();
        match words.next() {
            None => Some(Entry::Acted { hash }),
            Some("replacing") => {
                let observed = crate::time::parse_rfc3339(words.next()?.strip_prefix("since=")?)?;
                let pods = words.next()?.strip_prefix("pods=")?;
                let pods = pods
                    .split(',')
                    .filter(|p| !p.is_empty())
                    .map(String::from)
                    .collect();
                words.next().is_none().then_some(Entry::Replacing {
                    hash,
                    observed,
                    pods,
                })
            }
            Some(_) => None,
        }
    }
}

fn is_hash(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The ConfigMap as last read or written.
#[derive(Default)]
struct Loaded {
    /// `None`: the ConfigMap does not exist yet.
    resource_version: Option<String>,
    data: BTreeMap<String, String>,
    /// The leader term in which it was read: trusted within that term only.
    term: u64,
}

impl Loaded {
    fn entry(&self, key: &str) -> Option<Entry> {
        self.data.get(key).and_then(|text| Entry::decode(text))
    }
}

/// What [`StateStore::set`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum Written {
    /// The entry is stored (or already was).
    Done,
    /// The entry was not what the decision was made from any more (another writer changed
    /// it): nothing written; decide again from [`StateStore::get`].
    Changed,
}

/// The state ConfigMap of one namespace, read at the start of each leader term and kept
/// in memory for the rest of it.
pub struct StateStore {
    client: Client,
    namespace: String,
    /// With `--dry-run` nothing is written; changes are kept in memory only.
    dry_run: bool,
    /// Whose terms bound how long a read is trusted.
    gate: Arc<Gate>,
    /// `None` until the first successful read.
    loaded: Mutex<Option<Loaded>>,
}

#[derive(serde::Deserialize)]
struct ConfigMapWire {
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

impl StateStore {
    pub fn new(client: Client, namespace: String, dry_run: bool, gate: Arc<Gate>) -> StateStore {
        StateStore {
            client,
            namespace,
            dry_run,
            gate,
            loaded: Mutex::new(None),
        }
    }

    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The current leader term (see [`Gate::term`]): what was decided in an earlier one
    /// may rest on a copy of the state another leader changed since.
    pub fn term(&self) -> u64 {
        self.gate.term()
    }

    /// The copy of the ConfigMap for this leader term: read now if there is none yet or it
    /// was read in an earlier term.
    fn current<'a>(&self, loaded: &'a mut Option<Loaded>) -> Result<&'a mut Loaded, Error> {
        let term = self.gate.term();
        match loaded {
            Some(state) if state.term == term => {}
            _ => {
                if loaded.is_some() {
                    log::debug!(
                        "leader term {term}: reading ConfigMap {}/{STATE_CONFIGMAP} again",
                        self.namespace
                    );
                }
                *loaded = Some(self.read(term)?);
            }
        }
        Ok(loaded.as_mut().expect("read above"))
    }

    /// The entry of `object`, as the ConfigMap holds it in this leader term. An unreadable
    /// entry counts as none (the object is then treated as seen for the first time).
    pub fn get(&self, object: &ConfigKey) -> Result<Option<Entry>, Error> {
        let mut loaded = self.loaded.lock().unwrap();
        let state = self.current(&mut loaded)?;
        let key = state_key(object);
        let entry = state.entry(&key);
        if entry.is_none() && state.data.contains_key(&key) {
            log::warn!(
                "{object}: ignoring unreadable entry {key:?} in ConfigMap {}/{STATE_CONFIGMAP}",
                self.namespace
            );
        }
        Ok(entry)
    }

    /// Stores `entry` as the entry of `object` (`None` removes it) and writes the
    /// ConfigMap, if the entry is still `decided_from` (what [`StateStore::get`] returned
    /// when the decision was made); otherwise writes nothing and says
    /// [`Written::Changed`].
    pub fn set(
        &self,
        object: &ConfigKey,
        decided_from: Option<&Entry>,
        entry: Option<&Entry>,
    ) -> Result<Written, Error> {
        self.write_entry(object, Some(decided_from), entry)
    }

    /// Removes the entry of `object` whatever it is (the object opted out).
    pub fn forget(&self, object: &ConfigKey) -> Result<(), Error> {
        match self.write_entry(object, None, None)? {
            Written::Done | Written::Changed => Ok(()),
        }
    }

    /// `decided_from`: `None` writes whatever the entry is now.
    fn write_entry(
        &self,
        object: &ConfigKey,
        decided_from: Option<Option<&Entry>>,
        entry: Option<&Entry>,
    ) -> Result<Written, Error> {
        let key = state_key(object);
        let value = entry.map(Entry::encode);
        let mut loaded = self.loaded.lock().unwrap();
        self.current(&mut loaded)?;
        for _ in 0..MAX_CONFLICT_RETRIES {
            let state = loaded.as_mut().expect("read above");
            if decided_from.is_some_and(|from| state.entry(&key).as_ref() != from) {
                log::warn!(
                    "{object}: its entry in ConfigMap {}/{STATE_CONFIGMAP} was changed by another writer (a leader this replica did not see?); deciding again from what is there now",
                    self.namespace
                );
                return Ok(Written::Changed);
            }
            if state.data.get(&key) == value.as_ref() {
                return Ok(Written::Done);
            }
            let mut data = state.data.clone();
            match &value {
                Some(v) => data.insert(key.clone(), v.clone()),
                None => data.remove(&key),
            };
            if self.dry_run {
                state.data = data;
                return Ok(Written::Done);
            }
            match self.write(state.resource_version.as_deref(), &data) {
                Ok(resource_version) => {
                    state.resource_version = Some(resource_version);
                    state.data = data;
                    return Ok(Written::Done);
                }
                // Changed (409 Conflict), created (409 AlreadyExists) or deleted (404 on
                // PUT) behind our back: re-read; the loop writes only if this object's
                // entry is still what the decision was made from.
                Err(Error::Api(status))
                    if status.is_conflict()
                        || (status.is_not_found() && state.resource_version.is_some()) =>
                {
                    log::debug!(
                        "ConfigMap {}/{STATE_CONFIGMAP} changed meanwhile; re-reading",
                        self.namespace
                    );
                    let term = state.term;
                    *loaded = Some(self.read(term)?);
                }
                Err(err) => return Err(self.explain(err)),
            }
        }
        Err(Error::Config(format!(
            "ConfigMap {}/{STATE_CONFIGMAP} keeps changing under wavelet (409 Conflict {MAX_CONFLICT_RETRIES} times): is another wavelet writing it? Run one leader per --state-namespace",
            self.namespace
        )))
    }

    fn path(&self) -> String {
        Resource::configmaps().object_path(&self.namespace, STATE_CONFIGMAP)
    }

    fn read(&self, term: u64) -> Result<Loaded, Error> {
        match self.client.get::<ConfigMapWire>(&self.path()) {
            Ok(cm) => Ok(Loaded {
                resource_version: Some(cm.metadata.resource_version),
                data: cm.data.unwrap_or_default(),
                term,
            }),
            Err(err) if err.is_not_found() => Ok(Loaded {
                term,
                ..Loaded::default()
            }),
            Err(err) => Err(self.explain(err)),
        }
    }

    /// Creates or updates the ConfigMap; returns its new resourceVersion.
    fn write(
        &self,
        resource_version: Option<&str>,
        data: &BTreeMap<String, String>,
    ) -> Result<String, Error> {
        let mut body = json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": STATE_CONFIGMAP,
                "namespace": self.namespace,
                "labels": {"app.kubernetes.io/managed-by": "wavelet"},
            },
            "data": data,
        });
        let written: ConfigMapWire = match resource_version {
            None => self.client.post(
                &Resource::configmaps().collection_path(Some(&self.namespace)),
                &body,
            )?,
            Some(rv) => {
                body["metadata"]["resourceVersion"] = json!(rv);
                self.client.put(&self.path(), &body)?
            }
        };
        Ok(written.metadata.resource_version)
    }

    /// Adds what to check to errors about the state ConfigMap.
    fn explain(&self, err: Error) -> Error {
        match err {
            Error::Api(status) if status.code == 403 || status.code == 404 => Error::Config(format!(
                "cannot read or write ConfigMap {ns}/{STATE_CONFIGMAP} ({status}): check that namespace {ns} exists and that wavelet may get, create and update ConfigMaps there, or choose another --state-namespace",
                ns = self.namespace
            )),
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::ConfigKind;

    const HASH: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn is_valid_configmap_key(key: &str) -> bool {
        !key.is_empty()
            && key.len() <= MAX_KEY_LEN
            && key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'))
    }

    #[test]
    fn state_keys_name_kind_namespace_and_object() {
        assert_eq!(
            state_key(&ConfigKey::new(ConfigKind::ConfigMap, "shop", "app.config")),
            "configmap.shop.app.config"
        );
        assert_eq!(
            state_key(&ConfigKey::new(ConfigKind::Secret, "shop", "creds")),
            "secret.shop.creds"
        );
    }

    #[test]
    fn state_keys_are_valid_configmap_keys_even_for_the_longest_names() {
        let long = ConfigKey::new(ConfigKind::ConfigMap, &"n".repeat(63), &"a.b".repeat(84));
        let key = state_key(&long);
        assert!(is_valid_configmap_key(&key), "{key}");
        assert!(key.starts_with(&format!("configmap.{}.h-", "n".repeat(63))));
        let other = ConfigKey::new(ConfigKind::ConfigMap, &"n".repeat(63), &"a.c".repeat(84));
        assert_ne!(state_key(&other), key);
    }

    #[test]
    fn entries_round_trip_through_their_one_line_form() {
        let acted = Entry::Acted { hash: HASH.into() };
        assert_eq!(acted.encode(), HASH);
        assert_eq!(Entry::decode(&acted.encode()), Some(acted));
        let replacing = Entry::Replacing {
            hash: HASH.into(),
            observed: 1_795_317_280,
            pods: vec!["u1".into(), "u2".into()],
        };
        assert_eq!(
            replacing.encode(),
            format!("{HASH} replacing since=2026-11-22T03:14:40Z pods=u1,u2")
        );
        assert_eq!(Entry::decode(&replacing.encode()), Some(replacing));
        let none_listed = Entry::Replacing {
            hash: HASH.into(),
            observed: 0,
            pods: vec![],
        };
        assert_eq!(Entry::decode(&none_listed.encode()), Some(none_listed));
    }

    #[test]
    fn unreadable_entries_decode_to_none() {
        for text in [
            "",
            "abc",
            &format!("{HASH} done"),
            &format!("{HASH} replacing since=yesterday pods="),
        ] {
            assert_eq!(Entry::decode(text), None, "{text:?}");
        }
    }
}
