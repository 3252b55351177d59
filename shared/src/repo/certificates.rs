//! The certificate queue (DECISIONS §3) and issued certificates. Requests live as described in
//! [`super::workstations`]; issued certificates as:
//!
//! | pk | sk | item |
//! |---|---|---|
//! | `DEVCERT#<app>#<deviceId>` | `CERT#<serial>` | an issued (device-encrypted) login certificate; `gsi2` `SERIAL#<serial>` finds it by serial |
//!
//! Life cycle: PENDING → LEASED (a poll; conditional on the version read, so two agents never
//! lease one request) → DONE | FAILED (a result in time), or back to PENDING when the lease ends
//! without a result, or DEAD after [`DEFAULT_MAX_ATTEMPTS`] leases.

use super::devices::Devices;
use super::events::{self, EventRecord, Events};
use super::workstations::{CertRequestRecord, RequestKind, RequestState, PENDING_QUEUE};
use crate::domain::apps::AppId;
use crate::ports::{Condition, Index, Item, ItemKey, ItemStore, Query, StoreError, WriteOp};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map};

pub const DEFAULT_BATCH: usize = 50;
pub const DEFAULT_MAX_ATTEMPTS: u32 = 5;
/// The errorCode of the event logged when a request dies.
pub const DEAD_ERROR_CODE: i64 = 1_300_010;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IssuedCert {
    pub cert_serial_number: String,
    pub app_id: AppId,
    pub request_id: String,
    pub device_id: String,
    pub named_user: String,
    #[serde(default, rename = "machineUserNameWS")]
    pub machine_user_name_ws: Option<String>,
    pub machine_user_names: Vec<String>,
    pub login_cert: String,
    pub iv_login_cert: String,
    pub login_cert_auth: String,
    pub issuer_key_agreement_public_key: String,
    pub issuer_key_agreement_public_key_auth: String,
    pub login_cert_expiry_date: i64,
    pub signing_cert: String,
    pub issued_at: i64,
    #[serde(default)]
    pub revoked_at: Option<i64>,
    #[serde(default)]
    pub revocation_request_id: Option<String>,
}

impl IssuedCert {
    fn item(&self) -> Result<Item, StoreError> {
        let key = ItemKey::new(
            format!("DEVCERT#{}#{}", self.app_id, self.device_id),
            format!("CERT#{}", self.cert_serial_number),
        );
        Ok(Item::new(key, self)?
            .with_index(Index::Gsi2, ItemKey::new(format!("SERIAL#{}", self.cert_serial_number), "CERT")))
    }
}

/// The lease-expiry message the queue delivers after `requestTimeoutInSecs`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaseExpired {
    #[serde(default, skip_serializing)]
    pub kind: Option<String>,
    pub request_id: String,
    pub lease_id: String,
}

impl LeaseExpired {
    pub const KIND: &'static str = "leaseExpired";

    pub fn new(request_id: &str, lease_id: &str) -> Self {
        Self { kind: None, request_id: request_id.to_owned(), lease_id: lease_id.to_owned() }
    }

    pub fn body(&self) -> String {
        json!({ "kind": Self::KIND, "requestId": self.request_id, "leaseId": self.lease_id }).to_string()
    }
}

/// What handling an expired lease did.
#[derive(Debug, Clone, PartialEq)]
pub enum Expiry {
    /// Back to PENDING for another agent.
    Requeued,
    /// Out of attempts: DEAD, with its event.
    Dead,
    /// Nothing to do (a result came in time, or the lease was already handled).
    Ignored,
}

/// The event a request's result (or death) is reported with.
pub fn result_event(request: &CertRequestRecord, error_code: i64, source: &str, at: i64) -> EventRecord {
    let mut attributes = Map::new();
    attributes.insert("errorCode".into(), json!(error_code));
    attributes.insert("requestId".into(), json!(request.request_id));
    let name = match request.kind {
        RequestKind::LoginCert => {
            attributes.insert("isSuccessful".into(), json!(error_code == 0));
            "WORKSTATION_CERTIFICATE_ISSUED"
        }
        RequestKind::Revocation => "WS_CERTIFICATE_REVOKED",
    };
    if let Some(serial) = &request.cert_serial_number {
        attributes.insert("certSerialNumber".into(), json!(serial));
    }
    EventRecord::new(name, Some(request.app_id.clone()), source, at, attributes)
}

pub struct Certificates<'a> {
    store: &'a dyn ItemStore,
}

impl<'a> Certificates<'a> {
    pub fn new(store: &'a dyn ItemStore) -> Self {
        Self { store }
    }

    /// The oldest pending requests, with the versions they were read at. The index may lag a
    /// lease by moments; [`lease`](Self::lease)'s condition settles that.
    pub async fn pending(&self, limit: usize) -> Result<Vec<(CertRequestRecord, u64)>, StoreError> {
        let page = self.store.query(Query::index(Index::Gsi1, PENDING_QUEUE).limit(limit)).await?;
        page.items
            .iter()
            .map(|item| Ok((item.data::<CertRequestRecord>()?, item.version)))
            .filter(|r: &Result<(CertRequestRecord, u64), StoreError>| {
                r.as_ref().map_or(true, |(req, _)| req.state == RequestState::Pending)
            })
            .collect()
    }

