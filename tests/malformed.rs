//! Hostile input: oversized and malformed answers from the server (a 10 MiB watch line,
//! invalid UTF-8, deeply nested JSON, in a watch and in a list) are rejected with a log
//! line that says so; wavelet keeps running (`/healthz` OK), recovers when the server
//! behaves again, acts on nothing it rejected, and its resident memory stays bounded.

use std::time::Duration;

use serde_json::json;

use crate::fake::{FakeApi, Fault};
use crate::util::*;

const NS: &str = "default";
const HASH: &str = "wavelet.dev/config-hash";
/// How much VmRSS may grow from before the hostile input to after it: the 8 MiB line cap
/// plus the buffer's doubling, and allocator slack.
const RSS_GROWTH_LIMIT_KIB: u64 = 24 * 1024;

/// A watch line for ConfigMap `app-config` whose `data.color` is `value` (raw bytes, so
/// they need not be UTF-8).
fn event_line(value: &[u8]) -> Vec<u8> {
    let mut line = br#"{"type":"MODIFIED","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"app-config","namespace":"default","resourceVersion":"1001"},"data":{"color":""#.to_vec();
    line.extend_from_slice(value);
    line.extend_from_slice(b"\"}}}");
    line
}

fn ten_mib() -> Vec<u8> {
    vec![b'x'; 10 << 20]
}

/// `[[[[...]]]]`, `depth` deep.
fn nested(depth: usize) -> String {
    format!("{}{}", "[".repeat(depth), "]".repeat(depth))
}

/// A ConfigMapList at `rv` with these items (JSON, comma-separated).
fn list_body(rv: u64, items: &[u8]) -> Vec<u8> {
    let mut body = format!(
        r#"{{"kind":"ConfigMapList","apiVersion":"v1","metadata":{{"resourceVersion":"{rv}"}},"items":["#
    )
    .into_bytes();
    body.extend_from_slice(items);
    body.extend_from_slice(b"]}");
    body
}

/// ConfigMap `name` as a list item, with `data.k` = `value`.
fn item(name: &str, value: &[u8]) -> Vec<u8> {
    let mut item = format!(
        r#"{{"metadata":{{"name":"{name}","namespace":"default","resourceVersion":"1001"}},"data":{{"k":""#
    )
    .into_bytes();
    item.extend_from_slice(value);
    item.extend_from_slice(b"\"}}");
    item
}

struct Run {
    fake: FakeApi,
    wavelet: Wavelet,
    baseline_kib: u64,
}

fn start() -> Run {
    let fake = fake_with_web();
    let wavelet = Wavelet::start(&fake, FAST);
    eventually(&fake, &wavelet, "adoption", |f| {
        hashes(f, "deployments", NS, "web", HASH).1.is_some()
    });
    let baseline_kib = wavelet.rss_kib();
    Run {
        fake,
        wavelet,
        baseline_kib,
    }
}

impl Run {
    /// A real change after the hostile input: wavelet must roll once, to the right hash,
    /// and be healthy with bounded memory.
    fn assert_recovers(&self, rejected_log: Option<&str>) {
        let (fake, wavelet) = (&self.fake, &self.wavelet);
        fake.merge_patch(
            "configmaps",
            NS,
            "app-config",
            json!({"data": {"color": "green"}}),
        );
        assert_web_converged(
            fake,
            wavelet,
            2,
            "rolled for the real change only, never for the rejected input",
        );
        if let Some(rejected_log) = rejected_log {
            let output = wavelet.output();
            assert!(
                output
                    .lines()
                    .any(|l| l.contains(" WARN ") && l.contains(rejected_log)),
                "a warning says what was rejected ({rejected_log:?}):\n{output}"
            );
        }
        assert_eq!(wavelet.http_get("/healthz").0, 200, "still healthy");
        let now_kib = wavelet.rss_kib();
        assert!(
            now_kib <= self.baseline_kib + RSS_GROWTH_LIMIT_KIB,
            "VmRSS grew from {} KiB to {now_kib} KiB",
            self.baseline_kib
        );
    }

    /// The next watch of ConfigMaps starts with `line`.
    fn watch_sends(&self, line: Vec<u8>) {
        self.fake.inject(Fault::GarbageLine {
            resource: "configmaps".into(),
            line,
        });
        self.fake.close_watches();
    }

    /// The next list of ConfigMaps answers `items` (and the current resourceVersion); a
    /// relist is forced.
    fn list_answers(&self, items: &[u8]) {
        self.fake.inject(Fault::Body {
            resource: "configmaps".into(),
            body: list_body(self.fake.resource_version(), items),
        });
        self.fake.inject(Fault::WatchErrorExpired {
            resource: "configmaps".into(),
        });
        self.fake.close_watches();
        assert!(
            self.fake
                .wait_until(Duration::from_secs(10), |f| f.pending_faults() == 0),
            "the hostile answer was sent"
        );
    }
}

#[test]
fn a_10_mib_watch_line_is_rejected_and_the_watch_recovers() {
    let run = start();
    run.watch_sends(event_line(&ten_mib()));
    run.assert_recovers(Some(
        "watch event rejected (decode: watch /api/v1/configmaps: an event is longer than 8 MiB",
    ));
}

#[test]
fn invalid_utf8_in_a_watch_line_is_rejected_and_the_watch_recovers() {
    let run = start();
    run.watch_sends(event_line(b"\xff\xfe"));
    run.assert_recovers(Some(
        "undecodable watch line rejected (invalid unicode code point",
    ));
}

#[test]
fn deeply_nested_json_in_a_watch_line_is_rejected_and_the_watch_recovers() {
    let run = start();
    let line = format!(r#"{{"type":"MODIFIED","object":{}}}"#, nested(100_000));
    run.watch_sends(line.into_bytes());
    run.assert_recovers(Some(
        "undecodable watch line rejected (invalid type: sequence",
    ));
}

#[test]
fn invalid_utf8_in_a_list_is_rejected_and_the_list_retried() {
    let run = start();
    // In the name, which every list reads (a relist that compares reads only metadata).
    let mut bad = br#"{"metadata":{"name":"app-"#.to_vec();
    bad.extend_from_slice(b"\xff\xfe");
    bad.extend_from_slice(br#"","namespace":"default","resourceVersion":"1001"}}"#);
    run.list_answers(&bad);
    run.assert_recovers(Some("list failed"));
}

#[test]
fn deeply_nested_json_in_a_list_is_rejected_and_the_list_retried() {
    let run = start();
    run.list_answers(nested(100_000).as_bytes());
    run.assert_recovers(Some("list failed"));
}

#[test]
fn a_10_mib_object_in_a_list_is_rejected_and_the_list_retried() {
    let run = start();
    run.list_answers(&item("huge", &ten_mib()));
    run.assert_recovers(Some("an item is larger than 8 MiB"));
}

/// An unknown field is skipped without recursion (serde_json's `IgnoredAny` keeps its own
/// stack), so a deeply nested one is harmless: the item is accepted, nothing overflows.
#[test]
fn a_deeply_nested_unknown_field_in_a_list_is_skipped_without_harm() {
    let run = start();
    let mut items = br#"{"metadata":{"name":"app-config","namespace":"default","resourceVersion":"1001"},"data":{"color":"blue"}}"#.to_vec();
    let nested_field = format!(
        r#",{{"metadata":{{"name":"deep","namespace":"default"}},"unknown":{}}}"#,
        nested(100_000)
    );
    items.extend_from_slice(nested_field.as_bytes());
    run.list_answers(&items);
    run.assert_recovers(None);
}
