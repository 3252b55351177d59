//! Pairing a workstation with a user's registered device (`/rp/api/client/reg`; DECISIONS §3–5):
//! creating one queues the device's login-certificate request; updates change the machine's
//! name or its offline tokens (sealed before they reach this type).

use super::apps::{AppId, OfflineAccess};
use super::certificates::{CertRequest, RequestKind};
use super::devices;
use super::time::EpochMillis;
use super::validate::{self, FieldError};
use crate::ports::keys::Sealed;
use crate::ports::{KeyError, MaybeConflict, StoreError};
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
    /// `{tokens, tokensAuth}`, sealed under the app's envelope context.
    #[serde(default)]
    pub offline: Option<Sealed>,
}

/// The workstation's offline PINs (`workstation.offline`), in the clear only in memory.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OfflineTokens {
    pub tokens: String,
    pub tokens_auth: String,
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
    #[error(
        "offline access is disabled for app '{0}'; an admin enables it in the app's workstation settings"
    )]
    OfflineDisabled(AppId),
    #[error(transparent)]
    Invalid(#[from] FieldError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Keys(#[from] KeyError),
}

impl MaybeConflict for PairingError {
    fn is_conflict(&self) -> bool {
        matches!(self, PairingError::Store(e) if e.is_conflict())
    }
}

/// What the pairing's device is, as the login-certificate request needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct PairedDevice {
    pub device_id: String,
    pub named_user: String,
    pub key_agreement_public_key: String,
}

impl Pairing {
    /// A new pairing and the login-certificate request it queues for the device, under the
    /// device's next encryption counter.
    pub fn create(
        app_id: AppId,
        request: &NewPairing,
        device: &PairedDevice,
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
            offline: None,
        };
        (pairing, cert_request)
    }

    /// The pairing after an update: a new machine name and/or newly sealed offline tokens.
    pub fn update(&self, machine_name: Option<&str>, offline: Option<&Sealed>, now: EpochMillis) -> Pairing {
        let mut next = self.clone();
        if let Some(name) = machine_name {
            next.machine_name = Some(name.to_owned());
        }
        if let Some(sealed) = offline {
            next.offline = Some(sealed.clone());
        }
        next.updated_at = now.max(self.updated_at);
        next
    }
}

/// Offline tokens may only be stored while the app allows offline access.
pub fn require_offline(app_id: &AppId, settings: &OfflineAccess) -> Result<(), PairingError> {
    if settings.enabled {
        Ok(())
    } else {
        Err(PairingError::OfflineDisabled(app_id.clone()))
    }
}

/// The body of `POST /rp/api/client/reg`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PairRequest {
    pub machine_id: String,
    pub device_id: String,
    #[serde(default)]
    pub machine_name: Option<String>,
    #[serde(default, rename = "machineUserNameWS")]
    pub machine_user_name_ws: Option<String>,
}

/// A pairing request, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct NewPairing {
    pub machine_id: String,
    pub device_id: String,
    pub machine_name: Option<String>,
    pub machine_user_name_ws: Option<String>,
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
        Ok(Self {
            machine_id,
            device_id,
            machine_name: body.machine_name,
            machine_user_name_ws: body.machine_user_name_ws,
        })
    }
}

/// The body of `PATCH /rp/api/client/reg`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PairingUpdateRequest {
    pub machine_id: String,
    pub device_id: String,
    #[serde(default)]
    pub machine_name: Option<String>,
    #[serde(default)]
    pub offline: Option<OfflineTokens>,
}

/// A pairing update, checked: at least one change.
#[derive(Debug, Clone, PartialEq)]
pub struct PairingUpdate {
    pub machine_id: String,
    pub device_id: String,
    pub machine_name: Option<String>,
    pub offline: Option<OfflineTokens>,
}

impl TryFrom<PairingUpdateRequest> for PairingUpdate {
    type Error = FieldError;

    fn try_from(body: PairingUpdateRequest) -> Result<Self, FieldError> {
        let machine_id = devices::identifier("machineId", &body.machine_id)?;
        let device_id = devices::identifier("deviceId", &body.device_id)?;
        if body.machine_name.is_none() && body.offline.is_none() {
            return Err(FieldError::new("body", "an update must give machineName or offline"));
        }
        if let Some(name) = &body.machine_name {
            validate::text("machineName", name, 1, 255)?;
        }
        if let Some(tokens) = &body.offline {
            tokens.validate()?;
        }
        Ok(Self { machine_id, device_id, machine_name: body.machine_name, offline: body.offline })
    }
}

/// `?machineId=&deviceId=` of `GET /rp/api/client/reg`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PairingQuery {
    pub machine_id: Option<String>,
    pub device_id: Option<String>,
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
    fn creating_a_pairing_queues_its_devices_request() {
        let request = NewPairing {
            machine_id: "m1".into(),
            device_id: "d1".into(),
            machine_name: None,
            machine_user_name_ws: Some("CORP\\alice".into()),
        };
        let device = PairedDevice {
            device_id: "d1".into(),
            named_user: "alice".into(),
            key_agreement_public_key: "k".into(),
        };
        let app = AppId::parse("appId", "demo").unwrap();
        let (pairing, cert) = Pairing::create(app, &request, &device, 3, 300, EpochMillis(10));
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
        };
        assert_eq!(PairingUpdate::try_from(update).unwrap_err().field, "body");
        let query = PairingQuery { machine_id: Some("m".into()), device_id: None };
        assert_eq!(PairingKey::try_from(query).unwrap_err().field, "deviceId");
        let pair = PairRequest {
            machine_id: "bad id".into(),
            device_id: "d".into(),
            machine_name: None,
            machine_user_name_ws: None,
        };
        assert_eq!(NewPairing::try_from(pair).unwrap_err().field, "machineId");
    }
}
