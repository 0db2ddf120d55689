//! Coalescing and storm protection: the debounce window of each workload, a global token
//! bucket for rollouts, and a minimum interval between two rollouts of one workload.
//! Every decision takes `now`.
//!
//! A workload that finds no token reserves the next free one (the bucket goes into debt,
//! as Go's `rate.Limiter.Reserve`) and comes back exactly when it is due: a fan-out to
//! thousands of workloads rolls them in the order they came, at the rate, each reconciled
//! twice rather than every half second until it wins a token.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::{Duration, Instant};

use crate::watch::queue::ReleaseWhenEmpty as _;

/// Debounce windows: a window opens at the first data change noticed for a key and stays
/// open until the key is settled (rolled, or found up to date), so every change inside it
/// goes into one rollout, whatever wakes the key up early. Shared by the watch threads
/// (which note changes) and the workers (which settle).
///
/// A change noticed while a reconcile of the key runs may not be in what that reconcile
/// read (the sink opens windows before the new data is visible in the cache). Settling
/// therefore closes a window only when no change was noted after the reconcile started;
/// otherwise the window goes on, re-opened at the reconcile's start.
#[derive(Debug, Default)]
pub struct Debounce<K> {
    windows: std::sync::Mutex<HashMap<K, Window>>,
}

/// One open window: when it opened, and the last change noted in it.
#[derive(Debug, Clone, Copy)]
struct Window {
    opened: Instant,
    last_change: Instant,
}

impl<K: Eq + Hash + Clone> Debounce<K> {
    pub fn new() -> Debounce<K> {
        Debounce {
            windows: std::sync::Mutex::new(HashMap::new()),
        }
    }

    /// Opens a window for `key` at `now` unless one is open; either way `now` is its last
    /// change.
    pub fn note_change(&self, key: K, now: Instant) {
        let mut windows = self.windows.lock().unwrap();
        let window = windows.entry(key).or_insert(Window {
            opened: now,
            last_change: now,
        });
        window.last_change = window.last_change.max(now);
    }

    /// When the open window of `key` opened.
    pub fn window_opened(&self, key: &K) -> Option<Instant> {
        self.windows.lock().unwrap().get(key).map(|w| w.opened)
    }

    /// A reconcile of `key` that started at `started` is done: the window closes if every
    /// change in it was noted before `started`. A change noted later (perhaps not yet
    /// visible to that reconcile) keeps it open, from `started` at the earliest.
    pub fn settle(&self, key: &K, started: Instant) {
        let mut windows = self.windows.lock().unwrap();
        let Some(window) = windows.get_mut(key) else {
            return;
        };
        if window.last_change <= started {
            windows.remove(key);
            windows.release_when_empty();
        } else {
            window.opened = window.opened.max(started);
        }
    }
}

/// A token bucket: `rate` tokens a second, at most `burst` saved up.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
}

impl TokenBucket {
    /// Starts full.
    pub fn new(rate: f64, burst: u32, now: Instant) -> TokenBucket {
        let burst = f64::from(burst.max(1));
        TokenBucket {
            rate: rate.max(f64::MIN_POSITIVE),
            burst,
            tokens: burst,
            last: now,
        }
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.rate).min(self.burst);
        self.last = now;
    }

    /// Takes the next token, now or one still to come: how long until it is the caller's.
    /// Every reservation waits behind the ones made before it.
    pub fn reserve(&mut self, now: Instant) -> Duration {
        self.refill(now);
        self.tokens -= 1.0;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / self.rate)
        }
    }

    /// Gives back a reserved token that will not be used.
    pub fn refund(&mut self) {
        self.tokens = (self.tokens + 1.0).min(self.burst);
    }
}

/// Remembers when each workload was last rolled.
#[derive(Debug)]
pub struct MinInterval<K> {
    interval: Duration,
    last: HashMap<K, Instant>,
}

impl<K: Eq + Hash + Clone> MinInterval<K> {
    pub fn new(interval: Duration) -> MinInterval<K> {
        MinInterval {
            interval,
            last: HashMap::new(),
        }
    }

    /// How long `key` must still wait before its next rollout (`None`: it may roll now).
    pub fn wait(&self, key: &K, now: Instant) -> Option<Duration> {
        let last = *self.last.get(key)?;
        let due = last + self.interval;
        (due > now).then(|| due - now)
    }

    pub fn record(&mut self, key: K, now: Instant) {
        self.last.insert(key, now);
    }

