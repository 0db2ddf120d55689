//! Watching and caching: each resource's list+watch state machine (`watcher`), the sinks
//! that turn its events into cache writes and work (`sinks`), the cache and its reverse
//! index (`cache`), the reads of the Secrets that matter (`fetch`), the
//! API server as a source (`source`: `ApiSource`, `list_each`), the namespaces in scope under
//! `--namespace-selector` (`scope`), the work queue the
//! workers take keys from (`queue`), and the one worker loop over it (`worker`).

pub(crate) mod cache;
pub(crate) mod fetch;
pub(crate) mod queue;
pub(crate) mod scope;
pub(crate) mod sinks;
pub mod source;
pub(crate) mod watcher;
pub(crate) mod worker;
