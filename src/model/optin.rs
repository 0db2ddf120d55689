//! Who is opted in, through which family of keys, and which ConfigMaps, Secrets and
//! SecretProviderClasses count for them: wavelet's and Wave's keys (every reference
//! counts), Stakater Reloader's (`auto`, typed `auto`, reload lists of anchored regular
//! expressions, `search` with `match`, exclude lists, `pause-period`; for classes, their
//! `secretproviderclass` keys with `--enable-csi-integration`), and `--auto-reload-all`.
//! Pure: the cache stores what [`opt_in`] says, the reconcile applies [`Counting`] to
//! what exists.

use std::time::Duration;

use crate::annotations::Annotations;
use crate::annotations::{self, Flavor};
use crate::config::{duration, Policy};
use crate::objects::ConfigKind;

/// A reload-list entry: an anchored regular expression over names of one kind.
#[derive(Debug, Clone)]
pub struct NamePattern {
    pub kind: ConfigKind,
    source: Box<str>,
    regex: regex_lite::Regex,
}

impl PartialEq for NamePattern {
    fn eq(&self, other: &NamePattern) -> bool {
        self.kind == other.kind && self.source == other.source
    }
}

impl Eq for NamePattern {}

impl NamePattern {
    /// `^entry$`, as Reloader anchors each entry.
    pub fn new(kind: ConfigKind, entry: &str) -> Result<NamePattern, String> {
        let regex = regex_lite::Regex::new(&format!("^(?:{entry})$")).map_err(|e| {
            format!(
                "{} {entry:?} in a Reloader reload list is not a valid regular expression ({e}); it is skipped",
                kind.kind()
            )
        })?;
        Ok(NamePattern {
            kind,
            source: entry.into(),
            regex,
        })
    }

    pub fn matches(&self, kind: ConfigKind, name: &str) -> bool {
        self.kind == kind && self.regex.is_match(name)
    }
}

/// What counts for one opted-in workload.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Counting {
    /// Referenced ConfigMaps count (every opt-in but Reloader's typed `secret` auto).
    pub referenced_configmaps: bool,
    /// Referenced Secrets count.
    pub referenced_secrets: bool,
    /// Referenced SecretProviderClasses count (with `--enable-csi-integration`).
    pub referenced_classes: bool,
    /// `reloader.stakater.com/search`: of the referenced objects, only those with
    /// `reloader.stakater.com/match: "true"` count.
    pub search: bool,
    /// What Reloader's list and pause-period annotations add, for the few workloads that
    /// have any: boxed, as every cached workload holds a `Counting` (72 bytes less each).
    lists: Option<Box<Lists>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct Lists {
    /// Reload lists: objects of the namespace counted by name, referenced or not.
    patterns: Vec<NamePattern>,
    /// Exclude lists: names that never count.
    excluded: Vec<(ConfigKind, Box<str>)>,
    /// `deployment.reloader.stakater.com/pause-period`: this workload's debounce window.
    pause_period: Option<Duration>,
    /// Reload-list entries and pause periods that could not be read: each is a Warning
    /// Event, and is skipped.
    problems: Vec<String>,
}

impl Counting {
    /// Every reference counts (wavelet's and Wave's keys).
    pub fn every_reference() -> Counting {
        Counting {
            referenced_configmaps: true,
            referenced_secrets: true,
            referenced_classes: true,
            ..Counting::default()
        }
    }

    /// Reload lists: objects of the namespace counted by name, referenced or not.
    pub fn patterns(&self) -> &[NamePattern] {
        self.lists.as_ref().map_or(&[], |l| &l.patterns)
    }

    /// `deployment.reloader.stakater.com/pause-period`: this workload's debounce window.
    pub fn pause_period(&self) -> Option<Duration> {
        self.lists.as_ref().and_then(|l| l.pause_period)
    }

    /// Reload-list entries and pause periods that could not be read: each is a Warning
    /// Event, and is skipped.
    pub fn problems(&self) -> &[String] {
        self.lists.as_ref().map_or(&[], |l| &l.problems)
    }

    fn lists(&mut self) -> &mut Lists {
        self.lists.get_or_insert_with(Box::default)
    }

