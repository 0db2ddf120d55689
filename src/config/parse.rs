//! Step 2 of parsing: every value the command needs looked up (flag > environment >
//! default) and validated into the typed [`Config`].

use std::collections::BTreeMap;

use crate::config::args::{config_error, split_args};
use crate::config::flags::{find_flag, FlagDefault, Scope};
use crate::config::help::help_text;
use crate::config::reloader::{reloaders_string_bool, NOTED_ENV};
use crate::config::values::*;
use crate::config::*;
use crate::error::Error;
use crate::window::Windows;

/// Where a value came from; errors name it so the user knows what to fix.
pub(super) enum Origin {
    Flag,
    Env,
    /// Stakater Reloader's variable for the setting (`KUBERNETES_NAMESPACE`).
    ReloaderEnv,
    Default,
}

/// Flag > environment > default lookup of validated values.
pub(super) struct Lookup<'a> {
    flags: &'a BTreeMap<&'static str, String>,
    env: &'a dyn Fn(&str) -> Option<String>,
}

impl Lookup<'_> {
    /// The raw text for flag `name`, and how to name it in an error. An empty environment
    /// variable counts as unset (manifests often template empty values).
    fn text(&self, name: &str) -> Option<(String, String, Origin)> {
        let flag = find_flag(name).expect("flag names used in config.rs are in FLAGS");
        if let Some(v) = self.flags.get(flag.name) {
            return Some((v.clone(), format!("--{}", flag.name), Origin::Flag));
        }
        let var = flag.env_var();
        if let Some(v) = (self.env)(&var).filter(|v| !v.is_empty()) {
            return Some((v, var, Origin::Env));
        }
        if let Some(var) = flag.reloader_env {
            if let Some(v) = (self.env)(var).filter(|v| !v.trim().is_empty()) {
                return Some((v, var.to_string(), Origin::ReloaderEnv));
            }
        }
        match flag.default {
            FlagDefault::Value(d) => Some((
                d.to_string(),
                format!("default of --{}", flag.name),
                Origin::Default,
            )),
            FlagDefault::Unset(_) => None,
        }
    }

    /// Looks up `name` and converts it with `convert`, whose error says what is expected.
    fn get<T>(
        &self,
        name: &str,
        convert: impl Fn(&str) -> Result<T, String>,
    ) -> Result<Option<T>, Error> {
        // One body per value type, not per validator: the binary stays small.
        self.get_dyn(name, &convert)
    }

    fn get_dyn<T>(
        &self,
        name: &str,
        convert: &dyn Fn(&str) -> Result<T, String>,
    ) -> Result<Option<T>, Error> {
        let Some((text, source, origin)) = self.text(name) else {
            return Ok(None);
        };
        let text = match origin {
            Origin::Env | Origin::ReloaderEnv => text.trim().to_string(),
            Origin::Flag | Origin::Default => text,
        };
        convert(&text)
            .map(Some)
            .map_err(|why| config_error(format!("{source}: {why}")))
    }

    /// Reloader's variable, when it is where `name`'s value comes from: `(variable, value)`.
    fn reloader_env_value(&self, name: &str) -> Option<(String, String)> {
        match self.text(name)? {
            (value, var, Origin::ReloaderEnv) => Some((var, value.trim().to_string())),
            _ => None,
        }
    }

    /// Like [`Lookup::get`] for flags that have a default value.
    fn required<T>(
        &self,
        name: &str,
        convert: impl Fn(&str) -> Result<T, String>,
    ) -> Result<T, Error> {
        self.get(name, convert)?
            .ok_or_else(|| config_error(format!("--{name} has no value")))
    }
}

