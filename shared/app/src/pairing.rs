//! Pairing a workstation with a user's device (DECISIONS §5): pairing (which queues the login
//! certificate), reading and updating a pairing (its name, its offline PINs, wrong attempts)
//! and unpairing. What a pairing shows its caller is [`Shown`].

use crate::devices::DeviceRead;
use crate::enrollment::refuse_name_claim;
use crate::offline::{self, OpenPins, PairingEdit};
use crate::{AppError, HasClock, HasKeys, HasPush, HasSettings, HasStore};
use futures_util::future::maybe_done;
use rp_domain::apps::{AppId, OfflineAccess};
use rp_domain::certificates::CertError;
use rp_domain::certificates::{certificate_status, CertificateStatus};
use rp_domain::devices::{DeviceRecord, UserRecord};
use rp_domain::enrollment::EnrollmentRecord as Enrollment;
use rp_domain::offline::{render_pins, require_enabled, OfflineSet};
use rp_domain::pairing::{
    known_workstation_name, NewPairing, OfflineTokens, PairedDevice, Pairing, PairingError, PairingKey,
    PairingUpdate,
};
use rp_domain::push::WakeKind;
use rp_domain::time::EpochMillis;
use rp_ports::{ItemStore, StoreError};
use rp_repo::apps::AppRecord;
use rp_repo::certificates::Certificates;
use rp_repo::devices::Devices;
use rp_repo::workstations::Workstations;
use std::pin::pin;

/// A pairing as its caller may see it: the PINs in the clear only for the pairing's own
/// workstation (`offline` is empty else, and `hidden` says why).
#[derive(Debug)]
pub struct Shown {
    pub pairing: Pairing,
    /// The app's offline settings.
    pub settings: OfflineAccess,
    pub offline: OfflineTokens,
    /// `offlineDisabled`, `notOwner`, `locked`, `noTokens` or `expired`.
    pub hidden: Option<&'static str>,
    /// When it was shown.
    pub now: EpochMillis,
    /// Its login certificate, to its own workstation when it reads the pairing.
    pub certificate: Option<CertificateStatus>,
}

/// `pairing` (of the app `app`) as the access token `viewer` may see it. `open` is its set in
/// the clear, if the caller has it; else it is opened when the viewer may see it.
pub async fn show(
    state: &(impl HasClock + HasKeys),
    pairing: Pairing,
    app: &AppRecord,
    viewer: Option<&str>,
    open: Option<OpenPins>,
) -> Result<Shown, PairingError> {
    let settings = app.workstation.offline_access.clone();
    let now = state.clock().now_millis();
    let hidden = pairing.hidden_because(viewer, &settings, now);
    let offline = match (&pairing.offline_set, hidden) {
        (Some(set), None) => {
            // What the caller just sealed or re-sealed is in the clear already; the rest is opened.
            let (pins, tokens_auth) = match open {
                Some(open) => open,
                None => offline::open_pins(state, &pairing, set).await?,
            };
            OfflineTokens { tokens: render_pins(&pins), tokens_auth }
        }
        _ => OfflineTokens::default(),
    };
    Ok(Shown { pairing, settings, offline, hidden, now, certificate: None })
}

/// What [`pair`] did: paired anew (a login certificate is requested), or found the pairing
/// there already (returned as it is, nothing queued).
#[derive(Debug)]
pub enum Paired {
    Created(Shown),
    Existing(Shown),
}

