//! Server-side validation the recordings show: object names, Secret types, Lease
//! MicroTime precision, and the two Event APIs (wire 008, 097, 106–111); and the
//! ConfigMap size limit of the API server's `ValidateConfigMap` (not recorded: the sum of
//! the values of `data` and `binaryData` may be at most 1 MiB).

use serde_json::Value;

use super::resources::ResourceType;
use super::selector::{is_dns_subdomain, qualified_name};
use super::status::{self, FieldError, Status};
use super::store::{name_of, namespace_of};

const SUBDOMAIN_FORMAT: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const LABEL_FORMAT: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

fn is_dns_label(name: &str) -> bool {
    name.len() <= 63 && !name.contains('.') && is_dns_subdomain(name)
}

/// `metadata.name` (wire 097); namespaces must be DNS labels, everything else subdomains.
pub fn name(resource: &ResourceType, object: &Value) -> Result<(), Status> {
    let name = name_of(object);
    let generate_name = object
        .pointer("/metadata/generateName")
        .and_then(Value::as_str)
        .unwrap_or("");
    if name.is_empty() {
        if generate_name.is_empty() {
            return Err(status::invalid(
                &resource.kind,
                "",
                "",
                &[FieldError::required_because(
                    "metadata.name",
                    "name or generateName is required",
                )],
            ));
        }
        return Ok(());
    }
    let (valid, format) = if resource.plural == "namespaces" {
        (is_dns_label(name), LABEL_FORMAT)
    } else {
        (is_dns_subdomain(name), SUBDOMAIN_FORMAT)
    };
    if valid {
        return Ok(());
    }
    let cause = FieldError::invalid("metadata.name", &format!("\"{name}\""), format);
    Err(status::invalid(&resource.kind, "", name, &[cause]))
}

/// Type-specific checks run on create and update.
pub fn object(resource: &ResourceType, object: &Value) -> Result<(), Status> {
    match (resource.plural.as_str(), resource.group.as_str()) {
        ("secrets", _) => secret(object),
        ("configmaps", "") => configmap(object),
        ("leases", _) => lease(object),
        ("events", "") => core_event(object),
        ("events", "events.k8s.io") => events_v1_event(object),
        _ => Ok(()),
    }
}

/// `core.MaxSecretSize`, which `ValidateConfigMap` applies to a ConfigMap's values.
pub const MAX_CONFIGMAP_BYTES: usize = 1 << 20;

/// The values of `data` (and of `binaryData`, as sent: base64 is a little larger than the
/// decoded bytes the server counts) together at most [`MAX_CONFIGMAP_BYTES`]; keys do not
/// count.
fn configmap(object: &Value) -> Result<(), Status> {
    let total: usize = ["data", "binaryData"]
        .iter()
        .filter_map(|field| object[field].as_object())
        .flat_map(|map| map.values())
        .map(|v| v.as_str().map_or(0, str::len))
        .sum();
    if total <= MAX_CONFIGMAP_BYTES {
        return Ok(());
    }
    let cause = FieldError::too_long("", MAX_CONFIGMAP_BYTES);
    Err(status::invalid("ConfigMap", "", name_of(object), &[cause]))
}

fn secret(object: &Value) -> Result<(), Status> {
    if object["type"] != "kubernetes.io/tls" {
        return Ok(());
    }
    let causes: Vec<FieldError> = ["tls.crt", "tls.key"]
        .iter()
        .filter(|k| object.pointer(&format!("/data/{k}")).is_none())
        .map(|k| FieldError::required(&format!("data[{k}]")))
        .collect();
    if causes.is_empty() {
        return Ok(());
    }
    Err(status::invalid("Secret", "", name_of(object), &causes))
}

/// MicroTime fields decode only with exactly six fractional digits (wire 106).
fn lease(object: &Value) -> Result<(), Status> {
    for field in ["acquireTime", "renewTime"] {
        let Some(text) = object
            .pointer(&format!("/spec/{field}"))
            .and_then(Value::as_str)
        else {
            continue;
        };
        let rest = text.get(19..).unwrap_or("");
        let fraction_ok = rest.len() > 7
            && rest.starts_with('.')
            && rest[1..7].bytes().all(|b| b.is_ascii_digit());
        let zone = if fraction_ok { &rest[7..] } else { "" };
        if fraction_ok && (zone == "Z" || zone.starts_with('+') || zone.starts_with('-')) {
            continue;
        }
        let message = format!(
            "Lease in version \"v1\" cannot be handled as a Lease: parsing time \"{text}\" as \"2006-01-02T15:04:05.000000Z07:00\": cannot parse \"{rest}\" as \".000000\""
        );
        return Err(status::bad_request(message));
    }
    Ok(())
}

fn involved_namespace_cause(object: &Value, reference: &str) -> Option<FieldError> {
    let involved = object
        .pointer(&format!("/{reference}/namespace"))
        .and_then(Value::as_str)
        .unwrap_or("");
    (involved != namespace_of(object)).then(|| {
        FieldError::invalid(
            "involvedObject.namespace",
            &format!("\"{involved}\""),
            "does not match event.namespace",
        )
    })
}

/// core/v1 Events: only the involved object's namespace is checked (wire 110–112).
fn core_event(object: &Value) -> Result<(), Status> {
    match involved_namespace_cause(object, "involvedObject") {
        Some(cause) => Err(status::invalid("Event", "", name_of(object), &[cause])),
        None => Ok(()),
    }
}

/// events.k8s.io/v1: a first layer (namespace, eventTime, type), then the reporting
/// fields once those pass (wire 107, 108).
fn events_v1_event(object: &Value) -> Result<(), Status> {
    let text = |k: &str| object.get(k).and_then(Value::as_str).unwrap_or("");
    let mut causes: Vec<FieldError> = involved_namespace_cause(object, "regarding")
        .into_iter()
        .collect();
    if text("eventTime").is_empty() {
        causes.push(FieldError::required("eventTime"));
    }
    let event_type = text("type");
    if event_type != "Normal" && event_type != "Warning" {
        causes.push(FieldError::invalid(
            "type",
            &format!("\"{event_type}\""),
            &format!("has invalid value: {event_type}"),
        ));
    }
    if causes.is_empty() {
        let controller = text("reportingController");
        if controller.is_empty() {
            causes.push(FieldError::required("reportingController"));
            causes.push(FieldError::invalid(
                "reportingController",
                "\"\"",
                "name part must be non-empty",
            ));
            causes.push(FieldError::invalid(
                "reportingController",
                "\"\"",
                "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
            ));
        } else if let Err(why) = qualified_name(controller) {
            causes.push(FieldError::invalid(
                "reportingController",
                &format!("\"{controller}\""),
                &why,
            ));
        }
        for field in ["reportingInstance", "action", "reason"] {
            if text(field).is_empty() {
                causes.push(FieldError::required(field));
            }
        }
    }
    if causes.is_empty() {
        return Ok(());
    }
    Err(status::invalid("Event", "", name_of(object), &causes))
}
