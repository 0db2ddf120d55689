//! What the build says the binaries are made of: the SBOM `build.rs` writes beside each
//! static binary lists exactly the crates `cargo tree -e normal` reports for its target,
//! at the versions and checksums of `Cargo.lock`; the `.dep-v0` section embedded in each
//! binary (read here with its ELF section headers, inflated by pigz, another zlib) lists
//! the same crates and edges; and a made-up dependency with a forbidden licence fails the
//! build, naming it. Also runs the unit tests of `image/supply/`, the build script's
//! module. The binary tests need both static binaries (the aarch64 one named by
//! WAVELET_AARCH64_BINARY) and pigz: `bash .ci/run` provides them; under CI a missing one
//! fails the test, elsewhere it says that it did not run, and how to run it.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::chroot::{decide, musl_binary, Decision};
use crate::util::TempDir;

// The build script's module, compiled here for its unit tests and its Cargo.lock reader;
// what only build.rs calls is unused here.
#[allow(dead_code)]
#[path = "../image/supply/mod.rs"]
mod code;

const HOW_TO_RUN: &str = "run `bash .ci/run`, or: apt-get install pigz \
gcc-aarch64-linux-gnu musl-tools && image/binaries && \
WAVELET_AARCH64_BINARY=target/aarch64-unknown-linux-musl/release/wavelet cargo test \
--test integration supply::";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A shipped binary, its Rust target and the SBOM beside it.
struct Shipped {
    target: &'static str,
    binary: PathBuf,
    sbom: Value,
}

fn shipped() -> Result<Vec<Shipped>, String> {
    let pigz = Command::new("pigz").arg("--version").output();
    if !pigz.is_ok_and(|out| out.status.success()) {
        return Err(format!("pigz is not installed: {HOW_TO_RUN}"));
    }
    let arm64 = std::env::var_os("WAVELET_AARCH64_BINARY")
        .map(PathBuf::from)
        .ok_or_else(|| format!("WAVELET_AARCH64_BINARY is not set: {HOW_TO_RUN}"))?;
    let mut shipped = Vec::new();
    for (target, binary) in [
        ("x86_64-unknown-linux-musl", musl_binary()?),
        ("aarch64-unknown-linux-musl", arm64),
    ] {
        let path = PathBuf::from(format!("{}.cdx.json", binary.display()));
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("no SBOM at {}: {e}: {HOW_TO_RUN}", path.display()))?;
        let sbom = serde_json::from_str(&text)
            .map_err(|e| format!("{} is not JSON: {e}", path.display()))?;
        shipped.push(Shipped {
            target,
            binary,
            sbom,
        });
    }
    Ok(shipped)
}

/// The shipped binaries, or `None` when the test says it did not run.
fn shipped_or_skip() -> Option<Vec<Shipped>> {
    match decide(shipped(), std::env::var_os("CI").is_some()) {
        Decision::Run(shipped) => Some(shipped),
        Decision::Skip(why) => {
            // Past the test harness's output capture: a skip must be seen.
            let _ = writeln!(std::io::stderr(), "supply test did not run: {why}");
            None
        }
        Decision::Fail(why) => panic!("{why}"),
    }
}

fn cargo() -> Command {
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
}

