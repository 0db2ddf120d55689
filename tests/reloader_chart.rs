//! A Reloader values file gives the same behaviour through either chart: Stakater
//! Reloader's own chart (2.2.16, read in place from `../shared/third-party/`) with the
//! image swapped, and wavelet's chart. For each common set of values, wavelet is started
//! with each chart's container args and env (as the kubelet resolves them) against a fake
//! API server holding the same objects, a ConfigMap changes, and the two send the same
//! requests: the same resources watched in the same namespaces with the same selectors,
//! the same workloads adopted and rolled (Events aside). (wavelet's chart elects a leader by default,
//! Reloader's only with `enableHA`: Lease requests are compared only there.) The real API
//! server runs Reloader's chart as is in tests/e2e/reloader_chart.rs.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use serde_json::json;

use crate::chart::reloader_chart;
use crate::fake::FakeApi;
use crate::manifests::{k8s_tool, parse_objects, Objects};
use crate::util::*;

/// The release namespace both charts are rendered for.
const RELEASE_NS: &str = "wavelet";

/// `--set`/`--set-string` pairs of each value set.
fn value_sets() -> Vec<(&'static str, Vec<&'static str>)> {
    vec![
        ("defaults", vec![]),
        (
            "ha",
            vec![
                "--set",
                "reloader.enableHA=true",
                "--set",
                "reloader.deployment.replicas=2",
            ],
        ),
        (
            "ignore_secrets_auto_reload_all",
            vec![
                "--set",
                "reloader.ignoreSecrets=true",
                "--set",
                "reloader.autoReloadAll=true",
            ],
        ),
        (
            "watch_globally_false",
            vec!["--set", "reloader.watchGlobally=false"],
        ),
        (
            "scoped_namespaces",
            vec![
                "--set",
                "reloader.watchGlobally=false",
                "--set",
                "reloader.namespaces=apps",
            ],
        ),
        (
            "json_debug",
            vec![
                "--set",
                "reloader.logFormat=json",
                "--set",
                "reloader.logLevel=debug",
            ],
        ),
        (
            "create_delete_sync",
            vec![
                "--set",
                "reloader.reloadOnCreate=true",
                "--set",
                "reloader.reloadOnDelete=true",
                "--set",
                "reloader.syncAfterRestart=true",
            ],
        ),
        (
            "annotations",
            vec!["--set", "reloader.reloadStrategy=annotations"],
        ),
        (
            "argo_rollouts",
            vec!["--set", "reloader.isArgoRollouts=true"],
        ),
        (
            "ignore_namespaces_selectors",
            vec![
                "--set",
                "reloader.ignoreNamespaces=kube-system",
                "--set",
                "reloader.resourceLabelSelector=reload=yes",
                "--set",
                "reloader.namespaceSelector=reload=yes",
            ],
        ),
        (
            "alerts_and_metrics_by_namespace",
            vec![
                "--set",
                "reloader.enableMetricsByNamespace=true",
                "--set-string",
                "reloader.deployment.env.secret.ALERT_ON_RELOAD=true",
                "--set-string",
                "reloader.deployment.env.secret.ALERT_SINK=slack",
                "--set-string",
                "reloader.deployment.env.secret.ALERT_WEBHOOK_URL=http://127.0.0.1:9/hooks/T0",
            ],
        ),
    ]
}

fn render(helm: &Path, chart: &Path, values: &[&str]) -> Objects {
    let out = Command::new(helm)
        .args(["template", "wavelet"])
        .arg(chart)
        .args(["--namespace", RELEASE_NS])
        .args([
            "--set",
            "image.repository=wavelet",
            "--set",
            "image.tag=0.1.0",
        ])
        .args(values)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "helm template {} {values:?}: {}",
        chart.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    parse_objects("helm template", &String::from_utf8(out.stdout).unwrap())
}

