//! Response bodies the API server sent gzip-compressed (RFC 1952). It compresses a response
//! of more than 128 KiB to a client that accepts gzip (APIResponseCompression): a large
//! LIST, the metadata relist. Every request says it accepts gzip, as ureq's own gzip support
//! did; a body is read through [`Body`], which inflates it only when the response says
//! `Content-Encoding: gzip`.
//!
//! Why not ureq's `gzip` feature: it built flate2's 43 KiB inflate state on the stack of
//! every thread that read any response, compressed or not, and a stack keeps the pages it
//! once touched. With 25 threads, that was 124 KiB of wavelet's 3.3 MiB floor
//! (BENCHMARKS.md, "The floor, and what it is made of"). Here only a thread that reads a
//! compressed body pays for the state, and it is on the heap, for as long as the body.
//! The inflating itself is miniz_oxide's, as it was under flate2.

use std::io::{self, Read};

use miniz_oxide::inflate::stream::{inflate, InflateState};
use miniz_oxide::{DataFormat, MZError, MZFlush, MZStatus};

/// What every request sends as `Accept-Encoding`.
pub(super) const ACCEPTED: &str = "gzip";

/// A response body, inflated when it came gzip-compressed.
pub(crate) enum Body<R> {
    Plain(R),
    Gzip(Box<Gzip<R>>),
}

impl Body<ureq::BodyReader<'static>> {
    /// The body of `response`, read as its `Content-Encoding` says. An encoding wavelet did
    /// not ask for is an error, not bytes parsed as JSON.
    pub(crate) fn of(response: ureq::http::Response<ureq::Body>) -> io::Result<Self> {
        let encoding = response
            .headers()
            .get(ureq::http::header::CONTENT_ENCODING)
            .map(|v| {
                v.to_str()
                    .unwrap_or("(not text)")
                    .trim()
                    .to_ascii_lowercase()
            });
        let reader = response.into_body().into_reader();
        Body::with_encoding(reader, encoding.as_deref())
    }
}

impl<R: Read> Body<R> {
    fn with_encoding(reader: R, encoding: Option<&str>) -> io::Result<Self> {
        match encoding {
            None | Some("") | Some("identity") => Ok(Body::Plain(reader)),
            Some("gzip") | Some("x-gzip") => Ok(Body::Gzip(Box::new(Gzip::new(reader)))),
            Some(other) => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("the response is encoded as {other:?}, which wavelet did not ask for"),
            )),
        }
    }
}

impl<R: Read> Read for Body<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        match self {
            Body::Plain(reader) => reader.read(out),
            Body::Gzip(gzip) => gzip.read(out),
        }
    }
}

/// Where a [`Gzip`] reader is in its stream: a stream is one or more members, each a
/// header, a deflate stream and a trailer (CRC-32 and length of what it inflates to).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Before a member's header; the end of the input here is the end of the body.
    Header,
    Deflate,
    Trailer,
    Done,
}

/// Inflates a gzip stream read from `inner`, checking each member's CRC-32 and length.
pub(crate) struct Gzip<R> {
    inner: R,
    /// Created at the first member (the body's first read), on the heap.
    state: Option<Box<InflateState>>,
    input: Box<[u8]>,
    start: usize,
    end: usize,
    phase: Phase,
    members: u32,
    crc: Crc32,
    length: u32,
}

const INPUT_BUFFER: usize = 8 * 1024;

const FTEXT_FHCRC: u8 = 0x02;
const FEXTRA: u8 = 0x04;
const FNAME: u8 = 0x08;
const FCOMMENT: u8 = 0x10;
const RESERVED: u8 = 0xe0;

impl<R: Read> Gzip<R> {
    pub(crate) fn new(inner: R) -> Self {
        Gzip {
            inner,
            state: None,
            input: vec![0; INPUT_BUFFER].into_boxed_slice(),
            start: 0,
            end: 0,
            phase: Phase::Header,
            members: 0,
            crc: Crc32::new(),
            length: 0,
        }
    }

