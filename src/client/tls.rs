//! The rustls configuration of an `https` server: the CA roots and the client certificate,
//! with PEM problems reported at start, naming the file or kubeconfig field.

use super::*;

/// The rustls configuration for an `https` server: the CA roots (required unless `insecure`),
/// and the client certificate when there is one. PEM problems are reported here, at start,
/// naming the file or kubeconfig field, rather than as a failed handshake later.
pub(super) fn tls_config(
    ca: Option<&Pem>,
    client_certificate: Option<&(Pem, Pem)>,
    insecure: bool,
    ca_hint: &str,
) -> Result<ureq::tls::TlsConfig, Error> {
    let mut builder = ureq::tls::TlsConfig::builder();
    if insecure {
        log::warn!("TLS certificate verification is disabled (insecure-skip-tls-verify): use this only for testing");
        builder = builder.disable_verification(true);
    } else {
        let ca = ca.ok_or_else(|| Error::Config(ca_hint.to_string()))?;
        let roots = parse_ca(ca)?;
        let roots: Vec<_> = roots
            .iter()
            .map(|der| ureq::tls::Certificate::from_der(der.as_ref()).to_owned())
            .collect();
        builder = builder.root_certs(ureq::tls::RootCerts::new_with_certs(&roots));
    }
    if let Some((cert, key)) = client_certificate {
        builder = builder.client_cert(Some(parse_client_certificate(cert, key)?));
    }
    Ok(builder.build())
}

pub(super) fn parse_ca(ca: &Pem) -> Result<Vec<CertificateDer<'static>>, Error> {
    let mut certs = Vec::new();
    for item in CertificateDer::pem_slice_iter(&ca.bytes) {
        certs.push(item.map_err(|e| {
            Error::Config(format!(
                "certificate authority {}: invalid PEM ({e})",
                ca.origin
            ))
        })?);
    }
    if certs.is_empty() {
        return Err(Error::Config(format!(
            "certificate authority {} holds no PEM certificate (expected -----BEGIN CERTIFICATE-----)",
            ca.origin
        )));
    }
    let mut store = rustls::RootCertStore::empty();
    for (index, cert) in certs.iter().enumerate() {
        store.add(cert.clone()).map_err(|e| {
            Error::Config(format!(
                "certificate authority {}: certificate {} cannot be used as a trust root ({e})",
                ca.origin,
                index + 1
            ))
        })?;
    }
    Ok(certs)
}

