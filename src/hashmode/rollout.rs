//! What a rollout writes, by kind of workload: the pod template's hash annotation
//! (Deployments, StatefulSets, DaemonSets, Argo Rollouts and custom kinds), the job
//! template's (CronJobs, so every Job started from then on runs the new configuration),
//! or `spec.restartAt` (Argo Rollouts with `reloader.stakater.com/rollout-strategy:
//! restart`). A CronJob opted in through Reloader's keys also gets one Job started now,
//! as Reloader does, unless it is suspended.

use serde_json::{json, Map, Value};

use crate::model::workload::Style;

/// The patch body of a rollout to `hash` under `hash_key`. `now` is RFC 3339, used by
/// [`Style::RestartAt`] only.
pub fn patch(style: Style, hash_key: &str, hash: &str, now: &str) -> Value {
    let annotated = json!({"metadata": {"annotations": {hash_key: hash}}});
    let spec = match style {
        Style::Template => json!({"template": annotated}),
        Style::CronJob { .. } => json!({"jobTemplate": {"spec": {"template": annotated}}}),
        Style::RestartAt => json!({"restartAt": now}),
    };
    json!({
        "metadata": {"annotations": {hash_key: hash}},
        "spec": spec,
    })
}

/// The name of the Job started for a CronJob at configuration `hash`: the CronJob's name
/// (cut to 52 characters, as the API server limits CronJob names) and the first ten
/// characters of the hash, so the Job names the configuration it runs.
pub fn job_name(cronjob: &str, hash: &str) -> String {
    let base: String = cronjob.chars().take(52).collect();
    let base = base.trim_end_matches(['-', '.']);
    let short: String = hash.chars().take(10).collect();
    format!("{base}-{short}")
}

/// The Job to start now from a CronJob (as `kubectl create job --from=cronjob/NAME` and
/// Reloader build it): the job template's labels, annotations and spec, the annotation
/// `cronjob.kubernetes.io/instantiate: manual`, and the CronJob as controlling owner.
/// `cronjob` is the CronJob as the API server returned it (after the rollout patch, so
/// its job template carries the new hash).
pub fn job_from_cronjob(cronjob: &Value, name: &str) -> Result<Value, String> {
    let meta = &cronjob["metadata"];
    let (Some(cronjob_name), Some(uid), Some(namespace)) = (
        meta["name"].as_str(),
        meta["uid"].as_str(),
        meta["namespace"].as_str(),
    ) else {
        return Err("the CronJob has no name, uid or namespace".into());
    };
    let template = &cronjob["spec"]["jobTemplate"];
    let Some(spec) = template.get("spec").filter(|s| s.is_object()) else {
        return Err(format!(
            "CronJob {cronjob_name} has no spec.jobTemplate.spec"
        ));
    };
    let mut job_annotations = template["metadata"]["annotations"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    job_annotations.insert(
        "cronjob.kubernetes.io/instantiate".into(),
        Value::from("manual"),
    );
    let mut metadata = Map::new();
    metadata.insert("name".into(), Value::from(name));
    metadata.insert("namespace".into(), Value::from(namespace));
    if let Some(labels) = template["metadata"]["labels"].as_object() {
        metadata.insert("labels".into(), Value::Object(labels.clone()));
    }
    metadata.insert("annotations".into(), Value::Object(job_annotations));
    metadata.insert(
        "ownerReferences".into(),
        json!([{
            "apiVersion": "batch/v1",
            "kind": "CronJob",
            "name": cronjob_name,
            "uid": uid,
            "controller": true,
            "blockOwnerDeletion": true,
        }]),
    );
    Ok(json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata,
        "spec": spec,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_template_rollout_annotates_the_metadata_and_the_pod_template() {
        assert_eq!(
            patch(Style::Template, "k", "h", "t"),
            json!({"metadata": {"annotations": {"k": "h"}},
                   "spec": {"template": {"metadata": {"annotations": {"k": "h"}}}}})
        );
    }

    #[test]
    fn a_cronjob_rollout_annotates_the_job_template() {
        assert_eq!(
            patch(Style::CronJob { run_now: true }, "k", "h", "t"),
            json!({"metadata": {"annotations": {"k": "h"}},
                   "spec": {"jobTemplate": {"spec": {"template": {"metadata": {"annotations": {"k": "h"}}}}}}})
        );
    }

    #[test]
    fn a_restart_sets_restart_at_and_leaves_the_template_alone() {
        assert_eq!(
            patch(Style::RestartAt, "k", "h", "2026-11-24T04:00:00Z"),
            json!({"metadata": {"annotations": {"k": "h"}},
                   "spec": {"restartAt": "2026-11-24T04:00:00Z"}})
        );
    }

    #[test]
    fn job_names_fit_the_api_limit_and_name_the_configuration() {
        assert_eq!(job_name("backup", "0123456789abcdef"), "backup-0123456789");
        let long = "a".repeat(60);
        let name = job_name(&long, "0123456789abcdef");
        assert_eq!(name.len(), 63);
        assert_eq!(job_name("x-----", "ab"), "x-ab");
    }

    #[test]
    fn a_job_from_a_cronjob_carries_its_template_owner_and_the_manual_annotation() {
        let cronjob = json!({
            "metadata": {"name": "backup", "namespace": "ns", "uid": "u-1"},
            "spec": {"suspend": false, "jobTemplate": {
                "metadata": {"labels": {"app": "b"}, "annotations": {"team": "x"}},
                "spec": {"backoffLimit": 2, "template": {
                    "metadata": {"annotations": {"wavelet.dev/config-hash": "h"}},
                    "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}}}}
        });
        let job = job_from_cronjob(&cronjob, "backup-h").unwrap();
        assert_eq!(job["metadata"]["name"], "backup-h");
        assert_eq!(job["metadata"]["namespace"], "ns");
        assert_eq!(job["metadata"]["labels"], json!({"app": "b"}));
        assert_eq!(
            job["metadata"]["annotations"],
            json!({"team": "x", "cronjob.kubernetes.io/instantiate": "manual"})
        );
        assert_eq!(
            job["metadata"]["ownerReferences"],
            json!([{"apiVersion": "batch/v1", "kind": "CronJob", "name": "backup", "uid": "u-1",
                    "controller": true, "blockOwnerDeletion": true}])
        );
        assert_eq!(job["spec"]["backoffLimit"], 2);
        assert_eq!(
            job["spec"]["template"]["metadata"]["annotations"]["wavelet.dev/config-hash"],
            "h"
        );
    }

    #[test]
    fn a_cronjob_without_a_job_template_is_an_error() {
        let cronjob = json!({"metadata": {"name": "b", "namespace": "ns", "uid": "u"}, "spec": {}});
        assert!(job_from_cronjob(&cronjob, "b-1")
            .unwrap_err()
            .contains("no spec.jobTemplate.spec"));
    }
}
