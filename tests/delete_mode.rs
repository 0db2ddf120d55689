//! Delete mode end to end: the real binary against the fake API server. A ConfigMap or
//! Secret annotated with a selector has its matching Pods replaced when its data changes,
//! once, with the chosen strategy, and never on a metadata edit.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde_json::{json, Value};

use crate::fake::FakeApi;
use crate::util::*;

const NS: &str = "shop";
const STATE_NS: &str = "wavelet-system";
const MATCH: &str = "magalix.com/podDeleteMatch";
const STRATEGY: &str = "wavelet.dev/pod-delete-strategy";

/// `FAST` plus the state namespace.
fn args(extra: &[&'static str]) -> Vec<&'static str> {
    let mut all: Vec<&str> = FAST.to_vec();
    all.extend(["--state-namespace", STATE_NS]);
    all.extend(extra);
    all
}

fn deployment(ns: &str, name: &str, replicas: u64, labels: Value) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "app", "image": "nginx"}]}},
        }
    })
}

fn annotated(mut object: Value, annotations: &[(&str, &str)]) -> Value {
    let map: BTreeMap<_, _> = annotations
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    object["metadata"]["annotations"] = json!(map);
    object
}

/// A bare Pod (no controller), Running and Ready.
fn bare_pod(ns: &str, name: &str, labels: Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": {"nodeName": "node-1", "containers": [{"name": "app", "image": "nginx"}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    })
}

/// The state namespace, Deployment `web` (3 Pods, app=web) and `api` (2 Pods, app=api) in
/// `shop`, a `web` in namespace `other` with the same labels, and ConfigMap `web-config`
/// whose annotations are `annotations`.
fn cluster(annotations: &[(&str, &str)]) -> FakeApi {
    let fake = FakeApi::start();
    fake.apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": STATE_NS}}));
    fake.apply(deployment(NS, "web", 3, json!({"app": "web"})));
    fake.apply(deployment(NS, "api", 2, json!({"app": "api"})));
    fake.apply(deployment("other", "web", 2, json!({"app": "web"})));
    fake.apply(annotated(
        configmap(NS, "web-config", &[("color", "blue")]),
        annotations,
    ));
    fake
}

