//! The list+watch loop of one resource (in one namespace or all), as an explicit state
//! machine moved forward by [`Watcher::step`] and seen by callers as a blocking iterator
//! of [`Event`]s.
//!
//! Recovery rules, one match arm each: paginated LIST → WATCH from the list's
//! resourceVersion with bookmarks; a dropped or truncated stream → re-watch from the last
//! seen resourceVersion after a jittered exponential backoff; `410 Expired/Gone` (HTTP or an
//! ERROR event) → relist; every `resync` → relist, so anything missed (deletions included)
//! is caught: the caller sees `InitStart`, `InitApply`s, `InitDone` and drops what the
//! relist did not return. A watch that RBAC forbids (`403`: `list` granted, `watch` not, as
//! Reloader's chart grants workloads) → relist every `poll` instead; a forbidden list of a
//! resource that may be left out → an empty list, tried again every `poll`.

use std::collections::VecDeque;
use std::fmt;
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
    /// The list is complete.
    InitDone,
}

/// Objects a watcher can track.
pub trait Object: DeserializeOwned + Send + 'static {
    /// `metadata.resourceVersion`.
    fn resource_version(&self) -> &str;
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
    fn watch(
        &self,
        resource_version: &str,
        timeout: Duration,
    ) -> Result<Box<dyn LineStream>, Error>;
}

/// Timing of a watcher.
#[derive(Debug, Clone)]
pub struct WatchConfig {
    /// Relist this often ("poll the world").
    pub resync: Duration,
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
            resync: Duration::from_secs(600),
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
        }
    }
}

