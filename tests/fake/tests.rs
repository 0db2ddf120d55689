//! Tests of the fake's own knobs and faults, and of the simulated controllers, over real
//! sockets (the wire conformance tests live in `tests/wire.rs`).

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::client::{types, RawClient, StreamEnd, WatchStream};
use super::{FakeApi, Fault};

const LONG: Duration = Duration::from_secs(5);

fn configmap(name: &str, value: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "ns"}, "data": {"k": value}})
}

fn deployment(name: &str, replicas: u64, annotation: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}, "annotations": {"a": annotation}},
                "spec": {"containers": [{"name": "main", "image": "pause"}]}
            }
        }
    })
}

/// A watch on ConfigMaps in `ns` from the current RV.
fn watch_configmaps(fake: &FakeApi) -> WatchStream {
    let mut client = RawClient::connect(&fake.url());
    let rv = client.get("/api/v1/namespaces/ns/configmaps").json()["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let stream = client.watch(&format!(
        "/api/v1/namespaces/ns/configmaps?watch=1&allowWatchBookmarks=true&resourceVersion={rv}"
    ));
    assert_eq!(stream.status, 200);
    stream
}

#[test]
fn drop_watch_mid_event_cuts_the_connection_inside_a_line() {
    let fake = FakeApi::start();
    fake.apply(configmap("a", "1"));
    let mut stream = watch_configmaps(&fake);
    fake.inject(Fault::DropWatchMidEvent {
        resource: "configmaps".into(),
    });
    fake.apply(configmap("a", "2"));
    assert_eq!(stream.next_line(LONG).unwrap_err(), StreamEnd::Broken);
    assert!(stream.leftover().starts_with(b"{\"type\":\"MODIFIED\""));
    assert!(!stream.ended, "no terminating chunk");
}

#[test]
fn truncated_line_is_followed_by_normal_events() {
    let fake = FakeApi::start();
    fake.apply(configmap("a", "1"));
    let mut stream = watch_configmaps(&fake);
    fake.inject(Fault::TruncatedLine {
        resource: "configmaps".into(),
    });
    fake.apply(configmap("a", "2"));
    fake.apply(configmap("a", "3"));
    let broken = stream.next_line(LONG).unwrap();
    assert!(serde_json::from_str::<Value>(&broken).is_err(), "{broken}");
    let next = stream.next_event(LONG).unwrap();
    assert_eq!(next["object"]["data"]["k"], "3");
}

#[test]
fn watch_error_expired_and_http_gone_hit_the_next_watch_only() {
    let fake = FakeApi::start();
    fake.inject(Fault::WatchErrorExpired {
        resource: "configmaps".into(),
    });
    let mut stream = watch_configmaps(&fake);
    let error = stream.next_event(LONG).unwrap();
    assert_eq!(
        (error["type"].as_str(), error["object"]["code"].as_u64()),
        (Some("ERROR"), Some(410))
    );
    assert_eq!(error["object"]["reason"], "Expired");
    assert!(error["object"]["message"]
        .as_str()
        .unwrap()
        .starts_with("too old resource version: "));
    assert_eq!(stream.next_line(LONG).unwrap_err(), StreamEnd::Clean);

    fake.inject(Fault::WatchHttpGone {
        resource: "configmaps".into(),
    });
    let mut client = RawClient::connect(&fake.url());
    let gone = client.get("/api/v1/namespaces/ns/configmaps?watch=true&resourceVersion=5");
    assert_eq!(gone.status, 410);
    assert_eq!(gone.json()["reason"], "Expired");
    let next = RawClient::connect(&fake.url()).watch("/api/v1/namespaces/ns/configmaps?watch=true");
    assert_eq!(next.status, 200);
}

#[test]
fn status_faults_can_target_lists_or_single_objects_only() {
    let fake = FakeApi::start();
    fake.apply(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "a", "namespace": "ns"}, "data": {"k": "v"}}));
    let fault = |method: &str| Fault::Status {
        method: method.into(),
        resource: "configmaps".into(),
        code: 503,
        retry_after_secs: None,
        times: 1,
        plain_text: false,
    };
    let mut client = RawClient::connect(&fake.url());
    fake.inject(fault("GET_OBJECT"));
    assert_eq!(client.get("/api/v1/namespaces/ns/configmaps").status, 200);
    assert_eq!(client.get("/api/v1/namespaces/ns/configmaps/a").status, 503);
    fake.inject(fault("LIST"));
    assert_eq!(client.get("/api/v1/namespaces/ns/configmaps/a").status, 200);
    assert_eq!(client.get("/api/v1/namespaces/ns/configmaps").status, 503);
    assert_eq!(client.get("/api/v1/namespaces/ns/configmaps").status, 200);
}

