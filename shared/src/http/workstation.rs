//! Workstation enrollment and pairing (workstation-api.md; DECISIONS §4, §5). Access tokens of
//! the app (`rpAppId`) only.
//!
//! The enrollment session ties `enroll` to `complete`: `enroll` opens it (TTL 10 minutes) for the
//! user and device it found, under the `sessionId` the workstation sent (the session it
//! authenticated in) or, on the user-name-and-password path where there is none, under a fresh
//! server-issued id. Either way the id comes back in the `X-Enrollment-Session-Id` header, and
//! `complete` must send it as `sessionId`.

use super::extract::{Access, ApiJson, ApiQuery};
use super::problem::{codes, Problem};
use super::AppState;
use crate::domain::apps::AppId;
use crate::domain::devices::{self, fingerprint};
use crate::domain::time::iso8601;
use crate::domain::validate::{self, FieldError};
use crate::ports::keys::{open, seal};
use crate::ports::{EncryptionContext, StoreError};
use crate::repo::apps::AppRecord;
use crate::repo::devices::{DeviceRecord, Devices};
use crate::repo::events::EventRecord;
use crate::repo::workstations::{
    CertRequestRecord, Completion, EnrollmentRecord, EnrollmentSession, PairingRecord, RequestKind,
    SessionState, Workstations,
};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

/// `/rp/wsapi/client/enroll`
pub fn enroll_router(_state: &AppState) -> Router<AppState> {
    Router::new().route("/rp/wsapi/client/enroll", post(enroll))
}

/// `/rp/wasapi/client/enroll/complete`
pub fn complete_router(_state: &AppState) -> Router<AppState> {
    Router::new().route("/rp/wasapi/client/enroll/complete", post(complete))
}

/// `/rp/api/client/reg`
pub fn client_reg_router(_state: &AppState) -> Router<AppState> {
    Router::new().route("/rp/api/client/reg", post(pair).get(read_pairing).patch(update_pairing))
}

pub const SESSION_HEADER: &str = "x-enrollment-session-id";
const SESSION_TTL_SECS: i64 = 10 * 60;

fn status(message: &str) -> Value {
    json!({ "responseCode": 200, "responseMessage": message })
}

