//! The OCI image `image/build` assembles from the two static binaries without a container
//! engine: built twice from the same commit (the second time from copies of the binaries
//! with another mtime, under another umask) it has the same index digest and the same
//! archive bytes; skopeo reads it as a linux/amd64 + linux/arm64 index with the commit's
//! annotations; per platform, umoci unpacks a root that holds exactly `/wavelet`, the
//! binary of that architecture, and the user, entrypoint, command and port are those of
//! `Dockerfile.scratch`. Needs skopeo, umoci and both static binaries (the aarch64 one named
//! by WAVELET_AARCH64_BINARY); `bash .ci/run` provides all. Under CI a missing one fails
//! the test; elsewhere it says that it did not run, and how to run it.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::chroot::{decide, musl_binary, Decision};
use crate::util::TempDir;

const HOW_TO_RUN: &str = "run `bash .ci/run`, or: apt-get install skopeo umoci \
gcc-aarch64-linux-gnu musl-tools && image/binaries && \
WAVELET_AARCH64_BINARY=target/aarch64-unknown-linux-musl/release/wavelet cargo test \
--test integration image::";

/// The two static binaries the image ships.
struct Binaries {
    amd64: PathBuf,
    arm64: PathBuf,
}

fn needs() -> Result<Binaries, String> {
    for tool in ["skopeo", "umoci"] {
        let found = Command::new(tool)
            .arg("--version")
            .output()
            .is_ok_and(|out| out.status.success());
        if !found {
            return Err(format!("{tool} is not installed: {HOW_TO_RUN}"));
        }
    }
    let arm64 = std::env::var_os("WAVELET_AARCH64_BINARY")
        .map(PathBuf::from)
        .ok_or_else(|| format!("WAVELET_AARCH64_BINARY is not set: {HOW_TO_RUN}"))?;
    if !arm64.is_file() {
        return Err(format!(
            "WAVELET_AARCH64_BINARY={} is not a file: {HOW_TO_RUN}",
            arm64.display()
        ));
    }
    Ok(Binaries {
        amd64: musl_binary()?,
        arm64,
    })
}

/// The image config `Dockerfile.scratch` describes.
struct Dockerfile {
    user: String,
    port: String,
    entrypoint: Value,
    cmd: Value,
}

