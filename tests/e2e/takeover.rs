//! Baselines on a real API server: a change made while wavelet adopts under a low
//! `--api-qps` rolls every workload once; taking over from what the real Wave v0.11 and
//! the real Reloader v1.4 (env-vars strategy) wrote rolls nothing, and a change made
//! while neither ran rolls that workload once; turning `--resource-label-selector` and
//! `--ignore-secrets` on and off and rotating `--hash-key-file` roll nothing, while a
//! change made while wavelet was stopped still rolls once (across a key rotation: with
//! the old key kept on the file's second line).
//!
//! The peers run from `WAVELET_E2E_PEERS` (a directory with `wave` and `reloader`, see
//! ../shared/peers-bin); without it their scenarios say so and pass. Their metrics ports
//! are fixed (:8080, :9090), so each holds `/tmp/peers.lock` (flock) while one runs.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use crate::kube::{configmap, mounts_configmap, opted_in, workload, Kube};
use crate::process::Wavelet;
use crate::{Ctx, Scenario};

pub const ALL: &[Scenario] = &[
    Scenario {
        name: "takeover_change_during_adoption_at_low_qps",
        run: change_during_adoption,
        serial: false,
    },
    Scenario {
        name: "takeover_flag_changes_roll_nothing",
        run: flag_changes,
        serial: false,
    },
    Scenario {
        name: "takeover_from_real_wave",
        run: from_wave,
        serial: true,
    },
    Scenario {
        name: "takeover_from_real_reloader",
        run: from_reloader,
        serial: true,
    },
];

const LONG: Duration = Duration::from_secs(90);
const FAST: &[&str] = &[
    "--debounce",
    "300ms",
    "--min-rollout-interval",
    "0s",
    "--max-rollouts-per-second",
    "50",
];

fn run(ctx: &Ctx, ns: &str, extra: &[&str]) -> Wavelet {
    let mut args = vec!["--namespaces", ns];
    args.extend_from_slice(FAST);
    args.extend_from_slice(extra);
    Wavelet::run(&ctx.cluster, &args)
}

fn revisions(kube: &Kube, ns: &str, name: &str) -> usize {
    kube.list("ReplicaSet", ns)
        .iter()
        .filter(|rs| {
            rs["metadata"]["ownerReferences"]
                .as_array()
                .is_some_and(|o| o.iter().any(|r| r["name"] == name))
        })
        .count()
}

fn annotation(object: &Value, template: bool, key: &str) -> Option<String> {
    let meta = if template {
        &object["spec"]["template"]["metadata"]
    } else {
        &object["metadata"]
    };
    meta["annotations"][key].as_str().map(String::from)
}

fn lines_with(output: &str, needle: &str) -> usize {
    output.lines().filter(|l| l.contains(needle)).count()
}

/// Five Deployments first seen with {k: 1}; the change to {k: 2} lands right after the
/// initial sync, while adoption PATCHes go out at one a second: each rolls once.
fn change_during_adoption(ctx: &Ctx) {
    let kube = &ctx.kube;
    let ns = "e2e-adopt-qps";
    kube.create_namespace(ns);
    kube.create(configmap(ns, "cfg", json!({"k": "1"})));
    let names: Vec<String> = (0..5).map(|i| format!("web-{i}")).collect();
    for name in &names {
        kube.create(workload(
            "Deployment",
            ns,
            name,
            opted_in(),
            mounts_configmap("cfg"),
        ));
    }
    let wavelet = run(ctx, ns, &["--api-qps", "1", "--api-burst", "1"]);
    kube.merge_patch("ConfigMap", ns, "cfg", json!({"data": {"k": "2"}}));
    for name in &names {
        kube.until(LONG, "each Deployment rolled to k=2", || {
            kube.get("Deployment", ns, name).is_some_and(|o| {
                let key = "wavelet.dev/config-hash";
                let template = annotation(&o, true, key);
                template.is_some() && template == annotation(&o, false, key)
            }) && revisions(kube, ns, name) == 2
        });
    }
    wavelet.wait_output("rolled:", LONG);
    let output = wavelet.output();
    assert_eq!(lines_with(&output, "rolled:"), names.len(), "{output}");
    assert!(output.contains("as first seen"), "{output}");
}