/// The settings of `wavelet impact`.
fn impact_config(look: &Lookup) -> Result<ImpactConfig, Error> {
    let paths = |name: &str| -> Result<Vec<PathBuf>, Error> {
        Ok(look
            .get(name, non_empty)?
            .map(|text: String| {
                text.lines()
                    .filter(|l| !l.is_empty())
                    .map(PathBuf::from)
                    .collect()
            })
            .unwrap_or_default())
    };
    // Without -f, `impact::run` says what it needs (exit 1, as every error of impact).
    let files = paths("file")?;
    let manifests = paths("manifests")?;
    let base = paths("base")?;
    if !base.is_empty() && manifests.is_empty() {
        return Err(config_error(
            "--base is for offline use with --manifests DIR (live, the cluster holds the objects as they are now)",
        ));
    }
    Ok(ImpactConfig {
        files,
        namespace: look.get("namespace", namespace)?,
        output: look.required("output", ImpactOutput::parse)?,
        manifests,
        base,
        max_rolls: look.get("max-rolls", |s| {
            s.trim()
                .parse::<usize>()
                .map_err(|_| format!("expected a count such as 10, got {s:?}"))
        })?,
        state_namespace: look.get("state-namespace", namespace)?,
        namespace_selector: look.get("namespace-selector", reloader_selector)?,
        hash_key_file: look.get("hash-key-file", non_empty)?.map(PathBuf::from),
    })
}

