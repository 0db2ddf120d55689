//! `wavelet impact`: before a ConfigMap or Secret change is merged, which workloads it will
//! restart, in which waves and when. Read-only.
//!
//! The files are read (`input.rs`), the world before the change is loaded from the
//! cluster or from manifests (`load.rs`, the only I/O), the impact is planned by the same
//! code `run` decides by (`plan.rs`, pure) and rendered as a table, JSON or Markdown
//! (`render.rs`, pure).

pub mod input;
pub(crate) mod load;
pub mod plan;
pub mod render;

use std::collections::BTreeSet;
use std::io::Write;

use crate::client::Client;
use crate::config::{FanOut, ImpactConfig, Policy};
use crate::error::Error;
use crate::impact::plan::{plan, Settings};

/// The exit code when more workloads would roll than `--max-rolls` allows.
pub const EXIT_TOO_MANY_ROLLS: i32 = 3;

/// Where the running wavelet keeps `wavelet-state`, given `--state-namespace` (the CLI's own
/// search, which sits above this layer); `None` where it cannot be found.
pub type LocateState<'a> = &'a dyn Fn(&Client, Option<&str>) -> Option<String>;

/// Runs `wavelet impact`: writes the report to `out` and returns how many workloads roll
/// and the exit code (0, or [`EXIT_TOO_MANY_ROLLS`]). `connect` makes a client only when
/// the cluster is read (not offline, `--manifests`); `locate_state` finds `wavelet-state`
/// as `status`, `pause` and `resume` do.
pub fn run(
    config: &ImpactConfig,
    policy: &Policy,
    fan_out: &FanOut,
    connect: &dyn Fn() -> Result<Client, Error>,
    locate_state: LocateState<'_>,
    out: &mut dyn Write,
) -> Result<(usize, i32), Error> {
    if config.files.is_empty() {
        return Err(Error::Config(
            "wavelet impact needs the changed objects: -f FILE (YAML or JSON; - for standard input), e.g. wavelet impact -f configmap.yaml".into(),
        ));
    }
    let mut notes = Vec::new();
    let (proposed, world) = if config.manifests.is_empty() {
        let client = connect()?;
        let default_namespace = config
            .namespace
            .clone()
            .or_else(|| client.default_namespace())
            .unwrap_or_else(|| "default".to_string());
        let proposed = load::read_files(&config.files, &default_namespace)?.configs;
        let namespaces: BTreeSet<String> = proposed
            .iter()
            .map(|(_, o)| o.metadata.namespace.clone())
            .collect();
        // Where the running wavelet keeps it, found as `status` finds it.
        let state_namespace = locate_state(&client, config.state_namespace.as_deref());
        let world = load::live(&client, &namespaces, state_namespace.as_deref(), &mut notes)?;
        (proposed, world)
    } else {
        let default_namespace = config.namespace.as_deref().unwrap_or("default");
        let proposed = load::read_files(&config.files, default_namespace)?.configs;
        let manifests =
            load::read_files(&load::manifest_files(&config.manifests)?, default_namespace)?;
        let base = if config.base.is_empty() {
            notes.push("offline without --base: every key of -f is judged changed".into());
            None
        } else {
            Some(load::read_files(&config.base, default_namespace)?)
        };
        notes.push("offline: the Pods delete mode would replace are not known, and no pause or fan-out recorded in wavelet-state is seen".into());
        let world = load::offline(manifests, base, &proposed, &mut notes);
        (proposed, world)
    };
    if proposed.is_empty() {
        return Err(Error::Config(
            "no ConfigMap or Secret in the files given with -f".into(),
        ));
    }
    let hmac_key = config
        .hash_key_file
        .as_deref()
        .map(crate::model::hash::read_key_file)
        .transpose()?;
    let settings = Settings {
        hmac_key,
        policy: *policy,
        fan_out: fan_out.clone(),
        namespace_selector: config.namespace_selector.clone(),
        now: crate::time::unix_now() as i64,
    };
    let impact = plan(&world, &proposed, &settings);
    out.write_all(render::render(&impact, &notes, config.output).as_bytes())
        .map_err(|e| Error::Transport(format!("writing output: {e}")))?;
    let code = match config.max_rolls {
        Some(max) if impact.rolls() > max => EXIT_TOO_MANY_ROLLS,
        _ => 0,
    };
    Ok((impact.rolls(), code))
}
