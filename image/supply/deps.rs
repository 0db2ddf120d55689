//! The crates a binary is built from: the graph `cargo tree --prefix depth` prints, joined
//! with each crate's source and checksum from `Cargo.lock`.
//!
//! `build.rs` runs `cargo tree -e normal --target TARGET --prefix depth --format
//! "|{l}|{p}"`: one line per edge, the depth first (nothing with `--prefix none`), then
//! the licence, then the package (`name vVERSION`, ` (proc-macro)` for a procedural macro,
//! ` (PATH or URL)` for a crate that is not from a registry, ` (*)` where a subtree was
//! printed before). A line's parent is the last line one level up. The `|` after the depth
//! keeps a licence that starts with a digit (`0BSD`) apart from it.

use std::collections::{BTreeMap, BTreeSet};

/// The `format` the commands in this module expect from `cargo tree`.
pub const TREE_FORMAT: &str = "|{l}|{p}";

/// crates.io, as `Cargo.lock` names it (git index and sparse index).
const CRATES_IO: [&str; 2] = [
    "registry+https://github.com/rust-lang/crates.io-index",
    "sparse+https://index.crates.io/",
];

/// One `[[package]]` of `Cargo.lock`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Locked {
    pub name: String,
    pub version: String,
    /// `registry+…`, `sparse+…`, `git+…`; none for a path (the root package, or a path
    /// dependency).
    pub source: Option<String>,
    /// The SHA-256 of the `.crate` file, for crates from a registry.
    pub checksum: Option<String>,
}

/// Where a crate comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    CratesIo,
    /// Another registry, as `Cargo.lock` names it.
    Registry(String),
    /// A git repository, as `Cargo.lock` names it (URL and commit).
    Git(String),
    /// A directory: the root package or a path dependency.
    Path,
}

impl Source {
    pub fn of(locked: &Locked) -> Source {
        match locked.source.as_deref() {
            None => Source::Path,
            Some(s) if CRATES_IO.contains(&s) => Source::CratesIo,
            Some(s) if s.starts_with("git+") => Source::Git(s.to_string()),
            Some(s) => Source::Registry(s.to_string()),
        }
    }
}

/// One crate of the graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Crate {
    pub name: String,
    pub version: String,
    /// The SPDX expression of its `license` field; empty when it has only a `license-file`.
    pub licence: String,
    pub source: Source,
    pub checksum: Option<String>,
    pub proc_macro: bool,
    /// Linked into the binary: reached from the root without passing through a procedural
    /// macro (a proc-macro and what only it uses run in the compiler, not in the binary).
    pub linked: bool,
    /// Indices into [`Graph::crates`], ascending.
    pub dependencies: Vec<usize>,
}

impl Crate {
    /// The package URL of a crates.io crate (`pkg:cargo/NAME@VERSION`).
    pub fn purl(&self) -> Option<String> {
        (self.source == Source::CratesIo)
            .then(|| format!("pkg:cargo/{}@{}", self.name, self.version))
    }
}

/// The crates of one build, sorted by name and version, with their dependency edges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Graph {
    pub crates: Vec<Crate>,
    /// Index of the package being built.
    pub root: usize,
}

/// The packages of `Cargo.lock`, in its order.
pub fn parse_lock(text: &str) -> Vec<Locked> {
    let mut packages = Vec::new();
    let mut current: Option<Locked> = None;
    for line in text.lines() {
        if line.trim() == "[[package]]" {
            packages.extend(current.take());
            current = Some(Locked {
                name: String::new(),
                version: String::new(),
                source: None,
                checksum: None,
            });
            continue;
        }
        if line.starts_with('[') {
            packages.extend(current.take());
            continue;
        }
        let (Some(package), Some((key, value))) = (current.as_mut(), line.split_once(" = ")) else {
            continue;
        };
        let Some(value) = value.strip_prefix('"').and_then(|v| v.strip_suffix('"')) else {
            continue;
        };
        match key {
            "name" => package.name = value.to_string(),
            "version" => package.version = value.to_string(),
            "source" => package.source = Some(value.to_string()),
            "checksum" => package.checksum = Some(value.to_string()),
            _ => {}
        }
    }
    packages.extend(current);
    packages
}

