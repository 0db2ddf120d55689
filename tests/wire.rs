//! The fake API server checked against the recordings of a real kube-apiserver v1.36 in
//! `../shared/k8s-wire`: each test sets up the state a recording implies, replays its
//! request over a real socket, and compares status, headers, framing, Status fields and
//! messages, event type sequences and body shapes.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::fake::base64::decode_url_raw;
use crate::fake::client::{types, RawClient, RawResponse, StreamEnd, WatchStream};
use crate::fake::FakeApi;

const LONG: Duration = Duration::from_secs(5);

fn recording(file: &str) -> Value {
    let path = format!("{}/../shared/k8s-wire/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {path}: {e}"));
    serde_json::from_str(&text).expect("recording is JSON")
}

fn body_text(body: &Value) -> Option<String> {
    match body {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

/// Sends the recorded request (optionally to another path or with another body).
fn replay_with(
    client: &mut RawClient,
    rec: &Value,
    path: Option<&str>,
    body: Option<&Value>,
) -> RawResponse {
    let request = &rec["request"];
    let mut headers = Vec::new();
    for name in ["Accept", "Content-Type"] {
        if let Some(value) = request["headers"][name].as_str() {
            headers.push((name, value));
        }
    }
    let body = body
        .map(|b| b.to_string())
        .or_else(|| body_text(&request["body"]));
    let path = path.unwrap_or_else(|| request["path"].as_str().expect("path"));
    client.request(
        request["method"].as_str().expect("method"),
        path,
        &headers,
        body.as_deref(),
    )
}

fn replay(client: &mut RawClient, rec: &Value) -> RawResponse {
    replay_with(client, rec, None, None)
}

fn keys(value: &Value) -> BTreeSet<String> {
    value
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default()
}

/// Status code, headers and framing as recorded: application/json, the cache header,
/// Content-Length below 2048 bytes and chunked above, Retry-After only when recorded.
fn assert_wire(ours: &RawResponse, rec: &Value) {
    let recorded = &rec["response"];
    let title = rec["title"].as_str().unwrap_or("");
    assert_eq!(
        ours.status,
        recorded["status"],
        "{title}: status; body {}",
        ours.text()
    );
    assert_eq!(
        ours.header("content-type"),
        recorded["headers"]["Content-Type"].as_str(),
        "{title}: Content-Type"
    );
    assert_eq!(
        ours.header("cache-control"),
        Some("no-cache, private"),
        "{title}: Cache-Control"
    );
    assert_eq!(
        ours.chunks.is_some(),
        ours.body.len() >= 2048,
        "{title}: framing by size"
    );
    if let Some(length) = ours.header("content-length") {
        assert_eq!(length, ours.body.len().to_string());
    }
    assert_eq!(
        ours.header("retry-after"),
        recorded["headers"]["Retry-After"].as_str(),
        "{title}: Retry-After"
    );
}

/// A Status body like the recorded one: same keys, reason, code, details; the same message
/// when `message` is None, else the given one.
fn assert_status(ours: &RawResponse, rec: &Value, message: Option<&str>) {
    assert_wire(ours, rec);
    let (ours, recorded) = (ours.json(), &rec["response"]["body"]);
    assert_eq!(keys(&ours), keys(recorded), "top-level keys of {ours}");
    for key in ["kind", "apiVersion", "status", "reason", "code"] {
        assert_eq!(ours[key], recorded[key], "{key} of {ours}");
    }
    assert_eq!(
        keys(&ours["details"]),
        keys(&recorded["details"]),
        "details keys of {ours}"
    );
    for key in ["name", "group", "kind", "retryAfterSeconds"] {
        assert_eq!(
            ours["details"][key], recorded["details"][key],
            "details.{key}"
        );
    }
    let causes = |v: &Value| {
        v["details"]["causes"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    assert_eq!(causes(&ours), causes(recorded), "details.causes");
    match message {
        None => assert_eq!(ours["message"], recorded["message"]),
        Some(m) => assert_eq!(ours["message"], m),
    }
}

/// An object body like the recorded one: same kind, apiVersion and top-level keys.
fn assert_object(ours: &RawResponse, rec: &Value) {
    assert_wire(ours, rec);
    let (ours, recorded) = (ours.json(), &rec["response"]["body"]);
    assert_eq!(keys(&ours), keys(recorded), "top-level keys of {ours}");
    assert_eq!(ours["kind"], recorded["kind"]);
    assert_eq!(ours["apiVersion"], recorded["apiVersion"]);
}

fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

fn rv(object: &Value) -> u64 {
    object["metadata"]["resourceVersion"]
        .as_str()
        .expect("resourceVersion")
        .parse()
        .expect("numeric")
}

fn decoded_token(token: &Value) -> Value {
    serde_json::from_slice(&decode_url_raw(token.as_str().expect("token")).expect("base64"))
        .expect("token JSON")
}

/// The namespace and ConfigMaps of the recording session (002–007 plus app-config, extra-a, extra-b).
fn wire_rec() -> (FakeApi, RawClient) {
    let fake = FakeApi::start();
    let mut client = RawClient::connect(&fake.url());
    for file in [
        "002-create-namespace.json",
        "003-create-configmap-binarydata.json",
        "004-create-configmap-annotated.json",
    ] {
        assert_eq!(replay(&mut client, &recording(file)).status, 201, "{file}");
    }
    for (name, data) in [
        (
            "app-config",
            json!({"LOG_LEVEL": "info", "app.properties": "color=blue\nsize=3\n"}),
        ),
        ("extra-a", json!({"k": "a0"})),
        ("extra-b", json!({"k": "b0"})),
    ] {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "wire-rec", "labels": {"tier": "cfg"}}, "data": data});
        assert_eq!(
            client
                .json(
                    "POST",
                    "/api/v1/namespaces/wire-rec/configmaps",
                    "application/json",
                    &cm
                )
                .status,
            201
        );
    }
    (fake, client)
}

fn watch(fake: &FakeApi, path: &str) -> WatchStream {
    let stream = RawClient::connect(&fake.url()).watch(path);
    assert_eq!(stream.status, 200);
    assert_eq!(stream.header("content-type"), Some("application/json"));
    assert_eq!(stream.header("cache-control"), Some("no-cache, private"));
    assert_eq!(stream.header("transfer-encoding"), Some("chunked"));
    stream
}

#[test]
fn creates_fill_in_server_fields_like_002_to_008() {
    let fake = FakeApi::start();
    let mut client = RawClient::connect(&fake.url());
    for file in [
        "002-create-namespace.json",
        "003-create-configmap-binarydata.json",
        "004-create-configmap-annotated.json",
        "005-create-secret-opaque.json",
        "006-create-secret-stringdata.json",
        "007-create-secret-tls.json",
    ] {
        let rec = recording(file);
        let ours = replay(&mut client, &rec);
        assert_object(&ours, &rec);
        let (ours, recorded) = (ours.json(), &rec["response"]["body"]);
        for key in ["data", "binaryData", "type", "spec", "status"] {
            assert_eq!(ours[key], recorded[key], "{file}: {key}");
        }
        assert_eq!(
            ours["metadata"]["labels"], recorded["metadata"]["labels"],
            "{file}"
        );
        assert_eq!(
            ours["metadata"]["annotations"], recorded["metadata"]["annotations"],
            "{file}"
        );
        for key in ["uid", "resourceVersion", "creationTimestamp"] {
            assert!(ours["metadata"][key].is_string(), "{file}: metadata.{key}");
        }
    }
    let rec = recording("008-create-secret-tls-missing-key.json");
    assert_status(&replay(&mut client, &rec), &rec, None);
}

#[test]
fn get_and_paged_lists_match_009_to_012() {
    let (_fake, mut client) = wire_rec();
    let rec = recording("009-get-configmap.json");
    let ours = replay(&mut client, &rec);
    assert_object(&ours, &rec);
    assert_eq!(ours.json()["data"], rec["response"]["body"]["data"]);

    let rec = recording("010-list-configmaps-page1.json");
    let page1 = replay(&mut client, &rec);
    assert_object(&page1, &rec);
    let page1 = page1.json();
    assert_eq!(names(&page1), names(&rec["response"]["body"]));
    assert!(
        page1["items"][0].get("kind").is_none() && page1["items"][0].get("apiVersion").is_none()
    );
    assert_eq!(
        keys(&page1["metadata"]),
        keys(&rec["response"]["body"]["metadata"])
    );
    assert_eq!(page1["metadata"]["remainingItemCount"], 3);
    let token = decoded_token(&page1["metadata"]["continue"]);
    let mut recorded_token = decoded_token(&rec["response"]["body"]["metadata"]["continue"]);
    recorded_token["rv"] = token["rv"].clone();
    assert_eq!(token, recorded_token, "same token format and start key");
    assert_eq!(
        token["rv"].to_string(),
        page1["metadata"]["resourceVersion"].as_str().unwrap()
    );

    // A write between pages does not change the snapshot.
    client.json(
        "POST",
        "/api/v1/namespaces/wire-rec/configmaps",
        "application/json",
        &json!({"metadata": {"name": "aaa-late"}}),
    );
    let token = page1["metadata"]["continue"].as_str().unwrap();
    let rec = recording("011-list-configmaps-page2.json");
    let page2 = replay_with(
        &mut client,
        &rec,
        Some(&format!(
            "/api/v1/namespaces/wire-rec/configmaps?limit=2&continue={token}"
        )),
        None,
    );
    assert_object(&page2, &rec);
    let page2 = page2.json();
    assert_eq!(names(&page2), names(&rec["response"]["body"]));
    assert_eq!(
        page2["metadata"]["resourceVersion"],
        page1["metadata"]["resourceVersion"]
    );
    assert_eq!(page2["metadata"]["remainingItemCount"], 1);

    let token = page2["metadata"]["continue"].as_str().unwrap();
    let rec = recording("012-list-configmaps-page3-last.json");
    let page3 = replay_with(
        &mut client,
        &rec,
        Some(&format!(
            "/api/v1/namespaces/wire-rec/configmaps?limit=2&continue={token}"
        )),
        None,
    );
    assert_object(&page3, &rec);
    let page3 = page3.json();
    assert_eq!(names(&page3), names(&rec["response"]["body"]));
    assert_eq!(
        keys(&page3["metadata"]),
        keys(&rec["response"]["body"]["metadata"])
    );
    assert_eq!(
        page3["metadata"]["resourceVersion"],
        page1["metadata"]["resourceVersion"]
    );
}

#[test]
fn broken_and_expired_continue_tokens_match_013_to_015() {
    let (fake, mut client) = wire_rec();
    for file in [
        "013-list-configmaps-mangled-continue.json",
        "014-list-configmaps-garbage-continue.json",
    ] {
        let rec = recording(file);
        assert_status(&replay(&mut client, &rec), &rec, None);
    }
    // The recorded token pins RV 2, which this server never had: expired, with the same
    // fresh token (rv -1, start without the leading slash).
    let rec = recording("015-list-configmaps-expired-continue.json");
    let ours = replay(&mut client, &rec);
    assert_status(&ours, &rec, None);
    assert_eq!(ours.json()["metadata"], rec["response"]["body"]["metadata"]);

    // compact() expires tokens this server issued.
    let page1 = client
        .get("/api/v1/namespaces/wire-rec/configmaps?limit=2")
        .json();
    fake.compact();
    let token = page1["metadata"]["continue"].as_str().unwrap();
    let expired = client.get(&format!(
        "/api/v1/namespaces/wire-rec/configmaps?limit=2&continue={token}"
    ));
    assert_eq!(expired.status, 410);
    let fresh = expired.json()["metadata"]["continue"].clone();
    assert_eq!(decoded_token(&fresh)["rv"], -1);
    let rest = client.get(&format!(
        "/api/v1/namespaces/wire-rec/configmaps?limit=10&continue={}",
        fresh.as_str().unwrap()
    ));
    assert_eq!(
        names(&rest.json()),
        ["extra-a", "extra-b", "pod-delete-match"]
    );
}

#[test]
fn lists_across_namespaces_and_without_limit_match_016_and_100() {
    let (fake, mut client) = wire_rec();
    fake.apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm-00000", "namespace": "bench"}}));
    let rec = recording("016-list-configmaps-all-namespaces.json");
    let ours = replay(&mut client, &rec).json();
    assert_eq!(names(&ours), ["cm-00000"]);
    assert_eq!(ours["items"][0]["metadata"]["namespace"], "bench");
    let token = decoded_token(&ours["metadata"]["continue"]);
    assert_eq!(token["start"], "/bench/cm-00000\u{0}");
    assert_eq!(ours["metadata"]["remainingItemCount"], 5);

    let rec = recording("100-list-negative-limit.json");
    let ours = replay(&mut client, &rec);
    assert_eq!(ours.status, 200);
    let ours = ours.json();
    assert_eq!(
        keys(&ours["metadata"]),
        keys(&rec["response"]["body"]["metadata"])
    );
    assert_eq!(names(&ours).len(), 5);
}

/// The changes of 017/018: PUT extra-a, label it away, delete extra-b, label it back.
fn recorded_changes(client: &mut RawClient) {
    let put = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "extra-a", "namespace": "wire-rec", "labels": {"tier": "cfg"}}, "data": {"k": "a1"}});
    assert_eq!(
        client
            .json(
                "PUT",
                "/api/v1/namespaces/wire-rec/configmaps/extra-a",
                "application/json",
                &put
            )
            .status,
        200
    );
    let away = json!({"metadata": {"labels": {"tier": "moved"}}});
    assert_eq!(
        client
            .json(
                "PATCH",
                "/api/v1/namespaces/wire-rec/configmaps/extra-a",
                "application/merge-patch+json",
                &away
            )
            .status,
        200
    );
    assert_eq!(
        client
            .request(
                "DELETE",
                "/api/v1/namespaces/wire-rec/configmaps/extra-b",
                &[],
                None
            )
            .status,
        200
    );
    let back = json!({"metadata": {"labels": {"tier": "cfg"}}});
    assert_eq!(
        client
            .json(
                "PATCH",
                "/api/v1/namespaces/wire-rec/configmaps/extra-a",
                "application/merge-patch+json",
                &back
            )
            .status,
        200
    );
}

