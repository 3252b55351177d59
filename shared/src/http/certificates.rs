//! The certificate queue (workstation-api.md; DECISIONS §3): the enrollment agent polls for
//! pending issuance and revocation requests (each handed out under a lease) and posts results;
//! admins queue revocations by serial; a paired device fetches its issued certificates.

use super::extract::{Admin, ApiJson, ApiPath};
use super::problem::{codes, Problem};
use super::AppState;
use crate::domain::validate;
use crate::ports::StoreError;
use crate::repo::certificates::{result_event, Certificates, IssuedCert, LeaseExpired, DEFAULT_MAX_ATTEMPTS};
use crate::repo::devices::Devices;
use crate::repo::workstations::{CertRequestRecord, RequestKind, RequestState, Workstations};
use axum::extract::{FromRequestParts, State};
use axum::http::{request::Parts, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::time::Duration;

/// `/rp/api/certificate/requests`
pub fn requests_router(_state: &AppState) -> Router<AppState> {
    Router::new().route("/rp/api/certificate/requests", get(poll))
}

/// `/rp/api/certificate`
pub fn issued_router(_state: &AppState) -> Router<AppState> {
    Router::new().route("/rp/api/certificate", post(post_issuance))
}

/// `/rp/api/certificate/revoke`
pub fn revoked_router(_state: &AppState) -> Router<AppState> {
    Router::new().route("/rp/api/certificate/revoke", post(post_revocation))
}

/// `/cc/api/certificates/{certSerialNumber}/revoke`
pub fn admin_revoke_router(_state: &AppState) -> Router<AppState> {
    Router::new().route("/cc/api/certificates/{serial}/revoke", post(queue_revocation))
}

/// `/rp/versioned/device/certificates`
pub fn device_router(_state: &AppState) -> Router<AppState> {
    Router::new().route("/rp/versioned/device/certificates", get(device_certificates))
}

fn login_json(r: &CertRequestRecord) -> Value {
    json!({
        "requestId": r.request_id,
        "requestTimeoutInSecs": r.request_timeout_in_secs,
        "machineUserNameWS": r.machine_user_name_ws,
        "machineUserName": r.machine_user_name,
        "deviceId": r.device_id,
        "deviceKeyAgreementPublicKey": r.device_key_agreement_public_key,
        "encCounter": r.enc_counter,
    })
}

fn revoked_json(r: &CertRequestRecord) -> Value {
    json!({
        "requestId": r.request_id,
        "requestTimeoutInSecs": r.request_timeout_in_secs,
        "certSerialNumber": r.cert_serial_number,
    })
}

/// Hands out up to a batch of pending requests, each leased with a conditional write. The
/// lease's time-out message is sent first, so no lease exists without the message that ends it.
async fn poll(State(state): State<AppState>, _admin: Admin) -> Result<Json<Value>, Problem> {
    let certs = Certificates::new(state.backend.store.as_ref());
    let candidates = certs.pending(state.config.poll_batch).await?;
    let leases: Vec<_> = candidates.iter().map(|_| uuid::Uuid::new_v4().to_string()).collect();
    let messages: Vec<_> = candidates
        .iter()
        .zip(&leases)
        .map(|((request, _), lease_id)| {
            let body = LeaseExpired::new(&request.request_id, lease_id).body();
            (body, Duration::from_secs(request.request_timeout_in_secs.max(0) as u64))
        })
        .collect();
    if !messages.is_empty() {
        state.backend.queue.send_batch(&messages).await?;
    }
    let now = state.backend.clock.epoch_millis();
    let (mut login, mut revoked) = (Vec::new(), Vec::new());
    for ((request, version), lease_id) in candidates.iter().zip(&leases) {
        let Some(leased) = certs.lease(request, *version, lease_id, now).await? else { continue };
        match leased.kind {
            RequestKind::LoginCert => login.push(login_json(&leased)),
            RequestKind::Revocation => revoked.push(revoked_json(&leased)),
        }
    }
    tracing::info!(login = login.len(), revoked = revoked.len(), "certificate requests leased");
    Ok(Json(json!({ "loginCerts": login, "revokedCerts": revoked })))
}

/// Either payload of POST /rp/api/certificate or /revoke: `errorCode` decides which fields are
/// required.
#[derive(Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ResultBody {
    error_code: i64,
    #[serde(default)]
    error_message: Option<String>,
    request_id: Value,
    issuer_key_agreement_public_key: Option<String>,
    issuer_key_agreement_public_key_auth: Option<String>,
    login_cert: Option<String>,
    login_cert_auth: Option<String>,
    login_cert_serial_number: Option<String>,
    login_cert_expiry_date: Option<i64>,
    iv_login_cert: Option<String>,
    signing_cert: Option<String>,
    #[serde(rename = "machineUserNameWS")]
    machine_user_name_ws: Option<String>,
    machine_user_names: Option<Vec<String>>,
    cert_serial_number: Option<String>,
}

