//! The small HTTP server on `--listen-addr`: `/healthz`, `/readyz` and `/metrics`, and
//! Reloader's probe path `/live` (its chart's readiness probe asks for `/metrics`). Each
//! connection gets a short-lived thread of its own (at most [`MAX_CONNECTIONS`] at once),
//! with bounded reads and a deadline, so a slow scraper or a half-open connection never
//! delays a kubelet probe.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::ops::metrics::{self, Gauges};

/// A worker busy with one item for longer than this is wedged.
const WEDGED_AFTER: Duration = Duration::from_secs(300);
/// Bytes of request head read at most; the rest is ignored.
const MAX_REQUEST: usize = 8 * 1024;
const READ_TIMEOUT: Duration = Duration::from_secs(2);
/// Connections served at once; more are closed at once (a probe retries).
pub const MAX_CONNECTIONS: usize = 32;

/// Liveness of the long-running threads: each holds a [`Beat`] while it runs.
#[derive(Default)]
pub struct Health {
    threads: Mutex<BTreeMap<String, ThreadState>>,
}

#[derive(Clone, Copy)]
struct ThreadState {
    alive: bool,
    busy_since: Option<Instant>,
}

impl Health {
    /// Registers a thread; it counts as dead once the returned guard is dropped.
    pub fn register(self: &Arc<Health>, name: String) -> Beat {
        self.threads.lock().unwrap().insert(
            name.clone(),
            ThreadState {
                alive: true,
                busy_since: None,
            },
        );
        Beat {
            health: Arc::clone(self),
            name,
        }
    }

    /// `Err` names the threads that died or have been busy with one item for too long.
    pub fn check(&self, now: Instant) -> Result<(), String> {
        let threads = self.threads.lock().unwrap();
        let problems: Vec<String> = threads
            .iter()
            .filter_map(|(name, state)| {
                if !state.alive {
                    Some(format!("{name}: exited"))
                } else {
                    state
                        .busy_since
                        .filter(|since| now.saturating_duration_since(*since) > WEDGED_AFTER)
                        .map(|since| format!("{name}: busy for {:?}", now - since))
                }
            })
            .collect();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("\n"))
        }
    }

    fn update(&self, name: &str, f: impl FnOnce(&mut ThreadState)) {
        if let Some(state) = self.threads.lock().unwrap().get_mut(name) {
            f(state);
        }
    }
}

/// A registered thread's handle; dropping it (the thread ended or panicked) marks it dead.
pub struct Beat {
    health: Arc<Health>,
    name: String,
}

impl Beat {
    pub fn busy(&self) {
        self.health
            .update(&self.name, |s| s.busy_since = Some(Instant::now()));
    }

    pub fn idle(&self) {
        self.health.update(&self.name, |s| s.busy_since = None);
    }
}

impl Drop for Beat {
    fn drop(&mut self) {
        self.health.update(&self.name, |s| s.alive = false);
    }
}

/// What the endpoints read.
pub struct Endpoints {
    pub health: Arc<Health>,
    pub gauges: Box<dyn Fn() -> Gauges + Send + Sync>,
}

/// Serves on `listener` in a new thread, for the life of the process: one thread accepts,
/// and each connection is served by a thread of its own.
pub fn spawn(listener: TcpListener, endpoints: Endpoints) {
    let endpoints = Arc::new(endpoints);
    let open = Arc::new(AtomicUsize::new(0));
    std::thread::Builder::new()
        .name("http".into())
        .spawn(move || {
            for stream in listener.incoming() {
                match stream {
                    Ok(stream) => serve_in_thread(stream, &endpoints, &open),
                    Err(e) => {
                        log::debug!("http: accept: {e}");
                        std::thread::sleep(Duration::from_millis(100));
                    }
                }
            }
        })
        .expect("spawning the http thread");
}

