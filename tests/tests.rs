//! Integration tests: the real `wavelet` code paths against the fake API server, over
//! sockets on 127.0.0.1.
//!
//! - `fake`: the fake API server (HTTP/1.1, watch streams, patches, faults).
//! - `wire`: the fake checked against the recordings of a real API server in ../shared/k8s-wire.

mod fake;
mod wire;
