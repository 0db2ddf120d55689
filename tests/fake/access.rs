//! The process-wide access log: every request that the `wavelet` binary (User-Agent
//! `wavelet/...`) sent to any fake API server in this test process, as the authorizer
//! sees it (verb, group, resource, subresource, namespace, name). Requests that tests
//! make themselves (the raw wire client, or the `FakeApi` helpers, which are not HTTP)
//! are not in it. `tests/rbac.rs` checks it against the RBAC in `manifests/`.

use std::sync::Mutex;

use super::http::Request;
use super::resources::ResourceType;

/// One request, in RBAC terms.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Access {
    /// get, list, watch, create, update, patch, delete, deletecollection.
    pub verb: String,
    /// API group ("" for core); empty for non-resource requests.
    pub group: String,
    /// Plural resource, or the path of a non-resource request (`/version`).
    pub resource: String,
    pub subresource: Option<String>,
    /// Empty for requests across all namespaces.
    pub namespace: String,
    pub name: Option<String>,
    /// A type the fake serves out of the box (not one a test registered).
    pub builtin: bool,
}

impl std::fmt::Display for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let resource = match &self.subresource {
            Some(sub) => format!("{}/{sub}", self.resource),
            None => self.resource.clone(),
        };
        let group = if self.group.is_empty() {
            "core"
        } else {
            &self.group
        };
        write!(
            f,
            "{} {group} {resource} ns={:?}",
            self.verb, self.namespace
        )?;
        if let Some(name) = &self.name {
            write!(f, " name={name}")?;
        }
        Ok(())
    }
}

static LOG: Mutex<Vec<Access>> = Mutex::new(Vec::new());

/// The RBAC verb of a request (apiserver `requestinfo.go`, k8s-protocol.md §0).
pub fn verb(method: &str, named: bool, watch: bool) -> &'static str {
    match (method, named) {
        ("GET", false) if watch => "watch",
        ("GET", false) => "list",
        ("GET", true) => "get",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", false) => "deletecollection",
        ("DELETE", true) => "delete",
        _ => "unknown",
    }
}

/// In RBAC terms, or `None` for requests the binary did not send.
pub fn access(types: &[ResourceType], request: &Request) -> Option<Access> {
    if !request
        .header("user-agent")
        .is_some_and(|ua| ua.starts_with("wavelet/"))
    {
        return None;
    }
    let Some(route) = super::resources::route(types, &request.path) else {
        return Some(Access {
            verb: request.method.to_ascii_lowercase(),
            group: String::new(),
            resource: request.path.clone(),
            subresource: None,
            namespace: String::new(),
            name: None,
            builtin: true,
        });
    };
    // A list or watch narrowed to one object by `fieldSelector=metadata.name=X` is
    // authorized for that name, as the apiserver's requestinfo.go does (so a grant limited
    // by resourceNames allows a watch of that one object).
    let selected = request
        .query_param("fieldSelector")
        .and_then(|f| f.strip_prefix("metadata.name="))
        .filter(|n| !n.contains(','))
        .filter(|_| route.name.is_none() && request.method == "GET")
        .map(String::from);
    // A POST to a subresource (eviction) creates it; the name is the parent's.
    Some(Access {
        verb: verb(&request.method, route.name.is_some(), request.is_watch()).to_string(),
        group: route.resource.group.clone(),
        resource: route.resource.plural.clone(),
        subresource: route.subresource.clone(),
        namespace: route.namespace.clone().unwrap_or_default(),
        name: route.name.clone().or(selected),
        builtin: route.resource.builtin,
    })
}

/// Called by the server for every request it receives.
pub fn record(types: &[ResourceType], request: &Request) {
    if let Some(access) = access(types, request) {
        LOG.lock().unwrap_or_else(|e| e.into_inner()).push(access);
    }
}

/// Everything recorded so far in this process.
pub fn log() -> Vec<Access> {
    LOG.lock().unwrap_or_else(|e| e.into_inner()).clone()
}
