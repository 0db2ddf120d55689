//! What a process's resident memory is made of (`WAVELET_BENCH_ONLY=floor`): its mappings
//! summed by kind from `/proc/PID/smaps` (the binary's code, read-only data and data; the
//! anonymous memory), and each thread's stack, found by the stack pointer
//! `/proc/PID/task/TID/syscall` gives for a thread blocked in a system call (readable by
//! the parent that started it). Issue 34 asked what each thread and buffer costs.

use std::collections::BTreeMap;

use crate::table::Table;

/// One mapping of `/proc/PID/smaps`: its address range, permissions, file (if any) and
/// resident KiB.
struct Mapping {
    start: u64,
    end: u64,
    perms: String,
    file: Option<String>,
    rss_kib: u64,
}

fn mappings(pid: u32) -> Vec<Mapping> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap_or_default();
    let mut out: Vec<Mapping> = Vec::new();
    for line in text.lines() {
        let first = line.split_whitespace().next().unwrap_or_default();
        if let Some((start, end)) = first.split_once('-').filter(|_| !first.ends_with(':')) {
            let (Ok(start), Ok(end)) =
                (u64::from_str_radix(start, 16), u64::from_str_radix(end, 16))
            else {
                continue;
            };
            let fields: Vec<&str> = line.split_whitespace().collect();
            out.push(Mapping {
                start,
                end,
                perms: fields.get(1).copied().unwrap_or_default().to_string(),
                file: fields.get(5).map(|f| f.to_string()),
                rss_kib: 0,
            });
        } else if let Some(rss) = line.strip_prefix("Rss:") {
            if let Some(last) = out.last_mut() {
                last.rss_kib = rss
                    .trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse()
                    .unwrap_or(0);
            }
        }
    }
    out
}

/// A thread: its name and the resident KiB of the mapping its stack pointer is in.
struct Thread {
    name: String,
    stack_kib: Option<u64>,
}

fn threads(pid: u32, maps: &[Mapping]) -> Vec<Thread> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut out: Vec<Thread> = tasks
        .flatten()
        .map(|task| {
            let path = task.path();
            let name = std::fs::read_to_string(path.join("comm"))
                .unwrap_or_default()
                .trim()
                .to_string();
            // "nr arg1 … arg6 sp pc" while in a system call.
            let syscall = std::fs::read_to_string(path.join("syscall")).unwrap_or_default();
            let fields: Vec<&str> = syscall.split_whitespace().collect();
            let sp = fields
                .len()
                .checked_sub(2)
                .and_then(|i| u64::from_str_radix(fields[i].trim_start_matches("0x"), 16).ok());
            let stack_kib = sp.and_then(|sp| {
                maps.iter()
                    .find(|m| m.start <= sp && sp < m.end)
                    .map(|m| m.rss_kib)
            });
            Thread { name, stack_kib }
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// Prints the anatomy of `pid`'s resident memory.
pub fn print(pid: u32, title: &str) {
    let maps = mappings(pid);
    let threads = threads(pid, &maps);
    let stacks: u64 = threads.iter().filter_map(|t| t.stack_kib).sum();
    let sum = |f: &dyn Fn(&Mapping) -> bool| -> u64 {
        maps.iter().filter(|m| f(m)).map(|m| m.rss_kib).sum()
    };
    let is_file = |m: &Mapping| m.file.as_deref().is_some_and(|f| f.starts_with('/'));
    let code = sum(&|m| is_file(m) && m.perms.starts_with("r-x"));
    let rodata = sum(&|m| is_file(m) && m.perms.starts_with("r--"));
    let data = sum(&|m| is_file(m) && m.perms.starts_with("rw"));
    let anonymous = sum(&|m| !is_file(m) && m.perms.starts_with("rw"));
    let other = sum(&|m| !is_file(m) && !m.perms.starts_with("rw"));
    println!("\n### {title}\n");
    let mut table = Table::new(&["part", "resident"]);
    let kib = |v: u64| format!("{v} KiB");
    table.row(vec!["all (sum of smaps Rss)".into(), kib(sum(&|_| true))]);
    table.row(vec![
        "the binary's code (r-x; the kernel maps up to 64 KiB around each page touched)".into(),
        kib(code),
    ]);
    table.row(vec![
        "the binary's read-only data (r--)".into(),
        kib(rodata),
    ]);
    table.row(vec![
        "the binary's data (rw-, relocated at start)".into(),
        kib(data),
    ]);
    table.row(vec![
        format!(
            "anonymous (heap, thread stacks): of which {} thread stacks",
            threads.len()
        ),
        format!("{} (stacks {stacks} KiB)", kib(anonymous)),
    ]);
    table.row(vec!["vdso and the like".into(), kib(other)]);
    table.print();
    // Threads of one kind (`worker-0`…`worker-3`) on one line.
    let mut kinds: BTreeMap<String, (usize, u64)> = BTreeMap::new();
    for t in &threads {
        let kind = t.name.trim_end_matches(|c: char| c.is_ascii_digit());
        let entry = kinds.entry(kind.to_string()).or_default();
        entry.0 += 1;
        entry.1 += t.stack_kib.unwrap_or(0);
    }
    let mut table = Table::new(&["thread", "how many", "stack resident, KiB (all of them)"]);
    for (kind, (n, kib)) in kinds {
        table.row(vec![kind, n.to_string(), kib.to_string()]);
    }
    table.print();
}
