//! wavelet: keeps Kubernetes workloads running the configuration their ConfigMaps and
//! Secrets declare. The modules are listed in the order data flows through them:
//! configuration → connection → watching and caching → deciding → acting.
#![forbid(unsafe_code)]

// Flags and environment, validated into what the program runs.
pub mod config;
pub mod error;

// Talking to the API server: connection, credentials, TLS, Status, list and watch bodies.
pub mod client;

// What wavelet reads from the API server, and how it keeps it.
pub mod annotations;
pub mod objects;
pub mod selector;
pub mod stop;
pub mod time;
pub(crate) mod watch;

// The two modes: deciding and acting.
pub mod deletemode;
pub mod hashmode;

// Wiring and operations.
pub mod commands;
pub mod controller;
pub mod migrate;
pub mod ops;

#[cfg(test)]
mod testing;
