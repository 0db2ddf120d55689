//! The CycloneDX 1.6 SBOM of one binary: every crate `cargo tree -e normal` reports for
//! its target (name, version, licence, the SHA-256 `Cargo.lock` pins, a
//! `pkg:cargo` purl; scope `excluded` for a proc-macro and what only it uses, which run in
//! the compiler and are not linked), the rest of what is linked (Rust's standard library,
//! the musl C library and LLVM's libunwind that Rust's musl targets bring), and under
//! `formulation` the tools that built it (rustc, cargo, the C compiler that built ring's C
//! and assembly). No time and no serial number: the same build gives the same bytes.

use super::deps::Graph;
use super::json::Json;

/// What `rustc -vV` says about itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rustc {
    pub release: String,
    pub commit_hash: String,
    pub commit_date: String,
    pub host: String,
    pub llvm: String,
}

impl Rustc {
    pub fn parse(verbose_version: &str) -> Rustc {
        let mut rustc = Rustc::default();
        for line in verbose_version.lines() {
            let Some((key, value)) = line.split_once(": ") else {
                continue;
            };
            let value = value.trim().to_string();
            match key {
                "release" => rustc.release = value,
                "commit-hash" => rustc.commit_hash = value,
                "commit-date" => rustc.commit_date = value,
                "host" => rustc.host = value,
                "LLVM version" => rustc.llvm = value,
                _ => {}
            }
        }
        rustc
    }
}

/// A program that took part in the build.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tool {
    /// Its part (`rustc`, `cargo`, `c-compiler`, `linker`), unique in one build: the
    /// C compiler may be the linker too.
    pub role: String,
    pub name: String,
    /// Its version; empty when unknown.
    pub version: String,
    pub description: String,
}

/// The facts of one build that are not in the dependency graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Build {
    pub package: String,
    pub version: String,
    pub description: String,
    pub licence: String,
    /// The Rust target triple, `x86_64-unknown-linux-musl`.
    pub target: String,
    pub rustc: Rustc,
    /// The version of the static musl linked in (Rust's self-contained copy), if any.
    pub musl: Option<String>,
    /// rustc, cargo, the C compiler, ...
    pub tools: Vec<Tool>,
}

/// The musl version of Rust's self-contained `libc.a`: the string in its member
/// `version.lo` (musl writes it there from its VERSION file).
pub fn musl_version(archive: &[u8]) -> Option<String> {
    let mut at = b"!<arch>\n".len();
    if !archive.starts_with(b"!<arch>\n") {
        return None;
    }
    while at + 60 <= archive.len() {
        let header = &archive[at..at + 60];
        let name = std::str::from_utf8(&header[..16]).ok()?.trim_end();
        let size: usize = std::str::from_utf8(&header[48..58])
            .ok()?
            .trim()
            .parse()
            .ok()?;
        let data = archive.get(at + 60..at + 60 + size)?;
        if name == "version.lo/" || name == "version.o/" {
            return data
                .split(|b| !(b.is_ascii_digit() || *b == b'.'))
                .map(|run| String::from_utf8_lossy(run).into_owned())
                .find(|run| {
                    let parts: Vec<&str> = run.split('.').collect();
                    parts.len() == 3 && parts.iter().all(|p| !p.is_empty())
                });
        }
        at += 60 + size + size % 2;
    }
    None
}

/// An SPDX expression from a crate's `license` field (Cargo's old `A/B` is `A OR B`).
fn spdx(licence: &str) -> String {
    licence
        .split('/')
        .map(str::trim)
        .collect::<Vec<_>>()
        .join(" OR ")
}

fn licences(expression: &str) -> (String, Json) {
    (
        "licenses".to_string(),
        Json::Arr(vec![Json::obj([("expression", Json::str(expression))])]),
    )
}

fn field(key: &str, value: Json) -> (String, Json) {
    (key.to_string(), value)
}