    /// Leases `request` (read at `version`) under `lease_id` until `now` + its timeout and returns
    /// the leased request; `None` if another poll leased it first.
    pub async fn lease(
        &self,
        request: &CertRequestRecord,
        version: u64,
        lease_id: &str,
        now: i64,
    ) -> Result<Option<CertRequestRecord>, StoreError> {
        let mut leased = request.clone();
        leased.state = RequestState::Leased;
        leased.attempts += 1;
        leased.lease_id = Some(lease_id.to_owned());
        leased.leased_until = Some(now + request.request_timeout_in_secs * 1000);
        match self.store.put(leased.item()?, Condition::Version(version)).await {
            Ok(_) => Ok(Some(leased)),
            Err(StoreError::Conflict) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Ends lease `lease_id` of `request_id` if it is still current: back to PENDING, or DEAD
    /// after `max_attempts` leases. Idempotent: a lease already ended or answered is ignored.
    pub async fn expire_lease(
        &self,
        expired: &LeaseExpired,
        max_attempts: u32,
        now: i64,
    ) -> Result<Expiry, StoreError> {
        let key = ItemKey::new(format!("CERTREQ#{}", expired.request_id), "REQUEST");
        for _ in 0..5 {
            let Some(item) = self.store.get(&key).await? else { return Ok(Expiry::Ignored) };
            let mut request: CertRequestRecord = item.data()?;
            if request.state != RequestState::Leased
                || request.lease_id.as_deref() != Some(expired.lease_id.as_str())
            {
                return Ok(Expiry::Ignored);
            }
            request.lease_id = None;
            request.leased_until = None;
            let dead = request.attempts >= max_attempts;
            request.state = if dead { RequestState::Dead } else { RequestState::Pending };
            let event = dead.then(|| result_event(&request, DEAD_ERROR_CODE, "server", now));
            let mut ops =
                vec![WriteOp::Put { item: request.item()?, condition: Condition::Version(item.version) }];
            if let Some(event) = &event {
                ops.push(WriteOp::Put { item: Events::item(event)?, condition: Condition::Absent });
            }
            match self.store.transact(ops).await {
                Ok(()) => {
                    return Ok(match event {
                        Some(event) => {
                            events::log(&event);
                            Expiry::Dead
                        }
                        None => Expiry::Requeued,
                    })
                }
                Err(StoreError::Conflict) => continue,
                Err(e) => return Err(e),
            }
        }
        Err(StoreError::Conflict)
    }

    /// Stores an accepted result: the request DONE or FAILED, what it produced, and its event,
    /// all conditional on the version the request was read at.
    pub async fn settle(
        &self,
        request: &CertRequestRecord,
        version: u64,
        produced: Vec<WriteOp>,
        event: &EventRecord,
    ) -> Result<(), StoreError> {
        let mut ops = produced;
        ops.push(WriteOp::Put { item: request.item()?, condition: Condition::Version(version) });
        ops.push(WriteOp::Put { item: Events::item(event)?, condition: Condition::Absent });
        self.store.transact(ops).await?;
        events::log(event);
        Ok(())
    }

    pub fn issue_op(cert: &IssuedCert) -> Result<WriteOp, StoreError> {
        Ok(WriteOp::Put { item: cert.item()?, condition: Condition::Absent })
    }

    pub fn revoke_op(cert: &IssuedCert, version: u64) -> Result<WriteOp, StoreError> {
        Ok(WriteOp::Put { item: cert.item()?, condition: Condition::Version(version) })
    }

    pub async fn by_serial(&self, serial: &str) -> Result<Option<(IssuedCert, u64)>, StoreError> {
        let page = self.store.query(Query::index(Index::Gsi2, format!("SERIAL#{serial}")).limit(1)).await?;
        let Some(found) = page.items.first() else { return Ok(None) };
        // Read the item itself: the index may lag.
        match self.store.get(&found.key).await? {
            Some(item) => Ok(Some((item.data()?, item.version))),
            None => Ok(None),
        }
    }

    pub async fn of_device(&self, app: &AppId, device_id: &str) -> Result<Vec<IssuedCert>, StoreError> {
        let page = self.store.query(Query::table(format!("DEVCERT#{app}#{device_id}")).limit(100)).await?;
        page.items.iter().map(Item::data).collect()
    }

    /// Queues a revocation of `cert` (read at `version`) in one transaction with the request.
    pub async fn queue_revocation(
        &self,
        cert: &IssuedCert,
        version: u64,
        request: &CertRequestRecord,
    ) -> Result<(), StoreError> {
        let mut marked = cert.clone();
        marked.revocation_request_id = Some(request.request_id.clone());
        self.store
            .transact(vec![
                WriteOp::Put { item: marked.item()?, condition: Condition::Version(version) },
                WriteOp::Put { item: request.item()?, condition: Condition::Absent },
            ])
            .await
    }

    /// Records the names the directory found for the user (machineUserNames) as aliases.
    pub async fn remember_names(
        &self,
        app: &AppId,
        named_user: &str,
        names: &[String],
    ) -> Result<(), StoreError> {
        Devices::new(self.store).add_aliases(app, named_user, names).await
    }
}
