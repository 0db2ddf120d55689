//! The one-shot subcommands: `wavelet hash` and `wavelet status` (read-only), and
//! `wavelet pause` / `wavelet resume` (they write one entry of `wavelet-state`).

pub mod locate;

use std::io::Write;
use std::sync::Arc;

use crate::client::{Client, Shape};
use crate::config::{ConfigTarget, FanOut, Policy};
use crate::error::Error;
use crate::hashmode::fanout::gates::human;
use crate::hashmode::fanout::record::{self, Record, FANOUT};
use crate::hashmode::fanout::{self, Judge};
use crate::model::cache::Cache;
use crate::model::counted::counted;
use crate::model::hash;
use crate::model::owners::{OwnedKind, RUNNING_PODS};
use crate::model::state::{object_key, StateConfigMap, Written, PAUSE_KEY};
use crate::model::workload::WorkloadEntry;
use crate::objects::{
    ConfigKey, ConfigKind, ConfigMapItem, OwnedItem, PodStatusItem, Resource, SecretItem,
    WorkloadKey, WorkloadObject,
};
use crate::watch::source::{list_each, ApiSource};

/// The resource of a workload kind as `wavelet hash` takes it: the built-in kinds in
/// kubectl's spellings (`deployment`, `deploy`, `sts`, `cj`, ...), Argo Rollouts
/// (`rollout`), and any other kind with a pod template as kubectl's fully qualified
/// `RESOURCE.GROUP` (`widgets.example.com`, as `--workload-kinds` names it), looked up
/// with API discovery.
pub fn workload_resource(client: &Client, kind: &str) -> Result<Resource, Error> {
    if let Some(resource) = Resource::known_workload(kind) {
        return Ok(resource);
    }
    let kind = kind.to_ascii_lowercase();
    let Some((plural, group)) = kind.split_once('.') else {
        return Err(Error::Config(format!(
            "unknown workload kind {kind:?}: use deployment/NAME, statefulset/NAME, daemonset/NAME, cronjob/NAME, rollout/NAME, or RESOURCE.GROUP/NAME for a --workload-kinds kind (e.g. widgets.example.com/NAME)"
        )));
    };
    discover_resource(client, group, plural)
}

/// Finds `plural` (or its singular, kind or a short name) in the preferred version of
/// API group `group`.
fn discover_resource(client: &Client, group: &str, plural: &str) -> Result<Resource, Error> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct ApiGroup {
        preferred_version: GroupVersion,
    }
    #[derive(serde::Deserialize)]
    struct GroupVersion {
        version: String,
    }
    #[derive(serde::Deserialize)]
    struct ApiResourceList {
        #[serde(default)]
        resources: Vec<ApiResource>,
    }
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct ApiResource {
        name: String,
        #[serde(default)]
        singular_name: String,
        kind: String,
        #[serde(default)]
        short_names: Vec<String>,
    }
    let not_served = |e: Error| {
        if e.is_not_found() {
            Error::Config(format!(
                "the API server serves no group {group:?}: is the kind's CRD installed?"
            ))
        } else {
            e
        }
    };
    let api_group: ApiGroup = client.get(&format!("/apis/{group}")).map_err(not_served)?;
    let version = api_group.preferred_version.version;
    let list: ApiResourceList = client
        .get(&format!("/apis/{group}/{version}"))
        .map_err(not_served)?;
    let found = list.resources.into_iter().find(|r| {
        !r.name.contains('/')
            && (r.name == plural
                || r.singular_name == plural
                || r.kind.eq_ignore_ascii_case(plural)
                || r.short_names.iter().any(|s| s == plural))
    });
    match found {
        Some(r) => Ok(Resource::new(group, &version, &r.name, &r.kind)),
        None => Err(Error::Config(format!(
            "the API server serves no resource {plural:?} in {group}/{version}"
        ))),
    }
}

/// A workload named on the command line.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    pub namespace: &'a str,
    pub kind: &'a str,
    pub name: &'a str,
}

