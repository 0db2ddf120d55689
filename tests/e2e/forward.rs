//! A TCP forwarder to the API server (or a `kubectl proxy`) on another loopback port,
//! whose answers can be held back for a while: the server gets every request at once and
//! acts on it, the client hears of it late (a stalled network, a slow proxy). TLS passes
//! through untouched: the API server's certificate names 127.0.0.1 whatever the port.
//! In front of a `kubectl proxy` (plain HTTP) it can also hold back only the answers to
//! the watches of one resource: a watch that went silent while everything else works.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub struct Forwarder {
    pub port: u16,
    holds: Arc<Holds>,
}

/// What is held back, and what was asked, shared by every connection.
#[derive(Default)]
struct Holds {
    /// Every request line seen, in order (plain HTTP only).
    requests: Mutex<Vec<String>>,
    /// Every byte from the server waits until then.
    until: Mutex<Option<Instant>>,
    /// Answers to a watch of this resource (`configmaps`) wait until released: plain HTTP
    /// only, where the forwarder can read the request line.
    watches_of: Mutex<Option<String>>,
}

impl Holds {
    fn holding(&self, request_line: &str) -> bool {
        if self
            .until
            .lock()
            .unwrap()
            .is_some_and(|u| Instant::now() < u)
        {
            return true;
        }
        self.watches_of
            .lock()
            .unwrap()
            .as_deref()
            .is_some_and(|resource| is_watch_of(request_line, resource))
    }
}

/// `GET /api/v1/namespaces/ns/configmaps?watch=true&...` is a watch of `configmaps`; a LIST
/// of the same path (no `watch=`) is not.
fn is_watch_of(request_line: &str, resource: &str) -> bool {
    let Some(target) = request_line.strip_prefix("GET ") else {
        return false;
    };
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    path.ends_with(&format!("/{resource}"))
        && query
            .split(['&', ' '])
            .any(|p| p == "watch=true" || p == "watch=1")
}

/// The request line a chunk from the client starts with, when it starts a request (plain
/// HTTP: the head is written at once). Never under TLS.
fn request_line(chunk: &[u8]) -> Option<String> {
    const METHODS: [&str; 6] = ["GET ", "PUT ", "POST ", "PATCH ", "DELETE ", "HEAD "];
    if !METHODS.iter().any(|m| chunk.starts_with(m.as_bytes())) {
        return None;
    }
    let end = chunk.windows(2).position(|w| w == b"\r\n")?;
    Some(String::from_utf8_lossy(&chunk[..end]).into_owned())
}

impl Forwarder {
    /// Listens on a free loopback port and forwards every connection to `target`.
    pub fn start(target: u16) -> Forwarder {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding the forwarder");
        let port = listener.local_addr().unwrap().port();
        let holds = Arc::new(Holds::default());
        let shared = Arc::clone(&holds);
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let Ok(server) = TcpStream::connect(("127.0.0.1", target)) else {
                    continue;
                };
                let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                // The request the connection carries now, as its answers' pump sees it.
                let current = Arc::new(Mutex::new(String::new()));
                let seen = Arc::clone(&current);
                let holds = Arc::clone(&shared);
                std::thread::spawn(move || pump_requests(client, server, &holds, &seen));
                let holds = Arc::clone(&shared);
                std::thread::spawn(move || pump_answers(s2, c2, &holds, &current));
            }
        });
        Forwarder { port, holds }
    }

    /// Holds back every byte the server sends, on every connection, for `duration` from
    /// now; requests still reach the server at once.
    pub fn hold_answers(&self, duration: Duration) {
        *self.holds.until.lock().unwrap() = Some(Instant::now() + duration);
    }

    /// Holds back the answers to every watch of `resource` (open or opened later) until
    /// [`Forwarder::release_watches`]: the events reach the client late, all at once. Plain
    /// HTTP only (in front of a `kubectl proxy`).
    pub fn hold_watches_of(&self, resource: &str) {
        *self.holds.watches_of.lock().unwrap() = Some(resource.to_string());
    }

    pub fn release_watches(&self) {
        *self.holds.watches_of.lock().unwrap() = None;
    }

    /// The request lines seen so far (`GET /api/v1/...?... HTTP/1.1`), in order; plain
    /// HTTP only.
    pub fn request_lines(&self) -> Vec<String> {
        self.holds.requests.lock().unwrap().clone()
    }
}

/// Copies the client's requests to the server until either side closes, noting the
/// request line of each new request in `current` (and in `holds`' record) before the
/// server can answer it.
fn pump_requests(from: TcpStream, to: TcpStream, holds: &Holds, current: &Mutex<String>) {
    pump(from, to, |chunk| {
        if let Some(line) = request_line(chunk) {
            holds.requests.lock().unwrap().push(line.clone());
            *current.lock().unwrap() = line;
        }
    });
}

/// Copies the server's answers to the client until either side closes; each chunk waits
/// while `holds` hold the request the connection carries.
fn pump_answers(from: TcpStream, to: TcpStream, holds: &Holds, current: &Mutex<String>) {
    pump(from, to, |_| {
        while holds.holding(&current.lock().unwrap()) {
            std::thread::sleep(Duration::from_millis(10));
        }
    });
}

/// Copies `from` to `to` until either side closes, calling `before` with each chunk
/// before it is written.
fn pump(mut from: TcpStream, mut to: TcpStream, mut before: impl FnMut(&[u8])) {
    let mut buffer = [0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        before(&buffer[..n]);
        if to.write_all(&buffer[..n]).is_err() {
            break;
        }
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}
