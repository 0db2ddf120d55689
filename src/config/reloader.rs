//! Stakater Reloader's flags and environment variables that ask for nothing wavelet does not
//! already do, judged by their value: accepted with a note saying what wavelet does (logged
//! once at start, at info), or refused, naming what to do instead, where the value would
//! change behaviour without anyone noticing. Reloader's flags with an effect on wavelet
//! (`--enable-ha`, `--log-level`, `--is-Argo-Rollouts`, ...) are rows of the flag table.

/// What a judged flag's value is checked against.
pub(super) enum Rule {
    /// Renames one of Reloader's annotation keys: accepted when it is Reloader's own key,
    /// the one wavelet reads.
    AnnotationKey(&'static str),
    /// Anything else: the note, or why the value is refused.
    Judge(fn(&str) -> Result<String, String>),
}

/// One Reloader flag that only needs judging.
pub(super) struct Judged {
    pub(super) name: &'static str,
    /// `false`: a boolean flag (`--flag` alone means true).
    pub(super) takes_value: bool,
    pub(super) rule: Rule,
}

const fn key(name: &'static str, default: &'static str) -> Judged {
    Judged {
        name,
        takes_value: true,
        rule: Rule::AnnotationKey(default),
    }
}

const fn judged(
    name: &'static str,
    takes_value: bool,
    judge: fn(&str) -> Result<String, String>,
) -> Judged {
    Judged {
        name,
        takes_value,
        rule: Rule::Judge(judge),
    }
}

/// Every Reloader flag judged by value, from Reloader's `ConfigureReloaderFlags` and what its
/// chart renders.
pub(super) static JUDGED: &[Judged] = &[
    judged("reload-strategy", true, reload_strategy),
    judged("reload-on-create", false, reload_on_create),
    judged("reload-on-delete", false, reload_on_delete),
    judged("sync-after-restart", false, sync_after_restart),
    judged("webhook-url", true, webhook_url),
    judged("enable-pprof", false, enable_pprof),
    judged("pprof-addr", true, |_| {
        Ok("no effect: wavelet has no pprof server".into())
    }),
    key(
        "configmap-annotation",
        "configmap.reloader.stakater.com/reload",
    ),
    key("secret-annotation", "secret.reloader.stakater.com/reload"),
    key("auto-annotation", "reloader.stakater.com/auto"),
    key(
        "configmap-auto-annotation",
        "configmap.reloader.stakater.com/auto",
    ),
    key(
        "secret-auto-annotation",
        "secret.reloader.stakater.com/auto",
    ),
    key("auto-search-annotation", "reloader.stakater.com/search"),
    key("search-match-annotation", "reloader.stakater.com/match"),
    key("ignore-annotation", "reloader.stakater.com/ignore"),
    key(
        "pause-deployment-annotation",
        "deployment.reloader.stakater.com/pause-period",
    ),
    judged("pause-deployment-time-annotation", true, |_| {
        Ok(
            "no effect: wavelet never pauses a Deployment (a pause period is a debounce window)"
                .into(),
        )
    }),
];

pub(super) fn find(name: &str) -> Option<&'static Judged> {
    JUDGED.iter().find(|j| j.name == name)
}

impl Judged {
    /// The note for `value`, or the error message (naming the flag).
    pub(super) fn judge(&self, value: &str) -> Result<String, String> {
        let verdict = match self.rule {
            Rule::AnnotationKey(default) if value == default => {
                Ok("the key wavelet reads".to_string())
            }
            Rule::AnnotationKey(default) => Err(format!(
                "wavelet reads Reloader's annotation keys as they are ({default}); renaming them is not supported: rename the annotations on your workloads to {default} and remove the flag"
            )),
            Rule::Judge(judge) => judge(value),
        };
        let flag = format!("--{}={}", self.name, shown_value(value));
        verdict
            .map(|note| format!("{flag}: {note}"))
            .map_err(|why| format!("{flag} is a Stakater Reloader flag whose meaning wavelet does not share: {why} (book: Coming from Reloader)"))
    }
}

/// A flag's value as it may be printed: a URL (a webhook's holds its token in its path)
/// as its scheme and host only.
pub(crate) fn shown_value(value: &str) -> std::borrow::Cow<'_, str> {
    if value.contains("://") {
        crate::error::shown_url(value).into()
    } else {
        value.into()
    }
}

