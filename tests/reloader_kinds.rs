//! Reloader's workload kinds and flags, through the binary against the fake API server:
//! CronJobs (hash on the job template; one Job now for Reloader's opt-in unless
//! suspended), Argo Rollouts watched when the API serves them (and their restart
//! strategy), `--namespaces-to-ignore`, `--namespace-selector`,
//! `--resource-label-selector`, `--ignored-workload-types`, and the Reloader flags wavelet
//! refuses. "Nothing happened" is asserted only after a later change that must be acted
//! on has been.

use serde_json::{json, Value};

use crate::fake::FakeApi;
use crate::util::*;

const NS: &str = "default";
const HASH: &str = "wavelet.dev/config-hash";

/// A CronJob whose job template mounts ConfigMap `config`.
fn cronjob(ns: &str, name: &str, annotations: Value, suspend: bool) -> Value {
    json!({
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": name, "namespace": ns, "annotations": annotations},
        "spec": {
            "schedule": "0 3 * * *",
            "suspend": suspend,
            "jobTemplate": {
                "metadata": {"labels": {"job": name}},
                "spec": {"backoffLimit": 1, "template": {
                    "metadata": {"labels": {"job": name}},
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "task", "image": "busybox",
                            "envFrom": [{"configMapRef": {"name": "config"}}]}]
                    }
                }}
            }
        }
    })
}

