//! `wavelet migrate wave`: removes what older Wave versions left in a cluster, with the
//! user's own credentials (wavelet itself never writes users' ConfigMaps or Secrets).
//!
//! Wave before its reverse-index rewrite put the finalizer `wave.pusher.com/finalizer` on
//! every opted-in Deployment, StatefulSet and DaemonSet, and an OwnerReference to that
//! workload on every ConfigMap and Secret it referenced (wave-k8s/wave
//! `pkg/core/finalizer.go`, `owner_references.go`). Left behind, the finalizer keeps the
//! workload from being deleted, and the owner references make the garbage collector
//! delete the configuration with the workload (Wave's issues #79 and #153). Exactly those
//! entries are found, and removed with patches guarded by `resourceVersion`; every other
//! finalizer and owner reference stays.

use std::io::Write;

use serde::Deserialize;
use serde_json::{json, Value};

use crate::client::{Client, PatchType, Shape};
use crate::error::Error;
use crate::objects::Resource;
use crate::watch::source::list_each;

/// The finalizer older Wave versions put on workloads.
pub const WAVE_FINALIZER: &str = "wave.pusher.com/finalizer";

/// How often a patch is retried after a 409 (someone else wrote the object meanwhile).
const CONFLICT_RETRIES: usize = 5;

/// The metadata this command reads (any object; a Secret's data is never decoded).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Meta {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub namespace: String,
    #[serde(default)]
    pub uid: String,
    #[serde(default)]
    pub resource_version: String,
    #[serde(default)]
    pub finalizers: Vec<String>,
    /// Kept whole: the ones that stay are written back exactly.
    #[serde(default)]
    pub owner_references: Vec<Value>,
}

/// Any object, as far as its metadata goes.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Object {
    #[serde(default)]
    pub metadata: Meta,
}

/// One entry to remove.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Leftover {
    /// Wave's finalizer on a workload.
    Finalizer {
        resource: Resource,
        namespace: String,
        name: String,
    },
    /// An owner reference from a ConfigMap or Secret to a workload that carries Wave's
    /// finalizer.
    OwnerReference {
        resource: Resource,
        namespace: String,
        name: String,
        owner_kind: String,
        owner_name: String,
        owner_uid: String,
    },
}

impl Leftover {
    fn row(&self) -> (String, String, String) {
        match self {
            Leftover::Finalizer {
                resource,
                namespace,
                name,
            } => (
                "finalizer".into(),
                format!("{} {namespace}/{name}", resource.kind),
                WAVE_FINALIZER.into(),
            ),
            Leftover::OwnerReference {
                resource,
                namespace,
                name,
                owner_kind,
                owner_name,
                owner_uid,
            } => (
                "ownerReference".into(),
                format!("{} {namespace}/{name}", resource.kind),
                format!("{owner_kind} {owner_name} (uid {owner_uid})"),
            ),
        }
    }
}

/// The owner references of `meta` that point at one of `wave_uids`, as (kind, name, uid).
pub fn wave_owner_references(meta: &Meta, wave_uids: &[String]) -> Vec<(String, String, String)> {
    meta.owner_references
        .iter()
        .filter_map(|r| {
            let uid = r["uid"].as_str()?;
            wave_uids.iter().any(|u| u == uid).then(|| {
                (
                    r["kind"].as_str().unwrap_or_default().to_string(),
                    r["name"].as_str().unwrap_or_default().to_string(),
                    uid.to_string(),
                )
            })
        })
        .collect()
}

