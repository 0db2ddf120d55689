//! The health gate between waves, as a pure function of what the API server holds: the
//! fan-out's record in `wavelet-state` (if any), and for every workload that uses the
//! changed ConfigMap/Secret whether it carries its new hash and how its rollout is doing.
//!
//! 1. No record for this change: fewer than two workloads due → not a fan-out (they roll
//!    as usual). Otherwise release the first wave: the canaries, or the first
//!    `--first-wave` workloads in name order.
//! 2. Held → nothing more is released.
//! 3. A workload of the current wave failed its rollout (its own judgement), or has not
//!    finished within `--rollout-timeout` of rolling, or has not rolled within it of its
//!    release (its PATCH refused) → hold the rest. A workload waiting on its own (its
//!    pause, pause period, debounce or restart window) joins no wave and holds no one.
//! 4. The current wave still rolling → wait, and look again when its timeout is due.
//! 5. The current wave finished healthy: nothing left → complete; otherwise release the
//!    next wave (`--wave-size` of all the workloads the change rolls, in name order).
//!
//! So a restarted wavelet tells "wave 1 rolled and is healthy, roll wave 2" (a record
//! with one wave, whose workloads carry the new hash and are done) from "nothing rolled
//! yet" (no record for this data hash) and from "held" (the record says so).
//!
//! The first wave's record is written after its PATCHes, which carry a mark of the change
//! on each workload instead ([`Mark`]): with no record for this data hash, the workloads
//! that carry its mark are a first wave whose record was lost to a restart, and the record
//! is rebuilt from them ([`recovered`]) before steps 2 to 5. So a restart between wave 1's
//! PATCH and its record still waits for wave 1's health and rolls none of it again. A
//! mark can outlive its fan-out (until the workload's next rollout): a workload that
//! waited on its own and comes due once the fan-out is complete then rolls behind the
//! health of the first wave that carried this very change, as a next wave.

use std::collections::HashMap;

use crate::config::WaveSize;
use crate::hashmode::fanout::record::{Hold, Mark, Record};
use crate::model::rollout_status::RolloutStatus;

/// One workload that uses the changed object, as the decision sees it.
#[derive(Debug, Clone)]
pub struct Member<'a> {
    /// Its id in records (`deployments.apps/ns/name`); also the order of waves.
    pub id: &'a str,
    /// `wavelet.dev/canary: "true"`: first wave.
    pub canary: bool,
    /// It carries the hash of its current configuration (rolled, or never affected).
    pub current: bool,
    pub status: &'a RolloutStatus,
    /// When wavelet first saw it carry the new hash (Unix seconds), if it did.
    pub rolled_at: Option<u64>,
    /// Why it waits on its own, if it does (its pause, its pause period or debounce, its
    /// restart window): it joins no wave meanwhile, gates no one, and that time does not
    /// count against `--rollout-timeout`.
    pub waiting: Option<String>,
    /// The API server's refusal of its last rollout, if the last one was refused.
    pub refused: Option<String>,
    /// Its mark of the first wave of a change of this object, if its last rollout was one
    /// (whichever change: [`recovered`] keeps those of the change decided).
    pub first_wave: Option<&'a Mark>,
}

impl<'a> Member<'a> {
    /// A workload as its object and status say, with nothing wavelet remembers of it: not
    /// seen rolled, not waiting on its own, not refused, no first-wave mark.
    pub fn new(id: &'a str, canary: bool, current: bool, status: &'a RolloutStatus) -> Member<'a> {
        Member {
            id,
            canary,
            current,
            status,
            rolled_at: None,
            waiting: None,
            refused: None,
            first_wave: None,
        }
    }
}

/// The wave settings of one fan-out.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    pub first_wave: usize,
    pub wave_size: WaveSize,
    pub rollout_timeout_secs: u64,
}

/// What to do next with the fan-out of one change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Fewer than two workloads due: they roll as usual.
    NotShared,
    /// Record this wave (`wave` counts from 1), then roll its workloads.
    Release { wave: usize, workloads: Vec<String> },
    /// The current wave is still rolling: what each workload waits for, and when to
    /// look again (seconds from now) for its timeout.
    Rolling {
        wave: usize,
        waiting: Vec<(String, String)>,
        recheck_in: u64,
    },
    /// Record the hold: the rest are not rolled.
    Hold(Hold),
    /// Held already.
    Held,
    /// Every workload the change rolls carries it and finished healthy.
    Complete { waves: usize },
}