fn text_field(field: &str, value: &str, max: usize) -> Result<(), Problem> {
    Ok(validate::text(field, value, 1, max)?)
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct EnrollRequest {
    rp_app_id: String,
    #[serde(rename = "machineUserNameWS")]
    machine_user_name_ws: String,
    session_id: Option<String>,
    /// Optional: pins the machine in the session at once (else the first complete pins it).
    machine_id: Option<String>,
    machine_version: Option<String>,
}

/// 403 unless the body's app is the token's.
fn same_app(access: &Access, field: &str, app_id: &str) -> Result<AppId, Problem> {
    let app = AppId::parse(field, app_id)?;
    access.require_app(app.as_str())?;
    Ok(app)
}

async fn enroll(
    State(state): State<AppState>,
    access: Access,
    ApiJson(body): ApiJson<EnrollRequest>,
) -> Result<Response, Problem> {
    let app = same_app(&access, "rpAppId", &body.rp_app_id)?;
    text_field("machineUserNameWS", &body.machine_user_name_ws, 255)?;
    let session_id = match &body.session_id {
        Some(id) => devices::identifier("sessionId", id)?,
        None => format!("ens-{}", uuid::Uuid::new_v4().simple()),
    };
    if let Some(id) = &body.machine_id {
        devices::identifier("machineId", id)?;
    }
    if let Some(v) = &body.machine_version {
        text_field("machineVersion", v, 128)?;
    }
    let store = state.backend.store.as_ref();
    let users = Devices::new(store);
    let user = users.resolve_user(&app, &body.machine_user_name_ws).await?.ok_or_else(|| {
        Problem::invalid("machineUserNameWS", "no registered user has this name")
            .with_code(codes::UNKNOWN_USER)
    })?;
    let device = users.devices_of(&app, &user.named_user).await?.pop().ok_or_else(|| {
        Problem::invalid("machineUserNameWS", "the user has no registered device").with_code(codes::NO_DEVICE)
    })?;
    let now = state.backend.clock.epoch_millis();
    let session = EnrollmentSession {
        session_id: session_id.clone(),
        app_id: app.clone(),
        named_user: user.named_user.clone(),
        device_id: device.device_id.clone(),
        machine_user_name_ws: body.machine_user_name_ws.clone(),
        created_at: now,
        expires_at: now + SESSION_TTL_SECS * 1000,
        machine_id: body.machine_id,
        machine_version: body.machine_version,
        state: SessionState::Open,
        completion: None,
    };
    let workstations = Workstations::new(store);
    match workstations.open_session(&session).await {
        Ok(()) => {}
        Err(StoreError::Conflict) => {
            return Err(Problem::conflict(
                codes::SESSION_CONFLICT,
                "enrollment-session-conflict",
                "Enrollment session in use",
                "sessionId: this session belongs to another enrollment".into(),
            )
            .field("sessionId"))
        }
        Err(e) => return Err(e.into()),
    }
    let enc_counter = workstations.enc_counter(&app, &device.device_id).await?;
    tracing::info!(app_id = %app, device_id = %device.device_id, "enrollment session opened");
    let body = json!({
        "status": status("Success"),
        "response": { "device": device_json(&device, enc_counter) },
    });
    Ok(([(SESSION_HEADER, session_id)], Json(body)).into_response())
}

/// The enroll response's device: `deviceKey` is the device's signing key, `authenticationKey`
/// that key's fingerprint (the key id the device authenticates with).
fn device_json(device: &DeviceRecord, enc_counter: i64) -> Value {
    json!({
        "deviceKey": device.signing_public_key,
        "authenticationKey": fingerprint(&device.signing_public_key),
        "friendlyName": device.friendly_name,
        "deviceId": device.device_id,
        "modelNumber": device.model_number,
        "keyAgreementPublicKey": device.key_agreement_public_key,
        "encCounter": enc_counter.to_string(),
    })
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CompleteRequest {
    error_code: i64,
    session_id: String,
    signing_cert: String,
    machine_name: String,
    machine_id: String,
    machine_user_name: String,
    machine_version: String,
}

fn mismatch(field: &str, what: &str) -> Problem {
    Problem::invalid(field, format!("does not match the enrollment session's {what}"))
        .with_code(codes::CROSS_CHECK_FAILED)
}

async fn complete(
    State(state): State<AppState>,
    access: Access,
    ApiJson(body): ApiJson<CompleteRequest>,
) -> Result<Json<Value>, Problem> {
    let session_id = devices::identifier("sessionId", &body.session_id)?;
    if body.error_code < 0 {
        return Err(Problem::invalid("errorCode", "must be 0 (success) or a positive error code"));
    }
    if body.error_code == 0 {
        text_field("signingCert", &body.signing_cert, 16 * 1024)?;
    } else {
        validate::text("signingCert", &body.signing_cert, 0, 16 * 1024)?;
    }
    text_field("machineName", &body.machine_name, 255)?;
    devices::identifier("machineId", &body.machine_id)?;
    text_field("machineUserName", &body.machine_user_name, 255)?;
    text_field("machineVersion", &body.machine_version, 128)?;
    let app = access.app_id.clone();
    let store = state.backend.store.as_ref();
    let workstations = Workstations::new(store);
    let not_found = || {
        Problem::invalid("sessionId", "no open enrollment session has this id (unknown or expired)")
            .with_code(codes::SESSION_NOT_FOUND)
    };
    let (mut session, version) = workstations.session(&app, &session_id).await?.ok_or_else(not_found)?;
    let now = state.backend.clock.epoch_millis();
    // Cross-checks: the user by name or alias, the machine as pinned.
    let user = Devices::new(store).resolve_user(&app, &body.machine_user_name).await?;
    if user.map(|u| u.named_user) != Some(session.named_user.clone()) {
        return Err(mismatch("machineUserName", "user"));
    }
    if session.machine_id.as_deref().is_some_and(|m| m != body.machine_id) {
        return Err(mismatch("machineId", "machine"));
    }
    if session.machine_version.as_deref().is_some_and(|v| v != body.machine_version) {
        return Err(mismatch("machineVersion", "machine version"));
    }
    let completion = Completion {
        error_code: body.error_code,
        machine_name: body.machine_name.clone(),
        machine_id: body.machine_id.clone(),
        machine_user_name: body.machine_user_name.clone(),
        machine_version: body.machine_version.clone(),
        signing_cert: body.signing_cert.clone(),
    };
    match (&session.state, &session.completion) {
        (SessionState::Open, _) => {}
        (_, Some(done)) if *done == completion => {
            return Ok(Json(json!({ "status": status("Enrollment already completed") })));
        }
        _ => {
            return Err(Problem::conflict(
                codes::SESSION_CONFLICT,
                "enrollment-session-conflict",
                "Enrollment session closed",
                "sessionId: this session was completed with other data".into(),
            )
            .field("sessionId"))
        }
    }
    session.machine_id = Some(body.machine_id.clone());
    session.machine_version = Some(body.machine_version.clone());
    session.completion = Some(completion);
    let source = format!("workstation:{}", access.token.token_id);
    let (enrollment, event, message) = if body.error_code == 0 {
        session.state = SessionState::Completed;
        let enrollment = EnrollmentRecord {
            app_id: app.clone(),
            machine_id: body.machine_id.clone(),
            machine_name: body.machine_name,
            machine_version: body.machine_version,
            machine_user_name: body.machine_user_name,
            named_user: session.named_user.clone(),
            device_id: session.device_id.clone(),
            signing_cert: body.signing_cert,
            session_id: session_id.clone(),
            enrolled_at: now,
        };
        let attributes = attrs(&[("machineId", &enrollment.machine_id), ("deviceId", &enrollment.device_id)]);
        let event = EventRecord::new("WORKSTATION_ENROLL", Some(app.clone()), source, now, attributes);
        (Some(enrollment), event, "Enrollment completed")
    } else {
        session.state = SessionState::Failed;
        let mut attributes = attrs(&[("machineId", &body.machine_id), ("sessionId", &session_id)]);
        attributes.insert("success".into(), json!(false));
        attributes.insert("errorCode".into(), json!(body.error_code));
        let event = EventRecord::new("OOB_WORKSTATION_REG", Some(app.clone()), source, now, attributes);
        (None, event, "Enrollment failure recorded")
    };
    match workstations.close_session(&session, version, enrollment.as_ref(), &event, now).await {
        Ok(()) => Ok(Json(json!({ "status": status(message) }))),
        // A concurrent identical complete won: the outcome is the same.
        Err(StoreError::Conflict) => match workstations.session(&app, &session_id).await? {
            Some((current, _)) if current.completion == session.completion => {
                Ok(Json(json!({ "status": status("Enrollment already completed") })))
            }
            _ => Err(StoreError::Conflict.into()),
        },
        Err(e) => Err(e.into()),
    }
}

fn attrs(pairs: &[(&str, &str)]) -> Map<String, Value> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), Value::String((*v).to_owned()))).collect()
}

