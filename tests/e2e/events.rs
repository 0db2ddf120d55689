//! Events on the real API server (issue 33): every rollout leaves a record however often
//! its ConfigMap changes (rollout Events are aggregated, never spam-filtered), and the
//! Warnings queued for a namespace that is deleted are dropped at once instead of being
//! posted one by one and refused.

use std::time::Duration;

use serde_json::{json, Value};

use crate::kube::{configmap, hashes, mounts_configmap, opted_in, workload, Kube};
use crate::process::Wavelet;
use crate::Ctx;

const LONG: Duration = Duration::from_secs(120);
const FAST: &[&str] = &[
    "--debounce",
    "300ms",
    "--min-rollout-interval",
    "0s",
    "--max-rollouts-per-second",
    "50",
];

/// The sum of the counts of the `reason` Events about `name` in `ns`.
fn counted(kube: &Kube, ns: &str, name: &str, reason: &str) -> u64 {
    kube.list("Event", ns)
        .iter()
        .filter(|e| e["involvedObject"]["name"] == name && e["reason"] == reason)
        .map(|e| e["count"].as_u64().unwrap_or(1))
        .sum()
}

/// A Deployment of no replicas (its rollouts patch the template, no Pod needed).
fn deployment(ns: &str, name: &str, configmap: &str) -> Value {
    let mut d = workload(
        "Deployment",
        ns,
        name,
        opted_in(),
        mounts_configmap(configmap),
    );
    d["spec"]["replicas"] = json!(0);
    d
}

/// A ConfigMap edited 30 times rolls its Deployment 30 times, and the Deployment's
/// `ConfigChanged` Events count 30 (the spam filter let 25 through before).
pub fn every_rollout_recorded(ctx: &Ctx) {
    const EDITS: u64 = 30;
    let kube = &ctx.kube;
    let ns = "e2e-events-rollouts";
    kube.create_namespace(ns);
    kube.create(configmap(ns, "cfg", json!({"k": "0"})));
    kube.create(deployment(ns, "web", "cfg"));
    let mut args = vec!["--namespaces", ns];
    args.extend(FAST);
    let wavelet = Wavelet::run(&ctx.cluster, &args);
    let template_hash = || {
        kube.get("Deployment", ns, "web")
            .and_then(|d| hashes(&d).1)
            .unwrap_or_default()
    };
    kube.until(LONG, "web adopted", || !template_hash().is_empty());
    for n in 1..=EDITS {
        let before = kube.get("Deployment", ns, "web").unwrap();
        let before = hashes(&before).0;
        kube.merge_patch(
            "ConfigMap",
            ns,
            "cfg",
            json!({"data": {"k": n.to_string()}}),
        );
        kube.until(LONG, &format!("rollout {n}"), || {
            kube.get("Deployment", ns, "web")
                .is_some_and(|d| hashes(&d).0.is_some() && hashes(&d).0 != before)
        });
    }
    kube.until(LONG, "a ConfigChanged occurrence per rollout", || {
        counted(kube, ns, "web", "ConfigChanged") >= EDITS
    });
    assert_eq!(
        counted(kube, ns, "web", "ConfigChanged"),
        EDITS,
        "{}",
        wavelet.output()
    );
}

/// 40 Deployments of a namespace each miss a ConfigMap of their own: 40 ConfigMissing
/// Warnings (and their summaries) wait for the Event writer (5 requests a second). The
/// namespace is deleted: its queued Events are dropped at the first refusal (403 while it
/// is terminating, 404 once gone) or when its deletion is seen, so a Warning said after
/// it, in another namespace, is written without a refusal per queued series before it.
pub fn deleted_namespace_events_dropped(ctx: &Ctx) {
    const HELD: usize = 40;
    let kube = &ctx.kube;
    let (doomed, other) = ("e2e-events-doomed", "e2e-events-other");
    kube.create_namespace(doomed);
    kube.create_namespace(other);
    for n in 0..HELD {
        kube.create(deployment(
            doomed,
            &format!("w-{n}"),
            &format!("missing-{n}"),
        ));
    }
    let wavelet = Wavelet::run(
        &ctx.cluster,
        &[&["--namespaces", &format!("{doomed},{other}")][..], FAST].concat(),
    );
    let said = |w: &Wavelet| {
        w.output()
            .lines()
            .filter(|l| l.contains(&format!("deployment {doomed}/w-")) && l.contains("Not rolling"))
            .count()
    };
    kube.until(LONG, "every Warning said", || said(&wavelet) >= HELD);
    kube.delete_namespace(doomed);
    kube.create(deployment(other, "after", "after-missing"));
    kube.until(LONG * 2, "the later Warning written", || {
        counted(kube, other, "after", "ConfigMissing") > 0
    });
    let refused = wavelet
        .output()
        .lines()
        .filter(|l| l.contains("could not record") && l.contains(&format!(" {doomed}/")))
        .count();
    assert!(
        refused <= 2,
        "{refused} Events refused for the deleted namespace:\n{}",
        wavelet.output()
    );
}
