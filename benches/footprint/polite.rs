//! Polite at scale (issue 27): how long adopting 10,000 workloads takes under the default
//! client-side budget (`--api-qps` 20, `--api-burst` 30), and the threads, connections,
//! watches and memory of `--namespaces` with 10 and 500 namespaces (one cluster-wide watch
//! per resource above 10) next to `--per-namespace-watches` at 10 and 100 (its cap).

use std::time::{Duration, Instant};

use serde_json::json;

use crate::fake::FakeApi;
use crate::process::{Sample, Wavelet};
use crate::scenario::Cluster;
use crate::table::{mib, thousands, wall, Table};

/// The resources wavelet watches against the fake (ConfigMaps, Secrets, Deployments,
/// StatefulSets, DaemonSets, CronJobs).
const WATCHED: [&str; 6] = [
    "configmaps",
    "secrets",
    "deployments",
    "statefulsets",
    "daemonsets",
    "cronjobs",
];
/// Namespaces with a workload that `--namespaces` does not list.
const OTHER_NAMESPACES: usize = 50;

pub struct AdoptionFigures {
    pub workloads: usize,
    pub sync: Duration,
    /// From the end of the sync to the last adoption PATCH.
    pub adoption: Duration,
    /// The most PATCHes the fake received in any one second.
    pub peak_patches_per_second: usize,
    pub settled: Sample,
}

pub struct NamespaceCell {
    pub namespaces: usize,
    pub per_namespace: bool,
    pub sync: Duration,
    pub threads: usize,
    pub sockets: usize,
    pub watches: usize,
    pub lists: usize,
    pub settled: Sample,
}

pub struct PoliteFigures {
    /// The SPEC §6 cluster's initial sync under the default budget: its wall time and the
    /// Secret GETs in it (one per referenced Secret).
    pub spec_sync: Duration,
    pub spec_secret_reads: usize,
    pub adoption: AdoptionFigures,
    pub cells: Vec<NamespaceCell>,
}

pub fn run(workloads: usize, scale: f64, debounce: Duration) -> PoliteFigures {
    let (spec_sync, spec_secret_reads) = spec_sync_under_default_budget(scale, debounce);
    let adoption = adoption_under_default_budget(workloads, debounce);
    let cells = [(10, false), (500, false), (10, true), (100, true)]
        .into_iter()
        .map(|(namespaces, per_namespace)| namespace_cell(namespaces, per_namespace, debounce))
        .collect();
    PoliteFigures {
        spec_sync,
        spec_secret_reads,
        adoption,
        cells,
    }
}

/// The default scenario's cluster, synced under the default budget: every referenced
/// Secret is read with one GET, and those wait their turn.
fn spec_sync_under_default_budget(scale: f64, debounce: Duration) -> (Duration, usize) {
    let cluster = Cluster::spec(scale);
    crate::progress("politeness: the SPEC §6 initial sync under the default budget");
    let fake = FakeApi::start_tls();
    cluster.load(&fake);
    let budget = ["--api-qps", "20", "--api-burst", "30"].map(String::from);
    let wavelet = Wavelet::start_tls_with(&fake.url(), debounce, &budget);
    let synced = wavelet.wait_for_sync(Duration::from_secs(1800));
    let reads = fake
        .requests()
        .iter()
        .filter(|r| r.method == "GET" && r.resource() == "secrets" && r.received <= synced.at)
        .filter(|r| !r.is_watch() && r.query_param("limit").is_none())
        .count();
    (synced.at - wavelet.started, reads)
}

