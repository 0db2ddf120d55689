//! Alerts, configured as Stakater Reloader's (`ALERT_ON_RELOAD`, `ALERT_SINK`,
//! `ALERT_WEBHOOK_URL`, `ALERT_WEBHOOK_PROXY`, `ALERT_ADDITIONAL_INFO`) or by wavelet's
//! `--alert-*` flags, each sink with the payload Reloader sends it. Two kinds: one per
//! rollout (`--alert-on-reload`), and one when a fan-out is held and one when that hold
//! ends, resumed or superseded (`--alert-on-hold`, on wherever a URL is set). Off the
//! rollout path: a worker hands an alert to a bounded queue and goes on; one thread sends
//! them, retrying with backoff; when the queue is full the alert is dropped, counted and
//! logged. An alert names workloads, kinds and the ConfigMaps and Secrets concerned, never
//! a value; the webhook URL (which often holds a token) is never logged.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crate::config::{AlertConfig, AlertSink};
use crate::error::Error;
use crate::objects::{ConfigKey, ConfigKind};
use crate::ops::metrics;
use crate::stop::Stop;

/// Attempts per alert: the first and three retries, 1 s, 2 s and 4 s apart.
const ATTEMPTS: u32 = 4;
const FIRST_RETRY: Duration = Duration::from_secs(1);
/// One attempt, connection included, at most.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);

/// One rollout to alert about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rollout {
    /// The workload's kind as the API names it (`Deployment`).
    pub kind: String,
    pub namespace: String,
    pub name: String,
    /// What changed; empty when the change was made while wavelet was not running.
    pub changed: Vec<ConfigKey>,
    /// `--dry-run`: nothing was written.
    pub dry_run: bool,
}

/// A fan-out hold that began or ended, to alert on-call about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FanOutNotice {
    /// The ConfigMap/Secret whose change fans out; `None` when its entry's key shortened a
    /// long name to a digest (the entry's key is in `entry`).
    pub object: Option<ConfigKey>,
    /// The `wavelet-state` key of the fan-out.
    pub entry: String,
    /// The change's hash, shortened.
    pub change: String,
    pub what: FanOutEvent,
}

/// What happened to a fan-out's hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FanOutEvent {
    /// Held: `workload` (`deployment shop/web`) failed for `reason`.
    Held { workload: String, reason: String },
    /// `wavelet resume` went on past `workload`.
    Resumed { workload: String },
    /// A newer change (`by`, shortened) replaced it with a fan-out of its own.
    Superseded { by: String },
    /// Its entry is gone: the object was deleted, or its fan-out ended otherwise.
    Cleared,
}

/// One alert of either kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Alert {
    Rollout(Rollout),
    FanOut(Box<FanOutNotice>),
}

impl Alert {
    /// What the alert is about, for the log.
    fn about(&self) -> String {
        match self {
            Alert::Rollout(r) => {
                format!("{} {}/{}", r.kind.to_ascii_lowercase(), r.namespace, r.name)
            }
            Alert::FanOut(n) => match &n.object {
                Some(o) => format!("{o}'s fan-out"),
                None => format!("fan-out {}", n.entry),
            },
        }
    }

    /// Slack's attachment colour: `danger` for a hold, else `good`.
    fn color(&self) -> &'static str {
        match self {
            Alert::FanOut(n) if matches!(n.what, FanOutEvent::Held { .. }) => "danger",
            _ => "good",
        }
    }

    fn message(&self, additional_info: Option<&str>) -> String {
        match self {
            Alert::Rollout(r) => message(r, additional_info),
            Alert::FanOut(n) => fan_out_message(n, additional_info),
        }
    }
}

