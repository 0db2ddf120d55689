//! HTTP/1.1 on a connection (plain or TLS, see `tls::Conn`): reading requests (Content-Length or chunked bodies),
//! writing responses the way Go's net/http does (Content-Length below 2048 bytes,
//! chunked above), and a chunked writer for watch streams.

use std::io::{self, BufRead, Write};
use std::net::TcpStream;

use super::tls::Conn;

/// Go's response buffer: bodies that fit are sent with Content-Length, bigger ones chunked.
pub const GO_BUFFER_SIZE: usize = 2048;

/// One parsed request, as recorded by the fake.
#[derive(Clone, Debug)]
pub struct Request {
    pub method: String,
    /// Path without the query string, percent-decoded.
    pub path: String,
    /// Query parameters in order, percent-decoded (`+` is a space, as in Go's ParseQuery).
    pub query: Vec<(String, String)>,
    /// Header names in lowercase.
    pub headers: Vec<(String, String)>,
    pub body: String,
    /// When the whole request had been read (for latency measurements).
    pub received: std::time::Instant,
}

impl Request {
    /// The first value of a query parameter (the API server ignores repeats).
    pub fn query_param(&self, key: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    pub fn header(&self, key: &str) -> Option<&str> {
        let key = key.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON; `Value::Null` when it is empty or not JSON.
    pub fn body_json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or(serde_json::Value::Null)
    }

    /// `watch` is set and truthy: only "0" and "false" (any case) are false (§1.1).
    pub fn is_watch(&self) -> bool {
        self.query_param("watch").is_some_and(is_truthy)
    }

    /// The plural resource the path addresses (`configmaps`, `deployments`, ...), or "".
    pub fn resource(&self) -> String {
        crate::fake::resources::plural_in_path(&self.path)
    }

    /// The resource faults address: the plural, or `<plural>/<name>` for a list or watch
    /// narrowed to one object by `fieldSelector=metadata.name=<name>` (wavelet's watch of
    /// its own state ConfigMap), so a fault aimed at a resource's collection does not land
    /// on the watch of one object of it by chance.
    pub fn fault_resource(&self) -> String {
        let plural = self.resource();
        match self
            .query_param("fieldSelector")
            .and_then(|f| f.strip_prefix("metadata.name="))
        {
            Some(name) if !name.contains(',') => format!("{plural}/{name}"),
            _ => plural,
        }
    }

    /// The finer verb faults may name instead of GET: "LIST" for a GET of a collection,
    /// "GET_OBJECT" for a GET of one object; `None` for other requests.
    pub fn fault_detail(&self) -> Option<&'static str> {
        if self.method != "GET" || self.is_watch() {
            return None;
        }
        let plural = self.resource();
        if plural.is_empty() {
            None
        } else if self.path.ends_with(&format!("/{plural}")) {
            Some("LIST")
        } else {
            Some("GET_OBJECT")
        }
    }

    /// The verb used to match faults: GET, WATCH, PATCH, POST, PUT, DELETE.
    pub fn fault_verb(&self) -> &str {
        if self.method == "GET" && self.is_watch() {
            "WATCH"
        } else {
            &self.method
        }
    }

    pub(crate) fn wants_close(&self) -> bool {
        self.header("connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("close"))
    }
}

/// Go's boolean query conversion: "0" and "false" are false, anything else is true.
pub fn is_truthy(value: &str) -> bool {
    !(value == "0" || value.eq_ignore_ascii_case("false"))
}

/// Reads one request; `Ok(None)` when the peer closed the connection between requests.
pub fn read_request(reader: &mut impl BufRead) -> io::Result<Option<Request>> {
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Ok(None);
    }
    let line = line.trim_end();
    let mut parts = line.split(' ');
    let (method, target) = match (parts.next(), parts.next()) {
        (Some(m), Some(t)) if !m.is_empty() => (m.to_string(), t.to_string()),
        _ => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "bad request line",
            ))
        }
    };
    let mut headers = Vec::new();
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header)? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
        }
    }
    let find = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let body = if find("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        read_chunked_body(reader)?
    } else {
        let length: usize = find("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let mut body = vec![0; length];
        reader.read_exact(&mut body)?;
        body
    };
    let (raw_path, raw_query) = target.split_once('?').unwrap_or((&target, ""));
    Ok(Some(Request {
        method,
        path: percent_decode(raw_path, false),
        query: parse_query(raw_query),
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
        received: std::time::Instant::now(),
    }))
}

fn read_chunked_body(reader: &mut impl BufRead) -> io::Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let mut size_line = String::new();
        reader.read_line(&mut size_line)?;
        let size_hex = size_line.trim().split(';').next().unwrap_or("");
        let size = usize::from_str_radix(size_hex, 16)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "bad chunk size"))?;
        if size == 0 {
            // Trailers (none expected) end with an empty line.
            loop {
                let mut trailer = String::new();
                if reader.read_line(&mut trailer)? == 0 || trailer.trim().is_empty() {
                    return Ok(body);
                }
            }
        }
        let start = body.len();
        body.resize(start + size, 0);
        reader.read_exact(&mut body[start..])?;
        let mut crlf = [0; 2];
        reader.read_exact(&mut crlf)?;
    }
}

