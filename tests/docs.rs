//! The documentation holds together: every relative link and `#anchor` in README.md and in
//! the book (`docs/src/`) resolves, to a file that exists and to a heading of it, with the
//! anchor mdBook (and GitHub) derives from the heading's text; every page of the book is in
//! its SUMMARY.md and links only inside the book (a link out of `docs/src/` breaks in the
//! built book); and the flags reference (`docs/src/flags.md`) is `wavelet run --help`
//! word for word (`bash docs/write-flags` writes it).
//!
//! Links are read outside fenced code blocks and code spans, inline ones only (the
//! documentation uses no reference-style links): `[text](target)` and `![alt](target)`.
//! Targets with a scheme (`https:`, `mailto:`) are not followed.

use std::collections::{BTreeSet, HashSet};
use std::path::{Component, Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The book's sources.
const BOOK: &str = "docs/src";

/// The flags reference and the marker line after which `wavelet run --help` follows.
const FLAGS_PAGE: &str = "docs/src/flags.md";
const FLAGS_MARKER: &str = "<!-- wavelet run --help";

/// Every Markdown file under `dir`, sorted.
fn markdown_under(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

/// The lines of `text` outside fenced code blocks, with their line numbers (from 1).
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut lines = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            lines.push((index + 1, line));
        }
    }
    lines
}

/// `prose` with its code spans blanked out (a link inside backticks is an example, not a
/// link), newlines kept. A code span ends at its closing backtick or at the paragraph's end.
fn without_code_spans(prose: &str) -> String {
    let mut out = String::with_capacity(prose.len());
    let mut in_code = false;
    let mut previous = ' ';
    for c in prose.chars() {
        if c == '\n' && previous == '\n' {
            in_code = false;
        }
        if c == '`' {
            in_code = !in_code;
            out.push(' ');
        } else if c == '\n' || !in_code {
            out.push(c);
        } else {
            out.push(' ');
        }
        previous = c;
    }
    out
}

/// The targets of the inline links in `text`, with the line each starts on. A link's text
/// may run over several lines, so the prose is read as one string.
fn links(text: &str) -> Vec<(usize, String)> {
    let lines = prose_lines(text);
    let joined: Vec<&str> = lines.iter().map(|(_, line)| *line).collect();
    let prose = without_code_spans(&(joined.join("\n") + "\n"));
    let line_at = |offset: usize| lines[prose[..offset].matches('\n').count()].0;
    let mut found = Vec::new();
    let mut i = 0;
    while let Some(at) = prose[i..].find("](") {
        let mid = i + at;
        let open = mid + 2;
        let bracket = prose[..mid].rfind('[');
        let close = prose[open..].find(')').map(|c| open + c);
        match (bracket, close) {
            (Some(bracket), Some(close)) if !prose[open..close].contains(char::is_whitespace) => {
                found.push((line_at(bracket), prose[open..close].to_string()));
                i = close + 1;
            }
            _ => i = open,
        }
    }
    found
}

/// The text of a heading as rendered: code spans, emphasis and link targets dropped.
fn heading_text(heading: &str) -> String {
    let mut text = String::new();
    let mut rest = heading;
    // [text](url) → text
    while let Some(open) = rest.find('[') {
        match rest[open..].find("](").map(|m| open + m) {
            Some(mid) => {
                let close = rest[mid..].find(')').map_or(rest.len(), |c| mid + c + 1);
                text.push_str(&rest[..open]);
                text.push_str(&rest[open + 1..mid]);
                rest = &rest[close..];
            }
            None => break,
        }
    }
    text.push_str(rest);
    text.replace(['`', '*'], "")
}

/// The anchor mdBook 0.5 gives a heading (`id_from_content` in mdbook-html): lowercase;
/// letters, digits, `_` and `-` kept; whitespace as `-`; everything else dropped. GitHub's
/// README anchors follow the same rule.
fn anchor_of(text: &str) -> String {
    text.trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            c if c.is_alphanumeric() || c == '_' || c == '-' => Some(c),
            c if c.is_whitespace() => Some('-'),
            _ => None,
        })
        .collect()
}

