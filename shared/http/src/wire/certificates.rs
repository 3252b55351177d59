//! The certificate bodies (workstation-api.md): what a poll hands the agent, and the results it
//! posts, parsed into the domain's [`CertResult`].

use super::mirror_enum;
use rp_domain::apps::AppId;
use rp_domain::certificates::{
    CertRequest, CertResult, CertificateState as DomainCertificateState, LoginCertIssued, Outcome,
    RequestKind, MAX_ERROR_MESSAGE, MAX_SERIAL_NUMBER,
};
use rp_domain::validate::{self, FieldError};
use rp_domain::EpochMillis;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

mirror_enum! {
    /// Where a pairing's login certificate stands, as its workstation sees it.
    #[serde(rename_all = "lowercase")]
    pub enum CertificateState for DomainCertificateState {
        /// Queued or with the agent.
        Pending,
        Issued,
        Revoked,
        /// The agent reported a failure, or the request ran out of attempts.
        Failed,
    }
}

/// A LoginCertRequest as a poll hands it out (workstation-api.md), field for field.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LoginCertRequest {
    pub request_id: String,
    pub request_timeout_in_secs: i64,
    /// Always a string (the seed's type): empty when the server knows no workstation name for
    /// the user. A `null` from an older server reads as empty.
    #[serde(rename = "machineUserNameWS", default, deserialize_with = "null_as_empty")]
    pub machine_user_name_ws: String,
    pub machine_user_name: Option<String>,
    pub device_id: Option<String>,
    pub device_key_agreement_public_key: Option<String>,
    pub enc_counter: Option<String>,
    /// Added beside the seed's fields: the app the request belongs to, for the agent's events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub app_id: Option<AppId>,
    /// Added beside the seed's fields: how long the certificate is to be valid, in days (the
    /// app's `certificateValidityDays`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificate_validity_days: Option<i64>,
}

fn null_as_empty<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(Option::<String>::deserialize(d)?.unwrap_or_default())
}

/// A RevokedCertRequest as a poll hands it out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RevokedCertRequest {
    pub request_id: String,
    pub request_timeout_in_secs: i64,
    pub cert_serial_number: String,
    /// Added beside the seed's fields: the app the request belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub app_id: Option<AppId>,
    /// Added beside the seed's fields: when the certificate expires (epoch milliseconds, as
    /// the issuance result's `loginCertExpiryDate`), so that the CA lists it on its CRL until
    /// then and no longer. Absent for a request queued before the server kept it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1)]
    pub login_cert_expiry_date: Option<i64>,
}

/// The answer of `GET /rp/api/certificate/requests`: both arrays empty when nothing is pending.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CertificateRequestList {
    pub login_certs: Vec<LoginCertRequest>,
    pub revoked_certs: Vec<RevokedCertRequest>,
}

impl From<Vec<CertRequest>> for CertificateRequestList {
    fn from(leased: Vec<CertRequest>) -> Self {
        let mut list = Self::default();
        leased.iter().for_each(|r| list.push(r));
        list
    }
}

impl CertificateRequestList {
    /// Adds a leased request to the list of its kind.
    fn push(&mut self, r: &CertRequest) {
        match r.kind {
            RequestKind::LoginCert => self.login_certs.push(LoginCertRequest {
                request_id: r.request_id.clone(),
                request_timeout_in_secs: r.request_timeout_in_secs,
                machine_user_name_ws: r.machine_user_name_ws.clone().unwrap_or_default(),
                machine_user_name: r.machine_user_name.clone(),
                device_id: r.device_id.clone(),
                device_key_agreement_public_key: r.device_key_agreement_public_key.clone(),
                enc_counter: r.enc_counter.clone(),
                app_id: Some(r.app_id.clone()),
                certificate_validity_days: r.certificate_validity_days,
            }),
            RequestKind::Revocation => self.revoked_certs.push(RevokedCertRequest {
                request_id: r.request_id.clone(),
                request_timeout_in_secs: r.request_timeout_in_secs,
                cert_serial_number: r.cert_serial_number.clone().unwrap_or_default(),
                app_id: Some(r.app_id.clone()),
                login_cert_expiry_date: r.cert_expiry_date.map(|at| at.as_millis()),
            }),
        }
    }
}

