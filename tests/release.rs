//! The release workflow `.github/workflows/release.yml`, which runs only on GitHub, checked
//! as far as it can be here: it runs on pushed `v*` tags; it stops at once without the
//! variable SHARED_REPOSITORY; it checks the tag with `image/check-tag`, then runs
//! `bash .ci/run` in a checkout beside ../shared, so a release is tested exactly as CI;
//! every `run:` script is valid bash, takes `${{ }}` expressions only through `env:`, and
//! names only repository paths that exist; no step prints a secret. And `image/check-tag`
//! accepts `v` and Cargo.toml's version, and refuses another tag, or a Chart.yaml
//! `version`/`appVersion` or values.yaml `image.tag` that is not Cargo.toml's version,
//! naming both versions.
//!
//! The supply chain: the job that builds and tests can write nothing and gets no OIDC
//! token; the one that publishes pushes the image with its digest checked, writes a
//! provenance statement per artifact (`image/provenance`, run here with GitHub's
//! variables: subject, source commit, build command and builder image), signs the index
//! digest, the image's provenance, each file's provenance and SHA256SUMS keylessly with
//! cosign, and publishes the SBOMs; the provenance names the command and the container
//! the build job really used; the book's verify commands and Kyverno policy name the
//! identity the workflow signs with.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{json, Value};

use crate::util::TempDir;

const VERSION: &str = env!("CARGO_PKG_VERSION");

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn workflow() -> Value {
    let text = std::fs::read_to_string(repo().join(".github/workflows/release.yml"))
        .expect(".github/workflows/release.yml");
    wavelet::client::yaml::parse(&text).unwrap_or_else(|e| panic!("release.yml: {e}"))
}

/// Every step of every job, in order.
fn steps(workflow: &Value) -> Vec<&Value> {
    let jobs = workflow["jobs"].as_object().expect("jobs");
    assert!(!jobs.is_empty(), "release.yml has no job");
    jobs.values()
        .flat_map(|job| job["steps"].as_array().expect("a job's steps"))
        .collect()
}

/// The `run:` scripts, each with its step's name (or its script) to say which one failed.
fn scripts(workflow: &Value) -> Vec<(String, &str)> {
    steps(workflow)
        .into_iter()
        .filter_map(|step| {
            let script = step["run"].as_str()?;
            let name = step["name"].as_str().unwrap_or(script).to_string();
            Some((name, script))
        })
        .collect()
}

/// The index of the first step whose script has the line `command`.
fn step_running(steps: &[&Value], command: &str) -> Option<usize> {
    steps.iter().position(|step| {
        step["run"]
            .as_str()
            .is_some_and(|script| script.lines().any(|line| line.trim() == command))
    })
}

