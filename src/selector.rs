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
        let mut parser = Parser {
            items: lex(s),
            position: 0,
        };
        let mut requirements = parser.parse()?;
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

// ---------------------------------------------------------------------------------------
// Lexer: a port of the server's, byte for byte (including that a NUL byte reads as the end).

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
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

#[derive(Debug, Clone, Copy)]
struct Item<'a> {
    token: Token,
    literal: &'a str,
}

fn is_whitespace(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_special(b: u8) -> bool {
    matches!(b, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

/// The token a literal spells, if it is one (identifiers excepted).
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

/// Splits `s` into tokens, ending with exactly one `Token::End`.
fn lex(s: &str) -> Vec<Item<'_>> {
    let bytes = s.as_bytes();
    // `read` returns 0 at the end of input, as the server's lexer does.
    let read = |pos: &mut usize| -> u8 {
        match bytes.get(*pos) {
            Some(&b) => {
                *pos += 1;
                b
            }
            None => 0,
        }
    };
    let mut items = Vec::new();
    let mut pos = 0;
    loop {
        let mut ch = read(&mut pos);
        while is_whitespace(ch) {
            ch = read(&mut pos);
        }
        if ch == 0 {
            items.push(Item {
                token: Token::End,
                literal: "",
            });
            return items;
        }
        pos -= 1;
        let start = pos;
        if is_special(ch) {
            // Longest run of special characters that is still a token.
            let mut last: Option<(Token, usize)> = None;
            loop {
                let c = read(&mut pos);
                if c == 0 {
                    break;
                }
                if !is_special(c) {
                    pos -= 1;
                    break;
                }
                match keyword(&s[start..pos]) {
                    Some(token) => last = Some((token, pos)),
                    None if last.is_some() => {
                        pos -= 1;
                        break;
                    }
                    None => {}
                }
            }
            // Every single special character is a token, so `last` is always set.
            let (token, end) = last.unwrap_or((Token::Identifier, pos));
            items.push(Item {
                token,
                literal: &s[start..end],
            });
        } else {
            // A maximal run of other bytes; a NUL byte ends it and is dropped.
            let mut end = pos;
            loop {
                let c = read(&mut pos);
                if c == 0 {
                    break;
                }
                if is_special(c) || is_whitespace(c) {
                    pos -= 1;
                    break;
                }
                end = pos;
            }
            let literal = &s[start..end];
            items.push(Item {
                token: keyword(literal).unwrap_or(Token::Identifier),
                literal,
            });
        }
    }
}

// ---------------------------------------------------------------------------------------
// Parser: recursive descent over the token list, as the server's `Parser`.

/// Where the parser is: `in`/`notin` are keywords only when an operator is expected.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Context {
    KeyAndOperator,
    Values,
}

struct Parser<'a> {
    items: Vec<Item<'a>>,
    position: usize,
}

