//! Baselines: what a workload is adopted or taken over with is what its Pods run. A change
//! made while wavelet adopts rolls once after the adoption; a change made while wavelet
//! was stopped rolls once, whatever else changed with it.

use std::time::Duration;

use serde_json::json;

use crate::fake::{FakeApi, Fault};
use crate::util::*;

const NS: &str = "default";
const HASH: &str = "wavelet.dev/config-hash";

/// Regression (issue 31): adoption wrote the hash of the moment its PATCH went out, so a
/// workload whose adoption queued behind others took in a change made meanwhile, and its
/// Pods kept the old configuration for good. Both workloads here are first seen with
/// "blue"; the change to "green" lands while the first adoption PATCH is held.
#[test]
fn a_change_made_while_adopting_rolls_every_workload_once() {
    let fake = FakeApi::start();
    add_barrier(&fake, "configmaps", NS);
    fake.apply(configmap(NS, "app-config", &[("color", "blue")]));
    for name in ["web-a", "web-b"] {
        fake.apply(workload(
            "Deployment",
            NS,
            name,
            opted_in(),
            mounts_configmap("app-config"),
        ));
    }
    fake.inject(Fault::Slow {
        method: "PATCH".into(),
        resource: "deployments".into(),
        delay: Duration::from_secs(3),
    });
    let wavelet = Wavelet::start(&fake, &fast_one_worker());
    fake.merge_patch(
        "configmaps",
        NS,
        "app-config",
        json!({"data": {"color": "green"}}),
    );
    for name in ["web-a", "web-b"] {
        let expected = expected_hash(&fake, "deployments", NS, name);
        eventually(&fake, &wavelet, "each workload rolled to green", |f| {
            hashes(f, "deployments", NS, name, HASH).0.as_deref() == Some(expected.as_str())
        });
    }
    barrier_change(&fake, &wavelet, "configmaps", NS);
    for name in ["web-a", "web-b"] {
        assert_eq!(
            template_patches(&fake, "deployments", NS, name),
            1,
            "{name} rolled more than once:\n{}",
            wavelet.output()
        );
    }
}

const WAVE_HASH: &str = "wave.pusher.com/config-hash";
/// Wave v0.11's hash of ConfigMap app-config {color: blue} / {color: red}: the SHA-256 of
/// `{"configMaps":{"app-config":{"color":"Ymx1ZQ=="}},"secrets":{}}` (and `cmVk`).
const WAVE_BLUE: &str = "26b6a56684068723d54657fcfd3c07595a95e382d1b334f117fd04218d20b236";
const WAVE_RED: &str = "c9cccc0bb85640ab2ad8c1ddff8f925d8203a0d21fbe84f2affb1b380986551f";
/// Reloader's SHA-1 of the same: `printf color=blue | sha1sum`.
const RELOADER_BLUE: &str = "b43a67ea489eeca5706f9bb4e4813bd3c2e23156";
const RELOADER_RED: &str = "4330f3023ac02f9540ee50265f4af3607290dbdd";

/// A cluster Wave managed: Deployment `web` opted in with Wave's key, mounting app-config
/// {color: blue}, whose template carries `wave_hash` as Wave wrote it.
fn left_by_wave(wave_hash: &str) -> FakeApi {
    let fake = FakeApi::start();
    add_barrier(&fake, "configmaps", NS);
    fake.apply(configmap(NS, "app-config", &[("color", "blue")]));
    let mut web = workload(
        "Deployment",
        NS,
        "web",
        json!({"wave.pusher.com/update-on-config-change": "true"}),
        mounts_configmap("app-config"),
    );
    web["spec"]["template"]["metadata"]["annotations"] = json!({WAVE_HASH: wave_hash});
    fake.apply(web);
    fake
}

