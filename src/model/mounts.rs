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
use std::sync::Arc;

use crate::model::hash::hex;
use crate::objects::{ConfigKey, ConfigKind, KeyDigest, MountedObject};

/// The pod statuses of every class, by class (namespace, name).
///
/// One entry per Pod that mounts a class, so every byte counts: a Pod is 12 bytes and its
/// name (in one string per class), the versions are shared by the Pods that report the
/// same ones, and a class's entry is boxed (a map's empty slots then cost 40 bytes each).
#[derive(Default)]
pub struct Mounts {
    classes: HashMap<(Arc<str>, Arc<str>), Box<ClassMounts>>,
    statuses: usize,
    /// The last relist begun ([`Mounts::begin_relist`]).
    relists: u32,
}

/// The Pods that mounted one class.
#[derive(Default)]
struct ClassMounts {
    /// The Pods' names, one after the other ([`PodMount::at`]).
    names: String,
    /// Sorted by Pod name.
    pods: Vec<PodMount>,
    /// Bytes of `names` that no Pod uses any more (compacted past half).
    garbage: u32,
    /// The distinct sets of versions its Pods report, each with how many Pods report it
    /// (a slot no Pod uses any more is reused): the first here, as most often there is
    /// one, the others (during a rotation) in `more`.
    first: Box<[MountedObject]>,
    first_used: u32,
    // Boxed: 8 bytes in every class's entry instead of a Vec's 24, for a rotation's while.
    #[allow(clippy::box_collection)]
    more: Option<Box<Vec<SharedSet>>>,
}

/// A set of versions some Pods of a class report, and how many.
type SharedSet = (Box<[MountedObject]>, u32);

struct PodMount {
    /// The Pod's name: `len` bytes of `names` from `at`.
    at: u32,
    /// The relist that last returned this pod status (0: none, only a watch event).
    listed: u32,
    /// Which of the class's sets of versions it mounted ([`ClassMounts::set`]).
    set: u16,
    len: u8,
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

fn key_of(class: &ConfigKey) -> (Arc<str>, Arc<str>) {
    (Arc::clone(&class.namespace), Arc::clone(&class.name))
}

impl Mounts {
    /// Records what `pod` mounted of `class` (`None`: its pod status is gone); `listed`:
    /// the relist that returned it ([`Mounts::begin_relist`]). Returns whether what is
    /// mounted changed. A Pod name longer than any the API allows (253) is not recorded.
    pub fn set(
        &mut self,
        class: &ConfigKey,
        pod: &str,
        objects: Option<&[MountedObject]>,
        listed: Option<u32>,
    ) -> bool {
        let key = key_of(class);
        let Some(objects) = objects else {
            let Some(mounts) = self.classes.get_mut(&key) else {
                return false;
            };
            let Ok(at) = mounts.find(pod) else {
                return false;
            };
            mounts.remove(at);
            self.statuses -= 1;
            if mounts.pods.is_empty() {
                self.classes.remove(&key);
            }
            return true;
        };
        let Ok(len) = u8::try_from(pod.len()) else {
            return false;
        };
        let mounts = self.classes.entry(key).or_default();
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
                    at: mounts.names.len() as u32,
                    listed: listed.unwrap_or(0),
                    set,
                    len,
                };
                mounts.names.push_str(pod);
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
        let mounts = self.classes.get(&key_of(class))?;
        let picked: Vec<&[MountedObject]> = mounts
            .pods
            .iter()
            .filter(|m| selects(mounts.name(m)))
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
        for ((ns, name), mounts) in &self.classes {
            if namespace.is_some_and(|wanted| **ns != *wanted) {
                continue;
            }
            for mount in mounts.pods.iter().filter(|m| m.listed != listed) {
                let class = ConfigKey {
                    kind: ConfigKind::SecretProviderClass,
                    namespace: Arc::clone(ns),
                    name: Arc::clone(name),
                };
                gone.push((class, mounts.name(mount).into()));
            }
        }
        gone
    }
}

impl ClassMounts {
    fn name(&self, mount: &PodMount) -> &str {
        let at = mount.at as usize;
        &self.names[at..at + usize::from(mount.len)]
    }

    fn find(&self, pod: &str) -> Result<usize, usize> {
        self.pods.binary_search_by(|m| self.name(m).cmp(pod))
    }

    /// Forgets Pod `i`; its name's bytes are reclaimed once they are half of the names.
    fn remove(&mut self, i: usize) {
        let gone = self.pods.remove(i);
        self.release(gone.set);
        self.garbage += u32::from(gone.len);
        if self.garbage as usize * 2 > self.names.len() {
            let mut names = String::with_capacity(self.names.len() - self.garbage as usize);
            for mount in &mut self.pods {
                let at = mount.at as usize;
                let name = &self.names[at..at + usize::from(mount.len)];
                mount.at = names.len() as u32;
                names.push_str(name);
            }
            self.names = names;
            self.garbage = 0;
        }
    }

    /// The objects of set `i`.
    fn set(&self, i: u16) -> &[MountedObject] {
        match i {
            0 => &self.first,
            i => &self.more.as_ref().expect("a set past the first")[usize::from(i) - 1].0,
        }
    }

    fn slot(&mut self, i: u16) -> (&mut Box<[MountedObject]>, &mut u32) {
        match i {
            0 => (&mut self.first, &mut self.first_used),
            i => {
                let (set, used) =
                    &mut self.more.as_mut().expect("a set past the first")[usize::from(i) - 1];
                (set, used)
            }
        }
    }

