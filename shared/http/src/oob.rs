//! Out-of-band authentication (workstation-api.md; DECISIONS §6): a relying party's server starts
//! a request for a user and polls its status with its access token; the user's registered device
//! fetches the request and answers it with a signature by its registered key. The lifecycle is
//! [`rp_domain::oob`]; these handlers parse, call, persist and answer.

use super::extract::{beside_input, Access, ApiJson, ApiPath, DeviceCaller};
use super::problem::Problem;
use super::AppState;
use crate::params::Status;
use crate::ratelimit::over_limit;
use axum::extract::State;
use axum::http::request::Parts;
use axum::routing::{get, post};
use axum::{Json, Router};
use rp_domain::apps::AppId;
use rp_domain::code::{HookDecision, Trigger};
use rp_domain::oob::{
    Extras, OobAnswer, OobAnswerRequest, OobDevice, OobError, OobErrorKind, OobRequest, OobStart,
    OobStartRequest, OobState, StateEntry,
};
use rp_domain::time::EpochMillis;
use rp_ports::{retry_on_conflict, StoreError};
use rp_repo::devices::Devices;
use rp_repo::oob::OobRequests;
use rp_repo::ratelimit;
use rp_repo::workstations::Workstations;
use serde::Serialize;
use std::collections::BTreeMap;

/// `/rp/api/oob/client/authentication/requests`
pub fn start_router(_state: &AppState) -> Router<AppState> {
    Router::new().route("/rp/api/oob/client/authentication/requests", post(start))
}

/// `/rp/api/oob/client/authentication/requests/{sessionId}`
pub fn status_router(_state: &AppState) -> Router<AppState> {
    Router::new().route("/rp/api/oob/client/authentication/requests/{session_id}", get(status))
}

/// `/rp/versioned/device/oob/requests`: a GET that marks what it hands out, so HEAD is refused.
pub fn device_requests_router(_state: &AppState) -> Router<AppState> {
    Router::new().route("/rp/versioned/device/oob/requests", get(device_requests).head(super::head_refused))
}

/// `/rp/versioned/device/oob/requests/{requestId}`
pub fn device_answer_router(_state: &AppState) -> Router<AppState> {
    Router::new().route("/rp/versioned/device/oob/requests/{request_id}", post(device_answer))
}

/// The start answer: the seed's `status` and `response.requestId`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct OobStarted {
    pub status: Status,
    pub response: OobStartedRequest,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct OobStartedRequest {
    pub request_id: String,
}

#[utoipa::path(post, path = "/rp/api/oob/client/authentication/requests", tag = "oob", security(("access" = [])),
    request_body = OobStartRequest, responses((status = 200, description = "Started; poll `response.requestId`", body = OobStarted)))]
async fn start(
    State(state): State<AppState>,
    mut parts: Parts,
    body: Result<ApiJson<OobStartRequest>, Problem>,
) -> Result<Json<OobStarted>, Problem> {
    let start = body.and_then(|ApiJson(body)| Ok(OobStart::try_from(body)?));
    let store = state.backend.store.as_ref();
    let devices = Devices::new(store);
    let requests = OobRequests::new(store);
    // What the start needs to know is read at once, beside the token: the app, the user,
    // whether the nonce is spent, and the customizations that decide. Then the user's devices
    // go beside the count. The checks keep their order: the token, the body and its app first;
    // a start over the limit is refused before anything is judged of its user, and nothing is
    // written before the count allows it.
    let state_ref = &state;
    let reads = |start: &OobStart| {
        let (app_id, named_user) = (start.app_id.clone(), start.named_user.clone());
        let nonce = start.nonces.session_nonce.clone();
        async move {
            tokio::join!(
                rp_app::apps::load_app(state_ref, app_id.as_str()),
                devices.resolve_user(&app_id, &named_user),
                requests.nonce_spent(&app_id, &nonce),
                rp_app::code::hooks(state_ref, &app_id, Trigger::OobStart),
            )
        }
    };
    let (access, mut start, (app, user, spent, hooks)) =
        beside_input::<Access, _, _>(&mut parts, &state, start, reads).await?;
    access.require_app(start.app_id.as_str())?;
    let (app, _) = app?;
    let now_secs = state.backend.clock.epoch_secs();
    let found = match &user {
        Ok(Some(user)) => Some(user.named_user.as_str()),
        _ => None,
    };
    let (decision, listed) =
        tokio::join!(ratelimit::hit(store, &app.app_id, "oob-start", &app.rate_limit, now_secs), async {
            match found {
                Some(named_user) => devices.devices_of(&start.app_id, named_user).await,
                None => Ok(Vec::new()),
            }
        },);
    let decision = decision?;
    if !decision.allowed {
        return Err(over_limit(&app.rate_limit, &decision, now_secs));
    }
    let user = user?.ok_or(OobError::UnknownUser)?;
    // A replay is refused before the customizations run, so it costs reads, not a sandbox run.
    if spent? {
        return Err(OobError::NonceReused.into());
    }
    let device = listed?.pop().ok_or(OobError::NoDevice)?;
    let device = OobDevice {
        device_id: device.device_id,
        friendly_name: device.friendly_name,
        model_number: device.model_number,
        signing_public_key: device.signing_public_key,
    };
    // The tenant's enabled `oob.start` customizations decide before anything is stored.
    let event = serde_json::json!({
        "trigger": Trigger::OobStart.name(),
        "appId": app.app_id,
        "namedUser": user.named_user,
        "requestedName": start.named_user,
        "deviceId": device.device_id,
        "machine": start.machine,
        "machineId": start.machine_id,
        "transactionText": start.transaction_text,
        "transactionType": start.transaction_type,
        "extras": start.extras,
        "additionalDetails": start.additional_details,
    });
    match rp_app::code::run_hook(&state, &app.app_id, Trigger::OobStart, hooks?, event).await? {
        HookDecision::Allow { transaction_text } => {
            if transaction_text.is_some() {
                start.transaction_text = transaction_text;
            }
        }
        HookDecision::Deny { reason, .. } => {
            rp_ports::metrics::count(
                rp_ports::metrics::Metric::OobOutcome,
                1,
                Some(("Outcome", "DENIED_BY_CUSTOMIZATION")),
            );
            return Err(OobError::Denied(reason).into());
        }
        HookDecision::Failed { id, .. } => {
            rp_ports::metrics::count(
                rp_ports::metrics::Metric::OobOutcome,
                1,
                Some(("Outcome", "CUSTOMIZATION_FAILED")),
            );
            return Err(OobError::HookFailed { id }.into());
        }
    }
    let ttl = app.workstation.oob_request_timeout_in_secs;
    let request = OobRequest::start(start, device, ttl, state.backend.clock.now_millis());
    match requests.create(&request).await {
        Ok(()) => {}
        Err(StoreError::Conflict) => return Err(OobError::NonceReused.into()),
        Err(e) => return Err(e.into()),
    }
    tracing::info!(app_id = %request.app_id, request_id = %request.request_id, device_id = %request.device.device_id, "OOB authentication requested");
    Ok(Json(OobStarted {
        status: Status::ok("Success"),
        response: OobStartedRequest { request_id: request.request_id },
    }))
}

