//! The measurements: the initial sync, the adoption of every workload, change → PATCH
//! latency with the requests each change cost, and the scaling cells.

use std::collections::HashSet;
use std::thread::sleep;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::calls::CallCounts;
use crate::fake::{FakeApi, Request};
use crate::process::{Sample, Wavelet};
use crate::scenario::{
    churn_namespace, secret_value, text_of_size, Cluster, ObjectRef, CONFIGMAP_KEY, SECRET_KEY,
};

/// How long the initial sync and the adoption may take before the run is abandoned.
const PATIENCE: Duration = Duration::from_secs(600);
/// No request for this long: wavelet has done what a change made it do.
const QUIET_AFTER_CHANGE: Duration = Duration::from_millis(100);
/// No request for this long after the adoption: wavelet is idle.
const QUIET_AFTER_ADOPTION: Duration = Duration::from_millis(500);
/// Then this long more before the settled memory is read.
const SETTLE: Duration = Duration::from_secs(1);
/// A change's PATCH is looked for from this long before the debounce window ends.
const EARLY_LOOK: Duration = Duration::from_millis(20);
const POLL: Duration = Duration::from_millis(1);

/// The initial sync, up to wavelet's `initial sync complete` line.
#[derive(Clone, Debug)]
pub struct Sync {
    pub wall: Duration,
    /// Taken the moment the line arrived.
    pub at_end: Sample,
    /// CPU seconds the fake API server (this process) spent meanwhile: if they come close
    /// to the wall time, the fake, not wavelet, sets the pace.
    pub fake_cpu_seconds: f64,
    /// The requests received until then.
    pub calls: CallCounts,
}

/// `harness_before`: this process (the fake and the harness) just before wavelet started.
pub fn initial_sync(fake: &FakeApi, wavelet: &Wavelet, harness_before: Sample) -> Sync {
    let at_end = wavelet.wait_for_sync(PATIENCE);
    let harness_after = Sample::of(std::process::id());
    let requests: Vec<Request> = fake
        .requests()
        .into_iter()
        .filter(|r| r.received <= at_end.at)
        .collect();
    Sync {
        wall: at_end.at - wavelet.started,
        at_end,
        fake_cpu_seconds: harness_after.cpu_seconds - harness_before.cpu_seconds,
        calls: CallCounts::of(&requests),
    }
}

/// The adoption of every opted-in workload: one metadata PATCH each, no rollout.
#[derive(Clone, Debug)]
pub struct Adoption {
    /// From the end of the sync until the last workload's PATCH.
    pub wall: Duration,
    /// Workloads PATCHed without touching the pod template (adoptions).
    pub adoptions: usize,
    /// PATCHes of a pod template (rollouts, which adopting must not cause).
    pub rollouts: usize,
    /// Once wavelet is idle after the adoption.
    pub settled: Sample,
    /// Every request from wavelet's start until then.
    pub calls: CallCounts,
}

pub fn adoption(fake: &FakeApi, wavelet: &Wavelet, sync: &Sync, workloads: usize) -> Adoption {
    let (mut adopted, mut rollouts, mut cursor) = (HashSet::new(), 0, 0);
    while adopted.len() < workloads {
        let new = fake.requests_since(cursor);
        cursor += new.len();
        for patch in new.iter().filter(|r| is_workload_patch(r)) {
            if rolls_out(patch) {
                rollouts += 1;
            } else {
                adopted.insert(patch.path.clone());
            }
        }
        assert!(
            sync.at_end.at.elapsed() < PATIENCE,
            "only {} of {workloads} workloads adopted; wavelet's last lines:\n{}",
            adopted.len(),
            wavelet.log_tail()
        );
        sleep(Duration::from_millis(20));
    }
    let wall = sync.at_end.at.elapsed();
    wait_for_quiet(fake, QUIET_AFTER_ADOPTION);
    sleep(SETTLE);
    Adoption {
        wall,
        adoptions: adopted.len(),
        rollouts,
        settled: wavelet.sample(),
        calls: CallCounts::of(&fake.requests()),
    }
}

fn is_workload_patch(request: &Request) -> bool {
    request.method == "PATCH" && request.resource() == "deployments"
}

/// A PATCH of the pod template: the workload's controller rolls its Pods.
pub fn rolls_out(patch: &Request) -> bool {
    patch.body_json().pointer("/spec/template").is_some()
}

