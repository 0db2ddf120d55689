//! The scaling table: memory per tracked object at 1k, 10k and 100k ConfigMaps+Secrets
//! of 1 KiB and 64 KiB, and whether it is flat in object size; and the churn step:
//! resident memory back at its steady value after namespaces come and go.

use crate::measure::{Adoption, ChurnRound, Sync};
use crate::process::Sample;
use crate::scenario::Cluster;
use crate::table::{mib, seconds, size, thousands, Table};

/// "A few hundred bytes" per tracked object, read generously.
const PER_OBJECT_TARGET_BYTES: f64 = 1024.0;
/// Run-to-run noise of one RSS reading (about ±0.5 MiB), spread over a cell's objects.
const RSS_NOISE_KIB: f64 = 512.0;

/// The churn step's figures.
pub struct ChurnFigures {
    /// The steady cluster the namespaces come and go beside.
    pub cluster: Cluster,
    /// Settled after the adoption, before any churn.
    pub steady: Sample,
    /// `wavelet_cache_objects` then.
    pub steady_cache: Vec<(String, f64)>,
    pub rounds: Vec<ChurnRound>,
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

pub fn print(figures: &ScalingFigures) {
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

pub fn print_churn(figures: &ChurnFigures) {
    let c = &figures.cluster;
    println!(
        "\n## Churn: namespaces created and deleted beside {} ConfigMaps+Secrets of {} \
         ({} Deployments)\n",
        thousands(objects(c)),
        size(c.object_size),
        thousands(c.deployments)
    );
    let absent = |cache: &[(String, f64)]| {
        cache
            .iter()
            .find(|(kind, _)| kind == "kind=\"absent_secret\"")
            .map_or("not exported".into(), |(_, n)| format!("{n:.0}"))
    };
    let mut table = Table::new(&[
        "when",
        "namespaces so far",
        "wall",
        "RSS",
        "RSS − steady",
        "peak",
        "absent Secrets recorded",
    ]);
    table.row(vec![
        "steady, after adoption".into(),
        "0".into(),
        "".into(),
        mib(figures.steady.rss_kib),
        "".into(),
        mib(figures.steady.peak_kib),
        absent(&figures.steady_cache),
    ]);
    let mut so_far = 0;
    for (round, r) in figures.rounds.iter().enumerate() {
        so_far += r.namespaces;
        let grown = r.settled.rss_kib as f64 - figures.steady.rss_kib as f64;
        table.row(vec![
            format!("after round {}", round + 1),
            thousands(so_far),
            seconds(r.wall.as_secs_f64()),
            mib(r.settled.rss_kib),
            format!("{:+.2} MiB", grown / 1024.0),
            mib(r.settled.peak_kib),
            absent(&r.cache),
        ]);
    }
    table.print();
    println!(
        "Each namespace: an opted-in Deployment and the Secret it references, adopted before \
         the namespace is deleted (the fake deletes its Secrets before its Deployments, as \
         namespace deletion may). RSS once the cache is back to its size before the churn \
         and wavelet is idle. One RSS reading moves by about ±0.5 MiB run to run.\n"
    );
    let mut verdicts = Table::new(&["figure", "measured", "target", "ok?"]);
    if let (Some(first), Some(last)) = (figures.rounds.first(), figures.rounds.last()) {
        let between = last.settled.rss_kib as f64 - first.settled.rss_kib as f64;
        verdicts.figure(
            "RSS growth from the first round of churn to the last",
            format!("{:+.2} MiB", between / 1024.0),
            "within the noise (±0.5 MiB): nothing kept per namespace gone",
            Some(between.abs() <= RSS_NOISE_KIB),
        );
    }
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
