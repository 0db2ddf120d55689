//! Which Pods vote on what a workload mounted (`--enable-csi-integration`): only running
//! Pods whose deletion has not begun, and only a workload's own, told by owner references
//! (Pod → ReplicaSet → Deployment or Argo Rollout; Pod → StatefulSet or DaemonSet). An
//! Evicted, Failed or Succeeded Pod kept until Pod GC keeps its pod status and what it
//! mounted last: it must not hold a version that the running Pods remounted past.
//!
//! Fed by two metadata watches: Pods with `status.phase=Running` (the server filters; a
//! Pod that stops running leaves the watch as a deletion) and ReplicaSets. Per Pod only
//! a digest of its name and one of its controller are kept (16 bytes and the map's
//! slot), per ReplicaSet a digest of its name and one of its controller.
//!
//! A CronJob's Pods are a Job's, which wavelet does not watch, and another
//! `--workload-kinds` kind may own its Pods through objects wavelet knows nothing of:
//! theirs are still told by name ([`crate::model::pods`]), among running Pods.

use std::collections::{HashMap, HashSet};

use crate::model::pods;
use crate::objects::{short_digest, WorkloadKey};

/// The field selector of the Pod watch: running Pods only.
pub const RUNNING_PODS: &str = "status.phase=Running";

/// The running Pods and the ReplicaSets of every namespace watched.
#[derive(Default)]
pub struct Owners {
    namespaces: HashMap<Box<str>, Namespace>,
}

#[derive(Default)]
struct Namespace {
    /// Running Pods not terminating: [`name_id`] → [`owner_id`] of their controller (0:
    /// none, a bare Pod).
    pods: HashMap<u64, u64>,
    /// ReplicaSets: [`owner_id`] (kind `ReplicaSet`) → [`owner_id`] of their controller.
    replica_sets: HashMap<u64, u64>,
}

/// Which of the two watched kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OwnedKind {
    Pod,
    ReplicaSet,
}

/// A Pod's key among its namespace's.
fn name_id(name: &str) -> u64 {
    short_digest(name)
}

/// A controller's key: its kind and name (names never hold `/`).
fn owner_id(kind: &str, name: &str) -> u64 {
    short_digest(&format!("{kind}/{name}"))
}

impl Owners {
    /// Records a Pod or ReplicaSet with its controller's (kind, name); `present: false`
    /// forgets it (deleted, terminating, or for a Pod no longer running). Returns whether
    /// that changed anything.
    pub fn set(
        &mut self,
        kind: OwnedKind,
        namespace: &str,
        name: &str,
        controller: Option<(&str, &str)>,
        present: bool,
    ) -> bool {
        let key = match kind {
            OwnedKind::Pod => name_id(name),
            OwnedKind::ReplicaSet => owner_id("ReplicaSet", name),
        };
        if !present {
            let Some(ns) = self.namespaces.get_mut(namespace) else {
                return false;
            };
            let removed = ns.map(kind).remove(&key).is_some();
            if ns.pods.is_empty() && ns.replica_sets.is_empty() {
                self.namespaces.remove(namespace);
            }
            return removed;
        }
        let owner = controller.map_or(0, |(kind, name)| owner_id(kind, name));
        let ns = self.namespaces.entry(namespace.into()).or_default();
        ns.map(kind).insert(key, owner) != Some(owner)
    }

    /// Whether Pod `pod` of `namespace` runs and is not terminating.
    pub fn runs(&self, namespace: &str, pod: &str) -> bool {
        self.namespaces
            .get(namespace)
            .is_some_and(|ns| ns.pods.contains_key(&name_id(pod)))
    }

    /// Whether Pod `pod` runs and is `workload`'s: its controller is the workload, or a
    /// ReplicaSet whose controller is; a CronJob's or another kind's by name.
    pub fn is_running_pod_of(&self, workload: &WorkloadKey, pod: &str) -> bool {
        let Some(ns) = self.namespaces.get(&*workload.namespace) else {
            return false;
        };
        let Some(&owner) = ns.pods.get(&name_id(pod)) else {
            return false;
        };
        let resource = &workload.resource;
        match (resource.group.as_str(), resource.plural.as_str()) {
            ("apps", "deployments" | "statefulsets" | "daemonsets")
            | ("argoproj.io", "rollouts") => {
                let target = owner_id(&resource.kind, &workload.name);
                owner != 0 && (owner == target || ns.replica_sets.get(&owner) == Some(&target))
            }
            _ => pods::is_pod_of(resource, &workload.name, pod),
        }
    }

    /// Of `namespace` (all: `None`), the entries of `kind` whose keys `listed` (a relist)
    /// did not return are forgotten; returns the namespaces that lost any.
    pub fn drop_not_listed(
        &mut self,
        kind: OwnedKind,
        namespace: Option<&str>,
        listed: &HashSet<(Box<str>, u64)>,
    ) -> Vec<Box<str>> {
        let mut lost = Vec::new();
        for (name, ns) in self.namespaces.iter_mut() {
            if namespace.is_some_and(|n| n != &**name) {
                continue;
            }
            let map = ns.map(kind);
            let before = map.len();
            map.retain(|key, _| listed.contains(&(name.clone(), *key)));
            if map.len() != before {
                lost.push(name.clone());
            }
        }
        self.namespaces
            .retain(|_, ns| !ns.pods.is_empty() || !ns.replica_sets.is_empty());
        lost
    }

