//! Out-of-band authentication (workstation-api.md; DECISIONS §6): a relying party's server starts
//! a request for a user and polls its status with its access token; the user's registered device
//! fetches the request and answers it with a signature by its registered key. The lifecycle is
//! [`rp_domain::oob`]; these handlers parse, call, persist and answer.

use super::extract::{beside_input, Access, ApiJson, ApiPath, ApiQuery, DeviceCaller};
use super::problem::Problem;
use crate::params::Status;
use crate::params::UserPath;
use crate::wire::oob::{Extras, OobAnswerRequest, OobStartRequest, OobState, StateEntry};
use axum::extract::State;
use axum::http::request::Parts;
use axum::routing::{get, post};
use axum::Json;
use rp_app::oob;
use rp_app::AppState;
use rp_app::HasClock;
use rp_domain::apps::AppId;
use rp_domain::devices::named_user;
use rp_domain::oob::{OobAnswer, OobRequest, OobStart, PROTOCOL_VERSION};
use rp_domain::time::EpochMillis;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

routers! { crate::routing::plain;
    start_router("/rp/api/oob/client/authentication/requests") = post(start);
    devices_router("/rp/api/oob/client/authentication/{app_id}/{named_user}/devices") = get(user_devices);
    status_router("/rp/api/oob/client/authentication/requests/{session_id}") = get(status);
    /// A GET that marks what it hands out, so HEAD is refused.
    device_requests_router("/rp/versioned/device/oob/requests") = get(device_requests);
    device_answer_router("/rp/versioned/device/oob/requests/{request_id}") = post(device_answer);
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
    // What the start needs to know is read at once, beside the token; the token, the body and
    // its app are judged first.
    let reads = |start: &OobStart| oob::start_reads(&state, start);
    let (access, start, reads) = beside_input::<Access, _, _>(&mut parts, &state, start, reads).await?;
    access.require_app(start.app_id.as_str())?;
    let request_id = oob::start(&state, start, reads).await?;
    Ok(Json(OobStarted { status: Status::ok("Success"), response: OobStartedRequest { request_id } }))
}

/// One of a user's devices, as HYPR-speaking clients (an identity server's connector, an MFA
/// strategy) read the list before they start a request.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UserDevice {
    pub device_id: String,
    /// The version of the answer protocol the device speaks.
    pub protocol_version: &'static str,
    pub model_number: String,
    /// The registration's stable, non-secret identifier: the device's id. A start whose
    /// `machineId` is it goes to this device.
    pub machine_id: String,
    /// The user's registered name (also when the path named an alias).
    pub named_user: String,
    pub friendly_name: String,
    #[schema(format = DateTime)]
    pub registered_at: String,
}

/// The user's devices, most recently registered first: a JSON array, empty for an unknown user,
/// a user without devices, or an app other than the token's (which learns nothing of this one).
#[utoipa::path(get, path = "/rp/api/oob/client/authentication/{appId}/{namedUser}/devices", tag = "oob", security(("access" = [])),
    params(crate::params::UserPath),
    responses((status = 200, description = "The user's devices that can answer (whose token is live), newest first; `[]` for an unknown user or another app", body = Vec<UserDevice>)))]
