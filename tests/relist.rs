//! Relists: a periodic relist asks for metadata only and reads just what changed; a change
//! the watch hid (the fake drops its event) is found by the next relist, and at once after
//! a 410.

use serde_json::json;

use crate::fake::{FakeApi, Fault, Request};
use crate::util::*;

const CONFIGMAPS: &str = "/api/v1/configmaps";
const METADATA_LIST: &str = "as=PartialObjectMetadataList";

fn wait_adopted(fake: &FakeApi, wavelet: &Wavelet) {
    eventually(fake, wavelet, "adoption", |f| {
        hashes(
            f,
            "deployments",
            "default",
            "web",
            "wavelet.dev/config-hash",
        )
        .1
        .is_some()
    });
}

/// Changes app-config with its watch event dropped, then moves every watch past it with a
/// bookmark: only a relist can find the change now.
fn hide_a_change(fake: &FakeApi, wavelet: &Wavelet) {
    fake.inject(Fault::DropEvent {
        resource: "configmaps".into(),
        needle: "green".into(),
    });
    fake.merge_patch(
        "configmaps",
        "default",
        "app-config",
        json!({"data": {"color": "green"}}),
    );
    eventually(fake, wavelet, "the event dropped", |f| {
        f.pending_faults() == 0
    });
    fake.bookmark();
}

fn is_list(request: &Request, path: &str) -> bool {
    request.method == "GET" && request.path == path && request.query_param("watch").is_none()
}

fn asks_for_metadata(request: &Request) -> bool {
    request
        .header("accept")
        .is_some_and(|a| a.contains(METADATA_LIST))
}

#[test]
fn a_change_hidden_from_the_watch_is_found_by_the_next_relist_which_reads_only_it() {
    let fake = fake_with_web();
    let mut args = FAST.to_vec();
    args.extend(["--resync", "3s"]);
    let wavelet = Wavelet::start(&fake, &args);
    wait_adopted(&fake, &wavelet);
    let before = fake.requests().len();
    hide_a_change(&fake, &wavelet);
    assert_web_converged(&fake, &wavelet, 2, "rolled more than once per change");

    let since = fake.requests_since(before);
    assert!(
        since
            .iter()
            .any(|r| is_list(r, CONFIGMAPS) && asks_for_metadata(r)),
        "the relist asks for metadata only"
    );
    assert!(
        !since
            .iter()
            .any(|r| is_list(r, CONFIGMAPS) && !asks_for_metadata(r)),
        "no ConfigMap was listed whole after the first list"
    );
    assert!(
        since
            .iter()
            .any(|r| is_list(r, "/api/v1/namespaces/default/configmaps")
                && r.query_param("fieldSelector") == Some("metadata.name=app-config")
                && !asks_for_metadata(r)),
        "the changed ConfigMap is read alone, by a LIST of its name (RBAC: list only)"
    );
    assert!(
        !since.iter().any(|r| r.method == "GET"
            && r.path.starts_with("/apis/apps/v1/")
            && r.query_param("watch").is_none()
            && !asks_for_metadata(r)),
        "the unchanged Deployment is not read again"
    );
}

#[test]
fn a_change_hidden_from_the_watch_is_found_at_once_after_a_410() {
    let fake = fake_with_web();
    // The default --resync (hours): no periodic relist within the test.
    let wavelet = Wavelet::start(&fake, FAST);
    wait_adopted(&fake, &wavelet);
    hide_a_change(&fake, &wavelet);
    fake.inject(Fault::WatchErrorExpired {
        resource: "configmaps".into(),
    });
    fake.close_watches();
    assert_web_converged(&fake, &wavelet, 2, "rolled more than once per change");
    assert!(
        wavelet
            .output()
            .contains("relisting metadata to compare (expired)"),
        "the 410 relisted, comparing:\n{}",
        wavelet.output()
    );
}

#[test]
fn an_undecodable_watch_event_relists_at_once() {
    let fake = fake_with_web();
    let wavelet = Wavelet::start(&fake, FAST);
    wait_adopted(&fake, &wavelet);
    fake.inject(Fault::GarbageLine {
        resource: "configmaps".into(),
        line: b"{\"type\":\"MODIFIED\",\"object\":{\"metadata\":".to_vec(),
    });
    fake.merge_patch(
        "configmaps",
        "default",
        "app-config",
        json!({"data": {"color": "green"}}),
    );
    assert_web_converged(&fake, &wavelet, 2, "rolled more than once per change");
    eventually(&fake, &wavelet, "a relist after the garbage", |_| {
        wavelet
            .output()
            .contains("relisting metadata to compare (undecodable)")
    });
}