    /// The key a relist remembers of an entry ([`Owners::drop_not_listed`]).
    pub fn listed_key(kind: OwnedKind, namespace: &str, name: &str) -> (Box<str>, u64) {
        let key = match kind {
            OwnedKind::Pod => name_id(name),
            OwnedKind::ReplicaSet => owner_id("ReplicaSet", name),
        };
        (namespace.into(), key)
    }

    /// Running Pods recorded.
    pub fn running_pods(&self) -> usize {
        self.namespaces.values().map(|ns| ns.pods.len()).sum()
    }
}

impl Namespace {
    fn map(&mut self, kind: OwnedKind) -> &mut HashMap<u64, u64> {
        match kind {
            OwnedKind::Pod => &mut self.pods,
            OwnedKind::ReplicaSet => &mut self.replica_sets,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::Resource;

    fn key(resource: Resource, name: &str) -> WorkloadKey {
        WorkloadKey::new(std::sync::Arc::new(resource), "ns", name)
    }

    #[test]
    fn a_deployments_pods_are_those_of_its_replica_sets_not_a_daemonset_named_alike() {
        let mut o = Owners::default();
        o.set(
            OwnedKind::ReplicaSet,
            "ns",
            "web-7d9f8b6c5d",
            Some(("Deployment", "web")),
            true,
        );
        o.set(
            OwnedKind::Pod,
            "ns",
            "web-7d9f8b6c5d-x2k9p",
            Some(("ReplicaSet", "web-7d9f8b6c5d")),
            true,
        );
        // DaemonSet web-agent's Pod: shaped like one of Deployment web's.
        o.set(
            OwnedKind::Pod,
            "ns",
            "web-agent-x2k9p",
            Some(("DaemonSet", "web-agent")),
            true,
        );
        let web = key(Resource::deployments(), "web");
        let agent = key(Resource::daemonsets(), "web-agent");
        assert!(o.is_running_pod_of(&web, "web-7d9f8b6c5d-x2k9p"));
        assert!(!o.is_running_pod_of(&web, "web-agent-x2k9p"));
        assert!(o.is_running_pod_of(&agent, "web-agent-x2k9p"));
        assert!(!o.is_running_pod_of(&agent, "web-7d9f8b6c5d-x2k9p"));
        assert!(!o.is_running_pod_of(
            &key(Resource::statefulsets(), "web-agent"),
            "web-agent-x2k9p"
        ));
    }

    #[test]
    fn a_pod_that_stops_running_or_terminates_no_longer_votes() {
        let mut o = Owners::default();
        let db = key(Resource::statefulsets(), "db");
        assert!(o.set(
            OwnedKind::Pod,
            "ns",
            "db-0",
            Some(("StatefulSet", "db")),
            true
        ));
        assert!(!o.set(
            OwnedKind::Pod,
            "ns",
            "db-0",
            Some(("StatefulSet", "db")),
            true
        ));
        assert!(o.is_running_pod_of(&db, "db-0") && o.runs("ns", "db-0"));
        assert!(o.set(OwnedKind::Pod, "ns", "db-0", None, false));
        assert!(!o.is_running_pod_of(&db, "db-0") && !o.runs("ns", "db-0"));
        assert!(o.namespaces.is_empty());
        // A bare Pod runs, but is nobody's.
        o.set(OwnedKind::Pod, "ns", "db-1", None, true);
        assert!(o.runs("ns", "db-1") && !o.is_running_pod_of(&db, "db-1"));
    }

    #[test]
    fn a_cronjobs_pods_are_told_by_name_among_running_ones() {
        let mut o = Owners::default();
        let nightly = key(Resource::cronjobs(), "nightly");
        o.set(
            OwnedKind::Pod,
            "ns",
            "nightly-29043360-x2k9p",
            Some(("Job", "nightly-29043360")),
            true,
        );
        assert!(o.is_running_pod_of(&nightly, "nightly-29043360-x2k9p"));
        assert!(!o.is_running_pod_of(&nightly, "nightly-29043361-x2k9p"));
    }

    #[test]
    fn a_relist_drops_what_it_did_not_return_in_its_namespace() {
        let mut o = Owners::default();
        for (ns, pod) in [("ns", "a"), ("ns", "b"), ("other", "c")] {
            o.set(OwnedKind::Pod, ns, pod, None, true);
        }
        let listed: HashSet<_> = [Owners::listed_key(OwnedKind::Pod, "ns", "a")].into();
        assert_eq!(
            o.drop_not_listed(OwnedKind::Pod, Some("ns"), &listed),
            [Box::from("ns")]
        );
        assert!(o.runs("ns", "a") && !o.runs("ns", "b") && o.runs("other", "c"));
        assert_eq!(o.running_pods(), 2);
    }
}