    pub fn forget(&mut self, key: &K) {
        self.last.remove(key);
    }
}

/// Both storm rules together.
#[derive(Debug)]
pub struct RolloutThrottle<K> {
    bucket: TokenBucket,
    per_workload: MinInterval<K>,
    /// Workloads holding a reserved token, and when it is theirs.
    reserved: HashMap<K, Instant>,
}

/// Why a rollout has to wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Throttled {
    /// The workload was rolled less than `--min-rollout-interval` ago.
    MinInterval(Duration),
    /// Too many rollouts overall (`--max-rollouts-per-second`).
    RateLimit(Duration),
}

impl Throttled {
    pub fn wait(self) -> Duration {
        match self {
            Throttled::MinInterval(d) | Throttled::RateLimit(d) => d,
        }
    }
}

impl<K: Eq + Hash + Clone> RolloutThrottle<K> {
    pub fn new(rate: f64, burst: u32, min_interval: Duration, now: Instant) -> RolloutThrottle<K> {
        RolloutThrottle {
            bucket: TokenBucket::new(rate, burst, now),
            per_workload: MinInterval::new(min_interval),
            reserved: HashMap::new(),
        }
    }

    /// Admits a rollout of `key` now (recording it), or says how long to wait. A workload
    /// with a reserved token rolls once it is due; otherwise the per-workload rule is
    /// checked first (a workload it holds back spends no token), then a token is taken, or
    /// the next one reserved.
    pub fn admit(&mut self, key: &K, now: Instant) -> Result<(), Throttled> {
        if let Some(due) = self.reserved.get(key).copied() {
            if due > now {
                return Err(Throttled::RateLimit(due - now));
            }
            self.reserved.remove(key);
            self.reserved.release_when_empty();
            self.per_workload.record(key.clone(), now);
            return Ok(());
        }
        if let Some(wait) = self.per_workload.wait(key, now) {
            return Err(Throttled::MinInterval(wait));
        }
        let wait = self.bucket.reserve(now);
        if !wait.is_zero() {
            self.reserved.insert(key.clone(), now + wait);
            return Err(Throttled::RateLimit(wait));
        }
        self.per_workload.record(key.clone(), now);
        Ok(())
    }

    /// `key` will not roll on its reservation (nothing to roll any more): its token goes
    /// back to the bucket.
    pub fn cancel(&mut self, key: &K) {
        if self.reserved.remove(key).is_some() {
            self.bucket.refund();
            self.reserved.release_when_empty();
        }
    }

    pub fn forget(&mut self, key: &K) {
        self.per_workload.forget(key);
        self.cancel(key);
    }

