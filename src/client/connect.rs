//! Where to connect and with which credentials: `--server`, a kubeconfig (or a `KUBECONFIG`
//! list and `--context`), in-cluster service-account files, or `~/.kube/config`, in that
//! order of precedence, resolved into the setup `Client::build` turns into a client.

use super::*;

impl Client {
    /// Precedence: `--server` > `--kubeconfig` > `$KUBECONFIG` (a `:` list, merged as kubectl
    /// merges it; `--context` picks a context other than the current one) >
    /// in-cluster (`KUBERNETES_SERVICE_HOST`/`PORT` and the service account files) >
    /// `~/.kube/config`.
    ///
    /// `--server http://...` (a `kubectl proxy`) never sends credentials. `--server https://...`
    /// takes the CA and credentials of `--kubeconfig` when that is given as well (as kubectl
    /// does), and otherwise needs `--insecure-skip-tls-verify`.
    pub fn from_flags(flags: &ConnectionFlags) -> Result<Client, Error> {
        Client::from_flags_with_env(
            flags,
            &|name| std::env::var_os(name),
            Path::new(SERVICE_ACCOUNT_DIR),
        )
    }

    /// [`Client::from_flags`] with the environment `env` and the service account files in
    /// `service_account_dir` (normally [`SERVICE_ACCOUNT_DIR`]): tests give their own.
    pub(super) fn from_flags_with_env(
        flags: &ConnectionFlags,
        env: &dyn Fn(&str) -> Option<OsString>,
        service_account_dir: &Path,
    ) -> Result<Client, Error> {
        let non_empty = |name: &str| env(name).filter(|v| !v.is_empty());
        if let Some(server) = &flags.server {
            let pod_namespace = pod_namespace(env, service_account_dir);
            return Client::from_server_flag(server, flags, pod_namespace);
        }
        if let Some(path) = &flags.kubeconfig {
            return Client::from_kubeconfig(std::slice::from_ref(path), flags);
        }
        if let Some(list) = non_empty("KUBECONFIG") {
            let paths: Vec<PathBuf> = std::env::split_paths(&list)
                .filter(|p| !p.as_os_str().is_empty())
                .collect();
            if !paths.is_empty() {
                return Client::from_kubeconfig(&paths, flags);
            }
        }
        if let (Some(host), Some(port)) = (
            non_empty("KUBERNETES_SERVICE_HOST"),
            non_empty("KUBERNETES_SERVICE_PORT"),
        ) {
            return Client::in_cluster_from(
                service_account_dir,
                &host.to_string_lossy(),
                &port.to_string_lossy(),
                flags.insecure_skip_tls_verify,
            );
        }
        let home = non_empty("HOME").map(PathBuf::from);
        if let Some(path) = home.as_ref().map(|home| home.join(".kube").join("config")) {
            if path.exists() {
                return Client::from_kubeconfig(&[path], flags);
            }
        }
        Err(Error::Config(format!(
            "no API server configured: not in a cluster (KUBERNETES_SERVICE_HOST is unset) and {} does not exist; \
             pass --server URL (e.g. http://127.0.0.1:8001 with `kubectl proxy`) or --kubeconfig PATH",
            home.map(|h| h.join(".kube/config").display().to_string()).unwrap_or_else(|| "~/.kube/config".into())
        )))
    }

    /// For unit tests: [`Client::from_flags`] with an empty environment and an empty
    /// service account directory, so that no test reads the machine it runs on.
    #[cfg(test)]
    pub(crate) fn for_tests(flags: &ConnectionFlags) -> Result<Client, Error> {
        let no_service_account = crate::testing::TempDir::new("no-service-account");
        Client::from_flags_with_env(flags, &|_| None, &no_service_account.0)
    }

