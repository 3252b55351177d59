//! Pairing a workstation with a user's registered device (`/rp/api/client/reg`; DECISIONS §3–5):
//! creating one queues the device's login-certificate request; updates change the machine's
//! name or its offline tokens (sealed before they reach this type).

use super::apps::{AppId, OfflineAccess};
use super::certificates::{CertRequest, RequestKind};
use super::devices;
use super::events::EventRecord;
use super::offline::{OfflineError, OfflineLock, OfflineSet};
use super::time::EpochMillis;
use super::validate::{self, FieldError};
use crate::boundary::{KeyError, StoreError};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Pairing {
    pub app_id: AppId,
    pub machine_id: String,
    pub device_id: String,
    pub named_user: String,
    #[serde(default)]
    pub machine_name: Option<String>,
    #[serde(default)]
    pub machine_user_name_ws: Option<String>,
    pub created_at: EpochMillis,
    pub updated_at: EpochMillis,
    pub certificate_request_id: String,
    /// The id of the access token that created the pairing: its workstation. Only it sees the
    /// offline PINs. `None` on pairings made before owners were recorded: nobody sees them.
    #[serde(default)]
    pub owner_token_id: Option<String>,
    /// The offline PINs, sealed under a context naming app, machine and device.
    #[serde(default)]
    pub offline_set: Option<OfflineSet>,
    #[serde(default)]
    pub lock: OfflineLock,
}

/// The workstation's offline PINs (`workstation.offline`) as a request sends them, in the clear
/// only in memory. (An answer's schema is `OfflineTokensView`.)
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OfflineTokens {
    #[schema(min_length = 1, max_length = 16384)]
    pub tokens: String,
    #[schema(min_length = 1, max_length = 1024)]
    pub tokens_auth: String,
}

/// The workstation's offline PINs as an answer carries them: empty strings when the pairing
/// holds no PINs or they are not the caller's to see.
#[derive(utoipa::ToSchema)]
#[schema(rename_all = "camelCase")]
#[allow(dead_code)] // Read only by the schema derive.
pub struct OfflineTokensView {
    #[schema(max_length = 16384)]
    tokens: String,
    #[schema(max_length = 1024)]
    tokens_auth: String,
}

