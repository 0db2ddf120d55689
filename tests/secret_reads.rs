//! Secrets are watched whole, except Helm's release records, watched as metadata; a Secret
//! is kept only when a workload references it or it carries a delete-mode selector. A
//! change of a Secret in use arrives with its data (no read between it and the rollout);
//! what is read with one GET each: a Secret first used after its watch dropped it, a Helm
//! release record in use (after each new version), one that no list returned.

use std::time::Duration;

use serde_json::json;

use crate::fake::{FakeApi, Request};
use crate::util::*;

const NS: &str = "default";
const HASH: &str = "wavelet.dev/config-hash";

fn uses_secret(name: &str) -> serde_json::Value {
    json!({"containers": [{"name": "app", "image": "nginx", "envFrom": [{"secretRef": {"name": name}}]}]})
}

/// A Helm release record (nothing references one): 256 KiB of data.
fn helm_release(name: &str) -> serde_json::Value {
    let mut value = secret(NS, name, &[("release", &"h".repeat(192 * 1024))]);
    value["metadata"]["labels"] = json!({"owner": "helm"});
    value["type"] = json!("helm.sh/release.v1");
    value
}

/// The field selectors of the two watches of Secrets: whole, and Helm's release records as
/// metadata.
const NOT_HELM: &str = "type!=helm.sh/release.v1";
const HELM: &str = "type=helm.sh/release.v1";

/// Sets one key of Secret `name` to `value` (base64-encoded as the API stores it).
fn set_secret_value(fake: &FakeApi, name: &str, key: &str, value: &str) {
    let encoded = wavelet::objects::base64::encode(value.as_bytes());
    fake.merge_patch("secrets", NS, name, json!({"data": {key: encoded}}));
}

/// GETs of one Secret (not lists, not watches) that wavelet sent.
fn secret_reads(fake: &FakeApi, name: &str) -> usize {
    let path = format!("/api/v1/namespaces/{NS}/secrets/{name}");
    fake.requests()
        .iter()
        .filter(|r| r.method == "GET" && r.path == path)
        .count()
}

/// Where a Deployment carries its hash: on the pod template after a rollout, on the
/// metadata after adoption.
enum Place {
    Template,
    Metadata,
}

/// Deployment `name` carries the hash of its current configuration at `place`.
fn assert_current_hash(fake: &FakeApi, name: &str, place: Place) {
    let (template, metadata) = hashes(fake, "deployments", NS, name, HASH);
    let carried = match place {
        Place::Template => template,
        Place::Metadata => metadata,
    };
    let current = expected_hash(fake, "deployments", NS, name);
    assert_eq!(
        carried.as_deref(),
        Some(current.as_str()),
        "deployment {name}"
    );
}

fn secret_collection_requests(fake: &FakeApi) -> Vec<Request> {
    fake.requests()
        .into_iter()
        .filter(|r| r.method == "GET" && r.path.ends_with("/secrets"))
        .collect()
}

fn start_with_referenced_secret() -> (FakeApi, Wavelet) {
    let fake = FakeApi::start();
    add_barrier(&fake, "secrets", NS);
    fake.apply(secret(NS, "creds", &[("password", "hunter2")]));
    fake.apply(helm_release("sh.helm.release.v1.db.v1"));
    fake.apply(secret(NS, "unused", &[("token", "abc")]));
    fake.apply(workload(
        "Deployment",
        NS,
        "web",
        opted_in(),
        uses_secret("creds"),
    ));
    let wavelet = Wavelet::start(&fake, &fast_one_worker());
    eventually(&fake, &wavelet, "adoption", |f| {
        hashes(f, "deployments", NS, "web", HASH).1.is_some()
    });
    (fake, wavelet)
}

/// A Helm release record that a Deployment uses (odd, but nothing forbids it): the Secrets
/// in use whose new versions are read with a GET, their watch being of metadata.
const RECORD: &str = "sh.helm.release.v1.db.v1";

fn start_with_record_in_use(args: &[&str]) -> (FakeApi, Wavelet) {
    start_using(helm_release(RECORD), args)
}

