//! The slices of Kubernetes objects wavelet reads, deserialized straight from the wire.
//!
//! ConfigMap and Secret values are digested while they are parsed: a Secret value lives
//! only as long as one `String` inside the deserializer, never in wavelet's cache.

pub mod base64;
pub(crate) mod compact;
pub(crate) mod intern;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use sha2::{Digest as _, Sha256};

use crate::annotations::Annotations;

/// SHA-256 of one configuration value (decoded bytes for base64 fields).
pub type Digest = [u8; 32];

/// An API resource wavelet lists and watches.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Resource {
    /// API group; empty for the core group.
    pub group: String,
    pub version: String,
    /// Lowercase plural, as in the URL (`deployments`).
    pub plural: String,
    /// The object kind (`Deployment`).
    pub kind: String,
}

impl Resource {
    pub fn new(group: &str, version: &str, plural: &str, kind: &str) -> Resource {
        Resource {
            group: group.into(),
            version: version.into(),
            plural: plural.into(),
            kind: kind.into(),
        }
    }

    pub fn configmaps() -> Resource {
        Resource::new("", "v1", "configmaps", "ConfigMap")
    }

    pub fn secrets() -> Resource {
        Resource::new("", "v1", "secrets", "Secret")
    }

    pub fn pods() -> Resource {
        Resource::new("", "v1", "pods", "Pod")
    }

    pub fn events() -> Resource {
        Resource::new("", "v1", "events", "Event")
    }

    pub fn deployments() -> Resource {
        Resource::new("apps", "v1", "deployments", "Deployment")
    }

    pub fn replica_sets() -> Resource {
        Resource::new("apps", "v1", "replicasets", "ReplicaSet")
    }

    pub fn statefulsets() -> Resource {
        Resource::new("apps", "v1", "statefulsets", "StatefulSet")
    }

    pub fn daemonsets() -> Resource {
        Resource::new("apps", "v1", "daemonsets", "DaemonSet")
    }

    pub fn cronjobs() -> Resource {
        Resource::new("batch", "v1", "cronjobs", "CronJob")
    }

    pub fn jobs() -> Resource {
        Resource::new("batch", "v1", "jobs", "Job")
    }

    /// Argo Rollouts, watched when the API serves them.
    pub fn rollouts() -> Resource {
        Resource::new("argoproj.io", "v1alpha1", "rollouts", "Rollout")
    }

    pub fn namespaces() -> Resource {
        Resource::new("", "v1", "namespaces", "Namespace")
    }

    /// The Secrets Store CSI driver's `SecretProviderClass` (what a CSI volume mounts
    /// from Vault or a cloud secret store), watched as metadata.
    pub fn secret_provider_classes() -> Resource {
        Resource::new(
            CSI_GROUP,
            "v1",
            "secretproviderclasses",
            "SecretProviderClass",
        )
    }

    /// The driver's `SecretProviderClassPodStatus`: one per Pod and class, saying which
    /// version of each object the Pod has mounted.
    pub fn secret_provider_class_pod_statuses() -> Resource {
        Resource::new(
            CSI_GROUP,
            "v1",
            "secretproviderclasspodstatuses",
            "SecretProviderClassPodStatus",
        )
    }

    /// The workload kinds wavelet knows by name, in kubectl's spellings (`deployment`,
    /// `deploy`, `deployments.apps`, `sts`, `ds`, `cj`, `rollout`, ...); the one place
    /// that normalises a kind typed by a person.
    pub fn known_workload(kind: &str) -> Option<Resource> {
        let kind = kind.to_ascii_lowercase();
        let bare = kind
            .strip_suffix(".apps")
            .or_else(|| kind.strip_suffix(".batch"))
            .or_else(|| kind.strip_suffix(".argoproj.io"))
            .unwrap_or(&kind);
        Some(match bare {
            "deployment" | "deployments" | "deploy" => Resource::deployments(),
            "statefulset" | "statefulsets" | "sts" => Resource::statefulsets(),
            "daemonset" | "daemonsets" | "ds" => Resource::daemonsets(),
            "cronjob" | "cronjobs" | "cj" => Resource::cronjobs(),
            "rollout" | "rollouts" | "ro" => Resource::rollouts(),
            _ => return None,
        })
    }

    /// CronJobs keep their pod template in `spec.jobTemplate.spec.template`.
    pub fn is_cronjobs(&self) -> bool {
        self.group == "batch" && self.plural == "cronjobs"
    }

