//! The certificate queue (workstation-api.md; DECISIONS §3): the enrollment agent polls for
//! pending issuance and revocation requests (each handed out under a lease) and posts results;
//! admins queue revocations by serial; a paired device fetches its issued certificates.
//!
//! Each handler parses, asks [`rp_domain::certificates`] what happens, persists that through
//! [`Certificates`] (conditionally, retried on a lost race) and answers.

use super::extract::{beside, beside_input, Admin, ApiJson, ApiPath, ApiQuery, DeviceCaller};
use super::problem::Problem;
use super::AppState;
use crate::params::ListParams;
use axum::extract::State;
use axum::http::{request::Parts, StatusCode};
use axum::routing::{get, post};
use axum::{Json, Router};
use rp_app::certificates::{request_timeout, revocation_of, Revocation};
use rp_domain::apps::AppId;
use rp_domain::certificates::{
    CertError, CertRequest, CertResult, CertificateRequestList, Expiry, IssuanceResult, IssuedCert, Outcome,
    RevocationResult, Settlement, MAX_SERIAL_NUMBER,
};
use rp_domain::messages::{lease_timeouts, LeaseRef};
use rp_domain::time::EpochMillis;
use rp_domain::validate;
use rp_ports::metrics::{self, Metric};
use rp_ports::retry_on_conflict_from;
use rp_repo::certificates::{Certificates, Effect};
use serde::Serialize;

/// `/rp/api/certificate/requests`
pub fn requests_router(_state: &AppState) -> Router<AppState> {
    // A poll leases what it hands out: HEAD must not.
    Router::new().route("/rp/api/certificate/requests", get(poll).head(super::head_refused))
}

/// `/rp/api/certificate`
pub fn issued_router(_state: &AppState) -> Router<AppState> {
    Router::new().route("/rp/api/certificate", post(post_issuance))
}

/// `/rp/api/certificate/revoke`
pub fn revoked_router(_state: &AppState) -> Router<AppState> {
    Router::new().route("/rp/api/certificate/revoke", post(post_revocation))
}

/// `/cc/api/certificates/{certSerialNumber}/revoke`
pub fn admin_revoke_router(_state: &AppState) -> Router<AppState> {
    Router::new().route("/cc/api/certificates/{serial}/revoke", post(queue_revocation))
}

/// `/rp/versioned/device/certificates`
pub fn device_router(_state: &AppState) -> Router<AppState> {
    Router::new().route("/rp/versioned/device/certificates", get(device_certificates))
}

/// Hands out up to a batch of pending requests, each leased with a conditional write (all of
/// a poll's at once). The
/// lease's time-out message is sent first, so no lease exists without the message that ends it
/// (a message for a lease that lost its race is a no-op).
#[utoipa::path(get, path = "/rp/api/certificate/requests", tag = "certificates", security(("admin" = [])),
    responses((status = 200, description = "The requests this poll leased; both arrays empty when none is pending", body = CertificateRequestList)))]
async fn poll(
    State(state): State<AppState>,
    mut parts: Parts,
) -> Result<Json<CertificateRequestList>, Problem> {
    let certs = Certificates::new(state.backend.store.as_ref());
    // Where the round starts is read beside the token.
    let (_admin, start) = beside::<Admin, _>(&mut parts, &state, certs.round_start()).await?;
    let now = state.backend.clock.now_millis();
    let (pending, round) = certs.pending(state.config.poll_batch, now, start?).await?;
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
    // The round's end (the round-robin pointer, drained apps' markers) goes beside the
    // messages: neither waits for the other, and both come before the leases.
    let send = async {
        if messages.is_empty() {
            return Ok(());
        }
        state.backend.queue.send_batch(&messages).await.map(drop)
    };
    let (sent, ended) = tokio::join!(send, certs.end_round(round, now));
    sent?;
    ended?;
    let mut list = CertificateRequestList::default();
    let taken = certs.persist_leases(&leases).await?;
    for ((leased, _), taken) in leases.iter().zip(taken) {
        if taken {
            list.push(leased);
        }
    }
    let leased = list.login_certs.len() + list.revoked_certs.len();
    if leased > 0 {
        metrics::count(Metric::Leases, leased as u64, None);
    }
    tracing::info!(
        login = list.login_certs.len(),
        revoked = list.revoked_certs.len(),
        "certificate requests leased"
    );
    Ok(Json(list))
}

#[utoipa::path(post, path = "/rp/api/certificate", tag = "certificates", security(("admin" = [])), request_body = IssuanceResult,
    responses((status = 204, description = "Stored (or stored already: a retry is answered the same)")))]
async fn post_issuance(
    State(state): State<AppState>,
    parts: Parts,
    body: Result<ApiJson<IssuanceResult>, Problem>,
) -> Result<StatusCode, Problem> {
    settle(&state, parts, body.and_then(|ApiJson(body)| Ok(CertResult::try_from(body)?))).await
}

