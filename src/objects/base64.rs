//! Standard base64 (RFC 4648 §4, with padding) decoding, as the API server encodes
//! Secret `data`, ConfigMap `binaryData` and kubeconfig `*-data` fields.

/// Decodes standard base64. Whitespace is skipped (kubeconfig files wrap long lines);
/// missing padding is accepted; any other character is an error.
pub fn decode(input: &[u8]) -> Result<Vec<u8>, InvalidBase64> {
    let mut out = Vec::with_capacity(input.len() / 4 * 3 + 3);
    let mut acc: u32 = 0;
    let mut bits = 0u32;
    let mut padding = 0usize;
    for (position, &byte) in input.iter().enumerate() {
        let value = match byte {
            b'A'..=b'Z' => byte - b'A',
            b'a'..=b'z' => byte - b'a' + 26,
            b'0'..=b'9' => byte - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            b'=' => {
                padding += 1;
                continue;
            }
            b' ' | b'\n' | b'\r' | b'\t' => continue,
            _ => return Err(InvalidBase64 { position }),
        };
        if padding > 0 {
            // Data after padding.
            return Err(InvalidBase64 { position });
        }
        acc = (acc << 6) | u32::from(value);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    if bits >= 6 || padding > 2 {
        return Err(InvalidBase64 {
            position: input.len(),
        });
    }
    Ok(out)
}

/// Standard base64 with padding.
pub fn encode(input: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(input.len().div_ceil(3) * 4);
    for chunk in input.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The input was not base64; `position` is the byte offset of the first bad character.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InvalidBase64 {
    pub position: usize,
}

impl std::fmt::Display for InvalidBase64 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "invalid base64 at byte {}", self.position)
    }
}

impl std::error::Error for InvalidBase64 {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_rfc4648_test_vectors() {
        for (plain, encoded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(
                decode(encoded.as_bytes()).unwrap(),
                plain.as_bytes(),
                "{encoded}"
            );
            assert_eq!(encode(plain.as_bytes()), encoded);
        }
    }

    #[test]
    fn skips_line_breaks_and_accepts_missing_padding() {
        assert_eq!(decode(b"Zm9v\nYmFy").unwrap(), b"foobar");
        assert_eq!(decode(b"Zm8").unwrap(), b"fo");
    }

    #[test]
    fn rejects_characters_outside_the_alphabet() {
        assert_eq!(decode(b"Zm9v!"), Err(InvalidBase64 { position: 4 }));
        assert!(decode(b"Zg==Zg==").is_err());
        assert!(decode(b"Z").is_err());
    }

    #[test]
    fn round_trips_all_byte_values() {
        let bytes: Vec<u8> = (0..=255).collect();
        assert_eq!(decode(encode(&bytes).as_bytes()).unwrap(), bytes);
    }
}
