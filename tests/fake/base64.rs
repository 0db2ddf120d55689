//! Base64: standard padded encoding (Secret `stringData` → `data`) and unpadded URL-safe
//! encoding/decoding (continue tokens), with Go's error text for bad input.

const STANDARD: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const URL_SAFE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

fn encode_with(alphabet: &[u8; 64], data: &[u8], pad: bool) -> String {
    let mut out = String::new();
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..=chunk.len() {
            out.push(alphabet[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
        if pad {
            out.push_str(&"=".repeat(3 - chunk.len()));
        }
    }
    out
}

pub fn encode_standard(data: &[u8]) -> String {
    encode_with(STANDARD, data, true)
}

pub fn encode_url_raw(data: &[u8]) -> String {
    encode_with(URL_SAFE, data, false)
}

/// `base64.RawURLEncoding.DecodeString`; the error is Go's "illegal base64 data at input byte N".
pub fn decode_url_raw(text: &str) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    let mut buffer = 0u32;
    let mut bits = 0;
    for (i, c) in text.bytes().enumerate() {
        let Some(v) = URL_SAFE.iter().position(|a| *a == c) else {
            return Err(format!("illegal base64 data at input byte {i}"));
        };
        buffer = (buffer << 6) | v as u32;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((buffer >> bits) as u8);
        }
    }
    if text.len() % 4 == 1 {
        return Err(format!("illegal base64 data at input byte {}", text.len()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_reports_bad_bytes_like_go() {
        assert_eq!(encode_standard(b"stringData-wins"), "c3RyaW5nRGF0YS13aW5z");
        assert_eq!(
            encode_standard(b"plain-text-token"),
            "cGxhaW4tdGV4dC10b2tlbg=="
        );
        let token = encode_url_raw(b"{\"rv\":1}");
        assert_eq!(decode_url_raw(&token).unwrap(), b"{\"rv\":1}");
        assert_eq!(
            decode_url_raw("not-base64!!").unwrap_err(),
            "illegal base64 data at input byte 10"
        );
    }
}
