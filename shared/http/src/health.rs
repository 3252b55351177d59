//! `GET /health`: liveness, no token.

use axum::routing::get;
use axum::{Json, Router};
use serde::Serialize;

/// Needs no state: the function serves it without a backend (`lambda::serve_stateless`), the
/// local server with its own.
pub fn router<S: Clone + Send + Sync + 'static>(_state: &S) -> Router<S> {
    Router::new().route("/health", get(health))
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Health {
    /// Always `ok`.
    pub status: &'static str,
}

#[utoipa::path(get, path = "/health", tag = "health", responses((status = 200, description = "The server is up", body = Health)))]
async fn health() -> Json<Health> {
    Json(Health { status: "ok" })
}
