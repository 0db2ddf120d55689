//! `wavelet migrate reloader`: read-only. Finds Stakater Reloader's Deployments, says what
//! wavelet makes of their args and env (as they are, when only the image is swapped, and
//! as wavelet's own flags), lists the workloads Reloader manages and what wavelet will do
//! with each, and prints the order to switch in. It changes nothing and never reads a
//! Secret: variables Reloader takes from Secrets are named, not resolved.

use std::io::Write;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;

use crate::client::{Client, Shape};
use crate::config::{Command, Policy, RunConfig};
use crate::error::Error;
use crate::model::workload::WorkloadEntry;
use crate::objects::{Resource, WorkloadObject};
use crate::watch::source::list_each;

/// Any object, whole, as JSON (this command reads fields wavelet's own types drop).
#[derive(Deserialize)]
struct Any(Value);

/// One Reloader Deployment.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    pub namespace: String,
    pub name: String,
    pub replicas: u64,
    pub image: String,
    pub args: Vec<String>,
    /// Each variable: its literal value, or where it comes from (`Secret s, key k`).
    pub env: Vec<(String, Result<String, String>)>,
}

/// Whether a container is Reloader's: its image (`ghcr.io/stakater/reloader:v1.4.21`,
/// `stakater/reloader`), or the variable its chart always sets.
fn is_reloader(container: &Value) -> bool {
    let image = container["image"].as_str().unwrap_or("");
    let path = image.split('@').next().unwrap_or("");
    // A tag follows the last `:` after the last `/` (a registry's port comes before it).
    let path = match path.rsplit_once(':') {
        Some((before, tag)) if !tag.contains('/') => before,
        _ => path,
    };
    path.rsplit('/').next() == Some("reloader")
        || container["env"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|e| e["name"] == "RELOADER_DEPLOYMENT_NAME")
}

/// Reloader's Deployments in `namespace`, or in every namespace.
pub fn find(client: &Client, namespace: Option<&str>) -> Result<Vec<Found>, Error> {
    let mut found = Vec::new();
    list_each(
        client,
        &Resource::deployments(),
        namespace,
        Shape::Whole,
        &mut |Any(d): Any| {
            let containers = d["spec"]["template"]["spec"]["containers"].as_array();
            let Some(c) = containers.into_iter().flatten().find(|c| is_reloader(c)) else {
                return;
            };
            let ns = d["metadata"]["namespace"]
                .as_str()
                .unwrap_or("")
                .to_string();
            let strings = |v: &Value| -> Vec<String> {
                let list = v.as_array().into_iter().flatten();
                list.filter_map(|a| a.as_str().map(String::from)).collect()
            };
            let env = c["env"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|e| {
                    let name = e["name"].as_str().unwrap_or("").to_string();
                    let from = &e["valueFrom"];
                    let value = match (e["value"].as_str(), from) {
                        (Some(v), _) => Ok(v.to_string()),
                        _ if from["fieldRef"]["fieldPath"] == "metadata.namespace" => {
                            Ok(ns.clone())
                        }
                        _ if from["secretKeyRef"].is_object() => Err(format!(
                            "Secret {}, key {}",
                            from["secretKeyRef"]["name"].as_str().unwrap_or("?"),
                            from["secretKeyRef"]["key"].as_str().unwrap_or("?")
                        )),
                        _ => Err(
                            match (
                                from["fieldRef"]["fieldPath"].as_str(),
                                from["resourceFieldRef"]["resource"].as_str(),
                            ) {
                                (Some(field), _) => format!("the Pod's {field}"),
                                (_, Some(resource)) => format!("the container's {resource}"),
                                _ => "elsewhere".to_string(),
                            },
                        ),
                    };
                    (name, value)
                })
                .collect();
            found.push(Found {
                name: d["metadata"]["name"].as_str().unwrap_or("").to_string(),
                replicas: d["spec"]["replicas"].as_u64().unwrap_or(1),
                image: c["image"].as_str().unwrap_or("").to_string(),
                args: strings(&c["args"]),
                namespace: ns,
                env,
            });
        },
    )?;
    Ok(found)
}

