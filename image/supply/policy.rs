//! The licence and source policy every dependency must pass: a licence expression the
//! allow-list satisfies, and crates.io as the only source (no git, path or other-registry
//! dependencies). `build.rs` checks it on every build, offline, and fails naming the crate.

use super::deps::{Locked, Source, TreeLine};

/// The licences a dependency may be used under: permissive licences whose terms are a
/// notice to keep, compatible with shipping wavelet's binary and image under Apache-2.0.
/// A crate passes when its SPDX expression is satisfied by these alone (`MIT OR GPL-3.0`
/// passes through MIT; `MIT AND GPL-3.0` does not). Adding one is a decision: say why in
/// the commit.
pub const ALLOWED: &[&str] = &[
    "Apache-2.0",
    "Apache-2.0 WITH LLVM-exception",
    "BSD-2-Clause",
    "BSD-3-Clause",
    "CC0-1.0",
    // webpki-roots (under ureq): Mozilla's CA list as data; permissive, no notice
    // required. wavelet never trusts it (it verifies against the CA it is given).
    "CDLA-Permissive-2.0",
    "ISC",
    "MIT",
    "Unicode-3.0",
    "Unlicense",
    "Zlib",
];

/// Whether the SPDX licence expression `expr` is satisfied by [`ALLOWED`], or why it
/// cannot be read. Cargo's older `MIT/Apache-2.0` means `MIT OR Apache-2.0`.
pub fn allowed(expr: &str) -> Result<bool, String> {
    let tokens = tokens(expr);
    if tokens.is_empty() {
        return Err("no SPDX licence expression (only a licence file)".to_string());
    }
    let mut parser = Parser { tokens, at: 0 };
    let value = parser.or()?;
    match parser.tokens.get(parser.at) {
        None => Ok(value),
        Some(extra) => Err(format!(
            "cannot read the licence expression {expr:?} at {extra:?}"
        )),
    }
}