/// Splits and decodes a query string. A key without `=` gets the empty value.
pub fn parse_query(raw: &str) -> Vec<(String, String)> {
    raw.split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(k, true), percent_decode(v, true))
        })
        .collect()
}

/// Percent-decoding; in a query `+` also means a space.
pub fn percent_decode(raw: &str, plus_is_space: bool) -> String {
    fn hex(b: u8) -> Option<u8> {
        (b as char).to_digit(16).map(|d| d as u8)
    }
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(hi), Some(lo)) => {
                    out.push(hi * 16 + lo);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            b'+' if plus_is_space => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A complete non-streaming response.
#[derive(Clone, Debug)]
pub struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub extra_headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn json(status: u16, body: &impl serde::Serialize) -> Response {
        Response {
            status,
            content_type: "application/json",
            extra_headers: Vec::new(),
            body: serde_json::to_vec(body).expect("JSON values serialize"),
        }
    }

    pub fn text(status: u16, body: &str) -> Response {
        Response {
            status,
            content_type: "text/plain; charset=utf-8",
            extra_headers: vec![("X-Content-Type-Options".into(), "nosniff".into())],
            body: body.as_bytes().to_vec(),
        }
    }

    pub fn with_header(mut self, name: &str, value: impl Into<String>) -> Response {
        self.extra_headers.push((name.to_string(), value.into()));
        self
    }
}

pub fn reason_phrase(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        406 => "Not Acceptable",
        409 => "Conflict",
        410 => "Gone",
        413 => "Request Entity Too Large",
        415 => "Unsupported Media Type",
        422 => "Unprocessable Entity",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Unknown",
    }
}

fn head(status: u16, content_type: &str, extra: &[(String, String)]) -> String {
    let mut head = format!("HTTP/1.1 {} {}\r\n", status, reason_phrase(status));
    head.push_str("Cache-Control: no-cache, private\r\n");
    head.push_str(&format!("Content-Type: {content_type}\r\n"));
    for (name, value) in extra {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head
}

/// Writes a whole response: Content-Length when the body is under 2048 bytes, else chunked
/// in 2048-byte pieces.
pub fn write_response(stream: &mut impl Write, response: &Response) -> io::Result<()> {
    let mut out = head(
        response.status,
        response.content_type,
        &response.extra_headers,
    )
    .into_bytes();
    if response.body.len() < GO_BUFFER_SIZE {
        out.extend_from_slice(
            format!("Content-Length: {}\r\n\r\n", response.body.len()).as_bytes(),
        );
        out.extend_from_slice(&response.body);
    } else {
        out.extend_from_slice(b"Transfer-Encoding: chunked\r\n\r\n");
        for piece in response.body.chunks(GO_BUFFER_SIZE) {
            out.extend_from_slice(&chunk_bytes(piece));
        }
        out.extend_from_slice(b"0\r\n\r\n");
    }
    stream.write_all(&out)?;
    stream.flush()
}

/// The bytes of one HTTP/1.1 chunk.
pub fn chunk_bytes(data: &[u8]) -> Vec<u8> {
    let mut out = format!("{:x}\r\n", data.len()).into_bytes();
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
    out
}

/// The response to a watch: headers flushed at once, then chunks until `finish`.
pub struct ChunkedStream<'a> {
    stream: &'a mut Conn,
}

impl<'a> ChunkedStream<'a> {
    /// Sends `200` with the watch headers and flushes them before any event.
    pub fn start(stream: &'a mut Conn) -> io::Result<ChunkedStream<'a>> {
        let mut out = head(200, "application/json", &[]);
        out.push_str("Transfer-Encoding: chunked\r\n\r\n");
        stream.write_all(out.as_bytes())?;
        stream.flush()?;
        Ok(ChunkedStream { stream })
    }

    pub fn stream(&self) -> &TcpStream {
        self.stream.socket()
    }

    /// One chunk, flushed.
    pub fn chunk(&mut self, data: &[u8]) -> io::Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        self.stream.write_all(&chunk_bytes(data))?;
        self.stream.flush()
    }

    /// A burst packed into 2048-byte chunks that may split lines, as Go's buffer does.
    pub fn burst(&mut self, data: &[u8]) -> io::Result<()> {
        let mut out = Vec::new();
        for piece in data.chunks(GO_BUFFER_SIZE) {
            out.extend_from_slice(&chunk_bytes(piece));
        }
        self.stream.write_all(&out)?;
        self.stream.flush()
    }

    /// Writes a chunk header announcing `full_len` bytes but only `data`, then drops the
    /// connection: a stream cut mid-event.
    pub fn cut(&mut self, data: &[u8], full_len: usize) {
        let mut out = format!("{full_len:x}\r\n").into_bytes();
        out.extend_from_slice(data);
        let _ = self.stream.write_all(&out);
        let _ = self.stream.flush();
        let _ = self.stream.socket().shutdown(std::net::Shutdown::Both);
    }

    /// The terminating 0-length chunk: a clean end; the connection stays open.
    pub fn finish(self) -> io::Result<()> {
        self.stream.write_all(b"0\r\n\r\n")?;
        self.stream.flush()
    }
}
