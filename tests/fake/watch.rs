//! WATCH streams (§2): where a watch starts (synthetic ADDEDs, replay after an RV, 410 for
//! an RV older than the history), label-selector transitions, bookmarks, `timeoutSeconds`,
//! bursts packed into 2048-byte chunks, live events one chunk each, and the stream faults
//! (cut, truncated and garbage lines, stalls).

use std::io;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::faults::LineFault;
use super::http::{write_response, ChunkedStream, Request};
use super::list::{list_options_invalid, metadata_only, ListOptions, Presentation};
use super::resources::Route;
use super::server::Shared;
use super::state::{OpenWatch, State};
use super::status::{FieldError, Status};
use super::store::{EventType, StoredEvent};
use super::tls::Conn;

/// How often a waiting watch checks whether its client went away.
const LIVENESS_POLL: Duration = Duration::from_millis(50);
const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

/// One event line to write, with the fault (if any) that hits it.
struct Line {
    bytes: Vec<u8>,
    fault: LineFault,
}

/// What one watch needs to turn stored events into its own lines.
struct WatchView<'a> {
    route: &'a Route,
    options: &'a ListOptions,
    presentation: Presentation,
}

impl WatchView<'_> {
    fn line(&self, event_type: &str, object: &Value) -> String {
        let object = if self.presentation == Presentation::Metadata {
            metadata_only(object)
        } else {
            object.clone()
        };
        format!("{{\"type\":\"{event_type}\",\"object\":{object}}}\n")
    }

    /// The event as this watch sees it (§2.3): an object that stops matching the selector
    /// is DELETED (old state, new RV), one that starts matching is ADDED.
    fn view(&self, event: &StoredEvent) -> Option<String> {
        let selects = |o: &Value| self.options.selects(self.route, o);
        match event.event_type {
            EventType::Added | EventType::Deleted => {
                selects(&event.object).then(|| self.line(event.event_type.as_str(), &event.object))
            }
            EventType::Modified => {
                let was = event.previous.as_ref().is_some_and(selects);
                match (was, selects(&event.object)) {
                    (true, true) => Some(self.line("MODIFIED", &event.object)),
                    (false, true) => Some(self.line("ADDED", &event.object)),
                    (true, false) => {
                        let mut old = event.previous.clone().expect("a previous state");
                        old["metadata"]["resourceVersion"] = event.rv.to_string().into();
                        Some(self.line("DELETED", &old))
                    }
                    (false, false) => None,
                }
            }
        }
    }

    fn bookmark(&self, rv: u64, initial_events_end: bool) -> String {
        let (kind, api_version) = match self.presentation {
            Presentation::Full => (
                self.route.resource.kind.clone(),
                self.route.resource.api_version(),
            ),
            _ => (
                "PartialObjectMetadata".to_string(),
                "meta.k8s.io/v1".to_string(),
            ),
        };
        let mut metadata = json!({"resourceVersion": rv.to_string()});
        if initial_events_end {
            metadata["annotations"] = json!({INITIAL_EVENTS_END: "true"});
        }
        let object = json!({"kind": kind, "apiVersion": api_version, "metadata": metadata});
        format!("{{\"type\":\"BOOKMARK\",\"object\":{object}}}\n")
    }

    /// ERROR 410 for a start RV older than the history (wire 023–025).
    fn too_old(&self, rv: u64, floor: u64) -> String {
        let message = if self.route.resource.plural == "events" {
            "The resourceVersion for the provided watch is too old.".to_string()
        } else {
            format!("too old resource version: {rv} ({floor})")
        };
        let status = Status::new(410, Some("Expired"), message).to_json();
        format!("{{\"type\":\"ERROR\",\"object\":{status}}}\n")
    }
}

/// How the stream starts, decided under the lock.
enum Start {
    /// A burst of lines, then live events after `cursor`.
    Stream { burst: Vec<String>, cursor: u64 },
    /// One ERROR line, then the end.
    Error(String),
}

fn with_faults(state: &mut State, resource: &str, lines: Vec<String>) -> Vec<Line> {
    lines
        .into_iter()
        .map(|l| Line {
            fault: state.faults.take_line_fault(resource, &l),
            bytes: l.into_bytes(),
        })
        .collect()
}