fn name(object: &Value) -> String {
    object["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Names of the live Pods of `ns` labelled app=`app`.
fn pods(fake: &FakeApi, ns: &str, app: &str) -> BTreeSet<String> {
    fake.pods(ns)
        .iter()
        .filter(|p| {
            p["metadata"]["labels"]["app"] == app && p["metadata"]["deletionTimestamp"].is_null()
        })
        .map(name)
        .collect()
}

/// The Pods replaced (evicted or deleted) in `ns`, by name, with how often each was tried.
fn replaced_in(fake: &FakeApi, ns: &str) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for (pod_ns, pod, _) in pod_replacements(fake) {
        if pod_ns == ns {
            *out.entry(pod).or_insert(0) += 1;
        }
    }
    out
}

/// No DELETE was ever sent to a collection path (`.../namespaces/NS/pods`, `/api/v1/pods`).
fn assert_no_delete_collection(fake: &FakeApi) {
    for r in fake.requests().iter().filter(|r| r.method == "DELETE") {
        let parts: Vec<&str> = r.path.trim_start_matches('/').split('/').collect();
        let prefix = if parts.first() == Some(&"api") { 2 } else { 3 };
        let rest = &parts[prefix.min(parts.len())..];
        let is_collection = match rest {
            ["namespaces", _, _] | [_] => true,
            // Deleting a namespace object itself.
            ["namespaces", _] => false,
            _ => false,
        };
        assert!(
            !is_collection,
            "a DELETE collection request was sent: {} {:?}",
            r.path, r.query
        );
    }
}

fn events(fake: &FakeApi, name: &str, reason: &str) -> Vec<Value> {
    fake.events_for(NS, name)
        .into_iter()
        .filter(|e| e["reason"] == reason)
        .collect()
}

/// The state entry of an object, e.g. `configmap.shop.web-config`.
fn state_entry(fake: &FakeApi, key: &str) -> Option<String> {
    let state = fake.get("configmaps", STATE_NS, "wavelet-state")?;
    state["data"][key].as_str().map(String::from)
}

/// The data hash delete mode computes for an object as the fake holds it now.
fn data_hash_now(fake: &FakeApi, resource: &str, ns: &str, name: &str) -> String {
    use wavelet::objects::ConfigObject;
    let json = fake.get(resource, ns, name).expect("object exists");
    let object = match resource {
        "configmaps" => ConfigObject::configmap(json).unwrap(),
        _ => ConfigObject::secret(json).unwrap(),
    };
    wavelet::model::hash::data_hash(object.digests(), None)
}

/// The namespace of the delete-mode barrier (see [`add_dm_barrier`]), apart from the Pods the
/// tests count.
const BARRIER_NS: &str = "barrier";

/// Adds the delete-mode barrier: ConfigMap `barrier/barrier` whose pod-delete-match selects
/// the one Pod of Deployment `barrier/b`. Start wavelet with `--workers 1` (see
/// [`dm_barrier_change`]).
fn add_dm_barrier(fake: &FakeApi) {
    fake.apply(deployment(BARRIER_NS, "b", 1, json!({"app": "b"})));
    fake.apply(annotated(
        configmap(BARRIER_NS, "barrier", &[("n", "0")]),
        &[(MATCH, "app=b")],
    ));
}

/// The positive signal before asserting that an earlier ConfigMap edit replaced nothing:
/// changes the barrier's data and waits until wavelet recorded it as acted on. ConfigMap
/// events arrive in order and, with one worker, delete mode takes them in order, so every
/// earlier edit was handled first.
fn dm_barrier_change(fake: &FakeApi, wavelet: &Wavelet, n: &str) {
    let key = format!("configmap.{BARRIER_NS}.barrier");
    eventually(fake, wavelet, "the barrier seen", |f| {
        state_entry(f, &key).is_some()
    });
    fake.merge_patch(
        "configmaps",
        BARRIER_NS,
        "barrier",
        json!({"data": {"n": n}}),
    );
    let hash = data_hash_now(fake, "configmaps", BARRIER_NS, "barrier");
    eventually(fake, wavelet, "the barrier's replacement recorded", |f| {
        state_entry(f, &key).as_deref() == Some(hash.as_str())
    });
}

/// Starts wavelet and waits until it recorded `key` at first sight.
fn started(fake: &FakeApi, extra: &[&'static str], key: &str) -> Wavelet {
    let wavelet = Wavelet::start(fake, &args(extra));
    eventually(
        fake,
        &wavelet,
        "first sight recorded in wavelet-state",
        |f| state_entry(f, key).is_some(),
    );
    wavelet
}

/// Changes the data of `web-config` and waits until its new hash is recorded as acted on.
fn change_and_wait(fake: &FakeApi, wavelet: &Wavelet, color: &str) {
    fake.merge_patch(
        "configmaps",
        NS,
        "web-config",
        json!({"data": {"color": color}}),
    );
    let hash = data_hash_now(fake, "configmaps", NS, "web-config");
    eventually(fake, wavelet, "the replacement to finish", |f| {
        state_entry(f, "configmap.shop.web-config").as_deref() == Some(hash.as_str())
    });
}

/// Waits for the debug line delete mode logs when a reconcile of `key` (`configmap
/// shop/web-config`) returned `outcome` (the start of its `Debug` form: `UpToDate`,
/// `Replaced {`; empty for any), written after `mark` (see [`Wavelet::log_mark`]): that
/// reconcile is over, with every request it sent, the positive signal before asserting
/// what it did not do. Where nothing should happen, wait for any outcome, so that a
/// reconcile that wrongly acted fails on the assertion that says what it did.
fn wait_for_outcome(wavelet: &Wavelet, mark: usize, key: &str, outcome: &str) {
    wavelet.wait_for_log_after(mark, key, &format!("delete mode: {outcome}"));
}

fn replaces_every_matching_pod_once(strategy: Option<&str>, extra: &[&'static str]) {
    let annotations: Vec<(&str, &str)> = std::iter::once((MATCH, "app=web"))
        .chain(strategy.map(|s| (STRATEGY, s)))
        .collect();
    let fake = cluster(&annotations);
    let wavelet = started(&fake, extra, "configmap.shop.web-config");
    let before = pods(&fake, NS, "web");
    assert_eq!(before.len(), 3);
    assert!(
        pod_replacements(&fake).is_empty(),
        "first sight replaced Pods:\n{}",
        wavelet.output()
    );

    change_and_wait(&fake, &wavelet, "green");
    wait_for_outcome(
        &wavelet,
        0,
        "configmap shop/web-config",
        "Replaced { pods: 3 }",
    );

    let replaced = replaced_in(&fake, NS);
    let expected: BTreeMap<String, usize> = before.iter().map(|p| (p.clone(), 1)).collect();
    assert_eq!(
        replaced,
        expected,
        "each matching Pod replaced exactly once:\n{}",
        wavelet.output()
    );
    assert!(
        replaced_in(&fake, "other").is_empty(),
        "a Pod in another namespace was touched"
    );
    let after = pods(&fake, NS, "web");
    assert_eq!(after.len(), 3);
    assert!(
        after.is_disjoint(&before),
        "the old Pods are gone: {after:?}"
    );
    let method = if strategy == Some("delete") {
        "DELETE"
    } else {
        "POST"
    };
    assert!(pod_replacements(&fake)
        .iter()
        .all(|(_, _, r)| r.method == method));
    for (_, _, r) in pod_replacements(&fake)
        .iter()
        .filter(|(_, _, r)| r.method == "POST")
    {
        let body = r.body_json();
        assert_eq!(body["apiVersion"], "policy/v1");
        assert_eq!(body["kind"], "Eviction");
    }
    let listed = fake
        .requests()
        .into_iter()
        .filter(|r| r.method == "GET" && r.path == format!("/api/v1/namespaces/{NS}/pods"))
        .collect::<Vec<_>>();
    assert!(
        !listed.is_empty()
            && listed
                .iter()
                .all(|r| r.query_param("labelSelector") == Some("app=web")),
        "{listed:?}"
    );

    eventually(&fake, &wavelet, "PodsReplaced", |f| {
        !events(f, "web-config", "PodsReplaced").is_empty()
    });
    let replaced_events = events(&fake, "web-config", "PodsReplaced");
    assert_eq!(replaced_events.len(), 1, "{replaced_events:?}");
    let message = replaced_events[0]["message"].as_str().unwrap();
    let strategy = strategy.unwrap_or("evict");
    assert!(
        message.starts_with("Replaced 3 Pods matching app=web")
            && message.contains(&format!("(strategy {strategy})"))
            && message.ends_with(")."),
        "{message}"
    );
    assert_eq!(replaced_events[0]["involvedObject"]["kind"], "ConfigMap");
    assert_no_delete_collection(&fake);
}

#[test]
fn evict_replaces_every_matching_pod_exactly_once() {
    replaces_every_matching_pod_once(None, &[]);
}

#[test]
fn delete_replaces_every_matching_pod_exactly_once() {
    replaces_every_matching_pod_once(Some("delete"), &[]);
}

#[test]
fn rolling_replaces_every_matching_pod_exactly_once() {
    replaces_every_matching_pod_once(Some("rolling"), &["--rolling-timeout", "5s"]);
}

#[test]
fn rolling_never_has_more_than_one_matching_pod_not_ready() {
    let fake = cluster(&[(MATCH, "app=web"), (STRATEGY, "rolling")]);
    fake.set_ready_delay(Duration::from_millis(300));
    let wavelet = started(
        &fake,
        &["--rolling-timeout", "5s"],
        "configmap.shop.web-config",
    );
    fake.merge_patch(
        "configmaps",
        NS,
        "web-config",
        json!({"data": {"color": "green"}}),
    );
    let hash = data_hash_now(&fake, "configmaps", NS, "web-config");
    let mut most_not_ready = 0;
    eventually(&fake, &wavelet, "the rolling replacement to finish", |f| {
        let not_ready = f
            .pods(NS)
            .iter()
            .filter(|p| p["metadata"]["labels"]["app"] == "web")
            .filter(|p| {
                !p["status"]["conditions"].as_array().is_some_and(|c| {
                    c.iter()
                        .any(|c| c["type"] == "Ready" && c["status"] == "True")
                })
            })
            .count();
        most_not_ready = most_not_ready.max(not_ready);
        state_entry(f, "configmap.shop.web-config").as_deref() == Some(hash.as_str())
    });
    assert_eq!(replaced_in(&fake, NS).len(), 3, "{}", wavelet.output());
    assert_eq!(
        most_not_ready, 1,
        "at most one matching Pod may be not Ready at a time"
    );
}

#[test]
fn rolling_timeout_warns_and_goes_on_with_the_next_pod() {
    let fake = cluster(&[(MATCH, "tier=solo"), (STRATEGY, "rolling")]);
    // Bare Pods: nobody replaces them, so the Pods never get back to two.
    fake.apply(bare_pod(NS, "solo-a", json!({"tier": "solo"})));
    fake.apply(bare_pod(NS, "solo-b", json!({"tier": "solo"})));
    let wavelet = started(
        &fake,
        &["--rolling-timeout", "300ms"],
        "configmap.shop.web-config",
    );
    change_and_wait(&fake, &wavelet, "green");
    assert_eq!(
        replaced_in(&fake, NS).keys().cloned().collect::<Vec<_>>(),
        ["solo-a", "solo-b"]
    );
    assert!(
        !events(&fake, "web-config", "RollingTimeout").is_empty(),
        "{}",
        wavelet.output()
    );
    assert_eq!(
        events(&fake, "web-config", "RollingTimeout")[0]["type"],
        "Warning"
    );
}

#[test]
fn a_label_or_annotation_only_change_deletes_nothing() {
    let fake = cluster(&[(MATCH, "app=web")]);
    add_dm_barrier(&fake);
    let wavelet = started(&fake, ONE_WORKER, "configmap.shop.web-config");
    fake.merge_patch(
        "configmaps",
        NS,
        "web-config",
        json!({"metadata": {"labels": {"touched": "yes"}}}),
    );
    fake.merge_patch(
        "configmaps",
        NS,
        "web-config",
        json!({"metadata": {"annotations": {"note": "hello"}}}),
    );
    dm_barrier_change(&fake, &wavelet, "1");
    assert!(
        replaced_in(&fake, NS).is_empty(),
        "a metadata edit replaced Pods:\n{}",
        wavelet.output()
    );
    assert!(events(&fake, "web-config", "PodsReplaced").is_empty());
}

#[test]
fn invalid_empty_and_too_broad_selectors_delete_nothing_and_warn() {
    let fake = cluster(&[(MATCH, "app=web")]);
    let bad = [
        ("bad-syntax", "app in web"),
        ("empty", ""),
        ("everything-but", "!canary"),
        ("not-equal", "app!=api"),
    ];
    for (name, selector) in bad {
        fake.apply(annotated(
            configmap(NS, name, &[("k", "1")]),
            &[(MATCH, selector)],
        ));
    }
    let wavelet = Wavelet::start(&fake, &args(&[]));
    // First sight refuses them too; the change is looked at after that.
    for (name, _) in bad {
        wait_for_outcome(
            &wavelet,
            0,
            &format!("configmap shop/{name}"),
            "InvalidSelector",
        );
    }
    let mark = wavelet.log_mark();
    for (name, _) in bad {
        fake.merge_patch("configmaps", NS, name, json!({"data": {"k": "2"}}));
    }
    for (name, selector) in bad {
        eventually(
            &fake,
            &wavelet,
            &format!("InvalidSelector on {name}"),
            |f| {
                f.events_for(NS, name)
                    .iter()
                    .any(|e| e["reason"] == "InvalidSelector" && e["type"] == "Warning")
            },
        );
        wait_for_outcome(
            &wavelet,
            mark,
            &format!("configmap shop/{name}"),
            "InvalidSelector",
        );
        let warning = &events(&fake, name, "InvalidSelector")[0];
        assert!(
            warning["message"]
                .as_str()
                .unwrap()
                .contains(&format!("{selector:?}")),
            "{warning}"
        );
        assert!(
            state_entry(&fake, &format!("configmap.shop.{name}")).is_none(),
            "state advanced for {name}"
        );
    }
    assert!(pod_replacements(&fake).is_empty(), "{}", wavelet.output());
    assert!(wavelet.output().contains("ERROR"), "an error is logged");
    assert_no_delete_collection(&fake);
}

#[test]
fn an_unknown_strategy_warns_and_deletes_nothing() {
    let fake = cluster(&[(MATCH, "app=web"), (STRATEGY, "nuke")]);
    let wavelet = Wavelet::start(&fake, &args(&[]));
    // First sight refuses it too; the change is looked at after that.
    wait_for_outcome(&wavelet, 0, "configmap shop/web-config", "UnknownStrategy");
    let mark = wavelet.log_mark();
    fake.merge_patch(
        "configmaps",
        NS,
        "web-config",
        json!({"data": {"color": "green"}}),
    );
    eventually(&fake, &wavelet, "UnknownStrategy warning", |f| {
        !events(f, "web-config", "UnknownStrategy").is_empty()
    });
    wait_for_outcome(
        &wavelet,
        mark,
        "configmap shop/web-config",
        "UnknownStrategy",
    );
    assert!(pod_replacements(&fake).is_empty(), "{}", wavelet.output());
}

#[test]
fn a_pdb_blocks_evictions_until_it_allows_them_and_late_pods_are_left_alone() {
    let fake = cluster(&[(MATCH, "app=web")]);
    fake.apply(json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "web", "namespace": NS},
        "spec": {"minAvailable": 3, "selector": {"matchLabels": {"app": "web"}}},
        "status": {"disruptionsAllowed": 0, "currentHealthy": 3, "desiredHealthy": 3, "expectedPods": 3},
    }));
    let wavelet = started(
        &fake,
        &["--eviction-warning-after", "500ms"],
        "configmap.shop.web-config",
    );
    let before = pods(&fake, NS, "web");
    fake.merge_patch(
        "configmaps",
        NS,
        "web-config",
        json!({"data": {"color": "green"}}),
    );
    eventually(&fake, &wavelet, "a refused eviction", |f| {
        !pod_replacements(f).is_empty()
    });
    // Created after the change was observed: must be left alone.
    fake.apply(bare_pod(NS, "web-late", json!({"app": "web"})));
    eventually(&fake, &wavelet, "EvictionBlocked warning", |f| {
        !events(f, "web-config", "EvictionBlocked").is_empty()
    });
    // The reason is in the Status's details.causes, not in its message.
    let blocked = events(&fake, "web-config", "EvictionBlocked");
    let message = blocked[0]["message"].as_str().unwrap();
    assert!(
        message.contains("The disruption budget web needs 3 healthy pods and has 3 currently"),
        "{message}"
    );
    assert_eq!(
        pods(&fake, NS, "web").len(),
        4,
        "nothing evicted while the PDB blocks"
    );

    fake.merge_patch(
        "poddisruptionbudgets",
        NS,
        "web",
        json!({"status": {"disruptionsAllowed": 10}}),
    );
    let hash = data_hash_now(&fake, "configmaps", NS, "web-config");
    eventually(&fake, &wavelet, "the replacement to finish", |f| {
        state_entry(f, "configmap.shop.web-config").as_deref() == Some(hash.as_str())
    });
    let now = pods(&fake, NS, "web");
    assert!(now.is_disjoint(&before), "every old Pod evicted: {now:?}");
    assert!(
        now.contains("web-late"),
        "the Pod created after the change was evicted"
    );
    assert!(!replaced_in(&fake, NS).contains_key("web-late"));
    // The Event follows the state write.
    eventually(&fake, &wavelet, "PodsReplaced", |f| {
        !events(f, "web-config", "PodsReplaced").is_empty()
    });
    assert_eq!(events(&fake, "web-config", "PodsReplaced").len(), 1);
}

