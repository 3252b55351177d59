//! The baseline of `tests/bench/cold_start.py`: `GET /health` answering `{"status":"ok"}` behind
//! `lambda_http`, with nothing else, built with the workspace's versions and release profile.

use axum::routing::get;
use axum::{Json, Router};

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    let app = Router::new().route("/health", get(|| async { Json(serde_json::json!({"status": "ok"})) }));
    lambda_http::run(app).await
}
