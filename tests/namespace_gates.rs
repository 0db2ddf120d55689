//! A paused Namespace is paused with `--namespaces` too (issue 32.12), against the fake
//! API server: wavelet reads the listed Namespace objects by name (a list and watch
//! narrowed by `fieldSelector=metadata.name=`, which RBAC grants with `resourceNames`), so
//! `wavelet.dev/pause` on one holds its rollouts; where RBAC refuses, wavelet says so once
//! at start and `wavelet status` says so too, instead of acting as if no pause were there.

use std::process::Output;

use serde_json::{json, Value};

use crate::fake::{FakeApi, Fault};
use crate::util::*;

const NS: &str = "apps";

fn setup() -> FakeApi {
    let fake = FakeApi::start();
    for ns in [NS, "other"] {
        fake.apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}));
    }
    fake.apply(configmap(NS, "app", &[("k", "1")]));
    fake.apply(workload(
        "Deployment",
        NS,
        "web",
        opted_in(),
        mounts_configmap("app"),
    ));
    fake
}

fn adopted(fake: &FakeApi, wavelet: &Wavelet) {
    eventually(fake, wavelet, "adoption", |f| {
        hashes(f, "deployments", NS, "web", "wavelet.dev/config-hash")
            .1
            .is_some()
    });
}

fn pause_namespace(fake: &FakeApi, on: bool) {
    let value = if on { json!("true") } else { Value::Null };
    fake.merge_patch(
        "namespaces",
        "",
        NS,
        json!({"metadata": {"annotations": {"wavelet.dev/pause": value}}}),
    );
}

fn change(fake: &FakeApi, value: &str) {
    fake.merge_patch("configmaps", NS, "app", json!({"data": {"k": value}}));
}

#[test]
fn with_namespaces_a_paused_namespace_holds_its_rollouts_until_lifted() {
    let fake = setup();
    let wavelet = Wavelet::start(&fake, &[FAST, &["--namespaces", NS]].concat());
    adopted(&fake, &wavelet);
    let mark = wavelet.log_mark();
    pause_namespace(&fake, true);
    // The positive signal: the watch of that one Namespace delivered the pause, and its
    // workload was looked at again.
    eventually(&fake, &wavelet, "web looked at again", |_| {
        wavelet.output()[mark..].contains("deployment apps/web:")
    });
    change(&fake, "2");
    eventually(
        &fake,
        &wavelet,
        "pending while the Namespace is paused",
        |_| {
            wavelet
                .output()
                .contains("PENDING: paused (Namespace apps has wavelet.dev/pause")
        },
    );
    assert_eq!(
        template_patches(&fake, "deployments", NS, "web"),
        0,
        "rolled in a paused Namespace:\n{}",
        wavelet.output()
    );
    // Read by name, never as a list of every Namespace.
    let namespace_reads: Vec<_> = fake
        .requests()
        .into_iter()
        .filter(|r| r.path == "/api/v1/namespaces")
        .collect();
    assert!(!namespace_reads.is_empty());
    for r in &namespace_reads {
        assert!(
            r.query
                .iter()
                .any(|(k, v)| k == "fieldSelector" && v == "metadata.name=apps"),
            "listed Namespaces beyond apps: {:?}",
            r.query
        );
    }
    pause_namespace(&fake, false);
    eventually(&fake, &wavelet, "one rollout once lifted", |f| {
        template_patches(f, "deployments", NS, "web") == 1
    });
}

#[test]
fn where_rbac_refuses_the_namespace_wavelet_and_status_say_its_pause_is_not_seen() {
    let fake = setup();
    // The narrowed list and watch wavelet sends ("namespaces/apps" to the fake's faults),
    // and the GET `wavelet status -n apps` sends.
    for (method, resource) in [
        ("GET", "namespaces/apps"),
        ("WATCH", "namespaces/apps"),
        ("GET", "namespaces"),
    ] {
        fake.inject(Fault::Status {
            method: method.into(),
            resource: resource.into(),
            code: 403,
            retry_after_secs: None,
            times: 100_000,
            plain_text: false,
        });
    }
    let wavelet = Wavelet::start(&fake, &[FAST, &["--namespaces", NS]].concat());
    adopted(&fake, &wavelet);
    let said = wavelet
        .output()
        .lines()
        .filter(|l| l.contains("namespace apps: cannot read the Namespace"))
        .count();
    assert_eq!(said, 1, "said once at start:\n{}", wavelet.output());
    assert!(wavelet
        .output()
        .contains("wavelet.dev/pause and wavelet.dev/restart-window are NOT seen"));
    let Output { stdout, .. } = wavelet_command()
        .args(["status", "-n", NS, "--server", &fake.url()])
        .env_clear()
        .output()
        .expect("running wavelet status");
    let table = String::from_utf8_lossy(&stdout);
    assert!(
        table.contains("note: cannot read Namespace apps")
            && table.contains(
                "wavelet.dev/pause and wavelet.dev/restart-window on Namespace apps are not shown"
            ),
        "{table}"
    );
}