const MAX_ERROR_MESSAGE: usize = 5000;

fn required<'a>(field: &str, value: &'a Option<String>, max: usize) -> Result<&'a str, Problem> {
    let text = value.as_deref().ok_or_else(|| Problem::invalid(field, "is required when errorCode is 0"))?;
    validate::text(field, text, 1, max)?;
    Ok(text)
}

impl ResultBody {
    fn request_id(&self) -> Result<String, Problem> {
        let id = match &self.request_id {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            _ => return Err(Problem::invalid("requestId", "must be a string or a number")),
        };
        validate::text("requestId", &id, 1, 128)?;
        Ok(id)
    }

    fn check_common(&self) -> Result<(), Problem> {
        if self.error_code < 0 {
            return Err(Problem::invalid("errorCode", "must be 0 (success) or a positive error code"));
        }
        if let Some(message) = &self.error_message {
            validate::text("errorMessage", message, 0, MAX_ERROR_MESSAGE)?;
        }
        Ok(())
    }
}

/// SHA-256 of the result in a canonical form (fields in declaration order).
fn digest(body: &ResultBody) -> String {
    hex::encode(Sha256::digest(serde_json::to_vec(body).expect("a result serializes")))
}

fn not_found(kind: RequestKind, id: &str) -> Problem {
    let what = match kind {
        RequestKind::LoginCert => "login-certificate",
        RequestKind::Revocation => "revocation",
    };
    Problem::not_found(
        codes::CERT_REQUEST_NOT_FOUND,
        "certificate-request-not-found",
        "Certificate request not found",
        format!("requestId: no {what} request '{id}'"),
    )
    .field("requestId")
}

fn lease_ended() -> Problem {
    Problem::conflict(
        codes::LEASE_ENDED,
        "lease-ended",
        "Result outside the timeout window",
        "requestId: the request's lease ended before this result; it has been re-queued".into(),
    )
    .field("requestId")
}

/// The request a result is for, if the result may be stored now: `Ok(None)` means the same
/// result was stored already (answer 204).
async fn admissible(
    state: &AppState,
    kind: RequestKind,
    id: &str,
    digest: &str,
) -> Result<Option<(CertRequestRecord, u64)>, Problem> {
    let store = state.backend.store.as_ref();
    let Some((request, version)) = Workstations::new(store).cert_request(id).await? else {
        return Err(not_found(kind, id));
    };
    if request.kind != kind {
        return Err(not_found(kind, id));
    }
    let now = state.backend.clock.epoch_millis();
    match request.state {
        RequestState::Done | RequestState::Failed if request.result_digest.as_deref() == Some(digest) => {
            Ok(None)
        }
        RequestState::Done | RequestState::Failed => Err(Problem::conflict(
            codes::RESULT_DIFFERS,
            "result-differs",
            "Another result was stored",
            "requestId: a different result for this request was stored already".into(),
        )
        .field("requestId")),
        RequestState::Leased if request.leased_until.is_some_and(|until| now < until) => {
            Ok(Some((request, version)))
        }
        RequestState::Leased => {
            // The time-out message may not have come yet: re-queue now, as it will.
            let expired =
                LeaseExpired::new(&request.request_id, request.lease_id.as_deref().unwrap_or_default());
            Certificates::new(store).expire_lease(&expired, DEFAULT_MAX_ATTEMPTS, now).await?;
            Err(lease_ended())
        }
        RequestState::Pending | RequestState::Dead => Err(lease_ended()),
    }
}

