//! The one place every request goes through: authenticate, send, count, log, and turn a
//! non-2xx answer into [`Error::Api`]. One attempt per request; the callers' work queue
//! decides whether and when to try again.

use std::time::{Duration, Instant};

use ureq::http::{self, header, Method};

use crate::client::status::status_from_response;
use crate::client::{lock, strip_query, Client};
use crate::error::Error;

/// One request to send.
pub(super) struct Request<'a> {
    /// The verb counted in metrics (`list`, `get`, `watch`, `patch`, ...).
    pub(super) verb: &'static str,
    pub(super) method: Method,
    pub(super) path_and_query: &'a str,
    /// Content type and bytes.
    pub(super) body: Option<(&'static str, &'a [u8])>,
    /// Replaces the client's `Accept: application/json`.
    pub(super) accept: Option<&'static str>,
    /// Set for a watch: how long its body may take.
    pub(super) watch_body_timeout: Option<Duration>,
}

impl<'a> Request<'a> {
    pub(super) fn with_body(
        verb: &'static str,
        method: Method,
        path_and_query: &'a str,
        body: (&'static str, &'a [u8]),
    ) -> Request<'a> {
        Request {
            verb,
            method,
            path_and_query,
            body: Some(body),
            accept: None,
            watch_body_timeout: None,
        }
    }
}

impl Client {
    /// One request: authenticate, send, count, log, turn a non-2xx answer into
    /// [`Error::Api`] (whose Status keeps the code, reason and Retry-After). Never retried
    /// here, so no call blocks longer than its timeouts: the workers' queue holds the one
    /// retry policy. A token file is re-read once after a 401 (a rotated token).
    pub(super) fn send(&self, request: Request<'_>) -> Result<http::Response<ureq::Body>, Error> {
        let Request {
            verb,
            ref method,
            path_and_query,
            watch_body_timeout: _,
            ..
        } = request;
        let inner = &self.inner;
        if !path_and_query.starts_with('/') {
            return Err(Error::Config(format!(
                "request path `{path_and_query}` must start with `/`"
            )));
        }
        let url = format!("{}{}", inner.request_base, path_and_query);
        let log_path = path_and_query.split('?').next().unwrap_or(path_and_query);
        // Watches do not wait (budget.rs says why); everything else takes its turn.
        if self.budgeted && verb != "watch" {
            inner.budget.wait(&format!("{method} {log_path}"));
        }
        let mut reread_token = false;
        loop {
            let token = inner.token.bearer(Instant::now())?;
            let started = Instant::now();
            let result = self.run_once(&request, &url, token.as_deref());
            let response = match result {
                Ok(response) => response,
                Err(error) => {
                    self.count(verb, 0);
                    log::debug!(
                        "{verb} {method} {log_path} -> transport error after {:?}",
                        started.elapsed()
                    );
                    return Err(error);
                }
            };
            let code = response.status().as_u16();
            self.count(verb, code);
            log::debug!(
                "{verb} {method} {log_path} -> {code} in {:?}",
                started.elapsed()
            );
            if (200..300).contains(&code) {
                return Ok(response);
            }
            let status = status_from_response(response, method);
            if status.is_too_many_requests() && !is_refused_eviction(log_path) {
                // The server sheds load: every request of this client waits, not just
                // this key's retry.
                inner
                    .budget
                    .pause(status.retry_after, &format!("{method} {log_path}"));
            }
            if code == 401 && inner.token.is_refreshable() {
                inner.token.invalidate();
                if !reread_token {
                    reread_token = true;
                    log::debug!("401 Unauthorized: re-reading the token file and retrying once");
                    continue;
                }
            }
            // One attempt: the caller decides whether and when to try again (a 429's
            // Retry-After travels in the Status).
            return Err(Error::Api(status));
        }
    }

