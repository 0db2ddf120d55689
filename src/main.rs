//! The `wavelet` binary: parse flags, set up logging, run the subcommand, map errors to
//! an exit code (0 ok, 1 runtime failure or `status` found a workload out of date, 2 bad
//! usage or configuration, 3 `impact` found more rolls than `--max-rolls`).
#![forbid(unsafe_code)]

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use wavelet::client::Client;
use wavelet::config::{self, Command};
use wavelet::error::Error;
use wavelet::stop::Stop;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let code = match run(&args) {
        Ok(code) => code,
        Err(err @ Error::Config(_)) => {
            eprintln!("wavelet: {err}");
            2
        }
        Err(err) => {
            eprintln!("wavelet: {err}");
            1
        }
    };
    std::process::exit(code);
}

/// Runs the subcommand; `Ok` carries the exit code (`status` exits 1 when something is
/// out of date).
fn run(args: &[String]) -> Result<i32, Error> {
    let config = config::parse(args, &|name| std::env::var(name).ok())?;
    wavelet::ops::logging::init(config.log_format, config.log_level.as_deref());
    match config.command {
        Command::Help(text) => {
            print!("{text}");
            Ok(0)
        }
        Command::MigrateWave {
            namespace,
            all_namespaces,
            apply,
        } => {
            wavelet::client::set_user_agent(format!("wavelet-cli/{}", env!("CARGO_PKG_VERSION")));
            let client = Client::from_flags(&config.connection)?;
            let namespace = match (namespace, all_namespaces) {
                (Some(ns), _) => Some(ns),
                (None, true) => None,
                (None, false) => Some(client.default_namespace().ok_or_else(|| {
                    Error::Config(
                        "wavelet migrate wave needs -n NAMESPACE or --all-namespaces (no namespace is set in the kubeconfig context)".into(),
                    )
                })?),
            };
            migrate_wave(&client, namespace.as_deref(), apply)
        }
        Command::Pause { state_namespace } => {
            wavelet::client::set_user_agent(format!("wavelet-cli/{}", env!("CARGO_PKG_VERSION")));
            let client = Client::from_flags(&config.connection)?;
            let ns = locate_for_writing(&client, state_namespace.as_deref())?;
            wavelet::commands::pause(&client, &ns, &mut std::io::stdout()).map(|()| 0)
        }
        Command::Resume {
            state_namespace,
            target,
        } => {
            wavelet::client::set_user_agent(format!("wavelet-cli/{}", env!("CARGO_PKG_VERSION")));
            let client = Client::from_flags(&config.connection)?;
            let ns = locate_for_writing(&client, state_namespace.as_deref())?;
            let resumed =
                wavelet::commands::resume(&client, &ns, target.as_ref(), &mut std::io::stdout())?;
            Ok(if resumed { 0 } else { 1 })
        }
        Command::MigrateReloader { namespace } => {
            wavelet::client::set_user_agent(format!("wavelet-cli/{}", env!("CARGO_PKG_VERSION")));
            let client = Client::from_flags(&config.connection)?;
            let found = wavelet::migrate_reloader::find(&client, namespace.as_deref())?;
            if found.is_empty() {
                println!(
                    "no Stakater Reloader Deployment found {}",
                    namespace.map_or("in any namespace".into(), |ns| format!("in namespace {ns}"))
                );
                return Ok(1);
            }
            wavelet::migrate_reloader::report(&client, &found, &mut std::io::stdout())?;
            Ok(0)
        }
        Command::Impact(impact) => {
            wavelet::client::set_user_agent(format!("wavelet-cli/{}", env!("CARGO_PKG_VERSION")));
            // Any failure, bad files included, is exit 1: 3 is kept for --max-rolls.
            let (rolls, code) = match wavelet::impact::run(
                &impact,
                &config.policy,
                &config.fan_out,
                &|| Client::from_flags(&config.connection),
                &|client, flag| match wavelet::commands::locate::state_namespace(client, flag) {
                    Ok(located) => {
                        eprintln!("wavelet: {}", located.describe());
                        Some(located.namespace)
                    }
                    Err(err) => {
                        eprintln!("wavelet: note: {err}");
                        None
                    }
                },
                &mut std::io::stdout(),
            ) {
                Ok(outcome) => outcome,
                Err(err) => {
                    eprintln!("wavelet impact: {err}");
                    return Ok(1);
                }
            };
            if code == wavelet::impact::EXIT_TOO_MANY_ROLLS {
                eprintln!(
                    "wavelet: {rolls} workloads would roll, more than --max-rolls {} allows",
                    impact.max_rolls.unwrap_or_default()
                );
            }
            Ok(code)
        }
        Command::Version => {
            println!("wavelet {}", env!("CARGO_PKG_VERSION"));
            Ok(0)
        }
        Command::Run(run) => {
            let client = Client::from_flags(&config.connection)?;
            log::info!(
                "wavelet {} starting against {}",
                env!("CARGO_PKG_VERSION"),
                client.base_url()
            );
            for note in &config.notes {
                log::info!("Reloader setting: {note}");
            }
            let stop = stop_on_signals()?;
            wavelet::controller::run(client, &run, config.policy, &config.fan_out, &stop)
                .map(|()| 0)
        }
        Command::Hash {
            namespace,
            kind,
            name,
            hash_key_file,
        } => {
            wavelet::client::set_user_agent(format!("wavelet-cli/{}", env!("CARGO_PKG_VERSION")));
            let key = read_key(hash_key_file.as_deref())?;
            let client = Client::from_flags(&config.connection)?;
            let Some(namespace) = namespace.or_else(|| client.default_namespace()) else {
                return Err(Error::Config(format!(
                    "wavelet hash needs the workload's namespace: add -n NAMESPACE, e.g. wavelet hash -n default {kind}/{name} (the kubeconfig context sets none)"
                )));
            };
            let workload = wavelet::commands::Target {
                namespace: &namespace,
                kind: &kind,
                name: &name,
            };
            wavelet::commands::hash(
                &client,
                workload,
                &config.policy,
                key.as_deref(),
                &mut std::io::stdout(),
            )
            .map(|()| 0)
        }
        Command::Status {
            namespace,
            hash_key_file,
            state_namespace,
        } => {
            wavelet::client::set_user_agent(format!("wavelet-cli/{}", env!("CARGO_PKG_VERSION")));
            let key = read_key(hash_key_file.as_deref())?;
            let client = Client::from_flags(&config.connection)?;
            // Without -n: the kubeconfig context's namespace, else every namespace.
            let namespace = namespace.or_else(|| client.default_namespace());
            let gating = wavelet::commands::Gating {
                fan_out: config.fan_out.clone(),
                state_namespace: match wavelet::commands::locate::state_namespace(
                    &client,
                    state_namespace.as_deref(),
                ) {
                    Ok(located) => {
                        eprintln!("wavelet: {}", located.describe());
                        Some(located.namespace)
                    }
                    Err(err) => {
                        eprintln!(
                            "wavelet: note: fan-outs and the global pause are not shown: {err}"
                        );
                        None
                    }
                },
            };
            let out_of_date = wavelet::commands::status(
                &client,
                namespace.as_deref(),
                &config.policy,
                key.as_deref(),
                &gating,
                &mut std::io::stdout(),
            )?;
            if out_of_date > 0 {
                eprintln!("wavelet: {out_of_date} workload(s) not up to date");
                return Ok(1);
            }
            Ok(0)
        }
    }
}

