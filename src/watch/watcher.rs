//! The list+watch loop of one resource (in one namespace or all), as an explicit state
//! machine moved forward by [`Watcher::step`] and seen by callers as a blocking iterator
//! of [`Event`]s.
//!
//! Recovery rules, one match arm each: paginated LIST → WATCH from the list's
//! resourceVersion with bookmarks; a dropped stream → re-watch from the last seen
//! resourceVersion after a jittered exponential backoff; a reason to doubt the watch → relist
//! at once: `410 Expired/Gone` (HTTP or an ERROR event), an event that cannot be decoded, a
//! resourceVersion going backwards, a stream that ends after a silence longer than
//! `silence` (no event, no bookmark: what the API server sends at least every minute);
//! every `resync` (jittered) → relist, so anything missed (deletions included) is caught:
//! the caller sees `InitStart`, `InitApply`s (and `InitUnchanged`s), `InitDone` and drops
//! what the relist did not return. A watch that RBAC forbids (`403`: `list` granted,
//! `watch` not, as Reloader's chart grants workloads) → relist every `poll` instead; a
//! forbidden list of a resource that may be left out → an empty list, tried again every
//! `poll`.
//!
//! A relist that compares ([`WatchConfig::compare_relists`], for kinds watched whole): after
//! the first list, a relist asks only for metadata (`PartialObjectMetadataList`), compares
//! each object's uid and resourceVersion with what this watcher last delivered (a digest
//! per object, [`Delivered`]), reports the equal ones as `InitUnchanged` and reads the
//! others one by one ([`Source::get`]), or LISTs the kind whole when more differ than
//! [`list_in_full`] allows. A relist then costs the metadata and what changed.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::de::{self, DeserializeOwned, Deserializer, MapAccess, Visitor};
use serde::Deserialize;

use crate::error::{Error, Status};
use crate::objects::ObjectMeta;
use crate::stop::Stop;

/// Room kept for queued events between lists.
const KEEP_READY_CAPACITY: usize = 16;

/// `--resync`'s default (see docs/notes/h34-relist.md for the reasoning): the watch carries
/// every change, the relist is the last resort for what it silently lost.
pub const DEFAULT_RESYNC: Duration = Duration::from_secs(4 * 3600);

/// A relist that compares reads the differing objects one by one, unless more differ
/// than this many, or than 1 in `LIST_IN_FULL_SHARE` of the objects listed: then it LISTs
/// the kind whole. See [`list_in_full`].
const LIST_IN_FULL_ABOVE: usize = 32;
const LIST_IN_FULL_SHARE: usize = 100;

/// What a watcher tells its caller.
#[derive(Debug)]
pub enum Event<T> {
    /// An object was added or modified.
    Apply(T),
    /// An object was deleted (its last state).
    Delete(T),
    /// A (re)list begins: objects not applied before `InitDone` are gone.
    InitStart,
    /// An object returned by the list.
    InitApply(T),
    /// An object the relist found as it was last delivered (same uid, same
    /// resourceVersion): it still exists and nothing about it changed.
    InitUnchanged(ObjectRef),
    /// The list is complete.
    InitDone,
}

/// Objects a watcher can track.
pub trait Object: DeserializeOwned + Send + 'static {
    /// `metadata`: its identity and version.
    fn metadata(&self) -> &ObjectMeta;

    /// `metadata.resourceVersion`.
    fn resource_version(&self) -> &str {
        &self.metadata().resource_version
    }
}

/// An object as a metadata list names it (`PartialObjectMetadata`): who it is and which
/// version, nothing else.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectRef {
    #[serde(default)]
    pub namespace: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub uid: String,
    #[serde(default)]
    pub resource_version: String,
}

impl ObjectRef {
    fn of(metadata: &ObjectMeta) -> ObjectRef {
        ObjectRef {
            namespace: metadata.namespace.clone(),
            name: metadata.name.clone(),
            uid: metadata.uid.clone(),
            resource_version: metadata.resource_version.clone(),
        }
    }
}

/// One page of a LIST.
pub struct Page<T> {
    pub items: Vec<T>,
    pub resource_version: String,
    pub continue_token: Option<String>,
}

/// A stream of newline-delimited watch events.
pub trait LineStream: Send {
    /// The next line; `Ok(None)` at a clean end of the stream.
    fn next_line(&mut self) -> Result<Option<Vec<u8>>, Error>;
}

/// Where a watcher lists and watches: the API server, or a script in tests.
pub trait Source<T>: Send {
    fn list(&self, continue_token: Option<&str>) -> Result<Page<T>, Error>;
    /// One page of the same LIST, metadata only (for a relist that compares).
    fn list_metadata(&self, continue_token: Option<&str>) -> Result<Page<ObjectRef>, Error>;
    /// One object whole; `None` when it does not exist.
    fn get(&self, object: &ObjectRef) -> Result<Option<T>, Error>;
    /// A streaming list: a watch that sends every object as `ADDED`, then a bookmark
    /// annotated `k8s.io/initial-events-end`, then goes on as a watch from there.
    fn stream_list(&self, timeout: Duration) -> Result<Box<dyn LineStream>, Error>;
    fn watch(
        &self,
        resource_version: &str,
        timeout: Duration,
    ) -> Result<Box<dyn LineStream>, Error>;
}

/// Timing of a watcher.
#[derive(Debug, Clone)]
pub struct WatchConfig {
    /// Relist about this often ("poll the world"): each period is drawn at random from
    /// [3/4, 5/4) of it ([`jittered`]), so replicas and restarts do not relist together.
    pub resync: Duration,
    /// A stream that ends this long after its last line (event or bookmark) is not
    /// trusted: relist. The API server sends a bookmark about every minute.
    pub silence: Duration,
    /// Relists after the first ask for metadata and read only what changed.
    pub compare_relists: bool,
    /// Lists whole by a streaming list where the server offers it (else page by page).
    pub stream_lists: bool,
    /// First retry delay; doubles per failure with jitter up to `max_backoff`.
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
    /// When watching is forbidden, relist this often instead.
    pub poll: Duration,
    /// A forbidden list counts as an empty one (for kinds that may be left out, such as
    /// workloads: none of them is then watched, and none is written), tried every `poll`.
    pub forbidden_list_is_empty: bool,
}

impl Default for WatchConfig {
    fn default() -> WatchConfig {
        WatchConfig {
            resync: DEFAULT_RESYNC,
            silence: Duration::from_secs(180),
            compare_relists: false,
            stream_lists: true,
            initial_backoff: Duration::from_millis(200),
            max_backoff: Duration::from_secs(30),
            poll: Duration::from_secs(30),
            forbidden_list_is_empty: false,
        }
    }
}

/// Why a watcher relisted or re-watched, for logs and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restart {
    /// First list.
    Initial,
    /// `--resync` elapsed.
    Resync,
    /// The resourceVersion expired (410).
    Expired,
    /// A list or watch request failed.
    Error,
    /// The watch stream ended cleanly (server timeout) and was reopened.
    StreamEnd,
    /// The watch stream broke (connection dropped, truncated line).
    StreamBroken,
    /// Watching (or listing) is forbidden: the poll period elapsed.
    Poll,
    /// A watch event could not be decoded: what it carried is unknown.
    Undecodable,
    /// A resourceVersion went backwards (a server restored from an older state).
    Backwards,
    /// The stream ended after a silence longer than bookmarks allow.
    Silence,
}

