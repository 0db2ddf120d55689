//! Stakater Reloader's own Helm chart (2.2.16, read in place from
//! `../shared/third-party/reloader-chart-2.2.16/`) with only the image swapped to wavelet,
//! rendered with its defaults and common value sets, and run as a kubelet would run it:
//! every object applied to the real API server (its ServiceAccount and its RBAC, which
//! grants `list` but not `watch` on workloads), the binary started with exactly the
//! container's args and the environment the kubelet resolves from the container's `env`
//! (field refs, resource refs, the chart's Secret), with the ServiceAccount's in-cluster
//! credentials bind-mounted in a private mount namespace. Its probes (`/live`, `/metrics`
//! on the container port) answer 200, and an annotated workload rolls on a change.
//!
//! wavelet listens on the chart's fixed :9090, so the value sets run one after the other.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use wavelet::client::PatchType;

use crate::kube::{configmap, hashes, mounts_configmap, workload, Kube};
use crate::process::{http_get, in_a_pod, Wavelet};
use crate::Ctx;

const LONG: Duration = Duration::from_secs(60);

/// Reloader's chart, where `../shared` keeps it (never copied into the project).
fn reloader_chart() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/third-party/reloader-chart-2.2.16")
}

/// The workload the value set expects to roll.
#[derive(Clone, Copy, PartialEq)]
enum Subject {
    /// A Deployment annotated `reloader.stakater.com/auto: "true"`.
    Annotated,
    /// A Deployment without any annotation (`autoReloadAll`).
    Unannotated,
    /// An Argo Rollout annotated `reloader.stakater.com/auto: "true"`.
    ArgoRollout,
}

/// One way to install Reloader's chart.
struct ValueSet {
    name: &'static str,
    /// `helm --set`.
    values: Vec<String>,
    /// `helm --set-string`.
    strings: Vec<String>,
    /// What chart 2.2.17 adds for `reloader.leaderElection.*`: `--leader-election-*`
    /// (2.2.16 cannot render them; appended to the args as 2.2.17 renders them).
    chart_2_2_17_args: &'static [&'static str],
    /// `helm template --api-versions`, as `helm install` finds them in the cluster.
    api_versions: &'static [&'static str],
    subject: Subject,
    /// `watchGlobally: false`: Reloader watches its own namespace only.
    in_release_namespace: bool,
    /// Labels the ConfigMap and the apps namespace carry.
    labels: Value,
    /// The Lease `--enable-ha` takes.
    lease: bool,
    /// A Slack receiver gets the alert.
    alert: bool,
}

impl ValueSet {
    fn new(name: &'static str, values: &[&str]) -> ValueSet {
        ValueSet {
            name,
            values: values.iter().map(|v| v.to_string()).collect(),
            strings: Vec::new(),
            chart_2_2_17_args: &[],
            api_versions: &[],
            subject: Subject::Annotated,
            in_release_namespace: false,
            labels: json!({}),
            lease: false,
            alert: false,
        }
    }
}

