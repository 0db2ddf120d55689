//! wavelet's model of the cluster, between the generic watch engine below and the two
//! modes above: which ConfigMaps, Secrets and SecretProviderClasses a pod template
//! references (`references`), whether a workload opted in and what counts for it
//! (`optin`), what a workload is to wavelet (`workload`), the canonical form and hash of
//! configuration (`hash`), the cache of ConfigMaps/Secrets as digests and of opted-in
//! workloads, with its reverse index (`cache`) and its table of objects (`config_table`), what the Secrets Store CSI driver reports
//! mounted (`mounts`) and which Pods are a workload's (`pods` by name, `owners` by owner
//! references among running Pods), what counts for one
//! workload now (`counted`), whether a workload's rollout finished (`rollout_status`),
//! what Wave and Reloader recorded of what a workload's Pods run and their hashes
//! (`peers`, with the SHA-1 Reloader uses in `sha1`), what a recorded hash was computed
//! under (`recorded_basis`), and wavelet's own state ConfigMap
//! (`state`).
pub mod cache;
pub(crate) mod config_table;
pub(crate) mod counted;
pub mod hash;
pub mod mounts;
pub(crate) mod optin;
pub mod owners;
pub mod peers;
pub mod pods;
pub mod recorded_basis;
pub mod references;
pub(crate) mod reverse_index;
pub mod rollout_status;
pub(crate) mod sha1;
pub mod state;
pub(crate) mod workload;
