//! The end-to-end suite: the real `wavelet` binary against a real kube-apiserver.
//!
//! - `cluster`: etcd + kube-apiserver + kube-controller-manager from
//!   `WAVELET_E2E_BIN_DIR` on free loopback ports (or the cluster of
//!   `WAVELET_E2E_KUBECONFIG`), stopped at the end and when the suite dies.
//! - `kubelet`: the kubelet's part for the suite's Pods (bind, Running/Ready, finish
//!   graceful deletions); there is no kubelet.
//! - `kube`: the harness's own API calls; `process`: the binary under test; `forward`: a
//!   TCP forwarder to the API server that can hold its answers back (all, or in front of
//!   a `kubectl proxy` those to the watches of one resource).
//! - `scenarios`: hash mode (Deployment, StatefulSet, DaemonSet, CronJob, a custom
//!   resource), the initial sync as a streaming list, Secrets as metadata plus one GET, delete mode (evict behind a
//!   PodDisruptionBudget, delete, rolling), leader election with the leader killed or
//!   its renewal answered late, a new leader whose ConfigMap watch lags (through a
//!   `kubectl proxy`; hash and delete mode), delete mode across leader terms,
//!   in-cluster credentials with the shipped RBAC, `status` and `hash`, and
//!   kube-apiserver killed and restarted mid-watch.
//! - `loadtest`, `reloader_loadtest`: Reloader's load-test scenarios S1, S4 and S6 (the
//!   subset its own CI runs) against wavelet, reload counts checked exactly; the
//!   benchmark runs all 13 against wavelet, Reloader and Wave with the same module.
//! - `quickstart`: the README's quick start, command by command (`kubectl proxy`, `wavelet
//!   run --server`, the examples applied and edited).
//! - `fanout`: safe fan-out of a shared ConfigMap change to ten Deployments (waves behind
//!   the health gate, a bad change held after the first wave, the fix), wavelet killed
//!   mid-fan-out, a restart window and the global pause.
//! - `impact`: `wavelet impact` lists what a ConfigMap change rolls, in which waves and
//!   when, shows no Secret value, gates with `--max-rolls`, and only reads (the API
//!   server's audit log of its user).
//! - `delete_waves`: delete mode over three Deployments in waves (each after the one
//!   before is Ready again), a bad change held after the first, the fix.
//! - `csi`: the Secrets Store CSI driver's CRDs installed, pod statuses written as the
//!   driver writes them: a rotation rolls each Deployment mounting the class once.
//! - `events`: every rollout leaves a `ConfigChanged` occurrence however often its
//!   ConfigMap changes; the Events queued for a deleted namespace are dropped at once.
//! - `chart`: the Helm chart rendered for a matrix of values and checked by the real
//!   server with `kubectl apply --dry-run=server`.
//! - `reloader_chart`: Reloader's own chart with the image swapped, for its defaults and
//!   common value sets, run as the kubelet would with the RBAC it renders.
//!
//! - `takeover`: a change during adoption at a low `--api-qps` rolls each workload once;
//!   taking over from the real Wave and Reloader (`WAVELET_E2E_PEERS`) and across flag
//!   changes rolls only what changed while nothing watched.
//!
//! With neither variable set it prints that it did not run (and fails under `CI`).
//! `cargo test --test e2e -- NAME...` runs the scenarios whose names contain a NAME.

mod chart;
mod cluster;
mod csi;
mod delete_waves;
mod events;
mod fanout;
mod forward;
mod gates;
mod impact;
mod kube;
mod kubelet;
mod loadtest;
mod process;
mod quickstart;
mod reloader_chart;
mod reloader_loadtest;
mod scenarios;
mod takeover;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Mutex;
use std::time::Instant;

use cluster::{Cluster, Source};
use kube::Kube;

/// What a scenario gets: the cluster and an admin connection.
pub struct Ctx {
    pub cluster: Cluster,
    pub kube: Kube,
}

/// A scenario: a name and a function that panics on failure. `Serial` ones run alone,
/// after the others (they stop the API server).
pub struct Scenario {
    pub name: &'static str,
    pub run: fn(&Ctx),
    pub serial: bool,
}

fn main() {
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let Some(source) = Source::from_env() else {
        println!(
            "e2e: did not run: set WAVELET_E2E_BIN_DIR=<dir with etcd, kube-apiserver, kube-controller-manager> (see .ci/run) or WAVELET_E2E_KUBECONFIG=<kubeconfig of a cluster>"
        );
        if std::env::var_os("CI").is_some() {
            eprintln!("e2e: CI is set, and a suite that did not run must not pass");
            std::process::exit(1);
        }
        return;
    };
    let selected: Vec<&Scenario> = scenarios::ALL
        .iter()
        .chain(fanout::ALL)
        .chain(delete_waves::ALL)
        .chain(gates::ALL)
        .chain(impact::ALL)
        .chain(takeover::ALL)
        .filter(|s| filters.is_empty() || filters.iter().any(|f| s.name.contains(f.as_str())))
        .collect();
    let started = Instant::now();
    // The audit log `impact` is checked against (its own user only).
    let cluster = match Cluster::start_with(&source, &impact::extras()) {
        Ok(cluster) => cluster,
        Err(e) => {
            eprintln!("e2e: could not start the control plane: {e}");
            std::process::exit(1);
        }
    };
    println!(
        "e2e: control plane ready in {:.1} s ({})",
        started.elapsed().as_secs_f64(),
        cluster.dir().display()
    );
    let kube = Kube::new(cluster.admin());
    let kubelet = kubelet::Kubelet::start(kube.client.clone());
    let ctx = Ctx { cluster, kube };

    let results = Mutex::new(Vec::new());
    let run_one = |ctx: &Ctx, scenario: &Scenario| {
        let t = Instant::now();
        let outcome = catch_unwind(AssertUnwindSafe(|| (scenario.run)(ctx)));
        let secs = t.elapsed().as_secs_f64();
        match &outcome {
            Ok(()) => println!("e2e {} ... ok ({secs:.1} s)", scenario.name),
            Err(_) => println!("e2e {} ... FAILED ({secs:.1} s)", scenario.name),
        }
        results
            .lock()
            .unwrap()
            .push((scenario.name, outcome.is_ok()));
    };
    // Independent scenarios (each in its own namespaces) three at a time.
    let parallel: Vec<&&Scenario> = selected.iter().filter(|s| !s.serial).collect();
    for chunk in parallel.chunks(3) {
        std::thread::scope(|scope| {
            for scenario in chunk {
                let ctx = &ctx;
                let run_one = &run_one;
                scope.spawn(move || run_one(ctx, scenario));
            }
        });
    }
    for scenario in selected.iter().filter(|s| s.serial) {
        run_one(&ctx, scenario);
    }
    ctx.kube.delete_namespaces_of_suite();
    drop(kubelet);
    let results = results.into_inner().unwrap();
    let passed = results.iter().filter(|(_, ok)| *ok).count();
    let failed = results.len() - passed;
    println!(
        "e2e: {:.0} s against a real kube-apiserver",
        started.elapsed().as_secs_f64()
    );
    println!("e2e: {passed} passed, {failed} failed");
    if failed > 0 {
        let names: Vec<&str> = results
            .iter()
            .filter(|(_, ok)| !ok)
            .map(|(n, _)| *n)
            .collect();
        eprintln!("e2e: failed: {}", names.join(", "));
        std::process::exit(1);
    }
}
