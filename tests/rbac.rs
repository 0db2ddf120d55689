//! The RBAC in `manifests/` is exactly what wavelet uses: every request the binary sent is
//! allowed by the ClusterRole (or, in its own namespace, the Role for its state ConfigMap
//! and Lease), and every rule is exercised by a scenario of both modes.
//!
//! The scenario runs wavelet with any flags ([`Run`]), and [`assert_exactly`] is the check,
//! so `tests/chart.rs` proves the chart's RBAC for each set of values with the flags the
//! chart renders, rather than with a second hand-written list of rules.

use std::collections::BTreeSet;

use serde_json::{json, Value};

use crate::fake::access::{self, Access};
use crate::fake::FakeApi;
use crate::manifests::{manifest, manifests};
use crate::util::*;

/// The namespace the manifests install wavelet in.
const WAVELET_NS: &str = "wavelet";

/// Rules the scenario cannot exercise (none today; a rule listed here is still checked for
/// being allowed, just not for being used).
const NOT_YET_EXERCISED: &[(&str, &str)] = &[];

/// One (group, resource, verb, resourceNames) of a rule.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Grant {
    group: String,
    pub resource: String,
    verb: String,
    names: Vec<String>,
    /// `None`: every namespace (a ClusterRole bound cluster-wide).
    namespace: Option<String>,
}

impl Grant {
    fn allows(&self, access: &Access, any_namespace: bool) -> bool {
        let resource = match &access.subresource {
            Some(sub) => format!("{}/{sub}", access.resource),
            None => access.resource.clone(),
        };
        let namespace_ok = any_namespace
            || self
                .namespace
                .as_ref()
                .is_none_or(|ns| *ns == access.namespace);
        // resourceNames never match a create, nor a list/watch of a whole collection: the
        // authorizer sees no name for those (a list/watch narrowed by a `metadata.name`
        // field selector has that name).
        let name_ok = self.names.is_empty()
            || access
                .name
                .as_ref()
                .is_some_and(|n| access.verb != "create" && self.names.contains(n));
        self.group == access.group
            && self.resource == resource
            && self.verb == access.verb
            && namespace_ok
            && name_ok
    }
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .into_iter()
        .flatten()
        .map(|v| v.as_str().unwrap().to_string())
        .collect()
}

/// The rules of a ClusterRole or Role, one grant per group × resource × verb.
pub fn grants(role: &Value) -> Vec<Grant> {
    let namespace = match role["kind"].as_str() {
        Some("Role") => Some(role["metadata"]["namespace"].as_str().unwrap().to_string()),
        _ => None,
    };
    let mut out = Vec::new();
    for rule in role["rules"].as_array().unwrap() {
        for group in strings(&rule["apiGroups"]) {
            for resource in strings(&rule["resources"]) {
                for verb in strings(&rule["verbs"]) {
                    assert!(
                        group != "*" && resource != "*" && verb != "*",
                        "no wildcards: {rule}"
                    );
                    out.push(Grant {
                        group: group.clone(),
                        resource: resource.clone(),
                        verb,
                        names: strings(&rule["resourceNames"]),
                        namespace: namespace.clone(),
                    });
                }
            }
        }
    }
    out
}

/// What the manifests grant the service account in the cluster-wide shape.
fn installed() -> Vec<Grant> {
    let mut all = grants(&manifest("cluster-wide/clusterrole.yaml"));
    all.extend(grants(&manifest("role.yaml")));
    all
}

/// The cluster-wide shape with `manifests/csi/` (`--enable-csi-integration`).
fn installed_with_csi() -> Vec<Grant> {
    let mut all = installed();
    all.extend(grants(&manifest("csi/clusterrole.yaml")));
    all
}

