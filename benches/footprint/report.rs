//! The printed tables: figure | measured | target | ok? for the SPEC §6 scenario, the
//! requests by verb, and the scaling table with memory per tracked object.

use std::time::Duration;

use crate::calls::{Call, Verb};
use crate::measure::{Adoption, Changes, Sync};
use crate::process::{BinaryFacts, Sample};
use crate::scenario::Cluster;

const MIB: f64 = 1024.0 * 1024.0;
/// "A few hundred bytes" per tracked object, read generously.
const PER_OBJECT_TARGET_BYTES: f64 = 1024.0;
/// Run-to-run noise of one RSS reading (about ±0.5 MiB), spread over a cell's objects.
const RSS_NOISE_KIB: f64 = 512.0;

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

/// One (object count, object size) cell of the scaling table.
pub struct Cell {
    pub cluster: Cluster,
    pub outcome: CellOutcome,
}

pub enum CellOutcome {
    Measured { sync: Sync, adoption: Adoption },
    Skipped(String),
}

pub struct ScalingFigures {
    /// wavelet settled against a cluster with nothing to track.
    pub baseline: Sample,
    pub cells: Vec<Cell>,
}

/// A table printed as aligned Markdown, so that it can be pasted as is.
struct Table {
    rows: Vec<Vec<String>>,
}

impl Table {
    fn new(header: &[&str]) -> Table {
        Table {
            rows: vec![header.iter().map(|h| h.to_string()).collect()],
        }
    }

    fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// A figure with its target; `ok` is `None` for figures without a target.
    fn figure(&mut self, figure: &str, measured: String, target: &str, ok: Option<bool>) {
        let ok = ok.map_or("", |ok| if ok { "yes" } else { "NO" });
        self.row(vec![figure.into(), measured, target.into(), ok.into()]);
    }