enum State {
    /// Nothing listed yet, or a relist is due.
    Empty(Restart),
    /// Listing; the next page follows `continue_token`.
    Listing { continue_token: Option<String> },
    /// Listed (or a stream ended): open a watch from `rv`.
    Listed { rv: String },
    Watching {
        rv: String,
        stream: Box<dyn LineStream>,
        opened: Instant,
        events: u64,
    },
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
        Watcher {
            name,
            source,
            relist_at: Instant::now() + config.resync,
            config,
            state: Some(State::Empty(Restart::Initial)),
            ready: VecDeque::new(),
            failures: 0,
            forbidden: None,
            poll_at: None,
            stop,
            on_restart: Box::new(|_| {}),
            rng: seed | 1,
        }
    }

    /// Called each time the watcher relists or re-watches (for metrics).
    pub fn on_restart(mut self, hook: impl FnMut(Restart) + Send + 'static) -> Self {
        self.on_restart = Box::new(hook);
        self
    }

    fn stopped(&self) -> bool {
        self.stop.is_set()
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
                log::debug!("{}: listing ({})", self.name, reason.as_str());
                self.relist_at = Instant::now() + self.config.resync;
                self.ready.push_back(Event::InitStart);
                State::Listing {
                    continue_token: None,
                }
            }
            State::Listing { continue_token } => {
                match self.source.list(continue_token.as_deref()) {
                    Ok(page) => {
                        self.ready
                            .extend(page.items.into_iter().map(Event::InitApply));
                        match page.continue_token.filter(|t| !t.is_empty()) {
                            Some(token) => State::Listing {
                                continue_token: Some(token),
                            },
                            None => {
                                self.failures = 0;
                                if self.forbidden == Some("listing") {
                                    self.forbidden = None;
                                    log::info!("{}: listing is allowed now", self.name);
                                }
                                self.ready.push_back(Event::InitDone);
                                State::Listed {
                                    rv: page.resource_version,
                                }
                            }
                        }
                    }
                    Err(err) if err.is_forbidden() && self.config.forbidden_list_is_empty => {
                        self.say_forbidden("listing", &err);
                        // Delivered before the wait: it does not hold the initial sync.
                        self.ready.push_back(Event::InitDone);
                        self.poll_at = Some(Instant::now() + self.config.poll);
                        State::Empty(Restart::Poll)
                    }
                    Err(err) => {
                        // A half-done list is never stitched to a later one: start over.
                        let reason = if err.is_expired() {
                            Restart::Expired
                        } else {
                            Restart::Error
                        };
                        log::warn!("{}: list failed, relisting: {err}", self.name);
                        self.back_off(&err);
                        State::Empty(reason)
                    }
                }
            }
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
            } => {
                if Instant::now() >= self.relist_at {
                    State::Empty(Restart::Resync)
                } else {
                    match stream.next_line() {
                        Ok(Some(line)) => self.on_line(rv, stream, opened, events, &line),
                        Ok(None) => {
                            if events == 0 && opened.elapsed() < Duration::from_secs(1) {
                                // The server ends a watch at once: do not spin.
                                self.back_off_for(Duration::ZERO);
                            }
                            (self.on_restart)(Restart::StreamEnd);
                            log::debug!("{}: watch ended, re-watching from {rv}", self.name);
                            State::Listed { rv }
                        }
                        Err(err) => {
                            (self.on_restart)(Restart::StreamBroken);
                            if matches!(err, Error::Decode(_)) {
                                // Not a routine disconnect: the server sent something broken.
                                log::warn!(
                                    "{}: watch event rejected ({err}), re-watching from {rv}",
                                    self.name
                                );
                            } else {
                                log::debug!(
                                    "{}: watch broke ({err}), re-watching from {rv}",
                                    self.name
                                );
                            }
                            self.back_off(&err);
                            State::Listed { rv }
                        }
                    }
                }
            }
        };
        self.state = Some(next);
    }

    fn open_watch(&mut self, rv: String) -> State {
        let until_relist = self.relist_at.saturating_duration_since(Instant::now());
        // client-go picks 5-10 minutes at random; never past the next relist.
        let random = Duration::from_secs(300 + self.next_random() % 300);
        let timeout = random.min(until_relist).max(Duration::from_secs(1));
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

    fn on_line(
        &mut self,
        rv: String,
        stream: Box<dyn LineStream>,
        opened: Instant,
        events: u64,
        line: &[u8],
    ) -> State {
        let event: WatchEvent<T> = match serde_json::from_slice(line) {
            Ok(event) => event,
            Err(err) => {
                // A truncated or garbled line: the event was not applied and the rv not
                // advanced, so re-watching from `rv` replays it.
                (self.on_restart)(Restart::StreamBroken);
                log::warn!(
                    "{}: undecodable watch line rejected ({err}), re-watching from {rv}",
                    self.name
                );
                self.back_off_for(Duration::ZERO);
                return State::Listed { rv };
            }
        };
        self.failures = 0;
        let events = events + 1;
        match event {
            WatchEvent::Added(obj) | WatchEvent::Modified(obj) => {
                let rv = next_rv(rv, obj.resource_version());
                self.ready.push_back(Event::Apply(obj));
                State::Watching {
                    rv,
                    stream,
                    opened,
                    events,
                }
            }
            WatchEvent::Deleted(obj) => {
                let rv = next_rv(rv, obj.resource_version());
                self.ready.push_back(Event::Delete(obj));
                State::Watching {
                    rv,
                    stream,
                    opened,
                    events,
                }
            }
            WatchEvent::Bookmark(bookmark_rv) => {
                let rv = if bookmark_rv.is_empty() {
                    rv
                } else {
                    bookmark_rv
                };
                State::Watching {
                    rv,
                    stream,
                    opened,
                    events,
                }
            }
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

impl fmt::Debug for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            State::Empty(reason) => write!(f, "Empty({})", reason.as_str()),
            State::Listing { .. } => write!(f, "Listing"),
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
    Bookmark(String),
    Error(Status),
}

#[derive(Deserialize)]
struct BookmarkObject {
    #[serde(default)]
    metadata: ObjectMeta,
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
                                "BOOKMARK" => WatchEvent::Bookmark(
                                    map.next_value::<BookmarkObject>()?
                                        .metadata
                                        .resource_version,
                                ),
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
        fn resource_version(&self) -> &str {
            &self.metadata.resource_version
        }
    }

    /// What the scripted source answers, in order.
    enum Answer {
        Page(Vec<&'static str>, &'static str, Option<&'static str>),
        ListError(u16, &'static str),
        Stream(Vec<&'static str>, bool),
        WatchError(u16, &'static str),
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
                Event::InitDone => "done".into(),
            }));
        }
        let calls = script.calls.lock().unwrap().clone();
        (seen, calls)
    }

    const ADDED_A5: &str = r#"{"type":"ADDED","object":{"kind":"ConfigMap","metadata":{"name":"a","resourceVersion":"5"}}}"#;
    const MODIFIED_A6: &str =
        r#"{"type":"MODIFIED","object":{"metadata":{"name":"a","resourceVersion":"6"}}}"#;
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
                Answer::Stream(vec![MODIFIED_A6], false),
            ],
        );
        assert!(
            started.elapsed() >= Duration::from_millis(120),
            "polled every 60 ms"
        );
        assert_eq!(
            calls,
            ["list -", "watch 4", "list -", "watch 6", "list -", "watch 8", "watch 6"]
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
                "apply a@6"
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
    fn a_truncated_line_is_not_applied_and_is_replayed_by_rewatching() {
        let truncated = &MODIFIED_A6[..30];
        let (events, calls) = run(vec![
            Answer::Page(vec![], "4", None),
            Answer::Stream(
                vec![ADDED_A5, Box::leak(truncated.to_string().into_boxed_str())],
                false,
            ),
            Answer::Stream(vec![MODIFIED_A6], false),
        ]);
        assert_eq!(events, ["init", "done", "apply a@5", "apply a@6"]);
        assert_eq!(calls[2..4], ["watch 5", "watch 6"]);
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
