//! Reloader's quick load-test subset (S1 burst updates, S4 no-op updates, S6 controller
//! restart — what Reloader's own CI runs) against wavelet, at Reloader's sizes with a
//! short update window: the reload count must be exactly what wavelet's semantics
//! require (one rollout per data change, none for an annotation edit, none for a
//! restart, one for changes made while it was down), counted by a watch from outside.
//! Figures (memory, CPU, latency) are the benchmark's, not asserted here.

use std::time::{Duration, Instant};

use serde_json::Value;
use wavelet::client::Shape;

use crate::loadtest::{drive, Control, Id, OptIn, Outcome, Recorder, Scenario, Timing};
use crate::process::Wavelet;
use crate::Ctx;

/// A short run: 3 s of updates (Reloader: 55 s), S6 restarted after 1.5 s.
fn timing() -> Timing {
    Timing {
        duration: Duration::from_secs(8),
        min_window: Duration::ZERO,
        restart_after: Duration::from_millis(1500),
        downtime: Duration::from_secs(1),
        min_changes: 0,
    }
}

/// Whether every workload of the scenario carries wavelet's hash (adopted).
fn adopted(ctx: &Ctx, scenario: &Scenario) -> bool {
    let ns = &scenario.namespaces[0];
    let mut count = 0;
    let listed = ctx.kube.client.list(
        &format!("/apis/apps/v1/namespaces/{ns}/deployments"),
        Shape::Metadata,
        &mut |d: Value| {
            count +=
                usize::from(d["metadata"]["annotations"]["wavelet.dev/config-hash"].is_string());
        },
    );
    listed.is_ok() && count >= scenario.workloads().count()
}

/// wavelet in the scenario's namespace, started and adopted, its start-up writes done.
fn start(ctx: &Ctx, scenario: &Scenario, recorder: &Recorder) -> Wavelet {
    let mut args = vec!["--namespaces", scenario.namespaces[0].as_str()];
    args.extend_from_slice(crate::loadtest::WAVELET_FLAGS);
    let wavelet = Wavelet::run(&ctx.cluster, &args);
    ctx.kube.until(Duration::from_secs(60), "adoption", || {
        adopted(ctx, scenario)
    });
    recorder.wait_quiet(Duration::from_millis(500), Duration::from_secs(30));
    wavelet
}

fn run(ctx: &Ctx, id: Id) -> Outcome {
    let client = &ctx.kube.client;
    let timing = timing();
    let scenario = Scenario::new(id, 1, "ci", OptIn::Reloader, &timing);
    drive::set_up(client, &scenario, Duration::from_secs(120));
    let recorder = Recorder::start(client, &scenario.namespaces[0]);
    let started = Instant::now();
    let mut wavelet = Some(start(ctx, &scenario, &recorder));
    let ready = Instant::now();
    let played = drive::play(
        client,
        &scenario,
        timing.downtime,
        &mut |control| match control {
            Control::Stop => {
                if let Some(mut w) = wavelet.take() {
                    w.terminate();
                }
            }
            Control::Start => wavelet = Some(start(ctx, &scenario, &recorder)),
        },
    );
    std::thread::sleep(scenario.settle());
    recorder.wait_quiet(Duration::from_secs(1), Duration::from_secs(30));
    let outcome = Outcome::of(
        &scenario,
        &played,
        &recorder.finish(),
        started,
        ready,
        Instant::now(),
    );
    let output = wavelet.as_ref().map(Wavelet::output).unwrap_or_default();
    drop(wavelet);
    drive::tear_down(client, &scenario, None);
    assert!(
        outcome.wavelet_exact() && outcome.missed == 0 && outcome.startup_rollouts == 0,
        "{}: {} reloads ({} unprompted, {} at start, {} changes without one) where wavelet's semantics require {:?}, after {} data updates; wavelet's output:\n{output}",
        id.name(),
        outcome.reloads,
        outcome.unprompted,
        outcome.startup_rollouts,
        outcome.missed,
        outcome.wavelet_expected,
        outcome.data_updates
    );
    outcome
}

/// S1: every update of a ConfigMap rolls its one Deployment once.
pub fn s1_burst_updates(ctx: &Ctx) {
    let outcome = run(ctx, Id::S1);
    assert!(outcome.data_updates >= 20, "{outcome:?}");
    assert_eq!(outcome.wavelet_expected.1, outcome.data_updates);
}

/// S4: annotation-only updates roll nothing (Reloader's harness expects 0 too).
pub fn s4_no_op_updates(ctx: &Ctx) {
    let outcome = run(ctx, Id::S4);
    assert!(outcome.noop_updates >= 20, "{outcome:?}");
    assert_eq!((outcome.reloads, outcome.reloader_expected), (0, Some(0)));
}

/// S6: a restart rolls nothing by itself; changes made while wavelet was down roll their
/// workload once when it starts again.
pub fn s6_controller_restart(ctx: &Ctx) {
    let outcome = run(ctx, Id::S6);
    assert!(
        outcome.data_updates >= 10 && outcome.down_updates >= 2,
        "{outcome:?}"
    );
}