#[test]
fn restarts_act_once_on_a_change_made_while_down_and_never_otherwise() {
    let fake = cluster(&[(MATCH, "app=web")]);
    // First start on an existing annotated object: recorded, nothing replaced.
    let wavelet = started(&fake, &[], "configmap.shop.web-config");
    wait_for_outcome(&wavelet, 0, "configmap shop/web-config", "Recorded");
    assert!(pod_replacements(&fake).is_empty(), "{}", wavelet.output());
    wavelet.kill();

    // Restart without a change: nothing.
    let wavelet = Wavelet::start(&fake, &args(&[]));
    wait_for_outcome(&wavelet, 0, "configmap shop/web-config", "");
    assert!(pod_replacements(&fake).is_empty(), "{}", wavelet.output());
    wavelet.kill();

    // A change made while down is acted on once at start.
    let before = pods(&fake, NS, "web");
    fake.merge_patch(
        "configmaps",
        NS,
        "web-config",
        json!({"data": {"color": "green"}}),
    );
    let hash = data_hash_now(&fake, "configmaps", NS, "web-config");
    let wavelet = Wavelet::start(&fake, &args(&[]));
    eventually(&fake, &wavelet, "the replacement to finish", |f| {
        state_entry(f, "configmap.shop.web-config").as_deref() == Some(hash.as_str())
    });
    let expected: BTreeMap<String, usize> = before.iter().map(|p| (p.clone(), 1)).collect();
    assert_eq!(replaced_in(&fake, NS), expected);
    wavelet.kill();

    // And not again after another restart.
    let wavelet = Wavelet::start(&fake, &args(&[]));
    wait_for_outcome(&wavelet, 0, "configmap shop/web-config", "");
    assert_eq!(replaced_in(&fake, NS), expected, "{}", wavelet.output());
}

