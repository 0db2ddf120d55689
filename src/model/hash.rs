//! The configuration hash: a canonical text form of everything a workload references,
//! hashed with SHA-256 (or HMAC-SHA256 under `--hash-key-file`).
//!
//! Canonical form, one line per item, each ending in `\n`, objects in order of
//! (kind, namespace, name) and keys in byte order within each object:
//!
//! ```text
//! <kind> <namespace>/<name> absent                      the object does not exist
//! <kind> <namespace>/<name> present                     it exists; then per counted key:
//! <kind> <namespace>/<name> key <key> sha256:<hex>      SHA-256 of the value's bytes
//! <kind> <namespace>/<name> key <key> absent            a named key it does not have
//! <kind> <namespace>/<name> object <id> version <v>     a SecretProviderClass's object
//! ```
//!
//! `<kind>` is `configmap`, `secret` or `secretproviderclass`; a class's `<id>` and `<v>`
//! are the hex of the first 8 bytes of the SHA-256 of the object's id and version, as its
//! Pods mounted them (`model::mounts`), and a class not read yet has no line. Value bytes
//! are the UTF-8 text of a ConfigMap's `data`, and the base64-decoded bytes of
//! `binaryData` and of a Secret's `data`. Counted keys are every key the object has when a
//! reference takes all keys, plus keys named one by one. Metadata never enters the hash.

use sha2::{Digest as _, Sha256};

use crate::model::references::Reference;
use crate::objects::{find_digest, ConfigKey, ConfigKind, KeyDigest};

/// A reference with the digests of the object it names (`None`: the object is absent).
pub type Resolved<'a> = (&'a Reference, Option<&'a [KeyDigest]>);

/// What a reference asked for that does not exist; the Pods would not start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Missing {
    Object(ConfigKey),
    Key(ConfigKey, String),
}

impl Missing {
    /// The object missing, or missing a key.
    pub fn config(&self) -> &ConfigKey {
        match self {
            Missing::Object(config) | Missing::Key(config, _) => config,
        }
    }
}

impl std::fmt::Display for Missing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Missing::Object(config) => write!(f, "{config} does not exist"),
            Missing::Key(config, key) => write!(f, "{config} has no key {key:?}"),
        }
    }
}

/// The hash of a workload's configuration, with what is missing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigHash {
    /// Lowercase hex, 64 characters.
    pub hash: String,
    /// Required objects or keys that are absent; roll nothing while this is non-empty.
    pub missing: Vec<Missing>,
}

/// Computes the hash from references resolved against the cache: each reference with the
/// object's per-key digests (sorted by key), or `None` when the object does not exist.
/// `hmac_key` switches to HMAC-SHA256.
pub fn compute<'a>(
    resolved: impl IntoIterator<Item = Resolved<'a>>,
    hmac_key: Option<&[u8]>,
) -> ConfigHash {
    let mut items: Vec<_> = resolved.into_iter().collect();
    items.sort_by(|a, b| a.0.config.cmp(&b.0.config));
    let canonical = canonical_form(&items);
    let hash = match hmac_key {
        Some(key) => hex(&hmac_sha256(key, canonical.as_bytes())),
        None => hex(&Sha256::digest(canonical.as_bytes())),
    };
    ConfigHash {
        hash,
        missing: missing(&items),
    }
}

