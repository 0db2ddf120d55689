//! A real control plane for the end-to-end suite and the benchmark: etcd, kube-apiserver
//! and kube-controller-manager started from a directory of binaries on free loopback
//! ports with a temporary data directory (as ../shared/k8s-bin/README.md says), or a
//! cluster a contributor already has, named by a kubeconfig.
//!
//! Self-contained (std, serde_json and the wavelet library only) so that the benchmark
//! can include it with `#[path]`. Every process it starts is in one process group, and a
//! watchdog kills that group when the test process dies, so an interrupted run leaves
//! nothing behind.

#![allow(dead_code)]

use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use wavelet::client::Client;
use wavelet::config::ConnectionFlags;

/// The admin token of a cluster this module starts (token authentication).
pub const ADMIN_TOKEN: &str = "admintoken";

/// Where the suite gets its cluster from.
pub enum Source {
    /// Start one from the binaries in this directory (`WAVELET_E2E_BIN_DIR`).
    Binaries(PathBuf),
    /// Use the cluster of this kubeconfig (`WAVELET_E2E_KUBECONFIG`).
    Kubeconfig(PathBuf),
}

impl Source {
    /// From the environment; `None` when neither variable is set.
    pub fn from_env() -> Option<Source> {
        let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
        if let Some(dir) = var("WAVELET_E2E_BIN_DIR") {
            return Some(Source::Binaries(PathBuf::from(dir)));
        }
        var("WAVELET_E2E_KUBECONFIG").map(|k| Source::Kubeconfig(PathBuf::from(k)))
    }
}

/// A running control plane (or a borrowed cluster).
pub struct Cluster {
    /// The kubeconfig wavelet and the harness use.
    pub kubeconfig: PathBuf,
    /// The API server's CA certificate (own clusters only).
    pub ca: Option<PathBuf>,
    /// `https://127.0.0.1:PORT` (own clusters only).
    pub api_port: Option<u16>,
    /// The directory of the binaries (own clusters only): kubectl is there too.
    pub bin_dir: Option<PathBuf>,
    dir: PathBuf,
    own: Mutex<Option<Processes>>,
    group: Option<i32>,
}

struct Processes {
    group: i32,
    etcd: Child,
    apiserver: Child,
    controller_manager: Child,
    watchdog: Child,
    apiserver_args: Vec<String>,
}

/// A running `kubectl proxy`: plain HTTP on `port`, the cluster's credentials added.
pub struct KubectlProxy {
    pub port: u16,
    child: Child,
}

impl Drop for KubectlProxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A free TCP port on 127.0.0.1 (the listener is closed again at once).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("binding 127.0.0.1:0")
}

