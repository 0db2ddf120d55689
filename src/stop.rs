//! The stop flag that SIGTERM/SIGINT (or `Controller::stop`, in the wiring) sets, and
//! the one way to wait while honouring it: a thread sleeps on a `Condvar` until its
//! deadline or the stop, whichever comes first, and never wakes to poll.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// A flag set once, with sleeps that it ends.
#[derive(Debug, Default)]
pub struct Stop {
    set: AtomicBool,
    /// Guards nothing but the wake-up: [`Stop::set`] notifies under it, so a sleeper that
    /// found the flag unset cannot miss the notification.
    lock: Mutex<()>,
    stopped: Condvar,
}

impl Stop {
    pub fn new() -> Stop {
        Stop::default()
    }

    /// Sets the flag and wakes every sleeper.
    pub fn set(&self) {
        self.set.store(true, Ordering::SeqCst);
        let _guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        self.stopped.notify_all();
    }

    pub fn is_set(&self) -> bool {
        self.set.load(Ordering::SeqCst)
    }

    /// Sleeps for `total`, returning at once when the flag is set, or is set meanwhile.
    /// `Duration::MAX` waits until it is set.
    pub fn sleep(&self, total: Duration) {
        let deadline = Instant::now().checked_add(total);
        let mut guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        while !self.is_set() {
            guard = match deadline {
                None => self.stopped.wait(guard).unwrap_or_else(|e| e.into_inner()),
                Some(deadline) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return;
                    }
                    self.stopped
                        .wait_timeout(guard, left)
                        .unwrap_or_else(|e| e.into_inner())
                        .0
                }
            };
        }
    }
}

/// Sleeps for `total` unless `stop` is set first (see [`Stop::sleep`]).
pub fn sleep_unless_stopped(stop: &Stop, total: Duration) {
    stop.sleep(total);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_set_flag_returns_at_once_and_an_unset_one_waits_the_whole_time() {
        let stopped = Stop::new();
        stopped.set();
        let started = Instant::now();
        sleep_unless_stopped(&stopped, Duration::from_secs(60));
        assert!(started.elapsed() < Duration::from_secs(1));

        let started = Instant::now();
        sleep_unless_stopped(&Stop::new(), Duration::from_millis(120));
        assert!(started.elapsed() >= Duration::from_millis(120));
    }

    #[test]
    fn a_flag_set_by_another_thread_ends_an_endless_wait() {
        let stop = Arc::new(Stop::new());
        let setter = {
            let stop = stop.clone();
            std::thread::spawn(move || stop.set())
        };
        sleep_unless_stopped(&stop, Duration::MAX);
        setter.join().unwrap();
        assert!(stop.is_set());
    }

    #[test]
    fn a_sleeper_wakes_when_the_flag_is_set_not_at_its_deadline() {
        let stop = Arc::new(Stop::new());
        let sleeper = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let started = Instant::now();
                stop.sleep(Duration::from_secs(3600));
                started.elapsed()
            })
        };
        std::thread::sleep(Duration::from_millis(20));
        stop.set();
        assert!(sleeper.join().unwrap() < Duration::from_secs(60));
    }
}
