//! Which namespaces wavelet acts in under `--namespace-selector` (Reloader's flag): the
//! names the Namespace watch reports. That watch sends the selector to the API server,
//! which reports a namespace that starts to match as added and one that stops matching
//! as deleted, so a namespace labelled later is picked up and one unlabelled is dropped.
//! Without the flag every namespace is in scope. And [`NamespaceFilter`]: the events of a
//! cluster-wide watch that stand for many `--namespaces` at once, kept to those.

use std::collections::HashSet;
use std::sync::RwLock;

use crate::watch::watcher::Event;

/// An object that lives in a namespace.
pub trait Namespaced {
    fn namespace(&self) -> &str;
}

/// Keeps the events of a cluster-wide watch about objects in these namespaces (a field
/// selector takes one namespace only, so the API server cannot filter a set).
#[derive(Debug, Clone)]
pub struct NamespaceFilter {
    names: HashSet<Box<str>>,
}

impl NamespaceFilter {
    pub fn new<'a>(names: impl IntoIterator<Item = &'a str>) -> NamespaceFilter {
        NamespaceFilter {
            names: names.into_iter().map(Box::from).collect(),
        }
    }

    /// Whether the sink sees `event`: an object in one of the namespaces, or a list's
    /// start or end.
    pub fn keeps<T: Namespaced>(&self, event: &Event<T>) -> bool {
        match event {
            Event::Apply(o) | Event::Delete(o) | Event::InitApply(o) => {
                self.names.contains(o.namespace())
            }
            Event::InitUnchanged(o) => self.names.contains(o.namespace.as_str()),
            Event::InitStart | Event::InitDone => true,
        }
    }
}

/// The namespaces in scope; one writer (the Namespace watch), many readers.
#[derive(Debug, Default)]
pub struct NamespaceScope {
    /// `None`: every namespace (no `--namespace-selector`).
    selected: RwLock<Option<HashSet<Box<str>>>>,
}

impl NamespaceScope {
    /// Every namespace is in scope.
    pub fn everywhere() -> NamespaceScope {
        NamespaceScope::default()
    }

    /// Only the namespaces the Namespace watch reports; none until its first list.
    pub fn selected() -> NamespaceScope {
        NamespaceScope {
            selected: RwLock::new(Some(HashSet::new())),
        }
    }

    pub fn contains(&self, namespace: &str) -> bool {
        match &*self.selected.read().unwrap() {
            None => true,
            Some(names) => names.contains(namespace),
        }
    }

    /// Adds a namespace; true when it was not in scope before.
    pub fn insert(&self, namespace: &str) -> bool {
        match &mut *self.selected.write().unwrap() {
            None => false,
            Some(names) => names.insert(namespace.into()),
        }
    }

    /// Removes a namespace; true when it was in scope.
    pub fn remove(&self, namespace: &str) -> bool {
        match &mut *self.selected.write().unwrap() {
            None => false,
            Some(names) => names.remove(namespace),
        }
    }

    /// Replaces the scope with what a (re)list returned; returns the namespaces that
    /// entered the scope.
    pub fn replace(&self, listed: HashSet<Box<str>>) -> Vec<Box<str>> {
        match &mut *self.selected.write().unwrap() {
            None => Vec::new(),
            Some(names) => {
                let entered = listed.difference(names).cloned().collect();
                *names = listed;
                entered
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct In(&'static str);

    impl Namespaced for In {
        fn namespace(&self) -> &str {
            self.0
        }
    }

    #[test]
    fn a_namespace_filter_keeps_objects_in_its_namespaces_and_every_list_boundary() {
        let filter = NamespaceFilter::new(["a", "b"]);
        assert!(filter.keeps(&Event::Apply(In("a"))));
        assert!(filter.keeps(&Event::InitApply(In("b"))));
        assert!(!filter.keeps(&Event::Apply(In("c"))));
        assert!(!filter.keeps(&Event::Delete(In("c"))));
        assert!(!filter.keeps(&Event::InitApply(In("c"))));
        assert!(filter.keeps(&Event::<In>::InitStart));
        assert!(filter.keeps(&Event::<In>::InitDone));
    }

    #[test]
    fn without_a_selector_every_namespace_is_in_scope() {
        let scope = NamespaceScope::everywhere();
        assert!(scope.contains("anything"));
        assert!(!scope.insert("a"));
        assert!(scope.replace(HashSet::new()).is_empty());
        assert!(scope.contains("a"));
    }

    #[test]
    fn with_a_selector_only_reported_namespaces_are_in_scope() {
        let scope = NamespaceScope::selected();
        assert!(!scope.contains("a"));
        assert!(scope.insert("a"));
        assert!(!scope.insert("a"));
        assert!(scope.contains("a"));
        assert!(scope.remove("a"));
        assert!(!scope.contains("a"));
    }

    #[test]
    fn a_relist_reports_the_namespaces_that_entered_the_scope() {
        let scope = NamespaceScope::selected();
        scope.insert("a");
        let listed: HashSet<Box<str>> = ["a", "b"].into_iter().map(Box::from).collect();
        assert_eq!(scope.replace(listed), vec![Box::from("b")]);
        let only_b: HashSet<Box<str>> = [Box::from("b")].into_iter().collect();
        assert!(scope.replace(only_b).is_empty());
        assert!(!scope.contains("a"));
    }
}
