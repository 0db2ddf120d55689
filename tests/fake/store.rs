//! Objects, the global resourceVersion and the watch history: every write bumps one
//! counter shared by all kinds (like the etcd revision) and appends one event to a
//! bounded history that watches replay from. List snapshots pin continue tokens.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use serde_json::Value;

/// How many events the history keeps (the real watch cache adapts between 100 and 102400).
pub const HISTORY_CAPACITY: usize = 10_000;
/// How many list snapshots (for continue tokens) are kept.
const SNAPSHOT_CAPACITY: usize = 64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One change, as the watch cache holds it.
#[derive(Clone, Debug)]
pub struct StoredEvent {
    pub rv: u64,
    pub resource_key: String,
    pub event_type: EventType,
    /// The new state; for DELETED the last state with `resourceVersion` = the deletion RV.
    pub object: Value,
    /// The state before a MODIFIED (needed for label-selector transitions).
    pub previous: Option<Value>,
}

/// A list as of one resourceVersion (all namespaces, sorted by storage key).
#[derive(Clone, Debug)]
pub struct Snapshot {
    pub resource_key: String,
    pub rv: u64,
    /// Shared with the store: a snapshot costs a pointer per object, not a copy.
    pub items: Arc<Vec<Arc<Value>>>,
}

#[derive(Debug)]
pub struct Store {
    rv: u64,
    objects: BTreeMap<String, BTreeMap<(String, String), Arc<Value>>>,
    history: VecDeque<StoredEvent>,
    /// Every event with an RV above this is still in `history`.
    history_floor: u64,
    snapshots: VecDeque<Snapshot>,
}

pub fn namespace_of(object: &Value) -> &str {
    object
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("")
}

