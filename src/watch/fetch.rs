//! Reading the data of the Secrets that the watches do not bring.
//!
//! Secrets are watched in two parts (controller: `SecretPart`). Helm's release records
//! (`type: helm.sh/release.v1`), the largest Secrets of most clusters (hundreds of KiB each)
//! and never mounted, are watched as metadata only, and only once one is found in use (it
//! is read here, and the read says its type). Every other Secret is watched whole,
//! each value digested as the body streams in and never kept, and a Secret nothing uses
//! (no reference, no reload-list pattern matching its name, no delete-mode selector) is not
//! even kept by the cache. So a change of a Secret in use arrives with its data: no read
//! stands between the change and the rollout (a GET cost 0.9 ms of the 1.4 ms from a
//! change on the watch to the rollout's PATCH on the test server; see BENCHMARKS.md).
//!
//! What is read here, one GET each: a Secret that becomes used after its watch dropped it,
//! a Helm release record something uses (after each new version its watch announces), and
//! a Secret in use that no list returned (one that does not exist is recorded as absent).
//! When a reload list's pattern starts to count Secrets by name in a namespace, that
//! namespace's Secrets are listed (as metadata) once, since any of them may match.
//!
//! Under `--resource-label-selector` every read carries the selector, as the watch does, so
//! the API server filters them alike: a Secret outside the selector reads as absent,
//! and a listing does not return it (see [`Fetcher::new`]).

use std::fmt;
use std::sync::Arc;

use crate::client::{Client, Shape};
use crate::error::{Error, Status};
use crate::objects::compact::ResourceVersion;
use crate::objects::{ConfigKey, ConfigObject, Resource, SecretItem};
use crate::selector::percent_encode_query_value;
use crate::watch::queue::{Backoff, Priority, WorkQueue};
use crate::watch::source::ApiSource;
use crate::watch::worker::{run_worker, Action, Work};

/// The Secrets watched whole: all but Helm's release records (hundreds of KiB each, and
/// never mounted by a workload).
pub const NOT_HELM_RELEASES: &str = "type!=helm.sh/release.v1";

/// Helm's release records, watched as metadata.
pub const HELM_RELEASES: &str = "type=helm.sh/release.v1";

/// Retries of a failed read: 0.5 s, doubling to at most a minute.
const BACKOFF: Backoff = Backoff {
    initial: std::time::Duration::from_millis(500),
    max: std::time::Duration::from_secs(60),
};

/// Whether a Secret asked for is to be read, as the sink judges it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Need {
    /// No read: its data is current, it is known not to exist, or nothing needs it any more.
    Nothing,
    /// Read it. `cached`: the resourceVersion the sink holds (`None`: not held), handed
    /// back with the object so that a newer version seen meanwhile is not overwritten.
    Read { cached: Option<ResourceVersion> },
}

/// What decides which Secrets are read, and what a read Secret is handed to.
pub trait FetchSink: Send + Sync {
    /// Whether `key` is to be read now.
    fn need(&self, key: &ConfigKey) -> Need;
    /// The Secret as read, asked for when the cache held `asked_at` (`None`: not cached).
    fn fetched(&self, key: &ConfigKey, asked_at: Option<&ResourceVersion>, object: ConfigObject);
    /// The Secret does not exist.
    fn absent(&self, key: &ConfigKey);
    /// One Secret's metadata from the listing of a namespace.
    fn listed(&self, object: ConfigObject);
    /// Every Secret of `namespace` was handed to [`FetchSink::listed`].
    fn namespace_listed(&self, namespace: &str);
}

/// One read.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Read {
    /// The data of one Secret.
    Secret(ConfigKey),
    /// The metadata of every Secret of a namespace.
    Namespace(Arc<str>),
}

impl fmt::Display for Read {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Read::Secret(key) => key.fmt(f),
            Read::Namespace(namespace) => write!(f, "the secrets of namespace {namespace}"),
        }
    }
}

/// The queue of Secrets to read, and the threads' loop.
pub struct Fetcher {
    queue: WorkQueue<Read>,
    client: Client,
    /// `--resource-label-selector` (query form), sent with every read as with the watch.
    label_selector: Option<String>,
}

impl Fetcher {
    /// A failed read is retried with backoff, never later than `resync` after the last try.
    /// With `label_selector` (`--resource-label-selector`), a Secret is read by a LIST of
    /// its name and the selector rather than a GET, so that one outside the selector is
    /// exactly what the filtered watch makes it: absent. Reading it whole would cache it
    /// as present, the next relist would find it gone (a rollout), and the next restart
    /// would read it back (a rollout back).
    pub fn new(
        client: Client,
        resync: std::time::Duration,
        label_selector: Option<String>,
    ) -> Fetcher {
        Fetcher {
            queue: WorkQueue::new(BACKOFF.capped_at(resync)),
            client,
            label_selector,
        }
    }

    /// Asks for the data of `key` (once, however often asked; asked again while it is
    /// being read, it is read again afterwards): urgent when a new version was seen,
    /// background for the first look at a workload.
    pub fn request(&self, key: ConfigKey, priority: Priority) {
        self.queue.add_as(Read::Secret(key), priority);
    }

