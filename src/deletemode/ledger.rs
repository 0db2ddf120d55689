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
//! their successors a second time. It lists only the Pods the resumed replacement could
//! not tell by their `creationTimestamp` (see `decide::uids_to_record`), at most
//! [`MAX_RECORDED_PODS`], so one entry stays small however many Pods match.
//!
//! **Size.** The API server keeps at most 1 MiB of values in a ConfigMap (and etcd about
//! 1.5 MiB per object), and every write PUTs the whole map, so what no longer needs
//! remembering goes ([`Pruning`]): the entry of an object wavelet has seen gone (not in
//! its cache as a delete-mode ConfigMap/Secret of a kind and namespace it lists) for at
//! least `--resync` leaves the ConfigMap with the next write. The size of keys and values
//! as last read, written or tried ([`StateStore::bytes`]) is exported as a metric, and
//! delete mode warns from [`WARN_STATE_BYTES`] on.
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

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sha2::{Digest as _, Sha256};

use crate::client::Client;
use crate::error::Error;
use crate::model::state;
use crate::objects::{ConfigKey, ConfigKind};
use crate::ops::leader::Gate;

/// Name of the ConfigMap, which safe fan-out's entries share (`model::state`).
pub use crate::model::state::STATE_CONFIGMAP;

/// The most the API server keeps in a ConfigMap: 1 MiB of values (`ValidateConfigMap`).
/// Counted here over keys and values, which keeps the whole object under etcd's limit too.
pub const MAX_STATE_BYTES: usize = 1 << 20;

/// From this size on (80 % of [`MAX_STATE_BYTES`]) delete mode warns that the state fills.
pub const WARN_STATE_BYTES: usize = MAX_STATE_BYTES / 5 * 4;

/// The most Pod UIDs one "replacing" entry lists (about 37 KB).
pub const MAX_RECORDED_PODS: usize = 1000;

/// Longest ConfigMap data key the API accepts.
const MAX_KEY_LEN: usize = 253;

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
    let digest = crate::model::hash::hex(&Sha256::digest(object.name.as_bytes()));
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
    snapshot: state::Snapshot,
    /// The leader term in which it was read: trusted within that term only.
    term: u64,
    /// What this replica saw gone, in this term.
    marks: Marks,
}

/// Since when this replica has seen the object of each entry gone, and when it last
/// looked: a pass costs a look at every cached delete-mode object, so it runs at most four
/// times per grace period, not on every write.
#[derive(Default)]
struct Marks {
    absent_since: HashMap<String, Instant>,
    last_pass: Option<Instant>,
}

