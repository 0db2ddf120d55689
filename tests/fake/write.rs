//! The write handlers: POST create, PUT update (main and `status`), PATCH in its three
//! formats (plus a minimal server-side apply), DELETE with preconditions, and
//! DELETE-collection — each with the validation and error Status of the recordings.

use serde_json::{json, Map, Value};

use super::http::{Request, Response};
use super::list::ListOptions;
use super::patch::{go_json_error, json_patch, merge_patch, strategic_merge_patch};
use super::resources::{ResourceType, Route};
use super::state::{set_type_meta, State};
use super::status::{self, FieldError, Status};
use super::store::{name_of, rv_of};
use super::validate;

const JSON_PATCH: &str = "application/json-patch+json";
const MERGE_PATCH: &str = "application/merge-patch+json";
const STRATEGIC_PATCH: &str = "application/strategic-merge-patch+json";
pub const APPLY_PATCH: &str = "application/apply-patch+yaml";

/// `dryRun` must be `All` when present (wire 050). Returns whether this is a dry run.
fn dry_run(request: &Request, options_kind: &str) -> Result<bool, Status> {
    match request.query_param("dryRun") {
        None => Ok(false),
        Some("All") => Ok(true),
        Some(other) => Err(status::invalid(
            options_kind,
            "meta.k8s.io",
            "",
            &[FieldError::not_supported(
                "dryRun",
                &format!("[\"{other}\"]"),
                "\"All\"",
            )],
        )),
    }
}

/// The request body as a JSON object (400 with Go's decoder text otherwise).
fn body_object(request: &Request) -> Result<Value, Status> {
    let value: Value = serde_json::from_str(&request.body).map_err(|_| {
        status::bad_request(format!(
            "couldn't get version/kind; json parse error: {}",
            go_json_error(&request.body)
        ))
    })?;
    if !value.is_object() {
        return Err(status::bad_request("couldn't get version/kind; json parse error: json: cannot unmarshal into Go value of type struct"));
    }
    Ok(value)
}

fn namespace_mismatch() -> Status {
    status::bad_request(
        "the namespace of the provided object does not match the namespace sent on the request",
    )
}

/// The URL namespace goes into the object; a different one in the body is a 400 (wire 099).
fn place_in_namespace(route: &Route, object: &mut Value) -> Result<(), Status> {
    let Some(namespace) = &route.namespace else {
        return Ok(());
    };
    match object
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
    {
        Some(body) if !body.is_empty() && body != namespace => Err(namespace_mismatch()),
        _ => {
            set_type_meta(&route.resource, object);
            object["metadata"]["namespace"] = namespace.clone().into();
            Ok(())
        }
    }
}

/// The namespace must exist (404, wire 098) and not be terminating (403, wire 115).
fn namespace_accepts_creates(state: &State, route: &Route, name: &str) -> Result<(), Status> {
    let Some(namespace) = &route.namespace else {
        return Ok(());
    };
    match state.namespace_active(namespace) {
        Some(true) => Ok(()),
        Some(false) => Err(Status::new(
            403,
            Some("Forbidden"),
            format!(
                "{} \"{name}\" is forbidden: unable to create new content in namespace {namespace} because it is being terminated",
                route.resource.qualified()
            ),
        )
        .about(&route.resource, Some(name))
        .cause("NamespaceTerminating", &format!("namespace {namespace} is being terminated"), Some("metadata.namespace"))),
        None => Err(status::not_found(&state.find_type("namespaces").expect("built in"), namespace)),
    }
}

fn create_object(
    state: &mut State,
    route: &Route,
    mut object: Value,
    dry: bool,
) -> Result<Response, Status> {
    let resource = &route.resource;
    place_in_namespace(route, &mut object)?;
    set_type_meta(resource, &mut object);
    validate::name(resource, &object)?;
    let name = name_of(&object).to_string();
    namespace_accepts_creates(state, route, &name)?;
    let namespace = route.namespace.as_deref().unwrap_or("");
    if !name.is_empty() && state.get(resource, namespace, &name).is_some() {
        return Err(status::already_exists(resource, &name));
    }
    validate::object(resource, &object)?;
    if resource.has_status_subresource() {
        object.as_object_mut().map(|o| o.remove("status"));
    }
    if dry {
        return Ok(Response::json(201, &object));
    }
    let created = state.create(resource, object);
    Ok(Response::json(201, &created))
}

pub fn create(state: &mut State, route: &Route, request: &Request) -> Result<Response, Status> {
    let dry = dry_run(request, "CreateOptions")?;
    let object = body_object(request)?;
    create_object(state, route, object, dry)
}

