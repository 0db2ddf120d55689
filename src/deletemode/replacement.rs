//! One replacement in progress, and what it does next: [`next_step`] decides from the
//! replacement's state, the matching Pods as listed now and the time, with no I/O; the
//! reconciler (`deletemode/mod.rs`) carries the decision out and steps again.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::deletemode::decide::{ready_again, Strategy, Target};
use crate::deletemode::ledger::Entry;
use crate::objects::Pod;
use crate::selector::Selector;

/// How often a rolling replacement looks whether the Pods are Ready again.
pub(crate) const READY_POLL: Duration = Duration::from_millis(200);

/// Where a replacement is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Replace the next Pod (`rolling`) or every remaining Pod (`evict`, `delete`).
    Replace,
    /// `rolling`: wait until the matching Pods are Ready again (see [`ready_again`]), or
    /// until `deadline` (then warn and go on).
    AwaitReady { deadline: Instant },
}

impl Phase {
    /// Where a replacement starts: `rolling` evicts nothing while some matching Pod is not
    /// Ready (`deadline` is the `--rolling-timeout` from now); the others replace at once.
    pub(crate) fn first(strategy: Strategy, deadline: Instant) -> Phase {
        match strategy {
            Strategy::Rolling => Phase::AwaitReady { deadline },
            Strategy::Evict | Strategy::Delete => Phase::Replace,
        }
    }
}

/// One replacement in progress: the Pods of one observation, for one data hash.
#[derive(Debug)]
pub(crate) struct Replacement {
    pub(crate) hash: String,
    /// Its entry in `wavelet-state` as written at the start (or read, when resumed): the
    /// entry finishing it replaces.
    pub(crate) entry: Entry,
    pub(crate) strategy: Strategy,
    pub(crate) selector: Selector,
    pub(crate) remaining: VecDeque<Target>,
    pub(crate) replaced: usize,
    pub(crate) phase: Phase,
    /// `rolling`: how many live matching Pods there were when last all Ready (at first, at
    /// observation); the count to be back at before the next Pod goes.
    pub(crate) want: usize,
    /// Since when evictions have been refused without one going through.
    pub(crate) blocked_since: Option<Instant>,
    pub(crate) warned_blocked: bool,
    /// The Pods of several workloads, replaced in waves (`waves.rs`); `None`: at once.
    pub(crate) waves: Option<crate::deletemode::waves::Plan>,
}

/// What a replacement does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Next {
    /// Every Pod is replaced (or was gone already): record the data hash and say so.
    Finish,
    /// Evict or delete the remaining Pods in order; `one_at_a_time` (`rolling`): stop
    /// after the first that goes through, then await Ready.
    Replace { one_at_a_time: bool },
    /// `rolling`: list the matching Pods to see whether they are Ready again.
    ListPods,
    /// `rolling`: they are; `live` is the count to be back at before the next Pod goes.
    ReadyAgain { live: usize },
    /// `rolling`: not all Ready yet; look again after this long.
    AwaitReady(Duration),
    /// `rolling`: not all Ready by the `--rolling-timeout`: warn, then go on.
    TimedOut,
    /// The last evictions were refused: retry after the backoff; `warn` when they have been
    /// refused for `--eviction-warning-after` and nobody was told yet.
    Blocked { warn: bool },
}

/// What [`next_step`] decides from, besides the replacement itself.
pub(crate) struct Facts<'a> {
    /// The matching Pods as listed now; `None` when not listed in this step.
    pub listed: Option<&'a [Pod]>,
    /// The last attempt in this step was refused (a PodDisruptionBudget).
    pub refused: bool,
    /// `--eviction-warning-after`.
    pub eviction_warning_after: Duration,
}

