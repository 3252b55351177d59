//! The HTTP layer: one router per endpoint path, the same code behind the local server
//! (`axum::serve`) and each Lambda function (`lambda_http::run`).

#[macro_use]
mod routing;

pub mod cc;
pub mod certificates;
pub mod code;
pub mod console;
pub mod content;
mod endpoints;
pub mod errors;
pub mod events;
pub mod extract;
pub mod health;
mod layers;
pub mod links;
pub mod no_route;
pub mod offline;
pub mod oob;
pub mod openapi;
pub mod params;
pub mod pki;
pub mod problem;
pub mod problems;
pub mod ratelimit;
pub mod registration;
pub mod routes;
mod strict_json;
pub mod wire;
pub mod workstation;

pub use endpoints::*;

use axum::response::{IntoResponse, Response};
use axum::Router;
use layers::finish;
pub use layers::time_left;
pub use rp_app::{AppState, HttpConfig};

/// The whole API, as the local server serves it, with its OpenAPI document at
/// `GET /openapi.json`. Each endpoint sees only its declared services, as its Lambda function
/// does, so a declaration that leaves out a service the endpoint calls fails here too.
pub fn app(state: AppState) -> Router {
    let all = ENDPOINTS.iter().fold(Router::new(), |acc, e| {
        let own = state.only(e.services());
        acc.merge((e.router)(&own).with_state(own))
    });
    let all = all.route("/openapi.json", axum::routing::get(openapi_json));
    let limit = state.config.body_limit;
    finish(all, state, limit)
}

async fn openapi_json() -> Response {
    ([(axum::http::header::CONTENT_TYPE, "application/json")], openapi::json()).into_response()
}

/// One endpoint's router, as its Lambda function serves it. `None` for an unknown name.
pub fn function(name: &str, state: AppState) -> Option<Router> {
    let endpoint = ENDPOINTS.iter().find(|e| e.name == name)?;
    Some(single(endpoint.router, state.only(endpoint.services())))
}

/// The router `router` makes, with what every endpoint shares. A function's `main` names its
/// router (rather than looking it up in [`ENDPOINTS`]), so that its binary links only that
/// endpoint's code.
pub fn single(router: fn(&AppState) -> Router<AppState>, state: AppState) -> Router {
    let limit = state.config.body_limit;
    finish(router(&state), state, limit)
}

/// A router that needs no backing service (`/health`), with what every endpoint shares: a
/// function serving it builds no client, and its binary links none.
pub fn stateless(router: fn(&()) -> Router<()>, config: &HttpConfig) -> Router {
    finish(router(&()), (), config.body_limit)
}