/// `bash image/check-tag TAG` with the script of `root`.
fn check_tag(root: &Path, tag: &str) -> Output {
    Command::new("bash")
        .arg(root.join("image/check-tag"))
        .arg(tag)
        .output()
        .expect("bash")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn the_release_runs_on_pushed_v_tags_only() {
    // YAML 1.2: `on` is the string "on", not the boolean of YAML 1.1.
    assert_eq!(workflow()["on"], json!({"push": {"tags": ["v*"]}}));
}

#[test]
fn the_release_checks_the_tag_then_runs_ci_in_a_checkout_beside_shared() {
    let workflow = workflow();
    let steps = steps(&workflow);
    let job = workflow["jobs"]
        .as_object()
        .unwrap()
        .values()
        .next()
        .unwrap();
    assert_eq!(job["defaults"]["run"]["working-directory"], "wavelet");
    let checkout = |path: &str| {
        steps.iter().position(|step| {
            step["uses"]
                .as_str()
                .is_some_and(|uses| uses.starts_with("actions/checkout@"))
                && step["with"]["path"] == path
        })
    };
    let wavelet = checkout("wavelet").expect("a checkout into wavelet/");
    let shared = checkout("shared").expect("a checkout of ../shared into shared/");
    assert_eq!(
        steps[shared]["with"]["repository"],
        "${{ vars.SHARED_REPOSITORY }}"
    );
    let tag = step_running(&steps, "bash image/check-tag \"$TAG\"").expect("image/check-tag");
    assert_eq!(steps[tag]["env"]["TAG"], "${{ github.ref_name }}");
    let ci = step_running(&steps, "bash .ci/run").expect("a step runs `bash .ci/run`");
    assert!(
        wavelet < tag && shared < tag && tag < ci,
        "checkouts, then the tag check, then CI"
    );
}

#[test]
fn the_release_stops_at_once_without_the_shared_repository_variable() {
    let workflow = workflow();
    let steps = steps(&workflow);
    let check = steps
        .iter()
        .position(|step| step["env"]["SHARED_REPOSITORY"] == "${{ vars.SHARED_REPOSITORY }}")
        .expect("a step that checks vars.SHARED_REPOSITORY");
    let shared = steps
        .iter()
        .position(|step| step["with"]["path"] == "shared")
        .unwrap();
    assert!(check < shared, "the variable is checked before it is used");
    let script = steps[check]["run"].as_str().unwrap();
    let run = |value: &str| {
        Command::new("bash")
            .args(["-c", script])
            .env("SHARED_REPOSITORY", value)
            .output()
            .unwrap()
    };
    let unset = run("");
    let said = text(&unset.stdout);
    assert!(!unset.status.success(), "unset: {said}");
    assert!(
        said.contains("::error::") && said.contains("SHARED_REPOSITORY"),
        "a GitHub error annotation naming the variable: {said}"
    );
    let set = run("example/shared");
    assert!(set.status.success(), "set: {}", text(&set.stdout));
}

#[test]
fn every_run_script_is_valid_bash_and_takes_expressions_only_through_env() {
    let workflow = workflow();
    let scripts = scripts(&workflow);
    assert!(!scripts.is_empty());
    for (name, script) in scripts {
        let out = Command::new("bash")
            .args(["-n", "-c", script])
            .output()
            .unwrap();
        assert!(out.status.success(), "{name}: {}", text(&out.stderr));
        // A tag name may hold `$(...)`: spliced into a script, it would run.
        assert!(
            !script.contains("${{"),
            "{name}: an expression in the script"
        );
    }
}

/// Every path a run script names, from the checkout (the working directory), is there:
/// a word whose first component is at the repository's root is a repository path.
/// `target/` is what CI builds.
#[test]
fn every_repository_path_a_run_script_names_exists() {
    let workflow = workflow();
    let root = repo();
    let mut checked = Vec::new();
    for (name, script) in scripts(&workflow) {
        let words = script.split(|c: char| c.is_whitespace() || "\"'<>|;&()=".contains(c));
        for word in words {
            let Some((first, _)) = word.split_once('/') else {
                continue;
            };
            if first.is_empty() || first == "target" || !root.join(first).exists() {
                continue;
            }
            assert!(root.join(word).exists(), "{name}: {word} does not exist");
            checked.push(word.to_string());
        }
    }
    for named in [".ci/run", "image/check-tag", "charts/wavelet"] {
        assert!(
            checked.iter().any(|word| word == named),
            "{named} not named"
        );
    }
}

#[test]
fn no_step_prints_a_secret_and_registries_read_the_token_from_stdin() {
    let workflow = workflow();
    for (name, script) in scripts(&workflow) {
        for line in script.lines() {
            let words: Vec<&str> = line.split_whitespace().collect();
            let prints = words
                .iter()
                .any(|word| ["echo", "printf", "cat"].contains(word));
            let secret = ["secrets.", "GITHUB_TOKEN", "github.token"]
                .iter()
                .any(|secret| line.contains(secret));
            assert!(!(prints && secret), "{name} prints a secret: {line}");
            if words.contains(&"login") {
                assert!(
                    words.contains(&"--password-stdin"),
                    "{name}: a login without --password-stdin: {line}"
                );
            }
        }
    }
}

#[test]
fn check_tag_accepts_v_and_the_cargo_version() {
    let out = check_tag(&repo(), &format!("v{VERSION}"));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), VERSION);
}