    /// Asks for the metadata of every Secret of `namespace` (once, however often asked).
    pub fn request_namespace(&self, namespace: Arc<str>, priority: Priority) {
        self.queue.add_as(Read::Namespace(namespace), priority);
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
    /// if `sink` says it is needed, hand it to `sink`.
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
        let Need::Read { cached } = sink.need(key) else {
            return Ok(());
        };
        let read = match &self.label_selector {
            None => read_secret(&self.client, key, cached.as_ref())?,
            Some(labels) => read_secret_selected(&self.client, key, labels)?,
        };
        match read {
            Some(object) => {
                log::debug!(
                    "{key}: data read at resourceVersion {}",
                    object.metadata.resource_version
                );
                sink.fetched(key, cached.as_ref(), object);
            }
            None => {
                log::debug!("{key}: read: it does not exist or is outside the selector");
                sink.absent(key);
            }
        }
        Ok(())
    }

    fn list_namespace(&self, namespace: &str, sink: &dyn FetchSink) -> Result<(), Error> {
        ApiSource::new(
            self.client.clone(),
            Resource::secrets(),
            Some(namespace.to_string()),
            Shape::Metadata,
        )
        .filtered(self.label_selector.as_deref(), None)
        .list_each(&mut |SecretItem(object)| sink.listed(object))?;
        sink.namespace_listed(namespace);
        Ok(())
    }
}

/// Reads one Secret whole, digested as it is parsed; `None` when it does not exist.
///
/// `seen`: the version the watch announced, when one is held. The GET then asks for that
/// version or a newer one (`?resourceVersion=N`, "not older than"), which the API server
/// answers from its watch cache instead of a quorum read from etcd (half the time on the
/// test server: 0.4 ms against 0.8, BENCHMARKS.md), and which can never be older than what
/// the watch said. A server whose cache has not reached N within 3 s (a replica other than
/// the one that served the watch) answers 504; the read is then made again as a quorum
/// read, which is always current.
pub fn read_secret(
    client: &Client,
    key: &ConfigKey,
    seen: Option<&ResourceVersion>,
) -> Result<Option<ConfigObject>, Error> {
    let path = key.kind.resource().object_path(&key.namespace, &key.name);
    let read = |path: &str| match client.get::<SecretItem>(path) {
        Ok(SecretItem(object)) => Ok(Some(object)),
        Err(err) if err.is_not_found() => Ok(None),
        Err(err) => Err(err),
    };
    let Some(seen) = seen else {
        return read(&path);
    };
    match read(&format!(
        "{path}?resourceVersion={}",
        percent_encode_query_value(&seen.to_string())
    )) {
        Err(err)
            if err
                .status()
                .is_some_and(Status::is_resource_version_too_large) =>
        {
            log::debug!("{key}: the API server has not reached resourceVersion {seen}: read again from etcd");
            read(&path)
        }
        answer => answer,
    }
}

/// Reads one Secret whole if it matches `labels` (a label selector): one LIST of its name
/// and the selector, which the API server filters as it filters the watch. `None` when it
/// does not exist or is outside the selector.
fn read_secret_selected(
    client: &Client,
    key: &ConfigKey,
    labels: &str,
) -> Result<Option<ConfigObject>, Error> {
    let mut found = None;
    ApiSource::new(
        client.clone(),
        key.kind.resource(),
        Some(key.namespace.to_string()),
        Shape::Whole,
    )
    .filtered(Some(labels), Some(&format!("metadata.name={}", key.name)))
    .list_each(&mut |SecretItem(object)| found = Some(object))?;
    Ok(found)
}

/// What to do about a read refused by RBAC, sent with `verb`.
fn hint(err: &Error, verb: &str) -> String {
    if err.status().is_some_and(|s| s.code == 403) {
        format!("; wavelet needs `{verb}` on secrets (see manifests/rbac*.yaml)")
    } else {
        String::new()
    }
}

/// The fetcher's work for the worker loop.
struct Reads<'a> {
    fetcher: &'a Fetcher,
    sink: &'a dyn FetchSink,
}

impl Work<Read> for Reads<'_> {
    fn process(&self, read: &Read) -> Result<Action, Error> {
        match read {
            Read::Secret(key) => self.fetcher.fetch(key, self.sink),
            Read::Namespace(namespace) => self.fetcher.list_namespace(namespace, self.sink),
        }
        .map(|()| Action::Done)
    }

    fn failed(&self, read: &Read, err: &Error, delay: std::time::Duration) {
        // Under --resource-label-selector a Secret is read by a LIST too.
        let (what, verb) = match read {
            Read::Secret(_) if self.fetcher.label_selector.is_none() => ("its data", "get"),
            Read::Secret(_) => ("its data", "list"),
            Read::Namespace(_) => ("them", "list"),
        };
        log::warn!(
            "{read}: cannot read {what}, retrying in {delay:?}: {err}{}",
            hint(err, verb)
        );
    }
}
