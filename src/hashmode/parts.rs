//! One referenced object's part of a workload's hash, as a short fingerprint: what the
//! reconciler remembers to tell a data change from a change of which objects count.

use sha2::{Digest as _, Sha256};

use crate::model::counted::Counted;
use crate::model::hash::{self, ConfigHash};
use crate::objects::{ConfigKey, Digest};

/// One referenced object's part of the hash, in 17 bytes: a hash of its identity and of
/// its lines of the canonical form (the memory of 1,000 workloads stays small).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fingerprint {
    pub(crate) object: u64,
    pub(crate) part: u64,
    /// The object existed (its part is of its data, not of its absence).
    pub(crate) present: bool,
}

/// The first 8 bytes of the SHA-256 of an object's identity (`configmap ns/name`): how a
/// fingerprint, a recorded basis and the fan-out's memory name an object.
pub(crate) fn object_id(config: &ConfigKey) -> u64 {
    let digest: Digest = Sha256::digest(config.to_string().as_bytes()).into();
    u64::from_le_bytes(digest[..8].try_into().expect("8 bytes"))
}

impl Fingerprint {
    /// `hmac_key` (`--hash-key-file`) keys the part, as it keys the hash: a part is
    /// recorded on the workload ([`crate::hashmode::basis`]) and must not let anyone guess
    /// a low-entropy Secret either.
    pub(crate) fn new(
        config: &ConfigKey,
        canonical_part: &str,
        present: bool,
        hmac_key: Option<&[u8]>,
    ) -> Fingerprint {
        let first8 = |digest: &[u8]| u64::from_le_bytes(digest[..8].try_into().expect("8 bytes"));
        let part: Digest = match hmac_key {
            Some(key) => hash::hmac_sha256(key, canonical_part.as_bytes()),
            None => Sha256::digest(canonical_part.as_bytes()).into(),
        };
        Fingerprint {
            object: object_id(config),
            part: first8(&part),
            present,
        }
    }
}

/// The hash of what counts for a workload (`resolved`, from [`crate::model::counted::counted`]) under `hmac_key`,
/// with each counted object's part of it.
pub(crate) fn hash_with_parts<'a>(
    resolved: &'a [Counted],
    hmac_key: Option<&[u8]>,
) -> (ConfigHash, Vec<(&'a ConfigKey, Fingerprint)>) {
    let computed = hash::compute(
        resolved
            .iter()
            .map(|(r, e)| (r, e.as_ref().and_then(|e| e.digests()))),
        hmac_key,
    );
    let named = resolved
        .iter()
        .map(|(r, e)| {
            let text = hash::canonical_form(&[(r, e.as_ref().and_then(|e| e.digests()))]);
            (
                &r.config,
                Fingerprint::new(&r.config, &text, e.is_some(), hmac_key),
            )
        })
        .collect();
    (computed, named)
}

/// The parts of the objects of `resolved` that exist, under `hmac_key` alone (no hash):
/// what a basis recorded under that key is compared with.
pub(crate) fn parts_under(resolved: &[Counted], hmac_key: Option<&[u8]>) -> Vec<(u64, u64)> {
    resolved
        .iter()
        .filter(|(_, e)| e.is_some())
        .map(|(r, e)| {
            let text = hash::canonical_form(&[(r, e.as_ref().and_then(|e| e.digests()))]);
            let f = Fingerprint::new(&r.config, &text, true, hmac_key);
            (f.object, f.part)
        })
        .collect()
}
