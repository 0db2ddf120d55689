//! The one-shot subcommands `wavelet status` and `wavelet hash` against a prepared fake.

use std::process::Output;

use serde_json::json;

use crate::fake::FakeApi;
use crate::util::*;

const NS: &str = "default";
const HASH: &str = "wavelet.dev/config-hash";

fn wavelet(fake: &FakeApi, args: &[&str]) -> (Option<i32>, String, String) {
    let Output {
        status,
        stdout,
        stderr,
    } = wavelet_command()
        .args(args)
        .args(["--server", &fake.url()])
        .env_clear()
        .output()
        .expect("running wavelet");
    (
        status.code(),
        String::from_utf8_lossy(&stdout).into_owned(),
        String::from_utf8_lossy(&stderr).into_owned(),
    )
}

/// `web` (adopted, current), `api` (opted in, never adopted), with ConfigMap
/// `app-config` {color: blue} and Secret `app-secret` {password: hunter2}.
fn prepared() -> FakeApi {
    let fake = FakeApi::start();
    fake.apply(configmap(NS, "app-config", &[("color", "blue")]));
    fake.apply(secret(NS, "app-secret", &[("password", "hunter2")]));
    let mut spec = mounts_configmap("app-config");
    spec["containers"][0]["envFrom"] = json!([{"secretRef": {"name": "app-secret"}}]);
    fake.apply(workload("Deployment", NS, "web", opted_in(), spec));
    let current = expected_hash(&fake, "deployments", NS, "web");
    fake.merge_patch(
        "deployments",
        NS,
        "web",
        json!({"metadata": {"annotations": {HASH: current}}}),
    );
    fake
}

fn row<'a>(stdout: &'a str, workload: &str) -> &'a str {
    stdout
        .lines()
        .find(|l| l.contains(workload))
        .unwrap_or_else(|| panic!("no row for {workload}:\n{stdout}"))
}

