//! Whether a workload's rollout has finished and is healthy, as `kubectl rollout status`
//! judges it, per kind, from the object alone (its generation, spec and status). Hash
//! mode's health gate between waves reads it; so does delete mode's `rolling` strategy
//! between workloads.

use crate::objects::{Resource, WorkloadObject};

/// The rollout state of one workload.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum RolloutStatus {
    /// Finished and healthy (or nothing to wait for: a CronJob, an `OnDelete` strategy, a
    /// paused Deployment, a kind wavelet cannot judge).
    #[default]
    Done,
    /// Under way; the text says what it waits for (kubectl's wording).
    Progressing(Box<str>),
    /// Failed by the workload's own judgement (`ProgressDeadlineExceeded`, an Argo
    /// Rollout `Degraded`); the text says why.
    Failed(Box<str>),
}

impl RolloutStatus {
    pub fn is_done(&self) -> bool {
        matches!(self, RolloutStatus::Done)
    }

    /// kubectl's judgement of `obj`, a workload of `resource`.
    pub fn of(resource: &Resource, obj: &WorkloadObject) -> RolloutStatus {
        let progressing = |text: String| RolloutStatus::Progressing(text.into());
        let (spec, status) = (&obj.spec, &obj.status);
        let observed = status.observed_generation.unwrap_or(0);
        let seen = obj.metadata.generation <= observed;
        match (resource.group.as_str(), resource.plural.as_str()) {
            ("apps", "deployments") => {
                if !seen {
                    return progressing(
                        "waiting for the deployment spec update to be observed".into(),
                    );
                }
                if let Some(c) = status
                    .conditions
                    .iter()
                    .find(|c| c.type_ == "Progressing" && c.reason == "ProgressDeadlineExceeded")
                {
                    return RolloutStatus::Failed(
                        format!("exceeded its progress deadline ({})", c.message).into(),
                    );
                }
                if spec.paused {
                    return RolloutStatus::Done;
                }
                let want = spec.replicas.unwrap_or(1);
                if status.updated_replicas < want {
                    return progressing(format!(
                        "{} out of {want} new replicas have been updated",
                        status.updated_replicas
                    ));
                }
                if status.replicas > status.updated_replicas {
                    return progressing(format!(
                        "{} old replicas are pending termination",
                        status.replicas - status.updated_replicas
                    ));
                }
                if status.available_replicas < status.updated_replicas {
                    return progressing(format!(
                        "{} of {} updated replicas are available",
                        status.available_replicas, status.updated_replicas
                    ));
                }
                RolloutStatus::Done
            }
            ("apps", "daemonsets") => {
                if !rolling_update(obj) {
                    return RolloutStatus::Done;
                }
                if !seen {
                    return progressing(
                        "waiting for the daemon set spec update to be observed".into(),
                    );
                }
                if status.updated_number_scheduled < status.desired_number_scheduled {
                    return progressing(format!(
                        "{} out of {} new pods have been updated",
                        status.updated_number_scheduled, status.desired_number_scheduled
                    ));
                }
                if status.number_available < status.desired_number_scheduled {
                    return progressing(format!(
                        "{} of {} updated pods are available",
                        status.number_available, status.desired_number_scheduled
                    ));
                }
                RolloutStatus::Done
            }
            ("apps", "statefulsets") => {
                if !rolling_update(obj) {
                    return RolloutStatus::Done;
                }
                if observed == 0 || !seen {
                    return progressing(
                        "waiting for the statefulset spec update to be observed".into(),
                    );
                }
                let want = spec.replicas.unwrap_or(1);
                if status.ready_replicas < want {
                    return progressing(format!(
                        "{} pods to be ready",
                        want - status.ready_replicas
                    ));
                }
                let partition = spec
                    .update_strategy
                    .as_ref()
                    .and_then(|s| s.rolling_update.as_ref())
                    .and_then(|r| r.partition);
                if let Some(partition) = partition {
                    return if status.updated_replicas < want - partition {
                        progressing(format!(
                            "partitioned roll out: {} out of {} new pods have been updated",
                            status.updated_replicas,
                            want - partition
                        ))
                    } else {
                        RolloutStatus::Done
                    };
                }
                if status.update_revision != status.current_revision {
                    return progressing(format!(
                        "rolling update to revision {}: {} pods updated",
                        status.update_revision, status.updated_replicas
                    ));
                }
                RolloutStatus::Done
            }
            ("argoproj.io", "rollouts") => {
                if !seen {
                    return progressing(
                        "waiting for the rollout spec update to be observed".into(),
                    );
                }
                match status.phase.as_str() {
                    "Healthy" => RolloutStatus::Done,
                    "Degraded" => {
                        RolloutStatus::Failed(format!("is Degraded: {}", status.message).into())
                    }
                    "Paused" if spec.paused => RolloutStatus::Done,
                    phase => progressing(format!(
                        "phase {}{}",
                        if phase.is_empty() { "unknown" } else { phase },
                        if status.message.is_empty() {
                            String::new()
                        } else {
                            format!(": {}", status.message)
                        }
                    )),
                }
            }
            // CronJobs roll nothing until their next Job; other kinds: a status that has
            // not observed the spec yet is the one thing wavelet can read.
            ("batch", "cronjobs") => RolloutStatus::Done,
            _ => match status.observed_generation {
                Some(observed) if observed < obj.metadata.generation => {
                    progressing("waiting for the spec update to be observed".into())
                }
                _ => RolloutStatus::Done,
            },
        }
    }
}

