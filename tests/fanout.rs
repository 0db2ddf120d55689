//! Safe fan-out against the fake API server (README: Rolling a shared change safely): the
//! waves of a shared change and their health gate, `at-once`, wavelet killed mid-fan-out,
//! a hold by `--rollout-timeout` with its Events, status, metrics and `wavelet resume`,
//! pauses by annotation, and a restart window with an urgent change let through once; wave
//! 1's PATCH not waiting for its record, and wavelet killed between the two.
//! The end-to-end suite does the same against the real Deployment controller.

use std::process::Output;
use std::time::Duration;

use serde_json::{json, Value};

use crate::fake::{FakeApi, Fault};
use crate::util::*;

const NS: &str = "default";
const NAMES: [&str; 3] = ["a", "b", "c"];

/// ConfigMap `shared` and Deployments a, b, c that mount it.
fn shared() -> FakeApi {
    let fake = FakeApi::start();
    fake.apply(configmap(NS, "shared", &[("k", "1")]));
    for name in NAMES {
        fake.apply(workload(
            "Deployment",
            NS,
            name,
            opted_in(),
            mounts_configmap("shared"),
        ));
    }
    fake
}

fn start(fake: &FakeApi, extra: &[&str]) -> Wavelet {
    let mut args = FAST.to_vec();
    args.extend_from_slice(extra);
    let wavelet = Wavelet::start(fake, &args);
    eventually(fake, &wavelet, "a, b and c adopted", |f| {
        NAMES.iter().all(|n| {
            hashes(f, "deployments", NS, n, "wavelet.dev/config-hash")
                .1
                .is_some()
        })
    });
    wavelet
}

fn change(fake: &FakeApi, value: &str) {
    fake.merge_patch("configmaps", NS, "shared", json!({"data": {"k": value}}));
}

fn rolled(fake: &FakeApi, name: &str) -> usize {
    template_patches(fake, "deployments", NS, name)
}

