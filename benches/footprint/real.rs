//! The default scenario against a real control plane (`WAVELET_BENCH_REAL=<dir of
//! etcd, kube-apiserver, kube-controller-manager>`, as the end-to-end suite starts it, or
//! `WAVELET_BENCH_KUBECONFIG=<a cluster of yours>`): wavelet over TLS with a kubeconfig,
//! measured from outside as against the fake: RSS and CPU at the initial sync, after
//! every Deployment is adopted, and on a restart with nothing to adopt; and ConfigMap
//! change → PATCH latency beside the API server's own write-to-watch floor.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use wavelet::client::{Client, PatchType, Shape};

use crate::cluster::{Cluster as ControlPlane, Source};
use crate::process::{Sample, Wavelet};
use crate::scenario::Cluster;

/// What one run against the real server measured.
pub struct RealFigures {
    pub load: Duration,
    pub sync: Sample,
    pub adopted: Sample,
    pub adopted_after: Duration,
    pub restart_sync: Sample,
    pub change_to_patch: Vec<Duration>,
    pub floor: Vec<Duration>,
}

/// The source from the environment, if the real benchmark was asked for.
pub fn source() -> Option<Source> {
    if let Some(dir) = std::env::var_os("WAVELET_BENCH_REAL").filter(|v| !v.is_empty()) {
        return Some(Source::Binaries(dir.into()));
    }
    std::env::var_os("WAVELET_BENCH_KUBECONFIG")
        .filter(|v| !v.is_empty())
        .map(|k| Source::Kubeconfig(k.into()))
}

fn path_of(object: &Value) -> String {
    let ns = object["metadata"]["namespace"].as_str().unwrap();
    let plural = match object["kind"].as_str().unwrap() {
        "ConfigMap" => "configmaps",
        "Secret" => "secrets",
        "Deployment" => return format!("/apis/apps/v1/namespaces/{ns}/deployments"),
        other => panic!("no path for {other}"),
    };
    format!("/api/v1/namespaces/{ns}/{plural}")
}

/// Creates the namespaces and objects with a few threads of POSTs.
fn load(client: &Client, cluster: &Cluster) -> Duration {
    let started = Instant::now();
    for ns in cluster.namespace_names() {
        let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
        match client.post::<serde::de::IgnoredAny>("/api/v1/namespaces", &body) {
            Ok(_) => {}
            Err(e) if e.status().is_some_and(|s| s.is_conflict()) => {}
            Err(e) => panic!("creating namespace {ns}: {e}"),
        }
    }
    let objects: Vec<Value> = cluster.objects().collect();
    let next = Arc::new(AtomicUsize::new(0));
    std::thread::scope(|scope| {
        for _ in 0..6 {
            let (next, objects, client) = (Arc::clone(&next), &objects, client.clone());
            scope.spawn(move || loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(object) = objects.get(i) else { return };
                // Deployments after everything they reference.
                match client.post::<serde::de::IgnoredAny>(&path_of(object), object) {
                    Ok(_) => {}
                    Err(e) if e.status().is_some_and(|s| s.is_conflict()) => {}
                    Err(e) => panic!("creating {}: {e}", object["metadata"]["name"]),
                }
            });
        }
    });
    started.elapsed()
}

/// How many Deployments carry the hash on their metadata (one LIST as metadata).
fn adopted(client: &Client) -> usize {
    let mut count = 0;
    let mut token: Option<String> = None;
    loop {
        let mut path = "/apis/apps/v1/deployments?limit=500".to_string();
        if let Some(t) = &token {
            path.push_str(&format!("&continue={t}"));
        }
        let meta = client
            .list(&path, Shape::Metadata, &mut |d: Value| {
                if d["metadata"]["annotations"]["wavelet.dev/config-hash"].is_string() {
                    count += 1;
                }
            })
            .expect("listing deployments");
        match meta.continue_token.filter(|t| !t.is_empty()) {
            Some(t) => token = Some(wavelet::selector::percent_encode_query_value(&t)),
            None => return count,
        }
    }
}

