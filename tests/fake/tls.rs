//! A TLS front for the fake API server: terminates HTTPS on 127.0.0.1 with the fixture
//! server certificate (tests/fixtures/tls, made by its make.sh) and passes the bytes on to
//! the plain-HTTP fake, one thread per connection.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// The fixture PKI, by file name.
pub fn fixture(name: &str) -> String {
    let path = format!("{}/tests/fixtures/tls/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {path}: {e}"))
}

/// How long each direction waits for bytes before looking at the other one.
const POLL: Duration = Duration::from_millis(5);

/// HTTPS in front of `upstream`; lives as long as the process (test servers are small).
pub struct TlsFront {
    address: SocketAddr,
}

impl TlsFront {
    pub fn start(upstream: &str) -> TlsFront {
        let upstream: SocketAddr = upstream
            .trim_start_matches("http://")
            .parse()
            .expect("an http://IP:PORT upstream");
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let chain: Vec<CertificateDer> =
            CertificateDer::pem_slice_iter(fixture("server.crt").as_bytes())
                .map(|c| c.expect("server.crt"))
                .collect();
        let key = PrivateKeyDer::from_pem_slice(fixture("server.key").as_bytes()).expect("key");
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .expect("server config");
        let config = Arc::new(config);
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let address = listener.local_addr().expect("local address");
        thread::spawn(move || {
            for client in listener.incoming().map_while(Result::ok) {
                let config = Arc::clone(&config);
                thread::spawn(move || {
                    let _ = relay(config, client, upstream);
                });
            }
        });
        TlsFront { address }
    }

    /// `https://127.0.0.1:PORT`
    pub fn url(&self) -> String {
        format!("https://{}", self.address)
    }
}

fn relay(
    config: Arc<rustls::ServerConfig>,
    client: TcpStream,
    upstream: SocketAddr,
) -> io::Result<()> {
    let mut server = TcpStream::connect(upstream)?;
    client.set_read_timeout(Some(POLL))?;
    server.set_read_timeout(Some(POLL))?;
    let connection = rustls::ServerConnection::new(config).map_err(io::Error::other)?;
    let mut tls = rustls::StreamOwned::new(connection, client);
    let mut buf = vec![0u8; 64 << 10];
    let idle = |e: &io::Error| {
        matches!(
            e.kind(),
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
        )
    };
    loop {
        match tls.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => server.write_all(&buf[..n])?,
            Err(e) if idle(&e) => {}
            Err(e) => return Err(e),
        }
        match server.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => {
                tls.write_all(&buf[..n])?;
                tls.flush()?;
            }
            Err(e) if idle(&e) => {}
            Err(e) => return Err(e),
        }
    }
}