/// Adopted; then restarted with the selector on, off, `--ignore-secrets`, a key, another
/// key (the first kept as previous), no key: each re-records, none rolls. Then a change
/// made while wavelet was stopped, with the selector turned on meanwhile: one rollout;
/// and one made while it was stopped across a key rotation: one rollout.
fn flag_changes(ctx: &Ctx) {
    let kube = &ctx.kube;
    let ns = "e2e-basis";
    kube.create_namespace(ns);
    let mut cfg = configmap(ns, "cfg", json!({"k": "1"}));
    cfg["metadata"]["labels"] = json!({"team": "a"});
    kube.create(cfg);
    kube.create(configmap(ns, "extra", json!({"size": "L"})));
    kube.create(json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "db", "namespace": ns, "labels": {"team": "a"}},
        "type": "Opaque", "stringData": {"password": "canary-basis"}}));
    let mut pod = mounts_configmap("cfg");
    pod["container"]["envFrom"] = json!([{"secretRef": {"name": "db"}}]);
    let mut annotations = opted_in();
    annotations["wavelet.dev/extra-configmaps"] = json!("extra");
    kube.create(workload("Deployment", ns, "web", annotations, pod));
    kube.until(LONG, "the first revision", || {
        revisions(kube, ns, "web") == 1
    });
    let wavelet = run(ctx, ns, &[]);
    kube.until(LONG, "adoption", || {
        kube.get("Deployment", ns, "web")
            .is_some_and(|o| annotation(&o, false, "wavelet.dev/config-basis").is_some())
    });
    drop(wavelet);

    let dir = ctx.cluster.dir().join("e2e-basis-keys");
    std::fs::create_dir_all(&dir).unwrap();
    let (k1, k21) = (dir.join("k1"), dir.join("k21"));
    std::fs::write(&k1, "first key\n").unwrap();
    // Rotated: the new key first, the old one kept.
    std::fs::write(&k21, "second key\nfirst key\n").unwrap();
    let (k1, k21) = (k1.to_str().unwrap(), k21.to_str().unwrap());
    let settings = "the settings that shape the hash changed";
    // Turned off, the key the hashes were recorded under is gone: not checked, said so.
    let key_gone = "is no longer in --hash-key-file";
    for (flags, line) in [
        (&["--resource-label-selector", "team=a"][..], settings),
        (&[], settings),
        (&["--ignore-secrets"], settings),
        (&[], settings),
        (&["--hash-key-file", k1], settings),
        (&["--hash-key-file", k21], settings),
        (&[], key_gone),
    ] {
        let wavelet = run(ctx, ns, flags);
        wavelet.wait_output(line, LONG);
        assert_eq!(
            revisions(kube, ns, "web"),
            1,
            "{flags:?} rolled:\n{}",
            wavelet.output()
        );
        assert_eq!(lines_with(&wavelet.output(), "rolled:"), 0);
    }

    kube.merge_patch("ConfigMap", ns, "cfg", json!({"data": {"k": "2"}}));
    let wavelet = run(ctx, ns, &["--resource-label-selector", "team=a"]);
    kube.until(LONG, "one rollout", || revisions(kube, ns, "web") == 2);
    wavelet.wait_output("rolled:", LONG);
    assert_eq!(lines_with(&wavelet.output(), "rolled:"), 1);
    assert!(!wavelet.output().contains("canary-basis"));
    drop(wavelet);

    // Recorded under k1, changed while stopped, restarted with k2 (k1 kept): one rollout.
    let wavelet = run(ctx, ns, &["--hash-key-file", k1]);
    wavelet.wait_output(settings, LONG);
    drop(wavelet);
    kube.merge_patch("ConfigMap", ns, "cfg", json!({"data": {"k": "3"}}));
    let wavelet = run(ctx, ns, &["--hash-key-file", k21]);
    kube.until(LONG, "one rollout across the rotation", || {
        revisions(kube, ns, "web") == 3
    });
    wavelet.wait_output("rolled:", LONG);
    let output = wavelet.output();
    assert_eq!(lines_with(&output, "rolled:"), 1, "{output}");
    assert!(!output.contains("first key") && !output.contains("second key"));
}

