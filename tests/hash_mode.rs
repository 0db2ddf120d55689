//! Hash mode end to end: the real binary against the fake API server.

use std::time::Duration;

use serde_json::json;

use crate::fake::{FakeApi, Fault};
use crate::util::*;

const NS: &str = "default";
const HASH: &str = "wavelet.dev/config-hash";

/// Creates a ConfigMap and an opted-in workload mounting it, starts wavelet, and waits
/// for the adoption.
fn adopted(kind: &str) -> (FakeApi, Wavelet) {
    adopted_with(kind, FAST, false)
}

/// [`adopted`], with a ConfigMap barrier (see [`add_barrier`]) and one worker.
fn adopted_with_barrier(kind: &str) -> (FakeApi, Wavelet) {
    adopted_with(kind, &fast_one_worker(), true)
}

fn adopted_with(kind: &str, args: &[&str], barrier: bool) -> (FakeApi, Wavelet) {
    let fake = FakeApi::start();
    if barrier {
        add_barrier(&fake, "configmaps", NS);
    }
    fake.apply(configmap(NS, "app-config", &[("color", "blue")]));
    fake.apply(workload(
        kind,
        NS,
        "web",
        opted_in(),
        mounts_configmap("app-config"),
    ));
    let wavelet = Wavelet::start(&fake, args);
    eventually(&fake, &wavelet, "adoption hash on metadata", |f| {
        hashes(f, plural(kind), NS, "web", HASH).1.is_some()
    });
    (fake, wavelet)
}

fn data_change_rolls_once_and_label_change_never(kind: &str) {
    let (fake, wavelet) = adopted_with_barrier(kind);
    let resource = plural(kind);
    assert_eq!(
        fake.revisions(resource, NS, "web"),
        1,
        "adoption must not roll"
    );

    fake.merge_patch(
        "configmaps",
        NS,
        "app-config",
        json!({"metadata": {"labels": {"touched": "yes"}}}),
    );
    barrier_change(&fake, &wavelet, "configmaps", NS);
    assert_eq!(
        template_patches(&fake, resource, NS, "web"),
        0,
        "a label-only change rolled:\n{}",
        wavelet.output()
    );

    fake.merge_patch(
        "configmaps",
        NS,
        "app-config",
        json!({"data": {"color": "green"}}),
    );
    eventually(&fake, &wavelet, "one rollout", |f| {
        f.revisions(resource, NS, "web") == 2
    });
    barrier_change(&fake, &wavelet, "configmaps", NS);
    assert_eq!(fake.revisions(resource, NS, "web"), 2);
    assert_eq!(template_patches(&fake, resource, NS, "web"), 1);
    let (template, metadata) = hashes(&fake, resource, NS, "web", HASH);
    assert_eq!(
        template.as_deref(),
        Some(expected_hash(&fake, resource, NS, "web").as_str())
    );
    assert_eq!(template, metadata);

    let events = fake.events_for(NS, "web");
    let rolled: Vec<_> = events
        .iter()
        .filter(|e| e["reason"] == "ConfigChanged")
        .collect();
    assert_eq!(rolled.len(), 1, "{events:?}");
    assert!(
        rolled[0]["message"]
            .as_str()
            .unwrap()
            .contains("ConfigMap default/app-config changed."),
        "{:?}",
        rolled[0]
    );
}

#[test]
fn deployment_rolls_once_on_data_change_and_never_on_label_change() {
    data_change_rolls_once_and_label_change_never("Deployment");
}

#[test]
fn statefulset_rolls_once_on_data_change_and_never_on_label_change() {
    data_change_rolls_once_and_label_change_never("StatefulSet");
}

#[test]
fn daemonset_rolls_once_on_data_change_and_never_on_label_change() {
    data_change_rolls_once_and_label_change_never("DaemonSet");
}

