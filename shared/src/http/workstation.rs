//! Workstation enrollment and pairing (workstation-api.md; DECISIONS §4, §5). Access tokens of
//! the app (`rpAppId`) only.
//!
//! The enrollment session ties `enroll` to `complete`: `enroll` opens it (TTL 10 minutes) for the
//! user and device it found, under the `sessionId` the workstation sent (the session it
//! authenticated in) or, on the user-name-and-password path where there is none, under a fresh
//! server-issued id. Either way the id comes back in the `X-Enrollment-Session-Id` header, and
//! `complete` must send it as `sessionId`. The rules live in [`crate::domain::enrollment`] and
//! [`crate::domain::pairing`]; these handlers parse, call, persist and answer.

use super::extract::{Access, ApiJson, ApiQuery};
use super::problem::Problem;
use super::AppState;
use crate::domain::apps::{AppId, OfflineAccess};
use crate::domain::devices::{fingerprint, DeviceRecord};
use crate::domain::enrollment::{
    Closing, Complete, CompleteRequest, Completed, Enroll, EnrollError, EnrollRequest, EnrollmentSession,
    SessionState, SESSION_TTL_SECS,
};
use crate::domain::pairing::{
    require_offline, NewPairing, OfflineTokens, PairRequest, PairedDevice, Pairing, PairingError, PairingKey,
    PairingQuery, PairingUpdate, PairingUpdateRequest,
};
use crate::ports::keys::{open, seal};
use crate::ports::{retry_on_conflict, EncryptionContext, StoreError};
use crate::repo::apps::AppRecord;
use crate::repo::devices::Devices;
use crate::repo::workstations::Workstations;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde::Serialize;

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

/// The seed's `status` object.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    pub response_code: u16,
    pub response_message: String,
}

impl Status {
    pub fn ok(message: &str) -> Self {
        Self { response_code: 200, response_message: message.to_owned() }
    }
}

/// An answer that is only the seed's `status`.
#[derive(Debug, Serialize)]
pub struct StatusResponse {
    pub status: Status,
}

/// The seed's enroll response.
#[derive(Debug, Serialize)]
pub struct EnrollResponse {
    pub status: Status,
    pub response: EnrolledDeviceResponse,
}

#[derive(Debug, Serialize)]
pub struct EnrolledDeviceResponse {
    pub device: EnrolledDevice,
}

/// The enroll response's device: `deviceKey` is the device's signing key, `authenticationKey`
/// that key's fingerprint (the key id the device authenticates with).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EnrolledDevice {
    pub device_key: String,
    pub authentication_key: String,
    pub friendly_name: String,
    pub device_id: String,
    pub model_number: String,
    pub key_agreement_public_key: String,
    pub enc_counter: String,
}

impl EnrolledDevice {
    fn new(device: DeviceRecord, enc_counter: i64) -> Self {
        Self {
            authentication_key: fingerprint(&device.signing_public_key),
            device_key: device.signing_public_key,
            friendly_name: device.friendly_name,
            device_id: device.device_id,
            model_number: device.model_number,
            key_agreement_public_key: device.key_agreement_public_key,
            enc_counter: enc_counter.to_string(),
        }
    }
}

async fn enroll(
    State(state): State<AppState>,
    access: Access,
    ApiJson(body): ApiJson<EnrollRequest>,
) -> Result<Response, Problem> {
    let request = Enroll::try_from(body)?;
    access.require_app(request.app_id.as_str())?;
    let store = state.backend.store.as_ref();
    let devices = Devices::new(store);
    let app = &request.app_id;
    let user =
        devices.resolve_user(app, &request.machine_user_name_ws).await?.ok_or(EnrollError::UnknownUser)?;
    let device = devices.devices_of(app, &user.named_user).await?.pop().ok_or(EnrollError::NoDevice)?;
    let now = state.backend.clock.now_millis();
    let fresh = EnrollmentSession {
        session_id: request
            .session_id
            .clone()
            .unwrap_or_else(|| format!("ens-{}", uuid::Uuid::new_v4().simple())),
        app_id: app.clone(),
        named_user: user.named_user.clone(),
        device_id: device.device_id.clone(),
        machine_user_name_ws: request.machine_user_name_ws.clone(),
        created_at: now,
        expires_at: now.plus_secs(SESSION_TTL_SECS),
        machine_id: request.machine_id.clone(),
        machine_version: request.machine_version.clone(),
        state: SessionState::Open,
        completion: None,
    };
    let workstations = Workstations::new(store);
    let fresh = &fresh;
    retry_on_conflict(|| async move {
        match workstations.session(app, &fresh.session_id).await? {
            None => workstations.create_session(fresh).await?,
            Some((existing, version)) => {
                workstations.replace_session(&existing.reopen(fresh.clone())?, version).await?
            }
        }
        Ok::<_, EnrollError>(())
    })
    .await?;
    let enc_counter = workstations.enc_counter(app, &device.device_id).await?;
    tracing::info!(app_id = %app, device_id = %device.device_id, "enrollment session opened");
    let body = EnrollResponse {
        status: Status::ok("Success"),
        response: EnrolledDeviceResponse { device: EnrolledDevice::new(device, enc_counter) },
    };
    Ok(([(SESSION_HEADER, fresh.session_id.clone())], Json(body)).into_response())
}

