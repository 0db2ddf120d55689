//! The folders of `src/` are layers: each one uses only the layers below it, so a reader
//! who opens a folder knows what it may change without touching what sits above. The
//! table below is the one declaration of the layers; the book's design page
//! (`docs/src/design.md`) draws the same table (checked here too).
//!
//! Every `crate::` path in `src/` (in `use` lines, grouped `use crate::{..}` lines and
//! paths in code; comments aside) is an edge from the file's top-level module (its folder,
//! or its file for a single-file module) to the module it names. An edge to the same
//! layer or a higher one fails the test, naming the file and line; with every edge going
//! strictly down, no cycle between folders can form. `super::super::` paths (which could
//! climb out of a folder unseen) are refused outright.

use std::fs;
use std::path::{Path, PathBuf};

/// Bottom to top. A module may use the modules of the layers below its own, never one of
/// its own layer (modules on one layer are peers that know nothing of each other) nor of
/// a layer above.
/// The book's page that draws the layers, after its `<!-- layers -->` marker.
const DESIGN_PAGE: &str = "docs/src/design.md";

const LAYERS: &[(&str, &[&str])] = &[
    ("foundations", &["error", "time", "stop", "testing"]),
    ("vocabulary", &["selector", "window", "annotations"]),
    ("objects", &["objects"]),
    ("config", &["config"]),
    ("client", &["client"]),
    ("ops", &["ops"]),
    ("watch", &["watch"]),
    ("model", &["model"]),
    ("modes", &["hashmode", "deletemode"]),
    ("migrate", &["migrate", "migrate_reloader"]),
    ("impact", &["impact"]),
    ("wiring", &["controller", "commands"]),
    ("entry", &["lib", "main"]),
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn layer_of(module: &str) -> Option<usize> {
    LAYERS
        .iter()
        .position(|(_, modules)| modules.contains(&module))
}

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file of `src/` belongs to: `watch` for `src/watch/queue.rs`,
/// `time` for `src/time.rs`.
fn module_of(relative: &Path) -> String {
    let mut parts = relative.components();
    let first = parts
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy()
        .to_string();
    match first.strip_suffix(".rs") {
        Some(stem) => stem.to_string(),
        None => first,
    }
}

/// One use of a module by another.
#[derive(Debug)]
struct Edge {
    from: String,
    to: String,
    file: String,
    line: usize,
    text: String,
}

/// The line without its `//` comment (string literals holding `//` do not name modules,
/// so cutting there is safe for our purpose).
fn code_of(line: &str) -> &str {
    match line.find("//") {
        Some(i) => &line[..i],
        None => line,
    }
}

/// The top-level module names a line's paths start with: `crate::x::..`, and each item of
/// `crate::{x::.., y}` (the grouped form may span lines: `open_group` carries it over).
/// In `main.rs` the library is named `wavelet::`.
fn named_modules(code: &str, prefix: &str, open_group: &mut bool, out: &mut Vec<String>) {
    let mut rest = code;
    if *open_group {
        match rest.find('}') {
            Some(end) => {
                group_items(&rest[..end], out);
                *open_group = false;
                rest = &rest[end + 1..];
            }
            None => {
                group_items(rest, out);
                return;
            }
        }
    }
    while let Some(at) = rest.find(prefix) {
        // A path segment must start the match (`wavelet::` inside `my_wavelet::` is not it).
        let before = rest[..at].chars().next_back();
        let after = &rest[at + prefix.len()..];
        rest = after;
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        if let Some(group) = after.strip_prefix('{') {
            match group.find('}') {
                Some(end) => group_items(&group[..end], out),
                None => {
                    group_items(group, out);
                    *open_group = true;
                    return;
                }
            }
        } else {
            let name: String = after
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                out.push(name);
            }
        }
    }
}

/// The first segment of each item of a `{a::b, c, d::{e, f}}` group (nested groups are
/// flattened; only their first segments matter).
fn group_items(group: &str, out: &mut Vec<String>) {
    let mut depth = 0;
    let mut item_start = true;
    let mut current = String::new();
    for c in group.chars() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                if item_start && !current.is_empty() && current != "self" {
                    out.push(current.clone());
                }
                item_start = true;
                current.clear();
                continue;
            }
            _ => {}
        }
        if depth == 0 && item_start {
            if c.is_alphanumeric() || c == '_' {
                current.push(c);
            } else if !current.is_empty() {
                if current != "self" {
                    out.push(current.clone());
                }
                current.clear();
                item_start = false;
            }
        }
    }
    if item_start && !current.is_empty() && current != "self" {
        out.push(current);
    }
}