/// The record of change `hash` when `wavelet-state` has none: the first wave its marks say
/// was released (by the earliest release among them). `None` when no workload carries this
/// change's mark (nothing was released, or nothing of it rolled), and when no other
/// workload is due for the change: then nothing waits for the wave, which is the whole
/// fan-out (or marks one that completed), and there is nothing to gate nor to record.
pub fn recovered(hash: &str, members: &[Member]) -> Option<Record> {
    let marked_by = |m: &Member| m.first_wave.is_some_and(|mark| mark.is_change(hash));
    let marked: Vec<(&str, u64)> = members
        .iter()
        .filter(|m| marked_by(m))
        .map(|m| (m.id, m.first_wave.map_or(0, |mark| mark.since)))
        .collect();
    let since = marked.iter().map(|(_, since)| *since).min()?;
    if !members
        .iter()
        .any(|m| !m.current && m.waiting.is_none() && !marked_by(m))
    {
        return None;
    }
    let mut wave: Vec<String> = marked.iter().map(|(id, _)| id.to_string()).collect();
    wave.sort();
    Some(Record {
        hash: hash.to_string(),
        since,
        waves: vec![wave],
        skipped: Vec::new(),
        held: None,
    })
}

/// Steps 1 to 5 above. `record` is this change's (same data hash), if any.
pub fn decide(
    record: Option<&Record>,
    members: &[Member],
    settings: Settings,
    now: u64,
) -> Decision {
    let mut due: Vec<&Member> = members
        .iter()
        .filter(|m| !m.current && m.waiting.is_none() && record.is_none_or(|r| !r.released(m.id)))
        .collect();
    due.sort_by(|a, b| b.canary.cmp(&a.canary).then(a.id.cmp(b.id)));
    // 1.
    let Some(record) = record else {
        if due.len() < 2 {
            return Decision::NotShared;
        }
        let canaries = due.iter().take_while(|m| m.canary).count();
        let first = if canaries > 0 {
            canaries
        } else {
            settings.first_wave.max(1)
        };
        return Decision::Release {
            wave: 1,
            workloads: due.iter().take(first).map(|m| m.id.to_string()).collect(),
        };
    };
    // 2.
    if record.held.is_some() {
        return Decision::Held;
    }
    // 3. and 4.
    let wave = record.waves.len();
    let mut waiting = Vec::new();
    let mut recheck_in = settings.rollout_timeout_secs;
    for id in record.waves.last().into_iter().flatten() {
        if record.skipped.contains(id) {
            continue;
        }
        // Gone, opted out, or no longer using the object: nothing to wait for.
        let Some(member) = members.iter().find(|m| m.id == id) else {
            continue;
        };
        let started = member.rolled_at.unwrap_or(record.since).max(record.since);
        let waited = now.saturating_sub(started);
        let why = match (member.current, member.status) {
            (true, RolloutStatus::Done) => continue,
            (true, RolloutStatus::Failed(reason)) => {
                return Decision::Hold(Hold {
                    workload: id.clone(),
                    reason: format!("its rollout failed: it {reason}"),
                })
            }
            (true, RolloutStatus::Progressing(text)) => {
                if waited >= settings.rollout_timeout_secs {
                    return Decision::Hold(Hold {
                        workload: id.clone(),
                        reason: format!(
                            "its rollout did not finish within --rollout-timeout ({}s): {text}",
                            settings.rollout_timeout_secs
                        ),
                    });
                }
                recheck_in = recheck_in.min(settings.rollout_timeout_secs - waited);
                text.to_string()
            }
            // Released, and waiting on its own since (a pause, its window): not its fault.
            (false, _) if member.waiting.is_some() => {
                member.waiting.clone().expect("checked above")
            }
            // Released but not rolled: --rollout-timeout counts from the release, so a
            // rollout the API server keeps refusing (an admission policy, a webhook,
            // RBAC) holds the rest like one that fails.
            (false, _) => {
                let released_for = now.saturating_sub(record.since);
                if released_for >= settings.rollout_timeout_secs {
                    let reason = match &member.refused {
                        Some(refusal) => format!(
                            "its rollout was refused for --rollout-timeout ({}s): {refusal}",
                            settings.rollout_timeout_secs
                        ),
                        None => format!(
                            "it did not roll within --rollout-timeout ({}s) of its release",
                            settings.rollout_timeout_secs
                        ),
                    };
                    return Decision::Hold(Hold {
                        workload: id.clone(),
                        reason,
                    });
                }
                recheck_in = recheck_in.min(settings.rollout_timeout_secs - released_for);
                match &member.refused {
                    Some(refusal) => format!("its rollout was refused: {refusal}"),
                    None => "not rolled yet".to_string(),
                }
            }
        };
        waiting.push((id.clone(), why));
    }
    if !waiting.is_empty() {
        return Decision::Rolling {
            wave,
            waiting,
            recheck_in: recheck_in.max(1),
        };
    }
    // 5.
    if due.is_empty() {
        return Decision::Complete { waves: wave };
    }
    let released = record.waves.iter().map(Vec::len).sum::<usize>();
    let size = settings.wave_size.of(released + due.len());
    Decision::Release {
        wave: wave + 1,
        workloads: due.iter().take(size).map(|m| m.id.to_string()).collect(),
    }
}