#[test]
fn check_tag_refuses_another_version_and_names_both() {
    let out = check_tag(&repo(), "v999.0.0");
    assert!(!out.status.success());
    let said = text(&out.stderr);
    assert!(
        said.contains(&format!("Cargo.toml says {VERSION}, the tag says 999.0.0")),
        "{said}"
    );
    assert!(said.contains(&format!("or tag v{VERSION}")), "{said}");
}

#[test]
fn check_tag_refuses_a_chart_version_app_version_or_image_tag_that_is_not_the_cargo_version() {
    let cases = [
        (
            "Chart.yaml",
            "version:",
            "version: 999.0.0",
            "Chart.yaml's version",
        ),
        (
            "Chart.yaml",
            "appVersion:",
            "appVersion: \"999.0.0\"",
            "Chart.yaml's appVersion",
        ),
        (
            "values.yaml",
            "  tag:",
            "  tag: 999.0.0",
            "values.yaml's image.tag",
        ),
    ];
    for (file, prefix, replacement, named) in cases {
        let dir = TempDir::new("check-tag");
        for path in [
            "image/check-tag",
            "Cargo.toml",
            "charts/wavelet/Chart.yaml",
            "charts/wavelet/values.yaml",
        ] {
            let to = dir.0.join(path);
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::copy(repo().join(path), to).unwrap();
        }
        // The first line with `prefix` (values.yaml's first `  tag:` is image.tag).
        let path = dir.0.join("charts/wavelet").join(file);
        let original = std::fs::read_to_string(&path).unwrap();
        let line = original
            .lines()
            .find(|line| line.starts_with(prefix))
            .unwrap_or_else(|| panic!("{file} has no {prefix}"));
        std::fs::write(&path, original.replacen(line, replacement, 1)).unwrap();

        let out = check_tag(&dir.0, &format!("v{VERSION}"));
        assert!(!out.status.success(), "{file} {replacement}");
        let said = text(&out.stderr);
        assert!(
            said.contains(&format!(
                "Cargo.toml says {VERSION}, charts/wavelet/{named} says 999.0.0"
            )),
            "{said}"
        );
    }
}

/// The job `name` of the workflow.
fn job<'a>(workflow: &'a Value, name: &str) -> &'a Value {
    let job = &workflow["jobs"][name];
    assert!(job.is_object(), "release.yml has no job {name}");
    job
}

/// The index of the step of `steps` whose script has a line starting with `start`.
fn step_starting(steps: &[Value], start: &str) -> usize {
    steps
        .iter()
        .position(|step| {
            step["run"]
                .as_str()
                .is_some_and(|script| script.lines().any(|l| l.trim().starts_with(start)))
        })
        .unwrap_or_else(|| panic!("no step runs `{start}…`"))
}

#[test]
fn the_build_job_can_write_nothing_and_only_the_publish_job_gets_an_oidc_token() {
    let workflow = workflow();
    assert_eq!(workflow["permissions"], json!({}), "nothing by default");
    let build = job(&workflow, "build");
    assert_eq!(build["permissions"], json!({"contents": "read"}));
    let publish = job(&workflow, "publish");
    assert_eq!(publish["needs"], "build");
    assert_eq!(
        publish["permissions"],
        json!({"contents": "write", "packages": "write", "id-token": "write"})
    );
    // The tests and every dependency's build script run in build; only publish signs.
    let build_steps = build["steps"].as_array().unwrap();
    assert!(build_steps
        .iter()
        .all(|s| !s["run"].as_str().unwrap_or("").contains("cosign")));
    step_running(&build_steps.iter().collect::<Vec<_>>(), "bash .ci/run").expect("CI in build");
}

