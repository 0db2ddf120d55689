//! The gates people rely on, against the real API server (issue 32): `wavelet pause`,
//! `resume` and `status` from a laptop find the running wavelet's state through its
//! Deployment, not the kubeconfig context's namespace, and never create a ConfigMap of
//! their own; a held fan-out and its resume each reach the alert receiver once.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

use crate::kube::{configmap, hashes, mounts_configmap, opted_in, workload, Kube};
use crate::kubelet::BAD_VALUE;
use crate::process::{one_shot, Wavelet};
use crate::{Ctx, Scenario};

pub const ALL: &[Scenario] = &[
    Scenario {
        name: "gates_cli_finds_the_running_wavelets_state",
        run: cli_finds_state,
        // Alone: the search lists wavelet Deployments cluster-wide, and no other
        // scenario's CLI call should meet this one's.
        serial: true,
    },
    Scenario {
        name: "gates_a_hold_and_its_resume_reach_the_alert_receiver",
        run: hold_alerts,
        serial: false,
    },
];

const LONG: Duration = Duration::from_secs(90);

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

/// The wavelet Deployment as the chart installs it (no replicas: the controller of the
/// scenario runs as a process beside it, with the same state namespace).
fn wavelet_deployment(ns: &str) -> Value {
    let labels = json!({"app.kubernetes.io/name": "wavelet"});
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "wavelet", "namespace": ns, "labels": labels},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "wavelet", "image": "wavelet", "args": ["run"]}]},
            },
        },
    })
}

/// Issue 32.6, seen on the real server: `wavelet pause` from a context without a namespace
/// created `default/wavelet-state` while the controller in its own namespace kept rolling.
fn cli_finds_state(ctx: &Ctx) {
    let kube = &ctx.kube;
    let (system, ns) = ("e2e-locate-system", "e2e-locate");
    kube.create_namespace(system);
    kube.create_namespace(ns);
    kube.create(wavelet_deployment(system));
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
    let wavelet = Wavelet::run(
        &ctx.cluster,
        &[
            "--namespaces",
            ns,
            "--state-namespace",
            system,
            "--debounce",
            "300ms",
            "--min-rollout-interval",
            "0s",
        ],
    );
    kube.until(LONG, "adoption", || {
        kube.get("Deployment", ns, "web")
            .is_some_and(|d| hashes(&d).1.is_some())
    });
    assert!(
        kube.get("ConfigMap", system, "wavelet-state").is_some(),
        "the running wavelet creates its state at start"
    );
    let default_state_before = kube.get("ConfigMap", "default", "wavelet-state").is_some();

    // The cluster's kubeconfig names no namespace: the CLI looks for the running wavelet.
    let (code, out) = one_shot(&ctx.cluster, &["pause"]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("state: ConfigMap e2e-locate-system/wavelet-state")
            && out.contains("the wavelet Deployment e2e-locate-system/wavelet"),
        "{out}"
    );
    assert_eq!(
        kube.get("ConfigMap", "default", "wavelet-state").is_some(),
        default_state_before,
        "the CLI created default/wavelet-state"
    );
    wavelet.wait_output("the global pause changed", LONG);
    kube.merge_patch("ConfigMap", ns, "cfg", json!({"data": {"k": "2"}}));
    wavelet.wait_output("PENDING: paused (wavelet pause since", LONG);
    let (code, table) = one_shot(&ctx.cluster, &["status", "-n", ns]);
    assert_eq!(code, 1, "{table}");
    assert!(
        table.contains("PAUSED") && table.contains("PENDING: paused"),
        "{table}"
    );
    assert_eq!(replica_sets(kube, ns, "web"), 1, "rolled while paused");
    let (code, out) = one_shot(&ctx.cluster, &["resume"]);
    assert_eq!(code, 0, "{out}");
    kube.until(LONG, "one rollout after resume", || {
        replica_sets(kube, ns, "web") == 2
    });
    // Gone, so no later CLI call of the suite finds it.
    kube.delete("Deployment", system, "wavelet");
}

