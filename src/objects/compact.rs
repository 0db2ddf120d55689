//! Compact forms of the identifiers the cache keeps for every object: a uid in 16 bytes
//! and a resourceVersion in 8, when they have the shape a real API server gives them,
//! else the text as is. Both print back exactly the text they were made from.
//!
//! Both enums are as small as their common form: a resourceVersion is 16 bytes (the
//! compiler keeps the variant in the text pointer's niche), a uid 24.

use std::fmt;

/// An object's `metadata.uid`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Uid {
    /// A lowercase, hyphenated UUID (what the API server generates).
    Uuid([u8; 16]),
    Text(Box<str>),
}

impl Uid {
    pub fn new(text: &str) -> Uid {
        parse_uuid(text).map_or_else(|| Uid::Text(text.into()), Uid::Uuid)
    }
}

/// Where the hyphens of `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` are.
const HYPHENS: [usize; 4] = [8, 13, 18, 23];

fn parse_uuid(text: &str) -> Option<[u8; 16]> {
    let bytes = text.as_bytes();
    if bytes.len() != 36 || HYPHENS.iter().any(|&i| bytes[i] != b'-') {
        return None;
    }
    let mut digits = bytes
        .iter()
        .enumerate()
        .filter(|(i, _)| !HYPHENS.contains(i))
        .map(|(_, b)| match b {
            b'0'..=b'9' => Some(b - b'0'),
            b'a'..=b'f' => Some(b - b'a' + 10),
            _ => None,
        });
    let mut out = [0u8; 16];
    for byte in &mut out {
        *byte = (digits.next()?? << 4) | digits.next()??;
    }
    Some(out)
}

impl fmt::Display for Uid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Uid::Text(text) => f.write_str(text),
            Uid::Uuid(bytes) => {
                for (i, byte) in bytes.iter().enumerate() {
                    if matches!(i, 4 | 6 | 8 | 10) {
                        f.write_str("-")?;
                    }
                    write!(f, "{byte:02x}")?;
                }
                Ok(())
            }
        }
    }
}

/// An object's `metadata.resourceVersion`. Opaque to clients: compared for equality only,
/// never ordered, except through [`ResourceVersion::number`] where both sides are the
/// numbers an etcd-backed server gives (one revision counter across every kind), as
/// watches judge a server that went backwards.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ResourceVersion {
    /// Decimal digits without a leading zero (what an etcd-backed server gives).
    Number(u64),
    /// Anything else (another storage, a fake).
    Text(Box<str>),
}

impl ResourceVersion {
    /// The etcd revision it is, when it is a number; `None` for an opaque one, which never
    /// orders.
    pub fn number(&self) -> Option<u64> {
        match self {
            ResourceVersion::Number(n) => Some(*n),
            ResourceVersion::Text(_) => None,
        }
    }

    pub fn new(text: &str) -> ResourceVersion {
        let canonical = !text.is_empty()
            && text.bytes().all(|b| b.is_ascii_digit())
            && (text == "0" || !text.starts_with('0'));
        match text.parse() {
            Ok(number) if canonical => ResourceVersion::Number(number),
            _ => ResourceVersion::Text(text.into()),
        }
    }
}

impl fmt::Display for ResourceVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResourceVersion::Number(n) => write!(f, "{n}"),
            ResourceVersion::Text(text) => f.write_str(text),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_are_kept_in_16_bytes_and_print_back_exactly() {
        let text = "86afebcc-5d98-4e7a-8314-4681f1cb1265";
        let uid = Uid::new(text);
        assert!(matches!(uid, Uid::Uuid(_)));
        assert_eq!(uid.to_string(), text);
    }

    #[test]
    fn other_uids_are_kept_as_text() {
        for text in [
            "",
            "u1",
            "86AFEBCC-5D98-4E7A-8314-4681F1CB1265",
            "86afebcc5d984e7a83144681f1cb1265xxxx",
            "86afebcc-5d98-4e7a-8314-4681f1cb126g",
        ] {
            let uid = Uid::new(text);
            assert_eq!(uid, Uid::Text(text.into()), "{text}");
            assert_eq!(uid.to_string(), text);
        }
    }

    #[test]
    fn numeric_resource_versions_are_numbers_and_print_back_exactly() {
        assert_eq!(
            ResourceVersion::new("18595"),
            ResourceVersion::Number(18595)
        );
        assert_eq!(ResourceVersion::new("0"), ResourceVersion::Number(0));
        for text in ["", "007", "12a", "99999999999999999999999", "-1"] {
            let rv = ResourceVersion::new(text);
            assert_eq!(rv, ResourceVersion::Text(text.into()), "{text}");
            assert_eq!(rv.to_string(), text);
        }
    }

    #[test]
    fn the_compact_forms_stay_small() {
        assert_eq!(std::mem::size_of::<Uid>(), 24);
        assert_eq!(std::mem::size_of::<ResourceVersion>(), 16);
    }
}
