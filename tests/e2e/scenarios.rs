//! The scenarios, each in namespaces of its own, each asserting on what the real API
//! server holds (ReplicaSets, ControllerRevisions, Pods, Jobs, Events) and on what
//! wavelet logged. "Nothing happened" is asserted only after a positive signal that the
//! change was processed.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};

use crate::cluster::KubectlProxy;
use crate::forward::Forwarder;
use crate::kube::{configmap, hashes, mounts_configmap, opted_in, workload, Kube};
use crate::process::{in_a_pod, one_shot, Wavelet};
use crate::{Ctx, Scenario};

pub const ALL: &[Scenario] = &[
    Scenario {
        name: "hash_mode_deployment",
        run: |c| hash_mode(c, "Deployment", "e2e-deploy"),
        serial: false,
    },
    Scenario {
        name: "hash_mode_statefulset",
        run: |c| hash_mode(c, "StatefulSet", "e2e-sts"),
        serial: false,
    },
    Scenario {
        name: "hash_mode_daemonset",
        run: |c| hash_mode(c, "DaemonSet", "e2e-ds"),
        serial: false,
    },
    Scenario {
        name: "streaming_initial_sync_seen_by_the_apiserver",
        run: streaming_initial_sync,
        serial: false,
    },
    Scenario {
        name: "secrets_whole_helm_records_as_metadata_no_get",
        run: secrets_whole_helm_records_as_metadata,
        serial: false,
    },
    Scenario {
        name: "resource_label_selector_secret_outside_is_absent",
        run: resource_label_selector_secrets,
        serial: false,
    },
    Scenario {
        name: "delete_mode_evict_delete_rolling",
        run: delete_mode,
        serial: false,
    },
    Scenario {
        name: "leader_killed_standby_takes_over",
        run: leader_election,
        serial: false,
    },
    Scenario {
        name: "leader_renewal_answered_late_one_writer",
        run: late_renewal,
        serial: false,
    },
    Scenario {
        name: "new_leader_with_a_stalled_configmap_watch_rolls_nothing",
        run: new_leader_behind,
        serial: false,
    },
    Scenario {
        name: "delete_mode_across_leader_terms_replaces_once",
        run: delete_mode_across_terms,
        serial: false,
    },
    Scenario {
        name: "delete_mode_new_leader_with_a_stalled_configmap_watch_replaces_nothing",
        run: delete_mode_new_leader_behind,
        serial: false,
    },
    Scenario {
        name: "status_and_hash",
        run: status_and_hash,
        serial: false,
    },
    Scenario {
        name: "custom_resource_via_workload_kinds",
        run: custom_resource,
        serial: false,
    },
    Scenario {
        name: "cronjob_job_started_once",
        run: cronjob,
        serial: false,
    },
    Scenario {
        name: "migrate_wave_then_delete_keeps_the_configmaps",
        run: migrate_wave,
        serial: false,
    },
    Scenario {
        name: "csi_rotation_rolls_each_mounting_deployment_once",
        run: crate::csi::rotation,
        serial: false,
    },
    Scenario {
        name: "csi_per_pod_versions_roll_once_per_change",
        run: crate::csi::per_pod_versions,
        serial: false,
    },
    Scenario {
        name: "csi_a_daemonsets_pods_do_not_vote_for_a_deployment_named_alike",
        run: crate::csi::a_daemonsets_pods_do_not_vote_for_a_deployment_named_alike,
        serial: false,
    },
    Scenario {
        name: "events_every_rollout_recorded",
        run: crate::events::every_rollout_recorded,
        serial: false,
    },
    Scenario {
        name: "events_of_a_deleted_namespace_dropped",
        run: crate::events::deleted_namespace_events_dropped,
        serial: false,
    },
    Scenario {
        name: "chart_server_side_dry_run",
        run: crate::chart::server_side_dry_run,
        serial: false,
    },
    Scenario {
        name: "reloader_loadtest_s1_burst_updates",
        run: crate::reloader_loadtest::s1_burst_updates,
        serial: false,
    },
    Scenario {
        name: "reloader_loadtest_s4_no_op_updates",
        run: crate::reloader_loadtest::s4_no_op_updates,
        serial: false,
    },
    Scenario {
        name: "reloader_loadtest_s6_controller_restart",
        run: crate::reloader_loadtest::s6_controller_restart,
        serial: false,
    },
    Scenario {
        name: "in_cluster_with_shipped_rbac",
        run: in_cluster,
        serial: true,
    },
    Scenario {
        name: "readme_quick_start",
        run: crate::quickstart::quick_start,
        serial: true,
    },
    Scenario {
        name: "reloader_chart_image_swapped",
        run: crate::reloader_chart::reloader_chart_runs_wavelet,
        serial: true,
    },
    Scenario {
        name: "apiserver_restarted_mid_watch",
        run: apiserver_restart,
        serial: true,
    },
];

const LONG: Duration = Duration::from_secs(60);
const FAST: &[&str] = &[
    "--debounce",
    "300ms",
    "--min-rollout-interval",
    "0s",
    "--max-rollouts-per-second",
    "50",
];

fn args<'a>(ns: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut all = vec!["--namespaces", ns];
    all.extend_from_slice(FAST);
    all.extend_from_slice(extra);
    all
}

/// Objects of `kind` in `ns` owned by the workload `owner`.
fn owned(kube: &Kube, kind: &str, ns: &str, owner: &str) -> Vec<Value> {
    kube.list(kind, ns)
        .into_iter()
        .filter(|o| {
            o["metadata"]["ownerReferences"]
                .as_array()
                .is_some_and(|refs| refs.iter().any(|r| r["name"] == owner))
        })
        .collect()
}

/// How many pod-template revisions a workload has: ReplicaSets of a Deployment,
/// ControllerRevisions of a StatefulSet or DaemonSet.
fn revisions(kube: &Kube, kind: &str, ns: &str, name: &str) -> usize {
    match kind {
        "Deployment" => owned(kube, "ReplicaSet", ns, name).len(),
        _ => owned(kube, "ControllerRevision", ns, name).len(),
    }
}

/// `--leader-elect` with a Lease in `ns` that a killed leader loses within 3 s.
fn lease_args(ns: &str) -> Vec<&str> {
    vec![
        "--leader-elect",
        "--lease-namespace",
        ns,
        "--lease-duration",
        "3s",
        "--renew-deadline",
        "2s",
        "--retry-period",
        "500ms",
    ]
}

