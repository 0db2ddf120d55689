//! Operations: shutdown on signals, the HTTP endpoints, leader election.

use std::time::{Duration, Instant};

use crate::fake::FakeApi;
use crate::util::*;

const NS: &str = "default";

/// A fake with one opted-in Deployment mounting one ConfigMap.
fn fake_with_workload() -> FakeApi {
    let fake = FakeApi::start();
    fake.apply(configmap(NS, "app-config", &[("color", "blue")]));
    fake.apply(workload(
        "Deployment",
        NS,
        "web",
        opted_in(),
        mounts_configmap("app-config"),
    ));
    fake
}

fn exits_zero_soon_after(signal: &str) {
    let fake = fake_with_workload();
    let mut wavelet = Wavelet::start(&fake, FAST);
    let sent = Instant::now();
    wavelet.signal(signal);
    let status = wavelet.wait_exit(Duration::from_secs(3));
    let output = wavelet.output();
    let status = status.unwrap_or_else(|| panic!("still running 3 s after SIG{signal}:\n{output}"));
    assert_eq!(status.code(), Some(0), "SIG{signal} exit status:\n{output}");
    assert!(sent.elapsed() < Duration::from_secs(3));
}

#[test]
fn sigterm_exits_zero_within_three_seconds() {
    exits_zero_soon_after("TERM");
}

#[test]
fn sigint_exits_zero_within_three_seconds() {
    exits_zero_soon_after("INT");
}
