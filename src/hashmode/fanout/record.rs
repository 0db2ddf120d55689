//! The entries safe fan-out keeps in `wavelet-state`, one line each, so that a restarted
//! wavelet (or a new leader) knows what the last one decided:
//!
//! ```text
//! fanout.configmap.<ns>.<name>: <data hash> since=<RFC 3339> waves=<id>,<id>;<id>,...
//!                               [skipped=<id>,...] [held=<id> reason=<text to the end>]
//! urgent.configmap.<ns>.<name>: <data hash> <the wavelet.dev/urgent value>
//! pause:                        paused since=<RFC 3339>
//! ```
//!
//! Which workloads carry the new hash and how their rollouts are doing is on the workloads
//! themselves; the entry adds what they cannot say: which ones this change released, in
//! which waves, since when the current wave runs, and whether the fan-out is held. The
//! entry of a second or later wave is written *before* its workloads are patched (as
//! delete mode's `replacing` entry is written before the first Pod is touched). The first
//! wave's is written *after* its PATCHes, off the path of a change's first rollout: each
//! of those PATCHes carries a [`Mark`] on the workload's metadata instead, so the first
//! wave survives a restart that comes before its entry (a new wavelet rebuilds the entry
//! from the marks: `waves::recovered`).
//!
//! ```text
//! wavelet.dev/first-wave-of: <kind>/<ns>/<name> <data hash, 16 hex> <RFC 3339>[; ...]
//! ```
//!
//! A workload id is `<resource>/<namespace>/<name>` (`deployments.apps/shop/web`).

use crate::objects::{ConfigKey, WorkloadKey};

/// The prefix of fan-out entries.
pub const FANOUT: &str = "fanout";
/// The prefix of urgent grants.
pub const URGENT: &str = "urgent";

/// How a workload is named in an entry.
pub fn workload_id(key: &WorkloadKey) -> String {
    format!("{}/{}/{}", key.resource, key.namespace, key.name)
}

/// A workload id as people read it: `deployments.apps/shop/web` → `deployment shop/web`.
pub fn display_id(id: &str) -> String {
    let mut parts = id.splitn(3, '/');
    match (parts.next(), parts.next(), parts.next()) {
        (Some(resource), Some(ns), Some(name)) => {
            let plural = resource.split('.').next().unwrap_or(resource);
            format!("{} {ns}/{name}", plural.strip_suffix('s').unwrap_or(plural))
        }
        _ => id.to_string(),
    }
}

/// The fan-out of one change of a ConfigMap or Secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The data hash of the ConfigMap/Secret this fan-out rolls.
    pub hash: String,
    /// When the current (last) wave was released, Unix seconds.
    pub since: u64,
    /// The released waves, in order; the last is the current one.
    pub waves: Vec<Vec<String>>,
    /// Failed workloads a `wavelet resume` went past: they no longer hold anything.
    pub skipped: Vec<String>,
    pub held: Option<Hold>,
}

/// Why a fan-out stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hold {
    /// The workload that failed its rollout.
    pub workload: String,
    pub reason: String,
}

impl Record {
    /// Whether this workload was released by some wave.
    pub fn released(&self, id: &str) -> bool {
        self.waves.iter().flatten().any(|w| w == id)
    }

    /// The number of the wave that released `id` (1 for the first).
    pub fn wave_of(&self, id: &str) -> Option<usize> {
        self.waves
            .iter()
            .position(|w| w.iter().any(|x| x == id))
            .map(|i| i + 1)
    }

    /// `wavelet resume` of a held fan-out: the failed workload is skipped and the current
    /// wave is judged again from `now` (so the next one is released once the rest of it
    /// is healthy). `None` when it is not held.
    pub fn resumed(&self, now: u64) -> Option<Record> {
        let hold = self.held.as_ref()?;
        let mut record = self.clone();
        record.held = None;
        if !record.skipped.contains(&hold.workload) {
            record.skipped.push(hold.workload.clone());
        }
        record.since = now;
        Some(record)
    }

    pub fn encode(&self) -> String {
        let mut line = format!(
            "{} since={} waves={}",
            self.hash,
            crate::time::rfc3339(self.since),
            self.waves
                .iter()
                .map(|w| w.join(","))
                .collect::<Vec<_>>()
                .join(";")
        );
        if !self.skipped.is_empty() {
            line.push_str(&format!(" skipped={}", self.skipped.join(",")));
        }
        if let Some(hold) = &self.held {
            // The reason is free text to the end of the line, on one line.
            let reason = hold.reason.replace(['\n', '\r'], " ");
            line.push_str(&format!(" held={} reason={reason}", hold.workload));
        }
        line
    }

