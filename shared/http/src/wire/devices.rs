//! The device bodies: a registration and a push token.

use super::apps::Platform;
use rp_domain::devices::{identifier, public_key, Registration, RegistrationCode};
use rp_domain::push::PushToken;
use rp_domain::validate::{self, FieldError};
use serde::{Deserialize, Serialize};

/// The body of `POST /rp/versioned/device/registrations`.
#[derive(Debug, Clone, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RegistrationRequest {
    #[schema(min_length = 16, max_length = 64)]
    pub code: String,
    #[schema(pattern = "^[A-Za-z0-9._:-]{1,128}$")]
    pub device_id: String,
    #[schema(min_length = 1, max_length = 255)]
    pub friendly_name: String,
    #[schema(min_length = 1, max_length = 255)]
    pub model_number: String,
    /// Standard base64 of a SEC1 P-256 point: 44 characters compressed, 88 uncompressed.
    #[schema(min_length = 44, max_length = 88)]
    pub signing_public_key: String,
    #[schema(min_length = 44, max_length = 88)]
    pub key_agreement_public_key: String,
}

impl TryFrom<RegistrationRequest> for Registration {
    type Error = FieldError;

    fn try_from(body: RegistrationRequest) -> Result<Self, FieldError> {
        let code = RegistrationCode::parse("code", &body.code)?;
        let device_id = identifier("deviceId", &body.device_id)?;
        validate::text("friendlyName", &body.friendly_name, 1, 255)?;
        validate::text("modelNumber", &body.model_number, 1, 255)?;
        let (_, signing_public_key) = public_key("signingPublicKey", &body.signing_public_key)?;
        let (_, key_agreement_public_key) =
            public_key("keyAgreementPublicKey", &body.key_agreement_public_key)?;
        Ok(Self {
            code,
            device_id,
            friendly_name: body.friendly_name,
            model_number: body.model_number,
            signing_public_key,
            key_agreement_public_key,
        })
    }
}

/// The body of `PUT /rp/versioned/device/push`: the device's push token on its platform.
#[derive(Debug, Clone, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PushTokenRequest {
    pub platform: Platform,
    /// The token APNs or FCM gave the app on the phone.
    #[schema(min_length = 1, max_length = 4096, pattern = "^[\\x21-\\x7E]+$")]
    pub token: String,
}

impl TryFrom<PushTokenRequest> for PushToken {
    type Error = FieldError;

    fn try_from(body: PushTokenRequest) -> Result<Self, FieldError> {
        PushToken::parse(body.platform.into(), body.token)
    }
}
