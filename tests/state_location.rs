//! Where `wavelet pause`, `resume` and `status` find the state (issue 32.6): the running
//! wavelet's state namespace, found from its Deployment (or its Lease, or the only
//! `wavelet-state`) and said on stderr; never the kubeconfig context's namespace, and
//! never a ConfigMap the CLI creates itself.

use std::process::Output;
use std::time::Duration;

use serde_json::json;

use crate::fake::FakeApi;
use crate::util::*;

const NS: &str = "default";
const STATE_NS: &str = "wavelet-system";

/// A one-shot `wavelet ARGS --server <fake>`: exit code, stdout and stderr.
fn one_shot(fake: &FakeApi, args: &[&str]) -> (Option<i32>, String, String) {
    let Output {
        status,
        stdout,
        stderr,
    } = wavelet_command()
        .args(args)
        .args(["--server", &fake.url()])
        .env_clear()
        .output()
        .expect("running wavelet");
    (
        status.code(),
        String::from_utf8_lossy(&stdout).into_owned(),
        String::from_utf8_lossy(&stderr).into_owned(),
    )
}

/// The wavelet Deployment as the chart installs it, in `wavelet-system` (only the object:
/// the controller of the test runs as a process beside it).
fn wavelet_deployment(args: serde_json::Value) -> serde_json::Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "wavelet",
            "namespace": STATE_NS,
            "labels": {"app.kubernetes.io/name": "wavelet"},
        },
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app.kubernetes.io/name": "wavelet"}},
            "template": {
                "metadata": {"labels": {"app.kubernetes.io/name": "wavelet"}},
                "spec": {"containers": [{"name": "wavelet", "image": "wavelet", "args": args}]},
            },
        },
    })
}

fn namespace(name: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
}

/// ConfigMap `shared` and Deployments a and b that mount it.
fn shared(fake: &FakeApi) {
    fake.apply(namespace(NS));
    fake.apply(namespace(STATE_NS));
    fake.apply(configmap(NS, "shared", &[("k", "1")]));
    for name in ["a", "b"] {
        fake.apply(workload(
            "Deployment",
            NS,
            name,
            opted_in(),
            mounts_configmap("shared"),
        ));
    }
}

fn adopted(fake: &FakeApi, wavelet: &Wavelet) {
    eventually(fake, wavelet, "a and b adopted", |f| {
        ["a", "b"].iter().all(|n| {
            hashes(f, "deployments", NS, n, "wavelet.dev/config-hash")
                .1
                .is_some()
        })
    });
}

