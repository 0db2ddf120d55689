//! Delete mode's waves (`deletemode/waves.rs`) decided by safe fan-out's own policy and
//! recorded in its own format: the wiring layer lends hash mode's fan-out to delete mode
//! (peers on one layer know nothing of each other), so the order of waves, the health
//! gate, the hold and the `fanout.*` record `wavelet status`, `wavelet resume`,
//! `wavelet_fanouts_held` and the hold alerts read are one and the same.

use crate::deletemode::waves::{FanOutPolicy, Group, Recorded, Step, WaveSettings};
use crate::hashmode::fanout::record::{display_id, Record, FANOUT};
use crate::hashmode::fanout::waves::{self, Decision, Member, Settings};
use crate::model::state::object_key;
use crate::objects::ConfigKey;

/// Hash mode's fan-out as delete mode's [`FanOutPolicy`].
pub(crate) struct HashModeFanOut;

impl FanOutPolicy for HashModeFanOut {
    fn state_key(&self, object: &ConfigKey) -> String {
        object_key(FANOUT, object)
    }

    fn read(&self, record: &str, hash: &str) -> Option<Recorded> {
        Record::decode(record)
            .filter(|r| r.hash == hash)
            .map(|r| Recorded {
                held: r.held.is_some(),
                waves: r.waves,
            })
    }

    fn step(
        &self,
        record: Option<&str>,
        hash: &str,
        groups: &[Group],
        settings: WaveSettings,
        now: u64,
    ) -> Step {
        let record = record.and_then(Record::decode).filter(|r| r.hash == hash);
        let members: Vec<Member> = groups
            .iter()
            // A wave's clock runs from its release (`since`): no `rolled_at`.
            .map(|g| Member::new(&g.id, g.canary, g.current, &g.status))
            .collect();
        let settings = Settings {
            first_wave: settings.first_wave,
            wave_size: settings.wave_size,
            rollout_timeout_secs: settings.rollout_timeout_secs,
        };
        match waves::decide(record.as_ref(), &members, settings, now) {
            Decision::NotShared => Step::NotShared,
            Decision::Release { wave, workloads } => {
                let mut next = record.unwrap_or(Record {
                    hash: hash.to_string(),
                    since: now,
                    waves: Vec::new(),
                    skipped: Vec::new(),
                    held: None,
                });
                next.waves.push(workloads.clone());
                next.since = now;
                Step::Release {
                    wave,
                    workloads,
                    record: next.encode(),
                }
            }
            Decision::Rolling { recheck_in, .. } => Step::Rolling { recheck_in },
            Decision::Hold(hold) => {
                let mut held = record.expect("a hold has a record");
                held.held = Some(hold.clone());
                Step::Hold {
                    workload: hold.workload,
                    reason: hold.reason,
                    waves: held.waves.len(),
                    record: held.encode(),
                }
            }
            Decision::Held => Step::Held,
            Decision::Complete { waves } => Step::Complete {
                waves,
                released: record.map_or(0, |r| r.waves.iter().map(Vec::len).sum()),
            },
        }
    }

    fn display(&self, id: &str) -> String {
        display_id(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::WaveSize;
    use crate::model::rollout_status::RolloutStatus;

    const T0: u64 = 1_795_317_280;
    const SETTINGS: WaveSettings = WaveSettings {
        first_wave: 1,
        wave_size: WaveSize::Percent(50),
        rollout_timeout_secs: 60,
    };

    fn group(name: &str, current: bool, status: RolloutStatus) -> Group {
        Group {
            id: format!("deployments.apps/ns/{name}"),
            canary: false,
            current,
            status,
        }
    }

    fn due() -> Vec<Group> {
        ["a", "b", "c"]
            .map(|n| group(n, false, RolloutStatus::Done))
            .into()
    }

    #[test]
    fn the_first_wave_is_the_first_workload_in_name_order_or_the_canary_and_is_recorded() {
        let policy = HashModeFanOut;
        let Step::Release {
            wave,
            workloads,
            record,
        } = policy.step(None, "h", &due(), SETTINGS, T0)
        else {
            panic!("no release")
        };
        assert_eq!((wave, workloads), (1, vec!["deployments.apps/ns/a".into()]));
        assert_eq!(
            record,
            "h since=2026-11-22T03:14:40Z waves=deployments.apps/ns/a"
        );
        assert_eq!(
            policy.read(&record, "h"),
            Some(Recorded {
                waves: vec![vec!["deployments.apps/ns/a".into()]],
                held: false
            })
        );
        assert_eq!(
            policy.read(&record, "other"),
            None,
            "another change's record"
        );
        let mut groups = due();
        groups[2].canary = true;
        assert!(matches!(
            policy.step(None, "h", &groups, SETTINGS, T0),
            Step::Release { workloads, .. } if workloads == ["deployments.apps/ns/c"]
        ));
    }

    #[test]
    fn one_workload_is_no_fan_out() {
        let one = [group("a", false, RolloutStatus::Done)];
        assert_eq!(
            HashModeFanOut.step(None, "h", &one, SETTINGS, T0),
            Step::NotShared
        );
    }

    #[test]
    fn the_next_wave_waits_for_ready_again_and_a_timeout_holds_then_resume_goes_on() {
        let policy = HashModeFanOut;
        let record = "h since=2026-11-22T03:14:40Z waves=deployments.apps/ns/a";
        let mut groups = due();
        groups[0] = group("a", true, RolloutStatus::Progressing("0 of 2 Ready".into()));
        assert!(matches!(
            policy.step(Some(record), "h", &groups, SETTINGS, T0 + 5),
            Step::Rolling { recheck_in: 55 }
        ));
        let Step::Hold {
            workload,
            reason,
            waves,
            record: held,
        } = policy.step(Some(record), "h", &groups, SETTINGS, T0 + 60)
        else {
            panic!("no hold")
        };
        assert_eq!((workload.as_str(), waves), ("deployments.apps/ns/a", 1));
        assert!(
            reason.contains("--rollout-timeout (60s): 0 of 2 Ready"),
            "{reason}"
        );
        assert!(policy.read(&held, "h").unwrap().held);
        assert_eq!(
            policy.step(Some(&held), "h", &groups, SETTINGS, T0 + 61),
            Step::Held
        );
        // `wavelet resume`: a is skipped, the rest goes (50 % of 3: two).
        let resumed = Record::decode(&held).unwrap().resumed(T0 + 70).unwrap();
        assert!(matches!(
            policy.step(Some(&resumed.encode()), "h", &groups, SETTINGS, T0 + 70),
            Step::Release { wave: 2, workloads, .. } if workloads.len() == 2
        ));
        // Ready again: the next wave, then complete.
        groups[0].status = RolloutStatus::Done;
        let Step::Release { record: two, .. } =
            policy.step(Some(record), "h", &groups, SETTINGS, T0 + 5)
        else {
            panic!("no second wave")
        };
        let all_done: Vec<Group> = ["a", "b", "c"]
            .map(|n| group(n, true, RolloutStatus::Done))
            .into();
        assert_eq!(
            policy.step(Some(&two), "h", &all_done, SETTINGS, T0 + 9),
            Step::Complete {
                waves: 2,
                released: 3
            }
        );
    }

    #[test]
    fn workload_ids_read_as_kind_namespace_and_name() {
        assert_eq!(
            HashModeFanOut.display("deployments.apps/shop/web"),
            "deployment shop/web"
        );
    }
}
