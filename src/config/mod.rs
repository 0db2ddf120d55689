//! Command line and `WAVELET_*` environment, turned into the [`Config`] the program runs:
//! plain data that the layers above read (this module knows no mode).
//!
//! Every flag is one row of the table in `flags.rs`: its name, value, default and help
//! text. Parsing and `--help` (`help.rs`) both read that table, so they cannot drift
//! apart, and each flag's environment variable is derived from its name (`--listen-addr`
//! → `WAVELET_LISTEN_ADDR`).
//!
//! Parsing is two steps, as in ripgrep: the arguments are first split into a command, raw
//! flag values and positionals (`args.rs`); then every value the command needs is looked
//! up (flag > environment > default) and validated into typed fields (`parse.rs`, with the
//! validators of `values.rs`). Defaults are written in the table as text and go through
//! the same validation as user input.

mod args;
pub(crate) mod duration;
mod flags;
mod help;
mod parse;
mod reloader;
#[cfg(test)]
mod test_support;
mod values;

pub use flags::env_var;
pub use help::help_text;
pub use parse::parse;
pub(crate) use reloader::shown_value;

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use crate::config::values::{is_dns_label, is_dns_subdomain};
use crate::objects::ConfigKind;
use crate::selector::Selector;
use crate::window::Windows;

/// How to reach the API server; the same for every subcommand.
///
/// Owned here; `client.rs` re-exports it. Resolution order (spec §2): `server`, then
/// `kubeconfig` (whose fallback to `$KUBECONFIG` is the kubeconfig loader's job; this
/// module reads only `--kubeconfig`/`WAVELET_KUBECONFIG`), then in-cluster.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConnectionFlags {
    /// `--server URL`: talk to this URL without credentials (e.g. a `kubectl proxy`).
    pub server: Option<String>,
    /// `--kubeconfig PATH`.
    pub kubeconfig: Option<PathBuf>,
    /// `--insecure-skip-tls-verify`: do not verify the server's certificate.
    pub insecure_skip_tls_verify: bool,
    /// `--context`: the kubeconfig context to use instead of the current one.
    pub context: Option<String>,
}

/// Everything `main` needs to run one invocation.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub connection: ConnectionFlags,
    pub log_format: LogFormat,
    /// `--log-level`, as an `env_logger` filter (`debug`); `None`: info. `RUST_LOG` wins.
    pub log_level: Option<String>,
    /// What wavelet made of Stakater Reloader's flags and variables it was given, one line
    /// each, logged once at start (at info).
    pub notes: Vec<String>,
    /// What decides opt-in and counting, shared by `run`, `status` and `hash`:
    /// `--auto-reload-all`, `--ignore-configmaps`, `--ignore-secrets`,
    /// `--enable-csi-integration`.
    pub policy: Policy,
    /// How a change shared by several workloads rolls: `run` decides by it, `status`
    /// shows it.
    pub fan_out: FanOut,
    pub command: Command,
}

/// How a change of a ConfigMap or Secret that several workloads use rolls (book:
/// Rolling a shared change safely). The annotations on objects override it.
#[derive(Debug, Clone, PartialEq)]
pub struct FanOut {
    /// `--fan-out`: `waves` (true, the default) or `at-once`.
    pub waves: bool,
    /// `--first-wave` (>= 1).
    pub first_wave: usize,
    /// `--wave-size`.
    pub wave_size: WaveSize,
    /// `--rollout-timeout` (> 0).
    pub rollout_timeout: Duration,
    /// `--restart-window`; `None`: any time.
    pub restart_window: Option<Windows>,
}

impl Default for FanOut {
    fn default() -> FanOut {
        FanOut {
            waves: true,
            first_wave: 1,
            wave_size: WaveSize::Percent(25),
            rollout_timeout: Duration::from_secs(900),
            restart_window: None,
        }
    }
}

/// `--fan-out` and `wavelet.dev/fan-out`: `waves` or `at-once`.
pub fn parse_fan_out(text: &str) -> Result<bool, String> {
    match text.trim() {
        "waves" => Ok(true),
        "at-once" => Ok(false),
        other => Err(format!("expected waves or at-once, got {other:?}")),
    }
}

/// The size of the waves after the first: a count, or a percentage of the workloads the
/// change rolls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaveSize {
    Count(usize),
    Percent(u32),
}