/// Non-resource requests every authenticated user may send: discovery and version (the
/// `system:discovery` and `system:public-info-viewer` ClusterRoles).
fn public(access: &Access) -> bool {
    let path = access.resource.as_str();
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let discovery = matches!(
        segments.as_slice(),
        ["api"] | ["api", _] | ["apis"] | ["apis", _] | ["apis", _, _] | ["version"]
    );
    access.verb == "get" && access.group.is_empty() && path.starts_with('/') && discovery
}

fn denied<'a>(grants: &[Grant], accesses: &'a [Access], any_namespace: bool) -> Vec<&'a Access> {
    accesses
        .iter()
        .filter(|a| !public(a) && !grants.iter().any(|g| g.allows(a, any_namespace)))
        .collect()
}

/// The label the scenario puts on the examples' namespace `apps`, for a
/// `--namespace-selector` that selects it.
pub const APPS_NAMESPACE_LABEL: (&str, &str) = ("team", "apps");

/// Kinds that are watched without `--workload-kinds` (as group/resource).
const BUILT_IN_KINDS: &[&str] = &[
    "apps/deployments",
    "apps/statefulsets",
    "apps/daemonsets",
    "batch/cronjobs",
    "argoproj.io/rollouts",
];

/// How the scenario starts wavelet: the flags after `run` and the environment, as a
/// Deployment passes them. The fake's `--server` is added; so are the scenario's own
/// timings (short debounce and lease periods) and `--state-namespace`/`--lease-namespace`
/// (in a cluster, the service account's namespace), each only where `args` and `env` do
/// not set it already.
pub struct Run {
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
}

impl Run {
    /// What manifests/in-cluster/deployment.yaml runs.
    fn manifests() -> Run {
        Run {
            args: vec!["--leader-elect".into()],
            env: Vec::new(),
        }
    }

    /// What kustomize/csi runs: the manifests' Deployment with
    /// `WAVELET_ENABLE_CSI_INTEGRATION=true`.
    fn manifests_with_csi() -> Run {
        Run {
            args: vec!["--leader-elect".into()],
            env: vec![("WAVELET_ENABLE_CSI_INTEGRATION".into(), "true".into())],
        }
    }

    fn has(&self, flag: &str) -> bool {
        self.args
            .iter()
            .any(|a| a == flag || a.starts_with(&format!("{flag}=")))
            || self
                .env
                .iter()
                .any(|(k, _)| *k == wavelet::config::env_var(flag.trim_start_matches("--")))
    }

    /// The value of `--flag=VALUE` or `--flag VALUE`.
    fn value(&self, flag: &str) -> Option<&str> {
        let at = self.args.iter().position(|a| a == flag);
        at.and_then(|i| self.args.get(i + 1))
            .map(String::as_str)
            .or_else(|| {
                self.args
                    .iter()
                    .find_map(|a| a.strip_prefix(&format!("{flag}=")))
            })
    }

    /// `--workload-kinds` beyond the built-in kinds: (group, version, resource).
    fn custom_kinds(&self) -> Vec<(String, String, String)> {
        let Some(kinds) = self.value("--workload-kinds") else {
            return Vec::new();
        };
        kinds
            .split(',')
            .map(|k| {
                let parts: Vec<&str> = k.split('/').collect();
                (
                    parts[0].to_string(),
                    parts[1].to_string(),
                    parts[2].to_string(),
                )
            })
            .filter(|(g, _, r)| !BUILT_IN_KINDS.contains(&format!("{g}/{r}").as_str()))
            .collect()
    }

    /// The full command line and environment for the scenario.
    fn command_line(&self) -> (Vec<String>, Vec<(String, String)>) {
        let mut args = self.args.clone();
        let mut defaults: Vec<&str> = FAST.to_vec();
        defaults.extend([
            "--state-namespace",
            WAVELET_NS,
            "--lease-namespace",
            WAVELET_NS,
            // Short lease timings so the scenario also renews (a PUT: `update`).
            "--lease-duration",
            "2s",
            "--renew-deadline",
            "1s",
            "--retry-period",
            "300ms",
        ]);
        for pair in defaults.chunks(2) {
            if !self.has(pair[0]) {
                args.extend(pair.iter().map(|a| a.to_string()));
            }
        }
        let mut env = self.env.clone();
        env.push(("RUST_LOG".into(), "debug".into()));
        (args, env)
    }
}