    /// `--server`: the URL given, with the namespace of the Pod wavelet runs in when it runs
    /// in one (`pod_namespace`, see [`pod_namespace`]).
    fn from_server_flag(
        server: &str,
        flags: &ConnectionFlags,
        pod_namespace: Option<String>,
    ) -> Result<Client, Error> {
        let server = server.trim_end_matches('/');
        check_url(server, "--server")?;
        if server.starts_with("http://") {
            if flags.kubeconfig.is_some() {
                log::debug!(
                    "--server {server} is plain HTTP (a kubectl proxy); --kubeconfig is not used"
                );
            }
            return Client::build(Setup {
                base_url: server.to_string(),
                ca: None,
                client_certificate: None,
                insecure: false,
                token: TokenSource::None,
                // A kubectl proxy sidecar in a Pod: the Pod's namespace, as kubectl in a
                // Pod would default to it.
                namespace: pod_namespace,
                ca_hint: String::new(),
                proxy_url: None,
                tls_server_name: None,
                impersonate: Vec::new(),
            });
        }
        let mut setup = match &flags.kubeconfig {
            Some(path) => Client::kubeconfig_setup(
                &kubeconfig::load_all(std::slice::from_ref(path), flags.context.as_deref())?,
                flags.insecure_skip_tls_verify,
            )?,
            None => Setup {
                base_url: String::new(),
                ca: None,
                client_certificate: None,
                insecure: flags.insecure_skip_tls_verify,
                token: TokenSource::None,
                namespace: None,
                ca_hint: "--server https://... has no certificate authority: pass --kubeconfig with the cluster's CA, \
                          use --server http://127.0.0.1:8001 with `kubectl proxy`, or (for testing only) \
                          --insecure-skip-tls-verify"
                    .into(),
                proxy_url: None,
                tls_server_name: None,
                impersonate: Vec::new(),
            },
        };
        setup.base_url = server.to_string();
        setup.namespace = pod_namespace;
        Client::build(setup)
    }

    fn from_kubeconfig(paths: &[PathBuf], flags: &ConnectionFlags) -> Result<Client, Error> {
        let config = kubeconfig::load_all(paths, flags.context.as_deref())?;
        Client::build(Client::kubeconfig_setup(
            &config,
            flags.insecure_skip_tls_verify,
        )?)
    }

    fn kubeconfig_setup(
        config: &kubeconfig::Kubeconfig,
        insecure_flag: bool,
    ) -> Result<Setup, Error> {
        let server = config.server.trim_end_matches('/').to_string();
        check_url(
            &server,
            &format!("kubeconfig {} server", config.path.display()),
        )?;
        // A token over plain HTTP would cross the network in the clear, so it is sent only
        // to a loopback address (a local proxy or test server), where it never leaves the host.
        let plain_http = server.starts_with("http://");
        let mut exec_certificate: Option<(Pem, Pem)> = None;
        let token = match &config.credentials {
            _ if plain_http && !is_loopback_url(&server) => {
                if config.credentials != Credentials::None {
                    log::warn!(
                        "kubeconfig {}: server {server} is plain HTTP to another host; wavelet sends no credentials over it",
                        config.path.display()
                    );
                }
                TokenSource::None
            }
            Credentials::None => TokenSource::None,
            Credentials::Token(token) => {
                check_token(token).map_err(|why| {
                    Error::Config(format!("kubeconfig {}: the user's token {why}", config.path.display()))
                })?;
                TokenSource::Static(token.clone())
            }
            Credentials::Exec(exec) => {
                let cluster = serde_json::json!({
                    "server": config.server,
                    "insecure-skip-tls-verify": config.insecure_skip_tls_verify,
                    "certificate-authority-data": config.ca.as_ref().map(|ca| crate::objects::base64::encode(&ca.bytes)),
                    "proxy-url": config.proxy_url,
                    "tls-server-name": config.tls_server_name,
                });
                let plugin = Arc::new(exec::ExecPlugin::new(exec.clone(), Some(cluster))?);
                // Run once now: a missing or failing plugin is an error at start, and a
                // client certificate it prints goes into the TLS setup.
                let first = plugin.credential(std::time::SystemTime::now())?;
                if let Some((cert, key)) = first.client_certificate {
                    exec_certificate = Some((
                        Pem { bytes: cert, origin: format!("exec plugin {}", exec.command) },
                        Pem { bytes: key, origin: format!("exec plugin {}", exec.command) },
                    ));
                }
                TokenSource::Exec(plugin)
            }
            Credentials::TokenFile(path) => TokenSource::file(
                path.clone(),
                "token file",
                format!(
                    "tokenFile of kubeconfig {}; fix the path there, or pass a different --kubeconfig",
                    config.path.display()
                ),
            )?,
        };
        let insecure = insecure_flag || config.insecure_skip_tls_verify;
        Ok(Setup {
            base_url: server,
            ca: if insecure { None } else { config.ca.clone() },
            client_certificate: if plain_http {
                None
            } else {
                config.client_certificate.clone().or(exec_certificate)
            },
            insecure,
            token,
            namespace: config.namespace.clone(),
            ca_hint: format!(
                "kubeconfig {} cluster of context `{}` has no certificate authority: set certificate-authority or \
                 certificate-authority-data there, or (for testing only) pass --insecure-skip-tls-verify",
                config.path.display(),
                config.context
            ),
            proxy_url: config.proxy_url.clone(),
            tls_server_name: if plain_http { None } else { config.tls_server_name.clone() },
            impersonate: config.impersonate.clone(),
        })
    }

