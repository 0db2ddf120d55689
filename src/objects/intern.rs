//! One shared copy of the strings many cached things hold the same: namespace names (every
//! cached key holds its namespace, and a cluster has few namespaces but many objects in
//! each), and the head of a recorded basis (every workload hashed under the same settings
//! records the same one: the model's `recorded_basis`).

use std::collections::HashSet;
use std::sync::{Arc, Mutex, OnceLock};

/// Interned strings, and how many were added since unused ones were last dropped.
#[derive(Default)]
struct Table {
    names: HashSet<Arc<str>>,
    added: usize,
}

/// Drop strings nothing holds any more after this many additions, so a cluster that
/// keeps creating and deleting namespaces (CI clusters do) does not grow the table forever.
const SWEEP_EVERY: usize = 256;

fn table() -> &'static Mutex<Table> {
    static TABLE: OnceLock<Mutex<Table>> = OnceLock::new();
    TABLE.get_or_init(Mutex::default)
}

/// The shared copy of `name`.
pub fn shared(name: &str) -> Arc<str> {
    let mut table = table().lock().unwrap_or_else(|e| e.into_inner());
    if let Some(found) = table.names.get(name) {
        return Arc::clone(found);
    }
    table.added += 1;
    if table.added >= SWEEP_EVERY {
        table.added = 0;
        // Only the table holds these.
        table.names.retain(|n| Arc::strong_count(n) > 1);
    }
    let shared: Arc<str> = Arc::from(name);
    table.names.insert(Arc::clone(&shared));
    shared
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_namespace_is_one_shared_string() {
        let a = shared("intern-test-shared");
        let b = shared("intern-test-shared");
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(&*a, "intern-test-shared");
    }

    #[test]
    fn namespaces_no_key_holds_are_swept() {
        for i in 0..SWEEP_EVERY * 2 {
            let _dropped_at_once = shared(&format!("intern-test-gone-{i}"));
        }
        let table = table().lock().unwrap();
        let gone = table
            .names
            .iter()
            .filter(|n| n.starts_with("intern-test-gone-"))
            .count();
        assert!(gone <= SWEEP_EVERY, "{gone} unused namespaces kept");
    }
}
