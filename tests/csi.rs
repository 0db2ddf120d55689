//! The Secrets Store CSI driver (`--enable-csi-integration`), through the binary against the
//! fake API server serving the driver's own CRDs (v1.6.0, read from ../shared/third-party),
//! with pod statuses written as the driver writes them ([`Driver`]): a rotation rolls each
//! workload that mounts the class once, a pod status of an unrelated class rolls nothing,
//! adoption rolls nothing (nor do the first pod statuses, nor turning the flag on),
//! Reloader's annotations select as in Reloader, an exclude list wins, delete mode acts on
//! a SecretProviderClass, and `status` and `hash` show the classes. Only a workload's
//! running Pods vote (Evicted ones do not; a DaemonSet's named alike do not). Each "rolls nothing"
//! is asserted after a later change that must roll has rolled.

use std::path::PathBuf;
use std::process::Output;

use serde_json::{json, Value};

use crate::fake::client::RawClient;
use crate::fake::FakeApi;
use crate::util::*;

const NS: &str = "default";
const HASH: &str = "wavelet.dev/config-hash";
const CSI: &str = "--enable-csi-integration";
const GROUP_VERSION: &str = "secrets-store.csi.x-k8s.io/v1";
pub const STATUSES: &str = "secretproviderclasspodstatuses";

/// The driver's CRDs as its v1.6.0 release ships them (never copied into this repository).
pub fn csi_crds() -> [PathBuf; 2] {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/third-party/secrets-store-csi-driver-v1.6.0");
    [
        dir.join("secretproviderclasses.yaml"),
        dir.join("secretproviderclasspodstatuses.yaml"),
    ]
}

/// The fake serves the driver's resources, as an API server with its CRDs installed.
pub fn install_csi_driver(fake: &FakeApi) {
    for crd in csi_crds() {
        fake.install_crd(&crd);
    }
}

/// A SecretProviderClass for Vault with these annotations.
pub fn secret_provider_class(ns: &str, name: &str, annotations: Value) -> Value {
    json!({
        "apiVersion": GROUP_VERSION, "kind": "SecretProviderClass",
        "metadata": {"name": name, "namespace": ns, "annotations": annotations},
        "spec": {"provider": "vault", "parameters": {
            "vaultAddress": "https://vault.vault:8200", "roleName": name,
            "objects": "- objectName: db-password\n  secretPath: secret/data/db\n  secretKey: password\n"}}
    })
}

/// A pod spec that mounts SecretProviderClass `class` through the driver (volume
/// `secrets-store`), and, when given, ConfigMap `configmap` through `envFrom`.
pub fn mounts_class(class: &str, configmap: Option<&str>) -> Value {
    let mut container = json!({"name": "app", "image": "nginx",
        "volumeMounts": [{"name": "secrets-store", "mountPath": "/mnt/secrets-store", "readOnly": true}]});
    if let Some(cm) = configmap {
        container["envFrom"] = json!([{"configMapRef": {"name": cm}}]);
    }
    json!({
        "volumes": [{"name": "secrets-store", "csi": {"driver": "secrets-store.csi.k8s.io",
            "readOnly": true, "volumeAttributes": {"secretProviderClass": class}}}],
        "containers": [container],
    })
}

/// A Deployment of two replicas.
fn deployment(name: &str, annotations: Value, pod_spec: Value) -> Value {
    let mut object = workload("Deployment", NS, name, annotations, pod_spec);
    object["spec"]["replicas"] = json!(2);
    object
}

/// The Secrets Store CSI driver's side: what its node plugin writes once a Pod mounted a
/// class (`createOrUpdateSecretProviderClassPodStatus`, v1.6.0), over HTTP like the driver.
pub struct Driver {
    url: String,
}

impl Driver {
    pub fn new(fake: &FakeApi) -> Driver {
        Driver { url: fake.url() }
    }

    /// `pod` mounted `objects` (id, version) of `class`: the status is created (named
    /// `<pod>-<namespace>-<class>`, labelled with the node, owned by the Pod, objects
    /// ordered by id); when it exists, it is read and its labels, status and owner
    /// references are replaced with a PUT.
    pub fn write(&self, pod: &Value, class: &str, objects: &[(&str, &str)]) {
        let ns = pod["metadata"]["namespace"].as_str().unwrap();
        let pod_name = pod["metadata"]["name"].as_str().unwrap();
        let name = format!("{pod_name}-{ns}-{class}");
        let volume = pod["spec"]["volumes"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|v| v["csi"]["volumeAttributes"]["secretProviderClass"] == class)
            .and_then(|v| v["name"].as_str())
            .unwrap_or("secrets-store");
        let mut sorted = objects.to_vec();
        sorted.sort();
        let status = json!({
            "podName": pod_name,
            "targetPath": format!("/var/lib/kubelet/pods/{}/volumes/kubernetes.io~csi/{volume}/mount", pod["metadata"]["uid"].as_str().unwrap()),
            "mounted": true,
            "secretProviderClassName": class,
            "objects": sorted.iter().map(|(id, version)| json!({"id": id, "version": version})).collect::<Vec<_>>(),
        });
        let owner = json!([{"apiVersion": "v1", "kind": "Pod", "name": pod_name, "uid": pod["metadata"]["uid"]}]);
        let labels = json!({"internal.secrets-store.csi.k8s.io/node-name": "node-1"});
        let collection = format!("/apis/{GROUP_VERSION}/namespaces/{ns}/{STATUSES}");
        let created = json!({
            "apiVersion": GROUP_VERSION, "kind": "SecretProviderClassPodStatus",
            "metadata": {"name": name, "namespace": ns, "labels": labels, "ownerReferences": owner},
            "status": status,
        });
        let mut client = RawClient::connect(&self.url);
        let response = client.json("POST", &collection, "application/json", &created);
        match response.status {
            201 => return,
            409 => {}
            other => panic!("creating pod status {name}: {other} {}", response.text()),
        }
        let path = format!("{collection}/{name}");
        let found = client.get(&path);
        if found.status == 404 {
            return; // its Pod is gone meanwhile, and the status with it
        }
        let mut existing = found.json();
        existing["metadata"]["labels"] = labels;
        existing["status"] = status;
        existing["metadata"]["ownerReferences"] = owner;
        let response = client.json("PUT", &path, "application/json", &existing);
        assert!(
            matches!(response.status, 200 | 404),
            "updating {name}: {} {}",
            response.status,
            response.text()
        );
    }

