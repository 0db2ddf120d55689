//! Counters, gauges and histograms for `/metrics`, written by the code paths that act,
//! and their rendering in the Prometheus text format (version 0.0.4).

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// Upper bounds (seconds) of the latency histograms' buckets.
const BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

/// Counters by a tuple of label values.
#[derive(Default)]
pub struct CounterVec(Mutex<BTreeMap<Vec<String>, u64>>);

impl CounterVec {
    pub fn inc(&self, labels: &[&str]) {
        self.add(labels, 1);
    }

    pub fn add(&self, labels: &[&str], n: u64) {
        let key = labels.iter().map(|l| l.to_string()).collect();
        *self.0.lock().unwrap().entry(key).or_insert(0) += n;
    }

    pub fn get(&self, labels: &[&str]) -> u64 {
        let key: Vec<String> = labels.iter().map(|l| l.to_string()).collect();
        self.0.lock().unwrap().get(&key).copied().unwrap_or(0)
    }

    fn samples(&self) -> Vec<(Vec<String>, u64)> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect()
    }
}

/// Upper bounds (seconds) of the buckets of fan-out wave durations (rollouts take minutes).
const WAVE_BUCKETS: &[f64] = &[
    5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1800.0, 3600.0,
];

/// A histogram of durations with [`BUCKETS`] (or other bounds).
pub struct Histogram {
    bounds: &'static [f64],
    inner: Mutex<HistogramData>,
}

struct HistogramData {
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Default for Histogram {
    fn default() -> Histogram {
        Histogram::with_bounds(BUCKETS)
    }
}

impl Histogram {
    pub fn with_bounds(bounds: &'static [f64]) -> Histogram {
        Histogram {
            bounds,
            inner: Mutex::new(HistogramData {
                counts: vec![0; bounds.len()],
                sum: 0.0,
                count: 0,
            }),
        }
    }

    pub fn observe(&self, d: Duration) {
        let secs = d.as_secs_f64();
        let mut data = self.inner.lock().unwrap();
        for (bound, count) in self.bounds.iter().zip(data.counts.iter_mut()) {
            if secs <= *bound {
                *count += 1;
            }
        }
        data.sum += secs;
        data.count += 1;
    }

    pub fn count(&self) -> u64 {
        self.inner.lock().unwrap().count
    }
}

/// Everything wavelet counts. One per process: [`global`].
#[derive(Default)]
pub struct Metrics {
    /// Hash-mode writes by (kind, result): `rolled`, `adopted`, `dry_run`, `failed`.
    pub rollouts: CounterVec,
    /// Pods deleted or evicted by finished delete-mode replacements, by result
    /// (`replaced`, `dry_run`).
    pub pod_replacements: CounterVec,
    /// What delete mode retries, by reason: `blocked` (one eviction refused, e.g. by a
    /// PodDisruptionBudget), `error` (a replacement step failed). Without it a replacement
    /// that never finishes shows only in Events and logs.
    pub pod_replacement_retries: CounterVec,
    /// Changes not acted on, by reason: `throttled`, `rate_limited` (each change of a
    /// workload once), `missing_config`, `out_of_scope`, `not_leader`.
    pub changes_skipped: CounterVec,
    /// Relists by (resource, reason): `initial`, `resync`, `expired`, `error`, `poll`,
    /// `undecodable`, `backwards`, `silence` (see `watch::watcher::Restart`).
    pub watch_relists: CounterVec,
    /// Re-watches without a relist by (resource, reason): `stream_end`, `stream_broken`.
    pub watch_restarts: CounterVec,
    pub reconcile_duration: Histogram,
    /// From the watch event of a ConfigMap/Secret change to the rollout patch.
    pub change_to_patch: Histogram,
    /// Times this process became the leader.
    pub leader_transitions: AtomicU64,
    /// Fan-outs held because a workload failed its rollout.
    pub fanouts_halted: AtomicU64,
    /// From the release of a fan-out's wave to its last workload finishing healthy.
    pub fanout_wave_duration: WaveHistogram,
    /// Stakater Reloader's `reloader_reload_executed_total`, by `success`: rollouts (`true`)
    /// and failed reconciles, whose write is retried (`false`).
    pub reloads: CounterVec,
    /// The same by (`success`, `namespace`), exported only with [`Metrics::count_by_namespace`].
    pub reloads_by_namespace: CounterVec,
    /// `METRICS_COUNT_BY_NAMESPACE=enabled`: export `reloader_reload_executed_total_by_namespace`.
    pub count_by_namespace: AtomicBool,
    /// Alerts on rollout by result: `sent`, `failed` (given up after retries), `dropped`
    /// (the queue was full).
    pub alerts: CounterVec,
    /// Issue 27: Events not written, by reason (`queue_full`, `spam`, `error`, `stopping`).
    pub events_dropped: CounterVec,
}

impl Metrics {
    /// One of Reloader's reloads: a rollout of a workload in `namespace`, or a failed one.
    pub fn reload_executed(&self, success: bool, namespace: &str) {
        let success = if success { "true" } else { "false" };
        self.reloads.inc(&[success]);
        if self.count_by_namespace.load(Ordering::Relaxed) {
            self.reloads_by_namespace.inc(&[success, namespace]);
        }
    }
}

/// The histogram of fan-out wave durations, with buckets from 5 s to 1 h.
pub struct WaveHistogram(pub Histogram);

impl Default for WaveHistogram {
    fn default() -> WaveHistogram {
        WaveHistogram(Histogram::with_bounds(WAVE_BUCKETS))
    }
}

impl WaveHistogram {
    pub fn observe(&self, d: Duration) {
        self.0.observe(d);
    }
}

/// The process's metrics.
pub fn global() -> &'static Metrics {
    static METRICS: OnceLock<Metrics> = OnceLock::new();
    METRICS.get_or_init(Metrics::default)
}

