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
