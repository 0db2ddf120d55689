//! Every kubeconfig a laptop has: the corpus in `tests/fixtures/kubeconfig/` (kubectl,
//! gcloud, aws, az, minikube, kind, k3s, oc, Rancher, hand-written, JSON), `KUBECONFIG`
//! lists merged as kubectl merges them, `--context`, and exec credential plugins (a
//! token used, run again at expiry and after a 401, a client certificate, a missing or
//! failing plugin), all through the binary against the fake API server.

use std::path::{Path, PathBuf};

use serde_json::json;

use crate::fake::FakeApi;
use crate::util::*;

const TOKEN: &str = "corpus-token";

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kubeconfig")
}

/// `wavelet ARGS` with only these variables set; (exit code, stdout + stderr).
fn wavelet(args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String) {
    let out = wavelet_command()
        .args(args)
        .env_clear()
        .envs(env.iter().copied())
        .env("RUST_LOG", "trace")
        .output()
        .unwrap();
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    (out.status.code(), text)
}

fn saw_token(fake: &FakeApi, token: &str) -> bool {
    fake.requests()
        .iter()
        .any(|r| r.header("authorization") == Some(&format!("Bearer {token}")))
}

#[test]
fn every_kubeconfig_of_the_corpus_reaches_the_server_its_current_context_names() {
    let mut names: Vec<PathBuf> = std::fs::read_dir(corpus_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "json"))
        .collect();
    names.sort();
    assert!(names.len() >= 11, "{names:?}");
    for path in names {
        let fake = FakeApi::start();
        fake.require_token(Some(TOKEN));
        let dir = TempDir::new("corpus");
        let text = std::fs::read_to_string(&path)
            .unwrap()
            .replace("SERVER", &fake.url());
        let file = dir.write(path.file_name().unwrap().to_str().unwrap(), text);
        let (code, output) = wavelet(&["status", "--kubeconfig", file.to_str().unwrap()], &[]);
        assert_eq!(code, Some(0), "{}: {output}", path.display());
        assert!(
            saw_token(&fake, TOKEN),
            "{}: no request with the token",
            path.display()
        );
        assert!(
            !output.contains(TOKEN),
            "{}: the token was printed",
            path.display()
        );
    }
}

#[test]
fn a_kubeconfig_list_is_merged_as_kubectl_merges_it_and_context_picks_another() {
    let good = FakeApi::start();
    good.require_token(Some(TOKEN));
    let dir = TempDir::new("merge");
    // Clusters and users in one file, contexts and the current one in another, and a
    // third with a clashing cluster name that must lose (first file wins).
    let a = dir.write(
        "a",
        format!("clusters:\n- name: c\n  cluster:\n    server: {}\n- name: dead\n  cluster:\n    server: http://127.0.0.1:9\nusers:\n- name: u\n  user:\n    token: {TOKEN}\n", good.url()),
    );
    let b = dir.write(
        "b",
        "current-context: broken\ncontexts:\n- name: broken\n  context:\n    cluster: dead\n    user: u\n- name: good\n  context:\n    cluster: c\n    user: u\n    namespace: team-a\n",
    );
    let c = dir.write(
        "c",
        "current-context: ignored\nclusters:\n- name: c\n  cluster:\n    server: http://127.0.0.1:9\n",
    );
    let missing = dir.0.join("missing");
    let list = std::env::join_paths([&a, &missing, &b, &c])
        .unwrap()
        .into_string()
        .unwrap();
    // The current context (from b, the first file that sets one) is unreachable.
    let (code, output) = wavelet(&["status"], &[("KUBECONFIG", &list)]);
    assert_ne!(code, Some(0), "{output}");
    assert!(output.contains("127.0.0.1:9"), "{output}");
    // --context (and WAVELET_CONTEXT) picks the good one; its cluster comes from a.
    let (code, output) = wavelet(&["status", "--context", "good"], &[("KUBECONFIG", &list)]);
    assert_eq!(code, Some(0), "{output}");
    let (code, output) = wavelet(
        &["status"],
        &[("KUBECONFIG", &list), ("WAVELET_CONTEXT", "good")],
    );
    assert_eq!(code, Some(0), "{output}");
    assert!(saw_token(&good, TOKEN));
    let (code, output) = wavelet(&["status", "--context", "nope"], &[("KUBECONFIG", &list)]);
    assert_eq!(code, Some(2), "{output}");
    assert!(
        output.contains("context `nope` is not in contexts"),
        "{output}"
    );
}

