//! Out-of-band authentication (DECISIONS §6): a server starts a request for a user (counted
//! against the tenant's budget, decided by its `oob.start` customizations), and the user's
//! device fetches the requests pending for it and answers one.

use crate::code::Hooks;
use crate::{AppError, AppState, HasClock, HasKeys, HasSettings, HasStore};
use rp_domain::apps::AppId;
use rp_domain::code::{CodeError, HookDecision, Trigger};
use rp_domain::devices::DeviceRecord;
use rp_domain::devices::UserRecord;
use rp_domain::oob::{
    choose_device, AnswerOutcome, Extras, OobAnswer, OobDevice, OobError, OobErrorKind, OobRequest, OobStart,
    OobState,
};
use rp_domain::push::WakeKind;
use rp_ports::metrics::{self, Metric};
use rp_ports::{retry_on_conflict_from, StoreError};
use rp_repo::apps::AppRecord;
use rp_repo::devices::Devices;
use rp_repo::oob::OobRequests;
use rp_repo::workstations::Workstations;
use serde::Serialize;
use std::collections::BTreeMap;
use std::future::Future;

/// A request as read (with its version), for [`status`].
pub type RequestRead = Result<Option<(OobRequest, u64)>, StoreError>;

/// Reads the request `request_id`: one consistent read, ahead of [`status`] or [`answer`]. The
/// read borrows nothing of `request_id`, so that it can go beside the caller's token.
pub fn request<'s>(state: &'s impl HasStore, request_id: &str) -> impl Future<Output = RequestRead> + 's {
    let request_id = request_id.to_owned();
    async move { OobRequests::new(state.store()).get(&request_id).await }
}

/// The request `read` found, as app `app` may see it now: another app's, or one past its
/// retention, is not found.
pub fn status(state: &impl HasClock, app: &AppId, read: RequestRead) -> Result<OobRequest, OobError> {
    let (request, _) = read?.ok_or(OobError::NotFound)?;
    request.visible_to(app, state.clock().now_millis())
}

/// What a start needs to know, read at once before anything is judged: the app, the user,
/// whether the nonce is spent, and which customizations decide (read with the variables beside
/// the count).
pub struct StartReads {
    app: Result<(AppRecord, u64), rp_domain::apps::ControlError>,
    user: Result<Option<UserRecord>, StoreError>,
    spent: Result<bool, StoreError>,
    hook_ids: Result<Vec<i64>, CodeError>,
}

/// The reads of [`start`], for `start`; they borrow nothing of it, so that they can go beside
/// the caller's token.
pub fn start_reads<'s>(
    state: &'s (impl HasSettings + HasStore),
    start: &OobStart,
) -> impl Future<Output = StartReads> + 's {
    let (app_id, named_user) = (start.app_id.clone(), start.named_user.clone());
    let nonce = start.nonces.session_nonce.clone();
    async move {
        let store = state.store();
        let (devices, requests) = (Devices::new(store), OobRequests::new(store));
        let (app, user, spent, hook_ids) = tokio::join!(
            crate::apps::load_app(state, app_id.as_str()),
            devices.resolve_user(&app_id, &named_user),
            requests.nonce_spent(&app_id, &nonce),
            crate::code::hook_ids(state, &app_id, Trigger::OobStart),
        );
        StartReads { app, user, spent, hook_ids }
    }
}

