//! The API client: one pooled HTTP/1.1 agent and its verbs. Where to connect is
//! `connect.rs`; bearer tokens `token.rs` (and exec plugins `exec.rs`); TLS `tls.rs`; typed
//! `Status` errors and body decoding `status.rs`; watch streams `stream.rs`; name lookups
//! `resolve.rs`.
//!
//! Every request goes through `Client::send` (`send.rs`), the one place that waits for the
//! client-side budget (`budget.rs`), authenticates, counts, logs and turns a non-2xx answer
//! into [`Error::Api`]; it makes one attempt, and the callers' work queue decides whether
//! and when to try again.

mod budget;
mod connect;
pub(crate) mod exec;
mod gzip;
pub mod kubeconfig;
pub(crate) mod list_body;
mod resolve;
mod send;
mod status;
mod stream;
#[cfg(test)]
mod test_support;
mod tls;
mod token;
pub mod yaml;

use crate::error::{Error, Status};
pub use budget::{current_priority, with_priority, Limits, Priority};
use gzip::Body;
use kubeconfig::{Credentials, Pem};
use list_body::SplitError;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use send::Request;
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
    /// Whether requests wait for the shared budget (`false`: [`Client::without_budget`]).
    budgeted: bool,
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
    /// The client-side request budget of every clone of this client.
    budget: budget::Budget,
}

/// Everything needed to build a [`Client`], gathered from flags, kubeconfig or the pod.
/// A ureq agent with `config` that looks names up as the API client does (in the calling
/// thread, remembered a few seconds: `resolve.rs`), for other HTTP clients of the process
/// (alerts on rollout).
pub(crate) fn agent(config: ureq::config::Config) -> ureq::Agent {
    ureq::Agent::with_parts(
        config,
        ureq::unversioned::transport::DefaultConnector::new(),
        resolve::CachingResolver::default(),
    )
}

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
            .accept_encoding(gzip::ACCEPTED)
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
                Error::Config(format!(
                    "kubeconfig proxy-url `{}` is not usable: {e}",
                    crate::error::shown_url(proxy)
                ))
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
                budget: budget::Budget::default(),
            }),
            bound: None,
            budgeted: true,
        })
    }

    /// The same connection, with every request cut after `bound` in all (a transport
    /// error that says it timed out): for requests whose answer is worthless once late,
    /// such as a Lease renewal after the renew deadline.
    pub fn bounded(&self, bound: Duration) -> Client {
        Client {
            bound: Some(bound),
            ..self.clone()
        }
    }

    pub fn base_url(&self) -> &str {
        &self.inner.base_url
    }

    /// The namespace wavelet runs in: the in-cluster namespace file, or the kubeconfig
    /// context's namespace; with `--server`, the Pod's namespace file when wavelet runs in a
    /// Pod (`KUBERNETES_SERVICE_HOST`/`PORT` set), else `None`.
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
        let body = Body::of(response).map_err(|e| {
            Error::Transport(format!(
                "watch {path_and_query}: reading the response failed: {e}"
            ))
        })?;
        Ok(WatchStream::new(Box::new(body), path_and_query))
    }

    /// Limits the requests of this client and all its clones to `limits` (`wavelet run`'s
    /// `--api-qps`/`--api-burst`); without it the budget is unlimited, and only a 429's
    /// pause holds requests back.
    pub fn limit(&self, limits: Limits) {
        self.inner.budget.limit(limits);
    }

    /// The same connection, whose requests do not wait for the shared budget (nor for a
    /// 429's pause): for leader election, whose few requests must not lose the Lease while
    /// writes wait (see `budget.rs`).
    pub fn without_budget(&self) -> Client {
        Client {
            budgeted: false,
            ..self.clone()
        }
    }

    /// Ends every wait for the budget, now and later: at shutdown, the reconciles still
    /// running send their last request at once.
    pub fn stop_waiting(&self) {
        self.inner.budget.close();
    }

    /// How long requests have waited for the budget (and 429 pauses), all together.
    pub fn budget_waited(&self) -> Duration {
        self.inner.budget.waited()
    }

    /// Requests sent so far by (verb, HTTP code); code 0 counts transport errors.
    pub fn request_counts(&self) -> Vec<((&'static str, u16), u64)> {
        lock(&self.inner.counts)
            .iter()
            .map(|(key, count)| (*key, *count))
            .collect()
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

    use super::*;

    #[test]
    fn clients_and_watch_streams_can_move_between_threads() {
        fn send_sync<T: Send + Sync>() {}
        fn send<T: Send>() {}
        send_sync::<Client>();
        send::<WatchStream>();
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
}