/// Prints the hash `run` would write for one workload (an HMAC under `hmac_key`, as with
/// `--hash-key-file`), and its inputs: object names, whether each exists, and the keys
/// that count — never values or their digests.
pub fn hash(
    client: &Client,
    target: Target<'_>,
    policy: &Policy,
    hmac_key: Option<&[u8]>,
    out: &mut dyn Write,
) -> Result<(), Error> {
    let Target {
        namespace,
        kind,
        name,
    } = target;
    let resource = workload_resource(client, kind)?;
    let workload: WorkloadObject = client.get(&resource.object_path(namespace, name))?;
    let write_err = |e: std::io::Error| Error::Transport(format!("writing output: {e}"));
    let Some(entry) =
        WorkloadEntry::from_object(&resource, &workload, policy).filter(|e| e.flavor.is_some())
    else {
        writeln!(
            out,
            "{resource} {namespace}/{name} is not opted in: no hash is written for it"
        )
        .map_err(write_err)?;
        return Ok(());
    };
    let cache = Cache::new();
    load_configs(client, Some(namespace), policy, &cache)?;
    let key = WorkloadKey::new(Arc::new(resource), namespace, name);
    let resolved = counted(&cache, &key, &entry);
    for (reference, _) in &resolved {
        read_data(client, &cache, &reference.config)?;
    }
    let resolved = counted(&cache, &key, &entry);
    let computed = hash::compute(
        resolved
            .iter()
            .map(|(r, e)| (r, e.as_ref().and_then(|e| e.digests()))),
        hmac_key,
    );
    writeln!(out, "{}", computed.hash).map_err(write_err)?;
    for (reference, object) in &resolved {
        let state = if object.is_some() {
            "present"
        } else {
            "absent"
        };
        let required = if reference.required {
            "required"
        } else {
            "optional"
        };
        if reference.config.kind == ConfigKind::SecretProviderClass {
            let objects = object
                .as_ref()
                .and_then(|o| o.digests())
                .map_or(0, <[_]>::len);
            let pods = mounting_pods(&cache, &key, &entry, &reference.config);
            writeln!(
                out,
                "  {} (mounted, {objects} objects, as {pods} Pods report them)",
                reference.config
            )
            .map_err(write_err)?;
            continue;
        }
        let keys = if reference.all_keys {
            "all keys".to_string()
        } else {
            format!(
                "keys {}",
                reference.keys.names().collect::<Vec<_>>().join(",")
            )
        };
        writeln!(out, "  {} ({state}, {required}, {keys})", reference.config).map_err(write_err)?;
    }
    // Classes it mounts whose versions no pod status of its Pods reports yet.
    for reference in entry.references.iter().filter(|r| {
        r.config.kind == ConfigKind::SecretProviderClass
            && !resolved.iter().any(|(c, _)| c.config == r.config)
    }) {
        writeln!(
            out,
            "  {} (not read yet: no pod status of its Pods; counts once they mount it)",
            reference.config
        )
        .map_err(write_err)?;
    }
    for missing in &computed.missing {
        writeln!(out, "  missing: {missing}").map_err(write_err)?;
    }
    if hmac_key.is_none() {
        writeln!(
            out,
            "  note: with --hash-key-file, run publishes an HMAC instead"
        )
        .map_err(write_err)?;
    }
    Ok(())
}

/// How many Pods' statuses give `workload` its versions of `class`: its own Pods' for a
/// class it mounts, every Pod's for one it names in a reload list.
fn mounting_pods(
    cache: &Cache,
    workload: &WorkloadKey,
    entry: &WorkloadEntry,
    class: &ConfigKey,
) -> usize {
    let view = if entry.references.iter().any(|r| r.config == *class) {
        cache.class_view(class, Some(workload), |pod| {
            cache.is_running_pod_of(workload, pod)
        })
    } else {
        cache.class_view(class, Some(workload), |pod| {
            cache.pod_runs(&workload.namespace, pod)
        })
    };
    view.map_or(0, |v| v.pods)
}

/// Lists the ConfigMaps (whole) and Secrets (metadata) of one namespace or all into
/// `cache`, as `run` watches them; a kind the policy ignores is not listed. With
/// `--enable-csi-integration`, the SecretProviderClasses and their pod statuses too.
fn load_configs(
    client: &Client,
    namespace: Option<&str>,
    policy: &Policy,
    cache: &Cache,
) -> Result<(), Error> {
    if !policy.ignore_configmaps {
        list_each(
            client,
            &Resource::configmaps(),
            namespace,
            Shape::Whole,
            &mut |item: ConfigMapItem| {
                cache.upsert_config(ConfigKind::ConfigMap, item.0);
            },
        )?;
    }
    if !policy.ignore_secrets {
        // As metadata; the data of those that count is read with one GET each.
        list_each(
            client,
            &Resource::secrets(),
            namespace,
            Shape::Metadata,
            &mut |item: SecretItem| {
                let secret = item.0;
                if secret.data.is_some() {
                    cache.upsert_config(ConfigKind::Secret, secret);
                } else {
                    cache.upsert_metadata(ConfigKind::Secret, &secret.metadata, false, None);
                }
            },
        )?;
    }
    if policy.csi_integration {
        load_mounts(client, namespace, cache)?;
    }
    Ok(())
}