    fn run_once(
        &self,
        request: &Request<'_>,
        url: &str,
        token: Option<&str>,
    ) -> Result<http::Response<ureq::Body>, Error> {
        let agent = &self.inner.agent;
        let method = &request.method;
        let mut builder = http::Request::builder().method(method.clone()).uri(url);
        if let Some(token) = token {
            builder = builder.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        if let Some(accept) = request.accept {
            builder = builder.header(header::ACCEPT, accept);
        }
        for (name, value) in &self.inner.impersonate {
            builder = builder.header(*name, value.as_str());
        }
        let invalid = |e: http::Error| {
            Error::Config(format!(
                "cannot build request {method} {}: {e}",
                strip_query(url)
            ))
        };
        let result = match request.body {
            Some((content_type, bytes)) => {
                let with_body = builder
                    .header(header::CONTENT_TYPE, content_type)
                    .body(bytes)
                    .map_err(invalid)?;
                match self.bound {
                    Some(bound) => agent.run(
                        agent
                            .configure_request(with_body)
                            .timeout_global(Some(bound))
                            .build(),
                    ),
                    None => agent.run(with_body),
                }
            }
            None => {
                let without_body = builder.body(()).map_err(invalid)?;
                match (request.watch_body_timeout, self.bound) {
                    (Some(limit), _) => {
                        let watch = agent
                            .configure_request(without_body)
                            .timeout_recv_response(Some(Duration::from_secs(60)))
                            .timeout_recv_body(Some(limit))
                            .build();
                        agent.run(watch)
                    }
                    (None, Some(bound)) => agent.run(
                        agent
                            .configure_request(without_body)
                            .timeout_global(Some(bound))
                            .build(),
                    ),
                    (None, None) => agent.run(without_body),
                }
            }
        };
        result.map_err(|e| transport_error(method, url, e))
    }

    fn count(&self, verb: &'static str, code: u16) {
        *lock(&self.inner.counts).entry((verb, code)).or_insert(0) += 1;
    }
}

/// An eviction's 429 is a PodDisruptionBudget refusing it (wire 075, 077), not the server
/// shedding load: it slows only that replacement.
fn is_refused_eviction(path: &str) -> bool {
    path.ends_with("/eviction")
}

pub(super) fn transport_error(method: &Method, url: &str, error: ureq::Error) -> Error {
    let hint = if is_tls_name_mismatch(&error) {
        " (TLS: the server's certificate does not name the host it is verified against: the \
         host of the server URL, or the kubeconfig's tls-server-name when it sets one)"
    } else if is_tls_failure(&error) {
        " (TLS: the server's certificate is not trusted: check the certificate authority, \
         certificate-authority(-data) in the kubeconfig or the service account ca.crt; for a \
         test cluster only, --insecure-skip-tls-verify skips the check)"
    } else if matches!(error, ureq::Error::Timeout(_)) {
        " (timed out)"
    } else {
        ""
    };
    Error::Transport(format!("{method} {}: {error}{hint}", strip_query(url)))
}

/// A failed TLS handshake. rustls reports a certificate it does not trust through the
/// socket, so ureq hands it over as an `Io` error that wraps the `rustls::Error`.
fn is_tls_failure(error: &ureq::Error) -> bool {
    match error {
        ureq::Error::Rustls(_) | ureq::Error::Tls(_) => true,
        ureq::Error::Io(e) => e.get_ref().is_some_and(|inner| inner.is::<rustls::Error>()),
        _ => false,
    }
}

/// A certificate from a trusted CA that names other hosts.
fn is_tls_name_mismatch(error: &ureq::Error) -> bool {
    let rustls_error = match error {
        ureq::Error::Rustls(e) => Some(e),
        ureq::Error::Io(e) => e
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<rustls::Error>()),
        _ => None,
    };
    matches!(
        rustls_error,
        Some(rustls::Error::InvalidCertificate(
            rustls::CertificateError::NotValidForName
                | rustls::CertificateError::NotValidForNameContext { .. }
        ))
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::stream::tests::all_lines;
    use crate::client::test_support::*;
    use crate::client::*;
    use crate::testing::TempDir;
    use serde::Deserialize;
    use serde_json::{json, Value};
    use std::net::TcpListener;

    #[test]
    fn a_chunked_watch_split_mid_line_yields_whole_lines_then_a_clean_end() {
        let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
        let first =
            "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\"}}}\n{\"type\":\"MODI";
        let second = "FIED\",\"object\":{\"metadata\":{\"name\":\"a\"}}}\n";
        let server = FakeServer::http(vec![vec![
            format!("{head}{:x}\r\n{first}\r\n", first.len()).into_bytes(),
            format!("{:x}\r\n{second}\r\n", second.len()).into_bytes(),
            b"0\r\n\r\n".to_vec(),
        ]]);
        let client = proxy_client(&server);
        let mut watch = client
            .watch(
                "/api/v1/configmaps?watch=true&resourceVersion=5&timeoutSeconds=60",
                Duration::from_secs(60),
                Shape::Whole,
            )
            .expect("watch opened");
        let lines = all_lines(&mut watch).expect("clean end");
        assert_eq!(lines.len(), 2);
        assert!(
            lines[1].starts_with("{\"type\":\"MODIFIED\"") && lines[1].ends_with("}}}"),
            "{}",
            lines[1]
        );
        assert!(server
            .next()
            .request_line()
            .starts_with("GET /api/v1/configmaps?watch=true&resourceVersion=5"));
        assert_eq!(client.request_counts(), vec![(("watch", 200), 1)]);
    }

    #[test]
    fn a_watch_cut_before_the_terminating_chunk_is_a_transport_error() {
        let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
        let event = "{\"type\":\"ADDED\",\"object\":{}}\n";
        let server = FakeServer::http(vec![vec![format!(
            "{head}{:x}\r\n{event}\r\n",
            event.len()
        )
        .into_bytes()]]);
        let mut watch = proxy_client(&server)
            .watch("/api/v1/pods?watch=1", Duration::from_secs(5), Shape::Whole)
            .expect("watch");
        assert!(watch.next_line().expect("one event").is_some());
        assert!(matches!(watch.next_line(), Err(Error::Transport(_))));
    }

    #[test]
    fn a_silent_watch_is_cut_by_the_body_timeout_instead_of_hanging() {
        let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
        let event = "{\"type\":\"ADDED\",\"object\":{}}\n";
        let server = FakeServer::http(vec![vec![
            format!("{head}{:x}\r\n{event}\r\n", event.len()).into_bytes(),
            Vec::new(),
        ]]);
        let client = proxy_client(&server);
        // `watch` allows timeoutSeconds + 30 s; the same mechanism with a short bound:
        let response = client
            .send(Request {
                verb: "watch",
                method: Method::GET,
                path_and_query: "/api/v1/pods?watch=1",
                body: None,
                accept: None,
                watch_body_timeout: Some(Duration::from_millis(300)),
            })
            .expect("watch opened");
        let mut watch = WatchStream::new(
            Box::new(crate::client::gzip::Body::of(response).expect("no Content-Encoding")),
            "/api/v1/pods?watch=1",
        );
        assert!(watch.next_line().expect("one event").is_some());
        let started = Instant::now();
        assert!(matches!(watch.next_line(), Err(Error::Transport(_))));
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "cut after {:?}",
            started.elapsed()
        );
    }

