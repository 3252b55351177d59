//! Workstation enrollment and pairing (workstation-api.md; DECISIONS §4, §5). Access tokens of
//! the app (`rpAppId`) only.
//!
//! The enrollment session ties `enroll` to `complete`: `enroll` opens it (TTL 10 minutes) for the
//! user and device it found, under the `sessionId` the workstation sent (the session it
//! authenticated in) or, on the user-name-and-password path where there is none, under a fresh
//! server-issued id. Either way the id comes back as `response.sessionId` and in the
//! `X-Enrollment-Session-Id` header, and
//! `complete` must send it as `sessionId`. The rules live in [`rp_domain::enrollment`] and
//! [`rp_domain::pairing`]; these handlers parse, call, persist and answer.

use super::extract::{beside_input, named_app, require_own_app, Access, ApiJson, ApiQuery, Caller};
use super::problem::Problem;
use super::AppState;
use crate::params::Status;
use axum::extract::State;
use axum::http::{header, request::Parts, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use rp_app::enrollment::{recovery_context, refuse_name_claim};
use rp_app::offline;
use rp_app::offline::OpenPins;
use rp_domain::apps::{AppId, OfflineAccess};
use rp_domain::certificates::CertError;
use rp_domain::devices::{fingerprint, DeviceRecord};
use rp_domain::enrollment::{
    Closing, Complete, CompleteRequest, Completed, Enroll, EnrollError, EnrollRequest, EnrollmentSession,
    SessionState, SESSION_TTL_SECS,
};
use rp_domain::offline::{render_pins, require_enabled};
use rp_domain::pairing::{
    known_workstation_name, NewPairing, OfflineTokens, PairRequest, PairedDevice, Pairing, PairingError,
    PairingKey, PairingQuery, PairingUpdate, PairingUpdateRequest,
};
use rp_domain::time::EpochMillis;
use rp_domain::FieldError;
use rp_ports::keys::seal;
use rp_ports::{retry_on_conflict, retry_on_conflict_from, StoreError};
use rp_repo::apps::AppRecord;
use rp_repo::certificates::Certificates;
use rp_repo::devices::Devices;
use rp_repo::workstations::Workstations;
use serde::Serialize;

/// `/rp/wsapi/client/enroll`
pub fn enroll_router(_state: &AppState) -> Router<AppState> {
    Router::new().route("/rp/wsapi/client/enroll", post(enroll))
}

/// `/rp/versioned/client/registrations`: the seed names it only to say the enroll request's
/// signature is the same. "Client" is the workstation throughout the seed (`/rp/api/client/reg`,
/// `/rp/wsapi/client/enroll`), and the device's own registration is
/// `/rp/versioned/device/registrations`, which takes a registration code, not this signature.
/// So this is the workstation's registration under its versioned name: the enroll handler
/// itself, an alias, not a copy.
pub fn client_registrations_router(_state: &AppState) -> Router<AppState> {
    Router::new().route(CLIENT_REGISTRATIONS, post(enroll))
}

/// The enroll handler's versioned alias; the OpenAPI document lists the enroll operation under
/// it too.
pub const CLIENT_REGISTRATIONS: &str = "/rp/versioned/client/registrations";

/// `/rp/wasapi/client/enroll/complete`
pub fn complete_router(_state: &AppState) -> Router<AppState> {
    Router::new().route("/rp/wasapi/client/enroll/complete", post(complete))
}

/// `/rp/api/client/reg`
pub fn client_reg_router(_state: &AppState) -> Router<AppState> {
    Router::new()
        .route("/rp/api/client/reg", post(pair).get(read_pairing).patch(update_pairing).delete(unpair))
}

pub const SESSION_HEADER: &str = "x-enrollment-session-id";

/// An answer that is only the seed's `status`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct StatusResponse {
    pub status: Status,
}