    /// Argo Rollouts (`argoproj.io` `rollouts`).
    pub fn is_argo_rollouts(&self) -> bool {
        self.group == "argoproj.io" && self.plural == "rollouts"
    }

    /// `apps/v1` or `v1`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// Built-in kinds accept strategic-merge patches; custom resources only merge patches.
    pub fn is_builtin(&self) -> bool {
        matches!(
            self.group.as_str(),
            "" | "apps" | "batch" | "policy" | "coordination.k8s.io"
        )
    }

    /// The group-version's discovery path (`/api/v1`, `/apis/apps/v1`), the prefix of every
    /// path of this resource.
    pub fn group_version_path(&self) -> String {
        if self.group.is_empty() {
            format!("/api/{}", self.version)
        } else {
            format!("/apis/{}/{}", self.group, self.version)
        }
    }

    /// Collection path, in one namespace or across all of them.
    pub fn collection_path(&self, namespace: Option<&str>) -> String {
        match namespace {
            Some(ns) => format!(
                "{}/namespaces/{}/{}",
                self.group_version_path(),
                ns,
                self.plural
            ),
            None => format!("{}/{}", self.group_version_path(), self.plural),
        }
    }

    pub fn object_path(&self, namespace: &str, name: &str) -> String {
        format!("{}/{}", self.collection_path(Some(namespace)), name)
    }
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            write!(f, "{}", self.plural)
        } else {
            write!(f, "{}.{}", self.plural, self.group)
        }
    }
}

/// The API group of the Secrets Store CSI driver's resources.
pub const CSI_GROUP: &str = "secrets-store.csi.x-k8s.io";

/// The kinds a pod template takes configuration from: ConfigMaps, Secrets, and the
/// SecretProviderClasses of the Secrets Store CSI driver (whose "data" is the version of
/// each object its Pods mounted, as their SecretProviderClassPodStatuses report it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ConfigKind {
    ConfigMap,
    Secret,
    SecretProviderClass,
}

impl ConfigKind {
    pub fn resource(self) -> Resource {
        match self {
            ConfigKind::ConfigMap => Resource::configmaps(),
            ConfigKind::Secret => Resource::secrets(),
            ConfigKind::SecretProviderClass => Resource::secret_provider_classes(),
        }
    }

    /// Lowercase name used in logs and in the hash's canonical form.
    pub fn as_str(self) -> &'static str {
        match self {
            ConfigKind::ConfigMap => "configmap",
            ConfigKind::Secret => "secret",
            ConfigKind::SecretProviderClass => "secretproviderclass",
        }
    }

    pub fn kind(self) -> &'static str {
        match self {
            ConfigKind::ConfigMap => "ConfigMap",
            ConfigKind::Secret => "Secret",
            ConfigKind::SecretProviderClass => "SecretProviderClass",
        }
    }
}

/// Identity of a ConfigMap or Secret: `configmap default/app-config`.
///
/// Names are shared strings, so the many maps that hold a key (the cache, the reverse
/// index, the queues) share one copy; namespaces are interned.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConfigKey {
    pub kind: ConfigKind,
    pub namespace: Arc<str>,
    pub name: Arc<str>,
}

impl ConfigKey {
    pub fn new(kind: ConfigKind, namespace: &str, name: &str) -> ConfigKey {
        ConfigKey {
            kind,
            namespace: crate::objects::intern::shared(namespace),
            name: Arc::from(name),
        }
    }
}

impl fmt::Display for ConfigKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}/{}", self.kind.as_str(), self.namespace, self.name)
    }
}

/// Identity of a workload: `deployment default/web`. The resource is shared, not copied.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct WorkloadKey {
    pub resource: Arc<Resource>,
    pub namespace: Arc<str>,
    pub name: Arc<str>,
}

impl WorkloadKey {
    pub fn new(resource: Arc<Resource>, namespace: &str, name: &str) -> WorkloadKey {
        WorkloadKey {
            resource,
            namespace: crate::objects::intern::shared(namespace),
            name: Arc::from(name),
        }
    }
}

impl fmt::Display for WorkloadKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {}/{}",
            self.resource.kind.to_lowercase(),
            self.namespace,
            self.name
        )
    }
}

