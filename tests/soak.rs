//! Chaos soak: for a bounded time, random configuration changes (data and label-only edits,
//! deletions and re-creations, new workloads, opt-in and opt-out, delete-mode objects) while
//! the fake API server injects random faults (dropped, truncated and stalled watches, 410s,
//! 429/5xx with and without Retry-After, slow responses, token rotation, API server
//! restarts). wavelet runs as the chart runs it, with its defaults: two replicas with
//! leader election, safe fan-out in waves (first wave 1, then 25%). New Pods get Ready
//! after a moment, except those reading a crashing value some edits write, so a shared
//! change's waves wait for health and hold on a crash until a later edit supersedes the
//! hold; the leader is stopped now and then (mid-fan-out, as it comes) and replaced.
//! Then the faults stop, and within one resync period plus the waves of the longest
//! fan-out (plus a take-over, the debounce and rollout interval) every opted-in workload
//! must carry the hash of its current configuration, every fan-out must have finished and
//! left `wavelet-state` (no `fanout.`/`urgent.` line, none of an object that is gone), every
//! delete-mode data change must have replaced the Pods it owed and no others, no workload
//! may have more revisions than its configuration changes justify (nothing rolled twice
//! for one change), every hold seen during the run must have named a workload that read a
//! crashing configuration, with a reason, and wavelet's resident memory must have stayed
//! bounded.
//!
//! `WAVELET_SOAK_SECS` sets the length (default 60), `WAVELET_SOAK_SEED` replays a run's
//! draws (the seed is printed at the start and in every failure; timing still differs).

mod chaos;
mod replicas;
mod rng;
mod world;

use std::time::{Duration, Instant};

use crate::fake::FakeApi;
use crate::util::RotatingToken;

use chaos::Chaos;
use replicas::{Replicas, ELECTION, LEASE_DURATION};
use rng::Rng;
use world::{World, STATE_NS};

/// Short enough that the convergence deadline stays short, long enough that wavelet spends
/// most of the run on watches rather than lists.
const RESYNC: Duration = Duration::from_secs(4);
const DEBOUNCE: Duration = Duration::from_millis(200);
const MIN_ROLLOUT_INTERVAL: Duration = Duration::from_millis(500);
/// When, before the end of the storm, every ConfigMap/Secret gets one last data change.
const FINAL_SWEEP_BEFORE_END: Duration = Duration::from_millis(600);
/// Beyond one resync period: the debounce, the rollout interval, one relist and the
/// rollout's own requests on a loaded 2-core machine.
const CONVERGENCE_SLACK: Duration = Duration::from_secs(3);
/// New Pods get Ready this long after they are created (a crashing one never does).
const READY_DELAY: Duration = Duration::from_millis(300);
/// Longer than the longest fault that holds a watch back (a 6 s stall), so only a crash
/// holds a fan-out; the default (15m) would outlast the run.
const ROLLOUT_TIMEOUT: &str = "10s";
/// `--wave-size`'s default.
const WAVE_SIZE_PERCENT: usize = 25;
/// What one wave adds to the convergence bound: its workloads wait out the debounce and
/// the rollout interval, roll, their Pods get Ready, and wavelet sees their status.
const WAVE_GATE: Duration = Duration::from_millis(
    DEBOUNCE.as_millis() as u64
        + MIN_ROLLOUT_INTERVAL.as_millis() as u64
        + READY_DELAY.as_millis() as u64
        + 1000,
);
/// Between two stops of the leader.
fn leader_pause(rng: &mut Rng) -> Duration {
    rng.millis(5_000, 20_000)
}
/// How much wavelet's VmRSS may grow from the end of its first sync to the end of the run:
/// the soak's objects are few and small, so growth beyond this is a leak.
const RSS_GROWTH_LIMIT_KIB: u64 = 16 * 1024;

struct Settings {
    seed: u64,
    duration: Duration,
}

