//! The sample events of `events/`, sent through their functions' routers as the Lambda runtime
//! hands them over: what the handler-cost and round-trip benches drive.

use crate::http::{self, AppState};
use axum::body::Body;
use std::path::{Path, PathBuf};
use tower::ServiceExt as _;

/// The workspace's root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("shared/ sits in the workspace").to_owned()
}

/// One API Gateway sample event of `events/`.
pub struct Sample {
    /// The file's stem (`rp-enroll`, `cc-app-device.delete`).
    pub stem: String,
    /// The function it is sent to: the stem up to its first dot.
    pub function: String,
    pub event: String,
}

/// Every HTTP sample, `/health` first (the unit of the benches' ratios), then by name.
pub fn samples() -> Vec<Sample> {
    let mut all: Vec<_> = std::fs::read_dir(root().join("events"))
        .expect("events/ is readable")
        .map(|e| e.expect("events/ lists").file_name().to_string_lossy().trim_end_matches(".json").to_owned())
        // The functions that serve no endpoint: the SQS consumer, and the `$default` route's.
        .filter(|stem| stem != "cert-timeout-consumer" && stem != "no-route")
        .map(|stem| {
            let function = stem.split('.').next().unwrap_or_default().to_owned();
            let event = std::fs::read_to_string(root().join(format!("events/{stem}.json")))
                .expect("a sample event is readable");
            Sample { stem, function, event }
        })
        .collect();
    all.sort_by_key(|s| (s.stem != "health", s.stem.clone()));
    all
}

/// The OOB start sample with a new session nonce, so that sending it again starts again rather
/// than replays (a replay is refused with 409 before the hook). Other samples are sent as they are.
pub fn fresh_nonce(event: &str) -> std::borrow::Cow<'_, str> {
    const SAMPLE_NONCE: &str = "5555555555555555555555555555555555555555555555555555555555555555";
    if event.contains(SAMPLE_NONCE) {
        event.replace(SAMPLE_NONCE, &super::fixtures::nonce()).into()
    } else {
        event.into()
    }
}

/// Sends `event` through `router` as the runtime would, and answers the status.
pub async fn send(router: &axum::Router, event: &str) -> u16 {
    let request = lambda_http::request::from_str(event).expect("a sample event parses");
    let request = request.map(|body| Body::from(body.to_vec()));
    router.clone().oneshot(request).await.expect("routers are infallible").status().as_u16()
}

/// Raises the sample app's customization budget to the API's maximum (`cc-app-rate-limit`'s own
/// sample sets it back), so that a loop over the samples measures them rather than their 429.
pub async fn raise_rate_limit(state: AppState) {
    set_rate_limit(state, 100_000, 1).await;
}

/// Sets the sample app's customization budget to `limit` requests per `window_secs`.
pub async fn set_rate_limit(state: AppState, limit: i64, window_secs: i64) {
    let limit = serde_json::json!({"limit": limit, "windowSecs": window_secs}).to_string();
    let request = axum::http::Request::put(format!("/cc/api/apps/{}/rate-limit", crate::samples::APP))
        .header("authorization", format!("Bearer {}", crate::samples::ADMIN_TOKEN))
        .header("content-type", "application/json")
        .body(Body::from(limit))
        .expect("a valid request");
    let set = http::app(state).oneshot(request).await.expect("routers are infallible").status();
    assert_eq!(set, 200, "the rate limit is set");
}