    /// Every running Pod of `ns` that mounts `class` (re)mounts it with these versions, one
    /// after the other in name order, as the driver's periodic remount does; returns how
    /// many Pods did.
    pub fn publish(
        &self,
        fake: &FakeApi,
        ns: &str,
        class: &str,
        objects: &[(&str, &str)],
    ) -> usize {
        self.publish_where(fake, ns, class, objects, |_| true)
    }

    /// [`Driver::publish`] for the Pods whose name `remounts` accepts only.
    pub fn publish_where(
        &self,
        fake: &FakeApi,
        ns: &str,
        class: &str,
        objects: &[(&str, &str)],
        remounts: impl Fn(&str) -> bool,
    ) -> usize {
        let pods: Vec<Value> = fake
            .pods(ns)
            .into_iter()
            .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
            .filter(|p| remounts(p["metadata"]["name"].as_str().unwrap()))
            .filter(|p| {
                p["spec"]["volumes"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|v| v["csi"]["volumeAttributes"]["secretProviderClass"] == class)
            })
            .collect();
        for pod in &pods {
            self.write(pod, class, objects);
        }
        pods.len()
    }
}

fn rollouts(fake: &FakeApi, name: &str) -> usize {
    template_patches(fake, "deployments", NS, name)
}

fn adopted(fake: &FakeApi, name: &str) -> bool {
    hashes(fake, "deployments", NS, name, HASH).1.is_some()
}

/// Starts wavelet with `args` (and the test timings), and waits until `marker` and the
/// Deployments `adopt` are adopted.
fn start(fake: &FakeApi, args: &[&str], adopt: &[&str]) -> Wavelet {
    fake.apply(configmap(NS, "marker-config", &[("v", "1")]));
    fake.apply(workload(
        "Deployment",
        NS,
        "marker",
        opted_in(),
        mounts_configmap("marker-config"),
    ));
    let mut all = FAST.to_vec();
    all.extend_from_slice(args);
    let wavelet = Wavelet::start(fake, &all);
    eventually(fake, &wavelet, "adoptions", |f| {
        adopted(f, "marker") && adopt.iter().all(|name| adopted(f, name))
    });
    wavelet
}

/// The positive signal: the marker rolls, so every change made before it was processed.
fn barrier(fake: &FakeApi, wavelet: &Wavelet) {
    let before = rollouts(fake, "marker");
    fake.merge_patch(
        "configmaps",
        NS,
        "marker-config",
        json!({"data": {"v": format!("{}", before + 2)}}),
    );
    eventually(fake, wavelet, "the marker's rollout", |f| {
        rollouts(f, "marker") == before + 1
    });
}

/// The rollouts of each Deployment.
fn counts(fake: &FakeApi, names: &[&str]) -> Vec<(String, usize)> {
    names
        .iter()
        .map(|n| (n.to_string(), rollouts(fake, n)))
        .collect()
}

fn expect(names: &[(&str, usize)]) -> Vec<(String, usize)> {
    names.iter().map(|(n, c)| (n.to_string(), *c)).collect()
}