#[test]
fn wavelet_pause_writes_where_the_running_wavelet_keeps_its_state_not_in_default() {
    let fake = FakeApi::start();
    shared(&fake);
    fake.apply(wavelet_deployment(json!(["run"])));
    // The controller, as its Deployment would run it: state in the namespace it runs in.
    let wavelet = Wavelet::start(&fake, &[FAST, &["--state-namespace", STATE_NS]].concat());
    adopted(&fake, &wavelet);
    assert!(
        fake.get("configmaps", STATE_NS, "wavelet-state").is_some(),
        "the running wavelet creates its state ConfigMap at start:\n{}",
        wavelet.output()
    );

    let (code, out, err) = one_shot(&fake, &["pause"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(
        err.contains("state: ConfigMap wavelet-system/wavelet-state")
            && err.contains("the wavelet Deployment wavelet-system/wavelet"),
        "says where it found the state and how: {err}"
    );
    assert!(out.contains("wavelet-system/wavelet-state"), "{out}");
    assert!(
        fake.get("configmaps", NS, "wavelet-state").is_none(),
        "no state ConfigMap of the CLI's own in the context's namespace"
    );
    // The running wavelet holds: a change waits.
    fake.merge_patch("configmaps", NS, "shared", json!({"data": {"k": "2"}}));
    eventually(&fake, &wavelet, "a change pending while paused", |_| {
        wavelet.output().contains("PENDING: paused")
    });
    assert_eq!(template_patches(&fake, "deployments", NS, "a"), 0);

    let (code, out, err) = one_shot(&fake, &["resume"]);
    assert_eq!(code, Some(0), "{out}{err}");
    eventually(&fake, &wavelet, "a and b rolled once resumed", |f| {
        template_patches(f, "deployments", NS, "a") == 1
            || template_patches(f, "deployments", NS, "b") == 1
    });
}

#[test]
fn wavelet_status_shows_a_held_fan_out_as_held_without_state_namespace() {
    let fake = FakeApi::start();
    shared(&fake);
    fake.apply(wavelet_deployment(json!([
        "run",
        "--state-namespace",
        STATE_NS
    ])));
    let wavelet = Wavelet::start(
        &fake,
        &[
            FAST,
            &["--state-namespace", STATE_NS, "--rollout-timeout", "2s"],
        ]
        .concat(),
    );
    adopted(&fake, &wavelet);
    // The first workload's new Pods never get Ready within the test: the fan-out holds.
    fake.set_ready_delay(Duration::from_secs(600));
    fake.merge_patch("configmaps", NS, "shared", json!({"data": {"k": "2"}}));
    eventually(&fake, &wavelet, "the fan-out held", |f| {
        f.get("configmaps", STATE_NS, "wavelet-state")
            .and_then(|s| {
                s["data"]["fanout.configmap.default.shared"]
                    .as_str()
                    .map(|v| v.contains("held"))
            })
            .unwrap_or(false)
    });
    let (code, table, err) = one_shot(&fake, &["status", "-n", NS]);
    assert_eq!(code, Some(1), "{table}{err}");
    assert!(err.contains("its --state-namespace"), "{err}");
    assert_eq!(
        table
            .lines()
            .filter(|l| l.contains("HELD: configmap default/shared's fan-out"))
            .count(),
        1,
        "the workload waiting behind the hold shows HELD:\n{table}"
    );
}

#[test]
fn without_a_running_wavelet_pause_fails_with_what_it_searched_and_creates_nothing() {
    let fake = FakeApi::start();
    fake.apply(namespace(NS));
    let (code, out, err) = one_shot(&fake, &["pause"]);
    assert_ne!(code, Some(0), "{out}{err}");
    assert!(
        err.contains("cannot find where the running wavelet keeps its state")
            && err.contains("--state-namespace"),
        "{err}"
    );
    // Found (the flag) but not there: nothing is created either.
    let (code, out, err) = one_shot(&fake, &["pause", "--state-namespace", STATE_NS]);
    assert_ne!(code, Some(0), "{out}{err}");
    assert!(
        err.contains("ConfigMap wavelet-system/wavelet-state does not exist"),
        "{err}"
    );
    assert!(
        !fake
            .requests()
            .iter()
            .any(|r| r.method == "POST" && r.path.contains("configmaps")),
        "the CLI created a ConfigMap"
    );
    // `status` still shows the workloads, and says why fan-outs are not shown.
    let (code, table, err) = one_shot(&fake, &["status", "-n", NS]);
    assert_eq!(code, Some(0), "{table}{err}");
    assert!(
        err.contains("fan-outs and the global pause are not shown"),
        "{err}"
    );
}

#[test]
fn several_wavelets_in_different_namespaces_are_named_and_none_is_chosen() {
    let fake = FakeApi::start();
    fake.apply(namespace(STATE_NS));
    fake.apply(namespace("ops"));
    fake.apply(wavelet_deployment(json!(["run"])));
    let mut other = wavelet_deployment(json!(["run"]));
    other["metadata"]["namespace"] = json!("ops");
    fake.apply(other);
    let (code, out, err) = one_shot(&fake, &["resume"]);
    assert_ne!(code, Some(0), "{out}{err}");
    assert!(
        err.contains("ops: the wavelet Deployment ops/wavelet")
            && err.contains("wavelet-system: the wavelet Deployment wavelet-system/wavelet")
            && err.contains("--state-namespace"),
        "{err}"
    );
}