/// The metadata of the objects wavelet caches (ConfigMaps, Secrets, workloads).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub namespace: String,
    #[serde(default)]
    pub uid: String,
    #[serde(default)]
    pub resource_version: String,
    /// Bumped by the API server on every spec change; a workload's rollout is judged only
    /// once its controller has observed it.
    #[serde(default)]
    pub generation: i64,
    #[serde(default)]
    pub annotations: Annotations,
    /// Read for one reason: older Wave versions left `wave.pusher.com/finalizer` on
    /// workloads (`wavelet migrate wave` removes it).
    #[serde(default, deserialize_with = "null_as_default")]
    pub finalizers: Vec<String>,
}

/// A Namespace: only its name matters (`--namespace-selector` filters on the server).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct NamespaceItem {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub status: NamespaceStatus,
}

/// What of a Namespace's status matters: whether it is being deleted.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct NamespaceStatus {
    /// `Active` or `Terminating`.
    #[serde(default)]
    pub phase: Option<String>,
}

impl NamespaceItem {
    /// Being deleted: its objects are going, and the API server refuses new ones there
    /// (Events included).
    pub fn is_terminating(&self) -> bool {
        self.status.phase.as_deref() == Some("Terminating")
    }
}

/// One key of a ConfigMap or Secret with the digest of its value.
pub type KeyDigest = (Box<str>, Digest);

/// A ConfigMap or Secret reduced to per-key digests.
#[derive(Debug, Clone, Default)]
pub struct ConfigObject {
    pub metadata: ObjectMeta,
    /// Per-key digests sorted by key (`data` and `binaryData` keys share one namespace: the
    /// API enforces it); `None` when only the metadata was read (`PartialObjectMetadata`).
    pub data: Option<Box<[KeyDigest]>>,
    /// A Secret of type `helm.sh/release.v1` (Helm's release record), read whole; `false`
    /// when only the metadata was read (which does not say the type).
    pub helm_release: bool,
}

/// The type of Helm's release records.
pub const HELM_RELEASE_TYPE: &str = "helm.sh/release.v1";

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ConfigMapWire {
    #[serde(default)]
    metadata: ObjectMeta,
    #[serde(default, deserialize_with = "digest_text_values")]
    data: Vec<KeyDigest>,
    #[serde(default, deserialize_with = "digest_base64_values")]
    binary_data: Vec<KeyDigest>,
}

/// A Secret, or its `PartialObjectMetadata` (`kind` tells: the items of a full list have no
/// kind, those of a metadata list do).
#[derive(Deserialize)]
struct SecretWire<'a> {
    /// Borrowed from the input (every body is parsed from a slice): no copy per event.
    #[serde(default, borrow)]
    kind: Option<std::borrow::Cow<'a, str>>,
    #[serde(default)]
    metadata: ObjectMeta,
    #[serde(default, deserialize_with = "digest_base64_values")]
    data: Vec<KeyDigest>,
    #[serde(default, borrow, rename = "type")]
    secret_type: Option<std::borrow::Cow<'a, str>>,
}

fn sorted(mut digests: Vec<KeyDigest>) -> Box<[KeyDigest]> {
    digests.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    digests.into_boxed_slice()
}

impl ConfigObject {
    /// Deserializes a ConfigMap (`data` digested as UTF-8 text, `binaryData` decoded).
    pub fn configmap<'de, D: Deserializer<'de>>(d: D) -> Result<ConfigObject, D::Error> {
        let wire = ConfigMapWire::deserialize(d)?;
        let mut digests = wire.data;
        digests.extend(wire.binary_data);
        Ok(ConfigObject {
            metadata: wire.metadata,
            data: Some(sorted(digests)),
            helm_release: false,
        })
    }

    /// Deserializes a Secret (`data` is base64; digests are of the decoded bytes), or only
    /// its metadata when the server sent a `PartialObjectMetadata`.
    pub fn secret<'de, D: Deserializer<'de>>(d: D) -> Result<ConfigObject, D::Error> {
        let wire = SecretWire::<'de>::deserialize(d)?;
        let metadata_only = wire.kind.as_deref() == Some("PartialObjectMetadata");
        Ok(ConfigObject {
            metadata: wire.metadata,
            data: (!metadata_only).then(|| sorted(wire.data)),
            helm_release: wire.secret_type.as_deref() == Some(HELM_RELEASE_TYPE),
        })
    }

    /// The digests, empty when only the metadata was read.
    pub fn digests(&self) -> &[KeyDigest] {
        self.data.as_deref().unwrap_or_default()
    }

    pub fn digest(&self, key: &str) -> Option<&Digest> {
        find_digest(self.digests(), key)
    }
}

