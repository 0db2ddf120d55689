//! Connecting safely, through the real binary: TLS is verified against the configured CA
//! (an unknown CA is refused with a message that names the problem and the way out, and
//! only `--insecure-skip-tls-verify` skips verification; a kubeconfig's `tls-server-name` is
//! the name verified), and a token file that cannot be
//! read is a clear error at start.

use std::time::Duration;

use crate::fake::tls::{fixture, TlsFront};
use crate::fake::FakeApi;
use crate::util::*;

const NS: &str = "default";

fn cluster() -> (FakeApi, TlsFront) {
    let fake = fake_with_web();
    let front = TlsFront::start(&fake.url());
    (fake, front)
}

/// A kubeconfig for `server` trusting the CA in fixture file `ca`.
fn kubeconfig_trusting(dir: &TempDir, server: &str, ca: &str) -> String {
    let ca_file = dir.write("ca.crt", fixture(ca));
    let text = kubeconfig_text(
        server,
        &[&format!("certificate-authority: {}", ca_file.display())],
        &["token: fixture-token"],
    );
    dir.write("kubeconfig", text)
        .to_str()
        .expect("UTF-8 temp path")
        .to_string()
}

fn adopted(fake: &FakeApi, wavelet: &Wavelet) {
    eventually(fake, wavelet, "adoption over TLS", |f| {
        hashes(f, "deployments", NS, "web", "wavelet.dev/config-hash")
            .1
            .is_some()
    });
}

/// Waits for the process to exit; its exit code and everything it printed.
fn exit_and_output(wavelet: &mut Wavelet) -> (Option<i32>, String) {
    let status = wavelet.wait_exit(Duration::from_secs(10));
    // The output threads may still be draining the pipes.
    wavelet.wait_for_output("wavelet: ", Duration::from_secs(2));
    (status.and_then(|s| s.code()), wavelet.output())
}

#[test]
fn a_server_certificate_from_an_unknown_ca_is_refused_with_a_message_naming_the_ca_and_the_flag() {
    let (fake, front) = cluster();
    let dir = TempDir::new("tls");
    let kubeconfig = kubeconfig_trusting(&dir, &front.url(), "other-ca.crt");
    let wavelet = Wavelet::launch(&["--kubeconfig", &kubeconfig], &[("RUST_LOG", "info")]);
    assert!(
        wavelet.wait_for_output("UnknownIssuer", Duration::from_secs(20)),
        "the unknown issuer is named:\n{}",
        wavelet.output()
    );
    let output = wavelet.output();
    let line = output
        .lines()
        .find(|l| l.contains("UnknownIssuer"))
        .unwrap();
    assert!(line.contains("certificate-authority"), "{line}");
    assert!(line.contains("--insecure-skip-tls-verify"), "{line}");
    assert!(
        fake.requests().is_empty(),
        "no request got through the refused handshake"
    );
    assert_eq!(
        wavelet.http_get("/readyz").0,
        503,
        "not ready: nothing listed"
    );
}

#[test]
fn the_configured_ca_is_accepted() {
    let (fake, front) = cluster();
    let dir = TempDir::new("tls");
    let kubeconfig = kubeconfig_trusting(&dir, &front.url(), "ca.crt");
    let mut args = vec!["--kubeconfig", kubeconfig.as_str()];
    args.extend(FAST);
    let wavelet = Wavelet::start_without_server(&args, &[("RUST_LOG", "debug")]);
    adopted(&fake, &wavelet);
    assert!(fake
        .requests()
        .iter()
        .all(|r| r.header("authorization") == Some("Bearer fixture-token")));
}

#[test]
fn https_without_a_ca_is_refused_at_start_and_only_the_insecure_flag_skips_verification() {
    let (fake, front) = cluster();
    let url = front.url();
    let mut refused = Wavelet::launch(&["--server", &url], &[("RUST_LOG", "info")]);
    let (code, output) = exit_and_output(&mut refused);
    assert_eq!(code, Some(2), "a configuration error:\n{output}");
    assert!(output.contains("--insecure-skip-tls-verify"), "{output}");
    assert!(fake.requests().is_empty());

    let mut args = vec!["--server", url.as_str(), "--insecure-skip-tls-verify"];
    args.extend(FAST);
    let wavelet = Wavelet::start_without_server(&args, &[("RUST_LOG", "debug")]);
    adopted(&fake, &wavelet);
}

#[test]
fn a_missing_or_unreadable_token_file_is_a_clear_error_at_start() {
    let fake = FakeApi::start();
    let dir = TempDir::new("token");
    let missing = dir.0.join("no-such-token");
    let unreadable = dir.0.join("a-directory");
    std::fs::create_dir_all(&unreadable).unwrap();
    for (token_file, why) in [
        (missing, "No such file or directory"),
        (unreadable, "Is a directory"),
    ] {
        let text = kubeconfig_text(
            &fake.url(),
            &[],
            &[&format!("tokenFile: {}", token_file.display())],
        );
        let kubeconfig = dir.write("kubeconfig", text);
        let mut wavelet = Wavelet::launch(
            &["--kubeconfig", kubeconfig.to_str().unwrap()],
            &[("RUST_LOG", "info")],
        );
        let (code, output) = exit_and_output(&mut wavelet);
        assert_eq!(code, Some(2), "a configuration error:\n{output}");
        let message = format!("cannot read token file {}: {why}", token_file.display());
        assert!(output.contains(&message), "{output}");
        assert!(
            output.contains("--kubeconfig"),
            "names the way out: {output}"
        );
    }
    assert!(
        fake.requests().is_empty(),
        "nothing is sent without a token"
    );
}

