//! The Helm chart `charts/wavelet/`, through the real `helm` binary: `helm lint` passes; with
//! default values it renders exactly the plain cluster-wide manifests (the Namespace aside:
//! `helm install --create-namespace`), with `namespaces` set exactly the plain namespaced
//! ones, with `connection=proxySidecar` exactly the plain proxy-sidecar ones, so they
//! cannot drift; every object of a matrix of values matches the API's OpenAPI schema; and
//! for a matrix of values the chart's RBAC is exactly what wavelet, started with the flags
//! the chart renders, sends in the scenario of tests/rbac.rs.

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
            "csiIntegration=true",
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
        ("workloadKinds={widgets}", "/workloadKinds/0"),
        ("hashKey.existingSecret=Key", "/hashKey/existingSecret"),
        ("csiIntegration=yes", "/csiIntegration"),
    ] {
        let err = template(&helm, &["--set", value]).expect_err(value);
        assert!(err.contains(path), "{value}: {err}");
    }
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
/// used (tests/rbac.rs's scenario and check). `namespaces` is at most `apps` here, the
/// one namespace the scenario has workloads in: a Role in an empty namespace would be
/// (rightly) reported as unused.
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
        ],
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
