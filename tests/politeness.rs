//! Polite at scale (issue 27): a client-side budget on every request that a 429 with
//! `Retry-After` slows as a whole; Warning Events aggregated rather than posted in bursts,
//! and not posted again after a restart; the throttle counter counting each change once,
//! with the `WaveletRolloutsThrottled` expression false for one large fan-out; and one
//! cluster-wide watch per resource for many `--namespaces`.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::fake::{FakeApi, Fault, Request};
use crate::util::*;

const NS: &str = "load";
const HASH: &str = "wavelet.dev/config-hash";
const WORKLOADS: &str = "statefulsets";

/// `count` opted-in StatefulSets `web-N` in [`NS`] that mount ConfigMap `shared`, which
/// exists; with `adopted`, each already carries the hash of `shared` on its metadata and
/// template (nothing to adopt at start). StatefulSets: the fake's controller gives a
/// Deployment a ReplicaSet and Pods, which thousands of them make slow to load.
fn fan_out(fake: &FakeApi, count: usize, adopted: bool) {
    fake.apply(configmap(NS, "shared", &[("color", "blue")]));
    let objects = (0..count).map(|n| {
        workload(
            "StatefulSet",
            NS,
            &format!("web-{n}"),
            opted_in(),
            mounts_configmap("shared"),
        )
    });
    fake.apply_all(objects);
    if adopted {
        let hash = expected_hash(fake, WORKLOADS, NS, "web-0");
        let objects: Vec<Value> = (0..count)
            .map(|n| {
                let mut object = fake
                    .get(WORKLOADS, NS, &format!("web-{n}"))
                    .expect("created");
                object["metadata"]["annotations"][HASH] = json!(hash);
                object["spec"]["template"]["metadata"]["annotations"] = json!({ HASH: hash });
                object
            })
            .collect();
        fake.apply_all(objects);
    }
}

/// When each request matching `pick` reached the fake, in order.
fn arrivals(fake: &FakeApi, pick: impl Fn(&Request) -> bool) -> Vec<Instant> {
    fake.requests()
        .iter()
        .filter(|r| pick(r))
        .map(|r| r.received)
        .collect()
}

fn is_workload_patch(r: &Request) -> bool {
    r.method == "PATCH" && r.path.contains("/statefulsets/")
}

/// Requests the budget holds: everything but watches.
fn is_budgeted(r: &Request) -> bool {
    !r.query.iter().any(|(k, v)| k == "watch" && v == "true")
}

/// The most requests in any `window` among `times` (sorted).
fn most_in_window(times: &[Instant], window: Duration) -> usize {
    let mut most = 0;
    let mut start = 0;
    for end in 0..times.len() {
        while times[end] - times[start] >= window {
            start += 1;
        }
        most = most.max(end - start + 1);
    }
    most
}

/// The default budget (20 requests a second, a burst of 30) holds adoption's PATCHes to
/// it; every third PATCH answered 429 with `Retry-After: 5` pauses every writer for 5 s,
/// not just the key that got it; and a 429 is not a failed rollout.
#[test]
fn a_429_with_retry_after_slows_every_writer_and_writes_stay_within_the_budget() {
    let fake = FakeApi::start();
    fan_out(&fake, 2_000, false);
    fake.inject(Fault::EveryNth {
        method: "PATCH".into(),
        resource: WORKLOADS.into(),
        n: 3,
        code: 429,
        retry_after_secs: 5,
        seen: 0,
    });
    let wavelet = Wavelet::start(&fake, FAST);

    // Two 429s (the 3rd and 6th PATCH), then a PATCH sent once the second one's pause is
    // over: the positive signal before looking for PATCHes sent during the pauses.
    let paused = |f: &FakeApi| {
        let patches = arrivals(f, is_workload_patch);
        patches.len() > 6 && *patches.last().unwrap() > patches[5] + Duration::from_millis(4_750)
    };
    eventually(
        &fake,
        &wavelet,
        "a PATCH after the second 429's pause",
        paused,
    );
    let patches = arrivals(&fake, is_workload_patch);
    for refused in [2, 5] {
        let at = patches[refused];
        // Requests already on their way when the 429 came back may land just after it;
        // none is sent from then until the Retry-After has passed.
        let during: Vec<Duration> = patches
            .iter()
            .filter(|t| **t > at + Duration::from_millis(250))
            .map(|t| *t - at)
            .filter(|d| *d < Duration::from_millis(4_750))
            .collect();
        assert!(
            during.is_empty(),
            "PATCHes {during:?} after the 429 of PATCH #{}: every writer should wait 5 s\n{}",
            refused + 1,
            wavelet.output()
        );
    }
    assert!(wavelet.output().contains("every request waits 5s"));
    assert_eq!(
        metric(
            &wavelet,
            "wavelet_rollouts_total",
            r#"kind="StatefulSet",result="error""#
        ),
        0.0,
        "a 429 is not a failed rollout"
    );
    assert!(
        metric(
            &wavelet,
            "wavelet_api_requests_total",
            r#"verb="patch",code="429""#
        ) >= 2.0
    );
    assert!(!wavelet.output().contains("reconcile failed"));

    // Without 429s, adoption runs at the budget: never more than the burst plus the rate
    // in any second, and close to the rate over several.
    fake.heal();
    let healed = Instant::now();
    eventually(&fake, &wavelet, "adoption at full speed for 3 s", |f| {
        arrivals(f, is_workload_patch)
            .iter()
            .filter(|t| **t > healed)
            .count()
            >= 70
    });
    let budgeted = arrivals(&fake, is_budgeted);
    let peak = most_in_window(&budgeted, Duration::from_secs(1));
    assert!(
        peak <= 20 + 30,
        "{peak} requests in one second: more than --api-qps 20 + --api-burst 30"
    );
    let after: Vec<Instant> = arrivals(&fake, is_workload_patch)
        .into_iter()
        .filter(|t| *t > healed)
        .collect();
    let steady = most_in_window(&after, Duration::from_secs(2));
    assert!(
        steady <= 2 * 20 + 30,
        "{steady} PATCHes in 2 s: more than the budget allows"
    );
    assert!(
        metric(&wavelet, "wavelet_api_budget_wait_seconds_total", "") > 1.0,
        "the waits are counted"
    );
}