/// The seed's enroll response.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct EnrollResponse {
    pub status: Status,
    pub response: EnrolledDeviceResponse,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EnrolledDeviceResponse {
    pub device: EnrolledDevice,
    /// Added beside the seed's fields: the session `complete` must name, the workstation's own
    /// or the one the server issued (also in `X-Enrollment-Session-Id`), so a workstation that
    /// reads only the body can complete.
    pub session_id: String,
}

/// The enroll response's device: `deviceKey` is the device's signing key, `authenticationKey`
/// that key's fingerprint (the key id the device authenticates with).
#[derive(Debug, Serialize, utoipa::ToSchema)]
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

#[utoipa::path(post, path = "/rp/wsapi/client/enroll", tag = "enrollment", security(("access" = [])), request_body = EnrollRequest,
    responses((status = 200, description = "The session is open; `response.sessionId` (also in the header) is what `complete` names",
        body = EnrollResponse, headers(("X-Enrollment-Session-Id" = String, description = "The enrollment session id")))))]
async fn enroll(
    State(state): State<AppState>,
    mut parts: Parts,
    body: Result<ApiJson<EnrollRequest>, Problem>,
) -> Result<Response, Problem> {
    let request = body.and_then(|ApiJson(body)| Ok(Enroll::try_from(body)?));
    let store = state.backend.store.as_ref();
    let devices = Devices::new(store);
    // The user the body names, with their devices, is read beside the token; the token, then
    // the body, then its app are judged before what was read.
    let user = |request: &Enroll| {
        let (app, name) = (request.app_id.clone(), request.machine_user_name_ws.clone());
        async move { devices.user_and_devices(&app, &name).await }
    };
    let (access, request, user) = beside_input::<Access, _, _>(&mut parts, &state, request, user).await?;
    access.require_app(request.app_id.as_str())?;
    let app = &request.app_id;
    let (user, mut listed) = user?.ok_or(EnrollError::UnknownUser)?;
    let device = listed.pop().ok_or(EnrollError::NoDevice)?;
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
    // A session id of our own making names no session yet: only a caller's is looked up.
    let named = request.session_id.is_some();
    let open = retry_on_conflict(|| async move {
        let existing = if named { workstations.session(app, &fresh.session_id).await? } else { None };
        match existing {
            None => workstations.create_session(fresh).await?,
            Some((existing, version)) => {
                workstations.replace_session(&existing.reopen(fresh.clone())?, version).await?
            }
        }
        Ok::<_, EnrollError>(())
    });
    // The device's counter is read while the session is written: it does not depend on it.
    let (opened, enc_counter) = tokio::join!(open, workstations.enc_counter(app, &device.device_id));
    opened?;
    let enc_counter = enc_counter?;
    tracing::info!(app_id = %app, device_id = %device.device_id, "enrollment session opened");
    let body = EnrollResponse {
        status: Status::ok("Success"),
        response: EnrolledDeviceResponse {
            device: EnrolledDevice::new(device, enc_counter),
            session_id: fresh.session_id.clone(),
        },
    };
    Ok(([(SESSION_HEADER, fresh.session_id.clone())], Json(body)).into_response())
}

#[utoipa::path(post, path = "/rp/wasapi/client/enroll/complete", tag = "enrollment", security(("access" = [])),
    request_body = CompleteRequest, responses((status = 200, description = "Enrollment stored (or stored already)", body = StatusResponse)))]