/// The canonical text that is hashed, as documented at the top of this module.
pub fn canonical_form(items: &[Resolved<'_>]) -> String {
    let mut out = String::new();
    for (reference, digests) in items {
        let object = &reference.config;
        let prefix = format!(
            "{} {}/{}",
            object.kind.as_str(),
            object.namespace,
            object.name
        );
        let Some(digests) = digests else {
            out.push_str(&format!("{prefix} absent\n"));
            continue;
        };
        out.push_str(&format!("{prefix} present\n"));
        let mut counted: Vec<&str> = reference.keys.names().collect();
        if reference.all_keys {
            counted.extend(digests.iter().map(|(k, _)| &**k));
        }
        counted.sort_unstable();
        counted.dedup();
        for key in counted {
            match find_digest(digests, key) {
                // A class's object: 8 bytes of SHA-256 of its id and of its version.
                Some(digest) if object.kind == ConfigKind::SecretProviderClass => out.push_str(
                    &format!("{prefix} object {key} version {}\n", hex(&digest[..8])),
                ),
                Some(digest) => {
                    out.push_str(&format!("{prefix} key {key} sha256:{}\n", hex(digest)))
                }
                None => out.push_str(&format!("{prefix} key {key} absent\n")),
            }
        }
    }
    out
}

fn missing(items: &[Resolved<'_>]) -> Vec<Missing> {
    let mut out = Vec::new();
    for (reference, digests) in items {
        match digests {
            None if reference.required => out.push(Missing::Object(reference.config.clone())),
            None => {}
            Some(digests) => {
                for (key, required) in reference.keys.iter() {
                    if required && find_digest(digests, key).is_none() {
                        out.push(Missing::Key(reference.config.clone(), key.to_string()));
                    }
                }
            }
        }
    }
    out
}

/// The keys of `--hash-key-file`: one per line. The first is the key hashes are made
/// with; the lines after it are previous keys, kept while rotating so that hashes recorded
/// under them can still be checked (docs, "Rotating the hash key"). Never printed: its
/// `Debug` shows how many keys there are, not what they are.
#[derive(Clone, PartialEq, Eq)]
pub struct HashKeys {
    pub current: Vec<u8>,
    pub previous: Vec<Vec<u8>>,
}

impl std::fmt::Debug for HashKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HashKeys(1 current, {} previous)", self.previous.len())
    }
}

/// The keys in a key file's bytes (see [`HashKeys`]); the newline that ends the last line
/// is not part of its key. Only a text file holds several keys: one with any other byte
/// (a raw random key, as `head -c 32 /dev/urandom` writes) is one key, whole, as it
/// always was, whatever newline bytes it holds. The error names the line, never its
/// content.
pub fn parse_keys(bytes: &[u8]) -> Result<HashKeys, String> {
    let text = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    if text.is_empty() {
        return Err("is empty".into());
    }
    let is_text = text
        .iter()
        .all(|b| b.is_ascii_graphic() || matches!(b, b' ' | b'\t' | b'\n'));
    if !is_text {
        return Ok(HashKeys {
            current: text.to_vec(),
            previous: Vec::new(),
        });
    }
    let mut lines = Vec::new();
    for (n, line) in text.split(|b| *b == b'\n').enumerate() {
        if line.is_empty() {
            return Err(format!(
                "line {} is empty (one key per line: the current key first, then previous keys)",
                n + 1
            ));
        }
        lines.push(line.to_vec());
    }
    let current = lines.remove(0);
    Ok(HashKeys {
        current,
        previous: lines,
    })
}

/// The keys of `--hash-key-file` (see [`HashKeys`]).
pub fn read_keys(path: &std::path::Path) -> Result<HashKeys, crate::error::Error> {
    use crate::error::Error;
    let bytes = std::fs::read(path).map_err(|e| {
        Error::Config(format!(
            "cannot read --hash-key-file {}: {e}",
            path.display()
        ))
    })?;
    parse_keys(&bytes).map_err(|e| Error::Config(format!("--hash-key-file {} {e}", path.display())))
}

/// The key hashes are made with: the first line of `--hash-key-file` (see [`HashKeys`]).
pub fn read_key_file(path: &std::path::Path) -> Result<Vec<u8>, crate::error::Error> {
    read_keys(path).map(|keys| keys.current)
}

/// HMAC-SHA256 (RFC 2104).
pub fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    const BLOCK: usize = 64;
    let mut block = [0u8; BLOCK];
    if key.len() > BLOCK {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let mut inner = Sha256::new();
    inner.update(block.map(|b| b ^ 0x36));
    inner.update(message);
    let mut outer = Sha256::new();
    outer.update(block.map(|b| b ^ 0x5c));
    outer.update(inner.finalize());
    outer.finalize().into()
}

pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 15)] as char);
    }
    out
}

/// The first 8 characters of a hash, for Events and logs.
pub fn short(hash: &str) -> &str {
    hash.get(..8).unwrap_or(hash)
}

