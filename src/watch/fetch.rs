//! Reading the data of the Secrets that matter.
//!
//! Secrets are watched as metadata only: most of a cluster's Secrets are things nothing
//! references (Helm release records of hundreds of KiB, service account tokens, TLS
//! certificates), and reading them whole would cost memory and CPU in proportion to their
//! size. The Secrets that matter, those an opted-in workload references or that carry a
//! delete-mode selector, are read here with one GET each, digested as the body streams in
//! (the value itself is never kept), when first needed and after each new version. The
//! others are not even kept by the cache, so a Secret that becomes referenced is read
//! whether or not it is cached; one that does not exist is recorded as absent. When a
//! reload list's pattern starts to count Secrets by name in a namespace, that namespace's
//! Secrets are listed (as metadata) once, since any of them may match.
//!
//! At start the reads come all at once (one per Secret a workload uses: a thousand GETs
//! are 50 s at the default request budget), so the initial sync reads them in bulk instead
//! ([`Fetcher::read_in_bulk`]): paged LISTs of whole Secrets, each one digested as it
//! streams in and dropped at once unless something uses it (its values are never held,
//! as with a GET). Helm's release records, the largest Secrets of most clusters and never
//! mounted, are left out by the field selector `type!=helm.sh/release.v1`; a Secret in use
//! that the LISTs did not return (one of that type, or one that does not exist) is read
//! on its own afterwards, as before.
//!
//! Under `--resource-label-selector` every read carries the selector, as the watch does, so
//! the API server filters them alike: a Secret outside the selector reads as absent,
//! and a listing does not return it (see [`Fetcher::new`]).

use std::fmt;
use std::sync::Arc;

use crate::client::{Client, Shape};
use crate::error::{Error, Status};
use crate::objects::compact::ResourceVersion;
use crate::objects::{ConfigKey, ConfigKind, ConfigObject, Resource, SecretItem};
use crate::selector::percent_encode_query_value;
use crate::watch::queue::{Backoff, Priority, WorkQueue};
use crate::watch::scope::NamespaceFilter;
use crate::watch::source::ApiSource;
use crate::watch::worker::{run_worker, Action, Work};

/// The Secrets a bulk read leaves out: Helm's release records (hundreds of KiB each, and
/// never mounted by a workload).
pub const NOT_HELM_RELEASES: &str = "type!=helm.sh/release.v1";

/// Where a bulk read lists, as the watches do.
#[derive(Debug, Clone, Default)]
pub struct BulkScope {
    /// Each namespace listed on its own; `None` lists all namespaces at once.
    pub namespaces: Vec<Option<String>>,
    /// Of a listing of all namespaces, only these are kept (many `--namespaces`).
    pub keep: Option<std::sync::Arc<NamespaceFilter>>,
    /// A field selector the API server filters with too (`--namespaces-to-ignore`).
    pub fields: Option<String>,
}

/// What a bulk read did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BulkRead {
    /// Secrets listed, used or not.
    pub listed: usize,
    /// Secrets in use whose data it stored.
    pub read: usize,
}

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

    /// Reads the data of every Secret `sink` needs with paged LISTs of whole Secrets over
    /// `scope` (Helm release records left out), handing each one in use to `sink` and
    /// dropping the others as they stream in. The reads asked for meanwhile stay queued:
    /// those the LISTs answered find nothing left to do, the others are read one by one.
    pub fn read_in_bulk(&self, scope: &BulkScope, sink: &dyn FetchSink) -> Result<BulkRead, Error> {
        let fields = match &scope.fields {
            Some(fields) => format!("{NOT_HELM_RELEASES},{fields}"),
            None => NOT_HELM_RELEASES.to_string(),
        };
        let mut done = BulkRead::default();
        for namespace in &scope.namespaces {
            ApiSource::new(
                self.client.clone(),
                Resource::secrets(),
                namespace.clone(),
                Shape::Whole,
            )
            .filtered(self.label_selector.as_deref(), Some(&fields))
            .list_each(&mut |SecretItem(object)| {
                done.listed += 1;
                let namespace = &object.metadata.namespace;
                if scope
                    .keep
                    .as_ref()
                    .is_some_and(|keep| !keep.keeps_namespace(namespace))
                {
                    return;
                }
                let key = ConfigKey::new(ConfigKind::Secret, namespace, &object.metadata.name);
                if let Need::Read { cached } = sink.need(&key) {
                    done.read += 1;
                    sink.fetched(&key, cached.as_ref(), object);
                }
            })?;
        }
        Ok(done)
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
