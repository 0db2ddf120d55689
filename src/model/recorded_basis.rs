//! `wavelet.dev/config-basis` as a workload records it: what its recorded hash was computed
//! under (the hash mode's `basis` module says what that means and compares two).
//!
//! ```text
//! v1 k=<key id> s=<settings id> p=<object>:<part>,<object>:<part>,...
//! ```
//!
//! The cache holds one per adopted workload, read once when the workload is cached, in
//! two pieces: the head (`v1 k=… s=…`), the same on every workload hashed under the same
//! settings, so one shared copy of it ([`crate::objects::intern`]); and the parts, 16 bytes
//! each where their text is 34 characters. At 10,000 workloads of seven references each,
//! that is 1.5 MB less than the annotation's text.

use std::sync::Arc;

use crate::objects::intern;

/// A basis as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Basis {
    /// `<version> k=<key id> s=<settings id>`.
    head: Arc<str>,
    /// The objects present when the hash was computed, and their parts.
    pub parts: Box<[(u64, u64)]>,
}

impl Basis {
    pub fn new(
        version: &str,
        key_id: &str,
        settings_id: &str,
        parts: impl Into<Box<[(u64, u64)]>>,
    ) -> Basis {
        Basis {
            head: intern::shared(&format!("{version} k={key_id} s={settings_id}")),
            parts: parts.into(),
        }
    }

    /// The same head with other parts.
    pub fn with_parts(&self, parts: Box<[(u64, u64)]>) -> Basis {
        Basis {
            head: Arc::clone(&self.head),
            parts,
        }
    }

    /// The field at `index` of the head, after its `prefix`.
    fn field(&self, index: usize, prefix: &str) -> &str {
        let field = self.head.split(' ').nth(index).unwrap_or_default();
        field.strip_prefix(prefix).unwrap_or(field)
    }

    /// The version of the hash's canonical form.
    pub fn version(&self) -> &str {
        self.field(0, "")
    }

    /// The id of the key the parts (and the hash) were made under, or `none`.
    pub fn key_id(&self) -> &str {
        self.field(1, "k=")
    }

    /// The id of the settings other than the key.
    pub fn settings_id(&self) -> &str {
        self.field(2, "s=")
    }

    /// The annotation's value.
    pub fn render(&self) -> String {
        let parts: Vec<String> = self
            .parts
            .iter()
            .map(|(object, part)| format!("{object:016x}:{part:016x}"))
            .collect();
        format!("{} p={}", self.head, parts.join(","))
    }

    /// Parses an annotation's value; `None` when it is not one.
    pub fn parse(text: &str) -> Option<Basis> {
        let mut fields = text.split(' ');
        let version = fields.next()?;
        let key_id = fields.next()?.strip_prefix("k=")?;
        let settings_id = fields.next()?.strip_prefix("s=")?;
        let parts_text = fields.next()?.strip_prefix("p=")?;
        if fields.next().is_some() {
            return None;
        }
        let parts = parts_text
            .split(',')
            .filter(|p| !p.is_empty())
            .map(|part| {
                let (object, digest) = part.split_once(':')?;
                Some((
                    u64::from_str_radix(object, 16).ok()?,
                    u64::from_str_radix(digest, 16).ok()?,
                ))
            })
            .collect::<Option<Box<[(u64, u64)]>>>()?;
        Some(Basis::new(version, key_id, settings_id, parts))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_basis_renders_and_parses_back() {
        let b = Basis::new("v1", "none", "0011223344556677", [(1, 2), (u64::MAX, 0)]);
        let text = b.render();
        assert_eq!(
            text,
            "v1 k=none s=0011223344556677 p=0000000000000001:0000000000000002,ffffffffffffffff:0000000000000000"
        );
        let parsed = Basis::parse(&text).unwrap();
        assert_eq!(parsed, b);
        assert_eq!(
            (parsed.version(), parsed.key_id(), parsed.settings_id()),
            ("v1", "none", "0011223344556677")
        );
        assert_eq!(
            Basis::parse("v1 k=none s=00 p=").map(|b| b.parts.len()),
            Some(0)
        );
    }

    #[test]
    fn what_is_not_a_basis_does_not_parse() {
        for text in [
            "garbage",
            "v1 k=none s=00",
            "v1 s=00 k=none p=",
            "v1 k=none s=00 p= extra",
            "v1 k=none s=00 p=01",
            "v1 k=none s=00 p=01:zz",
        ] {
            assert_eq!(Basis::parse(text), None, "{text}");
        }
    }

    #[test]
    fn workloads_hashed_under_the_same_settings_share_one_head() {
        let a = Basis::parse("v1 k=none s=5eed000000000001 p=0000000000000001:0000000000000002")
            .unwrap();
        let b = Basis::parse("v1 k=none s=5eed000000000001 p=").unwrap();
        assert!(Arc::ptr_eq(&a.head, &b.head));
    }
}
