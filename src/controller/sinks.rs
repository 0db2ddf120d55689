//! From watch events to work: the sinks write what each watcher reports into the cache,
//! and the [`Router`] turns a change of a ConfigMap, Secret, SecretProviderClass or pod
//! status, or of the running Pods that vote on what a workload mounted, into what it causes — debounce windows and reconciles of the workloads that
//! reference it, a delete-mode reconcile, a read of a Secret's data.

use std::collections::HashSet;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crate::annotations;
use crate::client::{current_priority, with_priority};
use crate::config::Policy;
use crate::controller::hold_alerts::HoldAlerts;
use crate::deletemode::DeleteMode;
use crate::hashmode::baseline::Baselines;
use crate::hashmode::throttle::Debounce;
use crate::model::cache::{Cache, ConfigChange, ConfigEntry};
use crate::model::owners::{OwnedKind, Owners};
use crate::model::references::Reference;
use crate::model::state::{StateConfigMap, StateObject, PAUSE_KEY};
use crate::model::workload::{Gates, WorkloadEntry};
use crate::objects::compact::{ResourceVersion, Uid};
use crate::objects::MountedObject;
use crate::objects::{
    ConfigKey, ConfigKind, ConfigObject, NamespaceItem, ObjectMeta, OwnedItem, PodStatusItem,
    Resource, WorkloadKey, WorkloadObject,
};
use crate::ops::events::Recorder;
use crate::watch::fetch::{FetchSink, Fetcher, Need};
use crate::watch::objects::ConfigItem;
use crate::watch::queue::{Priority, ReleaseWhenEmpty as _, WorkQueue};
use crate::watch::watcher::Event;

/// Called once by each sink when its watcher's first list is complete.
pub type OnSynced = Box<dyn FnOnce() + Send>;

/// Starts the watch of Helm's release records over a namespace's scope ([`Router`]).
pub type WatchRecords = Box<dyn Fn(&str) + Send + Sync>;

/// What became of a ConfigMap or Secret from a list or a watch.
enum Applied {
    /// In the cache, under this key (sharing its strings).
    Kept(ConfigKey),
    /// Not kept: nothing uses it.
    Dropped(ConfigKey),
}

impl Applied {
    fn key(self) -> ConfigKey {
        match self {
            Applied::Kept(key) | Applied::Dropped(key) => key,
        }
    }
}

/// Routes changes of ConfigMaps and Secrets to the work they cause. Shared by the watch
/// threads and the fetcher threads.
pub struct Router {
    pub cache: Arc<Cache>,
    /// Hash-mode keys.
    pub queue: Arc<WorkQueue<WorkloadKey>>,
    /// `None`: delete mode is disabled (no state namespace).
    pub delete_mode: Option<Arc<DeleteMode>>,
    pub fetcher: Arc<Fetcher>,
    /// `--debounce`.
    pub debounce: Duration,
    pub windows: Arc<Debounce<WorkloadKey>>,
    /// What workloads not adopted yet were first seen with, noted before a change.
    pub baselines: Arc<Baselines>,
    /// `--auto-reload-all`, `--ignore-configmaps`, `--ignore-secrets`.
    pub policy: Policy,
    /// Events queued about an object or a namespace that is gone are dropped from it.
    pub recorder: Recorder,
    /// Starts the watch of Helm's release records over the scope of a namespace where one
    /// is in use (once per scope; see [`SecretPart`]).
    pub watch_records: OnceLock<WatchRecords>,
}

impl Router {
    /// A whole ConfigMap/Secret from a list or a watch. A Secret nothing uses is not kept
    /// (see [`Router::apply_metadata`]): its values were digested as it streamed in, and
    /// are dropped with it.
    fn apply_whole(&self, kind: ConfigKind, obj: ConfigObject) -> Applied {
        let key = ConfigKey::new(kind, &obj.metadata.namespace, &obj.metadata.name);
        if kind == ConfigKind::Secret && !self.wanted(&key, &obj.metadata) {
            self.drop_unused(&key);
            return Applied::Dropped(key);
        }
        let old = self.cache.config(&key);
        // Open the dependents' debounce windows *before* the new data is visible in the
        // cache, so no reconcile can see the data without its window.
        if old.as_ref().is_none_or(|old| {
            old.uid != Uid::new(&obj.metadata.uid) || old.data_differs(obj.digests())
        }) {
            self.open_windows(&key);
        }
        let was_delete_mode = old.as_ref().is_some_and(|e| e.pod_delete_match().is_some());
        let (key, change) = self.cache.upsert_config(kind, obj);
        match change {
            ConfigChange::Created | ConfigChange::DataChanged => self.changed(&key),
            ConfigChange::MetadataOnly => self.recount(&key, old.as_deref()),
            ConfigChange::Unchanged => {}
        }
        // Metadata changes count too: an annotation added to an existing object must be
        // recorded before its next data change, and one removed stops a replacement.
        // Delete mode compares data hashes, so a metadata change never replaces a Pod.
        if change != ConfigChange::Unchanged && (was_delete_mode || self.is_delete_mode(&key)) {
            self.delete_mode_changed(&key);
        }
        Applied::Kept(key)
    }

    /// Whether a Secret is kept: something references it (or counts it by name), or it
    /// carries a delete-mode selector.
    fn wanted(&self, key: &ConfigKey, metadata: &ObjectMeta) -> bool {
        self.cache.is_referenced(key)
            || annotations::pod_delete_match(&metadata.annotations).is_some()
    }