fn lines_with(output: &str, needle: &str) -> usize {
    output.lines().filter(|l| l.contains(needle)).count()
}

fn set_data(kube: &Kube, ns: &str, name: &str, data: Value) {
    kube.merge_patch("ConfigMap", ns, name, json!({ "data": data }));
}

fn adopted(kube: &Kube, kind: &str, ns: &str, name: &str) -> bool {
    kube.get(kind, ns, name)
        .is_some_and(|o| hashes(&o).1.is_some())
}

fn events(kube: &Kube, ns: &str, about: &str, reason: &str) -> usize {
    let list: Value = kube
        .client
        .get(&format!("/api/v1/namespaces/{ns}/events"))
        .expect("listing events");
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["involvedObject"]["name"] == about && e["reason"] == reason)
        .count()
}

/// Adoption without a rollout; a label-only edit rolls nothing; a data change gives
/// exactly one new revision.
fn hash_mode(ctx: &Ctx, kind: &str, ns: &str) {
    let kube = &ctx.kube;
    kube.create_namespace(ns);
    kube.create(configmap(ns, "cfg", json!({"k": "1"})));
    kube.create(workload(
        kind,
        ns,
        "web",
        opted_in(),
        mounts_configmap("cfg"),
    ));
    kube.until(LONG, "the first revision", || {
        revisions(kube, kind, ns, "web") == 1
    });
    let wavelet = Wavelet::run(&ctx.cluster, &args(ns, &[]));
    kube.until(LONG, "adoption on the metadata", || {
        adopted(kube, kind, ns, "web")
    });
    assert_eq!(revisions(kube, kind, ns, "web"), 1, "adoption rolled");

    kube.merge_patch(
        "ConfigMap",
        ns,
        "cfg",
        json!({"metadata": {"labels": {"touched": "yes"}}}),
    );
    set_data(kube, ns, "cfg", json!({"k": "2"}));
    kube.until(LONG, "one new revision", || {
        revisions(kube, kind, ns, "web") == 2
    });
    wavelet.wait_output("rolled:", LONG);
    // The label edit came first; the rollout after it is the positive signal.
    assert_eq!(
        lines_with(&wavelet.output(), "rolled:"),
        1,
        "{}",
        wavelet.output()
    );
    let object = kube.get(kind, ns, "web").unwrap();
    let (template, metadata) = hashes(&object);
    assert!(template.is_some() && template == metadata);
    // A second data change: one more, and only one.
    set_data(kube, ns, "cfg", json!({"k": "3"}));
    kube.until(LONG, "a third revision", || {
        revisions(kube, kind, ns, "web") == 3
    });
    kube.until(LONG, "two ConfigChanged Events", || {
        events(kube, ns, "web", "ConfigChanged") == 2
    });
    assert_eq!(revisions(kube, kind, ns, "web"), 3);
    assert!(!wavelet.output().contains(" 403 "), "{}", wavelet.output());
}

/// The initial sync is a streaming list (`sendInitialEvents`), which kube-apiserver 1.36
/// serves by default: its `apiserver_watch_list_duration_seconds` histogram (recorded when
/// the initial events are done) counts one more for namespaced ConfigMaps, and wavelet's
/// watch of them says it completed at the end bookmark, without a page-by-page LIST.
fn streaming_initial_sync(ctx: &Ctx) {
    let kube = &ctx.kube;
    let ns = "e2e-stream";
    kube.create_namespace(ns);
    kube.create(configmap(ns, "cfg", json!({"k": "1"})));
    kube.create(workload(
        "Deployment",
        ns,
        "web",
        opted_in(),
        mounts_configmap("cfg"),
    ));
    let streamed = || watch_lists(ctx, "configmaps", "namespace");
    let before = streamed();
    let wavelet = Wavelet::run(&ctx.cluster, &args(ns, &[]));
    kube.until(LONG, "adoption", || adopted(kube, "Deployment", ns, "web"));
    let output = wavelet.output();
    assert!(
        output.contains(&format!(
            "configmaps in namespace {ns}: streaming list complete at"
        )),
        "{output}"
    );
    assert!(!output.contains("a streaming list was refused"), "{output}");
    assert!(
        streamed() > before,
        "the API server counted no streaming list of configmaps ({before} before)"
    );
    set_data(kube, ns, "cfg", json!({"k": "2"}));
    kube.until(LONG, "a rollout", || {
        revisions(kube, "Deployment", ns, "web") == 2
    });
}