    fn slots(&self) -> u16 {
        1 + self.more.as_ref().map_or(0, |m| m.len() as u16)
    }

    /// The index of a set equal to `objects`, one more Pod using it.
    fn share(&mut self, objects: &[MountedObject]) -> u16 {
        let slots = self.slots();
        if let Some(i) = (0..slots).find(|&i| *self.slot(i).1 > 0 && *self.set(i) == *objects) {
            *self.slot(i).1 += 1;
            return i;
        }
        match (0..slots).find(|&i| *self.slot(i).1 == 0) {
            Some(free) => {
                let (set, used) = self.slot(free);
                *set = Box::from(objects);
                *used = 1;
                free
            }
            None => {
                self.more
                    .get_or_insert_with(Box::default)
                    .push((Box::from(objects), 1));
                slots
            }
        }
    }

    /// One Pod less uses set `i`.
    fn release(&mut self, i: u16) {
        let (set, used) = self.slot(i);
        *used -= 1;
        if *used == 0 {
            *set = Box::default();
        }
        if let Some(more) = &mut self.more {
            while more.last().is_some_and(|(_, used)| *used == 0) {
                more.pop();
            }
            if more.is_empty() {
                self.more = None;
            }
        }
    }
}

/// Per object, the version most of `mounted` report; a tie goes to the greater digest. An
/// object counts when any of them reports it. Keys are the hex of the objects' ids, and
/// the first 8 bytes of each digest the version's (the rest zero): see
/// [`crate::model::hash`] for how a class's lines read.
pub fn majority(mounted: &[&[MountedObject]]) -> Box<[KeyDigest]> {
    // Most classes have a handful of objects and their Pods agree: small vectors.
    let mut tally: Vec<(u64, Vec<(u64, usize)>)> = Vec::new();
    for objects in mounted {
        for &(id, version) in objects.iter() {
            let at = match tally.iter().position(|(i, _)| *i == id) {
                Some(at) => at,
                None => {
                    tally.push((id, Vec::new()));
                    tally.len() - 1
                }
            };
            let versions = &mut tally[at].1;
            match versions.iter_mut().find(|(v, _)| *v == version) {
                Some((_, count)) => *count += 1,
                None => versions.push((version, 1)),
            }
        }
    }
    tally.sort_unstable_by_key(|(id, _)| *id);
    tally
        .into_iter()
        .map(|(id, versions)| {
            let (version, _) = versions
                .into_iter()
                .max_by(|a, b| a.1.cmp(&b.1).then(a.0.cmp(&b.0)))
                .expect("an object is counted once it is seen");
            let mut digest = [0u8; 32];
            digest[..8].copy_from_slice(&version.to_be_bytes());
            (hex(&id.to_be_bytes()).into_boxed_str(), digest)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::{short_digest, ConfigKind};

    fn v(version: &str) -> u64 {
        short_digest(version)
    }

    fn objects(pairs: &[(&str, &str)]) -> Vec<MountedObject> {
        let mut out: Vec<MountedObject> = pairs
            .iter()
            .map(|(id, ver)| (short_digest(id), v(ver)))
            .collect();
        out.sort();
        out
    }

    /// What a view shows of `objects`.
    fn shown(pairs: &[(&str, &str)]) -> Vec<KeyDigest> {
        objects(pairs)
            .into_iter()
            .map(|(id, version)| {
                let mut digest = [0u8; 32];
                digest[..8].copy_from_slice(&version.to_be_bytes());
                (hex(&id.to_be_bytes()).into_boxed_str(), digest)
            })
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
            mounts.classes[&key_of(&c)].more.is_none(),
            "one copy of the versions"
        );
        assert_eq!(mounts.len(), 2);
        // p1 moves on: two sets; p2 follows: the old one's slot is free, then reused.
        assert!(mounts.set(&c, "p1", Some(&two), None));
        assert!(mounts.set(&c, "p2", Some(&two), None));
        let class_mounts = &mounts.classes[&key_of(&c)];
        assert_eq!(class_mounts.first_used, 0);
        assert_eq!(class_mounts.more.as_ref().map(|m| m.len()), Some(1));
        assert!(mounts.set(&c, "p3", Some(&one), None));
        assert_eq!(
            mounts.classes[&key_of(&c)].first_used,
            1,
            "the free slot reused"
        );
        for pod in ["p1", "p2", "p3"] {
            assert!(mounts.set(&c, pod, None, None));
        }
        assert!(!mounts.set(&c, "p1", None, None));
        assert!(mounts.is_empty() && mounts.classes.is_empty());
    }

    #[test]
    fn pods_come_and_go_and_their_names_are_kept_compact() {
        let mut mounts = Mounts::default();
        let c = class("vault");
        let o = objects(&[("db", "1")]);
        let names: Vec<String> = (0..40).map(|i| format!("web-5d8f7-{i:05}")).collect();
        for name in names.iter().rev() {
            assert!(mounts.set(&c, name, Some(&o), None));
        }
        for name in names.iter().step_by(2) {
            assert!(mounts.set(&c, name, None, None));
        }
        let kept = &mounts.classes[&key_of(&c)];
        assert!(kept.names.len() <= 2 * 20 * names[0].len(), "compacted");
        for (i, name) in names.iter().enumerate() {
            let there = mounts.view(&c, |p| p == name).is_some();
            assert_eq!(there, i % 2 == 1, "{name}");
        }
        assert_eq!(mounts.len(), 20);
        let long = "p".repeat(256);
        assert!(
            !mounts.set(&c, &long, Some(&o), None),
            "no Pod has such a name"
        );
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
