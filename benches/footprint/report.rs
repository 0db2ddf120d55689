//! The report of the SPEC §6 scenario: figure | measured | target | ok?, and the API
//! requests by verb.

use std::time::Duration;

use crate::calls::{Call, Verb};
use crate::measure::{Adoption, Changes, Sync};
use crate::process::BinaryFacts;
use crate::scenario::Cluster;
use crate::table::{ms, percentile, seconds, size, thousands, wall, Table, MIB};

/// Everything measured in the SPEC §6 scenario.
pub struct DefaultFigures {
    pub cluster: Cluster,
    pub load: Duration,
    pub sync: Sync,
    pub adoption: Adoption,
    pub configmap_changes: Changes,
    pub secret_changes: Changes,
    pub debounce: Duration,
}

fn per_change(changes: &Changes, calls: usize) -> f64 {
    calls as f64 / changes.count().max(1) as f64
}

pub fn print_default(figures: &DefaultFigures, binary: &BinaryFacts) {
    let c = &figures.cluster;
    println!(
        "\n## wavelet footprint: {} opted-in Deployments ({} ConfigMaps + {} Secret each), \
         {} ConfigMaps and {} Secrets of {}, {} Helm-release Secrets of {}, in {}\n",
        thousands(c.deployments),
        c.configmaps_per_deployment,
        c.secrets_per_deployment,
        thousands(c.configmaps),
        thousands(c.secrets),
        size(c.object_size),
        thousands(c.helm_secrets),
        size(c.helm_secret_size),
        match c.namespaces() {
            1 => "1 namespace".to_string(),
            n => format!("{n} namespaces"),
        }
    );
    println!("binary: {}", binary.path.display());
    println!(
        "fake API server loaded with {} objects ({:.0} MiB of ConfigMap/Secret data) in {}\n",
        thousands(c.config_objects() + c.deployments),
        c.config_bytes() as f64 / MIB,
        wall(figures.load)
    );
    let mut table = Table::new(&["figure", "measured", "target", "ok?"]);
    binary_rows(&mut table, binary);
    memory_rows(&mut table, figures);
    latency_rows(&mut table, "ConfigMap", &figures.configmap_changes);
    latency_rows(&mut table, "Secret", &figures.secret_changes);
    calls_rows(&mut table, "ConfigMap", &figures.configmap_changes);
    calls_rows(&mut table, "Secret", &figures.secret_changes);
    table.print();
    print_requests(figures);
}

fn binary_rows(table: &mut Table, binary: &BinaryFacts) {
    let kind = match (binary.is_static, binary.is_stripped) {
        (true, true) => "static, stripped",
        (true, false) => "static, NOT stripped",
        (false, true) => "dynamically linked, stripped",
        (false, false) => "dynamically linked, NOT stripped",
    };
    table.figure(
        "binary size",
        format!("{:.2} MiB ({kind})", binary.bytes as f64 / MIB),
        "≤ 3.25 MiB, static, stripped",
        Some(binary.bytes as f64 <= 3.25 * MIB && binary.is_static && binary.is_stripped),
    );
}

fn memory_rows(table: &mut Table, figures: &DefaultFigures) {
    let (sync, adoption) = (&figures.sync, &figures.adoption);
    table.figure(
        "initial sync: CPU (user + system)",
        seconds(sync.at_end.cpu_seconds),
        "≤ 0.5 s",
        Some(sync.at_end.cpu_seconds <= 0.5),
    );
    table.figure("initial sync: wall time (noisy)", wall(sync.wall), "", None);
    table.figure(
        "fake API server's CPU meanwhile (for comparison)",
        seconds(sync.fake_cpu_seconds),
        "",
        None,
    );
    table.memory(
        "resident memory after the initial sync (VmRSS)",
        sync.at_end.rss_kib,
        12.0,
    );
    table.memory(
        "peak resident memory during the sync (VmHWM)",
        sync.at_end.peak_kib,
        24.0,
    );
    table.memory(
        &format!(
            "resident memory after adopting all {} workloads, idle",
            thousands(adoption.adoptions)
        ),
        adoption.settled.rss_kib,
        12.0,
    );
    table.memory(
        "peak resident memory up to then (VmHWM)",
        adoption.settled.peak_kib,
        24.0,
    );
    table.figure(
        "adoption: wall time after the sync (noisy); CPU",
        format!(
            "{}; {}",
            wall(adoption.wall),
            seconds(adoption.settled.cpu_seconds - sync.at_end.cpu_seconds)
        ),
        "",
        None,
    );
    table.figure(
        "adoption: rollouts caused",
        adoption.rollouts.to_string(),
        "0",
        Some(adoption.rollouts == 0),
    );
    table.figure(
        "debounce window (--debounce), not counted below",
        wall(figures.debounce),
        "",
        None,
    );
}

