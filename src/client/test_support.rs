//! What the client's unit tests share: a test PKI, a fake API server on 127.0.0.1 that
//! answers scripted responses and records what it received, and helpers to read errors.

#![allow(dead_code)]

use crate::client::*;
use crate::error::{Error, Status};
use serde_json::Value;
use std::io::{BufRead, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc;

// Test PKI made with openssl for these tests (EC P-256, valid until 2126): a CA, a server
// certificate for 127.0.0.1/localhost and a client certificate signed by it, an unrelated
// key and an unrelated CA.
pub(crate) const CA_CRT: &str = "-----BEGIN CERTIFICATE-----
MIIBmjCCAUGgAwIBAgIUKLUx/NN+jo8OHca5uS+YPNKQaSwwCgYIKoZIzj0EAwIw
GjEYMBYGA1UEAwwPd2F2ZWxldC10ZXN0LWNhMCAXDTI2MTEyMjA0MjgxM1oYDzIx
MjYxMDI5MDQyODEzWjAaMRgwFgYDVQQDDA93YXZlbGV0LXRlc3QtY2EwWTATBgcq
hkjOPQIBBggqhkjOPQMBBwNCAAR4iToxJ+svWBItJBddIZKuplmbZY3ZCeAfjNAn
Ilw0K/EVqBlinGdEtZEwPGELeis6nxKGZgQuPvGYPCO0AC9uo2MwYTAdBgNVHQ4E
FgQUmtbeb6zSdUuIJQ0ZRMwtOwKw408wHwYDVR0jBBgwFoAUmtbeb6zSdUuIJQ0Z
RMwtOwKw408wDwYDVR0TAQH/BAUwAwEB/zAOBgNVHQ8BAf8EBAMCAQYwCgYIKoZI
zj0EAwIDRwAwRAIgOa/eQ8OdVX6Hn8Qug1+HLWiicwGl4m3hLlaiCgJlgW4CIFhk
NNj1gaqPiv1/L5RiMCplO6SP3b1dla0maZGmP9us
-----END CERTIFICATE-----
";
pub(crate) const SERVER_CRT: &str = "-----BEGIN CERTIFICATE-----
MIIBwjCCAWigAwIBAgIUWToFdB32ONCocTj/Qo1BXNXX57MwCgYIKoZIzj0EAwIw
GjEYMBYGA1UEAwwPd2F2ZWxldC10ZXN0LWNhMCAXDTI2MTEyMjA0MjgxM1oYDzIx
MjYxMDI5MDQyODEzWjAUMRIwEAYDVQQDDAkxMjcuMC4wLjEwWTATBgcqhkjOPQIB
BggqhkjOPQMBBwNCAATYhoZwUan0mZ1jyZqCC/iVAriEJE4fwzhynHn08v4/oHFu
1/q5iwobjcS3F3omNTraXfNPkDf23zt/QGT2W1/So4GPMIGMMBoGA1UdEQQTMBGH
BH8AAAGCCWxvY2FsaG9zdDATBgNVHSUEDDAKBggrBgEFBQcDATAJBgNVHRMEAjAA
MA4GA1UdDwEB/wQEAwIHgDAdBgNVHQ4EFgQUbHdlHoV/dmywU9ASzVTdtFhLbKIw
HwYDVR0jBBgwFoAUmtbeb6zSdUuIJQ0ZRMwtOwKw408wCgYIKoZIzj0EAwIDSAAw
RQIhAJsvQiOZo1KJ0p24zeok5XTF70sCgTckisCQQYg+AssFAiBWTzsEg0m7lcCu
Ewgc99IpdT+fix2gXgRr2nq9yzqZbQ==
-----END CERTIFICATE-----
";
pub(crate) const SERVER_KEY: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgviM+bbHjjUmoNf32
034WUloq7DZVgBwBjS6HAuekUhqhRANCAATYhoZwUan0mZ1jyZqCC/iVAriEJE4f
wzhynHn08v4/oHFu1/q5iwobjcS3F3omNTraXfNPkDf23zt/QGT2W1/S
-----END PRIVATE KEY-----
";
pub(crate) const CLIENT_CRT: &str = "-----BEGIN CERTIFICATE-----
MIIBrTCCAVSgAwIBAgIUWToFdB32ONCocTj/Qo1BXNXX57QwCgYIKoZIzj0EAwIw
GjEYMBYGA1UEAwwPd2F2ZWxldC10ZXN0LWNhMCAXDTI2MTEyMjA0MjgxM1oYDzIx
MjYxMDI5MDQyODEzWjAeMRwwGgYDVQQDDBN3YXZlbGV0LXRlc3QtY2xpZW50MFkw
EwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEKmb7WDenjIFRGm9S+srMGrVBnsllnOm7
OqsWckrOGfkgzBr1JcMZfFoeWQuHEQDsVUj9J5bzLBUvGWkZqH5SIqNyMHAwEwYD
VR0lBAwwCgYIKwYBBQUHAwIwCQYDVR0TBAIwADAOBgNVHQ8BAf8EBAMCB4AwHQYD
VR0OBBYEFLgy7xGSZcy5eA24IZEgR7dh9h4EMB8GA1UdIwQYMBaAFJrW3m+s0nVL
iCUNGUTMLTsCsONPMAoGCCqGSM49BAMCA0cAMEQCIC/4CKrcbw5N0Tnjica0OEaP
7EAb9Kp/QZJ7BJy9L2ZuAiA5Cp0k5ssQnGNLROXgtrObszeQ86BOxcOJgbs9vZf4
Nw==
-----END CERTIFICATE-----
";
pub(crate) const CLIENT_KEY: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgaQ2f/orVZee4slRO
vLYn/yUZ6uqnjl0hK2IuMa9z1NqhRANCAAQqZvtYN6eMgVEab1L6yswatUGeyWWc
6bs6qxZySs4Z+SDMGvUlwxl8Wh5ZC4cRAOxVSP0nlvMsFS8ZaRmoflIi
-----END PRIVATE KEY-----
";
pub(crate) const OTHER_KEY: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgej+Gz2wwXz1TBPmS
vIY4i1YGAsLX09f2tvmTdwz7zpahRANCAAQ48xJyQcaRvmAhoDiwqS7G0XYoAujG
fHlXW8qK4It8prL3IpM9Z0xF0YnJnE431aU0zevgR512DrMMooBci2vW
-----END PRIVATE KEY-----
";
pub(crate) const OTHER_CA_CRT: &str = "-----BEGIN CERTIFICATE-----
MIIBlTCCATugAwIBAgIUT2LSEWvtLRiHE5HutaQCyZA0OnowCgYIKoZIzj0EAwIw
FzEVMBMGA1UEAwwMdW5yZWxhdGVkLWNhMCAXDTI2MTEyMjA0MzAzM1oYDzIxMjYx
MDI5MDQzMDMzWjAXMRUwEwYDVQQDDAx1bnJlbGF0ZWQtY2EwWTATBgcqhkjOPQIB
BggqhkjOPQMBBwNCAARV1dgRauh/BY4JEyvtbBA7DxxIhmquAVESMq84DR4oAWPz
pdtm7shVJ3/i2L1MBbmpoMhWJHWJGc02aPpiKfqxo2MwYTAdBgNVHQ4EFgQUpivU
zuqsjT/HIl5CFIBe2gWduSIwHwYDVR0jBBgwFoAUpivUzuqsjT/HIl5CFIBe2gWd
uSIwDwYDVR0TAQH/BAUwAwEB/zAOBgNVHQ8BAf8EBAMCAQYwCgYIKoZIzj0EAwID
SAAwRQIgH5Sxb4xc5ivFfSAqnTIp/BYiVqV9tIOn2C+NM4iASqMCIQC1Nu9whhxZ
6PfdX9E/I3nxziX2aFBJ94ICRXLEz8s0HQ==
-----END CERTIFICATE-----
";

pub(crate) fn api_status(result: Result<impl std::fmt::Debug, Error>) -> Status {
    match result {
        Err(Error::Api(status)) => status,
        other => panic!("expected an API error, got {other:?}"),
    }
}

pub(crate) fn config_message<T>(result: Result<T, Error>) -> String {
    match result {
        Err(Error::Config(message)) => message,
        Err(other) => panic!("expected a config error, got {other}"),
        Ok(_) => panic!("expected a config error, got a client"),
    }
}

/// A canned HTTP/1.1 response with `Connection: close` and a Content-Length.
pub(crate) fn response(status: &str, headers: &[(&str, &str)], body: &str) -> Vec<Vec<u8>> {
    let mut head = format!(
        "HTTP/1.1 {status}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    vec![format!("{head}\r\n{body}").into_bytes()]
}

pub(crate) fn json_response(status: &str, body: &Value) -> Vec<Vec<u8>> {
    response(
        status,
        &[("Content-Type", "application/json")],
        &body.to_string(),
    )
}

/// One request as the fake server received it.
pub(crate) struct Received {
    pub(crate) head: String,
    pub(crate) body: String,
}

impl Received {
    pub(crate) fn header(&self, name: &str) -> Option<String> {
        self.head.lines().skip(1).find_map(|line| {
            let (n, v) = line.split_once(':')?;
            n.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_string())
        })
    }

    pub(crate) fn request_line(&self) -> &str {
        self.head.lines().next().unwrap_or("")
    }
}

/// A tiny HTTP(S)/1.1 server on 127.0.0.1:0 that answers one connection per canned
/// response (each written in pieces with a pause between, then closed).
pub(crate) struct FakeServer {
    pub(crate) url: String,
    pub(crate) received: mpsc::Receiver<Received>,
}

impl FakeServer {
    pub(crate) fn start(
        replies: Vec<Vec<Vec<u8>>>,
        tls: Option<Arc<rustls::ServerConfig>>,
    ) -> FakeServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let port = listener.local_addr().expect("local addr").port();
        let (sender, received) = mpsc::channel();
        std::thread::spawn(move || {
            for pieces in replies {
                let Ok((tcp, _)) = listener.accept() else {
                    return;
                };
                let _ = tcp.set_read_timeout(Some(Duration::from_secs(10)));
                match &tls {
                    Some(config) => {
                        let Ok(connection) = rustls::ServerConnection::new(config.clone()) else {
                            return;
                        };
                        let mut tls_stream = rustls::StreamOwned::new(connection, tcp);
                        if answer(&mut tls_stream, &pieces, &sender).is_ok() {
                            tls_stream.conn.send_close_notify();
                            let _ = tls_stream.flush();
                        }
                    }
                    None => {
                        let mut tcp: TcpStream = tcp;
                        let _ = answer(&mut tcp, &pieces, &sender);
                    }
                }
            }
        });
        FakeServer {
            url: format!("127.0.0.1:{port}"),
            received,
        }
    }

    pub(crate) fn http(replies: Vec<Vec<Vec<u8>>>) -> FakeServer {
        let mut server = FakeServer::start(replies, None);
        server.url = format!("http://{}", server.url);
        server
    }

    pub(crate) fn https(
        replies: Vec<Vec<Vec<u8>>>,
        require_client_certificate: bool,
    ) -> FakeServer {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let chain: Vec<_> = CertificateDer::pem_slice_iter(SERVER_CRT.as_bytes())
            .map(|c| c.expect("pem"))
            .collect();
        let key = PrivateKeyDer::from_pem_slice(SERVER_KEY.as_bytes()).expect("key");
        let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .expect("versions");
        let builder = if require_client_certificate {
            let mut roots = rustls::RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(CA_CRT.as_bytes()) {
                roots.add(cert.expect("pem")).expect("root");
            }
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                provider,
            )
            .build()
            .expect("client verifier");
            builder.with_client_cert_verifier(verifier)
        } else {
            builder.with_no_client_auth()
        };
        let config = builder.with_single_cert(chain, key).expect("server config");
        let mut server = FakeServer::start(replies, Some(Arc::new(config)));
        server.url = format!("https://{}", server.url);
        server
    }

    pub(crate) fn next(&self) -> Received {
        self.received
            .recv_timeout(Duration::from_secs(10))
            .expect("the fake server received a request")
    }

    pub(crate) fn port(&self) -> String {
        self.url.rsplit(':').next().unwrap_or_default().to_string()
    }
}

