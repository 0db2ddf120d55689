//! Switching from Stakater Reloader without touching its install, against the fake API
//! server: its alerts (`ALERT_*`) reach a local receiver in each sink's shape, through its
//! proxy, over verified TLS, retried with backoff; a receiver that never answers delays no
//! rollout, and a full queue drops (counted, logged); its metric
//! `reloader_reload_executed_total` counts rollouts and failed writes; its probes `/live`
//! and `/metrics` answer. Reloader's chart rendered and run as is: `reloader_chart.rs` and
//! the end-to-end suite.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::fake::http::{read_request, write_response, Request, Response};
use crate::fake::tls::{server_config, Conn};
use crate::fake::{FakeApi, Fault};
use crate::util::*;

/// The token part of the webhook URLs: it must never reach a log line.
pub(crate) const TOKEN: &str = "T0KEN-b2a7f3";

/// A webhook receiver on 127.0.0.1, plain or with the fixture certificate: records each
/// request and answers it with the next scripted code (200 once the script is done), or
/// never answers (`hang`).
pub(crate) struct Receiver {
    address: String,
    tls: bool,
    got: Arc<Mutex<Vec<Request>>>,
}

impl Receiver {
    pub(crate) fn start(tls: bool, script: &[u16], hang: bool) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let got = Arc::new(Mutex::new(Vec::new()));
        let script = Arc::new(Mutex::new(script.iter().copied().collect::<VecDeque<_>>()));
        let config = tls.then(server_config);
        {
            let got = Arc::clone(&got);
            std::thread::spawn(move || {
                for socket in listener.incoming().map_while(Result::ok) {
                    let (got, script, config) =
                        (Arc::clone(&got), Arc::clone(&script), config.clone());
                    std::thread::spawn(move || {
                        let Ok(conn) = Conn::new(socket, config.as_ref()) else {
                            return;
                        };
                        let mut reader = BufReader::new(conn);
                        while let Ok(Some(request)) = read_request(&mut reader) {
                            got.lock().unwrap().push(request);
                            if hang {
                                std::thread::sleep(Duration::from_secs(3600));
                            }
                            let code = script.lock().unwrap().pop_front().unwrap_or(200);
                            let answer = Response::text(code, "ok");
                            if write_response(reader.get_mut(), &answer).is_err() {
                                return;
                            }
                        }
                    });
                }
            });
        }
        Receiver { address, tls, got }
    }

    pub(crate) fn url(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}/services/{TOKEN}?key={TOKEN}", self.address)
    }

    pub(crate) fn requests(&self) -> Vec<Request> {
        self.got.lock().unwrap().clone()
    }
}

/// An HTTP CONNECT proxy on 127.0.0.1 that records each CONNECT target and relays.
struct Proxy {
    address: String,
    targets: Arc<Mutex<Vec<String>>>,
}

impl Proxy {
    fn start() -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let targets = Arc::new(Mutex::new(Vec::new()));
        let recorded = Arc::clone(&targets);
        std::thread::spawn(move || {
            for client in listener.incoming().map_while(Result::ok) {
                let recorded = Arc::clone(&recorded);
                std::thread::spawn(move || {
                    let mut reader = BufReader::new(client.try_clone().unwrap());
                    let mut line = String::new();
                    reader.read_line(&mut line).unwrap();
                    let target = line
                        .strip_prefix("CONNECT ")
                        .and_then(|rest| rest.split(' ').next())
                        .unwrap_or_default()
                        .to_string();
                    loop {
                        let mut header = String::new();
                        if reader.read_line(&mut header).unwrap_or(0) == 0
                            || header.trim().is_empty()
                        {
                            break;
                        }
                    }
                    recorded.lock().unwrap().push(target.clone());
                    let Ok(upstream) = TcpStream::connect(&target) else {
                        return;
                    };
                    let mut client = client;
                    client
                        .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                        .unwrap();
                    let (mut up_read, mut client_write) =
                        (upstream.try_clone().unwrap(), client.try_clone().unwrap());
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut up_read, &mut client_write);
                    });
                    let (mut client_read, mut up_write) = (client, upstream);
                    let _ = std::io::copy(&mut client_read, &mut up_write);
                });
            }
        });
        Proxy { address, targets }
    }
}

