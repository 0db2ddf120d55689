//! Delete mode in waves against the real API server, ReplicaSet controller and eviction
//! API (issue 32.11): ConfigMap `cfg`'s podDeleteMatch selects the Pods of Deployments a,
//! b and c. A good change replaces a's Pods first, b's only once a's new Pods are Ready,
//! then c's; a bad change (the kubelet stand-in keeps Pods started on it unready) replaces
//! a's Pods only and holds b and c (Event, `status` HELD); the fix, a newer change,
//! replaces all of them again in waves.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::kube::{configmap, mounts_configmap, workload, Kube};
use crate::kubelet::BAD_VALUE;
use crate::process::{one_shot, Wavelet};
use crate::{Ctx, Scenario};

pub const ALL: &[Scenario] = &[Scenario {
    name: "delete_mode_in_waves_then_hold_then_fix",
    run: waves_hold_fix,
    serial: false,
}];

const LONG: Duration = Duration::from_secs(120);
const NS: &str = "e2e-delete-waves";
const NAMES: [&str; 3] = ["a", "b", "c"];

/// One Pod as the test looks at it.
#[derive(Debug, Clone)]
struct Seen {
    uid: String,
    live: bool,
    ready: bool,
}

/// The Pods of each Deployment (by the `app` label), from one LIST.
fn pods(kube: &Kube) -> BTreeMap<String, Vec<Seen>> {
    let mut out: BTreeMap<String, Vec<Seen>> = BTreeMap::new();
    for p in kube.list("Pod", NS) {
        let app = p["metadata"]["labels"]["app"].as_str().unwrap_or_default();
        let ready = p["status"]["conditions"].as_array().is_some_and(|c| {
            c.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        });
        out.entry(app.to_string()).or_default().push(Seen {
            uid: p["metadata"]["uid"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            live: p["metadata"]["deletionTimestamp"].is_null(),
            ready,
        });
    }
    out
}

/// The UIDs of every live Pod.
fn live_uids(all: &BTreeMap<String, Vec<Seen>>) -> BTreeSet<String> {
    all.values()
        .flatten()
        .filter(|p| p.live)
        .map(|p| p.uid.clone())
        .collect()
}

/// Whether one of `app`'s two Pods from `before` was replaced (gone or terminating).
fn started(all: &BTreeMap<String, Vec<Seen>>, before: &BTreeSet<String>, app: &str) -> bool {
    before_of(before, all, app) < 2
}

/// How many of `before`'s Pods `app` still has live.
fn before_of(before: &BTreeSet<String>, all: &BTreeMap<String, Vec<Seen>>, app: &str) -> usize {
    all.get(app)
        .into_iter()
        .flatten()
        .filter(|p| p.live && before.contains(&p.uid))
        .count()
}

/// `app` has two live Pods, none from `before`, all Ready.
fn replaced_and_ready(
    all: &BTreeMap<String, Vec<Seen>>,
    before: &BTreeSet<String>,
    app: &str,
) -> bool {
    let live: Vec<&Seen> = all
        .get(app)
        .into_iter()
        .flatten()
        .filter(|p| p.live)
        .collect();
    live.len() == 2 && live.iter().all(|p| p.ready && !before.contains(&p.uid))
}

fn events(kube: &Kube, about: &str, reason: &str) -> Vec<String> {
    let list: Value = kube
        .client
        .get(&format!("/api/v1/namespaces/{NS}/events"))
        .expect("listing events");
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["involvedObject"]["name"] == about && e["reason"] == reason)
        .map(|e| e["message"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn ledger(kube: &Kube) -> Option<String> {
    kube.get("ConfigMap", NS, "wavelet-state")?["data"][&format!("configmap.{NS}.cfg")]
        .as_str()
        .map(String::from)
}

fn set_cfg(kube: &Kube, value: &str) {
    kube.merge_patch("ConfigMap", NS, "cfg", json!({"data": {"k": value}}));
}

/// Watches a change's waves until every Deployment's Pods are replaced and Ready,
/// checking at every look that b started only after a was Ready again, and c after b.
fn watch_waves(kube: &Kube, before: &BTreeSet<String>) {
    let deadline = Instant::now() + LONG;
    loop {
        let all = pods(kube);
        for (earlier, later) in [("a", "b"), ("b", "c"), ("a", "c")] {
            if started(&all, before, later) {
                assert!(
                    replaced_and_ready(&all, before, earlier),
                    "{later}'s Pods were replaced before {earlier}'s were Ready again: {all:#?}"
                );
            }
        }
        if NAMES.iter().all(|n| replaced_and_ready(&all, before, n))
            && ledger(kube).is_some_and(|e| !e.contains(" replacing"))
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the waves did not finish: {all:#?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn waves_hold_fix(ctx: &Ctx) {
    let kube = &ctx.kube;
    kube.create_namespace(NS);
    let mut cfg = configmap(NS, "cfg", json!({"k": "1"}));
    cfg["metadata"]["annotations"] = json!({"magalix.com/podDeleteMatch": "tier=web"});
    kube.create(cfg);
    for name in NAMES {
        let mut d = workload("Deployment", NS, name, json!({}), mounts_configmap("cfg"));
        d["spec"]["template"]["metadata"]["labels"]["tier"] = json!("web");
        kube.create(d);
    }
    kube.until(LONG, "six Ready Pods", || {
        let all = pods(kube);
        NAMES.iter().all(|n| {
            all.get(*n)
                .is_some_and(|p| p.iter().filter(|p| p.live && p.ready).count() == 2)
        })
    });
    let flags = [
        "--namespaces",
        NS,
        "--state-namespace",
        NS,
        "--debounce",
        "300ms",
        "--wave-size",
        "1",
        "--rollout-timeout",
        "15s",
    ];
    let wavelet = Wavelet::run(&ctx.cluster, &flags);
    kube.until(LONG, "cfg first seen", || ledger(kube).is_some());

    // A good change: a, then b, then c, each once the one before is Ready again.
    let before = live_uids(&pods(kube));
    set_cfg(kube, "2");
    watch_waves(kube, &before);
    kube.until(LONG, "FanOutComplete", || {
        !events(kube, "cfg", "FanOutComplete").is_empty()
    });
    assert_eq!(events(kube, "cfg", "FanOutWave").len(), 3);

    // A bad change: a's new Pods never get Ready; b and c are held.
    let good = live_uids(&pods(kube));
    set_cfg(kube, &format!("{BAD_VALUE}: the application cannot start"));
    kube.until(LONG, "FanOutHeld on cfg", || {
        !events(kube, "cfg", "FanOutHeld").is_empty()
    });
    let held = events(kube, "cfg", "FanOutHeld").remove(0);
    assert!(
        held.contains(&format!("deployment {NS}/a"))
            && held.contains("--rollout-timeout")
            && held.contains(&format!("wavelet resume -n {NS} configmap/cfg")),
        "{held}"
    );
    let all = pods(kube);
    for name in ["b", "c"] {
        assert_eq!(
            before_of(&good, &all, name),
            2,
            "{name} was replaced: {all:#?}"
        );
    }
    assert_eq!(before_of(&good, &all, "a"), 0, "a was replaced");
    let (_, table) = one_shot(&ctx.cluster, &["status", "-n", NS, "--state-namespace", NS]);
    assert!(
        table.contains(&format!("HELD: deployment {NS}/a")),
        "{table}"
    );
    assert!(wavelet.metric("wavelet_fanouts_held ") == 1.0);

    // The fix: a newer change replaces them all again, in waves.
    let before = live_uids(&pods(kube));
    set_cfg(kube, "3");
    watch_waves(kube, &before);
    kube.until(LONG, "the hold gone", || {
        wavelet.metric("wavelet_fanouts_held ") == 0.0
    });
    assert!(!wavelet.output().contains(" 403 "), "{}", wavelet.output());
}