/// The SBOM of the binary built from `graph` as described by `build`.
pub fn cyclonedx(graph: &Graph, build: &Build) -> Json {
    let root = &graph.crates[graph.root];
    let root_ref = format!("{}@{}", build.package, build.version);
    let crate_ref = |i: usize| {
        let c = &graph.crates[i];
        if i == graph.root {
            root_ref.clone()
        } else {
            c.purl()
                .unwrap_or_else(|| format!("{}@{}", c.name, c.version))
        }
    };

    let mut components = Vec::new();
    for (i, c) in graph.crates.iter().enumerate() {
        if i == graph.root {
            continue;
        }
        let mut fields = vec![
            field("type", Json::str("library")),
            field("bom-ref", Json::str(crate_ref(i))),
            field("name", Json::str(&c.name)),
            field("version", Json::str(&c.version)),
            field(
                "scope",
                Json::str(if c.linked { "required" } else { "excluded" }),
            ),
        ];
        if !c.licence.is_empty() {
            fields.push(licences(&spdx(&c.licence)));
        }
        if let Some(sum) = &c.checksum {
            fields.push(field(
                "hashes",
                Json::Arr(vec![Json::obj([
                    ("alg", Json::str("SHA-256")),
                    ("content", Json::str(sum)),
                ])]),
            ));
        }
        if let Some(purl) = c.purl() {
            fields.push(field("purl", Json::str(purl)));
        }
        if c.proc_macro {
            fields.push(field(
                "description",
                Json::str("procedural macro: runs in the compiler, not linked"),
            ));
        }
        components.push(Json::Obj(fields));
    }

    // What the Rust toolchain links into every binary of this target.
    let rustc = &build.rustc;
    let mut runtime_refs = Vec::new();
    let mut runtime = |bom_ref: String, fields: Vec<(String, Json)>| {
        runtime_refs.push(Json::str(&bom_ref));
        let mut all = vec![
            field("type", Json::str("library")),
            field("bom-ref", Json::str(bom_ref)),
        ];
        all.extend(fields);
        components.push(Json::Obj(all));
    };
    runtime(
        format!("rust-std@{}", rustc.release),
        vec![
            field("name", Json::str("std")),
            field("group", Json::str("rust-lang")),
            field("version", Json::str(&rustc.release)),
            field(
                "description",
                Json::str(format!(
                    "Rust's standard library (std, core, alloc and the crates they use) of rustc {} ({} {}), for {}",
                    rustc.release, rustc.commit_hash, rustc.commit_date, build.target
                )),
            ),
            field("scope", Json::str("required")),
            licences("MIT OR Apache-2.0"),
            field(
                "cpe",
                Json::str(format!(
                    "cpe:2.3:a:rust-lang:rust:{}:*:*:*:*:*:*:*",
                    rustc.release
                )),
            ),
        ],
    );
    if let Some(musl) = &build.musl {
        runtime(
            format!("musl@{musl}"),
            vec![
                field("name", Json::str("musl")),
                field("version", Json::str(musl)),
                field(
                    "description",
                    Json::str(format!(
                        "the C library, linked statically: the self-contained libc.a of Rust's {} target",
                        build.target
                    )),
                ),
                field("scope", Json::str("required")),
                licences("MIT"),
                field(
                    "cpe",
                    Json::str(format!("cpe:2.3:a:musl-libc:musl:{musl}:*:*:*:*:*:*:*")),
                ),
            ],
        );
        runtime(
            format!("libunwind@{}", rustc.llvm),
            vec![
                field("name", Json::str("libunwind")),
                field("group", Json::str("llvm")),
                field("version", Json::str(&rustc.llvm)),
                field(
                    "description",
                    Json::str(format!(
                        "LLVM's unwinder, linked statically: the self-contained libunwind.a of Rust's {} target (LLVM {})",
                        build.target, rustc.llvm
                    )),
                ),
                field("scope", Json::str("required")),
                licences("Apache-2.0 WITH LLVM-exception"),
            ],
        );
    }

    let mut dependencies = Vec::new();
    for (i, c) in graph.crates.iter().enumerate() {
        let mut on: Vec<Json> = c
            .dependencies
            .iter()
            .map(|&d| Json::str(crate_ref(d)))
            .collect();
        if i == graph.root {
            on.extend(runtime_refs.iter().cloned());
        }
        dependencies.push(Json::obj([
            ("ref", Json::str(crate_ref(i))),
            ("dependsOn", Json::Arr(on)),
        ]));
    }

    let tools = build
        .tools
        .iter()
        .map(|t| {
            let mut fields = vec![
                field("type", Json::str("application")),
                field("bom-ref", Json::str(format!("tool:{}", t.role))),
                field("name", Json::str(&t.name)),
            ];
            if !t.version.is_empty() {
                fields.push(field("version", Json::str(&t.version)));
            }
            fields.push(field("description", Json::str(&t.description)));
            Json::Obj(fields)
        })
        .collect();

    let mut metadata_component = vec![
        field("type", Json::str("application")),
        field("bom-ref", Json::str(&root_ref)),
        field("name", Json::str(&build.package)),
        field("version", Json::str(&build.version)),
        field("description", Json::str(&build.description)),
    ];
    if !build.licence.is_empty() {
        metadata_component.push(licences(&spdx(&build.licence)));
    }
    metadata_component.push(field(
        "properties",
        Json::Arr(vec![Json::obj([
            ("name", Json::str("wavelet:target")),
            ("value", Json::str(&build.target)),
        ])]),
    ));
    debug_assert_eq!(root.name, build.package);

    Json::obj([
        ("bomFormat", Json::str("CycloneDX")),
        ("specVersion", Json::str("1.6")),
        ("version", Json::Num(1)),
        (
            "metadata",
            Json::obj([
                (
                    "lifecycles",
                    Json::Arr(vec![Json::obj([("phase", Json::str("build"))])]),
                ),
                (
                    "tools",
                    Json::obj([(
                        "components",
                        Json::Arr(vec![Json::obj([
                            ("type", Json::str("application")),
                            ("name", Json::str(format!("{} build.rs", build.package))),
                            ("version", Json::str(&build.version)),
                            (
                                "description",
                                Json::str(
                                    "the package's build script, from `cargo tree` and Cargo.lock",
                                ),
                            ),
                        ])]),
                    )]),
                ),
                ("component", Json::Obj(metadata_component)),
            ]),
        ),
        ("components", Json::Arr(components)),
        ("dependencies", Json::Arr(dependencies)),
        (
            "formulation",
            Json::Arr(vec![Json::obj([
                ("bom-ref", Json::str("build")),
                ("components", Json::Arr(tools)),
            ])]),
        ),
    ])
}

