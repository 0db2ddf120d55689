//! Where the API server's name points: resolved in the calling thread, at most once per
//! [`REMEMBER_FOR`] per host.
//!
//! ureq resolves the host of every request before it looks for a pooled connection, and
//! with a resolve timeout it does so in a new thread each time. At wavelet's initial sync
//! (a thousand Secret GETs over a few kept-alive connections) that was a thread spawned,
//! its stack mapped and unmapped, per request: on a real kube-apiserver, 1,044 `clone`s and
//! 4,300 `mmap`/`munmap` pairs in one restart, most of the kernel time of the whole sync.
//!
//! Here an address literal (what in-cluster config and most kubeconfigs hold) is parsed
//! without a lookup, and a name is looked up with the system resolver, whose own timeouts
//! bound the wait (`/etc/resolv.conf`: 5 s per attempt by default), and remembered for a
//! few seconds, so a burst of requests makes one lookup. Addresses only matter when a new
//! connection is dialled, so a short memory never keeps a moved server out of reach.
//!
//! A kubeconfig's `tls-server-name` is a [`Pin`], as curl's `--resolve`: requests go to a
//! URL whose host is that name (so TLS sends it as SNI and verifies the certificate
//! against it), and the resolver sends that name to the host of `server`.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ureq::config::Config;
use ureq::http::Uri;
use ureq::unversioned::resolver::{ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::NextTimeout;

/// How long a looked-up name is trusted.
const REMEMBER_FOR: Duration = Duration::from_secs(10);

/// The resolver of wavelet's HTTP agent.
#[derive(Debug, Default)]
pub(super) struct CachingResolver {
    /// `host:port` → when it was looked up, and the addresses.
    names: Mutex<HashMap<String, (Instant, Vec<SocketAddr>)>>,
    pin: Option<Pin>,
}

/// A host name that stands for another host (`tls-server-name` for the host of `server`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Pin {
    /// The host in request URLs (the TLS server name), as `Authority::host` gives it.
    pub name: String,
    /// The host of `server`: where connections go.
    pub target: String,
}

/// The request base URL and the pin for `server` verified as `tls_server_name`: the same
/// scheme, port and path prefix with the name as host.
pub(super) fn pin_server_name(
    server: &str,
    tls_server_name: &str,
) -> Result<(String, Pin), crate::error::Error> {
    let invalid = |why: &str| {
        crate::error::Error::Config(format!(
            "cannot use tls-server-name `{tls_server_name}` with server `{server}`: {why}"
        ))
    };
    let uri: Uri = server.parse().map_err(|_| invalid("not a URL"))?;
    let authority = uri.authority().ok_or_else(|| invalid("no host"))?;
    let port = authority.port_u16().unwrap_or(443);
    let name = match tls_server_name.parse::<IpAddr>() {
        Ok(IpAddr::V6(ip)) => format!("[{ip}]"),
        _ => tls_server_name.to_ascii_lowercase(),
    };
    let prefix = uri.path().trim_end_matches('/');
    let request_base = format!("https://{name}:{port}{prefix}");
    let pin = Pin {
        name,
        target: authority.host().to_string(),
    };
    Ok((request_base, pin))
}

impl CachingResolver {
    pub(super) fn with_pin(pin: Pin) -> CachingResolver {
        CachingResolver {
            pin: Some(pin),
            ..CachingResolver::default()
        }
    }