/// The digest of `key` in digests sorted by key.
pub fn find_digest<'a>(digests: &'a [KeyDigest], key: &str) -> Option<&'a Digest> {
    digests
        .binary_search_by(|(k, _)| (**k).cmp(key))
        .ok()
        .map(|i| &digests[i].1)
}

fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// Visits a JSON object of string values, keeping only each value's digest.
struct DigestingVisitor {
    base64: bool,
}

impl<'de> Visitor<'de> for DigestingVisitor {
    type Value = Vec<KeyDigest>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a map of string values")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Vec::new())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            let value: ValueDigest = if self.base64 {
                map.next_value_seed(Base64DigestSeed)?
            } else {
                map.next_value_seed(TextDigestSeed)?
            };
            out.push((key.into_boxed_str(), value.0));
        }
        Ok(out)
    }
}

struct ValueDigest(Digest);

/// Digests a string value without keeping it.
struct TextDigestSeed;

impl<'de> de::DeserializeSeed<'de> for TextDigestSeed {
    type Value = ValueDigest;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<ValueDigest, D::Error> {
        d.deserialize_str(StrDigestVisitor { base64: false })
    }
}

/// Decodes a base64 string value and digests the bytes without keeping them.
struct Base64DigestSeed;

impl<'de> de::DeserializeSeed<'de> for Base64DigestSeed {
    type Value = ValueDigest;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<ValueDigest, D::Error> {
        d.deserialize_str(StrDigestVisitor { base64: true })
    }
}

struct StrDigestVisitor {
    base64: bool,
}

impl<'de> Visitor<'de> for StrDigestVisitor {
    type Value = ValueDigest;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string value")
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<ValueDigest, E> {
        if self.base64 {
            // The error names the position only: the value itself must never be echoed.
            let bytes =
                crate::objects::base64::decode(value.as_bytes()).map_err(|e| E::custom(e))?;
            Ok(ValueDigest(Sha256::digest(&bytes).into()))
        } else {
            Ok(ValueDigest(Sha256::digest(value.as_bytes()).into()))
        }
    }

    fn visit_unit<E: de::Error>(self) -> Result<ValueDigest, E> {
        self.visit_str("")
    }
}

fn digest_text_values<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<KeyDigest>, D::Error> {
    d.deserialize_any(DigestingVisitor { base64: false })
}

fn digest_base64_values<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<KeyDigest>, D::Error> {
    d.deserialize_any(DigestingVisitor { base64: true })
}

/// A ConfigMap as a list or watch decodes it.
pub struct ConfigMapItem(pub ConfigObject);

/// A Secret as a list, watch or GET decodes it: whole (digested) or metadata only. A
/// SecretProviderClass, watched as metadata, is decoded the same way (its sink reads only
/// the metadata, whatever the server sent).
pub struct SecretItem(pub ConfigObject);

impl<'de> Deserialize<'de> for ConfigMapItem {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        ConfigObject::configmap(d).map(ConfigMapItem)
    }
}

impl<'de> Deserialize<'de> for SecretItem {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        ConfigObject::secret(d).map(SecretItem)
    }
}

/// A workload: the fields of anything with a pod template at `spec.template`, or, for a
/// CronJob, at `spec.jobTemplate.spec.template`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct WorkloadObject {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: WorkloadSpec,
    /// What its controller reports of the rollout (`kubectl rollout status` reads it).
    #[serde(default)]
    pub status: WorkloadStatus,
}

