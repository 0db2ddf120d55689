//! Injected faults: a queue of one-shot (or `times`-shot) misbehaviours, each consumed by
//! the first request or watch event it matches.

use std::time::Duration;

use super::http::{reason_phrase, Response};
use super::status::Status;

/// A misbehaviour to inject; see `FakeApi::inject`.
#[derive(Clone, Debug, PartialEq)]
pub enum Fault {
    /// The next event written on a watch of `resource`: write only its first half, then drop
    /// the TCP connection (no terminating chunk).
    DropWatchMidEvent { resource: String },
    /// The next event line on a watch of `resource` is cut in half and terminated with "\n"
    /// (a truncated JSON line), then the stream continues normally.
    TruncatedLine { resource: String },
    /// The next watch request on `resource`: 200, one ERROR event with Status 410 Expired
    /// ("too old resource version: X (Y)"), then end.
    WatchErrorExpired { resource: String },
    /// The next watch request on `resource` gets HTTP 410 with an Expired Status body.
    WatchHttpGone { resource: String },
    /// The next `times` requests with this method ("GET" for list/get, "LIST" for lists only,
    /// "GET_OBJECT" for GETs of one object only, "WATCH" for watch, "PATCH", "POST",
    /// "DELETE", "PUT") on `resource` get `code`, with `Retry-After: N` when
    /// given; a JSON Status body, or the APF text/plain body when `plain_text`.
    Status {
        method: String,
        resource: String,
        code: u16,
        retry_after_secs: Option<u64>,
        times: u32,
        plain_text: bool,
    },
    /// Every `n`-th request with this method on `resource` (the `n`-th, the `2n`-th, ...)
    /// gets `code` with `Retry-After: retry_after_secs` and the APF text body (429) or a
    /// JSON Status, until `FakeApi::heal`: an API server under API Priority and Fairness
    /// that sheds a share of the load. `seen` counts the matching requests so far (0).
    EveryNth {
        method: String,
        resource: String,
        n: u32,
        code: u16,
        retry_after_secs: u64,
        seen: u32,
    },
    /// Delay the next matching response by `delay`, before the request is applied.
    Slow {
        method: String,
        resource: String,
        delay: Duration,
    },
    /// Hold the next matching request, unapplied, until `FakeApi::heal`; then apply it and
    /// answer. A server restart meanwhile drops it unapplied. Lets a test see what a client
    /// does while one of its writes is in flight, whatever the timing.
    Held { method: String, resource: String },
    /// Apply the next matching request at once, then write its response `delay` late: the
    /// server acted, and the client hears of it late (a stalled network, a slow proxy).
    LateResponse {
        method: String,
        resource: String,
        delay: Duration,
    },
    /// The next watch request on `resource`: 200 and the headers, then silence for
    /// `duration` (no events, no bookmarks, `timeoutSeconds` ignored), as from an overloaded
    /// server or a black-holed connection; then the stream goes on as if nothing happened.
    /// `FakeApi::heal` and `FakeApi::restart` end the silence early.
    StallWatch {
        resource: String,
        duration: Duration,
    },
    /// Before the next event line on a watch of `resource`, write these bytes as a line of
    /// their own (the `\n` is added): a malformed event from a misbehaving server. The stream
    /// then goes on normally.
    GarbageLine { resource: String, line: Vec<u8> },
    /// The next event line on a watch of `resource` that contains `needle` is never
    /// written: a change the watch hides (a lost event), which only a relist finds. A
    /// re-watch from before it would replay it, so tests move the client past it (a
    /// bookmark) before it reconnects.
    DropEvent { resource: String, needle: String },
    /// The next event line on a watch of `resource` that contains `needle` is written
    /// `delay` late (the lines after it wait too, as on a lagging watch).
    SlowEvent {
        resource: String,
        needle: String,
        delay: Duration,
    },
    /// The next `GET` (list or get) of `resource` is answered `200 application/json` with
    /// this body, whatever it is.
    Body { resource: String, body: Vec<u8> },
    /// The next GET of one object of `resource` that asks for a `resourceVersion` is
    /// answered as by a replica of the API server whose watch cache has not reached it
    /// (one behind the load balancer other than the replica that served the watch): 504,
    /// "Too large resource version" (wire 027), without the 3 s the real one waits first.
    CacheBehind { resource: String },
}