async fn complete(
    State(state): State<AppState>,
    access: Access,
    ApiJson(body): ApiJson<CompleteRequest>,
) -> Result<Json<StatusResponse>, Problem> {
    let Complete { session_id, completion, recovery_keys } = Complete::try_from(body)?;
    let app = &access.app_id;
    let store = state.backend.store.as_ref();
    let workstations = &Workstations::new(store);
    let source = format!("workstation:{}", access.token.token_id);
    let now = state.backend.clock.now_millis();
    // The user the workstation names, by name or alias, cross-checked against the session's;
    // the session is read beside it.
    let reread = || workstations.session(app, &session_id);
    let devices = Devices::new(store);
    let (user, read) = tokio::join!(devices.resolve_user(app, &completion.machine_user_name), reread());
    let user = user?.map(|u| u.named_user);
    let (completion, source, user) = (&completion, source.as_str(), user.as_deref());
    let (state, recovery_keys) = (&state, recovery_keys.as_deref());
    let message = retry_on_conflict_from(read, reread, |read| async move {
        let (session, version) = read?.ok_or(EnrollError::SessionNotFound)?;
        match session.complete(completion.clone(), user, source, now)? {
            Completed::Repeated => Ok::<_, EnrollError>("Enrollment already completed"),
            Completed::Closed(closing) => {
                let Closing { session, mut enrollment, event, message } = *closing;
                // Recovery keys are sealed for this machine and the session's device, and stored
                // with the enrollment in the same transaction.
                if let (Some(enrollment), Some(keys)) = (enrollment.as_mut(), recovery_keys) {
                    let context = recovery_context(app, &enrollment.machine_id, &enrollment.device_id);
                    enrollment.recovery_keys =
                        Some(seal(state.backend.keys.as_ref(), &context, keys.as_bytes()).await?);
                }
                workstations.close_session(&session, version, enrollment.as_ref(), &event).await?;
                Ok(message)
            }
        }
    })
    .await?;
    Ok(Json(StatusResponse { status: Status::ok(message) }))
}

/// A pairing as every `/rp/api/client/reg` response shows it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PairingView {
    pub machine_id: String,
    pub device_id: String,
    pub named_user: String,
    pub machine_name: Option<String>,
    #[serde(rename = "machineUserNameWS")]
    pub machine_user_name_ws: Option<String>,
    pub certificate_request_id: String,
    #[schema(format = DateTime)]
    pub created_at: String,
    #[schema(format = DateTime)]
    pub updated_at: String,
    pub rp_config: RpConfig,
    pub workstation: WorkstationOffline,
    pub offline_status: OfflineStatus,
}

/// `rpConfig.workstation.offlineAccess`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct RpConfig {
    pub workstation: RpWorkstation,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RpWorkstation {
    pub offline_access: OfflineAccess,
}

/// `workstation.offline`: the PINs, to the pairing's own workstation only; empty strings else.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct WorkstationOffline {
    #[schema(value_type = rp_domain::pairing::OfflineTokensView)]
    pub offline: OfflineTokens,
}

/// What may be known of the offline PINs without seeing them, and why they are hidden.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct OfflineStatus {
    pub tokens_visible: bool,
    /// `offlineDisabled`, `notOwner`, `locked`, `noTokens` or `expired`.
    pub hidden_reason: Option<&'static str>,
    pub tokens_remaining: u32,
    pub tokens_used: u32,
    pub low_token_warning: bool,
    pub valid_until: Option<EpochMillis>,
    pub delivered_to_device: bool,
    pub token_entry_timeout_secs: i64,
    pub locked_until: Option<EpochMillis>,
}

/// The view of `pairing` (of the app `app`) for the access token `viewer`: the PINs are opened
/// only for the pairing's own workstation. `open` is its set in the clear, if the caller has it.
async fn pairing_view(
    state: &AppState,
    pairing: Pairing,
    app: &AppRecord,
    viewer: Option<&str>,
    open: Option<OpenPins>,
) -> Result<PairingView, PairingError> {
    let settings = &app.workstation.offline_access;
    let now = state.backend.clock.now_millis();
    let hidden = pairing.hidden_because(viewer, settings, now);
    let offline = match (&pairing.offline_set, hidden) {
        (Some(set), None) => {
            // What the caller just sealed or re-sealed is in the clear already; the rest is opened.
            let (pins, tokens_auth) = match open {
                Some(open) => open,
                None => offline::open_pins(state, &pairing, set).await?,
            };
            OfflineTokens { tokens: render_pins(&pins), tokens_auth }
        }
        _ => OfflineTokens::default(),
    };
    let set = pairing.offline_set.as_ref();
    let status = OfflineStatus {
        tokens_visible: hidden.is_none(),
        hidden_reason: hidden,
        tokens_remaining: set.map_or(0, |s| s.remaining.len() as u32),
        tokens_used: set.map_or(0, |s| s.used()),
        low_token_warning: set.is_some_and(|s| s.low_token_warning(settings)),
        valid_until: set.map(|s| s.valid_until),
        delivered_to_device: set.is_some_and(|s| s.delivered_at.is_some()),
        token_entry_timeout_secs: settings.token_entry_timeout_secs,
        locked_until: pairing.lock.locked_until.filter(|until| now < *until),
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
        rp_config: RpConfig { workstation: RpWorkstation { offline_access: settings.clone() } },
        workstation: WorkstationOffline { offline },
        offline_status: status,
    })
}

