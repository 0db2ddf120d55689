//! Reliability: faults injected by the fake API server. Each scenario must end with the
//! workload on the correct hash, no change missed, and one revision per change.

use std::time::Duration;

use serde_json::json;

use crate::fake::{FakeApi, Fault};
use crate::util::*;

const NS: &str = "default";
const HASH: &str = "wavelet.dev/config-hash";

fn wait_adopted(fake: &FakeApi, wavelet: &Wavelet) {
    eventually(fake, wavelet, "adoption", |f| {
        hashes(f, "deployments", NS, "web", HASH).1.is_some()
    });
}

fn change(fake: &FakeApi, value: &str) {
    fake.merge_patch(
        "configmaps",
        NS,
        "app-config",
        json!({"data": {"color": value}}),
    );
}

fn watch_fault_then_change(fault: Fault) {
    let fake = fake_with_web();
    let wavelet = Wavelet::start(&fake, FAST);
    wait_adopted(&fake, &wavelet);
    fake.inject(fault);
    change(&fake, "green");
    assert_web_converged(&fake, &wavelet, 2, "rolled more than once per change");
}

#[test]
fn a_watch_connection_dropped_mid_event_misses_nothing() {
    watch_fault_then_change(Fault::DropWatchMidEvent {
        resource: "configmaps".into(),
    });
}

#[test]
fn a_truncated_watch_line_misses_nothing() {
    watch_fault_then_change(Fault::TruncatedLine {
        resource: "configmaps".into(),
    });
}

/// Faults that hit the next watch request: close the open watches so wavelet re-watches
/// into the fault, while the change happens.
fn rewatch_fault_then_change(fault: Fault) {
    let fake = fake_with_web();
    let wavelet = Wavelet::start(&fake, FAST);
    wait_adopted(&fake, &wavelet);
    fake.inject(fault);
    change(&fake, "green");
    fake.close_watches();
    assert_web_converged(&fake, &wavelet, 2, "rolled more than once per change");
}

#[test]
fn an_error_410_event_relists_and_misses_nothing() {
    let fake = fake_with_web();
    let wavelet = Wavelet::start(&fake, FAST);
    wait_adopted(&fake, &wavelet);
    fake.inject(Fault::WatchErrorExpired {
        resource: "configmaps".into(),
    });
    fake.close_watches();
    change(&fake, "green");
    assert_web_converged(&fake, &wavelet, 2, "rolled more than once per change");
    assert!(wavelet.output().contains("expired"), "the relist is logged");
}

#[test]
fn an_http_410_on_watch_relists_and_misses_nothing() {
    rewatch_fault_then_change(Fault::WatchHttpGone {
        resource: "configmaps".into(),
    });
}

#[test]
fn compacted_history_relists_and_misses_nothing() {
    let fake = fake_with_web();
    let wavelet = Wavelet::start(&fake, FAST);
    wait_adopted(&fake, &wavelet);
    // The watch is closed, the change happens, and history is compacted past it:
    // re-watching from the last seen version gets 410 and must relist.
    fake.inject(Fault::Slow {
        method: "WATCH".into(),
        resource: "configmaps".into(),
        delay: Duration::from_millis(300),
    });
    fake.close_watches();
    change(&fake, "green");
    fake.compact();
    assert_web_converged(&fake, &wavelet, 2, "rolled more than once per change");
}

fn status_fault(
    method: &str,
    resource: &str,
    code: u16,
    retry_after_secs: Option<u64>,
    plain_text: bool,
) -> Fault {
    Fault::Status {
        method: method.into(),
        resource: resource.into(),
        code,
        retry_after_secs,
        times: 2,
        plain_text,
    }
}

#[test]
fn list_errors_with_retry_after_at_start_are_retried() {
    for (code, plain) in [(500, false), (503, false), (429, true)] {
        let fake = fake_with_web();
        fake.inject(status_fault("GET", "configmaps", code, Some(1), plain));
        let wavelet = Wavelet::start(&fake, FAST);
        wait_adopted(&fake, &wavelet);
        change(&fake, "green");
        assert_web_converged(&fake, &wavelet, 2, "rolled more than once per change");
    }
}

#[test]
fn patch_errors_are_retried_without_a_second_revision() {
    for (code, retry_after, plain) in [
        (500, None, false),
        (503, Some(1), false),
        (429, Some(1), true),
    ] {
        let fake = fake_with_web();
        let wavelet = Wavelet::start(&fake, FAST);
        wait_adopted(&fake, &wavelet);
        fake.inject(status_fault(
            "PATCH",
            "deployments",
            code,
            retry_after,
            plain,
        ));
        change(&fake, "green");
        assert_web_converged(&fake, &wavelet, 2, "rolled more than once per change");
    }
}

