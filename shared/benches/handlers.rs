//! The in-process router cost of every endpoint on the embedded backend, as a ratio to
//! `/health`: `cargo bench -p rp-shared --bench handlers`.
//!
//! The store is seeded with the sample fixtures (`rp-admin seed-samples`), and each sample event
//! of `events/` is parsed as the Lambda runtime parses it and sent, again and again, through its
//! function's router (criterion: 0.5 s warm-up, 20 samples). The samples change state, so after
//! the first call some answer otherwise (a registration code is used, an app exists): the table
//! gives the status of the first call and of the repeated ones; the OOB start sample is repeated
//! with a fresh session nonce each time. Prints a Markdown table of
//! median times and their ratios to `/health`, flagging those above 10x.

use criterion::Criterion;
use rp_shared::backend::Backend;
use rp_shared::http::{self, AppState, HttpConfig};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tower::ServiceExt as _;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_owned()
}

/// Every HTTP sample event: (file stem, function).
fn samples() -> Vec<(String, String)> {
    let mut all: Vec<_> = std::fs::read_dir(root().join("events"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().trim_end_matches(".json").to_owned())
        .filter(|stem| stem != "cert-timeout-consumer")
        .map(|stem| {
            let function = stem.split('.').next().unwrap().to_owned();
            (stem, function)
        })
        .collect();
    // `/health` first: the unit of the table.
    all.sort_by_key(|(stem, _)| (stem != "health", stem.clone()));
    all
}

/// The OOB start sample with a new session nonce: the loop then measures starts, hook run and
/// all, rather than replays (refused with 409 before the hook). Other samples are sent as they are.
fn fresh_nonce(event: &str) -> std::borrow::Cow<'_, str> {
    const SAMPLE_NONCE: &str = "5555555555555555555555555555555555555555555555555555555555555555";
    if event.contains(SAMPLE_NONCE) {
        event.replace(SAMPLE_NONCE, &rp_shared::testing::fixtures::nonce()).into()
    } else {
        event.into()
    }
}

async fn call(router: &axum::Router, event: &str) -> u16 {
    let request = lambda_http::request::from_str(event).expect("a sample event parses");
    let request = request.map(|body| axum::body::Body::from(body.to_vec()));
    router.clone().oneshot(request).await.expect("routers are infallible").status().as_u16()
}

fn main() {
    let home =
        std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| root().join("target"));
    let home = home.join("criterion");
    std::env::set_var("CRITERION_HOME", &home);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let backend = Backend::embedded(dir.path()).unwrap();
    runtime.block_on(rp_shared::samples::seed(&backend)).expect("the samples seed");
    // The customization APIs' budget, raised before each sample (the `cc-app-rate-limit` one
    // sets its own) so that the loop measures the customizations, not their 429.
    let app = http::app(AppState::new(backend.clone(), HttpConfig::default()));
    let raise = || {
        let limit = serde_json::json!({"limit": 100_000, "windowSecs": 1}).to_string();
        let request =
            axum::http::Request::put(format!("/cc/api/apps/{}/rate-limit", rp_shared::samples::APP))
                .header("authorization", format!("Bearer {}", rp_shared::samples::ADMIN_TOKEN))
                .header("content-type", "application/json")
                .body(axum::body::Body::from(limit))
                .unwrap();
        let raised = runtime.block_on(app.clone().oneshot(request)).unwrap().status();
        assert_eq!(raised, 200, "the rate limit is raised");
    };

    let mut criterion = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(1))
        .sample_size(20)
        .configure_from_args();
    let mut statuses = Vec::new();
    for (stem, function) in samples() {
        let event = std::fs::read_to_string(root().join(format!("events/{stem}.json"))).unwrap();
        let state = AppState::new(backend.clone(), HttpConfig::default());
        let router = http::function(&function, state).expect("a router per function");
        raise();
        let first = runtime.block_on(call(&router, &event));
        let mut last = first;
        criterion.bench_function(&format!("handlers/{stem}"), |b| {
            b.iter(|| last = runtime.block_on(call(&router, &fresh_nonce(&event))));
        });
        statuses.push((stem, first, last));
    }
    criterion.final_summary();

    let median = |stem: &str| -> f64 {
        let path = home.join(format!("handlers_{stem}/new/estimates.json"));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let estimates: serde_json::Value = serde_json::from_str(&text).unwrap();
        estimates["median"]["point_estimate"].as_f64().unwrap()
    };
    let health = median("health");
    println!("\n| sample (`events/`) | status: first, repeated | median | × /health |");
    println!("|---|---|---|---|");
    for (stem, first, last) in statuses {
        let ns = median(&stem);
        let ratio = ns / health;
        let flag = if ratio > 10.0 { " **>10×**" } else { "" };
        println!("| {stem} | {first}, {last} | {:.1} µs | {ratio:.1}{flag} |", ns / 1000.0);
    }
}