    #[test]
    fn a_bounded_client_cuts_a_request_whose_answer_is_late() {
        // Silent for 3 s after reading the request, then an answer.
        let server = FakeServer::http(vec![vec![
            Vec::new(),
            response("200 OK", &[("Content-Type", "application/json")], "{}").concat(),
        ]]);
        let started = Instant::now();
        let result = proxy_client(&server)
            .bounded(Duration::from_millis(300))
            .put::<serde_json::Value>("/apis/x", &serde_json::json!({}));
        assert!(
            matches!(&result, Err(Error::Transport(m)) if m.contains("timed out")),
            "{result:?}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "cut after {:?}",
            started.elapsed()
        );
    }

    #[test]
    fn a_429_with_retry_after_is_returned_at_once_with_its_delay() {
        let server = FakeServer::http(vec![response(
            "429 Too Many Requests",
            &[("Content-Type", "text/plain"), ("Retry-After", "10")],
            "Too many requests, please try again later.\n",
        )]);
        let client = proxy_client(&server);
        let started = Instant::now();
        let status = api_status(client.get::<Value>("/api/v1/namespaces/ns/configmaps"));
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "the client waited"
        );
        assert_eq!(
            (status.code, status.retry_after),
            (429, Some(Duration::from_secs(10)))
        );
        assert_eq!(client.request_counts(), vec![(("list", 429), 1)]);
    }

    #[test]
    fn a_429_holds_the_next_request_of_every_caller_for_its_retry_after() {
        let ok = || json_response("200 OK", &json!({"ok": true}));
        let server = FakeServer::http(vec![
            response(
                "429 Too Many Requests",
                &[("Content-Type", "text/plain"), ("Retry-After", "1")],
                "Too many requests, please try again later.\n",
            ),
            ok(),
            ok(),
        ]);
        let client = proxy_client(&server);
        let other = client.clone();
        let started = Instant::now();
        assert!(api_status(client.patch::<Value>(
            "/apis/apps/v1/namespaces/ns/deployments/a",
            PatchType::Strategic,
            &json!({})
        ))
        .is_too_many_requests());
        // Another key, another thread's clone: it waits out the pause too.
        let _: Value = other
            .get("/api/v1/namespaces/ns/configmaps/b")
            .expect("sent after the pause");
        assert!(
            started.elapsed() >= Duration::from_millis(950),
            "sent after {:?}",
            started.elapsed()
        );
        // The leader election's client does not wait.
        let unbudgeted = client.without_budget();
        let _: Value = unbudgeted
            .get("/apis/coordination.k8s.io/v1/namespaces/ns/leases/l")
            .expect("lease");
        assert!(client.budget_waited() >= Duration::from_millis(900));
    }

    #[test]
    fn an_evictions_429_from_a_budget_does_not_pause_the_client() {
        let server = FakeServer::http(vec![
            response(
                "429 Too Many Requests",
                &[("Retry-After", "30")],
                "Cannot evict pod as it would violate the pod's disruption budget.",
            ),
            json_response("200 OK", &json!({"ok": true})),
        ]);
        let client = proxy_client(&server);
        let started = Instant::now();
        assert!(api_status(
            client.post::<Value>("/api/v1/namespaces/ns/pods/p/eviction", &json!({}))
        )
        .is_too_many_requests());
        let _: Value = client.get("/api/v1/namespaces/ns/pods/q").expect("at once");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
    }

    #[test]
    fn requests_beyond_the_burst_wait_for_the_rate_but_a_watch_does_not() {
        let ok = || json_response("200 OK", &json!({"ok": true}));
        let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n0\r\n\r\n";
        let server = FakeServer::http(vec![ok(), ok(), vec![head.as_bytes().to_vec()], ok()]);
        let client = proxy_client(&server);
        client.limit(Limits { qps: 2.0, burst: 1 });
        let started = Instant::now();
        let _: Value = client
            .get("/api/v1/namespaces/ns/configmaps/a")
            .expect("first");
        let _: Value = client
            .get("/api/v1/namespaces/ns/configmaps/b")
            .expect("second");
        let second = started.elapsed();
        assert!(second >= Duration::from_millis(450), "{second:?}");
        client
            .watch(
                "/api/v1/configmaps?watch=true",
                Duration::from_secs(5),
                Shape::Whole,
            )
            .expect("a watch goes at once");
        assert!(
            started.elapsed() - second < Duration::from_millis(300),
            "the watch waited"
        );
        let _: Value = client
            .get("/api/v1/namespaces/ns/configmaps/c")
            .expect("third");
        assert!(started.elapsed() >= Duration::from_millis(950));
    }

    #[test]
    fn a_503_with_retry_after_is_one_attempt() {
        let server = FakeServer::http(vec![response(
            "503 Service Unavailable",
            &[("Retry-After", "120")],
            "starting up",
        )]);
        let client = proxy_client(&server);
        let status = api_status(client.get::<Value>("/api/v1/namespaces/ns/configmaps/a"));
        assert_eq!(
            (status.code, status.reason.as_str(), status.retry_after),
            (503, "ServiceUnavailable", Some(Duration::from_secs(120)))
        );
        assert_eq!(client.request_counts(), vec![(("get", 503), 1)]);
    }

    #[test]
    fn an_eviction_refused_by_a_budget_keeps_the_causes_and_retry_after_of_wire_075() {
        let refused = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "Cannot evict pod as it would violate the pod's disruption budget.",
            "reason": "TooManyRequests", "code": 429,
            "details": {"causes": [{"reason": "DisruptionBudget",
                "message": "The disruption budget web-pdb needs 2 healthy pods and has 1 currently"}],
                "retryAfterSeconds": 10}});
        let server = FakeServer::http(vec![json_response("429 Too Many Requests", &refused)]);
        let client = proxy_client(&server);
        let eviction = json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p", "namespace": "ns"}});
        let status =
            api_status(client.post::<Value>("/api/v1/namespaces/ns/pods/p/eviction", &eviction));
        assert_eq!(
            (status.code, status.retry_after),
            (429, Some(Duration::from_secs(10)))
        );
        assert_eq!(
            status.causes,
            ["The disruption budget web-pdb needs 2 healthy pods and has 1 currently"]
        );
        assert_eq!(
            status.explained(),
            "Cannot evict pod as it would violate the pod's disruption budget. (The disruption budget web-pdb needs 2 healthy pods and has 1 currently.)"
        );
    }

    #[test]
    fn a_text_plain_403_from_kubectl_proxy_is_forbidden_and_no_credentials_are_sent() {
        let server = FakeServer::http(vec![response(
            "403 Forbidden",
            &[("Content-Type", "text/plain")],
            "Forbidden\n",
        )]);
        let client = proxy_client(&server);
        let status = api_status(client.get::<Value>("/api/v1/namespaces/ns/pods/p/exec"));
        assert_eq!(
            (status.code, status.reason.as_str(), status.message.as_str()),
            (403, "Forbidden", "Forbidden")
        );
        let request = server.next();
        assert_eq!(request.header("authorization"), None);
        assert_eq!(
            request.header("accept").as_deref(),
            Some("application/json")
        );
        assert_eq!(
            request.header("user-agent"),
            Some(format!("wavelet/{}", env!("CARGO_PKG_VERSION")))
        );
        assert!(request
            .head
            .starts_with("GET /api/v1/namespaces/ns/pods/p/exec HTTP/1.1\r\n"));
    }

    #[test]
    fn an_eviction_answered_2xx_with_a_failure_status_is_an_api_error() {
        let body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "code": 500,
            "message": "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."});
        let server = FakeServer::http(vec![json_response("201 Created", &body)]);
        let client = proxy_client(&server);
        let eviction =
            json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p"}});
        let status =
            api_status(client.post::<Value>("/api/v1/namespaces/ns/pods/p/eviction", &eviction));
        assert_eq!(status.code, 500);
        assert!(status.message.contains("more than one PodDisruptionBudget"));
        let request = server.next();
        assert_eq!(
            request.header("content-type").as_deref(),
            Some("application/json")
        );
        assert_eq!(
            serde_json::from_str::<Value>(&request.body).expect("json body"),
            eviction
        );
    }

    #[test]
    fn a_failure_status_is_recognised_even_when_the_target_type_cannot_hold_it() {
        #[derive(Deserialize, Debug)]
        #[allow(dead_code)]
        struct Pod {
            spec: Value,
        }
        let body =
            json!({"kind": "Status", "status": "Failure", "code": 500, "message": "two PDBs"});
        let server = FakeServer::http(vec![json_response("200 OK", &body)]);
        let status = api_status(
            proxy_client(&server).post::<Pod>("/api/v1/namespaces/ns/pods/p/eviction", &json!({})),
        );
        assert_eq!(status.message, "two PDBs");
    }

    #[test]
    fn patch_and_delete_send_their_content_types_and_bodies() {
        let ok = || {
            json_response(
                "200 OK",
                &json!({"kind": "Deployment", "metadata": {"name": "web"}}),
            )
        };
        let server = FakeServer::http(vec![ok(), ok(), ok(), ok()]);
        let client = proxy_client(&server);
        let patch = json!({"spec": {"template": {"metadata": {"annotations": {"wavelet.dev/config-hash": "abc"}}}}});
        for (kind, content_type) in [
            (
                PatchType::Strategic,
                "application/strategic-merge-patch+json",
            ),
            (PatchType::Merge, "application/merge-patch+json"),
        ] {
            let _: Value = client
                .patch("/apis/apps/v1/namespaces/ns/deployments/web", kind, &patch)
                .expect("patched");
            let request = server.next();
            assert!(request
                .request_line()
                .starts_with("PATCH /apis/apps/v1/namespaces/ns/deployments/web "));
            assert_eq!(
                request.header("content-type").as_deref(),
                Some(content_type)
            );
            assert_eq!(
                serde_json::from_str::<Value>(&request.body).expect("json"),
                patch
            );
        }
        let options =
            json!({"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": "u1"}});
        let _: Value = client
            .delete("/api/v1/namespaces/ns/pods/p", Some(&options))
            .expect("deleted");
        let request = server.next();
        assert!(request
            .request_line()
            .starts_with("DELETE /api/v1/namespaces/ns/pods/p "));
        assert_eq!(
            serde_json::from_str::<Value>(&request.body).expect("json"),
            options
        );
        let _: Value = client
            .delete("/api/v1/namespaces/ns/pods/q", None)
            .expect("deleted");
        assert_eq!(server.next().body, "");
        assert_eq!(
            client.request_counts(),
            vec![(("delete", 200), 2), (("patch", 200), 2)]
        );
    }

    #[test]
    fn a_401_re_reads_the_rotated_token_file_and_retries_once() {
        let dir = TempDir::new("client");
        let token = dir.write("token", "old-token");
        let unauthorized = || {
            json_response(
                "401 Unauthorized",
                &json!({"kind": "Status", "status": "Failure", "message": "Unauthorized", "reason": "Unauthorized", "code": 401}),
            )
        };
        let server = FakeServer::http(vec![
            unauthorized(),
            json_response("200 OK", &json!({"ok": true})),
            unauthorized(),
            unauthorized(),
        ]);
        let client = Client::build(Setup {
            base_url: server.url.clone(),
            ca: None,
            client_certificate: None,
            insecure: false,
            token: TokenSource::file(token.clone(), "token file", "hint".into()).expect("token"),
            namespace: None,
            ca_hint: String::new(),
            proxy_url: None,
            tls_server_name: None,
            impersonate: Vec::new(),
        })
        .expect("client");
        std::fs::write(&token, "new-token\n").expect("rotate");
        let answer: Value = client
            .get("/api/v1/namespaces/ns/configmaps/a")
            .expect("retried with the new token");
        assert_eq!(answer["ok"], true);
        assert_eq!(
            server.next().header("authorization").as_deref(),
            Some("Bearer old-token")
        );
        assert_eq!(
            server.next().header("authorization").as_deref(),
            Some("Bearer new-token")
        );
        // A 401 with the fresh token too is returned after one retry.
        assert!(
            api_status(client.get::<Value>("/api/v1/namespaces/ns/configmaps/a")).is_unauthorized()
        );
        assert_eq!(
            client.request_counts(),
            vec![(("get", 200), 1), (("get", 401), 3)]
        );
    }

    #[test]
    fn an_unreachable_server_is_a_transport_error_counted_with_code_zero() {
        let port = TcpListener::bind("127.0.0.1:0")
            .expect("bind")
            .local_addr()
            .expect("addr")
            .port();
        let client = Client::for_tests(&ConnectionFlags {
            server: Some(format!("http://127.0.0.1:{port}")),
            ..Default::default()
        })
        .expect("client");
        assert!(matches!(
            client.get::<Value>("/version"),
            Err(Error::Transport(_))
        ));
        assert_eq!(client.request_counts(), vec![(("get", 0), 1)]);
    }

    #[test]
    fn a_body_that_is_not_the_expected_json_is_a_decode_error_naming_the_path() {
        let server = FakeServer::http(vec![response(
            "200 OK",
            &[("Content-Type", "application/json")],
            "[1, 2",
        )]);
        match proxy_client(&server).get::<Value>("/api/v1/namespaces/ns/configmaps?limit=2") {
            Err(Error::Decode(message)) => assert!(
                message.contains("GET /api/v1/namespaces/ns/configmaps:"),
                "{message}"
            ),
            other => panic!("expected a decode error, got {other:?}"),
        }
    }
}
