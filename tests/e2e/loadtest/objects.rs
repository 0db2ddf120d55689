//! The objects of Reloader's load-test scenarios, as its `scenarios.go` builds them
//! (`createDeployment`, `createDeploymentWithSecret`, `...WithBoth`, `createStatefulSet`,
//! `createDaemonSet`, `createDeploymentWithPause`, `createComplexDeployment`): one
//! busybox container with small resources, `terminationGracePeriodSeconds: 0`, one
//! replica, opted in with the annotations of the controller under test.

use serde_json::{json, Map, Value};

/// Which controller's opt-in annotation the workloads carry. wavelet reads Reloader's
/// keys as they are, so wavelet and Reloader get the very same manifests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OptIn {
    /// `reloader.stakater.com/auto: "true"` (Reloader's scenarios; wavelet reads it).
    Reloader,
    /// `wave.pusher.com/update-on-config-change: "true"`.
    Wave,
}

impl OptIn {
    pub fn annotations(self) -> Map<String, Value> {
        let mut map = Map::new();
        let key = match self {
            OptIn::Reloader => "reloader.stakater.com/auto",
            OptIn::Wave => "wave.pusher.com/update-on-config-change",
        };
        map.insert(key.into(), json!("true"));
        map
    }
}

const IMAGE: &str = "gcr.io/google-containers/busybox:1.27";

pub fn configmap(ns: &str, name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns}, "data": data})
}

/// A Secret written with `stringData`, as Reloader's S10 does.
pub fn secret(ns: &str, name: &str, string_data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": name, "namespace": ns}, "stringData": string_data})
}

fn resources() -> Value {
    json!({"requests": {"cpu": "1m", "memory": "4Mi"}, "limits": {"cpu": "10m", "memory": "16Mi"}})
}

/// One container of Reloader's: `sh -c <command>` with its small resources.
fn container(name: &str, command: &str) -> Value {
    json!({"name": name, "image": IMAGE, "command": ["sh", "-c", command],
        "resources": resources()})
}

fn env_from_configmap(name: &str) -> Value {
    json!({"configMapRef": {"name": name}})
}

fn env_from_secret(name: &str) -> Value {
    json!({"secretRef": {"name": name}})
}

/// The app container with these `envFrom` sources.
fn app(env_from: Vec<Value>) -> Value {
    let mut app = container("app", "sleep 999999999");
    app["envFrom"] = Value::Array(env_from);
    app
}

fn template(name: &str, spec: Value) -> Value {
    let mut spec = spec;
    spec["terminationGracePeriodSeconds"] = json!(0);
    json!({"metadata": {"labels": {"app": name}}, "spec": spec})
}

fn annotations(opt_in: OptIn, extra: &[(&str, String)]) -> Value {
    let mut map = opt_in.annotations();
    for (k, v) in extra {
        map.insert((*k).into(), json!(v));
    }
    Value::Object(map)
}

/// `apps/v1` Deployment of one replica, rolling 1/1 (Reloader's strategy).
fn deployment_of(
    ns: &str,
    name: &str,
    opt_in: OptIn,
    extra: &[(&str, String)],
    pod: Value,
) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns, "annotations": annotations(opt_in, extra)},
        "spec": {"replicas": 1,
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 1}},
            "selector": {"matchLabels": {"app": name}},
            "template": template(name, pod)}})
}

/// `count` ConfigMaps `<prefix>-cm-<i>` holding `data`, each mounted by its own Deployment
/// `<prefix>-deploy-<i>`: the one-to-one layout most of Reloader's scenarios use.
pub fn one_to_one(
    ns: &str,
    prefix: &str,
    count: usize,
    data: &Value,
    opt_in: OptIn,
    configs: &mut Vec<Value>,
    workloads: &mut Vec<Value>,
) {
    for i in 0..count {
        let cm = format!("{prefix}-cm-{i}");
        configs.push(configmap(ns, &cm, data.clone()));
        workloads.push(deployment(ns, &format!("{prefix}-deploy-{i}"), &cm, opt_in));
    }
}

/// `createDeployment`: `envFrom` one ConfigMap.
pub fn deployment(ns: &str, name: &str, configmap: &str, opt_in: OptIn) -> Value {
    deployment_of(
        ns,
        name,
        opt_in,
        &[],
        json!({"containers": [app(vec![env_from_configmap(configmap)])]}),
    )
}

/// `createDeploymentWithSecret`: `envFrom` one Secret.
pub fn deployment_with_secret(ns: &str, name: &str, secret: &str, opt_in: OptIn) -> Value {
    deployment_of(
        ns,
        name,
        opt_in,
        &[],
        json!({"containers": [app(vec![env_from_secret(secret)])]}),
    )
}

/// `createDeploymentWithBoth`: `envFrom` one ConfigMap and one Secret.
pub fn deployment_with_both(
    ns: &str,
    name: &str,
    configmap: &str,
    secret: &str,
    opt_in: OptIn,
) -> Value {
    deployment_of(
        ns,
        name,
        opt_in,
        &[],
        json!({"containers": [app(vec![env_from_configmap(configmap), env_from_secret(secret)])]}),
    )
}