#[test]
fn watch_from_the_list_rv_matches_017() {
    let (fake, mut client) = wire_rec();
    let list_rv = client.get("/api/v1/namespaces/wire-rec/configmaps").json()["metadata"]
        ["resourceVersion"]
        .clone();
    let mut stream = watch(&fake, &format!("/api/v1/namespaces/wire-rec/configmaps?watch=true&allowWatchBookmarks=true&resourceVersion={}&timeoutSeconds=75", list_rv.as_str().unwrap()));
    recorded_changes(&mut client);
    fake.apply(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "unrelated", "namespace": "wire-rec"}}));
    fake.bookmark();
    let mut events = Vec::new();
    while events.len() < 5 {
        events.push(stream.next_event(LONG).expect("event"));
    }
    fake.close_watches();
    assert_eq!(stream.next_event(LONG).unwrap_err(), StreamEnd::Clean);
    let rec = recording("017-watch-configmaps-bookmarks.json");
    let recorded: Vec<Value> = rec["response"]["events"].as_array().unwrap()[..5].to_vec();
    assert_eq!(types(&events), types(&recorded));
    assert_eq!(stream.chunks.len(), 5, "each live event in its own chunk");
    for (ours, recorded) in events.iter().zip(&recorded) {
        assert_eq!(keys(&ours["object"]), keys(&recorded["object"]));
        assert_eq!(
            ours["object"]["metadata"]["name"],
            recorded["object"]["metadata"]["name"]
        );
        assert_eq!(
            ours["object"]["metadata"]["labels"],
            recorded["object"]["metadata"]["labels"]
        );
        assert_eq!(ours["object"]["data"], recorded["object"]["data"]);
    }
    // DELETED carries the deletion RV; the bookmark only kind, apiVersion and the store RV.
    assert!(rv(&events[2]["object"]) > rv(&events[1]["object"]));
    assert_eq!(
        keys(&events[4]["object"]["metadata"]),
        keys(&recorded[4]["object"]["metadata"])
    );
    assert!(
        rv(&events[4]["object"]) > rv(&events[3]["object"]),
        "the bookmark has the store-wide RV"
    );
}

