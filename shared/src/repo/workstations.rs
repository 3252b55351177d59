//! Workstation enrollment, pairing and the certificate requests a pairing queues. Layout:
//!
//! | pk | sk | item |
//! |---|---|---|
//! | `ENRSESSION#<app>#<sessionId>` | `SESSION` | an enrollment session; TTL its expiry (a day once completed) |
//! | `ENROLL#<app>#<machineId>` | `ENROLL` | the machine's enrollment |
//! | `PAIR#<app>#<machineId>` | `DEVICE#<deviceId>` | a workstation–device pairing |
//! | `CERTREQ#<requestId>` | `REQUEST` | a certificate request; while PENDING also in `gsi1` under `CERTQ#PENDING` by creation time |
//! | `ENCCTR#<app>#<deviceId>` | `COUNTER` | the device's encryption counter |

use crate::domain::apps::AppId;
use crate::ports::keys::Sealed;
use crate::ports::{Condition, Increment, Index, Item, ItemKey, ItemStore, StoreError, WriteOp};
use crate::repo::events::{self, EventRecord, Events};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum SessionState {
    Open,
    Completed,
    Failed,
}

/// What a complete call reported; a repeat must report the same.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Completion {
    pub error_code: i64,
    pub machine_name: String,
    pub machine_id: String,
    pub machine_user_name: String,
    pub machine_version: String,
    pub signing_cert: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EnrollmentSession {
    pub session_id: String,
    pub app_id: AppId,
    pub named_user: String,
    pub device_id: String,
    pub machine_user_name_ws: String,
    pub created_at: i64,
    pub expires_at: i64,
    /// Machine details pinned at enroll time (when the workstation sent them) or by the first
    /// complete call; later calls are cross-checked against them.
    #[serde(default)]
    pub machine_id: Option<String>,
    #[serde(default)]
    pub machine_version: Option<String>,
    pub state: SessionState,
    #[serde(default)]
    pub completion: Option<Completion>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EnrollmentRecord {
    pub app_id: AppId,
    pub machine_id: String,
    pub machine_name: String,
    pub machine_version: String,
    pub machine_user_name: String,
    pub named_user: String,
    pub device_id: String,
    pub signing_cert: String,
    pub session_id: String,
    pub enrolled_at: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PairingRecord {
    pub app_id: AppId,
    pub machine_id: String,
    pub device_id: String,
    pub named_user: String,
    #[serde(default)]
    pub machine_name: Option<String>,
    #[serde(default)]
    pub machine_user_name_ws: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
    pub certificate_request_id: String,
    /// `{tokens, tokensAuth}`, sealed under the app's envelope context.
    #[serde(default)]
    pub offline: Option<Sealed>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum RequestKind {
    LoginCert,
    Revocation,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum RequestState {
    Pending,
    Leased,
    Done,
    Failed,
    Dead,
}

/// A certificate request: every LoginCertRequest (or RevokedCertRequest) field, and its state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CertRequestRecord {
    pub request_id: String,
    pub kind: RequestKind,
    pub app_id: AppId,
    pub state: RequestState,
    pub request_timeout_in_secs: i64,
    #[serde(default)]
    pub machine_user_name_ws: Option<String>,
    #[serde(default)]
    pub machine_user_name: Option<String>,
    #[serde(default)]
    pub device_id: Option<String>,
    #[serde(default)]
    pub device_key_agreement_public_key: Option<String>,
    #[serde(default)]
    pub enc_counter: Option<String>,
    #[serde(default)]
    pub cert_serial_number: Option<String>,
    pub created_at: i64,
    /// How many times it was leased.
    #[serde(default)]
    pub attempts: u32,
    #[serde(default)]
    pub lease_id: Option<String>,
    /// Epoch ms at which the current lease ends.
    #[serde(default)]
    pub leased_until: Option<i64>,
    /// SHA-256 of the posted result, so the same result posted again is recognised.
    #[serde(default)]
    pub result_digest: Option<String>,
    #[serde(default)]
    pub error_code: Option<i64>,
    #[serde(default)]
    pub error_message: Option<String>,
}

pub const PENDING_QUEUE: &str = "CERTQ#PENDING";

impl CertRequestRecord {
    /// A new PENDING request of `kind` with a fresh id; the kind's own fields are set by the
    /// caller.
    pub fn new(kind: RequestKind, app_id: AppId, request_timeout_in_secs: i64, created_at: i64) -> Self {
        Self {
            request_id: uuid::Uuid::new_v4().to_string(),
            kind,
            app_id,
            state: RequestState::Pending,
            request_timeout_in_secs,
            machine_user_name_ws: None,
            machine_user_name: None,
            device_id: None,
            device_key_agreement_public_key: None,
            enc_counter: None,
            cert_serial_number: None,
            created_at,
            attempts: 0,
            lease_id: None,
            leased_until: None,
            result_digest: None,
            error_code: None,
            error_message: None,
        }
    }

    pub fn item(&self) -> Result<Item, StoreError> {
        let item = Item::new(ItemKey::new(format!("CERTREQ#{}", self.request_id), "REQUEST"), self)?;
        Ok(match self.state {
            RequestState::Pending => item.with_index(
                Index::Gsi1,
                ItemKey::new(PENDING_QUEUE, format!("{:013}#{}", self.created_at, self.request_id)),
            ),
            _ => item,
        })
    }
}

fn session_key(app: &AppId, session_id: &str) -> ItemKey {
    ItemKey::new(format!("ENRSESSION#{app}#{session_id}"), "SESSION")
}

fn enrollment_key(app: &AppId, machine_id: &str) -> ItemKey {
    ItemKey::new(format!("ENROLL#{app}#{machine_id}"), "ENROLL")
}

fn pairing_key(app: &AppId, machine_id: &str, device_id: &str) -> ItemKey {
    ItemKey::new(format!("PAIR#{app}#{machine_id}"), format!("DEVICE#{device_id}"))
}

pub const COMPLETED_SESSION_KEPT_SECS: i64 = 24 * 3600;

pub struct Workstations<'a> {
    store: &'a dyn ItemStore,
}

impl<'a> Workstations<'a> {
    pub fn new(store: &'a dyn ItemStore) -> Self {
        Self { store }
    }

    /// Opens the session, or refreshes it when the same user enrolls again under the same id.
    /// [`StoreError::Conflict`] if the id belongs to another user's session.
    pub async fn open_session(&self, session: &EnrollmentSession) -> Result<(), StoreError> {
        let key = session_key(&session.app_id, &session.session_id);
        let item = Item::new(key.clone(), session)?.with_ttl(Some(session.expires_at / 1000));
        match self.store.put(item.clone(), Condition::Absent).await {
            Ok(_) => Ok(()),
            Err(StoreError::Conflict) => {
                let Some(existing) = self.store.get(&key).await? else { return Err(StoreError::Conflict) };
                let current: EnrollmentSession = existing.data()?;
                if current.named_user != session.named_user || current.state != SessionState::Open {
                    return Err(StoreError::Conflict);
                }
                self.store.put(item, Condition::Version(existing.version)).await.map(|_| ())
            }
            Err(e) => Err(e),
        }
    }

    pub async fn session(
        &self,
        app: &AppId,
        session_id: &str,
    ) -> Result<Option<(EnrollmentSession, u64)>, StoreError> {
        match self.store.get(&session_key(app, session_id)).await? {
            Some(item) => Ok(Some((item.data()?, item.version))),
            None => Ok(None),
        }
    }

    /// Closes the session with its outcome, and on success persists the enrollment, with the
    /// event, all in one transaction conditional on the session's version.
    pub async fn close_session(
        &self,
        session: &EnrollmentSession,
        version: u64,
        enrollment: Option<&EnrollmentRecord>,
        event: &EventRecord,
        now: i64,
    ) -> Result<(), StoreError> {
        let key = session_key(&session.app_id, &session.session_id);
        let mut ops = vec![
            WriteOp::Put {
                item: Item::new(key, session)?.with_ttl(Some(now / 1000 + COMPLETED_SESSION_KEPT_SECS)),
                condition: Condition::Version(version),
            },
            WriteOp::Put { item: Events::item(event)?, condition: Condition::Absent },
        ];
        if let Some(enrollment) = enrollment {
            ops.push(WriteOp::Put {
                item: Item::new(enrollment_key(&enrollment.app_id, &enrollment.machine_id), enrollment)?,
                condition: Condition::Any,
            });
        }
        self.store.transact(ops).await?;
        events::log(event);
        Ok(())
    }

    pub async fn enrollment(
        &self,
        app: &AppId,
        machine_id: &str,
    ) -> Result<Option<EnrollmentRecord>, StoreError> {
        self.store.get(&enrollment_key(app, machine_id)).await?.map(|i| i.data()).transpose()
    }

    /// The device's next encryption counter value.
    pub async fn next_enc_counter(&self, app: &AppId, device_id: &str) -> Result<i64, StoreError> {
        let key = ItemKey::new(format!("ENCCTR#{app}#{device_id}"), "COUNTER");
        self.store.increment(Increment { key, by: 1, limit: None, expires_at: None }).await
    }

    /// The device's current encryption counter value (0 before the first request).
    pub async fn enc_counter(&self, app: &AppId, device_id: &str) -> Result<i64, StoreError> {
        let key = ItemKey::new(format!("ENCCTR#{app}#{device_id}"), "COUNTER");
        let item = self.store.get(&key).await?;
        Ok(item
            .and_then(|i| i.attrs.get(crate::ports::store::COUNTER_ATTR).and_then(|n| n.as_i64()))
            .unwrap_or(0))
    }

    /// Creates the pairing and queues its certificate request in one transaction. `Ok(false)` if
    /// the pairing exists already (nothing is written then).
    pub async fn pair(
        &self,
        pairing: &PairingRecord,
        request: &CertRequestRecord,
    ) -> Result<bool, StoreError> {
        let key = pairing_key(&pairing.app_id, &pairing.machine_id, &pairing.device_id);
        let ops = vec![
            WriteOp::Put { item: Item::new(key, pairing)?, condition: Condition::Absent },
            WriteOp::Put { item: request.item()?, condition: Condition::Absent },
        ];
        match self.store.transact(ops).await {
            Ok(()) => Ok(true),
            Err(StoreError::Conflict) => Ok(false),
            Err(e) => Err(e),
        }
    }

    pub async fn pairing(
        &self,
        app: &AppId,
        machine_id: &str,
        device_id: &str,
    ) -> Result<Option<(PairingRecord, u64)>, StoreError> {
        match self.store.get(&pairing_key(app, machine_id, device_id)).await? {
            Some(item) => Ok(Some((item.data()?, item.version))),
            None => Ok(None),
        }
    }

    pub async fn replace_pairing(&self, pairing: &PairingRecord, version: u64) -> Result<(), StoreError> {
        let key = pairing_key(&pairing.app_id, &pairing.machine_id, &pairing.device_id);
        self.store.put(Item::new(key, pairing)?, Condition::Version(version)).await.map(|_| ())
    }

    pub async fn cert_request(
        &self,
        request_id: &str,
    ) -> Result<Option<(CertRequestRecord, u64)>, StoreError> {
        let key = ItemKey::new(format!("CERTREQ#{request_id}"), "REQUEST");
        match self.store.get(&key).await? {
            Some(item) => Ok(Some((item.data()?, item.version))),
            None => Ok(None),
        }
    }
}
