//! Enrollment (DECISIONS §4): the session `enroll` opens for the user and device it found, and
//! `complete`, which closes it and stores the enrollment with its sealed recovery keys; the
//! event of a refused claim to another user's name.

use crate::{HasClock, HasKeys, HasStore};
use rp_domain::apps::AppId;
use rp_domain::devices::{DeviceRecord, UserRecord};
use rp_domain::enrollment::{
    unnamed_user, Closing, Complete, Completed, Enroll, EnrollError, EnrollmentSession, SessionState,
    SESSION_TTL_SECS,
};
use rp_domain::oob::{OobRequest, OobState};
use rp_ports::keys::seal;
use rp_ports::{retry_on_conflict_from, EncryptionContext, StoreError};
use rp_repo::devices::Devices;
use rp_repo::oob::OobRequests;
use rp_repo::workstations::Workstations;
use std::future::Future;

/// The user an enroll request names, with their devices: read beside the caller's token.
pub type UserRead = Result<Option<NamedUser>, EnrollError>;

/// The session a request names, as read ahead (`None` when it names none, or none is stored).
type SessionRead = Result<Option<(EnrollmentSession, u64)>, StoreError>;

/// The user an enroll request names, as found.
pub struct NamedUser {
    user: UserRecord,
    /// Most recently registered last.
    devices: Vec<DeviceRecord>,
    /// The workstation's name for the user: the request's, else the named session's.
    name_ws: String,
    /// The device the named session was with, if it is one.
    device_id: Option<String>,
    /// The enrollment session the request names, read beside the user.
    session: SessionRead,
}

/// What [`open_session`] reads first, before anything is judged: the user `request` names, by
/// `machineUserNameWS` or, without it, by its `sessionId`: an enrollment session of the app, or an
/// OOB authentication of the app the user approved (a workstation that logged in with the phone).
/// A named enrollment session is read at once, beside the user. The read borrows nothing of
/// `request`, so that it can go beside the caller's token.
pub fn user_of<'s>(state: &'s impl HasStore, request: &Enroll) -> impl Future<Output = UserRead> + 's {
    let app = request.app_id.clone();
    let (name, session_id) = (request.machine_user_name_ws.clone(), request.session_id.clone());
    let store = state.store();
    let (devices, workstations, requests) =
        (Devices::new(store), Workstations::new(store), OobRequests::new(store));
    async move {
        let session_read = async {
            match &session_id {
                Some(id) => workstations.session(&app, id).await,
                None => Ok(None),
            }
        };
        let (name_ws, device_id, session) = match (name, &session_id) {
            (Some(name), _) => {
                let (found, session) = tokio::join!(devices.user_and_devices(&app, &name), session_read);
                return Ok(found?.map(|(user, devices)| NamedUser {
                    user,
                    devices,
                    name_ws: name,
                    device_id: None,
                    session,
                }));
            }
            (None, None) => return Err(unnamed_user().into()),
            (None, Some(id)) => {
                let (session, request) = tokio::join!(session_read, requests.get(id));
                let session = session?;
                let (name_ws, device_id) = match &session {
                    Some((session, _)) => (session.machine_user_name_ws.clone(), session.device_id.clone()),
                    None => approved_by(request?.map(|(request, _)| request), &app)?,
                };
                (name_ws, Some(device_id), Ok(session))
            }
        };
        let found = devices.user_and_devices(&app, &name_ws).await?;
        Ok(found.map(|(user, devices)| NamedUser { user, devices, name_ws, device_id, session }))
    }
}

/// The user an OOB authentication of `app` names, and the device that approved it: only one
/// the user approved names them.
fn approved_by(request: Option<OobRequest>, app: &AppId) -> Result<(String, String), EnrollError> {
    match request.filter(|r| &r.app_id == app && r.current() == OobState::Completed) {
        Some(request) => Ok((request.named_user, request.device.device_id)),
        None => Err(unnamed_user().into()),
    }
}

/// An open enrollment session: the device it is for, that device's counter, and the session's id.
#[derive(Debug)]
pub struct Opened {
    pub device: DeviceRecord,
    pub enc_counter: i64,
    pub session_id: String,
}