impl Settings {
    fn from_env() -> Settings {
        let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let seed = env("WAVELET_SOAK_SEED")
            .map(|s| s.parse().expect("WAVELET_SOAK_SEED is a number"))
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64
            });
        let secs = env("WAVELET_SOAK_SECS")
            .map(|s| s.parse().expect("WAVELET_SOAK_SECS is a number of seconds"))
            .unwrap_or(60);
        Settings {
            seed,
            duration: Duration::from_secs(secs),
        }
    }

    fn replay(&self) -> String {
        format!(
            "seed {} (replay: WAVELET_SOAK_SEED={} WAVELET_SOAK_SECS={} cargo test --test integration soak)",
            self.seed,
            self.seed,
            self.duration.as_secs()
        )
    }
}

/// Fails the run with everything needed to understand it: the seed, the problems, what
/// the run did to each object involved, and wavelet's log (saved whole to a file).
fn fail(
    settings: &Settings,
    world: &World,
    wavelet: &Replicas,
    what: &str,
    problems: &[String],
) -> ! {
    let output = wavelet.output();
    let saved = std::env::temp_dir().join(format!("wavelet-soak-{}.log", settings.seed));
    let _ = std::fs::write(
        &saved,
        format!("{}\n\n--- wavelet output\n{output}", world.full_log()),
    );
    let mut message = format!("soak {}: {what}\n", settings.replay());
    for problem in problems {
        message.push_str(&format!("- {problem}\n"));
        // Problems start with "<plural> <namespace>/<name>:".
        let object = problem.split(':').next().unwrap_or("");
        let name = object.rsplit(' ').next().unwrap_or(object);
        message.push_str(&world.log_about(name, 15));
        let lines: Vec<&str> = output.lines().filter(|l| mentions(l, name)).collect();
        for line in &lines[lines.len().saturating_sub(15)..] {
            message.push_str(&format!("    | {line}\n"));
        }
    }
    message.push_str(&format!(
        "the run's log and wavelet's whole output: {}\n",
        saved.display()
    ));
    panic!("{message}");
}

