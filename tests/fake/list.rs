//! LIST: list options and their validation (§1.1–§1.2), selectors, `limit`/`continue`
//! paging over pinned snapshots with real-format continue tokens (§1.4–§1.5), and the
//! list body (`XList`, items without kind/apiVersion, or PartialObjectMetadataList).

use std::sync::Arc;
use std::time::Duration;

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{json, Map, Value};

use super::base64;
use super::http::{is_truthy, Request, Response};
use super::patch::go_json_error;
use super::resources::{ResourceType, Route};
use super::selector::{self, FieldSelector, LabelSelector};
use super::state::State;
use super::status::{self, FieldError, Status};
use super::store::{self, name_of, namespace_of};

const EXPIRED_CONTINUE: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

/// The query parameters of a list or watch, parsed and validated.
#[derive(Clone, Debug, Default)]
pub struct ListOptions {
    pub labels: LabelSelector,
    pub fields: FieldSelector,
    /// `None`: unset (or empty); `Some(0)`: "0"; `Some(n)`: "n".
    pub resource_version: Option<u64>,
    pub resource_version_match: Option<String>,
    pub limit: Option<i64>,
    pub continue_token: Option<String>,
    pub send_initial_events: Option<bool>,
    pub allow_bookmarks: bool,
    pub timeout: Option<Duration>,
}

pub fn list_options_invalid(cause: FieldError) -> Status {
    status::invalid("ListOptions", "meta.k8s.io", "", &[cause])
}

/// The 500 a non-numeric resourceVersion gets (wire 030).
pub fn invalid_resource_version(raw: &str) -> Status {
    Status::new(
        500,
        None,
        format!("resourceVersion: Invalid value: \"{raw}\": strconv.ParseUint: parsing \"{raw}\": invalid syntax"),
    )
}

impl ListOptions {
    pub fn parse(
        request: &Request,
        resource: &ResourceType,
        watch: bool,
    ) -> Result<ListOptions, Status> {
        let mut options = ListOptions::default();
        let param = |k: &str| request.query_param(k);
        if let Some(text) = param("labelSelector") {
            options.labels = selector::parse(text).map_err(status::bad_request)?;
        }
        if let Some(text) = param("fieldSelector") {
            options.fields = FieldSelector::parse(text).map_err(status::bad_request)?;
            options
                .fields
                .validate(&resource.plural)
                .map_err(status::bad_request)?;
        }
        if let Some(raw) = param("resourceVersion").filter(|v| !v.is_empty()) {
            options.resource_version =
                Some(raw.parse().map_err(|_| invalid_resource_version(raw))?);
        }
        options.resource_version_match = param("resourceVersionMatch")
            .filter(|v| !v.is_empty())
            .map(str::to_string);
        if let Some(raw) = param("limit") {
            let limit = raw.parse::<i64>().map_err(|_| {
                status::bad_request(format!("limit: Invalid value: \"{raw}\": strconv.ParseInt: parsing \"{raw}\": invalid syntax"))
            })?;
            options.limit = Some(limit).filter(|l| *l > 0);
        }
        options.continue_token = param("continue")
            .filter(|v| !v.is_empty())
            .map(str::to_string);
        options.send_initial_events = param("sendInitialEvents").map(is_truthy);
        options.allow_bookmarks = param("allowWatchBookmarks").is_some_and(is_truthy);
        if let Some(raw) = param("timeoutSeconds") {
            let seconds = raw.parse::<u64>().map_err(|_| {
                status::bad_request(format!(
                    "timeoutSeconds: Invalid value: \"{raw}\": must be a non-negative integer"
                ))
            })?;
            options.timeout = Some(Duration::from_secs(seconds)).filter(|d| !d.is_zero());
        }
        options.validate(watch)?;
        Ok(options)
    }