impl OfflineTokens {
    pub fn validate(&self) -> Result<(), FieldError> {
        validate::text("offline.tokens", &self.tokens, 1, 16 * 1024)?;
        validate::text("offline.tokensAuth", &self.tokens_auth, 1, 1024)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PairingError {
    #[error("deviceId: no registered device of this app has this id")]
    UnknownDevice,
    #[error("no pairing of this machine and device")]
    NotFound,
    #[error("deviceId: no device '{0}' in this app")]
    DeviceNotFound(String),
    #[error("machineId: this machine has no completed enrollment for the device's user")]
    NotEnrolled,
    #[error("machineUserNameWS: '{0}' is not a name of the device's user")]
    NameOfAnotherUser(String),
    #[error(transparent)]
    Offline(#[from] OfflineError),
    #[error(transparent)]
    Cert(#[from] super::certificates::CertError),
    #[error(transparent)]
    Invalid(#[from] FieldError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Keys(#[from] KeyError),
}

crate::conflict_when_store_conflicts!(PairingError);

/// What the pairing's device is, as the login-certificate request needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct PairedDevice {
    pub device_id: String,
    pub named_user: String,
    pub key_agreement_public_key: String,
}

/// The user's workstation name as the login-certificate request gives it to the agent: the
/// pairing's own `machineUserNameWS`, else the one the machine enrolled under, else the first
/// alias (a registration link's); `None` when the server knows none.
pub fn known_workstation_name(
    from_pairing: Option<&str>,
    from_enrollment: &str,
    aliases: &[String],
) -> Option<String> {
    from_pairing
        .filter(|n| !n.is_empty())
        .or(Some(from_enrollment).filter(|n| !n.is_empty()))
        .or(aliases.first().map(String::as_str))
        .map(str::to_owned)
}

impl Pairing {
    /// A new pairing of the workstation `owner_token_id` and the login-certificate request it
    /// queues for the device, under the device's next encryption counter.
    pub fn create(
        app_id: AppId,
        request: &NewPairing,
        device: &PairedDevice,
        owner_token_id: &str,
        enc_counter: i64,
        request_timeout_in_secs: i64,
        now: EpochMillis,
    ) -> (Pairing, CertRequest) {
        let cert_request = CertRequest {
            machine_user_name_ws: request.machine_user_name_ws.clone(),
            machine_user_name: Some(device.named_user.clone()),
            device_id: Some(device.device_id.clone()),
            device_key_agreement_public_key: Some(device.key_agreement_public_key.clone()),
            enc_counter: Some(enc_counter.to_string()),
            machine_id: Some(request.machine_id.clone()),
            ..CertRequest::new(RequestKind::LoginCert, app_id.clone(), request_timeout_in_secs, now)
        };
        let pairing = Pairing {
            app_id,
            machine_id: request.machine_id.clone(),
            device_id: device.device_id.clone(),
            named_user: device.named_user.clone(),
            machine_name: request.machine_name.clone(),
            machine_user_name_ws: request.machine_user_name_ws.clone(),
            created_at: now,
            updated_at: now,
            certificate_request_id: cert_request.request_id.clone(),
            owner_token_id: Some(owner_token_id.to_owned()),
            offline_set: None,
            lock: OfflineLock::default(),
        };
        (pairing, cert_request)
    }

    /// Whether the access token `token_id` is this pairing's workstation.
    pub fn is_owned_by(&self, token_id: &str) -> bool {
        self.owner_token_id.as_deref() == Some(token_id)
    }

    /// Only the pairing's workstation changes its offline access.
    pub fn require_owner(&self, token_id: &str) -> Result<(), OfflineError> {
        if self.is_owned_by(token_id) {
            Ok(())
        } else {
            Err(OfflineError::NotOwner)
        }
    }

    /// The pairing after an update: a new machine name and/or a new offline set.
    pub fn update(
        &self,
        machine_name: Option<&str>,
        offline: Option<&OfflineSet>,
        now: EpochMillis,
    ) -> Pairing {
        let mut next = self.clone();
        if let Some(name) = machine_name {
            next.machine_name = Some(name.to_owned());
        }
        if let Some(set) = offline {
            next.offline_set = Some(set.clone());
        }
        next.updated_at = now.max(self.updated_at);
        next
    }

    /// Why the offline PINs are not shown to `token_id` at `now`, if they are not.
    pub fn hidden_because(
        &self,
        token_id: Option<&str>,
        settings: &OfflineAccess,
        now: EpochMillis,
    ) -> Option<&'static str> {
        if !settings.enabled {
            Some("offlineDisabled")
        } else if token_id.is_none_or(|t| !self.is_owned_by(t)) {
            Some("notOwner")
        } else if self.lock.check(now).is_err() {
            Some("locked")
        } else {
            match &self.offline_set {
                None => Some("noTokens"),
                Some(set) if !set.is_valid(now) => Some("expired"),
                Some(_) => None,
            }
        }
    }

    /// The pairing locked until `now` + `lockout_secs`, and the event that reports it.
    pub fn locked(
        &self,
        lockout_secs: i64,
        attempts: i64,
        source: &str,
        now: EpochMillis,
    ) -> (Pairing, EventRecord) {
        let mut next = self.clone();
        next.lock = OfflineLock { locked_until: Some(now.plus_secs(lockout_secs)) };
        next.updated_at = now.max(self.updated_at);
        let attrs =
            super::events::attributes(&[("machineId", &self.machine_id), ("deviceId", &self.device_id)]);
        let mut event = EventRecord::new(OFFLINE_LOCKED_EVENT, Some(self.app_id.clone()), source, now, attrs);
        event.attributes.insert("wrongAttempts".into(), attempts.into());
        (next, event)
    }

    /// The event that reports this pairing's removal.
    pub fn unpaired_event(&self, source: &str, revocations: usize, now: EpochMillis) -> EventRecord {
        let attrs =
            super::events::attributes(&[("machineId", &self.machine_id), ("deviceId", &self.device_id)]);
        let mut event = EventRecord::new(UNPAIRED_EVENT, Some(self.app_id.clone()), source, now, attrs);
        event.attributes.insert("revocationsQueued".into(), (revocations as i64).into());
        event
    }
}

pub const OFFLINE_LOCKED_EVENT: &str = "OFFLINE_ACCESS_LOCKED";
pub const UNPAIRED_EVENT: &str = "WORKSTATION_UNPAIRED";
pub const DEVICE_REVOKED_EVENT: &str = "DEVICE_REVOKED";
/// A name claimed for a user while it belongs to another (or to nobody the claim may create).
pub const NAME_CLAIM_REFUSED_EVENT: &str = "NAME_CLAIM_REFUSED";

/// The body of `POST /rp/api/client/reg`.
#[derive(Debug, Clone, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PairRequest {
    #[schema(pattern = "^[A-Za-z0-9._:-]{1,128}$")]
    pub machine_id: String,
    #[schema(pattern = "^[A-Za-z0-9._:-]{1,128}$")]
    pub device_id: String,
    #[serde(default)]
    #[schema(min_length = 1, max_length = 255)]
    pub machine_name: Option<String>,
    #[serde(default, rename = "machineUserNameWS")]
    #[schema(min_length = 1, max_length = 255)]
    pub machine_user_name_ws: Option<String>,
    /// The workstation's first offline PINs, stored with the pairing (seed step 2).
    #[serde(default)]
    pub offline: Option<OfflineTokens>,
}

/// A pairing request, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct NewPairing {
    pub machine_id: String,
    pub device_id: String,
    pub machine_name: Option<String>,
    pub machine_user_name_ws: Option<String>,
    pub offline: Option<OfflineTokens>,
}

impl TryFrom<PairRequest> for NewPairing {
    type Error = FieldError;