/// One line of `cargo tree --format "|{l}|{p}"` (depth 0 with `--prefix none`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeLine {
    pub depth: usize,
    pub licence: String,
    pub name: String,
    pub version: String,
    pub proc_macro: bool,
}

pub fn parse_tree_line(line: &str) -> Result<TreeLine, String> {
    let bad = || format!("cannot read this line of `cargo tree`: {line:?}");
    let (depth, rest) = line.split_once('|').ok_or_else(bad)?;
    let depth = match depth {
        "" => 0,
        digits => digits.parse().map_err(|_| bad())?,
    };
    let (licence, package) = rest.split_once('|').ok_or_else(bad)?;
    let mut words = package.split(' ');
    let name = words.next().filter(|n| !n.is_empty()).ok_or_else(bad)?;
    let version = words
        .next()
        .and_then(|v| v.strip_prefix('v'))
        .filter(|v| !v.is_empty())
        .ok_or_else(bad)?;
    Ok(TreeLine {
        depth,
        licence: licence.trim().to_string(),
        name: name.to_string(),
        version: version.to_string(),
        proc_macro: package.contains(" (proc-macro)"),
    })
}

/// Every crate (name, version, licence) that `cargo tree --format "|{l}|{p}"` printed,
/// once each, sorted.
pub fn listed(tree: &str) -> Result<Vec<TreeLine>, String> {
    let mut seen = BTreeMap::new();
    for line in tree.lines().filter(|l| !l.trim().is_empty()) {
        let line = parse_tree_line(line)?;
        seen.entry((line.name.clone(), line.version.clone()))
            .or_insert(TreeLine { depth: 0, ..line });
    }
    Ok(seen.into_values().collect())
}