/// Values read at scrape time rather than counted.
#[derive(Debug, Default, Clone)]
pub struct Gauges {
    /// API requests by (verb, HTTP code; 0 for transport errors).
    pub requests: Vec<((&'static str, u16), u64)>,
    pub cached_configs: usize,
    pub cached_workloads: usize,
    /// Referenced Secrets known not to exist.
    pub cached_absent_secrets: usize,
    pub hash_queue: usize,
    pub delete_queue: usize,
    /// Secrets whose data waits to be read (retries after a failure included).
    pub secret_reads: usize,
    /// Keys and values of `wavelet-state` in bytes, as last read, written or tried.
    pub state_bytes: u64,
    pub leader: bool,
    pub ready: bool,
    /// Hash-mode rollouts waiting, by reason (`pause`, `window`, `wave`, `held`).
    pub pending_rollouts: Vec<(&'static str, usize)>,
    /// Fan-outs held now (from `wavelet-state`).
    pub fanouts_held: usize,
    pub resident_bytes: Option<u64>,
    pub cpu_seconds: Option<f64>,
    /// Issue 27: seconds requests waited for the client-side budget (and 429 pauses).
    pub budget_wait_seconds: f64,
    /// Issue 27: workloads whose rollout waits for a token of --max-rollouts-per-second.
    pub rollouts_waiting: usize,
    /// Workloads seen but not yet reconciled a first time (their adoption, when they have
    /// no hash yet): background work that waits behind every change to act on.
    pub adoptions_pending: usize,
}

/// Resident set size from `/proc/self/status` (`VmRSS`), in bytes.
pub fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_vm_rss(&status)
}

/// `VmRSS` of a `/proc/PID/status` text, in bytes.
pub fn parse_vm_rss(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line
        .trim_start_matches("VmRSS:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024)
}

/// User plus system CPU time of the whole process from `/proc/self/stat`, in seconds.
pub fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    parse_cpu_seconds(&stat)
}

/// `utime + stime` of a `/proc/PID/stat` line, in seconds. The fields count in USER_HZ
/// ticks, which the kernel fixes at 100 for /proc on every architecture wavelet ships for
/// (Prometheus's own procfs reader assumes the same).
pub fn parse_cpu_seconds(stat: &str) -> Option<f64> {
    const USER_HZ: f64 = 100.0;
    // The command name (field 2) is in parentheses and may hold spaces: count from after it.
    let after_name = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_name.split_whitespace().skip(11); // field 3 (state) is index 0
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some((utime + stime) as f64 / USER_HZ)
}

/// Renders everything in the Prometheus text exposition format.
pub fn render(metrics: &Metrics, gauges: &Gauges) -> String {
    let mut out = String::new();
    counter_vec(
        &mut out,
        "wavelet_rollouts_total",
        "Hash-mode writes to workloads, by kind and result.",
        &["kind", "result"],
        &metrics.rollouts,
    );
    counter_vec(
        &mut out,
        "wavelet_pod_replacements_total",
        "Pods replaced (deleted or evicted) by delete mode, by result.",
        &["result"],
        &metrics.pod_replacements,
    );
    counter_vec(
        &mut out,
        "wavelet_pod_replacement_retries_total",
        "Delete-mode retries, by reason (blocked: an eviction refused; error: a step failed).",
        &["reason"],
        &metrics.pod_replacement_retries,
    );
    counter_vec(
        &mut out,
        "wavelet_changes_skipped_total",
        "Changes not acted on (yet), by reason.",
        &["reason"],
        &metrics.changes_skipped,
    );
    // Issue 27: Events not written.
    counter_vec(
        &mut out,
        "wavelet_events_dropped_total",
        "Events not written, by reason (queue_full, spam, error, stopping).",
        &["reason"],
        &metrics.events_dropped,
    );
    counter_vec(
        &mut out,
        "wavelet_watch_relists_total",
        "Relists of a watched resource (after the first, comparing metadata), by resource and reason.",
        &["resource", "reason"],
        &metrics.watch_relists,
    );
    counter_vec(
        &mut out,
        "wavelet_watch_restarts_total",
        "Watches reopened without a relist, by resource and reason.",
        &["resource", "reason"],
        &metrics.watch_restarts,
    );
    header(
        &mut out,
        "wavelet_api_requests_total",
        "API server requests by verb and HTTP code (0: transport error).",
        "counter",
    );
    let mut requests = gauges.requests.clone();
    requests.sort();
    for ((verb, code), n) in requests {
        let _ = writeln!(
            out,
            "wavelet_api_requests_total{{verb=\"{verb}\",code=\"{code}\"}} {n}"
        );
    }
    // Issue 27: the client-side budget.
    header(
        &mut out,
        "wavelet_api_budget_wait_seconds_total",
        "Seconds requests waited for the client-side budget (--api-qps, --api-burst) or a 429's Retry-After, all together.",
        "counter",
    );
    let _ = writeln!(
        out,
        "wavelet_api_budget_wait_seconds_total {:.3}",
        gauges.budget_wait_seconds
    );
    histogram(
        &mut out,
        "wavelet_reconcile_duration_seconds",
        "Time one hash-mode reconcile took.",
        &metrics.reconcile_duration,
    );
    histogram(
        &mut out,
        "wavelet_change_to_patch_seconds",
        "From a ConfigMap/Secret change arriving on the watch to the rollout patch.",
        &metrics.change_to_patch,
    );
    header(
        &mut out,
        "wavelet_rollouts_pending",
        "Hash-mode rollouts waiting, by reason (pause, window: outside a restart window, wave: for the wave before to finish healthy, held: by a held fan-out).",
        "gauge",
    );
    for reason in ["pause", "window", "wave", "held"] {
        let n = gauges
            .pending_rollouts
            .iter()
            .find(|(r, _)| *r == reason)
            .map_or(0, |(_, n)| *n);
        let _ = writeln!(out, "wavelet_rollouts_pending{{reason=\"{reason}\"}} {n}");
    }
    gauge(
        &mut out,
        "wavelet_fanouts_held",
        "Fan-outs of a shared ConfigMap/Secret change held because a workload failed its rollout.",
        gauges.fanouts_held as u64,
    );
    header(
        &mut out,
        "wavelet_fanouts_halted_total",
        "Times a fan-out was held because a workload of a wave failed its rollout.",
        "counter",
    );
    let _ = writeln!(
        out,
        "wavelet_fanouts_halted_total {}",
        metrics.fanouts_halted.load(Ordering::Relaxed)
    );
    histogram(
        &mut out,
        "wavelet_fanout_wave_duration_seconds",
        "From the release of a fan-out's wave to all its workloads finishing their rollouts healthy.",
        &metrics.fanout_wave_duration.0,
    );
    header(
        &mut out,
        "wavelet_cache_objects",
        "Objects in the cache, by kind.",
        "gauge",
    );
    let _ = writeln!(
        out,
        "wavelet_cache_objects{{kind=\"config\"}} {}",
        gauges.cached_configs
    );
    let _ = writeln!(
        out,
        "wavelet_cache_objects{{kind=\"workload\"}} {}",
        gauges.cached_workloads
    );
    let _ = writeln!(
        out,
        "wavelet_cache_objects{{kind=\"absent_secret\"}} {}",
        gauges.cached_absent_secrets
    );
    header(
        &mut out,
        "wavelet_work_queue_depth",
        "Keys waiting in a work queue, by mode.",
        "gauge",
    );
    let _ = writeln!(
        out,
        "wavelet_work_queue_depth{{mode=\"hash\"}} {}",
        gauges.hash_queue
    );
    let _ = writeln!(
        out,
        "wavelet_work_queue_depth{{mode=\"delete\"}} {}",
        gauges.delete_queue
    );
    // Issue 27: the rollout backlog.
    gauge(
        &mut out,
        "wavelet_rollouts_waiting",
        "Workloads whose rollout waits for a token of --max-rollouts-per-second (a fan-out larger than --rollout-burst drains at the rate).",
        gauges.rollouts_waiting as u64,
    );
    gauge(
        &mut out,
        "wavelet_adoptions_pending",
        "Workloads seen but not yet reconciled a first time (adopted, when they carry no hash yet): background work, after every change to act on. Ready does not wait for it.",
        gauges.adoptions_pending as u64,
    );
    gauge(
        &mut out,
        "wavelet_secret_reads_pending",
        "Referenced Secrets whose data waits to be read (in bulk at start, then one GET each), retries after a failure included.",
        gauges.secret_reads as u64,
    );
    gauge(
        &mut out,
        "wavelet_state_bytes",
        "Keys and values of the wavelet-state ConfigMap in bytes, as this replica last read, wrote or tried to write it (a ConfigMap holds at most 1048576).",
        gauges.state_bytes,
    );
    gauge(
        &mut out,
        "wavelet_leader",
        "1 while this replica may write (the leader, or leader election off).",
        u64::from(gauges.leader),
    );
    header(
        &mut out,
        "wavelet_leader_transitions_total",
        "Times this replica became the leader.",
        "counter",
    );
    let _ = writeln!(
        out,
        "wavelet_leader_transitions_total {}",
        metrics.leader_transitions.load(Ordering::Relaxed)
    );
    gauge(
        &mut out,
        "wavelet_ready",
        "1 once every initial list is in and the data of the Secrets in use read: changes are acted on from then (adoptions may still be pending).",
        u64::from(gauges.ready),
    );
    // Reloader's metric, under its own name, so its dashboards and alerts keep working; both
    // values are always there, as Reloader initializes them.
    header(
        &mut out,
        "reloader_reload_executed_total",
        "Rollouts (success=true) and failed reconciles (success=false), as Reloader counts its reloads.",
        "counter",
    );
    for success in ["false", "true"] {
        let n = metrics.reloads.get(&[success]);
        let _ = writeln!(
            out,
            "reloader_reload_executed_total{{success=\"{success}\"}} {n}"
        );
    }
    if metrics.count_by_namespace.load(Ordering::Relaxed) {
        counter_vec(
            &mut out,
            "reloader_reload_executed_total_by_namespace",
            "reloader_reload_executed_total by namespace (METRICS_COUNT_BY_NAMESPACE=enabled).",
            &["success", "namespace"],
            &metrics.reloads_by_namespace,
        );
    }
    counter_vec(
        &mut out,
        "wavelet_alerts_total",
        "Alerts on rollout, by result (sent, failed after retries, dropped: the queue was full).",
        &["result"],
        &metrics.alerts,
    );
    if let Some(bytes) = gauges.resident_bytes {
        gauge(
            &mut out,
            "process_resident_memory_bytes",
            "Resident memory size in bytes (VmRSS).",
            bytes,
        );
    }
    if let Some(seconds) = gauges.cpu_seconds {
        header(
            &mut out,
            "process_cpu_seconds_total",
            "User and system CPU time spent, in seconds.",
            "counter",
        );
        let _ = writeln!(out, "process_cpu_seconds_total {seconds}");
    }
    out
}

fn header(out: &mut String, name: &str, help: &str, kind: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

fn gauge(out: &mut String, name: &str, help: &str, value: u64) {
    header(out, name, help, "gauge");
    let _ = writeln!(out, "{name} {value}");
}

fn counter_vec(out: &mut String, name: &str, help: &str, labels: &[&str], vec: &CounterVec) {
    header(out, name, help, "counter");
    for (values, n) in vec.samples() {
        let pairs: Vec<String> = labels
            .iter()
            .zip(&values)
            .map(|(l, v)| format!("{l}=\"{}\"", escape(v)))
            .collect();
        let _ = writeln!(out, "{name}{{{}}} {n}", pairs.join(","));
    }
}

fn histogram(out: &mut String, name: &str, help: &str, h: &Histogram) {
    header(out, name, help, "histogram");
    let data = h.inner.lock().unwrap();
    for (bound, count) in h.bounds.iter().zip(&data.counts) {
        let _ = writeln!(out, "{name}_bucket{{le=\"{bound}\"}} {count}");
    }
    let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {}", data.count);
    let _ = writeln!(out, "{name}_sum {}", data.sum);
    let _ = writeln!(out, "{name}_count {}", data.count);
}

/// Label values escape `\`, `"` and newlines.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_cumulative() {
        let h = Histogram::default();
        h.observe(Duration::from_millis(3));
        h.observe(Duration::from_millis(300));
        let m = Metrics::default();
        let mut out = String::new();
        histogram(&mut out, "x", "help", &h);
        assert!(out.contains("x_bucket{le=\"0.005\"} 1\n"));
        assert!(out.contains("x_bucket{le=\"0.5\"} 2\n"));
        assert!(out.contains("x_bucket{le=\"+Inf\"} 2\n"));
        assert!(out.contains("x_count 2\n"));
        drop(m);
    }

    #[test]
    fn every_family_has_help_and_type_before_its_samples() {
        let m = Metrics::default();
        m.rollouts.inc(&["Deployment", "rolled"]);
        m.watch_relists.inc(&["configmaps", "initial"]);
        m.pod_replacement_retries.inc(&["blocked"]);
        let text = render(
            &m,
            &Gauges {
                requests: vec![(("list", 200), 3)],
                resident_bytes: Some(4096),
                cpu_seconds: Some(0.37),
                ..Gauges::default()
            },
        );
        let mut typed = std::collections::HashSet::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                typed.insert(rest.split(' ').next().unwrap().to_string());
            } else if !line.starts_with('#') {
                let name = line.split(['{', ' ']).next().unwrap();
                let family = ["_bucket", "_sum", "_count"]
                    .iter()
                    .find_map(|s| name.strip_suffix(s).filter(|f| typed.contains(*f)))
                    .unwrap_or(name);
                assert!(typed.contains(family), "no TYPE before {line}");
            }
        }
        assert!(text.contains("wavelet_rollouts_total{kind=\"Deployment\",result=\"rolled\"} 1\n"));
        assert!(text.contains("wavelet_api_requests_total{verb=\"list\",code=\"200\"} 3\n"));
        assert!(text.contains("process_resident_memory_bytes 4096\n"));
        assert!(text.contains("wavelet_pod_replacement_retries_total{reason=\"blocked\"} 1\n"));
        assert!(text.contains(
            "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 0.37\n"
        ));
    }

    #[test]
    fn reloaders_counter_has_both_values_from_the_start_and_its_namespace_variant_only_when_enabled(
    ) {
        let m = Metrics::default();
        let text = render(&m, &Gauges::default());
        assert!(text.contains("reloader_reload_executed_total{success=\"false\"} 0\n"));
        assert!(text.contains("reloader_reload_executed_total{success=\"true\"} 0\n"));
        m.reload_executed(true, "apps");
        assert!(!render(&m, &Gauges::default()).contains("_by_namespace"));
        m.count_by_namespace.store(true, Ordering::Relaxed);
        m.reload_executed(true, "apps");
        m.reload_executed(false, "web");
        let text = render(&m, &Gauges::default());
        assert!(text.contains("reloader_reload_executed_total{success=\"true\"} 2\n"));
        assert!(text.contains(
            "reloader_reload_executed_total_by_namespace{success=\"true\",namespace=\"apps\"} 1\n"
        ));
        assert!(text.contains(
            "reloader_reload_executed_total_by_namespace{success=\"false\",namespace=\"web\"} 1\n"
        ));
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }

    #[test]
    fn reads_vm_rss_in_kilobytes() {
        let status = "Name:\twavelet\nVmRSS:\t    5120 kB\nThreads:\t9\n";
        assert_eq!(parse_vm_rss(status), Some(5120 * 1024));
        assert_eq!(parse_vm_rss("Name: x\n"), None);
    }

    #[test]
    fn cpu_seconds_add_user_and_system_ticks_after_a_command_name_with_spaces() {
        // pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime ...
        let stat = "42 (a (b) c) S 1 42 42 0 -1 4194560 100 0 0 0 250 37 0 0 20 0 9 0";
        assert_eq!(parse_cpu_seconds(stat), Some(2.87));
        assert_eq!(parse_cpu_seconds("42 (x) S 1"), None);
    }

    #[test]
    fn cpu_seconds_of_this_process_are_read() {
        assert!(cpu_seconds().is_some());
    }
}