    /// §1.2, with the recorded messages (wire 032, 033).
    fn validate(&self, watch: bool) -> Result<(), Status> {
        let rv_match = self.resource_version_match.as_deref();
        if watch {
            if self.send_initial_events.is_some() && rv_match != Some("NotOlderThan") {
                return Err(list_options_invalid(FieldError::forbidden(
                    "resourceVersionMatch",
                    "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                )));
            }
            if rv_match.is_some() && self.send_initial_events.is_none() {
                return Err(list_options_invalid(FieldError::forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
                )));
            }
            return Ok(());
        }
        if self.send_initial_events.is_some() {
            return Err(list_options_invalid(FieldError::forbidden(
                "sendInitialEvents",
                "sendInitialEvents is forbidden for list",
            )));
        }
        if let Some(rv_match) = rv_match {
            if self.resource_version.is_none() {
                return Err(list_options_invalid(FieldError::forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden unless resourceVersion is provided",
                )));
            }
            if self.continue_token.is_some() {
                return Err(list_options_invalid(FieldError::forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden when continue is provided",
                )));
            }
            if rv_match != "Exact" && rv_match != "NotOlderThan" {
                return Err(list_options_invalid(FieldError::not_supported(
                    "resourceVersionMatch",
                    &format!("\"{rv_match}\""),
                    "\"Exact\", \"NotOlderThan\"",
                )));
            }
            if rv_match == "Exact" && self.resource_version == Some(0) {
                return Err(list_options_invalid(FieldError::forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
                )));
            }
        }
        if self.continue_token.is_some() && self.resource_version.is_some_and(|rv| rv != 0) {
            return Err(status::bad_request(
                "specifying resource version is not allowed when using continue",
            ));
        }
        Ok(())
    }

    pub fn has_selector(&self) -> bool {
        !self.labels.is_empty() || !self.fields.is_empty()
    }

    /// Whether an object passes the namespace of the route and both selectors.
    /// Cheap without selectors: a page of a large list checks every later item.
    pub fn selects(&self, route: &Route, object: &Value) -> bool {
        route
            .namespace
            .as_deref()
            .is_none_or(|ns| namespace_of(object) == ns)
            && (self.labels.is_empty() || self.labels.matches_object(object))
            && self.fields.matches(&route.resource.plural, object)
    }
}

/// How the client asked to see objects (the `as=` parameter of Accept).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Presentation {
    Full,
    /// `as=PartialObjectMetadata`
    Metadata,
    /// `as=PartialObjectMetadataList`
    MetadataList,
}

impl Presentation {
    pub fn of(request: &Request) -> Presentation {
        let accept = request.header("accept").unwrap_or("");
        if accept.contains("as=PartialObjectMetadataList") {
            Presentation::MetadataList
        } else if accept.contains("as=PartialObjectMetadata") {
            Presentation::Metadata
        } else {
            Presentation::Full
        }
    }
}

/// An object as `PartialObjectMetadata`.
pub fn metadata_only(object: &Value) -> Value {
    json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": object["metadata"]})
}

/// Storage-key order: `/name` inside a namespace, `/namespace/name` across namespaces.
fn storage_key(route: &Route, object: &Value) -> String {
    if route.namespace.is_some() || !route.resource.namespaced {
        format!("/{}", name_of(object))
    } else {
        format!("/{}/{}", namespace_of(object), name_of(object))
    }
}

/// The real token format: unpadded base64url of `{"v":"meta.k8s.io/v1","rv":N,"start":"<key>\u0000"}`.
pub fn encode_continue(rv: i64, start: &str) -> String {
    let json = format!(
        r#"{{"v":"meta.k8s.io/v1","rv":{rv},"start":{}}}"#,
        Value::String(format!("{start}\u{0}"))
    );
    base64::encode_url_raw(json.as_bytes())
}

/// Decodes a token into (rv, start key), with the server's 400 texts (wire 013, 014).
pub fn decode_continue(token: &str) -> Result<(i64, String), Status> {
    let invalid = |why: String| {
        status::bad_request(format!(
            "invalid continue token: continue key is not valid: {why}"
        ))
    };
    let bytes = base64::decode_url_raw(token).map_err(invalid)?;
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let parsed: Value = serde_json::from_str(&text).map_err(|_| invalid(go_json_error(&text)))?;
    let version = parsed["v"].as_str().unwrap_or("");
    if version != "meta.k8s.io/v1" {
        return Err(invalid(format!(
            "server does not recognize this encoded version {version}"
        )));
    }
    let rv = parsed["rv"].as_i64().unwrap_or(0);
    if rv == 0 {
        return Err(invalid(
            "incorrect encoded start resourceVersion (version meta.k8s.io/v1)".into(),
        ));
    }
    let start = parsed["start"].as_str().unwrap_or("");
    if start.is_empty() {
        return Err(invalid(
            "encoded start key empty (version meta.k8s.io/v1)".into(),
        ));
    }
    // The key is compared with `>=`: "<last key>\0" is the first key after the last one.
    let start = if start.starts_with('/') {
        start.to_string()
    } else {
        format!("/{start}")
    };
    Ok((rv, start))
}

