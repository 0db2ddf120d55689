//! A small, strict parser for the YAML subset that kubeconfig files use, into `serde_json::Value`.
//!
//! Supported: block mappings and block sequences (including `- key: value` items, and sequences
//! under a key written with or without extra indentation), plain, single-quoted and
//! double-quoted scalars (with escapes), comments, a leading `---`, and one-line flow
//! collections (`{}`, `[]`, `[a, "b"]`, `{a: b}`).
//!
//! Everything else (anchors and aliases, tags, block scalars `|`/`>`, multi-line scalars,
//! several documents, complex keys, tabs in indentation, duplicate keys, YAML 1.1 values such
//! as `yes`/`on`/`0x1f` whose meaning differs between YAML versions) is an error that names
//! the line, so a kubeconfig is never read silently wrong.
//!
//! Plain scalars become JSON `null`, `true`/`false`, integers, decimal numbers or strings, as
//! in YAML 1.2's core schema. Mapping keys are always strings.

use serde_json::{Map, Number, Value};
use std::fmt;

/// Why a document is not in the supported subset, and where.
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

impl std::error::Error for YamlError {}

/// Parses one YAML document. An empty document (only comments) is `Value::Null`.
pub fn parse(text: &str) -> Result<Value, YamlError> {
    let lines = split_lines(text)?;
    let mut parser = Parser { lines, pos: 0 };
    if parser.lines.is_empty() {
        return Ok(Value::Null);
    }
    let indent = parser.lines[0].indent;
    let value = parser.node(indent)?;
    if let Some(line) = parser.lines.get(parser.pos) {
        return Err(err(
            line.number,
            "unexpected content after the end of the document (check the indentation)",
        ));
    }
    Ok(value)
}

fn err(line: usize, message: impl Into<String>) -> YamlError {
    YamlError {
        line,
        message: message.into(),
    }
}

/// One significant line: its indentation (in spaces) and its content, trailing spaces removed.
#[derive(Debug, Clone)]
struct Line {
    number: usize,
    indent: usize,
    content: String,
}

/// Drops blank and comment-only lines, handles `---`/`...` markers, rejects tabs in indentation.
fn split_lines(text: &str) -> Result<Vec<Line>, YamlError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = Vec::new();
    let mut ended = false;
    for (index, raw) in text.lines().enumerate() {
        let number = index + 1;
        let raw = raw.trim_end_matches([' ', '\t', '\r']);
        let content = raw.trim_start_matches(' ');
        let indent = raw.len() - content.len();
        if content.is_empty() || content.starts_with('#') {
            continue;
        }
        if content.starts_with('\t') {
            return Err(err(
                number,
                "tabs are not allowed in indentation; use spaces",
            ));
        }
        if ended {
            return Err(err(number, "content after the document end marker `...`"));
        }
        if indent == 0 && is_marker(content, "---") {
            if !lines.is_empty() {
                return Err(err(
                    number,
                    "more than one YAML document (`---`); a kubeconfig holds exactly one",
                ));
            }
            if content.len() > 3 {
                return Err(err(
                    number,
                    "content on the `---` line is not supported; start it on the next line",
                ));
            }
            continue;
        }
        if indent == 0 && is_marker(content, "...") {
            ended = true;
            continue;
        }
        if indent == 0 && content.starts_with('%') {
            return Err(err(number, "YAML directives (`%`) are not supported"));
        }
        lines.push(Line {
            number,
            indent,
            content: content.to_string(),
        });
    }
    Ok(lines)
}

/// `---` or `...` alone, or followed by whitespace (a comment or content).
fn is_marker(content: &str, marker: &str) -> bool {
    content
        .strip_prefix(marker)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', '\t']))
}

struct Parser {
    lines: Vec<Line>,
    pos: usize,
}