/// The data hash of a ConfigMap/Secret: SHA-256 (HMAC-SHA256 under `hmac_key`) of one line
/// `<key> sha256:<hex digest of the value>\n` per key, in key order. Keys cannot contain
/// spaces or newlines, so the form is unambiguous. Metadata never enters it.
pub fn data_hash(digests: &[KeyDigest], hmac_key: Option<&[u8]>) -> String {
    let mut sorted: Vec<&KeyDigest> = digests.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    let mut canonical = String::new();
    for (key, digest) in sorted {
        canonical.push_str(&format!("{key} sha256:{}\n", hex(digest)));
    }
    match hmac_key {
        Some(key) => hex(&hmac_sha256(key, canonical.as_bytes())),
        None => hex(&Sha256::digest(canonical.as_bytes())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::references::NamedKeys;
    use crate::objects::{ConfigKind, Digest};

    fn digest(value: &str) -> Digest {
        Sha256::digest(value.as_bytes()).into()
    }

    fn all_keys(kind: ConfigKind, ns: &str, name: &str) -> Reference {
        Reference {
            config: ConfigKey::new(kind, ns, name),
            all_keys: true,
            keys: NamedKeys::default(),
            required: true,
        }
    }

    fn one_key(kind: ConfigKind, name: &str, key: &str) -> Reference {
        Reference {
            config: ConfigKey::new(kind, "default", name),
            all_keys: false,
            keys: NamedKeys::from([(key, true)]),
            required: true,
        }
    }

    fn data(pairs: &[(&str, &str)]) -> Vec<KeyDigest> {
        let mut v: Vec<_> = pairs
            .iter()
            .map(|(k, v)| (Box::from(*k), digest(v)))
            .collect();
        v.sort();
        v
    }

    #[test]
    fn readme_test_vector() {
        // The book's "The hash" (docs/src/hash-mode.md): printf ... | sha256sum reproduces this.
        let reference = all_keys(ConfigKind::ConfigMap, "default", "app-config");
        let digests = data(&[("color", "blue")]);
        let text = canonical_form(&[(&reference, Some(&digests))]);
        assert_eq!(
            text,
            "configmap default/app-config present\n\
             configmap default/app-config key color sha256:16477688c0e00699c6cfa4497a3612d7e83c532062b64b250fed8908128ed548\n"
        );
        let hash = compute([(&reference, Some(digests.as_slice()))], None).hash;
        assert_eq!(hash, hex(&Sha256::digest(text.as_bytes())));
    }

    #[test]
    fn a_class_reads_as_8_bytes_of_sha256_of_each_objects_id_and_version() {
        use crate::objects::short_digest;
        let mut class = all_keys(ConfigKind::SecretProviderClass, "apps", "vault");
        class.required = false;
        let mounted = [(short_digest("secret/db"), short_digest("v7"))];
        let view = crate::model::mounts::majority(&[&mounted]);
        let text = canonical_form(&[(&class, Some(&view))]);
        let full = |text: &str| hex(&Sha256::digest(text.as_bytes()));
        assert_eq!(
            text,
            format!(
                "secretproviderclass apps/vault present\n\
                 secretproviderclass apps/vault object {} version {}\n",
                &full("secret/db")[..16],
                &full("v7")[..16]
            )
        );
        // Another version of the object is another hash.
        let rotated =
            crate::model::mounts::majority(&[&[(short_digest("secret/db"), short_digest("v8"))]]);
        assert_ne!(
            compute([(&class, Some(&*view))], None),
            compute([(&class, Some(&*rotated))], None)
        );
    }

    #[test]
    fn returns_the_same_hash_independent_of_reference_order() {
        let a = all_keys(ConfigKind::ConfigMap, "default", "a");
        let b = all_keys(ConfigKind::Secret, "default", "b");
        let (da, db) = (data(&[("k", "1")]), data(&[("k", "2")]));
        let one = compute([(&a, Some(da.as_slice())), (&b, Some(db.as_slice()))], None);
        let two = compute([(&b, Some(db.as_slice())), (&a, Some(da.as_slice()))], None);
        assert_eq!(one, two);
    }

    #[test]
    fn absent_object_empty_object_and_object_with_key_hash_differently() {
        let r = one_key(ConfigKind::ConfigMap, "cfg", "k");
        let empty: Vec<KeyDigest> = vec![];
        let with_key = data(&[("k", "v")]);
        let absent = compute([(&r, None)], None).hash;
        let without = compute([(&r, Some(empty.as_slice()))], None).hash;
        let present = compute([(&r, Some(with_key.as_slice()))], None).hash;
        assert_ne!(absent, without);
        assert_ne!(without, present);
        assert_ne!(absent, present);
    }

    #[test]
    fn changes_only_when_a_counted_key_changes() {
        let r = one_key(ConfigKind::Secret, "creds", "a");
        let before = data(&[("a", "1"), ("b", "1")]);
        let b_changed = data(&[("a", "1"), ("b", "2")]);
        let a_changed = data(&[("a", "2"), ("b", "1")]);
        let h = |d: &Vec<KeyDigest>| compute([(&r, Some(d.as_slice()))], None).hash;
        assert_eq!(h(&before), h(&b_changed));
        assert_ne!(h(&before), h(&a_changed));
    }

    #[test]
    fn namespace_is_part_of_identity() {
        let one = all_keys(ConfigKind::ConfigMap, "ns1", "cfg");
        let two = all_keys(ConfigKind::ConfigMap, "ns2", "cfg");
        let d = data(&[("k", "v")]);
        assert_ne!(
            compute([(&one, Some(d.as_slice()))], None).hash,
            compute([(&two, Some(d.as_slice()))], None).hash
        );
    }

    #[test]
    fn required_absent_objects_and_keys_are_reported_missing() {
        let obj = all_keys(ConfigKind::ConfigMap, "default", "gone");
        let key = one_key(ConfigKind::Secret, "creds", "password");
        let d = data(&[("user", "x")]);
        let result = compute([(&obj, None), (&key, Some(d.as_slice()))], None);
        assert_eq!(
            result.missing,
            vec![
                Missing::Object(obj.config.clone()),
                Missing::Key(key.config.clone(), "password".into())
            ]
        );
        let mut optional = obj.clone();
        optional.required = false;
        assert!(compute([(&optional, None)], None).missing.is_empty());
    }

    #[test]
    fn hmac_matches_rfc4231_test_case_2() {
        let mac = hmac_sha256(b"Jefe", b"what do ya want for nothing?");
        assert_eq!(
            hex(&mac),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    /// A raw random key (`head -c 32 /dev/urandom`) holds a newline byte one time in
    /// eight: it stays one key, whole, as before key files held several keys.
    #[test]
    fn a_binary_key_file_is_one_key_whatever_newlines_it_holds() {
        let raw = [0x9f, b'\n', 0x00, 0x41, b'\n', b'\n', 0xfe, 0x10];
        let mut file = raw.to_vec();
        file.push(b'\n');
        let keys = parse_keys(&file).unwrap();
        assert_eq!(keys.current, raw);
        assert!(keys.previous.is_empty());
    }

    #[test]
    fn a_key_file_holds_the_current_key_first_then_previous_ones() {
        let keys = parse_keys(b"new\nold\nolder\n").unwrap();
        assert_eq!(keys.current, b"new");
        assert_eq!(keys.previous, vec![b"old".to_vec(), b"older".to_vec()]);
        // One key, with or without the newline `echo` leaves; any other byte is the key's.
        assert_eq!(parse_keys(b"k\n").unwrap().current, b"k");
        assert_eq!(parse_keys(b"k").unwrap().previous, Vec::<Vec<u8>>::new());
        assert_eq!(parse_keys(b"k \r\n").unwrap().current, b"k \r");
        assert_eq!(parse_keys(b"").unwrap_err(), "is empty");
        assert_eq!(parse_keys(b"\n").unwrap_err(), "is empty");
        let error = parse_keys(b"secret\n\nold\n").unwrap_err();
        assert!(error.starts_with("line 2 is empty"), "{error}");
        assert!(!error.contains("secret"));
        assert_eq!(
            format!("{:?}", parse_keys(b"secret\nold").unwrap()),
            "HashKeys(1 current, 1 previous)"
        );
    }

    #[test]
    fn hmac_key_changes_the_published_hash() {
        let r = all_keys(ConfigKind::Secret, "default", "creds");
        let d = data(&[("password", "hunter2")]);
        let plain = compute([(&r, Some(d.as_slice()))], None).hash;
        let keyed = compute([(&r, Some(d.as_slice()))], Some(b"k")).hash;
        assert_ne!(plain, keyed);
        assert_eq!(keyed.len(), 64);
    }
}
