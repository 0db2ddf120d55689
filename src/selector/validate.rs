//! Key and value validation: `IsLabelKey`, `IsLabelValue`, `IsDNS1123Subdomain`, with the
//! API server's rules and messages.

use crate::selector::{InvalidValue, Operator, SelectorError};

pub(super) const NAME_MAX: usize = 63;
pub(super) const PREFIX_MAX: usize = 253;
pub(super) const NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
pub(super) const NAME_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
pub(super) const VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
pub(super) const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
pub(super) const SUBDOMAIN_FMT: &str =
    r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";

pub(super) fn max_len_error(n: usize) -> String {
    format!("must be no more than {n} bytes")
}

/// Go's `RegexError`, including its spacing.
pub(super) fn regex_error(msg: &str, re: &str, examples: &[&str]) -> String {
    let examples: Vec<String> = examples.iter().map(|e| format!("'{e}', ")).collect();
    format!(
        "{msg} (e.g. {}regex used for validation is '{re}')",
        examples.join(" or ")
    )
}

/// `[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?`, without a length limit.
pub(super) fn is_name(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

/// Lowercase RFC 1123 subdomain: dot-separated labels `[a-z0-9]([-a-z0-9]*[a-z0-9])?`.
pub(super) fn is_dns1123_subdomain(s: &str) -> bool {
    s.split('.').all(|label| {
        let b = label.as_bytes();
        let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
        match (b.first(), b.last()) {
            (Some(first), Some(last)) => {
                alnum(first) && alnum(last) && b.iter().all(|c| alnum(c) || *c == b'-')
            }
            _ => false,
        }
    })
}

/// Why `key` is not a valid label key (`"; "`-joined, as the server joins them), if it is not.
pub(super) fn label_key_error(key: &str) -> Option<String> {
    let name_regex = || regex_error(NAME_MSG, NAME_FMT, &["MyName", "my.name", "123-abc"]);
    let mut errors = Vec::new();
    let parts: Vec<&str> = key.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errors.push("prefix part must be non-empty".to_string());
            } else {
                if prefix.len() > PREFIX_MAX {
                    errors.push(format!("prefix part {}", max_len_error(PREFIX_MAX)));
                }
                if !is_dns1123_subdomain(prefix) {
                    let msg = regex_error(SUBDOMAIN_MSG, SUBDOMAIN_FMT, &["example.com"]);
                    errors.push(format!("prefix part {msg}"));
                }
            }
            *name
        }
        _ => {
            return Some(format!(
                "a valid label key {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                name_regex()
            ))
        }
    };
    if name.is_empty() {
        errors.push("name part must be non-empty".to_string());
    } else if name.len() > NAME_MAX {
        errors.push(format!("name part {}", max_len_error(NAME_MAX)));
    }
    if !is_name(name) {
        errors.push(format!("name part {}", name_regex()));
    }
    (!errors.is_empty()).then(|| errors.join("; "))
}

/// Why `value` is not a valid label value, if it is not.
pub(super) fn label_value_error(value: &str) -> Option<String> {
    let mut errors = Vec::new();
    if value.len() > NAME_MAX {
        errors.push(max_len_error(NAME_MAX));
    }
    if !value.is_empty() && !is_name(value) {
        errors.push(regex_error(
            VALUE_MSG,
            &format!("({NAME_FMT})?"),
            &["MyValue", "my_value", "12345"],
        ));
    }
    (!errors.is_empty()).then(|| errors.join("; "))
}

