//! A shared change on the fake (`WAVELET_BENCH_ONLY=fanout`): one ConfigMap that 50
//! Deployments mount (Reloader's S2), rolled by safe fan-out in waves as it is by default.
//! SPEC §6 asks change → rollout PATCH ≤ 5 ms beyond the debounce on the fake, and for a
//! shared object that is the *first* wave's PATCH. Each change is measured to the first
//! Deployment whose pod template is PATCHed, and to the last (the whole fan-out, which
//! waits between waves for each wave's Pods to be Ready), with the requests it cost.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::calls::{Call, CallCounts, Verb};
use crate::fake::{FakeApi, Request};
use crate::measure::{rolls_out, wait_for_quiet_of, Changes};
use crate::process::Wavelet;
use crate::report::latency_rows;
use crate::scenario::text_of_size;
use crate::table::{ms, percentile, Table};

const NS: &str = "fanout";
const SHARED: &str = "shared";
/// Time for a whole fan-out before the run is abandoned.
const PATIENCE: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(1);
const QUIET_AFTER_CHANGE: Duration = Duration::from_millis(300);

pub struct FanOutFigures {
    pub workloads: usize,
    pub debounce: Duration,
    /// Change → the first template PATCH, minus the debounce window, per change, in ms.
    pub first_ms: Vec<f64>,
    /// Change → the last workload's template PATCH, per change, in ms.
    pub whole_ms: Vec<f64>,
    /// Every request from the first change until the last change's quiet.
    pub calls: CallCounts,
}

fn deployment(d: usize) -> serde_json::Value {
    let name = format!("app-{d:02}");
    let labels = json!({"app": name});
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": NS,
                     "annotations": {"wavelet.dev/update-on-config-change": "true"}},
        "spec": {"replicas": 1, "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels},
                "spec": {"volumes": [{"name": "config", "configMap": {"name": SHARED}}],
                    "containers": [{"name": "app", "image": "nginx:1.27",
                        "volumeMounts": [{"name": "config", "mountPath": "/etc/app"}]}]}}}
    })
}

fn configmap(seed: usize) -> serde_json::Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": SHARED, "namespace": NS},
        "data": {"app.conf": text_of_size(seed, 4096)}
    })
}

fn template_patch(request: &Request) -> Option<&str> {
    let name = request
        .path
        .strip_prefix(&format!("/apis/apps/v1/namespaces/{NS}/deployments/"))?;
    (request.method == "PATCH" && rolls_out(request)).then_some(name)
}

pub fn run(workloads: usize, changes: usize, debounce: Duration) -> FanOutFigures {
    let fake = FakeApi::start_tls();
    fake.apply(configmap(0));
    fake.apply_all((0..workloads).map(deployment));
    let wavelet = Wavelet::start_tls(&fake.url(), debounce);
    let adopted = fake.wait_until(PATIENCE, |f| {
        (0..workloads).all(|d| {
            f.get("deployments", NS, &format!("app-{d:02}"))
                .is_some_and(|o| {
                    o["metadata"]["annotations"]["wavelet.dev/config-hash"].is_string()
                })
        })
    });
    assert!(
        adopted,
        "not every Deployment adopted:\n{}",
        wavelet.log_tail()
    );
    eprintln!("fanout: {workloads} Deployments adopted");
    wait_for_quiet_of(&fake, QUIET_AFTER_CHANGE, not_an_event);
    let start = fake.request_count();
    let (mut first_ms, mut whole_ms) = (Vec::new(), Vec::new());
    for k in 1..=changes {
        let cursor = fake.request_count();
        let changed_at = Instant::now();
        fake.merge_patch(
            "configmaps",
            NS,
            SHARED,
            json!({"data": {"app.conf": text_of_size(k, 4096)}}),
        );
        std::thread::sleep(debounce.saturating_sub(Duration::from_millis(20)));
        let (mut first, mut rolled) = (None, std::collections::HashSet::new());
        let mut patched_at: Vec<Duration> = Vec::new();
        // Only the requests not looked at yet are copied out of the fake.
        let mut looked = cursor;
        let deadline = changed_at + debounce + PATIENCE;
        while rolled.len() < workloads {
            assert!(
                Instant::now() < deadline,
                "change {k}: {} of {workloads} rolled within {PATIENCE:?}:\n{}",
                rolled.len(),
                wavelet.log_tail()
            );
            let new = fake.requests_since(looked);
            looked += new.len();
            for request in new {
                if let Some(name) = template_patch(&request) {
                    let since = request.received.saturating_duration_since(changed_at);
                    first.get_or_insert(since);
                    patched_at.push(since);
                    if rolled.insert(name.to_string()) && rolled.len() == workloads {
                        whole_ms.push(since.as_secs_f64() * 1000.0);
                    }
                }
            }
            std::thread::sleep(POLL);
        }
        let first = first.expect("a first PATCH");
        eprintln!(
            "fanout: change {k} of {changes}: first PATCH after {:.1} ms, the last after {:.0} ms; waves {}",
            first.as_secs_f64() * 1000.0,
            whole_ms.last().copied().unwrap_or_default(),
            waves_seen(&patched_at)
        );
        first_ms.push((first.as_secs_f64() - debounce.as_secs_f64()) * 1000.0);
        wait_for_quiet_of(&fake, QUIET_AFTER_CHANGE, not_an_event);
    }
    let calls = CallCounts::of(&fake.requests_since(start));
    FanOutFigures {
        workloads,
        debounce,
        first_ms,
        whole_ms,
        calls,
    }
}

