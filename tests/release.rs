//! The release workflow `.github/workflows/release.yml`, which runs only on GitHub, checked
//! as far as it can be here: it runs on pushed `v*` tags; it stops at once without the
//! variable SHARED_REPOSITORY; it checks the tag with `image/check-tag`, then runs
//! `bash .ci/run` in a checkout beside ../shared, so a release is tested exactly as CI;
//! every `run:` script is valid bash, takes `${{ }}` expressions only through `env:`, and
//! names only repository paths that exist; no step prints a secret. And `image/check-tag`
//! accepts `v` and Cargo.toml's version, and refuses another tag, or a Chart.yaml
//! `version`/`appVersion` or values.yaml `image.tag` that is not Cargo.toml's version,
//! naming both versions.

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