#[test]
fn the_release_files_carry_each_binarys_sbom_from_build_to_publish() {
    let workflow = workflow();
    let build = job(&workflow, "build")["steps"].as_array().unwrap().clone();
    let files = build
        .iter()
        .find(|s| s["name"] == "Release files")
        .expect("a Release files step");
    // Run it where the build left its outputs (a stub helm packages the chart).
    let dir = TempDir::new("release-files");
    let write = |path: &str, contents: &str| {
        let path = dir.0.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, contents).unwrap();
        path
    };
    for arch in ["x86_64", "aarch64"] {
        let built = format!("target/{arch}-unknown-linux-musl/release/wavelet");
        write(&built, &format!("{arch} binary"));
        write(&format!("{built}.cdx.json"), &format!("{arch} sbom"));
    }
    write("target/wavelet-image.tar", "image");
    let helm = write(
        "target/k8s-bin/helm",
        "#!/bin/sh\n[ \"$*\" = \"package charts/wavelet --destination target/dist\" ] && echo chart >target/dist/wavelet-0.1.0.tgz\n",
    );
    std::fs::set_permissions(&helm, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let out = Command::new("bash")
        .args(["-e", "-c", files["run"].as_str().unwrap()])
        .current_dir(&dir.0)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let dist = |name: &str| {
        std::fs::read_to_string(dir.0.join("target/dist").join(name))
            .unwrap_or_else(|e| panic!("target/dist/{name}: {e}"))
    };
    assert_eq!(dist("wavelet-linux-amd64"), "x86_64 binary");
    assert_eq!(dist("wavelet-linux-amd64.cdx.json"), "x86_64 sbom");
    assert_eq!(dist("wavelet-linux-arm64"), "aarch64 binary");
    assert_eq!(dist("wavelet-linux-arm64.cdx.json"), "aarch64 sbom");
    assert_eq!(dist("wavelet-image.tar"), "image");
    assert_eq!(dist("wavelet-0.1.0.tgz"), "chart\n");

    let upload = build
        .iter()
        .find(|s| {
            s["uses"]
                .as_str()
                .is_some_and(|u| u.starts_with("actions/upload-artifact@"))
        })
        .expect("the build job uploads the release files");
    let publish = job(&workflow, "publish")["steps"]
        .as_array()
        .unwrap()
        .clone();
    let download = publish
        .iter()
        .find(|s| {
            s["uses"]
                .as_str()
                .is_some_and(|u| u.starts_with("actions/download-artifact@"))
        })
        .expect("the publish job downloads them");
    assert_eq!(upload["with"]["name"], download["with"]["name"]);
    assert_eq!(upload["with"]["path"], "wavelet/target/dist/");
    assert_eq!(download["with"]["path"], "wavelet/target/dist");
    let sums = &publish[step_starting(&publish, "sha256sum ")]["run"];
    assert!(sums.as_str().unwrap().contains("wavelet-linux-*.cdx.json"));
}

