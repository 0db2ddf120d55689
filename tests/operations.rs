//! Operations: shutdown on signals, the HTTP endpoints, leader election.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::fake::{FakeApi, Fault};
use crate::util::*;

const NS: &str = "default";
const HASH: &str = "wavelet.dev/config-hash";

fn exits_zero_soon_after(signal: &str) {
    let fake = fake_with_web();
    let mut wavelet = Wavelet::start(&fake, FAST);
    let sent = Instant::now();
    wavelet.signal(signal);
    let status = wavelet.wait_exit(Duration::from_secs(3));
    let output = wavelet.output();
    let status = status.unwrap_or_else(|| panic!("still running 3 s after SIG{signal}:\n{output}"));
    assert_eq!(status.code(), Some(0), "SIG{signal} exit status:\n{output}");
    assert!(sent.elapsed() < Duration::from_secs(3));
}

#[test]
fn sigterm_exits_zero_within_three_seconds() {
    exits_zero_soon_after("TERM");
}

#[test]
fn sigint_exits_zero_within_three_seconds() {
    exits_zero_soon_after("INT");
}

/// One sample of the exposition text.
#[derive(Debug)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// Parses the Prometheus text format strictly: every sample is `name{labels} value` or
/// `name value`, and its family has `# HELP` and `# TYPE` lines before it.
fn parse_exposition(text: &str) -> Vec<Sample> {
    let mut helped = HashSet::new();
    let mut typed: HashMap<String, String> = HashMap::new();
    let mut samples = Vec::new();
    let is_name = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
            && !s.starts_with(|c: char| c.is_ascii_digit())
    };
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').expect("HELP has text");
            assert!(is_name(name) && !help.is_empty(), "bad HELP: {line}");
            helped.insert(name.to_string());
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("TYPE has a kind");
            assert!(helped.contains(name), "TYPE before HELP: {line}");
            assert!(
                ["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind),
                "bad TYPE: {line}"
            );
            typed.insert(name.to_string(), kind.to_string());
            continue;
        }
        assert!(
            !line.starts_with('#') && !line.is_empty(),
            "stray line: {line:?}"
        );
        let (series, value) = line.rsplit_once(' ').expect("sample has a value");
        let value: f64 = value
            .parse()
            .unwrap_or_else(|_| panic!("bad value: {line}"));
        let (name, labels) = match series.split_once('{') {
            Some((name, rest)) => {
                let inner = rest.strip_suffix('}').expect("labels end with }");
                let labels = inner
                    .split("\",")
                    .filter(|p| !p.is_empty())
                    .map(|pair| {
                        let (k, v) = pair.split_once("=\"").expect("label is k=\"v\"");
                        assert!(is_name(k), "bad label name in {line}");
                        (k.to_string(), v.trim_end_matches('"').to_string())
                    })
                    .collect();
                (name, labels)
            }
            None => (series, BTreeMap::new()),
        };
        assert!(is_name(name), "bad metric name: {line}");
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| {
                name.strip_suffix(s)
                    .filter(|f| typed.get(*f).is_some_and(|k| k == "histogram"))
            })
            .unwrap_or(name);
        assert!(typed.contains_key(family), "sample before its TYPE: {line}");
        samples.push(Sample {
            name: name.to_string(),
            labels,
            value,
        });
    }
    samples
}

