//! `kubectl kustomize kustomize/<shape>` gives exactly the plain manifests of that shape, so
//! `kubectl apply -k` and `kubectl apply -f manifests/...` cannot drift: the overlays only
//! list the directories of `manifests/` (each has a `Kustomization` file, a name
//! `kubectl apply -f` skips) and, for `namespaced`, set `WAVELET_NAMESPACES`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::manifests::manifests;

/// The `kubectl` binary: `$WAVELET_KUBECTL`, else `target/k8s-bin/kubectl` (decompressed from
/// ../shared/k8s-bin by `.ci/run`). `None` (with a line saying the test did not run) when
/// absent; a panic instead when `CI` is set, so CI cannot pass without running it.
pub fn kubectl() -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let path = std::env::var_os("WAVELET_KUBECTL")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target/k8s-bin/kubectl"));
    if path.is_file() {
        return Some(path);
    }
    let message = format!(
        "{} is absent: this test DID NOT RUN (decompress ../shared/k8s-bin/kubectl.xz there, as .ci/run does)",
        path.display()
    );
    assert!(std::env::var_os("CI").is_none(), "{message}");
    eprintln!("{message}");
    None
}

/// Objects keyed by kind, namespace and name.
type Objects = BTreeMap<(String, String, String), Value>;

fn key(object: &Value) -> (String, String, String) {
    let field = |v: &Value| v.as_str().unwrap_or_default().to_string();
    (
        field(&object["kind"]),
        field(&object["metadata"]["namespace"]),
        field(&object["metadata"]["name"]),
    )
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
    let mut objects = Objects::new();
    for doc in text.split("\n---\n").filter(|d| !d.trim().is_empty()) {
        let object = wavelet::client::yaml::parse(doc)
            .unwrap_or_else(|e| panic!("kustomize/{shape}: {e} in\n{doc}"));
        assert!(objects.insert(key(&object), object).is_none(), "duplicate");
    }
    objects
}

/// The plain objects in the given directories of `manifests/` ("" is the top level only).
fn plain(dirs: &[&str]) -> Objects {
    let mut objects = Objects::new();
    for m in manifests() {
        let dir = Path::new(&m.path)
            .parent()
            .unwrap()
            .strip_prefix("manifests")
            .unwrap();
        if dirs.contains(&dir.to_str().unwrap()) {
            assert!(
                objects.insert(key(&m.object), m.object).is_none(),
                "duplicate"
            );
        }
    }
    objects
}

fn assert_same(shape: &str, got: Objects, want: Objects) {
    let got_keys: Vec<_> = got.keys().collect();
    let want_keys: Vec<_> = want.keys().collect();
    assert_eq!(
        got_keys, want_keys,
        "kustomize/{shape}: objects differ from manifests/"
    );
    for (k, object) in &want {
        assert_eq!(
            &got[k], object,
            "kustomize/{shape}: {k:?} differs from manifests/"
        );
    }
}

#[test]
fn the_cluster_wide_overlay_renders_exactly_the_plain_cluster_wide_manifests() {
    let Some(kubectl) = kubectl() else { return };
    let want = plain(&["", "cluster-wide", "in-cluster"]);
    assert_same("cluster-wide", kustomized(&kubectl, "cluster-wide"), want);
}

#[test]
fn the_proxy_sidecar_overlay_renders_exactly_the_plain_proxy_sidecar_manifests() {
    let Some(kubectl) = kubectl() else { return };
    let want = plain(&["", "cluster-wide", "proxy-sidecar"]);
    assert_same("proxy-sidecar", kustomized(&kubectl, "proxy-sidecar"), want);
}

#[test]
fn the_namespaced_overlay_renders_the_plain_namespaced_manifests_with_wavelet_namespaces_set() {
    let Some(kubectl) = kubectl() else { return };
    let mut want = plain(&["", "namespaced", "in-cluster"]);
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

#[test]
fn every_manifests_directory_has_a_kustomization_listing_each_of_its_files() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests");
    for dir in [
        "",
        "cluster-wide",
        "in-cluster",
        "proxy-sidecar",
        "namespaced",
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
