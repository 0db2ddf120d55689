//! The API client: one pooled HTTP/1.1 agent and its verbs. Where to connect is
//! `connect.rs`; bearer tokens `token.rs` (and exec plugins `exec.rs`); TLS `tls.rs`; typed
//! `Status` errors and body decoding `status.rs`; watch streams `stream.rs`; name lookups
//! `resolve.rs`.
//!
//! Every request goes through [`Client::send`], the one place that authenticates, counts,
//! logs and turns a non-2xx answer into [`Error::Api`]; it makes one attempt, and the
//! callers' work queue decides whether and when to try again.

mod connect;
pub(crate) mod exec;
pub mod kubeconfig;
pub(crate) mod list_body;
mod resolve;
mod status;
mod stream;
mod tls;
mod token;
pub mod yaml;

use crate::error::{Error, Status};
use kubeconfig::{Credentials, Pem};
use list_body::SplitError;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use status::*;
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
pub use stream::WatchStream;
use tls::*;
use token::*;
use ureq::http::{self, header, Method};

/// Where the kubelet mounts the service account token, CA and namespace.
pub const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// A token read from a file is re-read when older than this (client-go uses one minute).
const TOKEN_MAX_AGE: Duration = Duration::from_secs(60);
/// The longest watch event accepted, and so the most a watch buffers: an event is one
/// object, so the limit is [`MAX_OBJECT`]'s. Anything longer comes from a broken server or
/// proxy, and must not make wavelet buffer without bound.
const MAX_WATCH_LINE: usize = MAX_OBJECT;
/// Error bodies are read up to this size; the rest is dropped with the connection.
const MAX_ERROR_BODY: u64 = 1 << 20;
/// A 2xx body up to this size is kept aside to recognise a `Status` with `status: Failure`.
const STATUS_PEEK: usize = 64 << 10;
/// How much a watch stream reads at once.
const WATCH_READ: usize = 16 << 10;
/// The largest object (or item of a list) accepted. The API server stores objects of at
/// most 1.5 MiB (etcd's request limit; ConfigMap and Secret data is at most 1 MiB), which
/// base64 and JSON escapes can make a few MiB as JSON.
const MAX_OBJECT: usize = 8 << 20;
/// Items per LIST page (`limit`), for every paginated list wavelet sends.
pub(crate) const PAGE_SIZE: u32 = 500;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Beyond the server-side `timeoutSeconds`, how long a silent watch is kept before giving up.
const WATCH_GRACE: Duration = Duration::from_secs(30);

/// Where and how to connect: parsed from the command line and `WAVELET_*` by `config`.
pub use crate::config::ConnectionFlags;

/// The patch flavours the API server accepts, by `Content-Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// `application/strategic-merge-patch+json` (built-in kinds only).
    Strategic,
    /// `application/merge-patch+json` (RFC 7386; works for custom resources).
    Merge,
}

impl PatchType {
    pub fn content_type(self) -> &'static str {
        match self {
            PatchType::Strategic => "application/strategic-merge-patch+json",
            PatchType::Merge => "application/merge-patch+json",
        }
    }
}

/// One request to send.
struct Request<'a> {
    /// The verb counted in metrics (`list`, `get`, `watch`, `patch`, ...).
    verb: &'static str,
    method: Method,
    path_and_query: &'a str,
    /// Content type and bytes.
    body: Option<(&'static str, &'a [u8])>,
    /// Replaces the client's `Accept: application/json`.
    accept: Option<&'static str>,
    /// Set for a watch: how long its body may take.
    watch_body_timeout: Option<Duration>,
}

impl<'a> Request<'a> {
    fn with_body(
        verb: &'static str,
        method: Method,
        path_and_query: &'a str,
        body: (&'static str, &'a [u8]),
    ) -> Request<'a> {
        Request {
            verb,
            method,
            path_and_query,
            body: Some(body),
            accept: None,
            watch_body_timeout: None,
        }
    }
}

/// The `metadata` of a LIST response.
#[derive(Debug, Default, Deserialize)]
pub struct ListMeta {
    #[serde(default, rename = "resourceVersion")]
    pub resource_version: String,
    /// Where the next page starts; absent or empty on the last page.
    #[serde(default, rename = "continue")]
    pub continue_token: Option<String>,
}

/// What a GET, LIST or WATCH asks the server for, in its `Accept` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// Whole objects (`application/json`).
    Whole,
    /// Only each object's metadata (`PartialObjectMetadata`, `meta.k8s.io/v1`), with whole
    /// objects as the fallback of a server that cannot do that. A LIST must ask for the
    /// List type, a watch or GET for the object type [k8s-wire 034, 035, 037, 038].
    Metadata,
}

impl Shape {
    fn accept(self, list: bool) -> Option<&'static str> {
        match (self, list) {
            (Shape::Whole, _) => None,
            (Shape::Metadata, true) => Some(
                "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
            ),
            (Shape::Metadata, false) => Some(
                "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json",
            ),
        }
    }
}

/// A connection to one API server. Cheap to clone; shared by all threads.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
    /// Set by [`Client::bounded`]: the most each request may take, from connecting to the
    /// last byte of its answer.
    bound: Option<Duration>,
}

