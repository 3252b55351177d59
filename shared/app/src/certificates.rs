//! Certificates (DECISIONS §3): the agent's poll and its results. Revoking one now is
//! [`crate::revocation`].

use crate::{AppError, HasClock, HasPush, HasQueue, HasSettings, HasStore};
use rp_domain::apps::AppId;
use rp_domain::certificates::{
    CertError, CertRequest, CertResult, Expiry, IssuedCert, Outcome, RequestKind, RequestState, Settlement,
};
use rp_domain::messages::{lease_timeouts, LeaseRef};
use rp_domain::push::WakeKind;
use rp_domain::time::EpochMillis;
use rp_ports::metrics::{self, Metric};
use rp_ports::{retry_on_conflict_from, Cursor, Listed, StoreError};
use rp_repo::certificates::{Certificates, Effect, RenewalStart, RoundStart};
use rp_repo::workstations::Workstations;
use std::future::Future;

/// Where the agent's next poll starts: its round over the apps' pending requests, and its
/// renewal sweep over the apps' certificates.
#[derive(Debug)]
pub struct PollStart {
    round: RoundStart,
    renewal: RenewalStart,
}

/// Where the agent's next poll starts, both pointers at once: read ahead of [`poll`], beside
/// the caller's token.
pub async fn poll_start(state: &impl HasStore) -> Result<PollStart, StoreError> {
    let certs = Certificates::new(state.store());
    let (round, renewal) = tokio::try_join!(certs.round_start(), certs.renewal_start())?;
    Ok(PollStart { round, renewal })
}

/// A page of the device's issued certificates (still encrypted for it), in serial order; the
/// cursor is checked against [`Certificates::device_query`].
pub async fn of_device(
    state: &impl HasStore,
    app: &AppId,
    device_id: &str,
    limit: usize,
    cursor: Option<Cursor>,
) -> Listed<IssuedCert> {
    Certificates::new(state.store()).of_device(app, device_id, limit, cursor).await
}

/// The agent's poll: queues the renewals that are due ([`crate::renewal::sweep_from`]) and
/// leases up to a batch of pending requests, round-robin over the apps, each with a time-out
/// message on the queue; both start where `start` says the last poll ended ([`poll_start`],
/// read ahead beside the caller's token). The requests this poll leased, in the order they were
/// read.
pub async fn poll(
    state: &(impl HasClock + HasQueue + HasSettings + HasStore),
    start: Result<PollStart, StoreError>,
) -> Result<Vec<CertRequest>, AppError> {
    let certs = Certificates::new(state.store());
    let now = state.clock().now_millis();
    let PollStart { round, renewal } = start?;
    // Renewals that are due are queued beside the read of what is pending (costing the poll no
    // wait of its own); the next poll leases them.
    let ((_, swept), pending) = tokio::join!(
        crate::renewal::sweep_from(state, renewal),
        certs.pending(state.settings().poll_batch, now, round)
    );
    let (pending, round) = pending?;
    let leases: Vec<_> = pending
        .into_iter()
        .filter_map(|(request, version)| {
            let lease_id = uuid::Uuid::new_v4().to_string();
            request.lease(&lease_id, now).map(|leased| (leased, version))
        })
        .collect();
    let messages: Vec<_> = lease_timeouts(leases.iter().map(|(leased, _)| {
        let lease = LeaseRef {
            request_id: leased.request_id.clone(),
            lease_id: leased.lease_id.clone().unwrap_or_default(),
        };
        (lease, leased.lease_duration())
    }))
    .into_iter()
    .map(|(message, delay)| (message.body(), delay))
    .collect();
    // The round's end (the round-robin pointer, drained apps' markers) and the sweep's go
    // beside the messages: none waits for another, and all come before the leases.
    let send = async {
        match messages.is_empty() {
            true => Ok(()),
            false => state.queue().send_batch(&messages).await.map(drop),
        }
    };
    let (sent, ended, ()) =
        tokio::join!(send, certs.end_round(round, now), crate::renewal::end_sweep(state, swept));
    sent?;
    ended?;
    let taken = certs.persist_leases(&leases).await?;
    let leased: Vec<CertRequest> =
        leases.into_iter().zip(taken).filter(|(_, taken)| *taken).map(|((leased, _), _)| leased).collect();
    if !leased.is_empty() {
        metrics::count(Metric::Leases, leased.len() as u64, None);
    }
    let login = leased.iter().filter(|r| r.kind == RequestKind::LoginCert).count();
    tracing::info!(login, revoked = leased.len() - login, "certificate requests leased");
    Ok(leased)
}