/// What a stream fault does to the event line it hits.
#[derive(Clone, Debug, PartialEq)]
pub enum LineFault {
    None,
    /// Write half the line plus "\n", then go on.
    Truncate,
    /// Write half the line, then drop the connection.
    Drop,
    /// Write these bytes plus "\n" first, then the line.
    Garbage(Vec<u8>),
    /// Wait this long, then write the line.
    Delay(Duration),
    /// Do not write the line at all.
    Skip,
}

/// The APF rejection body (§8.3).
pub const APF_BODY: &str = "Too many requests, please try again later.\n";

#[derive(Debug, Default)]
pub struct Faults {
    queue: Vec<Fault>,
}

impl Faults {
    pub fn push(&mut self, fault: Fault) {
        self.queue.push(fault);
    }

    /// Forgets every queued fault.
    pub fn clear(&mut self) {
        self.queue.clear();
    }

    /// How many faults are still queued.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    fn take(&mut self, matches: impl Fn(&Fault) -> bool) -> Option<Fault> {
        let index = self.queue.iter().position(matches)?;
        Some(self.queue.remove(index))
    }

    /// A delay for this request, if a `Slow` fault matches.
    pub fn take_slow(&mut self, verb: &str, resource: &str) -> Option<Duration> {
        match self.take(|f| matches!(f, Fault::Slow { method, resource: r, .. } if method == verb && r == resource))? {
            Fault::Slow { delay, .. } => Some(delay),
            _ => None,
        }
    }

    /// Whether this request is held until `heal`, if a `Held` fault matches.
    pub fn take_held(&mut self, verb: &str, resource: &str) -> bool {
        self.take(
            |f| matches!(f, Fault::Held { method, resource: r } if method == verb && r == resource),
        )
        .is_some()
    }

    /// How late this request's response goes out after it was applied, if a
    /// `LateResponse` fault matches.
    pub fn take_late_response(&mut self, verb: &str, resource: &str) -> Option<Duration> {
        match self.take(|f| matches!(f, Fault::LateResponse { method, resource: r, .. } if method == verb && r == resource))? {
            Fault::LateResponse { delay, .. } => Some(delay),
            _ => None,
        }
    }

    /// An error response for this request, if a `Status` fault matches (counts down `times`)
    /// or an `EveryNth` fault's turn has come.
    pub fn take_status(&mut self, verb: &str, resource: &str) -> Option<Response> {
        if let Some(response) = self.take_every_nth(verb, resource) {
            return Some(response);
        }
        let index = self.queue.iter().position(
            |f| matches!(f, Fault::Status { method, resource: r, .. } if method == verb && r == resource),
        )?;
        let Fault::Status {
            code,
            retry_after_secs,
            times,
            plain_text,
            ..
        } = &mut self.queue[index]
        else {
            return None;
        };
        let response = status_fault_response(*code, *retry_after_secs, *plain_text);
        *times = times.saturating_sub(1);
        if *times == 0 {
            self.queue.remove(index);
        }
        Some(response)
    }

    fn take_every_nth(&mut self, verb: &str, resource: &str) -> Option<Response> {
        for fault in &mut self.queue {
            if let Fault::EveryNth {
                method,
                resource: r,
                n,
                code,
                retry_after_secs,
                seen,
            } = fault
            {
                if method == verb && r == resource {
                    *seen += 1;
                    return (*seen % (*n).max(1) == 0).then(|| {
                        status_fault_response(*code, Some(*retry_after_secs), *code == 429)
                    });
                }
            }
        }
        None
    }

    /// Whether this GET at a resourceVersion meets a replica whose cache is behind.
    pub fn take_cache_behind(&mut self, resource: &str) -> bool {
        self.take(|f| matches!(f, Fault::CacheBehind { resource: r } if r == resource))
            .is_some()
    }

    pub fn take_watch_http_gone(&mut self, resource: &str) -> bool {
        self.take(|f| matches!(f, Fault::WatchHttpGone { resource: r } if r == resource))
            .is_some()
    }

    pub fn take_watch_error_expired(&mut self, resource: &str) -> bool {
        self.take(|f| matches!(f, Fault::WatchErrorExpired { resource: r } if r == resource))
            .is_some()
    }

    /// How long the next watch of `resource` stays silent, if a `StallWatch` matches.
    pub fn take_watch_stall(&mut self, resource: &str) -> Option<Duration> {
        match self.take(|f| matches!(f, Fault::StallWatch { resource: r, .. } if r == resource))? {
            Fault::StallWatch { duration, .. } => Some(duration),
            _ => None,
        }
    }

    /// The body to answer the next GET of `resource` with, if a `Body` fault matches.
    pub fn take_body(&mut self, verb: &str, resource: &str) -> Option<Vec<u8>> {
        if verb != "GET" {
            return None;
        }
        match self.take(|f| matches!(f, Fault::Body { resource: r, .. } if r == resource))? {
            Fault::Body { body, .. } => Some(body),
            _ => None,
        }
    }

    /// What happens to `line`, the next event line written on a watch of `resource`.
    pub fn take_line_fault(&mut self, resource: &str, line: &str) -> LineFault {
        match self.take(|f| {
            matches!(f, Fault::DropWatchMidEvent { resource: r } | Fault::TruncatedLine { resource: r } | Fault::GarbageLine { resource: r, .. } if r == resource)
                || matches!(f, Fault::SlowEvent { resource: r, needle, .. } | Fault::DropEvent { resource: r, needle } if r == resource && line.contains(needle.as_str()))
        }) {
            Some(Fault::DropEvent { .. }) => LineFault::Skip,
            Some(Fault::SlowEvent { delay, .. }) => LineFault::Delay(delay),
            Some(Fault::DropWatchMidEvent { .. }) => LineFault::Drop,
            Some(Fault::TruncatedLine { .. }) => LineFault::Truncate,
            Some(Fault::GarbageLine { line, .. }) => LineFault::Garbage(line),
            _ => LineFault::None,
        }
    }
}

