//! The certificate queue (workstation-api.md; DECISIONS §3): the enrollment agent polls for
//! pending issuance and revocation requests (each handed out under a lease) and posts results;
//! admins queue revocations by serial; a paired device fetches its issued certificates.
//!
//! Each handler parses, asks [`rp_domain::certificates`] what happens, persists that through
//! [`Certificates`] (conditionally, retried on a lost race) and answers.

use super::extract::{beside, beside_input, Admin, ApiJson, ApiPath, ApiQuery, DeviceCaller};
use super::problem::Problem;
use crate::params::ListParams;
use crate::wire::certificates::{CertificateRequestList, IssuanceResult, RevocationResult};
use axum::extract::State;
use axum::http::{request::Parts, StatusCode};
use axum::routing::{get, post};
use axum::Json;
use rp_app::AppState;
use rp_app::{certificates, revocation};
use rp_domain::certificates::{CertResult, IssuedCert, MAX_SERIAL_NUMBER};
use rp_domain::time::EpochMillis;
use rp_domain::validate;
use rp_repo::certificates::Certificates;
use serde::Serialize;

routers! { crate::routing::plain;
    /// A poll leases what it hands out: HEAD must not.
    requests_router("/rp/api/certificate/requests") = get(poll);
    issued_router("/rp/api/certificate") = post(post_issuance);
    revoked_router("/rp/api/certificate/revoke") = post(post_revocation);
    admin_revoke_router("/cc/api/certificates/{serial}/revoke") = post(queue_revocation);
    device_router("/rp/versioned/device/certificates") = get(device_certificates);
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
    // Where the poll starts (its round's and its renewal sweep's pointers) is read beside the token.
    let (_admin, start) = beside::<Admin, _>(&mut parts, &state, certificates::poll_start(&state)).await?;
    Ok(Json(certificates::poll(&state, start).await?.into()))
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
    let read = |result: &CertResult| certificates::settle_reads(state, result);
    let (admin, result, first) = beside_input::<Admin, _, _>(&mut parts, state, result, read).await?;
    certificates::settle(state, &admin.0.token_id, &result, first).await?;
    Ok(StatusCode::NO_CONTENT)
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
    // The certificate (and its app's request time-out) is read beside the token, if the path
    // names one; the token is judged first, then the path.
    let path = path.and_then(|ApiPath(serial)| {
        validate::text("certSerialNumber", &serial, 1, MAX_SERIAL_NUMBER)?;
        Ok(serial)
    });
    let read = |serial: &String| revocation::serial_read(&state, serial);
    let (_admin, serial, read) = beside_input::<Admin, _, _>(&mut parts, &state, path, read).await?;
    let request_id = revocation::revoke_serial(&state, &serial, read).await?;
    Ok((StatusCode::ACCEPTED, Json(RevocationQueued { request_id, cert_serial_number: serial })))
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
    #[schema(value_type = i64)]
    pub login_cert_expiry_date: EpochMillis,
    pub signing_cert: String,
    /// 1 or 2: how to open the envelope (docs/agent.md, "The envelope").
    pub envelope_version: u8,
    /// Version 2: the issuer's signature, checked against `signingCert`.
    pub login_cert_signature: Option<String>,
    #[serde(rename = "machineUserNameWS")]
    pub machine_user_name_ws: Option<String>,
    pub request_id: String,
    /// The counter the envelope was sealed under: the device needs it, with `requestId`, to
    /// derive the envelope keys.
    pub enc_counter: Option<String>,
    /// Revoked, or its revocation decided and queued (the agent has yet to carry it out): the
    /// device must not use it either way.
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
        let revoked = c.is_withdrawn();
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
            revoked,
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
    let (certs, next) =
        certificates::of_device(&state, &device.app_id, &device.device_id, limit, cursor).await?;
    Ok(Json(DeviceCertificates {
        certificates: certs.into_iter().map(DeviceCertificate::from).collect(),
        next_cursor: next.map(|c| c.encode()),
    }))
}