/// After a lost race on the request, the stored outcome decides: the same result is a 204.
async fn after_conflict(
    state: &AppState,
    kind: RequestKind,
    id: &str,
    digest: &str,
) -> Result<StatusCode, Problem> {
    match admissible(state, kind, id, digest).await? {
        None => Ok(StatusCode::NO_CONTENT),
        Some(_) => Err(StoreError::Conflict.into()),
    }
}

fn source(admin: &Admin) -> String {
    format!("agent:{}", admin.0.token_id)
}

/// Marks `request` with the result's outcome and stores it, what it `produced` and its event in
/// one transaction. `Ok(false)` if a concurrent post of the same result stored it first.
#[allow(clippy::too_many_arguments)]
async fn settle(
    state: &AppState,
    admin: &Admin,
    body: &ResultBody,
    digest: &str,
    mut request: CertRequestRecord,
    version: u64,
    produced: Vec<crate::ports::WriteOp>,
) -> Result<bool, Problem> {
    let now = state.backend.clock.epoch_millis();
    request.result_digest = Some(digest.to_owned());
    request.lease_id = None;
    request.leased_until = None;
    if body.error_code == 0 {
        request.state = RequestState::Done;
    } else {
        request.state = RequestState::Failed;
        request.error_code = Some(body.error_code);
        request.error_message = body.error_message.clone();
    }
    let event = result_event(&request, body.error_code, &source(admin), now);
    match Certificates::new(state.backend.store.as_ref()).settle(&request, version, produced, &event).await {
        Ok(()) => Ok(true),
        Err(StoreError::Conflict) => {
            after_conflict(state, request.kind, &request.request_id, digest).await.map(|_| false)
        }
        Err(e) => Err(e.into()),
    }
}

