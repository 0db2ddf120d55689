//! The Secrets Store CSI driver against the real API server: its v1.6.0 CRDs installed
//! from ../shared/third-party, pod statuses written for the real Pods of real
//! ReplicaSets as the driver's node plugin writes them (and garbage-collected with their
//! Pods by the real controller-manager), wavelet run with `--enable-csi-integration`.
//! One rotation rolls each Deployment that mounts the class exactly once (one new
//! ReplicaSet), a rotation of an unrelated class rolls none of them, adoption rolls
//! nothing, Reloader's typed `auto` selects the class, and an exclude list wins. A
//! DaemonSet's Pods named like a Deployment's do not vote for it (owner references).

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{json, Value};

use crate::kube::{configmap, opted_in, workload, Kube};
use crate::process::{one_shot, Wavelet};
use crate::Ctx;

const LONG: Duration = Duration::from_secs(60);
const GROUP_VERSION: &str = "secrets-store.csi.x-k8s.io/v1";

/// Installs the driver's CRDs (once for the suite) and waits until the API serves them.
fn install_crds(kube: &Kube) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/third-party/secrets-store-csi-driver-v1.6.0");
    for file in [
        "secretproviderclasses.yaml",
        "secretproviderclasspodstatuses.yaml",
    ] {
        let text = std::fs::read_to_string(dir.join(file))
            .unwrap_or_else(|e| panic!("reading {file}: {e}"));
        let crd = wavelet::client::yaml::parse(&text).unwrap_or_else(|e| panic!("{file}: {e}"));
        match kube.client.post::<Value>(
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            &crd,
        ) {
            Ok(_) => {}
            Err(e) if e.status().is_some_and(|s| s.is_conflict()) => {}
            Err(e) => panic!("creating the CRD of {file}: {e}"),
        }
    }
    for plural in ["secretproviderclasses", "secretproviderclasspodstatuses"] {
        kube.until(LONG, &format!("{plural} served"), || {
            kube.client
                .get::<Value>(&format!("/apis/{GROUP_VERSION}/{plural}"))
                .is_ok()
        });
    }
}

fn statuses_path(ns: &str) -> String {
    format!("/apis/{GROUP_VERSION}/namespaces/{ns}/secretproviderclasspodstatuses")
}

/// The pod spec part that mounts SecretProviderClass `class` (and, when given, reads
/// ConfigMap `configmap` through `envFrom`).
fn mounts_class(class: &str, configmap: Option<&str>) -> Value {
    let mut container = json!({"volumeMounts": [{"name": "secrets-store",
        "mountPath": "/mnt/secrets-store", "readOnly": true}]});
    if let Some(cm) = configmap {
        container["envFrom"] = json!([{"configMapRef": {"name": cm}}]);
    }
    json!({"volumes": [{"name": "secrets-store", "csi": {"driver": "secrets-store.csi.k8s.io",
            "readOnly": true, "volumeAttributes": {"secretProviderClass": class}}}],
        "container": container})
}

/// The running Pods of `ns` that mount `class`.
fn pods_mounting(kube: &Kube, ns: &str, class: &str) -> Vec<Value> {
    kube.list("Pod", ns)
        .into_iter()
        .filter(|p| {
            p["metadata"]["deletionTimestamp"].is_null() && p["status"]["phase"] == "Running"
        })
        .filter(|p| {
            p["spec"]["volumes"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|v| v["csi"]["volumeAttributes"]["secretProviderClass"] == class)
        })
        .collect()
}

/// What the driver's `createOrUpdateSecretProviderClassPodStatus` writes once `pod` has
/// mounted version `version` of object `db-password` of `class`: create, or read and PUT.
fn write_status(kube: &Kube, pod: &Value, class: &str, version: &str) {
    let ns = pod["metadata"]["namespace"].as_str().unwrap();
    let pod_name = pod["metadata"]["name"].as_str().unwrap();
    let name = format!("{pod_name}-{ns}-{class}");
    let status = json!({
        "podName": pod_name, "secretProviderClassName": class, "mounted": true,
        "targetPath": format!("/var/lib/kubelet/pods/{}/volumes/kubernetes.io~csi/secrets-store/mount",
            pod["metadata"]["uid"].as_str().unwrap()),
        "objects": [{"id": "db-password", "version": version}],
    });
    let owner = json!([{"apiVersion": "v1", "kind": "Pod", "name": pod_name, "uid": pod["metadata"]["uid"]}]);
    let labels = json!({"internal.secrets-store.csi.k8s.io/node-name": crate::kubelet::NODE});
    let created = json!({"apiVersion": GROUP_VERSION, "kind": "SecretProviderClassPodStatus",
        "metadata": {"name": name, "namespace": ns, "labels": labels, "ownerReferences": owner},
        "status": status});
    match kube.client.post::<Value>(&statuses_path(ns), &created) {
        Ok(_) => return,
        Err(e) if e.status().is_some_and(|s| s.is_conflict()) => {}
        Err(e) => panic!("creating pod status {name}: {e}"),
    }
    let path = format!("{}/{name}", statuses_path(ns));
    let Ok(mut existing) = kube.client.get::<Value>(&path) else {
        return; // its Pod went meanwhile, and the status with it
    };
    existing["metadata"]["labels"] = labels;
    existing["metadata"]["ownerReferences"] = owner;
    existing["status"] = status;
    if let Err(e) = kube.client.put::<Value>(&path, &existing) {
        assert!(e.is_not_found(), "updating pod status {name}: {e}");
    }
}