/// Pairs the machine and device `request` names in `app`, for the workstation whose token is
/// `owner`, and queues its login certificate.
pub async fn pair(
    state: &(impl HasClock + HasKeys + HasPush + HasSettings + HasStore),
    app: &AppId,
    owner: &str,
    request: NewPairing,
) -> Result<Paired, AppError> {
    let store = state.store();
    let (workstations, certs) = (Workstations::new(store), Certificates::new(store));
    // The app and the pairing; beside them, what a new pairing is judged on, which a pairing
    // that exists does not wait for (it is answered as it is, and those reads are dropped).
    let first = async {
        tokio::join!(
            crate::apps::load_app(state, app.as_str()),
            workstations.pairing(app, &request.machine_id, &request.device_id),
        )
    };
    let mut judged_on = pin!(maybe_done(async {
        tokio::join!(ClaimReads::of(store, app, &request), certs.open_requests(app))
    }));
    let (settings, existing) = crate::ahead_of(first, judged_on.as_mut()).await;
    let (settings, _) = settings?;
    // Seed rule 4: a pairing that exists is returned as it is, and nothing is queued again.
    if let Some((existing, _)) = existing? {
        return Ok(Paired::Existing(show(state, existing, &settings, Some(owner), None).await?));
    }
    judged_on.as_mut().await;
    let (claim_reads, open) = judged_on.as_mut().take_output().expect("awaited to its end");
    let (device, enrolled) = claim(state, app, owner, &request, claim_reads).await?;
    let (offline_set, open_pins) = match &request.offline {
        Some(sent) => {
            let access = &settings.workstation.offline_access;
            require_enabled(access).map_err(PairingError::from)?;
            let (machine, device, now) =
                (&request.machine_id, &request.device_id, state.clock().now_millis());
            Some(offline::new_set(state, app, machine, device, sent, access, now).await?)
        }
        None => None,
    }
    .unzip();
    let cap = settings.open_requests_cap(state.settings().max_open_per_app);
    if open? >= i64::from(cap) {
        return Err(CertError::QueueFull { cap }.into());
    }
    let pairing = create(state, app, owner, &request, &device, &enrolled, &settings, offline_set).await?;
    match pairing {
        Some(pairing) => {
            if pairing.offline_set.is_some() {
                crate::push::wake(state, &device, WakeKind::OfflineSetup, &pairing.machine_id).await;
            }
            Ok(Paired::Created(show(state, pairing, &settings, Some(owner), open_pins).await?))
        }
        // A concurrent POST created it first: answer with the winner's pairing. Without one,
        // the app's queue filled up in the meantime.
        None => match workstations.pairing(app, &request.machine_id, &request.device_id).await? {
            Some((existing, _)) => {
                Ok(Paired::Existing(show(state, existing, &settings, Some(owner), None).await?))
            }
            None if certs.open_requests(app).await? >= i64::from(cap) => {
                Err(CertError::QueueFull { cap }.into())
            }
            // The device's removal began (or its token ended) since it was read.
            None if Devices::new(state.store()).is_frozen(app, &request.device_id).await? => {
                Err(PairingError::UnknownDevice.into())
            }
            None => Err(StoreError::Conflict.into()),
        },
    }
}

/// What [`claim`] judges a new pairing on, read at once: the device, whether it is frozen, the
/// machine's enrollment and, if the pairing gives a workstation name, the user it names (none
/// read when it gives none).
struct ClaimReads {
    device: DeviceRead,
    frozen: Result<bool, StoreError>,
    enrolled: Result<Option<Enrollment>, StoreError>,
    holder: Result<Option<UserRecord>, StoreError>,
}

impl ClaimReads {
    async fn of(store: &dyn ItemStore, app: &AppId, request: &NewPairing) -> Self {
        let (devices, workstations) = (Devices::new(store), Workstations::new(store));
        let holder = async {
            match &request.machine_user_name_ws {
                Some(name) => devices.resolve_user(app, name).await,
                None => Ok(None),
            }
        };
        let (device, frozen, enrolled, holder) = tokio::join!(
            devices.device(app, &request.device_id),
            devices.is_frozen(app, &request.device_id),
            workstations.enrollment(app, &request.machine_id),
            holder,
        );
        ClaimReads { device, frozen, enrolled, holder }
    }
}

/// The device `request` pairs and the enrollment of its machine, judged on `reads`: the device
/// must be registered and not frozen (a removal under way, or its token ended), the machine must
/// be enrolled for the device's user, and a name the pairing gives must be one of that user's (a
/// workstation cannot pair a device under someone else's name; the attempt is an event).
async fn claim(
    state: &(impl HasClock + HasStore),
    app: &AppId,
    owner: &str,
    request: &NewPairing,
    reads: ClaimReads,
) -> Result<(DeviceRecord, Enrollment), AppError> {
    let (device, _) = reads.device?.ok_or(PairingError::UnknownDevice)?;
    if reads.frozen? {
        return Err(PairingError::UnknownDevice.into());
    }
    let Some(enrolled) = reads.enrolled?.filter(|e| e.named_user == device.named_user) else {
        return Err(PairingError::NotEnrolled.into());
    };
    if let Some(name) = &request.machine_user_name_ws {
        let holder = reads.holder?.map(|u| u.named_user);
        if holder.as_deref() != Some(device.named_user.as_str()) {
            let source = format!("workstation:{owner}");
            refuse_name_claim(state, app, name, &device.named_user, holder.as_deref(), &source).await?;
            return Err(PairingError::NameOfAnotherUser(name.clone()).into());
        }
    }
    Ok((device, enrolled))
}