impl<'a> Parser<'a> {
    fn lookahead(&self, context: Context) -> Item<'a> {
        let item = self.items[self.position.min(self.items.len() - 1)];
        Self::in_context(item, context)
    }

    fn consume(&mut self, context: Context) -> Item<'a> {
        let item = self.lookahead(context);
        if self.position < self.items.len() - 1 {
            self.position += 1;
        }
        item
    }

    fn in_context(mut item: Item<'a>, context: Context) -> Item<'a> {
        if context == Context::Values && matches!(item.token, Token::In | Token::NotIn) {
            item.token = Token::Identifier;
        }
        item
    }

    fn parse(&mut self) -> Result<Vec<Requirement>, SelectorError> {
        let mut requirements = Vec::new();
        loop {
            let next = self.lookahead(Context::Values);
            match next.token {
                Token::Identifier | Token::DoesNotExist => {
                    requirements.push(self.parse_requirement()?);
                    let after = self.consume(Context::Values);
                    match after.token {
                        Token::End => return Ok(requirements),
                        Token::Comma => {
                            let next = self.lookahead(Context::Values);
                            if !matches!(next.token, Token::Identifier | Token::DoesNotExist) {
                                return Err(syntax(next, "identifier after ','"));
                            }
                        }
                        _ => return Err(syntax(after, "',' or 'end of string'")),
                    }
                }
                Token::End => return Ok(requirements),
                _ => return Err(syntax(next, "!, identifier, or 'end of string'")),
            }
        }
    }

    fn parse_requirement(&mut self) -> Result<Requirement, SelectorError> {
        // Key, and `!` or an implied "exists".
        let mut item = self.consume(Context::Values);
        let negated = item.token == Token::DoesNotExist;
        if negated {
            item = self.consume(Context::Values);
        }
        if item.token != Token::Identifier {
            return Err(requirement(item, "identifier"));
        }
        let key = item.literal.to_string();
        if let Some(reason) = label_key_error(&key) {
            return Err(SelectorError::InvalidKey { key, reason });
        }
        let ends = matches!(
            self.lookahead(Context::Values).token,
            Token::End | Token::Comma
        );
        if negated || ends {
            let operator = if negated {
                Operator::DoesNotExist
            } else {
                Operator::Exists
            };
            return Ok(Requirement {
                key,
                operator,
                values: Vec::new(),
            });
        }

        let op = self.consume(Context::KeyAndOperator);
        let operator = match op.token {
            Token::In => Operator::In,
            Token::NotIn => Operator::NotIn,
            Token::Equals | Token::DoubleEquals => Operator::Equals,
            Token::NotEquals => Operator::NotEquals,
            Token::GreaterThan => Operator::GreaterThan,
            Token::LessThan => Operator::LessThan,
            _ => return Err(requirement(op, "in, notin, =, ==, !=, gt, lt")),
        };
        let mut values = match operator {
            Operator::In | Operator::NotIn => self.parse_values()?,
            _ => vec![self.parse_exact_value()?],
        };
        values.sort();
        values.dedup();
        validate_values(&key, operator, &values)?;
        Ok(Requirement {
            key,
            operator,
            values,
        })
    }

    /// `( [VALUE] { , [VALUE] } )`; empty entries are `""`.
    fn parse_values(&mut self) -> Result<Vec<String>, SelectorError> {
        let open = self.consume(Context::Values);
        if open.token != Token::OpenPar {
            return Err(requirement(open, "'('"));
        }
        let first = self.lookahead(Context::Values);
        match first.token {
            Token::Identifier | Token::Comma => {
                let values = self.parse_identifiers_list()?;
                // `parse_identifiers_list` returns only with `)` next.
                self.consume(Context::Values);
                Ok(values)
            }
            Token::ClosedPar => {
                self.consume(Context::Values);
                Ok(vec![String::new()])
            }
            _ => Err(requirement(first, "',', ')' or identifier")),
        }
    }

    fn parse_identifiers_list(&mut self) -> Result<Vec<String>, SelectorError> {
        let mut values: Vec<String> = Vec::new();
        loop {
            let item = self.consume(Context::Values);
            match item.token {
                Token::Identifier => {
                    values.push(item.literal.to_string());
                    let next = self.lookahead(Context::Values);
                    match next.token {
                        Token::Comma => continue,
                        Token::ClosedPar => return Ok(values),
                        _ => return Err(requirement(next, "',' or ')'")),
                    }
                }
                Token::Comma => {
                    if values.is_empty() {
                        values.push(String::new()); // "(,"
                    }
                    match self.lookahead(Context::Values).token {
                        Token::ClosedPar => {
                            values.push(String::new()); // ",)"
                            return Ok(values);
                        }
                        Token::Comma => {
                            self.consume(Context::Values);
                            values.push(String::new()); // ",,"
                        }
                        _ => {}
                    }
                }
                _ => return Err(requirement(item, "',', or identifier")),
            }
        }
    }

    /// The one value after `=`, `==`, `!=`, `>`, `<`; nothing before `,` or the end is `""`.
    fn parse_exact_value(&mut self) -> Result<String, SelectorError> {
        if matches!(
            self.lookahead(Context::Values).token,
            Token::End | Token::Comma
        ) {
            return Ok(String::new());
        }
        let item = self.consume(Context::Values);
        if item.token == Token::Identifier {
            Ok(item.literal.to_string())
        } else {
            Err(requirement(item, "identifier"))
        }
    }
}

