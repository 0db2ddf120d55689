//! `wavelet impact` through the real binary: live against the fake API server and offline
//! on the same objects written as manifests give the same workloads; it only reads; a
//! Secret's values appear in no output; `--max-rolls` gates with exit 3; `-f -` reads
//! standard input.

use std::io::Write;
use std::process::Stdio;

use serde_json::{json, Value};

use crate::fake::FakeApi;
use crate::util::*;

const NS: &str = "team";
const SECRET_NOW: &str = "hunter2-now";
const SECRET_NEW: &str = "Sup3r-s3cret-next";

/// ConfigMaps a {x, y}, b {z}, Secret s {token}; Deployments web-1 (mounts a), web-2
/// (mounts a, and s's token by secretKeyRef), only-x (a's key x by configMapKeyRef),
/// uses-b (mounts b), not-opted-in (mounts a without opting in). Returned as applied.
fn objects() -> Vec<Value> {
    let mut web_2 = mounts_configmap("a");
    web_2["containers"][0]["env"] =
        json!([{"name": "T", "valueFrom": {"secretKeyRef": {"name": "s", "key": "token"}}}]);
    let only_x = json!({"containers": [{"name": "app", "image": "nginx",
        "env": [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "a", "key": "x"}}}]}]});
    vec![
        configmap(NS, "a", &[("x", "1"), ("y", "1")]),
        configmap(NS, "b", &[("z", "1")]),
        secret(NS, "s", &[("token", SECRET_NOW)]),
        workload("Deployment", NS, "web-1", opted_in(), mounts_configmap("a")),
        workload("Deployment", NS, "web-2", opted_in(), web_2),
        workload("Deployment", NS, "only-x", opted_in(), only_x),
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
    ]
}

/// The change: a's y, and s's token (as stringData).
const CHANGE: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: team}\ndata: {x: '1', y: '2'}\n---\n\
    apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: team}\nstringData: {token: Sup3r-s3cret-next}\n";

fn impact(args: &[&str], stdin: Option<&str>) -> (Option<i32>, String, String) {
    let mut child = wavelet_command()
        .arg("impact")
        .args(args)
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running wavelet");
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.unwrap_or("").as_bytes()).unwrap();
    drop(input);
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// What must be the same live and offline: per object its rolls and non-rolls, and
/// every workload that rolls with its waves and when.
fn essence(report: &Value) -> Value {
    let names = |list: &Value| -> Vec<Value> {
        list.as_array()
            .unwrap()
            .iter()
            .map(|a| json!([a["workload"], a["why"]]))
            .collect()
    };
    json!({
        "rolls": report["rolls"],
        "objects": report["objects"].as_array().unwrap().iter().map(|o| json!({
            "object": o["object"], "change": o["change"], "keys_changed": o["keys_changed"],
            "rolls": names(&o["rolls"]), "rolls_not": names(&o["rolls_not"]), "waves": o["waves"],
        })).collect::<Vec<_>>(),
        "workloads": report["workloads"],
    })
}

#[test]
fn offline_manifests_give_the_same_workloads_as_the_live_cluster_and_nothing_is_written() {
    let fake = FakeApi::start();
    fake.apply_all(objects());
    let dir = TempDir::new("impact");
    let change = dir.write("change.yaml", CHANGE);
    let change = change.to_str().unwrap();
    let (configs, workloads): (Vec<Value>, Vec<Value>) = objects()
        .into_iter()
        .partition(|o| o["kind"] == "ConfigMap" || o["kind"] == "Secret");
    let base = dir.write(
        "base.json",
        json!({"apiVersion": "v1", "kind": "List", "items": configs}).to_string(),
    );
    std::fs::create_dir(dir.0.join("manifests")).unwrap();
    // One workload per document, YAML stream of JSON documents.
    let stream: String = workloads.iter().map(|w| format!("---\n{w}\n")).collect();
    dir.write("manifests/workloads.yaml", stream);
    let manifests = dir.0.join("manifests");

    fake.clear_requests();
    let (code, live, stderr) = impact(&["-f", change, "--server", &fake.url(), "-o", "json"], None);
    assert_eq!(code, Some(0), "{live}{stderr}");
    let writes: Vec<String> = fake
        .requests()
        .iter()
        .filter(|r| r.method != "GET")
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert!(writes.is_empty(), "impact wrote: {writes:?}");
    let (code, offline, stderr) = impact(
        &[
            "-f",
            change,
            "--manifests",
            manifests.to_str().unwrap(),
            "--base",
            base.to_str().unwrap(),
            "-o",
            "json",
        ],
        None,
    );
    assert_eq!(code, Some(0), "{offline}{stderr}");
    let live: Value = serde_json::from_str(&live).unwrap();
    let offline: Value = serde_json::from_str(&offline).unwrap();
    assert_eq!(essence(&live), essence(&offline));

    let a = &live["objects"][0];
    assert_eq!(a["object"], "configmap team/a");
    assert_eq!(a["keys_changed"], json!(["y"]));
    let rolled: Vec<&str> = live["workloads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["workload"].as_str().unwrap())
        .collect();
    assert_eq!(rolled, ["deployment team/web-1", "deployment team/web-2"]);
    assert_eq!(
        a["rolls_not"],
        json!([{"workload": "deployment team/only-x", "why": "uses only key x, unchanged"}])
    );
    assert_eq!(live["objects"][1]["keys_changed"], json!(["token"]));
}

#[test]
fn a_secrets_values_appear_in_no_output_and_max_rolls_gates_with_exit_3() {
    let fake = FakeApi::start();
    fake.apply_all(objects());
    let encoded: Vec<String> = [SECRET_NOW, SECRET_NEW]
        .iter()
        .map(|v| wavelet::objects::base64::encode(v.as_bytes()))
        .collect();
    for output in ["table", "json", "markdown"] {
        // From standard input.
        let (code, stdout, stderr) = impact(
            &["-f", "-", "--server", &fake.url(), "-o", output],
            Some(CHANGE),
        );
        assert_eq!(code, Some(0), "{stdout}{stderr}");
        assert!(stdout.contains("team/web-2"), "{stdout}");
        for value in [SECRET_NOW, SECRET_NEW, &encoded[0], &encoded[1]] {
            assert!(
                !stdout.contains(value) && !stderr.contains(value),
                "-o {output} shows a Secret value:\n{stdout}{stderr}"
            );
        }
    }
    let (code, _, stderr) = impact(
        &["-f", "-", "--server", &fake.url(), "--max-rolls", "1"],
        Some(CHANGE),
    );
    assert_eq!(code, Some(3), "{stderr}");
    assert!(
        stderr.contains("2 workloads would roll, more than --max-rolls 1 allows"),
        "{stderr}"
    );
    let (code, _, _) = impact(
        &["-f", "-", "--server", &fake.url(), "--max-rolls", "2"],
        Some(CHANGE),
    );
    assert_eq!(code, Some(0));
    // An error is exit 1, with what went wrong; a bad Secret value is named by its key.
    let bad = "kind: Secret\nmetadata: {name: s, namespace: team}\ndata: {token: 'Sup3r!!'}\n";
    let (code, stdout, stderr) = impact(&["-f", "-", "--server", &fake.url()], Some(bad));
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    assert!(
        stderr.contains("data.token is not valid base64"),
        "{stderr}"
    );
    assert!(!stderr.contains("Sup3r"), "{stderr}");
    let (code, _, stderr) = impact(&["--server", &fake.url()], None);
    assert_eq!(code, Some(1));
    assert!(
        stderr.contains("needs the changed objects: -f FILE"),
        "{stderr}"
    );
}
