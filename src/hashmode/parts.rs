//! One referenced object's part of a workload's hash, as a short fingerprint: what the
//! reconciler remembers to tell a data change from a change of which objects count.

use sha2::{Digest as _, Sha256};

use crate::model::counted::Counted;
use crate::model::hash::{self, ConfigHash};
use crate::objects::{ConfigKey, Digest};

/// One referenced object's part of the hash, in 16 bytes: a hash of its identity and of
/// its lines of the canonical form (the memory of 1,000 workloads stays small).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fingerprint {
    pub(crate) object: u64,
    pub(crate) part: u64,
}

impl Fingerprint {
    pub(crate) fn new(config: &ConfigKey, canonical_part: &str) -> Fingerprint {
        let first8 = |bytes: &[u8]| {
            let digest: Digest = Sha256::digest(bytes).into();
            u64::from_le_bytes(digest[..8].try_into().expect("8 bytes"))
        };
        Fingerprint {
            object: first8(config.to_string().as_bytes()),
            part: first8(canonical_part.as_bytes()),
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
            (&r.config, Fingerprint::new(&r.config, &text))
        })
        .collect();
    (computed, named)
}
