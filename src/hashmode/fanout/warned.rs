//! The annotation problems already told (a log line and a Warning Event each), by what
//! they are about: a workload or a ConfigMap/Secret. A problem is told once while it
//! stands. When its owner's annotations read again, or the owner is gone, the owner's
//! entry is dropped. So the record does not grow with churn (namespaces created and
//! deleted with a bad annotation), and a problem that comes back is told again.

use std::collections::HashMap;
use std::hash::Hash;

pub struct Warned<K>(HashMap<K, Vec<String>>);

impl<K> Default for Warned<K> {
    fn default() -> Self {
        Warned(HashMap::new())
    }
}

impl<K: Eq + Hash + Clone> Warned<K> {
    /// `problems` are what stands now for `owner`: returns those not told before, which the
    /// caller tells. A problem gone from the list is forgotten.
    pub fn stand(&mut self, owner: &K, problems: Vec<String>) -> Vec<String> {
        if problems.is_empty() {
            if !self.0.is_empty() {
                self.0.remove(owner);
            }
            return Vec::new();
        }
        let told = self.0.remove(owner).unwrap_or_default();
        let new = problems
            .iter()
            .filter(|p| !told.contains(p))
            .cloned()
            .collect();
        self.0.insert(owner.clone(), problems);
        new
    }

    /// `owner` is gone (deleted, opted out): what was told of it goes too.
    pub fn forget(&mut self, owner: &K) {
        if !self.0.is_empty() {
            self.0.remove(owner);
        }
    }

    /// Keeps the owners for which `present` holds (a periodic pass over the cache).
    pub fn retain(&mut self, present: impl Fn(&K) -> bool) {
        self.0.retain(|owner, _| present(owner));
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.0.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_problem_is_told_once_while_it_stands() {
        let mut warned = Warned::default();
        assert_eq!(warned.stand(&"web", texts(&["bad window"])), ["bad window"]);
        assert!(warned.stand(&"web", texts(&["bad window"])).is_empty());
        assert_eq!(
            warned.stand(&"web", texts(&["bad window", "bad fan-out"])),
            ["bad fan-out"]
        );
    }

    #[test]
    fn a_problem_fixed_then_back_is_told_again() {
        let mut warned = Warned::default();
        warned.stand(&"web", texts(&["bad window"]));
        assert!(warned.stand(&"web", Vec::new()).is_empty());
        assert_eq!(
            warned.len(),
            0,
            "an owner whose annotations read is dropped"
        );
        assert_eq!(warned.stand(&"web", texts(&["bad window"])), ["bad window"]);
        // One of two fixed: it alone is forgotten.
        warned.stand(&"web", texts(&["bad window", "bad fan-out"]));
        warned.stand(&"web", texts(&["bad fan-out"]));
        assert_eq!(warned.stand(&"web", texts(&["bad window"])), ["bad window"]);
    }

    #[test]
    fn owners_gone_are_dropped_so_churn_does_not_grow_it() {
        let mut warned = Warned::default();
        for n in 0..1_000 {
            let owner = format!("ns-{n}/web");
            warned.stand(&owner, texts(&["bad window"]));
            warned.forget(&owner);
        }
        assert_eq!(warned.len(), 0);
        warned.stand(&"a".to_string(), texts(&["x"]));
        warned.stand(&"b".to_string(), texts(&["x"]));
        warned.retain(|owner| owner == "b");
        assert_eq!(warned.len(), 1);
        // Each owner is told on its own.
        assert_eq!(warned.stand(&"a".to_string(), texts(&["x"])), ["x"]);
    }
}
