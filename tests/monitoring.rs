//! Monitoring as shipped in `monitoring/` and in the chart: every metric and label that an
//! alert or a dashboard panel queries is one that the real binary's `/metrics` exports
//! (scraped after a rollout, a Pod replacement and watch restarts, so labelled counters
//! have samples); the ServiceMonitor selects the Service's labels and port; the chart
//! renders the same objects when enabled and nothing by default; every alert has its
//! runbook page in the book (`docs/src/operations/runbooks/`).
//!
//! The PromQL is not validated by a Prometheus parser (promtool is not available here):
//! [`promql_usage`] reads only what these checks need, metric names and label names, and
//! refuses a function it does not know.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::{json, Value};

use crate::fake::Fault;
use crate::manifests::{k8s_tool, manifest, object_key, openapi_problems, parse_objects};
use crate::util::*;

/// Labels Prometheus attaches to every sample it scrapes through the ServiceMonitor (the
/// Prometheus Operator's target labels), not wavelet's own.
const TARGET_LABELS: &[&str] = &[
    "job",
    "instance",
    "namespace",
    "pod",
    "service",
    "container",
    "endpoint",
];

/// `up` is written by Prometheus for every target, whatever the target exports.
const PROMETHEUS_METRICS: &[&str] = &["up"];

/// Where the shipped runbook links point, `<base>/<alert>.html`: the runbook pages of the
/// published book; `monitoring.prometheusRule.runbookBaseUrl` replaces it in the chart.
const RUNBOOK_BASE: &str = "https://wavelet-dev.github.io/wavelet/operations/runbooks";

/// Where the book is published; its `site-url` in docs/book.toml is this URL's path.
const BOOK_URL: &str = "https://wavelet-dev.github.io/wavelet/";

/// The book's page with the table of what `/metrics` exports.
const METRICS_PAGE: &str = "docs/src/operations/metrics.md";

/// The book's folder with one runbook page per alert, `<alert>.md`.
const RUNBOOK_PAGES: &str = "docs/src/operations/runbooks";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn yaml(path: &str) -> Value {
    wavelet::client::yaml::parse(&read(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

// ---------------------------------------------------------------------------------------
// What /metrics exports

/// A metric family of the exposition: its type and every label name its samples carry.
#[derive(Debug, Default)]
struct Family {
    kind: String,
    labels: BTreeSet<String>,
}

type Exported = BTreeMap<String, Family>;

/// Families from `# TYPE` lines, label names from the samples (histogram samples
/// `_bucket`, `_sum`, `_count` belong to their family, `le` included).
fn parse_exposition(text: &str) -> Exported {
    let mut families = Exported::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("TYPE has a type");
            families.entry(name.to_string()).or_default().kind = kind.to_string();
            continue;
        }
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let name_end = line.find(['{', ' ']).expect("a sample has a value");
        let name = &line[..name_end];
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|suffix| {
                let base = name.strip_suffix(suffix)?;
                (families.get(base)?.kind == "histogram").then_some(base)
            })
            .unwrap_or(name);
        let family = families
            .get_mut(family)
            .unwrap_or_else(|| panic!("sample before its # TYPE: {line}"));
        if line[name_end..].starts_with('{') {
            for label in label_names(&line[name_end + 1..]) {
                family.labels.insert(label);
            }
        }
    }
    families
}

/// The label names of `a="x",b="y\"z"} 1` (the text after a sample's `{`).
fn label_names(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut chars = text.chars();
    let mut name = String::new();
    while let Some(c) = chars.next() {
        match c {
            '}' => break,
            '=' => {
                names.push(std::mem::take(&mut name));
                assert_eq!(chars.next(), Some('"'), "a label value is quoted: {text}");
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => {
                            chars.next();
                        }
                        '"' => break,
                        _ => {}
                    }
                }
            }
            ',' => {}
            c => name.push(c),
        }
    }
    names
}

/// What the real binary exports once it has done each kind of work the metrics count: a
/// hash-mode adoption and rollout, a delete-mode replacement that was refused once
/// (PodDisruptionBudget, 429) and failed once (500), a workload held for a missing
/// ConfigMap, and watches ended by the server. Scraped once per test run.
fn exported() -> &'static Exported {
    static EXPORTED: OnceLock<Exported> = OnceLock::new();
    EXPORTED.get_or_init(scrape_after_work)
}

