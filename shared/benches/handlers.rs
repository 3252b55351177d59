//! The in-process router cost of every endpoint on the embedded backend, as a ratio to
//! `/health`: `cargo bench -p rp-shared --bench handlers`.
//!
//! The store is seeded with the sample fixtures (`rp-admin seed-samples`), and each sample event
//! of `events/` is parsed as the Lambda runtime parses it and sent, again and again, through its
//! function's router (criterion: 0.5 s warm-up, 20 samples). The samples change state, so after
//! the first call some answer otherwise (a device is removed, an app exists): the table
//! gives the status of the first call and of the repeated ones; the OOB start sample is repeated
//! with a fresh session nonce each time. Prints a Markdown table of
//! median times and their ratios to `/health`, flagging those above 10x.

use criterion::Criterion;
use rp_shared::backend;
use rp_shared::http::{self, AppState, HttpConfig};
use rp_shared::testing::events::{fresh_nonce, raise_rate_limit, root, samples, send};
use std::path::PathBuf;
use std::time::Duration;

fn main() {
    let home =
        std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| root().join("target"));
    let home = home.join("criterion");
    std::env::set_var("CRITERION_HOME", &home);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let backend = backend::embedded(dir.path()).unwrap();
    runtime.block_on(rp_shared::samples::seed(&backend)).expect("the samples seed");
    let mut criterion = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(1))
        .sample_size(20)
        .configure_from_args();
    let mut statuses = Vec::new();
    for sample in samples() {
        let (stem, event) = (sample.stem, sample.event);
        // Every key call is counted against the app's key budget, as on AWS, but the budget is
        // out of the loop's reach, as the customization budget is raised below.
        let settings = HttpConfig { key_calls_per_app: u32::MAX, ..HttpConfig::default() };
        let state = AppState::new(backend.clone(), settings);
        let router = http::function(&sample.function, state.clone()).expect("a router per function");
        runtime.block_on(raise_rate_limit(state));
        let first = runtime.block_on(send(&router, &event));
        let mut last = first;
        criterion.bench_function(&format!("handlers/{stem}"), |b| {
            b.iter(|| last = runtime.block_on(send(&router, &fresh_nonce(&event))));
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