/// The workstation's offline PINs as stored (sealed).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OfflineTokens {
    pub tokens: String,
    pub tokens_auth: String,
}

fn offline_context(app: &AppId) -> EncryptionContext {
    EncryptionContext::new(app.as_str(), "offline-tokens")
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PairRequest {
    machine_id: String,
    device_id: String,
    machine_name: Option<String>,
    #[serde(rename = "machineUserNameWS")]
    machine_user_name_ws: Option<String>,
}

/// A pairing as every `/rp/api/client/reg` response shows it; `app` is the pairing's app.
async fn pairing_json(state: &AppState, pairing: &PairingRecord, app: &AppRecord) -> Result<Value, Problem> {
    let offline = match &pairing.offline {
        Some(sealed) => {
            let plain = open(state.backend.keys.as_ref(), &offline_context(&pairing.app_id), sealed).await?;
            serde_json::from_slice::<OfflineTokens>(&plain).map_err(Problem::internal)?
        }
        None => OfflineTokens::default(),
    };
    Ok(json!({
        "machineId": pairing.machine_id,
        "deviceId": pairing.device_id,
        "namedUser": pairing.named_user,
        "machineName": pairing.machine_name,
        "machineUserNameWS": pairing.machine_user_name_ws,
        "certificateRequestId": pairing.certificate_request_id,
        "createdAt": iso8601(pairing.created_at),
        "updatedAt": iso8601(pairing.updated_at),
        "rpConfig": { "workstation": { "offlineAccess": app.workstation.offline_access } },
        "workstation": { "offline": offline },
    }))
}

async fn pair(
    State(state): State<AppState>,
    access: Access,
    ApiJson(body): ApiJson<PairRequest>,
) -> Result<Response, Problem> {
    let app = access.app_id.clone();
    let machine_id = devices::identifier("machineId", &body.machine_id)?;
    let device_id = devices::identifier("deviceId", &body.device_id)?;
    if let Some(name) = &body.machine_name {
        text_field("machineName", name, 255)?;
    }
    if let Some(name) = &body.machine_user_name_ws {
        text_field("machineUserNameWS", name, 255)?;
    }
    let store = state.backend.store.as_ref();
    let workstations = Workstations::new(store);
    let (settings, _) = super::cc::load_app(&state, app.as_str()).await?;
    // Seed rule 4: a pairing that exists is returned as it is, and nothing is queued again.
    if let Some((existing, _)) = workstations.pairing(&app, &machine_id, &device_id).await? {
        return Ok((StatusCode::OK, Json(pairing_json(&state, &existing, &settings).await?)).into_response());
    }
    let device = Devices::new(store).device(&app, &device_id).await?.ok_or_else(|| {
        Problem::invalid("deviceId", "no registered device of this app has this id")
            .with_code(codes::UNKNOWN_DEVICE)
    })?;
    let now = state.backend.clock.epoch_millis();
    let enc_counter = workstations.next_enc_counter(&app, &device_id).await?;
    let request = CertRequestRecord {
        machine_user_name_ws: body.machine_user_name_ws.clone(),
        machine_user_name: Some(device.named_user.clone()),
        device_id: Some(device_id.clone()),
        device_key_agreement_public_key: Some(device.key_agreement_public_key.clone()),
        enc_counter: Some(enc_counter.to_string()),
        ..CertRequestRecord::new(
            RequestKind::LoginCert,
            app.clone(),
            settings.workstation.request_timeout_in_secs,
            now,
        )
    };
    let pairing = PairingRecord {
        app_id: app.clone(),
        machine_id: machine_id.clone(),
        device_id: device_id.clone(),
        named_user: device.named_user,
        machine_name: body.machine_name,
        machine_user_name_ws: body.machine_user_name_ws,
        created_at: now,
        updated_at: now,
        certificate_request_id: request.request_id.clone(),
        offline: None,
    };
    if workstations.pair(&pairing, &request).await? {
        tracing::info!(app_id = %app, %machine_id, %device_id, request_id = %request.request_id, "paired; login certificate requested");
        return Ok(
            (StatusCode::CREATED, Json(pairing_json(&state, &pairing, &settings).await?)).into_response()
        );
    }
    // A concurrent POST created it first.
    let (existing, _) = workstations
        .pairing(&app, &machine_id, &device_id)
        .await?
        .ok_or_else(|| Problem::from(StoreError::Conflict))?;
    Ok((StatusCode::OK, Json(pairing_json(&state, &existing, &settings).await?)).into_response())
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PairingQuery {
    machine_id: Option<String>,
    device_id: Option<String>,
}

fn pairing_not_found() -> Problem {
    Problem::not_found(
        codes::PAIRING_NOT_FOUND,
        "pairing-not-found",
        "Pairing not found",
        "no pairing of this machine and device".into(),
    )
}

async fn read_pairing(
    State(state): State<AppState>,
    access: Access,
    ApiQuery(query): ApiQuery<PairingQuery>,
) -> Result<Json<Value>, Problem> {
    let machine_id = devices::identifier(
        "machineId",
        query.machine_id.as_deref().ok_or_else(|| FieldError::new("machineId", "is required"))?,
    )?;
    let device_id = devices::identifier(
        "deviceId",
        query.device_id.as_deref().ok_or_else(|| FieldError::new("deviceId", "is required"))?,
    )?;
    let (pairing, _) = Workstations::new(state.backend.store.as_ref())
        .pairing(&access.app_id, &machine_id, &device_id)
        .await?
        .ok_or_else(pairing_not_found)?;
    let (app, _) = super::cc::load_app(&state, access.app_id.as_str()).await?;
    Ok(Json(pairing_json(&state, &pairing, &app).await?))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PairingUpdate {
    machine_id: String,
    device_id: String,
    machine_name: Option<String>,
    offline: Option<OfflineTokens>,
}

async fn update_pairing(
    State(state): State<AppState>,
    access: Access,
    ApiJson(body): ApiJson<PairingUpdate>,
) -> Result<Json<Value>, Problem> {
    let machine_id = devices::identifier("machineId", &body.machine_id)?;
    let device_id = devices::identifier("deviceId", &body.device_id)?;
    if body.machine_name.is_none() && body.offline.is_none() {
        return Err(Problem::invalid("body", "an update must give machineName or offline"));
    }
    if let Some(name) = &body.machine_name {
        text_field("machineName", name, 255)?;
    }
    let app = access.app_id.clone();
    let (settings, _) = super::cc::load_app(&state, app.as_str()).await?;
    let sealed = match &body.offline {
        Some(tokens) => {
            validate::text("offline.tokens", &tokens.tokens, 1, 16 * 1024)?;
            validate::text("offline.tokensAuth", &tokens.tokens_auth, 1, 1024)?;
            if !settings.workstation.offline_access.enabled {
                return Err(Problem::forbidden(codes::OFFLINE_DISABLED, format!("offline access is disabled for app '{app}'; an admin enables it in the app's workstation settings")));
            }
            let plain = serde_json::to_vec(tokens).expect("tokens serialize");
            Some(seal(state.backend.keys.as_ref(), &offline_context(&app), &plain).await?)
        }
        None => None,
    };
    let workstations = Workstations::new(state.backend.store.as_ref());
    for _ in 0..5 {
        let (mut pairing, version) =
            workstations.pairing(&app, &machine_id, &device_id).await?.ok_or_else(pairing_not_found)?;
        if let Some(name) = &body.machine_name {
            pairing.machine_name = Some(name.clone());
        }
        if let Some(sealed) = &sealed {
            pairing.offline = Some(sealed.clone());
        }
        pairing.updated_at = state.backend.clock.epoch_millis();
        match workstations.replace_pairing(&pairing, version).await {
            Ok(()) => {
                tracing::info!(app_id = %app, %machine_id, %device_id, offline = sealed.is_some(), "pairing updated");
                return Ok(Json(pairing_json(&state, &pairing, &settings).await?));
            }
            Err(StoreError::Conflict) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(StoreError::Conflict.into())
}