/// The Deployment's container as the kubelet starts it from the image (entrypoint
/// `/wavelet`, command `run`): the args after `run`, and the env resolved.
fn container(objects: &Objects) -> (Vec<String>, Vec<(String, String)>) {
    let deployment = objects
        .iter()
        .find(|((kind, _, _), _)| kind == "Deployment")
        .map(|(_, d)| d)
        .expect("a Deployment");
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    let mut args: Vec<String> = container["args"]
        .as_array()
        .map(|a| a.iter().map(|v| v.as_str().unwrap().to_string()).collect())
        .unwrap_or_default();
    if args.first().map(String::as_str) == Some("run") {
        args.remove(0);
    }
    let mut env = Vec::new();
    for var in container["env"].as_array().into_iter().flatten() {
        let name = var["name"].as_str().unwrap().to_string();
        let from = &var["valueFrom"];
        let value = if let Some(value) = var["value"].as_str() {
            value.to_string()
        } else if let Some(path) = from["fieldRef"]["fieldPath"].as_str() {
            match path {
                "metadata.namespace" => RELEASE_NS.to_string(),
                "metadata.name" => "wavelet-0".to_string(),
                other => panic!("fieldRef {other}"),
            }
        } else if from["resourceFieldRef"].is_object() {
            "2".to_string()
        } else if let Some(secret) = from["secretKeyRef"]["name"].as_str() {
            let key = from["secretKeyRef"]["key"].as_str().unwrap();
            let object = &objects[&("Secret".into(), RELEASE_NS.into(), secret.into())];
            let encoded = object["data"][key].as_str().unwrap();
            String::from_utf8(wavelet::objects::base64::decode(encoded.as_bytes()).unwrap())
                .unwrap()
        } else {
            panic!("env {var}");
        };
        env.push((name, value));
    }
    (args, env)
}