fn value_sets(receiver: &str) -> Vec<ValueSet> {
    let alert_url =
        format!("reloader.deployment.env.secret.ALERT_WEBHOOK_URL=http://{receiver}/hooks/T0");
    vec![
        // First: installs the Argo Rollouts CRD, so that every later set also meets a
        // kind the API serves and Reloader's RBAC does not grant.
        ValueSet {
            subject: Subject::ArgoRollout,
            api_versions: &["argoproj.io/v1alpha1"],
            ..ValueSet::new("argo_rollouts", &["reloader.isArgoRollouts=true"])
        },
        ValueSet::new("defaults", &[]),
        ValueSet {
            chart_2_2_17_args: &[
                "--leader-election-lease-duration=20s",
                "--leader-election-renew-deadline=15s",
                "--leader-election-retry-period=3s",
            ],
            lease: true,
            ..ValueSet::new(
                "ha_two_replicas_and_2_2_17_leader_election",
                &["reloader.enableHA=true", "reloader.deployment.replicas=2"],
            )
        },
        ValueSet {
            subject: Subject::Unannotated,
            ..ValueSet::new(
                "ignore_secrets_auto_reload_all",
                &["reloader.ignoreSecrets=true", "reloader.autoReloadAll=true"],
            )
        },
        ValueSet {
            in_release_namespace: true,
            ..ValueSet::new("watch_globally_false", &["reloader.watchGlobally=false"])
        },
        ValueSet::new(
            "json_logs_debug_level",
            &["reloader.logFormat=json", "reloader.logLevel=debug"],
        ),
        ValueSet::new(
            "reload_on_create_delete_sync_after_restart",
            &[
                "reloader.reloadOnCreate=true",
                "reloader.reloadOnDelete=true",
                "reloader.syncAfterRestart=true",
            ],
        ),
        ValueSet::new(
            "annotations_strategy",
            &["reloader.reloadStrategy=annotations"],
        ),
        ValueSet {
            labels: json!({"reload": "yes"}),
            ..ValueSet::new(
                "ignore_namespaces_selectors",
                &[
                    "reloader.ignoreNamespaces=kube-system\\,default",
                    "reloader.resourceLabelSelector=reload=yes",
                    "reloader.namespaceSelector=reload=yes",
                ],
            )
        },
        ValueSet {
            alert: true,
            // Strings, as a values file writes them (`ALERT_ON_RELOAD: "true"`): the
            // chart's Secret base64-encodes each.
            strings: vec![
                "reloader.deployment.env.secret.ALERT_ON_RELOAD=true".into(),
                "reloader.deployment.env.secret.ALERT_SINK=slack".into(),
                alert_url,
                "reloader.deployment.env.secret.ALERT_ADDITIONAL_INFO=e2e".into(),
            ],
            ..ValueSet::new(
                "alert_env_and_metrics_by_namespace",
                &["reloader.enableMetricsByNamespace=true"],
            )
        },
    ]
}

/// `helm`, as the chart e2e finds it.
fn helm(ctx: &Ctx) -> Option<PathBuf> {
    std::env::var_os("WAVELET_HELM")
        .map(PathBuf::from)
        .or_else(|| ctx.cluster.bin_dir.as_ref().map(|d| d.join("helm")))
        .filter(|p| p.is_file())
}

/// The scenario: every value set, one after the other.
pub fn reloader_chart_runs_wavelet(ctx: &Ctx) {
    let Some(port) = ctx.cluster.api_port else {
        println!("e2e reloader_chart_image_swapped: skipped: needs a control plane the suite started (WAVELET_E2E_BIN_DIR)");
        return;
    };
    let Some(helm) = helm(ctx) else {
        assert!(
            std::env::var_os("CI").is_none(),
            "reloader_chart_image_swapped needs helm and CI must run it"
        );
        println!("e2e reloader_chart_image_swapped: skipped: no helm (set WAVELET_HELM)");
        return;
    };
    if !crate::scenarios::is_root() {
        assert!(
            std::env::var_os("CI").is_none(),
            "reloader_chart_image_swapped needs root (a mount namespace) and CI must run it"
        );
        println!(
            "e2e reloader_chart_image_swapped: skipped: needs root for a private mount namespace"
        );
        return;
    }
    let receiver = Receiver::start();
    let created_crd = install_rollouts_crd(&ctx.kube);
    for (n, set) in value_sets(&receiver.address).iter().enumerate() {
        run_value_set(ctx, &helm, port, n, set, &receiver);
    }
    // A borrowed cluster is left as found; the suite's own goes with it (a CRD being
    // deleted under a later scenario's watch would only disturb it).
    if created_crd && !ctx.cluster.is_own() {
        let _ = ctx.kube.client.delete::<Value>(
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/rollouts.argoproj.io",
            None,
        );
    }
}