    /// Refills the input when it is used up; `false` at the end of `inner`.
    fn fill(&mut self) -> io::Result<bool> {
        if self.start < self.end {
            return Ok(true);
        }
        self.start = 0;
        self.end = loop {
            match self.inner.read(&mut self.input) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                other => break other?,
            }
        };
        Ok(self.end > 0)
    }

    /// Reads more input after what is left of it (which inflate could not use alone).
    fn read_more(&mut self) -> io::Result<()> {
        self.input.copy_within(self.start..self.end, 0);
        self.end -= self.start;
        self.start = 0;
        if self.end == self.input.len() {
            return Err(invalid("the gzip body's deflate stream makes no progress"));
        }
        let n = loop {
            match self.inner.read(&mut self.input[self.end..]) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                other => break other?,
            }
        };
        if n == 0 {
            return Err(invalid("the gzip body ends inside its deflate stream"));
        }
        self.end += n;
        Ok(())
    }

    fn byte(&mut self) -> io::Result<u8> {
        if !self.fill()? {
            return Err(invalid("the gzip body ends inside a header or trailer"));
        }
        self.start += 1;
        Ok(self.input[self.start - 1])
    }

    fn u16_le(&mut self) -> io::Result<u16> {
        Ok(u16::from_le_bytes([self.byte()?, self.byte()?]))
    }

    fn u32_le(&mut self) -> io::Result<u32> {
        Ok(u32::from_le_bytes([
            self.byte()?,
            self.byte()?,
            self.byte()?,
            self.byte()?,
        ]))
    }

    /// Reads a member's header (RFC 1952 §2.3), skipping its optional fields.
    fn header(&mut self) -> io::Result<()> {
        let (id1, id2, method, flags) = (self.byte()?, self.byte()?, self.byte()?, self.byte()?);
        if (id1, id2) != (0x1f, 0x8b) {
            return Err(invalid(
                "the body is not gzip (no 1f 8b at a member's start)",
            ));
        }
        if method != 8 {
            return Err(invalid("the gzip body uses a method other than deflate"));
        }
        if flags & RESERVED != 0 {
            return Err(invalid("the gzip header sets reserved flags"));
        }
        for _ in 0..6 {
            self.byte()?; // MTIME, XFL, OS
        }
        if flags & FEXTRA != 0 {
            for _ in 0..self.u16_le()? {
                self.byte()?;
            }
        }
        for field in [FNAME, FCOMMENT] {
            if flags & field != 0 {
                while self.byte()? != 0 {}
            }
        }
        if flags & FTEXT_FHCRC != 0 {
            self.u16_le()?;
        }
        match &mut self.state {
            Some(state) => state.reset(DataFormat::Raw),
            None => self.state = Some(inflate_state()),
        }
        self.crc = Crc32::new();
        self.length = 0;
        Ok(())
    }

    /// Inflates into `out`; `Ok(0)` only when the member's deflate stream ended.
    fn deflate(&mut self, out: &mut [u8]) -> io::Result<usize> {
        loop {
            if !self.fill()? {
                return Err(invalid("the gzip body ends inside its deflate stream"));
            }
            let state = self
                .state
                .as_mut()
                .expect("a header read before its stream");
            let result = inflate(state, &self.input[self.start..self.end], out, MZFlush::None);
            self.start += result.bytes_consumed;
            let written = &out[..result.bytes_written];
            self.crc.update(written);
            self.length = self.length.wrapping_add(written.len() as u32);
            match result.status {
                Ok(MZStatus::StreamEnd) => {
                    self.phase = Phase::Trailer;
                    return Ok(written.len());
                }
                Ok(_) if !written.is_empty() => return Ok(written.len()),
                // Nothing written: read more, after what is left if nothing was used.
                Ok(_) | Err(MZError::Buf) if result.bytes_consumed > 0 => continue,
                Ok(_) | Err(MZError::Buf) => self.read_more()?,
                Err(e) => {
                    return Err(invalid(&format!(
                        "the gzip body's deflate stream is invalid ({e:?})"
                    )))
                }
            }
        }
    }

    fn trailer(&mut self) -> io::Result<()> {
        let (crc, length) = (self.u32_le()?, self.u32_le()?);
        if crc != self.crc.value() {
            return Err(invalid(
                "the gzip body's CRC-32 does not match what it inflates to",
            ));
        }
        if length != self.length {
            return Err(invalid(
                "the gzip body's length does not match what it inflates to",
            ));
        }
        self.members += 1;
        Ok(())
    }
}

