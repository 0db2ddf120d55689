//! Kubernetes Events (core/v1) about the objects wavelet acts on: `ConfigChanged` on a
//! rolled workload, Warnings for missing configuration, `PodsReplaced`/`InvalidSelector`
//! on delete-mode objects. Recording one is a few steps in memory (`correlate.rs`: series
//! whose count grows, bursts summed up on their cause, a spam filter, a bounded queue);
//! one thread of their own writes them (`post.rs`, at most 5 requests a second), so a slow
//! `/events` never holds a worker. Best effort: a failed write is logged and counted,
//! never retried.

pub(crate) mod correlate;
mod post;

use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::client::Client;
use crate::objects::Resource;
use correlate::{Fate, Said, Series};

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

/// What became of a Warning said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recorded {
    /// Its object's own Event will be written (or its series counts one more).
    Own,
    /// Counted in the one Event on its cause.
    Summed,
    /// Not queued (the queue is full, or the object is warned about too often): say it
    /// again later, it was not said.
    NotQueued,
    /// Not queued because its namespace is being deleted: nothing to say again.
    Gone,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Normal,
    Warning,
}

/// Records Events as component `wavelet`; clones share one correlator and one writer.
#[derive(Clone)]
pub struct Recorder {
    shared: Arc<post::Shared>,
    writer: Arc<Mutex<Option<JoinHandle<()>>>>,
}

impl Recorder {
    /// Starts the thread that writes the Events.
    pub fn new(client: Client) -> Recorder {
        let instance = std::env::var("HOSTNAME")
            .or_else(|_| std::env::var("POD_NAME"))
            .unwrap_or_else(|_| "wavelet".into());
        let shared = Arc::new(post::Shared::new(client, instance));
        let writer = post::spawn(Arc::clone(&shared));
        Recorder {
            shared,
            writer: Arc::new(Mutex::new(Some(writer))),
        }
    }

    pub fn normal(&self, about: &ObjectRef, reason: &str, message: &str) {
        self.record(about, EventType::Normal, reason, message);
    }

    /// A Warning; [`Recorded::NotQueued`] when it could not be queued (logged at warn).
    pub fn warning(&self, about: &ObjectRef, reason: &str, message: &str) -> Recorded {
        let fate = self.say(Said {
            about,
            kind: EventType::Warning,
            reason,
            message,
            cause: None,
        });
        match fate {
            Fate::Own => Recorded::Own,
            Fate::Summed { .. } => Recorded::Summed,
            Fate::Dropped("gone") => Recorded::Gone,
            Fate::Dropped(_) => Recorded::NotQueued,
        }
    }

    pub fn record(&self, about: &ObjectRef, kind: EventType, reason: &str, message: &str) {
        self.say(Said {
            about,
            kind,
            reason,
            message,
            cause: None,
        });
    }

    /// A Warning about `about` whose cause is `cause` (the ConfigMap a workload misses).
    /// The first objects of a burst with one cause get an Event of their own, the rest are
    /// summed up in one Event on the cause. True when this one gets (or has) its own: the
    /// caller logs it at warn then, at debug otherwise (the summary is logged once).
    pub fn warning_caused_by(
        &self,
        about: &ObjectRef,
        reason: &str,
        message: &str,
        cause: &ObjectRef,
    ) -> Recorded {
        let fate = self.say(Said {
            about,
            kind: EventType::Warning,
            reason,
            message,
            cause: Some(cause),
        });
        if fate == (Fate::Summed { first: true }) {
            log::warn!(
                "{reason} for more than {} objects because of {} {}/{}: the others are summed up in one Event on it",
                correlate::OWN_EVENTS_PER_GROUP,
                cause.kind,
                cause.namespace,
                cause.name
            );
        }
        match fate {
            Fate::Own => Recorded::Own,
            Fate::Summed { .. } => Recorded::Summed,
            Fate::Dropped("gone") => Recorded::Gone,
            Fate::Dropped(_) => Recorded::NotQueued,
        }
    }

    fn say(&self, said: Said) -> Fate {
        let fate = self
            .shared
            .observe(&said, Instant::now(), crate::time::unix_now());
        if let Fate::Dropped(reason) = fate {
            crate::ops::metrics::global().events_dropped.inc(&[reason]);
            let (kind, ns, name) = (&said.about.kind, &said.about.namespace, &said.about.name);
            // A Warning lost to a full queue is for a human to see (the caller says it
            // again later); spam is what the filter is for.
            if said.kind == EventType::Warning && reason == "queue_full" {
                log::warn!(
                    "could not queue {} Warning on {kind} {ns}/{name}: {} Events are waiting to be written (will be said again)",
                    said.reason,
                    correlate::MAX_QUEUED
                );
            } else {
                log::debug!(
                    "not recording {} event on {kind} {ns}/{name} ({reason})",
                    said.reason
                );
            }
        }
        fate
    }

