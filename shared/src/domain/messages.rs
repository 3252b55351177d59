//! The messages of the certificate re-queue, one variant per kind, parsed once at the consumer.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum QueueMessage {
    /// Sent with each lease, delayed by the request's timeout: ends the lease if no result came.
    LeaseExpired { request_id: String, lease_id: String },
}

impl QueueMessage {
    pub fn body(&self) -> String {
        serde_json::to_string(self).expect("a message serializes")
    }

    pub fn parse(body: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wire_form_names_its_kind() {
        let m = QueueMessage::LeaseExpired { request_id: "r1".into(), lease_id: "l1".into() };
        assert_eq!(m.body(), r#"{"kind":"leaseExpired","requestId":"r1","leaseId":"l1"}"#);
        assert_eq!(QueueMessage::parse(&m.body()).unwrap(), m);
        assert!(QueueMessage::parse(r#"{"kind":"somethingElse"}"#).is_err());
    }
}
