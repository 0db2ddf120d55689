//! Delete mode in waves (issue 32.11): when the Pods a delete-mode object's selector
//! matches belong to several workloads, they are replaced under safe fan-out's gate, one
//! workload's Pods after another's:
//!
//! 1. The Pods to replace are grouped by the workload that owns them ([`group_id`], from
//!    their controller owner reference; a ReplicaSet's Pods count as its Deployment's;
//!    a Pod no controller owns is in no wave and goes with the first).
//!    Fewer than two groups, `--fan-out at-once`, or `wavelet.dev/fan-out: at-once` on the
//!    object: every Pod is replaced as before, at once.
//! 2. The groups are ordered and cut into waves exactly as fan-out orders workloads (by
//!    fan-out's own decision, which the wiring layer lends as a [`FanOutPolicy`]:
//!    `wavelet.dev/canary` workloads first, else the first `--first-wave` in name order,
//!    then `--wave-size` per wave).
//! 3. A released group is replaced with the object's strategy (`evict`, `delete`,
//!    `rolling`); once its Pods are replaced, it must be Ready again (as many live Pods as
//!    it had, all Ready: the rolling strategy's check) within `--rollout-timeout` of the
//!    wave's release, or the rest is held.
//! 4. What is decided is the object's `fanout.<kind>.<ns>.<name>` entry of
//!    `wavelet-state`, in fan-out's own record format, written before a wave's Pods are
//!    touched: `wavelet status` shows it (HELD with the reason), `wavelet resume` goes on
//!    past the failed workload, `wavelet_fanouts_held` counts it and the hold alerts fire,
//!    all unchanged. Together with the ledger's `replacing` entry (which Pods existed at
//!    the change), a restarted wavelet knows which groups were released and replaces only
//!    Pods from before the change that are still there: none twice.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use crate::config::{parse_fan_out, FanOut, WaveSize};
use crate::deletemode::decide::{ready_again, Target};
use crate::deletemode::replacement::Replacement;
use crate::deletemode::DeleteMode;
use crate::error::Error;
use crate::model::hash;
use crate::model::rollout_status::RolloutStatus;
use crate::model::state::StateConfigMap;
use crate::objects::{ConfigKey, Pod, Resource, WorkloadKey};
use crate::ops::events::ObjectRef;
use crate::ops::metrics;

/// How often a wave's readiness is looked at while it is not Ready yet.
pub(crate) const WAVE_POLL: Duration = Duration::from_millis(500);

/// How often a held replacement looks whether `wavelet resume` (or a new change) lifted it.
pub(crate) const HELD_POLL: Duration = Duration::from_secs(2);

/// The workload a Pod belongs to, as fan-out names workloads
/// (`deployments.apps/<ns>/<name>`): from its controller owner reference; a ReplicaSet
/// `<name>-<hash>` is Deployment `<name>`'s. `None` for a Pod no controller owns: nothing
/// brings it back to wait for, so it is in no wave (it is replaced with the first).
pub(crate) fn group_id(pod: &Pod, namespace: &str) -> Option<String> {
    let owner = pod
        .metadata
        .owner_references
        .iter()
        .find(|o| o.controller == Some(true));
    let owner = owner?;
    let (resource, name) = match owner.kind.as_str() {
        "ReplicaSet" => match owner.name.rsplit_once('-') {
            Some((deployment, _hash)) if !deployment.is_empty() => {
                ("deployments.apps".to_string(), deployment)
            }
            _ => ("replicasets.apps".to_string(), owner.name.as_str()),
        },
        "StatefulSet" => ("statefulsets.apps".to_string(), owner.name.as_str()),
        "DaemonSet" => ("daemonsets.apps".to_string(), owner.name.as_str()),
        "Job" => ("jobs.batch".to_string(), owner.name.as_str()),
        other => (
            format!("{}s", other.to_ascii_lowercase()),
            owner.name.as_str(),
        ),
    };
    Some(format!("{resource}/{namespace}/{name}"))
}

/// Safe fan-out's wave policy and record, lent by the wiring layer (hash mode's fan-out:
/// delete mode knows nothing of hash mode), so the order of waves, the health gate and
/// the record's format stay in one place.
pub trait FanOutPolicy: Send + Sync {
    /// The `wavelet-state` key of the object's fan-out record.
    fn state_key(&self, object: &ConfigKey) -> String;
    /// What a stored record says, if it is about data `hash`.
    fn read(&self, record: &str, hash: &str) -> Option<Recorded>;
    /// Fan-out's next step for `groups` (every workload with Pods that match), given the
    /// stored record (ignored unless about `hash`), with the record to store for it.
    fn step(
        &self,
        record: Option<&str>,
        hash: &str,
        groups: &[Group],
        settings: WaveSettings,
        now: u64,
    ) -> Step;
    /// A workload id as people read it (`deployment shop/web`).
    fn display(&self, id: &str) -> String;
}