#[test]
fn a_rotation_rolls_each_workload_that_mounts_the_class_once_and_an_unrelated_class_rolls_nothing()
{
    let fake = FakeApi::start();
    install_csi_driver(&fake);
    let driver = Driver::new(&fake);
    fake.apply(secret_provider_class(NS, "vault", json!({})));
    fake.apply(secret_provider_class(NS, "unrelated", json!({})));
    for name in ["web", "api"] {
        fake.apply(deployment(name, opted_in(), mounts_class("vault", None)));
    }
    fake.apply(deployment(
        "other",
        opted_in(),
        mounts_class("unrelated", None),
    ));
    // A Deployment that is not opted in mounts the class too, with more Pods than web and
    // api together, which never remount (stuck): a workload counts its own Pods' versions.
    let mut legacy = deployment("legacy", json!({}), mounts_class("vault", None));
    legacy["spec"]["replicas"] = json!(5);
    fake.apply(legacy);
    assert_eq!(
        driver.publish(&fake, NS, "vault", &[("db-password", "1")]),
        9
    );
    assert_eq!(driver.publish(&fake, NS, "unrelated", &[("token", "1")]), 2);
    let all = ["web", "api", "other"];
    let wavelet = start(&fake, &[CSI], &all);
    assert_eq!(
        counts(&fake, &all),
        expect(&[("web", 0), ("api", 0), ("other", 0)])
    );

    // Vault rotates db-password: each Pod of web and api remounts in turn, and its status
    // says so.
    let remounting = |pod: &str| !pod.starts_with("legacy-");
    let rotated = [("db-password", "2")];
    let before_rollouts: Vec<String> = fake
        .pods(NS)
        .iter()
        .filter_map(|p| p["metadata"]["name"].as_str().map(String::from))
        .collect();
    assert_eq!(
        driver.publish_where(&fake, NS, "vault", &rotated, remounting),
        4
    );
    eventually(&fake, &wavelet, "web and api rolled", |f| {
        rollouts(f, "web") == 1 && rollouts(f, "api") == 1
    });
    // The rollouts' new Pods mount the new version (the old ones went, their statuses
    // with them), and the next remounts report it again. Under load the fake's
    // controllers finish the rollouts later, and collect a gone Pod's statuses after it:
    // wait until only the new Pods are left (none of those there before the rollouts: two
    // of web's old Pods are also two Pods), and only their statuses.
    eventually(
        &fake,
        &wavelet,
        "the rollouts' old Pods and their statuses gone",
        |f| {
            let pods = f.pods(NS);
            let live: Vec<&str> = pods
                .iter()
                .filter_map(|p| p["metadata"]["name"].as_str())
                .collect();
            let replaced = ["web-", "api-"].iter().all(|app| {
                !live
                    .iter()
                    .any(|pod| pod.starts_with(app) && before_rollouts.iter().any(|b| b == pod))
            });
            let orphaned = f
                .list(STATUSES, Some(NS))
                .iter()
                .any(|s| !live.contains(&s["status"]["podName"].as_str().unwrap_or("")));
            replaced
                && !orphaned
                && ["web", "api"].iter().all(|app| {
                    pods.iter()
                        .filter(|p| p["metadata"]["labels"]["app"] == *app)
                        .count()
                        == 2
                })
        },
    );
    driver.publish_where(&fake, NS, "vault", &rotated, remounting);
    barrier(&fake, &wavelet);
    driver.publish_where(&fake, NS, "vault", &rotated, remounting);
    barrier(&fake, &wavelet);
    assert_eq!(
        counts(&fake, &all),
        expect(&[("web", 1), ("api", 1), ("other", 0)]),
        "{}",
        wavelet.output()
    );
    let statuses = fake.list(STATUSES, Some(NS));
    let of = |prefix: &str| -> Vec<String> {
        statuses
            .iter()
            .filter(|s| s["status"]["podName"].as_str().unwrap().starts_with(prefix))
            .map(|s| {
                s["status"]["objects"][0]["version"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect()
    };
    assert_eq!(
        of("web-"),
        ["2", "2"],
        "the new Pods' statuses; the old ones' are gone"
    );
    assert_eq!(of("legacy-"), ["1"; 5]);

    // A pod status of a class that web and api do not mount: only other rolls.
    driver.publish(&fake, NS, "unrelated", &[("token", "2")]);
    eventually(&fake, &wavelet, "other rolled", |f| {
        rollouts(f, "other") == 1
    });
    barrier(&fake, &wavelet);
    assert_eq!(
        counts(&fake, &all),
        expect(&[("web", 1), ("api", 1), ("other", 1)]),
        "{}",
        wavelet.output()
    );
    let event = fake
        .events_for(NS, "web")
        .into_iter()
        .find(|e| e["reason"] == "ConfigChanged")
        .expect("a ConfigChanged Event");
    assert!(
        event["message"]
            .as_str()
            .unwrap()
            .contains("SecretProviderClass default/vault changed"),
        "{event}"
    );
}

#[test]
fn adoption_rolls_nothing_nor_do_the_first_pod_statuses_nor_turning_the_flag_on() {
    let fake = FakeApi::start();
    install_csi_driver(&fake);
    let driver = Driver::new(&fake);
    fake.apply(secret_provider_class(NS, "vault", json!({})));
    fake.apply(configmap(NS, "app-config", &[("color", "blue")]));
    // Mounted before wavelet starts.
    fake.apply(deployment("early", opted_in(), mounts_class("vault", None)));
    driver.publish(&fake, NS, "vault", &[("db-password", "1")]);
    // Its Pods have not mounted yet: not read yet, which is not missing.
    fake.apply(deployment(
        "late",
        opted_in(),
        mounts_class("vault", Some("app-config")),
    ));
    let pods_of_late: Vec<Value> = fake
        .pods(NS)
        .into_iter()
        .filter(|p| p["metadata"]["name"].as_str().unwrap().starts_with("late-"))
        .collect();
    let wavelet = start(&fake, &[CSI], &["early", "late"]);
    let adopted_late = hashes(&fake, "deployments", NS, "late", HASH).1;
    assert!(
        fake.events_for(NS, "late").is_empty(),
        "no Warning for a class not read yet"
    );

    // late's Pods mount it now: the new hash is recorded, nothing rolls.
    for pod in &pods_of_late {
        driver.write(pod, "vault", &[("db-password", "1")]);
    }
    eventually(
        &fake,
        &wavelet,
        "late's hash recorded with the class",
        |f| hashes(f, "deployments", NS, "late", HASH).1 != adopted_late,
    );
    barrier(&fake, &wavelet);
    assert_eq!(
        counts(&fake, &["early", "late"]),
        expect(&[("early", 0), ("late", 0)])
    );

    // A class not read yet holds nothing: a ConfigMap change still rolls.
    fake.apply(deployment(
        "pending",
        opted_in(),
        mounts_class("not-mounted-yet", Some("app-config")),
    ));
    eventually(&fake, &wavelet, "pending adopted", |f| {
        adopted(f, "pending")
    });
    fake.merge_patch(
        "configmaps",
        NS,
        "app-config",
        json!({"data": {"color": "green"}}),
    );
    eventually(&fake, &wavelet, "late and pending rolled", |f| {
        rollouts(f, "late") == 1 && rollouts(f, "pending") == 1
    });
    assert!(
        !wavelet.output().contains("ConfigMissing"),
        "{}",
        wavelet.output()
    );
    drop(wavelet);

    // Adopted without the flag, then restarted with it: the classes' versions are
    // recorded without a rollout, with no memory of the workload.
    let fresh = FakeApi::start();
    install_csi_driver(&fresh);
    let driver = Driver::new(&fresh);
    fresh.apply(secret_provider_class(NS, "vault", json!({})));
    fresh.apply(deployment("web", opted_in(), mounts_class("vault", None)));
    driver.publish(&fresh, NS, "vault", &[("db-password", "1")]);
    let without = start(&fresh, &[], &["web"]);
    let before = hashes(&fresh, "deployments", NS, "web", HASH).1;
    drop(without);
    let with = start(&fresh, &[CSI], &["web"]);
    eventually(&fresh, &with, "the classes recorded", |f| {
        hashes(f, "deployments", NS, "web", HASH).1 != before
    });
    barrier(&fresh, &with);
    assert_eq!(rollouts(&fresh, "web"), 0, "{}", with.output());
    // And the next rotation rolls it.
    driver.publish(&fresh, NS, "vault", &[("db-password", "2")]);
    eventually(&fresh, &with, "web rolled", |f| rollouts(f, "web") == 1);
}

#[test]
fn reloaders_annotations_select_classes_as_in_reloader_and_an_exclude_list_wins() {
    let fake = FakeApi::start();
    install_csi_driver(&fake);
    let driver = Driver::new(&fake);
    fake.apply(secret_provider_class(NS, "vault", json!({})));
    fake.apply(secret_provider_class(
        NS,
        "quiet",
        json!({"reloader.stakater.com/ignore": "true"}),
    ));
    fake.apply(configmap(NS, "app-config", &[("color", "blue")]));
    let uses = || mounts_class("vault", Some("app-config"));
    let cases = [
        // (name, annotations, pod spec, rolls on the rotation, rolls on the ConfigMap)
        (
            "typed",
            json!({"secretproviderclass.reloader.stakater.com/auto": "true"}),
            uses(),
            true,
            false,
        ),
        (
            "listed",
            json!({"secretproviderclass.reloader.stakater.com/reload": "vau.*"}),
            uses(),
            true,
            false,
        ),
        (
            "auto",
            json!({"reloader.stakater.com/auto": "true"}),
            uses(),
            true,
            true,
        ),
        (
            "cmonly",
            json!({"configmap.reloader.stakater.com/auto": "true"}),
            uses(),
            false,
            true,
        ),
        (
            "excluded",
            json!({"reloader.stakater.com/auto": "true",
            "secretproviderclasses.exclude.reloader.stakater.com/reload": "other, vault"}),
            uses(),
            false,
            true,
        ),
        // Named in a reload list without mounting it: it counts with every Pod's versions.
        (
            "named",
            json!({"secretproviderclass.reloader.stakater.com/reload": "vault"}),
            mounts_configmap("app-config"),
            true,
            false,
        ),
        // Reloader reads its keys from the pod template when the metadata has none.
        ("template", json!({}), uses(), true, false),
        (
            "ignored",
            json!({"reloader.stakater.com/auto": "true"}),
            mounts_class("quiet", Some("app-config")),
            false,
            true,
        ),
    ];
    for (name, annotations, spec, ..) in &cases {
        let mut object = deployment(name, annotations.clone(), spec.clone());
        if *name == "template" {
            object["spec"]["template"]["metadata"]["annotations"] =
                json!({"secretproviderclass.reloader.stakater.com/auto": "true"});
        }
        fake.apply(object);
    }
    driver.publish(&fake, NS, "vault", &[("db-password", "1")]);
    driver.publish(&fake, NS, "quiet", &[("token", "1")]);
    let names: Vec<&str> = cases.iter().map(|c| c.0).collect();
    let wavelet = start(&fake, &[CSI], &names);

    driver.publish(&fake, NS, "vault", &[("db-password", "2")]);
    driver.publish(&fake, NS, "quiet", &[("token", "2")]);
    let rotated: Vec<(&str, usize)> = cases.iter().map(|c| (c.0, usize::from(c.3))).collect();
    eventually(&fake, &wavelet, "the rotation's rollouts", |f| {
        counts(f, &names) == expect(&rotated)
    });
    driver.publish(&fake, NS, "vault", &[("db-password", "2")]);
    barrier(&fake, &wavelet);
    assert_eq!(
        counts(&fake, &names),
        expect(&rotated),
        "{}",
        wavelet.output()
    );

    fake.merge_patch(
        "configmaps",
        NS,
        "app-config",
        json!({"data": {"color": "green"}}),
    );
    let both: Vec<(&str, usize)> = cases
        .iter()
        .map(|c| (c.0, usize::from(c.3) + usize::from(c.4)))
        .collect();
    eventually(&fake, &wavelet, "the ConfigMap's rollouts", |f| {
        counts(f, &names) == expect(&both)
    });
    barrier(&fake, &wavelet);
    assert_eq!(counts(&fake, &names), expect(&both), "{}", wavelet.output());
}

#[test]
fn without_the_flag_nothing_of_the_driver_is_asked_for_and_classes_count_for_nobody() {
    let fake = FakeApi::start();
    install_csi_driver(&fake);
    let driver = Driver::new(&fake);
    fake.apply(secret_provider_class(NS, "vault", json!({})));
    fake.apply(deployment("web", opted_in(), mounts_class("vault", None)));
    fake.apply(deployment(
        "typed",
        json!({"secretproviderclass.reloader.stakater.com/auto": "true"}),
        mounts_class("vault", None),
    ));
    driver.publish(&fake, NS, "vault", &[("db-password", "1")]);
    let wavelet = start(&fake, &[], &["web"]);
    assert!(
        !adopted(&fake, "typed"),
        "Reloader's class keys opt in only with the flag"
    );
    driver.publish(&fake, NS, "vault", &[("db-password", "2")]);
    barrier(&fake, &wavelet);
    assert_eq!(rollouts(&fake, "web"), 0, "{}", wavelet.output());
    assert!(!adopted(&fake, "typed"));
    // Not even discovery: wavelet's own requests (the driver's are not in `accesses`).
    let asked: Vec<String> = fake
        .accesses()
        .iter()
        .filter(|a| a.group.contains("secrets-store") || a.resource.contains("secrets-store"))
        .map(|a| a.to_string())
        .collect();
    assert!(asked.is_empty(), "{asked:?}");
}

#[test]
fn delete_mode_replaces_the_pods_a_secret_provider_class_selects_once_per_rotation() {
    let fake = FakeApi::start();
    install_csi_driver(&fake);
    let driver = Driver::new(&fake);
    fake.apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "wavelet"}}));
    fake.apply(secret_provider_class(
        NS,
        "vault",
        json!({"wavelet.dev/pod-delete-match": "app=web", "wavelet.dev/pod-delete-strategy": "delete"}),
    ));
    fake.apply(deployment("web", json!({}), mounts_class("vault", None)));
    driver.publish(&fake, NS, "vault", &[("db-password", "1")]);
    let wavelet = start(&fake, &[CSI, "--state-namespace", "wavelet"], &[]);
    let state_key = "secretproviderclass.default.vault";
    eventually(&fake, &wavelet, "the class recorded at first sight", |f| {
        f.get("configmaps", "wavelet", "wavelet-state")
            .is_some_and(|s| !s["data"][state_key].is_null())
    });
    let web_pods = |f: &FakeApi| -> Vec<String> {
        f.pods(NS)
            .iter()
            .filter(|p| p["metadata"]["labels"]["app"] == "web")
            .map(|p| p["metadata"]["uid"].as_str().unwrap().to_string())
            .collect()
    };
    let before = web_pods(&fake);
    assert_eq!(before.len(), 2);
    assert!(pod_replacements(&fake).is_empty());

    driver.publish(&fake, NS, "vault", &[("db-password", "2")]);
    eventually(&fake, &wavelet, "web's Pods replaced", |f| {
        pod_replacements(f).len() == 2
    });
    // The new Pods mount version 2 and report it: nothing more is replaced.
    driver.publish(&fake, NS, "vault", &[("db-password", "2")]);
    barrier(&fake, &wavelet);
    wavelet.wait_for_log_after(
        0,
        "secretproviderclass default/vault",
        "delete mode: Replaced {",
    );
    assert_eq!(pod_replacements(&fake).len(), 2, "{}", wavelet.output());
    assert!(web_pods(&fake).iter().all(|uid| !before.contains(uid)));
    assert!(fake
        .events_for(NS, "vault")
        .iter()
        .any(|e| e["reason"] == "PodsReplaced"
            && e["involvedObject"]["apiVersion"] == GROUP_VERSION
            && e["involvedObject"]["kind"] == "SecretProviderClass"));
}

