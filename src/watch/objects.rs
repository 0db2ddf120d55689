//! The objects the engine watches: how each gives its resourceVersion (and its namespace)
//! to the watcher, and a ConfigMap or Secret as its watcher decodes it (text values vs
//! base64 values).

use crate::objects::{
    ConfigMapItem, ConfigObject, NamespaceItem, ObjectMeta, OwnedItem, PodStatusItem, SecretItem,
    WorkloadObject,
};
use crate::watch::scope::Namespaced;
use crate::watch::watcher;

impl watcher::Object for NamespaceItem {
    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }
}

/// A ConfigMap or Secret as a watcher decodes it (text values vs base64 values).
pub trait ConfigItem: watcher::Object {
    fn into_object(self) -> ConfigObject;
}

impl watcher::Object for ConfigMapItem {
    fn metadata(&self) -> &ObjectMeta {
        &self.0.metadata
    }
}

impl watcher::Object for SecretItem {
    fn metadata(&self) -> &ObjectMeta {
        &self.0.metadata
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
    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
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
    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }
}

impl Namespaced for PodStatusItem {
    fn namespace(&self) -> &str {
        &self.metadata.namespace
    }
}

impl watcher::Object for OwnedItem {
    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }
}

impl Namespaced for OwnedItem {
    fn namespace(&self) -> &str {
        &self.metadata.namespace
    }
}
