//! What to write for each Event said, decided in memory (client-go's `EventCorrelator`):
//! the same object, type, reason and message again is one Event whose count and
//! lastTimestamp grow (a series); the same Warning about more than
//! [`OWN_EVENTS_PER_GROUP`] objects with one cause (2,000 workloads missing one ConfigMap)
//! is one Event on the cause that names how many, beside the first few objects' own; an
//! object that keeps being warned about is spam-filtered as client-go does (25 Warnings at
//! once, then one every 5 minutes), while Normal Events (every rollout's `ConfigChanged`)
//! are never filtered: a repeated one is one more occurrence of its series. The series of
//! an object or a namespace that is gone are dropped at once. The series waiting to be written form a bounded queue, and
//! the writes of a series coalesce: a burst is a few requests, not one per occurrence.
//! Pure: every decision takes `now`; `post.rs` does the I/O.

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::{Hash, Hasher};
use std::time::{Duration, Instant};

use sha2::{Digest as _, Sha256};

use super::{EventType, ObjectRef};

/// Objects of one group that get an Event of their own before the rest are summed up on
/// the cause (client-go's `defaultAggregateMaxEvents`).
pub(crate) const OWN_EVENTS_PER_GROUP: usize = 10;
/// A group is forgotten this long after its last occurrence (client-go's
/// `defaultAggregateIntervalInSeconds`).
const GROUP_INTERVAL: Duration = Duration::from_secs(600);
/// Per object: this many Events at once, then one every [`SPAM_REFILL`] (client-go's
/// `defaultSpamBurst` and `defaultSpamQPS`).
const SPAM_BURST: f64 = 25.0;
const SPAM_REFILL: Duration = Duration::from_secs(300);
/// Series remembered (client-go's `maxLruCacheEntries`); the least recently said go first.
const MAX_SERIES: usize = 4096;
const MAX_GROUPS: usize = 1024;
/// Series waiting to be written (client-go's `maxQueuedEvents`): past it, a new one is
/// dropped and counted; one already waiting still takes more occurrences.
pub(crate) const MAX_QUEUED: usize = 1000;
/// Objects named in a summary's message.
const NAMED_IN_SUMMARY: usize = 3;
/// One series is written at most this often: the occurrences in between (a summary that
/// grows with a burst) go into its next write.
const SERIES_EVERY: Duration = Duration::from_secs(1);

/// What one Event says.
#[derive(Debug, Clone)]
pub(crate) struct Said<'a> {
    pub about: &'a ObjectRef,
    pub kind: EventType,
    pub reason: &'a str,
    pub message: &'a str,
    /// The object that caused it (the ConfigMap a workload misses): similar Warnings about
    /// many objects with one cause are summed up in one Event on it.
    pub cause: Option<&'a ObjectRef>,
}

/// What became of an Event said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fate {
    /// Its object's own Event (new, or a series whose count grows) will be written.
    Own,
    /// Counted in the Event on its cause; `first` for the first object summed up there.
    Summed { first: bool },
    /// Not written: `queue_full` or `spam`.
    Dropped(&'static str),
}

/// What the API server holds for a series, as far as wavelet knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stored {
    /// Not looked up yet: a Warning after a restart may be there already.
    Unknown,
    Absent,
    /// The Event exists with this count.
    Count(u32),
}

/// One Event object in the API server and the occurrences not written to it yet.
#[derive(Debug, Clone)]
pub(crate) struct Series {
    pub name: String,
    pub about: ObjectRef,
    pub kind: EventType,
    pub reason: String,
    /// The text to write (a summary's grows with its group).
    pub message: String,
    /// First and last occurrence, Unix seconds.
    pub first: u64,
    pub last: u64,
    pub pending: u32,
    pub stored: Stored,
    queued: bool,
    said_at: Instant,
    /// The group whose summary this series is.
    summary_of: Option<u64>,
    /// When it was last taken to be written.
    written_at: Option<Instant>,
}

/// A write the poster is to make: the series as it stands, its pending occurrences taken.
#[derive(Debug, Clone)]
pub(crate) struct Write {
    pub key: u64,
    pub series: Series,
}

#[derive(Debug)]
struct Group {
    members: HashSet<u64>,
    /// Members with an Event of their own, and the keys of those series.
    own: HashSet<u64>,
    own_series: Vec<u64>,
    /// An Event on the cause was found from before a restart: every member is summed.
    closed: bool,
    named: Vec<String>,
    last: Instant,
    /// What every member says.
    message: String,
    /// The first member summed up was logged.
    announced: bool,
}