    /// A Secret's metadata from a metadata-only list or watch. Its data is read (by the
    /// fetcher) only when something needs it; until then whatever depends on it waits.
    /// A Secret nothing uses (no reference, no reload-list pattern matching its name, no
    /// delete-mode selector) is not kept at all: most of a cluster's Secrets are such (Helm
    /// releases, service-account tokens, certificates), and one that becomes referenced is
    /// read then (a new pattern lists its namespace). `helm_release`: whether it is a
    /// Helm release record, when the list or watch says. Returns the key when it is kept.
    fn apply_metadata(
        &self,
        kind: ConfigKind,
        obj: ConfigObject,
        helm_release: Option<bool>,
    ) -> Applied {
        if kind == ConfigKind::SecretProviderClass {
            return self.apply_class(obj);
        }
        let key = ConfigKey::new(kind, &obj.metadata.namespace, &obj.metadata.name);
        let wanted = self.wanted(&key, &obj.metadata);
        if !wanted {
            self.drop_unused(&key);
            return Applied::Dropped(key);
        }
        // A new version of a Secret whose data is known: its data goes stale until read,
        // so the workloads not adopted yet that count it note what they were first seen
        // with now.
        if self.cache.config(&key).is_some_and(|old| {
            old.is_current()
                && old.resource_version != ResourceVersion::new(&obj.metadata.resource_version)
        }) {
            self.baselines.before_change(&self.cache.dependents(&key));
        }
        let (key, before, after) =
            self.cache
                .upsert_metadata(kind, &obj.metadata, wanted, helm_release);
        // Asked again now that the entry is in the cache: a workload stored meanwhile by
        // another watch thread may have found it current a moment ago.
        let wanted = wanted || self.cache.is_referenced(&key);
        if wanted && !after.is_current() {
            // A new version of a Secret in use: a change to act on (background during the
            // first list, which the initial sync's bulk read answers).
            self.fetcher.request(key.clone(), current_priority());
        }
        if before.as_ref().is_some_and(|b| Arc::ptr_eq(b, &after)) {
            return Applied::Kept(key);
        }
        self.recount(&key, before.as_deref());
        let was_current = before.as_ref().is_some_and(|b| b.is_current());
        if after.is_current() && !was_current {
            // A fetch already read this version: whoever waited for it can go on.
            self.wake_dependents(&key);
        }
        let was_delete_mode = before.is_some_and(|b| b.pod_delete_match().is_some());
        if was_delete_mode || after.pod_delete_match().is_some() {
            self.delete_mode_changed(&key);
        }
        Applied::Kept(key)
    }

    /// A SecretProviderClass's metadata. Every one is kept (a namespace has a few): its
    /// annotations say whether it counts (Reloader's `ignore` and `match`) and whether
    /// delete mode acts on it; its data is what its Pods mounted, which the pod statuses
    /// bring ([`Router::set_mount`]), so nothing is read.
    fn apply_class(&self, obj: ConfigObject) -> Applied {
        let (key, before, after) = self.cache.upsert_class(&obj.metadata);
        if before.as_ref().is_some_and(|b| Arc::ptr_eq(b, &after)) {
            return Applied::Kept(key);
        }
        match &before {
            Some(before) => self.recount(&key, Some(before)),
            // Workloads that name it in a reload list count it from now on.
            None => self.wake_dependents(&key),
        }
        let was_delete_mode = before.is_some_and(|b| b.pod_delete_match().is_some());
        let is_delete_mode = after.pod_delete_match().is_some();
        if is_delete_mode || was_delete_mode {
            self.delete_mode_changed(&key);
        }
        Applied::Kept(key)
    }

    /// A pod status: what one Pod mounted of one SecretProviderClass (`None`: the status
    /// is gone, with its Pod). The workloads whose versions of the class moved reconcile
    /// once their debounce window closes; delete mode looks at the class when every Pod's
    /// versions moved.
    pub fn set_mount(
        &self,
        class: &ConfigKey,
        pod: &str,
        objects: Option<&[MountedObject]>,
        incarnation: u64,
        listed: Option<u32>,
    ) {
        let change = self
            .cache
            .set_mount(class, pod, objects, incarnation, listed, |workloads| {
                let now = Instant::now();
                for workload in workloads {
                    self.windows.note_change(workload.clone(), now);
                }
            });
        for workload in change.workloads {
            log::debug!(
                "{class}: the versions Pod {pod} reports moved {workload}'s; due in {:?}",
                self.debounce
            );
            self.queue
                .add_after_as(workload, self.debounce, current_priority());
        }
        if change.class_changed && self.is_delete_mode(class) {
            self.delete_mode_changed(class);
        }
    }

    /// The Pods that vote for `workloads` changed (`what`: which, for the log): each
    /// reconciles once its debounce window closes.
    fn votes_moved(&self, workloads: &[WorkloadKey], what: &str) {
        if workloads.is_empty() {
            return;
        }
        let now = Instant::now();
        for workload in workloads {
            self.windows.note_change(workload.clone(), now);
        }
        for workload in workloads {
            log::debug!(
                "{what}: the Pods that vote for {workload} changed; due in {:?}",
                self.debounce
            );
            self.queue
                .add_after_as(workload.clone(), self.debounce, current_priority());
        }
    }