fn events(fake: &FakeApi, name: &str, reason: &str) -> Vec<String> {
    fake.events_for(NS, name)
        .iter()
        .filter(|e| e["reason"] == reason)
        .map(|e| e["message"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn pending_lines(wavelet: &Wavelet, name: &str, what: &str) -> usize {
    wavelet
        .output()
        .lines()
        .filter(|l| l.contains(&format!("deployment {NS}/{name}: {what}")))
        .count()
}

fn state_entry(fake: &FakeApi, key: &str) -> Option<String> {
    fake.get("configmaps", NS, "wavelet-state")
        .and_then(|s| s["data"][key].as_str().map(String::from))
}

/// A one-shot `wavelet ARGS --server <fake>`: exit code and stdout.
fn one_shot(fake: &FakeApi, args: &[&str]) -> (Option<i32>, String) {
    let Output { status, stdout, .. } = wavelet_command()
        .args(args)
        .args(["--server", &fake.url()])
        .env_clear()
        .output()
        .expect("running wavelet");
    (status.code(), String::from_utf8_lossy(&stdout).into_owned())
}

#[test]
fn a_shared_change_rolls_the_first_workload_and_the_rest_only_once_it_is_ready() {
    let fake = shared();
    let wavelet = start(&fake, &["--wave-size", "2"]);
    // New Pods turn Ready 3 s after they are created.
    fake.set_ready_delay(Duration::from_secs(3));
    change(&fake, "2");
    // The positive signal: a rolled and b and c said to wait (the workers reconcile them
    // in any order, so either may come first).
    eventually(
        &fake,
        &wavelet,
        "a rolled, b and c waiting for wave 2",
        |f| {
            rolled(f, "a") >= 1
                && ["b", "c"]
                    .iter()
                    .all(|n| pending_lines(&wavelet, n, "PENDING: waiting for wave 2") == 1)
        },
    );
    assert_eq!(rolled(&fake, "a"), 1, "the first wave is a");
    assert_eq!(
        (rolled(&fake, "b"), rolled(&fake, "c")),
        (0, 0),
        "b and c went before a was Ready"
    );
    // Recorded right after wave 1's PATCH (not before it: issue 34, the first rollout).
    eventually(&fake, &wavelet, "the fan-out recorded", |f| {
        state_entry(f, "fanout.configmap.default.shared")
            .is_some_and(|r| r.ends_with("waves=deployments.apps/default/a"))
    });
    eventually(&fake, &wavelet, "b and c rolled once a is Ready", |f| {
        rolled(f, "b") == 1 && rolled(f, "c") == 1
    });
    eventually(&fake, &wavelet, "FanOutComplete", |f| {
        !events(f, "shared", "FanOutComplete").is_empty()
    });
    assert_eq!(
        events(&fake, "shared", "FanOutWave").len(),
        2,
        "waves [a], [b, c]"
    );
    assert_eq!(
        state_entry(&fake, "fanout.configmap.default.shared"),
        None,
        "forgotten when complete"
    );
    assert_eq!(rolled(&fake, "a"), 1);
    eventually(&fake, &wavelet, "b's ConfigChanged", |f| {
        !events(f, "b", "ConfigChanged").is_empty()
    });
    assert!(events(&fake, "b", "ConfigChanged")[0]
        .contains("Released by wave 2 of configmap default/shared's fan-out"));
    assert_eq!(
        metric(&wavelet, "wavelet_fanout_wave_duration_seconds_count", ""),
        2.0
    );
}

#[test]
fn at_once_rolls_every_workload_together_as_before() {
    let fake = shared();
    let wavelet = start(&fake, &["--fan-out", "at-once"]);
    fake.set_ready_delay(Duration::from_secs(30));
    change(&fake, "2");
    eventually(&fake, &wavelet, "all three rolled", |f| {
        NAMES.iter().all(|n| rolled(f, n) == 1)
    });
    assert!(events(&fake, "shared", "FanOutWave").is_empty());
    // wavelet creates its (empty) state ConfigMap at start; at-once records nothing in it.
    assert_eq!(
        fake.get("configmaps", NS, "wavelet-state")
            .map(|s| s["data"].clone()),
        Some(json!({})),
        "nothing recorded"
    );

    // The annotation on the object wins over the flag.
    fake.merge_patch(
        "configmaps",
        NS,
        "shared",
        json!({"metadata": {"annotations": {"wavelet.dev/fan-out": "waves"}}}),
    );
    change(&fake, "3");
    eventually(&fake, &wavelet, "a rolled, b and c waiting", |f| {
        rolled(f, "a") == 2
            && ["b", "c"]
                .iter()
                .all(|n| pending_lines(&wavelet, n, "PENDING: waiting for wave 2") == 1)
    });
    assert_eq!((rolled(&fake, "b"), rolled(&fake, "c")), (1, 1));
}

#[test]
fn wavelet_killed_mid_fan_out_goes_on_from_the_record_without_rolling_anything_twice() {
    let fake = shared();
    let mut first = start(&fake, &["--wave-size", "1"]);
    fake.set_ready_delay(Duration::from_secs(2));
    change(&fake, "2");
    eventually(&fake, &first, "wave 1 rolled", |f| rolled(f, "a") == 1);
    first.signal("KILL");
    first.wait_exit(Duration::from_secs(10));
    // a is still starting; the new process must wait for it, then go on with b and c.
    let second = Wavelet::start(&fake, &[FAST, &["--wave-size", "1"]].concat());
    eventually(&fake, &second, "b and c rolled", |f| {
        rolled(f, "b") == 1 && rolled(f, "c") == 1
    });
    eventually(&fake, &second, "FanOutComplete", |f| {
        !events(f, "shared", "FanOutComplete").is_empty()
    });
    assert_eq!(rolled(&fake, "a"), 1, "a rolled again after the restart");
    assert_eq!(events(&fake, "shared", "FanOutWave").len(), 3);
    assert!(
        !second.output().contains("deployment default/a: rolled:"),
        "{}",
        second.output()
    );
}

#[test]
fn a_workload_past_the_rollout_timeout_holds_the_rest_until_wavelet_resume() {
    let fake = shared();
    let wavelet = start(&fake, &["--rollout-timeout", "2s"]);
    // a's new Pods never get Ready within the test.
    fake.set_ready_delay(Duration::from_secs(600));
    change(&fake, "2");
    eventually(
        &fake,
        &wavelet,
        "the hold, on the ConfigMap and on a",
        |f| {
            !events(f, "shared", "FanOutHeld").is_empty()
                && !events(f, "a", "FanOutHeld").is_empty()
        },
    );
    let held = events(&fake, "shared", "FanOutHeld").remove(0);
    assert!(
        held.contains("deployment default/a")
            && held.contains("--rollout-timeout")
            && held.contains("2 workload(s) using this ConfigMap are not rolled")
            && held.contains("wavelet resume -n default configmap/shared"),
        "{held}"
    );
    assert_eq!(events(&fake, "a", "FanOutHeld").len(), 1);
    assert_eq!(
        (rolled(&fake, "a"), rolled(&fake, "b"), rolled(&fake, "c")),
        (1, 0, 0)
    );
    assert_eq!(metric(&wavelet, "wavelet_fanouts_held", ""), 1.0);
    assert_eq!(metric(&wavelet, "wavelet_fanouts_halted_total", ""), 1.0);
    wait_for_metric(
        &wavelet,
        "wavelet_rollouts_pending",
        "reason=\"held\"",
        |v| v == 2.0,
    );
    let (code, table) = one_shot(&fake, &["status", "-n", NS]);
    assert_eq!(code, Some(1), "{table}");
    assert_eq!(
        table
            .lines()
            .filter(|l| l.contains("HELD: configmap default/shared's fan-out"))
            .count(),
        2,
        "{table}"
    );

    // Resumed past a: b then c, each after the one before is Ready.
    fake.set_ready_delay(Duration::ZERO);
    let (code, out) = one_shot(&fake, &["resume", "-n", NS, "configmap/shared"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("resumed past deployment default/a"), "{out}");
    eventually(&fake, &wavelet, "b and c rolled", |f| {
        rolled(f, "b") == 1 && rolled(f, "c") == 1
    });
    assert_eq!(rolled(&fake, "a"), 1);
    let (code, out) = one_shot(&fake, &["resume", "-n", NS, "configmap/shared"]);
    assert_eq!(code, Some(1), "nothing held any more: {out}");
}

#[test]
fn a_pause_on_the_namespace_or_the_configmap_holds_changes_until_lifted_then_they_roll_once() {
    let fake = FakeApi::start();
    fake.apply(configmap(NS, "app", &[("k", "1")]));
    fake.apply(workload(
        "Deployment",
        NS,
        "web",
        opted_in(),
        mounts_configmap("app"),
    ));
    let wavelet = Wavelet::start(&fake, FAST);
    eventually(&fake, &wavelet, "adoption", |f| {
        hashes(f, "deployments", NS, "web", "wavelet.dev/config-hash")
            .1
            .is_some()
    });
    let pause = |resource: &str, ns: &str, name: &str, on: bool| {
        let value = if on { json!("true") } else { Value::Null };
        fake.merge_patch(
            resource,
            ns,
            name,
            json!({"metadata": {"annotations": {"wavelet.dev/pause": value}}}),
        );
    };
    for (resource, ns, name, says) in [
        (
            "namespaces",
            "",
            NS,
            "Namespace default has wavelet.dev/pause",
        ),
        (
            "configmaps",
            NS,
            "app",
            "configmap default/app has wavelet.dev/pause",
        ),
    ] {
        let before = rolled(&fake, "web");
        pause(resource, ns, name, true);
        let mark = wavelet.log_mark();
        fake.merge_patch(
            "configmaps",
            NS,
            "app",
            json!({"data": {"k": format!("{name}-1")}}),
        );
        fake.merge_patch(
            "configmaps",
            NS,
            "app",
            json!({"data": {"k": format!("{name}-2")}}),
        );
        eventually(&fake, &wavelet, "pending while paused", |_| {
            wavelet.output()[mark..].contains(&format!("PENDING: paused ({says})"))
        });
        wait_for_metric(
            &wavelet,
            "wavelet_rollouts_pending",
            "reason=\"pause\"",
            |v| v == 1.0,
        );
        assert_eq!(
            rolled(&fake, "web"),
            before,
            "rolled while paused by {resource}"
        );
        pause(resource, ns, name, false);
        eventually(&fake, &wavelet, "one rollout once lifted", |f| {
            rolled(f, "web") == before + 1
        });
        assert_eq!(
            hashes(&fake, "deployments", NS, "web", "wavelet.dev/config-hash").0,
            Some(expected_hash(&fake, "deployments", NS, "web")),
            "rolled with the latest change"
        );
    }
    wait_for_metric(
        &wavelet,
        "wavelet_rollouts_pending",
        "reason=\"pause\"",
        |v| v == 0.0,
    );
}

#[test]
fn outside_the_restart_window_a_change_waits_and_an_urgent_one_goes_through_once() {
    let fake = FakeApi::start();
    fake.apply(configmap(NS, "app", &[("k", "1")]));
    fake.apply(workload(
        "Deployment",
        NS,
        "web",
        opted_in(),
        mounts_configmap("app"),
    ));
    // A one-minute window twelve hours from now: closed for the whole test.
    let opens = (wavelet::time::unix_now() + 12 * 3600) % 86_400;
    let hhmm = |t: u64| format!("{:02}:{:02}", t / 3600, t / 60 % 60);
    let window = format!("{}-{} UTC", hhmm(opens), hhmm((opens + 60) % 86_400));
    let wavelet = Wavelet::start(&fake, &[FAST, &["--restart-window", &window]].concat());
    eventually(&fake, &wavelet, "adoption", |f| {
        hashes(f, "deployments", NS, "web", "wavelet.dev/config-hash")
            .1
            .is_some()
    });
    fake.merge_patch("configmaps", NS, "app", json!({"data": {"k": "2"}}));
    eventually(&fake, &wavelet, "pending outside the window", |_| {
        pending_lines(&wavelet, "web", "PENDING: outside its restart window") == 1
    });
    wait_for_metric(
        &wavelet,
        "wavelet_rollouts_pending",
        "reason=\"window\"",
        |v| v == 1.0,
    );
    assert_eq!(rolled(&fake, "web"), 0);
    let (code, table) = one_shot(&fake, &["status", "-n", NS, "--restart-window", &window]);
    assert_eq!(code, Some(1));
    assert!(
        table.contains("PENDING: outside its restart window"),
        "{table}"
    );

    let urgent = |value: &str| {
        fake.merge_patch(
            "configmaps",
            NS,
            "app",
            json!({"metadata": {"annotations": {"wavelet.dev/urgent": value}}}),
        );
    };
    urgent("INC-1");
    eventually(&fake, &wavelet, "the urgent change rolled", |f| {
        rolled(f, "web") == 1
    });
    let grant = state_entry(&fake, "urgent.configmap.default.app").expect("the grant is recorded");
    assert!(grant.ends_with(" INC-1"), "{grant}");
    // The next change waits again: the value was used.
    let mark = wavelet.log_mark();
    fake.merge_patch("configmaps", NS, "app", json!({"data": {"k": "3"}}));
    eventually(&fake, &wavelet, "pending again", |_| {
        wavelet.output()[mark..]
            .contains("deployment default/web: PENDING: outside its restart window")
    });
    assert_eq!(
        rolled(&fake, "web"),
        1,
        "the used value let a second change through"
    );
    urgent("INC-2");
    eventually(
        &fake,
        &wavelet,
        "the second urgent change rolled, with its Event",
        |f| rolled(f, "web") == 2 && events(f, "web", "ConfigChanged").len() == 2,
    );
    assert!(events(&fake, "web", "ConfigChanged")[1]
        .contains("wavelet.dev/urgent, past its restart window"));
}

/// Deployments a, b and c that mount ConfigMaps `cfg` and `cfg2`.
fn two_shared() -> FakeApi {
    let fake = FakeApi::start();
    fake.apply(configmap(NS, "cfg", &[("k", "1")]));
    fake.apply(configmap(NS, "cfg2", &[("k", "1")]));
    for name in NAMES {
        fake.apply(workload(
            "Deployment",
            NS,
            name,
            opted_in(),
            json!({
                "volumes": [{"name": "one", "configMap": {"name": "cfg"}},
                            {"name": "two", "configMap": {"name": "cfg2"}}],
                "containers": [{"name": "app", "image": "nginx", "volumeMounts": [
                    {"name": "one", "mountPath": "/one"}, {"name": "two", "mountPath": "/two"}]}]
            }),
        ));
    }
    fake
}

/// Issue 32, item 1 (phantom fan-outs): the change of `cfg` made a, b and c due, so the
/// fan-out is `cfg`'s only; `cfg2`, unchanged, gets no record, no wave and no hold.
#[test]
fn a_change_of_one_shared_configmap_is_no_fan_out_of_another_one_the_workloads_use() {
    let fake = two_shared();
    let wavelet = start(&fake, &["--rollout-timeout", "2s"]);
    fake.set_ready_delay(Duration::from_secs(600));
    fake.merge_patch("configmaps", NS, "cfg", json!({"data": {"k": "2"}}));
    eventually(&fake, &wavelet, "cfg's fan-out held", |f| {
        !events(f, "cfg", "FanOutHeld").is_empty()
    });
    wait_for_metric(
        &wavelet,
        "wavelet_rollouts_pending",
        "reason=\"held\"",
        |v| v == 2.0,
    );
    assert_eq!(metric(&wavelet, "wavelet_fanouts_held", ""), 1.0);
    assert!(
        events(&fake, "cfg2", "FanOutWave").is_empty()
            && events(&fake, "cfg2", "FanOutHeld").is_empty(),
        "{}",
        wavelet.output()
    );
    assert_eq!(state_entry(&fake, "fanout.configmap.default.cfg2"), None);
    assert!(
        !wavelet.output().contains("configmap default/cfg2: Change"),
        "{}",
        wavelet.output()
    );
}

/// Which object changed is remembered in memory only: after a restart (as after a leader
/// change) wavelet learns it again when it finds each workload up to date, so a change made
/// then is still `cfg`'s fan-out alone, and `cfg2`, unchanged, gets nothing.
#[test]
fn after_a_restart_a_change_of_one_shared_configmap_is_still_no_fan_out_of_the_other() {
    let fake = two_shared();
    let up_to_date = |wavelet: &Wavelet| {
        for name in NAMES {
            wait_until_up_to_date(wavelet, &format!("deployment {NS}/{name}"), 0);
        }
    };
    let first = start(&fake, &[]);
    up_to_date(&first);
    first.kill();
    let wavelet = start(&fake, &["--rollout-timeout", "2s"]);
    up_to_date(&wavelet);
    fake.set_ready_delay(Duration::from_secs(600));
    fake.merge_patch("configmaps", NS, "cfg", json!({"data": {"k": "2"}}));
    eventually(&fake, &wavelet, "cfg's fan-out held", |f| {
        !events(f, "cfg", "FanOutHeld").is_empty()
    });
    assert!(
        events(&fake, "cfg2", "FanOutWave").is_empty()
            && events(&fake, "cfg2", "FanOutHeld").is_empty(),
        "{}",
        wavelet.output()
    );
    assert_eq!(state_entry(&fake, "fanout.configmap.default.cfg2"), None);
}

/// Issue 32, item 3: `wavelet.dev/urgent` on `ca` let ca's change through the restart
/// window; a later change of `app-config`, which web also mounts, waits for the window.
#[test]
fn an_urgent_grant_lets_through_only_the_change_of_the_object_it_is_on() {
    let fake = FakeApi::start();
    fake.apply(configmap(NS, "ca", &[("k", "1")]));
    fake.apply(configmap(NS, "app-config", &[("k", "1")]));
    fake.apply(workload(
        "Deployment",
        NS,
        "web",
        opted_in(),
        json!({
            "volumes": [{"name": "ca", "configMap": {"name": "ca"}},
                        {"name": "app", "configMap": {"name": "app-config"}}],
            "containers": [{"name": "app", "image": "nginx", "volumeMounts": [
                {"name": "ca", "mountPath": "/ca"}, {"name": "app", "mountPath": "/app"}]}]
        }),
    ));
    let opens = (wavelet::time::unix_now() + 12 * 3600) % 86_400;
    let hhmm = |t: u64| format!("{:02}:{:02}", t / 3600, t / 60 % 60);
    let window = format!("{}-{} UTC", hhmm(opens), hhmm((opens + 60) % 86_400));
    let wavelet = Wavelet::start(&fake, &[FAST, &["--restart-window", &window]].concat());
    eventually(&fake, &wavelet, "adoption", |f| {
        hashes(f, "deployments", NS, "web", "wavelet.dev/config-hash")
            .1
            .is_some()
    });
    fake.merge_patch(
        "configmaps",
        NS,
        "ca",
        json!({"metadata": {"annotations": {"wavelet.dev/urgent": "INC-1"}}, "data": {"k": "2"}}),
    );
    eventually(&fake, &wavelet, "ca's urgent change rolled", |f| {
        rolled(f, "web") == 1
    });
    eventually(&fake, &wavelet, "web seen up to date", |f| {
        hashes(f, "deployments", NS, "web", "wavelet.dev/config-hash").0
            == Some(expected_hash(f, "deployments", NS, "web"))
    });
    let mark = wavelet.log_mark();
    fake.merge_patch("configmaps", NS, "app-config", json!({"data": {"k": "2"}}));
    eventually(
        &fake,
        &wavelet,
        "app-config's change pending or rolled",
        |f| {
            wavelet.output()[mark..]
                .contains("deployment default/web: PENDING: outside its restart window")
                || rolled(f, "web") == 2
        },
    );
    assert_eq!(
        rolled(&fake, "web"),
        1,
        "ca's grant let app-config's change through: {}",
        wavelet.output()
    );
}

/// Issue 32, item 9: `/readyz` and `/metrics` answer from memory. Here the lists of
/// ConfigMaps (wavelet-state's among them) and the next GET of a ConfigMap are 20 s slow,
/// so wavelet has no copy of its state yet; a probe that read the state would wait.
#[test]
fn probes_answer_from_memory_while_the_state_is_not_read_yet() {
    let fake = fake_with_web();
    // Paged LISTs (a server without streaming lists), so the slow GETs below hold up the
    // first lists: a streaming list is a WATCH and would not be slowed.
    fake.disable_watch_list();
    let slow = |resource: &str| crate::fake::Fault::Slow {
        method: "GET".into(),
        resource: resource.into(),
        delay: Duration::from_secs(20),
    };
    // The list of the watch of wavelet-state, the list of the users' ConfigMaps, and the
    // next GET of a ConfigMap.
    fake.inject(slow("configmaps/wavelet-state"));
    fake.inject(slow("configmaps"));
    fake.inject(slow("configmaps"));
    let wavelet = Wavelet::start_unsynced(&fake, FAST);
    for path in ["/metrics", "/readyz", "/metrics"] {
        let started = std::time::Instant::now();
        let (code, body) = wavelet.http_get(path);
        assert!(
            started.elapsed() < Duration::from_secs(2) && (code == 200 || code == 503),
            "{path}: {code} after {:?}: {body}",
            started.elapsed()
        );
    }
    assert!(!wavelet.output().contains("initial sync complete"));
}

/// Issue 32, item 8: `wavelet resume` decided from a held record; while its write is on
/// the way, the controller supersedes the fan-out with a newer change's record. The write
/// meets 409 Conflict, and the newer record must stay: nothing is resumed.
#[test]
fn a_resume_racing_a_newer_record_never_overwrites_it() {
    let fake = FakeApi::start();
    let held = "aaaa since=2026-11-22T03:14:40Z waves=deployments.apps/default/a held=deployments.apps/default/a reason=its rollout failed";
    let newer = "bbbb since=2026-11-22T03:20:00Z waves=deployments.apps/default/b";
    fake.apply(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "wavelet-state", "namespace": NS},
        "data": {"fanout.configmap.default.shared": held}}));
    fake.inject(crate::fake::Fault::Slow {
        method: "PUT".into(),
        resource: "configmaps".into(),
        delay: Duration::from_secs(2),
    });
    let url = fake.url();
    let resume = std::thread::spawn(move || {
        wavelet_command()
            .args([
                "resume",
                "-n",
                NS,
                "configmap/shared",
                "--state-namespace",
                NS,
            ])
            .args(["--server", &url])
            .env_clear()
            .output()
            .expect("running wavelet")
    });
    assert!(
        fake.wait_until(Duration::from_secs(15), |f| f
            .requests()
            .iter()
            .any(|r| r.method == "PUT" && is_wavelet_state(r))),
        "no PUT of wavelet-state"
    );
    fake.merge_patch(
        "configmaps",
        NS,
        "wavelet-state",
        json!({"data": {"fanout.configmap.default.shared": newer}}),
    );
    let out = resume.join().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        state_entry(&fake, "fanout.configmap.default.shared").as_deref(),
        Some(newer),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("no held fan-out to resume"), "{stdout}");
}

