//! The quick start of the book's getting-started page (`docs/src/getting-started.md`),
//! command by command, against the real API server, as a new user runs it: `kubectl proxy` and `wavelet run --server` out of the cluster, then the
//! two examples applied and edited with `kubectl edit`. Each command is checked to be in
//! that quick start word for word, so the page cannot drift from what is tested.
//! Passes only if both examples do what the page says (Deployment `web` rolls once with
//! a `ConfigChanged` Event; the `worker` Pods are replaced with a `PodsReplaced` Event) and
//! wavelet printed no ERROR line.
//!
//! It runs wavelet cluster-wide and creates namespace `apps`, as the quick start does, so it
//! runs alone (serial) and only on the suite's own control plane.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::process::Wavelet;
use crate::Ctx;

const RUN: &str =
    "kubectl proxy --port 8001 & cargo run --release -- run --server http://127.0.0.1:8001";
const APPLY: &str = "kubectl apply -f manifests/examples/";
const EDIT_WEB: &str = "kubectl -n apps edit configmap web-config";
const EVENTS_WEB: &str = "kubectl -n apps get events --field-selector reason=ConfigChanged";
const EDIT_WORKER: &str = "kubectl -n apps edit configmap worker-config";
const EVENTS_WORKER: &str = "kubectl -n apps get events --field-selector reason=PodsReplaced";

const LONG: Duration = Duration::from_secs(90);

/// Where the quick start is written.
const QUICK_START_PAGE: &str = "docs/src/getting-started.md";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The book's getting-started page from the `<!-- quick-start -->` marker to the next
/// section.
fn quick_start_text() -> String {
    let page = std::fs::read_to_string(repo().join(QUICK_START_PAGE)).expect(QUICK_START_PAGE);
    let after = page
        .split("<!-- quick-start -->")
        .nth(1)
        .expect("the getting-started page has the quick-start marker");
    after.split("\n## ").next().unwrap().to_string()
}

/// A `kubectl` command of the quick start as the cluster's kubectl: the words after
/// `kubectl`, with the cluster's kubeconfig.
fn kubectl(ctx: &Ctx, line: &str) -> Command {
    let words: Vec<&str> = line.split_whitespace().skip(1).collect();
    let mut command = ctx.cluster.kubectl();
    command.args(words).current_dir(repo());
    command
}

fn run_ok(mut command: Command, what: &str) -> String {
    let out = command.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{what} failed:\n{text}");
    text
}

/// `kubectl edit` with an editor that replaces `from` by `to` in the file it is given.
fn edit(ctx: &Ctx, line: &str, dir: &Path, from: &str, to: &str) {
    let script = dir.join(format!("editor-{}.sh", line.len()));
    std::fs::write(
        &script,
        format!("#!/bin/sh\nsed -i 's/{from}/{to}/' \"$1\"\n"),
    )
    .unwrap();
    let _ = Command::new("chmod").arg("+x").arg(&script).status();
    let mut command = kubectl(ctx, line);
    command.env("KUBE_EDITOR", &script);
    let out = run_ok(command, line);
    assert!(out.contains("edited"), "{line}: {out}");
}