impl<R: Read> Read for Gzip<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if out.is_empty() {
            return Ok(0);
        }
        loop {
            match self.phase {
                Phase::Header => {
                    // Another member may follow a member; the input's end ends the body,
                    // but not before a first member.
                    if !self.fill()? {
                        if self.members == 0 {
                            return Err(invalid("the gzip body is empty"));
                        }
                        self.phase = Phase::Done;
                        continue;
                    }
                    self.header()?;
                    self.phase = Phase::Deflate;
                }
                Phase::Deflate => {
                    let written = self.deflate(out)?;
                    if written > 0 {
                        return Ok(written);
                    }
                }
                Phase::Trailer => {
                    self.trailer()?;
                    self.phase = Phase::Header;
                }
                Phase::Done => {
                    self.state = None;
                    return Ok(0);
                }
            }
        }
    }
}

/// miniz_oxide's 43 KiB inflate state, made in a frame of its own: it is built on the stack
/// before it is boxed, and a stack keeps every page it once touched. Inlined into the
/// reading, that frame would be every response's, compressed or not (ureq's mistake).
#[inline(never)]
fn inflate_state() -> Box<InflateState> {
    InflateState::new_boxed(DataFormat::Raw)
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_string())
}

/// CRC-32 as gzip uses it (IEEE 802.3, reflected, polynomial 0xEDB88320).
#[derive(Debug, Clone, Copy)]
struct Crc32(u32);

const CRC_TABLE: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut n = 0;
    while n < 256 {
        let mut c = n as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                0xedb8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
            k += 1;
        }
        table[n] = c;
        n += 1;
    }
    table
};

impl Crc32 {
    fn new() -> Self {
        Crc32(!0)
    }