/// The sentence of a fan-out notice, Reloader's style (`*name*` in bold): which change,
/// which workload failed and why, and how to go on. Names only.
pub fn fan_out_message(notice: &FanOutNotice, additional_info: Option<&str>) -> String {
    let (object, resume) = match &notice.object {
        Some(o) => (
            format!(
                "*{}* of type *{}* in namespace *{}*",
                o.name,
                o.kind.as_str().to_ascii_uppercase(),
                o.namespace
            ),
            format!(
                "wavelet resume -n {} {}/{}",
                o.namespace,
                o.kind.as_str(),
                o.name
            ),
        ),
        None => (
            format!("*{}*", notice.entry),
            "wavelet status, then wavelet resume -n NAMESPACE KIND/NAME".to_string(),
        ),
    };
    let change = &notice.change;
    let text = match &notice.what {
        FanOutEvent::Held { workload, reason } => format!(
            "wavelet held the fan-out of change *{change}* in {object}: *{workload}* failed: {reason}. The workloads not rolled yet wait. To go on: fix the object (its next change starts a new fan-out), or roll the rest anyway with `{resume}`"
        ),
        FanOutEvent::Resumed { workload } => format!(
            "wavelet resumed the fan-out of change *{change}* in {object} past *{workload}*: the rest roll in waves, each after the one before is healthy"
        ),
        FanOutEvent::Superseded { by } => format!(
            "wavelet no longer holds the fan-out of change *{change}* in {object}: change *{by}* superseded it and fans out on its own"
        ),
        FanOutEvent::Cleared => format!(
            "wavelet no longer holds the fan-out of change *{change}* in {object}: its record is gone (the object was deleted, or its fan-out ended)"
        ),
    };
    match additional_info {
        Some(info) => format!("{} : {text}", info.trim()),
        None => text,
    }
}

/// Reloader's sentence, with wavelet as its subject: "wavelet detected changes in *app* of
/// type *CONFIGMAP* in namespace *shop*. Hence reloaded *web* of type *Deployment* in
/// namespace *shop*", after `additional_info : ` when there is one. Names only.
pub fn message(rollout: &Rollout, additional_info: Option<&str>) -> String {
    let objects: Vec<String> = rollout
        .changed
        .iter()
        .map(|key| {
            let kind = match key.kind {
                ConfigKind::ConfigMap => "CONFIGMAP",
                ConfigKind::Secret => "SECRET",
                ConfigKind::SecretProviderClass => "SECRETPROVIDERCLASS",
            };
            format!(
                "*{}* of type *{kind}* in namespace *{}*",
                key.name, key.namespace
            )
        })
        .collect();
    let what = if objects.is_empty() {
        format!(
            "changes, made while it was not running, in the configuration of *{}*",
            rollout.name
        )
    } else {
        format!("changes in {}", objects.join(" and "))
    };
    let done = if rollout.dry_run {
        "Dry run: would have reloaded"
    } else {
        "Hence reloaded"
    };
    let text = format!(
        "wavelet detected {what}. {done} *{}* of type *{}* in namespace *{}*",
        rollout.name, rollout.kind, rollout.namespace
    );
    match additional_info {
        Some(info) => format!("{} : {text}", info.trim()),
        None => text,
    }
}

/// The content type and body of `sink`'s request for `message`, as Reloader sends them,
/// with Slack's attachment colour (`good`, `danger` for a hold); the other sinks have none.
pub fn payload(sink: AlertSink, message: &str, color: &str) -> (&'static str, Vec<u8>) {
    const JSON: &str = "application/json";
    let text = serde_json::Value::from(message).to_string();
    let body = match sink {
        AlertSink::Slack => format!(
            r#"{{"attachments":[{{"color":"{color}","author_name":"wavelet","text":{text}}}]}}"#
        ),
        AlertSink::Teams | AlertSink::GoogleChat => format!(r#"{{"text":{text}}}"#),
        // Reloader's raw webhook: the text without Slack's bold markers.
        AlertSink::Webhook => return ("text/plain", message.replace('*', "").into_bytes()),
    };
    (JSON, body.into_bytes())
}

/// What one attempt's answer means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Sent,
    /// 429, 5xx, or no answer: try again.
    Retry,
    /// Any other answer (a redirect is refused, as by Reloader: it may carry the token away).
    Fail,
}

fn verdict(status: Option<u16>) -> Verdict {
    match status {
        Some(200..=299) => Verdict::Sent,
        None | Some(429) | Some(500..=599) => Verdict::Retry,
        Some(_) => Verdict::Fail,
    }
}

/// The sender of alerts; [`Alerts::send`] never blocks.
pub struct Alerts {
    queue: Arc<Queue>,
}

/// Alerts waiting for the sending thread, at most `capacity`.
struct Queue {
    waiting: Mutex<VecDeque<Alert>>,
    capacity: usize,
    added: Condvar,
}

impl Queue {
    /// Queues `alert`, or hands it back when the queue is full.
    fn push(&self, alert: Alert) -> Result<(), Alert> {
        let mut waiting = self.waiting.lock().unwrap();
        if waiting.len() >= self.capacity {
            return Err(alert);
        }
        waiting.push_back(alert);
        self.added.notify_one();
        Ok(())
    }