/// The hash on a CronJob's job template and on its metadata.
fn cronjob_hashes(fake: &FakeApi, name: &str) -> (Option<String>, Option<String>) {
    let obj = fake.get("cronjobs", NS, name).expect("cronjob exists");
    let text = |v: &Value| v.as_str().map(String::from);
    (
        text(&obj["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["annotations"][HASH]),
        text(&obj["metadata"]["annotations"][HASH]),
    )
}

fn reloader_and_wavelet_opt_in() -> Value {
    json!({"reloader.stakater.com/auto": "true", "wavelet.dev/update-on-config-change": "true"})
}

fn jobs(fake: &FakeApi) -> Vec<Value> {
    fake.list("jobs", Some(NS))
}

/// A Deployment `marker` mounting ConfigMap `marker-config`: its rollout is the positive
/// signal that wavelet has processed everything changed before it.
fn with_marker(fake: &FakeApi, ns: &str) {
    fake.apply(configmap(ns, "marker-config", &[("v", "1")]));
    fake.apply(workload(
        "Deployment",
        ns,
        "marker",
        opted_in(),
        mounts_configmap("marker-config"),
    ));
}

fn roll_marker(fake: &FakeApi, wavelet: &Wavelet, ns: &str) {
    eventually(fake, wavelet, "marker adopted", |f| {
        hashes(f, "deployments", ns, "marker", HASH).1.is_some()
    });
    fake.merge_patch(
        "configmaps",
        ns,
        "marker-config",
        json!({"data": {"v": "2"}}),
    );
    eventually(fake, wavelet, "marker rolled", |f| {
        hashes(f, "deployments", ns, "marker", HASH).0.is_some()
    });
}

#[test]
fn a_cronjob_gets_the_hash_on_its_job_template_and_no_job_without_reloaders_opt_in() {
    let fake = FakeApi::start();
    fake.apply(configmap(NS, "config", &[("k", "1")]));
    fake.apply(cronjob(NS, "backup", opted_in(), false));
    with_marker(&fake, NS);
    let wavelet = Wavelet::start(&fake, FAST);
    eventually(&fake, &wavelet, "adoption on metadata", |f| {
        cronjob_hashes(f, "backup").1.is_some()
    });
    assert_eq!(cronjob_hashes(&fake, "backup").0, None, "adoption rolled");

    fake.merge_patch("configmaps", NS, "config", json!({"data": {"k": "2"}}));
    eventually(&fake, &wavelet, "hash on the job template", |f| {
        cronjob_hashes(f, "backup").0.is_some()
    });
    let (template, metadata) = cronjob_hashes(&fake, "backup");
    assert_eq!(template, metadata);
    assert_eq!(
        template.as_deref(),
        Some(expected_hash(&fake, "cronjobs", NS, "backup").as_str())
    );
    roll_marker(&fake, &wavelet, NS);
    assert!(
        jobs(&fake).is_empty(),
        "a Job was started: {:?}",
        jobs(&fake)
    );
    let patches = fake.patches("cronjobs", NS, "backup");
    assert_eq!(patches.len(), 2, "adoption and one rollout");
    assert_eq!(
        patches[1].header("content-type"),
        Some("application/strategic-merge-patch+json")
    );
}

#[test]
fn a_cronjob_opted_in_through_reloader_starts_one_job_on_a_change_and_none_on_adoption() {
    let fake = FakeApi::start();
    fake.apply(configmap(NS, "config", &[("k", "1")]));
    fake.apply(cronjob(NS, "backup", reloader_and_wavelet_opt_in(), false));
    with_marker(&fake, NS);
    let wavelet = Wavelet::start(&fake, FAST);
    roll_marker(&fake, &wavelet, NS);
    assert!(jobs(&fake).is_empty(), "adoption started a Job");

    fake.merge_patch("configmaps", NS, "config", json!({"data": {"k": "2"}}));
    eventually(&fake, &wavelet, "one Job", |f| jobs(f).len() == 1);
    let job = &jobs(&fake)[0];
    let hash = cronjob_hashes(&fake, "backup").0.expect("template hash");
    assert_eq!(job["metadata"]["name"], format!("backup-{}", &hash[..10]));
    assert_eq!(
        job["metadata"]["annotations"]["cronjob.kubernetes.io/instantiate"],
        "manual"
    );
    let owner = &job["metadata"]["ownerReferences"][0];
    assert_eq!(owner["kind"], "CronJob");
    assert_eq!(owner["name"], "backup");
    assert_eq!(
        owner["uid"],
        fake.get("cronjobs", NS, "backup").unwrap()["metadata"]["uid"]
    );
    assert_eq!(owner["controller"], true);
    assert_eq!(
        job["spec"]["template"]["metadata"]["annotations"][HASH].as_str(),
        Some(hash.as_str()),
        "the Job runs the new configuration"
    );
    assert_eq!(job["metadata"]["labels"]["job"], "backup");
    // One Job for one change: a later marker rollout is processed after it.
    fake.merge_patch(
        "configmaps",
        NS,
        "marker-config",
        json!({"data": {"v": "3"}}),
    );
    eventually(&fake, &wavelet, "marker rolled again", |f| {
        f.revisions("deployments", NS, "marker") == 3
    });
    assert_eq!(jobs(&fake).len(), 1);
    let events = fake.events_for(NS, "backup");
    assert!(
        events.iter().any(|e| e["reason"] == "JobStarted"),
        "{events:?}"
    );
}

#[test]
fn a_suspended_cronjob_gets_the_hash_but_no_job() {
    let fake = FakeApi::start();
    fake.apply(configmap(NS, "config", &[("k", "1")]));
    fake.apply(cronjob(NS, "paused", reloader_and_wavelet_opt_in(), true));
    let wavelet = Wavelet::start(&fake, FAST);
    eventually(&fake, &wavelet, "adoption", |f| {
        cronjob_hashes(f, "paused").1.is_some()
    });
    fake.merge_patch("configmaps", NS, "config", json!({"data": {"k": "2"}}));
    eventually(&fake, &wavelet, "hash on the job template", |f| {
        cronjob_hashes(f, "paused").0.is_some()
    });
    // The Job would be created right after the patch, by the same reconcile: wait for
    // that reconcile's Event, then look.
    eventually(&fake, &wavelet, "ConfigChanged Event", |f| {
        f.events_for(NS, "paused")
            .iter()
            .any(|e| e["reason"] == "ConfigChanged")
    });
    assert!(jobs(&fake).is_empty(), "{:?}", jobs(&fake));
}

#[test]
fn ignored_workload_types_cronjobs_stops_watching_cronjobs() {
    let fake = FakeApi::start();
    fake.apply(configmap(NS, "config", &[("k", "1")]));
    fake.apply(cronjob(NS, "backup", opted_in(), false));
    with_marker(&fake, NS);
    let mut args = FAST.to_vec();
    args.extend(["--ignored-workload-types", "cronjobs,jobs"]);
    let wavelet = Wavelet::start(&fake, &args);
    fake.merge_patch("configmaps", NS, "config", json!({"data": {"k": "2"}}));
    roll_marker(&fake, &wavelet, NS);
    assert!(fake.patches("cronjobs", NS, "backup").is_empty());
    assert!(
        !fake.requests().iter().any(|r| r.path.contains("cronjobs")),
        "cronjobs were listed or watched"
    );
}

/// An Argo Rollout mounting `config`, with these annotations.
fn argo_rollout(name: &str, annotations: Value) -> Value {
    let mut rollout = workload("Deployment", NS, name, annotations, json!({}));
    rollout["apiVersion"] = json!("argoproj.io/v1alpha1");
    rollout["kind"] = json!("Rollout");
    rollout["spec"]["template"]["spec"] = json!({"containers": [{"name": "app", "image": "nginx",
        "env": [{"name": "K", "valueFrom": {"configMapKeyRef": {"name": "config", "key": "k"}}}]}]});
    rollout
}

/// `FAST` with `--is-Argo-Rollouts=true`.
fn with_rollouts() -> Vec<&'static str> {
    let mut args = FAST.to_vec();
    args.push("--is-Argo-Rollouts=true");
    args
}

#[test]
fn argo_rollouts_are_watched_when_the_api_serves_them() {
    let fake = FakeApi::start();
    fake.register_resource("argoproj.io", "v1alpha1", "rollouts", "Rollout");
    fake.apply(configmap(NS, "config", &[("k", "1")]));
    fake.apply(argo_rollout("ro", opted_in()));
    let wavelet = Wavelet::start(&fake, &with_rollouts());
    eventually(&fake, &wavelet, "adoption", |f| {
        hashes(f, "rollouts", NS, "ro", HASH).1.is_some()
    });
    fake.merge_patch("configmaps", NS, "config", json!({"data": {"k": "2"}}));
    eventually(&fake, &wavelet, "template hash", |f| {
        hashes(f, "rollouts", NS, "ro", HASH).0.is_some()
    });
    for patch in fake.patches("rollouts", NS, "ro") {
        assert_eq!(
            patch.header("content-type"),
            Some("application/merge-patch+json")
        );
        assert!(patch.body_json()["spec"]["restartAt"].is_null());
    }
}

/// Reloader's `--is-Argo-Rollouts` is a string flag compared to "true": `1` means false
/// there, so Rollouts are not watched although the API serves them, and that is said; not
/// given, wavelet watches them, and says that Reloader would not.
#[test]
fn is_argo_rollouts_is_true_only_when_exactly_true_and_a_difference_from_reloader_is_said() {
    for (extra, watched, said) in [
        (
            Some("--is-Argo-Rollouts=1"),
            false,
            "--is-Argo-Rollouts=1: not watching Argo Rollouts, as Reloader (Reloader compares this flag to \"true\" exactly",
        ),
        (
            None,
            true,
            "as --is-Argo-Rollouts is not given (wavelet differs from Reloader here: Reloader's default is false",
        ),
    ] {
        let fake = fake_with_web();
        fake.register_resource("argoproj.io", "v1alpha1", "rollouts", "Rollout");
        fake.apply(argo_rollout("ro", opted_in()));
        let mut args = FAST.to_vec();
        args.extend(extra);
        let wavelet = Wavelet::start(&fake, &args);
        eventually(&fake, &wavelet, "adoption", |f| {
            hashes(f, "deployments", NS, "web", HASH).1.is_some()
        });
        let output = wavelet.output();
        let listed = fake
            .requests()
            .iter()
            .any(|r| r.path.contains("/rollouts"));
        assert_eq!(listed, watched, "{extra:?}: rollouts listed\n{output}");
        assert!(output.contains(said), "{extra:?}: {said}\n{output}");
    }
}

#[test]
fn without_argo_rollouts_installed_nothing_asks_for_rollouts_but_discovery() {
    let fake = fake_with_web();
    let wavelet = Wavelet::start(&fake, FAST);
    eventually(&fake, &wavelet, "adoption", |f| {
        hashes(f, "deployments", NS, "web", HASH).1.is_some()
    });
    let asked: Vec<String> = fake
        .requests()
        .iter()
        .filter(|r| r.path.contains("argoproj.io"))
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert_eq!(asked, ["GET /apis/argoproj.io/v1alpha1"]);
}

#[test]
fn the_restart_strategy_sets_restart_at_and_leaves_the_template_alone() {
    let fake = FakeApi::start();
    fake.register_resource("argoproj.io", "v1alpha1", "rollouts", "Rollout");
    fake.apply(configmap(NS, "config", &[("k", "1")]));
    let mut annotations = reloader_and_wavelet_opt_in();
    annotations["reloader.stakater.com/rollout-strategy"] = json!("restart");
    fake.apply(argo_rollout("ro", annotations));
    let wavelet = Wavelet::start(&fake, &with_rollouts());
    eventually(&fake, &wavelet, "adoption", |f| {
        hashes(f, "rollouts", NS, "ro", HASH).1.is_some()
    });
    let adopted = hashes(&fake, "rollouts", NS, "ro", HASH).1;
    fake.merge_patch("configmaps", NS, "config", json!({"data": {"k": "2"}}));
    eventually(&fake, &wavelet, "restartAt set", |f| {
        f.get("rollouts", NS, "ro").unwrap()["spec"]["restartAt"].is_string()
    });
    let (template, metadata) = hashes(&fake, "rollouts", NS, "ro", HASH);
    assert_eq!(template, None, "the template was patched");
    assert_ne!(metadata, adopted);
    assert_eq!(
        metadata.as_deref(),
        Some(expected_hash(&fake, "rollouts", NS, "ro").as_str())
    );
    // Restarted once: a second ConfigChanged needs a second change.
    eventually(&fake, &wavelet, "ConfigChanged Event", |f| {
        f.events_for(NS, "ro")
            .iter()
            .any(|e| e["reason"] == "ConfigChanged")
    });
    assert_eq!(template_patches(&fake, "rollouts", NS, "ro"), 0);
    assert_eq!(fake.patches("rollouts", NS, "ro").len(), 2);
}

#[test]
fn namespaces_to_ignore_are_filtered_by_the_api_server_when_watching_all_namespaces() {
    let fake = FakeApi::start();
    for ns in ["kept", "ignored"] {
        add_web(&fake, ns);
    }
    with_marker(&fake, "kept");
    let mut args = FAST.to_vec();
    args.extend(["--namespaces-to-ignore", "ignored,other"]);
    let wavelet = Wavelet::start(&fake, &args);
    fake.merge_patch(
        "configmaps",
        "ignored",
        "app-config",
        json!({"data": {"color": "green"}}),
    );
    roll_marker(&fake, &wavelet, "kept");
    assert!(
        fake.patches("deployments", "ignored", "web").is_empty(),
        "an ignored namespace was acted on"
    );
    let lists: Vec<_> = fake
        .requests()
        .into_iter()
        .filter(|r| r.path == "/api/v1/configmaps")
        .collect();
    assert!(!lists.is_empty());
    for request in lists {
        assert_eq!(
            request.query_param("fieldSelector"),
            Some("metadata.namespace!=ignored,metadata.namespace!=other")
        );
    }
}

#[test]
fn namespaces_to_ignore_is_subtracted_from_namespaces() {
    let fake = FakeApi::start();
    let mut args = FAST.to_vec();
    args.extend(["--namespaces", "a,b", "--namespaces-to-ignore", "b"]);
    let _wavelet = Wavelet::start(&fake, &args);
    let requests = fake.requests();
    assert!(requests
        .iter()
        .any(|r| r.path == "/api/v1/namespaces/a/configmaps"));
    assert!(!requests.iter().any(|r| r.path.contains("/namespaces/b/")));

    let mut all_ignored = Wavelet::launch(
        &[
            "--server",
            &fake.url(),
            "--namespaces",
            "b",
            "--namespaces-to-ignore",
            "b",
        ],
        &[],
    );
    let status = all_ignored.wait_exit(std::time::Duration::from_secs(10));
    all_ignored.wait_for_output("--namespaces-to-ignore", std::time::Duration::from_secs(5));
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(2),
        "{}",
        all_ignored.output()
    );
    assert!(all_ignored
        .output()
        .contains("every namespace of --namespaces is also in --namespaces-to-ignore"));
}

