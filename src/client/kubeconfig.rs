//! Reads kubeconfig files (YAML or JSON, one or a `KUBECONFIG` list merged as kubectl
//! merges them) and resolves the current context (or `--context`) into the server, TLS
//! material, credentials, impersonation and namespace that the client connects with.
//!
//! Read: bearer tokens (inline or `tokenFile`), client certificates, CA file or data,
//! exec credential plugins (run by `client::exec`), `proxy-url`, `as`/`as-groups`/`as-uid`;
//! `disable-compression` and every field wavelet does not use are ignored. Refused with an
//! error that says what to do instead: auth-provider plugins, basic auth. Relative file
//! paths resolve against the directory of the file that names them, as kubectl does.

use crate::client::yaml;
use crate::error::Error;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// PEM bytes and where they came from (a file path or a kubeconfig field), for error messages.
#[derive(Clone, PartialEq, Eq)]
pub struct Pem {
    pub bytes: Vec<u8>,
    pub origin: String,
}

impl std::fmt::Debug for Pem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print key material.
        write!(f, "Pem({}, {} bytes)", self.origin, self.bytes.len())
    }
}

/// How requests authenticate, besides a client certificate.
#[derive(Clone, PartialEq, Eq)]
pub enum Credentials {
    None,
    /// A static bearer token from the kubeconfig.
    Token(String),
    /// A bearer token re-read from this file (absolute path) as it rotates.
    TokenFile(PathBuf),
    /// An exec credential plugin (`client.authentication.k8s.io/v1` or `v1beta1`).
    Exec(ExecConfig),
}

/// A user's `exec` section.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct ExecConfig {
    pub api_version: String,
    /// The program; a relative path with a `/` resolves against the kubeconfig's directory.
    pub command: String,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub install_hint: Option<String>,
    pub provide_cluster_info: bool,
    /// `Never`, `IfAvailable` or `Always`.
    pub interactive_mode: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Credentials::None => write!(f, "None"),
            Credentials::Token(_) => write!(f, "Token(<redacted>)"),
            Credentials::TokenFile(path) => write!(f, "TokenFile({})", path.display()),
            Credentials::Exec(exec) => write!(f, "Exec({})", exec.command),
        }
    }
}

/// The current context of a kubeconfig, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kubeconfig {
    /// The file this came from.
    pub path: PathBuf,
    /// Name of the current context.
    pub context: String,
    /// `cluster.server`, e.g. `https://127.0.0.1:6443`.
    pub server: String,
    /// From `certificate-authority-data` or the `certificate-authority` file.
    pub ca: Option<Pem>,
    pub insecure_skip_tls_verify: bool,
    pub credentials: Credentials,
    /// Client certificate chain and key; both or neither.
    pub client_certificate: Option<(Pem, Pem)>,
    /// `context.namespace`, when set.
    pub namespace: Option<String>,
    /// `cluster.proxy-url` (http or https).
    pub proxy_url: Option<String>,
    /// `cluster.tls-server-name`: the name the server's certificate is verified against
    /// (and sent as SNI) instead of the host of `server`.
    pub tls_server_name: Option<String>,
    /// `as`, `as-groups`, `as-uid`: sent as `Impersonate-*` headers.
    pub impersonate: Vec<(&'static str, String)>,
}

