//! The Helm chart `charts/wavelet/`, through the real `helm` binary: `helm lint` passes; with
//! default values it renders exactly the plain cluster-wide manifests (the Namespace aside:
//! `helm install --create-namespace`), with `namespaces` set exactly the plain namespaced
//! ones, so the two cannot drift; every object of a matrix of values matches the API's
//! OpenAPI schema.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::manifests::{
    assert_same_objects, k8s_tool, openapi_problems, parse_objects, plain_objects, Objects,
};

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
fn every_object_the_chart_renders_for_a_matrix_of_values_matches_the_openapi_schema() {
    let Some(helm) = helm() else { return };
    let matrix: &[&[&str]] = &[
        &[],
        &[
            "--set",
            "namespaces={apps,web}",
            "--set",
            "leaderElection=false",
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
    ] {
        let err = template(&helm, &["--set", value]).expect_err(value);
        assert!(err.contains(path), "{value}: {err}");
    }
}