struct Inner {
    agent: ureq::Agent,
    /// Scheme, host, port and optional path prefix; no trailing slash.
    base_url: String,
    /// What requests are sent to: `base_url`, or with `tls-server-name` that name in place
    /// of the host (the resolver sends it to the host of `base_url`).
    request_base: String,
    token: TokenSource,
    namespace: Option<String>,
    counts: Mutex<BTreeMap<(&'static str, u16), u64>>,
    /// `Impersonate-User`, `-Group`, `-Uid` headers (kubeconfig `as`, `as-groups`, `as-uid`).
    impersonate: Vec<(&'static str, String)>,
}

/// Everything needed to build a [`Client`], gathered from flags, kubeconfig or the pod.
/// The User-Agent of every client of this process, fixed by [`set_user_agent`] before the
/// first client is built.
static USER_AGENT: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Sets the User-Agent (once, before building clients). The controller sends
/// `wavelet/<version>`; the read-only subcommands send `wavelet-cli/<version>`, so audit
/// logs (and the RBAC test) tell a person's `wavelet hash` from the controller's requests.
pub fn set_user_agent(user_agent: String) {
    let _ = USER_AGENT.set(user_agent);
}

fn user_agent() -> String {
    USER_AGENT
        .get()
        .cloned()
        .unwrap_or_else(|| format!("wavelet/{}", env!("CARGO_PKG_VERSION")))
}

struct Setup {
    base_url: String,
    ca: Option<Pem>,
    client_certificate: Option<(Pem, Pem)>,
    insecure: bool,
    token: TokenSource,
    namespace: Option<String>,
    /// Says which setting provides a CA, for the "no CA" error.
    ca_hint: String,
    /// `cluster.proxy-url` of a kubeconfig.
    proxy_url: Option<String>,
    /// `cluster.tls-server-name` of a kubeconfig (https only).
    tls_server_name: Option<String>,
    impersonate: Vec<(&'static str, String)>,
}

impl Client {
    fn build(setup: Setup) -> Result<Client, Error> {
        let mut config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .user_agent(user_agent())
            .accept("application/json")
            // The API server does not redirect; never follow one with credentials.
            .max_redirects(0)
            .max_idle_connections_per_host(8)
            // ureq's default is 128 KiB each way per connection; a dozen pooled and watch
            // connections would hold 3 MiB. JSON is parsed as it streams, and requests are
            // small (a PATCH, an eviction): 12 KiB in (ureq needs 10 for a request body's
            // staging) and 4 KiB out. 16 + 16 measured 0.2 MiB more RSS at the SPEC §6 sync.
            .input_buffer_size(12 * 1024)
            .output_buffer_size(4 * 1024)
            // No resolve timeout: with one, ureq spawns a thread per request to look the
            // host up (resolve.rs says why and what bounds a lookup instead).
            .timeout_connect(Some(CONNECT_TIMEOUT))
            .timeout_send_request(Some(Duration::from_secs(30)))
            .timeout_send_body(Some(Duration::from_secs(60)))
            // The API server ends non-watch requests after 60 s.
            .timeout_recv_response(Some(Duration::from_secs(90)))
            .timeout_recv_body(Some(Duration::from_secs(300)));
        if setup.base_url.starts_with("https://") {
            config = config.tls_config(tls_config(
                setup.ca.as_ref(),
                setup.client_certificate.as_ref(),
                setup.insecure,
                &setup.ca_hint,
            )?);
        }
        if let Some(proxy) = &setup.proxy_url {
            let proxy = ureq::Proxy::new(proxy).map_err(|e| {
                Error::Config(format!("kubeconfig proxy-url `{proxy}` is not usable: {e}"))
            })?;
            config = config.proxy(Some(proxy));
        } else if is_loopback_url(&setup.base_url) {
            // Like Go's ProxyFromEnvironment: a local kubectl proxy is never reached through HTTP(S)_PROXY.
            config = config.proxy(None);
        }
        let (request_base, resolver) = match &setup.tls_server_name {
            Some(name) if setup.base_url.starts_with("https://") => {
                let (request_base, pin) = resolve::pin_server_name(&setup.base_url, name)?;
                (request_base, resolve::CachingResolver::with_pin(pin))
            }
            _ => (setup.base_url.clone(), resolve::CachingResolver::default()),
        };
        Ok(Client {
            inner: Arc::new(Inner {
                agent: ureq::Agent::with_parts(
                    config.build(),
                    ureq::unversioned::transport::DefaultConnector::new(),
                    resolver,
                ),
                request_base,
                base_url: setup.base_url,
                token: setup.token,
                namespace: setup.namespace,
                counts: Mutex::new(BTreeMap::new()),
                impersonate: setup.impersonate,
            }),
            bound: None,
        })
    }

    /// The same connection, with every request cut after `bound` in all (a transport
    /// error that says it timed out): for requests whose answer is worthless once late,
    /// such as a Lease renewal after the renew deadline.
    pub fn bounded(&self, bound: Duration) -> Client {
        Client {
            inner: Arc::clone(&self.inner),
            bound: Some(bound),
        }
    }

    pub fn base_url(&self) -> &str {
        &self.inner.base_url
    }

    /// The namespace wavelet runs in: the in-cluster namespace file, or the kubeconfig
    /// context's namespace; `None` with `--server`.
    pub fn default_namespace(&self) -> Option<String> {
        self.inner.namespace.clone()
    }

    /// GET one object (or a small list) and decode it; large lists go through [`Client::list`].
    pub fn get<T: DeserializeOwned>(&self, path_and_query: &str) -> Result<T, Error> {
        let response = self.send(Request {
            verb: get_verb(path_and_query),
            method: Method::GET,
            path_and_query,
            body: None,
            accept: None,
            watch_body_timeout: None,
        })?;
        decode(response, "GET", path_and_query)
    }

    /// LIST one page, handing each item to `on_item` as it is decoded from the stream (one
    /// item's bytes in memory at a time, whatever the page's size).
    pub fn list<T: DeserializeOwned>(
        &self,
        path_and_query: &str,
        shape: Shape,
        on_item: &mut dyn FnMut(T),
    ) -> Result<ListMeta, Error> {
        let response = self.send(Request {
            verb: "list",
            method: Method::GET,
            path_and_query,
            body: None,
            accept: shape.accept(true),
            watch_body_timeout: None,
        })?;
        decode_list(response, path_and_query, on_item)
    }

    pub fn post<T: DeserializeOwned>(
        &self,
        path: &str,
        body: &serde_json::Value,
    ) -> Result<T, Error> {
        let body = encode(body)?;
        let response = self.send(Request::with_body(
            "create",
            Method::POST,
            path,
            ("application/json", &body),
        ))?;
        decode(response, "POST", path)
    }

    pub fn put<T: DeserializeOwned>(
        &self,
        path: &str,
        body: &serde_json::Value,
    ) -> Result<T, Error> {
        let body = encode(body)?;
        let response = self.send(Request::with_body(
            "update",
            Method::PUT,
            path,
            ("application/json", &body),
        ))?;
        decode(response, "PUT", path)
    }

    pub fn patch<T: DeserializeOwned>(
        &self,
        path_and_query: &str,
        patch: PatchType,
        body: &serde_json::Value,
    ) -> Result<T, Error> {
        let body = encode(body)?;
        let response = self.send(Request::with_body(
            "patch",
            Method::PATCH,
            path_and_query,
            (patch.content_type(), &body),
        ))?;
        decode(response, "PATCH", path_and_query)
    }

    pub fn delete<T: DeserializeOwned>(
        &self,
        path_and_query: &str,
        body: Option<&serde_json::Value>,
    ) -> Result<T, Error> {
        let body = body.map(encode).transpose()?;
        let response = self.send(Request {
            verb: "delete",
            method: Method::DELETE,
            path_and_query,
            body: body.as_deref().map(|b| ("application/json", b)),
            accept: None,
            watch_body_timeout: None,
        })?;
        decode(response, "DELETE", path_and_query)
    }

    /// Opens a watch; `path_and_query` already holds `watch=true` and the rest. `timeout` is
    /// the server-side `timeoutSeconds` asked for (always send one: without it the server
    /// picks 30-60 min). The server ends the stream cleanly at `timeout`; the client cuts it at
    /// `timeout + 30s` whatever happens (an [`Error::Transport`] from
    /// [`WatchStream::next_line`]), so a dead connection never hangs a watch thread. Connecting
    /// is bounded by 10 s. Errors are not retried here (except one token re-read after a 401):
    /// the watch loop backs off.
    pub fn watch(
        &self,
        path_and_query: &str,
        timeout: Duration,
        shape: Shape,
    ) -> Result<WatchStream, Error> {
        let response = self.send(Request {
            verb: "watch",
            method: Method::GET,
            path_and_query,
            body: None,
            accept: shape.accept(false),
            watch_body_timeout: Some(timeout.saturating_add(WATCH_GRACE)),
        })?;
        Ok(WatchStream::new(
            Box::new(response.into_body().into_reader()),
            path_and_query,
        ))
    }

    /// Requests sent so far by (verb, HTTP code); code 0 counts transport errors.
    pub fn request_counts(&self) -> Vec<((&'static str, u16), u64)> {
        lock(&self.inner.counts)
            .iter()
            .map(|(key, count)| (*key, *count))
            .collect()
    }

    /// One request: authenticate, send, count, log, turn a non-2xx answer into
    /// [`Error::Api`] (whose Status keeps the code, reason and Retry-After). Never retried
    /// here, so no call blocks longer than its timeouts: the workers' queue holds the one
    /// retry policy. A token file is re-read once after a 401 (a rotated token).
    fn send(&self, request: Request<'_>) -> Result<http::Response<ureq::Body>, Error> {
        let Request {
            verb,
            ref method,
            path_and_query,
            watch_body_timeout: _,
            ..
        } = request;
        let inner = &self.inner;
        if !path_and_query.starts_with('/') {
            return Err(Error::Config(format!(
                "request path `{path_and_query}` must start with `/`"
            )));
        }
        let url = format!("{}{}", inner.request_base, path_and_query);
        let log_path = path_and_query.split('?').next().unwrap_or(path_and_query);
        let mut reread_token = false;
        loop {
            let token = inner.token.bearer(Instant::now())?;
            let started = Instant::now();
            let result = self.run_once(&request, &url, token.as_deref());
            let response = match result {
                Ok(response) => response,
                Err(error) => {
                    self.count(verb, 0);
                    log::debug!(
                        "{verb} {method} {log_path} -> transport error after {:?}",
                        started.elapsed()
                    );
                    return Err(error);
                }
            };
            let code = response.status().as_u16();
            self.count(verb, code);
            log::debug!(
                "{verb} {method} {log_path} -> {code} in {:?}",
                started.elapsed()
            );
            if (200..300).contains(&code) {
                return Ok(response);
            }
            let status = status_from_response(response, method);
            if code == 401 && inner.token.is_refreshable() {
                inner.token.invalidate();
                if !reread_token {
                    reread_token = true;
                    log::debug!("401 Unauthorized: re-reading the token file and retrying once");
                    continue;
                }
            }
            // One attempt: the caller decides whether and when to try again (a 429's
            // Retry-After travels in the Status).
            return Err(Error::Api(status));
        }
    }

    fn run_once(
        &self,
        request: &Request<'_>,
        url: &str,
        token: Option<&str>,
    ) -> Result<http::Response<ureq::Body>, Error> {
        let agent = &self.inner.agent;
        let method = &request.method;
        let mut builder = http::Request::builder().method(method.clone()).uri(url);
        if let Some(token) = token {
            builder = builder.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        if let Some(accept) = request.accept {
            builder = builder.header(header::ACCEPT, accept);
        }
        for (name, value) in &self.inner.impersonate {
            builder = builder.header(*name, value.as_str());
        }
        let invalid = |e: http::Error| {
            Error::Config(format!(
                "cannot build request {method} {}: {e}",
                strip_query(url)
            ))
        };
        let result = match request.body {
            Some((content_type, bytes)) => {
                let with_body = builder
                    .header(header::CONTENT_TYPE, content_type)
                    .body(bytes)
                    .map_err(invalid)?;
                match self.bound {
                    Some(bound) => agent.run(
                        agent
                            .configure_request(with_body)
                            .timeout_global(Some(bound))
                            .build(),
                    ),
                    None => agent.run(with_body),
                }
            }
            None => {
                let without_body = builder.body(()).map_err(invalid)?;
                match (request.watch_body_timeout, self.bound) {
                    (Some(limit), _) => {
                        let watch = agent
                            .configure_request(without_body)
                            .timeout_recv_response(Some(Duration::from_secs(60)))
                            .timeout_recv_body(Some(limit))
                            .build();
                        agent.run(watch)
                    }
                    (None, Some(bound)) => agent.run(
                        agent
                            .configure_request(without_body)
                            .timeout_global(Some(bound))
                            .build(),
                    ),
                    (None, None) => agent.run(without_body),
                }
            }
        };
        result.map_err(|e| transport_error(method, url, e))
    }

    fn count(&self, verb: &'static str, code: u16) {
        *lock(&self.inner.counts).entry((verb, code)).or_insert(0) += 1;
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn strip_query(url: &str) -> &str {
    url.split('?').next().unwrap_or(url)
}

fn check_url(url: &str, what: &str) -> Result<(), Error> {
    if !(url.starts_with("https://") || url.starts_with("http://")) {
        return Err(Error::Config(format!(
            "{what} `{url}` must start with https:// or http:// (e.g. http://127.0.0.1:8001 for `kubectl proxy`)"
        )));
    }
    let uri: http::Uri = url
        .parse()
        .map_err(|e| Error::Config(format!("{what} `{url}` is not a valid URL: {e}")))?;
    if uri.host().is_none_or(str::is_empty) {
        return Err(Error::Config(format!("{what} `{url}` has no host")));
    }
    if uri.query().is_some() {
        return Err(Error::Config(format!(
            "{what} `{url}` must not contain a query"
        )));
    }
    Ok(())
}

fn is_loopback_url(url: &str) -> bool {
    let Ok(uri) = url.parse::<http::Uri>() else {
        return false;
    };
    let host = uri
        .host()
        .unwrap_or("")
        .trim_start_matches('[')
        .trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

fn transport_error(method: &Method, url: &str, error: ureq::Error) -> Error {
    let hint = if is_tls_name_mismatch(&error) {
        " (TLS: the server's certificate does not name the host it is verified against: the \
         host of the server URL, or the kubeconfig's tls-server-name when it sets one)"
    } else if is_tls_failure(&error) {
        " (TLS: the server's certificate is not trusted: check the certificate authority, \
         certificate-authority(-data) in the kubeconfig or the service account ca.crt; for a \
         test cluster only, --insecure-skip-tls-verify skips the check)"
    } else if matches!(error, ureq::Error::Timeout(_)) {
        " (timed out)"
    } else {
        ""
    };
    Error::Transport(format!("{method} {}: {error}{hint}", strip_query(url)))
}

/// A failed TLS handshake. rustls reports a certificate it does not trust through the
/// socket, so ureq hands it over as an `Io` error that wraps the `rustls::Error`.
fn is_tls_failure(error: &ureq::Error) -> bool {
    match error {
        ureq::Error::Rustls(_) | ureq::Error::Tls(_) => true,
        ureq::Error::Io(e) => e.get_ref().is_some_and(|inner| inner.is::<rustls::Error>()),
        _ => false,
    }
}

/// A certificate from a trusted CA that names other hosts.
fn is_tls_name_mismatch(error: &ureq::Error) -> bool {
    let rustls_error = match error {
        ureq::Error::Rustls(e) => Some(e),
        ureq::Error::Io(e) => e
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<rustls::Error>()),
        _ => None,
    };
    matches!(
        rustls_error,
        Some(rustls::Error::InvalidCertificate(
            rustls::CertificateError::NotValidForName
                | rustls::CertificateError::NotValidForNameContext { .. }
        ))
    )
}

fn encode(body: &serde_json::Value) -> Result<Vec<u8>, Error> {
    serde_json::to_vec(body).map_err(|e| Error::Decode(format!("cannot encode request body: {e}")))
}

/// The authorization verb of a GET, as the API server derives it: a collection is `list`,
/// a named object (or a non-resource path such as `/version`) is `get`.
fn get_verb(path_and_query: &str) -> &'static str {
    let path = path_and_query.split('?').next().unwrap_or("");
    let parts: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let rest = match parts.first() {
        Some(&"api") if parts.len() >= 2 => &parts[2..],
        Some(&"apis") if parts.len() >= 3 => &parts[3..],
        _ => return "get",
    };
    let rest = if rest.first() == Some(&"namespaces") && rest.len() >= 3 {
        &rest[2..]
    } else {
        rest
    };
    if rest.len() == 1 {
        "list"
    } else {
        "get"
    }
}

#[cfg(test)]
mod tests {
    use super::stream::tests::all_lines;
    use super::*;
    use crate::testing::TempDir;
    use serde_json::{json, Value};
    use std::io::{BufRead, Write};
    use std::net::{TcpListener, TcpStream};
    use std::sync::mpsc;

    // Test PKI made with openssl for these tests (EC P-256, valid until 2126): a CA, a server
    // certificate for 127.0.0.1/localhost and a client certificate signed by it, an unrelated
    // key and an unrelated CA.
    const CA_CRT: &str = "-----BEGIN CERTIFICATE-----
MIIBmjCCAUGgAwIBAgIUKLUx/NN+jo8OHca5uS+YPNKQaSwwCgYIKoZIzj0EAwIw
GjEYMBYGA1UEAwwPd2F2ZWxldC10ZXN0LWNhMCAXDTI2MTEyMjA0MjgxM1oYDzIx
MjYxMDI5MDQyODEzWjAaMRgwFgYDVQQDDA93YXZlbGV0LXRlc3QtY2EwWTATBgcq
hkjOPQIBBggqhkjOPQMBBwNCAAR4iToxJ+svWBItJBddIZKuplmbZY3ZCeAfjNAn
Ilw0K/EVqBlinGdEtZEwPGELeis6nxKGZgQuPvGYPCO0AC9uo2MwYTAdBgNVHQ4E
FgQUmtbeb6zSdUuIJQ0ZRMwtOwKw408wHwYDVR0jBBgwFoAUmtbeb6zSdUuIJQ0Z
RMwtOwKw408wDwYDVR0TAQH/BAUwAwEB/zAOBgNVHQ8BAf8EBAMCAQYwCgYIKoZI
zj0EAwIDRwAwRAIgOa/eQ8OdVX6Hn8Qug1+HLWiicwGl4m3hLlaiCgJlgW4CIFhk
NNj1gaqPiv1/L5RiMCplO6SP3b1dla0maZGmP9us
-----END CERTIFICATE-----
";
    const SERVER_CRT: &str = "-----BEGIN CERTIFICATE-----
MIIBwjCCAWigAwIBAgIUWToFdB32ONCocTj/Qo1BXNXX57MwCgYIKoZIzj0EAwIw
GjEYMBYGA1UEAwwPd2F2ZWxldC10ZXN0LWNhMCAXDTI2MTEyMjA0MjgxM1oYDzIx
MjYxMDI5MDQyODEzWjAUMRIwEAYDVQQDDAkxMjcuMC4wLjEwWTATBgcqhkjOPQIB
BggqhkjOPQMBBwNCAATYhoZwUan0mZ1jyZqCC/iVAriEJE4fwzhynHn08v4/oHFu
1/q5iwobjcS3F3omNTraXfNPkDf23zt/QGT2W1/So4GPMIGMMBoGA1UdEQQTMBGH
BH8AAAGCCWxvY2FsaG9zdDATBgNVHSUEDDAKBggrBgEFBQcDATAJBgNVHRMEAjAA
MA4GA1UdDwEB/wQEAwIHgDAdBgNVHQ4EFgQUbHdlHoV/dmywU9ASzVTdtFhLbKIw
HwYDVR0jBBgwFoAUmtbeb6zSdUuIJQ0ZRMwtOwKw408wCgYIKoZIzj0EAwIDSAAw
RQIhAJsvQiOZo1KJ0p24zeok5XTF70sCgTckisCQQYg+AssFAiBWTzsEg0m7lcCu
Ewgc99IpdT+fix2gXgRr2nq9yzqZbQ==
-----END CERTIFICATE-----
";
    const SERVER_KEY: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgviM+bbHjjUmoNf32
034WUloq7DZVgBwBjS6HAuekUhqhRANCAATYhoZwUan0mZ1jyZqCC/iVAriEJE4f
wzhynHn08v4/oHFu1/q5iwobjcS3F3omNTraXfNPkDf23zt/QGT2W1/S
-----END PRIVATE KEY-----
";
    const CLIENT_CRT: &str = "-----BEGIN CERTIFICATE-----
MIIBrTCCAVSgAwIBAgIUWToFdB32ONCocTj/Qo1BXNXX57QwCgYIKoZIzj0EAwIw
GjEYMBYGA1UEAwwPd2F2ZWxldC10ZXN0LWNhMCAXDTI2MTEyMjA0MjgxM1oYDzIx
MjYxMDI5MDQyODEzWjAeMRwwGgYDVQQDDBN3YXZlbGV0LXRlc3QtY2xpZW50MFkw
EwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEKmb7WDenjIFRGm9S+srMGrVBnsllnOm7
OqsWckrOGfkgzBr1JcMZfFoeWQuHEQDsVUj9J5bzLBUvGWkZqH5SIqNyMHAwEwYD
VR0lBAwwCgYIKwYBBQUHAwIwCQYDVR0TBAIwADAOBgNVHQ8BAf8EBAMCB4AwHQYD
VR0OBBYEFLgy7xGSZcy5eA24IZEgR7dh9h4EMB8GA1UdIwQYMBaAFJrW3m+s0nVL
iCUNGUTMLTsCsONPMAoGCCqGSM49BAMCA0cAMEQCIC/4CKrcbw5N0Tnjica0OEaP
7EAb9Kp/QZJ7BJy9L2ZuAiA5Cp0k5ssQnGNLROXgtrObszeQ86BOxcOJgbs9vZf4
Nw==
-----END CERTIFICATE-----
";
    const CLIENT_KEY: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgaQ2f/orVZee4slRO
vLYn/yUZ6uqnjl0hK2IuMa9z1NqhRANCAAQqZvtYN6eMgVEab1L6yswatUGeyWWc
6bs6qxZySs4Z+SDMGvUlwxl8Wh5ZC4cRAOxVSP0nlvMsFS8ZaRmoflIi
-----END PRIVATE KEY-----
";
    const OTHER_KEY: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgej+Gz2wwXz1TBPmS
vIY4i1YGAsLX09f2tvmTdwz7zpahRANCAAQ48xJyQcaRvmAhoDiwqS7G0XYoAujG
fHlXW8qK4It8prL3IpM9Z0xF0YnJnE431aU0zevgR512DrMMooBci2vW
-----END PRIVATE KEY-----
";
    const OTHER_CA_CRT: &str = "-----BEGIN CERTIFICATE-----
MIIBlTCCATugAwIBAgIUT2LSEWvtLRiHE5HutaQCyZA0OnowCgYIKoZIzj0EAwIw
FzEVMBMGA1UEAwwMdW5yZWxhdGVkLWNhMCAXDTI2MTEyMjA0MzAzM1oYDzIxMjYx
MDI5MDQzMDMzWjAXMRUwEwYDVQQDDAx1bnJlbGF0ZWQtY2EwWTATBgcqhkjOPQIB
BggqhkjOPQMBBwNCAARV1dgRauh/BY4JEyvtbBA7DxxIhmquAVESMq84DR4oAWPz
pdtm7shVJ3/i2L1MBbmpoMhWJHWJGc02aPpiKfqxo2MwYTAdBgNVHQ4EFgQUpivU
zuqsjT/HIl5CFIBe2gWduSIwHwYDVR0jBBgwFoAUpivUzuqsjT/HIl5CFIBe2gWd
uSIwDwYDVR0TAQH/BAUwAwEB/zAOBgNVHQ8BAf8EBAMCAQYwCgYIKoZIzj0EAwID
SAAwRQIgH5Sxb4xc5ivFfSAqnTIp/BYiVqV9tIOn2C+NM4iASqMCIQC1Nu9whhxZ
6PfdX9E/I3nxziX2aFBJ94ICRXLEz8s0HQ==
-----END CERTIFICATE-----
";

    // -----------------------------------------------------------------------------------------
    // Helpers

    fn api_status(result: Result<impl std::fmt::Debug, Error>) -> Status {
        match result {
            Err(Error::Api(status)) => status,
            other => panic!("expected an API error, got {other:?}"),
        }
    }

    fn config_message<T>(result: Result<T, Error>) -> String {
        match result {
            Err(Error::Config(message)) => message,
            Err(other) => panic!("expected a config error, got {other}"),
            Ok(_) => panic!("expected a config error, got a client"),
        }
    }

    /// A canned HTTP/1.1 response with `Connection: close` and a Content-Length.
    fn response(status: &str, headers: &[(&str, &str)], body: &str) -> Vec<Vec<u8>> {
        let mut head = format!(
            "HTTP/1.1 {status}\r\nConnection: close\r\nContent-Length: {}\r\n",
            body.len()
        );
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        vec![format!("{head}\r\n{body}").into_bytes()]
    }

    fn json_response(status: &str, body: &Value) -> Vec<Vec<u8>> {
        response(
            status,
            &[("Content-Type", "application/json")],
            &body.to_string(),
        )
    }

    /// One request as the fake server received it.
    struct Received {
        head: String,
        body: String,
    }

    impl Received {
        fn header(&self, name: &str) -> Option<String> {
            self.head.lines().skip(1).find_map(|line| {
                let (n, v) = line.split_once(':')?;
                n.trim()
                    .eq_ignore_ascii_case(name)
                    .then(|| v.trim().to_string())
            })
        }

        fn request_line(&self) -> &str {
            self.head.lines().next().unwrap_or("")
        }
    }

    /// A tiny HTTP(S)/1.1 server on 127.0.0.1:0 that answers one connection per canned
    /// response (each written in pieces with a pause between, then closed).
    struct FakeServer {
        url: String,
        received: mpsc::Receiver<Received>,
    }

    impl FakeServer {
        fn start(replies: Vec<Vec<Vec<u8>>>, tls: Option<Arc<rustls::ServerConfig>>) -> FakeServer {
            let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
            let port = listener.local_addr().expect("local addr").port();
            let (sender, received) = mpsc::channel();
            std::thread::spawn(move || {
                for pieces in replies {
                    let Ok((tcp, _)) = listener.accept() else {
                        return;
                    };
                    let _ = tcp.set_read_timeout(Some(Duration::from_secs(10)));
                    match &tls {
                        Some(config) => {
                            let Ok(connection) = rustls::ServerConnection::new(config.clone())
                            else {
                                return;
                            };
                            let mut tls_stream = rustls::StreamOwned::new(connection, tcp);
                            if answer(&mut tls_stream, &pieces, &sender).is_ok() {
                                tls_stream.conn.send_close_notify();
                                let _ = tls_stream.flush();
                            }
                        }
                        None => {
                            let mut tcp: TcpStream = tcp;
                            let _ = answer(&mut tcp, &pieces, &sender);
                        }
                    }
                }
            });
            FakeServer {
                url: format!("127.0.0.1:{port}"),
                received,
            }
        }

        fn http(replies: Vec<Vec<Vec<u8>>>) -> FakeServer {
            let mut server = FakeServer::start(replies, None);
            server.url = format!("http://{}", server.url);
            server
        }

        fn https(replies: Vec<Vec<Vec<u8>>>, require_client_certificate: bool) -> FakeServer {
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let chain: Vec<_> = CertificateDer::pem_slice_iter(SERVER_CRT.as_bytes())
                .map(|c| c.expect("pem"))
                .collect();
            let key = PrivateKeyDer::from_pem_slice(SERVER_KEY.as_bytes()).expect("key");
            let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
                .with_safe_default_protocol_versions()
                .expect("versions");
            let builder = if require_client_certificate {
                let mut roots = rustls::RootCertStore::empty();
                for cert in CertificateDer::pem_slice_iter(CA_CRT.as_bytes()) {
                    roots.add(cert.expect("pem")).expect("root");
                }
                let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                    Arc::new(roots),
                    provider,
                )
                .build()
                .expect("client verifier");
                builder.with_client_cert_verifier(verifier)
            } else {
                builder.with_no_client_auth()
            };
            let config = builder.with_single_cert(chain, key).expect("server config");
            let mut server = FakeServer::start(replies, Some(Arc::new(config)));
            server.url = format!("https://{}", server.url);
            server
        }

        fn next(&self) -> Received {
            self.received
                .recv_timeout(Duration::from_secs(10))
                .expect("the fake server received a request")
        }

        fn port(&self) -> String {
            self.url.rsplit(':').next().unwrap_or_default().to_string()
        }
    }

    fn answer<S: Read + Write>(
        stream: &mut S,
        pieces: &[Vec<u8>],
        sender: &mpsc::Sender<Received>,
    ) -> io::Result<()> {
        let mut reader = io::BufReader::new(&mut *stream);
        let mut head = String::new();
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line)? == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            if line == "\r\n" {
                break;
            }
            head.push_str(&line);
        }
        let length = head
            .lines()
            .find_map(|l| {
                l.split_once(':')
                    .filter(|(n, _)| n.eq_ignore_ascii_case("content-length"))
            })
            .and_then(|(_, v)| v.trim().parse::<usize>().ok())
            .unwrap_or(0);
        let mut body = vec![0; length];
        reader.read_exact(&mut body)?;
        drop(reader);
        let _ = sender.send(Received {
            head,
            body: String::from_utf8_lossy(&body).into_owned(),
        });
        for (index, piece) in pieces.iter().enumerate() {
            if piece.is_empty() {
                // An empty piece stands for a server that goes silent with the connection open.
                std::thread::sleep(Duration::from_secs(3));
                continue;
            }
            if index > 0 {
                std::thread::sleep(Duration::from_millis(30));
            }
            stream.write_all(piece)?;
            stream.flush()?;
        }
        Ok(())
    }

    fn proxy_client(server: &FakeServer) -> Client {
        Client::from_flags(&ConnectionFlags {
            server: Some(server.url.clone()),
            ..ConnectionFlags::default()
        })
        .expect("client for --server http://")
    }

    fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| {
            vars.iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| OsString::from(v))
        }
    }

    fn kubeconfig_text(server: &str, cluster_extra: &str, user: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: ctx\ncontexts:\n- name: ctx\n  context:\n    cluster: c\n    user: u\n    namespace: from-kubeconfig\nclusters:\n- name: c\n  cluster:\n    server: {server}\n{cluster_extra}users:\n- name: u\n  user:\n{user}"
        )
    }