/// kube-apiserver's count of streaming lists of `resource` at `scope` (`namespace` or
/// `cluster`) whose initial events were sent.
fn watch_lists(ctx: &Ctx, resource: &str, scope: &str) -> f64 {
    let output = ctx
        .cluster
        .kubectl()
        .args(["get", "--raw", "/metrics"])
        .output()
        .expect("kubectl get --raw /metrics");
    let text = String::from_utf8_lossy(&output.stdout);
    text.lines()
        .filter(|l| l.starts_with("apiserver_watch_list_duration_seconds_count{"))
        .filter(|l| {
            l.contains(&format!("resource=\"{resource}\""))
                && l.contains(&format!("scope=\"{scope}\""))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Secrets are watched whole but Helm's release records, which the real server leaves out
/// by their type: the change of the one in use arrives with its data, so neither Secret is
/// read with a GET. Then a workload uses the record: it is read, the records are watched as
/// metadata from then on, and its change is read at the new version and rolls.
fn secrets_whole_helm_records_as_metadata(ctx: &Ctx) {
    let kube = &ctx.kube;
    let ns = "e2e-secrets";
    kube.create_namespace(ns);
    let secret = |name: &str, value: &str| {
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": ns},
            "type": "Opaque", "stringData": {"password": value}})
    };
    kube.create(secret("creds", "canary-value-one"));
    let mut helm = secret("helm-release", &"x".repeat(200_000));
    helm["type"] = json!("helm.sh/release.v1");
    kube.create(helm);
    let pod = json!({"container": {"env": [{"name": "PASSWORD",
        "valueFrom": {"secretKeyRef": {"name": "creds", "key": "password"}}}]}});
    kube.create(workload("Deployment", ns, "web", opted_in(), pod));
    let wavelet = Wavelet::run(&ctx.cluster, &args(ns, &[]));
    kube.until(LONG, "adoption", || adopted(kube, "Deployment", ns, "web"));
    kube.merge_patch(
        "Secret",
        ns,
        "creds",
        json!({"stringData": {"password": "canary-value-two"}}),
    );
    kube.until(LONG, "a rollout", || {
        revisions(kube, "Deployment", ns, "web") == 2
    });
    let output = wavelet.output();
    let reads = |name: &str| {
        lines_with(
            &output,
            &format!("get GET /api/v1/namespaces/{ns}/secrets/{name} "),
        )
    };
    assert_eq!(
        reads("creds"),
        0,
        "both versions came whole on the watch:\n{output}"
    );
    assert_eq!(reads("helm-release"), 0, "{output}");
    // The real server filters by `type` (both field selectors accepted, no watch of
    // Secrets failing).
    assert!(
        !output
            .lines()
            .any(|l| l.contains("WARN") && l.contains("secrets")),
        "{output}"
    );
    assert!(
        !output.contains("canary-value"),
        "a Secret value was logged"
    );

    let pod = json!({"container": {"envFrom": [{"secretRef": {"name": "helm-release"}}]}});
    kube.create(workload("Deployment", ns, "odd", opted_in(), pod));
    kube.until(LONG, "adoption of odd", || {
        adopted(kube, "Deployment", ns, "odd")
    });
    kube.merge_patch(
        "Secret",
        ns,
        "helm-release",
        json!({"stringData": {"password": "y"}}),
    );
    kube.until(LONG, "odd rolled", || {
        revisions(kube, "Deployment", ns, "odd") == 2
    });
    let output = wavelet.output();
    assert!(
        output.contains("a Helm release record is in use in namespace e2e-secrets"),
        "{output}"
    );
    assert_eq!(
        lines_with(
            &output,
            &format!("get GET /api/v1/namespaces/{ns}/secrets/helm-release "),
        ),
        2,
        "read when first used, and at its new version:\n{output}"
    );
}

/// `--resource-label-selector` against the real API server (issue 26, item 1): a
/// referenced Secret outside the selector is read by a LIST of its name and the selector,
/// which the server answers empty, so it is absent as the filtered watch has it, and
/// resyncs and a restart roll nothing; labelled into the selector, it is read and rolls.
fn resource_label_selector_secrets(ctx: &Ctx) {
    let kube = &ctx.kube;
    let ns = "e2e-selector";
    kube.create_namespace(ns);
    let secret = |name: &str, labels: Value| {
        json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "type": "Opaque", "stringData": {"password": name}})
    };
    kube.create(secret("app-creds", json!({"reload": "yes"})));
    kube.create(secret("db-creds", json!({})));
    let pod = json!({"container": {"envFrom": [{"secretRef": {"name": "app-creds"}},
        {"secretRef": {"name": "db-creds"}}]}});
    kube.create(workload("Deployment", ns, "web", opted_in(), pod));
    let flags = args(
        ns,
        &["--resource-label-selector", "reload=yes", "--resync", "1s"],
    );
    let resyncs = r#"wavelet_watch_relists_total{resource="secrets",reason="resync"}"#;
    let mut adopted_hash = None;
    for run in ["first run", "after a restart"] {
        let wavelet = Wavelet::run(&ctx.cluster, &flags);
        kube.until(LONG, "adoption", || adopted(kube, "Deployment", ns, "web"));
        kube.until(LONG, "three resyncs of the Secrets", || {
            wavelet.metric(resyncs) >= 3.0
        });
        let web = kube.get("Deployment", ns, "web").unwrap();
        let now = hashes(&web);
        assert_eq!(now.0, None, "{run}: rolled with nothing changed");
        assert_eq!(
            adopted_hash.get_or_insert(now.1.clone()),
            &now.1,
            "{run}: hash rewritten"
        );
        assert_eq!(revisions(kube, "Deployment", ns, "web"), 1, "{run}");
        let output = wavelet.output();
        assert_eq!(
            lines_with(&output, &format!("GET /api/v1/namespaces/{ns}/secrets/")),
            0,
            "{run}: a Secret read without the selector:\n{output}"
        );
    }
    let wavelet = Wavelet::run(&ctx.cluster, &flags);
    kube.merge_patch(
        "Secret",
        ns,
        "db-creds",
        json!({"metadata": {"labels": {"reload": "yes"}}}),
    );
    kube.until(LONG, "a rollout for the Secret labelled in", || {
        revisions(kube, "Deployment", ns, "web") == 2
    });
    drop(wavelet);
}

/// Delete mode against real Pods: `evict` behind a PodDisruptionBudget (a 429 while the
/// budget is spent, then success once the replacement is Ready), `delete`, `rolling`.
fn delete_mode(ctx: &Ctx) {
    let kube = &ctx.kube;
    let ns = "e2e-delete";
    kube.create_namespace(ns);
    for (name, strategy) in [("evict", "evict"), ("plain", "delete"), ("roll", "rolling")] {
        let mut cm = configmap(ns, &format!("{name}-config"), json!({"v": "1"}));
        cm["metadata"]["annotations"] = json!({
            "magalix.com/podDeleteMatch": format!("app={name}"),
            "wavelet.dev/pod-delete-strategy": strategy,
        });
        kube.create(cm);
        kube.create(workload("Deployment", ns, name, json!({}), json!({})));
    }
    kube.create(
        json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "evict", "namespace": ns},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "evict"}}}}),
    );
    let ready = |app: &str| ready_pods(kube, ns, app);
    for app in ["evict", "plain", "roll"] {
        kube.until(LONG, &format!("two Ready {app} Pods"), || {
            ready(app).len() == 2
        });
    }
    kube.until(LONG, "the budget allows one disruption", || {
        kube.get("PodDisruptionBudget", ns, "evict")
            .is_some_and(|p| p["status"]["disruptionsAllowed"] == 1)
    });
    let before: Vec<BTreeSet<String>> = ["evict", "plain", "roll"].map(ready).to_vec();
    let wavelet = Wavelet::run(&ctx.cluster, &args(ns, &["--state-namespace", ns]));
    kube.until(LONG, "the three objects recorded in wavelet-state", || {
        kube.get("ConfigMap", ns, "wavelet-state")
            .is_some_and(|s| s["data"].as_object().is_some_and(|d| d.len() == 3))
    });
    for name in ["evict", "plain", "roll"] {
        set_data(kube, ns, &format!("{name}-config"), json!({"v": "2"}));
    }
    for (i, app) in ["evict", "plain", "roll"].into_iter().enumerate() {
        kube.until(
            Duration::from_secs(120),
            &format!("{app} Pods replaced"),
            || {
                let now = ready(app);
                now.len() == 2 && now.is_disjoint(&before[i])
            },
        );
        kube.until(
            LONG,
            &format!("a PodsReplaced Event on {app}-config"),
            || events(kube, ns, &format!("{app}-config"), "PodsReplaced") >= 1,
        );
    }
    let output = wavelet.output();
    assert!(
        output.contains("pods/eviction") || output.contains("/eviction"),
        "no eviction was sent:\n{output}"
    );
    assert!(
        output.contains("-> 429"),
        "the budget never refused an eviction (no 429 seen):\n{output}"
    );
    assert!(!output.contains("deletecollection"));
}