/// A kubeconfig whose user runs `plugin.sh` from `dir`, with `install_hint`.
fn exec_kubeconfig(fake: &FakeApi, dir: &TempDir, script: &str) -> PathBuf {
    let plugin = dir.write("plugin.sh", format!("#!/bin/sh\n{script}\n"));
    let mut perms = std::fs::metadata(&plugin).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&plugin, perms).unwrap();
    dir.write(
        "kubeconfig",
        kubeconfig_text(
            &fake.url(),
            &[],
            &[
                "exec:",
                "  apiVersion: client.authentication.k8s.io/v1",
                "  command: ./plugin.sh",
                "  interactiveMode: Never",
                "  provideClusterInfo: true",
                "  installHint: install it with `apt-get install demo-plugin`",
            ],
        ),
    )
}

/// A plugin that prints the token in `token` next to it, counts its runs in `runs`, and
/// says its credential expires `expiry_secs` from now.
fn token_plugin(expiry_secs: u64) -> String {
    format!(
        r#"cd "$(dirname "$0")"; echo run >> runs
case "$KUBERNETES_EXEC_INFO" in *'"server":"http'*) ;; *) echo "no cluster info" >&2; exit 3;; esac
exp=$(date -u -d "+{expiry_secs} seconds" +%Y-%m-%dT%H:%M:%SZ)
printf '{{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{{"token":"%s","expirationTimestamp":"%s"}}}}' "$(cat token)" "$exp""#
    )
}

#[test]
fn an_exec_plugins_token_is_used_and_refreshed_after_a_401_and_never_printed() {
    let fake = FakeApi::start();
    add_web(&fake, "default");
    let dir = TempDir::new("exec");
    dir.write("token", "exec-token-one");
    fake.require_token(Some("exec-token-one"));
    let kubeconfig = exec_kubeconfig(&fake, &dir, &token_plugin(3600));
    let mut args = FAST.to_vec();
    args.extend(["--kubeconfig", kubeconfig.to_str().unwrap()]);
    let wavelet = Wavelet::launch(&args, &[("RUST_LOG", "trace")]);
    eventually(&fake, &wavelet, "adoption", |f| {
        hashes(
            f,
            "deployments",
            "default",
            "web",
            "wavelet.dev/config-hash",
        )
        .1
        .is_some()
    });
    // The server stops taking the token; the plugin now prints a new one.
    dir.write("token", "exec-token-two");
    fake.require_token(Some("exec-token-two"));
    fake.merge_patch(
        "configmaps",
        "default",
        "app-config",
        json!({"data": {"color": "green"}}),
    );
    // The object, not the requests: a PATCH refused with 401 is recorded too.
    eventually(&fake, &wavelet, "a rollout with the new token", |f| {
        hashes(
            f,
            "deployments",
            "default",
            "web",
            "wavelet.dev/config-hash",
        )
        .0
        .is_some()
    });
    let runs = std::fs::read_to_string(dir.0.join("runs")).unwrap();
    assert!(
        runs.lines().count() >= 2,
        "the plugin ran {runs:?}: {}",
        wavelet.output()
    );
    let output = wavelet.output();
    assert!(
        output.contains("TRACE") || output.contains("DEBUG"),
        "not at trace"
    );
    assert!(!output.contains("exec-token-"), "a token in the output");
}

#[test]
fn an_exec_credential_is_run_again_when_it_expires() {
    let fake = FakeApi::start();
    add_web(&fake, "default");
    fake.require_token(Some("exec-token"));
    let dir = TempDir::new("exec-expiry");
    dir.write("token", "exec-token");
    // Expires in 61 s: inside the 60 s margin one second later, with no 401 ever.
    let kubeconfig = exec_kubeconfig(&fake, &dir, &token_plugin(61));
    let mut args = FAST.to_vec();
    args.extend(["--kubeconfig", kubeconfig.to_str().unwrap()]);
    let wavelet = Wavelet::launch(&args, &[]);
    eventually(&fake, &wavelet, "adoption", |f| {
        hashes(
            f,
            "deployments",
            "default",
            "web",
            "wavelet.dev/config-hash",
        )
        .1
        .is_some()
    });
    let runs = || {
        std::fs::read_to_string(dir.0.join("runs"))
            .unwrap()
            .lines()
            .count()
    };
    let at_start = runs();
    // Scenario time, not a wait before an assertion: the token must come within 60 s of
    // its expiry, which takes the clock passing one second.
    std::thread::sleep(std::time::Duration::from_millis(1200));
    fake.merge_patch(
        "configmaps",
        "default",
        "app-config",
        json!({"data": {"color": "green"}}),
    );
    eventually(&fake, &wavelet, "a rollout", |f| {
        hashes(
            f,
            "deployments",
            "default",
            "web",
            "wavelet.dev/config-hash",
        )
        .0
        .is_some()
    });
    assert!(
        runs() > at_start,
        "not run again after expiry ({at_start} runs)"
    );
    assert!(!fake
        .requests()
        .iter()
        .any(|r| r.method == "PATCH" && r.header("authorization") != Some("Bearer exec-token")));
}

