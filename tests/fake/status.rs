//! `metav1.Status` error and success objects, shaped exactly like the recordings (§8):
//! kind Status, apiVersion v1, `metadata: {}`, empty fields omitted.

use serde_json::{json, Map, Value};

use super::http::Response;
use super::resources::ResourceType;

/// A Status response under construction.
#[derive(Clone, Debug)]
pub struct Status {
    pub code: u16,
    pub reason: Option<&'static str>,
    pub message: String,
    /// `None` omits `details`; `Some(empty map)` writes `details: {}`.
    pub details: Option<Map<String, Value>>,
    pub metadata: Map<String, Value>,
}

impl Status {
    pub fn new(code: u16, reason: Option<&'static str>, message: impl Into<String>) -> Status {
        Status {
            code,
            reason,
            message: message.into(),
            details: None,
            metadata: Map::new(),
        }
    }

    pub fn detail(mut self, key: &str, value: impl Into<Value>) -> Status {
        self.details
            .get_or_insert_with(Map::new)
            .insert(key.to_string(), value.into());
        self
    }

    /// `details: {}` (as the 415 and JSON-patch 422 recordings have).
    pub fn empty_details(mut self) -> Status {
        self.details.get_or_insert_with(Map::new);
        self
    }

    /// name/group/kind details for a resource; group only for non-core resources.
    pub fn about(mut self, resource: &ResourceType, name: Option<&str>) -> Status {
        let details = self.details.get_or_insert_with(Map::new);
        if let Some(name) = name {
            details.insert("name".into(), name.into());
        }
        if !resource.group.is_empty() {
            details.insert("group".into(), resource.group.clone().into());
        }
        details.insert("kind".into(), resource.plural.clone().into());
        self
    }

    pub fn cause(mut self, reason: &str, message: &str, field: Option<&str>) -> Status {
        let details = self.details.get_or_insert_with(Map::new);
        let causes = details
            .entry("causes")
            .or_insert_with(|| Value::Array(Vec::new()));
        let mut cause = json!({"reason": reason, "message": message});
        if let Some(field) = field {
            cause["field"] = field.into();
        }
        causes
            .as_array_mut()
            .expect("causes is an array")
            .push(cause);
        self
    }

    pub fn retry_after(self, seconds: u64) -> Status {
        self.detail("retryAfterSeconds", seconds)
    }

    pub fn to_json(&self) -> Value {
        let mut out = Map::new();
        out.insert("kind".into(), "Status".into());
        out.insert("apiVersion".into(), "v1".into());
        out.insert("metadata".into(), Value::Object(self.metadata.clone()));
        out.insert("status".into(), "Failure".into());
        out.insert("message".into(), self.message.clone().into());
        if let Some(reason) = self.reason {
            out.insert("reason".into(), reason.into());
        }
        if let Some(details) = &self.details {
            out.insert("details".into(), Value::Object(details.clone()));
        }
        out.insert("code".into(), self.code.into());
        Value::Object(out)
    }

    /// The HTTP response; `Retry-After` whenever `retryAfterSeconds > 0`.
    pub fn response(&self) -> Response {
        let mut response = Response::json(self.code, &self.to_json());
        let retry = self
            .details
            .as_ref()
            .and_then(|d| d.get("retryAfterSeconds"))
            .and_then(Value::as_u64);
        if let Some(seconds) = retry.filter(|s| *s > 0) {
            response = response.with_header("Retry-After", seconds.to_string());
        }
        response
    }
}

pub fn not_found(resource: &ResourceType, name: &str) -> Status {
    Status::new(
        404,
        Some("NotFound"),
        format!("{} \"{name}\" not found", resource.qualified()),
    )
    .about(resource, Some(name))
}

/// The 404 for paths the server does not serve (wire 101).
pub fn no_such_route() -> Status {
    Status::new(
        404,
        Some("NotFound"),
        "the server could not find the requested resource",
    )
    .empty_details()
}