fn namespace(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}})
}

#[test]
fn namespace_selector_acts_only_in_matching_namespaces_and_picks_up_one_labelled_later() {
    let fake = FakeApi::start();
    fake.apply(namespace("team-a", json!({"team": "a"})));
    fake.apply(namespace("team-b", json!({"team": "b"})));
    for ns in ["team-a", "team-b"] {
        add_web(&fake, ns);
    }
    with_marker(&fake, "team-a");
    let mut args = FAST.to_vec();
    args.extend(["--namespace-selector", "team=a"]);
    let wavelet = Wavelet::start(&fake, &args);
    eventually(&fake, &wavelet, "team-a adopted", |f| {
        hashes(f, "deployments", "team-a", "web", HASH).1.is_some()
    });
    fake.merge_patch(
        "configmaps",
        "team-b",
        "app-config",
        json!({"data": {"color": "green"}}),
    );
    roll_marker(&fake, &wavelet, "team-a");
    assert!(
        fake.patches("deployments", "team-b", "web").is_empty(),
        "a namespace outside the selector was acted on"
    );
    let watched: Vec<_> = fake
        .requests()
        .into_iter()
        .filter(|r| r.path == "/api/v1/namespaces")
        .collect();
    assert!(!watched.is_empty());
    assert!(watched
        .iter()
        .all(|r| r.query_param("labelSelector") == Some("team=a")));

    // Labelled later: picked up (adopted, as at start), then rolled on its next change.
    fake.merge_patch(
        "namespaces",
        "",
        "team-b",
        json!({"metadata": {"labels": {"team": "a"}}}),
    );
    eventually(&fake, &wavelet, "team-b adopted", |f| {
        hashes(f, "deployments", "team-b", "web", HASH).1.is_some()
    });
    fake.merge_patch(
        "configmaps",
        "team-b",
        "app-config",
        json!({"data": {"color": "red"}}),
    );
    eventually(&fake, &wavelet, "team-b rolled", |f| {
        hashes(f, "deployments", "team-b", "web", HASH).0.is_some()
    });

    // Unlabelled: dropped again.
    fake.merge_patch(
        "namespaces",
        "",
        "team-b",
        json!({"metadata": {"labels": {"team": "c"}}}),
    );
    eventually(&fake, &wavelet, "team-b dropped", |_| {
        wavelet
            .output()
            .contains("namespace team-b no longer matches --namespace-selector")
    });
    let before = fake.patches("deployments", "team-b", "web").len();
    fake.merge_patch(
        "configmaps",
        "team-b",
        "app-config",
        json!({"data": {"color": "black"}}),
    );
    fake.merge_patch(
        "configmaps",
        "team-a",
        "marker-config",
        json!({"data": {"v": "3"}}),
    );
    eventually(&fake, &wavelet, "marker rolled again", |f| {
        f.revisions("deployments", "team-a", "marker") == 3
    });
    assert_eq!(fake.patches("deployments", "team-b", "web").len(), before);
}

