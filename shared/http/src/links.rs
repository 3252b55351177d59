//! Registration links as a page shows them (the registration page and the console's): the URL a
//! code opens, and its QR code.

use super::problem::Problem;
use axum::http::{header, HeaderMap};
use rp_app::AppState;

/// The base URL links point at: the configured one, else the request's own host.
fn base_url(state: &AppState, headers: &HeaderMap) -> String {
    if !state.config.public_base_url.is_empty() {
        return state.config.public_base_url.trim_end_matches('/').to_owned();
    }
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok()).unwrap_or("localhost");
    let proto = headers.get("x-forwarded-proto").and_then(|v| v.to_str().ok()).unwrap_or("https");
    format!("{proto}://{host}")
}

/// The URL registration code `code` opens.
pub fn registration_url(state: &AppState, headers: &HeaderMap, code: &str) -> String {
    format!("{}/rp/register/{code}", base_url(state, headers))
}

/// `url` as a QR code: an SVG element, drawn here (nothing of it is the request's text).
pub fn qr_svg(url: &str) -> Result<String, Problem> {
    let qr = qrcode::QrCode::new(url.as_bytes()).map_err(Problem::internal)?;
    Ok(qr.render::<qrcode::render::svg::Color>().min_dimensions(240, 240).quiet_zone(true).build())
}
