//! Command line and `WAVELET_*` environment, turned into the [`Config`] the program runs.
//!
//! Every flag is one row of [`FLAGS`]: its name, value, default and help text. Parsing and
//! `--help` both read that table, so they cannot drift apart, and each flag's environment
//! variable is derived from its name (`--listen-addr` → `WAVELET_LISTEN_ADDR`).
//!
//! Parsing is two steps, as in ripgrep: the arguments are first split into a command, raw
//! flag values and positionals (`Raw`); then every value the command needs is looked up
//! (flag > environment > default) and validated into typed fields. Defaults are written in
//! the table as text and go through the same validation as user input.

pub(crate) mod duration;

use std::collections::BTreeMap;
use std::fmt;
use std::net::Ipv6Addr;
use std::path::PathBuf;
use std::time::Duration;

use crate::error::Error;
use crate::hashmode::optin::Policy;
use crate::selector::Selector;

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
    /// What decides opt-in and counting, shared by `run`, `status` and `hash`:
    /// `--auto-reload-all`, `--ignore-configmaps`, `--ignore-secrets`.
    pub policy: Policy,
    pub command: Command,
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
    /// `wavelet version`.
    Version,
    /// `wavelet help`, `--help`, `-h`: the text to print (see [`help_text`]).
    Help(String),
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
    /// Reloader's flags with the same meaning (README, Coming from Reloader).
    pub reloader: ReloaderFlags,
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

// ---------------------------------------------------------------------------------------
// The flag table.