#[test]
fn the_patch_is_a_strategic_merge_of_the_template_annotation_only() {
    let (fake, wavelet) = adopted("Deployment");
    fake.merge_patch(
        "configmaps",
        NS,
        "app-config",
        json!({"data": {"color": "red"}}),
    );
    eventually(&fake, &wavelet, "rollout", |f| {
        f.revisions("deployments", NS, "web") == 2
    });
    let patch = fake
        .patches("deployments", NS, "web")
        .into_iter()
        .find(|r| !r.body_json()["spec"].is_null())
        .unwrap();
    assert_eq!(
        patch.header("content-type"),
        Some("application/strategic-merge-patch+json")
    );
    let hash = expected_hash(&fake, "deployments", NS, "web");
    let mut body = patch.body_json();
    // Beside the hash on the metadata, what it was computed under (docs: config-basis).
    let basis = body["metadata"]["annotations"]
        .as_object_mut()
        .unwrap()
        .remove("wavelet.dev/config-basis")
        .expect("the basis is written with the hash");
    assert!(
        basis.as_str().unwrap().starts_with("v1 k=none s="),
        "{basis}"
    );
    assert_eq!(
        body,
        json!({"metadata": {"annotations": {HASH: hash}}, "spec": {"template": {"metadata": {"annotations": {HASH: hash}}}}})
    );
}

#[test]
fn a_secret_key_ref_ignores_other_keys_of_the_secret() {
    let fake = FakeApi::start();
    add_barrier(&fake, "secrets", NS);
    fake.apply(secret(NS, "creds", &[("a", "1"), ("b", "1")]));
    let spec = json!({"containers": [{"name": "app", "image": "nginx", "env": [
        {"name": "A", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "a"}}}]}]});
    fake.apply(workload("Deployment", NS, "web", opted_in(), spec));
    let wavelet = Wavelet::start(&fake, &fast_one_worker());
    eventually(&fake, &wavelet, "adoption", |f| {
        hashes(f, "deployments", NS, "web", HASH).1.is_some()
    });

    fake.merge_patch(
        "secrets",
        NS,
        "creds",
        json!({"data": {"b": wavelet::objects::base64::encode(b"2")}}),
    );
    barrier_change(&fake, &wavelet, "secrets", NS);
    assert_eq!(
        template_patches(&fake, "deployments", NS, "web"),
        0,
        "key b is not referenced"
    );

    fake.merge_patch(
        "secrets",
        NS,
        "creds",
        json!({"data": {"a": wavelet::objects::base64::encode(b"2")}}),
    );
    eventually(&fake, &wavelet, "rollout on key a", |f| {
        f.revisions("deployments", NS, "web") == 2
    });
}

#[test]
fn projected_items_ignore_keys_not_listed() {
    let fake = FakeApi::start();
    add_barrier(&fake, "configmaps", NS);
    fake.apply(configmap(NS, "cfg", &[("a", "1"), ("b", "1")]));
    let spec = json!({"volumes": [{"name": "p", "projected": {"sources": [
        {"configMap": {"name": "cfg", "items": [{"key": "a", "path": "a"}]}}]}}]});
    fake.apply(workload("Deployment", NS, "web", opted_in(), spec));
    let wavelet = Wavelet::start(&fake, &fast_one_worker());
    eventually(&fake, &wavelet, "adoption", |f| {
        hashes(f, "deployments", NS, "web", HASH).1.is_some()
    });

    fake.merge_patch("configmaps", NS, "cfg", json!({"data": {"b": "2"}}));
    barrier_change(&fake, &wavelet, "configmaps", NS);
    assert_eq!(template_patches(&fake, "deployments", NS, "web"), 0);

    fake.merge_patch("configmaps", NS, "cfg", json!({"data": {"a": "2"}}));
    eventually(&fake, &wavelet, "rollout on key a", |f| {
        f.revisions("deployments", NS, "web") == 2
    });
}

#[test]
fn an_init_containers_env_from_is_tracked() {
    let fake = FakeApi::start();
    fake.apply(configmap(NS, "init-cfg", &[("x", "1")]));
    let spec = json!({
        "initContainers": [{"name": "init", "image": "busybox", "envFrom": [{"configMapRef": {"name": "init-cfg"}}]}],
        "containers": [{"name": "app", "image": "nginx"}]});
    fake.apply(workload("Deployment", NS, "web", opted_in(), spec));
    let wavelet = Wavelet::start(&fake, FAST);
    eventually(&fake, &wavelet, "adoption", |f| {
        hashes(f, "deployments", NS, "web", HASH).1.is_some()
    });
    fake.merge_patch("configmaps", NS, "init-cfg", json!({"data": {"x": "2"}}));
    eventually(&fake, &wavelet, "rollout", |f| {
        f.revisions("deployments", NS, "web") == 2
    });
}

