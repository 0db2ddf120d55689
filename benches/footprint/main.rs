//! The footprint benchmark (SPEC §6, issue 6): the `wavelet` binary, run as a separate
//! process against the fake API server on 127.0.0.1, measured from outside.
//!
//! Default scenario: 1,000 opted-in Deployments (two ConfigMaps and one Secret each),
//! 2,000 ConfigMaps and 5,000 Secrets of ~4 KiB, and 500 Helm-release Secrets of 256 KiB
//! that nothing references. It prints, beside the targets:
//! - resident memory (`VmRSS`) when wavelet logs `initial sync complete`, its peak
//!   (`VmHWM`), and the CPU seconds (`utime + stime`) spent until then, from `/proc/PID/`;
//!   memory again once every workload is adopted and wavelet is idle;
//! - ConfigMap change → PATCH latency (median, p90, p99, max) beyond the debounce window,
//!   over changes to 200 distinct Deployments, and the same for 50 Secret changes;
//! - the API requests wavelet sent for the initial sync and per change, by verb and
//!   resource, as the fake server recorded them;
//! - the size of the binary, and whether it is static and stripped.
//!
//! Then a scaling table: 1k, 10k and 100k ConfigMaps+Secrets of 1 KiB and of 64 KiB, with
//! one Deployment per 10 objects: memory per tracked object above an empty cluster, and
//! per additional object from one count to the next (it should not depend on the size).
//! And a churn step: against the 10k, 1 KiB cluster, ten rounds of 1,000 namespaces
//! created and deleted (50 at a time), each with an opted-in Deployment and the Secret it
//! references: resident memory after each round against the steady value before.
//!
//! Then (issue 27) how long adopting 10,000 workloads takes under the default client-side
//! budget, and the threads, connections, watches and memory of `--namespaces` with 10 and
//! 500 namespaces, and `--per-namespace-watches` with 10 and 100 (`polite.rs`).
//!
//! Then a shared change (`fanout.rs`): one ConfigMap that 50 Deployments mount, changed 30
//! times, rolled in waves: change → the first wave's PATCH beyond the debounce, and → the
//! whole fan-out's last PATCH.
//!
//! Then the Secrets Store CSI driver (`csi.rs`): the same cluster with a
//! SecretProviderClass per Deployment, and 0, 2,000 and 20,000 pod statuses: memory per
//! pod status (target under 200 bytes).
//!
//! Run: `cargo bench --bench footprint` (a few minutes on 2 cores, plus about nine for the
//! adoption under the default budget). To measure the static
//! binary that ships, build it and point `WAVELET_BENCH_BINARY` at it:
//! `CC_x86_64_unknown_linux_musl=musl-gcc cargo build --release --target x86_64-unknown-linux-musl --bin wavelet`.
//!
//! Environment: `WAVELET_BENCH_ONLY=default|scaling|churn|floor|polite|csi|fanout` (`floor`: wavelet
//! idle against an empty cluster and what its memory is made of, on a fresh real control
//! plane instead with `WAVELET_BENCH_REAL`; `churn`: only the churn
//! step of the scaling run), `WAVELET_BENCH_SCALE` (object counts ×, default 1),
//! `WAVELET_BENCH_CHURN_NAMESPACES` (per round, default 1000), `WAVELET_BENCH_CHURN_ROUNDS`
//! (default 10), `WAVELET_BENCH_CHANGES` (ConfigMap changes, default 200),
//! `WAVELET_BENCH_SECRET_CHANGES` (default 50), `WAVELET_BENCH_DEBOUNCE_MS` (default 200),
//! `WAVELET_BENCH_MAX_DATA_MIB` (scaling cells holding more data are skipped, default 1024),
//! `WAVELET_BENCH_CSI_RUNS` (runs of each CSI configuration, default 3),
//! `WAVELET_BENCH_FANOUT_WORKLOADS` (default 50), `WAVELET_BENCH_FANOUT_CHANGES` (default 30).
//! `WAVELET_BENCH_HOLD=<file>` keeps the API server (the fake of the default scenario and of
//! each scaling cell, or the real control plane) up after its run for profiling: the file
//! names its kubeconfig; removing the file goes on.
//! Benchmarks are not tests: nothing here fails on a figure.
//!
//! Against a real control plane: `WAVELET_BENCH_REAL=target/k8s-bin` (the binaries the
//! end-to-end suite uses) or `WAVELET_BENCH_KUBECONFIG=<kubeconfig>` runs the default
//! scenario there first (`real.rs`), over TLS with a kubeconfig; with
//! `WAVELET_BENCH_ONLY` set, only that.
//!
//! `WAVELET_BENCH_ONLY=churn` with `WAVELET_BENCH_REAL`: the churn case of issue 34 item 5
//! on a real API server instead of the fake's churn step (`versus/churn.rs`).
//!
//! `WAVELET_BENCH_ONLY=versus` (with `WAVELET_BENCH_REAL`): wavelet, Stakater Reloader and
//! Wave side by side on Reloader's own load-test scenarios and the start-up cluster
//! (`versus/mod.rs` says how).

