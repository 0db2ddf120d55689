//! The flag table: every flag wavelet has, its value, default, scope and help text, in
//! the order `--help` lists them, with the Stakater Reloader variable that also sets it;
//! Reloader's other spellings of wavelet's flags; and the Reloader flags wavelet refuses
//! whatever their value, with what it does instead. Parsing and `--help` both read these
//! tables; the Reloader flags judged by value are in `reloader.rs`.

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
    /// How a shared change rolls: `wavelet run` decides by it, `wavelet status` shows it.
    Gating,
    /// Where wavelet keeps its state: `run`, `status`, `pause`, `resume`, `impact`.
    State,
    /// `wavelet impact`.
    Impact,
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
    /// Stakater Reloader's environment variable for the same setting (`ALERT_SINK`), read
    /// after `WAVELET_*`, so a Reloader Deployment's environment keeps working.
    pub(super) reloader_env: Option<&'static str>,
}

impl Flag {
    pub(super) fn env_var(&self) -> String {
        env_var(self.name)
    }

    pub(super) fn is_bool(&self) -> bool {
        self.value.is_none()
    }

    /// The same row, also set by Reloader's variable `name`.
    const fn or_reloader_env(mut self, name: &'static str) -> Flag {
        self.reloader_env = Some(name);
        self
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
        reloader_env: None,
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
        "log line format (Reloader's empty value is text)",
    ),
    flag(
        "log-level",
        Some("LEVEL"),
        FlagDefault::Unset("info"),
        Scope::Global,
        "trace, debug, info, warn(ing) or error (Reloader's fatal, panic: error); RUST_LOG, when set, wins",
    ),
    // `wavelet run`.
    flag(
        "namespaces",
        Some("NS,NS..."),
        FlagDefault::Unset("all namespaces"),
        Scope::Run,
        "comma-separated namespaces to watch (KUBERNETES_NAMESPACE is Reloader's one-namespace spelling)",
    )
    .or_reloader_env("KUBERNETES_NAMESPACE"),
    flag(
        "resync",
        Some("DURATION"),
        FlagDefault::Value("4h"),
        Scope::Run,
        "relist about this often (each period drawn from 3/4 to 5/4 of it), comparing metadata and reading only what changed, and act on whatever the watches missed (> 0)",
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
        "api-qps",
        Some("RATE"),
        FlagDefault::Value("20"),
        Scope::Run,
        "client-side budget: requests per second to the API server, all requests together except watches and the Lease's (kube-controller-manager's --kube-api-qps default; > 0)",
    ),
    flag(
        "api-burst",
        Some("N"),
        FlagDefault::Value("30"),
        Scope::Run,
        "client-side budget: requests allowed at once before --api-qps applies (kube-controller-manager's --kube-api-burst default; >= 1)",
    ),
    flag(
        "per-namespace-watches",
        None,
        FlagDefault::Value("false"),
        Scope::Run,
        "with --namespaces, watch each namespace on its own even above 10 of them (needs only Roles in those namespaces; costs a thread, a connection and a LIST per resync per resource and namespace; at most 100 namespaces) instead of one cluster-wide watch per resource filtered to them (needs list and watch in a ClusterRole)",
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
        FlagDefault::Unset("the pod's or kubeconfig's, else default"),
        Scope::Run,
        "namespace of the leader-election Lease",
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
        FlagDefault::Unset("the pod's or kubeconfig's, else default"),
        Scope::State,
        "namespace of the wavelet-state ConfigMap: delete-mode hashes, fan-outs in progress or held, the global pause",
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
        "publish HMAC-SHA256 hashes keyed with this file's first line, so Secret values cannot be guessed from the annotations; later lines are previous keys, kept while rotating so a change made across the rotation is still detected",
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
    // Rolling a shared change safely: `wavelet run` and `wavelet status`.
    flag(
        "fan-out",
        Some("waves|at-once"),
        FlagDefault::Value("waves"),
        Scope::Gating,
        "a change of a ConfigMap or Secret that several workloads use rolls them in waves, each after the one before finished its rollout healthy (waves), or all at once (at-once, wavelet's behaviour before); the annotation wavelet.dev/fan-out on the object overrides it",
    ),
    flag(
        "first-wave",
        Some("N"),
        FlagDefault::Value("1"),
        Scope::Gating,
        "workloads in the first wave of a shared change (>= 1); workloads annotated wavelet.dev/canary: \"true\" go first instead",
    ),
    flag(
        "wave-size",
        Some("N|P%"),
        FlagDefault::Value("25%"),
        Scope::Gating,
        "workloads in each later wave: a count, or a percentage of the workloads the change rolls (at least 1); the annotation wavelet.dev/wave-size overrides it",
    ),
    flag(
        "rollout-timeout",
        Some("DURATION"),
        FlagDefault::Value("15m"),
        Scope::Gating,
        "a rolled workload that has not finished its rollout healthy after this long (or its own progress deadline, whichever comes first) holds the rest of the fan-out (> 0)",
    ),
    flag(
        "restart-window",
        Some("WINDOWS"),
        FlagDefault::Unset("none: any time"),
        Scope::Gating,
        "roll only inside these windows, e.g. \"Mon-Fri 02:00-05:00 Europe/Berlin\" (several separated by ;); changes outside wait and roll once when one opens; wavelet.dev/restart-window on a workload or Namespace overrides it",
    ),
    // Alerts on rollout, set by Reloader's ALERT_* variables too.
    flag(
        "alert-on-reload",
        None,
        FlagDefault::Value("false"),
        Scope::Run,
        "POST an alert to --alert-webhook-url for every rollout (and each a --dry-run would make), naming the workload and what changed, never a value",
    )
    .or_reloader_env("ALERT_ON_RELOAD"),
    flag(
        "alert-on-hold",
        None,
        FlagDefault::Value("true"),
        Scope::Run,
        "wherever --alert-webhook-url is set, POST an alert when a fan-out is held (the change, the workload that failed and why, the `wavelet resume` that goes on) and one when the hold ends (resumed or superseded); false turns them off",
    ),
    flag(
        "alert-sink",
        Some("slack|teams|gchat|webhook"),
        FlagDefault::Value("webhook"),
        Scope::Run,
        "the payload, as Reloader sends it (webhook: plain text, Reloader's raw)",
    )
    .or_reloader_env("ALERT_SINK"),
    flag(
        "alert-webhook-url",
        Some("URL"),
        FlagDefault::Unset("none"),
        Scope::Run,
        "where alerts go (TLS verified); never logged: it often holds a token",
    )
    .or_reloader_env("ALERT_WEBHOOK_URL"),
    flag(
        "alert-webhook-proxy",
        Some("URL"),
        FlagDefault::Unset("none (not HTTPS_PROXY)"),
        Scope::Run,
        "HTTP proxy for alerts (CONNECT), e.g. http://proxy:3128",
    )
    .or_reloader_env("ALERT_WEBHOOK_PROXY"),
    flag(
        "alert-additional-info",
        Some("TEXT"),
        FlagDefault::Unset("none"),
        Scope::Run,
        "put before every alert as `TEXT : message`, e.g. the cluster's name",
    )
    .or_reloader_env("ALERT_ADDITIONAL_INFO"),
    flag(
        "alert-ca-file",
        Some("PATH"),
        FlagDefault::Unset("the public web roots built in"),
        Scope::Run,
        "PEM roots for an https --alert-webhook-url instead of the public ones",
    ),
    flag(
        "alert-queue-size",
        Some("N"),
        FlagDefault::Value("100"),
        Scope::Run,
        "alerts waiting at most; one more is dropped, counted and logged (rollouts never wait)",
    ),
    // Stakater Reloader's flags, where wavelet shares their meaning.
    flag(
        "enable-ha",
        None,
        FlagDefault::Value("false"),
        Scope::Run,
        "Reloader's flag: true is --leader-elect",
    ),
    flag(
        "is-Argo-Rollouts",
        Some("true|false"),
        FlagDefault::Unset("watched whenever served (Reloader: false)"),
        Scope::Run,
        "Reloader's flag, read as Reloader reads it (exactly true): true watches Argo Rollouts (and says when they are not served); any other value never",
    ),
    flag(
        "metrics-count-by-namespace",
        Some("enabled"),
        FlagDefault::Unset("off"),
        Scope::Run,
        "enabled also exports reloader_reload_executed_total_by_namespace",
    )
    .or_reloader_env("METRICS_COUNT_BY_NAMESPACE"),
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
        "Reloader's flag: follow the Secrets Store CSI driver: a SecretProviderClass a workload mounts counts with the version of each object its running Pods mounted (SecretProviderClassPodStatus; its Pods told by owner references), so a rotation in Vault or a cloud secret store rolls it; needs list/watch on secretproviderclasspodstatuses, secretproviderclasses, pods and replicasets",
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
    // `wavelet impact`.
    Flag {
        name: "file",
        short: Some('f'),
        value: Some("FILE"),
        default: FlagDefault::Unset("required"),
        scope: Scope::Impact,
        help: "the ConfigMaps and Secrets as they would be applied (YAML or JSON, several documents, kind: List; data, binaryData, stringData; a directory: its .yaml/.yml/.json files; - for standard input); repeatable",
        reloader_env: None,
    },
    Flag {
        name: "output",
        short: Some('o'),
        value: Some("table|json|markdown"),
        default: FlagDefault::Value("table"),
        scope: Scope::Impact,
        help: "table for the terminal, json for programs, markdown for a pull-request comment",
        reloader_env: None,
    },
    flag(
        "manifests",
        Some("DIR"),
        FlagDefault::Unset("the live cluster"),
        Scope::Impact,
        "offline: take the workloads (and Namespaces) from the .yaml/.yml/.json files under DIR (multi-document YAML, kustomize output, rendered Helm charts) instead of the cluster; repeatable",
    ),
    flag(
        "base",
        Some("FILE"),
        FlagDefault::Unset("offline: every key of -f counts as changed"),
        Scope::Impact,
        "offline: the ConfigMaps and Secrets as they are now (before the change); repeatable",
    ),
    flag(
        "max-rolls",
        Some("N"),
        FlagDefault::Unset("no limit"),
        Scope::Impact,
        "exit 3 when more than N workloads would roll (a CI gate)",
    ),
    // `wavelet status` and `wavelet hash`.
    Flag {
        name: "namespace",
        short: Some('n'),
        value: Some("NAMESPACE"),
        default: FlagDefault::Unset("all namespaces for status; required for hash"),
        scope: Scope::StatusAndHash,
        help: "namespace to show (status), of the workload (hash), or of the objects of -f that name none (impact)",
        reloader_env: None,
    },
];

/// Flags that may be given more than once; their values are kept in order, one a line.
pub(super) static REPEATABLE: &[&str] = &["file", "manifests", "base"];

/// Reloader's spellings of wavelet's flags (v1.4.22's leader-election timings): the same
/// flag, so giving both is giving it twice.
pub(super) static ALIASES: &[(&str, &str)] = &[
    ("leader-election-lease-duration", "lease-duration"),
    ("leader-election-renew-deadline", "renew-deadline"),
    ("leader-election-retry-period", "retry-period"),
];

pub(super) fn find_flag(name: &str) -> Option<&'static Flag> {
    let name = ALIASES
        .iter()
        .find(|(alias, _)| *alias == name)
        .map_or(name, |(_, flag)| *flag);
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
        fn impact(c: &Config) -> &ImpactConfig {
            match &c.command {
                Command::Impact(i) => i,
                other => panic!("not impact: {other:?}"),
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
            "log-level" => ("run", "warning", |c| c.log_level.as_deref() == Some("warn")),
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
            "api-qps" => ("run", "50", |c| run(c).api_qps == 50.0),
            "api-burst" => ("run", "100", |c| run(c).api_burst == 100),
            "per-namespace-watches" => ("run", "true", |c| run(c).per_namespace_watches),
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
            "fan-out" => ("run", "at-once", |c| !c.fan_out.waves),
            "first-wave" => ("status", "3", |c| c.fan_out.first_wave == 3),
            "wave-size" => ("run", "2", |c| c.fan_out.wave_size == WaveSize::Count(2)),
            "rollout-timeout" => ("run", "1m", |c| {
                c.fan_out.rollout_timeout == Duration::from_secs(60)
            }),
            "restart-window" => ("run", "01:00-02:00", |c| {
                c.fan_out.restart_window.as_ref().map(ToString::to_string)
                    == Some("01:00-02:00".into())
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
            "enable-ha" => ("run", "true", |c| run(c).leader_elect),
            "is-Argo-Rollouts" => ("run", "false", |c| {
                run(c).reloader.argo_rollouts == Some(false)
            }),
            "metrics-count-by-namespace" => {
                ("run", "enabled", |c| run(c).reloader.count_by_namespace)
            }
            // The alert settings need --alert-on-reload and a URL (alerts.rs's tests); each
            // sample here sets it with them through its own variable.
            "alert-on-reload"
            | "alert-on-hold"
            | "alert-sink"
            | "alert-webhook-url"
            | "alert-webhook-proxy"
            | "alert-additional-info"
            | "alert-ca-file"
            | "alert-queue-size" => alert_sample(name),
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
            "file" => ("impact", "a.yaml", |c| {
                impact(c).files == [PathBuf::from("a.yaml")]
            }),
            "output" => ("impact -f a.yaml", "markdown", |c| {
                impact(c).output == ImpactOutput::Markdown
            }),
            "manifests" => ("impact -f a.yaml", "rendered", |c| {
                impact(c).manifests == [PathBuf::from("rendered")]
            }),
            "base" => ("impact -f a.yaml --manifests m", "now.yaml", |c| {
                impact(c).base == [PathBuf::from("now.yaml")]
            }),
            "max-rolls" => ("impact -f a.yaml", "5", |c| impact(c).max_rolls == Some(5)),
            "namespace" => ("status", "prod", |c| {
                c.command
                    == Command::Status {
                        namespace: Some("prod".into()),
                        hash_key_file: None,
                        state_namespace: None,
                    }
            }),
            other => panic!("no sample for --{other}: add one"),
        }
    }

    /// The alert flags' samples: `run` with alerts on and a URL, plus the flag's value.
    fn alert_sample(name: &str) -> (&'static str, &'static str, fn(&Config) -> bool) {
        fn alerts(c: &Config) -> Option<&AlertConfig> {
            match &c.command {
                Command::Run(r) => r.alerts.as_ref(),
                _ => None,
            }
        }
        const ON: &str = "run --alert-on-reload --alert-webhook-url https://hooks.example/T0";
        match name {
            "alert-on-reload" => (
                "run --alert-webhook-url https://hooks.example/T0",
                "true",
                |c| alerts(c).is_some_and(|a| a.on_reload),
            ),
            "alert-sink" => (ON, "slack", |c| {
                alerts(c).is_some_and(|a| a.sink == AlertSink::Slack)
            }),
            // A URL alone: alerts on fan-out holds, none per rollout.
            "alert-webhook-url" => ("run", "http://127.0.0.1:1/x", |c| {
                alerts(c).is_some_and(|a| a.on_hold && !a.on_reload)
            }),
            // Both kinds off: nothing is sent, and a note says so.
            "alert-on-hold" => (
                "run --alert-webhook-url https://hooks.example/T0",
                "false",
                |c| alerts(c).is_none() && c.notes.iter().any(|n| n.starts_with("alerts are off")),
            ),
            "alert-webhook-proxy" => (ON, "http://proxy:3128", |c| {
                alerts(c).is_some_and(|a| a.proxy.as_deref() == Some("http://proxy:3128"))
            }),
            "alert-additional-info" => (ON, "prod-eu", |c| {
                alerts(c).is_some_and(|a| a.additional_info.as_deref() == Some("prod-eu"))
            }),
            "alert-ca-file" => (ON, "/ca.pem", |c| {
                alerts(c).is_some_and(|a| a.ca_file == Some(PathBuf::from("/ca.pem")))
            }),
            _ => (ON, "7", |c| alerts(c).is_some_and(|a| a.queue_size == 7)),
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
    fn reloaders_variables_set_the_flag_after_wavelets_own_variable() {
        let config = parse_with(
            "run",
            &[
                ("ALERT_ON_RELOAD", "true"),
                ("ALERT_WEBHOOK_URL", " https://hooks.example/T0\n"),
                ("ALERT_SINK", "teams"),
            ],
        )
        .unwrap();
        let Command::Run(run_config) = config.command else {
            panic!()
        };
        let alerts = run_config.alerts.unwrap();
        assert_eq!(alerts.sink, AlertSink::Teams);
        assert_eq!(
            alerts.webhook_url, "https://hooks.example/T0",
            "trimmed, as Reloader does"
        );
        // A flag, then WAVELET_*, win over Reloader's variable.
        let wins = |line: &str, env: &[(&str, &str)]| run(line, env).namespaces;
        let reloaders = ("KUBERNETES_NAMESPACE", "from-reloader");
        assert_eq!(wins("run", &[reloaders]), ["from-reloader"]);
        assert_eq!(
            wins("run", &[reloaders, ("WAVELET_NAMESPACES", "w")]),
            ["w"]
        );
        assert_eq!(
            wins(
                "run --namespaces f",
                &[reloaders, ("WAVELET_NAMESPACES", "w")]
            ),
            ["f"]
        );
    }

    #[test]
    fn reloaders_leader_election_spellings_are_wavelets_lease_timings() {
        let run = run(
            "--leader-election-lease-duration=30s --leader-election-renew-deadline 20s --leader-election-retry-period=5s",
            &[],
        );
        assert_eq!(run.lease_timings.lease_duration, Duration::from_secs(30));
        assert_eq!(run.lease_timings.renew_deadline, Duration::from_secs(20));
        assert_eq!(run.lease_timings.retry_period, Duration::from_secs(5));
        assert_eq!(
            error(
                "--lease-duration=30s --leader-election-lease-duration=30s",
                &[]
            ),
            "--leader-election-lease-duration is given more than once; give it once"
        );
    }
}