async fn complete(
    State(state): State<AppState>,
    access: Access,
    ApiJson(body): ApiJson<CompleteRequest>,
) -> Result<Json<StatusResponse>, EnrollError> {
    let Complete { session_id, completion } = Complete::try_from(body)?;
    let app = &access.app_id;
    let store = state.backend.store.as_ref();
    let workstations = Workstations::new(store);
    let source = format!("workstation:{}", access.token.token_id);
    let now = state.backend.clock.now_millis();
    // The user the workstation names, by name or alias; cross-checked against the session's.
    let user =
        Devices::new(store).resolve_user(app, &completion.machine_user_name).await?.map(|u| u.named_user);
    let (session_id, completion, source, user) = (&session_id, &completion, source.as_str(), user.as_deref());
    let message = retry_on_conflict(|| async move {
        let (session, version) =
            workstations.session(app, session_id).await?.ok_or(EnrollError::SessionNotFound)?;
        match session.complete(completion.clone(), user, source, now)? {
            Completed::Repeated => Ok::<_, EnrollError>("Enrollment already completed"),
            Completed::Closed(closing) => {
                let Closing { session, enrollment, event, message } = *closing;
                workstations.close_session(&session, version, enrollment.as_ref(), &event).await?;
                Ok(message)
            }
        }
    })
    .await?;
    Ok(Json(StatusResponse { status: Status::ok(message) }))
}

fn offline_context(app: &AppId) -> EncryptionContext {
    EncryptionContext::new(app.as_str(), "offline-tokens")
}

/// A pairing as every `/rp/api/client/reg` response shows it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PairingView {
    pub machine_id: String,
    pub device_id: String,
    pub named_user: String,
    pub machine_name: Option<String>,
    #[serde(rename = "machineUserNameWS")]
    pub machine_user_name_ws: Option<String>,
    pub certificate_request_id: String,
    pub created_at: String,
    pub updated_at: String,
    pub rp_config: RpConfig,
    pub workstation: WorkstationOffline,
}