#[test]
fn a_restart_in_the_middle_of_a_replacement_resumes_it_without_repeating() {
    let fake = cluster(&[(MATCH, "app=web")]);
    fake.apply(json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "web", "namespace": NS},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}},
        "status": {"disruptionsAllowed": 1, "currentHealthy": 3, "desiredHealthy": 2, "expectedPods": 3},
    }));
    let wavelet = started(&fake, &[], "configmap.shop.web-config");
    let before = pods(&fake, NS, "web");
    fake.merge_patch(
        "configmaps",
        NS,
        "web-config",
        json!({"data": {"color": "green"}}),
    );
    // One eviction goes through, the rest are refused.
    eventually(&fake, &wavelet, "one Pod evicted", |f| {
        pods(f, NS, "web").difference(&before).count() == 1
    });
    let entry = state_entry(&fake, "configmap.shop.web-config").unwrap();
    assert!(entry.contains(" replacing since="), "{entry}");
    wavelet.kill();

    let wavelet = Wavelet::start(&fake, &args(&[]));
    fake.merge_patch(
        "poddisruptionbudgets",
        NS,
        "web",
        json!({"status": {"disruptionsAllowed": 10}}),
    );
    let hash = data_hash_now(&fake, "configmaps", NS, "web-config");
    eventually(&fake, &wavelet, "the replacement to finish", |f| {
        state_entry(f, "configmap.shop.web-config").as_deref() == Some(hash.as_str())
    });
    let replaced = replaced_in(&fake, NS);
    for pod in replaced.keys() {
        assert!(
            before.contains(pod),
            "{pod} was created after the change and replaced anyway:\n{}",
            wavelet.output()
        );
    }
    assert!(pods(&fake, NS, "web").is_disjoint(&before));
}

#[test]
fn a_secret_works_the_same() {
    let fake = cluster(&[]);
    fake.apply(annotated(
        secret(NS, "web-creds", &[("password", "hunter2")]),
        &[("wavelet.dev/pod-delete-match", "app=web")],
    ));
    let wavelet = started(&fake, &[], "secret.shop.web-creds");
    let before = pods(&fake, NS, "web");
    let mark = wavelet.log_mark();
    fake.merge_patch(
        "secrets",
        NS,
        "web-creds",
        json!({"metadata": {"labels": {"touched": "yes"}}}),
    );
    // The edited version arrives whole on the watch, and is reconciled.
    wait_for_outcome(&wavelet, mark, "secret shop/web-creds", "");
    assert!(
        pod_replacements(&fake).is_empty(),
        "a label edit of a Secret replaced Pods"
    );

    let new_value = wavelet::objects::base64::encode(b"correct horse");
    fake.merge_patch(
        "secrets",
        NS,
        "web-creds",
        json!({"data": {"password": new_value}}),
    );
    let hash = data_hash_now(&fake, "secrets", NS, "web-creds");
    eventually(&fake, &wavelet, "the replacement to finish", |f| {
        state_entry(f, "secret.shop.web-creds").as_deref() == Some(hash.as_str())
    });
    let expected: BTreeMap<String, usize> = before.iter().map(|p| (p.clone(), 1)).collect();
    assert_eq!(replaced_in(&fake, NS), expected);
    // The Event follows the state write.
    eventually(&fake, &wavelet, "PodsReplaced", |f| {
        !events(f, "web-creds", "PodsReplaced").is_empty()
    });
    let replaced = events(&fake, "web-creds", "PodsReplaced");
    assert_eq!(replaced.len(), 1);
    assert_eq!(replaced[0]["involvedObject"]["kind"], "Secret");
    let output = wavelet.output();
    for leaked in ["hunter2", "correct horse", &new_value] {
        assert!(
            !output.contains(leaked),
            "a Secret value leaked into the log"
        );
        for event in fake.events_for(NS, "web-creds") {
            assert!(
                !event.to_string().contains(leaked),
                "a Secret value leaked into an Event"
            );
        }
    }
}

/// Issue 26, item 3. A Secret nothing references is not kept once it loses its selector,
/// so delete mode found it gone from the cache and took the opt-out for a deletion, which
/// keeps the entry: a data change while opted out then replaced Pods when the annotation
/// came back. Removing the annotation forgets the entry, whatever else uses the object,
/// and adding it back is a first sight.
#[test]
fn a_secret_opted_out_forgets_its_entry_and_opting_in_again_replaces_nothing() {
    let fake = cluster(&[]);
    let key = "secret.shop.web-creds";
    fake.apply(annotated(
        secret(NS, "web-creds", &[("password", "hunter2")]),
        &[(MATCH, "app=web")],
    ));
    let wavelet = started(&fake, &[], key);
    let mark = wavelet.log_mark();
    fake.merge_patch(
        "secrets",
        NS,
        "web-creds",
        json!({"metadata": {"annotations": {MATCH: null}}}),
    );
    wait_for_outcome(&wavelet, mark, "secret shop/web-creds", "Forgotten");
    let entry_after_opt_out = state_entry(&fake, key);
    // A data change while opted out, then the annotation back.
    fake.merge_patch(
        "secrets",
        NS,
        "web-creds",
        json!({"data": {"password": wavelet::objects::base64::encode(b"correct horse")}}),
    );
    fake.merge_patch(
        "secrets",
        NS,
        "web-creds",
        json!({"metadata": {"annotations": {MATCH: "app=web"}}}),
    );
    let hash = data_hash_now(&fake, "secrets", NS, "web-creds");
    eventually(&fake, &wavelet, "the new data recorded", |f| {
        state_entry(f, key).as_deref() == Some(hash.as_str())
    });
    assert_eq!(
        replaced_in(&fake, NS),
        BTreeMap::new(),
        "opting in again replaced Pods:\n{}",
        wavelet.output()
    );
    assert_eq!(entry_after_opt_out, None, "opting out kept the state entry");
    assert!(events(&fake, "web-creds", "PodsReplaced").is_empty());
}

