//! The pairing bodies (DECISIONS §3–5): pair, update, which pairing, and the offline PINs.

use rp_domain::devices::identifier;
use rp_domain::pairing::{
    pin_ids, NewPairing, OfflineTokens as DomainOfflineTokens, PairingKey, PairingUpdate, MAX_PIN_IDS,
    MAX_PIN_ID_LEN,
};
use rp_domain::validate::{self, FieldError};
use serde::{Deserialize, Serialize};

/// The workstation's offline PINs as an answer carries them: empty strings when the pairing
/// holds no PINs or they are not the caller's to see.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct OfflineTokensView {
    #[schema(max_length = 16384)]
    pub tokens: String,
    #[schema(max_length = 1024)]
    pub tokens_auth: String,
}

impl From<DomainOfflineTokens> for OfflineTokensView {
    fn from(tokens: DomainOfflineTokens) -> Self {
        Self { tokens: tokens.tokens, tokens_auth: tokens.tokens_auth }
    }
}

/// The workstation's offline PINs as a request sends them.
#[derive(Debug, Clone, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OfflineTokens {
    #[schema(min_length = 1, max_length = 16384)]
    pub tokens: String,
    #[schema(min_length = 1, max_length = 1024)]
    pub tokens_auth: String,
}

impl OfflineTokens {
    /// The PINs, checked.
    fn checked(self) -> Result<DomainOfflineTokens, FieldError> {
        let tokens = DomainOfflineTokens { tokens: self.tokens, tokens_auth: self.tokens_auth };
        tokens.validate()?;
        Ok(tokens)
    }
}

/// The body of `POST /rp/api/client/reg`.
#[derive(Debug, Clone, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PairRequest {
    #[schema(pattern = "^[A-Za-z0-9._:-]{1,128}$")]
    pub machine_id: String,
    #[schema(pattern = "^[A-Za-z0-9._:-]{1,128}$")]
    pub device_id: String,
    #[schema(min_length = 1, max_length = 255)]
    pub machine_name: Option<String>,
    #[serde(default, rename = "machineUserNameWS")]
    #[schema(min_length = 1, max_length = 255)]
    pub machine_user_name_ws: Option<String>,
    /// The workstation's first offline PINs, stored with the pairing (seed step 2).
    pub offline: Option<OfflineTokens>,
}

impl TryFrom<PairRequest> for NewPairing {
    type Error = FieldError;

    fn try_from(body: PairRequest) -> Result<Self, FieldError> {
        let machine_id = identifier("machineId", &body.machine_id)?;
        let device_id = identifier("deviceId", &body.device_id)?;
        if let Some(name) = &body.machine_name {
            validate::text("machineName", name, 1, 255)?;
        }
        if let Some(name) = &body.machine_user_name_ws {
            validate::text("machineUserNameWS", name, 1, 255)?;
        }
        let offline = body.offline.map(OfflineTokens::checked).transpose()?;
        Ok(Self {
            machine_id,
            device_id,
            machine_name: body.machine_name,
            machine_user_name_ws: body.machine_user_name_ws,
            offline,
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
    #[schema(min_length = 1, max_length = 255)]
    pub machine_name: Option<String>,
    pub offline: Option<OfflineTokens>,
    /// Ids of offline PINs used on the workstation: each is deleted from the set.
    #[schema(schema_with = optional_pin_ids_schema)]
    pub used_token_ids: Option<Vec<String>>,
    /// Wrong offline PIN entries since the last report; enough of them lock offline access.
    #[schema(minimum = 1, maximum = 100)]
    pub failed_attempts: Option<i64>,
}

/// The document's schema of what [`pin_ids`] accepts.
pub fn pin_ids_schema() -> utoipa::openapi::schema::Array {
    super::texts_schema(1, MAX_PIN_IDS, MAX_PIN_ID_LEN).build()
}

/// The same, for an optional field (absent or `null`: none).
fn optional_pin_ids_schema() -> utoipa::openapi::schema::Array {
    let mut list = pin_ids_schema();
    list.schema_type = super::or_null(utoipa::openapi::Type::Array);
    list
}

impl TryFrom<PairingUpdateRequest> for PairingUpdate {
    type Error = FieldError;

    fn try_from(body: PairingUpdateRequest) -> Result<Self, FieldError> {
        let machine_id = identifier("machineId", &body.machine_id)?;
        let device_id = identifier("deviceId", &body.device_id)?;
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
        let offline = body.offline.map(OfflineTokens::checked).transpose()?;
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
            offline,
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
    #[param(pattern = "^[A-Za-z][A-Za-z0-9_.-]{0,63}$")]
    pub app_id: Option<String>,
}

impl TryFrom<PairingQuery> for PairingKey {
    type Error = FieldError;

    fn try_from(query: PairingQuery) -> Result<Self, FieldError> {
        let required = |field: &str, value: Option<String>| {
            value.ok_or_else(|| FieldError::new(field, "is required")).and_then(|v| identifier(field, &v))
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
