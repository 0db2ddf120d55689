//! Wiring of `wavelet run`: one watch thread per resource (and namespace) writing the
//! cache, a work queue per mode (hash mode, delete mode), and reconcile workers that start
//! once every initial list is in.

use std::net::TcpListener;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::client::{Client, Limits, Shape};
use crate::config::Policy;
use crate::config::{FanOut, RunConfig, WorkloadKind};
use crate::controller::hold_alerts::HoldAlerts;
use crate::controller::sinks::{
    ConfigSink, NamespaceSink, OnSynced, OwnedSink, PodStatusSink, Router, SecretPart, StateSink,
    WorkloadSink,
};
use crate::deletemode::ledger::{Listed, StateStore, STATE_CONFIGMAP};
use crate::deletemode::waves::FanOutRecords;
use crate::deletemode::{DeleteMode, DeleteModeSettings};
use crate::error::Error;
use crate::hashmode::basis;
use crate::hashmode::fanout::{FanOuts, Judge};
use crate::hashmode::reconcile::{HashModeSettings, Outcome, Reconciler};
use crate::hashmode::throttle::{Debounce, Throttled};
use crate::model::cache::Cache;
use crate::model::owners::{OwnedKind, RUNNING_PODS};
use crate::model::state::{StateConfigMap, StateObject};
use crate::objects::{
    ConfigKind, ConfigMapItem, NamespaceItem, OwnedItem, PodStatusItem, Resource, SecretItem,
    WorkloadKey, WorkloadObject,
};
use crate::ops::alerts::{self, Alerts};
use crate::ops::events::Recorder;
use crate::ops::http::{Beat, Endpoints, Health};
use crate::ops::leader::{Gate, LeaderElector};
use crate::ops::metrics::{self, Gauges};
use crate::stop::Stop;
use crate::watch::fetch::{Fetcher, HELM_RELEASES, NOT_HELM_RELEASES};
use crate::watch::queue::{Backoff, Priority, WorkQueue};
use crate::watch::scope::{NamespaceFilter, NamespaceScope, Namespaced};
use crate::watch::source::ApiSource;
use crate::watch::watcher::{self, Event, Restart, WatchConfig, Watcher};
use crate::watch::worker::{run_worker, Action, Work};

/// Threads reading the data of Secrets (a few reads at a time: the initial sync reads one
/// per referenced Secret).
const FETCHERS: usize = 4;

/// A running controller; dropping it does not stop it, [`Controller::stop`] does.
pub(crate) struct Controller {
    stop: Arc<Stop>,
    queue: Arc<WorkQueue<WorkloadKey>>,
    delete_mode: Option<Arc<DeleteMode>>,
    fetcher: Arc<Fetcher>,
    workers: Vec<JoinHandle<()>>,
    pub cache: Arc<Cache>,
    synced: Arc<Latch>,
    /// Opens once the Secrets in use were read in bulk: the fetchers wait for it.
    secrets_listed: Arc<Latch>,
    /// Open while this replica may write.
    gate: Arc<Gate>,
    /// `None` without `--leader-elect`.
    elector: Option<Arc<LeaderElector>>,
    health: Arc<Health>,
    fanouts: Arc<FanOuts>,
    /// Its budget's waits end at shutdown.
    client: Client,
    /// For the gauge of rollouts waiting for a token.
    reconciler: Arc<Reconciler>,
    /// Writes what is queued at shutdown.
    recorder: Recorder,
}

