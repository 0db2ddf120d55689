//! Start-up under the default request budget (issue 31, items 5–7): ready as soon as the
//! caches are synced, adoption in the background behind every change to act on, and the
//! Secrets in use read by a few LISTs rather than one GET each.

use serde_json::json;

use crate::fake::{FakeApi, Request};
use crate::util::*;

const NS: &str = "startup";
const HASH: &str = "wavelet.dev/config-hash";
/// Workloads still to adopt at start: 15 s of PATCHes at the default 20 a second.
const TO_ADOPT: usize = 300;

/// StatefulSet `adopted`, which uses Secret `rotated` and already carries the hash of it
/// (adopted by an earlier run), and [`TO_ADOPT`] opted-in StatefulSets `new-N` that mount
/// ConfigMap `shared` and carry no hash yet. StatefulSets: the fake gives a Deployment a
/// ReplicaSet and Pods, which hundreds of them make slow to load.
fn cluster_to_adopt(fake: &FakeApi) {
    adopted_workload(fake);
    new_workloads(fake);
}

/// StatefulSet `adopted` (see [`cluster_to_adopt`]).
fn adopted_workload(fake: &FakeApi) {
    fake.apply(secret(NS, "rotated", &[("password", "first")]));
    fake.apply(workload(
        "StatefulSet",
        NS,
        "adopted",
        opted_in(),
        json!({"containers": [{"name": "app", "image": "nginx",
            "envFrom": [{"secretRef": {"name": "rotated"}}]}]}),
    ));
    let hash = expected_hash(fake, "statefulsets", NS, "adopted");
    fake.merge_patch(
        "statefulsets",
        NS,
        "adopted",
        json!({"metadata": {"annotations": {HASH: hash}},
               "spec": {"template": {"metadata": {"annotations": {HASH: hash}}}}}),
    );
}

/// The [`TO_ADOPT`] StatefulSets `new-N` and their ConfigMap (see [`cluster_to_adopt`]).
fn new_workloads(fake: &FakeApi) {
    fake.apply(configmap(NS, "shared", &[("color", "blue")]));
    fake.apply_all((0..TO_ADOPT).map(|n| {
        workload(
            "StatefulSet",
            NS,
            &format!("new-{n}"),
            opted_in(),
            mounts_configmap("shared"),
        )
    }));
}

fn is_adoption(r: &Request) -> bool {
    r.method == "PATCH"
        && r.path
            .starts_with(&format!("/apis/apps/v1/namespaces/{NS}/statefulsets/new-"))
}

fn is_patch_of_adopted(r: &Request) -> bool {
    r.method == "PATCH" && r.path == format!("/apis/apps/v1/namespaces/{NS}/statefulsets/adopted")
}

/// The default budget (no `--api-qps`): the fast test flags otherwise.
fn start(fake: &FakeApi) -> Wavelet {
    Wavelet::start(fake, FAST)
}

/// Rotates Secret `rotated` (its password from "first" to "second").
fn rotate(fake: &FakeApi) {
    let encoded = wavelet::objects::base64::encode(b"second");
    fake.merge_patch(
        "secrets",
        NS,
        "rotated",
        json!({"data": {"password": encoded}}),
    );
}

/// Rotates Secret `rotated` and waits for the rollout of `adopted`: the adoption PATCHes
/// sent before the rotation, and between it and that rollout.
fn rotate_and_count_adoptions(fake: &FakeApi, wavelet: &Wavelet) -> (usize, usize) {
    let mark = fake.request_count();
    rotate(fake);
    eventually(fake, wavelet, "the rollout of `adopted`", |f| {
        f.requests_since(mark).iter().any(is_patch_of_adopted)
    });
    let since = fake.requests_since(mark);
    let rollout = since.iter().position(is_patch_of_adopted).unwrap();
    let between = since[..rollout].iter().filter(|r| is_adoption(r)).count();
    let before = fake.requests()[..mark]
        .iter()
        .filter(|r| is_adoption(r))
        .count();
    (before, between)
}

/// Issue 31 item 5: the rollout of a changed Secret does not wait behind the 300 adoptions
/// queued before it, neither in the work queue nor in the request budget. Read from the
/// order of the requests: few adoption PATCHes go between the change and its rollout, and
/// most of the adoptions come after it.
#[test]
fn a_secret_change_of_an_adopted_workload_rolls_before_the_adoptions_queued_ahead_of_it() {
    let fake = FakeApi::start();
    cluster_to_adopt(&fake);
    let wavelet = start(&fake);
    let (before, between) = rotate_and_count_adoptions(&fake, &wavelet);
    // The change waits for its debounce (200 ms), one Secret GET and the requests already
    // in flight: a few dozen PATCHes at 20 a second at most, not the hundreds queued.
    assert!(
        between <= 60,
        "{between} adoption PATCHes went between the change and its rollout ({before} before the change)"
    );
    assert!(
        before + between < TO_ADOPT / 2,
        "most adoptions were still to come ({before} before the change, {between} until its rollout)"
    );
    eventually(&fake, &wavelet, "the rollout carries the new hash", |f| {
        hashes(f, "statefulsets", NS, "adopted", HASH).0
            == Some(expected_hash(f, "statefulsets", NS, "adopted"))
    });
}

