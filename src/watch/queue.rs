//! The work queue between the watch threads and the reconcile workers.
//!
//! The contract of client-go's `workqueue`: a key waiting in the queue is there once, however
//! often it is added; a key is never handed to two workers at once; a key added while it
//! is being processed is processed again afterwards. On top: delayed adds (debounce,
//! throttling), per-key exponential backoff for failures, and two classes of work: a key
//! added as [`Priority::Urgent`] (a change to act on) is handed out before every key added
//! as [`Priority::Background`] (the first look at a workload, its adoption), whatever the
//! order they came in. A key added in both classes is urgent.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

pub use crate::client::Priority;

/// Collections that fill in a burst (the initial sync queues every workload; a relist
/// wakes them all) and drain to nothing keep their capacity for good: a thousand keys'
/// worth per collection. An empty one with room for more than this gives it back.
const KEPT_WHEN_EMPTY: usize = 64;

/// Gives back the capacity of a burst once drained (see [`KEPT_WHEN_EMPTY`]).
pub trait ReleaseWhenEmpty {
    fn release_when_empty(&mut self);
}

impl<K: Eq + Hash, V> ReleaseWhenEmpty for HashMap<K, V> {
    fn release_when_empty(&mut self) {
        if self.is_empty() && self.capacity() > KEPT_WHEN_EMPTY {
            self.shrink_to_fit();
        }
    }
}

impl<K: Eq + Hash> ReleaseWhenEmpty for HashSet<K> {
    fn release_when_empty(&mut self) {
        if self.is_empty() && self.capacity() > KEPT_WHEN_EMPTY {
            self.shrink_to_fit();
        }
    }
}

impl<K> ReleaseWhenEmpty for VecDeque<K> {
    fn release_when_empty(&mut self) {
        if self.is_empty() && self.capacity() > KEPT_WHEN_EMPTY {
            self.shrink_to_fit();
        }
    }
}

pub struct WorkQueue<K> {
    state: Mutex<State<K>>,
    ready: Condvar,
    /// Signalled when nothing is ready or being processed.
    idle: Condvar,
    backoff: Backoff,
}

struct State<K> {
    /// Keys ready to be handed out, urgent ones first, each class in order.
    urgent: VecDeque<K>,
    background: VecDeque<K>,
    /// Keys waiting to be processed (in a queue, or re-added while processing), by class.
    dirty: HashMap<K, Priority>,
    /// Keys being processed, by the class they were handed out as.
    processing: HashMap<K, Priority>,
    /// Delayed keys: when each becomes ready, and as what. A key keeps its earliest time
    /// and its most urgent class.
    waiting: HashMap<K, (Instant, Priority)>,
    /// The same, ordered by time (the `u64` breaks ties).
    timeline: BTreeSet<(Instant, u64)>,
    timeline_keys: HashMap<u64, K>,
    next_id: u64,
    failures: HashMap<K, u32>,
    shutting_down: bool,
}

/// Per-key exponential backoff for failed reconciles.
#[derive(Debug, Clone, Copy)]
pub struct Backoff {
    pub initial: Duration,
    pub max: Duration,
}

impl Backoff {
    /// Delay before retry number `failures` (1-based): initial × 2^(failures-1), capped.
    pub fn delay(&self, failures: u32) -> Duration {
        let factor = 1u32
            .checked_shl(failures.saturating_sub(1).min(20))
            .unwrap_or(u32::MAX);
        self.initial.saturating_mul(factor).min(self.max)
    }

    /// A server-requested wait (`Retry-After`), never longer than this backoff's longest.
    pub fn cap(&self, wait: Duration) -> Duration {
        wait.min(self.max)
    }

    /// The same, never waiting longer than `limit` (`--resync`: a key that keeps failing is
    /// still tried once per resync period, so it recovers within one period of its cause).
    pub fn capped_at(self, limit: Duration) -> Backoff {
        Backoff {
            initial: self.initial,
            max: self.max.min(limit.max(self.initial)),
        }
    }
}