/// Hash mode (a Deployment, StatefulSet, DaemonSet, CronJob and Argo Rollout opted in, and
/// one object of each custom kind of `--workload-kinds`; a rollout of each and a Job
/// started for the CronJob) and delete mode (`evict` and `delete`), from the example
/// manifests plus what they do not cover, with wavelet started as `run` says. Returns what
/// wavelet sent.
pub fn both_modes_scenario(run: &Run) -> Vec<Access> {
    let fake = FakeApi::start();
    // An API server without streaming lists (the WatchList gate off, as on 1.33): every
    // kind is listed page by page and then watched, so the RBAC must allow both; where
    // the server streams the first list, a subset of these is sent.
    fake.disable_watch_list();
    fake.apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": WAVELET_NS}}));
    for m in manifests()
        .into_iter()
        .filter(|m| m.path.starts_with("manifests/examples/"))
    {
        let mut object = m.object;
        if object["kind"] == "Namespace" && object["metadata"]["name"] == "apps" {
            let (key, value) = APPS_NAMESPACE_LABEL;
            object["metadata"]["labels"] = json!({ key: value });
        }
        fake.apply(object);
    }
    for kind in ["StatefulSet", "DaemonSet"] {
        fake.apply(workload(
            kind,
            "apps",
            "db",
            opted_in(),
            mounts_configmap("web-config"),
        ));
    }
    // Reloader's kinds: a CronJob opted in through Reloader's key (one Job on a change)
    // and an Argo Rollout (the API serves them here).
    fake.register_resource("argoproj.io", "v1alpha1", "rollouts", "Rollout");
    let mut rollout = workload(
        "Deployment",
        "apps",
        "canary",
        opted_in(),
        mounts_configmap("web-config"),
    );
    rollout["apiVersion"] = json!("argoproj.io/v1alpha1");
    rollout["kind"] = json!("Rollout");
    fake.apply(rollout);
    let custom_kinds = run.custom_kinds();
    for (group, version, resource) in &custom_kinds {
        // `widgets` → `Widget`: the fake needs a kind name; wavelet never sends it.
        let kind = format!(
            "{}{}",
            resource[..1].to_ascii_uppercase(),
            resource[1..].trim_end_matches('s')
        );
        fake.register_resource(group, version, resource, &kind);
        let mut object = workload(
            "Deployment",
            "apps",
            "custom",
            opted_in(),
            mounts_configmap("web-config"),
        );
        object["apiVersion"] = json!(format!("{group}/{version}"));
        object["kind"] = json!(kind);
        fake.apply(object);
    }
    // `--ignored-workload-types=cronjobs` (Reloader's ignoreCronJobs): none is watched.
    let cronjobs = !run
        .args
        .iter()
        .any(|a| a == "--ignored-workload-types=cronjobs");
    let mut nightly = workload(
        "Deployment",
        "apps",
        "nightly",
        json!({"wavelet.dev/update-on-config-change": "true", "reloader.stakater.com/auto": "true"}),
        mounts_configmap("web-config"),
    );
    let template = nightly["spec"]["template"].take();
    nightly["apiVersion"] = json!("batch/v1");
    nightly["kind"] = json!("CronJob");
    nightly["spec"] =
        json!({"schedule": "0 3 * * *", "jobTemplate": {"spec": {"template": template}}});
    nightly["spec"]["jobTemplate"]["spec"]["template"]["spec"]["restartPolicy"] = json!("Never");
    fake.apply(nightly);
    // A workload whose ConfigMap is missing: a ConfigMissing Warning, looked up before it
    // is posted (`get`), and said again once the ConfigMap came and went (`patch`).
    fake.apply(workload(
        "Deployment",
        "apps",
        "held",
        opted_in(),
        mounts_configmap("later-config"),
    ));
    // --enable-csi-integration: the driver's CRDs are installed, with a SecretProviderClass
    // and a pod status for each Pod of `apps` (wavelet lists and watches both).
    if run.has("--enable-csi-integration") {
        crate::csi::install_csi_driver(&fake);
        fake.apply(crate::csi::secret_provider_class(
            "apps",
            "vault",
            json!({}),
        ));
        let driver = crate::csi::Driver::new(&fake);
        for pod in fake.pods("apps") {
            driver.write(&pod, "vault", &[("db-password", "1")]);
        }
    }
    let mut cache = configmap("apps", "cache-config", &[("size", "1")]);
    cache["metadata"]["annotations"] = json!({
        "wavelet.dev/pod-delete-match": "app=web",
        "wavelet.dev/pod-delete-strategy": "delete",
    });
    fake.apply(cache);
    // Used by nothing until a workload created after the start (below).
    fake.apply(secret("apps", "late-token", &[("token", "t")]));

    let (args, env) = run.command_line();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let wavelet = Wavelet::start_with_env(&fake, &args, &env);
    eventually(&fake, &wavelet, "all three workloads adopted", |f| {
        hashes(f, "deployments", "apps", "web", "wavelet.dev/config-hash")
            .1
            .is_some()
            && hashes(f, "statefulsets", "apps", "db", "wavelet.dev/config-hash")
                .1
                .is_some()
            && hashes(f, "daemonsets", "apps", "db", "wavelet.dev/config-hash")
                .1
                .is_some()
    });
    eventually(&fake, &wavelet, "delete-mode objects recorded", |f| {
        f.get("configmaps", WAVELET_NS, "wavelet-state")
            .is_some_and(|s| s["data"].as_object().is_some_and(|d| d.len() == 2))
    });

    let pods = |f: &FakeApi, app: &str| -> BTreeSet<String> {
        f.pods("apps")
            .iter()
            .filter(|p| p["metadata"]["labels"]["app"] == app)
            .map(|p| p["metadata"]["uid"].as_str().unwrap().to_string())
            .collect()
    };
    let missing_count = |f: &FakeApi| {
        f.events_for("apps", "held")
            .iter()
            .find(|e| e["reason"] == "ConfigMissing")
            .and_then(|e| e["count"].as_u64())
    };
    eventually(&fake, &wavelet, "ConfigMissing on held", |f| {
        missing_count(f) == Some(1)
    });
    fake.apply(configmap("apps", "later-config", &[("k", "v")]));
    eventually(
        &fake,
        &wavelet,
        "held adopted once its ConfigMap exists",
        |f| {
            hashes(f, "deployments", "apps", "held", "wavelet.dev/config-hash")
                .1
                .is_some()
        },
    );
    fake.delete("configmaps", "apps", "later-config");
    eventually(
        &fake,
        &wavelet,
        "ConfigMissing on held counted twice",
        |f| missing_count(f) == Some(2),
    );

    let (workers, webs) = (pods(&fake, "worker"), pods(&fake, "web"));
    assert!(!workers.is_empty() && !webs.is_empty());
    fake.merge_patch(
        "configmaps",
        "apps",
        "web-config",
        json!({"data": {"nginx.conf": "v2"}}),
    );
    fake.merge_patch(
        "configmaps",
        "apps",
        "worker-config",
        json!({"data": {"QUEUE": "v2"}}),
    );
    fake.merge_patch(
        "configmaps",
        "apps",
        "cache-config",
        json!({"data": {"size": "2"}}),
    );
    // A Secret in use arrives whole on its watch; one first used after the start, which
    // the watch did not keep, is read on its own (`get`).
    if !run.has("--ignore-secrets") {
        fake.merge_patch(
            "secrets",
            "apps",
            "web-credentials",
            json!({"data": {"api-token": wavelet::objects::base64::encode(b"v2")}}),
        );
        fake.apply(workload(
            "Deployment",
            "apps",
            "late",
            opted_in(),
            json!({"containers": [{"name": "app", "image": "nginx",
                "envFrom": [{"secretRef": {"name": "late-token"}}]}]}),
        ));
        eventually(&fake, &wavelet, "late adopted", |f| {
            hashes(f, "deployments", "apps", "late", "wavelet.dev/config-hash")
                .1
                .is_some()
        });
        assert!(
            fake.requests().iter().any(
                |r| r.method == "GET" && r.path == "/api/v1/namespaces/apps/secrets/late-token"
            ),
            "the Secret first used after the start was read with a GET"
        );
    }
    eventually(
        &fake,
        &wavelet,
        "a rollout and both kinds of Pod replacement",
        |f| {
            template_patches(f, "deployments", "apps", "web") > 0
                && template_patches(f, "rollouts", "apps", "canary") > 0
                && custom_kinds
                    .iter()
                    .all(|(_, _, resource)| template_patches(f, resource, "apps", "custom") > 0)
                && (!cronjobs || !f.list("jobs", Some("apps")).is_empty())
                && pods(f, "worker").is_disjoint(&workers)
                && pods(f, "web").iter().any(|uid| !webs.contains(uid))
                && !f.events_for("apps", "worker-config").is_empty()
                && !f.events_for("apps", "cache-config").is_empty()
        },
    );
    // Every reconcile of the scenario over, with all it sent: the debug line each logs when
    // it returns follows its patch, its Event, its Job, its state write.
    let mut rolled: Vec<String> = [
        "deployment",
        "statefulset",
        "daemonset",
        "rollout",
        "cronjob",
    ]
    .iter()
    .zip(["web", "db", "db", "canary", "nightly"])
    .filter(|(kind, _)| cronjobs || **kind != "cronjob")
    .map(|(kind, name)| format!("{kind} apps/{name}"))
    .collect();
    for (_, _, resource) in &custom_kinds {
        rolled.push(format!("{} apps/custom", resource.trim_end_matches('s')));
    }
    for key in rolled {
        wavelet.wait_for_log_after(0, &key, "Rolled {");
    }
    for config in ["worker-config", "cache-config"] {
        let key = format!("configmap apps/{config}");
        wavelet.wait_for_log_after(0, &key, "delete mode: Replaced {");
    }
    drop(wavelet);
    fake.accesses()
}

