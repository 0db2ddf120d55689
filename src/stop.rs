//! The stop flag the signal handler sets, and the one way to wait while honouring it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How often a waiting thread looks at the stop flag: shutdown waits at most this long.
const POLL: Duration = Duration::from_millis(50);

/// Sleeps for `total`, returning early (within [`POLL`]) once `stop` is set.
/// `Duration::MAX` waits until `stop` is set.
pub fn sleep_unless_stopped(stop: &AtomicBool, total: Duration) {
    let deadline = Instant::now().checked_add(total);
    while !stop.load(Ordering::Relaxed) {
        let left = match deadline {
            Some(deadline) => deadline.saturating_duration_since(Instant::now()),
            None => POLL,
        };
        if left.is_zero() {
            return;
        }
        std::thread::sleep(left.min(POLL));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_set_flag_returns_at_once_and_an_unset_one_waits_the_whole_time() {
        let started = Instant::now();
        sleep_unless_stopped(&AtomicBool::new(true), Duration::from_secs(60));
        assert!(started.elapsed() < Duration::from_secs(1));

        let started = Instant::now();
        sleep_unless_stopped(&AtomicBool::new(false), Duration::from_millis(120));
        assert!(started.elapsed() >= Duration::from_millis(120));
    }

    #[test]
    fn a_flag_set_by_another_thread_ends_an_endless_wait() {
        let stop = Arc::new(AtomicBool::new(false));
        let setter = {
            let stop = stop.clone();
            std::thread::spawn(move || stop.store(true, Ordering::Relaxed))
        };
        sleep_unless_stopped(&stop, Duration::MAX);
        setter.join().unwrap();
        assert!(stop.load(Ordering::Relaxed));
    }
}
