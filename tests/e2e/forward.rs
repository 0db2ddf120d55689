//! A TCP forwarder to the API server on another loopback port, whose answers can be held
//! back for a while: the server gets every request at once and acts on it, the client
//! hears of it late (a stalled network, a slow proxy). TLS passes through untouched: the
//! API server's certificate names 127.0.0.1 whatever the port.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub struct Forwarder {
    pub port: u16,
    /// Bytes from the server wait until then.
    held_until: Arc<Mutex<Option<Instant>>>,
}

impl Forwarder {
    /// Listens on a free loopback port and forwards every connection to `target`.
    pub fn start(target: u16) -> Forwarder {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding the forwarder");
        let port = listener.local_addr().unwrap().port();
        let held_until = Arc::new(Mutex::new(None::<Instant>));
        let held = Arc::clone(&held_until);
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let Ok(server) = TcpStream::connect(("127.0.0.1", target)) else {
                    continue;
                };
                let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                std::thread::spawn(move || pump(client, server, None));
                let held = Arc::clone(&held);
                std::thread::spawn(move || pump(s2, c2, Some(held)));
            }
        });
        Forwarder { port, held_until }
    }

    /// Holds back every byte the server sends, on every connection, for `duration` from
    /// now; requests still reach the server at once.
    pub fn hold_answers(&self, duration: Duration) {
        *self.held_until.lock().unwrap() = Some(Instant::now() + duration);
    }
}

/// Copies `from` to `to` until either side closes; with `held`, each chunk waits while
/// answers are held back.
fn pump(mut from: TcpStream, mut to: TcpStream, held: Option<Arc<Mutex<Option<Instant>>>>) {
    let mut buffer = [0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if let Some(held) = &held {
            loop {
                let until = *held.lock().unwrap();
                match until {
                    Some(until) if Instant::now() < until => {
                        std::thread::sleep(Duration::from_millis(10))
                    }
                    _ => break,
                }
            }
        }
        if to.write_all(&buffer[..n]).is_err() {
            break;
        }
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}
