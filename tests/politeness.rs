//! Polite at scale (issue 27): a client-side budget on every request that a 429 with
//! `Retry-After` slows as a whole; Warning Events aggregated rather than posted in bursts,
//! and not posted again after a restart; the throttle counter counting each change once,
//! with the `WaveletRolloutsThrottled` expression false for one large fan-out; and one
//! cluster-wide watch per resource for many `--namespaces`.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::fake::{FakeApi, Fault, Request};
use crate::util::*;

const NS: &str = "load";
const HASH: &str = "wavelet.dev/config-hash";
const WORKLOADS: &str = "statefulsets";

/// `count` opted-in StatefulSets `web-N` in [`NS`] that mount ConfigMap `shared`, which
/// exists; with `adopted`, each already carries the hash of `shared` on its metadata and
/// template (nothing to adopt at start). StatefulSets: the fake's controller gives a
/// Deployment a ReplicaSet and Pods, which thousands of them make slow to load.
fn fan_out(fake: &FakeApi, count: usize, adopted: bool) {
    fake.apply(configmap(NS, "shared", &[("color", "blue")]));
    let object = |n: usize| {
        workload(
            "StatefulSet",
            NS,
            &format!("web-{n}"),
            opted_in(),
            mounts_configmap("shared"),
        )
    };
    fake.apply(object(0));
    let hash = expected_hash(fake, WORKLOADS, NS, "web-0");
    fake.apply_all((0..count).map(|n| {
        let mut object = object(n);
        if adopted {
            object["metadata"]["annotations"][HASH] = json!(hash);
            object["spec"]["template"]["metadata"]["annotations"] = json!({ HASH: hash });
        }
        object
    }));
}

/// When each request matching `pick` reached the fake, in order.
fn arrivals(fake: &FakeApi, pick: impl Fn(&Request) -> bool) -> Vec<Instant> {
    fake.requests()
        .iter()
        .filter(|r| pick(r))
        .map(|r| r.received)
        .collect()
}

fn is_workload_patch(r: &Request) -> bool {
    r.method == "PATCH" && r.path.contains("/statefulsets/")
}

/// Requests the budget holds: everything but watches.
fn is_budgeted(r: &Request) -> bool {
    !r.query.iter().any(|(k, v)| k == "watch" && v == "true")
}

/// The most requests in any `window` among `times` (sorted).
fn most_in_window(times: &[Instant], window: Duration) -> usize {
    let mut most = 0;
    let mut start = 0;
    for end in 0..times.len() {
        while times[end] - times[start] >= window {
            start += 1;
        }
        most = most.max(end - start + 1);
    }
    most
}

/// The default budget (20 requests a second, a burst of 30) holds adoption's PATCHes to
/// it; every third PATCH answered 429 with `Retry-After: 5` pauses every writer for 5 s,
/// not just the key that got it; and a 429 is not a failed rollout.
#[test]
fn a_429_with_retry_after_slows_every_writer_and_writes_stay_within_the_budget() {
    let fake = FakeApi::start();
    fan_out(&fake, 2_000, false);
    fake.inject(Fault::EveryNth {
        method: "PATCH".into(),
        resource: WORKLOADS.into(),
        n: 3,
        code: 429,
        retry_after_secs: 5,
        seen: 0,
    });
    let wavelet = Wavelet::start(&fake, FAST);

    // Two 429s (the 3rd and 6th PATCH), then a PATCH sent once the second one's pause is
    // over: the positive signal before looking for PATCHes sent during the pauses.
    let paused = |f: &FakeApi| {
        let patches = arrivals(f, is_workload_patch);
        patches.len() > 6 && *patches.last().unwrap() > patches[5] + Duration::from_millis(4_750)
    };
    eventually(
        &fake,
        &wavelet,
        "a PATCH after the second 429's pause",
        paused,
    );
    let patches = arrivals(&fake, is_workload_patch);
    for refused in [2, 5] {
        let at = patches[refused];
        // Requests already on their way when the 429 came back may land just after it;
        // none is sent from then until the Retry-After has passed.
        let during: Vec<Duration> = patches
            .iter()
            .filter(|t| **t > at + Duration::from_millis(250))
            .map(|t| *t - at)
            .filter(|d| *d < Duration::from_millis(4_750))
            .collect();
        assert!(
            during.is_empty(),
            "PATCHes {during:?} after the 429 of PATCH #{}: every writer should wait 5 s\n{}",
            refused + 1,
            wavelet.output()
        );
    }
    assert!(wavelet.output().contains("every request waits 5s"));
    assert_eq!(
        metric(
            &wavelet,
            "wavelet_rollouts_total",
            r#"kind="StatefulSet",result="error""#
        ),
        0.0,
        "a 429 is not a failed rollout"
    );
    assert!(
        metric(
            &wavelet,
            "wavelet_api_requests_total",
            r#"verb="patch",code="429""#
        ) >= 2.0
    );
    assert!(!wavelet.output().contains("reconcile failed"));

    // Without 429s, adoption runs at the budget: never more than the burst plus the rate
    // in any second, and close to the rate over several.
    fake.heal();
    let healed = Instant::now();
    eventually(&fake, &wavelet, "adoption at full speed for 3 s", |f| {
        arrivals(f, is_workload_patch)
            .iter()
            .filter(|t| **t > healed)
            .count()
            >= 70
    });
    let budgeted = arrivals(&fake, is_budgeted);
    let peak = most_in_window(&budgeted, Duration::from_secs(1));
    assert!(
        peak <= 20 + 30,
        "{peak} requests in one second: more than --api-qps 20 + --api-burst 30"
    );
    let after: Vec<Instant> = arrivals(&fake, is_workload_patch)
        .into_iter()
        .filter(|t| *t > healed)
        .collect();
    let steady = most_in_window(&after, Duration::from_secs(2));
    assert!(
        steady <= 2 * 20 + 30,
        "{steady} PATCHes in 2 s: more than the budget allows"
    );
    assert!(
        metric(&wavelet, "wavelet_api_budget_wait_seconds_total", "") > 1.0,
        "the waits are counted"
    );
}

