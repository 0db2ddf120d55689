//! What the Secrets Store CSI driver reports mounted: for each SecretProviderClass, the
//! objects each Pod mounted and a digest of each one's version (from the Pods'
//! SecretProviderClassPodStatuses; never an id's or a version's text), which pod status
//! it is (a digest of its uid: the driver creates one when a Pod first mounts the class,
//! and it goes with the Pod), and the versions that count.
//!
//! Pods of one class disagree while a rotation is under way (each remounts on its own
//! schedule), and for good where the store gives each Pod its own version (Vault's
//! dynamic secrets: database credentials, PKI certificates): a rollout then brings Pods
//! with versions nobody saw before, which must not make the workload roll again. So what
//! counts is **held** per workload ([`Held`]), and moves only on a rotation:
//!
//! 1. First read (nothing held): per object, the version more than half of the Pods
//!    report, or, when none has a majority, the greatest digest (the same whatever order
//!    the statuses came in). Each Pod's version is held as its own.
//! 2. A **rotation** of an object: every Pod of the record (those held when it was
//!    recorded, at least one) reports another version than its own. What counts then is
//!    the version most of them report (a tie: the greater digest), and every Pod's version
//!    now is held as its own, for a new record. A rotation thus moves an object's version
//!    once, when the last Pod that was running has remounted.
//! 3. A Pod seen after the record (a rollout's, a scale-up's, a StatefulSet's Pod made
//!    anew under its old name: a pod status is told by its uid) started with what it
//!    mounted, which is held as its own; it makes no rotation until the next record, which
//!    begins when none of the Pods of the record is left (and a Pod that changed since it
//!    was first seen then counts as rotated).
//!
//! A Pod that stopped running keeps reporting what it mounted last; its pod status goes
//! with the Pod.

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
    /// Which pod status (a digest of its uid): a Pod made anew under the same name is
    /// another one.
    incarnation: u64,
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
    /// What to hold for the next view of the same Pods (see the module documentation).
    pub held: Held,
}

