//! The Secrets Store CSI driver's pod statuses (`--enable-csi-integration`): the SPEC §6
//! cluster whose 1,000 Deployments each mount a SecretProviderClass (two objects), without
//! pod statuses, with one per Pod of two Pods per Deployment (2,000), and with twenty per
//! Deployment (20,000, where a run's RSS noise weighs ten times less per status). Each is
//! run `WAVELET_BENCH_CSI_RUNS` times (default 3), interleaved, and the median RSS taken;
//! the cost of a pod status is the RSS it adds over the number added.

use std::time::Duration;

use crate::measure::start_and_sync;
use crate::scenario::Cluster;
use crate::table::{mib, seconds, thousands, Table};

/// The target: pod statuses are kept as metadata plus versions.
const PER_STATUS_TARGET_BYTES: f64 = 200.0;

/// Pod statuses per Deployment of each configuration.
pub const PODS_PER_DEPLOYMENT: [usize; 3] = [0, 2, 20];

/// What one run measured: RSS after the sync and after the adoption, the peak (KiB), and
/// the CPU seconds of the sync.
pub type RunSample = (u64, u64, u64, f64);

/// One configuration's runs.
pub struct Runs {
    pub cluster: Cluster,
    pub samples: Vec<RunSample>,
}

/// Which reading of a run.
type Reading = dyn Fn(&RunSample) -> u64;

impl Runs {
    fn median(&self, pick: impl Fn(&RunSample) -> u64) -> u64 {
        let mut values: Vec<u64> = self.samples.iter().map(pick).collect();
        values.sort_unstable();
        values[values.len() / 2]
    }

    fn spread(&self, pick: impl Fn(&RunSample) -> u64) -> u64 {
        let values: Vec<u64> = self.samples.iter().map(pick).collect();
        values.iter().max().unwrap_or(&0) - values.iter().min().unwrap_or(&0)
    }
}

pub fn run(scale: f64, debounce: Duration, repeats: usize, progress: impl Fn(&str)) -> Vec<Runs> {
    let mut all: Vec<Runs> = PODS_PER_DEPLOYMENT
        .iter()
        .map(|&pods| Runs {
            cluster: Cluster::spec_with_csi(scale, pods),
            samples: Vec::new(),
        })
        .collect();
    for round in 1..=repeats.max(1) {
        for runs in &mut all {
            progress(&format!(
                "csi: {} pod statuses, run {round}",
                runs.cluster.pod_statuses()
            ));
            let measured = start_and_sync(&runs.cluster, debounce);
            runs.samples.push((
                measured.sync.at_end.rss_kib,
                measured.adoption.settled.rss_kib,
                measured.adoption.settled.peak_kib,
                measured.sync.at_end.cpu_seconds,
            ));
            // The benchmark's wavelet stops first: a profiled one then starts on its own.
            let fake = measured.fake;
            drop(measured.wavelet);
            crate::process::hold_for_profiling(
                "fake",
                &crate::process::tls_kubeconfig(&fake.url()),
            );
        }
    }
    all
}

pub fn print(all: &[Runs]) {
    println!(
        "\n## Secrets Store CSI driver: the SPEC §6 cluster, each Deployment mounting a SecretProviderClass of two objects, with --enable-csi-integration\n"
    );
    let Some(base) = all.iter().find(|r| r.cluster.pod_statuses() == 0) else {
        return;
    };
    let runs = base.samples.len();
    let mut table = Table::new(&[
        "pod statuses",
        "sync CPU",
        "RSS after sync",
        "peak",
        "RSS after adoption (spread)",
        "per pod status after sync",
        "per pod status after adoption",
    ]);
    let after_sync = |s: &RunSample| s.0;
    let after_adoption = |s: &RunSample| s.1;
    let per_status = |runs: &Runs, kib: &Reading| -> Option<f64> {
        let added = runs.cluster.pod_statuses();
        (added > 0)
            .then(|| (runs.median(kib) as f64 - base.median(kib) as f64) * 1024.0 / added as f64)
    };
    for runs in all {
        let show = |b: Option<f64>| b.map_or(String::new(), |b| format!("{b:.0} B"));
        let cpu = {
            let mut c: Vec<f64> = runs.samples.iter().map(|s| s.3).collect();
            c.sort_by(f64::total_cmp);
            c[c.len() / 2]
        };
        table.row(vec![
            thousands(runs.cluster.pod_statuses()),
            seconds(cpu),
            mib(runs.median(after_sync)),
            mib(runs.median(|s| s.2)),
            format!(
                "{} (±{:.1} MiB)",
                mib(runs.median(after_adoption)),
                runs.spread(after_adoption) as f64 / 2048.0
            ),
            show(per_status(runs, &after_sync)),
            show(per_status(runs, &after_adoption)),
        ]);
    }
    table.print();
    println!(
        "Medians of {runs} runs each. per pod status = (RSS − RSS without pod statuses) / pod \
         statuses. The spread is half the range of the runs' readings; over 2,000 statuses \
         each 0.1 MiB of it is 52 B per status.\n"
    );
    let mut verdicts = Table::new(&["figure", "measured", "target", "ok?"]);
    for runs in all.iter().filter(|r| r.cluster.pod_statuses() > 0) {
        let Some(bytes) = per_status(runs, &after_adoption) else {
            continue;
        };
        let spread = (runs.spread(after_adoption) + base.spread(after_adoption)) as f64 * 1024.0
            / 2.0
            / runs.cluster.pod_statuses() as f64;
        verdicts.figure(
            &format!(
                "memory per pod status, {} statuses",
                thousands(runs.cluster.pod_statuses())
            ),
            format!("{bytes:.0} B (± {spread:.0} B)"),
            "< 200 B",
            Some(bytes < PER_STATUS_TARGET_BYTES),
        );
    }
    verdicts.print();
}