/// Starts `start` (read ahead as `reads`): the new request's id. The checks keep their order: a
/// start over the tenant's limit is refused before anything is judged of its user, and nothing
/// is written before the count allows it; a replayed nonce is refused before the
/// customizations run, so it costs reads, not a sandbox run. A device whose removal (or its
/// token's end) began while the start ran is passed over, as one removed before it.
pub async fn start(state: &AppState, start: OobStart, reads: StartReads) -> Result<String, AppError> {
    let StartReads { app, user, spent, hook_ids } = reads;
    let (app, _) = app?;
    let found = user.as_ref().ok().and_then(|user| user.as_ref()).map(|user| user.named_user.as_str());
    // The user's devices, and the customizations that decide with the tenant's variables (still
    // sealed), go beside the count.
    let devices = Devices::new(state.store());
    let listed = async {
        match found {
            Some(named_user) => devices.devices_of(&start.app_id, named_user).await,
            None => Ok(Vec::new()),
        }
    };
    let hooks = async { crate::code::hooks(state, &start.app_id, Trigger::OobStart, hook_ids?).await };
    let (counted, listed, hooks) =
        tokio::join!(crate::within_rate_limit(state, &app, "oob-start"), listed, hooks);
    counted?;
    let user = user?.ok_or(OobError::UnknownUser)?;
    if spent? {
        return Err(OobError::NonceReused.into());
    }
    let (mut able, hooks) = (listed?, hooks?);
    // The customizations share one budget, also when a device's removal makes them run again.
    let deadline = tokio::time::Instant::now() + state.config.hook_budget;
    loop {
        let now = state.clock().now_millis();
        let chosen =
            choose_device(able.clone(), start.device_id.as_deref(), start.machine_id.as_deref(), now)?;
        match start_on(state, &app, start.clone(), &user.named_user, &chosen, &hooks, deadline).await? {
            Some(request_id) => return Ok(request_id),
            None if start.device_id.is_some() => return Err(OobError::DeviceCannotAnswer.into()),
            None => able.retain(|d| d.device_id != chosen.device_id),
        }
    }
}

/// Starts `start` on `chosen`, a device of `named_user`: the new request's id, or `None` when
/// the device's removal (or its token's end) began first, so that nothing was stored.
async fn start_on(
    state: &AppState,
    app: &AppRecord,
    mut start: OobStart,
    named_user: &str,
    chosen: &DeviceRecord,
    hooks: &Hooks,
    deadline: tokio::time::Instant,
) -> Result<Option<String>, AppError> {
    let device = OobDevice {
        device_id: chosen.device_id.clone(),
        friendly_name: chosen.friendly_name.clone(),
        model_number: chosen.model_number.clone(),
        signing_public_key: chosen.signing_public_key.clone(),
    };
    // The tenant's enabled `oob.start` customizations decide before anything is stored.
    let event = serde_json::to_value(StartEvent::new(&start, named_user, &device.device_id))
        .map_err(StoreError::encoding)?;
    match crate::code::run_hook(state, &app.app_id, Trigger::OobStart, hooks, event, deadline).await? {
        HookDecision::Allow { transaction_text: Some(text) } => start.transaction_text = Some(text),
        HookDecision::Allow { transaction_text: None } => {}
        HookDecision::Deny { reason, .. } => {
            metrics::count(Metric::OobOutcome, 1, Some(("Outcome", "DENIED_BY_CUSTOMIZATION")));
            return Err(OobError::Denied(reason).into());
        }
        HookDecision::Failed { id, .. } => {
            metrics::count(Metric::OobOutcome, 1, Some(("Outcome", "CUSTOMIZATION_FAILED")));
            return Err(OobError::HookFailed { id }.into());
        }
    }
    let ttl = app.workstation.oob_request_timeout_in_secs;
    let request = OobRequest::start(start, device, ttl, state.clock().now_millis());
    // Stored only while the device is not frozen: a removal that began first wins.
    match OobRequests::new(state.store()).create(&request).await {
        Ok(()) => {}
        Err(StoreError::Conflict) => {
            let frozen = Devices::new(state.store()).is_frozen(&request.app_id, &chosen.device_id).await?;
            return if frozen { Ok(None) } else { Err(OobError::NonceReused.into()) };
        }
        Err(e) => return Err(e.into()),
    }
    tracing::info!(app_id = %request.app_id, request_id = %request.request_id, device_id = %request.device.device_id, "OOB authentication requested");
    crate::push::wake(state, chosen, WakeKind::Oob, &request.request_id).await;
    Ok(Some(request.request_id))
}