/// Two replicas with `--leader-elect`: only the leader writes; killed, the other takes
/// over and rolls the next change, once.
fn leader_election(ctx: &Ctx) {
    let kube = &ctx.kube;
    let ns = "e2e-leader";
    kube.create_namespace(ns);
    kube.create(configmap(ns, "cfg", json!({"k": "1"})));
    kube.create(workload(
        "Deployment",
        ns,
        "web",
        opted_in(),
        mounts_configmap("cfg"),
    ));
    let lease = lease_args(ns);
    let mut a = Wavelet::run(&ctx.cluster, &args(ns, &lease));
    let mut b = Wavelet::run(&ctx.cluster, &args(ns, &lease));
    kube.until(LONG, "one leader", || {
        a.metric("wavelet_leader ") + b.metric("wavelet_leader ") == 1.0
    });
    kube.until(LONG, "adoption by the leader", || {
        adopted(kube, "Deployment", ns, "web")
    });
    let (leader, standby) = if a.metric("wavelet_leader ") == 1.0 {
        (&mut a, &mut b)
    } else {
        (&mut b, &mut a)
    };
    let leader_log = leader.kill();
    assert!(leader_log.contains("adopted"), "{leader_log}");
    set_data(kube, ns, "cfg", json!({"k": "2"}));
    kube.until(LONG, "the standby leads and rolls", || {
        revisions(kube, "Deployment", ns, "web") == 2
    });
    standby.wait_output("rolled:", LONG);
    assert_eq!(standby.metric("wavelet_leader "), 1.0);
    assert_eq!(lines_with(&standby.output(), "rolled:"), 1);
    assert_eq!(
        lines_with(&standby.output(), "adopted"),
        0,
        "the standby wrote before leading"
    );
}

