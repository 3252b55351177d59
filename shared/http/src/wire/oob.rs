//! The OOB bodies (DECISIONS §6): a start, a device's answer, and what a status shows.

use super::mirror_enum;
use rp_domain::apps::AppId;
use rp_domain::devices::identifier;
use rp_domain::oob::{
    nonce, Decision as DomainDecision, Extras as DomainExtras, Nonces, OobAnswer, OobStart,
    OobState as DomainOobState, StateEntry as DomainStateEntry, MAX_ADDITIONAL_DETAILS, MAX_DETAIL_KEY,
    MAX_DETAIL_VALUE, MAX_TRANSACTION_TEXT,
};
use rp_domain::validate::{self, FieldError};
use rp_domain::EpochMillis;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

mirror_enum! {
    /// Where an OOB request stands.
    #[serde(rename_all = "SCREAMING_SNAKE_CASE")]
    pub enum OobState for DomainOobState {
        RequestSent,
        Initiated,
        InitiatedResponse,
        Completed,
        Failed,
        Canceled,
    }
}

mirror_enum! {
    /// A device's answer.
    #[serde(rename_all = "camelCase")]
    pub enum Decision for DomainDecision {
        Approve,
        Decline,
    }
}

/// One entry of the status response's `state` array.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct StateEntry {
    pub value: OobState,
    pub message: String,
    #[schema(value_type = i64)]
    pub timestamp: EpochMillis,
}

impl From<DomainStateEntry> for StateEntry {
    fn from(entry: DomainStateEntry) -> Self {
        Self { value: entry.value.into(), message: entry.message, timestamp: entry.timestamp }
    }
}

/// `extras`: a confirmation code the user must type on the phone (number matching).
#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Extras {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(min_length = 1, max_length = 64)]
    pub amount: Option<String>,
}

impl From<DomainExtras> for Extras {
    fn from(extras: DomainExtras) -> Self {
        Self { amount: extras.amount }
    }
}

/// The body of `POST /rp/api/oob/client/authentication/requests` (DECISIONS §6).
#[derive(Debug, Clone, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OobStartRequest {
    #[schema(pattern = "^[A-Za-z][A-Za-z0-9_.-]{0,63}$")]
    pub app_id: String,
    #[schema(min_length = 1, max_length = 255)]
    pub named_user: String,
    #[schema(pattern = "^[0-9a-fA-F]{64}$")]
    pub session_nonce: String,
    #[schema(pattern = "^[0-9a-fA-F]{64}$")]
    pub device_nonce: String,
    #[schema(pattern = "^[0-9a-fA-F]{64}$")]
    pub service_nonce: String,
    #[schema(pattern = "^[0-9a-fA-F]{64}$")]
    pub service_hmac: String,
    #[schema(min_length = 1, max_length = 255)]
    pub machine: Option<String>,
    #[schema(min_length = 1, max_length = 128)]
    pub machine_id: Option<String>,
    /// Added beside the seed's fields: the device to ask, one of the user's (refused when it
    /// cannot answer). Without it, the device `machineId` names, else the user's most recently
    /// registered device that can answer.
    #[schema(pattern = "^[A-Za-z0-9._:-]{1,128}$")]
    pub device_id: Option<String>,
    #[schema(min_length = 1, max_length = 1000)]
    pub transaction_text: Option<String>,
    #[schema(min_length = 1, max_length = 64)]
    pub transaction_type: Option<String>,
    pub extras: Option<Extras>,
    #[schema(schema_with = additional_details_schema)]
    pub additional_details: Option<BTreeMap<String, String>>,
}

/// The document's schema of an OOB start's `additionalDetails`.
fn additional_details_schema() -> utoipa::openapi::Object {
    let value = super::text_schema(0, MAX_DETAIL_VALUE);
    let kind = super::or_null(utoipa::openapi::Type::Object);
    super::map_schema(MAX_ADDITIONAL_DETAILS, MAX_DETAIL_KEY, value).schema_type(kind).build()
}

impl TryFrom<OobStartRequest> for OobStart {
    type Error = FieldError;

