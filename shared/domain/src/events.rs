//! Events (DECISIONS §9): what happened, to which app, reported by whom, when.

use super::apps::AppId;
use super::time::EpochMillis;
use super::FieldError;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The final state of an OOB request.
pub const OOB_EVENT: &str = "OOB_AUTHENTICATION";
/// A pairing's offline access locked after too many failed attempts.
pub const OFFLINE_LOCKED_EVENT: &str = "OFFLINE_ACCESS_LOCKED";
/// A pairing removed.
pub const UNPAIRED_EVENT: &str = "WORKSTATION_UNPAIRED";
/// A device revoked, with its pairings.
pub const DEVICE_REVOKED_EVENT: &str = "DEVICE_REVOKED";
/// A name claimed for a user while it belongs to another (or to nobody the claim may create).
pub const NAME_CLAIM_REFUSED_EVENT: &str = "NAME_CLAIM_REFUSED";
/// A hook run that denied or failed.
pub const CODE_EVENT: &str = "CODE_CUSTOMIZATION_RUN";

/// The events the server alone writes (listable, never reported by a client).
pub const SERVER_NAMES: [&str; 6] = [
    OOB_EVENT,
    OFFLINE_LOCKED_EVENT,
    UNPAIRED_EVENT,
    DEVICE_REVOKED_EVENT,
    NAME_CLAIM_REFUSED_EVENT,
    CODE_EVENT,
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

    /// Whether `other` reports what this event does: the same name, app, reporter and
    /// attributes, whatever its id and time.
    pub fn same_report(&self, other: &EventRecord) -> bool {
        (&self.name, &self.app_id, &self.source, &self.attributes)
            == (&other.name, &other.app_id, &other.source, &other.attributes)
    }
}

/// A reporter's own id for its event (`eventId`): what makes a report sent again after a lost
/// answer one event, not two. 1 to 128 letters, digits, `.`, `_`, `-` or `:` (a UUID fits).
pub fn reported_id(field: &str, value: &str) -> Result<String, FieldError> {
    crate::devices::identifier(field, value)
}

/// Why a report was refused.
#[derive(Debug, thiserror::Error)]
pub enum EventError {
    /// The report's `eventId` names an event stored from another report (another name, app,
    /// reporter or attributes).
    #[error("eventId: '{0}' names an event reported before with other content")]
    IdTaken(String),
}

/// Attributes from string pairs.
pub fn attributes(pairs: &[(&str, &str)]) -> Map<String, Value> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), Value::String((*v).to_owned()))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_report_is_the_same_whatever_its_id_and_time_and_differs_in_any_other_field() {
        let app = AppId::parse("appId", "acme").unwrap();
        let first = EventRecord::new(
            NAMES[3],
            Some(app.clone()),
            "agent:t1",
            EpochMillis(1),
            attributes(&[("a", "1")]),
        );
        let again = EventRecord { event_id: "other".into(), at: EpochMillis(2), ..first.clone() };
        assert!(first.same_report(&again));
        let others = [
            EventRecord { name: NAMES[4].into(), ..first.clone() },
            EventRecord { app_id: None, ..first.clone() },
            EventRecord { source: "agent:t2".into(), ..first.clone() },
            EventRecord { attributes: attributes(&[("a", "2")]), ..first.clone() },
        ];
        for other in others {
            assert!(!first.same_report(&other), "{other:?}");
        }
    }

    #[test]
    fn a_reported_id_is_taken_as_given_or_refused_by_its_field() {
        let uuid = "8e03978e-40d5-43e8-bc93-6894a57f9324";
        assert_eq!(reported_id("eventId", uuid).unwrap(), uuid);
        for bad in ["", "a b", "é", &"k".repeat(129)] {
            assert_eq!(reported_id("eventId", bad).unwrap_err().field, "eventId", "{bad:?}");
        }
    }

    #[test]
    fn attributes_are_strings_by_name() {
        assert_eq!(Value::Object(attributes(&[("a", "1"), ("b", "x")])), json!({"a": "1", "b": "x"}));
    }
}