// ---------------------------------------------------------------------------------------
// The throttle counter and the WaveletRolloutsThrottled expression

/// One scrape of `/metrics`: when, and each sample as `name{labels}` → value.
struct Scrape {
    at: Instant,
    samples: std::collections::BTreeMap<String, f64>,
}

fn scrape(wavelet: &Wavelet) -> Scrape {
    let (code, body) = wavelet.http_get("/metrics");
    assert_eq!(code, 200, "{body}");
    let samples = body
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            Some((series.to_string(), value.parse().ok()?))
        })
        .collect();
    Scrape {
        at: Instant::now(),
        samples,
    }
}

/// A tiny PromQL evaluator for exactly the constructs the shipped WaveletRolloutsThrottled
/// expression uses: `or`, `and`, parentheses, `sum|min|max by (...) (...)`, instant
/// selectors, `rate`, `delta`, `increase`, `min_over_time` and `max_over_time` of a
/// selector over a range, and `>` / `>=` against a number or another expression. wavelet is one target, so every vector holds at most one series and a
/// value is `None` (empty) or `Some`. Labels Prometheus adds (`job`) are not matched;
/// ranges are divided by `scale` (a test cannot wait 15 minutes). As in Prometheus,
/// `rate` and `delta` need two samples in the range, and a missing series is empty.
struct Eval<'a> {
    tokens: Vec<String>,
    at: usize,
    scrapes: &'a [Scrape],
    now: Instant,
    scale: f64,
}

fn tokenize(expr: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    let chars: Vec<char> = expr.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c == '{' || c == '[' {
            let close = if c == '{' { '}' } else { ']' };
            let end = i + chars[i..].iter().position(|&x| x == close).expect("closed");
            tokens.push(chars[i..=end].iter().collect());
            i = end + 1;
        } else if ">=".contains(c) && chars.get(i + 1) == Some(&'=') {
            tokens.push(chars[i..i + 2].iter().collect());
            i += 2;
        } else if "(),>".contains(c) {
            tokens.push(c.to_string());
            i += 1;
        } else {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || "_:.".contains(chars[i])) {
                i += 1;
            }
            assert!(i > start, "unexpected {c:?} in {expr}");
            tokens.push(chars[start..i].iter().collect());
        }
    }
    tokens
}

