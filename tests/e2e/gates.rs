//! The gates people rely on, against the real API server (issue 32): `wavelet pause`,
//! `resume` and `status` from a laptop find the running wavelet's state through its
//! Deployment, not the kubeconfig context's namespace, and never create a ConfigMap of
//! their own.

use std::time::Duration;

use serde_json::{json, Value};

use crate::kube::{configmap, hashes, mounts_configmap, opted_in, workload, Kube};
use crate::process::{one_shot, Wavelet};
use crate::{Ctx, Scenario};

pub const ALL: &[Scenario] = &[Scenario {
    name: "gates_cli_finds_the_running_wavelets_state",
    run: cli_finds_state,
    // Alone: the search lists wavelet Deployments cluster-wide, and no other scenario's
    // CLI call should meet this one's.
    serial: true,
}];

const LONG: Duration = Duration::from_secs(90);

fn replica_sets(kube: &Kube, ns: &str, owner: &str) -> usize {
    kube.list("ReplicaSet", ns)
        .iter()
        .filter(|rs| {
            rs["metadata"]["ownerReferences"]
                .as_array()
                .is_some_and(|refs| refs.iter().any(|r| r["name"] == owner))
        })
        .count()
}

/// The wavelet Deployment as the chart installs it (no replicas: the controller of the
/// scenario runs as a process beside it, with the same state namespace).
fn wavelet_deployment(ns: &str) -> Value {
    let labels = json!({"app.kubernetes.io/name": "wavelet"});
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "wavelet", "namespace": ns, "labels": labels},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "wavelet", "image": "wavelet", "args": ["run"]}]},
            },
        },
    })
}

/// Issue 32.6, seen on the real server: `wavelet pause` from a context without a namespace
/// created `default/wavelet-state` while the controller in its own namespace kept rolling.
fn cli_finds_state(ctx: &Ctx) {
    let kube = &ctx.kube;
    let (system, ns) = ("e2e-locate-system", "e2e-locate");
    kube.create_namespace(system);
    kube.create_namespace(ns);
    kube.create(wavelet_deployment(system));
    kube.create(configmap(ns, "cfg", json!({"k": "1"})));
    kube.create(workload(
        "Deployment",
        ns,
        "web",
        opted_in(),
        mounts_configmap("cfg"),
    ));
    kube.until(LONG, "the first revision", || {
        replica_sets(kube, ns, "web") == 1
    });
    let wavelet = Wavelet::run(
        &ctx.cluster,
        &[
            "--namespaces",
            ns,
            "--state-namespace",
            system,
            "--debounce",
            "300ms",
            "--min-rollout-interval",
            "0s",
        ],
    );
    kube.until(LONG, "adoption", || {
        kube.get("Deployment", ns, "web")
            .is_some_and(|d| hashes(&d).1.is_some())
    });
    assert!(
        kube.get("ConfigMap", system, "wavelet-state").is_some(),
        "the running wavelet creates its state at start"
    );
    let default_state_before = kube.get("ConfigMap", "default", "wavelet-state").is_some();

    // The cluster's kubeconfig names no namespace: the CLI looks for the running wavelet.
    let (code, out) = one_shot(&ctx.cluster, &["pause"]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("state: ConfigMap e2e-locate-system/wavelet-state")
            && out.contains("the wavelet Deployment e2e-locate-system/wavelet"),
        "{out}"
    );
    assert_eq!(
        kube.get("ConfigMap", "default", "wavelet-state").is_some(),
        default_state_before,
        "the CLI created default/wavelet-state"
    );
    wavelet.wait_output("the global pause changed", LONG);
    kube.merge_patch("ConfigMap", ns, "cfg", json!({"data": {"k": "2"}}));
    wavelet.wait_output("PENDING: paused (wavelet pause since", LONG);
    let (code, table) = one_shot(&ctx.cluster, &["status", "-n", ns]);
    assert_eq!(code, 1, "{table}");
    assert!(
        table.contains("PAUSED") && table.contains("PENDING: paused"),
        "{table}"
    );
    assert_eq!(replica_sets(kube, ns, "web"), 1, "rolled while paused");
    let (code, out) = one_shot(&ctx.cluster, &["resume"]);
    assert_eq!(code, 0, "{out}");
    kube.until(LONG, "one rollout after resume", || {
        replica_sets(kube, ns, "web") == 2
    });
    // Gone, so no later CLI call of the suite finds it.
    kube.delete("Deployment", system, "wavelet");
}