/// Which commands a flag applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
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
enum FlagDefault {
    /// This text, validated like user input.
    Value(&'static str),
    /// No value; the text says what that means.
    Unset(&'static str),
}

/// One row of the table.
#[derive(Debug)]
struct Flag {
    name: &'static str,
    short: Option<char>,
    /// What the value looks like in help (`DURATION`); `None` for boolean flags.
    value: Option<&'static str>,
    default: FlagDefault,
    scope: Scope,
    help: &'static str,
}

impl Flag {
    fn env_var(&self) -> String {
        env_var(self.name)
    }

    fn is_bool(&self) -> bool {
        self.value.is_none()
    }
}

/// The environment variable of flag `name`: `WAVELET_` + upper case, `-` → `_`.
pub fn env_var(name: &str) -> String {
    format!("WAVELET_{}", name.to_ascii_uppercase().replace('-', "_"))
}

const fn flag(
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
static FLAGS: &[Flag] = &[
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
static REFUSED: &[(&str, &str)] = &[
    ("reload-strategy", "wavelet always writes a hash annotation on the pod template (Reloader's `annotations` strategy); there is no env-var strategy"),
    ("reload-on-create", "wavelet rolls on data changes only; a ConfigMap or Secret created later counts once a workload references it, and one that was missing holds the rollout with a Warning Event until it exists"),
    ("reload-on-delete", "a deleted required ConfigMap or Secret holds the rollout with a Warning Event (new Pods would not start) and rolls once it is back; optional ones roll on deletion"),
    ("sync-after-restart", "changes made while wavelet was down are always rolled at start, because the hash lives on the workload"),
    ("webhook-url", "wavelet does not call webhooks; watch its ConfigChanged Events or its /metrics instead"),
    ("enable-csi-integration", "wavelet does not watch SecretProviderClassPodStatus objects"),
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
fn refused(name: &str) -> Option<Error> {
    REFUSED.iter().find(|(n, _)| *n == name).map(|(n, instead)| {
        config_error(format!(
            "--{n} is a Stakater Reloader flag whose meaning wavelet does not share: {instead}; remove it (README: Coming from Reloader)"
        ))
    })
}

fn find_flag(name: &str) -> Option<&'static Flag> {
    FLAGS.iter().find(|f| f.name == name)
}

fn find_short(c: char) -> Option<&'static Flag> {
    FLAGS.iter().find(|f| f.short == Some(c))
}

// ---------------------------------------------------------------------------------------
// Step 1: split the arguments.

/// The subcommands, as typed.
const COMMANDS: &[&str] = &["run", "status", "hash", "migrate", "version", "help"];

/// The arguments split up, before any value is validated.
struct Raw<'a> {
    /// The subcommand as typed; `run` when none was given.
    command: &'a str,
    /// Flag values from the command line, by flag name.
    flags: BTreeMap<&'static str, String>,
    /// Arguments after the subcommand that are not flags.
    positionals: Vec<&'a str>,
    help: bool,
}

fn config_error(msg: impl Into<String>) -> Error {
    Error::Config(msg.into())
}

fn split_args(args: &[String]) -> Result<Raw<'_>, Error> {
    let mut raw = Raw {
        command: "",
        flags: BTreeMap::new(),
        positionals: Vec::new(),
        help: false,
    };
    let mut rest = args.iter();
    let mut only_positionals = false;
    while let Some(arg) = rest.next() {
        let arg = arg.as_str();
        let (flag, inline, spelled): (&'static Flag, Option<&str>, String) =
            if only_positionals || arg == "-" || !arg.starts_with('-') {
                if raw.command.is_empty() {
                    if !COMMANDS.contains(&arg) {
                        return Err(config_error(format!(
                            "unknown command {arg:?}: expected one of {}; see wavelet --help",
                            COMMANDS.join(", ")
                        )));
                    }
                    raw.command = arg;
                } else {
                    raw.positionals.push(arg);
                }
                continue;
            } else if arg == "--" {
                only_positionals = true;
                continue;
            } else if arg == "-h" || arg == "--help" {
                raw.help = true;
                continue;
            } else if let Some(body) = arg.strip_prefix("--") {
                let (name, inline) = match body.split_once('=') {
                    Some((name, value)) => (name, Some(value)),
                    None => (body, None),
                };
                if let Some(err) = refused(name) {
                    return Err(err);
                }
                let flag = find_flag(name).ok_or_else(|| {
                    config_error(format!(
                        "unknown flag --{name}; see wavelet --help for the flags"
                    ))
                })?;
                (flag, inline, format!("--{name}"))
            } else {
                // `-n NS`, `-n=NS` or `-nNS`.
                let body = &arg[1..];
                let mut chars = body.chars();
                let short = chars.next().unwrap_or('-');
                let tail = chars.as_str();
                let flag = find_short(short).ok_or_else(|| {
                    config_error(format!(
                        "unknown flag {arg}; see wavelet --help for the flags"
                    ))
                })?;
                let inline = match tail {
                    "" => None,
                    t => Some(t.strip_prefix('=').unwrap_or(t)),
                };
                (flag, inline, format!("-{short}"))
            };

        let value = if flag.is_bool() {
            inline.unwrap_or("true").to_string()
        } else if let Some(value) = inline {
            value.to_string()
        } else {
            match rest.next() {
                Some(next) if !(next.starts_with('-') && next.len() > 1) => next.clone(),
                _ => {
                    return Err(config_error(format!(
                        "{spelled} needs a value: {} (write {spelled}=VALUE for a value that starts with '-')",
                        expected(flag)
                    )))
                }
            }
        };
        if raw.flags.insert(flag.name, value).is_some() {
            return Err(config_error(format!(
                "{spelled} is given more than once; give it once"
            )));
        }
    }
    if raw.command.is_empty() {
        raw.command = "run";
    }
    Ok(raw)
}

/// What a flag's value should look like, for error messages.
fn expected(flag: &Flag) -> String {
    match flag.value {
        None => "true or false".to_string(),
        Some(v) => match flag.default {
            FlagDefault::Value(d) => format!("{v}, e.g. {d}"),
            FlagDefault::Unset(_) => v.to_string(),
        },
    }
}

// ---------------------------------------------------------------------------------------
// Step 2: look up and validate.

/// Where a value came from; errors name it so the user knows what to fix.
enum Origin {
    Flag,
    Env,
    Default,
}

/// Flag > environment > default lookup of validated values.
struct Lookup<'a> {
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
        let Some((text, source, origin)) = self.text(name) else {
            return Ok(None);
        };
        let text = match origin {
            Origin::Env => text.trim().to_string(),
            Origin::Flag | Origin::Default => text,
        };
        convert(&text)
            .map(Some)
            .map_err(|why| config_error(format!("{source}: {why}")))
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

fn parse_bool(s: &str) -> Result<bool, String> {
    match s.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" => Ok(true),
        "false" | "0" | "no" => Ok(false),
        _ => Err(format!("expected true or false, got {s:?}")),
    }
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    duration::parse(s).map_err(|e| e.to_string())
}

fn positive_duration(s: &str) -> Result<Duration, String> {
    match parse_duration(s)? {
        Duration::ZERO => Err(format!("must be longer than 0, e.g. 10s or 5m; got {s:?}")),
        d => Ok(d),
    }
}

fn non_empty(s: &str) -> Result<String, String> {
    if s.is_empty() {
        Err("needs a non-empty value".to_string())
    } else {
        Ok(s.to_string())
    }
}

fn namespace(s: &str) -> Result<String, String> {
    if is_dns_label(s) {
        Ok(s.to_string())
    } else {
        Err(format!(
            "{s:?} is not a namespace name: lowercase letters, digits and '-', at most 63, starting and ending with a letter or digit"
        ))
    }
}

fn list<T>(s: &str, item: impl Fn(&str) -> Result<T, String>) -> Result<Vec<T>, String> {
    s.split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(item)
        .collect()
}

fn parse_rate(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if r.is_finite() && r > 0.0 => Ok(r),
        _ => Err(format!(
            "expected a number greater than 0, e.g. 2 or 0.5; got {s:?}"
        )),
    }
}