impl Restart {
    pub fn as_str(self) -> &'static str {
        match self {
            Restart::Initial => "initial",
            Restart::Resync => "resync",
            Restart::Expired => "expired",
            Restart::Error => "error",
            Restart::StreamEnd => "stream_end",
            Restart::StreamBroken => "stream_broken",
            Restart::Poll => "poll",
            Restart::Undecodable => "undecodable",
            Restart::Backwards => "backwards",
            Restart::Silence => "silence",
        }
    }
}

enum State {
    /// Nothing listed yet, or a relist is due.
    Empty(Restart),
    /// Listing; the next page follows `continue_token`.
    Listing { continue_token: Option<String> },
    /// A streaming list is due: open it (or list page by page if the server refused one).
    Stream,
    /// A streaming list under way: `ADDED` per object until the bookmark that ends the
    /// initial events; the same stream then goes on as the watch.
    Streaming {
        stream: Box<dyn LineStream>,
        opened: Instant,
    },
    /// Relisting metadata only, comparing it with what was delivered; `differ`: the
    /// objects found changed or new so far, `listed`: how many were listed.
    Comparing {
        continue_token: Option<String>,
        differ: Vec<ObjectRef>,
        listed: usize,
    },
    /// Reading the objects the comparison found changed, one by one; then watching from
    /// `rv`, the metadata list's.
    Reading {
        rv: String,
        differ: std::vec::IntoIter<ObjectRef>,
    },
    /// Listed (or a stream ended): open a watch from `rv`.
    Listed { rv: String },
    Watching {
        rv: String,
        stream: Box<dyn LineStream>,
        opened: Instant,
        events: u64,
        /// When the last line (event or bookmark) arrived, or the stream opened.
        heard: Instant,
    },
}

/// What a watcher that compares its relists last delivered: a 32-bit digest of each
/// object's namespace and name → a 32-bit digest of its uid and resourceVersion (8 bytes
/// an object, not its copy). Two keys that share a digest (about one pair among 100,000
/// objects) only cost both a read at each relist; a changed object is taken for unchanged
/// with a chance of 2^-32. `seen`: what the relist under way found, to forget the rest at
/// its end.
#[derive(Default)]
struct Delivered {
    versions: HashMap<u32, u32>,
    seen: Option<HashSet<u32>>,
    /// A first list completed: a relist can compare with it.
    complete: bool,
}

impl Delivered {
    fn applied(&mut self, object: &ObjectRef, listed: bool) {
        let key = key_digest(&object.namespace, &object.name);
        self.versions
            .insert(key, version_digest(&object.uid, &object.resource_version));
        if listed {
            self.seen.get_or_insert_with(HashSet::new).insert(key);
        }
    }

    fn deleted(&mut self, object: &ObjectRef) {
        self.versions
            .remove(&key_digest(&object.namespace, &object.name));
    }

    /// Whether `object` is as delivered; if so the relist under way has seen it.
    fn unchanged(&mut self, object: &ObjectRef) -> bool {
        let key = key_digest(&object.namespace, &object.name);
        let same =
            self.versions.get(&key) == Some(&version_digest(&object.uid, &object.resource_version));
        if same {
            self.seen.get_or_insert_with(HashSet::new).insert(key);
        }
        same
    }

    fn start(&mut self) {
        self.seen = Some(HashSet::new());
    }

    /// The relist is complete: what it did not find is gone.
    fn finish(&mut self) {
        let seen = self.seen.take().unwrap_or_default();
        self.versions.retain(|key, _| seen.contains(key));
        self.versions.shrink_to_fit();
        self.complete = true;
    }
}

fn digest32(parts: [&str; 2]) -> u32 {
    // SipHash with fixed keys, folded to 32 bits.
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    parts.hash(&mut hasher);
    let full = hasher.finish();
    (full ^ (full >> 32)) as u32
}

fn key_digest(namespace: &str, name: &str) -> u32 {
    digest32([namespace, name])
}

fn version_digest(uid: &str, resource_version: &str) -> u32 {
    digest32([uid, resource_version])
}

/// Whether a relist that found `differ` of `listed` objects changed LISTs the kind whole
/// rather than read each: when more than [`LIST_IN_FULL_ABOVE`] differ and more than 1 in
/// [`LIST_IN_FULL_SHARE`]. A read costs a request for one object; a LIST page costs one
/// request for 500. At 1,000 objects, up to 32 reads (3 %); at 100,000, up to 1,000 reads,
/// five times the LIST's 200 pages in requests but 1 % of its bytes.
fn list_in_full(differ: usize, listed: usize) -> bool {
    differ > LIST_IN_FULL_ABOVE && differ > listed / LIST_IN_FULL_SHARE
}

/// Whether `err`, the answer to a streaming list, refuses it: a 4xx other than 401 (a
/// token to read again), 408, 410 (a relist) and 429 (a wait); older servers and a
/// WatchList gate off answer 422, a watch RBAC forbids 403.
fn refuses_streaming(err: &Error) -> bool {
    err.status()
        .is_some_and(|s| (400..500).contains(&s.code) && !matches!(s.code, 401 | 408 | 410 | 429))
}

/// `period` scaled by a factor in [3/4, 5/4) drawn from `random` in [0, 1).
fn jittered(period: Duration, random: f64) -> Duration {
    period.mul_f64(0.75 + 0.5 * random.clamp(0.0, 1.0))
}

/// Whether `seen` is older than `current`, both as the API server's numbers; opaque ones
/// (not numbers) never compare.
fn went_backwards(current: &str, seen: &str) -> bool {
    match (current.parse::<u64>(), seen.parse::<u64>()) {
        (Ok(current), Ok(seen)) => seen < current,
        _ => false,
    }
}

/// The list+watch loop of one resource.
pub struct Watcher<T, S> {
    name: String,
    source: S,
    config: WatchConfig,
    state: Option<State>,
    ready: VecDeque<Event<T>>,
    failures: u32,
    /// What RBAC forbids (`watching` or `listing`): said once, then polled.
    forbidden: Option<&'static str>,
    /// When a poll (watching or listing forbidden) lists again; the wait is taken before
    /// that list, after the events of the last one are delivered.
    poll_at: Option<Instant>,
    relist_at: Instant,
    /// What was delivered, when relists compare (`None`: they list whole).
    delivered: Option<Delivered>,
    /// Lists whole by streaming: until the server refuses it once (then said once).
    streaming: bool,
    stop: Arc<Stop>,
    on_restart: Box<dyn FnMut(Restart) + Send>,
    rng: u64,
}

impl<T: Object, S: Source<T>> Watcher<T, S> {
    /// `name` identifies the watcher in logs (`configmaps in all namespaces`).
    pub fn new(name: String, source: S, config: WatchConfig, stop: Arc<Stop>) -> Watcher<T, S> {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos() as u64
            ^ 0x9e37_79b9_7f4a_7c15;
        let mut watcher = Watcher {
            name,
            source,
            relist_at: Instant::now(),
            delivered: config.compare_relists.then(Delivered::default),
            streaming: config.stream_lists,
            config,
            state: Some(State::Empty(Restart::Initial)),
            ready: VecDeque::new(),
            failures: 0,
            forbidden: None,
            poll_at: None,
            stop,
            on_restart: Box::new(|_| {}),
            rng: seed | 1,
        };
        watcher.schedule_relist();
        watcher
    }

    /// Called each time the watcher relists or re-watches (for metrics).
    pub fn on_restart(mut self, hook: impl FnMut(Restart) + Send + 'static) -> Self {
        self.on_restart = Box::new(hook);
        self
    }

