//! Test helpers: start the real `wavelet` binary against the fake API server, build
//! objects, and compute the hash a workload should end up with.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use wavelet::annotations::WAVELET_HASH;

use serde_json::{json, Value};

use crate::fake::{FakeApi, Request};

/// The `wavelet` binary under test, with its output captured.
pub struct Wavelet {
    child: Option<Child>,
    output: Arc<Mutex<String>>,
    /// Output pipes not yet at end of file: 0 once the process is gone and every line it
    /// wrote is in `output`.
    pipes_open: Arc<AtomicUsize>,
}

/// A command that runs the `wavelet` binary under test: the one cargo built for these
/// tests, or `WAVELET_TEST_BINARY` when set (another build of the same source, such as
/// the static aarch64 binary), started through `WAVELET_TEST_RUNNER` when that is set
/// too (`qemu-aarch64`: an emulator that takes the program as its first argument).
/// `.ci/run` uses both to run hash-mode tests against the arm64 binary.
///
/// The environment is empty: a test sets the variables it means. Whatever the machine has
/// stays out, such as `KUBERNETES_SERVICE_HOST`/`PORT` on a CI runner in a Pod, with which
/// wavelet takes the Pod's namespace (issue 35; `.ci/in-a-pod` runs the suite so).
pub fn wavelet_command() -> Command {
    let binary = std::env::var_os("WAVELET_TEST_BINARY")
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_wavelet").into());
    let mut command = match std::env::var_os("WAVELET_TEST_RUNNER") {
        Some(runner) => {
            let mut command = Command::new(runner);
            command.arg(binary);
            command
        }
        None => Command::new(binary),
    };
    command.env_clear();
    command
}

/// Flags that keep tests fast; each test adds or overrides what it needs.
pub const FAST: &[&str] = &[
    "--debounce",
    "200ms",
    "--min-rollout-interval",
    "0s",
    "--max-rollouts-per-second",
    "100",
];

impl Wavelet {
    /// `wavelet run --server <fake>` with `args`, at `RUST_LOG=debug`; waits for the
    /// initial sync.
    pub fn start(fake: &FakeApi, args: &[&str]) -> Wavelet {
        Wavelet::start_with_env(fake, args, &[("RUST_LOG", "debug")])
    }

    pub fn start_with_env(fake: &FakeApi, args: &[&str], env: &[(&str, &str)]) -> Wavelet {
        let url = fake.url();
        let mut all = vec!["--server", url.as_str()];
        all.extend(args);
        Wavelet::start_without_server(&all, env)
    }

    /// `wavelet run` with exactly `args` (the connection flags included).
    pub fn start_without_server(args: &[&str], env: &[(&str, &str)]) -> Wavelet {
        let wavelet = Wavelet::launch(args, env);
        assert!(
            wavelet.wait_for_output("initial sync complete", Duration::from_secs(20)),
            "wavelet did not sync:\n{}",
            wavelet.output()
        );
        wavelet
    }

    /// `wavelet run --server <fake>` with `args`; waits only until it listens for HTTP.
    pub fn start_unsynced(fake: &FakeApi, args: &[&str]) -> Wavelet {
        let url = fake.url();
        let mut all = vec!["--server", url.as_str()];
        all.extend(args);
        let wavelet = Wavelet::launch(&all, &[("RUST_LOG", "debug")]);
        assert!(
            wavelet.wait_for_output("listening on ", Duration::from_secs(20)),
            "wavelet did not listen:\n{}",
            wavelet.output()
        );
        wavelet
    }

    /// The address the binary logged (`listening on 127.0.0.1:PORT`).
    pub fn http_addr(&self) -> String {
        let output = self.output();
        let rest = output
            .split("listening on ")
            .nth(1)
            .unwrap_or_else(|| panic!("no listening address in:\n{output}"));
        rest.split_whitespace().next().unwrap().to_string()
    }