    #[test]
    fn clients_and_watch_streams_can_move_between_threads() {
        fn send_sync<T: Send + Sync>() {}
        fn send<T: Send>() {}
        send_sync::<Client>();
        send::<WatchStream>();
    }

    // -----------------------------------------------------------------------------------------
    // Status parsing

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

    #[test]
    fn get_counts_collections_as_list_and_named_objects_as_get() {
        for (path, verb) in [
            ("/api/v1/namespaces/ns/configmaps?limit=500", "list"),
            ("/api/v1/configmaps", "list"),
            ("/apis/apps/v1/deployments", "list"),
            ("/apis/apps/v1/namespaces/ns/deployments", "list"),
            ("/api/v1/namespaces", "list"),
            ("/api/v1/namespaces/ns", "get"),
            ("/api/v1/namespaces/ns/configmaps/app", "get"),
            (
                "/apis/coordination.k8s.io/v1/namespaces/ns/leases/wavelet",
                "get",
            ),
            ("/version", "get"),
            ("/apis/apps/v1", "get"),
        ] {
            assert_eq!(get_verb(path), verb, "{path}");
        }
    }

    // -----------------------------------------------------------------------------------------
    // Tokens

    #[test]
    fn a_token_file_is_re_read_after_a_minute_and_after_a_401() {
        let dir = TempDir::new("client");
        let path = dir.write("token", "first\n");
        let source = TokenSource::file(path.clone(), "token file", "hint".into()).expect("token");
        let t0 = Instant::now();
        assert_eq!(source.bearer(t0).expect("token").as_deref(), Some("first"));
        std::fs::write(&path, "second").expect("rotate");
        assert_eq!(
            source
                .bearer(t0 + Duration::from_secs(30))
                .expect("token")
                .as_deref(),
            Some("first")
        );
        assert_eq!(
            source
                .bearer(t0 + Duration::from_secs(61))
                .expect("token")
                .as_deref(),
            Some("second")
        );
        std::fs::write(&path, "third").expect("rotate");
        source.invalidate();
        assert_eq!(
            source
                .bearer(t0 + Duration::from_secs(62))
                .expect("token")
                .as_deref(),
            Some("third")
        );
    }

