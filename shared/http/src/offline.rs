//! Offline PIN access (workstation-api.md, "Offline authentication flow"; DECISIONS §3, §5): the
//! device's single fetch of its pairings' PINs (`/rp/versioned/device/setup`), its list of
//! workstations, used-PIN reports from either side, wrong-attempt locks, and unpairing (which
//! queues a revocation of what the pairing was issued) and an admin's removal of a device. The
//! rules are [`rp_domain::offline`] and [`rp_domain::pairing`].

use super::extract::{AdminOfApp, ApiJson, ApiPath, DeviceCaller};
use super::problem::Problem;
use super::AppState;
use axum::extract::State;
use axum::http::{header, request::Parts, StatusCode};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use rp_app::certificates::{revocation_of, Revocation};
use rp_app::offline::{app_and_pairing, edit_pairing, open_pins, unpair, PairingEdit};
use rp_domain::apps::{AppId, OfflineAccess};
use rp_domain::devices;
use rp_domain::offline::{render_pins, require_enabled, OfflineError, OfflineSet};
use rp_domain::pairing::{pin_ids, PairingError, PairingKey, DEVICE_REVOKED_EVENT};
use rp_domain::time::EpochMillis;
use rp_ports::{retry_on_conflict, retry_on_conflict_from, StoreError};
use rp_repo::certificates::Certificates;
use rp_repo::devices::Devices;
use rp_repo::workstations::Workstations;
use serde::{Deserialize, Serialize};

/// `/rp/versioned/device/setup`
pub fn setup_router(_state: &AppState) -> Router<AppState> {
    Router::new().route("/rp/versioned/device/setup", post(device_setup))
}

/// `/rp/versioned/device/workstations`
pub fn workstations_router(_state: &AppState) -> Router<AppState> {
    Router::new().route("/rp/versioned/device/workstations", get(device_workstations))
}

/// `/rp/versioned/device/offline/used`
pub fn used_router(_state: &AppState) -> Router<AppState> {
    Router::new().route("/rp/versioned/device/offline/used", post(device_used))
}

/// `/cc/api/apps/{appId}/devices/{deviceId}`
pub fn admin_device_router(_state: &AppState) -> Router<AppState> {
    Router::new().route("/cc/api/apps/{app_id}/devices/{device_id}", delete(revoke_device))
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
    let workstations = &Workstations::new(state.backend.store.as_ref());
    let (state_ref, machine_id, device_id, app_id) =
        (&state, &machine_id, device.device_id.as_str(), &device.app_id);
    let (app, read) = app_and_pairing(&state, app_id, machine_id, device_id).await?;
    let reread = || workstations.pairing(app_id, machine_id, device_id);
    let settings = &app.workstation.offline_access;
    require_enabled(settings).map_err(PairingError::from)?;
    let now = state.backend.clock.now_millis();
    let setup = retry_on_conflict_from(read, reread, |read| async move {
        let (pairing, version) = read?.ok_or(PairingError::NotFound)?;
        pairing.lock.check(now)?;
        let set = pairing.offline_set.clone().ok_or(OfflineError::NoSet)?;
        if set.delivered_at.is_some() || !set.is_valid(now) {
            return Err(OfflineError::Delivered.into());
        }
        let (pins, tokens_auth) = open_pins(state_ref, &pairing, &set).await?;
        let mut next = pairing.clone();
        next.offline_set = Some(OfflineSet { delivered_at: Some(now), ..set.clone() });
        workstations.replace_pairing(&next, version).await?;
        Ok::<_, PairingError>(DeviceSetup {
            machine_id: pairing.machine_id.clone(),
            machine_name: pairing.machine_name.clone(),
            tokens: render_pins(&pins),
            tokens_auth,
            offline_access: settings.clone(),
            valid_until: set.valid_until,
            tokens_remaining: set.remaining.len() as u32,
        })
    })
    .await?;
    tracing::info!(app_id = %device.app_id, device_id = %device.device_id, machine_id = %setup.machine_id, "offline PINs delivered to the device");
    Ok(([(header::CACHE_CONTROL, "no-store")], Json(setup)))
}

