//! The operator console (docs/console.md): the control center as server-rendered pages at
//! `/console`, on the local server and as its own Lambda function. Everything a page shows or
//! changes goes through the application layer's use cases, under the API's authorization: a
//! global admin sees every app, a scoped admin only its own app's customizations.
//!
//! No page reaches outside this server: its style sheet and its one small script are served
//! here, under a Content-Security-Policy that allows nothing else (no inline script or style),
//! and every value is escaped by the templates.

mod apps;
pub mod auth;
mod certificates;
mod customizations;
mod events;
pub mod operator;
mod users;
pub mod view;

use crate::extract::ApiPath;
use axum::extract::State;
use axum::http::{header, request::Parts, HeaderValue};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{middleware, Router};
use rp_app::AppState;

/// What a console page may load: its own style sheet, script and images; nothing inline but
/// the SVG drawn into the page, and no frame, form target or base elsewhere.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                       connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// `/console` and every page under it.
pub fn router(_state: &AppState) -> Router<AppState> {
    Router::new()
        .route("/console", get(home))
        .route("/console/assets/{name}", get(asset))
        .route("/console/sign-in", get(auth::sign_in_page).post(auth::sign_in))
        .route("/console/sign-out", post(auth::sign_out))
        .route("/console/apps", get(apps::list).post(apps::create))
        .route("/console/apps/{app_id}", get(apps::show))
        .route("/console/apps/{app_id}/workstation", post(apps::put_workstation))
        .route("/console/apps/{app_id}/rate-limit", post(apps::put_rate_limit))
        .route("/console/tokens", get(apps::tokens).post(apps::create_token))
        .route("/console/tokens/revoke", post(apps::revoke_token))
        .route("/console/apps/{app_id}/users", get(users::show))
        .route("/console/apps/{app_id}/registration-links", post(users::create_link))
        .route("/console/apps/{app_id}/devices/remove", post(users::remove_device))
        .route("/console/apps/{app_id}/devices/end-token", post(users::end_token))
        .route("/console/apps/{app_id}/workstations", get(users::workstations))
        .route("/console/apps/{app_id}/workstations/unpair", post(users::unpair))
        .route("/console/certificates", get(certificates::show))
        .route("/console/certificates/revoke", post(certificates::revoke))
        .route("/console/events", get(events::show))
        .route(
            "/console/apps/{app_id}/content",
            get(customizations::content_list).post(customizations::content_create),
        )
        .route(
            "/console/apps/{app_id}/content/{id}",
            get(customizations::content_show).post(customizations::content_update),
        )
        .route("/console/apps/{app_id}/content/{id}/restore", post(customizations::content_restore))
        .route(
            "/console/apps/{app_id}/code",
            get(customizations::code_list).post(customizations::code_create),
        )
        .route(
            "/console/apps/{app_id}/code/{id}",
            get(customizations::code_show).post(customizations::code_update),
        )
        .route("/console/apps/{app_id}/code/{id}/restore", post(customizations::code_restore))
        .route("/console/apps/{app_id}/code/{id}/test", post(customizations::code_test))
        .layer(middleware::map_response(secure_headers))
}

/// `GET /console`: the apps for a signed-in admin, else the sign-in.
async fn home(State(state): State<AppState>, mut parts: Parts) -> Response {
    use axum::extract::FromRequestParts as _;
    match operator::Operator::from_request_parts(&mut parts, &state).await {
        Ok(_) => Redirect::to("/console/apps").into_response(),
        Err(_) => Redirect::to("/console/sign-in").into_response(),
    }
}

const STYLE: &str = include_str!("assets/console.css");
const SCRIPT: &str = include_str!("assets/console.js");

/// `GET /console/assets/{name}`: the style sheet and the script, served here.
async fn asset(ApiPath(name): ApiPath<String>) -> Response {
    let (content_type, body) = match name.as_str() {
        "console.css" => ("text/css; charset=utf-8", STYLE),
        "console.js" => ("text/javascript; charset=utf-8", SCRIPT),
        _ => {
            return crate::problem::Problem::route_not_found(&format!("/console/assets/{name}"))
                .into_response()
        }
    };
    let headers = [(header::CONTENT_TYPE, content_type), (header::CACHE_CONTROL, "no-cache")];
    (headers, body).into_response()
}

/// The headers every console answer carries: the policy above, no framing, no referrer to
/// another site (`same-origin`: a page's own forms keep their `Origin`, which the sign-in
/// checks; under `no-referrer` a browser sends `Origin: null`), no sniffing, and no caching of a
/// page (assets say their own).
async fn secure_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.entry(header::CACHE_CONTROL).or_insert(HeaderValue::from_static("no-store"));
    response
}