/// `workloads` opted-in Deployments (100 a namespace), one ConfigMap of 1 KiB each, none
/// adopted yet; wavelet with its default budget.
fn adoption_under_default_budget(workloads: usize, debounce: Duration) -> AdoptionFigures {
    let cluster = Cluster {
        deployments: workloads,
        configmaps_per_deployment: 1,
        secrets_per_deployment: 0,
        configmaps: workloads,
        secrets: 0,
        object_size: 1024,
        helm_secrets: 0,
        helm_secret_size: 0,
        csi_pods_per_deployment: None,
    };
    crate::progress(&format!(
        "politeness: adopting {workloads} workloads under the default budget"
    ));
    let fake = FakeApi::start_tls();
    cluster.load(&fake);
    let budget = ["--api-qps", "20", "--api-burst", "30"].map(String::from);
    let wavelet = Wavelet::start_tls_with(&fake.url(), debounce, &budget);
    let synced = wavelet.wait_for_sync(Duration::from_secs(600));
    let sync = synced.at - wavelet.started;
    let patches = |f: &FakeApi| {
        f.requests()
            .iter()
            .filter(|r| r.method == "PATCH" && r.resource() == "deployments")
            .map(|r| r.received)
            .collect::<Vec<Instant>>()
    };
    let patience = Duration::from_secs(3600);
    let mut last_report = Instant::now();
    loop {
        let done = patches(&fake).len();
        if done >= workloads {
            break;
        }
        assert!(
            synced.at.elapsed() < patience,
            "{done} of {workloads} adopted"
        );
        if last_report.elapsed() > Duration::from_secs(60) {
            crate::progress(&format!("politeness: {done} of {workloads} adopted"));
            last_report = Instant::now();
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let times = patches(&fake);
    let adoption = *times.last().unwrap() - synced.at;
    AdoptionFigures {
        workloads,
        sync,
        adoption,
        peak_patches_per_second: most_in_window(&times, Duration::from_secs(1)),
        settled: wavelet.sample(),
    }
}

fn most_in_window(times: &[Instant], window: Duration) -> usize {
    let (mut most, mut start) = (0, 0);
    for end in 0..times.len() {
        while times[end] - times[start] >= window {
            start += 1;
        }
        most = most.max(end - start + 1);
    }
    most
}

/// `namespaces` listed in `--namespaces`, each with one ConfigMap and one opted-in
/// Deployment, and [`OTHER_NAMESPACES`] more that are not listed.
fn namespace_cell(namespaces: usize, per_namespace: bool, debounce: Duration) -> NamespaceCell {
    crate::progress(&format!(
        "politeness: --namespaces with {namespaces} namespaces{}",
        if per_namespace {
            ", --per-namespace-watches"
        } else {
            ""
        }
    ));
    let fake = FakeApi::start_tls();
    let name = |n: usize| format!("ns-{n:03}");
    fake.apply_all((0..namespaces + OTHER_NAMESPACES).flat_map(|n| {
        let ns = name(n);
        [
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "config", "namespace": ns}, "data": {"k": "v"}}),
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "app", "namespace": ns,
                    "annotations": {"wavelet.dev/update-on-config-change": "true"}},
                "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "app"}},
                    "template": {"metadata": {"labels": {"app": "app"}},
                        "spec": {"volumes": [{"name": "c", "configMap": {"name": "config"}}],
                            "containers": [{"name": "app", "image": "nginx"}]}}}}),
        ]
    }));
    fake.compact();
    let list: Vec<String> = (0..namespaces).map(name).collect();
    let mut flags = vec!["--namespaces".to_string(), list.join(",")];
    if per_namespace {
        flags.push("--per-namespace-watches".into());
    }
    let wavelet = Wavelet::start_tls_with(&fake.url(), debounce, &flags);
    let synced = wavelet.wait_for_sync(Duration::from_secs(600));
    // Adopted (one PATCH per listed namespace), then idle.
    while fake
        .requests()
        .iter()
        .filter(|r| r.method == "PATCH")
        .count()
        < namespaces
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_secs(2));
    NamespaceCell {
        namespaces,
        per_namespace,
        sync: synced.at - wavelet.started,
        threads: wavelet.threads(),
        sockets: wavelet.sockets(),
        watches: WATCHED.iter().map(|r| fake.open_watches(r)).sum(),
        lists: fake
            .requests()
            .iter()
            .filter(|r| r.method == "GET" && !r.is_watch() && r.query_param("limit").is_some())
            .count(),
        settled: wavelet.sample(),
    }
}

pub fn print(figures: &PoliteFigures) {
    let a = &figures.adoption;
    println!("\n## Polite at scale (issue 27)\n");
    println!(
        "The default scenario's initial sync under the default budget: {} ({} Secret GETs, \
         one per referenced Secret, at 20 a second after the first 30).\n",
        wall(figures.spec_sync),
        thousands(figures.spec_secret_reads),
    );
    println!(
        "Adopting {} workloads under the default budget (--api-qps 20, --api-burst 30): sync {}, \
         then {} until the last adoption PATCH ({:.1} a second; at most {} in any second); \
         RSS {} after.\n",
        thousands(a.workloads),
        wall(a.sync),
        wall(a.adoption),
        a.workloads as f64 / a.adoption.as_secs_f64(),
        a.peak_patches_per_second,
        mib(a.settled.rss_kib),
    );
    let mut table = Table::new(&[
        "--namespaces",
        "watches",
        "sync",
        "threads",
        "sockets",
        "open watches",
        "LISTs",
        "RSS",
    ]);
    for cell in &figures.cells {
        table.row(vec![
            thousands(cell.namespaces),
            if cell.per_namespace {
                "each namespace (--per-namespace-watches)".into()
            } else if cell.namespaces > 10 {
                "once, all namespaces, filtered".into()
            } else {
                "each namespace".into()
            },
            wall(cell.sync),
            cell.threads.to_string(),
            cell.sockets.to_string(),
            cell.watches.to_string(),
            cell.lists.to_string(),
            mib(cell.settled.rss_kib),
        ]);
    }
    table.print();
    println!(
        "Each cell: one ConfigMap and one opted-in Deployment in each listed namespace and in \
         {OTHER_NAMESPACES} namespaces not listed; measured once adopted and idle. LISTs: \
         initial lists (pages included). Sockets: the HTTP listener, pooled connections \
         and watches.\n"
    );
}