impl Parser {
    /// Parses the node that starts at the current line, whose indentation is `indent`.
    fn node(&mut self, indent: usize) -> Result<Value, YamlError> {
        let line = self.lines[self.pos].clone();
        debug_assert_eq!(line.indent, indent);
        if is_sequence_item(&line.content) {
            self.sequence(indent)
        } else if split_key(&line.content, line.number)?.is_some() {
            self.mapping(indent)
        } else {
            // A lone scalar or flow collection on its own line.
            self.pos += 1;
            let value = inline_value(&line.content, line.number)?;
            if let Some(next) = self.lines.get(self.pos) {
                if next.indent > indent {
                    return Err(err(
                        next.number,
                        "multi-line scalars are not supported; put the value on one line, quoted if needed",
                    ));
                }
            }
            Ok(value)
        }
    }

    /// The value of a `key:` or `-` with nothing after it: a nested block, or null.
    /// `parent_indent` is the indentation of the key or dash; `allow_same_indent_sequence`
    /// accepts the kubectl style where a sequence under a key is not indented further.
    fn nested(
        &mut self,
        parent_indent: usize,
        allow_same_indent_sequence: bool,
    ) -> Result<Value, YamlError> {
        match self.lines.get(self.pos) {
            Some(next) if next.indent > parent_indent => {
                let indent = next.indent;
                self.node(indent)
            }
            Some(next)
                if allow_same_indent_sequence
                    && next.indent == parent_indent
                    && is_sequence_item(&next.content) =>
            {
                self.sequence(parent_indent)
            }
            _ => Ok(Value::Null),
        }
    }

    fn mapping(&mut self, indent: usize) -> Result<Value, YamlError> {
        let mut map = Map::new();
        while let Some(line) = self.lines.get(self.pos).cloned() {
            if line.indent < indent {
                break;
            }
            if line.indent > indent {
                return Err(err(line.number, "unexpected indentation inside a mapping"));
            }
            if is_sequence_item(&line.content) {
                // A sequence item at the mapping's own indentation ends this mapping only when the
                // mapping itself is the item of that sequence; the caller decides.
                break;
            }
            let Some((key, rest)) = split_key(&line.content, line.number)? else {
                return Err(err(
                    line.number,
                    "expected `key: value` in a mapping (a space is needed after the colon; check the indentation)",
                ));
            };
            self.pos += 1;
            let value = if rest.is_empty() {
                self.nested(indent, true)?
            } else {
                let value = inline_value(rest, line.number)?;
                if let Some(next) = self.lines.get(self.pos) {
                    if next.indent > indent {
                        return Err(err(
                            next.number,
                            format!(
                                "unexpected indentation after `{key}: ...`; multi-line values are not supported"
                            ),
                        ));
                    }
                }
                value
            };
            if map.insert(key.clone(), value).is_some() {
                return Err(err(line.number, format!("duplicate key `{key}`")));
            }
        }
        Ok(Value::Object(map))
    }

    fn sequence(&mut self, indent: usize) -> Result<Value, YamlError> {
        let mut items = Vec::new();
        while let Some(line) = self.lines.get(self.pos).cloned() {
            if line.indent < indent || !is_sequence_item(&line.content) {
                if line.indent > indent {
                    return Err(err(line.number, "unexpected indentation inside a sequence"));
                }
                break;
            }
            if line.indent > indent {
                return Err(err(line.number, "unexpected indentation inside a sequence"));
            }
            let after_dash = &line.content[1..];
            let rest = after_dash.trim_start_matches(' ');
            if rest.is_empty() || rest.starts_with('#') {
                self.pos += 1;
                items.push(self.nested(indent, false)?);
                continue;
            }
            // `- key: value` or `- - x`: the item is a node that starts at the column after the
            // dash; rewrite this line in place so the item's later lines line up with it.
            let column = indent + 1 + (after_dash.len() - rest.len());
            self.lines[self.pos] = Line {
                number: line.number,
                indent: column,
                content: rest.to_string(),
            };
            if is_sequence_item(rest) || split_key(rest, line.number)?.is_some() {
                items.push(self.node(column)?);
            } else {
                self.pos += 1;
                items.push(inline_value(rest, line.number)?);
                if let Some(next) = self.lines.get(self.pos) {
                    if next.indent > indent {
                        return Err(err(
                            next.number,
                            "unexpected indentation after a sequence item; multi-line values are not supported",
                        ));
                    }
                }
            }
        }
        Ok(Value::Array(items))
    }
}