#[test]
fn a_slow_patch_response_does_not_cause_a_second_rollout() {
    let fake = fake_with_web();
    let wavelet = Wavelet::start(&fake, FAST);
    wait_adopted(&fake, &wavelet);
    fake.inject(Fault::Slow {
        method: "PATCH".into(),
        resource: "deployments".into(),
        delay: Duration::from_secs(2),
    });
    change(&fake, "green");
    assert_web_converged(&fake, &wavelet, 2, "rolled more than once per change");
}

#[test]
fn a_rotated_token_is_re_read_after_a_401() {
    let fake = fake_with_web();
    let token = RotatingToken::new(&fake, "token-one");
    let mut command_args = vec!["--kubeconfig", token.kubeconfig_path()];
    command_args.extend(FAST);
    let wavelet = Wavelet::start_without_server(&command_args, &[("RUST_LOG", "debug")]);
    wait_adopted(&fake, &wavelet);

    token.rotate(&fake, "token-two");
    change(&fake, "green");
    assert_web_converged(&fake, &wavelet, 2, "rolled more than once per change");
    assert!(
        !wavelet.output().contains("token-two"),
        "tokens are never logged"
    );
}

/// A watch that goes silent (no events, no bookmarks, its `timeoutSeconds` ignored: a
/// black-holed connection) is cut by the client 30 s after its timeout and reopened, and
/// the change made meanwhile is caught. The other watches carry on.
#[test]
fn a_watch_stalled_for_longer_than_its_timeout_is_cut_and_reopened() {
    let fake = fake_with_web();
    let mut args = FAST.to_vec();
    args.extend(["--resync", "2s"]);
    let wavelet = Wavelet::start(&fake, &args);
    wait_adopted(&fake, &wavelet);
    fake.inject(Fault::StallWatch {
        resource: "configmaps".into(),
        duration: Duration::from_secs(3600),
    });
    fake.close_watches();
    change(&fake, "green");
    // The silent watch is open for its timeout (at most the 2 s to the next relist) plus
    // the client's 30 s grace.
    if !fake.wait_until(Duration::from_secs(40), |f| {
        hashes(f, "deployments", NS, "web", HASH).0.as_deref()
            == Some(expected_hash(f, "deployments", NS, "web").as_str())
    }) {
        panic!(
            "the stalled watch was never reopened:\n{}",
            wavelet.output()
        );
    }
    assert_web_converged(&fake, &wavelet, 2, "rolled more than once per change");
}

#[test]
fn a_workload_created_while_configmaps_cannot_be_listed_is_adopted_from_the_list_not_before() {
    // Found by the soak (seed 1795621661187015057): a new workload was adopted from
    // ConfigMap data a failing relist kept out of date, then rolled once the list landed,
    // for a change made before it existed.
    let fake = fake_with_web();
    add_barrier(&fake, "configmaps", NS);
    let wavelet = Wavelet::start(&fake, FAST);
    wait_adopted(&fake, &wavelet);
    // The watch is cut, and the relist fails a few times.
    fake.inject(Fault::WatchErrorExpired {
        resource: "configmaps".into(),
    });
    fake.inject(Fault::Status {
        method: "LIST".into(),
        resource: "configmaps".into(),
        code: 504,
        retry_after_secs: None,
        times: 3,
        plain_text: false,
    });
    fake.close_watches();
    // While the relist keeps failing, the data changes and a workload using it appears.
    assert!(
        wavelet.wait_for_output(
            "configmaps in all namespaces: list failed",
            Duration::from_secs(10)
        ),
        "{}",
        wavelet.output()
    );
    change(&fake, "green");
    fake.apply(workload(
        "Deployment",
        NS,
        "api",
        opted_in(),
        mounts_configmap("app-config"),
    ));
    // The list lands: web rolls for the change; api is adopted with the data it started with.
    eventually(&fake, &wavelet, "web rolled and api adopted", |f| {
        f.revisions("deployments", NS, "web") == 2
            && hashes(f, "deployments", NS, "api", HASH).1.is_some()
    });
    // Whatever the landed list causes is done before the barrier's later change rolls it.
    barrier_change(&fake, &wavelet, "configmaps", NS);
    assert_eq!(
        hashes(&fake, "deployments", NS, "api", HASH).1,
        Some(expected_hash(&fake, "deployments", NS, "api")),
        "adopted from the current data"
    );
    assert_eq!(
        fake.revisions("deployments", NS, "api"),
        1,
        "{}",
        wavelet.output()
    );
}
