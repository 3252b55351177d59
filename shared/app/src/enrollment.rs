//! Enrollment (DECISIONS §4): the session `enroll` opens for the user and device it found, and
//! `complete`, which closes it and stores the enrollment with its sealed recovery keys; the
//! event of a refused claim to another user's name.

use crate::AppState;
use rp_domain::apps::AppId;
use rp_domain::devices::{DeviceRecord, UserRecord};
use rp_domain::enrollment::{
    Closing, Complete, Completed, Enroll, EnrollError, EnrollmentSession, SessionState, SESSION_TTL_SECS,
};
use rp_ports::keys::seal;
use rp_ports::{retry_on_conflict, retry_on_conflict_from, EncryptionContext, StoreError};
use rp_repo::devices::Devices;
use rp_repo::workstations::Workstations;
use std::future::Future;

/// The user an enroll request names, with their devices: read beside the caller's token.
pub type UserRead = Result<Option<(UserRecord, Vec<DeviceRecord>)>, StoreError>;

/// What [`open_session`] reads first, before anything is judged: the user `request` names. The
/// read borrows nothing of `request`, so that it can go beside the caller's token.
pub fn user_of<'s>(state: &'s AppState, request: &Enroll) -> impl Future<Output = UserRead> + 's {
    let (app, name) = (request.app_id.clone(), request.machine_user_name_ws.clone());
    let devices = Devices::new(state.backend.store.as_ref());
    async move { devices.user_and_devices(&app, &name).await }
}

/// An open enrollment session: the device it is for, that device's counter, and the session's id.
#[derive(Debug)]
pub struct Opened {
    pub device: DeviceRecord,
    pub enc_counter: i64,
    pub session_id: String,
}

/// Opens (or reopens) the enrollment session of `request` for the user read as `user` (by
/// [`user_of`]) and the user's newest device.
pub async fn open_session(state: &AppState, request: Enroll, user: UserRead) -> Result<Opened, EnrollError> {
    let app = &request.app_id;
    let (user, mut listed) = user?.ok_or(EnrollError::UnknownUser)?;
    let device = listed.pop().ok_or(EnrollError::NoDevice)?;
    let now = state.backend.clock.now_millis();
    // A session id of our own making names no session yet: only a caller's is looked up.
    let named = request.session_id.is_some();
    let fresh = &EnrollmentSession {
        session_id: request.session_id.unwrap_or_else(|| format!("ens-{}", uuid::Uuid::new_v4().simple())),
        app_id: app.clone(),
        named_user: user.named_user,
        device_id: device.device_id.clone(),
        machine_user_name_ws: request.machine_user_name_ws,
        created_at: now,
        expires_at: now.plus_secs(SESSION_TTL_SECS),
        machine_id: request.machine_id,
        machine_version: request.machine_version,
        state: SessionState::Open,
        completion: None,
    };
    let workstations = Workstations::new(state.backend.store.as_ref());
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
    tracing::info!(app_id = %app, device_id = %device.device_id, "enrollment session opened");
    Ok(Opened { device, enc_counter: enc_counter?, session_id: fresh.session_id.clone() })
}

/// Completes the session `complete` names, for the workstation of `app` whose token is
/// `token_id`: the answer's message ("already completed" for a repeat).
pub async fn complete(
    state: &AppState,
    app: &AppId,
    token_id: &str,
    complete: Complete,
) -> Result<&'static str, EnrollError> {
    let Complete { session_id, completion, recovery_keys } = complete;
    let store = state.backend.store.as_ref();
    let workstations = &Workstations::new(store);
    let source = format!("workstation:{token_id}");
    let now = state.backend.clock.now_millis();
    // The user the workstation names, by name or alias, cross-checked against the session's;
    // the session is read beside it.
    let reread = || workstations.session(app, &session_id);
    let devices = Devices::new(store);
    let (user, read) = tokio::join!(devices.resolve_user(app, &completion.machine_user_name), reread());
    let user = user?.map(|u| u.named_user);
    let (completion, source, user) = (&completion, source.as_str(), user.as_deref());
    let recovery_keys = recovery_keys.as_deref();
    retry_on_conflict_from(read, reread, |read| async move {
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
    .await
}

/// The context recovery keys are sealed under: they open for that app, machine and device only.
pub fn recovery_context(app: &AppId, machine_id: &str, device_id: &str) -> EncryptionContext {
    crate::pairing_context(app, "recovery-keys", machine_id, device_id)
}

/// Records that `name` was claimed for `claimed_for` while it stands for `holder` (or nobody).
pub async fn refuse_name_claim(
    state: &AppState,
    app: &AppId,
    name: &str,
    claimed_for: &str,
    holder: Option<&str>,
    source: &str,
) -> Result<(), StoreError> {
    let mut attrs = rp_domain::events::attributes(&[("name", name), ("claimedFor", claimed_for)]);
    attrs.insert("heldBy".into(), holder.map_or(serde_json::Value::Null, |h| h.into()));
    let event = rp_domain::events::EventRecord::new(
        rp_domain::pairing::NAME_CLAIM_REFUSED_EVENT,
        Some(app.clone()),
        source,
        state.backend.clock.now_millis(),
        attrs,
    );
    tracing::warn!(app_id = %app, "a name claim for another user was refused");
    rp_repo::events::Events::new(state.backend.store.as_ref()).record(&event).await
}