/// StatefulSets and DaemonSets roll Pods by themselves only with `RollingUpdate` (the
/// default); `OnDelete` waits for someone to delete them, so there is nothing to wait for.
fn rolling_update(obj: &WorkloadObject) -> bool {
    obj.spec
        .update_strategy
        .as_ref()
        .is_none_or(|s| s.type_.is_empty() || s.type_ == "RollingUpdate")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn judge(resource: Resource, obj: serde_json::Value) -> RolloutStatus {
        RolloutStatus::of(&resource, &serde_json::from_value(obj).unwrap())
    }

    fn deployment(generation: i64, status: serde_json::Value) -> serde_json::Value {
        json!({"metadata": {"generation": generation}, "spec": {"replicas": 2}, "status": status})
    }

    #[test]
    fn a_deployment_is_done_when_updated_equals_replicas_equals_available() {
        let table = [
            (json!({"observedGeneration": 1}), "observed"),
            (
                json!({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 1, "availableReplicas": 2}),
                "1 out of 2 new",
            ),
            (
                json!({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 2, "availableReplicas": 2}),
                "1 old replicas",
            ),
            (
                json!({"observedGeneration": 2, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 1}),
                "1 of 2 updated",
            ),
        ];
        for (status, says) in table {
            match judge(Resource::deployments(), deployment(2, status.clone())) {
                RolloutStatus::Progressing(text) => {
                    assert!(text.contains(says), "{status}: {text}")
                }
                other => panic!("{status}: {other:?}"),
            }
        }
        let done = json!({"observedGeneration": 2, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 2});
        assert_eq!(
            judge(Resource::deployments(), deployment(2, done)),
            RolloutStatus::Done
        );
    }

    #[test]
    fn a_deployment_past_its_progress_deadline_has_failed_once_the_spec_is_observed() {
        let status = json!({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 1,
            "conditions": [{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
                            "message": "ReplicaSet \"web-1\" has timed out progressing."}]});
        assert!(matches!(
            judge(Resource::deployments(), deployment(2, status.clone())),
            RolloutStatus::Failed(text) if text.contains("progress deadline") && text.contains("timed out")
        ));
        // The deadline of the rollout before wavelet's patch: not observed yet, still waiting.
        assert!(matches!(
            judge(Resource::deployments(), deployment(3, status)),
            RolloutStatus::Progressing(_)
        ));
    }

    #[test]
    fn statefulsets_follow_readiness_partition_and_revisions() {
        let sts = |spec: serde_json::Value, status: serde_json::Value| {
            judge(
                Resource::statefulsets(),
                json!({"metadata": {"generation": 4}, "spec": spec, "status": status}),
            )
        };
        let spec = json!({"replicas": 2, "updateStrategy": {"type": "RollingUpdate"}});
        assert!(!sts(
            spec.clone(),
            json!({"observedGeneration": 4, "readyReplicas": 1})
        )
        .is_done());
        assert!(!sts(
            spec.clone(),
            json!({"observedGeneration": 4, "readyReplicas": 2,
            "currentRevision": "a", "updateRevision": "b", "updatedReplicas": 1})
        )
        .is_done());
        assert!(sts(
            spec,
            json!({"observedGeneration": 4, "readyReplicas": 2,
            "currentRevision": "b", "updateRevision": "b"})
        )
        .is_done());
        let partitioned = json!({"replicas": 3, "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 1}}});
        assert!(!sts(
            partitioned.clone(),
            json!({"observedGeneration": 4, "readyReplicas": 3, "updatedReplicas": 1})
        )
        .is_done());
        assert!(sts(
            partitioned,
            json!({"observedGeneration": 4, "readyReplicas": 3, "updatedReplicas": 2})
        )
        .is_done());
        assert!(
            sts(json!({"updateStrategy": {"type": "OnDelete"}}), json!({})).is_done(),
            "nothing rolls by itself"
        );
    }

    #[test]
    fn daemonsets_count_scheduled_updated_and_available_pods() {
        let ds = |status: serde_json::Value| {
            judge(
                Resource::daemonsets(),
                json!({"metadata": {"generation": 2}, "status": status}),
            )
        };
        assert!(!ds(json!({"observedGeneration": 1})).is_done());
        assert!(!ds(json!({"observedGeneration": 2, "desiredNumberScheduled": 3, "updatedNumberScheduled": 2})).is_done());
        assert!(!ds(json!({"observedGeneration": 2, "desiredNumberScheduled": 3, "updatedNumberScheduled": 3, "numberAvailable": 2})).is_done());
        assert!(ds(json!({"observedGeneration": 2, "desiredNumberScheduled": 3, "updatedNumberScheduled": 3, "numberAvailable": 3})).is_done());
    }

    #[test]
    fn argo_rollouts_are_judged_by_their_phase_with_a_string_generation() {
        let ro = |status: serde_json::Value| {
            judge(
                Resource::rollouts(),
                json!({"metadata": {"generation": 5}, "status": status}),
            )
        };
        assert!(ro(json!({"observedGeneration": "5", "phase": "Healthy"})).is_done());
        assert!(!ro(json!({"observedGeneration": "4", "phase": "Healthy"})).is_done());
        assert!(!ro(json!({"observedGeneration": "5", "phase": "Progressing"})).is_done());
        assert!(matches!(
            ro(json!({"observedGeneration": "5", "phase": "Degraded", "message": "ProgressDeadlineExceeded: timed out"})),
            RolloutStatus::Failed(text) if text.contains("ProgressDeadlineExceeded")
        ));
    }

    #[test]
    fn kinds_without_a_rollout_are_done_unless_their_status_lags_the_spec() {
        assert!(judge(Resource::cronjobs(), json!({"metadata": {"generation": 9}})).is_done());
        let widget = Resource::new("example.com", "v1", "widgets", "Widget");
        assert!(judge(widget.clone(), json!({"metadata": {"generation": 3}})).is_done());
        assert!(!judge(
            widget,
            json!({"metadata": {"generation": 3}, "status": {"observedGeneration": 2}})
        )
        .is_done());
    }
}