fn scrape_after_work() -> Exported {
    const SHOP: &str = "shop";
    let fake = fake_with_web();
    fake.apply(
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "wavelet-system"}}),
    );
    fake.apply(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "worker", "namespace": SHOP},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "worker"}},
            "template": {"metadata": {"labels": {"app": "worker"}}, "spec": {"containers": [{"name": "app", "image": "nginx"}]}},
        }
    }));
    let mut worker_config = configmap(SHOP, "worker-config", &[("mode", "a")]);
    worker_config["metadata"]["annotations"] = json!({"magalix.com/podDeleteMatch": "app=worker"});
    fake.apply(worker_config);
    fake.apply(workload(
        "Deployment",
        "default",
        "held",
        opted_in(),
        mounts_configmap("absent"),
    ));

    let mut args = FAST.to_vec();
    args.extend(["--state-namespace", "wavelet-system"]);
    let wavelet = Wavelet::start(&fake, &args);
    wait_for_metric(
        &wavelet,
        "wavelet_rollouts_total",
        r#"kind="Deployment",result="adopted""#,
        |v| v >= 1.0,
    );
    wait_for_metric(
        &wavelet,
        "wavelet_changes_skipped_total",
        r#"reason="missing_config""#,
        |v| v >= 1.0,
    );

    fake.merge_patch(
        "configmaps",
        "default",
        "app-config",
        json!({"data": {"color": "green"}}),
    );
    wait_for_metric(
        &wavelet,
        "wavelet_rollouts_total",
        r#"kind="Deployment",result="rolled""#,
        |v| v >= 1.0,
    );

    // One replacement has an eviction refused (a budget's 429), the next one an eviction
    // failing (500); both go through when retried.
    for (round, code, reason) in [(1.0, 429, "blocked"), (2.0, 500, "error")] {
        fake.inject(Fault::Status {
            method: "POST".into(),
            resource: "pods".into(),
            code,
            retry_after_secs: None,
            times: 1,
            plain_text: false,
        });
        fake.merge_patch(
            "configmaps",
            SHOP,
            "worker-config",
            json!({"data": {"mode": format!("{round}")}}),
        );
        wait_for_metric(
            &wavelet,
            "wavelet_pod_replacement_retries_total",
            &format!("reason=\"{reason}\""),
            |v| v >= 1.0,
        );
        wait_for_metric(
            &wavelet,
            "wavelet_pod_replacements_total",
            r#"result="replaced""#,
            |v| v >= 2.0 * round,
        );
    }

    fake.close_watches();
    wait_for_metric(
        &wavelet,
        "wavelet_watch_restarts_total",
        r#"resource="configmaps",reason="stream_end""#,
        |v| v >= 1.0,
    );

    let (code, body) = wavelet.http_get("/metrics");
    assert_eq!(code, 200, "{body}");
    parse_exposition(&body)
}

// ---------------------------------------------------------------------------------------
// What a PromQL expression uses

/// Metric names and label names an expression uses.
#[derive(Debug, Default, PartialEq)]
struct Usage {
    /// Each metric with the label names of its own `{...}` matchers.
    selectors: Vec<(String, Vec<String>)>,
    /// Label names of `by`, `without`, `on`, `ignoring`, `group_left`, `group_right` lists
    /// and of `label_values(..., LABEL)`.
    grouping: Vec<String>,
    /// (metric, label, value) of `=` and `=~` matchers, for the documented-values check.
    matched_values: Vec<(String, String, String)>,
}

const AGGREGATIONS: &[&str] = &[
    "sum",
    "min",
    "max",
    "avg",
    "group",
    "stddev",
    "stdvar",
    "count",
    "count_values",
    "bottomk",
    "topk",
    "quantile",
    "limitk",
    "limit_ratio",
];

const FUNCTIONS: &[&str] = &[
    "abs",
    "absent",
    "absent_over_time",
    "avg_over_time",
    "ceil",
    "changes",
    "clamp",
    "clamp_max",
    "clamp_min",
    "count_over_time",
    "deriv",
    "delta",
    "exp",
    "floor",
    "histogram_quantile",
    "idelta",
    "increase",
    "irate",
    "last_over_time",
    "ln",
    "max_over_time",
    "min_over_time",
    "predict_linear",
    "present_over_time",
    "quantile_over_time",
    "rate",
    "resets",
    "round",
    "scalar",
    "sort",
    "sort_desc",
    "sqrt",
    "sum_over_time",
    "time",
    "timestamp",
    "vector",
];

/// Binary operators and modifiers spelled as words, and number literals.
const KEYWORDS: &[&str] = &[
    "and", "or", "unless", "bool", "offset", "atan2", "inf", "nan",
];

