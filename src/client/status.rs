//! Non-2xx answers as typed `Status` values (from the body, or synthesized from the code as
//! client-go does), and decoding of 2xx bodies: single objects and LIST pages item by item.

use super::*;

/// The parts of a `metav1.Status` body that wavelet uses.
#[derive(Deserialize)]
pub(super) struct StatusBody {
    kind: Option<String>,
    status: Option<String>,
    message: Option<String>,
    reason: Option<String>,
    code: Option<u16>,
    details: Option<StatusDetails>,
}

#[derive(Deserialize)]
pub(super) struct StatusDetails {
    #[serde(rename = "retryAfterSeconds")]
    retry_after_seconds: Option<u64>,
    #[serde(default)]
    causes: Vec<StatusCause>,
}

#[derive(Deserialize)]
pub(super) struct StatusCause {
    #[serde(default)]
    message: String,
}

/// The messages of a Status's `details.causes`, in order, empty ones left out.
pub(super) fn details_causes(details: &Option<StatusDetails>) -> Vec<String> {
    details
        .iter()
        .flat_map(|d| &d.causes)
        .map(|c| c.message.clone())
        .filter(|m| !m.is_empty())
        .collect()
}

/// Reads (a bounded part of) a non-2xx response and turns it into a [`Status`].
pub(super) fn status_from_response(
    response: http::Response<ureq::Body>,
    method: &Method,
) -> Status {
    let code = response.status().as_u16();
    let retry_after = response
        .headers()
        .get(header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs);
    let mut body = Vec::new();
    if let Err(e) = Body::of(response).and_then(|r| r.take(MAX_ERROR_BODY).read_to_end(&mut body)) {
        log::debug!("reading the body of a {code} response failed: {e}");
    }
    status_from_body(code, &body, retry_after, method.as_str())
}

/// The `Status` of a non-2xx answer: from a Status JSON body when there is one, otherwise
/// synthesized from the HTTP code as client-go does (`NewGenericServerResponse`), with the
/// start of a plain-text body (an APF 429, a kubectl proxy 403) as the message.
pub(super) fn status_from_body(
    code: u16,
    body: &[u8],
    retry_after_header: Option<Duration>,
    method: &str,
) -> Status {
    if let Ok(parsed) = serde_json::from_slice::<StatusBody>(body) {
        if parsed.kind.as_deref() == Some("Status") {
            return Status {
                code,
                reason: parsed.reason.unwrap_or_default(),
                message: parsed.message.unwrap_or_default(),
                retry_after: retry_after_header.or_else(|| details_retry_after(&parsed.details)),
                causes: details_causes(&parsed.details),
            };
        }
    }
    let (reason, default_message) = match code {
        400 => (
            "BadRequest",
            "the server rejected our request for an unknown reason",
        ),
        401 => (
            "Unauthorized",
            "the server has asked for the client to provide credentials",
        ),
        403 => (
            "Forbidden",
            "the server does not allow access to the requested resource",
        ),
        404 => (
            "NotFound",
            "the server could not find the requested resource",
        ),
        405 => (
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        ),
        406 => (
            "NotAcceptable",
            "the server was unable to respond with a content type that the client supports",
        ),
        409 if method == "POST" => ("AlreadyExists", "the server reported a conflict"),
        409 => ("Conflict", "the server reported a conflict"),
        410 => ("Gone", "the requested resource is no longer available"),
        413 => ("RequestEntityTooLarge", "the request is too large"),
        415 => (
            "UnsupportedMediaType",
            "the server does not support the content type of the request",
        ),
        422 => (
            "Invalid",
            "the server rejected our request due to an error in our request",
        ),
        429 => (
            "TooManyRequests",
            "the server has received too many requests and has asked us to try again later",
        ),
        503 => (
            "ServiceUnavailable",
            "the server is currently unable to handle the request",
        ),
        504 => (
            "Timeout",
            "the server was unable to return a response in the time allotted",
        ),
        c if c >= 500 => (
            "InternalError",
            "an error on the server has prevented the request from succeeding",
        ),
        _ => ("", "unexpected response from the server"),
    };
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    let message = if text.is_empty() {
        default_message.to_string()
    } else {
        truncate_chars(text, 200)
    };
    Status {
        code,
        reason: reason.to_string(),
        message,
        retry_after: retry_after_header,
        causes: Vec::new(),
    }
}

