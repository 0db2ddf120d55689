//! Step 1 of parsing: the arguments split into a command, raw flag values and
//! positionals, before any value is validated.

use std::collections::BTreeMap;

use crate::config::flags::{find_flag, find_short, Flag, FlagDefault, REPEATABLE};
use crate::config::reloader::{self, Judged};
use crate::error::Error;

/// The subcommands, as typed.
pub(super) const COMMANDS: &[&str] = &[
    "run", "status", "hash", "impact", "migrate", "pause", "resume", "version", "help",
];

/// The arguments split up, before any value is validated.
pub(super) struct Raw<'a> {
    /// The subcommand as typed; `run` when none was given.
    pub(super) command: &'a str,
    /// Flag values from the command line, by flag name.
    pub(super) flags: BTreeMap<&'static str, String>,
    /// Arguments after the subcommand that are not flags.
    pub(super) positionals: Vec<&'a str>,
    /// Reloader's flags that are only judged by value (`reloader.rs`), with their values.
    pub(super) judged: Vec<(&'static Judged, String)>,
    /// Reloader's spellings used (`--leader-election-lease-duration`), for the start-up notes.
    pub(super) notes: Vec<String>,
    pub(super) help: bool,
}

pub(super) fn config_error(msg: impl Into<String>) -> Error {
    Error::Config(msg.into())
}

pub(super) fn split_args(args: &[String]) -> Result<Raw<'_>, Error> {
    let mut raw = Raw {
        command: "",
        flags: BTreeMap::new(),
        positionals: Vec::new(),
        judged: Vec::new(),
        notes: Vec::new(),
        help: false,
    };
    let mut rest = args.iter();
    let mut only_positionals = false;
    while let Some(arg) = rest.next() {
        let arg = arg.as_str();
        let (flag, inline, spelled): (&'static Flag, Option<&str>, String) =
            if only_positionals || arg == "-" || !arg.starts_with('-') {
                if raw.command.is_empty() {
                    if !COMMANDS.contains(&arg) {
                        return Err(config_error(format!(
                            "unknown command {arg:?}: expected one of {}; see wavelet --help",
                            COMMANDS.join(", ")
                        )));
                    }
                    raw.command = arg;
                } else {
                    raw.positionals.push(arg);
                }
                continue;
            } else if arg == "--" {
                only_positionals = true;
                continue;
            } else if arg == "-h" || arg == "--help" {
                raw.help = true;
                continue;
            } else if let Some(body) = arg.strip_prefix("--") {
                let (name, inline) = match body.split_once('=') {
                    Some((name, value)) => (name, Some(value)),
                    None => (body, None),
                };
                if let Some(judged) = reloader::find(name) {
                    let spelled = format!("--{name}");
                    let value = match (judged.takes_value, inline) {
                        (_, Some(value)) => value.to_string(),
                        (false, None) => "true".to_string(),
                        (true, None) => take_value(&mut rest, &spelled, "a value")?,
                    };
                    raw.judged.push((judged, value));
                    continue;
                }
                let flag = find_flag(name).ok_or_else(|| {
                    config_error(format!(
                        "unknown flag --{name}; see wavelet --help for the flags"
                    ))
                })?;
                if flag.name != name {
                    raw.notes
                        .push(format!("--{name}: Reloader's spelling of --{}", flag.name));
                }
                (flag, inline, format!("--{name}"))
            } else {
                // `-n NS`, `-n=NS` or `-nNS`.
                let body = &arg[1..];
                let mut chars = body.chars();
                let short = chars.next().unwrap_or('-');
                let tail = chars.as_str();
                let flag = find_short(short).ok_or_else(|| {
                    config_error(format!(
                        "unknown flag {arg}; see wavelet --help for the flags"
                    ))
                })?;
                let inline = match tail {
                    "" => None,
                    t => Some(t.strip_prefix('=').unwrap_or(t)),
                };
                (flag, inline, format!("-{short}"))
            };

        let value = if flag.is_bool() {
            inline.unwrap_or("true").to_string()
        } else if let Some(value) = inline {
            value.to_string()
        } else {
            take_value(&mut rest, &spelled, &expected(flag))?
        };
        if REPEATABLE.contains(&flag.name) {
            if let Some(before) = raw.flags.get_mut(flag.name) {
                before.push('\n');
                before.push_str(&value);
                continue;
            }
        }
        if raw.flags.insert(flag.name, value).is_some() {
            return Err(config_error(format!(
                "{spelled} is given more than once; give it once"
            )));
        }
    }
    if raw.command.is_empty() {
        raw.command = "run";
    }
    Ok(raw)
}

/// The argument after a flag that needs a value, unless it is another flag.
fn take_value<'a>(
    rest: &mut impl Iterator<Item = &'a String>,
    spelled: &str,
    expected: &str,
) -> Result<String, Error> {
    match rest.next() {
        Some(next) if !(next.starts_with('-') && next.len() > 1) => Ok(next.clone()),
        _ => Err(config_error(format!(
            "{spelled} needs a value: {expected} (write {spelled}=VALUE for a value that starts with '-')"
        ))),
    }
}

