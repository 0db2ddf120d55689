//! Hash mode: coalescing and storm limits (`throttle`), what a rollout writes by kind of
//! workload (`rollout`), and the decision that brings one workload's pod template hash in
//! line with its configuration (`reconcile`). What a workload references, whether it opted
//! in and the hash itself are the model's (`crate::model`).
pub(crate) mod baseline;
pub(crate) mod basis;
pub(crate) mod confirm;
pub(crate) mod fanout;
pub(crate) mod parts;
pub(crate) mod reconcile;
pub(crate) mod rollout;
pub(crate) mod takeover;
pub(crate) mod throttle;
