//! The parser: requirements from the lexer's items, with the API server's grammar and
//! error texts.

use crate::selector::lex::{lex, Item, Token};
use crate::selector::validate::*;
use crate::selector::{Operator, Requirement, SelectorError};

/// Where the parser is: `in`/`notin` are keywords only when an operator is expected.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Context {
    KeyAndOperator,
    Values,
}

/// The requirements of `s`, in the order written.
pub(super) fn requirements(s: &str) -> Result<Vec<Requirement>, SelectorError> {
    Parser {
        items: lex(s),
        position: 0,
    }
    .parse()
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

pub(super) fn syntax(item: Item<'_>, expected: &'static str) -> SelectorError {
    SelectorError::Syntax {
        found: item.literal.to_string(),
        expected,
    }
}

pub(super) fn requirement(item: Item<'_>, expected: &'static str) -> SelectorError {
    SelectorError::Requirement {
        found: item.literal.to_string(),
        expected,
    }
}

#[cfg(test)]
mod tests {
    use crate::selector::test_support::*;
    use crate::selector::Selector;

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
}