#[utoipa::path(post, path = "/rp/api/certificate/revoke", tag = "certificates", security(("admin" = [])), request_body = RevocationResult,
    responses((status = 204, description = "Stored (or stored already: a retry is answered the same)")))]
async fn post_revocation(
    State(state): State<AppState>,
    parts: Parts,
    body: Result<ApiJson<RevocationResult>, Problem>,
) -> Result<StatusCode, Problem> {
    settle(&state, parts, body.and_then(|ApiJson(body)| Ok(CertResult::try_from(body)?))).await
}

/// Stores a result: the request settled, what it produced and its event, in one transaction
/// conditional on the request's version. A lost race is retried, and then decides on what the
/// winner stored (the same result again is a 204). The request and the certificate the result
/// names are read at once, the first time beside the token.
async fn settle(
    state: &AppState,
    mut parts: Parts,
    result: Result<CertResult, Problem>,
) -> Result<StatusCode, Problem> {
    let certs = Certificates::new(state.backend.store.as_ref());
    let read = |result: &CertResult| {
        let (request_id, serial) = (result.request_id.clone(), result.outcome.serial().map(str::to_owned));
        async move {
            let serial = async {
                match &serial {
                    Some(serial) => certs.by_serial(serial).await,
                    None => Ok(None),
                }
            };
            tokio::join!(certs.request(&request_id), serial)
        }
    };
    let (admin, result, first) = beside_input::<Admin, _, _>(&mut parts, state, result, read).await?;
    let source = format!("agent:{}", admin.0.token_id);
    let now = state.backend.clock.now_millis();
    let (result, source) = (&result, source.as_str());
    let stored = retry_on_conflict_from(
        first,
        || read(result),
        |(request, cert)| async move {
            let (request, version) = request?.ok_or_else(|| CertError::RequestNotFound {
                kind: result.kind(),
                id: result.request_id.clone(),
            })?;
            match request.settle(result, source, now, state.config.max_attempts)? {
                Settlement::Duplicate => Ok(None),
                Settlement::LeaseEnded(expiry) => {
                    certs.persist_expiry(&expiry, version, now).await?;
                    match expiry {
                        Expiry::Dead(..) => {
                            metrics::count(Metric::DeadRequests, 1, None);
                            Err(CertError::Dead)
                        }
                        Expiry::Requeued(_) => {
                            metrics::count(Metric::Requeued, 1, None);
                            Err(CertError::LeaseEnded)
                        }
                        Expiry::Ignored => Err(CertError::LeaseEnded),
                    }
                }
                Settlement::Settled { request, event } => {
                    let effect = effect_of(&request, result, cert?, now)?;
                    certs.settle(&request, version, effect, &event).await?;
                    Ok(Some(request))
                }
            }
        },
    )
    .await?;
    if let Some(request) = stored {
        if let (Outcome::Issued(issued), Some(user)) = (&result.outcome, &request.machine_user_name) {
            // The directory's names for the user: one user entity. Best effort; the result stands.
            match certs.remember_names(&request.app_id, user, &issued.machine_user_names).await {
                Ok(refused) => {
                    for (name, holder) in refused {
                        let (app, held_by) = (&request.app_id, Some(holder.as_str()));
                        rp_app::enrollment::refuse_name_claim(state, app, &name, user, held_by, source)
                            .await?;
                    }
                }
                Err(e) => tracing::warn!(error = %e, "could not record the user's other names"),
            }
        }
        tracing::info!(request_id = %result.request_id, kind = ?result.kind(), "certificate result stored");
    }
    Ok(StatusCode::NO_CONTENT)
}

/// What a settled result writes besides the request: the new certificate (whose serial, found
/// as `cert`, must be new), or the revoked one (`cert`, if it exists).
fn effect_of(
    request: &CertRequest,
    result: &CertResult,
    cert: Option<(IssuedCert, u64)>,
    now: EpochMillis,
) -> Result<Effect, CertError> {
    Ok(match (&result.outcome, cert) {
        (Outcome::Failed { .. }, _) => Effect::None,
        (Outcome::Issued(_), Some(_)) => return Err(CertError::SerialTaken),
        (Outcome::Issued(issued), None) => Effect::Issue(IssuedCert::new(request, issued, now)),
        (Outcome::Revoked { .. }, Some((cert, version))) => Effect::Revoke(cert.revoked(now), version),
        (Outcome::Revoked { .. }, None) => Effect::None,
    })
}

/// The answer of an admin revocation: the queued request.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RevocationQueued {
    pub request_id: String,
    pub cert_serial_number: String,
}

#[utoipa::path(post, path = "/cc/api/certificates/{certSerialNumber}/revoke", tag = "certificates", security(("admin" = [])),
    params(("certSerialNumber" = String, Path, min_length = 1, max_length = 128)),
    responses((status = 202, description = "A revocation request is queued (or was under way already)", body = RevocationQueued)))]