#[test]
fn status_faults_count_down_and_carry_retry_after() {
    let fake = FakeApi::start();
    fake.inject(Fault::Status {
        method: "GET".into(),
        resource: "configmaps".into(),
        code: 503,
        retry_after_secs: Some(2),
        times: 2,
        plain_text: false,
    });
    let mut client = RawClient::connect(&fake.url());
    for _ in 0..2 {
        let response = client.get("/api/v1/namespaces/ns/configmaps");
        assert_eq!(response.status, 503);
        assert_eq!(response.header("retry-after"), Some("2"));
        let body = response.json();
        assert_eq!(
            (body["reason"].as_str(), body["code"].as_u64()),
            (Some("ServiceUnavailable"), Some(503))
        );
        assert_eq!(body["details"]["retryAfterSeconds"], 2);
    }
    assert_eq!(client.get("/api/v1/namespaces/ns/configmaps").status, 200);

    fake.inject(Fault::Status {
        method: "PATCH".into(),
        resource: "deployments".into(),
        code: 429,
        retry_after_secs: Some(1),
        times: 1,
        plain_text: true,
    });
    fake.apply(deployment("web", 1, "x"));
    let patch = json!({"spec": {"template": {"metadata": {"annotations": {"a": "y"}}}}});
    let response = client.json(
        "PATCH",
        "/apis/apps/v1/namespaces/ns/deployments/web",
        "application/strategic-merge-patch+json",
        &patch,
    );
    assert_eq!(response.status, 429);
    assert_eq!(
        response.header("content-type"),
        Some("text/plain; charset=utf-8")
    );
    assert_eq!(
        response.text(),
        "Too many requests, please try again later.\n"
    );
    assert_eq!(response.header("retry-after"), Some("1"));
    assert_eq!(
        fake.patches("deployments", "ns", "web").len(),
        1,
        "the rejected patch is recorded"
    );
    assert_eq!(fake.revisions("deployments", "ns", "web"), 1);

    fake.inject(Fault::Status {
        method: "WATCH".into(),
        resource: "configmaps".into(),
        code: 500,
        retry_after_secs: None,
        times: 1,
        plain_text: false,
    });
    assert_eq!(
        client.get("/api/v1/namespaces/ns/configmaps").status,
        200,
        "a list is not a watch"
    );
    let watch = client.get("/api/v1/namespaces/ns/configmaps?watch=1&timeoutSeconds=1");
    assert_eq!((watch.status, watch.header("retry-after")), (500, None));
}

#[test]
fn slow_delays_the_next_matching_response() {
    let fake = FakeApi::start();
    fake.inject(Fault::Slow {
        method: "GET".into(),
        resource: "secrets".into(),
        delay: Duration::from_millis(300),
    });
    let mut client = RawClient::connect(&fake.url());
    let started = Instant::now();
    assert_eq!(client.get("/api/v1/namespaces/ns/secrets").status, 200);
    assert!(started.elapsed() >= Duration::from_millis(300));
    let started = Instant::now();
    client.get("/api/v1/namespaces/ns/secrets");
    assert!(started.elapsed() < Duration::from_millis(300));
}

#[test]
fn a_slow_request_cut_by_a_restart_is_never_applied() {
    // Seen in the soak (seed 1795938936839133663): a PATCH held by `Slow`, its connection
    // cut by `restart`, was applied after the client's retry, undoing it.
    let fake = FakeApi::start();
    fake.apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}}));
    fake.inject(Fault::Slow {
        method: "POST".into(),
        resource: "configmaps".into(),
        delay: Duration::from_millis(600),
    });
    let url = fake.url();
    let creator = std::thread::spawn(move || {
        let body = configmap("slow", "1").to_string();
        let mut client = RawClient::connect(&url);
        client
            .send(
                "POST",
                "/api/v1/namespaces/ns/configmaps",
                &[("Content-Type", "application/json")],
                Some(&body),
            )
            .map(|(status, _)| status)
    });
    assert!(
        fake.wait_until(LONG, |f| f.pending_faults() == 0),
        "request held"
    );
    fake.restart();
    assert!(creator.join().unwrap().is_err(), "its connection was cut");
    // Past the delay, the request is not applied.
    std::thread::sleep(Duration::from_millis(900));
    assert!(fake.get("configmaps", "ns", "slow").is_none());
}