/// What a flag's value should look like, for error messages.
pub(super) fn expected(flag: &Flag) -> String {
    match flag.value {
        None => "true or false".to_string(),
        Some(v) => match flag.default {
            FlagDefault::Value(d) => format!("{v}, e.g. {d}"),
            FlagDefault::Unset(_) => v.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use crate::config::test_support::*;
    use crate::config::*;

    #[test]
    fn bool_flags_take_no_value_or_an_explicit_one() {
        assert!(run("--dry-run", &[]).dry_run);
        assert!(run("--dry-run=true", &[]).dry_run);
        assert!(!run("--dry-run=false", &[("WAVELET_DRY_RUN", "true")]).dry_run);
        assert!(run("", &[("WAVELET_DRY_RUN", "1")]).dry_run);
        assert_eq!(
            error("--dry-run=maybe", &[]),
            "--dry-run: expected true or false, got \"maybe\""
        );
        // A bool flag does not swallow the next argument.
        assert_eq!(
            error("--dry-run false", &[]),
            "unknown command \"false\": expected one of run, status, hash, impact, migrate, pause, resume, version, help; see wavelet --help"
        );
    }

    #[test]
    fn an_unknown_flag_is_named_in_the_error() {
        assert_eq!(
            error("--resyn 1m", &[]),
            "unknown flag --resyn; see wavelet --help for the flags"
        );
        assert_eq!(
            error("-x", &[]),
            "unknown flag -x; see wavelet --help for the flags"
        );
    }

    #[test]
    fn a_missing_value_is_named_in_the_error() {
        assert_eq!(
            error("--resync", &[]),
            "--resync needs a value: DURATION, e.g. 4h (write --resync=VALUE for a value that starts with '-')"
        );
        assert!(error("--resync --dry-run", &[]).starts_with("--resync needs a value"));
        assert!(error("status -n", &[]).starts_with("-n needs a value: NAMESPACE"));
    }

    #[test]
    fn a_flag_given_twice_is_an_error() {
        assert_eq!(
            error("--workers 2 --workers=3", &[]),
            "--workers is given more than once; give it once"
        );
    }

    #[test]
    fn impacts_file_manifests_and_base_may_be_given_more_than_once_in_order() {
        let config = parse_with(
            "impact -f a.yaml -f - --file=c.json --manifests m1 --manifests m2 --base b -n team -o json --max-rolls 3 --namespace-selector tier=web --wave-size 2",
            &[],
        )
        .unwrap();
        let Command::Impact(impact) = config.command else {
            panic!("not impact: {:?}", config.command);
        };
        let paths = |v: &[&str]| v.iter().map(PathBuf::from).collect::<Vec<_>>();
        assert_eq!(impact.files, paths(&["a.yaml", "-", "c.json"]));
        assert_eq!(impact.manifests, paths(&["m1", "m2"]));
        assert_eq!(impact.base, paths(&["b"]));
        assert_eq!(impact.namespace.as_deref(), Some("team"));
        assert_eq!(impact.output, ImpactOutput::Json);
        assert_eq!(impact.max_rolls, Some(3));
        assert!(impact.namespace_selector.is_some());
        assert_eq!(config.fan_out.wave_size, WaveSize::Count(2));
        assert_eq!(
            error("impact -f a -o yaml", &[]),
            "--output: expected table, json or markdown, got \"yaml\""
        );
        assert!(error("impact -f a --base b", &[]).starts_with("--base is for offline use"));
        assert!(error("status -f a", &[]).starts_with("--file is a flag of wavelet impact"));
    }

    #[test]
    fn double_dash_ends_the_flags() {
        assert_eq!(
            parse_with("hash -n a -- deployment/web", &[])
                .unwrap()
                .command,
            Command::Hash {
                namespace: Some("a".into()),
                kind: "deployments".into(),
                name: "web".into(),
                hash_key_file: None,
            }
        );
    }

    #[test]
    fn version_and_unknown_commands() {
        assert_eq!(
            parse_with("version", &[]).unwrap().command,
            Command::Version
        );
        assert_eq!(
            error("version extra", &[]),
            "unexpected argument \"extra\" for wavelet version; see wavelet --help"
        );
        assert_eq!(
            error("rum", &[]),
            "unknown command \"rum\": expected one of run, status, hash, impact, migrate, pause, resume, version, help; see wavelet --help"
        );
    }

    #[test]
    fn help_is_returned_for_every_spelling() {
        for line in [
            "--help",
            "-h",
            "help",
            "run --help",
            "status -h",
            "hash --help",
        ] {
            let config = parse_with(line, &[]).unwrap();
            assert_eq!(config.command, Command::Help(help_text()), "{line}");
        }
    }
}
