//! wavelet, Stakater Reloader and Wave side by side on a real API server (issue 23):
//! the same data, each controller in fresh namespaces, one after the other in one run.
//!
//! - `loadtests`: Reloader's 13 load-test scenarios (`tests/e2e/loadtest`), at Reloader's
//!   sizes and at 10×, and the floor (the benchmark itself as the fastest controller);
//! - `startup`: the start-up cluster at 1×, 3× and 10×, and the steady state at 1×;
//! - `controllers`: starting each as its own user, sampling it, "ready";
//! - `plane`: the control plane with an audit log that counts each one's requests;
//! - `report`: the tables, the ratios and the targets.
//!
//! Run: `WAVELET_BENCH_REAL=<dir of etcd, kube-apiserver, kube-controller-manager,
//! kubectl> WAVELET_BENCH_PEERS=<dir of reloader, wave> WAVELET_BENCH_ONLY=versus cargo
//! bench --bench footprint`. Parts and sizes: `WAVELET_BENCH_VERSUS=scenarios,startup`
//! (default both), `WAVELET_BENCH_CONTROLLERS=wavelet,reloader,wave`,
//! `WAVELET_BENCH_SCENARIOS=S1,S4,...` (default all 13), `WAVELET_BENCH_SIZES=1,10`,
//! `WAVELET_BENCH_DURATION=60` (Reloader's `--duration`, seconds),
//! `WAVELET_BENCH_MIN_CHANGES=30` (a scenario whose updates are sparse runs until it made
//! this many, so that its p95 is not its maximum: S2 and S9 for 150 s, S5, S8, S12 and S13
//! for 60 s; 0: Reloader's timing only),
//! `WAVELET_BENCH_FLOOR=1`, `WAVELET_BENCH_STARTUP_SCALES=1,3,10`,
//! `WAVELET_BENCH_IDLE_SECONDS=660` (0: no steady state), `WAVELET_BENCH_RESYNC` (wavelet's
//! `--resync` in the start-up part, e.g. `1m` to see relists in a short window),
//! `WAVELET_BENCH_WAVELET_ARGS` (more flags for wavelet, e.g. `--fan-out at-once`).

pub mod churn;
mod controllers;
mod floor;
mod loadtests;
mod plane;
mod report;
mod startup;

use std::path::PathBuf;
use std::time::Duration;

use crate::loadtest::{Id, Timing};

use controllers::Which;

fn list<T>(name: &str, default: &str, parse: impl Fn(&str) -> Option<T>) -> Vec<T> {
    let text = std::env::var(name).unwrap_or_else(|_| default.to_string());
    text.split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| parse(s).unwrap_or_else(|| panic!("{name}: cannot read {s:?}")))
        .collect()
}

pub(super) fn number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name}={v:?} is not a number"))
        })
        .unwrap_or(default)
}

/// The machine, for the tables: cores, memory, load.
fn machine() -> String {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let memory = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or("?".into(), |kib| {
            format!("{:.0} GiB", kib / 1024.0 / 1024.0)
        });
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load: Vec<&str> = load.split_whitespace().take(3).collect();
    format!("{cores} cores, {memory}, load average {}", load.join(" "))
}

pub fn run(bin: PathBuf) {
    let parts = list("WAVELET_BENCH_VERSUS", "scenarios,startup", |s| {
        Some(s.trim().to_string())
    });
    let controllers = list(
        "WAVELET_BENCH_CONTROLLERS",
        "wavelet,reloader,wave",
        Which::parse,
    );
    let ids = list(
        "WAVELET_BENCH_SCENARIOS",
        "S1,S2,S3,S4,S5,S6,S7,S8,S9,S10,S11,S12,S13",
        Id::parse,
    );
    let sizes = list("WAVELET_BENCH_SIZES", "1,10", |s| s.trim().parse().ok());
    let scales = list("WAVELET_BENCH_STARTUP_SCALES", "1,3,10", |s| {
        s.trim().parse().ok()
    });
    let timing = Timing {
        min_changes: number("WAVELET_BENCH_MIN_CHANGES", 30) as usize,
        ..Timing::reloader(Duration::from_secs(number("WAVELET_BENCH_DURATION", 60)))
    };
    let floor = number("WAVELET_BENCH_FLOOR", 1) == 1;
    let idle = Some(number("WAVELET_BENCH_IDLE_SECONDS", 660)).filter(|s| *s > 0);

    let plane = plane::Plane::start(bin);
    let kubelet = crate::kubelet::Kubelet::start_watching(plane.admin.clone(), "lt-");
    println!("\n## wavelet, Reloader and Wave on a real kube-apiserver (issue 23)\n");
    println!("machine at the start: {}", machine());
    println!("binary: {}", crate::process::binary().display());
    for w in &controllers {
        println!("- {}", w.how());
    }
    println!(
        "- every controller as its own user of a kube-apiserver with etcd and kube-controller-manager; its requests counted by the API server's audit log; RSS and CPU from /proc every 100 ms; ready = its own signal, then 1 s of idle CPU (wavelet at start: /readyz answering 200; its adoptions, which go on after, are reported apart)"
    );
    if parts.iter().any(|p| p == "scenarios") {
        println!(
            "- Reloader's load-test scenarios with --duration {} s (updates for {} s, or until {} updates where they are sparser: each scenario's title says how long; S6 restarts after 20 s, down for 1 s; the updates pause while a controller stops and while it starts again); the kubelet is played by the benchmark",
            timing.duration.as_secs(),
            timing.window(Id::S1).as_secs(),
            timing.min_changes
        );
        let all = loadtests::run(
            &plane,
            &ids,
            &sizes,
            &controllers,
            floor,
            &timing,
            report::print_scenario,
        );
        report::print_verdicts(&all);
    }
    if parts.iter().any(|p| p == "startup") {
        let figures = startup::run(&plane, &scales, &controllers, idle);
        report::print_startup(&figures);
    }
    println!("machine at the end: {}", machine());
    drop(kubelet);
    crate::process::hold_for_profiling("real", &plane.cluster.kubeconfig);
}

/// The churn case of issue 34 item 5 (`WAVELET_BENCH_ONLY=churn` with `WAVELET_BENCH_REAL`):
/// its own control plane with an audit log, wavelet alone (`churn.rs`).
pub fn churn(bin: PathBuf) {
    let plane = plane::Plane::start(bin);
    println!("machine at the start: {}", machine());
    println!("binary: {}", crate::process::binary().display());
    println!("- {}", Which::Wavelet.how());
    let figures = churn::run(&plane);
    churn::print(&figures);
    println!("machine at the end: {}", machine());
    crate::process::hold_for_profiling("real", &plane.cluster.kubeconfig);
}