/// What [`settle`] reads: the request a result names and the certificate of its serial.
pub type SettleRead =
    (Result<Option<(CertRequest, u64)>, StoreError>, Result<Option<(IssuedCert, u64)>, StoreError>);

/// The reads of [`settle`], for `result`; they borrow nothing of it, so that the first can go
/// beside the caller's token.
pub fn settle_reads<'s>(
    state: &'s impl HasStore,
    result: &CertResult,
) -> impl Future<Output = SettleRead> + 's {
    let (request_id, serial) = (result.request_id.clone(), result.outcome.serial().map(str::to_owned));
    let certs = Certificates::new(state.store());
    async move {
        let serial = async {
            match &serial {
                Some(serial) => certs.by_serial(serial).await,
                None => Ok(None),
            }
        };
        tokio::join!(certs.request(&request_id), serial)
    }
}

/// Stores an agent's result (the agent's token is `agent`): the request settled, what it
/// produced and its event, in one transaction conditional on the request's version. The first
/// attempt works on `first` ([`settle_reads`]); a lost race is retried, and then decides on
/// what the winner stored (the same result again is no error). A renewal's certificate then
/// replaces the one it renews ([`crate::renewal::finish`]).
pub async fn settle(
    state: &(impl HasClock + HasPush + HasSettings + HasStore),
    agent: &str,
    result: &CertResult,
    first: SettleRead,
) -> Result<(), AppError> {
    let certs = Certificates::new(state.store());
    let source = &format!("agent:{agent}");
    let now = state.clock().now_millis();
    let stored = retry_on_conflict_from(
        first,
        || settle_reads(state, result),
        |(request, cert)| async move {
            let (request, version) = request?.ok_or_else(|| CertError::RequestNotFound {
                kind: result.kind(),
                id: result.request_id.clone(),
            })?;
            match request.settle(result, source, now, state.settings().max_attempts)? {
                Settlement::Duplicate => Ok((request, false)),
                Settlement::LeaseEnded(expiry) => {
                    certs.persist_expiry(&expiry, version, now).await?;
                    Err(match expiry {
                        Expiry::Dead(..) => {
                            metrics::count(Metric::DeadRequests, 1, None);
                            CertError::Dead
                        }
                        Expiry::AlreadyDead => CertError::Dead,
                        Expiry::Requeued(_) => {
                            metrics::count(Metric::Requeued, 1, None);
                            CertError::LeaseEnded
                        }
                        Expiry::Ignored => CertError::LeaseEnded,
                    })
                }
                Settlement::Settled { request, event } => {
                    let effect = effect_of(&request, result, cert?, now)?;
                    certs.settle(&request, version, effect, &event).await?;
                    Ok((request, true))
                }
            }
        },
    )
    .await?;
    let (request, new) = stored;
    if new {
        // The device is woken beside the names being kept: a new certificate waits for it.
        let wake = async {
            if let (Outcome::Issued(_), Some(device_id)) = (&result.outcome, &request.device_id) {
                crate::push::wake_device(
                    state,
                    &request.app_id,
                    device_id,
                    WakeKind::Certificate,
                    &request.request_id,
                )
                .await;
            }
        };
        let (remembered, (), kept) = tokio::join!(
            remember_names(state, &request, result, source),
            wake,
            revoke_if_unpaired(state, &request)
        );
        remembered?;
        kept?;
        tracing::info!(request_id = %result.request_id, kind = ?result.kind(), "certificate result stored");
    } else {
        revoke_if_unpaired(state, &request).await?;
    }
    // A renewal's certificate replaces the old one; a repeated result finishes what a failed
    // first one left undone.
    crate::renewal::finish(state, &request).await?;
    Ok(())
}