fn is_sequence_item(content: &str) -> bool {
    content == "-" || content.starts_with("- ")
}

/// Splits `key: rest` (rest without a trailing comment, trimmed). `None` when the line is not a
/// mapping entry (e.g. a scalar or a flow collection).
fn split_key(content: &str, line: usize) -> Result<Option<(String, &str)>, YamlError> {
    let first = content.chars().next().unwrap_or(' ');
    if first == '"' || first == '\'' {
        let (key, used) = quoted(content, line)?;
        let after = content[used..].trim_start_matches(' ');
        return match after.strip_prefix(':') {
            Some(rest) if rest.is_empty() || rest.starts_with(' ') => {
                Ok(Some((key, value_part(rest))))
            }
            _ => Ok(None),
        };
    }
    if first == '[' || first == '{' {
        return Ok(None);
    }
    if first == '?' && (content.len() == 1 || content[1..].starts_with(' ')) {
        return Err(err(line, "complex mapping keys (`? `) are not supported"));
    }
    let bytes = content.as_bytes();
    for i in 0..bytes.len() {
        match bytes[i] {
            b'#' if i > 0 && bytes[i - 1] == b' ' => return Ok(None),
            b':' if i + 1 == bytes.len() || bytes[i + 1] == b' ' => {
                let key = content[..i].trim_end_matches(' ');
                if key.is_empty() {
                    return Err(err(line, "empty mapping key"));
                }
                check_plain(key, line)?;
                return Ok(Some((key.to_string(), value_part(&content[i + 1..]))));
            }
            _ => {}
        }
    }
    Ok(None)
}

/// The text after `key:`, trimmed; a comment alone counts as nothing (a nested value follows).
fn value_part(rest: &str) -> &str {
    let rest = rest.trim_start_matches(' ');
    if rest.starts_with('#') {
        ""
    } else {
        rest
    }
}

/// A value written on the line itself: a quoted or plain scalar, or a flow collection.
fn inline_value(text: &str, line: usize) -> Result<Value, YamlError> {
    let first = text.chars().next().unwrap_or(' ');
    match first {
        '"' | '\'' => {
            let (value, used) = quoted(text, line)?;
            expect_only_comment(&text[used..], line)?;
            Ok(Value::String(value))
        }
        '[' | '{' => {
            let mut flow = Flow { text, pos: 0, line };
            let value = flow.value()?;
            flow.skip_spaces();
            expect_only_comment(&text[flow.pos..], line)?;
            Ok(value)
        }
        '|' | '>' => Err(err(
            line,
            "block scalars (`|` and `>`) are not supported; write the value on one line, quoted",
        )),
        _ => {
            let plain = strip_comment(text);
            check_plain(plain, line)?;
            plain_scalar(plain, line)
        }
    }
}

/// After a closing quote or bracket only spaces and a comment may follow.
fn expect_only_comment(rest: &str, line: usize) -> Result<(), YamlError> {
    let trimmed = rest.trim_start_matches(' ');
    if trimmed.is_empty() || (trimmed.starts_with('#') && trimmed.len() < rest.len()) {
        return Ok(());
    }
    Err(err(
        line,
        format!("unexpected trailing text `{trimmed}` after a quoted string or flow collection"),
    ))
}

/// Cuts a ` #...` comment off a plain scalar.
fn strip_comment(text: &str) -> &str {
    let bytes = text.as_bytes();
    for i in 1..bytes.len() {
        if bytes[i] == b'#' && (bytes[i - 1] == b' ' || bytes[i - 1] == b'\t') {
            return text[..i].trim_end_matches([' ', '\t']);
        }
    }
    text
}

