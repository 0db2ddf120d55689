//! Safe fan-out against the real Deployment controller (README: Rolling a shared change
//! safely): a shared ConfigMap's good change rolls ten Deployments in waves, each after
//! the one before finished its rollout; a bad one (the kubelet stand-in keeps its Pods
//! unready, so the Deployment controller reports `ProgressDeadlineExceeded`) rolls the
//! first wave only and holds the rest, across a restart of wavelet; the fix rolls all ten.
//! wavelet killed in the middle of a fan-out goes on without rolling anything twice. A
//! restart window and the global pause hold changes and release them as one rollout.
//! Issue 32: a change of one of two shared ConfigMaps is no fan-out of the other; a
//! rollout refused by a ValidatingAdmissionPolicy holds its fan-out at `--rollout-timeout`;
//! Reloader's pause-period scenario rolls the other Deployment at once and the paused one
//! once, with the latest configuration.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::kube::{configmap, hashes, mounts_configmap, opted_in, workload, Kube};
use crate::kubelet::BAD_VALUE;
use crate::process::{one_shot, Wavelet};
use crate::{Ctx, Scenario};

pub const ALL: &[Scenario] = &[
    Scenario {
        name: "fanout_waves_then_hold_then_fix",
        run: waves_hold_fix,
        serial: false,
    },
    Scenario {
        name: "fanout_wavelet_killed_mid_fan_out",
        run: killed_mid_fan_out,
        serial: false,
    },
    Scenario {
        name: "fanout_restart_window_and_pause",
        run: window_and_pause,
        serial: false,
    },
    Scenario {
        name: "fanout_only_of_the_object_that_changed",
        run: only_of_the_object_that_changed,
        serial: false,
    },
    Scenario {
        name: "fanout_refused_rollout_holds",
        run: refused_rollout_holds,
        serial: false,
    },
    Scenario {
        name: "fanout_pause_period_gates_no_one",
        run: pause_period_gates_no_one,
        serial: false,
    },
];

const LONG: Duration = Duration::from_secs(90);

/// `wavelet run` flags: this namespace, its own `wavelet-state`, fast storm rules.
fn args<'a>(ns: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut all = vec![
        "--namespaces",
        ns,
        "--state-namespace",
        ns,
        "--debounce",
        "300ms",
        "--min-rollout-interval",
        "0s",
        "--max-rollouts-per-second",
        "50",
    ];
    all.extend_from_slice(extra);
    all
}

/// `n` Deployments `fan-0`.. of one replica, each mounting ConfigMap `shared`, with a
/// progress deadline of 4 s; returns once all are available.
fn deployments(kube: &Kube, ns: &str, n: usize) -> Vec<String> {
    kube.create_namespace(ns);
    kube.create(configmap(ns, "shared", json!({"k": "1"})));
    let names: Vec<String> = (0..n).map(|i| format!("fan-{i}")).collect();
    for name in &names {
        let mut d = workload(
            "Deployment",
            ns,
            name,
            opted_in(),
            mounts_configmap("shared"),
        );
        d["spec"]["replicas"] = json!(1);
        d["spec"]["progressDeadlineSeconds"] = json!(4);
        kube.create(d);
    }
    kube.until(LONG, "every Deployment available", || {
        let all = by_name(kube, ns);
        names.iter().all(|n| all.get(n).is_some_and(rolled_out))
    });
    names
}

/// The Deployments of `ns` by name, from one LIST (one consistent snapshot).
fn by_name(kube: &Kube, ns: &str) -> BTreeMap<String, Value> {
    kube.list("Deployment", ns)
        .into_iter()
        .map(|d| (d["metadata"]["name"].as_str().unwrap().to_string(), d))
        .collect()
}

/// `kubectl rollout status` would say "successfully rolled out".
fn rolled_out(d: &Value) -> bool {
    let status = &d["status"];
    let n = |v: &Value| v.as_i64().unwrap_or(0);
    n(&d["metadata"]["generation"]) <= n(&status["observedGeneration"])
        && n(&status["updatedReplicas"]) == n(&d["spec"]["replicas"])
        && n(&status["replicas"]) == n(&status["updatedReplicas"])
        && n(&status["availableReplicas"]) == n(&status["updatedReplicas"])
}