/// `createDeploymentWithPause`: Reloader's `deployment.reloader.stakater.com/pause-period`.
pub fn deployment_with_pause(
    ns: &str,
    name: &str,
    configmap: &str,
    pause_seconds: u64,
    opt_in: OptIn,
) -> Value {
    deployment_of(
        ns,
        name,
        opt_in,
        &[(
            "deployment.reloader.stakater.com/pause-period",
            format!("{pause_seconds}s"),
        )],
        json!({"containers": [app(vec![env_from_configmap(configmap)])]}),
    )
}

/// `createStatefulSet`: one replica, `serviceName` its own name.
pub fn statefulset(ns: &str, name: &str, configmap: &str, opt_in: OptIn) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": name, "namespace": ns, "annotations": annotations(opt_in, &[])},
        "spec": {"replicas": 1, "serviceName": name,
            "selector": {"matchLabels": {"app": name}},
            "template": template(name, json!({"containers": [app(vec![env_from_configmap(configmap)])]}))}})
}

/// `createDaemonSet`: tolerates the control-plane taints.
pub fn daemonset(ns: &str, name: &str, configmap: &str, opt_in: OptIn) -> Value {
    let tolerations = json!([
        {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "node-role.kubernetes.io/master", "operator": "Exists", "effect": "NoSchedule"}]);
    json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": ns, "annotations": annotations(opt_in, &[])},
        "spec": {"selector": {"matchLabels": {"app": name}},
            "template": template(name, json!({"tolerations": tolerations,
                "containers": [app(vec![env_from_configmap(configmap)])]}))}})
}

/// `createComplexDeployment`: an init container with `envFrom` the primary ConfigMap, a
/// main container with `valueFrom` keys `key1` and `key2` of it, a sidecar mounting it
/// as a volume and a projected volume of `key1` of the primary and of the secondary.
pub fn complex_deployment(
    ns: &str,
    name: &str,
    primary: &str,
    secondary: &str,
    opt_in: OptIn,
) -> Value {
    let mut init = container("init", "echo Init done");
    init["envFrom"] = json!([env_from_configmap(primary)]);
    let mut main = container("main", "sleep 999999999");
    let key_ref = |env: &str, key: &str| json!({"name": env, "valueFrom": {"configMapKeyRef": {"name": primary, "key": key}}});
    main["env"] = json!([
        key_ref("CONFIG_KEY1", "key1"),
        key_ref("CONFIG_KEY2", "key2")
    ]);
    let mut sidecar = container("sidecar", "sleep 999999999");
    sidecar["volumeMounts"] = json!([
        {"name": "config-volume", "mountPath": "/etc/config"},
        {"name": "projected-volume", "mountPath": "/etc/projected"}]);
    let projection = |cm: &str, path: &str| json!({"configMap": {"name": cm, "items": [{"key": "key1", "path": path}]}});
    let volumes = json!([
        {"name": "config-volume", "configMap": {"name": primary}},
        {"name": "projected-volume", "projected": {"sources": [
            projection(primary, "primary-key1"), projection(secondary, "secondary-key1")]}}]);
    deployment_of(
        ns,
        name,
        opt_in,
        &[],
        json!({"initContainers": [init], "containers": [main, sidecar], "volumes": volumes}),
    )
}

/// The ConfigMaps and Secrets a workload's pod template references (volumes, projected
/// volumes, `env` key refs, `envFrom`, in init containers too), as `(kind, name)`.
pub fn references(workload: &Value) -> Vec<(&'static str, String)> {
    let spec = &workload["spec"]["template"]["spec"];
    let mut refs = Vec::new();
    let mut add = |kind: &'static str, name: &Value| {
        if let Some(name) = name.as_str() {
            let entry = (kind, name.to_string());
            if !refs.contains(&entry) {
                refs.push(entry);
            }
        }
    };
    for volume in spec["volumes"].as_array().into_iter().flatten() {
        add("ConfigMap", &volume["configMap"]["name"]);
        add("Secret", &volume["secret"]["secretName"]);
        for source in volume["projected"]["sources"]
            .as_array()
            .into_iter()
            .flatten()
        {
            add("ConfigMap", &source["configMap"]["name"]);
            add("Secret", &source["secret"]["name"]);
        }
    }
    let containers = spec["initContainers"]
        .as_array()
        .into_iter()
        .flatten()
        .chain(spec["containers"].as_array().into_iter().flatten());
    for c in containers {
        for env in c["env"].as_array().into_iter().flatten() {
            add("ConfigMap", &env["valueFrom"]["configMapKeyRef"]["name"]);
            add("Secret", &env["valueFrom"]["secretKeyRef"]["name"]);
        }
        for from in c["envFrom"].as_array().into_iter().flatten() {
            add("ConfigMap", &from["configMapRef"]["name"]);
            add("Secret", &from["secretRef"]["name"]);
        }
    }
    refs
}