/// The driver's remount of every running Pod that mounts `class`: each reports `version`.
/// Returns how many Pods did.
fn publish(kube: &Kube, ns: &str, class: &str, version: &str) -> usize {
    let pods = pods_mounting(kube, ns, class);
    for pod in &pods {
        write_status(kube, pod, class, version);
    }
    pods.len()
}

/// Deployment `name` (2 replicas) with these annotations and pod spec part.
fn deployment(kube: &Kube, ns: &str, name: &str, annotations: Value, pod: Value) {
    kube.create(workload("Deployment", ns, name, annotations, pod));
}

fn replica_sets(kube: &Kube, ns: &str, name: &str) -> usize {
    kube.list("ReplicaSet", ns)
        .iter()
        .filter(|rs| {
            rs["metadata"]["ownerReferences"]
                .as_array()
                .is_some_and(|refs| refs.iter().any(|r| r["name"] == name))
        })
        .count()
}

fn adopted(kube: &Kube, ns: &str, name: &str) -> bool {
    kube.get("Deployment", ns, name)
        .is_some_and(|d| !d["metadata"]["annotations"]["wavelet.dev/config-hash"].is_null())
}

pub fn rotation(ctx: &Ctx) {
    let kube = &ctx.kube;
    let ns = "e2e-csi";
    kube.create_namespace(ns);
    install_crds(kube);
    for class in ["vault", "unrelated"] {
        let spc = json!({"apiVersion": GROUP_VERSION, "kind": "SecretProviderClass",
            "metadata": {"name": class, "namespace": ns},
            "spec": {"provider": "vault", "parameters": {"vaultAddress": "https://vault.vault:8200",
                "roleName": "app", "objects": "- objectName: db-password\n  secretPath: secret/data/db\n  secretKey: password\n"}}});
        kube.client
            .post::<Value>(
                &format!("/apis/{GROUP_VERSION}/namespaces/{ns}/secretproviderclasses"),
                &spc,
            )
            .expect("creating a SecretProviderClass");
    }
    kube.create(configmap(ns, "cfg", json!({"k": "1"})));
    deployment(kube, ns, "web", opted_in(), mounts_class("vault", None));
    deployment(
        kube,
        ns,
        "api",
        json!({"secretproviderclass.reloader.stakater.com/auto": "true"}),
        mounts_class("vault", None),
    );
    deployment(
        kube,
        ns,
        "excluded",
        json!({"reloader.stakater.com/auto": "true",
            "secretproviderclasses.exclude.reloader.stakater.com/reload": "vault"}),
        mounts_class("vault", Some("cfg")),
    );
    deployment(
        kube,
        ns,
        "other",
        opted_in(),
        mounts_class("unrelated", None),
    );
    let all = ["web", "api", "excluded", "other"];
    kube.until(LONG, "every Pod running", || {
        pods_mounting(kube, ns, "vault").len() == 6
            && pods_mounting(kube, ns, "unrelated").len() == 2
    });
    assert_eq!(publish(kube, ns, "vault", "1"), 6);
    assert_eq!(publish(kube, ns, "unrelated", "1"), 2);

    let wavelet = Wavelet::run(
        &ctx.cluster,
        &[
            "--namespaces",
            ns,
            "--enable-csi-integration",
            "--debounce",
            "300ms",
            "--min-rollout-interval",
            "0s",
            "--max-rollouts-per-second",
            "50",
        ],
    );
    kube.until(LONG, "adoptions", || {
        all.iter().all(|n| adopted(kube, ns, n))
    });
    let revisions = |names: &[&str]| -> Vec<usize> {
        names.iter().map(|n| replica_sets(kube, ns, n)).collect()
    };
    assert_eq!(revisions(&all), [1, 1, 1, 1], "adoption rolled nothing");
    // The hash it adopted counts the class: `hash` (with the flag) prints the same.
    let (code, out) = one_shot(
        &ctx.cluster,
        &[
            "hash",
            "--enable-csi-integration",
            "-n",
            ns,
            "deployment/web",
        ],
    );
    assert_eq!(code, 0, "{out}");
    let recorded = kube.get("Deployment", ns, "web").unwrap()["metadata"]["annotations"]
        ["wavelet.dev/config-hash"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        out.starts_with(&recorded),
        "hash printed {out}, recorded {recorded}"
    );
    assert!(
        out.contains(&format!(
            "secretproviderclass {ns}/vault (mounted, 1 objects, as 2 Pods report them)"
        )),
        "{out}"
    );

    // The unrelated class rotates: only other, which mounts it, rolls.
    publish(kube, ns, "unrelated", "2");
    kube.until(LONG, "other rolled", || {
        replica_sets(kube, ns, "other") == 2
    });
    assert_eq!(revisions(&all), [1, 1, 1, 2], "{}", wavelet.output());

    // Vault rotates: web (wavelet's key) and api (Reloader's typed auto) roll once each;
    // excluded (its exclude list names vault) does not.
    publish(kube, ns, "vault", "2");
    kube.until(LONG, "web and api rolled", || {
        replica_sets(kube, ns, "web") == 2 && replica_sets(kube, ns, "api") == 2
    });
    // The rollouts' new Pods mount the new version (the old Pods' statuses go with them,
    // by the garbage collector), and the driver's next remounts report it again.
    let rolled_out = |name: &str| {
        kube.get("Deployment", ns, name).is_some_and(|d| {
            let s = &d["status"];
            s["replicas"] == 2 && s["updatedReplicas"] == 2 && s["availableReplicas"] == 2
        })
    };
    kube.until(LONG, "the rollouts done", || {
        ["web", "api", "other"].iter().all(|n| rolled_out(n))
            && pods_mounting(kube, ns, "vault").len() == 6
            && pods_mounting(kube, ns, "unrelated").len() == 2
    });
    publish(kube, ns, "vault", "2");
    publish(kube, ns, "unrelated", "2");
    publish(kube, ns, "vault", "2");
    // The positive signal: a ConfigMap change rolls excluded (its exclude list names the
    // class only).
    kube.merge_patch("ConfigMap", ns, "cfg", json!({"data": {"k": "2"}}));
    kube.until(LONG, "excluded rolled for its ConfigMap", || {
        replica_sets(kube, ns, "excluded") == 2
    });
    assert_eq!(revisions(&all), [2, 2, 2, 2], "{}", wavelet.output());
    assert_eq!(
        wavelet
            .output()
            .lines()
            .filter(|l| l.contains("rolled:"))
            .count(),
        4,
        "{}",
        wavelet.output()
    );
    let (code, out) = one_shot(
        &ctx.cluster,
        &["status", "--enable-csi-integration", "-n", ns],
    );
    assert_eq!(code, 0, "{out}");
}

