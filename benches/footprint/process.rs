//! The wavelet process under measurement: which binary, starting it against the fake,
//! its log lines, and its memory and CPU time from `/proc/PID/`.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, ChildStderr, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// The log line wavelet writes (at info) once all its initial lists are in.
const SYNC_LINE: &str = "initial sync complete";
/// The start of the log line that names the address of `/metrics`.
const LISTENING: &str = "listening on ";
/// Log lines kept for the message when something goes wrong.
const LOG_TAIL: usize = 40;
/// `/proc/PID/stat` counts CPU time in USER_HZ ticks, 100 per second on Linux.
const TICKS_PER_SECOND: f64 = 100.0;

/// The binary under test: `WAVELET_BENCH_BINARY` (e.g. the static musl build that
/// ships), else the release build cargo made for this benchmark.
/// A kubeconfig for the fake API server over TLS at `server` (trusting the fixture CA),
/// written once per server into the temporary directory.
pub fn tls_kubeconfig(server: &str) -> PathBuf {
    let ca = format!("{}/tests/fixtures/tls/ca.crt", env!("CARGO_MANIFEST_DIR"));
    let kubeconfig = std::env::temp_dir().join(format!(
        "wavelet-footprint-{}-{}.kubeconfig",
        std::process::id(),
        server.rsplit(':').next().unwrap_or("0")
    ));
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: {server}\n    certificate-authority: {ca}\nusers:\n- name: fake\n  user:\n    token: footprint\ncontexts:\n- name: fake\n  context:\n    cluster: fake\n    user: fake\ncurrent-context: fake\n"
    );
    std::fs::write(&kubeconfig, text).expect("writing the benchmark's kubeconfig");
    kubeconfig
}

/// With `WAVELET_BENCH_HOLD=<file>`, keeps the loaded, adopted API server (`which`: the
/// fake or the real control plane) up after the run for profiling by hand (`perf record
/// -g wavelet run --kubeconfig ...`): writes the kubeconfig's path into the file and waits
/// until the file is removed.
pub fn hold_for_profiling(which: &str, kubeconfig: &std::path::Path) {
    let Some(file) = std::env::var_os("WAVELET_BENCH_HOLD").filter(|v| !v.is_empty()) else {
        return;
    };
    let file = PathBuf::from(file);
    std::fs::write(&file, format!("{}\n", kubeconfig.display())).expect("writing the hold file");
    eprintln!(
        "footprint ({which}): holding the API server; kubeconfig path in {}; remove it to stop",
        file.display()
    );
    while file.exists() {
        std::thread::sleep(Duration::from_millis(500));
    }
}

pub fn binary() -> PathBuf {
    std::env::var_os("WAVELET_BENCH_BINARY")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_wavelet")))
}

/// Memory and CPU time of a process at one moment.
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    pub at: Instant,
    /// Resident memory now (VmRSS), KiB.
    pub rss_kib: u64,
    /// Peak resident memory so far (VmHWM), KiB.
    pub peak_kib: u64,
    /// User + system CPU seconds so far.
    pub cpu_seconds: f64,
}

impl Sample {
    pub fn of(pid: u32) -> Sample {
        let at = Instant::now();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        Sample {
            at,
            rss_kib: status_kib(&status, "VmRSS:"),
            peak_kib: status_kib(&status, "VmHWM:"),
            cpu_seconds: cpu_seconds(&stat).max(threads_cpu_seconds(pid)),
        }
    }
}

/// CPU time of the process's live threads from `/proc/PID/task/*/schedstat` (its first
/// field, nanoseconds on the CPU): finer than `stat`'s 10 ms ticks, which a small start
/// stays within; threads that have exited are only in `stat`, so [`Sample::of`] takes
/// the larger of the two.
fn threads_cpu_seconds(pid: u32) -> f64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0.0;
    };
    let nanos: u64 = tasks
        .filter_map(|t| t.ok())
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum();
    nanos as f64 / 1e9
}

/// A `kB` field of `/proc/PID/status`.
fn status_kib(status: &str, field: &str) -> u64 {
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
        .unwrap_or(0)
}

/// utime + stime of `/proc/PID/stat` (fields 14 and 15), in seconds.
fn cpu_seconds(stat: &str) -> f64 {
    // The command name (field 2) is in parentheses and may contain spaces.
    let after_name = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<u64>().ok());
    // Field 3 (state) is index 0 here, so fields 14 and 15 are indices 11 and 12.
    (ticks(11).unwrap_or(0) + ticks(12).unwrap_or(0)) as f64 / TICKS_PER_SECOND
}

/// What the log reader thread has seen.
#[derive(Default)]
struct Log {
    tail: VecDeque<String>,
    /// Taken by the reader thread the moment the sync line arrived.
    synced: Option<Sample>,
    /// The address of `/healthz`, `/readyz` and `/metrics`, from the log.
    http: Option<String>,
    closed: bool,
}

