//! What a workload is to wavelet: whether it opted in (and through whose keys), the
//! ConfigMaps and Secrets it references that count, the hashes it carries, and how a
//! rollout of it is written ([`Style`]). Built from the workload object alone; the cache
//! keeps one per opted-in workload.

use crate::annotations::{self, Annotations, Flavor};
use crate::config::Policy;
use crate::model::optin::{self, Counting};
use crate::model::peers::{self, PeerRecords};
use crate::model::recorded_basis::Basis;
use crate::model::references::{self, Reference};
use crate::model::rollout_status::RolloutStatus;
use crate::objects::compact::{ResourceVersion, Uid};
use crate::objects::{ConfigKey, Resource, WorkloadObject};

/// An opted-in workload (or one with wavelet's annotations left to clean up).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkloadEntry {
    pub uid: Uid,
    pub resource_version: ResourceVersion,
    /// `None`: opted out, kept only until wavelet's metadata annotations are removed.
    pub flavor: Option<Flavor>,
    pub references: Box<[Reference]>,
    /// The hash wavelet last recorded ([`WorkloadEntry::recorded_hash`]).
    recorded: Option<Box<str>>,
    /// `wavelet.dev/config-basis` on the metadata: what the recorded hash was computed
    /// under; `None` also when it does not read as one.
    pub basis: Option<Basis>,
    /// wavelet/Wave hash keys present on the metadata (for opt-out clean-up).
    pub metadata_hash_keys: MetadataKeys,
    /// What a rollout of this workload writes.
    pub style: Style,
    /// What counts besides the references (reload lists, search, exclusions, pause).
    pub counting: Counting,
    /// Whether its rollout finished, as `kubectl rollout status` judges it.
    pub rollout: RolloutStatus,
    /// Its own safe fan-out annotations ([`WorkloadEntry::gates`]); `None` for the many
    /// workloads without any (16 bytes less each, and a smaller allocation class).
    gates: Option<Box<Gates>>,
    /// What Wave or Reloader recorded of what its Pods run, while wavelet has recorded no
    /// hash on its metadata yet (a take-over); `None` otherwise or when there is none.
    pub peers: Option<Box<PeerRecords>>,
}

/// The fan-out annotations of a workload or a Namespace (book: Rolling a shared change
/// safely); the window text is parsed where it is used, so a bad one is a Warning there.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Gates {
    /// `wavelet.dev/canary: "true"` (workloads only).
    pub canary: bool,
    /// `wavelet.dev/pause: "true"`.
    pub pause: bool,
    /// `wavelet.dev/restart-window`.
    pub window: Option<Box<str>>,
    /// `wavelet.dev/first-wave-of` (workloads only, written by wavelet): the changes whose
    /// first wave its last rollout was.
    pub first_wave_of: Option<Box<str>>,
}

impl Gates {
    pub fn from_annotations(annotations: &Annotations) -> Gates {
        Gates {
            canary: annotations.get(annotations::WAVELET_CANARY) == Some("true"),
            pause: annotations.get(annotations::WAVELET_PAUSE) == Some("true"),
            window: annotations
                .get(annotations::WAVELET_RESTART_WINDOW)
                .map(Box::from),
            first_wave_of: annotations
                .get(annotations::WAVELET_FIRST_WAVE_OF)
                .map(Box::from),
        }
    }

    pub fn is_empty(&self) -> bool {
        *self == Gates::default()
    }
}

impl WorkloadEntry {
    /// Its own safe fan-out annotations (all unset when it has none).
    pub fn gates(&self) -> &Gates {
        static NONE: Gates = Gates {
            canary: false,
            pause: false,
            window: None,
            first_wave_of: None,
        };
        self.gates.as_deref().unwrap_or(&NONE)
    }

