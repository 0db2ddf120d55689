//! Safety: a Secret value never leaves the API server through wavelet — not in its
//! output at `RUST_LOG=trace`, not in Events, not in `/metrics`, not in any request it sends.

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
fn a_secret_value_never_appears_in_output_events_metrics_or_requests() {
    let (first, second) = (canary("one"), canary("two"));
    let fake = FakeApi::start();
    fake.apply(secret(NS, "creds", &[("password", &first)]));
    let spec = json!({"containers": [{"name": "app", "image": "nginx",
        "envFrom": [{"secretRef": {"name": "creds"}}],
        "env": [{"name": "P", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "password"}}}]}]});
    fake.apply(workload("Deployment", NS, "web", opted_in(), spec));
    // The same values in a delete-mode Secret: its hash goes to wavelet-state, its Pods
    // are replaced, an Event is written.
    let mut delete_mode = secret(NS, "dm-creds", &[("password", &first)]);
    delete_mode["metadata"]["annotations"] = json!({"magalix.com/podDeleteMatch": "app=dm"});
    fake.apply(delete_mode);
    let mut dm = workload("Deployment", NS, "dm", json!({}), json!({}));
    dm["spec"]["selector"]["matchLabels"] = json!({"app": "dm"});
    dm["spec"]["template"]["metadata"]["labels"] = json!({"app": "dm"});
    fake.apply(dm);
    let mut args = FAST.to_vec();
    args.extend(["--state-namespace", NS]);
    let wavelet = Wavelet::start_with_env(&fake, &args, &[("RUST_LOG", "trace")]);
    eventually(&fake, &wavelet, "adoption and first sight", |f| {
        hashes(f, "deployments", NS, "web", "wavelet.dev/config-hash")
            .1
            .is_some()
            // The delete-mode Secret's first sight is recorded (wavelet creates the state
            // ConfigMap empty at start, so its existence alone says nothing).
            && f.get("configmaps", NS, "wavelet-state")
                .is_some_and(|s| !s["data"]["secret.default.dm-creds"].is_null())
    });
    let first_pods = dm_pod_names(&fake);
    for name in ["creds", "dm-creds"] {
        fake.merge_patch(
            "secrets",
            NS,
            name,
            json!({"data": {"password": wavelet::objects::base64::encode(second.as_bytes())}}),
        );
    }
    eventually(&fake, &wavelet, "rollout and Pod replacement", |f| {
        f.revisions("deployments", NS, "web") == 2
            && dm_pod_names(f).iter().all(|p| !first_pods.contains(p))
            && !f.events_for(NS, "dm-creds").is_empty()
    });
    // Both reconciles over, with all they logged and sent: the rollout seen and found up to
    // date, the replacement recorded.
    wait_until_up_to_date(&wavelet, "deployment default/web", 1);
    wavelet.wait_for_log_after(0, "secret default/dm-creds", "delete mode: Replaced {");
    let (code, metrics) = wavelet.http_get("/metrics");
    assert_eq!(code, 200);
    assert!(
        metrics.contains("wavelet_rollouts_total"),
        "real metrics:\n{metrics}"
    );
    let output = wavelet.kill();
    assert!(
        output.contains("TRACE") || output.contains("DEBUG"),
        "trace logging was on"
    );

    for value in [&first, &second] {
        let encoded = wavelet::objects::base64::encode(value.as_bytes());
        for needle in [value.as_str(), encoded.as_str()] {
            assert!(
                !output.contains(needle),
                "wavelet's output contains a Secret value"
            );
            assert!(
                !metrics.contains(needle),
                "/metrics contains a Secret value"
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

/// Names of the Pods of Deployment `dm`.
fn dm_pod_names(fake: &FakeApi) -> Vec<String> {
    fake.pods(NS)
        .iter()
        .filter(|p| p["metadata"]["labels"]["app"] == "dm")
        .filter_map(|p| p["metadata"]["name"].as_str().map(String::from))
        .collect()
}

/// With `--hash-key-file`, the data hash of a delete-mode Secret that wavelet keeps in its
/// `wavelet-state` ConfigMap is an HMAC too, so whoever can read that ConfigMap cannot test
/// guesses of a low-entropy value offline (the hash-mode annotation is pinned in
/// `hash_mode::hash_key_file_publishes_an_hmac_instead_of_a_plain_hash`).
#[test]
fn a_delete_mode_secrets_hash_in_the_state_configmap_is_an_hmac_under_the_hash_key() {
    use wavelet::model::hash::data_hash;
    use wavelet::objects::ConfigObject;
    let fake = FakeApi::start();
    let mut delete_mode = secret(NS, "dm-creds", &[("password", "hunter2")]);
    delete_mode["metadata"]["annotations"] = json!({"magalix.com/podDeleteMatch": "app=dm"});
    fake.apply(delete_mode);
    let dir = TempDir::new("hmac");
    let key_file = dir.write("key", "s3cret-key\n");
    let mut args = FAST.to_vec();
    args.extend(["--state-namespace", NS, "--hash-key-file"]);
    args.push(key_file.to_str().unwrap());
    let wavelet = Wavelet::start(&fake, &args);
    let entry = |f: &FakeApi| {
        f.get("configmaps", NS, "wavelet-state").and_then(|s| {
            s["data"]["secret.default.dm-creds"]
                .as_str()
                .map(String::from)
        })
    };
    eventually(&fake, &wavelet, "the first-sight state entry", |f| {
        entry(f).is_some()
    });
    let recorded = entry(&fake).unwrap();
    let stored = ConfigObject::secret(fake.get("secrets", NS, "dm-creds").unwrap()).unwrap();
    let plain = data_hash(stored.digests(), None);
    let keyed = data_hash(stored.digests(), Some(b"s3cret-key"));
    assert_ne!(plain, keyed);
    assert_eq!(
        recorded, keyed,
        "the HMAC, keyed without the trailing newline"
    );
}
