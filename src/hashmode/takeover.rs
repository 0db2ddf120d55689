//! Taking a workload over from Wave or Reloader: their record on the pod template says
//! what the Pods run, so wavelet compares it with their own hash of the configuration as
//! it is now. Equal: adopt without a rollout. Different: the configuration changed while
//! neither watched, roll once. No record that applies: adopt as for any new workload.
//!
//! Their hashes need the values themselves, which the cache never holds: each object
//! compared is read once (a Secret with a GET, a ConfigMap with a list of its one name,
//! as the RBAC grants), hashed, and dropped (`model::peers::Values`).

use std::collections::BTreeMap;

use crate::client::Client;
use crate::error::Error;
use crate::model::counted::Counted;
use crate::model::peers::{self, PeerRecords, Values, WaveChild};
use crate::objects::{ConfigKey, ConfigKind};

/// Whose record a workload is taken over from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Peer {
    Wave,
    Reloader,
}

impl Peer {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Peer::Wave => "Wave",
            Peer::Reloader => "Reloader",
        }
    }
}

/// What a peer's record says about the configuration now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TakeOver {
    /// The Pods run the configuration as it is: adopt without a rollout.
    Same(Peer),
    /// It changed since the peer last acted: roll once, from `recorded` (the peer's hash).
    Changed {
        peer: Peer,
        recorded: String,
        /// The objects whose data differs from the record (all of Wave's children, for
        /// Wave's one hash over them).
        changed: Vec<ConfigKey>,
    },
}

/// The take-over decision for a workload with `records`, whose counted objects are
/// `counted`; `None` when no record applies. Reads the values it compares.
pub(crate) fn decide(
    client: &Client,
    records: &PeerRecords,
    counted: &[Counted],
) -> Result<Option<TakeOver>, Error> {
    let mut read = Reader::new(client);
    if let Some(wave) = &records.wave {
        let mut children: Vec<(WaveChild, Option<Values>)> = Vec::new();
        for child in &wave.children {
            children.push((child.clone(), read.values(&child.config)?));
        }
        let hash = peers::wave_hash(&children);
        return Ok(Some(if *hash == *wave.hash {
            TakeOver::Same(Peer::Wave)
        } else {
            let mut changed: Vec<ConfigKey> =
                wave.children.iter().map(|c| c.config.clone()).collect();
            changed.sort();
            changed.dedup();
            TakeOver::Changed {
                peer: Peer::Wave,
                recorded: wave.hash.to_string(),
                changed,
            }
        }));
    }
    let mut compared = false;
    let mut changed: Vec<ConfigKey> = Vec::new();
    let mut recorded = String::new();
    for (reference, _) in counted {
        let config = &reference.config;
        if config.kind == ConfigKind::SecretProviderClass {
            continue;
        }
        for record in records.reloader.iter().filter(|r| r.is_about(config)) {
            compared = true;
            let sha1 = match read.values(config)? {
                Some(values) => peers::reloader_sha1(config.kind, &values),
                // Gone since: what the Pods run is not there any more.
                None => String::new(),
            };
            if *sha1 != *record.sha1 && !changed.contains(config) {
                changed.push(config.clone());
                if recorded.is_empty() {
                    recorded = record.sha1.to_string();
                }
            }
        }
    }
    Ok(match (compared, changed.is_empty()) {
        (false, _) => None,
        (true, true) => Some(TakeOver::Same(Peer::Reloader)),
        (true, false) => Some(TakeOver::Changed {
            peer: Peer::Reloader,
            recorded,
            changed,
        }),
    })
}

/// Reads each object once per decision.
struct Reader<'a> {
    client: &'a Client,
    read: BTreeMap<ConfigKey, Option<Values>>,
}

impl<'a> Reader<'a> {
    fn new(client: &'a Client) -> Reader<'a> {
        Reader {
            client,
            read: BTreeMap::new(),
        }
    }

    /// The values of `config` (`None`: it does not exist).
    fn values(&mut self, config: &ConfigKey) -> Result<Option<Values>, Error> {
        if let Some(values) = self.read.get(config) {
            return Ok(values.clone());
        }
        let resource = config.kind.resource();
        let values = if config.kind == ConfigKind::Secret {
            // Secrets are read with a GET anyway (watch/fetch.rs).
            let path = resource.object_path(&config.namespace, &config.name);
            match self.client.get::<serde_json::Value>(&path) {
                Ok(object) => Some(Values::from_object(config.kind, &object)),
                Err(err) if err.is_not_found() => None,
                Err(err) => return Err(err),
            }
        } else {
            // ConfigMaps are only listed and watched (the RBAC grants no GET): a list of
            // the one name.
            let path = format!(
                "{}?fieldSelector=metadata.name%3D{}",
                resource.collection_path(Some(&config.namespace)),
                config.name
            );
            let list = self.client.get::<serde_json::Value>(&path)?;
            list["items"]
                .as_array()
                .and_then(|items| items.first())
                .map(|object| Values::from_object(config.kind, object))
        };
        self.read.insert(config.clone(), values.clone());
        Ok(values)
    }
}
