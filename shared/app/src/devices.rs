//! Devices (DECISIONS §4): an admin's one-time registration link for a user, the device's
//! registration with it and its token, and an admin's removal of a device (its pairings, its
//! certificates and its token).

use crate::revocation::{revocation_of, Revocation};
use crate::{AppError, HasClock, HasPush, HasStore};
use futures_util::stream::{self, StreamExt, TryStreamExt};
use rp_domain::apps::AppId;
use rp_domain::certificates::{CertError, IssuedCert};
use rp_domain::devices::{
    DeviceRecord, DeviceTokenRecord, DeviceTokenRefusal, LinkRecord, LinkUse, Registration, RegistrationCode,
    RegistrationError, UserRecord, DEVICE_TOKEN_LIFETIME_SECS,
};
use rp_domain::events::DEVICE_REVOKED_EVENT;
use rp_domain::events::{attributes, EventRecord};
use rp_domain::pairing::{Pairing, PairingError};
use rp_domain::time::EpochMillis;
use rp_domain::tokens::{admitted, TokenHash, TokenSecret};
use rp_domain::validate;
use rp_ports::{retry_on_conflict, retry_on_conflict_from, StoreError};
use rp_repo::apps::AppRecord;
use rp_repo::certificates::Certificates;
use rp_repo::devices::Devices;
use rp_repo::workstations::Workstations;
use std::future::Future;

/// How many of a removed device's pairings (and then certificates) are ended at once.
pub const REMOVALS_AT_ONCE: usize = 8;

/// Default and bounds of a link's lifetime.
pub const LINK_TTL_SECS: i64 = 15 * 60;
pub const MAX_LINK_TTL_SECS: i64 = 7 * 24 * 3600;

/// Who holds an alias a link would give, when it is a valid one: read beside the caller's token.
pub type HolderRead = Option<Result<Option<UserRecord>, StoreError>>;

/// The read of [`create_link`]: who holds `alias` in `app`, if it is a valid name.
pub fn alias_holder<'s>(
    state: &'s impl HasStore,
    app: AppId,
    alias: Option<&str>,
) -> impl Future<Output = HolderRead> + 's {
    let alias =
        alias.filter(|name| validate::text("machineUserNameWS", name, 1, 255).is_ok()).map(str::to_owned);
    let devices = Devices::new(state.store());
    async move {
        match alias {
            Some(name) => Some(devices.resolve_user(&app, &name).await),
            None => None,
        }
    }
}

/// A one-time registration link of `app` for `named_user`, by the admin whose event source is
/// `source`: giving the user the workstation name `alias` (which must not be another user's;
/// its holder read ahead as `holder`, [`alias_holder`]), valid `ttl` seconds (default 15
/// minutes). The code (shown only to its creator) and the link.
pub async fn create_link(
    state: &(impl HasClock + HasStore),
    app: &AppRecord,
    source: &str,
    named_user: String,
    alias: Option<String>,
    ttl: Option<i64>,
    holder: HolderRead,
) -> Result<(RegistrationCode, LinkRecord), AppError> {
    if let Some(name) = &alias {
        validate::text("machineUserNameWS", name, 1, 255)?;
        // An alias belongs to one user.
        let holder = match holder {
            Some(read) => read?,
            None => Devices::new(state.store()).resolve_user(&app.app_id, name).await?,
        };
        if let Some(holder) = holder.filter(|u| u.named_user != named_user) {
            let held_by = Some(holder.named_user.as_str());
            crate::enrollment::refuse_name_claim(state, &app.app_id, name, &named_user, held_by, source)
                .await?;
            return Err(RegistrationError::AliasTaken(name.clone()).into());
        }
    }
    let ttl = ttl.unwrap_or(LINK_TTL_SECS);
    validate::range("expiresInSecs", ttl, 60, MAX_LINK_TTL_SECS)?;
    let now = state.clock().now_millis();
    let code = RegistrationCode::generate();
    let link = LinkRecord {
        app_id: app.app_id.clone(),
        named_user,
        machine_user_name_ws: alias,
        created_at: now,
        expires_at: now.plus_secs(ttl),
        used_at: None,
        device_id: None,
        token_id: None,
    };
    Devices::new(state.store()).create_link(&code.digest(), &link).await?;
    tracing::info!(app_id = %link.app_id, "registration link created");
    Ok((code, link))
}

/// The link a code stands for, if it can still register a device.
pub async fn usable_link(
    state: &(impl HasClock + HasStore),
    code: &RegistrationCode,
) -> Result<(LinkRecord, u64), RegistrationError> {
    let (link, version) =
        Devices::new(state.store()).link(&code.digest()).await?.ok_or(RegistrationError::LinkNotFound)?;
    link.check_usable(state.clock().now_millis())?;
    Ok((link, version))
}