pub(crate) fn answer<S: Read + Write>(
    stream: &mut S,
    pieces: &[Vec<u8>],
    sender: &mpsc::Sender<Received>,
) -> io::Result<()> {
    let mut reader = io::BufReader::new(&mut *stream);
    let mut head = String::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        if line == "\r\n" {
            break;
        }
        head.push_str(&line);
    }
    let length = head
        .lines()
        .find_map(|l| {
            l.split_once(':')
                .filter(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        })
        .and_then(|(_, v)| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    drop(reader);
    let _ = sender.send(Received {
        head,
        body: String::from_utf8_lossy(&body).into_owned(),
    });
    for (index, piece) in pieces.iter().enumerate() {
        if piece.is_empty() {
            // An empty piece stands for a server that goes silent with the connection open.
            std::thread::sleep(Duration::from_secs(3));
            continue;
        }
        if index > 0 {
            std::thread::sleep(Duration::from_millis(30));
        }
        stream.write_all(piece)?;
        stream.flush()?;
    }
    Ok(())
}

pub(crate) fn proxy_client(server: &FakeServer) -> Client {
    Client::for_tests(&ConnectionFlags {
        server: Some(server.url.clone()),
        ..ConnectionFlags::default()
    })
    .expect("client for --server http://")
}

pub(crate) fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> {
    let vars: Vec<(String, String)> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |name| {
        vars.iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| OsString::from(v))
    }
}

pub(crate) fn kubeconfig_text(server: &str, cluster_extra: &str, user: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: ctx\ncontexts:\n- name: ctx\n  context:\n    cluster: c\n    user: u\n    namespace: from-kubeconfig\nclusters:\n- name: c\n  cluster:\n    server: {server}\n{cluster_extra}users:\n- name: u\n  user:\n{user}"
    )
}