/// The server's `NewRequirement` checks on values, in its order: integer bounds for `>`/`<`
/// first, then every value as a label value.
pub(super) fn validate_values(
    key: &str,
    operator: Operator,
    values: &[String],
) -> Result<(), SelectorError> {
    let mut errors = Vec::new();
    if matches!(operator, Operator::GreaterThan | Operator::LessThan) {
        for (i, v) in values.iter().enumerate() {
            if v.parse::<i64>().is_err() {
                errors.push(InvalidValue {
                    field: format!("values[{i}]"),
                    value: v.clone(),
                    reason: "for 'Gt', 'Lt' operators, the value must be an integer".to_string(),
                });
            }
        }
    }
    for (i, v) in values.iter().enumerate() {
        if let Some(reason) = label_value_error(v) {
            errors.push(InvalidValue {
                field: format!("values[{i}][{key}]"),
                value: v.clone(),
                reason,
            });
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(SelectorError::InvalidValues(errors))
    }
}

#[cfg(test)]
mod tests {
    use crate::selector::test_support::*;

    #[test]
    fn prefixed_keys_are_accepted() {
        let sel = parse("app.kubernetes.io/name=web,example.com/My_Key.x-1");
        assert_eq!(
            sel.to_query_string(),
            "app.kubernetes.io/name=web,example.com/My_Key.x-1"
        );
    }

    #[test]
    fn key_name_longer_than_63_bytes_is_rejected_with_its_rule() {
        let key = "k".repeat(64);
        assert_eq!(
            error(&key),
            format!("unable to parse requirement: <nil>: Invalid value: \"{key}\": name part must be no more than 63 bytes")
        );
        parse(&"k".repeat(63));
    }

    #[test]
    fn key_name_with_bad_characters_is_rejected_with_the_pattern() {
        assert_eq!(
            error("-app=x"),
            "unable to parse requirement: <nil>: Invalid value: \"-app\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
        );
    }

    #[test]
    fn key_prefix_must_be_a_lowercase_dns_subdomain_of_at_most_253_bytes() {
        assert!(error("Example.com/a").contains("prefix part a lowercase RFC 1123 subdomain"));
        assert_eq!(
            error("/a"),
            "unable to parse requirement: <nil>: Invalid value: \"/a\": prefix part must be non-empty"
        );
        let long = format!("{}/a", vec!["a".repeat(63); 4].join("."));
        assert_eq!(long.len(), 257);
        assert!(error(&long).contains("prefix part must be no more than 253 bytes"));
        let ok = format!(
            "{}/a",
            [
                "a".repeat(63),
                "a".repeat(63),
                "a".repeat(63),
                "a".repeat(61)
            ]
            .join(".")
        );
        assert_eq!(ok.len(), 253 + 2);
        parse(&ok);
    }

    #[test]
    fn key_with_empty_name_part_reports_both_rules() {
        assert_eq!(
            error("example.com/"),
            "unable to parse requirement: <nil>: Invalid value: \"example.com/\": name part must be non-empty; name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
        );
    }

    #[test]
    fn key_with_two_slashes_is_rejected() {
        assert!(error("a/b/c").contains("a valid label key must consist of"));
    }

    #[test]
    fn values_must_be_valid_label_values() {
        assert!(error("a=b_").contains(
            "values[0][a]: Invalid value: \"b_\": a valid label must be an empty string"
        ));
        assert!(error("a in (ok,-bad)").contains("values[0][a]: Invalid value: \"-bad\""));
    }

    #[test]
    fn gt_and_lt_need_an_integer() {
        assert_eq!(
            error("a>b"),
            "unable to parse requirement: values[0]: Invalid value: \"b\": for 'Gt', 'Lt' operators, the value must be an integer"
        );
        assert!(error("a<").contains("values[0]: Invalid value: \"\": for 'Gt', 'Lt' operators"));
        // A negative bound is an integer but not a label value.
        assert!(error("a>-1").contains("values[0][a]: Invalid value: \"-1\": a valid label"));
        // Neither an integer nor a label value: both errors, bracketed as Go aggregates them.
        let e = error("a>b_");
        assert!(
            e.starts_with(
                "unable to parse requirement: [values[0]: Invalid value: \"b_\": for 'Gt'"
            ),
            "{e}"
        );
        assert!(
            e.contains(", values[0][a]: Invalid value: \"b_\": a valid label"),
            "{e}"
        );
        assert!(e.ends_with("]"), "{e}");
    }
}