#[derive(Debug)]
struct Spam {
    tokens: f64,
    at: Instant,
    /// Whom the bucket is for: it goes with the object or its namespace.
    about: ObjectRef,
}

/// The correlator's memory and the queue of series to write.
#[derive(Debug, Default)]
pub(crate) struct Correlator {
    series: HashMap<u64, Series>,
    groups: HashMap<u64, Group>,
    spam: HashMap<u64, Spam>,
    queue: VecDeque<u64>,
    /// Namespaces being deleted (Terminating): an Event there would be refused, so none
    /// is queued. Each leaves the set when its deletion completes.
    terminating: HashSet<String>,
}

fn key_of(parts: &[&str]) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    parts.hash(&mut hasher);
    hasher.finish()
}

fn object_parts(about: &ObjectRef) -> [&str; 5] {
    [
        &about.api_version,
        &about.kind,
        &about.namespace,
        &about.name,
        &about.uid,
    ]
}

fn type_name(kind: EventType) -> &'static str {
    match kind {
        EventType::Normal => "Normal",
        EventType::Warning => "Warning",
    }
}

/// The Event's name: the object's, then a digest of what the Event says, so the same
/// series has the same name across restarts (`post.rs` looks a Warning up before writing
/// it). Valid as a DNS subdomain: at most 253 characters.
pub(crate) fn event_name(
    about: &ObjectRef,
    kind: EventType,
    reason: &str,
    message: &str,
) -> String {
    let mut digest = Sha256::new();
    for part in object_parts(about)
        .iter()
        .chain(&[type_name(kind), reason, message])
    {
        digest.update(part.as_bytes());
        digest.update([0]);
    }
    let digest = digest.finalize();
    let suffix: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    let mut prefix: &str = &about.name;
    if prefix.len() > 253 - 17 {
        let mut end = 253 - 17;
        while !prefix.is_char_boundary(end) {
            end -= 1;
        }
        prefix = &prefix[..end];
    }
    let prefix = prefix.trim_end_matches(['-', '.']);
    format!("{prefix}.{suffix}")
}

/// "ConfigMissing for 2000 objects (StatefulSet load/web-0, ... and 1997 more): MESSAGE"
fn summary_text(reason: &str, count: usize, named: &[String], message: &str) -> String {
    let rest = count.saturating_sub(named.len());
    let names = if rest > 0 {
        format!("{} and {rest} more", named.join(", "))
    } else {
        named.join(", ")
    };
    format!("{reason} for {count} objects ({names}): {message}")
}

impl Correlator {
    /// Takes one Event said at `now` (`wall`: Unix seconds).
    pub(crate) fn observe(&mut self, said: &Said, now: Instant, wall: u64) -> Fate {
        if self.terminating.contains(&said.about.namespace) {
            return Fate::Dropped("gone");
        }
        let own = key_of(
            &[
                &object_parts(said.about)[..],
                &[type_name(said.kind), said.reason, said.message],
            ]
            .concat(),
        );
        if let Some(cause) = said.cause {
            if let Some(fate) = self.join_group(said, cause, own, now, wall) {
                return fate;
            }
        }
        // Only Warnings said over and over are spam: every Normal Event (a rollout's
        // ConfigChanged, a replacement's PodsReplaced) is a decision and keeps its record,
        // at worst as one more occurrence of its series.
        if said.kind == EventType::Warning && !self.spam_allows(said.about, said.kind, now) {
            return Fate::Dropped("spam");
        }
        match self.add(own, said.about, said, said.message, 1, now, wall) {
            true => Fate::Own,
            false => Fate::Dropped("queue_full"),
        }
    }