/// Regression (issue 31): Wave's hash was taken for a wavelet hash, which never equals
/// it, so switching from Wave rolled every workload Wave had hashed.
#[test]
fn taking_over_from_wave_with_nothing_changed_rolls_nothing() {
    let fake = left_by_wave(WAVE_BLUE);
    let wavelet = Wavelet::start(&fake, &fast_one_worker());
    let expected = expected_hash(&fake, "deployments", NS, "web");
    eventually(&fake, &wavelet, "web taken over", |f| {
        hashes(f, "deployments", NS, "web", WAVE_HASH).1.as_deref() == Some(expected.as_str())
    });
    barrier_change(&fake, &wavelet, "configmaps", NS);
    assert_eq!(
        template_patches(&fake, "deployments", NS, "web"),
        0,
        "{}",
        wavelet.output()
    );
    assert!(wavelet.output().contains("taken over from Wave"));
}

#[test]
fn taking_over_from_wave_after_a_change_neither_saw_rolls_once() {
    let fake = left_by_wave(WAVE_RED);
    let wavelet = Wavelet::start(&fake, &fast_one_worker());
    let expected = expected_hash(&fake, "deployments", NS, "web");
    eventually(&fake, &wavelet, "web rolled", |f| {
        hashes(f, "deployments", NS, "web", WAVE_HASH).0.as_deref() == Some(expected.as_str())
    });
    barrier_change(&fake, &wavelet, "configmaps", NS);
    assert_eq!(template_patches(&fake, "deployments", NS, "web"), 1);
    assert!(
        wavelet
            .output()
            .contains("configmap default/app-config has changed since Wave last acted on it"),
        "{}",
        wavelet.output()
    );
}

/// A cluster Reloader managed with its env-vars strategy: Deployment `web` with
/// `reloader.stakater.com/auto`, mounting app-config {color: blue}, its container carrying
/// `STAKATER_APP_CONFIG_CONFIGMAP=<sha1>` from Reloader's last reload.
fn left_by_reloader(sha1: &str) -> FakeApi {
    let fake = FakeApi::start();
    add_barrier(&fake, "configmaps", NS);
    fake.apply(configmap(NS, "app-config", &[("color", "blue")]));
    let mut pod_spec = mounts_configmap("app-config");
    pod_spec["containers"][0]["env"] =
        json!([{"name": "STAKATER_APP_CONFIG_CONFIGMAP", "value": sha1}]);
    fake.apply(workload(
        "Deployment",
        NS,
        "web",
        json!({"reloader.stakater.com/auto": "true"}),
        pod_spec,
    ));
    fake
}

#[test]
fn taking_over_from_reloader_with_nothing_changed_rolls_nothing() {
    let fake = left_by_reloader(RELOADER_BLUE);
    let wavelet = Wavelet::start(&fake, &fast_one_worker());
    let expected = expected_hash(&fake, "deployments", NS, "web");
    eventually(&fake, &wavelet, "web taken over", |f| {
        hashes(f, "deployments", NS, "web", HASH).1.as_deref() == Some(expected.as_str())
    });
    barrier_change(&fake, &wavelet, "configmaps", NS);
    assert_eq!(template_patches(&fake, "deployments", NS, "web"), 0);
    assert!(wavelet.output().contains("taken over from Reloader"));
}

/// Regression (issue 31): a workload whose ConfigMap changed after Reloader's last reload
/// (while neither ran) was adopted as it was, and its Pods kept the old configuration.
#[test]
fn taking_over_from_reloader_after_a_change_neither_saw_rolls_once() {
    let fake = left_by_reloader(RELOADER_RED);
    let wavelet = Wavelet::start(&fake, &fast_one_worker());
    let expected = expected_hash(&fake, "deployments", NS, "web");
    eventually(&fake, &wavelet, "web rolled", |f| {
        hashes(f, "deployments", NS, "web", HASH).0.as_deref() == Some(expected.as_str())
    });
    barrier_change(&fake, &wavelet, "configmaps", NS);
    assert_eq!(template_patches(&fake, "deployments", NS, "web"), 1);
}