#[test]
fn a_change_during_a_rolling_replacement_restarts_it_without_replacing_a_pod_twice() {
    let fake = cluster(&[(MATCH, "app=web"), (STRATEGY, "rolling")]);
    fake.set_ready_delay(Duration::from_millis(400));
    let wavelet = started(
        &fake,
        &["--rolling-timeout", "5s"],
        "configmap.shop.web-config",
    );
    fake.merge_patch(
        "configmaps",
        NS,
        "web-config",
        json!({"data": {"color": "green"}}),
    );
    eventually(&fake, &wavelet, "the first eviction", |f| {
        !pod_replacements(f).is_empty()
    });
    fake.merge_patch(
        "configmaps",
        NS,
        "web-config",
        json!({"data": {"color": "red"}}),
    );
    // Every one of these was created before the second change, the first replacement's
    // successor included.
    let at_second_change = pods(&fake, NS, "web");
    let hash = data_hash_now(&fake, "configmaps", NS, "web-config");
    eventually(
        &fake,
        &wavelet,
        "the restarted replacement to finish",
        |f| state_entry(f, "configmap.shop.web-config").as_deref() == Some(hash.as_str()),
    );
    wait_for_outcome(&wavelet, 0, "configmap shop/web-config", "Replaced {");
    let replaced = replaced_in(&fake, NS);
    assert!(
        replaced.values().all(|&n| n == 1),
        "a Pod was replaced twice: {replaced:?}\n{}",
        wavelet.output()
    );
    for pod in &at_second_change {
        assert_eq!(
            replaced.get(pod),
            Some(&1),
            "{pod} not replaced for the newer data: {replaced:?}\n{}",
            wavelet.output()
        );
    }
    assert!(
        replaced.len() > at_second_change.len(),
        "the first replacement evicted one Pod: {replaced:?}"
    );
    assert!(pods(&fake, NS, "web")
        .iter()
        .all(|p| !replaced.contains_key(p)));
    eventually(&fake, &wavelet, "PodsReplaced", |f| {
        !events(f, "web-config", "PodsReplaced").is_empty()
    });
    let done = events(&fake, "web-config", "PodsReplaced");
    assert_eq!(done.len(), 1, "{done:?}");
}

#[test]
fn dry_run_reports_what_it_would_replace_and_writes_nothing() {
    let fake = cluster(&[(MATCH, "app=web")]);
    let wavelet = Wavelet::start(&fake, &args(&["--dry-run"]));
    assert!(
        wavelet.wait_for_output("first seen", Duration::from_secs(5)),
        "{}",
        wavelet.output()
    );
    fake.merge_patch(
        "configmaps",
        NS,
        "web-config",
        json!({"data": {"color": "green"}}),
    );
    eventually(&fake, &wavelet, "a dry-run event", |f| {
        !events(f, "web-config", "PodsReplaced").is_empty()
    });
    let message = events(&fake, "web-config", "PodsReplaced")[0]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        message.starts_with("Dry run, nothing deleted") && message.contains("would evict 3 Pods"),
        "{message}"
    );
    wait_for_outcome(
        &wavelet,
        0,
        "configmap shop/web-config",
        "DryRun { pods: 3 }",
    );
    assert!(pod_replacements(&fake).is_empty());
    assert!(
        fake.get("configmaps", STATE_NS, "wavelet-state").is_none(),
        "dry run wrote the state"
    );
}

/// Out of a cluster with `--server` (a kubectl proxy: no in-cluster namespace, no kubeconfig
/// context), delete mode keeps its state where kubectl would put a namespaced object, in
/// `default`, says so at start, and replaces Pods as usual. It was disabled with an ERROR,
/// which broke the README's quick start (its `worker` example is delete mode).
#[test]
fn without_a_state_namespace_the_state_lives_in_default_and_the_start_says_so() {
    let fake = cluster(&[(MATCH, "app=web")]);
    fake.apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}));
    let wavelet = Wavelet::start(&fake, FAST);
    assert!(
        wavelet.wait_for_output(
            "delete mode keeps its state in ConfigMap default/wavelet-state",
            Duration::from_secs(10)
        ),
        "{}",
        wavelet.output()
    );
    let key = "configmap.shop.web-config";
    let recorded = |f: &FakeApi| {
        f.get("configmaps", "default", "wavelet-state")
            .and_then(|state| state["data"][key].as_str().map(String::from))
    };
    eventually(
        &fake,
        &wavelet,
        "first sight recorded in default/wavelet-state",
        |f| recorded(f).is_some(),
    );
    let before = pods(&fake, NS, "web");
    fake.merge_patch(
        "configmaps",
        NS,
        "web-config",
        json!({"data": {"color": "green"}}),
    );
    let hash = data_hash_now(&fake, "configmaps", NS, "web-config");
    eventually(&fake, &wavelet, "the replacement to finish", |f| {
        recorded(f).as_deref() == Some(hash.as_str())
    });
    let replaced = replaced_in(&fake, NS);
    assert_eq!(
        replaced.keys().cloned().collect::<BTreeSet<_>>(),
        before,
        "every web Pod replaced once"
    );
    assert!(replaced.values().all(|n| *n == 1), "{replaced:?}");
    assert!(
        !wavelet.output().lines().any(|l| l.contains("ERROR")),
        "{}",
        wavelet.output()
    );
}