impl Default for Backoff {
    fn default() -> Backoff {
        Backoff {
            initial: Duration::from_millis(100),
            max: Duration::from_secs(60),
        }
    }
}

impl<K: Clone + Eq + Hash> WorkQueue<K> {
    pub fn new(backoff: Backoff) -> WorkQueue<K> {
        WorkQueue {
            state: Mutex::new(State {
                urgent: VecDeque::new(),
                background: VecDeque::new(),
                dirty: HashMap::new(),
                processing: HashMap::new(),
                waiting: HashMap::new(),
                timeline: BTreeSet::new(),
                timeline_keys: HashMap::new(),
                next_id: 0,
                failures: HashMap::new(),
                shutting_down: false,
            }),
            ready: Condvar::new(),
            idle: Condvar::new(),
            backoff,
        }
    }

    /// Makes `key` ready now, as urgent work (a pending delayed add of it is dropped).
    pub fn add(&self, key: K) {
        self.add_as(key, Priority::Urgent);
    }

    /// Makes `key` ready now as `priority` (a pending delayed add of it is dropped, its
    /// class kept if more urgent).
    pub fn add_as(&self, key: K, priority: Priority) {
        let mut state = self.state.lock().unwrap();
        let priority = state
            .cancel_waiting(&key)
            .map_or(priority, |p| p.min(priority));
        if state.make_ready(key, priority) {
            self.ready.notify_one();
        }
    }

    /// Makes `key` ready now as urgent work, ahead of every key already ready (a pending
    /// delayed add of it is dropped; a key being processed is processed again afterwards,
    /// in line as [`WorkQueue::add`] would put it). For work that others wait on: a
    /// fan-out's released wave, whose rollout its other workloads are only told to wait
    /// for, goes before them.
    pub fn add_first(&self, key: K) {
        let mut guard = self.state.lock().unwrap();
        let state = &mut *guard;
        state.cancel_waiting(&key);
        let was = state.dirty.insert(key.clone(), Priority::Urgent);
        if state.processing.contains_key(&key) {
            return; // `done` queues it
        }
        // Already ready: in the line of its class, which `dirty` said.
        if let Some(class) = was {
            state.unqueue(&key, class);
        }
        state.urgent.push_front(key);
        self.ready.notify_one();
    }

    /// Makes `key` ready after `delay` as urgent work, unless it is already ready or due
    /// earlier.
    pub fn add_after(&self, key: K, delay: Duration) {
        self.add_after_as(key, delay, Priority::Urgent);
    }

    /// Makes `key` ready after `delay` as `priority`, unless it is already ready or due
    /// earlier (then it keeps the more urgent class of the two).
    pub fn add_after_as(&self, key: K, delay: Duration, priority: Priority) {
        if delay.is_zero() {
            return self.add_as(key, priority);
        }
        let mut state = self.state.lock().unwrap();
        if state.dirty.contains_key(&key) {
            if state.make_ready(key, priority) {
                self.ready.notify_one();
            }
            return;
        }
        let at = Instant::now() + delay;
        if let Some((due, class)) = state.waiting.get_mut(&key) {
            if *due <= at {
                *class = (*class).min(priority);
                return;
            }
        }
        let priority = state
            .cancel_waiting(&key)
            .map_or(priority, |p| p.min(priority));
        let id = state.next_id;
        state.next_id += 1;
        state.timeline.insert((at, id));
        state.timeline_keys.insert(id, key.clone());
        state.waiting.insert(key, (at, priority));
        // A worker may be sleeping until a later deadline.
        self.ready.notify_one();
    }

