//! Coming from Wave: `wavelet migrate wave` removes exactly what older Wave left (its
//! finalizer on workloads, its owner references on ConfigMaps and Secrets), through the
//! binary against the fake API server; `run` warns about it and `status` names the command.

use serde_json::{json, Value};

use crate::fake::FakeApi;
use crate::util::*;

const NS: &str = "default";
const WAVE_FINALIZER: &str = "wave.pusher.com/finalizer";

/// A Deployment with Wave's finalizer and an unrelated one; ConfigMaps `a` and `b` owned
/// by it (as older Wave left them) and `b` also by an unrelated owner; a Secret owned only
/// by the unrelated owner.
fn cluster_left_by_wave() -> (FakeApi, String) {
    let fake = FakeApi::start();
    let mut web = workload(
        "Deployment",
        NS,
        "web",
        json!({"wave.pusher.com/update-on-config-change": "true"}),
        mounts_configmap("a"),
    );
    web["metadata"]["finalizers"] = json!([WAVE_FINALIZER, "example.com/keep"]);
    let web = fake.apply(web);
    let uid = web["metadata"]["uid"].as_str().unwrap().to_string();
    let wave_owner =
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": uid});
    let other_owner =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "anchor", "uid": "anchor-uid"});
    for (name, owners) in [
        ("a", json!([wave_owner])),
        ("b", json!([wave_owner, other_owner])),
    ] {
        let mut cm = configmap(NS, name, &[("k", "1")]);
        cm["metadata"]["ownerReferences"] = owners;
        fake.apply(cm);
    }
    let mut sec = secret(NS, "s", &[("password", "hunter2")]);
    sec["metadata"]["ownerReferences"] = json!([other_owner]);
    fake.apply(sec);
    (fake, uid)
}

