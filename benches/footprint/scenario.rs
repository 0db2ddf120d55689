//! Generated clusters: opted-in Deployments, the ConfigMaps and Secrets they reference,
//! unreferenced ones, and large Helm-release Secrets that nothing references; for the CSI
//! part, a SecretProviderClass per Deployment and the pod statuses of its Pods.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::fake::FakeApi;

/// Deployments per namespace (namespaces are `bench-000`, `bench-001`, ...).
const DEPLOYMENTS_PER_NAMESPACE: usize = 100;
/// The key of every generated ConfigMap.
pub const CONFIGMAP_KEY: &str = "app.properties";
/// The key of every generated Secret.
pub const SECRET_KEY: &str = "credentials";

/// The shape of one generated cluster. Deployment `d` references ConfigMaps
/// `d * configmaps_per_deployment ..` and Secrets `d * secrets_per_deployment ..`; the
/// ConfigMaps and Secrets past those are referenced by nothing.
#[derive(Clone, Debug)]
pub struct Cluster {
    pub deployments: usize,
    pub configmaps_per_deployment: usize,
    pub secrets_per_deployment: usize,
    pub configmaps: usize,
    pub secrets: usize,
    /// Bytes of each ConfigMap value, and of each Secret value as base64 on the wire.
    pub object_size: usize,
    pub helm_secrets: usize,
    pub helm_secret_size: usize,
    /// The Secrets Store CSI driver: `Some(pods)`: every Deployment also mounts a
    /// SecretProviderClass of its own (`spc-<d>`, two objects), and `pods` pod statuses
    /// per Deployment report what its Pods mounted (wavelet runs with
    /// `--enable-csi-integration`). `None`: no CSI at all.
    pub csi_pods_per_deployment: Option<usize>,
}

/// Where one object lives.
#[derive(Clone, Debug)]
pub struct ObjectRef {
    pub namespace: String,
    pub name: String,
}

impl Cluster {
    /// SPEC §6: 1,000 opted-in Deployments (two ConfigMaps and one Secret each), 2,000
    /// ConfigMaps and 5,000 Secrets of ~4 KiB, and 500 Helm-release Secrets of 256 KiB.
    pub fn spec(scale: f64) -> Cluster {
        Cluster {
            deployments: scaled(1_000, scale),
            configmaps_per_deployment: 2,
            secrets_per_deployment: 1,
            configmaps: scaled(2_000, scale),
            secrets: scaled(5_000, scale),
            object_size: 4 * 1024,
            helm_secrets: scaled(500, scale),
            helm_secret_size: 256 * 1024,
            csi_pods_per_deployment: None,
        }
    }

    /// [`Cluster::spec`] whose Deployments mount a SecretProviderClass each, with `pods`
    /// pod statuses per Deployment (0: the classes, no status yet).
    pub fn spec_with_csi(scale: f64, pods: usize) -> Cluster {
        Cluster {
            csi_pods_per_deployment: Some(pods),
            ..Cluster::spec(scale)
        }
    }

    /// Pod statuses of the cluster.
    pub fn pod_statuses(&self) -> usize {
        self.deployments * self.csi_pods_per_deployment.unwrap_or(0)
    }

    /// A scaling cell: `objects` ConfigMaps+Secrets (half each) of `object_size`, and one
    /// Deployment per 10 objects referencing one ConfigMap and one Secret.
    pub fn scaling(objects: usize, object_size: usize) -> Cluster {
        Cluster {
            deployments: objects / 10,
            configmaps_per_deployment: 1,
            secrets_per_deployment: 1,
            configmaps: objects / 2,
            secrets: objects - objects / 2,
            object_size,
            helm_secrets: 0,
            helm_secret_size: 0,
            csi_pods_per_deployment: None,
        }
    }

    /// Nothing but the namespaces every cluster has: wavelet's baseline.
    pub fn empty() -> Cluster {
        Cluster::scaling(0, 0)
    }

    /// ConfigMaps and Secrets, Helm releases included.
    pub fn config_objects(&self) -> usize {
        self.configmaps + self.secrets + self.helm_secrets
    }

    /// Bytes of ConfigMap and Secret data the API server holds.
    pub fn config_bytes(&self) -> usize {
        (self.configmaps + self.secrets) * self.object_size
            + self.helm_secrets * self.helm_secret_size
    }

    pub fn namespaces(&self) -> usize {
        self.deployments.div_ceil(DEPLOYMENTS_PER_NAMESPACE).max(1)
    }

    fn namespace(&self, deployment: usize) -> String {
        format!("bench-{:03}", deployment % self.namespaces())
    }

    pub fn deployment(&self, d: usize) -> ObjectRef {
        ObjectRef {
            namespace: self.namespace(d),
            name: format!("app-{d}"),
        }
    }

    /// The first ConfigMap of Deployment `d`, referenced by it alone.
    pub fn configmap_of(&self, d: usize) -> ObjectRef {
        self.configmap(d * self.configmaps_per_deployment)
    }

