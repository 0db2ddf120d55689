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
//! A fan-out entry is written *before* the workloads of a wave are patched (as delete
//! mode's `replacing` entry is written before the first Pod is touched): which workloads
//! carry the new hash and how their rollouts are doing is on the workloads themselves,
//! and the entry adds what they cannot say: which ones this change released, in which
//! waves, since when the current wave runs, and whether the fan-out is held.
//! A workload id is `<resource>/<namespace>/<name>` (`deployments.apps/shop/web`).

use crate::objects::WorkloadKey;

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
}