impl WaveSize {
    /// `3` or `25%` (a count >= 1, a percentage 1 to 100).
    pub fn parse(text: &str) -> Result<WaveSize, String> {
        let text = text.trim();
        let bad =
            || format!("expected a count such as 3 or a percentage such as 25%, got {text:?}");
        match text.strip_suffix('%') {
            Some(p) => match p.trim().parse::<u32>() {
                Ok(p) if (1..=100).contains(&p) => Ok(WaveSize::Percent(p)),
                _ => Err(bad()),
            },
            None => match text.parse::<usize>() {
                Ok(n) if n >= 1 => Ok(WaveSize::Count(n)),
                _ => Err(bad()),
            },
        }
    }

    /// Workloads per wave when the change rolls `total` of them: at least 1, a percentage
    /// rounded up.
    pub fn of(self, total: usize) -> usize {
        match self {
            WaveSize::Count(n) => n.max(1),
            WaveSize::Percent(p) => (total * p as usize).div_ceil(100).max(1),
        }
    }
}

impl fmt::Display for WaveSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WaveSize::Count(n) => write!(f, "{n}"),
            WaveSize::Percent(p) => write!(f, "{p}%"),
        }
    }
}

/// A ConfigMap or Secret named on the command line (`configmap/NAME`, `secret/NAME`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigTarget {
    /// `-n`; without it, the kubeconfig context's namespace.
    pub namespace: Option<String>,
    pub kind: ConfigKind,
    pub name: String,
}

/// The subcommand and its own settings.
// One value per process, built once: boxing `RunConfig` would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// `wavelet run` (also when no subcommand is given): the controller.
    Run(RunConfig),
    /// `wavelet status [-n NS]`: read-only table; `None` means all namespaces.
    Status {
        namespace: Option<String>,
        /// `--hash-key-file`, so HMAC hashes compare equal.
        hash_key_file: Option<PathBuf>,
        /// `--state-namespace`: where fan-outs and the global pause are recorded.
        state_namespace: Option<String>,
    },
    /// `wavelet pause`: hold every rollout as pending (the global pause).
    Pause { state_namespace: Option<String> },
    /// `wavelet resume`: lift the global pause; `wavelet resume -n NS configmap/NAME`: go
    /// on with a held fan-out past the workload that failed.
    Resume {
        state_namespace: Option<String>,
        target: Option<ConfigTarget>,
    },
    /// `wavelet hash -n NS KIND/NAME`. `kind` is lowercase; the built-in kinds and their
    /// kubectl spellings (`deploy`, `deployment`, `deployments.apps`, `sts`, `ds`, ...) are
    /// normalized to their resource name: `deployments`, `statefulsets`, `daemonsets`.
    Hash {
        /// `-n`; without it, the kubeconfig context's namespace.
        namespace: Option<String>,
        kind: String,
        name: String,
        /// `--hash-key-file`: print the HMAC `run` publishes.
        hash_key_file: Option<PathBuf>,
    },
    /// `wavelet migrate wave [-n NS | --all-namespaces] [--apply]`: remove what older Wave
    /// versions left (their finalizer, their owner references).
    MigrateWave {
        /// `-n`; with neither it nor `--all-namespaces`, the kubeconfig context's namespace.
        namespace: Option<String>,
        all_namespaces: bool,
        apply: bool,
    },
    /// `wavelet migrate reloader [-n NS]`: read-only; what switching from Stakater Reloader
    /// will do. `None`: look for Reloader in every namespace.
    MigrateReloader { namespace: Option<String> },
    /// `wavelet impact -f FILE...`: read-only; which workloads a change of ConfigMaps and
    /// Secrets would roll, in which waves and when.
    Impact(ImpactConfig),
    /// `wavelet version`.
    Version,
    /// `wavelet help`, `--help`, `-h`: the text to print (see [`help_text`]).
    Help(String),
}

/// The settings of `wavelet impact`.
#[derive(Debug, Clone, PartialEq)]
pub struct ImpactConfig {
    /// `-f`, in order; `-` is standard input.
    pub files: Vec<PathBuf>,
    /// `-n`: the namespace of objects that name none; without it, the kubeconfig
    /// context's, else `default`.
    pub namespace: Option<String>,
    /// `-o`.
    pub output: ImpactOutput,
    /// `--manifests`: offline, the workloads from these files instead of the cluster.
    pub manifests: Vec<PathBuf>,
    /// `--base`: offline, the objects as they are now.
    pub base: Vec<PathBuf>,
    /// `--max-rolls`: exit 3 above it.
    pub max_rolls: Option<usize>,
    /// `--state-namespace`: where the global pause is recorded.
    pub state_namespace: Option<String>,
    /// `--namespace-selector`: only namespaces whose labels match are acted on.
    pub namespace_selector: Option<Selector>,
    /// `--hash-key-file`: `run`'s key, so fan-outs recorded under it are recognised.
    pub hash_key_file: Option<PathBuf>,
}