/// When wavelet first saw each released workload carry the change its fan-out rolls
/// (what `--rollout-timeout` counts from once it rolled), per fan-out and for one change
/// only: a newer change of the object (a superseded fan-out) starts over, so a workload
/// that waits days for its window is timed from its own rollout, not an old one.
#[derive(Debug, Default)]
pub struct RolledAt(HashMap<String, (String, HashMap<String, u64>)>);

impl RolledAt {
    /// `id` carries change `hash` of fan-out `fan_out` at `now`: kept if seen before.
    pub fn seen(&mut self, fan_out: &str, hash: &str, id: &str, now: u64) {
        let times = match self.0.get_mut(fan_out) {
            Some((of, times)) if of == hash => times,
            _ => {
                self.0
                    .insert(fan_out.to_string(), (hash.to_string(), HashMap::new()));
                &mut self.0.get_mut(fan_out).expect("inserted").1
            }
        };
        times.entry(id.to_string()).or_insert(now);
    }

    /// When `id` was first seen carrying change `hash` of `fan_out`.
    pub fn of(&self, fan_out: &str, hash: &str, id: &str) -> Option<u64> {
        match self.0.get(fan_out) {
            Some((of, times)) if of == hash => times.get(id).copied(),
            _ => None,
        }
    }

    /// The fan-out completed, or is no more.
    pub fn forget(&mut self, fan_out: &str) {
        self.0.remove(fan_out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_released_workload_whose_rollout_is_refused_holds_the_rest_at_the_timeout() {
        let ids = ids(3);
        let done = RolloutStatus::Done;
        let mut all = members(&ids, &[], &done);
        all[0].refused = Some("admission webhook \"deny.example.com\" denied the request".into());
        let rec = record(&[&[0]], &ids, T0);
        assert_eq!(
            decide(Some(&rec), &all, SETTINGS, T0 + 100),
            Decision::Rolling {
                wave: 1,
                waiting: vec![(
                    ids[0].clone(),
                    "its rollout was refused: admission webhook \"deny.example.com\" denied the request".into()
                )],
                recheck_in: 500
            }
        );
        match decide(Some(&rec), &all, SETTINGS, T0 + 600) {
            Decision::Hold(hold) => {
                assert_eq!(hold.workload, ids[0]);
                assert!(
                    hold.reason.contains("refused for --rollout-timeout (600s)"),
                    "{}",
                    hold.reason
                );
                assert!(hold.reason.contains("deny.example.com"), "{}", hold.reason);
            }
            other => panic!("{other:?}"),
        }
        // Not refused, just never rolled: held too, saying so.
        all[0].refused = None;
        assert!(matches!(
            decide(Some(&rec), &all, SETTINGS, T0 + 600),
            Decision::Hold(h) if h.reason.contains("did not roll within --rollout-timeout")
        ));
    }

    #[test]
    fn a_workload_waiting_on_its_own_joins_no_wave_and_holds_no_one() {
        let ids = ids(3);
        let done = RolloutStatus::Done;
        let mut all = members(&ids, &[], &done);
        all[0].waiting = Some("its pause period (5s)".into());
        // web-0 would be first by name; web-1 goes first instead.
        assert_eq!(
            decide(None, &all, SETTINGS, T0),
            Decision::Release {
                wave: 1,
                workloads: vec![ids[1].clone()]
            }
        );
        // Two due, one of them waiting on its own: not a fan-out, the other rolls now.
        let two = &mut all[..2];
        assert_eq!(decide(None, two, SETTINGS, T0), Decision::NotShared);
        // Released, then paused: waits past the timeout without holding anyone.
        let rec = record(&[&[0]], &ids, T0);
        assert!(matches!(
            decide(Some(&rec), &all, SETTINGS, T0 + 10_000),
            Decision::Rolling { .. }
        ));
    }

    #[test]
    fn a_rollout_time_does_not_outlive_the_change_it_was_seen_for() {
        let mut rolled = RolledAt::default();
        let web = "deployments.apps/ns/web";
        rolled.seen("fanout.configmap.ns.cfg", "h1", web, T0);
        rolled.seen("fanout.configmap.ns.cfg", "h1", web, T0 + 60);
        assert_eq!(rolled.of("fanout.configmap.ns.cfg", "h1", web), Some(T0));
        // Superseded by change h2: released again, it rolls two days later.
        let later = T0 + 2 * 86_400;
        assert_eq!(rolled.of("fanout.configmap.ns.cfg", "h2", web), None);
        rolled.seen("fanout.configmap.ns.cfg", "h2", web, later);
        assert_eq!(rolled.of("fanout.configmap.ns.cfg", "h2", web), Some(later));
        // So h2's wave 2, released at T0 + 100, is timed from the rollout, not held.
        let ids = vec![web.to_string(), "deployments.apps/ns/a".to_string()];
        let slow = RolloutStatus::Progressing("0 of 1 updated replicas are available".into());
        let mut all = members(&ids, &[0, 1], &slow);
        all[0].rolled_at = rolled.of("fanout.configmap.ns.cfg", "h2", web);
        all[1].status = &RolloutStatus::Done;
        let mut rec = record(&[&[1], &[0]], &ids, T0 + 100);
        rec.hash = "h2".into();
        assert!(matches!(
            decide(Some(&rec), &all, SETTINGS, later + 5),
            Decision::Rolling { .. }
        ));
        rolled.forget("fanout.configmap.ns.cfg");
        assert_eq!(rolled.of("fanout.configmap.ns.cfg", "h2", web), None);
    }

    const T0: u64 = 1_795_317_280;
    const SETTINGS: Settings = Settings {
        first_wave: 1,
        wave_size: WaveSize::Percent(50),
        rollout_timeout_secs: 600,
    };

    fn ids(n: usize) -> Vec<String> {
        (0..n)
            .map(|i| format!("deployments.apps/ns/web-{i}"))
            .collect()
    }

    fn members<'a>(
        ids: &'a [String],
        current: &[usize],
        status: &'a RolloutStatus,
    ) -> Vec<Member<'a>> {
        ids.iter()
            .enumerate()
            .map(|(i, id)| Member::new(id, false, current.contains(&i), status))
            .collect()
    }