impl Eval<'_> {
    fn next(&mut self) -> String {
        self.at += 1;
        self.tokens[self.at - 1].clone()
    }

    fn peek(&self) -> Option<&str> {
        self.tokens.get(self.at).map(String::as_str)
    }

    fn expect(&mut self, token: &str) {
        let got = self.next();
        assert_eq!(got, token, "in {:?}", self.tokens);
    }

    fn or(&mut self) -> Option<f64> {
        let mut left = self.and();
        while self.peek() == Some("or") {
            self.next();
            let right = self.and();
            left = left.or(right);
        }
        left
    }

    fn and(&mut self) -> Option<f64> {
        let mut left = self.compared();
        while self.peek() == Some("and") {
            self.next();
            let right = self.compared();
            left = left.filter(|_| right.is_some());
        }
        left
    }

    fn compared(&mut self) -> Option<f64> {
        let value = self.operand();
        match self.peek() {
            Some(op @ (">" | ">=")) => {
                let op = op.to_string();
                self.next();
                let bound = match self.peek().map(str::parse::<f64>) {
                    Some(Ok(number)) => {
                        self.next();
                        Some(number)
                    }
                    _ => self.operand(),
                };
                let bound = bound?;
                value.filter(|v| if op == ">" { *v > bound } else { *v >= bound })
            }
            _ => value,
        }
    }

    fn operand(&mut self) -> Option<f64> {
        let word = self.next();
        match word.as_str() {
            "(" => {
                let value = self.or();
                self.expect(")");
                value
            }
            "sum" | "min" | "max" => {
                self.expect("by");
                self.expect("(");
                while self.next() != ")" {}
                self.expect("(");
                let value = self.or();
                self.expect(")");
                value
            }
            name if self.peek() != Some("(") => {
                // An instant selector: its latest sample (within the scaled 5-minute
                // lookback).
                let mut selector = name.to_string();
                if self.peek().is_some_and(|t| t.starts_with('{')) {
                    selector.push_str(&self.next());
                }
                let lookback = Duration::from_secs_f64(300.0 / self.scale);
                let series = series_key(&selector);
                self.scrapes
                    .iter()
                    .rev()
                    .filter(|s| s.at <= self.now && self.now - s.at <= lookback)
                    .find_map(|s| s.samples.get(&series).copied())
            }
            function => {
                self.expect("(");
                let mut selector = self.next();
                if self.peek().is_some_and(|t| t.starts_with('{')) {
                    selector.push_str(&self.next());
                }
                let range = self.next();
                self.expect(")");
                self.range_function(function, &selector, &range)
            }
        }
    }

    /// `function(selector[range])` over the scrapes within the (scaled) range.
    fn range_function(&self, function: &str, selector: &str, range: &str) -> Option<f64> {
        let seconds: f64 = {
            let text = range.trim_matches(['[', ']']);
            let (n, unit) = text.split_at(text.len() - 1);
            let n: f64 = n.parse().expect("a range");
            n * match unit {
                "s" => 1.0,
                "m" => 60.0,
                "h" => 3600.0,
                other => panic!("range unit {other}"),
            }
        };
        let window = Duration::from_secs_f64(seconds / self.scale);
        let series = series_key(selector);
        let points: Vec<(Instant, f64)> = self
            .scrapes
            .iter()
            .filter(|s| s.at <= self.now && self.now - s.at <= window)
            .filter_map(|s| Some((s.at, *s.samples.get(&series)?)))
            .collect();
        let (first, last) = (points.first()?, points.last()?);
        match function {
            "min_over_time" => points.iter().map(|p| p.1).reduce(f64::min),
            "max_over_time" => points.iter().map(|p| p.1).reduce(f64::max),
            "delta" | "increase" => (points.len() >= 2).then_some(last.1 - first.1),
            "rate" => {
                (points.len() >= 2).then(|| (last.1 - first.1) / (last.0 - first.0).as_secs_f64())
            }
            other => panic!("the evaluator does not know {other}()"),
        }
    }
}

/// `metric{job="wavelet", reason="x"}` → `metric{reason="x"}` as /metrics exposes it.
fn series_key(selector: &str) -> String {
    let (name, matchers) = match selector.split_once('{') {
        Some((name, rest)) => (name, rest.trim_end_matches('}')),
        None => (selector, ""),
    };
    let own: Vec<String> = matchers
        .split(',')
        .map(str::trim)
        .filter(|m| !m.is_empty() && !m.starts_with("job="))
        .map(|m| m.replace(' ', ""))
        .collect();
    if own.is_empty() {
        name.to_string()
    } else {
        format!("{name}{{{}}}", own.join(","))
    }
}

/// The shipped expression of an alert (monitoring/prometheusrule.yaml).
fn alert_expr(alert: &str) -> String {
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("monitoring/prometheusrule.yaml"),
    )
    .unwrap();
    let rules = wavelet::client::yaml::parse(&text).unwrap();
    rules["spec"]["groups"][0]["rules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["alert"] == alert)
        .and_then(|r| r["expr"].as_str())
        .unwrap_or_else(|| panic!("no alert {alert}"))
        .to_string()
}