/// Label lists follow these.
const GROUPING: &[&str] = &[
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];

/// Reads `expr` (PromQL, or Grafana's `label_values(SELECTOR, LABEL)`; `$variables`
/// allowed in ranges and label values) into the metric and label names it uses.
fn promql_usage(expr: &str) -> Result<Usage, String> {
    if let Some(args) = expr
        .trim()
        .strip_prefix("label_values(")
        .and_then(|rest| rest.strip_suffix(')'))
    {
        let (selector, label) = args
            .rsplit_once(',')
            .ok_or_else(|| format!("label_values without a label: {expr}"))?;
        let mut usage = promql_usage(selector)?;
        usage.grouping.push(label.trim().to_string());
        return Ok(usage);
    }
    let chars: Vec<char> = expr.chars().collect();
    let mut usage = Usage::default();
    let mut i = 0;
    let next_non_space = |mut j: usize| {
        while j < chars.len() && chars[j].is_whitespace() {
            j += 1;
        }
        (j, chars.get(j).copied())
    };
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c == '"' || c == '\'' || c == '`' {
            i = skip_string(&chars, i)?;
        } else if c == '[' {
            // A range or subquery duration, possibly `$__rate_interval`.
            i = chars[i..]
                .iter()
                .position(|&c| c == ']')
                .map(|p| i + p + 1)
                .ok_or_else(|| format!("unclosed [ in {expr}"))?;
        } else if c == '{' {
            return Err(format!("a selector without a metric name in {expr}"));
        } else if c.is_ascii_digit()
            || (c == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit))
        {
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.') {
                i += 1;
            }
        } else if c == '$' {
            // A dashboard variable outside a label value.
            i += 1;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || "_{}".contains(chars[i]))
            {
                i += 1;
            }
        } else if c.is_ascii_alphabetic() || c == '_' || c == ':' {
            let start = i;
            while i < chars.len()
                && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == ':')
            {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let (after, next) = next_non_space(i);
            if GROUPING.contains(&word.as_str()) {
                if next == Some('(') {
                    let close = chars[after..]
                        .iter()
                        .position(|&c| c == ')')
                        .map(|p| after + p)
                        .ok_or_else(|| format!("unclosed {word}( in {expr}"))?;
                    let list: String = chars[after + 1..close].iter().collect();
                    usage.grouping.extend(
                        list.split(',')
                            .map(str::trim)
                            .filter(|l| !l.is_empty())
                            .map(String::from),
                    );
                    i = close + 1;
                } else if !word.starts_with("group_") {
                    return Err(format!("{word} without a label list in {expr}"));
                }
            } else if AGGREGATIONS.contains(&word.as_str())
                || FUNCTIONS.contains(&word.as_str())
                || KEYWORDS.contains(&word.as_str())
            {
                // Not a metric.
            } else if next == Some('(') {
                return Err(format!("unknown function {word} in {expr}"));
            } else {
                let mut labels = Vec::new();
                if next == Some('{') {
                    i = read_matchers(&chars, after, &word, &mut labels, &mut usage.matched_values)
                        .map_err(|e| format!("{e} in {expr}"))?;
                }
                usage.selectors.push((word, labels));
            }
        } else {
            i += 1;
        }
    }
    Ok(usage)
}

/// The index after the string literal that starts at `start`.
fn skip_string(chars: &[char], start: usize) -> Result<usize, String> {
    let quote = chars[start];
    let mut i = start + 1;
    while i < chars.len() {
        match chars[i] {
            '\\' if quote != '`' => i += 2,
            c if c == quote => return Ok(i + 1),
            _ => i += 1,
        }
    }
    Err("unclosed string".into())
}

