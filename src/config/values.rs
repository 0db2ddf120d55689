//! Validators of flag values: each takes the text and returns the typed value or a
//! message saying what is expected (the caller names the flag or variable).

use std::net::Ipv6Addr;
use std::time::Duration;

use crate::config::args::config_error;
use crate::config::{duration, AlertSink, LeaseTimings, LogFormat, WorkloadKind};
use crate::error::Error;
use crate::selector::Selector;

pub(super) fn parse_bool(s: &str) -> Result<bool, String> {
    match s.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" => Ok(true),
        "false" | "0" | "no" => Ok(false),
        _ => Err(format!("expected true or false, got {s:?}")),
    }
}

pub(super) fn parse_duration(s: &str) -> Result<Duration, String> {
    duration::parse(s).map_err(|e| e.to_string())
}

pub(super) fn positive_duration(s: &str) -> Result<Duration, String> {
    match parse_duration(s)? {
        Duration::ZERO => Err(format!("must be longer than 0, e.g. 10s or 5m; got {s:?}")),
        d => Ok(d),
    }
}

pub(super) fn non_empty(s: &str) -> Result<String, String> {
    if s.is_empty() {
        Err("needs a non-empty value".to_string())
    } else {
        Ok(s.to_string())
    }
}

pub(super) fn namespace(s: &str) -> Result<String, String> {
    if is_dns_label(s) {
        Ok(s.to_string())
    } else {
        Err(format!(
            "{s:?} is not a namespace name: lowercase letters, digits and '-', at most 63, starting and ending with a letter or digit"
        ))
    }
}

pub(super) fn list<T>(s: &str, item: impl Fn(&str) -> Result<T, String>) -> Result<Vec<T>, String> {
    s.split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(item)
        .collect()
}

pub(super) fn parse_rate(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if r.is_finite() && r > 0.0 => Ok(r),
        _ => Err(format!(
            "expected a number greater than 0, e.g. 2 or 0.5; got {s:?}"
        )),
    }
}

pub(super) fn at_least_one<T: TryFrom<u64>>(s: &str) -> Result<T, String> {
    s.parse::<u64>()
        .ok()
        .filter(|&n| n >= 1)
        .and_then(|n| T::try_from(n).ok())
        .ok_or_else(|| format!("expected a whole number of at least 1, e.g. 4; got {s:?}"))
}

pub(super) fn parse_log_format(s: &str) -> Result<LogFormat, String> {
    match s {
        // Reloader's default is the empty value.
        "text" | "" => Ok(LogFormat::Text),
        "json" => Ok(LogFormat::Json),
        _ => Err(format!("expected text or json, got {s:?}")),
    }
}

/// `--log-level`: logrus's levels (Reloader's) as an `env_logger` filter.
pub(super) fn log_level(s: &str) -> Result<String, String> {
    match s.to_ascii_lowercase().as_str() {
        level @ ("trace" | "debug" | "info" | "warn" | "error") => Ok(level.to_string()),
        "warning" => Ok("warn".into()),
        "fatal" | "panic" => Ok("error".into()),
        _ => Err(format!(
            "expected trace, debug, info, warn, warning, error, fatal or panic, got {s:?}"
        )),
    }
}

/// `--metrics-count-by-namespace`: Reloader's `enabled`, or true/false.
pub(super) fn count_by_namespace(s: &str) -> Result<bool, String> {
    match s.to_ascii_lowercase().as_str() {
        "enabled" => Ok(true),
        "disabled" => Ok(false),
        _ => parse_bool(s)
            .map_err(|_| format!("expected enabled (Reloader's value), true or false, got {s:?}")),
    }
}

/// An http or https URL with a host. The value is not echoed: a webhook URL often holds a
/// token, and a proxy URL a password.
pub(super) fn http_url(s: &str) -> Result<String, String> {
    let rest = s
        .strip_prefix("https://")
        .or_else(|| s.strip_prefix("http://"))
        .ok_or(
            "expected an http:// or https:// URL (the value is not shown: it may hold a token)",
        )?;
    if rest.split(['/', '?', '#']).next().unwrap_or("").is_empty() {
        return Err("the URL has no host (the value is not shown: it may hold a token)".into());
    }
    Ok(s.to_string())
}

/// `--alert-sink`: Reloader's sinks; `raw` is Reloader's name for the plain webhook.
pub(super) fn alert_sink(s: &str) -> Result<AlertSink, String> {
    match s.to_ascii_lowercase().as_str() {
        "slack" => Ok(AlertSink::Slack),
        "teams" => Ok(AlertSink::Teams),
        "gchat" => Ok(AlertSink::GoogleChat),
        "webhook" | "raw" => Ok(AlertSink::Webhook),
        _ => Err(format!(
            "expected slack, teams, gchat or webhook, got {s:?}"
        )),
    }
}

pub(super) fn lease_name(s: &str) -> Result<String, String> {
    if is_dns_subdomain(s) {
        Ok(s.to_string())
    } else {
        Err(format!(
            "{s:?} is not a valid Lease name: lowercase letters, digits, '-' and '.', at most 253"
        ))
    }
}

pub(super) fn lease_timings(
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
pub(super) fn listen_addr(s: &str) -> Result<String, String> {
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
pub(super) fn reloader_selector(s: &str) -> Result<Selector, String> {
    // Reloader's chart quotes the value inside the argument (`--namespace-selector="a=b"`),
    // and Reloader reads its flag as CSV, which drops the quotes.
    let unquoted = s
        .trim()
        .strip_prefix('"')
        .and_then(|t| t.strip_suffix('"'))
        .unwrap_or(s);
    let converted: Vec<String> = unquoted
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
pub(super) fn resources_to_ignore(s: &str) -> Result<(bool, bool), String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "configmaps" => Ok((true, false)),
        "secrets" => Ok((false, true)),
        other => Err(format!(
            "expected configmaps or secrets (one of them, as in Reloader), got {other:?}"
        )),
    }
}

/// `--ignored-workload-types`: whether CronJobs are ignored.
pub(super) fn ignored_workload_types(s: &str) -> Result<bool, String> {
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

pub(super) fn workload_kinds(s: &str) -> Result<Vec<WorkloadKind>, String> {
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
pub(super) fn kind_and_name(s: &str) -> Result<(String, String), String> {
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

pub(super) fn is_dns_label(s: &str) -> bool {
    let b = s.as_bytes();
    let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    b.len() <= 63
        && b.first().is_some_and(alnum)
        && b.last().is_some_and(alnum)
        && b.iter().all(|c| alnum(c) || *c == b'-')
}

pub(super) fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_dns_label)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::test_support::*;

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
    fn hash_knows_cronjobs_by_their_short_names() {
        for spelled in ["cronjob", "cronjobs", "cj", "cronjobs.batch"] {
            assert_eq!(
                kind_and_name(&format!("{spelled}/backup")).unwrap().0,
                "cronjobs"
            );
        }
    }
}
