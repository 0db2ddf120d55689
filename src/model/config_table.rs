//! The cache's table of ConfigMaps, Secrets and SecretProviderClasses: each entry filed
//! under the key it carries itself ([`ConfigEntry::key`]), so a slot of the table is one
//! pointer. A map from key to entry held a second copy of the key's 40 bytes in every slot,
//! and a hash table keeps up to half its slots empty: at 9,000 objects the table was
//! 784 KiB, one pointer a slot makes it 144 KiB.

use std::borrow::Borrow;
use std::collections::HashSet;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use crate::model::cache::ConfigEntry;
use crate::objects::ConfigKey;

/// Cached objects by key.
#[derive(Default)]
pub(crate) struct ConfigTable(HashSet<Filed>);

/// An entry, compared and hashed as its key.
#[derive(Clone)]
struct Filed(Arc<ConfigEntry>);

impl PartialEq for Filed {
    fn eq(&self, other: &Filed) -> bool {
        self.0.key() == other.0.key()
    }
}

impl Eq for Filed {}

/// As its key, which is what [`Borrow`] requires.
impl Hash for Filed {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.key().hash(state);
    }
}

impl Borrow<ConfigKey> for Filed {
    fn borrow(&self) -> &ConfigKey {
        self.0.key()
    }
}

impl ConfigTable {
    pub(crate) fn get(&self, key: &ConfigKey) -> Option<&Arc<ConfigEntry>> {
        self.0.get(key).map(|filed| &filed.0)
    }

    pub(crate) fn contains_key(&self, key: &ConfigKey) -> bool {
        self.0.contains(key)
    }

    /// Files `entry` under its key, in place of the entry there was (key included).
    pub(crate) fn insert(&mut self, entry: Arc<ConfigEntry>) {
        self.0.replace(Filed(entry));
    }

    pub(crate) fn remove(&mut self, key: &ConfigKey) -> Option<Arc<ConfigEntry>> {
        self.0.take(key).map(|filed| filed.0)
    }

    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    pub(crate) fn entries(&self) -> impl Iterator<Item = &Arc<ConfigEntry>> {
        self.0.iter().map(|filed| &filed.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::{ConfigKind, ObjectMeta};

    fn entry(name: &str, version: &str) -> Arc<ConfigEntry> {
        let metadata = ObjectMeta {
            namespace: "ns".into(),
            name: name.into(),
            uid: format!("uid-{name}"),
            resource_version: version.into(),
            ..ObjectMeta::default()
        };
        let key = ConfigKey::new(ConfigKind::ConfigMap, "ns", name);
        Arc::new(ConfigEntry::new(key, &metadata, None))
    }

    fn key(name: &str) -> ConfigKey {
        ConfigKey::new(ConfigKind::ConfigMap, "ns", name)
    }

    #[test]
    fn entries_are_found_replaced_and_removed_by_the_key_they_carry() {
        assert_eq!(std::mem::size_of::<Filed>(), 8, "a slot is one pointer");
        let mut table = ConfigTable::default();
        table.insert(entry("a", "1"));
        table.insert(entry("b", "1"));
        table.insert(entry("a", "2"));
        assert_eq!(table.len(), 2);
        assert!(table.contains_key(&key("a")));
        assert_eq!(
            table.get(&key("a")).unwrap().resource_version.to_string(),
            "2"
        );
        let other_kind = ConfigKey::new(ConfigKind::Secret, "ns", "a");
        assert!(table.get(&other_kind).is_none());
        let removed = table.remove(&key("a")).unwrap();
        assert_eq!(removed.key(), &key("a"));
        assert!(table.get(&key("a")).is_none());
        let left: Vec<&ConfigKey> = table.entries().map(|e| e.key()).collect();
        assert_eq!(left, vec![&key("b")]);
    }
}
