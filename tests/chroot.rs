//! The binary `Dockerfile.scratch` ships runs with nothing else on the filesystem: the
//! static musl build, copied alone into an empty directory, run there with `chroot` (no
//! libc, no /etc, no /proc, no CA bundle), answers `version` and syncs against the fake
//! API server. Needs root and the musl binary; `bash .ci/run` provides both. Under CI a
//! missing one fails the test; elsewhere it says that it did not run, and why.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;

use crate::fake::FakeApi;
use crate::util::*;

const TARGET: &str = "x86_64-unknown-linux-musl";

const HOW_TO_BUILD: &str = "build it with `bash .ci/run`, or: rustup target add \
x86_64-unknown-linux-musl && apt-get install -y musl-tools && \
CC_x86_64_unknown_linux_musl=musl-gcc cargo build --release --locked --target \
x86_64-unknown-linux-musl (or point WAVELET_MUSL_BINARY at one)";

/// `$WAVELET_MUSL_BINARY`, or the release musl build in this target directory; `Err`
/// says why there is none to run (missing, or older than the sources).
pub fn musl_binary() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os("WAVELET_MUSL_BINARY") {
        let path = PathBuf::from(path);
        if !path.is_file() {
            return Err(format!(
                "WAVELET_MUSL_BINARY={} is not a file: {HOW_TO_BUILD}",
                path.display()
            ));
        }
        return Ok(path);
    }
    // CARGO_BIN_EXE_wavelet is <target dir>/<profile>/wavelet.
    let target_dir = Path::new(env!("CARGO_BIN_EXE_wavelet"))
        .parent()
        .and_then(Path::parent)
        .expect("the target directory");
    let binary = target_dir.join(TARGET).join("release").join("wavelet");
    let built = std::fs::metadata(&binary)
        .and_then(|m| m.modified())
        .map_err(|_| format!("no static binary at {}: {HOW_TO_BUILD}", binary.display()))?;
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for path in source_files(&src) {
        let changed = std::fs::metadata(&path).unwrap().modified().unwrap();
        if changed > built {
            return Err(format!(
                "{} is older than {}: {HOW_TO_BUILD}",
                binary.display(),
                path.display()
            ));
        }
    }
    Ok(binary)
}

/// Whether the test runs, given what it needs (`Err`: why it cannot) and whether this is
/// CI. CI must run it, so there a missing precondition fails the test; elsewhere (a
/// contributor's `cargo test` as a normal user) it says that it did not run, and why.
#[derive(Debug, PartialEq)]
pub enum Decision<T> {
    Run(T),
    Skip(String),
    Fail(String),
}

pub fn decide<T>(needs: Result<T, String>, ci: bool) -> Decision<T> {
    match needs {
        Ok(value) => Decision::Run(value),
        Err(why) if ci => Decision::Fail(why),
        Err(why) => Decision::Skip(why),
    }
}

#[test]
fn without_root_or_binary_it_fails_under_ci_and_says_why_it_skipped_elsewhere() {
    let missing: Result<(), String> = Err("chroot needs root".into());
    assert_eq!(
        decide(missing.clone(), true),
        Decision::Fail("chroot needs root".into())
    );
    assert_eq!(
        decide(missing, false),
        Decision::Skip("chroot needs root".into())
    );
    assert_eq!(decide(Ok(7), true), Decision::Run(7));
    assert_eq!(decide(Ok(7), false), Decision::Run(7));
}

/// Every file under `dir`, in its subfolders too (`src/` has one folder per concept).
fn source_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(source_files(&path));
        } else {
            files.push(path);
        }
    }
    files
}

/// An empty directory holding only `/wavelet`; removed on drop.
struct Root(PathBuf);

impl Root {
    fn with_binary(binary: &Path) -> Root {
        let dir = std::env::temp_dir().join(format!(
            "wavelet-chroot-{}-{:?}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        std::fs::create_dir(&dir).unwrap();
        std::fs::copy(binary, dir.join("wavelet")).unwrap();
        let entries: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
        assert_eq!(
            entries.len(),
            1,
            "the root holds the binary and nothing else"
        );
        Root(dir)
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(chroot_program());
        command.arg(&self.0).arg("/wavelet").args(args).env_clear();
        command
    }
}

impl Drop for Root {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `chroot` from $PATH, found before the child's environment is cleared.
fn chroot_program() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
        .map(|dir| dir.join("chroot"))
        .find(|candidate| candidate.is_file())
        .expect("chroot (coreutils) is not installed")
}

fn is_root() -> Result<(), String> {
    let out = Command::new("id")
        .arg("-u")
        .output()
        .map_err(|e| format!("running id -u: {e}"))?;
    if String::from_utf8_lossy(&out.stdout).trim() == "0" {
        Ok(())
    } else {
        Err("chroot needs root: run the suite as root (CI does), e.g. `sudo bash .ci/run`".into())
    }
}

#[test]
fn the_static_binary_runs_alone_in_an_empty_root() {
    let needs = is_root().and_then(|()| musl_binary());
    let binary = match decide(needs, std::env::var_os("CI").is_some()) {
        Decision::Run(binary) => binary,
        Decision::Skip(why) => {
            // Past the test harness's output capture: a skip must be seen.
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "chroot test did not run: {why}");
            return;
        }
        Decision::Fail(why) => panic!("{why}"),
    };
    let root = Root::with_binary(&binary);

    let out = root.command(&["version"]).output().expect("running chroot");
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && printed.contains(env!("CARGO_PKG_VERSION")),
        "`wavelet version` in the empty root: {}\n{printed}{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );

    let fake = FakeApi::start();
    fake.apply(configmap("apps", "app-config", &[("color", "blue")]));
    fake.apply(workload(
        "Deployment",
        "apps",
        "web",
        opted_in(),
        json!({"containers": [{"name": "app", "image": "nginx",
                "envFrom": [{"configMapRef": {"name": "app-config"}}]}]}),
    ));
    let url = fake.url();
    let mut command = root.command(&["run", "--server", &url, "--listen-addr", "127.0.0.1:0"]);
    command.args(FAST).env("RUST_LOG", "info");
    let wavelet = Wavelet::spawn(command);
    eventually(&fake, &wavelet, "the Deployment adopted", |f| {
        hashes(f, "deployments", "apps", "web", "wavelet.dev/config-hash").1
            == Some(expected_hash(f, "deployments", "apps", "web"))
    });
    fake.merge_patch(
        "configmaps",
        "apps",
        "app-config",
        json!({"data": {"color": "red"}}),
    );
    eventually(&fake, &wavelet, "a rollout after the change", |f| {
        template_patches(f, "deployments", "apps", "web") == 1
    });
    let output = wavelet.kill();
    assert!(output.contains("initial sync complete"), "{output}");
}
