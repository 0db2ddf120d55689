//! What a recorded hash was computed under, recorded beside it (`wavelet.dev/config-basis`
//! on the workload's metadata), so that a change of how wavelet hashes is not taken for
//! a change of configuration.
//!
//! The hash depends on the data and on settings: the hash version, `--hash-key-file`,
//! and what `--resource-label-selector`, `--ignore-configmaps` and `--ignore-secrets` let
//! count. A changed setting changes every hash with no data changed. So each write of a
//! hash also writes its basis:
//!
//! ```text
//! v1 k=<key id> s=<settings id> p=<object>:<part>,<object>:<part>,...
//! ```
//!
//! (read and written by [`crate::model::recorded_basis`], which the cache holds).
//!
//! `<key id>` is `none` or the first 8 bytes (hex) of HMAC-SHA256(key, "wavelet.dev/hash-key-id");
//! `<settings id>` the first 8 bytes of the SHA-256 of the settings' text
//! ([`Settings::id`]); each part one object present when the hash was computed: 8 bytes of
//! the SHA-256 of its identity and 8 bytes of the (keyed) hash of its lines of the
//! canonical form ([`crate::hashmode::parts::Fingerprint`]). A part depends on the
//! object's data alone, not on the selector or on what else counts.
//!
//! When the recorded hash differs from the hash now and the basis differs too, the parts
//! decide ([`compare`]): an object present then and now whose part differs is a data
//! change (roll once); none is a change of settings only (record, no rollout). Across a
//! changed key, the parts now are recomputed under the key the basis was recorded under,
//! when that key is still given (a previous key on a later line of `--hash-key-file`, or
//! no key at all). Not detectable: a change in an object that did not count before (newly
//! let in by the selector or an `--ignore-*` flag turned off), an object deleted, and any
//! data change across a changed key whose old key is no longer given
//! ([`Across::KeyUnavailable`]).

use sha2::{Digest as _, Sha256};

use crate::hashmode::parts::Fingerprint;
use crate::model::hash::{hex, hmac_sha256};
pub use crate::model::recorded_basis::Basis;

/// The version of the hash's canonical form (README "The hash").
pub const HASH_VERSION: &str = "v1";

/// The settings that shape the hash.
#[derive(Clone, Default)]
pub struct Settings {
    /// `--resource-label-selector`, as given.
    pub selector: Option<String>,
    pub ignore_configmaps: bool,
    pub ignore_secrets: bool,
    /// `--hash-key-file`'s key (its first line).
    pub hmac_key: Option<Vec<u8>>,
    /// `--hash-key-file`'s previous keys (its later lines): hashes are never made with
    /// them, only parts recorded under them recomputed.
    pub previous_keys: Vec<Vec<u8>>,
}

/// Keys are never printed: their ids stand for them.
impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("selector", &self.selector)
            .field("ignore_configmaps", &self.ignore_configmaps)
            .field("ignore_secrets", &self.ignore_secrets)
            .field("key_id", &self.key_id())
            .field("previous_key_ids", &self.previous_key_ids())
            .finish()
    }
}

/// The id of `key`: `none`, or 8 bytes of an HMAC under it (the key cannot be recovered
/// from it).
pub fn key_id(key: Option<&[u8]>) -> String {
    match key {
        None => "none".into(),
        Some(key) => hex(&hmac_sha256(key, b"wavelet.dev/hash-key-id")[..8]),
    }
}

impl Settings {
    /// The id of the key hashes are made with.
    pub fn key_id(&self) -> String {
        key_id(self.hmac_key.as_deref())
    }

    /// The ids of the previous keys, in the file's order.
    pub fn previous_key_ids(&self) -> Vec<String> {
        self.previous_keys.iter().map(|k| key_id(Some(k))).collect()
    }

