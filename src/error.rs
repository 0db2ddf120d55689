//! The error type of every layer that talks to the API server or reads configuration.

use std::fmt;
use std::time::Duration;

/// The API server's answer to a failed request, kept typed so callers `match` on it.
///
/// Built from the `Status` JSON body when there is one; synthesized from the HTTP code
/// (as client-go does) when the body is plain text, e.g. an APF 429 or a `kubectl proxy` 403.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// HTTP status code (mirrors `Status.code`).
    pub code: u16,
    /// Machine-readable reason (`NotFound`, `Expired`, `TooManyRequests`, ...); may be empty.
    pub reason: String,
    /// Human-readable message from the server (or the start of a plain-text body).
    pub message: String,
    /// From the `Retry-After` header or `details.retryAfterSeconds`.
    pub retry_after: Option<Duration>,
    /// The messages of `details.causes` (an eviction's "The disruption budget web-pdb
    /// needs 2 healthy pods and has 1 currently"), which say more than `message`.
    pub causes: Vec<String>,
}

impl Status {
    /// The message with its causes, for people: "Cannot evict pod ... budget. (The
    /// disruption budget web-pdb needs 2 healthy pods and has 1 currently.)"
    pub fn explained(&self) -> String {
        if self.causes.is_empty() {
            return self.message.clone();
        }
        let causes: Vec<&str> = self
            .causes
            .iter()
            .map(|c| c.trim_end_matches('.'))
            .collect();
        format!("{} ({}.)", self.message, causes.join("; "))
    }
}

impl Status {
    /// A `410 Expired`/`Gone`: the resourceVersion or continue token is too old; relist.
    pub fn is_expired(&self) -> bool {
        self.code == 410 || self.reason == "Expired" || self.reason == "Gone"
    }

    pub fn is_not_found(&self) -> bool {
        self.code == 404
    }

    pub fn is_conflict(&self) -> bool {
        self.code == 409
    }

    pub fn is_unauthorized(&self) -> bool {
        self.code == 401
    }

    /// `403 Forbidden`: RBAC does not grant the request.
    pub fn is_forbidden(&self) -> bool {
        self.code == 403
    }

    pub fn is_too_many_requests(&self) -> bool {
        self.code == 429
    }

    /// A `504` asking for a resourceVersion the server has not reached: its watch cache
    /// waited 3 s and is still behind (another replica of the API server, behind a load
    /// balancer, than the one whose watch gave the version). Wire 027.
    pub fn is_resource_version_too_large(&self) -> bool {
        self.code == 504
            && (self.message.contains("Too large resource version")
                || self
                    .causes
                    .iter()
                    .any(|c| c.contains("Too large resource version")))
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.code)?;
        if !self.reason.is_empty() {
            write!(f, " {}", self.reason)?;
        }
        if !self.message.is_empty() {
            write!(f, ": {}", self.message)?;
        }
        Ok(())
    }
}

/// Everything that can go wrong between wavelet and the API server.
#[derive(Debug)]
pub enum Error {
    /// The API server answered with an error `Status`.
    Api(Status),
    /// The server could not be reached, or the connection broke mid-request.
    Transport(String),
    /// The response body was not the JSON that was expected.
    Decode(String),
    /// Flags, kubeconfig or credentials are unusable; the message says how to fix it.
    Config(String),
}

impl Error {
    /// The API `Status`, when the server answered with one.
    pub fn status(&self) -> Option<&Status> {
        match self {
            Error::Api(status) => Some(status),
            _ => None,
        }
    }

    pub fn is_expired(&self) -> bool {
        self.status().is_some_and(Status::is_expired)
    }

    pub fn is_not_found(&self) -> bool {
        self.status().is_some_and(Status::is_not_found)
    }

    pub fn is_forbidden(&self) -> bool {
        self.status().is_some_and(Status::is_forbidden)
    }