/// Lists the pod statuses, then the SecretProviderClasses (metadata), as `run` watches
/// them. A server without the driver's resources has nothing to list.
fn load_mounts(client: &Client, namespace: Option<&str>, cache: &Cache) -> Result<(), Error> {
    load_owners(client, namespace, cache)?;
    let listed = list_each(
        client,
        &Resource::secret_provider_class_pod_statuses(),
        namespace,
        Shape::Whole,
        &mut |status: PodStatusItem| {
            let mounted = &status.status;
            if mounted.pod_name.is_empty() || mounted.secret_provider_class_name.is_empty() {
                return;
            }
            let class = ConfigKey::new(
                ConfigKind::SecretProviderClass,
                &status.metadata.namespace,
                &mounted.secret_provider_class_name,
            );
            cache.set_mount(
                &class,
                &mounted.pod_name,
                Some(&mounted.objects),
                status.incarnation(),
                None,
                |_| {},
            );
        },
    );
    match listed {
        Err(e) if e.is_not_found() => {
            log::warn!("--enable-csi-integration: the API does not serve secrets-store.csi.x-k8s.io/v1 secretproviderclasspodstatuses; SecretProviderClasses count for no workload");
            return Ok(());
        }
        other => other?,
    }
    list_each(
        client,
        &Resource::secret_provider_classes(),
        namespace,
        Shape::Metadata,
        &mut |class: SecretItem| {
            cache.upsert_class(&class.0.metadata);
        },
    )
}

/// Lists the running Pods and the ReplicaSets (metadata) as `run` watches them: only
/// running Pods vote on what a workload mounted, told by owner references.
fn load_owners(client: &Client, namespace: Option<&str>, cache: &Cache) -> Result<(), Error> {
    for (kind, resource) in [
        (OwnedKind::ReplicaSet, Resource::replica_sets()),
        (OwnedKind::Pod, Resource::pods()),
    ] {
        let fields = (kind == OwnedKind::Pod).then_some(RUNNING_PODS);
        ApiSource::new(
            client.clone(),
            resource,
            namespace.map(String::from),
            Shape::Metadata,
        )
        .filtered(None, fields)
        .list_each(&mut |item: OwnedItem| {
            let controller = item
                .controller
                .as_ref()
                .map(|(k, n)| (k.as_str(), n.as_str()));
            let meta = &item.metadata;
            cache.set_owned(
                kind,
                &meta.namespace,
                &meta.name,
                controller,
                !item.terminating,
            );
        })?;
    }
    Ok(())
}