impl Controller {
    /// Starts watching and reconciling; returns at once.
    pub fn start(
        client: Client,
        config: &RunConfig,
        policy: Policy,
        fan_out: &FanOut,
    ) -> Result<Controller, Error> {
        let stop = Arc::new(Stop::new());
        client.limit(Limits {
            qps: config.api_qps,
            burst: config.api_burst,
        });
        if config.leader_elect && config.dry_run {
            // Holding the Lease would keep the real controller from leading.
            log::warn!("--dry-run: not taking part in leader election (nothing is written, the Lease included); deciding as if leader");
        }
        let elector = if config.leader_elect && !config.dry_run {
            let (namespace, why) = own_namespace(
                config.lease_namespace.as_deref(),
                "--lease-namespace",
                &client,
            );
            log::info!(
                "leader election: Lease {namespace}/{} ({why})",
                config.lease_name
            );
            Some(Arc::new(LeaderElector::new(
                // Its own budget, as kube-controller-manager's leader election has its own
                // client: a renewal never waits behind writes.
                client.without_budget(),
                namespace,
                config.lease_name.clone(),
                config.lease_timings,
                Arc::clone(&stop),
            )))
        } else {
            None
        };
        let gate = match &elector {
            Some(elector) => elector.gate(),
            None => Arc::new(Gate::always_open()),
        };
        let health = Arc::new(Health::default());
        let reloader = &config.reloader;
        metrics::global()
            .count_by_namespace
            .store(reloader.count_by_namespace, Ordering::Relaxed);
        let alerts = match &config.alerts {
            Some(settings) => Some(Arc::new(Alerts::start(settings, Arc::clone(&stop))?)),
            None => None,
        };
        let cache = Arc::new(Cache::with_scope(
            if reloader.namespace_selector.is_some() {
                NamespaceScope::selected()
            } else {
                NamespaceScope::everywhere()
            },
        ));
        // A workload whose reconcile keeps failing is retried at least once per resync.
        let queue = Arc::new(WorkQueue::new(Backoff::default().capped_at(config.resync)));
        // The first line of --hash-key-file hashes; later lines are previous keys.
        let keys = config
            .hash_key_file
            .as_deref()
            .map(crate::model::hash::read_keys)
            .transpose()?;
        let (hmac_key, previous_keys) = match keys {
            Some(keys) => (Some(keys.current), keys.previous),
            None => (None, Vec::new()),
        };
        // One recorder: one correlator and one writer thread for both modes' Events.
        let recorder = Recorder::new(client.clone());
        // --enable-csi-integration: SecretProviderClasses (metadata) and their pod statuses.
        let csi = policy.csi_integration && serves_csi_driver(&client);
        // Hash mode's own entries (fan-outs, urgent grants, the global pause) live in the
        // same ConfigMap as delete mode's, watched so `wavelet pause` is seen at once.
        let state = Arc::new(StateConfigMap::new(
            client.clone(),
            own_namespace(
                config.state_namespace.as_deref(),
                "--state-namespace",
                &client,
            )
            .0,
            config.dry_run,
        ));
        if !config.dry_run {
            // In the background: a slow API server must not hold up the probes, and only
            // the leader writes.
            let (client, gate, namespace) = (
                client.clone(),
                Arc::clone(&gate),
                state.namespace().to_string(),
            );
            std::thread::Builder::new()
                .name("state-create".into())
                .spawn(move || {
                    if gate.wait() {
                        create_state_configmap(&client, &namespace);
                    }
                })
                .expect("spawning the state-create thread");
        }
        let debounce = Arc::new(Debounce::new());
        let delete_mode = Some(start_delete_mode(
            &client,
            config,
            &policy,
            csi,
            &cache,
            &gate,
            hmac_key.clone(),
            &recorder,
            fan_out,
            &state,
        ));
        let fanouts = {
            let queue = Arc::clone(&queue);
            Arc::new(FanOuts::new(
                Judge {
                    cache: Arc::clone(&cache),
                    fan_out: fan_out.clone(),
                    hmac_key: hmac_key.clone(),
                    absent_is_filtered: reloader.resource_label_selector.is_some(),
                    baselines: Default::default(),
                },
                Arc::clone(&state),
                recorder.clone(),
                // Ahead of the line: the rest of a fan-out waits on what woke it.
                Box::new(move |key| queue.add_first(key)),
                Arc::clone(&debounce),
                {
                    let gate = Arc::clone(&gate);
                    Box::new(move || gate.term())
                },
            ))
        };
        // What shapes the hash, recorded beside it.
        let basis = basis::Settings {
            selector: reloader
                .resource_label_selector
                .as_ref()
                .map(|s| s.to_query_string()),
            ignore_configmaps: policy.ignores(ConfigKind::ConfigMap),
            ignore_secrets: policy.ignores(ConfigKind::Secret),
            hmac_key: hmac_key.clone(),
            previous_keys,
        };
        if basis.hmac_key.is_some() {
            // Ids only: a key is never printed.
            let previous = basis.previous_key_ids();
            log::info!(
                "hash key k={}{}",
                basis.key_id(),
                if previous.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; previous keys still accepted to check hashes recorded under them: k={}",
                        previous.join(", k=")
                    )
                }
            );
        }
        let settings = HashModeSettings {
            hmac_key,
            dry_run: config.dry_run,
            max_rollouts_per_second: config.max_rollouts_per_second,
            rollout_burst: config.rollout_burst,
            min_rollout_interval: config.min_rollout_interval,
            debounce: config.debounce,
            absent_is_filtered: reloader.resource_label_selector.is_some(),
            basis,
        };
        let reconciler = Arc::new(Reconciler::new(
            client.clone(),
            Arc::clone(&cache),
            recorder.clone(),
            settings,
            Arc::clone(&debounce),
            Arc::clone(&fanouts),
        ));

        let mut workload_resources = vec![
            Resource::deployments(),
            Resource::statefulsets(),
            Resource::daemonsets(),
        ];
        if !reloader.ignore_cronjobs {
            workload_resources.push(Resource::cronjobs());
        }
        for kind in &config.workload_kinds {
            workload_resources.push(discover(&client, kind));
        }
        // --is-Argo-Rollouts: read as Reloader reads it ("true" exactly); any other value
        // given: never, as Reloader. Not given: whenever served, which Reloader would not
        // do, and that is said.
        if !workload_resources.iter().any(Resource::is_argo_rollouts)
            && reloader.argo_rollouts != Some(false)
        {
            match (reloader.argo_rollouts, serves_argo_rollouts(&client)) {
                (Some(true), true) => {
                    log::info!("the API serves Argo Rollouts: watching argoproj.io/v1alpha1 rollouts");
                    workload_resources.push(Resource::rollouts());
                }
                (_, true) => {
                    log::info!("the API serves Argo Rollouts: watching argoproj.io/v1alpha1 rollouts, as --is-Argo-Rollouts is not given (wavelet differs from Reloader here: Reloader's default is false, which leaves them alone; --is-Argo-Rollouts=false does that)");
                    workload_resources.push(Resource::rollouts());
                }
                (Some(true), false) => log::warn!("--is-Argo-Rollouts=true, but the API does not serve argoproj.io/v1alpha1 rollouts: none are watched (restart wavelet once Argo Rollouts is installed)"),
                (_, false) => log::debug!("the API does not serve Argo Rollouts: not watching them"),
            }
        }
        // --ignore-configmaps / --ignore-secrets: that kind is not watched at all.
        let config_kinds: Vec<ConfigKind> = [ConfigKind::ConfigMap, ConfigKind::Secret]
            .into_iter()
            .filter(|k| !policy.ignores(*k))
            .collect();
        let plan = watch_plan(
            &config.namespaces,
            &reloader.namespaces_to_ignore,
            config.per_namespace_watches,
            config_kinds.len() + workload_resources.len(),
        )?;
        if let WatchPlan::Filtered(names) = &plan {
            log::info!(
                "--namespaces names {} namespaces: watching each resource once in all namespaces and keeping those (needs list and watch in a ClusterRole; --per-namespace-watches watches each namespace on its own instead)",
                names.len()
            );
        }
        let namespaces = plan.namespaces();
        let keep: Option<Arc<NamespaceFilter>> = match &plan {
            WatchPlan::Filtered(names) => Some(Arc::new(NamespaceFilter::new(
                names.iter().map(String::as_str),
            ))),
            _ => None,
        };
        // Watching all namespaces: the ignored ones are filtered out by the API server.
        let namespace_filter = if plan == WatchPlan::Everywhere {
            ignored_namespaces_field_selector(&reloader.namespaces_to_ignore)
        } else {
            None
        };
        let config_label_selector = reloader
            .resource_label_selector
            .as_ref()
            .map(|s| s.to_query_string());
        let watch_config = WatchConfig {
            resync: config.resync,
            ..WatchConfig::default()
        };
        // Namespaces are watched for --namespace-selector, and for their fan-out
        // annotations whenever wavelet watches every namespace (the cluster-wide install).
        let watch_namespaces = reloader.namespace_selector.is_some() || namespaces == [None];
        // With --namespaces (each watched on its own), the listed Namespaces are read by
        // name for the same annotations, where RBAC allows it (the chart grants it).
        let named_namespaces: Vec<String> = if watch_namespaces {
            Vec::new()
        } else {
            namespaces.iter().flatten().cloned().collect()
        };
        // One more: the watch of wavelet-state, so its copy is the listed one before the
        // first reconcile (never a GET racing the watch).
        let watchers = namespaces.len()
            * (config_kinds.len() + workload_resources.len() + if csi { 4 } else { 0 })
            + usize::from(watch_namespaces)
            + named_namespaces.len()
            + 1;
        let listed = Arc::new(Latch::new(watchers));
        let fetcher = Arc::new(Fetcher::new(
            client.clone(),
            config.resync,
            config_label_selector.clone(),
        ));
        let router = Arc::new(Router {
            cache: Arc::clone(&cache),
            queue: Arc::clone(&queue),
            delete_mode: delete_mode.clone(),
            fetcher: Arc::clone(&fetcher),
            debounce: config.debounce,
            windows: Arc::clone(&debounce),
            baselines: reconciler.baselines(),
            policy,
            recorder: recorder.clone(),
            watch_records: std::sync::OnceLock::new(),
        });
        let on_listed = || -> OnSynced {
            let listed = Arc::clone(&listed);
            Box::new(move || listed.count_down())
        };
        // The Secrets watched whole list once every workload kind has: a Secret is kept
        // only when something uses it, which the workloads say (else each one in use,
        // dropped by a list that came first, would be a GET of its own afterwards).
        let workloads_listed = Arc::new(Latch::new(namespaces.len() * workload_resources.len()));
        let on_workloads_listed = || -> OnSynced {
            let (listed, workloads_listed) = (Arc::clone(&listed), Arc::clone(&workloads_listed));
            Box::new(move || {
                listed.count_down();
                workloads_listed.count_down();
            })
        };

        for namespace in &namespaces {
            for &kind in &config_kinds {
                let with_namespaces = |fields: &str| match &namespace_filter {
                    Some(filter) => format!("{fields},{filter}"),
                    None => fields.to_string(),
                };
                let source = |shape: Shape, fields: Option<String>| {
                    ApiSource::new(client.clone(), kind.resource(), namespace.clone(), shape)
                        .filtered(config_label_selector.as_deref(), fields.as_deref())
                };
                let sink = |part: SecretPart| {
                    ConfigSink::new(kind, namespace.clone(), Arc::clone(&router), on_listed())
                        .part(part)
                };
                // Watched whole: a relist compares metadata and reads what changed.
                let whole = WatchConfig {
                    compare_relists: true,
                    ..watch_config.clone()
                };
                match kind {
                    ConfigKind::ConfigMap => {
                        let mut sink = sink(SecretPart::All);
                        spawn_watch(
                            source(Shape::Whole, namespace_filter.clone()),
                            &health,
                            whole,
                            Arc::clone(&stop),
                            only_kept(keep.clone(), move |e: Event<ConfigMapItem>| sink.handle(e)),
                        );
                    }
                    // Secrets whole, each digested as it streams in and kept only when
                    // something uses it (watch/fetch.rs), except Helm's release records:
                    // the largest Secrets of most clusters, never mounted, watched as
                    // metadata once one is in use (`RecordWatches`).
                    ConfigKind::Secret => {
                        let mut sink = sink(SecretPart::NotHelmReleases);
                        spawn_watch_after(
                            Some(Arc::clone(&workloads_listed)),
                            source(Shape::Whole, Some(with_namespaces(NOT_HELM_RELEASES))),
                            &health,
                            whole,
                            Arc::clone(&stop),
                            only_kept(keep.clone(), move |e: Event<SecretItem>| sink.handle(e)),
                        );
                    }
                    // Classes as metadata (decoded like Secrets: one watcher less in the
                    // binary).
                    ConfigKind::SecretProviderClass => {
                        let mut sink = sink(SecretPart::All);
                        spawn_watch(
                            source(Shape::Metadata, namespace_filter.clone()),
                            &health,
                            watch_config.clone(),
                            Arc::clone(&stop),
                            only_kept(keep.clone(), move |e: Event<SecretItem>| sink.handle(e)),
                        );
                    }
                }
            }
            if csi {
                let mut classes = ConfigSink::new(
                    ConfigKind::SecretProviderClass,
                    namespace.clone(),
                    Arc::clone(&router),
                    on_listed(),
                );
                let source = ApiSource::new(
                    client.clone(),
                    Resource::secret_provider_classes(),
                    namespace.clone(),
                    Shape::Metadata,
                )
                .filtered(None, namespace_filter.as_deref());
                // Above 10 --namespaces, as every other watch: one over all namespaces,
                // keeping those listed.
                let keep_classes = keep.clone();
                spawn_watch(
                    source,
                    &health,
                    watch_config.clone(),
                    Arc::clone(&stop),
                    only_kept(keep_classes, move |e: Event<SecretItem>| classes.handle(e)),
                );
                // Whole objects (a CRD's status is not in its metadata), of which only the
                // Pod, the class and a digest of each object's version are kept.
                let mut statuses =
                    PodStatusSink::new(namespace.clone(), Arc::clone(&router), on_listed());
                let source = ApiSource::new(
                    client.clone(),
                    Resource::secret_provider_class_pod_statuses(),
                    namespace.clone(),
                    Shape::Whole,
                )
                .filtered(None, namespace_filter.as_deref());
                let keep_statuses = keep.clone();
                spawn_watch(
                    source,
                    &health,
                    watch_config.clone(),
                    Arc::clone(&stop),
                    only_kept(keep_statuses, move |e: Event<PodStatusItem>| {
                        statuses.handle(e)
                    }),
                );
                // Which Pods vote on what a workload mounted: running ones (the server
                // filters; one that stops running leaves the watch as a deletion), told by
                // owner references (Pod → ReplicaSet → Deployment). Metadata only.
                for kind in [OwnedKind::ReplicaSet, OwnedKind::Pod] {
                    let mut sink =
                        OwnedSink::new(kind, namespace.clone(), Arc::clone(&router), on_listed());
                    let (resource, fields) = match kind {
                        OwnedKind::Pod => (
                            Resource::pods(),
                            Some(match &namespace_filter {
                                Some(filter) => format!("{RUNNING_PODS},{filter}"),
                                None => RUNNING_PODS.to_string(),
                            }),
                        ),
                        OwnedKind::ReplicaSet => {
                            (Resource::replica_sets(), namespace_filter.clone())
                        }
                    };
                    let source = ApiSource::new(
                        client.clone(),
                        resource,
                        namespace.clone(),
                        Shape::Metadata,
                    )
                    .filtered(None, fields.as_deref());
                    let keep_owned = keep.clone();
                    spawn_watch(
                        source,
                        &health,
                        watch_config.clone(),
                        Arc::clone(&stop),
                        only_kept(keep_owned, move |e: Event<OwnedItem>| sink.handle(e)),
                    );
                }
            }
            for resource in &workload_resources {
                let resource = Arc::new(resource.clone());
                let mut sink = WorkloadSink::new(
                    Arc::clone(&resource),
                    namespace.clone(),
                    Arc::clone(&router),
                    on_workloads_listed(),
                );
                let source = ApiSource::new(
                    client.clone(),
                    (*resource).clone(),
                    namespace.clone(),
                    Shape::Whole,
                )
                .filtered(None, namespace_filter.as_deref());
                // A kind RBAC does not let wavelet list (Argo Rollouts served but not granted,
                // as in Reloader's chart) is one none of whose objects is acted on; it
                // does not hold the initial sync.
                let config = WatchConfig {
                    forbidden_list_is_empty: true,
                    compare_relists: true,
                    ..watch_config.clone()
                };
                let keep = keep.clone();
                spawn_watch(
                    source,
                    &health,
                    config,
                    Arc::clone(&stop),
                    only_kept(keep, move |e: Event<WorkloadObject>| sink.handle(e)),
                );
            }
        }
        if watch_namespaces {
            let selector = reloader.namespace_selector.as_ref();
            let mut sink = NamespaceSink::new(Arc::clone(&router), on_listed(), selector.is_some());
            let source = ApiSource::new(client.clone(), Resource::namespaces(), None, Shape::Whole)
                .filtered(selector.map(|s| s.to_query_string()).as_deref(), None);
            // Without --namespace-selector, Namespaces are read for their wavelet.dev/pause
            // and restart-window annotations only: an RBAC that does not grant them (Reloader's
            // chart) leaves those unread, with a warning, and holds nothing up. With a
            // selector they decide what is in scope, and a refusal is an error.
            let config = WatchConfig {
                forbidden_list_is_empty: selector.is_none(),
                ..watch_config.clone()
            };
            spawn_watch(
                source,
                &health,
                config,
                Arc::clone(&stop),
                move |e: Event<NamespaceItem>| sink.handle(e),
            );
        }
        for name in &named_namespaces {
            say_if_namespace_unreadable(&client, name);
            let mut sink = NamespaceSink::new(Arc::clone(&router), on_listed(), false);
            let source = ApiSource::new(client.clone(), Resource::namespaces(), None, Shape::Whole)
                .filtered(None, Some(&format!("metadata.name={name}")));
            // A refusal leaves this Namespace's annotations unread (said once above) and
            // holds nothing up.
            let config = WatchConfig {
                forbidden_list_is_empty: true,
                ..watch_config.clone()
            };
            spawn_watch(
                source,
                &health,
                config,
                Arc::clone(&stop),
                move |e: Event<NamespaceItem>| sink.handle(e),
            );
        }
        {
            // Alerts on fan-out holds hook in here (--alert-on-hold): the state watch sees
            // every hold begin and end, whoever wrote it.
            let hold_alerts = alerts
                .as_ref()
                .filter(|_| config.alerts.as_ref().is_some_and(|a| a.on_hold))
                .map(|a| HoldAlerts::new(Arc::clone(a), Arc::clone(&gate)));
            let mut sink = StateSink::new(
                Arc::clone(&state),
                Arc::clone(&router),
                on_listed(),
                hold_alerts,
            );
            let source = ApiSource::new(
                client.clone(),
                Resource::configmaps(),
                Some(state.namespace().to_string()),
                Shape::Whole,
            )
            .filtered(
                None,
                Some(&format!(
                    "metadata.name={}",
                    crate::model::state::STATE_CONFIGMAP
                )),
            );
            spawn_watch(
                source,
                &health,
                watch_config.clone(),
                Arc::clone(&stop),
                move |e: Event<StateObject>| sink.handle(e),
            );
        }

        if config_kinds.contains(&ConfigKind::Secret) {
            let watches = RecordWatches {
                router: Arc::downgrade(&router),
                client: client.clone(),
                scopes: namespaces.clone(),
                labels: config_label_selector.clone(),
                fields: match &namespace_filter {
                    Some(filter) => format!("{HELM_RELEASES},{filter}"),
                    None => HELM_RELEASES.to_string(),
                },
                keep: keep.clone(),
                health: Arc::clone(&health),
                config: watch_config.clone(),
                stop: Arc::clone(&stop),
                started: Mutex::new(Vec::new()),
            };
            let _ = router
                .watch_records
                .set(Box::new(move |namespace| watches.start(namespace)));
        }

        // The fetchers start once every first list is in, on the Secrets in use those lists
        // did not answer (Helm release records, Secrets that do not exist).
        let secrets_listed = Arc::new(Latch::new(1));
        let mut workers: Vec<JoinHandle<()>> = (0..FETCHERS)
            .map(|n| {
                let (fetcher, router) = (Arc::clone(&fetcher), Arc::clone(&router));
                let secrets_listed = Arc::clone(&secrets_listed);
                let beat = health.register(format!("fetcher-{n}"));
                std::thread::Builder::new()
                    .name(format!("fetcher-{n}"))
                    .spawn(move || {
                        let _beat = beat;
                        secrets_listed.wait();
                        fetcher.work(&*router)
                    })
                    .expect("spawning a fetcher thread")
            })
            .collect();

        // Synced: every first list is in, and the data of every Secret that matters read.
        // Ready from then: a change is acted on at once, while the workloads first seen are
        // adopted in the background (`wavelet_adoptions_pending`).
        let synced = Arc::new(Latch::new(1));
        {
            let (listed, synced, fetcher, cache, state, queue) = (
                Arc::clone(&listed),
                Arc::clone(&synced),
                Arc::clone(&fetcher),
                Arc::clone(&cache),
                Arc::clone(&state),
                Arc::clone(&queue),
            );
            let secrets_listed = Arc::clone(&secrets_listed);
            let stop = Arc::clone(&stop);
            let started = std::time::Instant::now();
            std::thread::spawn(move || {
                listed.wait();
                secrets_listed.count_down();
                fetcher.wait_idle();
                // wavelet-state read before the first reconcile (unless its watch has),
                // so a global pause holds from the start and no reconcile waits for it.
                if let Err(err) = state.get(crate::model::state::PAUSE_KEY) {
                    log::warn!("{err}");
                }
                synced.count_down();
                let (configs, workloads) = cache.sizes();
                let statuses = cache.pod_statuses();
                let mounts = if statuses > 0 {
                    format!(", {statuses} SecretProviderClass pod statuses")
                } else {
                    String::new()
                };
                let ready = started.elapsed();
                log::info!(
                    "initial sync complete in {ready:?}: {configs} ConfigMaps/Secrets, {workloads} opted-in workloads{mounts}; ready, adopting in the background"
                );
                queue.wait_drained(Priority::Background);
                if !stop.is_set() {
                    let all = started.elapsed();
                    log::info!(
                        "adoption complete: every workload of the initial sync reconciled once, {all:?} after start ({:?} after ready)",
                        all.saturating_sub(ready)
                    );
                }
            });
        }

        if let Some(elector) = &elector {
            elector.spawn();
        }
        let dry_run = config.dry_run;
        workers.extend((0..config.workers.max(1)).map(|n| {
            let worker = Worker {
                queue: Arc::clone(&queue),
                reconciler: Arc::clone(&reconciler),
                gate: Arc::clone(&gate),
                beat: health.register(format!("worker-{n}")),
                dry_run,
                alerts: alerts
                    .clone()
                    .filter(|_| config.alerts.as_ref().is_some_and(|a| a.on_reload)),
            };
            let synced = Arc::clone(&synced);
            std::thread::Builder::new()
                .name(format!("worker-{n}"))
                .spawn(move || {
                    synced.wait();
                    worker.work()
                })
                .expect("spawning a worker thread")
        }));
        {
            // Fan-out records and urgent grants of objects and workloads gone leave the
            // state on the schedule of delete mode's ledger (see fanout/tidy.rs).
            let (fanouts, gate, synced, stop) = (
                Arc::clone(&fanouts),
                Arc::clone(&gate),
                Arc::clone(&synced),
                Arc::clone(&stop),
            );
            let grace = config.resync;
            let kinds: Vec<ConfigKind> = [ConfigKind::ConfigMap, ConfigKind::Secret]
                .into_iter()
                .filter(|k| !policy.ignores(*k))
                .collect();
            let namespaces = config.namespaces.clone();
            let ignored = config.reloader.namespaces_to_ignore.clone();
            let lists = move |key: &crate::objects::ConfigKey| {
                kinds.contains(&key.kind)
                    && (namespaces.is_empty() || namespaces.iter().any(|n| **n == *key.namespace))
                    && !ignored.iter().any(|n| **n == *key.namespace)
            };
            let tidier = std::thread::Builder::new()
                .name("fanout-tidy".into())
                .spawn(move || {
                    synced.wait();
                    while !stop.is_set() {
                        if gate.may_write() {
                            if let Err(err) = fanouts.tidy(std::time::Instant::now(), grace, &lists)
                            {
                                log::warn!("{err}");
                            }
                        }
                        stop.sleep(grace / 4);
                    }
                })
                .expect("spawning the fan-out tidying thread");
            workers.push(tidier);
        }
        if let Some(delete_mode) = &delete_mode {
            for n in 0..config.workers.max(1) {
                let (delete_mode, synced) = (Arc::clone(delete_mode), Arc::clone(&synced));
                let beat = health.register(format!("delete-worker-{n}"));
                let worker = std::thread::Builder::new()
                    .name(format!("delete-worker-{n}"))
                    .spawn(move || {
                        let _beat = beat;
                        synced.wait();
                        delete_mode.work()
                    })
                    .expect("spawning a delete-mode worker thread");
                workers.push(worker);
            }
        }
        Ok(Controller {
            stop,
            queue,
            delete_mode,
            fetcher,
            workers,
            cache,
            synced,
            secrets_listed,
            gate,
            elector,
            health,
            fanouts,
            client,
            reconciler,
            recorder,
        })
    }

    /// What `/healthz`, `/readyz` and `/metrics` read.
    pub fn endpoints(&self, client: &Client) -> Endpoints {
        let (cache, queue, synced, gate) = (
            Arc::clone(&self.cache),
            Arc::clone(&self.queue),
            Arc::clone(&self.synced),
            Arc::clone(&self.gate),
        );
        let delete_mode = self.delete_mode.clone();
        let fetcher = Arc::clone(&self.fetcher);
        let fanouts = Arc::clone(&self.fanouts);
        let client = client.clone();
        let reconciler = Arc::clone(&self.reconciler);
        Endpoints {
            health: Arc::clone(&self.health),
            gauges: Box::new(move || {
                let adoptions_pending = queue.pending(Priority::Background);
                let (cached_configs, cached_workloads) = cache.sizes();
                Gauges {
                    requests: client.request_counts(),
                    cached_configs,
                    cached_workloads,
                    cached_absent_secrets: cache.absent_secrets_known(),
                    hash_queue: queue.len(),
                    delete_queue: delete_mode.as_ref().map_or(0, |d| d.queue_len()),
                    secret_reads: fetcher.len(),
                    state_bytes: delete_mode.as_ref().map_or(0, |d| d.state_bytes()),
                    leader: gate.may_write(),
                    ready: synced.is_open(),
                    pending_rollouts: fanouts.pending_counts(),
                    fanouts_held: fanouts.held_count(),
                    // Read by the HTTP thread when /metrics is scraped.
                    resident_bytes: None,
                    cpu_seconds: None,
                    budget_wait_seconds: client.budget_waited().as_secs_f64(),
                    rollouts_waiting: reconciler.rollouts_waiting(),
                    adoptions_pending,
                }
            }),
        }
    }

    /// Stops watching, lets in-flight reconciles finish, releases the Lease, and returns.
    pub fn stop(self) {
        self.stop.set();
        self.client.stop_waiting();
        self.secrets_listed.open();
        self.synced.open();
        self.gate.shut_down();
        self.queue.shut_down();
        self.fetcher.shut_down();
        if let Some(delete_mode) = &self.delete_mode {
            delete_mode.shut_down();
        }
        for worker in self.workers {
            let _ = worker.join();
        }
        self.recorder.stop(Duration::from_secs(1));
        if let Some(elector) = &self.elector {
            elector.release();
        }
    }
}

