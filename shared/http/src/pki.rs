//! `/rp/pki/{caId}/...`: the enrollment agent's CA certificate and CRL, public so that a domain
//! controller, a VPN or any verifier can check revocation at the URLs the login certificates
//! name; the agent publishes the CRL with its admin token.

use super::extract::{Admin, ApiJson};
use super::problem::Problem;
use crate::params::{Checked, CheckedPath};
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use rp_app::AppState;
use rp_app::HasClock;
use rp_domain::pki::{self, PublishedCrl};
use rp_domain::FieldError;
use serde::{Deserialize, Serialize};

/// The largest CRL upload: a CRL of [`pki::MAX_CRL_BYTES`] and its CA certificate, in base64.
pub const CRL_BODY_LIMIT: usize = 4 * 1024 * 1024;

routers! { takes_crl;
    crl_router("/rp/pki/{ca_id}/crl") = get(get_crl).put(put_crl);
}

fn takes_crl(router: Router<AppState>, _state: &AppState) -> Router<AppState> {
    crate::routing::body_limit(router, CRL_BODY_LIMIT)
}

routers! { crate::routing::plain;
    ca_router("/rp/pki/{ca_id}/ca.crt") = get(get_ca);
}

/// `{caId}` in a path, as [`pki::check_ca_id`] checks it.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub struct CaIdPath {
    #[param(rename = "caId", pattern = "^[0-9a-f]{16}$")]
    pub ca_id: String,
}

/// The path's `{caId}`, checked.
type CaId = Checked<CaIdPath>;

impl CheckedPath for CaIdPath {
    type Checked = String;
    fn check(self) -> Result<String, FieldError> {
        Ok(pki::check_ca_id(&self.ca_id)?.to_owned())
    }
}

/// A CRL the agent publishes, with the certificate of the CA that signed it.
#[derive(Debug, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PublishCrl {
    /// The CRL, DER, base64: signed by the CA, with a CRL number above the published one's;
    /// at most 2,800,000 bytes (about 75,000 serials).
    #[schema(format = Byte, max_length = 3_733_336)]
    pub crl: String,
    /// The CA's certificate, DER, base64: the one whose id is in the path.
    #[schema(format = Byte, max_length = 21_848)]
    pub ca_certificate: String,
}

/// What is published for a CA.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CrlView {
    pub ca_id: String,
    /// The CRL number, hex.
    pub crl_number: String,
    #[schema(format = DateTime)]
    pub this_update: String,
    #[schema(format = DateTime)]
    pub next_update: Option<String>,
}

impl From<&PublishedCrl> for CrlView {
    fn from(c: &PublishedCrl) -> Self {
        Self {
            ca_id: c.ca_id.clone(),
            crl_number: c.number_hex(),
            this_update: c.this_update.iso8601(),
            next_update: c.next_update.map(|t| t.iso8601()),
        }
    }
}

fn decoded(field: &str, text: &str) -> Result<Vec<u8>, FieldError> {
    STANDARD.decode(text).map_err(|_| FieldError::new(field, "must be base64 (DER)"))
}

/// Publishes a CRL: global admins only (the agent's token). A CRL numbered at or below the
/// published one is refused (409), unless it is the same CRL again (200).
#[utoipa::path(put, path = "/rp/pki/{caId}/crl", tag = "certificates", security(("admin" = [])), params(CaIdPath),
    request_body = PublishCrl, responses((status = 200, description = "Published (or the same CRL was already)", body = CrlView)))]
async fn put_crl(
    State(state): State<AppState>,
    _admin: Admin,
    Checked(ca_id): CaId,
    ApiJson(body): ApiJson<PublishCrl>,
) -> Result<Json<CrlView>, Problem> {
    let crl = pki::check_upload(
        &ca_id,
        decoded("caCertificate", &body.ca_certificate)?,
        decoded("crl", &body.crl)?,
    )?;
    rp_app::pki::publish(&state, &crl).await?;
    Ok(Json(CrlView::from(&crl)))
}

/// The CA's latest CRL, DER, as its login certificates' CRL distribution point names it.
#[utoipa::path(get, path = "/rp/pki/{caId}/crl", tag = "certificates", params(CaIdPath),
    responses((status = 200, description = "The CRL, DER (RFC 5280)", content_type = "application/pkix-crl", body = Vec<u8>)))]
async fn get_crl(State(state): State<AppState>, Checked(ca_id): CaId) -> Result<Response, Problem> {
    let crl = rp_app::pki::published(&state, &ca_id).await?;
    let cache = format!("public, max-age={}", crl.cache_secs(state.clock().now_millis()));
    Ok(([(header::CONTENT_TYPE, "application/pkix-crl".to_owned()), (header::CACHE_CONTROL, cache)], crl.crl)
        .into_response())
}

/// The CA's certificate, DER, as its login certificates' CA issuers URL names it.
#[utoipa::path(get, path = "/rp/pki/{caId}/ca.crt", tag = "certificates", params(CaIdPath),
    responses((status = 200, description = "The CA certificate, DER", content_type = "application/pkix-cert", body = Vec<u8>)))]
async fn get_ca(State(state): State<AppState>, Checked(ca_id): CaId) -> Result<Response, Problem> {
    let crl = rp_app::pki::published(&state, &ca_id).await?;
    let headers =
        [(header::CONTENT_TYPE, "application/pkix-cert"), (header::CACHE_CONTROL, "public, max-age=86400")];
    Ok((headers, crl.ca_certificate).into_response())
}