    /// Parses [`Record::encode`]'s form; `None` for anything else.
    pub fn decode(text: &str) -> Option<Record> {
        let (head, reason) = match text.split_once(" reason=") {
            Some((head, reason)) => (head, Some(reason)),
            None => (text, None),
        };
        let mut words = head.split(' ');
        let hash = words.next().filter(|h| !h.is_empty())?.to_string();
        let since = crate::time::parse_rfc3339(words.next()?.strip_prefix("since=")?)?;
        let waves = words
            .next()?
            .strip_prefix("waves=")?
            .split(';')
            .map(|w| {
                w.split(',')
                    .filter(|x| !x.is_empty())
                    .map(String::from)
                    .collect()
            })
            .collect();
        let mut record = Record {
            hash,
            since,
            waves,
            skipped: Vec::new(),
            held: None,
        };
        for word in words {
            if let Some(list) = word.strip_prefix("skipped=") {
                record.skipped = list.split(',').map(String::from).collect();
            } else if let Some(workload) = word.strip_prefix("held=") {
                record.held = Some(Hold {
                    workload: workload.to_string(),
                    reason: reason?.to_string(),
                });
            } else {
                return None;
            }
        }
        (record.held.is_some() == reason.is_some()).then_some(record)
    }
}

/// What a rollout released by the first wave of a fan-out carries on the workload's
/// metadata (`wavelet.dev/first-wave-of`), one per fan-out that released it so: the
/// ConfigMap/Secret, its change (the first 16 hex digits of its data hash, as the record's
/// `hash`; the first 8 are in the fan-out's Events already) and when the wave was released.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mark {
    /// `<kind>/<namespace>/<name>` of the ConfigMap/Secret.
    pub object: String,
    /// The first 16 hex digits of the change's data hash.
    pub change: String,
    /// When the wave was released, Unix seconds.
    pub since: u64,
}

/// How many hex digits of the data hash a [`Mark`] carries.
const MARK_HASH: usize = 16;

impl Mark {
    /// The mark of wave 1 of `config`'s change `hash`, released at `since`.
    pub fn new(config: &ConfigKey, hash: &str, since: u64) -> Mark {
        Mark {
            object: Mark::object_of(config),
            change: hash.get(..MARK_HASH).unwrap_or(hash).to_string(),
            since,
        }
    }

    fn object_of(config: &ConfigKey) -> String {
        format!(
            "{}/{}/{}",
            config.kind.as_str(),
            config.namespace,
            config.name
        )
    }

    /// Whether it names `config` (whichever change of it).
    pub fn names(&self, config: &ConfigKey) -> bool {
        self.object == Mark::object_of(config)
    }

    /// Whether it is of the change whose data hash is `hash`.
    pub fn is_change(&self, hash: &str) -> bool {
        self.change.len() == MARK_HASH.min(hash.len()) && hash.starts_with(self.change.as_str())
    }

    /// The mark of a first wave of `config` in a workload's `wavelet.dev/first-wave-of`
    /// (whichever change of it), if there is one.
    pub fn of(annotation: Option<&str>, config: &ConfigKey) -> Option<Mark> {
        Mark::decode(annotation?)
            .into_iter()
            .find(|m| m.names(config))
    }

