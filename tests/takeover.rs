//! Baselines: what a workload is adopted or taken over with is what its Pods run. A change
//! made while wavelet adopts rolls once after the adoption; a change made while wavelet
//! was stopped rolls once, whatever else changed with it.

use std::time::Duration;

use serde_json::json;

use crate::fake::{FakeApi, Fault};
use crate::util::*;

const NS: &str = "default";
const HASH: &str = "wavelet.dev/config-hash";

/// Regression (issue 31): adoption wrote the hash of the moment its PATCH went out, so a
/// workload whose adoption queued behind others took in a change made meanwhile, and its
/// Pods kept the old configuration for good. Both workloads here are first seen with
/// "blue"; the change to "green" lands while the first adoption PATCH is held.
#[test]
fn a_change_made_while_adopting_rolls_every_workload_once() {
    let fake = FakeApi::start();
    add_barrier(&fake, "configmaps", NS);
    fake.apply(configmap(NS, "app-config", &[("color", "blue")]));
    for name in ["web-a", "web-b"] {
        fake.apply(workload(
            "Deployment",
            NS,
            name,
            opted_in(),
            mounts_configmap("app-config"),
        ));
    }
    fake.inject(Fault::Slow {
        method: "PATCH".into(),
        resource: "deployments".into(),
        delay: Duration::from_secs(3),
    });
    let wavelet = Wavelet::start(&fake, &fast_one_worker());
    fake.merge_patch(
        "configmaps",
        NS,
        "app-config",
        json!({"data": {"color": "green"}}),
    );
    for name in ["web-a", "web-b"] {
        let expected = expected_hash(&fake, "deployments", NS, name);
        eventually(&fake, &wavelet, "each workload rolled to green", |f| {
            hashes(f, "deployments", NS, name, HASH).0.as_deref() == Some(expected.as_str())
        });
    }
    barrier_change(&fake, &wavelet, "configmaps", NS);
    for name in ["web-a", "web-b"] {
        assert_eq!(
            template_patches(&fake, "deployments", NS, name),
            1,
            "{name} rolled more than once:\n{}",
            wavelet.output()
        );
    }
}