/// Each running Pod of `name` (not terminating) writes a pod status of `vault` with a
/// version of its own: `<prefix>-<pod name>` (Vault's dynamic secrets); returns how many.
fn per_pod_versions(fake: &FakeApi, driver: &Driver, name: &str, prefix: &str) -> usize {
    let pods: Vec<Value> = fake
        .pods(NS)
        .into_iter()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .filter(|p| p["metadata"]["labels"]["app"] == name)
        .collect();
    for pod in &pods {
        let version = format!("{prefix}-{}", pod["metadata"]["name"].as_str().unwrap());
        driver.write(pod, "vault", &[("database/creds/app", &version)]);
    }
    pods.len()
}

/// The running Pods of web (not terminating) without a pod status of `vault` yet (a
/// rollout's new Pods), and how many running Pods web has in all.
fn unreported(fake: &FakeApi) -> (Vec<Value>, usize) {
    let reported: Vec<String> = fake
        .list(STATUSES, Some(NS))
        .iter()
        .filter_map(|s| s["status"]["podName"].as_str().map(String::from))
        .collect();
    let running: Vec<Value> = fake
        .pods(NS)
        .into_iter()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .filter(|p| p["metadata"]["labels"]["app"] == "web")
        .collect();
    let all = running.len();
    let new = running
        .into_iter()
        .filter(|p| !reported.iter().any(|r| p["metadata"]["name"] == *r))
        .collect();
    (new, all)
}