    /// The first Secret of Deployment `d`, referenced by it alone.
    pub fn secret_of(&self, d: usize) -> ObjectRef {
        self.secret(d * self.secrets_per_deployment)
    }

    fn configmap(&self, i: usize) -> ObjectRef {
        ObjectRef {
            namespace: self.namespace(i / self.configmaps_per_deployment.max(1)),
            name: format!("cm-{i}"),
        }
    }

    fn secret(&self, i: usize) -> ObjectRef {
        ObjectRef {
            namespace: self.namespace(i / self.secrets_per_deployment.max(1)),
            name: format!("secret-{i}"),
        }
    }

    /// Loads the cluster into the fake and returns how long that took. The fake's watch
    /// history is dropped afterwards, as if the API server had been restarted on this
    /// data: it holds no copy of the load, and watches from now on are unaffected.
    pub fn load(&self, fake: &FakeApi) -> Duration {
        let started = Instant::now();
        fake.apply_all((0..self.configmaps).map(|i| self.configmap_object(i)));
        fake.apply_all((0..self.secrets).map(|i| self.secret_object(i)));
        fake.apply_all((0..self.helm_secrets).map(|h| self.helm_secret_object(h)));
        if self.csi_pods_per_deployment.is_some() {
            for crd in [
                "secretproviderclasses.yaml",
                "secretproviderclasspodstatuses.yaml",
            ] {
                fake.install_crd(
                    &std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                        .join("../shared/third-party/secrets-store-csi-driver-v1.6.0")
                        .join(crd),
                );
            }
            fake.apply_all((0..self.deployments).map(|d| self.class_object(d)));
        }
        fake.apply_all((0..self.deployments).map(|d| self.deployment_object(d)));
        let pods = self.csi_pods_per_deployment.unwrap_or(0);
        fake.apply_all(
            (0..self.deployments)
                .flat_map(|d| (0..pods).map(move |p| self.pod_status_object(d, p))),
        );
        fake.compact();
        started.elapsed()
    }

    /// Deployment `d`'s SecretProviderClass, for Vault, with two objects.
    fn class_object(&self, d: usize) -> Value {
        let at = self.deployment(d);
        json!({
            "apiVersion": "secrets-store.csi.x-k8s.io/v1", "kind": "SecretProviderClass",
            "metadata": {"name": format!("spc-{d}"), "namespace": at.namespace},
            "spec": {"provider": "vault", "parameters": {
                "vaultAddress": "https://vault.vault:8200", "roleName": at.name,
                "objects": format!("- objectName: db-password\n  secretPath: secret/data/{}/db\n  secretKey: password\n- objectName: api-key\n  secretPath: secret/data/{}/api\n  secretKey: key\n", at.name, at.name)}}
        })
    }