/// Regression (issue 26, item 4): a leader whose renewal the API server applied but whose
/// answer came late reopened its gate after the standby had taken over: two writers. The
/// leader talks to the API server through a forwarder that holds every answer back for
/// 6 s (lease 3 s, renew deadline 2 s): the standby takes over meanwhile, and the two
/// must never both report `wavelet_leader 1`.
fn late_renewal(ctx: &Ctx) {
    let (Some(port), Some(ca)) = (ctx.cluster.api_port, ctx.cluster.ca.as_ref()) else {
        println!("e2e leader_renewal_answered_late_one_writer: skipped: needs a control plane the suite started (WAVELET_E2E_BIN_DIR)");
        return;
    };
    let kube = &ctx.kube;
    let ns = "e2e-late-renewal";
    kube.create_namespace(ns);
    let forwarder = Forwarder::start(port);
    let kubeconfig = ctx.cluster.dir().join("kubeconfig-late-renewal");
    std::fs::write(
        &kubeconfig,
        crate::cluster::kubeconfig_text(forwarder.port, ca, crate::cluster::ADMIN_TOKEN),
    )
    .expect("writing the forwarder's kubeconfig");
    let lease = lease_args(ns);
    let slow = Wavelet::run_via(&ctx.cluster, &kubeconfig, &args(ns, &lease));
    kube.until(LONG, "the replica behind the forwarder leads", || {
        slow.metric("wavelet_leader ") == 1.0
    });
    let standby = Wavelet::run(&ctx.cluster, &args(ns, &lease));
    assert_eq!(standby.metric("wavelet_leader "), 0.0);
    let held = Duration::from_secs(6);
    forwarder.hold_answers(held);
    let started = std::time::Instant::now();
    let mut both = Vec::new();
    // The held answers arrive after 6 s; a gate one of them reopened would stay open for
    // the renew deadline (2 s) after that.
    while started.elapsed() < held + Duration::from_secs(4) {
        if slow.metric("wavelet_leader ") == 1.0 && standby.metric("wavelet_leader ") == 1.0 {
            both.push(started.elapsed());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        both.is_empty(),
        "both replicas reported wavelet_leader 1 in {} samples, from {:?} to {:?} after the answers were held\nslow:\n{}\n---\nstandby:\n{}",
        both.len(),
        both.first(),
        both.last(),
        slow.output(),
        standby.output()
    );
    assert_eq!(
        standby.metric("wavelet_leader "),
        1.0,
        "the standby took over while the leader could not renew:\n{}",
        standby.output()
    );
    assert!(
        slow.output().contains("stopped writing"),
        "{}",
        slow.output()
    );
}

/// Regression (issue 34, thirteenth session): a standby whose ConfigMap watch lagged
/// took the lead after the leader rolled a change, and wrote the older hash back from its
/// cache (a rollout no change owed), then the newer again once the watch caught up. The
/// standby talks to the API server through a `kubectl proxy` and a forwarder that holds
/// the answers to its ConfigMap watches back, everything else answered at once: after the
/// leader is killed it must read the changed ConfigMap from etcd, roll nothing, and read
/// nothing of `web`'s other ConfigMap, which did not change.
fn new_leader_behind(ctx: &Ctx) {
    let kube = &ctx.kube;
    let ns = "e2e-leader-behind";
    kube.create_namespace(ns);
    kube.create(configmap(ns, "a-defaults", json!({"size": "small"})));
    kube.create(configmap(ns, "app-config", json!({"k": "1"})));
    let mut pod_spec = mounts_configmap("a-defaults");
    pod_spec["container"]["envFrom"] = json!([{"configMapRef": {"name": "app-config"}}]);
    kube.create(workload("Deployment", ns, "web", opted_in(), pod_spec));
    let lease = lease_args(ns);
    let mut leader = Wavelet::run(&ctx.cluster, &args(ns, &lease));
    kube.until(LONG, "the first replica leads and adopts web", || {
        leader.metric("wavelet_leader ") == 1.0 && adopted(kube, "Deployment", ns, "web")
    });
    let (proxy, forwarder, standby) = replica_with_a_held_configmap_watch(ctx, &args(ns, &lease));
    assert_eq!(standby.metric("wavelet_leader "), 0.0);

    set_data(kube, ns, "app-config", json!({"k": "2"}));
    kube.until(LONG, "the leader rolls the change", || {
        revisions(kube, "Deployment", ns, "web") == 2
    });
    leader.wait_output("deployment e2e-leader-behind/web: rolled:", LONG);
    let rolled = hashes(&kube.get("Deployment", ns, "web").unwrap()).0;
    let mark = standby.output().len();
    let asked_before = forwarder.request_lines().len();
    leader.kill();
    kube.until(LONG, "the standby leads", || {
        standby.metric("wavelet_leader ") == 1.0
    });
    // The positive signal: it decided about web, from a cache that still holds k=1.
    let rolled_line = "deployment e2e-leader-behind/web: rolled:";
    let held_line = "deployment e2e-leader-behind/web: not rolled: its record is of other data";
    kube.until(LONG, "the new leader decides about web", || {
        let output = standby.output();
        output[mark..].contains(rolled_line) || output[mark..].contains(held_line)
    });
    let output = standby.output();
    assert!(
        output[mark..].contains(held_line) && !output[mark..].contains(rolled_line),
        "the new leader rolled web from a cache behind the leader's record:\n{output}"
    );
    assert!(
        output[mark..].contains("behind the API server on configmap e2e-leader-behind/app-config"),
        "{output}"
    );
    assert_eq!(
        hashes(&kube.get("Deployment", ns, "web").unwrap()).0,
        rolled
    );
    let reads_of = |name: &str| {
        let name = format!("metadata.name%3D{name}");
        forwarder.request_lines()[asked_before..]
            .iter()
            .filter(|l| l.contains("/configmaps?") && l.contains(&name) && !l.contains("watch="))
            .count()
    };
    assert!(
        reads_of("app-config") >= 1,
        "{:?}",
        forwarder.request_lines()
    );
    assert_eq!(reads_of("a-defaults"), 0, "{:?}", forwarder.request_lines());

    // The watch catches up and brings k=2, what web records: nothing to roll; the next
    // change rolls once.
    forwarder.release_watches();
    set_data(kube, ns, "app-config", json!({"k": "3"}));
    kube.until(LONG, "the new leader rolls the next change", || {
        revisions(kube, "Deployment", ns, "web") == 3
    });
    standby.wait_output(rolled_line, LONG);
    assert_eq!(lines_with(&standby.output()[mark..], rolled_line), 1);
    drop(proxy);
}

/// Namespace `ns` with ConfigMap `web-config` {v: 1} annotated to replace the Pods of
/// Deployment `web` (two replicas) when its data changes; once both Pods are Ready.
fn delete_mode_web(kube: &Kube, ns: &str) {
    kube.create_namespace(ns);
    let mut cm = configmap(ns, "web-config", json!({"v": "1"}));
    cm["metadata"]["annotations"] = json!({"magalix.com/podDeleteMatch": "app=web"});
    kube.create(cm);
    kube.create(workload("Deployment", ns, "web", json!({}), json!({})));
    kube.until(LONG, "two Ready web Pods", || {
        ready_pods(kube, ns, "web").len() == 2
    });
}

/// The uids of the Ready Pods labelled `app=<app>` in `ns` that are not being deleted.
fn ready_pods(kube: &Kube, ns: &str, app: &str) -> BTreeSet<String> {
    kube.list("Pod", ns)
        .into_iter()
        .filter(|p| p["metadata"]["labels"]["app"] == app)
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .filter(|p| {
            p["status"]["conditions"].as_array().is_some_and(|c| {
                c.iter()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True")
            })
        })
        .map(|p| p["metadata"]["uid"].as_str().unwrap().to_string())
        .collect()
}

/// Delete mode's record of `web-config` in `ns`'s `wavelet-state`.
fn state_entry(kube: &Kube, ns: &str) -> Option<String> {
    kube.get("ConfigMap", ns, "wavelet-state")?["data"][format!("configmap.{ns}.web-config")]
        .as_str()
        .map(String::from)
}

/// A replica with `args` that talks to the API server through a `kubectl proxy` and a
/// forwarder, which holds the answers to its ConfigMap watches back from now on (after its
/// initial sync) while answering everything else: a watch that went silent.
fn replica_with_a_held_configmap_watch(
    ctx: &Ctx,
    args: &[&str],
) -> (KubectlProxy, Forwarder, Wavelet) {
    let proxy = ctx.cluster.kubectl_proxy();
    let forwarder = Forwarder::start(proxy.port);
    let url = format!("http://127.0.0.1:{}", forwarder.port);
    let mut via_proxy = args.to_vec();
    via_proxy.extend(["--server", url.as_str()]);
    let replica = Wavelet::run(&ctx.cluster, &via_proxy);
    forwarder.hold_watches_of("configmaps");
    (proxy, forwarder, replica)
}

/// Regression (issue 26, item 2): delete mode trusted the `wavelet-state` it read once for
/// the life of the process. Replica A reads it and is frozen (SIGSTOP); B takes over,
/// replaces the Pods for a data change and records it; B drains (SIGTERM) and A, woken,
/// leads again: it must read the state again and replace nothing.
fn delete_mode_across_terms(ctx: &Ctx) {
    let kube = &ctx.kube;
    let ns = "e2e-terms";
    delete_mode_web(kube, ns);
    let ready = || ready_pods(kube, ns, "web");
    let entry = || state_entry(kube, ns);
    let mut elect = vec!["--state-namespace", ns];
    elect.extend(lease_args(ns));
    let a = Wavelet::run(&ctx.cluster, &args(ns, &elect));
    kube.until(LONG, "A leads and records the ConfigMap", || {
        a.metric("wavelet_leader ") == 1.0 && entry().is_some()
    });
    let first = entry().unwrap();
    let mut b = Wavelet::run(&ctx.cluster, &args(ns, &elect));
    a.signal("STOP");
    kube.until(LONG, "B takes over", || b.metric("wavelet_leader ") == 1.0);
    let before = ready();
    set_data(kube, ns, "web-config", json!({"v": "2"}));
    kube.until(Duration::from_secs(120), "B replaces the web Pods", || {
        let now = ready();
        now.len() == 2 && now.is_disjoint(&before)
    });
    kube.until(LONG, "B records the change", || {
        entry().is_some_and(|e| e != first && !e.contains(" replacing"))
    });
    let after_b = ready();
    let mark = a.output().len();
    a.signal("CONT");
    b.signal("TERM");
    assert!(b.wait_exit(LONG).is_some(), "B did not exit");
    kube.until(LONG, "A leads again", || a.metric("wavelet_leader ") == 1.0);
    kube.until(LONG, "A reconciles the change it saw while frozen", || {
        a.output()[mark..]
            .lines()
            .any(|l| l.contains("configmap e2e-terms/web-config: delete mode: "))
    });
    let output = a.output();
    assert!(
        !output[mark..].contains("evicted Pod"),
        "A replaced Pods B had already replaced for the same change:\n{output}"
    );
    assert!(
        output[mark..].contains("configmap e2e-terms/web-config: delete mode: UpToDate"),
        "{output}"
    );
    assert_eq!(ready(), after_b, "the Pods B started are still there");
}

/// Delete mode's side of [`new_leader_behind`]: the leader replaces `web`'s Pods for a
/// change and records it; a standby whose ConfigMap watch is held back takes over with the
/// old data in its cache against the new record. It must read the ConfigMap from etcd and
/// replace nothing, then find the record current once the watch catches up.
fn delete_mode_new_leader_behind(ctx: &Ctx) {
    let kube = &ctx.kube;
    let ns = "e2e-terms-behind";
    delete_mode_web(kube, ns);
    let mut elect = vec!["--state-namespace", ns];
    elect.extend(lease_args(ns));
    let mut leader = Wavelet::run(&ctx.cluster, &args(ns, &elect));
    kube.until(
        LONG,
        "the first replica leads and records the ConfigMap",
        || leader.metric("wavelet_leader ") == 1.0 && state_entry(kube, ns).is_some(),
    );
    let first = state_entry(kube, ns).unwrap();
    let (proxy, forwarder, standby) = replica_with_a_held_configmap_watch(ctx, &args(ns, &elect));
    assert_eq!(standby.metric("wavelet_leader "), 0.0);

    let before = ready_pods(kube, ns, "web");
    set_data(kube, ns, "web-config", json!({"v": "2"}));
    kube.until(
        Duration::from_secs(120),
        "the leader replaces the web Pods",
        || {
            let now = ready_pods(kube, ns, "web");
            now.len() == 2 && now.is_disjoint(&before)
        },
    );
    kube.until(LONG, "the leader records the change", || {
        state_entry(kube, ns).is_some_and(|e| e != first && !e.contains(" replacing"))
    });
    let replaced = ready_pods(kube, ns, "web");
    let mark = standby.output().len();
    leader.kill();
    kube.until(LONG, "the standby leads", || {
        standby.metric("wavelet_leader ") == 1.0
    });
    let key = format!("configmap {ns}/web-config");
    let held_line = format!("{key}: the cached data (");
    kube.until(LONG, "the new leader decides about web-config", || {
        let output = standby.output();
        output[mark..].contains(&held_line) || output[mark..].contains("evicted Pod")
    });
    let output = standby.output();
    assert!(
        output[mark..].contains(&held_line) && !output[mark..].contains("evicted Pod"),
        "the new leader replaced Pods from a cache behind the record:\n{output}"
    );
    assert_eq!(ready_pods(kube, ns, "web"), replaced);

    // The watch catches up and brings v=2, what the record says: nothing to replace.
    forwarder.release_watches();
    let current = format!("{key}: delete mode: UpToDate");
    kube.until(LONG, "the new leader finds the record current", || {
        standby.output()[mark..].contains(&current)
    });
    let output = standby.output();
    assert!(!output[mark..].contains("evicted Pod"), "{output}");
    assert_eq!(ready_pods(kube, ns, "web"), replaced);
    drop(proxy);
}

/// `wavelet status` and `wavelet hash` against the real server.
fn status_and_hash(ctx: &Ctx) {
    let kube = &ctx.kube;
    let ns = "e2e-status";
    kube.create_namespace(ns);
    kube.create(configmap(ns, "cfg", json!({"k": "1"})));
    kube.create(workload(
        "Deployment",
        ns,
        "web",
        opted_in(),
        mounts_configmap("cfg"),
    ));
    let (code, out) = one_shot(&ctx.cluster, &["status", "-n", ns]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("not adopted yet"), "{out}");
    let (code, hash_out) = one_shot(&ctx.cluster, &["hash", "-n", ns, "deployment/web"]);
    assert_eq!(code, 0, "{hash_out}");
    let mut wavelet = Wavelet::run(&ctx.cluster, &args(ns, &[]));
    kube.until(LONG, "adoption", || adopted(kube, "Deployment", ns, "web"));
    wavelet.kill();
    let recorded = hashes(&kube.get("Deployment", ns, "web").unwrap())
        .1
        .unwrap();
    assert!(
        hash_out.contains(&recorded),
        "hash printed {hash_out}, recorded {recorded}"
    );
    assert!(hash_out.contains("cfg"), "{hash_out}");
    let (code, out) = one_shot(&ctx.cluster, &["status", "-n", ns]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains(&format!("{ns}/web")), "{out}");
    set_data(kube, ns, "cfg", json!({"k": "2"}));
    let (code, out) = one_shot(&ctx.cluster, &["status", "-n", ns]);
    assert_eq!(code, 1, "a change while wavelet is down is pending: {out}");
}

/// A CustomResourceDefinition with a pod template at `spec.template`, through
/// `--workload-kinds`: a merge patch with the hash.
fn custom_resource(ctx: &Ctx) {
    let kube = &ctx.kube;
    let ns = "e2e-crd";
    kube.create_namespace(ns);
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.e2e.wavelet.dev"},
        "spec": {"group": "e2e.wavelet.dev", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}});
    match kube.client.post::<Value>(
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        &crd,
    ) {
        Ok(_) => {}
        Err(e) if e.status().is_some_and(|s| s.is_conflict()) => {}
        Err(e) => panic!("creating the CRD: {e}"),
    }
    let widgets = format!("/apis/e2e.wavelet.dev/v1/namespaces/{ns}/widgets");
    kube.until(LONG, "the CRD to be served", || {
        kube.client.get::<Value>(&widgets).is_ok()
    });
    kube.create(configmap(ns, "cfg", json!({"k": "1"})));
    let mut widget = workload("Deployment", ns, "w", opted_in(), mounts_configmap("cfg"));
    widget["apiVersion"] = json!("e2e.wavelet.dev/v1");
    widget["kind"] = json!("Widget");
    kube.client
        .post::<Value>(&widgets, &widget)
        .expect("creating the Widget");
    let get = || kube.client.get::<Value>(&format!("{widgets}/w")).unwrap();
    let wavelet = Wavelet::run(
        &ctx.cluster,
        &args(ns, &["--workload-kinds", "e2e.wavelet.dev/v1/widgets"]),
    );
    kube.until(LONG, "adoption", || hashes(&get()).1.is_some());
    set_data(kube, ns, "cfg", json!({"k": "2"}));
    kube.until(LONG, "the template hash", || hashes(&get()).0.is_some());
    let (template, metadata) = hashes(&get());
    assert_eq!(template, metadata);
    assert!(wavelet.output().contains("merge-patch") || !wavelet.output().contains(" 415 "));
}

