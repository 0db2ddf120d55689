//! Stakater Reloader's annotations and its opt-in flags, through the binary against the
//! fake API server, ported from Reloader's own end-to-end scenarios where the meaning is
//! the same: a change that should roll rolls once, one that should not rolls nothing
//! (asserted after a later change that must roll has rolled).

use serde_json::{json, Value};

use crate::fake::FakeApi;
use crate::util::*;

const NS: &str = "default";
const HASH: &str = "wavelet.dev/config-hash";

/// Deployment `web` with these annotations on its metadata and this pod spec.
fn web(annotations: Value, pod_spec: Value) -> Value {
    workload("Deployment", NS, "web", annotations, pod_spec)
}

/// A pod spec whose container reads ConfigMaps and Secrets through `envFrom`, one
/// ConfigMap through a volume, and one Secret key through `env`.
fn uses(configmaps: &[&str], secrets: &[&str]) -> Value {
    let mut env_from: Vec<Value> = configmaps
        .iter()
        .map(|n| json!({"configMapRef": {"name": n}}))
        .collect();
    env_from.extend(secrets.iter().map(|n| json!({"secretRef": {"name": n}})));
    json!({"containers": [{"name": "app", "image": "nginx", "envFrom": env_from}]})
}

fn set(fake: &FakeApi, kind: &str, name: &str, key: &str, value: &str) {
    let value = if kind == "secrets" {
        wavelet::objects::base64::encode(value.as_bytes())
    } else {
        value.to_string()
    };
    fake.merge_patch(kind, NS, name, json!({"data": {key: value}}));
}

fn rollouts(fake: &FakeApi, name: &str) -> usize {
    template_patches(fake, "deployments", NS, name)
}

/// Starts wavelet with `args`, waits for the adoption of `web` and of the marker.
fn start(fake: &FakeApi, args: &[&str]) -> Wavelet {
    fake.apply(configmap(NS, "marker-config", &[("v", "1")]));
    fake.apply(workload(
        "Deployment",
        NS,
        "marker",
        opted_in(),
        mounts_configmap("marker-config"),
    ));
    let mut all = FAST.to_vec();
    all.extend_from_slice(args);
    let wavelet = Wavelet::start(fake, &all);
    eventually(fake, &wavelet, "adoptions", |f| {
        hashes(f, "deployments", NS, "marker", HASH).1.is_some()
            && f.get("deployments", NS, "web")
                .is_none_or(|_| hashes(f, "deployments", NS, "web", HASH).1.is_some())
    });
    wavelet
}

/// The positive signal: the marker rolls, so every change made before it was processed.
fn barrier(fake: &FakeApi, wavelet: &Wavelet) {
    let before = rollouts(fake, "marker");
    let value = format!("{}", before + 2);
    set(fake, "configmaps", "marker-config", "v", &value);
    eventually(fake, wavelet, "the marker's rollout", |f| {
        rollouts(f, "marker") == before + 1
    });
}

/// `change` rolls `web` exactly once.
fn rolls_once(fake: &FakeApi, wavelet: &Wavelet, change: impl FnOnce(&FakeApi)) {
    let before = rollouts(fake, "web");
    change(fake);
    eventually(fake, wavelet, "web rolled", |f| {
        rollouts(f, "web") == before + 1
    });
    barrier(fake, wavelet);
    assert_eq!(rollouts(fake, "web"), before + 1, "{}", wavelet.output());
}

/// `change` changes only what counts for `web`: the new hash is recorded on its metadata
/// (the positive signal), and it does not roll.
fn records_without_rolling(fake: &FakeApi, wavelet: &Wavelet, change: impl FnOnce(&FakeApi)) {
    let before = rollouts(fake, "web");
    let recorded = hashes(fake, "deployments", NS, "web", HASH).1;
    change(fake);
    eventually(fake, wavelet, "the new hash recorded", |f| {
        hashes(f, "deployments", NS, "web", HASH).1 != recorded
    });
    assert_eq!(rollouts(fake, "web"), before, "{}", wavelet.output());
}

/// `change` does not roll `web`.
fn rolls_nothing(fake: &FakeApi, wavelet: &Wavelet, change: impl FnOnce(&FakeApi)) {
    let before = rollouts(fake, "web");
    change(fake);
    barrier(fake, wavelet);
    assert_eq!(rollouts(fake, "web"), before, "{}", wavelet.output());
}

fn with_configs(fake: &FakeApi, configmaps: &[&str], secrets: &[&str]) {
    for name in configmaps {
        fake.apply(configmap(NS, name, &[("k", "1")]));
    }
    for name in secrets {
        fake.apply(secret(NS, name, &[("k", "1")]));
    }
}