    fn record(waves: &[&[usize]], ids: &[String], since: u64) -> Record {
        Record {
            hash: "h".into(),
            since,
            waves: waves
                .iter()
                .map(|w| w.iter().map(|i| ids[*i].clone()).collect())
                .collect(),
            skipped: vec![],
            held: None,
        }
    }

    #[test]
    fn the_waves_of_a_good_change_to_ten_workloads_go_one_then_half_then_the_rest() {
        let ids = ids(10);
        let done = RolloutStatus::Done;
        // Table: (record waves, which carry the new hash) → decision.
        type Row<'a> = (&'a [&'a [usize]], &'a [usize], Decision);
        let table: &[Row] = &[
            (
                &[],
                &[],
                Decision::Release {
                    wave: 1,
                    workloads: vec![ids[0].clone()],
                },
            ),
            (
                &[&[0]],
                &[],
                Decision::Rolling {
                    wave: 1,
                    waiting: vec![(ids[0].clone(), "not rolled yet".into())],
                    recheck_in: 595,
                },
            ),
            (
                &[&[0]],
                &[0],
                Decision::Release {
                    wave: 2,
                    workloads: ids[1..6].to_vec(),
                },
            ),
            (
                &[&[0], &[1, 2, 3, 4, 5]],
                &[0, 1, 2, 3, 4, 5],
                Decision::Release {
                    wave: 3,
                    workloads: ids[6..10].to_vec(),
                },
            ),
            (
                &[&[0], &[1, 2, 3, 4, 5], &[6, 7, 8, 9]],
                &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
                Decision::Complete { waves: 3 },
            ),
        ];
        for (waves, current, expected) in table {
            let members = members(&ids, current, &done);
            let record = (!waves.is_empty()).then(|| record(waves, &ids, T0));
            assert_eq!(
                &decide(record.as_ref(), &members, SETTINGS, T0 + 5),
                expected,
                "waves {waves:?}, current {current:?}"
            );
        }
    }

