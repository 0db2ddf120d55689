//! The API server as a watcher's source: one resource (in one namespace or all, whole or
//! as metadata, optionally filtered by selectors) listed page by page and watched; and
//! `list_each`, the same paginated LIST for the one-shot subcommands and the Secret reads.

use std::time::Duration;

use serde::de::DeserializeOwned;

use crate::client::{Client, ListMeta, Shape, PAGE_SIZE};
use crate::error::Error;
use crate::objects::{ConfigKey, ConfigKind, ConfigMapItem, ConfigObject, Resource, SecretItem};
use crate::selector::percent_encode_query_value;
use crate::watch::watcher::{self, LineStream, ObjectRef, Page, Source};

/// Lists every object of a resource, page by page, handing each to `on_item` as it is
/// decoded (for the one-shot subcommands).
pub fn list_each<T: DeserializeOwned>(
    client: &Client,
    resource: &Resource,
    namespace: Option<&str>,
    shape: Shape,
    on_item: &mut dyn FnMut(T),
) -> Result<(), Error> {
    ApiSource::new(
        client.clone(),
        resource.clone(),
        namespace.map(String::from),
        shape,
    )
    .list_each(on_item)
}

/// A ConfigMap or Secret as the API server holds it now, from etcd (a quorum read), read as
/// [`ApiSource`] reads one object; `None` when it does not exist. What a mode confirms its
/// cache with before acting on a difference another writer may have seen first.
pub fn read_config_now(client: &Client, key: &ConfigKey) -> Result<Option<ConfigObject>, Error> {
    let source = ApiSource::new(
        client.clone(),
        key.kind.resource(),
        Some(key.namespace.to_string()),
        Shape::Whole,
    );
    match key.kind {
        ConfigKind::ConfigMap => Ok(source
            .read_by_name::<ConfigMapItem>(&key.namespace, &key.name)?
            .map(|ConfigMapItem(object)| object)),
        ConfigKind::Secret | ConfigKind::SecretProviderClass => Ok(source
            .read_by_name::<SecretItem>(&key.namespace, &key.name)?
            .map(|SecretItem(object)| object)),
    }
}

/// Lists and watches one resource on the API server.
pub struct ApiSource {
    client: Client,
    pub(crate) resource: Resource,
    namespace: Option<String>,
    /// Whole objects or only their metadata.
    shape: Shape,
    /// `&labelSelector=...&fieldSelector=...` for the LIST and the WATCH; may be empty.
    filter: String,
    /// The selectors as given, for the read of one object.
    labels: Option<String>,
    fields: Option<String>,
}

impl ApiSource {
    pub fn new(
        client: Client,
        resource: Resource,
        namespace: Option<String>,
        shape: Shape,
    ) -> ApiSource {
        ApiSource {
            client,
            resource,
            namespace,
            shape,
            filter: String::new(),
            labels: None,
            fields: None,
        }
    }

    /// Lists and watches only the objects matching these selectors (the API server
    /// filters; a watched object that stops matching is reported deleted).
    pub fn filtered(mut self, labels: Option<&str>, fields: Option<&str>) -> ApiSource {
        self.labels = labels.filter(|v| !v.is_empty()).map(String::from);
        self.fields = fields.filter(|v| !v.is_empty()).map(String::from);
        for (name, value) in [("labelSelector", labels), ("fieldSelector", fields)] {
            if let Some(value) = value.filter(|v| !v.is_empty()) {
                self.filter.push('&');
                self.filter.push_str(name);
                self.filter.push('=');
                self.filter.push_str(&percent_encode_query_value(value));
            }
        }
        self
    }

    /// Lists every object (matching the selectors), page by page, handing each to
    /// `on_item` as it is decoded.
    pub fn list_each<T: DeserializeOwned>(&self, on_item: &mut dyn FnMut(T)) -> Result<(), Error> {
        let mut token: Option<String> = None;
        loop {
            let page = self.list_page_each(token.as_deref(), on_item)?;
            match page.continue_token.filter(|t| !t.is_empty()) {
                Some(next) => token = Some(next),
                None => return Ok(()),
            }
        }
    }

    pub(crate) fn describe(&self) -> String {
        let shape = match self.shape {
            Shape::Whole => "",
            Shape::Metadata => " (metadata)",
        };
        match &self.namespace {
            Some(ns) => format!("{}{shape} in namespace {ns}", self.resource),
            None => format!("{}{shape} in all namespaces", self.resource),
        }
    }

    fn list_page<T: DeserializeOwned>(
        &self,
        continue_token: Option<&str>,
    ) -> Result<Page<T>, Error> {
        let mut items = Vec::new();
        let meta = self.list_page_each(continue_token, &mut |item: T| items.push(item))?;
        Ok(Page {
            items,
            resource_version: meta.resource_version,
            continue_token: meta.continue_token,
        })
    }

