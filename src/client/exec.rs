//! Exec credential plugins (`client.authentication.k8s.io/v1` and `v1beta1`), as kubectl
//! runs them for EKS, GKE, AKS and OIDC users: the command with its `args` and `env` and
//! `KUBERNETES_EXEC_INFO`, whose `status` holds a bearer token (or a client certificate
//! and key) and when it expires.
//!
//! The credential's lifetime is one small state machine: `Empty` → run the plugin →
//! `Valid` until `expirationTimestamp` (less a minute) → run it again; a 401 makes it
//! `Empty` at once. Plugins never get a terminal: wavelet is not interactive, so a plugin
//! that requires one (`interactiveMode: Always`) is refused with a clear error. The token
//! is never logged.

use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Deserialize;
use serde_json::{json, Value};

use crate::client::kubeconfig::ExecConfig;
use crate::error::Error;

/// A credential is run again this long before it expires.
const EXPIRY_MARGIN: Duration = Duration::from_secs(60);

/// What a plugin printed.
#[derive(Clone, PartialEq, Eq)]
pub struct Credential {
    pub token: Option<String>,
    /// PEM client certificate and key.
    pub client_certificate: Option<(Vec<u8>, Vec<u8>)>,
    /// `None`: valid until a 401 says otherwise.
    pub expires: Option<SystemTime>,
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the token or the key.
        write!(
            f,
            "Credential(token: {}, client certificate: {}, expires: {:?})",
            self.token.is_some(),
            self.client_certificate.is_some(),
            self.expires
        )
    }
}

/// The lifetime of the current credential.
#[derive(Debug)]
enum State {
    /// Run the plugin before the next request.
    Empty,
    Valid(Credential),
}

/// One user's plugin and its current credential.
pub struct ExecPlugin {
    config: ExecConfig,
    /// The cluster as `KUBERNETES_EXEC_INFO` gives it (`provideClusterInfo: true`).
    cluster: Option<Value>,
    state: Mutex<State>,
}

impl ExecPlugin {
    pub fn new(config: ExecConfig, cluster: Option<Value>) -> Result<ExecPlugin, Error> {
        if config.interactive_mode == "Always" {
            return Err(Error::Config(format!(
                "the exec credential plugin `{}` needs an interactive terminal (interactiveMode: Always), and wavelet runs plugins without one; log in with it first, or use `kubectl proxy` and --server http://127.0.0.1:8001",
                config.command
            )));
        }
        Ok(ExecPlugin {
            config,
            cluster,
            state: Mutex::new(State::Empty),
        })
    }

    /// The credential to use at `now`: the current one, or a new one from the plugin.
    pub fn credential(&self, now: SystemTime) -> Result<Credential, Error> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if let State::Valid(credential) = &*state {
            let fresh = credential.expires.is_none_or(|at| now + EXPIRY_MARGIN < at);
            if fresh {
                return Ok(credential.clone());
            }
            log::debug!(
                "exec plugin {}: credential expires; running it again",
                self.config.command
            );
        }
        let credential = self.run()?;
        *state = State::Valid(credential.clone());
        Ok(credential)
    }

    /// The server refused the credential (401): the next request runs the plugin again.
    pub fn invalidate(&self) {
        *self.state.lock().unwrap_or_else(|e| e.into_inner()) = State::Empty;
    }

    /// `KUBERNETES_EXEC_INFO`.
    fn exec_info(&self) -> Value {
        let mut spec = json!({"interactive": false});
        if self.config.provide_cluster_info {
            if let Some(cluster) = &self.cluster {
                spec["cluster"] = cluster.clone();
            }
        }
        json!({"apiVersion": self.config.api_version, "kind": "ExecCredential", "spec": spec})
    }

    fn run(&self) -> Result<Credential, Error> {
        let config = &self.config;
        let hint = config
            .install_hint
            .as_deref()
            .map(|h| format!("\n{}", h.trim_end()))
            .unwrap_or_default();
        let output = Command::new(&config.command)
            .args(&config.args)
            .envs(config.env.iter().map(|(k, v)| (k, v)))
            .env("KUBERNETES_EXEC_INFO", self.exec_info().to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()
            .map_err(|e| {
                Error::Config(format!(
                    "cannot run the exec credential plugin `{}`: {e}{hint}",
                    config.command
                ))
            })?;
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            return Err(Error::Config(format!(
                "the exec credential plugin `{}` failed ({}): {}{hint}",
                config.command,
                output.status,
                stderr.trim()
            )));
        }
        parse_output(&output.stdout).map_err(|why| {
            Error::Config(format!(
                "the exec credential plugin `{}` printed no usable ExecCredential: {why}",
                config.command
            ))
        })
    }
}