#[cfg(test)]
mod tests {
    use super::super::deps::{graph, parse_lock};
    use super::*;
    use serde_json::Value;

    const RUSTC_VV: &str = "rustc 1.95.0 (59807616e 2026-04-14)
binary: rustc
commit-hash: 59807616e1fa2540724bfbac14d7976d7e4a3860
commit-date: 2026-04-14
host: x86_64-unknown-linux-gnu
release: 1.95.0
LLVM version: 22.1.2
";

    fn build() -> Build {
        Build {
            package: "app".into(),
            version: "0.1.0".into(),
            description: "an app".into(),
            licence: "Apache-2.0".into(),
            target: "x86_64-unknown-linux-musl".into(),
            rustc: Rustc::parse(RUSTC_VV),
            musl: Some("1.2.5".into()),
            tools: vec![Tool {
                role: "rustc".into(),
                name: "rustc".into(),
                version: "1.95.0".into(),
                description: "the compiler".into(),
            }],
        }
    }

    fn sbom() -> Value {
        let lock = parse_lock(
            "[[package]]\nname = \"app\"\nversion = \"0.1.0\"\n\n[[package]]\nname = \"derive\"\nversion = \"1.0.0\"\nsource = \"registry+https://github.com/rust-lang/crates.io-index\"\nchecksum = \"d1\"\n\n[[package]]\nname = \"lib\"\nversion = \"2.0.0\"\nsource = \"registry+https://github.com/rust-lang/crates.io-index\"\nchecksum = \"c2\"\n",
        );
        let graph = graph(
            "0|Apache-2.0|app v0.1.0 (/app)\n1|MIT|derive v1.0.0 (proc-macro)\n1|MIT/Apache-2.0|lib v2.0.0\n",
            &lock,
        )
        .unwrap();
        serde_json::from_str(&cyclonedx(&graph, &build()).pretty()).unwrap()
    }

