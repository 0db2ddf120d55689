//! Leader election with a `coordination.k8s.io/v1` Lease, as client-go's `LeaseLock` and
//! `LeaderElector` do it, and the [`Gate`] that lets only the leader's workers write.
//!
//! Expiry is judged by the local clock from when this process last saw the Lease change,
//! never from `renewTime`, so clock skew between replicas does not matter. A leader's own
//! deadline counts from when it *sent* its last successful renewal, and every Lease
//! request is cut at that deadline (client-go's renew runs under a context with the renew
//! deadline as its timeout): an answer that arrives late can never extend leadership past
//! the moment a standby may take over.
//!
//! Each acquisition starts a new leader *term* ([`Gate::term`]); renewals continue it.
//! Whatever a replica remembers of what the leader wrote (delete mode's ledger) is only
//! trusted within the term in which it was read.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use crate::client::Client;
use crate::config::LeaseTimings;
use crate::error::Error;
use crate::stop::Stop;

/// Whether this replica may write now. Workers wait on it before each item.
pub struct Gate {
    /// `None`: not the leader. `Some(t)`: the leader until `t` unless renewed.
    leading_until: Mutex<Option<Instant>>,
    /// Acquisitions so far: the number of the current (or last) leader term.
    term: AtomicU64,
    /// Leader election off: always open.
    always: bool,
    shut_down: AtomicBool,
    changed: Condvar,
}

impl Gate {
    /// For `--leader-elect=false`: every replica writes, in one endless term.
    pub fn always_open() -> Gate {
        Gate {
            leading_until: Mutex::new(None),
            term: AtomicU64::new(0),
            always: true,
            shut_down: AtomicBool::new(false),
            changed: Condvar::new(),
        }
    }

    fn closed() -> Gate {
        Gate {
            always: false,
            ..Gate::always_open()
        }
    }

    /// True while this replica is the leader and its last renewal is younger than the
    /// renew deadline: a leader that cannot renew stops writing at once, even while its
    /// renew request hangs.
    pub fn may_write(&self) -> bool {
        self.always
            || self
                .leading_until
                .lock()
                .unwrap()
                .is_some_and(|until| Instant::now() < until)
    }

    /// Blocks until [`Gate::may_write`]; false once shut down. A standby sleeps until a
    /// term begins (or shutdown): both notify, so it never wakes to look.
    pub fn wait(&self) -> bool {
        let mut until = self.leading_until.lock().unwrap();
        loop {
            if self.shut_down.load(Ordering::Relaxed) {
                return false;
            }
            if self.always || until.is_some_and(|t| Instant::now() < t) {
                return true;
            }
            until = self.changed.wait(until).unwrap();
        }
    }

    /// Makes [`Gate::wait`] return false.
    pub fn shut_down(&self) {
        self.shut_down.store(true, Ordering::Relaxed);
        // Under the lock: a waiter between its check and its sleep cannot miss it.
        let _leading = self.leading_until.lock().unwrap();
        self.changed.notify_all();
    }

    /// Whether [`Gate::shut_down`] was called (SIGTERM): work in progress should stop at
    /// its next safe point.
    pub fn is_shut_down(&self) -> bool {
        self.shut_down.load(Ordering::Relaxed)
    }

    /// The current leader term: it changes each time this replica acquires the Lease, so
    /// anything read from the API server in an earlier term may have been changed since by
    /// another leader. Always 0 without leader election.
    pub fn term(&self) -> u64 {
        self.term.load(Ordering::SeqCst)
    }

    /// The Lease was acquired: a new term, leading until `until` unless renewed.
    fn begin_term(&self, until: Instant) {
        let mut leading = self.leading_until.lock().unwrap();
        self.term.fetch_add(1, Ordering::SeqCst);
        *leading = Some(until);
        self.changed.notify_all();
    }

    /// The Lease was renewed: the same term goes on until `until`.
    fn lead_until(&self, until: Instant) {
        *self.leading_until.lock().unwrap() = Some(until);
        self.changed.notify_all();
    }

    fn close(&self) {
        *self.leading_until.lock().unwrap() = None;
    }
}