fn at_least_one<T: TryFrom<u64>>(s: &str) -> Result<T, String> {
    s.parse::<u64>()
        .ok()
        .filter(|&n| n >= 1)
        .and_then(|n| T::try_from(n).ok())
        .ok_or_else(|| format!("expected a whole number of at least 1, e.g. 4; got {s:?}"))
}

fn parse_log_format(s: &str) -> Result<LogFormat, String> {
    match s {
        "text" => Ok(LogFormat::Text),
        "json" => Ok(LogFormat::Json),
        _ => Err(format!("expected text or json, got {s:?}")),
    }
}

fn lease_name(s: &str) -> Result<String, String> {
    if is_dns_subdomain(s) {
        Ok(s.to_string())
    } else {
        Err(format!(
            "{s:?} is not a valid Lease name: lowercase letters, digits, '-' and '.', at most 253"
        ))
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

fn lease_timings(
    lease_duration: Duration,
    renew_deadline: Duration,
    retry_period: Duration,
) -> Result<LeaseTimings, Error> {
    if lease_duration.subsec_nanos() != 0 {
        return Err(config_error(
            "--lease-duration: must be whole seconds (the Lease stores leaseDurationSeconds)",
        ));
    }
    if lease_duration <= renew_deadline {
        return Err(config_error(
            "--lease-duration must be greater than --renew-deadline",
        ));
    }
    if renew_deadline.as_secs_f64() <= 1.2 * retry_period.as_secs_f64() {
        return Err(config_error(
            "--renew-deadline must be greater than 1.2 × --retry-period",
        ));
    }
    Ok(LeaseTimings {
        lease_duration,
        renew_deadline,
        retry_period,
    })
}

/// Validates `[HOST]:PORT` and fills in `0.0.0.0` for an empty host.
fn listen_addr(s: &str) -> Result<String, String> {
    let form =
        || format!("expected [HOST]:PORT, e.g. :9090, 127.0.0.1:9090 or [::1]:9090; got {s:?}");
    let (host, port) = s.rsplit_once(':').ok_or_else(form)?;
    port.parse::<u16>().map_err(|_| form())?;
    if host.is_empty() {
        return Ok(format!("0.0.0.0:{port}"));
    }
    let valid_host = if let Some(inner) = host.strip_prefix('[') {
        inner
            .strip_suffix(']')
            .is_some_and(|ip| ip.parse::<Ipv6Addr>().is_ok())
    } else {
        // An IPv4 address or a host name; IPv6 needs brackets.
        host.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
    };
    if valid_host {
        Ok(s.to_string())
    } else {
        Err(form())
    }
}

/// A label selector as the API server parses it; Reloader's legacy `key:value` and
/// `key:*` / `key=*` (the key exists) are accepted too. A comma list of them is one
/// selector (all must match), as in Reloader.
fn reloader_selector(s: &str) -> Result<Selector, String> {
    let converted: Vec<String> = s
        .split(',')
        .map(|term| {
            let term = term.trim();
            let legacy = term.split_once(':').filter(|_| !term.contains(['=', '(']));
            match legacy.or_else(|| term.split_once('=').filter(|(_, v)| *v == "*")) {
                Some((key, "*")) => key.to_string(),
                Some((key, value)) => format!("{key}={value}"),
                None => term.to_string(),
            }
        })
        .collect();
    // Set-based terms (`env in (a,b)`) contain commas: rejoin before parsing.
    let text = converted.join(",");
    let selector =
        Selector::parse(&text).map_err(|e| format!("invalid label selector {s:?}: {e}"))?;
    if selector.is_empty() {
        return Err("an empty selector selects everything: leave the flag unset instead".into());
    }
    Ok(selector)
}

/// Reloader's `--resources-to-ignore`: `configmaps` or `secrets` (one of them).
fn resources_to_ignore(s: &str) -> Result<(bool, bool), String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "configmaps" => Ok((true, false)),
        "secrets" => Ok((false, true)),
        other => Err(format!(
            "expected configmaps or secrets (one of them, as in Reloader), got {other:?}"
        )),
    }
}