/// The waves as the PATCHes show them: a gap of more than 20 ms starts a new one; each
/// as `size@start ms`, so a drift shows whether it is in the waits between waves or in
/// the PATCHes of one.
fn waves_seen(patched_at: &[Duration]) -> String {
    let mut patched_at = patched_at.to_vec();
    patched_at.sort();
    let mut waves: Vec<(usize, Duration, Duration)> = Vec::new();
    for at in &patched_at {
        match waves.last_mut() {
            Some((size, _, last)) if at.saturating_sub(*last) <= Duration::from_millis(20) => {
                *size += 1;
                *last = *at;
            }
            _ => waves.push((1, *at, *at)),
        }
    }
    waves
        .iter()
        .map(|(size, start, last)| {
            format!(
                "{size}@{:.0}(+{:.0})",
                start.as_secs_f64() * 1000.0,
                (*last - *start).as_secs_f64() * 1000.0
            )
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Quiet is judged without Events: wavelet paces them (5 a second), and a fan-out of 50
/// workloads says about 100 things.
fn not_an_event(request: &Request) -> bool {
    request.resource() != "events"
}

pub fn print(figures: &FanOutFigures) {
    let n = figures.first_ms.len();
    println!(
        "\n## A shared ConfigMap that {} Deployments mount, against the fake ({n} changes, --debounce {} ms, safe fan-out in waves)\n",
        figures.workloads,
        figures.debounce.as_millis()
    );
    let mut table = Table::new(&["figure", "measured", "target", "ok?"]);
    let first = Changes {
        beyond_debounce_ms: figures.first_ms.clone(),
        calls: CallCounts::default(),
    };
    latency_rows(&mut table, "shared ConfigMap, first wave:", &first);
    let whole = &figures.whole_ms;
    table.figure(
        "change → whole fan-out (the last PATCH): median / p95",
        format!(
            "{} / {}",
            ms(percentile(whole, 50.0)),
            ms(percentile(whole, 95.0))
        ),
        "",
        None,
    );
    let per_change = |count: usize| count as f64 / n.max(1) as f64;
    let patches = figures.calls.get(&Call {
        verb: Verb::Patch,
        resource: "deployments".into(),
    });
    table.figure(
        "requests per change: Deployment PATCHes / wavelet-state writes / all",
        format!(
            "{:.1} / {:.1} / {:.1}",
            per_change(patches),
            per_change(figures.calls.of_verb(Verb::Put)),
            per_change(figures.calls.total())
        ),
        &format!("{} PATCHes", figures.workloads),
        None,
    );
    table.print();
}
