//! The client-side budget every request passes through, as client-go's `flowcontrol` token
//! bucket: `--api-qps` requests a second with `--api-burst` saved up, shared by every
//! thread of the process; and a pause of the whole client when the API server answers 429
//! with `Retry-After` (API Priority and Fairness shedding load), so that one answer slows
//! every writer rather than the one key that got it.
//!
//! Which requests wait: every LIST, GET, PATCH, POST, PUT and DELETE. A watch does not
//! (client-go's `Request.Watch` skips its rate limiter too: "we specifically don't want to
//! rate limit watches"), so a reconnecting watch never queues behind ten thousand
//! adoptions; the LIST that follows a watch's 410 does wait. Neither do the requests of a
//! client made with [`Client::without_budget`](super::Client::without_budget): the leader
//! election's, which send at most one request per retry period and must not lose the Lease
//! while writes wait (kube-controller-manager gives its leader election a client of its own
//! for the same reason).
//!
//! The requests waiting form one line, served by [`Priority`]: every urgent request (a
//! rollout, the read of a changed Secret) before any background one (an adoption, a first
//! read), and within a class in the order they came. So a change to act on never waits
//! behind the writes of ten thousand adoptions, only behind the requests already sent.
//! Only the first in line looks at the bucket: it sleeps until its token comes (a
//! `Condvar` with that deadline), the others until the line moves, a pause starts or the
//! budget closes; no thread wakes to poll.

use std::cell::Cell;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The longest pause a `Retry-After` can impose on the whole client.
const MAX_PAUSE: Duration = Duration::from_secs(60);
/// The pause of a 429 that names no `Retry-After` (API Priority and Fairness sends 1 s).
const DEFAULT_PAUSE: Duration = Duration::from_secs(1);
/// A wait longer than this is logged at info (at most every [`LOG_EVERY`]); shorter ones at
/// debug (client-go logs waits over 1 s the same way).
const LONG_WAIT: Duration = Duration::from_secs(1);
const LOG_EVERY: Duration = Duration::from_secs(10);

/// Which requests go first when several wait: every urgent one before any background one,
/// and within a class in the order they came.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Priority {
    /// A change to act on: the reads and writes of a rollout, of a changed Secret, of
    /// delete mode, the watches' relists. What every request is unless told otherwise.
    #[default]
    Urgent,
    /// Work that may wait: the first look at a workload (its adoption), the first read of
    /// what it references.
    Background,
}

thread_local! {
    /// The priority of the requests this thread sends (see [`with_priority`]).
    static PRIORITY: Cell<Priority> = const { Cell::new(Priority::Urgent) };
}

/// Runs `f` with every request this thread sends in it waiting as `priority` (the worker
/// loop sets the priority of the key it processes; nothing below it needs to know).
pub fn with_priority<R>(priority: Priority, f: impl FnOnce() -> R) -> R {
    struct Restore(Priority);
    impl Drop for Restore {
        fn drop(&mut self) {
            PRIORITY.with(|p| p.set(self.0));
        }
    }
    let _restore = Restore(PRIORITY.with(|p| p.replace(priority)));
    f()
}

/// The priority this thread's requests wait at now: the class of the work it does (what
/// that work causes, such as the reconciles a read wakes, is of the same class).
pub fn current_priority() -> Priority {
    PRIORITY.with(Cell::get)
}

/// The requests per second and the burst of a budget.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// Tokens added a second (> 0).
    pub qps: f64,
    /// Tokens saved up at most (>= 1).
    pub burst: u32,
}

/// The budget of one [`Client`](super::Client): unlimited until [`Budget::limit`] is called.
#[derive(Debug, Default)]
pub(super) struct Budget {
    state: Mutex<State>,
    /// Signalled when the first in line may have changed, a pause started or the budget
    /// closed: each waiting thread sleeps on it until then or until its own deadline.
    turn: Condvar,
    /// Set at shutdown: waits end at once and requests go out (the reconciles still running
    /// finish, and the process exits within its deadline).
    closed: AtomicBool,
}

#[derive(Debug, Default)]
struct State {
    limits: Option<Limits>,
    bucket: Bucket,
    /// The requests waiting, in the order they are served: by priority, then by ticket.
    line: BTreeSet<(Priority, u64)>,
    next_ticket: u64,
    /// Time spent waiting by every request together, for `/metrics`.
    waited: Duration,
    /// When a long wait was last logged at info.
    logged: Option<Instant>,
}