/// A fresh device token for `device` of `named_user` in `app`: the secret (shown only to the
/// device) and the record of its hash.
fn new_token(
    app: &AppId,
    named_user: &str,
    device_id: &str,
    now: EpochMillis,
) -> (TokenSecret, DeviceTokenRecord) {
    let secret = TokenSecret::generate_with_prefix("rpd_");
    let hash = secret.hash();
    let token = DeviceTokenRecord {
        token_id: hash.token_id(),
        app_id: app.clone(),
        named_user: named_user.to_owned(),
        device_id: device_id.to_owned(),
        hash: hash.to_hex(),
        created_at: now,
        expires_at: Some(now.plus_secs(DEVICE_TOKEN_LIFETIME_SECS)),
        superseded_until: None,
    };
    (secret, token)
}

/// Registers the device `registration` describes with the link its code stands for (used up
/// by it): the device and its token's secret, shown only here. The same registration sent again
/// while the link is live (the reply was lost) gives the device another token in place of the
/// one it never received (`register_again`).
pub async fn register(
    state: &(impl HasClock + HasStore),
    registration: Registration,
) -> Result<(DeviceRecord, TokenSecret), RegistrationError> {
    let (link, version) = Devices::new(state.store())
        .link(&registration.code.digest())
        .await?
        .ok_or(RegistrationError::LinkNotFound)?;
    let now = state.clock().now_millis();
    if link.take(&registration.device_id, now)? == LinkUse::Again {
        return register_again(state, &registration, (link, version)).await;
    }
    let (secret, token) = new_token(&link.app_id, &link.named_user, &registration.device_id, now);
    let device = DeviceRecord {
        app_id: link.app_id.clone(),
        named_user: link.named_user.clone(),
        device_id: registration.device_id.clone(),
        friendly_name: registration.friendly_name.clone(),
        model_number: registration.model_number.clone(),
        signing_public_key: registration.signing_public_key.clone(),
        key_agreement_public_key: registration.key_agreement_public_key.clone(),
        registered_at: now,
        token_id: String::new(),
        token_ends_at: None,
        push: None,
        superseded_token_id: None,
        token_issued_at: None,
    }
    .with_token(&token);
    let devices = Devices::new(state.store());
    let digest = registration.code.digest();
    match devices.register(&digest, &link, version, &device, &token, now).await {
        Ok(()) => {}
        // Another registration with the code went first while this one was written: this one is
        // judged as sent again, so the same registration sent twice at once is told to retry
        // (as one sent again at once is) and any other finds the code used.
        Err(RegistrationError::LinkUsed) => {
            let current = devices.link(&digest).await?.ok_or(RegistrationError::LinkNotFound)?;
            return register_again(state, &registration, current).await;
        }
        Err(e) => return Err(e),
    }
    tracing::info!(app_id = %device.app_id, device_id = %device.device_id, "device registered");
    Ok((device, secret))
}

/// `registration`, sent again to the link (`first`, as read, with its version) that registered
/// its device: while the link is live, the device has the same keys and still holds the token
/// the link gave it, and is not frozen, a fresh token replaces that one (which never reached the
/// device). Else the code is used.
async fn register_again(
    state: &(impl HasClock + HasStore),
    registration: &Registration,
    first: (LinkRecord, u64),
) -> Result<(DeviceRecord, TokenSecret), RegistrationError> {
    let devices = &Devices::new(state.store());
    let digest = &registration.code.digest();
    let device_id = &registration.device_id;
    let reread = || devices.link(digest);
    let (device, secret) = retry_on_conflict_from(Ok(Some(first)), reread, |read| async move {
        let (link, link_version) = read?.ok_or(RegistrationError::LinkNotFound)?;
        let now = state.clock().now_millis();
        if link.take(device_id, now)? != LinkUse::Again {
            return Err(RegistrationError::LinkUsed);
        }
        let (app, named_user) = (&link.app_id, &link.named_user);
        let (device, frozen) = devices.device_and_freeze(app, named_user, device_id).await?;
        let (device, version) = device.filter(|_| !frozen).ok_or(RegistrationError::LinkUsed)?;
        device.registered_again(&link, registration, now)?;
        let (secret, token) = new_token(app, named_user, device_id, now);
        devices.register_again(digest, &link, link_version, &device, version, &token).await?;
        Ok::<_, RegistrationError>((device.with_token(&token), secret))
    })
    .await?;
    tracing::info!(app_id = %device.app_id, device_id = %device.device_id, "device registration sent again");
    Ok((device, secret))
}