/// Waits until the fake has received no request for `quiet`.
fn wait_for_quiet(fake: &FakeApi, quiet: Duration) {
    wait_for_quiet_of(fake, quiet, |_| true);
}

/// Waits until the fake has received no `counted` request for `quiet` (others, such as
/// Events a rollout posts, may still come).
pub fn wait_for_quiet_of(fake: &FakeApi, quiet: Duration, counted: impl Fn(&Request) -> bool) {
    let mut cursor = fake.request_count();
    let mut since = Instant::now();
    while since.elapsed() < quiet {
        sleep(Duration::from_millis(5));
        let (now, new) = fake.count_since(cursor, &counted);
        cursor = now;
        if new > 0 {
            since = Instant::now();
        }
    }
}

/// Which kind of object a change edits.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Edited {
    ConfigMap,
    Secret,
}

/// Changes of one kind, each to an object that exactly one Deployment references.
#[derive(Clone, Debug, Default)]
pub struct Changes {
    /// PATCH arrival − change − debounce window, per change, in ms.
    pub beyond_debounce_ms: Vec<f64>,
    /// All requests between the changes and the quiet after their PATCHes.
    pub calls: CallCounts,
}

impl Changes {
    pub fn count(&self) -> usize {
        self.beyond_debounce_ms.len()
    }
}

/// Changes the object of `edited` of each Deployment in `deployments`, one at a time.
pub fn changes(
    fake: &FakeApi,
    wavelet: &Wavelet,
    cluster: &Cluster,
    edited: Edited,
    deployments: &[usize],
    debounce: Duration,
) -> Changes {
    let mut changes = Changes::default();
    for (k, &d) in deployments.iter().enumerate() {
        let cursor = fake.request_count();
        let changed_at = Instant::now();
        change(fake, cluster, edited, d, k);
        let Some(patch) =
            wait_for_patch(fake, cursor, &cluster.deployment(d), changed_at + debounce)
        else {
            panic!(
                "no PATCH of {:?} within 10 s of a {edited:?} change; wavelet's last lines:\n{}",
                cluster.deployment(d),
                wavelet.log_tail()
            );
        };
        let since_change = patch.received.saturating_duration_since(changed_at);
        changes
            .beyond_debounce_ms
            .push(milliseconds(since_change) - milliseconds(debounce));
        wait_for_quiet(fake, QUIET_AFTER_CHANGE);
        changes
            .calls
            .add(&CallCounts::of(&fake.requests_since(cursor)));
    }
    changes
}

/// A new value of the same size for the ConfigMap or Secret of Deployment `d`.
fn change(fake: &FakeApi, cluster: &Cluster, edited: Edited, d: usize, k: usize) {
    let seed = 1_000_000 + k;
    let (resource, at, data) = match edited {
        Edited::ConfigMap => (
            "configmaps",
            cluster.configmap_of(d),
            json!({CONFIGMAP_KEY: text_of_size(seed, cluster.object_size)}),
        ),
        Edited::Secret => (
            "secrets",
            cluster.secret_of(d),
            json!({SECRET_KEY: secret_value(seed, cluster.object_size)}),
        ),
    };
    fake.merge_patch(resource, &at.namespace, &at.name, json!({"data": data}));
}

/// The first PATCH of the Deployment after request number `cursor`, looked for from just
/// before the debounce window ends (so that looking costs no CPU wavelet could use).
fn wait_for_patch(
    fake: &FakeApi,
    cursor: usize,
    deployment: &ObjectRef,
    window_end: Instant,
) -> Option<Request> {
    let path = format!(
        "/apis/apps/v1/namespaces/{}/deployments/{}",
        deployment.namespace, deployment.name
    );
    sleep(window_end.saturating_duration_since(Instant::now() + EARLY_LOOK));
    let deadline = window_end + Duration::from_secs(10);
    while Instant::now() < deadline {
        let new = fake.requests_since(cursor);
        if let Some(patch) = new
            .into_iter()
            .find(|r| r.method == "PATCH" && r.path == path)
        {
            return Some(patch);
        }
        sleep(POLL);
    }
    None
}