pub fn update(
    state: &mut State,
    route: &Route,
    request: &Request,
    name: &str,
    status_only: bool,
) -> Result<Response, Status> {
    let resource = &route.resource;
    let dry = dry_run(request, "UpdateOptions")?;
    let mut object = body_object(request)?;
    place_in_namespace(route, &mut object)?;
    match name_of(&object) {
        "" => object["metadata"]["name"] = name.into(),
        body if body != name => {
            return Err(status::bad_request(format!(
                "the name of the object ({body}) does not match the name on the URL ({name})"
            )))
        }
        _ => {}
    }
    let namespace = route.namespace.as_deref().unwrap_or("");
    let Some(old) = state.get(resource, namespace, name) else {
        if resource.allows_create_on_update() && !status_only {
            return create_object(state, route, object, dry);
        }
        return Err(status::not_found(resource, name));
    };
    match object
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .filter(|rv| !rv.is_empty())
    {
        Some(rv) if rv != old["metadata"]["resourceVersion"] => {
            return Err(status::conflict(resource, name))
        }
        None if resource.requires_resource_version_on_update() => {
            let cause = FieldError::invalid(
                "metadata.resourceVersion",
                "0",
                "must be specified for an update",
            );
            return Err(status::invalid(
                &resource.plural,
                &resource.group,
                name,
                &[cause],
            ));
        }
        _ => {}
    }
    validate::object(resource, &object)?;
    write_new_version(state, resource, &old, object, status_only, dry)
}

/// Main-resource writes keep the stored status; status writes change only the status.
fn write_new_version(
    state: &mut State,
    resource: &ResourceType,
    old: &Value,
    mut object: Value,
    status_only: bool,
    dry: bool,
) -> Result<Response, Status> {
    if status_only {
        let mut new = old.clone();
        new["status"] = object.get("status").cloned().unwrap_or(Value::Null);
        object = new;
    } else if resource.has_status_subresource() {
        match old.get("status") {
            Some(status) => object["status"] = status.clone(),
            None => {
                object.as_object_mut().map(|o| o.remove("status"));
            }
        }
    }
    if dry {
        return Ok(Response::json(200, &object));
    }
    let stored = if status_only {
        state.update_status(resource, old, object)
    } else {
        state.update(resource, old, object)
    };
    Ok(Response::json(200, &stored))
}

fn unsupported_media_type(resource: &ResourceType) -> Status {
    if resource.builtin {
        // go-restful's own 415 (wire 046, 047).
        return Status::new(
            415,
            Some("UnsupportedMediaType"),
            "415: Unsupported Media Type",
        )
        .empty_details();
    }
    Status::new(
        415,
        Some("UnsupportedMediaType"),
        format!("the body of the request was in an unknown format - accepted media types include: {JSON_PATCH}, {MERGE_PATCH}, {APPLY_PATCH}"),
    )
}

fn patch_options_invalid(cause: FieldError) -> Status {
    status::invalid("PatchOptions", "meta.k8s.io", "", &[cause])
}

pub fn patch(
    state: &mut State,
    route: &Route,
    request: &Request,
    name: &str,
    status_only: bool,
) -> Result<Response, Status> {
    let resource = &route.resource;
    let content_type = request
        .header("content-type")
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_string();
    let accepted = [JSON_PATCH, MERGE_PATCH, STRATEGIC_PATCH, APPLY_PATCH];
    if !accepted.contains(&content_type.as_str())
        || (content_type == STRATEGIC_PATCH && !resource.builtin)
    {
        return Err(unsupported_media_type(resource));
    }
    let dry = dry_run(request, "PatchOptions")?;
    let apply = content_type == APPLY_PATCH;
    if !apply && request.query_param("force").is_some() {
        return Err(patch_options_invalid(FieldError::forbidden(
            "force",
            "may not be specified for non-apply patch",
        )));
    }
    if apply && request.query_param("fieldManager").unwrap_or("").is_empty() {
        return Err(patch_options_invalid(FieldError::required_because(
            "fieldManager",
            "is required for apply patch",
        )));
    }
    let body: Value = serde_json::from_str(&request.body)
        .map_err(|_| status::bad_request(go_json_error(&request.body)))?;
    if apply
        && (body["apiVersion"] != resource.api_version().as_str()
            || body["kind"] != resource.kind.as_str())
    {
        return Err(status::bad_request(format!(
            "Incorrect version specified in apply patch. Specified patch version: {}, expected: {}",
            body["apiVersion"].as_str().unwrap_or(""),
            resource.api_version()
        )));
    }
    let namespace = route.namespace.as_deref().unwrap_or("");
    let Some(old) = state.get(resource, namespace, name) else {
        if apply && !status_only {
            let mut object = body;
            object["metadata"]["name"] = name.into();
            return create_object(state, route, object, dry);
        }
        return Err(status::not_found(resource, name));
    };
    let patched = match content_type.as_str() {
        JSON_PATCH => {
            let ops = body.as_array().ok_or_else(|| {
                status::bad_request(
                    "json: cannot unmarshal object into Go value of type jsonpatch.Patch",
                )
            })?;
            json_patch(&old, ops).map_err(|_| {
                // A failed op is a generic 422 (wire 045).
                Status::new(
                    422,
                    Some("Invalid"),
                    "the server rejected our request due to an error in our request",
                )
                .empty_details()
            })?
        }
        STRATEGIC_PATCH => {
            strategic_merge_patch(&old, &body).map_err(|e| Status::new(422, Some("Invalid"), e))?
        }
        _ => merge_patch(&old, &body),
    };
    if rv_of(&patched) != rv_of(&old) {
        return Err(status::conflict(resource, name));
    }
    validate::object(resource, &patched)?;
    write_new_version(state, resource, &old, patched, status_only, dry)
}