    /// Re-adds `key` after processing it failed with `err`: after its next backoff
    /// delay, or after the server's `Retry-After` when that is longer (both within the
    /// queue's cap). The one retry policy of every worker: the client never retries.
    pub fn add_after_failure(
        &self,
        key: K,
        priority: Priority,
        err: &crate::error::Error,
    ) -> Duration {
        let retry_after = err.status().and_then(|s| s.retry_after);
        let failures = self.count_failure(&key);
        let delay = self
            .backoff
            .delay(failures)
            .max(retry_after.map_or(Duration::ZERO, |d| self.backoff.cap(d)));
        self.add_after_as(key, delay, priority);
        delay
    }

    fn count_failure(&self, key: &K) -> u32 {
        let mut state = self.state.lock().unwrap();
        let count = state.failures.entry(key.clone()).or_insert(0);
        *count += 1;
        *count
    }

    /// Re-adds `key` after its next backoff delay, as `priority`; call when processing it
    /// failed.
    pub fn add_with_backoff(&self, key: K, priority: Priority) -> Duration {
        let failures = self.count_failure(&key);
        let delay = self.backoff.delay(failures);
        self.add_after_as(key, delay, priority);
        delay
    }

    /// Forgets the failure count of `key`; call when processing it succeeded.
    pub fn forget(&self, key: &K) {
        self.state.lock().unwrap().failures.remove(key);
    }

    /// Blocks until a key is ready and hands it out, or returns `None` once shut down.
    /// The caller must call [`WorkQueue::done`] with the key afterwards.
    #[cfg(test)]
    pub fn get(&self) -> Option<K> {
        self.next().map(|(key, _)| key)
    }

    /// [`WorkQueue::get`], with the class the key was handed out as: every urgent key
    /// before any background one.
    pub fn next(&self) -> Option<(K, Priority)> {
        let mut state = self.state.lock().unwrap();
        loop {
            if state.shutting_down {
                return None;
            }
            let next_due = state.promote_due(Instant::now());
            if let Some(key) = state
                .urgent
                .pop_front()
                .or_else(|| state.background.pop_front())
            {
                let priority = state.dirty.remove(&key).unwrap_or_default();
                state.processing.insert(key.clone(), priority);
                return Some((key, priority));
            }
            state = match next_due {
                Some(due) => {
                    let timeout = due.saturating_duration_since(Instant::now());
                    self.ready.wait_timeout(state, timeout).unwrap().0
                }
                None => self.ready.wait(state).unwrap(),
            };
        }
    }

    /// Marks `key` as processed; if it was added meanwhile it becomes ready again.
    pub fn done(&self, key: &K) {
        let mut state = self.state.lock().unwrap();
        state.processing.remove(key);
        if let Some(&priority) = state.dirty.get(key) {
            state.queue_of(priority).push_back(key.clone());
            self.ready.notify_one();
        } else if state.is_idle() {
            state.release_when_empty();
            self.idle.notify_all();
        } else if state.background.is_empty() {
            // The last background keys are being processed: a `wait_drained` looks.
            self.idle.notify_all();
        }
    }

    /// Blocks until no key of class `priority` is ready, waiting or being processed, or
    /// the queue is shut down.
    pub fn wait_drained(&self, priority: Priority) {
        let mut state = self.state.lock().unwrap();
        while !state.shutting_down && state.pending(priority) > 0 {
            state = self.idle.wait(state).unwrap();
        }
    }

    /// Blocks until no key is ready or being processed, or the queue is shut down. Keys
    /// waiting for a delay (a retry, a debounce) do not count.
    pub fn wait_idle(&self) {
        let mut state = self.state.lock().unwrap();
        while !state.shutting_down && !state.is_idle() {
            state = self.idle.wait(state).unwrap();
        }
    }

    /// Wakes every worker; `get` returns `None` from now on.
    pub fn shut_down(&self) {
        self.state.lock().unwrap().shutting_down = true;
        self.ready.notify_all();
        self.idle.notify_all();
    }