/// `--ignored-workload-types`: whether CronJobs are ignored.
fn ignored_workload_types(s: &str) -> Result<bool, String> {
    let mut cronjobs = false;
    for kind in s.split(',').map(str::trim).filter(|k| !k.is_empty()) {
        match kind {
            "cronjobs" => cronjobs = true,
            "jobs" => {}
            other => {
                return Err(format!(
                    "expected cronjobs, jobs or both (as in Reloader), got {other:?}"
                ))
            }
        }
    }
    Ok(cronjobs)
}

fn workload_kinds(s: &str) -> Result<Vec<WorkloadKind>, String> {
    let built_in = WorkloadKind::built_in();
    let mut kinds: Vec<WorkloadKind> = Vec::new();
    for kind in list(s, WorkloadKind::parse)? {
        if !built_in.contains(&kind) && !kinds.contains(&kind) {
            kinds.push(kind);
        }
    }
    Ok(kinds)
}

/// `KIND/NAME` of `wavelet hash`, with the built-in kinds normalized (see [`Command::Hash`]).
fn kind_and_name(s: &str) -> Result<(String, String), String> {
    let form = "expected KIND/NAME, e.g. deployment/web";
    let Some((kind, name)) = s.split_once('/') else {
        return Err(format!("{form}; got {s:?}"));
    };
    if kind.is_empty() || !is_dns_subdomain(name) {
        return Err(format!("{form}; got {s:?}"));
    }
    let normalized = match crate::objects::Resource::known_workload(kind) {
        Some(resource) => resource.plural,
        None => kind.to_ascii_lowercase(),
    };
    Ok((normalized, name.to_string()))
}

fn is_dns_label(s: &str) -> bool {
    let b = s.as_bytes();
    let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    b.len() <= 63
        && b.first().is_some_and(alnum)
        && b.last().is_some_and(alnum)
        && b.iter().all(|c| alnum(c) || *c == b'-')
}

fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_dns_label)
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
            command: Command::Help(help_text()),
        });
    }

    // Flags given on the command line must belong to the command.
    let scope_ok = |scope: Scope| match scope {
        Scope::Global => true,
        Scope::Run => raw.command == "run",
        Scope::StatusAndHash => raw.command == "status" || raw.command == "hash",
        Scope::Hashing => ["run", "status", "hash"].contains(&raw.command),
        Scope::Migrate => raw.command == "migrate",
    };
    for name in raw.flags.keys() {
        let flag = find_flag(name).expect("raw flags come from FLAGS");
        let namespace_of_migrate = flag.name == "namespace" && raw.command == "migrate";
        if !scope_ok(flag.scope) && !namespace_of_migrate {
            let owner = match flag.scope {
                Scope::Run => "wavelet run",
                Scope::Migrate => "wavelet migrate wave",
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
    let positionals_allowed = if raw.command == "hash" || raw.command == "migrate" {
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
            workload_kinds: look
                .get("workload-kinds", workload_kinds)?
                .unwrap_or_default(),
            leader_elect: look.required("leader-elect", parse_bool)?,
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
            },
        }),
        "status" => Command::Status {
            namespace: look.get("namespace", namespace)?,
            hash_key_file: look.get("hash-key-file", non_empty)?.map(PathBuf::from),
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
        "migrate" => {
            if raw.positionals.first() != Some(&"wave") {
                return Err(config_error(
                    "wavelet migrate takes what to migrate from: wavelet migrate wave [-n NAMESPACE | --all-namespaces] [--apply]",
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
    };
    if policy.ignore_configmaps && policy.ignore_secrets {
        return Err(config_error(
            "--ignore-configmaps and --ignore-secrets together leave nothing to watch; give one (as Reloader accepts only one)",
        ));
    }
    Ok(Config {
        connection,
        log_format,
        policy,
        command,
    })
}

/// The `--help` text: commands, then every flag of [`FLAGS`] with its environment variable
/// and default.
pub fn help_text() -> String {
    let mut out = format!(
        "wavelet {}: rolls Kubernetes workloads when the ConfigMaps and Secrets they use change

Usage:
  wavelet [run] [FLAGS]                  run the controller (the default command)
  wavelet status [-n NAMESPACE] [FLAGS]  list opted-in workloads and delete-mode objects
  wavelet hash -n NAMESPACE KIND/NAME    print the hash `run` would write, and its inputs
  wavelet migrate wave [-n NS | --all-namespaces] [--apply]
                                         remove what older Wave versions left (the
                                         finalizer, owner references); a dry run
                                         without --apply
  wavelet version                        print the version
  wavelet help, --help, -h               print this help

Flags take `--flag VALUE` or `--flag=VALUE`; boolean ones `--flag` or `--flag=false`.
Every flag can also be set by the environment variable shown (an empty one counts as
unset); a flag wins over the environment, which wins over the default.
Durations are written like 500ms, 10s, 5m, 1h30m.
",
        env!("CARGO_PKG_VERSION")
    );
    let sections = [
        (Scope::Global, "Connection and output (every command)"),
        (Scope::Run, "wavelet run"),
        (Scope::StatusAndHash, "wavelet status and wavelet hash"),
        (Scope::Hashing, "The hash (wavelet run, status and hash)"),
        (Scope::Migrate, "wavelet migrate wave"),
    ];
    for (scope, title) in sections {
        out.push_str(&format!("\n{title}:\n"));
        for flag in FLAGS.iter().filter(|f| f.scope == scope) {
            let mut usage = match flag.short {
                Some(c) => format!("-{c}, --{}", flag.name),
                None => format!("--{}", flag.name),
            };
            if let Some(v) = flag.value {
                usage.push(' ');
                usage.push_str(v);
            }
            let default = match flag.default {
                FlagDefault::Value(d) => d,
                FlagDefault::Unset(meaning) => meaning,
            };
            out.push_str(&format!("  {usage}\n"));
            out.push_str(&wrap(flag.help, "      ", 88));
            out.push_str(&format!(
                "      [env {}] [default: {default}]\n",
                flag.env_var()
            ));
        }
    }
    out
}

/// `text` in lines of at most `width` columns (longer words stay whole), each indented.
fn wrap(text: &str, indent: &str, width: usize) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && indent.len() + line.len() + 1 + word.len() > width {
            out.push_str(&format!("{indent}{line}\n"));
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        out.push_str(&format!("{indent}{line}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    fn no_env(_: &str) -> Option<String> {
        None
    }

    fn parse_with(line: &str, env: &[(&str, &str)]) -> Result<Config, Error> {
        let env: HashMap<String, String> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        parse(&args(line), &|name| env.get(name).cloned())
    }

    fn run(line: &str, env: &[(&str, &str)]) -> RunConfig {
        match parse_with(line, env) {
            Ok(Config {
                command: Command::Run(run),
                ..
            }) => run,
            other => panic!("{line:?} should be a run config, got {other:?}"),
        }
    }

    fn error(line: &str, env: &[(&str, &str)]) -> String {
        match parse_with(line, env) {
            Err(Error::Config(msg)) => msg,
            other => panic!("{line:?} should fail with a config error, got {other:?}"),
        }
    }

    #[test]
    fn no_arguments_runs_the_controller_with_the_defaults() {
        let config = parse(&[], &no_env).unwrap();
        assert_eq!(config.connection, ConnectionFlags::default());
        assert_eq!(config.log_format, LogFormat::Text);
        assert_eq!(
            config.command,
            Command::Run(RunConfig {
                namespaces: vec![],
                resync: Duration::from_secs(600),
                debounce: Duration::from_secs(1),
                max_rollouts_per_second: 2.0,
                rollout_burst: 10,
                min_rollout_interval: Duration::from_secs(10),
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
            })
        );
        assert_eq!(parse(&args("run"), &no_env).unwrap(), config);
    }

    #[test]
    fn a_flag_wins_over_the_environment_which_wins_over_the_default() {
        assert_eq!(run("", &[]).resync, Duration::from_secs(600));
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
            Duration::from_secs(600)
        );
        assert_eq!(
            run("", &[("WAVELET_RESYNC", " 1m\n")]).resync,
            Duration::from_secs(60)
        );
    }

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
    fn help_mentions_every_flag_its_environment_variable_and_its_default() {
        let help = help_text();
        for flag in FLAGS {
            assert!(
                help.contains(&format!("--{}", flag.name)),
                "--{} missing",
                flag.name
            );
            let default = match flag.default {
                FlagDefault::Value(d) | FlagDefault::Unset(d) => d,
            };
            let line = format!("[env {}] [default: {default}]", flag.env_var());
            assert!(help.contains(&line), "{line} missing");
        }
    }

    #[test]
    fn duration_defaults_are_written_as_duration_format_prints_them() {
        for flag in FLAGS.iter().filter(|f| f.value == Some("DURATION")) {
            let FlagDefault::Value(text) = flag.default else {
                panic!("--{} has no default", flag.name);
            };
            let parsed = duration::parse(text).unwrap();
            assert_eq!(duration::format(parsed), text, "--{}", flag.name);
        }
    }

    #[test]
    fn help_lines_fit_in_90_columns() {
        for line in help_text().lines() {
            assert!(line.chars().count() <= 90, "too long: {line}");
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
    fn help_is_returned_for_every_spelling() {
        for line in [
            "--help",
            "-h",
            "help",
            "run --help",
            "status -h",
            "hash --help",
        ] {
            let config = parse_with(line, &[]).unwrap();
            assert_eq!(config.command, Command::Help(help_text()), "{line}");
        }
    }

    #[test]
    fn bool_flags_take_no_value_or_an_explicit_one() {
        assert!(run("--dry-run", &[]).dry_run);
        assert!(run("--dry-run=true", &[]).dry_run);
        assert!(!run("--dry-run=false", &[("WAVELET_DRY_RUN", "true")]).dry_run);
        assert!(run("", &[("WAVELET_DRY_RUN", "1")]).dry_run);
        assert_eq!(
            error("--dry-run=maybe", &[]),
            "--dry-run: expected true or false, got \"maybe\""
        );
        // A bool flag does not swallow the next argument.
        assert_eq!(
            error("--dry-run false", &[]),
            "unknown command \"false\": expected one of run, status, hash, migrate, version, help; see wavelet --help"
        );
    }

    #[test]
    fn an_unknown_flag_is_named_in_the_error() {
        assert_eq!(
            error("--resyn 1m", &[]),
            "unknown flag --resyn; see wavelet --help for the flags"
        );
        assert_eq!(
            error("-x", &[]),
            "unknown flag -x; see wavelet --help for the flags"
        );
    }

    #[test]
    fn a_missing_value_is_named_in_the_error() {
        assert_eq!(
            error("--resync", &[]),
            "--resync needs a value: DURATION, e.g. 10m (write --resync=VALUE for a value that starts with '-')"
        );
        assert!(error("--resync --dry-run", &[]).starts_with("--resync needs a value"));
        assert!(error("status -n", &[]).starts_with("-n needs a value: NAMESPACE"));
    }

    #[test]
    fn a_bad_duration_names_the_flag_and_says_what_is_accepted() {
        assert_eq!(
            error("--debounce 5", &[]),
            "--debounce: invalid duration \"5\": missing unit; write a number followed by a unit (ns, us, ms, s, m, h), e.g. 500ms, 10s, 5m, 1h30m, or 0"
        );
        assert!(error("", &[("WAVELET_RESYNC", "soon")])
            .starts_with("WAVELET_RESYNC: invalid duration \"soon\""));
        assert_eq!(
            error("--resync 0", &[]),
            "--resync: must be longer than 0, e.g. 10s or 5m; got \"0\""
        );
    }

    #[test]
    fn a_zero_or_bad_rate_is_rejected() {
        for bad in ["0", "-1", "NaN", "inf", "fast"] {
            let msg = error(&format!("--max-rollouts-per-second={bad}"), &[]);
            assert!(
                msg.starts_with("--max-rollouts-per-second: expected a number greater than 0"),
                "{msg}"
            );
        }
        assert!(error("--rollout-burst 0", &[])
            .starts_with("--rollout-burst: expected a whole number of at least 1"));
        assert!(error("--workers 0", &[])
            .starts_with("--workers: expected a whole number of at least 1"));
    }

    #[test]
    fn workload_kinds_are_group_version_resource() {
        let kinds = run(
            "--workload-kinds argoproj.io/v1alpha1/rollouts,apps/v1/deployments,argoproj.io/v1alpha1/rollouts,example.com/v2/widgets",
            &[],
        )
        .workload_kinds;
        let names: Vec<String> = kinds.iter().map(ToString::to_string).collect();
        assert_eq!(
            names,
            ["argoproj.io/v1alpha1/rollouts", "example.com/v2/widgets"],
            "built-ins and repeats dropped"
        );
    }

    #[test]
    fn a_bad_workload_kind_says_which_part_is_wrong() {
        assert!(error("--workload-kinds rollouts", &[]).starts_with(
            "--workload-kinds: expected GROUP/VERSION/RESOURCE with a plural lowercase resource"
        ));
        assert!(error("--workload-kinds argoproj.io/v1alpha1/Rollouts", &[])
            .starts_with("--workload-kinds: resource \"Rollouts\" in"));
        assert!(error("--workload-kinds argoproj.io//rollouts", &[])
            .starts_with("--workload-kinds: version \"\""));
        assert!(error("--workload-kinds Argo/v1/rollouts", &[])
            .starts_with("--workload-kinds: group \"Argo\""));
    }

    #[test]
    fn namespaces_are_a_validated_comma_list() {
        assert_eq!(run("--namespaces a,b,,c", &[]).namespaces, ["a", "b", "c"]);
        assert_eq!(run("--namespaces=", &[]).namespaces, Vec::<String>::new());
        assert!(error("--namespaces a,B", &[])
            .starts_with("--namespaces: \"B\" is not a namespace name"));
    }

    #[test]
    fn listen_addr_accepts_host_port_forms() {
        assert_eq!(run("--listen-addr :8080", &[]).listen_addr, "0.0.0.0:8080");
        assert_eq!(
            run("--listen-addr localhost:1", &[]).listen_addr,
            "localhost:1"
        );
        assert_eq!(
            run("--listen-addr [::1]:9090", &[]).listen_addr,
            "[::1]:9090"
        );
        for bad in ["9090", ":", ":99999", "::1:9090", "a_b:1", "[::1:9090"] {
            let msg = error(&format!("--listen-addr={bad}"), &[]);
            assert!(
                msg.starts_with("--listen-addr: expected [HOST]:PORT"),
                "{bad}: {msg}"
            );
        }
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
                hash_key_file: None
            }
        );
    }

    #[test]
    fn status_takes_an_optional_namespace() {
        assert_eq!(
            parse_with("status", &[]).unwrap().command,
            Command::Status {
                namespace: None,
                hash_key_file: None
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
    fn version_and_unknown_commands() {
        assert_eq!(
            parse_with("version", &[]).unwrap().command,
            Command::Version
        );
        assert_eq!(
            error("version extra", &[]),
            "unexpected argument \"extra\" for wavelet version; see wavelet --help"
        );
        assert_eq!(
            error("rum", &[]),
            "unknown command \"rum\": expected one of run, status, hash, migrate, version, help; see wavelet --help"
        );
    }

    #[test]
    fn a_flag_given_twice_is_an_error() {
        assert_eq!(
            error("--workers 2 --workers=3", &[]),
            "--workers is given more than once; give it once"
        );
    }

    #[test]
    fn double_dash_ends_the_flags() {
        assert_eq!(
            parse_with("hash -n a -- deployment/web", &[])
                .unwrap()
                .command,
            Command::Hash {
                namespace: Some("a".into()),
                kind: "deployments".into(),
                name: "web".into(),
                hash_key_file: None,
            }
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
    fn reloaders_legacy_selector_forms_are_label_selectors() {
        let selector = |s: &str| {
            run(&format!("--namespace-selector {s}"), &[])
                .reloader
                .namespace_selector
                .unwrap()
                .to_query_string()
        };
        assert_eq!(selector("team:a"), "team=a");
        assert_eq!(selector("team:*"), "team");
        assert_eq!(selector("team=*"), "team");
        assert_eq!(selector("team=a,env:prod"), "env=prod,team=a");
        let set_based = run("", &[("WAVELET_NAMESPACE_SELECTOR", "env in (a,b)")]);
        assert_eq!(
            set_based
                .reloader
                .namespace_selector
                .unwrap()
                .to_query_string(),
            "env in (a,b)"
        );
    }

    #[test]
    fn an_invalid_or_empty_reloader_selector_is_refused_at_start() {
        assert!(error("--resource-label-selector a=b=c", &[])
            .starts_with("--resource-label-selector: invalid label selector"));
        assert!(error("--namespace-selector=", &[]).starts_with("--namespace-selector"));
        assert!(error("--namespace-selector ,", &[]).starts_with("--namespace-selector: "));
    }

    #[test]
    fn ignored_workload_types_takes_reloaders_values_only() {
        assert!(
            run("--ignored-workload-types jobs,cronjobs", &[])
                .reloader
                .ignore_cronjobs
        );
        assert!(
            !run("--ignored-workload-types jobs", &[])
                .reloader
                .ignore_cronjobs
        );
        assert!(error("--ignored-workload-types deployments", &[])
            .contains("expected cronjobs, jobs or both"));
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

    #[test]
    fn hash_knows_cronjobs_by_their_short_names() {
        for spelled in ["cronjob", "cronjobs", "cj", "cronjobs.batch"] {
            assert_eq!(
                kind_and_name(&format!("{spelled}/backup")).unwrap().0,
                "cronjobs"
            );
        }
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
        assert!(error("migrate reloader -n a", &[]).contains("wavelet migrate wave"));
        assert!(error("status --apply", &[]).contains("is a flag of wavelet migrate wave"));
    }
}