#[test]
fn a_new_opted_in_workload_is_adopted_without_a_rollout() {
    let fake = FakeApi::start();
    add_barrier(&fake, "configmaps", NS);
    fake.apply(configmap(NS, "app-config", &[("color", "blue")]));
    let wavelet = Wavelet::start(&fake, &fast_one_worker());
    fake.apply(workload(
        "Deployment",
        NS,
        "new",
        opted_in(),
        mounts_configmap("app-config"),
    ));
    eventually(&fake, &wavelet, "adoption", |f| {
        hashes(f, "deployments", NS, "new", HASH).1.is_some()
    });
    let (template, metadata) = hashes(&fake, "deployments", NS, "new", HASH);
    assert_eq!(template, None, "adoption must not touch the template");
    assert_eq!(
        metadata.as_deref(),
        Some(expected_hash(&fake, "deployments", NS, "new").as_str())
    );
    barrier_change(&fake, &wavelet, "configmaps", NS);
    assert_eq!(fake.revisions("deployments", NS, "new"), 1);
    assert_eq!(template_patches(&fake, "deployments", NS, "new"), 0);
}

#[test]
fn waves_opt_in_key_writes_waves_hash_key() {
    let fake = FakeApi::start();
    fake.apply(configmap(NS, "app-config", &[("color", "blue")]));
    let wave = json!({"wave.pusher.com/update-on-config-change": "true"});
    fake.apply(workload(
        "Deployment",
        NS,
        "web",
        wave,
        mounts_configmap("app-config"),
    ));
    let wavelet = Wavelet::start(&fake, FAST);
    let wave_hash = "wave.pusher.com/config-hash";
    eventually(&fake, &wavelet, "adoption under Wave's key", |f| {
        hashes(f, "deployments", NS, "web", wave_hash).1.is_some()
    });
    fake.merge_patch(
        "configmaps",
        NS,
        "app-config",
        json!({"data": {"color": "green"}}),
    );
    eventually(&fake, &wavelet, "rollout under Wave's key", |f| {
        hashes(f, "deployments", NS, "web", wave_hash).0.is_some()
    });
    assert_eq!(
        hashes(&fake, "deployments", NS, "web", HASH),
        (None, None),
        "wavelet's key is not written"
    );
}

#[test]
fn a_missing_required_configmap_warns_and_converges_once_created() {
    let fake = FakeApi::start();
    fake.apply(workload(
        "Deployment",
        NS,
        "web",
        opted_in(),
        mounts_configmap("not-yet"),
    ));
    let wavelet = Wavelet::start(&fake, FAST);
    eventually(&fake, &wavelet, "a Warning Event", |f| {
        f.events_for(NS, "web")
            .iter()
            .any(|e| e["type"] == "Warning" && e["reason"] == "ConfigMissing")
    });
    assert!(
        fake.patches("deployments", NS, "web").is_empty(),
        "nothing is written while configuration is missing"
    );

    fake.apply(configmap(NS, "not-yet", &[("k", "v")]));
    eventually(&fake, &wavelet, "converged", |f| {
        hashes(f, "deployments", NS, "web", HASH).1.as_deref()
            == Some(expected_hash(f, "deployments", NS, "web").as_str())
    });
    let warnings = fake
        .events_for(NS, "web")
        .iter()
        .filter(|e| e["reason"] == "ConfigMissing")
        .count();
    assert_eq!(warnings, 1, "one Warning, not one per reconcile");
}

#[test]
fn a_change_made_while_wavelet_was_down_is_rolled_once_at_start() {
    let (fake, wavelet) = adopted_with_barrier("Deployment");
    wavelet.kill();
    fake.merge_patch(
        "configmaps",
        NS,
        "app-config",
        json!({"data": {"color": "purple"}}),
    );
    let wavelet = Wavelet::start(&fake, &fast_one_worker());
    eventually(&fake, &wavelet, "rollout at start", |f| {
        f.revisions("deployments", NS, "web") == 2
    });
    barrier_change(&fake, &wavelet, "configmaps", NS);
    assert_eq!(template_patches(&fake, "deployments", NS, "web"), 1);
    drop(wavelet);

    // Restarted with nothing changed: nothing happens.
    let wavelet = Wavelet::start(&fake, &fast_one_worker());
    barrier_change(&fake, &wavelet, "configmaps", NS);
    assert_eq!(
        fake.revisions("deployments", NS, "web"),
        2,
        "{}",
        wavelet.output()
    );
}