/// Parses the command line (`args` without the program name) and the environment (read
/// through `env`, so tests pass a map) into a [`Config`].
///
/// Errors are `Error::Config` naming the flag or variable and what it expects.
pub fn parse(args: &[String], env: &dyn Fn(&str) -> Option<String>) -> Result<Config, Error> {
    let raw = split_args(args)?;
    if raw.help || raw.command == "help" {
        return Ok(Config {
            connection: ConnectionFlags::default(),
            log_format: LogFormat::Text,
            policy: Policy::default(),
            fan_out: FanOut::default(),
            log_level: None,
            notes: Vec::new(),
            command: Command::Help(help_text()),
        });
    }

    // Flags given on the command line must belong to the command.
    let scope_ok = |scope: Scope| match scope {
        Scope::Global => true,
        Scope::Run => raw.command == "run",
        Scope::StatusAndHash => raw.command == "status" || raw.command == "hash",
        Scope::Hashing => ["run", "status", "hash", "impact"].contains(&raw.command),
        Scope::Migrate => raw.command == "migrate",
        Scope::Gating => ["run", "status", "impact"].contains(&raw.command),
        Scope::State => ["run", "status", "pause", "resume", "impact"].contains(&raw.command),
        Scope::Impact => raw.command == "impact",
    };
    for name in raw.flags.keys() {
        let flag = find_flag(name).expect("raw flags come from FLAGS");
        let namespace_of_migrate =
            flag.name == "namespace" && ["migrate", "resume", "impact"].contains(&raw.command);
        // `impact` judges workloads as `run` does, in the namespaces `run` acts in.
        let selector_of_impact = flag.name == "namespace-selector" && raw.command == "impact";
        if !scope_ok(flag.scope) && !namespace_of_migrate && !selector_of_impact {
            let owner = match flag.scope {
                Scope::Run => "wavelet run",
                Scope::Migrate => "wavelet migrate wave",
                Scope::Gating => "wavelet run, status and impact",
                Scope::State => "wavelet run, status, pause, resume and impact",
                Scope::Impact => "wavelet impact",
                _ => "wavelet status and wavelet hash",
            };
            let hint = if flag.name == "namespace" {
                "; wavelet run takes --namespaces"
            } else {
                ""
            };
            return Err(config_error(format!(
                "--{} is a flag of {owner}, not of wavelet {}{hint}",
                flag.name, raw.command
            )));
        }
    }
    let positionals_allowed = if ["hash", "migrate", "resume"].contains(&raw.command) {
        1
    } else {
        0
    };
    if raw.positionals.len() > positionals_allowed {
        let extra = raw.positionals[positionals_allowed];
        return Err(config_error(format!(
            "unexpected argument {extra:?} for wavelet {}; see wavelet --help",
            raw.command
        )));
    }

    let look = Lookup {
        flags: &raw.flags,
        env,
    };
    let connection = ConnectionFlags {
        server: look.get("server", non_empty)?,
        kubeconfig: look.get("kubeconfig", non_empty)?.map(PathBuf::from),
        insecure_skip_tls_verify: look.required("insecure-skip-tls-verify", parse_bool)?,
        context: look.get("context", non_empty)?,
    };
    let log_format = look.required("log-format", parse_log_format)?;
    let log_level = look.get("log-level", log_level)?;
    let mut notes = raw.notes.clone();
    for (judged, value) in &raw.judged {
        notes.push(judged.judge(value).map_err(config_error)?);
    }
    if let Some(level) = &log_level {
        let rust_log = env("RUST_LOG").filter(|v| !v.trim().is_empty());
        notes.push(match rust_log {
            Some(_) => "--log-level: RUST_LOG is set and wins".to_string(),
            None => format!("--log-level: logging at {level} (RUST_LOG, when set, wins)"),
        });
    }

    let command = match raw.command {
        "run" => Command::Run(RunConfig {
            namespaces: look
                .get("namespaces", |s| list(s, namespace))?
                .unwrap_or_default(),
            resync: look.required("resync", positive_duration)?,
            debounce: look.required("debounce", parse_duration)?,
            max_rollouts_per_second: look.required("max-rollouts-per-second", parse_rate)?,
            rollout_burst: look.required("rollout-burst", at_least_one)?,
            min_rollout_interval: look.required("min-rollout-interval", parse_duration)?,
            api_qps: look.required("api-qps", parse_rate)?,
            api_burst: look.required("api-burst", at_least_one)?,
            per_namespace_watches: look.required("per-namespace-watches", parse_bool)?,
            workload_kinds: look
                .get("workload-kinds", workload_kinds)?
                .unwrap_or_default(),
            leader_elect: look.required("leader-elect", parse_bool)?
                || look.required("enable-ha", parse_bool)?,
            lease_name: look.required("lease-name", lease_name)?,
            lease_namespace: look.get("lease-namespace", namespace)?,
            lease_timings: lease_timings(
                look.required("lease-duration", positive_duration)?,
                look.required("renew-deadline", positive_duration)?,
                look.required("retry-period", positive_duration)?,
            )?,
            state_namespace: look.get("state-namespace", namespace)?,
            listen_addr: look.required("listen-addr", listen_addr)?,
            dry_run: look.required("dry-run", parse_bool)?,
            hash_key_file: look.get("hash-key-file", non_empty)?.map(PathBuf::from),
            workers: look.required("workers", at_least_one)?,
            rolling_timeout: look.required("rolling-timeout", positive_duration)?,
            eviction_warning_after: look.required("eviction-warning-after", positive_duration)?,
            reloader: ReloaderFlags {
                namespaces_to_ignore: look
                    .get("namespaces-to-ignore", |s| list(s, namespace))?
                    .unwrap_or_default(),
                namespace_selector: look.get("namespace-selector", reloader_selector)?,
                resource_label_selector: look.get("resource-label-selector", reloader_selector)?,
                ignore_cronjobs: look
                    .get("ignored-workload-types", ignored_workload_types)?
                    .unwrap_or(false),
                argo_rollouts: look.get("is-Argo-Rollouts", |s| Ok(reloaders_string_bool(s).0))?,
                count_by_namespace: look
                    .get("metrics-count-by-namespace", count_by_namespace)?
                    .unwrap_or(false),
            },
            alerts: alert_config(&look, &mut notes)?,
        }),
        "status" => Command::Status {
            namespace: look.get("namespace", namespace)?,
            hash_key_file: look.get("hash-key-file", non_empty)?.map(PathBuf::from),
            state_namespace: look.get("state-namespace", namespace)?,
        },
        "impact" => Command::Impact(impact_config(&look)?),
        "pause" => Command::Pause {
            state_namespace: look.get("state-namespace", namespace)?,
        },
        "resume" => Command::Resume {
            state_namespace: look.get("state-namespace", namespace)?,
            target: match raw.positionals.first() {
                None => None,
                Some(target) => Some(config_target(target, look.get("namespace", namespace)?)?),
            },
        },
        "hash" => {
            let Some(target) = raw.positionals.first() else {
                return Err(config_error(
                    "wavelet hash needs the workload as KIND/NAME, e.g. wavelet hash -n default deployment/web",
                ));
            };
            let (kind, name) = kind_and_name(target).map_err(config_error)?;
            let namespace = look.get("namespace", namespace)?;
            Command::Hash {
                namespace,
                kind,
                name,
                hash_key_file: look.get("hash-key-file", non_empty)?.map(PathBuf::from),
            }
        }
        "migrate" if raw.positionals.first() == Some(&"reloader") => {
            if look.required("apply", parse_bool)? {
                return Err(config_error(
                    "wavelet migrate reloader changes nothing: it has no --apply (it prints what to do)",
                ));
            }
            Command::MigrateReloader {
                namespace: look.get("namespace", namespace)?,
            }
        }
        "migrate" => {
            if raw.positionals.first() != Some(&"wave") {
                return Err(config_error(
                    "wavelet migrate takes what to migrate from: wavelet migrate wave [-n NAMESPACE | --all-namespaces] [--apply], or wavelet migrate reloader [-n NAMESPACE]",
                ));
            }
            let namespace = look.get("namespace", namespace)?;
            let all_namespaces = look.required("all-namespaces", parse_bool)?;
            if namespace.is_some() && all_namespaces {
                return Err(config_error(
                    "wavelet migrate wave takes -n NAMESPACE or --all-namespaces, not both",
                ));
            }
            Command::MigrateWave {
                namespace,
                all_namespaces,
                apply: look.required("apply", parse_bool)?,
            }
        }
        _ => Command::Version,
    };
    let (ignore_configmaps, ignore_secrets) = look
        .get("resources-to-ignore", resources_to_ignore)?
        .unwrap_or((false, false));
    let policy = Policy {
        auto_reload_all: look.required("auto-reload-all", parse_bool)?,
        ignore_configmaps: ignore_configmaps || look.required("ignore-configmaps", parse_bool)?,
        ignore_secrets: ignore_secrets || look.required("ignore-secrets", parse_bool)?,
        csi_integration: look.required("enable-csi-integration", parse_bool)?,
    };
    if policy.ignore_configmaps && policy.ignore_secrets {
        return Err(config_error(
            "--ignore-configmaps and --ignore-secrets together leave nothing to watch; give one (as Reloader accepts only one)",
        ));
    }
    let fan_out = FanOut {
        waves: look.required("fan-out", parse_fan_out)?,
        first_wave: look.required("first-wave", at_least_one)?,
        wave_size: look.required("wave-size", WaveSize::parse)?,
        rollout_timeout: look.required("rollout-timeout", positive_duration)?,
        restart_window: look.get("restart-window", Windows::parse)?,
    };
    if let Command::Run(run) = &command {
        notes.extend(run_notes(&look, run, env));
    }
    Ok(Config {
        connection,
        log_format,
        log_level,
        notes,
        policy,
        fan_out,
        command,
    })
}