#[test]
fn label_selector_transitions_match_018() {
    let (fake, mut client) = wire_rec();
    let list_rv = client.get("/api/v1/namespaces/wire-rec/configmaps").json()["metadata"]
        ["resourceVersion"]
        .clone();
    let mut stream = watch(&fake, &format!("/api/v1/namespaces/wire-rec/configmaps?watch=true&allowWatchBookmarks=true&resourceVersion={}&timeoutSeconds=20&labelSelector=tier%3Dcfg", list_rv.as_str().unwrap()));
    recorded_changes(&mut client);
    fake.bookmark();
    let mut events = Vec::new();
    while events.len() < 5 {
        events.push(stream.next_event(LONG).expect("event"));
    }
    let rec = recording("018-watch-configmaps-labelselector.json");
    let recorded = rec["response"]["events"].as_array().unwrap();
    assert_eq!(types(&events), types(recorded));
    for (ours, recorded) in events.iter().zip(recorded).take(4) {
        assert_eq!(
            ours["object"]["metadata"]["name"],
            recorded["object"]["metadata"]["name"]
        );
        assert_eq!(
            ours["object"]["metadata"]["labels"], recorded["object"]["metadata"]["labels"],
            "old labels on DELETED"
        );
    }
    assert!(
        rv(&events[1]["object"]) > rv(&events[0]["object"]),
        "the selector DELETED has the new RV"
    );
}

#[test]
fn writes_match_019_to_021() {
    let (_fake, mut client) = wire_rec();
    let current = client
        .get("/api/v1/namespaces/wire-rec/configmaps/extra-a")
        .json();
    let rec = recording("019-update-configmap-put.json");
    let mut body = rec["request"]["body"].clone();
    body["metadata"]["uid"] = current["metadata"]["uid"].clone();
    body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"].clone();
    let ours = replay_with(&mut client, &rec, None, Some(&body));
    assert_object(&ours, &rec);
    assert!(rv(&ours.json()) > rv(&current));
    assert_eq!(ours.json()["data"], rec["response"]["body"]["data"]);

    let rec = recording("020-patch-configmap-labels-merge.json");
    let ours = replay(&mut client, &rec);
    assert_object(&ours, &rec);
    assert_eq!(
        ours.json()["metadata"]["labels"],
        rec["response"]["body"]["metadata"]["labels"]
    );

    let rec = recording("021-delete-configmap.json");
    let uid = client
        .get("/api/v1/namespaces/wire-rec/configmaps/extra-b")
        .json()["metadata"]["uid"]
        .clone();
    let ours = replay(&mut client, &rec);
    assert_wire(&ours, &rec);
    let mut expected = rec["response"]["body"].clone();
    expected["details"]["uid"] = uid;
    assert_eq!(ours.json(), expected);
}

#[test]
fn replay_from_an_older_rv_is_one_packed_burst_like_022() {
    let fake = FakeApi::start();
    let mut client = RawClient::connect(&fake.url());
    let ns = replay(&mut client, &recording("002-create-namespace.json")).json();
    for name in [
        "app-config",
        "bin-config",
        "pod-delete-match",
        "extra-a",
        "extra-b",
    ] {
        let filler = "x".repeat(300);
        let cm =
            json!({"metadata": {"name": name, "labels": {"tier": "cfg"}}, "data": {"k": filler}});
        assert_eq!(
            client
                .json(
                    "POST",
                    "/api/v1/namespaces/wire-rec/configmaps",
                    "application/json",
                    &cm
                )
                .status,
            201
        );
    }
    recorded_changes(&mut client);
    let rec = recording("022-watch-replay-from-older-rv.json");
    let mut stream = watch(
        &fake,
        &format!(
            "/api/v1/namespaces/wire-rec/configmaps?watch=true&resourceVersion={}&timeoutSeconds=3",
            rv(&ns)
        ),
    );
    let mut events = Vec::new();
    while events.len() < 9 {
        events.push(stream.next_event(LONG).expect("event"));
    }
    assert_eq!(
        types(&events),
        types(rec["response"]["events"].as_array().unwrap())
    );
    let rvs: Vec<u64> = events.iter().map(|e| rv(&e["object"])).collect();
    assert!(
        rvs.windows(2).all(|w| w[0] < w[1]),
        "replayed in order with their own RVs: {rvs:?}"
    );
    let (last, full) = stream.chunks.split_last().unwrap();
    assert!(
        full.len() >= 2 && full.iter().all(|c| *c == 2048) && *last <= 2048,
        "{:?}",
        stream.chunks
    );
    fake.close_watches();
    assert_eq!(stream.next_line(LONG).unwrap_err(), StreamEnd::Clean);
}

