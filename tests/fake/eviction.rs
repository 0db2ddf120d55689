//! The eviction subresource (§4.4, wire 072–085): PDB lookup by selector, the 429 bodies
//! (with and without Retry-After), the two-PDB 500, the DisruptionTarget condition, and
//! the decrement of `disruptionsAllowed`.

use serde_json::{json, Value};

use super::controller::{is_pod_ready, pdbs_covering};
use super::http::{Request, Response};
use super::resources::Route;
use super::state::State;
use super::status::{self, Status};
use super::store::name_of;

const VIOLATION: &str = "Cannot evict pod as it would violate the pod's disruption budget.";

fn blocked(cause: String, retry_after: Option<u64>) -> Status {
    let status = Status::new(429, Some("TooManyRequests"), VIOLATION).cause(
        "DisruptionBudget",
        &cause,
        None,
    );
    match retry_after {
        Some(seconds) => status.retry_after(seconds),
        None => status,
    }
}

/// Pods that are Pending, finished or already terminating skip the PDB check.
fn can_ignore_pdb(pod: &Value) -> bool {
    let phase = pod
        .pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("Pending");
    matches!(phase, "Pending" | "Succeeded" | "Failed")
        || pod.pointer("/metadata/deletionTimestamp").is_some()
}

pub fn evict(
    state: &mut State,
    route: &Route,
    request: &Request,
    name: &str,
) -> Result<Response, Status> {
    let body: Value = serde_json::from_str(&request.body)
        .map_err(|_| status::bad_request(super::patch::go_json_error(&request.body)))?;
    if name_of(&body) != name {
        return Err(status::bad_request(
            "name in URL does not match name in Eviction object",
        ));
    }
    let namespace = route.namespace.as_deref().unwrap_or("");
    let pods = route.resource.clone();
    let pod = state
        .get(&pods, namespace, name)
        .ok_or_else(|| status::not_found(&pods, name))?;
    let dry = request.query_param("dryRun") == Some("All")
        || body
            .pointer("/deleteOptions/dryRun")
            .and_then(Value::as_array)
            .is_some_and(|d| d.iter().any(|v| v == "All"));
    if !can_ignore_pdb(&pod) {
        let covering = pdbs_covering(state, &pod);
        if covering.len() > 1 {
            return Err(Status::new(
                500,
                None,
                "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
            ));
        }
        if let Some(pdb) = covering.into_iter().next() {
            check_and_decrement(state, &pdb, &pod, dry)?;
        }
    }
    if !dry {
        let mut disrupted = pod.clone();
        let condition = json!({
            "type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI",
            "message": "Eviction API: evicting", "lastTransitionTime": state.clock.now(),
        });
        match disrupted["status"]["conditions"].as_array_mut() {
            Some(conditions) => conditions.push(condition),
            None => disrupted["status"]["conditions"] = json!([condition]),
        }
        state.update_status(&pods, &pod, disrupted);
        state.delete(&pods, namespace, name);
    }
    Ok(Response::json(201, &status::success(None, Some(201))))
}

fn count(pdb: &Value, field: &str) -> i64 {
    pdb.pointer(&format!("/status/{field}"))
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

/// `checkAndDecrement`: 429 unless the budget allows one more disruption, then records it.
fn check_and_decrement(
    state: &mut State,
    pdb: &Value,
    pod: &Value,
    dry: bool,
) -> Result<(), Status> {
    let pdb_name = name_of(pdb);
    let observed = count(pdb, "observedGeneration");
    let generation = pdb
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if observed < generation {
        let cause =
            format!("The disruption budget {pdb_name} is still being processed by the server.");
        return Err(blocked(cause, Some(10)));
    }
    let (healthy, desired) = (count(pdb, "currentHealthy"), count(pdb, "desiredHealthy"));
    if !is_pod_ready(pod) && healthy >= desired && desired > 0 {
        return Ok(());
    }
    let allowed = count(pdb, "disruptionsAllowed");
    if allowed < 0 {
        return Err(Status::new(
            403,
            Some("Forbidden"),
            "pdb disruptions allowed is negative",
        ));
    }
    if allowed == 0 {
        let cause = format!("The disruption budget {pdb_name} needs {desired} healthy pods and has {healthy} currently");
        return Err(blocked(cause, None));
    }
    if dry {
        return Ok(());
    }
    let pdbs = state.find_type("poddisruptionbudgets").expect("built in");
    let mut updated = pdb.clone();
    updated["status"]["disruptionsAllowed"] = (allowed - 1).into();
    updated["status"]["disruptedPods"][name_of(pod)] = state.clock.now().into();
    state.update_status(&pdbs, pdb, updated);
    Ok(())
}