impl Loaded {
    fn entry(&self, key: &str) -> Option<Entry> {
        self.snapshot
            .data
            .get(key)
            .and_then(|text| Entry::decode(text))
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

/// The kinds and namespaces whose objects wavelet lists: only there can it see an object
/// gone. Entries elsewhere (a kind it ignores, a namespace out of `--namespaces` or in
/// `--namespaces-to-ignore`, which another installation sharing the state namespace may
/// watch) are never pruned.
#[derive(Debug, Clone, Default)]
pub struct Listed {
    pub kinds: Vec<ConfigKind>,
    /// `--namespaces`; empty: every namespace.
    pub namespaces: Vec<String>,
    /// `--namespaces-to-ignore`.
    pub ignored: Vec<String>,
}

impl Listed {
    /// The kinds wavelet lists: ConfigMaps and Secrets but those it ignores, and
    /// SecretProviderClasses when it follows the CSI driver (`csi`: the flag is on and the
    /// API serves the driver's resources).
    pub fn kinds(ignores: impl Fn(ConfigKind) -> bool, csi: bool) -> Vec<ConfigKind> {
        let mut kinds: Vec<ConfigKind> = [ConfigKind::ConfigMap, ConfigKind::Secret]
            .into_iter()
            .filter(|k| !ignores(*k))
            .collect();
        if csi {
            kinds.push(ConfigKind::SecretProviderClass);
        }
        kinds
    }

    /// Whether the object of `state_key` is of a kind and namespace wavelet lists (a key
    /// it cannot read is not).
    pub fn lists(&self, state_key: &str) -> bool {
        let mut parts = state_key.splitn(3, '.');
        let (Some(kind), Some(namespace), Some(_)) = (parts.next(), parts.next(), parts.next())
        else {
            return false;
        };
        self.kinds.iter().any(|k| k.as_str() == kind)
            && (self.namespaces.is_empty() || self.namespaces.iter().any(|n| n == namespace))
            && !self.ignored.iter().any(|n| n == namespace)
    }
}

/// How entries of objects that are gone leave the state.
pub struct Pruning {
    /// How long an object must have been seen gone before its entry goes (`--resync`:
    /// every watch relists within it, so a deletion seen on a lagging or silent watch
    /// only is confirmed by a complete list; and an object deleted and re-created sooner
    /// keeps its entry).
    pub grace: Duration,
    pub listed: Listed,
    /// The state keys of the delete-mode objects present now; `None` while the cache
    /// cannot tell (a ConfigMap or Secret list is under way).
    pub present: Box<dyn Fn() -> Option<HashSet<String>> + Send + Sync>,
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
    /// `None`: nothing is pruned.
    pruning: Option<Pruning>,
    /// `None` until the first successful read.
    loaded: Mutex<Option<Loaded>>,
    /// Keys and values in bytes, as last read, written or tried.
    bytes: AtomicU64,
}

/// Keys and values of the state's data, in bytes: what [`MAX_STATE_BYTES`] bounds.
pub fn data_bytes(data: &BTreeMap<String, String>) -> usize {
    data.iter().map(|(k, v)| k.len() + v.len()).sum()
}

/// One pruning pass (the rule lives with the state's writer, shared with fan-outs).
pub use crate::model::state::prune_pass;

impl StateStore {
    pub fn new(
        client: Client,
        namespace: String,
        dry_run: bool,
        gate: Arc<Gate>,
        pruning: Option<Pruning>,
    ) -> StateStore {
        StateStore {
            client,
            namespace,
            dry_run,
            gate,
            pruning,
            loaded: Mutex::new(None),
            bytes: AtomicU64::new(0),
        }
    }

    /// Keys and values of the ConfigMap's data in bytes, as last read, written or tried
    /// (0 before the first read: a standby never reads it).
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
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
        if entry.is_none() && state.snapshot.data.contains_key(&key) {
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

    /// `decided_from`: `None` writes whatever the entry is now. Written by
    /// [`state::write`]'s rule: on 409 the entry is compared with what the decision was
    /// made from again, and only then merged onto the newer record.
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
        let state = loaded.as_mut().expect("read above");
        // The entry as the decision saw it, as text: what the ConfigMap holds when that
        // decodes to the same entry (an unreadable entry counts as none, as in `get`).
        let from_text = decided_from.map(|from| {
            let now = state.snapshot.data.get(&key);
            match now {
                Some(text) if Entry::decode(text).as_ref() == from => Some(text.clone()),
                _ => from.map(Entry::encode),
            }
        });
        let edit = state::Edit {
            key: &key,
            decided_from: from_text.as_ref().map(|from| from.as_deref()),
            value: value.as_deref(),
        };
        let marks = &mut state.marks;
        let bytes = &self.bytes;
        let mut tidy = |data: &mut BTreeMap<String, String>| {
            self.prune(data, &key, marks);
            bytes.store(data_bytes(data) as u64, Ordering::Relaxed);
        };
        let written = state::write(
            &self.client,
            &self.namespace,
            self.dry_run,
            &mut state.snapshot,
            edit,
            &mut tidy,
        )
        .map_err(|err| self.explain(err))?;
        if written == state::Written::Changed {
            log::warn!(
                "{object}: its entry in ConfigMap {}/{STATE_CONFIGMAP} was changed by another writer (a leader this replica did not see?); deciding again from what is there now",
                self.namespace
            );
            return Ok(Written::Changed);
        }
        Ok(Written::Done)
    }

    /// Drops from `data` the entries whose object has been gone for the grace period
    /// (never `writing`'s, the entry this write is about).
    fn prune(&self, data: &mut BTreeMap<String, String>, writing: &str, marks: &mut Marks) {
        let Some(pruning) = &self.pruning else {
            return;
        };
        let now = Instant::now();
        if marks
            .last_pass
            .is_some_and(|last| now.saturating_duration_since(last) < pruning.grace / 4)
        {
            return;
        }
        let Some(present) = (pruning.present)() else {
            return;
        };
        marks.last_pass = Some(now);
        let gone =
            |key: &str| key != writing && pruning.listed.lists(key) && !present.contains(key);
        let expired = prune_pass(
            data.keys(),
            &mut marks.absent_since,
            gone,
            now,
            pruning.grace,
        );
        if expired.is_empty() {
            return;
        }
        for key in &expired {
            data.remove(key);
        }
        log::info!(
            "ConfigMap {}/{STATE_CONFIGMAP}: dropping {} entries of objects gone for {:?} or more (e.g. {})",
            self.namespace,
            expired.len(),
            pruning.grace,
            expired[0]
        );
    }

    fn read(&self, term: u64) -> Result<Loaded, Error> {
        let snapshot = state::read(&self.client, &self.namespace).map_err(|e| self.explain(e))?;
        self.bytes
            .store(data_bytes(&snapshot.data) as u64, Ordering::Relaxed);
        Ok(Loaded {
            snapshot,
            term,
            marks: Marks::default(),
        })
    }

    /// Adds what to check to errors about the state ConfigMap.
    fn explain(&self, err: Error) -> Error {
        match err {
            Error::Api(status) if status.code == 403 || status.code == 404 => Error::Config(format!(
                "cannot read or write ConfigMap {ns}/{STATE_CONFIGMAP} ({status}): check that namespace {ns} exists and that wavelet may get, create and update ConfigMaps there, or choose another --state-namespace",
                ns = self.namespace
            )),
            // 422 from validation (values over 1 MiB), 413 or a 500 from etcd (object too
            // large): the state is full.
            Error::Api(status)
                if status.code == 422
                    || status.code == 413
                    || (status.code == 500 && status.message.contains("too large")) =>
            {
                Error::Config(format!(
                    "ConfigMap {ns}/{STATE_CONFIGMAP} is full: the API server refused a write of {bytes} bytes of keys and values ({status}), so delete mode replaces no Pods until it fits. Entries of objects gone for --resync leave it with the next write; if it is full of objects that exist, remove the delete-mode annotation where it is not needed, or give some namespaces a wavelet of their own with its own --state-namespace",
                    ns = self.namespace,
                    bytes = self.bytes()
                ))
            }
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

    fn keys(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn an_entry_goes_only_once_its_object_was_seen_gone_for_the_grace_period() {
        let t0 = Instant::now();
        let grace = Duration::from_secs(10);
        let data = keys(&["gone", "here"]);
        let mut since = HashMap::new();
        let gone = |k: &str| k == "gone";
        assert!(prune_pass(data.iter(), &mut since, gone, t0, grace).is_empty());
        let almost = t0 + grace - Duration::from_millis(1);
        assert!(prune_pass(data.iter(), &mut since, gone, almost, grace).is_empty());
        assert_eq!(
            prune_pass(data.iter(), &mut since, gone, t0 + grace, grace),
            ["gone"]
        );
        assert!(!since.contains_key("here"));
    }

    #[test]
    fn an_object_seen_again_starts_its_grace_period_over() {
        let t0 = Instant::now();
        let grace = Duration::from_secs(10);
        let data = keys(&["flaky"]);
        let mut since = HashMap::new();
        prune_pass(data.iter(), &mut since, |_| true, t0, grace);
        prune_pass(data.iter(), &mut since, |_| false, t0 + grace / 2, grace);
        assert!(since.is_empty());
        let later = t0 + grace + Duration::from_secs(1);
        assert!(prune_pass(data.iter(), &mut since, |_| true, later, grace).is_empty());
        assert_eq!(
            prune_pass(data.iter(), &mut since, |_| true, later + grace, grace),
            ["flaky"]
        );
    }

    #[test]
    fn only_objects_of_kinds_and_namespaces_wavelet_lists_can_be_gone() {
        let listed = Listed {
            kinds: vec![ConfigKind::ConfigMap],
            namespaces: vec!["shop".into(), "kube-system".into()],
            ignored: vec!["kube-system".into()],
        };
        assert!(listed.lists("configmap.shop.app.config"));
        assert!(listed.lists("configmap.shop.h-0123456789abcdef0123456789abcdef"));
        assert!(!listed.lists("secret.shop.creds"), "a kind it ignores");
        assert!(!listed.lists("configmap.other.app"), "out of --namespaces");
        assert!(!listed.lists("configmap.kube-system.app"), "ignored");
        assert!(!listed.lists("something-else"), "not a key wavelet writes");
        let everywhere = Listed {
            kinds: vec![ConfigKind::ConfigMap, ConfigKind::Secret],
            ..Listed::default()
        };
        assert!(everywhere.lists("secret.any.creds"));
    }

    #[test]
    fn secret_provider_classes_are_listed_when_the_csi_driver_is_followed() {
        let with_csi = Listed {
            kinds: Listed::kinds(|k| k == ConfigKind::Secret, true),
            ..Listed::default()
        };
        assert!(with_csi.lists("secretproviderclass.apps.vault"));
        assert!(with_csi.lists("configmap.apps.app"));
        assert!(!with_csi.lists("secret.apps.creds"), "ignored");
        let without = Listed {
            kinds: Listed::kinds(|_| false, false),
            ..Listed::default()
        };
        assert!(!without.lists("secretproviderclass.apps.vault"));
    }

    #[test]
    fn the_size_counts_keys_and_values() {
        let data = BTreeMap::from([("ab".to_string(), "cde".to_string())]);
        assert_eq!(data_bytes(&data), 5);
        assert_eq!(WARN_STATE_BYTES, 838_860);
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