fn milliseconds(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// `count` distinct Deployments spread over all of them (when there are enough).
pub fn spread(deployments: usize, count: usize) -> Vec<usize> {
    (0..count)
        .map(|k| {
            if count <= deployments {
                k * deployments / count
            } else {
                k % deployments
            }
        })
        .collect()
}

/// Namespaces created and deleted (preview environments, CI): what wavelet holds once
/// they are gone.
#[derive(Clone, Debug)]
pub struct ChurnRound {
    pub namespaces: usize,
    pub wall: Duration,
    /// Once the cache is back to its size before the churn and wavelet is idle.
    pub settled: Sample,
    /// `wavelet_cache_objects` by kind then.
    pub cache: Vec<(String, f64)>,
}

/// `wavelet_cache_objects` by kind, e.g. (`kind="config"`, 10000).
pub fn cache_objects(wavelet: &Wavelet) -> Vec<(String, f64)> {
    wavelet.metric("wavelet_cache_objects")
}

/// Round `round` of the churn: `namespaces` namespaces, `live` at a time, each with an
/// opted-in Deployment and the Secret of `size` bytes it references; each Deployment is
/// adopted (its Secret read and hashed) before its namespace is deleted. Then waits until
/// wavelet's cache holds as many ConfigMaps, Secrets and workloads as `before`.
pub fn churn(
    fake: &FakeApi,
    wavelet: &Wavelet,
    round: usize,
    namespaces: usize,
    live: usize,
    size: usize,
    before: &[(String, f64)],
) -> ChurnRound {
    let started = Instant::now();
    let names: Vec<String> = (0..namespaces)
        .map(|n| format!("churn-{round}-{n:04}"))
        .collect();
    for batch in names.chunks(live.max(1)) {
        let mut cursor = fake.request_count();
        fake.apply_all(batch.iter().flat_map(|ns| churn_namespace(ns, size)));
        let mut waiting: HashSet<String> = batch
            .iter()
            .map(|ns| format!("/apis/apps/v1/namespaces/{ns}/deployments/app"))
            .collect();
        while !waiting.is_empty() {
            let new = fake.requests_since(cursor);
            cursor += new.len();
            for patch in new.iter().filter(|r| is_workload_patch(r)) {
                waiting.remove(&patch.path);
            }
            assert!(
                started.elapsed() < PATIENCE,
                "churn: {} Deployments not adopted; wavelet's last lines:\n{}",
                waiting.len(),
                wavelet.log_tail()
            );
            sleep(Duration::from_millis(20));
        }
        for ns in batch {
            fake.delete("namespaces", "", ns);
        }
    }
    // Objects and workloads: an absent-Secret record is what the churn may leave, and is
    // reported, not waited for.
    let counted = |cache: &[(String, f64)]| -> Vec<(String, f64)> {
        cache
            .iter()
            .filter(|(kind, _)| kind == "kind=\"config\"" || kind == "kind=\"workload\"")
            .cloned()
            .collect()
    };
    while counted(&cache_objects(wavelet)) != counted(before) {
        assert!(
            started.elapsed() < PATIENCE,
            "churn: the cache holds {:?}, not {before:?} as before; wavelet's last lines:\n{}",
            cache_objects(wavelet),
            wavelet.log_tail()
        );
        sleep(Duration::from_millis(50));
    }
    let wall = started.elapsed();
    wait_for_quiet(fake, QUIET_AFTER_ADOPTION);
    sleep(SETTLE);
    ChurnRound {
        namespaces,
        wall,
        settled: wavelet.sample(),
        cache: cache_objects(wavelet),
    }
}

/// One cluster measured from start to settled: what the default scenario and every
/// scaling cell do before any change.
pub struct Measured {
    /// Declared before `fake`: wavelet is stopped before the fake goes away.
    pub wavelet: Wavelet,
    pub fake: FakeApi,
    pub load: Duration,
    pub sync: Sync,
    pub adoption: Adoption,
}

pub fn start_and_sync(cluster: &Cluster, debounce: Duration) -> Measured {
    // Over TLS, as wavelet talks to a real API server: the handshakes and the records'
    // encryption are part of what it costs.
    let fake = FakeApi::start_tls();
    let load = cluster.load(&fake);
    let harness_before = Sample::of(std::process::id());
    let wavelet = match cluster.csi_pods_per_deployment {
        Some(_) => Wavelet::start_tls_with(
            &fake.url(),
            debounce,
            &["--enable-csi-integration".to_string()],
        ),
        None => Wavelet::start_tls(&fake.url(), debounce),
    };
    let sync = initial_sync(&fake, &wavelet, harness_before);
    let adoption = adoption(&fake, &wavelet, &sync, cluster.deployments);
    Measured {
        fake,
        wavelet,
        load,
        sync,
        adoption,
    }
}