    #[test]
    fn an_unreadable_token_file_keeps_the_last_token() {
        let dir = TempDir::new("client");
        let path = dir.write("token", "kept");
        let source = TokenSource::file(path.clone(), "token file", "hint".into()).expect("token");
        std::fs::remove_file(&path).expect("remove");
        source.invalidate();
        assert_eq!(
            source.bearer(Instant::now()).expect("token").as_deref(),
            Some("kept")
        );
    }

    #[test]
    fn a_missing_token_file_names_the_file_and_the_flags_that_help() {
        let dir = TempDir::new("client");
        dir.write("ca.crt", CA_CRT);
        let m = config_message(Client::in_cluster_from(&dir.0, "10.96.0.1", "443", false));
        assert!(
            m.contains(&dir.0.join("token").display().to_string()),
            "{m}"
        );
        assert!(
            m.contains("automountServiceAccountToken")
                && m.contains("--server")
                && m.contains("--kubeconfig"),
            "{m}"
        );
        dir.write("token", "  \n");
        assert!(
            config_message(Client::in_cluster_from(&dir.0, "10.96.0.1", "443", false))
                .contains("is empty")
        );
    }

    // -----------------------------------------------------------------------------------------
    // TLS construction

    fn pem(text: &str, origin: &str) -> Pem {
        Pem {
            bytes: text.as_bytes().to_vec(),
            origin: origin.into(),
        }
    }