/// Reloader's string flags (`--is-Argo-Rollouts`, `--reload-on-create`,
/// `--reload-on-delete`) are compared to `"true"` exactly: `1`, `yes` or `True` there mean
/// false. Returns the value as Reloader reads it, and what to add to the note when the
/// text could be taken for something else.
pub(crate) fn reloaders_string_bool(value: &str) -> (bool, &'static str) {
    match value {
        "true" => (true, ""),
        "false" => (false, ""),
        _ => (
            false,
            " (Reloader compares this flag to \"true\" exactly, so it reads this value as false, and so does wavelet)",
        ),
    }
}

/// Reloader's Go bool flags (`--sync-after-restart`, `--enable-pprof`): what Go's
/// `strconv.ParseBool` takes.
fn go_bool(value: &str) -> Result<bool, String> {
    match value {
        "true" | "1" | "t" | "T" | "TRUE" | "True" => Ok(true),
        "false" | "0" | "f" | "F" | "FALSE" | "False" => Ok(false),
        _ => Err(format!(
            "expected true or false (Reloader refuses {value:?} too)"
        )),
    }
}

fn reload_strategy(value: &str) -> Result<String, String> {
    match value {
        "env-vars" => Ok("wavelet writes its hash annotation (wavelet.dev/config-hash) on the pod template, not STAKATER_* variables (those Reloader left stay); adoption rolls nothing".into()),
        "annotations" => Ok("wavelet writes its hash annotation (wavelet.dev/config-hash) on the pod template; adoption rolls nothing".into()),
        _ => Err(format!("expected env-vars or annotations (as Reloader), got {value:?}")),
    }
}

fn reload_on_create(value: &str) -> Result<String, String> {
    let (on, read) = reloaders_string_bool(value);
    let what = if on {
        "a created ConfigMap or Secret rolls the workloads whose configuration it changes (a missing one appears, a deleted one is back with other data)"
    } else {
        "wavelet differs from Reloader here: a created ConfigMap or Secret rolls the workloads that referenced it while it was missing (their configuration changed), and no other"
    };
    Ok(format!("{what}{read}"))
}

fn reload_on_delete(value: &str) -> Result<String, String> {
    let (on, read) = reloaders_string_bool(value);
    let what = if on {
        "deleting an optional reference rolls; deleting a required one holds the rollout (ConfigMissing Warning) until it is back"
    } else {
        "wavelet differs from Reloader here: deleting an optional ConfigMap or Secret still rolls the workloads that reference it (their configuration changed), and deleting a required one holds their rollouts (ConfigMissing Warning) until it is back"
    };
    Ok(format!("{what}{read}"))
}

fn sync_after_restart(value: &str) -> Result<String, String> {
    go_bool(value)?;
    Ok("changes made while wavelet was not running are rolled at start, whatever the value".into())
}

fn webhook_url(value: &str) -> Result<String, String> {
    if value.is_empty() {
        return Ok("no webhook".into());
    }
    Err("it stops every rollout and POSTs {\"webhook\":\"update successful\"} for any ConfigMap or Secret change, naming nothing (not the per-workload reload endpoint stakater/Reloader#497 and #524 asked for). To be told instead of rolling: --dry-run with ALERT_ON_RELOAD=true, ALERT_SINK=webhook, ALERT_WEBHOOK_URL=<url> (a POST per workload that would roll, naming it and what changed); to roll and be told: the ALERT_* variables alone".into())
}

fn enable_pprof(value: &str) -> Result<String, String> {
    if go_bool(value)? {
        Err("wavelet has no pprof; /metrics has its memory and CPU (process_resident_memory_bytes, process_cpu_seconds_total)".into())
    } else {
        Ok("no pprof server (wavelet has none)".into())
    }
}

/// Reloader's environment variables that set nothing in wavelet, with why; noted at start
/// when present.
pub(super) static NOTED_ENV: &[(&str, &str)] = &[
    (
        "RELOADER_NAMESPACE",
        "no effect (wavelet writes no reloader-meta-info ConfigMap)",
    ),
    (
        "RELOADER_DEPLOYMENT_NAME",
        "no effect (wavelet writes no reloader-meta-info ConfigMap)",
    ),
    ("GOMAXPROCS", "a Go runtime setting: no effect"),
    ("GOMEMLIMIT", "a Go runtime setting: no effect"),
];

#[cfg(test)]
mod tests {
    use super::*;

    fn judge(name: &str, value: &str) -> Result<String, String> {
        find(name).expect("a judged flag").judge(value)
    }