    /// The pod status the driver writes for Pod `p` of Deployment `d` (named as its
    /// ReplicaSet names its Pods): both objects at a version of their own.
    fn pod_status_object(&self, d: usize, p: usize) -> Value {
        let at = self.deployment(d);
        let pod = format!(
            "{}-{}-{}",
            at.name,
            "7d9f8b6c5d",
            generated_suffix(d * 32 + p)
        );
        let version = |object: usize| format!("{:08x}-4f1c-4b7e-9a2d-{:012x}", d, d * 2 + object);
        json!({
            "apiVersion": "secrets-store.csi.x-k8s.io/v1", "kind": "SecretProviderClassPodStatus",
            "metadata": {"name": format!("{pod}-{}-spc-{d}", at.namespace), "namespace": at.namespace,
                "labels": {"internal.secrets-store.csi.k8s.io/node-name": format!("node-{}", d % 50)},
                "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod,
                    "uid": format!("{:08x}-0000-4000-8000-{:012x}", d, p)}]},
            "status": {"podName": pod, "secretProviderClassName": format!("spc-{d}"), "mounted": true,
                "targetPath": format!("/var/lib/kubelet/pods/{:08x}-0000-4000-8000-{:012x}/volumes/kubernetes.io~csi/secrets/mount", d, p),
                "objects": [
                    {"id": format!("secret/data/{}/api", at.name), "version": version(0)},
                    {"id": format!("secret/data/{}/db", at.name), "version": version(1)}]}
        })
    }

    /// Every object of the cluster, in the order they are created: ConfigMaps, Secrets,
    /// Helm-release Secrets, then the Deployments that reference them.
    pub fn objects(&self) -> impl Iterator<Item = Value> + '_ {
        (0..self.configmaps)
            .map(|i| self.configmap_object(i))
            .chain((0..self.secrets).map(|i| self.secret_object(i)))
            .chain((0..self.helm_secrets).map(|h| self.helm_secret_object(h)))
            .chain((0..self.deployments).map(|d| self.deployment_object(d)))
    }

    /// The namespaces the objects live in.
    pub fn namespace_names(&self) -> Vec<String> {
        (0..self.namespaces()).map(|n| self.namespace(n)).collect()
    }

    fn configmap_object(&self, i: usize) -> Value {
        let at = self.configmap(i);
        json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": at.name, "namespace": at.namespace},
            "data": {CONFIGMAP_KEY: text_of_size(i, self.object_size)}
        })
    }

    fn secret_object(&self, i: usize) -> Value {
        let at = self.secret(i);
        json!({
            "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": at.name, "namespace": at.namespace},
            "data": {SECRET_KEY: secret_value(i, self.object_size)}
        })
    }

    /// What `helm install` leaves behind: one Secret per release revision.
    fn helm_secret_object(&self, h: usize) -> Value {
        let release = format!("release-{h}");
        json!({
            "apiVersion": "v1", "kind": "Secret", "type": "helm.sh/release.v1",
            "metadata": {
                "name": format!("sh.helm.release.v1.{release}.v1"),
                "namespace": self.namespace(h),
                "labels": {"owner": "helm", "name": release, "status": "deployed", "version": "1"}
            },
            "data": {"release": secret_value(h, self.helm_secret_size)}
        })
    }

    /// An opted-in Deployment (no replicas: wavelet never looks at Pods in hash mode)
    /// whose first ConfigMap is a volume, the others `envFrom`, first Secret an env
    /// `secretKeyRef`, the others volumes.
    fn deployment_object(&self, d: usize) -> Value {
        let at = self.deployment(d);
        let mut volumes = Vec::new();
        let mut env_from = Vec::new();
        let mut env = Vec::new();
        for c in 0..self.configmaps_per_deployment {
            let name = self.configmap(d * self.configmaps_per_deployment + c).name;
            match c {
                0 => volumes.push(json!({"name": "config", "configMap": {"name": name}})),
                _ => env_from.push(json!({"configMapRef": {"name": name}})),
            }
        }
        for s in 0..self.secrets_per_deployment {
            let name = self.secret(d * self.secrets_per_deployment + s).name;
            match s {
                0 => env.push(json!({"name": "CREDENTIALS",
                    "valueFrom": {"secretKeyRef": {"name": name, "key": SECRET_KEY}}})),
                _ => volumes
                    .push(json!({"name": format!("secret-{s}"), "secret": {"secretName": name}})),
            }
        }
        let mut mounts = Vec::new();
        if self.csi_pods_per_deployment.is_some() {
            volumes.push(json!({"name": "secrets", "csi": {"driver": "secrets-store.csi.k8s.io",
                "readOnly": true, "volumeAttributes": {"secretProviderClass": format!("spc-{d}")}}}));
            mounts.push(json!({"name": "secrets", "mountPath": "/mnt/secrets", "readOnly": true}));
        }
        let labels = json!({"app": at.name});
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": at.name, "namespace": at.namespace,
                         "annotations": {"wavelet.dev/update-on-config-change": "true"}},
            "spec": {"replicas": 0, "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels},
                    "spec": {"volumes": volumes, "containers": [{"name": "app", "image": "nginx:1.27",
                        "envFrom": env_from, "env": env, "volumeMounts": mounts}]}}}
        })
    }
}

/// What one short-lived namespace holds in the churn step (a preview environment): an
/// opted-in Deployment `app` and the Secret `creds` it reads a key of, of `size` bytes.
pub fn churn_namespace(namespace: &str, size: usize) -> [Value; 2] {
    let labels = json!({"app": "app"});
    [
        json!({
            "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": "creds", "namespace": namespace},
            "data": {SECRET_KEY: secret_value(namespace.len(), size)}
        }),
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "app", "namespace": namespace,
                         "annotations": {"wavelet.dev/update-on-config-change": "true"}},
            "spec": {"replicas": 0, "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels},
                    "spec": {"containers": [{"name": "app", "image": "nginx:1.27",
                        "env": [{"name": "CREDENTIALS",
                            "valueFrom": {"secretKeyRef": {"name": "creds", "key": SECRET_KEY}}}]}]}}}
        }),
    ]
}

/// Five characters of the API server's `generateName` alphabet, different for every `n`.
fn generated_suffix(n: usize) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    (0..5)
        .map(|i| ALPHABET[(n / ALPHABET.len().pow(i)) % ALPHABET.len()] as char)
        .collect()
}

fn scaled(count: usize, scale: f64) -> usize {
    ((count as f64 * scale).round() as usize).max(1)
}

/// `size` bytes of text, different for every `seed`.
pub fn text_of_size(seed: usize, size: usize) -> String {
    let mut text = format!("{seed:08}-");
    while text.len() < size {
        text.push_str("abcdefghijklmnopqrstuvwxyz0123456789");
    }
    text.truncate(size);
    text
}

/// A Secret value that is `size` bytes as base64 (three quarters of that in raw bytes).
pub fn secret_value(seed: usize, size: usize) -> String {
    crate::fake::base64::encode_standard(text_of_size(seed, size / 4 * 3).as_bytes())
}