#[test]
fn auto_rolls_on_a_referenced_configmap_or_secret_and_writes_wavelets_hash_key() {
    let fake = FakeApi::start();
    with_configs(&fake, &["cm"], &["sec"]);
    fake.apply(web(
        json!({"reloader.stakater.com/auto": "true"}),
        uses(&["cm"], &["sec"]),
    ));
    let wavelet = start(&fake, &[]);
    assert_eq!(rollouts(&fake, "web"), 0, "adoption rolled");
    rolls_once(&fake, &wavelet, |f| set(f, "configmaps", "cm", "k", "2"));
    rolls_once(&fake, &wavelet, |f| set(f, "secrets", "sec", "k", "2"));
    rolls_nothing(&fake, &wavelet, |f| {
        f.merge_patch(
            "configmaps",
            NS,
            "cm",
            json!({"metadata": {"labels": {"x": "y"}}}),
        );
    });
    let (template, metadata) = hashes(&fake, "deployments", NS, "web", HASH);
    assert!(template.is_some() && template == metadata);
}

#[test]
fn auto_from_the_pod_template_when_the_metadata_has_none() {
    let fake = FakeApi::start();
    with_configs(&fake, &["cm"], &[]);
    let mut deployment = web(json!({}), uses(&["cm"], &[]));
    deployment["spec"]["template"]["metadata"]["annotations"] =
        json!({"reloader.stakater.com/auto": "true"});
    fake.apply(deployment);
    let wavelet = start(&fake, &[]);
    rolls_once(&fake, &wavelet, |f| set(f, "configmaps", "cm", "k", "2"));
}

#[test]
fn typed_auto_counts_only_its_kind() {
    let fake = FakeApi::start();
    with_configs(&fake, &["cm"], &["sec"]);
    fake.apply(web(
        json!({"configmap.reloader.stakater.com/auto": "true"}),
        uses(&["cm"], &["sec"]),
    ));
    let wavelet = start(&fake, &[]);
    rolls_nothing(&fake, &wavelet, |f| set(f, "secrets", "sec", "k", "2"));
    rolls_once(&fake, &wavelet, |f| set(f, "configmaps", "cm", "k", "2"));

    let fake = FakeApi::start();
    with_configs(&fake, &["cm"], &["sec"]);
    fake.apply(web(
        json!({"secret.reloader.stakater.com/auto": "true"}),
        uses(&["cm"], &["sec"]),
    ));
    let wavelet = start(&fake, &[]);
    rolls_nothing(&fake, &wavelet, |f| set(f, "configmaps", "cm", "k", "2"));
    rolls_once(&fake, &wavelet, |f| set(f, "secrets", "sec", "k", "2"));
}

#[test]
fn reload_lists_name_objects_by_anchored_regular_expressions_referenced_or_not() {
    let fake = FakeApi::start();
    with_configs(&fake, &["app-one", "my-app-one", "cm"], &["db-main"]);
    fake.apply(web(
        json!({
            "configmap.reloader.stakater.com/reload": "app-.*,(broken",
            "secret.reloader.stakater.com/reload": "db-main",
        }),
        uses(&["cm"], &[]),
    ));
    let wavelet = start(&fake, &[]);
    // Not referenced by the template, named by the list: counts.
    rolls_once(&fake, &wavelet, |f| {
        set(f, "configmaps", "app-one", "k", "2")
    });
    rolls_once(&fake, &wavelet, |f| set(f, "secrets", "db-main", "k", "2"));
    // Anchored: `app-.*` does not name `my-app-one`; a referenced but unnamed object does
    // not count under a reload list alone.
    rolls_nothing(&fake, &wavelet, |f| {
        set(f, "configmaps", "my-app-one", "k", "2")
    });
    rolls_nothing(&fake, &wavelet, |f| set(f, "configmaps", "cm", "k", "2"));
    // The invalid entry is a Warning Event, and is skipped.
    eventually(&fake, &wavelet, "InvalidAnnotation Event", |f| {
        f.events_for(NS, "web")
            .iter()
            .any(|e| e["reason"] == "InvalidAnnotation")
    });
    // Created later and named by the pattern: recorded, then its data changes roll.
    records_without_rolling(&fake, &wavelet, |f| {
        f.apply(configmap(NS, "app-two", &[("k", "1")]));
    });
    rolls_once(&fake, &wavelet, |f| {
        set(f, "configmaps", "app-two", "k", "2")
    });
}