#[test]
fn publish_pushes_the_image_then_writes_provenance_then_signs_the_index_digest_and_each_artifact() {
    let workflow = workflow();
    let steps = job(&workflow, "publish")["steps"]
        .as_array()
        .unwrap()
        .clone();
    let installer = steps
        .iter()
        .position(|s| {
            s["uses"]
                .as_str()
                .is_some_and(|u| u.starts_with("sigstore/cosign-installer@"))
        })
        .expect("cosign is installed");
    assert!(
        steps[installer]["with"]["cosign-release"]
            .as_str()
            .is_some_and(|v| v.starts_with("v3.")),
        "cosign 3: Sigstore bundles as OCI 1.1 referrers (the book's Kyverno type)"
    );
    let push = step_starting(
        &steps,
        "skopeo copy --all --preserve-digests oci-archive:target/dist/wavelet-image.tar",
    );
    let provenance = step_starting(&steps, "bash image/provenance target/dist \"$IMAGE\"");
    let sign = step_starting(&steps, "cosign sign --yes \"$IMAGE\"");
    let sums = step_starting(
        &steps,
        "cosign sign-blob --yes --bundle SHA256SUMS.sigstore.json SHA256SUMS",
    );
    let release = steps
        .iter()
        .position(|s| {
            s["uses"]
                .as_str()
                .is_some_and(|u| u.starts_with("softprops/action-gh-release@"))
        })
        .expect("a GitHub release");
    assert!(
        installer < sign && push < provenance && provenance < sign && sign < sums && sums < release
    );

    // The digest signed is the one built: the push checks the registry serves it.
    let push_script = steps[push]["run"].as_str().unwrap();
    assert!(
        push_script.contains(r#"if [ "$built" != "$pushed" ]; then"#),
        "{push_script}"
    );
    assert!(push_script.contains(r#"echo "IMAGE=$image@$built" >>"$GITHUB_ENV""#));

    // Every artifact has a statement, and each is signed.
    let provenance_script = steps[provenance]["run"].as_str().unwrap();
    for artifact in [
        "wavelet-linux-amd64",
        "wavelet-linux-arm64",
        "wavelet-linux-amd64.cdx.json",
        "wavelet-linux-arm64.cdx.json",
        "wavelet-image.tar",
        "wavelet-*.tgz",
    ] {
        assert!(
            provenance_script.contains(&format!("target/dist/{artifact} "))
                || provenance_script
                    .trim_end()
                    .ends_with(&format!("target/dist/{artifact}")),
            "no provenance for {artifact}"
        );
    }
    let sign_script = steps[sign]["run"].as_str().unwrap();
    for line in [
        r#"cosign attest --yes --type slsaprovenance1 --predicate "$RUNNER_TEMP/provenance.json" "$IMAGE""#,
        r#"cosign attest-blob --yes --statement "$statement" --bundle "${statement%.json}.sigstore.json""#,
    ] {
        assert!(sign_script.lines().any(|l| l.trim() == line), "{line}");
    }
    assert_eq!(steps[release]["with"]["files"], "wavelet/target/dist/*");
}

#[test]
fn the_provenance_names_the_command_and_the_container_the_build_job_used() {
    let workflow = workflow();
    let env = &job(&workflow, "publish")["env"];
    assert_eq!(
        env["WAVELET_BUILDER_IMAGE"],
        job(&workflow, "build")["container"],
        "the builder image in the provenance is the build job's container"
    );
    let command = env["WAVELET_BUILD_COMMAND"].as_str().unwrap();
    let build = job(&workflow, "build")["steps"].as_array().unwrap().clone();
    let ci = step_starting(&build, command);
    assert_eq!(build[ci]["name"], "CI, exactly as `bash .ci/run`");
    // The build's own environment, which the provenance repeats.
    let publish = job(&workflow, "publish")["steps"]
        .as_array()
        .unwrap()
        .clone();
    let provenance = step_starting(&publish, "bash image/provenance");
    assert_eq!(
        publish[provenance]["env"]["WAVELET_IMAGE_SOURCE"],
        build[ci]["env"]["WAVELET_IMAGE_SOURCE"]
    );
}

const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

/// `bash image/provenance OUT_DIR SUBJECTS…` with GitHub's variables of a `v1.2.3` run.
fn provenance(out_dir: &Path, subjects: &[&str], unset: Option<&str>) -> Output {
    let mut command = Command::new("bash");
    command
        .arg(repo().join("image/provenance"))
        .arg(out_dir)
        .args(subjects)
        .env("GITHUB_SERVER_URL", "https://github.com")
        .env("GITHUB_REPOSITORY", "example/wavelet")
        .env("GITHUB_REF", "refs/tags/v1.2.3")
        .env("GITHUB_SHA", COMMIT)
        .env(
            "GITHUB_WORKFLOW_REF",
            "example/wavelet/.github/workflows/release.yml@refs/tags/v1.2.3",
        )
        .env("GITHUB_RUN_ID", "42")
        .env("GITHUB_RUN_ATTEMPT", "1")
        .env("WAVELET_BUILD_COMMAND", "bash .ci/run")
        .env("WAVELET_BUILDER_IMAGE", "rust:1.95-bookworm")
        .env("WAVELET_IMAGE_SOURCE", "https://github.com/example/wavelet")
        .env("WAVELET_SHARED_REPOSITORY", "example/shared")
        .env(
            "WAVELET_SHARED_COMMIT",
            "fedcba9876543210fedcba9876543210fedcba98",
        );
    if let Some(name) = unset {
        command.env_remove(name);
    }
    command.output().unwrap()
}

#[test]
fn image_provenance_writes_a_slsa_statement_per_artifact_with_its_digest_source_command_and_builder(
) {
    let dir = TempDir::new("provenance");
    let binary = dir.write("wavelet-linux-amd64", b"\x7fELF not really");
    let index = format!("ghcr.io/example/wavelet@sha256:{}", "ab".repeat(32));
    let out = provenance(&dir.0, &[binary.to_str().unwrap(), &index], None);
    assert!(out.status.success(), "{}", text(&out.stderr));

    let read = |name: &str| -> Value {
        serde_json::from_slice(&std::fs::read(dir.0.join(name)).unwrap()).unwrap()
    };
    let statement = read("wavelet-linux-amd64.intoto.json");
    assert_eq!(statement["_type"], "https://in-toto.io/Statement/v1");
    assert_eq!(statement["predicateType"], "https://slsa.dev/provenance/v1");
    let sha = {
        use sha2::{Digest, Sha256};
        Sha256::digest(std::fs::read(&binary).unwrap())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    };
    assert_eq!(statement["subject"][0]["name"], "wavelet-linux-amd64");
    assert_eq!(statement["subject"][0]["digest"]["sha256"], sha);

    let build = &statement["predicate"]["buildDefinition"];
    let external = &build["externalParameters"];
    assert_eq!(
        external["source"],
        json!({"uri": "git+https://github.com/example/wavelet@refs/tags/v1.2.3",
               "digest": {"gitCommit": COMMIT}})
    );
    assert_eq!(external["command"], "bash .ci/run");
    assert_eq!(external["builderImage"], "rust:1.95-bookworm");
    assert_eq!(
        external["workflow"],
        json!({"repository": "https://github.com/example/wavelet",
               "ref": "refs/tags/v1.2.3", "path": ".github/workflows/release.yml"})
    );
    assert_eq!(
        external["environment"]["WAVELET_IMAGE_SOURCE"],
        "https://github.com/example/wavelet"
    );
    let resolved = build["resolvedDependencies"].as_array().unwrap();
    assert_eq!(resolved[0]["digest"]["gitCommit"], COMMIT);
    assert_eq!(resolved[1]["uri"], "docker://rust:1.95-bookworm");
    assert_eq!(
        resolved[2]["digest"]["gitCommit"],
        "fedcba9876543210fedcba9876543210fedcba98"
    );
    let run = &statement["predicate"]["runDetails"];
    assert_eq!(
        run["builder"]["id"],
        "https://github.com/example/wavelet/.github/workflows/release.yml@refs/tags/v1.2.3",
        "the identity cosign's certificate carries"
    );
    assert_eq!(
        run["metadata"]["invocationId"],
        "https://github.com/example/wavelet/actions/runs/42/attempts/1"
    );

    // The image's statement: the same predicate, the index as the subject.
    let image = read("image.intoto.json");
    assert_eq!(
        image["subject"],
        json!([{"name": "ghcr.io/example/wavelet", "digest": {"sha256": "ab".repeat(32)}}])
    );
    assert_eq!(image["predicate"], statement["predicate"]);
}

#[test]
fn image_provenance_refuses_a_missing_variable_or_an_unknown_subject() {
    let dir = TempDir::new("provenance-refuses");
    let file = dir.write("artifact", "x");
    let out = provenance(
        &dir.0,
        &[file.to_str().unwrap()],
        Some("WAVELET_BUILDER_IMAGE"),
    );
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("WAVELET_BUILDER_IMAGE is not set"),
        "{}",
        text(&out.stderr)
    );
    let out = provenance(&dir.0, &["ghcr.io/example/wavelet:1.2.3"], None);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("is neither a file nor REPOSITORY@sha256:HEX"),
        "{}",
        text(&out.stderr)
    );
}

/// The book's page "Verifying a release".
fn verifying_section() -> String {
    std::fs::read_to_string(repo().join("docs/src/installing/verifying.md"))
        .expect("docs/src/installing/verifying.md")
}

#[test]
fn the_book_verifies_with_the_identity_the_release_workflow_signs_with() {
    let section = verifying_section();
    // The identity Fulcio certifies for this workflow on a tag (the provenance's builder.id).
    let identity =
        "https://github.com/example/wavelet/.github/workflows/release.yml@refs/tags/v1.2.3";
    let regexps: Vec<String> = section
        .lines()
        .filter_map(|l| l.split("--certificate-identity-regexp ").nth(1))
        .map(|r| {
            r.split_whitespace()
                .next()
                .unwrap()
                .trim_matches('\'')
                .replace("OWNER", "example")
        })
        .collect();
    assert!(
        regexps.len() >= 4,
        "image, provenance, SHA256SUMS, a file's provenance: {regexps:?}"
    );
    for regexp in &regexps {
        let re = regex_lite::Regex::new(regexp).unwrap();
        assert!(re.is_match(identity), "{regexp} does not match {identity}");
        assert!(
            !re.is_match(
                "https://github.com/example/wavelet/.github/workflows/ci.yml@refs/heads/main"
            ),
            "{regexp} accepts another workflow"
        );
    }
    for command in [
        "cosign verify ",
        "cosign verify-attestation --type slsaprovenance1 ",
        "cosign verify-blob --bundle SHA256SUMS.sigstore.json ",
        "cosign verify-blob-attestation --bundle wavelet-linux-amd64.intoto.sigstore.json ",
        "sha256sum -c SHA256SUMS",
    ] {
        assert!(
            section.contains(command),
            "docs/src/installing/verifying.md: no `{command}`"
        );
    }
    assert!(
        section.contains("--certificate-oidc-issuer https://token.actions.githubusercontent.com")
    );

    // The Kyverno policy: parses, and asks for the same signer and the provenance.
    let yaml = section
        .split("```yaml\n")
        .skip(1)
        .map(|block| block.split("```").next().unwrap())
        .find(|block| block.contains("kind: ClusterPolicy"))
        .expect("a Kyverno ClusterPolicy example");
    let policy = wavelet::client::yaml::parse(yaml).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(policy["apiVersion"], "kyverno.io/v1");
    let verify = &policy["spec"]["rules"][0]["verifyImages"][0];
    assert_eq!(
        verify["type"], "SigstoreBundle",
        "cosign 3 stores Sigstore bundles as referrers"
    );
    let keyless = &verify["attestors"][0]["entries"][0]["keyless"];
    assert_eq!(
        keyless["issuer"],
        "https://token.actions.githubusercontent.com"
    );
    let subject = keyless["subjectRegExp"]
        .as_str()
        .unwrap()
        .replace("OWNER", "example");
    assert!(
        regex_lite::Regex::new(&subject).unwrap().is_match(identity),
        "{subject}"
    );
    let attestation = &verify["attestations"][0];
    assert_eq!(attestation["type"], "https://slsa.dev/provenance/v1");
    assert_eq!(
        attestation["attestors"][0]["entries"][0]["keyless"],
        *keyless
    );
    let conditions = attestation["conditions"][0]["all"].as_array().unwrap();
    let wants = |key: &str| {
        conditions
            .iter()
            .find(|c| c["key"] == format!("{{{{ {key} }}}}"))
            .unwrap_or_else(|| panic!("no condition on {key}"))["value"]
            .clone()
    };
    let workflow = workflow();
    let env = &job(&workflow, "publish")["env"];
    assert_eq!(
        wants("buildDefinition.externalParameters.command"),
        env["WAVELET_BUILD_COMMAND"]
    );
    assert_eq!(
        wants("buildDefinition.externalParameters.workflow.path"),
        ".github/workflows/release.yml"
    );
}