    #[test]
    fn rustc_verbose_version_gives_release_commit_host_and_llvm() {
        let rustc = Rustc::parse(RUSTC_VV);
        assert_eq!(rustc.release, "1.95.0");
        assert_eq!(
            rustc.commit_hash,
            "59807616e1fa2540724bfbac14d7976d7e4a3860"
        );
        assert_eq!(rustc.commit_date, "2026-04-14");
        assert_eq!(rustc.host, "x86_64-unknown-linux-gnu");
        assert_eq!(rustc.llvm, "22.1.2");
    }

    #[test]
    fn each_crate_has_version_licence_checksum_purl_and_scope() {
        let sbom = sbom();
        assert_eq!(sbom["bomFormat"], "CycloneDX");
        assert_eq!(sbom["specVersion"], "1.6");
        let lib = &sbom["components"][1];
        assert_eq!(lib["name"], "lib");
        assert_eq!(lib["version"], "2.0.0");
        assert_eq!(lib["scope"], "required");
        assert_eq!(lib["licenses"][0]["expression"], "MIT OR Apache-2.0");
        assert_eq!(lib["hashes"][0]["alg"], "SHA-256");
        assert_eq!(lib["hashes"][0]["content"], "c2");
        assert_eq!(lib["purl"], "pkg:cargo/lib@2.0.0");
        let derive = &sbom["components"][0];
        assert_eq!(derive["scope"], "excluded", "a proc-macro is not linked");
        assert_eq!(sbom["metadata"]["component"]["name"], "app");
        assert_eq!(
            sbom["metadata"]["component"]["properties"][0]["value"],
            "x86_64-unknown-linux-musl"
        );
    }

    #[test]
    fn the_standard_library_musl_and_libunwind_are_linked_components_and_rustc_a_tool() {
        let sbom = sbom();
        let components = sbom["components"].as_array().unwrap();
        let named = |name: &str| {
            components
                .iter()
                .find(|c| c["name"] == name)
                .unwrap_or_else(|| panic!("no {name}"))
        };
        assert_eq!(named("std")["version"], "1.95.0");
        assert_eq!(named("musl")["version"], "1.2.5");
        assert_eq!(named("musl")["licenses"][0]["expression"], "MIT");
        assert_eq!(named("libunwind")["version"], "22.1.2");
        let root = &sbom["dependencies"][0];
        assert_eq!(root["ref"], "app@0.1.0");
        assert_eq!(
            root["dependsOn"],
            serde_json::json!([
                "pkg:cargo/derive@1.0.0",
                "pkg:cargo/lib@2.0.0",
                "rust-std@1.95.0",
                "musl@1.2.5",
                "libunwind@22.1.2"
            ])
        );
        assert_eq!(sbom["formulation"][0]["components"][0]["name"], "rustc");
        assert!(sbom.get("serialNumber").is_none() && sbom["metadata"].get("timestamp").is_none());
    }

    #[test]
    fn the_musl_version_comes_from_the_version_member_of_libc_a() {
        let member = |name: &str, data: &[u8]| {
            let mut m = format!(
                "{name:<16}{:<12}{:<6}{:<6}{:<8}{:<10}`\n",
                0,
                0,
                0,
                644,
                data.len()
            )
            .into_bytes();
            m.extend(data);
            if data.len() % 2 == 1 {
                m.push(b'\n');
            }
            m
        };
        let mut archive = b"!<arch>\n".to_vec();
        archive.extend(member("abs.lo/", b"\x7fELF 1.0.0 not this one"));
        archive.extend(member(
            "version.lo/",
            b"\x7fELF\x02\x01\x011.2.5\0GCC: (GNU) 9.4.0",
        ));
        assert_eq!(musl_version(&archive).as_deref(), Some("1.2.5"));
        assert_eq!(musl_version(b"!<arch>\n"), None);
        assert_eq!(musl_version(b"not an archive"), None);
    }
}
