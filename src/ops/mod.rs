//! Running wavelet in production: the `/healthz` `/readyz` `/metrics` server (`http`),
//! the metrics it serves (`metrics`), Kubernetes Events (`events`), Lease leader election
//! (`leader`) and log output (`logging`).

pub(crate) mod events;
pub(crate) mod http;
pub(crate) mod leader;
pub mod logging;
pub mod metrics;