pub fn run(source: &Source, cluster: &Cluster, debounce: Duration, changes: usize) -> RealFigures {
    let plane = ControlPlane::start(source).expect("starting the control plane");
    let client = plane.admin();
    eprintln!(
        "footprint (real): loading {} objects",
        cluster.config_objects()
    );
    let load = load(&client, cluster);
    eprintln!("footprint (real): loaded in {load:?}");

    let wavelet = Wavelet::start_with_kubeconfig(&plane.kubeconfig, debounce);
    let sync = wavelet.wait_for_sync(Duration::from_secs(300));
    let deadline = Instant::now() + Duration::from_secs(300);
    while adopted(&client) < cluster.deployments {
        assert!(
            Instant::now() < deadline,
            "not every Deployment adopted in 300 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // Adopted as soon as the last PATCH lands; let the watch events of those PATCHes in.
    std::thread::sleep(Duration::from_millis(1500));
    let adopted_sample = wavelet.sample();
    let adopted_after = adopted_sample.at - wavelet.started;

    // Change → PATCH: a ConfigMap edit, timed until the Deployment's template carries a
    // new hash; the floor is the same write until the API server's watch shows it.
    let mut change_to_patch = Vec::new();
    let mut floor = Vec::new();
    for d in crate::measure::spread(cluster.deployments, changes) {
        let cm = cluster.configmap_of(d);
        let deployment = cluster.deployment(d);
        let cm_path = format!("/api/v1/namespaces/{}/configmaps/{}", cm.namespace, cm.name);
        let dep_path = format!(
            "/apis/apps/v1/namespaces/{}/deployments/{}",
            deployment.namespace, deployment.name
        );
        let before: Value = client.get(&dep_path).unwrap();
        let before = before["spec"]["template"]["metadata"]["annotations"]
            ["wavelet.dev/config-hash"]
            .clone();
        let written = Instant::now();
        let patched: Value = client
            .patch(
                &cm_path,
                PatchType::Merge,
                &json!({"data": {crate::scenario::CONFIGMAP_KEY: format!("changed {d} {written:?}")}}),
            )
            .unwrap();
        floor.push(written.elapsed());
        let _ = patched;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let now: Value = client.get(&dep_path).unwrap();
            if now["spec"]["template"]["metadata"]["annotations"]["wavelet.dev/config-hash"]
                != before
            {
                change_to_patch.push(written.elapsed().saturating_sub(debounce));
                break;
            }
            assert!(Instant::now() < deadline, "no rollout of {dep_path}");
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    drop(wavelet);

    // A restart on the adopted cluster: nothing to adopt.
    let restarted = Wavelet::start_with_kubeconfig(&plane.kubeconfig, debounce);
    let restart_sync = restarted.wait_for_sync(Duration::from_secs(300));
    drop(restarted);
    crate::process::hold_for_profiling("real", &plane.kubeconfig);
    RealFigures {
        load,
        sync,
        adopted: adopted_sample,
        adopted_after,
        restart_sync,
        change_to_patch,
        floor,
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

pub fn print(f: &RealFigures, cluster: &Cluster) {
    let mut latency = f.change_to_patch.clone();
    latency.sort();
    let mut floor = f.floor.clone();
    floor.sort();
    let mib = |kib: u64| kib as f64 / 1024.0;
    println!("## Against a real kube-apiserver v1.36 over TLS (WAVELET_BENCH_REAL)");
    println!();
    println!(
        "{} Deployments, {} ConfigMaps and Secrets ({} objects loaded in {:.1} s)",
        cluster.deployments,
        cluster.config_objects(),
        cluster.config_objects() + cluster.deployments,
        f.load.as_secs_f64()
    );
    println!();
    println!("| figure | real |");
    println!("|---|---|");
    println!(
        "| RSS at initial sync / peak | {:.1} / {:.1} MiB |",
        mib(f.sync.rss_kib),
        mib(f.sync.peak_kib)
    );
    println!("| CPU until initial sync | {:.2} s |", f.sync.cpu_seconds);
    println!(
        "| RSS after all adopted / peak | {:.1} / {:.1} MiB |",
        mib(f.adopted.rss_kib),
        mib(f.adopted.peak_kib)
    );
    println!(
        "| CPU from start until all adopted | {:.2} s (all adopted {:.1} s after start) |",
        f.adopted.cpu_seconds,
        f.adopted_after.as_secs_f64()
    );
    println!(
        "| CPU of a restart with nothing to adopt (until sync) | {:.2} s, RSS {:.1} MiB |",
        f.restart_sync.cpu_seconds,
        mib(f.restart_sync.rss_kib)
    );
    println!(
        "| ConfigMap change → PATCH beyond the debounce ({} changes; polled every 2 ms) | median {:.1} ms, p90 {:.1} ms |",
        latency.len(),
        percentile(&latency, 0.5).as_secs_f64() * 1e3,
        percentile(&latency, 0.9).as_secs_f64() * 1e3
    );
    println!(
        "| the API server's own write (PATCH round trip), same run | median {:.1} ms, p90 {:.1} ms |",
        percentile(&floor, 0.5).as_secs_f64() * 1e3,
        percentile(&floor, 0.9).as_secs_f64() * 1e3
    );
}
