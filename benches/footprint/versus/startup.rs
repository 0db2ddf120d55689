//! The start-up cluster (issue 23: 1,000 Deployments, 2,000 ConfigMaps and 5,000 Secrets
//! of 4 KiB, 200 Helm-release Secrets of 256 KiB) at 1×, 3× and 10×, loaded once and
//! grown in blocks; each controller in turn starts on it (its Deployments re-written with
//! its opt-in just before), is measured until ready, and at 1× then sits idle for the
//! steady-state figures: what it costs the API server per hour with nothing changing.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime};

use serde_json::{json, Value};
use wavelet::client::{Client, Shape};

use crate::calls::CallCounts;
use crate::loadtest::drive::{collection, create_all, create_namespace};
use crate::loadtest::OptIn;
use crate::scenario::{secret_value, text_of_size, CONFIGMAP_KEY, SECRET_KEY};

use super::controllers::{Controller, Start, Which};
use super::loadtests::wall_of;
use super::plane::Plane;

/// Per block of 100 Deployments: 200 ConfigMaps (two per Deployment), 500 Secrets (one
/// per Deployment referenced, 400 not), 20 Helm-release Secrets, in a namespace of its
/// own; 10 blocks are the 1× cluster.
const DEPLOYMENTS: usize = 100;
const CONFIGMAPS: usize = 200;
const SECRETS: usize = 500;
const HELM: usize = 20;
const BLOCKS_1X: usize = 10;
const SIZE: usize = 4 * 1024;
const HELM_SIZE: usize = 256 * 1024;
const PREFIX: &str = "startup-";

pub fn objects_per_scale(scale: usize) -> usize {
    scale * BLOCKS_1X * (DEPLOYMENTS + CONFIGMAPS + SECRETS + HELM)
}

fn namespace(b: usize) -> String {
    format!("{PREFIX}{b:03}")
}

fn configs(b: usize) -> Vec<Value> {
    let ns = namespace(b);
    let mut out = Vec::new();
    for j in 0..CONFIGMAPS {
        let i = b * CONFIGMAPS + j;
        out.push(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("cm-{i}"), "namespace": ns},
            "data": {CONFIGMAP_KEY: text_of_size(i, SIZE)}}));
    }
    for j in 0..SECRETS {
        let i = b * SECRETS + j;
        out.push(
            json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": format!("secret-{i}"), "namespace": ns},
            "data": {SECRET_KEY: secret_value(i, SIZE)}}),
        );
    }
    for j in 0..HELM {
        let h = b * HELM + j;
        let release = format!("release-{h}");
        out.push(
            json!({"apiVersion": "v1", "kind": "Secret", "type": "helm.sh/release.v1",
            "metadata": {"name": format!("sh.helm.release.v1.{release}.v1"), "namespace": ns,
                "labels": {"owner": "helm", "name": release, "status": "deployed", "version": "1"}},
            "data": {"release": secret_value(h, HELM_SIZE)}}),
        );
    }
    out
}

/// Deployment `d` of block `b`: its first ConfigMap as a volume, the second `envFrom`,
/// its Secret as an env `secretKeyRef`; no replicas (no Pods).
fn deployment(b: usize, j: usize, opt_in: OptIn) -> Value {
    let d = b * DEPLOYMENTS + j;
    let name = format!("app-{d}");
    let labels = json!({"app": name});
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace(b), "annotations": Value::Object(opt_in.annotations())},
        "spec": {"replicas": 0, "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels},
                "spec": {"volumes": [{"name": "config", "configMap": {"name": format!("cm-{}", 2 * d)}}],
                    "containers": [{"name": "app", "image": "nginx:1.27",
                        "envFrom": [{"configMapRef": {"name": format!("cm-{}", 2 * d + 1)}}],
                        "env": [{"name": "CREDENTIALS", "valueFrom": {"secretKeyRef": {
                            "name": format!("secret-{}", b * SECRETS + j), "key": SECRET_KEY}}}]}]}}}})
}

/// Creates blocks `from..to` (namespaces, ConfigMaps and Secrets; Deployments later).
fn load(client: &Client, from: usize, to: usize) -> Duration {
    let started = Instant::now();
    for b in from..to {
        create_namespace(client, &namespace(b));
        create_all(client, &configs(b));
    }
    started.elapsed()
}

