//! Events (DECISIONS §9): what happened, to which app, reported by whom, when.

use super::apps::AppId;
use super::time::EpochMillis;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The events the server alone writes (listable, never reported by a client).
pub const SERVER_NAMES: [&str; 6] = [
    super::oob::OOB_EVENT,
    super::pairing::OFFLINE_LOCKED_EVENT,
    super::pairing::UNPAIRED_EVENT,
    super::pairing::DEVICE_REVOKED_EVENT,
    super::pairing::NAME_CLAIM_REFUSED_EVENT,
    super::code::CODE_EVENT,
];

/// The events the contract names: reported by agents and workstations, or logged by the server.
pub const NAMES: [&str; 5] = [
    "WORKSTATION_CERTIFICATE_ISSUED",
    "WORKSTATION_CERTIFICATE_REVOKED",
    "WS_CERTIFICATE_REVOKED",
    "WORKSTATION_ENROLL",
    "OOB_WORKSTATION_REG",
];

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventRecord {
    pub event_id: String,
    pub name: String,
    pub app_id: Option<AppId>,
    /// Who reported it: `server`, `agent:<tokenId>` or `workstation:<tokenId>`.
    pub source: String,
    pub at: EpochMillis,
    pub attributes: Map<String, Value>,
}

impl EventRecord {
    pub fn new(
        name: &str,
        app_id: Option<AppId>,
        source: impl Into<String>,
        at: EpochMillis,
        attributes: Map<String, Value>,
    ) -> Self {
        Self {
            event_id: uuid::Uuid::new_v4().to_string(),
            name: name.to_owned(),
            app_id,
            source: source.into(),
            at,
            attributes,
        }
    }
}

/// Attributes from string pairs.
pub fn attributes(pairs: &[(&str, &str)]) -> Map<String, Value> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), Value::String((*v).to_owned()))).collect()
}