/// The device that `presented` (admitted for a refresh, [`admit_token_for_refresh`]) belongs
/// to trades it for a fresh one: the new secret, shown only here, and its record. The device's
/// current token then works only to trade again, for a while
/// ([`rp_domain::devices::SUPERSEDED_TOKEN_GRACE_SECS`]); traded again so (the reply was lost),
/// the fresh token it got replaces the one the device never received.
pub async fn refresh_token(
    state: &(impl HasClock + HasStore),
    presented: &DeviceTokenRecord,
) -> Result<(TokenSecret, DeviceTokenRecord), RegistrationError> {
    let devices = &Devices::new(state.store());
    let (app, named_user, device_id) = (&presented.app_id, &presented.named_user, &presented.device_id);
    // Conditional on the device's version and on it not being frozen: a removal or a token's end
    // that freezes it first wins, and the refresh then finds the device gone or frozen (404).
    let (secret, token) = retry_on_conflict(|| async move {
        let (device, frozen) = devices.device_and_freeze(app, named_user, device_id).await?;
        let (device, version) =
            device.ok_or_else(|| RegistrationError::DeviceNotFound(device_id.to_owned()))?;
        let now = state.clock().now_millis();
        if frozen {
            return Err(RegistrationError::NoDeviceToken(device_id.to_owned()));
        }
        let trade = device.trade_for(presented, now)?;
        let (secret, token) = new_token(app, named_user, device_id, now);
        devices.trade_token(&device, version, &trade, &token).await?;
        Ok::<_, RegistrationError>((secret, token))
    })
    .await?;
    tracing::info!(app_id = %app, device_id = %device_id, "device token refreshed");
    Ok((secret, token))
}

/// A user's devices, each with its token if it has one (never the token's secret).
pub async fn devices_of_user(
    state: &impl HasStore,
    app: &AppId,
    named_user: &str,
) -> Result<Vec<(DeviceRecord, Option<DeviceTokenRecord>)>, StoreError> {
    Devices::new(state.store()).devices_and_tokens_of(app, named_user).await
}

/// A device as read (with its version), for a use case to start from.
pub type DeviceRead = Result<Option<(DeviceRecord, u64)>, StoreError>;

/// Reads the device `device_id` of `app`.
pub async fn device(state: &impl HasStore, app: &AppId, device_id: &str) -> DeviceRead {
    Devices::new(state.store()).device(app, device_id).await
}

/// The device token `presented` is, admitted now: `Ok(Err(_))` says why it is refused.
pub async fn admit_token(
    state: &(impl HasClock + HasStore),
    presented: &TokenHash,
) -> Result<Result<DeviceTokenRecord, DeviceTokenRefusal>, StoreError> {
    let found = Devices::new(state.store()).device_token(presented).await?;
    Ok(admitted(found, presented, state.clock().now_millis()))
}

/// The device token `presented` is, admitted now for a refresh: also the token its device
/// traded last, within the grace. `Ok(Err(_))` says why it is refused.
pub async fn admit_token_for_refresh(
    state: &(impl HasClock + HasStore),
    presented: &TokenHash,
) -> Result<Result<DeviceTokenRecord, DeviceTokenRefusal>, StoreError> {
    let found = Devices::new(state.store()).device_token(presented).await?;
    let now = state.clock().now_millis();
    Ok(found.ok_or(DeviceTokenRefusal::Invalid).and_then(|record| {
        record.admit_for_refresh(presented, now)?;
        Ok(record)
    }))
}

/// Ends the token of `device_id` in `app`, from `first` (the device and its version, read
/// ahead): a token swapped meanwhile is read again and ended, the device frozen before that read
/// so that no swap can beat the retry, and the 204 means no token of it works.
pub async fn end_token(
    state: &(impl HasClock + HasStore),
    app: &AppId,
    device_id: &str,
    first: DeviceRead,
) -> Result<(), RegistrationError> {
    let devices = &Devices::new(state.store());
    let reread = || async move {
        devices.freeze(app, device_id).await?;
        devices.device(app, device_id).await
    };
    retry_on_conflict_from(first, reread, |read| async move {
        let (device, version) =
            read?.ok_or_else(|| RegistrationError::DeviceNotFound(device_id.to_owned()))?;
        if devices.revoke_token(&device, version, state.clock().now_millis()).await? {
            Ok(())
        } else {
            Err(RegistrationError::NoDeviceToken(device_id.to_owned()))
        }
    })
    .await
}

/// What removing a device reads first: the device and its certificates.
pub type RemovalReads =
    (Result<Option<(DeviceRecord, u64)>, StoreError>, Result<Vec<IssuedCert>, StoreError>);