/// A running `wavelet run` against the fake; killed when dropped.
pub struct Wavelet {
    child: Child,
    pub started: Instant,
    log: Arc<(Mutex<Log>, Condvar)>,
}

/// The flags every run uses: the fake's URL, a free port for the HTTP endpoint, the given
/// debounce window, and throttles and a request budget too wide to ever apply (memory and
/// CPU are measured here; `polite.rs` measures the default budget).
fn run_args(server: &str, debounce: Duration) -> Vec<String> {
    let debounce = format!("{}ms", debounce.as_millis());
    [
        "run",
        "--server",
        server,
        "--listen-addr",
        "127.0.0.1:0",
        "--debounce",
        &debounce,
        "--min-rollout-interval",
        "0s",
        "--max-rollouts-per-second",
        "100000",
        "--rollout-burst",
        "100000",
        "--api-qps",
        "1000000",
        "--api-burst",
        "1000000",
    ]
    .map(String::from)
    .to_vec()
}

impl Wavelet {
    /// `wavelet run` against the cluster of `kubeconfig` (a real API server, over TLS).
    /// Against the fake over HTTPS (`FakeApi::start_tls`), as against a real API server: a
    /// kubeconfig trusting the fixture CA, written next to the system's temp files.
    pub fn start_tls(server: &str, debounce: Duration) -> Wavelet {
        Wavelet::start_with_kubeconfig(&tls_kubeconfig(server), debounce)
    }

    pub fn start_with_kubeconfig(kubeconfig: &std::path::Path, debounce: Duration) -> Wavelet {
        let mut args = run_args("-", debounce);
        let at = args.iter().position(|a| a == "--server").expect("--server");
        args[at] = "--kubeconfig".into();
        args[at + 1] = kubeconfig.display().to_string();
        Wavelet::start_with(args)
    }

    /// wavelet at its default flags, as SPEC §6 measures the floor: only where the API
    /// server is and a free port for its endpoints.
    pub fn start_at_defaults(kubeconfig: &std::path::Path) -> Wavelet {
        let kubeconfig = kubeconfig.display().to_string();
        Wavelet::start_with(
            [
                "run",
                "--kubeconfig",
                &kubeconfig,
                "--listen-addr",
                "127.0.0.1:0",
            ]
            .map(String::from)
            .to_vec(),
        )
    }

    /// As [`Wavelet::start_tls`], with `flags` (`--flag value` pairs or boolean `--flag`s)
    /// replacing the same flags of [`run_args`] or added to them.
    pub fn start_tls_with(server: &str, debounce: Duration, flags: &[String]) -> Wavelet {
        let mut args = run_args("-", debounce);
        let at = args.iter().position(|a| a == "--server").expect("--server");
        args[at] = "--kubeconfig".into();
        args[at + 1] = tls_kubeconfig(server).display().to_string();
        let mut i = 0;
        while i < flags.len() {
            let value = flags.get(i + 1).filter(|v| !v.starts_with("--"));
            match (args.iter().position(|a| *a == flags[i]), value) {
                (Some(at), Some(value)) => args[at + 1] = value.clone(),
                (None, Some(value)) => args.extend([flags[i].clone(), value.clone()]),
                (_, None) => args.push(flags[i].clone()),
            }
            i += if value.is_some() { 2 } else { 1 };
        }
        Wavelet::start_with(args)
    }

