//! The I/O of `wavelet impact`: the files it is given (`-f`, `--base`, `--manifests`; `-`
//! is standard input) and, live, what the cluster holds in the namespaces of the changed
//! objects. Reading only: LIST and GET, never a write.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;

use crate::client::{Client, Shape};
use crate::error::Error;
use crate::hashmode::fanout::{self, record};
use crate::impact::input::{self, Documents, NamespaceDoc};
use crate::impact::plan::World;
use crate::model::references::references;
use crate::model::state::{StateConfigMap, PAUSE_KEY};
use crate::objects::{
    ConfigKey, ConfigKind, ConfigMapItem, ConfigObject, Pod, Resource, SecretItem, WorkloadObject,
};
use crate::watch::source::list_each;

fn config_error(msg: String) -> Error {
    Error::Config(msg)
}

/// Reads the files (or standard input for `-`; a directory: its `.yaml`, `.yml` and
/// `.json` files, as `kubectl apply -f DIR`) into documents; objects without a namespace
/// get `default_namespace`.
pub fn read_files(paths: &[PathBuf], default_namespace: &str) -> Result<Documents, Error> {
    let mut docs = Documents::default();
    let mut files = Vec::new();
    for path in paths {
        if path.is_dir() {
            files.extend(manifest_files(std::slice::from_ref(path))?);
        } else {
            files.push(path.clone());
        }
    }
    for path in &files {
        let (text, name) = if path == Path::new("-") {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .map_err(|e| config_error(format!("reading standard input: {e}")))?;
            (text, "standard input".to_string())
        } else {
            let text = std::fs::read_to_string(path)
                .map_err(|e| config_error(format!("cannot read {}: {e}", path.display())))?;
            (text, path.display().to_string())
        };
        input::read(&text, &name, default_namespace, &mut docs).map_err(config_error)?;
    }
    Ok(docs)
}

/// Every `.yaml`, `.yml` and `.json` file under each directory (or the file itself), in
/// name order.
pub fn manifest_files(roots: &[PathBuf]) -> Result<Vec<PathBuf>, Error> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), Error> {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(|e| config_error(format!("cannot read directory {}: {e}", dir.display())))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                walk(&path, out)?;
            } else if path
                .extension()
                .is_some_and(|e| e == "yaml" || e == "yml" || e == "json")
            {
                out.push(path);
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    for root in roots {
        if root.is_dir() {
            walk(root, &mut out)?;
        } else {
            out.push(root.clone());
        }
    }
    Ok(out)
}

/// The world as the manifests and `--base` say. Without `--base`, every key of each
/// proposed object is judged changed: the object before is taken to hold the same keys
/// with other values. A ConfigMap or Secret a workload uses that neither gives is taken
/// as present and unchanged (the cluster has it; it is not what the change is about),
/// and said so in `notes`.
pub fn offline(
    manifests: Documents,
    base: Option<Documents>,
    proposed: &[(ConfigKind, ConfigObject)],
    notes: &mut Vec<String>,
) -> World {
    let same = |(k, o): &(ConfigKind, ConfigObject),
                (kind, object): &(ConfigKind, ConfigObject)| {
        k == kind
            && o.metadata.namespace == object.metadata.namespace
            && o.metadata.name == object.metadata.name
    };
    // The manifests may be the rendered change itself: their copy of an object of -f says
    // nothing of how it is now; --base does, or, without it, every key counts as changed.
    let mut configs = manifests.configs;
    configs.retain(|c| !proposed.iter().any(|p| same(c, p)));
    match base {
        Some(base) => {
            for object in base.configs {
                configs.retain(|c| !same(c, &object));
                configs.push(object);
            }
        }
        None => {
            for (kind, object) in proposed {
                configs.push((*kind, every_key_other(object)));
            }
        }
    }
    let given = |configs: &[(ConfigKind, ConfigObject)], key: &ConfigKey| {
        configs.iter().chain(proposed).any(|(k, o)| {
            *k == key.kind && o.metadata.namespace == *key.namespace && o.metadata.name == *key.name
        })
    };
    let mut assumed = BTreeSet::new();
    for (_, workload) in &manifests.workloads {
        for reference in references(workload) {
            let key = &reference.config;
            if key.kind == ConfigKind::SecretProviderClass || given(&configs, key) {
                continue;
            }
            let mut object = ConfigObject::default();
            object.metadata.namespace = key.namespace.to_string();
            object.metadata.name = key.name.to_string();
            object.data = Some(
                reference
                    .keys
                    .names()
                    .map(|k| (Box::from(k), [0; 32]))
                    .collect(),
            );
            assumed.insert(key.to_string());
            configs.push((key.kind, object));
        }
    }
    if !assumed.is_empty() {
        notes.push(format!(
            "offline: taken as present and unchanged (neither in --manifests nor --base): {}",
            assumed.into_iter().collect::<Vec<_>>().join(", ")
        ));
    }
    World {
        configs,
        workloads: manifests.workloads,
        namespaces: manifests.namespaces,
        pods: None,
        paused_since: None,
        fan_outs: Vec::new(),
    }
}