/// Every Deployment of blocks `0..blocks` as freshly created for `opt_in`: created, or
/// written back whole (no hash of an earlier controller left on it).
fn reset_deployments(client: &Client, blocks: usize, opt_in: OptIn) {
    let next = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..6 {
            let (next, client) = (&next, client.clone());
            scope.spawn(move || loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= blocks * DEPLOYMENTS {
                    return;
                }
                let (b, j) = (i / DEPLOYMENTS, i % DEPLOYMENTS);
                let mut object = deployment(b, j, opt_in);
                let path = collection("Deployment", &namespace(b));
                match client.post::<serde::de::IgnoredAny>(&path, &object) {
                    Ok(_) => continue,
                    Err(e) if e.status().is_some_and(|s| s.is_conflict()) => {}
                    Err(e) => panic!("creating deployment {i}: {e}"),
                }
                let at = format!("{path}/app-{}", b * DEPLOYMENTS + j);
                loop {
                    let current: Value = client.get(&at).expect("reading a deployment");
                    object["metadata"]["resourceVersion"] =
                        current["metadata"]["resourceVersion"].clone();
                    match client.put::<serde::de::IgnoredAny>(&at, &object) {
                        Ok(_) => break,
                        Err(e) if e.status().is_some_and(|s| s.is_conflict()) => continue,
                        Err(e) => panic!("writing deployment {i}: {e}"),
                    }
                }
            });
        }
    });
}

/// The pod template (as its text's hash) of every start-up Deployment, once the
/// Deployment controller has seen each one's generation (so that its status writes are
/// over before a measurement). Not the generation itself: a Deployment's counts its
/// annotation edits too.
fn settled_templates(client: &Client, expected: usize) -> HashMap<String, u64> {
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let mut generations = HashMap::new();
        let mut settled = true;
        let mut token: Option<String> = None;
        loop {
            let mut path = "/apis/apps/v1/deployments?limit=1000".to_string();
            if let Some(t) = &token {
                path.push_str(&format!("&continue={t}"));
            }
            let meta = client
                .list(&path, Shape::Whole, &mut |d: Value| {
                    let ns = d["metadata"]["namespace"].as_str().unwrap_or_default();
                    if !ns.starts_with(PREFIX) {
                        return;
                    }
                    let generation = d["metadata"]["generation"].as_u64().unwrap_or(0);
                    settled &= d["status"]["observedGeneration"].as_u64() == Some(generation);
                    let mut hash = DefaultHasher::new();
                    d["spec"]["template"].to_string().hash(&mut hash);
                    generations.insert(
                        format!(
                            "{ns}/{}",
                            d["metadata"]["name"].as_str().unwrap_or_default()
                        ),
                        hash.finish(),
                    );
                })
                .expect("listing deployments");
            match meta.continue_token.filter(|t| !t.is_empty()) {
                Some(t) => token = Some(wavelet::selector::percent_encode_query_value(&t)),
                None => break,
            }
        }
        if settled && generations.len() >= expected {
            return generations;
        }
        assert!(
            Instant::now() < deadline,
            "start-up Deployments did not settle"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The API server's counters that the steady state is read from.
#[derive(Clone, Debug, Default)]
pub struct ServerCounters {
    /// `apiserver_request_total` by verb.
    pub requests: BTreeMap<String, f64>,
    /// `apiserver_response_sizes_sum` by verb and resource.
    pub response_bytes: BTreeMap<(String, String), f64>,
    /// `apiserver_watch_events_sizes` by resource (`group/resource`, or `resource` in the
    /// core group): events sent and their bytes.
    pub watch_events: BTreeMap<String, WatchEvents>,
    /// `apiserver_longrunning_requests{verb="WATCH"}` by resource: the WATCH requests open
    /// when read (a gauge, not a counter).
    pub open_watches: BTreeMap<String, f64>,
    pub etcd_cpu: f64,
    pub apiserver_cpu: f64,
}

/// Watch events sent, and their bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct WatchEvents {
    pub count: f64,
    pub bytes: f64,
}

/// `group/resource`, or `resource` in the core group, from a metric line's labels.
fn resource_of(line: &str) -> String {
    match label(line, "group") {
        "" => label(line, "resource").to_string(),
        group => format!("{group}/{}", label(line, "resource")),
    }
}

fn label<'a>(line: &'a str, name: &str) -> &'a str {
    let key = format!("{name}=\"");
    line.find(&key)
        .map(|i| &line[i + key.len()..])
        .and_then(|rest| rest.split('"').next())
        .unwrap_or("")
}

impl ServerCounters {
    pub fn read(plane: &Plane) -> ServerCounters {
        let (etcd_cpu, apiserver_cpu) = plane.server_cpu_seconds();
        ServerCounters {
            etcd_cpu,
            apiserver_cpu,
            ..ServerCounters::parse(&plane.server_metrics())
        }
    }

