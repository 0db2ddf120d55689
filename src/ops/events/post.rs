//! The thread that writes Events, off the workers' path: it takes the next series of the
//! correlator's queue and makes the API server hold it, at most [`PER_SECOND`] requests a
//! second ([`BURST`] at once) on top of the client's budget. A Warning not written by this
//! process is looked up first (its name is the same across restarts): found, its count
//! grows with a PATCH instead of a second Event being posted. A PATCH of an Event that
//! expired meanwhile (the API server keeps them an hour) posts it anew, and a POST that
//! finds one already there adds to it.

use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::Deserialize;

use super::correlate::{Correlator, Fate, Said, Stored, Write};
use super::{event_body, event_patch};
use crate::client::{Client, PatchType};
use crate::error::Error;
use crate::objects::Resource;
use crate::ops::metrics;

/// Event requests a second, and at once: a burst of Warnings never takes more than a
/// quarter of the default client budget (`--api-qps` 20).
const PER_SECOND: f64 = 5.0;
const BURST: f64 = 25.0;

/// What the recorder and the writer thread share.
pub(super) struct Shared {
    client: Client,
    instance: String,
    state: Mutex<State>,
    wake: Condvar,
}

#[derive(Default)]
struct State {
    correlator: Correlator,
    /// Set at shutdown: write until then, drop what is left after it.
    closing: Option<Instant>,
}

impl Shared {
    pub(super) fn new(client: Client, instance: String) -> Shared {
        Shared {
            client,
            instance,
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
        }
    }

    pub(super) fn observe(&self, said: &Said, now: Instant, wall: u64) -> Fate {
        let fate = self.lock().correlator.observe(said, now, wall);
        if matches!(fate, Fate::Own | Fate::Summed { .. }) {
            self.wake.notify_one();
        }
        fate
    }

    /// Drops every series about an object `gone` accepts; how many were queued.
    pub(super) fn forget(&self, gone: impl Fn(&super::ObjectRef) -> bool) -> usize {
        self.lock().correlator.drop_about(gone)
    }

    /// See [`super::correlate::Correlator::namespace_terminating`].
    pub(super) fn namespace_terminating(&self, namespace: &str) -> usize {
        self.lock().correlator.namespace_terminating(namespace)
    }

    /// See [`super::correlate::Correlator::namespace_gone`].
    pub(super) fn namespace_gone(&self, namespace: &str) -> usize {
        self.lock().correlator.namespace_gone(namespace)
    }