/// `grants` are exactly what `accesses` need: every request allowed (nothing denied) and
/// every grant used by some request (nothing extra). `what` names the RBAC in the message.
pub fn assert_exactly(what: &str, grants: &[Grant], accesses: &[Access]) {
    let denied: BTreeSet<String> = denied(grants, accesses, false)
        .iter()
        .map(|a| a.to_string())
        .collect();
    assert!(
        denied.is_empty(),
        "wavelet sent requests {what} does not allow:\n{}",
        denied
            .iter()
            .map(|a| format!("  {a}\n"))
            .collect::<String>()
    );

    let unused: Vec<&Grant> = grants
        .iter()
        .filter(|g| !NOT_YET_EXERCISED.contains(&(g.resource.as_str(), g.verb.as_str())))
        .filter(|g| !accesses.iter().any(|a| g.allows(a, false)))
        .collect();
    assert!(
        unused.is_empty(),
        "{what} grants what wavelet never used (remove them, or exercise them here):\n{unused:#?}\nrequests:\n{}",
        accesses
            .iter()
            .map(|a| format!("  {a}\n"))
            .collect::<String>()
    );

    // Leader election has landed when these are used: then empty NOT_YET_EXERCISED.
    for (resource, verb) in NOT_YET_EXERCISED {
        let used = grants
            .iter()
            .filter(|g| g.resource == *resource && g.verb == *verb)
            .any(|g| accesses.iter().any(|a| g.allows(a, false)));
        assert!(
            !used,
            "{verb} {resource} is exercised now: remove it from NOT_YET_EXERCISED"
        );
    }
}