#[test]
fn late_response_applies_the_request_at_once_and_answers_it_late() {
    let fake = FakeApi::start();
    fake.apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}}));
    fake.inject(Fault::LateResponse {
        method: "POST".into(),
        resource: "configmaps".into(),
        delay: Duration::from_millis(600),
    });
    let url = fake.url();
    let started = Instant::now();
    let creator = std::thread::spawn(move || {
        let body = configmap("late", "1").to_string();
        RawClient::connect(&url)
            .request(
                "POST",
                "/api/v1/namespaces/ns/configmaps",
                &[("Content-Type", "application/json")],
                Some(&body),
            )
            .status
    });
    assert!(fake.wait_until(LONG, |f| f.get("configmaps", "ns", "late").is_some()));
    assert!(
        started.elapsed() < Duration::from_millis(600),
        "applied before it was answered"
    );
    assert_eq!(creator.join().unwrap(), 201);
    assert!(started.elapsed() >= Duration::from_millis(600));
}

#[test]
fn a_configmap_whose_values_pass_one_mib_is_refused_with_422() {
    let fake = FakeApi::start();
    fake.apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}}));
    let mut client = RawClient::connect(&fake.url());
    let post = |client: &mut RawClient, name: &str, size: usize| {
        let body = configmap(name, &"x".repeat(size)).to_string();
        client.request(
            "POST",
            "/api/v1/namespaces/ns/configmaps",
            &[("Content-Type", "application/json")],
            Some(&body),
        )
    };
    assert_eq!(post(&mut client, "full", 1 << 20).status, 201);
    let refused = post(&mut client, "over", (1 << 20) + 1);
    assert_eq!(refused.status, 422);
    let status = refused.json();
    assert_eq!(status["reason"], "Invalid");
    assert_eq!(
        status["details"]["causes"][0]["reason"],
        "FieldValueTooLong"
    );
}

#[test]
fn open_watches_counts_until_the_client_leaves_or_they_are_closed() {
    let fake = FakeApi::start();
    let stream = watch_configmaps(&fake);
    let mut second = watch_configmaps(&fake);
    assert_eq!(fake.open_watches("configmaps"), 2);
    assert_eq!(fake.open_watches("secrets"), 0);
    drop(stream);
    assert!(fake.wait_until(LONG, |f| f.open_watches("configmaps") == 1));
    fake.close_watches();
    assert_eq!(second.next_line(LONG).unwrap_err(), StreamEnd::Clean);
    assert!(fake.wait_until(LONG, |f| f.open_watches("configmaps") == 0));
    // The connection is kept alive after a clean end.
    assert_eq!(
        second.client.get("/api/v1/namespaces/ns/configmaps").status,
        200
    );
}