async fn queue_revocation(
    State(state): State<AppState>,
    mut parts: Parts,
    path: Result<ApiPath<String>, Problem>,
) -> Result<(StatusCode, Json<RevocationQueued>), Problem> {
    let certs = Certificates::new(state.backend.store.as_ref());
    // The certificate is read beside the token, if the path names one; the token is judged
    // first, then the path.
    let path = path.and_then(|ApiPath(serial)| {
        validate::text("certSerialNumber", &serial, 1, MAX_SERIAL_NUMBER)?;
        Ok(serial)
    });
    // The app's request time-out is read beside the certificate, whose key names the app.
    let state = &state;
    let timeout = |app: AppId| async move { request_timeout(state, &app).await };
    let read = |serial: &String| {
        let serial = serial.clone();
        async move { certs.by_serial_beside(&serial, timeout).await }
    };
    let (_admin, serial, read) = beside_input::<Admin, _, _>(&mut parts, state, path, read).await?;
    let serial = &serial;
    let reread = || certs.by_serial_beside(serial, timeout);
    let request_id = retry_on_conflict_from(read, reread, |read| async move {
        let (cert, version, timeout) = read?.ok_or_else(|| CertError::CertNotFound(serial.clone()))?;
        if cert.revoked_at.is_some() {
            return Err(CertError::AlreadyRevoked(serial.clone()));
        }
        match revocation_of(certs, &cert, version, timeout, state.backend.clock.now_millis()).await? {
            Revocation::UnderWay(pending) => Ok(pending),
            Revocation::Queue(request, ops) => {
                state.backend.store.transact(ops).await?;
                tracing::info!(request_id = %request, "revocation queued");
                Ok(request)
            }
            Revocation::Revoked => Err(CertError::AlreadyRevoked(serial.clone())),
        }
    })
    .await?;
    Ok((StatusCode::ACCEPTED, Json(RevocationQueued { request_id, cert_serial_number: serial.clone() })))
}

/// One of the device's certificates, still encrypted for it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeviceCertificate {
    pub cert_serial_number: String,
    pub login_cert: String,
    pub iv_login_cert: String,
    pub login_cert_auth: String,
    pub issuer_key_agreement_public_key: String,
    pub issuer_key_agreement_public_key_auth: String,
    pub login_cert_expiry_date: EpochMillis,
    pub signing_cert: String,
    /// 1 or 2: how to open the envelope (README, "The envelope").
    pub envelope_version: u8,
    /// Version 2: the issuer's signature, checked against `signingCert`.
    pub login_cert_signature: Option<String>,
    #[serde(rename = "machineUserNameWS")]
    pub machine_user_name_ws: Option<String>,
    pub request_id: String,
    /// The counter the envelope was sealed under: the device needs it, with `requestId`, to
    /// derive the envelope keys.
    pub enc_counter: Option<String>,
    pub revoked: bool,
}

/// A page of the device's certificates; `nextCursor` is `null` on the last.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeviceCertificates {
    pub certificates: Vec<DeviceCertificate>,
    pub next_cursor: Option<String>,
}

impl From<IssuedCert> for DeviceCertificate {
    fn from(c: IssuedCert) -> Self {
        Self {
            cert_serial_number: c.cert_serial_number,
            login_cert: c.login_cert,
            iv_login_cert: c.iv_login_cert,
            login_cert_auth: c.login_cert_auth,
            issuer_key_agreement_public_key: c.issuer_key_agreement_public_key,
            issuer_key_agreement_public_key_auth: c.issuer_key_agreement_public_key_auth,
            login_cert_expiry_date: c.login_cert_expiry_date,
            signing_cert: c.signing_cert,
            envelope_version: c.envelope_version,
            login_cert_signature: c.login_cert_signature,
            machine_user_name_ws: c.machine_user_name_ws,
            request_id: c.request_id,
            enc_counter: c.enc_counter,
            revoked: c.revoked_at.is_some(),
        }
    }
}

/// The device's issued certificates, still encrypted for it.
#[utoipa::path(get, path = "/rp/versioned/device/certificates", tag = "certificates", security(("device" = [])), params(ListParams),
    responses((status = 200, description = "A page of the device's certificates, encrypted for it", body = DeviceCertificates)))]
async fn device_certificates(
    State(state): State<AppState>,
    device: DeviceCaller,
    ApiQuery(params): ApiQuery<ListParams>,
) -> Result<Json<DeviceCertificates>, super::problem::Problem> {
    let (limit, cursor) = params.page(&Certificates::device_query(&device.app_id, &device.device_id))?;
    let (certs, next) = Certificates::new(state.backend.store.as_ref())
        .of_device(&device.app_id, &device.device_id, limit, cursor)
        .await?;
    Ok(Json(DeviceCertificates {
        certificates: certs.into_iter().map(DeviceCertificate::from).collect(),
        next_cursor: next.map(|c| c.encode()),
    }))
}