/// Serves a LIST.
pub fn list(
    state: &mut State,
    route: &Route,
    request: &Request,
    options: &ListOptions,
) -> Response {
    let resource = &route.resource;
    let presentation = Presentation::of(request);
    if presentation == Presentation::Metadata {
        let package = resource
            .group
            .split('.')
            .next()
            .filter(|g| !g.is_empty())
            .unwrap_or("core");
        return Status::new(
            406,
            Some("NotAcceptable"),
            format!("you requested PartialObjectMetadata, but the requested object is a list (*{package}.{})", resource.list_kind()),
        )
        .response();
    }
    let current = state.store.current_rv();
    let (items, list_rv, start) = if let Some(token) = &options.continue_token {
        let (rv, start) = match decode_continue(token) {
            Ok(decoded) => decoded,
            Err(status) => return status.response(),
        };
        if rv < 0 {
            (
                state.store.snapshot(&resource.key).items,
                current,
                Some(start),
            )
        } else {
            match state.store.snapshot_at(&resource.key, rv as u64) {
                Some(snapshot) => (snapshot.items, snapshot.rv, Some(start)),
                None => {
                    let mut expired = Status::new(410, Some("Expired"), EXPIRED_CONTINUE);
                    let fresh =
                        encode_continue(-1, start.trim_start_matches('/').trim_end_matches('\0'));
                    expired.metadata.insert("continue".into(), fresh.into());
                    return expired.response();
                }
            }
        }
    } else {
        if options.resource_version_match.as_deref() == Some("Exact") {
            let rv = options.resource_version.unwrap_or(0);
            if rv < state.store.history_floor() {
                return Status::new(
                    410,
                    Some("Expired"),
                    "The resourceVersion for the provided list is too old.",
                )
                .response();
            }
        }
        if let Some(rv) = options.resource_version.filter(|rv| *rv > current) {
            return too_large_resource_version(rv, current).response();
        }
        let snapshot = state.store.snapshot(&resource.key);
        (snapshot.items, snapshot.rv, None)
    };
    // The watch cache ignores limit for resourceVersion=0 (§1.3).
    let limit = options
        .limit
        .filter(|_| options.resource_version != Some(0) || options.continue_token.is_some());
    let (page, remaining) = page(&items, route, options, start.as_deref(), limit);
    let mut metadata = Map::new();
    metadata.insert("resourceVersion".into(), list_rv.to_string().into());
    if remaining > 0 {
        let last = page
            .last()
            .map(|o| storage_key(route, o))
            .unwrap_or_default();
        metadata.insert(
            "continue".into(),
            encode_continue(list_rv as i64, &last).into(),
        );
        if !options.has_selector() {
            metadata.insert("remainingItemCount".into(), remaining.into());
        }
    }
    let (kind, api_version) = match presentation {
        Presentation::MetadataList => (
            "PartialObjectMetadataList".to_string(),
            "meta.k8s.io/v1".to_string(),
        ),
        _ => (resource.list_kind(), resource.api_version()),
    };
    let items = page
        .into_iter()
        .map(|object| ListItem {
            object,
            presentation,
        })
        .collect();
    Response::json(
        200,
        &ListBody {
            kind,
            api_version,
            metadata,
            items,
        },
    )
}

/// The matching items from the start key on, up to `limit`, and how many more match.
/// `items` are sorted by storage key, so the start is found by bisection.
fn page<'a>(
    items: &'a [Arc<Value>],
    route: &Route,
    options: &ListOptions,
    start: Option<&str>,
    limit: Option<i64>,
) -> (Vec<&'a Value>, usize) {
    let from = start.map_or(0, |start| {
        let start = match &route.namespace {
            Some(namespace) => format!("/{namespace}{start}"),
            None => start.to_string(),
        };
        items.partition_point(|o| store::storage_key(o) < start)
    });
    let mut matching = items[from..]
        .iter()
        .map(|o| &**o)
        .filter(|o| options.selects(route, o));
    let limit = limit.map_or(usize::MAX, |l| l as usize);
    let page: Vec<&Value> = matching.by_ref().take(limit).collect();
    (page, matching.count())
}

/// A list body, serialized straight from the stored objects (a page of a large list is
/// not copied first), with the keys in the sorted order of a `json!` map.
struct ListBody<'a> {
    kind: String,
    api_version: String,
    metadata: Map<String, Value>,
    items: Vec<ListItem<'a>>,
}

impl Serialize for ListBody<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(4))?;
        map.serialize_entry("apiVersion", &self.api_version)?;
        map.serialize_entry("items", &self.items)?;
        map.serialize_entry("kind", &self.kind)?;
        map.serialize_entry("metadata", &self.metadata)?;
        map.end()
    }
}

/// An item of a list body: without kind and apiVersion, or as `PartialObjectMetadata`.
struct ListItem<'a> {
    object: &'a Value,
    presentation: Presentation,
}

impl Serialize for ListItem<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match (self.presentation, self.object.as_object()) {
            (Presentation::MetadataList, _) => metadata_only(self.object).serialize(serializer),
            (_, Some(fields)) => serializer.collect_map(
                fields
                    .iter()
                    .filter(|(key, _)| *key != "kind" && *key != "apiVersion"),
            ),
            (_, None) => self.object.serialize(serializer),
        }
    }
}

/// 504 for a resourceVersion the server has not reached (wire 027).
pub fn too_large_resource_version(rv: u64, current: u64) -> Status {
    Status::new(
        504,
        Some("Timeout"),
        format!("Timeout: Too large resource version: {rv}, current: {current}"),
    )
    .cause(
        "ResourceVersionTooLarge",
        "Too large resource version",
        None,
    )
    .retry_after(1)
}