/// Once the rollout's two new Pods run (and no other), each mounts `vault` with a version
/// of its own, `<prefix>-<pod name>`; returns how many did.
fn new_pods_mount(fake: &FakeApi, wavelet: &Wavelet, driver: &Driver, prefix: &str) -> usize {
    eventually(fake, wavelet, "the rollout's new Pods running", |f| {
        let (new, all) = unreported(f);
        new.len() == 2 && all == 2
    });
    let (pods, _) = unreported(fake);
    for pod in &pods {
        let version = format!("{prefix}-{}", pod["metadata"]["name"].as_str().unwrap());
        driver.write(pod, "vault", &[("database/creds/app", &version)]);
    }
    pods.len()
}

/// Regression (issue 33, item 1): with Vault's dynamic secrets every Pod reports a version
/// of its own, so no version had a majority and the tie went to the greatest digest: each
/// rollout brought Pods with new versions, a new greatest, and another rollout, forever.
/// Now the version held moves only on a rotation (every Pod running when it was held
/// reports a version it does not know): a rollout for a ConfigMap change rolls once, and
/// a real rotation (every Pod's credentials renewed) rolls once too.
#[test]
fn pods_with_versions_of_their_own_roll_once_per_change_never_in_a_loop() {
    let fake = FakeApi::start();
    install_csi_driver(&fake);
    let driver = Driver::new(&fake);
    fake.apply(secret_provider_class(NS, "vault", json!({})));
    fake.apply(configmap(NS, "web-config", &[("v", "1")]));
    fake.apply(deployment(
        "web",
        opted_in(),
        mounts_class("vault", Some("web-config")),
    ));
    assert_eq!(per_pod_versions(&fake, &driver, "web", "a"), 2);
    let wavelet = start(&fake, &[CSI], &["web"]);
    barrier(&fake, &wavelet);
    assert_eq!(rollouts(&fake, "web"), 0);

    // A ConfigMap change rolls web; its new Pods get credentials of their own.
    fake.merge_patch("configmaps", NS, "web-config", json!({"data": {"v": "2"}}));
    eventually(&fake, &wavelet, "web rolled for web-config", |f| {
        rollouts(f, "web") == 1
    });
    assert_eq!(new_pods_mount(&fake, &wavelet, &driver, "b"), 2);
    barrier(&fake, &wavelet);
    barrier(&fake, &wavelet);
    assert_eq!(rollouts(&fake, "web"), 1, "{}", wavelet.output());

    // A rotation: every running Pod's credentials renewed. One rollout, and its new Pods'
    // credentials roll nothing.
    per_pod_versions(&fake, &driver, "web", "rotated");
    eventually(&fake, &wavelet, "web rolled for the rotation", |f| {
        rollouts(f, "web") == 2
    });
    assert_eq!(new_pods_mount(&fake, &wavelet, &driver, "c"), 2);
    barrier(&fake, &wavelet);
    barrier(&fake, &wavelet);
    assert_eq!(rollouts(&fake, "web"), 2, "{}", wavelet.output());
}