#[test]
fn too_old_rvs_get_one_error_event_like_023_to_025() {
    let (fake, mut client) = wire_rec();
    fake.apply(json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "wire-rec"}, "spec": {"template": {}}}));
    fake.compact();
    let floor = client.get("/api/v1/namespaces/wire-rec/configmaps").json()["metadata"]
        ["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    for file in [
        "023-watch-too-old-rv-configmaps.json",
        "024-watch-too-old-rv-cached.json",
        "025-watch-too-old-rv-etcd.json",
    ] {
        let rec = recording(file);
        let mut stream = watch(&fake, rec["request"]["path"].as_str().unwrap());
        let event = stream.next_event(LONG).expect("the ERROR event");
        assert_eq!(
            stream.next_line(LONG).unwrap_err(),
            StreamEnd::Clean,
            "{file}: then the end"
        );
        let mut expected = rec["response"]["events"][0].clone();
        let message = expected["object"]["message"].as_str().unwrap().to_string();
        if message.starts_with("too old") {
            expected["object"]["message"] = format!("too old resource version: 1 ({floor})").into();
        }
        assert_eq!(event, expected, "{file}");
        assert_eq!(stream.chunks.len(), 1);
    }
}

#[test]
fn a_future_rv_waits_quietly_like_026() {
    let (fake, _client) = wire_rec();
    let started = Instant::now();
    let mut stream = watch(&fake, "/api/v1/namespaces/wire-rec/configmaps?watch=true&resourceVersion=1018649&timeoutSeconds=1");
    assert_eq!(stream.next_line(LONG).unwrap_err(), StreamEnd::Clean);
    assert!(started.elapsed() >= Duration::from_millis(900));
    assert!(stream.chunks.is_empty());
}

#[test]
fn list_rv_errors_match_027_029_030() {
    let (fake, mut client) = wire_rec();
    let current = client.get("/api/v1/namespaces/wire-rec/configmaps").json()["metadata"]
        ["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let rec = recording("027-list-future-rv.json");
    assert_status(
        &replay(&mut client, &rec),
        &rec,
        Some(&format!(
            "Timeout: Too large resource version: 1018649, current: {current}"
        )),
    );
    fake.compact();
    for file in [
        "029-list-too-old-exact-rv.json",
        "030-watch-invalid-resourceversion.json",
    ] {
        let rec = recording(file);
        assert_status(&replay(&mut client, &rec), &rec, None);
    }
}

/// A GET of one object at `resourceVersion=N` is "not older than N" (§1.3): the object
/// as it is when the server has reached N, and at an N it has not reached, 027's 504.
#[test]
fn a_get_at_a_resource_version_is_not_older_than_it_and_a_future_one_is_027() {
    let (_fake, mut client) = wire_rec();
    let path = "/api/v1/namespaces/wire-rec/configmaps/app";
    let created = client.json(
        "POST",
        "/api/v1/namespaces/wire-rec/configmaps",
        "application/json",
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "app"}, "data": {"k": "v"}}),
    );
    assert_eq!(created.status, 201);
    let current = client.get(path).json();
    let rv = current["metadata"]["resourceVersion"].as_str().unwrap();
    for asked in ["0", rv] {
        let answer = client.get(&format!("{path}?resourceVersion={asked}"));
        assert_eq!(answer.status, 200, "resourceVersion={asked}");
        assert_eq!(answer.json(), current, "resourceVersion={asked}");
    }
    let future: u64 = rv.parse::<u64>().unwrap() + 1_000_000;
    let started = Instant::now();
    let answer = client.get(&format!("{path}?resourceVersion={future}"));
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "it waited first"
    );
    let rec = recording("027-list-future-rv.json");
    let server_rv = client.get("/api/v1/namespaces/wire-rec/configmaps").json()["metadata"]
        ["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    assert_status(
        &answer,
        &rec,
        Some(&format!(
            "Timeout: Too large resource version: {future}, current: {server_rv}"
        )),
    );
}

/// The recorded path with `timeoutSeconds=30`, so a slow machine does not end it early.
fn longer_timeout(path: &str) -> String {
    let (base, query) = path.split_once('?').unwrap_or((path, ""));
    let query: Vec<String> = query
        .split('&')
        .map(|p| {
            if p.starts_with("timeoutSeconds=") {
                "timeoutSeconds=30".into()
            } else {
                p.to_string()
            }
        })
        .collect();
    format!("{base}?{}", query.join("&"))
}

fn initial_events(fake: &FakeApi, rec: &Value) -> Vec<Value> {
    let path = longer_timeout(rec["request"]["path"].as_str().unwrap());
    let accept = rec["request"]["headers"]["Accept"]
        .as_str()
        .unwrap_or("application/json");
    let mut stream = RawClient::connect(&fake.url()).watch_with(&path, &[("Accept", accept)]);
    assert_eq!(stream.status, 200);
    let recorded: Vec<Value> = rec["response"]["events"]
        .as_array()
        .unwrap()
        .iter()
        .take_while(|e| e["type"] == "ADDED")
        .cloned()
        .collect();
    let mut events = Vec::new();
    while events.len() <= recorded.len() {
        events.push(stream.next_event(LONG).expect("event"));
    }
    let ours: Vec<&Value> = events
        .iter()
        .map(|e| &e["object"]["metadata"]["name"])
        .collect();
    let theirs: Vec<&Value> = recorded
        .iter()
        .map(|e| &e["object"]["metadata"]["name"])
        .collect();
    assert_eq!(
        ours[..theirs.len()],
        theirs[..],
        "synthetic ADDEDs sorted by name"
    );
    for (ours, theirs) in events.iter().zip(&recorded) {
        assert_eq!(keys(&ours["object"]), keys(&theirs["object"]));
        assert_eq!(ours["object"]["kind"], theirs["object"]["kind"]);
    }
    let end = &events[recorded.len()];
    let recorded_end = &rec["response"]["events"][recorded.len()];
    assert_eq!(end["type"], "BOOKMARK");
    assert_eq!(
        end["object"]["metadata"]["annotations"],
        recorded_end["object"]["metadata"]["annotations"]
    );
    assert_eq!(keys(&end["object"]), keys(&recorded_end["object"]));
    assert_eq!(end["object"]["kind"], recorded_end["object"]["kind"]);
    assert!(
        stream.chunks.len() < events.len(),
        "the initial burst is packed, not one chunk per event"
    );
    events
}

