//! Delete mode in waves (issue 32.11) against the fake API server: one delete-mode
//! ConfigMap whose selector matches the Pods of Deployments a, b and c replaces a's Pods
//! first and the others only once a's are Ready again; Pods that do not get Ready within
//! `--rollout-timeout` hold the rest (Event, `status` HELD, metrics, an alert) until
//! `wavelet resume`;
//! a wavelet killed mid-wave goes on without replacing a Pod twice; `--fan-out at-once`
//! replaces every Pod at once as before.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Output;
use std::time::Duration;

use serde_json::json;

use crate::fake::FakeApi;
use crate::util::*;

const NS: &str = "default";
const MATCH: &str = "magalix.com/podDeleteMatch";
const NAMES: [&str; 3] = ["a", "b", "c"];
const FANOUT_KEY: &str = "fanout.configmap.default.cfg";
const LEDGER_KEY: &str = "configmap.default.cfg";

/// Deployments a, b, c (2 Pods each, labelled tier=web) and ConfigMap `cfg` whose
/// podDeleteMatch selects them all.
fn cluster() -> FakeApi {
    let fake = FakeApi::start();
    for name in NAMES {
        let labels = json!({"app": name, "tier": "web"});
        fake.apply(json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name, "namespace": NS},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "app", "image": "nginx"}]}},
            }
        }));
    }
    let mut cfg = configmap(NS, "cfg", &[("color", "blue")]);
    cfg["metadata"]["annotations"] = json!({MATCH: "tier=web"});
    fake.apply(cfg);
    fake
}

fn state_entry(fake: &FakeApi, key: &str) -> Option<String> {
    fake.get("configmaps", NS, "wavelet-state")
        .and_then(|s| s["data"][key].as_str().map(String::from))
}

/// Starts wavelet and waits until it recorded `cfg` at first sight.
fn start(fake: &FakeApi, extra: &[&str]) -> Wavelet {
    let mut args = FAST.to_vec();
    args.extend_from_slice(extra);
    let wavelet = Wavelet::start(fake, &args);
    eventually(fake, &wavelet, "cfg first seen", |f| {
        state_entry(f, LEDGER_KEY).is_some()
    });
    wavelet
}

fn change(fake: &FakeApi) -> String {
    fake.merge_patch("configmaps", NS, "cfg", json!({"data": {"color": "green"}}));
    let json = fake.get("configmaps", NS, "cfg").unwrap();
    let object = wavelet::objects::ConfigObject::configmap(json).unwrap();
    wavelet::model::hash::data_hash(object.digests(), None)
}

/// The Deployment a Pod name belongs to (`a-<hash>-<random>` → `a`).
fn deployment_of(pod: &str) -> String {
    pod.split('-').next().unwrap_or_default().to_string()
}

/// Names of the live Pods of each Deployment.
fn live(fake: &FakeApi) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for pod in fake.pods(NS) {
        if pod["metadata"]["deletionTimestamp"].is_null() {
            let name = pod["metadata"]["name"].as_str().unwrap_or_default();
            out.entry(deployment_of(name))
                .or_default()
                .insert(name.to_string());
        }
    }
    out
}

/// The Pods evicted so far, in order.
fn evicted(fake: &FakeApi) -> Vec<String> {
    pod_replacements(fake)
        .into_iter()
        .map(|(_, pod, _)| pod)
        .collect()
}

fn evicted_of(fake: &FakeApi, deployment: &str) -> usize {
    evicted(fake)
        .iter()
        .filter(|p| deployment_of(p) == deployment)
        .count()
}

