//! Offline PINs: sealing a pairing's set, opening it, editing a pairing in one conditional
//! write, counting wrong attempts into a lock, and unpairing (which queues the revocation of
//! what the pairing was issued).

use crate::revocation::{request_timeout, revocation_of, Revocation};
use crate::{AppError, HasClock, HasKeys, HasStore};
use rp_domain::apps::{AppId, ControlError, OfflineAccess};
use rp_domain::certificates::RequestState;
use rp_domain::offline::{
    check_unused, parse_pins, read_pins, remove_used, render_pins, require_enabled, OfflineError, OfflineSet,
    Pin, SealedTokens,
};
use rp_domain::pairing::{OfflineTokens, Pairing, PairingError, PairingKey};
use rp_domain::time::EpochMillis;
use rp_ports::keys::{open, seal_under, DataKey, Sealed};
use rp_ports::{retry_on_conflict_from, EncryptionContext, StoreError};
use rp_repo::apps::AppRecord;
use rp_repo::certificates::Certificates;
use rp_repo::devices::Devices;
use rp_repo::workstations::Workstations;

/// The envelope context of a pairing's PINs: they open for that app, machine and device only.
pub fn context(app: &AppId, machine_id: &str, device_id: &str) -> EncryptionContext {
    crate::pairing_context(app, "offline-tokens", machine_id, device_id)
}

/// A new PIN set from what the workstation of `app`'s pairing of `device_id` on `machine_id`
/// sent (`offline.tokens`, checked against the app's `settings`), sealed for that pairing; and
/// the same PINs in the clear, for the answer.
pub async fn new_set(
    state: &impl HasKeys,
    app: &AppId,
    machine_id: &str,
    device_id: &str,
    sent: &OfflineTokens,
    settings: &OfflineAccess,
    now: EpochMillis,
) -> Result<(OfflineSet, OpenPins), PairingError> {
    let pins = parse_pins("offline.tokens", &sent.tokens, settings)?;
    let context = context(app, machine_id, device_id);
    let fresh = state.keys().generate_data_key(&context).await.map_err(PairingError::from)?;
    let sealed = seal_pins_under(fresh, &context, &pins, &sent.tokens_auth)?;
    Ok((OfflineSet::new(sealed, &pins, settings, now), (pins, sent.tokens_auth.clone())))
}

/// The PINs sealed under a data key already fetched for `context`.
fn seal_pins_under(
    fresh: DataKey,
    context: &EncryptionContext,
    pins: &[Pin],
    tokens_auth: &str,
) -> Result<Sealed, PairingError> {
    let secret = SealedTokens { tokens: render_pins(pins), tokens_auth: tokens_auth.to_owned() };
    let plain = serde_json::to_vec(&secret).map_err(StoreError::encoding)?;
    Ok(seal_under(fresh, context, &plain)?)
}

/// A PIN set in the clear: the PINs still unused, and their authorization code.
pub type OpenPins = (Vec<Pin>, String);

/// The PINs of `set` still unused, and their authorization code.
pub async fn open_pins(
    state: &impl HasKeys,
    pairing: &Pairing,
    set: &OfflineSet,
) -> Result<OpenPins, PairingError> {
    let context = context(&pairing.app_id, &pairing.machine_id, &pairing.device_id);
    let plain = open(state.keys(), &context, &set.sealed).await?;
    let secret: SealedTokens = serde_json::from_slice(&plain).map_err(StoreError::encoding)?;
    Ok((read_pins(&secret.tokens, &set.remaining), secret.tokens_auth))
}

/// The pairing at a key, as a read made ahead hands it to [`edit_pairing`].
pub type PairingRead = Result<Option<(Pairing, u64)>, StoreError>;

/// The app's record and every pairing of `device_id`, read at once; the app judged first.
pub async fn app_and_pairings_of_device(
    state: &impl HasStore,
    app_id: &AppId,
    device_id: &str,
) -> Result<(AppRecord, Vec<(Pairing, u64)>), ControlError> {
    let workstations = Workstations::new(state.store());
    let (app, pairings) = tokio::join!(
        crate::apps::load_app(state, app_id.as_str()),
        workstations.pairings_of_device(app_id, device_id)
    );
    Ok((app?.0, pairings?))
}

/// The app's record and the pairing of `device_id` on `machine_id`, read at once. The app is
/// judged first (gone: 404); the pairing's read is handed on as it came, for the caller's retry
/// to start from.
pub async fn app_and_pairing(
    state: &impl HasStore,
    app_id: &AppId,
    machine_id: &str,
    device_id: &str,
) -> Result<(AppRecord, PairingRead), ControlError> {
    let workstations = Workstations::new(state.store());
    let (app, read) = tokio::join!(
        crate::apps::load_app(state, app_id.as_str()),
        workstations.pairing(app_id, machine_id, device_id)
    );
    Ok((app?.0, read))
}