/// Issue 32, item 7: ConfigMap `shared` deleted while its fan-out is held. Its record
/// leaves wavelet-state once it has been gone for a resync period (2 s here), and
/// `wavelet_fanouts_held` returns to 0.
#[test]
fn the_held_fan_out_of_a_deleted_configmap_leaves_the_state_and_the_held_count() {
    let fake = shared();
    let wavelet = start(&fake, &["--rollout-timeout", "2s", "--resync", "2s"]);
    fake.set_ready_delay(Duration::from_secs(600));
    change(&fake, "2");
    eventually(&fake, &wavelet, "the hold", |f| {
        !events(f, "shared", "FanOutHeld").is_empty()
    });
    wait_for_metric(&wavelet, "wavelet_fanouts_held", "", |v| v == 1.0);
    fake.delete("configmaps", NS, "shared");
    eventually(&fake, &wavelet, "the record dropped", |f| {
        state_entry(f, "fanout.configmap.default.shared").is_none()
    });
    wait_for_metric(&wavelet, "wavelet_fanouts_held", "", |v| v == 0.0);
    assert!(
        wavelet
            .output()
            .contains("dropped \"fanout.configmap.default.shared\""),
        "{}",
        wavelet.output()
    );
}

/// Issue 32, item 2: the API server refuses the rollout PATCH (403 here, as RBAC or an
/// admission policy would). `--rollout-timeout` counts from the release, so wave 1's
/// refused workload holds the fan-out, with the refusal as its reason.
#[test]
fn a_released_workload_whose_rollout_is_refused_holds_the_fan_out_with_the_refusal() {
    let fake = shared();
    let wavelet = start(&fake, &["--rollout-timeout", "2s"]);
    fake.inject(crate::fake::Fault::Status {
        method: "PATCH".into(),
        resource: "deployments".into(),
        code: 403,
        retry_after_secs: None,
        times: 10_000,
        plain_text: false,
    });
    change(&fake, "2");
    eventually(&fake, &wavelet, "the hold", |f| {
        !events(f, "shared", "FanOutHeld").is_empty()
    });
    let held = events(&fake, "shared", "FanOutHeld").remove(0);
    assert!(
        held.contains("deployment default/a")
            && held.contains("refused")
            && held.contains("forbidden: injected by the fake API server"),
        "{held}"
    );
    assert_eq!(metric(&wavelet, "wavelet_fanouts_held", ""), 1.0);
    let record = state_entry(&fake, "fanout.configmap.default.shared").unwrap();
    assert!(
        record.contains("held=deployments.apps/default/a"),
        "{record}"
    );
}

