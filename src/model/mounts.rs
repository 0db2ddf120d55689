//! What the Secrets Store CSI driver reports mounted: for each SecretProviderClass, the
//! objects each Pod mounted and a digest of each one's version (from the Pods'
//! SecretProviderClassPodStatuses; never an id's or a version's text), and the versions
//! that count.
//!
//! Pods of one class disagree while a rotation is under way (each remounts on its own
//! schedule), and a Pod that stopped running keeps reporting what it mounted last. What
//! counts is, per object, the version **most** of the Pods report; a tie goes to the
//! greater digest. That is the same whatever order the statuses arrived in, so a restart
//! computes the hash it wrote before; "the newest" would depend on that order, which a
//! relist does not keep. A rotation thus moves a class's version once, when half of its
//! Pods have remounted, and the Pods started by the rollout it causes only add to that
//! majority.

use std::collections::HashMap;

use crate::model::hash::hex;
use crate::objects::{ConfigKey, KeyDigest, MountedObject};

/// The pod statuses of every class, by class.
#[derive(Debug, Default)]
pub struct Mounts {
    classes: HashMap<ConfigKey, ClassMounts>,
    statuses: usize,
    /// The last relist begun ([`Mounts::begin_relist`]).
    relists: u32,
}

/// The Pods that mounted one class. Kept small, as there is one per Pod of the cluster
/// that mounts a class: 24 bytes and the Pod's name each, the versions shared.
#[derive(Debug, Default)]
struct ClassMounts {
    /// Sorted by Pod name.
    pods: Vec<PodMount>,
    /// The distinct sets of versions its Pods report, each with how many Pods report it
    /// (a slot no Pod uses any more is reused): the first here, as most often there is
    /// one, the others (during a rotation) in `more`.
    first: (Box<[MountedObject]>, u32),
    more: Vec<(Box<[MountedObject]>, u32)>,
}

#[derive(Debug)]
struct PodMount {
    pod: Box<str>,
    /// Which of the class's sets of versions it mounted ([`ClassMounts::set`]).
    set: u32,
    /// The relist that last returned this pod status (0: none, only a watch event).
    listed: u32,
}

/// The objects of a class as a set of Pods mounted them: the versions that count, and how
/// many of the Pods reported them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct View {
    /// Per object, the version digest that counts, sorted: the object's key is the hex
    /// of its [`MountedObject`] id.
    pub objects: Box<[KeyDigest]>,
    /// The Pods whose statuses were read.
    pub pods: usize,
}

