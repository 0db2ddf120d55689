//! What the selector tests share.

use std::collections::BTreeMap;

use crate::selector::Selector;

pub(crate) fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

pub(crate) fn parse(s: &str) -> Selector {
    Selector::parse(s).unwrap_or_else(|e| panic!("{s:?} should parse: {e}"))
}

pub(crate) fn error(s: &str) -> String {
    match Selector::parse(s) {
        Ok(sel) => panic!("{s:?} should not parse, got {sel:?}"),
        Err(e) => e.to_string(),
    }
}