#[test]
fn bookmarks_go_only_to_watches_that_asked() {
    let fake = FakeApi::start();
    let mut with = watch_configmaps(&fake);
    let mut without = RawClient::connect(&fake.url())
        .watch("/api/v1/namespaces/ns/configmaps?watch=1&resourceVersion=1000000");
    fake.apply(configmap("z", "1"));
    fake.bookmark();
    let added = with.next_event(LONG).unwrap();
    let bookmark = with.next_event(LONG).unwrap();
    assert_eq!(types(&[added, bookmark.clone()]), ["ADDED", "BOOKMARK"]);
    assert_eq!(
        bookmark["object"],
        json!({"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"resourceVersion": bookmark["object"]["metadata"]["resourceVersion"]}})
    );
    assert_eq!(
        without.next_line(Duration::from_millis(200)).unwrap_err(),
        StreamEnd::Timeout
    );
}

#[test]
fn dropping_the_server_ends_watches_and_refuses_connections() {
    let fake = FakeApi::start();
    let url = fake.url();
    let mut stream = watch_configmaps(&fake);
    drop(fake);
    assert_ne!(stream.next_line(LONG).unwrap_err(), StreamEnd::Timeout);
    assert!(std::net::TcpStream::connect(url.trim_start_matches("http://")).is_err());
}

#[test]
fn apply_fills_metadata_and_folds_string_data() {
    let fake = FakeApi::start();
    let secret = fake.apply(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "fresh"}, "stringData": {"token": "plain-text-token"}}));
    assert_eq!(secret["data"]["token"], "cGxhaW4tdGV4dC10b2tlbg==");
    assert!(secret.get("stringData").is_none());
    assert_eq!(secret["type"], "Opaque");
    for key in ["uid", "resourceVersion", "creationTimestamp"] {
        assert!(secret["metadata"][key].is_string());
    }
    assert!(
        fake.get("namespaces", "", "fresh").is_some(),
        "the namespace was created"
    );
    let replaced = fake.apply(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "fresh"}, "data": {"b": "Yg=="}}));
    assert_eq!(replaced["metadata"]["uid"], secret["metadata"]["uid"]);
    assert!(replaced["metadata"]["resourceVersion"] != secret["metadata"]["resourceVersion"]);
    assert!(fake.delete("secrets", "fresh", "s"));
    assert!(!fake.delete("secrets", "fresh", "s"));
    assert!(fake.list("secrets", Some("fresh")).is_empty());
}

