//! Safety: a Secret value never leaves the API server through wavelet — not in its
//! output at `RUST_LOG=trace`, not in Events, not in any request it sends.

use std::time::Duration;

use serde_json::json;

use crate::fake::FakeApi;
use crate::util::*;

const NS: &str = "default";

fn canary(tag: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("canary-{tag}-{nanos:x}-{}", std::process::id())
}

#[test]
fn a_secret_value_never_appears_in_output_events_or_requests() {
    let (first, second) = (canary("one"), canary("two"));
    let fake = FakeApi::start();
    fake.apply(secret(NS, "creds", &[("password", &first)]));
    let spec = json!({"containers": [{"name": "app", "image": "nginx",
        "envFrom": [{"secretRef": {"name": "creds"}}],
        "env": [{"name": "P", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "password"}}}]}]});
    fake.apply(workload("Deployment", NS, "web", opted_in(), spec));
    let wavelet = Wavelet::start_with_env(&fake, FAST, &[("RUST_LOG", "trace")]);
    eventually(&fake, &wavelet, "adoption", |f| {
        hashes(f, "deployments", NS, "web", "wavelet.dev/config-hash")
            .1
            .is_some()
    });
    fake.merge_patch(
        "secrets",
        NS,
        "creds",
        json!({"data": {"password": wavelet::base64::encode(second.as_bytes())}}),
    );
    eventually(&fake, &wavelet, "rollout", |f| {
        f.revisions("deployments", NS, "web") == 2
    });
    settle(Duration::from_millis(300));
    let output = wavelet.kill();
    assert!(
        output.contains("TRACE") || output.contains("DEBUG"),
        "trace logging was on"
    );

    for value in [&first, &second] {
        let encoded = wavelet::base64::encode(value.as_bytes());
        for needle in [value.as_str(), encoded.as_str()] {
            assert!(
                !output.contains(needle),
                "wavelet's output contains a Secret value"
            );
            for event in fake.list("events", Some(NS)) {
                assert!(
                    !event.to_string().contains(needle),
                    "an Event contains a Secret value"
                );
            }
            for request in fake.requests() {
                assert!(
                    !request.body.contains(needle),
                    "a request body contains a Secret value: {} {}",
                    request.method,
                    request.path
                );
                assert!(!request.path.contains(needle));
            }
        }
    }
}