/// The status response (workstation-api.md, "OOB authentication status response").
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct OobStatus {
    pub request_id: String,
    pub named_user: String,
    /// Empty when the start named no machine.
    pub machine: String,
    pub device: OobStatusDevice,
    pub state: Vec<StateEntry>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct OobStatusDevice {
    pub device_id: String,
    pub friendly_name: String,
    pub model_number: String,
}

impl From<OobRequest> for OobStatus {
    fn from(r: OobRequest) -> Self {
        Self {
            request_id: r.request_id,
            named_user: r.named_user,
            machine: r.machine.unwrap_or_default(),
            device: OobStatusDevice {
                device_id: r.device.device_id,
                friendly_name: r.device.friendly_name,
                model_number: r.device.model_number,
            },
            state: r.state,
        }
    }
}

/// One consistent read: polled every 3–5 s.
#[utoipa::path(get, path = "/rp/api/oob/client/authentication/requests/{sessionId}", tag = "oob", security(("access" = [])),
    params(("sessionId" = String, Path, description = "The `requestId` the start answered", max_length = 64)),
    responses((status = 200, description = "The request's state", body = OobStatus)))]
async fn status(
    State(state): State<AppState>,
    mut parts: Parts,
    path: Result<ApiPath<String>, Problem>,
) -> Result<Json<OobStatus>, Problem> {
    // The request is read beside the token.
    let requests = OobRequests::new(state.backend.store.as_ref());
    let read = |session_id: &String| {
        let session_id = session_id.clone();
        async move { requests.get(&session_id).await }
    };
    let path = path.map(|ApiPath(session_id)| session_id);
    let (access, _, read) = beside_input::<Access, _, _>(&mut parts, &state, path, read).await?;
    let (request, _) = read?.ok_or(OobError::NotFound)?;
    let request = request.visible_to(&access.app_id, state.backend.clock.now_millis())?;
    Ok(Json(OobStatus::from(request)))
}

/// A pending request as the phone shows it, with what it needs to sign its answer.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeviceOobRequest {
    pub request_id: String,
    pub named_user: String,
    pub machine: Option<String>,
    pub machine_id: Option<String>,
    pub transaction_text: Option<String>,
    pub transaction_type: Option<String>,
    pub extras: Option<Extras>,
    pub additional_details: BTreeMap<String, String>,
    pub session_nonce: String,
    pub device_nonce: String,
    pub service_nonce: String,
    pub service_hmac: String,
    pub created_at: EpochMillis,
    pub expires_at: EpochMillis,
    /// Seconds left to answer.
    pub expires_in_secs: u64,
    pub state: OobState,
    /// Added beside the seed's fields (seed pairing rule 6): the recovery keys the named machine
    /// deposited for this device at enrollment, as deposited; absent when there are none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recovery_keys: Option<String>,
}