#[test]
fn a_deleted_and_recreated_configmap_is_a_change() {
    let (fake, wavelet) = adopted("Deployment");
    assert!(fake.delete("configmaps", NS, "app-config"));
    eventually(&fake, &wavelet, "missing warning", |f| {
        f.events_for(NS, "web")
            .iter()
            .any(|e| e["reason"] == "ConfigMissing")
    });
    fake.apply(configmap(NS, "app-config", &[("color", "new")]));
    eventually(&fake, &wavelet, "rollout after re-creation", |f| {
        f.revisions("deployments", NS, "web") == 2
    });
}

#[test]
fn three_changes_inside_the_debounce_window_give_one_patch() {
    let fake = FakeApi::start();
    add_barrier(&fake, "configmaps", NS);
    fake.apply(configmap(NS, "app-config", &[("n", "0")]));
    fake.apply(workload(
        "Deployment",
        NS,
        "web",
        opted_in(),
        mounts_configmap("app-config"),
    ));
    let wavelet = Wavelet::start(
        &fake,
        &[
            "--debounce",
            "2s",
            "--min-rollout-interval",
            "0s",
            "--workers",
            "1",
        ],
    );
    eventually(&fake, &wavelet, "adoption", |f| {
        hashes(f, "deployments", NS, "web", HASH).1.is_some()
    });
    for n in 1..=3 {
        fake.merge_patch(
            "configmaps",
            NS,
            "app-config",
            json!({"data": {"n": n.to_string()}}),
        );
        // Scenario pacing, not a wait: the changes arrive spread over the 2 s window.
        std::thread::sleep(Duration::from_millis(100));
    }
    eventually(&fake, &wavelet, "rollout", |f| {
        f.revisions("deployments", NS, "web") == 2
    });
    barrier_change(&fake, &wavelet, "configmaps", NS);
    assert_eq!(
        template_patches(&fake, "deployments", NS, "web"),
        1,
        "{}",
        wavelet.output()
    );
    assert_eq!(
        hashes(&fake, "deployments", NS, "web", HASH).0.unwrap(),
        expected_hash(&fake, "deployments", NS, "web")
    );
}

#[test]
fn a_configmap_rewritten_100_times_rolls_no_more_than_the_storm_rules_allow() {
    let fake = FakeApi::start();
    fake.apply(configmap(NS, "app-config", &[("n", "0")]));
    fake.apply(workload(
        "Deployment",
        NS,
        "web",
        opted_in(),
        mounts_configmap("app-config"),
    ));
    let wavelet = Wavelet::start(
        &fake,
        &["--debounce", "100ms", "--min-rollout-interval", "1s"],
    );
    eventually(&fake, &wavelet, "adoption", |f| {
        hashes(f, "deployments", NS, "web", HASH).1.is_some()
    });
    let start = std::time::Instant::now();
    for n in 1..=100 {
        fake.merge_patch(
            "configmaps",
            NS,
            "app-config",
            json!({"data": {"n": n.to_string()}}),
        );
        // Scenario pacing, not a wait: a storm of writes spread over ~2.5 s.
        std::thread::sleep(Duration::from_millis(25));
    }
    let elapsed = start.elapsed();
    // Converges on the last value...
    eventually(&fake, &wavelet, "the latest configuration", |f| {
        hashes(f, "deployments", NS, "web", HASH).0.as_deref()
            == Some(expected_hash(f, "deployments", NS, "web").as_str())
    });
    // ...with at most one rollout per interval (plus the first).
    let allowed = elapsed.as_secs_f64().ceil() as usize + 2;
    let patches = template_patches(&fake, "deployments", NS, "web");
    assert!(
        patches <= allowed,
        "{patches} rollouts in {elapsed:?} (allowed {allowed})"
    );
    assert!(
        fake.events_for(NS, "web")
            .iter()
            .any(|e| e["reason"] == "RolloutThrottled" && e["type"] == "Warning"),
        "a Warning says the workload is throttled"
    );
}

