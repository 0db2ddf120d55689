//! The API client: where to connect (flags, kubeconfig, in-cluster), TLS and bearer tokens,
//! one pooled HTTP/1.1 agent, typed `Status` errors, bounded retries, and watch streams split
//! into lines.
//!
//! Every request goes through [`Client::send`], the one place that authenticates, counts,
//! logs, turns a non-2xx answer into [`Error::Api`] and decides whether to try again.

use crate::error::{Error, Status};
use crate::kubeconfig::{self, Credentials, Pem};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use ureq::http::{self, header, Method};

/// Where the kubelet mounts the service account token, CA and namespace.
pub const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// A token read from a file is re-read when older than this (client-go uses one minute).
const TOKEN_MAX_AGE: Duration = Duration::from_secs(60);
/// Retries of a 429/5xx that carries a Retry-After.
const MAX_RETRIES: u32 = 3;
/// The longest Retry-After the client sleeps inside a call.
const MAX_RETRY_DELAY: Duration = Duration::from_secs(10);
/// The longest watch event accepted.
const MAX_WATCH_LINE: usize = 64 << 20;
/// Error bodies are read up to this size; the rest is dropped with the connection.
const MAX_ERROR_BODY: u64 = 1 << 20;
/// A 2xx body up to this size is kept aside to recognise a `Status` with `status: Failure`.
const STATUS_PEEK: usize = 64 << 10;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Beyond the server-side `timeoutSeconds`, how long a silent watch is kept before giving up.
const WATCH_GRACE: Duration = Duration::from_secs(30);

/// Where and how to connect; `ConnectionFlags` come from the command line / `WAVELET_*` env.
#[derive(Debug, Clone, Default)]
pub struct ConnectionFlags {
    pub server: Option<String>,
    pub kubeconfig: Option<PathBuf>,
    pub insecure_skip_tls_verify: bool,
}

/// The patch flavours the API server accepts, by `Content-Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// `application/strategic-merge-patch+json` (built-in kinds only).
    Strategic,
    /// `application/merge-patch+json` (RFC 7386; works for custom resources).
    Merge,
    /// `application/json-patch+json` (RFC 6902).
    Json,
}

impl PatchType {
    pub fn content_type(self) -> &'static str {
        match self {
            PatchType::Strategic => "application/strategic-merge-patch+json",
            PatchType::Merge => "application/merge-patch+json",
            PatchType::Json => "application/json-patch+json",
        }
    }
}

/// A connection to one API server. Cheap to clone; shared by all threads.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

struct Inner {
    agent: ureq::Agent,
    /// Scheme, host, port and optional path prefix; no trailing slash.
    base_url: String,
    token: TokenSource,
    namespace: Option<String>,
    counts: Mutex<BTreeMap<(&'static str, u16), u64>>,
    /// Injectable so retry tests do not sleep.
    sleep: Box<dyn Fn(Duration) + Send + Sync>,
}

/// Everything needed to build a [`Client`], gathered from flags, kubeconfig or the pod.
struct Setup {
    base_url: String,
    ca: Option<Pem>,
    client_certificate: Option<(Pem, Pem)>,
    insecure: bool,
    token: TokenSource,
    namespace: Option<String>,
    /// Says which setting provides a CA, for the "no CA" error.
    ca_hint: String,
}

impl Client {
    /// Precedence: `--server` > `--kubeconfig` > `$KUBECONFIG` (first path of a `:` list) >
    /// in-cluster (`KUBERNETES_SERVICE_HOST`/`PORT` and the service account files) >
    /// `~/.kube/config`.
    ///
    /// `--server http://...` (a `kubectl proxy`) never sends credentials. `--server https://...`
    /// takes the CA and credentials of `--kubeconfig` when that is given as well (as kubectl
    /// does), and otherwise needs `--insecure-skip-tls-verify`.
    pub fn from_flags(flags: &ConnectionFlags) -> Result<Client, Error> {
        Client::from_flags_with_env(flags, &|name| std::env::var_os(name))
    }

