//! A tiny raw HTTP/1.1 client for tests that need to see the wire: status, headers,
//! whether a body was chunked and how, and watch streams read chunk by chunk.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::Value;

/// A response as it came over the wire.
#[derive(Clone, Debug)]
pub struct RawResponse {
    pub status: u16,
    /// Lowercase names.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// Chunk sizes when the body was chunked, `None` with Content-Length.
    pub chunks: Option<Vec<usize>>,
}

impl RawResponse {
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}): {}", self.text()))
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// One keep-alive connection.
pub struct RawClient {
    writer: TcpStream,
    reader: BufReader<TcpStream>,
    host: String,
    /// Sent with every request when set.
    pub token: Option<String>,
    /// Bytes of a chunk cut short by a broken connection.
    partial: Vec<u8>,
}

impl RawClient {
    /// Connects to `http://127.0.0.1:PORT`.
    pub fn connect(url: &str) -> RawClient {
        let host = url
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_string();
        let writer = TcpStream::connect(&host).expect("connect to the fake API server");
        writer
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("read timeout");
        let reader = BufReader::new(writer.try_clone().expect("clone stream"));
        RawClient {
            writer,
            reader,
            host,
            token: None,
            partial: Vec::new(),
        }
    }

    /// Sends a request and reads the status line and headers.
    pub fn send(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&str>,
    ) -> io::Result<(u16, Vec<(String, String)>)> {
        let mut out = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nUser-Agent: wire-test/1.0\r\n",
            self.host
        );
        if !headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("accept"))
        {
            out.push_str("Accept: application/json\r\n");
        }
        if let Some(token) = &self.token {
            out.push_str(&format!("Authorization: Bearer {token}\r\n"));
        }
        for (name, value) in headers {
            out.push_str(&format!("{name}: {value}\r\n"));
        }
        let body = body.unwrap_or("");
        if !body.is_empty() || matches!(method, "POST" | "PUT" | "PATCH") {
            out.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        out.push_str("\r\n");
        out.push_str(body);
        self.writer.write_all(out.as_bytes())?;
        self.read_head()
    }

    fn read_head(&mut self) -> io::Result<(u16, Vec<(String, String)>)> {
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        let status = line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or(io::ErrorKind::InvalidData)?;
        let mut headers = Vec::new();
        loop {
            let mut header = String::new();
            self.reader.read_line(&mut header)?;
            let header = header.trim_end();
            if header.is_empty() {
                return Ok((status, headers));
            }
            if let Some((k, v)) = header.split_once(':') {
                headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
            }
        }
    }

    /// Reads one chunk; `Ok(None)` for the terminating chunk.
    pub fn next_chunk(&mut self) -> io::Result<Option<Vec<u8>>> {
        let mut size_line = String::new();
        if self.reader.read_line(&mut size_line)? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        let size = usize::from_str_radix(size_line.trim(), 16)
            .map_err(|_| io::Error::from(io::ErrorKind::InvalidData))?;
        if size == 0 {
            let mut end = String::new();
            self.reader.read_line(&mut end)?;
            return Ok(None);
        }
        let mut data = Vec::with_capacity(size);
        (&mut self.reader)
            .take(size as u64)
            .read_to_end(&mut data)?;
        if data.len() < size {
            self.partial = data;
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        let mut crlf = [0; 2];
        self.reader.read_exact(&mut crlf)?;
        Ok(Some(data))
    }

    /// A whole request/response on this connection.
    pub fn request(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&str>,
    ) -> RawResponse {
        let (status, headers) = self
            .send(method, path, headers, body)
            .expect("send request");
        let find = |name: &str| {
            headers
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        };
        let (body, chunks) = if find("transfer-encoding").as_deref() == Some("chunked") {
            let mut body = Vec::new();
            let mut sizes = Vec::new();
            while let Some(chunk) = self.next_chunk().expect("read chunk") {
                sizes.push(chunk.len());
                body.extend_from_slice(&chunk);
            }
            (body, Some(sizes))
        } else {
            let length: usize = find("content-length")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            let mut body = vec![0; length];
            self.reader.read_exact(&mut body).expect("read body");
            (body, None)
        };
        RawResponse {
            status,
            headers,
            body,
            chunks,
        }
    }

    pub fn get(&mut self, path: &str) -> RawResponse {
        self.request("GET", path, &[], None)
    }

    pub fn json(
        &mut self,
        method: &str,
        path: &str,
        content_type: &str,
        body: &Value,
    ) -> RawResponse {
        self.request(
            method,
            path,
            &[("Content-Type", content_type)],
            Some(&body.to_string()),
        )
    }

    /// Starts a watch; the headers are read, events are read with `WatchStream`.
    pub fn watch(self, path: &str) -> WatchStream {
        self.watch_with(path, &[])
    }

    /// Starts a watch with extra request headers.
    pub fn watch_with(mut self, path: &str, headers: &[(&str, &str)]) -> WatchStream {
        let (status, headers) = self.send("GET", path, headers, None).expect("start watch");
        WatchStream {
            client: self,
            status,
            headers,
            buffer: Vec::new(),
            chunks: Vec::new(),
            ended: false,
        }
    }
}

/// An open watch response.
pub struct WatchStream {
    pub client: RawClient,
    pub status: u16,
    pub headers: Vec<(String, String)>,
    buffer: Vec<u8>,
    /// Sizes of the chunks received so far.
    pub chunks: Vec<usize>,
    /// The terminating chunk arrived.
    pub ended: bool,
}

/// How a watch read ended without an event.
#[derive(Debug, PartialEq)]
pub enum StreamEnd {
    /// The terminating 0-length chunk: a clean end.
    Clean,
    /// The connection broke (EOF or reset) mid-stream.
    Broken,
    /// Nothing arrived in time.
    Timeout,
}

impl WatchStream {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The next complete line (without "\n"), or how the stream ended.
    pub fn next_line(&mut self, timeout: Duration) -> Result<String, StreamEnd> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(end) = self.buffer.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buffer.drain(..=end).collect();
                return Ok(String::from_utf8_lossy(&line[..line.len() - 1]).into_owned());
            }
            if self.ended {
                return Err(StreamEnd::Clean);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(StreamEnd::Timeout);
            }
            self.client
                .writer
                .set_read_timeout(Some(left))
                .expect("read timeout");
            match self.client.next_chunk() {
                Ok(Some(chunk)) => {
                    self.chunks.push(chunk.len());
                    self.buffer.extend_from_slice(&chunk);
                }
                Ok(None) => self.ended = true,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    return Err(StreamEnd::Timeout)
                }
                Err(_) => {
                    self.buffer.append(&mut self.client.partial);
                    return Err(StreamEnd::Broken);
                }
            }
        }
    }

    /// The next event as JSON; panics on a line that is not JSON.
    pub fn next_event(&mut self, timeout: Duration) -> Result<Value, StreamEnd> {
        let line = self.next_line(timeout)?;
        Ok(serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("event line is not JSON ({e}): {line}")))
    }

    /// Events until the stream ends or nothing arrives for `quiet`.
    pub fn events_until_quiet(&mut self, quiet: Duration) -> (Vec<Value>, StreamEnd) {
        let mut events = Vec::new();
        loop {
            match self.next_event(quiet) {
                Ok(event) => events.push(event),
                Err(end) => return (events, end),
            }
        }
    }

    /// Bytes received but not yet returned as a line.
    pub fn leftover(&self) -> &[u8] {
        &self.buffer
    }
}

/// The `type` of each event.
pub fn types(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["type"].as_str().unwrap_or("").to_string())
        .collect()
}