/// Every answer that may carry PINs is kept out of caches.
type NoStore = [(header::HeaderName, &'static str); 1];
const NO_STORE: NoStore = [(header::CACHE_CONTROL, "no-store")];

#[utoipa::path(post, path = "/rp/api/client/reg", tag = "enrollment", security(("access" = [])), request_body = PairRequest,
    responses(
        (status = 201, description = "Paired; a login certificate is requested", body = PairingView),
        (status = 200, description = "The pairing existed already; returned as it is, nothing queued", body = PairingView),
    ))]
async fn pair(
    State(state): State<AppState>,
    access: Access,
    ApiJson(body): ApiJson<PairRequest>,
) -> Result<(StatusCode, NoStore, Json<PairingView>), Problem> {
    let request = NewPairing::try_from(body)?;
    let app = &access.app_id;
    let owner = access.token.token_id.as_str();
    let store = state.backend.store.as_ref();
    let workstations = Workstations::new(store);
    // The app and the pairing, read at once.
    let (settings, existing) = tokio::join!(
        rp_app::apps::load_app(&state, app.as_str()),
        workstations.pairing(app, &request.machine_id, &request.device_id),
    );
    let (settings, _) = settings?;
    // Seed rule 4: a pairing that exists is returned as it is, and nothing is queued again.
    if let Some((existing, _)) = existing? {
        return Ok((
            StatusCode::OK,
            NO_STORE,
            Json(pairing_view(&state, existing, &settings, Some(owner), None).await?),
        ));
    }
    let devices = Devices::new(store);
    let device = devices.device(app, &request.device_id).await?.ok_or(PairingError::UnknownDevice)?;
    // The machine must be enrolled for the device's user, and a name the pairing gives must be
    // one of that user's: a workstation cannot pair a device under someone else's name.
    let enrolled = workstations.enrollment(app, &request.machine_id).await?;
    let Some(enrolled) = enrolled.filter(|e| e.named_user == device.named_user) else {
        return Err(PairingError::NotEnrolled.into());
    };
    if let Some(name) = &request.machine_user_name_ws {
        let holder = devices.resolve_user(app, name).await?.map(|u| u.named_user);
        if holder.as_deref() != Some(device.named_user.as_str()) {
            let source = format!("workstation:{owner}");
            refuse_name_claim(&state, app, name, &device.named_user, holder.as_deref(), &source).await?;
            return Err(PairingError::NameOfAnotherUser(name.clone()).into());
        }
    }
    let (offline_set, open) = match &request.offline {
        Some(sent) => {
            let access_settings = &settings.workstation.offline_access;
            require_enabled(access_settings).map_err(PairingError::from)?;
            let (machine, device, now) =
                (&request.machine_id, &request.device_id, state.backend.clock.now_millis());
            Some(offline::new_set(&state, app, machine, device, sent, access_settings, now).await?)
        }
        None => None,
    }
    .unzip();
    let certs = Certificates::new(store);
    let cap = state.config.max_open_per_app;
    if certs.open_requests(app).await? >= i64::from(cap) {
        return Err(CertError::QueueFull { cap }.into());
    }
    let enc_counter = workstations.next_enc_counter(app, &device.device_id).await?;
    let device = PairedDevice {
        device_id: device.device_id,
        named_user: device.named_user,
        key_agreement_public_key: device.key_agreement_public_key,
    };
    let (mut pairing, mut cert_request) = Pairing::create(
        app.clone(),
        &request,
        &device,
        owner,
        enc_counter,
        settings.workstation.request_timeout_in_secs,
        state.backend.clock.now_millis(),
    );
    pairing.offline_set = offline_set;
    // The agent gets the workstation name of the user from whatever mapping the server knows.
    // The user's aliases are read only when neither the pairing nor the enrollment names one
    // (enrollments stored before the name was kept).
    let named =
        known_workstation_name(request.machine_user_name_ws.as_deref(), &enrolled.machine_user_name_ws, &[]);
    cert_request.machine_user_name_ws = match named {
        Some(name) => Some(name),
        None => {
            let aliases = devices.user(app, &device.named_user).await?.map(|u| u.aliases).unwrap_or_default();
            known_workstation_name(None, "", &aliases)
        }
    };
    let now = state.backend.clock.now_millis();
    match workstations.pair(&pairing, &cert_request, cap, now).await {
        Ok(()) => {
            tracing::info!(app_id = %app, machine_id = %pairing.machine_id, device_id = %pairing.device_id, request_id = %cert_request.request_id, offline = pairing.offline_set.is_some(), "paired; login certificate requested");
            Ok((
                StatusCode::CREATED,
                NO_STORE,
                Json(pairing_view(&state, pairing, &settings, Some(owner), open).await?),
            ))
        }
        // A concurrent POST created it first: answer with the winner's pairing. Without one,
        // the app's queue filled up in the meantime.
        Err(StoreError::Conflict) => {
            let Some((existing, _)) =
                workstations.pairing(app, &request.machine_id, &request.device_id).await?
            else {
                return Err(match certs.open_requests(app).await? >= i64::from(cap) {
                    true => CertError::QueueFull { cap }.into(),
                    false => StoreError::Conflict.into(),
                });
            };
            Ok((
                StatusCode::OK,
                NO_STORE,
                Json(pairing_view(&state, existing, &settings, Some(owner), None).await?),
            ))
        }
        Err(e) => Err(e.into()),
    }
}