#[test]
fn opting_out_removes_wavelets_metadata_annotation_without_rolling() {
    let (fake, wavelet) = adopted_with_barrier("Deployment");
    fake.merge_patch(
        "deployments",
        NS,
        "web",
        json!({"metadata": {"annotations": {"wavelet.dev/update-on-config-change": "false"}}}),
    );
    eventually(&fake, &wavelet, "metadata hash removed", |f| {
        hashes(f, "deployments", NS, "web", HASH).1.is_none()
    });
    fake.merge_patch(
        "configmaps",
        NS,
        "app-config",
        json!({"data": {"color": "green"}}),
    );
    barrier_change(&fake, &wavelet, "configmaps", NS);
    assert_eq!(fake.revisions("deployments", NS, "web"), 1);
    // Regression: the removal was written twice in the same second; once is enough.
    let removals = fake
        .patches("deployments", NS, "web")
        .iter()
        .filter(|p| {
            p.body_json()["metadata"]["annotations"][HASH].is_null()
                && p.body_json()["metadata"]["annotations"]
                    .as_object()
                    .is_some_and(|a| a.contains_key(HASH))
        })
        .count();
    assert_eq!(removals, 1, "{}", wavelet.output());
}

#[test]
fn opting_out_again_after_an_opt_in_the_watch_skipped_over_removes_the_hash_again() {
    // Found by the soak (seed 1795619603803702018): wavelet removed its hash after an
    // opt-out; the watch expired before it showed that removal, and the relist showed the
    // workload opted in again. Its second opt-out was then taken for the first one, already
    // cleaned, and wavelet's hash stayed on it for good.
    let (fake, wavelet) = adopted_with_barrier("Deployment");
    let opt = |value: &str| {
        fake.merge_patch(
            "deployments",
            NS,
            "web",
            json!({"metadata": {"annotations": {"wavelet.dev/update-on-config-change": value}}}),
        );
    };
    // The opt-out is the next write; wavelet's removal of its hash the one after.
    let removal = fake.resource_version() + 2;
    fake.inject(Fault::SlowEvent {
        resource: "deployments".into(),
        needle: format!("\"resourceVersion\":\"{removal}\""),
        delay: Duration::from_secs(3),
    });
    opt("false");
    eventually(&fake, &wavelet, "metadata hash removed", |f| {
        hashes(f, "deployments", NS, "web", HASH).1.is_none()
    });
    // Opted in again while the removal is still on its way; the watch expires, so
    // wavelet never sees the removal, only the relisted opted-in workload.
    opt("true");
    fake.inject(Fault::WatchErrorExpired {
        resource: "deployments".into(),
    });
    fake.close_watches();
    eventually(&fake, &wavelet, "adopted again", |f| {
        hashes(f, "deployments", NS, "web", HASH).1.is_some()
    });
    opt("false");
    eventually(
        &fake,
        &wavelet,
        "metadata hash removed the second time",
        |f| hashes(f, "deployments", NS, "web", HASH).1.is_none(),
    );
}

#[test]
fn extra_configmaps_annotation_tracks_other_namespaces() {
    let fake = FakeApi::start();
    fake.apply(configmap("shared", "global", &[("k", "1")]));
    let annotations = json!({"wavelet.dev/update-on-config-change": "true", "wavelet.dev/extra-configmaps": "shared/global"});
    fake.apply(workload(
        "Deployment",
        NS,
        "web",
        annotations,
        json!({"containers": [{"name": "app", "image": "nginx"}]}),
    ));
    let wavelet = Wavelet::start(&fake, FAST);
    eventually(&fake, &wavelet, "adoption", |f| {
        hashes(f, "deployments", NS, "web", HASH).1.is_some()
    });
    fake.merge_patch(
        "configmaps",
        "shared",
        "global",
        json!({"data": {"k": "2"}}),
    );
    eventually(&fake, &wavelet, "rollout", |f| {
        f.revisions("deployments", NS, "web") == 2
    });
}