/// wavelet started with `args` on Deployment `web`, which uses Secret `used`.
fn start_using(used: serde_json::Value, args: &[&str]) -> (FakeApi, Wavelet) {
    let fake = FakeApi::start();
    let name = used["metadata"]["name"].as_str().unwrap().to_string();
    fake.apply(used);
    fake.apply(workload(
        "Deployment",
        NS,
        "web",
        opted_in(),
        uses_secret(&name),
    ));
    let wavelet = Wavelet::start(&fake, args);
    eventually(&fake, &wavelet, "adoption", |f| {
        hashes(f, "deployments", NS, "web", HASH).1.is_some()
    });
    (fake, wavelet)
}

/// The requests for the collection of Secrets, by field selector: (whole, records).
fn secret_watches(fake: &FakeApi) -> (usize, usize) {
    let collection = secret_collection_requests(fake);
    let (mut whole, mut records) = (0, 0);
    for request in &collection {
        let accept = request.header("accept").unwrap_or_default();
        match request.query_param("fieldSelector") {
            Some(NOT_HELM) => {
                assert!(!accept.contains("PartialObjectMetadata"), "{accept:?}");
                whole += 1;
            }
            Some(HELM) => {
                assert!(accept.contains("as=PartialObjectMetadata"), "{accept:?}");
                records += 1;
            }
            other => panic!(
                "a request for Secrets outside the two watches: {} {other:?}",
                request.path
            ),
        }
    }
    (whole, records)
}

#[test]
fn secrets_are_watched_whole_and_helm_release_records_not_while_none_is_in_use() {
    let (fake, _wavelet) = start_with_referenced_secret();
    let (whole, records) = secret_watches(&fake);
    assert!(whole >= 1, "the watch of whole Secrets");
    assert_eq!(
        records, 0,
        "no watch of Helm's release records: none is in use"
    );
    // No GET of any Secret at start: the watch brought creds and the barrier whole.
    for name in ["creds", "barrier", "sh.helm.release.v1.db.v1", "unused"] {
        assert_eq!(secret_reads(&fake, name), 0, "{name}");
    }
    // The adopted hash is over the Secret's data all the same.
    assert_current_hash(&fake, "web", Place::Metadata);
}

/// Issue 31 item 6: a thousand Secrets in use were a thousand GETs at start (50 s at the
/// default budget). Now a few LISTs; only a Secret in use that the LISTs leave out (a Helm
/// release record, one that does not exist) is read on its own.
#[test]
fn the_initial_sync_sends_no_get_per_secret_in_use_but_for_those_the_lists_leave_out() {
    const USED: usize = 40;
    let fake = FakeApi::start();
    fake.apply_all((0..USED).map(|n| secret(NS, &format!("creds-{n}"), &[("password", "p")])));
    fake.apply_all((0..USED).map(|n| {
        workload(
            "StatefulSet",
            NS,
            &format!("web-{n}"),
            opted_in(),
            uses_secret(&format!("creds-{n}")),
        )
    }));
    fake.apply(helm_release("sh.helm.release.v1.db.v1"));
    fake.apply(workload(
        "StatefulSet",
        NS,
        "odd",
        opted_in(),
        json!({"containers": [{"name": "app", "image": "nginx", "envFrom": [
            {"secretRef": {"name": "sh.helm.release.v1.db.v1"}},
            {"secretRef": {"name": "missing", "optional": true}}]}]}),
    ));
    let wavelet = Wavelet::start(&fake, FAST);
    wait_all_adopted(&fake, &wavelet);
    let gets: Vec<String> = fake
        .requests()
        .iter()
        .filter(|r| r.method == "GET" && r.path.contains("/secrets/"))
        .map(|r| r.path.clone())
        .collect();
    let left_out = |p: &String| p.ends_with("/missing") || p.ends_with("/sh.helm.release.v1.db.v1");
    assert!(
        gets.iter().all(left_out) && gets.iter().any(|p| p.ends_with("db.v1")),
        "only the Secrets the LISTs left out are read one by one: {gets:?}"
    );
    for n in [0, USED - 1] {
        let name = format!("web-{n}");
        let (_, adopted) = hashes(&fake, "statefulsets", NS, &name, HASH);
        assert_eq!(
            adopted,
            Some(expected_hash(&fake, "statefulsets", NS, &name)),
            "{name}"
        );
    }
    let (_, odd) = hashes(&fake, "statefulsets", NS, "odd", HASH);
    assert_eq!(odd, Some(expected_hash(&fake, "statefulsets", NS, "odd")));
}