fn temp_dir(tag: &str) -> PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let dir = std::env::temp_dir().join(format!("wavelet-{tag}-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("creating a temp dir");
    dir
}

fn log_file(dir: &Path, name: &str) -> Stdio {
    Stdio::from(std::fs::File::create(dir.join(format!("{name}.log"))).expect("log file"))
}

/// What the benchmark adds to a control plane it starts: more users (token, name), each
/// in `system:masters`, so that the API server tells the controllers under test apart,
/// kube-apiserver flags (an audit log) and kube-controller-manager flags (its client's
/// rate limit). The end-to-end suite adds a user and an audit log of its requests
/// (`impact.rs`).
#[derive(Clone, Debug, Default)]
pub struct Extras {
    pub users: Vec<(String, String)>,
    pub apiserver_args: Vec<String>,
    pub controller_manager_args: Vec<String>,
}

impl Cluster {
    pub fn start(source: &Source) -> Result<Cluster, String> {
        Cluster::start_with(source, &Extras::default())
    }

    /// [`Cluster::start`] with `extras` (an own control plane only).
    pub fn start_with(source: &Source, extras: &Extras) -> Result<Cluster, String> {
        match source {
            Source::Binaries(dir) => Cluster::start_own(dir, extras),
            Source::Kubeconfig(path) => Ok(Cluster {
                kubeconfig: path.clone(),
                ca: None,
                api_port: None,
                bin_dir: None,
                dir: temp_dir("e2e"),
                own: Mutex::new(None),
                group: None,
            }),
        }
    }

    /// Starts etcd, kube-apiserver and kube-controller-manager from `bin`.
    fn start_own(bin: &Path, extras: &Extras) -> Result<Cluster, String> {
        for name in ["etcd", "kube-apiserver", "kube-controller-manager"] {
            if !bin.join(name).is_file() {
                return Err(format!(
                    "{} not found: decompress ../shared/k8s-bin/*.xz into {} (see .ci/run)",
                    bin.join(name).display(),
                    bin.display()
                ));
            }
        }
        let dir = temp_dir("e2e");
        let (etcd_port, peer_port, api_port, kcm_port) =
            (free_port(), free_port(), free_port(), free_port());
        let key = dir.join("sa.key");
        let public = dir.join("sa.pub");
        run_ok(
            Command::new("openssl")
                .args(["genrsa", "-out"])
                .arg(&key)
                .arg("2048"),
        )?;
        run_ok(
            Command::new("openssl")
                .args(["rsa", "-in"])
                .arg(&key)
                .args(["-pubout", "-out"])
                .arg(&public),
        )?;
        std::fs::write(
            dir.join("tokens.csv"),
            std::iter::once((ADMIN_TOKEN.to_string(), "admin".to_string()))
                .chain(extras.users.iter().cloned())
                .map(|(token, user)| format!("{token},{user},{user},\"system:masters\"\n"))
                .collect::<String>(),
        )
        .map_err(|e| e.to_string())?;

        let etcd = Command::new(bin.join("etcd"))
            .arg(dir.join("etcd"))
            .arg(format!("http://127.0.0.1:{etcd_port}"))
            .arg(format!("http://127.0.0.1:{peer_port}"))
            .stdout(log_file(&dir, "etcd"))
            .stderr(log_file(&dir, "etcd.err"))
            .process_group(0)
            .spawn()
            .map_err(|e| format!("starting etcd: {e}"))?;
        let group = etcd.id() as i32;
        // dash's builtin `kill` (Debian's sh) takes no `--` and failed on it, so the
        // watchdog never stopped anything; `-{group}` after the signal is a group there.
        let watchdog = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "while kill -0 {test} 2>/dev/null; do sleep 1; done; kill -TERM -{group} 2>/dev/null; sleep 3; kill -KILL -{group} 2>/dev/null",
                test = std::process::id()
            ))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .map_err(|e| format!("starting the watchdog: {e}"))?;
        let certs = dir.join("certs");
        let apiserver_args: Vec<String> = vec![
            format!("--etcd-servers=http://127.0.0.1:{etcd_port}"),
            "--bind-address=127.0.0.1".into(),
            format!("--secure-port={api_port}"),
            "--advertise-address=127.0.0.1".into(),
            format!("--cert-dir={}", certs.display()),
            format!("--token-auth-file={}", dir.join("tokens.csv").display()),
            "--authorization-mode=Node,RBAC".into(),
            "--service-account-issuer=https://kubernetes.default.svc".into(),
            format!("--service-account-key-file={}", public.display()),
            format!("--service-account-signing-key-file={}", key.display()),
            "--service-cluster-ip-range=10.96.0.0/16".into(),
            "--allow-privileged=true".into(),
        ]
        .into_iter()
        .chain(extras.apiserver_args.iter().cloned())
        .collect();
        let apiserver = spawn_apiserver(bin, &dir, &apiserver_args, group)?;
        let ca = certs.join("apiserver.crt");
        let kubeconfig = dir.join("kubeconfig");
        let mut processes = Processes {
            group,
            etcd,
            apiserver,
            controller_manager: Command::new("true").spawn().map_err(|e| e.to_string())?,
            watchdog,
            apiserver_args,
        };
        wait_for(Duration::from_secs(60), || ca.is_file())
            .map_err(|_| "kube-apiserver wrote no serving certificate within 60 s".to_string())?;
        std::fs::write(&kubeconfig, kubeconfig_text(api_port, &ca, ADMIN_TOKEN))
            .map_err(|e| e.to_string())?;
        let cluster = Cluster {
            kubeconfig,
            ca: Some(ca),
            api_port: Some(api_port),
            bin_dir: Some(bin.to_path_buf()),
            dir,
            own: Mutex::new(None),
            group: Some(group),
        };
        let ready = cluster.wait_ready(Duration::from_secs(90));
        processes.controller_manager = Command::new(bin.join("kube-controller-manager"))
            .arg(format!("--kubeconfig={}", cluster.kubeconfig.display()))
            .arg(format!("--authentication-kubeconfig={}", cluster.kubeconfig.display()))
            .arg(format!("--authorization-kubeconfig={}", cluster.kubeconfig.display()))
            .arg("--controllers=deployment-controller,replicaset-controller,statefulset-controller,daemonset-controller,garbage-collector-controller,serviceaccount-controller,serviceaccount-token-controller,namespace-controller,disruption-controller,cronjob-controller,job-controller")
            .arg(format!("--service-account-private-key-file={}", key.display()))
            .arg("--bind-address=127.0.0.1")
            .arg(format!("--secure-port={kcm_port}"))
            .arg("--leader-elect=false")
            .args(&extras.controller_manager_args)
            .stdout(log_file(&cluster.dir, "kube-controller-manager"))
            .stderr(log_file(&cluster.dir, "kube-controller-manager.err"))
            .process_group(group)
            .spawn()
            .map_err(|e| format!("starting kube-controller-manager: {e}"))?;
        *cluster.own.lock().unwrap() = Some(processes);
        ready?;
        Ok(cluster)
    }

    /// An admin client (the harness's own; wavelet runs as a separate process).
    pub fn admin(&self) -> Client {
        Client::from_flags(&ConnectionFlags {
            kubeconfig: Some(self.kubeconfig.clone()),
            ..ConnectionFlags::default()
        })
        .expect("an admin client from the kubeconfig")
    }

    /// Waits until the API server answers a read of the `default` namespace.
    pub fn wait_ready(&self, timeout: Duration) -> Result<(), String> {
        let started = Instant::now();
        wait_for(timeout, || {
            Client::from_flags(&ConnectionFlags {
                kubeconfig: Some(self.kubeconfig.clone()),
                ..ConnectionFlags::default()
            })
            .and_then(|c| c.get::<serde_json::Value>("/api/v1/namespaces/default"))
            .is_ok()
        })
        .map_err(|_| {
            format!(
                "the API server was not ready within {:?}; logs in {}",
                started.elapsed(),
                self.dir.display()
            )
        })
    }

    /// Kills kube-apiserver (SIGKILL: a crash, connections cut) and returns once it is
    /// down; [`Cluster::start_apiserver`] brings it back on the same port and data.
    pub fn kill_apiserver(&self) {
        let mut own = self.own.lock().unwrap();
        let own = own.as_mut().expect("only an own cluster can be restarted");
        let _ = own.apiserver.kill();
        let _ = own.apiserver.wait();
    }

    pub fn start_apiserver(&self) -> Result<(), String> {
        let bin = self.bin_dir.clone().expect("own cluster");
        {
            let mut own = self.own.lock().unwrap();
            let own = own.as_mut().expect("own cluster");
            own.apiserver = spawn_apiserver(&bin, &self.dir, &own.apiserver_args, own.group)?;
        }
        self.wait_ready(Duration::from_secs(90))
    }

    /// The process ids of etcd and kube-apiserver (own clusters only), for their CPU time.
    pub fn server_pids(&self) -> Option<(u32, u32)> {
        let own = self.own.lock().unwrap();
        own.as_ref().map(|p| (p.etcd.id(), p.apiserver.id()))
    }

    /// Whether the suite started this control plane (and may stop parts of it).
    pub fn is_own(&self) -> bool {
        self.group.is_some()
    }

    /// The process group of an own cluster: processes the suite starts join it, so the
    /// watchdog stops them too.
    pub fn process_group(&self) -> Option<i32> {
        self.group
    }

    /// Where the logs and the data directory are.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `kubectl proxy --port PORT` on a free port, in the cluster's process group; once it
    /// listens. Stopped when the value is dropped.
    pub fn kubectl_proxy(&self) -> KubectlProxy {
        let port = free_port();
        let mut command = self.kubectl();
        command
            .args(["proxy", "--port", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if let Some(group) = self.group {
            command.process_group(group);
        }
        let child = command.spawn().expect("starting kubectl proxy");
        wait_for(Duration::from_secs(30), || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        })
        .expect("kubectl proxy listening");
        KubectlProxy { port, child }
    }

    /// `kubectl` with this cluster's kubeconfig (from the binaries' directory, or PATH).
    pub fn kubectl(&self) -> Command {
        let program = self
            .bin_dir
            .as_ref()
            .map(|d| d.join("kubectl"))
            .filter(|p| p.is_file())
            .unwrap_or_else(|| PathBuf::from("kubectl"));
        let mut command = Command::new(program);
        command.arg("--kubeconfig").arg(&self.kubeconfig);
        command
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let Some(mut own) = self.own.lock().unwrap().take() else {
            return;
        };
        // Reverse order, SIGTERM, then whatever is left of the group.
        for child in [
            &mut own.controller_manager,
            &mut own.apiserver,
            &mut own.etcd,
        ] {
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
            let deadline = Instant::now() + Duration::from_secs(10);
            while child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = Command::new("kill")
            // `--`: procps-ng 4.0.2 reads `kill -KILL -123` as `kill(-1, SIGKILL)`,
            // every process there is.
            .args(["-KILL", "--", &format!("-{}", own.group)])
            .stderr(Stdio::null())
            .status();
        let _ = own.watchdog.kill();
        let _ = own.watchdog.wait();
        if std::env::var_os("WAVELET_E2E_KEEP").is_none() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

fn spawn_apiserver(bin: &Path, dir: &Path, args: &[String], group: i32) -> Result<Child, String> {
    Command::new(bin.join("kube-apiserver"))
        .args(args)
        .stdout(log_file(dir, "kube-apiserver"))
        .stderr(log_file(dir, "kube-apiserver.err"))
        .process_group(group)
        .spawn()
        .map_err(|e| format!("starting kube-apiserver: {e}"))
}

fn run_ok(command: &mut Command) -> Result<(), String> {
    let output = command
        .output()
        .map_err(|e| format!("running {command:?}: {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{command:?} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

/// A kubeconfig for `https://127.0.0.1:PORT` with this CA and bearer token.
pub fn kubeconfig_text(port: u16, ca: &Path, token: &str) -> String {
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    server: https://127.0.0.1:{port}
    certificate-authority: {}
users:
- name: e2e
  user:
    token: {token}
contexts:
- name: e2e
  context:
    cluster: e2e
    user: e2e
current-context: e2e
",
        ca.display()
    )
}

/// Polls `ready` every 100 ms until it holds or `timeout` passes.
pub fn wait_for(timeout: Duration, mut ready: impl FnMut() -> bool) -> Result<(), ()> {
    let deadline = Instant::now() + timeout;
    loop {
        if ready() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