#[test]
fn a_custom_workload_kind_is_patched_with_a_merge_patch() {
    let fake = FakeApi::start();
    fake.register_resource("argoproj.io", "v1alpha1", "rollouts", "Rollout");
    fake.apply(configmap(NS, "app-config", &[("color", "blue")]));
    let mut rollout = workload(
        "Deployment",
        NS,
        "ro",
        opted_in(),
        mounts_configmap("app-config"),
    );
    rollout["apiVersion"] = json!("argoproj.io/v1alpha1");
    rollout["kind"] = json!("Rollout");
    fake.apply(rollout);
    let mut args = FAST.to_vec();
    args.extend(["--workload-kinds", "argoproj.io/v1alpha1/rollouts"]);
    let wavelet = Wavelet::start(&fake, &args);
    eventually(&fake, &wavelet, "adoption", |f| {
        hashes(f, "rollouts", NS, "ro", HASH).1.is_some()
    });
    fake.merge_patch(
        "configmaps",
        NS,
        "app-config",
        json!({"data": {"color": "green"}}),
    );
    eventually(&fake, &wavelet, "rollout", |f| {
        hashes(f, "rollouts", NS, "ro", HASH).0.is_some()
    });
    for patch in fake.patches("rollouts", NS, "ro") {
        assert_eq!(
            patch.header("content-type"),
            Some("application/merge-patch+json")
        );
    }
}

#[test]
fn namespaces_flag_limits_what_is_watched() {
    let fake = FakeApi::start();
    for ns in ["team-a", "team-b"] {
        add_web(&fake, ns);
    }
    add_barrier(&fake, "configmaps", "team-a");
    let mut args = fast_one_worker();
    args.extend(["--namespaces", "team-a"]);
    let wavelet = Wavelet::start(&fake, &args);
    eventually(&fake, &wavelet, "adoption in team-a", |f| {
        hashes(f, "deployments", "team-a", "web", HASH).1.is_some()
    });
    barrier_change(&fake, &wavelet, "configmaps", "team-a");
    assert_eq!(
        hashes(&fake, "deployments", "team-b", "web", HASH),
        (None, None)
    );
    assert!(
        fake.requests()
            .iter()
            .all(|r| !r.path.starts_with("/api/v1/configmaps")),
        "no cluster-wide list"
    );
}

#[test]
fn hash_key_file_publishes_an_hmac_instead_of_a_plain_hash() {
    let fake = FakeApi::start();
    fake.apply(secret(NS, "creds", &[("password", "hunter2")]));
    let spec = json!({"containers": [{"name": "app", "image": "nginx", "envFrom": [{"secretRef": {"name": "creds"}}]}]});
    fake.apply(workload("Deployment", NS, "web", opted_in(), spec));
    let key_file = std::env::temp_dir().join(format!("wavelet-hmac-{}", std::process::id()));
    std::fs::write(&key_file, "s3cret-key\n").unwrap();
    let mut args = FAST.to_vec();
    args.extend(["--hash-key-file", key_file.to_str().unwrap()]);
    let wavelet = Wavelet::start(&fake, &args);
    eventually(&fake, &wavelet, "adoption", |f| {
        hashes(f, "deployments", NS, "web", HASH).1.is_some()
    });
    let published = hashes(&fake, "deployments", NS, "web", HASH).1.unwrap();
    let plain = expected_hash(&fake, "deployments", NS, "web");
    assert_ne!(published, plain, "the plain SHA-256 must not be published");

    // The HMAC is over the same canonical form, keyed without the trailing newline.
    use wavelet::objects::{ConfigObject, WorkloadObject};
    let obj: WorkloadObject =
        serde_json::from_value(fake.get("deployments", NS, "web").unwrap()).unwrap();
    let refs = wavelet::model::references::references(&obj);
    let digests = ConfigObject::secret(fake.get("secrets", NS, "creds").unwrap()).unwrap();
    let expected =
        wavelet::model::hash::compute([(&refs[0], Some(digests.digests()))], Some(b"s3cret-key"))
            .hash;
    assert_eq!(published, expected);
    let _ = std::fs::remove_file(key_file);
}