    /// The next alert; waits for one.
    fn pop(&self) -> Alert {
        let mut waiting = self.waiting.lock().unwrap();
        loop {
            if let Some(rollout) = waiting.pop_front() {
                return rollout;
            }
            waiting = self.added.wait(waiting).unwrap();
        }
    }
}

impl Alerts {
    /// Checks the settings (the CA file, the proxy) and starts the sending thread.
    pub fn start(config: &AlertConfig, stop: Arc<Stop>) -> Result<Alerts, Error> {
        let sender = Sender::new(config, stop)?;
        let queue = Arc::new(Queue {
            waiting: Mutex::new(VecDeque::new()),
            capacity: config.queue_size,
            added: Condvar::new(),
        });
        let (what, also) = match (config.on_reload, config.on_hold) {
            (true, true) => (
                "on rollout",
                ", and on fan-out holds (--alert-on-hold=false turns those off)",
            ),
            (true, false) => ("on rollout", ""),
            (false, _) => (
                "on fan-out holds",
                " (--alert-on-hold=false turns them off; --alert-on-reload adds one per rollout)",
            ),
        };
        log::info!(
            "alerts {what}: {} payloads to {} (the URL's path is not logged){}{also}",
            sink_name(config.sink),
            sender.target,
            if config.proxy.is_some() {
                " through the proxy"
            } else {
                ""
            }
        );
        let waiting = Arc::clone(&queue);
        std::thread::Builder::new()
            .name("alerts".into())
            .spawn(move || sender.run(&waiting))
            .map_err(|e| Error::Transport(format!("starting the alerts thread: {e}")))?;
        Ok(Alerts { queue })
    }

    /// Queues an alert; a full queue drops it (counted, logged).
    pub fn send(&self, alert: Alert) {
        match self.queue.push(alert) {
            Ok(()) => {}
            Err(alert) => {
                metrics::global().alerts.inc(&["dropped"]);
                log::warn!(
                    "{}: alert dropped: the alert queue is full (the receiver is slow or down; --alert-queue-size)",
                    alert.about()
                );
            }
        }
    }
}

fn sink_name(sink: AlertSink) -> &'static str {
    match sink {
        AlertSink::Slack => "slack",
        AlertSink::Teams => "teams",
        AlertSink::GoogleChat => "gchat",
        AlertSink::Webhook => "webhook",
    }
}

/// The sending thread's state.
struct Sender {
    agent: ureq::Agent,
    sink: AlertSink,
    url: String,
    /// `scheme://host[:port]` of the URL, the part that may be logged.
    target: String,
    /// Texts never to log: the URL, its path and query, the proxy URL.
    secrets: Vec<String>,
    additional_info: Option<String>,
    stop: Arc<Stop>,
}

impl Sender {
    fn new(config: &AlertConfig, stop: Arc<Stop>) -> Result<Sender, Error> {
        let mut builder = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(0)
            .user_agent(format!("wavelet/{}", env!("CARGO_PKG_VERSION")))
            .timeout_global(Some(ATTEMPT_TIMEOUT))
            // As Reloader: the proxy given, else none (HTTPS_PROXY is not read).
            .proxy(None);
        if let Some(proxy) = &config.proxy {
            let proxy = ureq::Proxy::new(proxy).map_err(|_| {
                Error::Config("--alert-webhook-proxy (ALERT_WEBHOOK_PROXY) is not a usable proxy URL, e.g. http://proxy:3128 (the value is not shown)".into())
            })?;
            builder = builder.proxy(Some(proxy));
        }
        if let Some(path) = &config.ca_file {
            let bytes = std::fs::read(path).map_err(|e| {
                Error::Config(format!(
                    "--alert-ca-file {}: cannot read it: {e}",
                    path.display()
                ))
            })?;
            let roots: Vec<ureq::tls::Certificate<'static>> = ureq::tls::parse_pem(&bytes)
                .filter_map(|item| match item {
                    Ok(ureq::tls::PemItem::Certificate(cert)) => Some(cert),
                    _ => None,
                })
                .collect();
            if roots.is_empty() {
                return Err(Error::Config(format!(
                    "--alert-ca-file {} holds no PEM certificate (expected -----BEGIN CERTIFICATE-----)",
                    path.display()
                )));
            }
            let tls = ureq::tls::TlsConfig::builder()
                .root_certs(ureq::tls::RootCerts::new_with_certs(&roots))
                .build();
            builder = builder.tls_config(tls);
        }
        let url = config.webhook_url.clone();
        let (scheme, rest) = url.split_once("://").unwrap_or(("", &url));
        let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let host = rest[..end].rsplit('@').next().unwrap_or("");
        let mut secrets = vec![url.clone()];
        if end < rest.len() {
            secrets.push(rest[end..].to_string());
        }
        secrets.extend(config.proxy.clone());
        Ok(Sender {
            agent: crate::client::agent(builder.build()),
            sink: config.sink,
            target: format!("{scheme}://{host}"),
            url,
            secrets,
            additional_info: config.additional_info.clone(),
            stop,
        })
    }

