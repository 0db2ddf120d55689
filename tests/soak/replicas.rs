//! wavelet as the chart runs it with two replicas: leader election on a Lease, and now and
//! then the leader stopped mid-run (SIGKILL mostly, SIGTERM sometimes) and a new replica
//! started in its place, as a ReplicaSet would; the standby takes over, fan-outs under way
//! included. Every process's output is kept for the failure report.

use std::time::{Duration, Instant};

use crate::util::{metric, Wavelet};

use super::rng::Rng;

/// Short leader-election timings, so a take-over fits the convergence bound.
pub const LEASE_DURATION: Duration = Duration::from_secs(2);
pub const ELECTION: &[&str] = &[
    "--leader-elect",
    "--lease-name",
    "wavelet",
    "--lease-duration",
    "2s",
    "--renew-deadline",
    "1500ms",
    "--retry-period",
    "300ms",
];
pub const REPLICAS: usize = 2;

pub struct Replicas {
    args: Vec<String>,
    env: Vec<(String, String)>,
    live: Vec<(usize, Wavelet)>,
    /// The output of the replicas stopped so far, each under a heading.
    gone: String,
    started: usize,
}

impl Replicas {
    /// Starts two replicas with `args`; waits until one of them leads.
    pub fn start(args: &[&str], env: &[(&str, &str)]) -> Replicas {
        let mut replicas = Replicas {
            args: args.iter().map(|a| a.to_string()).collect(),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            live: Vec::new(),
            gone: String::new(),
            started: 0,
        };
        for _ in 0..REPLICAS {
            replicas.launch();
        }
        replicas
    }

    fn launch(&mut self) {
        let args: Vec<&str> = self.args.iter().map(String::as_str).collect();
        let env: Vec<(&str, &str)> = self
            .env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let wavelet = Wavelet::launch(&args, &env);
        assert!(
            wavelet.wait_for_output("listening on ", Duration::from_secs(20)),
            "replica {} did not listen:\n{}",
            self.started,
            wavelet.output()
        );
        self.live.push((self.started, wavelet));
        self.started += 1;
    }

    /// The live replica that says it leads, if one does.
    fn leader(&self) -> Option<usize> {
        self.live
            .iter()
            .position(|(_, w)| metric(w, "wavelet_leader", "") == 1.0)
    }

    /// Waits (up to `timeout`) until a replica leads.
    pub fn wait_for_leader(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if self.leader().is_some() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }

    /// Stops the leader (SIGKILL three times in four, else SIGTERM) and starts a new
    /// replica in its place; says what it did.
    pub fn replace_leader(&mut self, rng: &mut Rng) -> String {
        let Some(index) = self.leader() else {
            return "no leader to stop (a take-over under way)".to_string();
        };
        let (number, mut wavelet) = self.live.remove(index);
        let signal = if rng.chance(75) { "KILL" } else { "TERM" };
        wavelet.signal(signal);
        let exit = wavelet.wait_exit(Duration::from_secs(15));
        assert!(
            exit.is_some(),
            "replica {number} did not stop on SIG{signal}"
        );
        self.gone.push_str(&format!(
            "\n--- replica {number} (stopped by SIG{signal}: {exit:?})\n{}",
            wavelet.output()
        ));
        self.launch();
        format!(
            "SIG{signal} the leader (replica {number}), start replica {}",
            self.started - 1
        )
    }

    /// A replica that exited without being stopped, if any.
    pub fn crashed(&mut self) -> Option<usize> {
        self.live
            .iter_mut()
            .find_map(|(n, w)| (!w.is_running()).then_some(*n))
    }

    /// The output of every replica, the stopped ones first.
    pub fn output(&self) -> String {
        let mut all = self.gone.clone();
        for (number, wavelet) in &self.live {
            all.push_str(&format!(
                "\n--- replica {number} (live)\n{}",
                wavelet.output()
            ));
        }
        all
    }

    /// The largest resident memory of the live replicas, in KiB.
    pub fn rss_kib(&self) -> u64 {
        self.live
            .iter()
            .map(|(_, w)| w.rss_kib())
            .max()
            .unwrap_or(0)
    }

    /// Replicas started so far.
    pub fn started(&self) -> usize {
        self.started
    }
}