/// Prints a table of opted-in workloads and delete-mode objects, and whether each is up
/// to date (hashes compared as HMACs under `hmac_key`, as `run --hash-key-file` writes
/// them), with the family of keys that opted each in. Returns how many workloads are not
/// (not adopted yet, a rollout pending, or a counted object missing): `wavelet status`
/// exits 1 when there are any.
pub fn status(
    client: &Client,
    namespace: Option<&str>,
    policy: &Policy,
    hmac_key: Option<&[u8]>,
    gating: &Gating,
    out: &mut dyn Write,
) -> Result<usize, Error> {
    let mut out_of_date = 0;
    let cache = Arc::new(Cache::new());
    load_configs(client, namespace, policy, &cache)?;
    if let Some(note) = load_namespaces(client, namespace, &cache) {
        writeln!(out, "{note}").map_err(|e| Error::Transport(format!("writing output: {e}")))?;
    }
    let wavelet_state = match &gating.state_namespace {
        Some(namespace) => {
            let state = StateConfigMap::new(client.clone(), namespace.clone(), true);
            match state.get(PAUSE_KEY) {
                Ok(_) => Some(state),
                Err(err) => {
                    writeln!(
                        out,
                        "note: cannot read ConfigMap {namespace}/{} ({err}): fan-outs and the global pause are not shown",
                        crate::model::state::STATE_CONFIGMAP
                    )
                    .map_err(|e| Error::Transport(format!("writing output: {e}")))?;
                    None
                }
            }
        }
        None => None,
    };
    let judge = Judge {
        cache: Arc::clone(&cache),
        fan_out: gating.fan_out.clone(),
        hmac_key: hmac_key.map(<[u8]>::to_vec),
        absent_is_filtered: false,
        baselines: Default::default(),
    };
    let now = crate::time::unix_now();
    let mut workloads = Vec::new();
    for resource in [
        Resource::deployments(),
        Resource::statefulsets(),
        Resource::daemonsets(),
        Resource::cronjobs(),
    ] {
        let resource = Arc::new(resource);
        list_each(
            client,
            &resource,
            namespace,
            Shape::Whole,
            &mut |workload: WorkloadObject| {
                if let Some(entry) = WorkloadEntry::from_object(&resource, &workload, policy)
                    .filter(|e| e.flavor.is_some())
                {
                    let key = WorkloadKey::new(
                        Arc::clone(&resource),
                        &workload.metadata.namespace,
                        &workload.metadata.name,
                    );
                    cache.upsert_workload(&key, Some(entry.clone()));
                    workloads.push((key, entry));
                }
            },
        )?;
    }
    for (key, entry) in &workloads {
        for (reference, _) in counted(&cache, key, entry) {
            read_data(client, &cache, &reference.config)?;
        }
    }
    let write_err = |e: std::io::Error| Error::Transport(format!("writing output: {e}"));
    writeln!(
        out,
        "{:<12} {:<40} {:<16} {:<10} {:<10} {:<5} STATUS",
        "KIND", "WORKLOAD", "OPTED IN BY", "RECORDED", "CURRENT", "REFS"
    )
    .map_err(write_err)?;
    for (key, entry) in &workloads {
        let resolved = counted(&cache, key, entry);
        let computed = hash::compute(
            resolved
                .iter()
                .map(|(r, e)| (r, e.as_ref().and_then(|e| e.digests()))),
            hmac_key,
        );
        let recorded = entry.recorded_hash().unwrap_or("-");
        let state = if !computed.missing.is_empty() {
            format!(
                "missing: {}",
                computed
                    .missing
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        } else if entry.recorded_hash().is_none() {
            "not adopted yet".into()
        } else if recorded == computed.hash {
            match rolling_in_wave(wavelet_state.as_ref(), &judge, key, entry) {
                Some(wave) => wave,
                None => "up to date".into(),
            }
        } else {
            match fanout::pending_of(&judge, wavelet_state.as_ref(), key, entry, now) {
                Some(pending) => pending.describe(now as i64),
                None => "rollout pending".into(),
            }
        };
        if !state.starts_with("up to date") {
            out_of_date += 1;
        }
        writeln!(
            out,
            "{:<12} {:<40} {:<16} {:<10} {:<10} {:<5} {state}",
            key.resource.kind,
            format!("{}/{}", key.namespace, key.name),
            entry.flavor.map_or("-", |f| f.family()),
            hash::short(recorded),
            hash::short(&computed.hash),
            resolved.len()
        )
        .map_err(write_err)?;
    }
    if let Some(state) = &wavelet_state {
        write_fan_outs(state, now, out).map_err(write_err)?;
    }
    let leftovers = crate::migrate::find(client, namespace)?;
    if !leftovers.is_empty() {
        writeln!(
            out,
            "\nOlder Wave versions left {} entr{} (its finalizer {} on workloads, owner references to them on ConfigMaps and Secrets): run `wavelet migrate wave{}` to list them, and again with --apply to remove them.",
            leftovers.len(),
            if leftovers.len() == 1 { "y" } else { "ies" },
            crate::migrate::WAVE_FINALIZER,
            namespace.map_or(" --all-namespaces".to_string(), |ns| format!(" -n {ns}"))
        )
        .map_err(write_err)?;
    }
    let delete_mode = cache.delete_mode_configs();
    if !delete_mode.is_empty() {
        writeln!(
            out,
            "\n{:<50} {:<30} STRATEGY",
            "DELETE-MODE OBJECT", "SELECTOR"
        )
        .map_err(write_err)?;
        for (key, entry) in delete_mode {
            writeln!(
                out,
                "{:<50} {:<30} {}",
                key.to_string(),
                entry.pod_delete_match().unwrap_or(""),
                entry.pod_delete_strategy().unwrap_or("evict")
            )
            .map_err(write_err)?;
        }
    }
    Ok(out_of_date)
}

/// What `status` needs to show pending and held rollouts as `run` decides them.
pub struct Gating {
    pub fan_out: FanOut,
    /// Where `wavelet-state` is ([`locate`]); `None`: not found (the caller said
    /// why, on stderr, so the table stays the workloads').
    pub state_namespace: Option<String>,
}

/// "rolling out (wave 2 of configmap ns/x's fan-out): 1 of 2 updated replicas are
/// available" for an up-to-date workload of a fan-out's current wave still rolling.
fn rolling_in_wave(
    state: Option<&StateConfigMap>,
    judge: &Judge,
    key: &WorkloadKey,
    entry: &WorkloadEntry,
) -> Option<String> {
    let (what, text) = match &entry.rollout {
        crate::model::rollout_status::RolloutStatus::Progressing(text) => ("rolling out", text),
        crate::model::rollout_status::RolloutStatus::Failed(text) => ("FAILED its rollout", text),
        crate::model::rollout_status::RolloutStatus::Done => return None,
    };
    let id = record::workload_id(key);
    for (reference, _) in counted(&judge.cache, key, entry) {
        let (Some(change), _) = judge.change(&reference.config) else {
            continue;
        };
        // No record: its mark, if its rollout is this change's first wave (its record
        // lost to a restart, or not written yet).
        let wave = match Judge::record(state?, &change).ok().flatten() {
            Some(record) => record.wave_of(&id),
            None => record::Mark::of(entry.gates().first_wave_of.as_deref(), &change.config)
                .is_some_and(|m| m.is_change(&change.hash))
                .then_some(1),
        };
        if let Some(wave) = wave {
            return Some(format!(
                "hash up to date, {what} (wave {wave} of {}'s fan-out): {text}",
                change.config
            ));
        }
    }
    None
}

/// The global pause and the fan-outs recorded in `wavelet-state`.
fn write_fan_outs(state: &StateConfigMap, now: u64, out: &mut dyn Write) -> std::io::Result<()> {
    if let Some(entry) = state.get(PAUSE_KEY).ok().flatten() {
        let since = record::paused_since(&entry);
        writeln!(
            out,
            "\nPAUSED: every rollout waits (wavelet pause, since {}, {} ago); `wavelet resume` lifts it",
            crate::time::rfc3339(since),
            human(now.saturating_sub(since))
        )?;
    }
    let fan_outs = fanout::recorded(state);
    if fan_outs.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "\n{:<40} {:<9} {:<6} STATE",
        "FAN-OUT", "CHANGE", "WAVES"
    )?;
    for (object, record) in fan_outs {
        let released: usize = record.waves.iter().map(Vec::len).sum();
        let state = match &record.held {
            Some(hold) => format!(
                "HELD: {}: {}",
                record::display_id(&hold.workload),
                hold.reason
            ),
            None => format!(
                "wave {} rolling since {} ago ({released} released)",
                record.waves.len(),
                human(now.saturating_sub(record.since))
            ),
        };
        writeln!(
            out,
            "{:<40} {:<9} {:<6} {state}",
            object,
            hash::short(&record.hash),
            record.waves.len()
        )?;
    }
    Ok(())
}