fn run(command: &mut Command) -> String {
    let out = command
        .output()
        .unwrap_or_else(|e| panic!("{command:?}: {e}"));
    assert!(
        out.status.success(),
        "{command:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `cargo tree -e normal` for `target` with `format`: the set of lines it prints.
fn cargo_tree(target: &str, edges: &str, format: &str) -> BTreeSet<String> {
    let printed = run(cargo()
        .current_dir(repo())
        .args(["tree", "--locked", "--offline", "--prefix", "none"])
        .args(["-e", edges, "--target", target, "--format", format]));
    printed
        .lines()
        .map(|l| l.trim_end_matches(" (*)").to_string())
        .collect()
}

/// The SBOM's crates (components with a `pkg:cargo` purl), by `name version`.
fn sbom_crates(sbom: &Value) -> BTreeMap<String, &Value> {
    sbom["components"]
        .as_array()
        .expect("components")
        .iter()
        .filter(|c| {
            c["purl"]
                .as_str()
                .is_some_and(|p| p.starts_with("pkg:cargo/"))
        })
        .map(|c| {
            let id = format!(
                "{} {}",
                c["name"].as_str().unwrap(),
                c["version"].as_str().unwrap()
            );
            (id, c)
        })
        .collect()
}

#[test]
fn the_sbom_of_each_shipped_binary_lists_exactly_the_crates_cargo_tree_reports_at_cargo_lock_versions(
) {
    let Some(shipped) = shipped_or_skip() else {
        return;
    };
    let lock = code::deps::parse_lock(&std::fs::read_to_string(repo().join("Cargo.lock")).unwrap());
    for Shipped { target, sbom, .. } in &shipped {
        // `cargo tree -e normal` prints `name vX.Y.Z`, `(proc-macro)` or the root's path.
        let reported: BTreeSet<String> = cargo_tree(target, "normal", "{p}")
            .iter()
            .map(|line| {
                let mut words = line.split(' ');
                let name = words.next().unwrap();
                format!("{name} {}", &words.next().unwrap()[1..])
            })
            .collect();
        let root = format!("wavelet {}", env!("CARGO_PKG_VERSION"));
        assert!(reported.contains(&root), "{reported:?}");
        let crates = sbom_crates(sbom);
        let listed: BTreeSet<String> = crates.keys().cloned().chain([root.clone()]).collect();
        assert_eq!(
            listed, reported,
            "{target}: the SBOM's crates and `cargo tree -e normal`"
        );
        assert_eq!(sbom["metadata"]["component"]["name"], "wavelet");
        assert_eq!(
            sbom["metadata"]["component"]["version"],
            env!("CARGO_PKG_VERSION")
        );
        assert_eq!(
            sbom["metadata"]["component"]["properties"][0]["value"],
            *target
        );

        // Versions, checksums and sources are Cargo.lock's; licences are the crates' own.
        let licences: BTreeMap<String, String> = cargo_tree(target, "normal", "{p}|{l}")
            .iter()
            .filter_map(|line| {
                let (package, licence) = line.split_once('|')?;
                let mut words = package.split(' ');
                let id = format!("{} {}", words.next()?, &words.next()?[1..]);
                Some((id, licence.to_string()))
            })
            .collect();
        for (id, component) in &crates {
            let (name, version) = id.split_once(' ').unwrap();
            let locked = lock
                .iter()
                .find(|p| p.name == name && p.version == version)
                .unwrap_or_else(|| panic!("{target}: {id} is not in Cargo.lock"));
            assert_eq!(
                locked.source.as_deref(),
                Some("registry+https://github.com/rust-lang/crates.io-index"),
                "{id}"
            );
            assert_eq!(component["purl"], format!("pkg:cargo/{name}@{version}"));
            assert_eq!(component["hashes"][0]["alg"], "SHA-256", "{id}");
            assert_eq!(
                component["hashes"][0]["content"].as_str(),
                locked.checksum.as_deref(),
                "{target}: {id}'s checksum"
            );
            let licence = licences[id].replace('/', " OR ");
            assert_eq!(
                component["licenses"][0]["expression"], licence,
                "{target}: {id}'s licence"
            );
        }

        // Not linked: exactly the proc-macros and what only they use.
        let linked: BTreeSet<String> = cargo_tree(target, "normal,no-proc-macro", "{p}")
            .iter()
            .map(|line| {
                let mut words = line.split(' ');
                format!("{} {}", words.next().unwrap(), &words.next().unwrap()[1..])
            })
            .collect();
        for (id, component) in &crates {
            let scope = if linked.contains(id) {
                "required"
            } else {
                "excluded"
            };
            assert_eq!(component["scope"], scope, "{target}: {id}");
        }

        // The rest of what is linked, and what built it.
        let components = sbom["components"].as_array().unwrap();
        let named = |name: &str| components.iter().find(|c| c["name"] == name);
        let rustc = run(Command::new("rustc").arg("-vV"));
        let release = rustc
            .lines()
            .find_map(|l| l.strip_prefix("release: "))
            .unwrap();
        assert_eq!(named("std").expect("std")["version"], release);
        assert_eq!(named("musl").expect("musl")["scope"], "required");
        assert!(named("libunwind").is_some());
        let tools: Vec<&str> = sbom["formulation"][0]["components"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["bom-ref"].as_str().unwrap())
            .collect();
        assert_eq!(
            tools,
            ["tool:rustc", "tool:cargo", "tool:c-compiler", "tool:linker"],
            "{target}"
        );
    }
}

/// The bytes of the ELF64 little-endian section `name` of `binary`.
fn elf_section(binary: &[u8], name: &str) -> Option<Vec<u8>> {
    let u16_at = |at: usize| u16::from_le_bytes(binary[at..at + 2].try_into().unwrap()) as usize;
    let u32_at = |at: usize| u32::from_le_bytes(binary[at..at + 4].try_into().unwrap()) as usize;
    let u64_at = |at: usize| u64::from_le_bytes(binary[at..at + 8].try_into().unwrap()) as usize;
    assert_eq!(
        &binary[..6],
        b"\x7fELF\x02\x01",
        "a 64-bit little-endian ELF file"
    );
    let (headers, size, count, names) = (u64_at(0x28), u16_at(0x3a), u16_at(0x3c), u16_at(0x3e));
    let header = |i: usize| headers + i * size;
    let names_at = u64_at(header(names) + 0x18);
    (0..count).find_map(|i| {
        let at = names_at + u32_at(header(i));
        let end = at + binary[at..].iter().position(|&b| b == 0)?;
        (&binary[at..end] == name.as_bytes()).then(|| {
            let (offset, length) = (u64_at(header(i) + 0x18), u64_at(header(i) + 0x20));
            binary[offset..offset + length].to_vec()
        })
    })
}

/// `compressed` inflated by pigz (zlib format), another implementation than ours.
fn pigz_inflate(compressed: &[u8]) -> Vec<u8> {
    let mut child = Command::new("pigz")
        .arg("-zd")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("pigz");
    child.stdin.take().unwrap().write_all(compressed).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "pigz -zd: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

#[test]
fn the_dependency_list_embedded_in_each_binary_matches_its_sbom() {
    let Some(shipped) = shipped_or_skip() else {
        return;
    };
    for Shipped {
        target,
        binary,
        sbom,
    } in &shipped
    {
        let bytes = std::fs::read(binary).unwrap();
        let section = elf_section(&bytes, ".dep-v0")
            .unwrap_or_else(|| panic!("{target}: no .dep-v0 section in {}", binary.display()));
        assert_eq!(&section[..2], [0x78, 0x9c], "a zlib stream");
        let audit: Value = serde_json::from_slice(&pigz_inflate(&section)).unwrap();
        assert_eq!(audit["format"], 1);
        let packages = audit["packages"].as_array().unwrap();
        let id = |p: &Value| {
            format!(
                "{} {}",
                p["name"].as_str().unwrap(),
                p["version"].as_str().unwrap()
            )
        };

        // The same crates as the SBOM, the root marked, `kind: build` exactly where the
        // SBOM says `excluded`.
        let roots: Vec<String> = packages
            .iter()
            .filter(|p| p["root"] == true)
            .map(id)
            .collect();
        assert_eq!(roots, [format!("wavelet {}", env!("CARGO_PKG_VERSION"))]);
        let crates = sbom_crates(sbom);
        let embedded: BTreeSet<String> = packages
            .iter()
            .filter(|p| p["root"] != true)
            .map(id)
            .collect();
        assert_eq!(
            embedded,
            crates.keys().cloned().collect::<BTreeSet<_>>(),
            "{target}: the embedded list and the SBOM"
        );
        for package in packages.iter().filter(|p| p["root"] != true) {
            let component = crates[&id(package)];
            let build = package["kind"] == "build";
            assert_eq!(
                build,
                component["scope"] == "excluded",
                "{target}: {}",
                id(package)
            );
            assert_eq!(package["source"], "crates.io");
        }

        // The same edges as the SBOM's dependency graph.
        let bom_ref = |p: &Value| match p["root"] == true {
            true => format!("wavelet@{}", env!("CARGO_PKG_VERSION")),
            false => format!(
                "pkg:cargo/{}@{}",
                p["name"].as_str().unwrap(),
                p["version"].as_str().unwrap()
            ),
        };
        let graph: BTreeMap<String, BTreeSet<String>> = sbom["dependencies"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| {
                let on = d["dependsOn"].as_array().unwrap().iter();
                let on = on.map(|r| r.as_str().unwrap().to_string());
                // Only the crates: std, musl and libunwind are not in cargo's list.
                let on = on.filter(|r| r.starts_with("pkg:cargo/") || r.starts_with("wavelet@"));
                (d["ref"].as_str().unwrap().to_string(), on.collect())
            })
            .collect();
        for package in packages {
            let deps: BTreeSet<String> = package["dependencies"]
                .as_array()
                .map(|d| {
                    d.iter()
                        .map(|i| bom_ref(&packages[i.as_u64().unwrap() as usize]))
                        .collect()
                })
                .unwrap_or_default();
            assert_eq!(
                deps,
                graph[&bom_ref(package)],
                "{target}: {}'s dependencies",
                id(package)
            );
        }
    }
}

/// A package `app` with wavelet's build script and one made-up path dependency
/// `made-up-dep` under `licence`; `cargo check --offline` of it: (success, stderr).
fn check_with_made_up_dependency(dir: &Path, licence: &str) -> (bool, String) {
    let app = dir.join("app");
    let copy = |from: &str| {
        let to = app.join(from);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(repo().join(from), &to).unwrap();
    };
    copy("build.rs");
    for entry in std::fs::read_dir(repo().join("image/supply")).unwrap() {
        let name = entry.unwrap().file_name();
        copy(&format!("image/supply/{}", name.to_string_lossy()));
    }
    let write = |path: &str, text: &str| {
        let path = app.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    // wavelet's build script needs wavelet's build-dependencies: the same section.
    let manifest = std::fs::read_to_string(repo().join("Cargo.toml")).unwrap();
    let build_dependencies = manifest
        .split("\n[build-dependencies]\n")
        .nth(1)
        .map(|rest| rest.split("\n[").next().unwrap())
        .unwrap_or("");
    write(
        "Cargo.toml",
        &format!(
            "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\
             license = \"Apache-2.0\"\ndescription = \"made up\"\n\n\
             [dependencies]\nmade-up-dep = {{ path = \"made-up-dep\" }}\n\n\
             [build-dependencies]\n{build_dependencies}\n"
        ),
    );
    write("src/main.rs", "fn main() {}\n");
    write(
        "made-up-dep/Cargo.toml",
        &format!(
            "[package]\nname = \"made-up-dep\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\
             license = \"{licence}\"\n"
        ),
    );
    write("made-up-dep/src/lib.rs", "");
    let out = cargo()
        .current_dir(&app)
        .args(["check", "--offline", "--quiet"])
        .env("CARGO_TARGET_DIR", dir.join("target"))
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_made_up_dependency_with_a_forbidden_licence_fails_the_build_naming_it() {
    let dir = TempDir::new("supply-licence");

    let (built, said) = check_with_made_up_dependency(&dir.0, "GPL-3.0-only");
    assert!(!built, "a GPL-3.0-only dependency was built:\n{said}");
    assert!(
        said.contains(
            "error: dependency policy: made-up-dep v0.1.0 is licensed \"GPL-3.0-only\", \
             which the licence allow-list does not satisfy"
        ),
        "{said}"
    );

    // The same dependency under an allowed licence breaks only the source rule (a path
    // dependency is not from crates.io): the licence message above is the licence's.
    let (built, said) = check_with_made_up_dependency(&dir.0, "MIT OR Apache-2.0");
    assert!(!built, "{said}");
    assert!(
        said.contains("error: dependency policy: made-up-dep v0.1.0 is a path dependency"),
        "{said}"
    );
    assert!(!said.contains("is licensed"), "{said}");
}

/// build.rs has the toolchain's lld lay the x86_64 binary's functions out in the order
/// image/code-order/symbols.txt gives (what runs idle together: BENCHMARKS.md, "The floor,
/// and what it is made of"). A stripped binary keeps no names to check the order by, so this
/// checks that the order was applied at all: lld linked the x86_64 binary, its SBOM says
/// so and with which list, and the aarch64 binary, laid out by its default linker, claims
/// neither. A build that fell back to the default layout (no lld in the toolchain) fails it.
#[test]
fn the_x86_64_binary_is_laid_out_by_lld_with_the_code_order_and_its_sbom_says_so() {
    let Some(shipped) = shipped_or_skip() else {
        return;
    };
    let list = std::fs::read_to_string(repo().join("image/code-order/symbols.txt")).unwrap();
    let names = list.lines().filter(|l| !l.starts_with('#')).count();
    assert!(
        names > 1000,
        "image/code-order/symbols.txt names {names} functions"
    );
    for Shipped {
        target,
        binary,
        sbom,
    } in &shipped
    {
        let comment =
            elf_section(&std::fs::read(binary).unwrap(), ".comment").expect("a .comment section");
        let by_lld = String::from_utf8_lossy(&comment).contains("Linker: LLD");
        let linker = sbom["formulation"][0]["components"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["bom-ref"] == "tool:linker")
            .expect("the linker in the SBOM");
        let description = linker["description"].as_str().unwrap();
        let says_order = description.contains("image/code-order/symbols.txt");
        let x86_64 = *target == "x86_64-unknown-linux-musl";
        assert_eq!(by_lld, x86_64, "{target}: linked by lld: {comment:?}");
        assert_eq!(says_order, x86_64, "{target}: {description}");
    }
}
