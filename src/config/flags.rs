//! The flag table: every flag wavelet has, its value, default, scope and help text, in
//! the order `--help` lists them; and the Reloader flags wavelet refuses, with what it
//! does instead. Parsing and `--help` both read this table.

use crate::config::args::config_error;
use crate::error::Error;

/// Which commands a flag applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Scope {
    /// Connection and logging: every command.
    Global,
    /// `wavelet run` only.
    Run,
    /// `wavelet status` and `wavelet hash`.
    StatusAndHash,
    /// What decides the hash: `run`, `status` and `hash` must agree on it.
    Hashing,
    /// `wavelet migrate wave`.
    Migrate,
}

/// A flag's default, as help shows it and as parsing uses it.
#[derive(Debug, Clone, Copy)]
pub(super) enum FlagDefault {
    /// This text, validated like user input.
    Value(&'static str),
    /// No value; the text says what that means.
    Unset(&'static str),
}

/// One row of the table.
#[derive(Debug)]
pub(super) struct Flag {
    pub(super) name: &'static str,
    pub(super) short: Option<char>,
    /// What the value looks like in help (`DURATION`); `None` for boolean flags.
    pub(super) value: Option<&'static str>,
    pub(super) default: FlagDefault,
    pub(super) scope: Scope,
    pub(super) help: &'static str,
}

impl Flag {
    pub(super) fn env_var(&self) -> String {
        env_var(self.name)
    }

    pub(super) fn is_bool(&self) -> bool {
        self.value.is_none()
    }
}

/// The environment variable of flag `name`: `WAVELET_` + upper case, `-` → `_`.
pub fn env_var(name: &str) -> String {
    format!("WAVELET_{}", name.to_ascii_uppercase().replace('-', "_"))
}

pub(super) const fn flag(
    name: &'static str,
    value: Option<&'static str>,
    default: FlagDefault,
    scope: Scope,
    help: &'static str,
) -> Flag {
    Flag {
        name,
        short: None,
        value,
        default,
        scope,
        help,
    }
}

/// Every flag wavelet has, in the order `--help` lists them.
pub(super) static FLAGS: &[Flag] = &[
    // Connection and output: every command.
    flag(
        "server",
        Some("URL"),
        FlagDefault::Unset("none: kubeconfig, then in-cluster"),
        Scope::Global,
        "API server URL to use without credentials, e.g. http://127.0.0.1:8001 for a kubectl proxy sidecar; overrides kubeconfig and in-cluster settings",
    ),
    flag(
        "kubeconfig",
        Some("PATH"),
        FlagDefault::Unset("$KUBECONFIG, then in-cluster"),
        Scope::Global,
        "kubeconfig file (YAML or JSON; $KUBECONFIG may list several, merged as kubectl merges them): server, CA, token, client certificate, exec credential plugin, proxy-url, impersonation",
    ),
    flag(
        "context",
        Some("NAME"),
        FlagDefault::Unset("the kubeconfig's current-context"),
        Scope::Global,
        "kubeconfig context to use instead of the current one (as kubectl --context)",
    ),
    flag(
        "insecure-skip-tls-verify",
        None,
        FlagDefault::Value("false"),
        Scope::Global,
        "do not verify the API server's TLS certificate (for test clusters only)",
    ),
    flag(
        "log-format",
        Some("text|json"),
        FlagDefault::Value("text"),
        Scope::Global,
        "log line format; the level filter is RUST_LOG (e.g. RUST_LOG=debug)",
    ),
    // `wavelet run`.
    flag(
        "namespaces",
        Some("NS,NS..."),
        FlagDefault::Unset("all namespaces"),
        Scope::Run,
        "comma-separated namespaces to watch",
    ),
    flag(
        "resync",
        Some("DURATION"),
        FlagDefault::Value("10m"),
        Scope::Run,
        "relist everything this often and act on whatever the watches missed (> 0)",
    ),
    flag(
        "debounce",
        Some("DURATION"),
        FlagDefault::Value("1s"),
        Scope::Run,
        "changes to one workload that arrive within this window make one rollout",
    ),
    flag(
        "max-rollouts-per-second",
        Some("RATE"),
        FlagDefault::Value("2"),
        Scope::Run,
        "rollouts per second across all workloads (token bucket refill rate, > 0, e.g. 0.5)",
    ),
    flag(
        "rollout-burst",
        Some("N"),
        FlagDefault::Value("10"),
        Scope::Run,
        "rollouts allowed at once before the rate applies (token bucket size, >= 1)",
    ),
    flag(
        "min-rollout-interval",
        Some("DURATION"),
        FlagDefault::Value("10s"),
        Scope::Run,
        "shortest time between two rollouts of the same workload",
    ),
    flag(
        "workload-kinds",
        Some("G/V/R,..."),
        FlagDefault::Unset("none"),
        Scope::Run,
        "extra kinds with a pod template at spec.template, as GROUP/VERSION/RESOURCE, e.g. argoproj.io/v1alpha1/rollouts (apps/v1 deployments, statefulsets and daemonsets are always included)",
    ),
    flag(
        "leader-elect",
        None,
        FlagDefault::Value("false"),
        Scope::Run,
        "elect one active replica with a coordination.k8s.io/v1 Lease; only the leader writes",
    ),
    flag(
        "lease-name",
        Some("NAME"),
        FlagDefault::Value("wavelet"),
        Scope::Run,
        "name of the leader-election Lease",
    ),
    flag(
        "lease-namespace",
        Some("NAMESPACE"),
        FlagDefault::Unset("the in-cluster namespace"),
        Scope::Run,
        "namespace of the leader-election Lease (required out of cluster with --leader-elect)",
    ),
    flag(
        "lease-duration",
        Some("DURATION"),
        FlagDefault::Value("15s"),
        Scope::Run,
        "how long a standby waits, after it last saw the Lease change, before taking it over (whole seconds)",
    ),
    flag(
        "renew-deadline",
        Some("DURATION"),
        FlagDefault::Value("10s"),
        Scope::Run,
        "a leader that has not renewed its Lease for this long stops writing",
    ),
    flag(
        "retry-period",
        Some("DURATION"),
        FlagDefault::Value("2s"),
        Scope::Run,
        "time between attempts to acquire or renew the Lease",
    ),
    flag(
        "state-namespace",
        Some("NAMESPACE"),
        FlagDefault::Unset("the in-cluster namespace"),
        Scope::Run,
        "namespace of the wavelet-state ConfigMap that remembers delete-mode hashes (required out of cluster)",
    ),
    flag(
        "listen-addr",
        Some("[HOST]:PORT"),
        FlagDefault::Value(":9090"),
        Scope::Run,
        "address for /healthz, /readyz and /metrics; :PORT listens on all interfaces",
    ),
    flag(
        "dry-run",
        None,
        FlagDefault::Value("false"),
        Scope::Run,
        "log what would be done and write nothing",
    ),
    flag(
        "hash-key-file",
        Some("PATH"),
        FlagDefault::Unset("none: plain SHA-256"),
        Scope::Hashing,
        "publish HMAC-SHA256 hashes keyed with this file's contents, so Secret values cannot be guessed from the annotations",
    ),
    flag(
        "workers",
        Some("N"),
        FlagDefault::Value("4"),
        Scope::Run,
        "reconcile threads (>= 1)",
    ),
    flag(
        "rolling-timeout",
        Some("DURATION"),
        FlagDefault::Value("5m"),
        Scope::Run,
        "delete mode `rolling`: longest wait for the Pods to be Ready again before replacing the next one (> 0)",
    ),
    flag(
        "eviction-warning-after",
        Some("DURATION"),
        FlagDefault::Value("5m"),
        Scope::Run,
        "delete mode: emit a Warning Event when evictions have been refused for this long (> 0)",
    ),
    // Stakater Reloader's flags, where wavelet shares their meaning.
    flag(
        "auto-reload-all",
        None,
        FlagDefault::Value("false"),
        Scope::Hashing,
        "Reloader's flag: every workload is opted in unless it says reloader.stakater.com/auto: \"false\" (writes wavelet.dev/config-hash)",
    ),
    flag(
        "ignore-configmaps",
        None,
        FlagDefault::Value("false"),
        Scope::Hashing,
        "ConfigMaps are not watched and count for no workload (not missing either); delete mode on ConfigMaps is off",
    ),
    flag(
        "ignore-secrets",
        None,
        FlagDefault::Value("false"),
        Scope::Hashing,
        "Secrets are not watched and count for no workload (not missing either); delete mode on Secrets is off; no RBAC on secrets is needed",
    ),
    flag(
        "enable-csi-integration",
        None,
        FlagDefault::Value("false"),
        Scope::Hashing,
        "Reloader's flag: follow the Secrets Store CSI driver: a SecretProviderClass a workload mounts counts with the version of each object its Pods mounted (SecretProviderClassPodStatus), so a rotation in Vault or a cloud secret store rolls it; needs list/watch on secretproviderclasspodstatuses and secretproviderclasses",
    ),
    flag(
        "resources-to-ignore",
        Some("configmaps|secrets"),
        FlagDefault::Unset("none"),
        Scope::Hashing,
        "Reloader's spelling of --ignore-configmaps / --ignore-secrets",
    ),
    flag(
        "namespaces-to-ignore",
        Some("NS,NS..."),
        FlagDefault::Unset("none"),
        Scope::Run,
        "Reloader's flag: comma-separated namespaces never watched (subtracted from --namespaces)",
    ),
    flag(
        "namespace-selector",
        Some("SELECTOR"),
        FlagDefault::Unset("every namespace"),
        Scope::Run,
        "Reloader's flag: act only in namespaces whose labels match this label selector (e.g. team=a,env in (prod)); namespaces labelled later are picked up",
    ),
    flag(
        "resource-label-selector",
        Some("SELECTOR"),
        FlagDefault::Unset("every ConfigMap and Secret"),
        Scope::Run,
        "Reloader's flag: label selector sent with the ConfigMap and Secret LIST/WATCH; objects outside it do not count (and are not missing)",
    ),
    flag(
        "ignored-workload-types",
        Some("cronjobs,jobs"),
        FlagDefault::Unset("none"),
        Scope::Run,
        "Reloader's flag: cronjobs stops watching CronJobs; jobs is accepted and changes nothing (wavelet never re-creates Jobs)",
    ),
    // `wavelet migrate wave` (and -n below).
    flag(
        "all-namespaces",
        None,
        FlagDefault::Value("false"),
        Scope::Migrate,
        "look in every namespace",
    ),
    flag(
        "apply",
        None,
        FlagDefault::Value("false"),
        Scope::Migrate,
        "remove what is listed (without it, only print it)",
    ),
    // `wavelet status` and `wavelet hash`.
    Flag {
        name: "namespace",
        short: Some('n'),
        value: Some("NAMESPACE"),
        default: FlagDefault::Unset("all namespaces for status; required for hash"),
        scope: Scope::StatusAndHash,
        help: "namespace to show (status) or of the workload (hash)",
    },
];

/// Stakater Reloader's flags whose meaning wavelet does not share, with what it does
/// instead: refused, never silently ignored, so a switched Deployment says what changed.
pub(super) static REFUSED: &[(&str, &str)] = &[
    ("reload-strategy", "wavelet always writes a hash annotation on the pod template (Reloader's `annotations` strategy); there is no env-var strategy"),
    ("reload-on-create", "wavelet rolls on data changes only; a ConfigMap or Secret created later counts once a workload references it, and one that was missing holds the rollout with a Warning Event until it exists"),
    ("reload-on-delete", "a deleted required ConfigMap or Secret holds the rollout with a Warning Event (new Pods would not start) and rolls once it is back; optional ones roll on deletion"),
    ("sync-after-restart", "changes made while wavelet was down are always rolled at start, because the hash lives on the workload"),
    ("webhook-url", "wavelet does not call webhooks; watch its ConfigChanged Events or its /metrics instead"),
    ("enable-ha", "use --leader-elect (with --lease-name and --lease-namespace)"),
    ("is-Argo-Rollouts", "wavelet watches Argo Rollouts whenever the API serves argoproj.io/v1alpha1 rollouts"),
    ("log-level", "set RUST_LOG, e.g. RUST_LOG=debug"),
    ("enable-pprof", "wavelet has no pprof; /metrics exports its memory and CPU"),
    ("pprof-addr", "wavelet has no pprof; /metrics exports its memory and CPU"),
    ("auto-annotation", "wavelet reads Reloader's annotation keys as they are; renaming them is not supported"),
    ("configmap-annotation", "wavelet reads Reloader's annotation keys as they are; renaming them is not supported"),
    ("secret-annotation", "wavelet reads Reloader's annotation keys as they are; renaming them is not supported"),
    ("configmap-auto-annotation", "wavelet reads Reloader's annotation keys as they are; renaming them is not supported"),
    ("secret-auto-annotation", "wavelet reads Reloader's annotation keys as they are; renaming them is not supported"),
    ("auto-search-annotation", "wavelet reads Reloader's annotation keys as they are; renaming them is not supported"),
    ("search-match-annotation", "wavelet reads Reloader's annotation keys as they are; renaming them is not supported"),
    ("ignore-annotation", "wavelet reads Reloader's annotation keys as they are; renaming them is not supported"),
    ("pause-deployment-annotation", "wavelet reads Reloader's annotation keys as they are; renaming them is not supported"),
    ("pause-deployment-time-annotation", "wavelet never pauses a Deployment: the pause period is a per-workload debounce window"),
];

/// The error for a flag of [`REFUSED`], or `None`.
pub(super) fn refused(name: &str) -> Option<Error> {
    REFUSED.iter().find(|(n, _)| *n == name).map(|(n, instead)| {
        config_error(format!(
            "--{n} is a Stakater Reloader flag whose meaning wavelet does not share: {instead}; remove it (README: Coming from Reloader)"
        ))
    })
}

pub(super) fn find_flag(name: &str) -> Option<&'static Flag> {
    FLAGS.iter().find(|f| f.name == name)
}

pub(super) fn find_short(c: char) -> Option<&'static Flag> {
    FLAGS.iter().find(|f| f.short == Some(c))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::test_support::*;
    use crate::config::*;