/// Regression: the client slept on an eviction's `Retry-After: 10` up to three times
/// inside the call, so a worker held a refused eviction for 30 s and SIGTERM waited for it
/// (60 s measured on a real API server). Now the call returns at once and the queue waits.
#[test]
fn sigterm_exits_at_once_while_evictions_are_refused_with_retry_after() {
    let fake = cluster(&[(MATCH, "app=web")]);
    let mut wavelet = started(&fake, &[], "configmap.shop.web-config");
    // Every eviction answered as a budget still being processed is (wire 075).
    fake.inject(crate::fake::Fault::Status {
        method: "POST".into(),
        resource: "pods".into(),
        code: 429,
        retry_after_secs: Some(10),
        times: 20,
        plain_text: false,
    });
    fake.merge_patch(
        "configmaps",
        NS,
        "web-config",
        json!({"data": {"color": "green"}}),
    );
    eventually(&fake, &wavelet, "a refused eviction", |f| {
        f.requests()
            .iter()
            .any(|r| r.path.ends_with("/eviction") && r.method == "POST")
    });
    let sent = std::time::Instant::now();
    wavelet.signal("TERM");
    let status = wavelet.wait_exit(std::time::Duration::from_secs(5));
    let output = wavelet.output();
    let status = status.unwrap_or_else(|| panic!("still running 5 s after SIGTERM:\n{output}"));
    assert_eq!(status.code(), Some(0), "{output}");
    assert!(sent.elapsed() < std::time::Duration::from_secs(5));
    assert_eq!(pods(&fake, NS, "web").len(), 3, "nothing was evicted");
}

/// Leader election with short timings (lease 2s, renew deadline 1.5s, retry 300ms), the
/// Lease in the state namespace.
const ELECT: &[&str] = &[
    "--leader-elect",
    "--lease-namespace",
    STATE_NS,
    "--lease-duration",
    "2s",
    "--renew-deadline",
    "1500ms",
    "--retry-period",
    "300ms",
];

/// Regression (issue 26, item 2): delete mode read `wavelet-state` once and trusted that
/// copy across leader terms. Replica A loaded it and lost the Lease (here: frozen with
/// SIGSTOP); B acted on a change and recorded the new hash; when the Lease came back to A
/// (B drained), A still held the old hash and replaced B's new Pods for the same change.
#[test]
fn a_leader_that_comes_back_reads_the_state_again_and_never_replaces_pods_twice() {
    let fake = cluster(&[(MATCH, "app=web")]);
    let a = started(&fake, ELECT, "configmap.shop.web-config");
    wait_for_outcome(&a, 0, "configmap shop/web-config", "Recorded");
    let mut b = Wavelet::start(&fake, &args(ELECT));
    // A freezes (a long pause, a stopped node): B takes over and acts on a change.
    a.signal("STOP");
    assert!(
        b.wait_for_output("acquired Lease", Duration::from_secs(10)),
        "{}",
        b.output()
    );
    let before = pods(&fake, NS, "web");
    change_and_wait(&fake, &b, "green");
    let expected: BTreeMap<String, usize> = before.iter().map(|p| (p.clone(), 1)).collect();
    assert_eq!(replaced_in(&fake, NS), expected, "{}", b.output());
    // A wakes up as a standby; B drains and releases the Lease; A leads again.
    let mark = lead_again(&a, &mut b);
    // A reconciles the change it saw while frozen: the positive signal.
    wait_for_outcome(&a, mark, "configmap shop/web-config", "");
    assert_eq!(
        replaced_in(&fake, NS),
        expected,
        "Pods replaced twice for one change:\n{}",
        a.output()
    );
    wait_for_outcome(&a, mark, "configmap shop/web-config", "UpToDate");
    assert_eq!(pods(&fake, NS, "web").len(), 3);
}

/// The data hash delete mode computes for a ConfigMap with this data.
fn data_hash_of_configmap(data: &[(&str, &str)]) -> String {
    let object =
        wavelet::objects::ConfigObject::configmap(configmap(NS, "any", data)).expect("valid");
    wavelet::model::hash::data_hash(object.digests(), None)
}

/// Regression (issue 26, item 2): a state write that met 409 Conflict re-read
/// `wavelet-state` and applied its change again, whatever the other writer had recorded
/// for the same object. Here another writer (a replica this one never saw lead) records
/// the new data as acted on just before the change reaches wavelet: wavelet's write meets
/// the conflict, reads what is there now, and must decide again, not replace Pods.
#[test]
fn a_state_write_that_meets_a_conflict_decides_again_instead_of_overwriting() {
    let fake = cluster(&[(MATCH, "app=web")]);
    let wavelet = started(&fake, &[], "configmap.shop.web-config");
    wait_for_outcome(&wavelet, 0, "configmap shop/web-config", "Recorded");
    let green = data_hash_of_configmap(&[("color", "green")]);
    fake.merge_patch(
        "configmaps",
        STATE_NS,
        "wavelet-state",
        json!({"data": {"configmap.shop.web-config": green}}),
    );
    let mark = wavelet.log_mark();
    fake.merge_patch(
        "configmaps",
        NS,
        "web-config",
        json!({"data": {"color": "green"}}),
    );
    assert_eq!(data_hash_now(&fake, "configmaps", NS, "web-config"), green);
    // The reconcile that ends it: up to date once decided again, or a replacement.
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let output = wavelet.output();
        let after = &output[mark..];
        if ["UpToDate", "Started {", "Replaced {"]
            .iter()
            .any(|o| after.contains(&format!("delete mode: {o}")))
        {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{output}");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        pod_replacements(&fake).is_empty(),
        "replaced Pods for a change another writer had recorded as acted on:\n{}",
        wavelet.output()
    );
    assert_eq!(
        state_entry(&fake, "configmap.shop.web-config").as_deref(),
        Some(green.as_str())
    );
    assert!(
        wavelet.output()[mark..].contains("deciding again"),
        "the conflict was not met:\n{}",
        wavelet.output()
    );
}

/// Four bare Pods labelled app=batch (nothing re-creates them) and ConfigMap
/// `batch-config` that selects them; every eviction answered 1.5 s late.
fn slow_batch(fake: &FakeApi) {
    for name in ["batch-a", "batch-b", "batch-c", "batch-d"] {
        fake.apply(bare_pod(NS, name, json!({"app": "batch"})));
    }
    fake.apply(annotated(
        configmap(NS, "batch-config", &[("n", "1")]),
        &[(MATCH, "app=batch")],
    ));
}

fn slow_evictions(fake: &FakeApi) {
    for _ in 0..4 {
        fake.inject(crate::fake::Fault::Slow {
            method: "POST".into(),
            resource: "pods".into(),
            delay: Duration::from_millis(1500),
        });
    }
}

/// Changes `batch-config` and waits until the first eviction is sent.
fn start_batch_replacement(fake: &FakeApi, wavelet: &Wavelet) {
    fake.merge_patch(
        "configmaps",
        NS,
        "batch-config",
        json!({"data": {"n": "2"}}),
    );
    eventually(fake, wavelet, "the first eviction sent", |f| {
        !pod_replacements(f).is_empty()
    });
}

