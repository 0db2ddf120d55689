//! The faults of a soak run: one random misbehaviour of the API server at a time, drawn
//! from the seeded RNG and described for the run's log.

use std::time::Duration;

use crate::fake::{FakeApi, Fault};
use crate::util::RotatingToken;

use super::rng::Rng;

/// Resources wavelet watches.
const WATCHED: &[&str] = &[
    "configmaps",
    "secrets",
    "deployments",
    "statefulsets",
    "daemonsets",
];

/// (verb, resource) pairs wavelet sends requests for, besides the watches.
const REQUESTS: &[(&str, &str)] = &[
    ("GET", "configmaps"),
    ("GET", "secrets"),
    ("GET", "deployments"),
    ("GET", "statefulsets"),
    ("GET", "daemonsets"),
    ("GET", "pods"),
    ("WATCH", "configmaps"),
    ("WATCH", "secrets"),
    ("WATCH", "deployments"),
    ("PATCH", "deployments"),
    ("PATCH", "statefulsets"),
    ("PATCH", "daemonsets"),
    ("POST", "pods"),
    ("DELETE", "pods"),
    ("POST", "events"),
    ("POST", "configmaps"),
    ("PUT", "configmaps"),
];

/// Injects the faults of one run; the token rotation needs the kubeconfig's token file.
pub struct Chaos<'a> {
    pub fake: &'a FakeApi,
    pub token: &'a RotatingToken,
    rotations: u32,
}

impl<'a> Chaos<'a> {
    pub fn new(fake: &'a FakeApi, token: &'a RotatingToken) -> Chaos<'a> {
        Chaos {
            fake,
            token,
            rotations: 0,
        }
    }

    /// Injects one random fault; returns what it was.
    pub fn strike(&mut self, rng: &mut Rng) -> String {
        let fake = self.fake;
        let watched = rng.pick(WATCHED).to_string();
        // Weights: the common faults often, the heavy ones (restart, stall) now and then.
        match rng.weighted(&[6, 6, 3, 3, 10, 5, 3, 2, 2, 3, 3, 2]) {
            0 => {
                fake.inject(Fault::DropWatchMidEvent {
                    resource: watched.clone(),
                });
                format!("drop the next {watched} watch mid-event")
            }
            1 => {
                fake.inject(Fault::TruncatedLine {
                    resource: watched.clone(),
                });
                format!("truncate the next {watched} watch line")
            }
            2 => {
                fake.inject(Fault::WatchErrorExpired {
                    resource: watched.clone(),
                });
                fake.close_watches();
                format!("close watches; next {watched} watch gets ERROR 410")
            }
            3 => {
                fake.inject(Fault::WatchHttpGone {
                    resource: watched.clone(),
                });
                fake.close_watches();
                format!("close watches; next {watched} watch gets HTTP 410")
            }
            4 => {
                let (method, resource) = *rng.pick(REQUESTS);
                let code = *rng.pick(&[429, 500, 503, 504, 409]);
                let code = if code == 409 && method != "PUT" {
                    500
                } else {
                    code
                };
                let retry_after_secs = *rng.pick(&[None, Some(0), Some(1)]);
                let times = 1 + rng.below(4) as u32;
                let plain_text = code == 429 && rng.chance(50);
                fake.inject(Fault::Status {
                    method: method.into(),
                    resource: resource.into(),
                    code,
                    retry_after_secs,
                    times,
                    plain_text,
                });
                format!(
                    "{code} x{times} on {method} {resource} (Retry-After {retry_after_secs:?}, plain {plain_text})"
                )
            }
            5 => {
                let (method, resource) = *rng.pick(REQUESTS);
                let delay = rng.millis(50, 1500);
                fake.inject(Fault::Slow {
                    method: method.into(),
                    resource: resource.into(),
                    delay,
                });
                format!("slow {method} {resource} by {delay:?}")
            }
            6 => {
                let duration = rng.millis(500, 6000);
                fake.inject(Fault::StallWatch {
                    resource: watched.clone(),
                    duration,
                });
                if rng.chance(50) {
                    fake.close_watches();
                }
                format!("stall the next {watched} watch for {duration:?}")
            }
            7 => {
                self.rotations += 1;
                let token = format!("token-{}", self.rotations);
                self.token.rotate(fake, &token);
                "rotate the token".to_string()
            }
            8 => {
                fake.restart();
                // A restarting server answers 503 for a moment while its caches fill.
                let (method, resource) = *rng.pick(REQUESTS);
                fake.inject(Fault::Status {
                    method: method.into(),
                    resource: resource.into(),
                    code: 503,
                    retry_after_secs: Some(1),
                    times: 2,
                    plain_text: false,
                });
                format!(
                    "restart the API server (drop every connection, compact history; 503 x2 on {method} {resource})"
                )
            }
            9 => {
                fake.close_watches();
                "close every watch cleanly (timeoutSeconds)".to_string()
            }
            10 => {
                fake.bookmark();
                "bookmark every watch".to_string()
            }
            _ => {
                fake.compact();
                "compact the watch history".to_string()
            }
        }
    }
}

/// How long to wait between two faults.
pub fn pause(rng: &mut Rng) -> Duration {
    rng.millis(100, 600)
}