#[test]
fn initial_events_end_with_the_annotated_bookmark_like_028_031_037() {
    let (fake, mut client) = wire_rec();
    recorded_changes(&mut client);
    for file in [
        "028-watch-rv-unset.json",
        "031-watchlist-sendinitialevents.json",
        "037-watch-metadata-only.json",
    ] {
        initial_events(&fake, &recording(file));
    }
}

#[test]
fn a_proxied_watch_from_rv_0_matches_121() {
    let fake = FakeApi::start();
    fake.apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "via-proxy", "namespace": "wire-rec"}, "data": {"a": "b"}}));
    let rec = recording("121-proxy-watch.json");
    let events = initial_events(&fake, &rec);
    assert_eq!(
        types(&events),
        types(rec["response"]["events"].as_array().unwrap())
    );
    let bookmark_rv = rv(&events[1]["object"]);
    assert_eq!(
        bookmark_rv,
        rv(&events[0]["object"]),
        "the bookmark carries the current RV"
    );
}

#[test]
fn watch_list_validation_matches_032_033() {
    let (_fake, mut client) = wire_rec();
    for file in [
        "032-watchlist-missing-rvmatch.json",
        "033-list-with-sendinitialevents.json",
    ] {
        let rec = recording(file);
        assert_status(&replay(&mut client, &rec), &rec, None);
    }
}

#[test]
fn metadata_only_reads_match_034_to_036_and_038() {
    let (fake, mut client) = wire_rec();
    let rec = recording("034-list-metadata-only.json");
    let ours = replay(&mut client, &rec);
    assert_object(&ours, &rec);
    let ours = ours.json();
    assert_eq!(
        keys(&ours["items"][0]),
        keys(&rec["response"]["body"]["items"][0])
    );
    assert_eq!(ours["items"][0]["kind"], "PartialObjectMetadata");
    let rec = recording("035-list-metadata-accept-singular.json");
    assert_status(&replay(&mut client, &rec), &rec, None);
    let rec = recording("036-get-metadata-only.json");
    let ours = replay(&mut client, &rec);
    assert_object(&ours, &rec);
    let rec = recording("038-watch-metadata-list-accept.json");
    let accept = rec["request"]["headers"]["Accept"].as_str().unwrap();
    let mut stream = RawClient::connect(&fake.url()).watch_with(
        rec["request"]["path"].as_str().unwrap(),
        &[("Accept", accept)],
    );
    assert_eq!(stream.status, 200);
    assert_eq!(
        stream.next_line(LONG).unwrap_err(),
        StreamEnd::Clean,
        "ends silently with no events"
    );
}

fn deployment_with_pending_pods(fake: &FakeApi, client: &mut RawClient) -> Value {
    fake.set_ready_delay(Duration::from_secs(3600));
    replay(client, &recording("002-create-namespace.json"));
    let rec = recording("039-create-deployment.json");
    let ours = replay(client, &rec);
    assert_object(&ours, &rec);
    let ours = ours.json();
    assert_eq!(ours["metadata"]["generation"], 1);
    assert_eq!(ours["status"], json!({}));
    // The server's defaults and its record of who set what, as recorded (but the time).
    assert_eq!(ours["spec"], rec["response"]["body"]["spec"]);
    // (The recorder's manager was its User-Agent, as ours is.)
    let without_time = |object: &Value| {
        let mut fields = object["metadata"]["managedFields"].clone();
        for entry in fields.as_array_mut().expect("managedFields") {
            entry.as_object_mut().unwrap().remove("time");
            entry.as_object_mut().unwrap().remove("manager");
        }
        fields
    };
    assert_eq!(without_time(&ours), without_time(&rec["response"]["body"]));
    ours
}

#[test]
fn a_deployment_gets_a_replica_set_and_pods_like_039_to_041() {
    let fake = FakeApi::start();
    let mut client = RawClient::connect(&fake.url());
    let deployment = deployment_with_pending_pods(&fake, &mut client);
    let rec = recording("040-list-replicasets-initial.json");
    let ours = replay(&mut client, &rec).json();
    let (rs, recorded) = (&ours["items"][0], &rec["response"]["body"]["items"][0]);
    assert_eq!(keys(rs), keys(recorded));
    assert_eq!(
        keys(&rs["metadata"]["annotations"]),
        keys(&recorded["metadata"]["annotations"])
    );
    assert_eq!(
        rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
        "1"
    );
    let hash = rs["metadata"]["labels"]["pod-template-hash"]
        .as_str()
        .unwrap();
    assert_eq!(hash.len(), 10);
    assert_eq!(rs["metadata"]["name"], format!("web-{hash}"));
    let mut owner = recorded["metadata"]["ownerReferences"][0].clone();
    owner["uid"] = deployment["metadata"]["uid"].clone();
    assert_eq!(rs["metadata"]["ownerReferences"][0], owner);
    assert_eq!(
        rs["spec"]["selector"]["matchLabels"]["pod-template-hash"],
        hash
    );

    let rec = recording("041-list-pods-pending.json");
    let pods = replay(&mut client, &rec).json();
    let recorded = &rec["response"]["body"]["items"];
    assert_eq!(names(&pods).len(), recorded.as_array().unwrap().len());
    for pod in pods["items"].as_array().unwrap() {
        assert_eq!(pod["metadata"]["generateName"], format!("web-{hash}-"));
        assert_eq!(
            pod["metadata"]["labels"],
            recorded[0]["metadata"]["labels"].clone().tap_hash(hash)
        );
        assert_eq!(
            pod["metadata"]["ownerReferences"][0]["name"],
            format!("web-{hash}")
        );
        assert_eq!(pod["metadata"]["generation"], 1);
        assert_eq!(pod["status"]["phase"], "Pending");
    }
    assert_eq!(fake.revisions("deployments", "wire-rec", "web"), 1);
}

trait TapHash {
    fn tap_hash(self, hash: &str) -> Value;
}

impl TapHash for Value {
    /// Recorded labels with this server's pod-template-hash.
    fn tap_hash(mut self, hash: &str) -> Value {
        self["pod-template-hash"] = hash.into();
        self
    }
}