pub fn method_not_allowed() -> Status {
    Status::new(
        405,
        Some("MethodNotAllowed"),
        "the server does not allow this method on the requested resource",
    )
    .empty_details()
}

pub fn already_exists(resource: &ResourceType, name: &str) -> Status {
    Status::new(
        409,
        Some("AlreadyExists"),
        format!("{} \"{name}\" already exists", resource.qualified()),
    )
    .about(resource, Some(name))
}

/// The optimistic-lock 409 (wire 094, 104).
pub fn conflict(resource: &ResourceType, name: &str) -> Status {
    Status::new(
        409,
        Some("Conflict"),
        format!(
            "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; please apply your changes to the latest version and try again",
            resource.qualified()
        ),
    )
    .about(resource, Some(name))
}

pub fn bad_request(message: impl Into<String>) -> Status {
    Status::new(400, Some("BadRequest"), message)
}

/// `<Kind> "<name>" is invalid: <causes>` with one cause per field error (`NewInvalid`).
/// `kind_label` is what the message and `details.kind` name (a Kind, or `ListOptions`...).
pub fn invalid(kind_label: &str, group: &str, name: &str, causes: &[FieldError]) -> Status {
    let qualified = if group.is_empty() {
        kind_label.to_string()
    } else {
        format!("{kind_label}.{group}")
    };
    let rendered: Vec<String> = causes.iter().map(FieldError::render).collect();
    let summary = if rendered.len() == 1 {
        rendered[0].clone()
    } else {
        format!("[{}]", rendered.join(", "))
    };
    let mut status = Status::new(
        422,
        Some("Invalid"),
        format!("{qualified} \"{name}\" is invalid: {summary}"),
    );
    if !name.is_empty() {
        status = status.detail("name", name);
    }
    if !group.is_empty() {
        status = status.detail("group", group);
    }
    status = status.detail("kind", kind_label);
    for cause in causes {
        status = status.cause(cause.reason, &cause.message, Some(&cause.field));
    }
    status
}

/// One field error of a 422.
#[derive(Clone, Debug)]
pub struct FieldError {
    pub reason: &'static str,
    pub field: String,
    pub message: String,
}

impl FieldError {
    pub fn required(field: &str) -> FieldError {
        FieldError {
            reason: "FieldValueRequired",
            field: field.into(),
            message: "Required value".into(),
        }
    }
    pub fn required_because(field: &str, why: &str) -> FieldError {
        FieldError {
            reason: "FieldValueRequired",
            field: field.into(),
            message: format!("Required value: {why}"),
        }
    }
    pub fn invalid(field: &str, value: &str, why: &str) -> FieldError {
        FieldError {
            reason: "FieldValueInvalid",
            field: field.into(),
            message: format!("Invalid value: {value}: {why}"),
        }
    }
    pub fn forbidden(field: &str, why: &str) -> FieldError {
        FieldError {
            reason: "FieldValueForbidden",
            field: field.into(),
            message: format!("Forbidden: {why}"),
        }
    }
    pub fn too_long(field: &str, limit: usize) -> FieldError {
        FieldError {
            reason: "FieldValueTooLong",
            field: field.into(),
            message: format!("Too long: may not be more than {limit} bytes"),
        }
    }
    pub fn not_supported(field: &str, value: &str, supported: &str) -> FieldError {
        FieldError {
            reason: "FieldValueNotSupported",
            field: field.into(),
            message: format!("Unsupported value: {value}: supported values: {supported}"),
        }
    }
    fn render(&self) -> String {
        format!("{}: {}", self.field, self.message)
    }
}

/// A Success Status (DELETE of non-pods, eviction).
pub fn success(details: Option<Value>, code: Option<u16>) -> Value {
    let mut out =
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"});
    if let Some(details) = details {
        out["details"] = details;
    }
    if let Some(code) = code {
        out["code"] = code.into();
    }
    out
}