/// The anchors of the headings of `text`, a repeated one with `-1`, `-2`... as mdBook and
/// GitHub number them.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut used = HashSet::new();
    let mut all = BTreeSet::new();
    for (_, line) in prose_lines(text) {
        let hashes = line.chars().take_while(|c| *c == '#').count();
        if !(1..=6).contains(&hashes) || !line[hashes..].starts_with(' ') {
            continue;
        }
        let base = anchor_of(&heading_text(line[hashes..].trim()));
        let mut id = base.clone();
        let mut n = 0;
        while !used.insert(id.clone()) {
            n += 1;
            id = format!("{base}-{n}");
        }
        all.insert(id);
    }
    all
}

/// `path` with `.` and `..` resolved, without touching the file system.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// What is wrong with the links of the Markdown file `file` (relative to `root`), one line
/// each: a relative target that does not exist, an anchor no heading of its file gives, a
/// page of the book that links out of the book.
fn broken_links(root: &Path, file: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(root.join(file))
        .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let in_book = file.starts_with(BOOK);
    let mut problems = Vec::new();
    for (line, target) in links(&text) {
        let at = format!("{}:{line}: ({target})", file.display());
        if target.contains("://") || target.starts_with("mailto:") {
            continue;
        }
        let (path, fragment) = match target.split_once('#') {
            Some((path, fragment)) => (path, Some(fragment)),
            None => (target.as_str(), None),
        };
        let linked = if path.is_empty() {
            file.to_path_buf()
        } else {
            normalize(&file.parent().unwrap_or(Path::new("")).join(path))
        };
        if linked.starts_with("..") || !root.join(&linked).exists() {
            problems.push(format!("{at}: no file {}", linked.display()));
            continue;
        }
        if in_book && !linked.starts_with(BOOK) {
            problems.push(format!(
                "{at}: a page of the book links out of {BOOK}/, which the built book does not have: link to the repository's URL"
            ));
            continue;
        }
        if let Some(fragment) = fragment {
            let is_markdown = linked.extension().is_some_and(|e| e == "md");
            let target_text = std::fs::read_to_string(root.join(&linked)).unwrap_or_default();
            if !is_markdown || !anchors(&target_text).contains(fragment) {
                problems.push(format!(
                    "{at}: {} has no heading with anchor #{fragment}",
                    linked.display()
                ));
            }
        }
    }
    problems
}

/// The pages SUMMARY.md lists, relative to the book's sources.
fn summary_pages(root: &Path) -> BTreeSet<PathBuf> {
    let summary = root.join(BOOK).join("SUMMARY.md");
    let text = std::fs::read_to_string(&summary).expect("docs/src/SUMMARY.md");
    links(&text)
        .into_iter()
        .map(|(_, target)| normalize(Path::new(&target)))
        .collect()
}

/// Every problem with the documentation's links under `root` (a checkout, or a copy).
fn documentation_problems(root: &Path) -> Vec<String> {
    let mut problems = broken_links(root, Path::new("README.md"));
    let listed = summary_pages(root);
    for page in markdown_under(&root.join(BOOK)) {
        let relative = page.strip_prefix(root).unwrap().to_path_buf();
        problems.extend(broken_links(root, &relative));
        let in_book = relative.strip_prefix(BOOK).unwrap().to_path_buf();
        if in_book != Path::new("SUMMARY.md") && !listed.contains(&in_book) {
            problems.push(format!(
                "{}: not in docs/src/SUMMARY.md, so the built book has no such page",
                relative.display()
            ));
        }
    }
    problems
}

