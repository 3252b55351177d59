//! Renewal of login certificates: a certificate in the last [`RENEWAL_WINDOW_PERCENT`] of its
//! life gets a new login-certificate request for the same pairing (one open at a time); once
//! the new certificate is stored, the pairing moves to it and the old one is revoked.
//!
//! The sweep runs in each agent poll, beside its read of the pending requests, over the
//! certificates whose renewal check is due (an index per app, ordered by that time), taking the
//! apps in turn; the next poll leases what it queued. Every step is a conditional write: two
//! polls sweeping at once queue one renewal, and a revocation (an unpairing, a removed device,
//! an admin) that reaches the old certificate first takes the new one with it.

use crate::revocation::{request_timeout, revocation_of, Revocation};
use crate::{HasClock, HasSettings, HasStore};
use rp_domain::certificates::{CertError, CertRequest, IssuedCert, RenewalStep, RequestState};
use rp_domain::time::EpochMillis;
use rp_ports::{retry_on_conflict, retry_on_conflict_from, MaybeConflict, StoreError};
use rp_repo::apps::Apps;
use rp_repo::certificates::{Certificates, RenewalStart, SweepEnd};
use rp_repo::workstations::Workstations;

pub use rp_domain::certificates::RENEWAL_WINDOW_PERCENT;

/// Certificates one sweep looks at, at most.
pub const SWEEP_BATCH: usize = 10;

/// Apps one sweep looks at, at most, taken in turn: the due certificates are shared between
/// them, so that one app's backlog (or its full queue) holds back no other app's renewals.
pub const SWEEP_APPS: usize = 10;

/// How long a certificate whose renewal cannot be queued (its request or app is gone) waits
/// before the sweep looks at it again.
const CANNOT_RENEW_RECHECK_SECS: i64 = 86_400;

/// A whole sweep: where the last one ended is read first, and where this one ends is written
/// last (a poll reads the first beside its caller's token, and writes the last beside its own
/// writes: [`sweep_from`]).
pub async fn sweep(state: &(impl HasClock + HasSettings + HasStore)) -> usize {
    let certs = Certificates::new(state.store());
    let start = match certs.renewal_start().await {
        Ok(start) => start,
        Err(e) => {
            tracing::warn!(error = %e, "could not read where the renewal sweep starts");
            return 0;
        }
    };
    let (queued, end) = sweep_from(state, start).await;
    end_sweep(state, end).await;
    queued
}

/// Writes where a sweep ended. Best effort: if it fails, the next sweep starts where this one did.
pub async fn end_sweep(state: &impl HasStore, end: SweepEnd) {
    if let Err(e) = Certificates::new(state.store()).end_sweep(end).await {
        tracing::warn!(error = %e, "could not write where the renewal sweep ended");
    }
}

/// Queues the renewals that are due, from the apps `start` names; how many it queued, and
/// where it ended (for [`end_sweep`]). Best effort: what fails is logged and looked at again by
/// a later sweep; the poll goes on.
pub async fn sweep_from(
    state: &(impl HasClock + HasSettings + HasStore),
    start: RenewalStart,
) -> (usize, SweepEnd) {
    let certs = Certificates::new(state.store());
    let now = state.clock().now_millis();
    let (due, end) = match certs.due_for_renewal(&start, SWEEP_APPS, SWEEP_BATCH, now).await {
        Ok(due) => due,
        Err(e) => {
            tracing::warn!(error = %e, "could not read the certificates due for renewal");
            return (0, SweepEnd::default());
        }
    };
    // Each certificate on its own, all at once: the poll waits for the slowest, not the sum.
    let steps = due.iter().map(|(cert, version)| renew(state, cert, *version, now));
    let mut queued = 0;
    for ((cert, _), step) in due.iter().zip(futures_util::future::join_all(steps).await) {
        match step {
            Ok(true) => queued += 1,
            Ok(false) => {}
            // Another poll, or a change to the certificate, came first: the next sweep decides
            // on what it wrote. A full queue is also a conflict.
            Err(e) if e.is_conflict() => {}
            Err(e) => {
                tracing::warn!(serial = %cert.cert_serial_number, error = %e, "certificate renewal failed")
            }
        }
    }
    (queued, end)
}