/// Evaluates `expr` at the time of each scrape (over the scrapes up to it); whether it
/// held at any of them, and when.
fn held_at(expr: &str, scrapes: &[Scrape], scale: f64) -> Vec<usize> {
    (0..scrapes.len())
        .filter(|&i| {
            let mut eval = Eval {
                tokens: tokenize(expr),
                at: 0,
                scrapes,
                now: scrapes[i].at,
                scale,
            };
            let value = eval.or();
            assert_eq!(eval.at, eval.tokens.len(), "all of {expr} read");
            value.is_some()
        })
        .collect()
}

#[test]
fn the_promql_evaluator_reads_the_throttle_alert_as_prometheus_would() {
    let t0 = Instant::now();
    let at = |ms: u64, waiting: f64, throttled: Option<f64>| {
        let mut samples = std::collections::BTreeMap::new();
        samples.insert("wavelet_rollouts_waiting".to_string(), waiting);
        if let Some(n) = throttled {
            samples.insert(
                r#"wavelet_changes_skipped_total{reason="throttled"}"#.to_string(),
                n,
            );
        }
        Scrape {
            at: t0 + Duration::from_millis(ms),
            samples,
        }
    };
    let expr = alert_expr("WaveletRolloutsThrottled");
    // 1:100, so [15m] is 9 s and [10m] 6 s.
    // Scraped every second, as Prometheus scrapes every 30 s or so into a 15-minute range.
    let draining: Vec<Scrape> = std::iter::once(at(0, 0.0, None))
        .chain((1..30).map(|s| at(s * 1000, 100.0 - s as f64, None)))
        .collect();
    assert_eq!(held_at(&expr, &draining, 100.0), Vec::<usize>::new());
    let stuck = [
        at(0, 100.0, None),
        at(5000, 100.0, None),
        at(10_000, 100.0, None),
    ];
    assert_eq!(held_at(&expr, &stuck, 100.0), [0, 1, 2], "not going down");
    let rising = [
        at(0, 0.0, None),
        at(1000, 50.0, None),
        at(2000, 100.0, None),
        at(10_500, 99.0, None),
        at(11_500, 120.0, None),
    ];
    assert_eq!(
        held_at(&expr, &rising, 100.0),
        [4],
        "a backlog that grows again once the fan-out rose: more than it drains"
    );
    let looping = [
        at(0, 0.0, Some(1.0)),
        at(1000, 0.0, Some(2.0)),
        at(2000, 0.0, Some(2.0)),
    ];
    assert_eq!(
        held_at(&expr, &looping, 100.0),
        [1, 2],
        "a change within --min-rollout-interval in the last 6 s"
    );
}

