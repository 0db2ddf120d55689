//! Which Pods are a workload's, from the Pods' names alone: the Secrets Store CSI driver's
//! pod statuses name the Pod they are about, not its owner, and wavelet does not watch
//! Pods. Each workload controller names its Pods in a fixed way:
//!
//! | kind | Pod name |
//! |---|---|
//! | Deployment, Argo Rollout | `<name>-<pod-template-hash>-<5 random>` (through the ReplicaSet `<name>-<hash>`) |
//! | DaemonSet | `<name>-<5 random>` |
//! | StatefulSet | `<name>-<ordinal>` |
//! | CronJob | `<name>-<scheduled minute>-<5 random>` (through the Job `<name>-<minute>`; an indexed Job puts `<index>-` before the random part) |
//! | another `--workload-kinds` kind | anything starting with `<name>-` |
//!
//! The random parts come from `generateName`: the API server cuts the prefix to 58
//! characters and appends 5 characters of its alphabet, so a long name is matched on what
//! is left of it. A Pod of Deployment `web-api` is never taken for one of Deployment
//! `web` (one more `-`-separated part); a DaemonSet `web-x2k9p` next to a Deployment
//! `web` would be ambiguous, and is not told apart.

use crate::objects::Resource;

/// The API server's alphabet for `generateName` suffixes (`utilrand.String`), also that of
/// the pod-template hash: no vowels, no `0`, `1`, `3`.
const GENERATED: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// Length of the random suffix `generateName` appends.
const RANDOM_LEN: usize = 5;

/// Longest `generateName` prefix the API server keeps (63 less the random suffix).
const MAX_PREFIX_LEN: usize = 58;

/// Whether Pod `pod` is one of `workload`'s, a workload of `resource` in the same namespace.
pub fn is_pod_of(resource: &Resource, workload: &str, pod: &str) -> bool {
    let name_dash = format!("{workload}-");
    let generated = |patterns: &[&[Part]]| {
        generated_from(pod, |base, cut| {
            patterns.iter().any(|parts| matches(base, parts, cut))
        })
    };
    match (resource.group.as_str(), resource.plural.as_str()) {
        ("apps", "deployments") | ("argoproj.io", "rollouts") => generated(&[&[
            Part::Text(&name_dash),
            Part::Token(Token::Alphanumeric, 10),
            Part::Text("-"),
        ]]),
        ("apps", "daemonsets") => generated(&[&[Part::Text(&name_dash)]]),
        ("apps", "statefulsets") => pod.strip_prefix(&name_dash).is_some_and(|ordinal| {
            !ordinal.is_empty() && ordinal.bytes().all(|b| b.is_ascii_digit())
        }),
        ("batch", "cronjobs") => generated(&[
            &[
                Part::Text(&name_dash),
                Part::Token(Token::Digits, 12),
                Part::Text("-"),
            ],
            &[
                Part::Text(&name_dash),
                Part::Token(Token::Digits, 12),
                Part::Text("-"),
                Part::Token(Token::Digits, 10),
                Part::Text("-"),
            ],
        ]),
        _ => pod.len() > name_dash.len() && pod.starts_with(&name_dash),
    }
}

/// `pod` is a `generateName` prefix followed by 5 random characters, and `prefix(base,
/// cut)` accepts the prefix (`cut`: the API server shortened it to 58 characters, so it
/// may end anywhere inside the name it was cut from).
fn generated_from(pod: &str, prefix: impl Fn(&str, bool) -> bool) -> bool {
    let Some(split) = pod.len().checked_sub(RANDOM_LEN) else {
        return false;
    };
    let (Some(base), Some(random)) = (pod.get(..split), pod.get(split..)) else {
        return false;
    };
    if !random.bytes().all(|b| GENERATED.contains(&b)) || base.len() > MAX_PREFIX_LEN {
        return false;
    }
    prefix(base, base.len() == MAX_PREFIX_LEN)
}

/// A piece of a Pod-name prefix.
#[derive(Clone, Copy)]
enum Part<'a> {
    /// Exactly this text.
    Text(&'a str),
    /// 1 to n characters of a class (never `-`).
    Token(Token, usize),
}

#[derive(Clone, Copy)]
enum Token {
    /// Lowercase letters and digits (a pod-template hash: the driver's alphabet on a real
    /// server, any in tests' fakes).
    Alphanumeric,
    Digits,
}