#[path = "../../tests/fake/mod.rs"]
#[allow(dead_code, unused_imports, clippy::all)]
mod fake;

#[path = "../../tests/e2e/cluster.rs"]
mod cluster;

#[path = "../../tests/e2e/kubelet.rs"]
#[allow(dead_code)]
mod kubelet;

#[path = "../../tests/e2e/loadtest/mod.rs"]
mod loadtest;

mod anatomy;
mod calls;
mod csi;
mod fanout;
mod measure;
mod polite;
mod process;
mod real;
mod report;
mod scaling;
mod scenario;
mod table;
mod versus;

use std::time::Duration;

use measure::{cache_objects, changes, churn, spread, start_and_sync, Edited};
use process::BinaryFacts;
use report::DefaultFigures;
use scaling::{Cell, CellOutcome, ChurnFigures, ScalingFigures};
use scenario::Cluster;

/// The scaling table's object counts and sizes.
const SCALING_COUNTS: [usize; 3] = [1_000, 10_000, 100_000];
const SCALING_SIZES: [usize; 2] = [1024, 64 * 1024];
/// The churn step's steady cluster: ConfigMaps+Secrets, and their size.
const CHURN_CLUSTER: (usize, usize) = (10_000, 1024);
/// Namespaces alive at once during the churn.
const CHURN_LIVE: usize = 50;

/// The benchmark's settings, from the environment.
struct Options {
    only: Option<String>,
    scale: f64,
    configmap_changes: usize,
    secret_changes: usize,
    debounce: Duration,
    max_data_mib: usize,
    churn_namespaces: usize,
    churn_rounds: usize,
    csi_runs: usize,
    fanout_workloads: usize,
    fanout_changes: usize,
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    match std::env::var(name) {
        Ok(text) => text
            .parse()
            .unwrap_or_else(|_| panic!("{name}={text:?} is not a valid value")),
        Err(_) => default,
    }
}

impl Options {
    fn from_env() -> Options {
        let only = std::env::var("WAVELET_BENCH_ONLY").ok();
        if let Some(part) = only.as_deref().filter(|p| {
            ![
                "default", "scaling", "churn", "floor", "polite", "csi", "fanout", "versus",
            ]
            .contains(p)
        }) {
            panic!(
                "WAVELET_BENCH_ONLY={part:?}: use default, scaling, churn, floor, polite, csi, fanout or versus"
            );
        }
        Options {
            only,
            scale: env_or("WAVELET_BENCH_SCALE", 1.0),
            configmap_changes: env_or("WAVELET_BENCH_CHANGES", 200),
            secret_changes: env_or("WAVELET_BENCH_SECRET_CHANGES", 50),
            debounce: Duration::from_millis(env_or("WAVELET_BENCH_DEBOUNCE_MS", 200)),
            max_data_mib: env_or("WAVELET_BENCH_MAX_DATA_MIB", 1024),
            churn_namespaces: env_or("WAVELET_BENCH_CHURN_NAMESPACES", 1000),
            churn_rounds: env_or("WAVELET_BENCH_CHURN_ROUNDS", 10),
            csi_runs: env_or("WAVELET_BENCH_CSI_RUNS", 3),
            fanout_workloads: env_or("WAVELET_BENCH_FANOUT_WORKLOADS", 50),
            fanout_changes: env_or("WAVELET_BENCH_FANOUT_CHANGES", 30),
        }
    }

    fn runs(&self, part: &str) -> bool {
        self.only.as_deref().is_none_or(|only| only == part)
    }

