//! Coalescing and storm protection: the debounce window of each workload, a global token
//! bucket for rollouts, and a minimum interval between two rollouts of one workload.
//! Every decision takes `now`.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::{Duration, Instant};

use crate::watch::queue::ReleaseWhenEmpty as _;

/// Debounce windows: a window opens at the first data change noticed for a key and stays
/// open until the key is settled (rolled, or found up to date), so every change inside it
/// goes into one rollout, whatever wakes the key up early. Shared by the watch threads
/// (which note changes) and the workers (which settle).
#[derive(Debug, Default)]
pub struct Debounce<K> {
    /// When each open window opened, and when its last change was noted.
    opened: std::sync::Mutex<HashMap<K, (Instant, Instant)>>,
}

impl<K: Eq + Hash + Clone> Debounce<K> {
    pub fn new() -> Debounce<K> {
        Debounce {
            opened: std::sync::Mutex::new(HashMap::new()),
        }
    }

    /// Opens a window for `key` at `now` unless one is open; notes the change either way.
    pub fn note_change(&self, key: K, now: Instant) {
        let mut opened = self.opened.lock().unwrap();
        let window = opened.entry(key).or_insert((now, now));
        window.1 = window.1.max(now);
    }

    /// When the open window of `key` opened.
    pub fn window_opened(&self, key: &K) -> Option<Instant> {
        self.opened.lock().unwrap().get(key).map(|(at, _)| *at)
    }

    /// Closes the window of `key` if no change was noted in it after `started` (a change
    /// noted after the reconcile started, which it may not have seen, keeps the window
    /// open, even one that opened before).
    pub fn settle(&self, key: &K, started: Instant) {
        let mut opened = self.opened.lock().unwrap();
        if opened.get(key).is_some_and(|(_, last)| *last <= started) {
            opened.remove(key);
            opened.release_when_empty();
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

    /// Takes a token, or says how long until one is available.
    pub fn try_take(&mut self, now: Instant) -> Result<(), Duration> {
        self.refill(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - self.tokens) / self.rate))
        }
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
        }
    }

    /// Admits a rollout of `key` now (recording it), or says how long to wait. The
    /// per-workload rule is checked first so a throttled workload spends no token.
    pub fn admit(&mut self, key: &K, now: Instant) -> Result<(), Throttled> {
        if let Some(wait) = self.per_workload.wait(key, now) {
            return Err(Throttled::MinInterval(wait));
        }
        self.bucket.try_take(now).map_err(Throttled::RateLimit)?;
        self.per_workload.record(key.clone(), now);
        Ok(())
    }

    pub fn forget(&mut self, key: &K) {
        self.per_workload.forget(key);
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

    #[test]
    fn a_change_noted_after_the_reconcile_started_keeps_an_older_window_open() {
        // Found by hash_mode::three_changes_inside_the_debounce_window_give_one_patch: the
        // change landed while the adoption's reconcile (started after the window opened)
        // was patching; settling dropped the window, and the change rolled at once.
        let debounce = Debounce::new();
        let t0 = Instant::now();
        debounce.note_change("w", t0);
        let started = t0 + Duration::from_millis(5);
        debounce.note_change("w", t0 + Duration::from_millis(10));
        debounce.settle(&"w", started);
        assert_eq!(debounce.window_opened(&"w"), Some(t0));
        debounce.settle(&"w", t0 + Duration::from_millis(10));
        assert_eq!(debounce.window_opened(&"w"), None);
    }

    #[test]
    fn bucket_allows_a_burst_then_the_rate() {
        let t0 = Instant::now();
        let mut bucket = TokenBucket::new(2.0, 3, t0);
        assert!(bucket.try_take(t0).is_ok());
        assert!(bucket.try_take(t0).is_ok());
        assert!(bucket.try_take(t0).is_ok());
        let wait = bucket.try_take(t0).unwrap_err();
        assert_eq!(wait, Duration::from_millis(500));
        assert!(bucket.try_take(t0 + Duration::from_millis(500)).is_ok());
    }

    #[test]
    fn bucket_never_saves_more_than_the_burst() {
        let t0 = Instant::now();
        let mut bucket = TokenBucket::new(10.0, 2, t0);
        let later = t0 + Duration::from_secs(60);
        assert!(bucket.try_take(later).is_ok());
        assert!(bucket.try_take(later).is_ok());
        assert!(bucket.try_take(later).is_err());
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