    #[test]
    fn https_without_a_ca_says_which_kubeconfig_field_to_set() {
        let dir = TempDir::new("client");
        let path = dir.write(
            "config",
            &kubeconfig_text("https://10.0.0.1:6443", "", "    token: t\n"),
        );
        let m = config_message(Client::from_flags(&ConnectionFlags {
            kubeconfig: Some(path),
            ..Default::default()
        }));
        assert!(
            m.contains("certificate-authority-data") && m.contains("--insecure-skip-tls-verify"),
            "{m}"
        );
        let m = config_message(Client::in_cluster_from(&dir.0, "10.96.0.1", "443", false));
        assert!(m.contains("token"), "{m}");
    }

    #[test]
    fn ca_pem_problems_are_clear_errors() {
        let m = config_message(parse_ca(&pem("not a certificate", "/etc/ca.crt")));
        assert!(
            m.contains("/etc/ca.crt") && m.contains("BEGIN CERTIFICATE"),
            "{m}"
        );
        let m = config_message(parse_ca(&pem(
            "-----BEGIN CERTIFICATE-----\nAAAA\n",
            "/etc/ca.crt",
        )));
        assert!(
            m.contains("/etc/ca.crt") && m.contains("invalid PEM"),
            "{m}"
        );
        let m = config_message(parse_ca(&pem(
            "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
            "x",
        )));
        assert!(m.contains("cannot be used as a trust root"), "{m}");
        let bundle = format!("{CA_CRT}{OTHER_CA_CRT}");
        assert_eq!(parse_ca(&pem(&bundle, "bundle")).expect("two CAs").len(), 2);
    }