/// The graph of `cargo tree --prefix depth --format "|{l}|{p}"` output, each crate with
/// its source and checksum from `lock`.
pub fn graph(tree: &str, lock: &[Locked]) -> Result<Graph, String> {
    let lines: Vec<TreeLine> = tree
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(parse_tree_line)
        .collect::<Result<_, _>>()?;
    let roots: Vec<&TreeLine> = lines.iter().filter(|l| l.depth == 0).collect();
    let [root] = roots[..] else {
        return Err(format!(
            "`cargo tree` printed {} root packages, expected one",
            roots.len()
        ));
    };
    if lines[0].depth != 0 {
        return Err("`cargo tree` did not start with the root package".to_string());
    }

    // Every crate once, sorted; then the edges between their indices.
    let mut by_id: BTreeMap<(String, String), &TreeLine> = BTreeMap::new();
    for line in &lines {
        by_id
            .entry((line.name.clone(), line.version.clone()))
            .or_insert(line);
    }
    let index: BTreeMap<(String, String), usize> = by_id
        .keys()
        .enumerate()
        .map(|(i, id)| (id.clone(), i))
        .collect();
    let id = |line: &TreeLine| index[&(line.name.clone(), line.version.clone())];
    let mut edges: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); index.len()];
    let mut parents: Vec<usize> = Vec::new(); // parents[d] = the last crate seen at depth d
    for line in &lines {
        if line.depth > parents.len() {
            return Err(format!(
                "`cargo tree` jumped to depth {} below depth {}",
                line.depth,
                parents.len().saturating_sub(1)
            ));
        }
        parents.truncate(line.depth);
        if let Some(&parent) = parents.last() {
            edges[parent].insert(id(line));
        }
        parents.push(id(line));
    }

    // Linked: reachable from the root without entering a procedural macro.
    let root = id(root);
    let proc_macro: Vec<bool> = by_id.values().map(|l| l.proc_macro).collect();
    let mut linked = vec![false; index.len()];
    let mut queue = vec![root];
    linked[root] = true;
    while let Some(next) = queue.pop() {
        for &dep in &edges[next] {
            if !linked[dep] && !proc_macro[dep] {
                linked[dep] = true;
                queue.push(dep);
            }
        }
    }

    let crates = by_id
        .values()
        .zip(edges)
        .zip(linked)
        .map(|((line, dependencies), linked)| {
            let locked = lock
                .iter()
                .find(|p| p.name == line.name && p.version == line.version)
                .ok_or_else(|| {
                    format!(
                        "{} v{} is not in Cargo.lock: run `cargo build` to update it",
                        line.name, line.version
                    )
                })?;
            Ok(Crate {
                name: line.name.clone(),
                version: line.version.clone(),
                licence: line.licence.clone(),
                source: Source::of(locked),
                checksum: locked.checksum.clone(),
                proc_macro: line.proc_macro,
                linked,
                dependencies: dependencies.into_iter().collect(),
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok(Graph { crates, root })
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOCK: &str = r#"# This file is automatically @generated by Cargo.
version = 4

[[package]]
name = "app"
version = "0.1.0"
dependencies = [
 "lib-a",
 "derive",
]

[[package]]
name = "derive"
version = "1.0.0"
source = "registry+https://github.com/rust-lang/crates.io-index"
checksum = "dd"

[[package]]
name = "lib-a"
version = "2.0.0"
source = "sparse+https://index.crates.io/"
checksum = "aa"

[[package]]
name = "shared"
version = "0.3.1"
source = "git+https://example.com/shared.git#0123abc"
"#;

    /// app → lib-a → shared; app → derive (proc-macro) → shared, and derive → syn-ish
    /// crates only it uses.
    const TREE: &str = "0|Apache-2.0|app v0.1.0 (/src/app)
1|MIT|derive v1.0.0 (proc-macro)
2|MIT OR Apache-2.0|shared v0.3.1 (https://example.com/shared.git#0123abc)
1|MIT/Apache-2.0|lib-a v2.0.0
2|MIT OR Apache-2.0|shared v0.3.1 (https://example.com/shared.git#0123abc) (*)
";

    #[test]
    fn cargo_lock_packages_keep_name_version_source_and_checksum() {
        let lock = parse_lock(LOCK);
        assert_eq!(lock.len(), 4);
        assert_eq!(
            lock[0],
            Locked {
                name: "app".into(),
                version: "0.1.0".into(),
                source: None,
                checksum: None
            }
        );
        assert_eq!(lock[2].checksum.as_deref(), Some("aa"));
        assert_eq!(Source::of(&lock[0]), Source::Path);
        assert_eq!(Source::of(&lock[1]), Source::CratesIo);
        assert_eq!(Source::of(&lock[2]), Source::CratesIo);
        assert!(matches!(Source::of(&lock[3]), Source::Git(_)));
    }

    #[test]
    fn a_tree_line_gives_depth_licence_name_version_and_proc_macro() {
        assert_eq!(
            parse_tree_line("12|(MIT OR Apache-2.0) AND Unicode-3.0|unicode-ident v1.0.27 (*)")
                .unwrap(),
            TreeLine {
                depth: 12,
                licence: "(MIT OR Apache-2.0) AND Unicode-3.0".into(),
                name: "unicode-ident".into(),
                version: "1.0.27".into(),
                proc_macro: false,
            }
        );
        let derive = parse_tree_line("2|MIT|serde_derive v1.0.229 (proc-macro)").unwrap();
        assert!(derive.proc_macro);
        assert_eq!(parse_tree_line("0||bare v1.0.0").unwrap().licence, "");
        let zero_bsd = parse_tree_line("3|0BSD|adler v1.0.2").unwrap();
        assert_eq!((zero_bsd.depth, zero_bsd.licence.as_str()), (3, "0BSD"));
        assert_eq!(parse_tree_line("|MIT|flat v1.0.0").unwrap().depth, 0);
        assert!(parse_tree_line("wavelet v0.1.0").is_err());
        assert!(parse_tree_line("1|MIT|wavelet").is_err());
        assert!(parse_tree_line("x|MIT|wavelet v0.1.0").is_err());
    }

    #[test]
    fn the_graph_has_each_crate_once_sorted_with_its_edges_and_lock_entry() {
        let graph = graph(TREE, &parse_lock(LOCK)).unwrap();
        let names: Vec<String> = graph
            .crates
            .iter()
            .map(|c| format!("{} v{}", c.name, c.version))
            .collect();
        assert_eq!(
            names,
            [
                "app v0.1.0",
                "derive v1.0.0",
                "lib-a v2.0.0",
                "shared v0.3.1"
            ]
        );
        assert_eq!(graph.root, 0);
        assert_eq!(graph.crates[0].dependencies, [1, 2]);
        assert_eq!(graph.crates[1].dependencies, [3]);
        assert_eq!(graph.crates[2].dependencies, [3]);
        assert_eq!(graph.crates[2].checksum.as_deref(), Some("aa"));
        assert_eq!(graph.crates[2].licence, "MIT/Apache-2.0");
        assert_eq!(
            graph.crates[2].purl().as_deref(),
            Some("pkg:cargo/lib-a@2.0.0")
        );
        assert_eq!(
            graph.crates[3].purl(),
            None,
            "a git crate has no crates.io purl"
        );
    }

    #[test]
    fn a_proc_macro_and_what_only_it_uses_are_not_linked_but_a_crate_also_used_at_run_time_is() {
        let graph = graph(TREE, &parse_lock(LOCK)).unwrap();
        let linked: Vec<(&str, bool)> = graph
            .crates
            .iter()
            .map(|c| (c.name.as_str(), c.linked))
            .collect();
        assert_eq!(
            linked,
            [
                ("app", true),
                ("derive", false),
                ("lib-a", true),
                ("shared", true)
            ]
        );
        let only_derive = "0|Apache-2.0|app v0.1.0 (/src/app)
1|MIT|derive v1.0.0 (proc-macro)
2|MIT OR Apache-2.0|shared v0.3.1 (https://example.com/shared.git#0123abc)
";
        let graph = super::graph(only_derive, &parse_lock(LOCK)).unwrap();
        assert!(
            !graph.crates[2].linked,
            "shared is used only by the proc-macro"
        );
    }

    #[test]
    fn a_crate_missing_from_cargo_lock_or_a_second_root_is_an_error() {
        let lock = parse_lock(LOCK);
        let missing = graph("0|MIT|app v0.1.0\n1|MIT|other v9.9.9\n", &lock).unwrap_err();
        assert!(
            missing.contains("other v9.9.9 is not in Cargo.lock"),
            "{missing}"
        );
        let two = graph("0|MIT|app v0.1.0\n0|MIT|lib-a v2.0.0\n", &lock).unwrap_err();
        assert!(two.contains("2 root packages"), "{two}");
        let jump = graph("0|MIT|app v0.1.0\n2|MIT|lib-a v2.0.0\n", &lock).unwrap_err();
        assert!(jump.contains("jumped"), "{jump}");
    }

    #[test]
    fn listed_gives_each_crate_once_from_either_prefix() {
        let none = "|MIT|a v1.0.0\n|MIT|a v1.0.0 (*)\n|ISC|b v2.0.0\n";
        let depth = "0|MIT|a v1.0.0\n1|ISC|b v2.0.0\n2|MIT|a v1.0.0 (*)\n";
        let names = |tree| -> Vec<String> {
            listed(tree)
                .unwrap()
                .into_iter()
                .map(|l| format!("{} {} {}", l.name, l.version, l.licence))
                .collect()
        };
        assert_eq!(names(none), ["a 1.0.0 MIT", "b 2.0.0 ISC"]);
        assert_eq!(names(depth), names(none));
    }
}