#[test]
fn a_data_edit_of_a_referenced_secret_rolls_once_without_a_read() {
    let (fake, wavelet) = start_with_referenced_secret();
    let before = fake.request_count();
    set_secret_value(&fake, "creds", "password", "correct horse");
    eventually(&fake, &wavelet, "rollout", |f| {
        f.revisions("deployments", NS, "web") == 2
    });
    barrier_change(&fake, &wavelet, "secrets", NS);
    let after: Vec<String> = fake
        .requests_since(before)
        .iter()
        .filter(|r| r.query_param("watch").is_none() && !r.path.ends_with("/secrets/barrier"))
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    let reads = after
        .iter()
        .filter(|r| r.starts_with("GET") && r.contains("/secrets"))
        .count();
    assert_eq!(reads, 0, "the change came whole on the watch: {after:?}");
    assert_eq!(template_patches(&fake, "deployments", NS, "web"), 1);
    assert_current_hash(&fake, "web", Place::Template);
}

#[test]
fn a_label_edit_of_a_referenced_secret_rolls_nothing() {
    let (fake, wavelet) = start_with_referenced_secret();
    fake.merge_patch(
        "secrets",
        NS,
        "creds",
        json!({"metadata": {"labels": {"rotated-by": "vault"}}}),
    );
    // The barrier's change comes after the edit on the same watch.
    barrier_change(&fake, &wavelet, "secrets", NS);
    assert_eq!(secret_reads(&fake, "creds"), 0);
    assert_eq!(template_patches(&fake, "deployments", NS, "web"), 0);
    assert_eq!(fake.revisions("deployments", NS, "web"), 1);
}

#[test]
fn edits_of_secrets_nothing_references_are_never_read() {
    let (fake, wavelet) = start_with_referenced_secret();
    for round in 0..3 {
        set_secret_value(
            &fake,
            "sh.helm.release.v1.db.v1",
            "release",
            &format!("v{round}"),
        );
        set_secret_value(&fake, "unused", "token", &format!("t{round}"));
    }
    barrier_change(&fake, &wavelet, "secrets", NS);
    assert_eq!(secret_reads(&fake, "sh.helm.release.v1.db.v1"), 0);
    assert_eq!(secret_reads(&fake, "unused"), 0);
    assert_eq!(template_patches(&fake, "deployments", NS, "web"), 0);
}

#[test]
fn a_secret_first_referenced_after_the_sync_is_read_then_and_hashed() {
    let (fake, wavelet) = start_with_referenced_secret();
    assert_eq!(secret_reads(&fake, "unused"), 0);
    fake.apply(workload(
        "Deployment",
        NS,
        "api",
        opted_in(),
        uses_secret("unused"),
    ));
    eventually(&fake, &wavelet, "adoption of the new workload", |f| {
        hashes(f, "deployments", NS, "api", HASH).1.is_some()
    });
    assert_eq!(secret_reads(&fake, "unused"), 1);
    assert_current_hash(&fake, "api", Place::Metadata);

    // From now on its edits roll the new workload.
    set_secret_value(&fake, "unused", "token", "new");
    eventually(&fake, &wavelet, "rollout of the new workload", |f| {
        f.revisions("deployments", NS, "api") == 2
    });
}

#[test]
fn a_deleted_and_recreated_referenced_secret_is_read_again_and_rolls() {
    let (fake, wavelet) = start_with_referenced_secret();
    let mark = wavelet.log_mark();
    fake.delete("secrets", NS, "creds");
    // The deletion seen and reconciled (web holds: its Secret is missing) before the
    // re-creation, so the re-created Secret is a new object to read, not a relisted one.
    wavelet.wait_for_log_after(mark, "deployment default/web", "MissingConfig");
    fake.apply(secret(NS, "creds", &[("password", "recreated")]));
    eventually(&fake, &wavelet, "rollout after the re-creation", |f| {
        f.revisions("deployments", NS, "web") == 2
    });
    barrier_change(&fake, &wavelet, "secrets", NS);
    assert_eq!(fake.revisions("deployments", NS, "web"), 2);
    assert_current_hash(&fake, "web", Place::Template);
}

