//! The messages of the certificate re-queue, one variant per kind, parsed once at the consumer.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Most leases one time-out message carries (about 100 bytes each, far under SQS's 256 KiB).
pub const MAX_LEASES_PER_MESSAGE: usize = 100;

/// A lease a time-out message ends, if it is still current.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaseRef {
    pub request_id: String,
    pub lease_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum QueueMessage {
    /// One lease. Earlier versions sent one per lease and messages may still be in flight; a
    /// dead request's message goes to the dead-letter queue in this form.
    LeaseExpired { request_id: String, lease_id: String },
    /// The leases of one poll that share a time-out, delayed by it: ends each lease no result
    /// came for. One message per poll in practice, instead of one per lease.
    LeasesExpired { leases: Vec<LeaseRef> },
}

impl QueueMessage {
    pub fn body(&self) -> String {
        serde_json::to_string(self).expect("a message serializes")
    }

    pub fn parse(body: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(body)
    }

    /// The leases the message ends.
    pub fn into_leases(self) -> Vec<LeaseRef> {
        match self {
            Self::LeaseExpired { request_id, lease_id } => vec![LeaseRef { request_id, lease_id }],
            Self::LeasesExpired { leases } => leases,
        }
    }

    /// The one-lease form of `lease` (what the dead-letter queue receives for a dead request).
    pub fn single(lease: &LeaseRef) -> Self {
        Self::LeaseExpired { request_id: lease.request_id.clone(), lease_id: lease.lease_id.clone() }
    }
}

/// The time-out messages of one poll's leases, each with its delay: the leases grouped by
/// time-out (in the order each time-out first appears), at most [`MAX_LEASES_PER_MESSAGE`] to
/// a message.
pub fn lease_timeouts(
    leases: impl IntoIterator<Item = (LeaseRef, Duration)>,
) -> Vec<(QueueMessage, Duration)> {
    let mut groups: Vec<(Duration, Vec<LeaseRef>)> = Vec::new();
    for (lease, timeout) in leases {
        match groups.iter_mut().find(|(t, group)| *t == timeout && group.len() < MAX_LEASES_PER_MESSAGE) {
            Some((_, group)) => group.push(lease),
            None => groups.push((timeout, vec![lease])),
        }
    }
    groups.into_iter().map(|(timeout, leases)| (QueueMessage::LeasesExpired { leases }, timeout)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(i: usize) -> LeaseRef {
        LeaseRef { request_id: format!("r{i}"), lease_id: format!("l{i}") }
    }

    #[test]
    fn the_wire_form_names_its_kind() {
        let m = QueueMessage::LeaseExpired { request_id: "r1".into(), lease_id: "l1".into() };
        assert_eq!(m.body(), r#"{"kind":"leaseExpired","requestId":"r1","leaseId":"l1"}"#);
        assert_eq!(QueueMessage::parse(&m.body()).unwrap(), m);
        let many = QueueMessage::LeasesExpired { leases: vec![lease(1), lease(2)] };
        assert_eq!(
            many.body(),
            r#"{"kind":"leasesExpired","leases":[{"requestId":"r1","leaseId":"l1"},{"requestId":"r2","leaseId":"l2"}]}"#
        );
        assert_eq!(QueueMessage::parse(&many.body()).unwrap(), many);
        assert!(QueueMessage::parse(r#"{"kind":"somethingElse"}"#).is_err());
        assert!(QueueMessage::parse(r#"{"kind":"leasesExpired"}"#).is_err());
    }

    #[test]
    fn both_forms_name_their_leases() {
        assert_eq!(QueueMessage::single(&lease(1)).into_leases(), vec![lease(1)]);
        let many = QueueMessage::LeasesExpired { leases: vec![lease(1), lease(2)] };
        assert_eq!(many.into_leases(), vec![lease(1), lease(2)]);
    }

    #[test]
    fn a_poll_sends_one_message_per_time_out() {
        let secs = Duration::from_secs;
        let leases = (0..5).map(|i| (lease(i), if i % 2 == 0 { secs(300) } else { secs(60) }));
        let messages = lease_timeouts(leases);
        assert_eq!(
            messages,
            vec![
                (QueueMessage::LeasesExpired { leases: vec![lease(0), lease(2), lease(4)] }, secs(300)),
                (QueueMessage::LeasesExpired { leases: vec![lease(1), lease(3)] }, secs(60)),
            ]
        );
        assert!(lease_timeouts(Vec::new()).is_empty());
    }

    #[test]
    fn a_message_carries_at_most_its_share_of_leases() {
        let leases = (0..2 * MAX_LEASES_PER_MESSAGE + 1).map(|i| (lease(i), Duration::from_secs(300)));
        let sizes: Vec<usize> =
            lease_timeouts(leases).into_iter().map(|(m, _)| m.into_leases().len()).collect();
        assert_eq!(sizes, vec![MAX_LEASES_PER_MESSAGE, MAX_LEASES_PER_MESSAGE, 1]);
        let (full, _) = lease_timeouts((0..MAX_LEASES_PER_MESSAGE).map(|i| {
            let long = LeaseRef { request_id: uuid_like(i), lease_id: uuid_like(i) };
            (long, Duration::from_secs(300))
        }))
        .remove(0);
        assert!(full.body().len() < 16 * 1024, "a full message stays small: {}", full.body().len());
    }

    fn uuid_like(i: usize) -> String {
        format!("{i:08}-0000-4000-8000-000000000000")
    }
}