/// The Namespaces' fan-out annotations (pause, restart window), when they may be read;
/// otherwise the note that says they are not shown.
fn load_namespaces(client: &Client, namespace: Option<&str>, cache: &Cache) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct List {
        #[serde(default)]
        items: Vec<crate::objects::NamespaceItem>,
    }
    let items = match namespace {
        Some(ns) => client
            .get::<crate::objects::NamespaceItem>(&format!("/api/v1/namespaces/{ns}"))
            .map(|n| vec![n]),
        None => client.get::<List>("/api/v1/namespaces").map(|l| l.items),
    };
    match items {
        Ok(items) => {
            for ns in items {
                let gates =
                    crate::model::workload::Gates::from_annotations(&ns.metadata.annotations);
                cache.set_namespace_gates(&ns.metadata.name, Some(gates));
            }
        }
        Err(err) if !err.is_forbidden() => {
            log::debug!("not reading Namespaces' annotations: {err}")
        }
        Err(err) => {
            return Some(format!(
                "note: cannot read {} ({err}): wavelet.dev/pause and wavelet.dev/restart-window on {} are not shown; wavelet itself reads them only where its RBAC grants list and watch on them",
                namespace.map_or("the Namespaces".to_string(), |ns| format!("Namespace {ns}")),
                namespace.map_or("Namespaces".to_string(), |ns| format!("Namespace {ns}")),
            ));
        }
    }
    None
}