fn run_value_set(
    ctx: &Ctx,
    helm: &Path,
    api_port: u16,
    n: usize,
    set: &ValueSet,
    receiver: &Receiver,
) {
    let started = std::time::Instant::now();
    let kube = &ctx.kube;
    let release = format!("wr{n}");
    let release_ns = format!("e2e-rl{n}");
    let apps_ns = if set.in_release_namespace {
        release_ns.clone()
    } else {
        format!("e2e-rl{n}-apps")
    };
    let what = format!("Reloader's chart, {}", set.name);
    kube.create_namespace(&release_ns);
    kube.create_namespace(&apps_ns);
    kube.client
        .patch::<Value>(
            &format!("/api/v1/namespaces/{apps_ns}"),
            PatchType::Merge,
            &json!({"metadata": {"labels": set.labels}}),
        )
        .expect("labelling the apps namespace");

    // 1. The chart with the image swapped, every object applied.
    let rendered = render(helm, &release, &release_ns, set);
    apply(ctx, &rendered, &what);
    let objects: Vec<Value> = rendered
        .split("\n---")
        .filter_map(|d| wavelet::client::yaml::parse(d).ok())
        .filter(|v| v.is_object())
        .collect();
    let deployment = objects
        .iter()
        .find(|o| o["kind"] == "Deployment")
        .unwrap_or_else(|| panic!("{what}: no Deployment rendered"));
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(
        container["image"], "wavelet:0.1.0",
        "{what}: the image swapped"
    );
    let service_account = deployment["spec"]["template"]["spec"]["serviceAccountName"]
        .as_str()
        .unwrap()
        .to_string();

    // 2. What the workload opts in with; created before wavelet starts.
    kube.create({
        let mut cm = configmap(&apps_ns, "cfg", json!({"k": "1"}));
        cm["metadata"]["labels"] = set.labels.clone();
        cm
    });
    let auto = json!({"reloader.stakater.com/auto": "true"});
    let subject = match set.subject {
        Subject::Annotated => {
            workload("Deployment", &apps_ns, "web", auto, mounts_configmap("cfg"))
        }
        Subject::Unannotated => workload(
            "Deployment",
            &apps_ns,
            "web",
            json!({}),
            mounts_configmap("cfg"),
        ),
        Subject::ArgoRollout => {
            let mut rollout =
                workload("Deployment", &apps_ns, "web", auto, mounts_configmap("cfg"));
            rollout["apiVersion"] = json!("argoproj.io/v1alpha1");
            rollout["kind"] = json!("Rollout");
            rollout
        }
    };
    let subject_path = match set.subject {
        Subject::ArgoRollout => format!("/apis/argoproj.io/v1alpha1/namespaces/{apps_ns}/rollouts"),
        _ => format!("/apis/apps/v1/namespaces/{apps_ns}/deployments"),
    };
    kube.client
        .post::<Value>(&subject_path, &subject)
        .unwrap_or_else(|e| panic!("{what}: creating the workload: {e}"));
    let get = || {
        kube.client
            .get::<Value>(&format!("{subject_path}/web"))
            .unwrap()
    };

    // 3. The container as the kubelet starts it: the image's entrypoint with the args
    // (which replace its `run`), the resolved env, the ServiceAccount's credentials.
    let mut args: Vec<String> = container["args"]
        .as_array()
        .map(|a| a.iter().map(|v| v.as_str().unwrap().to_string()).collect())
        .unwrap_or_else(|| vec!["run".into()]);
    args.extend(set.chart_2_2_17_args.iter().map(|a| a.to_string()));
    let pod_name = format!("{release}-reloader-6c9d8f7b5-x2x4p");
    let env = resolve_env(kube, &release_ns, &pod_name, container, &what);
    let sa_dir = service_account_dir(ctx, &release_ns, &service_account, n);
    let port = probe_port(container, "livenessProbe");
    assert_eq!(port, probe_port(container, "readinessProbe"));
    // The port is the chart's, fixed: another program on this machine may hold it for a
    // while (a benchmark running Reloader itself).
    if crate::cluster::wait_for(Duration::from_secs(300), || {
        TcpListener::bind(("0.0.0.0", port)).is_ok()
    })
    .is_err()
    {
        panic!("{what}: port {port} (the chart's, fixed) stayed in use on this machine");
    }
    let mut command = in_a_pod(&sa_dir, &args);
    command
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env("KUBERNETES_SERVICE_HOST", "127.0.0.1")
        .env("KUBERNETES_SERVICE_PORT", api_port.to_string());
    if let Some(group) = ctx.cluster.process_group() {
        std::os::unix::process::CommandExt::process_group(&mut command, group);
    }
    let waited_for_port = started.elapsed();
    let mut wavelet = Wavelet::spawn(command);
    wavelet.wait_output("initial sync complete", LONG);

    // 4. The probes, where the chart points them.
    let addr = format!("127.0.0.1:{port}");
    for path in [
        probe_path(container, "livenessProbe"),
        probe_path(container, "readinessProbe"),
    ] {
        let (code, _) = http_status(&addr, &path);
        assert_eq!(code, 200, "{what}: the probe {path}:\n{}", wavelet.output());
    }

    // 5. Adopted without a rollout; a data change rolls it, once.
    kube.until(LONG, &format!("{what}: adoption"), || {
        hashes(&get()).1.is_some()
    });
    assert_eq!(hashes(&get()).0, None, "{what}: adoption rolled");
    let received_before = receiver.count();
    kube.merge_patch("ConfigMap", &apps_ns, "cfg", json!({"data": {"k": "2"}}));
    kube.until(LONG, &format!("{what}: the rollout"), || {
        let (template, metadata) = hashes(&get());
        template.is_some() && template == metadata
    });
    let output = wavelet.output();
    assert!(
        output.contains("Reloader setting: "),
        "{what}: nothing said of Reloader's settings:\n{output}"
    );
    assert!(!output.contains("panicked"), "{what}:\n{output}");
    if set.lease {
        let lease = kube
            .get("Lease", &release_ns, "wavelet")
            .expect("the Lease");
        assert!(
            lease["spec"]["holderIdentity"]
                .as_str()
                .is_some_and(|h| !h.is_empty()),
            "{what}: {lease}"
        );
    }
    if set.alert {
        kube.until(LONG, &format!("{what}: the alert"), || {
            receiver.count() > received_before
        });
        let body = receiver.last();
        assert_eq!(
            body["attachments"][0]["author_name"], "wavelet",
            "{what}: {body}"
        );
        let text = body["attachments"][0]["text"].as_str().unwrap();
        assert!(
            text.starts_with("e2e : wavelet detected changes in *cfg* of type *CONFIGMAP*"),
            "{what}: {text}"
        );
        let metrics = http_get(&addr, "/metrics");
        assert!(
            metrics.contains(&format!("reloader_reload_executed_total_by_namespace{{success=\"true\",namespace=\"{apps_ns}\"}} 1")),
            "{what}:\n{metrics}"
        );
    }
    // At least this rollout (watching every namespace, it may meet workloads that earlier
    // scenarios left opted in). The counter follows the PATCH's answer, which can come after
    // the watch above has shown the write: wait for it.
    let reloads = || {
        http_get(&addr, "/metrics")
            .lines()
            .find_map(|l| l.strip_prefix("reloader_reload_executed_total{success=\"true\"} "))
            .and_then(|v| v.trim().parse::<f64>().ok())
    };
    let counted = crate::cluster::wait_for(LONG, || reloads().is_some_and(|n| n >= 1.0));
    assert!(counted.is_ok(), "{what}:\n{}", http_get(&addr, "/metrics"));

    // 6. Stopped as the kubelet stops it; the chart's objects removed.
    wavelet.signal("TERM");
    let status = wavelet.wait_exit(Duration::from_secs(10));
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(0),
        "{what}: exit on SIGTERM:\n{}",
        wavelet.output()
    );
    delete(ctx, &rendered);
    println!(
        "e2e reloader_chart_image_swapped: {} ... ok ({:.1} s, {:.1} s of them before wavelet started)",
        set.name,
        started.elapsed().as_secs_f64(),
        waited_for_port.as_secs_f64()
    );
}