    /// Forgets a Secret nothing uses any more (it lost its last reference or its
    /// delete-mode selector since it was stored).
    fn drop_unused(&self, key: &ConfigKey) {
        let Some(old) = self.cache.remove_config(key) else {
            return;
        };
        if old.pod_delete_match().is_some() && self.cache.in_scope(&key.namespace) {
            // It lost its selector (or it would be kept): an opt-out, which forgets its
            // state entry, not a deletion, which keeps it.
            if let Some(delete_mode) = &self.delete_mode {
                delete_mode.opted_out(key.clone());
            }
        }
        // Referenced again between the check and the removal: read it back.
        if self.cache.is_referenced(key) {
            self.fetcher.request(key.clone(), Priority::Urgent);
        }
    }

    /// The object is gone: whatever referenced it sees it absent.
    fn remove(&self, key: &ConfigKey) {
        self.recorder
            .forget_object(&key.kind.resource().kind, &key.namespace, &key.name);
        if self.cache.config(key).is_some() {
            self.open_windows(key);
        }
        let removed = self.cache.remove_config(key);
        if key.kind == ConfigKind::Secret && self.cache.is_referenced(key) {
            // Not cached alone would mean "not known" for a Secret (unused ones are not
            // kept): its dependents must see it absent, not wait for a read.
            self.cache.mark_absent(key);
            if removed.is_none() {
                self.wake_dependents(key);
            }
        }
        if let Some(old) = removed {
            self.changed(key);
            if old.pod_delete_match().is_some() {
                self.delete_mode_changed(key);
            }
        }
    }

    fn is_delete_mode(&self, key: &ConfigKey) -> bool {
        self.cache
            .config(key)
            .is_some_and(|e| e.pod_delete_match().is_some())
    }

    /// Reloader's `ignore` or `match` of `key` changed: who counts it may have changed, so
    /// its dependents reconcile now (they record the new set without rolling). So do they
    /// when its fan-out annotations changed (a pause lifted, an urgent change).
    fn recount(&self, key: &ConfigKey, before: Option<&ConfigEntry>) {
        let (Some(before), Some(after)) = (before, self.cache.config(key)) else {
            return;
        };
        if before.counting_differs(&after) || before.gates_differ(&after) {
            for workload in self.cache.dependents(key) {
                self.queue.add(workload);
            }
        }
    }

    /// Asks for the data of each referenced object the cache knows without current data.
    /// The same for objects counted by name (reload lists).
    pub fn fetch_missing_keys<'a>(
        &self,
        keys: impl IntoIterator<Item = &'a ConfigKey>,
        priority: Priority,
    ) {
        for key in keys {
            if self.needs_read(key) {
                self.fetcher.request(key.clone(), priority);
            }
        }
    }

    pub fn fetch_missing(&self, references: &[Reference], priority: Priority) {
        self.fetch_missing_keys(references.iter().map(|r| &r.config), priority);
    }

    /// Cached without current data, or a Secret not cached and not known to be absent
    /// (unused Secrets are not kept; a ConfigMap not cached does not exist).
    fn needs_read(&self, key: &ConfigKey) -> bool {
        if key.kind == ConfigKind::SecretProviderClass {
            return false; // its versions come with the pod statuses
        }
        match self.cache.config(key) {
            Some(entry) => !entry.is_current(),
            None => key.kind == ConfigKind::Secret && !self.cache.is_known_absent(key),
        }
    }

    /// A delete-mode object was created, changed (data or annotations) or removed.
    /// `delete_mode` is `None` only in unit tests of the Router.
    fn delete_mode_changed(&self, key: &ConfigKey) {
        if !self.cache.in_scope(&key.namespace) {
            // --namespace-selector: recorded once its namespace enters the scope.
            return;
        }
        if let Some(delete_mode) = &self.delete_mode {
            delete_mode.enqueue(key.clone());
        }
    }

    fn open_windows(&self, key: &ConfigKey) {
        let now = Instant::now();
        let dependents = self.cache.dependents(key);
        self.baselines.before_change(&dependents);
        for workload in dependents {
            self.windows.note_change(workload, now);
        }
    }

    /// The data of `key` changed: its dependents reconcile when their debounce window
    /// closes. Urgent, unless this thread does background work (the first list, the first
    /// read of a Secret): a first sight is no change to act on before others.
    fn changed(&self, key: &ConfigKey) {
        let priority = current_priority();
        // The windows opened before the new data was visible; it is visible now. A
        // reconcile that started in between read the old data, so the change is noted
        // again: that reconcile settles the window only if it started after this.
        let visible = Instant::now();
        for workload in self.cache.dependents(key) {
            self.windows.note_change(workload.clone(), visible);
            log::debug!("{key} changed: {workload} due in {:?}", self.debounce);
            let priority = self.class_for(&workload, priority);
            self.queue.add_after_as(workload, self.debounce, priority);
        }
    }

    /// The data of `key` became current without changing: its dependents reconcile now,
    /// in the class of the work that read it.
    fn wake_dependents(&self, key: &ConfigKey) {
        let priority = current_priority();
        for workload in self.cache.dependents(key) {
            let priority = self.class_for(&workload, priority);
            self.queue.add_as(workload, priority);
        }
    }

    /// The class of the work a change causes for `workload`: a workload that carries no
    /// hash yet has nothing to roll from, and its first reconcile (its adoption) stays
    /// background work whatever wakes it.
    fn class_for(&self, workload: &WorkloadKey, priority: Priority) -> Priority {
        let unadopted = self
            .cache
            .workload(workload)
            .is_some_and(|e| e.recorded_hash().is_none());
        if unadopted {
            Priority::Background
        } else {
            priority
        }
    }
}

