//! The gates people rely on, against the real API server (issue 32): `wavelet pause`,
//! `resume` and `status` from a laptop find the running wavelet's state through its
//! Deployment, not the kubeconfig context's namespace, and never create a ConfigMap of
//! their own; a held fan-out and its resume each reach the alert receiver once; with
//! `--namespaces`, `wavelet.dev/pause` on a listed Namespace holds its rollouts, read by
//! name as the shipped RBAC (`resourceNames`) allows and no more.

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
    Scenario {
        name: "gates_a_paused_namespace_is_paused_with_namespaces",
        run: paused_namespace,
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

/// Issue 32.12, seen on the real server: with `--namespaces`, `wavelet.dev/pause` on the
/// Namespace was ignored and 3 Deployments rolled. Also: the shipped ClusterRole with
/// `resourceNames` lets a ServiceAccount read exactly that Namespace the way wavelet does
/// (a list and a watch narrowed by `fieldSelector=metadata.name=`), and list no other.
fn paused_namespace(ctx: &Ctx) {
    let kube = &ctx.kube;
    let ns = "e2e-paused-ns";
    kube.create_namespace(ns);
    kube.create(configmap(ns, "cfg", json!({"k": "1"})));
    for name in ["a", "b", "c"] {
        kube.create(workload(
            "Deployment",
            ns,
            name,
            opted_in(),
            mounts_configmap("cfg"),
        ));
    }
    kube.until(LONG, "first revisions", || {
        ["a", "b", "c"]
            .iter()
            .all(|n| replica_sets(kube, ns, n) == 1)
    });
    let wavelet = Wavelet::run(
        &ctx.cluster,
        &[
            "--namespaces",
            ns,
            "--state-namespace",
            ns,
            "--fan-out",
            "at-once",
            "--debounce",
            "300ms",
            "--min-rollout-interval",
            "0s",
        ],
    );
    kube.until(LONG, "adoption", || {
        ["a", "b", "c"].iter().all(|n| {
            kube.get("Deployment", ns, n)
                .is_some_and(|d| hashes(&d).1.is_some())
        })
    });
    let annotate = |value: Value| {
        kube.client
            .patch::<Value>(
                &format!("/api/v1/namespaces/{ns}"),
                wavelet::client::PatchType::Merge,
                &json!({"metadata": {"annotations": {"wavelet.dev/pause": value}}}),
            )
            .expect("annotating the Namespace")
    };
    let mark = wavelet.output().len();
    annotate(json!("true"));
    // The pause reaches wavelet through its watch of that one Namespace: its workloads are
    // looked at again (each reconcile is logged at debug).
    kube.until(LONG, "the pause seen", || {
        wavelet.output()[mark..].contains(&format!("deployment {ns}/a:"))
    });
    kube.merge_patch("ConfigMap", ns, "cfg", json!({"data": {"k": "2"}}));
    wavelet.wait_output(
        &format!("PENDING: paused (Namespace {ns} has wavelet.dev/pause"),
        LONG,
    );
    std::thread::sleep(Duration::from_secs(1));
    for name in ["a", "b", "c"] {
        assert_eq!(
            replica_sets(kube, ns, name),
            1,
            "{name} rolled in a paused Namespace"
        );
    }
    annotate(Value::Null);
    kube.until(LONG, "each rolled once when lifted", || {
        ["a", "b", "c"]
            .iter()
            .all(|n| replica_sets(kube, ns, n) == 2)
    });

    // The shipped grant, for this namespace, to a ServiceAccount of its own.
    let role = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("manifests/namespaced/namespace-clusterrole.yaml"),
    )
    .unwrap();
    assert!(role.contains("resourceNames: [apps]"), "{role}");
    let post = |path: &str, body: Value| {
        kube.client
            .post::<Value>(path, &body)
            .unwrap_or_else(|e| panic!("POST {path}: {e}"))
    };
    post(
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "e2e-paused-ns-namespaces"},
            "rules": [{"apiGroups": [""], "resources": ["namespaces"],
                "resourceNames": [ns], "verbs": ["list", "watch"]}]}),
    );
    post(
        &format!("/api/v1/namespaces/{ns}/serviceaccounts"),
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "reader"}}),
    );
    post(
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "e2e-paused-ns-namespaces"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                "name": "e2e-paused-ns-namespaces"},
            "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": ns}]}),
    );
    let token = post(
        &format!("/api/v1/namespaces/{ns}/serviceaccounts/reader/token"),
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "spec": {"expirationSeconds": 600}}),
    )["status"]["token"]
        .as_str()
        .unwrap()
        .to_string();
    let (Some(port), Some(ca)) = (ctx.cluster.api_port, ctx.cluster.ca.as_ref()) else {
        println!("e2e gates_a_paused_namespace_is_paused_with_namespaces: RBAC part skipped: needs a control plane the suite started");
        return;
    };
    let kubeconfig = ctx.cluster.dir().join("e2e-paused-ns-reader.kubeconfig");
    std::fs::write(
        &kubeconfig,
        crate::cluster::kubeconfig_text(port, ca, &token),
    )
    .unwrap();
    let reader = wavelet::client::Client::from_flags(&wavelet::config::ConnectionFlags {
        kubeconfig: Some(kubeconfig),
        ..Default::default()
    })
    .expect("a client with the reader's token");
    // RBAC propagates to the authorizer's cache within a moment.
    let by_name = format!("/api/v1/namespaces?fieldSelector=metadata.name%3D{ns}");
    kube.until(LONG, "the grant in effect", || {
        reader.get::<Value>(&by_name).is_ok()
    });
    reader
        .get::<Value>(&format!("{by_name}&watch=true&timeoutSeconds=1"))
        .map(|_| ())
        .or_else(|e| if e.is_forbidden() { Err(e) } else { Ok(()) })
        .expect("a watch narrowed to the listed Namespace");
    let everything = reader.get::<Value>("/api/v1/namespaces");
    assert!(
        everything.as_ref().is_err_and(|e| e.is_forbidden()),
        "the grant lists every Namespace: {everything:?}"
    );
}