    fn stopped(&self) -> bool {
        self.stop.is_set()
    }

    fn schedule_relist(&mut self) {
        let random = (self.next_random() % 1000) as f64 / 1000.0;
        self.relist_at = Instant::now() + jittered(self.config.resync, random);
    }

    /// Moves the state machine one step; events it produces are queued in `ready`.
    pub fn step(&mut self) {
        let state = self.state.take().expect("state is always put back");
        let next = match state {
            State::Empty(reason) => {
                if let Some(at) = self.poll_at.take() {
                    self.sleep(at.saturating_duration_since(Instant::now()));
                }
                (self.on_restart)(reason);
                self.schedule_relist();
                self.ready.push_back(Event::InitStart);
                match &mut self.delivered {
                    Some(delivered) if delivered.complete => {
                        log::debug!(
                            "{}: relisting metadata to compare ({})",
                            self.name,
                            reason.as_str()
                        );
                        delivered.start();
                        State::Comparing {
                            continue_token: None,
                            differ: Vec::new(),
                            listed: 0,
                        }
                    }
                    delivered => {
                        log::debug!("{}: listing ({})", self.name, reason.as_str());
                        if let Some(delivered) = delivered {
                            delivered.start();
                        }
                        self.list_whole()
                    }
                }
            }
            State::Listing { continue_token } => {
                match self.source.list(continue_token.as_deref()) {
                    Ok(page) => {
                        for item in page.items {
                            self.deliver(Event::InitApply(item));
                        }
                        match page.continue_token.filter(|t| !t.is_empty()) {
                            Some(token) => State::Listing {
                                continue_token: Some(token),
                            },
                            None => {
                                if self.forbidden == Some("listing") {
                                    self.forbidden = None;
                                    log::info!("{}: listing is allowed now", self.name);
                                }
                                self.relisted(page.resource_version)
                            }
                        }
                    }
                    Err(err) if err.is_forbidden() && self.config.forbidden_list_is_empty => {
                        self.say_forbidden("listing", &err);
                        // Delivered before the wait: it does not hold the initial sync.
                        self.deliver(Event::InitDone);
                        self.poll_at = Some(Instant::now() + self.config.poll);
                        State::Empty(Restart::Poll)
                    }
                    Err(err) => self.list_failed(&err),
                }
            }
            State::Stream => {
                let timeout = self.watch_timeout();
                match self.source.stream_list(timeout) {
                    Ok(stream) => State::Streaming {
                        stream,
                        opened: Instant::now(),
                    },
                    Err(err) if refuses_streaming(&err) => self.streaming_refused(&err),
                    Err(err) => self.list_failed(&err),
                }
            }
            State::Streaming { mut stream, opened } => match stream.next_line() {
                Ok(Some(line)) => self.on_initial_line(stream, opened, &line),
                Ok(None) => {
                    // Ended before the initial events did: a half-done list, start over.
                    let err = Error::Transport("the streaming list ended before its end".into());
                    self.list_failed(&err)
                }
                Err(err) => self.list_failed(&err),
            },
            State::Comparing {
                continue_token,
                mut differ,
                mut listed,
            } => match self.source.list_metadata(continue_token.as_deref()) {
                Ok(page) => {
                    listed += page.items.len();
                    let delivered = self.delivered.as_mut().expect("comparing needs it");
                    for object in page.items {
                        if delivered.unchanged(&object) {
                            self.ready.push_back(Event::InitUnchanged(object));
                        } else {
                            differ.push(object);
                        }
                    }
                    match page.continue_token.filter(|t| !t.is_empty()) {
                        Some(token) => State::Comparing {
                            continue_token: Some(token),
                            differ,
                            listed,
                        },
                        None if list_in_full(differ.len(), listed) => {
                            log::debug!(
                                "{}: {} of {listed} objects changed: listing them whole",
                                self.name,
                                differ.len()
                            );
                            self.list_whole()
                        }
                        None => {
                            log::debug!(
                                "{}: {} of {listed} objects changed: reading those",
                                self.name,
                                differ.len()
                            );
                            State::Reading {
                                rv: page.resource_version,
                                differ: differ.into_iter(),
                            }
                        }
                    }
                }
                Err(err) => self.list_failed(&err),
            },
            State::Reading { rv, mut differ } => match differ.next() {
                None => self.relisted(rv),
                Some(object) => match self.source.get(&object) {
                    Ok(Some(item)) => {
                        self.deliver(Event::InitApply(item));
                        State::Reading { rv, differ }
                    }
                    // Deleted since the list: the relist's end forgets it.
                    Ok(None) => State::Reading { rv, differ },
                    Err(err) => self.list_failed(&err),
                },
            },
            State::Listed { rv } => {
                if Instant::now() >= self.relist_at {
                    State::Empty(Restart::Resync)
                } else {
                    self.open_watch(rv)
                }
            }
            State::Watching {
                rv,
                mut stream,
                opened,
                events,
                heard,
            } => {
                if Instant::now() >= self.relist_at {
                    State::Empty(Restart::Resync)
                } else {
                    match stream.next_line() {
                        Ok(Some(line)) => {
                            let watching = Watching {
                                rv,
                                stream,
                                opened,
                                events,
                            };
                            self.on_line(watching, &line)
                        }
                        Ok(None) if heard.elapsed() >= self.config.silence => {
                            self.silent_too_long(&rv, heard)
                        }
                        Ok(None) => {
                            if events == 0 && opened.elapsed() < Duration::from_secs(1) {
                                // The server ends a watch at once: do not spin.
                                self.back_off_for(Duration::ZERO);
                            }
                            (self.on_restart)(Restart::StreamEnd);
                            log::debug!("{}: watch ended, re-watching from {rv}", self.name);
                            State::Listed { rv }
                        }
                        Err(err @ Error::Decode(_)) => {
                            // Not a routine disconnect: the server sent something broken,
                            // whose change is unknown.
                            log::warn!("{}: watch event rejected ({err}), relisting", self.name);
                            self.back_off_for(Duration::ZERO);
                            State::Empty(Restart::Undecodable)
                        }
                        Err(_) if heard.elapsed() >= self.config.silence => {
                            self.silent_too_long(&rv, heard)
                        }
                        Err(err) => {
                            (self.on_restart)(Restart::StreamBroken);
                            log::debug!(
                                "{}: watch broke ({err}), re-watching from {rv}",
                                self.name
                            );
                            self.back_off(&err);
                            State::Listed { rv }
                        }
                    }
                }
            }
        };
        self.state = Some(next);
    }

    /// Queues `event`, keeping the record of what was delivered.
    fn deliver(&mut self, event: Event<T>) {
        if let Some(delivered) = &mut self.delivered {
            match &event {
                Event::Apply(o) => delivered.applied(&ObjectRef::of(o.metadata()), false),
                Event::InitApply(o) => delivered.applied(&ObjectRef::of(o.metadata()), true),
                Event::Delete(o) => delivered.deleted(&ObjectRef::of(o.metadata())),
                Event::InitDone => delivered.finish(),
                Event::InitStart | Event::InitUnchanged(_) => {}
            }
        }
        self.ready.push_back(event);
    }

    /// A (re)list is complete at `rv`: watch from there.
    fn relisted(&mut self, rv: String) -> State {
        self.failures = 0;
        self.deliver(Event::InitDone);
        State::Listed { rv }
    }

    /// The state that lists every object whole: a streaming list unless refused.
    fn list_whole(&self) -> State {
        if self.streaming {
            State::Stream
        } else {
            State::Listing {
                continue_token: None,
            }
        }
    }

