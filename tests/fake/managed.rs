//! `metadata.managedFields`, as the API server keeps it on every write (wire 003–052): per
//! manager, operation and subresource, the fields that manager set, as a FieldsV1 tree, and
//! when. The fake records it so its objects are as big as a real server's: a Deployment's
//! managedFields is about half of it, and a client parses (or skips) every byte of it in
//! every list, watch event and write response.
//!
//! What a write owns is what it changed (defaults included, as the server computes it
//! after defaulting); the fields it changed leave other managers' sets. Lists of objects
//! are keyed by their merge key (`k:{"name":"app"}`), other lists are atomic, and a map or
//! list a manager created carries `"."` as the server writes it for most of them.

use serde_json::{json, Map, Value};

/// Who writes: the manager (`?fieldManager=` or the User-Agent up to its first `/`) and
/// the operation (`Update`, or `Apply` for a server-side apply patch).
#[derive(Clone, Debug, PartialEq)]
pub struct Writer {
    pub manager: String,
    pub operation: &'static str,
}

impl Writer {
    /// The test harness writing directly into the store (`FakeApi::apply` and the like),
    /// as `kubectl apply` would.
    pub fn harness() -> Writer {
        Writer::update("kubectl-client-side-apply")
    }

    /// The simulated kube-controller-manager.
    pub fn controllers() -> Writer {
        Writer::update("kube-controller-manager")
    }

    pub fn update(manager: &str) -> Writer {
        Writer {
            manager: manager.to_string(),
            operation: "Update",
        }
    }

    /// The writer of an HTTP request, as the API server names it.
    pub fn of_request(
        field_manager: Option<&str>,
        user_agent: Option<&str>,
        apply: bool,
    ) -> Writer {
        let manager = match field_manager.filter(|m| !m.is_empty()) {
            Some(manager) => manager.to_string(),
            None => user_agent
                .unwrap_or("unknown")
                .split('/')
                .next()
                .unwrap_or("unknown")
                .to_string(),
        };
        Writer {
            manager,
            operation: if apply { "Apply" } else { "Update" },
        }
    }
}

/// Metadata fields that are owned like any other; the rest (name, uid, resourceVersion...)
/// are the server's and never appear in a FieldsV1 set.
const OWNED_METADATA: [&str; 4] = ["labels", "annotations", "ownerReferences", "finalizers"];

/// Fields that are one atomic value (their FieldsV1 entry is a leaf).
const ATOMIC: [&str; 2] = ["selector", "matchLabels"];

/// Struct fields the server never marks with `"."`: they always exist.
const STRUCTURAL: [&str; 6] = [
    "metadata",
    "spec",
    "status",
    "template",
    "strategy",
    "containers",
];