    fn from_flags_with_env(flags: &ConnectionFlags, env: &dyn Fn(&str) -> Option<OsString>) -> Result<Client, Error> {
        let non_empty = |name: &str| env(name).filter(|v| !v.is_empty());
        if let Some(server) = &flags.server {
            return Client::from_server_flag(server, flags);
        }
        if let Some(path) = &flags.kubeconfig {
            return Client::from_kubeconfig(path, flags.insecure_skip_tls_verify);
        }
        if let Some(list) = non_empty("KUBECONFIG") {
            let list = PathBuf::from(list);
            let first = std::env::split_paths(&list).find(|p| !p.as_os_str().is_empty());
            if let Some(path) = first {
                return Client::from_kubeconfig(&path, flags.insecure_skip_tls_verify);
            }
        }
        if let (Some(host), Some(port)) = (non_empty("KUBERNETES_SERVICE_HOST"), non_empty("KUBERNETES_SERVICE_PORT")) {
            return Client::in_cluster_from(
                Path::new(SERVICE_ACCOUNT_DIR),
                &host.to_string_lossy(),
                &port.to_string_lossy(),
                flags.insecure_skip_tls_verify,
            );
        }
        let home = non_empty("HOME").map(PathBuf::from);
        if let Some(path) = home.as_ref().map(|home| home.join(".kube").join("config")) {
            if path.exists() {
                return Client::from_kubeconfig(&path, flags.insecure_skip_tls_verify);
            }
        }
        Err(Error::Config(format!(
            "no API server configured: not in a cluster (KUBERNETES_SERVICE_HOST is unset) and {} does not exist; \
             pass --server URL (e.g. http://127.0.0.1:8001 with `kubectl proxy`) or --kubeconfig PATH",
            home.map(|h| h.join(".kube/config").display().to_string()).unwrap_or_else(|| "~/.kube/config".into())
        )))
    }

    fn from_server_flag(server: &str, flags: &ConnectionFlags) -> Result<Client, Error> {
        let server = server.trim_end_matches('/');
        check_url(server, "--server")?;
        if server.starts_with("http://") {
            if flags.kubeconfig.is_some() {
                log::debug!("--server {server} is plain HTTP (a kubectl proxy); --kubeconfig is not used");
            }
            return Client::build(Setup {
                base_url: server.to_string(),
                ca: None,
                client_certificate: None,
                insecure: false,
                token: TokenSource::None,
                namespace: None,
                ca_hint: String::new(),
            });
        }
        let mut setup = match &flags.kubeconfig {
            Some(path) => Client::kubeconfig_setup(&kubeconfig::load(path)?, flags.insecure_skip_tls_verify)?,
            None => Setup {
                base_url: String::new(),
                ca: None,
                client_certificate: None,
                insecure: flags.insecure_skip_tls_verify,
                token: TokenSource::None,
                namespace: None,
                ca_hint: "--server https://... has no certificate authority: pass --kubeconfig with the cluster's CA, \
                          use --server http://127.0.0.1:8001 with `kubectl proxy`, or (for testing only) \
                          --insecure-skip-tls-verify"
                    .into(),
            },
        };
        setup.base_url = server.to_string();
        setup.namespace = None;
        Client::build(setup)
    }

    fn from_kubeconfig(path: &Path, insecure_flag: bool) -> Result<Client, Error> {
        let config = kubeconfig::load(path)?;
        Client::build(Client::kubeconfig_setup(&config, insecure_flag)?)
    }

    fn kubeconfig_setup(config: &kubeconfig::Kubeconfig, insecure_flag: bool) -> Result<Setup, Error> {
        let server = config.server.trim_end_matches('/').to_string();
        check_url(&server, &format!("kubeconfig {} server", config.path.display()))?;
        let plain_http = server.starts_with("http://");
        let token = match &config.credentials {
            _ if plain_http => {
                if config.credentials != Credentials::None {
                    log::warn!(
                        "kubeconfig {}: server {server} is plain HTTP; wavelet sends no credentials over it",
                        config.path.display()
                    );
                }
                TokenSource::None
            }
            Credentials::None => TokenSource::None,
            Credentials::Token(token) => {
                check_token(token).map_err(|why| {
                    Error::Config(format!("kubeconfig {}: the user's token {why}", config.path.display()))
                })?;
                TokenSource::Static(token.clone())
            }
            Credentials::TokenFile(path) => TokenSource::file(
                path.clone(),
                format!(
                    "tokenFile of kubeconfig {}; fix the path there, or pass a different --kubeconfig",
                    config.path.display()
                ),
            )?,
        };
        let insecure = insecure_flag || config.insecure_skip_tls_verify;
        Ok(Setup {
            base_url: server,
            ca: if insecure { None } else { config.ca.clone() },
            client_certificate: if plain_http { None } else { config.client_certificate.clone() },
            insecure,
            token,
            namespace: config.namespace.clone(),
            ca_hint: format!(
                "kubeconfig {} cluster of context `{}` has no certificate authority: set certificate-authority or \
                 certificate-authority-data there, or (for testing only) pass --insecure-skip-tls-verify",
                config.path.display(),
                config.context
            ),
        })
    }

