//! OOB authentication requests: persistence only (the lifecycle is [`rp_domain::oob`]).
//! Layout:
//!
//! | pk | sk | item |
//! |---|---|---|
//! | `OOB#<requestId>` | `REQUEST` | the request; TTL its expiry; until final also in `gsi1` under `OOBDEV#<app>#<deviceId>` by creation time |
//! | `OOBNONCE#<app>#<sessionNonce>` | `NONCE` | a session nonce the app has used; kept for good, so a nonce is never accepted twice |
//!
//! A start reads the nonce item (beside the user lookup) before it runs the tenant's hook, and
//! spends it in the transaction that stores the request. A status read is one consistent
//! GetItem; the device's list is one Query of its partition of `gsi1`. Every state change is
//! conditional on the version read.

use super::events::{self};
use rp_domain::apps::AppId;
use rp_domain::events::EventRecord;
use rp_domain::oob::{OobRequest, MAX_REQUEST_ID};
use rp_ports::{Condition, Index, Item, ItemKey, ItemStore, Query, StoreError, WriteOp};
use serde_json::json;

fn request_key(request_id: &str) -> ItemKey {
    ItemKey::new(format!("OOB#{request_id}"), "REQUEST")
}

fn nonce_key(app: &AppId, session_nonce: &str) -> ItemKey {
    ItemKey::new(format!("OOBNONCE#{app}#{session_nonce}"), "NONCE")
}

fn device_partition(app: &AppId, device_id: &str) -> String {
    format!("OOBDEV#{app}#{device_id}")
}

fn request_item(request: &OobRequest) -> Result<Item, StoreError> {
    let item =
        Item::new(request_key(&request.request_id), request)?.with_ttl(Some(request.expires_at.as_secs()));
    Ok(if request.is_final() {
        item
    } else {
        let sk = format!("{:013}#{}", request.created_at.as_millis(), request.request_id);
        item.with_index(
            Index::Gsi1,
            ItemKey::new(device_partition(&request.app_id, &request.device.device_id), sk),
        )
    })
}

/// Most pending requests a device is shown at once.
pub const DEVICE_PAGE: usize = 20;

#[derive(Clone, Copy)]
pub struct OobRequests<'a> {
    store: &'a dyn ItemStore,
}

impl<'a> OobRequests<'a> {
    pub fn new(store: &'a dyn ItemStore) -> Self {
        Self { store }
    }

    /// Stores a new request and spends its session nonce, in one transaction, only while its
    /// device is not frozen; [`StoreError::Conflict`] if the nonce was used before, or the
    /// device's removal (or its token's end) began.
    pub async fn create(&self, request: &OobRequest) -> Result<(), StoreError> {
        let nonce = Item::new(
            nonce_key(&request.app_id, &request.nonces.session_nonce),
            &json!({ "requestId": request.request_id, "at": request.created_at }),
        )?;
        self.store
            .transact(vec![
                WriteOp::Put { item: nonce, condition: Condition::Absent },
                WriteOp::Put { item: request_item(request)?, condition: Condition::Absent },
                crate::devices::Devices::unfrozen(&request.app_id, &request.device.device_id),
            ])
            .await
    }

    /// Whether the app has spent this session nonce: a consistent read, so a start can refuse a
    /// replay before it runs the tenant's customizations. [`create`](Self::create)'s condition
    /// stays the authority for two starts racing with one nonce.
    pub async fn nonce_spent(&self, app: &AppId, session_nonce: &str) -> Result<bool, StoreError> {
        Ok(self.store.get(&nonce_key(app, session_nonce)).await?.is_some())
    }

    /// The request and its version. An id longer than any request's is not found, on every
    /// backend, without a store call (DynamoDB would refuse the key).
    pub async fn get(&self, request_id: &str) -> Result<Option<(OobRequest, u64)>, StoreError> {
        if request_id.len() > MAX_REQUEST_ID {
            return Ok(None);
        }
        super::get_versioned(self.store, &request_key(request_id)).await
    }

    /// The device's requests that have no final state yet, oldest first.
    pub async fn pending_for_device(
        &self,
        app: &AppId,
        device_id: &str,
    ) -> Result<Vec<(OobRequest, u64)>, StoreError> {
        let query = Query::index(Index::Gsi1, device_partition(app, device_id)).limit(DEVICE_PAGE);
        let page = self.store.query(query).await?;
        let mut pending = Vec::with_capacity(page.items.len());
        for found in page.items {
            let request: OobRequest = found.data()?;
            if !request.is_final() {
                pending.push((request, found.version));
            }
        }
        Ok(pending)
    }

    /// Replaces the request read at `version` (a non-final change).
    pub async fn replace(&self, request: &OobRequest, version: u64) -> Result<(), StoreError> {
        self.store.put(request_item(request)?, Condition::Version(version)).await.map(|_| ())
    }

    /// Stores the final state (read at `version`) and its event in one transaction.
    pub async fn finish(
        &self,
        request: &OobRequest,
        version: u64,
        event: &EventRecord,
    ) -> Result<(), StoreError> {
        let put = WriteOp::Put { item: request_item(request)?, condition: Condition::Version(version) };
        // Only while its device is not frozen: a removal, or the end of its token, that lands
        // first makes the answer a conflict.
        let unfrozen = crate::devices::Devices::unfrozen(&request.app_id, &request.device.device_id);
        events::transact_with(self.store, vec![put, unfrozen], event).await
    }
}