    /// Workloads waiting for a token now.
    pub fn waiting(&self) -> usize {
        self.reserved.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_debounce_window_opens_at_the_first_change_and_stays_put() {
        let debounce = Debounce::new();
        let t0 = Instant::now();
        debounce.note_change("w", t0);
        debounce.note_change("w", t0 + Duration::from_millis(300));
        assert_eq!(debounce.window_opened(&"w"), Some(t0));
    }

    #[test]
    fn settling_keeps_a_window_opened_after_the_reconcile_started() {
        let debounce = Debounce::new();
        let t0 = Instant::now();
        debounce.note_change("w", t0 + Duration::from_millis(10));
        debounce.settle(&"w", t0);
        assert!(debounce.window_opened(&"w").is_some());
        debounce.settle(&"w", t0 + Duration::from_millis(10));
        assert!(debounce.window_opened(&"w").is_none());
    }

    /// Regression: a change noted into a window that was already open (from an earlier
    /// change) while a reconcile ran was dropped with the window when that reconcile
    /// settled, so the next reconcile rolled at once, without a debounce window (seen as
    /// two rollouts for three changes inside one window when the first change arrived
    /// during the adoption).
    #[test]
    fn a_change_noted_during_a_reconcile_into_an_open_window_keeps_a_window_open() {
        let debounce = Debounce::new();
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        debounce.note_change("w", t0);
        // The reconcile starts at t0 + 9 ms; a change is noted at t0 + 12 ms.
        debounce.note_change("w", t0 + ms(12));
        debounce.settle(&"w", t0 + ms(9));
        assert_eq!(debounce.window_opened(&"w"), Some(t0 + ms(9)));
        // A reconcile that started after the last change closes it.
        debounce.settle(&"w", t0 + ms(20));
        assert_eq!(debounce.window_opened(&"w"), None);
    }

    #[test]
    fn bucket_allows_a_burst_then_the_rate() {
        let t0 = Instant::now();
        let mut bucket = TokenBucket::new(2.0, 3, t0);
        for _ in 0..3 {
            assert_eq!(bucket.reserve(t0), Duration::ZERO);
        }
        assert_eq!(bucket.reserve(t0), Duration::from_millis(500));
        assert_eq!(
            bucket.reserve(t0 + Duration::from_millis(500)),
            Duration::from_millis(500),
            "behind the one reserved before"
        );
    }

    #[test]
    fn bucket_never_saves_more_than_the_burst() {
        let t0 = Instant::now();
        let mut bucket = TokenBucket::new(10.0, 2, t0);
        let later = t0 + Duration::from_secs(60);
        assert_eq!(bucket.reserve(later), Duration::ZERO);
        assert_eq!(bucket.reserve(later), Duration::ZERO);
        assert!(!bucket.reserve(later).is_zero());
    }

    #[test]
    fn one_workload_waits_the_minimum_interval_others_do_not() {
        let t0 = Instant::now();
        let mut throttle = RolloutThrottle::new(100.0, 100, Duration::from_secs(10), t0);
        assert_eq!(throttle.admit(&"a", t0), Ok(()));
        assert_eq!(
            throttle.admit(&"a", t0 + Duration::from_secs(4)),
            Err(Throttled::MinInterval(Duration::from_secs(6)))
        );
        assert_eq!(throttle.admit(&"b", t0 + Duration::from_secs(4)), Ok(()));
        assert_eq!(throttle.admit(&"a", t0 + Duration::from_secs(10)), Ok(()));
    }

    #[test]
    fn a_workload_without_a_token_reserves_the_next_one_and_rolls_when_it_is_due() {
        let t0 = Instant::now();
        let mut throttle = RolloutThrottle::new(2.0, 1, Duration::ZERO, t0);
        assert_eq!(throttle.admit(&"a", t0), Ok(()));
        let waits: Vec<Throttled> = ["b", "c", "d"]
            .iter()
            .map(|k| throttle.admit(k, t0).unwrap_err())
            .collect();
        let ms = Duration::from_millis;
        assert_eq!(
            waits,
            [
                Throttled::RateLimit(ms(500)),
                Throttled::RateLimit(ms(1000)),
                Throttled::RateLimit(ms(1500))
            ],
            "in the order they came, at the rate"
        );
        assert_eq!(throttle.waiting(), 3);
        // Woken early (its own status update): still waiting, for the rest of the time.
        assert_eq!(
            throttle.admit(&"c", t0 + ms(400)),
            Err(Throttled::RateLimit(ms(600)))
        );
        assert_eq!(throttle.admit(&"b", t0 + ms(500)), Ok(()));
        assert_eq!(throttle.admit(&"c", t0 + ms(1000)), Ok(()));
        assert_eq!(throttle.waiting(), 1);
        // A newcomer queues behind d.
        assert_eq!(
            throttle.admit(&"e", t0 + ms(1000)),
            Err(Throttled::RateLimit(ms(1000)))
        );
    }

    #[test]
    fn a_cancelled_reservation_gives_its_token_back() {
        let t0 = Instant::now();
        let mut throttle = RolloutThrottle::new(1.0, 1, Duration::ZERO, t0);
        assert!(throttle.admit(&"a", t0).is_ok());
        assert!(throttle.admit(&"b", t0).is_err());
        throttle.cancel(&"b");
        assert_eq!(throttle.waiting(), 0);
        assert_eq!(
            throttle.admit(&"c", t0),
            Err(Throttled::RateLimit(Duration::from_secs(1))),
            "c gets the token b gave back, not the one after it"
        );
        throttle.forget(&"c");
        assert_eq!(throttle.waiting(), 0);
    }

    #[test]
    fn a_throttled_workload_spends_no_token() {
        let t0 = Instant::now();
        let mut throttle = RolloutThrottle::new(0.001, 2, Duration::from_secs(10), t0);
        assert!(throttle.admit(&"a", t0).is_ok());
        assert!(throttle.admit(&"a", t0).is_err());
        assert!(
            throttle.admit(&"b", t0).is_ok(),
            "the second token is still there"
        );
        assert!(matches!(
            throttle.admit(&"c", t0),
            Err(Throttled::RateLimit(_))
        ));
    }
}
