//! A JSON value that keeps its keys in the order they were written, printed compact or
//! indented: the build script has no serde_json (a build dependency would be built again
//! for the host), and the SBOM reads best in a fixed order.

/// A JSON value; objects keep their keys in insertion order.
#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    Str(String),
    Num(u64),
    Bool(bool),
    Arr(Vec<Json>),
    Obj(Vec<(String, Json)>),
}

impl Json {
    pub fn str(s: impl Into<String>) -> Json {
        Json::Str(s.into())
    }

    /// An object from `(key, value)` pairs, in that order.
    pub fn obj<K: Into<String>>(fields: impl IntoIterator<Item = (K, Json)>) -> Json {
        Json::Obj(fields.into_iter().map(|(k, v)| (k.into(), v)).collect())
    }

    /// One line, no spaces.
    pub fn compact(&self) -> String {
        let mut out = String::new();
        self.write(&mut out, None, 0);
        out
    }

    /// Two spaces per level, a newline at the end.
    pub fn pretty(&self) -> String {
        let mut out = String::new();
        self.write(&mut out, Some(2), 0);
        out.push('\n');
        out
    }

    fn write(&self, out: &mut String, indent: Option<usize>, level: usize) {
        match self {
            Json::Str(s) => quote(out, s),
            Json::Num(n) => out.push_str(&n.to_string()),
            Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Json::Arr(items) => {
                let items: Vec<(Option<&str>, &Json)> = items.iter().map(|v| (None, v)).collect();
                container(out, ('[', ']'), &items, indent, level);
            }
            Json::Obj(fields) => {
                let items: Vec<(Option<&str>, &Json)> =
                    fields.iter().map(|(k, v)| (Some(k.as_str()), v)).collect();
                container(out, ('{', '}'), &items, indent, level);
            }
        }
    }
}

fn container(
    out: &mut String,
    (open, close): (char, char),
    items: &[(Option<&str>, &Json)],
    indent: Option<usize>,
    level: usize,
) {
    out.push(open);
    if items.is_empty() {
        out.push(close);
        return;
    }
    let newline = |out: &mut String, level: usize| {
        if let Some(width) = indent {
            out.push('\n');
            out.push_str(&" ".repeat(width * level));
        }
    };
    for (i, (key, value)) in items.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        newline(out, level + 1);
        if let Some(key) = key {
            quote(out, key);
            out.push(':');
            if indent.is_some() {
                out.push(' ');
            }
        }
        value.write(out, indent, level + 1);
    }
    newline(out, level);
    out.push(close);
}

/// `s` as a JSON string: quotes, backslashes and control characters escaped.
fn quote(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_output_keeps_key_order_and_escapes_strings() {
        let value = Json::obj([
            ("z", Json::str("a \"quoted\" \\ line\n\u{1}")),
            ("a", Json::Arr(vec![Json::Num(1), Json::Bool(false)])),
            ("e", Json::Obj(vec![])),
        ]);
        assert_eq!(
            value.compact(),
            r#"{"z":"a \"quoted\" \\ line\n\u0001","a":[1,false],"e":{}}"#
        );
    }

    #[test]
    fn pretty_output_indents_two_spaces_and_parses_to_the_same_value() {
        let value = Json::obj([
            ("name", Json::str("wavelet")),
            (
                "list",
                Json::Arr(vec![Json::Num(7), Json::obj([("k", Json::Arr(vec![]))])]),
            ),
        ]);
        let pretty = value.pretty();
        assert_eq!(
            pretty,
            "{\n  \"name\": \"wavelet\",\n  \"list\": [\n    7,\n    {\n      \"k\": []\n    }\n  ]\n}\n"
        );
        let reparsed: serde_json::Value = serde_json::from_str(&pretty).unwrap();
        let compact: serde_json::Value = serde_json::from_str(&value.compact()).unwrap();
        assert_eq!(reparsed, compact);
    }
}
