//! A Lambda function whose `/panic` route panics, served through the real front door
//! (`lambda::serve`, with every endpoint's layers). `tests/tests/release_panic.rs` runs it: a
//! profile that unwinds, as the release profile must, lets the catch-panic layer answer a
//! problem+json 500 and the process serve the next invocation (`panic = "abort"` would end it).

use axum::routing::get;
use axum::Router;
use rp_shared::http::AppState;

async fn boom() -> &'static str {
    panic!("a handler panicked on purpose")
}

fn router(state: &AppState) -> Router<AppState> {
    rp_shared::http::health::router(state).route("/panic", get(boom))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    rp_shared::lambda::serve(router, rp_shared::lambda::ClientSet::STORE).await
}
