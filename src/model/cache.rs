//! wavelet's own cache: what decisions need and no more, plus the reverse index from a
//! ConfigMap/Secret/SecretProviderClass to the workloads that reference it.
//!
//! Writers: the watch thread of each kind, and for Secrets also the fetchers, which read
//! the data of the Secrets that matter (Secrets are watched as metadata only). Many
//! readers (reconcile workers). Entries are immutable `Arc`s: a reader keeps a consistent
//! snapshot while a writer swaps in a new one. Secret values never get here, only per-key
//! digests. A SecretProviderClass's entry holds its metadata, and as its data the versions
//! all of its Pods mounted ([`Mounts`], from their pod statuses); a workload counts the
//! versions its own Pods mounted ([`Cache::class_view`]).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};

use crate::annotations;
use crate::annotations::Annotations;
use crate::model::config_table::{ConfigTable, Keyed};
use crate::model::mounts::{Held, Mounts, View};
use crate::model::owners::{OwnedKind, Owners};
use crate::model::reverse_index::{Entries, ReverseIndex};
use crate::model::workload::{Gates, WorkloadEntry};
use crate::objects::compact::{ResourceVersion, Uid};
use crate::objects::{
    ConfigKey, ConfigKind, ConfigObject, KeyDigest, MountedObject, ObjectMeta, Resource,
    WorkloadKey,
};
use crate::watch::queue::ReleaseWhenEmpty as _;
use crate::watch::scope::NamespaceScope;

/// A ConfigMap or Secret as wavelet remembers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigEntry {
    /// Whose entry it is: the cache's table files it under this ([`ConfigTable`]).
    key: ConfigKey,
    pub uid: Uid,
    pub resource_version: ResourceVersion,
    /// The per-key digests last read, with the resourceVersion they were read at; `None`
    /// until read (a Secret's data is fetched only when something references it).
    data: Option<ConfigData>,
    /// The delete-mode annotations, when the object carries a selector.
    delete_mode: Option<Box<DeleteModeAnnotations>>,
    /// Reloader's object annotations: `reloader.stakater.com/ignore: "true"` (its data
    /// never counts) and `reloader.stakater.com/match: "true"` (it counts for `search`).
    pub reloader_ignore: bool,
    pub reloader_match: bool,
    /// A Helm release record (a Secret of type `helm.sh/release.v1`): which of the two
    /// Secret watches lists it (controller: `SecretPart`).
    pub helm_release: bool,
    /// Its safe fan-out annotations; `None` for the many objects without any.
    gates: Option<Box<ConfigGates>>,
}

/// The fan-out annotations of a ConfigMap or Secret (book: Rolling a shared change
/// safely); values are validated where they are used, so a bad one is a Warning there.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigGates {
    /// `wavelet.dev/pause: "true"`.
    pub pause: bool,
    /// `wavelet.dev/fan-out`.
    pub fan_out: Option<Box<str>>,
    /// `wavelet.dev/wave-size`.
    pub wave_size: Option<Box<str>>,
    /// `wavelet.dev/urgent`.
    pub urgent: Option<Box<str>>,
}

