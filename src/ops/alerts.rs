//! Alerts on rollout, configured as Stakater Reloader's (`ALERT_ON_RELOAD`, `ALERT_SINK`,
//! `ALERT_WEBHOOK_URL`, `ALERT_WEBHOOK_PROXY`, `ALERT_ADDITIONAL_INFO`) or by wavelet's
//! `--alert-*` flags, each sink with the payload Reloader sends it. Off the rollout path: a
//! worker hands an alert to a bounded queue and goes on; one thread sends them, retrying
//! with backoff; when the queue is full the alert is dropped, counted and logged. An alert
//! names the workload, its kind and the ConfigMaps and Secrets that changed, never a value;
//! the webhook URL (which often holds a token) is never logged.

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

/// The content type and body of `sink`'s request for `message`, as Reloader sends them.
pub fn payload(sink: AlertSink, message: &str) -> (&'static str, Vec<u8>) {
    const JSON: &str = "application/json";
    let text = serde_json::Value::from(message).to_string();
    let body = match sink {
        AlertSink::Slack => format!(
            r#"{{"attachments":[{{"color":"good","author_name":"wavelet","text":{text}}}]}}"#
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
    waiting: Mutex<VecDeque<Rollout>>,
    capacity: usize,
    added: Condvar,
}

impl Queue {
    /// Queues `rollout`, or hands it back when the queue is full.
    fn push(&self, rollout: Rollout) -> Result<(), Rollout> {
        let mut waiting = self.waiting.lock().unwrap();
        if waiting.len() >= self.capacity {
            return Err(rollout);
        }
        waiting.push_back(rollout);
        self.added.notify_one();
        Ok(())
    }

    /// The next alert; waits for one.
    fn pop(&self) -> Rollout {
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
        log::info!(
            "alerts on rollout: {} payloads to {} (the URL's path is not logged){}",
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

    /// Queues an alert for `rollout`; a full queue drops it (counted, logged).
    pub fn send(&self, rollout: Rollout) {
        match self.queue.push(rollout) {
            Ok(()) => {}
            Err(rollout) => {
                metrics::global().alerts.inc(&["dropped"]);
                log::warn!(
                    "{} {}/{}: alert dropped: the alert queue is full (the receiver is slow or down; --alert-queue-size)",
                    rollout.kind.to_ascii_lowercase(),
                    rollout.namespace,
                    rollout.name
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
            let rollout = queue.pop();
            let about = format!(
                "{} {}/{}",
                rollout.kind.to_ascii_lowercase(),
                rollout.namespace,
                rollout.name
            );
            let text = message(&rollout, self.additional_info.as_deref());
            let (content_type, body) = payload(self.sink, &text);
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
        let (kind, body) = payload(AlertSink::Slack, "*a* b");
        assert_eq!(kind, "application/json");
        let slack: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            slack,
            serde_json::json!({"attachments": [{"color": "good", "author_name": "wavelet", "text": "*a* b"}]})
        );
        for sink in [AlertSink::Teams, AlertSink::GoogleChat] {
            let (_, body) = payload(sink, "*a* b");
            let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
            assert_eq!(json, serde_json::json!({"text": "*a* b"}));
        }
        assert_eq!(
            payload(AlertSink::Webhook, "*a* b"),
            ("text/plain", b"a b".to_vec())
        );
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
