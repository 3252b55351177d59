//! Sandbox isolation between tenants: `cargo bench -p rp-shared --bench sandbox_isolation`.
//!
//! A quiet tenant runs a small customization (`sha256` and an HS256 `jwtVerify`) 1,000 times,
//! first alone, then spread over `ISOLATION_SECS` (default 60) while a hostile tenant floods
//! the sandbox from four tasks at once with each hostile script in turn:
//! - the loop that catches its own out-of-memory errors, with a 1 ms limit (the attack that
//!   once refused every tenant's runs);
//! - a loop that fills a large array, which allocates nothing and so runs far past its limit
//!   until the watchdog abandons it.
//!
//! Prints, for each: the quiet tenant's failures (target 0) and its p50/p99 run time against the
//! quiet run alone (target p99 ≤ 3×), and what the hostile tenant's runs were answered.

use rp_shared::sandbox::{self, Job, JwtSigner};
use serde_json::json;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod support;

const RUNS: usize = 1_000;

const HOSTILE: &[(&str, &str, u64)] = &[
    (
        "out-of-memory-catching loop, 1 ms limit",
        "function handler() { let a = []; while (true) { try { a.push('x'.repeat(1 << 20)); } catch (e) { a = []; } } }",
        1,
    ),
    (
        "array-filling loop (no allocation), 50 ms limit",
        "function handler() { const a = new Array(1e6).fill(0); for (;;) a.fill(1); }",
        50,
    ),
];

fn quiet_job() -> Job {
    support::small_job("quiet")
}

/// Runs the quiet job `RUNS` times, one every `pace`; the run times and the failures.
async fn quiet_runs(keys: &Arc<dyn JwtSigner>, pace: Duration) -> (Vec<Duration>, Vec<String>) {
    let job = quiet_job();
    let (mut times, mut failures) = (Vec::with_capacity(RUNS), Vec::new());
    let mut next = Instant::now();
    for _ in 0..RUNS {
        tokio::time::sleep_until(next.into()).await;
        next += pace;
        let started = Instant::now();
        let report = sandbox::run(keys.clone(), job.clone()).await;
        times.push(started.elapsed());
        if report.error.is_some() || report.result["ok"] != json!(true) {
            failures.push(format!("{:?}", report.error));
        }
    }
    (times, failures)
}

fn percentile(times: &[Duration], p: f64) -> Duration {
    let mut sorted = times.to_vec();
    sorted.sort();
    sorted[((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1]
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let secs: u64 = std::env::var("ISOLATION_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(60);
    let keys = support::signer();
    println!("cores: {}; runs per tenant at once: {}", num_cpus(), sandbox::runs_per_tenant());

    let _ = quiet_runs(&keys, Duration::ZERO).await;
    let (alone, failures) = quiet_runs(&keys, Duration::ZERO).await;
    assert!(failures.is_empty(), "{failures:?}");
    let (p50, p99) = (percentile(&alone, 0.5), percentile(&alone, 0.99));
    println!("quiet tenant alone: {RUNS} runs, p50 {p50:?}, p99 {p99:?}");
    println!();
    println!("| hostile tenant's script | quiet failures | quiet p50 | quiet p99 | p99 / alone | hostile runs: answered / timed out / refused |");
    println!("|---|---|---|---|---|---|");

    for (name, source, timeout_ms) in HOSTILE {
        let stop = Arc::new(AtomicBool::new(false));
        let flood: Vec<_> = (0..4)
            .map(|_| {
                let (keys, stop) = (keys.clone(), stop.clone());
                let job = Job {
                    tenant: "hostile".into(),
                    source: (*source).into(),
                    timeout: Duration::from_millis(*timeout_ms),
                    ..quiet_job()
                };
                tokio::spawn(async move {
                    let (mut answered, mut timed_out, mut refused) = (0, 0, 0);
                    while !stop.load(Ordering::Relaxed) {
                        let report = sandbox::run(keys.clone(), job.clone()).await;
                        match report.error.as_deref() {
                            None => answered += 1,
                            Some(e) if e.starts_with("timed out") => timed_out += 1,
                            Some(_) => {
                                refused += 1;
                                tokio::time::sleep(Duration::from_millis(1)).await;
                            }
                        }
                    }
                    (answered, timed_out, refused)
                })
            })
            .collect();
        let started = Instant::now();
        let (times, failures) = quiet_runs(&keys, Duration::from_secs(secs) / RUNS as u32).await;
        let left = Duration::from_secs(secs).saturating_sub(started.elapsed());
        tokio::time::sleep(left).await;
        stop.store(true, Ordering::Relaxed);
        let (mut answered, mut timed_out, mut refused) = (0, 0, 0);
        for task in flood {
            let (a, t, r) = task.await.unwrap();
            (answered, timed_out, refused) = (answered + a, timed_out + t, refused + r);
        }
        let (q50, q99) = (percentile(&times, 0.5), percentile(&times, 0.99));
        println!(
            "| {name} | {} of {RUNS} | {q50:.2?} | {q99:.2?} | {:.2}× | {answered} / {timed_out} / {refused} |",
            failures.len(),
            q99.as_secs_f64() / p99.as_secs_f64(),
        );
        if !failures.is_empty() {
            eprintln!("quiet failures: {:?}", &failures[..failures.len().min(5)]);
        }
        // Let abandoned runs end before the next script.
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

fn num_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}
