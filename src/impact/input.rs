//! What `wavelet impact` reads from files, as pure functions of their text: the
//! ConfigMaps and Secrets of `-f` and `--base` (as `kubectl apply` would store them:
//! `stringData` merged into `data`), and the workloads and Namespaces of `--manifests`
//! (multi-document YAML or JSON, `kind: List` included: kustomize and Helm output).
//!
//! Values are digested as they are read (`objects::ConfigObject`), never kept, and no
//! error message quotes one: a bad value is named by its key only.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::client::yaml;
use crate::objects::{base64, ConfigKind, ConfigObject, Resource, WorkloadObject};

/// Everything the documents of one or more files hold that `impact` reads.
#[derive(Debug, Default)]
pub struct Documents {
    /// ConfigMaps and Secrets, in file order.
    pub configs: Vec<(ConfigKind, ConfigObject)>,
    /// Workloads with a pod template (Deployments, StatefulSets, DaemonSets, CronJobs,
    /// Argo Rollouts).
    pub workloads: Vec<(Arc<Resource>, WorkloadObject)>,
    /// Namespaces: name, labels and annotations.
    pub namespaces: Vec<NamespaceDoc>,
}

/// A Namespace as a manifest gives it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NamespaceDoc {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
}

/// Reads every document of `text` (named `source` in errors) into `into`; objects without
/// a namespace get `default_namespace`, as `kubectl apply -n` gives them. Documents of
/// other kinds are skipped.
pub fn read(
    text: &str,
    source: &str,
    default_namespace: &str,
    into: &mut Documents,
) -> Result<(), String> {
    let docs = yaml::parse_all(text).map_err(|e| format!("{source}: {e}"))?;
    for (i, doc) in docs.into_iter().enumerate() {
        let at = format!("{source}: document {}", i + 1);
        read_document(doc, &at, default_namespace, into)?;
    }
    Ok(())
}

fn read_document(
    doc: Value,
    at: &str,
    default_namespace: &str,
    into: &mut Documents,
) -> Result<(), String> {
    let Value::Object(mut object) = doc else {
        return Err(format!("{at}: not a Kubernetes object (a mapping)"));
    };
    let kind = object
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if kind == "List" || kind.ends_with("List") && object.contains_key("items") {
        let items = match object.remove("items") {
            Some(Value::Array(items)) => items,
            _ => Vec::new(),
        };
        for (j, item) in items.into_iter().enumerate() {
            read_document(
                item,
                &format!("{at}, item {}", j + 1),
                default_namespace,
                into,
            )?;
        }
        return Ok(());
    }
    let name = object
        .get("metadata")
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if kind == "Namespace" {
        into.namespaces.push(NamespaceDoc {
            labels: string_map(object.get("metadata").and_then(|m| m.get("labels"))),
            annotations: string_map(object.get("metadata").and_then(|m| m.get("annotations"))),
            name,
        });
        return Ok(());
    }
    let config_kind = match kind.as_str() {
        "ConfigMap" => Some(ConfigKind::ConfigMap),
        "Secret" => Some(ConfigKind::Secret),
        _ => None,
    };
    let workload = Resource::known_workload(&kind).filter(|_| !kind.is_empty());
    if config_kind.is_none() && workload.is_none() {
        return Ok(());
    }
    if name.is_empty() {
        return Err(format!("{at}: a {kind} without metadata.name"));
    }
    let at = format!("{at} ({kind} {name})");
    set_default_namespace(&mut object, default_namespace);
    if let Some(kind) = config_kind {
        let object = config_object(kind, object, &at)?;
        into.configs.push((kind, object));
        return Ok(());
    }
    let resource = workload.expect("checked above");
    let workload: WorkloadObject =
        serde_json::from_value(Value::Object(object)).map_err(|e| format!("{at}: {e}"))?;
    into.workloads.push((Arc::new(resource), workload));
    Ok(())
}

fn set_default_namespace(object: &mut Map<String, Value>, default_namespace: &str) {
    let metadata = object
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(metadata) = metadata {
        let missing = metadata
            .get("namespace")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty);
        if missing {
            metadata.insert("namespace".into(), default_namespace.into());
        }
    }
}

