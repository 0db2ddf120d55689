//! Pauses, restart windows and urgent changes: whether a rollout may go now, as pure
//! functions of the annotations, the global settings and the time.
//!
//! - **Pause**: the global pause (`wavelet pause`), or `wavelet.dev/pause: "true"` on the
//!   workload's Namespace, the workload, or a ConfigMap/Secret it uses: pending until
//!   lifted, then it rolls once with the latest hash.
//! - **Window**: the workload's `wavelet.dev/restart-window`, else its Namespace's, else
//!   `--restart-window`: outside, pending until the next opening. A window that cannot be
//!   read is skipped (a Warning says so) and the next one out applies.
//! - **Urgent**: `wavelet.dev/urgent` on a ConfigMap/Secret lets the change of that object
//!   through the windows of the workloads it made due, once: the grant is recorded with
//!   the value and the data hash, and a later change needs a new value. It never lets
//!   another object's change through (the caller passes only the objects that changed).

use crate::hashmode::fanout::record::Urgent;
use crate::window::Windows;

/// Why a rollout waits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pending {
    /// Paused; the text says by what.
    Paused(String),
    /// Outside its restart window; it opens at `opens_at` (Unix seconds).
    Window { opens_at: i64, windows: String },
    /// Its fan-out has not released it yet: it waits for the wave before to finish.
    Wave { fan_out: String, wave: usize },
    /// Its fan-out is held: a workload of an earlier wave failed its rollout.
    Held { fan_out: String, reason: String },
}

impl Pending {
    /// The `reason` label of `wavelet_rollouts_pending`.
    pub fn label(&self) -> &'static str {
        match self {
            Pending::Paused(_) => "pause",
            Pending::Window { .. } => "window",
            Pending::Wave { .. } => "wave",
            Pending::Held { .. } => "held",
        }
    }

    /// One line for `status`, logs and Events.
    pub fn describe(&self, now: i64) -> String {
        match self {
            Pending::Paused(by) => format!("PENDING: paused ({by})"),
            Pending::Window { opens_at, windows } => format!(
                "PENDING: outside its restart window {windows}; rolls at {} (in {})",
                crate::time::rfc3339((*opens_at).max(0) as u64),
                human(opens_at.saturating_sub(now).max(0) as u64)
            ),
            Pending::Wave { fan_out, wave } => {
                format!("PENDING: waiting for wave {wave} of {fan_out}")
            }
            Pending::Held { fan_out, reason } => format!("HELD: {fan_out}: {reason}"),
        }
    }
}

/// `3h12m`, `4m10s`, `9s`.
pub fn human(seconds: u64) -> String {
    let (d, h, m, s) = (
        seconds / 86_400,
        seconds / 3600 % 24,
        seconds / 60 % 60,
        seconds % 60,
    );
    match (d, h, m) {
        (0, 0, 0) => format!("{s}s"),
        (0, 0, _) => format!("{m}m{s}s"),
        (0, _, _) => format!("{h}h{m}m"),
        _ => format!("{d}d{h}h"),
    }
}

/// What pauses this rollout, if anything, most global first.
pub fn paused_by(
    global_since: Option<u64>,
    namespace: Option<&str>,
    workload: bool,
    configs: &[String],
) -> Option<String> {
    if let Some(since) = global_since {
        return Some(format!(
            "wavelet pause since {}; `wavelet resume` lifts it",
            crate::time::rfc3339(since)
        ));
    }
    if let Some(ns) = namespace {
        return Some(format!("Namespace {ns} has wavelet.dev/pause"));
    }
    if workload {
        return Some("the workload has wavelet.dev/pause".into());
    }
    configs
        .first()
        .map(|c| format!("{c} has wavelet.dev/pause"))
}

/// The restart windows that apply, most specific first: the workload's annotation, its
/// Namespace's, the flag. Each candidate is `(text, where)`; one that cannot be read is
/// returned in the second list (to warn about) and the next applies.
pub fn window_for<'a>(
    candidates: &[(Option<&'a str>, &'static str)],
    global: Option<&'a Windows>,
) -> (Option<Windows>, Vec<(&'static str, String)>) {
    let mut problems = Vec::new();
    for (text, place) in candidates {
        let Some(text) = text else { continue };
        match Windows::parse(text) {
            Ok(w) => return (Some(w), problems),
            Err(why) => problems.push((*place, why)),
        }
    }
    (global.cloned(), problems)
}

/// Whether `windows` hold the rollout at `now`: `None` when it may go.
pub fn outside_window(windows: Option<&Windows>, urgent: bool, now: i64) -> Option<Pending> {
    let windows = windows?;
    if urgent || windows.is_open(now) {
        return None;
    }
    Some(Pending::Window {
        opens_at: windows.next_opening(now),
        windows: windows.to_string(),
    })
}

/// Whether an object's `wavelet.dev/urgent` value lets its change (`hash`) through, and
/// the grant to record when it is new.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UrgentDecision {
    /// No urgent annotation (a recorded grant, if any, is forgotten).
    No,
    /// The value was used for an earlier change: this one is not urgent.
    Used,
    /// Let through; record the grant when `Some`.
    Granted(Option<Urgent>),
}