    /// The annotation's value for these marks.
    pub fn encode(marks: &[Mark]) -> String {
        marks
            .iter()
            .map(|m| {
                format!(
                    "{} {} {}",
                    m.object,
                    m.change,
                    crate::time::rfc3339(m.since)
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// The marks an annotation's value holds; parts that do not read as one are skipped
    /// (they then mark nothing, as if absent).
    pub fn decode(text: &str) -> Vec<Mark> {
        text.split(';')
            .filter_map(|part| {
                let mut words = part.split_whitespace();
                let mark = Mark {
                    object: words.next()?.to_string(),
                    change: words.next()?.to_string(),
                    since: crate::time::parse_rfc3339(words.next()?)?,
                };
                words.next().is_none().then_some(mark)
            })
            .collect()
    }
}

/// An urgent change let through: the data hash and the annotation's value it was let
/// through for (a later change needs a new value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Urgent {
    pub hash: String,
    pub value: String,
}

impl Urgent {
    pub fn encode(&self) -> String {
        format!("{} {}", self.hash, self.value)
    }

    pub fn decode(text: &str) -> Option<Urgent> {
        let (hash, value) = text.split_once(' ')?;
        Some(Urgent {
            hash: hash.to_string(),
            value: value.to_string(),
        })
    }
}

/// The global pause's entry.
pub fn pause_entry(since: u64) -> String {
    format!("paused since={}", crate::time::rfc3339(since))
}

/// Since when the global pause holds, from its entry (any entry pauses; an unreadable
/// time is 0).
pub fn paused_since(entry: &str) -> u64 {
    entry
        .split_once("since=")
        .and_then(|(_, t)| crate::time::parse_rfc3339(t.trim()))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_round_trips_through_its_line_with_waves_skips_and_a_hold() {
        let mut record = Record {
            hash: "ab12".into(),
            since: 1_795_317_280,
            waves: vec![
                vec!["deployments.apps/shop/a".into()],
                vec![
                    "deployments.apps/shop/b".into(),
                    "statefulsets.apps/shop/c".into(),
                ],
            ],
            skipped: vec![],
            held: None,
        };
        assert_eq!(
            record.encode(),
            "ab12 since=2026-11-22T03:14:40Z waves=deployments.apps/shop/a;deployments.apps/shop/b,statefulsets.apps/shop/c"
        );
        assert_eq!(Record::decode(&record.encode()), Some(record.clone()));
        record.skipped = vec!["deployments.apps/shop/a".into()];
        record.held = Some(Hold {
            workload: "deployments.apps/shop/b".into(),
            reason:
                "exceeded its progress deadline (ReplicaSet \"b-1\" has timed out)\nprogressing"
                    .into(),
        });
        let line = record.encode();
        assert!(!line.contains('\n'));
        let decoded = Record::decode(&line).unwrap();
        assert_eq!(
            decoded.held.as_ref().unwrap().reason,
            "exceeded its progress deadline (ReplicaSet \"b-1\" has timed out) progressing"
        );
        assert_eq!(decoded.skipped, record.skipped);
        assert_eq!(decoded.wave_of("statefulsets.apps/shop/c"), Some(2));
        assert!(decoded.released("deployments.apps/shop/a"));
        assert!(!decoded.released("deployments.apps/shop/z"));
    }

    #[test]
    fn a_resumed_record_skips_the_failed_workload_and_restarts_the_clock() {
        let held = Record {
            hash: "h".into(),
            since: 10,
            waves: vec![vec!["a".into()]],
            skipped: vec![],
            held: Some(Hold {
                workload: "a".into(),
                reason: "failed".into(),
            }),
        };
        let resumed = held.resumed(99).unwrap();
        assert_eq!(
            (resumed.held, resumed.skipped, resumed.since),
            (None, vec!["a".to_string()], 99)
        );
        assert_eq!(
            held.resumed(99).unwrap().resumed(100),
            None,
            "not held any more"
        );
    }

    #[test]
    fn workload_ids_read_as_kind_namespace_and_name() {
        assert_eq!(
            display_id("deployments.apps/shop/web"),
            "deployment shop/web"
        );
        assert_eq!(display_id("rollouts.argoproj.io/a/b"), "rollout a/b");
        assert_eq!(display_id("odd"), "odd");
    }

    #[test]
    fn unreadable_records_decode_to_none() {
        for text in [
            "",
            "ab12",
            "ab12 since=yesterday waves=a",
            "ab12 since=2026-11-22T03:14:40Z waves=a extra",
            "ab12 since=2026-11-22T03:14:40Z waves=a reason=x",
        ] {
            assert_eq!(Record::decode(text), None, "{text:?}");
        }
    }

    #[test]
    fn urgent_grants_and_the_pause_entry_read_back() {
        let urgent = Urgent {
            hash: "h".into(),
            value: "INC-42 rotate now".into(),
        };
        assert_eq!(Urgent::decode(&urgent.encode()), Some(urgent));
        assert_eq!(paused_since(&pause_entry(1_795_317_280)), 1_795_317_280);
        assert_eq!(paused_since("true"), 0);
    }

    #[test]
    fn marks_name_the_object_and_the_change_and_read_back_from_their_annotation() {
        let cfg = ConfigKey::new(crate::objects::ConfigKind::ConfigMap, "shop", "cfg");
        let tls = ConfigKey::new(crate::objects::ConfigKind::Secret, "shop", "tls");
        let h = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
        let marks = vec![
            Mark::new(&cfg, h, 1_795_317_280),
            Mark::new(&tls, "fedcba9876543210ff", 1_795_317_281),
        ];
        let text = Mark::encode(&marks);
        assert_eq!(
            text,
            "configmap/shop/cfg 0123456789abcdef 2026-11-22T03:14:40Z; secret/shop/tls fedcba9876543210 2026-11-22T03:14:41Z"
        );
        assert_eq!(Mark::decode(&text), marks);
        assert!(marks[0].names(&cfg) && marks[0].is_change(h));
        assert!(!marks[0].names(&tls), "another object");
        assert!(
            !marks[0].is_change(&h.replace("0123", "9999")),
            "another change"
        );
        assert!(marks[1].is_change("fedcba9876543210ee"));
        // What does not read as a mark marks nothing.
        assert_eq!(Mark::decode("configmap/shop/cfg 0123 yesterday"), vec![]);
        assert_eq!(Mark::decode(""), vec![]);
        assert_eq!(
            Mark::decode("junk; configmap/shop/cfg 0123456789abcdef 2026-11-22T03:14:40Z"),
            marks[..1].to_vec()
        );
    }
}