/// `rpConfig.workstation.offlineAccess`.
#[derive(Debug, Serialize)]
pub struct RpConfig {
    pub workstation: RpWorkstation,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RpWorkstation {
    pub offline_access: OfflineAccess,
}

/// `workstation.offline`: empty strings until tokens exist.
#[derive(Debug, Serialize)]
pub struct WorkstationOffline {
    pub offline: OfflineTokens,
}

/// The view of `pairing` (of the app `app`), with its offline tokens opened.
async fn pairing_view(
    state: &AppState,
    pairing: Pairing,
    app: &AppRecord,
) -> Result<PairingView, PairingError> {
    let offline = match &pairing.offline {
        Some(sealed) => {
            let plain = open(state.backend.keys.as_ref(), &offline_context(&pairing.app_id), sealed).await?;
            serde_json::from_slice::<OfflineTokens>(&plain).map_err(StoreError::encoding)?
        }
        None => OfflineTokens::default(),
    };
    Ok(PairingView {
        machine_id: pairing.machine_id,
        device_id: pairing.device_id,
        named_user: pairing.named_user,
        machine_name: pairing.machine_name,
        machine_user_name_ws: pairing.machine_user_name_ws,
        certificate_request_id: pairing.certificate_request_id,
        created_at: pairing.created_at.iso8601(),
        updated_at: pairing.updated_at.iso8601(),
        rp_config: RpConfig {
            workstation: RpWorkstation { offline_access: app.workstation.offline_access.clone() },
        },
        workstation: WorkstationOffline { offline },
    })
}

async fn pair(
    State(state): State<AppState>,
    access: Access,
    ApiJson(body): ApiJson<PairRequest>,
) -> Result<(StatusCode, Json<PairingView>), Problem> {
    let request = NewPairing::try_from(body)?;
    let app = &access.app_id;
    let store = state.backend.store.as_ref();
    let workstations = Workstations::new(store);
    let (settings, _) = super::cc::load_app(&state, app.as_str()).await?;
    // Seed rule 4: a pairing that exists is returned as it is, and nothing is queued again.
    if let Some((existing, _)) = workstations.pairing(app, &request.machine_id, &request.device_id).await? {
        return Ok((StatusCode::OK, Json(pairing_view(&state, existing, &settings).await?)));
    }
    let device =
        Devices::new(store).device(app, &request.device_id).await?.ok_or(PairingError::UnknownDevice)?;
    let enc_counter = workstations.next_enc_counter(app, &device.device_id).await?;
    let device = PairedDevice {
        device_id: device.device_id,
        named_user: device.named_user,
        key_agreement_public_key: device.key_agreement_public_key,
    };
    let (pairing, cert_request) = Pairing::create(
        app.clone(),
        &request,
        &device,
        enc_counter,
        settings.workstation.request_timeout_in_secs,
        state.backend.clock.now_millis(),
    );
    match workstations.pair(&pairing, &cert_request).await {
        Ok(()) => {
            tracing::info!(app_id = %app, machine_id = %pairing.machine_id, device_id = %pairing.device_id, request_id = %cert_request.request_id, "paired; login certificate requested");
            Ok((StatusCode::CREATED, Json(pairing_view(&state, pairing, &settings).await?)))
        }
        // A concurrent POST created it first: answer with the winner's pairing.
        Err(StoreError::Conflict) => {
            let (existing, _) = workstations
                .pairing(app, &request.machine_id, &request.device_id)
                .await?
                .ok_or(StoreError::Conflict)?;
            Ok((StatusCode::OK, Json(pairing_view(&state, existing, &settings).await?)))
        }
        Err(e) => Err(e.into()),
    }
}

async fn read_pairing(
    State(state): State<AppState>,
    access: Access,
    ApiQuery(query): ApiQuery<PairingQuery>,
) -> Result<Json<PairingView>, Problem> {
    let key = PairingKey::try_from(query)?;
    let (pairing, _) = Workstations::new(state.backend.store.as_ref())
        .pairing(&access.app_id, &key.machine_id, &key.device_id)
        .await?
        .ok_or(PairingError::NotFound)?;
    let (app, _) = super::cc::load_app(&state, access.app_id.as_str()).await?;
    Ok(Json(pairing_view(&state, pairing, &app).await?))
}

async fn update_pairing(
    State(state): State<AppState>,
    access: Access,
    ApiJson(body): ApiJson<PairingUpdateRequest>,
) -> Result<Json<PairingView>, Problem> {
    let update = PairingUpdate::try_from(body)?;
    let app = &access.app_id;
    let (settings, _) = super::cc::load_app(&state, app.as_str()).await?;
    let sealed = match &update.offline {
        Some(tokens) => {
            require_offline(app, &settings.workstation.offline_access)?;
            let plain = serde_json::to_vec(tokens).expect("tokens serialize");
            Some(seal(state.backend.keys.as_ref(), &offline_context(app), &plain).await?)
        }
        None => None,
    };
    let workstations = Workstations::new(state.backend.store.as_ref());
    let now = state.backend.clock.now_millis();
    let (update, sealed) = (&update, sealed.as_ref());
    let pairing = retry_on_conflict(|| async move {
        let (pairing, version) = workstations
            .pairing(app, &update.machine_id, &update.device_id)
            .await?
            .ok_or(PairingError::NotFound)?;
        let next = pairing.update(update.machine_name.as_deref(), sealed, now);
        workstations.replace_pairing(&next, version).await?;
        Ok::<_, PairingError>(next)
    })
    .await?;
    tracing::info!(app_id = %app, machine_id = %pairing.machine_id, device_id = %pairing.device_id, offline = sealed.is_some(), "pairing updated");
    Ok(Json(pairing_view(&state, pairing, &settings).await?))
}