/// The token bucket and the pause, as plain data; every decision takes `now`.
#[derive(Debug, Clone, Default)]
pub(super) struct Bucket {
    /// Tokens as of `as_of` (at most the burst, never below zero).
    tokens: f64,
    /// When `tokens` was computed; in the future during a pause (no token is earned then).
    as_of: Option<Instant>,
    /// No request goes before this (a 429's `Retry-After`).
    paused_until: Option<Instant>,
}

impl Bucket {
    /// Takes a token for a request at `now`: `Ok` when it may be sent now, else when the
    /// next token comes (or the pause ends). `None` limits send at once (but still after a
    /// pause).
    pub(super) fn take(&mut self, limits: Option<Limits>, now: Instant) -> Result<(), Instant> {
        if let Some(until) = self.paused_until(now) {
            return Err(until);
        }
        let Some(limits) = limits else {
            return Ok(());
        };
        let burst = f64::from(limits.burst.max(1));
        let as_of = *self.as_of.get_or_insert_with(|| {
            self.tokens = burst;
            now
        });
        if now > as_of {
            self.tokens =
                (self.tokens + now.duration_since(as_of).as_secs_f64() * limits.qps).min(burst);
            self.as_of = Some(now);
        }
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            return Ok(());
        }
        let from = self.as_of.unwrap_or(now).max(now);
        Err(from + Duration::from_secs_f64((1.0 - self.tokens) / limits.qps))
    }

    /// Pauses every request until `now + wait` (at most [`MAX_PAUSE`]); no token is earned
    /// meanwhile, so the requests after the pause go at the rate, not in a burst. Returns
    /// whether this started or lengthened a pause.
    pub(super) fn pause(&mut self, now: Instant, wait: Duration) -> bool {
        let until = now + wait.min(MAX_PAUSE);
        if self.paused_until.is_some_and(|p| p >= until) {
            return false;
        }
        let was_paused = self.paused_until.is_some_and(|p| p > now);
        self.paused_until = Some(until);
        if let Some(as_of) = self.as_of {
            // Nothing saved up survives a pause, and tokens come again only after it.
            self.tokens = 0.0;
            self.as_of = Some(as_of.max(until));
        }
        !was_paused
    }

    /// The end of the pause in force at `now`, if any.
    pub(super) fn paused_until(&self, now: Instant) -> Option<Instant> {
        self.paused_until.filter(|until| *until > now)
    }
}