    /// The counters of the API server's `/metrics` text (its CPU left at 0).
    fn parse(text: &str) -> ServerCounters {
        let mut c = ServerCounters::default();
        for line in text.lines() {
            let Some(value) = line.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()) else {
                continue;
            };
            if line.starts_with("apiserver_request_total{") {
                *c.requests.entry(label(line, "verb").into()).or_default() += value;
            } else if line.starts_with("apiserver_response_sizes_sum{") {
                *c.response_bytes
                    .entry((label(line, "verb").into(), label(line, "resource").into()))
                    .or_default() += value;
            } else if line.starts_with("apiserver_watch_events_sizes_sum{") {
                c.watch_events.entry(resource_of(line)).or_default().bytes += value;
            } else if line.starts_with("apiserver_watch_events_sizes_count{") {
                c.watch_events.entry(resource_of(line)).or_default().count += value;
            } else if line.starts_with("apiserver_longrunning_requests{")
                && label(line, "verb") == "WATCH"
            {
                *c.open_watches.entry(resource_of(line)).or_default() += value;
            }
        }
        c
    }

    /// `self − before`.
    pub fn since(&self, before: &ServerCounters) -> ServerCounters {
        fn diff<K: Ord + Clone>(a: &BTreeMap<K, f64>, b: &BTreeMap<K, f64>) -> BTreeMap<K, f64> {
            a.iter()
                .map(|(k, v)| (k.clone(), v - b.get(k).copied().unwrap_or(0.0)))
                .collect()
        }
        let watch_events = self
            .watch_events
            .iter()
            .map(|(resource, now)| {
                let then = before
                    .watch_events
                    .get(resource)
                    .copied()
                    .unwrap_or_default();
                let events = WatchEvents {
                    count: now.count - then.count,
                    bytes: now.bytes - then.bytes,
                };
                (resource.clone(), events)
            })
            .collect();
        ServerCounters {
            requests: diff(&self.requests, &before.requests),
            response_bytes: diff(&self.response_bytes, &before.response_bytes),
            watch_events,
            // A gauge: what is open now, not a difference.
            open_watches: self.open_watches.clone(),
            etcd_cpu: self.etcd_cpu - before.etcd_cpu,
            apiserver_cpu: self.apiserver_cpu - before.apiserver_cpu,
        }
    }

    pub fn total_requests(&self) -> f64 {
        self.requests.values().sum()
    }

    /// Response bytes of everything but watches (a watch's are recorded when it ends,
    /// all of them at once; its events are in `watch_event_bytes` as they are sent).
    pub fn response_bytes_but_watches(&self) -> f64 {
        self.response_bytes
            .iter()
            .filter(|((verb, _), _)| verb != "WATCH")
            .map(|(_, v)| v)
            .sum()
    }

    /// Watch event bytes of every resource (everyone's watches).
    pub fn watch_event_bytes(&self) -> f64 {
        self.watch_events.values().map(|e| e.bytes).sum()
    }

    pub fn list_bytes(&self) -> f64 {
        self.response_bytes
            .iter()
            .filter(|((verb, _), _)| verb == "LIST")
            .map(|(_, v)| v)
            .sum()
    }
}

/// A steady-state window.
#[derive(Clone, Debug)]
pub struct Idle {
    pub seconds: f64,
    /// The API server's counters over the window (everyone's requests); its
    /// `open_watches` are read in the middle of the window, when the controller's watches
    /// are open (not at its start, when one may be reconnecting).
    pub server: ServerCounters,
    /// The controller's own requests (audit log), and its CPU.
    pub calls: CallCounts,
    pub controller_cpu: f64,
}

/// One resource a controller holds WATCH requests open on, and the watch events of that
/// resource an hour above the window without a controller.
#[derive(Clone, Debug)]
pub struct OwnWatches {
    pub resource: String,
    /// Its WATCH requests open in the middle of its window, beyond the baseline's.
    pub watches: f64,
    pub events_per_hour: f64,
    pub bytes_per_hour: f64,
}

impl Idle {
    /// Per hour of this window, above the same figure per hour of `baseline`.
    pub fn per_hour_above(&self, baseline: &Idle, value: impl Fn(&Idle) -> f64) -> f64 {
        value(self) * 3600.0 / self.seconds.max(1.0)
            - value(baseline) * 3600.0 / baseline.seconds.max(1.0)
    }