/// One due certificate's step; whether a renewal was queued.
async fn renew(
    state: &(impl HasClock + HasSettings + HasStore),
    cert: &IssuedCert,
    version: u64,
    now: EpochMillis,
) -> Result<bool, CertError> {
    let certs = Certificates::new(state.store());
    let renewal = match &cert.renewal_request_id {
        Some(id) => certs.request(id).await?.map(|(r, _)| r),
        None => None,
    };
    let max_attempts = state.settings().max_attempts;
    match cert.renewal_step(renewal.as_ref(), now) {
        RenewalStep::Done | RenewalStep::NotDue => Ok(false),
        RenewalStep::Wait => {
            let timeout = request_timeout(state, &cert.app_id).await?;
            certs.put_cert(&cert.recheck(timeout, max_attempts, now), version).await?;
            Ok(false)
        }
        RenewalStep::Finish => {
            finish(state, renewal.as_ref().expect("a finished renewal was read")).await?;
            Ok(false)
        }
        RenewalStep::Queue => {
            let store = state.store();
            let apps = Apps::new(store);
            let (original, app, open) = tokio::join!(
                certs.request(&cert.request_id),
                apps.get(&cert.app_id),
                certs.open_requests(&cert.app_id)
            );
            let (Some((original, _)), Some((app, _))) = (original?, app?) else {
                tracing::warn!(serial = %cert.cert_serial_number, "cannot renew: its request or its app is gone");
                let later = cert.check_again_at(now.plus_secs(CANNOT_RENEW_RECHECK_SECS));
                certs.put_cert(&later, version).await?;
                return Ok(false);
            };
            let cap = app.open_requests_cap(state.settings().max_open_per_app);
            if open? >= i64::from(cap) {
                // The app's queue is full: the queuing transaction would refuse, after the
                // device's counter had risen. The certificate stays due for a later sweep.
                return Ok(false);
            }
            let counter = Workstations::new(store).next_enc_counter(&cert.app_id, &cert.device_id).await?;
            let settings = &app.workstation;
            let (marked, request) = cert.queue_renewal(
                &original,
                counter,
                settings.certificate_validity_days,
                settings.request_timeout_in_secs,
                max_attempts,
                now,
            );
            certs.queue_renewal(&marked, version, &request, cap, now).await?;
            tracing::info!(app_id = %cert.app_id, serial = %cert.cert_serial_number, request_id = %request.request_id, "login certificate renewal queued");
            Ok(true)
        }
    }
}

/// What follows a renewal's issued certificate (`renewal`, DONE): the pairing moves to the new
/// certificate and the old one is revoked. If the pairing is gone, or the old certificate was
/// revoked some other way first, the new certificate is revoked too. Each step is idempotent,
/// so a repeated result finishes what a failed one left.
pub async fn finish(state: &(impl HasClock + HasStore), renewal: &CertRequest) -> Result<(), CertError> {
    let (Some(old_serial), Some(new_serial), RequestState::Done) =
        (renewal.renews.as_deref(), renewal.cert_serial_number.as_deref(), renewal.state)
    else {
        return Ok(());
    };
    let certs = Certificates::new(state.store());
    let first = certs.by_serial(old_serial).await?;
    let Some((old, _)) = &first else {
        return Ok(());
    };
    let paired = move_pairing(state, renewal, &old.request_id).await?;
    let replaced = replace(state, old_serial, new_serial, Ok(first)).await?;
    if !(paired && replaced) {
        crate::revocation::revoke_stranded(state, new_serial).await?;
        tracing::info!(serial = %new_serial, "renewed certificate revoked: its pairing or the certificate it replaced was ended first");
    }
    Ok(())
}

/// Points the renewal's pairing at it, if the pairing still points at the request of the old
/// certificate (`old_request`); whether the pairing now holds the renewal. A request from
/// before pairings were recorded on requests has no pairing to move.
async fn move_pairing(
    state: &impl HasStore,
    renewal: &CertRequest,
    old_request: &str,
) -> Result<bool, StoreError> {
    let (Some(machine_id), Some(device_id)) = (&renewal.machine_id, &renewal.device_id) else {
        return Ok(true);
    };
    let workstations = Workstations::new(state.store());
    retry_on_conflict(|| async {
        let Some((mut pairing, version)) =
            workstations.pairing(&renewal.app_id, machine_id, device_id).await?
        else {
            return Ok(false);
        };
        if pairing.certificate_request_id == old_request {
            pairing.certificate_request_id = renewal.request_id.clone();
            workstations.replace_pairing(&pairing, version).await?;
        }
        Ok(pairing.certificate_request_id == renewal.request_id)
    })
    .await
}

/// Revokes the old certificate (read first as `first`) as replaced by `new_serial`; false if
/// something else revoked it (or queued its revocation) first.
async fn replace(
    state: &(impl HasClock + HasStore),
    old_serial: &str,
    new_serial: &str,
    first: Result<Option<(IssuedCert, u64)>, StoreError>,
) -> Result<bool, CertError> {
    let certs = Certificates::new(state.store());
    retry_on_conflict_from(first, || certs.by_serial(old_serial), |read| async move {
        let Some((old, version)) = read? else {
            return Ok(true);
        };
        if old.renewed_by.as_deref() == Some(new_serial) {
            return Ok(true);
        }
        if old.is_withdrawn() || old.renewed_by.is_some() {
            return Ok(false);
        }
        let marked = IssuedCert { renewed_by: Some(new_serial.to_owned()), ..old };
        let timeout = request_timeout(state, &marked.app_id).await;
        let now = state.clock().now_millis();
        if let Revocation::Queue(request, ops) = revocation_of(certs, &marked, version, timeout, now).await? {
            state.store().transact(ops).await?;
            tracing::info!(serial = %old_serial, request_id = %request, renewed_by = %new_serial, "renewed certificate's revocation queued");
        }
        Ok(true)
    })
    .await
}