    /// One page of the LIST, each item handed to `on_item` as it is decoded.
    fn list_page_each<T: DeserializeOwned>(
        &self,
        continue_token: Option<&str>,
        on_item: &mut dyn FnMut(T),
    ) -> Result<ListMeta, Error> {
        let mut path = format!(
            "{}?limit={PAGE_SIZE}{}",
            self.resource.collection_path(self.namespace.as_deref()),
            self.filter
        );
        if let Some(token) = continue_token {
            path.push_str("&continue=");
            path.push_str(&percent_encode_query_value(token));
        }
        self.client.list(&path, self.shape, on_item)
    }

    /// One page of the LIST as metadata only (`PartialObjectMetadataList`, gzip like every
    /// request), each item reduced to its identity and version.
    fn list_metadata_page(&self, continue_token: Option<&str>) -> Result<Page<ObjectRef>, Error> {
        #[derive(serde::Deserialize)]
        struct Partial {
            #[serde(default)]
            metadata: ObjectRef,
        }
        let mut items = Vec::new();
        let mut path = format!(
            "{}?limit={PAGE_SIZE}{}",
            self.resource.collection_path(self.namespace.as_deref()),
            self.filter
        );
        if let Some(token) = continue_token {
            path.push_str("&continue=");
            path.push_str(&percent_encode_query_value(token));
        }
        let meta = self
            .client
            .list(&path, Shape::Metadata, &mut |item: Partial| {
                items.push(item.metadata)
            })?;
        Ok(Page {
            items,
            resource_version: meta.resource_version,
            continue_token: meta.continue_token,
        })
    }

    /// One object whole; `None` when it does not exist or is outside the selectors. Read by
    /// a LIST of its name (`fieldSelector=metadata.name=...`) with the selectors of the
    /// watch, rather than a GET: the API server filters it as it filters the watch, and
    /// RBAC needs only the `list` the watch needs already.
    fn get_one<T: DeserializeOwned>(&self, object: &ObjectRef) -> Result<Option<T>, Error> {
        self.read_by_name(&object.namespace, &object.name)
    }

    /// [`ApiSource::get_one`] by namespace (empty for a cluster-scoped object) and name.
    fn read_by_name<T: DeserializeOwned>(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<T>, Error> {
        let name = format!("metadata.name={name}");
        let fields = match &self.fields {
            Some(fields) => format!("{fields},{name}"),
            None => name,
        };
        let namespace = (!namespace.is_empty()).then_some(namespace);
        let mut found = None;
        ApiSource::new(
            self.client.clone(),
            self.resource.clone(),
            namespace.map(String::from),
            Shape::Whole,
        )
        .filtered(self.labels.as_deref(), Some(&fields))
        .list_each(&mut |item: T| found = Some(item))?;
        Ok(found)
    }

    /// A streaming list (§2.7): every object as `ADDED` from a consistent read, the
    /// bookmark annotated `k8s.io/initial-events-end`, then the watch.
    fn open_stream_list(&self, timeout: Duration) -> Result<Box<dyn LineStream>, Error> {
        let path = format!(
            "{}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds={}{}",
            self.resource.collection_path(self.namespace.as_deref()),
            timeout.as_secs().max(1),
            self.filter
        );
        Ok(Box::new(self.client.watch(&path, timeout, self.shape)?))
    }

    fn open_watch(
        &self,
        resource_version: &str,
        timeout: Duration,
    ) -> Result<Box<dyn LineStream>, Error> {
        let path = format!(
            "{}?watch=true&allowWatchBookmarks=true&resourceVersion={}&timeoutSeconds={}{}",
            self.resource.collection_path(self.namespace.as_deref()),
            percent_encode_query_value(resource_version),
            timeout.as_secs().max(1),
            self.filter
        );
        Ok(Box::new(self.client.watch(&path, timeout, self.shape)?))
    }
}

impl LineStream for crate::client::WatchStream {
    fn next_line(&mut self) -> Result<Option<Vec<u8>>, Error> {
        crate::client::WatchStream::next_line(self)
    }
}

impl<T: watcher::Object> Source<T> for ApiSource {
    fn list(&self, continue_token: Option<&str>) -> Result<Page<T>, Error> {
        self.list_page(continue_token)
    }
    fn list_metadata(&self, continue_token: Option<&str>) -> Result<Page<ObjectRef>, Error> {
        self.list_metadata_page(continue_token)
    }
    fn get(&self, object: &ObjectRef) -> Result<Option<T>, Error> {
        self.get_one(object)
    }
    fn stream_list(&self, timeout: Duration) -> Result<Box<dyn LineStream>, Error> {
        self.open_stream_list(timeout)
    }
    fn watch(
        &self,
        resource_version: &str,
        timeout: Duration,
    ) -> Result<Box<dyn LineStream>, Error> {
        self.open_watch(resource_version, timeout)
    }
}
