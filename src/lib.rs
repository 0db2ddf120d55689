//! wavelet: keeps Kubernetes workloads running the configuration their ConfigMaps and
//! Secrets declare. The modules are listed in the order data flows through them.
#![forbid(unsafe_code)]

// Configuration and connection.
pub mod client;
pub mod config;
pub mod duration;
pub mod error;
pub mod kubeconfig;
pub mod list_body;
pub mod yaml;

// What wavelet reads from the API server, and how it keeps it.
pub mod base64;
pub mod cache;
pub mod compact;
pub mod intern;
pub mod objects;
pub mod watch;

// Decisions: pure functions.
pub mod annotations;
pub mod hash;
pub mod references;
pub mod selector;
pub mod throttle;

// Acting on decisions.
pub mod commands;
pub mod controller;
pub mod deletemode;
pub mod events;
pub mod fetch;
pub mod http;
pub mod leader;
pub mod logging;
pub mod metrics;
pub mod queue;
pub mod reconcile;
pub mod sinks;
pub mod state;