/// Regression: the workload's own MODIFIED event used to reconcile it at once, rolling
/// with the first of several changes inside the debounce window. (The window is long:
/// the second change must reach wavelet inside it even on a loaded machine, where a
/// 1.5 s window was seen too short once in a few runs.)
#[test]
fn an_update_of_the_workload_itself_does_not_cut_the_debounce_window_short() {
    let fake = FakeApi::start();
    add_barrier(&fake, "configmaps", NS);
    fake.apply(configmap(NS, "app-config", &[("n", "0")]));
    fake.apply(workload(
        "Deployment",
        NS,
        "web",
        opted_in(),
        mounts_configmap("app-config"),
    ));
    let wavelet = Wavelet::start(
        &fake,
        &[
            "--debounce",
            "3s",
            "--min-rollout-interval",
            "0s",
            "--workers",
            "1",
        ],
    );
    eventually(&fake, &wavelet, "adoption", |f| {
        hashes(f, "deployments", NS, "web", HASH).1.is_some()
    });
    fake.merge_patch("configmaps", NS, "app-config", json!({"data": {"n": "1"}}));
    // Scenario pacing, not a wait: the workload's update lands inside the window, between
    // the two changes.
    std::thread::sleep(Duration::from_millis(100));
    fake.merge_patch(
        "deployments",
        NS,
        "web",
        json!({"metadata": {"labels": {"team": "a"}}}),
    );
    std::thread::sleep(Duration::from_millis(100));
    fake.merge_patch("configmaps", NS, "app-config", json!({"data": {"n": "2"}}));
    eventually(&fake, &wavelet, "rollout", |f| {
        f.revisions("deployments", NS, "web") == 2
    });
    barrier_change(&fake, &wavelet, "configmaps", NS);
    let patches = template_patches(&fake, "deployments", NS, "web");
    assert_eq!(patches, 1, "template patches\n{}", wavelet.output());
    assert_eq!(
        hashes(&fake, "deployments", NS, "web", HASH).0.unwrap(),
        expected_hash(&fake, "deployments", NS, "web")
    );
}

/// A template edit that adds a reference rolls the Pods by itself (the new template);
/// wavelet records the new hash on the metadata instead of rolling them a second time.
#[test]
fn a_template_edit_that_adds_a_reference_gives_exactly_one_new_revision() {
    let (fake, wavelet) = adopted("Deployment");
    fake.apply(configmap(NS, "extra", &[("k", "1")]));
    fake.merge_patch(
        "deployments",
        NS,
        "web",
        json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "nginx",
            "volumeMounts": [{"name": "cfg", "mountPath": "/cfg"}],
            "envFrom": [{"configMapRef": {"name": "extra"}}]}]}}}}),
    );
    eventually(&fake, &wavelet, "the new hash recorded", |f| {
        hashes(f, "deployments", NS, "web", HASH).1.as_deref()
            == Some(expected_hash(f, "deployments", NS, "web").as_str())
    });
    assert_eq!(
        fake.revisions("deployments", NS, "web"),
        2,
        "the edit's own"
    );
    assert_eq!(template_patches(&fake, "deployments", NS, "web"), 0);
    // The next data change rolls, once.
    fake.merge_patch("configmaps", NS, "extra", json!({"data": {"k": "2"}}));
    eventually(&fake, &wavelet, "a rollout", |f| {
        f.revisions("deployments", NS, "web") == 3
    });
    assert_eq!(template_patches(&fake, "deployments", NS, "web"), 1);
}

/// A data change within the debounce window of such an edit still rolls, once.
#[test]
fn a_data_change_in_the_window_of_a_template_edit_rolls_once() {
    data_change_and_template_edit_roll_once(None);
}

/// The same when the edit's watch event arrives after the window closed (a lagging watch):
/// the rollout covers the data change, the Pods it starts run the edit too, and the edit's
/// new reference is then recorded without a second rollout.
#[test]
fn a_template_edit_seen_after_the_rollout_it_was_part_of_does_not_roll_again() {
    data_change_and_template_edit_roll_once(Some(Duration::from_millis(600)));
}

