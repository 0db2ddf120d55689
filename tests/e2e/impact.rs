//! `wavelet impact` against the real API server: three Deployments use ConfigMap `a` (one
//! only its key `x`, by `configMapKeyRef`; one in a restart window closed now), one uses
//! `b`, one uses `a` without opting in. A file changing `a`'s key `y` (and a Secret's
//! value) lists the two that use `y`, says the key-`x` one rolls nothing, gives the wave
//! plan and the window's opening; `-o json` carries the same; `--max-rolls 1` exits 3;
//! `--namespace-selector` leaves a namespace outside it alone; no Secret value in any
//! output. And it only reads: the API server's audit log, which records every request
//! of the user `impact` runs as, shows no write.

use std::path::PathBuf;
use std::sync::OnceLock;

use serde_json::{json, Value};

use crate::cluster::{kubeconfig_text, Extras};
use crate::kube::{configmap, mounts_configmap, opted_in, workload};
use crate::process::command_via;
use crate::{Ctx, Scenario};

pub const ALL: &[Scenario] = &[Scenario {
    name: "impact_lists_rolls_waves_and_windows_read_only",
    run: impact_scenario,
    serial: false,
}];

/// The user `impact` runs as, in `system:masters` like the admin, so its requests are told
/// apart in the audit log.
const USER: &str = "e2e-impact";
const TOKEN: &str = "e2e-impact-token-0123456789";

/// Where the audit log goes, once [`extras`] made the control plane write one.
static AUDIT_LOG: OnceLock<PathBuf> = OnceLock::new();