    /// In-cluster configuration from the service account files in `dir` (normally
    /// [`SERVICE_ACCOUNT_DIR`]) and the API server address `host`:`port`.
    pub fn in_cluster_from(dir: &Path, host: &str, port: &str, insecure: bool) -> Result<Client, Error> {
        if host.is_empty() || port.is_empty() {
            return Err(Error::Config(
                "KUBERNETES_SERVICE_HOST or KUBERNETES_SERVICE_PORT is empty: not running in a cluster; \
                 pass --server or --kubeconfig"
                    .into(),
            ));
        }
        let host = if host.contains(':') && !host.starts_with('[') { format!("[{host}]") } else { host.to_string() };
        let base_url = format!("https://{host}:{port}");
        check_url(&base_url, "KUBERNETES_SERVICE_HOST/KUBERNETES_SERVICE_PORT")?;
        let token = TokenSource::file(
            dir.join("token"),
            "is automountServiceAccountToken false? use --server with a kubectl proxy sidecar, or --kubeconfig".into(),
        )?;
        let ca_path = dir.join("ca.crt");
        let ca = if insecure {
            None
        } else {
            let bytes = std::fs::read(&ca_path).map_err(|e| {
                Error::Config(format!(
                    "cannot read service account CA {}: {e} (is the service account volume mounted? use --server \
                     with a kubectl proxy sidecar, or --kubeconfig)",
                    ca_path.display()
                ))
            })?;
            Some(Pem { bytes, origin: ca_path.display().to_string() })
        };
        let namespace_path = dir.join("namespace");
        let namespace = match std::fs::read_to_string(&namespace_path) {
            Ok(ns) if !ns.trim().is_empty() => Some(ns.trim().to_string()),
            Ok(_) => None,
            Err(e) => {
                log::debug!("no in-cluster namespace: cannot read {}: {e}", namespace_path.display());
                None
            }
        };
        Client::build(Setup {
            base_url,
            ca,
            client_certificate: None,
            insecure,
            token,
            namespace,
            ca_hint: format!("the service account CA {} is missing", ca_path.display()),
        })
    }

    fn build(setup: Setup) -> Result<Client, Error> {
        let mut config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .user_agent(format!("wavelet/{}", env!("CARGO_PKG_VERSION")))
            .accept("application/json")
            // The API server does not redirect; never follow one with credentials.
            .max_redirects(0)
            .max_idle_connections_per_host(8)
            .timeout_resolve(Some(CONNECT_TIMEOUT))
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
        if is_loopback_url(&setup.base_url) {
            // Like Go's ProxyFromEnvironment: a local kubectl proxy is never reached through HTTP(S)_PROXY.
            config = config.proxy(None);
        }
        Ok(Client {
            inner: Arc::new(Inner {
                agent: ureq::Agent::new_with_config(config.build()),
                base_url: setup.base_url,
                token: setup.token,
                namespace: setup.namespace,
                counts: Mutex::new(BTreeMap::new()),
                sleep: Box::new(std::thread::sleep),
            }),
        })
    }

    pub fn base_url(&self) -> &str {
        &self.inner.base_url
    }

    /// The namespace wavelet runs in: the in-cluster namespace file, or the kubeconfig
    /// context's namespace; `None` with `--server`.
    pub fn default_namespace(&self) -> Option<String> {
        self.inner.namespace.clone()
    }

    /// GET and decode the body as it streams in (lists can be many MB).
    pub fn get<T: DeserializeOwned>(&self, path_and_query: &str) -> Result<T, Error> {
        let response = self.send(get_verb(path_and_query), Method::GET, path_and_query, None, None)?;
        decode(response, "GET", path_and_query)
    }

    pub fn post<T: DeserializeOwned>(&self, path: &str, body: &serde_json::Value) -> Result<T, Error> {
        let body = encode(body)?;
        let response = self.send("create", Method::POST, path, Some(("application/json", &body)), None)?;
        decode(response, "POST", path)
    }

    pub fn put<T: DeserializeOwned>(&self, path: &str, body: &serde_json::Value) -> Result<T, Error> {
        let body = encode(body)?;
        let response = self.send("update", Method::PUT, path, Some(("application/json", &body)), None)?;
        decode(response, "PUT", path)
    }

    pub fn patch<T: DeserializeOwned>(
        &self,
        path_and_query: &str,
        patch: PatchType,
        body: &serde_json::Value,
    ) -> Result<T, Error> {
        let body = encode(body)?;
        let response = self.send("patch", Method::PATCH, path_and_query, Some((patch.content_type(), &body)), None)?;
        decode(response, "PATCH", path_and_query)
    }

