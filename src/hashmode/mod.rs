//! Hash mode: who is opted in and what counts for them (`optin`), which ConfigMaps and
//! Secrets a pod template references (`references`), the
//! hash of their data (`hash`), coalescing and storm limits (`throttle`), what a rollout writes by kind of
//! workload (`rollout`), and the decision
//! that brings one workload's pod template hash in line (`reconcile`).

pub(crate) mod counted;
pub mod hash;
pub(crate) mod optin;
pub(crate) mod reconcile;
pub mod references;
pub(crate) mod rollout;
pub(crate) mod throttle;