#[utoipa::path(get, path = "/rp/api/client/reg", tag = "enrollment", security(("access" = [])), params(PairingQuery),
    responses((status = 200, description = "The pairing; PINs only to its own workstation", body = PairingView)))]
async fn read_pairing(
    State(state): State<AppState>,
    access: Access,
    ApiQuery(query): ApiQuery<PairingQuery>,
) -> Result<(NoStore, Json<PairingView>), Problem> {
    if let Some(named) = query.app_id.as_deref() {
        access.require_app(AppId::parse("appId", named)?.as_str())?;
    }
    let key = PairingKey::try_from(query)?;
    let workstations = Workstations::new(state.backend.store.as_ref());
    let (pairing, app) = tokio::join!(
        workstations.pairing(&access.app_id, &key.machine_id, &key.device_id),
        rp_app::apps::load_app(&state, access.app_id.as_str()),
    );
    let (pairing, _) = pairing?.ok_or(PairingError::NotFound)?;
    let (app, _) = app?;
    Ok((NO_STORE, Json(pairing_view(&state, pairing, &app, Some(&access.token.token_id), None).await?)))
}

#[utoipa::path(patch, path = "/rp/api/client/reg", tag = "enrollment", security(("access" = [])),
    request_body = PairingUpdateRequest, responses((status = 200, description = "Updated", body = PairingView)))]