    /// Whether a referenced object counts, before looking at its own annotations.
    pub fn counts_reference(&self, kind: ConfigKind, name: &str, policy: &Policy) -> bool {
        let typed = match kind {
            ConfigKind::ConfigMap => self.referenced_configmaps,
            ConfigKind::Secret => self.referenced_secrets,
            ConfigKind::SecretProviderClass => self.referenced_classes,
        };
        typed && !policy.ignores(kind) && !self.is_excluded(kind, name)
    }

    /// The reload-list patterns that name Secrets (unused Secrets are not cached, so a
    /// workload with any waits for its namespace's Secrets to be listed).
    pub fn secret_patterns(&self) -> impl Iterator<Item = &NamePattern> {
        self.patterns()
            .iter()
            .filter(|p| p.kind == ConfigKind::Secret)
    }

    /// Whether an object of the namespace counts by a reload list.
    pub fn counts_by_name(&self, kind: ConfigKind, name: &str, policy: &Policy) -> bool {
        !policy.ignores(kind)
            && !self.is_excluded(kind, name)
            && self.patterns().iter().any(|p| p.matches(kind, name))
    }

    pub fn is_excluded(&self, kind: ConfigKind, name: &str) -> bool {
        self.lists
            .as_ref()
            .is_some_and(|l| l.excluded.iter().any(|(k, n)| *k == kind && &**n == name))
    }

    /// Whether an object with these `ignore`/`match` annotations counts at all (Reloader's
    /// object annotations).
    pub fn counts_object(&self, ignored: bool, matched: bool, by_name: bool) -> bool {
        !ignored && (by_name || !self.search || matched)
    }
}

/// How a workload opted in and what counts for it, from its metadata annotations (for
/// Reloader's keys, its pod template's when the metadata has none of them, as Reloader
/// reads them); `None` when it is not opted in.
pub fn opt_in(
    metadata: &Annotations,
    template: &Annotations,
    policy: &Policy,
) -> Option<(Flavor, Counting)> {
    let has_reloader_key = |a: &Annotations| {
        annotations::RELOADER_OPT_INS
            .iter()
            .chain(&annotations::RELOADER_CSI_OPT_INS)
            .chain(&[
                annotations::RELOADER_CONFIGMAPS_EXCLUDE,
                annotations::RELOADER_SECRETS_EXCLUDE,
                annotations::RELOADER_SECRETPROVIDERCLASSES_EXCLUDE,
                annotations::RELOADER_PAUSE_PERIOD,
            ])
            .any(|k| a.contains_key(k))
    };
    let reloader = if has_reloader_key(metadata) {
        metadata
    } else {
        template
    };
    // 1. Opted out explicitly, also under --auto-reload-all.
    if reloader.get(annotations::RELOADER_AUTO) == Some("false")
        && Flavor::from_annotations(metadata).is_none()
    {
        return None;
    }
    // 2. The family: wavelet's or Wave's key, then Reloader's (its SecretProviderClass
    //    keys only with --enable-csi-integration, as in Reloader), then the flag.
    let csi_opt_in = policy.csi_integration && annotations::has_reloader_csi_opt_in(reloader);
    let flavor = match Flavor::from_annotations(metadata) {
        Some(flavor) => flavor,
        None if Flavor::from_annotations(reloader) == Some(Flavor::Reloader) || csi_opt_in => {
            Flavor::Reloader
        }
        None if policy.auto_reload_all => Flavor::AutoReloadAll,
        None => return None,
    };
    // 3. What counts.
    let mut counting = match flavor {
        Flavor::Wavelet | Flavor::Wave | Flavor::AutoReloadAll => Counting::every_reference(),
        Flavor::Reloader => Counting::default(),
    };
    let yes = |key: &str| reloader.get(key) == Some("true");
    if yes(annotations::RELOADER_AUTO) || yes(annotations::RELOADER_SEARCH) {
        counting.referenced_configmaps = true;
        counting.referenced_secrets = true;
        counting.referenced_classes = true;
    }
    counting.search = yes(annotations::RELOADER_SEARCH);
    if yes(annotations::RELOADER_CONFIGMAP_AUTO) {
        counting.referenced_configmaps = true;
    }
    if yes(annotations::RELOADER_SECRET_AUTO) {
        counting.referenced_secrets = true;
    }
    if yes(annotations::RELOADER_SECRETPROVIDERCLASS_AUTO) {
        counting.referenced_classes = true;
    }
    for (key, kind) in [
        (
            annotations::RELOADER_CONFIGMAP_RELOAD,
            ConfigKind::ConfigMap,
        ),
        (annotations::RELOADER_SECRET_RELOAD, ConfigKind::Secret),
        (
            annotations::RELOADER_SECRETPROVIDERCLASS_RELOAD,
            ConfigKind::SecretProviderClass,
        ),
    ] {
        for entry in list(reloader.get(key)) {
            match NamePattern::new(kind, entry) {
                Ok(pattern) => counting.lists().patterns.push(pattern),
                Err(problem) => counting.lists().problems.push(problem),
            }
        }
    }
    for (key, kind) in [
        (
            annotations::RELOADER_CONFIGMAPS_EXCLUDE,
            ConfigKind::ConfigMap,
        ),
        (annotations::RELOADER_SECRETS_EXCLUDE, ConfigKind::Secret),
        (
            annotations::RELOADER_SECRETPROVIDERCLASSES_EXCLUDE,
            ConfigKind::SecretProviderClass,
        ),
    ] {
        for name in list(reloader.get(key)) {
            counting.lists().excluded.push((kind, Box::from(name)));
        }
    }
    if let Some(text) = reloader.get(annotations::RELOADER_PAUSE_PERIOD) {
        match duration::parse(text) {
            Ok(period) => counting.lists().pause_period = Some(period),
            Err(e) => counting.lists().problems.push(format!(
                "{} {text:?} is not a duration ({e}); the default --debounce applies",
                annotations::RELOADER_PAUSE_PERIOD
            )),
        }
    }
    Some((flavor, counting))
}