/// The value of the sample `name` whose labels include `labels` (0 when absent).
fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> f64 {
    samples
        .iter()
        .filter(|s| {
            s.name == name
                && labels
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|s| s.value)
        .sum()
}

fn scrape(wavelet: &Wavelet) -> Vec<Sample> {
    let (code, body) = wavelet.http_get("/metrics");
    assert_eq!(code, 200, "{body}");
    parse_exposition(&body)
}

/// Scrapes until `cond` holds (the patch reaches the fake just before the worker counts
/// it), and returns that scrape.
fn scrape_until(wavelet: &Wavelet, what: &str, cond: impl Fn(&[Sample]) -> bool) -> Vec<Sample> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let samples = scrape(wavelet);
        if cond(&samples) {
            return samples;
        }
        if Instant::now() > deadline {
            panic!("metrics never showed {what}: {samples:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn readyz_is_503_until_the_initial_sync_then_200() {
    let fake = fake_with_web();
    // The first list of DaemonSets is a streaming one: a WATCH request.
    fake.inject(Fault::Slow {
        method: "WATCH".into(),
        resource: "daemonsets".into(),
        delay: Duration::from_secs(2),
    });
    let wavelet = Wavelet::start_unsynced(&fake, FAST);
    assert_eq!(wavelet.http_get("/readyz").0, 503, "{}", wavelet.output());
    assert_eq!(wavelet.http_get("/healthz").0, 200, "{}", wavelet.output());
    assert!(
        wavelet.wait_for_output("initial sync complete", Duration::from_secs(10)),
        "{}",
        wavelet.output()
    );
    assert_eq!(wavelet.http_get("/readyz").0, 200);
    assert_eq!(wavelet.http_get("/healthz").0, 200);
    assert_eq!(wavelet.http_get("/nothing").0, 404);
}

#[test]
fn metrics_parse_and_count_a_rollout() {
    let fake = fake_with_web();
    let wavelet = Wavelet::start(&fake, FAST);
    eventually(&fake, &wavelet, "adoption", |f| {
        hashes(f, "deployments", NS, "web", HASH).1.is_some()
    });
    let adopted = [("kind", "Deployment"), ("result", "adopted")];
    let rolled = [("kind", "Deployment"), ("result", "rolled")];
    let before = scrape_until(&wavelet, "the adoption", |s| {
        value(s, "wavelet_rollouts_total", &adopted) == 1.0
    });
    assert_eq!(value(&before, "wavelet_rollouts_total", &rolled), 0.0);
    assert!(
        value(
            &before,
            "wavelet_watch_relists_total",
            &[("resource", "configmaps"), ("reason", "initial")]
        ) >= 1.0
    );
    // Each kind's first list is a streaming one (a watch request that goes on as the watch).
    assert!(value(&before, "wavelet_api_requests_total", &[("verb", "watch")]) >= 5.0);
    assert_eq!(
        value(&before, "wavelet_cache_objects", &[("kind", "workload")]),
        1.0
    );
    assert_eq!(value(&before, "wavelet_leader", &[]), 1.0);
    assert_eq!(value(&before, "wavelet_ready", &[]), 1.0);
    assert!(value(&before, "process_resident_memory_bytes", &[]) > 0.0);

    fake.merge_patch(
        "configmaps",
        NS,
        "app-config",
        json!({"data": {"color": "green"}}),
    );
    eventually(&fake, &wavelet, "rollout", |f| {
        f.revisions("deployments", NS, "web") == 2
    });
    let after = scrape_until(&wavelet, "the rollout", |s| {
        value(s, "wavelet_rollouts_total", &rolled) == 1.0
    });
    assert_eq!(
        value(&after, "wavelet_change_to_patch_seconds_count", &[]),
        1.0
    );
    assert!(
        value(&after, "wavelet_reconcile_duration_seconds_count", &[])
            > value(&before, "wavelet_reconcile_duration_seconds_count", &[])
    );
    assert!(
        value(
            &after,
            "wavelet_api_requests_total",
            &[("verb", "patch"), ("code", "200")]
        ) >= 2.0
    );
}

/// Leader election with short timings: lease 2s, renew deadline 1.5s, retry 300ms.
const ELECT: &[&str] = &[
    "--leader-elect",
    "--lease-namespace",
    NS,
    "--lease-name",
    "wavelet",
    "--lease-duration",
    "2s",
    "--renew-deadline",
    "1500ms",
    "--retry-period",
    "300ms",
];

fn elect_args() -> Vec<&'static str> {
    FAST.iter().chain(ELECT).copied().collect()
}

/// Two replicas on one fake, adopted by whichever leads; returns (leader, standby).
fn two_replicas(fake: &FakeApi) -> (Wavelet, Wavelet) {
    let a = Wavelet::start(fake, &elect_args());
    let b = Wavelet::start(fake, &elect_args());
    eventually(fake, &a, "adoption", |f| {
        hashes(f, "deployments", NS, "web", HASH).1.is_some()
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match (is_leader(&a), is_leader(&b)) {
            (true, false) => return (a, b),
            (false, true) => return (b, a),
            (true, true) => panic!("two leaders:\n{}\n---\n{}", a.output(), b.output()),
            (false, false) if Instant::now() > deadline => {
                panic!("no leader:\n{}\n---\n{}", a.output(), b.output())
            }
            (false, false) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

fn is_leader(wavelet: &Wavelet) -> bool {
    value(&scrape(wavelet), "wavelet_leader", &[]) == 1.0
}

fn lease_holder(fake: &FakeApi) -> String {
    fake.get("leases", NS, "wavelet").expect("the Lease exists")["spec"]["holderIdentity"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

/// Whether `web`'s pod template carries the hash of its configuration as it is now.
fn web_on_its_current_configuration(fake: &FakeApi) -> bool {
    hashes(fake, "deployments", NS, "web", HASH).0
        == Some(expected_hash(fake, "deployments", NS, "web"))
}

/// Changes `app-config` while `wavelet` does not lead, and waits until it saw the change
/// and skipped it (`wavelet_changes_skipped_total{reason="not_leader"}`).
fn change_while_not_leading(fake: &FakeApi, wavelet: &Wavelet, color: &str) {
    let not_leader = r#"reason="not_leader""#;
    let skipped = metric(wavelet, "wavelet_changes_skipped_total", not_leader);
    change_config(fake, color);
    wait_for_metric(wavelet, "wavelet_changes_skipped_total", not_leader, |v| {
        v > skipped
    });
}

fn change_config(fake: &FakeApi, color: &str) {
    fake.merge_patch(
        "configmaps",
        NS,
        "app-config",
        json!({"data": {"color": color}}),
    );
}

/// The voluntary context switches of each thread of process `pid` named `name` (a thread
/// that sleeps and wakes adds one per wake-up), summed.
fn wake_ups(pid: u32, name: &str) -> u64 {
    let (mut total, mut found) = (0, false);
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).expect("/proc") {
        let dir = task.unwrap().path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if comm.trim() != name {
            continue;
        }
        found = true;
        let status = std::fs::read_to_string(dir.join("status")).unwrap_or_default();
        total += status
            .lines()
            .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(0);
    }
    assert!(found, "no thread {name} in process {pid}");
    total
}

/// Issue 31 item 8: the idle main thread slept in 50 ms polls of the stop flag and a
/// standby's workers in 100 ms polls of the gate: 20 and 10 wake-ups a second each, for
/// nothing. Now each sleeps until its deadline or a stop; over two idle seconds neither
/// wakes more than a few times.
#[test]
fn an_idle_main_thread_and_a_standby_s_workers_sleep_without_polling() {
    let fake = fake_with_web();
    let (_leader, standby) = two_replicas(&fake);
    let pid = standby.pid();
    let threads = ["wavelet", "worker-0"];
    let before: Vec<u64> = threads.iter().map(|t| wake_ups(pid, t)).collect();
    std::thread::sleep(Duration::from_secs(2));
    for (thread, before) in threads.iter().zip(before) {
        let woke = wake_ups(pid, thread) - before;
        assert!(woke <= 4, "{thread} woke {woke} times in 2 idle seconds");
    }
}

#[test]
fn of_two_replicas_only_the_leader_writes() {
    let fake = fake_with_web();
    let (leader, standby) = two_replicas(&fake);
    assert_eq!(value(&scrape(&standby), "wavelet_ready", &[]), 1.0);
    assert_eq!(standby.http_get("/readyz").0, 200, "a standby is ready");
    change_config(&fake, "green");
    eventually(&fake, &leader, "rollout", |f| {
        f.revisions("deployments", NS, "web") == 2
    });
    // The standby saw the change too: its work waits in its queue for a leader term.
    wait_for_metric(
        &standby,
        "wavelet_work_queue_depth",
        r#"mode="hash""#,
        |v| v >= 1.0,
    );
    assert_eq!(template_patches(&fake, "deployments", NS, "web"), 1);
    assert!(
        leader.wait_for_output("rolled:", Duration::from_secs(5)),
        "{}",
        leader.output()
    );
    let standby_output = standby.output();
    assert!(
        !standby_output.contains("rolled:") && !standby_output.contains("adopted with"),
        "the standby wrote:\n{standby_output}"
    );
    // The rollout's metric is counted just after its log line: wait for it.
    wait_for_metric(
        &leader,
        "wavelet_rollouts_total",
        r#"kind="Deployment",result="rolled""#,
        |v| v == 1.0,
    );
    let writes = |s: &[Sample]| value(s, "wavelet_rollouts_total", &[]);
    assert_eq!(writes(&scrape(&standby)), 0.0);
    assert_eq!(writes(&scrape(&leader)), 2.0, "adoption and rollout");
}

#[test]
fn when_the_leader_is_killed_the_standby_takes_over_within_the_lease_duration() {
    let fake = fake_with_web();
    let (leader, standby) = two_replicas(&fake);
    let killed = Instant::now();
    leader.kill();
    assert!(
        standby.wait_for_output("acquired Lease", Duration::from_secs(10)),
        "{}",
        standby.output()
    );
    let took = killed.elapsed();
    // Lease duration + retry period, plus the standby's up to 2.2 retry periods of
    // staleness in seeing the last renewal and the attempt's jitter.
    assert!(
        took < Duration::from_millis(2000 + 300 + 2 * 660 + 500),
        "took over after {took:?}"
    );
    change_config(&fake, "green");
    eventually(&fake, &standby, "rollout by the new leader", |f| {
        f.revisions("deployments", NS, "web") == 2
    });
    // The log line follows the patch.
    assert!(
        standby.wait_for_output("rolled:", Duration::from_secs(5)),
        "{}",
        standby.output()
    );
}

#[test]
fn sigterm_releases_the_lease_and_a_change_during_the_handover_applies_once() {
    let fake = fake_with_web();
    let (mut leader, standby) = two_replicas(&fake);
    let transitions = fake.get("leases", NS, "wavelet").unwrap()["spec"]["leaseTransitions"]
        .as_u64()
        .unwrap();
    let sent = Instant::now();
    leader.signal("TERM");
    change_config(&fake, "green");
    let status = leader.wait_exit(Duration::from_secs(3));
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(0),
        "{}",
        leader.output()
    );
    assert!(
        leader.output().contains("released Lease"),
        "{}",
        leader.output()
    );
    assert!(
        standby.wait_for_output("acquired Lease", Duration::from_secs(3)),
        "{}",
        standby.output()
    );
    assert!(
        sent.elapsed() < Duration::from_secs(3),
        "{:?}",
        sent.elapsed()
    );
    let holder = lease_holder(&fake);
    assert!(
        !holder.is_empty()
            && standby
                .output()
                .contains(&format!("{holder} acquired Lease")),
        "holder {holder:?}:\n{}",
        standby.output()
    );
    assert_eq!(
        fake.get("leases", NS, "wavelet").unwrap()["spec"]["leaseTransitions"].as_u64(),
        Some(transitions + 1)
    );
    eventually(&fake, &standby, "the change rolled out", |f| {
        f.revisions("deployments", NS, "web") == 2
    });
    // The old leader has exited; the new one saw its rollout and has nothing left to do.
    wait_until_up_to_date(&standby, "deployment default/web", 1);
    assert_eq!(
        template_patches(&fake, "deployments", NS, "web"),
        1,
        "{}",
        standby.output()
    );
    assert_eq!(
        hashes(&fake, "deployments", NS, "web", HASH).0.unwrap(),
        expected_hash(&fake, "deployments", NS, "web")
    );
}

/// Regression (issue 26, item 4): the renew deadline was measured from when a renewal's
/// response arrived, and a Lease request could wait up to the client's 90 s receive
/// timeout. A renewal the server applied but answered 4 s late reopened the old leader's
/// gate for a renew deadline after the standby had taken over: both reported
/// `wavelet_leader 1` (1.4 s measured). Now the deadline counts from when the request was
/// sent and each Lease request is cut at the deadline, as client-go's renew context does.
#[test]
fn a_renewal_answered_late_never_reopens_the_old_leaders_gate() {
    let fake = fake_with_web();
    let (leader, standby) = two_replicas(&fake);
    fake.inject(Fault::LateResponse {
        method: "PUT".into(),
        resource: "leases".into(),
        delay: Duration::from_secs(4),
    });
    // When both reported wavelet_leader 1, as time since the late renewal was sent.
    let mut both: Vec<Duration> = Vec::new();
    let mut sent = Instant::now();
    let mut check = |sent: Instant| {
        if is_leader(&leader) && is_leader(&standby) {
            both.push(sent.elapsed());
        }
    };
    // The leader's next renewal takes the fault: applied at once, answered 4 s later.
    while fake.pending_faults() > 0 {
        check(sent);
        std::thread::sleep(Duration::from_millis(20));
        sent = Instant::now();
    }
    // The late answer arrives 4 s after `sent`; a gate it reopened would stay open for the
    // renew deadline (1.5 s) after that. Watch the whole window and a margin. (Before the
    // fix, the standby took over while the old leader waited for the answer.)
    while sent.elapsed() < Duration::from_millis(4000 + 1500 + 1000) {
        check(sent);
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        both.is_empty(),
        "both replicas reported wavelet_leader 1 in {} samples, from {:?} to {:?} after the late renewal was sent\nold leader:\n{}\n---\nstandby:\n{}",
        both.len(),
        both.first(),
        both.last(),
        leader.output(),
        standby.output()
    );
    // The renewal was cut at the deadline: the old leader stopped writing then, whoever
    // leads now.
    assert!(
        leader.output().contains("stopped writing"),
        "{}",
        leader.output()
    );
    assert_eq!(
        u8::from(is_leader(&leader)) + u8::from(is_leader(&standby)),
        1,
        "one leader in the end"
    );
}

/// Out of a cluster with `--server` (no in-cluster namespace, no kubeconfig context) the
/// Lease goes where kubectl would put a namespaced object, `default`, and the start says so
/// and names the flag that moves it. It was a start-up error.
#[test]
fn leader_election_out_of_cluster_keeps_its_lease_in_default_and_says_so() {
    let fake = fake_with_web();
    fake.apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}));
    let args: Vec<&str> = ELECT
        .iter()
        .copied()
        .filter(|a| *a != "--lease-namespace" && *a != NS)
        .chain(FAST.iter().copied())
        .collect();
    let wavelet = Wavelet::start(&fake, &args);
    assert!(
        wavelet.wait_for_output(
            "leader election: Lease default/wavelet (kubectl's default",
            Duration::from_secs(10)
        ),
        "{}",
        wavelet.output()
    );
    assert!(wavelet.output().contains("--lease-namespace sets another"));
    eventually(&fake, &wavelet, "the Lease held in default", |f| {
        f.get("leases", "default", "wavelet").is_some_and(|l| {
            l["spec"]["holderIdentity"]
                .as_str()
                .is_some_and(|h| !h.is_empty())
        })
    });
}

#[test]
fn a_leader_that_cannot_renew_within_the_deadline_stops_writing() {
    let fake = fake_with_web();
    let wavelet = Wavelet::start(&fake, &elect_args());
    eventually(&fake, &wavelet, "adoption", |f| {
        hashes(f, "deployments", NS, "web", HASH).1.is_some()
    });
    refuse_lease_renewals(&fake);
    let failing = Instant::now();
    assert!(
        wavelet.wait_for_output("stopped writing", Duration::from_secs(5)),
        "{}",
        wavelet.output()
    );
    // Renew deadline 1.5s, noticed on the next retry (300ms).
    assert!(
        failing.elapsed() < Duration::from_millis(2500),
        "{:?}",
        failing.elapsed()
    );
    assert_eq!(value(&scrape(&wavelet), "wavelet_leader", &[]), 0.0);
    change_while_not_leading(&fake, &wavelet, "green");
    assert_eq!(
        template_patches(&fake, "deployments", NS, "web"),
        0,
        "{}",
        wavelet.output()
    );
}

/// A leader term that ends and comes back: the change seen between the two terms is
/// neither lost (the key waits for the next term) nor rolled twice.
#[test]
fn a_change_seen_between_two_leader_terms_rolls_once_when_the_lease_comes_back() {
    let fake = fake_with_web();
    let wavelet = Wavelet::start(&fake, &elect_args());
    eventually(&fake, &wavelet, "adoption", |f| {
        hashes(f, "deployments", NS, "web", HASH).1.is_some()
    });
    refuse_lease_renewals(&fake);
    assert!(
        wavelet.wait_for_output("stopped writing", Duration::from_secs(5)),
        "{}",
        wavelet.output()
    );
    change_while_not_leading(&fake, &wavelet, "green");
    assert_eq!(template_patches(&fake, "deployments", NS, "web"), 0);

    // The Lease can be renewed again: a new term, in which the skipped change rolls.
    fake.heal();
    eventually(
        &fake,
        &wavelet,
        "the change rolled in the new term",
        web_on_its_current_configuration,
    );
    assert!(is_leader(&wavelet), "{}", wavelet.output());
    // The next change rolls once more: a second rollout of the first would show as a
    // third patch, or end on its hash.
    change_config(&fake, "blue");
    eventually(
        &fake,
        &wavelet,
        "the next change rolled",
        web_on_its_current_configuration,
    );
    assert_eq!(
        template_patches(&fake, "deployments", NS, "web"),
        2,
        "{}",
        wavelet.output()
    );
}

/// A leader that loses its term while another replica rolls a change, then leads again,
/// rolls nothing for that change: what it remembered of `web` is older than what the other
/// leader wrote, and it must go by what is there now.
#[test]
fn a_leader_frozen_while_the_other_rolls_a_change_rolls_nothing_for_it_when_it_leads_again() {
    let fake = fake_with_web();
    let (a, mut b) = two_replicas(&fake);
    // A freezes (a long pause, a stopped node): B takes over and rolls a change.
    a.signal("STOP");
    assert!(
        b.wait_for_output("acquired Lease", Duration::from_secs(10)),
        "{}",
        b.output()
    );
    change_config(&fake, "green");
    eventually(
        &fake,
        &b,
        "B rolled the change",
        web_on_its_current_configuration,
    );
    assert_eq!(template_patches(&fake, "deployments", NS, "web"), 1);
    // A wakes up as a standby; B drains and releases the Lease; A leads again.
    lead_again(&a, &mut b);
    // The positive signal: A rolls the next change. Had it rolled green again, that would
    // be a third patch (or the last hash green's).
    change_config(&fake, "blue");
    eventually(
        &fake,
        &a,
        "A rolled the next change",
        web_on_its_current_configuration,
    );
    assert_eq!(
        template_patches(&fake, "deployments", NS, "web"),
        2,
        "{}",
        a.output()
    );
}

#[test]
fn a_dry_run_replica_never_takes_the_lease_from_the_real_controller() {
    let fake = fake_with_web();
    let mut args = elect_args();
    args.push("--dry-run");
    let dry = Wavelet::start(&fake, &args);
    assert!(
        dry.wait_for_output("would adopt", Duration::from_secs(10)),
        "a dry run decides as if leader:\n{}",
        dry.output()
    );
    assert!(
        fake.get("leases", NS, "wavelet").is_none(),
        "no Lease written"
    );
    let real = Wavelet::start(&fake, &elect_args());
    eventually(&fake, &real, "the real controller leads and adopts", |f| {
        hashes(f, "deployments", NS, "web", HASH).1.is_some()
    });
    assert!(is_leader(&real));
    assert!(!lease_holder(&fake).is_empty());
    drop(dry);
}

#[test]
fn a_secret_whose_read_is_refused_shows_as_a_pending_read_until_it_succeeds() {
    let fake = FakeApi::start();
    fake.apply(secret(NS, "creds", &[("password", "hunter2")]));
    let wavelet = Wavelet::start(&fake, FAST);
    // Every GET of the Secret refused, as without `get` on secrets in the RBAC. (Used only
    // by a workload created after the initial sync, whose watch of Secrets did not keep
    // it: read with a GET.)
    fake.inject(crate::fake::Fault::Status {
        method: "GET_OBJECT".into(),
        resource: "secrets".into(),
        code: 403,
        retry_after_secs: None,
        times: 3,
        plain_text: false,
    });
    let spec = json!({"containers": [{"name": "app", "image": "nginx",
        "envFrom": [{"secretRef": {"name": "creds"}}]}]});
    fake.apply(workload("Deployment", NS, "web", opted_in(), spec));
    scrape_until(&wavelet, "a pending Secret read", |s| {
        value(s, "wavelet_secret_reads_pending", &[]) == 1.0
    });
    assert!(
        wavelet.wait_for_output("wavelet needs `get` on secrets", Duration::from_secs(5)),
        "{}",
        wavelet.output()
    );
    eventually(&fake, &wavelet, "adoption once the read succeeds", |f| {
        hashes(f, "deployments", NS, "web", HASH).1.is_some()
    });
    scrape_until(&wavelet, "no pending Secret read", |s| {
        value(s, "wavelet_secret_reads_pending", &[]) == 0.0
    });
}

/// Regression: the endpoints were served one connection at a time, each held up to 2 s
/// reading, so three half-open connections made every probe wait ~6 s (the kubelet's
/// probe timeout is 1 s) and a healthy wavelet was restarted.
#[test]
fn probes_answer_within_a_second_while_slow_connections_are_open() {
    use std::io::Write;
    let fake = fake_with_web();
    let wavelet = Wavelet::start(&fake, FAST);
    let addr = wavelet.http_addr();
    let stalled: Vec<std::net::TcpStream> = (0..3)
        .map(|_| {
            let mut s = std::net::TcpStream::connect(&addr).unwrap();
            s.write_all(b"GET /hea").unwrap();
            s
        })
        .collect();
    // No wait for them to be accepted: the kernel completes connections in order and the
    // server accepts them in that order, so the three stalled ones come before the probes.
    for path in ["/healthz", "/readyz", "/metrics"] {
        let started = Instant::now();
        let (code, _) = wavelet.http_get(path);
        let took = started.elapsed();
        assert_eq!(code, 200, "{path}");
        assert!(took < Duration::from_secs(1), "{path} took {took:?}");
    }
    drop(stalled);
}

/// A client that sends its request one byte at a time holds its own connection's thread
/// only: the probes are answered meanwhile.
#[test]
fn probes_answer_within_a_second_while_a_client_trickles_its_request() {
    use std::io::Write;
    let fake = fake_with_web();
    let wavelet = Wavelet::start(&fake, FAST);
    let addr = wavelet.http_addr();
    let (sent, first_byte) = std::sync::mpsc::channel();
    let slow = std::thread::spawn(move || {
        let mut stream = std::net::TcpStream::connect(addr).unwrap();
        // Pacing only: one byte every 300 ms, so the head would take ~10 s.
        for (i, byte) in b"GET /metrics HTTP/1.1\r\nHost: test\r\n\r\n"
            .iter()
            .enumerate()
        {
            if stream.write_all(&[*byte]).is_err() {
                return;
            }
            if i == 0 {
                sent.send(()).unwrap();
            }
            std::thread::sleep(Duration::from_millis(300));
        }
    });
    first_byte.recv().unwrap();
    for path in ["/healthz", "/readyz", "/metrics"] {
        let started = Instant::now();
        let (code, _) = wavelet.http_get(path);
        let took = started.elapsed();
        assert_eq!(code, 200, "{path}");
        assert!(took < Duration::from_secs(1), "{path} took {took:?}");
    }
    slow.join().unwrap();
}

/// A standby whose ConfigMap watch went silent becomes leader after the leader rolled a
/// change: its cache still holds the data from before it, so the hash it computes differs
/// from the one the workload records. That is the cache's lag, not a change: no rollout
/// (back to the old hash, then forward again when the watch catches up). To find the lag
/// it reads from etcd the object the record differs on, and not `web`'s other ConfigMap,
/// which did not change.
#[test]
fn a_new_leader_whose_cache_is_behind_the_workloads_record_rolls_nothing() {
    let fake = FakeApi::start();
    fake.apply(configmap(NS, "app-config", &[("color", "blue")]));
    // The unchanged one comes first, by name and in the pod spec.
    fake.apply(configmap(NS, "a-defaults", &[("size", "small")]));
    let mut pod_spec = mounts_configmap("a-defaults");
    pod_spec["containers"][0]["envFrom"] = json!([{"configMapRef": {"name": "app-config"}}]);
    fake.apply(workload("Deployment", NS, "web", opted_in(), pod_spec));
    // The standby's first list is then a LIST, and its watch the request that stalls.
    fake.disable_watch_list();
    let a = Wavelet::start(&fake, &elect_args());
    eventually(&fake, &a, "adoption", |f| {
        hashes(f, "deployments", NS, "web", HASH).1.is_some()
    });
    let b = standby_with_stalled_configmaps(&fake, &elect_args());
    assert!(is_leader(&a), "{}", a.output());

    change_config(&fake, "green");
    eventually(&fake, &a, "rollout", |f| {
        f.revisions("deployments", NS, "web") == 2
    });
    let rolled = hashes(&fake, "deployments", NS, "web", HASH).0;
    let patches = template_patches(&fake, "deployments", NS, "web");
    let mark = b.log_mark();
    let before_hand_over = fake.request_count();
    hand_over(a, &b);
    // The new leader reconciles the workload from its cache (blue) against its record (green).
    let decided = |output: &str| {
        output[mark..].lines().any(|line| {
            ["UpToDate", "Rolled", "Recorded", "AwaitingData"]
                .iter()
                .any(|outcome| says(line, "deployment default/web", outcome))
        })
    };
    eventually(&fake, &b, "the new leader's decision about web", |_| {
        decided(&b.output())
    });
    let reads_of = |name: &str| {
        let field = format!("metadata.name={name}");
        fake.count_since(before_hand_over, |r| {
            r.method == "GET"
                && r.path == "/api/v1/namespaces/default/configmaps"
                && r.query_param("fieldSelector") == Some(field.as_str())
        })
        .1
    };
    assert!(reads_of("app-config") >= 1, "{}", b.output());
    assert_eq!(reads_of("a-defaults"), 0, "{}", b.output());
    assert_eq!(hashes(&fake, "deployments", NS, "web", HASH).0, rolled);
    assert_eq!(
        template_patches(&fake, "deployments", NS, "web"),
        patches,
        "{}",
        b.output()
    );

    // The watch goes on and brings green: what the workload records.
    fake.heal();
    change_config(&fake, "red");
    eventually(&fake, &b, "the rollout of the next change", |f| {
        f.revisions("deployments", NS, "web") == 3
    });
    assert_eq!(
        template_patches(&fake, "deployments", NS, "web"),
        patches + 1,
        "{}",
        b.output()
    );
}
