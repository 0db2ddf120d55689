//! wavelet: keeps Kubernetes workloads running the configuration their ConfigMaps and
//! Secrets declare. The modules are layers, listed bottom to top: each uses only the
//! layers above it in this list (`tests/architecture.rs` checks it; the book's design
//! page, `docs/src/design.md`, draws it).
#![forbid(unsafe_code)]

// Foundations and vocabulary: errors, time, the stop flag; label selectors, restart
// windows and the annotation keys wavelet reads.
pub mod error;
pub mod stop;
#[cfg(test)]
mod testing;
pub mod time;

pub mod annotations;
pub mod selector;
pub mod window;

// The slices of Kubernetes objects wavelet reads.
pub mod objects;

// Flags and environment, validated into plain data the layers above read.
pub mod config;

// Talking to the API server: connection, credentials, TLS, Status, list and watch bodies.
pub mod client;

// Running in production: health and metrics, Events, leader election, logs.
pub mod ops;

// The generic watch engine: list+watch, work queue, worker loop, Secret reads.
pub(crate) mod watch;

// wavelet's model of the cluster: references, opt-in, hash, the cache and its index.
pub mod model;

// The two modes, peers that know nothing of each other.
pub mod deletemode;
pub mod hashmode;

// What older Wave left, what a switch from Reloader will do, what a change will roll
// (`impact`), and the wiring: `run`'s
// threads and sinks, the other commands.
pub mod impact;
pub mod migrate;
pub mod migrate_reloader;

pub mod commands;
pub mod controller;