    /// Sends the alerts one after the other until the process ends.
    fn run(self, queue: &Queue) {
        loop {
            let alert = queue.pop();
            let about = alert.about();
            let text = alert.message(self.additional_info.as_deref());
            let (content_type, body) = payload(self.sink, &text, alert.color());
            let m = metrics::global();
            match self.deliver(content_type, &body) {
                Ok(()) => {
                    m.alerts.inc(&["sent"]);
                    log::debug!("{about}: alert sent to {}", self.target);
                }
                Err(why) => {
                    m.alerts.inc(&["failed"]);
                    log::warn!("{about}: alert not sent to {}: {why}", self.target);
                }
            }
        }
    }

    /// Up to [`ATTEMPTS`] POSTs with backoff; `Err` says why the last one failed.
    fn deliver(&self, content_type: &str, body: &[u8]) -> Result<(), String> {
        let mut wait = FIRST_RETRY;
        let mut attempt = 1;
        loop {
            // Built as the API client builds its requests: the same code in the binary.
            let answer = ureq::http::Request::builder()
                .method(ureq::http::Method::POST)
                .uri(self.url.as_str())
                .header(ureq::http::header::CONTENT_TYPE, content_type)
                .body(body)
                .map_err(|e| e.to_string())
                .and_then(|request| self.agent.run(request).map_err(|e| e.to_string()));
            let (status, why) = match answer {
                Ok(response) => {
                    let status = response.status();
                    (
                        Some(status.as_u16()),
                        format!("the receiver answered {status}"),
                    )
                }
                Err(why) => (None, self.redact(&why)),
            };
            match verdict(status) {
                Verdict::Sent => return Ok(()),
                Verdict::Fail => return Err(why),
                Verdict::Retry if attempt >= ATTEMPTS => {
                    return Err(format!("{why} ({ATTEMPTS} attempts)"))
                }
                Verdict::Retry => {
                    log::debug!("alert to {}: {why}; retrying in {wait:?}", self.target);
                    crate::stop::sleep_unless_stopped(&self.stop, wait);
                    if self.stop.is_set() {
                        return Err(format!("{why} (stopping)"));
                    }
                    wait *= 2;
                    attempt += 1;
                }
            }
        }
    }