    /// Keys ready or being processed or waiting (for metrics and tests).
    pub fn len(&self) -> usize {
        let state = self.state.lock().unwrap();
        state.dirty.len() + state.waiting.len()
    }

    /// Keys of class `priority` ready, waiting or being processed (a key re-added while
    /// processing counts once).
    pub fn pending(&self, priority: Priority) -> usize {
        self.state.lock().unwrap().pending(priority)
    }

    /// The class `key` is ready, waiting or being processed as (the most urgent of them);
    /// `None` when the queue does not hold it.
    pub fn class_of(&self, key: &K) -> Option<Priority> {
        let state = self.state.lock().unwrap();
        [
            state.dirty.get(key).copied(),
            state.waiting.get(key).map(|(_, p)| *p),
            state.processing.get(key).copied(),
        ]
        .into_iter()
        .flatten()
        .min()
    }
}

impl<K: Clone + Eq + Hash> State<K> {
    fn pending(&self, priority: Priority) -> usize {
        let of = |p: &Priority| *p == priority;
        self.dirty.values().filter(|p| of(p)).count()
            + self.waiting.values().filter(|(_, p)| of(p)).count()
            + self
                .processing
                .iter()
                .filter(|(key, p)| of(p) && !self.dirty.contains_key(*key))
                .count()
    }

    fn is_idle(&self) -> bool {
        self.urgent.is_empty() && self.background.is_empty() && self.processing.is_empty()
    }

    fn queue_of(&mut self, priority: Priority) -> &mut VecDeque<K> {
        match priority {
            Priority::Urgent => &mut self.urgent,
            Priority::Background => &mut self.background,
        }
    }

    fn release_when_empty(&mut self) {
        self.urgent.release_when_empty();
        self.background.release_when_empty();
        self.dirty.release_when_empty();
        self.processing.release_when_empty();
        self.waiting.release_when_empty();
        self.timeline_keys.release_when_empty();
        self.failures.release_when_empty();
    }

    /// Returns whether the key was newly queued (a worker should wake). A key already
    /// waiting as background work and added as urgent moves to the urgent queue.
    fn make_ready(&mut self, key: K, priority: Priority) -> bool {
        match self.dirty.get_mut(&key) {
            Some(class) if priority < *class => {
                *class = priority;
                if self.processing.contains_key(&key) {
                    return false; // `done` queues it, as urgent now
                }
                self.unqueue(&key, Priority::Background);
                self.urgent.push_back(key);
                true
            }
            Some(_) => false,
            None => {
                self.dirty.insert(key.clone(), priority);
                if self.processing.contains_key(&key) {
                    // `done` queues it.
                    return false;
                }
                self.queue_of(priority).push_back(key);
                true
            }
        }
    }

    /// Takes `key` out of the line of `class`, where it waits ready.
    fn unqueue(&mut self, key: &K, class: Priority) {
        let line = self.queue_of(class);
        if let Some(at) = line.iter().position(|k| k == key) {
            line.remove(at);
        }
    }

    /// Drops a pending delayed add of `key`; returns its class.
    fn cancel_waiting(&mut self, key: &K) -> Option<Priority> {
        let (at, priority) = self.waiting.remove(key)?;
        let id = self
            .timeline
            .range((at, 0)..=(at, u64::MAX))
            .find(|(_, id)| self.timeline_keys.get(id) == Some(key))
            .map(|&(_, id)| id);
        if let Some(id) = id {
            self.timeline.remove(&(at, id));
            self.timeline_keys.remove(&id);
        }
        Some(priority)
    }

