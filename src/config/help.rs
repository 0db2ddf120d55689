//! The `--help` text, written from the flag table.

use crate::config::flags::{FlagDefault, Scope, FLAGS};

/// The `--help` text: commands, then every flag of [`FLAGS`] with its environment variable
/// and default.
pub fn help_text() -> String {
    let mut out = format!(
        "wavelet {}: rolls Kubernetes workloads when the ConfigMaps and Secrets they use change

Usage:
  wavelet [run] [FLAGS]                  run the controller (the default command)
  wavelet status [-n NAMESPACE] [FLAGS]  list opted-in workloads and delete-mode objects
  wavelet hash -n NAMESPACE KIND/NAME    print the hash `run` would write, and its inputs
  wavelet migrate wave [-n NS | --all-namespaces] [--apply]
                                         remove what older Wave versions left (the
                                         finalizer, owner references); a dry run
                                         without --apply
  wavelet pause                          hold every rollout as pending (global pause)
  wavelet resume                         lift the global pause: pending changes roll once
  wavelet resume -n NS configmap/NAME    go on with a held fan-out of that ConfigMap (or
                                         secret/NAME) past the workload that failed
  wavelet migrate reloader [-n NAMESPACE]
                                         read-only: what switching from Stakater
                                         Reloader will do, and the order to switch in
  wavelet impact -f FILE [-f FILE...] [-n NS] [-o table|json|markdown]
                                         read-only: which workloads applying these
                                         ConfigMaps/Secrets would roll, in which waves
                                         and when; offline with --manifests DIR
  wavelet version                        print the version
  wavelet help, --help, -h               print this help

Flags take `--flag VALUE` or `--flag=VALUE`; boolean ones `--flag` or `--flag=false`.
Every flag can also be set by the environment variable shown (an empty one counts as
unset); a flag wins over the environment, which wins over the default.
Durations are written like 500ms, 10s, 5m, 1h30m.

Stakater Reloader's flags are taken by value: what wavelet already does is accepted and
said once at start (--reload-strategy, --reload-on-create, --reload-on-delete,
--sync-after-restart, --enable-pprof=false, --pprof-addr, the annotation flags set to
Reloader's own keys, --leader-election-lease-duration, -renew-deadline, -retry-period);
a value that would change behaviour unnoticed is refused, saying what to do instead.
",
        env!("CARGO_PKG_VERSION")
    );
    let sections = [
        (Scope::Global, "Connection and output (every command)"),
        (Scope::Run, "wavelet run"),
        (Scope::StatusAndHash, "wavelet status and wavelet hash"),
        (Scope::Hashing, "The hash (wavelet run, status and hash)"),
        (
            Scope::Migrate,
            "wavelet migrate wave (and -n for migrate reloader)",
        ),
        (
            Scope::Gating,
            "Rolling a shared change safely (wavelet run, status and impact)",
        ),
        (
            Scope::State,
            "wavelet's state (wavelet run, status, pause, resume, impact)",
        ),
        (
            Scope::Impact,
            "wavelet impact (also: -n, --namespace-selector, and the hash and fan-out flags above)",
        ),
    ];
    for (scope, title) in sections {
        out.push_str(&format!("\n{title}:\n"));
        for flag in FLAGS.iter().filter(|f| f.scope == scope) {
            let mut usage = match flag.short {
                Some(c) => format!("-{c}, --{}", flag.name),
                None => format!("--{}", flag.name),
            };
            if let Some(v) = flag.value {
                usage.push(' ');
                usage.push_str(v);
            }
            let default = match flag.default {
                FlagDefault::Value(d) => d,
                FlagDefault::Unset(meaning) => meaning,
            };
            out.push_str(&format!("  {usage}\n"));
            out.push_str(&wrap(flag.help, "      ", 88));
            out.push_str(&format!(
                "      [env {}] [default: {default}]\n",
                flag.env_var()
            ));
            if let Some(reloaders) = flag.reloader_env {
                out.push_str(&format!("      [or Reloader's env {reloaders}]\n"));
            }
        }
    }
    out
}

/// `text` in lines of at most `width` columns (longer words stay whole), each indented.
pub(super) fn wrap(text: &str, indent: &str, width: usize) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && indent.len() + line.len() + 1 + word.len() > width {
            out.push_str(&format!("{indent}{line}\n"));
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        out.push_str(&format!("{indent}{line}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::*;

    #[test]
    fn help_mentions_every_flag_its_environment_variable_and_its_default() {
        let help = help_text();
        for flag in FLAGS {
            assert!(
                help.contains(&format!("--{}", flag.name)),
                "--{} missing",
                flag.name
            );
            let default = match flag.default {
                FlagDefault::Value(d) | FlagDefault::Unset(d) => d,
            };
            let line = format!("[env {}] [default: {default}]", flag.env_var());
            assert!(help.contains(&line), "{line} missing");
        }
    }

    #[test]
    fn duration_defaults_are_written_as_duration_format_prints_them() {
        for flag in FLAGS.iter().filter(|f| f.value == Some("DURATION")) {
            let FlagDefault::Value(text) = flag.default else {
                panic!("--{} has no default", flag.name);
            };
            let parsed = duration::parse(text).unwrap();
            assert_eq!(duration::format(parsed), text, "--{}", flag.name);
        }
    }

    #[test]
    fn help_lines_fit_in_90_columns() {
        for line in help_text().lines() {
            assert!(line.chars().count() <= 90, "too long: {line}");
        }
    }
}
