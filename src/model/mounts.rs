//! What the Secrets Store CSI driver reports mounted: for each SecretProviderClass, the
//! objects each Pod mounted and a digest of each one's version (from the Pods'
//! SecretProviderClassPodStatuses; never the version text), and the versions that count.
//!
//! Pods of one class disagree while a rotation is under way (each remounts on its own
//! schedule), and a Pod that stopped running keeps reporting what it mounted last. What
//! counts is, per object, the version **most** of the Pods report; a tie goes to the
//! greater digest. That is the same whatever order the statuses arrived in, so a restart
//! computes the hash it wrote before; "the newest" would depend on that order, which a
//! relist does not keep. A rotation thus moves a class's version once, when half of its
//! Pods have remounted, and the Pods started by the rollout it causes only add to that
//! majority.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::objects::{ConfigKey, KeyDigest};

/// What one Pod mounted of a class: (object id, SHA-256 of its version), sorted by id.
/// Pods that mounted the same versions share one copy.
pub type Mounted = Arc<[KeyDigest]>;

/// The pod statuses of every class, by class.
#[derive(Debug, Default)]
pub struct Mounts {
    classes: HashMap<ConfigKey, ClassMounts>,
    statuses: usize,
}

/// The Pods that mounted one class, sorted by Pod name.
#[derive(Debug, Default)]
struct ClassMounts {
    pods: Vec<(Box<str>, Mounted)>,
}

/// The objects of a class as a set of Pods mounted them: the versions that count, and how
/// many of the Pods reported them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct View {
    /// Per object id, the version digest that counts; sorted by id.
    pub objects: Box<[KeyDigest]>,
    /// The Pods whose statuses were read.
    pub pods: usize,
}

impl Mounts {
    /// Records what `pod` mounted of `class` (`None`: its pod status is gone). Returns
    /// whether anything changed.
    pub fn set(&mut self, class: &ConfigKey, pod: &str, objects: Option<&[KeyDigest]>) -> bool {
        let Some(objects) = objects else {
            let Some(mounts) = self.classes.get_mut(class) else {
                return false;
            };
            let Ok(at) = mounts.find(pod) else {
                return false;
            };
            mounts.pods.remove(at);
            self.statuses -= 1;
            if mounts.pods.is_empty() {
                self.classes.remove(class);
            }
            return true;
        };
        let mounts = self.classes.entry(class.clone()).or_default();
        let at = mounts.find(pod);
        if let Ok(i) = at {
            if *mounts.pods[i].1 == *objects {
                return false;
            }
        }
        // Shared with a Pod that mounted the same versions, most often all of them.
        let shared = mounts
            .pods
            .iter()
            .find(|(_, m)| **m == *objects)
            .map(|(_, m)| Arc::clone(m))
            .unwrap_or_else(|| Arc::from(objects));
        match at {
            Ok(i) => mounts.pods[i].1 = shared,
            Err(i) => {
                mounts.pods.insert(i, (pod.into(), shared));
                self.statuses += 1;
            }
        }
        true
    }

    /// The versions that count of `class` for the Pods `selects` picks (see the module
    /// documentation); `None` when none of them has a pod status for it (nothing is
    /// mounted yet, or no Pod runs).
    pub fn view(&self, class: &ConfigKey, selects: impl Fn(&str) -> bool) -> Option<View> {
        let mounts = self.classes.get(class)?;
        let picked: Vec<&[KeyDigest]> = mounts
            .pods
            .iter()
            .filter(|(pod, _)| selects(pod))
            .map(|(_, m)| &**m)
            .collect();
        if picked.is_empty() {
            return None;
        }
        Some(View {
            objects: majority(&picked),
            pods: picked.len(),
        })
    }

    /// Pod statuses recorded, of every class.
    pub fn len(&self) -> usize {
        self.statuses
    }

    pub fn is_empty(&self) -> bool {
        self.statuses == 0
    }

    /// The (class, Pod) pairs recorded in one namespace or all that a relist did not
    /// return (`listed`): the pod statuses gone.
    pub fn not_listed(
        &self,
        namespace: Option<&str>,
        listed: &HashSet<(ConfigKey, Box<str>)>,
    ) -> Vec<(ConfigKey, Box<str>)> {
        let mut gone = Vec::new();
        for (class, mounts) in &self.classes {
            if namespace.is_some_and(|ns| *class.namespace != *ns) {
                continue;
            }
            for (pod, _) in &mounts.pods {
                let key = (class.clone(), pod.clone());
                if !listed.contains(&key) {
                    gone.push(key);
                }
            }
        }
        gone
    }
}

impl ClassMounts {
    fn find(&self, pod: &str) -> Result<usize, usize> {
        self.pods.binary_search_by(|(p, _)| (**p).cmp(pod))
    }
}

