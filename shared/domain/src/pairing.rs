//! Pairing a workstation with a user's registered device (`/rp/api/client/reg`; DECISIONS §3–5):
//! creating one queues the device's login-certificate request; updates change the machine's
//! name or its offline tokens (sealed before they reach this type).

use super::apps::{AppId, OfflineAccess};
use super::certificates::{CertRequest, RequestKind};
use super::events::{EventRecord, OFFLINE_LOCKED_EVENT, UNPAIRED_EVENT};
use super::offline::{OfflineError, OfflineLock, OfflineSet};
use super::time::EpochMillis;
use super::validate::{self, FieldError};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Pairing {
    pub app_id: AppId,
    pub machine_id: String,
    pub device_id: String,
    pub named_user: String,
    pub machine_name: Option<String>,
    pub machine_user_name_ws: Option<String>,
    pub created_at: EpochMillis,
    pub updated_at: EpochMillis,
    pub certificate_request_id: String,
    /// The id of the access token that created the pairing: its workstation. Only it sees the
    /// offline PINs. `None` on pairings made before owners were recorded: nobody sees them.
    pub owner_token_id: Option<String>,
    /// The offline PINs, sealed under a context naming app, machine and device.
    pub offline_set: Option<OfflineSet>,
    #[serde(default)]
    pub lock: OfflineLock,
}

/// The workstation's offline PINs (`workstation.offline`), in the clear only in memory.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
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
    /// A bad field, or a failure of the store, the key service or the queue.
    #[error(transparent)]
    Failed(#[from] crate::boundary::Failure),
}

crate::shares_failures!(PairingError);

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

/// A pairing request, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct NewPairing {
    pub machine_id: String,
    pub device_id: String,
    pub machine_name: Option<String>,
    pub machine_user_name_ws: Option<String>,
    pub offline: Option<OfflineTokens>,
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
pub const MAX_PIN_IDS: usize = 100;
pub const MAX_PIN_ID_LEN: usize = 64;

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

/// Which pairing: machine and device.
#[derive(Debug, Clone, PartialEq)]
pub struct PairingKey {
    pub machine_id: String,
    pub device_id: String,
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

    fn created() -> (Pairing, CertRequest) {
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
        Pairing::create(app, &request, &device, "tok1", 3, 300, EpochMillis(10))
    }

    #[test]
    fn creating_a_pairing_queues_its_devices_request() {
        let (pairing, cert) = created();
        assert!(pairing.is_owned_by("tok1") && !pairing.is_owned_by("tok2"));
        assert_eq!(pairing.certificate_request_id, cert.request_id);
        assert_eq!(
            (cert.enc_counter.as_deref(), cert.machine_user_name.as_deref()),
            (Some("3"), Some("alice"))
        );
        // What the agent seals the certificate to and names in it.
        assert_eq!(
            (cert.device_id.as_deref(), cert.device_key_agreement_public_key.as_deref()),
            (Some("d1"), Some("k"))
        );
        assert_eq!(
            (cert.machine_user_name_ws.as_deref(), cert.machine_id.as_deref()),
            (Some("CORP\\alice"), Some("m1"))
        );
        let later = pairing.update(Some("ws-2"), None, EpochMillis(5));
        assert_eq!((later.machine_name.as_deref(), later.updated_at), (Some("ws-2"), EpochMillis(10)));
    }

    #[test]
    fn offline_pins_and_their_mac_must_be_given_within_their_sizes() {
        let tokens =
            |tokens: &str, auth: &str| OfflineTokens { tokens: tokens.into(), tokens_auth: auth.into() };
        assert!(tokens("p1:123456", "mac").validate().is_ok());
        assert!(tokens(&"a".repeat(16 * 1024), &"m".repeat(1024)).validate().is_ok());
        let refused = |t: OfflineTokens| t.validate().unwrap_err().field;
        assert_eq!(refused(tokens("", "mac")), "offline.tokens");
        assert_eq!(refused(tokens(&"a".repeat(16 * 1024 + 1), "mac")), "offline.tokens");
        assert_eq!(refused(tokens("p1:123456", "")), "offline.tokensAuth");
        assert_eq!(refused(tokens("p1:123456", &"m".repeat(1025))), "offline.tokensAuth");
    }

    #[test]
    fn only_the_owner_sees_live_pins_and_the_first_reason_not_is_told() {
        use crate::boundary::Sealed;
        use crate::offline::{parse_pins, OfflineLock};
        let settings =
            OfflineAccess { enabled: true, token_length: 6, token_count: 10, ..OfflineAccess::default() };
        let now = EpochMillis(1_000);
        let (bare, _) = created();
        assert!(bare.require_owner("tok1").is_ok());
        assert!(matches!(bare.require_owner("tok2"), Err(OfflineError::NotOwner)));
        let pins = parse_pins("offline.tokens", "p1:123456", &settings).unwrap();
        let sealed = Sealed { wrapped_key: vec![], nonce: vec![], ciphertext: vec![] };
        let set = OfflineSet::new(sealed, &pins, &settings, now);
        let pairing = bare.update(None, Some(&set), now);
        assert_eq!(pairing.hidden_because(Some("tok1"), &settings, now), None);
        let disabled = OfflineAccess { enabled: false, ..settings.clone() };
        assert_eq!(pairing.hidden_because(Some("tok1"), &disabled, now), Some("offlineDisabled"));
        assert_eq!(pairing.hidden_because(Some("tok2"), &settings, now), Some("notOwner"));
        assert_eq!(pairing.hidden_because(None, &settings, now), Some("notOwner"));
        let locked =
            Pairing { lock: OfflineLock { locked_until: Some(now.plus_secs(60)) }, ..pairing.clone() };
        assert_eq!(locked.hidden_because(Some("tok1"), &settings, now), Some("locked"));
        assert_eq!(bare.hidden_because(Some("tok1"), &settings, now), Some("noTokens"));
        assert_eq!(pairing.hidden_because(Some("tok1"), &settings, set.valid_until), Some("expired"));
    }

    #[test]
    fn an_update_touches_offline_access_with_pins_used_pins_or_wrong_attempts() {
        let update = PairingUpdate {
            machine_id: "m1".into(),
            device_id: "d1".into(),
            machine_name: Some("renamed".into()),
            offline: None,
            used_token_ids: vec![],
            failed_attempts: 0,
        };
        assert!(!update.touches_offline(), "a rename alone");
        let pins = OfflineTokens { tokens: "p1:123456".into(), tokens_auth: "mac".into() };
        for touching in [
            PairingUpdate { offline: Some(pins), ..update.clone() },
            PairingUpdate { used_token_ids: vec!["p1".into()], ..update.clone() },
            PairingUpdate { failed_attempts: 1, ..update.clone() },
        ] {
            assert!(touching.touches_offline(), "{touching:?}");
        }
        let ids = |n: usize| (0..n).map(|i| format!("p{i}")).collect::<Vec<_>>();
        assert!(pin_ids("usedTokenIds", &ids(MAX_PIN_IDS)).is_ok());
        for bad in [ids(0), ids(MAX_PIN_IDS + 1)] {
            assert_eq!(pin_ids("usedTokenIds", &bad).unwrap_err().field, "usedTokenIds");
        }
        let long = vec!["p1".to_owned(), "x".repeat(MAX_PIN_ID_LEN + 1)];
        assert_eq!(pin_ids("usedTokenIds", &long).unwrap_err().field, "usedTokenIds[1]");
    }
}