pub fn urgent(value: Option<&str>, recorded: Option<&Urgent>, hash: &str) -> UrgentDecision {
    let Some(value) = value
        .map(str::trim)
        .filter(|v| !v.is_empty() && *v != "false")
    else {
        return UrgentDecision::No;
    };
    match recorded {
        Some(r) if r.value == value && r.hash == hash => UrgentDecision::Granted(None),
        Some(r) if r.value == value => UrgentDecision::Used,
        _ => UrgentDecision::Granted(Some(Urgent {
            hash: hash.to_string(),
            value: value.to_string(),
        })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MONDAY_3AM_UTC: i64 = 1_767_582_000; // 2026-01-05T03:00:00Z

    #[test]
    fn the_most_global_pause_is_named() {
        let configs = ["configmap ns/shared".to_string()];
        let table = [
            (
                Some(1_795_317_280),
                Some("ns"),
                true,
                &configs[..],
                "wavelet pause since 2026-11-22T03:14:40Z",
            ),
            (None, Some("ns"), true, &configs[..], "Namespace ns"),
            (None, None, true, &configs[..], "the workload"),
            (None, None, false, &configs[..], "configmap ns/shared"),
        ];
        for (global, ns, workload, configs, says) in table {
            let by = paused_by(global, ns, workload, configs).unwrap();
            assert!(by.contains(says), "{by}");
        }
        assert_eq!(paused_by(None, None, false, &[]), None);
    }

    #[test]
    fn the_most_specific_readable_window_applies() {
        let global = Windows::parse("Sat 00:00-24:00").unwrap();
        let (w, problems) = window_for(
            &[
                (Some("Mon 02:00-03:00"), "workload"),
                (Some("always"), "Namespace"),
            ],
            Some(&global),
        );
        assert_eq!(w.unwrap().to_string(), "Mon 02:00-03:00");
        assert!(problems.is_empty());
        let (w, problems) = window_for(
            &[(Some("Mon 2-3"), "workload"), (None, "Namespace")],
            Some(&global),
        );
        assert_eq!(w.unwrap().to_string(), "Sat 00:00-24:00");
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].0, "workload");
        assert!(window_for(&[(None, "workload")], None).0.is_none());
    }

    #[test]
    fn outside_its_window_a_rollout_waits_for_the_opening_unless_urgent() {
        let w = Windows::parse("Mon 04:00-05:00").unwrap();
        let clock = [
            (MONDAY_3AM_UTC, false, Some(MONDAY_3AM_UTC + 3600)),
            (MONDAY_3AM_UTC + 3600, false, None),
            (MONDAY_3AM_UTC, true, None),
        ];
        for (now, urgent, opens) in clock {
            let pending = outside_window(Some(&w), urgent, now);
            match opens {
                Some(at) => assert_eq!(
                    pending,
                    Some(Pending::Window {
                        opens_at: at,
                        windows: "Mon 04:00-05:00".into()
                    })
                ),
                None => assert_eq!(pending, None),
            }
        }
        assert_eq!(outside_window(None, false, MONDAY_3AM_UTC), None);
        let text = outside_window(Some(&w), false, MONDAY_3AM_UTC)
            .unwrap()
            .describe(MONDAY_3AM_UTC);
        assert_eq!(
            text,
            "PENDING: outside its restart window Mon 04:00-05:00; rolls at 2026-01-05T04:00:00Z (in 1h0m)"
        );
    }

    #[test]
    fn an_urgent_value_lets_one_change_through_and_a_new_value_the_next() {
        let granted = |hash: &str, value: &str| Urgent {
            hash: hash.into(),
            value: value.into(),
        };
        assert_eq!(urgent(None, None, "h1"), UrgentDecision::No);
        assert_eq!(urgent(Some("false"), None, "h1"), UrgentDecision::No);
        assert_eq!(
            urgent(Some("true"), None, "h1"),
            UrgentDecision::Granted(Some(granted("h1", "true")))
        );
        assert_eq!(
            urgent(Some("true"), Some(&granted("h1", "true")), "h1"),
            UrgentDecision::Granted(None)
        );
        assert_eq!(
            urgent(Some("true"), Some(&granted("h1", "true")), "h2"),
            UrgentDecision::Used
        );
        assert_eq!(
            urgent(Some("INC-7"), Some(&granted("h1", "true")), "h2"),
            UrgentDecision::Granted(Some(granted("h2", "INC-7")))
        );
    }

    #[test]
    fn durations_read_like_a_person_writes_them() {
        assert_eq!(human(9), "9s");
        assert_eq!(human(250), "4m10s");
        assert_eq!(human(3 * 3600 + 720), "3h12m");
        assert_eq!(human(2 * 86_400 + 3600), "2d1h");
    }
}
