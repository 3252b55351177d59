//! `GET /health`: liveness, no token.

use super::AppState;
use axum::routing::get;
use axum::{Json, Router};
use serde::Serialize;

pub fn router(_state: &AppState) -> Router<AppState> {
    Router::new().route("/health", get(health))
}

#[derive(Debug, Serialize)]
pub struct Health {
    pub status: &'static str,
}

async fn health() -> Json<Health> {
    Json(Health { status: "ok" })
}