/// Where `wavelet pause` and `resume` write: the running wavelet's state namespace (said on
/// stderr), whose ConfigMap must exist; the CLI never creates it.
fn locate_for_writing(client: &Client, flag: Option<&str>) -> Result<String, Error> {
    let located = wavelet::commands::locate::state_namespace(client, flag)?;
    eprintln!("wavelet: {}", located.describe());
    wavelet::commands::locate::require_existing(client, &located)?;
    Ok(located.namespace)
}

/// `wavelet migrate wave`: exit 0 when nothing is left to do (or it was done), 1 when a
/// dry run found something to remove.
fn migrate_wave(client: &Client, namespace: Option<&str>, apply: bool) -> Result<i32, Error> {
    use wavelet::migrate;
    let leftovers = migrate::find(client, namespace)?;
    let mut out = std::io::stdout();
    let write_err = |e: std::io::Error| Error::Transport(format!("writing output: {e}"));
    if leftovers.is_empty() {
        println!("nothing older Wave versions left: no {} finalizer, no owner references to such workloads", migrate::WAVE_FINALIZER);
        return Ok(0);
    }
    migrate::print_table(&leftovers, &mut out).map_err(write_err)?;
    if !apply {
        eprintln!(
            "wavelet: dry run: {} entr{} to remove; run again with --apply to remove them",
            leftovers.len(),
            if leftovers.len() == 1 { "y" } else { "ies" }
        );
        return Ok(1);
    }
    migrate::apply(client, &leftovers, &mut out)?;
    Ok(0)
}

fn read_key(path: Option<&std::path::Path>) -> Result<Option<Vec<u8>>, Error> {
    path.map(wavelet::model::hash::read_key_file).transpose()
}

/// A stop set by the first SIGTERM or SIGINT; a second one exits at once with code 1.
/// Installing handlers matters as PID 1, where the kernel drops signals that have none.
/// A signal handler may only set a flag, so a thread of its own, blocked until a signal
/// comes, sets the [`Stop`] that wakes the sleepers.
fn stop_on_signals() -> Result<Arc<Stop>, Error> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let installing =
        |e: std::io::Error| Error::Transport(format!("installing a signal handler: {e}"));
    let signalled = Arc::new(AtomicBool::new(false));
    for signal in [SIGTERM, SIGINT] {
        signal_hook::flag::register_conditional_shutdown(signal, 1, Arc::clone(&signalled))
            .and_then(|_| signal_hook::flag::register(signal, Arc::clone(&signalled)))
            .map_err(installing)?;
    }
    let stop = Arc::new(Stop::new());
    let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGINT]).map_err(installing)?;
    let setter = Arc::clone(&stop);
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            if signals.forever().next().is_some() {
                setter.set();
            }
        })
        .map_err(installing)?;
    Ok(stop)
}