/// Finds Wave's leftovers in one namespace or all.
pub fn find(client: &Client, namespace: Option<&str>) -> Result<Vec<Leftover>, Error> {
    let mut leftovers = Vec::new();
    let mut wave_uids = Vec::new();
    for resource in [
        Resource::deployments(),
        Resource::statefulsets(),
        Resource::daemonsets(),
    ] {
        list_each(
            client,
            &resource,
            namespace,
            Shape::Metadata,
            &mut |o: Object| {
                if o.metadata.finalizers.iter().any(|f| f == WAVE_FINALIZER) {
                    wave_uids.push(o.metadata.uid.clone());
                    leftovers.push(Leftover::Finalizer {
                        resource: resource.clone(),
                        namespace: o.metadata.namespace,
                        name: o.metadata.name,
                    });
                }
            },
        )?;
    }
    if wave_uids.is_empty() {
        return Ok(leftovers);
    }
    for resource in [Resource::configmaps(), Resource::secrets()] {
        list_each(
            client,
            &resource,
            namespace,
            Shape::Metadata,
            &mut |o: Object| {
                for (owner_kind, owner_name, owner_uid) in
                    wave_owner_references(&o.metadata, &wave_uids)
                {
                    leftovers.push(Leftover::OwnerReference {
                        resource: resource.clone(),
                        namespace: o.metadata.namespace.clone(),
                        name: o.metadata.name.clone(),
                        owner_kind,
                        owner_name,
                        owner_uid,
                    });
                }
            },
        )?;
    }
    Ok(leftovers)
}

/// Prints the table of `leftovers`.
pub fn print_table(leftovers: &[Leftover], out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(out, "{:<16} {:<50} ENTRY", "WHAT", "OBJECT")?;
    for leftover in leftovers {
        let (what, object, entry) = leftover.row();
        writeln!(out, "{what:<16} {object:<50} {entry}")?;
    }
    Ok(())
}

/// Removes each leftover with a JSON merge patch of the whole remaining list and the
/// `resourceVersion` it was computed from; a 409 re-reads and tries again.
pub fn apply(client: &Client, leftovers: &[Leftover], out: &mut dyn Write) -> Result<(), Error> {
    let write_err = |e: std::io::Error| Error::Transport(format!("writing output: {e}"));
    for leftover in leftovers {
        let (resource, namespace, name) = match leftover {
            Leftover::Finalizer {
                resource,
                namespace,
                name,
            }
            | Leftover::OwnerReference {
                resource,
                namespace,
                name,
                ..
            } => (resource, namespace, name),
        };
        let path = resource.object_path(namespace, name);
        let mut attempts = 0;
        loop {
            attempts += 1;
            let current: Object = match client.get(&path) {
                Ok(o) => o,
                Err(e) if e.is_not_found() => break,
                Err(e) => return Err(e),
            };
            let meta = current.metadata;
            let patch = match leftover {
                Leftover::Finalizer { .. } => {
                    let kept: Vec<&String> = meta
                        .finalizers
                        .iter()
                        .filter(|f| *f != WAVE_FINALIZER)
                        .collect();
                    if kept.len() == meta.finalizers.len() {
                        break; // removed meanwhile
                    }
                    json!({"metadata": {"resourceVersion": meta.resource_version, "finalizers": kept}})
                }
                Leftover::OwnerReference { owner_uid, .. } => {
                    let kept: Vec<&Value> = meta
                        .owner_references
                        .iter()
                        .filter(|r| r["uid"].as_str() != Some(owner_uid.as_str()))
                        .collect();
                    if kept.len() == meta.owner_references.len() {
                        break;
                    }
                    json!({"metadata": {"resourceVersion": meta.resource_version, "ownerReferences": kept}})
                }
            };
            match client.patch::<serde::de::IgnoredAny>(&path, PatchType::Merge, &patch) {
                Ok(_) => {
                    let (what, object, entry) = leftover.row();
                    writeln!(out, "removed {what} {entry} from {object}").map_err(write_err)?;
                    break;
                }
                Err(e)
                    if e.status().is_some_and(|s| s.is_conflict())
                        && attempts <= CONFLICT_RETRIES =>
                {
                    continue;
                }
                Err(e) => return Err(e),
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_owner_references_to_waves_workloads_are_found() {
        let meta: Meta = serde_json::from_value(json!({
            "name": "cfg", "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": "wave-uid"},
                {"apiVersion": "v1", "kind": "ConfigMap", "name": "other", "uid": "other-uid"}]
        }))
        .unwrap();
        assert_eq!(
            wave_owner_references(&meta, &["wave-uid".to_string()]),
            [(
                "Deployment".to_string(),
                "web".to_string(),
                "wave-uid".to_string()
            )]
        );
        assert!(wave_owner_references(&meta, &["nope".to_string()]).is_empty());
    }
}
