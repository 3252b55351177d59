//! Certificates: the time-out of an app's requests, and how a certificate is revoked now.

use crate::AppState;
use rp_domain::apps::{AppId, WorkstationSettings};
use rp_domain::certificates::{CertError, IssuedCert, RequestState};
use rp_domain::time::EpochMillis;
use rp_ports::StoreError;
use rp_repo::apps::Apps;
use rp_repo::certificates::{revocation_ops, Certificates};

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
pub async fn request_timeout(state: &AppState, app: &AppId) -> Result<i64, StoreError> {
    Ok(Apps::new(state.backend.store.as_ref())
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
