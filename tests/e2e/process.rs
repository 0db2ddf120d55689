//! The `wavelet` binary under test as a child process: its output captured, its
//! `/metrics` read, stopped on drop. It joins the cluster's process group, so the
//! watchdog stops it too if the suite dies.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::cluster::{wait_for, Cluster};

pub struct Wavelet {
    child: Option<Child>,
    output: Arc<Mutex<String>>,
    readers: Vec<std::thread::JoinHandle<()>>,
}

/// `wavelet` with these arguments (a subcommand first), the cluster's kubeconfig added
/// unless `in_cluster`.
pub fn command(cluster: &Cluster, args: &[&str]) -> Command {
    command_via(cluster, &cluster.kubeconfig, args)
}

/// [`command`] with another kubeconfig for the same cluster (one through a forwarder).
pub fn command_via(cluster: &Cluster, kubeconfig: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_wavelet"));
    command.args(args);
    command.arg("--kubeconfig").arg(kubeconfig);
    command.env_clear().env("RUST_LOG", "debug");
    if let Some(group) = cluster.process_group() {
        command.process_group(group);
    }
    command
}

/// Where the kubelet mounts a Pod's service-account token, CA and namespace.
const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// The binary under test with `args`, run as in a Pod: in a private mount namespace
/// (`unshare`, needs root) where the service-account directory holds the files of `sa_dir`.
/// `/var/run` gets a tmpfs of that namespace first, so the mount point is made there and the
/// machine is left as it was (a directory made on the real filesystem stays after the test,
/// and a later run would take the machine for a Pod). The environment is empty: add the
/// Pod's (`KUBERNETES_SERVICE_HOST`/`PORT`, the container's variables).
pub fn in_a_pod(sa_dir: &Path, args: &[String]) -> Command {
    let mut command = Command::new("unshare");
    command
        .args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg(
            "mount -n -t tmpfs wavelet-e2e-pod /var/run && mkdir -p \"$1\" && \
             mount -n --bind \"$2\" \"$1\" && shift 2 && exec \"$0\" \"$@\"",
        )
        .arg(env!("CARGO_BIN_EXE_wavelet"))
        .arg(SERVICE_ACCOUNT_DIR)
        .arg(sa_dir)
        .args(args)
        .env_clear();
    command
}

impl Wavelet {
    /// `wavelet run ARGS` against the cluster, listening on a free port; waits for the
    /// initial sync.
    pub fn run(cluster: &Cluster, args: &[&str]) -> Wavelet {
        Wavelet::run_via(cluster, &cluster.kubeconfig, args)
    }

    /// [`Wavelet::run`] with another kubeconfig for the same cluster.
    pub fn run_via(cluster: &Cluster, kubeconfig: &Path, args: &[&str]) -> Wavelet {
        let mut all = vec!["run", "--listen-addr", "127.0.0.1:0"];
        all.extend_from_slice(args);
        let wavelet = Wavelet::spawn(command_via(cluster, kubeconfig, &all));
        wavelet.wait_output("initial sync complete", Duration::from_secs(60));
        wavelet
    }

    pub fn spawn(mut command: Command) -> Wavelet {
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command.spawn().expect("starting wavelet");
        let output = Arc::new(Mutex::new(String::new()));
        let mut readers = Vec::new();
        let pipes: [Option<Box<dyn Read + Send>>; 2] = [
            child
                .stdout
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
            child
                .stderr
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
        ];
        for pipe in pipes.into_iter().flatten() {
            let output = Arc::clone(&output);
            readers.push(std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                    let mut out = output.lock().unwrap();
                    out.push_str(&line);
                    out.push('\n');
                }
            }));
        }
        Wavelet {
            child: Some(child),
            output,
            readers,
        }
    }

    pub fn output(&self) -> String {
        self.output.lock().unwrap().clone()
    }

    /// Waits for `needle` in the output; panics with the output otherwise.
    pub fn wait_output(&self, needle: &str, timeout: Duration) {
        if wait_for(timeout, || self.output().contains(needle)).is_err() {
            panic!(
                "wavelet did not print {needle:?} within {timeout:?}; output:\n{}",
                self.output()
            );
        }
    }

    /// The address `/metrics` is served on (from the `listening on` line).
    pub fn http_addr(&self) -> String {
        self.wait_output("listening on ", Duration::from_secs(30));
        let out = self.output();
        let rest = &out[out.find("listening on ").unwrap() + "listening on ".len()..];
        rest.split_whitespace().next().unwrap().to_string()
    }

    /// The value of a metric line that starts with `series` (name and labels), or 0.
    pub fn metric(&self, series: &str) -> f64 {
        let text = http_get(&self.http_addr(), "/metrics");
        text.lines()
            .filter(|l| l.starts_with(series))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    }

    /// Waits for the process to exit and its output to be read.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        let child = self.child.as_mut()?;
        loop {
            if let Some(status) = child.try_wait().ok().flatten() {
                self.child = None;
                for reader in self.readers.drain(..) {
                    let _ = reader.join();
                }
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops it with SIGTERM, as a pod deletion does, and waits for it to exit (SIGKILL
    /// after 10 s).
    pub fn terminate(&mut self) {
        if let Some(child) = self.child.as_ref() {
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
        }
        if self.wait_exit(Duration::from_secs(10)).is_none() {
            self.kill();
        }
    }

    /// Sends a signal by name (`TERM`, `STOP`, `CONT`) with `kill(1)`.
    pub fn signal(&self, name: &str) {
        let pid = self.child.as_ref().expect("running").id().to_string();
        let status = Command::new("kill")
            .args([format!("-{name}"), pid])
            .status()
            .expect("running kill");
        assert!(status.success(), "kill -{name} failed");
    }

    /// Stops it (SIGKILL) and returns its output.
    pub fn kill(&mut self) -> String {
        if let Some(child) = self.child.as_mut() {
            let _ = child.kill();
        }
        self.wait_exit(Duration::from_secs(10));
        self.output()
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

/// A one-shot `wavelet status|hash ...`: exit code and output.
pub fn one_shot(cluster: &Cluster, args: &[&str]) -> (i32, String) {
    let output = command(cluster, args)
        .env("RUST_LOG", "warn")
        .output()
        .expect("running wavelet");
    let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&output.stderr));
    (output.status.code().unwrap_or(-1), text)
}

/// A plain HTTP/1.1 GET on 127.0.0.1; the body.
pub fn http_get(addr: &str, path: &str) -> String {
    let mut stream = TcpStream::connect(addr).expect("connecting to wavelet's HTTP port");
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_string())
        .unwrap_or_default()
}