    fn redact(&self, text: &str) -> String {
        self.secrets
            .iter()
            .filter(|s| !s.is_empty())
            .fold(text.to_string(), |t, secret| {
                t.replace(secret.as_str(), "<redacted>")
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rollout(changed: &[(ConfigKind, &str)]) -> Rollout {
        Rollout {
            kind: "Deployment".into(),
            namespace: "shop".into(),
            name: "web".into(),
            changed: changed
                .iter()
                .map(|(kind, name)| ConfigKey::new(*kind, "shop", name))
                .collect(),
            dry_run: false,
        }
    }

    #[test]
    fn the_message_is_reloaders_sentence_naming_the_objects_and_the_workload() {
        assert_eq!(
            message(&rollout(&[(ConfigKind::ConfigMap, "app")]), None),
            "wavelet detected changes in *app* of type *CONFIGMAP* in namespace *shop*. Hence reloaded *web* of type *Deployment* in namespace *shop*"
        );
        assert_eq!(
            message(
                &rollout(&[(ConfigKind::ConfigMap, "app"), (ConfigKind::Secret, "db")]),
                Some(" prod-eu ")
            ),
            "prod-eu : wavelet detected changes in *app* of type *CONFIGMAP* in namespace *shop* and *db* of type *SECRET* in namespace *shop*. Hence reloaded *web* of type *Deployment* in namespace *shop*"
        );
    }

    #[test]
    fn a_change_made_while_not_running_and_a_dry_run_say_so() {
        let mut r = rollout(&[]);
        r.dry_run = true;
        assert_eq!(
            message(&r, None),
            "wavelet detected changes, made while it was not running, in the configuration of *web*. Dry run: would have reloaded *web* of type *Deployment* in namespace *shop*"
        );
    }

    #[test]
    fn each_sink_gets_reloaders_payload() {
        let (kind, body) = payload(AlertSink::Slack, "*a* b", "good");
        assert_eq!(kind, "application/json");
        let slack: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            slack,
            serde_json::json!({"attachments": [{"color": "good", "author_name": "wavelet", "text": "*a* b"}]})
        );
        for sink in [AlertSink::Teams, AlertSink::GoogleChat] {
            let (_, body) = payload(sink, "*a* b", "good");
            let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
            assert_eq!(json, serde_json::json!({"text": "*a* b"}));
        }
        assert_eq!(
            payload(AlertSink::Webhook, "*a* b", "good"),
            ("text/plain", b"a b".to_vec())
        );
    }

    fn held() -> FanOutNotice {
        FanOutNotice {
            object: Some(ConfigKey::new(ConfigKind::ConfigMap, "shop", "app")),
            entry: "fanout.configmap.shop.app".into(),
            change: "abf2ed49".into(),
            what: FanOutEvent::Held {
                workload: "deployment shop/web".into(),
                reason: "its rollout failed: progress deadline exceeded".into(),
            },
        }
    }

    #[test]
    fn a_hold_says_which_change_which_workload_failed_why_and_how_to_go_on() {
        assert_eq!(
            fan_out_message(&held(), Some("prod-eu")),
            "prod-eu : wavelet held the fan-out of change *abf2ed49* in *app* of type *CONFIGMAP* in namespace *shop*: *deployment shop/web* failed: its rollout failed: progress deadline exceeded. The workloads not rolled yet wait. To go on: fix the object (its next change starts a new fan-out), or roll the rest anyway with `wavelet resume -n shop configmap/app`"
        );
        let mut resumed = held();
        resumed.what = FanOutEvent::Resumed {
            workload: "deployment shop/web".into(),
        };
        assert!(fan_out_message(&resumed, None)
            .starts_with("wavelet resumed the fan-out of change *abf2ed49* in *app*"));
        let mut superseded = held();
        superseded.what = FanOutEvent::Superseded {
            by: "0c1d2e3f".into(),
        };
        assert!(fan_out_message(&superseded, None).contains("change *0c1d2e3f* superseded it"));
    }

    #[test]
    fn a_hold_is_red_in_slack_and_plain_text_on_a_raw_webhook() {
        let alert = Alert::FanOut(Box::new(held()));
        let text = alert.message(None);
        let (_, body) = payload(AlertSink::Slack, &text, alert.color());
        let slack: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(slack["attachments"][0]["color"], "danger");
        let (kind, raw) = payload(AlertSink::Webhook, &text, alert.color());
        assert_eq!(kind, "text/plain");
        assert!(String::from_utf8(raw).unwrap().starts_with(
            "wavelet held the fan-out of change abf2ed49 in app of type CONFIGMAP in namespace shop: deployment shop/web failed"
        ));
    }

    #[test]
    fn a_full_queue_hands_the_alert_back_and_takes_alerts_in_order() {
        let queue = Queue {
            waiting: Mutex::new(VecDeque::new()),
            capacity: 2,
            added: Condvar::new(),
        };
        let (a, b, c) = (rollout(&[]), rollout(&[]), rollout(&[]));
        let mut b = b;
        b.name = "b".into();
        let (a, b, c) = (Alert::Rollout(a), Alert::Rollout(b), Alert::Rollout(c));
        assert!(queue.push(a.clone()).is_ok());
        assert!(queue.push(b.clone()).is_ok());
        assert_eq!(queue.push(c.clone()), Err(c));
        assert_eq!(queue.pop(), a);
        assert_eq!(queue.pop(), b);
    }

    #[test]
    fn success_sends_server_errors_and_no_answer_retry_and_other_answers_fail() {
        assert_eq!(verdict(Some(200)), Verdict::Sent);
        assert_eq!(verdict(Some(204)), Verdict::Sent);
        for retried in [None, Some(429), Some(500), Some(503)] {
            assert_eq!(verdict(retried), Verdict::Retry, "{retried:?}");
        }
        for failed in [Some(301), Some(400), Some(403), Some(404)] {
            assert_eq!(verdict(failed), Verdict::Fail, "{failed:?}");
        }
    }
}
