//! The server loop: the accept thread, one thread per keep-alive connection, and the path
//! every request takes (record → auth → faults → route → handler → response).

use std::collections::HashMap;
use std::io::BufReader;
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::api;
use super::http::{read_request, write_response, Request, Response};
use super::list::ListOptions;
use super::resources::route;
use super::state::State;
use super::status::{self, Status};
use super::tls::Conn;
use super::watch;

/// How long a LIST waits for a resourceVersion the store has not reached (3 s on a real
/// server; shorter here to keep tests fast).
const TOO_LARGE_RV_WAIT: Duration = Duration::from_secs(1);
/// How often time-driven controller work runs.
const TICK: Duration = Duration::from_millis(5);

/// What every thread of one fake server shares.
#[derive(Debug)]
pub struct Shared {
    state: Mutex<State>,
    changed: Condvar,
    connections: Mutex<HashMap<u64, TcpStream>>,
    next_connection: AtomicU64,
}

impl Shared {
    pub fn new() -> Shared {
        Shared {
            state: Mutex::new(State::new()),
            changed: Condvar::new(),
            connections: Mutex::new(HashMap::new()),
            next_connection: AtomicU64::new(1),
        }
    }

    /// The state; a panic in another thread does not make it unusable.
    pub fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits for a change (or the timeout) with the lock released meanwhile.
    pub fn wait<'a>(
        &self,
        guard: MutexGuard<'a, State>,
        timeout: Duration,
    ) -> MutexGuard<'a, State> {
        match self.changed.wait_timeout(guard, timeout) {
            Ok((guard, _)) => guard,
            Err(e) => e.into_inner().0,
        }
    }

    /// Wakes every waiting watch.
    pub fn notify(&self) {
        self.changed.notify_all();
    }

    /// Ends every connection (when the server stops, and on a simulated restart).
    pub fn close_connections(&self) {
        for (_, stream) in self
            .connections
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain()
        {
            let _ = stream.shutdown(std::net::Shutdown::Both);
        }
    }
}

/// The accept loop: one thread per connection, until the server is shut down.
pub fn accept_loop(
    shared: Arc<Shared>,
    listener: TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
) {
    for stream in listener.incoming() {
        if shared.lock().shutdown {
            break;
        }
        let Ok(stream) = stream else {
            continue;
        };
        let shared = Arc::clone(&shared);
        let tls = tls.clone();
        thread::spawn(move || serve_connection(&shared, stream, tls.as_ref()));
    }
}

/// The controllers' clock: time-driven work (Ready pods, namespace removal).
pub fn tick_loop(shared: Arc<Shared>) {
    loop {
        thread::sleep(TICK);
        let mut state = shared.lock();
        if state.shutdown {
            break;
        }
        let before = state.store.current_rv();
        state.tick(Instant::now());
        let changed = state.store.current_rv() != before;
        drop(state);
        if changed {
            shared.notify();
        }
    }
}

fn serve_connection(shared: &Shared, stream: TcpStream, tls: Option<&Arc<rustls::ServerConfig>>) {
    let id = shared.next_connection.fetch_add(1, Ordering::Relaxed);
    if let Ok(tracked) = stream.try_clone() {
        shared
            .connections
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, tracked);
    }
    let _ = stream.set_nodelay(true);
    // One object reads requests and writes answers: a TLS session cannot be split.
    let Ok(conn) = Conn::new(stream, tls) else {
        return;
    };
    let mut reader = BufReader::new(conn);
    while let Ok(Some(request)) = read_request(&mut reader) {
        let close = request.wants_close();
        match handle(shared, reader.get_mut(), request) {
            Ok(true) if !close => {}
            _ => break,
        }
    }
    let _ = reader.get_ref().socket().shutdown(std::net::Shutdown::Both);
    shared
        .connections
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&id);
}

/// A `200 application/json` answer with exactly these bytes (a `Body` fault).
fn raw_json(body: Vec<u8>) -> Response {
    Response {
        status: 200,
        content_type: "application/json",
        extra_headers: Vec::new(),
        body,
    }
}

/// The bearer-token check (wire 087).
fn authorized(state: &State, request: &Request) -> bool {
    match &state.token {
        None => true,
        Some(token) => request.header("authorization") == Some(&format!("Bearer {token}")),
    }
}

/// Paths outside the resource API that clients probe.
fn non_resource(path: &str) -> Option<Response> {
    match path {
        "/version" => Some(Response::json(
            200,
            &json!({
                "major": "1", "minor": "36", "emulationMajor": "1", "emulationMinor": "36",
                "minCompatibilityMajor": "1", "minCompatibilityMinor": "35",
                "gitVersion": "v1.36.0-fake", "gitCommit": "fake", "gitTreeState": "clean",
                "buildDate": "1970-01-01T00:00:00Z", "goVersion": "go1.27.3", "compiler": "gc", "platform": "linux/amd64"
            }),
        )),
        "/healthz" | "/readyz" | "/livez" => Some(Response::text(200, "ok")),
        _ => None,
    }
}

