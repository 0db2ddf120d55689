//! What a workload is adopted with, and what rolls after: adoption takes the configuration
//! as it was when wavelet first saw the workload, in the API server's order. A ConfigMap
//! change written before the workload (or before its opt-in) that a lagging watch delivers
//! after wavelet adopted it rolls nothing; every change after it rolls once; a workload
//! opted out and in again rolls once if its configuration changed while it was out, and
//! never for the opt-in itself.

use serde_json::json;

use crate::fake::{FakeApi, Fault};
use crate::util::*;

const NS: &str = "default";
const HASH: &str = "wavelet.dev/config-hash";
const OPT_IN: &str = "wavelet.dev/update-on-config-change";

fn set_color(fake: &FakeApi, color: &str) {
    fake.merge_patch(
        "configmaps",
        NS,
        "app-config",
        json!({"data": {"color": color}}),
    );
}

fn opt(fake: &FakeApi, value: serde_json::Value) {
    fake.merge_patch(
        "statefulsets",
        NS,
        "web",
        json!({"metadata": {"annotations": {OPT_IN: value}}}),
    );
}

/// wavelet's hash on the metadata of `web` (an adoption's, a rollout's, a record's).
fn on_metadata(fake: &FakeApi) -> Option<String> {
    hashes(fake, "statefulsets", NS, "web", HASH).1
}

/// The hash `web` records: its metadata's, else its template's (opted in again without a
/// change, nothing is written).
fn recorded(fake: &FakeApi) -> Option<String> {
    let (template, metadata) = hashes(fake, "statefulsets", NS, "web", HASH);
    metadata.or(template)
}

/// Waits until `web` records the hash of its configuration now, then until every earlier
/// change was reconciled (the barrier), and checks its revisions and the rollouts wavelet
/// wrote.
fn settled(fake: &FakeApi, wavelet: &Wavelet, revisions: u64, rollouts: usize, why: &str) {
    eventually(fake, wavelet, "web records its configuration", |f| {
        recorded(f) == Some(expected_hash(f, "statefulsets", NS, "web"))
    });
    barrier_change(fake, wavelet, "configmaps", NS);
    assert_eq!(
        (
            fake.revisions("statefulsets", NS, "web"),
            template_patches(fake, "statefulsets", NS, "web")
        ),
        (revisions, rollouts),
        "{why}:\n{}",
        wavelet.output()
    );
}

/// Holds the ConfigMaps watch silent (until `heal`): wavelet closes and reopens its
/// watches, and the ConfigMaps one gets the stall; returns once it is open.
fn stall_configmaps_watch(fake: &FakeApi, wavelet: &Wavelet) {
    fake.inject(Fault::StallWatch {
        resource: "configmaps".into(),
        duration: std::time::Duration::from_secs(600),
    });
    fake.close_watches();
    eventually(
        fake,
        wavelet,
        "the ConfigMaps watch reopened, silent",
        |f| f.pending_faults() == 0,
    );
}

/// A ConfigMap, a barrier, wavelet running (one worker, so the barrier orders).
fn world() -> (FakeApi, Wavelet) {
    let fake = FakeApi::start();
    add_barrier(&fake, "configmaps", NS);
    fake.apply(configmap(NS, "app-config", &[("color", "blue")]));
    let wavelet = Wavelet::start(&fake, &fast_one_worker());
    wait_all_adopted(&fake, &wavelet);
    (fake, wavelet)
}

fn create_web(fake: &FakeApi) {
    fake.apply(workload(
        "StatefulSet",
        NS,
        "web",
        opted_in(),
        mounts_configmap("app-config"),
    ));
}

#[test]
fn a_change_written_before_the_workload_and_delivered_late_rolls_nothing() {
    // Found by the soak (seed 1795938936839133663): a StatefulSet created 100 ms after an
    // edit of its ConfigMap, while the ConfigMaps watch was stalled, was adopted from the
    // data before the edit; the edit, delivered after, rolled it, though its Pods had
    // started with it.
    let (fake, wavelet) = world();
    stall_configmaps_watch(&fake, &wavelet);
    set_color(&fake, "green");
    create_web(&fake);
    eventually(&fake, &wavelet, "web adopted", |f| on_metadata(f).is_some());
    fake.heal();
    settled(
        &fake,
        &wavelet,
        1,
        0,
        "the edit came before web: nothing to roll",
    );
    assert!(
        wavelet
            .output()
            .contains("was written before wavelet first saw the workload"),
        "{}",
        wavelet.output()
    );
    // A change after it rolls, once.
    set_color(&fake, "red");
    settled(&fake, &wavelet, 2, 1, "one rollout for one change");
}