/// One replica's candidacy for the Lease.
pub struct LeaderElector {
    client: Client,
    namespace: String,
    name: String,
    identity: String,
    timings: LeaseTimings,
    gate: Arc<Gate>,
    stop: Arc<Stop>,
    record: Mutex<Observed>,
}

/// The Lease as last seen (with its resourceVersion), and when its spec last changed.
#[derive(Default)]
struct Observed {
    lease: Option<Value>,
    observed_at: Option<Instant>,
}

impl LeaderElector {
    /// A candidate for Lease `namespace/name`; call [`LeaderElector::spawn`] to run it.
    pub fn new(
        client: Client,
        namespace: String,
        name: String,
        timings: LeaseTimings,
        stop: Arc<Stop>,
    ) -> LeaderElector {
        LeaderElector {
            client,
            namespace,
            name,
            identity: identity(),
            timings,
            gate: Arc::new(Gate::closed()),
            stop,
            record: Mutex::new(Observed::default()),
        }
    }

    pub fn gate(&self) -> Arc<Gate> {
        Arc::clone(&self.gate)
    }

    fn collection_path(&self) -> String {
        format!(
            "/apis/coordination.k8s.io/v1/namespaces/{}/leases",
            self.namespace
        )
    }

    fn object_path(&self) -> String {
        format!("{}/{}", self.collection_path(), self.name)
    }

    /// Runs the acquire and renew loops in a new thread until the stop flag is set.
    pub fn spawn(self: &Arc<LeaderElector>) -> std::thread::JoinHandle<()> {
        let elector = Arc::clone(self);
        std::thread::Builder::new()
            .name("leader-election".into())
            .spawn(move || elector.run())
            .expect("spawning the leader-election thread")
    }

    /// The main loop: acquire (attempts every retry period × [1, 2.2)), then renew every
    /// retry period until a renewal has not succeeded for the renew deadline; repeat.
    ///
    /// Leadership lasts until the renew deadline after the *sending* of the last attempt
    /// that succeeded, and every request of an attempt is cut at that same deadline, so a
    /// success is always known before the gate would close, and a late answer is a failure.
    fn run(&self) {
        let lease = format!("{}/{}", self.namespace, self.name);
        let mut rng = seed();
        log::info!(
            "leader election: {} is a candidate for Lease {lease}",
            self.identity
        );
        while !self.stopped() {
            // Acquire.
            let mut deadline;
            loop {
                if self.stopped() {
                    return;
                }
                deadline = Instant::now() + self.timings.renew_deadline;
                if self.try_acquire_or_renew(deadline) {
                    self.gate.begin_term(deadline);
                    break;
                }
                rng = xorshift(rng);
                let jitter = self
                    .timings
                    .retry_period
                    .mul_f64((rng % 1200) as f64 / 1000.0);
                self.sleep(self.timings.retry_period + jitter);
            }
            crate::ops::metrics::global()
                .leader_transitions
                .fetch_add(1, Ordering::Relaxed);
            log::info!(
                "leader election: {} acquired Lease {lease}; writing (term {})",
                self.identity,
                self.gate.term()
            );
            // Renew.
            loop {
                self.sleep(self.timings.retry_period);
                if self.stopped() {
                    return;
                }
                let sent = Instant::now();
                if self.try_acquire_or_renew(deadline) {
                    deadline = sent + self.timings.renew_deadline;
                    self.gate.lead_until(deadline);
                } else if Instant::now() >= deadline {
                    self.gate.close();
                    log::warn!(
                        "leader election: could not renew Lease {lease} within {:?}; stopped writing",
                        self.timings.renew_deadline
                    );
                    break;
                }
            }
        }
    }

    fn stopped(&self) -> bool {
        self.stop.is_set()
    }

    fn sleep(&self, total: Duration) {
        crate::stop::sleep_unless_stopped(&self.stop, total);
    }

    /// One attempt (client-go's `tryAcquireOrRenew`), every request of which must be
    /// answered before `deadline`; any error fails the attempt.
    fn try_acquire_or_renew(&self, deadline: Instant) -> bool {
        let mut record = self.record.lock().unwrap();
        // Checked under the lock: after a release no attempt may take the Lease back.
        if self.stopped() {
            return false;
        }
        match self.attempt(&mut record, deadline) {
            Ok(won) => won,
            Err(err) => {
                log::debug!("leader election: attempt failed: {err}");
                false
            }
        }
    }