/// Every edge in `src/`, and every `super::super::` path.
fn edges() -> (Vec<Edge>, Vec<String>) {
    let root = src();
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let mut edges = Vec::new();
    let mut climbing = Vec::new();
    for path in files {
        let relative = path.strip_prefix(&root).unwrap().to_path_buf();
        let from = module_of(&relative);
        let prefix = if from == "main" {
            "wavelet::"
        } else {
            "crate::"
        };
        let text = fs::read_to_string(&path).unwrap();
        let mut open_group = false;
        for (i, line) in text.lines().enumerate() {
            let code = code_of(line);
            let file = format!("src/{}", relative.display());
            if code.contains("super::super::") {
                climbing.push(format!("{file}:{}: {}", i + 1, line.trim()));
            }
            let mut names = Vec::new();
            named_modules(code, prefix, &mut open_group, &mut names);
            for to in names {
                if to != from {
                    edges.push(Edge {
                        from: from.clone(),
                        to,
                        file: file.clone(),
                        line: i + 1,
                        text: line.trim().to_string(),
                    });
                }
            }
        }
    }
    (edges, climbing)
}

#[test]
fn every_module_of_src_is_on_a_layer() {
    let root = src();
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let mut unplaced: Vec<String> = files
        .iter()
        .map(|p| module_of(p.strip_prefix(&root).unwrap()))
        .filter(|m| layer_of(m).is_none())
        .collect();
    unplaced.dedup();
    assert!(
        unplaced.is_empty(),
        "modules of src/ on no layer: {unplaced:?}; add each to LAYERS in tests/architecture.rs \
         (and to the layer table of {DESIGN_PAGE})"
    );
}

#[test]
fn every_module_uses_only_the_layers_below_it() {
    let (edges, climbing) = edges();
    let mut wrong = Vec::new();
    for edge in &edges {
        let (Some(from), Some(to)) = (layer_of(&edge.from), layer_of(&edge.to)) else {
            // Not a module of ours (`crate::` inside a macro of a dependency, say), or one
            // on no layer, which the test above reports.
            continue;
        };
        if to >= from {
            let why = if to == from {
                format!(
                    "peers on the layer '{}' know nothing of each other",
                    LAYERS[from].0
                )
            } else {
                format!(
                    "'{}' is on the layer '{}', above '{}' ('{}')",
                    edge.to, LAYERS[to].0, edge.from, LAYERS[from].0
                )
            };
            wrong.push(format!(
                "{}:{}: {} uses {}: {why}\n    {}",
                edge.file, edge.line, edge.from, edge.to, edge.text
            ));
        }
    }
    for line in &climbing {
        wrong.push(format!(
            "{line}\n    super::super:: climbs out of a folder; name the module with crate::"
        ));
    }
    assert!(
        wrong.is_empty(),
        "{} uses that go up or across a layer (layers, bottom to top: {}):\n{}",
        wrong.len(),
        LAYERS
            .iter()
            .map(|(name, modules)| format!("{name} [{}]", modules.join(", ")))
            .collect::<Vec<_>>()
            .join(" < "),
        wrong.join("\n")
    );
}

#[test]
fn the_design_page_draws_the_same_layers() {
    let page = fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(DESIGN_PAGE))
        .expect(DESIGN_PAGE);
    let block = page
        .split("<!-- layers -->")
        .nth(1)
        .expect("the book's design page has the <!-- layers --> marker")
        .split("```")
        .nth(1)
        .expect("a ``` block follows the marker");
    // A header line naming the columns, then one line per layer, top to bottom:
    // `name   module, module/   what it is`, each column where the header's starts.
    let mut lines = block.lines().skip(1).filter(|l| !l.trim().is_empty());
    let header = lines.next().expect("the layer table has a header line");
    let modules_at = header.find("modules").expect("a 'modules' column");
    let what_at = header.find("what").expect("a 'what' column");
    let mut drawn: Vec<(String, Vec<String>)> = Vec::new();
    for line in lines {
        let name = line[..modules_at].trim().to_string();
        let modules = line[modules_at..what_at.min(line.len())]
            .split(',')
            .map(|m| m.trim().trim_end_matches('/').to_string())
            .filter(|m| !m.is_empty())
            .collect();
        drawn.push((name, modules));
    }
    drawn.reverse();
    let declared: Vec<(String, Vec<String>)> = LAYERS
        .iter()
        .map(|(name, modules)| {
            (
                name.to_string(),
                modules.iter().map(|m| m.to_string()).collect(),
            )
        })
        .collect();
    assert_eq!(
        drawn, declared,
        "the layer table of docs/src/design.md (top to bottom) differs from LAYERS in tests/architecture.rs"
    );
}

#[test]
fn the_edge_reader_sees_every_form_of_path() {
    let mut names = Vec::new();
    let mut open = false;
    named_modules(
        "use crate::a::B; let x = crate::b::f(); notcrate::c::D",
        "crate::",
        &mut open,
        &mut names,
    );
    named_modules(
        "use crate::{d::E, e, self, f::{g, h}};",
        "crate::",
        &mut open,
        &mut names,
    );
    named_modules("use crate::{", "crate::", &mut open, &mut names);
    assert!(open);
    named_modules("    i::J,", "crate::", &mut open, &mut names);
    named_modules("};", "crate::", &mut open, &mut names);
    assert!(!open);
    assert_eq!(names, ["a", "b", "d", "e", "f", "i"]);
}
