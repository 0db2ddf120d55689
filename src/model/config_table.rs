//! The cache's table of ConfigMaps, Secrets and SecretProviderClasses: each entry filed
//! under the key it carries itself ([`Keyed`]), so a slot of the table is one pointer. A
//! map from key to entry held a second copy of the key's 40 bytes in every slot, and a
//! hash table keeps up to half its slots empty: at 9,000 objects the table was 784 KiB,
//! one pointer a slot makes it 144 KiB.

use std::borrow::Borrow;
use std::collections::HashSet;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use crate::objects::ConfigKey;

/// An entry that carries the key it is filed under.
pub(crate) trait Keyed {
    fn key(&self) -> &ConfigKey;
}

/// Entries by the key each carries.
pub(crate) struct ConfigTable<E>(HashSet<Filed<E>>);

/// An entry, compared and hashed as its key.
struct Filed<E>(Arc<E>);

impl<E: Keyed> PartialEq for Filed<E> {
    fn eq(&self, other: &Filed<E>) -> bool {
        self.0.key() == other.0.key()
    }
}

impl<E: Keyed> Eq for Filed<E> {}

/// As its key, which is what [`Borrow`] requires.
impl<E: Keyed> Hash for Filed<E> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.key().hash(state);
    }
}

impl<E: Keyed> Borrow<ConfigKey> for Filed<E> {
    fn borrow(&self) -> &ConfigKey {
        self.0.key()
    }
}

impl<E> Default for ConfigTable<E> {
    fn default() -> Self {
        ConfigTable(HashSet::new())
    }
}

impl<E: Keyed> ConfigTable<E> {
    pub(crate) fn get(&self, key: &ConfigKey) -> Option<&Arc<E>> {
        self.0.get(key).map(|filed| &filed.0)
    }

    pub(crate) fn contains_key(&self, key: &ConfigKey) -> bool {
        self.0.contains(key)
    }

    /// Files `entry` under its key, in place of the entry there was (key included).
    pub(crate) fn insert(&mut self, entry: Arc<E>) {
        self.0.replace(Filed(entry));
    }

    pub(crate) fn remove(&mut self, key: &ConfigKey) -> Option<Arc<E>> {
        self.0.take(key).map(|filed| filed.0)
    }

    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    pub(crate) fn entries(&self) -> impl Iterator<Item = &Arc<E>> {
        self.0.iter().map(|filed| &filed.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::ConfigKind;

    /// An entry as the cache's are: its key, and something that changes.
    struct Entry(ConfigKey, &'static str);

    impl Keyed for Entry {
        fn key(&self) -> &ConfigKey {
            &self.0
        }
    }

    fn key(name: &str) -> ConfigKey {
        ConfigKey::new(ConfigKind::ConfigMap, "ns", name)
    }

    fn entry(name: &str, version: &'static str) -> Arc<Entry> {
        Arc::new(Entry(key(name), version))
    }

    #[test]
    fn entries_are_found_replaced_and_removed_by_the_key_they_carry() {
        assert_eq!(
            std::mem::size_of::<Filed<Entry>>(),
            8,
            "a slot is one pointer"
        );
        let mut table = ConfigTable::default();
        table.insert(entry("a", "1"));
        table.insert(entry("b", "1"));
        table.insert(entry("a", "2"));
        assert_eq!(table.len(), 2);
        assert!(table.contains_key(&key("a")));
        assert_eq!(table.get(&key("a")).unwrap().1, "2");
        let other_kind = ConfigKey::new(ConfigKind::Secret, "ns", "a");
        assert!(table.get(&other_kind).is_none());
        let removed = table.remove(&key("a")).unwrap();
        assert_eq!(removed.key(), &key("a"));
        assert!(table.get(&key("a")).is_none());
        let left: Vec<&ConfigKey> = table.entries().map(|e| e.key()).collect();
        assert_eq!(left, vec![&key("b")]);
    }
}