/// A CronJob opted in through Reloader's key: the hash on its job template, and one Job
/// started by wavelet (owned by the CronJob) for one change.
fn cronjob(ctx: &Ctx) {
    let kube = &ctx.kube;
    let ns = "e2e-cron";
    kube.create_namespace(ns);
    kube.create(configmap(ns, "cfg", json!({"k": "1"})));
    let template = workload("Deployment", ns, "x", json!({}), mounts_configmap("cfg"))["spec"]
        ["template"]
        .clone();
    let mut template = template;
    template["spec"]["restartPolicy"] = json!("Never");
    let cron = json!({"apiVersion": "batch/v1", "kind": "CronJob",
        "metadata": {"name": "nightly", "namespace": ns, "annotations": {
            "wavelet.dev/update-on-config-change": "true", "reloader.stakater.com/auto": "true"}},
        "spec": {"schedule": "0 3 * * *", "jobTemplate": {"spec": {"template": template}}}});
    kube.client
        .post::<Value>(&format!("/apis/batch/v1/namespaces/{ns}/cronjobs"), &cron)
        .expect("creating the CronJob");
    let jobs = || -> Vec<Value> {
        let list: Value = kube
            .client
            .get(&format!("/apis/batch/v1/namespaces/{ns}/jobs"))
            .unwrap();
        list["items"].as_array().cloned().unwrap_or_default()
    };
    let wavelet = Wavelet::run(&ctx.cluster, &args(ns, &[]));
    wavelet.wait_output("adopted", LONG);
    set_data(kube, ns, "cfg", json!({"k": "2"}));
    kube.until(LONG, "one Job", || jobs().len() == 1);
    wavelet.wait_output("started Job", LONG);
    let job = &jobs()[0];
    assert_eq!(job["metadata"]["ownerReferences"][0]["name"], "nightly");
    assert_eq!(
        job["metadata"]["annotations"]["cronjob.kubernetes.io/instantiate"],
        "manual"
    );
    assert_eq!(jobs().len(), 1);
}