    #[test]
    fn client_certificate_problems_are_clear_errors() {
        assert!(parse_client_certificate(&pem(CLIENT_CRT, "crt"), &pem(CLIENT_KEY, "key")).is_ok());
        let m = config_message(parse_client_certificate(
            &pem(CLIENT_CRT, "crt"),
            &pem(OTHER_KEY, "other.key"),
        ));
        assert!(m.contains("cannot be used together"), "{m}");
        let m = config_message(parse_client_certificate(
            &pem(CLIENT_CRT, "crt"),
            &pem(CLIENT_CRT, "cert-as-key"),
        ));
        assert!(
            m.contains("cert-as-key") && m.contains("no usable PEM private key"),
            "{m}"
        );
        let m = config_message(parse_client_certificate(
            &pem("", "empty.crt"),
            &pem(CLIENT_KEY, "key"),
        ));
        assert!(m.contains("empty.crt"), "{m}");
    }

    // -----------------------------------------------------------------------------------------
    // Where to connect

    #[test]
    fn tokens_go_over_plain_http_only_to_loopback_addresses() {
        assert!(is_loopback_url("http://127.0.0.1:8001"));
        assert!(is_loopback_url("http://localhost/api"));
        assert!(is_loopback_url("http://[::1]:80"));
        assert!(!is_loopback_url("http://10.0.0.1:8001"));
        assert!(!is_loopback_url("http://127.0.0.1.example.com"));
    }

    #[test]
    fn server_flag_wins_and_plain_http_has_no_namespace() {
        let dir = TempDir::new("client");
        let kubeconfig = dir.write(
            "config",
            &kubeconfig_text("https://10.0.0.1:6443", "", "    token: t\n"),
        );
        let flags = ConnectionFlags {
            server: Some("http://127.0.0.1:8001/".into()),
            kubeconfig: Some(kubeconfig),
            insecure_skip_tls_verify: false,
            context: None,
        };
        let client =
            Client::from_flags_with_env(&flags, &env(&[("KUBERNETES_SERVICE_HOST", "10.96.0.1")]))
                .expect("client");
        assert_eq!(client.base_url(), "http://127.0.0.1:8001");
        assert_eq!(client.default_namespace(), None);
        assert!(matches!(client.inner.token, TokenSource::None));
    }

    #[test]
    fn kubeconfig_flag_wins_over_the_environment_and_kubeconfig_env_uses_the_first_path() {
        let dir = TempDir::new("client");
        let insecure = "    insecure-skip-tls-verify: true\n";
        let a = dir.write(
            "a",
            &kubeconfig_text("https://a.example:6443", insecure, "    token: t\n"),
        );
        let b = dir.write(
            "b",
            &kubeconfig_text("https://b.example:6443", insecure, "    token: t\n"),
        );
        let list = format!("{}:{}", b.display(), a.display());
        let vars = env(&[
            ("KUBECONFIG", &list),
            ("KUBERNETES_SERVICE_HOST", "10.96.0.1"),
            ("KUBERNETES_SERVICE_PORT", "443"),
        ]);
        let flags = ConnectionFlags {
            kubeconfig: Some(a.clone()),
            ..Default::default()
        };
        assert_eq!(
            Client::from_flags_with_env(&flags, &vars)
                .expect("client")
                .base_url(),
            "https://a.example:6443"
        );
        let client =
            Client::from_flags_with_env(&ConnectionFlags::default(), &vars).expect("client");
        assert_eq!(client.base_url(), "https://b.example:6443");
        assert_eq!(
            client.default_namespace().as_deref(),
            Some("from-kubeconfig")
        );
    }

    #[test]
    fn in_cluster_comes_before_the_home_kubeconfig() {
        let home = TempDir::new("client");
        std::fs::create_dir_all(home.0.join(".kube")).expect("mkdir");
        home.write(
            ".kube/config",
            &kubeconfig_text(
                "https://home.example",
                "    insecure-skip-tls-verify: true\n",
                "    token: t\n",
            ),
        );
        let home_path = home.0.display().to_string();
        let client =
            Client::from_flags_with_env(&ConnectionFlags::default(), &env(&[("HOME", &home_path)]))
                .expect("home kubeconfig");
        assert_eq!(client.base_url(), "https://home.example");
        if !Path::new(SERVICE_ACCOUNT_DIR).exists() {
            let vars = env(&[
                ("HOME", &home_path),
                ("KUBERNETES_SERVICE_HOST", "10.96.0.1"),
                ("KUBERNETES_SERVICE_PORT", "443"),
            ]);
            let m = config_message(Client::from_flags_with_env(
                &ConnectionFlags::default(),
                &vars,
            ));
            assert!(
                m.contains(SERVICE_ACCOUNT_DIR) && m.contains("automountServiceAccountToken"),
                "{m}"
            );
        }
    }

    #[test]
    fn nothing_configured_says_which_flags_to_pass() {
        let home = TempDir::new("client");
        let m = config_message(Client::from_flags_with_env(
            &ConnectionFlags::default(),
            &env(&[("HOME", &home.0.display().to_string())]),
        ));
        assert!(
            m.contains("--server") && m.contains("--kubeconfig") && m.contains(".kube/config"),
            "{m}"
        );
    }

    #[test]
    fn server_flag_with_https_needs_a_ca_or_the_insecure_flag() {
        let flags = ConnectionFlags {
            server: Some("https://10.0.0.1:6443".into()),
            ..Default::default()
        };
        let m = config_message(Client::from_flags(&flags));
        assert!(
            m.contains("--insecure-skip-tls-verify") && m.contains("--kubeconfig"),
            "{m}"
        );
        let flags = ConnectionFlags {
            insecure_skip_tls_verify: true,
            ..flags
        };
        assert_eq!(
            Client::from_flags(&flags)
                .expect("insecure client")
                .base_url(),
            "https://10.0.0.1:6443"
        );
        let flags = ConnectionFlags {
            server: Some("127.0.0.1:8001".into()),
            ..Default::default()
        };
        assert!(config_message(Client::from_flags(&flags)).contains("http://"));
    }

    #[test]
    fn in_cluster_brackets_ipv6_hosts_and_reads_the_namespace() {
        let dir = TempDir::new("client");
        dir.write("token", "t");
        dir.write("ca.crt", CA_CRT);
        dir.write("namespace", "wavelet-system\n");
        let client = Client::in_cluster_from(&dir.0, "fd00::1", "443", false).expect("client");
        assert_eq!(client.base_url(), "https://[fd00::1]:443");
        assert_eq!(
            client.default_namespace().as_deref(),
            Some("wavelet-system")
        );
    }

    // -----------------------------------------------------------------------------------------
    // Against a fake server on 127.0.0.1

