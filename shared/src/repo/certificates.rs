//! Certificate requests and issued certificates: persistence only (the lifecycle is
//! [`crate::domain::certificates`]). Layout:
//!
//! | pk | sk | item |
//! |---|---|---|
//! | `CERTREQ#<requestId>` | `REQUEST` | a certificate request; while PENDING also in `gsi1` under `CERTQ#PENDING` by creation time |
//! | `DEVCERT#<app>#<deviceId>` | `CERT#<serial>` | an issued (device-encrypted) login certificate; `gsi2` `SERIAL#<serial>` finds it by serial |
//! | `SERIAL#<serial>` | `SERIAL` | the serial taken, pointing at its certificate: written with an absent-condition in the issuing transaction, so a serial is issued once |
//!
//! Every write is conditional on the version the request was read at, so of two callers that
//! decided on the same state only one persists; the other reloads and decides again.

use super::devices::Devices;
use super::events::{self, Events};
use crate::domain::apps::AppId;
use crate::domain::certificates::{CertRequest, Expiry, IssuedCert, RequestState};
use crate::domain::events::EventRecord;
use crate::ports::{Condition, Cursor, Index, Item, ItemKey, ItemStore, Query, StoreError, WriteOp};

pub const DEFAULT_BATCH: usize = 50;
pub const PENDING_QUEUE: &str = "CERTQ#PENDING";

fn request_key(request_id: &str) -> ItemKey {
    ItemKey::new(format!("CERTREQ#{request_id}"), "REQUEST")
}

/// A request as an item; a PENDING one is also in the pending index, oldest first.
pub fn request_item(request: &CertRequest) -> Result<Item, StoreError> {
    let item = Item::new(request_key(&request.request_id), request)?;
    Ok(match request.state {
        RequestState::Pending => item.with_index(
            Index::Gsi1,
            ItemKey::new(
                PENDING_QUEUE,
                format!("{:013}#{}", request.created_at.as_millis(), request.request_id),
            ),
        ),
        _ => item,
    })
}

/// An issued certificate as an item, findable by serial.
pub fn cert_item(cert: &IssuedCert) -> Result<Item, StoreError> {
    let key = ItemKey::new(
        format!("DEVCERT#{}#{}", cert.app_id, cert.device_id),
        format!("CERT#{}", cert.cert_serial_number),
    );
    Ok(Item::new(key, cert)?
        .with_index(Index::Gsi2, ItemKey::new(format!("SERIAL#{}", cert.cert_serial_number), "CERT")))
}

/// The writes of a queued revocation, to join another transaction: the certificate (read at
/// `version`) pointing at the new request, and the request.
pub fn revocation_ops(
    marked: &IssuedCert,
    version: u64,
    request: &CertRequest,
) -> Result<Vec<WriteOp>, StoreError> {
    Ok(vec![
        WriteOp::Put { item: cert_item(marked)?, condition: Condition::Version(version) },
        WriteOp::Put { item: request_item(request)?, condition: Condition::Absent },
    ])
}

fn serial_key(serial: &str) -> ItemKey {
    ItemKey::new(format!("SERIAL#{serial}"), "SERIAL")
}

/// A taken serial and where its certificate is.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct SerialOwner {
    pk: String,
    sk: String,
}

/// What a settled result writes besides the request and its event.
#[derive(Debug, Clone)]
pub enum Effect {
    None,
    /// A new certificate for the device.
    Issue(IssuedCert),
    /// The revoked certificate, read at this version.
    Revoke(IssuedCert, u64),
}

#[derive(Clone, Copy)]
pub struct Certificates<'a> {
    store: &'a dyn ItemStore,
}

impl<'a> Certificates<'a> {
    pub fn new(store: &'a dyn ItemStore) -> Self {
        Self { store }
    }

    /// The oldest pending requests, with the versions they were read at. The index may lag a
    /// lease by moments; [`persist_lease`](Self::persist_lease)'s condition settles that.
    pub async fn pending(&self, limit: usize) -> Result<Vec<(CertRequest, u64)>, StoreError> {
        let page = self.store.query(Query::index(Index::Gsi1, PENDING_QUEUE).limit(limit)).await?;
        let mut pending = Vec::with_capacity(page.items.len());
        for item in &page.items {
            let request: CertRequest = item.data()?;
            if request.state == RequestState::Pending {
                pending.push((request, item.version));
            }
        }
        Ok(pending)
    }

    pub async fn request(&self, request_id: &str) -> Result<Option<(CertRequest, u64)>, StoreError> {
        match self.store.get(&request_key(request_id)).await? {
            Some(item) => Ok(Some((item.data()?, item.version))),
            None => Ok(None),
        }
    }