async fn update_pairing(
    State(state): State<AppState>,
    access: Access,
    ApiJson(body): ApiJson<PairingUpdateRequest>,
) -> Result<(NoStore, Json<PairingView>), Problem> {
    let update = PairingUpdate::try_from(body)?;
    let app = &access.app_id;
    let owner = access.token.token_id.as_str();
    let (settings, read) =
        offline::app_and_pairing(&state, app, &update.machine_id, &update.device_id).await?;
    let offline_settings = &settings.workstation.offline_access;
    let now = state.backend.clock.now_millis();
    // The pairing as last read or written, with its version: each step below starts from it,
    // and a step that loses a race reads it again.
    let mut latest = read?;
    if update.touches_offline() {
        require_enabled(offline_settings).map_err(PairingError::from)?;
        let (pairing, _) = latest.as_ref().ok_or(PairingError::NotFound)?;
        pairing.require_owner(owner).map_err(PairingError::from)?;
        pairing.lock.check(now).map_err(PairingError::from)?;
    }
    let (new_set, mut open) = match &update.offline {
        Some(sent) => {
            let (machine, device) = (&update.machine_id, &update.device_id);
            Some(offline::new_set(&state, app, machine, device, sent, offline_settings, now).await?)
        }
        None => None,
    }
    .unzip();
    // The name, the new set and the used PINs go in one write: all of it lands or none of it.
    let edit = offline::PairingEdit {
        machine_name: update.machine_name.as_deref(),
        new_set: new_set.as_ref(),
        used: &update.used_token_ids,
    };
    if !edit.is_empty() {
        let key = PairingKey { machine_id: update.machine_id.clone(), device_id: update.device_id.clone() };
        let (pairing, version, left) =
            offline::edit_pairing(&state, app, &key, Ok(latest.take()), edit, offline_settings).await?;
        latest = Some((pairing, version));
        // What the used PINs left, if any were used; else the new set, if any.
        open = left.or(open);
    }
    // `latest` is the pairing as stored: read beside the app, or as the edit wrote it.
    let latest = latest.ok_or(PairingError::NotFound)?;
    let pairing = if update.failed_attempts > 0 {
        let source = format!("workstation:{owner}");
        offline::count_wrong_attempts(&state, latest, update.failed_attempts, offline_settings, &source)
            .await?
    } else {
        latest.0
    };
    tracing::info!(app_id = %app, machine_id = %pairing.machine_id, device_id = %pairing.device_id, offline = update.offline.is_some(), used = update.used_token_ids.len(), failed_attempts = update.failed_attempts, "pairing updated");
    Ok((NO_STORE, Json(pairing_view(&state, pairing, &settings, Some(owner), open).await?)))
}

/// Unpairs: by the pairing's own workstation, or by an admin (who names the app with `appId`).
#[utoipa::path(delete, path = "/rp/api/client/reg", tag = "enrollment", security(("access" = []), ("admin" = []), ("tenantAdmin" = [])),
    params(PairingQuery), responses((status = 204, description = "Unpaired")))]
async fn unpair(
    State(state): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    ApiQuery(query): ApiQuery<PairingQuery>,
) -> Result<StatusCode, Problem> {
    let named_app = named_app(&headers, query.app_id.as_deref())?.map(|named| named.app_id);
    let key = PairingKey::try_from(query)?;
    let (app, owner, source) = match caller {
        Caller::Access { app_id, token } => {
            if let Some(named) = &named_app {
                require_own_app(&app_id, named.as_str())?;
            }
            (app_id, Some(token.token_id.clone()), format!("workstation:{}", token.token_id))
        }
        Caller::Admin { token, app_id: scope } => {
            let app = match (scope, named_app) {
                (Some(scope), Some(named)) if scope != named => {
                    return Err(Problem::of(&super::errors::OTHER_TENANT)
                        .detail("the token is scoped to another app"))
                }
                (Some(scope), _) => scope,
                (None, Some(named)) => named,
                (None, None) => {
                    return Err(FieldError::new(
                        "appId",
                        "is required with a global admin token (or X-Tenant-Id)",
                    )
                    .into())
                }
            };
            (app, None, format!("admin:{}", token.token_id))
        }
    };
    let workstations = Workstations::new(state.backend.store.as_ref());
    let (pairing, version) =
        workstations.pairing(&app, &key.machine_id, &key.device_id).await?.ok_or(PairingError::NotFound)?;
    if let Some(owner) = &owner {
        pairing.require_owner(owner).map_err(PairingError::from)?;
    }
    offline::unpair(&state, pairing, version, &source).await?;
    Ok(StatusCode::NO_CONTENT)
}
