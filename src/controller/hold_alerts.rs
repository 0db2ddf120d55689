//! On-call is told when a fan-out is held and when that hold ends (issue 32.10): the
//! `fanout.*` entries of `wavelet-state`, as the state watch reports them, compared with
//! what was seen before. A hold appears (held), a held entry goes on past its failed
//! workload (resumed: `wavelet resume`), gives way to a newer change (superseded) or goes
//! (cleared). Watching the entries rather than the code that writes them catches every
//! writer (this wavelet, a `wavelet resume` on a laptop, the replica that led before) in
//! one place. Only the leader sends; every replica keeps its memory current, so a new
//! leader alerts about what changes after it took over, not again about what it found.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::hashmode::fanout::record::{display_id, Record};
use crate::model::hash;
use crate::model::state::StateConfigMap;
use crate::objects::{ConfigKey, ConfigKind};
use crate::ops::alerts::{Alert, Alerts, FanOutEvent, FanOutNotice};
use crate::ops::leader::Gate;

/// The prefix of fan-out entries.
const PREFIX: &str = "fanout.";

/// What was last seen of each fan-out entry, and where alerts go.
pub struct HoldAlerts {
    alerts: Arc<Alerts>,
    gate: Arc<Gate>,
    seen: BTreeMap<String, Record>,
    /// False until the first complete list: what it finds is remembered, not announced
    /// (a restart must not page again for a hold already announced).
    started: bool,
}

impl HoldAlerts {
    pub fn new(alerts: Arc<Alerts>, gate: Arc<Gate>) -> HoldAlerts {
        HoldAlerts {
            alerts,
            gate,
            seen: BTreeMap::new(),
            started: false,
        }
    }

    /// After each event of the state watch: compares every fan-out entry of `state` with
    /// what was seen before (the watch's own list of changed keys leaves out what this
    /// process wrote itself, so all entries are compared) and alerts for each hold that
    /// began or ended (the leader only). `listed`: the first complete list is in.
    pub fn observe(&mut self, state: &StateConfigMap, listed: bool) {
        let Ok(entries) = state.entries(PREFIX) else {
            return;
        };
        let now: BTreeMap<String, Record> = entries
            .into_iter()
            .filter_map(|(k, v)| Some((k, Record::decode(&v)?)))
            .collect();
        let announce = self.started && self.gate.may_write();
        let keys: BTreeSet<String> = self.seen.keys().chain(now.keys()).cloned().collect();
        for key in keys {
            let (old, new) = (self.seen.get(&key), now.get(&key));
            if !announce || old == new {
                continue;
            }
            for what in transitions(old, new) {
                let change = match &what {
                    // A new hold is about the new record's change.
                    FanOutEvent::Held { .. } => new.map(|r| r.hash.as_str()),
                    _ => old.map(|r| r.hash.as_str()),
                };
                self.alerts.send(Alert::FanOut(Box::new(FanOutNotice {
                    object: object_of(&key),
                    entry: key.clone(),
                    change: hash::short(change.unwrap_or_default()).to_string(),
                    what,
                })));
            }
        }
        self.seen = now;
        if listed {
            self.started = true;
        }
    }
}

/// What happened between two versions of one fan-out entry, in order: the end of an old
/// hold first, then a new hold.
pub fn transitions(old: Option<&Record>, new: Option<&Record>) -> Vec<FanOutEvent> {
    let mut events = Vec::new();
    if let Some(was) = old.filter(|r| r.held.is_some()) {
        let hold = was.held.as_ref().expect("filtered");
        match new {
            Some(now) if now.hash != was.hash => events.push(FanOutEvent::Superseded {
                by: hash::short(&now.hash).to_string(),
            }),
            Some(now) if now.held.is_none() => events.push(FanOutEvent::Resumed {
                workload: display_id(&hold.workload),
            }),
            // Still held (the same hold, or its reason re-worded): nothing new.
            Some(_) => return events,
            None => events.push(FanOutEvent::Cleared),
        }
    }
    if let Some(hold) = new.and_then(|r| r.held.as_ref()) {
        let same_hold = old.is_some_and(|o| o.hash == new.expect("some").hash && o.held.is_some());
        if !same_hold {
            events.push(FanOutEvent::Held {
                workload: display_id(&hold.workload),
                reason: hold.reason.clone(),
            });
        }
    }
    events
}