/// `wavelet impact -o`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImpactOutput {
    Table,
    Json,
    Markdown,
}

impl ImpactOutput {
    pub fn parse(text: &str) -> Result<ImpactOutput, String> {
        match text.trim() {
            "table" => Ok(ImpactOutput::Table),
            "json" => Ok(ImpactOutput::Json),
            "markdown" | "md" => Ok(ImpactOutput::Markdown),
            other => Err(format!("expected table, json or markdown, got {other:?}")),
        }
    }
}

/// `--log-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

/// The settings of `wavelet run`. Field docs name the flag; [`help_text`] has the details.
#[derive(Debug, Clone, PartialEq)]
pub struct RunConfig {
    /// `--namespaces a,b`; empty means all namespaces.
    pub namespaces: Vec<String>,
    /// `--resync` (> 0).
    pub resync: Duration,
    /// `--debounce`.
    pub debounce: Duration,
    /// `--max-rollouts-per-second` (finite, > 0).
    pub max_rollouts_per_second: f64,
    /// `--rollout-burst` (>= 1).
    pub rollout_burst: u32,
    /// `--min-rollout-interval`.
    pub min_rollout_interval: Duration,
    /// `--api-qps` (finite, > 0): the client-side budget's requests per second.
    pub api_qps: f64,
    /// `--api-burst` (>= 1): the client-side budget's burst.
    pub api_burst: u32,
    /// `--per-namespace-watches`: with `--namespaces`, one watch per namespace and resource
    /// whatever their number (at most 100), instead of one cluster-wide watch per resource
    /// above 10 namespaces.
    pub per_namespace_watches: bool,
    /// `--workload-kinds`: extra kinds only, without the built-in ones
    /// ([`WorkloadKind::built_in`]) and without duplicates.
    pub workload_kinds: Vec<WorkloadKind>,
    /// `--leader-elect`.
    pub leader_elect: bool,
    /// `--lease-name` (a DNS-1123 subdomain).
    pub lease_name: String,
    /// `--lease-namespace`; `None`: the in-cluster namespace, resolved at start.
    pub lease_namespace: Option<String>,
    /// `--lease-duration`, `--renew-deadline`, `--retry-period` (client-go's 15s/10s/2s),
    /// checked like `NewLeaderElector`: duration > deadline > 1.2 × period > 0.
    pub lease_timings: LeaseTimings,
    /// `--state-namespace`; `None`: the in-cluster namespace, resolved at start.
    pub state_namespace: Option<String>,
    /// `--listen-addr`, validated and normalized for `TcpListener::bind`: an empty host
    /// (`:9090`) becomes `0.0.0.0` (`0.0.0.0:9090`); otherwise the text as given.
    pub listen_addr: String,
    /// `--dry-run`.
    pub dry_run: bool,
    /// `--hash-key-file`.
    pub hash_key_file: Option<PathBuf>,
    /// `--workers` (>= 1).
    pub workers: usize,
    /// `--rolling-timeout` (> 0).
    pub rolling_timeout: Duration,
    /// `--eviction-warning-after` (> 0).
    pub eviction_warning_after: Duration,
    /// Reloader's flags with the same meaning (book: Coming from Reloader).
    pub reloader: ReloaderFlags,
    /// `--alert-*` (Reloader's `ALERT_*`); `None`: no alerts (no URL, or both kinds off).
    pub alerts: Option<AlertConfig>,
}

/// Where and how alerts on rollout are sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlertConfig {
    /// `--alert-on-reload`: an alert per rollout.
    pub on_reload: bool,
    /// `--alert-on-hold` (on by default): an alert when a fan-out is held, and one when
    /// the hold ends (resumed or superseded).
    pub on_hold: bool,
    pub sink: AlertSink,
    /// `--alert-webhook-url`: http or https. Often holds a token: never logged.
    pub webhook_url: String,
    /// `--alert-webhook-proxy`.
    pub proxy: Option<String>,
    /// `--alert-additional-info`: put before each message as `TEXT : message`.
    pub additional_info: Option<String>,
    /// `--alert-ca-file`: roots instead of the built-in public ones.
    pub ca_file: Option<PathBuf>,
    /// `--alert-queue-size` (>= 1).
    pub queue_size: usize,
}

/// `--alert-sink`: the payload, as Reloader sends it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlertSink {
    /// `{"attachments":[{"color":"good","author_name":...,"text":...}]}`.
    Slack,
    /// `{"text":...}` (an incoming webhook of Microsoft Teams).
    Teams,
    /// `{"text":...}` (Google Chat).
    GoogleChat,
    /// The message as `text/plain`, without Slack's `*` markup (Reloader's `raw`).
    Webhook,
}