    fn try_from(body: OobStartRequest) -> Result<Self, FieldError> {
        let app_id = AppId::parse("appId", &body.app_id)?;
        validate::text("namedUser", &body.named_user, 1, 255)?;
        let nonces = Nonces {
            session_nonce: nonce("sessionNonce", &body.session_nonce)?,
            device_nonce: nonce("deviceNonce", &body.device_nonce)?,
            service_nonce: nonce("serviceNonce", &body.service_nonce)?,
            service_hmac: nonce("serviceHmac", &body.service_hmac)?,
        };
        for (field, value, max) in [
            ("machine", &body.machine, 255),
            ("machineId", &body.machine_id, 128),
            ("transactionText", &body.transaction_text, MAX_TRANSACTION_TEXT),
            ("transactionType", &body.transaction_type, 64),
        ] {
            if let Some(text) = value {
                validate::text(field, text, 1, max)?;
            }
        }
        if let Some(amount) = body.extras.as_ref().and_then(|e| e.amount.as_ref()) {
            validate::text("extras.amount", amount, 1, 64)?;
        }
        let device_id = body.device_id.map(|id| identifier("deviceId", &id)).transpose()?;
        let additional_details = body.additional_details.unwrap_or_default();
        if additional_details.len() > MAX_ADDITIONAL_DETAILS {
            return Err(FieldError::new(
                "additionalDetails",
                format!("at most {MAX_ADDITIONAL_DETAILS} entries"),
            ));
        }
        for (key, value) in &additional_details {
            let path = format!("additionalDetails.{key}");
            validate::text(&path, key, 1, MAX_DETAIL_KEY)?;
            validate::text(&path, value, 0, MAX_DETAIL_VALUE)?;
        }
        Ok(Self {
            app_id,
            named_user: body.named_user,
            nonces,
            machine: body.machine,
            machine_id: body.machine_id,
            device_id,
            transaction_text: body.transaction_text,
            transaction_type: body.transaction_type,
            extras: body.extras.filter(|e| e.amount.is_some()).map(|e| DomainExtras { amount: e.amount }),
            additional_details,
        })
    }
}

/// The body of `POST /rp/versioned/device/oob/requests/{requestId}`.
#[derive(Debug, Clone, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OobAnswerRequest {
    pub decision: Decision,
    /// DER (at most 72 bytes) or r ‖ s (64 bytes), base64 or base64url.
    #[schema(min_length = 1, max_length = 96)]
    pub signature: String,
    #[schema(min_length = 1, max_length = 64)]
    pub amount: Option<String>,
}

impl TryFrom<OobAnswerRequest> for OobAnswer {
    type Error = FieldError;

    fn try_from(body: OobAnswerRequest) -> Result<Self, FieldError> {
        OobAnswer::parse(body.decision.into(), &body.signature, body.amount)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn start_requests_name_the_field_at_fault() {
        let body = |f: &dyn Fn(&mut serde_json::Value)| {
            let mut v = json!({"appId": "demo", "namedUser": "alice", "sessionNonce": "a".repeat(64),
                "deviceNonce": "b".repeat(64), "serviceNonce": "c".repeat(64), "serviceHmac": "D".repeat(64)});
            f(&mut v);
            let parsed: OobStartRequest = serde_json::from_value(v).unwrap();
            OobStart::try_from(parsed)
        };
        assert_eq!(body(&|_| {}).unwrap().nonces.service_hmac, "d".repeat(64), "kept lowercase");
        assert_eq!(body(&|v| v["sessionNonce"] = json!("a".repeat(63))).unwrap_err().field, "sessionNonce");
        assert_eq!(body(&|v| v["deviceNonce"] = json!("g".repeat(64))).unwrap_err().field, "deviceNonce");
        assert_eq!(
            body(&|v| v["transactionText"] = json!("x".repeat(1001))).unwrap_err().field,
            "transactionText"
        );
        assert_eq!(body(&|v| v["extras"] = json!({"amount": ""})).unwrap_err().field, "extras.amount");
        // Up to MAX_ADDITIONAL_DETAILS entries, that bound taken.
        let details = |n: usize| {
            let entries: serde_json::Map<_, _> = (0..n).map(|i| (format!("k{i}"), json!("v"))).collect();
            body(&|v| v["additionalDetails"] = json!(entries))
        };
        assert_eq!(details(MAX_ADDITIONAL_DETAILS).unwrap().additional_details.len(), MAX_ADDITIONAL_DETAILS);
        assert_eq!(details(MAX_ADDITIONAL_DETAILS + 1).unwrap_err().field, "additionalDetails");
    }
}