#[test]
fn rbac_allows_every_request_of_both_modes_and_every_rule_is_used() {
    let accesses = both_modes_scenario(&Run::manifests());
    assert_exactly("the manifests", &installed(), &accesses);
}

#[test]
fn with_the_csi_integration_rbac_allows_every_request_and_every_rule_is_used() {
    let accesses = both_modes_scenario(&Run::manifests_with_csi());
    assert!(
        accesses
            .iter()
            .any(|a| a.resource == "secretproviderclasspodstatuses" && a.verb == "watch"),
        "the scenario watched the pod statuses"
    );
    assert_exactly(
        "the manifests with manifests/csi/",
        &installed_with_csi(),
        &accesses,
    );
}

/// Every request the binary sent to any fake server in this process so far (tests run in
/// parallel, so this covers whatever ran before or alongside, plus the scenario above).
/// The Role is taken to be in whatever `--state-namespace` a test chose; custom kinds from
/// `--workload-kinds` need RBAC the user adds with the flag (README, Deploying).
#[test]
fn rbac_allows_every_request_wavelet_sent_anywhere_in_the_suite() {
    let _ = both_modes_scenario(&Run::manifests());
    // `--namespace-selector` lists and watches Namespaces: RBAC the user adds with the
    // flag (README, Coming from Reloader; the Helm chart adds it with the value). A Lease
    // of another `--lease-name` is granted by the Role for that name (the chart's
    // `leaseName`; tests/chart.rs proves that one).
    let other_lease =
        |a: &Access| a.resource == "leases" && a.name.as_deref().is_some_and(|n| n != "wavelet");
    let log: Vec<Access> = access::log()
        .into_iter()
        .filter(|a| a.builtin && a.resource != "namespaces" && !other_lease(a))
        .collect();
    // The suite's CSI tests run with manifests/csi/ (which adds reads of running Pods and
    // ReplicaSets); without the flag, the scenario above is held to installed() exactly.
    let denied = denied(&installed_with_csi(), &log, true);
    let distinct: BTreeSet<String> = denied.iter().map(|a| a.to_string()).collect();
    assert!(
        distinct.is_empty(),
        "wavelet sent requests the manifests do not allow:\n{}",
        distinct
            .into_iter()
            .map(|a| format!("  {a}\n"))
            .collect::<String>()
    );
}

