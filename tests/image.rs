//! The OCI image `image/build` assembles from the two static binaries without a container
//! engine: built twice from the same commit (the second time from copies of the binaries
//! with another mtime, under another umask) it has the same index digest and the same
//! archive bytes, SBOMs included; skopeo reads it as a linux/amd64 + linux/arm64 index with
//! the commit's annotations, and each platform's SBOM attached in the same index as an
//! attestation manifest (an in-toto statement about that platform's manifest whose
//! predicate is the SBOM beside the binary); `skopeo copy --all --preserve-digests`, as the
//! release pushes it, keeps the index digest; per platform, umoci unpacks a root that holds
//! exactly `/wavelet`, the binary of that architecture, and the user, entrypoint, command
//! and port are those of `Dockerfile.scratch`. Needs skopeo, umoci and both static binaries (the aarch64 one named
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

/// The SBOM `image/binaries` writes beside `binary`.
fn sbom_of(binary: &Path) -> PathBuf {
    PathBuf::from(format!("{}.cdx.json", binary.display()))
}

/// A copy of `binary` and its SBOM in `dir` with another mtime: the image must not carry
/// file times.
fn copy_with_another_mtime(binary: &Path, dir: &Path, name: &str) -> PathBuf {
    let copy = dir.join(name);
    for (from, to) in [
        (binary.to_path_buf(), copy.clone()),
        (sbom_of(binary), sbom_of(&copy)),
    ] {
        std::fs::copy(&from, &to).unwrap();
        let mtime = std::fs::metadata(&from).unwrap().modified().unwrap()
            + std::time::Duration::from_secs(1_000);
        std::fs::File::options()
            .write(true)
            .open(&to)
            .unwrap()
            .set_modified(mtime)
            .unwrap();
    }
    copy
}