#[test]
fn a_kubeconfigs_tls_server_name_is_what_the_certificate_is_verified_against() {
    let (fake, front) = cluster();
    let port = front.url().rsplit(':').next().unwrap().to_string();
    // The same listener through an address the certificate does not name (it names
    // 127.0.0.1 and localhost): verified as `localhost`, it is accepted.
    let unnamed = format!("https://[::ffff:127.0.0.1]:{port}");
    let dir = TempDir::new("tls-server-name");
    let ca_file = dir.write("ca.crt", fixture("ca.crt"));
    let write = |name: &str, server_name: &str| {
        let text = kubeconfig_text(
            &unnamed,
            &[
                &format!("certificate-authority: {}", ca_file.display()),
                &format!("tls-server-name: {server_name}"),
            ],
            &["token: fixture-token"],
        );
        dir.write(name, text).to_str().unwrap().to_string()
    };

    let wrong = write("wrong", "api.example.com");
    let refused = Wavelet::launch(&["--kubeconfig", &wrong], &[("RUST_LOG", "info")]);
    assert!(
        refused.wait_for_output("kubeconfig's tls-server-name", Duration::from_secs(20)),
        "a certificate that does not name tls-server-name is refused, with a hint:\n{}",
        refused.output()
    );
    assert!(refused
        .output()
        .contains(r#"not valid for name "api.example.com""#));
    assert!(fake.requests().is_empty(), "nothing got through");
    drop(refused);

    let right = write("right", "localhost");
    let mut args = vec!["--kubeconfig", right.as_str()];
    args.extend(FAST);
    let wavelet = Wavelet::start_without_server(&args, &[("RUST_LOG", "info")]);
    adopted(&fake, &wavelet);
    assert!(
        !wavelet.output().contains("tls-server-name"),
        "no warning that it is ignored:\n{}",
        wavelet.output()
    );
}

#[test]
fn the_fake_terminating_tls_itself_serves_lists_watches_and_patches() {
    // What the footprint benchmark measures against: no relay between wavelet and the
    // fake, only TLS, as with a real API server.
    let fake = FakeApi::start_tls();
    add_web(&fake, NS);
    assert!(fake.url().starts_with("https://127.0.0.1:"));
    let dir = TempDir::new("tls-fake");
    let kubeconfig = kubeconfig_trusting(&dir, &fake.url(), "ca.crt");
    let mut args = vec!["--kubeconfig", kubeconfig.as_str()];
    args.extend(FAST);
    let wavelet = Wavelet::start_without_server(&args, &[("RUST_LOG", "info")]);
    adopted(&fake, &wavelet);
    // A change travels the TLS watch and comes back as a PATCH.
    fake.merge_patch(
        "configmaps",
        NS,
        "app-config",
        serde_json::json!({"data": {"color": "green"}}),
    );
    eventually(&fake, &wavelet, "a rollout over TLS", |f| {
        f.revisions("deployments", NS, "web") == 2
    });
}

/// A LIST of more than 128 KiB is sent gzip-compressed when the client accepts it, as
/// kube-apiserver does (client-go always asks): wavelet asks, and reads it whole. A
/// ConfigMap relist of the SPEC §6 cluster was 9 MB uncompressed.
#[test]
fn a_list_of_more_than_128_kib_is_asked_for_and_read_gzip_compressed() {
    let fake = fake_with_web();
    // Listed page by page (the first list is a streaming one where the server offers it).
    fake.disable_watch_list();
    let filler = "x".repeat(4096);
    for i in 0..60 {
        fake.apply(configmap(NS, &format!("filler-{i}"), &[("data", &filler)]));
    }
    let wavelet = Wavelet::start(&fake, &[]);
    eventually(&fake, &wavelet, "adoption", |f| {
        hashes(f, "deployments", NS, "web", "wavelet.dev/config-hash")
            .1
            .is_some()
    });
    let lists: Vec<_> = fake
        .requests()
        .into_iter()
        .filter(|r| r.method == "GET" && r.path == "/api/v1/configmaps" && !r.is_watch())
        .collect();
    assert!(!lists.is_empty(), "no ConfigMap LIST");
    for list in &lists {
        assert_eq!(
            list.header("accept-encoding"),
            Some("gzip"),
            "the ConfigMap LIST does not accept gzip: {:?}",
            list.headers
        );
    }
    // Read whole: every ConfigMap of the compressed list is in the hash of a workload
    // that uses it.
    fake.apply(workload(
        "Deployment",
        NS,
        "filler-user",
        opted_in(),
        mounts_configmap("filler-59"),
    ));
    eventually(
        &fake,
        &wavelet,
        "the last ConfigMap of the list counted",
        |f| {
            hashes(
                f,
                "deployments",
                NS,
                "filler-user",
                "wavelet.dev/config-hash",
            )
            .1 == Some(expected_hash(f, "deployments", NS, "filler-user"))
        },
    );
}