fn wait_until(what: &str, wavelet: &Wavelet, timeout: Duration, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + timeout;
    while !cond() {
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}:\n{}",
            wavelet.output()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// wavelet with Reloader's alert variables for `receiver`, and `extra` flags.
fn with_alerts(
    fake: &FakeApi,
    sink: &str,
    url: &str,
    extra: &[&str],
    env: &[(&str, &str)],
) -> Wavelet {
    let mut all_env = vec![
        ("RUST_LOG", "debug"),
        ("ALERT_ON_RELOAD", "true"),
        ("ALERT_SINK", sink),
        ("ALERT_WEBHOOK_URL", url),
    ];
    all_env.extend_from_slice(env);
    let mut args = FAST.to_vec();
    args.extend_from_slice(extra);
    let wavelet = Wavelet::start_with_env(fake, &args, &all_env);
    // The tests change app-config next and count the rollout's alert: a change made before
    // a workload is adopted is taken in by the adoption, without a rollout or an alert.
    eventually(fake, &wavelet, "every Deployment adopted", |f| {
        f.list("deployments", None)
            .iter()
            .all(|d| d["metadata"]["annotations"]["wavelet.dev/config-hash"].is_string())
    });
    wavelet
}

fn change_app_config(fake: &FakeApi, color: &str) {
    fake.merge_patch(
        "configmaps",
        "default",
        "app-config",
        json!({"data": {"color": color}}),
    );
}

fn assert_no_token_logged(wavelet: &Wavelet) {
    let output = wavelet.output();
    assert!(
        !output.contains(TOKEN),
        "the webhook URL's token was logged:\n{output}"
    );
}

#[test]
fn alerts_reach_a_local_receiver_in_each_sinks_shape_naming_the_workload_and_what_changed() {
    let message = "cluster-a : wavelet detected changes in *app-config* of type *CONFIGMAP* in namespace *default*. Hence reloaded *web* of type *Deployment* in namespace *default*";
    let cases = [
        (
            "slack",
            "application/json",
            json!({"attachments": [{"color": "good", "author_name": "wavelet", "text": message}]})
                .to_string(),
        ),
        (
            "teams",
            "application/json",
            json!({"text": message}).to_string(),
        ),
        (
            "gchat",
            "application/json",
            json!({"text": message}).to_string(),
        ),
        ("webhook", "text/plain", message.replace('*', "")),
    ];
    std::thread::scope(|scope| {
        for (sink, content_type, body) in &cases {
            scope.spawn(move || {
                let receiver = Receiver::start(false, &[], false);
                let fake = fake_with_web();
                let wavelet = with_alerts(
                    &fake,
                    sink,
                    &receiver.url(),
                    &[],
                    &[("ALERT_ADDITIONAL_INFO", "cluster-a")],
                );
                wait_for_metric(
                    &wavelet,
                    "wavelet_rollouts_total",
                    r#"kind="Deployment",result="adopted""#,
                    |v| v >= 1.0,
                );
                assert!(
                    receiver.requests().is_empty(),
                    "{sink}: adoption is no rollout"
                );
                change_app_config(&fake, "green");
                wait_for_metric(&wavelet, "wavelet_alerts_total", r#"result="sent""#, |v| {
                    v >= 1.0
                });
                let got = receiver.requests();
                assert_eq!(got.len(), 1, "{sink}");
                assert_eq!(got[0].method, "POST");
                assert_eq!(got[0].path, format!("/services/{TOKEN}"));
                assert_eq!(got[0].header("content-type"), Some(*content_type), "{sink}");
                if content_type.starts_with("application/json") {
                    let want: serde_json::Value = serde_json::from_str(body).unwrap();
                    assert_eq!(got[0].body_json(), want, "{sink}");
                } else {
                    assert_eq!(&got[0].body, body, "{sink}");
                }
                assert!(
                    !got[0].body.contains("green"),
                    "{sink}: a value in the alert"
                );
                assert_no_token_logged(&wavelet);
            });
        }
    });
}

#[test]
fn server_errors_are_retried_with_backoff_and_a_refusal_is_given_up_at_once() {
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let receiver = Receiver::start(false, &[503, 500], false);
            let fake = fake_with_web();
            let wavelet = with_alerts(&fake, "slack", &receiver.url(), &[], &[]);
            change_app_config(&fake, "green");
            wait_for_metric(&wavelet, "wavelet_alerts_total", r#"result="sent""#, |v| {
                v >= 1.0
            });
            let got = receiver.requests();
            assert_eq!(got.len(), 3, "two failures, then the alert");
            let gaps: Vec<Duration> = got
                .windows(2)
                .map(|w| w[1].received - w[0].received)
                .collect();
            assert!(gaps[0] >= Duration::from_millis(900), "{gaps:?}");
            assert!(
                gaps[1] >= Duration::from_millis(1900),
                "backoff doubles: {gaps:?}"
            );
            assert_no_token_logged(&wavelet);
        });
        scope.spawn(|| {
            let receiver = Receiver::start(false, &[404], false);
            let fake = fake_with_web();
            let wavelet = with_alerts(&fake, "teams", &receiver.url(), &[], &[]);
            change_app_config(&fake, "green");
            wait_for_metric(
                &wavelet,
                "wavelet_alerts_total",
                r#"result="failed""#,
                |v| v >= 1.0,
            );
            assert_eq!(receiver.requests().len(), 1, "a 404 is not retried");
            assert!(
                wavelet
                    .output()
                    .contains("alert not sent to http://127.0.0.1:"),
                "{}",
                wavelet.output()
            );
            assert!(wavelet.output().contains("404"), "{}", wavelet.output());
            assert_no_token_logged(&wavelet);
        });
    });
}