    pub(super) fn close(&self, deadline: Instant) {
        self.lock().closing = Some(deadline);
        self.wake.notify_all();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The next write, waiting for one; `None` once closing and nothing is left, or past
    /// the deadline (what is left is dropped and counted).
    fn next(&self) -> Option<Write> {
        let mut state = self.lock();
        loop {
            if let Some(deadline) = state.closing {
                if Instant::now() >= deadline {
                    let mut left = 0;
                    while state.correlator.next_write().is_some() {
                        left += 1;
                    }
                    if left > 0 {
                        metrics::global().events_dropped.add(&["stopping"], left);
                        log::debug!("stopping: {left} Event(s) not written");
                    }
                    return None;
                }
            }
            if state.closing.is_some() {
                // Flushing: every series at once, due or not.
                return state.correlator.next_write();
            }
            match state.correlator.next_due(Instant::now()) {
                Ok(Some(write)) => return Some(write),
                Ok(None) => state = self.wake.wait(state).unwrap_or_else(|e| e.into_inner()),
                Err(at) => {
                    let wait = at.saturating_duration_since(Instant::now());
                    state = self
                        .wake
                        .wait_timeout(state, wait)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
            }
        }
    }
}

/// Starts the writer.
pub(super) fn spawn(shared: Arc<Shared>) -> JoinHandle<()> {
    std::thread::Builder::new()
        .name("events".into())
        .spawn(move || {
            let mut pace = Pace::new(Instant::now());
            while let Some(write) = shared.next() {
                let (stored, found) = match write_series(&shared, &write, &mut pace) {
                    Ok(written) => written,
                    // A POST answered 404 (or 403 while the namespace is being deleted):
                    // the namespace is gone, and with it every Event queued for it (one
                    // answer, not one per series).
                    Err(err) if err.is_not_found() || err.is_namespace_terminating() => {
                        let ns = &write.series.about.namespace;
                        let dropped = shared.forget(|about| about.namespace == *ns);
                        metrics::global().events_dropped.add(&["gone"], dropped as u64 + 1);
                        log::debug!(
                            "namespace {ns} is gone or being deleted (an Event there refused): {} queued Event(s) dropped",
                            dropped + 1
                        );
                        continue;
                    }
                    Err(err) => {
                        let s = &write.series;
                        log::warn!(
                            "could not record {} event on {} {}/{}: {err}",
                            s.reason,
                            s.about.kind,
                            s.about.namespace,
                            s.about.name
                        );
                        metrics::global().events_dropped.inc(&["error"]);
                        (Stored::Unknown, false)
                    }
                };
                shared.lock().correlator.stored(write.key, stored, found);
            }
        })
        .expect("spawning the events thread")
}

#[derive(Deserialize)]
struct EventCount {
    #[serde(default)]
    count: u32,
}

/// Makes the API server hold `write`'s series with its pending occurrences added; returns
/// what it holds then, and whether a look-up found it written before (by an earlier
/// process: [`Correlator::stored`](super::correlate::Correlator::stored)).
fn write_series(shared: &Shared, write: &Write, pace: &mut Pace) -> Result<(Stored, bool), Error> {
    let series = &write.series;
    let path = Resource::events().object_path(&series.about.namespace, &series.name);
    let (stored, found) = match series.stored {
        Stored::Unknown => {
            let looked_up = look_up(shared, &path, pace)?;
            (looked_up, matches!(looked_up, Stored::Count(_)))
        }
        known => (known, false),
    };
    if series.pending == 0 {
        // Queued to be looked up only (a summary before its first member).
        return Ok((stored, found));
    }
    match stored {
        Stored::Count(count) => match patch(shared, write, &path, count, pace) {
            Err(err) if err.is_not_found() => create(shared, write, series.pending, pace),
            other => other,
        }
        .map(|written| (written, found)),
        Stored::Absent | Stored::Unknown => {
            match create(shared, write, series.pending.max(1), pace) {
                // Written meanwhile by another process (one that was stopping): found.
                Err(err) if err.is_already_exists() => match look_up(shared, &path, pace)? {
                    Stored::Count(count) => {
                        patch(shared, write, &path, count, pace).map(|written| (written, true))
                    }
                    _ => Err(err),
                },
                other => other.map(|written| (written, false)),
            }
        }
    }
}

fn look_up(shared: &Shared, path: &str, pace: &mut Pace) -> Result<Stored, Error> {
    pace.wait();
    match shared.client.get::<EventCount>(path) {
        Ok(event) => Ok(Stored::Count(event.count.max(1))),
        Err(err) if err.is_not_found() => Ok(Stored::Absent),
        Err(err) => Err(err),
    }
}

fn create(shared: &Shared, write: &Write, count: u32, pace: &mut Pace) -> Result<Stored, Error> {
    let series = &write.series;
    pace.wait();
    let path = Resource::events().collection_path(Some(&series.about.namespace));
    shared
        .client
        .post::<serde::de::IgnoredAny>(&path, &event_body(series, count, &shared.instance))?;
    Ok(Stored::Count(count))
}

fn patch(
    shared: &Shared,
    write: &Write,
    path: &str,
    stored: u32,
    pace: &mut Pace,
) -> Result<Stored, Error> {
    let series = &write.series;
    let count = stored.saturating_add(series.pending);
    pace.wait();
    shared.client.patch::<serde::de::IgnoredAny>(
        path,
        PatchType::Strategic,
        &event_patch(series, count),
    )?;
    Ok(Stored::Count(count))
}

/// The writer's own token bucket: [`PER_SECOND`] with [`BURST`] saved up.
struct Pace {
    tokens: f64,
    at: Instant,
}

impl Pace {
    fn new(now: Instant) -> Pace {
        Pace {
            tokens: BURST,
            at: now,
        }
    }

    /// How long the next request must wait at `now` (and takes its token).
    fn take(&mut self, now: Instant) -> Duration {
        let earned = now.saturating_duration_since(self.at).as_secs_f64() * PER_SECOND;
        self.tokens = (self.tokens + earned).min(BURST) - 1.0;
        self.at = now;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / PER_SECOND)
        }
    }

    fn wait(&mut self) {
        let wait = self.take(Instant::now());
        if !wait.is_zero() {
            std::thread::sleep(wait);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_writer_sends_a_burst_then_five_a_second() {
        let t0 = Instant::now();
        let mut pace = Pace::new(t0);
        for _ in 0..25 {
            assert_eq!(pace.take(t0), Duration::ZERO);
        }
        assert_eq!(pace.take(t0), Duration::from_millis(200));
        assert_eq!(pace.take(t0), Duration::from_millis(400));
        let later = t0 + Duration::from_secs(60);
        assert_eq!(pace.take(later), Duration::ZERO, "refilled");
    }
}