/// Regression (issue 33, item 9): the prune of `wavelet-state` knew ConfigMaps and Secrets
/// only, so the delete-mode entry of a deleted SecretProviderClass stayed for ever. Now,
/// with `--resync 1s`, it leaves with a write a second after the class is gone, while the
/// entry of the class that exists stays.
#[test]
fn delete_mode_entries_of_deleted_secret_provider_classes_are_pruned() {
    let fake = FakeApi::start();
    install_csi_driver(&fake);
    let driver = Driver::new(&fake);
    fake.apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "wavelet"}}));
    let selecting = |selector: &str| json!({"wavelet.dev/pod-delete-match": selector, "wavelet.dev/pod-delete-strategy": "delete"});
    fake.apply(secret_provider_class(NS, "vault", selecting("app=web")));
    fake.apply(secret_provider_class(NS, "old", selecting("app=old")));
    fake.apply(deployment("web", json!({}), mounts_class("vault", None)));
    fake.apply(deployment("old", json!({}), mounts_class("old", None)));
    driver.publish(&fake, NS, "vault", &[("db-password", "0")]);
    driver.publish(&fake, NS, "old", &[("db-password", "0")]);
    let wavelet = start(
        &fake,
        &[CSI, "--state-namespace", "wavelet", "--resync", "1s"],
        &[],
    );
    let entry = |f: &FakeApi, class: &str| {
        f.get("configmaps", "wavelet", "wavelet-state")
            .is_some_and(|s| !s["data"][format!("secretproviderclass.{NS}.{class}")].is_null())
    };
    eventually(&fake, &wavelet, "both classes recorded", |f| {
        entry(f, "vault") && entry(f, "old")
    });
    fake.delete("secretproviderclasses", NS, "old");
    // Rotations of vault (each a replacement, each a state write) until one comes a
    // resync after another.
    let web_pods = |f: &FakeApi| -> Vec<String> {
        f.pods(NS)
            .iter()
            .filter(|p| p["metadata"]["labels"]["app"] == "web")
            .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
            .map(|p| p["metadata"]["uid"].as_str().unwrap().to_string())
            .collect()
    };
    for n in 1.. {
        let before = web_pods(&fake);
        driver.publish(&fake, NS, "vault", &[("db-password", &n.to_string())]);
        eventually(&fake, &wavelet, "web's Pods replaced", |f| {
            let now = web_pods(f);
            now.len() == 2 && now.iter().all(|uid| !before.contains(uid))
        });
        // The replacement's new Pods mount the version there is now.
        driver.publish(&fake, NS, "vault", &[("db-password", &n.to_string())]);
        if !entry(&fake, "old") {
            break;
        }
        assert!(n < 10, "never pruned:\n{}", wavelet.output());
        std::thread::sleep(std::time::Duration::from_millis(600));
    }
    assert!(entry(&fake, "vault"), "{}", wavelet.output());
    assert!(wavelet
        .output()
        .contains("dropping 1 entries of objects gone"));
}