/// Where delete mode's waves are decided and recorded: safe fan-out's policy, and the
/// watched `wavelet-state` its `fanout.*` records live in.
pub struct FanOutRecords {
    pub state: Arc<StateConfigMap>,
    pub policy: Arc<dyn FanOutPolicy>,
}

/// The wave settings of one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaveSettings {
    pub first_wave: usize,
    pub wave_size: WaveSize,
    pub rollout_timeout_secs: u64,
}

/// What a fan-out record says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    /// The released waves, in order.
    pub waves: Vec<Vec<String>>,
    pub held: bool,
}

/// One workload whose Pods match, as the policy sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    /// `deployments.apps/<ns>/<name>`.
    pub id: String,
    pub canary: bool,
    /// Released (or nothing to replace): it carries the change.
    pub current: bool,
    /// Released: whether its Pods are replaced and Ready again.
    pub status: RolloutStatus,
}

/// Fan-out's next step, with the record to store for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Fewer than two workloads to replace and no wave yet: all at once.
    NotShared,
    Release {
        wave: usize,
        workloads: Vec<String>,
        record: String,
    },
    /// The current wave is not Ready again; look again by then (seconds).
    Rolling {
        recheck_in: u64,
    },
    Hold {
        workload: String,
        reason: String,
        /// Waves released before the hold.
        waves: usize,
        record: String,
    },
    Held,
    /// `released` workloads in `waves` waves, all Ready again.
    Complete {
        waves: usize,
        released: usize,
    },
}

/// The waves of one replacement.
#[derive(Debug)]
pub(crate) struct Plan {
    /// The object's `fanout.` entry in `wavelet-state`.
    pub(crate) state_key: String,
    pub(crate) settings: WaveSettings,
    /// The Pods of groups not released yet, by group, oldest first.
    pub(crate) withheld: BTreeMap<String, VecDeque<Target>>,
    /// The group of every Pod to replace, by UID.
    pub(crate) group_of: HashMap<String, String>,
    /// The live Pods each group had when planned: the count to be back at.
    pub(crate) want: BTreeMap<String, usize>,
    /// Groups whose workload carries `wavelet.dev/canary: "true"`.
    pub(crate) canary: BTreeSet<String>,
}

/// What the waves say a replacement whose released Pods are all replaced does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WaveStep {
    /// More Pods were released (or all of them, the waves ending): replace them.
    Released,
    /// The current wave is not Ready again yet: look again after this long.
    Wait(Duration),
    /// Held: nothing more is replaced until `wavelet resume` or a new change.
    Held,
    /// Every wave was released and is Ready again.
    Complete,
}

/// Whether waves apply to the object: `--fan-out`, overridden by `wavelet.dev/fan-out`
/// on it, and its `wavelet.dev/wave-size`; `None` for at once. Unreadable annotations
/// fall back to the flags (hash mode warns about them the same way).
pub(crate) fn settings_for(
    fan_out: &FanOut,
    fan_out_annotation: Option<&str>,
    wave_size_annotation: Option<&str>,
) -> Option<WaveSettings> {
    let on = fan_out_annotation
        .and_then(|t| parse_fan_out(t).ok())
        .unwrap_or(fan_out.waves);
    let wave_size = wave_size_annotation
        .and_then(|t| WaveSize::parse(t).ok())
        .unwrap_or(fan_out.wave_size);
    on.then(|| WaveSettings {
        first_wave: fan_out.first_wave,
        wave_size,
        rollout_timeout_secs: fan_out.rollout_timeout.as_secs().max(1),
    })
}