/// The running Pods of `name` in `ns` that mount `vault`, with whether each has a pod
/// status of it yet.
fn web_pods(kube: &Kube, ns: &str, name: &str) -> Vec<(Value, bool)> {
    let reported: Vec<String> = kube
        .client
        .get::<Value>(&statuses_path(ns))
        .map(|l| {
            l["items"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|s| s["status"]["podName"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    pods_mounting(kube, ns, "vault")
        .into_iter()
        .filter(|p| p["metadata"]["labels"]["app"] == name)
        .map(|p| {
            let has = reported.iter().any(|r| p["metadata"]["name"] == *r);
            (p, has)
        })
        .collect()
}

/// Each running Pod of `name` in `ns` that has no pod status of `vault` yet (`all`: every
/// one) mounts a version of its own, `<prefix>-<pod name>` (Vault's dynamic secrets);
/// returns how many did.
fn own_versions(kube: &Kube, ns: &str, name: &str, prefix: &str, all: bool) -> usize {
    let pods: Vec<Value> = web_pods(kube, ns, name)
        .into_iter()
        .filter(|(_, has)| all || !has)
        .map(|(p, _)| p)
        .collect();
    for pod in &pods {
        let version = format!("{prefix}-{}", pod["metadata"]["name"].as_str().unwrap());
        write_status(kube, pod, "vault", &version);
    }
    pods.len()
}

/// Waits up to [`LONG`] for `web` to have `count` ReplicaSets.
fn wait_for_rs(kube: &Kube, ns: &str, count: usize) -> Result<(), ()> {
    let deadline = std::time::Instant::now() + LONG;
    while std::time::Instant::now() < deadline {
        if replica_sets(kube, ns, "web") == count {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Err(())
}

/// Issue 33, item 1, on the real API server: with a version of its own in every Pod (Vault's
/// dynamic secrets), a ConfigMap change rolls the Deployment once and its new Pods'
/// versions roll nothing; a rotation (every running Pod's credentials renewed) rolls it
/// once, and that rollout's Pods roll nothing either. (Before: a rollout after every
/// rollout, for ever.)
pub fn per_pod_versions(ctx: &Ctx) {
    let kube = &ctx.kube;
    let ns = "e2e-csi-per-pod";
    kube.create_namespace(ns);
    install_crds(kube);
    let spc = json!({"apiVersion": GROUP_VERSION, "kind": "SecretProviderClass",
        "metadata": {"name": "vault", "namespace": ns},
        "spec": {"provider": "vault", "parameters": {"roleName": "app",
            "objects": "- objectName: db-password\n  secretPath: database/creds/app\n"}}});
    kube.client
        .post::<Value>(
            &format!("/apis/{GROUP_VERSION}/namespaces/{ns}/secretproviderclasses"),
            &spc,
        )
        .expect("creating a SecretProviderClass");
    kube.create(configmap(ns, "cfg", json!({"k": "1"})));
    kube.create(configmap(ns, "marker-cfg", json!({"k": "1"})));
    deployment(
        kube,
        ns,
        "web",
        opted_in(),
        mounts_class("vault", Some("cfg")),
    );
    let mut marker = workload(
        "Deployment",
        ns,
        "marker",
        opted_in(),
        mounts_class("none", Some("marker-cfg")),
    );
    marker["spec"]["replicas"] = json!(0);
    kube.create(marker);
    kube.until(LONG, "web's Pods running", || {
        pods_mounting(kube, ns, "vault").len() == 2
    });
    assert_eq!(own_versions(kube, ns, "web", "a", true), 2);
    let wavelet = Wavelet::run(
        &ctx.cluster,
        &[
            "--namespaces",
            ns,
            "--enable-csi-integration",
            "--debounce",
            "300ms",
            "--min-rollout-interval",
            "0s",
        ],
    );
    kube.until(LONG, "adoptions", || {
        adopted(kube, ns, "web") && adopted(kube, ns, "marker")
    });
    // The positive signal that what came before was processed: marker rolls.
    let mut marker_rollouts = 0;
    let mut barrier = || {
        marker_rollouts += 1;
        let n = marker_rollouts;
        kube.merge_patch(
            "ConfigMap",
            ns,
            "marker-cfg",
            json!({"data": {"k": format!("m{n}")}}),
        );
        kube.until(LONG, "marker rolled", || {
            wavelet
                .output()
                .lines()
                .filter(|l| l.contains(&format!("deployment {ns}/marker: rolled")))
                .count()
                == n
        });
    };
    // The rollout done: its two new Pods run, without a pod status yet, and no other.
    let rolled_out = || {
        let pods = web_pods(kube, ns, "web");
        pods.len() == 2 && pods.iter().all(|(_, has)| !has)
    };
    assert_eq!(replica_sets(kube, ns, "web"), 1, "adoption rolled nothing");

    // A ConfigMap change: one rollout; the new Pods mount credentials of their own.
    kube.merge_patch("ConfigMap", ns, "cfg", json!({"data": {"k": "2"}}));
    kube.until(LONG, "web rolled for cfg", || {
        replica_sets(kube, ns, "web") == 2
    });
    kube.until(LONG, "the rollout done", rolled_out);
    assert_eq!(own_versions(kube, ns, "web", "b", false), 2);
    barrier();
    barrier();
    assert_eq!(replica_sets(kube, ns, "web"), 2, "{}", wavelet.output());

    // A rotation: every running Pod's credentials renewed. One rollout; its Pods' own
    // credentials roll nothing.
    assert_eq!(own_versions(kube, ns, "web", "rotated", true), 2);
    if wait_for_rs(kube, ns, 3).is_err() {
        panic!("web not rolled for the rotation:\n{}", wavelet.output());
    }
    kube.until(LONG, "the rollout done", rolled_out);
    assert_eq!(own_versions(kube, ns, "web", "c", false), 2);
    barrier();
    barrier();
    assert_eq!(replica_sets(kube, ns, "web"), 3, "{}", wavelet.output());
}

/// Issue 33, item 3, on the real API server: the Pod of DaemonSet `web-agent`
/// (`web-agent-<random>`, shaped as one of Deployment web's) was taken for web's by its
/// name, so web's rotation waited for the agent's remount, and never came while it did
/// not. Now web's Pods are told through their ReplicaSet's owner reference: web's two
/// Pods remounting roll web once, and the agent's remounts roll nothing.
pub fn a_daemonsets_pods_do_not_vote_for_a_deployment_named_alike(ctx: &Ctx) {
    let kube = &ctx.kube;
    let ns = "e2e-csi-owners";
    kube.create_namespace(ns);
    install_crds(kube);
    let spc = json!({"apiVersion": GROUP_VERSION, "kind": "SecretProviderClass",
        "metadata": {"name": "vault", "namespace": ns},
        "spec": {"provider": "vault", "parameters": {"roleName": "app",
            "objects": "- objectName: db-password\n  secretPath: secret/data/db\n"}}});
    kube.client
        .post::<Value>(
            &format!("/apis/{GROUP_VERSION}/namespaces/{ns}/secretproviderclasses"),
            &spc,
        )
        .expect("creating a SecretProviderClass");
    kube.create(configmap(ns, "marker-cfg", json!({"k": "1"})));
    deployment(kube, ns, "web", opted_in(), mounts_class("vault", None));
    // Tolerating the Node's `not-ready` taint, which no node lifecycle controller lifts
    // here: the DaemonSet controller then makes its Pod for the harness's Node.
    let mut agent_spec = mounts_class("vault", None);
    agent_spec["tolerations"] = json!([{"operator": "Exists"}]);
    kube.create(workload(
        "DaemonSet",
        ns,
        "web-agent",
        json!({}),
        agent_spec,
    ));
    let mut marker = workload(
        "Deployment",
        ns,
        "marker",
        opted_in(),
        mounts_class("none", Some("marker-cfg")),
    );
    marker["spec"]["replicas"] = json!(0);
    kube.create(marker);
    let agent = |p: &Value| p["metadata"]["labels"]["app"] == "web-agent";
    kube.until(LONG, "web's and the agent's Pods running", || {
        let pods = pods_mounting(kube, ns, "vault");
        pods.len() == 3 && pods.iter().filter(|p| agent(p)).count() == 1
    });
    let agent_pod = pods_mounting(kube, ns, "vault")
        .into_iter()
        .find(|p| agent(p))
        .unwrap();
    assert!(
        agent_pod["metadata"]["name"]
            .as_str()
            .unwrap()
            .starts_with("web-agent-"),
        "{agent_pod}"
    );
    assert_eq!(publish(kube, ns, "vault", "1"), 3);
    let wavelet = Wavelet::run(
        &ctx.cluster,
        &[
            "--namespaces",
            ns,
            "--enable-csi-integration",
            "--debounce",
            "300ms",
            "--min-rollout-interval",
            "0s",
        ],
    );
    kube.until(LONG, "adoptions", || {
        adopted(kube, ns, "web") && adopted(kube, ns, "marker")
    });
    let mut marker_rollouts = 0;
    let mut barrier = || {
        marker_rollouts += 1;
        let n = marker_rollouts;
        kube.merge_patch(
            "ConfigMap",
            ns,
            "marker-cfg",
            json!({"data": {"k": format!("m{n}")}}),
        );
        kube.until(LONG, "marker rolled", || {
            wavelet
                .output()
                .lines()
                .filter(|l| l.contains(&format!("deployment {ns}/marker: rolled")))
                .count()
                == n
        });
    };
    assert_eq!(replica_sets(kube, ns, "web"), 1, "adoption rolled nothing");

    // Vault rotates: web's two Pods remount; the agent's has not yet.
    let web_now: Vec<Value> = pods_mounting(kube, ns, "vault")
        .into_iter()
        .filter(|p| !agent(p))
        .collect();
    for pod in &web_now {
        write_status(kube, pod, "vault", "2");
    }
    if wait_for_rs(kube, ns, 2).is_err() {
        panic!("web not rolled for the rotation:\n{}", wavelet.output());
    }
    kube.until(LONG, "the rollout done", || {
        let pods = web_pods(kube, ns, "web");
        pods.len() == 2 && pods.iter().all(|(_, has)| !has)
    });
    for (pod, _) in web_pods(kube, ns, "web") {
        write_status(kube, &pod, "vault", "2");
    }
    // The agent's Pod remounts, twice: web does not roll.
    for version in ["3", "4"] {
        write_status(kube, &agent_pod, "vault", version);
        barrier();
    }
    barrier();
    assert_eq!(replica_sets(kube, ns, "web"), 2, "{}", wavelet.output());
}
