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
//! The bucket hands out reservations (like Go's `rate.Limiter.Reserve`): a request takes a
//! token now, or the next one that will be free, and sleeps until then; the waiting threads
//! are served in the order they came, so none of them starves.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The longest pause a `Retry-After` can impose on the whole client.
const MAX_PAUSE: Duration = Duration::from_secs(60);
/// The pause of a 429 that names no `Retry-After` (API Priority and Fairness sends 1 s).
const DEFAULT_PAUSE: Duration = Duration::from_secs(1);
/// A wait longer than this is logged at info (at most every [`LOG_EVERY`]); shorter ones at
/// debug (client-go logs waits over 1 s the same way).
const LONG_WAIT: Duration = Duration::from_secs(1);
const LOG_EVERY: Duration = Duration::from_secs(10);

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
    /// Set at shutdown: waits end at once and requests go out (the reconciles still running
    /// finish, and the process exits within its deadline).
    closed: AtomicBool,
}

#[derive(Debug, Default)]
struct State {
    limits: Option<Limits>,
    bucket: Bucket,
    /// Time spent waiting by every request together, for `/metrics`.
    waited: Duration,
    /// When a long wait was last logged at info.
    logged: Option<Instant>,
}

/// The token bucket and the pause, as plain data; every decision takes `now`.
#[derive(Debug, Clone, Default)]
pub(super) struct Bucket {
    /// Tokens as of `as_of`; negative while reservations wait for tokens to come.
    tokens: f64,
    /// When `tokens` was computed; in the future during a pause (no token is earned then).
    as_of: Option<Instant>,
    /// No request goes before this (a 429's `Retry-After`).
    paused_until: Option<Instant>,
}

impl Bucket {
    /// Reserves a token for a request made at `now`: when it may be sent. `None` limits
    /// send at once (but still after a pause).
    pub(super) fn reserve(&mut self, limits: Option<Limits>, now: Instant) -> Instant {
        let paused = self.paused_until.filter(|until| *until > now);
        let Some(limits) = limits else {
            return paused.unwrap_or(now);
        };
        let burst = f64::from(limits.burst.max(1));
        let as_of = *self.as_of.get_or_insert_with(|| {
            self.tokens = burst;
            now
        });
        let from = if now > as_of {
            self.tokens =
                (self.tokens + now.duration_since(as_of).as_secs_f64() * limits.qps).min(burst);
            self.as_of = Some(now);
            now
        } else {
            as_of
        };
        self.tokens -= 1.0;
        let at = if self.tokens >= 0.0 {
            from
        } else {
            from + Duration::from_secs_f64(-self.tokens / limits.qps)
        };
        at.max(now).max(paused.unwrap_or(now))
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
            self.tokens = self.tokens.min(0.0);
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
    /// Sets the requests per second and the burst (`wavelet run`'s `--api-qps` and
    /// `--api-burst`); the one-shot subcommands keep the budget unlimited.
    pub(super) fn limit(&self, limits: Limits) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.limits = Some(limits);
        state.bucket = Bucket::default();
    }

    /// Waits until a request may be sent (returns at once once closed).
    pub(super) fn wait(&self, what: &str) {
        let now = Instant::now();
        let (at, limits) = {
            let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            let limits = state.limits;
            (state.bucket.reserve(limits, now), limits)
        };
        // A pause that starts while this request sleeps holds it too.
        let mut until = at;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() || self.closed.load(Ordering::Relaxed) {
                break;
            }
            crate::stop::sleep_unless_stopped(&self.closed, left);
            let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            match state.bucket.paused_until(Instant::now()) {
                Some(paused) => until = paused,
                None => break,
            }
        }
        let waited = now.elapsed();
        if waited < Duration::from_millis(1) {
            return;
        }
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.waited += waited;
        let budget = match limits {
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
            let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            state.bucket.pause(Instant::now(), wait)
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
    }

    /// Time requests have spent waiting for the budget (or a pause), all together.
    pub(super) fn waited(&self) -> Duration {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).waited
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits {
        qps: 10.0,
        burst: 3,
    };

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_burst_goes_at_once_and_the_rest_at_the_rate_in_the_order_they_came() {
        let t0 = Instant::now();
        let mut bucket = Bucket::default();
        let slots: Vec<Duration> = (0..6)
            .map(|_| bucket.reserve(Some(LIMITS), t0) - t0)
            .collect();
        assert_eq!(slots, [ms(0), ms(0), ms(0), ms(100), ms(200), ms(300)]);
    }

    #[test]
    fn tokens_come_back_at_the_rate_up_to_the_burst() {
        let t0 = Instant::now();
        let mut bucket = Bucket::default();
        for _ in 0..3 {
            assert_eq!(bucket.reserve(Some(LIMITS), t0), t0);
        }
        let later = t0 + Duration::from_secs(60);
        for _ in 0..3 {
            assert_eq!(bucket.reserve(Some(LIMITS), later), later, "a full bucket");
        }
        assert_eq!(bucket.reserve(Some(LIMITS), later), later + ms(100));
    }

    #[test]
    fn no_limits_send_at_once() {
        let t0 = Instant::now();
        let mut bucket = Bucket::default();
        for _ in 0..1000 {
            assert_eq!(bucket.reserve(None, t0), t0);
        }
    }

    #[test]
    fn a_pause_holds_every_request_and_no_token_is_earned_during_it() {
        let t0 = Instant::now();
        let mut bucket = Bucket::default();
        assert_eq!(bucket.reserve(Some(LIMITS), t0), t0);
        assert!(bucket.pause(t0, Duration::from_secs(5)));
        let end = t0 + Duration::from_secs(5);
        // During the pause: nothing goes before its end, and after it at the rate (the two
        // tokens left before the pause are not a burst after it).
        let slots: Vec<Duration> = (0..3)
            .map(|_| bucket.reserve(Some(LIMITS), t0 + ms(10)) - end)
            .collect();
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
            bucket.reserve(None, t0 + ms(1)),
            t0 + Duration::from_secs(2)
        );
        assert_eq!(
            bucket.reserve(None, t0 + Duration::from_secs(3)),
            t0 + Duration::from_secs(3)
        );
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
}