/// Whether `line` names `namespace/name` (not merely a longer name that starts with it).
fn mentions(line: &str, namespaced_name: &str) -> bool {
    line.match_indices(namespaced_name).any(|(at, _)| {
        let next = line[at + namespaced_name.len()..].chars().next();
        !next.is_some_and(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
    })
}

#[test]
fn a_chaos_soak_loses_no_change_replaces_no_pod_twice_and_rolls_no_more_than_needed() {
    let settings = Settings::from_env();
    eprintln!("soak: {:?}, {}", settings.duration, settings.replay());
    let mut rng = Rng::new(settings.seed);
    let fake = FakeApi::start();
    let mut world = World::create(&fake, &mut rng);
    let token = RotatingToken::new(&fake, "token-0");

    let durations =
        [RESYNC, DEBOUNCE, MIN_ROLLOUT_INTERVAL].map(|d| format!("{}ms", d.as_millis()));
    let args = [
        "--kubeconfig",
        token.kubeconfig_path(),
        "--resync",
        &durations[0],
        "--debounce",
        &durations[1],
        "--min-rollout-interval",
        &durations[2],
        "--max-rollouts-per-second",
        "100",
        "--state-namespace",
        STATE_NS,
        "--lease-namespace",
        STATE_NS,
        "--rollout-timeout",
        ROLLOUT_TIMEOUT,
    ];
    let args: Vec<&str> = args.iter().chain(ELECTION).copied().collect();
    fake.set_ready_delay(READY_DELAY);
    let mut wavelet = Replicas::start(&args, &[("RUST_LOG", "debug")]);
    if !wavelet.wait_for_leader(Duration::from_secs(20))
        || !fake.wait_until(Duration::from_secs(20), |f| world.first_sight_done(f))
    {
        let problems = world.unconverged(&fake);
        fail(
            &settings,
            &world,
            &wavelet,
            "wavelet never adopted everything",
            &problems,
        );
    }
    let baseline_kib = wavelet.rss_kib();
    let mut peak_kib = baseline_kib;

    // The storm.
    let mut chaos = Chaos::new(&fake, &token);
    let mut faults = 0;
    let end = Instant::now() + settings.duration;
    let mut next_fault = Instant::now();
    let mut next_leader_stop = Instant::now() + leader_pause(&mut rng);
    let mut swept = false;
    while Instant::now() < end {
        if !swept && end.saturating_duration_since(Instant::now()) < FINAL_SWEEP_BEFORE_END {
            // Changes to everything right before the faults stop, so the convergence
            // deadline has real work to cover.
            world.sweep(&fake);
            swept = true;
        }
        if Instant::now() >= next_fault {
            let fault = chaos.strike(&mut rng);
            world.note(format!("fault: {fault}"));
            faults += 1;
            next_fault = Instant::now() + chaos::pause(&mut rng);
        }
        if !swept && Instant::now() >= next_leader_stop {
            let what = wavelet.replace_leader(&mut rng);
            world.note(format!("restart: {what}"));
            next_leader_stop = Instant::now() + leader_pause(&mut rng);
        }
        // The sweep made the run's last changes: an edit after it could write the
        // crashing value again and leave a fan-out rightly held at the end (seed
        // 1796049623015097650: `cm-0` crashing 80 ms after its final edit).
        if !swept {
            world.act(&fake, &mut rng);
        }
        world.watch_state(&fake);
        if let Some(replica) = wavelet.crashed() {
            let what = format!("wavelet replica {replica} exited");
            fail(&settings, &world, &wavelet, &what, &[]);
        }
        peak_kib = peak_kib.max(wavelet.rss_kib());
        // Scenario pacing: random gaps between the storm's actions.
        std::thread::sleep(rng.millis(50, 400));
    }

    // The calm: every required object exists again, and the server behaves.
    world.restore(&fake);
    fake.heal();
    world.note("faults stop");
    let calm = Instant::now();
    let unconverged_at_calm = world.unconverged(&fake).len();
    // The final sweep changed every object at once: the longest fan-out goes wave by wave.
    let waves = world.most_waves(&fake, WAVE_SIZE_PERCENT) as u32;
    let bound = RESYNC + CONVERGENCE_SLACK + LEASE_DURATION + WAVE_GATE * waves;
    world.note(format!(
        "convergence bound {bound:?} ({waves} waves at most)"
    ));
    let deadline = calm + bound;
    loop {
        world.watch_state(&fake);
        let problems = world.unconverged(&fake);
        if problems.is_empty() {
            break;
        }
        if Instant::now() >= deadline {
            let what = format!(
                "not converged {:?} after the faults stopped",
                calm.elapsed()
            );
            fail(&settings, &world, &wavelet, &what, &problems);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let converged_after = calm.elapsed();
    world.note(format!(
        "converged after {converged_after:?} ({unconverged_at_calm} objects were not when the faults stopped)"
    ));

    // Nothing more may happen once converged. A quiet stretch is the scenario here (the
    // storm's world has no barrier object to wait for); half a resync period lets late work
    // show.
    std::thread::sleep(RESYNC / 2);
    let mut problems = world.violations(&fake);
    problems.extend(world.unconverged(&fake));
    problems.extend(world.unexplained_holds(&fake));
    let (crash_edits, fan_outs, waved, holds) = world.exercised();
    if waved == 0 {
        // The final sweep changes every shared object: a run without a second wave did not
        // test waves at all.
        problems.push(format!(
            "configmaps {STATE_NS}/wavelet-state: no fan-out of two waves or more seen ({fan_outs} fan-outs)"
        ));
    }
    if !problems.is_empty() {
        fail(
            &settings,
            &world,
            &wavelet,
            "wrong after converging",
            &problems,
        );
    }
    let final_kib = wavelet.rss_kib();
    peak_kib = peak_kib.max(final_kib);
    if final_kib > baseline_kib + RSS_GROWTH_LIMIT_KIB {
        let what = format!(
            "VmRSS grew from {baseline_kib} KiB to {final_kib} KiB (limit +{RSS_GROWTH_LIMIT_KIB} KiB)"
        );
        fail(&settings, &world, &wavelet, &what, &[]);
    }
    eprintln!(
        "soak passed: {}; {faults} faults; {} replicas started; {}; {crash_edits} crashing edits, {fan_outs} fan-outs seen ({waved} of two waves or more), {holds} holds, all on a crashing configuration; {unconverged_at_calm} objects not converged when the faults stopped, all {converged_after:?} later (bound {bound:?}, {waves} waves); VmRSS {baseline_kib} KiB after sync, peak {peak_kib} KiB, final {final_kib} KiB",
        settings.replay(),
        wavelet.started(),
        world.summary(&fake),
    );
}