    #[test]
    fn a_chunked_watch_split_mid_line_yields_whole_lines_then_a_clean_end() {
        let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
        let first =
            "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\"}}}\n{\"type\":\"MODI";
        let second = "FIED\",\"object\":{\"metadata\":{\"name\":\"a\"}}}\n";
        let server = FakeServer::http(vec![vec![
            format!("{head}{:x}\r\n{first}\r\n", first.len()).into_bytes(),
            format!("{:x}\r\n{second}\r\n", second.len()).into_bytes(),
            b"0\r\n\r\n".to_vec(),
        ]]);
        let client = proxy_client(&server);
        let mut watch = client
            .watch(
                "/api/v1/configmaps?watch=true&resourceVersion=5&timeoutSeconds=60",
                Duration::from_secs(60),
                Shape::Whole,
            )
            .expect("watch opened");
        let lines = all_lines(&mut watch).expect("clean end");
        assert_eq!(lines.len(), 2);
        assert!(
            lines[1].starts_with("{\"type\":\"MODIFIED\"") && lines[1].ends_with("}}}"),
            "{}",
            lines[1]
        );
        assert!(server
            .next()
            .request_line()
            .starts_with("GET /api/v1/configmaps?watch=true&resourceVersion=5"));
        assert_eq!(client.request_counts(), vec![(("watch", 200), 1)]);
    }

    #[test]
    fn a_watch_cut_before_the_terminating_chunk_is_a_transport_error() {
        let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
        let event = "{\"type\":\"ADDED\",\"object\":{}}\n";
        let server = FakeServer::http(vec![vec![format!(
            "{head}{:x}\r\n{event}\r\n",
            event.len()
        )
        .into_bytes()]]);
        let mut watch = proxy_client(&server)
            .watch("/api/v1/pods?watch=1", Duration::from_secs(5), Shape::Whole)
            .expect("watch");
        assert!(watch.next_line().expect("one event").is_some());
        assert!(matches!(watch.next_line(), Err(Error::Transport(_))));
    }