    /// The addresses of `host:port`: parsed when it is an address, else remembered or
    /// looked up.
    /// `host` as `Authority::host` gives it (an IPv6 address keeps its brackets).
    fn addresses(&self, host: &str, port: u16, now: Instant) -> std::io::Result<Vec<SocketAddr>> {
        let literal = host.trim_start_matches('[').trim_end_matches(']');
        if let Ok(ip) = literal.parse::<IpAddr>() {
            return Ok(vec![SocketAddr::new(ip, port)]);
        }
        let host_and_port = format!("{host}:{port}");
        if let Some((at, addresses)) = self.lock().get(&host_and_port) {
            if now.duration_since(*at) < REMEMBER_FOR {
                return Ok(addresses.clone());
            }
        }
        // Looked up without holding the lock: a slow resolver delays only this request.
        let addresses: Vec<SocketAddr> = host_and_port.as_str().to_socket_addrs()?.collect();
        if !addresses.is_empty() {
            self.lock().insert(host_and_port, (now, addresses.clone()));
        }
        Ok(addresses)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Instant, Vec<SocketAddr>)>> {
        self.names
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Resolver for CachingResolver {
    fn resolve(
        &self,
        uri: &Uri,
        config: &Config,
        _timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let (Some(scheme), Some(authority)) = (uri.scheme(), uri.authority()) else {
            return Err(ureq::Error::BadUri(format!("{uri} has no scheme or host")));
        };
        let port = authority
            .port_u16()
            .unwrap_or(if scheme.as_str() == "https" { 443 } else { 80 });
        let host = match &self.pin {
            Some(pin) if authority.host().eq_ignore_ascii_case(&pin.name) => pin.target.as_str(),
            _ => authority.host(),
        };
        let addresses = self.addresses(host, port, Instant::now())?;
        let mut result = self.empty();
        for address in config.ip_family().keep_wanted(addresses.into_iter()) {
            if result.try_push(address).is_err() {
                break;
            }
        }
        if result.is_empty() {
            return Err(ureq::Error::HostNotFound);
        }
        Ok(result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_parsed_not_looked_up_and_not_remembered() {
        let resolver = CachingResolver::default();
        let now = Instant::now();
        assert_eq!(
            resolver.addresses("127.0.0.1", 6443, now).unwrap(),
            vec!["127.0.0.1:6443".parse().unwrap()]
        );
        assert_eq!(
            resolver.addresses("[::1]", 6443, now).unwrap(),
            vec!["[::1]:6443".parse().unwrap()]
        );
        assert!(resolver.lock().is_empty());
    }

    #[test]
    fn a_name_is_remembered_for_a_while_then_looked_up_again() {
        let resolver = CachingResolver::default();
        let now = Instant::now();
        let first = resolver.addresses("localhost", 6443, now).unwrap();
        assert!(!first.is_empty());
        // Planted addresses are what a remembered name answers, until they are too old.
        let planted: SocketAddr = "192.0.2.1:6443".parse().unwrap();
        resolver
            .lock()
            .insert("localhost:6443".into(), (now, vec![planted]));
        let soon = now + REMEMBER_FOR / 2;
        assert_eq!(
            resolver.addresses("localhost", 6443, soon).unwrap(),
            vec![planted]
        );
        let later = now + REMEMBER_FOR + Duration::from_secs(1);
        assert_eq!(resolver.addresses("localhost", 6443, later).unwrap(), first);
    }

    #[test]
    fn a_tls_server_name_is_the_request_host_and_resolves_to_the_server() {
        let (base, pin) = pin_server_name("https://127.0.0.1:6443", "kubernetes.default").unwrap();
        assert_eq!(base, "https://kubernetes.default:6443");
        let resolver = CachingResolver::with_pin(pin);
        let uri: Uri = format!("{base}/api/v1/pods").parse().unwrap();
        let resolved = resolver
            .resolve(&uri, &Config::default(), NextTimeout::default())
            .unwrap();
        assert_eq!(&resolved[..], &["127.0.0.1:6443".parse().unwrap()]);

        // A path prefix and the default port stay; an IPv6 name gets its brackets.
        let (base, pin) = pin_server_name("https://[::1]/k8s/clusters/c-1/", "fd00::1").unwrap();
        assert_eq!(base, "https://[fd00::1]:443/k8s/clusters/c-1");
        assert_eq!(pin.target, "[::1]");
        let resolver = CachingResolver::with_pin(pin);
        let uri: Uri = format!("{base}/api").parse().unwrap();
        let resolved = resolver
            .resolve(&uri, &Config::default(), NextTimeout::default())
            .unwrap();
        assert_eq!(&resolved[..], &["[::1]:443".parse().unwrap()]);
    }

    #[test]
    fn resolving_a_uri_with_an_address_uses_it_and_the_scheme_default_port() {
        let resolver = CachingResolver::default();
        let config = Config::default();
        for (uri, address) in [
            ("https://127.0.0.1/api", "127.0.0.1:443"),
            ("http://127.0.0.1:8001/api", "127.0.0.1:8001"),
            ("https://[::1]:6443/api", "[::1]:6443"),
        ] {
            let uri: Uri = uri.parse().unwrap();
            let resolved = resolver
                .resolve(&uri, &config, NextTimeout::default())
                .unwrap();
            assert_eq!(&resolved[..], &[address.parse().unwrap()]);
        }
    }
}