async fn post_issuance(
    State(state): State<AppState>,
    admin: Admin,
    ApiJson(body): ApiJson<ResultBody>,
) -> Result<StatusCode, Problem> {
    body.check_common()?;
    let id = body.request_id()?;
    let digest = digest(&body);
    let success = body.error_code == 0;
    let cert = if success {
        let names = body
            .machine_user_names
            .clone()
            .ok_or_else(|| Problem::invalid("machineUserNames", "is required when errorCode is 0"))?;
        if names.len() > 50 {
            return Err(Problem::invalid("machineUserNames", "at most 50 names"));
        }
        for (i, name) in names.iter().enumerate() {
            validate::text(&format!("machineUserNames[{i}]"), name, 1, 255)?;
        }
        let expiry = body
            .login_cert_expiry_date
            .ok_or_else(|| Problem::invalid("loginCertExpiryDate", "is required when errorCode is 0"))?;
        if expiry <= 0 {
            return Err(Problem::invalid("loginCertExpiryDate", "must be milliseconds since the epoch"));
        }
        Some((
            required("loginCert", &body.login_cert, 48 * 1024)?.to_owned(),
            required("ivLoginCert", &body.iv_login_cert, 64)?.to_owned(),
            required("loginCertAuth", &body.login_cert_auth, 512)?.to_owned(),
            required("loginCertSerialNumber", &body.login_cert_serial_number, 128)?.to_owned(),
            required("issuerKeyAgreementPublicKey", &body.issuer_key_agreement_public_key, 512)?.to_owned(),
            required("issuerKeyAgreementPublicKeyAuth", &body.issuer_key_agreement_public_key_auth, 512)?
                .to_owned(),
            required("signingCert", &body.signing_cert, 16 * 1024)?.to_owned(),
            expiry,
            names,
        ))
    } else {
        None
    };
    if let Some(ws) = &body.machine_user_name_ws {
        validate::text("machineUserNameWS", ws, 0, 255)?;
    }
    let Some((mut request, version)) = admissible(&state, RequestKind::LoginCert, &id, &digest).await? else {
        return Ok(StatusCode::NO_CONTENT);
    };
    let store = state.backend.store.as_ref();
    let certs = Certificates::new(store);
    let now = state.backend.clock.epoch_millis();
    let mut produced = Vec::new();
    let mut remember = None;
    if let Some((login_cert, iv, auth, serial, issuer_key, issuer_auth, signing_cert, expiry, names)) = cert {
        if certs.by_serial(&serial).await?.is_some() {
            return Err(Problem::conflict(
                codes::SERIAL_TAKEN,
                "serial-taken",
                "Serial number already issued",
                "loginCertSerialNumber: a certificate with this serial number exists".into(),
            )
            .field("loginCertSerialNumber"));
        }
        request.cert_serial_number = Some(serial.clone());
        let issued = IssuedCert {
            cert_serial_number: serial,
            app_id: request.app_id.clone(),
            request_id: request.request_id.clone(),
            device_id: request.device_id.clone().unwrap_or_default(),
            named_user: request.machine_user_name.clone().unwrap_or_default(),
            machine_user_name_ws: body
                .machine_user_name_ws
                .clone()
                .filter(|s| !s.is_empty())
                .or(request.machine_user_name_ws.clone()),
            machine_user_names: names.clone(),
            login_cert,
            iv_login_cert: iv,
            login_cert_auth: auth,
            issuer_key_agreement_public_key: issuer_key,
            issuer_key_agreement_public_key_auth: issuer_auth,
            login_cert_expiry_date: expiry,
            signing_cert,
            issued_at: now,
            revoked_at: None,
            revocation_request_id: None,
        };
        produced.push(Certificates::issue_op(&issued)?);
        remember = Some((issued.app_id.clone(), issued.named_user.clone(), names));
    }
    if !settle(&state, &admin, &body, &digest, request, version, produced).await? {
        return Ok(StatusCode::NO_CONTENT);
    }
    if let Some((app, user, names)) = remember {
        // The directory's names for the user: one user entity. Best effort; the result stands.
        if let Err(e) = certs.remember_names(&app, &user, &names).await {
            tracing::warn!(error = %e, "could not record the user's other names");
        }
    }
    tracing::info!(request_id = %id, success, "login certificate result stored");
    Ok(StatusCode::NO_CONTENT)
}

async fn post_revocation(
    State(state): State<AppState>,
    admin: Admin,
    ApiJson(body): ApiJson<ResultBody>,
) -> Result<StatusCode, Problem> {
    body.check_common()?;
    let id = body.request_id()?;
    let success = body.error_code == 0;
    if body.login_cert.is_some() || body.machine_user_names.is_some() {
        return Err(Problem::invalid(
            if body.login_cert.is_some() { "loginCert" } else { "machineUserNames" },
            "is not a field of a revocation result",
        ));
    }
    let serial = if success {
        Some(required("certSerialNumber", &body.cert_serial_number, 128)?.to_owned())
    } else {
        None
    };
    let digest = digest(&body);
    let Some((request, version)) = admissible(&state, RequestKind::Revocation, &id, &digest).await? else {
        return Ok(StatusCode::NO_CONTENT);
    };
    let certs = Certificates::new(state.backend.store.as_ref());
    let now = state.backend.clock.epoch_millis();
    let mut produced = Vec::new();
    if let Some(serial) = serial {
        if request.cert_serial_number.as_deref() != Some(serial.as_str()) {
            return Err(Problem::invalid(
                "certSerialNumber",
                "is not the serial number this request revokes",
            ));
        }
        if let Some((mut cert, cert_version)) = certs.by_serial(&serial).await? {
            cert.revoked_at.get_or_insert(now);
            produced.push(Certificates::revoke_op(&cert, cert_version)?);
        }
    }
    if !settle(&state, &admin, &body, &digest, request, version, produced).await? {
        return Ok(StatusCode::NO_CONTENT);
    }
    tracing::info!(request_id = %id, success, "revocation result stored");
    Ok(StatusCode::NO_CONTENT)
}