/// The object of a `fanout.<kind>.<namespace>.<name>` key; `None` for a name shortened to
/// a digest (`h-...`), or a key of another shape.
fn object_of(key: &str) -> Option<ConfigKey> {
    let mut parts = key.strip_prefix(PREFIX)?.splitn(3, '.');
    let (kind, namespace, name) = (parts.next()?, parts.next()?, parts.next()?);
    let kind = match kind {
        "configmap" => ConfigKind::ConfigMap,
        "secret" => ConfigKind::Secret,
        _ => return None,
    };
    if name.starts_with("h-") && name.len() == 34 {
        return None;
    }
    Some(ConfigKey::new(kind, namespace, name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hashmode::fanout::record::Hold;

    fn record(hash: &str, held: Option<&str>) -> Record {
        Record {
            hash: hash.into(),
            since: 1,
            waves: vec![vec!["deployments.apps/shop/web".into()]],
            skipped: Vec::new(),
            held: held.map(|reason| Hold {
                workload: "deployments.apps/shop/web".into(),
                reason: reason.into(),
            }),
        }
    }

    #[test]
    fn a_fan_out_that_becomes_held_is_one_held_event_naming_the_workload_and_reason() {
        let events = transitions(
            Some(&record("aaaa", None)),
            Some(&record("aaaa", Some("its rollout failed"))),
        );
        assert_eq!(events.len(), 1);
        let FanOutEvent::Held { workload, reason } = &events[0] else {
            panic!("{events:?}")
        };
        assert_eq!(reason, "its rollout failed");
        assert!(workload.contains("shop/web"), "{workload}");
        // A hold first seen with its record: held too.
        assert_eq!(transitions(None, Some(&record("aaaa", Some("x")))).len(), 1);
    }

    #[test]
    fn a_hold_seen_again_is_not_announced_again() {
        let held = record("aaaa", Some("x"));
        assert!(transitions(Some(&held), Some(&held)).is_empty());
        assert!(transitions(Some(&held), Some(&record("aaaa", Some("y")))).is_empty());
    }

    #[test]
    fn a_hold_ends_resumed_superseded_or_cleared() {
        let held = record("aaaa", Some("x"));
        assert!(matches!(
            transitions(Some(&held), Some(&record("aaaa", None)))[..],
            [FanOutEvent::Resumed { .. }]
        ));
        assert!(matches!(
            &transitions(Some(&held), Some(&record("bbbb", None)))[..],
            [FanOutEvent::Superseded { by }] if by == "bbbb"
        ));
        assert!(matches!(
            transitions(Some(&held), None)[..],
            [FanOutEvent::Cleared]
        ));
        // Superseded by a change that is held in turn: the end, then the new hold.
        assert!(matches!(
            transitions(Some(&held), Some(&record("bbbb", Some("y"))))[..],
            [FanOutEvent::Superseded { .. }, FanOutEvent::Held { .. }]
        ));
        // Fan-outs that were never held end silently.
        assert!(transitions(Some(&record("aaaa", None)), None).is_empty());
    }

    #[test]
    fn the_object_is_read_back_from_the_entry_key() {
        assert_eq!(
            object_of("fanout.configmap.shop.app.v2"),
            Some(ConfigKey::new(ConfigKind::ConfigMap, "shop", "app.v2"))
        );
        assert_eq!(
            object_of("fanout.secret.shop.h-0123456789abcdef0123456789abcdef"),
            None
        );
        assert_eq!(object_of("urgent.configmap.shop.app"), None);
    }
}