    /// `Threads:` of `/proc/PID/status`.
    pub fn threads(&self) -> usize {
        std::fs::read_to_string(format!("/proc/{}/status", self.pid()))
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix("Threads:"))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0)
    }

    /// Open sockets (`/proc/PID/fd` links to `socket:`): connections and the listener.
    pub fn sockets(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.pid()))
            .map(|dir| {
                dir.filter_map(Result::ok)
                    .filter(|e| {
                        std::fs::read_link(e.path())
                            .is_ok_and(|l| l.to_string_lossy().starts_with("socket:"))
                    })
                    .count()
            })
            .unwrap_or(0)
    }

    fn start_with(args: Vec<String>) -> Wavelet {
        let binary = binary();
        let started = Instant::now();
        let mut child = Command::new(&binary)
            .args(args)
            .env_clear()
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.display()));
        let log = Arc::new((Mutex::new(Log::default()), Condvar::new()));
        let stderr = child.stderr.take().expect("piped stderr");
        let pid = child.id();
        let reader = Arc::clone(&log);
        std::thread::spawn(move || read_log(stderr, pid, &reader));
        Wavelet {
            child,
            started,
            log,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn sample(&self) -> Sample {
        Sample::of(self.pid())
    }

    /// The sample taken when wavelet logged that its initial sync was complete.
    pub fn wait_for_sync(&self, timeout: Duration) -> Sample {
        let (lock, changed) = &*self.log;
        let deadline = Instant::now() + timeout;
        let mut log = lock.lock().unwrap();
        loop {
            if let Some(sample) = log.synced {
                return sample;
            }
            let now = Instant::now();
            if log.closed || now >= deadline {
                let tail: Vec<&str> = log.tail.iter().map(String::as_str).collect();
                panic!(
                    "wavelet did not log {SYNC_LINE:?} within {timeout:?}; its last lines:\n{}",
                    tail.join("\n")
                );
            }
            log = changed.wait_timeout(log, deadline - now).unwrap().0;
        }
    }

    /// The samples of `family` on `/metrics`, as (labels, value): `kind="config"`, 3.
    pub fn metric(&self, family: &str) -> Vec<(String, f64)> {
        use std::io::{Read, Write};
        let Some(address) = self.log.0.lock().unwrap().http.clone() else {
            panic!("wavelet did not log its {LISTENING}address");
        };
        let mut stream = std::net::TcpStream::connect(&address).expect("connecting to /metrics");
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        write!(stream, "GET /metrics HTTP/1.1\r\nHost: bench\r\n\r\n").unwrap();
        let mut response = String::new();
        stream
            .read_to_string(&mut response)
            .expect("reading /metrics");
        let prefix = format!("{family}{{");
        response
            .lines()
            .filter_map(|line| line.strip_prefix(&prefix))
            .filter_map(|rest| {
                let (labels, value) = rest.split_once("} ")?;
                Some((labels.to_string(), value.trim().parse().ok()?))
            })
            .collect()
    }

    /// The last log lines, for error messages.
    pub fn log_tail(&self) -> String {
        let log = self.log.0.lock().unwrap();
        log.tail.iter().cloned().collect::<Vec<_>>().join("\n")
    }
}

/// The reader thread: keeps the last lines and samples the process at the sync line.
fn read_log(stderr: ChildStderr, pid: u32, log: &(Mutex<Log>, Condvar)) {
    let (lock, changed) = log;
    for line in BufReader::new(stderr).lines().map_while(Result::ok) {
        let synced = line.contains(SYNC_LINE).then(|| Sample::of(pid));
        let mut log = lock.lock().unwrap();
        if log.synced.is_none() {
            log.synced = synced;
        }
        if log.http.is_none() {
            log.http = line
                .split_once(LISTENING)
                .and_then(|(_, rest)| rest.split_whitespace().next())
                .map(String::from);
        }
        log.tail.push_back(line);
        if log.tail.len() > LOG_TAIL {
            log.tail.pop_front();
        }
        changed.notify_all();
    }
    lock.lock().unwrap().closed = true;
    changed.notify_all();
}

impl Drop for Wavelet {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The size of the binary and whether it is what ships: statically linked, stripped.
#[derive(Clone, Debug)]
pub struct BinaryFacts {
    pub path: PathBuf,
    pub bytes: u64,
    pub is_static: bool,
    pub is_stripped: bool,
}

impl BinaryFacts {
    pub fn of(path: PathBuf) -> BinaryFacts {
        let elf =
            std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        BinaryFacts {
            bytes: elf.len() as u64,
            is_static: !elf_has_program_header(&elf, PT_INTERP),
            is_stripped: !elf_has_section(&elf, SHT_SYMTAB),
            path,
        }
    }
}

/// A program header naming the dynamic loader: the binary is dynamically linked.
const PT_INTERP: u32 = 3;
/// A section with the symbol table: the binary is not stripped.
const SHT_SYMTAB: u32 = 2;

fn read_u16(elf: &[u8], at: usize) -> usize {
    elf.get(at..at + 2)
        .map_or(0, |b| u16::from_le_bytes([b[0], b[1]]) as usize)
}

fn read_u32(elf: &[u8], at: usize) -> u32 {
    elf.get(at..at + 4)
        .map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

fn read_u64(elf: &[u8], at: usize) -> usize {
    elf.get(at..at + 8).map_or(0, |b| {
        u64::from_le_bytes(b.try_into().expect("8 bytes")) as usize
    })
}

/// Whether a 64-bit little-endian ELF file has a program header of this type.
fn elf_has_program_header(elf: &[u8], kind: u32) -> bool {
    let (offset, size, count) = (
        read_u64(elf, 0x20),
        read_u16(elf, 0x36),
        read_u16(elf, 0x38),
    );
    (0..count).any(|i| read_u32(elf, offset + i * size) == kind)
}

/// Whether a 64-bit little-endian ELF file has a section of this type.
fn elf_has_section(elf: &[u8], kind: u32) -> bool {
    let (offset, size, count) = (
        read_u64(elf, 0x28),
        read_u16(elf, 0x3a),
        read_u16(elf, 0x3c),
    );
    (0..count).any(|i| read_u32(elf, offset + i * size + 4) == kind)
}