#[test]
fn a_change_written_before_an_opt_in_again_and_delivered_late_rolls_nothing() {
    // Adopted, never rolled (nothing on the template), opted out: opted in again, it is
    // adopted anew; an edit made before the opt-in and delivered after it is part of that.
    let (fake, wavelet) = world();
    create_web(&fake);
    settled(&fake, &wavelet, 1, 0, "adoption rolls nothing");
    opt(&fake, json!(null));
    eventually(&fake, &wavelet, "wavelet's hash removed", |f| {
        on_metadata(f).is_none()
    });
    stall_configmaps_watch(&fake, &wavelet);
    set_color(&fake, "green");
    opt(&fake, json!("true"));
    eventually(&fake, &wavelet, "web adopted again", |f| {
        on_metadata(f).is_some()
    });
    fake.heal();
    settled(&fake, &wavelet, 1, 0, "the edit came before the opt-in");
    set_color(&fake, "red");
    settled(&fake, &wavelet, 2, 1, "one rollout for one change");
}

#[test]
fn opted_out_and_in_again_a_workload_rolls_once_per_change_and_for_a_change_while_out() {
    let (fake, mut wavelet) = world();
    create_web(&fake);
    settled(&fake, &wavelet, 1, 0, "adoption rolls nothing");
    set_color(&fake, "green");
    settled(&fake, &wavelet, 2, 1, "one rollout for one change");

    // Out and in again, nothing changed meanwhile: no rollout.
    opt(&fake, json!("false"));
    eventually(&fake, &wavelet, "wavelet's hash removed", |f| {
        on_metadata(f).is_none()
    });
    opt(&fake, json!("true"));
    settled(&fake, &wavelet, 2, 1, "nothing changed while out");

    // Out, two changes, a new wavelet (a restart, as a new leader), in again: one rollout.
    opt(&fake, json!(null));
    eventually(&fake, &wavelet, "wavelet's hash removed", |f| {
        on_metadata(f).is_none()
    });
    set_color(&fake, "red");
    set_color(&fake, "yellow");
    wavelet.kill();
    wavelet = Wavelet::start(&fake, &fast_one_worker());
    opt(&fake, json!("true"));
    settled(&fake, &wavelet, 3, 2, "changed while out: one rollout");

    // Then one rollout per change.
    set_color(&fake, "white");
    settled(&fake, &wavelet, 4, 3, "one rollout for one change");
    set_color(&fake, "black");
    settled(&fake, &wavelet, 5, 4, "one rollout for one change");
}

#[test]
fn a_change_right_after_an_adoption_the_watch_has_not_shown_yet_rolls_in_the_fan_out() {
    // Seen in CI (commit 595cd52): b's adoption PATCH was written, the change came before
    // wavelet's watch showed it, and the fan-out, counting only the workloads the cache
    // showed adopted, found no shared change: b rolled at once, outside the waves.
    let fake = FakeApi::start();
    fake.apply(configmap(NS, "shared", &[("k", "1")]));
    fake.apply(workload(
        "Deployment",
        NS,
        "a",
        opted_in(),
        mounts_configmap("shared"),
    ));
    let wavelet = Wavelet::start(&fake, FAST);
    eventually(&fake, &wavelet, "a adopted", |f| {
        hashes(f, "deployments", NS, "a", HASH).1.is_some()
    });
    // b's adoption (the first StatefulSet line with a basis) reaches wavelet 5 s late.
    fake.inject(Fault::SlowEvent {
        resource: "statefulsets".into(),
        needle: "wavelet.dev/config-basis".into(),
        delay: std::time::Duration::from_secs(5),
    });
    fake.apply(workload(
        "StatefulSet",
        NS,
        "b",
        opted_in(),
        mounts_configmap("shared"),
    ));
    eventually(&fake, &wavelet, "b's adoption written", |f| {
        hashes(f, "statefulsets", NS, "b", HASH).1.is_some()
    });
    // a's new Pods never get Ready within the test: the fan-out holds b after a.
    fake.set_ready_delay(std::time::Duration::from_secs(600));
    fake.merge_patch("configmaps", NS, "shared", json!({"data": {"k": "2"}}));
    let b_rolled = |f: &FakeApi| template_patches(f, "statefulsets", NS, "b");
    eventually(
        &fake,
        &wavelet,
        "a rolled, b waiting for wave 2 (or rolled)",
        |f| {
            template_patches(f, "deployments", NS, "a") == 1
                && (b_rolled(f) > 0
                    || wavelet
                        .output()
                        .contains(&format!("statefulset {NS}/b: PENDING: waiting for wave 2")))
        },
    );
    assert_eq!(
        b_rolled(&fake),
        0,
        "b rolled outside the fan-out:\n{}",
        wavelet.output()
    );
}
