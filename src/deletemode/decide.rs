//! Delete mode's decisions, as pure functions tested with literal inputs: which strategy,
//! whether a selector may be acted on, which Pods count as created before a change,
//! whether the Pods are Ready again, and how a replacement is described to people.

use std::collections::{HashSet, VecDeque};
use std::fmt;

use crate::annotations;
use crate::objects::Pod;
use crate::selector::Selector;

/// `wavelet.dev/pod-delete-strategy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// The Eviction API for every matching Pod (PDBs honoured; 429s retried). The default.
    Evict,
    /// A plain DELETE of every matching Pod, one request per Pod.
    Delete,
    /// Evict one Pod, wait until the matching Pods are Ready again, then the next.
    Rolling,
}

impl Strategy {
    /// The strategy named by the annotation; absent or empty means [`Strategy::Evict`].
    /// The error is the message for the Warning Event.
    pub fn parse(annotation: Option<&str>) -> Result<Strategy, String> {
        match annotation.map(str::trim) {
            None | Some("") | Some("evict") => Ok(Strategy::Evict),
            Some("delete") => Ok(Strategy::Delete),
            Some("rolling") => Ok(Strategy::Rolling),
            Some(other) => Err(format!(
                "Unknown {} {other:?}: expected evict, delete or rolling. No Pods are replaced until it is fixed.",
                annotations::WAVELET_POD_DELETE_STRATEGY
            )),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::Evict => "evict",
            Strategy::Delete => "delete",
            Strategy::Rolling => "rolling",
        }
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Parses the annotation's selector and refuses the ones delete mode must not act on; the
/// error is the message for the `InvalidSelector` Event.
///
/// Refused: invalid (the API server would refuse it too), empty (matches every Pod), and
/// selectors without a positive term (`!canary`, `tier notin (db)`, `app!=x`): they match
/// every Pod that lacks a label, which in practice is most of a namespace, and that is
/// almost never what someone who wrote "replace the Pods of this app" meant. Every useful
/// selector names an app with `=`, `in` or an existence test.
pub fn validate_selector(text: &str) -> Result<Selector, String> {
    let selector = Selector::parse(text)
        .map_err(|e| format!("Invalid pod selector {text:?}: {e}. No Pods are replaced."))?;
    if selector.selects_everything() {
        return Err(format!("The empty pod selector {text:?} would match every Pod in the namespace. No Pods are replaced."));
    }
    if !selector.requires_a_label() {
        return Err(format!(
            "The pod selector {text:?} matches every Pod that lacks some label: add a positive term such as app=NAME. No Pods are replaced."
        ));
    }
    Ok(selector)
}

/// When a change was observed, and which Pods existed then.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Observation {
    /// Unix seconds (wavelet's clock).
    pub at: u64,
    /// UIDs of the matching Pods listed at observation.
    pub listed: HashSet<String>,
}

/// Whether `pod` was created before the observed change (see the module docs): listed at
/// observation, or created in an earlier second. A Pod without a readable
/// `creationTimestamp` counts only if listed.
pub fn created_before(pod: &Pod, observation: &Observation) -> bool {
    observation.listed.contains(&pod.metadata.uid)
        || created_in_an_earlier_second(pod, observation.at)
}

/// Whether `pod`'s `creationTimestamp` is readable and in an earlier second than `at`.
fn created_in_an_earlier_second(pod: &Pod, at: u64) -> bool {
    let created = pod
        .metadata
        .creation_timestamp
        .as_deref()
        .and_then(crate::time::parse_rfc3339);
    created.is_some_and(|created| created < at)
}

/// The UIDs a "replacing" state entry must list so that a replacement resumed from it
/// chooses the same Pods as [`targets`] with the whole listing: those of the listed Pods
/// that [`created_before`] could not tell by their `creationTimestamp` (from the
/// observation's second or later: the API server's clock may run ahead; or unreadable).
/// The others it tells by their timestamp alone, so however many Pods match, the entry
/// stays small. Sorted; at most `max` (beyond, the ones left out count by their timestamp
/// only: the second return value says how many were).
pub fn uids_to_record(pods: &[Pod], observation: &Observation, max: usize) -> (Vec<String>, usize) {
    let mut uids: Vec<String> = pods
        .iter()
        .filter(|p| observation.listed.contains(&p.metadata.uid))
        .filter(|p| !created_in_an_earlier_second(p, observation.at))
        .map(|p| p.metadata.uid.clone())
        .collect();
    uids.sort();
    let left_out = uids.len().saturating_sub(max);
    uids.truncate(max);
    (uids, left_out)
}

/// Whether a rolling replacement may go on: at least `want` Pods that are not terminating,
/// and all of those Ready. Terminating Pods are ignored (they may take their grace period
/// to go away while their successor already serves).
pub fn ready_again(pods: &[Pod], want: usize) -> bool {
    let live: Vec<&Pod> = pods.iter().filter(|p| !p.is_terminating()).collect();
    live.len() >= want && live.iter().all(|p| p.is_ready())
}

/// A Pod to replace, by name and UID (a StatefulSet's successor has the same name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    pub(crate) name: String,
    pub(crate) uid: String,
}

/// The Pods to replace for an observation: not terminating and [`created_before`] it,
/// oldest first (the Pods that have run the old configuration longest go first).
pub(crate) fn targets(pods: &[Pod], observation: &Observation) -> VecDeque<Target> {
    let mut chosen: Vec<&Pod> = pods
        .iter()
        .filter(|p| !p.is_terminating() && created_before(p, observation))
        .collect();
    chosen.sort_by(|a, b| {
        (&a.metadata.creation_timestamp, &a.metadata.name)
            .cmp(&(&b.metadata.creation_timestamp, &b.metadata.name))
    });
    chosen
        .into_iter()
        .map(|p| Target {
            name: p.metadata.name.clone(),
            uid: p.metadata.uid.clone(),
        })
        .collect()
}

/// `a, b, c` — at most ten names, then how many more, so an Event stays short.
pub(crate) fn name_list(targets: &VecDeque<Target>) -> String {
    const SHOWN: usize = 10;
    let mut text = targets
        .iter()
        .take(SHOWN)
        .map(|t| t.name.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    if targets.len() > SHOWN {
        text.push_str(&format!(" and {} more", targets.len() - SHOWN));
    }
    text
}

pub(crate) fn past_tense(strategy: Strategy) -> &'static str {
    match strategy {
        Strategy::Delete => "deleted",
        Strategy::Evict | Strategy::Rolling => "evicted",
    }
}

/// "1 Pod", "3 Pods".
pub(crate) fn count_pods(n: usize) -> String {
    if n == 1 {
        "1 Pod".into()
    } else {
        format!("{n} Pods")
    }
}