#[test]
fn resource_label_selector_is_sent_to_the_server_and_an_unlabelled_object_does_not_hold_the_rollout(
) {
    let fake = FakeApi::start();
    let mut labelled = configmap(NS, "app-config", &[("color", "blue")]);
    labelled["metadata"]["labels"] = json!({"reload": "yes"});
    fake.apply(labelled);
    // Referenced and required, but outside the selector: it does not count.
    fake.apply(configmap(NS, "other", &[("k", "1")]));
    let mut pod_spec = mounts_configmap("app-config");
    pod_spec["containers"][0]["envFrom"] = json!([{"configMapRef": {"name": "other"}}]);
    fake.apply(workload("Deployment", NS, "web", opted_in(), pod_spec));
    let mut args = FAST.to_vec();
    args.extend(["--resource-label-selector", "reload=yes"]);
    let wavelet = Wavelet::start(&fake, &args);
    eventually(&fake, &wavelet, "adoption", |f| {
        hashes(f, "deployments", NS, "web", HASH).1.is_some()
    });
    // A change of the unlabelled object is not seen; one of the labelled one rolls once.
    fake.merge_patch("configmaps", NS, "other", json!({"data": {"k": "2"}}));
    fake.merge_patch(
        "configmaps",
        NS,
        "app-config",
        json!({"data": {"color": "green"}}),
    );
    eventually(&fake, &wavelet, "rollout", |f| {
        hashes(f, "deployments", NS, "web", HASH).0.is_some()
    });
    assert_eq!(template_patches(&fake, "deployments", NS, "web"), 1);
    assert!(
        !fake
            .events_for(NS, "web")
            .iter()
            .any(|e| e["reason"] == "ConfigMissing"),
        "an object outside the selector was reported missing"
    );
    for request in fake
        .requests()
        .iter()
        .filter(|r| r.path.ends_with("/configmaps") || r.path.ends_with("/secrets"))
        .filter(|r| !is_wavelet_state(r))
    {
        assert_eq!(
            request.query_param("labelSelector"),
            Some("reload=yes"),
            "{}",
            request.path
        );
    }
}