/// Issue 32, item 13 (Reloader's pause_period_test): a and b use `shared`; a has a pause
/// period. a's own wait gates nobody: b rolls for the first change at once, and a rolls
/// once, when its period is over, with the latest configuration.
#[test]
fn a_workload_in_its_pause_period_holds_no_wave_and_rolls_once_with_the_latest() {
    let fake = FakeApi::start();
    fake.apply(configmap(NS, "shared", &[("k", "1")]));
    let mut paused = opted_in();
    paused["deployment.reloader.stakater.com/pause-period"] = json!("8s");
    fake.apply(workload(
        "Deployment",
        NS,
        "a",
        paused,
        mounts_configmap("shared"),
    ));
    fake.apply(workload(
        "Deployment",
        NS,
        "b",
        opted_in(),
        mounts_configmap("shared"),
    ));
    let wavelet = Wavelet::start(&fake, FAST);
    eventually(&fake, &wavelet, "a and b adopted", |f| {
        ["a", "b"].iter().all(|n| {
            hashes(f, "deployments", NS, n, "wavelet.dev/config-hash")
                .1
                .is_some()
        })
    });
    change(&fake, "2");
    eventually(&fake, &wavelet, "b rolled for the first change", |f| {
        rolled(f, "b") == 1
    });
    assert_eq!(
        rolled(&fake, "a"),
        0,
        "a rolled inside its pause period:\n{}",
        wavelet.output()
    );
    change(&fake, "3");
    eventually(&fake, &wavelet, "b rolled for the second change", |f| {
        rolled(f, "b") == 2
    });
    // Its rollout as the fake shows it (a request is recorded before it is applied).
    let latest = expected_hash(&fake, "deployments", NS, "a");
    let wait = Duration::from_secs(30);
    assert!(
        fake.wait_until(wait, |f| {
            hashes(f, "deployments", NS, "a", "wavelet.dev/config-hash").0 == Some(latest.clone())
        }),
        "a did not roll with the latest configuration after its pause period:\n{}",
        wavelet.output()
    );
    assert_eq!(rolled(&fake, "a"), 1, "a rolled more than once");
    assert!(
        events(&fake, "shared", "FanOutWave").is_empty()
            && !wavelet.output().contains("PENDING: waiting for wave"),
        "a's pause period made a wave:\n{}",
        wavelet.output()
    );
}