    /// The entry to cache for a workload, or `None` when wavelet has nothing to do with it.
    pub fn from_object(
        resource: &Resource,
        obj: &WorkloadObject,
        policy: &Policy,
    ) -> Option<WorkloadEntry> {
        let meta = &obj.metadata;
        let opted = optin::opt_in(
            &meta.annotations,
            &obj.pod_template().metadata.annotations,
            policy,
        );
        let flavor = opted.as_ref().map(|(flavor, _)| *flavor);
        let metadata_hash_keys = MetadataKeys::of(&meta.annotations);
        if flavor.is_none() && metadata_hash_keys.is_empty() {
            return None;
        }
        let hash_key = flavor.map(Flavor::hash_key);
        let lookup = |map: &Annotations| hash_key.and_then(|k| map.get(k)).map(Box::from);
        let peers = (flavor.is_some() && lookup(&meta.annotations).is_none())
            .then(|| peers::records(obj, flavor == Some(Flavor::Wave)))
            .filter(|records| !records.is_empty())
            .map(Box::new);
        Some(WorkloadEntry {
            uid: Uid::new(&meta.uid),
            resource_version: ResourceVersion::new(&meta.resource_version),
            references: match &opted {
                Some((_, counting)) => references::references(obj)
                    .into_iter()
                    .filter(|r| counting.counts_reference(r.config.kind, &r.config.name, policy))
                    .collect(),
                None => Box::default(),
            },
            recorded: lookup(&meta.annotations)
                .or_else(|| lookup(&obj.pod_template().metadata.annotations)),
            basis: meta
                .annotations
                .get(annotations::WAVELET_BASIS)
                .and_then(Basis::parse),
            flavor,
            metadata_hash_keys,
            style: Style::of(
                resource,
                &meta.annotations,
                obj.spec.suspend,
                flavor == Some(Flavor::Reloader)
                    || annotations::opted_in_by_reloader(&meta.annotations),
            ),
            counting: opted.map(|(_, counting)| counting).unwrap_or_default(),
            rollout: RolloutStatus::of(resource, obj),
            gates: Some(Gates::from_annotations(&meta.annotations))
                .filter(|gates| !gates.is_empty())
                .map(Box::new),
            peers,
        })
    }

    /// Whether this workload counts `key` by a reload list (by name, referenced or not).
    pub fn counts_by_name(&self, key: &ConfigKey) -> bool {
        !self.counting.is_excluded(key.kind, &key.name)
            && self
                .counting
                .patterns()
                .iter()
                .any(|p| p.matches(key.kind, &key.name))
    }

    /// The hash wavelet last recorded: the metadata's (written with every rollout, and
    /// alone on adoption or when only what counts changed), else the template's (a
    /// workload Wave rolled, which wrote the template only).
    pub fn recorded_hash(&self) -> Option<&str> {
        self.recorded.as_deref()
    }
}

/// Which of the annotations wavelet and Wave write on a workload's metadata it carries
/// (hashes, basis, first-wave mark): what an opt-out removes. A bit each.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub struct MetadataKeys(u8);

impl MetadataKeys {
    const KEYS: [&'static str; 4] = [
        annotations::WAVELET_HASH,
        annotations::WAVE_HASH,
        annotations::WAVELET_BASIS,
        annotations::WAVELET_FIRST_WAVE_OF,
    ];

    fn of(annotations: &Annotations) -> MetadataKeys {
        let bits = Self::KEYS
            .iter()
            .enumerate()
            .filter(|(_, key)| annotations.contains_key(key))
            .fold(0, |bits, (i, _)| bits | 1 << i);
        MetadataKeys(bits)
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    pub fn iter(self) -> impl Iterator<Item = &'static str> {
        Self::KEYS
            .into_iter()
            .enumerate()
            .filter(move |(i, _)| self.0 & 1 << i != 0)
            .map(|(_, key)| key)
    }
}

impl std::fmt::Debug for MetadataKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// How one workload is rolled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// The hash goes onto `spec.template`; the workload's controller rolls the Pods.
    Template,
    /// The hash goes onto `spec.jobTemplate.spec.template`: the next Job runs with it.
    /// `run_now`: also start one Job from the job template at once.
    CronJob { run_now: bool },
    /// Argo Rollouts' restart strategy: `spec.restartAt` is set to now and the hash is
    /// kept on the metadata only (the template is not touched).
    RestartAt,
}