/// Rejects plain scalars that start with YAML syntax this parser does not implement.
fn check_plain(text: &str, line: usize) -> Result<(), YamlError> {
    match text.chars().next() {
        Some('&') => Err(err(line, "anchors (`&`) are not supported")),
        Some('*') => Err(err(line, "aliases (`*`) are not supported")),
        Some('!') => Err(err(line, "tags (`!`) are not supported")),
        Some('@') | Some('`') => Err(err(
            line,
            "plain values cannot start with `@` or a backquote; quote the value",
        )),
        Some('%') => Err(err(
            line,
            "plain values cannot start with `%`; quote the value",
        )),
        _ if text.starts_with("- ") || text == "-" => Err(err(
            line,
            "a sequence cannot start on the same line as a mapping key; move it to the next line",
        )),
        _ if text.contains(": ") || text.ends_with(':') => Err(err(
            line,
            "nested mappings on one line are not supported; move the value to the next line",
        )),
        _ => Ok(()),
    }
}

/// Resolves a plain scalar by YAML 1.2's core schema; rejects forms whose meaning differs
/// between YAML 1.1 (which kubectl's parser follows) and 1.2.
fn plain_scalar(text: &str, line: usize) -> Result<Value, YamlError> {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Ok(Value::Null),
        "true" | "True" | "TRUE" => return Ok(Value::Bool(true)),
        "false" | "False" | "FALSE" => return Ok(Value::Bool(false)),
        _ => {}
    }
    let lower = text.to_ascii_lowercase();
    if matches!(lower.as_str(), "yes" | "no" | "on" | "off" | "y" | "n") {
        return Err(err(
            line,
            format!("`{text}` is a boolean in YAML 1.1 but a string in YAML 1.2; write true/false, or quote it"),
        ));
    }
    if matches!(lower.as_str(), ".inf" | "+.inf" | "-.inf" | ".nan") {
        return Err(err(
            line,
            format!("`{text}` is not representable in JSON; quote it"),
        ));
    }
    if is_decimal_integer(text) {
        if let Ok(n) = text.parse::<i64>() {
            return Ok(Value::Number(n.into()));
        }
        if let Ok(n) = text.parse::<u64>() {
            return Ok(Value::Number(n.into()));
        }
        return Err(err(
            line,
            format!("integer `{text}` is too large; quote it if it is a string"),
        ));
    }
    if is_decimal_float(text) {
        if let Some(n) = text.parse::<f64>().ok().and_then(Number::from_f64) {
            return Ok(Value::Number(n));
        }
    }
    if is_ambiguous_number(text) {
        return Err(err(
            line,
            format!(
                "`{text}` is a number in a form YAML versions read differently (leading zero, hex, octal, `_`, \
                 exponent without a dot); quote it if it is a string, or write it as a plain decimal"
            ),
        ));
    }
    Ok(Value::String(text.to_string()))
}

/// `0`, `-12`, `+7`; no leading zeros (those are octal in YAML 1.1).
fn is_decimal_integer(text: &str) -> bool {
    let digits = text.strip_prefix(['-', '+']).unwrap_or(text);
    !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'))
}

/// `1.5`, `-0.25`, `2.5E-3`: digits on both sides of a dot, as both YAML versions agree.
fn is_decimal_float(text: &str) -> bool {
    let body = text.strip_prefix(['-', '+']).unwrap_or(text);
    let (mantissa, exponent) = match body.find(['e', 'E']) {
        Some(i) => (&body[..i], Some(&body[i + 1..])),
        None => (body, None),
    };
    let Some((int, frac)) = mantissa.split_once('.') else {
        return false;
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    digits(int)
        && (int == "0" || !int.starts_with('0'))
        && digits(frac)
        && exponent.is_none_or(|e| digits(e.strip_prefix(['-', '+']).unwrap_or(e)))
}

/// Numbers that YAML 1.1 (kubectl) and YAML 1.2 read differently, or that are not plain
/// decimals: `0755`, `0x1f`, `0o17`, `1_000`, `1e3`, `1.`, `.5`. Dates, versions and
/// addresses (`2024-01-01`, `1.2.3`, `10.0.0.1`) are strings and do not match.
fn is_ambiguous_number(text: &str) -> bool {
    let body = text.strip_prefix(['-', '+']).unwrap_or(text);
    if let Some(rest) = body
        .strip_prefix("0x")
        .or_else(|| body.strip_prefix("0o"))
        .or_else(|| body.strip_prefix("0b"))
    {
        return !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_hexdigit() || b == b'_');
    }
    let mantissa = match body.find(['e', 'E']) {
        Some(i) => {
            let exponent = &body[i + 1..];
            let exponent = exponent.strip_prefix(['-', '+']).unwrap_or(exponent);
            if exponent.is_empty() || !exponent.bytes().all(|b| b.is_ascii_digit()) {
                return false;
            }
            &body[..i]
        }
        None => body,
    };
    mantissa.bytes().any(|b| b.is_ascii_digit())
        && mantissa
            .bytes()
            .all(|b| b.is_ascii_digit() || b == b'_' || b == b'.')
        && mantissa.bytes().filter(|&b| b == b'.').count() <= 1
}