    /// The server refused a streaming list (an older one, or the WatchList gate off): this
    /// kind lists page by page from now on, said once.
    fn streaming_refused(&mut self, err: &Error) -> State {
        self.streaming = false;
        log::info!(
            "{}: a streaming list was refused ({err}): listing page by page from now on",
            self.name
        );
        State::Listing {
            continue_token: None,
        }
    }

    /// One line of a streaming list before its initial events end.
    fn on_initial_line(
        &mut self,
        stream: Box<dyn LineStream>,
        opened: Instant,
        line: &[u8],
    ) -> State {
        let event: WatchEvent<T> = match serde_json::from_slice(line) {
            Ok(event) => event,
            Err(err) => {
                log::warn!(
                    "{}: undecodable line in a streaming list ({err}), relisting",
                    self.name
                );
                self.back_off_for(Duration::ZERO);
                return State::Empty(Restart::Undecodable);
            }
        };
        match event {
            // The initial events carry each object's own resourceVersion, in no order.
            WatchEvent::Added(obj) | WatchEvent::Modified(obj) => {
                self.deliver(Event::InitApply(obj));
                State::Streaming { stream, opened }
            }
            WatchEvent::Deleted(_) | WatchEvent::Bookmark(_, false) => {
                State::Streaming { stream, opened }
            }
            WatchEvent::Bookmark(rv, true) => {
                log::debug!("{}: streaming list complete at {rv}", self.name);
                self.failures = 0;
                self.deliver(Event::InitDone);
                State::Watching {
                    rv,
                    stream,
                    opened,
                    events: 0,
                    heard: Instant::now(),
                }
            }
            WatchEvent::Error(status) if status.is_expired() => {
                self.list_failed(&Error::Api(status))
            }
            // Any other error (a server without the storage support it needs): as client-go,
            // list page by page instead.
            WatchEvent::Error(status) => self.streaming_refused(&Error::Api(status)),
        }
    }

    /// A list, a comparison or a read failed: a half-done relist is never stitched to a
    /// later one, so start over after a backoff.
    fn list_failed(&mut self, err: &Error) -> State {
        let reason = if err.is_expired() {
            Restart::Expired
        } else {
            Restart::Error
        };
        log::warn!("{}: list failed, relisting: {err}", self.name);
        self.back_off(err);
        State::Empty(reason)
    }

    /// The stream ended after `heard` with nothing since, no bookmark either: whatever
    /// happened meanwhile may never arrive (a black-holed connection, a restored server).
    fn silent_too_long(&mut self, rv: &str, heard: Instant) -> State {
        log::info!(
            "{}: the watch from {rv} ended after {}s without an event or bookmark: relisting",
            self.name,
            heard.elapsed().as_secs()
        );
        State::Empty(Restart::Silence)
    }
    /// How long a watch asks the server to stay open: client-go's 5-10 minutes at random,
    /// never past the next relist.
    fn watch_timeout(&mut self) -> Duration {
        let until_relist = self.relist_at.saturating_duration_since(Instant::now());
        let random = Duration::from_secs(300 + self.next_random() % 300);
        random.min(until_relist).max(Duration::from_secs(1))
    }

    fn open_watch(&mut self, rv: String) -> State {
        let timeout = self.watch_timeout();
        match self.source.watch(&rv, timeout) {
            Ok(stream) => {
                if self.forbidden.take().is_some() {
                    log::info!(
                        "{}: watching is allowed now: changes arrive at once",
                        self.name
                    );
                }
                State::Watching {
                    rv,
                    stream,
                    opened: Instant::now(),
                    events: 0,
                    heard: Instant::now(),
                }
            }
            Err(err) if err.is_forbidden() => {
                self.say_forbidden("watching", &err);
                self.poll_at = Some(Instant::now() + self.config.poll);
                State::Empty(Restart::Poll)
            }
            Err(err) if err.is_expired() => {
                log::debug!("{}: watch from {rv} expired, relisting", self.name);
                State::Empty(Restart::Expired)
            }
            Err(err) => {
                let retry_watch = matches!(&err, Error::Transport(_))
                    || err.status().is_some_and(Status::is_too_many_requests);
                self.back_off(&err);
                if retry_watch {
                    log::debug!("{}: watch failed ({err}), retrying", self.name);
                    State::Listed { rv }
                } else {
                    log::warn!("{}: watch failed, relisting: {err}", self.name);
                    State::Empty(Restart::Error)
                }
            }
        }
    }

    fn on_line(&mut self, watching: Watching, line: &[u8]) -> State {
        let Watching {
            rv,
            stream,
            opened,
            events,
        } = watching;
        let event: WatchEvent<T> = match serde_json::from_slice(line) {
            Ok(event) => event,
            Err(err) => {
                // A truncated or garbled line: what it carried is unknown, and a re-watch
                // may not replay it (a bookmark may follow): relist, comparing.
                log::warn!(
                    "{}: undecodable watch line rejected ({err}), relisting",
                    self.name
                );
                self.back_off_for(Duration::ZERO);
                return State::Empty(Restart::Undecodable);
            }
        };
        self.failures = 0;
        let seen = match &event {
            WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o) => {
                o.resource_version()
            }
            WatchEvent::Bookmark(seen, _) => seen.as_str(),
            WatchEvent::Error(_) => "",
        };
        if went_backwards(&rv, seen) {
            log::warn!(
                "{}: the watch went back from resourceVersion {rv} to {seen} (an API server restored from an older state?): relisting",
                self.name
            );
            return State::Empty(Restart::Backwards);
        }
        let rv = next_rv(rv, seen);
        let watching = |rv| State::Watching {
            rv,
            stream,
            opened,
            events: events + 1,
            heard: Instant::now(),
        };
        match event {
            WatchEvent::Added(obj) | WatchEvent::Modified(obj) => {
                self.deliver(Event::Apply(obj));
                watching(rv)
            }
            WatchEvent::Deleted(obj) => {
                self.deliver(Event::Delete(obj));
                watching(rv)
            }
            WatchEvent::Bookmark(..) => watching(rv),
            WatchEvent::Error(status) if status.is_expired() => {
                log::debug!(
                    "{}: watch from {rv} expired ({status}), relisting",
                    self.name
                );
                State::Empty(Restart::Expired)
            }
            WatchEvent::Error(status) => {
                log::warn!("{}: watch error event, relisting: {status}", self.name);
                self.back_off(&Error::Api(status));
                State::Empty(Restart::Error)
            }
        }
    }

    /// A forbidden watch or list: a warning the first time, naming what to grant.
    fn say_forbidden(&mut self, what: &'static str, err: &Error) {
        if self.forbidden.replace(what) == Some(what) {
            log::debug!("{}: {what} still forbidden, polling", self.name);
            return;
        }
        let instead = if what == "watching" {
            "listing it instead"
        } else {
            "taking it as empty (nothing of it is acted on) and listing again"
        };
        log::warn!(
            "{}: {what} is forbidden ({err}); {instead} every {:?}; grant `list` and `watch` on it so that changes arrive at once",
            self.name,
            self.config.poll
        );
    }

    /// Sleeps the next backoff step, or the server's Retry-After if longer.
    fn back_off(&mut self, err: &Error) {
        let retry_after = err.status().and_then(|s| s.retry_after).unwrap_or_default();
        self.back_off_for(retry_after);
    }

    fn back_off_for(&mut self, at_least: Duration) {
        self.failures = self.failures.saturating_add(1);
        let random = (self.next_random() % 1000) as f64 / 1000.0;
        self.sleep(backoff(&self.config, self.failures, random, at_least));
    }

    fn sleep(&self, total: Duration) {
        crate::stop::sleep_unless_stopped(&self.stop, total);
    }

    fn next_random(&mut self) -> u64 {
        // xorshift64: jitter only, not cryptography.
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }
}