fn template_hash(d: &Value) -> Option<String> {
    hashes(d).0
}

fn set_shared(kube: &Kube, ns: &str, value: &str) {
    kube.merge_patch("ConfigMap", ns, "shared", json!({"data": {"k": value}}));
}

fn events(kube: &Kube, ns: &str, about: &str, reason: &str) -> Vec<String> {
    let list: Value = kube
        .client
        .get(&format!("/api/v1/namespaces/{ns}/events"))
        .expect("listing events");
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["involvedObject"]["name"] == about && e["reason"] == reason)
        .map(|e| e["message"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn replica_sets(kube: &Kube, ns: &str, owner: &str) -> usize {
    kube.list("ReplicaSet", ns)
        .iter()
        .filter(|rs| {
            rs["metadata"]["ownerReferences"]
                .as_array()
                .is_some_and(|refs| refs.iter().any(|r| r["name"] == owner))
        })
        .count()
}

/// Watches a fan-out until every Deployment carries a new template hash (one that none
/// had before) and rolled out, checking at every look that no wave started before the
/// waves ahead of it had rolled out: `waves` lists the names of each wave in order.
fn watch_waves(
    kube: &Kube,
    ns: &str,
    before: &BTreeMap<String, Option<String>>,
    waves: &[&[String]],
) {
    let deadline = Instant::now() + LONG;
    loop {
        let all = by_name(kube, ns);
        let moved = |name: &String| template_hash(&all[name]) != before[name];
        for (i, wave) in waves.iter().enumerate().skip(1) {
            if wave.iter().any(moved) {
                for earlier in &waves[..i] {
                    for name in earlier.iter() {
                        assert!(
                            moved(name) && rolled_out(&all[name]),
                            "wave {} started before {name} of wave {} rolled out: {:#}",
                            i + 1,
                            i,
                            all[name]["status"]
                        );
                    }
                }
            }
        }
        if waves
            .iter()
            .flat_map(|w| w.iter())
            .all(|n| moved(n) && rolled_out(&all[n]))
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the fan-out did not finish: {all:#?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn template_hashes(kube: &Kube, ns: &str) -> BTreeMap<String, Option<String>> {
    by_name(kube, ns)
        .into_iter()
        .map(|(n, d)| (n, template_hash(&d)))
        .collect()
}

/// A good change rolls in waves 1, 5, 4 (`--wave-size 50%`); a bad one rolls `fan-0` only
/// and holds the nine others (Events, `status` HELD, still held after a restart); the fix
/// rolls all ten, each Deployment once per change.
fn waves_hold_fix(ctx: &Ctx) {
    let kube = &ctx.kube;
    let ns = "e2e-fanout";
    let names = deployments(kube, ns, 10);
    let flags = args(ns, &["--wave-size", "50%", "--rollout-timeout", "60s"]);
    let mut wavelet = Wavelet::run(&ctx.cluster, &flags);
    kube.until(LONG, "all ten adopted", || {
        by_name(kube, ns).values().all(|d| hashes(d).1.is_some())
    });

    // A good change: waves of 1, 5 and 4, each after the one before rolled out.
    let before = template_hashes(kube, ns);
    set_shared(kube, ns, "2");
    let waves: [&[String]; 3] = [&names[..1], &names[1..6], &names[6..]];
    watch_waves(kube, ns, &before, &waves);
    kube.until(LONG, "FanOutComplete", || {
        !events(kube, ns, "shared", "FanOutComplete").is_empty()
    });
    assert_eq!(events(kube, ns, "shared", "FanOutWave").len(), 3);

    // A bad change: fan-0 rolls, its Pod never gets Ready, the Deployment controller
    // reports ProgressDeadlineExceeded, and the nine others are held.
    let good = template_hashes(kube, ns);
    set_shared(
        kube,
        ns,
        &format!("{BAD_VALUE}: the application cannot start"),
    );
    kube.until(LONG, "FanOutHeld on the ConfigMap", || {
        !events(kube, ns, "shared", "FanOutHeld").is_empty()
    });
    let held = events(kube, ns, "shared", "FanOutHeld").remove(0);
    assert!(
        held.contains("fan-0")
            && held.contains("progress deadline")
            && held.contains("9 workload(s)")
            && held.contains("wavelet resume -n e2e-fanout configmap/shared"),
        "{held}"
    );
    assert_eq!(events(kube, ns, "fan-0", "FanOutHeld").len(), 1);
    let now = template_hashes(kube, ns);
    assert_ne!(now["fan-0"], good["fan-0"], "the first wave rolled");
    for name in &names[1..] {
        assert_eq!(
            now[name], good[name],
            "{name} was rolled onto the bad change"
        );
    }
    let (code, table) = one_shot(&ctx.cluster, &["status", "-n", ns, "--state-namespace", ns]);
    assert_eq!(code, 1, "{table}");
    assert_eq!(
        table
            .lines()
            .filter(|l| l.contains("HELD: configmap e2e-fanout/shared"))
            .count(),
        9,
        "{table}"
    );
    assert!(
        table.contains("FAN-OUT")
            && table.contains("HELD: deployment e2e-fanout/fan-0: its rollout failed")
            && table
                .contains("FAILED its rollout (wave 1 of configmap e2e-fanout/shared's fan-out)"),
        "{table}"
    );

    // Still held after a restart: the new process reads the hold and rolls nothing.
    wavelet.kill();
    let wavelet = Wavelet::run(&ctx.cluster, &flags);
    let mark = |w: &Wavelet| {
        w.output()
            .lines()
            .filter(|l| l.contains("HELD: configmap e2e-fanout/shared"))
            .count()
    };
    kube.until(LONG, "the restarted wavelet reports the nine held", || {
        mark(&wavelet) >= 9
    });
    let now = template_hashes(kube, ns);
    for name in &names[1..] {
        assert_eq!(now[name], good[name], "{name} rolled after the restart");
    }

    // The fix: a new change, a new fan-out, all ten roll (fan-0 first).
    let before = template_hashes(kube, ns);
    set_shared(kube, ns, "3");
    watch_waves(kube, ns, &before, &waves);
    for name in &names {
        let expected = if name == "fan-0" { 4 } else { 3 };
        assert_eq!(
            replica_sets(kube, ns, name),
            expected,
            "{name}: one rollout per change"
        );
    }
    let (code, table) = one_shot(&ctx.cluster, &["status", "-n", ns, "--state-namespace", ns]);
    assert_eq!(code, 0, "{table}");
    assert!(!wavelet.output().contains(" 403 "), "{}", wavelet.output());
}

/// wavelet is killed once the second wave is released; the one started after it goes on
/// from the record and the Deployments, and no Deployment rolls twice.
fn killed_mid_fan_out(ctx: &Ctx) {
    let kube = &ctx.kube;
    let ns = "e2e-fanout-restart";
    let names = deployments(kube, ns, 6);
    let flags = args(ns, &["--wave-size", "1"]);
    let mut first = Wavelet::run(&ctx.cluster, &flags);
    kube.until(LONG, "all six adopted", || {
        by_name(kube, ns).values().all(|d| hashes(d).1.is_some())
    });
    let before = template_hashes(kube, ns);
    set_shared(kube, ns, "2");
    kube.until(LONG, "the second wave released", || {
        events(kube, ns, "shared", "FanOutWave").len() >= 2
    });
    let first_output = first.kill();
    let second = Wavelet::run(&ctx.cluster, &flags);
    let waves: Vec<&[String]> = names.iter().map(std::slice::from_ref).collect();
    watch_waves(kube, ns, &before, &waves);
    kube.until(LONG, "FanOutComplete", || {
        !events(kube, ns, "shared", "FanOutComplete").is_empty()
    });
    let both = format!("{first_output}{}", second.output());
    for name in &names {
        // Rolled once: one new ReplicaSet. The log says so at most once: the kill can
        // land between a wave's PATCH and its log line.
        let logged = both
            .lines()
            .filter(|l| l.contains(&format!("deployment {ns}/{name}: rolled:")))
            .count();
        assert!(logged <= 1, "{name} rolled {logged} times:\n{both}");
        assert_eq!(
            replica_sets(kube, ns, name),
            2,
            "{name} rolled once:\n{both}"
        );
    }
    assert!(
        first_output.contains("wave 1")
            && !second
                .output()
                .contains(&format!("deployment {ns}/fan-0: rolled:")),
        "the first wavelet rolled wave 1, the second did not roll it again"
    );
}

/// A restart window opening a few seconds into the test holds two changes and releases
/// them as one rollout; `wavelet pause` holds two more until `wavelet resume`, then one
/// rollout.
fn window_and_pause(ctx: &Ctx) {
    let kube = &ctx.kube;
    let ns = "e2e-window";
    kube.create_namespace(ns);
    kube.create(configmap(ns, "cfg", json!({"k": "1"})));
    kube.create(workload(
        "Deployment",
        ns,
        "web",
        opted_in(),
        mounts_configmap("cfg"),
    ));
    kube.until(LONG, "the first revision", || {
        replica_sets(kube, ns, "web") == 1
    });
    let secs = |t: u64| t % 86_400;
    let clock = |t: u64| format!("{:02}:{:02}:{:02}", t / 3600, t / 60 % 60, t % 60);
    let opens = wavelet::time::unix_now() + 12;
    let window = format!("{}-{} UTC", clock(secs(opens)), clock(secs(opens + 3600)));
    let mut flags = args(ns, &["--restart-window"]);
    flags.push(&window);
    let wavelet = Wavelet::run(&ctx.cluster, &flags);
    kube.until(LONG, "adoption", || {
        kube.get("Deployment", ns, "web")
            .is_some_and(|d| hashes(&d).1.is_some())
    });
    kube.merge_patch("ConfigMap", ns, "cfg", json!({"data": {"k": "2"}}));
    wavelet.wait_output("PENDING: outside its restart window", LONG);
    kube.merge_patch("ConfigMap", ns, "cfg", json!({"data": {"k": "3"}}));
    assert!(
        wavelet::time::unix_now() < opens,
        "the window opened before both changes were made: the machine is too slow for this test"
    );
    assert_eq!(
        replica_sets(kube, ns, "web"),
        1,
        "rolled outside the window"
    );
    kube.until(LONG, "one rollout at the opening", || {
        replica_sets(kube, ns, "web") == 2
    });
    assert!(
        wavelet::time::unix_now() >= opens,
        "rolled before the window opened"
    );
    let up_to_date = || {
        let (code, table) = one_shot(
            &ctx.cluster,
            &[
                "status",
                "-n",
                ns,
                "--state-namespace",
                ns,
                "--restart-window",
                &window,
            ],
        );
        code == 0 && table.contains("up to date")
    };
    kube.until(LONG, "up to date with the latest change", up_to_date);
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(
        replica_sets(kube, ns, "web"),
        2,
        "one rollout for two changes"
    );

    // The global pause: two changes wait; `wavelet resume` rolls them once.
    let (code, out) = one_shot(&ctx.cluster, &["pause", "--state-namespace", ns]);
    assert_eq!(code, 0, "{out}");
    wavelet.wait_output("the global pause changed", LONG);
    kube.merge_patch("ConfigMap", ns, "cfg", json!({"data": {"k": "4"}}));
    wavelet.wait_output("PENDING: paused (wavelet pause since", LONG);
    kube.merge_patch("ConfigMap", ns, "cfg", json!({"data": {"k": "5"}}));
    let (code, table) = one_shot(&ctx.cluster, &["status", "-n", ns, "--state-namespace", ns]);
    assert_eq!(code, 1, "{table}");
    assert!(
        table.contains("PAUSED") && table.contains("PENDING: paused"),
        "{table}"
    );
    assert_eq!(replica_sets(kube, ns, "web"), 2, "rolled while paused");
    let (code, out) = one_shot(&ctx.cluster, &["resume", "--state-namespace", ns]);
    assert_eq!(code, 0, "{out}");
    kube.until(LONG, "one rollout after resume", || {
        replica_sets(kube, ns, "web") == 3
    });
    kube.until(LONG, "up to date after resume", up_to_date);
    assert_eq!(
        replica_sets(kube, ns, "web"),
        3,
        "one rollout for two changes"
    );
}

/// Deployments `names` of one replica in `ns`, each mounting every ConfigMap of `configs`,
/// labelled `e2e-name: <name>`, with the annotations `extra` gives for its name added;
/// returns once all are available.
fn mounting(kube: &Kube, ns: &str, names: &[&str], configs: &[&str], extra: &[(&str, Value)]) {
    for name in names {
        let volumes: Vec<Value> = configs
            .iter()
            .map(|c| json!({"name": c, "configMap": {"name": c}}))
            .collect();
        let mounts: Vec<Value> = configs
            .iter()
            .map(|c| json!({"name": c, "mountPath": format!("/etc/{c}")}))
            .collect();
        let mut annotations = opted_in();
        for (_, value) in extra.iter().filter(|(n, _)| n == name) {
            for (k, v) in value.as_object().unwrap() {
                annotations[k] = v.clone();
            }
        }
        let mut d = workload(
            "Deployment",
            ns,
            name,
            annotations,
            json!({"volumes": volumes,
                   "containers": [{"name": "app", "image": "nginx", "volumeMounts": mounts}]}),
        );
        d["spec"]["replicas"] = json!(1);
        d["spec"]["progressDeadlineSeconds"] = json!(4);
        d["metadata"]["labels"] = json!({"e2e-name": name});
        kube.create(d);
    }
    kube.until(LONG, "every Deployment available", || {
        let all = by_name(kube, ns);
        names.iter().all(|n| all.get(*n).is_some_and(rolled_out))
    });
}

/// Issue 32, item 1: d1 and d2 use `cfg` and `cfg2`; a change of `cfg` is `cfg`'s fan-out
/// only: `cfg2` gets no record, no wave and no Event.
fn only_of_the_object_that_changed(ctx: &Ctx) {
    let kube = &ctx.kube;
    let ns = "e2e-fanout-phantom";
    kube.create_namespace(ns);
    kube.create(configmap(ns, "cfg", json!({"k": "1"})));
    kube.create(configmap(ns, "cfg2", json!({"k": "1"})));
    mounting(kube, ns, &["d1", "d2"], &["cfg", "cfg2"], &[]);
    let wavelet = Wavelet::run(&ctx.cluster, &args(ns, &[]));
    kube.until(LONG, "both adopted", || {
        by_name(kube, ns).values().all(|d| hashes(d).1.is_some())
    });
    kube.merge_patch("ConfigMap", ns, "cfg", json!({"data": {"k": "2"}}));
    kube.until(LONG, "cfg's FanOutComplete", || {
        !events(kube, ns, "cfg", "FanOutComplete").is_empty()
    });
    assert_eq!(events(kube, ns, "cfg", "FanOutWave").len(), 2);
    assert!(
        events(kube, ns, "cfg2", "FanOutWave").is_empty(),
        "{}",
        wavelet.output()
    );
    assert!(
        !wavelet
            .output()
            .contains(&format!("configmap {ns}/cfg2: Change")),
        "{}",
        wavelet.output()
    );
    let state = kube.get("ConfigMap", ns, "wavelet-state");
    assert!(
        state.as_ref().is_none_or(|s| s["data"]
            .get(format!("fanout.configmap.{ns}.cfg2"))
            .is_none()),
        "{state:?}"
    );
    for name in ["d1", "d2"] {
        assert_eq!(replica_sets(kube, ns, name), 2, "{name}: one rollout");
    }
}

/// Issue 32, item 2: a ValidatingAdmissionPolicy refuses any change of the pod template
/// of `fan-0` (labelled for it). Wave 1 (fan-0) never rolls; `--rollout-timeout` counts
/// from its release, so the fan-out holds with the policy's refusal as its reason, and
/// fan-1 and fan-2 are not rolled.
fn refused_rollout_holds(ctx: &Ctx) {
    let kube = &ctx.kube;
    let ns = "e2e-fanout-refused";
    let policy = "e2e-fanout-refused";
    kube.create_namespace(ns);
    let vap = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies";
    let binding = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings";
    kube.client
        .post::<Value>(
            vap,
            &json!({"apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingAdmissionPolicy", "metadata": {"name": policy},
                "spec": {"failurePolicy": "Fail",
                    "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"],
                        "apiVersions": ["v1"], "operations": ["UPDATE"],
                        "resources": ["deployments"]}]},
                    "validations": [{"expression": "object.spec.template == oldObject.spec.template",
                        "message": "the pod template of this Deployment is frozen"}]}}),
        )
        .expect("creating the policy");
    kube.client
        .post::<Value>(
            binding,
            &json!({"apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": policy},
                "spec": {"policyName": policy, "validationActions": ["Deny"],
                    "matchResources": {
                        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
                        "objectSelector": {"matchLabels": {"e2e-name": "fan-0"}}}}}),
        )
        .expect("creating the binding");
    kube.create(configmap(ns, "shared", json!({"k": "1"})));
    mounting(kube, ns, &["fan-0", "fan-1", "fan-2"], &["shared"], &[]);
    // The policy in force: a template change of fan-0 is refused.
    kube.until(LONG, "the policy refuses a template change", || {
        kube.client
            .patch::<Value>(
                &format!("/apis/apps/v1/namespaces/{ns}/deployments/fan-0"),
                wavelet::client::PatchType::Merge,
                &json!({"spec": {"template": {"metadata": {"labels": {"probe": "x"}}}}}),
            )
            .is_err()
    });
    kube.until(LONG, "fan-0 available", || {
        kube.get("Deployment", ns, "fan-0")
            .is_some_and(|d| rolled_out(&d))
    });
    let wavelet = Wavelet::run(&ctx.cluster, &args(ns, &["--rollout-timeout", "5s"]));
    kube.until(LONG, "all three adopted", || {
        by_name(kube, ns).values().all(|d| hashes(d).1.is_some())
    });
    let before = template_hashes(kube, ns);
    set_shared(kube, ns, "2");
    kube.until(LONG, "FanOutHeld on the ConfigMap", || {
        !events(kube, ns, "shared", "FanOutHeld").is_empty()
    });
    let held = events(kube, ns, "shared", "FanOutHeld").remove(0);
    assert!(
        held.contains("fan-0")
            && held.contains("refused")
            && held.contains("the pod template of this Deployment is frozen")
            && held.contains("2 workload(s)"),
        "{held}\n{}",
        wavelet.output()
    );
    assert_eq!(template_hashes(kube, ns), before, "something rolled");
    assert_eq!(wavelet.metric("wavelet_fanouts_held"), 1.0);
    let _ = kube
        .client
        .delete::<Value>(&format!("{binding}/{policy}"), None);
    let _ = kube
        .client
        .delete::<Value>(&format!("{vap}/{policy}"), None);
}