    #[test]
    fn every_flag_has_a_wavelet_environment_variable_derived_from_its_name() {
        assert_eq!(env_var("listen-addr"), "WAVELET_LISTEN_ADDR");
        for flag in FLAGS {
            let var = flag.env_var();
            assert!(var.starts_with("WAVELET_") && !var.contains('-'), "{var}");
        }
    }

    /// A value for every flag that differs from its default, the command it belongs to,
    /// and a check that it arrived.
    fn sample(name: &str) -> (&'static str, &'static str, fn(&Config) -> bool) {
        fn run(c: &Config) -> &RunConfig {
            match &c.command {
                Command::Run(r) => r,
                other => panic!("not run: {other:?}"),
            }
        }
        match name {
            "server" => ("run", "http://127.0.0.1:8001", |c| {
                c.connection.server.as_deref() == Some("http://127.0.0.1:8001")
            }),
            "kubeconfig" => ("run", "/k/config", |c| {
                c.connection.kubeconfig == Some(PathBuf::from("/k/config"))
            }),
            "context" => ("run", "staging", |c| {
                c.connection.context.as_deref() == Some("staging")
            }),
            "insecure-skip-tls-verify" => {
                ("run", "true", |c| c.connection.insecure_skip_tls_verify)
            }
            "log-format" => ("run", "json", |c| c.log_format == LogFormat::Json),
            "namespaces" => ("run", "a,b", |c| run(c).namespaces == ["a", "b"]),
            "resync" => ("run", "1h", |c| run(c).resync == Duration::from_secs(3600)),
            "debounce" => ("run", "250ms", |c| {
                run(c).debounce == Duration::from_millis(250)
            }),
            "max-rollouts-per-second" => ("run", "0.5", |c| run(c).max_rollouts_per_second == 0.5),
            "rollout-burst" => ("run", "3", |c| run(c).rollout_burst == 3),
            "min-rollout-interval" => ("run", "1m", |c| {
                run(c).min_rollout_interval == Duration::from_secs(60)
            }),
            "workload-kinds" => ("run", "argoproj.io/v1alpha1/rollouts", |c| {
                run(c).workload_kinds
                    == [WorkloadKind::parse("argoproj.io/v1alpha1/rollouts").unwrap()]
            }),
            "leader-elect" => ("run", "true", |c| run(c).leader_elect),
            "lease-name" => ("run", "other", |c| run(c).lease_name == "other"),
            "lease-namespace" => ("run", "ops", |c| {
                run(c).lease_namespace.as_deref() == Some("ops")
            }),
            "lease-duration" => ("run", "20s", |c| {
                run(c).lease_timings.lease_duration == Duration::from_secs(20)
            }),
            "renew-deadline" => ("run", "5s", |c| {
                run(c).lease_timings.renew_deadline == Duration::from_secs(5)
            }),
            "retry-period" => ("run", "1s", |c| {
                run(c).lease_timings.retry_period == Duration::from_secs(1)
            }),
            "state-namespace" => ("run", "ops", |c| {
                run(c).state_namespace.as_deref() == Some("ops")
            }),
            "listen-addr" => ("run", "127.0.0.1:8080", |c| {
                run(c).listen_addr == "127.0.0.1:8080"
            }),
            "dry-run" => ("run", "true", |c| run(c).dry_run),
            "hash-key-file" => ("run", "/k/key", |c| {
                run(c).hash_key_file == Some(PathBuf::from("/k/key"))
            }),
            "workers" => ("run", "9", |c| run(c).workers == 9),
            "rolling-timeout" => ("run", "90s", |c| {
                run(c).rolling_timeout == Duration::from_secs(90)
            }),
            "eviction-warning-after" => ("run", "1m", |c| {
                run(c).eviction_warning_after == Duration::from_secs(60)
            }),
            "auto-reload-all" => ("run", "true", |c| c.policy.auto_reload_all),
            "ignore-configmaps" => ("status", "true", |c| c.policy.ignore_configmaps),
            "ignore-secrets" => ("run", "true", |c| c.policy.ignore_secrets),
            "enable-csi-integration" => ("run", "true", |c| c.policy.csi_integration),
            "resources-to-ignore" => ("run", "secrets", |c| c.policy.ignore_secrets),
            "namespaces-to-ignore" => ("run", "kube-system,b", |c| {
                run(c).reloader.namespaces_to_ignore == ["kube-system", "b"]
            }),
            "namespace-selector" => ("run", "team=a", |c| {
                run(c).reloader.namespace_selector == Some(Selector::parse("team=a").unwrap())
            }),
            "resource-label-selector" => ("run", "reload=yes", |c| {
                run(c).reloader.resource_label_selector
                    == Some(Selector::parse("reload=yes").unwrap())
            }),
            "ignored-workload-types" => ("run", "cronjobs", |c| run(c).reloader.ignore_cronjobs),
            "all-namespaces" => ("migrate wave", "true", |c| {
                matches!(
                    c.command,
                    Command::MigrateWave {
                        all_namespaces: true,
                        ..
                    }
                )
            }),
            "apply" => ("migrate wave", "true", |c| {
                matches!(c.command, Command::MigrateWave { apply: true, .. })
            }),
            "namespace" => ("status", "prod", |c| {
                c.command
                    == Command::Status {
                        namespace: Some("prod".into()),
                        hash_key_file: None,
                    }
            }),
            other => panic!("no sample for --{other}: add one"),
        }
    }