pub(super) fn details_retry_after(details: &Option<StatusDetails>) -> Option<Duration> {
    details
        .as_ref()
        .and_then(|d| d.retry_after_seconds)
        .filter(|&s| s > 0)
        .map(Duration::from_secs)
}

pub(super) fn truncate_chars(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((end, _)) => format!("{}...", &text[..end]),
        None => text.to_string(),
    }
}

/// A 2xx body that is a `Status` with `status: "Failure"` (an eviction blocked by two PDBs)
/// is an error too, as in client-go's `Result.Get`.
pub(super) fn failure_status(body: &[u8], http_code: u16) -> Option<Status> {
    let parsed: StatusBody = serde_json::from_slice(body).ok()?;
    if parsed.kind.as_deref() != Some("Status") || parsed.status.as_deref() != Some("Failure") {
        return None;
    }
    let code = parsed
        .code
        .filter(|&c| c >= 400)
        .unwrap_or(if http_code >= 400 { http_code } else { 500 });
    Some(Status {
        code,
        reason: parsed.reason.unwrap_or_default(),
        message: parsed.message.unwrap_or_default(),
        retry_after: details_retry_after(&parsed.details),
        causes: details_causes(&parsed.details),
    })
}

/// Decodes a 2xx body of one object (or a small list): read whole, up to [`MAX_OBJECT`]
/// bytes, then parsed from the slice (several times faster than from a reader). A small
/// body may be a failure `Status` answered with a 2xx code.
pub(super) fn decode<T: DeserializeOwned>(
    response: http::Response<ureq::Body>,
    method: &str,
    path: &str,
) -> Result<T, Error> {
    let code = response.status().as_u16();
    let path = path.split('?').next().unwrap_or(path);
    with_body_buffer(|body| {
        Body::of(response)
            .and_then(|r| r.take(MAX_OBJECT as u64 + 1).read_to_end(body))
            .map_err(|e| {
                Error::Transport(format!("{method} {path}: reading the response failed: {e}"))
            })?;
        if body.len() > MAX_OBJECT {
            return Err(Error::Decode(format!(
                "{method} {path}: the response is larger than {} MiB",
                MAX_OBJECT >> 20
            )));
        }
        if body.len() <= STATUS_PEEK && may_be_failure(body) {
            if let Some(status) = failure_status(body, code) {
                return Err(Error::Api(status));
            }
        }
        serde_json::from_slice(body)
            .map_err(|e| Error::Decode(format!("{method} {path}: unexpected response body: {e}")))
    })
}

/// The largest body buffer a thread keeps for its next response.
const KEPT_BODY_BUFFER: usize = 256 << 10;