/// Flags named like Stakater Reloader's, for teams that switch without editing manifests.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReloaderFlags {
    /// `--namespaces-to-ignore`: never watched (subtracted from `--namespaces`).
    pub namespaces_to_ignore: Vec<String>,
    /// `--namespace-selector`: only namespaces whose labels match are acted on.
    pub namespace_selector: Option<Selector>,
    /// `--resource-label-selector`: sent with the ConfigMap and Secret LIST/WATCH.
    pub resource_label_selector: Option<Selector>,
    /// `--ignored-workload-types`: `cronjobs` stops watching CronJobs; `jobs` changes
    /// nothing (wavelet never re-creates Jobs).
    pub ignore_cronjobs: bool,
    /// `--is-Argo-Rollouts`, read as Reloader reads it (`"true"` exactly): `Some(true)`
    /// watches Rollouts and says so when the API does not serve them, `Some(false)` (any
    /// other value) never watches them; `None`: whenever served, which differs from
    /// Reloader's default and is said at start.
    pub argo_rollouts: Option<bool>,
    /// `--metrics-count-by-namespace` (`METRICS_COUNT_BY_NAMESPACE=enabled`).
    pub count_by_namespace: bool,
}

/// A kind of workload wavelet patches, named as the API names its resource.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WorkloadKind {
    /// API group, e.g. `apps`, `argoproj.io`.
    pub group: String,
    /// API version, e.g. `v1`, `v1alpha1`.
    pub version: String,
    /// Plural lowercase resource, e.g. `deployments`, `rollouts`.
    pub resource: String,
}

impl WorkloadKind {
    /// `apps/v1` Deployments, StatefulSets and DaemonSets: always watched.
    pub fn built_in() -> Vec<WorkloadKind> {
        ["deployments", "statefulsets", "daemonsets"]
            .into_iter()
            .map(|resource| WorkloadKind {
                group: "apps".to_string(),
                version: "v1".to_string(),
                resource: resource.to_string(),
            })
            .collect()
    }

    /// Parses `GROUP/VERSION/RESOURCE`, e.g. `argoproj.io/v1alpha1/rollouts`; the error
    /// says which part is wrong.
    pub fn parse(s: &str) -> Result<WorkloadKind, String> {
        const FORM: &str = "GROUP/VERSION/RESOURCE with a plural lowercase resource, e.g. argoproj.io/v1alpha1/rollouts";
        let parts: Vec<&str> = s.split('/').collect();
        let [group, version, resource] = parts.as_slice() else {
            return Err(format!("expected {FORM}, got {s:?}"));
        };
        if !is_dns_subdomain(group) {
            return Err(format!(
                "group {group:?} in {s:?} is not a lowercase DNS name; expected {FORM}"
            ));
        }
        if !is_dns_label(version) {
            return Err(format!(
                "version {version:?} in {s:?} is not a lowercase API version such as v1; expected {FORM}"
            ));
        }
        if !is_dns_label(resource) {
            return Err(format!(
                "resource {resource:?} in {s:?} is not a plural lowercase resource name; expected {FORM}"
            ));
        }
        Ok(WorkloadKind {
            group: group.to_string(),
            version: version.to_string(),
            resource: resource.to_string(),
        })
    }
}

impl fmt::Display for WorkloadKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}", self.group, self.version, self.resource)
    }
}

/// Leader-election timings; see [`RunConfig::lease_timings`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseTimings {
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
}

impl Default for LeaseTimings {
    fn default() -> LeaseTimings {
        LeaseTimings {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// Run-wide settings that decide opt-in and counting: `--auto-reload-all`,
/// `--ignore-configmaps`, `--ignore-secrets`, `--enable-csi-integration`. `run`, `status`
/// and `hash` share them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Policy {
    pub auto_reload_all: bool,
    pub ignore_configmaps: bool,
    pub ignore_secrets: bool,
    /// `--enable-csi-integration`: SecretProviderClasses count (off by default, as in
    /// Reloader: it needs RBAC on the driver's resources).
    pub csi_integration: bool,
}

impl Policy {
    /// Objects of this kind never count (`--ignore-configmaps`, `--ignore-secrets`, and
    /// SecretProviderClasses without `--enable-csi-integration`).
    pub fn ignores(&self, kind: ConfigKind) -> bool {
        match kind {
            ConfigKind::ConfigMap => self.ignore_configmaps,
            ConfigKind::Secret => self.ignore_secrets,
            ConfigKind::SecretProviderClass => !self.csi_integration,
        }
    }
}