    /// Said with a cause: `None` when the object gets (or has) an Event of its own (the
    /// series `own`), otherwise what became of it in the summary.
    fn join_group(
        &mut self,
        said: &Said,
        cause: &ObjectRef,
        own: u64,
        now: Instant,
        wall: u64,
    ) -> Option<Fate> {
        let group_key = key_of(
            &[
                &object_parts(cause)[..],
                &[type_name(said.kind), said.reason, said.message],
            ]
            .concat(),
        );
        let member = key_of(&object_parts(said.about));
        // Named apart from any Event of the cause's own.
        let summary_of = format!("summary of: {}", said.message);
        let summed = Said {
            about: cause,
            cause: None,
            message: &summary_of,
            ..said.clone()
        };
        let summary = key_of(
            &[
                &object_parts(cause)[..],
                &[type_name(said.kind), said.reason, &summary_of],
            ]
            .concat(),
        );
        let fresh = self
            .groups
            .get(&group_key)
            .is_none_or(|g| now.saturating_duration_since(g.last) > GROUP_INTERVAL);
        if fresh {
            self.make_room_for_a_group();
            self.groups.insert(
                group_key,
                Group {
                    members: HashSet::new(),
                    own: HashSet::new(),
                    own_series: Vec::new(),
                    closed: false,
                    named: Vec::new(),
                    last: now,
                    message: said.message.into(),
                    announced: false,
                },
            );
            // Queued ahead of the members' own Events, with nothing to write yet: a
            // Warning's summary is looked up first, and one found (from before a restart)
            // takes the members instead of their own Events (`stored`).
            let text = summary_text(said.reason, 0, &[], said.message);
            if !self.add(summary, cause, &summed, &text, 0, now, wall) {
                return Some(Fate::Dropped("queue_full"));
            }
            if let Some(series) = self.series.get_mut(&summary) {
                series.summary_of = Some(group_key);
            }
        }
        let group = self.groups.get_mut(&group_key).expect("present");
        group.last = now;
        if group.members.insert(member) && group.named.len() < NAMED_IN_SUMMARY {
            group.named.push(format!(
                "{} {}/{}",
                said.about.kind, said.about.namespace, said.about.name
            ));
        }
        let has_own = group.own.contains(&member);
        if !group.closed && (has_own || group.own.len() < OWN_EVENTS_PER_GROUP) {
            if !has_own {
                group.own.insert(member);
                group.own_series.push(own);
            }
            return None;
        }
        let first = !group.announced;
        group.announced = true;
        let text = summary_text(said.reason, group.members.len(), &group.named, said.message);
        let added = self.add(summary, cause, &summed, &text, 1, now, wall);
        if let Some(series) = self.series.get_mut(&summary) {
            series.summary_of = Some(group_key);
        }
        Some(match added {
            true => Fate::Summed { first },
            false => Fate::Dropped("queue_full"),
        })
    }

    /// One more occurrence of the series `key`, queued for writing; false when the queue
    /// is full and the series was not in it.
    #[allow(clippy::too_many_arguments)]
    fn add(
        &mut self,
        key: u64,
        about: &ObjectRef,
        said: &Said,
        text: &str,
        occurrences: u32,
        now: Instant,
        wall: u64,
    ) -> bool {
        if !self.series.contains_key(&key) {
            if self.queue.len() >= MAX_QUEUED {
                return false;
            }
            self.make_room_for_a_series();
            self.series.insert(
                key,
                Series {
                    // A summary's name follows what its members say, not its growing text.
                    name: event_name(about, said.kind, said.reason, said.message),
                    about: about.clone(),
                    kind: said.kind,
                    reason: said.reason.into(),
                    message: String::new(),
                    first: wall,
                    last: wall,
                    pending: 0,
                    stored: match said.kind {
                        EventType::Warning => Stored::Unknown,
                        EventType::Normal => Stored::Absent,
                    },
                    queued: false,
                    said_at: now,
                    summary_of: None,
                    written_at: None,
                },
            );
        }
        let queue_full = self.queue.len() >= MAX_QUEUED;
        let series = self.series.get_mut(&key).expect("present");
        if !series.queued && queue_full {
            return false;
        }
        series.message = text.into();
        series.pending += occurrences;
        series.last = wall;
        series.said_at = now;
        if !series.queued {
            series.queued = true;
            self.queue.push_back(key);
        }
        true
    }