/// Runs `wavelet run` until `stop` is set (SIGTERM/SIGINT), serving `/healthz`,
/// `/readyz` and `/metrics` on `--listen-addr`.
pub fn run(
    client: Client,
    config: &RunConfig,
    policy: Policy,
    fan_out: &FanOut,
    stop: &Stop,
) -> Result<(), Error> {
    let listener = TcpListener::bind(&config.listen_addr).map_err(|e| {
        Error::Config(format!(
            "cannot listen on --listen-addr {}: {e}",
            config.listen_addr
        ))
    })?;
    match listener.local_addr() {
        Ok(addr) => log::info!("listening on {addr} for /healthz, /readyz and /metrics"),
        Err(_) => log::info!("listening on {}", config.listen_addr),
    }
    let controller = Controller::start(client.clone(), config, policy, fan_out)?;
    crate::ops::http::spawn(listener, controller.endpoints(&client));
    stop.sleep(Duration::MAX);
    log::info!("stopping: finishing in-flight work");
    controller.stop();
    log::info!("stopped");
    Ok(())
}

/// One hash-mode worker thread.
struct Worker {
    queue: Arc<WorkQueue<WorkloadKey>>,
    reconciler: Arc<Reconciler>,
    gate: Arc<Gate>,
    beat: Beat,
    dry_run: bool,
    /// `--alert-on-reload`: told of every rollout, off the rollout path.
    alerts: Option<Arc<Alerts>>,
}