/// Parses a quoted scalar at the start of `text`; returns it and the number of bytes used.
fn quoted(text: &str, line: usize) -> Result<(String, usize), YamlError> {
    let mut chars = text.char_indices();
    let (_, quote) = chars
        .next()
        .ok_or_else(|| err(line, "expected a quoted string"))?;
    let mut out = String::new();
    if quote == '\'' {
        let mut iter = chars.peekable();
        while let Some((i, c)) = iter.next() {
            if c == '\'' {
                if let Some(&(_, '\'')) = iter.peek() {
                    iter.next();
                    out.push('\'');
                    continue;
                }
                return Ok((out, i + 1));
            }
            out.push(c);
        }
        return Err(err(
            line,
            "unterminated single-quoted string (multi-line strings are not supported)",
        ));
    }
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Ok((out, i + 1)),
            '\\' => {
                let (_, e) = chars
                    .next()
                    .ok_or_else(|| err(line, "unterminated escape in a double-quoted string"))?;
                match e {
                    '0' => out.push('\0'),
                    'a' => out.push('\u{7}'),
                    'b' => out.push('\u{8}'),
                    't' | '\t' => out.push('\t'),
                    'n' => out.push('\n'),
                    'v' => out.push('\u{b}'),
                    'f' => out.push('\u{c}'),
                    'r' => out.push('\r'),
                    'e' => out.push('\u{1b}'),
                    ' ' => out.push(' '),
                    '"' => out.push('"'),
                    '/' => out.push('/'),
                    '\\' => out.push('\\'),
                    'N' => out.push('\u{85}'),
                    '_' => out.push('\u{a0}'),
                    'L' => out.push('\u{2028}'),
                    'P' => out.push('\u{2029}'),
                    'x' | 'u' | 'U' => {
                        let len = match e {
                            'x' => 2,
                            'u' => 4,
                            _ => 8,
                        };
                        let mut code = 0u32;
                        for _ in 0..len {
                            let digit = chars.next().and_then(|(_, h)| h.to_digit(16)).ok_or_else(
                                || err(line, format!("`\\{e}` needs {len} hex digits")),
                            )?;
                            code = code * 16 + digit;
                        }
                        let c = char::from_u32(code).ok_or_else(|| {
                            err(line, format!("`\\{e}{code:x}` is not a valid character"))
                        })?;
                        out.push(c);
                    }
                    other => {
                        return Err(err(
                            line,
                            format!("unknown escape `\\{other}` in a double-quoted string"),
                        ))
                    }
                }
            }
            c => out.push(c),
        }
    }
    Err(err(
        line,
        "unterminated double-quoted string (multi-line strings are not supported)",
    ))
}

/// A one-line flow collection: `[a, "b", {c: d}]`, `{}`.
struct Flow<'a> {
    text: &'a str,
    pos: usize,
    line: usize,
}