/// Writes lines; a burst is packed into 2048-byte chunks, otherwise one chunk per line.
/// Returns `false` when a fault dropped the connection.
fn write_lines(out: &mut ChunkedStream, lines: Vec<Line>, burst: bool) -> io::Result<bool> {
    let mut pending = Vec::new();
    for line in lines {
        let half = &line.bytes[..(line.bytes.len() - 1) / 2];
        match line.fault {
            LineFault::None if burst => pending.extend_from_slice(&line.bytes),
            LineFault::None => out.chunk(&line.bytes)?,
            LineFault::Skip => {}
            LineFault::Delay(delay) => {
                out.burst(&std::mem::take(&mut pending))?;
                std::thread::sleep(delay);
                out.chunk(&line.bytes)?;
            }
            LineFault::Garbage(mut garbage) => {
                garbage.push(b'\n');
                pending.extend_from_slice(&garbage);
                pending.extend_from_slice(&line.bytes);
                if !burst {
                    out.burst(&std::mem::take(&mut pending))?;
                }
            }
            fault => {
                out.burst(&std::mem::take(&mut pending))?;
                if fault == LineFault::Drop {
                    out.cut(half, line.bytes.len());
                    return Ok(false);
                }
                let mut truncated = half.to_vec();
                truncated.push(b'\n');
                out.chunk(&truncated)?;
            }
        }
    }
    out.burst(&pending)?;
    Ok(true)
}

/// Keeps a watch silent for `duration` (a `StallWatch` fault). `false` when the client went
/// away or the server stops meanwhile; `FakeApi::heal` ends the silence early.
fn stall(shared: &Shared, stream: &TcpStream, duration: Duration, heal_generation: u64) -> bool {
    let until = Instant::now() + duration;
    let mut state = shared.lock();
    loop {
        if state.shutdown || client_gone(stream) {
            return false;
        }
        let now = Instant::now();
        if now >= until || state.heal_generation != heal_generation {
            return true;
        }
        state = shared.wait(state, (until - now).min(LIVENESS_POLL));
    }
}

/// Whether the client has closed its end (a read would return EOF).
fn client_gone(stream: &TcpStream) -> bool {
    if stream.set_nonblocking(true).is_err() {
        return true;
    }
    let gone = matches!(stream.peek(&mut [0u8; 1]), Ok(0));
    let _ = stream.set_nonblocking(false);
    gone
}