impl Work<WorkloadKey> for Worker {
    fn process(&self, key: &WorkloadKey) -> Result<Action, Error> {
        self.beat.busy();
        let started = Instant::now();
        let result = self.reconciler.reconcile(key);
        metrics::global()
            .reconcile_duration
            .observe(started.elapsed());
        self.beat.idle();
        let (action, outcome) = result?;
        log::debug!("{key}: {outcome:?}");
        self.record(key, &outcome);
        Ok(action)
    }

    fn failed(&self, key: &WorkloadKey, err: &Error, delay: std::time::Duration) {
        if err.status().is_some_and(|s| s.is_too_many_requests()) {
            // The API server sheds load: the whole client waits out its Retry-After
            // (client/budget.rs) and this key comes back after it. Not a failed rollout;
            // `wavelet_api_requests_total{code="429"}` counts it.
            log::debug!("{key}: the API server answered 429; retrying in {delay:?}");
            return;
        }
        let m = metrics::global();
        m.rollouts.inc(&[&key.resource.kind, "error"]);
        m.reload_executed(false, &key.namespace);
        log::warn!("{key}: reconcile failed, retrying in {delay:?}: {err}");
    }
}

impl Worker {
    /// Runs the one worker loop over the hash-mode queue.
    fn work(&self) {
        run_worker(&self.queue, Some(&self.gate), self);
    }