/// A restart window that cannot be read is told once while it stands (one log line, one
/// Warning), not at each change; fixed and then broken again, it is told again. (What is
/// told is kept by workload and dropped with it, so it does not grow with churn.)
#[test]
fn an_unreadable_restart_window_is_told_once_while_it_stands_and_again_when_it_comes_back() {
    const TOLD: &str = "wavelet.dev/restart-window on the workload cannot be read";
    let fake = FakeApi::start();
    fake.apply(configmap(NS, "app-config", &[("k", "0")]));
    let mut annotations = opted_in();
    annotations["wavelet.dev/restart-window"] = json!("every full moon");
    fake.apply(workload(
        "Deployment",
        NS,
        "web",
        annotations,
        mounts_configmap("app-config"),
    ));
    let wavelet = Wavelet::start(&fake, FAST);
    eventually(&fake, &wavelet, "web adopted", |f| {
        hashes(f, "deployments", NS, "web", "wavelet.dev/config-hash")
            .1
            .is_some()
    });
    let mut n = 0;
    let mut change_and_roll = |fake: &FakeApi| {
        n += 1;
        let before = rolled(fake, "web");
        fake.merge_patch(
            "configmaps",
            NS,
            "app-config",
            json!({"data": {"k": n.to_string()}}),
        );
        // The window out applies (none): it rolls.
        eventually(fake, &wavelet, "web rolled", |f| rolled(f, "web") > before);
        wavelet.output().matches(TOLD).count()
    };
    assert_eq!(change_and_roll(&fake), 1, "{}", wavelet.output());
    assert_eq!(change_and_roll(&fake), 1, "still standing: not told again");
    let set_window = |window: Value| {
        fake.merge_patch(
            "deployments",
            NS,
            "web",
            json!({"metadata": {"annotations": {"wavelet.dev/restart-window": window}}}),
        );
    };
    set_window(Value::Null);
    assert_eq!(change_and_roll(&fake), 1, "fixed");
    set_window(json!("every full moon"));
    assert_eq!(change_and_roll(&fake), 2, "back: told again");
    // Each telling is a Warning (written by the Events thread, a moment later): one
    // Event whose series counts 2, or two Events.
    let told = |f: &FakeApi| -> u64 {
        f.events_for(NS, "web")
            .iter()
            .filter(|e| e["reason"] == "InvalidAnnotation")
            .map(|e| {
                e["series"]["count"]
                    .as_u64()
                    .or(e["count"].as_u64())
                    .unwrap_or(1)
            })
            .sum()
    };
    eventually(&fake, &wavelet, "the second Warning", |f| told(f) >= 2);
    assert_eq!(told(&fake), 2);
}

