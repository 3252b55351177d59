//! `GET /health`: liveness, no token.

use super::AppState;
use axum::routing::get;
use axum::{Json, Router};
use serde::Serialize;

pub fn router(_state: &AppState) -> Router<AppState> {
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