/// The annotations strategy: `reloader.stakater.com/last-reloaded-from` names the object.
#[test]
fn reloaders_last_reloaded_from_annotation_is_its_record_too() {
    let fake = left_by_reloader(RELOADER_BLUE);
    fake.merge_patch(
        "deployments",
        NS,
        "web",
        json!({"spec": {"template": {
            "metadata": {"annotations": {"reloader.stakater.com/last-reloaded-from": format!(
                "{{\"type\":\"CONFIGMAP\",\"name\":\"app-config\",\"namespace\":\"{NS}\",\"hash\":\"{RELOADER_RED}\",\"containerRefs\":[\"app\"],\"observedAt\":1}}"
            )}},
            "spec": {"containers": [{"name": "app", "image": "nginx", "env": null}]}
        }}}),
    );
    let wavelet = Wavelet::start(&fake, &fast_one_worker());
    let expected = expected_hash(&fake, "deployments", NS, "web");
    eventually(&fake, &wavelet, "web rolled", |f| {
        hashes(f, "deployments", NS, "web", HASH).0.as_deref() == Some(expected.as_str())
    });
    barrier_change(&fake, &wavelet, "configmaps", NS);
    assert_eq!(template_patches(&fake, "deployments", NS, "web"), 1);
}

/// wavelet with [`fast_one_worker`] and `extra` flags.
fn start(fake: &FakeApi, extra: &[&str]) -> Wavelet {
    let mut args = fast_one_worker();
    args.extend_from_slice(extra);
    Wavelet::start(fake, &args)
}

/// Deployment `web` referencing `refs` (a pod spec), adopted by a first wavelet, which is
/// then stopped.
fn adopted_then_stopped(
    fake: &FakeApi,
    pod_spec: serde_json::Value,
    annotations: serde_json::Value,
    flags: &[&str],
) {
    add_barrier(fake, "configmaps", NS);
    fake.apply(workload("Deployment", NS, "web", annotations, pod_spec));
    let wavelet = start(fake, flags);
    eventually(fake, &wavelet, "web adopted", |f| {
        hashes(f, "deployments", NS, "web", HASH).1.is_some()
    });
    assert!(
        fake.get("deployments", NS, "web").unwrap()["metadata"]["annotations"]
            ["wavelet.dev/config-basis"]
            .is_string()
    );
    drop(wavelet);
}

/// Starts wavelet with `flags`, waits until every earlier change was reconciled, and
/// returns it with the rollouts of `web` so far.
fn restarted(fake: &FakeApi, flags: &[&str]) -> (Wavelet, usize) {
    let wavelet = start(fake, flags);
    barrier_change(fake, &wavelet, "configmaps", NS);
    let rolled = template_patches(fake, "deployments", NS, "web");
    (wavelet, rolled)
}

/// Regression (issue 31): Reloader's chart with `resourceLabelSelector` and then without
/// rolled every workload at each switch, with no data changed.
#[test]
fn toggling_the_resource_label_selector_rolls_nothing_but_a_change_made_meanwhile_rolls_once() {
    let fake = FakeApi::start();
    let mut labeled = configmap(NS, "app-config", &[("color", "blue")]);
    labeled["metadata"]["labels"] = json!({"team": "a"});
    fake.apply(labeled);
    // Not labeled: counts without the selector, reads as absent with it.
    fake.apply(configmap(NS, "extra", &[("size", "L")]));
    let barrier_labeled = |fake: &FakeApi| {
        fake.merge_patch(
            "configmaps",
            NS,
            "barrier",
            json!({"metadata": {"labels": {"team": "a"}}}),
        );
    };
    let mut annotations = opted_in();
    annotations["wavelet.dev/extra-configmaps"] = json!("extra");
    adopted_then_stopped(&fake, mounts_configmap("app-config"), annotations, &[]);
    barrier_labeled(&fake);
    let (wavelet, rolled) = restarted(&fake, &["--resource-label-selector", "team=a"]);
    assert_eq!(
        rolled,
        0,
        "turning the selector on rolled:\n{}",
        wavelet.output()
    );
    assert!(wavelet.wait_for_output(
        "the settings that shape the hash changed",
        Duration::from_secs(15)
    ));
    drop(wavelet);
    let (wavelet, rolled) = restarted(&fake, &[]);
    assert_eq!(rolled, 0, "turning it off rolled:\n{}", wavelet.output());
    drop(wavelet);

    // Changed while wavelet was stopped, and the selector turned on meanwhile.
    fake.merge_patch(
        "configmaps",
        NS,
        "app-config",
        json!({"data": {"color": "green"}}),
    );
    let wavelet = start(&fake, &["--resource-label-selector", "team=a"]);
    eventually(&fake, &wavelet, "web rolled once", |f| {
        template_patches(f, "deployments", NS, "web") == 1
    });
    barrier_change(&fake, &wavelet, "configmaps", NS);
    assert_eq!(template_patches(&fake, "deployments", NS, "web"), 1);
}