/// `configmap/NAME` or `secret/NAME` (kubectl's spellings: `cm`, `configmaps`, ...).
fn config_target(text: &str, namespace: Option<String>) -> Result<ConfigTarget, Error> {
    let bad = || {
        config_error(format!(
            "wavelet resume takes the ConfigMap or Secret of a held fan-out as configmap/NAME or secret/NAME, got {text:?}; without it, it lifts the global pause"
        ))
    };
    let (kind, name) = text.split_once('/').ok_or_else(bad)?;
    let kind = match kind.to_ascii_lowercase().as_str() {
        "configmap" | "configmaps" | "cm" => ConfigKind::ConfigMap,
        "secret" | "secrets" => ConfigKind::Secret,
        _ => return Err(bad()),
    };
    if name.is_empty() {
        return Err(bad());
    }
    Ok(ConfigTarget {
        namespace,
        kind,
        name: name.to_string(),
    })
}

/// `--alert-*` (Reloader's `ALERT_*`): `None` without a URL, or with both kinds of alert
/// off. A URL alone turns on the alerts on fan-out holds; `--alert-on-reload` adds one per
/// rollout, and needs the URL.
fn alert_config(look: &Lookup, notes: &mut Vec<String>) -> Result<Option<AlertConfig>, Error> {
    let url = look.get("alert-webhook-url", http_url)?;
    let on_reload = look.required("alert-on-reload", parse_bool)?;
    let on_hold = look.required("alert-on-hold", parse_bool)?;
    let Some(webhook_url) = url else {
        if on_reload {
            return Err(config_error(
                "--alert-on-reload (ALERT_ON_RELOAD) needs --alert-webhook-url (ALERT_WEBHOOK_URL): where to send the alerts",
            ));
        }
        return Ok(None);
    };
    if !on_reload && !on_hold {
        notes.push("alerts are off: --alert-webhook-url is set, but --alert-on-reload (ALERT_ON_RELOAD) is not true and --alert-on-hold is false".into());
        return Ok(None);
    }
    Ok(Some(AlertConfig {
        on_reload,
        on_hold,
        sink: look.required("alert-sink", alert_sink)?,
        webhook_url,
        proxy: look.get("alert-webhook-proxy", http_url)?,
        additional_info: look.get("alert-additional-info", non_empty)?,
        ca_file: look.get("alert-ca-file", non_empty)?.map(PathBuf::from),
        queue_size: look.required("alert-queue-size", at_least_one)?,
    }))
}