impl FetchSink for Router {
    fn need(&self, key: &ConfigKey) -> Need {
        if key.kind == ConfigKind::SecretProviderClass {
            return Need::Nothing;
        }
        let entry = self.cache.config(key);
        match &entry {
            Some(entry) if entry.is_current() => return Need::Nothing,
            // Deleted, or read and found absent: the watch reports it if it appears.
            None if self.cache.is_known_absent(key) => return Need::Nothing,
            _ => {}
        }
        // Still needed: something references it, or it is a delete-mode object.
        if !(self.cache.is_referenced(key) || self.is_delete_mode(key)) {
            return Need::Nothing;
        }
        Need::Read {
            cached: entry.map(|e| e.resource_version.clone()),
        }
    }

    fn fetched(&self, key: &ConfigKey, asked_at: Option<&ResourceVersion>, object: ConfigObject) {
        if object.helm_release {
            // In use, and on neither watch yet: its next versions come on a watch of the
            // records (its first list finds this one again, or a newer version).
            if let Some(watch_records) = self.watch_records.get() {
                watch_records(&key.namespace);
            }
        }
        let old = self.cache.config(key);
        if old
            .as_ref()
            .is_some_and(|old| old.uid != Uid::new(&object.metadata.uid))
        {
            return; // re-created meanwhile: the new one is fetched on its own
        }
        let data_changed = old
            .as_ref()
            .is_none_or(|old| old.data_differs(object.digests()));
        if data_changed {
            self.open_windows(key);
        }
        let Some(after) = self.cache.store_fetched(key, asked_at, object) else {
            return;
        };
        if !after.is_current() {
            return; // a newer version was seen meanwhile and is being fetched
        }
        if data_changed {
            self.changed(key);
        } else {
            self.wake_dependents(key);
        }
        let was_delete_mode = old.is_some_and(|old| old.pod_delete_match().is_some());
        if after.pod_delete_match().is_some() || was_delete_mode {
            self.delete_mode_changed(key);
        }
    }

    fn absent(&self, key: &ConfigKey) {
        self.cache.mark_absent(key);
        if self.cache.is_known_absent(key) {
            self.wake_dependents(key);
        }
    }

    fn listed(&self, object: ConfigObject) {
        self.apply_metadata(ConfigKind::Secret, object, None);
    }

    fn namespace_listed(&self, namespace: &str) {
        // In the class of the listing: background for a workload's first look.
        let priority = current_priority();
        for workload in self.cache.end_secret_listing(namespace) {
            self.queue.add_as(workload, priority);
        }
    }
}

/// A key as a 128-bit digest: what a ConfigMap, Secret or workload relist remembers of
/// each key it returned. A set of the keys themselves (with a copy of the name of every
/// Secret nothing uses) was most of what a relist of 100,000 objects held for a moment:
/// ~6 MB of the 9 MB by which the resident peak rose above the steady state. Two keys
/// share a digest with a chance of about 2^-128, and then a deleted object would only
/// stay until the next relist.
fn digest<K: std::hash::Hash>(key: &K) -> u128 {
    use std::hash::{Hash, Hasher};
    let half = |salt: u8| {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        salt.hash(&mut hasher);
        key.hash(&mut hasher);
        hasher.finish() as u128
    };
    (half(0) << 64) | half(1)
}

/// Tracks what a relist returned, to drop what it did not.
struct Relist<K> {
    seen: Option<HashSet<K>>,
    on_synced: Option<OnSynced>,
}

impl<K: Eq + std::hash::Hash> Relist<K> {
    fn new(on_synced: OnSynced) -> Relist<K> {
        Relist {
            seen: None,
            on_synced: Some(on_synced),
        }
    }

    fn start(&mut self) {
        self.seen = Some(HashSet::new());
    }

    fn saw(&mut self, key: K) {
        self.seen.get_or_insert_with(HashSet::new).insert(key);
    }

    /// Whether no list is complete yet (this is the first).
    fn is_first(&self) -> bool {
        self.on_synced.is_some()
    }

    /// What the relist returned; counts the first complete list.
    fn finish(&mut self) -> HashSet<K> {
        if let Some(on_synced) = self.on_synced.take() {
            on_synced();
        }
        self.seen.take().unwrap_or_default()
    }
}

/// Which of a kind's objects a watch lists: all of them, except for Secrets, which two
/// watches share: every Secret but Helm's release records whole, and the records (the
/// largest Secrets of most clusters, never mounted) as metadata, a watch started only once
/// one is found in use (while none is, it costs no watch, thread or bookmarks). A relist
/// forgets only what its own watch would have returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretPart {
    All,
    HelmReleases,
    NotHelmReleases,
}

impl SecretPart {
    /// What the cache's entries must say to be this watch's (`None`: every one).
    fn helm_releases(self) -> Option<bool> {
        match self {
            SecretPart::All => None,
            SecretPart::HelmReleases => Some(true),
            SecretPart::NotHelmReleases => Some(false),
        }
    }
}

/// Writes ConfigMap or Secret events into the cache through the [`Router`].
pub struct ConfigSink {
    kind: ConfigKind,
    /// Which of them its watch lists.
    part: SecretPart,
    namespace: Option<String>,
    router: Arc<Router>,
    relist: Relist<u128>,
    /// This watch, for the cache's record of lists under way.
    id: u64,
}

impl ConfigSink {
    pub fn new(
        kind: ConfigKind,
        namespace: Option<String>,
        router: Arc<Router>,
        on_synced: OnSynced,
    ) -> ConfigSink {
        static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        ConfigSink {
            kind,
            part: SecretPart::All,
            namespace,
            router,
            relist: Relist::new(on_synced),
            id: NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        }
    }