/// The body of `POST /rp/api/certificate`: the issuance result (success or error payload). The
/// certificate's fields are required in a success payload (`errorCode` 0); an error payload may
/// leave them out. Either kind is refused with a field outside its bounds.
#[derive(Debug, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IssuanceResult {
    #[schema(minimum = 0)]
    pub error_code: i64,
    #[schema(max_length = 5000)]
    pub error_message: Option<String>,
    /// A string, or numeric in the seed's error payload.
    #[schema(schema_with = request_id_schema)]
    pub request_id: Value,
    #[schema(min_length = 1, max_length = 512)]
    pub issuer_key_agreement_public_key: Option<String>,
    #[schema(min_length = 1, max_length = 512)]
    pub issuer_key_agreement_public_key_auth: Option<String>,
    #[schema(min_length = 1, max_length = 49152)]
    pub login_cert: Option<String>,
    #[schema(min_length = 1, max_length = 512)]
    pub login_cert_auth: Option<String>,
    #[schema(min_length = 1, max_length = 128)]
    pub login_cert_serial_number: Option<String>,
    #[schema(minimum = 1)]
    pub login_cert_expiry_date: Option<i64>,
    #[schema(min_length = 1, max_length = 64)]
    pub iv_login_cert: Option<String>,
    #[schema(min_length = 1, max_length = 16384)]
    pub signing_cert: Option<String>,
    #[serde(rename = "machineUserNameWS")]
    #[schema(max_length = 255)]
    pub machine_user_name_ws: Option<String>,
    #[schema(schema_with = machine_user_names_schema)]
    pub machine_user_names: Option<Vec<String>>,
    /// Added beside the seed's fields: the envelope's version, 1 when absent (the seed's
    /// envelope) or 2 (docs/agent.md, "The envelope").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 2)]
    pub envelope_version: Option<u8>,
    /// Version 2's issuer signature: base64 of r ‖ s (64 bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(min_length = 88, max_length = 88)]
    pub login_cert_signature: Option<String>,
}

/// How many directory names a success payload may carry, and how long each may be.
const MAX_MACHINE_USER_NAMES: usize = 50;
const MAX_MACHINE_USER_NAME_LEN: usize = 255;

/// The document's schema of the names a success payload carries.
fn machine_user_names_schema() -> utoipa::openapi::schema::Array {
    let kind = super::or_null(utoipa::openapi::Type::Array);
    super::texts_schema(0, MAX_MACHINE_USER_NAMES, MAX_MACHINE_USER_NAME_LEN).schema_type(kind).build()
}

/// The body of `POST /rp/api/certificate/revoke`: the revocation result (success or error).
#[derive(Debug, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RevocationResult {
    #[schema(minimum = 0)]
    pub error_code: i64,
    #[schema(max_length = 5000)]
    pub error_message: Option<String>,
    #[schema(schema_with = request_id_schema)]
    pub request_id: Value,
    /// Required in a success payload (`errorCode` 0).
    #[schema(min_length = 1, max_length = 128)]
    pub cert_serial_number: Option<String>,
}

fn digest(body: &impl Serialize) -> String {
    hex::encode(Sha256::digest(serde_json::to_vec(body).expect("a result serializes")))
}

/// Longest request id a result may name.
const MAX_REQUEST_ID: usize = 128;

fn request_id(value: &Value) -> Result<String, FieldError> {
    let id = match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        _ => return Err(FieldError::new("requestId", "must be a string or a number")),
    };
    validate::text("requestId", &id, 1, MAX_REQUEST_ID)?;
    Ok(id)
}

/// The document's schema of what [`request_id`] accepts: a string, or a number (the seed's
/// error payload).
fn request_id_schema() -> utoipa::openapi::Schema {
    use utoipa::openapi::{ObjectBuilder, OneOfBuilder, Schema, Type};
    let one_of = OneOfBuilder::new()
        .item(super::text_schema(1, MAX_REQUEST_ID))
        .item(ObjectBuilder::new().schema_type(Type::Number))
        .description(Some("A string, or numeric in the seed's error payload."));
    Schema::OneOf(one_of.build())
}

/// `Some(failure)` for `errorCode` > 0; `None` for 0 (success).
fn failure(error_code: i64, error_message: &Option<String>) -> Result<Option<Outcome>, FieldError> {
    if error_code < 0 {
        return Err(FieldError::new("errorCode", "must be 0 (success) or a positive error code"));
    }
    if let Some(message) = error_message {
        validate::text("errorMessage", message, 0, MAX_ERROR_MESSAGE)?;
    }
    Ok((error_code > 0).then(|| Outcome::Failed { error_code, error_message: error_message.clone() }))
}

