//! wavelet: keeps Kubernetes workloads running the configuration their ConfigMaps and
//! Secrets declare. The modules are listed in the order data flows through them.
#![forbid(unsafe_code)]

// Configuration and connection.
pub mod config;
pub mod duration;
pub mod kubeconfig;
pub mod yaml;
pub mod client;
pub mod error;

// What wavelet reads from the API server, and how it keeps it.
pub mod objects;
pub mod base64;
pub mod watch;
pub mod cache;

// Decisions: pure functions.
pub mod annotations;
pub mod references;
pub mod hash;
pub mod selector;
pub mod throttle;

// Acting on decisions.
pub mod queue;
pub mod reconcile;
pub mod deletemode;
pub mod state;
pub mod events;
pub mod controller;
pub mod commands;