    /// The churn step is part of the scaling run, and can run alone.
    fn runs_churn(&self) -> bool {
        self.runs("scaling") || self.runs("churn")
    }
}

/// The SPEC §6 cluster: sync, adoption, then ConfigMap and Secret changes.
fn run_default(options: &Options) -> DefaultFigures {
    let cluster = Cluster::spec(options.scale);
    progress(&format!("default scenario: {cluster:?}"));
    let run = start_and_sync(&cluster, options.debounce);
    progress(&format!(
        "loaded in {:?}, synced in {:?}, adopted {} workloads",
        run.load, run.sync.wall, run.adoption.adoptions
    ));
    let total = options.configmap_changes + options.secret_changes;
    let targets = spread(cluster.deployments, total);
    let (configmap_targets, secret_targets) = targets.split_at(options.configmap_changes);
    let change = |edited, targets: &[usize]| {
        progress(&format!("{} {edited:?} changes", targets.len()));
        changes(
            &run.fake,
            &run.wavelet,
            &cluster,
            edited,
            targets,
            options.debounce,
        )
    };
    let configmap_changes = change(Edited::ConfigMap, configmap_targets);
    let secret_changes = change(Edited::Secret, secret_targets);
    // The benchmark's wavelet stops first: a profiled one then starts on its own.
    drop(run.wavelet);
    process::hold_for_profiling("fake", &process::tls_kubeconfig(&run.fake.url()));
    DefaultFigures {
        load: run.load,
        sync: run.sync,
        adoption: run.adoption,
        configmap_changes,
        secret_changes,
        debounce: options.debounce,
        cluster,
    }
}

/// The baseline against an empty cluster, then every (count, size) cell.
fn run_scaling(options: &Options) -> ScalingFigures {
    progress("scaling: empty cluster");
    let baseline = start_and_sync(&Cluster::empty(), options.debounce)
        .adoption
        .settled;
    let mut cells = Vec::new();
    for size in SCALING_SIZES {
        for count in SCALING_COUNTS {
            let objects = ((count as f64 * options.scale).round() as usize).max(10);
            cells.push(scaling_cell(options, objects, size));
        }
    }
    ScalingFigures { baseline, cells }
}

/// The floor: wavelet idle against an empty cluster (over TLS, as in the scaling table's
/// baseline) at its default flags, as SPEC §6 measures it, and what its resident memory
/// is made of.
fn run_floor() {
    progress("floor: empty cluster, wavelet at its default flags");
    let fake = fake::FakeApi::start_tls();
    Cluster::empty().load(&fake);
    let wavelet = process::Wavelet::start_at_defaults(&process::tls_kubeconfig(&fake.url()));
    print_floor(&wavelet, "an empty cluster");
}

/// The floor on a real control plane (`WAVELET_BENCH_ONLY=floor` with
/// `WAVELET_BENCH_REAL`): nothing opted in, only what a fresh cluster holds (a namespace's
/// `kube-root-ca.crt`), and wavelet at its default flags as against the fake. The paths
/// differ: a real API server serves the first lists as streams (`sendInitialEvents`).
fn run_floor_real(source: &cluster::Source) {
    progress("floor: a fresh real control plane, wavelet at its default flags");
    let plane = cluster::Cluster::start(source).expect("starting the control plane");
    let wavelet = process::Wavelet::start_at_defaults(&plane.kubeconfig);
    print_floor(&wavelet, "a fresh real kube-apiserver");
}

/// Settled (initial sync done, nothing to adopt, a few more seconds of idle): the floor's
/// RSS and what it is made of.
fn print_floor(wavelet: &process::Wavelet, against: &str) {
    wavelet.wait_for_sync(Duration::from_secs(60));
    std::thread::sleep(Duration::from_secs(5));
    let sample = process::Sample::of(wavelet.pid());
    println!(
        "\n## The floor: {against}, idle, default flags\n\nVmRSS {} KiB, VmHWM {} KiB",
        sample.rss_kib, sample.peak_kib
    );
    anatomy::print(wavelet.pid(), "What it is made of");
}

