//! Running wavelet in production: the `/healthz` `/readyz` `/metrics` server (`http`),
//! the metrics it serves (`metrics`), Kubernetes Events (`events`), Lease leader election
//! (`leader`), log output (`logging`) and alerts on rollout to a webhook (`alerts`).

pub(crate) mod alerts;
pub(crate) mod events;
pub(crate) mod http;
pub(crate) mod leader;
pub mod logging;
pub mod metrics;
