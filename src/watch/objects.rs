//! The objects the engine watches: how each gives its resourceVersion (and its namespace)
//! to the watcher, and a ConfigMap or Secret as its watcher decodes it (text values vs
//! base64 values).

use crate::objects::{
    ConfigMapItem, ConfigObject, NamespaceItem, PodStatusItem, SecretItem, WorkloadObject,
};
use crate::watch::scope::Namespaced;
use crate::watch::watcher;

impl watcher::Object for NamespaceItem {
    fn resource_version(&self) -> &str {
        &self.metadata.resource_version
    }
}

/// A ConfigMap or Secret as a watcher decodes it (text values vs base64 values).
pub trait ConfigItem: watcher::Object {
    fn into_object(self) -> ConfigObject;
}

impl watcher::Object for ConfigMapItem {
    fn resource_version(&self) -> &str {
        &self.0.metadata.resource_version
    }
}

impl watcher::Object for SecretItem {
    fn resource_version(&self) -> &str {
        &self.0.metadata.resource_version
    }
}

impl ConfigItem for ConfigMapItem {
    fn into_object(self) -> ConfigObject {
        self.0
    }
}

impl ConfigItem for SecretItem {
    fn into_object(self) -> ConfigObject {
        self.0
    }
}

impl watcher::Object for WorkloadObject {
    fn resource_version(&self) -> &str {
        &self.metadata.resource_version
    }
}

impl Namespaced for ConfigMapItem {
    fn namespace(&self) -> &str {
        &self.0.metadata.namespace
    }
}

impl Namespaced for SecretItem {
    fn namespace(&self) -> &str {
        &self.0.metadata.namespace
    }
}

impl Namespaced for WorkloadObject {
    fn namespace(&self) -> &str {
        &self.metadata.namespace
    }
}

impl watcher::Object for PodStatusItem {
    fn resource_version(&self) -> &str {
        &self.metadata.resource_version
    }
}

impl Namespaced for PodStatusItem {
    fn namespace(&self) -> &str {
        &self.metadata.namespace
    }
}