    /// The object `kind` `namespace`/`name` was deleted: its queued Events are dropped.
    pub fn forget_object(&self, kind: &str, namespace: &str, name: &str) {
        let dropped = self
            .shared
            .forget(|a| a.kind == kind && a.namespace == namespace && a.name == name);
        self.count_gone(dropped, &format!("{kind} {namespace}/{name} deleted"));
    }

    /// Namespace `namespace` was deleted: every Event queued there is dropped, and
    /// nothing of it is remembered.
    pub fn forget_namespace(&self, namespace: &str) {
        let dropped = self.shared.namespace_gone(namespace);
        self.count_gone(dropped, &format!("namespace {namespace} deleted"));
    }

    /// Namespace `namespace` is being deleted (Terminating): every Event queued there is
    /// dropped, and none is queued there any more (the API server would refuse it).
    pub fn namespace_terminating(&self, namespace: &str) {
        let dropped = self.shared.namespace_terminating(namespace);
        self.count_gone(dropped, &format!("namespace {namespace} is being deleted"));
    }

    fn count_gone(&self, dropped: usize, why: &str) {
        if dropped > 0 {
            crate::ops::metrics::global()
                .events_dropped
                .add(&["gone"], dropped as u64);
            log::debug!("{why}: {dropped} queued Event(s) dropped");
        }
    }

    /// Writes what is queued for at most `within`, then stops the writer (shutdown).
    pub fn stop(&self, within: Duration) {
        self.shared.close(Instant::now() + within);
        let writer = self.writer.lock().unwrap().take();
        if let Some(writer) = writer {
            let _ = writer.join();
        }
    }
}

/// The Event object of a series, with `count` occurrences; pure so it can be checked
/// against the API's validation.
pub(crate) fn event_body(series: &Series, count: u32, instance: &str) -> serde_json::Value {
    let about = &series.about;
    json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            // The same for the same series, across restarts (correlate::event_name).
            "name": series.name,
            "namespace": about.namespace,
        },
        "involvedObject": {
            "apiVersion": about.api_version,
            "kind": about.kind,
            "name": about.name,
            "namespace": about.namespace,
            "uid": about.uid,
        },
        "reason": series.reason,
        // The API rejects messages over 1 KiB.
        "message": truncate(&series.message, 1024),
        "type": match series.kind { EventType::Normal => "Normal", EventType::Warning => "Warning" },
        "source": {"component": "wavelet"},
        "reportingComponent": "wavelet",
        "reportingInstance": instance,
        "firstTimestamp": crate::time::rfc3339(series.first),
        "lastTimestamp": crate::time::rfc3339(series.last),
        "count": count,
    })
}

/// The strategic-merge patch that adds occurrences to an Event: its count, its
/// lastTimestamp and its message (a summary's grows), as client-go's correlator patches.
pub(crate) fn event_patch(series: &Series, count: u32) -> serde_json::Value {
    json!({
        "count": count,
        "lastTimestamp": crate::time::rfc3339(series.last),
        "message": truncate(&series.message, 1024),
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

    #[test]
    fn event_has_the_fields_the_api_requires() {
        let about = ObjectRef::new(&Resource::deployments(), "ns", "web", "uid-1");
        let mut correlator = correlate::Correlator::default();
        let said = Said {
            about: &about,
            kind: EventType::Warning,
            reason: "ConfigMissing",
            message: "x",
            cause: None,
        };
        correlator.observe(&said, Instant::now(), 1_795_144_481);
        let series = correlator.next_write().unwrap().series;
        let body = event_body(&series, 3, "pod-1");
        assert_eq!(
            body["involvedObject"]["namespace"],
            body["metadata"]["namespace"]
        );
        assert_eq!(body["involvedObject"]["apiVersion"], "apps/v1");
        assert_eq!(body["type"], "Warning");
        assert_eq!(body["count"], 3);
        assert_eq!(body["firstTimestamp"], "2026-11-20T03:14:41Z");
        assert!(body["metadata"]["name"]
            .as_str()
            .unwrap()
            .starts_with("web."));
        let patch = event_patch(&series, 4);
        assert_eq!(
            patch,
            json!({"count": 4, "lastTimestamp": "2026-11-20T03:14:41Z", "message": "x"})
        );
    }

    #[test]
    fn long_messages_are_cut_on_a_character_boundary() {
        let long = "é".repeat(600);
        assert!(truncate(&long, 1024).len() <= 1024);
    }
}