/// In-cluster credentials: a TokenRequest token, the CA and the namespace file at the
/// service-account path (bind-mounted in a private mount namespace), the manifests' RBAC
/// applied as shipped; both modes act and nothing is forbidden.
fn in_cluster(ctx: &Ctx) {
    let Some(port) = ctx.cluster.api_port else {
        println!("e2e in_cluster_with_shipped_rbac: skipped: needs a control plane the suite started (WAVELET_E2E_BIN_DIR)");
        return;
    };
    if !is_root() {
        assert!(
            std::env::var_os("CI").is_none(),
            "in_cluster_with_shipped_rbac needs root (a mount namespace) and CI must run it"
        );
        println!(
            "e2e in_cluster_with_shipped_rbac: skipped: needs root for a private mount namespace"
        );
        return;
    }
    let kube = &ctx.kube;
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let manifests = root.join("manifests");
    let status = ctx
        .cluster
        .kubectl()
        .args(["apply", "-f"])
        .arg(&manifests)
        .arg("-f")
        .arg(manifests.join("cluster-wide"))
        .status()
        .expect("kubectl apply");
    assert!(status.success(), "applying the manifests as shipped");
    let ns = "e2e-incluster";
    kube.create_namespace(ns);
    kube.create(configmap(ns, "cfg", json!({"k": "1"})));
    kube.create(workload(
        "Deployment",
        ns,
        "web",
        opted_in(),
        mounts_configmap("cfg"),
    ));
    let mut delete_me = configmap(ns, "worker-config", json!({"v": "1"}));
    delete_me["metadata"]["annotations"] = json!({"magalix.com/podDeleteMatch": "app=worker", "wavelet.dev/pod-delete-strategy": "delete"});
    kube.create(delete_me);
    kube.create(workload("Deployment", ns, "worker", json!({}), json!({})));
    kube.until(
        Duration::from_secs(30),
        "the wavelet ServiceAccount",
        || kube.get("ServiceAccount", "wavelet", "wavelet").is_some(),
    );
    let token: Value = kube
        .client
        .post(
            "/api/v1/namespaces/wavelet/serviceaccounts/wavelet/token",
            &json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                "spec": {"expirationSeconds": 3600}}),
        )
        .expect("a TokenRequest token");
    let sa_dir = ctx.cluster.dir().join("serviceaccount");
    std::fs::create_dir_all(&sa_dir).unwrap();
    std::fs::write(
        sa_dir.join("token"),
        token["status"]["token"].as_str().unwrap(),
    )
    .unwrap();
    std::fs::copy(ctx.cluster.ca.as_ref().unwrap(), sa_dir.join("ca.crt")).unwrap();
    std::fs::write(sa_dir.join("namespace"), "wavelet").unwrap();
    let args =
        "run --listen-addr 127.0.0.1:0 --leader-elect --debounce 300ms --min-rollout-interval 0s";
    let mut command = in_a_pod(
        &sa_dir,
        &args.split(' ').map(String::from).collect::<Vec<_>>(),
    );
    command
        .env("RUST_LOG", "debug")
        .env("KUBERNETES_SERVICE_HOST", "127.0.0.1")
        .env("KUBERNETES_SERVICE_PORT", port.to_string())
        .env("WAVELET_NAMESPACES", ns);
    if let Some(group) = ctx.cluster.process_group() {
        std::os::unix::process::CommandExt::process_group(&mut command, group);
    }
    let wavelet = Wavelet::spawn(command);
    wavelet.wait_output("initial sync complete", LONG);
    kube.until(LONG, "adoption", || adopted(kube, "Deployment", ns, "web"));
    kube.until(LONG, "worker-config recorded", || {
        kube.get("ConfigMap", "wavelet", "wavelet-state")
            .is_some_and(|s| s["data"].as_object().is_some_and(|d| !d.is_empty()))
    });
    let workers = |kube: &Kube| -> BTreeSet<String> {
        kube.list("Pod", ns)
            .into_iter()
            .filter(|p| p["metadata"]["labels"]["app"] == "worker")
            .map(|p| p["metadata"]["uid"].as_str().unwrap().to_string())
            .collect()
    };
    kube.until(LONG, "worker Pods", || workers(kube).len() == 2);
    let old_workers = workers(kube);
    set_data(kube, ns, "cfg", json!({"k": "2"}));
    set_data(kube, ns, "worker-config", json!({"v": "2"}));
    kube.until(LONG, "a rollout", || {
        revisions(kube, "Deployment", ns, "web") == 2
    });
    kube.until(LONG, "workers replaced", || {
        workers(kube).is_disjoint(&old_workers)
    });
    let output = wavelet.output();
    assert!(output.contains("https://127.0.0.1:"), "{output}");
    for forbidden in [" 403 ", "forbidden", "Forbidden"] {
        assert!(
            !output.contains(forbidden),
            "{forbidden} in the log:\n{output}"
        );
    }
}