fn render(helm: &Path, release: &str, namespace: &str, set: &ValueSet) -> String {
    let mut command = Command::new(helm);
    command
        .args(["template", release])
        .arg(reloader_chart())
        .args(["--namespace", namespace])
        .args([
            "--set",
            "image.repository=wavelet",
            "--set",
            "image.tag=0.1.0",
        ]);
    for value in &set.values {
        command.args(["--set", value]);
    }
    for value in &set.strings {
        command.args(["--set-string", value]);
    }
    for api in set.api_versions {
        command.args(["--api-versions", api]);
    }
    let out = command.output().expect("running helm");
    assert!(
        out.status.success(),
        "helm template {}: {}",
        set.name,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn kubectl_with_input(ctx: &Ctx, args: &[&str], input: &str) -> std::process::Output {
    let mut child = ctx
        .cluster
        .kubectl()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running kubectl");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn apply(ctx: &Ctx, rendered: &str, what: &str) {
    let out = kubectl_with_input(ctx, &["apply", "-f", "-"], rendered);
    assert!(
        out.status.success(),
        "{what}: kubectl apply: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn delete(ctx: &Ctx, rendered: &str) {
    let _ = kubectl_with_input(
        ctx,
        &["delete", "--ignore-not-found", "--wait=false", "-f", "-"],
        rendered,
    );
}

/// The container's environment as the kubelet resolves it (the forms Reloader's chart
/// renders): values, field refs of the Pod, resource refs (no limits: the node's
/// allocatable, taken as 2 CPUs and 8 GiB), and keys of Secrets.
fn resolve_env(
    kube: &Kube,
    ns: &str,
    pod_name: &str,
    container: &Value,
    what: &str,
) -> Vec<(String, String)> {
    let mut env = Vec::new();
    for var in container["env"].as_array().into_iter().flatten() {
        let name = var["name"].as_str().unwrap().to_string();
        let from = &var["valueFrom"];
        let value = if let Some(value) = var["value"].as_str() {
            value.to_string()
        } else if let Some(path) = from["fieldRef"]["fieldPath"].as_str() {
            match path {
                "metadata.namespace" => ns.to_string(),
                "metadata.name" => pod_name.to_string(),
                other => panic!("{what}: env {name}: field {other}"),
            }
        } else if let Some(resource) = from["resourceFieldRef"]["resource"].as_str() {
            match resource {
                "limits.cpu" => "2".to_string(),
                "limits.memory" => (8u64 << 30).to_string(),
                other => panic!("{what}: env {name}: resource {other}"),
            }
        } else if let Some(secret) = from["secretKeyRef"]["name"].as_str() {
            let key = from["secretKeyRef"]["key"].as_str().unwrap();
            let object: Value = kube
                .client
                .get(&format!("/api/v1/namespaces/{ns}/secrets/{secret}"))
                .unwrap_or_else(|e| panic!("{what}: env {name}: Secret {secret}: {e}"));
            let encoded = object["data"][key]
                .as_str()
                .unwrap_or_else(|| panic!("{what}: {secret} has no {key}"));
            String::from_utf8(wavelet::objects::base64::decode(encoded.as_bytes()).unwrap())
                .unwrap()
        } else {
            panic!("{what}: env {name}: {var}");
        };
        env.push((name, value));
    }
    env
}

/// The ServiceAccount's token (TokenRequest), the CA and the namespace, as the kubelet
/// mounts them.
fn service_account_dir(ctx: &Ctx, ns: &str, name: &str, n: usize) -> PathBuf {
    let kube = &ctx.kube;
    kube.until(LONG, &format!("ServiceAccount {ns}/{name}"), || {
        kube.get("ServiceAccount", ns, name).is_some()
    });
    let token: Value = kube
        .client
        .post(
            &format!("/api/v1/namespaces/{ns}/serviceaccounts/{name}/token"),
            &json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                "spec": {"expirationSeconds": 3600}}),
        )
        .expect("a TokenRequest token");
    let dir = ctx.cluster.dir().join(format!("reloader-sa-{n}"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("token"),
        token["status"]["token"].as_str().unwrap(),
    )
    .unwrap();
    std::fs::copy(ctx.cluster.ca.as_ref().unwrap(), dir.join("ca.crt")).unwrap();
    std::fs::write(dir.join("namespace"), ns).unwrap();
    dir
}

fn probe_path(container: &Value, probe: &str) -> String {
    container[probe]["httpGet"]["path"]
        .as_str()
        .unwrap()
        .to_string()
}

/// The container port a probe names (`port: http`).
fn probe_port(container: &Value, probe: &str) -> u16 {
    let port = &container[probe]["httpGet"]["port"];
    if let Some(number) = port.as_u64() {
        return number as u16;
    }
    let name = port.as_str().unwrap();
    container["ports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .and_then(|p| p["containerPort"].as_u64())
        .unwrap_or_else(|| panic!("no container port {name}")) as u16
}

/// A GET's status code and body.
fn http_status(addr: &str, path: &str) -> (u16, String) {
    let mut stream = std::net::TcpStream::connect(addr).expect("connecting to the probe port");
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    let _ = std::io::Read::read_to_string(&mut stream, &mut text);
    let code = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (code, text)
}

/// Creates a minimal `rollouts.argoproj.io` CRD unless the cluster has one; true when it
/// was created here.
fn install_rollouts_crd(kube: &Kube) -> bool {
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "rollouts.argoproj.io"},
        "spec": {"group": "argoproj.io", "scope": "Namespaced",
            "names": {"plural": "rollouts", "singular": "rollout", "kind": "Rollout"},
            "versions": [{"name": "v1alpha1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}});
    let created = match kube.client.post::<Value>(
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        &crd,
    ) {
        Ok(_) => true,
        Err(e) if e.status().is_some_and(|s| s.is_conflict()) => false,
        Err(e) => panic!("creating the Rollout CRD: {e}"),
    };
    kube.until(LONG, "the Rollout CRD to be served", || {
        kube.client
            .get::<Value>("/apis/argoproj.io/v1alpha1/rollouts")
            .is_ok()
    });
    created
}

/// A Slack webhook receiver on 127.0.0.1: the bodies it got.
struct Receiver {
    address: String,
    bodies: Arc<Mutex<Vec<Value>>>,
}

impl Receiver {
    fn start() -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let got = Arc::clone(&bodies);
        std::thread::spawn(move || {
            for stream in listener.incoming().map_while(Result::ok) {
                let mut reader = BufReader::new(stream);
                let mut length = 0;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line.trim().is_empty() {
                        break;
                    }
                    if let Some((k, v)) = line.split_once(':') {
                        if k.eq_ignore_ascii_case("content-length") {
                            length = v.trim().parse().unwrap_or(0);
                        }
                    }
                }
                let mut body = vec![0; length];
                if std::io::Read::read_exact(&mut reader, &mut body).is_ok() {
                    got.lock()
                        .unwrap()
                        .push(serde_json::from_slice(&body).unwrap_or(Value::Null));
                }
                let _ = reader.get_mut().write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
                );
            }
        });
        Receiver { address, bodies }
    }

    fn count(&self) -> usize {
        self.bodies.lock().unwrap().len()
    }

    fn last(&self) -> Value {
        self.bodies
            .lock()
            .unwrap()
            .last()
            .cloned()
            .unwrap_or(Value::Null)
    }
}