#[test]
fn a_client_certificate_from_an_exec_plugin_is_accepted() {
    let fake = FakeApi::start();
    let dir = TempDir::new("exec-cert");
    let kubeconfig = exec_kubeconfig(
        &fake,
        &dir,
        r#"printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"clientCertificateData":"-----BEGIN CERTIFICATE-----\\nMA==\\n-----END CERTIFICATE-----\\n","clientKeyData":"-----BEGIN PRIVATE KEY-----\\nMA==\\n-----END PRIVATE KEY-----\\n"}}'"#,
    );
    // Plain http to loopback: the certificate is read, not used; the plugin ran and
    // nothing failed.
    let (code, output) = wavelet(
        &["status", "--kubeconfig", kubeconfig.to_str().unwrap()],
        &[],
    );
    assert_eq!(code, Some(0), "{output}");
    assert!(!output.contains("PRIVATE KEY"), "{output}");
}

#[test]
fn a_missing_or_failing_plugin_is_a_clear_error_with_its_install_hint_and_stderr() {
    let fake = FakeApi::start();
    let dir = TempDir::new("exec-fail");
    let kubeconfig = exec_kubeconfig(
        &fake,
        &dir,
        "echo 'your session expired: run demo login' >&2; exit 1",
    );
    let (code, output) = wavelet(
        &["status", "--kubeconfig", kubeconfig.to_str().unwrap()],
        &[],
    );
    assert_eq!(code, Some(2), "{output}");
    assert!(
        output.contains("your session expired: run demo login"),
        "{output}"
    );
    assert!(output.contains("apt-get install demo-plugin"), "{output}");

    std::fs::remove_file(dir.0.join("plugin.sh")).unwrap();
    let (code, output) = wavelet(
        &["status", "--kubeconfig", kubeconfig.to_str().unwrap()],
        &[],
    );
    assert_eq!(code, Some(2), "{output}");
    assert!(
        output.contains("cannot run the exec credential plugin"),
        "{output}"
    );
    assert!(output.contains("apt-get install demo-plugin"), "{output}");
}

#[test]
fn impersonation_is_sent_as_headers() {
    let fake = FakeApi::start();
    let dir = TempDir::new("impersonate");
    let kubeconfig = dir.write(
        "kubeconfig",
        kubeconfig_text(
            &fake.url(),
            &[],
            &["token: t", "as: jane", "as-groups: [ops]"],
        ),
    );
    let (code, output) = wavelet(
        &["status", "--kubeconfig", kubeconfig.to_str().unwrap()],
        &[],
    );
    assert_eq!(code, Some(0), "{output}");
    let request = fake.requests().into_iter().next().unwrap();
    assert_eq!(request.header("impersonate-user"), Some("jane"));
    assert_eq!(request.header("impersonate-group"), Some("ops"));
}

#[test]
fn status_and_hash_default_to_the_contexts_namespace() {
    let fake = FakeApi::start();
    for ns in ["team-a", "team-b"] {
        add_web(&fake, ns);
    }
    let dir = TempDir::new("context-ns");
    let text = kubeconfig_text(&fake.url(), &[], &["token: t"])
        .replace("    user: sa\n", "    user: sa\n    namespace: team-a\n");
    let kubeconfig = dir.write("kubeconfig", text);
    let path = kubeconfig.to_str().unwrap();
    let (_, output) = wavelet(&["status", "--kubeconfig", path], &[]);
    assert!(
        output.contains("team-a/web") && !output.contains("team-b/web"),
        "{output}"
    );
    let (code, output) = wavelet(&["hash", "deployment/web", "--kubeconfig", path], &[]);
    assert_eq!(code, Some(0), "{output}");
    assert!(output.contains("configmap team-a/app-config"), "{output}");
    let (_, output) = wavelet(&["status", "--kubeconfig", path, "-n", "team-b"], &[]);
    assert!(output.contains("team-b/web"), "{output}");
}
