//! Relists and streaming lists: a periodic relist asks for metadata only and reads just
//! what changed; a change or deletion the watch hid (the fake drops its event) is found by
//! the next relist, and at once after a 410 or an undecodable event; the first list is a
//! streaming list, page by page (said once) where the server refuses one.

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
        !since
            .iter()
            .any(|r| is_list(r, "/apis/apps/v1/deployments") && !asks_for_metadata(r)),
        "no Deployment was listed whole after the first list"
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

fn is_streaming_list(request: &Request, path: &str) -> bool {
    request.method == "GET"
        && request.path == path
        && request.query_param("watch") == Some("true")
        && request.query_param("sendInitialEvents") == Some("true")
        && request.query_param("resourceVersionMatch") == Some("NotOlderThan")
        && request.query_param("allowWatchBookmarks") == Some("true")
        && request.query_param("resourceVersion").is_none()
}

#[test]
fn the_initial_sync_is_a_streaming_list_where_the_server_offers_one() {
    let fake = fake_with_web();
    let wavelet = Wavelet::start(&fake, FAST);
    wait_adopted(&fake, &wavelet);
    let requests = fake.requests();
    for path in [CONFIGMAPS, "/apis/apps/v1/deployments"] {
        assert!(
            requests.iter().any(|r| is_streaming_list(r, path)),
            "{path}: streamed"
        );
        assert!(
            !requests.iter().any(|r| is_list(r, path)),
            "{path}: not listed page by page"
        );
    }
    // The stream goes on as the watch: a change arrives without another request.
    let watches = requests.iter().filter(|r| r.path == CONFIGMAPS).count();
    fake.merge_patch(
        "configmaps",
        "default",
        "app-config",
        json!({"data": {"color": "green"}}),
    );
    assert_web_converged(&fake, &wavelet, 2, "rolled more than once per change");
    assert_eq!(
        fake.requests()
            .iter()
            .filter(|r| r.path == CONFIGMAPS)
            .count(),
        watches,
        "no new ConfigMap request"
    );
}

#[test]
fn a_server_that_refuses_streaming_lists_is_listed_page_by_page_said_once_per_kind() {
    let fake = fake_with_web();
    fake.disable_watch_list();
    let wavelet = Wavelet::start(&fake, FAST);
    wait_adopted(&fake, &wavelet);
    // A relist of ConfigMaps (410) lists whole page by page again: no second try.
    fake.inject(Fault::WatchErrorExpired {
        resource: "configmaps".into(),
    });
    fake.close_watches();
    fake.merge_patch(
        "configmaps",
        "default",
        "app-config",
        json!({"data": {"color": "green"}}),
    );
    assert_web_converged(&fake, &wavelet, 2, "rolled more than once per change");
    let requests = fake.requests();
    for path in [CONFIGMAPS, "/apis/apps/v1/deployments"] {
        assert_eq!(
            requests
                .iter()
                .filter(|r| is_streaming_list(r, path))
                .count(),
            1,
            "{path}: streaming tried once"
        );
        assert!(
            requests.iter().any(|r| is_list(r, path)),
            "{path}: listed page by page"
        );
    }
    let output = wavelet.output();
    let said = |what: &str| {
        output
            .lines()
            .filter(|l| l.contains(what) && l.contains("a streaming list was refused"))
            .count()
    };
    assert_eq!(said("configmaps in all namespaces"), 1, "{output}");
    assert_eq!(said("deployments.apps in all namespaces"), 1, "{output}");
}

#[test]
fn a_deletion_hidden_from_the_watch_is_dropped_by_the_next_relist() {
    let fake = fake_with_web();
    fake.apply(configmap("default", "extra", &[("k", "v")]));
    let mut args = FAST.to_vec();
    args.extend(["--resync", "3s"]);
    let wavelet = Wavelet::start(&fake, &args);
    wait_adopted(&fake, &wavelet);
    let cached = |w: &Wavelet| metric(w, "wavelet_cache_objects", r#"kind="config""#);
    let before = cached(&wavelet);
    assert!(before >= 2.0, "app-config and extra cached: {before}");
    fake.inject(Fault::DropEvent {
        resource: "configmaps".into(),
        needle: r#""name":"extra""#.into(),
    });
    fake.delete("configmaps", "default", "extra");
    eventually(&fake, &wavelet, "the event dropped", |f| {
        f.pending_faults() == 0
    });
    fake.bookmark();
    eventually(&fake, &wavelet, "extra forgotten by a relist", |_| {
        cached(&wavelet) == before - 1.0
    });
    assert!(
        wavelet
            .output()
            .contains("configmap default/extra: gone after relist"),
        "{}",
        wavelet.output()
    );
}
