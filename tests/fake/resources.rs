//! The resource types the fake serves and how request paths map onto them
//! (`/api/v1/...`, `/apis/<group>/<version>/...`, namespaced and cluster-wide).

/// One servable resource type.
#[derive(Clone, Debug, PartialEq)]
pub struct ResourceType {
    /// Unique store key: the plural for built-ins, `plural.group` for the second `events`.
    pub key: String,
    pub plural: String,
    pub group: String,
    pub version: String,
    pub kind: String,
    pub namespaced: bool,
    /// Built-in types take strategic merge patches; custom resources answer them with 415.
    pub builtin: bool,
    /// A custom resource with a pod template that the simulated controllers roll (what
    /// `register_resource` serves); a CRD installed from its YAML is not one.
    pub custom_workload: bool,
    /// A custom resource whose CRD declares `subresources.status` (writes to the main
    /// resource keep the stored status); without it, the status is written like any field.
    pub custom_status: bool,
}

impl ResourceType {
    fn builtin(
        plural: &str,
        group: &str,
        version: &str,
        kind: &str,
        namespaced: bool,
    ) -> ResourceType {
        let key = if plural == "events" && !group.is_empty() {
            format!("{plural}.{group}")
        } else {
            plural.into()
        };
        ResourceType {
            key,
            plural: plural.into(),
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
            namespaced,
            builtin: true,
            custom_workload: false,
            custom_status: false,
        }
    }

    /// A namespaced custom resource with a pod template and a status subresource (an Argo
    /// Rollout, a `--workload-kinds` kind).
    pub fn custom(group: &str, version: &str, plural: &str, kind: &str) -> ResourceType {
        ResourceType {
            key: format!("{plural}.{group}"),
            plural: plural.into(),
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
            namespaced: true,
            builtin: false,
            custom_workload: true,
            custom_status: true,
        }
    }

    /// The types a `CustomResourceDefinition` (`apiextensions.k8s.io/v1`, as JSON) serves:
    /// one per served version, sharing one store (the versions of a CRD are views of the
    /// same objects), with its scope and its status subresource as declared.
    pub fn from_crd(crd: &serde_json::Value) -> Vec<ResourceType> {
        let spec = &crd["spec"];
        let text = |v: &serde_json::Value| v.as_str().expect("a CRD field").to_string();
        let (group, plural) = (text(&spec["group"]), text(&spec["names"]["plural"]));
        spec["versions"]
            .as_array()
            .expect("CRD versions")
            .iter()
            .filter(|v| v["served"] == true)
            .map(|v| ResourceType {
                key: format!("{plural}.{group}"),
                plural: plural.clone(),
                group: group.clone(),
                version: text(&v["name"]),
                kind: text(&spec["names"]["kind"]),
                namespaced: spec["scope"] == "Namespaced",
                builtin: false,
                custom_workload: false,
                custom_status: !v["subresources"]["status"].is_null(),
            })
            .collect()
    }

    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    pub fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }

    /// `pods`, `deployments.apps`, `leases.coordination.k8s.io`: how messages name it.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// Writes to the main resource keep the stored `status` (§3.5).
    pub fn has_status_subresource(&self) -> bool {
        if !self.builtin {
            return self.custom_status;
        }
        !matches!(
            self.plural.as_str(),
            "configmaps" | "secrets" | "events" | "leases"
        )
    }

    /// Kinds whose `metadata.generation` the server maintains.
    pub fn has_generation(&self) -> bool {
        !matches!(
            self.plural.as_str(),
            "configmaps" | "secrets" | "events" | "leases" | "namespaces"
        )
    }

    /// Workloads whose pod template the simulated controller rolls out.
    pub fn is_workload(&self) -> bool {
        matches!(
            self.plural.as_str(),
            "deployments" | "statefulsets" | "daemonsets"
        ) || (!self.builtin && self.custom_workload)
    }

    /// Kinds whose PUT may create a missing object (`AllowCreateOnUpdate`).
    pub fn allows_create_on_update(&self) -> bool {
        matches!(self.plural.as_str(), "leases" | "events")
    }

    /// Kinds whose PUT must carry `metadata.resourceVersion` (`AllowUnconditionalUpdate` false).
    pub fn requires_resource_version_on_update(&self) -> bool {
        self.plural == "leases"
    }
}