/// Writes the new pairing and its login-certificate request in one transaction: the pairing,
/// or `None` when a concurrent pairing or the app's full queue won the race.
#[allow(clippy::too_many_arguments)]
async fn create(
    state: &(impl HasClock + HasSettings + HasStore),
    app: &AppId,
    owner: &str,
    request: &NewPairing,
    device: &DeviceRecord,
    enrolled: &Enrollment,
    settings: &AppRecord,
    offline_set: Option<OfflineSet>,
) -> Result<Option<Pairing>, AppError> {
    let store = state.store();
    let workstations = Workstations::new(store);
    // The agent gets the workstation name of the user from whatever mapping the server knows.
    // The user's aliases are read (beside the counter's step) only when neither the pairing nor
    // the enrollment names one (enrollments stored before the name was kept).
    let named =
        known_workstation_name(request.machine_user_name_ws.as_deref(), &enrolled.machine_user_name_ws, &[]);
    let aliases = async {
        match named {
            Some(_) => Ok(None),
            None => Devices::new(store).user(app, &device.named_user).await,
        }
    };
    let (enc_counter, user) = tokio::join!(workstations.next_enc_counter(app, &device.device_id), aliases);
    let enc_counter = enc_counter?;
    let device = PairedDevice {
        device_id: device.device_id.clone(),
        named_user: device.named_user.clone(),
        key_agreement_public_key: device.key_agreement_public_key.clone(),
    };
    let timeout = settings.workstation.request_timeout_in_secs;
    let now = state.clock().now_millis();
    let (mut pairing, mut cert_request) =
        Pairing::create(app.clone(), request, &device, owner, enc_counter, timeout, now);
    pairing.offline_set = offline_set;
    cert_request.certificate_validity_days = Some(settings.workstation.certificate_validity_days);
    cert_request.machine_user_name_ws = match named {
        Some(name) => Some(name),
        None => known_workstation_name(None, "", &user?.map(|u| u.aliases).unwrap_or_default()),
    };
    let cap = settings.open_requests_cap(state.settings().max_open_per_app);
    match workstations.pair(&pairing, &cert_request, cap, now).await {
        Ok(()) => {
            tracing::info!(app_id = %app, machine_id = %pairing.machine_id, device_id = %pairing.device_id, request_id = %cert_request.request_id, offline = pairing.offline_set.is_some(), "paired; login certificate requested");
            Ok(Some(pairing))
        }
        Err(StoreError::Conflict) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// The pairing at `key` in `app`, as the access token `viewer` may see it; with its login
/// certificate's status for its own workstation (the device's certificates are read beside the
/// pairing, and its certificate request beside the opening of its PINs).
pub async fn read(
    state: &(impl HasClock + HasKeys + HasStore),
    app: &AppId,
    viewer: &str,
    key: &PairingKey,
) -> Result<Shown, AppError> {
    let store = state.store();
    let (workstations, certs) = (Workstations::new(store), Certificates::new(store));
    let (pairing, settings, issued) = tokio::join!(
        workstations.pairing(app, &key.machine_id, &key.device_id),
        crate::apps::load_app(state, app.as_str()),
        certs.all_of_device(app, &key.device_id),
    );
    let (pairing, _) = pairing?.ok_or(PairingError::NotFound)?;
    let (settings, _) = settings?;
    // Only its own workstation is told of its certificate.
    let request_id = pairing.is_owned_by(viewer).then(|| pairing.certificate_request_id.clone());
    let certificate = async {
        let Some(request_id) = request_id else { return Ok(None) };
        let request = certs.request(&request_id).await?;
        let request = request.as_ref().map(|(r, _)| r);
        Ok::<_, AppError>(Some(certificate_status(request, &request_id, &issued?)))
    };
    let (certificate, shown) = tokio::join!(certificate, show(state, pairing, &settings, Some(viewer), None));
    Ok(Shown { certificate: certificate?, ..shown? })
}

/// Updates the pairing `update` names, for the workstation whose token is `owner`: its name, a
/// new PIN set and used PINs in one conditional write, then wrong attempts counted.
pub async fn update(
    state: &(impl HasClock + HasKeys + HasPush + HasStore),
    app: &AppId,
    owner: &str,
    update: PairingUpdate,
) -> Result<Shown, AppError> {
    let (settings, read) =
        offline::app_and_pairing(state, app, &update.machine_id, &update.device_id).await?;
    let offline_settings = &settings.workstation.offline_access;
    let now = state.clock().now_millis();
    // The pairing as read, with its version: the writes start from it, and one that loses a
    // race reads it again.
    let latest = read?;
    if update.touches_offline() {
        require_enabled(offline_settings).map_err(PairingError::from)?;
    }
    // A pairing is changed by its own workstation only: another of the app may read it (without
    // its PINs), never rename it or touch its offline access.
    let (pairing, _) = latest.as_ref().ok_or(PairingError::NotFound)?;
    pairing.require_owner(owner).map_err(PairingError::from)?;
    if update.touches_offline() {
        pairing.lock.check(now).map_err(PairingError::from)?;
    }
    // The PINs as read, opened beside the writes when the answer would open them after them:
    // the update brings none in the clear (no new set, none used) and the owner may see them.
    let ahead = match (&update.offline, update.used_token_ids.is_empty(), &pairing.offline_set) {
        (None, true, Some(set)) if pairing.hidden_because(Some(owner), offline_settings, now).is_none() => {
            Some((pairing.clone(), set.clone()))
        }
        _ => None,
    };
    let opening = async {
        let (as_read, set) = ahead?;
        Some((offline::open_pins(state, &as_read, &set).await, set))
    };
    let writing = write_update(state, app, owner, &update, latest, offline_settings, now);
    let (written, opened) = tokio::join!(writing, opening);
    let (pairing, new_set, open) = written?;
    // The PINs opened ahead serve while the pairing holds the set they were opened from; a set
    // changed meanwhile, or a failed opening, is opened (again) by `show`.
    let open = match (open, opened) {
        (Some(open), _) => Some(open),
        (None, Some((Ok(opened), set))) if pairing.offline_set.as_ref() == Some(&set) => Some(opened),
        _ => None,
    };
    tracing::info!(app_id = %app, machine_id = %pairing.machine_id, device_id = %pairing.device_id, offline = update.offline.is_some(), used = update.used_token_ids.len(), failed_attempts = update.failed_attempts, "pairing updated");
    if new_set {
        crate::push::wake_device(state, app, &pairing.device_id, WakeKind::OfflineSetup, &pairing.machine_id)
            .await;
    }
    Ok(show(state, pairing, &settings, Some(owner), open).await?)
}

/// What [`update`] writes, starting from `latest` (the pairing as read, with its version): a new
/// PIN set sealed, then the name, the set and the used PINs in one write (all of it lands or none
/// of it), then wrong attempts counted. The pairing as stored, whether a new set was written, and
/// the PINs the writes had in the clear (what the used PINs left, else the new set).
async fn write_update(
    state: &(impl HasClock + HasKeys + HasStore),
    app: &AppId,
    owner: &str,
    update: &PairingUpdate,
    mut latest: Option<(Pairing, u64)>,
    settings: &OfflineAccess,
    now: EpochMillis,
) -> Result<(Pairing, bool, Option<OpenPins>), AppError> {
    let key = PairingKey { machine_id: update.machine_id.clone(), device_id: update.device_id.clone() };
    let (new_set, mut open) = match &update.offline {
        Some(sent) => {
            Some(offline::new_set(state, app, &key.machine_id, &key.device_id, sent, settings, now).await?)
        }
        None => None,
    }
    .unzip();
    let edit = PairingEdit {
        owner: Some(owner),
        machine_name: update.machine_name.as_deref(),
        new_set: new_set.as_ref(),
        used: &update.used_token_ids,
    };
    if !edit.is_empty() {
        let (pairing, version, left) =
            offline::edit_pairing(state, app, &key, Ok(latest.take()), edit, settings).await?;
        latest = Some((pairing, version));
        open = left.or(open);
    }
    // `latest` is the pairing as stored: as read, or as the edit wrote it.
    let latest = latest.ok_or(PairingError::NotFound)?;
    let pairing = match update.failed_attempts {
        0 => latest.0,
        failed => {
            let source = format!("workstation:{owner}");
            offline::count_wrong_attempts(state, latest, failed, settings, &source).await?
        }
    };
    Ok((pairing, new_set.is_some(), open))
}

/// Unpairs the pairing at `key` in `app`: for `owner`, its own workstation's token, only its
/// own pairing; for an admin (`owner` `None`), any. `source` names the caller in the event.
pub async fn unpair(
    state: &(impl HasClock + HasStore),
    app: &AppId,
    key: &PairingKey,
    owner: Option<&str>,
    source: &str,
) -> Result<(), PairingError> {
    let workstations = Workstations::new(state.store());
    // A pairing changed meanwhile (new PINs, a renewed certificate) is read again: the unpairing
    // then revokes what it holds now.
    rp_ports::retry_on_conflict(|| async {
        let (pairing, version) = workstations
            .pairing(app, &key.machine_id, &key.device_id)
            .await?
            .ok_or(PairingError::NotFound)?;
        if let Some(owner) = owner {
            pairing.require_owner(owner).map_err(PairingError::from)?;
        }
        offline::unpair(state, pairing, version, source).await
    })
    .await
}