#[test]
fn template_patches_roll_out_like_042_to_049() {
    let fake = FakeApi::start();
    let mut client = RawClient::connect(&fake.url());
    deployment_with_pending_pods(&fake, &mut client);
    let patches = [
        (
            "042-patch-deployment-strategic.json",
            "wavelet.dev/config-hash",
            "aaaa",
        ),
        (
            "043-patch-deployment-merge.json",
            "wavelet.dev/config-hash",
            "bbbb",
        ),
        (
            "044-patch-deployment-jsonpatch.json",
            "wavelet.dev/restarted-at",
            "2026-01-01T00:00:00Z",
        ),
    ];
    for (generation, (file, key, value)) in (2..).zip(patches) {
        let rec = recording(file);
        let ours = replay(&mut client, &rec);
        assert_object(&ours, &rec);
        let ours = ours.json();
        assert_eq!(ours["metadata"]["generation"], generation, "{file}");
        assert_eq!(
            ours["spec"]["template"]["metadata"]["annotations"][key], value,
            "{file}"
        );
        assert!(
            ours["status"]["observedGeneration"].as_i64().unwrap() < generation,
            "{file}: status lags"
        );
    }
    assert_eq!(fake.revisions("deployments", "wire-rec", "web"), 4);
    assert_eq!(fake.patches("deployments", "wire-rec", "web").len(), 3);
    for file in [
        "045-patch-deployment-jsonpatch-test-fails.json",
        "046-patch-deployment-content-type-json.json",
        "047-patch-deployment-content-type-text.json",
        "048-patch-deployment-not-found.json",
        "050-patch-deployment-bare-dryrun.json",
        "051-patch-deployment-malformed-body.json",
        "053-apply-without-fieldmanager.json",
    ] {
        let rec = recording(file);
        assert_status(&replay(&mut client, &rec), &rec, None);
    }
    assert_eq!(
        fake.revisions("deployments", "wire-rec", "web"),
        4,
        "failed patches change nothing"
    );

    let rec = recording("049-list-replicasets-after-patches.json");
    let ours = replay(&mut client, &rec).json();
    let revision = |rs: &Value| {
        rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let mut revisions: Vec<String> = ours["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(revision)
        .collect();
    revisions.sort();
    assert_eq!(revisions, ["1", "2", "3", "4"]);
    let live: Vec<&Value> = ours["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|rs| rs["spec"]["replicas"] != 0)
        .collect();
    assert_eq!(live.len(), 1);
    assert_eq!(revision(live[0]), "4");

    let rec = recording("052-apply-deployment-ssa.json");
    let ours = replay(&mut client, &rec);
    assert_object(&ours, &rec);
    assert_eq!(
        ours.json()["spec"]["template"]["metadata"]["annotations"]["x"],
        "1"
    );
}

#[test]
fn a_patch_that_changes_nothing_writes_nothing() {
    let fake = FakeApi::start();
    let mut client = RawClient::connect(&fake.url());
    deployment_with_pending_pods(&fake, &mut client);
    let rec = recording("042-patch-deployment-strategic.json");
    replay(&mut client, &rec);
    let list_rv = |client: &mut RawClient| {
        client.get("/api/v1/namespaces/wire-rec/configmaps").json()["metadata"]["resourceVersion"]
            .clone()
    };
    let (stored, before) = (
        fake.get("deployments", "wire-rec", "web").unwrap(),
        list_rv(&mut client),
    );
    let again = replay(&mut client, &rec).json();
    assert_eq!(again, stored, "the unchanged object");
    assert_eq!(
        list_rv(&mut client),
        before,
        "no new resourceVersion anywhere"
    );
    let dry = replay_with(
        &mut client,
        &rec,
        Some("/apis/apps/v1/namespaces/wire-rec/deployments/web?dryRun=All"),
        Some(&json!({"spec": {"template": {"metadata": {"annotations": {"d": "1"}}}}})),
    );
    assert_eq!(dry.status, 200);
    assert!(
        fake.get("deployments", "wire-rec", "web").unwrap()["spec"]["template"]["metadata"]
            ["annotations"]
            .get("d")
            .is_none()
    );
    let stale = json!({"metadata": {"resourceVersion": "1"}, "spec": {"template": {"metadata": {"annotations": {"e": "1"}}}}});
    let conflict = client.json(
        "PATCH",
        "/apis/apps/v1/namespaces/wire-rec/deployments/web",
        "application/merge-patch+json",
        &stale,
    );
    assert_eq!(conflict.status, 409);
    assert_eq!(conflict.json()["message"], "Operation cannot be fulfilled on deployments.apps \"web\": the object has been modified; please apply your changes to the latest version and try again");
}

/// The pods of the selector recordings: three template pods, web-canary and api-1, unscheduled.
fn selector_pods() -> (FakeApi, RawClient) {
    let fake = FakeApi::start();
    let client = RawClient::connect(&fake.url());
    for (name, labels) in [
        ("api-1", json!({"app": "api"})),
        (
            "web-65fcdbbc7d-dtg45",
            json!({"app": "web", "pod-template-hash": "65fcdbbc7d"}),
        ),
        (
            "web-6b67dc7859-rpd82",
            json!({"app": "web", "pod-template-hash": "6b67dc7859"}),
        ),
        (
            "web-b7db5bfb4-ms9qx",
            json!({"app": "web", "pod-template-hash": "b7db5bfb4"}),
        ),
        ("web-canary", json!({"app": "web", "canary": "yes"})),
    ] {
        fake.apply(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "wire-rec", "labels": labels}, "spec": {"containers": [{"name": "main", "image": "pause"}]}}));
    }
    fake.apply(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "scheduled", "namespace": "wire-rec", "labels": {"x": "y"}}, "spec": {"nodeName": "node-1"}}));
    (fake, client)
}

#[test]
fn label_and_field_selectors_match_055_to_064() {
    let (_fake, mut client) = selector_pods();
    for file in [
        "055-list-pods-selector-equality.json",
        "056-list-pods-selector-setbased.json",
        "057-list-pods-selector-eq-eq-empty.json",
        "064-list-pods-fieldselector.json",
    ] {
        let rec = recording(file);
        let ours = replay(&mut client, &rec);
        assert_eq!(ours.status, 200, "{file}");
        assert_eq!(
            names(&ours.json()),
            names(&rec["response"]["body"]),
            "{file}"
        );
    }
    for n in 1..=6 {
        let file = std::fs::read_dir(format!("{}/../shared/k8s-wire", env!("CARGO_MANIFEST_DIR")))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .find(|f| f.starts_with(&format!("{:03}-", 57 + n)))
            .unwrap();
        let rec = recording(&file);
        assert_status(&replay(&mut client, &rec), &rec, None);
    }
}