async fn queue_revocation(
    State(state): State<AppState>,
    _admin: Admin,
    ApiPath(serial): ApiPath<String>,
) -> Result<Response, Problem> {
    validate::text("certSerialNumber", &serial, 1, 128)?;
    let certs = Certificates::new(state.backend.store.as_ref());
    for _ in 0..5 {
        let Some((cert, version)) = certs.by_serial(&serial).await? else {
            return Err(Problem::not_found(
                codes::CERT_NOT_FOUND,
                "certificate-not-found",
                "Certificate not found",
                format!("certSerialNumber: no certificate '{serial}'"),
            )
            .field("certSerialNumber"));
        };
        if cert.revoked_at.is_some() {
            return Err(Problem::conflict(
                codes::CERT_REVOKED,
                "certificate-revoked",
                "Certificate already revoked",
                format!("certSerialNumber: '{serial}' is revoked already"),
            )
            .field("certSerialNumber"));
        }
        if let Some(pending) = &cert.revocation_request_id {
            // A revocation under way is answered again; one that failed or died is queued anew.
            let live = match Workstations::new(state.backend.store.as_ref()).cert_request(pending).await? {
                Some((r, _)) => !matches!(r.state, RequestState::Failed | RequestState::Dead),
                None => false,
            };
            if live {
                return Ok((
                    StatusCode::ACCEPTED,
                    Json(json!({ "requestId": pending, "certSerialNumber": serial })),
                )
                    .into_response());
            }
        }
        let (app, _) = super::cc::load_app(&state, cert.app_id.as_str()).await?;
        let request = CertRequestRecord {
            device_id: Some(cert.device_id.clone()),
            cert_serial_number: Some(serial.clone()),
            ..CertRequestRecord::new(
                RequestKind::Revocation,
                cert.app_id.clone(),
                app.workstation.request_timeout_in_secs,
                state.backend.clock.epoch_millis(),
            )
        };
        match certs.queue_revocation(&cert, version, &request).await {
            Ok(()) => {
                tracing::info!(request_id = %request.request_id, "revocation queued");
                return Ok((
                    StatusCode::ACCEPTED,
                    Json(json!({ "requestId": request.request_id, "certSerialNumber": serial })),
                )
                    .into_response());
            }
            Err(StoreError::Conflict) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(StoreError::Conflict.into())
}

/// A registered device, authenticated by its device token.
pub struct DeviceCaller {
    pub app_id: crate::domain::apps::AppId,
    pub device_id: String,
}

impl FromRequestParts<AppState> for DeviceCaller {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Problem> {
        let secret = super::extract::bearer(parts)?;
        let presented = secret.hash();
        let record = Devices::new(state.backend.store.as_ref()).device_token(&presented).await?;
        let invalid =
            || Problem::unauthorized(codes::INVALID_TOKEN, "Authorization: the device token is not valid");
        let record = record.ok_or_else(invalid)?;
        let stored = crate::domain::tokens::TokenHash::from_hex(&record.hash).ok_or_else(invalid)?;
        if !stored.matches(&presented) {
            return Err(invalid());
        }
        Ok(DeviceCaller { app_id: record.app_id, device_id: record.device_id })
    }
}

/// The device's issued certificates, still encrypted for it.
async fn device_certificates(
    State(state): State<AppState>,
    device: DeviceCaller,
) -> Result<Json<Value>, Problem> {
    let certs =
        Certificates::new(state.backend.store.as_ref()).of_device(&device.app_id, &device.device_id).await?;
    Ok(Json(json!({
        "certificates": certs.iter().map(|c| json!({
            "certSerialNumber": c.cert_serial_number,
            "loginCert": c.login_cert,
            "ivLoginCert": c.iv_login_cert,
            "loginCertAuth": c.login_cert_auth,
            "issuerKeyAgreementPublicKey": c.issuer_key_agreement_public_key,
            "issuerKeyAgreementPublicKeyAuth": c.issuer_key_agreement_public_key_auth,
            "loginCertExpiryDate": c.login_cert_expiry_date,
            "signingCert": c.signing_cert,
            "machineUserNameWS": c.machine_user_name_ws,
            "requestId": c.request_id,
            "revoked": c.revoked_at.is_some(),
        })).collect::<Vec<_>>(),
    })))
}