impl<T: Object, S: Source<T>> Iterator for Watcher<T, S> {
    type Item = Event<T>;

    /// Blocks until the next event; `None` once the stop flag is set.
    fn next(&mut self) -> Option<Event<T>> {
        loop {
            if self.stopped() {
                return None;
            }
            if let Some(event) = self.ready.pop_front() {
                return Some(event);
            }
            if self.ready.capacity() > KEEP_READY_CAPACITY {
                // A list page grew it to hundreds of objects: do not keep that memory
                // for the watch's one event at a time.
                self.ready = VecDeque::new();
            }
            self.step();
        }
    }
}

/// How long to wait after the `failures`-th failure in a row (1-based): `initial_backoff`
/// doubling up to `max_backoff`, with full jitter over [base, 2 × base) like client-go's
/// `wait.Jitter(1.0)` (`random` in [0, 1)), but never longer than `resync`: a watcher that
/// keeps failing still tries once per resync period, so it is back within one period of
/// the server recovering. A longer Retry-After (`at_least`) from the server wins.
fn backoff(config: &WatchConfig, failures: u32, random: f64, at_least: Duration) -> Duration {
    let base = config
        .initial_backoff
        .saturating_mul(1u32 << failures.saturating_sub(1).min(16))
        .min(config.max_backoff);
    let jittered = base + base.mul_f64(random);
    jittered
        .min(config.resync.max(config.initial_backoff))
        .max(at_least)
}

fn next_rv(current: String, seen: &str) -> String {
    if seen.is_empty() {
        current
    } else {
        seen.to_string()
    }
}

/// A watch in progress, as a line arrives.
struct Watching {
    rv: String,
    stream: Box<dyn LineStream>,
    opened: Instant,
    events: u64,
}

impl fmt::Debug for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            State::Empty(reason) => write!(f, "Empty({})", reason.as_str()),
            State::Listing { .. } => write!(f, "Listing"),
            State::Stream => write!(f, "Stream"),
            State::Streaming { .. } => write!(f, "Streaming"),
            State::Comparing { .. } => write!(f, "Comparing"),
            State::Reading { rv, .. } => write!(f, "Reading({rv})"),
            State::Listed { rv } => write!(f, "Listed({rv})"),
            State::Watching { rv, .. } => write!(f, "Watching({rv})"),
        }
    }
}

/// One decoded watch line. `type` is read first (the API server writes it first), so the
/// object is decoded straight into `T`, or into a `Status` for ERROR, with no copy.
#[derive(Debug)]
enum WatchEvent<T> {
    Added(T),
    Modified(T),
    Deleted(T),
    /// A bookmark's resourceVersion; `true` when it ends a streaming list's initial events
    /// (annotated `k8s.io/initial-events-end: "true"`).
    Bookmark(String, bool),
    Error(Status),
}

/// The annotation of the bookmark that ends a streaming list's initial events (§2.7).
const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

#[derive(Deserialize)]
struct BookmarkObject {
    #[serde(default)]
    metadata: BookmarkMeta,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct BookmarkMeta {
    #[serde(default)]
    resource_version: String,
    #[serde(default)]
    annotations: std::collections::BTreeMap<String, String>,
}

#[derive(Deserialize)]
struct StatusObject {
    #[serde(default)]
    code: u16,
    #[serde(default)]
    reason: String,
    #[serde(default)]
    message: String,
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for WatchEvent<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct EventVisitor<T>(PhantomData<T>);