fn syntax(item: Item<'_>, expected: &'static str) -> SelectorError {
    SelectorError::Syntax {
        found: item.literal.to_string(),
        expected,
    }
}

fn requirement(item: Item<'_>, expected: &'static str) -> SelectorError {
    SelectorError::Requirement {
        found: item.literal.to_string(),
        expected,
    }
}

// ---------------------------------------------------------------------------------------
// Validation: `IsLabelKey`, `IsLabelValue`, `IsDNS1123Subdomain` and their messages.

const NAME_MAX: usize = 63;
const PREFIX_MAX: usize = 253;
const NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const NAME_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const SUBDOMAIN_FMT: &str = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";

fn max_len_error(n: usize) -> String {
    format!("must be no more than {n} bytes")
}

/// Go's `RegexError`, including its spacing.
fn regex_error(msg: &str, re: &str, examples: &[&str]) -> String {
    let examples: Vec<String> = examples.iter().map(|e| format!("'{e}', ")).collect();
    format!(
        "{msg} (e.g. {}regex used for validation is '{re}')",
        examples.join(" or ")
    )
}

/// `[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?`, without a length limit.
fn is_name(s: &str) -> bool {
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
fn is_dns1123_subdomain(s: &str) -> bool {
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
fn label_key_error(key: &str) -> Option<String> {
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
fn label_value_error(value: &str) -> Option<String> {
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
fn validate_values(key: &str, operator: Operator, values: &[String]) -> Result<(), SelectorError> {
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
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn parse(s: &str) -> Selector {
        Selector::parse(s).unwrap_or_else(|e| panic!("{s:?} should parse: {e}"))
    }

    fn error(s: &str) -> String {
        match Selector::parse(s) {
            Ok(sel) => panic!("{s:?} should not parse, got {sel:?}"),
            Err(e) => e.to_string(),
        }
    }

    // --- The recorded exchanges (k8s-wire 055-063). ---

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

    // --- Grammar. ---

    #[test]
    fn empty_and_blank_selectors_have_no_requirements() {
        for s in ["", " ", " \t\r\n "] {
            let sel = parse(s);
            assert!(sel.is_empty());
            assert!(sel.selects_everything());
            assert!(sel.matches(&labels(&[])));
            assert_eq!(sel.to_query_string(), "");
        }
    }

    #[test]
    fn a_trailing_comma_is_an_error() {
        assert_eq!(
            error("app=web,"),
            "found '', expected: identifier after ','"
        );
        assert_eq!(error("a,"), "found '', expected: identifier after ','");
    }

    #[test]
    fn a_leading_comma_is_an_error() {
        assert_eq!(
            error(",a"),
            "found ',', expected: !, identifier, or 'end of string'"
        );
    }

    #[test]
    fn whitespace_around_tokens_is_ignored() {
        assert_eq!(
            parse(" app = web , tier in ( a , b ) ").to_query_string(),
            "app=web,tier in (a,b)"
        );
        assert_eq!(parse("a\t!=\nb").to_query_string(), "a!=b");
    }

    #[test]
    fn every_operator_parses_and_renders_canonically() {
        let sel = parse("k1=a,k2==b,k3!=c,k4 in (x,y),k5 notin (z),k6,!k7,k8>5,k9<10");
        assert_eq!(
            sel.to_query_string(),
            "k1=a,k2=b,k3!=c,k4 in (x,y),k5 notin (z),k6,!k7,k8>5,k9<10"
        );
        assert_eq!(Selector::parse(&sel.to_query_string()), Ok(sel));
    }

    #[test]
    fn requirements_are_sorted_by_key_so_order_does_not_matter() {
        let a = parse("zeta=1,alpha=2,mid");
        assert_eq!(a.to_query_string(), "alpha=2,mid,zeta=1");
        assert_eq!(a, parse("mid,alpha==2,zeta=1"));
    }

    #[test]
    fn duplicate_keys_are_allowed_and_anded() {
        let sel = parse("a!=1,a!=2");
        assert!(sel.matches(&labels(&[("a", "3")])));
        assert!(!sel.matches(&labels(&[("a", "2")])));
        assert!(!sel.matches(&labels(&[("a", "1")])));
    }

    #[test]
    fn set_values_are_sorted_and_deduplicated() {
        assert_eq!(parse("x in (c,a,b,a)").to_query_string(), "x in (a,b,c)");
    }

    #[test]
    fn empty_entries_in_a_set_mean_the_empty_value() {
        assert_eq!(parse("x in ()").to_query_string(), "x in ()");
        assert_eq!(parse("x in (a,,b)").to_query_string(), "x in (,a,b)");
        assert_eq!(parse("x in (,)").to_query_string(), "x in ()");
        assert_eq!(parse("x in (,a)").to_query_string(), "x in (,a)");
        assert_eq!(parse("x in (a,)").to_query_string(), "x in (,a)");
        assert_eq!(parse("x in (,,,)").to_query_string(), "x in ()");
        assert!(parse("x in ()").matches(&labels(&[("x", "")])));
    }

    #[test]
    fn in_and_notin_are_keywords_only_in_operator_position() {
        assert_eq!(parse("x in (in)").to_query_string(), "x in (in)");
        assert_eq!(parse("in in (notin)").to_query_string(), "in in (notin)");
        assert_eq!(parse("notin").to_query_string(), "notin");
        assert_eq!(parse("!in").to_query_string(), "!in");
        assert_eq!(parse("x=in").to_query_string(), "x=in");
        assert_eq!(
            parse("notin notin (in,notin)").to_query_string(),
            "notin notin (in,notin)"
        );
    }

    #[test]
    fn the_lexer_takes_the_longest_operator() {
        // "!==" lexes as "!=" then "=", and "=" is not a value.
        assert_eq!(
            error("a!==b"),
            "unable to parse requirement: found '=', expected: identifier"
        );
        // "=(" lexes as "=" then "(".
        assert_eq!(
            error("a=(b)"),
            "unable to parse requirement: found '(', expected: identifier"
        );
    }

    #[test]
    fn not_takes_only_a_key() {
        assert_eq!(
            error("!app=web"),
            "found '=', expected: ',' or 'end of string'"
        );
        assert_eq!(
            error("!"),
            "unable to parse requirement: found '', expected: identifier"
        );
        assert_eq!(
            error("!!a"),
            "unable to parse requirement: found '!', expected: identifier"
        );
    }

    #[test]
    fn set_syntax_errors_name_the_token_found() {
        assert_eq!(
            error("x in (a b)"),
            "unable to parse requirement: found 'b', expected: ',' or ')'"
        );
        assert_eq!(
            error("x in (a"),
            "unable to parse requirement: found '', expected: ',' or ')'"
        );
        assert_eq!(
            error("x in (a,"),
            "unable to parse requirement: found '', expected: ',', or identifier"
        );
        assert_eq!(
            error("x in (=)"),
            "unable to parse requirement: found '=', expected: ',', ')' or identifier"
        );
        assert_eq!(
            error("x in"),
            "unable to parse requirement: found '' expected: '('"
        );
        assert_eq!(
            error("x notin (a))"),
            "found ')', expected: ',' or 'end of string'"
        );
    }

    #[test]
    fn missing_exact_value_means_the_empty_value() {
        assert_eq!(parse("a=,b!=").to_query_string(), "a=,b!=");
        assert!(parse("b!=").matches(&labels(&[("b", "x")])));
        assert!(!parse("b!=").matches(&labels(&[("b", "")])));
    }

    #[test]
    fn a_value_followed_by_another_word_is_an_error() {
        assert_eq!(
            error("a=b c"),
            "found 'c', expected: ',' or 'end of string'"
        );
    }

    // --- Key and value validation. ---

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

    // --- Matching (protocol brief §5.3). ---

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

    // --- Match-everything. ---

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

    // --- Encoding. ---

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
