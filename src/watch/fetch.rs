//! Reading the data of the Secrets that matter.
//!
//! Secrets are watched as metadata only: most of a cluster's Secrets are things nothing
//! references (Helm release records of hundreds of KiB, service account tokens, TLS
//! certificates), and reading them whole would cost memory and CPU in proportion to their
//! size. The Secrets that matter, those an opted-in workload references or that carry a
//! delete-mode selector, are read here with one GET each, digested as the body streams in
//! (the value itself is never kept), when first needed and after each new version.

use std::sync::Arc;

use crate::client::Client;
use crate::error::Error;
use crate::objects::compact::ResourceVersion;
use crate::objects::{ConfigKey, ConfigObject, SecretItem};
use crate::watch::cache::Cache;
use crate::watch::queue::{Backoff, WorkQueue};
use crate::watch::worker::{run_worker, Action, Work};

/// Retries of a failed read: 0.5 s, doubling to at most a minute.
const BACKOFF: Backoff = Backoff {
    initial: std::time::Duration::from_millis(500),
    max: std::time::Duration::from_secs(60),
};

/// What a fetched Secret is handed to.
pub trait FetchSink: Send + Sync {
    /// Whether the data of `key` is still needed (something references it, or it is a
    /// delete-mode object).
    fn wants_data(&self, key: &ConfigKey) -> bool;
    /// The Secret as read, asked for when the cache held `asked_at`.
    fn fetched(&self, key: &ConfigKey, asked_at: &ResourceVersion, object: ConfigObject);
}

/// The queue of Secrets to read, and the threads' loop.
pub struct Fetcher {
    queue: WorkQueue<ConfigKey>,
    client: Client,
    cache: Arc<Cache>,
}

impl Fetcher {
    /// A failed read is retried with backoff, never later than `resync` after the last try.
    pub fn new(client: Client, cache: Arc<Cache>, resync: std::time::Duration) -> Fetcher {
        Fetcher {
            queue: WorkQueue::new(BACKOFF.capped_at(resync)),
            client,
            cache,
        }
    }

    /// Asks for the data of `key` (once, however often asked; asked again while it is
    /// being read, it is read again afterwards).
    pub fn request(&self, key: ConfigKey) {
        self.queue.add(key);
    }

    /// Blocks until no read is waiting or under way; reads that failed and wait for a
    /// retry do not count (the initial sync must not hang on a Secret it may not read).
    pub fn wait_idle(&self) {
        self.queue.wait_idle();
    }

    /// Makes the threads return.
    pub fn shut_down(&self) {
        self.queue.shut_down();
    }

    /// Reads waiting or under way (for metrics).
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// The loop of one fetcher thread (the one worker loop): take a key, read the Secret
    /// unless its data is current or no longer needed, hand it to `sink`.
    pub fn work(&self, sink: &dyn FetchSink) {
        run_worker(
            &self.queue,
            None,
            &Reads {
                fetcher: self,
                sink,
            },
        );
    }

    fn fetch(&self, key: &ConfigKey, sink: &dyn FetchSink) -> Result<(), Error> {
        let Some(entry) = self.cache.config(key) else {
            return Ok(()); // deleted meanwhile
        };
        if entry.is_current() || !sink.wants_data(key) {
            return Ok(());
        }
        // Deleted meanwhile (`None`): the watch reports it.
        if let Some(object) = read_secret(&self.client, key)? {
            log::debug!(
                "{key}: data read at resourceVersion {}",
                object.metadata.resource_version
            );
            sink.fetched(key, &entry.resource_version, object);
        }
        Ok(())
    }
}

/// Reads one Secret whole, digested as it is parsed; `None` when it does not exist.
pub fn read_secret(client: &Client, key: &ConfigKey) -> Result<Option<ConfigObject>, Error> {
    let path = key.kind.resource().object_path(&key.namespace, &key.name);
    match client.get::<SecretItem>(&path) {
        Ok(SecretItem(object)) => Ok(Some(object)),
        Err(err) if err.is_not_found() => Ok(None),
        Err(err) => Err(err),
    }
}

/// What to do about a read refused by RBAC.
fn hint(err: &Error) -> &'static str {
    if err.status().is_some_and(|s| s.code == 403) {
        "; wavelet needs `get` on secrets (see manifests/rbac*.yaml)"
    } else {
        ""
    }
}

/// The fetcher's work for the worker loop.
struct Reads<'a> {
    fetcher: &'a Fetcher,
    sink: &'a dyn FetchSink,
}

impl Work<ConfigKey> for Reads<'_> {
    fn process(&self, key: &ConfigKey) -> Result<Action, Error> {
        self.fetcher.fetch(key, self.sink).map(|()| Action::Done)
    }

    fn failed(&self, key: &ConfigKey, err: &Error, delay: std::time::Duration) {
        log::warn!(
            "{key}: cannot read its data, retrying in {delay:?}: {err}{}",
            hint(err)
        );
    }
}
