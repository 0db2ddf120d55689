//! Integration tests: the real `wavelet` binary against the fake API server, over sockets
//! on 127.0.0.1.
//!
//! - `architecture`: the folders of `src/` are layers that use only the layers below them (and the book's design page draws them).
//! - `fake`: the fake API server (HTTP/1.1, watch streams, patches, faults).
//! - `wire`: the fake checked against the recordings of a real API server in ../shared/k8s-wire.
//! - `util`: starting the binary, building objects, the expected hash.
//! - `hash_mode`: rollouts of Deployments, StatefulSets, DaemonSets and custom kinds.
//! - `faults`: dropped watches, truncated lines, 410s, 5xx/429 with Retry-After, token rotation.
//! - `relist`: a relist asks for metadata and reads only what changed; a change or deletion the watch hid is found by the next relist, at once after a 410 or an undecodable event; the first list is a streaming list, page by page where the server refuses one.
//! - `secrets`: a Secret value never leaks.
//! - `secret_reads`: Secrets are watched whole, Helm's release records as metadata; only those that matter are kept; what is read with a GET, and when.
//! - `startup`: ready once synced, adoption in the background behind every change to act on.
//! - `kubeconfigs`: the kubeconfig corpus, KUBECONFIG lists, --context, exec credential plugins, impersonation.
//! - `connecting`: TLS verified against the CA (or skipped only by flag); unreadable token files fail at start.
//! - `soak`: random changes under random faults, leader changes and crashing configurations for `WAVELET_SOAK_SECS`, wavelet on its defaults (waves); nothing lost, nothing rolled twice, every hold explained, no state line left.
//! - `malformed`: oversized, non-UTF-8 and deeply nested answers are rejected; memory stays bounded.
//! - `delete_mode`: Pods replaced on a ConfigMap/Secret data change (evict, delete, rolling).
//! - `delete_waves`: delete mode over several workloads in waves: the health gate, a hold and `wavelet resume`, a restart mid-wave, `at-once`.
//! - `reloader`: Reloader's annotations (auto, typed auto, reload lists, search/match, exclude, ignore, pause-period) and opt-in flags.
//! - `csi`: the Secrets Store CSI driver (`--enable-csi-integration`): a rotation rolls each workload that mounts the class once; unrelated classes, adoption and first mounts roll nothing; Reloader's class annotations; delete mode on a class; `status`/`hash`.
//! - `reloader_kinds`: Reloader's CronJobs, Argo Rollouts and flags (namespaces, selectors, refused ones).
//! - `reloader_chart`: a Reloader values file gives the same requests through Reloader's chart (image swapped) and wavelet's.
//! - `reloader_switch`: Reloader's alerts (each sink's shape, retries, a dead receiver, TLS, proxy), its metric and probe paths.
//! - `wave`: `wavelet migrate wave` removes exactly what older Wave left; run warns, status says so.
//! - `first_sight`: adoption takes the configuration as of when wavelet first saw the workload, in the API server's order: a change written before it (or before an opt-in again) and delivered late by a lagging watch rolls nothing; opted out and in again, one rollout if it changed while out (across a restart), none otherwise, then one per change.
//! - `takeover`: baselines: a change made while adopting rolls once after it; taking over from Wave's hash or Reloader's records, and across a change of how wavelet hashes (flags, key, version), rolls only what really changed.
//! - `fanout`: safe fan-out: waves behind the health gate, at-once, a restart mid-fan-out, a hold and `wavelet resume`, pauses, restart windows and urgent changes.
//! - `commands`: `wavelet status` (exit 1 when out of date) and `wavelet hash` output.
//! - `impact`: `wavelet impact`: offline on manifests gives the same workloads as live, it only reads, no Secret value in any output, `--max-rolls` exits 3.
//! - `politeness`: at scale: the client-side budget and 429 pauses, aggregated Events, throttle accounting and its alert, many namespaces.
//! - `operations`: SIGTERM/SIGINT shutdown, /healthz, /readyz, /metrics, leader election.
//! - `docs`: every relative link and anchor of README.md and the book (docs/src) resolves; every page is in SUMMARY.md; the flags page is `wavelet run --help`.
//! - `readme`: the hash test vector of the book's hash-mode page reproduces with `sha256sum`.
//! - `manifests`: every file in manifests/ matches the API's OpenAPI schema; examples are whole.
//! - `kustomize`: `kubectl kustomize` of each overlay equals the plain manifests of its shape.
//! - `plugin`: `kubectl wavelet status` / `hash` through the real kubectl, with `-n`, `--kubeconfig` and `--context`.
//! - `rbac`: the RBAC in manifests/ allows every request wavelet sends, and nothing unused.
//! - `chart`: the Helm chart renders the plain manifests of each shape (cluster-wide, namespaced, proxy sidecar); every rendered object matches the OpenAPI schema; its RBAC is exactly what wavelet sends with the flags it renders, for a matrix of values.
//! - `monitoring`: alerts and dashboard query only what /metrics exports; ServiceMonitor, rules and dashboard in monitoring/ and the chart agree.
//! - `chroot`: the static musl binary runs alone in an empty root (needs root; `.ci/run`).
//! - `image`: `image/build`'s OCI image is reproducible, multi-arch, one file per platform, each platform's SBOM attached in the index (needs skopeo, umoci, the arm64 binary; `.ci/run`).
//! - `supply`: each static binary's SBOM lists exactly what `cargo tree -e normal` reports, at Cargo.lock's versions and checksums; its embedded `.dep-v0` list matches; a made-up dependency with a forbidden licence fails the build; the unit tests of `image/supply/`.
//! - `release`: the release workflow (GitHub Actions) runs on `v*` tags, checks the tag with `image/check-tag` (Cargo.toml, Chart.yaml and values.yaml agree), runs `.ci/run`; its scripts are valid bash, name only paths that exist, print no secret.

mod architecture;
mod chart;
mod chroot;
mod commands;
mod connecting;
mod csi;
mod delete_mode;
mod delete_waves;
mod docs;
mod fake;
mod fanout;
mod faults;
mod first_sight;
mod hash_mode;
mod hold_alerts;
mod image;
mod impact;
mod kubeconfigs;
mod kustomize;
mod malformed;
mod manifests;
mod monitoring;
mod namespace_gates;
mod operations;
mod plugin;
mod politeness;
mod rbac;
mod readme;
mod release;
mod relist;
mod reloader;
mod reloader_chart;
mod reloader_kinds;
mod reloader_switch;
mod secret_reads;
mod secrets;
mod soak;
mod startup;
mod state_location;
mod supply;
mod takeover;
mod util;
mod wave;
mod wire;