impl Budget {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sets the requests per second and the burst (`wavelet run`'s `--api-qps` and
    /// `--api-burst`); the one-shot subcommands keep the budget unlimited.
    pub(super) fn limit(&self, limits: Limits) {
        let mut state = self.lock();
        state.limits = Some(limits);
        state.bucket = Bucket::default();
        self.turn.notify_all();
    }

    /// Waits until a request may be sent (returns at once once closed). The request joins
    /// the line at its thread's [`Priority`]; only the first in line looks at the bucket,
    /// and it sleeps until its token comes, the others until the line moves. No thread
    /// wakes but for a reason.
    pub(super) fn wait(&self, what: &str) {
        let started = Instant::now();
        let mut state = self.lock();
        let ticket = (current_priority(), state.next_ticket);
        state.next_ticket += 1;
        state.line.insert(ticket);
        while !self.closed.load(Ordering::Relaxed) {
            let now = Instant::now();
            let next = if state.line.first() == Some(&ticket) {
                let limits = state.limits;
                match state.bucket.take(limits, now) {
                    Ok(()) => break,
                    Err(at) => Some(at),
                }
            } else {
                None
            };
            state = match next {
                Some(at) => {
                    self.turn
                        .wait_timeout(state, at.saturating_duration_since(now))
                        .unwrap_or_else(|e| e.into_inner())
                        .0
                }
                None => self.turn.wait(state).unwrap_or_else(|e| e.into_inner()),
            };
        }
        state.line.remove(&ticket);
        // The next in line (or a more urgent newcomer) looks at the bucket now.
        self.turn.notify_all();
        let waited = started.elapsed();
        if waited < Duration::from_millis(1) {
            return;
        }
        state.waited += waited;
        let budget = match state.limits {
            Some(l) => format!("--api-qps {}, --api-burst {}", l.qps, l.burst),
            None => "no client-side limit".into(),
        };
        if waited > LONG_WAIT && state.logged.is_none_or(|at| at.elapsed() > LOG_EVERY) {
            state.logged = Some(Instant::now());
            log::info!("{what} waited {waited:?} for the client-side request budget ({budget}, or a 429's Retry-After); more waits are logged at debug");
        } else {
            log::debug!("{what} waited {waited:?} for the client-side request budget ({budget})");
        }
    }

    /// The API server answered 429: hold every request for `retry_after` (or 1 s).
    pub(super) fn pause(&self, retry_after: Option<Duration>, what: &str) {
        let wait = retry_after.unwrap_or(DEFAULT_PAUSE);
        let started = {
            let mut state = self.lock();
            let started = state.bucket.pause(Instant::now(), wait);
            // The first in line may be sleeping until a token that the pause holds back.
            self.turn.notify_all();
            started
        };
        if started {
            log::info!(
                "the API server answered {what} with 429 Too Many Requests: every request waits {:?} (its Retry-After) before the next is sent",
                wait.min(MAX_PAUSE)
            );
        } else {
            log::debug!("429 on {what}: the client's pause is now {wait:?} from now");
        }
    }

    /// Ends every wait, now and from now on (shutdown).
    pub(super) fn close(&self) {
        self.closed.store(true, Ordering::Relaxed);
        // Under the lock, so that no waiter misses it between its check and its sleep.
        let _state = self.lock();
        self.turn.notify_all();
    }

    /// Time requests have spent waiting for the budget (or a pause), all together.
    pub(super) fn waited(&self) -> Duration {
        self.lock().waited
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    const LIMITS: Limits = Limits {
        qps: 10.0,
        burst: 3,
    };

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Takes tokens at the times they come, as the first in line does: the send times.
    fn send_times(
        bucket: &mut Bucket,
        limits: Option<Limits>,
        t0: Instant,
        n: usize,
    ) -> Vec<Duration> {
        let mut now = t0;
        (0..n)
            .map(|_| loop {
                match bucket.take(limits, now) {
                    Ok(()) => return now - t0,
                    Err(at) => now = at,
                }
            })
            .collect()
    }

    #[test]
    fn a_burst_goes_at_once_and_the_rest_at_the_rate() {
        let t0 = Instant::now();
        let mut bucket = Bucket::default();
        let slots = send_times(&mut bucket, Some(LIMITS), t0, 6);
        assert_eq!(slots, [ms(0), ms(0), ms(0), ms(100), ms(200), ms(300)]);
    }

    #[test]
    fn tokens_come_back_at_the_rate_up_to_the_burst() {
        let t0 = Instant::now();
        let mut bucket = Bucket::default();
        for _ in 0..3 {
            assert_eq!(bucket.take(Some(LIMITS), t0), Ok(()));
        }
        let later = t0 + Duration::from_secs(60);
        for _ in 0..3 {
            assert_eq!(bucket.take(Some(LIMITS), later), Ok(()), "a full bucket");
        }
        assert_eq!(bucket.take(Some(LIMITS), later), Err(later + ms(100)));
    }

    #[test]
    fn no_limits_send_at_once() {
        let t0 = Instant::now();
        let mut bucket = Bucket::default();
        for _ in 0..1000 {
            assert_eq!(bucket.take(None, t0), Ok(()));
        }
    }

    #[test]
    fn a_pause_holds_every_request_and_no_token_is_earned_during_it() {
        let t0 = Instant::now();
        let mut bucket = Bucket::default();
        assert_eq!(bucket.take(Some(LIMITS), t0), Ok(()));
        assert!(bucket.pause(t0, Duration::from_secs(5)));
        let end = t0 + Duration::from_secs(5);
        assert_eq!(bucket.take(Some(LIMITS), t0 + ms(10)), Err(end));
        // After it at the rate (the two tokens left before the pause are not a burst
        // after it).
        let slots = send_times(&mut bucket, Some(LIMITS), end, 3);
        assert_eq!(slots, [ms(100), ms(200), ms(300)]);
        assert_eq!(bucket.paused_until(t0 + ms(10)), Some(end));
        assert_eq!(bucket.paused_until(end), None);
    }

    #[test]
    fn an_unlimited_client_still_waits_out_a_pause() {
        let t0 = Instant::now();
        let mut bucket = Bucket::default();
        bucket.pause(t0, Duration::from_secs(2));
        assert_eq!(
            bucket.take(None, t0 + ms(1)),
            Err(t0 + Duration::from_secs(2))
        );
        assert_eq!(bucket.take(None, t0 + Duration::from_secs(3)), Ok(()));
    }

    #[test]
    fn a_second_429_lengthens_a_pause_but_never_shortens_it_and_a_pause_is_capped() {
        let t0 = Instant::now();
        let mut bucket = Bucket::default();
        assert!(bucket.pause(t0, Duration::from_secs(5)), "a new pause");
        assert!(!bucket.pause(t0 + ms(100), Duration::from_secs(1)));
        assert_eq!(
            bucket.paused_until(t0 + ms(100)),
            Some(t0 + Duration::from_secs(5))
        );
        assert!(
            !bucket.pause(t0 + ms(200), Duration::from_secs(10)),
            "lengthened, not new"
        );
        assert_eq!(
            bucket.paused_until(t0 + ms(200)),
            Some(t0 + ms(200) + Duration::from_secs(10))
        );
        bucket.pause(t0, Duration::from_secs(3600));
        assert_eq!(bucket.paused_until(t0), Some(t0 + MAX_PAUSE));
    }

    #[test]
    fn a_closed_budget_does_not_wait() {
        let budget = Budget::default();
        budget.limit(Limits {
            qps: 0.001,
            burst: 1,
        });
        budget.wait("GET /a");
        budget.close();
        let started = Instant::now();
        budget.wait("GET /b");
        assert!(started.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn closing_wakes_a_request_sleeping_for_its_token() {
        let budget = Arc::new(Budget::default());
        budget.limit(Limits {
            qps: 0.001,
            burst: 1,
        });
        budget.wait("GET /a");
        let waiter = {
            let budget = Arc::clone(&budget);
            std::thread::spawn(move || budget.wait("GET /b"))
        };
        while budget.lock().line.is_empty() {
            std::thread::yield_now();
        }
        budget.close();
        waiter.join().unwrap();
    }

    #[test]
    fn waits_are_added_up() {
        let budget = Budget::default();
        budget.limit(Limits {
            qps: 20.0,
            burst: 1,
        });
        budget.wait("GET /a");
        budget.wait("GET /b");
        assert!(budget.waited() >= ms(40), "{:?}", budget.waited());
    }

    #[test]
    fn urgent_requests_are_served_before_background_ones_that_came_earlier() {
        let budget = Arc::new(Budget::default());
        // One token every 200 ms: the line is what decides the order.
        budget.limit(Limits { qps: 5.0, burst: 1 });
        budget.wait("GET /first");
        let order = Arc::new(Mutex::new(Vec::new()));
        let spawn = |name: &'static str, priority: Priority| {
            let (budget, order) = (Arc::clone(&budget), Arc::clone(&order));
            std::thread::spawn(move || {
                with_priority(priority, || budget.wait(name));
                order.lock().unwrap().push(name);
            })
        };
        // Until `n` requests joined the line after the first one.
        let line_len = |n: u64| {
            while budget.lock().next_ticket < n + 1 {
                std::thread::yield_now();
            }
        };
        let mut threads = Vec::new();
        for (n, name) in ["adopt-1", "adopt-2", "adopt-3"].into_iter().enumerate() {
            threads.push(spawn(name, Priority::Background));
            line_len(n as u64 + 1);
        }
        threads.push(spawn("rollout", Priority::Urgent));
        line_len(4);
        for thread in threads {
            thread.join().unwrap();
        }
        let order = order.lock().unwrap();
        let rollout = order.iter().position(|n| *n == "rollout").unwrap();
        // adopt-1 may already hold its token (first in line when the rollout came).
        assert!(rollout <= 1, "{order:?}");
        assert_eq!(
            order
                .iter()
                .filter(|n| n.starts_with("adopt"))
                .collect::<Vec<_>>(),
            [&"adopt-1", &"adopt-2", &"adopt-3"],
            "in the order they came within a class"
        );
    }

    #[test]
    fn the_priority_of_a_thread_is_restored_after_with_priority() {
        assert_eq!(current_priority(), Priority::Urgent);
        with_priority(Priority::Background, || {
            assert_eq!(current_priority(), Priority::Background);
            with_priority(Priority::Urgent, || {
                assert_eq!(current_priority(), Priority::Urgent)
            });
            assert_eq!(current_priority(), Priority::Background);
        });
        assert_eq!(current_priority(), Priority::Urgent);
    }
}