/// Records the write of `new` (over `old`, `None` for a create) by `writer` in
/// `new.metadata.managedFields`, at `time`; `subresource` is `Some("status")` for a status
/// write. A write that changed no owned field leaves the entries as they were.
pub fn record(
    old: Option<&Value>,
    new: &mut Value,
    writer: &Writer,
    subresource: Option<&str>,
    time: &str,
    api_version: &str,
) {
    let mut entries: Vec<Value> = old
        .and_then(|o| o.pointer("/metadata/managedFields"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let changed = changed_fields(old, new, subresource == Some("status"));
    if !changed.is_empty() {
        for entry in &mut entries {
            if !is_writer(entry, writer, subresource) {
                if let Some(fields) = entry.get_mut("fieldsV1").and_then(Value::as_object_mut) {
                    subtract(fields, &changed);
                }
            }
        }
        entries.retain(|e| {
            e.get("fieldsV1")
                .and_then(Value::as_object)
                .is_some_and(|f| !f.is_empty())
        });
        match entries
            .iter_mut()
            .find(|e| is_writer(e, writer, subresource))
        {
            Some(entry) => {
                let fields = entry["fieldsV1"]
                    .as_object_mut()
                    .expect("fieldsV1 is an object");
                union(fields, &changed);
                entry["time"] = time.into();
            }
            None => {
                let mut entry = json!({
                    "manager": writer.manager,
                    "operation": writer.operation,
                    "apiVersion": api_version,
                    "time": time,
                    "fieldsType": "FieldsV1",
                    "fieldsV1": changed,
                });
                if let Some(subresource) = subresource {
                    entry["subresource"] = subresource.into();
                }
                entries.push(entry);
            }
        }
    }
    match new.get_mut("metadata").and_then(Value::as_object_mut) {
        Some(metadata) if !entries.is_empty() => {
            metadata.insert("managedFields".into(), Value::Array(entries));
        }
        Some(metadata) => {
            metadata.remove("managedFields");
        }
        None => {}
    }
}

fn is_writer(entry: &Value, writer: &Writer, subresource: Option<&str>) -> bool {
    entry["manager"] == writer.manager.as_str()
        && entry["operation"] == writer.operation
        && entry.get("subresource").and_then(Value::as_str) == subresource
}

/// The owned fields whose value differs between `old` and `new`, as FieldsV1: a status
/// write owns what it changed of the status (and metadata), any other write the rest.
fn changed_fields(old: Option<&Value>, new: &Value, status_write: bool) -> Map<String, Value> {
    let empty = Map::new();
    let old = old.and_then(Value::as_object).unwrap_or(&empty);
    let Some(new) = new.as_object() else {
        return Map::new();
    };
    let mut out = Map::new();
    for (key, value) in new {
        match key.as_str() {
            "apiVersion" | "kind" => continue,
            "status" if !status_write => continue,
            "metadata" | "status" => {}
            _ if status_write => continue,
            _ => {}
        }
        match key.as_str() {
            "metadata" => {
                let before = old.get("metadata").and_then(Value::as_object);
                let mut fields = Map::new();
                for owned in OWNED_METADATA {
                    let Some(after) = value.get(owned) else {
                        continue;
                    };
                    let previous = before.and_then(|m| m.get(owned));
                    if previous != Some(after) {
                        fields.insert(format!("f:{owned}"), diff(owned, previous, after));
                    }
                }
                if !fields.is_empty() {
                    out.insert("f:metadata".into(), Value::Object(fields));
                }
            }
            _ => {
                let previous = old.get(key);
                if previous != Some(value) {
                    out.insert(format!("f:{key}"), diff(key, previous, value));
                }
            }
        }
    }
    out
}

/// The FieldsV1 node of field `name` changed from `old` to `new`.
fn diff(name: &str, old: Option<&Value>, new: &Value) -> Value {
    let created = old.is_none();
    let mut node = Map::new();
    match new {
        _ if ATOMIC.contains(&name) => {}
        Value::Object(map) if !map.is_empty() => {
            let before = old.and_then(Value::as_object);
            for (key, value) in map {
                let previous = before.and_then(|b| b.get(key));
                if previous != Some(value) {
                    node.insert(format!("f:{key}"), diff(key, previous, value));
                }
            }
            if created && !STRUCTURAL.contains(&name) {
                node.insert(".".into(), json!({}));
            }
        }
        Value::Array(items)
            if items.iter().all(|i| merge_key(name, i).is_some()) && !items.is_empty() =>
        {
            let before = old.and_then(Value::as_array);
            for item in items {
                let key = merge_key(name, item).expect("checked");
                let previous = before
                    .and_then(|b| b.iter().find(|i| merge_key(name, i).as_ref() == Some(&key)));
                if previous != Some(item) {
                    let mut entry = match diff("", previous, item) {
                        Value::Object(entry) => entry,
                        _ => Map::new(),
                    };
                    if previous.is_none() {
                        entry.insert(".".into(), json!({}));
                    }
                    node.insert(format!("k:{key}"), Value::Object(entry));
                }
            }
            if created && !STRUCTURAL.contains(&name) {
                node.insert(".".into(), json!({}));
            }
        }
        _ => {}
    }
    Value::Object(node)
}

/// The merge key of an item of list `list` (its `patchMergeKey` in the API), as the `k:`
/// of FieldsV1 writes it: `{"name":"app"}`.
fn merge_key(list: &str, item: &Value) -> Option<String> {
    let key = match list {
        "volumeMounts" | "volumeDevices" => "mountPath",
        "conditions" => "type",
        "ports" => "containerPort",
        "ownerReferences" => "uid",
        _ => "name",
    };
    let value = item.as_object()?.get(key)?;
    Some(json!({ key: value }).to_string())
}

/// Adds every field of `other` to `fields`.
fn union(fields: &mut Map<String, Value>, other: &Map<String, Value>) {
    for (key, value) in other {
        match (fields.get_mut(key), value.as_object()) {
            (Some(Value::Object(mine)), Some(theirs)) => union(mine, theirs),
            (_, _) => {
                fields.insert(key.clone(), value.clone());
            }
        }
    }
}

/// Removes from `fields` every field `changed` names as a leaf (now another manager's),
/// and the nodes left with nothing but `"."`.
fn subtract(fields: &mut Map<String, Value>, changed: &Map<String, Value>) {
    for (key, value) in changed {
        if key == "." {
            continue;
        }
        let theirs = value.as_object();
        let leaf = theirs.is_none_or(|t| t.keys().all(|k| k == "."));
        if leaf {
            fields.remove(key);
            continue;
        }
        if let (Some(Value::Object(mine)), Some(theirs)) = (fields.get_mut(key), theirs) {
            subtract(mine, theirs);
            if mine.keys().all(|k| k == ".") {
                fields.remove(key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(old: Option<&Value>, new: Value, writer: &Writer, sub: Option<&str>) -> Value {
        let mut new = new;
        record(
            old,
            &mut new,
            writer,
            sub,
            "2026-11-25T00:00:00Z",
            "apps/v1",
        );
        new
    }

    #[test]
    fn a_create_owns_every_field_it_set_in_the_shape_the_server_writes() {
        let created = write(
            None,
            json!({"metadata": {"name": "web", "labels": {"app": "web"}},
                   "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                            "template": {"spec": {"containers": [{"name": "app", "image": "nginx"}],
                                                  "volumes": [{"name": "cfg", "configMap": {"name": "c"}}]}}}}),
            &Writer::update("wire-recorder"),
            None,
        );
        let entry = &created["metadata"]["managedFields"][0];
        assert_eq!(entry["manager"], "wire-recorder");
        assert_eq!(entry["operation"], "Update");
        assert_eq!(entry["fieldsType"], "FieldsV1");
        assert_eq!(
            entry["fieldsV1"],
            json!({"f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                   "f:spec": {"f:replicas": {}, "f:selector": {},
                              "f:template": {"f:spec": {
                                  "f:containers": {"k:{\"name\":\"app\"}": {".": {}, "f:image": {}, "f:name": {}}},
                                  "f:volumes": {".": {}, "k:{\"name\":\"cfg\"}": {".": {}, "f:configMap": {".": {}, "f:name": {}}, "f:name": {}}}}}}})
        );
        assert!(entry.get("subresource").is_none());
    }

    #[test]
    fn another_managers_change_moves_the_field_and_a_status_write_has_its_own_entry() {
        let created = write(
            None,
            json!({"metadata": {"name": "web", "annotations": {"a": "1"}}, "spec": {"replicas": 1}}),
            &Writer::harness(),
            None,
        );
        let mut patched = created.clone();
        patched["metadata"]["annotations"]["a"] = "2".into();
        let patched = write(Some(&created), patched, &Writer::update("wavelet"), None);
        let entries = patched["metadata"]["managedFields"].as_array().unwrap();
        assert_eq!(entries.len(), 2);
        assert_eq!(
            entries[0]["fieldsV1"],
            json!({"f:spec": {"f:replicas": {}}})
        );
        assert_eq!(
            entries[1]["fieldsV1"],
            json!({"f:metadata": {"f:annotations": {"f:a": {}}}})
        );
        let mut status = patched.clone();
        status["status"] = json!({"replicas": 1});
        let status = write(
            Some(&patched),
            status,
            &Writer::controllers(),
            Some("status"),
        );
        let entries = status["metadata"]["managedFields"].as_array().unwrap();
        assert_eq!(entries.len(), 3);
        assert_eq!(entries[2]["subresource"], "status");
        assert_eq!(
            entries[2]["fieldsV1"],
            json!({"f:status": {"f:replicas": {}}})
        );
    }

    #[test]
    fn a_write_that_changes_nothing_keeps_the_entries() {
        let created = write(
            None,
            json!({"metadata": {"name": "c"}, "data": {"k": "v"}}),
            &Writer::harness(),
            None,
        );
        let again = write(
            Some(&created),
            created.clone(),
            &Writer::update("wavelet"),
            None,
        );
        assert_eq!(
            again["metadata"]["managedFields"],
            created["metadata"]["managedFields"]
        );
    }

    #[test]
    fn the_manager_is_the_field_manager_or_the_user_agent_up_to_its_slash() {
        assert_eq!(
            Writer::of_request(None, Some("wavelet/0.1.0 (linux)"), false),
            Writer::update("wavelet")
        );
        assert_eq!(
            Writer::of_request(Some("mine"), Some("wavelet/0.1.0"), true).operation,
            "Apply"
        );
        assert_eq!(
            Writer::of_request(Some("mine"), None, false).manager,
            "mine"
        );
    }
}