    /// In-cluster configuration from the service account files in `dir` (normally
    /// [`SERVICE_ACCOUNT_DIR`]) and the API server address `host`:`port`.
    pub fn in_cluster_from(
        dir: &Path,
        host: &str,
        port: &str,
        insecure: bool,
    ) -> Result<Client, Error> {
        if host.is_empty() || port.is_empty() {
            return Err(Error::Config(
                "KUBERNETES_SERVICE_HOST or KUBERNETES_SERVICE_PORT is empty: not running in a cluster; \
                 pass --server or --kubeconfig"
                    .into(),
            ));
        }
        let host = if host.contains(':') && !host.starts_with('[') {
            format!("[{host}]")
        } else {
            host.to_string()
        };
        let base_url = format!("https://{host}:{port}");
        check_url(&base_url, "KUBERNETES_SERVICE_HOST/KUBERNETES_SERVICE_PORT")?;
        let token = TokenSource::file(
            dir.join("token"),
            "service account token",
            "is automountServiceAccountToken false? use --server with a kubectl proxy sidecar, or --kubeconfig".into(),
        )?;
        let ca_path = dir.join("ca.crt");
        let ca = if insecure {
            None
        } else {
            let bytes = std::fs::read(&ca_path).map_err(|e| {
                Error::Config(format!(
                    "cannot read service account CA {}: {e} (is the service account volume mounted? use --server \
                     with a kubectl proxy sidecar, or --kubeconfig)",
                    ca_path.display()
                ))
            })?;
            Some(Pem {
                bytes,
                origin: ca_path.display().to_string(),
            })
        };
        let namespace = in_cluster_namespace(dir);
        Client::build(Setup {
            base_url,
            ca,
            client_certificate: None,
            insecure,
            token,
            namespace,
            ca_hint: format!("the service account CA {} is missing", ca_path.display()),
            proxy_url: None,
            tls_server_name: None,
            impersonate: Vec::new(),
        })
    }
}

/// With `--server`, the namespace of the Pod wavelet runs in: the service account's
/// namespace file in `dir` (normally [`SERVICE_ACCOUNT_DIR`]), read only when wavelet runs
/// in a Pod, which is when the kubelet's `KUBERNETES_SERVICE_HOST` and
/// `KUBERNETES_SERVICE_PORT` are set in `env` and the service account token is a file in
/// `dir`. That is the test client-go makes (`inClusterClientConfig.Possible()`) before
/// kubectl defaults to that namespace. So the files of a machine that is a Pod (a CI runner)
/// do not decide the namespace of a process started there without the Pod's environment
/// (a test harness clears it), nor do leftover files on a laptop.
fn pod_namespace(env: &dyn Fn(&str) -> Option<OsString>, dir: &Path) -> Option<String> {
    let set = |name: &str| env(name).is_some_and(|v| !v.is_empty());
    let in_a_pod = set("KUBERNETES_SERVICE_HOST")
        && set("KUBERNETES_SERVICE_PORT")
        && dir.join("token").is_file();
    if !in_a_pod {
        log::debug!(
            "not in a Pod (KUBERNETES_SERVICE_HOST/PORT unset or no service account token in {}): --server has no default namespace",
            dir.display()
        );
        return None;
    }
    in_cluster_namespace(dir)
}