impl Token {
    fn admits(self, b: u8) -> bool {
        match self {
            Token::Alphanumeric => b.is_ascii_lowercase() || b.is_ascii_digit(),
            Token::Digits => b.is_ascii_digit(),
        }
    }
}

/// Whether `s` is exactly the sequence `parts`, or, when `cut`, a prefix of one.
fn matches(s: &str, parts: &[Part], cut: bool) -> bool {
    if cut && s.is_empty() {
        return true;
    }
    let Some((part, rest)) = parts.split_first() else {
        return s.is_empty();
    };
    match *part {
        Part::Text(text) => match s.strip_prefix(text) {
            Some(after) => matches(after, rest, cut),
            None => cut && text.starts_with(s),
        },
        Part::Token(token, max) => {
            let run = s.bytes().take_while(|b| token.admits(*b)).count().min(max);
            (1..=run).any(|len| matches(&s[len..], rest, cut))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment(name: &str, pod: &str) -> bool {
        is_pod_of(&Resource::deployments(), name, pod)
    }

    #[test]
    fn a_deployments_pods_are_named_after_its_replica_sets() {
        assert!(deployment("web", "web-7d9f8b6c5d-x2k9p"));
        assert!(deployment("web", "web-5bf87cd4-b7z2q"));
        assert!(
            !deployment("web", "web-api-7d9f8b6c5d-x2k9p"),
            "Deployment web-api's"
        );
        assert!(!deployment("web-api", "web-7d9f8b6c5d-x2k9p"));
        assert!(!deployment("web", "web-7d9f8b6c5d"), "no random part");
        assert!(!deployment("web", "web-7d9f8b6c5d-XXXXX"), "not generated");
        assert!(!deployment("web", "webx-7d9f8b6c5d-x2k9p"));
        assert!(!deployment("web", "web-x2k9p"), "a DaemonSet's shape");
        assert!(is_pod_of(
            &Resource::rollouts(),
            "canary",
            "canary-6c9d7f5b8-h4k2m"
        ));
    }

    #[test]
    fn a_daemonsets_and_a_statefulsets_pods_have_their_own_shapes() {
        let ds = Resource::daemonsets();
        assert!(is_pod_of(&ds, "agent", "agent-x2k9p"));
        assert!(!is_pod_of(&ds, "agent", "agent-7d9f8-x2k9p"));
        let sts = Resource::statefulsets();
        assert!(is_pod_of(&sts, "db", "db-0"));
        assert!(is_pod_of(&sts, "db", "db-12"));
        assert!(!is_pod_of(&sts, "db", "db-x"));
        assert!(!is_pod_of(&sts, "db", "db-"));
        assert!(!is_pod_of(&sts, "db", "db-replica-0"));
    }

    #[test]
    fn a_cronjobs_pods_are_named_after_its_jobs_indexed_or_not() {
        let cj = Resource::cronjobs();
        assert!(is_pod_of(&cj, "nightly", "nightly-29043360-x2k9p"));
        assert!(is_pod_of(&cj, "nightly", "nightly-29043360-0-x2k9p"));
        assert!(!is_pod_of(&cj, "nightly", "nightly-manual-x2k9p"));
    }

    #[test]
    fn a_long_name_is_matched_on_what_generate_name_kept_of_it() {
        // 50 characters: the prefix `<name>-<hash>-` is cut to 58, inside the hash.
        let name = "a".repeat(50);
        let pod = format!("{name}-7d9f8b6x2k9p");
        assert_eq!(pod.len(), 63);
        assert!(deployment(&name, &pod));
        assert!(!deployment(&"b".repeat(50), &pod));
        // 60 characters: cut inside the name itself.
        let long = "c".repeat(60);
        let pod = format!("{}x2k9p", &long[..58]);
        assert!(deployment(&long, &pod));
        assert!(is_pod_of(&Resource::daemonsets(), &long, &pod));
        // Not cut: a 57-character base must match whole.
        let short = format!("{}-x2k9p", "d".repeat(56));
        assert!(!deployment(&"d".repeat(56), &short));
    }

    #[test]
    fn another_kinds_pods_are_those_starting_with_its_name() {
        let widgets = Resource::new("example.com", "v1", "widgets", "Widget");
        assert!(is_pod_of(&widgets, "w", "w-anything-0"));
        assert!(!is_pod_of(&widgets, "w", "w-"));
        assert!(!is_pod_of(&widgets, "w", "wx-0"));
    }
}