    #[test]
    fn a_silent_watch_is_cut_by_the_body_timeout_instead_of_hanging() {
        let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
        let event = "{\"type\":\"ADDED\",\"object\":{}}\n";
        let server = FakeServer::http(vec![vec![
            format!("{head}{:x}\r\n{event}\r\n", event.len()).into_bytes(),
            Vec::new(),
        ]]);
        let client = proxy_client(&server);
        // `watch` allows timeoutSeconds + 30 s; the same mechanism with a short bound:
        let response = client
            .send(Request {
                verb: "watch",
                method: Method::GET,
                path_and_query: "/api/v1/pods?watch=1",
                body: None,
                accept: None,
                watch_body_timeout: Some(Duration::from_millis(300)),
            })
            .expect("watch opened");
        let mut watch = WatchStream::new(
            Box::new(response.into_body().into_reader()),
            "/api/v1/pods?watch=1",
        );
        assert!(watch.next_line().expect("one event").is_some());
        let started = Instant::now();
        assert!(matches!(watch.next_line(), Err(Error::Transport(_))));
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "cut after {:?}",
            started.elapsed()
        );
    }

    #[test]
    fn a_bounded_client_cuts_a_request_whose_answer_is_late() {
        // Silent for 3 s after reading the request, then an answer.
        let server = FakeServer::http(vec![vec![
            Vec::new(),
            response("200 OK", &[("Content-Type", "application/json")], "{}").concat(),
        ]]);
        let started = Instant::now();
        let result = proxy_client(&server)
            .bounded(Duration::from_millis(300))
            .put::<serde_json::Value>("/apis/x", &serde_json::json!({}));
        assert!(
            matches!(&result, Err(Error::Transport(m)) if m.contains("timed out")),
            "{result:?}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "cut after {:?}",
            started.elapsed()
        );
    }

    #[test]
    fn a_429_with_retry_after_is_returned_at_once_with_its_delay() {
        let server = FakeServer::http(vec![response(
            "429 Too Many Requests",
            &[("Content-Type", "text/plain"), ("Retry-After", "10")],
            "Too many requests, please try again later.\n",
        )]);
        let client = proxy_client(&server);
        let started = Instant::now();
        let status = api_status(client.get::<Value>("/api/v1/namespaces/ns/configmaps"));
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "the client waited"
        );
        assert_eq!(
            (status.code, status.retry_after),
            (429, Some(Duration::from_secs(10)))
        );
        assert_eq!(client.request_counts(), vec![(("list", 429), 1)]);
    }

    #[test]
    fn a_503_with_retry_after_is_one_attempt() {
        let server = FakeServer::http(vec![response(
            "503 Service Unavailable",
            &[("Retry-After", "120")],
            "starting up",
        )]);
        let client = proxy_client(&server);
        let status = api_status(client.get::<Value>("/api/v1/namespaces/ns/configmaps/a"));
        assert_eq!(
            (status.code, status.reason.as_str(), status.retry_after),
            (503, "ServiceUnavailable", Some(Duration::from_secs(120)))
        );
        assert_eq!(client.request_counts(), vec![(("get", 503), 1)]);
    }

    #[test]
    fn an_eviction_refused_by_a_budget_keeps_the_causes_and_retry_after_of_wire_075() {
        let refused = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "Cannot evict pod as it would violate the pod's disruption budget.",
            "reason": "TooManyRequests", "code": 429,
            "details": {"causes": [{"reason": "DisruptionBudget",
                "message": "The disruption budget web-pdb needs 2 healthy pods and has 1 currently"}],
                "retryAfterSeconds": 10}});
        let server = FakeServer::http(vec![json_response("429 Too Many Requests", &refused)]);
        let client = proxy_client(&server);
        let eviction = json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p", "namespace": "ns"}});
        let status =
            api_status(client.post::<Value>("/api/v1/namespaces/ns/pods/p/eviction", &eviction));
        assert_eq!(
            (status.code, status.retry_after),
            (429, Some(Duration::from_secs(10)))
        );
        assert_eq!(
            status.causes,
            ["The disruption budget web-pdb needs 2 healthy pods and has 1 currently"]
        );
        assert_eq!(
            status.explained(),
            "Cannot evict pod as it would violate the pod's disruption budget. (The disruption budget web-pdb needs 2 healthy pods and has 1 currently.)"
        );
    }

    #[test]
    fn a_text_plain_403_from_kubectl_proxy_is_forbidden_and_no_credentials_are_sent() {
        let server = FakeServer::http(vec![response(
            "403 Forbidden",
            &[("Content-Type", "text/plain")],
            "Forbidden\n",
        )]);
        let client = proxy_client(&server);
        let status = api_status(client.get::<Value>("/api/v1/namespaces/ns/pods/p/exec"));
        assert_eq!(
            (status.code, status.reason.as_str(), status.message.as_str()),
            (403, "Forbidden", "Forbidden")
        );
        let request = server.next();
        assert_eq!(request.header("authorization"), None);
        assert_eq!(
            request.header("accept").as_deref(),
            Some("application/json")
        );
        assert_eq!(
            request.header("user-agent"),
            Some(format!("wavelet/{}", env!("CARGO_PKG_VERSION")))
        );
        assert!(request
            .head
            .starts_with("GET /api/v1/namespaces/ns/pods/p/exec HTTP/1.1\r\n"));
    }

    #[test]
    fn an_eviction_answered_2xx_with_a_failure_status_is_an_api_error() {
        let body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "code": 500,
            "message": "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."});
        let server = FakeServer::http(vec![json_response("201 Created", &body)]);
        let client = proxy_client(&server);
        let eviction =
            json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p"}});
        let status =
            api_status(client.post::<Value>("/api/v1/namespaces/ns/pods/p/eviction", &eviction));
        assert_eq!(status.code, 500);
        assert!(status.message.contains("more than one PodDisruptionBudget"));
        let request = server.next();
        assert_eq!(
            request.header("content-type").as_deref(),
            Some("application/json")
        );
        assert_eq!(
            serde_json::from_str::<Value>(&request.body).expect("json body"),
            eviction
        );
    }

    #[test]
    fn a_failure_status_is_recognised_even_when_the_target_type_cannot_hold_it() {
        #[derive(Deserialize, Debug)]
        #[allow(dead_code)]
        struct Pod {
            spec: Value,
        }
        let body =
            json!({"kind": "Status", "status": "Failure", "code": 500, "message": "two PDBs"});
        let server = FakeServer::http(vec![json_response("200 OK", &body)]);
        let status = api_status(
            proxy_client(&server).post::<Pod>("/api/v1/namespaces/ns/pods/p/eviction", &json!({})),
        );
        assert_eq!(status.message, "two PDBs");
    }

    #[test]
    fn patch_and_delete_send_their_content_types_and_bodies() {
        let ok = || {
            json_response(
                "200 OK",
                &json!({"kind": "Deployment", "metadata": {"name": "web"}}),
            )
        };
        let server = FakeServer::http(vec![ok(), ok(), ok(), ok()]);
        let client = proxy_client(&server);
        let patch = json!({"spec": {"template": {"metadata": {"annotations": {"wavelet.dev/config-hash": "abc"}}}}});
        for (kind, content_type) in [
            (
                PatchType::Strategic,
                "application/strategic-merge-patch+json",
            ),
            (PatchType::Merge, "application/merge-patch+json"),
        ] {
            let _: Value = client
                .patch("/apis/apps/v1/namespaces/ns/deployments/web", kind, &patch)
                .expect("patched");
            let request = server.next();
            assert!(request
                .request_line()
                .starts_with("PATCH /apis/apps/v1/namespaces/ns/deployments/web "));
            assert_eq!(
                request.header("content-type").as_deref(),
                Some(content_type)
            );
            assert_eq!(
                serde_json::from_str::<Value>(&request.body).expect("json"),
                patch
            );
        }
        let options =
            json!({"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": "u1"}});
        let _: Value = client
            .delete("/api/v1/namespaces/ns/pods/p", Some(&options))
            .expect("deleted");
        let request = server.next();
        assert!(request
            .request_line()
            .starts_with("DELETE /api/v1/namespaces/ns/pods/p "));
        assert_eq!(
            serde_json::from_str::<Value>(&request.body).expect("json"),
            options
        );
        let _: Value = client
            .delete("/api/v1/namespaces/ns/pods/q", None)
            .expect("deleted");
        assert_eq!(server.next().body, "");
        assert_eq!(
            client.request_counts(),
            vec![(("delete", 200), 2), (("patch", 200), 2)]
        );
    }

    #[test]
    fn a_401_re_reads_the_rotated_token_file_and_retries_once() {
        let dir = TempDir::new("client");
        let token = dir.write("token", "old-token");
        let unauthorized = || {
            json_response(
                "401 Unauthorized",
                &json!({"kind": "Status", "status": "Failure", "message": "Unauthorized", "reason": "Unauthorized", "code": 401}),
            )
        };
        let server = FakeServer::http(vec![
            unauthorized(),
            json_response("200 OK", &json!({"ok": true})),
            unauthorized(),
            unauthorized(),
        ]);
        let client = Client::build(Setup {
            base_url: server.url.clone(),
            ca: None,
            client_certificate: None,
            insecure: false,
            token: TokenSource::file(token.clone(), "token file", "hint".into()).expect("token"),
            namespace: None,
            ca_hint: String::new(),
            proxy_url: None,
            tls_server_name: None,
            impersonate: Vec::new(),
        })
        .expect("client");
        std::fs::write(&token, "new-token\n").expect("rotate");
        let answer: Value = client
            .get("/api/v1/namespaces/ns/configmaps/a")
            .expect("retried with the new token");
        assert_eq!(answer["ok"], true);
        assert_eq!(
            server.next().header("authorization").as_deref(),
            Some("Bearer old-token")
        );
        assert_eq!(
            server.next().header("authorization").as_deref(),
            Some("Bearer new-token")
        );
        // A 401 with the fresh token too is returned after one retry.
        assert!(
            api_status(client.get::<Value>("/api/v1/namespaces/ns/configmaps/a")).is_unauthorized()
        );
        assert_eq!(
            client.request_counts(),
            vec![(("get", 200), 1), (("get", 401), 3)]
        );
    }

    #[test]
    fn an_unreachable_server_is_a_transport_error_counted_with_code_zero() {
        let port = TcpListener::bind("127.0.0.1:0")
            .expect("bind")
            .local_addr()
            .expect("addr")
            .port();
        let client = Client::from_flags(&ConnectionFlags {
            server: Some(format!("http://127.0.0.1:{port}")),
            ..Default::default()
        })
        .expect("client");
        assert!(matches!(
            client.get::<Value>("/version"),
            Err(Error::Transport(_))
        ));
        assert_eq!(client.request_counts(), vec![(("get", 0), 1)]);
    }

    #[test]
    fn a_body_that_is_not_the_expected_json_is_a_decode_error_naming_the_path() {
        let server = FakeServer::http(vec![response(
            "200 OK",
            &[("Content-Type", "application/json")],
            "[1, 2",
        )]);
        match proxy_client(&server).get::<Value>("/api/v1/namespaces/ns/configmaps?limit=2") {
            Err(Error::Decode(message)) => assert!(
                message.contains("GET /api/v1/namespaces/ns/configmaps:"),
                "{message}"
            ),
            other => panic!("expected a decode error, got {other:?}"),
        }
    }

    // -----------------------------------------------------------------------------------------
    // HTTPS against the fake server with the test PKI

    #[test]
    fn in_cluster_https_verifies_the_server_against_ca_crt_and_sends_the_token() {
        let server = FakeServer::https(
            vec![json_response("200 OK", &json!({"kind": "ConfigMap"}))],
            false,
        );
        let dir = TempDir::new("client");
        dir.write("token", "sa-token\n");
        dir.write("ca.crt", CA_CRT);
        dir.write("namespace", "apps");
        let client =
            Client::in_cluster_from(&dir.0, "127.0.0.1", &server.port(), false).expect("client");
        let cm: Value = client
            .get("/api/v1/namespaces/apps/configmaps/a")
            .expect("TLS request");
        assert_eq!(cm["kind"], "ConfigMap");
        assert_eq!(
            server.next().header("authorization").as_deref(),
            Some("Bearer sa-token")
        );
    }

    #[test]
    fn a_server_certificate_from_another_ca_is_refused_with_a_hint_naming_the_ca_and_the_flag() {
        let server = FakeServer::https(vec![json_response("200 OK", &json!({}))], false);
        let dir = TempDir::new("client");
        dir.write("token", "sa-token");
        dir.write("ca.crt", OTHER_CA_CRT);
        let client =
            Client::in_cluster_from(&dir.0, "127.0.0.1", &server.port(), false).expect("client");
        match client.get::<Value>("/version") {
            Err(Error::Transport(message)) => {
                assert!(message.contains("UnknownIssuer"), "{message}");
                assert!(message.contains("certificate-authority"), "{message}");
                assert!(message.contains("--insecure-skip-tls-verify"), "{message}");
            }
            other => panic!("expected a TLS failure, got {other:?}"),
        }
    }

    #[test]
    fn kubeconfig_client_certificates_are_presented_to_the_server() {
        let server = FakeServer::https(vec![json_response("200 OK", &json!({"major": "1"}))], true);
        let dir = TempDir::new("client");
        dir.write("client.crt", CLIENT_CRT);
        dir.write("client.key", CLIENT_KEY);
        let ca_data = crate::objects::base64::encode(CA_CRT.as_bytes());
        let text = kubeconfig_text(
            &server.url,
            &format!("    certificate-authority-data: {ca_data}\n"),
            "    client-certificate: client.crt\n    client-key: client.key\n",
        );
        let path = dir.write("config", &text);
        let client = Client::from_flags(&ConnectionFlags {
            kubeconfig: Some(path),
            ..Default::default()
        })
        .expect("client");
        let version: Value = client.get("/version").expect("mutual TLS request");
        assert_eq!(version["major"], "1");
        assert_eq!(server.next().header("authorization"), None);
    }
}