/// Splits the Pods to replace by group: those of groups `recorded` released already go to
/// the returned queue (a replacement resumed after a restart), the others are withheld.
/// `None` when fewer than two groups have Pods to replace (no waves: all at once).
pub(crate) fn plan(
    state_key: String,
    settings: WaveSettings,
    targets: VecDeque<Target>,
    pods: &[Pod],
    namespace: &str,
    record: Option<&Recorded>,
    canary: &dyn Fn(&str) -> bool,
) -> Result<(VecDeque<Target>, Plan), VecDeque<Target>> {
    let by_uid: HashMap<&str, &Pod> = pods.iter().map(|p| (&*p.metadata.uid, p)).collect();
    let mut group_of = HashMap::new();
    let mut withheld: BTreeMap<String, VecDeque<Target>> = BTreeMap::new();
    let mut released = VecDeque::new();
    for target in &targets {
        match by_uid
            .get(&*target.uid)
            .and_then(|p| group_id(p, namespace))
        {
            Some(group) => {
                group_of.insert(target.uid.clone(), group.clone());
                withheld.entry(group).or_default().push_back(target.clone());
            }
            None => released.push_back(target.clone()),
        }
    }
    if withheld.len() < 2 && record.is_none() {
        return Err(targets);
    }
    let mut want = BTreeMap::new();
    for pod in pods.iter().filter(|p| !p.is_terminating()) {
        if let Some(group) = group_id(pod, namespace) {
            *want.entry(group).or_insert(0) += 1;
        }
    }
    let canary = want.keys().filter(|g| canary(g)).cloned().collect();
    let mut plan = Plan {
        state_key,
        settings,
        withheld,
        group_of,
        want,
        canary,
    };
    for group in record.iter().flat_map(|r| r.waves.iter().flatten()) {
        released.extend(plan.withheld.remove(group).unwrap_or_default());
    }
    Ok((released, plan))
}

/// The groups as fan-out's decision sees them: released groups carry the change
/// (`current`); one is done when none of its Pods is left to replace and it is Ready
/// again, and is progressing otherwise (so `--rollout-timeout` from the wave's release
/// holds it; the reason says when its evictions are being `refused`, by a
/// PodDisruptionBudget).
pub(crate) fn groups(
    plan: &Plan,
    record: Option<&Recorded>,
    remaining: &VecDeque<Target>,
    pods: &[Pod],
    namespace: &str,
    refused: Option<&str>,
) -> Vec<Group> {
    let mut listed: BTreeMap<String, Vec<Pod>> = BTreeMap::new();
    for pod in pods {
        if let Some(group) = group_id(pod, namespace) {
            listed.entry(group).or_default().push(pod.clone());
        }
    }
    let replacing: BTreeSet<&str> = remaining
        .iter()
        .filter_map(|t| plan.group_of.get(&t.uid).map(String::as_str))
        .collect();
    let mut groups: BTreeSet<&str> = plan.want.keys().map(String::as_str).collect();
    groups.extend(plan.withheld.keys().map(String::as_str));
    groups
        .into_iter()
        .map(|group| {
            let released = record.is_some_and(|r| r.waves.iter().flatten().any(|w| w == group));
            let canary = plan.canary.contains(group);
            if !released {
                // Due while it has Pods to replace; otherwise nothing to roll.
                return Group {
                    id: group.to_string(),
                    canary,
                    current: !plan.withheld.contains_key(group),
                    status: RolloutStatus::Done,
                };
            }
            let want = plan.want.get(group).copied().unwrap_or(0);
            let its = listed.get(group).map_or(&[][..], Vec::as_slice);
            let status = if replacing.contains(group) {
                RolloutStatus::Progressing(match refused {
                    Some(why) => format!("evictions of its Pods are refused: {why}").into(),
                    None => "its Pods are being replaced".into(),
                })
            } else if ready_again(its, want) {
                RolloutStatus::Done
            } else {
                let live = its.iter().filter(|p| !p.is_terminating());
                let ready = live.clone().filter(|p| p.is_ready()).count();
                RolloutStatus::Progressing(
                    format!(
                        "{ready} of {} replaced Pods Ready (it had {want})",
                        live.count()
                    )
                    .into(),
                )
            };
            Group {
                id: group.to_string(),
                canary,
                current: true,
                status,
            }
        })
        .collect()
}

