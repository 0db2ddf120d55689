//! The Helm chart `charts/wavelet/`, through the real `helm` binary: `helm lint` passes; with
//! default values it renders exactly the plain cluster-wide manifests (the Namespace aside:
//! `helm install --create-namespace`), with `namespaces` set exactly the plain namespaced
//! ones, with `connection=proxySidecar` exactly the plain proxy-sidecar ones, so they
//! cannot drift; every object of a matrix of values matches the API's OpenAPI schema; and
//! for a matrix of values the chart's RBAC is exactly what wavelet, started with the flags
//! the chart renders, sends in the scenario of tests/rbac.rs. A Stakater Reloader values
//! file renders: a whole copy of Reloader's own values.yaml gives wavelet's defaults, its
//! keys are mapped onto wavelet's values, and a key wavelet cannot honour fails the render
//! naming it.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::manifests::{
    assert_same_objects, container_command_line, k8s_tool, openapi_problems, parse_objects,
    plain_objects, Objects,
};
use crate::rbac::{self, Grant, Run, APPS_NAMESPACE_LABEL};
use crate::util::TempDir;

fn helm() -> Option<PathBuf> {
    k8s_tool("helm")
}

fn chart() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("charts/wavelet")
}

/// `helm template wavelet charts/wavelet -n wavelet <args>`: Ok(objects) or Err(stderr).
fn template(helm: &Path, args: &[&str]) -> Result<Objects, String> {
    let out = Command::new(helm)
        .args(["template", "wavelet"])
        .arg(chart())
        .args(["--namespace", "wavelet"])
        .args(args)
        .output()
        .unwrap();
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let text = String::from_utf8(out.stdout).unwrap();
    Ok(parse_objects("helm template", &text))
}

/// The plain objects in these directories of `manifests/`, without the Namespace.
fn plain(dirs: &[&str]) -> Objects {
    let mut objects = plain_objects(dirs);
    objects.retain(|(kind, _, _), _| kind != "Namespace");
    objects
}

