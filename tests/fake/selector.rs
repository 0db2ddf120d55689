//! Label selectors (the §5 grammar of `labels.Parse`, with its error messages), the
//! `metav1.LabelSelector` object form used by workloads and PDBs, and field selectors.
//! Written independently of the product's `src/selector.rs` so the two cross-check.

use serde_json::{Map, Value};

/// A parsed label selector: requirements ANDed together. Empty matches everything.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LabelSelector {
    pub requirements: Vec<Requirement>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Requirement {
    pub key: String,
    pub op: Op,
    pub values: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Op {
    Equals,
    NotEquals,
    In,
    NotIn,
    Exists,
    DoesNotExist,
    GreaterThan,
    LessThan,
}

impl LabelSelector {
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    pub fn matches(&self, labels: &Map<String, Value>) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }

    /// Matches an object by its `metadata.labels`.
    pub fn matches_object(&self, object: &Value) -> bool {
        let empty = Map::new();
        self.matches(
            object
                .pointer("/metadata/labels")
                .and_then(Value::as_object)
                .unwrap_or(&empty),
        )
    }
}

impl Requirement {
    fn matches(&self, labels: &Map<String, Value>) -> bool {
        let value = labels.get(&self.key).and_then(Value::as_str);
        let in_set = |v: &str| self.values.iter().any(|x| x == v);
        match self.op {
            Op::Equals | Op::In => value.is_some_and(in_set),
            Op::NotEquals | Op::NotIn => !value.is_some_and(in_set),
            Op::Exists => value.is_some(),
            Op::DoesNotExist => value.is_none(),
            Op::GreaterThan | Op::LessThan => {
                let (Some(have), Some(want)) = (
                    value.and_then(|v| v.parse::<i64>().ok()),
                    self.values.first().and_then(|v| v.parse::<i64>().ok()),
                ) else {
                    return false;
                };
                if self.op == Op::GreaterThan {
                    have > want
                } else {
                    have < want
                }
            }
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Token {
    Error,
    End,
    ClosedPar,
    Comma,
    DoesNotExist,
    DoubleEquals,
    Equals,
    GreaterThan,
    Identifier,
    In,
    LessThan,
    NotEquals,
    NotIn,
    OpenPar,
}

fn keyword(s: &str) -> Option<Token> {
    Some(match s {
        ")" => Token::ClosedPar,
        "," => Token::Comma,
        "!" => Token::DoesNotExist,
        "==" => Token::DoubleEquals,
        "=" => Token::Equals,
        ">" => Token::GreaterThan,
        "in" => Token::In,
        "<" => Token::LessThan,
        "!=" => Token::NotEquals,
        "notin" => Token::NotIn,
        "(" => Token::OpenPar,
        _ => return None,
    })
}

fn is_special(c: u8) -> bool {
    matches!(c, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

/// The lexer of `labels.Parse`: longest match over special characters, identifiers are
/// runs of anything else, `in`/`notin` are keywords.
fn lex(input: &str) -> Vec<(Token, String)> {
    let bytes = input.as_bytes();
    let mut tokens = Vec::new();
    let mut i = 0;
    loop {
        while i < bytes.len() && is_space(bytes[i]) {
            i += 1;
        }
        if i >= bytes.len() {
            tokens.push((Token::End, String::new()));
            return tokens;
        }
        if is_special(bytes[i]) {
            let mut buffer = String::new();
            let mut last: Option<(Token, String)> = None;
            while i < bytes.len() && is_special(bytes[i]) {
                buffer.push(bytes[i] as char);
                if let Some(token) = keyword(&buffer) {
                    last = Some((token, buffer.clone()));
                    i += 1;
                } else if last.is_some() {
                    break;
                } else {
                    i += 1;
                }
            }
            match last {
                Some(item) => tokens.push(item),
                None => tokens.push((
                    Token::Error,
                    format!("error expected: keyword found '{buffer}'"),
                )),
            }
        } else {
            let start = i;
            while i < bytes.len() && !is_special(bytes[i]) && !is_space(bytes[i]) {
                i += 1;
            }
            let word = &input[start..i];
            match keyword(word) {
                Some(token) => tokens.push((token, word.to_string())),
                None => tokens.push((Token::Identifier, word.to_string())),
            }
        }
    }
}

struct Parser {
    tokens: Vec<(Token, String)>,
    position: usize,
}

impl Parser {
    /// In value context the keywords `in`/`notin` are plain identifiers.
    fn lookahead(&self, values: bool) -> (Token, String) {
        let (token, literal) = self.tokens[self.position.min(self.tokens.len() - 1)].clone();
        if values && matches!(token, Token::In | Token::NotIn) {
            return (Token::Identifier, literal);
        }
        (token, literal)
    }

    fn consume(&mut self, values: bool) -> (Token, String) {
        let item = self.lookahead(values);
        self.position += 1;
        item
    }

    fn parse(&mut self) -> Result<LabelSelector, String> {
        let mut selector = LabelSelector::default();
        loop {
            let (token, literal) = self.lookahead(true);
            match token {
                Token::Identifier | Token::DoesNotExist => {
                    let requirement = self
                        .requirement()
                        .map_err(|e| format!("unable to parse requirement: {e}"))?;
                    selector.requirements.push(requirement);
                    let (token, literal) = self.consume(true);
                    match token {
                        Token::End => break,
                        Token::Comma => {
                            let (next, next_literal) = self.lookahead(true);
                            if next != Token::Identifier && next != Token::DoesNotExist {
                                return Err(format!(
                                    "found '{next_literal}', expected: identifier after ','"
                                ));
                            }
                        }
                        _ => {
                            return Err(format!(
                                "found '{literal}', expected: ',' or 'end of string'"
                            ))
                        }
                    }
                }
                Token::End => break,
                _ => {
                    return Err(format!(
                        "found '{literal}', expected: !, identifier, or 'end of string'"
                    ))
                }
            }
        }
        selector.requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(selector)
    }

    fn requirement(&mut self) -> Result<Requirement, String> {
        let (mut token, mut literal) = self.consume(true);
        let mut op = None;
        if token == Token::DoesNotExist {
            op = Some(Op::DoesNotExist);
            (token, literal) = self.consume(true);
        }
        if token != Token::Identifier {
            return Err(format!("found '{literal}', expected: identifier"));
        }
        if let Err(e) = qualified_name(&literal) {
            return Err(format!("key: Invalid value: \"{literal}\": {e}"));
        }
        let key = literal;
        let (next, _) = self.lookahead(true);
        if op.is_none() && matches!(next, Token::End | Token::Comma) {
            op = Some(Op::Exists);
        }
        if let Some(op) = op {
            return Ok(Requirement {
                key,
                op,
                values: Vec::new(),
            });
        }
        let (token, literal) = self.consume(false);
        let op = match token {
            Token::In => Op::In,
            Token::Equals | Token::DoubleEquals => Op::Equals,
            Token::GreaterThan => Op::GreaterThan,
            Token::LessThan => Op::LessThan,
            Token::NotIn => Op::NotIn,
            Token::NotEquals => Op::NotEquals,
            _ => {
                return Err(format!(
                    "found '{literal}', expected: in, notin, =, ==, !=, gt, lt"
                ))
            }
        };
        let values = match op {
            Op::In | Op::NotIn => self.set_values()?,
            _ => self.exact_value()?,
        };
        validate_requirement(&key, op, &values)?;
        Ok(Requirement { key, op, values })
    }

    fn set_values(&mut self) -> Result<Vec<String>, String> {
        let (token, literal) = self.consume(true);
        if token != Token::OpenPar {
            return Err(format!("found '{literal}' expected: '('"));
        }
        let (token, literal) = self.lookahead(true);
        match token {
            Token::Identifier | Token::Comma => {
                let values = self.identifier_list()?;
                let (token, _) = self.consume(true);
                if token != Token::ClosedPar {
                    return Err(format!("found '{literal}', expected: ')'"));
                }
                Ok(values)
            }
            Token::ClosedPar => {
                self.consume(true);
                Ok(vec![String::new()])
            }
            _ => Err(format!(
                "found '{literal}', expected: ',', ')' or identifier"
            )),
        }
    }

    fn identifier_list(&mut self) -> Result<Vec<String>, String> {
        let mut values: Vec<String> = Vec::new();
        let insert = |values: &mut Vec<String>, v: String| {
            if !values.contains(&v) {
                values.push(v);
            }
        };
        loop {
            let (token, literal) = self.consume(true);
            match token {
                Token::Identifier => {
                    insert(&mut values, literal);
                    let (next, next_literal) = self.lookahead(true);
                    match next {
                        Token::Comma => continue,
                        Token::ClosedPar => break,
                        _ => return Err(format!("found '{next_literal}', expected: ',' or ')'")),
                    }
                }
                Token::Comma => {
                    if values.is_empty() {
                        insert(&mut values, String::new());
                    }
                    let (next, _) = self.lookahead(true);
                    if next == Token::ClosedPar {
                        insert(&mut values, String::new());
                        break;
                    }
                    if next == Token::Comma {
                        self.consume(true);
                        insert(&mut values, String::new());
                    }
                }
                _ => return Err(format!("found '{literal}', expected: ',', or identifier")),
            }
        }
        values.sort();
        Ok(values)
    }

    fn exact_value(&mut self) -> Result<Vec<String>, String> {
        let (token, _) = self.lookahead(true);
        if matches!(token, Token::End | Token::Comma) {
            return Ok(vec![String::new()]);
        }
        let (token, literal) = self.consume(true);
        if token == Token::Identifier {
            return Ok(vec![literal]);
        }
        Err(format!("found '{literal}', expected: identifier"))
    }
}

fn validate_requirement(key: &str, op: Op, values: &[String]) -> Result<(), String> {
    let mut errors = Vec::new();
    if matches!(op, Op::GreaterThan | Op::LessThan) {
        for (i, v) in values.iter().enumerate() {
            if v.parse::<i64>().is_err() {
                errors.push(format!(
                    "values[{i}]: Invalid value: \"{v}\": for 'Gt', 'Lt' operators, the value must be an integer"
                ));
            }
        }
    }
    for (i, v) in values.iter().enumerate() {
        if let Err(e) = label_value(v) {
            errors.push(format!("values[{i}][{key}]: Invalid value: \"{v}\": {e}"));
        }
    }
    match errors.len() {
        0 => Ok(()),
        1 => Err(errors.remove(0)),
        _ => Err(format!("[{}]", errors.join(", "))),
    }
}

/// Parses a `labelSelector` query value. Errors carry the API server's parser text.
pub fn parse(input: &str) -> Result<LabelSelector, String> {
    Parser {
        tokens: lex(input),
        position: 0,
    }
    .parse()
}

fn is_alnum(c: u8) -> bool {
    c.is_ascii_alphanumeric()
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`
fn is_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && is_alnum(b[0])
        && is_alnum(b[b.len() - 1])
        && b.iter()
            .all(|c| is_alnum(*c) || matches!(c, b'-' | b'_' | b'.'))
}

const NAME_PART_FORMAT: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

/// Lowercase RFC 1123 subdomain: `[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*`, ≤ 253.
pub fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253
        && !s.is_empty()
        && s.split('.').all(|label| {
            let b = label.as_bytes();
            !b.is_empty()
                && b[0].is_ascii_alphanumeric()
                && !b[0].is_ascii_uppercase()
                && b[b.len() - 1].is_ascii_alphanumeric()
                && !b[b.len() - 1].is_ascii_uppercase()
                && b.iter()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        })
}

/// `IsQualifiedName`: `[prefix/]name`.
pub fn qualified_name(key: &str) -> Result<(), String> {
    let parts: Vec<&str> = key.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                return Err("prefix part must be non-empty".into());
            }
            if !is_dns_subdomain(prefix) {
                return Err("prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')".into());
            }
            name
        }
        _ => return Err("a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')".into()),
    };
    if name.is_empty() {
        return Err("name part must be non-empty".into());
    }
    if name.len() > 63 {
        return Err("name part must be no more than 63 bytes".into());
    }
    if !is_name_part(name) {
        return Err(NAME_PART_FORMAT.into());
    }
    Ok(())
}

/// `IsValidLabelValue`: empty, or a name part of at most 63 bytes.
pub fn label_value(value: &str) -> Result<(), String> {
    if value.len() > 63 {
        return Err("must be no more than 63 bytes".into());
    }
    if !value.is_empty() && !is_name_part(value) {
        return Err("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')".into());
    }
    Ok(())
}

/// Whether a `metav1.LabelSelector` object (`matchLabels` + `matchExpressions`) selects
/// these labels. An empty object selects everything; a missing one (null) nothing.
pub fn object_selects(selector: &Value, labels: &Map<String, Value>) -> bool {
    let Some(selector) = selector.as_object() else {
        return false;
    };
    let label = |k: &str| labels.get(k).and_then(Value::as_str);
    let match_labels = selector.get("matchLabels").and_then(Value::as_object);
    if let Some(match_labels) = match_labels {
        if !match_labels.iter().all(|(k, v)| label(k) == v.as_str()) {
            return false;
        }
    }
    let expressions = selector.get("matchExpressions").and_then(Value::as_array);
    expressions.into_iter().flatten().all(|e| {
        let key = e["key"].as_str().unwrap_or("");
        let values: Vec<&str> = e["values"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        match e["operator"].as_str().unwrap_or("") {
            "In" => label(key).is_some_and(|v| values.contains(&v)),
            "NotIn" => !label(key).is_some_and(|v| values.contains(&v)),
            "Exists" => label(key).is_some(),
            "DoesNotExist" => label(key).is_none(),
            _ => false,
        }
    })
}

/// A field selector: `field=value`, `field==value`, `field!=value`, ANDed with `,`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FieldSelector {
    pub terms: Vec<(String, bool, String)>,
}

impl FieldSelector {
    pub fn parse(input: &str) -> Result<FieldSelector, String> {
        let mut terms = Vec::new();
        for term in input.split(',').filter(|t| !t.is_empty()) {
            let (field, equal, value) = if let Some((f, v)) = term.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = term.split_once("==") {
                (f, true, v)
            } else if let Some((f, v)) = term.split_once('=') {
                (f, true, v)
            } else {
                return Err(format!(
                    "invalid selector: '{input}'; can't understand '{term}'"
                ));
            };
            terms.push((field.trim().to_string(), equal, value.trim().to_string()));
        }
        Ok(FieldSelector { terms })
    }

    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// The value of a supported field, or `None` when the field is not supported for this
    /// resource (`metadata.name`/`metadata.namespace` everywhere, a few per kind).
    pub fn field_value(resource: &str, object: &Value, field: &str) -> Option<String> {
        let supported = match field {
            "metadata.name" | "metadata.namespace" => true,
            "spec.nodeName"
            | "spec.restartPolicy"
            | "spec.schedulerName"
            | "spec.serviceAccountName"
            | "status.phase"
            | "status.podIP"
            | "status.nominatedNodeName" => resource == "pods",
            "type" => resource == "secrets" || resource == "events",
            "reason" | "source" | "reportingComponent" => resource == "events",
            f if f.starts_with("involvedObject.") => resource == "events",
            _ => false,
        };
        if !supported {
            return None;
        }
        let pointer = format!("/{}", field.replace('.', "/"));
        Some(
            object
                .pointer(&pointer)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
        )
    }

    /// Checks every field is supported for the resource; the error is the server's text.
    pub fn validate(&self, resource: &str) -> Result<(), String> {
        for (field, _, _) in &self.terms {
            if Self::field_value(resource, &Value::Null, field).is_none() {
                return Err(format!("field label not supported: {field}"));
            }
        }
        Ok(())
    }

    pub fn matches(&self, resource: &str, object: &Value) -> bool {
        self.terms.iter().all(|(field, equal, value)| {
            let actual = Self::field_value(resource, object, field).unwrap_or_default();
            (actual == *value) == *equal
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn errors_match_the_recordings() {
        assert_eq!(
            parse("app in web").unwrap_err(),
            "unable to parse requirement: found 'web' expected: '('"
        );
        assert_eq!(
            parse("=web").unwrap_err(),
            "found '=', expected: !, identifier, or 'end of string'"
        );
        assert_eq!(
            parse("app=web,,").unwrap_err(),
            "found ',', expected: identifier after ','"
        );
        assert_eq!(
            parse("Bad Key=x").unwrap_err(),
            "unable to parse requirement: found 'Key', expected: in, notin, =, ==, !=, gt, lt"
        );
        let long = "v".repeat(64);
        assert_eq!(
            parse(&format!("app={long}")).unwrap_err(),
            format!("unable to parse requirement: values[0][app]: Invalid value: \"{long}\": must be no more than 63 bytes")
        );
        assert_eq!(
            parse("app=web)").unwrap_err(),
            "found ')', expected: ',' or 'end of string'"
        );
        assert!(parse("!a=b").is_err());
        assert!(parse("app=web,").is_err());
    }

    #[test]
    fn grammar_edge_cases_parse() {
        assert_eq!(parse("app==").unwrap().requirements[0].values, vec![""]);
        assert_eq!(
            parse("x in (in)").unwrap().requirements[0].values,
            vec!["in"]
        );
        assert_eq!(
            parse("x in (a,,b)").unwrap().requirements[0].values,
            vec!["", "a", "b"]
        );
        assert_eq!(parse("x in ()").unwrap().requirements[0].values, vec![""]);
        assert!(parse("").unwrap().is_empty());
        assert!(parse("  ").unwrap().is_empty());
        assert_eq!(
            parse("!legacy").unwrap().requirements[0].op,
            Op::DoesNotExist
        );
        assert_eq!(parse("partition").unwrap().requirements[0].op, Op::Exists);
        assert!(parse("x > abc").is_err());
    }

    #[test]
    fn matching_follows_the_requirement_rules() {
        let l = labels(json!({"app": "web", "tier": "db", "n": "5"}));
        assert!(parse("app=web,tier!=cache").unwrap().matches(&l));
        assert!(parse("app in (web,api),!canary").unwrap().matches(&l));
        assert!(!parse("app notin (web)").unwrap().matches(&l));
        assert!(parse("missing!=x").unwrap().matches(&l));
        assert!(!parse("missing=").unwrap().matches(&l));
        assert!(parse("n>4,n<6").unwrap().matches(&l));
        assert!(!parse("app>4").unwrap().matches(&l));
    }

    #[test]
    fn object_selectors_use_match_labels_and_expressions() {
        let l = labels(json!({"app": "web", "tier": "db"}));
        assert!(object_selects(&json!({"matchLabels": {"app": "web"}}), &l));
        assert!(object_selects(&json!({}), &l));
        assert!(!object_selects(&Value::Null, &l));
        let e = json!({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["db"]}, {"key": "x", "operator": "DoesNotExist"}]});
        assert!(object_selects(&e, &l));
    }

    #[test]
    fn field_selectors_support_names_and_pod_fields() {
        let pod = json!({"metadata": {"name": "a", "namespace": "ns"}, "spec": {}});
        assert!(FieldSelector::parse("metadata.name=a")
            .unwrap()
            .matches("pods", &pod));
        assert!(FieldSelector::parse("spec.nodeName=")
            .unwrap()
            .matches("pods", &pod));
        assert!(!FieldSelector::parse("metadata.name!=a")
            .unwrap()
            .matches("pods", &pod));
        assert!(FieldSelector::parse("spec.nodeName=")
            .unwrap()
            .validate("configmaps")
            .is_err());
    }
}