pub fn name_of(object: &Value) -> &str {
    object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// Where etcd keeps an object, below its type's prefix: `/namespace/name`, or `/name` for
/// cluster-scoped objects. Lists come back in this order (bytewise: `a-b/x` before `a/x`).
pub fn storage_key(object: &Value) -> String {
    match namespace_of(object) {
        "" => format!("/{}", name_of(object)),
        namespace => format!("/{namespace}/{}", name_of(object)),
    }
}

/// The object's `metadata.resourceVersion` as a number (0 when missing).
pub fn rv_of(object: &Value) -> u64 {
    object
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

fn set_rv(object: &mut Value, rv: u64) {
    object["metadata"]["resourceVersion"] = Value::String(rv.to_string());
}

impl Store {
    /// Starts the counter somewhere that does not look like a fresh etcd.
    pub fn new(first_rv: u64) -> Store {
        Store {
            rv: first_rv,
            objects: BTreeMap::new(),
            history: VecDeque::new(),
            history_floor: first_rv,
            snapshots: VecDeque::new(),
        }
    }

    pub fn current_rv(&self) -> u64 {
        self.rv
    }

    /// The oldest RV a watch may start from without a 410.
    pub fn history_floor(&self) -> u64 {
        self.history_floor
    }

    pub fn get(&self, key: &str, namespace: &str, name: &str) -> Option<&Value> {
        self.objects
            .get(key)?
            .get(&(namespace.to_string(), name.to_string()))
            .map(|object| &**object)
    }

    /// Every object of a type, sorted by namespace then name (the storage key order).
    pub fn list(&self, key: &str) -> Vec<Value> {
        self.objects
            .get(key)
            .map(|m| m.values().map(|object| Value::clone(object)).collect())
            .unwrap_or_default()
    }

    /// Objects of a type in one namespace, sorted by name, without touching the others.
    pub fn list_in(&self, key: &str, namespace: &str) -> Vec<Value> {
        self.iter_in(key, namespace).cloned().collect()
    }

    /// `list_in` without the copies.
    pub fn iter_in<'a>(&'a self, key: &str, namespace: &'a str) -> impl Iterator<Item = &'a Value> {
        self.objects.get(key).into_iter().flat_map(move |objects| {
            objects
                .range((namespace.to_string(), String::new())..)
                .take_while(move |((ns, _), _)| ns == namespace)
                .map(|(_, object)| &**object)
        })
    }

    /// Objects of `key` in `namespace` whose name starts with `prefix`, in name order.
    pub fn iter_prefixed<'a>(
        &'a self,
        key: &str,
        namespace: &'a str,
        prefix: String,
    ) -> impl Iterator<Item = &'a Value> {
        self.objects.get(key).into_iter().flat_map(move |objects| {
            let start = (namespace.to_string(), prefix.clone());
            let prefix = prefix.clone();
            objects
                .range(start..)
                .take_while(move |((ns, name), _)| ns == namespace && name.starts_with(&prefix))
                .map(|(_, object)| &**object)
        })
    }

    fn record(&mut self, event: StoredEvent) {
        self.history.push_back(event);
        while self.history.len() > HISTORY_CAPACITY {
            if let Some(dropped) = self.history.pop_front() {
                self.history_floor = dropped.rv;
            }
        }
    }

    /// Writes an object (create or update) at a new RV and records the event.
    pub fn put(&mut self, key: &str, mut object: Value) -> Value {
        self.rv += 1;
        set_rv(&mut object, self.rv);
        let id = (
            namespace_of(&object).to_string(),
            name_of(&object).to_string(),
        );
        let previous = self
            .objects
            .entry(key.to_string())
            .or_default()
            .insert(id, Arc::new(object.clone()))
            .map(Arc::unwrap_or_clone);
        let event_type = if previous.is_some() {
            EventType::Modified
        } else {
            EventType::Added
        };
        self.record(StoredEvent {
            rv: self.rv,
            resource_key: key.into(),
            event_type,
            object: object.clone(),
            previous,
        });
        object
    }

    /// Removes an object; the DELETED event carries its last state at the deletion RV.
    pub fn remove(&mut self, key: &str, namespace: &str, name: &str) -> Option<Value> {
        let mut object = Arc::unwrap_or_clone(
            self.objects
                .get_mut(key)?
                .remove(&(namespace.to_string(), name.to_string()))?,
        );
        self.rv += 1;
        set_rv(&mut object, self.rv);
        self.record(StoredEvent {
            rv: self.rv,
            resource_key: key.into(),
            event_type: EventType::Deleted,
            object: object.clone(),
            previous: None,
        });
        Some(object)
    }

    /// Events of one type after `rv`, or `Err(floor)` when some of them were dropped.
    pub fn events_after(&self, key: &str, rv: u64) -> Result<Vec<StoredEvent>, u64> {
        if rv < self.history_floor {
            return Err(self.history_floor);
        }
        let start = self.history.partition_point(|e| e.rv <= rv);
        Ok(self
            .history
            .range(start..)
            .filter(|e| e.resource_key == key)
            .cloned()
            .collect())
    }

    /// Drops all history and snapshots: older watches get 410, continue tokens expire.
    pub fn compact(&mut self) {
        self.history.clear();
        self.history_floor = self.rv;
        self.snapshots.clear();
    }

    /// Pins the current state of a type for continue tokens; returns its RV.
    pub fn snapshot(&mut self, key: &str) -> Snapshot {
        if let Some(s) = self
            .snapshots
            .iter()
            .find(|s| s.resource_key == key && s.rv == self.rv)
        {
            return s.clone();
        }
        let mut items: Vec<Arc<Value>> = self
            .objects
            .get(key)
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default();
        items.sort_by_cached_key(|object| storage_key(object));
        let snapshot = Snapshot {
            resource_key: key.into(),
            rv: self.rv,
            items: Arc::new(items),
        };
        self.snapshots.push_back(snapshot.clone());
        while self.snapshots.len() > SNAPSHOT_CAPACITY {
            self.snapshots.pop_front();
        }
        snapshot
    }

    pub fn snapshot_at(&self, key: &str, rv: u64) -> Option<Snapshot> {
        self.snapshots
            .iter()
            .find(|s| s.resource_key == key && s.rv == rv)
            .cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cm(name: &str) -> Value {
        json!({"metadata": {"name": name, "namespace": "ns"}})
    }

    #[test]
    fn every_write_bumps_the_global_rv_and_is_replayable() {
        let mut store = Store::new(100);
        store.put("configmaps", cm("a"));
        store.put("secrets", cm("s"));
        store.put("configmaps", cm("a"));
        let deleted = store.remove("configmaps", "ns", "a").unwrap();
        assert_eq!(rv_of(&deleted), 104);
        let types: Vec<_> = store
            .events_after("configmaps", 100)
            .unwrap()
            .iter()
            .map(|e| e.event_type)
            .collect();
        assert_eq!(
            types,
            [EventType::Added, EventType::Modified, EventType::Deleted]
        );
        assert_eq!(store.events_after("configmaps", 102).unwrap().len(), 2);
        store.compact();
        assert_eq!(store.events_after("configmaps", 103).err(), Some(104));
        assert!(store.events_after("configmaps", 104).unwrap().is_empty());
    }
}