    #[test]
    fn one_workload_due_is_not_a_fan_out() {
        let ids = ids(3);
        let done = RolloutStatus::Done;
        assert_eq!(
            decide(None, &members(&ids, &[0, 1], &done), SETTINGS, T0),
            Decision::NotShared
        );
        assert_eq!(
            decide(None, &members(&ids, &[0, 1, 2], &done), SETTINGS, T0),
            Decision::NotShared
        );
    }

    #[test]
    fn canaries_make_the_first_wave_whatever_their_names() {
        let ids = ids(5);
        let done = RolloutStatus::Done;
        let mut all = members(&ids, &[], &done);
        all[3].canary = true;
        all[4].canary = true;
        assert_eq!(
            decide(None, &all, SETTINGS, T0),
            Decision::Release {
                wave: 1,
                workloads: vec![ids[3].clone(), ids[4].clone()]
            }
        );
        let more = Settings {
            first_wave: 3,
            ..SETTINGS
        };
        assert_eq!(
            decide(None, &members(&ids, &[], &done), more, T0),
            Decision::Release {
                wave: 1,
                workloads: ids[..3].to_vec()
            }
        );
    }

    #[test]
    fn a_failed_workload_of_the_current_wave_holds_the_rest() {
        let ids = ids(10);
        let failed = RolloutStatus::Failed("exceeded its progress deadline".into());
        let all = members(&ids, &[0], &failed);
        assert_eq!(
            decide(Some(&record(&[&[0]], &ids, T0)), &all, SETTINGS, T0 + 30),
            Decision::Hold(Hold {
                workload: ids[0].clone(),
                reason: "its rollout failed: it exceeded its progress deadline".into()
            })
        );
        let mut held = record(&[&[0]], &ids, T0);
        held.held = Some(Hold {
            workload: ids[0].clone(),
            reason: "x".into(),
        });
        assert_eq!(decide(Some(&held), &all, SETTINGS, T0 + 30), Decision::Held);
    }

    #[test]
    fn a_rollout_still_progressing_past_the_timeout_holds_and_before_it_waits_for_the_rest_of_it() {
        let ids = ids(4);
        let slow = RolloutStatus::Progressing("1 of 2 updated replicas are available".into());
        let mut all = members(&ids, &[0], &slow);
        let rec = record(&[&[0]], &ids, T0);
        assert_eq!(
            decide(Some(&rec), &all, SETTINGS, T0 + 200),
            Decision::Rolling {
                wave: 1,
                waiting: vec![(
                    ids[0].clone(),
                    "1 of 2 updated replicas are available".into()
                )],
                recheck_in: 400
            }
        );
        assert!(
            matches!(decide(Some(&rec), &all, SETTINGS, T0 + 600), Decision::Hold(h) if h.reason.contains("--rollout-timeout"))
        );
        // Rolled late (it waited for its restart window): the timeout counts from then.
        all[0].rolled_at = Some(T0 + 500);
        assert!(matches!(
            decide(Some(&rec), &all, SETTINGS, T0 + 600),
            Decision::Rolling {
                recheck_in: 500,
                ..
            }
        ));
    }

    #[test]
    fn a_resume_goes_past_the_skipped_workload_and_gone_workloads_hold_nothing() {
        let ids = ids(4);
        let failed = RolloutStatus::Failed("is Degraded".into());
        let all = members(&ids, &[0], &failed);
        let mut rec = record(&[&[0]], &ids, T0);
        rec.skipped = vec![ids[0].clone()];
        assert_eq!(
            decide(Some(&rec), &all, SETTINGS, T0 + 30),
            Decision::Release {
                wave: 2,
                workloads: ids[1..3].to_vec()
            }
        );
        let gone = record(&[&[0]], &ids, T0);
        let rest = members(&ids, &[], &failed).split_off(1);
        assert_eq!(
            decide(Some(&gone), &rest, SETTINGS, T0 + 30),
            Decision::Release {
                wave: 2,
                workloads: ids[1..3].to_vec()
            }
        );
    }

