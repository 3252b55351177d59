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
use crate::params::Status;
use crate::wire::apps::OfflineAccess;
use crate::wire::certificates::CertificateState;
use crate::wire::enrollment::{CompleteRequest, EnrollRequest};
use crate::wire::pairing::{OfflineTokensView, PairRequest, PairingQuery, PairingUpdateRequest};
use axum::extract::State;
use axum::http::{header, request::Parts, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use rp_app::enrollment::{self, Opened};
use rp_app::pairing::{self, Paired, Shown};
use rp_app::AppState;
use rp_domain::apps::AppId;
use rp_domain::devices::{fingerprint, DeviceRecord};
use rp_domain::enrollment::{Complete, Enroll};
use rp_domain::pairing::{NewPairing, PairingKey, PairingUpdate};
use rp_domain::time::EpochMillis;
use rp_domain::FieldError;
use serde::Serialize;

routers! { crate::routing::plain;
    enroll_router("/rp/wsapi/client/enroll") = post(enroll);
    complete_router("/rp/wasapi/client/enroll/complete") = post(complete);
    client_reg_router("/rp/api/client/reg") = post(pair).get(read_pairing).patch(update_pairing).delete(unpair);
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
    // The user the body names, with their devices, is read beside the token; the token, then
    // the body, then its app are judged before what was read.
    let read = |request: &Enroll| enrollment::user_of(&state, request);
    let (access, request, user) = beside_input::<Access, _, _>(&mut parts, &state, request, read).await?;
    access.require_app(request.app_id.as_str())?;
    let Opened { device, enc_counter, session_id } = enrollment::open_session(&state, request, user).await?;
    let body = EnrollResponse {
        status: Status::ok("Success"),
        response: EnrolledDeviceResponse {
            device: EnrolledDevice::new(device, enc_counter),
            session_id: session_id.clone(),
        },
    };
    Ok(([(SESSION_HEADER, session_id)], Json(body)).into_response())
}

#[utoipa::path(post, path = "/rp/wasapi/client/enroll/complete", tag = "enrollment", security(("access" = [])),
    request_body = CompleteRequest, responses((status = 200, description = "Enrollment stored (or stored already)", body = StatusResponse)))]
async fn complete(
    State(state): State<AppState>,
    access: Access,
    ApiJson(body): ApiJson<CompleteRequest>,
) -> Result<Json<StatusResponse>, Problem> {
    let complete = Complete::try_from(body)?;
    let message = enrollment::complete(&state, &access.app_id, &access.token.token_id, complete).await?;
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
    /// Added beside the seed's fields, when the pairing's own workstation reads it: its login
    /// certificate (never key material).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub certificate: Option<PairingCertificate>,
}

/// The pairing's login certificate, as its workstation sees it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PairingCertificate {
    pub certificate_request_id: String,
    pub state: CertificateState,
    pub cert_serial_number: Option<String>,
    #[schema(format = DateTime)]
    pub expires_at: Option<String>,
    /// The issuing CA's certificate (base64 DER).
    pub issuer_certificate: Option<String>,
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
    pub offline: OfflineTokensView,
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
    #[schema(value_type = Option<i64>)]
    pub valid_until: Option<EpochMillis>,
    pub delivered_to_device: bool,
    pub token_entry_timeout_secs: i64,
    #[schema(value_type = Option<i64>)]
    pub locked_until: Option<EpochMillis>,
}

impl From<Shown> for PairingView {
    fn from(shown: Shown) -> Self {
        let Shown { pairing, settings, offline, hidden, now, certificate } = shown;
        let certificate = certificate.map(|c| PairingCertificate {
            certificate_request_id: pairing.certificate_request_id.clone(),
            state: c.state.into(),
            cert_serial_number: c.serial,
            expires_at: c.expires_at.map(|at| at.iso8601()),
            issuer_certificate: c.issuer_certificate,
        });
        let set = pairing.offline_set.as_ref();
        let offline_status = OfflineStatus {
            tokens_visible: hidden.is_none(),
            hidden_reason: hidden,
            tokens_remaining: set.map_or(0, |s| s.remaining.len() as u32),
            tokens_used: set.map_or(0, |s| s.used()),
            low_token_warning: set.is_some_and(|s| s.low_token_warning(&settings)),
            valid_until: set.map(|s| s.valid_until),
            delivered_to_device: set.is_some_and(|s| s.delivered_at.is_some()),
            token_entry_timeout_secs: settings.token_entry_timeout_secs,
            locked_until: pairing.lock.in_force(now),
        };
        Self {
            machine_id: pairing.machine_id,
            device_id: pairing.device_id,
            named_user: pairing.named_user,
            machine_name: pairing.machine_name,
            machine_user_name_ws: pairing.machine_user_name_ws,
            certificate_request_id: pairing.certificate_request_id,
            created_at: pairing.created_at.iso8601(),
            updated_at: pairing.updated_at.iso8601(),
            rp_config: RpConfig { workstation: RpWorkstation { offline_access: settings.into() } },
            workstation: WorkstationOffline { offline: offline.into() },
            offline_status,
            certificate,
        }
    }
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
    let (status, shown) = match pairing::pair(&state, &access.app_id, &access.token.token_id, request).await?
    {
        Paired::Created(shown) => (StatusCode::CREATED, shown),
        Paired::Existing(shown) => (StatusCode::OK, shown),
    };
    Ok((status, NO_STORE, Json(shown.into())))
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
    let shown = pairing::read(&state, &access.app_id, &access.token.token_id, &key).await?;
    Ok((NO_STORE, Json(shown.into())))
}

#[utoipa::path(patch, path = "/rp/api/client/reg", tag = "enrollment", security(("access" = [])),
    request_body = PairingUpdateRequest, responses((status = 200, description = "Updated", body = PairingView)))]
async fn update_pairing(
    State(state): State<AppState>,
    access: Access,
    ApiJson(body): ApiJson<PairingUpdateRequest>,
) -> Result<(NoStore, Json<PairingView>), Problem> {
    let update = PairingUpdate::try_from(body)?;
    let shown = pairing::update(&state, &access.app_id, &access.token.token_id, update).await?;
    Ok((NO_STORE, Json(shown.into())))
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
    let (app, owner, source) = unpairing_caller(caller, named_app)?;
    pairing::unpair(&state, &app, &key, owner.as_deref(), &source).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Who unpairs, in which app: the app, the owning token a workstation must be (`None` for an
/// admin) and the event's source. A workstation unpairs in its own app; an admin in the app its
/// token is scoped to or, with a global token, the one it names.
fn unpairing_caller(
    caller: Caller,
    named_app: Option<AppId>,
) -> Result<(AppId, Option<String>, String), Problem> {
    match caller {
        Caller::Access { app_id, token } => {
            if let Some(named) = &named_app {
                require_own_app(&app_id, named.as_str())?;
            }
            let source = format!("workstation:{}", token.token_id);
            Ok((app_id, Some(token.token_id), source))
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
            Ok((app, None, format!("admin:{}", token.token_id)))
        }
    }
}