#[test]
fn pod_deletes_match_065_to_068() {
    let (fake, mut client) = selector_pods();
    let before = fake.get("pods", "wire-rec", "api-1").unwrap();
    let list_rv = client.get("/api/v1/namespaces/wire-rec/pods").json()["metadata"]
        ["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let mut stream = watch(&fake, &format!("/api/v1/namespaces/wire-rec/pods?watch=1&resourceVersion={list_rv}&fieldSelector=metadata.name%3Dapi-1"));
    let rec = recording("065-delete-pod.json");
    let ours = replay(&mut client, &rec);
    assert_object(&ours, &rec);
    let ours = ours.json();
    assert_eq!(
        keys(&ours["metadata"]),
        keys(&rec["response"]["body"]["metadata"]),
        "the same metadata, managedFields included"
    );
    assert_eq!(ours["metadata"]["deletionGracePeriodSeconds"], 0);
    assert_eq!(ours["metadata"]["generation"], 2);
    let (modified, deleted) = (
        stream.next_event(LONG).unwrap(),
        stream.next_event(LONG).unwrap(),
    );
    assert_eq!(
        types(&[modified.clone(), deleted.clone()]),
        ["MODIFIED", "DELETED"]
    );
    assert_eq!(rv(&modified["object"]), rv(&ours));
    assert!(rv(&deleted["object"]) > rv(&ours) && rv(&ours) > rv(&before));

    let canary = fake.get("pods", "wire-rec", "web-canary").unwrap();
    let rec = recording("066-delete-pod-wrong-uid-precondition.json");
    let recorded_uid = "bad6b96a-3354-4ebe-820a-134c5ce7013f";
    let message = rec["response"]["body"]["message"]
        .as_str()
        .unwrap()
        .replace(recorded_uid, canary["metadata"]["uid"].as_str().unwrap());
    assert_status(&replay(&mut client, &rec), &rec, Some(&message));
    let rec = recording("067-delete-pod-wrong-rv-precondition.json");
    let message = rec["response"]["body"]["message"]
        .as_str()
        .unwrap()
        .replace(
            "19112",
            canary["metadata"]["resourceVersion"].as_str().unwrap(),
        );
    assert_status(&replay(&mut client, &rec), &rec, Some(&message));
    let rec = recording("068-delete-pod-not-found.json");
    assert_status(&replay(&mut client, &rec), &rec, None);
}

#[test]
fn delete_collection_returns_the_deleted_list_like_069_to_071() {
    let (fake, mut client) = selector_pods();
    let rec = recording("069-deletecollection-pods-selector.json");
    let ours = replay(&mut client, &rec);
    assert_object(&ours, &rec);
    let ours = ours.json();
    assert_eq!(names(&ours), names(&rec["response"]["body"]));
    assert!(
        ours["items"][0]["metadata"]
            .get("deletionTimestamp")
            .is_none(),
        "items as before deletion"
    );
    assert_eq!(
        names(&client.get("/api/v1/namespaces/wire-rec/pods").json()),
        ["api-1", "scheduled"]
    );
    for name in ["lonely-1", "lonely-2"] {
        fake.apply(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "wire-empty"}}));
    }
    let rec = recording("070-deletecollection-pods-no-selector.json");
    assert_eq!(
        names(&replay(&mut client, &rec).json()),
        ["lonely-1", "lonely-2"]
    );
    fake.apply(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "lonely-3", "namespace": "wire-empty", "labels": {"z": "c"}}}));
    let rec = recording("071-deletecollection-pods-empty-selector-param.json");
    assert_eq!(names(&replay(&mut client, &rec).json()), ["lonely-3"]);
    assert!(fake.pods("wire-empty").is_empty());
    let deletes = fake
        .requests()
        .iter()
        .filter(|r| r.method == "DELETE" && r.path.ends_with("/pods"))
        .count();
    assert_eq!(deletes, 3, "collection deletes are recorded");
}

/// 072–085: a Deployment-less namespace with the PDB of the recording and evict-a/evict-b.
fn eviction_setup() -> (FakeApi, RawClient) {
    let fake = FakeApi::start();
    let mut client = RawClient::connect(&fake.url());
    replay(&mut client, &recording("002-create-namespace.json"));
    for (name, labels) in [
        ("evict-a", json!({"app": "web", "role": "evict-test"})),
        ("evict-b", json!({"app": "web", "role": "evict-test-b"})),
        ("pending-1", json!({"app": "web"})),
    ] {
        fake.apply(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "wire-rec", "labels": labels}, "spec": {"containers": [{"name": "main", "image": "pause"}]}}));
    }
    let rec = recording("072-create-pdb.json");
    let ours = replay(&mut client, &rec);
    assert_object(&ours, &rec);
    assert_eq!(ours.json()["status"], rec["response"]["body"]["status"]);
    (fake, client)
}

#[test]
fn evictions_respect_the_budget_like_072_to_080() {
    let (fake, mut client) = eviction_setup();
    let rec = recording("073-evict-pending-pod-with-pdb.json");
    let ours = replay_with(
        &mut client,
        &rec,
        Some("/api/v1/namespaces/wire-rec/pods/pending-1/eviction"),
        Some(
            &json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "pending-1", "namespace": "wire-rec"}}),
        ),
    );
    assert_wire(&ours, &rec);
    assert_eq!(ours.json(), rec["response"]["body"]);

    let rec = recording("074-patch-pod-status-running-ready.json");
    let ours = replay(&mut client, &rec);
    assert_eq!(ours.status, 200);
    assert_eq!(ours.json()["status"]["phase"], "Running");

    let rec = recording("075-evict-pdb-not-processed.json");
    assert_status(&replay(&mut client, &rec), &rec, None);
    let rec = recording("076-put-pdb-status.json");
    let mut body = rec["request"]["body"].clone();
    body["metadata"] = fake
        .get("poddisruptionbudgets", "wire-rec", "web-pdb")
        .unwrap()["metadata"]
        .clone();
    let ours = replay_with(&mut client, &rec, None, Some(&body));
    assert_object(&ours, &rec);
    assert_eq!(ours.json()["status"]["currentHealthy"], 1);

    let rec = recording("077-evict-pdb-zero-disruptions.json");
    assert_status(&replay(&mut client, &rec), &rec, None);

    fake.merge_patch(
        "poddisruptionbudgets",
        "wire-rec",
        "web-pdb",
        json!({"status": {"disruptionsAllowed": 1}}),
    );
    let pod_rv = fake.get("pods", "wire-rec", "evict-a").unwrap()["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let mut stream = watch(&fake, &format!("/api/v1/namespaces/wire-rec/pods?watch=true&resourceVersion={pod_rv}&fieldSelector=metadata.name%3Devict-a"));
    let rec = recording("078-evict-pdb-allows-one.json");
    let ours = replay(&mut client, &rec);
    assert_wire(&ours, &rec);
    assert_eq!(ours.json(), rec["response"]["body"]);

    let rec = recording("079-watch-pod-during-eviction.json");
    let events: Vec<Value> = (0..3)
        .map(|_| stream.next_event(LONG).expect("event"))
        .collect();
    assert_eq!(
        types(&events),
        types(rec["response"]["events"].as_array().unwrap())
    );
    let condition = |e: &Value| {
        e["object"]["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "DisruptionTarget" && c["reason"] == "EvictionByEvictionAPI")
    };
    assert!(events.iter().all(condition));
    assert!(events[0]["object"]["metadata"]
        .get("deletionTimestamp")
        .is_none());
    assert!(events[1]["object"]["metadata"]["deletionTimestamp"].is_string());

    let rec = recording("080-get-pdb-after-eviction.json");
    let ours = replay(&mut client, &rec);
    assert_object(&ours, &rec);
    let status = &ours.json()["status"];
    assert_eq!(status["disruptionsAllowed"], 0);
    assert!(status["disruptedPods"]["evict-a"].is_string());
}

#[test]
fn eviction_errors_match_081_to_085() {
    let (fake, mut client) = eviction_setup();
    fake.merge_patch(
        "pods",
        "wire-rec",
        "evict-b",
        json!({"status": {"phase": "Running"}}),
    );
    fake.apply(json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "other-pdb", "namespace": "wire-rec"}, "spec": {"selector": {"matchLabels": {"role": "evict-test-b"}}}}));
    let rec = recording("081-evict-two-pdbs.json");
    assert_status(&replay(&mut client, &rec), &rec, None);
    let rec = recording("082-delete-pdb.json");
    let uid = fake
        .get("poddisruptionbudgets", "wire-rec", "web-pdb")
        .unwrap()["metadata"]["uid"]
        .clone();
    let ours = replay(&mut client, &rec);
    assert_wire(&ours, &rec);
    let mut expected = rec["response"]["body"].clone();
    expected["details"]["uid"] = uid;
    assert_eq!(ours.json(), expected);
    fake.delete("poddisruptionbudgets", "wire-rec", "other-pdb");
    let rec = recording("083-evict-no-pdb.json");
    let ours = replay(&mut client, &rec);
    assert_wire(&ours, &rec);
    assert_eq!(ours.json(), rec["response"]["body"]);
    for file in ["084-evict-missing-pod.json", "085-evict-name-mismatch.json"] {
        let rec = recording(file);
        assert_status(&replay(&mut client, &rec), &rec, None);
    }
}