impl Flow<'_> {
    fn skip_spaces(&mut self) {
        while self.text[self.pos..].starts_with(' ') {
            self.pos += 1;
        }
    }

    fn peek(&self) -> Option<char> {
        self.text[self.pos..].chars().next()
    }

    fn value(&mut self) -> Result<Value, YamlError> {
        self.skip_spaces();
        match self.peek() {
            Some('[') => {
                self.pos += 1;
                let mut items = Vec::new();
                loop {
                    self.skip_spaces();
                    if self.peek() == Some(']') {
                        self.pos += 1;
                        return Ok(Value::Array(items));
                    }
                    items.push(self.value()?);
                    self.skip_spaces();
                    match self.peek() {
                        Some(',') => self.pos += 1,
                        Some(']') => {}
                        _ => return Err(self.error(
                            "expected `,` or `]` in a flow sequence (it must end on the same line)",
                        )),
                    }
                }
            }
            Some('{') => {
                self.pos += 1;
                let mut map = Map::new();
                loop {
                    self.skip_spaces();
                    if self.peek() == Some('}') {
                        self.pos += 1;
                        return Ok(Value::Object(map));
                    }
                    let key = match self.value()? {
                        Value::String(s) => s,
                        Value::Null => return Err(self.error("empty key in a flow mapping")),
                        Value::Array(_) | Value::Object(_) => {
                            return Err(self.error("collection keys are not supported"));
                        }
                        other => other.to_string(),
                    };
                    self.skip_spaces();
                    if self.peek() != Some(':') {
                        return Err(self.error("expected `:` after a key in a flow mapping"));
                    }
                    self.pos += 1;
                    self.skip_spaces();
                    let value = match self.peek() {
                        Some(',') | Some('}') => Value::Null,
                        _ => self.value()?,
                    };
                    if map.insert(key.clone(), value).is_some() {
                        return Err(self.error(&format!("duplicate key `{key}`")));
                    }
                    self.skip_spaces();
                    match self.peek() {
                        Some(',') => self.pos += 1,
                        Some('}') => {}
                        _ => return Err(self.error(
                            "expected `,` or `}` in a flow mapping (it must end on the same line)",
                        )),
                    }
                }
            }
            Some('"') | Some('\'') => {
                let (s, used) = quoted(&self.text[self.pos..], self.line)?;
                self.pos += used;
                Ok(Value::String(s))
            }
            Some(_) => {
                let rest = &self.text[self.pos..];
                let mut end = rest.len();
                for (i, c) in rest.char_indices() {
                    let next_is_space = rest[i + c.len_utf8()..]
                        .chars()
                        .next()
                        .is_none_or(|n| n == ' ');
                    if c == ','
                        || c == ']'
                        || c == '}'
                        || (c == ':' && next_is_space)
                        || c == '['
                        || c == '{'
                    {
                        end = i;
                        break;
                    }
                    if c == '#' && i > 0 && rest[..i].ends_with(' ') {
                        return Err(
                            self.error("comments inside a flow collection are not supported")
                        );
                    }
                }
                let scalar = rest[..end].trim_end_matches(' ');
                if scalar.is_empty() {
                    return Err(self.error("expected a value in a flow collection"));
                }
                check_plain(scalar, self.line)?;
                self.pos += end;
                plain_scalar(scalar, self.line)
            }
            None => Err(self.error("flow collection not closed on the same line")),
        }
    }

    fn error(&self, message: &str) -> YamlError {
        err(self.line, format!("{message} (at column {})", self.pos + 1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ok(text: &str) -> Value {
        match parse(text) {
            Ok(v) => v,
            Err(e) => panic!("parse failed: {e}\n{text}"),
        }
    }

    fn fails(text: &str) -> YamlError {
        match parse(text) {
            Ok(v) => panic!("expected an error, got {v}\n{text}"),
            Err(e) => e,
        }
    }

    #[test]
    fn parses_what_kubectl_config_view_raw_writes() {
        let text = "\
apiVersion: v1
clusters:
- cluster:
    certificate-authority-data: LS0tLS1CRUdJTg==
    server: https://127.0.0.1:6443
  name: kind-kind
contexts:
- context:
    cluster: kind-kind
    namespace: team-a
    user: kind-kind
  name: kind-kind
current-context: kind-kind
kind: Config
preferences: {}
users:
- name: kind-kind
  user:
    client-certificate-data: Y2VydA==
    client-key-data: a2V5
";
        assert_eq!(
            ok(text),
            json!({
                "apiVersion": "v1",
                "clusters": [{"cluster": {"certificate-authority-data": "LS0tLS1CRUdJTg==", "server": "https://127.0.0.1:6443"}, "name": "kind-kind"}],
                "contexts": [{"context": {"cluster": "kind-kind", "namespace": "team-a", "user": "kind-kind"}, "name": "kind-kind"}],
                "current-context": "kind-kind",
                "kind": "Config",
                "preferences": {},
                "users": [{"name": "kind-kind", "user": {"client-certificate-data": "Y2VydA==", "client-key-data": "a2V5"}}]
            })
        );
    }

    #[test]
    fn parses_indented_sequences_comments_quotes_and_document_start() {
        let text = "\
# generated by a cloud CLI
---
apiVersion: v1
clusters:
  - name: \"eks:prod\"   # quoted because of the colon
    cluster:
      server: 'https://ABC.gr7.eu-west-1.eks.amazonaws.com'
      insecure-skip-tls-verify: false
users:
  -   name: admin
      user:
        token: abc#notacomment
        tokenFile: /var/run/token # a comment
";
        assert_eq!(
            ok(text),
            json!({
                "apiVersion": "v1",
                "clusters": [{"name": "eks:prod", "cluster": {"server": "https://ABC.gr7.eu-west-1.eks.amazonaws.com", "insecure-skip-tls-verify": false}}],
                "users": [{"name": "admin", "user": {"token": "abc#notacomment", "tokenFile": "/var/run/token"}}]
            })
        );
    }

    #[test]
    fn resolves_plain_scalars_by_the_core_schema() {
        let v = ok("a: 1\nb: -2\nc: 1.5\nd: ~\ne: null\nf: true\ng: False\nh:\ni: 1.2.3\nj: 2024-01-01\nk: v1\nl: 127.0.0.1:8001\n");
        assert_eq!(
            v,
            json!({"a": 1, "b": -2, "c": 1.5, "d": null, "e": null, "f": true, "g": false, "h": null,
                   "i": "1.2.3", "j": "2024-01-01", "k": "v1", "l": "127.0.0.1:8001"})
        );
    }

    #[test]
    fn decodes_double_quoted_escapes_and_doubled_single_quotes() {
        let v = ok(r#"a: "tab\there \"q\" \\ \u00e9 \x41 \U0001F600 \/"
b: 'it''s # not a comment'
"#);
        assert_eq!(
            v,
            json!({"a": "tab\there \"q\" \\ é A 😀 /", "b": "it's # not a comment"})
        );
    }

    #[test]
    fn parses_one_line_flow_collections() {
        let v = ok("a: []\nb: {}\nc: [x, \"y, z\", 3]\nd: {k: v, 'q': [1, 2], e: }\n");
        assert_eq!(
            v,
            json!({"a": [], "b": {}, "c": ["x", "y, z", 3], "d": {"k": "v", "q": [1, 2], "e": null}})
        );
    }

    #[test]
    fn parses_nested_sequences_and_scalar_items() {
        let v = ok("args:\n- --foo\n- \"bar\"\n- - nested\n  - two\n-\n  k: v\n- # empty item\n");
        assert_eq!(
            v,
            json!({"args": ["--foo", "bar", ["nested", "two"], {"k": "v"}, null]})
        );
    }

    #[test]
    fn parses_minikube_and_eks_style_files() {
        let text = "\
apiVersion: v1
clusters:
- cluster:
    certificate-authority: /home/me/.minikube/ca.crt
    extensions:
    - extension:
        last-update: Mon, 01 Jan 2024 10:00:00 CET
        provider: minikube.sigs.k8s.io
        version: v1.32.0
      name: cluster_info
    server: https://192.168.49.2:8443
  name: minikube
users:
- name: arn:aws:eks:eu-west-1:123456789012:cluster/prod
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      args:
      - --region
      - eu-west-1
      - eks
      - get-token
      command: aws
      env: null
      interactiveMode: IfAvailable
      provideClusterInfo: false
";
        let v = ok(text);
        assert_eq!(
            v["clusters"][0]["cluster"]["extensions"][0]["extension"]["last-update"],
            "Mon, 01 Jan 2024 10:00:00 CET"
        );
        assert_eq!(
            v["clusters"][0]["cluster"]["extensions"][0]["name"],
            "cluster_info"
        );
        assert_eq!(
            v["clusters"][0]["cluster"]["server"],
            "https://192.168.49.2:8443"
        );
        assert_eq!(
            v["users"][0]["name"],
            "arn:aws:eks:eu-west-1:123456789012:cluster/prod"
        );
        assert_eq!(
            v["users"][0]["user"]["exec"]["args"],
            json!(["--region", "eu-west-1", "eks", "get-token"])
        );
        assert_eq!(v["users"][0]["user"]["exec"]["env"], Value::Null);
        assert_eq!(v["users"][0]["user"]["exec"]["provideClusterInfo"], false);
    }

    #[test]
    fn indented_comments_and_crlf_line_ends_are_ignored() {
        let v = ok("a:\r\n    # about b\r\n  b: 1\r\n# trailing\r\n");
        assert_eq!(v, json!({"a": {"b": 1}}));
    }

    #[test]
    fn an_empty_document_is_null() {
        assert_eq!(ok(""), Value::Null);
        assert_eq!(ok("# only a comment\n\n---\n"), Value::Null);
    }

    #[test]
    fn rejects_tabs_in_indentation_with_the_line_number() {
        let e = fails("a:\n\tb: c\n");
        assert_eq!(e.line, 2);
        assert!(e.message.contains("tabs"), "{e}");
    }

    #[test]
    fn rejects_anchors_aliases_tags_and_block_scalars() {
        assert!(fails("a: &x 1\n").message.contains("anchors"));
        assert!(fails("a: *x\n").message.contains("aliases"));
        assert!(fails("a: !!str 1\n").message.contains("tags"));
        let e = fails("a: ok\nb: |\n  text\n");
        assert_eq!(e.line, 2);
        assert!(e.message.contains("block scalars"), "{e}");
    }

    #[test]
    fn rejects_multi_line_plain_scalars_instead_of_truncating_them() {
        let e = fails("a: first\n  continued\n");
        assert_eq!(e.line, 2);
        let e = fails("a:\n  first\n  continued\n");
        assert!(e.line >= 2, "{e}");
    }

    #[test]
    fn rejects_unterminated_quotes_and_flow_collections() {
        assert_eq!(fails("a: \"open\n").line, 1);
        assert_eq!(fails("a: 'open\n").line, 1);
        assert_eq!(fails("a: [1, 2\n  , 3]\n").line, 1);
        assert!(fails("a: \"x\" trailing\n").message.contains("trailing"));
    }

    #[test]
    fn rejects_duplicate_keys_and_several_documents() {
        assert!(fails("a: 1\na: 2\n").message.contains("duplicate key `a`"));
        let e = fails("a: 1\n---\nb: 2\n");
        assert_eq!(e.line, 2);
    }

    #[test]
    fn rejects_values_whose_meaning_differs_between_yaml_versions() {
        assert!(fails("a: yes\n").message.contains("YAML 1.1"));
        assert!(fails("a: 0755\n").message.contains("quote it"));
        assert!(fails("a: 0x1f\n").message.contains("quote it"));
        assert!(fails("a: .inf\n").message.contains("JSON"));
        assert!(fails("a: 1e3\n").message.contains("quote it"));
        assert!(fails("a: 1_000\n").message.contains("quote it"));
        assert_eq!(ok("a: \"yes\"\n"), json!({"a": "yes"}));
    }

    #[test]
    fn rejects_bad_indentation_inside_mappings_and_sequences() {
        assert_eq!(fails("a:\n  b: 1\n   c: 2\n").line, 3);
        assert_eq!(fails("a:\n- 1\n - 2\n").line, 3);
        assert!(fails("a: b: c\n").message.contains("one line"));
        assert!(fails("a: 1\nb:2\n")
            .message
            .contains("space is needed after the colon"));
    }

    #[test]
    fn rejects_unknown_escapes() {
        assert!(fails("a: \"\\q\"\n").message.contains("unknown escape"));
    }
}
