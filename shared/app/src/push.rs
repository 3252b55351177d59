//! Waking devices: a device registers its push token (kept with the device as the platform
//! endpoint of the app's platform application), and the use cases that leave something for a
//! device to fetch wake it: an OOB start, a workstation's offline PINs ready for setup, a login
//! certificate issued. A wake-up says only what to fetch; a failed one never fails the use case
//! that sent it, and an endpoint the platform reports disabled or gone is marked so on the
//! device (it registers its token again to turn it back on).

use crate::{AppError, HasClock, HasPush, HasStore};
use rp_domain::apps::AppId;
use rp_domain::devices::{DeviceRecord, RegistrationError};
use rp_domain::push::{PushRegistration, PushToken, WakeKind, WakeUp};
use rp_domain::FieldError;
use rp_ports::metrics::{self, Metric};
use rp_ports::{retry_on_conflict, EndpointRequest, PushError, StoreError};
use rp_repo::devices::Devices;
use std::time::Duration;

/// The longest a wake-up may hold up the use case that sends it.
const SEND_WITHIN: Duration = Duration::from_secs(2);

/// Registers (or replaces) the push token of the device `device_id` of `named_user` in `app`:
/// the registration kept with the device.
pub async fn register_token(
    state: &(impl HasClock + HasPush + HasStore),
    app: &AppId,
    named_user: &str,
    device_id: &str,
    request: PushToken,
) -> Result<PushRegistration, AppError> {
    let devices = Devices::new(state.store());
    let (found, device) = tokio::join!(
        crate::apps::load_app(state, app.as_str()),
        devices.device_of(app, named_user, device_id)
    );
    let (found, _) = found?;
    let application = found.workstation.push.for_platform(request.platform).ok_or_else(|| {
        FieldError::new(
            "platform",
            "the app has no push application for this platform (its workstation settings' push)",
        )
    })?;
    let mut first = Some(device);
    let request = &request;
    // The endpoints the device does not hold: those attempts made and did not store (a lost
    // race, a removal, a failure), and the one it moved off.
    let made = &std::sync::Mutex::new(Vec::<String>::new());
    let registered = retry_on_conflict(|| {
        let read = first.take();
        async move {
            let read = match read {
                Some(read) => read,
                None => devices.device_of(app, named_user, device_id).await,
            };
            let (device, version) =
                read?.ok_or_else(|| RegistrationError::DeviceNotFound(device_id.to_owned()))?;
            let current =
                device.push.as_ref().filter(|p| p.platform == request.platform).map(|p| p.endpoint.as_str());
            let endpoint = state
                .push()
                .register(EndpointRequest { application, token: &request.token, endpoint: current })
                .await
                .map_err(|e| match e {
                    // The platform's own words can name the account's resources (ARNs): the
                    // log gets them, the device a fixed text.
                    PushError::Refused(why) => {
                        tracing::info!(app_id = %app, platform = ?request.platform, reason = %why, "the push platform refused a token");
                        AppError::from(FieldError::new("token", "refused by the push platform"))
                    }
                    PushError::NoApplication => AppError::from(FieldError::new(
                        "platform",
                        "the app's push application for this platform does not exist or is disabled",
                    )),
                    other => AppError::Push(other),
                })?;
            let registration = PushRegistration {
                platform: request.platform,
                endpoint,
                enabled: true,
                updated_at: state.clock().now_millis(),
            };
            let failed = match devices.register_push(&device, version, registration.clone()).await {
                Ok(left) => {
                    made.lock().unwrap_or_else(|e| e.into_inner()).extend(left);
                    return Ok::<_, AppError>(registration);
                }
                Err(e) => e,
            };
            made.lock().unwrap_or_else(|e| e.into_inner()).push(registration.endpoint);
            match failed {
                // Its removal (or its token's end) began: the endpoint goes, and no token stays
                // with the platform for a device that is gone.
                StoreError::Conflict if devices.is_frozen(app, device_id).await? => {
                    Err(RegistrationError::DeviceNotFound(device_id.to_owned()).into())
                }
                e => Err(e.into()),
            }
        }
    })
    .await;
    let made = std::mem::take(&mut *made.lock().unwrap_or_else(|e| e.into_inner()));
    let registered = forget_unkept(state, app, device_id, made, registered).await?;
    tracing::info!(app_id = %app, device_id, platform = ?registered.platform, "push token registered");
    Ok(registered)
}