/// Each of Reloader's settings with its spelling among wavelet's own flags (empty when
/// wavelet needs none: it already behaves so).
pub fn wavelet_flags(found: &Found) -> Vec<(String, String)> {
    let mut rows = Vec::new();
    let mut args = found.args.iter().peekable();
    while let Some(arg) = args.next() {
        let body = arg.trim_start_matches('-');
        let (name, value) = match body.split_once('=') {
            Some((n, v)) => (n, v.to_string()),
            // `--webhook-url URL` and the annotation flags take the next argument.
            None if args.peek().is_some_and(|a| !a.starts_with('-')) => {
                (body, args.next().cloned().unwrap_or_default())
            }
            None => (body, "true".to_string()),
        };
        let truthy = matches!(value.as_str(), "true" | "1" | "t" | "True" | "TRUE");
        let ours = match name {
            "log-level"
            | "log-format"
            | "namespaces"
            | "namespaces-to-ignore"
            | "resource-label-selector"
            | "ignored-workload-types" => format!("--{name}={value}"),
            "namespace-selector" => format!("--namespace-selector={}", value.trim_matches('"')),
            "auto-reload-all" if truthy => "--auto-reload-all".into(),
            "enable-ha" if truthy => "--leader-elect".into(),
            "resources-to-ignore" => format!("--ignore-{}", value.to_ascii_lowercase()),
            // A string flag in Reloader: on only when exactly "true".
            "is-Argo-Rollouts" if value != "true" => "--is-Argo-Rollouts=false".into(),
            n if n.starts_with("leader-election-") => {
                format!("--{}={value}", &n["leader-election-".len()..])
            }
            _ => String::new(),
        };
        let shown = crate::config::shown_value(&value);
        rows.push((format!("--{name}={shown}"), ours));
    }
    for (name, value) in &found.env {
        let shown = match value {
            Ok(_) if name == "ALERT_WEBHOOK_URL" || name == "ALERT_WEBHOOK_PROXY" => {
                format!("{name} (a URL, not shown)")
            }
            Ok(v) => format!("{name}={}", crate::config::shown_value(v)),
            Err(from) => format!("{name} from {from}"),
        };
        let ours = match (name.as_str(), value) {
            ("KUBERNETES_NAMESPACE", Ok(ns)) => format!("--namespaces={ns}"),
            ("METRICS_COUNT_BY_NAMESPACE", Ok(v)) if v == "enabled" => {
                "--metrics-count-by-namespace=enabled".into()
            }
            (alert, _) if alert.starts_with("ALERT_") => format!(
                "--{} (or keep {alert})",
                alert.to_ascii_lowercase().replace('_', "-")
            ),
            _ => String::new(),
        };
        rows.push((shown, ours));
    }
    rows
}

/// What `wavelet run` makes of the Deployment's args and env as they are: its
/// configuration, or the refusal (what to do instead). Variables from Secrets are left out.
fn as_they_are(found: &Found) -> Result<(RunConfig, Policy, Vec<String>), String> {
    let mut args = vec!["run".to_string()];
    args.extend(found.args.iter().cloned());
    let env = |name: &str| {
        found
            .env
            .iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, v)| v.clone().ok())
    };
    match crate::config::parse(&args, &env) {
        Ok(config) => match config.command {
            Command::Run(run) => Ok((run, config.policy, config.notes)),
            _ => Err("not `wavelet run`".into()),
        },
        Err(e) => Err(e.to_string()),
    }
}

