//! The enrollment bodies (workstation-api.md), parsed into the domain's checked commands.

use rp_domain::apps::AppId;
use rp_domain::devices;
use rp_domain::enrollment::{unnamed_user, Complete, Completion, Enroll, MAX_RECOVERY_KEYS};
use rp_domain::validate::{self, FieldError};
use serde::{Deserialize, Serialize};

/// The body of `POST /rp/wsapi/client/enroll`.
#[derive(Debug, Clone, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EnrollRequest {
    #[schema(pattern = "^[A-Za-z][A-Za-z0-9_.-]{0,63}$")]
    pub rp_app_id: String,
    /// The user's workstation name; may be left out when `sessionId` names the user's session
    /// (an enrollment session, or an OOB authentication of the app the user approved).
    #[serde(rename = "machineUserNameWS", default)]
    #[schema(min_length = 1, max_length = 255)]
    pub machine_user_name_ws: Option<String>,
    #[schema(pattern = "^[A-Za-z0-9._:-]{1,128}$")]
    pub session_id: Option<String>,
    /// Optional: pins the machine in the session at once (else the first complete pins it).
    #[schema(pattern = "^[A-Za-z0-9._:-]{1,128}$")]
    pub machine_id: Option<String>,
    #[schema(min_length = 1, max_length = 128)]
    pub machine_version: Option<String>,
}

impl TryFrom<EnrollRequest> for Enroll {
    type Error = FieldError;

    fn try_from(body: EnrollRequest) -> Result<Self, FieldError> {
        let app_id = AppId::parse("rpAppId", &body.rp_app_id)?;
        let session_id = body.session_id.map(|id| devices::identifier("sessionId", &id)).transpose()?;
        match &body.machine_user_name_ws {
            Some(name) => validate::text("machineUserNameWS", name, 1, 255)?,
            None if session_id.is_none() => return Err(unnamed_user()),
            None => {}
        }
        let machine_id = body.machine_id.map(|id| devices::identifier("machineId", &id)).transpose()?;
        if let Some(v) = &body.machine_version {
            validate::text("machineVersion", v, 1, 128)?;
        }
        Ok(Self {
            app_id,
            machine_user_name_ws: body.machine_user_name_ws,
            session_id,
            machine_id,
            machine_version: body.machine_version,
        })
    }
}

/// The body of `POST /rp/wasapi/client/enroll/complete`.
#[derive(Debug, Clone, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CompleteRequest {
    #[schema(minimum = 0)]
    pub error_code: i64,
    #[schema(pattern = "^[A-Za-z0-9._:-]{1,128}$")]
    pub session_id: String,
    #[schema(min_length = 1, max_length = 16384)]
    pub signing_cert: String,
    #[schema(min_length = 1, max_length = 255)]
    pub machine_name: String,
    #[schema(pattern = "^[A-Za-z0-9._:-]{1,128}$")]
    pub machine_id: String,
    #[schema(min_length = 1, max_length = 255)]
    pub machine_user_name: String,
    #[schema(min_length = 1, max_length = 128)]
    pub machine_version: String,
    /// Added beside the seed's fields (seed pairing rule 6): the workstation's recovery keys,
    /// encrypted by the workstation for the device, base64; opaque to the server, which seals
    /// them at rest and hands them to the device in the authentication flow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(min_length = 4, max_length = 10924)]
    pub recovery_keys: Option<String>,
}

impl TryFrom<CompleteRequest> for Complete {
    type Error = FieldError;

    fn try_from(body: CompleteRequest) -> Result<Self, FieldError> {
        let session_id = devices::identifier("sessionId", &body.session_id)?;
        if body.error_code < 0 {
            return Err(FieldError::new("errorCode", "must be 0 (success) or a positive error code"));
        }
        let min_cert = usize::from(body.error_code == 0);
        validate::text("signingCert", &body.signing_cert, min_cert, 16 * 1024)?;
        validate::text("machineName", &body.machine_name, 1, 255)?;
        devices::identifier("machineId", &body.machine_id)?;
        validate::text("machineUserName", &body.machine_user_name, 1, 255)?;
        validate::text("machineVersion", &body.machine_version, 1, 128)?;
        if let Some(keys) = &body.recovery_keys {
            use base64::Engine as _;
            let decoded = base64::engine::general_purpose::STANDARD.decode(keys).ok();
            if decoded.is_none_or(|d| d.is_empty() || d.len() > MAX_RECOVERY_KEYS) {
                return Err(FieldError::new(
                    "recoveryKeys",
                    format!("must be standard base64 of 1 to {MAX_RECOVERY_KEYS} bytes"),
                ));
            }
        }
        Ok(Self {
            recovery_keys: body.recovery_keys,
            session_id,
            completion: Completion {
                error_code: body.error_code,
                machine_name: body.machine_name,
                machine_id: body.machine_id,
                machine_user_name: body.machine_user_name,
                machine_version: body.machine_version,
                signing_cert: body.signing_cert,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine as _;

    fn complete(recovery_keys: Option<String>) -> Result<Complete, FieldError> {
        Complete::try_from(CompleteRequest {
            error_code: 0,
            session_id: "s-1".into(),
            signing_cert: "MIIB".into(),
            machine_name: "WS-1".into(),
            machine_id: "m-1".into(),
            machine_user_name: "ann@example.com".into(),
            machine_version: "1.0".into(),
            recovery_keys,
        })
    }

    /// Recovery keys are 1 to 8 KiB once decoded, both bounds taken.
    #[test]
    fn recovery_keys_are_one_byte_to_eight_kib() {
        let b64 = |n: usize| Some(base64::engine::general_purpose::STANDARD.encode(vec![7u8; n]));
        for taken in [1, MAX_RECOVERY_KEYS] {
            assert!(complete(b64(taken)).is_ok(), "{taken} bytes");
        }
        assert!(complete(None).is_ok());
        for refused in [b64(0), b64(MAX_RECOVERY_KEYS + 1), Some("not base64!".into())] {
            assert_eq!(complete(refused).unwrap_err().field, "recoveryKeys");
        }
    }

    /// An enroll names its user, or the session that does.
    #[test]
    fn an_enroll_names_its_user_or_its_session() {
        let enroll = |name: Option<&str>, session: Option<&str>| {
            Enroll::try_from(EnrollRequest {
                rp_app_id: "workstationDemo".into(),
                machine_user_name_ws: name.map(Into::into),
                session_id: session.map(Into::into),
                machine_id: None,
                machine_version: None,
            })
        };
        assert!(enroll(Some("ann@example.com"), None).is_ok());
        assert!(enroll(None, Some("s-1")).is_ok());
        assert_eq!(enroll(None, None).unwrap_err(), unnamed_user());
    }
}