/// The peers' binaries, or `None` (the scenario says it did not run; under `CI`, which
/// sets `WAVELET_E2E_PEERS`, a scenario that did not run must not pass).
fn peers() -> Option<PathBuf> {
    match std::env::var_os("WAVELET_E2E_PEERS") {
        Some(dir) => Some(PathBuf::from(dir)),
        None if std::env::var_os("CI").is_some() => {
            panic!("CI is set but WAVELET_E2E_PEERS is not: the take-over scenarios did not run")
        }
        None => None,
    }
}

/// A peer running with `/tmp/peers.lock` held; killed (and the lock released) on drop.
struct Peer {
    child: Child,
    /// `flock /tmp/peers.lock` holding the lock until its stdin closes (also when the
    /// suite dies).
    holder: Child,
}

impl Peer {
    fn start(ctx: &Ctx, mut command: Command, log: &str) -> Peer {
        let mut holder = Command::new("flock")
            .args(["/tmp/peers.lock", "sh", "-c", "echo locked; read _"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("flock /tmp/peers.lock");
        let mut line = String::new();
        BufReader::new(holder.stdout.take().unwrap())
            .read_line(&mut line)
            .expect("flock's answer");
        assert_eq!(line.trim(), "locked");
        let log = File::create(ctx.cluster.dir().join(log)).unwrap();
        if let Some(group) = ctx.cluster.process_group() {
            use std::os::unix::process::CommandExt;
            command.process_group(group);
        }
        let child = command
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("starting a peer");
        Peer { child, holder }
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        drop(self.holder.stdin.take());
        let _ = self.holder.wait();
    }
}

/// The real Wave hashes two Deployments and is stopped; one's ConfigMap changes while
/// neither runs. wavelet takes `same` over without a rollout and rolls `changed` once.
fn from_wave(ctx: &Ctx) {
    let Some(dir) = peers() else {
        println!("e2e takeover_from_real_wave: did not run (set WAVELET_E2E_PEERS)");
        return;
    };
    let kube = &ctx.kube;
    let ns = "e2e-from-wave";
    kube.create_namespace(ns);
    let wave_in = json!({"wave.pusher.com/update-on-config-change": "true"});
    for name in ["same", "changed"] {
        kube.create(configmap(ns, name, json!({"k": "1"})));
        kube.create(workload(
            "Deployment",
            ns,
            name,
            wave_in.clone(),
            mounts_configmap(name),
        ));
    }
    let key = "wave.pusher.com/config-hash";
    let wave_hashes = {
        let mut command = Command::new(dir.join("wave"));
        command
            .arg("--kubeconfig")
            .arg(&ctx.cluster.kubeconfig)
            .args(["--update-rate=10000", "--update-burst=100000"])
            .env_clear();
        let _wave = Peer::start(ctx, command, "wave.log");
        let mut hashes = Vec::new();
        for name in ["same", "changed"] {
            kube.until(LONG, "Wave's hash on the template", || {
                kube.get("Deployment", ns, name)
                    .is_some_and(|o| annotation(&o, true, key).is_some())
            });
            kube.until(LONG, "Wave's rollout", || revisions(kube, ns, name) == 2);
            let object = kube.get("Deployment", ns, name).unwrap();
            hashes.push(annotation(&object, true, key).unwrap());
        }
        hashes
    };
    println!("e2e takeover_from_real_wave: Wave wrote {wave_hashes:?}");
    // The real Wave's own vector: ConfigMap `same` {k: "1"} mounted as a volume, i.e.
    // printf '%s' '{"configMaps":{"same":{"k":"MQ=="}},"secrets":{}}' | sha256sum
    assert_eq!(
        wave_hashes[0],
        "d857162e3df6dd4ea660a8ac60aa6d967f51afec5388d43f8781c789035e290d"
    );
    kube.merge_patch("ConfigMap", ns, "changed", json!({"data": {"k": "2"}}));
    let wavelet = run(ctx, ns, &[]);
    kube.until(LONG, "changed rolled once", || {
        revisions(kube, ns, "changed") == 3
    });
    kube.until(LONG, "same taken over", || {
        kube.get("Deployment", ns, "same")
            .is_some_and(|o| annotation(&o, false, key).is_some())
    });
    wavelet.wait_output("taken over from Wave", LONG);
    assert_eq!(revisions(kube, ns, "same"), 2, "{}", wavelet.output());
    println!(
        "e2e takeover_from_real_wave: {}",
        wavelet
            .output()
            .lines()
            .filter(|l| l.contains("taken over") || l.contains("rolled:"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert_eq!(lines_with(&wavelet.output(), "rolled:"), 1);
}

/// The real Reloader (env-vars strategy) reloads two Deployments for a change and is
/// stopped; one's ConfigMap changes while neither runs. wavelet takes `same` over
/// without a rollout and rolls `changed` once.
fn from_reloader(ctx: &Ctx) {
    let Some(dir) = peers() else {
        println!("e2e takeover_from_real_reloader: did not run (set WAVELET_E2E_PEERS)");
        return;
    };
    let kube = &ctx.kube;
    let ns = "e2e-from-reloader";
    kube.create_namespace(ns);
    let auto = json!({"reloader.stakater.com/auto": "true"});
    for name in ["same", "changed"] {
        kube.create(configmap(ns, name, json!({"k": "1"})));
        kube.create(workload(
            "Deployment",
            ns,
            name,
            auto.clone(),
            mounts_configmap(name),
        ));
    }
    let env_of = |name: &str| -> Option<String> {
        let object = kube.get("Deployment", ns, name)?;
        object["spec"]["template"]["spec"]["containers"][0]["env"]
            .as_array()?
            .iter()
            .find(|e| {
                e["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with("STAKATER_"))
            })
            .and_then(|e| e["value"].as_str().map(String::from))
    };
    {
        let mut command = Command::new(dir.join("reloader"));
        command
            .arg("--log-level=info")
            .env_clear()
            .env("KUBECONFIG", &ctx.cluster.kubeconfig);
        let _reloader = Peer::start(ctx, command, "reloader.log");
        // Reloader does nothing at start: a change it sees is what makes it write. Until
        // its informers run, a change is not seen, so change again until it is.
        let mut n = 2;
        kube.until(LONG, "Reloader's env vars", || {
            if env_of("same").is_some() && env_of("changed").is_some() {
                return true;
            }
            for name in ["same", "changed"] {
                kube.merge_patch("ConfigMap", ns, name, json!({"data": {"k": n.to_string()}}));
            }
            n += 1;
            std::thread::sleep(Duration::from_secs(2));
            false
        });
        // Reloader caught up with the last change: its records are of the data now.
        kube.until(LONG, "Reloader's records of the data now", || {
            ["same", "changed"].iter().all(|name| {
                let data = &kube.get("ConfigMap", ns, name).unwrap()["data"]["k"];
                let values = wavelet::model::peers::Values {
                    data: [("k".to_string(), data.as_str().unwrap().as_bytes().to_vec())].into(),
                    binary: Default::default(),
                };
                let sha1 = wavelet::model::peers::reloader_sha1(
                    wavelet::objects::ConfigKind::ConfigMap,
                    &values,
                );
                env_of(name) == Some(sha1)
            })
        });
    }
    // Reloader's own vector: printf k=<value> | sha1sum.
    println!(
        "e2e takeover_from_real_reloader: Reloader wrote {:?}",
        env_of("same")
    );
    let before_same = revisions(kube, ns, "same");
    let before_changed = revisions(kube, ns, "changed");
    kube.merge_patch(
        "ConfigMap",
        ns,
        "changed",
        json!({"data": {"k": "changed"}}),
    );
    let wavelet = run(ctx, ns, &[]);
    kube.until(LONG, "changed rolled once", || {
        revisions(kube, ns, "changed") == before_changed + 1
    });
    wavelet.wait_output("taken over from Reloader", LONG);
    assert_eq!(
        revisions(kube, ns, "same"),
        before_same,
        "{}",
        wavelet.output()
    );
    assert_eq!(lines_with(&wavelet.output(), "rolled:"), 1);
}