/// One change to 4,000 workloads at the default storm limits (2 rollouts a second, a
/// burst of 10): each waiting workload counts once, `wavelet_rollouts_waiting` drains at
/// the rate, and the shipped WaveletRolloutsThrottled expression is false at every scrape
/// (its ranges divided by 200: [15m] is 4.5 s, longer than the fan-out takes to queue). Before issue 27 every look at a waiting workload counted
/// (37,830 for 951 workloads in 20 s), and the expression was `rate(throttled) > 0`.
#[test]
fn one_change_to_4000_workloads_counts_each_once_and_does_not_fire_the_throttle_alert() {
    const COUNT: usize = 4_000;
    let fake = FakeApi::start();
    fan_out(&fake, COUNT, true);
    // All at once, as before safe fan-out: this is about the token bucket, not waves.
    let wavelet = Wavelet::start(&fake, &["--debounce", "200ms", "--fan-out", "at-once"]);
    let mut scrapes = vec![scrape(&wavelet)];
    fake.merge_patch(
        "configmaps",
        NS,
        "shared",
        json!({"data": {"color": "green"}}),
    );
    let changed = Instant::now();
    let rolled = r#"kind="StatefulSet",result="rolled""#;
    while changed.elapsed() < Duration::from_secs(7)
        || metric(&wavelet, "wavelet_rollouts_total", rolled) < 20.0
    {
        assert!(
            changed.elapsed() < Duration::from_secs(25),
            "too slow:\n{}",
            wavelet.output()
        );
        std::thread::sleep(Duration::from_millis(250));
        scrapes.push(scrape(&wavelet));
    }
    let value = |s: &Scrape, series: &str| s.samples.get(series).copied().unwrap_or(0.0);
    let counted = |s: &Scrape| {
        value(s, r#"wavelet_changes_skipped_total{reason="throttled"}"#)
            + value(s, r#"wavelet_changes_skipped_total{reason="rate_limited"}"#)
    };
    let last = scrapes.last().unwrap();
    let peak = scrapes
        .iter()
        .map(|s| value(s, "wavelet_rollouts_waiting"))
        .fold(0.0, f64::max);
    assert!(
        peak >= (COUNT - 10 - 30) as f64,
        "the fan-out waits for tokens (peak {peak})"
    );
    assert!(
        counted(last) <= COUNT as f64,
        "{} throttled changes counted for one change to {COUNT} workloads",
        counted(last)
    );
    assert!(counted(last) >= peak, "each waiting workload counted");
    assert!(
        value(last, "wavelet_rollouts_waiting") < peak - 10.0,
        "the backlog drains"
    );
    let expr = alert_expr("WaveletRolloutsThrottled");
    let fired = held_at(&expr, &scrapes, 200.0);
    let series: Vec<String> = scrapes
        .iter()
        .map(|s| {
            format!(
                "{:.1}s: waiting {}, counted {}",
                s.at.saturating_duration_since(changed).as_secs_f64(),
                value(s, "wavelet_rollouts_waiting"),
                counted(s)
            )
        })
        .collect();
    assert!(
        fired.is_empty(),
        "{expr} held at scrapes {fired:?}:\n{}",
        series.join("\n")
    );
}

// ---------------------------------------------------------------------------------------
// Events

fn is_event_request(r: &Request, method: &str) -> bool {
    r.method == method
        && r.path
            .starts_with(&format!("/api/v1/namespaces/{NS}/events"))
}

/// The Event about ConfigMap `shared` (there must be at most one).
fn summary(fake: &FakeApi) -> Option<Value> {
    let events = fake.events_for(NS, "shared");
    assert!(events.len() <= 1, "one Event on the ConfigMap: {events:#?}");
    events.into_iter().next()
}

/// 2,000 workloads lose their ConfigMap: 10 of them get a ConfigMissing Event of their
/// own and one Event on the ConfigMap names all 2,000, with no more than the writer's
/// 5 a second (25 at once) sent; and a restart, which says it all again, finds those
/// Events and adds to their counts instead of posting them anew. Before issue 27: 2,000
/// POSTs in a burst, and 2,000 more after a restart.
#[test]
fn two_thousand_workloads_missing_a_configmap_are_one_event_on_it_and_a_restart_posts_no_second_burst(
) {
    const COUNT: usize = 2_000;
    let fake = FakeApi::start();
    fan_out(&fake, COUNT, true);
    let wavelet = Wavelet::start(&fake, FAST);
    fake.delete("configmaps", NS, "shared");
    let names_all = |f: &FakeApi| {
        summary(f).is_some_and(|e| {
            e["message"]
                .as_str()
                .is_some_and(|m| m.starts_with(&format!("ConfigMissing for {COUNT} objects")))
        })
    };
    let own = |f: &FakeApi| {
        (0..COUNT)
            .filter(|n| !f.events_for(NS, &format!("web-{n}")).is_empty())
            .count()
    };
    eventually(
        &fake,
        &wavelet,
        "one Event naming all 2,000 workloads, and 10 of their own",
        |f| names_all(f) && own(f) >= 10,
    );
    let posts = arrivals(&fake, |r| is_event_request(r, "POST"));
    assert!(posts.len() <= 11, "{} Events posted", posts.len());
    assert_eq!(
        own(&fake),
        10,
        "the first 10 workloads have an Event of their own"
    );
    let requests = arrivals(&fake, |r| r.path.contains("/events"));
    let peak = most_in_window(&requests, Duration::from_secs(1));
    assert!(peak <= 25 + 5, "{peak} Event requests in one second");
    let warned = wavelet
        .output()
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("Not rolling"))
        .count();
    assert!(warned <= 10 + 1, "{warned} warn lines");

    let count_before = summary(&fake).unwrap()["count"].as_u64().unwrap();
    eprintln!(
        "2,000 ConfigMissing: {} Event POSTs, {} Event requests in all, at most {peak} in a second, {warned} warn lines; the summary's count {count_before}",
        posts.len(),
        requests.len()
    );
    drop(wavelet.kill());
    let mark = fake.request_count();
    let wavelet = Wavelet::start(&fake, FAST);
    eventually(
        &fake,
        &wavelet,
        "the Event on the ConfigMap counted again",
        |f| summary(f).is_some_and(|e| e["count"].as_u64().unwrap() > count_before) && names_all(f),
    );
    let after: Vec<Request> = fake
        .requests_since(mark)
        .into_iter()
        .filter(|r| is_event_request(r, "POST"))
        .collect();
    assert_eq!(after.len(), 0, "Events posted after the restart");
    let patches = fake
        .requests_since(mark)
        .into_iter()
        .filter(|r| is_event_request(r, "PATCH"))
        .count();
    eprintln!(
        "after the restart: {} Event POSTs, {patches} PATCHes",
        after.len()
    );
    assert!(patches > 0);
}

/// Events are written by a thread of their own: while the API server takes 5 s to answer
/// one POST of an Event, the workers roll the next workload at once.
#[test]
fn a_slow_events_endpoint_never_holds_a_rollout() {
    let fake = fake_with_web();
    fake.apply(configmap("default", "other-config", &[("v", "1")]));
    fake.apply(workload(
        "Deployment",
        "default",
        "other",
        opted_in(),
        mounts_configmap("other-config"),
    ));
    let wavelet = Wavelet::start(&fake, FAST);
    eventually(&fake, &wavelet, "both adopted", |f| {
        hashes(f, "deployments", "default", "web", HASH).1.is_some()
            && hashes(f, "deployments", "default", "other", HASH)
                .1
                .is_some()
    });
    fake.inject(Fault::Slow {
        method: "POST".into(),
        resource: "events".into(),
        delay: Duration::from_secs(5),
    });
    fake.merge_patch(
        "configmaps",
        "default",
        "app-config",
        json!({"data": {"color": "green"}}),
    );
    eventually(
        &fake,
        &wavelet,
        "the first ConfigChanged Event on its way",
        |f| {
            f.requests()
                .iter()
                .any(|r| r.method == "POST" && r.path.ends_with("/events"))
        },
    );
    let started = Instant::now();
    fake.merge_patch(
        "configmaps",
        "default",
        "other-config",
        json!({"data": {"v": "2"}}),
    );
    eventually(&fake, &wavelet, "the second rollout", |f| {
        template_patches(f, "deployments", "default", "other") == 1
    });
    assert!(
        fake.events_for("default", "web").is_empty(),
        "rolled {:?} after its change, while the first Event was still being written",
        started.elapsed()
    );
    eventually(&fake, &wavelet, "both Events written in the end", |f| {
        !f.events_for("default", "web").is_empty() && !f.events_for("default", "other").is_empty()
    });
}

/// StatefulSets `<prefix>-N` in `ns` (a Namespace created first), each opted in and
/// mounting a ConfigMap of its own that does not exist: each is held with a ConfigMissing
/// Warning whose cause is its own ConfigMap (an Event of its own and a summary each).
fn missing_their_configmaps(fake: &FakeApi, ns: &str, prefix: &str, count: usize) {
    fake.apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}));
    fake.apply_all((0..count).map(|n| {
        workload(
            "StatefulSet",
            ns,
            &format!("{prefix}-{n}"),
            opted_in(),
            mounts_configmap(&format!("{prefix}-config-{n}")),
        )
    }));
}