/// What wavelet makes of Reloader's settings that only `run` reads.
fn run_notes(look: &Lookup, run: &RunConfig, env: &dyn Fn(&str) -> Option<String>) -> Vec<String> {
    let mut notes = Vec::new();
    if let Some((var, value)) = look.reloader_env_value("namespaces") {
        notes.push(format!(
            "{var}={value} (Reloader's one-namespace mode): watching namespace {} only",
            run.namespaces.join(", ")
        ));
    }
    if look.flags.contains_key("enable-ha") || (look.env)("WAVELET_ENABLE_HA").is_some() {
        notes.push(if run.leader_elect {
            format!(
                "--enable-ha: leader election (--leader-elect) with Lease {}",
                run.lease_name
            )
        } else {
            "--enable-ha=false: no leader election (--leader-elect turns it on)".into()
        });
    }
    let argo = look
        .get("is-Argo-Rollouts", |s| {
            Ok((s.to_string(), reloaders_string_bool(s).1))
        })
        .ok()
        .flatten();
    if let Some((value, read)) = argo {
        notes.push(match run.reloader.argo_rollouts {
            Some(true) => "--is-Argo-Rollouts=true: watching argoproj.io/v1alpha1 rollouts when the API serves them (checked at start)".into(),
            _ => format!("--is-Argo-Rollouts={value}: not watching Argo Rollouts, as Reloader{read}"),
        });
    }
    if run.reloader.count_by_namespace {
        notes.push("metrics: reloader_reload_executed_total_by_namespace is exported too".into());
    }
    for (var, why) in NOTED_ENV {
        if env(var).is_some_and(|v| !v.trim().is_empty()) {
            notes.push(format!("{var}: {why}"));
        }
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::test_support::*;

    #[test]
    fn no_arguments_runs_the_controller_with_the_defaults() {
        let config = parse(&[], &no_env).unwrap();
        assert_eq!(config.connection, ConnectionFlags::default());
        assert_eq!(config.log_format, LogFormat::Text);
        assert_eq!(
            config.command,
            Command::Run(RunConfig {
                namespaces: vec![],
                resync: Duration::from_secs(4 * 3600),
                debounce: Duration::from_secs(1),
                max_rollouts_per_second: 2.0,
                rollout_burst: 10,
                min_rollout_interval: Duration::from_secs(10),
                api_qps: 20.0,
                api_burst: 30,
                per_namespace_watches: false,
                workload_kinds: vec![],
                leader_elect: false,
                lease_name: "wavelet".into(),
                lease_namespace: None,
                lease_timings: LeaseTimings::default(),
                state_namespace: None,
                listen_addr: "0.0.0.0:9090".into(),
                dry_run: false,
                hash_key_file: None,
                workers: 4,
                rolling_timeout: Duration::from_secs(300),
                eviction_warning_after: Duration::from_secs(300),
                reloader: ReloaderFlags::default(),
                alerts: None,
            })
        );
        assert_eq!(parse(&args("run"), &no_env).unwrap(), config);
    }

    #[test]
    fn a_flag_wins_over_the_environment_which_wins_over_the_default() {
        assert_eq!(run("", &[]).resync, Duration::from_secs(4 * 3600));
        assert_eq!(
            run("", &[("WAVELET_RESYNC", "1m")]).resync,
            Duration::from_secs(60)
        );
        assert_eq!(
            run("--resync 2m", &[("WAVELET_RESYNC", "1m")]).resync,
            Duration::from_secs(120)
        );
        assert_eq!(
            run("--resync=3m", &[("WAVELET_RESYNC", "1m")]).resync,
            Duration::from_secs(180)
        );
    }

    #[test]
    fn an_empty_environment_variable_counts_as_unset() {
        assert_eq!(
            run("", &[("WAVELET_RESYNC", "")]).resync,
            Duration::from_secs(4 * 3600)
        );
        assert_eq!(
            run("", &[("WAVELET_RESYNC", " 1m\n")]).resync,
            Duration::from_secs(60)
        );
    }

    #[test]
    fn log_format_is_global_and_checked() {
        assert_eq!(
            parse_with("status --log-format json", &[])
                .unwrap()
                .log_format,
            LogFormat::Json
        );
        assert_eq!(
            parse_with("--log-format=json version", &[])
                .unwrap()
                .log_format,
            LogFormat::Json
        );
        assert_eq!(
            error("--log-format xml", &[]),
            "--log-format: expected text or json, got \"xml\""
        );
    }

    #[test]
    fn connection_flags_work_for_every_command() {
        for command in ["run", "status", "version", "hash -n x deployment/web"] {
            let line = format!(
                "--server http://proxy:8001 {command} --insecure-skip-tls-verify --kubeconfig /kc"
            );
            let config = parse_with(&line, &[]).unwrap_or_else(|e| panic!("{line}: {e}"));
            assert_eq!(
                config.connection,
                ConnectionFlags {
                    server: Some("http://proxy:8001".into()),
                    kubeconfig: Some("/kc".into()),
                    insecure_skip_tls_verify: true,
                    context: None,
                }
            );
        }
    }

    #[test]
    fn run_flags_are_refused_for_other_commands_but_their_env_is_ignored() {
        assert_eq!(
            error("status --resync 1m", &[]),
            "--resync is a flag of wavelet run, not of wavelet status"
        );
        assert_eq!(
            error("run -n x", &[]),
            "--namespace is a flag of wavelet status and wavelet hash, not of wavelet run; wavelet run takes --namespaces"
        );
        let status = parse_with("status", &[("WAVELET_RESYNC", "not a duration")]).unwrap();
        assert_eq!(
            status.command,
            Command::Status {
                namespace: None,
                hash_key_file: None,
                state_namespace: None,
            }
        );
    }

    #[test]
    fn status_takes_an_optional_namespace() {
        assert_eq!(
            parse_with("status", &[]).unwrap().command,
            Command::Status {
                namespace: None,
                hash_key_file: None,
                state_namespace: None,
            }
        );
        for line in [
            "status -n prod",
            "status -nprod",
            "status -n=prod",
            "status --namespace prod",
            "-n prod status",
        ] {
            assert_eq!(
                parse_with(line, &[]).unwrap().command,
                Command::Status {
                    namespace: Some("prod".into()),
                    hash_key_file: None,
                    state_namespace: None,
                },
                "{line}"
            );
        }
    }

    #[test]
    fn hash_takes_a_namespace_and_kind_slash_name() {
        let hash = |line: &str| parse_with(line, &[]).unwrap().command;
        let expected = Command::Hash {
            namespace: Some("shop".into()),
            kind: "deployments".into(),
            name: "web".into(),
            hash_key_file: None,
        };
        for line in [
            "hash -n shop deployment/web",
            "hash deploy/web -n shop",
            "hash --namespace=shop deployments.apps/web",
            "hash -n shop Deployment/web",
        ] {
            assert_eq!(hash(line), expected, "{line}");
        }
        assert_eq!(
            hash("hash -n a sts/db"),
            Command::Hash {
                namespace: Some("a".into()),
                kind: "statefulsets".into(),
                name: "db".into(),
                hash_key_file: None,
            }
        );
        assert_eq!(
            hash("hash -n a ds/agent"),
            Command::Hash {
                namespace: Some("a".into()),
                kind: "daemonsets".into(),
                name: "agent".into(),
                hash_key_file: None,
            }
        );
        assert_eq!(
            hash("hash -n a rollouts/canary"),
            Command::Hash {
                namespace: Some("a".into()),
                kind: "rollouts".into(),
                name: "canary".into(),
                hash_key_file: None,
            }
        );
        let from_env = parse_with("hash deployment/web", &[("WAVELET_NAMESPACE", "shop")]).unwrap();
        assert_eq!(from_env.command, expected);
    }

    #[test]
    fn hash_errors_say_what_is_missing() {
        assert_eq!(
            error("hash -n shop", &[]),
            "wavelet hash needs the workload as KIND/NAME, e.g. wavelet hash -n default deployment/web"
        );
        assert!(matches!(
            parse_with("hash deployment/web", &[]).unwrap().command,
            Command::Hash {
                namespace: None,
                ..
            }
        ));
        assert_eq!(
            error("hash -n shop web", &[]),
            "expected KIND/NAME, e.g. deployment/web; got \"web\""
        );
        assert_eq!(
            error("hash -n shop deployment/", &[]),
            "expected KIND/NAME, e.g. deployment/web; got \"deployment/\""
        );
        assert_eq!(
            error("hash -n shop deployment/a deployment/b", &[]),
            "unexpected argument \"deployment/b\" for wavelet hash; see wavelet --help"
        );
    }

    #[test]
    fn config_errors_display_with_the_config_prefix() {
        let err = parse_with("--workers x", &[]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "config: --workers: expected a whole number of at least 1, e.g. 4; got \"x\""
        );
    }

    #[test]
    fn migrate_wave_needs_a_namespace_or_all_of_them_and_is_a_dry_run_by_default() {
        assert_eq!(
            parse_with("migrate wave -n apps", &[]).unwrap().command,
            Command::MigrateWave {
                namespace: Some("apps".into()),
                all_namespaces: false,
                apply: false
            }
        );
        assert_eq!(
            parse_with("migrate wave --all-namespaces --apply", &[])
                .unwrap()
                .command,
            Command::MigrateWave {
                namespace: None,
                all_namespaces: true,
                apply: true
            }
        );
        assert!(error("migrate wave -n a --all-namespaces", &[]).contains("not both"));
        assert!(error("migrate -n a", &[]).contains("wavelet migrate wave"));
        assert_eq!(
            parse_with("migrate reloader -n a", &[]).unwrap().command,
            Command::MigrateReloader {
                namespace: Some("a".into())
            }
        );
        assert_eq!(
            parse_with("migrate reloader --all-namespaces", &[])
                .unwrap()
                .command,
            Command::MigrateReloader { namespace: None }
        );
        assert!(error("migrate reloader --apply", &[]).contains("changes nothing"));
        assert!(error("migrate stakater", &[]).contains("wavelet migrate reloader"));
        assert!(error("status --apply", &[]).contains("is a flag of wavelet migrate wave"));
    }
}