/// Issue 32, item 13, Reloader's `pause_period_test`: `paused` (pause period 5 s) and
/// `quick` use `shared`; two changes 2.5 s apart. `quick` rolls for the first change at
/// once (no wave waits for `paused`), and again for the second; `paused` rolls once, when
/// its period is over, onto the latest configuration.
fn pause_period_gates_no_one(ctx: &Ctx) {
    let kube = &ctx.kube;
    let ns = "e2e-fanout-pause-period";
    kube.create_namespace(ns);
    kube.create(configmap(ns, "shared", json!({"k": "1"})));
    let period = json!({"deployment.reloader.stakater.com/pause-period": "5s"});
    mounting(
        kube,
        ns,
        &["paused", "quick"],
        &["shared"],
        &[("paused", period)],
    );
    let wavelet = Wavelet::run(&ctx.cluster, &args(ns, &[]));
    kube.until(LONG, "both adopted", || {
        by_name(kube, ns).values().all(|d| hashes(d).1.is_some())
    });
    let before = template_hashes(kube, ns);
    let first = Instant::now();
    set_shared(kube, ns, "2");
    kube.until(LONG, "quick rolled for the first change", || {
        template_hashes(kube, ns)["quick"] != before["quick"]
    });
    let quick_first = template_hashes(kube, ns)["quick"].clone();
    std::thread::sleep(Duration::from_millis(2500).saturating_sub(first.elapsed()));
    set_shared(kube, ns, "3");
    kube.until(LONG, "both on the second change, rolled out", || {
        let all = by_name(kube, ns);
        let now = |n: &str| template_hash(&all[n]);
        now("quick") != quick_first
            && now("paused") == now("quick")
            && rolled_out(&all["quick"])
            && rolled_out(&all["paused"])
    });
    assert_eq!(replica_sets(kube, ns, "quick"), 3, "quick: once per change");
    assert_eq!(
        replica_sets(kube, ns, "paused"),
        2,
        "paused rolled more than once:\n{}",
        wavelet.output()
    );
    assert!(
        events(kube, ns, "shared", "FanOutWave").is_empty()
            && !wavelet.output().contains("PENDING: waiting for wave"),
        "a wave waited for the paused one:\n{}",
        wavelet.output()
    );
}