    /// The client for one Lease request: cut at `deadline`, and no request once it passed.
    fn until(&self, deadline: Instant) -> Result<Client, Error> {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Error::Transport(format!(
                "no time left for a Lease request within the renew deadline ({:?})",
                self.timings.renew_deadline
            )));
        }
        Ok(self.client.bounded(left))
    }

    fn attempt(&self, record: &mut Observed, deadline: Instant) -> Result<bool, Error> {
        let now = crate::time::micro_time(SystemTime::now());
        let duration = self.timings.lease_duration.as_secs();
        // 1. Fast path: still ours and still valid: renew what we hold.
        if let (Some(lease), Some(at)) = (&record.lease, record.observed_at) {
            if holder(lease) == self.identity && at + self.timings.lease_duration > Instant::now() {
                let mut renewed = lease.clone();
                renewed["spec"]["renewTime"] = json!(now);
                renewed["spec"]["leaseDurationSeconds"] = json!(duration);
                if let Ok(updated) = self
                    .until(deadline)?
                    .put::<Value>(&self.object_path(), &renewed)
                {
                    observe(record, updated);
                    return Ok(true);
                }
            }
        }
        // 2. Read it; create it when missing.
        let current: Value = match self.until(deadline)?.get(&self.object_path()) {
            Ok(lease) => lease,
            Err(err) if err.is_not_found() => {
                let lease = json!({
                    "apiVersion": "coordination.k8s.io/v1",
                    "kind": "Lease",
                    "metadata": {"name": self.name, "namespace": self.namespace},
                    "spec": {
                        "holderIdentity": self.identity,
                        "leaseDurationSeconds": duration,
                        "acquireTime": now,
                        "renewTime": now,
                        "leaseTransitions": 0,
                    },
                });
                let created = self
                    .until(deadline)?
                    .post(&self.collection_path(), &lease)?;
                observe(record, created);
                return Ok(true);
            }
            Err(err) => return Err(err),
        };
        // 3. Held by someone else whose record changed recently: not ours.
        observe(record, current.clone());
        let current_holder = holder(&current);
        let observed_at = record.observed_at.unwrap_or_else(Instant::now);
        let held_for = Duration::from_secs(
            current["spec"]["leaseDurationSeconds"]
                .as_u64()
                .unwrap_or(duration),
        );
        if !current_holder.is_empty()
            && current_holder != self.identity
            && observed_at + held_for > Instant::now()
        {
            return Ok(false);
        }
        // 4. Take over (or renew what is already ours).
        let mut next = current.clone();
        let spec = &mut next["spec"];
        if current_holder != self.identity {
            let transitions = current["spec"]["leaseTransitions"].as_u64().unwrap_or(0);
            spec["leaseTransitions"] = json!(transitions + 1);
            spec["acquireTime"] = json!(now);
        }
        spec["holderIdentity"] = json!(self.identity);
        spec["leaseDurationSeconds"] = json!(duration);
        spec["renewTime"] = json!(now);
        let updated = self.until(deadline)?.put(&self.object_path(), &next)?;
        observe(record, updated);
        Ok(true)
    }

    /// Gives the Lease up (client-go's `ReleaseOnCancel`) if this replica holds it: the
    /// gate closes first, then holderIdentity "" with leaseDurationSeconds 1 lets a
    /// standby take over on its next attempt. Call after the stop flag is set and the
    /// workers have finished.
    pub fn release(&self) {
        self.gate.close();
        let mut record = self.record.lock().unwrap();
        let Some(lease) = record.lease.clone() else {
            return;
        };
        if holder(&lease) != self.identity {
            return;
        }
        let now = crate::time::micro_time(SystemTime::now());
        let mut released = lease;
        released["spec"]["holderIdentity"] = json!("");
        released["spec"]["leaseDurationSeconds"] = json!(1);
        released["spec"]["acquireTime"] = json!(now);
        released["spec"]["renewTime"] = json!(now);
        // Bounded like a renewal: shutdown must not wait for a hanging API server.
        let client = self.client.bounded(self.timings.renew_deadline);
        match client.put::<Value>(&self.object_path(), &released) {
            Ok(updated) => {
                observe(&mut record, updated);
                log::info!(
                    "leader election: released Lease {}/{}",
                    self.namespace,
                    self.name
                );
            }
            Err(err) => log::warn!(
                "leader election: could not release Lease {}/{}: {err}; a standby takes over when it expires",
                self.namespace,
                self.name
            ),
        }
    }
}