/// The envelope's version: 1 (no signature) or 2 (with its 64-byte signature).
fn envelope_version(version: Option<u8>, signature: &Option<String>) -> Result<u8, FieldError> {
    use base64::Engine as _;
    let version = version.unwrap_or(1);
    match (version, signature) {
        (1, None) => Ok(1),
        (1, Some(_)) => Err(FieldError::new("loginCertSignature", "is only part of envelopeVersion 2")),
        (2, None) => Err(FieldError::new("loginCertSignature", "is required with envelopeVersion 2")),
        (2, Some(signature)) => {
            let bytes = base64::engine::general_purpose::STANDARD.decode(signature).ok();
            match bytes.map(|b| b.len()) {
                Some(64) => Ok(2),
                _ => Err(FieldError::new("loginCertSignature", "must be base64 of the 64-byte r ‖ s")),
            }
        }
        _ => Err(FieldError::new("envelopeVersion", "must be 1 or 2")),
    }
}

/// A success payload's field, which [`within_bounds`] has checked if present.
fn required<T>(field: &str, value: Option<T>) -> Result<T, FieldError> {
    value.ok_or_else(|| FieldError::new(field, "is required when errorCode is 0"))
}

/// Every field an issuance result carries is within its bounds, whichever kind the payload is:
/// the document states one set, and an error payload has no use for an oversized certificate.
fn within_bounds(body: &IssuanceResult) -> Result<(), FieldError> {
    let texts = [
        ("loginCert", &body.login_cert, 1, 48 * 1024),
        ("ivLoginCert", &body.iv_login_cert, 1, 64),
        ("loginCertAuth", &body.login_cert_auth, 1, 512),
        ("loginCertSerialNumber", &body.login_cert_serial_number, 1, MAX_SERIAL_NUMBER),
        ("issuerKeyAgreementPublicKey", &body.issuer_key_agreement_public_key, 1, 512),
        ("issuerKeyAgreementPublicKeyAuth", &body.issuer_key_agreement_public_key_auth, 1, 512),
        ("signingCert", &body.signing_cert, 1, 16 * 1024),
        ("loginCertSignature", &body.login_cert_signature, 88, 88),
        ("machineUserNameWS", &body.machine_user_name_ws, 0, 255),
    ];
    for (field, value, min, max) in texts {
        if let Some(text) = value {
            validate::text(field, text, min, max)?;
        }
    }
    if let Some(names) = &body.machine_user_names {
        if names.len() > MAX_MACHINE_USER_NAMES {
            return Err(FieldError::new(
                "machineUserNames",
                format!("at most {MAX_MACHINE_USER_NAMES} names"),
            ));
        }
        for (i, name) in names.iter().enumerate() {
            validate::text(&format!("machineUserNames[{i}]"), name, 1, MAX_MACHINE_USER_NAME_LEN)?;
        }
    }
    if body.login_cert_expiry_date.is_some_and(|expiry| expiry <= 0) {
        return Err(FieldError::new("loginCertExpiryDate", "must be milliseconds since the epoch"));
    }
    if body.envelope_version.is_some_and(|version| !(1..=2).contains(&version)) {
        return Err(FieldError::new("envelopeVersion", "must be 1 or 2"));
    }
    Ok(())
}

impl TryFrom<IssuanceResult> for CertResult {
    type Error = FieldError;

    fn try_from(body: IssuanceResult) -> Result<Self, FieldError> {
        let digest = digest(&body);
        let request_id = request_id(&body.request_id)?;
        within_bounds(&body)?;
        let outcome = match failure(body.error_code, &body.error_message)? {
            Some(failed) => failed,
            None => {
                let names = required("machineUserNames", body.machine_user_names)?;
                let expiry = required("loginCertExpiryDate", body.login_cert_expiry_date)?;
                Outcome::Issued(Box::new(LoginCertIssued {
                    login_cert: required("loginCert", body.login_cert)?,
                    iv_login_cert: required("ivLoginCert", body.iv_login_cert)?,
                    login_cert_auth: required("loginCertAuth", body.login_cert_auth)?,
                    login_cert_serial_number: required(
                        "loginCertSerialNumber",
                        body.login_cert_serial_number,
                    )?,
                    issuer_key_agreement_public_key: required(
                        "issuerKeyAgreementPublicKey",
                        body.issuer_key_agreement_public_key,
                    )?,
                    issuer_key_agreement_public_key_auth: required(
                        "issuerKeyAgreementPublicKeyAuth",
                        body.issuer_key_agreement_public_key_auth,
                    )?,
                    signing_cert: required("signingCert", body.signing_cert)?,
                    login_cert_expiry_date: EpochMillis(expiry),
                    machine_user_name_ws: body.machine_user_name_ws.filter(|s| !s.is_empty()),
                    machine_user_names: names,
                    envelope_version: envelope_version(body.envelope_version, &body.login_cert_signature)?,
                    login_cert_signature: body.login_cert_signature,
                }))
            }
        };
        Ok(CertResult::new(request_id, digest, outcome, RequestKind::LoginCert))
    }
}

