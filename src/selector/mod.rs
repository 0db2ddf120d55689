//! Label selectors exactly as the API server parses them (`labels.Parse`), and matching.
//!
//! The grammar, the lexer's whitespace and keyword rules, the key and value validation and
//! the error texts follow `k8s.io/apimachinery/pkg/labels/selector.go` (Kubernetes 1.36), so
//! a selector that wavelet accepts is one the API server accepts, and a rejected one is
//! reported with the text `kubectl` users know (recorded in `k8s-wire/058`–`063`):
//!
//! ```text
//! selector     := "" | requirement { "," requirement }      // "," is AND; no trailing ","
//! requirement  := "!" KEY                                    // does not exist
//!               | KEY                                        // exists
//!               | KEY ( "=" | "==" | "!=" ) [VALUE]          // no VALUE means ""
//!               | KEY ( "in" | "notin" ) "(" [VALUE] { "," [VALUE] } ")"
//!               | KEY ( ">" | "<" ) INTEGER                  // base 10, int64
//! KEY          := [ DNS-1123 subdomain (<= 253) "/" ] NAME    // NAME <= 63
//! VALUE        := "" | NAME                                  // <= 63
//! NAME         := [A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?
//! ```
//!
//! `in` and `notin` are keywords only where an operator is expected: `in in (in)` is the
//! key `in` with the value `in`. Whitespace (space, tab, CR, LF) separates tokens.

mod lex;
mod parse;
#[cfg(test)]
mod test_support;
mod validate;

use std::collections::BTreeMap;
use std::fmt;

/// A parsed label selector: the AND of its requirements (none: matches everything).
///
/// Requirements are kept sorted (by key, then by their text), so two selectors that differ
/// only in the order of their requirements, or in `=` versus `==`, compare equal.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Selector {
    requirements: Vec<Requirement>,
}

/// One `key op values` term of a selector.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Requirement {
    key: String,
    operator: Operator,
    /// Sorted and de-duplicated, as the server's `sets.String` keeps them. One value for
    /// `=`, `!=`, `>`, `<`; at least one (possibly `""`) for `in`/`notin`; none otherwise.
    values: Vec<String>,
}

/// The relation a requirement states between a label's value and its values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Operator {
    /// `=` or `==` (the same thing; rendered as `=`).
    Equals,
    NotEquals,
    In,
    NotIn,
    Exists,
    DoesNotExist,
    GreaterThan,
    LessThan,
}

/// Why a selector was rejected. `Display` gives the API server's message for the same input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SelectorError {
    /// Between requirements: a token where a requirement, `,` or the end was expected,
    /// e.g. `=web`, `app=web,,`, `app=web)`.
    Syntax {
        found: String,
        expected: &'static str,
    },
    /// Inside a requirement: a token where an operator, `(` or a value was expected,
    /// e.g. `app in web`, `Bad Key=x`.
    Requirement {
        found: String,
        expected: &'static str,
    },
    /// A key that is not a valid label key (`reason` says which rule it breaks).
    InvalidKey { key: String, reason: String },
    /// Values that are not valid for their key or operator, e.g. a value longer than 63
    /// bytes or a `>` bound that is not an integer.
    InvalidValues(Vec<InvalidValue>),
}

/// One rejected value, named by its field path as the server names it (`values[0][app]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidValue {
    pub field: String,
    pub value: String,
    pub reason: String,
}

impl fmt::Display for InvalidValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: Invalid value: {:?}: {}",
            self.field, self.value, self.reason
        )
    }
}

