//! The annotations wavelet reads and writes, each documented once.

use crate::objects::Annotations;

/// Opt-in on a workload's metadata: `"true"` enables hash mode, writing [`WAVELET_HASH`].
pub const WAVELET_OPT_IN: &str = "wavelet.dev/update-on-config-change";
/// Wave's opt-in key, accepted as is; it makes wavelet write [`WAVE_HASH`].
pub const WAVE_OPT_IN: &str = "wave.pusher.com/update-on-config-change";
/// The configuration hash wavelet writes (pod template, and workload metadata on adoption).
pub const WAVELET_HASH: &str = "wavelet.dev/config-hash";
/// Wave's hash key, written for workloads that opted in with [`WAVE_OPT_IN`].
pub const WAVE_HASH: &str = "wave.pusher.com/config-hash";

/// Extra ConfigMaps/Secrets a workload depends on: comma list of `name` or `namespace/name`.
pub const WAVELET_EXTRA_CONFIGMAPS: &str = "wavelet.dev/extra-configmaps";
pub const WAVELET_EXTRA_SECRETS: &str = "wavelet.dev/extra-secrets";
pub const WAVE_EXTRA_CONFIGMAPS: &str = "wave.pusher.com/extra-configmaps";
pub const WAVE_EXTRA_SECRETS: &str = "wave.pusher.com/extra-secrets";

/// Delete mode: a label selector on a ConfigMap/Secret; the original lab's key.
pub const MAGALIX_POD_DELETE_MATCH: &str = "magalix.com/podDeleteMatch";
/// Delete mode: wavelet's own key for the same selector.
pub const WAVELET_POD_DELETE_MATCH: &str = "wavelet.dev/pod-delete-match";
/// Delete mode: `evict` (default), `delete` or `rolling`.
pub const WAVELET_POD_DELETE_STRATEGY: &str = "wavelet.dev/pod-delete-strategy";

/// Reloader's opt-in keys on a workload (`"true"` opts in). A CronJob opted in through one
/// of them also gets a Job started on a change, as Reloader does.
pub const RELOADER_AUTO: &str = "reloader.stakater.com/auto";
pub const RELOADER_CONFIGMAP_AUTO: &str = "configmap.reloader.stakater.com/auto";
pub const RELOADER_SECRET_AUTO: &str = "secret.reloader.stakater.com/auto";
/// Argo Rollouts: `restart` sets `spec.restartAt` instead of patching the template.
pub const RELOADER_ROLLOUT_STRATEGY: &str = "reloader.stakater.com/rollout-strategy";

/// Every annotation wavelet reads; objects' other annotations are never parsed.
pub const READ: [&str; 15] = [
    WAVELET_OPT_IN,
    WAVE_OPT_IN,
    WAVELET_HASH,
    WAVE_HASH,
    WAVELET_EXTRA_CONFIGMAPS,
    WAVELET_EXTRA_SECRETS,
    WAVE_EXTRA_CONFIGMAPS,
    WAVE_EXTRA_SECRETS,
    MAGALIX_POD_DELETE_MATCH,
    WAVELET_POD_DELETE_MATCH,
    WAVELET_POD_DELETE_STRATEGY,
    RELOADER_AUTO,
    RELOADER_CONFIGMAP_AUTO,
    RELOADER_SECRET_AUTO,
    RELOADER_ROLLOUT_STRATEGY,
];

/// Whether a workload opted in through one of Reloader's keys.
pub fn opted_in_by_reloader(annotations: &Annotations) -> bool {
    [RELOADER_AUTO, RELOADER_CONFIGMAP_AUTO, RELOADER_SECRET_AUTO]
        .iter()
        .any(|k| annotations.get(k) == Some("true"))
}

/// The delete-mode selector of a ConfigMap/Secret, under wavelet's key or the lab's.
pub fn pod_delete_match(annotations: &Annotations) -> Option<&str> {
    annotations
        .get(WAVELET_POD_DELETE_MATCH)
        .or_else(|| annotations.get(MAGALIX_POD_DELETE_MATCH))
}

/// Which opt-in a workload used, which decides the hash key written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Flavor {
    Wavelet,
    Wave,
}

impl Flavor {
    /// The opt-in flavor from a workload's metadata annotations; wavelet's key wins if both
    /// are set. Only the exact value `"true"` opts in.
    pub fn from_annotations(annotations: &Annotations) -> Option<Flavor> {
        if annotations.get(WAVELET_OPT_IN) == Some("true") {
            Some(Flavor::Wavelet)
        } else if annotations.get(WAVE_OPT_IN) == Some("true") {
            Some(Flavor::Wave)
        } else {
            None
        }
    }

    pub fn hash_key(self) -> &'static str {
        match self {
            Flavor::Wavelet => WAVELET_HASH,
            Flavor::Wave => WAVE_HASH,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn annotations(pairs: &[(&str, &str)]) -> Annotations {
        Annotations::from_pairs(pairs.iter().copied())
    }

    #[test]
    fn only_the_exact_value_true_opts_in() {
        assert_eq!(
            Flavor::from_annotations(&annotations(&[(WAVELET_OPT_IN, "true")])),
            Some(Flavor::Wavelet)
        );
        assert_eq!(
            Flavor::from_annotations(&annotations(&[(WAVELET_OPT_IN, "True")])),
            None
        );
        assert_eq!(
            Flavor::from_annotations(&annotations(&[(WAVELET_OPT_IN, "yes")])),
            None
        );
    }

    #[test]
    fn wave_opt_in_writes_waves_hash_key() {
        let flavor = Flavor::from_annotations(&annotations(&[(WAVE_OPT_IN, "true")])).unwrap();
        assert_eq!(flavor.hash_key(), WAVE_HASH);
    }
}