    fn update(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = CRC_TABLE[((self.0 ^ b as u32) & 0xff) as usize] ^ (self.0 >> 8);
        }
    }

    fn value(&self) -> u32 {
        !self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::process::{Command, Stdio};

    /// `data` compressed by the system's `gzip`, another implementation than ours (as the
    /// API server's Go one is), with `args`.
    fn system_gzip(data: &[u8], args: &[&str]) -> Vec<u8> {
        let mut child = Command::new("gzip")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("gzip is installed");
        let mut stdin = child.stdin.take().unwrap();
        let data = data.to_vec();
        let writer = std::thread::spawn(move || stdin.write_all(&data));
        let out = child.wait_with_output().unwrap();
        writer.join().unwrap().unwrap();
        assert!(out.status.success());
        out.stdout
    }

    /// A member written by hand, with every optional header field, around miniz_oxide's
    /// deflate stream of `data`.
    fn member_with_all_fields(data: &[u8]) -> Vec<u8> {
        let mut crc = Crc32::new();
        crc.update(data);
        let mut member = vec![0x1f, 0x8b, 8, FTEXT_FHCRC | FEXTRA | FNAME | FCOMMENT];
        member.extend([0, 0, 0, 0, 0, 3]);
        member.extend([3, 0, b'a', b'b', b'c']);
        member.extend(b"name.json\0a comment\0");
        member.extend([0x12, 0x34]);
        member.extend(miniz_oxide::deflate::compress_to_vec(data, 6));
        member.extend(crc.value().to_le_bytes());
        member.extend((data.len() as u32).to_le_bytes());
        member
    }

    /// Reads `reader` to its end through reads of `chunk` bytes.
    fn read_all(mut reader: impl Read, chunk: usize) -> io::Result<Vec<u8>> {
        let mut all = Vec::new();
        let mut buf = vec![0; chunk];
        loop {
            match reader.read(&mut buf)? {
                0 => return Ok(all),
                n => all.extend_from_slice(&buf[..n]),
            }
        }
    }

    /// A reader that hands out at most `step` bytes a read, as a socket may.
    struct Trickle<'a> {
        bytes: &'a [u8],
        step: usize,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            let n = self.step.min(out.len()).min(self.bytes.len());
            out[..n].copy_from_slice(&self.bytes[..n]);
            self.bytes = &self.bytes[n..];
            Ok(n)
        }
    }

    fn list_json(items: usize) -> Vec<u8> {
        let mut json = String::from(r#"{"kind":"ConfigMapList","items":["#);
        for i in 0..items {
            json.push_str(&format!(
                r#"{{"metadata":{{"name":"cm-{i}","resourceVersion":"{}"}}}},"#,
                i * 7919 % 100_003
            ));
        }
        json.push_str("{}]}");
        json.into_bytes()
    }

    #[test]
    fn crc32_is_gzips() {
        let mut crc = Crc32::new();
        crc.update(b"123456789");
        assert_eq!(crc.value(), 0xcbf4_3926);
    }

    #[test]
    fn a_body_compressed_by_the_system_gzip_reads_back_whatever_the_reads_sizes() {
        let json = list_json(20_000);
        for level in ["-1", "-9"] {
            let compressed = system_gzip(&json, &["-c", level, "-n"]);
            assert!(compressed.len() < json.len() / 4);
            for (step, chunk) in [(1, 7), (13, 1), (4096, 16 * 1024), (1 << 20, 1 << 20)] {
                let body = Trickle {
                    bytes: &compressed,
                    step,
                };
                let read = read_all(Gzip::new(body), chunk).unwrap();
                assert!(read == json, "gzip {level}, step {step}, chunk {chunk}");
            }
        }
    }

    #[test]
    fn optional_header_fields_and_a_second_member_are_read() {
        let (first, second) = (list_json(300), b"and more".to_vec());
        let mut body = member_with_all_fields(&first);
        body.extend(system_gzip(&second, &["-c", "-n"]));
        let read = read_all(Gzip::new(&body[..]), 1000).unwrap();
        assert_eq!(read, [first, second].concat());
    }

    #[test]
    fn a_corrupt_truncated_or_empty_body_is_an_error_not_short_data() {
        let json = list_json(2000);
        let good = system_gzip(&json, &["-c", "-n"]);
        let error_of = |body: &[u8]| {
            read_all(Gzip::new(body), 4096)
                .expect_err("an error")
                .to_string()
        };
        let mut crc = good.clone();
        let at = crc.len() - 8;
        crc[at] ^= 1;
        assert!(error_of(&crc).contains("CRC-32"), "{}", error_of(&crc));
        let mut length = good.clone();
        let at = length.len() - 1;
        length[at] ^= 1;
        assert!(error_of(&length).contains("length"));
        assert!(error_of(&good[..good.len() - 3]).contains("ends inside"));
        assert!(error_of(&good[..good.len() / 2]).contains("ends inside its deflate"));
        assert!(error_of(b"").contains("empty"));
        assert!(error_of(b"{\"kind\":\"List\"}").contains("not gzip"));
        let mut flipped = good.clone();
        flipped[20] ^= 0xff;
        assert!(read_all(Gzip::new(&flipped[..]), 4096).is_err());
    }

    #[test]
    fn a_body_is_inflated_only_when_its_encoding_says_gzip() {
        let json = list_json(10);
        let compressed = system_gzip(&json, &["-c", "-n"]);
        let plain = Body::with_encoding(&json[..], None).unwrap();
        assert_eq!(read_all(plain, 64).unwrap(), json);
        let identity = Body::with_encoding(&json[..], Some("identity")).unwrap();
        assert_eq!(read_all(identity, 64).unwrap(), json);
        let gzip = Body::with_encoding(&compressed[..], Some("gzip")).unwrap();
        assert_eq!(read_all(gzip, 64).unwrap(), json);
        let error = Body::with_encoding(&json[..], Some("br")).err().unwrap();
        assert!(error.to_string().contains("\"br\""), "{error}");
    }
}