/// The object with the same keys and annotations, and other values.
fn every_key_other(object: &ConfigObject) -> ConfigObject {
    let mut before = object.clone();
    before.data = Some(
        object
            .digests()
            .iter()
            .map(|(k, d)| {
                let mut other = *d;
                other[0] ^= 0xff;
                (k.clone(), other)
            })
            .collect(),
    );
    before
}

#[derive(Deserialize)]
#[serde(transparent)]
struct PodItem(Pod);

#[derive(Deserialize, Default)]
struct NamespaceWire {
    #[serde(default)]
    metadata: NamespaceMeta,
}

#[derive(Deserialize, Default)]
struct NamespaceMeta {
    #[serde(default)]
    name: String,
    #[serde(default)]
    labels: Option<BTreeMap<String, String>>,
    #[serde(default)]
    annotations: Option<BTreeMap<String, String>>,
}

/// What the cluster holds in `namespaces` (those of the proposed objects): ConfigMaps and
/// Secrets (digested as they are read), the workloads `run` watches, Pods (for delete
/// mode), the Namespaces themselves; and the global pause from `wavelet-state` in
/// `state_namespace` (not found or not readable: taken as not paused, with a note).
pub fn live(
    client: &Client,
    namespaces: &BTreeSet<String>,
    state_namespace: Option<&str>,
    notes: &mut Vec<String>,
) -> Result<World, Error> {
    let mut world = World {
        pods: Some(Vec::new()),
        ..World::default()
    };
    for namespace in namespaces {
        let ns = Some(namespace.as_str());
        list_each(
            client,
            &Resource::configmaps(),
            ns,
            Shape::Whole,
            &mut |item: ConfigMapItem| {
                world.configs.push((ConfigKind::ConfigMap, item.0));
            },
        )?;
        list_each(
            client,
            &Resource::secrets(),
            ns,
            Shape::Whole,
            &mut |item: SecretItem| {
                world.configs.push((ConfigKind::Secret, item.0));
            },
        )?;
        for resource in [
            Resource::deployments(),
            Resource::statefulsets(),
            Resource::daemonsets(),
            Resource::cronjobs(),
            Resource::rollouts(),
        ] {
            let resource = Arc::new(resource);
            let listed = list_each(
                client,
                &resource,
                ns,
                Shape::Whole,
                &mut |w: WorkloadObject| {
                    world.workloads.push((Arc::clone(&resource), w));
                },
            );
            match listed {
                // Argo Rollouts are served only where installed.
                Err(e) if e.is_not_found() && resource.is_argo_rollouts() => {}
                other => other?,
            }
        }
        let pods = world.pods.as_mut().expect("set above");
        list_each(
            client,
            &Resource::pods(),
            ns,
            Shape::Whole,
            &mut |p: PodItem| {
                pods.push((namespace.clone(), p.0));
            },
        )?;
        match client.get::<NamespaceWire>(&format!("/api/v1/namespaces/{namespace}")) {
            Ok(n) => world.namespaces.push(NamespaceDoc {
                name: n.metadata.name,
                labels: n.metadata.labels.unwrap_or_default(),
                annotations: n.metadata.annotations.unwrap_or_default(),
            }),
            Err(e) if e.is_not_found() => {}
            Err(e) => notes.push(format!(
                "cannot read Namespace {namespace} ({e}): its pause and restart window are not shown"
            )),
        }
    }
    let Some(state_namespace) = state_namespace else {
        notes.push(format!(
            "where the running wavelet keeps {} was not found (see above; --state-namespace names it): the global pause and fan-outs under way are not shown",
            crate::model::state::STATE_CONFIGMAP
        ));
        return Ok(world);
    };
    let state = StateConfigMap::new(client.clone(), state_namespace.to_string(), true);
    match state.get(PAUSE_KEY) {
        Ok(entry) => {
            world.paused_since = entry.map(|e| record::paused_since(&e));
            world.fan_outs = fanout::recorded(&state);
        }
        Err(e) => notes.push(format!(
            "cannot read ConfigMap {state_namespace}/{} ({e}): the global pause and fan-outs under way are not shown",
            crate::model::state::STATE_CONFIGMAP
        )),
    }
    Ok(world)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::impact::plan::{plan, Settings};

    fn docs(text: &str) -> Documents {
        let mut out = Documents::default();
        input::read(text, "test", "team", &mut out).unwrap();
        out
    }

    const WEB: &str = "kind: Deployment\nmetadata: {name: web, annotations: {wavelet.dev/update-on-config-change: 'true'}}\n\
        spec: {template: {spec: {containers: [{name: c, image: i, envFrom: [{configMapRef: {name: a}}], \
        env: [{name: T, valueFrom: {secretKeyRef: {name: s, key: token}}}]}]}}}\n";

    #[test]
    fn offline_without_base_every_key_changes_and_objects_not_given_are_present() {
        let proposed = docs("kind: ConfigMap\nmetadata: {name: a}\ndata: {x: '1'}\n").configs;
        let mut notes = Vec::new();
        let world = offline(docs(WEB), None, &proposed, &mut notes);
        assert_eq!(
            notes,
            ["offline: taken as present and unchanged (neither in --manifests nor --base): secret team/s"]
        );
        let impact = plan(&world, &proposed, &Settings::default());
        assert_eq!(impact.objects[0].keys_changed, ["x"]);
        assert_eq!(impact.rolls(), 1, "{impact:?}");
    }

    #[test]
    fn offline_an_object_in_the_manifests_and_in_f_but_not_in_base_is_new() {
        let proposed = docs("kind: ConfigMap\nmetadata: {name: a}\ndata: {x: '1'}\n").configs;
        let mut manifests = docs(WEB);
        manifests.configs = proposed.clone();
        let base = docs("kind: ConfigMap\nmetadata: {name: other}\ndata: {x: '1'}\n");
        let world = offline(manifests, Some(base), &proposed, &mut Vec::new());
        let impact = plan(&world, &proposed, &Settings::default());
        assert_eq!(impact.objects[0].change, crate::impact::plan::Change::New);
        assert!(
            impact.objects[0].rolls[0].why.starts_with("waits for it"),
            "{impact:?}"
        );
    }

    #[test]
    fn a_directory_is_read_file_by_file_in_name_order() {
        let dir = std::env::temp_dir().join(format!("wavelet-impact-read-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(dir.join("b.yaml"), "kind: ConfigMap\nmetadata: {name: b}\n").unwrap();
        std::fs::write(
            dir.join("sub/a.json"),
            r#"{"kind": "ConfigMap", "metadata": {"name": "a"}}"#,
        )
        .unwrap();
        std::fs::write(
            dir.join("notes.txt"),
            "kind: ConfigMap\nmetadata: {name: no}\n",
        )
        .unwrap();
        let read = read_files(std::slice::from_ref(&dir), "team");
        std::fs::remove_dir_all(&dir).unwrap();
        let names: Vec<String> = read
            .unwrap()
            .configs
            .into_iter()
            .map(|(_, o)| o.metadata.name)
            .collect();
        assert_eq!(names, ["b", "a"]);
    }

    #[test]
    fn offline_with_base_compares_with_it() {
        let proposed = docs("kind: ConfigMap\nmetadata: {name: a}\ndata: {x: '1'}\n").configs;
        let base = docs("kind: ConfigMap\nmetadata: {name: a}\ndata: {x: '1'}\n");
        let world = offline(docs(WEB), Some(base), &proposed, &mut Vec::new());
        let impact = plan(&world, &proposed, &Settings::default());
        assert_eq!(impact.rolls(), 0);
        assert_eq!(
            impact.objects[0].rolls_not[0].why,
            "the data does not change"
        );
    }
}