#[test]
fn a_released_wave_rolls_before_the_workloads_in_line_ahead_of_it_are_told_to_wait() {
    // e, the canary, is the whole first wave and the last of a..e in line. One worker:
    // the first in line decides the wave; e is woken ahead of the others, which only
    // learn that they wait for it (issue 34: the first rollout of a fan-out).
    let fake = FakeApi::start();
    fake.apply(configmap(NS, "shared", &[("k", "1")]));
    let names = ["a", "b", "c", "d", "e"];
    for name in names {
        let mut annotations = opted_in();
        if name == "e" {
            annotations["wavelet.dev/canary"] = json!("true");
        }
        fake.apply(workload(
            "Deployment",
            NS,
            name,
            annotations,
            mounts_configmap("shared"),
        ));
    }
    let wavelet = Wavelet::start(&fake, &fast_one_worker());
    eventually(&fake, &wavelet, "a..e adopted", |f| {
        names.iter().all(|n| {
            hashes(f, "deployments", NS, n, "wavelet.dev/config-hash")
                .1
                .is_some()
        })
    });
    fake.set_ready_delay(Duration::from_secs(30));
    change(&fake, "2");
    eventually(&fake, &wavelet, "e rolled, a..d waiting for wave 2", |f| {
        rolled(f, "e") == 1
            && names[..4]
                .iter()
                .all(|n| pending_lines(&wavelet, n, "PENDING: waiting for wave 2") == 1)
    });
    let output = wavelet.output();
    let before = &output[..output
        .find(&format!("deployment {NS}/e: rolled:"))
        .expect("e's rollout logged")];
    let told_first: Vec<&str> = names[..4]
        .iter()
        .copied()
        .filter(|n| before.contains(&format!("deployment {NS}/{n}: PENDING")))
        .collect();
    assert!(
        told_first.len() <= 1,
        "{told_first:?} were told to wait before the wave they wait for rolled"
    );
    assert_eq!(
        names[..4].iter().map(|n| rolled(&fake, n)).sum::<usize>(),
        0
    );
}