#[test]
fn reloader_flags_whose_meaning_wavelet_does_not_share_exit_2_with_what_it_does_instead() {
    for (flag, says) in [
        (
            "--webhook-url=http://x",
            "--dry-run with ALERT_ON_RELOAD=true",
        ),
        ("--enable-pprof", "process_resident_memory_bytes"),
        (
            "--auto-annotation=my.company/auto",
            "rename the annotations",
        ),
        (
            "--reload-strategy=restart",
            "expected env-vars or annotations",
        ),
    ] {
        let mut wavelet = Wavelet::launch(&[flag], &[]);
        let status = wavelet.wait_exit(std::time::Duration::from_secs(10));
        // The exit can be seen before the output pipe is drained.
        wavelet.wait_for_output("Stakater Reloader flag", std::time::Duration::from_secs(5));
        let output = wavelet.output();
        assert_eq!(status.and_then(|s| s.code()), Some(2), "{flag}: {output}");
        assert!(
            output.contains("Stakater Reloader flag"),
            "{flag}: {output}"
        );
        assert!(output.contains(says), "{flag}: {output}");
    }
}

/// A Deployment in `NS` that mounts Secret `mounted` and reads Secret `env` whole.
fn uses_secrets(name: &str, annotations: Value, mounted: &str, env: &str) -> Value {
    workload(
        "Deployment",
        NS,
        name,
        annotations,
        json!({"volumes": [{"name": "s", "secret": {"secretName": mounted}}],
               "containers": [{"name": "app", "image": "nginx",
                               "envFrom": [{"secretRef": {"name": env}}]}]}),
    )
}