/// Reads `{name op "value", ...}` starting at the `{`; returns the index after the `}`.
fn read_matchers(
    chars: &[char],
    open: usize,
    metric: &str,
    labels: &mut Vec<String>,
    values: &mut Vec<(String, String, String)>,
) -> Result<usize, String> {
    let mut i = open + 1;
    loop {
        while i < chars.len() && (chars[i].is_whitespace() || chars[i] == ',') {
            i += 1;
        }
        match chars.get(i) {
            None => return Err("unclosed {".into()),
            Some('}') => return Ok(i + 1),
            _ => {}
        }
        let start = i;
        while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
            i += 1;
        }
        let label: String = chars[start..i].iter().collect();
        while i < chars.len() && chars[i].is_whitespace() {
            i += 1;
        }
        let op_start = i;
        while i < chars.len() && "=!~".contains(chars[i]) {
            i += 1;
        }
        let op: String = chars[op_start..i].iter().collect();
        if label.is_empty() || !["=", "!=", "=~", "!~"].contains(&op.as_str()) {
            return Err(format!("a malformed matcher of {metric}"));
        }
        while i < chars.len() && chars[i].is_whitespace() {
            i += 1;
        }
        if !matches!(chars.get(i), Some('"' | '\'' | '`')) {
            return Err(format!("an unquoted value of {metric}{{{label}}}"));
        }
        let end = skip_string(chars, i)?;
        let value: String = chars[i + 1..end - 1].iter().collect();
        if op == "=" || op == "=~" {
            values.push((metric.to_string(), label.clone(), value));
        }
        labels.push(label);
        i = end;
    }
}

// ---------------------------------------------------------------------------------------
// The shipped expressions

/// (where, expression) of every alert of the rules file.
fn alert_exprs(spec: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for group in spec["groups"].as_array().expect("groups") {
        for rule in group["rules"].as_array().expect("rules") {
            let name = rule["alert"].as_str().expect("every rule is an alert");
            let expr = rule["expr"].as_str().expect("expr is a string");
            out.push((format!("alert {name}"), expr.to_string()));
        }
    }
    out
}

/// (where, query) of every panel target and every query variable of the dashboard.
fn dashboard_exprs(dashboard: &Value) -> Vec<(String, String)> {
    fn panels(list: &Value, out: &mut Vec<(String, String)>) {
        for panel in list.as_array().into_iter().flatten() {
            let title = panel["title"].as_str().unwrap_or("?");
            if panel["type"] == "row" {
                panels(&panel["panels"], out);
                continue;
            }
            let targets = panel["targets"].as_array().map_or(&[][..], Vec::as_slice);
            assert!(!targets.is_empty(), "panel {title:?} queries nothing");
            for target in targets {
                let expr = target["expr"].as_str().expect("a target has an expr");
                out.push((format!("panel {title:?}"), expr.to_string()));
            }
        }
    }
    let mut out = Vec::new();
    panels(&dashboard["panels"], &mut out);
    for variable in dashboard["templating"]["list"]
        .as_array()
        .expect("templating")
    {
        if variable["type"] == "query" {
            let query = variable["query"]["query"]
                .as_str()
                .or(variable["query"].as_str())
                .expect("a query variable has a query");
            out.push((format!("variable {}", variable["name"]), query.to_string()));
        }
    }
    out
}

fn shipped_rules() -> Value {
    yaml("charts/wavelet/files/prometheus-rules.yaml")
}

fn shipped_dashboard() -> Value {
    serde_json::from_str(&read("charts/wavelet/files/grafana-dashboard.json"))
        .expect("the dashboard is JSON")
}

/// Every query the shipped alerts and dashboard run.
fn shipped_exprs() -> Vec<(String, String)> {
    let mut all = alert_exprs(&shipped_rules());
    all.extend(dashboard_exprs(&shipped_dashboard()));
    all
}

/// What in `expr` is not exported: unknown metrics, labels a metric does not carry.
fn unexported(expr: &str, exported: &Exported) -> Vec<String> {
    let usage = match promql_usage(expr) {
        Ok(usage) => usage,
        Err(e) => return vec![e],
    };
    let mut problems = Vec::new();
    let labels_of = |metric: &str| -> Option<BTreeSet<String>> {
        if PROMETHEUS_METRICS.contains(&metric) {
            return Some(BTreeSet::new());
        }
        if let Some(family) = exported.get(metric) {
            return Some(family.labels.clone());
        }
        let (base, _) = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| Some((metric.strip_suffix(s)?, *s)))?;
        let family = exported.get(base).filter(|f| f.kind == "histogram")?;
        Some(family.labels.clone())
    };
    let mut in_expr = BTreeSet::new();
    for (metric, labels) in &usage.selectors {
        let Some(known) = labels_of(metric) else {
            problems.push(format!("metric {metric} is not exported"));
            continue;
        };
        for label in labels {
            if !known.contains(label) && !TARGET_LABELS.contains(&label.as_str()) {
                problems.push(format!("{metric} has no label {label} (it has {known:?})"));
            }
        }
        in_expr.extend(known);
    }
    for label in &usage.grouping {
        if !in_expr.contains(label) && !TARGET_LABELS.contains(&label.as_str()) {
            problems.push(format!(
                "no metric of the expression has label {label} (they have {in_expr:?})"
            ));
        }
    }
    problems
}