    /// The key a basis recorded as `id` was made under, when parts can still be computed
    /// under it: `Some(None)` for `none` (unkeyed parts can always be), `Some(Some(key))`
    /// for the current key or a previous one given; `None` when it is not given any more.
    pub fn key_by_id(&self, id: &str) -> Option<Option<&[u8]>> {
        if id == "none" {
            return Some(None);
        }
        self.hmac_key
            .iter()
            .chain(&self.previous_keys)
            .find(|key| key_id(Some(key)) == id)
            .map(|key| Some(key.as_slice()))
    }

    /// 8 bytes (hex) of the SHA-256 of the settings other than the key.
    pub fn id(&self) -> String {
        let text = format!(
            "version={HASH_VERSION}\nselector={}\nignore-configmaps={}\nignore-secrets={}\n",
            self.selector.as_deref().unwrap_or(""),
            self.ignore_configmaps,
            self.ignore_secrets
        );
        hex(&Sha256::digest(text.as_bytes())[..8])
    }
}

/// The basis of every hash computed under `settings`, without the objects' parts: made
/// once (it costs an HMAC, a SHA-256 and the shared head's lookup), then given each hash's
/// parts by [`of`].
pub(crate) fn under(settings: &Settings) -> Basis {
    Basis::new(HASH_VERSION, &settings.key_id(), &settings.id(), [])
}

/// The basis of a hash computed under `under` ([`under`]) of objects with `fingerprints`.
pub(crate) fn of(under: &Basis, fingerprints: &[Fingerprint]) -> Basis {
    under.with_parts(
        fingerprints
            .iter()
            .filter(|f| f.present)
            .map(|f| (f.object, f.part))
            .collect(),
    )
}

/// What the recorded basis tells about a recorded hash that differs from the hash now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Across {
    /// Computed the same way: the hashes differ because the data differs (or no basis
    /// was recorded: as before there was one).
    SameBasis,
    /// The settings changed and no object present then and now changed: record.
    SettingsOnly,
    /// The settings changed, and so did an object's data: roll.
    DataChanged,
    /// The key changed and the one the basis was recorded under is no longer given: its
    /// parts cannot be compared, taken as settings only (record, and say what could not
    /// be checked).
    KeyUnavailable,
}