/// The record of the fan-out of `shared`.
const RECORD: &str = "fanout.configmap.default.shared";

/// The first wave's mark on a workload's metadata, if it carries one.
fn first_wave_mark(fake: &FakeApi, name: &str) -> Option<String> {
    fake.get("deployments", NS, name)?["metadata"]["annotations"]["wavelet.dev/first-wave-of"]
        .as_str()
        .map(String::from)
}

/// The PUTs of `wavelet-state` received so far (the only ConfigMap wavelet writes here).
fn state_writes(fake: &FakeApi) -> usize {
    fake.requests()
        .iter()
        .filter(|r| r.method == "PUT" && r.path.ends_with("/configmaps/wavelet-state"))
        .count()
}

/// Issue 34, first rollout: wave 1's PATCH does not wait for the fan-out's record. The API
/// server holds the write of `wavelet-state` (unapplied, unanswered) until the test lets it
/// go: a rolls all the same, marked with the change on its metadata (never its template);
/// the record follows; b and c roll once a is Ready. With the record written before the
/// PATCH, a never rolls while the write is held.
#[test]
fn the_first_wave_rolls_while_the_record_of_its_release_is_still_being_written() {
    let fake = shared();
    let wavelet = start(&fake, &["--wave-size", "2"]);
    fake.set_ready_delay(Duration::from_secs(600));
    fake.inject(Fault::Held {
        method: "PUT".into(),
        resource: "configmaps".into(),
    });
    change(&fake, "2");
    eventually(
        &fake,
        &wavelet,
        "a rolled while the write of its record is held",
        |f| rolled(f, "a") == 1,
    );
    assert_eq!(
        state_entry(&fake, RECORD),
        None,
        "the record went before the PATCH"
    );
    let mark = first_wave_mark(&fake, "a").expect("a carries the first wave's mark");
    assert!(mark.starts_with("configmap/default/shared "), "{mark}");
    let a = fake.get("deployments", NS, "a").unwrap();
    assert!(
        a["spec"]["template"]["metadata"]["annotations"]["wavelet.dev/first-wave-of"].is_null(),
        "the mark is on the template: {a}"
    );
    fake.heal();
    eventually(&fake, &wavelet, "the record written after the PATCH", |f| {
        state_entry(f, RECORD).is_some_and(|r| r.contains("waves=deployments.apps/default/a"))
    });
    eventually(&fake, &wavelet, "b and c waiting for wave 2", |_| {
        ["b", "c"]
            .iter()
            .all(|n| pending_lines(&wavelet, n, "PENDING: waiting for wave 2") == 1)
    });
    assert_eq!((rolled(&fake, "b"), rolled(&fake, "c")), (0, 0));
    fake.set_ready_delay(Duration::ZERO);
    fake.make_pending_pods_ready();
    eventually(&fake, &wavelet, "FanOutComplete", |f| {
        !events(f, "shared", "FanOutComplete").is_empty()
    });
    assert_eq!(
        NAMES.map(|n| rolled(&fake, n)),
        [1, 1, 1],
        "{}",
        wavelet.output()
    );
    // Only the first wave is marked; the records of waves [a] and [b, c] are written once
    // each, and the completed fan-out's is removed: one write per wave, and one at the end.
    assert_eq!(
        (first_wave_mark(&fake, "b"), first_wave_mark(&fake, "c")),
        (None, None)
    );
    let puts: Vec<String> = fake
        .requests()
        .iter()
        .filter(|r| r.method == "PUT")
        .map(|r| r.body.clone())
        .collect();
    assert_eq!(state_writes(&fake), 3, "{puts:#?}");
}