#[test]
fn a_receiver_that_never_answers_delays_no_rollout_and_a_full_queue_drops_counted_and_logged() {
    let receiver = Receiver::start(false, &[], true);
    let fake = fake_with_web();
    for name in ["b", "c", "d"] {
        fake.apply(workload(
            "Deployment",
            "default",
            name,
            opted_in(),
            mounts_configmap("app-config"),
        ));
    }
    let wavelet = with_alerts(
        &fake,
        "slack",
        &receiver.url(),
        &["--alert-queue-size", "1"],
        &[],
    );
    wait_for_metric(
        &wavelet,
        "wavelet_rollouts_total",
        r#"kind="Deployment",result="adopted""#,
        |v| v >= 4.0,
    );
    let changed = Instant::now();
    change_app_config(&fake, "green");
    // Four rollouts: the first alert hangs in the sender, the second waits in the queue,
    // the others are dropped; no rollout waits for any of them.
    wait_for_metric(
        &wavelet,
        "wavelet_rollouts_total",
        r#"kind="Deployment",result="rolled""#,
        |v| v >= 4.0,
    );
    let took = changed.elapsed();
    assert!(
        took < Duration::from_secs(5),
        "rollouts waited for the alerts: {took:?}"
    );
    for name in ["web", "b", "c", "d"] {
        assert_eq!(
            template_patches(&fake, "deployments", "default", name),
            1,
            "{name}"
        );
    }
    // At least two dropped (three when a second alert came before the sender took the
    // first from the queue), each counted and logged.
    wait_for_metric(
        &wavelet,
        "wavelet_alerts_total",
        r#"result="dropped""#,
        |v| v >= 2.0,
    );
    wait_until("two drops logged", &wavelet, Duration::from_secs(5), || {
        wavelet
            .output()
            .matches("alert dropped: the alert queue is full")
            .count()
            >= 2
    });
    // The sender may take the first alert from the queue before its request arrives.
    wait_until(
        "the first alert sent",
        &wavelet,
        Duration::from_secs(5),
        || !receiver.requests().is_empty(),
    );
    assert_eq!(
        receiver.requests().len(),
        1,
        "the sender is stuck on the first alert"
    );
    assert_no_token_logged(&wavelet);
}

#[test]
fn https_receivers_are_verified_against_the_public_roots_or_the_alert_ca_file() {
    let ca = format!("{}/tests/fixtures/tls/ca.crt", env!("CARGO_MANIFEST_DIR"));
    std::thread::scope(|scope| {
        scope.spawn(|| {
            // The fixture CA is no public root: refused, never delivered.
            let receiver = Receiver::start(true, &[], false);
            let fake = fake_with_web();
            let wavelet = with_alerts(&fake, "gchat", &receiver.url(), &[], &[]);
            change_app_config(&fake, "green");
            wait_for_metric(
                &wavelet,
                "wavelet_alerts_total",
                r#"result="failed""#,
                |v| v >= 1.0,
            );
            assert!(receiver.requests().is_empty());
            assert_no_token_logged(&wavelet);
        });
        scope.spawn(|| {
            let receiver = Receiver::start(true, &[], false);
            let fake = fake_with_web();
            let wavelet = with_alerts(
                &fake,
                "gchat",
                &receiver.url(),
                &["--alert-ca-file", &ca],
                &[],
            );
            change_app_config(&fake, "green");
            wait_for_metric(&wavelet, "wavelet_alerts_total", r#"result="sent""#, |v| {
                v >= 1.0
            });
            assert_eq!(receiver.requests().len(), 1);
        });
    });
}