#[test]
fn a_named_object_counts_with_all_its_keys_even_where_the_template_reads_one() {
    let fake = FakeApi::start();
    fake.apply(configmap(NS, "cm", &[("used", "1"), ("other", "1")]));
    fake.apply(web(
        json!({"configmap.reloader.stakater.com/reload": "cm"}),
        json!({"containers": [{"name": "app", "image": "nginx", "env": [{"name": "U",
            "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "used"}}}]}]}),
    ));
    let wavelet = start(&fake, &[]);
    rolls_once(&fake, &wavelet, |f| {
        set(f, "configmaps", "cm", "other", "2")
    });
}

#[test]
fn search_counts_only_referenced_objects_that_match() {
    let fake = FakeApi::start();
    let mut matched = configmap(NS, "matched", &[("k", "1")]);
    matched["metadata"]["annotations"] = json!({"reloader.stakater.com/match": "true"});
    fake.apply(matched);
    with_configs(&fake, &["plain"], &[]);
    fake.apply(web(
        json!({"reloader.stakater.com/search": "true"}),
        uses(&["matched", "plain"], &[]),
    ));
    let wavelet = start(&fake, &[]);
    rolls_nothing(&fake, &wavelet, |f| set(f, "configmaps", "plain", "k", "2"));
    rolls_once(&fake, &wavelet, |f| {
        set(f, "configmaps", "matched", "k", "2")
    });
}

#[test]
fn exclude_lists_win_over_auto() {
    let fake = FakeApi::start();
    with_configs(&fake, &["cm", "noisy"], &["sec", "rotating"]);
    fake.apply(web(
        json!({
            "reloader.stakater.com/auto": "true",
            "configmaps.exclude.reloader.stakater.com/reload": "noisy",
            "secrets.exclude.reloader.stakater.com/reload": "rotating",
        }),
        uses(&["cm", "noisy"], &["sec", "rotating"]),
    ));
    let wavelet = start(&fake, &[]);
    rolls_nothing(&fake, &wavelet, |f| set(f, "configmaps", "noisy", "k", "2"));
    rolls_nothing(&fake, &wavelet, |f| set(f, "secrets", "rotating", "k", "2"));
    // Excluded and deleted: not missing, nothing held.
    rolls_nothing(&fake, &wavelet, |f| {
        f.delete("configmaps", NS, "noisy");
    });
    rolls_once(&fake, &wavelet, |f| set(f, "configmaps", "cm", "k", "2"));
    assert!(!fake
        .events_for(NS, "web")
        .iter()
        .any(|e| e["reason"] == "ConfigMissing"));
}

#[test]
fn an_ignored_object_counts_for_nobody_and_toggling_ignore_rolls_nothing() {
    let fake = FakeApi::start();
    let mut ignored = configmap(NS, "ignored", &[("k", "1")]);
    ignored["metadata"]["annotations"] = json!({"reloader.stakater.com/ignore": "true"});
    fake.apply(ignored);
    with_configs(&fake, &["cm"], &[]);
    // wavelet's own opt-in too: ignore applies to every family.
    fake.apply(web(opted_in(), uses(&["cm", "ignored"], &[])));
    let wavelet = start(&fake, &[]);
    rolls_nothing(&fake, &wavelet, |f| {
        set(f, "configmaps", "ignored", "k", "2")
    });
    // No longer ignored: recorded without a rollout; its next data change rolls.
    records_without_rolling(&fake, &wavelet, |f| {
        f.merge_patch(
            "configmaps",
            NS,
            "ignored",
            json!({"metadata": {"annotations": {"reloader.stakater.com/ignore": null}}}),
        );
    });
    rolls_once(&fake, &wavelet, |f| {
        set(f, "configmaps", "ignored", "k", "3")
    });
}

#[test]
fn combined_auto_and_reload_list_both_count() {
    let fake = FakeApi::start();
    with_configs(&fake, &["referenced", "listed"], &[]);
    fake.apply(web(
        json!({"reloader.stakater.com/auto": "true",
               "configmap.reloader.stakater.com/reload": "listed"}),
        uses(&["referenced"], &[]),
    ));
    let wavelet = start(&fake, &[]);
    rolls_once(&fake, &wavelet, |f| {
        set(f, "configmaps", "referenced", "k", "2")
    });
    rolls_once(&fake, &wavelet, |f| {
        set(f, "configmaps", "listed", "k", "2")
    });
}

#[test]
fn init_containers_projected_volumes_and_several_containers_count_under_auto() {
    let fake = FakeApi::start();
    with_configs(&fake, &["init-cm", "projected-cm", "second-cm"], &[]);
    fake.apply(web(
        json!({"reloader.stakater.com/auto": "true"}),
        json!({
            "initContainers": [{"name": "init", "image": "busybox",
                "envFrom": [{"configMapRef": {"name": "init-cm"}}]}],
            "containers": [
                {"name": "a", "image": "nginx"},
                {"name": "b", "image": "nginx", "envFrom": [{"configMapRef": {"name": "second-cm"}}]}],
            "volumes": [{"name": "p", "projected": {"sources": [{"configMap": {"name": "projected-cm"}}]}}],
        }),
    ));
    let wavelet = start(&fake, &[]);
    for name in ["init-cm", "projected-cm", "second-cm"] {
        rolls_once(&fake, &wavelet, |f| set(f, "configmaps", name, "k", "2"));
    }
}

#[test]
fn pause_period_coalesces_changes_over_the_workloads_own_window() {
    let fake = FakeApi::start();
    with_configs(&fake, &["cm"], &[]);
    fake.apply(web(
        json!({"reloader.stakater.com/auto": "true",
               "deployment.reloader.stakater.com/pause-period": "2s"}),
        uses(&["cm"], &[]),
    ));
    let wavelet = start(&fake, &[]);
    let started = std::time::Instant::now();
    for v in ["2", "3", "4"] {
        set(&fake, "configmaps", "cm", "k", v);
        // Scenario pacing, not a wait: the changes arrive spread over the pause period.
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
    eventually(&fake, &wavelet, "one rollout", |f| rollouts(f, "web") == 1);
    assert!(
        started.elapsed() >= std::time::Duration::from_secs(2),
        "rolled before the pause period: {:?}",
        started.elapsed()
    );
    barrier(&fake, &wavelet);
    assert_eq!(rollouts(&fake, "web"), 1);
}

#[test]
fn auto_reload_all_opts_everything_in_except_auto_false() {
    let fake = FakeApi::start();
    with_configs(&fake, &["cm", "other"], &[]);
    fake.apply(web(json!({}), uses(&["cm"], &[])));
    fake.apply(workload(
        "Deployment",
        NS,
        "opted-out",
        json!({"reloader.stakater.com/auto": "false"}),
        uses(&["other"], &[]),
    ));
    let wavelet = start(&fake, &["--auto-reload-all"]);
    rolls_once(&fake, &wavelet, |f| set(f, "configmaps", "cm", "k", "2"));
    set(&fake, "configmaps", "other", "k", "2");
    barrier(&fake, &wavelet);
    assert!(fake.patches("deployments", NS, "opted-out").is_empty());
}

#[test]
fn ignore_secrets_stops_watching_secrets_and_they_count_for_nobody() {
    let fake = FakeApi::start();
    with_configs(&fake, &["cm"], &["sec"]);
    fake.apply(web(
        json!({"reloader.stakater.com/auto": "true"}),
        uses(&["cm"], &["sec", "absent-secret"]),
    ));
    let wavelet = start(&fake, &["--resources-to-ignore=secrets"]);
    rolls_nothing(&fake, &wavelet, |f| set(f, "secrets", "sec", "k", "2"));
    rolls_once(&fake, &wavelet, |f| set(f, "configmaps", "cm", "k", "2"));
    assert!(
        !fake.requests().iter().any(|r| r.path.contains("/secrets")),
        "Secrets were listed or read"
    );
}

#[test]
fn status_names_the_family_that_opted_each_workload_in() {
    let fake = FakeApi::start();
    with_configs(&fake, &["cm"], &[]);
    fake.apply(web(
        json!({"reloader.stakater.com/auto": "true"}),
        uses(&["cm"], &[]),
    ));
    fake.apply(workload(
        "Deployment",
        NS,
        "waved",
        json!({"wave.pusher.com/update-on-config-change": "true"}),
        uses(&["cm"], &[]),
    ));
    let output = wavelet_command()
        .args(["status", "--server", &fake.url()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let row = |name: &str| {
        stdout
            .lines()
            .find(|l| l.contains(name))
            .unwrap_or_else(|| panic!("{stdout}"))
            .to_string()
    };
    assert!(row("default/web ").contains(" reloader "), "{stdout}");
    assert!(row("default/waved").contains(" wave "), "{stdout}");
}

#[test]
fn ignore_configmaps_stops_watching_configmaps_and_they_count_for_nobody() {
    let fake = FakeApi::start();
    with_configs(&fake, &["cm"], &["sec"]);
    fake.apply(web(
        json!({"reloader.stakater.com/auto": "true"}),
        uses(&["cm", "absent-cm"], &["sec"]),
    ));
    // No marker: it would be a ConfigMap. The Secret's rollout is the positive signal.
    let mut args = FAST.to_vec();
    args.push("--ignore-configmaps");
    let wavelet = Wavelet::start(&fake, &args);
    eventually(&fake, &wavelet, "adoption", |f| {
        hashes(f, "deployments", NS, "web", HASH).1.is_some()
    });
    set(&fake, "configmaps", "cm", "k", "2");
    set(&fake, "secrets", "sec", "k", "2");
    eventually(&fake, &wavelet, "one rollout", |f| rollouts(f, "web") == 1);
    assert!(
        !fake
            .requests()
            .iter()
            .any(|r| r.path.contains("/configmaps") && !is_wavelet_state(r)),
        "ConfigMaps were listed or read"
    );
    assert!(!fake
        .events_for(NS, "web")
        .iter()
        .any(|e| e["reason"] == "ConfigMissing"));
}
