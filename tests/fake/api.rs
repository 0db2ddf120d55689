//! Routes a resource request to its handler by method and path shape, and serves the
//! reads (GET one object, LIST). Writes live in `write`, evictions in `eviction`.

use serde_json::Value;

use super::eviction;
use super::http::{Request, Response};
use super::list::{self, metadata_only, ListOptions, Presentation};
use super::managed::Writer;
use super::resources::Route;
use super::state::State;
use super::status::{self, Status};
use super::write;

pub fn dispatch(state: &mut State, route: &Route, request: &Request) -> Response {
    let resource = &route.resource;
    if resource.namespaced && route.namespace.is_none() && route.name.is_some() {
        return status::no_such_route().response();
    }
    let name = route.name.as_deref();
    let apply = request
        .header("content-type")
        .is_some_and(|t| t.starts_with(write::APPLY_PATCH));
    let writer = Writer::of_request(
        request.query_param("fieldManager"),
        request.header("user-agent"),
        apply,
    );
    let harness = std::mem::replace(&mut state.writer, writer);
    let result = match (request.method.as_str(), name, route.subresource.as_deref()) {
        ("GET", None, None) => Ok(list_objects(state, route, request)),
        ("GET", Some(name), None | Some("status")) => get(state, route, request, name),
        ("POST", None, None) if route.namespace.is_some() || !resource.namespaced => {
            write::create(state, route, request)
        }
        ("POST", Some(name), Some("eviction")) if resource.plural == "pods" => {
            eviction::evict(state, route, request, name)
        }
        ("PUT", Some(name), None) => write::update(state, route, request, name, false),
        ("PUT", Some(name), Some("status")) => write::update(state, route, request, name, true),
        ("PATCH", Some(name), None) => write::patch(state, route, request, name, false),
        ("PATCH", Some(name), Some("status")) => write::patch(state, route, request, name, true),
        ("DELETE", Some(name), None) => write::delete(state, route, request, name),
        ("DELETE", None, None) => write::delete_collection(state, route, request),
        (_, _, Some(_)) => Err(status::no_such_route()),
        _ => Err(status::method_not_allowed()),
    };
    state.writer = harness;
    result.unwrap_or_else(|status| status.response())
}

fn list_objects(state: &mut State, route: &Route, request: &Request) -> Response {
    match ListOptions::parse(request, &route.resource, false) {
        Ok(options) => list::list(state, route, request, &options),
        Err(status) => status.response(),
    }
}

fn get(
    state: &mut State,
    route: &Route,
    request: &Request,
    name: &str,
) -> Result<Response, Status> {
    let namespace = route.namespace.as_deref().unwrap_or("");
    // `resourceVersion=N` on a GET: "not older than N", from the watch cache (§1.3); the
    // server has waited for it (`server::wait_for_resource_version`).
    if let Some(raw) = request
        .query_param("resourceVersion")
        .filter(|v| !v.is_empty())
    {
        let wanted: u64 = raw
            .parse()
            .map_err(|_| list::invalid_resource_version(raw))?;
        let current = state.store.current_rv();
        if wanted > current {
            return Err(list::too_large_resource_version(wanted, current));
        }
        if wanted > 0 && state.faults.take_cache_behind(&route.resource.plural) {
            return Err(list::too_large_resource_version(wanted, wanted - 1));
        }
    }
    let object = state
        .get(&route.resource, namespace, name)
        .ok_or_else(|| status::not_found(&route.resource, name))?;
    let body: Value =
        match Presentation::of(request) {
            Presentation::Full => object,
            Presentation::Metadata => metadata_only(&object),
            Presentation::MetadataList => return Err(Status::new(
                406,
                Some("NotAcceptable"),
                "you requested PartialObjectMetadataList, but the requested object is not a list",
            )),
        };
    Ok(Response::json(200, &body))
}