#[test]
fn the_alert_proxy_carries_every_alert() {
    let receiver = Receiver::start(false, &[], false);
    let proxy = Proxy::start();
    let fake = fake_with_web();
    let proxy_url = format!("http://{}", proxy.address);
    let wavelet = with_alerts(
        &fake,
        "webhook",
        &receiver.url(),
        &[],
        &[("ALERT_WEBHOOK_PROXY", &proxy_url)],
    );
    change_app_config(&fake, "green");
    wait_for_metric(&wavelet, "wavelet_alerts_total", r#"result="sent""#, |v| {
        v >= 1.0
    });
    assert_eq!(
        *proxy.targets.lock().unwrap(),
        vec![receiver.address.clone()]
    );
    assert_eq!(receiver.requests().len(), 1);
}

#[test]
fn a_dry_run_alerts_what_it_would_roll_and_counts_no_reload() {
    let receiver = Receiver::start(false, &[], false);
    let fake = fake_with_web();
    // Adopted before (a dry run writes nothing, so it never adopts).
    let hash = expected_hash(&fake, "deployments", "default", "web");
    fake.merge_patch(
        "deployments",
        "default",
        "web",
        json!({"metadata": {"annotations": {"wavelet.dev/config-hash": hash}}}),
    );
    let wavelet = with_alerts(&fake, "webhook", &receiver.url(), &["--dry-run"], &[]);
    change_app_config(&fake, "green");
    wait_for_metric(&wavelet, "wavelet_alerts_total", r#"result="sent""#, |v| {
        v >= 1.0
    });
    assert!(
        receiver.requests()[0]
            .body
            .contains("Dry run: would have reloaded web of type Deployment"),
        "{}",
        receiver.requests()[0].body
    );
    assert_eq!(template_patches(&fake, "deployments", "default", "web"), 0);
    assert_eq!(
        metric(
            &wavelet,
            "reloader_reload_executed_total",
            r#"success="true""#
        ),
        0.0
    );
}

#[test]
fn reloader_reload_executed_total_counts_rollouts_and_failed_writes_by_namespace_when_enabled() {
    let fake = fake_with_web();
    let wavelet = Wavelet::start_with_env(
        &fake,
        FAST,
        &[
            ("RUST_LOG", "debug"),
            ("METRICS_COUNT_BY_NAMESPACE", "enabled"),
        ],
    );
    wait_for_metric(
        &wavelet,
        "wavelet_rollouts_total",
        r#"kind="Deployment",result="adopted""#,
        |v| v >= 1.0,
    );
    assert_eq!(
        metric(
            &wavelet,
            "reloader_reload_executed_total",
            r#"success="true""#
        ),
        0.0,
        "adoption is no reload"
    );
    assert_eq!(
        metric(
            &wavelet,
            "reloader_reload_executed_total",
            r#"success="false""#
        ),
        0.0
    );
    change_app_config(&fake, "green");
    wait_for_metric(
        &wavelet,
        "reloader_reload_executed_total",
        r#"success="true""#,
        |v| v >= 1.0,
    );
    // A failed write counts as Reloader's failed reload, then its retry as a reload.
    fake.inject(Fault::Status {
        method: "PATCH".into(),
        resource: "deployments".into(),
        code: 500,
        retry_after_secs: None,
        times: 1,
        plain_text: false,
    });
    change_app_config(&fake, "blue");
    wait_for_metric(
        &wavelet,
        "reloader_reload_executed_total",
        r#"success="true""#,
        |v| v >= 2.0,
    );
    assert_eq!(
        metric(
            &wavelet,
            "reloader_reload_executed_total",
            r#"success="false""#
        ),
        1.0
    );
    let (_, body) = wavelet.http_get("/metrics");
    assert!(
        body.contains("# TYPE reloader_reload_executed_total counter\n"),
        "{body}"
    );
    assert!(body.contains("reloader_reload_executed_total_by_namespace{success=\"true\",namespace=\"default\"} 2\n"), "{body}");
    assert!(body.contains("reloader_reload_executed_total_by_namespace{success=\"false\",namespace=\"default\"} 1\n"), "{body}");
}

#[test]
fn reloaders_probe_paths_answer_and_its_metric_is_there_without_the_namespace_variant() {
    let fake = fake_with_web();
    let wavelet = Wavelet::start(&fake, FAST);
    assert_eq!(wavelet.http_get("/live"), (200, "ok\n".to_string()));
    let (code, body) = wavelet.http_get("/metrics");
    assert_eq!(code, 200);
    assert!(
        body.contains("reloader_reload_executed_total{success=\"true\"} 0\n"),
        "{body}"
    );
    assert!(!body.contains("_by_namespace"), "{body}");
}