/// Serves one watch request on this connection until it ends. `Ok(false)` means the
/// connection must be closed.
pub fn serve(
    shared: &Shared,
    stream: &mut Conn,
    request: &Request,
    route: &Route,
) -> io::Result<bool> {
    let options = match ListOptions::parse(request, &route.resource, true) {
        Ok(options) => options,
        Err(status) => return write_response(stream, &status.response()).map(|_| true),
    };
    let presentation = Presentation::of(request);
    let view = WatchView {
        route,
        options: &options,
        presentation,
    };
    let plural = request.fault_resource();
    let deadline = options.timeout.map(|t| Instant::now() + t);

    let mut state = shared.lock();
    if state.watch_list_disabled && options.send_initial_events.is_some() {
        let status = list_options_invalid(FieldError::forbidden(
            "sendInitialEvents",
            "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled",
        ));
        drop(state);
        return write_response(stream, &status.response()).map(|_| true);
    }
    if state.faults.take_watch_http_gone(&plural) {
        let rv = options.resource_version.unwrap_or(0);
        let status = Status::new(
            410,
            Some("Expired"),
            format!(
                "too old resource version: {rv} ({})",
                state.store.current_rv()
            ),
        );
        drop(state);
        return write_response(stream, &status.response()).map(|_| true);
    }
    let start = if state.faults.take_watch_error_expired(&plural) {
        let rv = options.resource_version.unwrap_or(0);
        Start::Error(view.too_old(rv, state.store.current_rv()))
    } else if presentation == Presentation::MetadataList {
        // The server cannot encode a list type per event: the stream just ends (wire 038).
        Start::Stream {
            burst: Vec::new(),
            cursor: u64::MAX,
        }
    } else {
        start_of(&state, &view)
    };
    let id = state.register_watch(OpenWatch {
        resource: route.resource.plural.clone(),
        bookmarks: options.allow_bookmarks,
    });
    let mut bookmark_generation = state.bookmark_generation;
    let close_generation = state.close_generation;
    let stalled = state.faults.take_watch_stall(&plural);
    let heal_generation = state.heal_generation;
    let (burst, mut cursor) = match start {
        Start::Stream { burst, cursor } => (with_faults(&mut state, &plural, burst), Some(cursor)),
        Start::Error(line) => (with_faults(&mut state, &plural, vec![line]), None),
    };
    drop(state);

    let result = (|| -> io::Result<bool> {
        let mut out = ChunkedStream::start(stream)?;
        if let Some(duration) = stalled {
            if !stall(shared, out.stream(), duration, heal_generation) {
                return Ok(false);
            }
        }
        if !write_lines(&mut out, burst, true)? {
            return Ok(false);
        }
        let Some(mut position) = cursor.take() else {
            out.finish()?;
            return Ok(true);
        };
        if position == u64::MAX {
            out.finish()?;
            return Ok(true);
        }
        loop {
            let mut state = shared.lock();
            let lines = loop {
                if state.shutdown || state.close_generation != close_generation {
                    break None;
                }
                let now = Instant::now();
                if deadline.is_some_and(|d| now >= d) {
                    break None;
                }
                let mut lines = Vec::new();
                match state.store.events_after(&route.resource.key, position) {
                    Err(floor) => {
                        lines.push(view.too_old(position, floor));
                        position = u64::MAX;
                    }
                    Ok(events) => {
                        for event in &events {
                            lines.extend(view.view(event));
                            position = position.max(event.rv);
                        }
                    }
                }
                if options.allow_bookmarks && state.bookmark_generation != bookmark_generation {
                    bookmark_generation = state.bookmark_generation;
                    lines.push(view.bookmark(state.store.current_rv().max(position), false));
                }
                if !lines.is_empty() {
                    break Some(with_faults(&mut state, &plural, lines));
                }
                let wait = deadline.map_or(LIVENESS_POLL, |d| {
                    d.saturating_duration_since(now).min(LIVENESS_POLL)
                });
                state = shared.wait(state, wait);
                if client_gone(out.stream()) {
                    return Ok(false);
                }
            };
            drop(state);
            let Some(lines) = lines else {
                out.finish()?;
                return Ok(true);
            };
            if !write_lines(&mut out, lines, false)? {
                return Ok(false);
            }
            if position == u64::MAX {
                out.finish()?;
                return Ok(true);
            }
        }
    })();
    shared.lock().watches.remove(&id);
    result
}

/// Where the watch starts (§2.4): synthetic ADDEDs (+ the initial-events-end bookmark)
/// for rv ""/"0" or sendInitialEvents, replay after rv=N, or ERROR 410.
fn start_of(state: &State, view: &WatchView) -> Start {
    let options = view.options;
    let current = state.store.current_rv();
    let initial = options
        .send_initial_events
        .unwrap_or(matches!(options.resource_version, None | Some(0)));
    if initial {
        let mut burst: Vec<String> = state
            .list(&view.route.resource, view.route.namespace.as_deref())
            .iter()
            .filter(|o| options.selects(view.route, o))
            .map(|o| view.line("ADDED", o))
            .collect();
        if options.allow_bookmarks {
            burst.push(view.bookmark(current, true));
        }
        return Start::Stream {
            burst,
            cursor: current,
        };
    }
    let Some(rv) = options.resource_version else {
        return Start::Stream {
            burst: Vec::new(),
            cursor: current,
        };
    };
    match state.store.events_after(&view.route.resource.key, rv) {
        Ok(events) => {
            let burst = events.iter().filter_map(|e| view.view(e)).collect();
            Start::Stream {
                burst,
                cursor: rv.max(current),
            }
        }
        Err(floor) => Start::Error(view.too_old(rv, floor)),
    }
}