    /// The watch traffic that is this controller's: the events of the resources it holds
    /// more WATCH requests open on than the window without it, above that window. Other
    /// watchers' events (kube-controller-manager's Leases, Endpoints, Events) fall on other
    /// resources and count for nobody; on a resource it shares with them, theirs is in both
    /// windows and cancels out.
    pub fn own_watches(&self, baseline: &Idle) -> Vec<OwnWatches> {
        self.server
            .open_watches
            .iter()
            .filter_map(|(resource, &open)| {
                let watches = open
                    - baseline
                        .server
                        .open_watches
                        .get(resource)
                        .copied()
                        .unwrap_or(0.0);
                let events = |i: &Idle| {
                    i.server
                        .watch_events
                        .get(resource)
                        .copied()
                        .unwrap_or_default()
                };
                (watches >= 1.0).then(|| OwnWatches {
                    resource: resource.clone(),
                    watches,
                    events_per_hour: self.per_hour_above(baseline, |i| events(i).count),
                    bytes_per_hour: self.per_hour_above(baseline, |i| events(i).bytes),
                })
            })
            .collect()
    }

    /// [`Idle::own_watches`] summed: (watches, events an hour, bytes an hour).
    pub fn own_watch_traffic(&self, baseline: &Idle) -> (f64, f64, f64) {
        self.own_watches(baseline)
            .iter()
            .fold((0.0, 0.0, 0.0), |(w, e, b), o| {
                (w + o.watches, e + o.events_per_hour, b + o.bytes_per_hour)
            })
    }
}

fn idle_window(plane: &Plane, which: Option<&Controller>, seconds: u64) -> Idle {
    let before = ServerCounters::read(plane);
    let cpu_before = which.map(|c| c.sample().cpu_seconds);
    let (from, started) = (SystemTime::now(), Instant::now());
    std::thread::sleep(Duration::from_secs(seconds / 2));
    let open_watches = ServerCounters::parse(&plane.server_metrics()).open_watches;
    std::thread::sleep(Duration::from_secs(seconds - seconds / 2));
    let to = SystemTime::now();
    let server = ServerCounters {
        open_watches,
        ..ServerCounters::read(plane).since(&before)
    };
    Idle {
        seconds: started.elapsed().as_secs_f64(),
        server,
        calls: which.map_or_else(CallCounts::default, |c| plane.calls(c.which, from, to)),
        controller_cpu: which
            .zip(cpu_before)
            .map_or(0.0, |(c, b)| c.sample().cpu_seconds - b),
    }
}

/// One controller started on the start-up cluster at one scale.
pub struct StartFigures {
    pub which: Which,
    pub scale: usize,
    pub ready_after: Duration,
    pub cpu_to_ready: f64,
    pub rss_at_ready_kib: u64,
    pub peak_at_ready_kib: u64,
    /// RSS once its start's work is done: at ready for the peers, once every Deployment
    /// was adopted for wavelet (its ready comes first).
    pub rss_settled_kib: u64,
    pub calls_start: CallCounts,
    /// wavelet, whose ready (`/readyz`) comes before its adoptions are done: when every
    /// Deployment was adopted and its CPU idle again (time and CPU from start; requests
    /// from start).
    pub all_adopted: Option<(Duration, f64, CallCounts)>,
    /// Deployments whose pod template it changed at start (rollouts).
    pub rollouts: usize,
    /// Deployments it wrote at start (adoptions for wavelet, hashes for Wave).
    pub written: usize,
    pub idle: Option<Idle>,
    /// wavelet at 1×: a second process with `--resync 1m`, idle, so that its window holds
    /// relists (the default period, 4 h jittered, puts none in a window of minutes).
    pub relists: Option<Idle>,
}

/// The `--resync` of the relist window, and its seconds (`WAVELET_BENCH_RELIST_SECONDS`,
/// default 150: the first relist of each kind comes ¾ to 5/4 of a minute after start).
pub const RELIST_PERIOD: &str = "1m";
pub const RELIST_PERIOD_SECONDS: f64 = 60.0;
/// wavelet's default `--resync`, to scale the relist window to it.
pub const DEFAULT_RESYNC_SECONDS: f64 = 4.0 * 3600.0;

/// wavelet again, with `--resync 1m`, idle for `seconds` once ready: what its relists cost.
fn relist_window(plane: &Plane, seconds: u64) -> Idle {
    progress(&format!(
        "×1: wavelet with --resync {RELIST_PERIOD}, idle for {seconds} s (its relists)"
    ));
    let start = Start {
        resync: Some(RELIST_PERIOD.into()),
        ..Start::default()
    };
    let mut controller = Controller::start(Which::Wavelet, plane, start);
    controller.wait_readyz(Duration::from_secs(600));
    // Its adoptions are all there from the run before: let the start settle.
    std::thread::sleep(Duration::from_secs(10));
    let idle = idle_window(plane, Some(&controller), seconds);
    controller.finish();
    idle
}