/// Per object id, the version digest most of `mounted` report; a tie goes to the greater
/// digest. An object counts when any of them reports it.
pub fn majority(mounted: &[&[KeyDigest]]) -> Box<[KeyDigest]> {
    // Most classes have a handful of objects and their Pods agree: small vectors.
    let mut tally: Vec<(&str, Vec<(&crate::objects::Digest, usize)>)> = Vec::new();
    for objects in mounted {
        for (id, digest) in objects.iter() {
            let versions = match tally.iter_mut().find(|(i, _)| *i == &**id) {
                Some((_, versions)) => versions,
                None => {
                    tally.push((id, Vec::new()));
                    &mut tally.last_mut().expect("just pushed").1
                }
            };
            match versions.iter_mut().find(|(d, _)| *d == digest) {
                Some((_, count)) => *count += 1,
                None => versions.push((digest, 1)),
            }
        }
    }
    let mut out: Vec<KeyDigest> = tally
        .into_iter()
        .map(|(id, versions)| {
            let (digest, _) = versions
                .into_iter()
                .max_by(|a, b| a.1.cmp(&b.1).then(a.0.cmp(b.0)))
                .expect("an object is counted once it is seen");
            (Box::from(id), *digest)
        })
        .collect();
    out.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    out.into_boxed_slice()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::ConfigKind;
    use sha2::{Digest as _, Sha256};

    fn v(version: &str) -> crate::objects::Digest {
        Sha256::digest(version.as_bytes()).into()
    }

    fn objects(pairs: &[(&str, &str)]) -> Vec<KeyDigest> {
        let mut out: Vec<KeyDigest> = pairs
            .iter()
            .map(|(id, ver)| (Box::from(*id), v(ver)))
            .collect();
        out.sort();
        out
    }

    fn class(name: &str) -> ConfigKey {
        ConfigKey::new(ConfigKind::SecretProviderClass, "ns", name)
    }

    fn all(_: &str) -> bool {
        true
    }

    #[test]
    fn the_version_most_pods_report_counts_whatever_order_they_arrived_in() {
        let (a, b) = (objects(&[("db", "1")]), objects(&[("db", "2")]));
        let mut forward = Mounts::default();
        let mut backward = Mounts::default();
        for (pod, o) in [("p1", &a), ("p2", &b), ("p3", &b)] {
            forward.set(&class("vault"), pod, Some(o));
        }
        for (pod, o) in [("p3", &b), ("p2", &b), ("p1", &a)] {
            backward.set(&class("vault"), pod, Some(o));
        }
        let view = forward.view(&class("vault"), all).unwrap();
        assert_eq!(&*view.objects, &objects(&[("db", "2")])[..]);
        assert_eq!(view.pods, 3);
        assert_eq!(backward.view(&class("vault"), all), Some(view));
    }

    #[test]
    fn a_rotation_moves_the_version_once_half_of_the_pods_remounted() {
        let mut mounts = Mounts::default();
        let c = class("vault");
        for pod in ["p1", "p2", "p3", "p4"] {
            mounts.set(&c, pod, Some(&objects(&[("db", "old")])));
        }
        let seen = |m: &Mounts| m.view(&c, all).unwrap().objects;
        let old = seen(&mounts);
        let mut versions = vec![old.clone()];
        for pod in ["p1", "p2", "p3", "p4"] {
            mounts.set(&c, pod, Some(&objects(&[("db", "new")])));
            versions.push(seen(&mounts));
        }
        versions.dedup();
        assert_eq!(versions.len(), 2, "one move, from old to new: {versions:?}");
        assert_eq!(*versions[1], *objects(&[("db", "new")]));
    }

    #[test]
    fn a_tie_goes_to_the_greater_digest_and_each_object_counts_on_its_own() {
        let (one, two) = (v("1"), v("2"));
        let greater = if one > two { "1" } else { "2" };
        let got = majority(&[
            &objects(&[("db", "1"), ("api", "a")]),
            &objects(&[("db", "2")]),
        ]);
        assert_eq!(&*got, &objects(&[("api", "a"), ("db", greater)])[..]);
    }

    #[test]
    fn only_the_selected_pods_count_and_none_selected_is_not_read_yet() {
        let mut mounts = Mounts::default();
        let c = class("vault");
        mounts.set(&c, "web-1", Some(&objects(&[("db", "1")])));
        mounts.set(&c, "api-1", Some(&objects(&[("db", "2")])));
        let web = mounts.view(&c, |p| p.starts_with("web-")).unwrap();
        assert_eq!(&*web.objects, &objects(&[("db", "1")])[..]);
        assert_eq!(mounts.view(&c, |p| p.starts_with("db-")), None);
        assert_eq!(mounts.view(&class("other"), all), None);
    }

    #[test]
    fn the_same_status_again_changes_nothing_and_pods_with_the_same_versions_share_them() {
        let mut mounts = Mounts::default();
        let c = class("vault");
        let o = objects(&[("db", "1")]);
        assert!(mounts.set(&c, "p1", Some(&o)));
        assert!(!mounts.set(&c, "p1", Some(&o)));
        assert!(mounts.set(&c, "p2", Some(&o)));
        let pods = &mounts.classes[&c].pods;
        assert!(Arc::ptr_eq(&pods[0].1, &pods[1].1));
        assert_eq!(mounts.len(), 2);
        assert!(mounts.set(&c, "p1", None));
        assert!(!mounts.set(&c, "p1", None));
        assert!(mounts.set(&c, "p2", None));
        assert!(mounts.is_empty() && mounts.classes.is_empty());
    }

    #[test]
    fn a_relist_finds_the_statuses_it_did_not_return_in_its_namespace() {
        let mut mounts = Mounts::default();
        let c = class("vault");
        let elsewhere = ConfigKey::new(ConfigKind::SecretProviderClass, "other", "vault");
        let o = objects(&[("db", "1")]);
        mounts.set(&c, "p1", Some(&o));
        mounts.set(&c, "p2", Some(&o));
        mounts.set(&elsewhere, "p9", Some(&o));
        let listed = HashSet::from([(c.clone(), Box::from("p1"))]);
        assert_eq!(
            mounts.not_listed(Some("ns"), &listed),
            [(c.clone(), Box::from("p2"))]
        );
        assert_eq!(mounts.not_listed(None, &listed).len(), 2);
    }
}