async fn user_devices(
    State(state): State<AppState>,
    mut parts: Parts,
    path: Result<ApiPath<UserPath>, Problem>,
) -> Result<Json<Vec<UserDevice>>, Problem> {
    let path = path.and_then(|ApiPath(UserPath { app_id, named_user: name })| {
        Ok((AppId::parse("appId", &app_id)?, named_user("namedUser", &name)?))
    });
    // The user and their devices are read beside the token.
    let read = |(app_id, name): &(AppId, String)| {
        let (app_id, name) = (app_id.clone(), name.clone());
        let state = &state;
        async move { oob::devices_of_user(state, &app_id, &name).await }
    };
    let (access, (app_id, _), read) = beside_input::<Access, _, _>(&mut parts, &state, path, read).await?;
    if access.app_id != app_id {
        return Ok(Json(Vec::new()));
    }
    let Some((named_user, devices)) = read? else {
        return Ok(Json(Vec::new()));
    };
    let devices = devices
        .into_iter()
        .map(|d| UserDevice {
            machine_id: d.device_id.clone(),
            device_id: d.device_id,
            protocol_version: PROTOCOL_VERSION,
            model_number: d.model_number,
            named_user: named_user.clone(),
            friendly_name: d.friendly_name,
            registered_at: d.registered_at.iso8601(),
        })
        .collect();
    Ok(Json(devices))
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
            state: r.state.into_iter().map(StateEntry::from).collect(),
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
    let read = |session_id: &String| oob::request(&state, session_id);
    let path = path.map(|ApiPath(session_id)| session_id);
    let (access, _, read) = beside_input::<Access, _, _>(&mut parts, &state, path, read).await?;
    Ok(Json(OobStatus::from(rp_app::oob::status(&state, &access.app_id, read)?)))
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
    #[schema(value_type = i64)]
    pub created_at: EpochMillis,
    #[schema(value_type = i64)]
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
            state: r.current().into(),
            request_id: r.request_id,
            named_user: r.named_user,
            machine: r.machine,
            machine_id: r.machine_id,
            transaction_text: r.transaction_text,
            transaction_type: r.transaction_type,
            extras: r.extras.map(Extras::from),
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

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct DeviceOobRequests {
    pub requests: Vec<DeviceOobRequest>,
}

/// `?waitSecs=` of the device's fetch.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[into_params(parameter_in = Query)]
struct WaitQuery {
    /// When nothing is pending, wait up to this many seconds for a request to arrive (a
    /// long-poll, for a phone without push): at most 25 on the local server, 5 on Lambda.
    #[param(value_type = Option<u32>, minimum = 0, maximum = 25)]
    wait_secs: Option<String>,
}

/// The device's pending requests; the first fetch of each adds INITIATED.
#[utoipa::path(get, path = "/rp/versioned/device/oob/requests", tag = "oob", security(("device" = [])), params(WaitQuery),
    responses((status = 200, description = "The device's open requests; each is marked fetched (so HEAD is refused)", body = DeviceOobRequests)))]
async fn device_requests(
    State(state): State<AppState>,
    device: DeviceCaller,
    query: Result<ApiQuery<WaitQuery>, Problem>,
) -> Result<Json<DeviceOobRequests>, Problem> {
    let ApiQuery(query) = query?;
    let most = state.config.max_wait_secs;
    let wait = match query.wait_secs.as_deref() {
        None => 0,
        Some(text) => text
            .parse::<u64>()
            .ok()
            .filter(|secs| *secs <= most && !text.starts_with('+') && (text == "0" || !text.starts_with('0')))
            .ok_or_else(|| {
                Problem::invalid("waitSecs", format!("must be a whole number of seconds from 0 to {most}"))
            })?,
    };
    let wait = std::time::Duration::from_secs(wait);
    let pending = oob::pending_for_device_within(&state, &device.app_id, &device.device_id, wait).await?;
    let now = state.clock().now_millis();
    let requests = pending
        .into_iter()
        .map(|(request, recovery_keys)| DeviceOobRequest {
            recovery_keys,
            ..DeviceOobRequest::new(request, now)
        })
        .collect();
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
    responses((status = 200, description = "The answer is stored, or is the one that settled the request, sent again (nothing changes)", body = DeviceOobAnswered)))]
async fn device_answer(
    State(state): State<AppState>,
    mut parts: Parts,
    path: Result<ApiPath<String>, Problem>,
    body: Result<ApiJson<OobAnswerRequest>, Problem>,
) -> Result<Json<DeviceOobAnswered>, Problem> {
    // The request is read beside the device's token; the token is judged first, then the path
    // and the body.
    let read = |request_id: &String| oob::request(&state, request_id);
    let path = path.map(|ApiPath(request_id)| request_id);
    let (device, request_id, first) =
        beside_input::<DeviceCaller, _, _>(&mut parts, &state, path, read).await?;
    let answer = OobAnswer::try_from(body?.0)?;
    let answered =
        oob::answer(&state, &device.app_id, &device.device_id, &request_id, &answer, first).await?;
    Ok(Json(DeviceOobAnswered { state: answered.current().into(), request_id: answered.request_id }))
}
