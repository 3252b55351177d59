//! Offline PIN access (workstation-api.md, "Offline authentication flow"; DECISIONS §3, §5): the
//! device's single fetch of its pairings' PINs (`/rp/versioned/device/setup`), its list of
//! workstations, used-PIN reports from either side, wrong-attempt locks, and unpairing (which
//! queues a revocation of what the pairing was issued) and an admin's removal of a device. The
//! rules are [`rp_domain::offline`] and [`rp_domain::pairing`].

use super::extract::{AdminOfApp, ApiJson, ApiPath, DeviceCaller};
use super::problem::Problem;
use crate::wire::apps::OfflineAccess;
use axum::extract::State;
use axum::http::{header, request::Parts, StatusCode};
use axum::routing::{delete, get, post};
use axum::Json;
use rp_app::offline::{self, app_and_pairing, edit_pairing, Delivered, PairingEdit};
use rp_app::AppState;
use rp_app::HasClock;
use rp_domain::devices;
use rp_domain::offline::{render_pins, require_enabled};
use rp_domain::pairing::{pin_ids, PairingError, PairingKey};
use rp_domain::time::EpochMillis;
use serde::{Deserialize, Serialize};

routers! { crate::routing::plain;
    setup_router("/rp/versioned/device/setup") = post(device_setup);
    workstations_router("/rp/versioned/device/workstations") = get(device_workstations);
    used_router("/rp/versioned/device/offline/used") = post(device_used);
    admin_device_router("/cc/api/apps/{app_id}/devices/{device_id}") = delete(revoke_device);
}

/// The body of `POST /rp/versioned/device/setup`: which of the device's pairings.
#[derive(Debug, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeviceSetupRequest {
    #[schema(pattern = "^[A-Za-z0-9._:-]{1,128}$")]
    pub machine_id: String,
}

/// A pairing's PINs for its device, handed out once.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeviceSetup {
    pub machine_id: String,
    pub machine_name: Option<String>,
    pub tokens: String,
    pub tokens_auth: String,
    pub offline_access: OfflineAccess,
    #[schema(value_type = i64)]
    pub valid_until: EpochMillis,
    pub tokens_remaining: u32,
}

/// The device fetches a pairing's offline PINs: once per set.
#[utoipa::path(post, path = "/rp/versioned/device/setup", tag = "offline", security(("device" = [])), request_body = DeviceSetupRequest,
    responses((status = 200, description = "The pairing's offline PINs, handed out once", body = DeviceSetup)))]
async fn device_setup(
    State(state): State<AppState>,
    device: DeviceCaller,
    ApiJson(body): ApiJson<DeviceSetupRequest>,
) -> Result<([(header::HeaderName, &'static str); 1], Json<DeviceSetup>), Problem> {
    let machine_id = devices::identifier("machineId", &body.machine_id)?;
    let Delivered { pairing, set, pins: (pins, tokens_auth), settings } =
        offline::deliver(&state, &device.app_id, &machine_id, &device.device_id).await?;
    let setup = DeviceSetup {
        machine_id: pairing.machine_id,
        machine_name: pairing.machine_name,
        tokens: render_pins(&pins),
        tokens_auth,
        offline_access: settings.into(),
        valid_until: set.valid_until,
        tokens_remaining: set.remaining.len() as u32,
    };
    Ok(([(header::CACHE_CONTROL, "no-store")], Json(setup)))
}

/// One of the device's workstations.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeviceWorkstation {
    pub machine_id: String,
    pub machine_name: Option<String>,
    #[schema(value_type = i64)]
    pub paired_at: EpochMillis,
    /// The device holds this pairing's PINs.
    pub active: bool,
    pub tokens_remaining: u32,
    pub low_token_warning: bool,
    #[schema(value_type = Option<i64>)]
    pub valid_until: Option<EpochMillis>,
    #[schema(value_type = Option<i64>)]
    pub locked_until: Option<EpochMillis>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct DeviceWorkstations {
    pub workstations: Vec<DeviceWorkstation>,
}

#[utoipa::path(get, path = "/rp/versioned/device/workstations", tag = "offline", security(("device" = [])),
    responses((status = 200, description = "The device's paired workstations", body = DeviceWorkstations)))]