/// What counted of a class for one set of Pods (a workload's), kept between views so that
/// a version moves only on a rotation (see the module documentation).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Held {
    /// Sorted by object id.
    objects: Vec<HeldObject>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct HeldObject {
    id: u64,
    /// The version that counts.
    counted: u64,
    /// Each Pod reporting the object (by incarnation, sorted): the version it reported
    /// when first seen or at the last rotation, and from which record on it counts.
    pods: Vec<Baseline>,
    /// The record: raised at a rotation, and when none of the Pods it counted is left.
    record: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Baseline {
    pod: u64,
    version: u64,
    /// The record from which this Pod makes rotations (a Pod first seen after the record
    /// does not, until the next one).
    from: u32,
}

fn key_of(class: &ConfigKey) -> (Arc<str>, Arc<str>) {
    (Arc::clone(&class.namespace), Arc::clone(&class.name))
}

impl Mounts {
    /// The classes of `namespace` that Pod `pod` has a pod status for (every class of
    /// the namespace: `None`).
    pub fn classes_of(&self, namespace: &str, pod: Option<&str>) -> Vec<ConfigKey> {
        self.classes
            .iter()
            .filter(|((ns, _), mounts)| {
                &**ns == namespace && pod.is_none_or(|pod| mounts.find(pod).is_ok())
            })
            .map(|((ns, name), _)| ConfigKey::new(ConfigKind::SecretProviderClass, ns, name))
            .collect()
    }

    /// Records what `pod` mounted of `class` (`None`: its pod status is gone) and which pod
    /// status says so (`incarnation`, a digest of its uid); `listed`: the relist that
    /// returned it ([`Mounts::begin_relist`]). Returns whether what is mounted changed. A Pod name
    /// longer than any the API allows (253) is not recorded.
    pub fn set(
        &mut self,
        class: &ConfigKey,
        pod: &str,
        objects: Option<&[MountedObject]>,
        incarnation: u64,
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
        // A pod status without a uid (never on a real server) is told by its Pod's name.
        let incarnation = match incarnation {
            0 => crate::objects::short_digest(pod),
            known => known,
        };
        let mounts = self.classes.entry(key).or_default();
        match mounts.find(pod) {
            Ok(i) => {
                if let Some(listed) = listed {
                    mounts.pods[i].listed = listed;
                }
                // A Pod made anew under the same name (a StatefulSet's) is another Pod.
                let renewed = mounts.pods[i].incarnation != incarnation;
                mounts.pods[i].incarnation = incarnation;
                let old = mounts.pods[i].set;
                if *mounts.set(old) == *objects {
                    return renewed;
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
                    incarnation,
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

    /// The versions that count of `class` for the Pods `selects` picks, given what was
    /// `held` for them (see the module documentation); `None` when none of them has a pod
    /// status for it (nothing is mounted yet, or no Pod runs).
    pub fn view(
        &self,
        class: &ConfigKey,
        selects: impl Fn(&str) -> bool,
        held: Option<&Held>,
    ) -> Option<View> {
        let mounts = self.classes.get(&key_of(class))?;
        let picked: Vec<(&[MountedObject], u64)> = mounts
            .pods
            .iter()
            .filter(|m| selects(mounts.name(m)))
            .map(|m| (mounts.set(m.set), m.incarnation))
            .collect();
        if picked.is_empty() {
            return None;
        }
        let (objects, held) = decide(&picked, held);
        Some(View {
            objects,
            pods: picked.len(),
            held,
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

/// The versions that count at a first read of `mounted` (nothing held, see [`decide`]).
pub fn majority(mounted: &[&[MountedObject]]) -> Box<[KeyDigest]> {
    let pods: Vec<(&[MountedObject], u64)> = mounted.iter().map(|m| (*m, 0)).collect();
    decide(&pods, None).0
}

/// The version most of `versions` report; a tie goes to the greater digest.
fn most_reported(versions: impl Iterator<Item = u64>) -> Option<u64> {
    let mut tally: Vec<(u64, usize)> = Vec::new();
    for version in versions {
        match tally.iter_mut().find(|(v, _)| *v == version) {
            Some((_, count)) => *count += 1,
            None => tally.push((version, 1)),
        }
    }
    tally
        .into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then(a.0.cmp(&b.0)))
        .map(|(v, _)| v)
}

/// Per object, the version that counts for Pods that mounted `mounted` (each with its
/// incarnation), given what was `held` for them, and what to hold next (the rules of the
/// module documentation). An object counts when any Pod reports it. Keys are the hex of
/// the objects' ids, and the first 8 bytes of each digest the version's (the rest zero):
/// see [`crate::model::hash`] for how a class's lines read.
pub fn decide(
    mounted: &[(&[MountedObject], u64)],
    held: Option<&Held>,
) -> (Box<[KeyDigest]>, Held) {
    // Per object, each Pod's (version, incarnation): most classes have a handful of
    // objects.
    let mut reports: Vec<(u64, Vec<(u64, u64)>)> = Vec::new();
    for (objects, pod) in mounted {
        for &(id, version) in objects.iter() {
            match reports.iter_mut().find(|(i, _)| *i == id) {
                Some((_, r)) => r.push((version, *pod)),
                None => reports.push((id, vec![(version, *pod)])),
            }
        }
    }
    reports.sort_unstable_by_key(|(id, _)| *id);
    let mut next = Held::default();
    let mut out = Vec::with_capacity(reports.len());
    for (id, mut reported) in reports {
        reported.sort_unstable_by_key(|(_, pod)| *pod);
        let prior = held.and_then(|h| h.objects.iter().find(|o| o.id == id));
        let object = match prior {
            // 1. First read: more than half, else the greatest digest.
            None => {
                let (version, count) = reported
                    .iter()
                    .map(|(v, _)| (*v, reported.iter().filter(|(w, _)| w == v).count()))
                    .max_by(|a, b| a.1.cmp(&b.1).then(a.0.cmp(&b.0)))
                    .expect("an object is counted once it is seen");
                let counted = if count * 2 > reported.len() {
                    version
                } else {
                    reported
                        .iter()
                        .map(|(v, _)| *v)
                        .max()
                        .expect("one at least")
                };
                let pods = reported
                    .iter()
                    .map(|&(version, pod)| Baseline {
                        pod,
                        version,
                        from: 0,
                    })
                    .collect();
                HeldObject {
                    id,
                    counted,
                    pods,
                    record: 0,
                }
            }
            Some(prior) => step(prior, &reported),
        };
        let mut digest = [0u8; 32];
        digest[..8].copy_from_slice(&object.counted.to_be_bytes());
        out.push((hex(&id.to_be_bytes()).into_boxed_str(), digest));
        next.objects.push(object);
    }
    (out.into_boxed_slice(), next)
}

/// One object's held view moved forward by what its Pods report now (`reported`:
/// (version, incarnation), sorted by incarnation): rules 2 and 3 of the module
/// documentation.
fn step(prior: &HeldObject, reported: &[(u64, u64)]) -> HeldObject {
    let mut record = prior.record;
    // A Pod seen before keeps its baseline; a new one starts with what it mounted, and
    // counts from the next record.
    let pods: Vec<Baseline> = reported
        .iter()
        .map(
            |&(version, pod)| match prior.pods.binary_search_by_key(&pod, |b| b.pod) {
                Ok(i) => prior.pods[i],
                Err(_) => Baseline {
                    pod,
                    version,
                    from: record + 1,
                },
            },
        )
        .collect();
    // 3. None of the Pods of the record is left: the next record begins.
    if !pods.iter().any(|b| b.from <= record) {
        record += 1;
    }
    // 2. A rotation: every Pod of the record reports another version than its own.
    let now = |b: &Baseline| {
        reported
            .iter()
            .find(|(_, pod)| *pod == b.pod)
            .map(|(v, _)| *v)
            .expect("reported")
    };
    let of_record: Vec<&Baseline> = pods.iter().filter(|b| b.from <= record).collect();
    let rotated = !of_record.is_empty() && of_record.iter().all(|b| now(b) != b.version);
    if !rotated {
        return HeldObject {
            id: prior.id,
            counted: prior.counted,
            pods,
            record,
        };
    }
    let counted = most_reported(of_record.iter().map(|b| now(b))).expect("not empty");
    record += 1;
    HeldObject {
        id: prior.id,
        counted,
        pods: pods
            .iter()
            .map(|b| Baseline {
                pod: b.pod,
                version: now(b),
                from: record,
            })
            .collect(),
        record,
    }
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
            forward.set(&class("vault"), pod, Some(o), 0, None);
        }
        for (pod, o) in [("p3", &b), ("p2", &b), ("p1", &a)] {
            backward.set(&class("vault"), pod, Some(o), 0, None);
        }
        let view = forward.view(&class("vault"), all, None).unwrap();
        assert_eq!(&*view.objects, &shown(&[("db", "2")])[..]);
        assert_eq!(view.pods, 3);
        assert_eq!(backward.view(&class("vault"), all, None), Some(view));
    }

    /// A workload's Pods of class `vault`, looked at as a reconcile does: each view with
    /// what the last one held.
    #[derive(Default)]
    struct Workload {
        mounts: Mounts,
        held: Option<Held>,
    }

    impl Workload {
        /// `pod` (its first pod status) mounted `version`.
        fn mount(&mut self, pod: &str, version: &str) {
            self.mount_as(pod, version, short_digest(pod));
        }

        fn mount_as(&mut self, pod: &str, version: &str, incarnation: u64) {
            let o = objects(&[("db", version)]);
            self.mounts
                .set(&class("vault"), pod, Some(&o), incarnation, None);
        }

        fn gone(&mut self, pod: &str) {
            self.mounts.set(&class("vault"), pod, None, 0, None);
        }

        fn counted(&mut self) -> Box<[KeyDigest]> {
            let view = self
                .mounts
                .view(&class("vault"), all, self.held.as_ref())
                .unwrap();
            self.held = Some(view.held);
            view.objects
        }
    }

    #[test]
    fn a_real_rotation_moves_the_version_once_when_every_running_pod_remounted() {
        let mut w = Workload::default();
        for pod in ["p1", "p2", "p3", "p4"] {
            w.mount(pod, "old");
        }
        let mut versions = vec![w.counted()];
        for pod in ["p1", "p2", "p3", "p4"] {
            w.mount(pod, "new");
            versions.push(w.counted());
        }
        // The rollout it causes: new Pods mount "new", the old ones go one by one.
        for (i, pod) in ["n1", "n2", "n3", "n4"].iter().enumerate() {
            w.mount(pod, "new");
            w.gone(&format!("p{}", i + 1));
            versions.push(w.counted());
        }
        let moved_at = versions.windows(2).position(|p| p[0] != p[1]);
        versions.dedup();
        assert_eq!(versions.len(), 2, "one move, from old to new: {versions:?}");
        assert_eq!(*versions[1], *shown(&[("db", "new")]));
        assert_eq!(moved_at, Some(3), "when the fourth Pod remounted");
    }

    /// The Vault case: dynamic secrets give each Pod its own version. Rollouts bring Pods
    /// with versions nobody saw, none of which is a rotation; a rotation (every running
    /// Pod's credentials renewed) moves the version once.
    #[test]
    fn pods_with_versions_of_their_own_never_roll_a_rollout_but_a_rotation_moves_once() {
        let mut w = Workload::default();
        for (pod, version) in [("p1", "a1"), ("p2", "b1"), ("p3", "c1")] {
            w.mount(pod, version);
        }
        let first = w.counted();
        // Five rollouts (and a replicas-1 moment in each), each Pod with its own version.
        for round in 0..5u64 {
            let old: Vec<String> = w.mounts.classes[&key_of(&class("vault"))]
                .pods
                .iter()
                .map(|m| {
                    w.mounts.classes[&key_of(&class("vault"))]
                        .name(m)
                        .to_string()
                })
                .collect();
            for (i, pod) in old.iter().enumerate() {
                w.mount(&format!("r{round}-{i}"), &format!("v{round}-{i}"));
                assert_eq!(w.counted(), first, "round {round}, Pod {i} started");
                w.gone(pod);
                assert_eq!(w.counted(), first, "round {round}, {pod} gone");
            }
        }
        // A rotation: every running Pod gets new credentials.
        for i in 0..3 {
            w.mount(&format!("r4-{i}"), &format!("rotated-{i}"));
        }
        let rotated = w.counted();
        assert_ne!(rotated, first);
        assert_eq!(w.counted(), rotated, "held");
    }

    #[test]
    fn a_statefulsets_pod_made_anew_under_its_name_is_a_new_pod_not_a_rotation() {
        let mut w = Workload::default();
        w.mount_as("db-0", "a", 1);
        w.mount_as("db-1", "b", 2);
        let first = w.counted();
        // The StatefulSet's rollout: each Pod deleted, made anew, mounting its own version.
        w.gone("db-0");
        w.mount_as("db-0", "c", 3);
        assert_eq!(w.counted(), first);
        w.gone("db-1");
        w.mount_as("db-1", "d", 4);
        assert_eq!(w.counted(), first);
        // Both remount new credentials: a rotation.
        w.mount_as("db-0", "e", 3);
        w.mount_as("db-1", "f", 4);
        assert_ne!(w.counted(), first);
    }

    /// On a real server a rollout's old Pods keep their statuses while they terminate: a
    /// rotation of the new Pods meanwhile is seen once the old statuses go.
    #[test]
    fn a_rotation_of_new_pods_while_the_old_ones_terminate_is_seen_when_they_go() {
        let mut w = Workload::default();
        w.mount("o1", "a1");
        w.mount("o2", "a2");
        let first = w.counted();
        w.mount("n1", "b1");
        w.mount("n2", "b2");
        assert_eq!(w.counted(), first);
        w.mount("n1", "rotated-1");
        w.mount("n2", "rotated-2");
        assert_eq!(w.counted(), first, "the old Pods still report theirs");
        w.gone("o1");
        w.gone("o2");
        let rotated = w.counted();
        assert_ne!(rotated, first);
        assert_eq!(w.counted(), rotated);
    }

    #[test]
    fn a_pod_started_during_a_rotation_neither_makes_one_nor_stops_one() {
        let mut w = Workload::default();
        w.mount("p1", "old");
        w.mount("p2", "old");
        let old = w.counted();
        w.mount("p1", "new");
        w.mount("p3", "new"); // a scale-up, after the view was held
        assert_eq!(w.counted(), old, "p2 has not remounted");
        w.mount("p2", "new");
        assert_eq!(*w.counted(), *shown(&[("db", "new")]));
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
        mounts.set(&c, "web-1", Some(&objects(&[("db", "1")])), 0, None);
        mounts.set(&c, "api-1", Some(&objects(&[("db", "2")])), 0, None);
        let web = mounts.view(&c, |p| p.starts_with("web-"), None).unwrap();
        assert_eq!(&*web.objects, &shown(&[("db", "1")])[..]);
        assert_eq!(mounts.view(&c, |p| p.starts_with("db-"), None), None);
        assert_eq!(mounts.view(&class("other"), all, None), None);
    }

    #[test]
    fn the_same_status_again_changes_nothing_and_pods_with_the_same_versions_share_them() {
        let mut mounts = Mounts::default();
        let c = class("vault");
        let (one, two) = (objects(&[("db", "1")]), objects(&[("db", "2")]));
        assert!(mounts.set(&c, "p1", Some(&one), 0, None));
        assert!(!mounts.set(&c, "p1", Some(&one), 0, None));
        assert!(mounts.set(&c, "p2", Some(&one), 0, None));
        assert!(
            mounts.classes[&key_of(&c)].more.is_none(),
            "one copy of the versions"
        );
        assert_eq!(mounts.len(), 2);
        // p1 moves on: two sets; p2 follows: the old one's slot is free, then reused.
        assert!(mounts.set(&c, "p1", Some(&two), 0, None));
        assert!(mounts.set(&c, "p2", Some(&two), 0, None));
        let class_mounts = &mounts.classes[&key_of(&c)];
        assert_eq!(class_mounts.first_used, 0);
        assert_eq!(class_mounts.more.as_ref().map(|m| m.len()), Some(1));
        assert!(mounts.set(&c, "p3", Some(&one), 0, None));
        assert_eq!(
            mounts.classes[&key_of(&c)].first_used,
            1,
            "the free slot reused"
        );
        for pod in ["p1", "p2", "p3"] {
            assert!(mounts.set(&c, pod, None, 0, None));
        }
        assert!(!mounts.set(&c, "p1", None, 0, None));
        assert!(mounts.is_empty() && mounts.classes.is_empty());
    }

    #[test]
    fn pods_come_and_go_and_their_names_are_kept_compact() {
        let mut mounts = Mounts::default();
        let c = class("vault");
        let o = objects(&[("db", "1")]);
        let names: Vec<String> = (0..40).map(|i| format!("web-5d8f7-{i:05}")).collect();
        for name in names.iter().rev() {
            assert!(mounts.set(&c, name, Some(&o), 0, None));
        }
        for name in names.iter().step_by(2) {
            assert!(mounts.set(&c, name, None, 0, None));
        }
        let kept = &mounts.classes[&key_of(&c)];
        assert!(kept.names.len() <= 2 * 20 * names[0].len(), "compacted");
        for (i, name) in names.iter().enumerate() {
            let there = mounts.view(&c, |p| p == name, None).is_some();
            assert_eq!(there, i % 2 == 1, "{name}");
        }
        assert_eq!(mounts.len(), 20);
        let long = "p".repeat(256);
        assert!(
            !mounts.set(&c, &long, Some(&o), 0, None),
            "no Pod has such a name"
        );
    }

    #[test]
    fn a_relist_finds_the_statuses_it_did_not_return_in_its_namespace() {
        let mut mounts = Mounts::default();
        let c = class("vault");
        let elsewhere = ConfigKey::new(ConfigKind::SecretProviderClass, "other", "vault");
        let o = objects(&[("db", "1")]);
        mounts.set(&c, "p1", Some(&o), 0, None);
        mounts.set(&c, "p2", Some(&o), 0, None);
        mounts.set(&elsewhere, "p9", Some(&o), 0, None);
        let relist = mounts.begin_relist();
        assert!(
            !mounts.set(&c, "p1", Some(&o), 0, Some(relist)),
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