#[test]
fn errors_and_auth_match_086_087_101_120() {
    let (fake, mut client) = wire_rec();
    for file in [
        "086-get-configmap-not-found.json",
        "101-unknown-resource-404.json",
        "120-proxy-get-not-found.json",
    ] {
        let rec = recording(file);
        assert_status(&replay(&mut client, &rec), &rec, None);
    }
    fake.require_token(Some("admintoken"));
    let rec = recording("087-wrong-token-401.json");
    client.token = Some("wrong-token".into());
    assert_status(&replay(&mut client, &rec), &rec, None);
    client.token = None;
    assert_eq!(
        client.get("/api/v1/namespaces/wire-rec/configmaps").status,
        401,
        "no token is rejected too"
    );
    client.token = Some("admintoken".into());
    assert_eq!(
        client.get("/api/v1/namespaces/wire-rec/configmaps").status,
        200
    );
    fake.require_token(None);
}

#[test]
fn updates_and_creates_fail_like_094_to_099() {
    let (_fake, mut client) = wire_rec();
    let current = client
        .get("/api/v1/namespaces/wire-rec/configmaps/app-config")
        .json();
    client.json(
        "PATCH",
        "/api/v1/namespaces/wire-rec/configmaps/app-config",
        "application/merge-patch+json",
        &json!({"data": {"n": "1"}}),
    );
    let rec = recording("094-put-configmap-stale-rv-409.json");
    let mut body = rec["request"]["body"].clone();
    body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"].clone();
    assert_status(
        &replay_with(&mut client, &rec, None, Some(&body)),
        &rec,
        None,
    );
    let rec = recording("095-put-configmap-without-rv.json");
    let ours = replay(&mut client, &rec);
    assert_object(&ours, &rec);
    assert_eq!(ours.json()["data"], rec["response"]["body"]["data"]);
    for file in [
        "096-create-configmap-already-exists.json",
        "097-create-configmap-invalid-name.json",
        "098-create-in-missing-namespace.json",
        "099-create-namespace-mismatch.json",
    ] {
        let rec = recording(file);
        assert_status(&replay(&mut client, &rec), &rec, None);
    }
}

#[test]
fn leases_match_102_to_106() {
    let (_fake, mut client) = wire_rec();
    let rec = recording("102-create-lease.json");
    let created = replay(&mut client, &rec);
    assert_object(&created, &rec);
    let created = created.json();
    assert_eq!(created["spec"], rec["response"]["body"]["spec"]);
    let rec = recording("103-update-lease.json");
    let mut body = rec["request"]["body"].clone();
    body["metadata"] = created["metadata"].clone();
    let renewed = replay_with(&mut client, &rec, None, Some(&body));
    assert_object(&renewed, &rec);
    assert!(rv(&renewed.json()) > rv(&created));
    let rec = recording("104-update-lease-stale-409.json");
    let mut body = rec["request"]["body"].clone();
    body["metadata"] = created["metadata"].clone();
    assert_status(
        &replay_with(&mut client, &rec, None, Some(&body)),
        &rec,
        None,
    );
    for file in [
        "105-update-lease-without-rv.json",
        "106-create-lease-seconds-precision.json",
    ] {
        let rec = recording(file);
        assert_status(&replay(&mut client, &rec), &rec, None);
    }
}

#[test]
fn events_match_107_to_112() {
    let (fake, mut client) = wire_rec();
    for file in [
        "107-events-v1-minimal-422.json",
        "108-events-v1-partial-422.json",
        "110-events-core-minimal-422.json",
    ] {
        let rec = recording(file);
        assert_status(&replay(&mut client, &rec), &rec, None);
    }
    for file in [
        "109-events-v1-valid.json",
        "111-events-core-valid.json",
        "112-events-core-bad-type.json",
    ] {
        let rec = recording(file);
        let ours = replay(&mut client, &rec);
        assert_eq!(ours.status, 201, "{file}: {}", ours.text());
        assert_eq!(ours.json()["kind"], "Event");
    }
    let names: Vec<String> = fake
        .events_for("wire-rec", "web")
        .iter()
        .map(|e| e["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["web.wavelet.2", "web.wavelet.3", "web.wavelet.1"]);
}

#[test]
fn namespace_deletion_matches_114_to_118() {
    let (fake, mut client) = wire_rec();
    let rec = recording("114-delete-namespace.json");
    let ours = replay(&mut client, &rec);
    assert_object(&ours, &rec);
    assert_eq!(ours.json()["status"], rec["response"]["body"]["status"]);
    let rec = recording("115-create-in-terminating-namespace.json");
    assert_status(&replay(&mut client, &rec), &rec, None);
    for file in [
        "116-get-terminating-namespace.json",
        "117-delete-namespace-again.json",
    ] {
        let rec = recording(file);
        let ours = replay(&mut client, &rec);
        assert_eq!(ours.status, 200, "{file}");
        assert_eq!(ours.json()["status"]["phase"], "Terminating");
    }
    assert!(
        fake.list("configmaps", Some("wire-rec")).is_empty(),
        "contents are deleted"
    );
    assert!(fake.wait_until(LONG, |f| f.get("namespaces", "", "wire-rec").is_none()));
    let rec = recording("118-get-deleted-namespace.json");
    assert_status(&replay(&mut client, &rec), &rec, None);
}