impl Style {
    /// The style of a workload of `resource` with these metadata annotations.
    /// `opted_in_by_reloader`: the workload opted in through one of Reloader's keys.
    pub fn of(
        resource: &Resource,
        annotations: &Annotations,
        suspended: bool,
        opted_in_by_reloader: bool,
    ) -> Style {
        if resource.is_cronjobs() {
            Style::CronJob {
                run_now: opted_in_by_reloader && !suspended,
            }
        } else if resource.is_argo_rollouts()
            && annotations.get(annotations::RELOADER_ROLLOUT_STRATEGY) == Some("restart")
        {
            Style::RestartAt
        } else {
            Style::Template
        }
    }

    /// Whether the hash that counts is the template's (else the metadata's).
    pub fn hash_on_template(self) -> bool {
        !matches!(self, Style::RestartAt)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment(
        name: &str,
        annotations: serde_json::Value,
        volumes: serde_json::Value,
    ) -> WorkloadObject {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "ns", "uid": "u1", "resourceVersion": "1", "annotations": annotations},
            "spec": {"template": {"spec": {"volumes": volumes, "containers": []}}}
        }))
        .unwrap()
    }

    #[test]
    fn a_workloads_gates_are_held_only_when_it_has_any() {
        // Every cached workload has one, in an `Arc` (two counts, 16 bytes); musl's
        // allocator adds 4 bytes and rounds up to its classes (160, 192, 240).
        assert!(std::mem::size_of::<WorkloadEntry>() + 16 + 4 <= 192);
        let opted = |annotations: serde_json::Value| {
            let object = deployment("web", annotations, serde_json::json!([]));
            WorkloadEntry::from_object(&Resource::deployments(), &object, &Policy::default())
                .unwrap()
        };
        let plain = opted(serde_json::json!({"wavelet.dev/update-on-config-change": "true"}));
        assert!(plain.gates.is_none());
        assert_eq!(plain.gates(), &Gates::default());
        let gated = opted(
            serde_json::json!({"wavelet.dev/update-on-config-change": "true",
                                             "wavelet.dev/canary": "true",
                                             "wavelet.dev/restart-window": "Mon-Fri 09:00-17:00 UTC"}),
        );
        assert!(gated.gates().canary && !gated.gates().pause);
        assert_eq!(
            gated.gates().window.as_deref(),
            Some("Mon-Fri 09:00-17:00 UTC")
        );
    }

    #[test]
    fn workloads_that_never_opted_in_are_not_cached() {
        let plain = deployment("plain", serde_json::json!({}), serde_json::json!([]));
        assert!(
            WorkloadEntry::from_object(&Resource::deployments(), &plain, &Policy::default())
                .is_none()
        );
        let leftover = deployment(
            "old",
            serde_json::json!({"wavelet.dev/config-hash": "abc"}),
            serde_json::json!([]),
        );
        let entry =
            WorkloadEntry::from_object(&Resource::deployments(), &leftover, &Policy::default())
                .unwrap();
        assert_eq!(entry.flavor, None);
        assert_eq!(
            entry.metadata_hash_keys.iter().collect::<Vec<_>>(),
            [annotations::WAVELET_HASH]
        );
    }

    #[test]
    fn an_opt_out_removes_each_hash_annotation_the_metadata_carries_and_no_other() {
        let leftover = deployment(
            "old",
            serde_json::json!({"wave.pusher.com/config-hash": "w",
                               "wavelet.dev/config-basis": "v1 k=none s=00 p=",
                               "unrelated": "x"}),
            serde_json::json!([]),
        );
        let entry =
            WorkloadEntry::from_object(&Resource::deployments(), &leftover, &Policy::default())
                .unwrap();
        assert_eq!(
            entry.metadata_hash_keys.iter().collect::<Vec<_>>(),
            [annotations::WAVE_HASH, annotations::WAVELET_BASIS]
        );
        assert_eq!(
            format!("{:?}", entry.metadata_hash_keys),
            format!(
                "[{:?}, {:?}]",
                annotations::WAVE_HASH,
                annotations::WAVELET_BASIS
            )
        );
    }

    #[test]
    fn a_restarted_rollouts_hash_is_the_metadatas_even_when_the_template_has_one() {
        let obj: WorkloadObject = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "r", "namespace": "ns", "annotations": {
                "reloader.stakater.com/auto": "true",
                "reloader.stakater.com/rollout-strategy": "restart",
                "wavelet.dev/update-on-config-change": "true", "wavelet.dev/config-hash": "meta"}},
            "spec": {"template": {"metadata": {"annotations": {"wavelet.dev/config-hash": "tmpl"}}}}
        }))
        .unwrap();
        let entry =
            WorkloadEntry::from_object(&Resource::rollouts(), &obj, &Policy::default()).unwrap();
        assert_eq!(entry.style, Style::RestartAt);
        assert_eq!(entry.recorded_hash(), Some("meta"));
    }

    #[test]
    fn a_cronjobs_hash_and_references_come_from_its_job_template() {
        let obj: WorkloadObject = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "c", "namespace": "ns", "annotations": {
                "wavelet.dev/update-on-config-change": "true"}},
            "spec": {"suspend": true, "jobTemplate": {"spec": {"template": {
                "metadata": {"annotations": {"wavelet.dev/config-hash": "job"}},
                "spec": {"containers": [{"name": "c", "envFrom": [{"configMapRef": {"name": "cfg"}}]}]}}}}}
        }))
        .unwrap();
        let entry =
            WorkloadEntry::from_object(&Resource::cronjobs(), &obj, &Policy::default()).unwrap();
        assert_eq!(entry.style, Style::CronJob { run_now: false });
        assert_eq!(entry.recorded_hash(), Some("job"));
        assert_eq!(entry.references.len(), 1);
        assert_eq!(entry.references[0].config.name.as_ref(), "cfg");
    }

    #[test]
    fn recorded_hash_prefers_the_metadata_which_every_write_updates() {
        let obj: WorkloadObject = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "w", "namespace": "ns", "annotations": {
                "wavelet.dev/update-on-config-change": "true", "wavelet.dev/config-hash": "meta"}},
            "spec": {"template": {"metadata": {"annotations": {"wavelet.dev/config-hash": "tmpl"}}}}
        }))
        .unwrap();
        let entry =
            WorkloadEntry::from_object(&Resource::deployments(), &obj, &Policy::default()).unwrap();
        assert_eq!(entry.recorded_hash(), Some("meta"));
        // A workload Wave rolled: the template's.
        let wave: WorkloadObject = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "w", "namespace": "ns", "annotations": {
                "wave.pusher.com/update-on-config-change": "true"}},
            "spec": {"template": {"metadata": {"annotations": {"wave.pusher.com/config-hash": "tmpl"}}}}
        }))
        .unwrap();
        let entry = WorkloadEntry::from_object(&Resource::deployments(), &wave, &Policy::default())
            .unwrap();
        assert_eq!(entry.recorded_hash(), Some("tmpl"));
    }

    fn with(pairs: &[(&str, &str)]) -> Annotations {
        Annotations::from_pairs(pairs.iter().copied())
    }

    #[test]
    fn a_cronjob_runs_now_only_when_opted_in_by_reloader_and_not_suspended() {
        let cron = Resource::cronjobs();
        let none = with(&[]);
        assert_eq!(
            Style::of(&cron, &none, false, true),
            Style::CronJob { run_now: true }
        );
        assert_eq!(
            Style::of(&cron, &none, true, true),
            Style::CronJob { run_now: false }
        );
        assert_eq!(
            Style::of(&cron, &none, false, false),
            Style::CronJob { run_now: false }
        );
    }

    #[test]
    fn only_an_argo_rollout_with_the_restart_strategy_is_restarted() {
        let restart = with(&[(annotations::RELOADER_ROLLOUT_STRATEGY, "restart")]);
        assert_eq!(
            Style::of(&Resource::rollouts(), &restart, false, true),
            Style::RestartAt
        );
        assert_eq!(
            Style::of(&Resource::deployments(), &restart, false, true),
            Style::Template
        );
        let rollout = with(&[(annotations::RELOADER_ROLLOUT_STRATEGY, "rollout")]);
        assert_eq!(
            Style::of(&Resource::rollouts(), &rollout, false, true),
            Style::Template
        );
    }

    #[test]
    fn only_a_restart_keeps_the_hash_off_the_template() {
        assert!(!Style::RestartAt.hash_on_template());
        assert!(Style::Template.hash_on_template());
        assert!(Style::CronJob { run_now: true }.hash_on_template());
    }
}