fn dockerfile() -> Dockerfile {
    let text = std::fs::read_to_string(repo().join("Dockerfile.scratch")).unwrap();
    let one = |instruction: &str| {
        let values: Vec<&str> = text
            .lines()
            .filter_map(|line| line.strip_prefix(instruction)?.strip_prefix(' '))
            .collect();
        assert_eq!(values.len(), 1, "{instruction} lines in Dockerfile.scratch");
        values[0].to_string()
    };
    Dockerfile {
        user: one("USER"),
        port: one("EXPOSE"),
        entrypoint: serde_json::from_str(&one("ENTRYPOINT")).expect("ENTRYPOINT exec form"),
        cmd: serde_json::from_str(&one("CMD")).expect("CMD exec form"),
    }
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs `command`, failing the test unless it succeeds; its stdout.
fn run(command: &mut Command) -> Vec<u8> {
    let out = command
        .output()
        .unwrap_or_else(|e| panic!("{command:?}: {e}"));
    assert!(
        out.status.success(),
        "{command:?}: {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

fn run_json(command: &mut Command) -> Value {
    serde_json::from_slice(&run(command)).expect("JSON from skopeo")
}

fn git(args: &[&str]) -> String {
    let out = run(Command::new("git").current_dir(repo()).args(args));
    String::from_utf8(out).unwrap().trim().to_string()
}

/// `image/build` with the binaries at `amd64` and `arm64`, writing into `out` under
/// `umask`; the index digest it printed.
fn build(amd64: &Path, arm64: &Path, out: &Path, umask: &str) -> String {
    let printed = run(Command::new("sh")
        .current_dir(repo())
        .args(["-c", "umask \"$1\" && exec bash image/build \"$2\" \"$3\""])
        .args(["sh", umask])
        .args([amd64, arm64])
        .env("WAVELET_IMAGE_DIR", out)
        .env_remove("SOURCE_DATE_EPOCH"));
    let printed = String::from_utf8(printed).unwrap();
    printed
        .lines()
        .find_map(|line| line.strip_prefix("index digest: "))
        .unwrap_or_else(|| panic!("no index digest in:\n{printed}"))
        .to_string()
}

/// A copy of `binary` in `dir` with another mtime: the image must not carry file times.
fn copy_with_another_mtime(binary: &Path, dir: &Path, name: &str) -> PathBuf {
    let copy = dir.join(name);
    std::fs::copy(binary, &copy).unwrap();
    let mtime = std::fs::metadata(binary).unwrap().modified().unwrap()
        + std::time::Duration::from_secs(1_000);
    std::fs::File::options()
        .write(true)
        .open(&copy)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    copy
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn is_root() -> bool {
    String::from_utf8(run(Command::new("id").arg("-u")))
        .unwrap()
        .trim()
        == "0"
}

#[test]
fn two_builds_of_a_commit_give_one_digest_and_each_platform_holds_only_its_binary() {
    let binaries = match decide(needs(), std::env::var_os("CI").is_some()) {
        Decision::Run(binaries) => binaries,
        Decision::Skip(why) => {
            // Past the test harness's output capture: a skip must be seen.
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "image test did not run: {why}");
            return;
        }
        Decision::Fail(why) => panic!("{why}"),
    };
    let dir = TempDir::new("image");

    // 1. Reproducible: another mtime on the inputs and another umask change nothing.
    let first = dir.0.join("first");
    let digest = build(&binaries.amd64, &binaries.arm64, &first, "022");
    let inputs = dir.0.join("inputs");
    std::fs::create_dir(&inputs).unwrap();
    let second = dir.0.join("second");
    let again = build(
        &copy_with_another_mtime(&binaries.amd64, &inputs, "amd64"),
        &copy_with_another_mtime(&binaries.arm64, &inputs, "arm64"),
        &second,
        "077",
    );
    assert_eq!(digest, again, "two builds of one commit");
    let archive = first.join("wavelet-image.tar");
    assert!(
        std::fs::read(&archive).unwrap()
            == std::fs::read(second.join("wavelet-image.tar")).unwrap(),
        "the two oci-archive files differ"
    );
    let image = format!("oci-archive:{}", archive.display());

    // 2. The index skopeo reads is the one whose digest was printed, for two platforms,
    // annotated with this commit.
    let raw = run(Command::new("skopeo").args(["inspect", "--raw", &image]));
    assert_eq!(format!("sha256:{}", sha256_hex(&raw)), digest);
    let index: Value = serde_json::from_slice(&raw).unwrap();
    assert_eq!(
        index["mediaType"],
        "application/vnd.oci.image.index.v1+json"
    );
    let manifests = index["manifests"].as_array().unwrap();
    let platforms: Vec<&Value> = manifests.iter().map(|m| &m["platform"]).collect();
    assert_eq!(
        platforms,
        [
            &json!({"architecture": "amd64", "os": "linux"}),
            &json!({"architecture": "arm64", "os": "linux", "variant": "v8"}),
        ]
    );
    let created = wavelet::time::rfc3339(git(&["log", "-1", "--format=%ct"]).parse().unwrap());
    let annotations = &index["annotations"];
    assert_eq!(
        annotations["org.opencontainers.image.revision"],
        git(&["rev-parse", "HEAD"])
    );
    assert_eq!(
        annotations["org.opencontainers.image.version"],
        env!("CARGO_PKG_VERSION")
    );
    assert_eq!(annotations["org.opencontainers.image.created"], created);

    // 3. Per platform: the config of Dockerfile.scratch, and one file, that platform's binary.
    let dockerfile = dockerfile();
    let (uid, gid) = dockerfile.user.split_once(':').expect("USER uid:gid");
    let root = is_root();
    for (manifest, binary) in manifests.iter().zip([&binaries.amd64, &binaries.arm64]) {
        let arch = manifest["platform"]["architecture"].as_str().unwrap();
        let select = ["--override-os", "linux", "--override-arch", arch];

        let inspected = run_json(
            Command::new("skopeo")
                .arg("inspect")
                .args(select)
                .arg(&image),
        );
        assert_eq!(inspected["Architecture"], arch);
        assert_eq!(inspected["Layers"].as_array().unwrap().len(), 1, "{arch}");

        let config = run_json(
            Command::new("skopeo")
                .args(["inspect", "--config"])
                .args(select)
                .arg(&image),
        );
        assert_eq!(config["architecture"], arch);
        assert_eq!(config["created"], created);
        assert_eq!(config["config"]["User"], dockerfile.user, "{arch}");
        assert_eq!(
            config["config"]["Entrypoint"], dockerfile.entrypoint,
            "{arch}"
        );
        assert_eq!(config["config"]["Cmd"], dockerfile.cmd, "{arch}");
        assert_eq!(
            config["config"]["ExposedPorts"],
            json!({format!("{}/tcp", dockerfile.port): {}}),
            "{arch}"
        );

        // umoci unpacks one image of a layout: copy this platform's out, byte for byte.
        let layout = dir.0.join(format!("layout-{arch}"));
        run(Command::new("skopeo")
            .arg("copy")
            .args(select)
            .arg(&image)
            .arg(format!("oci:{}:{arch}", layout.display())));
        let copied: Value =
            serde_json::from_slice(&std::fs::read(layout.join("index.json")).unwrap()).unwrap();
        assert_eq!(
            copied["manifests"][0]["digest"], manifest["digest"],
            "skopeo copied the {arch} manifest unchanged"
        );
        let bundle = dir.0.join(format!("bundle-{arch}"));
        let mut unpack = Command::new("umoci");
        unpack.arg("unpack");
        if !root {
            unpack.arg("--rootless");
        }
        run(unpack
            .arg("--image")
            .arg(format!("{}:{arch}", layout.display()))
            .arg(&bundle));

        let rootfs = bundle.join("rootfs");
        let entries: Vec<String> = std::fs::read_dir(&rootfs)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(entries, ["wavelet"], "the {arch} root holds one file");
        let file = std::fs::symlink_metadata(rootfs.join("wavelet")).unwrap();
        assert!(file.is_file(), "{arch}: /wavelet is a regular file");
        assert_eq!(
            format!("{:o}", file.permissions().mode() & 0o7777),
            "755",
            "{arch}: the mode of /wavelet"
        );
        if root {
            assert_eq!((file.uid(), file.gid()), (0, 0), "{arch}");
        }
        assert!(
            std::fs::read(rootfs.join("wavelet")).unwrap() == std::fs::read(binary).unwrap(),
            "{arch}: /wavelet is not {}",
            binary.display()
        );

        let runtime: Value =
            serde_json::from_slice(&std::fs::read(bundle.join("config.json")).unwrap()).unwrap();
        let process = &runtime["process"];
        assert_eq!(process["user"]["uid"].to_string(), uid, "{arch}");
        assert_eq!(process["user"]["gid"].to_string(), gid, "{arch}");
        let mut args = dockerfile.entrypoint.as_array().unwrap().clone();
        args.extend(dockerfile.cmd.as_array().unwrap().iter().cloned());
        assert_eq!(process["args"], Value::Array(args), "{arch}");
    }
}