#[test]
fn ignoring_secrets_and_back_rolls_nothing_but_a_change_made_meanwhile_rolls_once() {
    let fake = FakeApi::start();
    fake.apply(configmap(NS, "app-config", &[("color", "blue")]));
    fake.apply(secret(NS, "db", &[("password", "hunter2")]));
    let mut pod_spec = mounts_configmap("app-config");
    pod_spec["containers"][0]["envFrom"] = json!([{"secretRef": {"name": "db"}}]);
    adopted_then_stopped(&fake, pod_spec, opted_in(), &[]);
    let (wavelet, rolled) = restarted(&fake, &["--ignore-secrets"]);
    assert_eq!(rolled, 0, "--ignore-secrets rolled:\n{}", wavelet.output());
    drop(wavelet);
    fake.merge_patch(
        "configmaps",
        NS,
        "app-config",
        json!({"data": {"color": "green"}}),
    );
    let wavelet = start(&fake, &[]);
    eventually(&fake, &wavelet, "web rolled once", |f| {
        template_patches(f, "deployments", NS, "web") == 1
    });
    barrier_change(&fake, &wavelet, "configmaps", NS);
    assert_eq!(template_patches(&fake, "deployments", NS, "web"), 1);
}

/// A rotated key changes every hash and no data: recorded, no rollout. (The old key not
/// given any more, a data change made across the rotation is not told apart: docs,
/// "Switching without a rollout".)
#[test]
fn rotating_the_hash_key_rolls_nothing() {
    let dir = TempDir::new("takeover-key");
    let k1 = dir.write("k1", "first key\n");
    let k2 = dir.write("k2", "second key\n");
    let fake = FakeApi::start();
    fake.apply(configmap(NS, "app-config", &[("color", "blue")]));
    let k1 = k1.to_str().unwrap();
    adopted_then_stopped(
        &fake,
        mounts_configmap("app-config"),
        opted_in(),
        &["--hash-key-file", k1],
    );
    let before = hashes(&fake, "deployments", NS, "web", HASH).1;
    // The barrier's hash is keyed too: the positive signal is web's record itself (the
    // barrier's own record line comes too, maybe first).
    let wavelet = start(&fake, &["--hash-key-file", k2.to_str().unwrap()]);
    assert!(
        wavelet.wait_for_output(
            "deployment default/web: recorded config hash",
            Duration::from_secs(60)
        ),
        "{}",
        wavelet.output()
    );
    assert_eq!(
        template_patches(&fake, "deployments", NS, "web"),
        0,
        "a new key rolled:\n{}",
        wavelet.output()
    );
    assert_ne!(
        hashes(&fake, "deployments", NS, "web", HASH).1,
        before,
        "re-recorded"
    );
}

/// The key id `k=` a basis records for `key` (HMAC under it, never the key).
fn key_id(key: &str) -> String {
    use wavelet::model::hash::{hex, hmac_sha256};
    hex(&hmac_sha256(key.as_bytes(), b"wavelet.dev/hash-key-id")[..8])
}

/// `web` adopted under the key "first key", then stopped, its ConfigMap `app-config`
/// changed to green when `change` (while wavelet was down); returns the key files' dir.
fn adopted_under_the_first_key(fake: &FakeApi, change: bool) -> TempDir {
    let dir = TempDir::new("takeover-rotation");
    let k1 = dir.write("k1", "first key\n");
    fake.apply(configmap(NS, "app-config", &[("color", "blue")]));
    adopted_then_stopped(
        fake,
        mounts_configmap("app-config"),
        opted_in(),
        &["--hash-key-file", k1.to_str().unwrap()],
    );
    if change {
        fake.merge_patch(
            "configmaps",
            NS,
            "app-config",
            json!({"data": {"color": "green"}}),
        );
    }
    dir
}