impl ConfigGates {
    fn from(annotations: &Annotations) -> Option<Box<ConfigGates>> {
        let text = |key| annotations.get(key).map(Box::from);
        let gates = ConfigGates {
            pause: annotations.get(annotations::WAVELET_PAUSE) == Some("true"),
            fan_out: text(annotations::WAVELET_FAN_OUT),
            wave_size: text(annotations::WAVELET_WAVE_SIZE),
            urgent: text(annotations::WAVELET_URGENT),
        };
        (gates != ConfigGates::default()).then(|| Box::new(gates))
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct ConfigData {
    resource_version: ResourceVersion,
    /// Sorted by key.
    digests: Box<[KeyDigest]>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct DeleteModeAnnotations {
    selector: Box<str>,
    strategy: Option<Box<str>>,
}

impl DeleteModeAnnotations {
    fn from(annotations: &Annotations) -> Option<Box<DeleteModeAnnotations>> {
        let selector = annotations::pod_delete_match(annotations)?;
        Some(Box::new(DeleteModeAnnotations {
            selector: selector.into(),
            strategy: annotations
                .get(annotations::WAVELET_POD_DELETE_STRATEGY)
                .map(Box::from),
        }))
    }
}

/// Whose entry it is: the cache's table files it under this.
impl Keyed for ConfigEntry {
    fn key(&self) -> &ConfigKey {
        &self.key
    }
}

impl ConfigEntry {
    /// The entry of `key`, for `metadata` with `digests` read at its resourceVersion (or
    /// none yet).
    pub fn new(
        key: ConfigKey,
        metadata: &ObjectMeta,
        digests: Option<Box<[KeyDigest]>>,
    ) -> ConfigEntry {
        let resource_version = ResourceVersion::new(&metadata.resource_version);
        ConfigEntry {
            key,
            uid: Uid::new(&metadata.uid),
            data: digests.map(|digests| ConfigData {
                resource_version: resource_version.clone(),
                digests,
            }),
            resource_version,
            delete_mode: DeleteModeAnnotations::from(&metadata.annotations),
            reloader_ignore: metadata.annotations.get(annotations::RELOADER_IGNORE) == Some("true"),
            reloader_match: metadata.annotations.get(annotations::RELOADER_MATCH) == Some("true"),
            helm_release: false,
            gates: ConfigGates::from(&metadata.annotations),
        }
    }

    /// Its fan-out annotations (all unset when it has none).
    pub fn gates(&self) -> &ConfigGates {
        static NONE: ConfigGates = ConfigGates {
            pause: false,
            fan_out: None,
            wave_size: None,
            urgent: None,
        };
        self.gates.as_deref().unwrap_or(&NONE)
    }

    /// Its fan-out annotations differ (what is pending on it may roll now).
    pub fn gates_differ(&self, other: &ConfigEntry) -> bool {
        self.gates != other.gates
    }

    /// The SecretProviderClass `key` as a set of Pods mounted it: `class`'s identity and
    /// annotations (`None`: the class object is not cached), with `objects` as its data.
    pub fn mounted(
        key: &ConfigKey,
        class: Option<&ConfigEntry>,
        objects: Box<[KeyDigest]>,
    ) -> ConfigEntry {
        let mut entry = class.cloned().unwrap_or_else(|| ConfigEntry {
            key: key.clone(),
            uid: Uid::new(""),
            resource_version: ResourceVersion::new(""),
            data: None,
            delete_mode: None,
            reloader_ignore: false,
            reloader_match: false,
            helm_release: false,
            gates: None,
        });
        entry.data = Some(ConfigData {
            resource_version: entry.resource_version.clone(),
            digests: objects,
        });
        entry
    }

    /// Reloader's `ignore`/`match` annotations differ (who counts it may change).
    pub fn counting_differs(&self, other: &ConfigEntry) -> bool {
        (self.reloader_ignore, self.reloader_match) != (other.reloader_ignore, other.reloader_match)
    }

    /// The digests of the current version, sorted by key; `None` while they are not read
    /// yet (then nothing may be decided on this object's data).
    pub fn digests(&self) -> Option<&[KeyDigest]> {
        self.data
            .as_ref()
            .filter(|d| d.resource_version == self.resource_version)
            .map(|d| &*d.digests)
    }

    /// The digests are those of the current version.
    pub fn is_current(&self) -> bool {
        self.digests().is_some()
    }

    /// The digests last read, possibly of an older version.
    fn last_digests(&self) -> Option<&[KeyDigest]> {
        self.data.as_ref().map(|d| &*d.digests)
    }

    /// The delete-mode selector annotation, when set (either key).
    pub fn pod_delete_match(&self) -> Option<&str> {
        self.delete_mode.as_ref().map(|d| &*d.selector)
    }

    /// The delete-mode strategy annotation, when set with a selector.
    pub fn pod_delete_strategy(&self) -> Option<&str> {
        self.delete_mode
            .as_ref()
            .and_then(|d| d.strategy.as_deref())
    }

    /// Whether the data last read differs from `digests` (or none was read).
    pub fn data_differs(&self, digests: &[KeyDigest]) -> bool {
        self.last_digests() != Some(digests)
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

/// What a pod status changed: the workloads whose versions of the class may have moved, and
/// whether a delete-mode class's own (every Pod's) versions did.
#[derive(Debug, Default)]
pub struct MountChange {
    pub workloads: Vec<WorkloadKey>,
    pub class_changed: bool,
}

#[derive(Default)]
struct Workloads {
    entries: Entries,
    /// ConfigMap/Secret/class → the workloads that reference it.
    index: ReverseIndex,
    /// Namespace → the workloads with reload lists there (they count objects by name).
    by_pattern: HashMap<Arc<str>, Vec<WorkloadKey>>,
}

impl Workloads {
    /// The workloads whose references include `key`.
    fn referencing<'a>(&'a self, key: &'a ConfigKey) -> impl Iterator<Item = &'a WorkloadKey> {
        self.index.referencing(key, &self.entries)
    }

    /// `key` as a workload's reference holds it: sharing its strings, a copy of the name
    /// is not made again.
    fn shared_key(&self, key: &ConfigKey) -> Option<ConfigKey> {
        let workload = self.referencing(key).next()?;
        self.entries[workload]
            .references
            .iter()
            .find(|r| r.config == *key)
            .map(|r| r.config.clone())
    }

    /// Some workload references `key`, or counts it by a reload list.
    fn reference(&self, key: &ConfigKey) -> bool {
        self.referencing(key).next().is_some() || !self.by_name(key).is_empty()
    }

    /// The workloads that count `key` by a reload list.
    fn by_name(&self, key: &ConfigKey) -> Vec<WorkloadKey> {
        self.by_pattern
            .get(&key.namespace)
            .into_iter()
            .flatten()
            .filter(|k| self.entries.get(*k).is_some_and(|e| e.counts_by_name(key)))
            .cloned()
            .collect()
    }
}

fn sort_dedup(keys: &mut Vec<WorkloadKey>) {
    keys.sort_unstable_by(|a, b| {
        (&a.namespace, &a.name, &a.resource.group, &a.resource.plural).cmp(&(
            &b.namespace,
            &b.name,
            &b.resource.group,
            &b.resource.plural,
        ))
    });
    keys.dedup();
}

/// The cache shared by watch threads and workers.
#[derive(Default)]
pub struct Cache {
    configs: RwLock<ConfigTable<ConfigEntry>>,
    /// Secrets read and found not to exist, until a watch event says otherwise. Secrets
    /// that nothing uses are not kept (see the Router), so for a Secret "not cached" alone
    /// means "not known"; these are the ones known to be absent. Only referenced ones
    /// (by name or by a reload-list pattern): a record goes with the last workload that
    /// references it, so namespaces created and deleted do not leave theirs behind.
    absent_secrets: Mutex<HashSet<ConfigKey>>,
    /// Namespaces whose Secrets are being listed for a new reload-list pattern: the
    /// workloads there wait for the listing before they count by name.
    secret_listings: Mutex<HashSet<Arc<str>>>,
    /// The ConfigMap/Secret watches (by id) whose list is under way: until it completes
    /// their part of the cache may be behind the server (a list failing during an outage
    /// keeps it so), and a new workload is not adopted from it.
    config_relists: Mutex<HashSet<u64>>,
    workloads: RwLock<Workloads>,
    /// What the Secrets Store CSI driver's pod statuses say each Pod mounted. Locked
    /// before `configs` and `workloads` when held together.
    mounts: RwLock<Mounts>,
    /// What counted of a class for a workload's Pods (`None`: every Pod's, for delete
    /// mode), so a version moves only on a rotation ([`crate::model::mounts`]). Locked
    /// after `mounts`.
    held: Mutex<HashMap<(Option<WorkloadKey>, ConfigKey), Held>>,
    /// Which Pods run and whose they are: only those vote on what a workload mounted
    /// ([`crate::model::owners`]). Locked after `mounts`.
    owners: RwLock<Owners>,
    /// The namespaces wavelet acts in (`--namespace-selector`); every one by default.
    scope: NamespaceScope,
    /// The fan-out annotations of Namespaces that have any (pause, restart window).
    namespace_gates: RwLock<HashMap<Arc<str>, Arc<Gates>>>,
}

impl Cache {
    pub fn new() -> Cache {
        Cache::default()
    }

    /// A cache whose namespaces in scope the Namespace watch reports.
    pub fn with_scope(scope: NamespaceScope) -> Cache {
        Cache {
            scope,
            ..Cache::default()
        }
    }

    pub fn scope(&self) -> &NamespaceScope {
        &self.scope
    }

    /// Whether wavelet acts on objects of this namespace.
    pub fn in_scope(&self, namespace: &str) -> bool {
        self.scope.contains(namespace)
    }

    /// The delete-mode ConfigMaps/Secrets of a namespace.
    pub fn delete_mode_configs_in(&self, namespace: &str) -> Vec<ConfigKey> {
        self.configs
            .read()
            .unwrap()
            .entries()
            .filter(|e| &*e.key().namespace == namespace && e.pod_delete_match().is_some())
            .map(|e| e.key().clone())
            .collect()
    }

    /// The cached workloads of a namespace (a namespace entering the scope wakes them).
    pub fn workloads_in(&self, namespace: &str) -> Vec<WorkloadKey> {
        self.workloads
            .read()
            .unwrap()
            .entries
            .keys()
            .filter(|k| &*k.namespace == namespace)
            .cloned()
            .collect()
    }

    /// The fan-out annotations of `namespace` (none when it has none, or is not watched).
    pub fn namespace_gates(&self, namespace: &str) -> Option<Arc<Gates>> {
        self.namespace_gates.read().unwrap().get(namespace).cloned()
    }

    /// Stores a Namespace's fan-out annotations (`None`: gone); says whether they changed.
    pub fn set_namespace_gates(&self, namespace: &str, gates: Option<Gates>) -> bool {
        let gates = gates.filter(|g| !g.is_empty());
        let mut all = self.namespace_gates.write().unwrap();
        if all.get(namespace).map(|g| &**g) == gates.as_ref() {
            return false;
        }
        match gates {
            Some(gates) => {
                all.insert(crate::objects::intern::shared(namespace), Arc::new(gates));
            }
            None => {
                all.remove(namespace);
            }
        }
        true
    }

    /// Every opted-in workload (a global pause lifted wakes them all).
    pub fn workload_keys(&self) -> Vec<WorkloadKey> {
        self.workloads
            .read()
            .unwrap()
            .entries
            .keys()
            .cloned()
            .collect()
    }

    /// The key to cache an object under, sharing the strings of a workload's reference to
    /// it when there is one: one copy of each name, whichever came first (see
    /// [`Cache::sharing_names`] for the other way). An object already cached keeps the key
    /// it has (which shares them already), so most events do not look in the reverse
    /// index. Takes each lock in turn: never called while holding the configs'.
    fn config_key(&self, kind: ConfigKind, metadata: &ObjectMeta) -> ConfigKey {
        let key = ConfigKey::new(kind, &metadata.namespace, &metadata.name);
        if let Some(cached) = self.configs.read().unwrap().get(&key) {
            return cached.key().clone();
        }
        self.workloads
            .read()
            .unwrap()
            .shared_key(&key)
            .unwrap_or(key)
    }

    /// `entry` with the key of each object it references sharing the strings of the
    /// cached object's key, when the object is cached.
    fn sharing_names(&self, mut entry: WorkloadEntry) -> WorkloadEntry {
        let configs = self.configs.read().unwrap();
        for reference in &mut entry.references {
            if let Some(cached) = configs.get(&reference.config) {
                reference.config = cached.key().clone();
            }
        }
        entry
    }

    pub fn config(&self, key: &ConfigKey) -> Option<Arc<ConfigEntry>> {
        self.configs.read().unwrap().get(key).cloned()
    }

    /// Stores a whole ConfigMap/Secret (its digests read); says whether its data changed.
    pub fn upsert_config(&self, kind: ConfigKind, obj: ConfigObject) -> (ConfigKey, ConfigChange) {
        let key = self.config_key(kind, &obj.metadata);
        let mut entry = ConfigEntry::new(
            key.clone(),
            &obj.metadata,
            Some(obj.data.unwrap_or_default()),
        );
        entry.helm_release = obj.helm_release;
        self.forget_absent(&key);
        let mut configs = self.configs.write().unwrap();
        let change = match configs.get(&key) {
            None => ConfigChange::Created,
            Some(old) if **old == entry => return (key, ConfigChange::Unchanged),
            Some(old) if old.uid != entry.uid || old.digests() != entry.digests() => {
                ConfigChange::DataChanged
            }
            Some(_) => ConfigChange::MetadataOnly,
        };
        configs.insert(Arc::new(entry));
        (key, change)
    }

    /// Stores what a metadata-only watch says of a Secret: its identity, version and
    /// annotations. The digests last read are kept for comparison when `keep_data` and the
    /// object is the same one (same uid); they count again only once read at this version.
    /// `helm_release`: whether it is a Helm release record, when the list or watch says
    /// (`None`: as last known). Returns the entry before and after.
    pub fn upsert_metadata(
        &self,
        kind: ConfigKind,
        metadata: &ObjectMeta,
        keep_data: bool,
        helm_release: Option<bool>,
    ) -> (ConfigKey, Option<Arc<ConfigEntry>>, Arc<ConfigEntry>) {
        let key = self.config_key(kind, metadata);
        let mut entry = ConfigEntry::new(key.clone(), metadata, None);
        self.forget_absent(&key);
        let mut configs = self.configs.write().unwrap();
        let before = configs.get(&key).cloned();
        entry.helm_release = helm_release
            .or_else(|| before.as_ref().map(|old| old.helm_release))
            .unwrap_or(false);
        if let Some(old) = &before {
            if keep_data && old.uid == entry.uid {
                entry.data = old.data.clone();
            }
            if **old == entry {
                return (key, before.clone(), Arc::clone(old));
            }
        }
        let after = Arc::new(entry);
        configs.insert(Arc::clone(&after));
        (key, before, after)
    }

    /// Stores the digests of a fetched Secret, unless the cached object is another one
    /// (deleted, or re-created with another uid) by now. `version_when_asked` is the
    /// cached resourceVersion when the fetch began (`None`: the Secret was not cached, and
    /// is stored as read unless a watch event stored it meanwhile): if no newer version
    /// was seen meanwhile, the fetched version becomes the cached one. Returns the entry
    /// after, or `None` when the result was dropped.
    pub fn store_fetched(
        &self,
        key: &ConfigKey,
        version_when_asked: Option<&ResourceVersion>,
        fetched: ConfigObject,
    ) -> Option<Arc<ConfigEntry>> {
        let mut fetched_entry =
            ConfigEntry::new(key.clone(), &fetched.metadata, Some(fetched.data?));
        fetched_entry.helm_release = fetched.helm_release;
        let mut configs = self.configs.write().unwrap();
        let Some(old) = configs.get(key) else {
            if version_when_asked.is_some() {
                return None; // deleted meanwhile
            }
            self.forget_absent(key);
            let after = Arc::new(fetched_entry);
            configs.insert(Arc::clone(&after));
            return Some(after);
        };
        if old.uid != fetched_entry.uid {
            return None;
        }
        let mut entry = (**old).clone();
        entry.data = fetched_entry.data;
        entry.helm_release = fetched_entry.helm_release;
        if version_when_asked == Some(&old.resource_version) {
            entry.resource_version = fetched_entry.resource_version;
            entry.delete_mode = fetched_entry.delete_mode;
        }
        let after = Arc::new(entry);
        configs.insert(Arc::clone(&after));
        Some(after)
    }

    /// Records that the Secret `key` does not exist (a read found none, or the watch saw
    /// it deleted), unless it is cached or no workload references it any more. Decided
    /// under the workloads' lock, which [`Cache::upsert_workload`] holds when it drops the
    /// records of what a workload no longer references: a record is never left behind by
    /// a workload that went meanwhile.
    pub fn mark_absent(&self, key: &ConfigKey) {
        let workloads = self.workloads.read().unwrap();
        if !workloads.reference(key) || self.configs.read().unwrap().contains_key(key) {
            return;
        }
        self.absent_secrets.lock().unwrap().insert(key.clone());
    }

    /// The Secret `key` is known not to exist.
    pub fn is_known_absent(&self, key: &ConfigKey) -> bool {
        self.absent_secrets.lock().unwrap().contains(key)
    }

    /// How many Secrets are known not to exist (for metrics).
    pub fn absent_secrets_known(&self) -> usize {
        self.absent_secrets.lock().unwrap().len()
    }

    /// The ConfigMap/Secret watch `watch` began (`true`) or completed (`false`) a list.
    pub fn config_relisting(&self, watch: u64, listing: bool) {
        let mut relists = self.config_relists.lock().unwrap();
        if listing {
            relists.insert(watch);
        } else {
            relists.remove(&watch);
        }
    }

    /// Whether some ConfigMap/Secret watch is listing (its objects may be out of date).
    pub fn configs_relisting(&self) -> bool {
        !self.config_relists.lock().unwrap().is_empty()
    }

    /// The Secrets of `namespace` are to be listed (a new reload-list pattern there).
    pub fn begin_secret_listing(&self, namespace: Arc<str>) {
        self.secret_listings.lock().unwrap().insert(namespace);
    }

    /// The Secrets of `namespace` were listed; returns the workloads there that count
    /// objects by name, which waited for it.
    pub fn end_secret_listing(&self, namespace: &str) -> Vec<WorkloadKey> {
        self.secret_listings.lock().unwrap().remove(namespace);
        let workloads = self.workloads.read().unwrap();
        workloads
            .by_pattern
            .get(namespace)
            .cloned()
            .unwrap_or_default()
    }

    /// Whether the Secrets of `namespace` are still to be listed.
    pub fn is_listing_secrets(&self, namespace: &str) -> bool {
        self.secret_listings.lock().unwrap().contains(namespace)
    }

    fn forget_absent(&self, key: &ConfigKey) {
        let mut absent = self.absent_secrets.lock().unwrap();
        if !absent.is_empty() {
            absent.remove(key);
        }
    }

    /// Stores a SecretProviderClass's metadata; for one with a delete-mode selector, with
    /// the versions all its Pods mounted as its data (none while no Pod has a pod status
    /// for it): delete mode reads them. (Other classes' versions are asked for when
    /// needed, [`Cache::class_view`]: one copy per class less.) Returns the entry before
    /// and after.
    pub fn upsert_class(
        &self,
        metadata: &ObjectMeta,
    ) -> (ConfigKey, Option<Arc<ConfigEntry>>, Arc<ConfigEntry>) {
        let key = ConfigKey::new(
            ConfigKind::SecretProviderClass,
            &metadata.namespace,
            &metadata.name,
        );
        let mounts = self.mounts.read().unwrap();
        let objects = annotations::pod_delete_match(&metadata.annotations)
            .and_then(|_| self.held_view(&mounts, &key, None, |_| true))
            .map(|v| v.objects);
        let entry = ConfigEntry::new(key.clone(), metadata, objects);
        let mut configs = self.configs.write().unwrap();
        let before = configs.get(&key).cloned();
        if let Some(old) = &before {
            if **old == entry {
                return (key, before.clone(), Arc::clone(old));
            }
        }
        let after = Arc::new(entry);
        configs.insert(Arc::clone(&after));
        (key, before, after)
    }

    /// Records what `pod` mounted of `class` (`None`: its pod status is gone; `incarnation`:
    /// which pod status of that name, a digest of its uid; `listed`: the relist it came
    /// with), and says what that may have moved: the workloads that mount
    /// the class, when `pod` is one of their Pods, and those that count it by name (all
    /// Pods count for them), each then reconciled to find out (see below); and, for a
    /// delete-mode class, whether the versions all its Pods mounted moved, which its cached
    /// entry then holds. `before_visible` gets the workloads while no reader can see the
    /// change yet (their debounce windows open before the new versions can be hashed).
    ///
    /// A workload's versions are not compared before and after here: that would cost a
    /// pass over every Pod of the class for each pod status (25 million name matches for
    /// the initial list of a DaemonSet of 5,000 Pods), where a reconcile makes one pass per
    /// debounce window, and finds the hash unchanged when the majority did not move.
    #[allow(clippy::too_many_arguments)]
    pub fn set_mount(
        &self,
        class: &ConfigKey,
        pod: &str,
        objects: Option<&[MountedObject]>,
        incarnation: u64,
        listed: Option<u32>,
        before_visible: impl FnOnce(&[WorkloadKey]),
    ) -> MountChange {
        let mut mounts = self.mounts.write().unwrap();
        // A class's key shares its strings with the reverse index when a workload
        // references it (one copy of the name less per class).
        let shared = self.workloads.read().unwrap().shared_key(class);
        if !mounts.set(
            shared.as_ref().unwrap_or(class),
            pod,
            objects,
            incarnation,
            listed,
        ) {
            return MountChange::default();
        }
        // Who may see a change: a workload mounting the class sees its own Pods' statuses,
        // one counting it by name sees every Pod's.
        let workloads: Vec<WorkloadKey> = self
            .dependents(class)
            .into_iter()
            .filter(|key| {
                self.workload(key).is_some_and(|entry| {
                    !entry.references.iter().any(|r| r.config == *class)
                        || self.is_running_pod_of(key, pod)
                })
            })
            .collect();
        before_visible(&workloads);
        let mut configs = self.configs.write().unwrap();
        let class_changed = match configs
            .get(class)
            .filter(|e| e.pod_delete_match().is_some())
        {
            Some(old) => {
                let now = self
                    .held_view(&mounts, class, None, |_| true)
                    .map(|v| v.objects);
                let changed = old.data.as_ref().map(|d| &d.digests) != now.as_ref();
                if changed {
                    let mut entry = (**old).clone();
                    entry.data = now.map(|digests| ConfigData {
                        resource_version: entry.resource_version.clone(),
                        digests,
                    });
                    configs.insert(Arc::new(entry));
                }
                changed
            }
            None => false,
        };
        MountChange {
            workloads,
            class_changed,
        }
    }

    /// The versions of `class` that count for the Pods `selects` picks, those of workload
    /// `holder` (`None`: every Pod, delete mode's), given what counted for them before
    /// (see [`crate::model::mounts`]); `None` when none of them has a pod status for it.
    pub fn class_view(
        &self,
        class: &ConfigKey,
        holder: Option<&WorkloadKey>,
        selects: impl Fn(&str) -> bool,
    ) -> Option<View> {
        let mounts = self.mounts.read().unwrap();
        self.held_view(&mounts, class, holder, selects)
    }

    /// [`Mounts::view`] with what is held for (`holder`, `class`), which it then holds.
    fn held_view(
        &self,
        mounts: &Mounts,
        class: &ConfigKey,
        holder: Option<&WorkloadKey>,
        selects: impl Fn(&str) -> bool,
    ) -> Option<View> {
        let key = (holder.cloned(), class.clone());
        let mut held = self.held.lock().unwrap();
        let view = mounts.view(class, selects, held.get(&key));
        // Kept while no Pod reports (all replaced at once, scaled to zero): the next ones
        // are new Pods, which start with what they mount.
        if let Some(view) = &view {
            held.insert(key, view.held.clone());
        }
        view
    }

    /// Records a running Pod or a ReplicaSet with its controller (`present: false`: gone,
    /// terminating, or no longer running); returns the workloads whose votes that may
    /// move: for a Pod, those of the classes it has a pod status for that it was or is a
    /// Pod of, or that count every Pod; for a ReplicaSet, those of every class of its
    /// namespace (it may make Pods a Deployment's).
    pub fn set_owned(
        &self,
        kind: OwnedKind,
        namespace: &str,
        name: &str,
        controller: Option<(&str, &str)>,
        present: bool,
    ) -> Vec<WorkloadKey> {
        let pod = (kind == OwnedKind::Pod).then_some(name);
        let classes = self.mounts.read().unwrap().classes_of(namespace, pod);
        // For a Pod: the workloads it was or is a Pod of, and those counting every Pod
        // (a class named in a reload list).
        let candidates: Vec<(WorkloadKey, bool)> = match pod {
            Some(pod) => classes
                .iter()
                .flat_map(|class| {
                    self.dependents(class).into_iter().filter_map(|key| {
                        let entry = self.workload(&key)?;
                        let every_pod = !entry.references.iter().any(|r| r.config == *class);
                        let was = every_pod || self.is_running_pod_of(&key, pod);
                        Some((key, was))
                    })
                })
                .collect(),
            None => Vec::new(),
        };
        let changed = self
            .owners
            .write()
            .unwrap()
            .set(kind, namespace, name, controller, present);
        if !changed {
            return Vec::new();
        }
        match pod {
            Some(pod) => {
                let mut out: Vec<WorkloadKey> = candidates
                    .into_iter()
                    .filter(|(key, was)| *was || self.is_running_pod_of(key, pod))
                    .map(|(key, _)| key)
                    .collect();
                sort_dedup(&mut out);
                out
            }
            None => self.dependents_of_classes(&classes),
        }
    }

    /// Forgets the Pods or ReplicaSets of one namespace or all that a relist did not
    /// return; returns the workloads whose votes that may move.
    pub fn owned_not_listed(
        &self,
        kind: OwnedKind,
        namespace: Option<&str>,
        listed: &std::collections::HashSet<(Box<str>, u64)>,
    ) -> Vec<WorkloadKey> {
        let lost = self
            .owners
            .write()
            .unwrap()
            .drop_not_listed(kind, namespace, listed);
        let mounts = self.mounts.read().unwrap();
        let classes: Vec<ConfigKey> = lost
            .iter()
            .flat_map(|ns| mounts.classes_of(ns, None))
            .collect();
        drop(mounts);
        self.dependents_of_classes(&classes)
    }

    fn dependents_of_classes(&self, classes: &[ConfigKey]) -> Vec<WorkloadKey> {
        let mut out: Vec<WorkloadKey> = classes.iter().flat_map(|c| self.dependents(c)).collect();
        sort_dedup(&mut out);
        out
    }

    /// Whether Pod `pod` runs (not terminating) and is `workload`'s: it votes on what the
    /// workload mounted ([`crate::model::owners`]).
    pub fn is_running_pod_of(&self, workload: &WorkloadKey, pod: &str) -> bool {
        self.owners.read().unwrap().is_running_pod_of(workload, pod)
    }

    /// Whether Pod `pod` of `namespace` runs and is not terminating.
    pub fn pod_runs(&self, namespace: &str, pod: &str) -> bool {
        self.owners.read().unwrap().runs(namespace, pod)
    }

    /// Running Pods recorded.
    pub fn running_pods(&self) -> usize {
        self.owners.read().unwrap().running_pods()
    }

    /// A relist of pod statuses begins; its number goes with what it returns.
    pub fn begin_mount_relist(&self) -> u32 {
        self.mounts.write().unwrap().begin_relist()
    }

    /// The pod statuses recorded in one namespace or all that relist `listed` did not
    /// return.
    pub fn mounts_not_listed(
        &self,
        namespace: Option<&str>,
        listed: u32,
    ) -> Vec<(ConfigKey, Box<str>)> {
        self.mounts.read().unwrap().not_listed(namespace, listed)
    }

    /// Pod statuses recorded.
    pub fn pod_statuses(&self) -> usize {
        self.mounts.read().unwrap().len()
    }

    pub fn remove_config(&self, key: &ConfigKey) -> Option<Arc<ConfigEntry>> {
        self.configs.write().unwrap().remove(key)
    }

    /// Cached ConfigMaps/Secrets of one kind, in one namespace or all, that a relist did
    /// not return (`listed`): the ones gone. Only those are copied out: a copy of every
    /// key was most of the memory a large relist peaked at (7 MB at 100,000 objects).
    pub fn configs_not_listed(
        &self,
        kind: ConfigKind,
        namespace: Option<&str>,
        helm_releases: Option<bool>,
        listed: &dyn Fn(&ConfigKey) -> bool,
    ) -> Vec<ConfigKey> {
        self.configs
            .read()
            .unwrap()
            .entries()
            .filter(|e| helm_releases.is_none_or(|h| e.helm_release == h))
            .map(|e| e.key())
            .filter(|k| k.kind == kind && namespace.is_none_or(|ns| *k.namespace == *ns))
            .filter(|k| !listed(k))
            .cloned()
            .collect()
    }

    /// ConfigMaps/Secrets carrying a delete-mode annotation.
    pub fn delete_mode_configs(&self) -> Vec<(ConfigKey, Arc<ConfigEntry>)> {
        self.configs
            .read()
            .unwrap()
            .entries()
            .filter(|e| e.pod_delete_match().is_some())
            .map(|e| (e.key().clone(), Arc::clone(e)))
            .collect()
    }

    /// Some workload references `key`.
    pub fn is_referenced(&self, key: &ConfigKey) -> bool {
        self.workloads.read().unwrap().reference(key)
    }

    /// Workloads that reference `key` or count it by a reload list.
    pub fn dependents(&self, key: &ConfigKey) -> Vec<WorkloadKey> {
        let workloads = self.workloads.read().unwrap();
        let mut keys: Vec<WorkloadKey> = workloads.referencing(key).cloned().collect();
        for named in workloads.by_name(key) {
            if !keys.contains(&named) {
                keys.push(named);
            }
        }
        keys
    }

    /// The cached ConfigMaps and Secrets of `namespace` that `entry` counts by name.
    pub fn counted_by_name(&self, namespace: &str, entry: &WorkloadEntry) -> Vec<ConfigKey> {
        if entry.counting.patterns().is_empty() {
            return Vec::new();
        }
        let mut keys: Vec<ConfigKey> = self
            .configs
            .read()
            .unwrap()
            .entries()
            .map(|e| e.key())
            .filter(|k| &*k.namespace == namespace && entry.counts_by_name(k))
            .cloned()
            .collect();
        keys.sort();
        keys
    }

    pub fn workload(&self, key: &WorkloadKey) -> Option<Arc<WorkloadEntry>> {
        self.workloads.read().unwrap().entries.get(key).cloned()
    }

    /// Stores (or, for `None`, forgets) a workload and re-indexes its references.
    /// Returns whether the cached state changed.
    pub fn upsert_workload(&self, key: &WorkloadKey, entry: Option<WorkloadEntry>) -> bool {
        let entry = entry.map(|e| self.sharing_names(e));
        let mut workloads = self.workloads.write().unwrap();
        let old = match entry {
            Some(entry) => {
                if workloads.entries.get(key).is_some_and(|old| **old == entry) {
                    return false;
                }
                workloads.entries.insert(key.clone(), Arc::new(entry))
            }
            None => {
                self.held
                    .lock()
                    .unwrap()
                    .retain(|(holder, _), _| holder.as_ref() != Some(key));
                workloads.entries.remove(key)
            }
        };
        let new = workloads.entries.get(key).cloned();
        let old_refs = old.as_ref().map(|e| &*e.references).unwrap_or_default();
        let new_refs = new.as_ref().map(|e| &*e.references).unwrap_or_default();
        let workloads = &mut *workloads;
        workloads
            .index
            .refile(key, old_refs, new_refs, &workloads.entries);
        let has_patterns = new
            .as_ref()
            .is_some_and(|e| !e.counting.patterns().is_empty());
        let namespace = Arc::clone(&key.namespace);
        let listed = workloads.by_pattern.entry(namespace).or_default();
        listed.retain(|k| k != key);
        if has_patterns {
            listed.push(key.clone());
        }
        if listed.is_empty() {
            workloads.by_pattern.remove(&key.namespace);
        }
        // What this workload referenced, by name or by a pattern, may be referenced by
        // nothing now: the records of absent Secrets go with it.
        let had_patterns = old
            .as_ref()
            .is_some_and(|e| !e.counting.patterns().is_empty());
        if had_patterns || old_refs.iter().any(|r| !new_refs.contains(r)) {
            let mut absent = self.absent_secrets.lock().unwrap();
            if !absent.is_empty() {
                absent.retain(|k| k.namespace != key.namespace || workloads.reference(k));
                absent.release_when_empty();
            }
        }
        old.is_some() || new.is_some()
    }

    /// Cached workloads of one resource, in one namespace or all, that a relist did not
    /// return (`listed`): the ones gone (see [`Cache::configs_not_listed`]).
    pub fn workloads_not_listed(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        listed: &dyn Fn(&WorkloadKey) -> bool,
    ) -> Vec<WorkloadKey> {
        self.workloads
            .read()
            .unwrap()
            .entries
            .keys()
            .filter(|k| *k.resource == *resource && namespace.is_none_or(|ns| *k.namespace == *ns))
            .filter(|k| !listed(k))
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
    use crate::config::Policy;
    use crate::objects::WorkloadObject;
    use std::collections::BTreeMap;

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

    fn secret_meta(rv: &str, uid: &str) -> ObjectMeta {
        serde_json::from_value(serde_json::json!({
            "name": "creds", "namespace": "ns", "uid": uid, "resourceVersion": rv}))
        .unwrap()
    }

    fn fetched(rv: &str, uid: &str, value: &str) -> ConfigObject {
        let json = serde_json::json!({"kind": "Secret",
            "metadata": {"name": "creds", "namespace": "ns", "uid": uid, "resourceVersion": rv},
            "data": {"password": crate::objects::base64::encode(value.as_bytes())}});
        ConfigObject::secret(json).unwrap()
    }

    #[test]
    fn a_cached_object_fits_a_160_byte_allocation() {
        // Every ConfigMap and Secret in use has one, in an `Arc` (two counts, 16 bytes);
        // musl's allocator adds 4 bytes and rounds up to its classes (144, 160, 192).
        assert!(std::mem::size_of::<ConfigEntry>() + 16 + 4 <= 160);
    }

    #[test]
    fn a_secret_known_by_its_metadata_has_no_current_data_until_read() {
        let cache = Cache::new();
        let (key, before, after) =
            cache.upsert_metadata(ConfigKind::Secret, &secret_meta("1", "u"), true, None);
        assert!(before.is_none() && !after.is_current() && after.digests().is_none());
        let read = cache
            .store_fetched(
                &key,
                Some(&ResourceVersion::new("1")),
                fetched("1", "u", "a"),
            )
            .unwrap();
        assert!(read.is_current());
        assert_eq!(read.digests().unwrap().len(), 1);
    }

    #[test]
    fn a_new_version_seen_by_the_watch_makes_the_data_stale_until_read_again() {
        let cache = Cache::new();
        let (key, ..) =
            cache.upsert_metadata(ConfigKind::Secret, &secret_meta("1", "u"), true, None);
        cache.store_fetched(
            &key,
            Some(&ResourceVersion::new("1")),
            fetched("1", "u", "a"),
        );
        let (_, _, moved) =
            cache.upsert_metadata(ConfigKind::Secret, &secret_meta("2", "u"), true, None);
        assert!(
            !moved.is_current(),
            "the data of version 1 is not that of version 2"
        );
        assert!(
            !moved.data_differs(&fetched("1", "u", "a").data.unwrap()),
            "kept to compare"
        );
        let (_, _, dropped) =
            cache.upsert_metadata(ConfigKind::Secret, &secret_meta("3", "u"), false, None);
        assert!(
            dropped.data_differs(&fetched("1", "u", "a").data.unwrap()),
            "not kept when unwanted"
        );
    }

    #[test]
    fn the_same_metadata_again_changes_nothing() {
        let cache = Cache::new();
        let (_, _, first) =
            cache.upsert_metadata(ConfigKind::Secret, &secret_meta("1", "u"), true, None);
        let (_, before, again) =
            cache.upsert_metadata(ConfigKind::Secret, &secret_meta("1", "u"), true, None);
        assert!(Arc::ptr_eq(&first, &again) && Arc::ptr_eq(&before.unwrap(), &again));
    }

    #[test]
    fn a_read_of_another_incarnation_is_dropped() {
        let cache = Cache::new();
        let (key, ..) =
            cache.upsert_metadata(ConfigKind::Secret, &secret_meta("5", "new-uid"), true, None);
        let stored = cache.store_fetched(
            &key,
            Some(&ResourceVersion::new("5")),
            fetched("4", "old-uid", "a"),
        );
        assert!(stored.is_none());
        assert!(!cache.config(&key).unwrap().is_current());
        assert!(cache
            .store_fetched(
                &ConfigKey::new(ConfigKind::Secret, "ns", "gone"),
                Some(&ResourceVersion::new("1")),
                fetched("1", "u", "a")
            )
            .is_none());
    }

    #[test]
    fn a_secret_read_while_not_cached_is_stored_and_no_longer_absent() {
        let cache = Cache::new();
        let creds = ConfigKey::new(ConfigKind::Secret, "ns", "creds");
        let web = deployment(
            "web",
            serde_json::json!({"wavelet.dev/update-on-config-change": "true"}),
            serde_json::json!([{"name": "v", "secret": {"secretName": "creds"}}]),
        );
        cache.upsert_workload(
            &key("web"),
            WorkloadEntry::from_object(&Resource::deployments(), &web, &Policy::default()),
        );
        cache.mark_absent(&creds);
        assert!(cache.is_known_absent(&creds));
        let stored = cache
            .store_fetched(&creds, None, fetched("3", "u", "a"))
            .expect("stored");
        assert!(stored.is_current());
        assert!(!cache.is_known_absent(&creds));
        // A cached Secret is never marked absent.
        cache.mark_absent(&creds);
        assert!(!cache.is_known_absent(&creds));
    }

    #[test]
    fn a_secret_is_recorded_absent_only_while_something_references_it() {
        let cache = Cache::new();
        let creds = ConfigKey::new(ConfigKind::Secret, "ns", "creds");
        cache.mark_absent(&creds);
        assert!(!cache.is_known_absent(&creds), "nothing references it");
        let opted = serde_json::json!({"wavelet.dev/update-on-config-change": "true"});
        let mounts =
            |name: &str| serde_json::json!([{"name": "v", "secret": {"secretName": name}}]);
        for name in ["web", "api"] {
            let obj = deployment(name, opted.clone(), mounts("creds"));
            cache.upsert_workload(
                &key(name),
                WorkloadEntry::from_object(&Resource::deployments(), &obj, &Policy::default()),
            );
        }
        cache.mark_absent(&creds);
        assert!(cache.is_known_absent(&creds));
        // One of two references goes: the record stays.
        cache.upsert_workload(&key("web"), None);
        assert!(cache.is_known_absent(&creds));
        // The last one moves to another Secret: the record goes with it.
        let moved = deployment("api", opted, mounts("other"));
        cache.upsert_workload(
            &key("api"),
            WorkloadEntry::from_object(&Resource::deployments(), &moved, &Policy::default()),
        );
        assert!(!cache.is_known_absent(&creds));
        assert_eq!(cache.absent_secrets_known(), 0);
    }

    #[test]
    fn a_secret_named_by_a_pattern_is_recorded_absent_until_the_pattern_goes() {
        let cache = Cache::new();
        let db = ConfigKey::new(ConfigKind::Secret, "ns", "db-main");
        let listing = deployment(
            "api",
            serde_json::json!({"secret.reloader.stakater.com/reload": "db-.*"}),
            serde_json::json!([]),
        );
        cache.upsert_workload(
            &key("api"),
            WorkloadEntry::from_object(&Resource::deployments(), &listing, &Policy::default()),
        );
        cache.mark_absent(&db);
        assert!(cache.is_known_absent(&db));
        cache.upsert_workload(&key("api"), None);
        assert!(!cache.is_known_absent(&db));
    }

    #[test]
    fn a_read_that_finds_a_newer_watch_entry_keeps_the_newer_version() {
        let cache = Cache::new();
        let key = ConfigKey::new(ConfigKind::Secret, "ns", "creds");
        // The read began while nothing was cached; the watch stored version 4 meanwhile.
        cache.upsert_metadata(ConfigKind::Secret, &secret_meta("4", "u"), true, None);
        let after = cache
            .store_fetched(&key, None, fetched("3", "u", "a"))
            .expect("merged");
        assert_eq!(after.resource_version, ResourceVersion::new("4"));
        assert!(!after.is_current(), "version 4's data is still to be read");
    }

    #[test]
    fn a_read_newer_than_the_watch_is_current_when_the_watch_saw_nothing_meanwhile() {
        let cache = Cache::new();
        let (key, ..) =
            cache.upsert_metadata(ConfigKind::Secret, &secret_meta("1", "u"), true, None);
        let read = cache
            .store_fetched(
                &key,
                Some(&ResourceVersion::new("1")),
                fetched("2", "u", "b"),
            )
            .unwrap();
        assert!(read.is_current());
        assert_eq!(read.resource_version, ResourceVersion::new("2"));
        // The watch then delivers version 2: nothing changes, nothing is read again.
        let (_, before, after) =
            cache.upsert_metadata(ConfigKind::Secret, &secret_meta("2", "u"), true, None);
        assert!(Arc::ptr_eq(&before.unwrap(), &after) && after.is_current());
    }

    #[test]
    fn a_read_overtaken_by_a_newer_version_stays_stale_until_that_one_is_read() {
        let cache = Cache::new();
        let (key, ..) =
            cache.upsert_metadata(ConfigKind::Secret, &secret_meta("1", "u"), true, None);
        // Version 3 arrives while version 2 is being read.
        cache.upsert_metadata(ConfigKind::Secret, &secret_meta("3", "u"), true, None);
        let read = cache
            .store_fetched(
                &key,
                Some(&ResourceVersion::new("1")),
                fetched("2", "u", "b"),
            )
            .unwrap();
        assert!(!read.is_current());
        assert_eq!(read.resource_version, ResourceVersion::new("3"));
        let read = cache
            .store_fetched(
                &key,
                Some(&ResourceVersion::new("3")),
                fetched("3", "u", "c"),
            )
            .unwrap();
        assert!(read.is_current());
    }

    #[test]
    fn a_cached_secret_holds_no_trace_of_its_values_even_in_annotations() {
        let canary = "canary-value-5f3a9c";
        let encoded = crate::objects::base64::encode(canary.as_bytes());
        let last_applied =
            format!(r#"{{"apiVersion":"v1","data":{{"password":"{encoded}"}},"kind":"Secret"}}"#);
        let json = serde_json::json!({"kind": "Secret",
            "metadata": {"name": "creds", "namespace": "ns", "uid": "u", "resourceVersion": "1",
                "labels": {"leak": encoded.clone()},
                "annotations": {"kubectl.kubernetes.io/last-applied-configuration": last_applied,
                                "wavelet.dev/pod-delete-match": "app=web"}},
            "data": {"password": encoded.clone()}, "stringData": {"password": canary}});
        let object = ConfigObject::secret(json).unwrap();
        let object_text = format!("{object:?}");
        let cache = Cache::new();
        let (key, _) = cache.upsert_config(ConfigKind::Secret, object);
        let entry_text = format!("{:?}", cache.config(&key).unwrap());
        for text in [object_text, entry_text] {
            assert!(!text.contains(canary) && !text.contains(&encoded), "{text}");
            assert!(!text.contains("last-applied"), "{text}");
        }
        assert_eq!(
            cache.config(&key).unwrap().pod_delete_match(),
            Some("app=web")
        );
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

    fn mounting(name: &str, class: &str) -> WorkloadObject {
        deployment(
            name,
            serde_json::json!({"wavelet.dev/update-on-config-change": "true"}),
            serde_json::json!([{"name": "s", "csi": {"driver": "secrets-store.csi.k8s.io",
                "volumeAttributes": {"secretProviderClass": class}}}]),
        )
    }

    fn version(v: &str) -> Vec<MountedObject> {
        use crate::objects::short_digest;
        vec![(short_digest("db"), short_digest(v))]
    }

    fn shown(v: &str) -> Vec<KeyDigest> {
        crate::model::mounts::majority(&[&version(v)]).into_vec()
    }

    const CSI: Policy = Policy {
        auto_reload_all: false,
        ignore_configmaps: false,
        ignore_secrets: false,
        csi_integration: true,
    };

    /// Deployment Pod `pod` (`<deployment>-<hash>-<random>`) runs, through its ReplicaSet;
    /// returns the workloads that then look.
    fn runs(cache: &Cache, pod: &str) -> Vec<WorkloadKey> {
        let rs = &pod[..pod.rfind('-').unwrap()];
        let deployment = &rs[..rs.rfind('-').unwrap()];
        cache.set_owned(
            OwnedKind::ReplicaSet,
            "ns",
            rs,
            Some(("Deployment", deployment)),
            true,
        );
        cache.set_owned(OwnedKind::Pod, "ns", pod, Some(("ReplicaSet", rs)), true)
    }

    #[test]
    fn a_pod_status_wakes_only_the_workload_whose_pod_it_is_and_moves_the_class() {
        let cache = Cache::new();
        for name in ["web", "api"] {
            cache.upsert_workload(
                &key(name),
                WorkloadEntry::from_object(
                    &Resource::deployments(),
                    &mounting(name, "vault"),
                    &CSI,
                ),
            );
        }
        let class = ConfigKey::new(ConfigKind::SecretProviderClass, "ns", "vault");
        let meta: ObjectMeta = serde_json::from_value(serde_json::json!({
            "name": "vault", "namespace": "ns", "uid": "u", "resourceVersion": "1",
            "annotations": {"wavelet.dev/pod-delete-match": "app=web"}}))
        .unwrap();
        let (_, _, entry) = cache.upsert_class(&meta);
        assert!(!entry.is_current(), "no pod status yet: not read");
        for pod in ["web-5d8f7-x2k9p", "web-5d8f7-b7z2q", "api-6c9d7-h4k2m"] {
            assert!(runs(&cache, pod).is_empty(), "no pod status yet");
        }
        let mut seen = Vec::new();
        let change = cache.set_mount(
            &class,
            "web-5d8f7-x2k9p",
            Some(&version("1")),
            0,
            None,
            |w| seen.extend(w.to_vec()),
        );
        assert_eq!(change.workloads, [key("web")]);
        assert_eq!(seen, [key("web")], "told before the change is visible");
        assert!(change.class_changed);
        assert!(
            cache.config(&class).unwrap().is_current(),
            "a delete-mode class holds every Pod's versions"
        );
        // The same again moves nothing.
        let again = cache.set_mount(
            &class,
            "web-5d8f7-x2k9p",
            Some(&version("1")),
            0,
            None,
            |_| {},
        );
        assert!(again.workloads.is_empty() && !again.class_changed);
        // A second Pod of web with the same versions: web looks (its reconcile finds the
        // hash unchanged); the class's versions did not move.
        let same = cache.set_mount(
            &class,
            "web-5d8f7-b7z2q",
            Some(&version("1")),
            0,
            None,
            |_| {},
        );
        assert_eq!(same.workloads, [key("web")]);
        assert!(!same.class_changed);
        // api's first Pod: api looks; the class's versions stay.
        let api = cache.set_mount(
            &class,
            "api-6c9d7-h4k2m",
            Some(&version("2")),
            0,
            None,
            |_| {},
        );
        assert_eq!(api.workloads, [key("api")]);
        assert!(!api.class_changed, "two Pods of three report version 1");
        let web = cache
            .class_view(&class, None, |p| p.starts_with("web-"))
            .unwrap();
        assert_eq!(&*web.objects, &shown("1")[..]);
        assert_eq!(web.pods, 2);
        // A Pod of web stops running: web looks.
        let stopped = cache.set_owned(OwnedKind::Pod, "ns", "web-5d8f7-b7z2q", None, false);
        assert_eq!(stopped, [key("web")]);
        assert!(!cache.is_running_pod_of(&key("web"), "web-5d8f7-b7z2q"));
    }

    #[test]
    fn a_class_whose_pods_have_no_status_yet_does_not_count_for_them() {
        let cache = Cache::new();
        let web =
            WorkloadEntry::from_object(&Resource::deployments(), &mounting("web", "vault"), &CSI)
                .unwrap();
        assert_eq!(web.references.len(), 1);
        assert!(crate::model::counted::counted(&cache, &key("web"), &web).is_empty());
        let class = ConfigKey::new(ConfigKind::SecretProviderClass, "ns", "vault");
        runs(&cache, "api-6c9d7-h4k2m");
        runs(&cache, "web-5d8f7-x2k9p");
        // Another workload's Pod mounted it: still nothing of web's.
        cache.set_mount(
            &class,
            "api-6c9d7-h4k2m",
            Some(&version("1")),
            0,
            None,
            |_| {},
        );
        assert!(crate::model::counted::counted(&cache, &key("web"), &web).is_empty());
        cache.set_mount(
            &class,
            "web-5d8f7-x2k9p",
            Some(&version("1")),
            0,
            None,
            |_| {},
        );
        let counted = crate::model::counted::counted(&cache, &key("web"), &web);
        assert_eq!(counted.len(), 1);
        let digests = counted[0].1.as_ref().unwrap().digests().unwrap();
        assert_eq!(digests, &shown("1")[..]);
        // Without --enable-csi-integration the class is not even a reference.
        let off = WorkloadEntry::from_object(
            &Resource::deployments(),
            &mounting("web", "vault"),
            &Policy::default(),
        )
        .unwrap();
        assert!(off.references.is_empty());
    }

    fn referencing(names: &[&str]) -> serde_json::Value {
        names
            .iter()
            .map(|n| serde_json::json!({"name": n, "configMap": {"name": n}}))
            .collect()
    }

    fn upsert_referencing(cache: &Cache, workload: &str, names: &[&str]) {
        let opted = serde_json::json!({"wavelet.dev/update-on-config-change": "true"});
        let object = deployment(workload, opted, referencing(names));
        cache.upsert_workload(
            &key(workload),
            WorkloadEntry::from_object(&Resource::deployments(), &object, &Policy::default()),
        );
    }

    #[test]
    fn objects_that_share_a_slot_of_the_reverse_index_keep_their_own_dependents() {
        let cache = Cache::new();
        cache.workloads.write().unwrap().index.one_slot = true;
        let cm = |name: &str| ConfigKey::new(ConfigKind::ConfigMap, "ns", name);
        let sorted = |mut keys: Vec<WorkloadKey>| {
            sort_dedup(&mut keys);
            keys
        };
        // One object in the slot: its first workload tells a lookup of another apart.
        upsert_referencing(&cache, "web", &["one"]);
        assert_eq!(cache.dependents(&cm("one")), vec![key("web")]);
        assert!(cache.dependents(&cm("two")).is_empty());
        assert!(!cache.is_referenced(&cm("two")));
        upsert_referencing(&cache, "web", &["one", "two"]);
        upsert_referencing(&cache, "api", &["two"]);
        assert_eq!(cache.dependents(&cm("one")), vec![key("web")]);
        assert_eq!(
            sorted(cache.dependents(&cm("two"))),
            vec![key("api"), key("web")]
        );
        assert!(cache.dependents(&cm("three")).is_empty());
        assert!(!cache.is_referenced(&cm("three")));

        // web moves from one to three: it stays filed under the shared slot for two.
        upsert_referencing(&cache, "web", &["two", "three"]);
        assert!(cache.dependents(&cm("one")).is_empty());
        assert!(!cache.is_referenced(&cm("one")));
        assert_eq!(cache.dependents(&cm("three")), vec![key("web")]);
        assert_eq!(
            sorted(cache.dependents(&cm("two"))),
            vec![key("api"), key("web")]
        );

        cache.upsert_workload(&key("web"), None);
        assert_eq!(cache.dependents(&cm("two")), vec![key("api")]);
        assert!(!cache.is_referenced(&cm("three")));
        cache.upsert_workload(&key("api"), None);
        assert!(cache.workloads.read().unwrap().index.is_empty());

        // Objects that came to share a slot while one workload moved between them.
        upsert_referencing(&cache, "web", &["one"]);
        upsert_referencing(&cache, "api", &["one"]);
        upsert_referencing(&cache, "web", &["two"]);
        assert_eq!(cache.dependents(&cm("one")), vec![key("api")]);
        assert_eq!(cache.dependents(&cm("two")), vec![key("web")]);
    }

    #[test]
    fn a_referenced_objects_name_is_one_copy_whichever_is_cached_first() {
        let cache = Cache::new();
        let name_in = |cache: &Cache, workload: &str, config: &str| {
            let entry = cache.workload(&key(workload)).unwrap();
            let reference = entry.references.iter().find(|r| &*r.config.name == config);
            Arc::clone(&reference.unwrap().config.name)
        };
        let cached_name = |cache: &Cache, config: &str| {
            let configs = cache.configs.read().unwrap();
            let wanted = ConfigKey::new(ConfigKind::ConfigMap, "ns", config);
            Arc::clone(&configs.get(&wanted).unwrap().key().name)
        };
        // The object first, then the workload.
        cache.upsert_config(ConfigKind::ConfigMap, configmap("first", "1", &[], &[]));
        upsert_referencing(&cache, "web", &["first", "later"]);
        assert!(Arc::ptr_eq(
            &name_in(&cache, "web", "first"),
            &cached_name(&cache, "first")
        ));
        // The workload first, then the object.
        cache.upsert_config(ConfigKind::ConfigMap, configmap("later", "1", &[], &[]));
        assert!(Arc::ptr_eq(
            &name_in(&cache, "web", "later"),
            &cached_name(&cache, "later")
        ));
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
        cache.upsert_workload(
            &key("web"),
            WorkloadEntry::from_object(&Resource::deployments(), &web, &Policy::default()),
        );
        let one = ConfigKey::new(ConfigKind::ConfigMap, "ns", "one");
        let two = ConfigKey::new(ConfigKind::ConfigMap, "ns", "two");
        assert_eq!(cache.dependents(&one), vec![key("web")]);

        let moved = deployment(
            "web",
            opted,
            serde_json::json!([{"name": "v", "configMap": {"name": "two"}}]),
        );
        cache.upsert_workload(
            &key("web"),
            WorkloadEntry::from_object(&Resource::deployments(), &moved, &Policy::default()),
        );
        assert!(cache.dependents(&one).is_empty());
        assert_eq!(cache.dependents(&two), vec![key("web")]);

        cache.upsert_workload(&key("web"), None);
        assert!(cache.dependents(&two).is_empty());
    }
}