/// What one update of a pairing changes, all in one conditional write: a new machine name, a
/// new PIN set, and PINs used (from the new set, when the update brings one). Nothing is written
/// unless all of it can be: a PIN already gone leaves the name and the set as they were.
#[derive(Debug, Clone, Copy, Default)]
pub struct PairingEdit<'a> {
    /// The workstation (access token) the pairing must belong to, when a workstation edits it.
    pub owner: Option<&'a str>,
    pub machine_name: Option<&'a str>,
    pub new_set: Option<&'a OfflineSet>,
    pub used: &'a [String],
}

impl PairingEdit<'_> {
    /// Changes nothing: no write is needed.
    pub fn is_empty(&self) -> bool {
        self.machine_name.is_none() && self.new_set.is_none() && self.used.is_empty()
    }
}

/// Writes `edit` to the pairing, conditionally. Used PINs are deleted from its set (re-sealed
/// without them); one already gone is [`OfflineError::PinGone`]. The first attempt works on
/// `read` (the pairing as last read or written), a retry reads it again; each read is checked
/// against the edit's owner, so that a pairing made anew by another workstation meanwhile is
/// not edited. Returns the pairing as stored, with its version, and its PINs in the clear when
/// the edit had them (used PINs).
pub async fn edit_pairing(
    state: &(impl HasClock + HasKeys + HasStore),
    app: &AppId,
    key: &PairingKey,
    read: PairingRead,
    edit: PairingEdit<'_>,
    settings: &OfflineAccess,
) -> Result<(Pairing, u64, Option<OpenPins>), PairingError> {
    let workstations = &Workstations::new(state.store());
    let now = state.clock().now_millis();
    let reread = || workstations.pairing(app, &key.machine_id, &key.device_id);
    retry_on_conflict_from(read, reread, |read| async move {
        let (pairing, version) = read?.ok_or(PairingError::NotFound)?;
        if let Some(owner) = edit.owner {
            pairing.require_owner(owner)?;
        }
        let mut next = pairing.update(edit.machine_name, edit.new_set, now);
        let mut open = None;
        if !edit.used.is_empty() {
            let (set, left) = without_used(state, &next, edit.used, now).await?;
            next.offline_set = Some(set);
            open = Some(left);
        }
        let version = workstations.replace_pairing(&next, version).await?;
        if !edit.used.is_empty() {
            tracing::info!(app_id = %app, machine_id = %key.machine_id, used = edit.used.len(), remaining = next.offline_set.as_ref().map_or(0, |s| s.remaining.len()), low = next.offline_set.as_ref().is_some_and(|s| s.low_token_warning(settings)), "offline PINs used");
        }
        Ok((next, version, open))
    })
    .await
}

/// The pairing's PIN set without the `used` ones, re-sealed under a fresh data key, and what
/// is left of it in the clear.
async fn without_used(
    state: &impl HasKeys,
    pairing: &Pairing,
    used: &[String],
    now: EpochMillis,
) -> Result<(OfflineSet, OpenPins), PairingError> {
    pairing.lock.check(now)?;
    let set = pairing.offline_set.clone().ok_or(OfflineError::NoSet)?;
    // A PIN already gone is refused before the key service is asked for anything; the key the
    // rest is sealed under then comes beside the opening: one wait for the key service.
    check_unused(&set, used)?;
    let context = context(&pairing.app_id, &pairing.machine_id, &pairing.device_id);
    let (opened, fresh) =
        tokio::join!(open_pins(state, pairing, &set), state.keys().generate_data_key(&context));
    let (pins, tokens_auth) = opened?;
    let left = remove_used(&set, pins, used)?;
    let sealed = seal_pins_under(fresh?, &context, &left, &tokens_auth)?;
    let remaining = left.iter().map(|p| p.id.clone()).collect();
    Ok((OfflineSet { sealed, remaining, ..set }, (left, tokens_auth)))
}

/// Counts `failed` wrong offline attempts against the pairing (as last read or written, with
/// its version); at the app's maximum the pairing's offline access is locked for `lockoutSecs`,
/// and the lock is an event. Returns the pairing as it stands after: locked or as it came.
pub async fn count_wrong_attempts(
    state: &(impl HasClock + HasStore),
    latest: (Pairing, u64),
    failed: i64,
    settings: &OfflineAccess,
    source: &str,
) -> Result<Pairing, PairingError> {
    let workstations = &Workstations::new(state.store());
    let now = state.clock().now_millis();
    let count = workstations.count_wrong_attempts(&latest.0, failed, settings.lockout_secs, now).await?;
    if count < settings.max_wrong_attempts {
        return Ok(latest.0);
    }
    let (app, machine_id, device_id) =
        (&latest.0.app_id.clone(), &latest.0.machine_id.clone(), &latest.0.device_id.clone());
    let reread = || workstations.pairing(app, machine_id, device_id);
    retry_on_conflict_from(Ok(Some(latest)), reread, |read| async move {
        let (pairing, version) = read?.ok_or(PairingError::NotFound)?;
        if pairing.lock.check(now).is_err() {
            return Ok(pairing);
        }
        let (locked, event) = pairing.locked(settings.lockout_secs, count, source, now);
        workstations.replace_pairing_with_event(&locked, version, &event).await?;
        tracing::warn!(app_id = %app, machine_id = %pairing.machine_id, device_id = %pairing.device_id, "offline access locked after wrong attempts");
        Ok::<_, PairingError>(locked)
    })
    .await
}

