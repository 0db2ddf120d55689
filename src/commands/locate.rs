//! Where the running wavelet keeps `wavelet-state`, found for the one-shot commands
//! (`wavelet pause`, `resume`, `status`) so they read and write the state the controller
//! watches, not a copy of their own in the kubeconfig context's namespace.
//!
//! The search, in order, stops at the first step that names exactly one namespace:
//!
//! 1. `--state-namespace`, when given.
//! 2. The wavelet Deployments (label `app.kubernetes.io/name=wavelet`, as the chart and
//!    the manifests set it): each one's `--state-namespace` (argument or
//!    `WAVELET_STATE_NAMESPACE`), else the namespace it runs in.
//! 3. The leader-election Leases named `wavelet` (`--leader-elect`): the namespace of each.
//! 4. The ConfigMaps named `wavelet-state`: the namespace of each.
//!
//! A step that finds several namespaces ends the search with an error naming them; one the
//! user may not read is skipped and said so. Nothing found is an error that says what was
//! searched. The answer says which step found it, for the command to print.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::client::Client;
use crate::error::Error;
use crate::model::state::STATE_CONFIGMAP;

/// The label the chart and the manifests put on wavelet's Deployment.
const DEPLOYMENT_SELECTOR: &str = "app.kubernetes.io/name=wavelet";
/// `--lease-name`'s default.
const LEASE_NAME: &str = "wavelet";
/// The flag and its environment variable.
const FLAG: &str = "--state-namespace";
const ENV: &str = "WAVELET_STATE_NAMESPACE";

/// The namespace of `wavelet-state`, and how it was found (for the user to read).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    pub namespace: String,
    pub found_by: String,
}

impl Located {
    /// `state: ConfigMap wavelet-system/wavelet-state (found by ...)`.
    pub fn describe(&self) -> String {
        format!(
            "state: ConfigMap {}/{STATE_CONFIGMAP} ({})",
            self.namespace, self.found_by
        )
    }
}

/// For the commands that write (`pause`, `resume`): the ConfigMap must exist, since only
/// the running wavelet creates it (when it starts); a CLI that created it would write
/// where no wavelet looks.
pub fn require_existing(client: &Client, located: &Located) -> Result<(), Error> {
    match crate::model::state::fetch(client, &located.namespace)? {
        Some(_) => Ok(()),
        None => Err(Error::Config(format!(
            "ConfigMap {ns}/{STATE_CONFIGMAP} does not exist ({by}): a running wavelet creates it when it starts, so none runs there, or it runs with --dry-run; nothing was written. Pass {FLAG} NAMESPACE where wavelet keeps its state",
            ns = located.namespace,
            by = located.found_by
        ))),
    }
}

/// One step of the search: the namespaces it names, each with what named it.
type Found = Vec<(String, String)>;

/// A step of the search, by what it lists.
type Step<'a> = (&'static str, &'a dyn Fn() -> Result<Found, Error>);

/// Finds the state namespace as the module documentation says.
pub fn state_namespace(client: &Client, flag: Option<&str>) -> Result<Located, Error> {
    if let Some(ns) = flag {
        return Ok(Located {
            namespace: ns.to_string(),
            found_by: FLAG.to_string(),
        });
    }
    let mut skipped = Vec::new();
    let steps: [Step<'_>; 3] = [
        ("wavelet Deployments", &|| {
            deployments(client).map(|d| d.iter().map(state_of_deployment).collect())
        }),
        ("leader-election Leases", &|| leases(client)),
        ("state ConfigMaps", &|| state_configmaps(client)),
    ];
    for (what, step) in steps {
        let found = match step() {
            Ok(found) => found,
            Err(err) if err.is_forbidden() || err.is_not_found() => {
                skipped.push(format!("{what} (cannot list them: {err})"));
                continue;
            }
            Err(err) => return Err(err),
        };
        if let Some(located) = one_namespace(what, found)? {
            return Ok(located);
        }
    }
    let mut message = format!(
        "cannot find where the running wavelet keeps its state: no Deployment labelled {DEPLOYMENT_SELECTOR}, no Lease {LEASE_NAME} and no ConfigMap {STATE_CONFIGMAP} in any namespace you may list; is wavelet running? Pass {FLAG} NAMESPACE (the namespace wavelet runs in, or its own {FLAG})"
    );
    if !skipped.is_empty() {
        message.push_str(&format!("; not searched: {}", skipped.join(", ")));
    }
    Err(Error::Config(message))
}