/// The blob `digest` (`sha256:…`) of the OCI layout `layout`, checked against its digest.
fn blob(layout: &Path, digest: &str) -> Vec<u8> {
    let hex = digest.strip_prefix("sha256:").expect("a sha256 digest");
    let bytes = std::fs::read(layout.join("blobs/sha256").join(hex)).unwrap();
    assert_eq!(sha256_hex(&bytes), hex, "blob {digest}");
    bytes
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
fn two_builds_of_a_commit_give_one_digest_sboms_included_and_each_platform_holds_only_its_binary() {
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
    let all = index["manifests"].as_array().unwrap();
    let platforms: Vec<&Value> = all.iter().map(|m| &m["platform"]).collect();
    let unknown = json!({"architecture": "unknown", "os": "unknown"});
    assert_eq!(
        platforms,
        [
            &json!({"architecture": "amd64", "os": "linux"}),
            &json!({"architecture": "arm64", "os": "linux", "variant": "v8"}),
            &unknown,
            &unknown,
        ]
    );
    let (manifests, attestations) = all.split_at(2);
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

    // 3. Per platform, its SBOM: an attestation manifest in the index that names the
    // platform's manifest, whose one layer is an in-toto statement about that manifest
    // with the SBOM beside the binary as its predicate.
    let layout = first.join("wavelet-image");
    for (manifest, binary) in manifests.iter().zip([&binaries.amd64, &binaries.arm64]) {
        let arch = manifest["platform"]["architecture"].as_str().unwrap();
        let digest = manifest["digest"].as_str().unwrap();
        let found: Vec<&Value> = attestations
            .iter()
            .filter(|a| a["annotations"]["vnd.docker.reference.digest"] == digest)
            .collect();
        assert_eq!(
            found.len(),
            1,
            "{arch}: one attestation manifest names {digest}"
        );
        let attestation = found[0];
        assert_eq!(
            attestation["annotations"]["vnd.docker.reference.type"],
            "attestation-manifest"
        );
        assert_eq!(
            attestation["mediaType"],
            "application/vnd.oci.image.manifest.v1+json"
        );
        let bytes = blob(&layout, attestation["digest"].as_str().unwrap());
        assert_eq!(attestation["size"], bytes.len());
        let attestation: Value = serde_json::from_slice(&bytes).unwrap();
        let layers = attestation["layers"].as_array().unwrap();
        assert_eq!(layers.len(), 1, "{arch}: one statement");
        assert_eq!(layers[0]["mediaType"], "application/vnd.in-toto+json");
        assert_eq!(
            layers[0]["annotations"]["in-toto.io/predicate-type"],
            "https://cyclonedx.org/bom"
        );
        let config: Value = serde_json::from_slice(&blob(
            &layout,
            attestation["config"]["digest"].as_str().unwrap(),
        ))
        .unwrap();
        assert_eq!(config["rootfs"]["diff_ids"], json!([layers[0]["digest"]]));
        let statement: Value =
            serde_json::from_slice(&blob(&layout, layers[0]["digest"].as_str().unwrap())).unwrap();
        assert_eq!(statement["_type"], "https://in-toto.io/Statement/v1");
        assert_eq!(statement["predicateType"], "https://cyclonedx.org/bom");
        assert_eq!(
            statement["subject"][0]["digest"]["sha256"].as_str(),
            digest.strip_prefix("sha256:"),
            "{arch}: the statement is about the platform's manifest"
        );
        let sbom: Value = serde_json::from_slice(&std::fs::read(sbom_of(binary)).unwrap()).unwrap();
        assert_eq!(
            statement["predicate"], sbom,
            "{arch}: the SBOM beside the binary"
        );
        assert_eq!(sbom["bomFormat"], "CycloneDX");
    }

    // 4. Copied as the release pushes it (every manifest, digests preserved), the index
    // keeps its digest, the attestations with it.
    let pushed = dir.0.join("pushed");
    run(Command::new("skopeo")
        .args(["copy", "--all", "--preserve-digests"])
        .arg(&image)
        .arg(format!("oci:{}:pushed", pushed.display())));
    let pushed_index: Value =
        serde_json::from_slice(&std::fs::read(pushed.join("index.json")).unwrap()).unwrap();
    assert_eq!(pushed_index["manifests"][0]["digest"], digest.as_str());
    for attestation in attestations {
        blob(&pushed, attestation["digest"].as_str().unwrap());
    }

    // 5. Per platform: the config of Dockerfile.scratch, and one file, that platform's binary.
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

/// `image/out-dir` on `messages` (Cargo's JSON lines): its exit success, stdout and stderr.
fn out_dir_of(messages: &str) -> (bool, String, String) {
    use std::io::Write;
    let mut child = Command::new("bash")
        .arg(repo().join("image/out-dir"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("bash image/out-dir");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(messages.as_bytes()).expect("write");
    drop(stdin);
    let out = child.wait_with_output().expect("image/out-dir");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// One `build-script-executed` message as Cargo writes it.
fn build_script_message(package_id: &str, out_dir: &str) -> String {
    json!({
        "reason": "build-script-executed",
        "package_id": package_id,
        "linked_libs": [],
        "linked_paths": [],
        "cfgs": [],
        "env": [],
        "out_dir": out_dir,
    })
    .to_string()
}

#[test]
fn out_dir_finds_wavelets_build_script_whatever_the_checkout_folder_is_called() {
    let ring = build_script_message(
        "registry+https://github.com/rust-lang/crates.io-index#ring@0.17.14",
        "/t/release/build/ring-1/out",
    );
    // A path dependency inside a checkout called wavelet is not wavelet.
    let vendored = build_script_message(
        "path+file:///src/wavelet/vendor/helper#0.1.0",
        "/t/release/build/helper-1/out",
    );
    for package_id in [
        // The folder has another name than the package.
        "path+file:///home/me/x#wavelet@0.1.0",
        // `git clone …` into a folder named `wavelet`: Cargo leaves the name out.
        "path+file:///home/me/wavelet#0.1.0",
        // Cargo before 1.77.
        "wavelet 0.1.0 (path+file:///home/me/x)",
    ] {
        let messages = [
            ring.clone(),
            vendored.clone(),
            build_script_message(package_id, "/t/release/build/wavelet-2/out"),
        ]
        .join("\n");
        let (ok, stdout, stderr) = out_dir_of(&messages);
        assert!(ok, "{package_id}: {stderr}");
        assert_eq!(stdout, "/t/release/build/wavelet-2/out\n", "{package_id}");
    }
    let (ok, stdout, stderr) = out_dir_of(&[ring, vendored].join("\n"));
    assert!(!ok && stdout.is_empty(), "{stdout}");
    assert!(
        stderr.contains("no build-script-executed message of package wavelet"),
        "{stderr}"
    );
}