/// The same objects for both: in `apps` (labelled `reload=yes`) and in the release
/// namespace, a ConfigMap `cfg` (labelled too), a Deployment opted in with Reloader's
/// `auto` and one without annotations, and an Argo Rollout.
fn world() -> FakeApi {
    let fake = FakeApi::start();
    fake.register_resource("argoproj.io", "v1alpha1", "rollouts", "Rollout");
    for ns in ["apps", RELEASE_NS, "kube-system"] {
        fake.apply(json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": ns, "labels": {"reload": "yes"}}}));
        let mut cm = configmap(ns, "cfg", &[("k", "1")]);
        cm["metadata"]["labels"] = json!({"reload": "yes"});
        fake.apply(cm);
        let auto = json!({"reloader.stakater.com/auto": "true"});
        fake.apply(workload(
            "Deployment",
            ns,
            "web",
            auto.clone(),
            mounts_configmap("cfg"),
        ));
        fake.apply(workload(
            "Deployment",
            ns,
            "plain",
            json!({}),
            mounts_configmap("cfg"),
        ));
        let mut rollout = workload("Deployment", ns, "canary", auto, mounts_configmap("cfg"));
        rollout["apiVersion"] = json!("argoproj.io/v1alpha1");
        rollout["kind"] = json!("Rollout");
        fake.apply(rollout);
    }
    fake
}

/// What wavelet did, started as `(args, env)`: the requests it sent (GETs with their
/// selectors, writes by path; Leases apart), whether it took a Lease, and its output.
fn observe(
    what: &str,
    args: &[String],
    env: &[(String, String)],
) -> (BTreeSet<String>, bool, String) {
    let fake = world();
    let mut all: Vec<&str> = args.iter().map(String::as_str).collect();
    // Out of a cluster: where its Lease and state live.
    all.extend([
        "--lease-namespace",
        RELEASE_NS,
        "--state-namespace",
        RELEASE_NS,
    ]);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let wavelet = Wavelet::start_with_env(&fake, &all, &env);
    let scoped = env.iter().any(|(k, v)| {
        (*k == "KUBERNETES_NAMESPACE" || *k == "WAVELET_NAMESPACES") && !v.is_empty()
    });
    let ns = if scoped && !args.iter().any(|a| a.contains("apps")) {
        RELEASE_NS
    } else {
        "apps"
    };
    // Every opted-in workload adopted before the change: one adopted after it would take
    // the new hash without a rollout, and whether a fan-out (and its state entry) happens
    // would depend on timing.
    wait_all_adopted(&fake, &wavelet);
    eventually(&fake, &wavelet, &format!("{what}: adoption"), |f| {
        hashes(f, "deployments", ns, "web", "wavelet.dev/config-hash")
            .1
            .is_some()
    });
    for namespace in ["apps", RELEASE_NS, "kube-system"] {
        fake.merge_patch("configmaps", namespace, "cfg", json!({"data": {"k": "2"}}));
    }
    eventually(&fake, &wavelet, &format!("{what}: the rollout"), |f| {
        template_patches(f, "deployments", ns, "web") == 1
    });
    // Every workload the change reaches rolls within the same debounce window as `web`:
    // wait until nothing new has been sent for twice that window.
    let quiet = std::time::Duration::from_secs(2);
    let mut count = fake.requests().len();
    let mut since = std::time::Instant::now();
    while since.elapsed() < quiet {
        std::thread::sleep(std::time::Duration::from_millis(100));
        let now = fake
            .requests()
            .iter()
            .filter(|r| !r.path.contains("/leases"))
            .count();
        if now != count {
            (count, since) = (now, std::time::Instant::now());
        }
    }
    let output = wavelet.output();
    let mut seen = BTreeSet::new();
    let mut leases = false;
    for request in fake.requests() {
        if request.path.contains("/leases") {
            leases = true;
            continue;
        }
        // Events follow the patches compared here; how many the recorder sends is its own.
        if request.path.ends_with("/events") {
            continue;
        }
        let mut line = format!("{} {}", request.method, request.path);
        for key in ["labelSelector", "fieldSelector", "watch"] {
            if let Some(value) = request.query_param(key) {
                line.push_str(&format!(" {key}={value}"));
            }
        }
        seen.insert(line);
    }
    (seen, leases, output)
}

#[test]
fn a_reloader_values_file_gives_the_same_behaviour_through_reloaders_chart_and_wavelets() {
    let Some(helm) = k8s_tool("helm") else { return };
    let wavelet_chart = Path::new(env!("CARGO_MANIFEST_DIR")).join("charts/wavelet");
    std::thread::scope(|scope| {
        let runs: Vec<_> = value_sets()
            .into_iter()
            .map(|(name, values)| {
                let (helm, wavelet_chart) = (&helm, &wavelet_chart);
                scope.spawn(move || {
                    let theirs = container(&render(helm, &reloader_chart(), &values));
                    let ours = container(&render(helm, wavelet_chart, &values));
                    let (seen_theirs, lease_theirs, out_theirs) =
                        observe(&format!("{name}, Reloader's chart"), &theirs.0, &theirs.1);
                    let (seen_ours, lease_ours, out_ours) =
                        observe(&format!("{name}, wavelet's chart"), &ours.0, &ours.1);
                    let only = |a: &BTreeSet<String>, b: &BTreeSet<String>| -> Vec<String> {
                        a.difference(b).cloned().collect()
                    };
                    assert!(
                        seen_theirs == seen_ours,
                        "{name}: different requests\nonly through Reloader's chart ({:?}): {:#?}\nonly through wavelet's ({:?}): {:#?}",
                        theirs,
                        only(&seen_theirs, &seen_ours),
                        ours,
                        only(&seen_ours, &seen_theirs),
                    );
                    if lease_theirs {
                        assert!(lease_ours, "{name}: Reloader's chart elects a leader, wavelet's does not");
                    }
                    for out in [&out_theirs, &out_ours] {
                        let alerts = out.contains("alerts on rollout: slack payloads");
                        assert_eq!(alerts, name.starts_with("alerts"), "{name}:\n{out}");
                    }
                })
            })
            .collect();
        let failed: Vec<String> = runs
            .into_iter()
            .filter_map(|r| r.join().err())
            .map(|e| {
                e.downcast_ref::<String>()
                    .cloned()
                    .unwrap_or_else(|| "a panic".into())
            })
            .collect();
        assert!(failed.is_empty(), "{}", failed.join("\n\n"));
    });
}

/// `wavelet migrate reloader` against Reloader's chart as installed (its Deployment, rendered
/// with HA, ignored Secrets and the ALERT_* variables) and the workloads it manages: what
/// wavelet makes of each setting, what it will do with each workload, the switch order;
/// nothing written, no Secret read.
#[test]
fn migrate_reloader_finds_reloader_and_says_what_the_switch_will_do() {
    let Some(helm) = k8s_tool("helm") else { return };
    let objects = render(
        &helm,
        &reloader_chart(),
        &[
            "--set",
            "image.repository=ghcr.io/stakater/reloader",
            "--set",
            "image.tag=v1.4.21",
            "--set",
            "reloader.enableHA=true",
            "--set",
            "reloader.ignoreSecrets=true",
            "--set",
            "reloader.watchGlobally=false",
            "--set",
            "reloader.namespaces=apps",
            "--set-string",
            "reloader.deployment.env.secret.ALERT_WEBHOOK_URL=https://hooks.example/T0KEN",
        ],
    );
    let fake = FakeApi::start();
    for ns in [RELEASE_NS, "apps", "other"] {
        fake.apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}));
    }
    for ((kind, _, _), object) in &objects {
        if kind == "Deployment" {
            fake.apply(object.clone());
        }
    }
    // What Reloader left: a STAKATER_ variable, a paused Deployment, a CronJob.
    let auto = json!({"reloader.stakater.com/auto": "true"});
    let mut web = workload(
        "Deployment",
        "apps",
        "web",
        auto.clone(),
        mounts_configmap("cfg"),
    );
    web["spec"]["template"]["spec"]["containers"][0]["env"] =
        json!([{"name": "STAKATER_CFG_CONFIGMAP", "value": "1f2e"}]);
    fake.apply(web);
    let mut paused = workload(
        "Deployment",
        "apps",
        "paused",
        json!({"reloader.stakater.com/auto": "true", "deployment.reloader.stakater.com/pause-period": "5m"}),
        mounts_configmap("cfg"),
    );
    paused["spec"]["paused"] = json!(true);
    fake.apply(paused);
    let mut nightly = workload(
        "Deployment",
        "apps",
        "nightly",
        auto.clone(),
        mounts_configmap("cfg"),
    );
    let template = nightly["spec"]["template"].take();
    nightly["apiVersion"] = json!("batch/v1");
    nightly["kind"] = json!("CronJob");
    nightly["spec"] =
        json!({"schedule": "0 3 * * *", "jobTemplate": {"spec": {"template": template}}});
    fake.apply(nightly);
    fake.apply(workload(
        "Deployment",
        "apps",
        "untouched",
        json!({}),
        mounts_configmap("cfg"),
    ));
    // Outside Reloader's namespaces: not its.
    fake.apply(workload(
        "Deployment",
        "other",
        "elsewhere",
        auto,
        mounts_configmap("cfg"),
    ));

    let out = wavelet_command()
        .args(["migrate", "reloader", "--server", &fake.url()])
        .env_clear()
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    if std::env::var_os("WAVELET_SHOW").is_some() {
        println!("{stdout}");
    }
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for said in [
        "Reloader Deployment wavelet/wavelet-reloader: image ghcr.io/stakater/reloader:v1.4.21",
        "--enable-ha=true",
        "--leader-elect",
        "--resources-to-ignore=secrets",
        "--ignore-secrets",
        "--namespaces=apps,wavelet",
        "ALERT_WEBHOOK_URL from Secret wavelet-reloader, key ALERT_WEBHOOK_URL",
        "With the image swapped, wavelet starts with these args and env as they are:",
        "--log-level: logging at info",
        "Deployment apps/web: adopts it without a rollout",
        "leaves STAKATER_CFG_CONFIGMAP on its pod template (they roll nothing)",
        "Deployment apps/paused: adopts it without a rollout",
        "PAUSED",
        "CronJob apps/nightly: adopts it without a rollout",
        "kubectl -n wavelet scale deployment/wavelet-reloader --replicas=0",
        "wavelet status",
    ] {
        assert!(stdout.contains(said), "{said:?} missing:\n{stdout}");
    }
    for absent in ["untouched", "elsewhere", "T0KEN"] {
        assert!(!stdout.contains(absent), "{absent}:\n{stdout}");
    }
    let writes: Vec<_> = fake
        .requests()
        .into_iter()
        .filter(|r| r.method != "GET" || r.path.contains("/secrets"))
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert!(writes.is_empty(), "read-only, no Secret read: {writes:?}");

    // Without Reloader: says so, exit 1.
    let empty = FakeApi::start();
    let out = wavelet_command()
        .args(["migrate", "reloader", "--server", &empty.url()])
        .env_clear()
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("no Stakater Reloader Deployment found"));
}