fn run(fake: &FakeApi, args: &[&str]) -> (Option<i32>, String, String) {
    let Output {
        status,
        stdout,
        stderr,
    } = wavelet_command()
        .args(args)
        .args(["--server", &fake.url()])
        .env_clear()
        .output()
        .expect("running wavelet");
    (
        status.code(),
        String::from_utf8_lossy(&stdout).into_owned(),
        String::from_utf8_lossy(&stderr).into_owned(),
    )
}

#[test]
fn status_and_hash_count_the_classes_a_workload_mounts() {
    let fake = FakeApi::start();
    install_csi_driver(&fake);
    let driver = Driver::new(&fake);
    fake.apply(secret_provider_class(NS, "vault", json!({})));
    fake.apply(deployment("web", opted_in(), mounts_class("vault", None)));
    fake.apply(deployment(
        "pending",
        opted_in(),
        mounts_class("not-mounted-yet", None),
    ));
    driver.publish(
        &fake,
        NS,
        "vault",
        &[("db-password", "1"), ("api-key", "7")],
    );
    let (code, stdout, stderr) = run(&fake, &["hash", CSI, "-n", NS, "deployment/web"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stdout.contains(
            "secretproviderclass default/vault (mounted, 2 objects, as 2 Pods report them)"
        ),
        "{stdout}"
    );
    assert!(
        !stdout.contains("db-password"),
        "names and counts only: {stdout}"
    );
    let with_class = stdout.lines().next().unwrap().to_string();
    let (_, without, _) = run(&fake, &["hash", "-n", NS, "deployment/web"]);
    assert_ne!(
        without.lines().next().unwrap(),
        with_class,
        "the flag counts the class"
    );
    let (_, pending, _) = run(&fake, &["hash", CSI, "-n", NS, "deployment/pending"]);
    assert!(
        pending.contains("secretproviderclass default/not-mounted-yet (not read yet"),
        "{pending}"
    );

    // `run` writes the hash `hash` prints, and `status` agrees.
    let wavelet = start(&fake, &[CSI], &["web", "pending"]);
    assert_eq!(
        hashes(&fake, "deployments", NS, "web", HASH).1.as_deref(),
        Some(with_class.as_str())
    );
    drop(wavelet);
    let (code, stdout, stderr) = run(&fake, &["status", CSI, "-n", NS]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    let row = stdout.lines().find(|l| l.contains("default/web")).unwrap();
    assert!(
        row.contains("up to date") && row.split_whitespace().nth(5) == Some("1"),
        "{stdout}"
    );
}

#[test]
fn pod_statuses_deleted_while_the_watch_was_down_are_dropped_at_the_relist() {
    let fake = FakeApi::start();
    install_csi_driver(&fake);
    let driver = Driver::new(&fake);
    fake.apply(secret_provider_class(NS, "vault", json!({})));
    let mut web = deployment("web", opted_in(), mounts_class("vault", None));
    web["spec"]["replicas"] = json!(3);
    fake.apply(web);
    // Three Pods report version 1.
    let pods = fake.pods(NS);
    let web_pods: Vec<&Value> = pods
        .iter()
        .filter(|p| p["metadata"]["labels"]["app"] == "web")
        .collect();
    assert_eq!(web_pods.len(), 3);
    for pod in &web_pods {
        driver.write(pod, "vault", &[("db-password", "1")]);
    }
    let wavelet = start(&fake, &[CSI], &["web"]);
    barrier(&fake, &wavelet);
    assert_eq!(rollouts(&fake, "web"), 0);

    // The watch is down while one Pod remounts version 2 and the other two Pods' statuses
    // go; history is compacted past it, so wavelet relists: what the relist does not
    // return is gone, and every Pod left has rotated: web rolls for version 2 (kept, the
    // two stale statuses would hold version 1).
    fake.inject(crate::fake::Fault::Slow {
        method: "WATCH".into(),
        resource: STATUSES.into(),
        delay: std::time::Duration::from_millis(300),
    });
    fake.close_watches();
    driver.write(web_pods[0], "vault", &[("db-password", "2")]);
    for pod in &web_pods[1..] {
        let name = format!("{}-{NS}-vault", pod["metadata"]["name"].as_str().unwrap());
        assert!(fake.delete(STATUSES, NS, &name));
    }
    fake.compact();
    eventually(&fake, &wavelet, "web rolled for version 2", |f| {
        rollouts(f, "web") == 1
    });
    barrier(&fake, &wavelet);
    assert_eq!(rollouts(&fake, "web"), 1, "{}", wavelet.output());
}

/// A Pod that `owner` (a stored object) controls, named `name`, in phase `phase` (an
/// Evicted Pod: `Failed`, reason `Evicted`), mounting `class`: a stand-in for the Pods
/// of a controller the fake does not run (a DaemonSet's), or for one evicted.
fn owned_pod(fake: &FakeApi, owner: &Value, name: &str, phase: &str, class: &str) -> Value {
    let mut status = json!({"phase": phase});
    if phase == "Failed" {
        status["reason"] = json!("Evicted");
        status["message"] = json!("The node was low on resource: memory.");
    }
    fake.apply(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NS,
            "ownerReferences": [{"apiVersion": owner["apiVersion"], "kind": owner["kind"],
                "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"],
                "controller": true, "blockOwnerDeletion": true}]},
        "spec": mounts_class(class, None),
        "status": status,
    }))
}