/// The namespace a step found, if exactly one; several are an error naming each.
fn one_namespace(what: &str, found: Found) -> Result<Option<Located>, Error> {
    let namespaces: BTreeSet<&str> = found.iter().map(|(ns, _)| ns.as_str()).collect();
    match namespaces.len() {
        0 => Ok(None),
        1 => {
            let (namespace, found_by) = found.into_iter().next().expect("one");
            Ok(Some(Located {
                namespace,
                found_by,
            }))
        }
        _ => Err(Error::Config(format!(
            "{} {what} keep state in different namespaces ({}): choose one with {FLAG} NAMESPACE",
            found.len(),
            found
                .iter()
                .map(|(ns, by)| format!("{ns}: {by}"))
                .collect::<Vec<_>>()
                .join("; ")
        ))),
    }
}

fn deployments(client: &Client) -> Result<Vec<Value>, Error> {
    items(
        client,
        &format!(
            "/apis/apps/v1/deployments?labelSelector={}",
            DEPLOYMENT_SELECTOR.replace('/', "%2F").replace('=', "%3D")
        ),
    )
}

fn leases(client: &Client) -> Result<Found, Error> {
    let leases = items(
        client,
        &format!("/apis/coordination.k8s.io/v1/leases?fieldSelector=metadata.name%3D{LEASE_NAME}"),
    )?;
    Ok(leases
        .iter()
        .map(|l| {
            let ns = namespace_of(l);
            let holder = l["spec"]["holderIdentity"].as_str().unwrap_or("nobody");
            let by = format!("Lease {ns}/{LEASE_NAME}, held by {holder}: wavelet's state is kept beside its Lease unless {FLAG} says otherwise");
            (ns, by)
        })
        .collect())
}

fn state_configmaps(client: &Client) -> Result<Found, Error> {
    let maps = items(
        client,
        &format!("/api/v1/configmaps?fieldSelector=metadata.name%3D{STATE_CONFIGMAP}"),
    )?;
    Ok(maps
        .iter()
        .map(|m| {
            let ns = namespace_of(m);
            let by = format!("the only ConfigMap {STATE_CONFIGMAP}, found in namespace {ns}");
            (ns, by)
        })
        .collect())
}

fn items(client: &Client, path: &str) -> Result<Vec<Value>, Error> {
    let list: Value = client.get(path)?;
    Ok(list["items"].as_array().cloned().unwrap_or_default())
}

