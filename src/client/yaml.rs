//! YAML (and so JSON, which is YAML) into `serde_json::Value`, for kubeconfig files and
//! the manifests' tests: the whole YAML 1.2 syntax that real tools write (folded and
//! block scalars, quoted strings over several lines, flow collections over several lines,
//! anchors and aliases, comments, `---`), parsed by `yaml-rust2`.
//!
//! Scalars follow YAML 1.2's core schema (`yes` is a string). Mapping keys become strings.
//! [`parse`] reads only the first document of a stream, as kubectl reads a kubeconfig;
//! [`parse_all`] reads every one (manifests: `kubectl apply -f`, kustomize, Helm output).

use serde_json::{Map, Number, Value};
use std::fmt;
use yaml_rust2::{Yaml, YamlLoader};

/// Why a document could not be read, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct YamlError {
    /// 1-based line number.
    pub line: usize,
    pub message: String,
}

impl fmt::Display for YamlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

/// Parses the first document of `text`; an empty text is `null`.
pub fn parse(text: &str) -> Result<Value, YamlError> {
    let docs = YamlLoader::load_from_str(text).map_err(|e| YamlError {
        line: e.marker().line(),
        message: e.info().to_string(),
    })?;
    match docs.into_iter().next() {
        None => Ok(Value::Null),
        Some(doc) => to_json(doc),
    }
}

/// Parses every document of `text`, in order; empty documents (`---` twice) are skipped.
pub fn parse_all(text: &str) -> Result<Vec<Value>, YamlError> {
    let docs = YamlLoader::load_from_str(text).map_err(|e| YamlError {
        line: e.marker().line(),
        message: e.info().to_string(),
    })?;
    docs.into_iter()
        .filter(|d| !matches!(d, Yaml::Null))
        .map(to_json)
        .collect()
}

fn to_json(yaml: Yaml) -> Result<Value, YamlError> {
    Ok(match yaml {
        Yaml::Null => Value::Null,
        Yaml::Boolean(b) => Value::Bool(b),
        Yaml::Integer(i) => Value::Number(i.into()),
        Yaml::Real(text) => match text.parse::<f64>().ok().and_then(Number::from_f64) {
            Some(n) => Value::Number(n),
            None => Value::String(text),
        },
        Yaml::String(s) => Value::String(s),
        Yaml::Array(items) => {
            Value::Array(items.into_iter().map(to_json).collect::<Result<_, _>>()?)
        }
        Yaml::Hash(map) => {
            let mut out = Map::new();
            for (key, value) in map {
                out.insert(key_text(key)?, to_json(value)?);
            }
            Value::Object(out)
        }
        Yaml::Alias(_) | Yaml::BadValue => {
            return Err(YamlError {
                line: 0,
                message: "an alias to an anchor that is not defined".into(),
            })
        }
    })
}

fn key_text(key: Yaml) -> Result<String, YamlError> {
    match key {
        Yaml::String(s) | Yaml::Real(s) => Ok(s),
        Yaml::Integer(i) => Ok(i.to_string()),
        Yaml::Boolean(b) => Ok(b.to_string()),
        Yaml::Null => Ok("null".into()),
        _ => Err(YamlError {
            line: 0,
            message: "a mapping key must be a scalar".into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_document_of_a_stream_is_read_and_empty_ones_are_skipped() {
        let docs = parse_all("---\na: 1\n---\n---\n{\"b\": [2]}\n").unwrap();
        assert_eq!(docs, vec![json!({"a": 1}), json!({"b": [2]})]);
        assert_eq!(parse_all("").unwrap(), Vec::<Value>::new());
        assert_eq!(parse_all("a: [1\n").unwrap_err().line, 2);
    }

    #[test]
    fn folded_and_block_scalars_and_multi_line_quoted_strings_are_read() {
        let text = "a: >\n  folded over\n  two lines\nb: |\n  kept\n  as is\nc: 'quoted over\n  two lines'\nd: \"double\n  quoted\"\ne: plain text\n  continued\n";
        assert_eq!(
            parse(text).unwrap(),
            json!({"a": "folded over two lines\n", "b": "kept\nas is\n",
                   "c": "quoted over two lines", "d": "double quoted", "e": "plain text continued"})
        );
    }

    #[test]
    fn json_and_flow_collections_over_several_lines_are_yaml() {
        let text = "{\n  \"kind\": \"Config\",\n  \"clusters\": [\n    {\"name\": \"a\"}\n  ]\n}\n";
        assert_eq!(
            parse(text).unwrap(),
            json!({"kind": "Config", "clusters": [{"name": "a"}]})
        );
    }

    #[test]
    fn anchors_aliases_comments_and_a_document_marker() {
        let text = "---\n# comment\nbase: &b {x: 1}\ncopy: *b # trailing\n";
        assert_eq!(
            parse(text).unwrap(),
            json!({"base": {"x": 1}, "copy": {"x": 1}})
        );
    }

    #[test]
    fn scalars_follow_the_core_schema() {
        assert_eq!(
            parse("a: yes\nb: true\nc: 010\nd: 1.5\ne: ~\nf: '1'\n").unwrap(),
            json!({"a": "yes", "b": true, "c": 10, "d": 1.5, "e": null, "f": "1"})
        );
    }

    #[test]
    fn broken_yaml_names_the_line() {
        let err = parse("a: b\n  c: [\n").unwrap_err();
        assert!(err.line >= 1, "{err}");
    }

    #[test]
    fn an_empty_text_is_null() {
        assert_eq!(parse("").unwrap(), Value::Null);
        assert_eq!(parse("# only a comment\n").unwrap(), Value::Null);
    }
}