fn tokens(expr: &str) -> Vec<String> {
    expr.replace('(', " ( ")
        .replace(')', " ) ")
        .replace('/', " OR ")
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

/// `or := and (OR and)*`, `and := term (AND term)*`, `term := ( or ) | ID [WITH ID]`.
struct Parser {
    tokens: Vec<String>,
    at: usize,
}

impl Parser {
    fn peek_is(&self, word: &str) -> bool {
        self.tokens
            .get(self.at)
            .is_some_and(|t| t.eq_ignore_ascii_case(word))
    }

    fn or(&mut self) -> Result<bool, String> {
        let mut value = self.and()?;
        while self.peek_is("OR") {
            self.at += 1;
            value |= self.and()?;
        }
        Ok(value)
    }

    fn and(&mut self) -> Result<bool, String> {
        let mut value = self.term()?;
        while self.peek_is("AND") {
            self.at += 1;
            value &= self.term()?;
        }
        Ok(value)
    }

    fn term(&mut self) -> Result<bool, String> {
        let token = self
            .tokens
            .get(self.at)
            .cloned()
            .ok_or("the licence expression ends too early")?;
        self.at += 1;
        if token == "(" {
            let value = self.or()?;
            if self.tokens.get(self.at).map(String::as_str) != Some(")") {
                return Err("a licence expression without its closing parenthesis".to_string());
            }
            self.at += 1;
            return Ok(value);
        }
        if [")", "AND", "OR", "WITH"]
            .iter()
            .any(|w| token.eq_ignore_ascii_case(w))
        {
            return Err(format!("{token:?} where a licence should be"));
        }
        let mut id = token;
        if self.peek_is("WITH") {
            let exception = self
                .tokens
                .get(self.at + 1)
                .ok_or("WITH without an exception")?;
            id = format!("{id} WITH {exception}");
            self.at += 2;
        }
        Ok(ALLOWED.contains(&id.as_str()))
    }
}

/// Every way the crates of a build break the policy, each naming the crate: `crates` are
/// those the build compiles (with their licences), `lock` is all of `Cargo.lock`, and
/// `root` the package being built (the one path package allowed).
pub fn problems(crates: &[TreeLine], lock: &[Locked], root: &str) -> Vec<String> {
    let mut problems = Vec::new();
    for package in lock {
        let id = format!("{} v{}", package.name, package.version);
        match Source::of(package) {
            Source::CratesIo => {}
            Source::Path if package.name == root => {}
            Source::Path => problems.push(format!(
                "{id} is a path dependency: every dependency must come from crates.io"
            )),
            Source::Git(url) => problems.push(format!(
                "{id} is a git dependency ({url}): every dependency must come from crates.io"
            )),
            Source::Registry(url) => problems.push(format!(
                "{id} comes from another registry ({url}): every dependency must come from crates.io"
            )),
        }
    }
    for krate in crates.iter().filter(|c| c.name != root) {
        let id = format!("{} v{}", krate.name, krate.version);
        match allowed(&krate.licence) {
            Ok(true) => {}
            Ok(false) => problems.push(format!(
                "{id} is licensed {:?}, which the licence allow-list does not satisfy ({})",
                krate.licence,
                ALLOWED.join(", ")
            )),
            Err(why) => problems.push(format!("{id}: {why}: its licence cannot be checked")),
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_expression_passes_when_the_allow_list_satisfies_it() {
        for expr in [
            "MIT",
            "MIT OR Apache-2.0",
            "Apache-2.0/MIT",
            "Apache-2.0 AND ISC",
            "(MIT OR Apache-2.0) AND Unicode-3.0",
            "Unlicense OR MIT",
            "Apache-2.0 WITH LLVM-exception OR Apache-2.0 OR MIT",
            "MIT OR GPL-3.0-only",
            "GPL-3.0-only OR (MIT AND BSD-3-Clause)",
            "mit or Apache-2.0",
        ] {
            assert_eq!(allowed(expr), Ok(true), "{expr}");
        }
    }

    #[test]
    fn an_expression_fails_when_any_required_part_is_not_allowed() {
        for expr in [
            "GPL-3.0-only",
            "MIT AND GPL-3.0-only",
            "(MIT OR Apache-2.0) AND LGPL-2.1-or-later",
            "MPL-2.0",
            "GPL-2.0-only WITH Classpath-exception-2.0",
            "Apache-2.0 WITH Some-other-exception",
        ] {
            assert_eq!(allowed(expr), Ok(false), "{expr}");
        }
    }

    #[test]
    fn an_expression_that_cannot_be_read_is_an_error_not_a_pass() {
        for expr in [
            "",
            "MIT OR",
            "(MIT",
            "MIT Apache-2.0",
            "AND MIT",
            "MIT WITH",
        ] {
            assert!(allowed(expr).is_err(), "{expr:?}");
        }
    }

    fn line(name: &str, licence: &str) -> TreeLine {
        TreeLine {
            depth: 1,
            licence: licence.into(),
            name: name.into(),
            version: "1.0.0".into(),
            proc_macro: false,
        }
    }

    fn locked(name: &str, source: Option<&str>) -> Locked {
        Locked {
            name: name.into(),
            version: "1.0.0".into(),
            source: source.map(str::to_string),
            checksum: None,
        }
    }

    #[test]
    fn problems_name_each_crate_with_a_forbidden_licence_or_a_source_other_than_crates_io() {
        let crates_io = Some("registry+https://github.com/rust-lang/crates.io-index");
        let lock = [
            locked("app", None),
            locked("good", crates_io),
            locked("copyleft", crates_io),
            locked("vendored", None),
            locked("forked", Some("git+https://example.com/forked.git#abc")),
            locked("private", Some("sparse+https://registry.example.com/")),
        ];
        let crates = [
            line("app", "GPL-3.0-only"),
            line("good", "MIT OR Apache-2.0"),
            line("copyleft", "GPL-3.0-only"),
            line("unreadable", ""),
        ];
        let problems = problems(&crates, &lock, "app");
        assert_eq!(problems.len(), 5, "{problems:#?}");
        assert!(problems[0].starts_with("vendored v1.0.0 is a path dependency"));
        assert!(problems[1].starts_with("forked v1.0.0 is a git dependency"));
        assert!(problems[2].starts_with("private v1.0.0 comes from another registry"));
        assert!(problems[3].starts_with("copyleft v1.0.0 is licensed \"GPL-3.0-only\""));
        assert!(problems[4].starts_with("unreadable v1.0.0: no SPDX licence expression"));
    }

    #[test]
    fn the_root_package_and_allowed_crates_from_crates_io_are_no_problem() {
        let lock = [
            locked("app", None),
            locked("good", Some("sparse+https://index.crates.io/")),
        ];
        let crates = [line("app", ""), line("good", "ISC")];
        assert_eq!(problems(&crates, &lock, "app"), Vec::<String>::new());
    }
}
