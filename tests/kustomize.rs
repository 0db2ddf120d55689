//! `kubectl kustomize kustomize/<shape>` gives exactly the plain manifests of that shape, so
//! `kubectl apply -k` and `kubectl apply -f manifests/...` cannot drift: the overlays only
//! list the directories of `manifests/` (each has a `Kustomization` file, a name
//! `kubectl apply -f` skips) and, for `namespaced`, set `WAVELET_NAMESPACES`.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::manifests::{assert_same_objects, k8s_tool, parse_objects, plain_objects, Objects};

/// The `kubectl` binary decompressed from ../shared/k8s-bin (see [`k8s_tool`]).
pub fn kubectl() -> Option<PathBuf> {
    k8s_tool("kubectl")
}

/// The objects `kubectl kustomize kustomize/<shape>` renders.
fn kustomized(kubectl: &Path, shape: &str) -> Objects {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(kubectl)
        .arg("kustomize")
        .arg(root.join("kustomize").join(shape))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "kubectl kustomize kustomize/{shape}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    parse_objects(&format!("kustomize/{shape}"), &text)
}

fn assert_same(shape: &str, got: Objects, want: Objects) {
    assert_same_objects(&format!("kustomize/{shape} vs manifests/"), &got, &want);
}

#[test]
fn the_cluster_wide_overlay_renders_exactly_the_plain_cluster_wide_manifests() {
    let Some(kubectl) = kubectl() else { return };
    let want = plain_objects(&["", "cluster-wide", "in-cluster"]);
    assert_same("cluster-wide", kustomized(&kubectl, "cluster-wide"), want);
}

#[test]
fn the_proxy_sidecar_overlay_renders_exactly_the_plain_proxy_sidecar_manifests() {
    let Some(kubectl) = kubectl() else { return };
    let want = plain_objects(&["", "cluster-wide", "proxy-sidecar"]);
    assert_same("proxy-sidecar", kustomized(&kubectl, "proxy-sidecar"), want);
}

#[test]
fn the_namespaced_overlay_renders_the_plain_namespaced_manifests_with_wavelet_namespaces_set() {
    let Some(kubectl) = kubectl() else { return };
    let mut want = plain_objects(&["", "namespaced", "in-cluster"]);
    let deployment = want
        .get_mut(&("Deployment".into(), "wavelet".into(), "wavelet".into()))
        .unwrap();
    let env = deployment["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array_mut()
        .unwrap();
    let var = env
        .iter_mut()
        .find(|v| v["name"] == "WAVELET_NAMESPACES")
        .unwrap();
    var["value"] = Value::from("apps");
    assert_same("namespaced", kustomized(&kubectl, "namespaced"), want);
}

/// The plain cluster-wide manifests with `manifests/csi/` and the Deployment's
/// `WAVELET_ENABLE_CSI_INTEGRATION=true` (what `kustomize/csi` and the chart's
/// `csiIntegration` render).
pub fn plain_with_csi() -> Objects {
    let mut want = plain_objects(&["", "cluster-wide", "in-cluster", "csi"]);
    let deployment = want
        .get_mut(&("Deployment".into(), "wavelet".into(), "wavelet".into()))
        .unwrap();
    deployment["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array_mut()
        .unwrap()
        .insert(
            0,
            serde_json::json!({"name": "WAVELET_ENABLE_CSI_INTEGRATION", "value": "true"}),
        );
    want
}

#[test]
fn the_csi_overlay_renders_the_plain_cluster_wide_manifests_with_the_csi_rbac_and_the_flag() {
    let Some(kubectl) = kubectl() else { return };
    assert_same("csi", kustomized(&kubectl, "csi"), plain_with_csi());
}

#[test]
fn every_manifests_directory_has_a_kustomization_listing_each_of_its_files() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests");
    for dir in [
        "",
        "cluster-wide",
        "in-cluster",
        "proxy-sidecar",
        "namespaced",
        "csi",
    ] {
        let dir = root.join(dir);
        let text = std::fs::read_to_string(dir.join("Kustomization")).unwrap();
        let mut listed: Vec<String> = text
            .lines()
            .filter_map(|l| l.trim().strip_prefix("- "))
            .map(str::to_string)
            .collect();
        listed.sort();
        let mut files: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.ends_with(".yaml"))
            .collect();
        files.sort();
        assert_eq!(listed, files, "{}/Kustomization", dir.display());
    }
}