/// `GET /api/v1` and `GET /apis/<group>/<version>`: the APIResourceList of the types the
/// fake serves there (what `kubectl api-resources` reads); 404 for a group version it
/// does not serve, as the API server answers for an uninstalled CRD.
fn discovery(types: &[super::resources::ResourceType], path: &str) -> Option<Response> {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version) = match segments.as_slice() {
        ["api", version] => ("", *version),
        ["apis", group, version] => (*group, *version),
        ["apis", group] => return Some(api_group(types, group)),
        _ => return None,
    };
    let resources: Vec<Value> = types
        .iter()
        .filter(|t| t.group == group && t.version == version)
        .map(|t| {
            json!({
                "name": t.plural, "singularName": t.kind.to_ascii_lowercase(),
                "namespaced": t.namespaced, "kind": t.kind,
                "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
            })
        })
        .collect();
    if resources.is_empty() {
        return Some(status::no_such_route().response());
    }
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(Response::json(
        200,
        &json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}),
    ))
}

/// `GET /apis/<group>`: the APIGroup with its versions, the first one preferred.
fn api_group(types: &[super::resources::ResourceType], group: &str) -> Response {
    let mut versions: Vec<&str> = types
        .iter()
        .filter(|t| t.group == group)
        .map(|t| t.version.as_str())
        .collect();
    versions.dedup();
    let Some(preferred) = versions.first() else {
        return status::no_such_route().response();
    };
    let entry = |v: &str| json!({"groupVersion": format!("{group}/{v}"), "version": v});
    Response::json(
        200,
        &json!({"kind": "APIGroup", "apiVersion": "v1", "name": group,
            "versions": versions.iter().map(|v| entry(v)).collect::<Vec<_>>(),
            "preferredVersion": entry(preferred)}),
    )
}

/// Handles one request; `Ok(false)` closes the connection.
fn handle(shared: &Shared, stream: &mut Conn, request: Request) -> std::io::Result<bool> {
    let verb = request.fault_verb().to_string();
    let plural = request.fault_resource();
    let mut state = shared.lock();
    state.requests.push(request.clone());
    super::access::record(&state.types, &request);
    if !authorized(&state, &request) {
        drop(state);
        let status = Status::new(401, Some("Unauthorized"), "Unauthorized");
        return write_response(stream, &status.response()).map(|_| true);
    }
    let delay = state.faults.take_slow(&verb, &plural);
    let held = state.faults.take_held(&verb, &plural);
    let heal_generation = state.heal_generation;
    let server = state.restart_generation;
    let late = state.faults.take_late_response(&verb, &plural);
    let detail = request.fault_detail();
    let injected = detail
        .and_then(|detail| state.faults.take_status(detail, &plural))
        .or_else(|| state.faults.take_status(&verb, &plural))
        .or_else(|| state.faults.take_body(&verb, &plural).map(raw_json));
    drop(state);
    if let Some(delay) = delay {
        thread::sleep(delay);
        // The server restarted meanwhile: the request died with the process that held it
        // (a real restart never applies it after the requests the new process served).
        if shared.lock().restart_generation != server {
            return Ok(false);
        }
    }
    if held {
        let mut state = shared.lock();
        while state.heal_generation == heal_generation {
            // Dies with the server, unapplied, as a request held by a `Slow` fault does.
            if state.shutdown || state.restart_generation != server {
                return Ok(false);
            }
            state = shared.wait(state, Duration::from_millis(50));
        }
    }
    if let Some(response) = injected {
        return write_response(stream, &response).map(|_| true);
    }
    if let Some(response) = non_resource(&request.path) {
        return write_response(stream, &response).map(|_| true);
    }
    let types = shared.lock().types.clone();
    if let Some(response) = discovery(&types, &request.path) {
        return write_response(stream, &response).map(|_| true);
    }
    let Some(route) = route(&types, &request.path) else {
        return write_response(stream, &status::no_such_route().response()).map(|_| true);
    };
    if request.method == "GET" && request.is_watch() && route.name.is_none() {
        return watch::serve(shared, stream, &request, &route);
    }
    if request.method == "GET" {
        wait_for_resource_version(shared, &request, &route);
    }
    let mut state = shared.lock();
    let response = api::dispatch(&mut state, &route, &request);
    drop(state);
    shared.notify();
    if let Some(late) = late {
        thread::sleep(late);
    }
    let response = super::gzip::as_the_server_would(&request, response);
    write_response(stream, &response).map(|_| true)
}

/// A LIST or a GET at a resourceVersion not reached yet waits a little for it (§1.3),
/// then the handler answers 504 if it is still ahead.
fn wait_for_resource_version(shared: &Shared, request: &Request, route: &super::resources::Route) {
    let Ok(options) = ListOptions::parse(request, &route.resource, false) else {
        return;
    };
    let Some(wanted) = options
        .resource_version
        .filter(|_| options.continue_token.is_none())
    else {
        return;
    };
    let deadline = Instant::now() + TOO_LARGE_RV_WAIT;
    let mut state = shared.lock();
    while state.store.current_rv() < wanted {
        let now = Instant::now();
        if now >= deadline {
            return;
        }
        state = shared.wait(state, deadline - now);
    }
}