/// Changes the data of `app-config` and, right after, edits the template to also read
/// `extra`; with `edit_event_late`, the edit's watch event reaches wavelet that much late
/// (beyond the 200 ms debounce).
fn data_change_and_template_edit_roll_once(edit_event_late: Option<Duration>) {
    let (fake, wavelet) = adopted("Deployment");
    fake.apply(configmap(NS, "extra", &[("k", "1")]));
    if let Some(delay) = edit_event_late {
        fake.inject(Fault::SlowEvent {
            resource: "deployments".into(),
            needle: "\"extra\"".into(),
            delay,
        });
    }
    fake.merge_patch(
        "configmaps",
        NS,
        "app-config",
        json!({"data": {"color": "green"}}),
    );
    fake.merge_patch(
        "deployments",
        NS,
        "web",
        json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "nginx",
            "volumeMounts": [{"name": "cfg", "mountPath": "/cfg"}],
            "envFrom": [{"configMapRef": {"name": "extra"}}]}]}}}}),
    );
    eventually(&fake, &wavelet, "the rollout", |f| {
        template_patches(f, "deployments", NS, "web") == 1
    });
    // Recorded on the metadata. The template's hash covers both changes when the edit was
    // seen inside the window; when it was seen after the rollout, the template's hash is
    // the data change's and the edit's reference is recorded without another rollout.
    eventually(&fake, &wavelet, "the hash current", |f| {
        hashes(f, "deployments", NS, "web", HASH).1.as_deref()
            == Some(expected_hash(f, "deployments", NS, "web").as_str())
    });
    if edit_event_late.is_some() {
        assert_ne!(
            hashes(&fake, "deployments", NS, "web", HASH).0,
            Some(expected_hash(&fake, "deployments", NS, "web")),
            "the rollout came before the edit was seen: its hash is the data change's"
        );
    }
    // The edit's revision and one rollout: three in all, not four.
    assert_eq!(fake.revisions("deployments", NS, "web"), 3);
    fake.merge_patch("configmaps", NS, "extra", json!({"data": {"k": "2"}}));
    // The rollout applied, not only its request received: the fake records a request
    // before it applies it (CI caught the revision read in between once).
    eventually(&fake, &wavelet, "the next rollout", |f| {
        f.revisions("deployments", NS, "web") == 4
    });
    assert_eq!(template_patches(&fake, "deployments", NS, "web"), 2);
}

/// An update of the workload that lands while wavelet's own write is in flight (the
/// Deployment controller's status, someone's label) is newer than what wavelet decided
/// from but older than its write: wavelet waits for its write instead of acting again.
/// (Its write is held a second by the fake, and the write's watch event a second more.)
#[test]
fn an_update_between_our_write_and_its_watch_event_does_not_roll() {
    let (fake, wavelet) = adopted_with_barrier("Deployment");
    fake.apply(configmap(NS, "extra", &[("k", "1")]));
    barrier_change(&fake, &wavelet, "configmaps", NS);
    let patches_before = fake.patches("deployments", NS, "web").len();
    fake.inject(Fault::Slow {
        method: "PATCH".into(),
        resource: "deployments".into(),
        delay: Duration::from_secs(1),
    });
    fake.merge_patch(
        "deployments",
        NS,
        "web",
        json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "nginx",
            "volumeMounts": [{"name": "cfg", "mountPath": "/cfg"}],
            "envFrom": [{"configMapRef": {"name": "extra"}}]}]}}}}),
    );
    eventually(&fake, &wavelet, "wavelet's record sent (and held)", |f| {
        f.patches("deployments", NS, "web").len() > patches_before
    });
    // Its watch event comes a second late: wavelet reconciles on the label first.
    fake.inject(Fault::SlowEvent {
        resource: "deployments".into(),
        needle: expected_hash(&fake, "deployments", NS, "web"),
        delay: Duration::from_secs(1),
    });
    fake.merge_patch(
        "deployments",
        NS,
        "web",
        json!({"metadata": {"labels": {"team": "a"}}}),
    );
    eventually(&fake, &wavelet, "the new hash recorded", |f| {
        hashes(f, "deployments", NS, "web", HASH).1.as_deref()
            == Some(expected_hash(f, "deployments", NS, "web").as_str())
    });
    barrier_change(&fake, &wavelet, "configmaps", NS);
    assert_eq!(template_patches(&fake, "deployments", NS, "web"), 0);
    assert_eq!(
        fake.revisions("deployments", NS, "web"),
        2,
        "the edit's own only"
    );
}