impl DeleteMode {
    /// The waves of a replacement about to start for `targets`, and the Pods to replace
    /// first; `None` for all at once. An entry left by an older change of the object is
    /// removed (a hold of it is superseded).
    pub(super) fn plan_waves(
        &self,
        key: &ConfigKey,
        data_hash: &str,
        targets: VecDeque<Target>,
        pods: &[Pod],
    ) -> Result<(VecDeque<Target>, Option<Plan>), Error> {
        let state_key = self.fan_out.policy.state_key(key);
        let stored = self.fan_out.state.get(&state_key)?;
        let record = stored
            .as_deref()
            .and_then(|text| self.fan_out.policy.read(text, data_hash));
        if stored.is_some() && record.is_none() {
            self.fan_out.state.set(&state_key, None)?;
        }
        let gates = self.cache.config(key).map(|e| e.gates().clone());
        let settings = settings_for(
            &self.settings.fan_out,
            gates.as_ref().and_then(|g| g.fan_out.as_deref()),
            gates.as_ref().and_then(|g| g.wave_size.as_deref()),
        );
        // An object hash mode fans out too keeps that fan-out's entry to itself.
        let hash_mode_fans_out = self.cache.dependents(key).len() >= 2;
        let Some(settings) = settings.filter(|_| !hash_mode_fans_out) else {
            return Ok((targets, None));
        };
        let canary = |group: &str| self.is_canary(group);
        match plan(
            state_key,
            settings,
            targets,
            pods,
            &key.namespace,
            record.as_ref(),
            &canary,
        ) {
            Ok((first, plan)) => Ok((first, Some(plan))),
            Err(targets) => Ok((targets, None)),
        }
    }

    /// Whether the workload of a group carries `wavelet.dev/canary: "true"` (as the
    /// cache holds it; a workload wavelet does not watch is no canary).
    fn is_canary(&self, group: &str) -> bool {
        let mut parts = group.splitn(3, '/');
        let (Some(resource), Some(namespace), Some(name)) =
            (parts.next(), parts.next(), parts.next())
        else {
            return false;
        };
        let resource = match resource {
            "deployments.apps" => Resource::deployments(),
            "statefulsets.apps" => Resource::statefulsets(),
            "daemonsets.apps" => Resource::daemonsets(),
            _ => return false,
        };
        let key = WorkloadKey::new(std::sync::Arc::new(resource), namespace, name);
        self.cache
            .workload(&key)
            .is_some_and(|entry| entry.gates().canary)
    }

    /// The object is gone or opted out: its waves' entry goes too (nothing is held any
    /// more).
    pub(super) fn forget_waves(&self, key: &ConfigKey) -> Result<(), Error> {
        let state_key = self.fan_out.policy.state_key(key);
        if self.fan_out.state.get(&state_key)?.is_some() {
            self.fan_out.state.set(&state_key, None)?;
        }
        Ok(())
    }

