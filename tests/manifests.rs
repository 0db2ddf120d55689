//! Every file in `manifests/` parses and has the shape the API expects, checked against the
//! API server's own OpenAPI schema in `../shared/k8s-openapi/`; the examples reference
//! objects that exist in the examples; the Deployments keep their security settings.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::Value;

/// One manifest: its path relative to the repository, and the object.
pub struct Manifest {
    pub path: String,
    pub object: Value,
}

/// Every `*.yaml` under `manifests/` (one document per file, read with wavelet's own strict
/// YAML-subset parser), sorted by path.
pub fn manifests() -> Vec<Manifest> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    collect_yaml(&root.join("manifests"), &mut files);
    files.sort();
    assert!(!files.is_empty(), "no manifests found");
    files
        .into_iter()
        .map(|file| {
            let text = std::fs::read_to_string(&file).unwrap();
            let path = file.strip_prefix(root).unwrap().display().to_string();
            let object =
                wavelet::client::yaml::parse(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
            Manifest { path, object }
        })
        .collect()
}

/// A tool decompressed from ../shared/k8s-bin (`kubectl`, `helm`): `$WAVELET_<NAME>`, else
/// `target/k8s-bin/<name>` (where `.ci/run` puts it). `None` (with a line saying the test
/// did not run) when absent; a panic instead when `CI` is set, so CI cannot pass without it.
pub fn k8s_tool(name: &str) -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let path = std::env::var_os(format!("WAVELET_{}", name.to_ascii_uppercase()))
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target/k8s-bin").join(name));
    if path.is_file() {
        return Some(path);
    }
    let message = format!(
        "{} is absent: this test DID NOT RUN (decompress ../shared/k8s-bin/{name}.xz there, as .ci/run does)",
        path.display()
    );
    assert!(std::env::var_os("CI").is_none(), "{message}");
    eprintln!("{message}");
    None
}

/// Objects keyed by kind, namespace and name.
pub type Objects = BTreeMap<(String, String, String), Value>;

pub fn object_key(object: &Value) -> (String, String, String) {
    let field = |v: &Value| v.as_str().unwrap_or_default().to_string();
    (
        field(&object["kind"]),
        field(&object["metadata"]["namespace"]),
        field(&object["metadata"]["name"]),
    )
}

/// The objects of a multi-document YAML stream (`helm template`, `kubectl kustomize`);
/// comment lines and empty documents are skipped, a duplicate object is a failure.
pub fn parse_objects(origin: &str, text: &str) -> Objects {
    let mut objects = Objects::new();
    for doc in text.split("\n---\n") {
        let doc: String = doc
            .lines()
            .filter(|l| !l.starts_with('#') && *l != "---")
            .map(|l| format!("{l}\n"))
            .collect();
        if doc.trim().is_empty() {
            continue;
        }
        let object = wavelet::client::yaml::parse(&doc)
            .unwrap_or_else(|e| panic!("{origin}: {e} in\n{doc}"));
        assert!(
            objects.insert(object_key(&object), object).is_none(),
            "{origin}: duplicate"
        );
    }
    objects
}

/// The plain objects in the given directories of `manifests/` ("" is the top level only).
pub fn plain_objects(dirs: &[&str]) -> Objects {
    let mut objects = Objects::new();
    for m in manifests() {
        let dir = Path::new(&m.path)
            .parent()
            .unwrap()
            .strip_prefix("manifests")
            .unwrap();
        if dirs.contains(&dir.to_str().unwrap()) {
            assert!(
                objects.insert(object_key(&m.object), m.object).is_none(),
                "duplicate"
            );
        }
    }
    objects
}

/// `got` has exactly the objects of `want`, each equal.
pub fn assert_same_objects(what: &str, got: &Objects, want: &Objects) {
    let got_keys: Vec<_> = got.keys().collect();
    let want_keys: Vec<_> = want.keys().collect();
    assert_eq!(got_keys, want_keys, "{what}: objects differ");
    for (k, object) in want {
        assert_eq!(&got[k], object, "{what}: {k:?} differs");
    }
}