async fn device_workstations(
    State(state): State<AppState>,
    device: DeviceCaller,
) -> Result<Json<DeviceWorkstations>, Problem> {
    let (app, pairings) =
        rp_app::offline::app_and_pairings_of_device(&state, &device.app_id, &device.device_id).await?;
    let settings = &app.workstation.offline_access;
    let now = state.clock().now_millis();
    let workstations = pairings
        .into_iter()
        .map(|(p, _)| {
            let set = p.offline_set.as_ref();
            DeviceWorkstation {
                machine_id: p.machine_id.clone(),
                machine_name: p.machine_name.clone(),
                paired_at: p.created_at,
                active: set.is_some_and(|s| s.is_active(now)),
                tokens_remaining: set.map_or(0, |s| s.remaining.len() as u32),
                low_token_warning: set.is_some_and(|s| s.low_token_warning(settings)),
                valid_until: set.map(|s| s.valid_until),
                locked_until: p.lock.in_force(now),
            }
        })
        .collect();
    Ok(Json(DeviceWorkstations { workstations }))
}

/// The body of `POST /rp/versioned/device/offline/used`.
#[derive(Debug, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeviceUsedRequest {
    #[schema(pattern = "^[A-Za-z0-9._:-]{1,128}$")]
    pub machine_id: String,
    #[schema(schema_with = crate::wire::pairing::pin_ids_schema)]
    pub token_ids: Vec<String>,
}

/// What is left after a used-PIN report.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PinsLeft {
    pub machine_id: String,
    pub tokens_remaining: u32,
    pub low_token_warning: bool,
}

#[utoipa::path(post, path = "/rp/versioned/device/offline/used", tag = "offline", security(("device" = [])), request_body = DeviceUsedRequest,
    responses((status = 200, description = "The PINs are used up; what is left", body = PinsLeft)))]
async fn device_used(
    State(state): State<AppState>,
    device: DeviceCaller,
    ApiJson(body): ApiJson<DeviceUsedRequest>,
) -> Result<Json<PinsLeft>, Problem> {
    let machine_id = devices::identifier("machineId", &body.machine_id)?;
    pin_ids("tokenIds", &body.token_ids)?;
    let key = PairingKey { machine_id, device_id: device.device_id.clone() };
    let (app, read) = app_and_pairing(&state, &device.app_id, &key.machine_id, &key.device_id).await?;
    let settings = &app.workstation.offline_access;
    require_enabled(settings).map_err(PairingError::from)?;
    let used = PairingEdit { used: &body.token_ids, ..PairingEdit::default() };
    let (pairing, ..) = edit_pairing(&state, &device.app_id, &key, read, used, settings).await?;
    let set = pairing.offline_set.as_ref();
    Ok(Json(PinsLeft {
        machine_id: pairing.machine_id.clone(),
        tokens_remaining: set.map_or(0, |s| s.remaining.len() as u32),
        low_token_warning: set.is_some_and(|s| s.low_token_warning(settings)),
    }))
}

/// An admin removes a device: every pairing of it goes (with its certificate's revocation), the
/// device's other certificates are revoked, and its token ends.
#[utoipa::path(delete, path = "/cc/api/apps/{appId}/devices/{deviceId}", tag = "offline", security(("admin" = [])),
    params(crate::params::AppIdPath, ("deviceId" = String, Path, pattern = "^[A-Za-z0-9._:-]{1,128}$")),
    responses((status = 204, description = "Removed: its pairings, certificates (revocations queued) and token")))]
async fn revoke_device(
    State(state): State<AppState>,
    mut parts: Parts,
    path: Result<ApiPath<(String, String)>, Problem>,
) -> Result<StatusCode, Problem> {
    let device_id = path.and_then(|ApiPath((_, id))| Ok(devices::identifier("deviceId", &id)?));
    // The device, its pairings and its certificates are read at once, beside the token and the
    // app; the device is judged first.
    let reads = |app, device_id: &String| rp_app::devices::removal_reads(&state, app, device_id);
    let (admin, read) = AdminOfApp::beside(&mut parts, &state, &device_id, reads).await?;
    let (app, _) = admin.app?;
    let device_id = device_id?;
    let read = match read {
        Some(read) => read,
        None => reads(app.app_id.clone(), &device_id).await,
    };
    let source = format!("admin:{}", admin.token.token_id);
    rp_app::devices::remove(&state, &app, &source, &device_id, read).await?;
    Ok(StatusCode::NO_CONTENT)
}