/// The replacement's next step, as a pure function of its state, the facts and the time.
pub(crate) fn next_step(r: &Replacement, facts: &Facts, now: Instant) -> Next {
    if facts.refused {
        let since = r.blocked_since.unwrap_or(now);
        let warn = !r.warned_blocked
            && now.saturating_duration_since(since) >= facts.eviction_warning_after;
        return Next::Blocked { warn };
    }
    match r.phase {
        Phase::AwaitReady { deadline } => match facts.listed {
            None => Next::ListPods,
            Some(pods) if ready_again(pods, r.want) => Next::ReadyAgain {
                live: pods.iter().filter(|p| !p.is_terminating()).count(),
            },
            Some(_) if now < deadline => Next::AwaitReady(READY_POLL),
            Some(_) => Next::TimedOut,
        },
        Phase::Replace if r.remaining.is_empty() => Next::Finish,
        Phase::Replace => Next::Replace {
            one_at_a_time: r.strategy == Strategy::Rolling,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, ready: bool, terminating: bool) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "uid": name, "creationTimestamp": "2026-11-22T03:14:40Z",
                         "deletionTimestamp": if terminating { json!("2026-11-22T03:15:00Z") } else { json!(null) }},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}
        }))
        .unwrap()
    }

    fn replacement(strategy: Strategy, remaining: usize, phase: Phase) -> Replacement {
        Replacement {
            hash: "h".into(),
            entry: Entry::Acted { hash: "h".into() },
            strategy,
            selector: Selector::parse("app=web").unwrap(),
            remaining: (0..remaining)
                .map(|i| Target {
                    name: format!("p{i}"),
                    uid: format!("u{i}"),
                })
                .collect(),
            replaced: 0,
            phase,
            want: 2,
            blocked_since: None,
            warned_blocked: false,
            waves: None,
        }
    }

    const WARN_AFTER: Duration = Duration::from_secs(60);

    fn facts(listed: Option<&[Pod]>, refused: bool) -> Facts<'_> {
        Facts {
            listed,
            refused,
            eviction_warning_after: WARN_AFTER,
        }
    }

    #[test]
    fn evict_and_delete_replace_every_remaining_pod_at_once_then_finish() {
        let now = Instant::now();
        for strategy in [Strategy::Evict, Strategy::Delete] {
            let r = replacement(strategy, 3, Phase::first(strategy, now));
            assert_eq!(
                next_step(&r, &facts(None, false), now),
                Next::Replace {
                    one_at_a_time: false
                },
                "{strategy}"
            );
            let done = replacement(strategy, 0, Phase::Replace);
            assert_eq!(
                next_step(&done, &facts(None, false), now),
                Next::Finish,
                "{strategy}"
            );
        }
    }

    #[test]
    fn nothing_left_to_replace_finishes() {
        let now = Instant::now();
        let r = replacement(Strategy::Rolling, 0, Phase::Replace);
        assert_eq!(next_step(&r, &facts(None, false), now), Next::Finish);
    }

    #[test]
    fn rolling_starts_by_looking_whether_the_pods_are_ready() {
        let now = Instant::now();
        let deadline = now + Duration::from_secs(5);
        let r = replacement(
            Strategy::Rolling,
            3,
            Phase::first(Strategy::Rolling, deadline),
        );
        assert_eq!(r.phase, Phase::AwaitReady { deadline });
        assert_eq!(next_step(&r, &facts(None, false), now), Next::ListPods);
    }

    #[test]
    fn rolling_goes_on_once_enough_live_pods_are_all_ready() {
        let now = Instant::now();
        let r = replacement(
            Strategy::Rolling,
            2,
            Phase::AwaitReady {
                deadline: now + Duration::from_secs(5),
            },
        );
        let pods = [
            pod("a", true, false),
            pod("b", true, false),
            pod("c", false, true),
        ];
        assert_eq!(
            next_step(&r, &facts(Some(&pods), false), now),
            Next::ReadyAgain { live: 2 },
            "the terminating Pod counts neither way"
        );
        let replacing = replacement(Strategy::Rolling, 2, Phase::Replace);
        assert_eq!(
            next_step(&replacing, &facts(None, false), now),
            Next::Replace {
                one_at_a_time: true
            }
        );
    }

    #[test]
    fn rolling_waits_while_a_pod_is_not_ready_or_one_is_missing() {
        let now = Instant::now();
        let deadline = now + Duration::from_secs(5);
        let r = replacement(Strategy::Rolling, 2, Phase::AwaitReady { deadline });
        let cases: [&[Pod]; 2] = [
            &[pod("a", true, false), pod("b", false, false)],
            &[pod("a", true, false)],
        ];
        for pods in cases {
            assert_eq!(
                next_step(&r, &facts(Some(pods), false), now),
                Next::AwaitReady(READY_POLL)
            );
        }
        let almost = deadline - Duration::from_millis(1);
        assert_eq!(
            next_step(&r, &facts(Some(cases[1]), false), almost),
            Next::AwaitReady(READY_POLL)
        );
    }

    #[test]
    fn rolling_times_out_at_the_deadline_and_goes_on() {
        let now = Instant::now();
        let r = replacement(Strategy::Rolling, 2, Phase::AwaitReady { deadline: now });
        let pods = [pod("a", false, false), pod("b", true, false)];
        assert_eq!(
            next_step(&r, &facts(Some(&pods), false), now),
            Next::TimedOut
        );
    }

    #[test]
    fn refused_evictions_back_off_and_warn_once_after_the_warning_delay() {
        let now = Instant::now();
        for strategy in [Strategy::Evict, Strategy::Rolling] {
            let mut r = replacement(strategy, 2, Phase::Replace);
            // The first refusal: nothing to say yet.
            assert_eq!(
                next_step(&r, &facts(None, true), now),
                Next::Blocked { warn: false },
                "{strategy}"
            );
            r.blocked_since = Some(now);
            assert_eq!(
                next_step(&r, &facts(None, true), now + WARN_AFTER / 2),
                Next::Blocked { warn: false },
                "{strategy}"
            );
            assert_eq!(
                next_step(&r, &facts(None, true), now + WARN_AFTER),
                Next::Blocked { warn: true },
                "{strategy}"
            );
            r.warned_blocked = true;
            assert_eq!(
                next_step(&r, &facts(None, true), now + WARN_AFTER * 2),
                Next::Blocked { warn: false },
                "warned once: {strategy}"
            );
        }
    }

    #[test]
    fn a_refusal_outranks_whatever_the_phase_would_do() {
        let now = Instant::now();
        let r = replacement(Strategy::Evict, 0, Phase::Replace);
        assert_eq!(
            next_step(&r, &facts(None, true), now),
            Next::Blocked { warn: false }
        );
    }

    #[test]
    fn a_replacement_blocked_again_after_a_pod_went_through_starts_its_clock_again() {
        // `blocked_since` is cleared when a Pod goes through; a new refusal starts from now.
        let now = Instant::now();
        let mut r = replacement(Strategy::Evict, 1, Phase::Replace);
        r.blocked_since = None;
        r.warned_blocked = false;
        assert_eq!(
            next_step(&r, &facts(None, true), now + WARN_AFTER * 10),
            Next::Blocked { warn: false }
        );
    }
}