/// wavelet killed between wave 1's PATCH and its record (every write of `wavelet-state`
/// refused meanwhile): the new wavelet finds no record, rebuilds it from a's mark and waits
/// for a's health before wave 2; nothing rolls twice and nothing is lost. Without the
/// marks, the new wavelet released b as a "first" wave while a was still starting.
#[test]
fn wavelet_killed_between_wave_1s_patch_and_its_record_still_waits_for_wave_1_after_a_restart() {
    let fake = shared();
    let mut first = start(&fake, &["--wave-size", "1"]);
    fake.set_ready_delay(Duration::from_secs(600));
    fake.inject(Fault::Status {
        method: "PUT".into(),
        resource: "configmaps".into(),
        code: 500,
        retry_after_secs: None,
        times: 1_000_000,
        plain_text: false,
    });
    change(&fake, "2");
    eventually(
        &fake,
        &first,
        "a rolled, the write of its record refused",
        |f| rolled(f, "a") == 1 && state_writes(f) >= 1,
    );
    first.signal("KILL");
    first.wait_exit(Duration::from_secs(10));
    assert_eq!(state_entry(&fake, RECORD), None, "the record was written");
    assert_eq!((rolled(&fake, "b"), rolled(&fake, "c")), (0, 0));
    fake.heal();
    // a is still starting: the new wavelet must wait for it, then go on with b and c.
    let second = Wavelet::start(&fake, &[FAST, &["--wave-size", "1"]].concat());
    eventually(
        &fake,
        &second,
        "wave 1's record rebuilt from a's mark, b and c waiting for wave 2",
        |f| {
            state_entry(f, RECORD).is_some_and(|r| r.ends_with("waves=deployments.apps/default/a"))
                && ["b", "c"]
                    .iter()
                    .all(|n| pending_lines(&second, n, "PENDING: waiting for wave 2") == 1)
        },
    );
    assert_eq!(
        (rolled(&fake, "b"), rolled(&fake, "c")),
        (0, 0),
        "wave 2 went before a was Ready: {}",
        second.output()
    );
    assert!(second
        .output()
        .contains("its first wave (deployment default/a) rolled, but its record was not written"));
    fake.set_ready_delay(Duration::ZERO);
    fake.make_pending_pods_ready();
    eventually(&fake, &second, "b and c rolled", |f| {
        rolled(f, "b") == 1 && rolled(f, "c") == 1
    });
    eventually(&fake, &second, "FanOutComplete", |f| {
        !events(f, "shared", "FanOutComplete").is_empty()
    });
    assert_eq!(rolled(&fake, "a"), 1, "a rolled again after the restart");
    assert!(
        !second.output().contains("deployment default/a: rolled:"),
        "{}",
        second.output()
    );
}