#[test]
fn every_metric_and_label_that_an_alert_or_panel_queries_is_exported() {
    let exported = exported();
    let exprs = shipped_exprs();
    assert!(exprs.len() >= 20, "too few queries found: {exprs:?}");
    let problems: Vec<String> = exprs
        .iter()
        .flat_map(|(at, expr)| {
            unexported(expr, exported)
                .into_iter()
                .map(move |p| format!("{at}: {p}\n    {expr}"))
        })
        .collect();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The check above can fail: a metric, a label or a function that does not exist is named.
#[test]
fn the_export_check_rejects_unknown_metrics_labels_and_functions() {
    let exported = exported();
    for good in [
        r#"sum by (kind, result) (increase(wavelet_rollouts_total{job="wavelet", result="error"}[$__rate_interval]))"#,
        r#"histogram_quantile(0.9, sum by (le) (rate(wavelet_change_to_patch_seconds_bucket{pod=~"$pod"}[5m])))"#,
        r#"absent(up{job="wavelet"} == 1)"#,
        r#"rate(process_cpu_seconds_total[5m]) and on (pod) wavelet_leader == 1"#,
        r#"label_values(wavelet_ready{job="wavelet"}, namespace)"#,
    ] {
        assert_eq!(unexported(good, exported), Vec::<String>::new(), "{good}");
    }
    for (bad, why) in [
        (
            "rate(wavelet_rollout_total[5m])",
            "metric wavelet_rollout_total",
        ),
        (r#"wavelet_ready{phase="x"}"#, "has no label phase"),
        (
            "sum by (verb) (rate(wavelet_rollouts_total[5m]))",
            "label verb",
        ),
        (
            "rate(wavelet_ready_bucket[5m])",
            "metric wavelet_ready_bucket",
        ),
        (
            "rate(wavelet_rollouts_total_count[5m])",
            "metric wavelet_rollouts_total_count",
        ),
        ("process_open_fds", "metric process_open_fds"),
        ("sumx(wavelet_ready)", "unknown function sumx"),
        ("label_values(wavelet_ready, phase)", "label phase"),
    ] {
        let problems = unexported(bad, exported).join("\n");
        assert!(problems.contains(why), "{bad}: {problems:?}");
    }
}

#[test]
fn promql_usage_reads_selectors_groupings_and_matched_values() {
    let usage = promql_usage(
        r#"sum by (a, b) (rate(m_total{x="1", y=~"p|q", z!="n"}[5m] offset 1h)) / on(c) group_left(d) n"#,
    )
    .unwrap();
    assert_eq!(
        usage.selectors,
        vec![
            (
                "m_total".to_string(),
                vec!["x".into(), "y".into(), "z".into()]
            ),
            ("n".to_string(), vec![])
        ]
    );
    assert_eq!(usage.grouping, ["a", "b", "c", "d"]);
    assert_eq!(
        usage.matched_values,
        [
            ("m_total".into(), "x".into(), "1".into()),
            ("m_total".into(), "y".into(), "p|q".into())
        ]
    );
}

/// A matched label value (`result="error"`) that wavelet never writes would make an alert
/// that cannot fire: where the book's metrics table enumerates a label's values, every
/// value an alert or panel matches is one of them.
#[test]
fn matched_label_values_are_the_ones_the_book_documents() {
    let readme = read(METRICS_PAGE);
    let mut problems = Vec::new();
    for (at, expr) in shipped_exprs() {
        for (metric, label, value) in promql_usage(&expr).unwrap().matched_values {
            if TARGET_LABELS.contains(&label.as_str()) {
                continue;
            }
            let row = readme
                .lines()
                .find(|l| l.starts_with(&format!("| `{metric}` |")))
                .unwrap_or_else(|| {
                    panic!("{at}: {metric} is not in the metrics table of {METRICS_PAGE}")
                });
            if !row.contains(&format!("`{label}` = ")) {
                continue; // values not enumerated (verb, code, resource)
            }
            for alternative in value.split('|') {
                if !row.contains(&format!("`{alternative}`")) {
                    problems.push(format!(
                        "{at}: {metric}{{{label}=\"{alternative}\"}} is not documented: {row}"
                    ));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

// ---------------------------------------------------------------------------------------
// The objects

#[test]
fn every_alert_has_severity_summary_description_and_a_runbook_page() {
    // The runbook URLs are the pages the book builds from RUNBOOK_PAGES, where it is published.
    let site_url = read("docs/book.toml")
        .lines()
        .find_map(|l| l.strip_prefix("site-url = "))
        .map(|v| v.trim_matches('"').to_string())
        .expect("docs/book.toml sets site-url");
    assert!(
        BOOK_URL.ends_with(&site_url),
        "{BOOK_URL} is not at site-url {site_url}"
    );
    assert_eq!(
        RUNBOOK_BASE,
        format!(
            "{BOOK_URL}{}",
            RUNBOOK_PAGES.strip_prefix("docs/src/").unwrap()
        )
    );
    let rules = shipped_rules();
    let mut names = BTreeSet::new();
    for group in rules["groups"].as_array().unwrap() {
        for rule in group["rules"].as_array().unwrap() {
            let name = rule["alert"].as_str().unwrap();
            assert!(names.insert(name), "{name} twice");
            assert!(
                ["critical", "warning", "info"]
                    .contains(&rule["labels"]["severity"].as_str().unwrap_or("")),
                "{name}: severity"
            );
            assert!(
                rule["for"].is_string(),
                "{name}: a `for` so one bad scrape does not page"
            );
            for field in ["summary", "description"] {
                assert!(
                    rule["annotations"][field]
                        .as_str()
                        .is_some_and(|s| s.len() > 10),
                    "{name}: {field}"
                );
            }
            let url = rule["annotations"]["runbook_url"].as_str().unwrap();
            let want = format!("{RUNBOOK_BASE}/{name}.html");
            assert_eq!(url, want, "{name}: runbook_url");
            let page = format!("{RUNBOOK_PAGES}/{name}.md");
            assert!(
                root().join(&page).is_file()
                    && read(&page).starts_with(&format!("# Runbook: {name}\n")),
                "{name}: no runbook page {page} starting \"# Runbook: {name}\""
            );
        }
    }
    assert!(names.len() >= 8, "{names:?}");
}

/// The job label the ServiceMonitor gives wavelet's samples: the value of its `jobLabel`
/// on the Service, else the Service's name (Prometheus Operator).
fn job_of(service_monitor: &Value, service: &Value) -> String {
    let labels = &service["metadata"]["labels"];
    match service_monitor["spec"]["jobLabel"].as_str() {
        Some(label) => labels[label]
            .as_str()
            .unwrap_or_else(|| panic!("the Service has no label {label} for jobLabel"))
            .to_string(),
        None => service["metadata"]["name"].as_str().unwrap().to_string(),
    }
}

#[test]
fn the_service_monitor_selects_the_metrics_service_and_its_port() {
    let monitor = yaml("monitoring/servicemonitor.yaml");
    let service = manifest("service.yaml");
    assert_eq!(monitor["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(monitor["kind"], "ServiceMonitor");
    assert_eq!(
        monitor["metadata"]["namespace"], service["metadata"]["namespace"],
        "without a namespaceSelector a ServiceMonitor selects Services of its own namespace"
    );
    assert!(monitor["spec"]["namespaceSelector"].is_null());
    let selector = monitor["spec"]["selector"]["matchLabels"]
        .as_object()
        .expect("spec.selector.matchLabels");
    assert!(!selector.is_empty());
    for (key, value) in selector {
        assert_eq!(
            &service["metadata"]["labels"][key], value,
            "the Service lacks selector label {key}"
        );
    }
    let ports: BTreeSet<&str> = service["spec"]["ports"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    let endpoints = monitor["spec"]["endpoints"].as_array().expect("endpoints");
    assert!(!endpoints.is_empty());
    for endpoint in endpoints {
        let port = endpoint["port"].as_str().expect("a named port");
        assert!(
            ports.contains(port),
            "the Service has no port {port}: {ports:?}"
        );
        assert_eq!(endpoint["path"], "/metrics");
    }
    // The alerts and panels select the job this ServiceMonitor produces.
    let job = job_of(&monitor, &service);
    for (at, expr) in shipped_exprs() {
        for (_, label, value) in promql_usage(&expr).unwrap().matched_values {
            if label == "job" {
                assert_eq!(value, job, "{at}: {expr}");
            }
        }
    }
}

/// The fields of the Prometheus Operator's CRDs (monitoring.coreos.com/v1) these objects
/// use, and the ones the CRD requires; the CRDs are not in ../shared/k8s-openapi.
fn crd_problems(object: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    let mut only = |at: &str, value: &Value, allowed: &[&str], required: &[&str]| {
        let Some(map) = value.as_object() else {
            problems.push(format!("{at}: not an object"));
            return;
        };
        for key in map.keys() {
            if !allowed.contains(&key.as_str()) {
                problems.push(format!("{at}.{key}: no such field"));
            }
        }
        for key in required {
            if !map.contains_key(*key) {
                problems.push(format!("{at}: missing required field {key}"));
            }
        }
    };
    assert_eq!(object["apiVersion"], "monitoring.coreos.com/v1");
    only(
        "",
        object,
        &["apiVersion", "kind", "metadata", "spec"],
        &["spec"],
    );
    only(
        ".metadata",
        &object["metadata"],
        &["name", "namespace", "labels", "annotations"],
        &["name", "namespace"],
    );
    let spec = &object["spec"];
    match object["kind"].as_str() {
        Some("ServiceMonitor") => {
            only(
                ".spec",
                spec,
                &["jobLabel", "selector", "endpoints", "namespaceSelector"],
                &["selector"],
            );
            for (i, endpoint) in spec["endpoints"]
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
            {
                only(
                    &format!(".spec.endpoints[{i}]"),
                    endpoint,
                    &["port", "path", "interval", "scrapeTimeout", "scheme"],
                    &[],
                );
            }
        }
        Some("PrometheusRule") => {
            only(".spec", spec, &["groups"], &[]);
            for (g, group) in spec["groups"].as_array().into_iter().flatten().enumerate() {
                only(
                    &format!(".spec.groups[{g}]"),
                    group,
                    &["name", "interval", "rules"],
                    &["name"],
                );
                for (r, rule) in group["rules"].as_array().into_iter().flatten().enumerate() {
                    only(
                        &format!(".spec.groups[{g}].rules[{r}]"),
                        rule,
                        &["alert", "expr", "for", "labels", "annotations"],
                        &["expr", "alert"],
                    );
                }
            }
        }
        other => problems.push(format!("unexpected kind {other:?}")),
    }
    problems
}

#[test]
fn the_plain_files_are_the_charts_files() {
    let rule = yaml("monitoring/prometheusrule.yaml");
    assert_eq!(rule["kind"], "PrometheusRule");
    assert_eq!(
        rule["spec"],
        shipped_rules(),
        "monitoring/prometheusrule.yaml's spec differs from charts/wavelet/files/prometheus-rules.yaml"
    );
    assert_eq!(
        read("monitoring/grafana-dashboard.json"),
        read("charts/wavelet/files/grafana-dashboard.json"),
        "monitoring/grafana-dashboard.json differs from the chart's"
    );
    for path in [
        "monitoring/prometheusrule.yaml",
        "monitoring/servicemonitor.yaml",
    ] {
        let problems = crd_problems(&yaml(path));
        assert!(problems.is_empty(), "{path}: {problems:?}");
    }
    let dashboard = shipped_dashboard();
    assert_eq!(dashboard["uid"], "wavelet");
}

// ---------------------------------------------------------------------------------------
// The chart

fn helm_template(helm: &Path, args: &[&str]) -> Result<String, String> {
    let out = Command::new(helm)
        .args(["template", "wavelet"])
        .arg(root().join("charts/wavelet"))
        .args(["--namespace", "wavelet"])
        .args(args)
        .output()
        .unwrap();
    if out.status.success() {
        Ok(String::from_utf8(out.stdout).unwrap())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

const ENABLE_ALL: &[&str] = &[
    "--set",
    "monitoring.serviceMonitor.enabled=true",
    "--set",
    "monitoring.prometheusRule.enabled=true",
    "--set",
    "monitoring.dashboard.enabled=true",
];

fn helm() -> Option<PathBuf> {
    k8s_tool("helm")
}

#[test]
fn chart_renders_the_monitoring_files_when_enabled() {
    let Some(helm) = helm() else { return };
    let rendered = parse_objects("helm template", &helm_template(&helm, ENABLE_ALL).unwrap());
    for path in [
        "monitoring/servicemonitor.yaml",
        "monitoring/prometheusrule.yaml",
    ] {
        let want = yaml(path);
        let got = rendered
            .get(&object_key(&want))
            .unwrap_or_else(|| panic!("the chart does not render {path}"));
        assert_eq!(got, &want, "the chart's object differs from {path}");
        let problems = crd_problems(got);
        assert!(problems.is_empty(), "{path}: {problems:?}");
    }
    let key = (
        "ConfigMap".to_string(),
        "wavelet".to_string(),
        "wavelet-dashboard".to_string(),
    );
    let configmap = rendered.get(&key).expect("the dashboard ConfigMap");
    assert_eq!(configmap["metadata"]["labels"]["grafana_dashboard"], "1");
    assert_eq!(
        configmap["data"]["wavelet.json"].as_str().unwrap(),
        read("monitoring/grafana-dashboard.json").trim_end(),
        "the ConfigMap's dashboard differs from monitoring/grafana-dashboard.json"
    );
    let problems = openapi_problems("dashboard ConfigMap", configmap);
    assert!(problems.is_empty(), "{problems:?}");
}

#[test]
fn chart_renders_no_monitoring_objects_by_default() {
    let Some(helm) = helm() else { return };
    let rendered = parse_objects("helm template", &helm_template(&helm, &[]).unwrap());
    for (kind, _, name) in rendered.keys() {
        assert!(
            !["ServiceMonitor", "PrometheusRule"].contains(&kind.as_str())
                && name != "wavelet-dashboard",
            "{kind} {name} rendered with monitoring off"
        );
    }
}

#[test]
fn chart_monitoring_values_move_labels_namespace_and_runbook_links() {
    let Some(helm) = helm() else { return };
    let mut args = ENABLE_ALL.to_vec();
    args.extend([
        "--set",
        "monitoring.serviceMonitor.labels.release=kps",
        "--set",
        "monitoring.prometheusRule.labels.release=kps",
        "--set",
        "monitoring.prometheusRule.runbookBaseUrl=https://wiki.example.com/wavelet",
        "--set",
        "monitoring.dashboard.namespace=grafana",
        "--set-string",
        "monitoring.dashboard.labels.grafana_dashboard=wavelet",
        "--set",
        "monitoring.dashboard.annotations.grafana_folder=Platform",
    ]);
    let rendered = parse_objects("helm template", &helm_template(&helm, &args).unwrap());
    let get = |kind: &str, ns: &str, name: &str| {
        rendered
            .get(&(kind.into(), ns.into(), name.into()))
            .unwrap_or_else(|| panic!("{kind} {ns}/{name} not rendered: {:?}", rendered.keys()))
    };
    assert_eq!(
        get("ServiceMonitor", "wavelet", "wavelet")["metadata"]["labels"]["release"],
        "kps"
    );
    let rule = get("PrometheusRule", "wavelet", "wavelet");
    assert_eq!(rule["metadata"]["labels"]["release"], "kps");
    let mut links = 0;
    let mut want = shipped_rules();
    for group in want["groups"].as_array_mut().unwrap() {
        for rule in group["rules"].as_array_mut().unwrap() {
            let url = rule["annotations"]["runbook_url"].as_str().unwrap();
            let moved = url.replace(RUNBOOK_BASE, "https://wiki.example.com/wavelet");
            assert_ne!(moved, url);
            rule["annotations"]["runbook_url"] = json!(moved);
            links += 1;
        }
    }
    assert!(links > 0);
    assert_eq!(rule["spec"], want, "only the runbook links move");
    // A base with a trailing slash gives the same links.
    let mut slashed = ENABLE_ALL.to_vec();
    slashed.extend([
        "--set",
        "monitoring.prometheusRule.runbookBaseUrl=https://wiki.example.com/wavelet/",
    ]);
    let again = parse_objects("helm template", &helm_template(&helm, &slashed).unwrap());
    let key = (
        "PrometheusRule".to_string(),
        "wavelet".to_string(),
        "wavelet".to_string(),
    );
    let again = again.get(&key).expect("PrometheusRule rendered");
    assert_eq!(again["spec"], want, "a trailing slash in runbookBaseUrl");
    let configmap = get("ConfigMap", "grafana", "wavelet-dashboard");
    assert_eq!(
        configmap["metadata"]["labels"]["grafana_dashboard"],
        "wavelet"
    );
    assert_eq!(
        configmap["metadata"]["annotations"]["grafana_folder"],
        "Platform"
    );

    // values.schema.json: a misspelled key or a wrong interval fails at template time.
    for bad in [
        "monitoring.serviceMonitor.enable=true",
        "monitoring.serviceMonitor.interval=30 seconds",
        "monitoring.prometheusRule.runbookBaseUrl=wiki/page#x",
    ] {
        let err = helm_template(&helm, &["--set", bad]).expect_err(bad);
        assert!(err.contains("monitoring"), "{bad}: {err}");
    }
}