/// The sum of the counts of the `reason` Events about `name`.
fn counted(fake: &FakeApi, ns: &str, name: &str, reason: &str) -> u64 {
    fake.events_for(ns, name)
        .iter()
        .filter(|e| e["reason"] == reason)
        .map(|e| e["count"].as_u64().unwrap_or(1))
        .sum()
}

/// Regression (issue 33, item 7): the spam filter (25 Events per object at once, then one
/// every 5 minutes) dropped rollout Events: a ConfigMap edited 30 times left 25
/// `ConfigChanged` records for 30 rollouts. Rollout Events are never filtered; the same
/// one again is one more occurrence of its series.
#[test]
fn every_rollout_leaves_a_record_however_often_the_configmap_changes() {
    const EDITS: usize = 30;
    let fake = fake_with_web();
    let wavelet = Wavelet::start(&fake, FAST);
    eventually(&fake, &wavelet, "web adopted", |f| {
        hashes(f, "deployments", "default", "web", HASH).1.is_some()
    });
    for n in 1..=EDITS {
        fake.merge_patch(
            "configmaps",
            "default",
            "app-config",
            json!({"data": {"color": format!("c{n}")}}),
        );
        eventually(&fake, &wavelet, &format!("rollout {n}"), |f| {
            template_patches(f, "deployments", "default", "web") == n
        });
    }
    eventually(
        &fake,
        &wavelet,
        "a ConfigChanged occurrence per rollout",
        |f| counted(f, "default", "web", "ConfigChanged") >= EDITS as u64,
    );
    assert_eq!(
        counted(&fake, "default", "web", "ConfigChanged"),
        EDITS as u64
    );
}