/// The devices a start may go to of the user `name` (a registered name or an alias) of `app`,
/// most recently registered first, with the user's registered name: none for an unknown user.
/// A device whose token ended or expired is left out: it could not answer.
pub async fn devices_of_user(
    state: &(impl HasClock + HasStore),
    app: &AppId,
    name: &str,
) -> Result<Option<(String, Vec<DeviceRecord>)>, StoreError> {
    let found = Devices::new(state.store()).user_and_devices(app, name).await?;
    let now = state.clock().now_millis();
    Ok(found.map(|(user, devices)| {
        (user.named_user, devices.into_iter().rev().filter(|d| d.can_answer(now)).collect())
    }))
}

/// The event an `oob.start` customization decides on.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct StartEvent<'a> {
    trigger: &'static str,
    app_id: &'a AppId,
    named_user: &'a str,
    requested_name: &'a str,
    device_id: &'a str,
    machine: &'a Option<String>,
    machine_id: &'a Option<String>,
    transaction_text: &'a Option<String>,
    transaction_type: &'a Option<String>,
    extras: &'a Option<Extras>,
    additional_details: &'a BTreeMap<String, String>,
}

impl<'a> StartEvent<'a> {
    fn new(start: &'a OobStart, named_user: &'a str, device_id: &'a str) -> Self {
        Self {
            trigger: Trigger::OobStart.name(),
            app_id: &start.app_id,
            named_user,
            requested_name: &start.named_user,
            device_id,
            machine: &start.machine,
            machine_id: &start.machine_id,
            transaction_text: &start.transaction_text,
            transaction_type: &start.transaction_type,
            extras: &start.extras,
            additional_details: &start.additional_details,
        }
    }
}

/// The live requests pending for `device_id` of `app`, each marked fetched (its first fetch
/// adds INITIATED), with the recovery keys its machine deposited for the device, opened.
pub async fn pending_for_device(
    state: &(impl HasClock + HasKeys + HasStore),
    app: &AppId,
    device_id: &str,
) -> Result<Vec<(OobRequest, Option<String>)>, OobError> {
    let repo = &OobRequests::new(state.store());
    let now = state.clock().now_millis();
    let live = repo.pending_for_device(app, device_id).await?.into_iter().filter(|(r, _)| r.is_live(now));
    // Each request's mark and its machine's keys go at once, and the requests side by side (at
    // most a page of them): the phone's fetch waits the same for one request as for twenty.
    let show = |(request, version): (OobRequest, u64)| async move {
        let mark = async {
            match request.fetched(now) {
                // A concurrent fetch or answer changed it first: show it as it was read.
                Some(next) => match repo.replace(&next, version).await {
                    Ok(()) => Ok(next),
                    Err(StoreError::Conflict) => Ok(request.clone()),
                    Err(e) => Err(OobError::from(e)),
                },
                None => Ok(request.clone()),
            }
        };
        let keys = async {
            match &request.machine_id {
                Some(machine_id) => recovery_keys(state, app, machine_id, device_id).await,
                None => Ok(None),
            }
        };
        tokio::try_join!(mark, keys)
    };
    futures_util::future::try_join_all(live.map(show)).await
}

/// [`pending_for_device`], waiting up to `wait` for one to arrive when none is pending (a
/// long-poll, for a phone without push): the store is asked again every half second, so a
/// request started meanwhile is seen within about that.
pub async fn pending_for_device_within(
    state: &(impl HasClock + HasKeys + HasStore),
    app: &AppId,
    device_id: &str,
    wait: std::time::Duration,
) -> Result<Vec<(OobRequest, Option<String>)>, OobError> {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let pending = pending_for_device(state, app, device_id).await?;
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        if !pending.is_empty() || left.is_zero() {
            return Ok(pending);
        }
        tokio::time::sleep(left.min(LONG_POLL_EVERY)).await;
    }
}

/// How often a long-poll asks the store again.
const LONG_POLL_EVERY: std::time::Duration = std::time::Duration::from_millis(500);