fn events(fake: &FakeApi, reason: &str) -> Vec<String> {
    fake.events_for(NS, "cfg")
        .iter()
        .filter(|e| e["reason"] == reason)
        .map(|e| e["message"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// A one-shot `wavelet ARGS --server <fake>`: exit code and stdout.
fn one_shot(fake: &FakeApi, args: &[&str]) -> (Option<i32>, String) {
    let Output { status, stdout, .. } = wavelet_command()
        .args(args)
        .args(["--server", &fake.url()])
        .env_clear()
        .output()
        .expect("running wavelet");
    (status.code(), String::from_utf8_lossy(&stdout).into_owned())
}

/// The Pods made Ready from now on; every Pod of before replaced once, a's, then b's, then
/// c's (`--wave-size 25%` of 3: one workload a wave), and the ledger at `hash`.
fn pods_ready_then_each_replaced_once_in_waves(
    fake: &FakeApi,
    wavelet: &Wavelet,
    hash: &str,
    before: &BTreeMap<String, BTreeSet<String>>,
) {
    fake.set_ready_delay(Duration::ZERO);
    fake.make_pending_pods_ready();
    eventually(fake, wavelet, "every Pod replaced", |f| {
        state_entry(f, LEDGER_KEY).as_deref() == Some(hash)
    });
    assert_each_replaced_once(fake, before);
    let order: Vec<String> = evicted(fake).iter().map(|p| deployment_of(p)).collect();
    assert_eq!(order, ["a", "a", "b", "b", "c", "c"], "{order:?}");
}

/// Every Pod replaced exactly once, each one from before the change.
fn assert_each_replaced_once(fake: &FakeApi, before: &BTreeMap<String, BTreeSet<String>>) {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for pod in evicted(fake) {
        *counts.entry(pod).or_insert(0) += 1;
    }
    let old: BTreeSet<String> = before.values().flatten().cloned().collect();
    assert_eq!(
        counts.keys().cloned().collect::<BTreeSet<_>>(),
        old,
        "exactly the Pods from before the change"
    );
    assert!(counts.values().all(|n| *n == 1), "{counts:?}");
}

#[test]
fn the_first_workloads_pods_are_replaced_first_and_the_rest_once_they_are_ready_again() {
    let fake = cluster();
    let wavelet = start(&fake, &[]);
    let before = live(&fake);
    assert_eq!(before.values().map(BTreeSet::len).sum::<usize>(), 6);
    // a's successors stay Pending until the test lets them run.
    fake.set_ready_delay(Duration::from_secs(600));
    let hash = change(&fake);
    eventually(&fake, &wavelet, "a's Pods replaced, wave 1 told", |f| {
        evicted_of(f, "a") == 2 && !events(f, "FanOutWave").is_empty()
    });
    let wave = events(&fake, "FanOutWave").remove(0);
    assert!(
        wave.contains("wave 1 replaces the 2 Pod(s) of deployment default/a"),
        "{wave}"
    );
    assert!(
        state_entry(&fake, FANOUT_KEY)
            .unwrap()
            .contains("waves=deployments.apps/default/a"),
        "{:?}",
        state_entry(&fake, FANOUT_KEY)
    );
    // A reconcile that found a's new Pods not Ready is over: nothing more was replaced.
    let mark = wavelet.log_mark();
    wavelet.wait_for_log_after(mark, "configmap default/cfg", "delete mode: InProgress");
    assert_eq!(
        (evicted_of(&fake, "b"), evicted_of(&fake, "c")),
        (0, 0),
        "b and c wait for a:\n{}",
        wavelet.output()
    );

    pods_ready_then_each_replaced_once_in_waves(&fake, &wavelet, &hash, &before);
    assert_eq!(state_entry(&fake, FANOUT_KEY), None, "the record goes");
    let complete = events(&fake, "FanOutComplete");
    assert!(
        complete.len() == 1 && complete[0].contains("in 3 wave(s)"),
        "{complete:?}"
    );
}

#[test]
fn pods_not_ready_within_the_rollout_timeout_hold_the_rest_until_wavelet_resume() {
    let fake = cluster();
    let wavelet = start(&fake, &["--rollout-timeout", "2s"]);
    let before = live(&fake);
    fake.set_ready_delay(Duration::from_secs(600));
    let hash = change(&fake);
    eventually(&fake, &wavelet, "the hold", |f| {
        !events(f, "FanOutHeld").is_empty()
    });
    let held = events(&fake, "FanOutHeld").remove(0);
    assert!(
        held.contains("held after wave 1: deployment default/a")
            && held.contains("--rollout-timeout")
            && held.contains("0 of 2 replaced Pods Ready")
            && held.contains("The Pods of 2 workload(s) matching tier=web are not replaced")
            && held.contains("wavelet resume -n default configmap/cfg"),
        "{held}"
    );
    assert!(state_entry(&fake, FANOUT_KEY)
        .unwrap()
        .contains(" held=deployments.apps/default/a reason="));
    assert_eq!(metric(&wavelet, "wavelet_fanouts_held", ""), 1.0);
    assert_eq!(metric(&wavelet, "wavelet_fanouts_halted_total", ""), 1.0);
    let (_, table) = one_shot(&fake, &["status", "-n", NS]);
    assert!(
        table.lines().any(
            |l| l.contains("configmap default/cfg") && l.contains("HELD: deployment default/a")
        ),
        "{table}"
    );
    // Held: a reconcile after the hold replaced nothing more.
    let mark = wavelet.log_mark();
    wavelet.wait_for_log_after(mark, "configmap default/cfg", "delete mode: Held");
    assert_eq!(
        (
            evicted_of(&fake, "a"),
            evicted_of(&fake, "b"),
            evicted_of(&fake, "c")
        ),
        (2, 0, 0)
    );

    fake.set_ready_delay(Duration::ZERO);
    let (code, out) = one_shot(&fake, &["resume", "-n", NS, "configmap/cfg"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("resumed past deployment default/a"), "{out}");
    eventually(&fake, &wavelet, "b's and c's Pods replaced", |f| {
        state_entry(f, LEDGER_KEY).as_deref() == Some(hash.as_str())
    });
    assert_each_replaced_once(&fake, &before);
    wait_for_metric(&wavelet, "wavelet_fanouts_held", "", |v| v == 0.0);
}

#[test]
fn wavelet_killed_mid_wave_goes_on_without_replacing_a_pod_twice() {
    let fake = cluster();
    let wavelet = start(&fake, &[]);
    let before = live(&fake);
    fake.set_ready_delay(Duration::from_secs(600));
    let hash = change(&fake);
    eventually(&fake, &wavelet, "a's Pods replaced", |f| {
        evicted_of(f, "a") == 2
    });
    wavelet.kill();
    assert!(state_entry(&fake, LEDGER_KEY)
        .unwrap()
        .contains(" replacing since="));

    let wavelet = Wavelet::start(&fake, FAST);
    // The new wavelet waits for a as the last one did.
    let mark = wavelet.log_mark();
    wavelet.wait_for_log_after(mark, "configmap default/cfg", "delete mode: Started");
    assert_eq!((evicted_of(&fake, "b"), evicted_of(&fake, "c")), (0, 0));
    pods_ready_then_each_replaced_once_in_waves(&fake, &wavelet, &hash, &before);
}

#[test]
fn at_once_replaces_every_matching_pod_together_as_before() {
    let fake = cluster();
    let wavelet = start(&fake, &["--fan-out", "at-once"]);
    let before = live(&fake);
    fake.set_ready_delay(Duration::from_secs(600));
    let hash = change(&fake);
    eventually(&fake, &wavelet, "every Pod replaced", |f| {
        state_entry(f, LEDGER_KEY).as_deref() == Some(hash.as_str())
    });
    assert_each_replaced_once(&fake, &before);
    assert!(events(&fake, "FanOutWave").is_empty());
    assert_eq!(state_entry(&fake, FANOUT_KEY), None);
}

#[test]
fn a_hold_reaches_the_alert_sink_as_a_fan_outs_does() {
    let receiver = crate::reloader_switch::Receiver::start(false, &[], false);
    let fake = cluster();
    let url = receiver.url();
    let wavelet = start(
        &fake,
        &[
            "--rollout-timeout",
            "2s",
            "--alert-sink",
            "slack",
            "--alert-webhook-url",
            &url,
        ],
    );
    fake.set_ready_delay(Duration::from_secs(600));
    change(&fake);
    eventually(&fake, &wavelet, "the hold", |f| {
        !events(f, "FanOutHeld").is_empty()
    });
    eventually(&fake, &wavelet, "the alert", |_| {
        !receiver.requests().is_empty()
    });
    let body = receiver.requests()[0].body_json();
    let text = body["attachments"][0]["text"].as_str().unwrap_or_default();
    assert!(
        text.starts_with("wavelet held the fan-out of change *")
            && text.contains("in *cfg* of type *CONFIGMAP* in namespace *default*")
            && text.contains("*deployment default/a* failed")
            && text.contains("`wavelet resume -n default configmap/cfg`"),
        "{text}"
    );
    assert!(
        !receiver.requests()[0].body.contains("green"),
        "a value in an alert"
    );
}

#[test]
fn a_canary_workloads_pods_go_first() {
    let fake = cluster();
    fake.merge_patch(
        "deployments",
        NS,
        "c",
        // Opted in to hash mode: wavelet watches it, so it knows its annotations.
        json!({"metadata": {"annotations": {
            "wavelet.dev/canary": "true",
            "wavelet.dev/update-on-config-change": "true"
        }}}),
    );
    let wavelet = start(&fake, &[]);
    change(&fake);
    // Nothing here holds wave 2 back, so its Event may be there as soon as wave 1's; the
    // fake lists Events by name, not in the order they were made.
    let wave_1 = |f: &FakeApi| {
        events(f, "FanOutWave")
            .into_iter()
            .find(|message| message.contains("wave 1 replaces"))
    };
    eventually(&fake, &wavelet, "wave 1 told", |f| wave_1(f).is_some());
    let wave = wave_1(&fake).unwrap();
    assert!(
        wave.contains("wave 1 replaces the 2 Pod(s) of deployment default/c"),
        "{wave}"
    );
    eventually(&fake, &wavelet, "every Pod replaced", |f| {
        evicted(f).len() == 6
    });
    let order: Vec<String> = evicted(&fake).iter().map(|p| deployment_of(p)).collect();
    assert_eq!(order, ["c", "c", "a", "a", "b", "b"], "{order:?}");
}

#[test]
fn evictions_refused_past_the_rollout_timeout_hold_the_rest_and_resume_goes_past_them() {
    let fake = cluster();
    fake.apply(json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "a", "namespace": NS},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "a"}}},
        "status": {"disruptionsAllowed": 0, "currentHealthy": 2, "desiredHealthy": 2, "expectedPods": 2},
    }));
    let wavelet = start(&fake, &["--rollout-timeout", "2s"]);
    change(&fake);
    eventually(&fake, &wavelet, "the hold", |f| {
        !events(f, "FanOutHeld").is_empty()
    });
    let held = events(&fake, "FanOutHeld").remove(0);
    assert!(
        held.contains("deployment default/a") && held.contains("evictions of its Pods are refused"),
        "{held}"
    );
    assert_eq!((evicted_of(&fake, "b"), evicted_of(&fake, "c")), (0, 0));

    let (code, out) = one_shot(&fake, &["resume", "-n", NS, "configmap/cfg"]);
    assert_eq!(code, Some(0), "{out}");
    eventually(&fake, &wavelet, "b's and c's Pods replaced past a", |f| {
        evicted_of(f, "b") == 2 && evicted_of(f, "c") == 2
    });
    assert_eq!(
        live(&fake)["a"].len(),
        2,
        "a's Pods stay while the budget refuses"
    );
}