    #[test]
    fn workloads_the_change_does_not_affect_are_neither_due_nor_waited_for() {
        // web-0 and web-1 never needed the change: they carry their hash and no wave
        // released them, so they are not the first wave and hold nothing.
        let ids = ids(4);
        let failed = RolloutStatus::Failed("exceeded its progress deadline".into());
        let all = members(&ids, &[0, 1], &failed);
        assert_eq!(
            decide(None, &all, SETTINGS, T0),
            Decision::Release {
                wave: 1,
                workloads: vec![ids[2].clone()]
            }
        );
        let done = RolloutStatus::Done;
        let rolled = members(&ids, &[0, 1, 2], &done);
        assert_eq!(
            decide(Some(&record(&[&[2]], &ids, T0)), &rolled, SETTINGS, T0 + 1),
            Decision::Release {
                wave: 2,
                workloads: vec![ids[3].clone()]
            }
        );
    }

    #[test]
    fn with_no_record_the_workloads_marked_with_this_change_are_its_first_wave() {
        // a and b rolled as wave 1 of change h (their PATCHes carry its mark), then wavelet
        // stopped before the record was written; c was marked by an older change.
        let ids = ids(5);
        let h = "0123456789abcdef".repeat(4);
        let config =
            crate::objects::ConfigKey::new(crate::objects::ConfigKind::ConfigMap, "ns", "cfg");
        let this = Mark::new(&config, &h, T0);
        let older = Mark::new(&config, &"f".repeat(64), T0 - 3_600);
        let slow = RolloutStatus::Progressing("0 of 1 updated replicas are available".into());
        let mut all = members(&ids, &[0, 1], &slow);
        all[0].first_wave = Some(&this);
        all[1].first_wave = Some(&this);
        all[2].first_wave = Some(&older);
        let rebuilt = recovered(&h, &all).expect("a first wave");
        assert_eq!(rebuilt.waves, vec![ids[..2].to_vec()]);
        assert_eq!((rebuilt.since, rebuilt.held.is_none()), (T0, true));
        // Still rolling: nothing more is released (without the marks, wave "1" would be c).
        assert!(matches!(
            decide(Some(&rebuilt), &all, SETTINGS, T0 + 5),
            Decision::Rolling { wave: 1, .. }
        ));
        assert_eq!(
            decide(None, &all, SETTINGS, T0 + 5),
            Decision::Release {
                wave: 1,
                workloads: vec![ids[2].clone()]
            },
            "what the marks prevent"
        );
        // Failed: the rest are held; healthy: the next wave goes.
        let failed = RolloutStatus::Failed("exceeded its progress deadline".into());
        all[1].status = &failed;
        assert!(matches!(
            decide(Some(&rebuilt), &all, SETTINGS, T0 + 5),
            Decision::Hold(h) if h.workload == ids[1]
        ));
        let done = RolloutStatus::Done;
        all[0].status = &done;
        all[1].status = &done;
        assert_eq!(
            decide(Some(&rebuilt), &all, SETTINGS, T0 + 5),
            Decision::Release {
                wave: 2,
                workloads: ids[2..5].to_vec()
            }
        );
        // Only one of a first wave of two was patched before the restart: the wave is that
        // one; the other, due, waits for its health like the rest.
        all[1].first_wave = None;
        all[1].current = false;
        assert_eq!(
            recovered(&h, &all).unwrap().waves,
            vec![vec![ids[0].clone()]]
        );
        // Nothing else due (the marked wave was the whole fan-out, or it completed): there
        // is nothing to gate, nor a record to write.
        let marked: Vec<Member> = members(&ids, &[0, 1, 2, 3, 4], &done)
            .into_iter()
            .map(|m| Member {
                first_wave: Some(&this),
                ..m
            })
            .collect();
        assert_eq!(recovered(&h, &marked), None);
        // No mark of this change: nothing was released.
        all[0].first_wave = Some(&older);
        assert_eq!(recovered(&h, &all), None);
    }
}