    #[test]
    fn both_reload_strategies_are_accepted_and_the_note_says_what_wavelet_writes_instead() {
        for strategy in ["env-vars", "annotations"] {
            let note = judge("reload-strategy", strategy).unwrap();
            assert!(
                note.starts_with(&format!("--reload-strategy={strategy}: ")),
                "{note}"
            );
            assert!(note.contains("wavelet.dev/config-hash"), "{note}");
        }
        assert!(judge("reload-strategy", "env-vars")
            .unwrap()
            .contains("STAKATER_"));
        assert!(judge("reload-strategy", "restart")
            .unwrap_err()
            .contains("expected env-vars or annotations"));
    }

    #[test]
    fn an_annotation_key_is_accepted_only_as_reloaders_own() {
        assert!(judge("auto-annotation", "reloader.stakater.com/auto").is_ok());
        let refused = judge("auto-annotation", "my.company.com/auto").unwrap_err();
        assert!(
            refused
                .starts_with("--auto-annotation=my.company.com/auto is a Stakater Reloader flag"),
            "{refused}"
        );
        assert!(
            refused
                .contains("rename the annotations on your workloads to reloader.stakater.com/auto"),
            "{refused}"
        );
        // wavelet writes no paused-at annotation, so its name does not matter.
        assert!(judge("pause-deployment-time-annotation", "x/paused").is_ok());
    }

    #[test]
    fn a_webhook_url_is_refused_with_what_to_do_instead_and_an_empty_one_accepted() {
        assert!(judge("webhook-url", "").is_ok());
        let refused = judge("webhook-url", "https://hooks.example/x").unwrap_err();
        assert!(
            refused.contains("--dry-run with ALERT_ON_RELOAD=true"),
            "{refused}"
        );
        assert!(refused.contains("stakater/Reloader#497"), "{refused}");
    }

    #[test]
    fn a_refused_webhook_url_is_named_by_its_host_never_its_path_or_query() {
        let slack = "https://hooks.slack.com/services/T00/B00/SECRETTOKEN?x=QUERYTOKEN";
        let refused = judge("webhook-url", slack).unwrap_err();
        assert!(
            refused.starts_with("--webhook-url=https://hooks.slack.com (the rest not shown) is"),
            "{refused}"
        );
        assert!(
            !refused.contains("SECRETTOKEN") && !refused.contains("QUERYTOKEN"),
            "{refused}"
        );
    }

    #[test]
    fn pprof_off_is_accepted_and_on_is_refused_naming_the_metrics_instead() {
        assert!(judge("enable-pprof", "false").is_ok());
        assert!(judge("enable-pprof", "true")
            .unwrap_err()
            .contains("process_resident_memory_bytes"));
        assert!(judge("pprof-addr", ":6060").is_ok());
    }

    #[test]
    fn reload_on_create_delete_and_sync_after_restart_are_accepted_either_way_but_not_garbage() {
        for name in ["reload-on-create", "reload-on-delete", "sync-after-restart"] {
            assert!(judge(name, "true").is_ok(), "{name}");
            assert!(judge(name, "false").is_ok(), "{name}");
        }
        assert!(judge("sync-after-restart", "maybe").is_err());
        assert!(judge("reload-on-create", "true")
            .unwrap()
            .contains("other data"));
        assert!(judge("reload-on-delete", "true")
            .unwrap()
            .contains("ConfigMissing"));
    }

    #[test]
    fn reloaders_string_flags_are_true_only_when_exactly_true_and_a_difference_is_said() {
        for value in ["1", "yes", "True", "TRUE", "on"] {
            let note = judge("reload-on-delete", value).unwrap();
            assert!(
                note.contains("reads this value as false"),
                "{value}: {note}"
            );
            assert!(note.contains("still rolls"), "{value}: {note}");
            let note = judge("reload-on-create", value).unwrap();
            assert!(
                note.contains("reads this value as false"),
                "{value}: {note}"
            );
        }
        assert_eq!(reloaders_string_bool("true"), (true, ""));
        assert_eq!(reloaders_string_bool("false"), (false, ""));
        let off = judge("reload-on-delete", "false").unwrap();
        assert!(off.contains("wavelet differs from Reloader here"), "{off}");
        assert!(!off.contains("reads this value"), "{off}");
        let on = judge("reload-on-delete", "true").unwrap();
        assert!(!on.contains("differs"), "{on}");
    }

    #[test]
    fn reloaders_go_bool_flags_take_what_go_parse_bool_takes() {
        for value in ["1", "t", "T", "TRUE", "True", "true"] {
            assert!(judge("enable-pprof", value).is_err(), "{value}: pprof on");
        }
        for value in ["0", "f", "FALSE", "False"] {
            assert!(judge("enable-pprof", value).is_ok(), "{value}");
        }
        assert!(judge("sync-after-restart", "yes").is_err());
    }
}
