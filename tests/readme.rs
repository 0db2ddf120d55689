//! The hash test vector of the book's hash-mode page (`docs/src/hash-mode.md`) reproduces
//! with `sha256sum`, and matches the library.

use std::process::Command;

use wavelet::model::references::Reference;
use wavelet::objects::{ConfigKey, ConfigKind, ConfigObject};

fn readme() -> String {
    std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/src/hash-mode.md"
    ))
    .expect("docs/src/hash-mode.md")
}

/// The shell block after the `hash-test-vector` marker.
fn vector_script(readme: &str) -> String {
    let after = readme
        .split("<!-- hash-test-vector -->")
        .nth(1)
        .expect("docs/src/hash-mode.md has the hash-test-vector marker");
    let block = after
        .split("```sh\n")
        .nth(1)
        .expect("a ```sh block follows the marker");
    block.split("```").next().unwrap().to_string()
}

#[test]
fn readme_hash_test_vector_reproduces_with_sha256sum() {
    let readme = readme();
    let script = vector_script(&readme);
    let out = Command::new("sh")
        .arg("-c")
        .arg(&script)
        .output()
        .expect("running sh");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = String::from_utf8(out.stdout).unwrap();
    let from_shell = printed
        .split_whitespace()
        .next()
        .expect("sha256sum printed a hash")
        .to_string();

    let configmap = ConfigObject::configmap(serde_json::json!({
        "metadata": {"name": "app-config", "namespace": "default"}, "data": {"color": "blue"}
    }))
    .unwrap();
    let reference = Reference {
        config: ConfigKey::new(ConfigKind::ConfigMap, "default", "app-config"),
        all_keys: true,
        keys: Default::default(),
        required: true,
    };
    let from_library =
        wavelet::model::hash::compute([(&reference, Some(configmap.digests()))], None).hash;
    assert_eq!(from_shell, from_library);
    assert!(
        readme.contains(&from_library),
        "the README states the expected hash"
    );
}
