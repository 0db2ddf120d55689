//! The Helm chart against the real API server: for a matrix of values, `helm template`
//! piped into `kubectl apply --dry-run=server -f -`. The server runs its own validation,
//! defaulting and admission on every object (the RBAC objects included) without storing
//! any, so an object it would refuse at `helm install` fails here. The release namespace
//! carries `pod-security.kubernetes.io/warn: restricted`, so a Pod template outside the
//! restricted profile is reported too.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::json;
use wavelet::client::PatchType;

use crate::Ctx;

/// The release namespace; the namespaced shapes watch the two after it.
const RELEASE_NS: &str = "e2e-chart";
const WATCHED: [&str; 2] = ["e2e-chart-a", "e2e-chart-b"];

/// `helm`: `$WAVELET_HELM`, else beside the control plane's binaries (where `.ci/run`
/// decompresses it).
fn helm(ctx: &Ctx) -> Option<PathBuf> {
    std::env::var_os("WAVELET_HELM")
        .map(PathBuf::from)
        .or_else(|| ctx.cluster.bin_dir.as_ref().map(|d| d.join("helm")))
        .filter(|p| p.is_file())
}

fn chart() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("charts/wavelet")
}

/// `helm template wavelet charts/wavelet -n RELEASE_NS <values>`: the rendered stream.
fn render(helm: &Path, values: &[&str]) -> String {
    let out = Command::new(helm)
        .args(["template", "wavelet"])
        .arg(chart())
        .args(["--namespace", RELEASE_NS])
        .args(values)
        .output()
        .expect("running helm");
    assert!(
        out.status.success(),
        "helm template {values:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `kubectl apply --dry-run=server -f -` of `manifests`.
fn dry_run_apply(ctx: &Ctx, manifests: &str) -> Output {
    let mut child = ctx
        .cluster
        .kubectl()
        .args(["apply", "--dry-run=server", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running kubectl");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(manifests.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

pub fn server_side_dry_run(ctx: &Ctx) {
    let Some(helm) = helm(ctx) else {
        assert!(
            std::env::var_os("CI").is_none(),
            "chart_server_side_dry_run needs helm (WAVELET_HELM, or beside WAVELET_E2E_BIN_DIR) and CI must run it"
        );
        println!("e2e chart_server_side_dry_run: skipped: no helm (set WAVELET_HELM)");
        return;
    };
    let kube = &ctx.kube;
    for ns in [RELEASE_NS].iter().chain(&WATCHED) {
        kube.create_namespace(ns);
    }
    kube.client
        .patch::<serde_json::Value>(
            &format!("/api/v1/namespaces/{RELEASE_NS}"),
            PatchType::Merge,
            &json!({"metadata": {"labels": {"pod-security.kubernetes.io/warn": "restricted"}}}),
        )
        .expect("labelling the release namespace");

    let namespaces = format!("namespaces={{{}}}", WATCHED.join(","));
    let matrix: Vec<Vec<&str>> = vec![
        vec![],
        vec![
            "--set",
            "connection=proxySidecar",
            "--set",
            "hashKey.existingSecret=wavelet-hash-key",
            "--set",
            "workloadKinds={example.com/v1/widgets,argoproj.io/v1alpha1/rollouts}",
            "--set",
            "namespaceSelector=team=a",
            "--set",
            "leaseName=wavelet-leader",
            "--set",
            "debounce=2s",
            "--set",
            "maxRolloutsPerSecond=0.5",
            "--set",
            "rolloutBurst=3",
            "--set",
            "minRolloutInterval=1m",
            "--set",
            "resync=5m",
            "--set",
            "replicas=2",
            "--set",
            "csiIntegration=true",
        ],
        vec![
            "--set",
            &namespaces,
            "--set",
            "namespaceSelector=team=a",
            "--set",
            "workloadKinds={example.com/v1/widgets}",
            "--set",
            "leaderElection=false",
            "--set",
            "csiIntegration=true",
            "--set",
            "dryRun=true",
            "--set",
            "logFormat=json",
            "--set",
            "image.digest=sha256:0000000000000000000000000000000000000000000000000000000000000000",
            "--set",
            "imagePullSecrets[0].name=registry",
            "--set",
            "nodeSelector.kubernetes\\.io/arch=arm64",
            "--set",
            "tolerations[0].operator=Exists",
            "--set",
            "extraArgs={--workers=8}",
            "--set",
            "extraEnv[0].name=RUST_LOG",
            "--set",
            "extraEnv[0].value=debug",
        ],
        // A Reloader values file's keys, mapped onto wavelet's objects (no PodMonitor: the
        // Prometheus Operator's CRDs are not installed here).
        vec![
            "--set",
            "reloader.autoReloadAll=true",
            "--set",
            "reloader.ignoreSecrets=true",
            "--set",
            "reloader.enableHA=true",
            "--set",
            "reloader.deployment.replicas=2",
            "--set",
            "reloader.watchGlobally=false",
            "--set",
            "reloader.namespaces=e2e-chart-a",
            "--set",
            "reloader.deployment.topologySpreadConstraints[0].maxSkew=1",
            "--set",
            "reloader.deployment.topologySpreadConstraints[0].topologyKey=zone",
            "--set",
            "reloader.deployment.topologySpreadConstraints[0].whenUnsatisfiable=ScheduleAnyway",
            "--set",
            "reloader.deployment.labels.team=platform",
            "--set",
            "reloader.deployment.pod.annotations.owner=platform",
            "--set",
            "reloader.podDisruptionBudget.enabled=true",
            "--set",
            "reloader.podDisruptionBudget.minAvailable=1",
            "--set",
            "reloader.netpol.enabled=true",
            "--set",
            "reloader.netpol.from[0].podSelector.matchLabels.app=prometheus",
            "--set-string",
            "reloader.deployment.env.secret.ALERT_ON_RELOAD=true",
            "--set-string",
            "reloader.deployment.env.secret.ALERT_WEBHOOK_URL=https://hooks.example/T0",
            "--set",
            "reloader.serviceAccount.name=reloader-sa",
        ],
    ];
    for values in &matrix {
        let rendered = render(&helm, values);
        let out = dry_run_apply(ctx, &rendered);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "the API server refused the chart rendered with {values:?}:\n{stderr}"
        );
        assert!(
            !stderr.contains("would violate PodSecurity"),
            "{values:?}: outside the restricted Pod Security profile:\n{stderr}"
        );
        let applied = stdout.lines().filter(|l| l.ends_with("(server dry run)"));
        let documents = rendered
            .split("\n---\n")
            .filter(|d| d.lines().any(|l| l.starts_with("kind: ")))
            .count();
        assert_eq!(
            applied.count(),
            documents,
            "{values:?}: every object checked by the server:\n{stdout}"
        );
    }

    // The check can fail: an object the server refuses (a Service name that is not a
    // DNS label) makes the same command fail, naming it.
    let broken = render(&helm, &[]).replace("name: wavelet-metrics", "name: Wavelet_Metrics");
    let out = dry_run_apply(ctx, &broken);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("Wavelet_Metrics"),
        "a refused object passed: {stderr}"
    );
}