/// Regression (issue 33, item 2): Evicted Pods kept until Pod GC kept their pod statuses
/// and their votes: after a rotation remounted web's 3 running Pods, its 4 Evicted ones
/// still reported the old version, and web never rolled. Only running Pods not
/// terminating vote now: the rotation rolls web once.
#[test]
fn evicted_pods_do_not_vote_a_rotation_of_the_running_ones_rolls_once() {
    let fake = FakeApi::start();
    install_csi_driver(&fake);
    let driver = Driver::new(&fake);
    fake.apply(secret_provider_class(NS, "vault", json!({})));
    let mut web = deployment("web", opted_in(), mounts_class("vault", None));
    web["spec"]["replicas"] = json!(3);
    fake.apply(web);
    let rs = fake
        .list("replicasets", Some(NS))
        .into_iter()
        .find(|rs| rs["metadata"]["name"].as_str().unwrap().starts_with("web-"))
        .expect("web's ReplicaSet");
    let rs_name = rs["metadata"]["name"].as_str().unwrap().to_string();
    // Shaped as the ReplicaSet's Pods are (generateName's alphabet).
    for suffix in ["bcdf2", "bcdf4", "bcdf5", "bcdf6"] {
        owned_pod(
            &fake,
            &rs,
            &format!("{rs_name}-{suffix}"),
            "Failed",
            "vault",
        );
    }
    assert_eq!(
        driver.publish(&fake, NS, "vault", &[("db-password", "1")]),
        7
    );
    let wavelet = start(&fake, &[CSI], &["web"]);

    // Vault rotates db-password; the 3 running Pods remount, the Evicted ones cannot.
    let running = |f: &FakeApi| -> Vec<String> {
        f.pods(NS)
            .into_iter()
            .filter(|p| p["metadata"]["labels"]["app"] == "web")
            .filter(|p| p["status"]["phase"] == "Running")
            .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
            .map(|p| p["metadata"]["name"].as_str().unwrap().to_string())
            .collect()
    };
    let now_running = running(&fake);
    let rotated = [("db-password", "2")];
    assert_eq!(
        driver.publish_where(&fake, NS, "vault", &rotated, |p| now_running
            .iter()
            .any(|r| r == p)),
        3
    );
    eventually(&fake, &wavelet, "web rolled for the rotation", |f| {
        rollouts(f, "web") == 1
    });
    // The rollout's new Pods mount the new version; nothing more rolls.
    eventually(&fake, &wavelet, "the rollout's new Pods running", |f| {
        let names = running(f);
        names.len() == 3 && names.iter().all(|n| !now_running.contains(n))
    });
    let new_running = running(&fake);
    driver.publish_where(&fake, NS, "vault", &rotated, |p| {
        new_running.iter().any(|r| r == p)
    });
    barrier(&fake, &wavelet);
    barrier(&fake, &wavelet);
    assert_eq!(rollouts(&fake, "web"), 1, "{}", wavelet.output());
}

/// Regression (issue 33, item 3): a Pod was taken for a workload's by its name alone, so
/// the Pods of DaemonSet `web-agent` (`web-agent-x2k9p`: shaped as Deployment web's
/// `web-<hash>-<random>`) voted for Deployment web: its rotation waited for them, and
/// theirs moved web. Now a Pod is a Deployment's through its ReplicaSet's owner reference,
/// a DaemonSet's or StatefulSet's through its own.
#[test]
fn a_daemonsets_pods_named_like_a_deployments_do_not_vote_for_it() {
    let fake = FakeApi::start();
    install_csi_driver(&fake);
    let driver = Driver::new(&fake);
    fake.apply(secret_provider_class(NS, "vault", json!({})));
    fake.apply(deployment("web", opted_in(), mounts_class("vault", None)));
    let agent = fake.apply(workload(
        "DaemonSet",
        NS,
        "web-agent",
        json!({}),
        mounts_class("vault", None),
    ));
    let agent_pods = ["web-agent-x2k9p", "web-agent-b7z2q", "web-agent-h4k2m"];
    for name in agent_pods {
        owned_pod(&fake, &agent, name, "Running", "vault");
    }
    assert_eq!(
        driver.publish(&fake, NS, "vault", &[("db-password", "1")]),
        5
    );
    let wavelet = start(&fake, &[CSI], &["web"]);

    // Vault rotates: web's two Pods remount first. web rolls without waiting for the
    // agent's Pods.
    let rotated = [("db-password", "2")];
    let of_web = |p: &str| !p.starts_with("web-agent-");
    assert_eq!(
        driver.publish_where(&fake, NS, "vault", &rotated, of_web),
        2
    );
    eventually(&fake, &wavelet, "web rolled for the rotation", |f| {
        rollouts(f, "web") == 1
    });
    eventually(&fake, &wavelet, "the rollout's new Pods running", |f| {
        let (new, all) = unreported(f);
        new.len() == 2 && all == 2
    });
    driver.publish_where(&fake, NS, "vault", &rotated, of_web);
    // The agent's Pods remount the next version, then another: web does not roll.
    for version in ["3", "4"] {
        let next = [("db-password", version)];
        assert_eq!(
            driver.publish_where(&fake, NS, "vault", &next, |p| p.starts_with("web-agent-")),
            3
        );
        barrier(&fake, &wavelet);
    }
    barrier(&fake, &wavelet);
    assert_eq!(rollouts(&fake, "web"), 1, "{}", wavelet.output());
}