    /// Where every rollout is recorded: the metrics (wavelet's and Reloader's), and the
    /// alert, handed to its queue.
    fn record(&self, key: &WorkloadKey, outcome: &Outcome) {
        let m = metrics::global();
        match counted_as(outcome, self.dry_run) {
            Some(Counted::Rollout(result)) => m.rollouts.inc(&[&key.resource.kind, result]),
            Some(Counted::Skipped(reason)) => m.changes_skipped.inc(&[reason]),
            None => {}
        }
        let Outcome::Rolled {
            changed_at,
            changed,
            ..
        } = outcome
        else {
            return;
        };
        if let Some(since) = changed_at {
            m.change_to_patch.observe(since.elapsed());
        }
        if !self.dry_run {
            m.reload_executed(true, &key.namespace);
        }
        if let Some(alerts) = &self.alerts {
            alerts.send(alerts::Alert::Rollout(alerts::Rollout {
                kind: key.resource.kind.to_string(),
                namespace: key.namespace.to_string(),
                name: key.name.to_string(),
                changed: changed.clone(),
                dry_run: self.dry_run,
            }));
        }
    }
}

/// Where a hash-mode outcome is counted on `/metrics`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Counted {
    /// `wavelet_rollouts_total{result}` (with the workload's kind).
    Rollout(&'static str),
    /// `wavelet_changes_skipped_total{reason}`.
    Skipped(&'static str),
}

/// How a reconcile's outcome counts: writes as rollouts by result, changes not acted on by
/// reason; routine outcomes (up to date, waiting for the watch or for data) not at all.
fn counted_as(outcome: &Outcome, dry_run: bool) -> Option<Counted> {
    match outcome {
        Outcome::Rolled { .. } if dry_run => Some(Counted::Rollout("dry_run")),
        Outcome::Rolled { .. } => Some(Counted::Rollout("rolled")),
        Outcome::Adopted { .. } => Some(Counted::Rollout("adopted")),
        Outcome::Recorded { .. } => Some(Counted::Rollout("recorded")),
        // Each change of a workload once, when it starts to wait: `throttled` for
        // --min-rollout-interval (its configuration changes faster), `rate_limited` for a
        // token of --max-rollouts-per-second (a fan-out larger than --rollout-burst).
        Outcome::Throttled {
            rule: Throttled::MinInterval(_),
            first: true,
        } => Some(Counted::Skipped("throttled")),
        Outcome::Throttled {
            rule: Throttled::RateLimit(_),
            first: true,
        } => Some(Counted::Skipped("rate_limited")),
        Outcome::Throttled { first: false, .. } => None,
        Outcome::MissingConfig => Some(Counted::Skipped("missing_config")),
        Outcome::OutOfScope => Some(Counted::Skipped("out_of_scope")),
        Outcome::UpToDate
        | Outcome::Pending(_)
        | Outcome::Forgotten
        | Outcome::OptOutCleaned
        | Outcome::AwaitingWatch
        | Outcome::AwaitingData
        | Outcome::Debouncing => None,
    }
}

/// With `--namespaces`, whether wavelet may read a listed Namespace (one list narrowed to
/// it at start, as its watch reads it); where it may not, says once what that costs: its
/// `wavelet.dev/pause` and `wavelet.dev/restart-window` are not seen.
fn say_if_namespace_unreadable(client: &Client, name: &str) {
    #[derive(serde::Deserialize)]
    struct List {
        #[serde(default)]
        items: Vec<serde::de::IgnoredAny>,
    }
    match client.get::<List>(&format!(
        "/api/v1/namespaces?fieldSelector=metadata.name%3D{name}"
    )) {
        Ok(list) if list.items.is_empty() => {
            log::warn!("namespace {name}: listed in --namespaces but does not exist")
        }
        Ok(_) => {}
        Err(err) if err.is_forbidden() => log::warn!(
            "namespace {name}: cannot read the Namespace ({err}): its wavelet.dev/pause and wavelet.dev/restart-window are NOT seen and hold nothing; grant list and watch on namespaces with resourceNames [{name}] (the chart and manifests/namespaced/namespace-clusterrole.yaml do)"
        ),
        Err(err) => log::debug!("namespace {name}: not read at start: {err}"),
    }
}

/// Creates `wavelet-state` (empty) at start where it does not exist yet, so the one-shot
/// commands find the running wavelet's state from the first minute: they write only into
/// an existing one (see `commands/locate.rs`). A replica that loses the race (409) or may not
/// create it says so and goes on: the first write creates it then.
/// One POST, no read first: the answer says whether it was there (409 AlreadyExists).
fn create_state_configmap(client: &Client, namespace: &str) {
    match crate::model::state::store(client, namespace, None, &Default::default()) {
        Ok(_) => log::info!("created ConfigMap {namespace}/{STATE_CONFIGMAP} for fan-outs, pauses and delete mode's hashes"),
        Err(err) if err.is_already_exists() => {}
        Err(err) => log::warn!("cannot create ConfigMap {namespace}/{STATE_CONFIGMAP} ({err}): `wavelet pause` and `wavelet resume` find no state there until wavelet first writes one"),
    }
}

/// Delete mode keeps its `wavelet-state` ConfigMap in the namespace [`own_namespace`] says.
#[allow(clippy::too_many_arguments)]
fn start_delete_mode(
    client: &Client,
    config: &RunConfig,
    policy: &Policy,
    csi: bool,
    cache: &Arc<Cache>,
    gate: &Arc<Gate>,
    hmac_key: Option<Vec<u8>>,
    recorder: &Recorder,
    fan_out: &FanOut,
    fanout_state: &Arc<StateConfigMap>,
) -> Arc<DeleteMode> {
    let (namespace, why) = own_namespace(
        config.state_namespace.as_deref(),
        "--state-namespace",
        client,
    );
    log::info!("delete mode keeps its state in ConfigMap {namespace}/{STATE_CONFIGMAP} ({why})");
    let settings = DeleteModeSettings {
        dry_run: config.dry_run,
        rolling_timeout: config.rolling_timeout,
        eviction_warning_after: config.eviction_warning_after,
        debounce: config.debounce,
        hmac_key,
        fan_out: fan_out.clone(),
    };
    // Entries of objects gone for a resync period leave the state (see ledger.rs).
    let listed = Listed {
        kinds: Listed::kinds(|k| policy.ignores(k), csi),
        namespaces: config.namespaces.clone(),
        ignored: config.reloader.namespaces_to_ignore.clone(),
    };
    let pruning = crate::deletemode::pruning(Arc::clone(cache), listed, config.resync);
    let state = StateStore::new(
        client.clone(),
        namespace,
        config.dry_run,
        Arc::clone(gate),
        Some(pruning),
    );
    Arc::new(DeleteMode::new(
        client.clone(),
        Arc::clone(gate),
        Arc::clone(cache),
        recorder.clone(),
        state,
        FanOutRecords {
            state: Arc::clone(fanout_state),
            policy: Arc::new(delete_waves::HashModeFanOut),
        },
        settings,
    ))
}

/// The namespace of what `run` writes of its own (the Lease, `wavelet-state`) and why: the
/// flag's, else the namespace wavelet runs in (in a cluster) or the kubeconfig context's,
/// else `default`, as kubectl does. Out of a cluster the quick start thus works as written,
/// and the Info line at start says where the object lives and which flag moves it.
fn own_namespace(flag: Option<&str>, flag_name: &str, client: &Client) -> (String, String) {
    match (flag, client.default_namespace()) {
        (Some(ns), _) => (ns.to_string(), flag_name.to_string()),
        (None, Some(ns)) => (
            ns,
            format!("the namespace wavelet runs in, or its kubeconfig context's; {flag_name} sets another"),
        ),
        (None, None) => (
            "default".to_string(),
            format!("kubectl's default: neither a cluster nor the kubeconfig context names a namespace; {flag_name} sets another"),
        ),
    }
}

/// Up to this many `--namespaces`, each is watched on its own: a few threads and
/// connections each, and the API server sends only their objects.
const PER_NAMESPACE_UP_TO: usize = 10;
/// `--per-namespace-watches` takes at most this many namespaces: 100 namespaces are 700
/// watch threads and connections and 700 LISTs per resync.
const PER_NAMESPACE_AT_MOST: usize = 100;

/// Where the watches of `run` look.
#[derive(Debug, Clone, PartialEq, Eq)]
enum WatchPlan {
    /// One watch per resource over every namespace (no `--namespaces`).
    Everywhere,
    /// One watch per resource and namespace.
    Each(Vec<String>),
    /// One watch per resource over every namespace, its events kept to these (many
    /// `--namespaces`): what client-go's informers do for `NamespaceAll`, filtered here.
    Filtered(Vec<String>),
}

impl WatchPlan {
    /// The namespace of each set of watches: `None` for all namespaces.
    fn namespaces(&self) -> Vec<Option<String>> {
        match self {
            WatchPlan::Everywhere | WatchPlan::Filtered(_) => vec![None],
            WatchPlan::Each(names) => names.iter().cloned().map(Some).collect(),
        }
    }
}

/// How to watch `--namespaces` less `--namespaces-to-ignore` with `resources` watched
/// resources: each namespace on its own up to [`PER_NAMESPACE_UP_TO`] of them (or with
/// `--per-namespace-watches`, up to [`PER_NAMESPACE_AT_MOST`]), else once cluster-wide.
fn watch_plan(
    namespaces: &[String],
    ignored: &[String],
    per_namespace: bool,
    resources: usize,
) -> Result<WatchPlan, Error> {
    if namespaces.is_empty() {
        return Ok(WatchPlan::Everywhere);
    }
    let mut kept: Vec<String> = Vec::new();
    for ns in namespaces.iter().filter(|ns| !ignored.contains(ns)) {
        if !kept.contains(ns) {
            kept.push(ns.clone());
        }
    }
    if kept.is_empty() {
        return Err(Error::Config(
            "every namespace of --namespaces is also in --namespaces-to-ignore: nothing to watch"
                .into(),
        ));
    }
    let n = kept.len();
    if per_namespace && n > PER_NAMESPACE_AT_MOST {
        return Err(Error::Config(format!(
            "--per-namespace-watches with {n} namespaces would open {} watches (a thread and a long-lived connection each) and send {} LISTs at start and every --resync; it takes at most {PER_NAMESPACE_AT_MOST} namespaces. Leave it off to watch each resource once in all namespaces and keep those of --namespaces (needs list and watch in a ClusterRole), or split the namespaces between installations",
            n * resources,
            n * resources
        )));
    }
    if per_namespace || n <= PER_NAMESPACE_UP_TO {
        Ok(WatchPlan::Each(kept))
    } else {
        Ok(WatchPlan::Filtered(kept))
    }
}

/// `metadata.namespace!=a,metadata.namespace!=b` for `--namespaces-to-ignore` when all
/// namespaces are watched; `None` when nothing is ignored.
fn ignored_namespaces_field_selector(ignored: &[String]) -> Option<String> {
    (!ignored.is_empty()).then(|| {
        ignored
            .iter()
            .map(|ns| format!("metadata.namespace!={ns}"))
            .collect::<Vec<_>>()
            .join(",")
    })
}

/// Whether the API serves the Secrets Store CSI driver's `secretproviderclasses` and
/// `secretproviderclasspodstatuses` (`secrets-store.csi.x-k8s.io/v1`); says so either way.
/// Asked once at start, like Argo Rollouts: a driver installed later needs a restart.
fn serves_csi_driver(client: &Client) -> bool {
    let served = [
        Resource::secret_provider_classes(),
        Resource::secret_provider_class_pod_statuses(),
    ]
    .iter()
    .all(|r| discovered_kind(client, r).is_some());
    if served {
        log::info!("--enable-csi-integration: watching secrets-store.csi.x-k8s.io/v1 secretproviderclasses and secretproviderclasspodstatuses");
    } else {
        log::warn!("--enable-csi-integration: the API does not serve secrets-store.csi.x-k8s.io/v1 secretproviderclasspodstatuses (is the Secrets Store CSI driver installed?); SecretProviderClasses count for no workload until wavelet is restarted after it is");
    }
    served
}

/// Whether the API serves `argoproj.io/v1alpha1` `rollouts` (Argo Rollouts installed).
fn serves_argo_rollouts(client: &Client) -> bool {
    discovered_kind(client, &Resource::rollouts()).is_some()
}

/// Looks up the Kind of a `--workload-kinds` resource from API discovery; falls back to the
/// capitalized singular when discovery is unavailable.
fn discover(client: &Client, kind: &WorkloadKind) -> Resource {
    let unknown = Resource::new(&kind.group, &kind.version, &kind.resource, "");
    let kind_name = discovered_kind(client, &unknown).unwrap_or_else(|| {
        let guessed = guessed_kind(&kind.resource);
        log::warn!(
            "could not discover the kind of {}/{}/{}; assuming {guessed}",
            kind.group,
            kind.version,
            kind.resource
        );
        guessed
    });
    Resource::new(&kind.group, &kind.version, &kind.resource, &kind_name)
}

/// The Kind of a plural resource name when discovery cannot say: the capitalized singular
/// (`widgets` → `Widget`), as most custom resources are named.
fn guessed_kind(plural: &str) -> String {
    let singular = plural.strip_suffix('s').unwrap_or(plural);
    let mut chars = singular.chars();
    chars
        .next()
        .map(|c| c.to_ascii_uppercase())
        .into_iter()
        .chain(chars)
        .collect()
}

/// The Kind API discovery names for `resource`'s plural in its group-version; `None` when
/// the group-version is not served, does not list it, or discovery fails.
fn discovered_kind(client: &Client, resource: &Resource) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct ApiResourceList {
        #[serde(default)]
        resources: Vec<ApiResource>,
    }
    #[derive(serde::Deserialize)]
    struct ApiResource {
        name: String,
        kind: String,
    }
    client
        .get::<ApiResourceList>(&resource.group_version_path())
        .ok()?
        .resources
        .into_iter()
        .find(|r| r.name == resource.plural)
        .map(|r| r.kind)
}