/// The names of the Pods of `app` in `apps`, not being deleted.
fn pods(ctx: &Ctx, app: &str) -> BTreeSet<String> {
    ctx.kube
        .list("Pod", "apps")
        .into_iter()
        .filter(|p| p["metadata"]["labels"]["app"] == app)
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .map(|p| p["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

fn replica_sets(ctx: &Ctx, owner: &str) -> usize {
    ctx.kube
        .list("ReplicaSet", "apps")
        .into_iter()
        .filter(|rs| {
            rs["metadata"]["ownerReferences"]
                .as_array()
                .is_some_and(|refs| refs.iter().any(|r| r["name"] == owner))
        })
        .count()
}

pub fn quick_start(ctx: &Ctx) {
    let text = quick_start_text();
    for line in [RUN, APPLY, EDIT_WEB, EVENTS_WEB, EDIT_WORKER, EVENTS_WORKER] {
        assert!(
            text.contains(line),
            "the quick start ({QUICK_START_PAGE}) no longer says `{line}`: update tests/e2e/quickstart.rs with it"
        );
    }
    if !ctx.cluster.is_own() {
        println!("e2e quick_start: skipped: it runs wavelet cluster-wide and creates namespace apps, so only on the suite's own control plane");
        return;
    }
    let dir = ctx.cluster.dir().join("quick-start");
    std::fs::create_dir_all(&dir).unwrap();

    // `kubectl proxy --port 8001 &` (a free port instead of 8001).
    let proxy = ctx.cluster.kubectl_proxy();
    let url = format!("http://127.0.0.1:{}", proxy.port);

    // `cargo run --release -- run --server http://127.0.0.1:8001`: the same binary, from a
    // shell with a kubeconfig (KUBECONFIG) and the default log level. Only the metrics port
    // is moved off :9090 (the environment variable, so the command line stays as written).
    let mut command = Command::new(env!("CARGO_BIN_EXE_wavelet"));
    command
        .args(["run", "--server", &url])
        .env_clear()
        .env("KUBECONFIG", &ctx.cluster.kubeconfig)
        .env("HOME", &dir)
        .env("WAVELET_LISTEN_ADDR", "127.0.0.1:0");
    if let Some(group) = ctx.cluster.process_group() {
        use std::os::unix::process::CommandExt;
        command.process_group(group);
    }
    let wavelet = Wavelet::spawn(command);
    wavelet.wait_output("initial sync complete", LONG);
    wavelet.wait_output(
        "delete mode keeps its state in ConfigMap default/wavelet-state",
        Duration::from_secs(5),
    );

    // `kubectl apply -f manifests/examples/`; the suite's kubelet plays the Pods of
    // namespaces labelled as the suite's, and deletes them at the end.
    run_ok(kubectl(ctx, APPLY), APPLY);
    ctx.kube.adopt_namespace("apps");
    ctx.kube
        .until(LONG, "web adopted (hash on its metadata)", || {
            ctx.kube
                .get("Deployment", "apps", "web")
                .is_some_and(|d| !d["metadata"]["annotations"]["wavelet.dev/config-hash"].is_null())
        });
    ctx.kube
        .until(LONG, "worker-config recorded in wavelet-state", || {
            ctx.kube
                .get("ConfigMap", "default", "wavelet-state")
                .is_some_and(|s| !s["data"]["configmap.apps.worker-config"].is_null())
        });
    ctx.kube
        .until(LONG, "two worker Pods", || pods(ctx, "worker").len() == 2);
    // The Deployment controller may not have made web's first ReplicaSet yet (CI saw 0):
    // wait until it has, and has observed web's latest spec. A rollout by the adoption
    // would then show as a second ReplicaSet.
    ctx.kube
        .until(LONG, "web's ReplicaSet, for its latest spec", || {
            replica_sets(ctx, "web") >= 1
                && ctx.kube.get("Deployment", "apps", "web").is_some_and(|d| {
                    d["status"]["observedGeneration"] == d["metadata"]["generation"]
                })
        });
    assert_eq!(replica_sets(ctx, "web"), 1, "adoption rolled web");

    // `kubectl -n apps edit configmap web-config`: change nginx.conf.
    edit(ctx, EDIT_WEB, &dir, "hello", "hello again");
    ctx.kube.until(LONG, "web rolled: a second ReplicaSet", || {
        replica_sets(ctx, "web") == 2
    });
    let events = run_ok(kubectl(ctx, EVENTS_WEB), EVENTS_WEB);
    assert!(
        events.contains("ConfigChanged") && events.contains("deployment/web"),
        "{EVENTS_WEB}:\n{events}"
    );

    // `kubectl -n apps edit configmap worker-config`: change QUEUE.
    let before = pods(ctx, "worker");
    edit(ctx, EDIT_WORKER, &dir, "QUEUE: jobs", "QUEUE: jobs-v2");
    ctx.kube
        .until(LONG, "a PodsReplaced Event on worker-config", || {
            run_ok(kubectl(ctx, EVENTS_WORKER), EVENTS_WORKER).contains("configmap/worker-config")
        });
    ctx.kube.until(LONG, "the worker Pods replaced", || {
        let now = pods(ctx, "worker");
        now.len() == 2 && now.is_disjoint(&before)
    });
    assert_eq!(replica_sets(ctx, "web"), 2, "web rolled more than once");

    let output = wavelet.output();
    let errors: Vec<&str> = output.lines().filter(|l| l.contains("ERROR")).collect();
    assert!(errors.is_empty(), "wavelet printed ERROR lines:\n{output}");
    drop(proxy);
    // The state object the quick start left behind, on the suite's own control plane.
    let _ = ctx
        .kube
        .client
        .delete::<serde_json::Value>("/api/v1/namespaces/default/configmaps/wavelet-state", None);
}
