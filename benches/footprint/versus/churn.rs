//! The churn case of issue 34 item 5, on a real API server: rounds of namespaces (each
//! with 8 Secrets and an opted-in Deployment using all of them) created, their Secrets
//! deleted, then the namespaces deleted. Per round: wavelet's RSS before and after (once
//! the namespaces are gone and it is idle again), the growth, the time until all of the
//! round's Deployments were adopted, and what it still sent into a namespace after that
//! namespace's DELETE (from the API server's audit log): Events, and work (every other
//! request) of objects that are gone. Round 2 should grow by ≤ 10% of round 1.
//!
//! Run: `WAVELET_BENCH_REAL=/work/k8s-bin WAVELET_BENCH_ONLY=churn cargo bench --bench
//! footprint`; `WAVELET_BENCH_CHURN_NAMESPACES` (default 300), `WAVELET_BENCH_CHURN_ROUNDS`
//! (default 2), `WAVELET_BENCH_CHURN_SETTLE` (seconds after the namespaces are gone,
//! default 30).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime};

use serde_json::{json, Value};
use wavelet::client::Client;

use crate::calls::{CallCounts, Verb};
use crate::process::Sample;

use super::controllers::{http_get, Controller, Start, Which};
use super::plane::Plane;

/// Secrets per namespace, all used by its one Deployment.
const SECRETS: usize = 8;
const SECRET_KEY: &str = "credentials";

/// One round's figures.
pub struct Round {
    pub round: usize,
    pub before: Sample,
    pub after: Sample,
    /// From the round's first POST until every Deployment of the round was adopted
    /// (`None`: not within the timeout; then how many were).
    pub adopted_after: Result<Duration, usize>,
    /// From the namespaces' DELETEs until they were all gone.
    pub gone_after: Duration,
    /// Requests into the round's namespaces after their DELETE.
    pub into_deleted: CallCounts,
    /// `wavelet_events_dropped_total` by reason, over the round.
    pub events_dropped: Vec<(String, f64)>,
}

impl Round {
    pub fn growth_kib(&self) -> i64 {
        self.after.rss_kib as i64 - self.before.rss_kib as i64
    }
}

pub struct ChurnFigures {
    pub namespaces: usize,
    pub settle: Duration,
    pub rounds: Vec<Round>,
}

fn progress(message: &str) {
    eprintln!("churn (real): {message}");
}

fn number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name}={v:?} is not a number"))
        })
        .unwrap_or(default)
}

fn namespace(round: usize, i: usize) -> String {
    format!("churn-{round}-{i:03}")
}

fn secret(ns: &str, s: usize) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": format!("secret-{s}"), "namespace": ns},
        "stringData": {SECRET_KEY: format!("value {s} of {ns}")}})
}

/// The namespace's Deployment: every Secret as an env `secretKeyRef`; no replicas.
fn deployment(ns: &str) -> Value {
    let labels = json!({"app": "app"});
    let env: Vec<Value> = (0..SECRETS)
        .map(|s| {
            json!({"name": format!("SECRET_{s}"), "valueFrom": {"secretKeyRef": {
                "name": format!("secret-{s}"), "key": SECRET_KEY}}})
        })
        .collect();
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "app", "namespace": ns,
            "annotations": Value::Object(Which::Wavelet.opt_in().annotations())},
        "spec": {"replicas": 0, "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels},
                "spec": {"containers": [{"name": "app", "image": "nginx:1.27", "env": env}]}}}})
}

/// Runs `job(i)` for `0..n` on six threads.
fn in_parallel(n: usize, job: impl Fn(usize) + Sync) {
    let next = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..6 {
            let (next, job) = (&next, &job);
            scope.spawn(move || loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    return;
                }
                job(i);
            });
        }
    });
}

fn post(client: &Client, path: &str, body: &Value) {
    match client.post::<serde::de::IgnoredAny>(path, body) {
        Ok(_) => {}
        Err(e) if e.status().is_some_and(|s| s.is_conflict()) => {}
        Err(e) => panic!("POST {path}: {e}"),
    }
}