impl DeviceOobRequest {
    fn new(r: OobRequest, now: EpochMillis) -> Self {
        Self {
            expires_in_secs: now.until(r.expires_at).as_secs(),
            state: r.current(),
            request_id: r.request_id,
            named_user: r.named_user,
            machine: r.machine,
            machine_id: r.machine_id,
            transaction_text: r.transaction_text,
            transaction_type: r.transaction_type,
            extras: r.extras,
            additional_details: r.additional_details,
            session_nonce: r.nonces.session_nonce,
            device_nonce: r.nonces.device_nonce,
            service_nonce: r.nonces.service_nonce,
            service_hmac: r.nonces.service_hmac,
            created_at: r.created_at,
            expires_at: r.expires_at,
            recovery_keys: None,
        }
    }
}

/// The recovery keys machine `machine_id` deposited for `device_id` at enrollment, opened.
async fn recovery_keys(
    state: &AppState,
    app: &AppId,
    machine_id: &str,
    device_id: &str,
) -> Result<Option<String>, OobError> {
    let Some(enrollment) =
        Workstations::new(state.backend.store.as_ref()).enrollment(app, machine_id).await?
    else {
        return Ok(None);
    };
    let Some(sealed) = enrollment.recovery_keys.filter(|_| enrollment.device_id == device_id) else {
        return Ok(None);
    };
    let context = rp_app::enrollment::recovery_context(app, machine_id, device_id);
    let plain = rp_ports::keys::open(state.backend.keys.as_ref(), &context, &sealed).await?;
    Ok(Some(String::from_utf8_lossy(&plain).into_owned()))
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct DeviceOobRequests {
    pub requests: Vec<DeviceOobRequest>,
}

/// The device's pending requests; the first fetch of each adds INITIATED.
#[utoipa::path(get, path = "/rp/versioned/device/oob/requests", tag = "oob", security(("device" = [])),
    responses((status = 200, description = "The device's open requests; each is marked fetched (so HEAD is refused)", body = DeviceOobRequests)))]
async fn device_requests(
    State(state): State<AppState>,
    device: DeviceCaller,
) -> Result<Json<DeviceOobRequests>, Problem> {
    let repo = OobRequests::new(state.backend.store.as_ref());
    let now = state.backend.clock.now_millis();
    let mut requests = Vec::new();
    for (request, version) in repo.pending_for_device(&device.app_id, &device.device_id).await? {
        if !request.is_live(now) {
            continue;
        }
        let shown = match request.fetched(now) {
            // A concurrent fetch or answer changed it first: show it as it was read.
            Some(next) => match repo.replace(&next, version).await {
                Ok(()) => next,
                Err(StoreError::Conflict) => request,
                Err(e) => return Err(e.into()),
            },
            None => request,
        };
        let mut view = DeviceOobRequest::new(shown, now);
        if let Some(machine_id) = view.machine_id.clone() {
            view.recovery_keys =
                recovery_keys(&state, &device.app_id, &machine_id, &device.device_id).await?;
        }
        requests.push(view);
    }
    Ok(Json(DeviceOobRequests { requests }))
}

/// The answer's outcome, for the device.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeviceOobAnswered {
    pub request_id: String,
    pub state: OobState,
}

#[utoipa::path(post, path = "/rp/versioned/device/oob/requests/{requestId}", tag = "oob", security(("device" = [])),
    params(("requestId" = String, Path, description = "The pending request's `requestId`", max_length = 64)), request_body = OobAnswerRequest,
    responses((status = 200, description = "The answer is stored", body = DeviceOobAnswered)))]
async fn device_answer(
    State(state): State<AppState>,
    device: DeviceCaller,
    ApiPath(request_id): ApiPath<String>,
    ApiJson(body): ApiJson<OobAnswerRequest>,
) -> Result<Json<DeviceOobAnswered>, Problem> {
    let answer = OobAnswer::try_from(body)?;
    let repo = OobRequests::new(state.backend.store.as_ref());
    let now = state.backend.clock.now_millis();
    let (request_id, answer, device_id) = (&request_id, &answer, device.device_id.as_str());
    let answered = retry_on_conflict(|| async move {
        let (request, version) = repo.get(request_id).await?.ok_or(OobError::NotFound)?;
        let answered = request.answer(device_id, answer, now)?;
        repo.finish(&answered.request, version, &answered.event).await?;
        Ok::<_, OobError>(answered)
    })
    .await?;
    let state = answered.request.current();
    if state.is_final() {
        let outcome = serde_json::to_value(state).ok().and_then(|v| v.as_str().map(str::to_owned));
        rp_ports::metrics::count(
            rp_ports::metrics::Metric::OobOutcome,
            1,
            Some(("Outcome", outcome.as_deref().unwrap_or("?"))),
        );
    }
    tracing::info!(request_id = %request_id, state = ?state, "OOB authentication answered");
    match answered.failure {
        Some(OobErrorKind::BadSignature) => Err(OobError::BadSignature.into()),
        Some(OobErrorKind::WrongAmount) => Err(OobError::WrongAmount.into()),
        None => Ok(Json(DeviceOobAnswered {
            request_id: answered.request.request_id.clone(),
            state: answered.request.current(),
        })),
    }
}
