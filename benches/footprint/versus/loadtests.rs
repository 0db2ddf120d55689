//! Reloader's 13 load-test scenarios against each controller in turn, then against the
//! floor: the same objects and the same updates, each run in fresh namespaces that are
//! deleted (and waited out) before the next run starts.

use std::time::{Duration, Instant, SystemTime};

use crate::calls::CallCounts;
use crate::loadtest::{drive, Control, Id, Outcome, Recorder, Scenario, Timing};

use super::controllers::{Controller, Start, Usage, Which};
use super::floor::Floor;
use super::plane::Plane;

const SETUP_TIMEOUT: Duration = Duration::from_secs(900);

/// Who played the scenario: a controller, or nobody but the floor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Who {
    Controller(Which),
    Floor,
}

impl Who {
    pub fn title(self) -> &'static str {
        match self {
            Who::Controller(w) => w.title(),
            Who::Floor => "floor",
        }
    }
}

/// One run of a scenario.
pub struct RunFigures {
    pub who: Who,
    pub outcome: Outcome,
    /// From start until ready.
    pub ready_after: Duration,
    pub cpu_to_ready: f64,
    /// CPU from ready until the end of the scenario (its changes and restarts).
    pub cpu_after_ready: f64,
    pub usage: Usage,
    /// API requests by the audit log: start → ready, ready → end.
    pub calls_start: CallCounts,
    pub calls_after: CallCounts,
    /// The controller's own request counter at the end (all its processes: the last only).
    pub own_requests: Option<f64>,
}

pub struct ScenarioFigures {
    pub id: Id,
    pub scale: usize,
    pub window: Duration,
    pub runs: Vec<RunFigures>,
}

/// Wall-clock time of an `Instant` in the past.
pub fn wall_of(at: Instant) -> SystemTime {
    SystemTime::now() - at.elapsed()
}

fn progress(message: &str) {
    eprintln!("versus: {message}");
}

fn run_controller(
    plane: &Plane,
    id: Id,
    scale: usize,
    timing: &Timing,
    which: Which,
) -> RunFigures {
    let scenario = Scenario::new(id, scale, which.name(), which.opt_in(), timing);
    drive::set_up(&plane.admin, &scenario, SETUP_TIMEOUT);
    let recorder = Recorder::start(&plane.admin, &scenario.namespaces[0]);
    let since = SystemTime::now();
    let mut controller = Controller::start(
        which,
        plane,
        Start {
            annotations_strategy: scenario.annotations_strategy,
            ..Start::default()
        },
    );
    let written = match which {
        Which::Reloader => 0,
        _ => scenario.workloads().count(),
    };
    let ready = controller.wait_ready(plane, written, since, Duration::from_secs(600));
    let started = controller.started;
    let ready_wall = wall_of(ready.at);
    let played = drive::play(&plane.admin, &scenario, timing.downtime, &mut |c| match c {
        Control::Stop => controller.stop_process(),
        Control::Start => controller.restart(plane),
    });
    std::thread::sleep(scenario.settle());
    recorder.wait_quiet(Duration::from_secs(2), Duration::from_secs(120));
    let (until, until_wall) = (Instant::now(), SystemTime::now());
    let own_requests = controller.own_request_count();
    let usage = controller.finish();
    let outcome = Outcome::of(
        &scenario,
        &played,
        &recorder.finish(),
        started,
        ready.at,
        until,
    );
    let figures = RunFigures {
        who: Who::Controller(which),
        outcome,
        ready_after: ready.at - started,
        cpu_to_ready: ready.cpu_seconds,
        cpu_after_ready: usage.cpu_seconds - ready.cpu_seconds,
        usage,
        calls_start: plane.calls(which, since, ready_wall),
        calls_after: plane.calls(which, ready_wall, until_wall),
        own_requests,
    };
    drive::tear_down(&plane.admin, &scenario, Some(SETUP_TIMEOUT));
    figures
}

fn run_floor(plane: &Plane, id: Id, scale: usize, timing: &Timing) -> RunFigures {
    let scenario = Scenario::new(id, scale, "floor", Which::Reloader.opt_in(), timing);
    drive::set_up(&plane.admin, &scenario, SETUP_TIMEOUT);
    let recorder = Recorder::start(&plane.admin, &scenario.namespaces[0]);
    let floor = Floor::start(&plane.admin, &scenario, &scenario.namespaces[0]);
    let ready = Instant::now();
    // The floor does not restart: it has no state to lose.
    let played = drive::play(&plane.admin, &scenario, timing.downtime, &mut |_| {});
    std::thread::sleep(scenario.settle());
    recorder.wait_quiet(Duration::from_secs(2), Duration::from_secs(120));
    let until = Instant::now();
    drop(floor);
    let outcome = Outcome::of(&scenario, &played, &recorder.finish(), ready, ready, until);
    drive::tear_down(&plane.admin, &scenario, Some(SETUP_TIMEOUT));
    RunFigures {
        who: Who::Floor,
        outcome,
        ready_after: Duration::ZERO,
        cpu_to_ready: 0.0,
        cpu_after_ready: 0.0,
        usage: Usage::default(),
        calls_start: CallCounts::default(),
        calls_after: CallCounts::default(),
        own_requests: None,
    }
}

/// Every scenario at every size, the controllers in turn (the order rotating from one
/// scenario to the next, so that a noisy moment does not always hit the same one).
pub fn run(
    plane: &Plane,
    ids: &[Id],
    scales: &[usize],
    controllers: &[Which],
    floor: bool,
    timing: &Timing,
    mut each: impl FnMut(&ScenarioFigures),
) -> Vec<ScenarioFigures> {
    let mut all = Vec::new();
    let mut who: Vec<Who> = controllers.iter().map(|w| Who::Controller(*w)).collect();
    if floor {
        who.push(Who::Floor);
    }
    let mut turn = 0;
    for &scale in scales {
        for &id in ids {
            let mut runs = Vec::new();
            for k in 0..who.len() {
                let w = who[(turn + k) % who.len()];
                progress(&format!("{} ×{scale} with {}", id.name(), w.title()));
                let started = Instant::now();
                let figures = match w {
                    Who::Controller(which) => run_controller(plane, id, scale, timing, which),
                    Who::Floor => run_floor(plane, id, scale, timing),
                };
                progress(&format!(
                    "{} ×{scale} with {}: {} reloads for {} updates in {:.0} s",
                    id.name(),
                    w.title(),
                    figures.outcome.reloads,
                    figures.outcome.data_updates + figures.outcome.noop_updates,
                    started.elapsed().as_secs_f64()
                ));
                runs.push(figures);
            }
            turn += 1;
            // Back in the order of `who` for the tables.
            runs.sort_by_key(|r| who.iter().position(|w| *w == r.who));
            let figures = ScenarioFigures {
                id,
                scale,
                window: timing.window(id),
                runs,
            };
            each(&figures);
            all.push(figures);
        }
    }
    all
}