pub(super) fn parse_client_certificate(
    cert: &Pem,
    key: &Pem,
) -> Result<ureq::tls::ClientCert, Error> {
    let mut chain = Vec::new();
    for item in CertificateDer::pem_slice_iter(&cert.bytes) {
        chain.push(item.map_err(|e| {
            Error::Config(format!(
                "client certificate {}: invalid PEM ({e})",
                cert.origin
            ))
        })?);
    }
    if chain.is_empty() {
        return Err(Error::Config(format!(
            "client certificate {} holds no PEM certificate (expected -----BEGIN CERTIFICATE-----)",
            cert.origin
        )));
    }
    let private_key = PrivateKeyDer::from_pem_slice(&key.bytes).map_err(|e| {
        Error::Config(format!(
            "client key {}: no usable PEM private key (expected -----BEGIN PRIVATE KEY-----, \
             -----BEGIN RSA PRIVATE KEY----- or -----BEGIN EC PRIVATE KEY-----; {e})",
            key.origin
        ))
    })?;
    // Let rustls check the key type and that the key belongs to the certificate, so a bad
    // pair is reported now (ureq would only fail later, at the first handshake).
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .and_then(|b| {
            b.with_root_certificates(rustls::RootCertStore::empty())
                .with_client_auth_cert(chain.clone(), private_key.clone_key())
        })
        .map_err(|e| {
            Error::Config(format!(
                "client certificate {} and key {} cannot be used together: {e}",
                cert.origin, key.origin
            ))
        })?;
    let chain: Vec<_> = chain
        .iter()
        .map(|der| ureq::tls::Certificate::from_der(der.as_ref()).to_owned())
        .collect();
    // The same PEM rustls just accepted; ureq keeps its own copy with the key kind.
    let private_key = ureq::tls::PrivateKey::from_pem(&key.bytes)
        .map_err(|e| Error::Config(format!("client key {}: {e}", key.origin)))?;
    Ok(ureq::tls::ClientCert::new_with_certs(&chain, private_key))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::test_support::*;

    use crate::testing::TempDir;
    use serde_json::{json, Value};

    fn pem(text: &str, origin: &str) -> Pem {
        Pem {
            bytes: text.as_bytes().to_vec(),
            origin: origin.into(),
        }
    }

    #[test]
    fn https_without_a_ca_says_which_kubeconfig_field_to_set() {
        let dir = TempDir::new("client");
        let path = dir.write(
            "config",
            &kubeconfig_text("https://10.0.0.1:6443", "", "    token: t\n"),
        );
        let m = config_message(Client::for_tests(&ConnectionFlags {
            kubeconfig: Some(path),
            ..Default::default()
        }));
        assert!(
            m.contains("certificate-authority-data") && m.contains("--insecure-skip-tls-verify"),
            "{m}"
        );
        let m = config_message(Client::in_cluster_from(&dir.0, "10.96.0.1", "443", false));
        assert!(m.contains("token"), "{m}");
    }

    #[test]
    fn ca_pem_problems_are_clear_errors() {
        let m = config_message(parse_ca(&pem("not a certificate", "/etc/ca.crt")));
        assert!(
            m.contains("/etc/ca.crt") && m.contains("BEGIN CERTIFICATE"),
            "{m}"
        );
        let m = config_message(parse_ca(&pem(
            "-----BEGIN CERTIFICATE-----\nAAAA\n",
            "/etc/ca.crt",
        )));
        assert!(
            m.contains("/etc/ca.crt") && m.contains("invalid PEM"),
            "{m}"
        );
        let m = config_message(parse_ca(&pem(
            "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
            "x",
        )));
        assert!(m.contains("cannot be used as a trust root"), "{m}");
        let bundle = format!("{CA_CRT}{OTHER_CA_CRT}");
        assert_eq!(parse_ca(&pem(&bundle, "bundle")).expect("two CAs").len(), 2);
    }

    #[test]
    fn client_certificate_problems_are_clear_errors() {
        assert!(parse_client_certificate(&pem(CLIENT_CRT, "crt"), &pem(CLIENT_KEY, "key")).is_ok());
        let m = config_message(parse_client_certificate(
            &pem(CLIENT_CRT, "crt"),
            &pem(OTHER_KEY, "other.key"),
        ));
        assert!(m.contains("cannot be used together"), "{m}");
        let m = config_message(parse_client_certificate(
            &pem(CLIENT_CRT, "crt"),
            &pem(CLIENT_CRT, "cert-as-key"),
        ));
        assert!(
            m.contains("cert-as-key") && m.contains("no usable PEM private key"),
            "{m}"
        );
        let m = config_message(parse_client_certificate(
            &pem("", "empty.crt"),
            &pem(CLIENT_KEY, "key"),
        ));
        assert!(m.contains("empty.crt"), "{m}");
    }

    #[test]
    fn in_cluster_https_verifies_the_server_against_ca_crt_and_sends_the_token() {
        let server = FakeServer::https(
            vec![json_response("200 OK", &json!({"kind": "ConfigMap"}))],
            false,
        );
        let dir = TempDir::new("client");
        dir.write("token", "sa-token\n");
        dir.write("ca.crt", CA_CRT);
        dir.write("namespace", "apps");
        let client =
            Client::in_cluster_from(&dir.0, "127.0.0.1", &server.port(), false).expect("client");
        let cm: Value = client
            .get("/api/v1/namespaces/apps/configmaps/a")
            .expect("TLS request");
        assert_eq!(cm["kind"], "ConfigMap");
        assert_eq!(
            server.next().header("authorization").as_deref(),
            Some("Bearer sa-token")
        );
    }

    #[test]
    fn a_server_certificate_from_another_ca_is_refused_with_a_hint_naming_the_ca_and_the_flag() {
        let server = FakeServer::https(vec![json_response("200 OK", &json!({}))], false);
        let dir = TempDir::new("client");
        dir.write("token", "sa-token");
        dir.write("ca.crt", OTHER_CA_CRT);
        let client =
            Client::in_cluster_from(&dir.0, "127.0.0.1", &server.port(), false).expect("client");
        match client.get::<Value>("/version") {
            Err(Error::Transport(message)) => {
                assert!(message.contains("UnknownIssuer"), "{message}");
                assert!(message.contains("certificate-authority"), "{message}");
                assert!(message.contains("--insecure-skip-tls-verify"), "{message}");
            }
            other => panic!("expected a TLS failure, got {other:?}"),
        }
    }

    #[test]
    fn kubeconfig_client_certificates_are_presented_to_the_server() {
        let server = FakeServer::https(vec![json_response("200 OK", &json!({"major": "1"}))], true);
        let dir = TempDir::new("client");
        dir.write("client.crt", CLIENT_CRT);
        dir.write("client.key", CLIENT_KEY);
        let ca_data = crate::objects::base64::encode(CA_CRT.as_bytes());
        let text = kubeconfig_text(
            &server.url,
            &format!("    certificate-authority-data: {ca_data}\n"),
            "    client-certificate: client.crt\n    client-key: client.key\n",
        );
        let path = dir.write("config", &text);
        let client = Client::for_tests(&ConnectionFlags {
            kubeconfig: Some(path),
            ..Default::default()
        })
        .expect("client");
        let version: Value = client.get("/version").expect("mutual TLS request");
        assert_eq!(version["major"], "1");
        assert_eq!(server.next().header("authorization"), None);
    }
}