fn string_map(value: Option<&Value>) -> BTreeMap<String, String> {
    value
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// A ConfigMap or Secret as the API server would store it, digested. Every value must be
/// a string (or empty); a Secret's `data` and a ConfigMap's `binaryData` base64. Errors
/// name the key, never the value.
fn config_object(
    kind: ConfigKind,
    mut object: Map<String, Value>,
    at: &str,
) -> Result<ConfigObject, String> {
    let fields: &[&str] = match kind {
        ConfigKind::Secret => &["data", "stringData"],
        _ => &["data", "binaryData"],
    };
    for field in fields {
        let Some(value) = object.get_mut(*field) else {
            continue;
        };
        if value.is_null() {
            *value = Value::Object(Map::new());
        }
        let Value::Object(map) = value else {
            return Err(format!(
                "{at}: {field} must be a mapping of keys to strings"
            ));
        };
        let base64_field =
            (kind == ConfigKind::Secret && *field == "data") || *field == "binaryData";
        for (key, value) in map.iter_mut() {
            if value.is_null() {
                *value = Value::String(String::new());
            }
            let Some(text) = value.as_str() else {
                return Err(format!(
                    "{at}: {field}.{key} must be a string (quote it in YAML)"
                ));
            };
            if base64_field && base64::decode(text.as_bytes()).is_err() {
                return Err(format!("{at}: {field}.{key} is not valid base64"));
            }
        }
    }
    if kind == ConfigKind::Secret {
        // `stringData` is merged into `data` on write, and wins on a shared key.
        if let Some(Value::Object(plain)) = object.remove("stringData") {
            let data = object
                .entry("data")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(data) = data {
                for (key, value) in plain {
                    let text = value.as_str().unwrap_or_default();
                    data.insert(key, Value::String(base64::encode(text.as_bytes())));
                }
            }
        }
        // A Secret's `kind` would make it read as metadata only if it said so.
        object.remove("kind");
        return ConfigObject::secret(Value::Object(object)).map_err(|e| format!("{at}: {e}"));
    }
    ConfigObject::configmap(Value::Object(object)).map_err(|e| format!("{at}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn docs(text: &str) -> Documents {
        let mut out = Documents::default();
        read(text, "f.yaml", "team", &mut out).unwrap();
        out
    }

    fn error(text: &str) -> String {
        read(text, "f.yaml", "team", &mut Documents::default()).unwrap_err()
    }

    fn keys(object: &ConfigObject) -> Vec<&str> {
        object.digests().iter().map(|(k, _)| &**k).collect()
    }

    #[test]
    fn every_document_and_list_item_is_read_with_the_default_namespace() {
        let read = docs(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {x: '1', y: two}\n---\n\
             apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: b, namespace: other}, binaryData: {z: aGk=}}\n\
             - {apiVersion: v1, kind: Service, metadata: {name: s}}\n",
        );
        let names: Vec<(String, String)> = read
            .configs
            .iter()
            .map(|(_, o)| (o.metadata.namespace.clone(), o.metadata.name.clone()))
            .collect();
        assert_eq!(
            names,
            [("team".into(), "a".into()), ("other".into(), "b".into())]
        );
        assert_eq!(keys(&read.configs[0].1), ["x", "y"]);
        assert_eq!(keys(&read.configs[1].1), ["z"]);
    }

    #[test]
    fn a_secrets_string_data_is_merged_into_data_and_wins() {
        // "aGk=" is base64 of "hi".
        let both = docs(
            "kind: Secret\nmetadata: {name: s}\ndata: {a: aGk=, b: aGk=}\nstringData: {b: hi, c: hi}\n",
        );
        let plain = docs("kind: Secret\nmetadata: {name: s}\nstringData: {a: hi, b: hi, c: hi}\n");
        let (both, plain) = (&both.configs[0].1, &plain.configs[0].1);
        assert_eq!(keys(both), ["a", "b", "c"]);
        assert_eq!(both.digests(), plain.digests());
    }

    #[test]
    fn a_bad_value_is_named_by_its_key_never_quoted() {
        let bad = error("kind: Secret\nmetadata: {name: s}\ndata: {token: 'not base64 s3cr3t!'}\n");
        assert_eq!(
            bad,
            "f.yaml: document 1 (Secret s): data.token is not valid base64"
        );
        let number = error("kind: ConfigMap\nmetadata: {name: c}\ndata: {port: 8080}\n");
        assert!(number.contains("data.port must be a string"), "{number}");
        assert!(!number.contains("8080"));
        assert!(error("kind: ConfigMap\nmetadata: {}\n").contains("without metadata.name"));
        assert!(error("a: [1\n").starts_with("f.yaml: line 2"));
    }

    #[test]
    fn workloads_and_namespaces_of_manifests_are_read() {
        let read = docs(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, annotations: {wavelet.dev/update-on-config-change: 'true'}}\n\
             spec: {template: {spec: {containers: [{name: c, image: i}]}}}\n---\n\
             apiVersion: v1\nkind: Namespace\nmetadata: {name: team, labels: {tier: web}}\n",
        );
        assert_eq!(read.workloads.len(), 1);
        assert_eq!(read.workloads[0].0.plural, "deployments");
        assert_eq!(read.workloads[0].1.metadata.namespace, "team");
        assert_eq!(read.namespaces[0].labels.get("tier").unwrap(), "web");
    }
}