/// Delete options come from the body when it has one, else from the query (§4.1).
fn delete_options(request: &Request) -> Result<Value, Status> {
    if !request.body.trim().is_empty() {
        return serde_json::from_str(&request.body)
            .map_err(|_| status::bad_request(go_json_error(&request.body)));
    }
    let mut options = Map::new();
    for key in ["propagationPolicy", "gracePeriodSeconds", "dryRun"] {
        if let Some(value) = request.query_param(key) {
            let value = if key == "dryRun" {
                json!([value])
            } else {
                json!(value)
            };
            options.insert(key.into(), value);
        }
    }
    Ok(Value::Object(options))
}

fn precondition_conflict(
    resource: &ResourceType,
    name: &str,
    what: &str,
    wanted: &str,
    actual: &str,
    hint: &str,
) -> Status {
    let qualified = if resource.group.is_empty() {
        resource.kind.clone()
    } else {
        format!("{}.{}", resource.kind, resource.group)
    };
    let mut status = Status::new(
        409,
        Some("Conflict"),
        format!("Operation cannot be fulfilled on {qualified} \"{name}\": the {what} in the precondition ({wanted}) does not match the {what} in record ({actual}). {hint}"),
    )
    .detail("name", name);
    if !resource.group.is_empty() {
        status = status.detail("group", resource.group.clone());
    }
    status.detail("kind", resource.kind.clone())
}

pub fn delete(
    state: &mut State,
    route: &Route,
    request: &Request,
    name: &str,
) -> Result<Response, Status> {
    let resource = &route.resource;
    let options = delete_options(request)?;
    if let Some(policy) = options.get("propagationPolicy").and_then(Value::as_str) {
        if !["Orphan", "Background", "Foreground"].contains(&policy) {
            let cause = FieldError::not_supported(
                "propagationPolicy",
                &format!("\"{policy}\""),
                "\"Foreground\", \"Background\", \"Orphan\"",
            );
            return Err(status::invalid(
                "DeleteOptions",
                "meta.k8s.io",
                "",
                &[cause],
            ));
        }
    }
    let dry = options["dryRun"]
        .as_array()
        .is_some_and(|d| d.iter().any(|v| v == "All"));
    let namespace = route.namespace.as_deref().unwrap_or("");
    let old = state
        .get(resource, namespace, name)
        .ok_or_else(|| status::not_found(resource, name))?;
    let actual_uid = old["metadata"]["uid"].as_str().unwrap_or("");
    if let Some(uid) = options
        .pointer("/preconditions/uid")
        .and_then(Value::as_str)
    {
        if uid != actual_uid {
            let hint = "The object might have been deleted and then recreated";
            return Err(precondition_conflict(
                resource, name, "UID", uid, actual_uid, hint,
            ));
        }
    }
    let actual_rv = old["metadata"]["resourceVersion"].as_str().unwrap_or("");
    if let Some(rv) = options
        .pointer("/preconditions/resourceVersion")
        .and_then(Value::as_str)
    {
        if rv != actual_rv {
            let hint = "The object might have been modified";
            return Err(precondition_conflict(
                resource,
                name,
                "ResourceVersion",
                rv,
                actual_rv,
                hint,
            ));
        }
    }
    let returned = if dry {
        old.clone()
    } else {
        state
            .delete(resource, namespace, name)
            .unwrap_or(old.clone())
    };
    if matches!(resource.plural.as_str(), "pods" | "namespaces") {
        return Ok(Response::json(200, &returned));
    }
    let mut details = json!({"name": name, "kind": resource.plural, "uid": actual_uid});
    if !resource.group.is_empty() {
        details["group"] = resource.group.clone().into();
    }
    Ok(Response::json(200, &status::success(Some(details), None)))
}

/// DELETE on a collection: deletes what the list options select and returns the list as
/// it was before (§4.3, wire 069–071).
pub fn delete_collection(
    state: &mut State,
    route: &Route,
    request: &Request,
) -> Result<Response, Status> {
    let resource = &route.resource;
    let options = ListOptions::parse(request, resource, false)?;
    let dry = dry_run(request, "DeleteOptions")?;
    let mut items: Vec<Value> = state
        .list(resource, route.namespace.as_deref())
        .into_iter()
        .filter(|o| options.selects(route, o))
        .collect();
    if let Some(limit) = options.limit {
        items.truncate(limit as usize);
    }
    let rv = state.store.current_rv();
    if !dry {
        for item in &items {
            let namespace = item
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            state.delete(resource, &namespace, name_of(item));
        }
    }
    for item in &mut items {
        if let Some(map) = item.as_object_mut() {
            map.remove("kind");
            map.remove("apiVersion");
        }
    }
    let body = json!({
        "kind": resource.list_kind(), "apiVersion": resource.api_version(),
        "metadata": {"resourceVersion": rv.to_string()}, "items": items,
    });
    Ok(Response::json(200, &body))
}
