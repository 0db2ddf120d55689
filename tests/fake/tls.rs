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

/// The fixture server certificate (for 127.0.0.1 and localhost), as rustls serves it.
pub fn server_config() -> Arc<rustls::ServerConfig> {
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
    Arc::new(config)
}

/// A served connection: plain HTTP, or HTTPS terminated in the fake itself (no relay, so
/// nothing is added between wavelet and the fake but the TLS a real server has).
pub enum Conn {
    Plain(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ServerConnection, TcpStream>>),
}

impl Conn {
    pub fn new(socket: TcpStream, tls: Option<&Arc<rustls::ServerConfig>>) -> io::Result<Conn> {
        Ok(match tls {
            None => Conn::Plain(socket),
            Some(config) => {
                let connection =
                    rustls::ServerConnection::new(Arc::clone(config)).map_err(io::Error::other)?;
                Conn::Tls(Box::new(rustls::StreamOwned::new(connection, socket)))
            }
        })
    }

    /// The TCP socket under it (to peek whether the client went away).
    pub fn socket(&self) -> &TcpStream {
        match self {
            Conn::Plain(socket) => socket,
            Conn::Tls(tls) => tls.get_ref(),
        }
    }
}

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Conn::Plain(socket) => socket.read(buf),
            Conn::Tls(tls) => tls.read(buf),
        }
    }
}

impl Write for Conn {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Conn::Plain(socket) => socket.write(buf),
            Conn::Tls(tls) => tls.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Conn::Plain(socket) => socket.flush(),
            Conn::Tls(tls) => tls.flush(),
        }
    }
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
        let config = server_config();
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