/// The built-in types.
pub fn builtin_types() -> Vec<ResourceType> {
    vec![
        ResourceType::builtin("configmaps", "", "v1", "ConfigMap", true),
        ResourceType::builtin("secrets", "", "v1", "Secret", true),
        ResourceType::builtin("pods", "", "v1", "Pod", true),
        ResourceType::builtin("events", "", "v1", "Event", true),
        ResourceType::builtin("namespaces", "", "v1", "Namespace", false),
        ResourceType::builtin("deployments", "apps", "v1", "Deployment", true),
        ResourceType::builtin("statefulsets", "apps", "v1", "StatefulSet", true),
        ResourceType::builtin("daemonsets", "apps", "v1", "DaemonSet", true),
        ResourceType::builtin("replicasets", "apps", "v1", "ReplicaSet", true),
        ResourceType::builtin("cronjobs", "batch", "v1", "CronJob", true),
        ResourceType::builtin("jobs", "batch", "v1", "Job", true),
        ResourceType::builtin(
            "poddisruptionbudgets",
            "policy",
            "v1",
            "PodDisruptionBudget",
            true,
        ),
        ResourceType::builtin("leases", "coordination.k8s.io", "v1", "Lease", true),
        ResourceType::builtin("events", "events.k8s.io", "v1", "Event", true),
    ]
}

/// Where a request path points.
#[derive(Clone, Debug, PartialEq)]
pub struct Route {
    pub resource: ResourceType,
    /// `None`: all namespaces (or a cluster-scoped type).
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
}

/// Splits `/api/v1/...` or `/apis/g/v/...` into (group, version, rest segments).
fn split_prefix(path: &str) -> Option<(String, String, Vec<&str>)> {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    match segments.as_slice() {
        ["api", version, rest @ ..] => Some((String::new(), version.to_string(), rest.to_vec())),
        ["apis", group, version, rest @ ..] => {
            Some((group.to_string(), version.to_string(), rest.to_vec()))
        }
        _ => None,
    }
}

/// Resolves a path against the known types; `None` is the 404 of wire 101.
pub fn route(types: &[ResourceType], path: &str) -> Option<Route> {
    let (group, version, rest) = split_prefix(path)?;
    let find = |plural: &str| {
        types
            .iter()
            .find(|t| t.plural == plural && t.group == group && t.version == version)
            .cloned()
    };
    let (resource, namespace, tail) = match rest.as_slice() {
        ["namespaces", ns, plural, tail @ ..] if find(plural).is_some_and(|t| t.namespaced) => {
            (find(plural)?, Some(ns.to_string()), tail.to_vec())
        }
        ["namespaces", _, sub, ..] if !matches!(*sub, "status" | "finalize") => return None,
        ["namespaces", tail @ ..] => (find("namespaces")?, None, tail.to_vec()),
        [plural, tail @ ..] => (find(plural)?, None, tail.to_vec()),
        _ => return None,
    };
    let route = |name: Option<&str>, sub: Option<&str>| Route {
        resource: resource.clone(),
        namespace: namespace.clone(),
        name: name.map(str::to_string),
        subresource: sub.map(str::to_string),
    };
    match tail.as_slice() {
        [] => Some(route(None, None)),
        [name] if !name.is_empty() => Some(route(Some(name), None)),
        [name, sub] if !name.is_empty() => Some(route(Some(name), Some(sub))),
        _ => None,
    }
}

/// The plural resource named in a path, or "" (used by `Request::resource`).
pub fn plural_in_path(path: &str) -> String {
    let Some((_, _, rest)) = split_prefix(path) else {
        return String::new();
    };
    match rest.as_slice() {
        ["namespaces", _, plural, ..] => plural.to_string(),
        ["namespaces", ..] => "namespaces".into(),
        [plural, ..] => plural.to_string(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_namespaced_cluster_wide_and_subresource_paths() {
        let types = builtin_types();
        let r = route(&types, "/apis/apps/v1/namespaces/ns/deployments/web").unwrap();
        assert_eq!(
            (
                r.resource.plural.as_str(),
                r.namespace.as_deref(),
                r.name.as_deref()
            ),
            ("deployments", Some("ns"), Some("web"))
        );
        let r = route(&types, "/api/v1/configmaps").unwrap();
        assert_eq!((r.namespace, r.name), (None, None));
        let r = route(&types, "/api/v1/namespaces/ns/pods/p/eviction").unwrap();
        assert_eq!(r.subresource.as_deref(), Some("eviction"));
        let r = route(&types, "/api/v1/namespaces/ns").unwrap();
        assert_eq!(
            (r.resource.plural.as_str(), r.name.as_deref()),
            ("namespaces", Some("ns"))
        );
        assert!(route(&types, "/api/v1/namespaces/ns/nosuchresources").is_none());
        assert!(route(&types, "/apis/apps/v2/namespaces/ns/deployments").is_none());
        assert_eq!(
            plural_in_path("/api/v1/namespaces/ns/pods/p/eviction"),
            "pods"
        );
    }
}