    /// The released Pods of `r` are all replaced: asks the waves what next and carries it
    /// out (records a wave before its Pods are touched, holds, completes). With `refused`
    /// (evictions refused now), only a hold or a next wave is carried out: a wave whose
    /// Pods cannot go is held by `--rollout-timeout` like one that does not get Ready.
    pub(super) fn next_wave(
        &self,
        key: &ConfigKey,
        about: &ObjectRef,
        r: &mut Replacement,
        refused: Option<&str>,
    ) -> Result<WaveStep, Error> {
        let plan = r.waves.as_mut().expect("a replacement in waves");
        let policy = &self.fan_out.policy;
        let stored = self.fan_out.state.get(&plan.state_key)?;
        let record = stored.as_deref().and_then(|t| policy.read(t, &r.hash));
        if record.as_ref().is_some_and(|x| x.held) {
            return Ok(WaveStep::Held);
        }
        let pods = self.list_pods(&key.namespace, &r.selector)?;
        let now = crate::time::unix_now();
        let groups = groups(
            plan,
            record.as_ref(),
            &r.remaining,
            &pods,
            &key.namespace,
            refused,
        );
        let step = policy.step(stored.as_deref(), &r.hash, &groups, plan.settings, now);
        // While evictions are refused, only a hold or a next wave (the refused workload was
        // skipped by `wavelet resume`) is carried out; nothing completes.
        if refused.is_some() && !matches!(step, Step::Hold { .. } | Step::Release { .. }) {
            return Ok(WaveStep::Wait(Duration::ZERO));
        }
        let short = hash::short(&r.hash);
        Ok(match step {
            Step::NotShared => {
                // Fewer than two groups left to replace and no wave yet: all at once.
                for (_, targets) in std::mem::take(&mut plan.withheld) {
                    r.remaining.extend(targets);
                }
                r.waves = None;
                WaveStep::Released
            }
            Step::Release {
                wave,
                workloads,
                record: text,
            } => {
                // Recorded before any of their Pods is touched.
                self.fan_out.state.set(&plan.state_key, Some(&text))?;
                let mut count = 0;
                for group in &workloads {
                    let targets = plan.withheld.remove(group).unwrap_or_default();
                    count += targets.len();
                    r.remaining.extend(targets);
                }
                let names = workloads
                    .iter()
                    .map(|w| policy.display(w))
                    .collect::<Vec<_>>()
                    .join(", ");
                let before = record
                    .as_ref()
                    .map_or(0, |x| x.waves.iter().map(Vec::len).sum::<usize>());
                let total = before + workloads.len() + plan.withheld.len();
                let message = if wave == 1 {
                    format!(
                        "Change {short} replaces the Pods of the {total} workloads matching {} in waves: wave 1 replaces the {count} Pod(s) of {names}; each next wave follows once the one before is Ready again.",
                        r.selector
                    )
                } else {
                    format!(
                        "Change {short}: wave {} is Ready again; wave {wave} replaces the {count} Pod(s) of {names}.",
                        wave - 1
                    )
                };
                log::info!("{key}: {message}");
                self.recorder.normal(about, "FanOutWave", &message);
                WaveStep::Released
            }
            Step::Rolling { recheck_in } => {
                WaveStep::Wait(WAVE_POLL.min(Duration::from_secs(recheck_in)))
            }
            Step::Hold {
                workload,
                reason,
                waves,
                record,
            } => {
                self.fan_out.state.set(&plan.state_key, Some(&record))?;
                metrics::global()
                    .fanouts_halted
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let resume = format!(
                    "wavelet resume -n {} {}/{}",
                    key.namespace,
                    key.kind.as_str(),
                    key.name
                );
                let message = format!(
                    "Change {short} held after wave {waves}: {} {reason}. The Pods of {} workload(s) matching {} are not replaced. To go on: fix the {} (its next change starts anew), or replace the rest anyway with `{resume}`.",
                    policy.display(&workload),
                    plan.withheld.len(),
                    r.selector,
                    key.kind.kind(),
                );
                log::warn!("{key}: {message}");
                self.recorder.warning(about, "FanOutHeld", &message);
                WaveStep::Held
            }
            Step::Held => WaveStep::Held,
            Step::Complete { waves, released } => {
                self.fan_out.state.set(&plan.state_key, None)?;
                let message = format!(
                    "Change {short} replaced the Pods of all {released} workloads matching {} in {waves} wave(s), each Ready again.",
                    r.selector
                );
                log::info!("{key}: {message}");
                self.recorder.normal(about, "FanOutComplete", &message);
                WaveStep::Complete
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, owner: Option<(&str, &str)>, ready: bool, terminating: bool) -> Pod {
        let owners = match owner {
            Some((kind, name)) => json!([{"kind": kind, "name": name, "controller": true}]),
            None => json!(null),
        };
        serde_json::from_value(json!({
            "metadata": {"name": name, "uid": name, "creationTimestamp": "2026-11-22T03:14:40Z",
                         "ownerReferences": owners,
                         "deletionTimestamp": if terminating { json!("2026-11-22T03:15:00Z") } else { json!(null) }},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}
        }))
        .unwrap()
    }

    fn target(name: &str) -> Target {
        Target {
            name: name.into(),
            uid: name.into(),
        }
    }

    const SETTINGS: WaveSettings = WaveSettings {
        first_wave: 1,
        wave_size: WaveSize::Percent(50),
        rollout_timeout_secs: 60,
    };

    #[test]
    fn pods_are_grouped_by_the_workload_that_owns_them() {
        assert_eq!(
            group_id(
                &pod("a-7d9f-x", Some(("ReplicaSet", "a-7d9f")), true, false),
                "ns"
            )
            .as_deref(),
            Some("deployments.apps/ns/a")
        );
        assert_eq!(
            group_id(&pod("db-0", Some(("StatefulSet", "db")), true, false), "ns").as_deref(),
            Some("statefulsets.apps/ns/db")
        );
        assert_eq!(
            group_id(&pod("n-x", Some(("DaemonSet", "n")), true, false), "ns").as_deref(),
            Some("daemonsets.apps/ns/n")
        );
        assert_eq!(group_id(&pod("solo", None, true, false), "ns"), None);
    }

    fn three() -> Vec<Pod> {
        ["a", "b", "c"]
            .iter()
            .map(|d| {
                pod(
                    &format!("{d}-1"),
                    Some(("ReplicaSet", &format!("{d}-h"))),
                    true,
                    false,
                )
            })
            .collect()
    }

    fn targets() -> VecDeque<Target> {
        ["c-1", "a-1", "b-1"].map(target).into()
    }

    #[test]
    fn one_workload_is_no_fan_out() {
        let pods = vec![pod("a-1", Some(("ReplicaSet", "a-h")), true, false)];
        let one: VecDeque<Target> = [target("a-1")].into();
        let planned = plan(
            "k".into(),
            SETTINGS,
            one.clone(),
            &pods,
            "ns",
            None,
            &|_| false,
        );
        assert_eq!(planned.unwrap_err(), one);
    }

    #[test]
    fn a_pod_no_controller_owns_goes_with_the_first_wave() {
        let mut pods = three();
        pods.push(pod("bare", None, true, false));
        let mut all = targets();
        all.push_back(target("bare"));
        let (first, planned) =
            plan("k".into(), SETTINGS, all, &pods, "ns", None, &|_| false).unwrap();
        assert_eq!(first, VecDeque::from([target("bare")]));
        assert_eq!(planned.withheld.len(), 3, "a, b and c wait for their waves");
    }

    fn status_of(groups: &[Group], id: &str) -> (bool, RolloutStatus) {
        let g = groups.iter().find(|g| g.id == id).expect(id);
        (g.current, g.status.clone())
    }

    fn progressing(text: &str) -> RolloutStatus {
        RolloutStatus::Progressing(text.into())
    }

    #[test]
    fn before_the_first_wave_every_workload_is_due_and_canaries_say_so() {
        let pods = three();
        let (first, planned) = plan("k".into(), SETTINGS, targets(), &pods, "ns", None, &|g| {
            g.ends_with("/c")
        })
        .unwrap();
        assert!(
            first.is_empty(),
            "nothing is released before a wave is recorded"
        );
        let groups = groups(&planned, None, &first, &pods, "ns", None);
        let ids: Vec<&str> = groups.iter().map(|g| g.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "deployments.apps/ns/a",
                "deployments.apps/ns/b",
                "deployments.apps/ns/c"
            ]
        );
        assert!(groups.iter().all(|g| !g.current));
        let canaries: Vec<bool> = groups.iter().map(|g| g.canary).collect();
        assert_eq!(canaries, [false, false, true]);
    }

    fn wave_one() -> Recorded {
        Recorded {
            waves: vec![vec!["deployments.apps/ns/a".into()]],
            held: false,
        }
    }

    #[test]
    fn a_released_workload_is_done_once_its_pods_are_replaced_and_ready_again() {
        let record = wave_one();
        let (first, planned) = plan(
            "k".into(),
            SETTINGS,
            targets(),
            &three(),
            "ns",
            Some(&record),
            &|_| false,
        )
        .unwrap();
        assert_eq!(
            first,
            VecDeque::from([target("a-1")]),
            "wave 1 was released"
        );
        let a = "deployments.apps/ns/a";
        let of = |remaining: &VecDeque<Target>, pods: &[Pod], refused| {
            status_of(
                &groups(&planned, Some(&record), remaining, pods, "ns", refused),
                a,
            )
        };
        assert_eq!(
            of(&first, &three(), None),
            (true, progressing("its Pods are being replaced"))
        );
        assert_eq!(
            of(&first, &three(), Some("budget")),
            (
                true,
                progressing("evictions of its Pods are refused: budget")
            )
        );
        let mut pods = three();
        pods[0] = pod("a-2", Some(("ReplicaSet", "a-h")), false, false);
        assert_eq!(
            of(&VecDeque::new(), &pods, None),
            (true, progressing("0 of 1 replaced Pods Ready (it had 1)"))
        );
        pods[0] = pod("a-2", Some(("ReplicaSet", "a-h")), true, false);
        assert_eq!(
            of(&VecDeque::new(), &pods, None),
            (true, RolloutStatus::Done)
        );
        let groups = groups(&planned, Some(&record), &VecDeque::new(), &pods, "ns", None);
        assert_eq!(
            status_of(&groups, "deployments.apps/ns/b"),
            (false, RolloutStatus::Done),
            "b is due"
        );
    }

    #[test]
    fn waves_follow_the_flag_unless_the_object_says_otherwise() {
        let flags = FanOut::default();
        assert!(settings_for(&flags, None, None).is_some());
        assert!(settings_for(&flags, Some("at-once"), None).is_none());
        let at_once = FanOut {
            waves: false,
            ..FanOut::default()
        };
        assert!(settings_for(&at_once, None, None).is_none());
        assert!(settings_for(&at_once, Some("waves"), None).is_some());
        assert_eq!(
            settings_for(&flags, None, Some("1")).unwrap().wave_size,
            WaveSize::Count(1)
        );
    }
}