/// The same after start: a GitOps sync adds 300 workloads while wavelet runs, and a Secret
/// rotation of a workload adopted long before rolls it ahead of their adoptions.
#[test]
fn a_secret_change_rolls_before_the_adoptions_of_workloads_added_after_the_start() {
    let fake = FakeApi::start();
    adopted_workload(&fake);
    let wavelet = start(&fake);
    new_workloads(&fake);
    wait_for_metric(&wavelet, "wavelet_adoptions_pending", "", |n| {
        n >= (TO_ADOPT / 2) as f64
    });
    let (before, between) = rotate_and_count_adoptions(&fake, &wavelet);
    // At least half were pending at the change: the rollout went ahead of most of them.
    assert!(
        between <= 60 && before + between < TO_ADOPT,
        "{between} adoption PATCHes went between the change and its rollout ({before} before the change)"
    );
}

/// Issue 31 item 7: /readyz answers 200 while adoption goes on, which
/// `wavelet_adoptions_pending` counts down; one Info line says when it is done.
#[test]
fn ready_answers_before_adoption_is_done_and_the_gauge_counts_what_is_left() {
    let fake = FakeApi::start();
    cluster_to_adopt(&fake);
    let wavelet = start(&fake);
    let (code, body) = wavelet.http_get("/readyz");
    assert_eq!(code, 200, "/readyz right after the initial sync: {body}");
    let pending = metric(&wavelet, "wavelet_adoptions_pending", "");
    let adopted = fake.requests().iter().filter(|r| is_adoption(r)).count();
    assert!(
        pending > 0.0 && pending <= (TO_ADOPT + 1) as f64,
        "wavelet_adoptions_pending {pending} while {adopted} of {TO_ADOPT} are adopted"
    );
    assert!(
        wavelet.wait_for_output("adoption complete", std::time::Duration::from_secs(120)),
        "no adoption-complete line:\n{}",
        wavelet.output()
    );
    assert_eq!(wavelet.output().matches("adoption complete").count(), 1);
    assert_eq!(metric(&wavelet, "wavelet_adoptions_pending", ""), 0.0);
    assert_eq!(
        fake.requests().iter().filter(|r| is_adoption(r)).count(),
        TO_ADOPT,
        "each adopted once"
    );
}

/// A hash recorded under a key no longer in `--hash-key-file` cannot tell a change made
/// while wavelet was stopped from the rotation (recorded, no rollout). A change made after
/// the start, while the workload waits behind the adoptions for its first look, is seen:
/// the configuration wavelet first saw is what it is judged by, and it rolls once.
/// (It was taken in with the rotation: a change lost for as long as adoption lasts.)
#[test]
fn across_a_rotation_without_the_old_key_a_change_after_the_start_rolls_once() {
    let fake = FakeApi::start();
    new_workloads(&fake);
    fake.apply(secret(NS, "rotated", &[("password", "first")]));
    let mut annotations = opted_in();
    annotations[HASH] = json!("0".repeat(64));
    // Recorded by an earlier run under a key this run is not given.
    annotations["wavelet.dev/config-basis"] = json!("v1 k=0123456789abcdef s=0011223344556677 p=");
    // Named to be looked at last, behind the adoptions of `new-N`.
    fake.apply(workload(
        "StatefulSet",
        NS,
        "zz-rotated",
        annotations,
        json!({"containers": [{"name": "app", "image": "nginx",
            "envFrom": [{"secretRef": {"name": "rotated"}}]}]}),
    ));
    let dir = TempDir::new("startup-rotation");
    let key = dir.write("key", "new key\n");
    let wavelet = Wavelet::start(
        &fake,
        &[FAST, &["--hash-key-file", key.to_str().unwrap()]].concat(),
    );
    assert!(
        metric(&wavelet, "wavelet_adoptions_pending", "") > (TO_ADOPT / 2) as f64,
        "the change must come while the adoptions are pending"
    );
    rotate(&fake);
    eventually(&fake, &wavelet, "zz-rotated rolled", |f| {
        template_patches(f, "statefulsets", NS, "zz-rotated") == 1
    });
    assert!(
        wavelet.output().contains("as first seen: the key it was recorded under (k=0123456789abcdef) is no longer in --hash-key-file; it changed since to"),
        "{}",
        wavelet.output()
    );
    assert!(
        wavelet.wait_for_output("adoption complete", std::time::Duration::from_secs(120)),
        "{}",
        wavelet.output()
    );
    assert_eq!(
        template_patches(&fake, "statefulsets", NS, "zz-rotated"),
        1,
        "rolled once"
    );
}