/// One of the device's workstations.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeviceWorkstation {
    pub machine_id: String,
    pub machine_name: Option<String>,
    pub paired_at: EpochMillis,
    /// The device holds this pairing's PINs.
    pub active: bool,
    pub tokens_remaining: u32,
    pub low_token_warning: bool,
    pub valid_until: Option<EpochMillis>,
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
    let workstations = Workstations::new(state.backend.store.as_ref());
    let (app, pairings) = tokio::join!(
        rp_app::apps::load_app(&state, device.app_id.as_str()),
        workstations.pairings_of_device(&device.app_id, &device.device_id),
    );
    let (app, _) = app?;
    let pairings = pairings?;
    let settings = &app.workstation.offline_access;
    let now = state.backend.clock.now_millis();
    let workstations = pairings
        .into_iter()
        .map(|(p, _)| {
            let set = p.offline_set.as_ref();
            DeviceWorkstation {
                machine_id: p.machine_id.clone(),
                machine_name: p.machine_name.clone(),
                paired_at: p.created_at,
                active: set.is_some_and(|s| s.delivered_at.is_some() && s.is_valid(now)),
                tokens_remaining: set.map_or(0, |s| s.remaining.len() as u32),
                low_token_warning: set.is_some_and(|s| s.low_token_warning(settings)),
                valid_until: set.map(|s| s.valid_until),
                locked_until: p.lock.locked_until.filter(|until| now < *until),
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
    #[schema(schema_with = rp_domain::pairing::pin_ids_schema)]
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
    let store = state.backend.store.as_ref();
    let (devices, workstations, certs) =
        (Devices::new(store), &Workstations::new(store), &Certificates::new(store));
    // The device, its pairings and its certificates are read at once, beside the token and the
    // app; the device is judged first.
    let reads = |app: AppId, device_id: &String| {
        let device_id = device_id.clone();
        async move {
            tokio::join!(
                devices.device(&app, &device_id),
                workstations.pairings_of_device(&app, &device_id),
                certs.all_of_device(&app, &device_id),
            )
        }
    };
    let (admin, read) = AdminOfApp::beside(&mut parts, &state, &device_id, reads).await?;
    let (app, _) = admin.app?;
    let device_id = device_id?;
    let (device, pairings, issued) = match read {
        Some(read) => read,
        None => reads(app.app_id.clone(), &device_id).await,
    };
    let device = device?.ok_or_else(|| PairingError::DeviceNotFound(device_id.clone()))?;
    let source = format!("admin:{}", admin.token.token_id);
    for listed in pairings? {
        let (state, source, app_id, device_id) = (&state, source.as_str(), &app.app_id, &device_id);
        let machine_id = listed.0.machine_id.clone();
        let reread = || workstations.pairing(app_id, &machine_id, device_id);
        retry_on_conflict_from(Ok(Some(listed)), reread, |read| async move {
            let Some((pairing, version)) = read? else {
                return Ok(());
            };
            unpair(state, pairing, version, source).await
        })
        .await?;
    }
    // Each is read again: unpairing has queued the revocation of some.
    let timeout = app.workstation.request_timeout_in_secs;
    for listed in issued? {
        let (state, listed) = (&state, &listed);
        retry_on_conflict(|| async move {
            let Some((cert, version)) =
                certs.issued(&listed.app_id, &listed.device_id, &listed.cert_serial_number).await?
            else {
                return Ok(());
            };
            let now = state.backend.clock.now_millis();
            if let Revocation::Queue(_, ops) = revocation_of(*certs, &cert, version, Ok(timeout), now).await?
            {
                state.backend.store.transact(ops).await?;
            }
            Ok::<_, rp_domain::certificates::CertError>(())
        })
        .await?;
    }
    let attrs = rp_domain::events::attributes(&[("deviceId", &device_id), ("namedUser", &device.named_user)]);
    let event = rp_domain::events::EventRecord::new(
        DEVICE_REVOKED_EVENT,
        Some(app.app_id.clone()),
        source,
        state.backend.clock.now_millis(),
        attrs,
    );
    match devices.revoke_device(&device, &event).await {
        Ok(()) | Err(StoreError::Conflict) => {}
        Err(e) => return Err(e.into()),
    }
    tracing::info!(app_id = %app.app_id, device_id = %device_id, "device revoked");
    Ok(StatusCode::NO_CONTENT)
}