#[test]
fn a_record_whose_reads_keep_failing_is_retried_at_least_once_per_resync_period() {
    let mut args = FAST.to_vec();
    args.extend(["--resync", "1s"]);
    let (fake, wavelet) = start_with_record_in_use(&args);
    // Six failures in a row: backing off 0.5 s, 1 s, 2 s, ... would wait half a minute;
    // capped at the 1 s resync it is a few seconds.
    fake.inject(crate::fake::Fault::Status {
        method: "GET_OBJECT".into(),
        resource: "secrets".into(),
        code: 503,
        retry_after_secs: None,
        times: 6,
        plain_text: false,
    });
    let changed = std::time::Instant::now();
    set_secret_value(&fake, RECORD, "release", "rotated");
    assert!(
        fake.wait_until(Duration::from_secs(15), |f| f.revisions(
            "deployments",
            NS,
            "web"
        ) == 2),
        "no rollout {:?} after the change:\n{}",
        changed.elapsed(),
        wavelet.output()
    );
    assert!(
        wavelet.output().contains("cannot read its data, retrying"),
        "the failures were seen:\n{}",
        wavelet.output()
    );
}

#[test]
fn secrets_nothing_uses_are_not_kept() {
    let (_fake, wavelet) = start_with_referenced_secret();
    // Of the Secrets (creds, a Helm release, unused, the barrier), only the two that
    // Deployments reference (creds by web, the barrier by its own Deployment); and the one
    // ConfigMap, wavelet's own state (created at start), which the watch of ConfigMaps
    // holds like any ConfigMap.
    assert_eq!(
        metric(&wavelet, "wavelet_cache_objects", r#"kind="config""#),
        3.0
    );
}

#[test]
fn a_referenced_secret_read_while_the_secrets_are_still_listed_is_not_taken_for_gone() {
    // The Secret is in the first page of the list, before its workload is known, so it is
    // not kept; the workload arrives, the Secret is read; then the list ends. What the list
    // returned still exists, kept or not.
    let fake = FakeApi::start();
    fake.apply(secret(NS, "aaa-creds", &[("password", "hunter2")]));
    for n in 0..600 {
        fake.apply(secret(NS, &format!("filler-{n:03}"), &[("k", "v")]));
    }
    fake.apply(workload(
        "Deployment",
        NS,
        "web",
        opted_in(),
        uses_secret("aaa-creds"),
    ));
    for (resource, delay) in [
        ("deployments", Duration::from_millis(400)),
        ("secrets", Duration::ZERO),
        ("secrets", Duration::from_millis(1500)),
    ] {
        // (`Slow` matches by method: the list of deployments, then the first and the
        // second page of secrets, requested before the deployments arrive.)
        fake.inject(crate::fake::Fault::Slow {
            method: "GET".into(),
            resource: resource.into(),
            delay,
        });
    }
    let wavelet = Wavelet::start(&fake, &fast_one_worker());
    eventually(&fake, &wavelet, "adoption", |f| {
        hashes(f, "deployments", NS, "web", HASH).1.is_some()
    });
    assert!(
        !wavelet.output().contains("does not exist"),
        "{}",
        wavelet.output()
    );
    // Read by the initial sync's LIST of whole Secrets, not by a GET of its own.
    assert_eq!(secret_reads(&fake, "aaa-creds"), 0);
}

#[test]
fn a_reload_list_added_after_the_sync_counts_the_unused_secrets_it_names() {
    let (fake, wavelet) = start_with_referenced_secret();
    // `unused` was listed before anything named it, so it is not kept; the new pattern
    // lists the namespace's Secrets and counts it from the adoption on.
    fake.apply(workload(
        "Deployment",
        NS,
        "api",
        json!({"secret.reloader.stakater.com/reload": "unus.*"}),
        json!({"containers": [{"name": "app", "image": "nginx"}]}),
    ));
    eventually(&fake, &wavelet, "adoption of the new workload", |f| {
        hashes(f, "deployments", NS, "api", HASH).1.is_some()
    });
    // Counted since the adoption: a label edit is no change of what counts...
    fake.merge_patch(
        "secrets",
        NS,
        "unused",
        json!({"metadata": {"labels": {"edited": "yes"}}}),
    );
    barrier_change(&fake, &wavelet, "secrets", NS);
    assert_eq!(fake.revisions("deployments", NS, "api"), 1);
    // ...and a data edit rolls.
    set_secret_value(&fake, "unused", "token", "new");
    eventually(
        &fake,
        &wavelet,
        "a rollout for the named Secret's change",
        |f| f.revisions("deployments", NS, "api") == 2,
    );
}

/// Issue 26, item 6. The record of Secrets known to be absent shrank only when a Secret
/// came back: a namespace deleted with its Secrets before its workloads (as namespace
/// deletion goes) left one record per Secret for good. A record lives as long as some
/// workload references the Secret, by name or by a reload-list pattern.
#[test]
fn secrets_known_absent_are_forgotten_with_the_workloads_that_reference_them() {
    const CHURNED: usize = 40;
    let absent = |w: &Wavelet| metric(w, "wavelet_cache_objects", r#"kind="absent_secret""#);
    let cached = |w: &Wavelet| {
        (
            metric(w, "wavelet_cache_objects", r#"kind="config""#),
            metric(w, "wavelet_cache_objects", r#"kind="workload""#),
        )
    };
    let fake = FakeApi::start();
    // What stays: a workload whose Secret is missing keeps its record.
    fake.apply(workload(
        "Deployment",
        NS,
        "steady",
        opted_in(),
        uses_secret("never-created"),
    ));
    let wavelet = Wavelet::start(&fake, FAST);
    wait_for_metric(
        &wavelet,
        "wavelet_cache_objects",
        r#"kind="absent_secret""#,
        |n| n == 1.0,
    );
    let baseline = (cached(&wavelet), absent(&wavelet));

    let namespaces: Vec<String> = (0..CHURNED).map(|n| format!("preview-{n}")).collect();
    for ns in &namespaces {
        fake.apply(secret(ns, "creds", &[("password", "a")]));
        fake.apply(secret(ns, "db-main", &[("password", "b")]));
        fake.apply(workload(
            "Deployment",
            ns,
            "web",
            opted_in(),
            uses_secret("creds"),
        ));
        fake.apply(workload(
            "Deployment",
            ns,
            "api",
            json!({"secret.reloader.stakater.com/reload": "db-.*"}),
            json!({"containers": [{"name": "app", "image": "nginx"}]}),
        ));
    }
    eventually(&fake, &wavelet, "every preview workload adopted", |f| {
        namespaces.iter().all(|ns| {
            hashes(f, "deployments", ns, "web", HASH).1.is_some()
                && hashes(f, "deployments", ns, "api", HASH).1.is_some()
        })
    });
    // The Secrets go first, while their workloads still reference them: recorded absent.
    for ns in &namespaces {
        fake.delete("secrets", ns, "creds");
        fake.delete("secrets", ns, "db-main");
    }
    wait_for_metric(
        &wavelet,
        "wavelet_cache_objects",
        r#"kind="absent_secret""#,
        |n| n == baseline.1 + 2.0 * CHURNED as f64,
    );
    // Then the namespaces, with their workloads.
    for ns in &namespaces {
        fake.delete("namespaces", "", ns);
    }
    eventually(&fake, &wavelet, "the cache back to its baseline", |_| {
        cached(&wavelet) == baseline.0
    });
    assert_eq!(
        absent(&wavelet),
        baseline.1,
        "records of absent Secrets nothing references any more are kept"
    );
}

/// wavelet's GETs of Secret `name`, with the resourceVersion each asked for (`None`: a
/// quorum read) and the status it got.
fn secret_gets(fake: &FakeApi, name: &str, since: usize) -> Vec<(Option<String>, Request)> {
    let path = format!("/api/v1/namespaces/{NS}/secrets/{name}");
    fake.requests_since(since)
        .into_iter()
        .filter(|r| r.method == "GET" && r.path == path)
        .map(|r| (r.query_param("resourceVersion").map(str::to_string), r))
        .collect()
}

#[test]
fn a_changed_record_in_use_is_read_at_the_version_its_watch_announced_from_the_servers_cache() {
    let (fake, wavelet) = start_with_record_in_use(&fast_one_worker());
    // Found in use at start (read with a GET): the records are watched, as metadata.
    eventually(&fake, &wavelet, "the watch of the records", |f| {
        secret_watches(f).1 >= 1
    });
    let before = fake.request_count();
    set_secret_value(&fake, RECORD, "release", "correct horse");
    let announced = fake.get("secrets", NS, RECORD).unwrap()["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    eventually(&fake, &wavelet, "rollout", |f| {
        f.revisions("deployments", NS, "web") == 2
    });
    let asked: Vec<Option<String>> = secret_gets(&fake, RECORD, before)
        .into_iter()
        .map(|(rv, _)| rv)
        .collect();
    assert_eq!(
        asked,
        vec![Some(announced)],
        "one GET, not older than the version the watch announced (served from the watch \
         cache, not a quorum read)"
    );
    assert_current_hash(&fake, "web", Place::Template);
}

#[test]
fn a_record_read_from_a_replica_whose_cache_is_behind_is_read_again_from_etcd_at_once() {
    let (fake, wavelet) = start_with_record_in_use(&fast_one_worker());
    let before = fake.request_count();
    fake.inject(crate::fake::Fault::CacheBehind {
        resource: "secrets".into(),
    });
    set_secret_value(&fake, RECORD, "release", "correct horse");
    eventually(&fake, &wavelet, "rollout", |f| {
        f.revisions("deployments", NS, "web") == 2
    });
    assert_eq!(fake.pending_faults(), 0, "the 504 was served");
    let gets = secret_gets(&fake, RECORD, before);
    let asked: Vec<bool> = gets.iter().map(|(rv, _)| rv.is_some()).collect();
    assert_eq!(
        asked,
        vec![true, false],
        "a GET at the announced version (504: the cache is behind), then a quorum read"
    );
    // Read again at once, not after the failed-read backoff (0.5 s at least).
    let gap = gets[1].1.received - gets[0].1.received;
    assert!(gap < Duration::from_millis(400), "read again after {gap:?}");
    assert!(
        !wavelet.output().contains("cannot read its data"),
        "no failed read reported:\n{}",
        wavelet.output()
    );
    assert_current_hash(&fake, "web", Place::Template);
}

/// The two watches of Secrets each forget, at a relist, only what they would have listed: a
/// Helm release record in use, which the watch of whole Secrets never lists, is not taken
/// for gone by it (its dependents would see it missing, and roll when it came back).
#[test]
fn a_record_in_use_is_not_taken_for_gone_by_the_relists_of_the_other_secrets() {
    let mut args = fast_one_worker();
    args.extend(["--resync", "1s"]);
    let (fake, wavelet) = start_with_record_in_use(&args);
    eventually(&fake, &wavelet, "several relists of both watches", |_| {
        metric(
            &wavelet,
            "wavelet_watch_relists_total",
            r#"resource="secrets",reason="resync""#,
        ) >= 6.0
    });
    let output = wavelet.output();
    assert!(
        !output.contains("gone after relist") && !output.contains("MissingConfig"),
        "{output}"
    );
    assert_eq!(fake.revisions("deployments", NS, "web"), 1);
    // And a change of it still rolls.
    set_secret_value(&fake, RECORD, "release", "v2");
    eventually(&fake, &wavelet, "rollout", |f| {
        f.revisions("deployments", NS, "web") == 2
    });
}

/// A Secret in use deleted while its watch was not looking is found gone by the relist of
/// the whole Secrets (the other watch's relist does not forget it: it is not a record).
#[test]
fn a_secret_deleted_unseen_is_found_gone_by_the_relist_of_the_whole_secrets() {
    let mut args = fast_one_worker();
    args.extend(["--resync", "1s"]);
    let (fake, wavelet) = start_using(secret(NS, "creds", &[("password", "hunter2")]), &args);
    fake.inject(crate::fake::Fault::DropEvent {
        resource: "secrets".into(),
        needle: "DELETED".into(),
    });
    let mark = wavelet.log_mark();
    fake.delete("secrets", NS, "creds");
    eventually(&fake, &wavelet, "the deletion's event dropped", |f| {
        f.pending_faults() == 0
    });
    fake.bookmark();
    wavelet.wait_for_log_after(mark, "deployment default/web", "MissingConfig");
}