/// Opens (or reopens) the enrollment session of `request` for the user read as `user` (by
/// [`user_of`]) and the device of the session it names, else the user's newest device that can
/// still call in.
pub async fn open_session(
    state: &(impl HasClock + HasStore),
    request: Enroll,
    user: UserRead,
) -> Result<Opened, EnrollError> {
    let app = &request.app_id;
    let NamedUser { user, devices: mut listed, name_ws, device_id, session } =
        user?.ok_or(EnrollError::UnknownUser)?;
    let now = state.clock().now_millis();
    let chosen = device_id.and_then(|id| listed.iter().position(|d| d.device_id == id));
    let device = match chosen {
        Some(at) => listed.swap_remove(at),
        // Unnamed, a device whose token ended or expired is passed over: it could never claim.
        None => listed.into_iter().rev().find(|d| d.can_answer(now)).ok_or(EnrollError::NoDevice)?,
    };
    // A session id of our own making names no session yet: only a caller's is looked up.
    let named = request.session_id.is_some();
    let fresh = &EnrollmentSession {
        session_id: request.session_id.unwrap_or_else(|| format!("ens-{}", uuid::Uuid::new_v4().simple())),
        app_id: app.clone(),
        named_user: user.named_user,
        device_id: device.device_id.clone(),
        machine_user_name_ws: name_ws,
        created_at: now,
        expires_at: now.plus_secs(SESSION_TTL_SECS),
        machine_id: request.machine_id,
        machine_version: request.machine_version,
        state: SessionState::Open,
        completion: None,
    };
    let workstations = Workstations::new(state.store());
    // The first attempt decides on the session read beside the user; a retry reads it again.
    let reread = || workstations.session(app, &fresh.session_id);
    let open = retry_on_conflict_from(session, reread, |existing| async move {
        let existing = if named { existing? } else { None };
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
    state: &(impl HasClock + HasKeys + HasStore),
    app: &AppId,
    token_id: &str,
    complete: Complete,
) -> Result<&'static str, EnrollError> {
    let Complete { session_id, completion, recovery_keys } = complete;
    let store = state.store();
    let workstations = &Workstations::new(store);
    let source = format!("workstation:{token_id}");
    let now = state.clock().now_millis();
    // The user the workstation names, by name or alias, cross-checked against the session's;
    // the session and the machine's enrollment are read beside it.
    let machine_id = completion.machine_id.clone();
    let reread = || async {
        tokio::join!(
            workstations.session(app, &session_id),
            workstations.enrollment_versioned(app, &machine_id)
        )
    };
    let devices = Devices::new(store);
    let (user, read) = tokio::join!(devices.resolve_user(app, &completion.machine_user_name), reread());
    let user = user?.map(|u| u.named_user);
    let (completion, source, user) = (&completion, source.as_str(), user.as_deref());
    let recovery_keys = recovery_keys.as_deref();
    retry_on_conflict_from(read, reread, |(read, enrolled)| async move {
        let (session, version) = read?.ok_or(EnrollError::SessionNotFound)?;
        match session.complete(completion.clone(), user, source, now)? {
            Completed::Repeated => Ok::<_, EnrollError>("Enrollment already completed"),
            Completed::Closed(closing) => {
                let Closing { session, mut enrollment, event, message } = *closing;
                // The enrollment is the workstation's: another may not replace it (and the
                // recovery keys deposited with it) while the owner's token is valid.
                let replaces = match (&enrollment, enrolled?) {
                    (Some(_), Some((existing, existing_version))) => {
                        let owner_valid = match existing.owner.as_deref().filter(|owner| *owner != token_id) {
                            Some(owner) => token_is_valid(state, owner, now).await?,
                            None => false,
                        };
                        existing.may_be_replaced_by(token_id, owner_valid)?;
                        Some(existing_version)
                    }
                    _ => None,
                };
                if let Some(enrollment) = enrollment.as_mut() {
                    enrollment.owner = Some(token_id.to_owned());
                    // Recovery keys are sealed for this machine and the session's device, and
                    // stored with the enrollment in the same transaction.
                    if let Some(keys) = recovery_keys {
                        let context = recovery_context(app, &enrollment.machine_id, &enrollment.device_id);
                        enrollment.recovery_keys = Some(seal(state.keys(), &context, keys.as_bytes()).await?);
                    }
                }
                let enrollment = enrollment.as_ref().map(|e| (e, replaces));
                workstations.close_session(&session, version, enrollment, &event).await?;
                Ok(message)
            }
        }
    })
    .await
}

/// Whether the token `token_id` still admits its holder at `now` (not revoked, not expired).
async fn token_is_valid(
    state: &impl HasStore,
    token_id: &str,
    now: rp_domain::EpochMillis,
) -> Result<bool, StoreError> {
    let token = rp_repo::tokens::Tokens::new(state.store()).get(token_id).await?;
    Ok(token.is_some_and(|t| t.live_at(now).is_ok()))
}

/// The context recovery keys are sealed under: they open for that app, machine and device only.
pub fn recovery_context(app: &AppId, machine_id: &str, device_id: &str) -> EncryptionContext {
    crate::pairing_context(app, "recovery-keys", machine_id, device_id)
}

/// Records that `name` was claimed for `claimed_for` while it stands for `holder` (or nobody).
pub async fn refuse_name_claim(
    state: &(impl HasClock + HasStore),
    app: &AppId,
    name: &str,
    claimed_for: &str,
    holder: Option<&str>,
    source: &str,
) -> Result<(), StoreError> {
    let mut attrs = rp_domain::events::attributes(&[("name", name), ("claimedFor", claimed_for)]);
    attrs.insert("heldBy".into(), holder.map_or(serde_json::Value::Null, |h| h.into()));
    let event = rp_domain::events::EventRecord::new(
        rp_domain::events::NAME_CLAIM_REFUSED_EVENT,
        Some(app.clone()),
        source,
        state.clock().now_millis(),
        attrs,
    );
    tracing::warn!(app_id = %app, "a name claim for another user was refused");
    rp_repo::events::Events::new(state.store()).record(&event).await
}
