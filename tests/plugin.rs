//! The binary installed as `kubectl-wavelet` is a kubectl plugin: `kubectl wavelet status`,
//! `kubectl wavelet hash` and `kubectl wavelet impact`, through the real kubectl binary, honour `-n` and
//! `--kubeconfig` (kubectl passes every argument after the plugin name through).

use std::process::Command;

use crate::fake::FakeApi;
use crate::kustomize::kubectl;
use crate::util::*;

/// Runs `kubectl wavelet <args>` with only the plugin directory on PATH; (exit code, stdout,
/// stderr).
fn kubectl_wavelet(args: &[&str]) -> Option<(Option<i32>, String, String)> {
    let kubectl = kubectl()?;
    let dir = TempDir::new("plugin");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_wavelet"), dir.0.join("kubectl-wavelet"))
        .unwrap();
    let out = Command::new(kubectl)
        .arg("wavelet")
        .args(args)
        .env_clear()
        .env("PATH", &dir.0)
        .env("HOME", &dir.0)
        .output()
        .expect("running kubectl");
    Some((
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

/// Deployment `web` in `apps` (opted in, never adopted: status exits 1) and Deployment
/// `other` in `default`; a kubeconfig naming the fake.
fn prepared() -> (FakeApi, TempDir, String) {
    let fake = FakeApi::start();
    fake.apply(configmap("apps", "web-config", &[("color", "blue")]));
    let spec = mounts_configmap("web-config");
    fake.apply(workload(
        "Deployment",
        "apps",
        "web",
        opted_in(),
        spec.clone(),
    ));
    fake.apply(workload("Deployment", "default", "other", opted_in(), spec));
    let dir = TempDir::new("plugin-kubeconfig");
    let path = dir.write("config", kubeconfig_text(&fake.url(), &[], &[]));
    (fake, dir, path.display().to_string())
}

#[test]
fn kubectl_wavelet_status_honours_namespace_and_kubeconfig() {
    let (_fake, _dir, kubeconfig) = prepared();
    let Some((code, stdout, stderr)) =
        kubectl_wavelet(&["status", "-n", "apps", "--kubeconfig", &kubeconfig])
    else {
        return;
    };
    assert_eq!(code, Some(1), "web was never adopted:\n{stdout}{stderr}");
    assert!(stdout.contains("apps/web"), "{stdout}");
    assert!(!stdout.contains("default/other"), "-n apps only:\n{stdout}");
}

#[test]
fn kubectl_wavelet_hash_prints_the_hash_run_would_write() {
    let (fake, _dir, kubeconfig) = prepared();
    let args = [
        "hash",
        "-n",
        "apps",
        "deployment/web",
        "--kubeconfig",
        &kubeconfig,
    ];
    let Some((code, stdout, stderr)) = kubectl_wavelet(&args) else {
        return;
    };
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    let want = expected_hash(&fake, "deployments", "apps", "web");
    assert!(stdout.contains(&want), "want {want}:\n{stdout}");
}

#[test]
fn kubectl_wavelet_status_honours_context() {
    let (fake, dir, _) = prepared();
    // The current context names a server nothing listens on; `--context test` the fake.
    let text = kubeconfig_text(&fake.url(), &[], &[])
        .replace("current-context: test", "current-context: broken")
        .replace(
            "contexts:\n",
            "- name: dead\n  cluster:\n    server: http://127.0.0.1:1\ncontexts:\n- name: broken\n  context:\n    cluster: dead\n    user: sa\n",
        );
    let kubeconfig = dir.write("two-contexts", text).display().to_string();
    let args = ["status", "-n", "apps", "--kubeconfig", &kubeconfig];
    let Some((code, stdout, stderr)) = kubectl_wavelet(&args) else {
        return;
    };
    assert!(
        code != Some(0) && stderr.contains("127.0.0.1:1/") && !stdout.contains("apps/web"),
        "without --context, the current (dead) context is used:\n{stdout}{stderr}"
    );
    let mut with_context = args.to_vec();
    with_context.extend(["--context", "test"]);
    let (code, stdout, stderr) = kubectl_wavelet(&with_context).unwrap();
    assert_eq!(code, Some(1), "web was never adopted:\n{stdout}{stderr}");
    assert!(stdout.contains("apps/web"), "{stdout}");
}

#[test]
fn kubectl_wavelet_impact_reads_the_file_and_the_cluster_of_the_kubeconfig() {
    let (_fake, dir, kubeconfig) = prepared();
    let change = dir.write(
        "change.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web-config}\ndata: {color: green}\n",
    );
    let args = [
        "impact",
        "-n",
        "apps",
        "-f",
        change.to_str().unwrap(),
        "--kubeconfig",
        &kubeconfig,
        "-o",
        "markdown",
    ];
    let Some((code, stdout, stderr)) = kubectl_wavelet(&args) else {
        return;
    };
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(
        stdout.starts_with("### wavelet impact: 1 workload rolls"),
        "{stdout}"
    );
    assert!(
        stdout.contains("| `deployment apps/web` | now |"),
        "{stdout}"
    );
}