/// Regression (issue 33, item 5): after a namespace was deleted, the Warnings queued for
/// it were still posted one by one, each answered 404 (1 to 2 a second for minutes after
/// 300 namespaces went). Now its queued series are dropped at once: with the Event writer
/// held by a slow request while 20 Warnings about `doomed` wait, deleting the namespace
/// leaves at most the request in flight (and its follow-up) for it.
#[test]
fn the_queued_events_of_a_deleted_namespace_are_dropped_at_once() {
    const HELD: usize = 20;
    let fake = fake_with_web();
    missing_their_configmaps(&fake, "doomed", "w", HELD);
    fake.inject(Fault::Slow {
        method: "GET".into(),
        resource: "events".into(),
        delay: Duration::from_secs(4),
    });
    let wavelet = Wavelet::start(&fake, FAST);
    let said = |w: &Wavelet| {
        w.output()
            .lines()
            .filter(|l| l.contains("statefulset doomed/w-") && l.contains("Not rolling"))
            .count()
    };
    assert!(
        fake.wait_until(Duration::from_secs(15), |_| said(&wavelet) == HELD),
        "{}",
        wavelet.output()
    );
    let mark = fake.request_count();
    fake.delete("namespaces", "", "doomed");
    // The positive signal: a Warning said after the deletion, in another namespace, is
    // written (the writer took every series queued before it).
    fake.apply(workload(
        "Deployment",
        "default",
        "after",
        opted_in(),
        mounts_configmap("after-config"),
    ));
    assert!(
        fake.wait_until(Duration::from_secs(30), |f| !f
            .events_for("default", "after")
            .is_empty()),
        "the later Warning never written:\n{}",
        wavelet.output()
    );
    let doomed: Vec<String> = fake
        .requests_since(mark)
        .iter()
        .filter(|r| r.path.starts_with("/api/v1/namespaces/doomed/events"))
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert!(
        doomed.len() <= 2,
        "{} Event requests for the deleted namespace: {doomed:#?}",
        doomed.len()
    );
}

/// Issue 34 item 5: a namespace being deleted (Terminating) would refuse every Event, so
/// the Events queued there are dropped when the Namespace watch shows it Terminating, not
/// one refused request at a time. The writer is held by a 60 s GET while Warnings about two
/// workloads of `closing` wait; the namespace turns Terminating: the waiting one is dropped
/// (counted as gone) long before the held request ends.
#[test]
fn the_queued_events_of_a_terminating_namespace_are_dropped_when_it_turns_terminating() {
    let fake = FakeApi::start();
    missing_their_configmaps(&fake, "closing", "w", 2);
    fake.inject(Fault::Slow {
        method: "GET".into(),
        resource: "events".into(),
        delay: Duration::from_secs(60),
    });
    let wavelet = Wavelet::start(&fake, FAST);
    let said = |w: &Wavelet| {
        w.output()
            .lines()
            .filter(|l| l.contains("statefulset closing/w-") && l.contains("Not rolling"))
            .count()
    };
    assert!(
        fake.wait_until(Duration::from_secs(15), |_| said(&wavelet) == 2),
        "{}",
        wavelet.output()
    );
    let gone = |w: &Wavelet| metric(w, "wavelet_events_dropped_total", "reason=\"gone\"");
    assert_eq!(gone(&wavelet), 0.0);
    // As the API server shows a namespace whose deletion has begun (its contents not
    // deleted yet).
    fake.apply(json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "closing", "deletionTimestamp": "2026-11-29T07:00:00Z"},
        "status": {"phase": "Terminating"}}));
    assert!(
        fake.wait_until(Duration::from_secs(20), |_| gone(&wavelet) >= 1.0),
        "the Event queued in the Terminating namespace was not dropped:\n{}",
        wavelet.output()
    );
}