/// A login certificate issued for a pairing that ended while its request waited or was leased
/// (unpaired, or its device removed) is revoked at once: the unpairing found nothing issued to
/// revoke. It runs after the result is stored, and an unpairing holds only while the request
/// is unchanged, so of the two one always sees the other. A renewal has its own
/// ([`crate::renewal::finish`]); a request from before pairings were recorded on requests has
/// no pairing to look for.
async fn revoke_if_unpaired(
    state: &(impl HasClock + HasStore),
    request: &CertRequest,
) -> Result<(), CertError> {
    let (RequestKind::LoginCert, RequestState::Done, None, Some(serial), Some(machine_id), Some(device_id)) = (
        request.kind,
        request.state,
        &request.renews,
        &request.cert_serial_number,
        &request.machine_id,
        &request.device_id,
    ) else {
        return Ok(());
    };
    let pairing = Workstations::new(state.store()).pairing(&request.app_id, machine_id, device_id).await?;
    if pairing.is_some_and(|(pairing, _)| pairing.certificate_request_id == request.request_id) {
        return Ok(());
    }
    crate::revocation::revoke_stranded(state, serial).await?;
    tracing::info!(serial = %serial, "certificate revoked: its pairing ended before it was issued");
    Ok(())
}

/// The directory's names for the user of an issued certificate, kept as one user entity. Best
/// effort: the result stands when they cannot be kept; a name of another user is refused.
async fn remember_names(
    state: &(impl HasClock + HasStore),
    request: &CertRequest,
    result: &CertResult,
    source: &str,
) -> Result<(), StoreError> {
    let (Outcome::Issued(issued), Some(user)) = (&result.outcome, &request.machine_user_name) else {
        return Ok(());
    };
    let certs = Certificates::new(state.store());
    match certs.remember_names(&request.app_id, user, &issued.machine_user_names).await {
        Ok(refused) => {
            for (name, holder) in refused {
                let (app, held_by) = (&request.app_id, Some(holder.as_str()));
                crate::enrollment::refuse_name_claim(state, app, &name, user, held_by, source).await?;
            }
        }
        Err(e) => tracing::warn!(error = %e, "could not record the user's other names"),
    }
    Ok(())
}

/// What a settled result writes besides the request: the new certificate (whose serial, found
/// as `cert`, must be new), or the revoked one (`cert`, if it exists). A certificate of this
/// very request under the serial was stored by a racing result after the request was read
/// (the two reads are not one snapshot): a conflict, so the request is read again and the
/// result is judged against what was stored (the same result is then a repeat).
fn effect_of(
    request: &CertRequest,
    result: &CertResult,
    cert: Option<(IssuedCert, u64)>,
    now: EpochMillis,
) -> Result<Effect, CertError> {
    Ok(match (&result.outcome, cert) {
        (Outcome::Failed { .. }, _) => Effect::None,
        (Outcome::Issued(_), Some((cert, _))) if cert.request_id == request.request_id => {
            return Err(StoreError::Conflict.into())
        }
        (Outcome::Issued(_), Some(_)) => return Err(CertError::SerialTaken),
        (Outcome::Issued(issued), None) => Effect::Issue(IssuedCert::new(request, issued, now)),
        (Outcome::Revoked { .. }, Some((cert, version))) => Effect::Revoke(cert.revoked(now), version),
        (Outcome::Revoked { .. }, None) => Effect::None,
    })
}