    /// GET `path` on the binary's HTTP endpoint: (status code, body).
    pub fn http_get(&self, path: &str) -> (u16, String) {
        use std::io::Write;
        let mut stream = std::net::TcpStream::connect(self.http_addr()).expect("connecting");
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        write!(stream, "GET {path} HTTP/1.1\r\nHost: test\r\n\r\n").unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).expect("reading");
        let (head, body) = response.split_once("\r\n\r\n").expect("a response head");
        let code = head
            .split(' ')
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or_else(|| panic!("bad status line: {head}"));
        (code, body.to_string())
    }

    /// `wavelet run` with exactly `args`, without waiting for anything.
    pub fn launch(args: &[&str], env: &[(&str, &str)]) -> Wavelet {
        let mut command = wavelet_command();
        command
            .arg("run")
            .args(["--listen-addr", "127.0.0.1:0"])
            .args(args);
        command.env_clear();
        for (k, v) in env {
            command.env(k, v);
        }
        Wavelet::spawn(command)
    }

    /// Spawns `command` (a `wavelet run` in some form), captures its output, and waits for
    /// the initial sync.
    pub fn spawn(mut command: Command) -> Wavelet {
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command.spawn().expect("starting the wavelet binary");
        let output = Arc::new(Mutex::new(String::new()));
        let pipes_open = Arc::new(AtomicUsize::new(0));
        for pipe in [
            child
                .stdout
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
            child
                .stderr
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
        ]
        .into_iter()
        .flatten()
        {
            let output = Arc::clone(&output);
            let open = Arc::clone(&pipes_open);
            open.fetch_add(1, Ordering::SeqCst);
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                    let mut out = output.lock().unwrap();
                    out.push_str(&line);
                    out.push('\n');
                }
                open.fetch_sub(1, Ordering::SeqCst);
            });
        }
        Wavelet {
            child: Some(child),
            output,
            pipes_open,
        }
    }

    /// The process id (for `/proc/PID/status`).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// Resident memory now, in KiB (`VmRSS` of `/proc/PID/status`).
    pub fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()))
            .expect("reading /proc/PID/status");
        wavelet::ops::metrics::parse_vm_rss(&status)
            .unwrap_or_else(|| panic!("no VmRSS in /proc status:\n{status}"))
            / 1024
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| c.try_wait().expect("waiting for wavelet").is_none())
    }

    pub fn output(&self) -> String {
        self.output.lock().unwrap().clone()
    }

    /// How much output there is now: a mark for [`Wavelet::wait_for_log_after`].
    pub fn log_mark(&self) -> usize {
        self.output.lock().unwrap().len()
    }

    /// Waits (up to 15 s) until a line written after `mark` (see [`Wavelet::log_mark`])
    /// says `message` about `key` (see [`says`]), failing the test otherwise: the positive
    /// signal that wavelet processed something (for example the debug line `configmap
    /// ns/name: delete mode: UpToDate` a finished reconcile logs) before asserting that it
    /// did nothing more.
    pub fn wait_for_log_after(&self, mark: usize, key: &str, message: &str) {
        let deadline = Instant::now() + Duration::from_secs(15);
        while !self.output()[mark..]
            .lines()
            .any(|line| says(line, key, message))
        {
            assert!(
                Instant::now() < deadline,
                "timed out waiting for a log line {message:?} about {key}:\n{}",
                self.output()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits (up to `timeout`) until the output written after `mark` contains `needle`,
    /// failing the test otherwise.
    pub fn wait_for_output_after(&self, mark: usize, needle: &str, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while !self.output()[mark..].contains(needle) {
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {needle:?}:\n{}",
                self.output()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn wait_for_output(&self, needle: &str, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if self.output().contains(needle) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    /// Sends a signal by name (`TERM`, `INT`, `KILL`) with `kill(1)`.
    pub fn signal(&self, name: &str) {
        let pid = self.child.as_ref().expect("running").id().to_string();
        let status = Command::new("kill")
            .args([format!("-{name}"), pid])
            .status()
            .expect("running kill");
        assert!(status.success(), "kill -{name} failed");
    }

    /// Waits up to `timeout` for the process to exit; `None` if it is still running.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + timeout;
        let child = self.child.as_mut().expect("running");
        loop {
            if let Some(status) = child.try_wait().expect("waiting for wavelet") {
                self.child = None;
                self.drain_output();
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Stops the process (SIGKILL: restart tests must not depend on a clean shutdown) and
    /// returns all it wrote.
    pub fn kill(mut self) -> String {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.drain_output();
        self.output()
    }

    /// After the process exited: waits (up to 5 s) until its output pipes reached end of
    /// file, so [`Wavelet::output`] holds every line (the exit is seen before the readers
    /// drain the pipes).
    fn drain_output(&self) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.pipes_open.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Wavelet {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A Deployment/StatefulSet/DaemonSet (by `kind`) with the given metadata annotations and
/// pod spec; `containers` defaults to one container.
pub fn workload(kind: &str, ns: &str, name: &str, annotations: Value, pod_spec: Value) -> Value {
    let mut spec = json!({
        "selector": {"matchLabels": {"app": name}},
        "template": {
            "metadata": {"labels": {"app": name}},
            "spec": pod_spec,
        }
    });
    if spec["template"]["spec"]["containers"].is_null() {
        spec["template"]["spec"]["containers"] = json!([{"name": "app", "image": "nginx"}]);
    }
    if kind == "StatefulSet" {
        spec["serviceName"] = json!(name);
    }
    if kind != "DaemonSet" {
        spec["replicas"] = json!(1);
    }
    json!({
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": name, "namespace": ns, "annotations": annotations},
        "spec": spec,
    })
}

/// The smallest hash-mode cluster: [`add_web`] in `default`.
pub fn fake_with_web() -> FakeApi {
    let fake = FakeApi::start();
    add_web(&fake, "default");
    fake
}

/// Adds ConfigMap `<ns>/app-config` {color: blue} and an opted-in Deployment `<ns>/web`
/// that mounts it.
pub fn add_web(fake: &FakeApi, ns: &str) {
    fake.apply(configmap(ns, "app-config", &[("color", "blue")]));
    fake.apply(workload(
        "Deployment",
        ns,
        "web",
        opted_in(),
        mounts_configmap("app-config"),
    ));
}

pub fn opted_in() -> Value {
    json!({"wavelet.dev/update-on-config-change": "true"})
}

/// A pod spec mounting ConfigMap `name` as a volume.
pub fn mounts_configmap(name: &str) -> Value {
    json!({"volumes": [{"name": "cfg", "configMap": {"name": name}}],
           "containers": [{"name": "app", "image": "nginx", "volumeMounts": [{"name": "cfg", "mountPath": "/cfg"}]}]})
}

pub fn configmap(ns: &str, name: &str, data: &[(&str, &str)]) -> Value {
    let data: BTreeMap<_, _> = data
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}, "data": data})
}

pub fn secret(ns: &str, name: &str, data: &[(&str, &str)]) -> Value {
    let data: BTreeMap<_, _> = data
        .iter()
        .map(|(k, v)| {
            (
                k.to_string(),
                wavelet::objects::base64::encode(v.as_bytes()),
            )
        })
        .collect();
    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": ns}, "type": "Opaque", "data": data})
}

pub fn plural(kind: &str) -> &'static str {
    match kind {
        "Deployment" => "deployments",
        "StatefulSet" => "statefulsets",
        "DaemonSet" => "daemonsets",
        other => panic!("no plural for {other}"),
    }
}

/// The hash annotations of a workload in the fake: (template, metadata).
pub fn hashes(
    fake: &FakeApi,
    resource: &str,
    ns: &str,
    name: &str,
    key: &str,
) -> (Option<String>, Option<String>) {
    let obj = fake.get(resource, ns, name).expect("workload exists");
    let template = obj["spec"]["template"]["metadata"]["annotations"][key]
        .as_str()
        .map(String::from);
    let metadata = obj["metadata"]["annotations"][key]
        .as_str()
        .map(String::from);
    (template, metadata)
}

/// The hash wavelet should write for a workload given what the fake holds now, computed
/// with the library's own pure functions (without `--enable-csi-integration`: its
/// SecretProviderClasses do not count).
pub fn expected_hash(fake: &FakeApi, resource: &str, ns: &str, name: &str) -> String {
    use wavelet::objects::{ConfigKind, ConfigObject, WorkloadObject};
    let obj: WorkloadObject =
        serde_json::from_value(fake.get(resource, ns, name).expect("workload exists")).unwrap();
    let refs = wavelet::model::references::references(&obj);
    let resolved: Vec<_> = refs
        .iter()
        .filter(|r| r.config.kind != ConfigKind::SecretProviderClass)
        .map(|r| {
            let digests = fake
                .get(
                    &r.config.kind.resource().plural,
                    &r.config.namespace,
                    &r.config.name,
                )
                .and_then(|json| match r.config.kind {
                    ConfigKind::ConfigMap => ConfigObject::configmap(json).unwrap().data,
                    _ => ConfigObject::secret(json).unwrap().data,
                });
            (r, digests)
        })
        .collect();
    wavelet::model::hash::compute(resolved.iter().map(|(r, d)| (*r, d.as_deref())), None).hash
}

/// PATCH requests that changed `spec.template` of the workload.
pub fn template_patches(fake: &FakeApi, resource: &str, ns: &str, name: &str) -> usize {
    fake.patches(resource, ns, name)
        .iter()
        .filter(|r| !r.body_json()["spec"]["template"].is_null())
        .count()
}

/// Waits until `cond` holds, failing the test with `what` and wavelet's output otherwise.
pub fn eventually(
    fake: &FakeApi,
    wavelet: &Wavelet,
    what: &str,
    cond: impl FnMut(&FakeApi) -> bool,
) {
    if !fake.wait_until(Duration::from_secs(15), cond) {
        panic!(
            "timed out waiting for: {what}\nwavelet output:\n{}",
            wavelet.output()
        );
    }
}

/// (namespace, pod, request) of every eviction or DELETE of a Pod wavelet sent, in order,
/// successful or not.
pub fn pod_replacements(fake: &FakeApi) -> Vec<(String, String, Request)> {
    fake.requests()
        .into_iter()
        .filter_map(|r| {
            let parts: Vec<&str> = r.path.trim_start_matches('/').split('/').collect();
            let (ns, pod) = match parts.as_slice() {
                ["api", "v1", "namespaces", ns, "pods", pod, "eviction"] if r.method == "POST" => {
                    (ns.to_string(), pod.to_string())
                }
                ["api", "v1", "namespaces", ns, "pods", pod] if r.method == "DELETE" => {
                    (ns.to_string(), pod.to_string())
                }
                _ => return None,
            };
            Some((ns, pod, r))
        })
        .collect()
}

/// Deployment `default/web` (of [`fake_with_web`]) converged on its current configuration
/// with exactly `revisions` revisions, and stays there; `why` says what more would mean.
pub fn assert_web_converged(fake: &FakeApi, wavelet: &Wavelet, revisions: u64, why: &str) {
    let current = |f: &FakeApi| expected_hash(f, "deployments", "default", "web");
    eventually(fake, wavelet, "the correct hash on the template", |f| {
        hashes(f, "deployments", "default", "web", WAVELET_HASH).0 == Some(current(f))
    });
    let rollouts = usize::try_from(revisions - 1).expect("at least the first revision");
    wait_until_up_to_date(wavelet, "deployment default/web", rollouts);
    assert_eq!(
        fake.revisions("deployments", "default", "web"),
        revisions,
        "{why}:\n{}",
        wavelet.output()
    );
    assert_eq!(
        hashes(fake, "deployments", "default", "web", WAVELET_HASH).0,
        Some(current(fake))
    );
}

/// Whether a log line says a message starting with `message` about `key` (`deployment
/// default/web`), in either log format: `KEY: MESSAGE` (text) or `"msg":"MESSAGE` with
/// `"object":"KEY"` (`--log-format json`).
pub fn says(line: &str, key: &str, message: &str) -> bool {
    if line.contains(&format!("{key}: {message}")) {
        return true;
    }
    let quoted = serde_json::to_string(message).unwrap();
    let message_start = &quoted[..quoted.len() - 1];
    line.contains(&format!("\"object\":\"{key}\""))
        && line.contains(&format!("\"msg\":{message_start}"))
}

/// Waits until wavelet logged `rollouts` rollouts of workload `key` (`deployment
/// default/web`) and, after the last, reconciled it and found it up to date (the debug line
/// `KEY: UpToDate`): its watch showed its own write and nothing was left to do, the
/// positive signal before asserting that it rolled no more. Needs `RUST_LOG=debug` (as
/// [`Wavelet::start`] sets).
pub fn wait_until_up_to_date(wavelet: &Wavelet, key: &str, rollouts: usize) {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let output = wavelet.output();
        let lines: Vec<&str> = output.lines().collect();
        let rolled: Vec<usize> = (0..lines.len())
            .filter(|&i| says(lines[i], key, "rolled:"))
            .collect();
        let after_last = rolled.last().map_or(0, |i| i + 1);
        if rolled.len() >= rollouts
            && lines[after_last..]
                .iter()
                .any(|line| says(line, key, "UpToDate"))
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {rollouts} rollout(s) of {key}, then UpToDate:\n{output}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A fresh directory under the system temp dir, removed on drop.
pub struct TempDir(pub std::path::PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("wavelet-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("creating a temp dir");
        TempDir(dir)
    }

    /// Writes `name` in the directory; returns its path.
    pub fn write(&self, name: &str, contents: impl AsRef<[u8]>) -> std::path::PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, contents).expect("writing a temp file");
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A kubeconfig with one cluster (`server` plus `cluster_lines`, indented four spaces) and
/// one user (`user_lines`, indented four spaces), as its current context.
pub fn kubeconfig_text(server: &str, cluster_lines: &[&str], user_lines: &[&str]) -> String {
    let indent = |lines: &[&str]| {
        lines
            .iter()
            .map(|l| format!("    {l}\n"))
            .collect::<String>()
    };
    format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: test\nclusters:\n- name: fake\n  cluster:\n    server: {server}\n{}contexts:\n- name: test\n  context:\n    cluster: fake\n    user: sa\nusers:\n- name: sa\n  user:\n{}",
        indent(cluster_lines),
        if user_lines.is_empty() { "    {}\n".to_string() } else { indent(user_lines) },
    )
}

/// A kubeconfig whose user reads its bearer token from a file, as a projected service
/// account token is read; `rotate` plays the kubelet.
pub struct RotatingToken {
    /// Holds the files; removed on drop.
    _dir: TempDir,
    pub kubeconfig: std::path::PathBuf,
    token_file: std::path::PathBuf,
}

impl RotatingToken {
    /// Writes `token` and a kubeconfig pointing at `fake`, and makes the fake require it.
    pub fn new(fake: &FakeApi, token: &str) -> RotatingToken {
        let dir = TempDir::new("token");
        let token_file = dir.write("token", token);
        let text = kubeconfig_text(
            &fake.url(),
            &[],
            &[&format!("tokenFile: {}", token_file.display())],
        );
        let kubeconfig = dir.write("kubeconfig", text);
        fake.require_token(Some(token));
        RotatingToken {
            _dir: dir,
            kubeconfig,
            token_file,
        }
    }

    /// The kubelet writes a new token (atomically, as its AtomicWriter swaps files) and the
    /// old one stops working at once.
    pub fn rotate(&self, fake: &FakeApi, token: &str) {
        let next = self.token_file.with_extension("next");
        std::fs::write(&next, token).expect("writing the token file");
        std::fs::rename(&next, &self.token_file).expect("replacing the token file");
        fake.require_token(Some(token));
    }

    pub fn kubeconfig_path(&self) -> &str {
        self.kubeconfig.to_str().expect("UTF-8 temp path")
    }
}

/// `--workers 1`: with one worker, reconciles run in the order they fall due, so a
/// [`barrier_change`] that rolls proves every earlier change was reconciled before it.
pub const ONE_WORKER: &[&str] = &["--workers", "1"];

/// Adds the barrier to `fake`: a `resource` (`configmaps` or `secrets`) named `barrier` in
/// `ns`, and an opted-in Deployment `barrier` that mounts it. Call before starting wavelet
/// (with [`ONE_WORKER`]).
pub fn add_barrier(fake: &FakeApi, resource: &str, ns: &str) {
    let spec = match resource {
        "configmaps" => {
            fake.apply(configmap(ns, "barrier", &[("n", "0")]));
            mounts_configmap("barrier")
        }
        "secrets" => {
            fake.apply(secret(ns, "barrier", &[("n", "0")]));
            json!({"volumes": [{"name": "s", "secret": {"secretName": "barrier"}}],
                   "containers": [{"name": "app", "image": "nginx"}]})
        }
        other => panic!("no barrier for {other}"),
    };
    fake.apply(workload("Deployment", ns, "barrier", opted_in(), spec));
}

/// The positive signal before asserting that an earlier change did nothing: changes the
/// data of the barrier object (see [`add_barrier`]) and waits until Deployment `barrier`
/// carries the hash of that data. Events of one watch arrive in order and the barrier's
/// reconcile falls due after any earlier one's (same debounce); with [`ONE_WORKER`] it
/// runs after them, so once it rolled, every earlier change was seen and reconciled.
pub fn barrier_change(fake: &FakeApi, wavelet: &Wavelet, resource: &str, ns: &str) {
    eventually(fake, wavelet, "the barrier adopted", |f| {
        hashes(f, "deployments", ns, "barrier", WAVELET_HASH)
            .1
            .is_some()
    });
    let before = fake.revisions("deployments", ns, "barrier");
    let n = (before + 1).to_string();
    let data = match resource {
        "configmaps" => json!({"data": {"n": n}}),
        _ => json!({"data": {"n": wavelet::objects::base64::encode(n.as_bytes())}}),
    };
    fake.merge_patch(resource, ns, "barrier", data);
    eventually(fake, wavelet, "the barrier's rollout", |f| {
        f.revisions("deployments", ns, "barrier") > before
            && hashes(f, "deployments", ns, "barrier", WAVELET_HASH).0
                == Some(expected_hash(f, "deployments", ns, "barrier"))
    });
}

/// FAST plus [`ONE_WORKER`].
pub fn fast_one_worker() -> Vec<&'static str> {
    FAST.iter().chain(ONE_WORKER).copied().collect()
}

/// The value of the sample `name{labels}` (labels as exposed, e.g. `reason="not_leader"`;
/// empty for none) on the binary's /metrics; 0 when absent.
pub fn metric(wavelet: &Wavelet, name: &str, labels: &str) -> f64 {
    let (code, body) = wavelet.http_get("/metrics");
    assert_eq!(code, 200, "/metrics: {body}");
    let series = if labels.is_empty() {
        name.to_string()
    } else {
        format!("{name}{{{labels}}}")
    };
    body.lines()
        .find_map(|line| line.strip_prefix(&series)?.strip_prefix(' '))
        .map_or(0.0, |v| v.trim().parse().unwrap())
}

/// Waits (up to 15 s) until wavelet has adopted every opted-in workload its initial sync
/// line counts (the binary says "adopted with config hash" once per workload it adopts, so
/// this is for workloads that start without a hash): a change made before that is taken in
/// by the adoption, without a rollout, so a test that wants a rollout changes the data only
/// after this.
pub fn wait_all_adopted(fake: &FakeApi, wavelet: &Wavelet) {
    let output = wavelet.output();
    let opted_in: usize = output
        .lines()
        .find_map(|l| {
            let rest = l.split("initial sync complete in ").nth(1)?;
            let before = rest.split(" opted-in workloads").next()?;
            before.rsplit(' ').next()?.parse().ok()
        })
        .unwrap_or_else(|| panic!("no initial sync line in:\n{output}"));
    eventually(fake, wavelet, "every opted-in workload adopted", |_| {
        wavelet.output().matches("adopted with config hash").count() >= opted_in
    });
}

/// Waits (up to 15 s) until `cond` holds for the sample `name{labels}` (see [`metric`]):
/// the positive signal that wavelet processed something before asserting an absence.
pub fn wait_for_metric(
    wavelet: &Wavelet,
    name: &str,
    labels: &str,
    cond: impl Fn(f64) -> bool,
) -> f64 {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let value = metric(wavelet, name, labels);
        if cond(value) {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {name}{{{labels}}} (last {value}):\n{}",
            wavelet.output()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A request about wavelet's own `wavelet-state` ConfigMap (its GET, PUT, or the watch of
/// that one object), not about the users' ConfigMaps.
pub fn is_wavelet_state(request: &Request) -> bool {
    request.path.ends_with("/configmaps/wavelet-state")
        || (request.path.ends_with("/configmaps")
            && request.query_param("fieldSelector") == Some("metadata.name=wavelet-state"))
        // Its creation (wavelet creates it at start).
        || (request.method == "POST"
            && request.path.ends_with("/configmaps")
            && request.body_json()["metadata"]["name"] == "wavelet-state")
}

/// Starts a replica (with `args`, which elect a leader, while another leads) whose
/// ConfigMap watch stays silent until [`FakeApi::heal`]: its cache keeps the ConfigMaps as
/// listed at its start. `fake` must refuse streaming lists ([`FakeApi::disable_watch_list`]),
/// so that its first list is a LIST and the watch after it the request that stalls.
pub fn standby_with_stalled_configmaps(fake: &FakeApi, args: &[&str]) -> Wavelet {
    fake.inject(crate::fake::Fault::StallWatch {
        resource: "configmaps".into(),
        duration: Duration::from_secs(60),
    });
    let standby = Wavelet::start(fake, args);
    eventually(
        fake,
        &standby,
        "the standby's ConfigMap watch stalled",
        |f| f.pending_faults() == 0,
    );
    assert_eq!(
        metric(&standby, "wavelet_leader", ""),
        0.0,
        "{}",
        standby.output()
    );
    standby
}

/// From now on the fake answers every renewal of a Lease (`PUT leases`) with 500: the
/// leader stops writing once its renew deadline passes. [`FakeApi::heal`] ends it.
pub fn refuse_lease_renewals(fake: &FakeApi) {
    fake.inject(crate::fake::Fault::Status {
        method: "PUT".into(),
        resource: "leases".into(),
        code: 500,
        retry_after_secs: None,
        times: 100_000,
        plain_text: false,
    });
}

/// Continues `frozen` (stopped with SIGSTOP while `leader` took over), drains `leader`
/// with SIGTERM and waits until `frozen` acquired the Lease again; returns the mark of
/// `frozen`'s output from before it continued.
pub fn lead_again(frozen: &Wavelet, leader: &mut Wavelet) -> usize {
    let mark = frozen.log_mark();
    frozen.signal("CONT");
    leader.signal("TERM");
    assert!(
        leader.wait_exit(Duration::from_secs(5)).is_some(),
        "{}",
        leader.output()
    );
    frozen.wait_for_output_after(mark, "acquired Lease", Duration::from_secs(10));
    mark
}

/// Kills `leader` and waits until `standby` acquired the Lease.
pub fn hand_over(leader: Wavelet, standby: &Wavelet) {
    leader.kill();
    assert!(
        standby.wait_for_output("acquired Lease", Duration::from_secs(10)),
        "{}",
        standby.output()
    );
}
