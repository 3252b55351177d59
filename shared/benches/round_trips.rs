//! The round trips each endpoint's sample makes to the store, the key service and the queue:
//! `cargo bench -p rp-shared --bench round_trips`.
//!
//! The store is seeded with the sample fixtures, and every sample event of `events/` is sent
//! twice through its function's router on the embedded backend, each call of the backend held
//! for 5 ms as a network would hold it (`testing::trips`). Prints a Markdown table of each
//! sample's calls and *waves*: a call's wave is one more than the highest among the calls answered
//! before it was sent, so a request's waves are the round trips it waits for one after another.
//! On AWS each wave costs a few milliseconds, so the waves, not the in-process cost, are most of a
//! warm request's latency.

use rp_shared::backend;
use rp_shared::http::{self, AppState, HttpConfig};
use rp_shared::testing::events::{fresh_nonce, raise_rate_limit, samples, send};
use rp_shared::testing::trips::recorded;
use std::time::Duration;

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let backend = backend::embedded(dir.path()).unwrap();
    runtime.block_on(rp_shared::samples::seed(&backend)).expect("the samples seed");
    let (traced, trips) = recorded(&backend, Duration::from_millis(5));

    println!("| sample (`events/`) | status: first, again | waves: first, again | calls of the first, wave by wave |");
    println!("|---|---|---|---|");
    let mut waves = Vec::new();
    for sample in samples() {
        runtime.block_on(raise_rate_limit(AppState::new(backend.clone(), HttpConfig::default())));
        let state = AppState::new(traced.clone(), HttpConfig::default());
        let router = http::function(&sample.function, state).expect("a router per function");
        trips.take();
        let first = runtime.block_on(send(&router, &sample.event));
        let first_tally = trips.take();
        let again = runtime.block_on(send(&router, &fresh_nonce(&sample.event)));
        let again_tally = trips.take();
        println!(
            "| {} | {first}, {again} | {}, {} | {} |",
            sample.stem, first_tally.waves, again_tally.waves, first_tally
        );
        waves.push(first_tally.waves);
    }
    let total: usize = waves.iter().sum();
    waves.sort_unstable();
    let (median, max) = (waves[waves.len() / 2], waves[waves.len() - 1]);
    println!("\nwaves per first call: median {median}, max {max}, {total} over the {} samples", waves.len());
}