    /// The sink of a watch that lists only `part` of the Secrets.
    pub fn part(mut self, part: SecretPart) -> ConfigSink {
        self.part = part;
        self
    }

    pub fn handle<I: ConfigItem>(&mut self, event: Event<I>) {
        match event {
            Event::InitStart => {
                self.router.cache.config_relisting(self.id, true);
                self.relist.start();
            }
            Event::InitApply(item) => {
                // The first list is a first sight, background work (its dependents are
                // new too); what a relist finds changed is a change missed, urgent.
                let priority = if self.relist.is_first() {
                    Priority::Background
                } else {
                    Priority::Urgent
                };
                // Every listed key, kept or not: an unused Secret dropped here may be read
                // and cached before the list ends, and it still exists.
                let key = with_priority(priority, || self.apply(item.into_object())).key();
                self.relist.saw(digest(&key));
            }
            Event::InitUnchanged(object) => {
                // As delivered before: still there, and nothing to apply.
                let key = ConfigKey::new(self.kind, &object.namespace, &object.name);
                self.relist.saw(digest(&key));
            }
            Event::Apply(item) => {
                self.apply(item.into_object());
            }
            Event::Delete(item) => {
                let obj = item.into_object();
                let key = ConfigKey::new(self.kind, &obj.metadata.namespace, &obj.metadata.name);
                // Re-created meanwhile under the name, and brought by the other watch of
                // Secrets (a release record become an ordinary Secret, or back): it stays.
                let cached = self.router.cache.config(&key);
                if cached.is_some_and(|e| e.uid != Uid::new(&obj.metadata.uid)) {
                    return;
                }
                self.router.remove(&key);
            }
            Event::InitDone => {
                let seen = self.relist.finish();
                let cache = &self.router.cache;
                let listed = |key: &ConfigKey| seen.contains(&digest(key));
                for key in cache.configs_not_listed(
                    self.kind,
                    self.namespace.as_deref(),
                    self.part.helm_releases(),
                    &listed,
                ) {
                    log::debug!("{key}: gone after relist");
                    self.router.remove(&key);
                }
                cache.config_relisting(self.id, false);
            }
        }
    }

    fn apply(&self, obj: ConfigObject) -> Applied {
        // A class's data is what its Pods mounted, never in the object.
        if obj.data.is_some() && self.kind != ConfigKind::SecretProviderClass {
            self.router.apply_whole(self.kind, obj)
        } else {
            let helm_release = (self.part == SecretPart::HelmReleases).then_some(true);
            self.router.apply_metadata(self.kind, obj, helm_release)
        }
    }
}

/// Writes the Secrets Store CSI driver's pod statuses (`SecretProviderClassPodStatus`)
/// into the cache through the [`Router`]: which Pod mounted which versions of which class.
pub struct PodStatusSink {
    namespace: Option<String>,
    router: Arc<Router>,
    /// Counts the first list as the sync; what a list returned is marked in the cache
    /// itself (a copy of every key would cost more than the statuses).
    relist: Relist<()>,
    /// The list under way, from [`Cache::begin_mount_relist`].
    listing: Option<u32>,
    /// This watch, for the cache's record of lists under way (a workload is not adopted
    /// from versions a failing list keeps out of date).
    id: u64,
}

impl PodStatusSink {
    pub fn new(
        namespace: Option<String>,
        router: Arc<Router>,
        on_synced: OnSynced,
    ) -> PodStatusSink {
        static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        PodStatusSink {
            namespace,
            router,
            relist: Relist::new(on_synced),
            listing: None,
            // Apart from the ConfigSinks' ids: counted down from the top.
            id: u64::MAX - NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        }
    }

    pub fn handle(&mut self, event: Event<PodStatusItem>) {
        match event {
            Event::InitStart => {
                self.router.cache.config_relisting(self.id, true);
                self.relist.start();
                self.listing = Some(self.router.cache.begin_mount_relist());
            }
            Event::InitApply(status) => {
                // The first list is a first sight (see ConfigSink::handle).
                let priority = if self.relist.is_first() {
                    Priority::Background
                } else {
                    Priority::Urgent
                };
                with_priority(priority, || self.apply(&status, true, self.listing))
            }
            // Its relists list whole (a pod status's versions are not in its metadata).
            Event::InitUnchanged(_) => {}
            Event::Apply(status) => self.apply(&status, true, None),
            Event::Delete(status) => self.apply(&status, false, None),
            Event::InitDone => {
                self.relist.finish();
                if let Some(listed) = self.listing.take() {
                    let gone = self
                        .router
                        .cache
                        .mounts_not_listed(self.namespace.as_deref(), listed);
                    for (class, pod) in gone {
                        log::debug!("{class}: the pod status of Pod {pod} is gone after relist");
                        self.router.set_mount(&class, &pod, None, 0, None);
                    }
                }
                self.router.cache.config_relisting(self.id, false);
            }
        }
    }

    /// Records (`exists`) or forgets a pod status; `listed`: the relist it came with.
    fn apply(&self, status: &PodStatusItem, exists: bool, listed: Option<u32>) {
        let mounted = &status.status;
        if mounted.pod_name.is_empty() || mounted.secret_provider_class_name.is_empty() {
            log::debug!(
                "pod status {}/{} names no Pod or class yet: skipped",
                status.metadata.namespace,
                status.metadata.name
            );
            return;
        }
        let class = ConfigKey::new(
            ConfigKind::SecretProviderClass,
            &status.metadata.namespace,
            &mounted.secret_provider_class_name,
        );
        let objects = exists.then_some(&mounted.objects[..]);
        self.router.set_mount(
            &class,
            &mounted.pod_name,
            objects,
            status.incarnation(),
            listed,
        );
    }
}

