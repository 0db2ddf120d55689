//! The lexer: a port of the API server's, byte for byte.

// ---------------------------------------------------------------------------------------
// Lexer: a port of the server's, byte for byte (including that a NUL byte reads as the end).

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Token {
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
pub(super) struct Item<'a> {
    pub(super) token: Token,
    pub(super) literal: &'a str,
}

pub(super) fn is_whitespace(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

pub(super) fn is_special(b: u8) -> bool {
    matches!(b, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

/// The token a literal spells, if it is one (identifiers excepted).
pub(super) fn keyword(s: &str) -> Option<Token> {
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
pub(super) fn lex(s: &str) -> Vec<Item<'_>> {
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