pub fn latency_rows(table: &mut Table, kind: &str, changes: &Changes) {
    let values = &changes.beyond_debounce_ms;
    let median = percentile(values, 50.0);
    table.figure(
        &format!(
            "{kind} change → PATCH beyond the debounce: median of {}",
            changes.count()
        ),
        ms(median),
        "≤ 5 ms",
        Some(median <= 5.0),
    );
    table.figure(
        &format!("{kind} change → PATCH beyond the debounce: p90 / p99 / max"),
        format!(
            "{} / {} / {}",
            ms(percentile(values, 90.0)),
            ms(percentile(values, 99.0)),
            ms(percentile(values, 100.0))
        ),
        "",
        None,
    );
}

fn calls_rows(table: &mut Table, kind: &str, changes: &Changes) {
    let mean = |verb| per_change(changes, changes.calls.of_verb(verb));
    let patches = per_change(
        changes,
        changes.calls.get(&Call {
            verb: Verb::Patch,
            resource: "deployments".into(),
        }),
    );
    table.figure(
        &format!("{kind} change: PATCHes of the one affected workload"),
        format!("{patches:.2}"),
        "1",
        Some(patches == 1.0 && mean(Verb::Patch) == 1.0),
    );
    table.figure(
        &format!("{kind} change: LIST / GET / POST (Events)"),
        format!(
            "{:.2} / {:.2} / {:.2}",
            mean(Verb::List),
            mean(Verb::Get),
            mean(Verb::Post)
        ),
        "0 / ≤ 1 / ≤ 1",
        Some(mean(Verb::List) == 0.0 && mean(Verb::Get) <= 1.0 && mean(Verb::Post) <= 1.0),
    );
}

/// Requests by verb and resource: the initial sync in total, the changes on average.
fn print_requests(figures: &DefaultFigures) {
    let (sync, started, cms, secrets) = (
        &figures.sync.calls,
        &figures.adoption.calls,
        &figures.configmap_changes,
        &figures.secret_changes,
    );
    let mut all = started.clone();
    all.add(&cms.calls);
    all.add(&secrets.calls);
    let mut table = Table::new(&[
        "request",
        "initial sync (total)",
        "start through adoption (total)",
        "per ConfigMap change (mean)",
        "per Secret change (mean)",
    ]);
    let mean = |changes: &Changes, call: &Call| {
        format!("{:.2}", per_change(changes, changes.calls.get(call)))
    };
    for call in all.calls() {
        table.row(vec![
            call.to_string(),
            thousands(sync.get(call)),
            thousands(started.get(call)),
            mean(cms, call),
            mean(secrets, call),
        ]);
    }
    table.row(vec![
        "all".into(),
        thousands(sync.total()),
        thousands(started.total()),
        format!("{:.2}", per_change(cms, cms.calls.total())),
        format!("{:.2}", per_change(secrets, secrets.calls.total())),
    ]);
    println!(
        "API requests wavelet sent, as the fake server counted them (LIST: GET of a \
         collection, one per page; the sync ends at wavelet's `initial sync complete` line):\n"
    );
    table.print();
}
