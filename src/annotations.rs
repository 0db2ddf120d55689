//! The annotations wavelet reads and writes, each documented once.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, Visitor};

/// Opt-in on a workload's metadata: `"true"` enables hash mode, writing [`WAVELET_HASH`].
pub const WAVELET_OPT_IN: &str = "wavelet.dev/update-on-config-change";
/// Wave's opt-in key, accepted as is; it makes wavelet write [`WAVE_HASH`].
pub const WAVE_OPT_IN: &str = "wave.pusher.com/update-on-config-change";
/// The configuration hash wavelet writes (pod template, and workload metadata on adoption).
pub const WAVELET_HASH: &str = "wavelet.dev/config-hash";
/// Wave's hash key, written for workloads that opted in with [`WAVE_OPT_IN`].
pub const WAVE_HASH: &str = "wave.pusher.com/config-hash";
/// On a workload's metadata, beside the hash: what it was computed under (hash version,
/// key id, settings) and each object's part of it (`hashmode::basis`), so that a changed
/// setting is told from a changed configuration.
pub const WAVELET_BASIS: &str = "wavelet.dev/config-basis";

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

/// Stakater Reloader's keys on a workload, read as Reloader reads them (its README and
/// `internal/pkg/options/flags.go`): `"true"` opts in.
/// `reloader.stakater.com/auto`: every referenced ConfigMap and Secret counts; `"false"`
/// opts out, also under `--auto-reload-all`.
pub const RELOADER_AUTO: &str = "reloader.stakater.com/auto";
/// Only referenced ConfigMaps count.
pub const RELOADER_CONFIGMAP_AUTO: &str = "configmap.reloader.stakater.com/auto";
/// Only referenced Secrets count.
pub const RELOADER_SECRET_AUTO: &str = "secret.reloader.stakater.com/auto";
/// Comma list of anchored regular expressions: the ConfigMaps of the workload's namespace
/// whose names match count (all keys), referenced or not.
pub const RELOADER_CONFIGMAP_RELOAD: &str = "configmap.reloader.stakater.com/reload";
/// The same for Secrets.
pub const RELOADER_SECRET_RELOAD: &str = "secret.reloader.stakater.com/reload";
/// Only referenced objects that carry [`RELOADER_MATCH`] count.
pub const RELOADER_SEARCH: &str = "reloader.stakater.com/search";
/// Comma lists of names that do not count.
pub const RELOADER_CONFIGMAPS_EXCLUDE: &str = "configmaps.exclude.reloader.stakater.com/reload";
pub const RELOADER_SECRETS_EXCLUDE: &str = "secrets.exclude.reloader.stakater.com/reload";
/// With `--enable-csi-integration`: only referenced SecretProviderClasses count.
pub const RELOADER_SECRETPROVIDERCLASS_AUTO: &str =
    "secretproviderclass.reloader.stakater.com/auto";
/// With `--enable-csi-integration`: a comma list of anchored regular expressions naming
/// the SecretProviderClasses of the workload's namespace that count, referenced or not.
pub const RELOADER_SECRETPROVIDERCLASS_RELOAD: &str =
    "secretproviderclass.reloader.stakater.com/reload";
/// A comma list of SecretProviderClass names that do not count.
pub const RELOADER_SECRETPROVIDERCLASSES_EXCLUDE: &str =
    "secretproviderclasses.exclude.reloader.stakater.com/reload";
/// A per-workload debounce window (Reloader pauses the Deployment for it instead).
pub const RELOADER_PAUSE_PERIOD: &str = "deployment.reloader.stakater.com/pause-period";
/// Argo Rollouts: `restart` sets `spec.restartAt` instead of patching the template.
pub const RELOADER_ROLLOUT_STRATEGY: &str = "reloader.stakater.com/rollout-strategy";
/// On a ConfigMap or Secret: its data never counts, for any workload.
pub const RELOADER_IGNORE: &str = "reloader.stakater.com/ignore";
/// On a ConfigMap or Secret: it counts for workloads with [`RELOADER_SEARCH`].
pub const RELOADER_MATCH: &str = "reloader.stakater.com/match";
/// On a pod template: Reloader's annotations-strategy record of the last object it
/// reloaded for (JSON with its type, namespace, name and SHA-1), read for a take-over.
pub const RELOADER_LAST_RELOADED_FROM: &str = "reloader.stakater.com/last-reloaded-from";

