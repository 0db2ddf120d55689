//! The footprint benchmark of SPEC §6: the release `wavelet` binary against the fake API
//! server holding 1,000 opted-in Deployments, 2,000 ConfigMaps and 5,000 Secrets of
//! ~4 KiB. Prints resident memory after the initial sync (and its peak), CPU for the sync,
//! ConfigMap change → PATCH latency beyond the debounce window, API calls per change, and
//! the binary size.
//!
//! Run: `cargo bench --bench footprint` (set `WAVELET_BENCH_SCALE=2` for twice the objects).

#[path = "../tests/fake/mod.rs"]
#[allow(dead_code, unused_imports, clippy::all)]
mod fake;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;

use fake::FakeApi;

const NAMESPACES: usize = 10;
const DEBOUNCE_MS: u64 = 200;
const SAMPLES: usize = 25;

struct Scale {
    deployments: usize,
    configmaps_per_deployment: usize,
    secrets_per_deployment: usize,
}

fn value_of_size(seed: usize, size: usize) -> String {
    let mut s = format!("{seed:08}-");
    while s.len() < size {
        s.push_str("abcdefghijklmnopqrstuvwxyz0123456789");
    }
    s.truncate(size);
    s
}

fn populate(fake: &FakeApi, scale: &Scale) {
    for i in 0..scale.deployments {
        let ns = format!("bench-{}", i % NAMESPACES);
        let mut volumes = Vec::new();
        let mut env_from = Vec::new();
        for c in 0..scale.configmaps_per_deployment {
            let name = format!("cm-{i}-{c}");
            fake.apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns},
                "data": {"app.properties": value_of_size(i * 10 + c, 4096)}}));
            volumes.push(json!({"name": format!("cm{c}"), "configMap": {"name": name}}));
        }
        for s in 0..scale.secrets_per_deployment {
            let name = format!("secret-{i}-{s}");
            // ~4 KiB on the wire: 3 KiB of bytes is 4 KiB of base64.
            let value = wavelet::base64::encode(value_of_size(i * 10 + s, 3072).as_bytes());
            fake.apply(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": ns},
                "type": "Opaque", "data": {"credentials": value}}));
            if s == 0 {
                env_from.push(json!({"secretRef": {"name": name}}));
            } else {
                volumes.push(json!({"name": format!("s{s}"), "secret": {"secretName": name}}));
            }
        }
        fake.apply(json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": format!("app-{i}"), "namespace": ns,
                         "annotations": {"wavelet.dev/update-on-config-change": "true"}},
            "spec": {"replicas": 0, "selector": {"matchLabels": {"app": format!("app-{i}")}},
                "template": {"metadata": {"labels": {"app": format!("app-{i}")}},
                    "spec": {"volumes": volumes, "containers": [{"name": "app", "image": "nginx", "envFrom": env_from}]}}}
        }));
    }
}

/// (VmRSS, VmHWM) in KiB.
fn memory_kib(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// User + system CPU seconds of a process.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after_name = stat.rsplit(')').next().unwrap_or_default();
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    // Fields 14 and 15 of /proc/PID/stat (1-based), after the name: indices 11 and 12.
    let ticks: u64 = fields.get(11).and_then(|v| v.parse().ok()).unwrap_or(0)
        + fields.get(12).and_then(|v| v.parse().ok()).unwrap_or(0);
    ticks as f64 / 100.0
}

/// The binary under test: `WAVELET_BENCH_BINARY` (e.g. the static musl build), else the
/// release build cargo made for this benchmark.
fn binary() -> String {
    std::env::var("WAVELET_BENCH_BINARY")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_wavelet").to_string())
}