impl fmt::Display for SelectorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SelectorError::Syntax { found, expected } => {
                write!(f, "found '{found}', expected: {expected}")
            }
            SelectorError::Requirement { found, expected } => {
                // The server's one message without a comma before "expected".
                let sep = if *expected == "'('" { "" } else { "," };
                write!(
                    f,
                    "unable to parse requirement: found '{found}'{sep} expected: {expected}"
                )
            }
            // The server validates the key with a nil field path, hence its `<nil>`.
            SelectorError::InvalidKey { key, reason } => {
                write!(
                    f,
                    "unable to parse requirement: <nil>: Invalid value: {key:?}: {reason}"
                )
            }
            SelectorError::InvalidValues(errors) => {
                // Like Go's `utilerrors.Aggregate`: one error bare, several in brackets.
                let mut unique: Vec<String> = Vec::new();
                for e in errors {
                    let text = e.to_string();
                    if !unique.contains(&text) {
                        unique.push(text);
                    }
                }
                if unique.len() == 1 {
                    write!(f, "unable to parse requirement: {}", unique[0])
                } else {
                    write!(f, "unable to parse requirement: [{}]", unique.join(", "))
                }
            }
        }
    }
}

impl std::error::Error for SelectorError {}

impl Selector {
    /// Parses `s` with the API server's grammar (see the module docs).
    ///
    /// The empty string, or only whitespace, is the empty selector. Callers that act on
    /// the result (delete mode) must refuse it themselves: see [`Selector::selects_everything`].
    pub fn parse(s: &str) -> Result<Selector, SelectorError> {
        let mut requirements = parse::requirements(s)?;
        requirements.sort_by_cached_key(|r| (r.key.clone(), r.to_string()));
        Ok(Selector { requirements })
    }

    /// True when every requirement holds for `labels` (see the API server's
    /// `Requirement.Matches`): `=`/`in` need the key present with one of the values;
    /// `!=`/`notin` hold when the key is absent or its value is not listed; `>`/`<` need the
    /// key present with a base-10 int64 value that compares strictly.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }

    /// No requirements: the selector matches every label set.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// True when the selector matches every possible label set, i.e. it would select every
    /// Pod in a namespace. Used to refuse delete-mode selectors.
    ///
    /// This is exactly [`Selector::is_empty`], and here is why no non-empty selector can
    /// match everything. A selector is an AND, so it matches every label set only if each
    /// requirement does; and every kind of requirement the grammar can produce is false for
    /// some valid label set:
    /// - `k`, `k=v`, `k in (..)`, `k>n`, `k<n` are false when `k` is absent;
    /// - `!k` is false when `k` is present;
    /// - `k!=v`, `k notin (..)` are false when `k` has a listed value — every listed value,
    ///   `""` included (`k notin ()`), is a valid label value, so such labels exist.
    ///
    /// Selectors that match *almost* everything (`!canary`, `tier notin ()`) are therefore
    /// not refused by this predicate; a caller that wants to insist on a positive
    /// condition can use [`Selector::requires_a_label`].
    pub fn selects_everything(&self) -> bool {
        self.is_empty()
    }

    /// True when at least one requirement can only hold for a label set that has some key
    /// (`k`, `k=v`, `k in (..)`, `k>n`, `k<n`): the selector never matches an unlabeled Pod.
    /// A selector made only of `!k`, `!=` and `notin` terms returns false.
    pub fn requires_a_label(&self) -> bool {
        self.requirements.iter().any(|r| {
            matches!(
                r.operator,
                Operator::Equals
                    | Operator::In
                    | Operator::Exists
                    | Operator::GreaterThan
                    | Operator::LessThan
            )
        })
    }