/// Compares the recorded basis with the one now (see the module's doc).
/// `under_recorded_key`: the parts now of the objects present now, computed under the key
/// the recorded basis names, when that is not the current key and is still given
/// ([`Settings::key_by_id`]).
pub fn compare(
    recorded: Option<&Basis>,
    now: &Basis,
    under_recorded_key: Option<&[(u64, u64)]>,
) -> Across {
    let Some(recorded) = recorded else {
        return Across::SameBasis;
    };
    if recorded.version() == now.version()
        && recorded.key_id() == now.key_id()
        && recorded.settings_id() == now.settings_id()
    {
        return Across::SameBasis;
    }
    let parts_now = if recorded.key_id() == now.key_id() {
        &now.parts[..]
    } else {
        match under_recorded_key {
            Some(parts) => parts,
            None => return Across::KeyUnavailable,
        }
    };
    let changed = parts_now.iter().any(|(object, part)| {
        recorded
            .parts
            .iter()
            .any(|(old_object, old_part)| old_object == object && old_part != part)
    });
    if changed {
        Across::DataChanged
    } else {
        Across::SettingsOnly
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn basis(key: &str, settings: &str, parts: &[(u64, u64)]) -> Basis {
        Basis::new(HASH_VERSION, key, settings, parts)
    }

    #[test]
    fn a_hashs_basis_is_the_settings_head_and_the_parts_of_the_objects_present() {
        let settings = Settings {
            selector: Some("team=a".into()),
            hmac_key: Some(b"k".to_vec()),
            ..Settings::default()
        };
        let config = crate::objects::ConfigKey::new(crate::objects::ConfigKind::Secret, "ns", "s");
        let present = Fingerprint::new(&config, "line", true, None);
        let absent = Fingerprint::new(&config, "", false, None);
        let made = of(&under(&settings), &[present, absent]);
        assert_eq!(
            made.render(),
            format!(
                "v1 k={} s={} p={:016x}:{:016x}",
                settings.key_id(),
                settings.id(),
                present.object,
                present.part
            )
        );
    }

    #[test]
    fn settings_ids_differ_by_selector_and_ignored_kinds_and_keys_by_key() {
        let plain = Settings::default();
        let selected = Settings {
            selector: Some("team=a".into()),
            ..Settings::default()
        };
        let ignoring = Settings {
            ignore_secrets: true,
            ..Settings::default()
        };
        assert_ne!(plain.id(), selected.id());
        assert_ne!(plain.id(), ignoring.id());
        let keyed = Settings {
            hmac_key: Some(b"k1".to_vec()),
            ..Settings::default()
        };
        assert_eq!(plain.id(), keyed.id(), "the key has an id of its own");
        assert_eq!(plain.key_id(), "none");
        assert_ne!(keyed.key_id(), "none");
        assert!(!keyed.key_id().contains("k1"));
    }

    #[test]
    fn across_a_settings_change_only_a_changed_part_of_an_object_present_then_and_now_rolls() {
        let then = basis("none", "a", &[(1, 10), (2, 20)]);
        // Object 2 no longer counts, object 3 newly does: settings only.
        let now = basis("none", "b", &[(1, 10), (3, 30)]);
        assert_eq!(compare(Some(&then), &now, None), Across::SettingsOnly);
        let now = basis("none", "b", &[(1, 11)]);
        assert_eq!(compare(Some(&then), &now, None), Across::DataChanged);
        let same = basis("none", "a", &[(1, 11)]);
        assert_eq!(compare(Some(&then), &same, None), Across::SameBasis);
        assert_eq!(compare(None, &now, None), Across::SameBasis);
    }

    #[test]
    fn across_a_new_key_the_parts_under_the_recorded_key_decide_when_it_is_still_given() {
        let then = basis("k1", "a", &[(1, 10), (2, 20)]);
        let rekeyed = basis("k2", "a", &[(1, 99), (2, 98)]);
        // The old key gone: nothing to compare.
        assert_eq!(compare(Some(&then), &rekeyed, None), Across::KeyUnavailable);
        // Under the old key the parts now are those recorded: the key alone changed.
        let under_k1 = [(1, 10), (2, 20)];
        assert_eq!(
            compare(Some(&then), &rekeyed, Some(&under_k1)),
            Across::SettingsOnly
        );
        let under_k1 = [(1, 10), (2, 21)];
        assert_eq!(
            compare(Some(&then), &rekeyed, Some(&under_k1)),
            Across::DataChanged
        );
        // The same key: its own parts, whatever else is given.
        let resettled = basis("k1", "b", &[(1, 11)]);
        assert_eq!(
            compare(Some(&then), &resettled, Some(&[(1, 10)])),
            Across::DataChanged
        );
    }

    #[test]
    fn a_recorded_key_is_found_among_the_current_and_previous_keys_by_its_id_alone() {
        let settings = Settings {
            hmac_key: Some(b"new".to_vec()),
            previous_keys: vec![b"old".to_vec()],
            ..Settings::default()
        };
        let old = key_id(Some(b"old"));
        assert_eq!(settings.key_by_id(&old), Some(Some(&b"old"[..])));
        assert_eq!(
            settings.key_by_id(&settings.key_id()),
            Some(Some(&b"new"[..]))
        );
        assert_eq!(settings.key_by_id("none"), Some(None));
        assert_eq!(settings.key_by_id(&key_id(Some(b"gone"))), None);
        assert_eq!(settings.previous_key_ids(), vec![old]);
        let printed = format!("{settings:?}");
        assert!(
            !printed.contains("new") && !printed.contains("old"),
            "{printed}"
        );
    }
}