/// The entries of a comma list, trimmed, empty ones left out.
fn list(text: Option<&str>) -> impl Iterator<Item = &str> {
    text.unwrap_or("")
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::annotations::*;

    fn with(pairs: &[(&str, &str)]) -> Annotations {
        Annotations::from_pairs(pairs.iter().copied())
    }

    fn none() -> Annotations {
        with(&[])
    }

    const ALL: Policy = Policy {
        auto_reload_all: true,
        ignore_configmaps: false,
        ignore_secrets: false,
        csi_integration: false,
    };

    const CSI: Policy = Policy {
        auto_reload_all: false,
        ignore_configmaps: false,
        ignore_secrets: false,
        csi_integration: true,
    };

    const SPC: ConfigKind = ConfigKind::SecretProviderClass;

    #[test]
    fn reloaders_secretproviderclass_keys_opt_in_only_with_the_csi_integration() {
        let typed = with(&[(RELOADER_SECRETPROVIDERCLASS_AUTO, "true")]);
        assert!(opt_in(&typed, &none(), &Policy::default()).is_none());
        let (flavor, c) = opt_in(&typed, &none(), &CSI).unwrap();
        assert_eq!(flavor, Flavor::Reloader);
        assert!(c.referenced_classes && !c.referenced_configmaps && !c.referenced_secrets);
        assert!(c.counts_reference(SPC, "vault", &CSI));
        assert!(
            !c.counts_reference(SPC, "vault", &Policy::default()),
            "without the flag, classes count for nobody"
        );
        let listed = with(&[(RELOADER_SECRETPROVIDERCLASS_RELOAD, "vault-.*")]);
        let (_, c) = opt_in(&listed, &none(), &CSI).unwrap();
        assert!(c.counts_by_name(SPC, "vault-db", &CSI));
        assert!(!c.counts_by_name(ConfigKind::Secret, "vault-db", &CSI));
        assert!(
            !c.referenced_classes,
            "a reload list alone counts no reference"
        );
    }

    #[test]
    fn reloaders_auto_and_wavelets_key_count_referenced_classes_and_an_exclude_wins() {
        let (_, c) = opt_in(&with(&[(RELOADER_AUTO, "true")]), &none(), &CSI).unwrap();
        assert!(c.counts_reference(SPC, "vault", &CSI));
        let (_, c) = opt_in(&with(&[(WAVELET_OPT_IN, "true")]), &none(), &CSI).unwrap();
        assert!(c.counts_reference(SPC, "vault", &CSI));
        let (_, c) = opt_in(
            &with(&[
                (RELOADER_AUTO, "true"),
                (RELOADER_SECRETPROVIDERCLASS_RELOAD, "vault"),
                (RELOADER_SECRETPROVIDERCLASSES_EXCLUDE, "vault, noisy"),
            ]),
            &none(),
            &CSI,
        )
        .unwrap();
        assert!(!c.counts_reference(SPC, "vault", &CSI));
        assert!(!c.counts_by_name(SPC, "vault", &CSI));
        assert!(c.counts_reference(SPC, "other", &CSI));
        assert!(
            c.counts_reference(ConfigKind::Secret, "vault", &CSI),
            "the class exclude list names classes only"
        );
        // Typed auto for ConfigMaps counts no class.
        let (_, c) = opt_in(&with(&[(RELOADER_CONFIGMAP_AUTO, "true")]), &none(), &CSI).unwrap();
        assert!(!c.counts_reference(SPC, "vault", &CSI));
    }

    #[test]
    fn reloaders_auto_counts_every_reference_and_writes_wavelets_hash_key() {
        let (flavor, counting) = opt_in(
            &with(&[(RELOADER_AUTO, "true")]),
            &none(),
            &Policy::default(),
        )
        .unwrap();
        assert_eq!(flavor, Flavor::Reloader);
        assert_eq!(flavor.hash_key(), WAVELET_HASH);
        assert!(counting.referenced_configmaps && counting.referenced_secrets);
        assert!(!counting.search);
    }

    #[test]
    fn typed_auto_counts_one_kind_of_reference() {
        let (_, c) = opt_in(
            &with(&[(RELOADER_CONFIGMAP_AUTO, "true")]),
            &none(),
            &Policy::default(),
        )
        .unwrap();
        assert!(c.referenced_configmaps && !c.referenced_secrets);
        let (_, c) = opt_in(
            &with(&[(RELOADER_SECRET_AUTO, "true")]),
            &none(),
            &Policy::default(),
        )
        .unwrap();
        assert!(!c.referenced_configmaps && c.referenced_secrets);
    }

    #[test]
    fn reload_lists_are_anchored_regular_expressions_and_an_invalid_one_is_skipped() {
        let (_, c) = opt_in(
            &with(&[(RELOADER_CONFIGMAP_RELOAD, "app-.*, exact,(broken")]),
            &none(),
            &Policy::default(),
        )
        .unwrap();
        let p = Policy::default();
        assert!(c.counts_by_name(ConfigKind::ConfigMap, "app-one", &p));
        assert!(c.counts_by_name(ConfigKind::ConfigMap, "exact", &p));
        assert!(!c.counts_by_name(ConfigKind::ConfigMap, "my-app-one", &p));
        assert!(!c.counts_by_name(ConfigKind::ConfigMap, "exactly", &p));
        assert!(!c.counts_by_name(ConfigKind::Secret, "exact", &p));
        assert!(
            !c.referenced_configmaps,
            "a reload list alone does not count references"
        );
        assert_eq!(c.problems().len(), 1);
        assert!(
            c.problems()[0].contains("\"(broken\""),
            "{:?}",
            c.problems()
        );
    }

    #[test]
    fn an_exclude_wins_over_auto_and_over_a_reload_list() {
        let (_, c) = opt_in(
            &with(&[
                (RELOADER_AUTO, "true"),
                (RELOADER_CONFIGMAP_RELOAD, "shared"),
                (RELOADER_CONFIGMAPS_EXCLUDE, "shared, noisy"),
            ]),
            &none(),
            &Policy::default(),
        )
        .unwrap();
        let p = Policy::default();
        assert!(!c.counts_reference(ConfigKind::ConfigMap, "noisy", &p));
        assert!(!c.counts_by_name(ConfigKind::ConfigMap, "shared", &p));
        assert!(c.counts_reference(ConfigKind::ConfigMap, "other", &p));
        assert!(c.counts_reference(ConfigKind::Secret, "noisy", &p));
    }

    #[test]
    fn search_counts_only_referenced_objects_that_match() {
        let (_, c) = opt_in(
            &with(&[(RELOADER_SEARCH, "true")]),
            &none(),
            &Policy::default(),
        )
        .unwrap();
        assert!(c.counts_object(false, true, false));
        assert!(!c.counts_object(false, false, false));
        assert!(!c.counts_object(true, true, false), "ignore wins");
        assert!(Counting::every_reference().counts_object(false, false, false));
    }

    #[test]
    fn auto_false_opts_out_even_under_auto_reload_all() {
        assert!(opt_in(&with(&[(RELOADER_AUTO, "false")]), &none(), &ALL).is_none());
        let (flavor, c) = opt_in(&none(), &none(), &ALL).unwrap();
        assert_eq!(flavor, Flavor::AutoReloadAll);
        assert!(c.referenced_configmaps && c.referenced_secrets);
        assert!(opt_in(&none(), &none(), &Policy::default()).is_none());
    }

    #[test]
    fn reloaders_keys_are_read_from_the_pod_template_when_the_metadata_has_none() {
        let (flavor, c) = opt_in(
            &none(),
            &with(&[(RELOADER_SECRET_AUTO, "true")]),
            &Policy::default(),
        )
        .unwrap();
        assert_eq!(flavor, Flavor::Reloader);
        assert!(c.referenced_secrets && !c.referenced_configmaps);
        // The metadata's keys win when it has any.
        let (_, c) = opt_in(
            &with(&[(RELOADER_CONFIGMAP_AUTO, "true")]),
            &with(&[(RELOADER_SECRET_AUTO, "true")]),
            &Policy::default(),
        )
        .unwrap();
        assert!(c.referenced_configmaps && !c.referenced_secrets);
    }

    #[test]
    fn wavelets_key_counts_every_reference_and_reads_reloaders_lists_too() {
        let (flavor, c) = opt_in(
            &with(&[(WAVELET_OPT_IN, "true"), (RELOADER_SECRET_RELOAD, "db-.*")]),
            &none(),
            &Policy::default(),
        )
        .unwrap();
        assert_eq!(flavor, Flavor::Wavelet);
        assert!(c.referenced_configmaps && c.referenced_secrets);
        assert!(c.counts_by_name(ConfigKind::Secret, "db-main", &Policy::default()));
    }

    #[test]
    fn only_a_workload_with_lists_or_a_pause_period_holds_them() {
        let excluding = |names: &str| {
            let metadata = with(&[
                (RELOADER_AUTO, "true"),
                (RELOADER_CONFIGMAPS_EXCLUDE, names),
            ]);
            opt_in(&metadata, &none(), &Policy::default()).unwrap().1
        };
        assert!(excluding(" , ").lists.is_none());
        let c = excluding("skip-me");
        assert!(c.is_excluded(ConfigKind::ConfigMap, "skip-me"));
        assert!(!c.is_excluded(ConfigKind::Secret, "skip-me"));
    }

    #[test]
    fn pause_period_is_a_duration_and_a_bad_one_is_reported() {
        let (_, c) = opt_in(
            &with(&[(RELOADER_AUTO, "true"), (RELOADER_PAUSE_PERIOD, "5m")]),
            &none(),
            &Policy::default(),
        )
        .unwrap();
        assert_eq!(c.pause_period(), Some(Duration::from_secs(300)));
        let (_, c) = opt_in(
            &with(&[(RELOADER_AUTO, "true"), (RELOADER_PAUSE_PERIOD, "soon")]),
            &none(),
            &Policy::default(),
        )
        .unwrap();
        assert_eq!(c.pause_period(), None);
        assert_eq!(c.problems().len(), 1);
    }

    #[test]
    fn ignore_flags_make_a_kind_count_for_nobody() {
        let p = Policy {
            ignore_secrets: true,
            ..Policy::default()
        };
        let c = Counting::every_reference();
        assert!(!c.counts_reference(ConfigKind::Secret, "x", &p));
        assert!(c.counts_reference(ConfigKind::ConfigMap, "x", &p));
    }
}