impl WorkloadObject {
    /// The pod template: a CronJob's job template's, else `spec.template`.
    pub fn pod_template(&self) -> &PodTemplate {
        match &self.spec.job_template {
            Some(job) => &job.spec.template,
            None => &self.spec.template,
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadSpec {
    #[serde(default)]
    pub template: PodTemplate,
    /// CronJobs (`batch/v1`): the template of the Jobs it starts.
    #[serde(default)]
    pub job_template: Option<JobTemplate>,
    /// CronJobs: `spec.suspend`; a suspended CronJob starts no Job.
    #[serde(default, deserialize_with = "null_as_default")]
    pub suspend: bool,
    /// Deployments, StatefulSets, Argo Rollouts.
    #[serde(default)]
    pub replicas: Option<i64>,
    /// Deployments and Argo Rollouts: how long a rollout may make no progress.
    #[serde(default)]
    pub progress_deadline_seconds: Option<i64>,
    /// Deployments and Argo Rollouts paused by their owner: nothing rolls until resumed.
    #[serde(default, deserialize_with = "null_as_default")]
    pub paused: bool,
    /// StatefulSets and DaemonSets: `RollingUpdate` or `OnDelete`.
    #[serde(default)]
    pub update_strategy: Option<UpdateStrategy>,
}

/// `spec.updateStrategy` of a StatefulSet or DaemonSet.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpdateStrategy {
    #[serde(default, rename = "type")]
    pub type_: String,
    #[serde(default)]
    pub rolling_update: Option<RollingUpdate>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct RollingUpdate {
    /// StatefulSets: Pods with an ordinal below it keep the old template.
    #[serde(default)]
    pub partition: Option<i64>,
}

/// The status fields of Deployments, StatefulSets, DaemonSets and Argo Rollouts that say
/// whether a rollout finished (the union: each kind fills its own).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadStatus {
    /// A number, or (Argo Rollouts) a string holding one.
    #[serde(default, deserialize_with = "number_or_string")]
    pub observed_generation: Option<i64>,
    #[serde(default)]
    pub replicas: i64,
    #[serde(default)]
    pub updated_replicas: i64,
    #[serde(default)]
    pub available_replicas: i64,
    #[serde(default)]
    pub ready_replicas: i64,
    #[serde(default)]
    pub current_revision: String,
    #[serde(default)]
    pub update_revision: String,
    #[serde(default)]
    pub desired_number_scheduled: i64,
    #[serde(default)]
    pub updated_number_scheduled: i64,
    #[serde(default)]
    pub number_available: i64,
    /// Argo Rollouts: `Healthy`, `Progressing`, `Paused`, `Degraded`.
    #[serde(default)]
    pub phase: String,
    #[serde(default)]
    pub message: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub conditions: Vec<WorkloadCondition>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct WorkloadCondition {
    #[serde(default, rename = "type")]
    pub type_: String,
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    pub reason: String,
    #[serde(default)]
    pub message: String,
}

fn number_or_string<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Either {
        Number(i64),
        Text(String),
    }
    Ok(match Option::<Either>::deserialize(d)? {
        Some(Either::Number(n)) => Some(n),
        Some(Either::Text(t)) => t.parse().ok(),
        None => None,
    })
}

/// A CronJob's `spec.jobTemplate`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct JobTemplate {
    #[serde(default)]
    pub spec: JobSpec,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct JobSpec {
    #[serde(default)]
    pub template: PodTemplate,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct PodTemplate {
    #[serde(default)]
    pub metadata: TemplateMeta,
    #[serde(default)]
    pub spec: PodSpec,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct TemplateMeta {
    #[serde(default)]
    pub annotations: Annotations,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodSpec {
    #[serde(default, deserialize_with = "null_as_default")]
    pub volumes: Vec<Volume>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub init_containers: Vec<Container>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub containers: Vec<Container>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Volume {
    #[serde(default)]
    pub config_map: Option<ConfigMapVolume>,
    #[serde(default)]
    pub secret: Option<SecretVolume>,
    #[serde(default)]
    pub projected: Option<ProjectedVolume>,
    #[serde(default)]
    pub csi: Option<CsiVolume>,
}

/// A CSI volume; of its attributes only `secretProviderClass` is read (the Secrets Store
/// CSI driver's class to mount; Reloader, too, reads it whatever the driver's name).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CsiVolume {
    #[serde(default, deserialize_with = "null_as_default")]
    pub volume_attributes: CsiVolumeAttributes,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CsiVolumeAttributes {
    #[serde(default)]
    pub secret_provider_class: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct KeyToPath {
    #[serde(default)]
    pub key: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct ConfigMapVolume {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub items: Option<Vec<KeyToPath>>,
    #[serde(default)]
    pub optional: Option<bool>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SecretVolume {
    #[serde(default)]
    pub secret_name: String,
    #[serde(default)]
    pub items: Option<Vec<KeyToPath>>,
    #[serde(default)]
    pub optional: Option<bool>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct ProjectedVolume {
    #[serde(default, deserialize_with = "null_as_default")]
    pub sources: Vec<ProjectedSource>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProjectedSource {
    /// Projected sources name the object with `name` for both kinds.
    #[serde(default)]
    pub config_map: Option<ConfigMapVolume>,
    #[serde(default)]
    pub secret: Option<ConfigMapVolume>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Container {
    #[serde(default, deserialize_with = "null_as_default")]
    pub env: Vec<EnvVar>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub env_from: Vec<EnvFromSource>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EnvVar {
    /// Read for Reloader's `STAKATER_*` records only (`model::peers`).
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub value: Option<String>,
    #[serde(default)]
    pub value_from: Option<EnvVarSource>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EnvVarSource {
    #[serde(default)]
    pub config_map_key_ref: Option<KeySelector>,
    #[serde(default)]
    pub secret_key_ref: Option<KeySelector>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct KeySelector {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub key: String,
    #[serde(default)]
    pub optional: Option<bool>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EnvFromSource {
    #[serde(default)]
    pub config_map_ref: Option<NameRef>,
    #[serde(default)]
    pub secret_ref: Option<NameRef>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct NameRef {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub optional: Option<bool>,
}

/// A `SecretProviderClassPodStatus` as the Secrets Store CSI driver writes it (one per Pod
/// and class, named `<pod>-<namespace>-<class>`, its status replaced on every mount),
/// reduced to which Pod mounted which class and, per object, a digest of the version
/// mounted. The version text, the target path and the rest are never kept; there is no
/// secret content in a pod status, and nothing of one could reach the cache but these.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct PodStatusItem {
    /// Its uid tells one Pod's status from the next one's of the same name (a
    /// StatefulSet's Pod made anew): the driver creates it at the Pod's first mount of the
    /// class, and it goes with the Pod ([`PodStatusItem::incarnation`]).
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub status: MountStatus,
}

impl PodStatusItem {
    /// [`short_digest`] of its uid (0: not given): which Pod's status this is.
    pub fn incarnation(&self) -> u64 {
        if self.metadata.uid.is_empty() {
            0
        } else {
            short_digest(&self.metadata.uid)
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MountStatus {
    #[serde(default)]
    pub pod_name: String,
    #[serde(default)]
    pub secret_provider_class_name: String,
    /// `objects[].{id, version}`, as digests only ([`MountedObject`]), sorted.
    #[serde(default, deserialize_with = "digest_object_versions")]
    pub objects: Vec<MountedObject>,
}

/// One object a Pod mounted: [`short_digest`]s of its id (which tells the objects of one
/// class apart) and of its version. Ids are paths or ARNs of 20 to 100 characters, and
/// versions UUIDs or paths, kept for every Pod that mounts a class: 8 bytes say which one
/// is which (two versions of one object that agree on 64 bits of SHA-256 would make a
/// rotation go unseen: one in 2^64).
pub type MountedObject = (u64, u64);

/// The first 8 bytes of the SHA-256 of `text`, big-endian.
pub fn short_digest(text: &str) -> u64 {
    let digest: Digest = Sha256::digest(text.as_bytes()).into();
    u64::from_be_bytes(digest[..8].try_into().expect("8 bytes"))
}

/// `[{"id": ..., "version": ...}]` → [`MountedObject`]s sorted by id; a repeated id keeps
/// its last version (the driver writes each id once, from a map).
fn digest_object_versions<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<MountedObject>, D::Error> {
    #[derive(Deserialize)]
    struct Object<'a> {
        #[serde(default, borrow)]
        id: std::borrow::Cow<'a, str>,
        #[serde(default, borrow)]
        version: std::borrow::Cow<'a, str>,
    }
    let objects = Option::<Vec<Object<'de>>>::deserialize(d)?.unwrap_or_default();
    let mut out: Vec<MountedObject> = Vec::with_capacity(objects.len());
    for object in objects {
        let (id, version) = (short_digest(&object.id), short_digest(&object.version));
        match out.iter_mut().find(|(k, _)| *k == id) {
            Some(existing) => existing.1 = version,
            None => out.push((id, version)),
        }
    }
    out.sort_unstable_by_key(|(id, _)| *id);
    Ok(out)
}

/// A Pod or ReplicaSet as its metadata watch decodes it (`PartialObjectMetadata`), reduced
/// to who it is, its controller (the owner reference with `controller: true`: the one
/// object that made it) and whether its deletion has begun. Pod votes read it
/// (`model/owners.rs`, a layer above).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(from = "OwnedRaw")]
pub struct OwnedItem {
    pub metadata: ObjectMeta,
    /// The controller's (kind, name).
    pub controller: Option<(String, String)>,
    /// `deletionTimestamp` is set.
    pub terminating: bool,
}

#[derive(Deserialize)]
struct OwnedRaw {
    #[serde(default)]
    metadata: OwnedRawMeta,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct OwnedRawMeta {
    #[serde(default)]
    name: String,
    #[serde(default)]
    namespace: String,
    #[serde(default)]
    uid: String,
    #[serde(default)]
    resource_version: String,
    #[serde(default)]
    deletion_timestamp: Option<String>,
    #[serde(default, deserialize_with = "null_as_default")]
    owner_references: Vec<OwnerReference>,
}

#[derive(Deserialize)]
struct OwnerReference {
    #[serde(default)]
    kind: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    controller: bool,
}

impl From<OwnedRaw> for OwnedItem {
    fn from(raw: OwnedRaw) -> OwnedItem {
        let m = raw.metadata;
        OwnedItem {
            controller: m
                .owner_references
                .into_iter()
                .find(|o| o.controller)
                .map(|o| (o.kind, o.name)),
            terminating: m.deletion_timestamp.is_some(),
            metadata: ObjectMeta {
                name: m.name,
                namespace: m.namespace,
                uid: m.uid,
                resource_version: m.resource_version,
                ..ObjectMeta::default()
            },
        }
    }
}

/// A Pod, reduced to what delete mode decides on.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Pod {
    #[serde(default)]
    pub metadata: PodMeta,
    #[serde(default)]
    pub status: PodStatus,
}

/// The metadata of a Pod that delete mode reads.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodMeta {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub uid: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub creation_timestamp: Option<String>,
    #[serde(default)]
    pub deletion_timestamp: Option<String>,
    /// Which controller made it (delete mode's waves group Pods by workload).
    #[serde(default, deserialize_with = "null_as_default")]
    pub owner_references: Vec<PodOwner>,
}

/// One of a Pod's `ownerReferences`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct PodOwner {
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub name: String,
    /// The managing controller (at most one owner has it).
    #[serde(default)]
    pub controller: Option<bool>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct PodStatus {
    #[serde(default)]
    pub phase: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub conditions: Vec<PodCondition>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct PodCondition {
    #[serde(default, rename = "type")]
    pub type_: String,
    #[serde(default)]
    pub status: String,
}

impl Pod {
    /// The `Ready` condition is `True`.
    pub fn is_ready(&self) -> bool {
        self.status
            .conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
    }

    /// Deletion has begun (`deletionTimestamp` is set): the Pod is on its way out.
    pub fn is_terminating(&self) -> bool {
        self.metadata.deletion_timestamp.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configmap_values_become_digests_of_their_text() {
        let json = r#"{"metadata":{"name":"a","namespace":"ns","resourceVersion":"7"},
            "data":{"b":"two","a":"one"},"binaryData":{"bin":"AAE="}}"#;
        let obj = ConfigObject::configmap(&mut serde_json::Deserializer::from_str(json)).unwrap();
        assert_eq!(obj.metadata.resource_version, "7");
        let keys: Vec<&str> = obj.digests().iter().map(|(k, _)| &**k).collect();
        assert_eq!(keys, ["a", "b", "bin"]);
        assert_eq!(
            obj.digest("a").unwrap(),
            &<[u8; 32]>::from(Sha256::digest(b"one"))
        );
        assert_eq!(
            obj.digest("bin").unwrap(),
            &<[u8; 32]>::from(Sha256::digest([0u8, 1]))
        );
    }

    #[test]
    fn secret_values_are_digested_after_base64_decoding() {
        let json =
            r#"{"metadata":{"name":"s"},"data":{"password":"aHVudGVyMg=="},"type":"Opaque"}"#;
        let obj = ConfigObject::secret(&mut serde_json::Deserializer::from_str(json)).unwrap();
        assert_eq!(
            obj.digest("password").unwrap(),
            &<[u8; 32]>::from(Sha256::digest(b"hunter2"))
        );
    }

    #[test]
    fn a_partial_object_metadata_is_a_secret_without_data_and_a_full_item_has_data() {
        let partial = r#"{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1",
            "metadata":{"name":"s","namespace":"ns","resourceVersion":"3","managedFields":[{"manager":"m"}]}}"#;
        let obj = ConfigObject::secret(&mut serde_json::Deserializer::from_str(partial)).unwrap();
        assert!(obj.data.is_none());
        assert_eq!(obj.metadata.resource_version, "3");
        // Items of a whole SecretList carry no kind (a server that ignored the metadata
        // Accept header): read whole, an empty Secret included.
        let whole = r#"{"metadata":{"name":"s"},"type":"Opaque"}"#;
        let obj = ConfigObject::secret(&mut serde_json::Deserializer::from_str(whole)).unwrap();
        assert_eq!(obj.data.as_deref(), Some(&[][..]));
    }

    #[test]
    fn only_the_annotations_wavelet_reads_are_kept() {
        let json = r#"{"name":"w","annotations":{
            "kubectl.kubernetes.io/last-applied-configuration":"{\"data\":{\"password\":\"c2VjcmV0\"}}",
            "wavelet.dev/update-on-config-change":"true","other":{"not":"a string"}}}"#;
        let meta: ObjectMeta = serde_json::from_str(json).unwrap();
        assert_eq!(
            meta.annotations,
            Annotations::from_pairs([("wavelet.dev/update-on-config-change", "true")])
        );
    }

    #[test]
    fn invalid_base64_errors_without_echoing_the_value() {
        let json = r#"{"data":{"k":"c2VjcmV0!!"}}"#;
        let err = ConfigObject::secret(&mut serde_json::Deserializer::from_str(json)).unwrap_err();
        assert!(!err.to_string().contains("c2VjcmV0"), "{err}");
    }

    #[test]
    fn null_maps_and_lists_read_as_empty() {
        let json = r#"{"metadata":{"annotations":null},"data":null,"spec":null}"#;
        let obj = ConfigObject::configmap(&mut serde_json::Deserializer::from_str(json)).unwrap();
        assert!(obj.digests().is_empty() && obj.metadata.annotations == Annotations::default());
    }

    #[test]
    fn a_pod_status_keeps_the_pod_the_class_and_a_digest_of_each_version_only() {
        let json = r#"{"apiVersion":"secrets-store.csi.x-k8s.io/v1","kind":"SecretProviderClassPodStatus",
            "metadata":{"name":"web-1-ns-vault","namespace":"ns","resourceVersion":"9",
                "labels":{"internal.secrets-store.csi.k8s.io/node-name":"node-1"}},
            "status":{"mounted":true,"podName":"web-1","secretProviderClassName":"vault",
                "targetPath":"/var/lib/kubelet/pods/u/volumes/kubernetes.io~csi/v/mount",
                "objects":[{"id":"secret/db","version":"v7"},{"id":"secret/api","version":"v2"}]}}"#;
        let item: PodStatusItem = serde_json::from_str(json).unwrap();
        assert_eq!(item.metadata.resource_version, "9");
        assert_eq!(item.status.pod_name, "web-1");
        assert_eq!(item.status.secret_provider_class_name, "vault");
        let mut ids = [short_digest("secret/api"), short_digest("secret/db")];
        ids.sort();
        let got: Vec<u64> = item.status.objects.iter().map(|(id, _)| *id).collect();
        assert_eq!(got, ids);
        let db = item
            .status
            .objects
            .iter()
            .find(|(id, _)| *id == short_digest("secret/db"));
        assert_eq!(db.unwrap().1, short_digest("v7"));
        let full: [u8; 32] = Sha256::digest(b"v7").into();
        assert_eq!(short_digest("v7").to_be_bytes(), full[..8]);
        let text = format!("{item:?}");
        assert!(
            !text.contains("v7") && !text.contains("secret/db"),
            "{text}"
        );
        // A pod status not mounted yet has no objects.
        let empty: PodStatusItem =
            serde_json::from_str(r#"{"metadata":{"name":"p"},"status":{"objects":null}}"#).unwrap();
        assert!(empty.status.objects.is_empty());
    }

    #[test]
    fn a_csi_volume_names_its_secret_provider_class_in_its_attributes() {
        let json = r#"{"name":"secrets","csi":{"driver":"secrets-store.csi.k8s.io","readOnly":true,
            "volumeAttributes":{"secretProviderClass":"vault-db","other":"x"}}}"#;
        let volume: Volume = serde_json::from_str(json).unwrap();
        let csi = volume.csi.unwrap();
        assert_eq!(
            csi.volume_attributes.secret_provider_class.as_deref(),
            Some("vault-db")
        );
        let bare: Volume = serde_json::from_str(r#"{"name":"v","csi":{"driver":"d"}}"#).unwrap();
        assert_eq!(
            bare.csi.unwrap().volume_attributes.secret_provider_class,
            None
        );
    }

    #[test]
    fn paths_follow_the_api_layout() {
        assert_eq!(
            Resource::configmaps().collection_path(None),
            "/api/v1/configmaps"
        );
        assert_eq!(
            Resource::deployments().object_path("ns", "web"),
            "/apis/apps/v1/namespaces/ns/deployments/web"
        );
    }
}