/// Serves one connection in a thread of its own, unless [`MAX_CONNECTIONS`] are open:
/// then the connection is closed at once.
fn serve_in_thread(stream: TcpStream, endpoints: &Arc<Endpoints>, open: &Arc<AtomicUsize>) {
    if open.fetch_add(1, Ordering::AcqRel) >= MAX_CONNECTIONS {
        open.fetch_sub(1, Ordering::AcqRel);
        log::debug!("http: {MAX_CONNECTIONS} connections open; closing a new one");
        return;
    }
    let (endpoints, served) = (Arc::clone(endpoints), Arc::clone(open));
    let spawned = std::thread::Builder::new()
        .name("http-conn".into())
        .spawn(move || {
            if let Err(e) = serve(stream, &endpoints) {
                log::debug!("http: {e}");
            }
            served.fetch_sub(1, Ordering::AcqRel);
        });
    if let Err(e) = spawned {
        open.fetch_sub(1, Ordering::AcqRel);
        log::warn!("http: cannot start a thread for a connection: {e}");
    }
}

fn serve(mut stream: TcpStream, endpoints: &Endpoints) -> std::io::Result<()> {
    stream.set_write_timeout(Some(READ_TIMEOUT))?;
    // One deadline for the whole head: a client trickling bytes cannot hold the thread.
    let deadline = Instant::now() + READ_TIMEOUT;
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_REQUEST {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "request head not complete in time",
            ));
        }
        stream.set_read_timeout(Some(left))?;
        let n = stream.read(&mut buf)?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&head);
    let mut parts = text.lines().next().unwrap_or("").split(' ');
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    let (code, content_type, body) = respond(method, path, endpoints);
    let reason = match code {
        200 => "OK",
        404 => "Not Found",
        405 => "Method Not Allowed",
        _ => "Service Unavailable",
    };
    let head = format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    if method != "HEAD" {
        stream.write_all(body.as_bytes())?;
    }
    stream.flush()
}

fn respond(method: &str, path: &str, endpoints: &Endpoints) -> (u16, &'static str, String) {
    const TEXT: &str = "text/plain; charset=utf-8";
    if method != "GET" && method != "HEAD" {
        return (405, TEXT, "GET only\n".into());
    }
    match path {
        // `/live`: the liveness path of Reloader's chart.
        "/healthz" | "/livez" | "/live" => match endpoints.health.check(Instant::now()) {
            Ok(()) => (200, TEXT, "ok\n".into()),
            Err(problems) => (503, TEXT, format!("{problems}\n")),
        },
        "/readyz" => {
            if (endpoints.gauges)().ready {
                (200, TEXT, "ok\n".into())
            } else {
                (503, TEXT, "initial sync not complete\n".into())
            }
        }
        "/metrics" => {
            let mut gauges = (endpoints.gauges)();
            gauges.resident_bytes = metrics::resident_bytes();
            gauges.cpu_seconds = metrics::cpu_seconds();
            (
                200,
                "text/plain; version=0.0.4; charset=utf-8",
                metrics::render(metrics::global(), &gauges),
            )
        }
        _ => (
            404,
            TEXT,
            "not found: try /healthz (or /live), /readyz or /metrics\n".into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_that_exits_makes_health_fail() {
        let health = Arc::new(Health::default());
        let beat = health.register("watch configmaps".into());
        assert!(health.check(Instant::now()).is_ok());
        drop(beat);
        assert_eq!(
            health.check(Instant::now()),
            Err("watch configmaps: exited".into())
        );
    }

    #[test]
    fn a_worker_busy_for_too_long_is_wedged() {
        let health = Arc::new(Health::default());
        let beat = health.register("worker-0".into());
        beat.busy();
        assert!(health.check(Instant::now()).is_ok());
        assert!(health
            .check(Instant::now() + WEDGED_AFTER + Duration::from_secs(1))
            .unwrap_err()
            .starts_with("worker-0: busy for"));
        beat.idle();
        assert!(health
            .check(Instant::now() + WEDGED_AFTER + Duration::from_secs(1))
            .is_ok());
    }
}