/// Forgets ([`forget`]) the endpoints `made` by attempts of a registration (ending `registered`),
/// or moved off by it, that the device does not hold: what it holds stays, and an endpoint a
/// lost race made goes, so that no second endpoint holds the token (nor, once the device is
/// gone, any). A failure that may have stored its endpoint (the store's, say) leaves them all.
async fn forget_unkept(
    state: &(impl HasPush + HasStore),
    app: &AppId,
    device_id: &str,
    mut made: Vec<String>,
    registered: Result<PushRegistration, AppError>,
) -> Result<PushRegistration, AppError> {
    let kept = match &registered {
        Ok(registered) => Some(registered.endpoint.as_str()),
        Err(AppError::Registration(RegistrationError::DeviceNotFound(_))) => None,
        Err(_) => return registered,
    };
    made.sort();
    made.dedup();
    for endpoint in made.iter().filter(|e| Some(e.as_str()) != kept) {
        forget(state, app, device_id, endpoint).await;
    }
    registered
}

/// Wakes `device` (as read) about `kind` `id`, if it registered for push: never an error. An
/// endpoint the platform reports disabled or gone is marked disabled on the device.
pub async fn wake(
    state: &(impl HasClock + HasPush + HasStore),
    device: &DeviceRecord,
    kind: WakeKind,
    id: &str,
) {
    let Some(push) = device.push.as_ref().filter(|p| p.enabled) else { return };
    let wake = WakeUp { kind, id: id.to_owned() };
    let sent =
        tokio::time::timeout(SEND_WITHIN, state.push().send(&push.endpoint, push.platform, &wake)).await;
    let outcome = match sent {
        Ok(Ok(())) => "SENT",
        Ok(Err(PushError::Gone)) => {
            if let Err(e) = disable(state, device, &push.endpoint).await {
                tracing::warn!(device_id = %device.device_id, error = %e, "could not mark a gone push endpoint");
            }
            "ENDPOINT_GONE"
        }
        Ok(Err(e)) => {
            tracing::warn!(device_id = %device.device_id, error = %e, "a wake-up failed");
            "FAILED"
        }
        Err(_) => {
            tracing::warn!(device_id = %device.device_id, "a wake-up timed out");
            "FAILED"
        }
    };
    metrics::count(Metric::PushOutcome, 1, Some(("Outcome", outcome)));
    tracing::info!(app_id = %device.app_id, device_id = %device.device_id, kind = ?kind, outcome, "device woken");
}

/// Deletes `endpoint`, a push endpoint that the device `device_id` of `app` no longer holds (it
/// is removed, moved off it, or a lost race made it), unless another device holds it: the same
/// phone registered as another device, in this app or in another naming the same platform
/// application, is woken through it too. Best effort: a failure is logged (the endpoint then
/// stays with the platform, and nothing sends to it).
pub async fn forget(state: &(impl HasPush + HasStore), app: &AppId, device_id: &str, endpoint: &str) {
    match Devices::new(state.store()).endpoint_held(endpoint).await {
        Ok(false) => {}
        Ok(true) => {
            tracing::info!(app_id = %app, device_id, "push endpoint kept: another device holds it");
            return;
        }
        Err(e) => {
            tracing::warn!(app_id = %app, device_id, error = %e, "could not tell whether another device holds a push endpoint: it stays");
            return;
        }
    }
    match state.push().remove(endpoint).await {
        Ok(()) => tracing::info!(app_id = %app, device_id, "push endpoint deleted"),
        Err(e) => {
            tracing::warn!(app_id = %app, device_id, error = %e, "could not delete a push endpoint the device no longer holds")
        }
    }
}

/// Wakes the device `device_id` of `app` (read first), as [`wake`].
pub async fn wake_device(
    state: &(impl HasClock + HasPush + HasStore),
    app: &AppId,
    device_id: &str,
    kind: WakeKind,
    id: &str,
) {
    match Devices::new(state.store()).device(app, device_id).await {
        Ok(Some((device, _))) => wake(state, &device, kind, id).await,
        Ok(None) => {}
        Err(e) => tracing::warn!(device_id, error = %e, "could not read the device to wake"),
    }
}

/// Marks the push endpoint `endpoint` of `device` disabled, unless the device registered
/// another since.
async fn disable(
    state: &(impl HasClock + HasStore),
    device: &DeviceRecord,
    endpoint: &str,
) -> Result<(), StoreError> {
    let devices = Devices::new(state.store());
    retry_on_conflict(|| async move {
        let Some((device, version)) =
            devices.device_of(&device.app_id, &device.named_user, &device.device_id).await?
        else {
            return Ok(());
        };
        let Some(push) = device.push.clone().filter(|p| p.endpoint == endpoint && p.enabled) else {
            return Ok(());
        };
        let push = PushRegistration { enabled: false, updated_at: state.clock().now_millis(), ..push };
        devices.set_push(&device, version, Some(push)).await?;
        Ok(())
    })
    .await
}