/// Waits until the replacement of `batch-config` finished, and checks that each of the
/// four Pods was replaced exactly once.
fn batch_finished_once(fake: &FakeApi, wavelet: &Wavelet) {
    let hash = data_hash_now(fake, "configmaps", NS, "batch-config");
    eventually(fake, wavelet, "the replacement finished", |f| {
        state_entry(f, "configmap.shop.batch-config").as_deref() == Some(hash.as_str())
    });
    let once: BTreeMap<String, usize> = ["batch-a", "batch-b", "batch-c", "batch-d"]
        .iter()
        .map(|p| (p.to_string(), 1))
        .collect();
    assert_eq!(replaced_in(fake, NS), once, "{}", wavelet.output());
}

/// Regression (issue 26, item 7): the eviction loop went on through its whole list after
/// SIGTERM (each request may take up to 90 s), so shutdown could outlast the grace period
/// and skip releasing the Lease. Now it stops between two Pods; the state still says
/// "replacing", and the next leader finishes the replacement without repeating a Pod.
#[test]
fn sigterm_in_the_middle_of_a_replacement_stops_between_pods_and_the_next_leader_finishes_it() {
    let fake = cluster(&[]);
    slow_batch(&fake);
    let mut a = started(&fake, ELECT, "configmap.shop.batch-config");
    slow_evictions(&fake);
    start_batch_replacement(&fake, &a);
    let sent = std::time::Instant::now();
    a.signal("TERM");
    // The eviction under way takes 1.5 s; the rest of the list would take 4.5 s more.
    let status = a.wait_exit(Duration::from_secs(10));
    let took = sent.elapsed();
    assert_eq!(status.and_then(|s| s.code()), Some(0), "{}", a.output());
    assert!(
        took < Duration::from_secs(3),
        "shutdown took {took:?}: it waited for the rest of the list:\n{}",
        a.output()
    );
    assert!(a.output().contains("released Lease"), "{}", a.output());
    assert_eq!(
        pod_replacements(&fake).len(),
        1,
        "evictions sent after SIGTERM:\n{}",
        a.output()
    );
    let entry = state_entry(&fake, "configmap.shop.batch-config").unwrap();
    assert!(entry.contains(" replacing since="), "{entry}");

    let b = Wavelet::start(&fake, &args(ELECT));
    batch_finished_once(&fake, &b);
}

/// Regression (issue 26, item 7): a leader that lost the Lease kept evicting the rest of
/// its list. Now it stops between two Pods once it may not write, and finishes the
/// replacement from `wavelet-state` when it leads again.
#[test]
fn a_leader_that_loses_the_lease_stops_between_pods_and_finishes_when_it_leads_again() {
    let fake = cluster(&[]);
    slow_batch(&fake);
    let wavelet = started(&fake, ELECT, "configmap.shop.batch-config");
    slow_evictions(&fake);
    start_batch_replacement(&fake, &wavelet);
    refuse_lease_renewals(&fake);
    assert!(
        wavelet.wait_for_output("stopped writing", Duration::from_secs(5)),
        "{}",
        wavelet.output()
    );
    // The positive signal: the loop stopped (or, before the fix, every Pod was sent).
    eventually(&fake, &wavelet, "the eviction loop to end", |f| {
        wavelet.output().contains("may not write any more") || pod_replacements(f).len() == 4
    });
    let sent = pod_replacements(&fake).len();
    assert!(
        sent < 4,
        "{sent} evictions sent, the last ones without the Lease:\n{}",
        wavelet.output()
    );
    fake.heal();
    batch_finished_once(&fake, &wavelet);
}

/// The API server's limit on the values of a ConfigMap (`ValidateConfigMap`).
const CONFIGMAP_LIMIT: usize = 1 << 20;

/// Fills `wavelet-state` with entries of objects that are gone (preview namespaces, each
/// left with a replacement of 14 Pods in progress) until their values take `values` bytes.
fn seed_state(fake: &FakeApi, values: usize) {
    let pods: Vec<String> = (0..14)
        .map(|p| format!("00000000-0000-0000-0000-{p:012}"))
        .collect();
    let entry = format!(
        "{} replacing since=2026-01-01T00:00:00Z pods={}",
        "ab".repeat(32),
        pods.join(",")
    );
    let mut data = serde_json::Map::new();
    let mut total = 0;
    while total + entry.len() <= values {
        data.insert(
            format!("configmap.preview-{:05}.app-config", data.len()),
            json!(entry),
        );
        total += entry.len();
    }
    if total < values {
        data.insert(
            "configmap.preview-pad.app-config".into(),
            json!("x".repeat(values - total)),
        );
    }
    fake.apply(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "wavelet-state", "namespace": STATE_NS},
        "data": data,
    }));
}

/// Keys and values of `wavelet-state`'s data, in bytes.
fn state_bytes(fake: &FakeApi) -> usize {
    let state = fake.get("configmaps", STATE_NS, "wavelet-state").unwrap();
    state["data"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| k.len() + v.as_str().unwrap().len())
        .sum()
}

/// Regression (issue 26, item 5): `wavelet-state` kept the entries of deleted objects and
/// every write PUT the whole map, so it grew until the API server refused it (422: the
/// values of a ConfigMap are at most 1 MiB) and delete mode replaced no Pods anywhere any
/// more. Here the state is pre-seeded with entries of gone objects to 80 bytes below the
/// limit: the first sight of `web-config` still fits, the replacement's entry does not.
/// Now entries of objects gone for `--resync` are pruned from the next write, and the
/// state warns (Event, metric) long before it is full.
#[test]
fn a_state_near_the_size_limit_is_pruned_of_gone_objects_and_warns_before_it_is_full() {
    let fake = cluster(&[(MATCH, "app=web")]);
    seed_state(&fake, CONFIGMAP_LIMIT - 80);
    let wavelet = started(&fake, &["--resync", "3s"], "configmap.shop.web-config");
    let before = pods(&fake, NS, "web");
    change_and_wait(&fake, &wavelet, "green");
    let expected: BTreeMap<String, usize> = before.iter().map(|p| (p.clone(), 1)).collect();
    assert_eq!(replaced_in(&fake, NS), expected, "{}", wavelet.output());
    let state = fake.get("configmaps", STATE_NS, "wavelet-state").unwrap();
    let left: Vec<&String> = state["data"].as_object().unwrap().keys().collect();
    assert!(
        left.iter().all(|k| !k.contains("preview-")),
        "entries of gone objects kept: {} of them",
        left.len()
    );
    // Warned while it was nearly full, on the object whose write found it so.
    eventually(&fake, &wavelet, "a StateNearlyFull Warning", |f| {
        !events(f, "web-config", "StateNearlyFull").is_empty()
    });
    let warning = &events(&fake, "web-config", "StateNearlyFull")[0];
    assert_eq!(warning["type"], "Warning");
    let message = warning["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("{STATE_NS}/wavelet-state")) && message.contains("1048576"),
        "{message}"
    );
    // The metric follows the state as last written.
    let bytes = state_bytes(&fake);
    assert!(bytes < CONFIGMAP_LIMIT / 10, "{bytes}");
    wait_for_metric(&wavelet, "wavelet_state_bytes", "", |v| v == bytes as f64);
}