fn scaling_cell(options: &Options, objects: usize, size: usize) -> Cell {
    let cluster = Cluster::scaling(objects, size);
    let data_mib = cluster.config_bytes() / (1024 * 1024);
    let outcome = if data_mib > options.max_data_mib {
        CellOutcome::Skipped(format!(
            "{data_mib} MiB of data is more than WAVELET_BENCH_MAX_DATA_MIB={}: \
             the fake API server would hold all of it in memory",
            options.max_data_mib
        ))
    } else {
        progress(&format!("scaling: {objects} objects of {size} bytes"));
        let run = start_and_sync(&cluster, options.debounce);
        progress(&format!(
            "loaded in {:?}, synced in {:?} (wavelet {:.2} s CPU, fake {:.2} s CPU)",
            run.load, run.sync.wall, run.sync.at_end.cpu_seconds, run.sync.fake_cpu_seconds
        ));
        drop(run.wavelet);
        process::hold_for_profiling("fake", &process::tls_kubeconfig(&run.fake.url()));
        CellOutcome::Measured {
            sync: run.sync,
            adoption: run.adoption,
        }
    };
    Cell { cluster, outcome }
}

/// The churn step: the steady cluster, then rounds of namespaces created and deleted.
fn run_churn(options: &Options) -> ChurnFigures {
    let (objects, size) = CHURN_CLUSTER;
    let objects = ((objects as f64 * options.scale).round() as usize).max(10);
    let cluster = Cluster::scaling(objects, size);
    progress(&format!(
        "churn: steady cluster of {objects} objects of {size} bytes"
    ));
    let run = start_and_sync(&cluster, options.debounce);
    let steady_cache = cache_objects(&run.wavelet);
    let rounds = (1..=options.churn_rounds)
        .map(|round| {
            progress(&format!(
                "churn: round {round}, {} namespaces, {CHURN_LIVE} at a time",
                options.churn_namespaces
            ));
            let measured = churn(
                &run.fake,
                &run.wavelet,
                round,
                options.churn_namespaces,
                CHURN_LIVE,
                size,
                &steady_cache,
            );
            progress(&format!(
                "churn: round {round} in {:?}, RSS {} KiB",
                measured.wall, measured.settled.rss_kib
            ));
            measured
        })
        .collect();
    ChurnFigures {
        cluster,
        steady: run.adoption.settled,
        steady_cache,
        rounds,
    }
}

pub fn progress(message: &str) {
    eprintln!("footprint: {message}");
}

fn main() {
    // `cargo bench` passes `--bench`; there are no arguments to read.
    let options = Options::from_env();
    let binary = BinaryFacts::of(process::binary());
    if options.only.as_deref() == Some("versus") {
        match real::source() {
            Some(cluster::Source::Binaries(dir)) => versus::run(dir),
            _ => panic!(
                "WAVELET_BENCH_ONLY=versus needs WAVELET_BENCH_REAL=<dir of etcd, kube-apiserver, kube-controller-manager, kubectl>: it starts its own control plane with an audit log"
            ),
        }
        return;
    }
    if options.only.as_deref() == Some("floor") {
        if let Some(source) = real::source() {
            run_floor_real(&source);
            return;
        }
    }
    if options.only.as_deref() == Some("churn") {
        if let Some(cluster::Source::Binaries(dir)) = real::source() {
            versus::churn(dir);
            return;
        }
    }
    if let Some(source) = real::source() {
        let cluster = Cluster::spec(options.scale);
        let figures = real::run(
            &source,
            &cluster,
            options.debounce,
            options.configmap_changes.min(50),
        );
        real::print(&figures, &cluster);
        if options.only.is_some() {
            return;
        }
    }
    if options.runs("default") {
        report::print_default(&run_default(&options), &binary);
    }
    if options.runs("scaling") {
        scaling::print(&run_scaling(&options));
    }
    if options.runs("floor") {
        run_floor();
    }
    if options.runs_churn() {
        scaling::print_churn(&run_churn(&options));
    }
    if options.runs("polite") {
        let workloads = ((10_000.0 * options.scale).round() as usize).max(10);
        polite::print(&polite::run(workloads, options.scale, options.debounce));
    }
    if options.runs("fanout") {
        fanout::print(&fanout::run(
            options.fanout_workloads,
            options.fanout_changes,
            options.debounce,
        ));
    }
    if options.runs("csi") {
        csi::print(&csi::run(
            options.scale,
            options.debounce,
            options.csi_runs,
            progress,
        ));
    }
}