#[test]
fn apply_all_stores_each_object_as_apply_does() {
    let fake = FakeApi::start();
    let in_namespace = |ns: &str| {
        let mut object = configmap("c", "1");
        object["metadata"]["namespace"] = ns.into();
        object
    };
    fake.apply_all([in_namespace("one"), in_namespace("two")]);
    let applied = fake.apply(in_namespace("three"));
    let (one, two) = (
        fake.get("configmaps", "one", "c").unwrap(),
        fake.get("configmaps", "two", "c").unwrap(),
    );
    assert!(fake.get("namespaces", "", "two").is_some());
    for key in ["uid", "creationTimestamp"] {
        assert!(one["metadata"][key].is_string() && two["metadata"][key].is_string());
    }
    assert_ne!(one["metadata"]["uid"], two["metadata"]["uid"]);
    let rv = |o: &Value| {
        o["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse::<u64>()
            .unwrap()
    };
    assert!(rv(&one) < rv(&two) && rv(&two) < rv(&applied));
    let keys = |o: &Value| {
        o["metadata"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect::<Vec<_>>()
    };
    assert_eq!(keys(&one), keys(&applied));
}

#[test]
fn list_pages_follow_storage_key_order_across_namespaces() {
    let fake = FakeApi::start();
    for ns in ["a", "a-b"] {
        let mut object = configmap("x", "1");
        object["metadata"]["namespace"] = ns.into();
        fake.apply(object);
    }
    let mut client = RawClient::connect(&fake.url());
    let (mut seen, mut token) = (Vec::new(), String::new());
    loop {
        let page = client
            .get(&format!("/api/v1/configmaps?limit=1&continue={token}"))
            .json();
        for item in page["items"].as_array().unwrap() {
            seen.push(item["metadata"]["namespace"].as_str().unwrap().to_string());
        }
        token = page["metadata"]["continue"]
            .as_str()
            .unwrap_or("")
            .to_string();
        if token.is_empty() {
            break;
        }
    }
    // `/a-b/x` sorts before `/a/x` ('-' < '/'), and no page loses an item.
    assert_eq!(seen, ["a-b", "a"]);
}

#[test]
fn workload_revisions_count_template_changes_only() {
    let fake = FakeApi::start();
    fake.apply(deployment("web", 1, "1"));
    assert_eq!(fake.revisions("deployments", "ns", "web"), 1);
    fake.merge_patch("deployments", "ns", "web", json!({"spec": {"replicas": 2}}));
    assert_eq!(fake.revisions("deployments", "ns", "web"), 1);
    fake.merge_patch(
        "deployments",
        "ns",
        "web",
        json!({"spec": {"template": {"metadata": {"annotations": {"a": "2"}}}}}),
    );
    assert_eq!(fake.revisions("deployments", "ns", "web"), 2);
    let stored = fake.get("deployments", "ns", "web").unwrap();
    assert_eq!(
        stored["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
        "2"
    );
    assert_eq!(
        stored["status"]["observedGeneration"],
        stored["metadata"]["generation"]
    );

    for kind in ["StatefulSet", "DaemonSet"] {
        let mut object = deployment("db", 1, "1");
        object["kind"] = kind.into();
        fake.apply(object);
    }
    let patch = json!({"spec": {"template": {"metadata": {"annotations": {"a": "2"}}}}});
    fake.merge_patch("statefulsets", "ns", "db", patch.clone());
    assert_eq!(fake.revisions("statefulsets", "ns", "db"), 2);
    assert_eq!(fake.revisions("daemonsets", "ns", "db"), 1);
    let sts = fake.get("statefulsets", "ns", "db").unwrap();
    assert_eq!(
        sts["status"]["observedGeneration"],
        sts["metadata"]["generation"]
    );
}

#[test]
fn complete_rollouts_keep_only_revision_history_limit_old_replica_sets() {
    let fake = FakeApi::start();
    let mut web = deployment("web", 1, "1");
    web["spec"]["revisionHistoryLimit"] = 2.into();
    fake.apply(web);
    let revisions_left = |f: &FakeApi| -> Vec<u64> {
        let mut left: Vec<u64> = f
            .list("replicasets", Some("ns"))
            .iter()
            .map(|rs| {
                rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"]
                    .as_str()
                    .unwrap()
                    .parse()
                    .unwrap()
            })
            .collect();
        left.sort();
        left
    };
    // Pods that never get Ready: no rollout completes, so nothing is cleaned up.
    fake.set_ready_delay(Duration::from_secs(3600));
    for value in 2..=5 {
        fake.merge_patch(
            "deployments",
            "ns",
            "web",
            json!({"spec": {"template": {"metadata": {"annotations": {"a": value.to_string()}}}}}),
        );
    }
    assert_eq!(revisions_left(&fake), [1, 2, 3, 4, 5]);
    // Once the newest is Ready, the rollout completes: the two newest old ones stay.
    fake.make_pending_pods_ready();
    assert!(
        fake.wait_until(LONG, |f| revisions_left(f) == [3, 4, 5]),
        "{:?}",
        revisions_left(&fake)
    );
    assert_eq!(fake.revisions("deployments", "ns", "web"), 5);
    // The default limit is 10.
    fake.set_ready_delay(Duration::ZERO);
    fake.apply(deployment("api", 1, "1"));
    for value in 2..=13 {
        fake.merge_patch(
            "deployments",
            "ns",
            "api",
            json!({"spec": {"template": {"metadata": {"annotations": {"a": value.to_string()}}}}}),
        );
    }
    let api_left = |f: &FakeApi| {
        f.list("replicasets", Some("ns"))
            .iter()
            .filter(|rs| rs["metadata"]["name"].as_str().unwrap().starts_with("api-"))
            .count()
    };
    assert!(
        fake.wait_until(LONG, |f| api_left(f) == 11),
        "{}",
        api_left(&fake)
    );
}

#[test]
fn custom_resources_take_merge_and_json_patches_but_not_strategic_ones() {
    let fake = FakeApi::start();
    fake.register_resource("argoproj.io", "v1alpha1", "rollouts", "Rollout");
    let mut rollout = deployment("ro", 1, "1");
    rollout["apiVersion"] = "argoproj.io/v1alpha1".into();
    rollout["kind"] = "Rollout".into();
    fake.apply(rollout);
    let mut client = RawClient::connect(&fake.url());
    let path = "/apis/argoproj.io/v1alpha1/namespaces/ns/rollouts/ro";
    let patch = json!({"spec": {"template": {"metadata": {"annotations": {"a": "2"}}}}});
    let smp = client.json(
        "PATCH",
        path,
        "application/strategic-merge-patch+json",
        &patch,
    );
    assert_eq!(smp.status, 415);
    assert_eq!(smp.json()["message"], "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml");
    assert_eq!(
        client
            .json("PATCH", path, "application/merge-patch+json", &patch)
            .status,
        200
    );
    assert_eq!(fake.revisions("rollouts", "ns", "ro"), 2);
    let ops =
        json!([{"op": "replace", "path": "/spec/template/metadata/annotations/a", "value": "3"}]);
    assert_eq!(
        client
            .json("PATCH", path, "application/json-patch+json", &ops)
            .status,
        200
    );
    assert_eq!(fake.revisions("rollouts", "ns", "ro"), 3);
    let list = client
        .get("/apis/argoproj.io/v1alpha1/namespaces/ns/rollouts")
        .json();
    assert_eq!(list["kind"], "RolloutList");
    assert_eq!(fake.patches("rollouts", "ns", "ro").len(), 3);
}

#[test]
fn ureq_reads_both_framings_and_error_bodies() {
    let fake = FakeApi::start();
    for i in 0..20 {
        fake.apply(configmap(&format!("cm-{i:02}"), &"v".repeat(100)));
    }
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let mut big = agent
        .get(format!("{}/api/v1/namespaces/ns/configmaps", fake.url()))
        .call()
        .unwrap();
    assert_eq!(big.headers().get("transfer-encoding").unwrap(), "chunked");
    let list: Value = serde_json::from_str(&big.body_mut().read_to_string().unwrap()).unwrap();
    assert_eq!(list["items"].as_array().unwrap().len(), 20);
    let mut missing = agent
        .get(format!(
            "{}/api/v1/namespaces/ns/configmaps/nope",
            fake.url()
        ))
        .call()
        .unwrap();
    assert_eq!(missing.status(), 404);
    let status: Value =
        serde_json::from_str(&missing.body_mut().read_to_string().unwrap()).unwrap();
    assert_eq!(status["reason"], "NotFound");
    assert_eq!(fake.requests().len(), 2);
    fake.clear_requests();
    assert!(fake.requests().is_empty());
}

fn ready(pod: &Value) -> bool {
    pod["status"]["conditions"].as_array().is_some_and(|c| {
        c.iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    })
}

#[test]
fn replica_sets_keep_their_pods_and_replace_deleted_ones() {
    let fake = FakeApi::start();
    fake.apply(deployment("web", 3, "1"));
    let pods = fake.pods("ns");
    assert_eq!(pods.len(), 3);
    let rs = fake.list("replicasets", Some("ns"));
    let rs_name = rs[0]["metadata"]["name"].as_str().unwrap();
    for pod in &pods {
        assert!(pod["metadata"]["name"]
            .as_str()
            .unwrap()
            .starts_with(&format!("{rs_name}-")));
        assert_eq!(pod["metadata"]["labels"]["app"], "web");
        assert_eq!(
            pod["metadata"]["labels"]["pod-template-hash"],
            rs[0]["metadata"]["labels"]["pod-template-hash"]
        );
        assert_eq!(
            pod["metadata"]["ownerReferences"][0]["uid"],
            rs[0]["metadata"]["uid"]
        );
        assert_eq!(pod["spec"]["nodeName"], "node-1");
        assert_eq!(pod["metadata"]["annotations"]["a"], "1");
        assert!(ready(pod));
    }
    let mut created: Vec<String> = pods
        .iter()
        .map(|p| {
            p["metadata"]["creationTimestamp"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    let sorted = {
        let mut s = created.clone();
        s.sort();
        s.dedup();
        s
    };
    created.sort();
    assert_eq!(created, sorted, "creation timestamps are distinct");

    let victim = pods[0]["metadata"]["name"].as_str().unwrap().to_string();
    assert!(fake.delete("pods", "ns", &victim));
    let after = fake.pods("ns");
    assert_eq!(after.len(), 3);
    assert!(after
        .iter()
        .all(|p| p["metadata"]["name"] != victim.as_str()));
    let newest = after
        .iter()
        .map(|p| p["metadata"]["creationTimestamp"].as_str().unwrap())
        .max()
        .unwrap();
    assert!(
        newest > created.last().unwrap().as_str(),
        "the replacement is the newest pod"
    );

    fake.merge_patch(
        "deployments",
        "ns",
        "web",
        json!({"spec": {"template": {"metadata": {"annotations": {"a": "2"}}}}}),
    );
    let rolled = fake.pods("ns");
    assert_eq!(rolled.len(), 3);
    assert!(
        rolled
            .iter()
            .all(|p| p["metadata"]["annotations"]["a"] == "2"),
        "old pods replaced by the new ReplicaSet's"
    );
    let deployment = fake.get("deployments", "ns", "web").unwrap();
    assert_eq!(deployment["status"]["readyReplicas"], 3);
    assert_eq!(deployment["status"]["updatedReplicas"], 3);
    fake.delete("deployments", "ns", "web");
    assert!(
        fake.pods("ns").is_empty() && fake.list("replicasets", Some("ns")).is_empty(),
        "garbage collected"
    );
}

#[test]
fn pods_become_ready_after_the_ready_delay() {
    let fake = FakeApi::start();
    fake.set_ready_delay(Duration::from_millis(150));
    fake.apply(deployment("web", 2, "1"));
    assert!(fake
        .pods("ns")
        .iter()
        .all(|p| !ready(p) && p["status"]["phase"] == "Pending"));
    assert!(fake.wait_until(LONG, |f| f.pods("ns").iter().all(ready)));
    assert!(fake
        .pods("ns")
        .iter()
        .all(|p| p["status"]["phase"] == "Running"));
    assert!(
        fake.wait_until(LONG, |f| f.get("deployments", "ns", "web").unwrap()
            ["status"]["readyReplicas"]
            == 2)
    );
}

#[test]
fn pods_of_a_crashing_configuration_never_get_ready_and_a_fixed_one_rolls_ready() {
    let fake = FakeApi::start();
    fake.apply(
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "ns"},
        "type": "Opaque", "data": {"k": super::base64::encode_standard(b"crash")}}),
    );
    let mut web = deployment("web", 1, "1");
    web["spec"]["template"]["spec"]["containers"][0]["envFrom"] =
        json!([{"secretRef": {"name": "s"}}]);
    fake.apply(web.clone());
    let other = deployment("other", 1, "1");
    fake.apply(other);
    assert!(
        fake.wait_until(LONG, |f| f.pods("ns").iter().any(ready)),
        "other's Pod is Ready"
    );
    std::thread::sleep(Duration::from_millis(200));
    let crashing = |f: &FakeApi| {
        f.pods("ns")
            .iter()
            .filter(|p| p["metadata"]["labels"]["app"] == "web" && !ready(p))
            .count()
    };
    assert_eq!(crashing(&fake), 1, "web's Pod crashes");
    fake.merge_patch(
        "secrets",
        "ns",
        "s",
        json!({"data": {"k": super::base64::encode_standard(b"fine")}}),
    );
    web["spec"]["template"]["metadata"]["annotations"]["a"] = "2".into();
    fake.apply(web);
    assert!(
        fake.wait_until(LONG, |f| f.get("deployments", "ns", "web").unwrap()
            ["status"]["readyReplicas"]
            == 1)
    );
}

#[test]
fn evicting_replica_set_pods_respects_the_budget_and_replaces_them() {
    let fake = FakeApi::start();
    fake.apply(deployment("web", 2, "1"));
    fake.apply(json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "pdb", "namespace": "ns"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}, "status": {"disruptionsAllowed": 1, "currentHealthy": 2, "desiredHealthy": 1, "expectedPods": 2}}));
    let mut client = RawClient::connect(&fake.url());
    let evict = |client: &mut RawClient, name: &str| {
        let body = json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": "ns"}});
        client.json(
            "POST",
            &format!("/api/v1/namespaces/ns/pods/{name}/eviction"),
            "application/json",
            &body,
        )
    };
    let pods = fake.pods("ns");
    let first = evict(&mut client, pods[0]["metadata"]["name"].as_str().unwrap());
    assert_eq!(first.status, 201);
    assert_eq!(
        fake.get("poddisruptionbudgets", "ns", "pdb").unwrap()["status"]["disruptionsAllowed"],
        0
    );
    let second = evict(&mut client, pods[1]["metadata"]["name"].as_str().unwrap());
    assert_eq!(second.status, 429);
    assert_eq!(second.header("retry-after"), None);
    assert_eq!(
        second.json()["details"]["causes"][0]["message"],
        "The disruption budget pdb needs 1 healthy pods and has 2 currently"
    );
    let now = fake.pods("ns");
    assert_eq!(now.len(), 2, "the evicted pod was replaced");
    assert!(now
        .iter()
        .all(|p| p["metadata"]["name"] != pods[0]["metadata"]["name"]));
    fake.merge_patch(
        "poddisruptionbudgets",
        "ns",
        "pdb",
        json!({"status": {"disruptionsAllowed": 5}}),
    );
    assert_eq!(
        evict(&mut client, pods[1]["metadata"]["name"].as_str().unwrap()).status,
        201
    );
}

