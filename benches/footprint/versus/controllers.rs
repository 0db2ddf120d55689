//! The controllers under test as processes against the real API server, each as its
//! own user: wavelet (storm limits off, as the load tests run it), Stakater Reloader
//! (as its chart starts it: `--log-level=info`, the env-vars strategy) and Wave (its
//! global update rate raised). Sampled from `/proc` every 100 ms; "ready" is each one's
//! own condition followed by a second of idle CPU.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use crate::loadtest::OptIn;
use crate::process::Sample;

use super::plane::Plane;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Which {
    Wavelet,
    Reloader,
    Wave,
}

/// Wave's update limits in the benchmark (its defaults, 1 per second with a burst of
/// 100, make 1,000 workloads take 15 minutes at start).
pub const WAVE_RAISED_RATES: [&str; 2] = ["--update-rate=10000", "--update-burst=100000"];

impl Which {
    pub const ALL: [Which; 3] = [Which::Wavelet, Which::Reloader, Which::Wave];

    pub fn name(self) -> &'static str {
        match self {
            Which::Wavelet => "wavelet",
            Which::Reloader => "reloader",
            Which::Wave => "wave",
        }
    }

    pub fn title(self) -> &'static str {
        match self {
            Which::Wavelet => "wavelet",
            Which::Reloader => "Reloader",
            Which::Wave => "Wave",
        }
    }

    pub fn parse(text: &str) -> Option<Which> {
        Which::ALL
            .into_iter()
            .find(|w| w.name().eq_ignore_ascii_case(text.trim()))
    }

    pub fn user(self) -> &'static str {
        match self {
            Which::Wavelet => "bench-wavelet",
            Which::Reloader => "bench-reloader",
            Which::Wave => "bench-wave",
        }
    }

    pub fn token(self) -> String {
        format!("{}-token", self.user())
    }

    pub fn opt_in(self) -> OptIn {
        match self {
            Which::Wave => OptIn::Wave,
            _ => OptIn::Reloader,
        }
    }

    /// How it was started, for the tables.
    pub fn how(self) -> String {
        match self {
            Which::Wavelet => {
                let mut args: Vec<String> = crate::loadtest::WAVELET_FLAGS
                    .iter()
                    .map(|a| a.to_string())
                    .collect();
                args.extend(extra_wavelet_args());
                format!("wavelet {}", args.join(" "))
            }
            Which::Reloader => {
                "Reloader v1.4.21 --log-level=info (its chart's arguments; env-vars strategy)"
                    .into()
            }
            Which::Wave => format!(
                "Wave v0.11.0 at its defaults in the scenarios (--update-rate 1, --update-burst 100), with {} at start-up",
                WAVE_RAISED_RATES.join(" ")
            ),
        }
    }
}

/// More flags for wavelet, from `WAVELET_BENCH_WAVELET_ARGS` (split at spaces), e.g.
/// `--fan-out at-once` to see S2 without safe fan-out's waves.
fn extra_wavelet_args() -> Vec<String> {
    std::env::var("WAVELET_BENCH_WAVELET_ARGS")
        .unwrap_or_default()
        .split_whitespace()
        .map(String::from)
        .collect()
}

/// Where the peers' binaries are: `WAVELET_BENCH_PEERS` (default `target/peers-bin`).
pub fn peers_dir() -> PathBuf {
    std::env::var_os("WAVELET_BENCH_PEERS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/target/peers-bin")))
}

/// How a run starts the controller.
#[derive(Clone, Debug, Default)]
pub struct Start {
    /// S11: Reloader with `--reload-strategy=annotations`.
    pub annotations_strategy: bool,
    /// wavelet's `--resync` (its default, 4h jittered, when `None`).
    pub resync: Option<String>,
    /// Wave with [`WAVE_RAISED_RATES`]: at its default (1 update a second after a burst of
    /// 100) it takes a quarter of an hour to write its hash onto the start-up cluster's
    /// 1,000 Deployments. The scenarios run it at its defaults, like the others.
    pub wave_raised_rates: bool,
}