/// Regression (issue 26, item 5): a "replacing" entry listed the UID of every matching Pod,
/// so one replacement of ~28,000 Pods took 1 MiB by itself: here 30,000, whose write the
/// API server refused, and no Pod was replaced. Now the entry lists only the Pods whose creationTimestamp cannot tell
/// a resumed replacement that they came before the change, and at most 1,000 of them.
/// The fake hands out creationTimestamps a second apart, so these Pods run hours ahead of
/// wavelet's clock and none can be told by its timestamp: the cap is what holds. A
/// PodDisruptionBudget keeps the replacement in progress, so the entry says "replacing".
#[test]
fn one_replacement_of_30000_pods_keeps_its_state_entry_bounded() {
    let fake = cluster(&[]);
    fake.apply_all(
        (0..30_000).map(|i| bare_pod(NS, &format!("fleet-{i:05}"), json!({"app": "fleet"}))),
    );
    fake.apply(json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "fleet", "namespace": NS},
        "spec": {"minAvailable": 30_000, "selector": {"matchLabels": {"app": "fleet"}}},
        "status": {"disruptionsAllowed": 0, "currentHealthy": 30_000, "desiredHealthy": 30_000, "expectedPods": 30_000},
    }));
    fake.apply(annotated(
        configmap(NS, "fleet-config", &[("n", "1")]),
        &[(MATCH, "app=fleet")],
    ));
    let wavelet = started(&fake, &[], "configmap.shop.fleet-config");
    fake.merge_patch(
        "configmaps",
        NS,
        "fleet-config",
        json!({"data": {"n": "2"}}),
    );
    // Listing 30,000 Pods (60 pages) takes a debug build a while on a loaded machine.
    assert!(
        fake.wait_until(Duration::from_secs(60), |f| !pod_replacements(f).is_empty()),
        "no eviction sent:\n{}",
        wavelet.output()
    );
    let entry = state_entry(&fake, "configmap.shop.fleet-config").unwrap();
    assert!(entry.contains(" replacing since="), "{entry:.300}");
    let uids = entry.split("pods=").nth(1).unwrap().split(',').count();
    assert_eq!(uids, 1000, "{} bytes", entry.len());
    assert!(entry.len() < 40_000, "{} bytes", entry.len());
    assert!(
        wavelet
            .output()
            .contains("of the Pods listed now were created in this second or later"),
        "{}",
        wavelet.output()
    );
}

/// Pruning (issue 26, item 5) forgets only what no longer exists: with `--resync 1s`, the
/// entry of a deleted annotated ConfigMap leaves the state with a write a second later,
/// while the entry of one that exists stays through every write, so its next data change
/// still replaces its Pods (a pruned entry would make it a first sight: nothing replaced).
#[test]
fn pruning_drops_the_entries_of_deleted_objects_and_keeps_those_of_existing_ones() {
    let fake = cluster(&[(MATCH, "app=web")]);
    fake.apply(annotated(
        configmap(NS, "api-config", &[("v", "1")]),
        &[(MATCH, "app=api")],
    ));
    fake.apply(annotated(
        configmap(NS, "old-config", &[("v", "1")]),
        &[(MATCH, "app=old")],
    ));
    let wavelet = started(&fake, &["--resync", "1s"], "configmap.shop.web-config");
    eventually(&fake, &wavelet, "all three recorded", |f| {
        ["web-config", "api-config", "old-config"]
            .iter()
            .all(|n| state_entry(f, &format!("configmap.shop.{n}")).is_some())
    });
    fake.delete("configmaps", NS, "old-config");
    // Writes (replacements for web-config) until one comes a resync after another.
    for n in 0.. {
        change_and_wait(&fake, &wavelet, &format!("color-{n}"));
        if state_entry(&fake, "configmap.shop.old-config").is_none() {
            break;
        }
        assert!(n < 10, "never pruned:\n{}", wavelet.output());
        std::thread::sleep(Duration::from_millis(600));
    }
    assert!(
        wavelet
            .output()
            .contains("dropping 1 entries of objects gone"),
        "{}",
        wavelet.output()
    );
    // api-config's entry went through all those writes; its change is acted on.
    let api_before = pods(&fake, NS, "api");
    fake.merge_patch("configmaps", NS, "api-config", json!({"data": {"v": "2"}}));
    let hash = data_hash_now(&fake, "configmaps", NS, "api-config");
    eventually(&fake, &wavelet, "api-config's change acted on", |f| {
        state_entry(f, "configmap.shop.api-config").as_deref() == Some(hash.as_str())
    });
    let replaced = replaced_in(&fake, NS);
    for pod in &api_before {
        assert_eq!(replaced.get(pod), Some(&1), "{pod}: {replaced:?}");
    }
}

/// A standby whose ConfigMap watch went silent becomes leader after the leader replaced
/// Pods for a change: its cache still holds the data from before the change, which differs
/// from the hash `wavelet-state` recorded. That difference is the cache's lag, not a
/// change: the new leader replaces nothing (the API server holds the recorded data), and
/// nothing when its watch catches up either. (The chaos soak found this: a new leader
/// replaced Pods no change owed, for an older hash than the one recorded.)
#[test]
fn a_new_leader_whose_cache_is_behind_the_recorded_change_replaces_nothing() {
    let fake = cluster(&[(MATCH, "app=web")]);
    // The standby's first list is then a LIST, and its watch the request that stalls.
    fake.disable_watch_list();
    let a = started(&fake, ELECT, "configmap.shop.web-config");
    let b = standby_with_stalled_configmaps(&fake, &args(ELECT));

    change_and_wait(&fake, &a, "green");
    let replaced = replaced_in(&fake, NS);
    assert_eq!(replaced.len(), 3, "{}", a.output());
    let mark = b.log_mark();
    hand_over(a, &b);
    // The new leader reconciles the object from its cache (blue) against the record (green).
    wait_for_outcome(&b, mark, "configmap shop/web-config", "");
    assert_eq!(replaced_in(&fake, NS), replaced, "{}", b.output());

    // The watch goes on and brings green: what was recorded, nothing to do.
    let mark = b.log_mark();
    fake.heal();
    wait_for_outcome(&b, mark, "configmap shop/web-config", "UpToDate");
    assert_eq!(replaced_in(&fake, NS), replaced, "{}", b.output());

    // A change now is acted on once.
    change_and_wait(&fake, &b, "red");
    assert_eq!(replaced_in(&fake, NS).len(), 6, "{}", b.output());
}