    fn spam_allows(&mut self, about: &ObjectRef, kind: EventType, now: Instant) -> bool {
        let key = key_of(&[&object_parts(about)[..], &[type_name(kind)]].concat());
        if self.spam.len() >= MAX_SERIES && !self.spam.contains_key(&key) {
            // Forget the objects whose buckets have filled up again: they are as new.
            self.spam.retain(|_, s| {
                now.saturating_duration_since(s.at).as_secs_f64() / SPAM_REFILL.as_secs_f64()
                    + s.tokens
                    < SPAM_BURST
            });
        }
        let spam = self.spam.entry(key).or_insert_with(|| Spam {
            tokens: SPAM_BURST,
            at: now,
            about: about.clone(),
        });
        let refill =
            now.saturating_duration_since(spam.at).as_secs_f64() / SPAM_REFILL.as_secs_f64();
        spam.tokens = (spam.tokens + refill).min(SPAM_BURST);
        spam.at = now;
        if spam.tokens >= 1.0 {
            spam.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    fn make_room_for_a_series(&mut self) {
        if self.series.len() < MAX_SERIES {
            return;
        }
        let oldest = self
            .series
            .iter()
            .filter(|(_, s)| !s.queued)
            .min_by_key(|(_, s)| s.said_at)
            .map(|(k, _)| *k);
        if let Some(key) = oldest {
            self.series.remove(&key);
        }
    }

    fn make_room_for_a_group(&mut self) {
        if self.groups.len() < MAX_GROUPS {
            return;
        }
        let oldest = self
            .groups
            .iter()
            .min_by_key(|(_, g)| g.last)
            .map(|(k, _)| *k);
        if let Some(key) = oldest {
            self.groups.remove(&key);
        }
    }

    /// The first queued series due at `now` (written more than [`SERIES_EVERY`] ago, or
    /// never), with its pending occurrences taken out of it: `Ok(None)` when nothing is
    /// queued, `Err(at)` when none is due before `at`.
    pub(crate) fn next_due(&mut self, now: Instant) -> Result<Option<Write>, Instant> {
        let due = |s: &Series| s.written_at.is_none_or(|at| now >= at + SERIES_EVERY);
        let position = self
            .queue
            .iter()
            .position(|k| self.series.get(k).is_none_or(due));
        match position {
            Some(i) => {
                let key = self.queue.remove(i).expect("in range");
                Ok(self.take(key, now))
            }
            None => match self
                .queue
                .iter()
                .filter_map(|k| self.series[k].written_at)
                .min()
            {
                Some(at) => Err(at + SERIES_EVERY),
                None => Ok(None),
            },
        }
    }

    /// The next queued series, due or not (shutdown), with its pending occurrences taken.
    pub(crate) fn next_write(&mut self) -> Option<Write> {
        let key = self.queue.pop_front()?;
        self.take(key, Instant::now()).or_else(|| self.next_write())
    }

    fn take(&mut self, key: u64, now: Instant) -> Option<Write> {
        let series = self.series.get_mut(&key)?;
        series.queued = false;
        if series.pending > 0 {
            series.written_at = Some(now);
        }
        let write = Write {
            key,
            series: series.clone(),
        };
        series.pending = 0;
        Some(write)
    }

    /// What the API server holds for `key` after a write or a look-up (`Unknown` after a
    /// failure); `found`: its look-up found an Event written before (by an earlier
    /// process). A summary found from before a restart takes in the members queued for
    /// an Event of their own, and every later one: the restart posts nothing new. A
    /// summary this process created takes no one: its first members keep their own.
    pub(crate) fn stored(&mut self, key: u64, stored: Stored, found: bool) {
        let Some(series) = self.series.get_mut(&key) else {
            return;
        };
        series.stored = stored;
        if !found {
            return;
        }
        let Some(group_key) = series.summary_of else {
            return;
        };
        let Some(group) = self.groups.get_mut(&group_key) else {
            return;
        };
        if group.closed || !matches!(stored, Stored::Count(_)) {
            return;
        }
        group.closed = true;
        let mut folded = 0;
        for own in std::mem::take(&mut group.own_series) {
            let unwritten = self
                .series
                .get(&own)
                .is_some_and(|s| !matches!(s.stored, Stored::Count(_)));
            if unwritten {
                folded += self.series.remove(&own).map_or(0, |s| s.pending);
                self.queue.retain(|k| *k != own);
            }
        }
        if folded > 0 {
            let group = &self.groups[&group_key];
            let summary = self.series.get_mut(&key).expect("present");
            summary.pending += folded;
            summary.message = summary_text(
                &summary.reason,
                group.members.len(),
                &group.named,
                &group.message,
            );
            if !summary.queued {
                summary.queued = true;
                self.queue.push_back(key);
            }
        }
    }

    /// Forgets every series about an object `gone` accepts (deleted, or in a deleted
    /// namespace), queued or not, the groups whose cause it is and its spam bucket: an
    /// Event about it could only be refused. Returns how many queued series went.
    pub(crate) fn drop_about(&mut self, gone: impl Fn(&ObjectRef) -> bool) -> usize {
        self.spam.retain(|_, s| !gone(&s.about));
        let keys: HashSet<u64> = self
            .series
            .iter()
            .filter(|(_, s)| gone(&s.about))
            .map(|(k, _)| *k)
            .collect();
        if keys.is_empty() {
            return 0;
        }
        let before = self.queue.len();
        self.queue.retain(|k| !keys.contains(k));
        let summaries: HashSet<u64> = keys
            .iter()
            .filter_map(|k| self.series.get(k).and_then(|s| s.summary_of))
            .collect();
        self.groups.retain(|g, _| !summaries.contains(g));
        self.series.retain(|k, _| !keys.contains(k));
        before - self.queue.len()
    }

    /// Namespace `namespace` is being deleted: what is queued there goes, and nothing
    /// more is queued there until [`Correlator::namespace_gone`]. How many queued went.
    pub(crate) fn namespace_terminating(&mut self, namespace: &str) -> usize {
        if !self.terminating.contains(namespace) {
            self.terminating.insert(namespace.to_string());
        }
        self.drop_about(|a| a.namespace == namespace)
    }

    /// Namespace `namespace` is gone: nothing of it is remembered.
    pub(crate) fn namespace_gone(&mut self, namespace: &str) -> usize {
        if self.terminating.remove(namespace) && self.terminating.is_empty() {
            self.terminating.shrink_to_fit();
        }
        self.drop_about(|a| a.namespace == namespace)
    }

    /// Series waiting to be written.
    #[cfg(test)]
    pub(crate) fn queued(&self) -> usize {
        self.queue.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::Resource;

    fn workload(n: usize) -> ObjectRef {
        ObjectRef::new(
            &Resource::deployments(),
            "ns",
            &format!("web-{n}"),
            &format!("uid-{n}"),
        )
    }

    fn config() -> ObjectRef {
        ObjectRef::new(&Resource::configmaps(), "ns", "shared", "")
    }

    fn missing<'a>(about: &'a ObjectRef, cause: Option<&'a ObjectRef>) -> Said<'a> {
        Said {
            about,
            kind: EventType::Warning,
            reason: "ConfigMissing",
            message: "Not rolling: ConfigMap ns/shared does not exist.",
            cause,
        }
    }

    fn drain(correlator: &mut Correlator) -> Vec<Write> {
        std::iter::from_fn(|| correlator.next_write()).collect()
    }

    #[test]
    fn a_series_is_written_at_most_once_a_second_with_what_came_meanwhile() {
        let mut c = Correlator::default();
        let t0 = Instant::now();
        let (web, other) = (workload(0), workload(1));
        c.observe(&missing(&web, None), t0, 1);
        assert_eq!(c.next_due(t0).unwrap().unwrap().series.pending, 1);
        c.observe(&missing(&web, None), t0, 1);
        c.observe(&missing(&web, None), t0, 1);
        c.observe(&missing(&other, None), t0, 1);
        let next = c.next_due(t0).unwrap().unwrap();
        assert_eq!(next.series.about, other, "the one due goes first");
        assert_eq!(c.next_due(t0).err(), Some(t0 + SERIES_EVERY));
        let later = c.next_due(t0 + SERIES_EVERY).unwrap().unwrap();
        assert_eq!((later.series.about, later.series.pending), (web, 2));
        assert!(c.next_due(t0 + SERIES_EVERY).unwrap().is_none());
    }

    #[test]
    fn the_same_event_again_is_one_series_whose_count_grows() {
        let mut c = Correlator::default();
        let t0 = Instant::now();
        let web = workload(0);
        for n in 0..3 {
            assert_eq!(c.observe(&missing(&web, None), t0, 100 + n), Fate::Own);
        }
        let writes = drain(&mut c);
        assert_eq!(writes.len(), 1, "three occurrences, one write");
        let series = &writes[0].series;
        assert_eq!((series.pending, series.first, series.last), (3, 100, 102));
        assert_eq!(
            series.stored,
            Stored::Unknown,
            "a Warning is looked up first"
        );
        c.stored(writes[0].key, Stored::Count(3), true);
        assert_eq!(c.observe(&missing(&web, None), t0, 200), Fate::Own);
        let again = drain(&mut c);
        assert_eq!(again[0].series.stored, Stored::Count(3));
        assert_eq!(
            (again[0].series.pending, again[0].series.name.clone()),
            (1, series.name.clone())
        );
    }

    #[test]
    fn a_burst_about_many_objects_with_one_cause_is_a_few_own_events_and_one_on_the_cause() {
        let mut c = Correlator::default();
        let t0 = Instant::now();
        let cause = config();
        let objects: Vec<ObjectRef> = (0..2000).map(workload).collect();
        let fates: Vec<Fate> = objects
            .iter()
            .map(|o| c.observe(&missing(o, Some(&cause)), t0, 100))
            .collect();
        assert!(fates[..OWN_EVENTS_PER_GROUP]
            .iter()
            .all(|f| *f == Fate::Own));
        assert_eq!(fates[OWN_EVENTS_PER_GROUP], Fate::Summed { first: true });
        assert!(fates[OWN_EVENTS_PER_GROUP + 1..]
            .iter()
            .all(|f| *f == Fate::Summed { first: false }));
        let writes = drain(&mut c);
        assert_eq!(writes.len(), OWN_EVENTS_PER_GROUP + 1);
        // The summary was queued first, to be looked up before the members' own Events.
        let summary = &writes[0].series;
        assert_eq!(summary.about, cause);
        assert_eq!(summary.pending, 1990);
        assert_eq!(
            summary.message,
            "ConfigMissing for 2000 objects (Deployment ns/web-0, Deployment ns/web-1, Deployment ns/web-2 and 1997 more): Not rolling: ConfigMap ns/shared does not exist."
        );
        assert!(writes[1..]
            .iter()
            .all(|w| w.series.about.kind == "Deployment" && w.series.pending == 1));
        // An object with an Event of its own keeps it.
        assert_eq!(
            c.observe(&missing(&objects[3], Some(&cause)), t0, 101),
            Fate::Own
        );
    }

    /// Seen under load: the writer took the summary only after its eleventh member had
    /// come, so it was created (not looked up) and took the first ten members' own
    /// Events into its count; they were never written.
    #[test]
    fn a_summary_this_process_created_leaves_the_first_members_their_own_events() {
        let mut c = Correlator::default();
        let t0 = Instant::now();
        let cause = config();
        let objects: Vec<ObjectRef> = (0..50).map(workload).collect();
        for o in &objects {
            c.observe(&missing(o, Some(&cause)), t0, 100);
        }
        let summary = c.next_write().unwrap();
        assert!(
            summary.series.pending > 0,
            "members summed before it was taken"
        );
        // Looked up absent, then created by this process.
        c.stored(summary.key, Stored::Count(summary.series.pending), false);
        let writes = drain(&mut c);
        let own = writes
            .iter()
            .filter(|w| w.series.about.kind == "Deployment")
            .count();
        assert_eq!(
            own, OWN_EVENTS_PER_GROUP,
            "the first members' own Events: {writes:#?}"
        );
    }

    #[test]
    fn a_summary_found_from_before_a_restart_takes_every_member_and_nothing_is_posted_anew() {
        let mut c = Correlator::default();
        let t0 = Instant::now();
        let cause = config();
        let objects: Vec<ObjectRef> = (0..50).map(workload).collect();
        // The writer looks the summary up first; members arrive meanwhile.
        let first = c.observe(&missing(&objects[0], Some(&cause)), t0, 100);
        assert_eq!(first, Fate::Own);
        let lookup = c.next_write().unwrap();
        assert_eq!(
            (lookup.series.pending, lookup.series.stored),
            (0, Stored::Unknown)
        );
        for o in &objects[1..] {
            c.observe(&missing(o, Some(&cause)), t0, 100);
        }
        c.stored(lookup.key, Stored::Count(1990), true);
        let writes = drain(&mut c);
        assert_eq!(writes.len(), 1, "only the summary: {writes:#?}");
        assert_eq!(writes[0].series.pending, 50);
        assert_eq!(writes[0].series.stored, Stored::Count(1990));
        assert!(writes[0]
            .series
            .message
            .starts_with("ConfigMissing for 50 objects"));
        assert_eq!(
            c.observe(&missing(&objects[0], Some(&cause)), t0, 101),
            Fate::Summed { first: false }
        );
    }

    #[test]
    fn a_summary_not_found_leaves_the_first_members_their_own_events() {
        let mut c = Correlator::default();
        let t0 = Instant::now();
        let cause = config();
        let web = workload(0);
        c.observe(&missing(&web, Some(&cause)), t0, 100);
        let lookup = c.next_write().unwrap();
        c.stored(lookup.key, Stored::Absent, false);
        let writes = drain(&mut c);
        assert_eq!(writes.len(), 1);
        assert_eq!(writes[0].series.about, web);
    }

    #[test]
    fn a_group_is_new_again_ten_minutes_after_its_last_occurrence() {
        let mut c = Correlator::default();
        let t0 = Instant::now();
        let cause = config();
        let objects: Vec<ObjectRef> = (0..20).map(workload).collect();
        for o in &objects {
            c.observe(&missing(o, Some(&cause)), t0, 100);
        }
        let later = t0 + GROUP_INTERVAL + Duration::from_secs(1);
        assert_eq!(
            c.observe(&missing(&objects[15], Some(&cause)), later, 800),
            Fate::Own
        );
    }

    #[test]
    fn names_are_the_same_for_the_same_series_and_valid_subdomains() {
        let web = workload(0);
        let name = event_name(&web, EventType::Warning, "ConfigMissing", "m");
        assert_eq!(
            name,
            event_name(&web, EventType::Warning, "ConfigMissing", "m")
        );
        assert_ne!(
            name,
            event_name(&web, EventType::Warning, "ConfigMissing", "n")
        );
        assert!(
            name.starts_with("web-0.") && name.len() == "web-0.".len() + 16,
            "{name}"
        );
        let long = ObjectRef::new(
            &Resource::deployments(),
            "ns",
            &format!("{}-x", "a".repeat(250)),
            "u",
        );
        let name = event_name(&long, EventType::Normal, "R", "m");
        assert!(name.len() <= 253, "{}", name.len());
        let trailing = ObjectRef::new(
            &Resource::deployments(),
            "ns",
            &format!("{}-x", "a".repeat(235)),
            "u",
        );
        assert!(!event_name(&trailing, EventType::Normal, "R", "m").contains("-."));
    }

    #[test]
    fn an_object_talked_about_too_often_is_spam_filtered_and_allowed_again_later() {
        let mut c = Correlator::default();
        let t0 = Instant::now();
        let web = workload(0);
        let said = |n: usize| format!("message {n}");
        let messages: Vec<String> = (0..30).map(said).collect();
        let fates: Vec<Fate> = messages
            .iter()
            .map(|m| {
                c.observe(
                    &Said {
                        message: m,
                        ..missing(&web, None)
                    },
                    t0,
                    100,
                )
            })
            .collect();
        assert_eq!(fates.iter().filter(|f| **f == Fate::Own).count(), 25);
        assert_eq!(fates[25], Fate::Dropped("spam"));
        let later = t0 + SPAM_REFILL;
        let fate = c.observe(
            &Said {
                message: "another",
                ..missing(&web, None)
            },
            later,
            400,
        );
        assert_eq!(fate, Fate::Own);
    }

    #[test]
    fn the_queue_is_bounded_but_a_queued_series_still_counts_more() {
        let mut c = Correlator::default();
        let t0 = Instant::now();
        let objects: Vec<ObjectRef> = (0..MAX_QUEUED + 1).map(workload).collect();
        for o in &objects[..MAX_QUEUED] {
            assert_eq!(c.observe(&missing(o, None), t0, 1), Fate::Own);
        }
        assert_eq!(c.queued(), MAX_QUEUED);
        assert_eq!(
            c.observe(&missing(&objects[MAX_QUEUED], None), t0, 1),
            Fate::Dropped("queue_full")
        );
        assert_eq!(c.observe(&missing(&objects[0], None), t0, 2), Fate::Own);
        assert_eq!(c.next_write().unwrap().series.pending, 2);
    }

    fn changed(about: &ObjectRef) -> Said<'_> {
        Said {
            about,
            kind: EventType::Normal,
            reason: "ConfigChanged",
            message: "ConfigMap ns/app changed.",
            cause: None,
        }
    }

    #[test]
    fn every_rollout_event_is_counted_however_often_and_only_warnings_are_spam() {
        let mut c = Correlator::default();
        let web = workload(1);
        let t0 = Instant::now();
        // A ConfigMap edited every minute for an hour: 60 rollouts, 60 occurrences.
        let mut counted = 0;
        for minute in 0..60u64 {
            let now = t0 + Duration::from_secs(60 * minute);
            assert_eq!(
                c.observe(&changed(&web), now, 1000 + 60 * minute),
                Fate::Own
            );
            counted += drain(&mut c).iter().map(|w| w.series.pending).sum::<u32>();
        }
        assert_eq!(counted, 60, "every rollout recorded");
        // Warnings about one object, said over and over, are filtered past the burst.
        let fates: Vec<Fate> = (0..30)
            .map(|i| {
                let message = format!("warning {i}");
                let said = Said {
                    message: &message,
                    ..missing(&web, None)
                };
                c.observe(&said, t0, 1000)
            })
            .collect();
        assert_eq!(fates.iter().filter(|f| **f == Fate::Own).count(), 25);
        assert_eq!(fates[29], Fate::Dropped("spam"));
    }

    #[test]
    fn the_series_of_a_gone_namespace_or_object_are_dropped_at_once() {
        let mut c = Correlator::default();
        let t0 = Instant::now();
        let cause = config();
        let (web1, web2) = (workload(1), workload(2));
        let elsewhere = ObjectRef::new(&Resource::deployments(), "other", "web-1", "uid-9");
        c.observe(&missing(&web1, Some(&cause)), t0, 1000);
        c.observe(&missing(&web2, Some(&cause)), t0, 1000);
        c.observe(&changed(&elsewhere), t0, 1000);
        assert_eq!(
            c.queued(),
            4,
            "the summary, two own Events, the other namespace's"
        );
        // web-2 deleted: its own series goes, nothing else.
        let dropped =
            c.drop_about(|a| a.kind == "Deployment" && a.namespace == "ns" && a.name == "web-2");
        assert_eq!(dropped, 1);
        assert_eq!(c.queued(), 3);
        // Namespace ns deleted: the summary on its ConfigMap and web-1's go, with the group.
        assert_eq!(c.drop_about(|a| a.namespace == "ns"), 2);
        assert!(c.groups.is_empty());
        let left = drain(&mut c);
        assert_eq!(left.len(), 1);
        assert_eq!(left[0].series.about.namespace, "other");
        assert_eq!(c.drop_about(|a| a.namespace == "ns"), 0);
    }

    /// Issue 34 item 5: a namespace being deleted takes no more Events (they would be
    /// refused), and forgets it was being deleted once it is gone.
    #[test]
    fn a_terminating_namespace_takes_no_events_and_is_forgotten_when_gone() {
        let mut c = Correlator::default();
        let t0 = Instant::now();
        let web = workload(1);
        let elsewhere = ObjectRef::new(&Resource::deployments(), "other", "web-1", "uid-9");
        c.observe(&missing(&web, None), t0, 1000);
        assert_eq!(c.namespace_terminating("ns"), 1, "its queued Event dropped");
        assert_eq!(
            c.observe(&missing(&web, None), t0, 1001),
            Fate::Dropped("gone")
        );
        assert_eq!(c.observe(&changed(&elsewhere), t0, 1001), Fate::Own);
        assert_eq!(c.queued(), 1);
        c.namespace_gone("ns");
        assert!(c.terminating.is_empty());
        // A namespace of the same name created again takes Events.
        assert_eq!(c.observe(&missing(&web, None), t0, 1002), Fate::Own);
    }

    /// Issue 34 item 5: namespaces created and deleted over and over leave nothing of
    /// theirs behind, the spam filter's buckets included.
    #[test]
    fn nothing_of_a_gone_namespace_is_remembered() {
        let mut c = Correlator::default();
        let t0 = Instant::now();
        let cause = config();
        let web = workload(1);
        let elsewhere = ObjectRef::new(&Resource::deployments(), "other", "web-1", "uid-9");
        c.observe(&missing(&web, Some(&cause)), t0, 1000);
        c.observe(&missing(&elsewhere, None), t0, 1000);
        c.drop_about(|a| a.namespace == "ns");
        let left = |c: &Correlator| -> (usize, usize, usize) {
            (c.series.len(), c.groups.len(), c.spam.len())
        };
        assert_eq!(left(&c), (1, 0, 1), "(series, groups, spam buckets) left");
        c.drop_about(|a| a.namespace == "other");
        assert_eq!(left(&c), (0, 0, 0));
    }

    #[test]
    fn normal_events_are_posted_without_a_lookup() {
        let mut c = Correlator::default();
        let web = workload(0);
        let said = Said {
            kind: EventType::Normal,
            reason: "ConfigChanged",
            ..missing(&web, None)
        };
        c.observe(&said, Instant::now(), 1);
        assert_eq!(c.next_write().unwrap().series.stored, Stored::Absent);
    }
}