        impl<'de, T: DeserializeOwned> Visitor<'de> for EventVisitor<T> {
            type Value = WatchEvent<T>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a watch event {\"type\":..., \"object\":...}")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut kind: Option<String> = None;
                let mut event = None;
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "type" => kind = Some(map.next_value()?),
                        "object" => {
                            let Some(kind) = kind.as_deref() else {
                                return Err(de::Error::custom(
                                    "watch event object before its type",
                                ));
                            };
                            event = Some(match kind {
                                "ADDED" => WatchEvent::Added(map.next_value()?),
                                "MODIFIED" => WatchEvent::Modified(map.next_value()?),
                                "DELETED" => WatchEvent::Deleted(map.next_value()?),
                                "BOOKMARK" => {
                                    let meta = map.next_value::<BookmarkObject>()?.metadata;
                                    let end = meta
                                        .annotations
                                        .get(INITIAL_EVENTS_END)
                                        .is_some_and(|v| v == "true");
                                    WatchEvent::Bookmark(meta.resource_version, end)
                                }
                                "ERROR" => {
                                    let s: StatusObject = map.next_value()?;
                                    WatchEvent::Error(Status {
                                        code: s.code,
                                        reason: s.reason,
                                        message: s.message,
                                        retry_after: None,
                                        causes: Vec::new(),
                                    })
                                }
                                other => {
                                    return Err(de::Error::custom(format!(
                                        "invalid watch event type {other:?}"
                                    )))
                                }
                            });
                        }
                        _ => {
                            map.next_value::<de::IgnoredAny>()?;
                        }
                    }
                }
                event.ok_or_else(|| de::Error::custom("watch event without object"))
            }
        }

        d.deserialize_map(EventVisitor(PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[derive(Debug, Deserialize)]
    struct Obj {
        metadata: ObjectMeta,
    }

    impl Object for Obj {
        fn metadata(&self) -> &ObjectMeta {
            &self.metadata
        }
    }

    /// What the scripted source answers, in order.
    enum Answer {
        Page(Vec<&'static str>, &'static str, Option<&'static str>),
        ListError(u16, &'static str),
        Stream(Vec<&'static str>, bool),
        WatchError(u16, &'static str),
        /// A metadata page: (name, resourceVersion) of each object, the list's rv.
        Meta(Vec<(&'static str, &'static str)>, &'static str),
        /// A GET: the object's resourceVersion, or not found.
        Got(Option<&'static str>),
    }

    #[derive(Clone, Default)]
    struct Script {
        answers: Arc<Mutex<VecDeque<Answer>>>,
        calls: Arc<Mutex<Vec<String>>>,
    }

    struct ScriptedStream {
        lines: VecDeque<&'static str>,
        broken: bool,
    }

    impl LineStream for ScriptedStream {
        fn next_line(&mut self) -> Result<Option<Vec<u8>>, Error> {
            match self.lines.pop_front() {
                Some(line) => Ok(Some(line.as_bytes().to_vec())),
                None if self.broken => Err(Error::Transport("connection reset".into())),
                None => Ok(None),
            }
        }
    }

    fn status(code: u16, reason: &str) -> Error {
        Error::Api(Status {
            code,
            reason: reason.into(),
            message: String::new(),
            retry_after: None,
            causes: Vec::new(),
        })
    }

    impl Source<Obj> for Script {
        fn list(&self, continue_token: Option<&str>) -> Result<Page<Obj>, Error> {
            self.calls
                .lock()
                .unwrap()
                .push(format!("list {}", continue_token.unwrap_or("-")));
            match self.answers.lock().unwrap().pop_front() {
                Some(Answer::Page(names, rv, token)) => Ok(Page {
                    items: names.iter().map(|n| obj(n, "1")).collect(),
                    resource_version: rv.into(),
                    continue_token: token.map(String::from),
                }),
                Some(Answer::ListError(code, reason)) => Err(status(code, reason)),
                _ => panic!("unexpected list"),
            }
        }

        fn list_metadata(&self, continue_token: Option<&str>) -> Result<Page<ObjectRef>, Error> {
            self.calls
                .lock()
                .unwrap()
                .push(format!("meta {}", continue_token.unwrap_or("-")));
            match self.answers.lock().unwrap().pop_front() {
                Some(Answer::Meta(objects, rv)) => Ok(Page {
                    items: objects
                        .iter()
                        .map(|(name, rv)| ObjectRef::of(&obj(name, rv).metadata))
                        .collect(),
                    resource_version: rv.into(),
                    continue_token: None,
                }),
                Some(Answer::ListError(code, reason)) => Err(status(code, reason)),
                // Script exhausted: fail, and the caller stops.
                _ => Err(Error::Transport("script exhausted".into())),
            }
        }

        fn stream_list(&self, _timeout: Duration) -> Result<Box<dyn LineStream>, Error> {
            self.calls.lock().unwrap().push("stream".into());
            match self.answers.lock().unwrap().pop_front() {
                Some(Answer::Stream(lines, broken)) => Ok(Box::new(ScriptedStream {
                    lines: lines.into(),
                    broken,
                })),
                Some(Answer::WatchError(code, reason)) => Err(status(code, reason)),
                _ => Err(Error::Transport("script exhausted".into())),
            }
        }

        fn get(&self, object: &ObjectRef) -> Result<Option<Obj>, Error> {
            self.calls
                .lock()
                .unwrap()
                .push(format!("get {}", object.name));
            match self.answers.lock().unwrap().pop_front() {
                Some(Answer::Got(rv)) => Ok(rv.map(|rv| obj(&object.name, rv))),
                _ => panic!("unexpected get"),
            }
        }

        fn watch(&self, rv: &str, _timeout: Duration) -> Result<Box<dyn LineStream>, Error> {
            self.calls.lock().unwrap().push(format!("watch {rv}"));
            match self.answers.lock().unwrap().pop_front() {
                Some(Answer::Stream(lines, broken)) => Ok(Box::new(ScriptedStream {
                    lines: lines.into(),
                    broken,
                })),
                Some(Answer::WatchError(code, reason)) => Err(status(code, reason)),
                // Script exhausted: stop the watcher by answering forever-empty streams.
                _ => Err(Error::Transport("script exhausted".into())),
            }
        }
    }

    fn obj(name: &str, rv: &str) -> Obj {
        Obj {
            metadata: ObjectMeta {
                name: name.into(),
                resource_version: rv.into(),
                ..Default::default()
            },
        }
    }

    fn fast() -> WatchConfig {
        WatchConfig {
            resync: Duration::from_secs(3600),
            silence: Duration::from_secs(3600),
            compare_relists: false,
            stream_lists: false,
            initial_backoff: Duration::from_millis(1),
            max_backoff: Duration::from_millis(2),
            poll: Duration::from_millis(1),
            forbidden_list_is_empty: false,
        }
    }

    /// Runs the watcher until the script is used up; returns events as short strings.
    fn run(answers: Vec<Answer>) -> (Vec<String>, Vec<String>) {
        run_with(fast(), answers)
    }

    fn run_with(config: WatchConfig, answers: Vec<Answer>) -> (Vec<String>, Vec<String>) {
        let script = Script::default();
        let n = answers.len();
        script.answers.lock().unwrap().extend(answers);
        let stop = Arc::new(Stop::new());
        let mut watcher = Watcher::new("test".into(), script.clone(), config, stop.clone());
        let mut seen = Vec::new();
        while script.calls.lock().unwrap().len() <= n {
            watcher.step();
            seen.extend(watcher.ready.drain(..).map(|e| match e {
                Event::Apply(o) => {
                    format!("apply {}@{}", o.metadata.name, o.metadata.resource_version)
                }
                Event::Delete(o) => {
                    format!("delete {}@{}", o.metadata.name, o.metadata.resource_version)
                }
                Event::InitStart => "init".into(),
                Event::InitApply(o) => format!("initapply {}", o.metadata.name),
                Event::InitUnchanged(o) => format!("unchanged {}", o.name),
                Event::InitDone => "done".into(),
            }));
        }
        let calls = script.calls.lock().unwrap().clone();
        (seen, calls)
    }

    const ADDED_A5: &str = r#"{"type":"ADDED","object":{"kind":"ConfigMap","metadata":{"name":"a","resourceVersion":"5"}}}"#;
    const MODIFIED_A6: &str =
        r#"{"type":"MODIFIED","object":{"metadata":{"name":"a","resourceVersion":"6"}}}"#;
    const MODIFIED_A9: &str =
        r#"{"type":"MODIFIED","object":{"metadata":{"name":"a","resourceVersion":"9"}}}"#;
    const DELETED_B7: &str =
        r#"{"type":"DELETED","object":{"metadata":{"name":"b","resourceVersion":"7"}}}"#;
    const BOOKMARK_9: &str = r#"{"type":"BOOKMARK","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"resourceVersion":"9"}}}"#;
    const ERROR_410: &str = r#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (8211)","reason":"Expired","code":410}}"#;

    #[test]
    fn a_forbidden_watch_is_replaced_by_a_relist_every_poll_period() {
        // Not the error backoff, which a successful list resets to its first step: a
        // watch that is always forbidden would relist in a tight loop.
        let config = WatchConfig {
            poll: Duration::from_millis(60),
            ..fast()
        };
        let started = Instant::now();
        let (events, calls) = run_with(
            config,
            vec![
                Answer::Page(vec!["a"], "4", None),
                Answer::WatchError(403, "Forbidden"),
                Answer::Page(vec!["a", "b"], "6", None),
                Answer::WatchError(403, "Forbidden"),
                Answer::Page(vec!["b"], "8", None),
                Answer::Stream(vec![MODIFIED_A9], false),
            ],
        );
        assert!(
            started.elapsed() >= Duration::from_millis(120),
            "polled every 60 ms"
        );
        assert_eq!(
            calls,
            ["list -", "watch 4", "list -", "watch 6", "list -", "watch 8", "watch 9"]
        );
        assert_eq!(
            events,
            [
                "init",
                "initapply a",
                "done",
                "init",
                "initapply a",
                "initapply b",
                "done",
                "init",
                "initapply b",
                "done",
                "apply a@9"
            ]
        );
    }

    #[test]
    fn a_forbidden_list_of_a_kind_that_may_be_left_out_is_an_empty_list_tried_again() {
        let config = WatchConfig {
            forbidden_list_is_empty: true,
            ..fast()
        };
        let (events, calls) = run_with(
            config,
            vec![
                Answer::ListError(403, "Forbidden"),
                Answer::ListError(403, "Forbidden"),
                Answer::Page(vec!["a"], "4", None),
            ],
        );
        assert_eq!(calls, ["list -", "list -", "list -", "watch 4"]);
        assert_eq!(
            events,
            [
                "init",
                "done",
                "init",
                "done",
                "init",
                "initapply a",
                "done"
            ]
        );
        // Other kinds wait for their list, as before.
        let (events, _) = run(vec![
            Answer::ListError(403, "Forbidden"),
            Answer::Page(vec!["a"], "4", None),
        ]);
        assert_eq!(events, ["init", "init", "initapply a", "done"]);
    }

    #[test]
    fn a_forbidden_list_is_done_at_once_and_the_poll_waits_before_the_next_list() {
        let script = Script::default();
        script
            .answers
            .lock()
            .unwrap()
            .push_back(Answer::ListError(403, "Forbidden"));
        let config = WatchConfig {
            forbidden_list_is_empty: true,
            poll: Duration::from_secs(30),
            ..fast()
        };
        let stop = Arc::new(Stop::new());
        let mut watcher = Watcher::new("test".into(), script, config, stop);
        let started = Instant::now();
        assert!(matches!(watcher.next(), Some(Event::InitStart)));
        assert!(matches!(watcher.next(), Some(Event::InitDone)));
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the initial sync waited for the poll: {:?}",
            started.elapsed()
        );
    }

    #[test]
    fn lists_all_pages_then_watches_from_the_list_resource_version() {
        let (events, calls) = run(vec![
            Answer::Page(vec!["a"], "4", Some("tok")),
            Answer::Page(vec!["b"], "4", None),
            Answer::Stream(vec![ADDED_A5, MODIFIED_A6, DELETED_B7], false),
        ]);
        assert_eq!(calls[..3], ["list -", "list tok", "watch 4"]);
        assert_eq!(
            events,
            [
                "init",
                "initapply a",
                "initapply b",
                "done",
                "apply a@5",
                "apply a@6",
                "delete b@7"
            ]
        );
        assert_eq!(
            calls[3], "watch 7",
            "a cleanly ended stream is re-watched from the last rv"
        );
    }

    #[test]
    fn a_bookmark_advances_the_resource_version_and_emits_nothing() {
        let (events, calls) = run(vec![
            Answer::Page(vec![], "4", None),
            Answer::Stream(vec![BOOKMARK_9], false),
        ]);
        assert_eq!(events, ["init", "done"]);
        assert_eq!(calls[2], "watch 9");
    }

    #[test]
    fn a_dropped_connection_rewatches_from_the_last_seen_version() {
        let (events, calls) = run(vec![
            Answer::Page(vec![], "4", None),
            Answer::Stream(vec![ADDED_A5], true),
        ]);
        assert_eq!(events, ["init", "done", "apply a@5"]);
        assert_eq!(calls[2], "watch 5");
    }

    #[test]
    fn a_truncated_line_is_not_applied_and_relists() {
        // What it carried is unknown, and the bookmark after it may move the rv past it.
        let truncated = &MODIFIED_A6[..30];
        let (events, calls) = run(vec![
            Answer::Page(vec![], "4", None),
            Answer::Stream(
                vec![ADDED_A5, Box::leak(truncated.to_string().into_boxed_str())],
                false,
            ),
            Answer::Page(vec!["a"], "6", None),
        ]);
        assert_eq!(
            events,
            ["init", "done", "apply a@5", "init", "initapply a", "done"]
        );
        assert_eq!(calls[..4], ["list -", "watch 4", "list -", "watch 6"]);
    }

    #[test]
    fn a_resource_version_going_backwards_relists_and_is_not_applied() {
        let (events, calls) = run(vec![
            Answer::Page(vec![], "10", None),
            Answer::Stream(vec![ADDED_A5], false),
            Answer::Page(vec![], "12", None),
        ]);
        assert_eq!(events, ["init", "done", "init", "done"]);
        assert_eq!(calls[..4], ["list -", "watch 10", "list -", "watch 12"]);
    }

    #[test]
    fn a_bookmark_going_backwards_relists() {
        let (_, calls) = run(vec![
            Answer::Page(vec![], "10", None),
            Answer::Stream(vec![BOOKMARK_9], false),
            Answer::Page(vec![], "12", None),
        ]);
        assert_eq!(calls[..4], ["list -", "watch 10", "list -", "watch 12"]);
    }

    #[test]
    fn a_stream_that_ends_after_a_silence_without_bookmarks_relists() {
        let silent = WatchConfig {
            silence: Duration::ZERO,
            ..fast()
        };
        let (_, calls) = run_with(
            silent,
            vec![
                Answer::Page(vec![], "4", None),
                Answer::Stream(vec![], false),
                Answer::Page(vec![], "6", None),
            ],
        );
        assert_eq!(calls[..4], ["list -", "watch 4", "list -", "watch 6"]);
        // Within the silence allowed, the same end re-watches (as in the test above).
        let (_, calls) = run(vec![
            Answer::Page(vec![], "4", None),
            Answer::Stream(vec![], true),
            Answer::Stream(vec![], false),
        ]);
        assert_eq!(calls[..3], ["list -", "watch 4", "watch 4"]);
    }

    fn comparing() -> WatchConfig {
        WatchConfig {
            resync: Duration::ZERO,
            compare_relists: true,
            ..fast()
        }
    }

    #[test]
    fn a_relist_that_compares_reads_only_the_objects_that_changed() {
        let (events, calls) = run_with(
            comparing(),
            vec![
                Answer::Page(vec!["a", "b", "c"], "4", None),
                // a as delivered, b changed, c gone, d new and then deleted before its GET.
                Answer::Meta(vec![("a", "1"), ("b", "7"), ("d", "8")], "9"),
                Answer::Got(Some("7")),
                Answer::Got(None),
                // c was forgotten with the relist that did not find it: it differs now.
                Answer::Meta(vec![("a", "1"), ("b", "7"), ("c", "1")], "10"),
                Answer::Got(Some("1")),
            ],
        );
        assert_eq!(
            calls,
            ["list -", "meta -", "get b", "get d", "meta -", "get c", "meta -"]
        );
        assert_eq!(
            events[..14],
            [
                "init",
                "initapply a",
                "initapply b",
                "initapply c",
                "done",
                "init",
                "unchanged a",
                "initapply b",
                "done",
                "init",
                "unchanged a",
                "unchanged b",
                "initapply c",
                "done",
            ]
        );
    }

    #[test]
    fn a_relist_that_finds_many_changed_lists_the_kind_whole() {
        let names: Vec<&'static str> = (0..40)
            .map(|i| &*Box::leak(format!("o{i}").into_boxed_str()))
            .collect();
        let changed: Vec<(&'static str, &'static str)> = names.iter().map(|n| (*n, "2")).collect();
        let (_, calls) = run_with(
            comparing(),
            vec![
                Answer::Page(names.clone(), "4", None),
                Answer::Meta(changed, "9"),
                Answer::Page(names, "9", None),
            ],
        );
        assert_eq!(calls[..3], ["list -", "meta -", "list -"]);
    }

    #[test]
    fn watch_events_count_as_delivered_for_the_next_comparison() {
        let config = WatchConfig {
            compare_relists: true,
            ..fast()
        };
        let script = Script::default();
        script.answers.lock().unwrap().extend([
            Answer::Page(vec!["b"], "4", None),
            Answer::Stream(vec![ADDED_A5, DELETED_B7], false),
        ]);
        let stop = Arc::new(Stop::new());
        let mut watcher = Watcher::new("test".into(), script.clone(), config, stop);
        while script.calls.lock().unwrap().len() < 3 {
            watcher.step();
        }
        let delivered = watcher.delivered.as_mut().unwrap();
        delivered.start();
        assert!(delivered.unchanged(&ObjectRef::of(&obj("a", "5").metadata)));
        assert!(!delivered.unchanged(&ObjectRef::of(&obj("b", "1").metadata)));
    }

    const END_8: &str = r#"{"type":"BOOKMARK","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"resourceVersion":"8","annotations":{"k8s.io/initial-events-end":"true"}}}}"#;
    const ADDED_B3: &str =
        r#"{"type":"ADDED","object":{"metadata":{"name":"b","resourceVersion":"3"}}}"#;
    const MODIFIED_A10: &str =
        r#"{"type":"MODIFIED","object":{"metadata":{"name":"a","resourceVersion":"10"}}}"#;

    fn streaming() -> WatchConfig {
        WatchConfig {
            stream_lists: true,
            ..fast()
        }
    }

    #[test]
    fn a_streaming_list_is_complete_at_the_end_bookmark_and_goes_on_as_the_watch() {
        let (events, calls) = run_with(
            streaming(),
            vec![Answer::Stream(
                // Initial events in no order of resourceVersion: not "backwards".
                vec![ADDED_A5, ADDED_B3, BOOKMARK_9, END_8, MODIFIED_A10],
                false,
            )],
        );
        assert_eq!(calls[..2], ["stream", "watch 10"]);
        assert_eq!(
            events,
            ["init", "initapply a", "initapply b", "done", "apply a@10"]
        );
    }

    #[test]
    fn a_refused_streaming_list_falls_back_to_pages_for_good() {
        let (events, calls) = run_with(
            streaming(),
            vec![
                Answer::WatchError(422, "Invalid"),
                Answer::Page(vec!["a"], "4", None),
                Answer::Stream(vec![ERROR_410], false),
                Answer::Page(vec!["a"], "6", None),
            ],
        );
        assert_eq!(
            calls[..5],
            ["stream", "list -", "watch 4", "list -", "watch 6"]
        );
        assert_eq!(
            events,
            ["init", "initapply a", "done", "init", "initapply a", "done"]
        );
    }

    #[test]
    fn a_streaming_list_cut_before_its_end_starts_over() {
        let (events, calls) = run_with(
            streaming(),
            vec![
                Answer::Stream(vec![ADDED_A5], true),
                Answer::Stream(vec![ADDED_A5, END_8], false),
            ],
        );
        assert_eq!(calls[..3], ["stream", "stream", "watch 8"]);
        assert_eq!(
            events,
            ["init", "initapply a", "init", "initapply a", "done"]
        );
    }

    #[test]
    fn the_relist_period_is_jittered_by_a_quarter_either_way() {
        let hour = Duration::from_secs(3600);
        assert_eq!(jittered(hour, 0.0), Duration::from_secs(2700));
        assert_eq!(jittered(hour, 0.5), hour);
        assert!(jittered(hour, 0.999) < Duration::from_secs(4500));
    }

    #[test]
    fn many_changed_objects_are_listed_whole_few_are_read_one_by_one() {
        assert!(!list_in_full(32, 1_000));
        assert!(list_in_full(33, 1_000));
        assert!(!list_in_full(1_000, 100_000));
        assert!(list_in_full(1_001, 100_000));
        assert!(!list_in_full(3, 3));
    }

    #[test]
    fn an_error_event_410_relists() {
        let (events, calls) = run(vec![
            Answer::Page(vec!["a"], "4", None),
            Answer::Stream(vec![ERROR_410], false),
            Answer::Page(vec!["b"], "20", None),
        ]);
        assert_eq!(
            events,
            ["init", "initapply a", "done", "init", "initapply b", "done"]
        );
        assert_eq!(calls[..4], ["list -", "watch 4", "list -", "watch 20"]);
    }

    #[test]
    fn an_http_410_on_watch_relists() {
        let (_, calls) = run(vec![
            Answer::Page(vec![], "4", None),
            Answer::WatchError(410, "Expired"),
            Answer::Page(vec![], "8", None),
        ]);
        assert_eq!(calls[..4], ["list -", "watch 4", "list -", "watch 8"]);
    }

    #[test]
    fn an_expired_continue_token_restarts_the_whole_list() {
        let (events, calls) = run(vec![
            Answer::Page(vec!["a"], "4", Some("tok")),
            Answer::ListError(410, "Expired"),
            Answer::Page(vec!["a", "b"], "6", None),
        ]);
        assert_eq!(calls[..4], ["list -", "list tok", "list -", "watch 6"]);
        assert_eq!(
            events,
            [
                "init",
                "initapply a",
                "init",
                "initapply a",
                "initapply b",
                "done"
            ]
        );
    }

    #[test]
    fn a_throttled_watch_is_retried_without_relisting() {
        let (_, calls) = run(vec![
            Answer::Page(vec![], "4", None),
            Answer::WatchError(429, "TooManyRequests"),
            Answer::Stream(vec![], false),
        ]);
        assert_eq!(calls[..3], ["list -", "watch 4", "watch 4"]);
    }

    #[test]
    fn a_server_error_on_list_backs_off_and_lists_again() {
        let (events, calls) = run(vec![
            Answer::ListError(503, "ServiceUnavailable"),
            Answer::Page(vec!["a"], "4", None),
        ]);
        assert_eq!(calls[..3], ["list -", "list -", "watch 4"]);
        assert_eq!(events, ["init", "init", "initapply a", "done"]);
    }

    #[test]
    fn the_backoff_doubles_with_jitter_up_to_the_maximum() {
        let config = WatchConfig::default();
        let wait = |failures, random| backoff(&config, failures, random, Duration::ZERO);
        assert_eq!(wait(1, 0.0), Duration::from_millis(200));
        assert_eq!(wait(2, 0.5), Duration::from_millis(600));
        assert_eq!(wait(20, 0.0), Duration::from_secs(30));
        assert_eq!(wait(20, 0.999), Duration::from_millis(59_970));
    }

    /// Regression (found by the soak): after a long run of failed lists the watcher slept up
    /// to 60 s, so with a short --resync it came back long after the server had recovered.
    #[test]
    fn a_failing_watcher_never_waits_longer_than_the_resync_period() {
        let config = WatchConfig {
            resync: Duration::from_secs(4),
            ..WatchConfig::default()
        };
        for failures in 1..=30 {
            let wait = backoff(&config, failures, 0.999, Duration::ZERO);
            assert!(wait <= Duration::from_secs(4), "{failures}: {wait:?}");
        }
        assert_eq!(
            backoff(&config, 30, 0.5, Duration::from_secs(10)),
            Duration::from_secs(10),
            "a longer Retry-After still wins"
        );
    }

    #[test]
    fn resync_relists_when_due() {
        let script = Script::default();
        script.answers.lock().unwrap().extend([
            Answer::Page(vec!["a"], "4", None),
            Answer::Page(vec![], "5", None),
        ]);
        let stop = Arc::new(Stop::new());
        let config = WatchConfig {
            resync: Duration::ZERO,
            ..fast()
        };
        let mut watcher = Watcher::new("test".into(), script.clone(), config, stop);
        for _ in 0..5 {
            watcher.step();
        }
        assert_eq!(script.calls.lock().unwrap()[..2], ["list -", "list -"]);
    }

    #[test]
    fn the_stop_flag_ends_the_iterator() {
        let stop = Arc::new(Stop::new());
        stop.set();
        let mut watcher: Watcher<Obj, Script> =
            Watcher::new("test".into(), Script::default(), fast(), stop);
        assert!(watcher.next().is_none());
    }

    #[test]
    fn unknown_event_types_are_rejected() {
        let line = r#"{"type":"WEIRD","object":{}}"#;
        assert!(serde_json::from_str::<WatchEvent<Obj>>(line).is_err());
    }
}