    /// Writes a lease decided on the request read at `version`; `Ok(false)` if another poll
    /// leased it first.
    pub async fn persist_lease(&self, leased: &CertRequest, version: u64) -> Result<bool, StoreError> {
        match self.store.put(request_item(leased)?, Condition::Version(version)).await {
            Ok(_) => Ok(true),
            Err(StoreError::Conflict) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Writes an ended lease (with the death event, in the same transaction).
    pub async fn persist_expiry(&self, expiry: &Expiry, version: u64) -> Result<(), StoreError> {
        match expiry {
            Expiry::Ignored => Ok(()),
            Expiry::Requeued(request) => {
                self.store.put(request_item(request)?, Condition::Version(version)).await.map(|_| ())
            }
            Expiry::Dead(request, event) => self.write_with_event(request, version, Vec::new(), event).await,
        }
    }

    /// Stores an accepted result: the settled request, what it produced, and its event, all
    /// conditional on the version the request was read at.
    pub async fn settle(
        &self,
        request: &CertRequest,
        version: u64,
        effect: Effect,
        event: &EventRecord,
    ) -> Result<(), StoreError> {
        let produced = match effect {
            Effect::None => Vec::new(),
            Effect::Issue(cert) => {
                let item = cert_item(&cert)?;
                let owner = SerialOwner { pk: item.key.pk.clone(), sk: item.key.sk.clone() };
                vec![
                    WriteOp::Put { item, condition: Condition::Absent },
                    WriteOp::Put {
                        item: Item::new(serial_key(&cert.cert_serial_number), &owner)?,
                        condition: Condition::Absent,
                    },
                ]
            }
            Effect::Revoke(cert, cert_version) => {
                vec![WriteOp::Put { item: cert_item(&cert)?, condition: Condition::Version(cert_version) }]
            }
        };
        self.write_with_event(request, version, produced, event).await
    }

    async fn write_with_event(
        &self,
        request: &CertRequest,
        version: u64,
        mut ops: Vec<WriteOp>,
        event: &EventRecord,
    ) -> Result<(), StoreError> {
        ops.push(WriteOp::Put { item: request_item(request)?, condition: Condition::Version(version) });
        ops.push(WriteOp::Put { item: Events::item(event)?, condition: Condition::Absent });
        self.store.transact(ops).await?;
        events::log(event);
        Ok(())
    }

    /// The certificate with this serial: found through its serial item (a consistent read), or
    /// through the index for certificates issued before serial items existed.
    pub async fn by_serial(&self, serial: &str) -> Result<Option<(IssuedCert, u64)>, StoreError> {
        let cert_key = match self.store.get(&serial_key(serial)).await? {
            Some(owner) => {
                let owner: SerialOwner = owner.data()?;
                ItemKey::new(owner.pk, owner.sk)
            }
            None => {
                let page =
                    self.store.query(Query::index(Index::Gsi2, format!("SERIAL#{serial}")).limit(1)).await?;
                let Some(found) = page.items.first() else { return Ok(None) };
                found.key.clone()
            }
        };
        // Read the item itself: the index may lag.
        match self.store.get(&cert_key).await? {
            Some(item) => Ok(Some((item.data()?, item.version))),
            None => Ok(None),
        }
    }

    /// The query over a device's certificates (for checking a client's cursor).
    pub fn device_query(app: &AppId, device_id: &str) -> Query {
        Query::table(format!("DEVCERT#{app}#{device_id}"))
    }

    /// A page of the device's certificates, in serial order.
    pub async fn of_device(
        &self,
        app: &AppId,
        device_id: &str,
        limit: usize,
        cursor: Option<Cursor>,
    ) -> Result<(Vec<IssuedCert>, Option<Cursor>), StoreError> {
        let page = self.store.query(Self::device_query(app, device_id).limit(limit).after(cursor)).await?;
        let certs = page.items.iter().map(Item::data).collect::<Result<_, _>>()?;
        Ok((certs, page.cursor))
    }

    /// Every certificate of the device, page by page.
    pub async fn all_of_device(&self, app: &AppId, device_id: &str) -> Result<Vec<IssuedCert>, StoreError> {
        let (mut all, mut cursor) = (Vec::new(), None);
        loop {
            let (page, next) = self.of_device(app, device_id, 100, cursor).await?;
            all.extend(page);
            match next {
                Some(next) => cursor = Some(next),
                None => return Ok(all),
            }
        }
    }

    /// Stores a queued revocation: the certificate (read at `version`) pointing at it, and the
    /// new request, in one transaction.
    pub async fn queue_revocation(
        &self,
        marked: &IssuedCert,
        version: u64,
        request: &CertRequest,
    ) -> Result<(), StoreError> {
        self.store.transact(revocation_ops(marked, version, request)?).await
    }

    /// Records the names the directory found for the user (machineUserNames) as aliases;
    /// returns those that are another user's, with that user.
    pub async fn remember_names(
        &self,
        app: &AppId,
        named_user: &str,
        names: &[String],
    ) -> Result<Vec<(String, String)>, StoreError> {
        Devices::new(self.store).add_aliases(app, named_user, names).await
    }
}