/// Regression (issue 33, item 6): a ConfigMissing Warning that could not be queued (the
/// queue holds 1,000 series) was logged at debug and remembered as said, so never said
/// again. Here the writer is held by a slow request while 505 workloads, each missing a
/// ConfigMap of its own, fill the queue (two series each): the last are not queued, are
/// logged at warn, and are said again later, so the same workload is warned about twice.
#[test]
fn a_warning_that_could_not_be_queued_is_logged_at_warn_and_said_again_later() {
    const HELD: usize = 505;
    let fake = FakeApi::start();
    missing_their_configmaps(&fake, NS, "held", HELD);
    fake.inject(Fault::Slow {
        method: "GET".into(),
        resource: "events".into(),
        delay: Duration::from_secs(60),
    });
    let wavelet = Wavelet::start(&fake, FAST);
    let not_queued = |w: &Wavelet| -> Vec<String> {
        w.output()
            .lines()
            .filter(|l| {
                l.contains("WARN")
                    && l.contains("could not queue ConfigMissing Warning on StatefulSet")
            })
            .filter_map(|l| l.split(" on StatefulSet ").nth(1))
            .filter_map(|rest| rest.split(':').next())
            .map(String::from)
            .collect()
    };
    let twice = |w: &Wavelet| {
        let names = not_queued(w);
        names
            .iter()
            .any(|n| names.iter().filter(|m| *m == n).count() >= 2)
    };
    assert!(
        fake.wait_until(Duration::from_secs(45), |_| twice(&wavelet)),
        "no Warning said again after it could not be queued; not queued: {:?}\n{}",
        not_queued(&wavelet),
        wavelet
            .output()
            .lines()
            .rev()
            .take(40)
            .collect::<Vec<_>>()
            .join("\n")
    );
}

// ---------------------------------------------------------------------------------------
// Many namespaces

/// `Threads:` of `/proc/PID/status`.
fn threads(wavelet: &Wavelet) -> usize {
    let status = std::fs::read_to_string(format!("/proc/{}/status", wavelet.pid())).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("a Threads line")
}

/// `--namespaces` with 200 names: one watch per resource over all namespaces, its events
/// kept to those 200 (a workload in another namespace is not even cached), so the threads
/// and connections do not grow with the namespaces; before issue 27, 1,200 watch threads
/// and connections. `--per-namespace-watches` with 200 names is refused, saying what it
/// would cost.
#[test]
fn two_hundred_namespaces_are_watched_once_per_resource_with_few_threads() {
    let fake = FakeApi::start();
    add_web(&fake, "ns-150");
    add_web(&fake, "outside");
    let names: Vec<String> = (0..200).map(|n| format!("ns-{n}")).collect();
    let list = names.join(",");
    let mut args = FAST.to_vec();
    args.extend(["--namespaces", &list]);
    let wavelet = Wavelet::start(&fake, &args);
    eventually(&fake, &wavelet, "web in ns-150 adopted", |f| {
        hashes(f, "deployments", "ns-150", "web", HASH).1.is_some()
    });
    assert!(
        wavelet
            .output()
            .contains("ConfigMaps/Secrets, 1 opted-in workloads"),
        "only the workload in a listed namespace is cached:\n{}",
        wavelet.output()
    );
    for resource in [
        "configmaps",
        "secrets",
        "deployments",
        "statefulsets",
        "daemonsets",
        "cronjobs",
    ] {
        // ConfigMaps: the watch over all namespaces, and the one of wavelet-state itself.
        // (Each watch opens once its list is in, which may come after the adoption.)
        let expected = if resource == "configmaps" { 2 } else { 1 };
        eventually(
            &fake,
            &wavelet,
            &format!("{expected} watches of {resource}"),
            |f| f.open_watches(resource) >= expected,
        );
        assert_eq!(fake.open_watches(resource), expected, "{resource}");
    }
    let threads = threads(&wavelet);
    assert!(threads <= 32, "{threads} threads for 200 namespaces");
    fake.merge_patch(
        "configmaps",
        "ns-150",
        "app-config",
        json!({"data": {"color": "green"}}),
    );
    eventually(&fake, &wavelet, "web in ns-150 rolled", |f| {
        template_patches(f, "deployments", "ns-150", "web") == 1
    });
    assert_eq!(
        hashes(&fake, "deployments", "outside", "web", HASH),
        (None, None),
        "a namespace not listed is left alone"
    );
    eprintln!("200 namespaces: {threads} threads, 1 watch per resource");

    let mut refused = Wavelet::launch(
        &[
            "--server",
            &fake.url(),
            "--namespaces",
            &list,
            "--per-namespace-watches",
        ],
        &[],
    );
    let status = refused.wait_exit(Duration::from_secs(10));
    refused.wait_for_output("at most 100", Duration::from_secs(5));
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(2),
        "{}",
        refused.output()
    );
    assert!(
        refused
            .output()
            .contains("200 namespaces would open 1200 watches"),
        "{}",
        refused.output()
    );
}