fn delete(client: &Client, path: &str) {
    match client.delete::<serde::de::IgnoredAny>(path, None) {
        Ok(_) => {}
        Err(e) if e.status().is_some_and(|s| s.is_not_found()) => {}
        Err(e) => panic!("DELETE {path}: {e}"),
    }
}

/// wavelet's `wavelet_events_dropped_total`, by reason.
fn events_dropped(controller: &Controller) -> HashMap<String, f64> {
    let text = controller
        .metrics_addr()
        .and_then(|a| http_get(&a, "/metrics"))
        .unwrap_or_default();
    text.lines()
        .filter_map(|l| l.strip_prefix("wavelet_events_dropped_total{reason=\""))
        .filter_map(|rest| {
            let (reason, value) = rest.split_once("\"} ")?;
            Some((reason.to_string(), value.trim().parse().ok()?))
        })
        .collect()
}

/// Waits until its CPU stays idle (≤ 10 ms) for a second; the sample at that second's start.
fn idle_sample(controller: &Controller) -> Sample {
    loop {
        let before = controller.sample();
        std::thread::sleep(Duration::from_secs(1));
        if controller.sample().cpu_seconds - before.cpu_seconds <= 0.011 {
            return before;
        }
    }
}

fn round(
    plane: &Plane,
    controller: &Controller,
    round: usize,
    n: usize,
    settle: Duration,
) -> Round {
    let client = &plane.admin;
    let before = idle_sample(controller);
    let dropped_before = events_dropped(controller);
    progress(&format!(
        "round {round}: RSS before {:.1} MiB; creating {n} namespaces",
        before.rss_kib as f64 / 1024.0
    ));
    let (since, started) = (SystemTime::now(), Instant::now());
    in_parallel(n, |i| {
        let ns = namespace(round, i);
        post(
            client,
            "/api/v1/namespaces",
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
        );
        for s in 0..SECRETS {
            post(
                client,
                &format!("/api/v1/namespaces/{ns}/secrets"),
                &secret(&ns, s),
            );
        }
        post(
            client,
            &format!("/apis/apps/v1/namespaces/{ns}/deployments"),
            &deployment(&ns),
        );
    });
    let deadline = Instant::now() + Duration::from_secs(600);
    let adopted_after = loop {
        let written = plane.workloads_written(Which::Wavelet, since);
        if written >= n {
            break Ok(started.elapsed());
        }
        if Instant::now() >= deadline {
            break Err(written);
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    progress(&format!(
        "round {round}: adopted: {adopted_after:?}; deleting the Secrets"
    ));
    in_parallel(n * SECRETS, |i| {
        let ns = namespace(round, i / SECRETS);
        delete(
            client,
            &format!("/api/v1/namespaces/{ns}/secrets/secret-{}", i % SECRETS),
        );
    });
    progress(&format!("round {round}: deleting the namespaces"));
    let deleted: std::sync::Mutex<HashMap<String, SystemTime>> = Default::default();
    let deleting = Instant::now();
    in_parallel(n, |i| {
        let ns = namespace(round, i);
        deleted
            .lock()
            .unwrap()
            .insert(ns.clone(), SystemTime::now());
        delete(client, &format!("/api/v1/namespaces/{ns}"));
    });
    let deleted = deleted.into_inner().unwrap();
    let deadline = Instant::now() + Duration::from_secs(900);
    for i in 0..n {
        let path = format!("/api/v1/namespaces/{}", namespace(round, i));
        while client.get::<serde::de::IgnoredAny>(&path).is_ok() {
            assert!(Instant::now() < deadline, "{path} not gone in 900 s");
            std::thread::sleep(Duration::from_millis(500));
        }
    }
    let gone_after = deleting.elapsed();
    progress(&format!(
        "round {round}: namespaces gone after {gone_after:?}; settling {settle:?}"
    ));
    std::thread::sleep(settle);
    let after = idle_sample(controller);
    let dropped_after = events_dropped(controller);
    let mut events_dropped: Vec<(String, f64)> = dropped_after
        .iter()
        .map(|(r, v)| (r.clone(), v - dropped_before.get(r).copied().unwrap_or(0.0)))
        .collect();
    events_dropped.sort_by(|a, b| a.0.cmp(&b.0));
    let into_deleted = plane.calls_into_deleted(Which::Wavelet, &deleted);
    let figures = Round {
        round,
        before,
        after,
        adopted_after,
        gone_after,
        into_deleted,
        events_dropped,
    };
    progress(&format!(
        "round {round}: RSS after {:.1} MiB, growth {:+.1} MiB",
        figures.after.rss_kib as f64 / 1024.0,
        figures.growth_kib() as f64 / 1024.0
    ));
    figures
}

pub fn run(plane: &Plane) -> ChurnFigures {
    let namespaces = number("WAVELET_BENCH_CHURN_NAMESPACES", 300);
    let rounds = number("WAVELET_BENCH_CHURN_ROUNDS", 2);
    let settle = Duration::from_secs(number("WAVELET_BENCH_CHURN_SETTLE", 30) as u64);
    let mut controller = Controller::start(Which::Wavelet, plane, Start::default());
    controller.wait_readyz(Duration::from_secs(300));
    let rounds = (1..=rounds)
        .map(|r| round(plane, &controller, r, namespaces, settle))
        .collect();
    controller.finish();
    ChurnFigures {
        namespaces,
        settle,
        rounds,
    }
}

pub fn print(f: &ChurnFigures) {
    let mib = |kib: i64| kib as f64 / 1024.0;
    println!("\n## Churn on a real kube-apiserver (issue 34 item 5)\n");
    println!(
        "{} namespaces a round, each with {SECRETS} Secrets and an opted-in Deployment using them: created, Secrets deleted, namespaces deleted; measured {} s after the namespaces are gone, once wavelet's CPU is idle for 1 s\n",
        f.namespaces,
        f.settle.as_secs()
    );
    println!("| round | RSS before | RSS after | growth | all adopted after | namespaces gone after | Events POSTed into deleted namespaces (refused: code) | other requests into deleted namespaces | Events dropped (wavelet) |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for r in &f.rounds {
        let adopted = match r.adopted_after {
            Ok(d) => format!("{:.1} s", d.as_secs_f64()),
            Err(n) => format!("incomplete ({n} of {})", f.namespaces),
        };
        let events: Vec<String> = r
            .into_deleted
            .calls()
            .filter(|c| c.verb == Verb::Post && c.resource.starts_with("events"))
            .map(|c| format!("{}: {}", c.resource, r.into_deleted.get(c)))
            .collect();
        let others: Vec<String> = r
            .into_deleted
            .calls()
            .filter(|c| !(c.verb == Verb::Post && c.resource.starts_with("events")))
            .map(|c| format!("{c}: {}", r.into_deleted.get(c)))
            .collect();
        let dropped: Vec<String> = r
            .events_dropped
            .iter()
            .filter(|(_, v)| *v > 0.0)
            .map(|(reason, v)| format!("{reason}: {v}"))
            .collect();
        println!(
            "| {} | {:.1} MiB | {:.1} MiB | {:+.2} MiB | {adopted} | {:.1} s | {} | {} | {} |",
            r.round,
            mib(r.before.rss_kib as i64),
            mib(r.after.rss_kib as i64),
            mib(r.growth_kib()),
            r.gone_after.as_secs_f64(),
            if events.is_empty() {
                "0".into()
            } else {
                events.join(", ")
            },
            if others.is_empty() {
                "0".into()
            } else {
                others.join(", ")
            },
            if dropped.is_empty() {
                "0".into()
            } else {
                dropped.join(", ")
            },
        );
    }
    if let [first, second, ..] = f.rounds.as_slice() {
        let (g1, g2) = (first.growth_kib(), second.growth_kib());
        let met = g1 > 0 && (g2 as f64) <= 0.10 * g1 as f64 || g1 <= 0 && g2 <= 0;
        println!(
            "\nround 2 grew {:+.2} MiB against round 1's {:+.2} MiB: {} (target ≤ 10% of round 1)",
            mib(g2),
            mib(g1),
            if met { "met" } else { "NOT met" }
        );
    }
}