/// A webhook receiver on 127.0.0.1: the body of every POST, answered 200.
fn receiver() -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("binding the receiver");
    let url = format!("http://{}/hooks/T0KEN", listener.local_addr().unwrap());
    let bodies = Arc::new(Mutex::new(Vec::new()));
    let got = Arc::clone(&bodies);
    std::thread::spawn(move || {
        for socket in listener.incoming().map_while(Result::ok) {
            let got = Arc::clone(&got);
            std::thread::spawn(move || {
                let mut reader = BufReader::new(socket.try_clone().unwrap());
                let mut socket = socket;
                loop {
                    let mut length = 0;
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    loop {
                        let mut header = String::new();
                        if reader.read_line(&mut header).unwrap_or(0) == 0 {
                            return;
                        }
                        if header.trim().is_empty() {
                            break;
                        }
                        if let Some((k, v)) = header.split_once(':') {
                            if k.eq_ignore_ascii_case("content-length") {
                                length = v.trim().parse().unwrap_or(0);
                            }
                        }
                    }
                    let mut body = vec![0; length];
                    if reader.read_exact(&mut body).is_err() {
                        return;
                    }
                    got.lock()
                        .unwrap()
                        .push(String::from_utf8_lossy(&body).into_owned());
                    let _ = socket.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n");
                }
            });
        }
    });
    (url, bodies)
}

/// Issue 32.10: a bad change holds the fan-out after its first Deployment (its Pod never
/// gets Ready, the Deployment controller reports ProgressDeadlineExceeded); the receiver
/// gets one alert naming the change, the workload and `wavelet resume`, and one more
/// when `wavelet resume` goes on. Only a URL is set: no `--alert-on-reload`.
fn hold_alerts(ctx: &Ctx) {
    let kube = &ctx.kube;
    let ns = "e2e-hold-alert";
    kube.create_namespace(ns);
    kube.create(configmap(ns, "shared", json!({"k": "1"})));
    for name in ["first", "second"] {
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
    kube.until(LONG, "both have their first revision", || {
        replica_sets(kube, ns, "first") == 1 && replica_sets(kube, ns, "second") == 1
    });
    let (url, bodies) = receiver();
    let wavelet = Wavelet::run(
        &ctx.cluster,
        &[
            "--namespaces",
            ns,
            "--state-namespace",
            ns,
            "--debounce",
            "300ms",
            "--min-rollout-interval",
            "0s",
            "--rollout-timeout",
            "60s",
            "--alert-sink",
            "webhook",
            "--alert-webhook-url",
            &url,
        ],
    );
    kube.until(LONG, "adoption", || {
        ["first", "second"].iter().all(|n| {
            kube.get("Deployment", ns, n)
                .is_some_and(|d| hashes(&d).1.is_some())
        })
    });
    kube.merge_patch(
        "ConfigMap",
        ns,
        "shared",
        json!({"data": {"k": format!("{BAD_VALUE}: the application cannot start")}}),
    );
    let said = |needle: &str| bodies.lock().unwrap().iter().any(|b| b.contains(needle));
    kube.until(LONG, "the hold's alert", || {
        said("wavelet held the fan-out")
    });
    let held = bodies.lock().unwrap()[0].clone();
    assert!(
        held.contains("shared of type CONFIGMAP in namespace e2e-hold-alert")
            && held.contains("e2e-hold-alert/first failed")
            && held.contains("progress deadline")
            && held.contains("wavelet resume -n e2e-hold-alert configmap/shared"),
        "{held}"
    );
    assert_eq!(bodies.lock().unwrap().len(), 1, "one alert: the hold");
    let (code, out) = one_shot(
        &ctx.cluster,
        &[
            "resume",
            "-n",
            ns,
            "configmap/shared",
            "--state-namespace",
            ns,
        ],
    );
    assert_eq!(code, 0, "{out}");
    kube.until(LONG, "the resume's alert", || {
        said("wavelet resumed the fan-out")
    });
    assert!(
        !wavelet.output().contains("T0KEN"),
        "the URL's token was logged"
    );
    assert!(
        bodies
            .lock()
            .unwrap()
            .iter()
            .all(|b| !b.contains(BAD_VALUE)),
        "a value in an alert"
    );
}