/// The one manifest at `path` (relative to `manifests/`).
pub fn manifest(path: &str) -> Value {
    let full = format!("manifests/{path}");
    manifests()
        .into_iter()
        .find(|m| m.path == full)
        .unwrap_or_else(|| panic!("no manifest {full}"))
        .object
}

fn collect_yaml(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            collect_yaml(&path, out);
        } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            out.push(path);
        }
    }
}

/// `components.schemas` of every file in ../shared/k8s-openapi, merged.
struct Schemas(BTreeMap<String, Value>);

impl Schemas {
    fn load() -> Schemas {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/k8s-openapi");
        let mut schemas = BTreeMap::new();
        for entry in std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e} (clone shared/ beside the repo)", dir.display()))
        {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "json") {
                let doc: Value =
                    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
                if let Some(map) = doc["components"]["schemas"].as_object() {
                    for (name, schema) in map {
                        schemas.insert(name.clone(), schema.clone());
                    }
                }
            }
        }
        Schemas(schemas)
    }

    /// The schema whose `x-kubernetes-group-version-kind` is this apiVersion and kind.
    fn for_kind(&self, api_version: &str, kind: &str) -> Option<&Value> {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        self.0.values().find(|schema| {
            schema["x-kubernetes-group-version-kind"]
                .as_array()
                .is_some_and(|gvks| {
                    gvks.iter().any(|gvk| {
                        gvk["group"] == group && gvk["version"] == version && gvk["kind"] == kind
                    })
                })
        })
    }

    fn resolve<'a>(&'a self, schema: &'a Value) -> &'a Value {
        match schema["$ref"].as_str() {
            Some(reference) => {
                let name = reference.trim_start_matches("#/components/schemas/");
                self.resolve(
                    self.0
                        .get(name)
                        .unwrap_or_else(|| panic!("unresolved $ref {reference}")),
                )
            }
            None => schema,
        }
    }

    /// Checks `value` against `schema`: types, property names, required fields. Problems
    /// are pushed as `path: what`.
    fn check(&self, schema: &Value, value: &Value, at: &str, problems: &mut Vec<String>) {
        let schema = self.resolve(schema);
        if let Some(all) = schema["allOf"].as_array() {
            for part in all {
                self.check(part, value, at, problems);
            }
        }
        if let Some(one) = schema["oneOf"].as_array() {
            let fits = one.iter().any(|alternative| {
                let mut p = Vec::new();
                self.check(alternative, value, at, &mut p);
                p.is_empty()
            });
            if !fits {
                problems.push(format!("{at}: {value} fits none of the allowed types"));
            }
            return;
        }
        let Some(kind) = schema["type"].as_str() else {
            return;
        };
        let fits = match kind {
            "string" => value.is_string(),
            "integer" => value.is_i64() || value.is_u64(),
            "number" => value.is_number(),
            "boolean" => value.is_boolean(),
            "array" => value.is_array(),
            "object" => value.is_object(),
            _ => true,
        };
        if !fits {
            problems.push(format!("{at}: expected {kind}, found {value}"));
            return;
        }
        match value {
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    self.check(&schema["items"], item, &format!("{at}[{i}]"), problems);
                }
            }
            Value::Object(map) => {
                for required in schema["required"].as_array().into_iter().flatten() {
                    let required = required.as_str().unwrap();
                    if !map.contains_key(required) {
                        problems.push(format!("{at}: missing required field {required:?}"));
                    }
                }
                let properties = schema["properties"].as_object();
                for (key, item) in map {
                    let at = format!("{at}.{key}");
                    match (
                        properties.and_then(|p| p.get(key)),
                        &schema["additionalProperties"],
                    ) {
                        (Some(property), _) => self.check(property, item, &at, problems),
                        (None, additional) if additional.is_object() => {
                            self.check(additional, item, &at, problems)
                        }
                        (None, _) => problems.push(format!("{at}: no such field")),
                    }
                }
            }
            _ => {}
        }
    }
}