pub struct StartupFigures {
    pub runs: Vec<StartFigures>,
    /// The steady-state window with no controller running, at 1×.
    pub baseline: Option<Idle>,
    pub idle_seconds: u64,
    pub load: Vec<(usize, Duration)>,
}

fn progress(message: &str) {
    eprintln!("versus (start-up): {message}");
}

/// The start-up cluster at each scale (ascending), each controller in turn; with
/// `idle_seconds`, the steady state at the first scale.
pub fn run(
    plane: &Plane,
    scales: &[usize],
    controllers: &[Which],
    idle_seconds: Option<u64>,
) -> StartupFigures {
    let client = &plane.admin;
    let mut loaded = 0;
    let mut figures = StartupFigures {
        runs: Vec::new(),
        baseline: None,
        idle_seconds: idle_seconds.unwrap_or(0),
        load: Vec::new(),
    };
    for (turn, &scale) in scales.iter().enumerate() {
        let blocks = scale * BLOCKS_1X;
        if blocks > loaded {
            progress(&format!(
                "loading blocks {loaded}..{blocks} ({} objects in all)",
                objects_per_scale(scale)
            ));
            let took = load(client, loaded, blocks);
            progress(&format!("loaded in {:.0} s", took.as_secs_f64()));
            figures.load.push((scale, took));
            loaded = blocks;
        }
        let deployments = blocks * DEPLOYMENTS;
        if turn == 0 {
            if let Some(seconds) = idle_seconds {
                reset_deployments(client, blocks, OptIn::Reloader);
                settled_templates(client, deployments);
                progress(&format!(
                    "steady state without a controller for {seconds} s"
                ));
                figures.baseline = Some(idle_window(plane, None, seconds));
            }
        }
        for k in 0..controllers.len() {
            let which = controllers[(turn + k) % controllers.len()];
            progress(&format!("×{scale}: {}", which.title()));
            reset_deployments(client, blocks, which.opt_in());
            let before = settled_templates(client, deployments);
            std::thread::sleep(Duration::from_secs(2));
            let since = SystemTime::now();
            let start = Start {
                resync: std::env::var("WAVELET_BENCH_RESYNC").ok(),
                wave_raised_rates: true,
                ..Start::default()
            };
            let mut controller = Controller::start(which, plane, start);
            let written = if which == Which::Reloader {
                0
            } else {
                deployments
            };
            let timeout = Duration::from_secs(1800);
            let mut rss_settled_kib = 0;
            let (ready, all_adopted) = if which == Which::Wavelet {
                // Ready is /readyz; the adoptions go on in the background.
                let ready = controller.wait_readyz(timeout);
                let adopted = controller.wait_ready(plane, written, since, timeout);
                let calls = plane.calls(which, since, wall_of(adopted.at));
                rss_settled_kib = adopted.rss_kib;
                (
                    ready,
                    Some((adopted.at - controller.started, adopted.cpu_seconds, calls)),
                )
            } else {
                (controller.wait_ready(plane, written, since, timeout), None)
            };
            let calls_start = plane.calls(which, since, wall_of(ready.at));
            let after = settled_templates(client, deployments);
            let rollouts = after
                .iter()
                .filter(|(k, t)| before.get(*k).is_some_and(|b| b != *t))
                .count();
            let written = plane.workloads_written(which, since);
            let idle = match idle_seconds {
                Some(seconds) if turn == 0 => {
                    progress(&format!("×{scale}: {} idle for {seconds} s", which.title()));
                    Some(idle_window(plane, Some(&controller), seconds))
                }
                _ => None,
            };
            let started = controller.started;
            controller.finish();
            let relists = match (idle_seconds, which) {
                (Some(_), Which::Wavelet) if turn == 0 => {
                    let seconds = super::number("WAVELET_BENCH_RELIST_SECONDS", 150);
                    (seconds > 0).then(|| relist_window(plane, seconds))
                }
                _ => None,
            };
            progress(&format!(
                "×{scale}: {} ready after {:.1} s, {:.2} s CPU, {:.1} MiB",
                which.title(),
                (ready.at - started).as_secs_f64(),
                ready.cpu_seconds,
                ready.rss_kib as f64 / 1024.0
            ));
            figures.runs.push(StartFigures {
                which,
                scale,
                ready_after: ready.at - started,
                cpu_to_ready: ready.cpu_seconds,
                rss_at_ready_kib: ready.rss_kib,
                peak_at_ready_kib: ready.peak_kib,
                rss_settled_kib: rss_settled_kib.max(ready.rss_kib),
                calls_start,
                all_adopted,
                rollouts,
                written,
                idle,
                relists,
            });
        }
    }
    figures
}