#[test]
fn the_namespaced_role_grants_what_the_cluster_role_grants() {
    let cluster = manifest("cluster-wide/clusterrole.yaml");
    let namespaced = manifest("namespaced/role.yaml");
    // Namespaces are cluster-scoped: a Role cannot grant them, and the namespaced shape does
    // not watch them (their fan-out annotations are read in the cluster-wide shape only).
    let namespaced_rules: Vec<&Value> = cluster["rules"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["resources"] != serde_json::json!(["namespaces"]))
        .collect();
    assert_eq!(
        serde_json::to_value(namespaced_rules).unwrap(),
        namespaced["rules"]
    );
}

#[test]
fn the_manifests_never_grant_writes_to_configmaps_or_secrets_beyond_the_state_object() {
    for grant in manifests()
        .iter()
        .filter(|m| m.object["kind"] == "Role" || m.object["kind"] == "ClusterRole")
        .flat_map(|m| grants(&m.object))
    {
        if grant.resource == "secrets" {
            // Read-only: metadata list/watch, and a GET of the Secrets that matter.
            assert!(
                ["get", "list", "watch"].contains(&grant.verb.as_str()),
                "{grant:?}"
            );
        }
        if grant.resource == "configmaps" && !["list", "watch"].contains(&grant.verb.as_str()) {
            assert_eq!(grant.namespace.as_deref(), Some(WAVELET_NS), "{grant:?}");
            if grant.verb != "create" {
                assert_eq!(grant.names, ["wavelet-state"], "{grant:?}");
            }
        }
    }
}
