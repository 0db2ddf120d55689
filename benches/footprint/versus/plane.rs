//! The real control plane of the comparison: etcd, kube-apiserver and
//! kube-controller-manager (`cluster.rs`), with one user per controller under test, so
//! that the API server's audit log tells their requests apart; the audit log read back
//! as request counts by verb and resource between two moments.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Deserialize;
use wavelet::client::Client;

use crate::calls::{Call, CallCounts, Verb};
use crate::cluster::{kubeconfig_text, Cluster as ControlPlane, Extras, Source};

use super::controllers::Which;

/// The audit policy: the controllers' requests at Metadata level (who, verb, object,
/// code), once when a request completes and once when a watch starts; nothing else.
const AUDIT_POLICY: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [\"RequestReceived\"]
rules:
- level: Metadata
  users: [\"bench-wavelet\", \"bench-reloader\", \"bench-wave\"]
- level: None
";

pub struct Plane {
    pub cluster: ControlPlane,
    pub admin: Client,
    pub dir: PathBuf,
    kubeconfigs: HashMap<Which, PathBuf>,
    audit: Audit,
}

impl Plane {
    pub fn start(bin: PathBuf) -> Plane {
        let dir = std::env::temp_dir().join(format!(
            "wavelet-versus-{}-{}",
            std::process::id(),
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_millis()
        ));
        std::fs::create_dir_all(&dir).expect("creating the benchmark's directory");
        let policy = dir.join("audit-policy.yaml");
        std::fs::write(&policy, AUDIT_POLICY).expect("writing the audit policy");
        let audit_log = dir.join("audit.log");
        let extras = Extras {
            users: Which::ALL
                .iter()
                .map(|w| (w.token(), w.user().to_string()))
                .collect(),
            apiserver_args: vec![
                format!("--audit-policy-file={}", policy.display()),
                format!("--audit-log-path={}", audit_log.display()),
                "--audit-log-maxsize=100000".into(),
                "--audit-log-mode=blocking".into(),
            ],
            // Its default, 20 requests per second, takes minutes to write the status of
            // thousands of Deployments; the controllers under test are not limited so.
            controller_manager_args: vec![
                "--kube-api-qps=1000".into(),
                "--kube-api-burst=2000".into(),
            ],
        };
        let cluster = ControlPlane::start_with(&Source::Binaries(bin), &extras)
            .expect("starting the control plane");
        let admin = cluster.admin();
        let (port, ca) = (
            cluster.api_port.expect("own cluster"),
            cluster.ca.clone().expect("own cluster"),
        );
        let kubeconfigs = Which::ALL
            .iter()
            .map(|w| {
                let path = dir.join(format!("{}.kubeconfig", w.name()));
                std::fs::write(&path, kubeconfig_text(port, &ca, &w.token()))
                    .expect("writing a kubeconfig");
                (*w, path)
            })
            .collect();
        Plane {
            cluster,
            admin,
            dir,
            kubeconfigs,
            audit: Audit {
                path: audit_log,
                read: Mutex::new((0, Vec::new())),
            },
        }
    }

    pub fn kubeconfig(&self, which: Which) -> &PathBuf {
        &self.kubeconfigs[&which]
    }

    /// The requests `which` made between `from` and `to` (wall clock), by verb and
    /// resource.
    pub fn calls(&self, which: Which, from: SystemTime, to: SystemTime) -> CallCounts {
        self.audit.calls(which.user(), from, to)
    }

    /// The requests `which` made into a namespace after that namespace's time in
    /// `deleted` (when its DELETE was sent), by verb and resource; watches and lists of
    /// all namespaces are not in a namespace.
    pub fn calls_into_deleted(
        &self,
        which: Which,
        deleted: &HashMap<String, SystemTime>,
    ) -> CallCounts {
        self.audit.calls_into_deleted(which.user(), deleted)
    }

    /// Distinct workloads `which` wrote successfully (PATCH or PUT) since `from`.
    pub fn workloads_written(&self, which: Which, from: SystemTime) -> usize {
        self.audit.workloads_written(which.user(), from)
    }

    /// The API server's own metrics, as text.
    pub fn server_metrics(&self) -> String {
        let output = self
            .cluster
            .kubectl()
            .args(["get", "--raw", "/metrics"])
            .output()
            .expect("running kubectl get --raw /metrics");
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// CPU seconds etcd and kube-apiserver have used so far.
    pub fn server_cpu_seconds(&self) -> (f64, f64) {
        let (etcd, apiserver) = self.cluster.server_pids().expect("own cluster");
        (
            crate::process::Sample::of(etcd).cpu_seconds,
            crate::process::Sample::of(apiserver).cpu_seconds,
        )
    }
}

#[derive(Deserialize)]
struct AuditEvent {
    stage: String,
    verb: String,
    #[serde(default)]
    user: AuditUser,
    #[serde(default, rename = "objectRef")]
    object: Option<AuditObject>,
    #[serde(default, rename = "responseStatus")]
    status: Option<AuditStatus>,
    #[serde(rename = "requestReceivedTimestamp")]
    received: String,
}

#[derive(Deserialize, Default)]
struct AuditUser {
    #[serde(default)]
    username: String,
}

#[derive(Deserialize)]
struct AuditObject {
    #[serde(default)]
    resource: String,
    #[serde(default)]
    subresource: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
}

#[derive(Deserialize)]
struct AuditStatus {
    #[serde(default)]
    code: u16,
}

/// One request as the audit log has it.
struct Logged {
    user: String,
    verb: String,
    resource: String,
    object: Option<(String, String)>,
    /// The namespace of the request, also of a create (whose object has no name yet).
    namespace: Option<String>,
    code: u16,
    received: SystemTime,
}

struct Audit {
    path: PathBuf,
    /// How far the file was read, and what was read.
    read: Mutex<(u64, Vec<Logged>)>,
}

/// `2026-11-26T08:43:09.123456Z` as a time.
fn parse_micro_time(text: &str) -> Option<SystemTime> {
    let seconds = wavelet::time::parse_rfc3339(&format!("{}Z", text.get(..19)?))?;
    let fraction = text
        .get(20..)
        .map(|f| f.trim_end_matches('Z'))
        .unwrap_or("");
    let micros = format!("{fraction:0<6}")
        .get(..6)?
        .parse::<u64>()
        .unwrap_or(0);
    Some(UNIX_EPOCH + Duration::from_secs(seconds) + Duration::from_micros(micros))
}

impl Audit {
    /// Reads what was appended since the last look (blocking mode: an event is written
    /// before its response is sent, so a short wait makes a boundary complete).
    fn refresh(&self) {
        std::thread::sleep(Duration::from_millis(200));
        let mut read = self.read.lock().unwrap();
        let Ok(mut file) = std::fs::File::open(&self.path) else {
            return;
        };
        if file.seek(SeekFrom::Start(read.0)).is_err() {
            return;
        }
        let mut reader = BufReader::new(file);
        let mut line = String::new();
        loop {
            line.clear();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => break,
                Ok(n) if !line.ends_with('\n') => {
                    let _ = n; // a line being written: read it next time
                    break;
                }
                Ok(n) => {
                    read.0 += n as u64;
                    let Ok(event) = serde_json::from_str::<AuditEvent>(&line) else {
                        continue;
                    };
                    // A watch counts when it starts; every other request when it completes.
                    let counts = match event.stage.as_str() {
                        "ResponseStarted" => event.verb == "watch",
                        "ResponseComplete" => event.verb != "watch",
                        _ => false,
                    };
                    if !counts {
                        continue;
                    }
                    let (resource, object) = match &event.object {
                        Some(o) => (
                            match &o.subresource {
                                Some(sub) => format!("{}/{sub}", o.resource),
                                None => o.resource.clone(),
                            },
                            o.name
                                .clone()
                                .map(|n| (o.namespace.clone().unwrap_or_default(), n)),
                        ),
                        None => ("(non-resource)".into(), None),
                    };
                    let namespace = event.object.as_ref().and_then(|o| o.namespace.clone());
                    read.1.push(Logged {
                        namespace,
                        user: event.user.username,
                        verb: event.verb,
                        resource,
                        object,
                        code: event.status.map_or(0, |s| s.code),
                        received: parse_micro_time(&event.received).unwrap_or(UNIX_EPOCH),
                    });
                }
            }
        }
    }

    fn calls(&self, user: &str, from: SystemTime, to: SystemTime) -> CallCounts {
        self.refresh();
        let read = self.read.lock().unwrap();
        let mut counts = CallCounts::default();
        for e in read
            .1
            .iter()
            .filter(|e| e.user == user && e.received >= from && e.received < to)
        {
            counts.add_one(Call {
                verb: Verb::of(&e.verb),
                resource: e.resource.clone(),
            });
        }
        counts
    }

    fn calls_into_deleted(&self, user: &str, deleted: &HashMap<String, SystemTime>) -> CallCounts {
        self.refresh();
        let read = self.read.lock().unwrap();
        let mut counts = CallCounts::default();
        for e in read.1.iter().filter(|e| e.user == user) {
            let after_delete = e
                .namespace
                .as_ref()
                .and_then(|ns| deleted.get(ns))
                .is_some_and(|at| e.received >= *at);
            if after_delete {
                // Refused ones apart: `events (403)` while the namespace terminates.
                let resource = match e.code {
                    200..=299 => e.resource.clone(),
                    code => format!("{} ({code})", e.resource),
                };
                counts.add_one(Call {
                    verb: Verb::of(&e.verb),
                    resource,
                });
            }
        }
        counts
    }

    fn workloads_written(&self, user: &str, from: SystemTime) -> usize {
        self.refresh();
        let read = self.read.lock().unwrap();
        let mut written: Vec<&(String, String)> = read
            .1
            .iter()
            .filter(|e| e.user == user && e.received >= from)
            .filter(|e| matches!(e.verb.as_str(), "patch" | "update"))
            .filter(|e| (200..300).contains(&e.code))
            .filter(|e| {
                matches!(
                    e.resource.as_str(),
                    "deployments" | "statefulsets" | "daemonsets"
                )
            })
            .filter_map(|e| e.object.as_ref())
            .collect();
        written.sort();
        written.dedup();
        written.len()
    }
}