    pub fn delete<T: DeserializeOwned>(&self, path_and_query: &str, body: Option<&serde_json::Value>) -> Result<T, Error> {
        let body = body.map(encode).transpose()?;
        let body = body.as_deref().map(|b| ("application/json", b));
        let response = self.send("delete", Method::DELETE, path_and_query, body, None)?;
        decode(response, "DELETE", path_and_query)
    }

    /// Opens a watch; `path_and_query` already holds `watch=true` and the rest. `timeout` is
    /// the server-side `timeoutSeconds` asked for: a stream silent for `timeout + 30s` is cut
    /// (a [`Error::Transport`] from [`WatchStream::next_line`]), so a dead connection never
    /// hangs a watch thread. Errors are not retried here: the watch loop backs off.
    pub fn watch(&self, path_and_query: &str, timeout: Duration) -> Result<WatchStream, Error> {
        let body_limit = timeout.saturating_add(WATCH_GRACE);
        let response = self.send("watch", Method::GET, path_and_query, None, Some(body_limit))?;
        Ok(WatchStream::new(Box::new(response.into_body().into_reader()), path_and_query))
    }

    /// Requests sent so far by (verb, HTTP code); code 0 counts transport errors.
    pub fn request_counts(&self) -> Vec<((&'static str, u16), u64)> {
        lock(&self.inner.counts).iter().map(|(key, count)| (*key, *count)).collect()
    }

    /// The main request loop: authenticate, send, count, log, turn a non-2xx answer into
    /// [`Error::Api`]; re-read a token file once after a 401; retry a 429/5xx that carries a
    /// Retry-After up to [`MAX_RETRIES`] times (not for watches, which have their own loop).
    fn send(
        &self,
        verb: &'static str,
        method: Method,
        path_and_query: &str,
        body: Option<(&'static str, &[u8])>,
        watch_body_timeout: Option<Duration>,
    ) -> Result<http::Response<ureq::Body>, Error> {
        let inner = &self.inner;
        if !path_and_query.starts_with('/') {
            return Err(Error::Config(format!("request path `{path_and_query}` must start with `/`")));
        }
        let url = format!("{}{}", inner.base_url, path_and_query);
        let log_path = path_and_query.split('?').next().unwrap_or(path_and_query);
        let mut retries = 0;
        let mut reread_token = false;
        loop {
            let token = inner.token.bearer(Instant::now())?;
            let started = Instant::now();
            let result = self.run_once(&method, &url, token.as_deref(), body, watch_body_timeout);
            let response = match result {
                Ok(response) => response,
                Err(error) => {
                    self.count(verb, 0);
                    log::debug!("{verb} {method} {log_path} -> transport error after {:?}", started.elapsed());
                    return Err(error);
                }
            };
            let code = response.status().as_u16();
            self.count(verb, code);
            log::debug!("{verb} {method} {log_path} -> {code} in {:?}", started.elapsed());
            if (200..300).contains(&code) {
                return Ok(response);
            }
            let status = status_from_response(response, &method);
            if code == 401 && inner.token.is_file() {
                inner.token.invalidate();
                if !reread_token {
                    reread_token = true;
                    log::debug!("401 Unauthorized: re-reading the token file and retrying once");
                    continue;
                }
            }
            if watch_body_timeout.is_none() && (code == 429 || code >= 500) && retries < MAX_RETRIES {
                if let Some(delay) = status.retry_after {
                    retries += 1;
                    let delay = delay.min(MAX_RETRY_DELAY);
                    log::debug!("{code} with Retry-After: retry {retries}/{MAX_RETRIES} in {delay:?}");
                    (inner.sleep)(delay);
                    continue;
                }
            }
            return Err(Error::Api(status));
        }
    }

    fn run_once(
        &self,
        method: &Method,
        url: &str,
        token: Option<&str>,
        body: Option<(&'static str, &[u8])>,
        watch_body_timeout: Option<Duration>,
    ) -> Result<http::Response<ureq::Body>, Error> {
        let agent = &self.inner.agent;
        let mut builder = http::Request::builder().method(method.clone()).uri(url);
        if let Some(token) = token {
            builder = builder.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let invalid = |e: http::Error| Error::Config(format!("cannot build request {method} {}: {e}", strip_query(url)));
        let result = match body {
            Some((content_type, bytes)) => {
                let request = builder.header(header::CONTENT_TYPE, content_type).body(bytes).map_err(invalid)?;
                agent.run(request)
            }
            None => {
                let request = builder.body(()).map_err(invalid)?;
                match watch_body_timeout {
                    Some(limit) => {
                        let request = agent
                            .configure_request(request)
                            .timeout_recv_response(Some(Duration::from_secs(60)))
                            .timeout_recv_body(Some(limit))
                            .build();
                        agent.run(request)
                    }
                    None => agent.run(request),
                }
            }
        };
        result.map_err(|e| transport_error(method, url, e))
    }

    fn count(&self, verb: &'static str, code: u16) {
        *lock(&self.inner.counts).entry((verb, code)).or_insert(0) += 1;
    }

    #[cfg(test)]
    fn with_sleep(mut self, sleep: impl Fn(Duration) + Send + Sync + 'static) -> Client {
        match Arc::get_mut(&mut self.inner) {
            Some(inner) => inner.sleep = Box::new(sleep),
            None => panic!("with_sleep on a shared client"),
        }
        self
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
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
    let uri: http::Uri = url.parse().map_err(|e| Error::Config(format!("{what} `{url}` is not a valid URL: {e}")))?;
    if uri.host().is_none_or(str::is_empty) {
        return Err(Error::Config(format!("{what} `{url}` has no host")));
    }
    if uri.query().is_some() {
        return Err(Error::Config(format!("{what} `{url}` must not contain a query")));
    }
    Ok(())
}

fn is_loopback_url(url: &str) -> bool {
    let Ok(uri) = url.parse::<http::Uri>() else { return false };
    let host = uri.host().unwrap_or("").trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost") || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

fn transport_error(method: &Method, url: &str, error: ureq::Error) -> Error {
    let hint = match &error {
        ureq::Error::Rustls(_) | ureq::Error::Tls(_) => {
            " (TLS: check the certificate authority: certificate-authority(-data) in the kubeconfig, or the \
             service account ca.crt)"
        }
        ureq::Error::Timeout(_) => " (timed out)",
        _ => "",
    };
    Error::Transport(format!("{method} {}: {error}{hint}", strip_query(url)))
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
    let rest = if rest.first() == Some(&"namespaces") && rest.len() >= 3 { &rest[2..] } else { rest };
    if rest.len() == 1 {
        "list"
    } else {
        "get"
    }
}

// ---------------------------------------------------------------------------------------------
// Bearer tokens

/// Where the bearer token comes from.
enum TokenSource {
    None,
    Static(String),
    /// Re-read by path when older than [`TOKEN_MAX_AGE`] and after a 401 (bound service
    /// account tokens rotate; the kubelet swaps a symlink, so the path is opened every time).
    File {
        path: PathBuf,
        /// Appended to "cannot read token file" errors: what the user should check.
        hint: String,
        cached: Mutex<CachedToken>,
    },
}

/// The last token read from a file; `read_at: None` means "re-read before the next use".
struct CachedToken {
    token: String,
    read_at: Option<Instant>,
}

impl TokenSource {
    /// Reads the file once now, so a missing token is an error at start.
    fn file(path: PathBuf, hint: String) -> Result<TokenSource, Error> {
        let token = read_token_file(&path, &hint)?;
        let cached = Mutex::new(CachedToken { token, read_at: Some(Instant::now()) });
        Ok(TokenSource::File { path, hint, cached })
    }

    fn is_file(&self) -> bool {
        matches!(self, TokenSource::File { .. })
    }

    /// The token to send at `now`, re-reading the file when the cached copy is stale. When the
    /// file cannot be read any more, the last token is used (and a warning logged), as client-go does.
    fn bearer(&self, now: Instant) -> Result<Option<String>, Error> {
        match self {
            TokenSource::None => Ok(None),
            TokenSource::Static(token) => Ok(Some(token.clone())),
            TokenSource::File { path, hint, cached } => {
                let mut cached = lock(cached);
                let fresh = cached.read_at.is_some_and(|at| now.saturating_duration_since(at) < TOKEN_MAX_AGE);
                if !fresh {
                    match read_token_file(path, hint) {
                        Ok(token) => cached.token = token,
                        Err(error) => log::warn!("{error}; using the token read before"),
                    }
                    cached.read_at = Some(now);
                }
                Ok(Some(cached.token.clone()))
            }
        }
    }

    /// Marks the cached token stale so the next request re-reads the file (after a 401).
    fn invalidate(&self) {
        if let TokenSource::File { cached, .. } = self {
            lock(cached).read_at = None;
        }
    }
}

fn read_token_file(path: &Path, hint: &str) -> Result<String, Error> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::Config(format!("cannot read service account token {}: {e} ({hint})", path.display())))?;
    let token = text.trim();
    check_token(token).map_err(|why| Error::Config(format!("token file {} {why} ({hint})", path.display())))?;
    Ok(token.to_string())
}

/// A bearer token must be non-empty visible ASCII to go into a header.
fn check_token(token: &str) -> Result<(), &'static str> {
    if token.is_empty() {
        return Err("is empty");
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err("contains characters that cannot be sent in an HTTP header");
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// TLS

/// The rustls configuration for an `https` server: the CA roots (required unless `insecure`),
/// and the client certificate when there is one. PEM problems are reported here, at start,
/// naming the file or kubeconfig field, rather than as a failed handshake later.
fn tls_config(
    ca: Option<&Pem>,
    client_certificate: Option<&(Pem, Pem)>,
    insecure: bool,
    ca_hint: &str,
) -> Result<ureq::tls::TlsConfig, Error> {
    let mut builder = ureq::tls::TlsConfig::builder();
    if insecure {
        log::warn!("TLS certificate verification is disabled (insecure-skip-tls-verify): use this only for testing");
        builder = builder.disable_verification(true);
    } else {
        let ca = ca.ok_or_else(|| Error::Config(ca_hint.to_string()))?;
        let roots = parse_ca(ca)?;
        let roots: Vec<_> = roots.iter().map(|der| ureq::tls::Certificate::from_der(der.as_ref()).to_owned()).collect();
        builder = builder.root_certs(ureq::tls::RootCerts::new_with_certs(&roots));
    }
    if let Some((cert, key)) = client_certificate {
        builder = builder.client_cert(Some(parse_client_certificate(cert, key)?));
    }
    Ok(builder.build())
}

fn parse_ca(ca: &Pem) -> Result<Vec<CertificateDer<'static>>, Error> {
    let mut certs = Vec::new();
    for item in CertificateDer::pem_slice_iter(&ca.bytes) {
        certs.push(item.map_err(|e| Error::Config(format!("certificate authority {}: invalid PEM ({e})", ca.origin)))?);
    }
    if certs.is_empty() {
        return Err(Error::Config(format!(
            "certificate authority {} holds no PEM certificate (expected -----BEGIN CERTIFICATE-----)",
            ca.origin
        )));
    }
    let mut store = rustls::RootCertStore::empty();
    for (index, cert) in certs.iter().enumerate() {
        store.add(cert.clone()).map_err(|e| {
            Error::Config(format!(
                "certificate authority {}: certificate {} cannot be used as a trust root ({e})",
                ca.origin,
                index + 1
            ))
        })?;
    }
    Ok(certs)
}

fn parse_client_certificate(cert: &Pem, key: &Pem) -> Result<ureq::tls::ClientCert, Error> {
    let mut chain = Vec::new();
    for item in CertificateDer::pem_slice_iter(&cert.bytes) {
        chain.push(item.map_err(|e| Error::Config(format!("client certificate {}: invalid PEM ({e})", cert.origin)))?);
    }
    if chain.is_empty() {
        return Err(Error::Config(format!(
            "client certificate {} holds no PEM certificate (expected -----BEGIN CERTIFICATE-----)",
            cert.origin
        )));
    }
    let private_key = PrivateKeyDer::from_pem_slice(&key.bytes).map_err(|e| {
        Error::Config(format!(
            "client key {}: no usable PEM private key (expected -----BEGIN PRIVATE KEY-----, \
             -----BEGIN RSA PRIVATE KEY----- or -----BEGIN EC PRIVATE KEY-----; {e})",
            key.origin
        ))
    })?;
    // Let rustls check the key type and that the key belongs to the certificate, so a bad
    // pair is reported now (ureq would only fail later, at the first handshake).
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .and_then(|b| b.with_root_certificates(rustls::RootCertStore::empty()).with_client_auth_cert(chain.clone(), private_key.clone_key()))
        .map_err(|e| {
            Error::Config(format!(
                "client certificate {} and key {} cannot be used together: {e}",
                cert.origin, key.origin
            ))
        })?;
    let chain: Vec<_> = chain.iter().map(|der| ureq::tls::Certificate::from_der(der.as_ref()).to_owned()).collect();
    // The same PEM rustls just accepted; ureq keeps its own copy with the key kind.
    let private_key = ureq::tls::PrivateKey::from_pem(&key.bytes)
        .map_err(|e| Error::Config(format!("client key {}: {e}", key.origin)))?;
    Ok(ureq::tls::ClientCert::new_with_certs(&chain, private_key))
}

// ---------------------------------------------------------------------------------------------
// Status errors

/// The parts of a `metav1.Status` body that wavelet uses.
#[derive(Deserialize)]
struct StatusBody {
    kind: Option<String>,
    status: Option<String>,
    message: Option<String>,
    reason: Option<String>,
    code: Option<u16>,
    details: Option<StatusDetails>,
}

#[derive(Deserialize)]
struct StatusDetails {
    #[serde(rename = "retryAfterSeconds")]
    retry_after_seconds: Option<u64>,
}

/// Reads (a bounded part of) a non-2xx response and turns it into a [`Status`].
fn status_from_response(response: http::Response<ureq::Body>, method: &Method) -> Status {
    let code = response.status().as_u16();
    let retry_after = response
        .headers()
        .get(header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs);
    let mut body = Vec::new();
    if let Err(e) = response.into_body().into_reader().take(MAX_ERROR_BODY).read_to_end(&mut body) {
        log::debug!("reading the body of a {code} response failed: {e}");
    }
    status_from_body(code, &body, retry_after, method.as_str())
}

/// The `Status` of a non-2xx answer: from a Status JSON body when there is one, otherwise
/// synthesized from the HTTP code as client-go does (`NewGenericServerResponse`), with the
/// start of a plain-text body (an APF 429, a kubectl proxy 403) as the message.
fn status_from_body(code: u16, body: &[u8], retry_after_header: Option<Duration>, method: &str) -> Status {
    if let Ok(parsed) = serde_json::from_slice::<StatusBody>(body) {
        if parsed.kind.as_deref() == Some("Status") {
            return Status {
                code,
                reason: parsed.reason.unwrap_or_default(),
                message: parsed.message.unwrap_or_default(),
                retry_after: retry_after_header.or_else(|| details_retry_after(&parsed.details)),
            };
        }
    }
    let (reason, default_message) = match code {
        400 => ("BadRequest", "the server rejected our request for an unknown reason"),
        401 => ("Unauthorized", "the server has asked for the client to provide credentials"),
        403 => ("Forbidden", "the server does not allow access to the requested resource"),
        404 => ("NotFound", "the server could not find the requested resource"),
        405 => ("MethodNotAllowed", "the server does not allow this method on the requested resource"),
        406 => ("NotAcceptable", "the server was unable to respond with a content type that the client supports"),
        409 if method == "POST" => ("AlreadyExists", "the server reported a conflict"),
        409 => ("Conflict", "the server reported a conflict"),
        410 => ("Gone", "the requested resource is no longer available"),
        413 => ("RequestEntityTooLarge", "the request is too large"),
        415 => ("UnsupportedMediaType", "the server does not support the content type of the request"),
        422 => ("Invalid", "the server rejected our request due to an error in our request"),
        429 => ("TooManyRequests", "the server has received too many requests and has asked us to try again later"),
        503 => ("ServiceUnavailable", "the server is currently unable to handle the request"),
        504 => ("Timeout", "the server was unable to return a response in the time allotted"),
        c if c >= 500 => ("InternalError", "an error on the server has prevented the request from succeeding"),
        _ => ("", "unexpected response from the server"),
    };
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    let message = if text.is_empty() { default_message.to_string() } else { truncate_chars(text, 200) };
    Status { code, reason: reason.to_string(), message, retry_after: retry_after_header }
}

fn details_retry_after(details: &Option<StatusDetails>) -> Option<Duration> {
    details.as_ref().and_then(|d| d.retry_after_seconds).filter(|&s| s > 0).map(Duration::from_secs)
}

fn truncate_chars(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((end, _)) => format!("{}...", &text[..end]),
        None => text.to_string(),
    }
}

/// A 2xx body that is a `Status` with `status: "Failure"` (an eviction blocked by two PDBs)
/// is an error too, as in client-go's `Result.Get`.
fn failure_status(body: &[u8], http_code: u16) -> Option<Status> {
    let parsed: StatusBody = serde_json::from_slice(body).ok()?;
    if parsed.kind.as_deref() != Some("Status") || parsed.status.as_deref() != Some("Failure") {
        return None;
    }
    let code = parsed.code.filter(|&c| c >= 400).unwrap_or(if http_code >= 400 { http_code } else { 500 });
    Some(Status {
        code,
        reason: parsed.reason.unwrap_or_default(),
        message: parsed.message.unwrap_or_default(),
        retry_after: details_retry_after(&parsed.details),
    })
}

/// Decodes a 2xx body as it streams in, keeping its first [`STATUS_PEEK`] bytes aside to
/// recognise a Failure `Status` (such bodies are small; a large body never is one).
fn decode<T: DeserializeOwned>(response: http::Response<ureq::Body>, method: &str, path: &str) -> Result<T, Error> {
    let code = response.status().as_u16();
    let mut peek = Peek { inner: response.into_body().into_reader(), kept: Vec::new(), total: 0, eof: false };
    let result = serde_json::from_reader::<_, T>(BufReader::with_capacity(64 << 10, &mut peek));
    if !peek.eof && peek.total <= STATUS_PEEK {
        // Decoding stopped early (e.g. a Status where an object was expected): read the rest of
        // a small body so it can be recognised.
        let _ = io::copy(&mut (&mut peek).take((STATUS_PEEK + 1) as u64), &mut io::sink());
    }
    if peek.eof && peek.total <= STATUS_PEEK {
        if let Some(status) = failure_status(&peek.kept, code) {
            return Err(Error::Api(status));
        }
    }
    result.map_err(|e| {
        let path = path.split('?').next().unwrap_or(path);
        if e.is_io() {
            Error::Transport(format!("{method} {path}: reading the response failed: {e}"))
        } else {
            Error::Decode(format!("{method} {path}: unexpected response body: {e}"))
        }
    })
}

/// Passes bytes through, keeping the first [`STATUS_PEEK`] of them.
struct Peek<R> {
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

// ---------------------------------------------------------------------------------------------
// Watch streams

/// The body of a watch: one JSON event per `\n`-terminated line.
pub struct WatchStream {
    reader: Box<dyn Read + Send>,
    buf: Vec<u8>,
    /// Start of the unconsumed bytes in `buf`.
    start: usize,
    /// `buf[start..scanned]` is known to hold no `\n`.
    scanned: usize,
    eof: bool,
    max_line: usize,
    /// The watched path (no query), for messages.
    what: String,
}

impl WatchStream {
    fn new(reader: Box<dyn Read + Send>, path_and_query: &str) -> WatchStream {
        WatchStream {
            reader,
            buf: Vec::new(),
            start: 0,
            scanned: 0,
            eof: false,
            max_line: MAX_WATCH_LINE,
            what: format!("watch {}", path_and_query.split('?').next().unwrap_or(path_and_query)),
        }
    }

    /// The next newline-terminated line, without the `\n`; `Ok(None)` at a clean end of the
    /// stream. Lines are split on `\n` only, never on chunk or read boundaries; blank lines
    /// are skipped. A broken connection, or a stream that ends in the middle of a line, is
    /// [`Error::Transport`]; a line longer than 64 MiB is [`Error::Decode`].
    pub fn next_line(&mut self) -> Result<Option<Vec<u8>>, Error> {
        loop {
            if let Some(offset) = self.buf[self.scanned..].iter().position(|&b| b == b'\n') {
                let end = self.scanned + offset;
                let line = &self.buf[self.start..end];
                let blank = line.iter().all(|b| b.is_ascii_whitespace());
                let line = if blank { None } else { Some(line.to_vec()) };
                self.start = end + 1;
                self.scanned = self.start;
                if let Some(line) = line {
                    return Ok(Some(line));
                }
                continue;
            }
            self.scanned = self.buf.len();
            let pending = self.buf.len() - self.start;
            if self.eof {
                let partial = self.buf[self.start..].iter().any(|b| !b.is_ascii_whitespace());
                self.buf.clear();
                self.start = 0;
                self.scanned = 0;
                if partial {
                    return Err(Error::Transport(format!(
                        "{}: the stream ended in the middle of an event ({pending} bytes without a newline)",
                        self.what
                    )));
                }
                return Ok(None);
            }
            if pending > self.max_line {
                return Err(Error::Decode(format!(
                    "{}: an event is longer than {} MiB; giving up on this stream",
                    self.what,
                    self.max_line >> 20
                )));
            }
            self.fill()?;
        }
    }

    /// Reads more bytes, first dropping the consumed ones (and excess capacity after a huge event).
    fn fill(&mut self) -> Result<(), Error> {
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.scanned -= self.start;
            self.start = 0;
        }
        if self.buf.capacity() > (4 << 20) && self.buf.len() < (64 << 10) {
            self.buf.shrink_to(256 << 10);
        }
        let old_len = self.buf.len();
        self.buf.resize(old_len + (64 << 10), 0);
        let result = loop {
            match self.reader.read(&mut self.buf[old_len..]) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                other => break other,
            }
        };
        match result {
            Ok(n) => {
                self.buf.truncate(old_len + n);
                if n == 0 {
                    self.eof = true;
                }
                Ok(())
            }
            Err(e) => {
                self.buf.truncate(old_len);
                Err(Error::Transport(format!("{}: connection broken: {e}", self.what)))
            }
        }
    }
}