#[derive(Deserialize)]
struct ExecCredential {
    #[serde(default)]
    kind: String,
    #[serde(default)]
    status: Option<ExecStatus>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ExecStatus {
    #[serde(default)]
    token: Option<String>,
    #[serde(default)]
    client_certificate_data: Option<String>,
    #[serde(default)]
    client_key_data: Option<String>,
    #[serde(default)]
    expiration_timestamp: Option<String>,
}

/// Reads a plugin's stdout: an `ExecCredential` whose `status` has a token or a client
/// certificate and key.
pub fn parse_output(stdout: &[u8]) -> Result<Credential, String> {
    let parsed: ExecCredential =
        serde_json::from_slice(stdout).map_err(|e| format!("its output is not JSON ({e})"))?;
    if parsed.kind != "ExecCredential" {
        return Err(format!(
            "kind is `{}`, expected ExecCredential",
            parsed.kind
        ));
    }
    let status = parsed.status.ok_or("it has no status")?;
    let token = status.token.filter(|t| !t.is_empty());
    let client_certificate = match (status.client_certificate_data, status.client_key_data) {
        (Some(cert), Some(key)) => Some((cert.into_bytes(), key.into_bytes())),
        (None, None) => None,
        _ => {
            return Err(
                "it has a client certificate without a key, or a key without a certificate".into(),
            )
        }
    };
    if token.is_none() && client_certificate.is_none() {
        return Err("its status has neither a token nor a client certificate".into());
    }
    let expires = match status.expiration_timestamp.filter(|t| !t.is_empty()) {
        None => None,
        Some(text) => {
            let secs = crate::time::parse_rfc3339(&text)
                .ok_or_else(|| format!("expirationTimestamp `{text}` is not RFC 3339"))?;
            Some(UNIX_EPOCH + Duration::from_secs(secs))
        }
    };
    Ok(Credential {
        token,
        client_certificate,
        expires,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_with_an_expiry_is_read() {
        let c = parse_output(br#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"t0k","expirationTimestamp":"2026-11-24T05:00:00Z"}}"#).unwrap();
        assert_eq!(c.token.as_deref(), Some("t0k"));
        assert_eq!(
            c.expires,
            Some(UNIX_EPOCH + Duration::from_secs(1_795_496_400))
        );
        assert!(!format!("{c:?}").contains("t0k"), "the token in Debug");
    }

    #[test]
    fn a_client_certificate_needs_its_key_and_something_must_be_there() {
        assert!(parse_output(
            br#"{"kind":"ExecCredential","status":{"clientCertificateData":"c"}}"#
        )
        .is_err());
        assert!(parse_output(br#"{"kind":"ExecCredential","status":{}}"#).is_err());
        assert!(parse_output(br#"{"kind":"Other","status":{"token":"t"}}"#).is_err());
        let c = parse_output(br#"{"kind":"ExecCredential","status":{"clientCertificateData":"c","clientKeyData":"k"}}"#).unwrap();
        assert_eq!(c.client_certificate, Some((b"c".to_vec(), b"k".to_vec())));
        assert_eq!(c.expires, None);
    }

    fn plugin(script: &str, mode: &str) -> Result<ExecPlugin, Error> {
        ExecPlugin::new(
            ExecConfig {
                api_version: "client.authentication.k8s.io/v1".into(),
                command: "sh".into(),
                args: vec!["-c".into(), script.into()],
                env: vec![("GREETING".into(), "hi".into())],
                install_hint: Some("install it with: apt-get install the-plugin".into()),
                provide_cluster_info: true,
                interactive_mode: mode.into(),
            },
            Some(json!({"server": "https://example"})),
        )
    }

    #[test]
    fn the_plugin_gets_its_env_and_the_exec_info_and_its_credential_is_kept_until_it_expires() {
        let p = plugin(
            r#"test "$GREETING" = hi || exit 3; case "$KUBERNETES_EXEC_INFO" in *'"server":"https://example"'*) ;; *) exit 4;; esac; echo "{\"kind\":\"ExecCredential\",\"status\":{\"token\":\"n$$\",\"expirationTimestamp\":\"2030-01-01T00:00:00Z\"}}""#,
            "Never",
        )
        .unwrap();
        let now = SystemTime::now();
        let first = p.credential(now).unwrap();
        assert_eq!(p.credential(now).unwrap(), first, "run again before expiry");
        let later = UNIX_EPOCH + Duration::from_secs(1_893_456_000); // 2030-01-01
        assert_ne!(
            p.credential(later).unwrap(),
            first,
            "not run again at expiry"
        );
        let after = p.credential(later).unwrap();
        p.invalidate();
        assert_ne!(
            p.credential(later).unwrap(),
            after,
            "not run again after a 401"
        );
    }

    #[test]
    fn a_failing_plugin_says_why_with_its_install_hint() {
        let p = plugin("echo token expired, run login >&2; exit 1", "IfAvailable").unwrap();
        let Err(Error::Config(message)) = p.credential(SystemTime::now()) else {
            panic!("expected an error")
        };
        assert!(message.contains("token expired, run login"), "{message}");
        assert!(message.contains("apt-get install the-plugin"), "{message}");
    }

    #[test]
    fn a_plugin_that_needs_a_terminal_is_refused() {
        let Err(Error::Config(message)) = plugin("true", "Always") else {
            panic!("expected an error")
        };
        assert!(message.contains("interactiveMode: Always"), "{message}");
    }
}