/// The positive signal under a key (whose hashes the tests cannot compute): the barrier's
/// rollout, reconciled after every earlier change (see [`barrier_change`]).
///
/// The barrier was recorded by the run before, maybe under another key: it is changed only
/// once this run re-recorded it under `key`. Changed before that, and the old key gone,
/// its change cannot be told from the rotation (recorded, not rolled): the test would wait
/// for a rollout that must not come.
fn keyed_barrier_change(fake: &FakeApi, wavelet: &Wavelet, key: &str) {
    let recorded_under = format!("v1 k={} ", key_id(key));
    eventually(
        fake,
        wavelet,
        "the barrier recorded under the current key",
        |f| {
            f.get("deployments", NS, "barrier").is_some_and(|barrier| {
                barrier["metadata"]["annotations"]["wavelet.dev/config-basis"]
                    .as_str()
                    .is_some_and(|basis| basis.starts_with(&recorded_under))
            })
        },
    );
    let before = fake.revisions("deployments", NS, "barrier");
    fake.merge_patch(
        "configmaps",
        NS,
        "barrier",
        json!({"data": {"n": (before + 1).to_string()}}),
    );
    eventually(fake, wavelet, "the barrier's rollout", |f| {
        f.revisions("deployments", NS, "barrier") > before
    });
}

/// Issue 31: rotating the key the way a Secret is rotated (the new key first, the old one
/// kept on the next line) re-records under the new key alone and rolls nothing.
#[test]
fn rotating_the_hash_key_with_the_old_one_still_given_rolls_nothing() {
    let fake = FakeApi::start();
    let dir = adopted_under_the_first_key(&fake, false);
    let both = dir.write("both", "second key\nfirst key\n");
    let wavelet = start(&fake, &["--hash-key-file", both.to_str().unwrap()]);
    assert!(
        wavelet.wait_for_output(
            "the settings that shape the hash changed",
            Duration::from_secs(60)
        ),
        "{}",
        wavelet.output()
    );
    keyed_barrier_change(&fake, &wavelet, "second key");
    assert_eq!(
        template_patches(&fake, "deployments", NS, "web"),
        0,
        "{}",
        wavelet.output()
    );
    let basis = fake.get("deployments", NS, "web").unwrap()["metadata"]["annotations"]
        ["wavelet.dev/config-basis"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        basis.starts_with(&format!("v1 k={} ", key_id("second key"))),
        "recorded under the first line's key alone: {basis}"
    );
    let output = wavelet.output();
    assert!(!output.contains("first key") && !output.contains("second key"));
}

/// Regression (issue 31): a data change made while wavelet was stopped across a key
/// rotation was taken for the rotation and never rolled. With the old key still in the
/// file, the parts recorded under it are recomputed and compared.
#[test]
fn a_change_made_while_stopped_across_a_key_rotation_rolls_once() {
    let fake = FakeApi::start();
    let dir = adopted_under_the_first_key(&fake, true);
    let both = dir.write("both", "second key\nfirst key\n");
    let wavelet = start(&fake, &["--hash-key-file", both.to_str().unwrap()]);
    eventually(&fake, &wavelet, "web rolled once", |f| {
        template_patches(f, "deployments", NS, "web") == 1
    });
    keyed_barrier_change(&fake, &wavelet, "second key");
    assert_eq!(
        template_patches(&fake, "deployments", NS, "web"),
        1,
        "{}",
        wavelet.output()
    );
}

