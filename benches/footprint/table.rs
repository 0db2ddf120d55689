//! Aligned Markdown tables and the number formats the report uses.

use std::time::Duration;

/// A table printed as aligned Markdown, so that it can be pasted as is.
pub struct Table {
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(header: &[&str]) -> Table {
        Table {
            rows: vec![header.iter().map(|h| h.to_string()).collect()],
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// A figure with its target; `ok` is `None` for figures without a target.
    /// A memory figure in KiB against a limit in MiB.
    pub fn memory(&mut self, figure: &str, kib: u64, limit_mib: f64) {
        let ok = kib as f64 / 1024.0 <= limit_mib;
        self.figure(figure, mib(kib), &format!("≤ {limit_mib} MiB"), Some(ok));
    }

    pub fn figure(&mut self, figure: &str, measured: String, target: &str, ok: Option<bool>) {
        let ok = ok.map_or("", |ok| if ok { "yes" } else { "NO" });
        self.row(vec![figure.into(), measured, target.into(), ok.into()]);
    }

    pub fn print(&self) {
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

pub const MIB: f64 = 1024.0 * 1024.0;

pub fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

pub fn seconds(s: f64) -> String {
    format!("{s:.2} s")
}

pub fn ms(ms: f64) -> String {
    format!("{ms:.2} ms")
}

pub fn wall(d: Duration) -> String {
    format!("{} ms", d.as_millis())
}

/// `12345` → `12,345`.
pub fn thousands(n: usize) -> String {
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

pub fn size(bytes: usize) -> String {
    if bytes >= 1024 && bytes % 1024 == 0 {
        format!("{} KiB", bytes / 1024)
    } else {
        format!("{bytes} B")
    }
}

/// Nearest-rank percentile of unsorted values.
pub fn percentile(values: &[f64], p: f64) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted
        .get(rank.clamp(1, sorted.len().max(1)) - 1)
        .copied()
        .unwrap_or(f64::NAN)
}