    /// The canonical text for `?labelSelector=` before URL encoding (see
    /// [`percent_encode_query_value`]): requirements sorted by key, `,`-separated, values
    /// of `in`/`notin` sorted, `==` written as `=`. Parsing it gives back an equal selector.
    pub fn to_query_string(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

impl Requirement {
    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let value = labels.get(&self.key);
        let listed = |v: &String| self.values.iter().any(|x| x == v);
        match self.operator {
            Operator::Equals | Operator::In => value.is_some_and(listed),
            Operator::NotEquals | Operator::NotIn => !value.is_some_and(listed),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
            Operator::GreaterThan | Operator::LessThan => {
                let (Some(have), Some(bound)) = (
                    value.and_then(|v| v.parse::<i64>().ok()),
                    self.values.first().and_then(|v| v.parse::<i64>().ok()),
                ) else {
                    return false;
                };
                if self.operator == Operator::GreaterThan {
                    have > bound
                } else {
                    have < bound
                }
            }
        }
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let values = self.values.join(",");
        match self.operator {
            Operator::Exists => write!(f, "{}", self.key),
            Operator::DoesNotExist => write!(f, "!{}", self.key),
            Operator::Equals => write!(f, "{}={values}", self.key),
            Operator::NotEquals => write!(f, "{}!={values}", self.key),
            Operator::GreaterThan => write!(f, "{}>{values}", self.key),
            Operator::LessThan => write!(f, "{}<{values}", self.key),
            Operator::In => write!(f, "{} in ({values})", self.key),
            Operator::NotIn => write!(f, "{} notin ({values})", self.key),
        }
    }
}

/// Percent-encodes `s` for use as one query-string value: the RFC 3986 unreserved
/// characters (`A-Z a-z 0-9 - . _ ~`) are kept, every other byte becomes `%XX` (upper-case
/// hex), so `=`, `,`, `!`, `(`, `)`, space, `&`, `+` and `#` are all safe to send.
///
/// `percent_encode_query_value("app in (web,api),!canary")` is
/// `app%20in%20%28web%2Capi%29%2C%21canary`, the form recorded in `k8s-wire/056`.
pub fn percent_encode_query_value(s: &str) -> String {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut out = String::with_capacity(s.len());
    for &b in s.as_bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push('%');
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 0x0f)]));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selector::test_support::*;

    #[test]
    fn wire_055_equality_selector_matches_the_pods_the_server_listed() {
        let sel = parse("app=web");
        assert!(sel.matches(&labels(&[
            ("app", "web"),
            ("pod-template-hash", "65fcdbbc7d")
        ])));
        assert!(sel.matches(&labels(&[("app", "web"), ("canary", "yes")])));
        assert!(!sel.matches(&labels(&[("app", "api")])));
    }

    #[test]
    fn wire_056_set_based_selector_matches_the_pods_the_server_listed() {
        let sel = parse("app in (web,api),!canary");
        assert!(sel.matches(&labels(&[("app", "api")])));
        assert!(sel.matches(&labels(&[
            ("app", "web"),
            ("pod-template-hash", "b7db5bfb4")
        ])));
        assert!(!sel.matches(&labels(&[("app", "web"), ("canary", "yes")])));
        assert_eq!(sel.to_query_string(), "app in (api,web),!canary");
    }

    #[test]
    fn wire_057_double_equals_without_value_means_the_empty_value() {
        let sel = parse("app==");
        assert!(sel.matches(&labels(&[("app", "")])));
        assert!(!sel.matches(&labels(&[("app", "web")])));
        assert!(!sel.matches(&labels(&[])));
        assert_eq!(sel.to_query_string(), "app=");
    }

    #[test]
    fn wire_058_in_without_parentheses_fails_like_the_server() {
        assert_eq!(
            error("app in web"),
            "unable to parse requirement: found 'web' expected: '('"
        );
    }

    #[test]
    fn wire_059_selector_starting_with_an_operator_fails_like_the_server() {
        assert_eq!(
            error("=web"),
            "found '=', expected: !, identifier, or 'end of string'"
        );
    }

    #[test]
    fn wire_060_trailing_commas_fail_like_the_server() {
        assert_eq!(
            error("app=web,,"),
            "found ',', expected: identifier after ','"
        );
    }

    #[test]
    fn wire_061_key_with_a_space_fails_like_the_server() {
        assert_eq!(
            error("Bad Key=x"),
            "unable to parse requirement: found 'Key', expected: in, notin, =, ==, !=, gt, lt"
        );
    }

    #[test]
    fn wire_062_value_longer_than_63_bytes_fails_like_the_server() {
        let v = "v".repeat(64);
        assert_eq!(
            error(&format!("app={v}")),
            format!("unable to parse requirement: values[0][app]: Invalid value: \"{v}\": must be no more than 63 bytes")
        );
        parse(&format!("app={}", "v".repeat(63)));
    }

    #[test]
    fn wire_063_unbalanced_parenthesis_fails_like_the_server() {
        assert_eq!(
            error("app=web)"),
            "found ')', expected: ',' or 'end of string'"
        );
    }

    #[test]
    fn equals_and_in_need_the_key_present_with_a_listed_value() {
        let eq = parse("a=1");
        let inn = parse("a in (1,2)");
        assert!(eq.matches(&labels(&[("a", "1")])));
        assert!(!eq.matches(&labels(&[])));
        assert!(inn.matches(&labels(&[("a", "2")])));
        assert!(!inn.matches(&labels(&[("a", "3")])));
        assert!(!inn.matches(&labels(&[("b", "1")])));
    }

    #[test]
    fn not_equals_and_notin_are_true_when_the_key_is_absent() {
        assert!(parse("a!=1").matches(&labels(&[])));
        assert!(parse("a notin (1,2)").matches(&labels(&[("b", "1")])));
        assert!(!parse("a notin (1,2)").matches(&labels(&[("a", "1")])));
        assert!(parse("a notin (1,2)").matches(&labels(&[("a", "3")])));
    }

    #[test]
    fn exists_and_does_not_exist_look_only_at_the_key() {
        assert!(parse("a").matches(&labels(&[("a", "")])));
        assert!(!parse("a").matches(&labels(&[])));
        assert!(parse("!a").matches(&labels(&[("b", "x")])));
        assert!(!parse("!a").matches(&labels(&[("a", "")])));
    }

    #[test]
    fn gt_and_lt_compare_integers_strictly_and_need_an_integer_label() {
        let gt = parse("n>5");
        assert!(gt.matches(&labels(&[("n", "6")])));
        assert!(!gt.matches(&labels(&[("n", "5")])));
        assert!(
            gt.matches(&labels(&[("n", "10")])),
            "numeric, not lexicographic"
        );
        assert!(!gt.matches(&labels(&[("n", "x")])));
        assert!(!gt.matches(&labels(&[])));
        assert!(
            gt.matches(&labels(&[("n", "+7")])),
            "Go's ParseInt accepts a sign"
        );
        let lt = parse("n<007");
        assert!(lt.matches(&labels(&[("n", "-3")])));
        assert!(!lt.matches(&labels(&[("n", "7")])));
        assert_eq!(lt.to_query_string(), "n<007");
    }

    #[test]
    fn all_requirements_must_hold() {
        let sel = parse("app=web,tier!=db");
        assert!(sel.matches(&labels(&[("app", "web"), ("tier", "fe")])));
        assert!(!sel.matches(&labels(&[("app", "web"), ("tier", "db")])));
    }

    #[test]
    fn only_the_empty_selector_selects_everything() {
        assert!(parse("").selects_everything());
        for s in ["!x", "x notin ()", "x!=", "x", "x in ()", "x>1"] {
            assert!(!parse(s).selects_everything(), "{s}");
        }
    }

    #[test]
    fn purely_negative_selectors_do_not_require_a_label() {
        for s in ["", "!x", "x notin (a)", "x!=y,!z"] {
            assert!(!parse(s).requires_a_label(), "{s}");
        }
        for s in ["x", "x=y", "x in (a)", "!z,x>1", "x<2"] {
            assert!(parse(s).requires_a_label(), "{s}");
        }
    }

    #[test]
    fn percent_encoding_matches_the_recorded_request() {
        assert_eq!(
            percent_encode_query_value("app in (web,api),!canary"),
            "app%20in%20%28web%2Capi%29%2C%21canary"
        );
        assert_eq!(percent_encode_query_value("app=web"), "app%3Dweb");
        assert_eq!(
            percent_encode_query_value("a-b.c_d~e+&#/é"),
            "a-b.c_d~e%2B%26%23%2F%C3%A9"
        );
    }

    #[test]
    fn canonical_form_round_trips() {
        for s in ["a=b", "!a,b in (,x),c notin (y,z),d>1,e<2,f", "x.io/y!=z"] {
            let sel = parse(s);
            assert_eq!(parse(&sel.to_query_string()), sel, "{s}");
        }
    }
}