/// With the old key gone, the change cannot be told from the rotation: recorded, no
/// rollout, as before, and one Info line says which objects could not be checked.
#[test]
fn across_a_rotation_without_the_old_key_nothing_rolls_and_the_log_says_what_was_not_checked() {
    let fake = FakeApi::start();
    let dir = adopted_under_the_first_key(&fake, true);
    let k2 = dir.write("k2", "second key\n");
    let wavelet = start(&fake, &["--hash-key-file", k2.to_str().unwrap()]);
    let line = format!(
        "the key it was recorded under (k={}) is no longer in --hash-key-file: a change made while wavelet was stopped could not be checked in configmap default/app-config",
        key_id("first key")
    );
    assert!(
        wavelet.wait_for_output(&line, Duration::from_secs(60)),
        "{}",
        wavelet.output()
    );
    keyed_barrier_change(&fake, &wavelet, "second key");
    assert_eq!(
        template_patches(&fake, "deployments", NS, "web"),
        0,
        "{}",
        wavelet.output()
    );
    assert_eq!(wavelet.output().matches(&line).count(), 1, "once");
}

/// A workload recorded before bases were (an older wavelet) is not written to at start
/// (no PATCH per workload after an upgrade); its next rollout writes the basis, and a flag
/// changed after that rolls nothing.
#[test]
fn a_hash_recorded_without_a_basis_gets_one_with_its_next_rollout_not_at_start() {
    let fake = FakeApi::start();
    fake.apply(configmap(NS, "app-config", &[("color", "blue")]));
    fake.apply(secret(NS, "db", &[("password", "hunter2")]));
    let mut pod_spec = mounts_configmap("app-config");
    pod_spec["containers"][0]["envFrom"] = json!([{"secretRef": {"name": "db"}}]);
    adopted_then_stopped(&fake, pod_spec, opted_in(), &[]);
    fake.merge_patch(
        "deployments",
        NS,
        "web",
        json!({"metadata": {"annotations": {"wavelet.dev/config-basis": null}}}),
    );
    let patches = fake.patches("deployments", NS, "web").len();
    let (wavelet, rolled) = restarted(&fake, &[]);
    assert_eq!(rolled, 0);
    assert_eq!(
        fake.patches("deployments", NS, "web").len(),
        patches,
        "written at start:\n{}",
        wavelet.output()
    );
    fake.merge_patch(
        "configmaps",
        NS,
        "app-config",
        json!({"data": {"color": "green"}}),
    );
    eventually(&fake, &wavelet, "the rollout writes the basis", |f| {
        f.get("deployments", NS, "web").unwrap()["metadata"]["annotations"]
            ["wavelet.dev/config-basis"]
            .is_string()
    });
    drop(wavelet);
    let (wavelet, rolled) = restarted(&fake, &["--ignore-secrets"]);
    assert_eq!(rolled, 1, "{}", wavelet.output());
}

/// The same for a Secret, watched as metadata: its new version makes its data stale
/// before it is read, so the first-seen hash is noted then.
#[test]
fn a_secret_change_made_while_adopting_rolls_every_workload_once() {
    let fake = FakeApi::start();
    add_barrier(&fake, "configmaps", NS);
    fake.apply(secret(NS, "db", &[("password", "one")]));
    let pod_spec = json!({"volumes": [{"name": "s", "secret": {"secretName": "db"}}],
                          "containers": [{"name": "app", "image": "nginx"}]});
    for name in ["web-a", "web-b"] {
        fake.apply(workload(
            "Deployment",
            NS,
            name,
            opted_in(),
            pod_spec.clone(),
        ));
    }
    fake.inject(Fault::Slow {
        method: "PATCH".into(),
        resource: "deployments".into(),
        delay: Duration::from_secs(3),
    });
    let wavelet = Wavelet::start(&fake, &fast_one_worker());
    fake.merge_patch(
        "secrets",
        NS,
        "db",
        json!({"data": {"password": wavelet::objects::base64::encode(b"two")}}),
    );
    for name in ["web-a", "web-b"] {
        let expected = expected_hash(&fake, "deployments", NS, name);
        eventually(
            &fake,
            &wavelet,
            "each workload rolled to the new Secret",
            |f| hashes(f, "deployments", NS, name, HASH).0.as_deref() == Some(expected.as_str()),
        );
    }
    barrier_change(&fake, &wavelet, "configmaps", NS);
    for name in ["web-a", "web-b"] {
        assert_eq!(
            template_patches(&fake, "deployments", NS, name),
            1,
            "{name}:\n{}",
            wavelet.output()
        );
    }
}