pub fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// kube-apiserver killed and restarted while wavelet watches; a change made as soon as
/// it is back (before wavelet's watches reconnect) is rolled exactly once.
fn apiserver_restart(ctx: &Ctx) {
    if !ctx.cluster.is_own() {
        println!("e2e apiserver_restarted_mid_watch: skipped: needs a control plane the suite started (WAVELET_E2E_BIN_DIR)");
        return;
    }
    let kube = &ctx.kube;
    let ns = "e2e-restart";
    kube.create_namespace(ns);
    kube.create(configmap(ns, "cfg", json!({"k": "1"})));
    kube.create(workload(
        "Deployment",
        ns,
        "web",
        opted_in(),
        mounts_configmap("cfg"),
    ));
    let wavelet = Wavelet::run(&ctx.cluster, &args(ns, &[]));
    kube.until(LONG, "adoption", || adopted(kube, "Deployment", ns, "web"));
    ctx.cluster.kill_apiserver();
    ctx.cluster
        .start_apiserver()
        .expect("kube-apiserver back on the same port");
    set_data(kube, ns, "cfg", json!({"k": "2"}));
    kube.until(
        Duration::from_secs(120),
        "one rollout after the restart",
        || revisions(kube, "Deployment", ns, "web") == 2,
    );
    wavelet.wait_output("rolled:", LONG);
    set_data(kube, ns, "cfg", json!({"k": "3"}));
    kube.until(LONG, "the next change rolls too", || {
        revisions(kube, "Deployment", ns, "web") == 3
    });
    assert_eq!(
        lines_with(&wavelet.output(), "rolled:"),
        2,
        "{}",
        wavelet.output()
    );
}

/// `wavelet migrate wave` against the real garbage collector: a Deployment with older
/// Wave's finalizer and an unrelated one, two ConfigMaps with Wave's owner reference (one
/// also owned by an unrelated ConfigMap). The dry run changes nothing; `--apply` removes
/// exactly Wave's entries; then the Deployment can be deleted and both ConfigMaps
/// survive.
fn migrate_wave(ctx: &Ctx) {
    let kube = &ctx.kube;
    let ns = "e2e-wave";
    kube.create_namespace(ns);
    let anchor = kube.create(configmap(ns, "anchor", json!({"k": "1"})));
    let mut web = workload(
        "Deployment",
        ns,
        "web",
        json!({"wave.pusher.com/update-on-config-change": "true"}),
        mounts_configmap("a"),
    );
    web["metadata"]["finalizers"] = json!(["wave.pusher.com/finalizer", "example.com/keep"]);
    let web = kube.create(web);
    let owner = |o: &Value, kind: &str| json!({"apiVersion": o["apiVersion"], "kind": kind, "name": o["metadata"]["name"], "uid": o["metadata"]["uid"]});
    for (name, owners) in [
        ("a", json!([owner(&web, "Deployment")])),
        (
            "b",
            json!([owner(&web, "Deployment"), owner(&anchor, "ConfigMap")]),
        ),
    ] {
        let mut cm = configmap(ns, name, json!({"k": "1"}));
        cm["metadata"]["ownerReferences"] = owners;
        kube.create(cm);
    }
    let (code, out) = one_shot(&ctx.cluster, &["migrate", "wave", "-n", ns]);
    assert_eq!(code, 1, "{out}");
    assert_eq!(
        out.matches("Deployment ").count() + out.matches("ConfigMap ").count(),
        3 + 2,
        "{out}"
    );
    assert_eq!(
        kube.get("Deployment", ns, "web").unwrap()["metadata"]["finalizers"],
        json!(["wave.pusher.com/finalizer", "example.com/keep"])
    );
    let (code, out) = one_shot(&ctx.cluster, &["migrate", "wave", "-n", ns, "--apply"]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        kube.get("Deployment", ns, "web").unwrap()["metadata"]["finalizers"],
        json!(["example.com/keep"])
    );
    let (code, out) = one_shot(&ctx.cluster, &["migrate", "wave", "-n", ns]);
    assert_eq!(code, 0, "{out}");
    // The unrelated finalizer is the user's; remove it, then delete the Deployment.
    kube.merge_patch(
        "Deployment",
        ns,
        "web",
        json!({"metadata": {"finalizers": null}}),
    );
    kube.delete("Deployment", ns, "web");
    kube.until(LONG, "the Deployment gone", || {
        kube.get("Deployment", ns, "web").is_none()
    });
    // The garbage collector had its chance: an object owned only by the gone Deployment
    // would go now. A canary proves the collector runs.
    let mut canary = configmap(ns, "canary", json!({"k": "1"}));
    canary["metadata"]["ownerReferences"] = json!([owner(&web, "Deployment")]);
    kube.create(canary);
    kube.until(LONG, "the garbage collector deletes the canary", || {
        kube.get("ConfigMap", ns, "canary").is_none()
    });
    assert!(
        kube.get("ConfigMap", ns, "a").is_some(),
        "ConfigMap a was collected"
    );
    assert!(
        kube.get("ConfigMap", ns, "b").is_some(),
        "ConfigMap b was collected"
    );
}
