//! Revoking a certificate now (DECISIONS §3): what it takes, the time-out of the request it
//! queues, and an admin's revocation by serial. Pairing removal, offline lock-out, device
//! revocation and renewal all revoke through here.

use crate::{HasClock, HasStore};
use rp_domain::apps::{AppId, WorkstationSettings};
use rp_domain::certificates::{CertError, IssuedCert, RequestState};
use rp_domain::time::EpochMillis;
use rp_ports::{retry_on_conflict_from, StoreError};
use rp_repo::apps::Apps;
use rp_repo::certificates::{revocation_ops, Certificates};
use std::future::Future;

/// What revoking a certificate takes now.
pub enum Revocation {
    /// It is revoked already.
    Revoked,
    /// A revocation request is under way: this one.
    UnderWay(String),
    /// Queue this new request with these writes (to join a transaction of the caller's).
    Queue(String, Vec<rp_ports::WriteOp>),
}

/// The request time-out of `app`'s certificate requests: its settings', or the default for an
/// app that is gone.
pub async fn request_timeout(state: &impl HasStore, app: &AppId) -> Result<i64, StoreError> {
    Ok(Apps::new(state.store())
        .get(app)
        .await?
        .map_or(WorkstationSettings::default().request_timeout_in_secs, |(app, _)| {
            app.workstation.request_timeout_in_secs
        }))
}

/// How to revoke `cert` (read at `version`) at `now`, with a request that times out after
/// `timeout` seconds (the app's [`request_timeout`], as its caller read it; its failure counts
/// only if a request is queued): a revocation under way is answered again; one that failed or
/// died is queued anew.
pub async fn revocation_of(
    certs: Certificates<'_>,
    cert: &IssuedCert,
    version: u64,
    timeout: Result<i64, StoreError>,
    now: EpochMillis,
) -> Result<Revocation, CertError> {
    if cert.revoked_at.is_some() {
        return Ok(Revocation::Revoked);
    }
    if let Some(pending) = &cert.revocation_request_id {
        let live = certs
            .request(pending)
            .await?
            .is_some_and(|(r, _)| !matches!(r.state, RequestState::Failed | RequestState::Dead));
        if live {
            return Ok(Revocation::UnderWay(pending.clone()));
        }
    }
    let (marked, request) = cert.queue_revocation(timeout?, now)?;
    Ok(Revocation::Queue(request.request_id.clone(), revocation_ops(&marked, version, &request)?))
}

/// The certificate of a serial, with its app's request time-out read beside it.
pub type SerialRead = Result<Option<(IssuedCert, u64, Result<i64, StoreError>)>, StoreError>;

/// The read of [`revoke_serial`], for `serial`; it borrows nothing of it, so that the first can
/// go beside the caller's token.
pub fn serial_read<'s>(state: &'s impl HasStore, serial: &str) -> impl Future<Output = SerialRead> + 's {
    let serial = serial.to_owned();
    let certs = Certificates::new(state.store());
    async move {
        let timeout = |app: AppId| async move { request_timeout(state, &app).await };
        certs.by_serial_beside(&serial, timeout).await
    }
}

/// Revokes the certificate `serial` that must not stay valid (its pairing or the certificate
/// it renews was ended first): queued unless it is revoked already or its revocation is under way.
pub async fn revoke_stranded(state: &(impl HasClock + HasStore), serial: &str) -> Result<(), CertError> {
    match revoke_serial(state, serial, serial_read(state, serial).await).await {
        Ok(_) | Err(CertError::AlreadyRevoked(_)) => Ok(()),
        Err(e) => Err(e),
    }
}

/// An admin's revocation of the certificate `serial` (read first as `first`,
/// [`serial_read`]): the queued request's id, or the id of the one under way already.
pub async fn revoke_serial(
    state: &(impl HasClock + HasStore),
    serial: &str,
    first: SerialRead,
) -> Result<String, CertError> {
    let certs = Certificates::new(state.store());
    retry_on_conflict_from(
        first,
        || serial_read(state, serial),
        |read| async move {
            let (cert, version, timeout) = read?.ok_or_else(|| CertError::CertNotFound(serial.to_owned()))?;
            if cert.revoked_at.is_some() {
                return Err(CertError::AlreadyRevoked(serial.to_owned()));
            }
            match revocation_of(certs, &cert, version, timeout, state.clock().now_millis()).await? {
                Revocation::UnderWay(pending) => Ok(pending),
                Revocation::Queue(request, ops) => {
                    state.store().transact(ops).await?;
                    tracing::info!(request_id = %request, "revocation queued");
                    Ok(request)
                }
                Revocation::Revoked => Err(CertError::AlreadyRevoked(serial.to_owned())),
            }
        },
    )
    .await
}