/// What the suite's own control plane adds for this scenario: the user, and an audit log
/// of its requests (Metadata level: who, verb, object; never a body).
pub fn extras() -> Extras {
    let dir = std::env::temp_dir().join(format!("wavelet-e2e-audit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("creating the audit directory");
    let policy = dir.join("audit-policy.yaml");
    std::fs::write(
        &policy,
        format!(
            "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [\"RequestReceived\"]\nrules:\n- level: Metadata\n  users: [\"{USER}\"]\n- level: None\n"
        ),
    )
    .expect("writing the audit policy");
    let log = dir.join("audit.log");
    let _ = AUDIT_LOG.set(log.clone());
    Extras {
        users: vec![(TOKEN.to_string(), USER.to_string())],
        apiserver_args: vec![
            format!("--audit-policy-file={}", policy.display()),
            format!("--audit-log-path={}", log.display()),
            "--audit-log-maxsize=100000".into(),
            // Each request's event is written before its answer: complete once it exits.
            "--audit-log-mode=blocking".into(),
        ],
        controller_manager_args: Vec::new(),
    }
}

const NS: &str = "e2e-impact";
const SECRET_NOW: &str = "impact-now-Zq8";
const SECRET_NEW: &str = "impact-next-Wm3";

fn impact_scenario(ctx: &Ctx) {
    let kube = &ctx.kube;
    kube.create_namespace(NS);
    kube.create(configmap(NS, "a", json!({"x": "1", "y": "1"})));
    kube.create(configmap(NS, "b", json!({"z": "1"})));
    kube.create(json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "s", "namespace": NS}, "stringData": {"token": SECRET_NOW}}));
    // A daily window 12 hours away: closed now.
    let hour = (wavelet::time::unix_now() / 3600 + 12) % 24;
    let window = format!("{hour:02}:00-{hour:02}:30");
    let mut windowed = opted_in();
    windowed["wavelet.dev/restart-window"] = json!(window);
    let only_x = json!({"container": {"env": [{"name": "X",
        "valueFrom": {"configMapKeyRef": {"name": "a", "key": "x"}}}]}});
    for object in [
        workload("Deployment", NS, "a-all-1", windowed, mounts_configmap("a")),
        workload(
            "Deployment",
            NS,
            "a-all-2",
            opted_in(),
            mounts_configmap("a"),
        ),
        workload("Deployment", NS, "a-only-x", opted_in(), only_x),
        workload(
            "Deployment",
            NS,
            "uses-b",
            opted_in(),
            mounts_configmap("b"),
        ),
        workload(
            "Deployment",
            NS,
            "not-opted-in",
            json!({}),
            mounts_configmap("a"),
        ),
    ] {
        kube.create(object);
    }
    let dir = ctx.cluster.dir().join("impact");
    std::fs::create_dir_all(&dir).unwrap();
    let change = dir.join("a-with-y-changed.yaml");
    std::fs::write(
        &change,
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: a, namespace: {NS}}}\ndata: {{x: '1', y: '2'}}\n---\n\
             apiVersion: v1\nkind: Secret\nmetadata: {{name: s, namespace: {NS}}}\nstringData: {{token: {SECRET_NEW}}}\n"
        ),
    )
    .unwrap();
    // The audited user where the suite runs its own control plane.
    let kubeconfig = match (&ctx.cluster.ca, ctx.cluster.api_port, AUDIT_LOG.get()) {
        (Some(ca), Some(port), Some(_)) => {
            let path = dir.join("kubeconfig");
            std::fs::write(&path, kubeconfig_text(port, ca, TOKEN)).unwrap();
            path
        }
        _ => ctx.cluster.kubeconfig.clone(),
    };
    let impact = |extra: &[&str]| -> (i32, String, String) {
        let mut args = vec!["impact", "-f", change.to_str().unwrap()];
        args.extend_from_slice(extra);
        let out = command_via(&ctx.cluster, &kubeconfig, &args)
            .env("RUST_LOG", "warn")
            .output()
            .expect("running wavelet impact");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let encoded: Vec<String> = [SECRET_NOW, SECRET_NEW]
        .iter()
        .map(|v| wavelet::objects::base64::encode(v.as_bytes()))
        .collect();
    let no_secret = |output: &str, text: &str| {
        for value in [SECRET_NOW, SECRET_NEW, &encoded[0], &encoded[1]] {
            assert!(
                !text.contains(value),
                "{output} shows a Secret value:\n{text}"
            );
        }
    };

    // The table.
    let (code, table, stderr) = impact(&[]);
    assert_eq!(code, 0, "{table}{stderr}");
    no_secret("the table", &format!("{table}{stderr}"));
    let d = |name: &str| format!("deployment {NS}/{name}");
    for line in [
        "configmap e2e-impact/a: keys changed y".to_string(),
        format!("ROLLS    {:<40} uses every key; changed: y", d("a-all-1")),
        format!("ROLLS    {:<40} uses every key; changed: y", d("a-all-2")),
        format!("NO ROLL  {:<40} uses only key x, unchanged", d("a-only-x")),
        format!("wave 1: {}", d("a-all-1")),
        format!("wave 2: {}", d("a-all-2")),
        "secret e2e-impact/s: keys changed token: rolls nothing".to_string(),
        format!("outside its restart window {window}"),
        "2 workloads roll".to_string(),
    ] {
        assert!(table.contains(&line), "no {line:?} in:\n{table}");
    }
    assert!(
        !table.contains("uses-b") && !table.contains("not-opted-in"),
        "{table}"
    );

    // JSON carries the same.
    let (code, text, stderr) = impact(&["-o", "json"]);
    assert_eq!(code, 0, "{text}{stderr}");
    no_secret("-o json", &text);
    let report: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(report["rolls"], 2);
    let a = &report["objects"][0];
    assert_eq!(a["keys_changed"], json!(["y"]));
    assert_eq!(
        a["waves"],
        json!([[d("a-all-1")], [d("a-all-2")]]),
        "{report:#}"
    );
    assert_eq!(a["rolls_not"][0]["workload"], d("a-only-x"));
    let first = &report["workloads"][0];
    assert_eq!(first["workload"], d("a-all-1"));
    assert_eq!(first["when"]["at"], "window", "{report:#}");
    let opens_at = first["when"]["opens_at"].as_str().unwrap();
    let opens = wavelet::time::parse_rfc3339(opens_at).unwrap();
    let now = wavelet::time::unix_now();
    assert!(opens > now && opens <= now + 13 * 3600, "{opens_at}");
    assert!(
        table.contains(&format!("at {opens_at} (window)")),
        "{table}"
    );
    assert_eq!(report["workloads"][1]["when"]["at"], "after-wave");

    // Markdown, the gate, and a namespace outside --namespace-selector.
    let (code, markdown, _) = impact(&["-o", "markdown"]);
    assert_eq!(code, 0);
    no_secret("-o markdown", &markdown);
    assert!(
        markdown.starts_with("### wavelet impact: 2 workloads roll"),
        "{markdown}"
    );
    let (code, _, stderr) = impact(&["--max-rolls", "1"]);
    assert_eq!(code, 3, "{stderr}");
    let (code, outside, _) = impact(&["--namespace-selector", "wavelet-e2e=false"]);
    assert_eq!(code, 0);
    assert!(
        outside.contains("outside --namespace-selector") && outside.ends_with("rolls nothing\n"),
        "{outside}"
    );

    // Read-only: every request of the user was a read.
    let Some(log) = AUDIT_LOG.get().filter(|_| ctx.cluster.api_port.is_some()) else {
        println!("e2e impact: no audit log on a borrowed cluster; read-only not checked here");
        return;
    };
    let text = std::fs::read_to_string(log).expect("reading the audit log");
    let mut reads = 0;
    for line in text.lines() {
        let event: Value = serde_json::from_str(line).unwrap();
        if event["user"]["username"] != USER {
            continue;
        }
        let verb = event["verb"].as_str().unwrap_or_default();
        assert!(
            ["get", "list", "watch"].contains(&verb),
            "wavelet impact sent a {verb} to {}",
            event["requestURI"]
        );
        reads += 1;
    }
    assert!(
        reads >= 5 * 8,
        "the audit log saw only {reads} requests of {USER}"
    );
    // Nothing changed either.
    let a = ctx.kube.get("ConfigMap", NS, "a").unwrap();
    assert_eq!(a["data"]["y"], "1");
}