fn status_fault_response(code: u16, retry_after: Option<u64>, plain_text: bool) -> Response {
    if plain_text {
        let body = if code == 429 {
            APF_BODY.to_string()
        } else {
            format!("{}\n", reason_phrase(code))
        };
        let mut response = Response::text(code, &body);
        if let Some(seconds) = retry_after {
            response = response.with_header("Retry-After", seconds.to_string());
        }
        return response;
    }
    let (reason, message) = match code {
        429 => (
            "TooManyRequests",
            "Too many requests, please try again later.",
        ),
        500 => (
            "InternalError",
            "Internal error occurred: injected by the fake API server",
        ),
        503 => (
            "ServiceUnavailable",
            "the server is currently unable to handle the request",
        ),
        504 => (
            "Timeout",
            "Timeout: request did not complete within the allowed duration",
        ),
        409 => (
            "Conflict",
            "Operation cannot be fulfilled: injected conflict",
        ),
        404 => (
            "NotFound",
            "the server could not find the requested resource",
        ),
        403 => ("Forbidden", "forbidden: injected by the fake API server"),
        401 => ("Unauthorized", "Unauthorized"),
        410 => (
            "Expired",
            "The resourceVersion for the provided list is too old.",
        ),
        _ => ("InternalError", "injected by the fake API server"),
    };
    let mut status = Status::new(code, Some(reason), message);
    if let Some(seconds) = retry_after {
        status = status.retry_after(seconds);
    }
    let mut response = status.response();
    if retry_after == Some(0) {
        response = response.with_header("Retry-After", "0");
    }
    response
}