/// Writes running Pods or ReplicaSets (metadata) into the cache through the [`Router`]:
/// which Pods vote on what their workload mounted ([`crate::model::owners`]). A Pod that
/// starts running, stops or begins terminating may move the versions its workload counts:
/// the workloads of the classes it has a pod status for reconcile once their debounce
/// window closes.
pub struct OwnedSink {
    kind: OwnedKind,
    namespace: Option<String>,
    router: Arc<Router>,
    relist: Relist<(Box<str>, u64)>,
}

impl OwnedSink {
    pub fn new(
        kind: OwnedKind,
        namespace: Option<String>,
        router: Arc<Router>,
        on_synced: OnSynced,
    ) -> OwnedSink {
        OwnedSink {
            kind,
            namespace,
            router,
            relist: Relist::new(on_synced),
        }
    }

    pub fn handle(&mut self, event: Event<OwnedItem>) {
        match event {
            Event::InitStart => self.relist.start(),
            Event::InitApply(item) => {
                let m = &item.metadata;
                self.relist
                    .saw(Owners::listed_key(self.kind, &m.namespace, &m.name));
                let priority = if self.relist.is_first() {
                    Priority::Background
                } else {
                    Priority::Urgent
                };
                with_priority(priority, || self.apply(&item, !item.terminating));
            }
            Event::InitUnchanged(object) => {
                self.relist.saw(Owners::listed_key(
                    self.kind,
                    &object.namespace,
                    &object.name,
                ));
            }
            Event::Apply(item) => self.apply(&item, !item.terminating),
            Event::Delete(item) => self.apply(&item, false),
            Event::InitDone => {
                let seen = self.relist.finish();
                let moved =
                    self.router
                        .cache
                        .owned_not_listed(self.kind, self.namespace.as_deref(), &seen);
                self.router.votes_moved(&moved, "Pods gone after relist");
            }
        }
    }

    fn apply(&self, item: &OwnedItem, present: bool) {
        let m = &item.metadata;
        let controller = item
            .controller
            .as_ref()
            .map(|(kind, name)| (kind.as_str(), name.as_str()));
        let moved =
            self.router
                .cache
                .set_owned(self.kind, &m.namespace, &m.name, controller, present);
        self.router.votes_moved(&moved, &m.name);
    }
}

/// Writes workload events into the cache and enqueues the workload.
pub struct WorkloadSink {
    resource: Arc<Resource>,
    namespace: Option<String>,
    router: Arc<Router>,
    relist: Relist<u128>,
    /// Workloads already warned about for older Wave's finalizer; only ones that exist
    /// (a deleted one is forgotten, and a relist keeps what it listed), so namespaces
    /// created and deleted do not grow it, and one created again is warned about again.
    warned_wave: HashSet<WorkloadKey>,
}

impl WorkloadSink {
    pub fn new(
        resource: Arc<Resource>,
        namespace: Option<String>,
        router: Arc<Router>,
        on_synced: OnSynced,
    ) -> WorkloadSink {
        WorkloadSink {
            resource,
            namespace,
            router,
            relist: Relist::new(on_synced),
            warned_wave: HashSet::new(),
        }
    }

    pub fn handle(&mut self, event: Event<WorkloadObject>) {
        match event {
            Event::InitStart => self.relist.start(),
            Event::InitApply(obj) => {
                let key = self.apply(&obj);
                self.warn_wave_leftovers(&key, &obj);
                self.relist.saw(digest(&key));
            }
            Event::InitUnchanged(object) => {
                let key =
                    WorkloadKey::new(Arc::clone(&self.resource), &object.namespace, &object.name);
                self.relist.saw(digest(&key));
            }
            Event::Apply(obj) => {
                // Warned here too: a relist that compares does not apply it again.
                let key = self.apply(&obj);
                self.warn_wave_leftovers(&key, &obj);
            }
            Event::Delete(obj) => {
                let key = self.key(&obj);
                self.warned_wave.remove(&key);
                self.forget(key);
            }
            Event::InitDone => {
                let seen = self.relist.finish();
                let cache = &self.router.cache;
                let namespace = self.namespace.as_deref();
                let listed = |key: &WorkloadKey| seen.contains(&digest(key));
                for key in cache.workloads_not_listed(&self.resource, namespace, &listed) {
                    self.forget(key);
                }
                self.warned_wave.retain(|k| seen.contains(&digest(k)));
                self.warned_wave.release_when_empty();
            }
        }
    }

    fn key(&self, obj: &WorkloadObject) -> WorkloadKey {
        WorkloadKey::new(
            Arc::clone(&self.resource),
            &obj.metadata.namespace,
            &obj.metadata.name,
        )
    }