#[test]
fn every_relative_link_and_anchor_of_the_readme_and_the_book_resolves() {
    let problems = documentation_problems(&repo());
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_link_check_finds_a_missing_file_a_missing_anchor_and_an_unlisted_page() {
    let dir = crate::util::TempDir::new("docs");
    let root = dir.0.clone();
    std::fs::create_dir_all(root.join("docs/src/ops")).unwrap();
    std::fs::write(
        root.join("README.md"),
        "# Title\n\n[ok](docs/src/a.md#the-hash-sha-256) [gone](docs/src/nothing.md)\n\
         ```\n[in a block](nowhere.md)\n```\n`[in code](nowhere.md)` [web](https://x.example/#y)\n",
    )
    .unwrap();
    std::fs::write(
        root.join("docs/src/SUMMARY.md"),
        "# Summary\n\n- [A](a.md)\n  - [B](ops/b.md)\n",
    )
    .unwrap();
    std::fs::write(
        root.join("docs/src/a.md"),
        "# A\n\n## The hash: SHA-256\n\n## `wavelet run --help`\n\n## Twice\n\n## Twice\n\n\
         [self](#wavelet-run---help) [second](#twice-1) [b](ops/b.md#b) [wrong](ops/b.md#nope)\n\
         [over\nlines](#twice) [out](../../README.md)\n",
    )
    .unwrap();
    std::fs::write(root.join("docs/src/ops/b.md"), "# B\n\n[up](../a.md#a)\n").unwrap();
    std::fs::write(root.join("docs/src/ops/c.md"), "# C\n").unwrap();
    let problems = documentation_problems(&root);
    let expected = [
        "README.md:3: (docs/src/nothing.md): no file docs/src/nothing.md",
        "docs/src/a.md:11: (ops/b.md#nope): docs/src/ops/b.md has no heading with anchor #nope",
        "docs/src/a.md:13: (../../README.md): a page of the book links out of docs/src/",
        "docs/src/ops/c.md: not in docs/src/SUMMARY.md",
    ];
    assert_eq!(problems.len(), expected.len(), "{problems:#?}");
    for (problem, want) in problems.iter().zip(expected) {
        assert!(problem.starts_with(want), "{problem}\nwanted: {want}");
    }
}

#[test]
fn anchors_are_the_ones_mdbook_gives() {
    assert_eq!(
        anchor_of(&heading_text(
            "What older Wave left: `wavelet migrate wave`"
        )),
        "what-older-wave-left-wavelet-migrate-wave"
    );
    assert_eq!(
        anchor_of(&heading_text("Secrets from external stores (CSI)")),
        "secrets-from-external-stores-csi"
    );
    assert_eq!(
        anchor_of(&heading_text("wavelet's chart with a Reloader values file")),
        "wavelets-chart-with-a-reloader-values-file"
    );
    assert_eq!(
        anchor_of(&heading_text(
            "Beside Reloader and Wave: same cluster, same run"
        )),
        "beside-reloader-and-wave-same-cluster-same-run"
    );
    assert_eq!(
        anchor_of(&heading_text("`wavelet run --help`")),
        "wavelet-run---help"
    );
}

/// The text after the flags page's marker line, inside its ```text block.
fn flags_block(page: &str) -> String {
    let after = page
        .split_once(FLAGS_MARKER)
        .unwrap_or_else(|| panic!("{FLAGS_PAGE} has no line starting {FLAGS_MARKER}"))
        .1;
    let after = after
        .split_once("\n```text\n")
        .unwrap_or_else(|| panic!("{FLAGS_PAGE}: a ```text block follows the marker"))
        .1;
    after
        .split_once("```")
        .map_or(after, |(block, _)| block)
        .to_string()
}

#[test]
fn the_flags_page_is_wavelet_run_help_word_for_word() {
    let out = Command::new(env!("CARGO_BIN_EXE_wavelet"))
        .args(["run", "--help"])
        .output()
        .expect("wavelet run --help");
    assert!(out.status.success(), "wavelet run --help failed");
    let help = String::from_utf8(out.stdout).expect("UTF-8 help");
    let page = std::fs::read_to_string(repo().join(FLAGS_PAGE)).expect(FLAGS_PAGE);
    let block = flags_block(&page);
    if block != help {
        let first = block
            .lines()
            .zip(help.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| block.lines().count().min(help.lines().count()));
        panic!(
            "{FLAGS_PAGE} differs from `wavelet run --help` from line {} of the help on \
             (page: {:?}, help: {:?}): run `bash docs/write-flags`",
            first + 1,
            block.lines().nth(first),
            help.lines().nth(first)
        );
    }
}
