//! Stakater Reloader's load-test scenarios S1–S13 (stakater/Reloader `test/loadtest/`:
//! their objects, sizes, update timing and expected reload counts; the facts, not the
//! code) against a real API server, measured from outside the controller. Shared by the
//! end-to-end suite (S1, S4 and S6 against wavelet: a wrong reload count fails CI) and
//! the benchmark (all 13, against wavelet, Reloader and Wave, with figures):
//!
//! - `objects`: the manifests, opted in for the controller under test;
//! - `scenarios`: what each scenario creates and the timed updates of its lanes;
//! - `drive`: create, wait until ready, play the lanes (holding them while the
//!   controller restarts), delete;
//! - `recorder`: list+watch of workloads, ReplicaSets, ConfigMaps and Secrets, timed;
//! - `outcome`: reloads done and expected, change → rollout latency, write → watch.
//!
//! Self-contained (std, serde_json and the wavelet library), so that the benchmark can
//! include it with `#[path]`.

#![allow(dead_code)]

pub mod drive;
pub mod objects;
pub mod outcome;
pub mod recorder;
pub mod scenarios;

pub use drive::Control;
pub use objects::OptIn;
pub use outcome::Outcome;
pub use recorder::Recorder;
pub use scenarios::{Id, Scenario, Timing};

/// wavelet's flags in the load tests: no debounce window and no storm limits, since
/// Reloader has neither (wavelet's defaults: `--debounce 1s`, `--min-rollout-interval
/// 10s`, 2 rollouts per second with a burst of 10).
pub const WAVELET_FLAGS: &[&str] = &[
    "--debounce",
    "0s",
    "--min-rollout-interval",
    "0s",
    "--max-rollouts-per-second",
    "100000",
    "--rollout-burst",
    "100000",
];
