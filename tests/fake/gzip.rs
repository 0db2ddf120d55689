//! Response compression as kube-apiserver does it: a non-watch response of more than
//! 128 KiB to a request that accepts `gzip` is sent with `Content-Encoding: gzip`
//! (APIResponseCompression; client-go's transport always asks). The body is a valid gzip
//! member of stored (uncompressed) deflate blocks: what matters here is that the client
//! decodes it, not the ratio.

use super::http::{Request, Response};

/// kube-apiserver's threshold (`defaultGzipThresholdBytes`).
pub const THRESHOLD: usize = 128 * 1024;

/// The response as the API server would send it to `request`.
pub fn as_the_server_would(request: &Request, response: Response) -> Response {
    let accepts = request
        .header("accept-encoding")
        .is_some_and(|v| v.split(',').any(|e| e.trim() == "gzip"));
    if !accepts || response.body.len() <= THRESHOLD {
        return response;
    }
    let body = gzip_stored(&response.body);
    Response { body, ..response }.with_header("Content-Encoding", "gzip")
}

fn crc32(data: &[u8]) -> u32 {
    let mut table = [0u32; 256];
    for (i, entry) in table.iter_mut().enumerate() {
        let mut c = i as u32;
        for _ in 0..8 {
            c = if c & 1 == 1 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
        }
        *entry = c;
    }
    !data.iter().fold(!0u32, |c, &b| {
        table[((c ^ b as u32) & 0xFF) as usize] ^ (c >> 8)
    })
}

/// RFC 1952 around RFC 1951 stored blocks.
fn gzip_stored(data: &[u8]) -> Vec<u8> {
    let mut out = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255];
    let mut blocks = data.chunks(65_535).peekable();
    if blocks.peek().is_none() {
        out.extend_from_slice(&[1, 0, 0, 0xff, 0xff]);
    }
    while let Some(block) = blocks.next() {
        out.push(u8::from(blocks.peek().is_none()));
        let len = block.len() as u16;
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&(!len).to_le_bytes());
        out.extend_from_slice(block);
    }
    out.extend_from_slice(&crc32(data).to_le_bytes());
    out.extend_from_slice(&(data.len() as u32).to_le_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_crc_of_the_standard_check_string_is_cbf43926() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    }
}