    fn print(&self) {
        let columns = self.rows.iter().map(Vec::len).max().unwrap_or(0);
        let width = |c: usize| {
            self.rows
                .iter()
                .filter_map(|r| r.get(c))
                .map(|cell| cell.chars().count())
                .max()
                .unwrap_or(0)
        };
        let widths: Vec<usize> = (0..columns).map(width).collect();
        let line = |cells: &[String]| {
            let padded: Vec<String> = widths
                .iter()
                .enumerate()
                .map(|(c, w)| format!("{:<w$}", cells.get(c).map_or("", String::as_str)))
                .collect();
            println!("| {} |", padded.join(" | "));
        };
        line(&self.rows[0]);
        let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
        line(&rule);
        for row in &self.rows[1..] {
            line(row);
        }
        println!();
    }
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

fn within_mib(kib: u64, target_mib: f64) -> Option<bool> {
    Some(kib as f64 / 1024.0 <= target_mib)
}

fn seconds(s: f64) -> String {
    format!("{s:.2} s")
}

fn ms(ms: f64) -> String {
    format!("{ms:.2} ms")
}

fn wall(d: Duration) -> String {
    format!("{} ms", d.as_millis())
}

/// `12345` → `12,345`.
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn size(bytes: usize) -> String {
    if bytes >= 1024 && bytes % 1024 == 0 {
        format!("{} KiB", bytes / 1024)
    } else {
        format!("{bytes} B")
    }
}

/// Nearest-rank percentile of unsorted values.
fn percentile(values: &[f64], p: f64) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted
        .get(rank.clamp(1, sorted.len().max(1)) - 1)
        .copied()
        .unwrap_or(f64::NAN)
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
        "≤ 3 MiB, static, stripped",
        Some(binary.bytes as f64 <= 3.0 * MIB && binary.is_static && binary.is_stripped),
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
    table.figure(
        "resident memory after the initial sync (VmRSS)",
        mib(sync.at_end.rss_kib),
        "≤ 12 MiB",
        within_mib(sync.at_end.rss_kib, 12.0),
    );
    table.figure(
        "peak resident memory during the sync (VmHWM)",
        mib(sync.at_end.peak_kib),
        "≤ 24 MiB",
        within_mib(sync.at_end.peak_kib, 24.0),
    );
    table.figure(
        &format!(
            "resident memory after adopting all {} workloads, idle",
            thousands(adoption.adoptions)
        ),
        mib(adoption.settled.rss_kib),
        "≤ 12 MiB",
        within_mib(adoption.settled.rss_kib, 12.0),
    );
    table.figure(
        "peak resident memory up to then (VmHWM)",
        mib(adoption.settled.peak_kib),
        "≤ 24 MiB",
        within_mib(adoption.settled.peak_kib, 24.0),
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

fn latency_rows(table: &mut Table, kind: &str, changes: &Changes) {
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

pub fn print_scaling(figures: &ScalingFigures) {
    println!(
        "\n## Scaling: one Deployment per 10 ConfigMaps+Secrets, each referencing one of each\n"
    );
    let base = &figures.baseline;
    println!(
        "baseline (empty cluster, idle): {} resident, {} peak\n",
        mib(base.rss_kib),
        mib(base.peak_kib)
    );
    let mut table = Table::new(&[
        "ConfigMaps+Secrets",
        "object size",
        "Deployments",
        "sync CPU",
        "fake's CPU",
        "RSS after sync",
        "peak",
        "RSS after adoption",
        "per object after sync",
        "per object after adoption",
        "per additional object",
    ]);
    for cell in &figures.cells {
        table.row(scaling_row(cell, figures));
    }
    table.print();
    for cell in &figures.cells {
        if let CellOutcome::Skipped(why) = &cell.outcome {
            println!(
                "skipped: {} objects of {}: {why}.",
                thousands(objects(&cell.cluster)),
                size(cell.cluster.object_size)
            );
        }
    }
    println!(
        "per object = (RSS − baseline RSS) / ConfigMaps+Secrets; per additional object = \
         RSS growth after adoption from the row above of the same size / objects added. Both \
         include the Deployments (one per 10 objects). One RSS reading moves by about \
         ±0.5 MiB run to run: ±{:.0} B per object at 1,000 objects.\n",
        RSS_NOISE_KIB * 1024.0 / 1000.0
    );
    let mut verdicts = Table::new(&["figure", "measured", "target", "ok?"]);
    marginal_verdicts(&mut verdicts, figures);
    verdicts.print();
}

fn objects(cluster: &Cluster) -> usize {
    cluster.configmaps + cluster.secrets
}

fn scaling_row(cell: &Cell, figures: &ScalingFigures) -> Vec<String> {
    let c = &cell.cluster;
    let mut row = vec![
        thousands(objects(c)),
        size(c.object_size),
        thousands(c.deployments),
    ];
    match &cell.outcome {
        CellOutcome::Skipped(_) => row.push("skipped (see below)".into()),
        CellOutcome::Measured { sync, adoption } => {
            let per_object = |s: &Sample| {
                let above_baseline = s.rss_kib as f64 - figures.baseline.rss_kib as f64;
                above_baseline * 1024.0 / objects(c).max(1) as f64
            };
            let marginal = marginal_bytes(figures, cell).map(|(_, bytes)| bytes);
            row.extend([
                seconds(sync.at_end.cpu_seconds),
                seconds(sync.fake_cpu_seconds),
                mib(sync.at_end.rss_kib),
                mib(adoption.settled.peak_kib),
                mib(adoption.settled.rss_kib),
                format!("{:.0} B", per_object(&sync.at_end)),
                format!("{:.0} B", per_object(&adoption.settled)),
                marginal.map_or("".into(), |b| format!("{b:.0} B")),
            ]);
        }
    }
    row
}

/// RSS after adoption, in KiB, of a measured cell.
fn adopted_kib(cell: &Cell) -> Option<u64> {
    match &cell.outcome {
        CellOutcome::Measured { adoption, .. } => Some(adoption.settled.rss_kib),
        CellOutcome::Skipped(_) => None,
    }
}

/// Bytes of RSS per object added since the largest smaller measured cell of the same
/// object size, with that cell's object count.
fn marginal_bytes(figures: &ScalingFigures, cell: &Cell) -> Option<(usize, f64)> {
    let rss = adopted_kib(cell)? as f64;
    let previous = figures
        .cells
        .iter()
        .filter(|p| p.cluster.object_size == cell.cluster.object_size)
        .filter(|p| objects(&p.cluster) < objects(&cell.cluster))
        .filter(|p| adopted_kib(p).is_some())
        .max_by_key(|p| objects(&p.cluster))?;
    let added = (objects(&cell.cluster) - objects(&previous.cluster)) as f64;
    let grown = rss - adopted_kib(previous)? as f64;
    Some((objects(&previous.cluster), grown * 1024.0 / added))
}

/// Per step in object count: a few hundred bytes per additional object, the same at
/// 1 KiB and at 64 KiB.
fn marginal_verdicts(table: &mut Table, figures: &ScalingFigures) {
    let mut steps: Vec<(usize, usize, usize, f64)> = figures
        .cells
        .iter()
        .filter_map(|cell| {
            let (from, bytes) = marginal_bytes(figures, cell)?;
            Some((
                from,
                objects(&cell.cluster),
                cell.cluster.object_size,
                bytes,
            ))
        })
        .collect();
    steps.sort_by_key(|&(from, to, size, _)| (from, to, size));
    let mut pairs: Vec<(usize, usize)> = steps.iter().map(|&(f, t, _, _)| (f, t)).collect();
    pairs.dedup();
    for (from, to) in pairs {
        let at_step: Vec<(usize, f64)> = steps
            .iter()
            .filter(|&&(f, t, _, _)| (f, t) == (from, to))
            .map(|&(_, _, size, bytes)| (size, bytes))
            .collect();
        let measured: Vec<String> = at_step
            .iter()
            .map(|(s, b)| format!("{b:.0} B at {}", size(*s)))
            .collect();
        let bytes: Vec<f64> = at_step.iter().map(|(_, b)| *b).collect();
        let few_hundred = bytes.iter().all(|b| *b <= PER_OBJECT_TARGET_BYTES);
        let noise = 2.0 * RSS_NOISE_KIB * 1024.0 / (to - from) as f64;
        table.figure(
            &format!(
                "memory per additional tracked object, {} → {} objects",
                thousands(from),
                thousands(to)
            ),
            measured.join(", "),
            "a few hundred bytes (≤ 1 KiB), flat in object size",
            Some(few_hundred && is_flat(&bytes, noise)),
        );
    }
}

/// Flat: the largest and smallest differ by at most 25% of the smallest plus the noise.
fn is_flat(bytes: &[f64], noise: f64) -> bool {
    let max = bytes.iter().copied().fold(f64::MIN, f64::max);
    let min = bytes.iter().copied().fold(f64::MAX, f64::min);
    max - min <= 0.25 * min.max(0.0) + noise
}