    fn try_from(body: PairRequest) -> Result<Self, FieldError> {
        let machine_id = devices::identifier("machineId", &body.machine_id)?;
        let device_id = devices::identifier("deviceId", &body.device_id)?;
        if let Some(name) = &body.machine_name {
            validate::text("machineName", name, 1, 255)?;
        }
        if let Some(name) = &body.machine_user_name_ws {
            validate::text("machineUserNameWS", name, 1, 255)?;
        }
        if let Some(tokens) = &body.offline {
            tokens.validate()?;
        }
        Ok(Self {
            machine_id,
            device_id,
            machine_name: body.machine_name,
            machine_user_name_ws: body.machine_user_name_ws,
            offline: body.offline,
        })
    }
}

/// The body of `PATCH /rp/api/client/reg`: at least one of `machineName`, `offline`,
/// `usedTokenIds` and `failedAttempts`, not `null`.
#[derive(Debug, Clone, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PairingUpdateRequest {
    #[schema(pattern = "^[A-Za-z0-9._:-]{1,128}$")]
    pub machine_id: String,
    #[schema(pattern = "^[A-Za-z0-9._:-]{1,128}$")]
    pub device_id: String,
    #[serde(default)]
    #[schema(min_length = 1, max_length = 255)]
    pub machine_name: Option<String>,
    #[serde(default)]
    pub offline: Option<OfflineTokens>,
    /// Ids of offline PINs used on the workstation: each is deleted from the set.
    #[serde(default)]
    #[schema(schema_with = optional_pin_ids_schema)]
    pub used_token_ids: Option<Vec<String>>,
    /// Wrong offline PIN entries since the last report; enough of them lock offline access.
    #[serde(default)]
    #[schema(minimum = 1, maximum = 100)]
    pub failed_attempts: Option<i64>,
}

/// A pairing update, checked: at least one change.
#[derive(Debug, Clone, PartialEq)]
pub struct PairingUpdate {
    pub machine_id: String,
    pub device_id: String,
    pub machine_name: Option<String>,
    pub offline: Option<OfflineTokens>,
    pub used_token_ids: Vec<String>,
    pub failed_attempts: i64,
}

impl PairingUpdate {
    /// Whether the update touches offline access (owner only, and refused while locked).
    pub fn touches_offline(&self) -> bool {
        self.offline.is_some() || !self.used_token_ids.is_empty() || self.failed_attempts > 0
    }
}

/// How many PIN ids one request may name, and how long each may be.
const MAX_PIN_IDS: usize = 100;
const MAX_PIN_ID_LEN: usize = 64;

/// Checks a list of PIN ids named at `field`.
pub fn pin_ids(field: &str, ids: &[String]) -> Result<(), FieldError> {
    if ids.is_empty() || ids.len() > MAX_PIN_IDS {
        return Err(FieldError::new(field, format!("must name 1 to {MAX_PIN_IDS} PIN ids")));
    }
    for (i, id) in ids.iter().enumerate() {
        validate::text(&format!("{field}[{i}]"), id, 1, MAX_PIN_ID_LEN)?;
    }
    Ok(())
}

/// The document's schema of what [`pin_ids`] accepts.
pub fn pin_ids_schema() -> utoipa::openapi::schema::Array {
    validate::texts_schema(1, MAX_PIN_IDS, MAX_PIN_ID_LEN).build()
}

/// The same, for an optional field (absent or `null`: none).
fn optional_pin_ids_schema() -> utoipa::openapi::schema::Array {
    let mut list = pin_ids_schema();
    list.schema_type = validate::or_null(utoipa::openapi::Type::Array);
    list
}

impl TryFrom<PairingUpdateRequest> for PairingUpdate {
    type Error = FieldError;