impl Mounts {
    /// Records what `pod` mounted of `class` (`None`: its pod status is gone); `listed`:
    /// the relist that returned it ([`Mounts::begin_relist`]). Returns whether what is
    /// mounted changed.
    pub fn set(
        &mut self,
        class: &ConfigKey,
        pod: &str,
        objects: Option<&[MountedObject]>,
        listed: Option<u32>,
    ) -> bool {
        let Some(objects) = objects else {
            let Some(mounts) = self.classes.get_mut(class) else {
                return false;
            };
            let Ok(at) = mounts.find(pod) else {
                return false;
            };
            let gone = mounts.pods.remove(at);
            mounts.release(gone.set);
            self.statuses -= 1;
            if mounts.pods.is_empty() {
                self.classes.remove(class);
            }
            return true;
        };
        let mounts = self.classes.entry(class.clone()).or_default();
        match mounts.find(pod) {
            Ok(i) => {
                if let Some(listed) = listed {
                    mounts.pods[i].listed = listed;
                }
                let old = mounts.pods[i].set;
                if *mounts.set(old) == *objects {
                    return false;
                }
                let set = mounts.share(objects);
                mounts.release(old);
                mounts.pods[i].set = set;
            }
            Err(i) => {
                let set = mounts.share(objects);
                let mount = PodMount {
                    pod: pod.into(),
                    set,
                    listed: listed.unwrap_or(0),
                };
                // Grown by an eighth, not doubled: a class's Pods are many small entries.
                if mounts.pods.len() == mounts.pods.capacity() {
                    mounts.pods.reserve_exact((mounts.pods.len() / 8).max(1));
                }
                mounts.pods.insert(i, mount);
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
        let picked: Vec<&[MountedObject]> = mounts
            .pods
            .iter()
            .filter(|m| selects(&m.pod))
            .map(|m| mounts.set(m.set))
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

    /// A relist begins: what it returns is recorded with the number this returns, so that
    /// [`Mounts::not_listed`] finds what it did not return without a copy of every key.
    pub fn begin_relist(&mut self) -> u32 {
        self.relists = self.relists.wrapping_add(1).max(1);
        self.relists
    }

    /// The (class, Pod) pairs recorded in one namespace or all that relist `listed` did
    /// not return: the pod statuses gone.
    pub fn not_listed(&self, namespace: Option<&str>, listed: u32) -> Vec<(ConfigKey, Box<str>)> {
        let mut gone = Vec::new();
        for (class, mounts) in &self.classes {
            if namespace.is_some_and(|ns| *class.namespace != *ns) {
                continue;
            }
            for mount in mounts.pods.iter().filter(|m| m.listed != listed) {
                gone.push((class.clone(), mount.pod.clone()));
            }
        }
        gone
    }
}

impl ClassMounts {
    fn find(&self, pod: &str) -> Result<usize, usize> {
        self.pods.binary_search_by(|m| (*m.pod).cmp(pod))
    }

    /// The objects of set `i`.
    fn set(&self, i: u32) -> &[MountedObject] {
        match i {
            0 => &self.first.0,
            i => &self.more[i as usize - 1].0,
        }
    }

    fn slot(&mut self, i: u32) -> &mut (Box<[MountedObject]>, u32) {
        match i {
            0 => &mut self.first,
            i => &mut self.more[i as usize - 1],
        }
    }

    /// The index of a set equal to `objects`, one more Pod using it.
    fn share(&mut self, objects: &[MountedObject]) -> u32 {
        let slots = 1 + self.more.len() as u32;
        if let Some(i) = (0..slots).find(|&i| self.slot(i).1 > 0 && *self.set(i) == *objects) {
            self.slot(i).1 += 1;
            return i;
        }
        let entry = (Box::from(objects), 1);
        match (0..slots).find(|&i| self.slot(i).1 == 0) {
            Some(free) => {
                *self.slot(free) = entry;
                free
            }
            None => {
                self.more.push(entry);
                slots
            }
        }
    }

    /// One Pod less uses set `i`.
    fn release(&mut self, i: u32) {
        let (objects, used) = self.slot(i);
        *used -= 1;
        if *used == 0 {
            *objects = Box::default();
        }
        if self.more.last().is_some_and(|(_, used)| *used == 0) {
            self.more.pop();
        }
    }
}

/// Per object, the version most of `mounted` report; a tie goes to the greater digest. An
/// object counts when any of them reports it. Keys are the hex of the objects' ids.
pub fn majority(mounted: &[&[MountedObject]]) -> Box<[KeyDigest]> {
    // Most classes have a handful of objects and their Pods agree: small vectors.
    let mut tally: Vec<(u64, Vec<(&crate::objects::Digest, usize)>)> = Vec::new();
    for objects in mounted {
        for (id, digest) in objects.iter() {
            let at = match tally.iter().position(|(i, _)| i == id) {
                Some(at) => at,
                None => {
                    tally.push((*id, Vec::new()));
                    tally.len() - 1
                }
            };
            let versions = &mut tally[at].1;
            match versions.iter_mut().find(|(d, _)| *d == digest) {
                Some((_, count)) => *count += 1,
                None => versions.push((digest, 1)),
            }
        }
    }
    tally.sort_unstable_by_key(|(id, _)| *id);
    tally
        .into_iter()
        .map(|(id, versions)| {
            let (digest, _) = versions
                .into_iter()
                .max_by(|a, b| a.1.cmp(&b.1).then(a.0.cmp(b.0)))
                .expect("an object is counted once it is seen");
            (hex(&id.to_be_bytes()).into_boxed_str(), *digest)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::{object_id, ConfigKind};
    use sha2::{Digest as _, Sha256};

    fn v(version: &str) -> crate::objects::Digest {
        Sha256::digest(version.as_bytes()).into()
    }

    fn objects(pairs: &[(&str, &str)]) -> Vec<MountedObject> {
        let mut out: Vec<MountedObject> = pairs
            .iter()
            .map(|(id, ver)| (object_id(id), v(ver)))
            .collect();
        out.sort();
        out
    }

    /// What a view shows of `objects`.
    fn shown(pairs: &[(&str, &str)]) -> Vec<KeyDigest> {
        objects(pairs)
            .into_iter()
            .map(|(id, d)| (hex(&id.to_be_bytes()).into_boxed_str(), d))
            .collect()
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
            forward.set(&class("vault"), pod, Some(o), None);
        }
        for (pod, o) in [("p3", &b), ("p2", &b), ("p1", &a)] {
            backward.set(&class("vault"), pod, Some(o), None);
        }
        let view = forward.view(&class("vault"), all).unwrap();
        assert_eq!(&*view.objects, &shown(&[("db", "2")])[..]);
        assert_eq!(view.pods, 3);
        assert_eq!(backward.view(&class("vault"), all), Some(view));
    }

    #[test]
    fn a_rotation_moves_the_version_once_half_of_the_pods_remounted() {
        let mut mounts = Mounts::default();
        let c = class("vault");
        for pod in ["p1", "p2", "p3", "p4"] {
            mounts.set(&c, pod, Some(&objects(&[("db", "old")])), None);
        }
        let seen = |m: &Mounts| m.view(&c, all).unwrap().objects;
        let old = seen(&mounts);
        let mut versions = vec![old.clone()];
        for pod in ["p1", "p2", "p3", "p4"] {
            mounts.set(&c, pod, Some(&objects(&[("db", "new")])), None);
            versions.push(seen(&mounts));
        }
        versions.dedup();
        assert_eq!(versions.len(), 2, "one move, from old to new: {versions:?}");
        assert_eq!(*versions[1], *shown(&[("db", "new")]));
    }

    #[test]
    fn a_tie_goes_to_the_greater_digest_and_each_object_counts_on_its_own() {
        let (one, two) = (v("1"), v("2"));
        let greater = if one > two { "1" } else { "2" };
        let got = majority(&[
            &objects(&[("db", "1"), ("api", "a")]),
            &objects(&[("db", "2")]),
        ]);
        assert_eq!(&*got, &shown(&[("api", "a"), ("db", greater)])[..]);
    }

    #[test]
    fn only_the_selected_pods_count_and_none_selected_is_not_read_yet() {
        let mut mounts = Mounts::default();
        let c = class("vault");
        mounts.set(&c, "web-1", Some(&objects(&[("db", "1")])), None);
        mounts.set(&c, "api-1", Some(&objects(&[("db", "2")])), None);
        let web = mounts.view(&c, |p| p.starts_with("web-")).unwrap();
        assert_eq!(&*web.objects, &shown(&[("db", "1")])[..]);
        assert_eq!(mounts.view(&c, |p| p.starts_with("db-")), None);
        assert_eq!(mounts.view(&class("other"), all), None);
    }

    #[test]
    fn the_same_status_again_changes_nothing_and_pods_with_the_same_versions_share_them() {
        let mut mounts = Mounts::default();
        let c = class("vault");
        let (one, two) = (objects(&[("db", "1")]), objects(&[("db", "2")]));
        assert!(mounts.set(&c, "p1", Some(&one), None));
        assert!(!mounts.set(&c, "p1", Some(&one), None));
        assert!(mounts.set(&c, "p2", Some(&one), None));
        assert!(
            mounts.classes[&c].more.is_empty(),
            "one copy of the versions"
        );
        assert_eq!(mounts.len(), 2);
        // p1 moves on: two sets; p2 follows: the old one's slot is free, then reused.
        assert!(mounts.set(&c, "p1", Some(&two), None));
        assert!(mounts.set(&c, "p2", Some(&two), None));
        let class_mounts = &mounts.classes[&c];
        assert_eq!((class_mounts.first.1, class_mounts.more.len()), (0, 1));
        assert!(mounts.set(&c, "p3", Some(&one), None));
        assert_eq!(mounts.classes[&c].first.1, 1, "the free slot reused");
        for pod in ["p1", "p2", "p3"] {
            assert!(mounts.set(&c, pod, None, None));
        }
        assert!(!mounts.set(&c, "p1", None, None));
        assert!(mounts.is_empty() && mounts.classes.is_empty());
    }

    #[test]
    fn a_relist_finds_the_statuses_it_did_not_return_in_its_namespace() {
        let mut mounts = Mounts::default();
        let c = class("vault");
        let elsewhere = ConfigKey::new(ConfigKind::SecretProviderClass, "other", "vault");
        let o = objects(&[("db", "1")]);
        mounts.set(&c, "p1", Some(&o), None);
        mounts.set(&c, "p2", Some(&o), None);
        mounts.set(&elsewhere, "p9", Some(&o), None);
        let relist = mounts.begin_relist();
        assert!(
            !mounts.set(&c, "p1", Some(&o), Some(relist)),
            "unchanged, but seen"
        );
        assert_eq!(
            mounts.not_listed(Some("ns"), relist),
            [(c.clone(), Box::from("p2"))]
        );
        assert_eq!(mounts.not_listed(None, relist).len(), 2);
        assert_ne!(mounts.begin_relist(), relist);
    }
}