#[test]
fn status_exits_0_when_every_workload_is_up_to_date() {
    let fake = prepared();
    let (code, stdout, stderr) = wavelet(&fake, &["status"]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(stdout.starts_with("KIND "), "{stdout}");
    let web = row(&stdout, "default/web");
    assert!(
        web.starts_with("Deployment") && web.ends_with("up to date"),
        "{web}"
    );
    assert!(web.contains(" 2 "), "two references: {web}");
}

#[test]
fn status_exits_1_when_a_rollout_is_pending_or_a_workload_is_not_adopted() {
    let fake = prepared();
    fake.merge_patch(
        "configmaps",
        NS,
        "app-config",
        json!({"data": {"color": "green"}}),
    );
    let (code, stdout, stderr) = wavelet(&fake, &["status"]);
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    assert!(row(&stdout, "default/web").ends_with("rollout pending"));
    assert!(stderr.contains("1 workload(s) not up to date"), "{stderr}");

    fake.apply(workload(
        "StatefulSet",
        NS,
        "db",
        opted_in(),
        mounts_configmap("absent"),
    ));
    let (code, stdout, _) = wavelet(&fake, &["status", "-n", NS]);
    assert_eq!(code, Some(1));
    assert!(row(&stdout, "default/db").contains("missing: configmap default/absent"));
}

#[test]
fn status_of_a_namespace_without_workloads_exits_0() {
    let fake = prepared();
    let (code, stdout, _) = wavelet(&fake, &["status", "-n", "other"]);
    assert_eq!(code, Some(0));
    assert_eq!(stdout.lines().count(), 1, "only the header:\n{stdout}");
}

#[test]
fn hash_prints_the_hash_run_would_write_and_names_its_inputs_without_values() {
    let fake = prepared();
    let (code, stdout, stderr) = wavelet(&fake, &["hash", "-n", NS, "deployment/web"]);
    assert_eq!(code, Some(0), "{stderr}");
    let mut lines = stdout.lines();
    assert_eq!(
        lines.next(),
        Some(expected_hash(&fake, "deployments", NS, "web").as_str())
    );
    let rest: Vec<&str> = lines.collect();
    assert!(
        rest.iter()
            .any(|l| l.contains("configmap default/app-config (present, required")),
        "{stdout}"
    );
    assert!(
        rest.iter()
            .any(|l| l.contains("secret default/app-secret (present, required")),
        "{stdout}"
    );
    for value in [
        "blue",
        "hunter2",
        &wavelet::objects::base64::encode(b"hunter2"),
    ] {
        assert!(!stdout.contains(value), "{value} leaked:\n{stdout}");
    }
}

#[test]
fn hash_of_a_workload_with_a_missing_reference_says_so() {
    let fake = prepared();
    fake.delete("configmaps", NS, "app-config");
    let (code, stdout, _) = wavelet(&fake, &["hash", "-n", NS, "deploy/web"]);
    assert_eq!(code, Some(0));
    assert!(
        stdout.contains("configmap default/app-config (absent, required"),
        "{stdout}"
    );
    assert!(
        stdout.contains("missing: configmap default/app-config"),
        "{stdout}"
    );
}

#[test]
fn hash_of_an_unknown_workload_fails() {
    let fake = prepared();
    let (code, _, stderr) = wavelet(&fake, &["hash", "-n", NS, "deployment/nope"]);
    assert_eq!(code, Some(1), "{stderr}");
    let (code, _, stderr) = wavelet(&fake, &["hash", "-n", NS, "job/web"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("RESOURCE.GROUP/NAME"), "{stderr}");
    let (code, _, stderr) = wavelet(&fake, &["hash", "-n", NS, "widgets.example.com/w"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("is the kind's CRD installed?"), "{stderr}");
}

/// Regression: `--workload-kinds` accepted a kind that `wavelet hash` then refused.
#[test]
fn hash_of_a_workload_kinds_kind_finds_it_by_discovery() {
    let fake = prepared();
    fake.register_resource("example.com", "v1", "widgets", "Widget");
    let mut widget = workload(
        "Deployment",
        NS,
        "w",
        opted_in(),
        mounts_configmap("app-config"),
    );
    widget["apiVersion"] = json!("example.com/v1");
    widget["kind"] = json!("Widget");
    fake.apply(widget);
    let expected = expected_hash(&fake, "widgets", NS, "w");
    for spelled in [
        "widgets.example.com/w",
        "widget.example.com/w",
        "Widget.example.com/w",
    ] {
        let (code, stdout, stderr) = wavelet(&fake, &["hash", "-n", NS, spelled]);
        assert_eq!(code, Some(0), "{spelled}: {stderr}");
        assert_eq!(stdout.lines().next(), Some(expected.as_str()), "{spelled}");
    }
}

#[test]
fn status_and_hash_with_the_hash_key_file_agree_with_what_run_published() {
    let fake = FakeApi::start();
    fake.apply(secret(NS, "app-secret", &[("password", "hunter2")]));
    let spec = json!({"containers": [{"name": "app", "image": "nginx",
        "envFrom": [{"secretRef": {"name": "app-secret"}}]}]});
    fake.apply(workload("Deployment", NS, "web", opted_in(), spec));
    let dir = TempDir::new("status-key");
    let key_file = dir.write("key", "s3cret-key\n");
    let key_path = key_file.to_str().unwrap();

    let mut args = FAST.to_vec();
    args.extend(["--hash-key-file", key_path]);
    let run = Wavelet::start(&fake, &args);
    eventually(&fake, &run, "adoption", |f| {
        hashes(f, "deployments", NS, "web", HASH).1.is_some()
    });
    drop(run);
    let published = hashes(&fake, "deployments", NS, "web", HASH).1.unwrap();

    let (code, stdout, stderr) = wavelet(&fake, &["status", "--hash-key-file", key_path]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(
        row(&stdout, "default/web").ends_with("up to date"),
        "{stdout}"
    );
    let (code, stdout, _) = wavelet(&fake, &["status"]);
    assert_eq!(
        code,
        Some(1),
        "without the key the HMAC cannot match:\n{stdout}"
    );

    let (code, stdout, stderr) = wavelet(
        &fake,
        &[
            "hash",
            "-n",
            NS,
            "deployment/web",
            "--hash-key-file",
            key_path,
        ],
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stdout.lines().next(), Some(published.as_str()));
    assert!(!stdout.contains("note: with --hash-key-file"), "{stdout}");
}

#[test]
fn an_unreadable_hash_key_file_is_a_usage_error_naming_the_file() {
    let fake = FakeApi::start();
    let (code, _, stderr) = wavelet(
        &fake,
        &["status", "--hash-key-file", "/nonexistent/wavelet-key"],
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("--hash-key-file /nonexistent/wavelet-key"),
        "{stderr}"
    );
}