/// What wavelet does with a workload Reloader manages, for people.
fn plan(resource: &Resource, object: &Value, entry: &WorkloadEntry) -> String {
    let template = if resource.is_cronjobs() {
        &object["spec"]["jobTemplate"]["spec"]["template"]
    } else {
        &object["spec"]["template"]
    };
    let mut said = vec![if entry.recorded_hash().is_some() {
        "already adopted by wavelet".to_string()
    } else {
        "adopts it without a rollout (the hash goes on its metadata)".to_string()
    }];
    let stakater: Vec<&str> = template["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|c| c["env"].as_array().into_iter().flatten())
        .filter_map(|e| e["name"].as_str())
        .filter(|n| n.starts_with("STAKATER_"))
        .collect();
    if !stakater.is_empty() {
        said.push(format!(
            "leaves {} on its pod template (they roll nothing)",
            stakater.join(", ")
        ));
    }
    if template["metadata"]["annotations"]["reloader.stakater.com/last-reloaded-from"].is_string() {
        said.push("leaves reloader.stakater.com/last-reloaded-from on its pod template".into());
    }
    if object["spec"]["paused"] == true {
        said.push("PAUSED (Reloader's pause-period?): wavelet never resumes it; run kubectl rollout resume before switching".into());
    }
    if resource.is_cronjobs() {
        said.push("hash on its job template, and one Job per change, as Reloader".into());
    }
    said.join("; ")
}

/// Prints the whole report for `found`; lists the workloads in each one's scope.
pub fn report(client: &Client, found: &[Found], out: &mut dyn Write) -> Result<(), Error> {
    for f in found {
        line(
            out,
            format_args!(
                "Reloader Deployment {}/{}: image {}, {} replica(s)\n",
                f.namespace, f.name, f.image, f.replicas
            ),
        )?;
        line(
            out,
            format_args!("  {:<52} AS WAVELET'S OWN FLAG", "RELOADER'S SETTING"),
        )?;
        for (theirs, ours) in wavelet_flags(f) {
            let ours = if ours.is_empty() { "-" } else { ours.as_str() };
            line(out, format_args!("  {theirs:<52} {ours}"))?;
        }
        let parsed = as_they_are(f);
        match &parsed {
            Ok((_, _, notes)) => {
                line(out, format_args!("\n  With the image swapped, wavelet starts with these args and env as they are:"))?;
                for note in notes {
                    line(out, format_args!("    {note}"))?;
                }
            }
            Err(why) => line(out, format_args!("\n  With the image swapped, wavelet would refuse to start: {why}\n  Change that setting first."))?,
        }
        // Refused: Reloader's scope as wavelet's defaults see it (every namespace).
        let (run, policy) = match parsed {
            Ok((run, policy, _)) => (run, policy),
            Err(_) => match as_they_are(&Found {
                args: Vec::new(),
                env: Vec::new(),
                ..f.clone()
            }) {
                Ok((run, policy, _)) => (run, policy),
                Err(why) => return Err(Error::Config(why)),
            },
        };
        let scope: Vec<Option<&str>> = if run.namespaces.is_empty() {
            vec![None]
        } else {
            run.namespaces.iter().map(|n| Some(n.as_str())).collect()
        };
        line(
            out,
            format_args!("\n  Workloads it manages, and what wavelet will do with each:"),
        )?;
        let mut count = 0;
        let mut kinds = vec![
            Resource::deployments(),
            Resource::statefulsets(),
            Resource::daemonsets(),
        ];
        if !run.reloader.ignore_cronjobs {
            kinds.push(Resource::cronjobs());
        }
        for resource in kinds {
            let resource = Arc::new(resource);
            for ns in &scope {
                // Opt-in as `run` decides it; then, of those, what Reloader left on them
                // (two lists: the second reads fields wavelet's own types drop).
                let mut managed = Vec::new();
                list_each(
                    client,
                    &resource,
                    *ns,
                    Shape::Whole,
                    &mut |w: WorkloadObject| {
                        let namespace = &w.metadata.namespace;
                        if run
                            .reloader
                            .namespaces_to_ignore
                            .iter()
                            .any(|n| n == namespace)
                        {
                            return;
                        }
                        if let Some(entry) = WorkloadEntry::from_object(&resource, &w, &policy)
                            .filter(|e| e.flavor.is_some())
                        {
                            managed.push((namespace.to_string(), w.metadata.name.clone(), entry));
                        }
                    },
                )?;
                let mut rows = Vec::new();
                list_each(
                    client,
                    &resource,
                    *ns,
                    Shape::Whole,
                    &mut |Any(object): Any| {
                        let meta = &object["metadata"];
                        if let Some((namespace, name, entry)) = managed.iter().find(|(n, m, _)| {
                            meta["namespace"] == n.as_str() && meta["name"] == m.as_str()
                        }) {
                            rows.push(format!(
                                "    {} {namespace}/{name}: {}",
                                resource.kind,
                                plan(&resource, &object, entry)
                            ));
                        }
                    },
                )?;
                count += rows.len();
                for row in rows {
                    line(out, format_args!("{row}"))?;
                }
            }
        }
        if count == 0 {
            line(out, format_args!("    none"))?;
        }
        if run.reloader.namespace_selector.is_some() {
            line(out, format_args!("    (Reloader acts only in the namespaces its --namespace-selector selects; so does wavelet)"))?;
        }
        line(
            out,
            format_args!(
                "\n  To switch (book: Coming from Reloader):
    1. Swap the image of {ns}/{name} to wavelet's (which replaces Reloader at once), or
       install wavelet's chart beside it with Reloader's values file.
    2. wavelet status: exit 0 once every workload is adopted.
    3. Beside Reloader: stop it at once (a change while both run may roll twice):
       kubectl -n {ns} scale deployment/{name} --replicas=0
    4. Then uninstall Reloader.\n",
                ns = f.namespace,
                name = f.name
            ),
        )?;
    }
    Ok(())
}

/// Writes one line of the report (one copy of the code, whatever the line).
#[inline(never)]
fn line(out: &mut dyn Write, text: std::fmt::Arguments) -> Result<(), Error> {
    writeln!(out, "{text}").map_err(|e| Error::Transport(format!("writing output: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn found(args: &[&str], env: &[(&str, Result<&str, &str>)]) -> Found {
        Found {
            namespace: "reloader".into(),
            name: "reloader-reloader".into(),
            replicas: 1,
            image: "ghcr.io/stakater/reloader:v1.4.21".into(),
            args: args.iter().map(|a| a.to_string()).collect(),
            env: env
                .iter()
                .map(|(n, v)| (n.to_string(), v.map(String::from).map_err(String::from)))
                .collect(),
        }
    }

    #[test]
    fn reloaders_container_is_known_by_its_image_or_its_charts_variable() {
        for image in [
            "ghcr.io/stakater/reloader:v1.4.21",
            "stakater/reloader",
            "registry.example.com:5000/mirror/reloader@sha256:00",
        ] {
            assert!(is_reloader(&json!({"image": image})), "{image}");
        }
        assert!(!is_reloader(&json!({"image": "nginx:1.27"})));
        assert!(!is_reloader(&json!({"image": "example.com/reloader-ui:1"})));
        assert!(is_reloader(
            &json!({"image": "wavelet:0.1.0", "env": [{"name": "RELOADER_DEPLOYMENT_NAME", "value": "x"}]})
        ));
    }

    #[test]
    fn each_setting_gets_wavelets_own_spelling_or_none_when_wavelet_needs_none() {
        let rows = wavelet_flags(&found(
            &[
                "--log-level=info",
                "--enable-ha=true",
                "--resources-to-ignore=secrets",
                "--namespace-selector=\"team=a\"",
                "--reload-strategy=annotations",
                "--leader-election-lease-duration=20s",
                "--webhook-url",
                "https://x",
            ],
            &[
                ("KUBERNETES_NAMESPACE", Ok("apps")),
                (
                    "ALERT_WEBHOOK_URL",
                    Err("Secret reloader-reloader, key ALERT_WEBHOOK_URL"),
                ),
                ("ALERT_SINK", Ok("slack")),
                ("GOMAXPROCS", Err("the container's limits.cpu")),
            ],
        ));
        let ours = |theirs: &str| {
            rows.iter()
                .find(|(t, _)| t == theirs)
                .map(|(_, o)| o.as_str())
                .unwrap_or_else(|| panic!("{theirs} not in {rows:?}"))
        };
        assert_eq!(ours("--log-level=info"), "--log-level=info");
        assert_eq!(ours("--enable-ha=true"), "--leader-elect");
        assert_eq!(ours("--resources-to-ignore=secrets"), "--ignore-secrets");
        assert_eq!(
            ours("--namespace-selector=\"team=a\""),
            "--namespace-selector=team=a"
        );
        assert_eq!(ours("--reload-strategy=annotations"), "");
        assert_eq!(
            ours("--leader-election-lease-duration=20s"),
            "--lease-duration=20s"
        );
        assert_eq!(ours("--webhook-url=https://x"), "");
        assert!(!format!("{rows:?}").contains("https://x/"));
        assert_eq!(ours("KUBERNETES_NAMESPACE=apps"), "--namespaces=apps");
        assert_eq!(
            ours("ALERT_WEBHOOK_URL from Secret reloader-reloader, key ALERT_WEBHOOK_URL"),
            "--alert-webhook-url (or keep ALERT_WEBHOOK_URL)"
        );
        assert_eq!(
            ours("ALERT_SINK=slack"),
            "--alert-sink (or keep ALERT_SINK)"
        );
    }

    #[test]
    fn a_url_in_the_environment_is_never_shown() {
        let rows = wavelet_flags(&found(
            &[],
            &[("ALERT_WEBHOOK_URL", Ok("https://hooks.example/T0KEN"))],
        ));
        assert!(!format!("{rows:?}").contains("T0KEN"), "{rows:?}");
    }

    #[test]
    fn a_webhook_urls_path_and_query_are_never_shown_as_an_arg_nor_in_its_refusal() {
        let slack = "https://hooks.slack.com/services/T0/B0/SECRET?q=QUERY";
        for args in [
            vec!["--webhook-url", slack],
            vec![&*format!("--webhook-url={slack}")],
        ]
        .iter()
        {
            let f = found(args, &[("OTHER_URL", Ok("https://h.example/PATHTOKEN"))]);
            let rows = format!("{:?}", wavelet_flags(&f));
            let refused = as_they_are(&f).unwrap_err();
            for shown in [&rows, &refused] {
                for secret in ["SECRET", "QUERY", "PATHTOKEN"] {
                    assert!(!shown.contains(secret), "{shown}");
                }
                assert!(shown.contains("https://hooks.slack.com"), "{shown}");
            }
        }
    }

    #[test]
    fn the_args_as_they_are_are_judged_as_wavelet_run_judges_them() {
        let ok = as_they_are(&found(
            &["--log-level=info", "--enable-ha=true"],
            &[("KUBERNETES_NAMESPACE", Ok("apps"))],
        ));
        let (run, _, notes) = ok.unwrap();
        assert!(run.leader_elect);
        assert_eq!(run.namespaces, ["apps"]);
        assert!(
            notes.iter().any(|n| n.contains("one-namespace mode")),
            "{notes:?}"
        );
        let refused = as_they_are(&found(&["--webhook-url", "https://x"], &[])).unwrap_err();
        assert!(
            refused.contains("--dry-run with ALERT_ON_RELOAD=true"),
            "{refused}"
        );
    }
}
