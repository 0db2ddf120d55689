//! On-call is told of fan-out holds (issue 32.10), against the fake API server and a
//! webhook receiver on 127.0.0.1: one alert when a fan-out is held (the change, the
//! workload that failed and why, the `wavelet resume` that goes on) and one when it is
//! resumed or superseded, in the sink's own shape, never a value, with a URL alone (no
//! `--alert-on-reload`); `--alert-on-hold=false` turns them off.

use std::process::Output;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::fake::http::Request;
use crate::fake::FakeApi;
use crate::reloader_switch::{Receiver, TOKEN};
use crate::util::*;

const NS: &str = "default";

/// ConfigMap `shared` (a value that must never reach an alert) and Deployments a and b
/// that mount it; wavelet with a 2 s rollout timeout and alerts to `receiver`.
fn held_setup(receiver: &Receiver, sink: &str, extra: &[&str]) -> (FakeApi, Wavelet) {
    let fake = FakeApi::start();
    fake.apply(configmap(NS, "shared", &[("k", "v1-secretish")]));
    for name in ["a", "b"] {
        fake.apply(workload(
            "Deployment",
            NS,
            name,
            opted_in(),
            mounts_configmap("shared"),
        ));
    }
    let url = receiver.url();
    let mut args = FAST.to_vec();
    args.extend_from_slice(&[
        "--rollout-timeout",
        "2s",
        "--alert-sink",
        sink,
        "--alert-webhook-url",
        &url,
    ]);
    args.extend_from_slice(extra);
    let wavelet = Wavelet::start(&fake, &args);
    eventually(&fake, &wavelet, "a and b adopted", |f| {
        ["a", "b"].iter().all(|n| {
            hashes(f, "deployments", NS, n, "wavelet.dev/config-hash")
                .1
                .is_some()
        })
    });
    // The watch showed both adoptions (each one's own write wakes it, and it is found up
    // to date): a change from now on is judged against what they carry.
    eventually(&fake, &wavelet, "a and b seen up to date", |_| {
        let output = wavelet.output();
        ["a", "b"]
            .iter()
            .all(|n| output.contains(&format!("deployment {NS}/{n}: UpToDate")))
    });
    // a's new Pods never get Ready within the test: the fan-out holds after a.
    fake.set_ready_delay(Duration::from_secs(600));
    (fake, wavelet)
}

fn change(fake: &FakeApi, value: &str) {
    fake.merge_patch("configmaps", NS, "shared", json!({"data": {"k": value}}));
}

fn wait_for_alerts(receiver: &Receiver, wavelet: &Wavelet, n: usize) -> Vec<Request> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let got = receiver.requests();
        if got.len() >= n {
            return got;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {n} alert(s), got {}:\n{}",
            got.len(),
            wavelet.output()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn held_events(fake: &FakeApi) -> usize {
    fake.events_for(NS, "shared")
        .iter()
        .filter(|e| e["reason"] == "FanOutHeld")
        .count()
}

fn resume(fake: &FakeApi) -> Option<i32> {
    let Output { status, .. } = wavelet_command()
        .args([
            "resume",
            "-n",
            NS,
            "configmap/shared",
            "--server",
            &fake.url(),
        ])
        .env_clear()
        .output()
        .expect("running wavelet resume");
    status.code()
}

fn assert_clean(requests: &[Request], wavelet: &Wavelet) {
    for r in requests {
        assert!(
            !r.body.contains("secretish"),
            "a value in an alert: {}",
            r.body
        );
    }
    assert!(
        !wavelet.output().contains(TOKEN),
        "the URL's token was logged"
    );
}

#[test]
fn a_held_fan_out_is_one_slack_alert_and_its_resume_another_without_alert_on_reload() {
    let receiver = Receiver::start(false, &[], false);
    let (fake, wavelet) = held_setup(&receiver, "slack", &[]);
    change(&fake, "v2-secretish");
    eventually(&fake, &wavelet, "FanOutHeld", |f| held_events(f) >= 1);
    let got = wait_for_alerts(&receiver, &wavelet, 1);
    assert_eq!(
        got.len(),
        1,
        "only the hold: a's rollout is no alert without --alert-on-reload"
    );
    assert_eq!(got[0].header("content-type"), Some("application/json"));
    let body = got[0].body_json();
    let attachment = &body["attachments"][0];
    assert_eq!(attachment["color"], "danger", "{body}");
    assert_eq!(attachment["author_name"], "wavelet", "{body}");
    let text = attachment["text"].as_str().unwrap_or_default();
    assert!(
        text.starts_with("wavelet held the fan-out of change *")
            && text.contains("in *shared* of type *CONFIGMAP* in namespace *default*")
            && text.contains("*deployment default/a* failed")
            && text.contains("--rollout-timeout")
            && text.contains("`wavelet resume -n default configmap/shared`"),
        "{text}"
    );

    assert_eq!(resume(&fake), Some(0));
    let got = wait_for_alerts(&receiver, &wavelet, 2);
    let text = got[1].body_json()["attachments"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        text.starts_with("wavelet resumed the fan-out of change *")
            && text.contains("past *deployment default/a*"),
        "{text}"
    );
    assert_eq!(got[1].body_json()["attachments"][0]["color"], "good");
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(receiver.requests().len(), 2, "one alert each");
    assert_clean(&receiver.requests(), &wavelet);
}

#[test]
fn a_held_fan_out_superseded_by_a_new_change_says_so_on_a_plain_webhook() {
    let receiver = Receiver::start(false, &[], false);
    let (fake, wavelet) = held_setup(&receiver, "webhook", &[]);
    change(&fake, "v2-secretish");
    let got = wait_for_alerts(&receiver, &wavelet, 1);
    assert_eq!(got[0].header("content-type"), Some("text/plain"));
    assert!(
        got[0]
            .body
            .starts_with("wavelet held the fan-out of change ")
            && got[0].body.contains("deployment default/a failed")
            && !got[0].body.contains('*'),
        "{}",
        got[0].body
    );
    change(&fake, "v3-secretish");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !receiver
        .requests()
        .iter()
        .any(|r| r.body.contains("superseded it"))
    {
        assert!(
            Instant::now() < deadline,
            "no superseded alert: {:?}\n{}",
            receiver
                .requests()
                .iter()
                .map(|r| r.body.clone())
                .collect::<Vec<_>>(),
            wavelet.output()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let superseded: Vec<Request> = receiver
        .requests()
        .into_iter()
        .filter(|r| r.body.contains("superseded it"))
        .collect();
    assert_eq!(superseded.len(), 1);
    assert!(
        superseded[0]
            .body
            .starts_with("wavelet no longer holds the fan-out of change "),
        "{}",
        superseded[0].body
    );
    assert_clean(&receiver.requests(), &wavelet);
}

#[test]
fn alert_on_hold_false_sends_nothing_on_a_hold() {
    let receiver = Receiver::start(false, &[], false);
    let (fake, wavelet) = held_setup(&receiver, "teams", &["--alert-on-hold=false"]);
    assert!(
        wavelet.output().contains("alerts are off"),
        "{}",
        wavelet.output()
    );
    change(&fake, "v2-secretish");
    eventually(&fake, &wavelet, "FanOutHeld", |f| held_events(f) >= 1);
    std::thread::sleep(Duration::from_secs(2));
    assert!(receiver.requests().is_empty(), "an alert was sent");
}