/// `wavelet pause`: every rollout waits until `wavelet resume`.
pub fn pause(client: &Client, state_namespace: &str, out: &mut dyn Write) -> Result<(), Error> {
    let state = StateConfigMap::new(client.clone(), state_namespace.to_string(), false);
    let write_err = |e: std::io::Error| Error::Transport(format!("writing output: {e}"));
    if let Some(entry) = state.get(PAUSE_KEY)? {
        let since = record::paused_since(&entry);
        writeln!(out, "already paused since {}", crate::time::rfc3339(since)).map_err(write_err)?;
        return Ok(());
    }
    let entry = record::pause_entry(crate::time::unix_now());
    if state.set_if(PAUSE_KEY, Some(None), Some(&entry))? == Written::Changed {
        // Paused by someone else meanwhile: that pause stands.
        let since = state
            .get(PAUSE_KEY)?
            .map_or(0, |e| record::paused_since(&e));
        writeln!(out, "already paused since {}", crate::time::rfc3339(since)).map_err(write_err)?;
        return Ok(());
    }
    writeln!(
        out,
        "paused: no workload rolls until `wavelet resume` (recorded in ConfigMap {state_namespace}/{}); changes meanwhile roll once, with their latest configuration",
        crate::model::state::STATE_CONFIGMAP
    )
    .map_err(write_err)
}

/// `wavelet resume`: lifts the global pause; with a target, goes on with its held fan-out
/// past the workload that failed. Returns whether there was something to resume.
pub fn resume(
    client: &Client,
    state_namespace: &str,
    target: Option<&ConfigTarget>,
    out: &mut dyn Write,
) -> Result<bool, Error> {
    let state = StateConfigMap::new(client.clone(), state_namespace.to_string(), false);
    let write_err = |e: std::io::Error| Error::Transport(format!("writing output: {e}"));
    let Some(target) = target else {
        if state.get(PAUSE_KEY)?.is_none() {
            writeln!(out, "not paused: nothing to resume").map_err(write_err)?;
            return Ok(false);
        }
        state.set(PAUSE_KEY, None)?;
        writeln!(
            out,
            "resumed: pending changes roll now, once each, with their latest configuration"
        )
        .map_err(write_err)?;
        return Ok(true);
    };
    let namespace = target
        .namespace
        .clone()
        .or_else(|| client.default_namespace())
        .unwrap_or_else(|| "default".to_string());
    let config = ConfigKey::new(target.kind, &namespace, &target.name);
    let key = object_key(FANOUT, &config);
    // Decided from the held record, written only over that record: when wavelet changed
    // it meanwhile (a newer change, the next wave), decide again from the newer one.
    let mut attempts = 0;
    let resumed = loop {
        let stored = state.get(&key)?;
        let held = stored.as_deref().and_then(Record::decode);
        let Some(resumed) = held
            .as_ref()
            .and_then(|r| r.resumed(crate::time::unix_now()))
        else {
            writeln!(out, "{config}: no held fan-out to resume").map_err(write_err)?;
            return Ok(false);
        };
        attempts += 1;
        match state.set_if(&key, Some(stored.as_deref()), Some(&resumed.encode()))? {
            Written::Done => break resumed,
            Written::Changed if attempts < 3 => continue,
            Written::Changed => {
                return Err(Error::Config(format!(
                    "{config}: its fan-out's record in ConfigMap {state_namespace}/{} keeps changing; run `wavelet status` and try again",
                    crate::model::state::STATE_CONFIGMAP
                )))
            }
        }
    };
    let skipped = record::display_id(&resumed.skipped.last().cloned().unwrap_or_default());
    writeln!(
        out,
        "{config}: fan-out of change {} resumed past {skipped}: the next wave rolls once the rest of wave {} is healthy",
        hash::short(&resumed.hash),
        resumed.waves.len()
    )
    .map_err(write_err)?;
    Ok(true)
}

fn read_data(client: &Client, cache: &Cache, key: &ConfigKey) -> Result<(), Error> {
    if key.kind == ConfigKind::SecretProviderClass {
        return Ok(()); // its versions came with the pod statuses
    }
    let Some(entry) = cache.config(key).filter(|e| !e.is_current()) else {
        return Ok(());
    };
    match crate::watch::fetch::read_secret(client, key, Some(&entry.resource_version))? {
        Some(secret) => {
            cache.store_fetched(key, Some(&entry.resource_version), secret);
        }
        // Deleted since the list: absent.
        None => {
            cache.remove_config(key);
        }
    }
    Ok(())
}