/// `handle`, given only the events of objects in the namespaces `keep` lists (one watch
/// over all namespaces above 10 `--namespaces`), and every event without it.
fn only_kept<T: Namespaced>(
    keep: Option<Arc<NamespaceFilter>>,
    mut handle: impl FnMut(Event<T>) + Send + 'static,
) -> impl FnMut(Event<T>) + Send + 'static {
    move |e: Event<T>| {
        if keep.as_ref().is_none_or(|k| k.keeps(&e)) {
            handle(e)
        }
    }
}

fn spawn_watch<T: watcher::Object>(
    source: ApiSource,
    health: &Arc<Health>,
    config: WatchConfig,
    stop: Arc<Stop>,
    handle: impl FnMut(Event<T>) + Send + 'static,
) {
    spawn_watch_after(None, source, health, config, stop, handle);
}

/// [`spawn_watch`], its first list sent once `after` opens (when given).
fn spawn_watch_after<T: watcher::Object>(
    after: Option<Arc<Latch>>,
    source: ApiSource,
    health: &Arc<Health>,
    config: WatchConfig,
    stop: Arc<Stop>,
    mut handle: impl FnMut(Event<T>) + Send + 'static,
) {
    let name = source.describe();
    let beat = health.register(format!("watch {name}"));
    let resource = source.resource.plural.clone();
    std::thread::Builder::new()
        .name(format!("watch {}", source.resource.plural))
        .spawn(move || {
            let _beat = beat;
            if let Some(after) = after {
                after.wait();
            }
            let watcher = Watcher::new(name, source, config, stop).on_restart(move |reason| {
                let m = metrics::global();
                match reason {
                    Restart::StreamEnd | Restart::StreamBroken => {
                        m.watch_restarts.inc(&[&resource, reason.as_str()])
                    }
                    _ => m.watch_relists.inc(&[&resource, reason.as_str()]),
                }
            });
            for event in watcher {
                handle(event);
            }
        })
        .expect("spawning a watch thread");
}

