//! Kubernetes Events (core/v1) about the objects wavelet acts on: `ConfigChanged` on a
//! rolled workload, Warnings for missing configuration, `PodsReplaced`/`InvalidSelector`
//! on delete-mode objects. Best effort: a failed Event is logged, never retried.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::json;

use crate::client::Client;
use crate::objects::Resource;

/// The object an Event is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectRef {
    pub api_version: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

impl ObjectRef {
    pub fn new(resource: &Resource, namespace: &str, name: &str, uid: &str) -> ObjectRef {
        ObjectRef {
            api_version: resource.api_version(),
            kind: resource.kind.clone(),
            namespace: namespace.into(),
            name: name.into(),
            uid: uid.into(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Normal,
    Warning,
}

/// Posts Events as component `wavelet`.
#[derive(Clone)]
pub struct Recorder {
    client: Client,
    instance: String,
}

impl Recorder {
    pub fn new(client: Client) -> Recorder {
        let instance = std::env::var("HOSTNAME")
            .or_else(|_| std::env::var("POD_NAME"))
            .unwrap_or_else(|_| "wavelet".into());
        Recorder { client, instance }
    }

    pub fn normal(&self, about: &ObjectRef, reason: &str, message: &str) {
        self.record(about, EventType::Normal, reason, message);
    }

    pub fn warning(&self, about: &ObjectRef, reason: &str, message: &str) {
        self.record(about, EventType::Warning, reason, message);
    }

    pub fn record(&self, about: &ObjectRef, kind: EventType, reason: &str, message: &str) {
        let body = event_body(
            about,
            kind,
            reason,
            message,
            &self.instance,
            SystemTime::now(),
        );
        let path = Resource::events().collection_path(Some(&about.namespace));
        if let Err(err) = self.client.post::<serde_json::Value>(&path, &body) {
            log::warn!(
                "could not record {reason} event on {} {}/{}: {err}",
                about.kind,
                about.namespace,
                about.name
            );
        }
    }
}

/// The Event object; pure so it can be checked against the API's validation.
pub fn event_body(
    about: &ObjectRef,
    kind: EventType,
    reason: &str,
    message: &str,
    instance: &str,
    now: SystemTime,
) -> serde_json::Value {
    let since_epoch = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    let timestamp = crate::time::rfc3339(since_epoch.as_secs());
    json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            // Unique like client-go's: object name, then the time in hex nanoseconds.
            "name": format!("{}.{:x}", about.name, since_epoch.as_nanos()),
            "namespace": about.namespace,
        },
        "involvedObject": {
            "apiVersion": about.api_version,
            "kind": about.kind,
            "name": about.name,
            "namespace": about.namespace,
            "uid": about.uid,
        },
        "reason": reason,
        // The API rejects messages over 1 KiB.
        "message": truncate(message, 1024),
        "type": match kind { EventType::Normal => "Normal", EventType::Warning => "Warning" },
        "source": {"component": "wavelet"},
        "reportingComponent": "wavelet",
        "reportingInstance": instance,
        "firstTimestamp": timestamp,
        "lastTimestamp": timestamp,
        "count": 1,
    })
}

fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn event_has_the_fields_the_api_requires() {
        let about = ObjectRef::new(&Resource::deployments(), "ns", "web", "uid-1");
        let now = UNIX_EPOCH + Duration::from_secs(1_795_144_481);
        let body = event_body(
            &about,
            EventType::Warning,
            "ConfigMissing",
            "x",
            "pod-1",
            now,
        );
        assert_eq!(
            body["involvedObject"]["namespace"],
            body["metadata"]["namespace"]
        );
        assert_eq!(body["involvedObject"]["apiVersion"], "apps/v1");
        assert_eq!(body["type"], "Warning");
        assert_eq!(body["firstTimestamp"], "2026-11-20T03:14:41Z");
        assert!(body["metadata"]["name"]
            .as_str()
            .unwrap()
            .starts_with("web."));
    }

    #[test]
    fn long_messages_are_cut_on_a_character_boundary() {
        let long = "é".repeat(600);
        assert!(truncate(&long, 1024).len() <= 1024);
    }
}