#[test]
fn helm_lint_passes() {
    let Some(helm) = helm() else { return };
    let out = Command::new(helm)
        .arg("lint")
        .arg(chart())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_chart_with_default_values_renders_exactly_the_plain_cluster_wide_manifests() {
    let Some(helm) = helm() else { return };
    let got = template(&helm, &[]).unwrap();
    assert_same_objects(
        "chart defaults vs manifests/ cluster-wide",
        &got,
        &plain(&["", "cluster-wide", "in-cluster"]),
    );
}

#[test]
fn the_chart_with_namespaces_renders_exactly_the_plain_namespaced_manifests() {
    let Some(helm) = helm() else { return };
    let got = template(&helm, &["--set", "namespaces={apps}"]).unwrap();
    let mut want = plain(&["", "namespaced", "in-cluster"]);
    let deployment = want
        .get_mut(&("Deployment".into(), "wavelet".into(), "wavelet".into()))
        .unwrap();
    let env = &mut deployment["spec"]["template"]["spec"]["containers"][0]["env"][0];
    assert_eq!(env["name"], "WAVELET_NAMESPACES");
    env["value"] = Value::from("apps");
    assert_same_objects(
        "chart namespaces={apps} vs manifests/ namespaced",
        &got,
        &want,
    );
}

#[test]
fn the_chart_with_the_proxy_sidecar_renders_exactly_the_plain_proxy_sidecar_manifests() {
    let Some(helm) = helm() else { return };
    let got = template(&helm, &["--set", "connection=proxySidecar"]).unwrap();
    assert_same_objects(
        "chart connection=proxySidecar vs manifests/ proxy-sidecar",
        &got,
        &plain(&["", "cluster-wide", "proxy-sidecar"]),
    );
}

#[test]
fn the_chart_with_the_csi_integration_renders_exactly_the_plain_csi_manifests() {
    let Some(helm) = helm() else { return };
    let got = template(&helm, &["--set", "csiIntegration=true"]).unwrap();
    let mut want = crate::kustomize::plain_with_csi();
    want.retain(|(kind, _, _), _| kind != "Namespace");
    assert_same_objects(
        "chart csiIntegration=true vs manifests/ cluster-wide + csi",
        &got,
        &want,
    );
}

#[test]
fn every_object_the_chart_renders_for_a_matrix_of_values_matches_the_openapi_schema() {
    let Some(helm) = helm() else { return };
    let matrix: &[&[&str]] = &[
        &[],
        &[
            "--set",
            "namespaces={apps,web}",
            "--set",
            "leaderElection=false",
            "--set",
            "perNamespaceWatches=true",
            "--set",
            "apiQps=0.5",
            "--set",
            "apiBurst=1",
            "--set",
            "csiIntegration=true",
        ],
        &[
            "--set",
            "namespaces={a,b,c,d,e,f,g,h,i,j,k}",
        ],
        &[
            "--set",
            "dryRun=true",
            "--set",
            "logFormat=json",
            "--set",
            "replicas=2",
            "--set",
            "image.digest=sha256:0000000000000000000000000000000000000000000000000000000000000000",
            "--set",
            "imagePullSecrets[0].name=registry",
            "--set",
            "priorityClassName=high",
            "--set",
            "nodeSelector.kubernetes\\.io/arch=arm64",
            "--set",
            "tolerations[0].operator=Exists",
            "--set",
            "extraArgs={--debounce=2s}",
            "--set",
            "extraEnv[0].name=RUST_LOG",
            "--set",
            "extraEnv[0].value=debug",
        ],
        &[
            "--set",
            "connection=proxySidecar",
            "--set",
            "namespaces={apps}",
            "--set",
            "namespaceSelector=team=a",
            "--set",
            "workloadKinds={example.com/v1/widgets,example.com/v2/widgets,argoproj.io/v1alpha1/rollouts}",
            "--set",
            "leaseName=wavelet-leader",
            "--set",
            "hashKey.existingSecret=wavelet-hash-key",
            "--set",
            "debounce=0",
            "--set",
            "maxRolloutsPerSecond=0.5",
            "--set",
            "rolloutBurst=3",
            "--set",
            "minRolloutInterval=1m30s",
            "--set",
            "resync=5m",
            "--set",
            "proxySidecar.image.tag=v1.36.2",
            "--set",
            "fanOut=at-once",
            "--set",
            "firstWave=2",
            "--set",
            "waveSize=3",
            "--set",
            "rolloutTimeout=5m",
            "--set",
            "restartWindow=Mon-Fri 02:00-05:00 Europe/Berlin",
        ],
    ];
    let mut problems = Vec::new();
    for values in matrix {
        let objects = template(&helm, values).unwrap_or_else(|e| panic!("{values:?}: {e}"));
        assert!(objects.len() >= 6, "{values:?}: {} objects", objects.len());
        for (k, object) in &objects {
            problems.extend(openapi_problems(&format!("{values:?} {k:?}"), object));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn a_wrong_value_fails_at_helm_template_naming_the_value() {
    let Some(helm) = helm() else { return };
    for (value, path) in [
        ("logFormat=xml", "/logFormat"),
        ("replicas=-1", "/replicas"),
        ("namespaces={Apps}", "/namespaces/0"),
        ("image.digest=latest", "/image/digest"),
        ("leaderElecton=true", "leaderElecton"),
        ("connection=sidecar", "/connection"),
        ("debounce=5", "/debounce"),
        ("resync=0s", "/resync"),
        ("maxRolloutsPerSecond=0", "/maxRolloutsPerSecond"),
        ("apiQps=0", "/apiQps"),
        ("apiBurst=0", "/apiBurst"),
        ("workloadKinds={widgets}", "/workloadKinds/0"),
        ("hashKey.existingSecret=Key", "/hashKey/existingSecret"),
        ("fanOut=canary", "/fanOut"),
        ("waveSize=0%", "/waveSize"),
        ("rolloutTimeout=0s", "/rolloutTimeout"),
        ("csiIntegration=yes", "/csiIntegration"),
    ] {
        let err = template(&helm, &["--set", value]).expect_err(value);
        assert!(err.contains(path), "{value}: {err}");
    }
}

/// Reloader's chart as `../shared` keeps it (read in place, never copied here).
pub fn reloader_chart() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/third-party/reloader-chart-2.2.16")
}

/// A Reloader values file with a value for most keys wavelet honours.
const RELOADER_VALUES: &str = r#"
global:
  imagePullSecrets: [my-pull-secret]
reloader:
  autoReloadAll: true
  ignoreSecrets: true
  ignoreCronJobs: true
  reloadOnCreate: true
  reloadStrategy: annotations
  ignoreNamespaces: kube-system,flux
  namespaceSelector: "team=a"
  resourceLabelSelector: "reload=yes"
  logFormat: json
  logLevel: debug
  enableHA: true
  enableMetricsByNamespace: true
  isArgoRollouts: true
  matchLabels: {team: platform}
  leaderElection: {leaseDuration: 30s, renewDeadline: 20s, retryPeriod: 5s}
  deployment:
    replicas: 2
    nodeSelector: {kubernetes.io/os: linux}
    tolerations: [{key: infra, operator: Exists}]
    topologySpreadConstraints: [{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule}]
    priorityClassName: high
    resources: {limits: {memory: 128Mi}}
    containerSecurityContext: {runAsUser: 1000}
    annotations: {owner: platform}
    labels: {cost-center: "42"}
    pod: {annotations: {sidecar.istio.io/inject: "false"}}
    env:
      open: {HTTPS_PROXY: "http://proxy:3128"}
      secret: {ALERT_ON_RELOAD: "true", ALERT_SINK: slack, ALERT_WEBHOOK_URL: "https://hooks.example/T0"}
      field: {MY_POD: metadata.name}
      existing: {alert-secrets: {ALERT_ADDITIONAL_INFO: info}}
    livenessProbe: {timeoutSeconds: 7}
  service: {port: 9091, labels: {svc: x}}
  serviceMonitor: {enabled: true, labels: {release: kps}, interval: 15s, timeout: 5s}
  podMonitor: {enabled: true, labels: {release: kps}}
  podDisruptionBudget: {enabled: true, maxUnavailable: 1}
  netpol: {enabled: true, from: [{podSelector: {matchLabels: {app: prometheus}}}]}
  rbac: {labels: {rbac: x}}
  serviceAccount: {name: reloader-sa}
"#;

#[test]
fn a_whole_copy_of_reloaders_values_file_renders_wavelets_defaults() {
    let Some(helm) = helm() else { return };
    let copy = reloader_chart().join("values.yaml");
    let got = template(&helm, &["-f", copy.to_str().unwrap()]).unwrap();
    assert_same_objects(
        "Reloader's values.yaml vs the chart's defaults",
        &got,
        &template(&helm, &[]).unwrap(),
    );
}

#[test]
fn a_reloader_values_file_is_mapped_onto_wavelets_values() {
    let Some(helm) = helm() else { return };
    let dir = TempDir::new("reloader-values");
    let file = dir.write("values.yaml", RELOADER_VALUES);
    let objects = template(&helm, &["-f", file.to_str().unwrap()]).unwrap();
    let kinds: BTreeSet<&str> = objects.keys().map(|(kind, _, _)| kind.as_str()).collect();
    for kind in [
        "PodMonitor",
        "ServiceMonitor",
        "PodDisruptionBudget",
        "NetworkPolicy",
        "Secret",
    ] {
        assert!(kinds.contains(kind), "no {kind}: {kinds:?}");
    }
    let deployment = &objects[&("Deployment".into(), "wavelet".into(), "wavelet".into())];
    let pod = &deployment["spec"]["template"]["spec"];
    let (args, env) = container_command_line(&pod["containers"][0]);
    for arg in [
        "--leader-elect",
        "--log-format=json",
        "--log-level=debug",
        "--auto-reload-all",
        "--ignore-secrets",
        "--ignored-workload-types=cronjobs",
        "--namespace-selector=team=a",
        "--is-Argo-Rollouts=true",
        "--reload-on-create=true",
        "--reload-strategy=annotations",
        "--namespaces-to-ignore=kube-system,flux",
        "--resource-label-selector=reload=yes",
        "--lease-duration=30s",
        "--renew-deadline=20s",
        "--retry-period=5s",
        "--metrics-count-by-namespace=enabled",
    ] {
        assert!(args.iter().any(|a| a == arg), "{arg} missing: {args:?}");
    }
    assert!(
        env.contains(&("HTTPS_PROXY".into(), "http://proxy:3128".into())),
        "{env:?}"
    );
    let secret_ref = &pod["containers"][0]["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "ALERT_WEBHOOK_URL")
        .unwrap()["valueFrom"]["secretKeyRef"];
    assert_eq!(secret_ref["name"], "wavelet-env");
    let secret = &objects[&("Secret".into(), "wavelet".into(), "wavelet-env".into())];
    assert_eq!(
        secret["data"]["ALERT_WEBHOOK_URL"],
        wavelet::objects::base64::encode(b"https://hooks.example/T0")
    );
    assert_eq!(deployment["spec"]["replicas"], 2);
    assert_eq!(deployment["metadata"]["labels"]["team"], "platform");
    assert_eq!(deployment["metadata"]["annotations"]["owner"], "platform");
    assert_eq!(
        deployment["spec"]["template"]["metadata"]["annotations"]["sidecar.istio.io/inject"],
        "false"
    );
    assert_eq!(pod["serviceAccountName"], "reloader-sa");
    assert_eq!(pod["imagePullSecrets"][0]["name"], "my-pull-secret");
    assert_eq!(pod["topologySpreadConstraints"][0]["topologyKey"], "zone");
    assert_eq!(pod["containers"][0]["securityContext"]["runAsUser"], 1000);
    assert_eq!(
        pod["containers"][0]["securityContext"]["readOnlyRootFilesystem"], true,
        "kept"
    );
    assert_eq!(pod["containers"][0]["livenessProbe"]["timeoutSeconds"], 7);
    let service = &objects[&("Service".into(), "wavelet".into(), "wavelet-metrics".into())];
    assert_eq!(service["spec"]["ports"][0]["port"], 9091);
    // The RBAC follows: no Secrets, no CronJobs or Jobs; bound to the ServiceAccount named.
    let grants = bound_grants_of(&objects, "reloader-sa");
    let resources: BTreeSet<&str> = grants.iter().map(|g| g.resource.as_str()).collect();
    for absent in ["secrets", "cronjobs", "jobs"] {
        assert!(
            !resources.contains(absent),
            "{absent} granted: {resources:?}"
        );
    }
    // The schemas here have no NetworkPolicy nor the Prometheus Operator's kinds: the real
    // server checks the NetworkPolicy (tests/e2e/chart.rs).
    let mut problems = Vec::new();
    for (k, object) in &objects {
        if !["NetworkPolicy", "PodMonitor", "ServiceMonitor"].contains(&k.0.as_str()) {
            problems.extend(openapi_problems(&format!("{k:?}"), object));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn a_reloader_value_other_than_reloaders_default_wins_over_wavelets_own() {
    let Some(helm) = helm() else { return };
    let args_of = |values: &[&str]| -> Vec<String> {
        let objects = template(&helm, values).unwrap();
        let deployment = &objects[&("Deployment".into(), "wavelet".into(), "wavelet".into())];
        container_command_line(&deployment["spec"]["template"]["spec"]["containers"][0]).0
    };
    let has = |args: &[String], arg: &str| args.iter().any(|a| a == arg);
    // Non-default: Reloader's wins.
    let args = args_of(&[
        "--set",
        "logFormat=text",
        "--set",
        "reloader.logFormat=json",
    ]);
    assert!(has(&args, "--log-format=json"), "{args:?}");
    let args = args_of(&[
        "--set",
        "leaderElection=false",
        "--set",
        "reloader.enableHA=true",
    ]);
    assert!(has(&args, "--leader-elect"), "{args:?}");
    // Reloader's defaults change nothing.
    let args = args_of(&["--set", "logFormat=json", "--set", "reloader.logFormat="]);
    assert!(has(&args, "--log-format=json"), "{args:?}");
    let args = args_of(&[
        "--set",
        "leaderElection=true",
        "--set",
        "reloader.enableHA=false",
    ]);
    assert!(has(&args, "--leader-elect"), "{args:?}");
    let args = args_of(&["--set", "reloader.logLevel=info"]);
    assert!(
        !args.iter().any(|a| a.starts_with("--log-level")),
        "{args:?}"
    );
}

#[test]
fn reloaders_scoped_mode_watches_the_release_namespace_and_the_ones_listed() {
    let Some(helm) = helm() else { return };
    let objects = template(
        &helm,
        &[
            "--set",
            "reloader.watchGlobally=false",
            "--set",
            r"reloader.namespaces=apps\,web",
        ],
    )
    .unwrap();
    let roles: BTreeSet<&str> = objects
        .keys()
        .filter(|(kind, _, name)| kind == "Role" && name == "wavelet-watch")
        .map(|(_, ns, _)| ns.as_str())
        .collect();
    assert_eq!(roles, BTreeSet::from(["apps", "wavelet", "web"]));
    assert!(!objects.keys().any(|(kind, _, _)| kind == "ClusterRole"));
    let deployment = &objects[&("Deployment".into(), "wavelet".into(), "wavelet".into())];
    let (_, env) = container_command_line(&deployment["spec"]["template"]["spec"]["containers"][0]);
    assert!(
        env.contains(&("WAVELET_NAMESPACES".into(), "apps,wavelet,web".into())),
        "{env:?}"
    );
}

#[test]
fn a_reloader_value_wavelet_cannot_honour_fails_the_render_naming_it() {
    let Some(helm) = helm() else { return };
    for (value, named) in [
        ("reloader.isOpenshift=true", "reloader.isOpenshift"),
        ("reloader.enablePProf=true", "reloader.enablePProf"),
        (
            "reloader.enableCSIIntegration=true",
            "reloader.enableCSIIntegration",
        ),
        (
            "reloader.custom_annotations.auto=my.company/auto",
            "reloader.custom_annotations",
        ),
        (
            "reloader.webhookUrl=https://hooks.example/x",
            "reloader.webhookUrl",
        ),
        (
            "reloader.verticalPodAutoscaler.enabled=true",
            "reloader.verticalPodAutoscaler.enabled",
        ),
        ("reloader.reloadStrategy=restart", "reloader.reloadStrategy"),
        ("reloader.namespaces={apps}", "reloader.namespaces"),
        ("reloader.autoReloadAl=true", "reloader.autoReloadAl"),
        (
            "reloader.deployment.replica=2",
            "reloader.deployment.replica",
        ),
        (
            "reloader.deployment.env.opn.A=b",
            "reloader.deployment.env.opn",
        ),
        ("nameOverride=rl", "nameOverride"),
        ("fullnameOverride=rl", "fullnameOverride"),
        (
            "global.imageRegistry=registry.example.com",
            "global.imageRegistry",
        ),
        (
            "image.repository=registry.example.com/stakater/reloader",
            "image.repository",
        ),
    ] {
        let err = template(&helm, &["--set", value]).expect_err(value);
        assert!(
            err.contains(&format!("{named}: ")) && err.contains("Coming from Reloader"),
            "{value}: {err}"
        );
    }
    let both = template(
        &helm,
        &[
            "--set",
            "reloader.ignoreSecrets=true",
            "--set",
            "reloader.ignoreConfigMaps=true",
        ],
    );
    assert!(both.expect_err("both").contains("reloader.ignoreSecrets: "));
}

/// Every grant of the roles bound to ServiceAccount `name`.
fn bound_grants_of(objects: &Objects, name: &str) -> Vec<Grant> {
    let mut grants = Vec::new();
    for ((kind, ns, _), binding) in objects {
        if kind != "RoleBinding" && kind != "ClusterRoleBinding" {
            continue;
        }
        if !binding["subjects"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["name"] == name)
        {
            continue;
        }
        let role_kind = binding["roleRef"]["kind"].as_str().unwrap().to_string();
        let role_ns = if role_kind == "Role" {
            ns.clone()
        } else {
            String::new()
        };
        let role = (
            role_kind,
            role_ns,
            binding["roleRef"]["name"].as_str().unwrap().to_string(),
        );
        grants.extend(rbac::grants(&objects[&role]));
    }
    grants
}

/// The grants of every Role and ClusterRole the chart binds to its ServiceAccount; a role
/// that nothing binds, or a binding to a role the chart does not render, is a failure.
fn bound_grants(what: &str, objects: &Objects) -> Vec<Grant> {
    let mut bound = BTreeSet::new();
    for ((kind, ns, name), binding) in objects {
        if kind != "RoleBinding" && kind != "ClusterRoleBinding" {
            continue;
        }
        let subjects = binding["subjects"].as_array().unwrap();
        assert!(
            subjects.iter().all(|s| s["kind"] == "ServiceAccount"
                && s["name"] == "wavelet"
                && s["namespace"] == "wavelet"),
            "{what}: {kind} {ns}/{name} binds something else than wavelet's ServiceAccount"
        );
        let role_kind = binding["roleRef"]["kind"].as_str().unwrap().to_string();
        let role_ns = if role_kind == "Role" {
            ns.clone()
        } else {
            String::new()
        };
        let role_name = binding["roleRef"]["name"].as_str().unwrap().to_string();
        let role = (role_kind, role_ns, role_name);
        assert!(
            objects.contains_key(&role),
            "{what}: {kind} {ns}/{name} names {role:?}, which the chart does not render"
        );
        bound.insert(role);
    }
    let roles: BTreeSet<_> = objects
        .keys()
        .filter(|(kind, _, _)| kind == "Role" || kind == "ClusterRole")
        .cloned()
        .collect();
    assert_eq!(roles, bound, "{what}: roles that nothing binds");
    roles
        .iter()
        .flat_map(|role| rbac::grants(&objects[role]))
        .collect()
}

/// How the chart's Deployment starts wavelet, for the scenario: the wavelet container's
/// args (after `run`) and env as the kubelet passes them, with the fake standing in for the
/// proxy sidecar (`--server` is the scenario's) and a key file written where the Secret
/// would be mounted.
fn chart_run(objects: &Objects, key_dir: &TempDir) -> Run {
    let deployment = &objects[&("Deployment".into(), "wavelet".into(), "wavelet".into())];
    let (args, env) =
        container_command_line(&deployment["spec"]["template"]["spec"]["containers"][0]);
    assert_eq!(args[0], "run");
    let mut run_args = Vec::new();
    let mut rest = args[1..].iter();
    while let Some(arg) = rest.next() {
        if arg == "--server" {
            assert_eq!(
                rest.next().map(String::as_str),
                Some("http://127.0.0.1:8001")
            );
        } else if let Some(path) = arg.strip_prefix("--hash-key-file=") {
            let file = key_dir.write("hash-key", "not a real key\n");
            assert!(path.starts_with("/etc/wavelet/hash-key/"), "{path}");
            run_args.push(format!("--hash-key-file={}", file.display()));
        } else {
            run_args.push(arg.clone());
        }
    }
    Run {
        args: run_args,
        env,
    }
}

/// The RBAC the chart renders for each set of values is exactly what wavelet sends when it
/// runs with the flags the chart renders for them: every request allowed, every grant
/// used (tests/rbac.rs's scenario and check). With Roles, `namespaces` is at most `apps`
/// here, the one namespace the scenario has workloads in: a Role in an empty namespace
/// would be (rightly) reported as unused; above 10 namespaces the chart grants the
/// ClusterRole, and wavelet's LISTs and watches are over all namespaces.
#[test]
fn the_charts_rbac_is_exactly_what_wavelet_sends_with_the_flags_it_renders() {
    let Some(helm) = helm() else { return };
    let (key, value) = APPS_NAMESPACE_LABEL;
    let selector = format!("namespaceSelector={key}={value}");
    let matrix: Vec<Vec<&str>> = vec![
        vec![],
        vec!["--set", "leaderElection=false"],
        vec![
            "--set",
            "namespaces={apps}",
            "--set",
            "workloadKinds={example.com/v1/widgets}",
            "--set",
            &selector,
            "--set",
            "leaseName=wavelet-leader",
            "--set",
            "connection=proxySidecar",
            "--set",
            "debounce=200ms",
            "--set",
            "minRolloutInterval=0",
            "--set",
            "maxRolloutsPerSecond=100",
        ],
        vec![
            "--set",
            "workloadKinds={example.com/v1/widgets,argoproj.io/v1alpha1/rollouts}",
            "--set",
            "waveSize=50%",
            "--set",
            "firstWave=2",
            "--set",
            "rolloutTimeout=5m",
            "--set",
            &selector,
            "--set",
            "hashKey.existingSecret=wavelet-hash-key",
            "--set",
            "resync=5m",
            "--set",
            "rolloutBurst=5",
            "--set",
            "logFormat=json",
        ],
        vec![
            "--set",
            "namespaces={apps}",
            "--set",
            "leaderElection=false",
            "--set",
            "perNamespaceWatches=true",
            "--set",
            "apiQps=50",
            "--set",
            "apiBurst=60",
        ],
        // A Reloader values file: its RBAC follows the keys mapped.
        vec![
            "--set",
            "reloader.autoReloadAll=true",
            "--set",
            "reloader.ignoreSecrets=true",
            "--set",
            "reloader.ignoreCronJobs=true",
            "--set",
            "reloader.enableHA=true",
            "--set",
            "reloader.isArgoRollouts=true",
            "--set",
            "reloader.logLevel=debug",
        ],
        // More than 10 namespaces: wavelet watches all namespaces once and keeps these, and
        // the chart grants the ClusterRole.
        vec!["--set", "namespaces={apps,n1,n2,n3,n4,n5,n6,n7,n8,n9,n10}"],
        vec!["--set", "csiIntegration=true"],
        vec!["--set", "namespaces={apps}", "--set", "csiIntegration=true"],
    ];
    // Each scenario has its own fake API server: run them side by side.
    std::thread::scope(|scope| {
        let runs: Vec<_> = matrix
            .iter()
            .map(|values| {
                let helm = &helm;
                scope.spawn(move || {
                    let what = format!("the chart's RBAC for {values:?}");
                    let objects = template(helm, values).unwrap_or_else(|e| panic!("{what}: {e}"));
                    let grants = bound_grants(&what, &objects);
                    let key_dir = TempDir::new("chart-hash-key");
                    let accesses = rbac::both_modes_scenario(&chart_run(&objects, &key_dir));
                    rbac::assert_exactly(&what, &grants, &accesses);
                    // The chart and wavelet agree on when the watches go cluster-wide.
                    let cluster_role = objects.iter().any(|((kind, _, _), role)| {
                        kind == "ClusterRole"
                            && role["rules"].as_array().unwrap().iter().any(|r| {
                                r["resources"]
                                    .as_array()
                                    .unwrap()
                                    .iter()
                                    .any(|x| x == "configmaps")
                            })
                    });
                    // (The watch of wavelet-state itself is one object in wavelet's own
                    // namespace in every shape.)
                    let namespaced_watch = accesses.iter().any(|a| {
                        a.verb == "watch"
                            && a.resource == "configmaps"
                            && !a.namespace.is_empty()
                            && a.name.is_none()
                    });
                    assert_eq!(
                        namespaced_watch, !cluster_role,
                        "{what}: watches per namespace: {namespaced_watch}"
                    );
                })
            })
            .collect();
        let failures: Vec<String> = runs
            .into_iter()
            .zip(&matrix)
            .filter_map(|(run, values)| run.join().err().map(|_| format!("{values:?}")))
            .collect();
        assert!(
            failures.is_empty(),
            "failed for: {failures:#?} (messages above)"
        );
    });
}