/// The watches of Helm's release records (`SecretPart::HelmReleases`), each started the
/// first time a record is found in use in its scope.
struct RecordWatches {
    router: std::sync::Weak<Router>,
    client: Client,
    /// The scopes of the other watches (`None`: all namespaces at once).
    scopes: Vec<Option<String>>,
    labels: Option<String>,
    fields: String,
    keep: Option<Arc<NamespaceFilter>>,
    health: Arc<Health>,
    config: WatchConfig,
    stop: Arc<Stop>,
    started: Mutex<Vec<Option<String>>>,
}

impl RecordWatches {
    fn start(&self, namespace: &str) {
        let scope = self
            .scopes
            .iter()
            .find(|s| s.as_deref() == Some(namespace))
            .cloned()
            .unwrap_or(None);
        {
            let mut started = self.started.lock().unwrap();
            if started.contains(&scope) {
                return;
            }
            started.push(scope.clone());
        }
        let Some(router) = self.router.upgrade() else {
            return;
        };
        log::info!(
            "a Helm release record is in use in namespace {namespace}: watching the records {} as metadata from now on",
            scope
                .as_deref()
                .map_or("of every namespace".to_string(), |ns| format!("of {ns}"))
        );
        let source = ApiSource::new(
            self.client.clone(),
            Resource::secrets(),
            scope.clone(),
            Shape::Metadata,
        )
        .filtered(self.labels.as_deref(), Some(&self.fields));
        let mut sink = ConfigSink::new(ConfigKind::Secret, scope, router, Box::new(|| {}))
            .part(SecretPart::HelmReleases);
        spawn_watch(
            source,
            &self.health,
            self.config.clone(),
            Arc::clone(&self.stop),
            only_kept(self.keep.clone(), move |e: Event<SecretItem>| {
                sink.handle(e)
            }),
        );
    }
}