/// Reads and merges the kubeconfig files at `paths` (a `KUBECONFIG` list: missing files
/// are skipped as kubectl skips them) and resolves `context`, or the current context.
pub fn load_all(paths: &[PathBuf], context: Option<&str>) -> Result<Kubeconfig, Error> {
    let mut docs = Vec::new();
    for path in paths {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && paths.len() > 1 => continue,
            Err(e) => {
                return Err(Error::Config(format!(
                    "cannot read kubeconfig {}: {e} (pass --kubeconfig PATH, or --server URL for a kubectl proxy)",
                    path.display()
                )))
            }
        };
        let doc = yaml::parse(&text).map_err(|e| {
            Error::Config(format!(
                "kubeconfig {}: {e} (wavelet reads YAML and JSON kubeconfigs)",
                path.display()
            ))
        })?;
        let dir = path.parent().unwrap_or(Path::new("."));
        docs.push((path.clone(), absolute_paths(doc, dir)));
    }
    let Some((first, _)) = docs.first() else {
        return Err(Error::Config(format!(
            "none of the kubeconfig files in KUBECONFIG exists ({}); pass --kubeconfig PATH",
            paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    };
    let first = first.clone();
    let merged = merge(docs.into_iter().map(|(_, doc)| doc).collect());
    Resolver {
        path: &first,
        dir: Path::new("/"),
        context,
    }
    .resolve(&merged)
}

/// kubectl's merge of a `KUBECONFIG` list: for clusters, users and contexts the first file
/// to define a name wins; `current-context` comes from the first file that sets it.
fn merge(docs: Vec<Value>) -> Value {
    let mut root = Map::new();
    for doc in docs {
        let Value::Object(map) = doc else { continue };
        for (key, value) in map {
            match key.as_str() {
                "clusters" | "users" | "contexts" => {
                    let list = root.entry(key).or_insert_with(|| Value::Array(Vec::new()));
                    let (Value::Array(have), Value::Array(more)) = (list, value) else {
                        continue;
                    };
                    for entry in more {
                        let name = entry.get("name").cloned();
                        if !have.iter().any(|e| e.get("name") == name.as_ref()) {
                            have.push(entry);
                        }
                    }
                }
                "current-context" => {
                    let set = root
                        .get(&key)
                        .and_then(Value::as_str)
                        .is_some_and(|c| !c.is_empty());
                    if !set {
                        root.insert(key, value);
                    }
                }
                _ => {
                    root.entry(key).or_insert(value);
                }
            }
        }
    }
    Value::Object(root)
}

/// Rewrites the file paths of one kubeconfig's clusters and users to absolute paths,
/// against `dir` (the directory of that file), before files are merged.
fn absolute_paths(mut doc: Value, dir: &Path) -> Value {
    let absolute = |value: &mut Value| {
        if let Some(text) = value.as_str().filter(|t| !t.is_empty()) {
            *value = Value::String(dir.join(text).display().to_string());
        }
    };
    for (list, inner, keys) in [
        ("clusters", "cluster", &["certificate-authority"][..]),
        (
            "users",
            "user",
            &["client-certificate", "client-key", "tokenFile"][..],
        ),
    ] {
        let Some(entries) = doc.get_mut(list).and_then(Value::as_array_mut) else {
            continue;
        };
        for entry in entries {
            let Some(body) = entry.get_mut(inner).and_then(Value::as_object_mut) else {
                continue;
            };
            for key in keys {
                if let Some(value) = body.get_mut(*key) {
                    absolute(value);
                }
            }
            // An exec command with a path separator is relative to the file (kubectl).
            if let Some(command) = body
                .get_mut("exec")
                .and_then(|e| e.get_mut("command"))
                .filter(|c| c.as_str().is_some_and(|c| c.contains('/')))
            {
                absolute(command);
            }
        }
    }
    doc
}

/// Reads and resolves the kubeconfig at `path`.
pub fn load(path: &Path) -> Result<Kubeconfig, Error> {
    load_all(&[path.to_path_buf()], None)
}

/// Resolves kubeconfig `text` that was read from `path` (used for messages and relative paths).
pub fn parse(text: &str, path: &Path) -> Result<Kubeconfig, Error> {
    let doc = yaml::parse(text).map_err(|e| {
        Error::Config(format!(
            "kubeconfig {}: {e} (wavelet reads the YAML that `kubectl config view --raw` writes)",
            path.display()
        ))
    })?;
    Resolver {
        path,
        dir: path.parent().unwrap_or(Path::new(".")),
        context: None,
    }
    .resolve(&doc)
}

struct Resolver<'a> {
    path: &'a Path,
    dir: &'a Path,
    /// `--context`: resolve this context instead of the current one.
    context: Option<&'a str>,
}

impl Resolver<'_> {
    fn error(&self, message: impl std::fmt::Display) -> Error {
        Error::Config(format!("kubeconfig {}: {message}", self.path.display()))
    }

    fn resolve(&self, doc: &Value) -> Result<Kubeconfig, Error> {
        let root = match doc {
            Value::Object(map) => map,
            Value::Null => {
                return Err(self.error("the file is empty (pass --kubeconfig with a valid file)"))
            }
            _ => return Err(self.error("the top level must be a mapping")),
        };
        if let Some(kind) = self.string(root, "kind", "kind")? {
            if kind != "Config" {
                return Err(self.error(format!("kind is `{kind}`, expected `Config`")));
            }
        }
        let current = match self.context {
            Some(name) => Some(name.to_string()),
            None => self.string(root, "current-context", "current-context")?,
        };
        let context_name = match current {
            Some(name) if !name.is_empty() => name,
            _ => {
                return Err(self.error(
                    "no current-context is set; run `kubectl config use-context NAME` or pass a different --kubeconfig",
                ))
            }
        };
        let context = self.named(root, "contexts", "context", &context_name)?;
        let context_field = format!("contexts[{context_name}].context");

        let cluster_name = self
            .string(context, "cluster", &format!("{context_field}.cluster"))?
            .filter(|name| !name.is_empty())
            .ok_or_else(|| self.error(format!("context `{context_name}` names no cluster")))?;
        let user_name = self
            .string(context, "user", &format!("{context_field}.user"))?
            .unwrap_or_default();
        let namespace = self
            .string(context, "namespace", &format!("{context_field}.namespace"))?
            .filter(|ns| !ns.is_empty());

        let cluster = self.named(root, "clusters", "cluster", &cluster_name)?;
        let cluster_field = format!("clusters[{cluster_name}].cluster");
        let server = self
            .string(cluster, "server", &format!("{cluster_field}.server"))?
            .filter(|s| !s.is_empty())
            .ok_or_else(|| self.error(format!("cluster `{cluster_name}` has no server")))?;
        if !(server.starts_with("https://") || server.starts_with("http://")) {
            return Err(self.error(format!(
                "cluster `{cluster_name}` server `{server}` must start with https:// or http://"
            )));
        }
        let insecure = match cluster.get("insecure-skip-tls-verify") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => {
                return Err(self.error(format!(
                    "{cluster_field}.insecure-skip-tls-verify must be true or false"
                )))
            }
        };
        let proxy_url = self
            .string(cluster, "proxy-url", &format!("{cluster_field}.proxy-url"))?
            .filter(|p| !p.is_empty());
        if let Some(proxy) = &proxy_url {
            if !(proxy.starts_with("http://") || proxy.starts_with("https://")) {
                return Err(self.error(format!(
                    "cluster `{cluster_name}` proxy-url `{proxy}`: only http:// and https:// (CONNECT) proxies are supported, not SOCKS; \
                     run `kubectl proxy` and use --server http://127.0.0.1:8001"
                )));
            }
        }
        let tls_server_name = self
            .string(
                cluster,
                "tls-server-name",
                &format!("{cluster_field}.tls-server-name"),
            )?
            .filter(|n| !n.is_empty());
        if let Some(name) = &tls_server_name {
            if rustls::pki_types::ServerName::try_from(name.as_str()).is_err() {
                return Err(self.error(format!(
                    "{cluster_field}.tls-server-name `{name}` is not a DNS name or an IP address"
                )));
            }
            if proxy_url.is_some() {
                return Err(self.error(format!(
                    "cluster `{cluster_name}` sets both tls-server-name and proxy-url, which wavelet \
                     does not support together; run `kubectl proxy` and use --server http://127.0.0.1:8001"
                )));
            }
        }
        let ca = self.pem(
            cluster,
            "certificate-authority",
            "certificate-authority-data",
            &cluster_field,
        )?;
        if insecure && ca.is_some() {
            return Err(self.error(format!(
                "cluster `{cluster_name}` sets both insecure-skip-tls-verify and a certificate authority; remove one"
            )));
        }

        let (credentials, client_certificate, impersonate) = if user_name.is_empty() {
            (Credentials::None, None, Vec::new())
        } else {
            let user = self.named(root, "users", "user", &user_name)?;
            self.user(user, &user_name)?
        };

        Ok(Kubeconfig {
            path: self.path.to_path_buf(),
            context: context_name,
            server,
            ca,
            insecure_skip_tls_verify: insecure,
            credentials,
            client_certificate,
            namespace,
            proxy_url,
            tls_server_name,
            impersonate,
        })
    }

    #[allow(clippy::type_complexity)]
    fn user(
        &self,
        user: &Map<String, Value>,
        name: &str,
    ) -> Result<(Credentials, Option<(Pem, Pem)>, Vec<(&'static str, String)>), Error> {
        let field = format!("users[{name}].user");
        let present = |key: &str| user.get(key).is_some_and(|v| !v.is_null());
        if present("auth-provider") {
            return Err(self.error(format!(
                "user `{name}` uses an auth-provider plugin, which is out of scope; \
                 run `kubectl proxy` and use --server http://127.0.0.1:8001"
            )));
        }
        if present("username") || present("password") {
            return Err(self.error(format!(
                "user `{name}`: basic auth is not supported; use a bearer token, a client certificate, \
                 or run `kubectl proxy` and use --server http://127.0.0.1:8001"
            )));
        }
        if present("as-user-extra") {
            return Err(self.error(format!(
                "user `{name}` sets as-user-extra, which wavelet does not send; remove it or use as/as-groups/as-uid"
            )));
        }
        let mut impersonate = Vec::new();
        if let Some(who) = self
            .string(user, "as", &format!("{field}.as"))?
            .filter(|s| !s.is_empty())
        {
            impersonate.push(("Impersonate-User", who));
        }
        if let Some(uid) = self
            .string(user, "as-uid", &format!("{field}.as-uid"))?
            .filter(|s| !s.is_empty())
        {
            impersonate.push(("Impersonate-Uid", uid));
        }
        for group in user
            .get("as-groups")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            impersonate.push(("Impersonate-Group", group.to_string()));
        }
        let token = self
            .string(user, "token", &format!("{field}.token"))?
            .filter(|t| !t.is_empty());
        let token_file = self
            .string(user, "tokenFile", &format!("{field}.tokenFile"))?
            .filter(|t| !t.is_empty());
        let exec = match user.get("exec") {
            None | Some(Value::Null) => None,
            Some(Value::Object(exec)) => Some(self.exec(exec, name)?),
            Some(_) => return Err(self.error(format!("{field}.exec must be a mapping"))),
        };
        let credentials = match (token_file, token, exec) {
            // Like client-go, a token file wins: it is re-read as it rotates.
            (Some(file), _, _) => Credentials::TokenFile(self.dir.join(file)),
            (None, Some(token), _) => Credentials::Token(token),
            (None, None, Some(exec)) => Credentials::Exec(exec),
            (None, None, None) => Credentials::None,
        };
        let cert = self.pem(
            user,
            "client-certificate",
            "client-certificate-data",
            &field,
        )?;
        let key = self.pem(user, "client-key", "client-key-data", &field)?;
        let client_certificate = match (cert, key) {
            (Some(cert), Some(key)) => Some((cert, key)),
            (None, None) => None,
            (Some(_), None) => {
                return Err(self.error(format!(
                    "user `{name}` has a client certificate but no client-key or client-key-data"
                )))
            }
            (None, Some(_)) => {
                return Err(self.error(format!(
                    "user `{name}` has a client key but no client-certificate or client-certificate-data"
                )))
            }
        };
        Ok((credentials, client_certificate, impersonate))
    }

    /// A user's `exec` section.
    fn exec(&self, exec: &Map<String, Value>, name: &str) -> Result<ExecConfig, Error> {
        let field = format!("users[{name}].user.exec");
        let api_version = self
            .string(exec, "apiVersion", &format!("{field}.apiVersion"))?
            .unwrap_or_default();
        if !matches!(
            api_version.as_str(),
            "client.authentication.k8s.io/v1" | "client.authentication.k8s.io/v1beta1"
        ) {
            return Err(self.error(format!(
                "{field}.apiVersion `{api_version}` is not supported: use client.authentication.k8s.io/v1 or v1beta1"
            )));
        }
        let command = self
            .string(exec, "command", &format!("{field}.command"))?
            .filter(|c| !c.is_empty())
            .ok_or_else(|| self.error(format!("{field} has no command")))?;
        let command = if command.contains('/') {
            self.dir.join(&command).display().to_string()
        } else {
            command
        };
        let args = exec
            .get("args")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|a| a.as_str().map(String::from))
            .collect();
        let env = exec
            .get("env")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|e| {
                Some((
                    e.get("name")?.as_str()?.to_string(),
                    e.get("value")?.as_str()?.to_string(),
                ))
            })
            .collect();
        let interactive_mode = self
            .string(exec, "interactiveMode", &format!("{field}.interactiveMode"))?
            .unwrap_or_else(|| "IfAvailable".into());
        Ok(ExecConfig {
            api_version,
            command,
            args,
            env,
            install_hint: self.string(exec, "installHint", &format!("{field}.installHint"))?,
            provide_cluster_info: exec
                .get("provideClusterInfo")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            interactive_mode,
        })
    }

    /// PEM bytes from `<file_key>` (a path) or `<data_key>` (base64), never both.
    fn pem(
        &self,
        map: &Map<String, Value>,
        file_key: &str,
        data_key: &str,
        field: &str,
    ) -> Result<Option<Pem>, Error> {
        let file = self
            .string(map, file_key, &format!("{field}.{file_key}"))?
            .filter(|s| !s.is_empty());
        let data = self
            .string(map, data_key, &format!("{field}.{data_key}"))?
            .filter(|s| !s.is_empty());
        match (file, data) {
            (Some(_), Some(_)) => Err(self.error(format!(
                "{field} sets both {file_key} and {data_key}; remove one"
            ))),
            (None, Some(data)) => {
                let bytes = crate::objects::base64::decode(data.as_bytes()).map_err(|e| {
                    self.error(format!("{field}.{data_key} is not valid base64 ({e})"))
                })?;
                Ok(Some(Pem {
                    bytes,
                    origin: format!("kubeconfig {} {field}.{data_key}", self.path.display()),
                }))
            }
            (Some(file), None) => {
                let path = self.dir.join(&file);
                let bytes = std::fs::read(&path).map_err(|e| {
                    self.error(format!(
                        "cannot read {field}.{file_key} file {}: {e}",
                        path.display()
                    ))
                })?;
                Ok(Some(Pem {
                    bytes,
                    origin: format!("{} ({field}.{file_key})", path.display()),
                }))
            }
            (None, None) => Ok(None),
        }
    }

    /// The `inner_key` mapping of the entry named `name` in the `list_key` sequence.
    fn named<'v>(
        &self,
        root: &'v Map<String, Value>,
        list_key: &str,
        inner_key: &str,
        name: &str,
    ) -> Result<&'v Map<String, Value>, Error> {
        let empty: &[Value] = &[];
        let entries = match root.get(list_key) {
            None | Some(Value::Null) => empty,
            Some(Value::Array(items)) => items.as_slice(),
            Some(_) => return Err(self.error(format!("{list_key} must be a list"))),
        };
        let mut found = None;
        for entry in entries {
            let Value::Object(entry) = entry else {
                return Err(self.error(format!(
                    "every entry of {list_key} must be a mapping with name and {inner_key}"
                )));
            };
            if entry.get("name").and_then(Value::as_str) != Some(name) {
                continue;
            }
            if found.is_some() {
                return Err(self.error(format!(
                    "{list_key} has two entries named `{name}`; remove one"
                )));
            }
            found = Some(match entry.get(inner_key) {
                Some(Value::Object(inner)) => inner,
                None | Some(Value::Null) => {
                    return Err(self.error(format!("{list_key}[{name}] has no {inner_key}")))
                }
                Some(_) => {
                    return Err(
                        self.error(format!("{list_key}[{name}].{inner_key} must be a mapping"))
                    )
                }
            });
        }
        found.ok_or_else(|| {
            self.error(format!(
                "{inner_key} `{name}` is not in {list_key}; check `kubectl config view` or pass a different --kubeconfig"
            ))
        })
    }

    /// A string field; integers are accepted as their decimal text (`namespace: 123`).
    fn string(
        &self,
        map: &Map<String, Value>,
        key: &str,
        field: &str,
    ) -> Result<Option<String>, Error> {
        match map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(Value::Number(n)) if n.is_i64() || n.is_u64() => Ok(Some(n.to_string())),
            Some(_) => Err(self.error(format!("{field} must be a string"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::TempDir;

    fn config(cluster: &str, user: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: dev\ncontexts:\n- name: dev\n  context:\n    cluster: c\n    user: u\n    namespace: team-a\nclusters:\n- name: c\n  cluster:\n{cluster}users:\n- name: u\n  user:\n{user}"
        )
    }

    fn message(result: Result<Kubeconfig, Error>) -> String {
        match result {
            Err(Error::Config(message)) => message,
            Err(other) => panic!("expected a config error, got {other}"),
            Ok(k) => panic!("expected an error, got {k:?}"),
        }
    }

    #[test]
    fn resolves_the_current_context_with_data_fields_and_a_static_token() {
        let text = config(
            "    server: https://10.0.0.1:6443\n    certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t\n",
            "    token: abc.def\n",
        );
        let k = parse(&text, Path::new("/etc/kube/config")).expect("valid kubeconfig");
        assert_eq!(k.context, "dev");
        assert_eq!(k.server, "https://10.0.0.1:6443");
        assert_eq!(k.namespace.as_deref(), Some("team-a"));
        assert_eq!(k.credentials, Credentials::Token("abc.def".into()));
        let ca = k.ca.expect("ca");
        assert_eq!(ca.bytes, b"-----BEGIN CERTIFICATE-----");
        assert!(
            ca.origin
                .contains("clusters[c].cluster.certificate-authority-data"),
            "{}",
            ca.origin
        );
        assert!(!k.insecure_skip_tls_verify);
        assert!(k.client_certificate.is_none());
    }

    #[test]
    fn relative_file_paths_resolve_against_the_kubeconfig_directory() {
        let dir = TempDir::new("kubeconfig");
        std::fs::create_dir_all(dir.0.join("pki")).expect("mkdir");
        std::fs::write(dir.0.join("pki/ca.crt"), "CA").expect("write");
        std::fs::write(dir.0.join("client.crt"), "CERT").expect("write");
        std::fs::write(dir.0.join("client.key"), "KEY").expect("write");
        let text = config(
            "    server: https://k8s.example:443\n    certificate-authority: pki/ca.crt\n",
            "    client-certificate: client.crt\n    client-key: client.key\n    tokenFile: sa/token\n",
        );
        let path = dir.0.join("config");
        std::fs::write(&path, &text).expect("write");
        let k = load(&path).expect("valid kubeconfig");
        assert_eq!(k.ca.as_ref().map(|p| p.bytes.as_slice()), Some(&b"CA"[..]));
        let (cert, key) = k.client_certificate.expect("client certificate");
        assert_eq!(
            (cert.bytes.as_slice(), key.bytes.as_slice()),
            (&b"CERT"[..], &b"KEY"[..])
        );
        assert!(cert.origin.contains("client.crt"));
        // The token file is not read here (the client reads it, and re-reads it as it rotates).
        assert_eq!(
            k.credentials,
            Credentials::TokenFile(dir.0.join("sa/token"))
        );
    }

    #[test]
    fn a_missing_referenced_file_names_the_file_and_the_field() {
        let text = config(
            "    server: https://x\n    certificate-authority: missing-ca.crt\n",
            "    token: t\n",
        );
        let m = message(parse(&text, Path::new("/nonexistent/dir/config")));
        assert!(m.contains("/nonexistent/dir/missing-ca.crt"), "{m}");
        assert!(m.contains("certificate-authority"), "{m}");
    }

    #[test]
    fn an_exec_plugin_is_read_with_its_args_env_and_hint_and_a_relative_command_resolves() {
        let text = config(
            "    server: https://x\n",
            "    exec:\n      apiVersion: client.authentication.k8s.io/v1beta1\n      command: ./bin/get-token\n      args: [eks, get-token]\n      env:\n      - name: AWS_PROFILE\n        value: prod\n      installHint: |\n        install the plugin\n      provideClusterInfo: true\n",
        );
        let k = parse(&text, Path::new("/k/config")).unwrap();
        let Credentials::Exec(exec) = k.credentials else {
            panic!("{:?}", k.credentials)
        };
        assert_eq!(exec.command, "/k/./bin/get-token");
        assert_eq!(exec.args, ["eks", "get-token"]);
        assert_eq!(exec.env, [("AWS_PROFILE".to_string(), "prod".to_string())]);
        assert_eq!(exec.install_hint.as_deref(), Some("install the plugin\n"));
        assert!(exec.provide_cluster_info);
        assert_eq!(exec.interactive_mode, "IfAvailable");
        let old = config(
            "    server: https://x\n",
            "    exec:\n      apiVersion: client.authentication.k8s.io/v1alpha1\n      command: aws\n",
        );
        assert!(message(parse(&old, Path::new("/k/config"))).contains("v1alpha1"));
    }

    #[test]
    fn impersonation_becomes_headers_and_proxy_url_must_be_http_or_https() {
        let text = config(
            "    server: https://x\n    proxy-url: http://proxy:3128\n",
            "    token: t\n    as: jane\n    as-groups: [ops, dev]\n    as-uid: \"42\"\n",
        );
        let k = parse(&text, Path::new("/k/config")).unwrap();
        assert_eq!(k.proxy_url.as_deref(), Some("http://proxy:3128"));
        assert_eq!(
            k.impersonate,
            [
                ("Impersonate-User", "jane".to_string()),
                ("Impersonate-Uid", "42".to_string()),
                ("Impersonate-Group", "ops".to_string()),
                ("Impersonate-Group", "dev".to_string())
            ]
        );
        let socks = config(
            "    server: https://x\n    proxy-url: socks5://p:1080\n",
            "    token: t\n",
        );
        assert!(message(parse(&socks, Path::new("/k/config"))).contains("not SOCKS"));
    }

    #[test]
    fn tls_server_name_is_read_checked_and_not_combined_with_a_proxy() {
        let text = config(
            "    server: https://10.0.0.5:6443\n    tls-server-name: kubernetes.default\n",
            "    token: t\n",
        );
        let k = parse(&text, Path::new("/k/config")).unwrap();
        assert_eq!(k.tls_server_name.as_deref(), Some("kubernetes.default"));
        let bad = config(
            "    server: https://x\n    tls-server-name: \"not a name\"\n",
            "    token: t\n",
        );
        assert!(message(parse(&bad, Path::new("/k/config"))).contains("not a DNS name"));
        let proxied = config(
            "    server: https://x\n    tls-server-name: api\n    proxy-url: http://p:3128\n",
            "    token: t\n",
        );
        assert!(message(parse(&proxied, Path::new("/k/config"))).contains("kubectl proxy"));
    }

    #[test]
    fn auth_providers_and_basic_auth_are_refused() {
        let text = config(
            "    server: https://x\n",
            "    auth-provider:\n      name: gcp\n",
        );
        assert!(message(parse(&text, Path::new("/k/config"))).contains("auth-provider"));
        let text = config(
            "    server: https://x\n",
            "    username: admin\n    password: secret\n",
        );
        let m = message(parse(&text, Path::new("/k/config")));
        assert!(m.contains("basic auth is not supported"), "{m}");
        assert!(!m.contains("secret"), "{m}");
    }

    #[test]
    fn file_and_data_for_the_same_field_is_an_error() {
        let text = config(
            "    server: https://x\n    certificate-authority: ca.crt\n    certificate-authority-data: Q0E=\n",
            "    token: t\n",
        );
        assert!(message(parse(&text, Path::new("/k/config")))
            .contains("sets both certificate-authority"));
    }

    #[test]
    fn invalid_base64_data_names_the_field() {
        let text = config(
            "    server: https://x\n    certificate-authority-data: not*base64\n",
            "    token: t\n",
        );
        let m = message(parse(&text, Path::new("/k/config")));
        assert!(
            m.contains("certificate-authority-data is not valid base64"),
            "{m}"
        );
    }

    #[test]
    fn a_certificate_without_a_key_is_an_error() {
        let text = config(
            "    server: https://x\n",
            "    client-certificate-data: Q0VSVA==\n",
        );
        assert!(message(parse(&text, Path::new("/k/config"))).contains("no client-key"));
    }

    #[test]
    fn missing_current_context_and_unknown_names_are_explained() {
        let m = message(parse(
            "apiVersion: v1\nkind: Config\nclusters: []\n",
            Path::new("/k/config"),
        ));
        assert!(m.contains("kubectl config use-context"), "{m}");
        let text = config("    server: https://x\n", "    token: t\n")
            .replace("cluster: c\n", "cluster: other\n");
        let m = message(parse(&text, Path::new("/k/config")));
        assert!(m.contains("cluster `other` is not in clusters"), "{m}");
    }

    #[test]
    fn insecure_skip_tls_verify_is_read_as_a_boolean() {
        let text = config(
            "    server: https://x\n    insecure-skip-tls-verify: true\n",
            "    token: t\n",
        );
        assert!(
            parse(&text, Path::new("/k/config"))
                .expect("valid")
                .insecure_skip_tls_verify
        );
        let text = config(
            "    server: https://x\n    insecure-skip-tls-verify: \"true\"\n",
            "    token: t\n",
        );
        assert!(message(parse(&text, Path::new("/k/config"))).contains("must be true or false"));
    }

    #[test]
    fn a_context_without_a_user_has_no_credentials() {
        let text = config("    server: http://127.0.0.1:8001\n", "    token: t\n")
            .replace("    user: u\n", "");
        let k = parse(&text, Path::new("/k/config")).expect("valid");
        assert_eq!(k.credentials, Credentials::None);
    }

    #[test]
    fn yaml_errors_name_the_file_and_the_line() {
        let m = message(parse("a: 1\nb: [2,\nc: 3\n", Path::new("/k/config")));
        assert!(m.contains("/k/config") && m.contains("line "), "{m}");
    }

    #[test]
    fn debug_output_never_shows_tokens_or_keys() {
        let text = config(
            "    server: https://x\n    insecure-skip-tls-verify: true\n",
            "    token: supersecret\n",
        );
        let k = parse(&text, Path::new("/k/config")).expect("valid");
        assert!(!format!("{k:?}").contains("supersecret"));
    }
}