/// Safe fan-out (book: Rolling a shared change safely). On a workload: `"true"` puts it
/// in the first wave of every shared change it is part of.
pub const WAVELET_CANARY: &str = "wavelet.dev/canary";
/// On a Namespace, a workload or a ConfigMap/Secret: `"true"` holds every rollout it
/// concerns as pending until removed; then they roll once, with the latest hash.
pub const WAVELET_PAUSE: &str = "wavelet.dev/pause";
/// On a workload or its Namespace: the restart windows it may roll in
/// ([`crate::window::Windows`]); `always` lifts a window set further out.
pub const WAVELET_RESTART_WINDOW: &str = "wavelet.dev/restart-window";
/// On a ConfigMap/Secret: `waves` (a shared change rolls in waves behind a health gate) or
/// `at-once` (every dependent rolls at once, as before); overrides `--fan-out`.
pub const WAVELET_FAN_OUT: &str = "wavelet.dev/fan-out";
/// On a ConfigMap/Secret: the size of the waves after the first (`3` or `25%`);
/// overrides `--wave-size`.
pub const WAVELET_WAVE_SIZE: &str = "wavelet.dev/wave-size";
/// On a ConfigMap/Secret: any value lets its current change through restart windows,
/// once; a later change needs a new value.
pub const WAVELET_URGENT: &str = "wavelet.dev/urgent";
/// Written by wavelet on a workload's metadata, in the PATCH that rolls it as wave 1 of a
/// shared change (`hashmode::fanout::record::Mark`): which change's first wave it is, so
/// that the wave survives a restart that comes before its record in `wavelet-state`.
/// Metadata only: it rolls nothing. Removed by the workload's next rollout and its opt-out.
pub const WAVELET_FIRST_WAVE_OF: &str = "wavelet.dev/first-wave-of";

/// The keys that opt a workload in through Reloader (any of them set).
pub const RELOADER_OPT_INS: [&str; 6] = [
    RELOADER_AUTO,
    RELOADER_CONFIGMAP_AUTO,
    RELOADER_SECRET_AUTO,
    RELOADER_CONFIGMAP_RELOAD,
    RELOADER_SECRET_RELOAD,
    RELOADER_SEARCH,
];

/// Reloader's keys that opt a workload in for SecretProviderClasses only; they opt in only
/// with `--enable-csi-integration` (as in Reloader, whose CSI watch that flag starts).
pub const RELOADER_CSI_OPT_INS: [&str; 2] = [
    RELOADER_SECRETPROVIDERCLASS_AUTO,
    RELOADER_SECRETPROVIDERCLASS_RELOAD,
];

/// Every annotation wavelet reads; objects' other annotations are never parsed.
pub const READ: [&str; 35] = [
    WAVELET_OPT_IN,
    WAVE_OPT_IN,
    WAVELET_HASH,
    WAVE_HASH,
    WAVELET_BASIS,
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
    RELOADER_CONFIGMAP_RELOAD,
    RELOADER_SECRET_RELOAD,
    RELOADER_SEARCH,
    RELOADER_CONFIGMAPS_EXCLUDE,
    RELOADER_SECRETS_EXCLUDE,
    RELOADER_SECRETPROVIDERCLASS_AUTO,
    RELOADER_SECRETPROVIDERCLASS_RELOAD,
    RELOADER_SECRETPROVIDERCLASSES_EXCLUDE,
    RELOADER_PAUSE_PERIOD,
    RELOADER_ROLLOUT_STRATEGY,
    RELOADER_IGNORE,
    RELOADER_MATCH,
    RELOADER_LAST_RELOADED_FROM,
    WAVELET_CANARY,
    WAVELET_PAUSE,
    WAVELET_RESTART_WINDOW,
    WAVELET_FAN_OUT,
    WAVELET_WAVE_SIZE,
    WAVELET_URGENT,
    WAVELET_FIRST_WAVE_OF,
];

/// The delete-mode selector of a ConfigMap/Secret, under wavelet's key or the lab's.
pub fn pod_delete_match(annotations: &Annotations) -> Option<&str> {
    annotations
        .get(WAVELET_POD_DELETE_MATCH)
        .or_else(|| annotations.get(MAGALIX_POD_DELETE_MATCH))
}

/// Which opt-in a workload used, which decides the hash key written (and what `status`
/// shows).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Flavor {
    Wavelet,
    Wave,
    /// One of Reloader's keys ([`RELOADER_OPT_INS`]); writes [`WAVELET_HASH`].
    Reloader,
    /// `--auto-reload-all`; writes [`WAVELET_HASH`].
    AutoReloadAll,
}