/// Removes the pairing (read at `version`) and queues, in the same transaction, the revocation
/// of the certificate issued through it (one issued later is revoked by its result's
/// settling, [`crate::certificates::settle`]); logs the event.
pub async fn unpair(
    state: &(impl HasClock + HasStore),
    pairing: Pairing,
    version: u64,
    source: &str,
) -> Result<(), PairingError> {
    let certs = Certificates::new(state.store());
    let now = state.clock().now_millis();
    // What goes with the pairing's removal: its certificate's revocation, or the condition
    // that it is not issued meanwhile.
    let (mut with, mut queued) = (Vec::new(), 0);
    if let Some((request, request_version)) = certs.request(&pairing.certificate_request_id).await? {
        match (request.state, &request.cert_serial_number) {
            // Not issued yet: the unpairing holds only while it stays so. A result stored
            // meanwhile makes this a conflict, and the caller's retry then revokes what it
            // issued; one stored after the unpairing finds the pairing gone and revokes it.
            (RequestState::Pending | RequestState::Leased, _) => {
                with.push(Certificates::unchanged(&request.request_id, request_version));
            }
            (RequestState::Done, Some(serial)) => {
                // The certificate is filed under the request's device; the app's time-out for
                // the revocation is read beside it.
                let device = request.device_id.as_deref().unwrap_or_default();
                let (cert, timeout) = tokio::join!(
                    certs.issued(&request.app_id, device, serial),
                    request_timeout(state, &request.app_id)
                );
                if let Some((cert, cert_version)) = cert? {
                    if let Revocation::Queue(_, ops) =
                        revocation_of(certs, &cert, cert_version, timeout, now).await?
                    {
                        (with, queued) = (ops, 1);
                    }
                }
            }
            _ => {}
        }
    }
    let event = pairing.unpaired_event(source, queued, now);
    Workstations::new(state.store()).unpair(&pairing, version, with, &event).await?;
    tracing::info!(app_id = %pairing.app_id, machine_id = %pairing.machine_id, device_id = %pairing.device_id, revocations = queued, "unpaired");
    Ok(())
}

/// What the device takes of a pairing's PINs, once.
#[derive(Debug)]
pub struct Delivered {
    pub pairing: Pairing,
    pub set: OfflineSet,
    pub pins: OpenPins,
    pub settings: OfflineAccess,
}

/// Hands the device `device_id` of `app` the PINs of its pairing with `machine_id`: once per
/// set (the set is marked delivered in the same conditional write), only while it is valid, and
/// not once the device's removal (or the end of its token) has begun.
pub async fn deliver(
    state: &(impl HasClock + HasKeys + HasStore),
    app_id: &AppId,
    machine_id: &str,
    device_id: &str,
) -> Result<Delivered, AppError> {
    let workstations = &Workstations::new(state.store());
    let (app, read) = app_and_pairing(state, app_id, machine_id, device_id).await?;
    let reread = || workstations.pairing(app_id, machine_id, device_id);
    let settings = app.workstation.offline_access;
    require_enabled(&settings).map_err(PairingError::from)?;
    let now = state.clock().now_millis();
    let (pairing, set, pins) = retry_on_conflict_from(read, reread, |read| async move {
        let (pairing, version) = read?.ok_or(PairingError::NotFound)?;
        pairing.lock.check(now)?;
        let set = pairing.offline_set.clone().ok_or(OfflineError::NoSet)?;
        if set.delivered_at.is_some() || !set.is_valid(now) {
            return Err(OfflineError::Delivered.into());
        }
        let pins = open_pins(state, &pairing, &set).await?;
        let mut next = pairing.clone();
        next.offline_set = Some(OfflineSet { delivered_at: Some(now), ..set.clone() });
        match workstations.replace_pairing_for_device(&next, version).await {
            Ok(()) => Ok::<_, PairingError>((pairing, set, pins)),
            // The device's removal, or the end of its token, came first: it takes nothing.
            Err(StoreError::Conflict) if Devices::new(state.store()).is_frozen(app_id, device_id).await? => {
                Err(PairingError::NotFound)
            }
            Err(e) => Err(e.into()),
        }
    })
    .await?;
    tracing::info!(app_id = %app_id, device_id = %device_id, machine_id = %machine_id, "offline PINs delivered to the device");
    Ok(Delivered { pairing, set, pins, settings })
}