    fn apply(&self, obj: &WorkloadObject) -> WorkloadKey {
        let key = self.key(obj);
        let cache = &self.router.cache;
        let before = cache.workload(&key);
        // The first look at a workload (its adoption, the first reads of what it uses) is
        // background work, and so is what happens to it until that look (its status moves
        // as its Pods start): a change of a workload already seen goes before it.
        let first_look =
            before.is_none() || self.router.queue.class_of(&key) == Some(Priority::Background);
        let priority = if first_look {
            Priority::Background
        } else {
            Priority::Urgent
        };
        if cache.upsert_workload(
            &key,
            WorkloadEntry::from_object(&key.resource, obj, &self.router.policy),
        ) {
            // Referenced now (the fetcher reads only what is referenced), so read the
            // Secrets whose data is not current.
            if let Some(entry) = cache.workload(&key) {
                if counts_new_secret_patterns(before.as_deref(), &entry) {
                    // Unused Secrets are not kept: the ones a new pattern matches are
                    // found by listing the namespace (the workload waits for it).
                    cache.begin_secret_listing(Arc::clone(&key.namespace));
                    self.router
                        .fetcher
                        .request_namespace(Arc::clone(&key.namespace), priority);
                }
                self.router.fetch_missing(&entry.references, priority);
                self.router
                    .fetch_missing_keys(&cache.counted_by_name(&key.namespace, &entry), priority);
            }
            self.router.queue.add_as(key.clone(), priority);
        }
        key
    }

    /// One warning per workload that carries older Wave's finalizer: wavelet does not
    /// write it (it is the user's to remove, with `wavelet migrate wave`).
    fn warn_wave_leftovers(&mut self, key: &WorkloadKey, obj: &WorkloadObject) {
        if obj
            .metadata
            .finalizers
            .iter()
            .any(|f| f == crate::migrate::WAVE_FINALIZER)
            && self.warned_wave.insert(key.clone())
        {
            log::warn!(
                "{key} carries the finalizer {} that older Wave versions left: it cannot be deleted while it does, and Wave's owner references on its ConfigMaps and Secrets make them go with it; run `wavelet migrate wave -n {}` to remove both",
                crate::migrate::WAVE_FINALIZER,
                key.namespace
            );
        }
    }

    fn forget(&self, key: WorkloadKey) {
        self.router
            .recorder
            .forget_object(&key.resource.kind, &key.namespace, &key.name);
        if self.router.cache.upsert_workload(&key, None) {
            self.router.queue.add(key);
        }
    }
}

/// Whether `after` counts Secrets by name patterns that `before` did not have.
fn counts_new_secret_patterns(before: Option<&WorkloadEntry>, after: &WorkloadEntry) -> bool {
    let mut now = after.counting.secret_patterns().peekable();
    now.peek().is_some() && before.is_none_or(|before| !before.counting.secret_patterns().eq(now))
}

/// Writes the Namespace watch (`--namespace-selector`, filtered on the server) into the
/// cache's scope; a namespace entering the scope wakes its workloads and delete-mode
/// objects are acted on from their next data change.
pub struct NamespaceSink {
    router: Arc<Router>,
    relist: Relist<Box<str>>,
    /// `--namespace-selector`: the watch (filtered by it) says which namespaces are in
    /// scope. Without it the watch only reads the Namespaces' fan-out annotations.
    scopes: bool,
}

impl NamespaceSink {
    pub fn new(router: Arc<Router>, on_synced: OnSynced, scopes: bool) -> NamespaceSink {
        NamespaceSink {
            router,
            relist: Relist::new(on_synced),
            scopes,
        }
    }

    /// Stores a Namespace's pause and restart window; a change wakes its workloads.
    fn gates(&self, ns: &NamespaceItem, gone: bool) {
        let gates = (!gone).then(|| Gates::from_annotations(&ns.metadata.annotations));
        if self
            .router
            .cache
            .set_namespace_gates(&ns.metadata.name, gates)
        {
            for key in self.router.cache.workloads_in(&ns.metadata.name) {
                self.router.queue.add(key);
            }
        }
    }

    pub fn handle(&mut self, event: Event<NamespaceItem>) {
        let scope = self.router.cache.scope();
        match &event {
            Event::InitApply(ns) | Event::Apply(ns) => {
                if ns.is_terminating() {
                    self.router
                        .recorder
                        .namespace_terminating(&ns.metadata.name);
                }
                self.gates(ns, false)
            }
            Event::Delete(ns) => {
                self.router.recorder.forget_namespace(&ns.metadata.name);
                self.gates(ns, true);
            }
            Event::InitStart | Event::InitUnchanged(_) | Event::InitDone => {}
        }
        if !self.scopes {
            if let Event::InitStart = event {
                self.relist.start();
            } else if let Event::InitDone = event {
                self.relist.finish();
            }
            return;
        }
        match event {
            Event::InitStart => self.relist.start(),
            Event::InitApply(ns) => self.relist.saw(ns.metadata.name.into()),
            Event::InitUnchanged(ns) => self.relist.saw(ns.name.into()),
            Event::Apply(ns) => {
                if scope.insert(&ns.metadata.name) {
                    self.entered(&ns.metadata.name);
                }
            }
            Event::Delete(ns) => {
                if scope.remove(&ns.metadata.name) {
                    log::info!(
                        "namespace {} no longer matches --namespace-selector: not acting there",
                        ns.metadata.name
                    );
                }
            }
            Event::InitDone => {
                let listed = self.relist.finish();
                for namespace in scope.replace(listed) {
                    self.entered(&namespace);
                }
            }
        }
    }

    fn entered(&self, namespace: &str) {
        log::info!("namespace {namespace} matches --namespace-selector: acting there");
        for key in self.router.cache.workloads_in(namespace) {
            self.router.queue.add(key);
        }
        if let Some(delete_mode) = &self.router.delete_mode {
            for key in self.router.cache.delete_mode_configs_in(namespace) {
                delete_mode.enqueue(key);
            }
        }
    }
}