fn migrate(fake: &FakeApi, extra: &[&str]) -> (Option<i32>, String, String) {
    let out = wavelet_command()
        .args(["migrate", "wave", "--server", &fake.url()])
        .args(extra)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn finalizers(fake: &FakeApi) -> Value {
    fake.get("deployments", NS, "web").unwrap()["metadata"]["finalizers"].clone()
}

fn owners(fake: &FakeApi, resource: &str, name: &str) -> Vec<String> {
    fake.get(resource, NS, name).unwrap()["metadata"]["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| r["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn the_dry_run_lists_exactly_waves_entries_and_changes_nothing() {
    let (fake, uid) = cluster_left_by_wave();
    let writes_before = fake.requests().iter().filter(|r| r.method != "GET").count();
    let (code, stdout, stderr) = migrate(&fake, &["-n", NS]);
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    let rows: Vec<&str> = stdout.lines().skip(1).collect();
    assert_eq!(rows.len(), 3, "{stdout}");
    assert!(rows[0].starts_with("finalizer") && rows[0].contains("Deployment default/web"));
    assert!(rows
        .iter()
        .any(|r| r.contains("ConfigMap default/a") && r.contains(&uid)));
    assert!(rows
        .iter()
        .any(|r| r.contains("ConfigMap default/b") && r.contains(&uid)));
    assert!(!stdout.contains("anchor") && !stdout.contains("example.com/keep"));
    assert!(stderr.contains("--apply"), "{stderr}");
    let writes_after = fake.requests().iter().filter(|r| r.method != "GET").count();
    assert_eq!(writes_before, writes_after, "the dry run wrote");
    assert_eq!(
        finalizers(&fake),
        json!([WAVE_FINALIZER, "example.com/keep"])
    );
}

#[test]
fn apply_removes_exactly_waves_entries_and_a_second_run_has_nothing_to_do() {
    let (fake, _) = cluster_left_by_wave();
    let (code, stdout, stderr) = migrate(&fake, &["--all-namespaces", "--apply"]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert_eq!(stdout.matches("removed ").count(), 3, "{stdout}");
    assert_eq!(finalizers(&fake), json!(["example.com/keep"]));
    assert!(owners(&fake, "configmaps", "a").is_empty());
    assert_eq!(owners(&fake, "configmaps", "b"), ["anchor"]);
    assert_eq!(owners(&fake, "secrets", "s"), ["anchor"]);
    // Each patch carried the resourceVersion it was computed from.
    for patch in fake.requests().iter().filter(|r| r.method == "PATCH") {
        assert!(
            patch.body_json()["metadata"]["resourceVersion"].is_string(),
            "{}",
            patch.body
        );
    }
    assert!(!stdout.contains("hunter2") && !stderr.contains("hunter2"));
    let (code, stdout, _) = migrate(&fake, &["-n", NS]);
    assert_eq!(code, Some(0), "{stdout}");
    assert!(
        stdout.contains("nothing older Wave versions left"),
        "{stdout}"
    );
}

#[test]
fn a_conflicting_write_is_read_again_and_retried() {
    let (fake, _) = cluster_left_by_wave();
    fake.inject(crate::fake::Fault::Status {
        method: "PATCH".into(),
        resource: "deployments".into(),
        code: 409,
        retry_after_secs: None,
        times: 1,
        plain_text: false,
    });
    let (code, stdout, stderr) = migrate(&fake, &["-n", NS, "--apply"]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert_eq!(finalizers(&fake), json!(["example.com/keep"]));
}

#[test]
fn run_warns_once_per_workload_and_status_names_the_command() {
    let (fake, _) = cluster_left_by_wave();
    let wavelet = Wavelet::start(&fake, FAST);
    eventually(&fake, &wavelet, "the warning", |_| {
        wavelet.output().contains("wavelet migrate wave -n default")
    });
    assert_eq!(
        wavelet
            .output()
            .matches("carries the finalizer wave.pusher.com/finalizer")
            .count(),
        1
    );
    // wavelet itself never writes the finalizer or the owner references.
    assert_eq!(
        finalizers(&fake),
        json!([WAVE_FINALIZER, "example.com/keep"])
    );
    let out = wavelet_command()
        .args(["status", "--server", &fake.url()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("Older Wave versions left 3 entries")
            && stdout.contains("wavelet migrate wave --all-namespaces"),
        "{stdout}"
    );
}

/// Issue 26, item 6. The record of workloads already warned about was never pruned: it
/// grew with every workload that ever carried the finalizer, and one deleted and created
/// again (a new object) was never warned about. It now holds the workloads that exist.
#[test]
fn a_workload_created_again_with_waves_finalizer_is_warned_about_again() {
    let (fake, _) = cluster_left_by_wave();
    let mut args = FAST.to_vec();
    args.extend(["--resync", "1s"]);
    let wavelet = Wavelet::start(&fake, &args);
    let warnings = |w: &Wavelet| {
        w.output()
            .matches("carries the finalizer wave.pusher.com/finalizer")
            .count()
    };
    eventually(&fake, &wavelet, "the warning", |_| warnings(&wavelet) == 1);
    let resyncs = |w: &Wavelet| {
        metric(
            w,
            "wavelet_watch_relists_total",
            r#"resource="deployments",reason="resync""#,
        )
    };
    let before = resyncs(&wavelet);
    wait_for_metric(
        &wavelet,
        "wavelet_watch_relists_total",
        r#"resource="deployments",reason="resync""#,
        |n| n >= before + 2.0,
    );
    assert_eq!(
        warnings(&wavelet),
        1,
        "warned again about the same workload"
    );
    let web = fake.get("deployments", NS, "web").unwrap();
    fake.delete("deployments", NS, "web");
    let mut again = workload(
        "Deployment",
        NS,
        "web",
        json!({"wave.pusher.com/update-on-config-change": "true"}),
        mounts_configmap("a"),
    );
    again["metadata"]["finalizers"] = web["metadata"]["finalizers"].clone();
    let again = fake.apply(again);
    assert_ne!(again["metadata"]["uid"], web["metadata"]["uid"]);
    eventually(&fake, &wavelet, "a warning about the new workload", |_| {
        warnings(&wavelet) == 2
    });
}