/// The namespace of the service account files in `dir` (normally [`SERVICE_ACCOUNT_DIR`]),
/// when they are there: the namespace wavelet runs in.
fn in_cluster_namespace(dir: &Path) -> Option<String> {
    let path = dir.join("namespace");
    match std::fs::read_to_string(&path) {
        Ok(ns) if !ns.trim().is_empty() => Some(ns.trim().to_string()),
        Ok(_) => None,
        Err(e) => {
            log::debug!(
                "no in-cluster namespace: cannot read {}: {e}",
                path.display()
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::test_support::*;

    use crate::testing::TempDir;

    /// A service account directory as a Pod of namespace `in-pod` has it.
    fn in_cluster_files() -> TempDir {
        let dir = TempDir::new("service-account");
        dir.write("token", "t");
        dir.write("ca.crt", CA_CRT);
        dir.write("namespace", "in-pod\n");
        dir
    }

    #[test]
    fn tokens_go_over_plain_http_only_to_loopback_addresses() {
        assert!(is_loopback_url("http://127.0.0.1:8001"));
        assert!(is_loopback_url("http://localhost/api"));
        assert!(is_loopback_url("http://[::1]:80"));
        assert!(!is_loopback_url("http://10.0.0.1:8001"));
        assert!(!is_loopback_url("http://127.0.0.1.example.com"));
    }

    #[test]
    fn server_flag_wins_and_plain_http_has_no_namespace() {
        let dir = TempDir::new("client");
        let kubeconfig = dir.write(
            "config",
            &kubeconfig_text("https://10.0.0.1:6443", "", "    token: t\n"),
        );
        let flags = ConnectionFlags {
            server: Some("http://127.0.0.1:8001/".into()),
            kubeconfig: Some(kubeconfig),
            insecure_skip_tls_verify: false,
            context: None,
        };
        let service_account = TempDir::new("service-account");
        let vars = env(&[
            ("KUBERNETES_SERVICE_HOST", "10.96.0.1"),
            ("KUBERNETES_SERVICE_PORT", "443"),
        ]);
        let client =
            Client::from_flags_with_env(&flags, &vars, &service_account.0).expect("client");
        assert_eq!(client.base_url(), "http://127.0.0.1:8001");
        assert_eq!(client.default_namespace(), None);
        assert!(matches!(client.inner.token, TokenSource::None));
    }

    /// Issue 35: a CI runner in a Pod has the service account files; a process started there
    /// without the Pod's environment (every test harness clears it) must not take them.
    #[test]
    fn server_flag_takes_the_pods_namespace_only_when_running_in_a_pod() {
        let in_pod = in_cluster_files();
        let pod_env = [
            ("KUBERNETES_SERVICE_HOST", "10.96.0.1"),
            ("KUBERNETES_SERVICE_PORT", "443"),
        ];
        let namespace = |server: &str, vars: &[(&str, &str)], dir: &Path| {
            let flags = ConnectionFlags {
                server: Some(server.into()),
                insecure_skip_tls_verify: true,
                ..Default::default()
            };
            let client = Client::from_flags_with_env(&flags, &env(vars), dir).expect("client");
            // A kubectl proxy sidecar holds the credentials: none from the Pod's files.
            assert!(matches!(client.inner.token, TokenSource::None));
            client.default_namespace()
        };
        for server in ["http://127.0.0.1:8001", "https://10.0.0.1:6443"] {
            // A kubectl proxy sidecar in a Pod: the Pod's namespace, as kubectl's.
            assert_eq!(
                namespace(server, &pod_env, &in_pod.0).as_deref(),
                Some("in-pod"),
                "{server}"
            );
            // The same files without the kubelet's variables: not in a Pod.
            assert_eq!(namespace(server, &[], &in_pod.0), None, "{server}");
            assert_eq!(
                namespace(server, &pod_env[..1], &in_pod.0),
                None,
                "{server}"
            );
            assert_eq!(
                namespace(server, &pod_env[1..], &in_pod.0),
                None,
                "{server}"
            );
            let empty = [
                ("KUBERNETES_SERVICE_HOST", ""),
                ("KUBERNETES_SERVICE_PORT", "443"),
            ];
            assert_eq!(namespace(server, &empty, &in_pod.0), None, "{server}");
        }
        // The namespace file without a token (client-go asks for the token file too).
        let no_token = TempDir::new("service-account");
        no_token.write("namespace", "in-pod\n");
        assert_eq!(
            namespace("http://127.0.0.1:8001", &pod_env, &no_token.0),
            None
        );
        // In a Pod without a namespace file, or with a blank one: none either.
        let blank = TempDir::new("service-account");
        blank.write("token", "t");
        assert_eq!(namespace("http://127.0.0.1:8001", &pod_env, &blank.0), None);
        blank.write("namespace", " \n");
        assert_eq!(namespace("http://127.0.0.1:8001", &pod_env, &blank.0), None);
    }

    #[test]
    fn kubeconfig_flag_wins_over_the_environment_and_kubeconfig_env_uses_the_first_path() {
        let dir = TempDir::new("client");
        let insecure = "    insecure-skip-tls-verify: true\n";
        let a = dir.write(
            "a",
            &kubeconfig_text("https://a.example:6443", insecure, "    token: t\n"),
        );
        let b = dir.write(
            "b",
            &kubeconfig_text("https://b.example:6443", insecure, "    token: t\n"),
        );
        let list = format!("{}:{}", b.display(), a.display());
        let vars = env(&[
            ("KUBECONFIG", &list),
            ("KUBERNETES_SERVICE_HOST", "10.96.0.1"),
            ("KUBERNETES_SERVICE_PORT", "443"),
        ]);
        let flags = ConnectionFlags {
            kubeconfig: Some(a.clone()),
            ..Default::default()
        };
        let service_account = in_cluster_files();
        assert_eq!(
            Client::from_flags_with_env(&flags, &vars, &service_account.0)
                .expect("client")
                .base_url(),
            "https://a.example:6443"
        );
        let client =
            Client::from_flags_with_env(&ConnectionFlags::default(), &vars, &service_account.0)
                .expect("client");
        assert_eq!(client.base_url(), "https://b.example:6443");
        assert_eq!(
            client.default_namespace().as_deref(),
            Some("from-kubeconfig")
        );
    }

    #[test]
    fn in_cluster_comes_before_the_home_kubeconfig() {
        let home = TempDir::new("client");
        std::fs::create_dir_all(home.0.join(".kube")).expect("mkdir");
        home.write(
            ".kube/config",
            &kubeconfig_text(
                "https://home.example",
                "    insecure-skip-tls-verify: true\n",
                "    token: t\n",
            ),
        );
        let home_path = home.0.display().to_string();
        let service_account = in_cluster_files();
        let client = Client::from_flags_with_env(
            &ConnectionFlags::default(),
            &env(&[("HOME", &home_path)]),
            &service_account.0,
        )
        .expect("home kubeconfig");
        assert_eq!(client.base_url(), "https://home.example");
        let vars = env(&[
            ("HOME", &home_path),
            ("KUBERNETES_SERVICE_HOST", "10.96.0.1"),
            ("KUBERNETES_SERVICE_PORT", "443"),
        ]);
        let client =
            Client::from_flags_with_env(&ConnectionFlags::default(), &vars, &service_account.0)
                .expect("in-cluster");
        assert_eq!(client.base_url(), "https://10.96.0.1:443");
        assert_eq!(client.default_namespace().as_deref(), Some("in-pod"));
        // Without the token file (automountServiceAccountToken: false), the message says so.
        let unmounted = TempDir::new("service-account");
        let m = config_message(Client::from_flags_with_env(
            &ConnectionFlags::default(),
            &vars,
            &unmounted.0,
        ));
        assert!(
            m.contains(&unmounted.0.display().to_string())
                && m.contains("automountServiceAccountToken"),
            "{m}"
        );
    }

    #[test]
    fn nothing_configured_says_which_flags_to_pass() {
        let home = TempDir::new("client");
        let no_service_account = TempDir::new("service-account");
        let m = config_message(Client::from_flags_with_env(
            &ConnectionFlags::default(),
            &env(&[("HOME", &home.0.display().to_string())]),
            &no_service_account.0,
        ));
        assert!(
            m.contains("--server") && m.contains("--kubeconfig") && m.contains(".kube/config"),
            "{m}"
        );
    }

    #[test]
    fn server_flag_with_https_needs_a_ca_or_the_insecure_flag() {
        let flags = ConnectionFlags {
            server: Some("https://10.0.0.1:6443".into()),
            ..Default::default()
        };
        let m = config_message(Client::for_tests(&flags));
        assert!(
            m.contains("--insecure-skip-tls-verify") && m.contains("--kubeconfig"),
            "{m}"
        );
        let flags = ConnectionFlags {
            insecure_skip_tls_verify: true,
            ..flags
        };
        assert_eq!(
            Client::for_tests(&flags)
                .expect("insecure client")
                .base_url(),
            "https://10.0.0.1:6443"
        );
        let flags = ConnectionFlags {
            server: Some("127.0.0.1:8001".into()),
            ..Default::default()
        };
        assert!(config_message(Client::for_tests(&flags)).contains("http://"));
    }

    #[test]
    fn in_cluster_brackets_ipv6_hosts_and_reads_the_namespace() {
        let dir = TempDir::new("client");
        dir.write("token", "t");
        dir.write("ca.crt", CA_CRT);
        dir.write("namespace", "wavelet-system\n");
        let client = Client::in_cluster_from(&dir.0, "fd00::1", "443", false).expect("client");
        assert_eq!(client.base_url(), "https://[fd00::1]:443");
        assert_eq!(
            client.default_namespace().as_deref(),
            Some("wavelet-system")
        );
    }
}