/// Issue 26, item 1. Secrets are watched as metadata and read with a request of their own
/// (and a reload-list pattern lists its namespace's Secrets): those paths counted an
/// unlabelled Secret that the filtered watch and its relists did not, so every resync
/// removed it (a rollout) and every restart read it back (a rollout back). Outside the
/// selector, a Secret counts as absent on every path, as a ConfigMap does.
#[test]
fn resource_label_selector_an_unlabelled_referenced_secret_rolls_nothing_over_resyncs_and_restarts()
{
    let fake = FakeApi::start();
    let mut labelled = secret(NS, "app-creds", &[("password", "a")]);
    labelled["metadata"]["labels"] = json!({"reload": "yes"});
    fake.apply(labelled);
    // Referenced and required, and named by a reload-list pattern, but unlabelled.
    fake.apply(secret(NS, "db-creds", &[("password", "b")]));
    // The fetch path: a referenced Secret is read on its own.
    fake.apply(uses_secrets("web", opted_in(), "app-creds", "db-creds"));
    // The listing path: a pattern makes wavelet list the namespace's Secrets.
    fake.apply(uses_secrets(
        "api",
        json!({"secret.reloader.stakater.com/reload": "app-.*,db-.*"}),
        "app-creds",
        "app-creds",
    ));
    let mut args = FAST.to_vec();
    args.extend(["--resource-label-selector", "reload=yes", "--resync", "1s"]);
    let writes = |f: &FakeApi| {
        (
            f.patches("deployments", NS, "web").len(),
            f.patches("deployments", NS, "api").len(),
        )
    };
    let mut adopted = None;
    for run in ["first run", "after a restart"] {
        let wavelet = Wavelet::start(&fake, &args);
        eventually(&fake, &wavelet, "both adopted", |f| {
            hashes(f, "deployments", NS, "web", HASH).1.is_some()
                && hashes(f, "deployments", NS, "api", HASH).1.is_some()
        });
        // Three relists of the Secrets, each a chance to find the unlabelled one gone.
        wait_for_metric(
            &wavelet,
            "wavelet_watch_relists_total",
            r#"resource="secrets",reason="resync""#,
            |n| n >= 3.0,
        );
        let hashes_now = (
            hashes(&fake, "deployments", NS, "web", HASH),
            hashes(&fake, "deployments", NS, "api", HASH),
        );
        let adopted = adopted.get_or_insert(hashes_now.clone());
        assert_eq!(
            writes(&fake),
            (1, 1),
            "{run}: written again with nothing changed:\n{}",
            wavelet.output()
        );
        assert_eq!(&hashes_now, adopted, "{run}");
        assert_eq!(
            template_patches(&fake, "deployments", NS, "web"),
            0,
            "{run}"
        );
        assert!(
            !fake
                .events_for(NS, "web")
                .iter()
                .any(|e| e["reason"] == "ConfigMissing"),
            "{run}: a Secret outside the selector was reported missing"
        );
    }
    // The labelled Secret still counts, on both paths.
    let wavelet = Wavelet::start(&fake, &args);
    fake.merge_patch(
        "secrets",
        NS,
        "app-creds",
        json!({"data": {"password": wavelet::objects::base64::encode(b"c")}}),
    );
    eventually(&fake, &wavelet, "both rolled", |f| {
        template_patches(f, "deployments", NS, "web") == 1
            && template_patches(f, "deployments", NS, "api") == 1
    });
    // Labelled into the selector, the other Secret is created as far as wavelet can tell:
    // web, which references it, rolls to the hash with it present.
    fake.merge_patch(
        "secrets",
        NS,
        "db-creds",
        json!({"metadata": {"labels": {"reload": "yes"}}}),
    );
    eventually(&fake, &wavelet, "web rolled for the labelled Secret", |f| {
        template_patches(f, "deployments", NS, "web") == 2
            && hashes(f, "deployments", NS, "web", HASH).0
                == Some(expected_hash(f, "deployments", NS, "web"))
    });
    // Every read of Secrets carried the selector.
    for request in fake
        .requests()
        .iter()
        .filter(|r| r.path.contains("/secrets"))
    {
        assert_eq!(
            request.query_param("labelSelector"),
            Some("reload=yes"),
            "{} {}",
            request.method,
            request.path
        );
    }
}

