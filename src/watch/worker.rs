//! The one worker loop of every work queue (hash mode, delete mode, Secret reads), in the
//! shape of client-go's `processNextWorkItem` and kube-runtime's `Action` + error policy:
//! take a key, process it, and let the returned [`Action`] (or the error) decide when the
//! key comes back, in the class of work it was handed out as (its requests wait for the
//! budget in that class too). The retry policy lives here and in [`WorkQueue::add_after_failure`]
//! alone; every wait is the queue's, which shutting down ends at once.

use std::fmt::Display;
use std::hash::Hash;
use std::time::Duration;

use crate::client::with_priority;
use crate::error::Error;
use crate::ops::leader::Gate;
use crate::ops::metrics;
use crate::watch::queue::WorkQueue;

/// What the queue does with a key once it was processed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Up to date, or waiting for a change that will enqueue the key again.
    Done,
    /// Come back after this long (storm rules, a debounce window, a rolling replacement
    /// polling for Ready Pods).
    RequeueAfter(Duration),
    /// Refused for now (an eviction a PodDisruptionBudget blocks): come back after the
    /// key's next backoff delay.
    Backoff,
}

/// One kind of work.
pub trait Work<K> {
    /// Processes one key; an error is retried after the queue's backoff (or the server's
    /// `Retry-After`, when longer).
    fn process(&self, key: &K) -> Result<Action, Error>;

    /// Processing `key` failed with `err`; it comes back after `delay`.
    fn failed(&self, key: &K, err: &Error, delay: Duration);
}

/// Runs until the queue shuts down. With a `gate` (leader election), waits to be allowed
/// to write before taking a key, and puts back a key taken just as the lease was lost.
pub fn run_worker<K: Clone + Eq + Hash + Display>(
    queue: &WorkQueue<K>,
    gate: Option<&Gate>,
    work: &dyn Work<K>,
) {
    loop {
        if gate.is_some_and(|g| !g.wait()) {
            return;
        }
        let Some((key, priority)) = queue.next() else {
            return;
        };
        if gate.is_some_and(|g| !g.may_write()) {
            // Lost the lease while waiting: keep the key for the next leader term.
            metrics::global().changes_skipped.inc(&["not_leader"]);
            queue.add(key.clone());
            queue.done(&key);
            continue;
        }
        // Its requests wait for the budget in its class: an urgent key's go first.
        match with_priority(priority, || work.process(&key)) {
            Ok(Action::Done) => queue.forget(&key),
            Ok(Action::RequeueAfter(delay)) => {
                queue.forget(&key);
                queue.add_after_as(key.clone(), delay, priority);
            }
            Ok(Action::Backoff) => {
                queue.add_with_backoff(key.clone(), priority);
            }
            Err(err) => {
                let delay = queue.add_after_failure(key.clone(), priority, &err);
                work.failed(&key, &err, delay);
            }
        }
        queue.done(&key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::watch::queue::Backoff;
    use std::sync::Mutex;

    struct Script {
        answers: Mutex<Vec<Result<Action, Error>>>,
        failures: Mutex<Vec<Duration>>,
        queue: std::sync::Arc<WorkQueue<&'static str>>,
    }

    impl Work<&'static str> for Script {
        fn process(&self, _key: &&'static str) -> Result<Action, Error> {
            let next = self.answers.lock().unwrap().remove(0);
            if self.answers.lock().unwrap().is_empty() {
                self.queue.shut_down();
            }
            next
        }

        fn failed(&self, _key: &&'static str, _err: &Error, delay: Duration) {
            self.failures.lock().unwrap().push(delay);
        }
    }

    #[test]
    fn a_failure_is_retried_after_the_backoff_and_done_forgets_it() {
        let queue = std::sync::Arc::new(WorkQueue::new(Backoff {
            initial: Duration::from_millis(1),
            max: Duration::from_millis(10),
        }));
        queue.add("a");
        let script = Script {
            answers: Mutex::new(vec![
                Err(Error::Transport("reset".into())),
                Ok(Action::RequeueAfter(Duration::from_millis(1))),
                Ok(Action::Done),
            ]),
            failures: Mutex::new(Vec::new()),
            queue: std::sync::Arc::clone(&queue),
        };
        run_worker(&queue, None, &script);
        assert!(
            script.answers.lock().unwrap().is_empty(),
            "every answer used"
        );
        assert_eq!(*script.failures.lock().unwrap(), [Duration::from_millis(1)]);
    }
}
