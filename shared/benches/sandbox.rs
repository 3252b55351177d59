//! Code-customization run cost: `cargo bench -p rp-shared --bench sandbox`.
//!
//! A small customization that calls `sha256` and `jwtVerify` (HS256, with issuer and audience),
//! run the way a test run or the `oob.start` hook runs it: a fresh QuickJS runtime and context
//! on a thread of its own, helpers installed, the result read back as JSON. Timed against
//! `GET /health` through the in-process router on the embedded backend, in the same run; prints
//! the medians and their ratio. The target is at most 1 ms per run.

use rp_shared::backend;
use rp_shared::http::{self, AppState, HttpConfig};
use rp_shared::sandbox;
use rp_shared::testing::http::TestClient;
use std::time::{Duration, Instant};

mod support;

const ROUNDS: usize = 2_000;
const WARM_UP: usize = 50;

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

#[tokio::main]
async fn main() {
    let dir = tempfile::tempdir().unwrap();
    let keys = support::signer();
    let job = support::small_job("bench");

    let backend = backend::embedded(dir.path()).unwrap();
    let client = TestClient::new(http::app(AppState::new(backend, HttpConfig::default())));
    let (mut runs, mut health) = (Vec::with_capacity(ROUNDS), Vec::with_capacity(ROUNDS));
    for round in 0..ROUNDS + WARM_UP {
        let started = Instant::now();
        let report = sandbox::run(keys.clone(), job.clone()).await;
        let run = started.elapsed();
        assert_eq!(
            (report.error.as_deref(), report.result["ok"].as_bool()),
            (None, Some(true)),
            "{report:?}"
        );
        let started = Instant::now();
        let r = client.send("GET", "/health", None, None).await;
        let check = started.elapsed();
        assert_eq!(r.status, 200);
        if round >= WARM_UP {
            runs.push(run);
            health.push(check);
        }
    }
    let (run, health) = (median(runs), median(health));
    println!("customization run (fresh context, sha256 + jwtVerify): median {run:?} over {ROUNDS}");
    println!("GET /health through the router:                        median {health:?} over {ROUNDS}");
    println!(
        "ratio run / health: {:.1}; target per run <= 1 ms: {}",
        run.as_secs_f64() / health.as_secs_f64(),
        if run <= Duration::from_millis(1) { "met" } else { "missed" }
    );
}