/// The reads of [`remove`], for `device_id` of `app`: they borrow nothing, so that they can go
/// beside the caller's token.
pub fn removal_reads<'s>(
    state: &'s impl HasStore,
    app: AppId,
    device_id: &str,
) -> impl Future<Output = RemovalReads> + 's {
    let device_id = device_id.to_owned();
    let store = state.store();
    let (devices, certs) = (Devices::new(store), Certificates::new(store));
    async move { tokio::join!(devices.device(&app, &device_id), certs.all_of_device(&app, &device_id)) }
}

/// An admin (event source `source`) removes the device `device_id` of `app`, read ahead as
/// `reads` ([`removal_reads`]): every pairing of it goes (with its certificate's revocation),
/// the device's other certificates are revoked, and its token ends.
pub async fn remove(
    state: &(impl HasClock + HasPush + HasStore),
    app: &AppRecord,
    source: &str,
    device_id: &str,
    reads: RemovalReads,
) -> Result<(), AppError> {
    let (device, issued) = reads;
    let (device, version) = device?.ok_or_else(|| PairingError::DeviceNotFound(device_id.to_owned()))?;
    // Frozen first, the device takes no new pairing; its pairings are listed after that, so the
    // list holds every one it will ever have.
    let devices = &Devices::new(state.store());
    devices.freeze(&app.app_id, device_id).await?;
    // Each pairing has its own request, certificate and event (their revocations share only the
    // app's queue marker, whose contention the store absorbs), so several go at once: a device
    // paired with hundreds of workstations is removed within the function's time-out. One that
    // fails stops the rest; the device stays frozen, and removing it again ends what is left.
    let workstations = &Workstations::new(state.store());
    let pairings = workstations.pairings_of_device(&app.app_id, device_id).await?;
    let unpair = |listed: (Pairing, u64)| async move {
        let (app_id, machine_id) = (&app.app_id, listed.0.machine_id.clone());
        let reread = || workstations.pairing(app_id, &machine_id, device_id);
        retry_on_conflict_from(Ok(Some(listed)), reread, |read| async move {
            let Some((pairing, version)) = read? else {
                return Ok(());
            };
            crate::offline::unpair(state, pairing, version, source).await
        })
        .await
    };
    stream::iter(pairings).map(unpair).buffer_unordered(REMOVALS_AT_ONCE).try_collect::<()>().await?;
    // Each is read again once every unpairing is done: unpairing has queued the revocation of
    // some.
    let timeout = app.workstation.request_timeout_in_secs;
    let revoke = |listed: IssuedCert| async move { revoke_issued(state, &listed, timeout).await };
    stream::iter(issued?).map(revoke).buffer_unordered(REMOVALS_AT_ONCE).try_collect::<()>().await?;
    let attrs = attributes(&[("deviceId", device_id), ("namedUser", &device.named_user)]);
    let now = state.clock().now_millis();
    let event = EventRecord::new(DEVICE_REVOKED_EVENT, Some(app.app_id.clone()), source, now, attrs);
    // At the version read, with the token it names then: a token swapped before the freeze above
    // makes this a conflict, and the re-read finds the last token the device will ever have (a
    // swap needs the device unfrozen). A device gone on the re-read was removed by a racing call.
    let named_user = &device.named_user;
    let reread = || devices.device_of(&app.app_id, named_user, device_id);
    let removed = retry_on_conflict_from(Ok(Some((device.clone(), version))), reread, |read| {
        let event = &event;
        async move {
            match read? {
                Some((current, version)) => {
                    devices.revoke_device(&current, version, event).await?;
                    Ok::<_, StoreError>(Some(current))
                }
                None => Ok(None),
            }
        }
    })
    .await?;
    tracing::info!(app_id = %app.app_id, device_id = %device_id, "device revoked");
    // Its push endpoint goes too (it holds the phone's push token): the one of the record
    // removed, which no registration can change since the freeze.
    if let Some(removed) = &removed {
        if let Some(push) = &removed.push {
            crate::push::forget(state, &removed.app_id, &removed.device_id, &push.endpoint).await;
        }
    }
    Ok(())
}

/// Queues the revocation of `listed` as it stands now (read again), with requests that time
/// out after `timeout` seconds; nothing for one revoked or under way already.
async fn revoke_issued(
    state: &(impl HasClock + HasStore),
    listed: &IssuedCert,
    timeout: i64,
) -> Result<(), CertError> {
    let certs = Certificates::new(state.store());
    retry_on_conflict(|| async move {
        let Some((cert, version)) =
            certs.issued(&listed.app_id, &listed.device_id, &listed.cert_serial_number).await?
        else {
            return Ok(());
        };
        let now = state.clock().now_millis();
        if let Revocation::Queue(_, ops) = revocation_of(certs, &cert, version, Ok(timeout), now).await? {
            state.store().transact(ops).await?;
        }
        Ok(())
    })
    .await
}