    fn try_from(body: PairingUpdateRequest) -> Result<Self, FieldError> {
        let machine_id = devices::identifier("machineId", &body.machine_id)?;
        let device_id = devices::identifier("deviceId", &body.device_id)?;
        if body.machine_name.is_none()
            && body.offline.is_none()
            && body.used_token_ids.is_none()
            && body.failed_attempts.is_none()
        {
            return Err(FieldError::new(
                "body",
                "an update must give machineName, offline, usedTokenIds or failedAttempts",
            ));
        }
        if let Some(name) = &body.machine_name {
            validate::text("machineName", name, 1, 255)?;
        }
        if let Some(tokens) = &body.offline {
            tokens.validate()?;
        }
        if let Some(ids) = &body.used_token_ids {
            pin_ids("usedTokenIds", ids)?;
        }
        if let Some(n) = body.failed_attempts {
            validate::range("failedAttempts", n, 1, 100)?;
        }
        Ok(Self {
            machine_id,
            device_id,
            machine_name: body.machine_name,
            offline: body.offline,
            used_token_ids: body.used_token_ids.unwrap_or_default(),
            failed_attempts: body.failed_attempts.unwrap_or(0),
        })
    }
}

/// `?machineId=&deviceId=` of `GET` and `DELETE /rp/api/client/reg` (`appId` for an admin's
/// DELETE).
#[derive(Debug, Clone, Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct PairingQuery {
    // Read as options so that a missing one is a 400 naming it (`PairingKey`).
    #[param(required = true, value_type = String, pattern = "^[A-Za-z0-9._:-]{1,128}$")]
    pub machine_id: Option<String>,
    #[param(required = true, value_type = String, pattern = "^[A-Za-z0-9._:-]{1,128}$")]
    pub device_id: Option<String>,
    #[serde(default)]
    #[param(pattern = "^[A-Za-z][A-Za-z0-9_.-]{0,63}$")]
    pub app_id: Option<String>,
}

/// Which pairing: machine and device.
#[derive(Debug, Clone, PartialEq)]
pub struct PairingKey {
    pub machine_id: String,
    pub device_id: String,
}

impl TryFrom<PairingQuery> for PairingKey {
    type Error = FieldError;

    fn try_from(query: PairingQuery) -> Result<Self, FieldError> {
        let required = |field: &str, value: Option<String>| {
            value
                .ok_or_else(|| FieldError::new(field, "is required"))
                .and_then(|v| devices::identifier(field, &v))
        };
        Ok(Self {
            machine_id: required("machineId", query.machine_id)?,
            device_id: required("deviceId", query.device_id)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_workstation_name_comes_from_the_first_known_mapping() {
        let aliases = ["CORP\\link".to_owned()];
        assert_eq!(
            known_workstation_name(Some("CORP\\own"), "CORP\\enrolled", &aliases).as_deref(),
            Some("CORP\\own")
        );
        assert_eq!(
            known_workstation_name(Some(""), "CORP\\enrolled", &aliases).as_deref(),
            Some("CORP\\enrolled")
        );
        assert_eq!(known_workstation_name(None, "", &aliases).as_deref(), Some("CORP\\link"));
        assert_eq!(known_workstation_name(None, "", &[]), None);
    }

    #[test]
    fn creating_a_pairing_queues_its_devices_request() {
        let request = NewPairing {
            machine_id: "m1".into(),
            device_id: "d1".into(),
            machine_name: None,
            machine_user_name_ws: Some("CORP\\alice".into()),
            offline: None,
        };
        let device = PairedDevice {
            device_id: "d1".into(),
            named_user: "alice".into(),
            key_agreement_public_key: "k".into(),
        };
        let app = AppId::parse("appId", "demo").unwrap();
        let (pairing, cert) = Pairing::create(app, &request, &device, "tok1", 3, 300, EpochMillis(10));
        assert!(pairing.is_owned_by("tok1") && !pairing.is_owned_by("tok2"));
        assert_eq!(pairing.certificate_request_id, cert.request_id);
        assert_eq!(
            (cert.enc_counter.as_deref(), cert.machine_user_name.as_deref()),
            (Some("3"), Some("alice"))
        );
        let later = pairing.update(Some("ws-2"), None, EpochMillis(5));
        assert_eq!((later.machine_name.as_deref(), later.updated_at), (Some("ws-2"), EpochMillis(10)));
    }

    #[test]
    fn requests_name_the_field_at_fault() {
        let update = PairingUpdateRequest {
            machine_id: "m".into(),
            device_id: "d".into(),
            machine_name: None,
            offline: None,
            used_token_ids: None,
            failed_attempts: None,
        };
        assert_eq!(PairingUpdate::try_from(update).unwrap_err().field, "body");
        let query = PairingQuery { machine_id: Some("m".into()), device_id: None, app_id: None };
        assert_eq!(PairingKey::try_from(query).unwrap_err().field, "deviceId");
        let pair = PairRequest {
            machine_id: "bad id".into(),
            device_id: "d".into(),
            machine_name: None,
            machine_user_name_ws: None,
            offline: None,
        };
        assert_eq!(NewPairing::try_from(pair).unwrap_err().field, "machineId");
    }
}