#[test]
fn a_stalled_watch_sends_nothing_until_the_stall_ends_then_catches_up() {
    let fake = FakeApi::start();
    fake.apply(configmap("a", "1"));
    fake.inject(Fault::StallWatch {
        resource: "configmaps".into(),
        duration: Duration::from_millis(800),
    });
    let started = Instant::now();
    let mut stream = watch_configmaps(&fake);
    fake.apply(configmap("a", "2"));
    fake.bookmark();
    assert_eq!(
        stream.next_line(Duration::from_millis(400)).unwrap_err(),
        StreamEnd::Timeout,
        "neither the event nor the bookmark is sent while stalled"
    );
    let event = stream.next_event(LONG).unwrap();
    assert!(started.elapsed() >= Duration::from_millis(800));
    assert_eq!(event["object"]["data"]["k"], "2", "no event is lost");
}

#[test]
fn heal_ends_a_stall_and_drops_queued_faults() {
    let fake = FakeApi::start();
    fake.inject(Fault::StallWatch {
        resource: "configmaps".into(),
        duration: Duration::from_secs(3600),
    });
    let mut stream = watch_configmaps(&fake);
    fake.inject(Fault::TruncatedLine {
        resource: "configmaps".into(),
    });
    fake.apply(configmap("a", "1"));
    assert_eq!(
        stream.next_line(Duration::from_millis(300)).unwrap_err(),
        StreamEnd::Timeout
    );
    fake.heal();
    assert_eq!(fake.pending_faults(), 0);
    let event = stream.next_event(LONG).unwrap();
    assert_eq!(event["object"]["data"]["k"], "1", "whole, not truncated");
}