/// One process of a controller (S6 restarts it: two).
struct Life {
    child: Child,
    log: PathBuf,
    samples: Arc<Mutex<Vec<Sample>>>,
    sampling: Arc<AtomicBool>,
    /// The last sample, taken when it had exited (a zombie keeps its counters).
    last: Option<Sample>,
}

/// A controller under test; its processes are killed on drop.
pub struct Controller {
    pub which: Which,
    /// When its first process started.
    pub started: Instant,
    lives: Vec<Life>,
    start: Start,
    /// Requests counted by its processes that have exited.
    earlier_requests: f64,
}

/// `(rss average KiB, peak KiB)` and CPU figures of a finished controller.
#[derive(Clone, Copy, Debug, Default)]
pub struct Usage {
    pub rss_avg_kib: f64,
    pub rss_peak_kib: u64,
    /// CPU seconds of all its processes.
    pub cpu_seconds: f64,
}

fn spawn(which: Which, plane: &Plane, start: &Start, n: usize) -> Life {
    let log = plane
        .dir
        .join(format!("{}-{}-{n}.log", which.name(), std::process::id()));
    let log_file = std::fs::File::create(&log).expect("creating a controller's log");
    let kubeconfig = plane.kubeconfig(which);
    let mut command = match which {
        Which::Wavelet => {
            let mut c = Command::new(crate::process::binary());
            c.args(["run", "--kubeconfig"])
                .arg(kubeconfig)
                .args(["--listen-addr", "127.0.0.1:0"])
                .args(crate::loadtest::WAVELET_FLAGS)
                .args(extra_wavelet_args());
            if let Some(resync) = &start.resync {
                c.args(["--resync", resync]);
            }
            c.env_clear().env("RUST_LOG", "info");
            c
        }
        Which::Reloader => {
            let mut c = Command::new(peers_dir().join("reloader"));
            c.arg("--log-level=info");
            if start.annotations_strategy {
                c.arg("--reload-strategy=annotations");
            }
            c.env_clear().env("KUBECONFIG", kubeconfig);
            c
        }
        Which::Wave => {
            let mut c = Command::new(peers_dir().join("wave"));
            c.arg("--kubeconfig").arg(kubeconfig);
            if start.wave_raised_rates {
                c.args(WAVE_RAISED_RATES);
            }
            c.env_clear();
            c
        }
    };
    if let Some(group) = plane.cluster.process_group() {
        command.process_group(group);
    }
    let child = command
        .stdin(Stdio::null())
        .stdout(log_file.try_clone().expect("log file"))
        .stderr(log_file)
        .spawn()
        .unwrap_or_else(|e| panic!("starting {}: {e} (see WAVELET_BENCH_PEERS)", which.name()));
    let samples = Arc::new(Mutex::new(Vec::new()));
    let sampling = Arc::new(AtomicBool::new(true));
    {
        let (samples, sampling, pid) = (Arc::clone(&samples), Arc::clone(&sampling), child.id());
        std::thread::spawn(move || {
            while sampling.load(Ordering::Relaxed) {
                let s = Sample::of(pid);
                if s.rss_kib > 0 {
                    samples.lock().unwrap().push(s);
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
    }
    Life {
        child,
        log,
        samples,
        sampling,
        last: None,
    }
}

/// The state letter of `/proc/PID/stat` (`Z` for a zombie).
fn state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

impl Life {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGTERM (a pod deletion), then its last counters as a zombie, then reaped;
    /// SIGKILL after 10 s.
    fn stop(&mut self) {
        if self.last.is_some() {
            return;
        }
        let pid = self.pid();
        // Threads' own counters are finer than the process's ticks, which a zombie keeps
        // alone: the larger of the two readings, before and after.
        let before = Sample::of(pid);
        let _ = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while state(pid).is_some_and(|s| s != 'Z') && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        let last = Sample::of(pid);
        self.sampling.store(false, Ordering::Relaxed);
        let _ = self.child.kill();
        let _ = self.child.wait();
        let peak = self
            .samples
            .lock()
            .unwrap()
            .iter()
            .map(|s| s.peak_kib)
            .max()
            .unwrap_or(0);
        self.last = Some(Sample {
            peak_kib: last.peak_kib.max(peak),
            cpu_seconds: last.cpu_seconds.max(before.cpu_seconds),
            ..last
        });
    }
}

impl Drop for Life {
    fn drop(&mut self) {
        self.sampling.store(false, Ordering::Relaxed);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A plain HTTP/1.1 GET on 127.0.0.1: the whole response, or `None` if nothing answers.
fn http_response(addr: &str, path: &str) -> Option<String> {
    let mut stream = TcpStream::connect(addr).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    Some(response)
}

/// The status code of a plain HTTP/1.1 GET on 127.0.0.1, or `None` if nothing answers.
pub fn http_status(addr: &str, path: &str) -> Option<u16> {
    http_response(addr, path)?.split(' ').nth(1)?.parse().ok()
}

/// A plain HTTP/1.1 GET on 127.0.0.1: the body, or `None` if nothing answers.
pub fn http_get(addr: &str, path: &str) -> Option<String> {
    http_response(addr, path)?
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
}

impl Controller {
    pub fn start(which: Which, plane: &Plane, start: Start) -> Controller {
        let started = Instant::now();
        let life = spawn(which, plane, &start, 0);
        Controller {
            which,
            started,
            lives: vec![life],
            start,
            earlier_requests: 0.0,
        }
    }

    fn life(&self) -> &Life {
        self.lives.last().expect("a process")
    }

    pub fn pid(&self) -> u32 {
        self.life().pid()
    }

    /// Memory and CPU now (CPU: of all its processes so far).
    pub fn sample(&self) -> Sample {
        let mut now = Sample::of(self.pid());
        now.cpu_seconds += self.earlier_cpu();
        now
    }

    fn earlier_cpu(&self) -> f64 {
        self.lives[..self.lives.len() - 1]
            .iter()
            .filter_map(|l| l.last.map(|s| s.cpu_seconds))
            .sum()
    }

    /// Where its `/metrics` answers.
    pub fn metrics_addr(&self) -> Option<String> {
        match self.which {
            Which::Reloader => Some("127.0.0.1:9090".into()),
            Which::Wave => Some("127.0.0.1:8080".into()),
            Which::Wavelet => {
                let log = self.life().log_text();
                let rest = &log[log.find("listening on ")? + "listening on ".len()..];
                rest.split_whitespace().next().map(String::from)
            }
        }
    }

    /// Its own count of API requests (wavelet's `wavelet_api_requests_total`, the peers'
    /// client-go `rest_client_requests_total`).
    pub fn own_request_count(&self) -> Option<f64> {
        let text = http_get(&self.metrics_addr()?, "/metrics")?;
        let family = match self.which {
            Which::Wavelet => "wavelet_api_requests_total",
            _ => "rest_client_requests_total",
        };
        Some(
            self.earlier_requests
                + text
                    .lines()
                    .filter(|l| l.starts_with(family))
                    .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                    .sum::<f64>(),
        )
    }

    /// Its own signal that it started: wavelet's `initial sync complete`, the peers'
    /// `/metrics` answering.
    fn up(&self) -> bool {
        match self.which {
            Which::Wavelet => self.life().log_text().contains("initial sync complete"),
            _ => self
                .metrics_addr()
                .and_then(|a| http_get(&a, "/metrics"))
                .is_some_and(|t| !t.is_empty()),
        }
    }

    /// Waits until it is up, `written` distinct workloads carry its write (wavelet's
    /// adoption, Wave's first hash; 0 for Reloader, which writes nothing at start), and its
    /// CPU then stays idle (≤ 10 ms) for a second. Returns the sample at the start of
    /// that second.
    pub fn wait_ready(
        &mut self,
        plane: &Plane,
        written: usize,
        since: SystemTime,
        timeout: Duration,
    ) -> Sample {
        let deadline = Instant::now() + timeout;
        let mut up = false;
        loop {
            assert!(
                Instant::now() < deadline,
                "{} not ready within {timeout:?} ({} of {written} workloads written); its log: {}",
                self.which.name(),
                plane.workloads_written(self.which, since),
                self.life().log.display()
            );
            let pid = self.pid();
            if state(pid).is_none_or(|s| s == 'Z') {
                // The peers' metrics ports are fixed (Reloader :9090, Wave :8080), and
                // another program on this machine may hold one for a while: try again.
                let busy = self.life().log_text().contains("address already in use");
                assert!(
                    busy && Instant::now() + Duration::from_secs(5) < deadline,
                    "{} exited; its log: {}",
                    self.which.name(),
                    self.life().log.display()
                );
                eprintln!(
                    "versus: {}'s port is taken by another program; starting it again in 5 s",
                    self.which.name()
                );
                std::thread::sleep(Duration::from_secs(5));
                let n = self.lives.len();
                let first = n == 1;
                self.lives.pop();
                if first {
                    self.started = Instant::now();
                }
                self.lives.push(spawn(self.which, plane, &self.start, n));
                up = false;
                continue;
            }
            up = up || self.up();
            if !up || (written > 0 && plane.workloads_written(self.which, since) < written) {
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
            let before = self.sample();
            std::thread::sleep(Duration::from_secs(1));
            if self.sample().cpu_seconds - before.cpu_seconds <= 0.011 {
                return before;
            }
        }
    }

    /// wavelet: waits until `/readyz` answers 200 (caches synced, changes acted on; its
    /// adoptions may still be under way) and returns the sample of that moment (polled
    /// every 20 ms).
    pub fn wait_readyz(&mut self, timeout: Duration) -> Sample {
        let deadline = Instant::now() + timeout;
        loop {
            let ready = self
                .metrics_addr()
                .and_then(|addr| http_status(&addr, "/readyz"))
                == Some(200);
            if ready {
                return self.sample();
            }
            assert!(
                Instant::now() < deadline,
                "{} not ready within {timeout:?}; its log: {}",
                self.which.name(),
                self.life().log.display()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops the current process (S6), its own request count kept.
    pub fn stop_process(&mut self) {
        if let Some(total) = self.own_request_count() {
            self.earlier_requests = total;
        }
        if let Some(life) = self.lives.last_mut() {
            life.stop();
        }
    }

    /// Starts it again (S6) and waits until ready (nothing to write).
    pub fn restart(&mut self, plane: &Plane) {
        let n = self.lives.len();
        self.lives.push(spawn(self.which, plane, &self.start, n));
        self.wait_ready(plane, 0, SystemTime::now(), Duration::from_secs(300));
    }

    /// Stops it; memory and CPU over its whole run.
    pub fn finish(mut self) -> Usage {
        for life in &mut self.lives {
            life.stop();
        }
        let samples: Vec<Sample> = self
            .lives
            .iter()
            .flat_map(|l| l.samples.lock().unwrap().clone())
            .collect();
        Usage {
            rss_avg_kib: samples.iter().map(|s| s.rss_kib as f64).sum::<f64>()
                / samples.len().max(1) as f64,
            rss_peak_kib: self
                .lives
                .iter()
                .filter_map(|l| l.last.map(|s| s.peak_kib))
                .max()
                .unwrap_or(0),
            cpu_seconds: self
                .lives
                .iter()
                .filter_map(|l| l.last.map(|s| s.cpu_seconds))
                .sum(),
        }
    }
}