impl Flavor {
    /// The opt-in flavor from a workload's metadata annotations; wavelet's key wins if both
    /// are set. Only the exact value `"true"` opts in.
    pub fn from_annotations(annotations: &Annotations) -> Option<Flavor> {
        if annotations.get(WAVELET_OPT_IN) == Some("true") {
            Some(Flavor::Wavelet)
        } else if annotations.get(WAVE_OPT_IN) == Some("true") {
            Some(Flavor::Wave)
        } else if RELOADER_OPT_INS
            .iter()
            .any(|k| annotations.get(k).is_some_and(|v| is_reloader_opt_in(k, v)))
        {
            Some(Flavor::Reloader)
        } else {
            None
        }
    }

    pub fn hash_key(self) -> &'static str {
        match self {
            Flavor::Wave => WAVE_HASH,
            Flavor::Wavelet | Flavor::Reloader | Flavor::AutoReloadAll => WAVELET_HASH,
        }
    }

    /// How `status` names it.
    pub fn family(self) -> &'static str {
        match self {
            Flavor::Wavelet => "wavelet",
            Flavor::Wave => "wave",
            Flavor::Reloader => "reloader",
            Flavor::AutoReloadAll => "auto-reload-all",
        }
    }
}

/// A Reloader key's value opts in: `"true"` for the flags, any non-empty list for the
/// reload lists.
pub fn is_reloader_opt_in(key: &str, value: &str) -> bool {
    match key {
        RELOADER_CONFIGMAP_RELOAD
        | RELOADER_SECRET_RELOAD
        | RELOADER_SECRETPROVIDERCLASS_RELOAD => !value.trim().is_empty(),
        _ => value == "true",
    }
}

/// Whether one of Reloader's SecretProviderClass keys ([`RELOADER_CSI_OPT_INS`]) opts in.
pub fn has_reloader_csi_opt_in(annotations: &Annotations) -> bool {
    RELOADER_CSI_OPT_INS
        .iter()
        .any(|k| annotations.get(k).is_some_and(|v| is_reloader_opt_in(k, v)))
}

/// Whether a workload opted in through one of Reloader's keys (a CronJob so opted in
/// also gets a Job started on a change).
pub fn opted_in_by_reloader(annotations: &Annotations) -> bool {
    Flavor::from_annotations(annotations) == Some(Flavor::Reloader)
        || has_reloader_csi_opt_in(annotations)
        || (annotations.get(WAVELET_OPT_IN) == Some("true")
            && RELOADER_OPT_INS
                .iter()
                .any(|k| annotations.get(k).is_some_and(|v| is_reloader_opt_in(k, v))))
}

/// The annotations wavelet reads ([`READ`]), and no others. The rest are
/// skipped while parsing, never copied: some are large, and kubectl's
/// `last-applied-configuration` on a Secret holds the Secret's data.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Annotations(Vec<(&'static str, Box<str>)>);

impl Annotations {
    /// Keeps the pairs whose key wavelet reads (for tests and callers that build objects).
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Annotations {
        let mut out = Vec::new();
        for (key, value) in pairs {
            if let Some(known) = READ.iter().find(|k| **k == key) {
                out.push((*known, Box::from(value)));
            }
        }
        Annotations(out)
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.iter().find(|(k, _)| *k == key).map(|(_, v)| &**v)
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }
}

impl<'de> Deserialize<'de> for Annotations {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct AnnotationsVisitor;

        impl<'de> Visitor<'de> for AnnotationsVisitor {
            type Value = Annotations;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map of annotations")
            }

            fn visit_unit<E: de::Error>(self) -> Result<Annotations, E> {
                Ok(Annotations::default())
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Annotations, A::Error> {
                let mut out = Vec::new();
                while let Some(known) = map.next_key_seed(KnownAnnotation)? {
                    match known {
                        Some(key) => out.push((key, map.next_value::<String>()?.into())),
                        None => {
                            map.next_value::<de::IgnoredAny>()?;
                        }
                    }
                }
                Ok(Annotations(out))
            }
        }

        d.deserialize_any(AnnotationsVisitor)
    }
}

/// An annotation key: `Some` of the static copy when wavelet reads it, without allocating.
struct KnownAnnotation;

impl<'de> de::DeserializeSeed<'de> for KnownAnnotation {
    type Value = Option<&'static str>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KnownAnnotation {
    type Value = Option<&'static str>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an annotation key")
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<Self::Value, E> {
        Ok(READ.iter().find(|k| **k == key).copied())
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