#[test]
fn every_manifest_matches_the_api_servers_openapi_schema() {
    let schemas = Schemas::load();
    let mut problems = Vec::new();
    for m in manifests() {
        let api_version = m.object["apiVersion"].as_str().unwrap_or("");
        let kind = m.object["kind"].as_str().unwrap_or("");
        let Some(schema) = schemas.for_kind(api_version, kind) else {
            problems.push(format!("{}: no schema for {api_version} {kind}", m.path));
            continue;
        };
        schemas.check(schema, &m.object, &m.path, &mut problems);
        if m.object["metadata"]["name"]
            .as_str()
            .unwrap_or("")
            .is_empty()
        {
            problems.push(format!("{}: metadata.name is missing", m.path));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_schema_check_catches_misspelled_fields_and_wrong_types() {
    let schemas = Schemas::load();
    let schema = schemas.for_kind("apps/v1", "Deployment").unwrap();
    let mut deployment = manifest("in-cluster/deployment.yaml");
    deployment["spec"]["template"]["spec"]["containers"][0]["securityContex"] = Value::Null;
    deployment["spec"]["replicas"] = "1".into();
    let mut problems = Vec::new();
    schemas.check(schema, &deployment, "d", &mut problems);
    problems.sort();
    assert_eq!(
        problems,
        [
            "d.spec.replicas: expected integer, found \"1\"",
            "d.spec.template.spec.containers[0].securityContex: no such field",
        ]
    );
    let mut without_name = manifest("in-cluster/deployment.yaml");
    without_name["spec"]["template"]["spec"]["containers"][0]
        .as_object_mut()
        .unwrap()
        .remove("name");
    let mut problems = Vec::new();
    schemas.check(schema, &without_name, "d", &mut problems);
    assert_eq!(
        problems,
        ["d.spec.template.spec.containers[0]: missing required field \"name\""]
    );
}

/// Objects defined in a set of manifests, as (kind, namespace, name).
fn defined(manifests: &[&Value]) -> BTreeSet<(String, String, String)> {
    manifests
        .iter()
        .map(|o| {
            (
                o["kind"].as_str().unwrap().to_string(),
                o["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
                o["metadata"]["name"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn the_examples_reference_only_objects_that_the_examples_define() {
    let all = manifests();
    let examples: Vec<&Value> = all
        .iter()
        .filter(|m| m.path.starts_with("manifests/examples/"))
        .map(|m| &m.object)
        .collect();
    let defined = defined(&examples);
    let mut missing = Vec::new();
    let mut pod_labels = Vec::new();
    for object in &examples {
        let ns = object["metadata"]["namespace"].as_str().unwrap_or("");
        if !ns.is_empty() && !defined.contains(&("Namespace".into(), String::new(), ns.into())) {
            missing.push(format!("Namespace {ns}"));
        }
        if object["kind"] != "Deployment" {
            continue;
        }
        let workload: wavelet::objects::WorkloadObject =
            serde_json::from_value((*object).clone()).unwrap();
        for reference in wavelet::model::references::references(&workload) {
            let kind = match reference.config.kind {
                wavelet::objects::ConfigKind::ConfigMap => "ConfigMap",
                wavelet::objects::ConfigKind::Secret => "Secret",
                wavelet::objects::ConfigKind::SecretProviderClass => "SecretProviderClass",
            };
            let key = (
                kind.to_string(),
                reference.config.namespace.to_string(),
                reference.config.name.to_string(),
            );
            if !defined.contains(&key) {
                missing.push(format!("{key:?}"));
            }
        }
        pod_labels.push((
            ns.to_string(),
            object["spec"]["template"]["metadata"]["labels"].clone(),
        ));
    }
    assert!(
        missing.is_empty(),
        "referenced but not defined: {missing:?}"
    );

    // Every delete-mode selector matches the Pods of some example Deployment.
    let mut delete_mode = 0;
    for object in &examples {
        let Some(selector) = object["metadata"]["annotations"]["magalix.com/podDeleteMatch"]
            .as_str()
            .or(object["metadata"]["annotations"]["wavelet.dev/pod-delete-match"].as_str())
        else {
            continue;
        };
        delete_mode += 1;
        let ns = object["metadata"]["namespace"].as_str().unwrap();
        let selector = wavelet::selector::Selector::parse(selector).unwrap();
        let matches = pod_labels.iter().any(|(pod_ns, labels)| {
            let labels: BTreeMap<String, String> = serde_json::from_value(labels.clone()).unwrap();
            pod_ns == ns && selector.matches(&labels)
        });
        assert!(matches, "{selector:?} matches no example Pods in {ns}");
    }
    assert!(delete_mode > 0, "no delete-mode example");
    assert!(
        examples
            .iter()
            .any(|o| o["metadata"]["annotations"]["wavelet.dev/update-on-config-change"] == "true"),
        "no hash-mode example"
    );
}

#[test]
fn the_rbac_bindings_name_roles_and_the_service_account_that_exist() {
    let all = manifests();
    let objects: Vec<&Value> = all.iter().map(|m| &m.object).collect();
    let defined = defined(&objects);
    for binding in objects
        .iter()
        .filter(|o| o["kind"] == "RoleBinding" || o["kind"] == "ClusterRoleBinding")
    {
        let role_kind = binding["roleRef"]["kind"].as_str().unwrap();
        let role_ns = if role_kind == "Role" {
            binding["metadata"]["namespace"].as_str().unwrap()
        } else {
            ""
        };
        let role = binding["roleRef"]["name"].as_str().unwrap();
        assert!(
            defined.contains(&(role_kind.into(), role_ns.into(), role.into())),
            "{binding} names a missing {role_kind}"
        );
        for subject in binding["subjects"].as_array().unwrap() {
            let key = (
                subject["kind"].as_str().unwrap().to_string(),
                subject["namespace"].as_str().unwrap().to_string(),
                subject["name"].as_str().unwrap().to_string(),
            );
            assert!(defined.contains(&key), "{binding} names a missing {key:?}");
        }
    }
}

#[test]
fn both_deployments_run_wavelet_locked_down_with_probes_on_9090() {
    for path in [
        "in-cluster/deployment.yaml",
        "proxy-sidecar/deployment.yaml",
    ] {
        let deployment = manifest(path);
        let pod = &deployment["spec"]["template"]["spec"];
        assert_eq!(pod["serviceAccountName"], "wavelet", "{path}");
        assert_eq!(pod["securityContext"]["runAsNonRoot"], true, "{path}");
        for container in pod["containers"].as_array().unwrap() {
            let name = &container["name"];
            let sc = &container["securityContext"];
            assert_eq!(sc["readOnlyRootFilesystem"], true, "{path} {name}");
            assert_eq!(sc["allowPrivilegeEscalation"], false, "{path} {name}");
            assert_eq!(
                sc["capabilities"]["drop"],
                serde_json::json!(["ALL"]),
                "{path} {name}"
            );
            assert_eq!(
                sc["seccompProfile"]["type"], "RuntimeDefault",
                "{path} {name}"
            );
            assert!(
                container["resources"]["limits"]["memory"].is_string(),
                "{path} {name}"
            );
            assert!(
                container["resources"]["requests"]["memory"].is_string(),
                "{path} {name}"
            );
        }
        let wavelet = &pod["containers"][0];
        assert_eq!(wavelet["name"], "wavelet");
        assert_eq!(wavelet["ports"][0]["containerPort"], 9090, "{path}");
        assert_eq!(
            wavelet["livenessProbe"]["httpGet"]["path"], "/healthz",
            "{path}"
        );
        assert_eq!(
            wavelet["readinessProbe"]["httpGet"]["path"], "/readyz",
            "{path}"
        );
        let args: Vec<&str> = wavelet["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        assert_eq!(args[0], "run", "{path}");
        assert_eq!(
            args.windows(2)
                .any(|w| w == ["--server", "http://127.0.0.1:8001"]),
            path.starts_with("proxy-sidecar"),
            "{path}: --server http://127.0.0.1:8001 exactly with the proxy sidecar"
        );
    }
}

/// The wavelet container's args and env as the kubelet would pass them: `valueFrom`
/// fields resolved (the Pod is `wavelet-0` in `wavelet`) and `$(VAR)` expanded.
pub fn container_command_line(container: &Value) -> (Vec<String>, Vec<(String, String)>) {
    let mut env: Vec<(String, String)> = Vec::new();
    for var in container["env"].as_array().into_iter().flatten() {
        let name = var["name"].as_str().unwrap().to_string();
        let value = match var["valueFrom"]["fieldRef"]["fieldPath"].as_str() {
            Some("metadata.name") => "wavelet-0".to_string(),
            Some("metadata.namespace") => "wavelet".to_string(),
            Some(other) => panic!("fieldRef {other} not simulated"),
            None => {
                let mut value = var["value"].as_str().unwrap_or("").to_string();
                for (k, v) in &env {
                    value = value.replace(&format!("$({k})"), v);
                }
                value
            }
        };
        env.push((name, value));
    }
    let args = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    (args, env)
}

/// Each Deployment's args and env start the real binary (a typo there would crash-loop),
/// against the fake instead of the proxy or the in-cluster API server.
#[test]
fn the_deployments_args_and_env_are_accepted_by_the_binary() {
    use crate::fake::FakeApi;
    use crate::util::Wavelet;
    for path in [
        "in-cluster/deployment.yaml",
        "proxy-sidecar/deployment.yaml",
    ] {
        let deployment = manifest(path);
        let (mut args, env) =
            container_command_line(&deployment["spec"]["template"]["spec"]["containers"][0]);
        assert_eq!(args.remove(0), "run", "{path}");
        let fake = FakeApi::start();
        let url = fake.url();
        let mut i = 0;
        while i < args.len() {
            match args[i].as_str() {
                "--server" => args[i + 1] = url.clone(),
                "--listen-addr" => panic!("{path}: the default :9090 is what the probes use"),
                _ => {}
            }
            i += 1;
        }
        if !args.contains(&"--server".to_string()) {
            // In-cluster, the namespace comes from the service-account files.
            args.extend(["--server", &url, "--state-namespace", "wavelet"].map(String::from));
            args.extend(["--lease-namespace", "wavelet"].map(String::from));
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut env: Vec<(&str, &str)> =
            env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        env.push(("RUST_LOG", "info"));
        let wavelet = Wavelet::start_without_server(&args, &env);
        let output = wavelet.kill();
        assert!(
            !output.contains("ERROR") && !output.contains("error:"),
            "{path}:\n{output}"
        );
    }
}

#[test]
fn namespaced_objects_name_their_namespace_and_the_service_selects_wavelet() {
    const CLUSTER_SCOPED: &[&str] = &["Namespace", "ClusterRole", "ClusterRoleBinding"];
    for m in manifests() {
        let kind = m.object["kind"].as_str().unwrap();
        let namespace = m.object["metadata"]["namespace"].as_str();
        assert_eq!(
            namespace.is_none(),
            CLUSTER_SCOPED.contains(&kind),
            "{}: metadata.namespace",
            m.path
        );
    }
    let service = manifest("service.yaml");
    for path in [
        "in-cluster/deployment.yaml",
        "proxy-sidecar/deployment.yaml",
    ] {
        let deployment = manifest(path);
        let template = &deployment["spec"]["template"];
        let labels = template["metadata"]["labels"].as_object().unwrap();
        for (key, value) in service["spec"]["selector"].as_object().unwrap() {
            assert_eq!(
                labels.get(key),
                Some(value),
                "{path}: the Service selects its Pods"
            );
        }
        assert_eq!(
            deployment["spec"]["selector"]["matchLabels"], template["metadata"]["labels"],
            "{path}"
        );
        let target = &service["spec"]["ports"][0]["targetPort"];
        assert_eq!(
            template["spec"]["containers"][0]["ports"][0]["name"], *target,
            "{path}"
        );
    }
}

/// What is wrong with `object` (reported as `at`) against the API server's OpenAPI schema;
/// empty when it matches. For objects rendered by other tools (tests/chart.rs).
pub fn openapi_problems(at: &str, object: &Value) -> Vec<String> {
    let schemas = Schemas::load();
    let mut problems = Vec::new();
    let api_version = object["apiVersion"].as_str().unwrap_or("");
    let kind = object["kind"].as_str().unwrap_or("");
    match schemas.for_kind(api_version, kind) {
        Some(schema) => schemas.check(schema, object, at, &mut problems),
        None => problems.push(format!("{at}: no schema for {api_version} {kind}")),
    }
    problems
}
