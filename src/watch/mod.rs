//! The generic watch engine, which knows objects and the client and nothing of either
//! mode: each resource's list+watch state machine (`watcher`), the API server as a source
//! (`source`: `ApiSource`, `list_each`), the objects it watches (`objects`), the reads of the Secrets whose data is needed
//! (`fetch`), the namespaces in scope under `--namespace-selector` (`scope`), the work
//! queue the workers take keys from (`queue`), and the one worker loop over it (`worker`).
pub(crate) mod fetch;
pub(crate) mod objects;
pub(crate) mod queue;
pub(crate) mod scope;
pub mod source;
pub(crate) mod watcher;
pub(crate) mod worker;