impl TryFrom<RevocationResult> for CertResult {
    type Error = FieldError;

    fn try_from(body: RevocationResult) -> Result<Self, FieldError> {
        let digest = digest(&body);
        let request_id = request_id(&body.request_id)?;
        if let Some(serial) = &body.cert_serial_number {
            validate::text("certSerialNumber", serial, 1, MAX_SERIAL_NUMBER)?;
        }
        let outcome = match failure(body.error_code, &body.error_message)? {
            Some(failed) => failed,
            None => Outcome::Revoked {
                cert_serial_number: required("certSerialNumber", body.cert_serial_number)?,
            },
        };
        Ok(CertResult::new(request_id, digest, outcome, RequestKind::Revocation))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn result_bodies_name_the_field_at_fault() {
        let parse = |v: Value| {
            let body: IssuanceResult = serde_json::from_value(v).unwrap();
            CertResult::try_from(body).map(|_| ()).unwrap_err().field
        };
        assert_eq!(parse(json!({"errorCode": -1, "requestId": "r"})), "errorCode");
        assert_eq!(parse(json!({"errorCode": 1, "requestId": true})), "requestId");
        assert_eq!(
            parse(json!({"errorCode": 1, "requestId": "r", "errorMessage": "x".repeat(5001)})),
            "errorMessage"
        );
        assert_eq!(parse(json!({"errorCode": 0, "requestId": "r"})), "machineUserNames");
        assert_eq!(
            parse(json!({"errorCode": 0, "requestId": "r", "machineUserNames": [],
            "loginCertExpiryDate": 5})),
            "loginCert"
        );
        let ok: IssuanceResult = serde_json::from_value(json!({"errorCode": 7, "requestId": 12345})).unwrap();
        assert_eq!(CertResult::try_from(ok).unwrap().request_id, "12345");
    }

    /// An empty `machineUserNameWS` in a success payload is no name: the request's stands.
    #[test]
    fn an_empty_workstation_user_name_in_a_result_is_left_out() {
        let issued_as = |name: &str| {
            let body: IssuanceResult = serde_json::from_value(json!({
                "errorCode": 0, "requestId": "r", "loginCert": "c2VhbGVk", "ivLoginCert": "aXY=",
                "loginCertAuth": "YXV0aA==", "loginCertSerialNumber": "0a01", "signingCert": "Y2E=",
                "issuerKeyAgreementPublicKey": "a2V5", "issuerKeyAgreementPublicKeyAuth": "YXV0aA==",
                "loginCertExpiryDate": 1_900_000_000_000_i64, "machineUserNames": [], "machineUserNameWS": name,
            }))
            .unwrap();
            match CertResult::try_from(body).unwrap().outcome {
                Outcome::Issued(issued) => issued.machine_user_name_ws,
                other => panic!("{other:?}"),
            }
        };
        assert_eq!(issued_as(""), None);
        assert_eq!(issued_as("WS\\ada"), Some("WS\\ada".to_owned()));
    }

    #[test]
    fn an_error_payload_carries_only_fields_within_their_bounds() {
        let failed = |extra: Value| {
            let mut body = json!({"errorCode": 7, "requestId": "r"});
            body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
            let body: IssuanceResult = serde_json::from_value(body).unwrap();
            CertResult::try_from(body).map(|_| ()).map_err(|e| e.field)
        };
        assert_eq!(failed(json!({"loginCert": "x".repeat(48 * 1024 + 1)})), Err("loginCert".into()));
        assert_eq!(failed(json!({"ivLoginCert": ""})), Err("ivLoginCert".into()));
        assert_eq!(failed(json!({"loginCertExpiryDate": 0})), Err("loginCertExpiryDate".into()));
        assert_eq!(failed(json!({"envelopeVersion": 3})), Err("envelopeVersion".into()));
        assert_eq!(failed(json!({"machineUserNames": vec!["x"; 51]})), Err("machineUserNames".into()));
        assert_eq!(failed(json!({"machineUserNames": vec!["x"; 50]})), Ok(()));
        assert_eq!(failed(json!({"loginCert": "x".repeat(48 * 1024), "ivLoginCert": "iv"})), Ok(()));
        let revoked = |serial: &str| {
            let body = RevocationResult {
                error_code: 7,
                error_message: None,
                request_id: json!("r"),
                cert_serial_number: Some(serial.to_owned()),
            };
            CertResult::try_from(body).map(|_| ()).map_err(|e| e.field)
        };
        assert_eq!(revoked(&"1".repeat(129)), Err("certSerialNumber".into()));
        assert_eq!(revoked("01AB"), Ok(()));
    }
}