/// What Reloader's chart renders by default and in its common settings starts wavelet,
/// which says once at start (info) what it makes of each.
#[test]
fn reloader_flags_wavelet_already_honours_are_accepted_and_said_once_at_start() {
    let fake = fake_with_web();
    let args = [
        "--log-level=info",
        "--reload-strategy=env-vars",
        "--reload-on-create=true",
        "--reload-on-delete=true",
        "--sync-after-restart=true",
        "--enable-ha=true",
        "--lease-namespace=default",
        "--enable-pprof=false",
        "--auto-annotation",
        "reloader.stakater.com/auto",
        "--leader-election-lease-duration=20s",
        "--is-Argo-Rollouts=true",
    ];
    let wavelet = Wavelet::start_with_env(
        &fake,
        &args,
        &[("GOMAXPROCS", "2"), ("RELOADER_NAMESPACE", "default")],
    );
    let output = wavelet.output();
    for said in [
        "Reloader setting: --reload-strategy=env-vars: wavelet writes its hash annotation",
        "Reloader setting: --reload-on-create=true: a created ConfigMap or Secret rolls",
        "Reloader setting: --reload-on-delete=true: deleting an optional reference rolls",
        "Reloader setting: --sync-after-restart=true: changes made while wavelet was not running are rolled at start",
        "Reloader setting: --enable-ha: leader election (--leader-elect) with Lease wavelet",
        "Reloader setting: --enable-pprof=false",
        "Reloader setting: --auto-annotation=reloader.stakater.com/auto: the key wavelet reads",
        "Reloader setting: --leader-election-lease-duration: Reloader's spelling of --lease-duration",
        "Reloader setting: --log-level: logging at info",
        "Reloader setting: GOMAXPROCS: a Go runtime setting",
        "Reloader setting: RELOADER_NAMESPACE:",
        "--is-Argo-Rollouts=true, but the API does not serve argoproj.io/v1alpha1 rollouts",
    ] {
        assert_eq!(output.matches(said).count(), 1, "{said}:\n{output}");
    }
    // And it leads and rolls as ever (changed once web is adopted: a change before that
    // is taken in by the adoption, without a rollout).
    eventually(&fake, &wavelet, "adoption", |f| {
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
    fake.merge_patch(
        "configmaps",
        "default",
        "app-config",
        json!({"data": {"color": "green"}}),
    );
    eventually(&fake, &wavelet, "a rollout", |f| {
        template_patches(f, "deployments", "default", "web") == 1
    });
}