fn namespace_of(object: &Value) -> String {
    object["metadata"]["namespace"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The state namespace of one wavelet Deployment (as the API server returns it): its
/// container's `--state-namespace` argument, else its `WAVELET_STATE_NAMESPACE` (a value,
/// `$(VAR)` of a variable set to the Pod's namespace, or the Pod's namespace itself),
/// else the namespace it runs in; and the sentence that says so.
pub fn state_of_deployment(deployment: &Value) -> (String, String) {
    let own = namespace_of(deployment);
    let name = deployment["metadata"]["name"].as_str().unwrap_or_default();
    let containers = deployment["spec"]["template"]["spec"]["containers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for container in &containers {
        let args: Vec<&str> = container["args"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let env = container["env"].as_array().cloned().unwrap_or_default();
        if let Some(ns) = flag_value(&args) {
            let ns = expand(&ns, &env, &own);
            return (
                ns,
                format!("the wavelet Deployment {own}/{name}: its {FLAG}"),
            );
        }
        if let Some(var) = env.iter().find(|e| e["name"] == ENV) {
            let ns = env_value(var, &env, &own);
            return (
                ns,
                format!("the wavelet Deployment {own}/{name}: its {ENV}"),
            );
        }
    }
    (
        own.clone(),
        format!("the wavelet Deployment {own}/{name}: the namespace it runs in"),
    )
}

/// `--state-namespace=X` or `--state-namespace X` among `args` (the last one counts).
fn flag_value(args: &[&str]) -> Option<String> {
    let mut found = None;
    let mut words = args.iter();
    while let Some(word) = words.next() {
        if let Some(value) = word.strip_prefix("--state-namespace=") {
            found = Some(value.to_string());
        } else if *word == FLAG {
            found = words.next().map(|v| v.to_string());
        }
    }
    found
}

/// The value of one `env` entry: a literal (with `$(VAR)` expanded), or the Pod's own
/// namespace from a `fieldRef` to `metadata.namespace`.
fn env_value(var: &Value, env: &[Value], own: &str) -> String {
    if var["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace" {
        return own.to_string();
    }
    expand(var["value"].as_str().unwrap_or_default(), env, own)
}

/// `$(VAR)` of a variable that holds the Pod's namespace, else the text as written.
fn expand(text: &str, env: &[Value], own: &str) -> String {
    let Some(var) = text.strip_prefix("$(").and_then(|t| t.strip_suffix(')')) else {
        return text.to_string();
    };
    match env.iter().find(|e| e["name"] == var) {
        Some(e) => env_value(e, &[], own),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment(args: Value, env: Value) -> Value {
        json!({
            "metadata": {"name": "wavelet", "namespace": "wavelet-system"},
            "spec": {"template": {"spec": {"containers": [
                {"name": "wavelet", "args": args, "env": env}
            ]}}}
        })
    }

    #[test]
    fn a_deployment_without_the_flag_keeps_its_state_where_it_runs() {
        let (ns, by) = state_of_deployment(&deployment(json!(["run"]), json!([])));
        assert_eq!(ns, "wavelet-system");
        assert!(
            by.contains("wavelet-system/wavelet") && by.contains("runs in"),
            "{by}"
        );
    }

    #[test]
    fn the_flag_in_either_spelling_names_the_state_namespace() {
        for args in [
            json!(["run", "--state-namespace=ops"]),
            json!(["run", "--state-namespace", "ops"]),
        ] {
            let (ns, by) = state_of_deployment(&deployment(args, json!([])));
            assert_eq!(ns, "ops");
            assert!(by.contains("--state-namespace"), "{by}");
        }
    }

    #[test]
    fn the_environment_variable_with_the_pods_namespace_is_understood() {
        // As the chart writes it for the proxy sidecar.
        let env = json!([
            {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
            {"name": "WAVELET_STATE_NAMESPACE", "value": "$(POD_NAMESPACE)"}
        ]);
        let (ns, _) = state_of_deployment(&deployment(json!(["run"]), env));
        assert_eq!(ns, "wavelet-system");
        let literal = json!([{"name": "WAVELET_STATE_NAMESPACE", "value": "ops"}]);
        assert_eq!(
            state_of_deployment(&deployment(json!(["run"]), literal)).0,
            "ops"
        );
    }

    #[test]
    fn several_namespaces_in_one_step_are_an_error_naming_each() {
        let found = vec![
            ("a".to_string(), "Deployment a/wavelet".to_string()),
            ("b".to_string(), "Deployment b/wavelet".to_string()),
        ];
        let err = one_namespace("wavelet Deployments", found)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("a: Deployment a/wavelet") && err.contains("--state-namespace"),
            "{err}"
        );
        let same = vec![
            ("a".to_string(), "one".to_string()),
            ("a".to_string(), "two".to_string()),
        ];
        assert_eq!(
            one_namespace("x", same).unwrap().unwrap().namespace,
            "a",
            "two replicas' Leases or Deployments in one namespace are one answer"
        );
    }
}