/// Counts watchers down to their first complete list.
struct Latch {
    pending: Mutex<usize>,
    opened: Condvar,
}

impl Latch {
    fn new(count: usize) -> Latch {
        Latch {
            pending: Mutex::new(count),
            opened: Condvar::new(),
        }
    }

    fn count_down(&self) {
        let mut pending = self.pending.lock().unwrap();
        *pending = pending.saturating_sub(1);
        if *pending == 0 {
            self.opened.notify_all();
        }
    }

    fn open(&self) {
        *self.pending.lock().unwrap() = 0;
        self.opened.notify_all();
    }

    fn is_open(&self) -> bool {
        *self.pending.lock().unwrap() == 0
    }

    fn wait(&self) {
        let mut pending = self.pending.lock().unwrap();
        while *pending > 0 {
            pending = self.opened.wait(pending).unwrap();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("ns-{i}")).collect()
    }

    #[test]
    fn no_namespaces_flag_means_one_set_of_watches_over_all_namespaces() {
        assert_eq!(
            watch_plan(&[], &[], false, 7).unwrap(),
            WatchPlan::Everywhere
        );
        assert_eq!(
            watch_plan(&[], &["kube-system".into()], false, 7).unwrap(),
            WatchPlan::Everywhere,
            "ignored namespaces are filtered by the API server then, not by the watch list"
        );
        assert_eq!(WatchPlan::Everywhere.namespaces(), vec![None]);
    }

    #[test]
    fn namespaces_to_ignore_are_subtracted_from_namespaces_in_order() {
        let watched = watch_plan(
            &["b".into(), "a".into(), "c".into(), "b".into()],
            &["a".into(), "z".into()],
            false,
            7,
        )
        .unwrap();
        assert_eq!(watched, WatchPlan::Each(vec!["b".into(), "c".into()]));
        assert_eq!(
            watched.namespaces(),
            vec![Some("b".into()), Some("c".into())]
        );
    }

    #[test]
    fn ignoring_every_listed_namespace_is_a_configuration_error() {
        let err = watch_plan(&["a".into()], &["a".into()], false, 7).unwrap_err();
        assert!(err.to_string().contains("nothing to watch"), "{err}");
    }

    #[test]
    fn up_to_ten_namespaces_are_watched_each_and_more_once_cluster_wide() {
        assert_eq!(
            watch_plan(&names(10), &[], false, 7).unwrap(),
            WatchPlan::Each(names(10))
        );
        let many = watch_plan(&names(200), &[], false, 7).unwrap();
        assert_eq!(many, WatchPlan::Filtered(names(200)));
        assert_eq!(many.namespaces(), vec![None], "one set of watches");
    }

    #[test]
    fn per_namespace_watches_are_capped_with_an_error_that_says_what_they_cost() {
        assert_eq!(
            watch_plan(&names(100), &[], true, 7).unwrap(),
            WatchPlan::Each(names(100))
        );
        let err = watch_plan(&names(200), &[], true, 7)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("200 namespaces would open 1400 watches") && err.contains("at most 100"),
            "{err}"
        );
    }

    #[test]
    fn ignored_namespaces_become_one_field_selector() {
        assert_eq!(ignored_namespaces_field_selector(&[]), None);
        assert_eq!(
            ignored_namespaces_field_selector(&["kube-system".into(), "flux".into()]).as_deref(),
            Some("metadata.namespace!=kube-system,metadata.namespace!=flux")
        );
    }

    #[test]
    fn an_undiscoverable_kind_is_guessed_as_the_capitalized_singular() {
        assert_eq!(guessed_kind("widgets"), "Widget");
        assert_eq!(guessed_kind("rollouts"), "Rollout");
        assert_eq!(guessed_kind("sheep"), "Sheep");
        assert_eq!(guessed_kind(""), "");
    }

    #[test]
    fn writes_count_as_rollouts_by_result() {
        let rolled = Outcome::Rolled {
            from: "a".into(),
            to: "b".into(),
            changed_at: None,
            changed: Vec::new(),
        };
        assert_eq!(counted_as(&rolled, false), Some(Counted::Rollout("rolled")));
        assert_eq!(counted_as(&rolled, true), Some(Counted::Rollout("dry_run")));
        let adopted = Outcome::Adopted { hash: "h".into() };
        assert_eq!(
            counted_as(&adopted, false),
            Some(Counted::Rollout("adopted"))
        );
        let recorded = Outcome::Recorded { hash: "h".into() };
        assert_eq!(
            counted_as(&recorded, false),
            Some(Counted::Rollout("recorded"))
        );
    }

    #[test]
    fn changes_not_acted_on_count_as_skipped_by_reason() {
        let second = Duration::from_secs(1);
        let waiting = |rule, first| Outcome::Throttled { rule, first };
        assert_eq!(
            counted_as(&waiting(Throttled::MinInterval(second), true), false),
            Some(Counted::Skipped("throttled"))
        );
        assert_eq!(
            counted_as(&waiting(Throttled::RateLimit(second), true), false),
            Some(Counted::Skipped("rate_limited"))
        );
        for rule in [Throttled::MinInterval(second), Throttled::RateLimit(second)] {
            assert_eq!(
                counted_as(&waiting(rule, false), false),
                None,
                "a change still waiting was counted when it started to"
            );
        }
        assert_eq!(
            counted_as(&Outcome::MissingConfig, false),
            Some(Counted::Skipped("missing_config"))
        );
        assert_eq!(
            counted_as(&Outcome::OutOfScope, false),
            Some(Counted::Skipped("out_of_scope"))
        );
    }

    #[test]
    fn routine_outcomes_are_not_counted() {
        for outcome in [
            Outcome::UpToDate,
            Outcome::Forgotten,
            Outcome::OptOutCleaned,
            Outcome::AwaitingWatch,
            Outcome::AwaitingData,
            Outcome::Debouncing,
        ] {
            assert_eq!(counted_as(&outcome, false), None, "{outcome:?}");
        }
    }

    #[test]
    fn the_latch_opens_when_every_watcher_counted_down_or_when_forced() {
        let latch = Latch::new(2);
        assert!(!latch.is_open());
        latch.count_down();
        assert!(!latch.is_open());
        latch.count_down();
        assert!(latch.is_open());
        latch.count_down();
        assert!(latch.is_open(), "an extra count-down does not close it");
        latch.wait();

        let stopping = Latch::new(5);
        stopping.open();
        assert!(stopping.is_open());
        stopping.wait();
    }

    #[test]
    fn a_waiter_is_released_by_the_last_count_down_from_another_thread() {
        let latch = Arc::new(Latch::new(1));
        let waiter = {
            let latch = Arc::clone(&latch);
            std::thread::spawn(move || latch.wait())
        };
        latch.count_down();
        waiter.join().unwrap();
    }
}
mod delete_waves;
mod hold_alerts;
pub(crate) mod sinks;