fn holder(lease: &Value) -> &str {
    lease["spec"]["holderIdentity"].as_str().unwrap_or("")
}

/// Remembers the Lease; the observed time moves only when its spec changed.
fn observe(record: &mut Observed, lease: Value) {
    let changed = record
        .lease
        .as_ref()
        .is_none_or(|old| old["spec"] != lease["spec"]);
    if changed || record.observed_at.is_none() {
        record.observed_at = Some(Instant::now());
    }
    record.lease = Some(lease);
}

/// Hostname plus a random suffix: unique per process, readable in `kubectl get lease`.
fn identity() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "wavelet".into());
    format!("{host}_{:016x}", xorshift(seed()))
}

/// Randomness for jitter and the identity suffix (not cryptography): std's per-process
/// random hasher keys, the time and the pid.
fn seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos(),
    );
    hasher.write_u32(std::process::id());
    hasher.finish() | 1
}

fn xorshift(mut x: u64) -> u64 {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identities_differ_between_candidates() {
        assert_ne!(identity(), identity());
    }

    #[test]
    fn a_leader_whose_deadline_passed_may_not_write() {
        let gate = Gate::closed();
        assert!(!gate.may_write());
        gate.lead_until(Instant::now() + Duration::from_secs(60));
        assert!(gate.may_write());
        gate.lead_until(Instant::now());
        assert!(!gate.may_write());
        assert!(Gate::always_open().may_write());
    }

    #[test]
    fn each_acquisition_starts_a_new_term_and_renewals_keep_it() {
        let gate = Gate::closed();
        assert_eq!(gate.term(), 0);
        gate.begin_term(Instant::now() + Duration::from_secs(60));
        assert_eq!(gate.term(), 1);
        gate.lead_until(Instant::now() + Duration::from_secs(60));
        assert_eq!(gate.term(), 1);
        gate.close();
        gate.begin_term(Instant::now() + Duration::from_secs(60));
        assert_eq!(gate.term(), 2);
        assert_eq!(Gate::always_open().term(), 0);
    }

    #[test]
    fn a_shut_down_gate_stops_waiting() {
        let gate = Arc::new(Gate::closed());
        let waiter = {
            let gate = Arc::clone(&gate);
            std::thread::spawn(move || gate.wait())
        };
        std::thread::sleep(Duration::from_millis(50));
        gate.shut_down();
        assert!(!waiter.join().unwrap());
    }

    #[test]
    fn a_standby_waiting_at_the_gate_wakes_when_its_term_begins() {
        let gate = Arc::new(Gate::closed());
        let waiter = {
            let gate = Arc::clone(&gate);
            std::thread::spawn(move || gate.wait())
        };
        std::thread::sleep(Duration::from_millis(20));
        assert!(!waiter.is_finished(), "a closed gate holds");
        gate.begin_term(Instant::now() + Duration::from_secs(60));
        assert!(waiter.join().unwrap());
    }

    #[test]
    fn observing_an_unchanged_spec_keeps_the_observed_time() {
        let mut record = Observed::default();
        let lease = json!({"metadata": {"resourceVersion": "1"}, "spec": {"holderIdentity": "a"}});
        observe(&mut record, lease.clone());
        let first = record.observed_at.unwrap();
        std::thread::sleep(Duration::from_millis(5));
        let mut same = lease.clone();
        same["metadata"]["resourceVersion"] = json!("2");
        observe(&mut record, same);
        assert_eq!(record.observed_at, Some(first));
        let mut renewed = lease;
        renewed["spec"]["renewTime"] = json!("x");
        observe(&mut record, renewed);
        assert!(record.observed_at.unwrap() > first);
    }
}