    /// A create refused because its namespace is being deleted (`403` with the cause
    /// `NamespaceTerminating`, whose text the API server fixes: "unable to create new
    /// content in namespace NS because it is being terminated").
    pub fn is_namespace_terminating(&self) -> bool {
        self.status().is_some_and(|s| {
            s.is_forbidden()
                && (s.message.contains("because it is being terminated")
                    || s.causes.iter().any(|c| c.contains("is being terminated")))
        })
    }

    /// A create answered 409 `AlreadyExists` (not a 409 `Conflict` of an update).
    pub fn is_already_exists(&self) -> bool {
        self.status()
            .is_some_and(|s| s.is_conflict() && s.reason == "AlreadyExists")
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Api(status) => write!(f, "api: {status}"),
            Error::Transport(msg) => write!(f, "transport: {msg}"),
            Error::Decode(msg) => write!(f, "decode: {msg}"),
            Error::Config(msg) => write!(f, "config: {msg}"),
        }
    }
}

impl std::error::Error for Error {}

/// A URL as it may be printed: its scheme and host (and port), never its user, password,
/// path or query, which is where webhooks (Slack's, Teams') and proxies keep their
/// secrets: `https://hooks.slack.com/services/T0/B0/x` is shown `https://hooks.slack.com`.
/// A value without `scheme://` is not a URL and shown as `(not shown)`: it may be a token.
pub fn shown_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return "(not shown)".into();
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let host = rest[..end].rsplit('@').next().unwrap_or("");
    let cut = if end < rest.len() || rest[..end].contains('@') {
        " (the rest not shown)"
    } else {
        ""
    };
    format!("{scheme}://{host}{cut}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_create_in_a_namespace_being_deleted_is_told_apart_from_other_refusals() {
        let terminating = Error::Api(Status {
            code: 403,
            reason: "Forbidden".into(),
            message: "configmaps \"late\" is forbidden: unable to create new content in namespace wire-rec because it is being terminated".into(),
            retry_after: None,
            causes: vec!["namespace wire-rec is being terminated".into()],
        });
        assert!(terminating.is_namespace_terminating());
        let rbac = Error::Api(Status {
            code: 403,
            reason: "Forbidden".into(),
            message: "events is forbidden: User \"x\" cannot create resource".into(),
            retry_after: None,
            causes: Vec::new(),
        });
        assert!(!rbac.is_namespace_terminating());
    }

    #[test]
    fn a_shown_url_keeps_its_scheme_and_host_only() {
        assert_eq!(
            shown_url("https://hooks.slack.com/services/T0/B0/xyz"),
            "https://hooks.slack.com (the rest not shown)"
        );
        assert_eq!(
            shown_url("http://user:pw@proxy:3128"),
            "http://proxy:3128 (the rest not shown)"
        );
        assert_eq!(shown_url("https://example.com"), "https://example.com");
        assert_eq!(
            shown_url("https://h.example?token=x"),
            "https://h.example (the rest not shown)"
        );
        assert_eq!(shown_url("T0/B0/xyz"), "(not shown)");
    }

    #[test]
    fn error_enum_stays_small() {
        assert!(std::mem::size_of::<Error>() <= 96);
    }

    #[test]
    fn gone_and_expired_both_mean_relist() {
        let gone = Status {
            code: 410,
            reason: "Gone".into(),
            message: String::new(),
            retry_after: None,
            causes: Vec::new(),
        };
        assert!(gone.is_expired());
        let err = Error::Api(Status {
            code: 200,
            reason: "Expired".into(),
            message: String::new(),
            retry_after: None,
            causes: Vec::new(),
        });
        assert!(err.is_expired());
    }

    #[test]
    fn display_names_code_reason_and_message() {
        let s = Status {
            code: 404,
            reason: "NotFound".into(),
            message: "x not found".into(),
            retry_after: None,
            causes: Vec::new(),
        };
        assert_eq!(Error::Api(s).to_string(), "api: 404 NotFound: x not found");
    }
}