fn start_wavelet(fake: &FakeApi) -> (Child, Arc<Mutex<String>>) {
    let mut child = Command::new(binary())
        .args([
            "run",
            "--server",
            &fake.url(),
            "--listen-addr",
            "127.0.0.1:0",
        ])
        .args([
            "--debounce",
            &format!("{DEBOUNCE_MS}ms"),
            "--min-rollout-interval",
            "0s",
        ])
        .args([
            "--max-rollouts-per-second",
            "1000",
            "--rollout-burst",
            "1000",
        ])
        .env_clear()
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start wavelet");
    let output = Arc::new(Mutex::new(String::new()));
    let stderr = child.stderr.take().unwrap();
    let sink = Arc::clone(&output);
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let mut out = sink.lock().unwrap();
            out.push_str(&line);
            out.push('\n');
        }
    });
    (child, output)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn run(scale_factor: usize) {
    let scale = Scale {
        deployments: 1000 * scale_factor,
        configmaps_per_deployment: 2,
        secrets_per_deployment: 5,
    };
    let fake = FakeApi::start();
    let t = Instant::now();
    populate(&fake, &scale);
    let objects =
        scale.deployments * (1 + scale.configmaps_per_deployment + scale.secrets_per_deployment);
    eprintln!(
        "populated the fake with {objects} objects in {:?}",
        t.elapsed()
    );

    let started = Instant::now();
    let (mut child, output) = start_wavelet(&fake);
    let pid = child.id();
    let mut peak_rss_during_sync = 0;
    while !output.lock().unwrap().contains("initial sync complete") {
        peak_rss_during_sync = peak_rss_during_sync.max(memory_kib(pid).0);
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "no sync:\n{}",
            output.lock().unwrap()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let sync_wall = started.elapsed();
    let sync_cpu = cpu_seconds(pid);
    let (rss_at_sync, hwm_at_sync) = memory_kib(pid);

    // Adoption: one metadata PATCH per workload.
    let adopt_start = Instant::now();
    while fake
        .requests()
        .iter()
        .filter(|r| r.method == "PATCH")
        .count()
        < scale.deployments
    {
        assert!(
            adopt_start.elapsed() < Duration::from_secs(120),
            "adoption did not finish"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let adopted_in = adopt_start.elapsed();
    std::thread::sleep(Duration::from_millis(500));
    let (rss_steady, hwm_steady) = memory_kib(pid);

    // Change → PATCH latency and API calls per change.
    let mut latencies = Vec::new();
    let mut calls_per_change = Vec::new();
    for k in 0..SAMPLES {
        let i = k * 7 % scale.deployments;
        let ns = format!("bench-{}", i % NAMESPACES);
        let before = fake.request_count();
        let changed_at = Instant::now();
        fake.merge_patch(
            "configmaps",
            &ns,
            &format!("cm-{i}-0"),
            json!({"data": {"app.properties": format!("changed {k}")}}),
        );
        let deadline = Instant::now() + Duration::from_secs(10);
        let patch = loop {
            let new = fake.requests_since(before);
            if let Some(p) = new
                .iter()
                .find(|r| r.method == "PATCH" && r.path.ends_with(&format!("/deployments/app-{i}")))
            {
                break p.clone();
            }
            assert!(Instant::now() < deadline, "no PATCH for change {k}");
            std::thread::yield_now();
        };
        let latency =
            patch.received.duration_since(changed_at).as_secs_f64() * 1000.0 - DEBOUNCE_MS as f64;
        latencies.push(latency);
        // Let the Event arrive, then count what this change cost.
        std::thread::sleep(Duration::from_millis(150));
        let calls: Vec<String> = fake
            .requests_since(before)
            .iter()
            .map(|r| format!("{} {}", r.method, r.resource()))
            .collect();
        calls_per_change.push(calls);
    }
    let typical = calls_per_change
        .iter()
        .max_by_key(|c| c.len())
        .cloned()
        .unwrap_or_default();
    let lists = calls_per_change
        .iter()
        .flatten()
        .filter(|c| c.starts_with("GET"))
        .count();

    let binary_size = std::fs::metadata(binary()).map(|m| m.len()).unwrap_or(0);
    let _ = child.kill();
    let _ = child.wait();

    println!("scale x{scale_factor}: {} Deployments, {} ConfigMaps, {} Secrets (~4 KiB each), {NAMESPACES} namespaces",
        scale.deployments, scale.deployments * scale.configmaps_per_deployment, scale.deployments * scale.secrets_per_deployment);
    println!(
        "  initial sync:            {:.0} ms wall, {:.2} s CPU",
        sync_wall.as_secs_f64() * 1000.0,
        sync_cpu
    );
    println!(
        "  RSS at sync complete:    {:.1} MiB (peak so far {:.1} MiB; sampled peak {:.1} MiB)",
        rss_at_sync as f64 / 1024.0,
        hwm_at_sync as f64 / 1024.0,
        peak_rss_during_sync as f64 / 1024.0
    );
    println!(
        "  adoption of all:         {:.0} ms ({} PATCHes)",
        adopted_in.as_secs_f64() * 1000.0,
        scale.deployments
    );
    println!(
        "  RSS after adoption:      {:.1} MiB (peak {:.1} MiB)",
        rss_steady as f64 / 1024.0,
        hwm_steady as f64 / 1024.0
    );
    println!("  change → PATCH beyond {DEBOUNCE_MS} ms debounce: median {:.2} ms, max {:.2} ms ({SAMPLES} changes)",
        median(latencies.clone()), latencies.iter().cloned().fold(f64::MIN, f64::max));
    println!(
        "  API calls per change:    {} ({}); GETs over all changes: {lists}",
        typical.len(),
        typical.join(", ")
    );
    println!(
        "  binary ({}): {:.2} MiB",
        binary(),
        binary_size as f64 / (1024.0 * 1024.0)
    );
    let per_object = rss_steady as f64 * 1024.0 / objects as f64;
    println!("  RSS / object:            {per_object:.0} bytes (all-in, including the runtime)");
}

fn main() {
    let scale: usize = std::env::var("WAVELET_BENCH_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    // `cargo bench` passes --bench; ignore arguments.
    run(scale);
}