    /// Moves due delayed keys to their queue; returns when the next one is due.
    fn promote_due(&mut self, now: Instant) -> Option<Instant> {
        while let Some(&(at, id)) = self.timeline.first() {
            if at > now {
                return Some(at);
            }
            self.timeline.pop_first();
            if let Some(key) = self.timeline_keys.remove(&id) {
                if let Some((_, priority)) = self.waiting.remove(&key) {
                    self.make_ready(key, priority);
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn queue() -> WorkQueue<&'static str> {
        WorkQueue::new(Backoff::default())
    }

    #[test]
    fn a_key_added_first_goes_before_every_key_ready_and_once() {
        let q = queue();
        for key in ["a", "b", "c"] {
            q.add(key);
        }
        q.add_as("bg", Priority::Background);
        q.add_after("later", Duration::from_secs(60));
        q.add_first("c");
        q.add_first("bg");
        q.add_first("later");
        let order: Vec<_> = std::iter::from_fn(|| {
            (q.len() > 0).then(|| {
                let key = q.get().unwrap();
                q.done(&key);
                key
            })
        })
        .collect();
        assert_eq!(order, ["later", "bg", "c", "a", "b"]);
        assert_eq!(q.pending(Priority::Background), 0);
        // Being processed: processed again once done, as an add would.
        q.add("x");
        let x = q.get().unwrap();
        q.add_first(x);
        assert_eq!(q.len(), 1);
        q.done(&x);
        assert_eq!(q.get(), Some("x"));
    }

    #[test]
    fn a_drained_burst_gives_its_capacity_back() {
        let q: WorkQueue<u32> = WorkQueue::new(Backoff::default());
        for key in 0..1000 {
            q.add(key);
        }
        for key in 1000..1500 {
            q.add_after(key, Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(2));
        while q.len() > 0 {
            let key = q.get().unwrap();
            q.done(&key);
        }
        let state = q.state.lock().unwrap();
        assert!(
            state.urgent.capacity() <= KEPT_WHEN_EMPTY,
            "{}",
            state.urgent.capacity()
        );
        assert!(
            state.dirty.capacity() <= KEPT_WHEN_EMPTY,
            "{}",
            state.dirty.capacity()
        );
        assert!(state.waiting.capacity() <= KEPT_WHEN_EMPTY);
        assert!(state.timeline_keys.capacity() <= KEPT_WHEN_EMPTY);
    }

    #[test]
    fn a_capped_backoff_never_waits_longer_than_the_cap() {
        let capped = Backoff::default().capped_at(Duration::from_secs(4));
        assert_eq!(capped.delay(1), Duration::from_millis(100));
        assert_eq!(capped.delay(20), Duration::from_secs(4));
        let tiny = Backoff::default().capped_at(Duration::ZERO);
        assert_eq!(
            tiny.delay(5),
            Duration::from_millis(100),
            "never below the first delay"
        );
        let wide = Backoff::default().capped_at(Duration::from_secs(600));
        assert_eq!(wide.delay(20), Duration::from_secs(60));
    }

    #[test]
    fn wait_idle_returns_once_every_ready_key_is_done_but_not_for_delayed_ones() {
        let q = Arc::new(queue());
        q.wait_idle(); // nothing added: idle at once
        q.add("a");
        q.add_after("later", Duration::from_secs(3600));
        let waiter = {
            let q = Arc::clone(&q);
            std::thread::spawn(move || q.wait_idle())
        };
        let key = q.get().unwrap();
        std::thread::sleep(Duration::from_millis(20));
        assert!(!waiter.is_finished(), "idle while a key is being processed");
        q.done(&key);
        waiter.join().unwrap();
        assert_eq!(q.len(), 1, "the delayed key still waits");
    }

    #[test]
    fn a_key_added_twice_is_handed_out_once() {
        let q = queue();
        q.add("a");
        q.add("a");
        q.add("b");
        assert_eq!(q.get(), Some("a"));
        assert_eq!(q.get(), Some("b"));
        q.done(&"a");
        q.done(&"b");
        assert_eq!(q.len(), 0);
    }

    #[test]
    fn a_key_added_while_processing_is_processed_again_after_done() {
        let q = Arc::new(queue());
        q.add("a");
        assert_eq!(q.get(), Some("a"));
        q.add("a");
        // Not handed out while processing: a second worker would block.
        let q2 = Arc::clone(&q);
        let other = std::thread::spawn(move || q2.get());
        std::thread::sleep(Duration::from_millis(30));
        assert!(!other.is_finished());
        q.done(&"a");
        assert_eq!(other.join().unwrap(), Some("a"));
    }

    #[test]
    fn delayed_adds_keep_the_earliest_time_and_coalesce() {
        let q = queue();
        let start = Instant::now();
        q.add_after("a", Duration::from_millis(50));
        q.add_after("a", Duration::from_millis(500));
        q.add_after("a", Duration::from_millis(60));
        assert_eq!(q.get(), Some("a"));
        let waited = start.elapsed();
        assert!(
            waited >= Duration::from_millis(50) && waited < Duration::from_millis(400),
            "{waited:?}"
        );
        q.done(&"a");
        assert_eq!(q.len(), 0);
    }

    #[test]
    fn add_makes_a_delayed_key_ready_at_once() {
        let q = queue();
        q.add_after("a", Duration::from_secs(60));
        q.add("a");
        assert_eq!(q.get(), Some("a"));
        q.done(&"a");
        assert_eq!(q.len(), 0, "the delayed copy was dropped");
    }

    #[test]
    fn backoff_doubles_and_is_capped() {
        let b = Backoff {
            initial: Duration::from_millis(100),
            max: Duration::from_secs(1),
        };
        assert_eq!(b.delay(1), Duration::from_millis(100));
        assert_eq!(b.delay(3), Duration::from_millis(400));
        assert_eq!(b.delay(30), Duration::from_secs(1));
    }

    #[test]
    fn forget_resets_the_failure_count() {
        let q = queue();
        let urgent = Priority::Urgent;
        assert_eq!(q.add_with_backoff("a", urgent), Duration::from_millis(100));
        assert_eq!(q.add_with_backoff("a", urgent), Duration::from_millis(200));
        q.forget(&"a");
        assert_eq!(q.add_with_backoff("a", urgent), Duration::from_millis(100));
    }

    #[test]
    fn shut_down_releases_blocked_workers() {
        let q: Arc<WorkQueue<&str>> = Arc::new(queue());
        let q2 = Arc::clone(&q);
        let worker = std::thread::spawn(move || q2.get());
        std::thread::sleep(Duration::from_millis(20));
        q.shut_down();
        assert_eq!(worker.join().unwrap(), None);
    }

    #[test]
    fn a_failure_with_retry_after_waits_at_least_that_long_within_the_cap() {
        use crate::error::{Error, Status};
        let q: WorkQueue<&str> = WorkQueue::new(Backoff {
            initial: Duration::from_millis(100),
            max: Duration::from_secs(5),
        });
        let throttled = |secs| {
            Error::Api(Status {
                code: 429,
                reason: "TooManyRequests".into(),
                message: String::new(),
                retry_after: Some(Duration::from_secs(secs)),
                causes: Vec::new(),
            })
        };
        assert_eq!(
            q.add_after_failure("a", Priority::Urgent, &throttled(2)),
            Duration::from_secs(2)
        );
        assert_eq!(
            q.add_after_failure("b", Priority::Urgent, &throttled(60)),
            Duration::from_secs(5)
        );
        let plain = Error::Transport("reset".into());
        assert_eq!(
            q.add_after_failure("c", Priority::Urgent, &plain),
            Duration::from_millis(100)
        );
        assert_eq!(
            q.add_after_failure("c", Priority::Urgent, &plain),
            Duration::from_millis(200)
        );
    }

    #[test]
    fn urgent_keys_are_handed_out_before_background_keys_added_earlier() {
        let q = queue();
        q.add_as("adopt-1", Priority::Background);
        q.add_as("adopt-2", Priority::Background);
        q.add("rollout");
        q.add_as("adopt-3", Priority::Background);
        q.add("rollout-2");
        let order: Vec<_> = (0..5).map(|_| q.next().unwrap()).collect();
        assert_eq!(
            order,
            [
                ("rollout", Priority::Urgent),
                ("rollout-2", Priority::Urgent),
                ("adopt-1", Priority::Background),
                ("adopt-2", Priority::Background),
                ("adopt-3", Priority::Background),
            ]
        );
    }

    #[test]
    fn a_background_key_added_as_urgent_moves_ahead_and_is_handed_out_once() {
        let q = queue();
        q.add_as("a", Priority::Background);
        q.add_as("b", Priority::Background);
        q.add("b");
        q.add_as("b", Priority::Background);
        assert_eq!(q.pending(Priority::Urgent), 1);
        assert_eq!(q.pending(Priority::Background), 1);
        assert_eq!(q.next(), Some(("b", Priority::Urgent)));
        assert_eq!(q.next(), Some(("a", Priority::Background)));
        q.done(&"a");
        q.done(&"b");
        assert_eq!(q.len(), 0);
    }

    #[test]
    fn a_delayed_urgent_add_of_a_ready_background_key_makes_it_urgent_now() {
        let q = queue();
        q.add_as("a", Priority::Background);
        q.add_as("b", Priority::Background);
        q.add_after("b", Duration::from_secs(3600));
        assert_eq!(q.next(), Some(("b", Priority::Urgent)));
    }

    #[test]
    fn a_delayed_key_keeps_its_most_urgent_class() {
        let q = queue();
        q.add_after("a", Duration::from_millis(1));
        q.add_after_as("a", Duration::from_secs(60), Priority::Background);
        q.add_as("z", Priority::Background);
        std::thread::sleep(Duration::from_millis(2));
        assert_eq!(q.next(), Some(("a", Priority::Urgent)));
    }

    #[test]
    fn wait_drained_returns_once_the_last_background_key_is_done() {
        let q = Arc::new(queue());
        q.wait_drained(Priority::Background); // nothing added: drained at once
        q.add_as("adopt", Priority::Background);
        q.add("rollout");
        let waiter = {
            let q = Arc::clone(&q);
            std::thread::spawn(move || q.wait_drained(Priority::Background))
        };
        assert_eq!(q.next(), Some(("rollout", Priority::Urgent)));
        assert_eq!(q.next(), Some(("adopt", Priority::Background)));
        q.done(&"rollout");
        std::thread::sleep(Duration::from_millis(20));
        assert!(!waiter.is_finished(), "drained while adopt is processed");
        q.done(&"adopt");
        waiter.join().unwrap();
        assert_eq!(q.pending(Priority::Background), 0);
    }

    #[test]
    fn the_class_of_a_key_is_its_most_urgent_one_in_the_queue() {
        let q = queue();
        assert_eq!(q.class_of(&"a"), None);
        q.add_as("a", Priority::Background);
        assert_eq!(q.class_of(&"a"), Some(Priority::Background));
        assert_eq!(q.next(), Some(("a", Priority::Background)));
        assert_eq!(q.class_of(&"a"), Some(Priority::Background), "processing");
        q.add_after("a", Duration::from_secs(60));
        assert_eq!(q.class_of(&"a"), Some(Priority::Urgent));
        q.done(&"a");
    }

    #[test]
    fn a_key_re_added_while_processing_comes_back_in_its_new_class() {
        let q = queue();
        q.add_as("a", Priority::Background);
        assert_eq!(q.next(), Some(("a", Priority::Background)));
        assert_eq!(q.pending(Priority::Background), 1, "being processed");
        q.add("a");
        q.add_as("b", Priority::Background);
        q.done(&"a");
        assert_eq!(q.next(), Some(("a", Priority::Urgent)));
        assert_eq!(q.next(), Some(("b", Priority::Background)));
    }
}