thread_local! {
    /// Each thread's buffer for whole response bodies: a worker or fetcher making a
    /// thousand requests reuses one buffer instead of growing a new one each time.
    static BODY_BUFFER: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

/// Runs `f` with this thread's empty body buffer, kept afterwards unless it grew large.
fn with_body_buffer<R>(f: impl FnOnce(&mut Vec<u8>) -> R) -> R {
    let mut body = BODY_BUFFER.take();
    body.clear();
    let result = f(&mut body);
    if body.capacity() <= KEPT_BODY_BUFFER {
        body.clear();
        BODY_BUFFER.set(body);
    }
    result
}

/// Whether a body can be a failure `Status` at all: one always holds the string
/// `"Failure"`, which most objects do not, so they are parsed once, not twice.
pub(super) fn may_be_failure(body: &[u8]) -> bool {
    const NEEDLE: &[u8] = b"\"Failure\"";
    body.windows(NEEDLE.len()).any(|w| w == NEEDLE)
}

/// Decodes a 2xx LIST body item by item as it streams in ([`list_body`]), keeping its
/// first [`STATUS_PEEK`] bytes aside to recognise a failure `Status`.
pub(super) fn decode_list<T: DeserializeOwned>(
    response: http::Response<ureq::Body>,
    path: &str,
    on_item: &mut dyn FnMut(T),
) -> Result<ListMeta, Error> {
    let code = response.status().as_u16();
    let path = path.split('?').next().unwrap_or(path);
    let body = Body::of(response)
        .map_err(|e| Error::Transport(format!("GET {path}: reading the response failed: {e}")))?;
    let mut peek = Peek {
        inner: body,
        kept: Vec::new(),
        total: 0,
        eof: false,
    };
    let result = list_body::split(
        BufReader::with_capacity(16 << 10, &mut peek),
        MAX_OBJECT,
        &mut |bytes| {
            let item = serde_json::from_slice::<T>(bytes).map_err(|e| format!("an item: {e}"))?;
            on_item(item);
            Ok(())
        },
    );
    if !peek.eof && peek.total <= STATUS_PEEK {
        // Splitting stopped early (e.g. at a Status): read the rest of a small body so it
        // can be recognised.
        let _ = io::copy(
            &mut (&mut peek).take((STATUS_PEEK + 1) as u64),
            &mut io::sink(),
        );
    }
    if peek.eof && peek.total <= STATUS_PEEK {
        if let Some(status) = failure_status(&peek.kept, code) {
            return Err(Error::Api(status));
        }
    }
    match result {
        Ok(metadata) if metadata.is_empty() => Ok(ListMeta::default()),
        Ok(metadata) => serde_json::from_slice(&metadata)
            .map_err(|e| Error::Decode(format!("GET {path}: unexpected list metadata: {e}"))),
        Err(SplitError::Io(e)) => Err(Error::Transport(format!(
            "GET {path}: reading the response failed: {e}"
        ))),
        Err(e) => Err(Error::Decode(format!(
            "GET {path}: unexpected response body: {e}"
        ))),
    }
}

/// Passes bytes through, keeping the first [`STATUS_PEEK`] of them.
pub(super) struct Peek<R> {
    inner: R,
    kept: Vec<u8>,
    total: usize,
    eof: bool,
}

impl<R: Read> Read for Peek<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n == 0 && !buf.is_empty() {
            self.eof = true;
        }
        if self.total < STATUS_PEEK {
            let room = STATUS_PEEK - self.total;
            self.kept.extend_from_slice(&buf[..n.min(room)]);
        }
        self.total = self.total.saturating_add(n);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_json_bodies_keep_code_reason_message_and_retry_after() {
        let body = br#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (18593)","reason":"Expired","code":410}"#;
        let status = status_from_body(410, body, None, "GET");
        assert_eq!(status.reason, "Expired");
        assert_eq!(status.message, "too old resource version: 1 (18593)");
        assert!(status.is_expired());
        assert_eq!(status.retry_after, None);

        let body = br#"{"kind":"Status","status":"Failure","message":"couldn't update","reason":"Timeout","details":{"retryAfterSeconds":10},"code":504}"#;
        assert_eq!(
            status_from_body(504, body, None, "POST").retry_after,
            Some(Duration::from_secs(10))
        );
        // The header wins over details.retryAfterSeconds.
        let status = status_from_body(504, body, Some(Duration::from_secs(2)), "POST");
        assert_eq!(status.retry_after, Some(Duration::from_secs(2)));
    }

    #[test]
    fn recorded_401_and_403_status_bodies_parse() {
        // k8s-wire 087 and 090.
        let unauthorized = br#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}"#;
        let status = status_from_body(401, unauthorized, None, "GET");
        assert!(status.is_unauthorized());
        assert_eq!(
            (status.reason.as_str(), status.message.as_str()),
            ("Unauthorized", "Unauthorized")
        );
        let forbidden = br#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"configmaps is forbidden: User \"system:serviceaccount:wire-rec:nobody\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"wire-rec\"","reason":"Forbidden","details":{"kind":"configmaps"},"code":403}"#;
        let status = status_from_body(403, forbidden, None, "GET");
        assert_eq!(status.reason, "Forbidden");
        assert!(status.message.starts_with(
            "configmaps is forbidden: User \"system:serviceaccount:wire-rec:nobody\""
        ));
    }

    #[test]
    fn a_text_plain_429_with_retry_after_becomes_too_many_requests() {
        let status = status_from_body(
            429,
            b"Too many requests, please try again later.\n",
            Some(Duration::from_secs(1)),
            "GET",
        );
        assert_eq!(
            status,
            Status {
                code: 429,
                reason: "TooManyRequests".into(),
                message: "Too many requests, please try again later.".into(),
                retry_after: Some(Duration::from_secs(1)),
                causes: Vec::new(),
            }
        );
        assert!(status.is_too_many_requests());
    }

    #[test]
    fn non_json_error_bodies_are_synthesized_from_the_http_code_like_client_go() {
        let cases = [
            (403, "POST", "Forbidden", "Forbidden"),
            (500, "GET", "InternalError", "InternalError"),
            (503, "GET", "ServiceUnavailable", "ServiceUnavailable"),
            (504, "GET", "Timeout", "Timeout"),
            (409, "POST", "AlreadyExists", "AlreadyExists"),
            (409, "PUT", "Conflict", "Conflict"),
            (404, "GET", "NotFound", "NotFound"),
            (422, "PATCH", "Invalid", "Invalid"),
            (401, "GET", "Unauthorized", "Unauthorized"),
        ];
        for (code, method, text, reason) in cases {
            let status = status_from_body(code, text.as_bytes(), None, method);
            assert_eq!(
                (status.code, status.reason.as_str(), status.message.as_str()),
                (code, reason, text)
            );
        }
        let status = status_from_body(404, b"", None, "GET");
        assert_eq!(
            status.message,
            "the server could not find the requested resource"
        );
        let status = status_from_body(502, "é".repeat(500).as_bytes(), None, "GET");
        assert_eq!(
            status.message.chars().count(),
            203,
            "200 characters and an ellipsis"
        );
        // JSON that is not a Status (e.g. an HTML-ish proxy page or some other object).
        let status = status_from_body(500, br#"{"error":"upstream"}"#, None, "GET");
        assert_eq!(status.reason, "InternalError");
    }

    #[test]
    fn a_2xx_body_with_a_failure_status_is_an_error_and_a_success_status_is_not() {
        // k8s-wire 081: eviction of a pod covered by two PDBs.
        let two_pdbs = br#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.","code":500}"#;
        let status = failure_status(two_pdbs, 201).expect("a failure");
        assert_eq!(status.code, 500);
        assert!(status.message.contains("more than one PodDisruptionBudget"));
        let success =
            br#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success","code":201}"#;
        assert_eq!(failure_status(success, 201), None);
        assert_eq!(
            failure_status(br#"{"kind":"ConfigMap","metadata":{"name":"x"}}"#, 200),
            None
        );
    }

    #[test]
    fn only_a_body_naming_a_failure_is_parsed_as_a_status() {
        let two_pdbs =
            br#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","code":500}"#;
        assert!(may_be_failure(two_pdbs));
        for object in [
            &br#"{"kind":"ConfigMap","metadata":{"name":"x"},"data":{"a":"Failure"}}"#[..],
            br#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success","code":201}"#,
            br#"{"kind":"Secret","metadata":{"name":"s"},"data":{"k":"dmFsdWU="}}"#,
        ] {
            // A value that happens to be "Failure" is parsed and found to be no Status.
            if may_be_failure(object) {
                assert_eq!(failure_status(object, 200), None);
            }
        }
        assert!(!may_be_failure(br#"{"kind":"Status","status":"Success"}"#));
    }
}