    #[test]
    fn every_flags_environment_variable_sets_it() {
        for flag in FLAGS {
            let (command, value, check) = sample(flag.name);
            let config = parse_with(command, &[(&flag.env_var(), value)])
                .unwrap_or_else(|e| panic!("{}={value}: {e}", flag.env_var()));
            assert!(
                check(&config),
                "{}={value} was not applied: {config:?}",
                flag.env_var()
            );
            let without = parse_with(command, &[]).unwrap();
            assert!(
                !check(&without),
                "the sample for --{} equals its default",
                flag.name
            );
        }
    }

    #[test]
    fn every_flag_works_in_both_spellings() {
        for flag in FLAGS {
            let (command, value, check) = sample(flag.name);
            for line in [
                format!("{command} --{}={value}", flag.name),
                format!("{command} --{} {value}", flag.name),
            ] {
                if flag.is_bool() && !line.contains('=') {
                    continue; // `--dry-run true` is not a bool flag's form
                }
                let config = parse_with(&line, &[]).unwrap_or_else(|e| panic!("{line}: {e}"));
                assert!(check(&config), "{line} was not applied");
            }
        }
    }

    #[test]
    fn every_default_in_the_table_is_valid() {
        // The defaults go through the same validation as user input, for every command.
        for command in ["run", "status", "version"] {
            parse_with(command, &[]).unwrap_or_else(|e| panic!("{command}: {e}"));
        }
    }

    #[test]
    fn reloader_flags_whose_meaning_wavelet_does_not_share_are_refused_with_what_it_does_instead() {
        for (name, instead) in REFUSED {
            let message = error(&format!("--{name}=x"), &[]);
            assert!(
                message.starts_with(&format!("--{name} is a Stakater Reloader flag whose meaning wavelet does not share: {instead}")),
                "{message}"
            );
        }
        assert!(error("--reload-on-create true", &[]).contains("data changes only"));
        // Refused before anything else is looked at, with or without a value.
        assert!(error("--sync-after-restart", &[]).contains("always rolled at start"));
    }
}
