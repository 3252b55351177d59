//! Fixtures the suites and benches share.

use crate::domain::certificates::CertRequest;
use crate::domain::tokens::TokenKind;
use crate::domain::EpochMillis;
use crate::ports::{Condition, ItemStore, WriteOp};
use crate::repo::certificates::{enqueue_ops, request_item};
use crate::repo::tokens;

/// The serials a CRL (DER) lists, in its order, as lowercase hex.
pub fn crl_serials(der: &[u8]) -> Vec<String> {
    use x509_cert::der::Decode as _;
    let crl = x509_cert::crl::CertificateList::from_der(der).expect("a DER CRL");
    crl.tbs_cert_list
        .revoked_certificates
        .iter()
        .flatten()
        .map(|entry| hex::encode(entry.serial_number.as_bytes()))
        .collect()
}

/// A fresh OOB nonce: 64 lowercase hexadecimal characters, as the start request wants them.
pub fn nonce() -> String {
    format!("{}{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple())
}

/// A new controlCenterAdmin token in `store`, issued at `now`; its secret.
pub async fn admin_token(store: &dyn ItemStore, now: EpochMillis) -> String {
    let (secret, _) = tokens::issue(store, now, TokenKind::ControlCenterAdmin, None, None, None)
        .await
        .expect("an admin token");
    secret.expose().to_owned()
}

/// Queues `requests`, all of one app, in bulk for depths no test builds through pairings: the
/// first as a pairing queues it (with its app's ready marker and open count), the rest only
/// into the app's shard, 90 to a transaction.
pub async fn queue_in_bulk(store: &dyn ItemStore, requests: &[CertRequest], now: EpochMillis) {
    let Some((first, rest)) = requests.split_first() else { return };
    store.transact(enqueue_ops(first, u32::MAX, now).unwrap()).await.unwrap();
    for chunk in rest.chunks(90) {
        let ops = chunk
            .iter()
            .map(|r| WriteOp::Put { item: request_item(r).unwrap(), condition: Condition::Absent })
            .collect();
        store.transact(ops).await.unwrap();
    }
}