/// Keeps hash mode's copy of `wavelet-state` current (fan-outs, urgent grants, the global
/// pause) and wakes what a change there concerns: every workload for the global pause, the
/// users of a ConfigMap/Secret whose fan-out entry changed (`wavelet resume`).
pub struct StateSink {
    state: Arc<StateConfigMap>,
    router: Arc<Router>,
    relist: Relist<()>,
    listed: bool,
    /// Alerts on fan-out holds (`--alert-on-hold`), told after every event.
    hold_alerts: Option<HoldAlerts>,
    /// The first complete list is in.
    synced: bool,
}

impl StateSink {
    pub fn new(
        state: Arc<StateConfigMap>,
        router: Arc<Router>,
        on_synced: OnSynced,
        hold_alerts: Option<HoldAlerts>,
    ) -> StateSink {
        StateSink {
            state,
            router,
            relist: Relist::new(on_synced),
            listed: false,
            hold_alerts,
            synced: false,
        }
    }

    pub fn handle(&mut self, event: Event<StateObject>) {
        let changed = match event {
            Event::InitStart => {
                self.relist.start();
                self.listed = false;
                return;
            }
            Event::InitApply(object) => {
                self.listed = true;
                self.state.observed(Some(object))
            }
            Event::InitUnchanged(_) => {
                // The copy held is current.
                self.listed = true;
                Vec::new()
            }
            Event::Apply(object) => self.state.observed(Some(object)),
            Event::Delete(_) => self.state.observed(None),
            Event::InitDone => {
                // The copy is set before the list counts as done: the initial sync reads
                // the state as soon as every first list is in, and must find it here
                // (absent, when nothing was listed), not read it again.
                let changed = if self.listed {
                    Vec::new()
                } else {
                    self.state.observed(None)
                };
                self.relist.finish();
                self.synced = true;
                changed
            }
        };
        if let Some(hold_alerts) = &mut self.hold_alerts {
            hold_alerts.observe(&self.state, self.synced);
        }
        self.wake(&changed);
    }

    fn wake(&self, changed: &[String]) {
        let cache = &self.router.cache;
        if changed.iter().any(|k| k == PAUSE_KEY) {
            log::info!("the global pause changed: every workload looks again");
            for key in cache.workload_keys() {
                self.router.queue.add(key);
            }
            return;
        }
        for key in changed {
            let Some(rest) = key.strip_prefix("fanout.") else {
                continue;
            };
            let mut parts = rest.splitn(3, '.');
            let (Some(kind), Some(namespace), Some(name)) =
                (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            let kind = match kind {
                "configmap" => ConfigKind::ConfigMap,
                "secret" => ConfigKind::Secret,
                _ => continue,
            };
            for workload in cache.dependents(&ConfigKey::new(kind, namespace, name)) {
                self.router.queue.add(workload);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn entry(annotations: serde_json::Value) -> WorkloadEntry {
        let obj: WorkloadObject = serde_json::from_value(json!({
            "metadata": {"name": "w", "namespace": "ns", "uid": "u", "resourceVersion": "1",
                         "annotations": annotations},
            "spec": {"template": {"spec": {"containers": [{"name": "app", "image": "i"}]}}}
        }))
        .unwrap();
        WorkloadEntry::from_object(&Resource::deployments(), &obj, &Policy::default())
            .expect("opted in")
    }

    #[test]
    fn only_a_new_or_changed_secret_pattern_lists_the_namespace() {
        let plain = entry(json!({"wavelet.dev/update-on-config-change": "true"}));
        let secrets = entry(json!({"secret.reloader.stakater.com/reload": "db-.*"}));
        let other = entry(json!({"secret.reloader.stakater.com/reload": "api-.*"}));
        let configmaps = entry(json!({"configmap.reloader.stakater.com/reload": "app-.*"}));
        assert!(!counts_new_secret_patterns(None, &plain));
        assert!(counts_new_secret_patterns(None, &secrets));
        assert!(counts_new_secret_patterns(Some(&plain), &secrets));
        assert!(counts_new_secret_patterns(Some(&secrets), &other));
        // Unchanged patterns (a resync, a status update) list nothing again.
        assert!(!counts_new_secret_patterns(Some(&secrets), &secrets));
        // ConfigMaps are kept whole: their patterns need no listing.
        assert!(!counts_new_secret_patterns(None, &configmaps));
    }

    #[test]
    fn a_key_s_digest_is_the_same_for_equal_keys_and_differs_for_others() {
        let key = |name: &str| ConfigKey::new(ConfigKind::ConfigMap, "ns", name);
        assert_eq!(digest(&key("a")), digest(&key("a")));
        assert_ne!(digest(&key("a")), digest(&key("b")));
        assert_ne!(
            digest(&key("a")),
            digest(&ConfigKey::new(ConfigKind::Secret, "ns", "a"))
        );
    }

    #[test]
    fn a_relist_returns_what_it_saw_and_the_first_one_counts_as_the_sync() {
        let synced = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&synced);
        let mut relist = Relist::new(Box::new(move || {
            counter.fetch_add(1, Ordering::SeqCst);
        }));
        relist.start();
        relist.saw("a");
        relist.saw("b");
        assert_eq!(relist.finish(), HashSet::from(["a", "b"]));
        relist.start();
        relist.saw("c");
        assert_eq!(relist.finish(), HashSet::from(["c"]));
        assert_eq!(
            synced.load(Ordering::SeqCst),
            1,
            "synced once, at the first list"
        );
    }
}