/// The recovery keys machine `machine_id` deposited for `device_id` at enrollment, opened.
async fn recovery_keys(
    state: &(impl HasKeys + HasStore),
    app: &AppId,
    machine_id: &str,
    device_id: &str,
) -> Result<Option<String>, OobError> {
    let Some(enrollment) = Workstations::new(state.store()).enrollment(app, machine_id).await? else {
        return Ok(None);
    };
    let Some(sealed) = enrollment.recovery_keys.filter(|_| enrollment.device_id == device_id) else {
        return Ok(None);
    };
    let context = crate::enrollment::recovery_context(app, machine_id, device_id);
    let plain = rp_ports::keys::open(state.keys(), &context, &sealed).await?;
    Ok(Some(String::from_utf8_lossy(&plain).into_owned()))
}

/// Stores `answer`, by the device `device_id` of `app`, to the request `request_id`: the
/// request as answered. A request of another app is not found, whatever its device's id (ids
/// are the devices' own, unique within an app only); so is any, once the device's removal or
/// the end of its token has begun, even if the device was let in before. A signature that does
/// not verify, or a wrong amount, is stored (the request fails) and then refused. The answer
/// that settled the request, sent again, changes nothing and gets the request as it is. The
/// first attempt decides on `first` (the request as [`request`] read it, beside the device's
/// token); a lost race reads it again.
pub async fn answer(
    state: &(impl HasClock + HasStore),
    app: &AppId,
    device_id: &str,
    request_id: &str,
    answer: &OobAnswer,
    first: RequestRead,
) -> Result<OobRequest, OobError> {
    let (repo, devices) = (OobRequests::new(state.store()), Devices::new(state.store()));
    let now = state.clock().now_millis();
    let reread = || repo.get(request_id);
    let answered = retry_on_conflict_from(first, reread, |read| async move {
        let (request, version) = read?.ok_or(OobError::NotFound)?;
        if &request.app_id != app {
            return Err(OobError::NotFound);
        }
        let answered = match request.answer(device_id, answer, now)? {
            AnswerOutcome::New(answered) => *answered,
            AnswerOutcome::Again => return Ok(Err(request)),
        };
        match repo.finish(&answered.request, version, &answered.event).await {
            Ok(()) => Ok::<_, OobError>(Ok(answered)),
            // The device's removal, or the end of its token, came first: it answers nothing.
            Err(StoreError::Conflict) if devices.is_frozen(app, device_id).await? => Err(OobError::NotFound),
            Err(e) => Err(e.into()),
        }
    })
    .await?;
    let answered = match answered {
        Ok(answered) => answered,
        Err(settled) => {
            tracing::info!(request_id = %request_id, "OOB answer repeated; nothing changes");
            return Ok(settled);
        }
    };
    let current = answered.request.current();
    if current.is_final() {
        metrics::count(Metric::OobOutcome, 1, Some(("Outcome", outcome_name(current).as_str())));
    }
    tracing::info!(request_id = %request_id, state = ?current, "OOB authentication answered");
    match answered.failure {
        Some(OobErrorKind::BadSignature) => Err(OobError::BadSignature),
        Some(OobErrorKind::WrongAmount) => Err(OobError::WrongAmount),
        None => Ok(answered.request),
    }
}

/// A state's name on the wire (`COMPLETED`, …), for the outcome metric.
fn outcome_name(state: OobState) -> String {
    serde_json::to_value(state).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_else(|| "?".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The outcome metric's dimension is the state as the API names it, which dashboards and
    /// alarms filter on (docs/deploying.md).
    #[test]
    fn an_outcome_is_named_as_its_state_on_the_wire() {
        for (state, name) in [
            (OobState::Completed, "COMPLETED"),
            (OobState::Failed, "FAILED"),
            (OobState::Canceled, "CANCELED"),
        ] {
            assert_eq!(outcome_name(state), name);
        }
    }
}