#[test]
fn a_restart_drops_every_connection_and_expires_older_resource_versions() {
    let fake = FakeApi::start();
    fake.apply(configmap("a", "1"));
    let mut stream = watch_configmaps(&fake);
    let old_rv = fake.get("configmaps", "ns", "a").unwrap()["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    fake.apply(configmap("a", "2"));
    assert_eq!(stream.next_event(LONG).unwrap()["object"]["data"]["k"], "2");
    fake.restart();
    assert_eq!(stream.next_line(LONG).unwrap_err(), StreamEnd::Broken);
    let mut again = RawClient::connect(&fake.url()).watch(&format!(
        "/api/v1/namespaces/ns/configmaps?watch=1&resourceVersion={old_rv}"
    ));
    let error = again.next_event(LONG).unwrap();
    assert_eq!(error["object"]["code"], 410, "{error}");
    assert_eq!(
        fake.get("configmaps", "ns", "a").unwrap()["data"]["k"],
        "2",
        "objects survive"
    );
}

#[test]
fn a_garbage_line_comes_before_the_next_event_which_follows_intact() {
    let fake = FakeApi::start();
    let mut stream = watch_configmaps(&fake);
    fake.inject(Fault::GarbageLine {
        resource: "configmaps".into(),
        line: b"{\"type\":\"ADDED\",\"object\":\xff\xfe}".to_vec(),
    });
    fake.apply(configmap("a", "1"));
    let garbage = stream.next_line(LONG).unwrap();
    assert!(garbage.contains('\u{fffd}'), "{garbage}");
    assert_eq!(stream.next_event(LONG).unwrap()["object"]["data"]["k"], "1");
}

#[test]
fn a_body_fault_answers_the_next_get_with_exactly_those_bytes() {
    let fake = FakeApi::start();
    fake.inject(Fault::Body {
        resource: "configmaps".into(),
        body: b"[[[[".to_vec(),
    });
    let mut client = RawClient::connect(&fake.url());
    let response = client.get("/api/v1/namespaces/ns/configmaps");
    assert_eq!(
        (response.status, response.body.as_slice()),
        (200, &b"[[[["[..])
    );
    assert_eq!(client.get("/api/v1/namespaces/ns/configmaps").status, 200);
    assert_eq!(
        client.get("/api/v1/namespaces/ns/configmaps").json()["kind"],
        "ConfigMapList"
    );
}
