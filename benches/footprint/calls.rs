//! The API requests wavelet sent, as the fake server recorded them, counted by verb
//! (LIST and GET told apart, WATCH apart from both) and resource.

use std::collections::BTreeMap;
use std::fmt;

use crate::fake::access;
use crate::fake::list::Presentation;
use crate::fake::resources::{builtin_types, ResourceType};
use crate::fake::Request;

/// What a request did, in the words of `kubectl get --raw` users.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verb {
    /// GET of a collection.
    List,
    /// GET of one object.
    Get,
    Watch,
    Patch,
    /// POST: creates, e.g. Events.
    Post,
    Put,
    Delete,
    /// Anything else, e.g. GET /version.
    Other,
}

impl Verb {
    pub fn of(rbac_verb: &str) -> Verb {
        match rbac_verb {
            "list" => Verb::List,
            "get" => Verb::Get,
            "watch" => Verb::Watch,
            "patch" => Verb::Patch,
            "create" => Verb::Post,
            "update" => Verb::Put,
            "delete" | "deletecollection" => Verb::Delete,
            _ => Verb::Other,
        }
    }
}

impl fmt::Display for Verb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            Verb::List => "LIST",
            Verb::Get => "GET",
            Verb::Watch => "WATCH",
            Verb::Patch => "PATCH",
            Verb::Post => "POST",
            Verb::Put => "PUT",
            Verb::Delete => "DELETE",
            Verb::Other => "other",
        };
        f.write_str(name)
    }
}

/// A verb on a resource, e.g. `LIST secrets`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Call {
    pub verb: Verb,
    pub resource: String,
}

impl fmt::Display for Call {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.verb, self.resource)
    }
}

/// How many requests of each call.
#[derive(Clone, Debug, Default)]
pub struct CallCounts(BTreeMap<Call, usize>);

impl CallCounts {
    /// Counts the requests that the wavelet binary sent (by its User-Agent).
    pub fn of(requests: &[Request]) -> CallCounts {
        let types = builtin_types();
        let mut counts = CallCounts::default();
        for call in requests.iter().filter_map(|r| classify(&types, r)) {
            *counts.0.entry(call).or_default() += 1;
        }
        counts
    }

    /// One more request of `call` (the real API server's audit log counts them).
    pub fn add_one(&mut self, call: Call) {
        *self.0.entry(call).or_default() += 1;
    }

    pub fn add(&mut self, other: &CallCounts) {
        for (call, n) in &other.0 {
            *self.0.entry(call.clone()).or_default() += n;
        }
    }

    pub fn of_verb(&self, verb: Verb) -> usize {
        self.0
            .iter()
            .filter(|(call, _)| call.verb == verb)
            .map(|(_, n)| n)
            .sum()
    }

    pub fn get(&self, call: &Call) -> usize {
        self.0.get(call).copied().unwrap_or(0)
    }

    pub fn calls(&self) -> impl Iterator<Item = &Call> {
        self.0.keys()
    }

    pub fn total(&self) -> usize {
        self.0.values().sum()
    }
}

/// The call a request made; `secrets (metadata)` when it asked for
/// `PartialObjectMetadata` instead of the objects.
fn classify(types: &[ResourceType], request: &Request) -> Option<Call> {
    let access = access::access(types, request)?;
    let mut resource = match access.subresource {
        Some(sub) => format!("{}/{sub}", access.resource),
        None => access.resource,
    };
    if Presentation::of(request) != Presentation::Full {
        resource.push_str(" (metadata)");
    }
    Some(Call {
        verb: Verb::of(&access.verb),
        resource,
    })
}
