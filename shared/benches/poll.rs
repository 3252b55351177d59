//! Poll latency against queue depth on the embedded backend: `cargo bench -p rp-shared --bench poll`.
//!
//! Three queues, 10, 10,000 and 100,000 pending certificate requests. Each timed poll goes through the HTTP
//! router (auth, index query, time-out messages, conditional leases) and leases 10 requests in
//! both cases, so the two measure the same work at different depths; after each poll the 10
//! leases are ended (untimed) so every poll sees the same depth. Prints the medians and their
//! ratios to the shallow queue's (target: ≤ 1.5).

use rp_shared::backend::{self, Backend};
use rp_shared::consumer::Dispatcher;
use rp_shared::domain::apps::AppId;
use rp_shared::domain::certificates::{CertRequest, RequestKind};
use rp_shared::domain::EpochMillis;
use rp_shared::http::{self, AppState, HttpConfig};
use rp_shared::repo::certificates::Certificates;
use rp_shared::testing::fixtures;
use rp_shared::testing::http::TestClient;
use std::time::{Duration, Instant};

const BATCH: usize = 10;
const ROUNDS: usize = 40;

fn request(i: usize) -> CertRequest {
    CertRequest {
        request_id: format!("bench-{i:06}"),
        machine_user_name_ws: Some(format!("CORP\\user{i}")),
        machine_user_name: Some(format!("user{i}@example.com")),
        device_id: Some(format!("device-{i}")),
        device_key_agreement_public_key: Some(DEVICE_KEY.into()),
        enc_counter: Some("1".into()),
        ..CertRequest::new(
            RequestKind::LoginCert,
            AppId::parse("appId", "bench").unwrap(),
            300,
            EpochMillis(1_000 + i as i64),
        )
    }
}

/// A P-256 point (the curve's generator), SEC1 uncompressed, base64.
const DEVICE_KEY: &str =
    "BGsX0fLhLEJH+Lzm5WOkQPJ3A32BLeszoPShOUXYmMKWT+NC4v4af5uO5+tKfA+eFivOM1drMV7Oy7ZAaDe/UfU=";

async fn setup(depth: usize) -> (tempfile::TempDir, Backend, TestClient, String) {
    let dir = tempfile::tempdir().unwrap();
    let backend = backend::embedded(dir.path()).unwrap();
    let secret = fixtures::admin_token(backend.store.as_ref(), EpochMillis(0)).await;
    let requests: Vec<_> = (0..depth).map(request).collect();
    fixtures::queue_in_bulk(backend.store.as_ref(), &requests, requests[0].created_at).await;
    let config = HttpConfig { poll_batch: BATCH, ..HttpConfig::default() };
    let client = TestClient::new(http::app(AppState::new(backend.clone(), config)));
    (dir, backend, client, secret)
}

/// Median poll latency at `depth` pending requests.
async fn measure(depth: usize) -> Duration {
    let (_dir, backend, client, token) = setup(depth).await;
    let mut samples = Vec::with_capacity(ROUNDS);
    for round in 0..ROUNDS + 3 {
        let started = Instant::now();
        let response = client.send("GET", "/rp/api/certificate/requests", Some(&token), None).await;
        let elapsed = started.elapsed();
        assert_eq!(response.status, 200);
        let leased = response.json()["loginCerts"].as_array().unwrap().clone();
        assert_eq!(leased.len(), BATCH.min(depth));
        if round >= 3 {
            samples.push(elapsed); // the first rounds warm caches
        }
        let certs = Certificates::new(backend.store.as_ref());
        let requeue = Dispatcher::new(backend.clone()).with_max_attempts(u32::MAX);
        for r in leased {
            let id = r["requestId"].as_str().unwrap();
            let (rec, _) = certs.request(id).await.unwrap().unwrap();
            requeue.lease_expired(id, rec.lease_id.as_deref().unwrap()).await.unwrap();
        }
    }
    samples.sort();
    samples[samples.len() / 2]
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let shallow = measure(10).await;
        let deep = measure(10_000).await;
        let deepest = measure(100_000).await;
        println!("poll of {BATCH} with 10 pending:      median {shallow:?} over {ROUNDS} polls");
        println!("poll of {BATCH} with 10,000 pending:  median {deep:?} over {ROUNDS} polls");
        println!("poll of {BATCH} with 100,000 pending: median {deepest:?} over {ROUNDS} polls");
        let ratio = |d: Duration| d.as_secs_f64() / shallow.as_secs_f64();
        println!("ratio 10,000 / 10:  {:.2} (target <= 1.5)", ratio(deep));
        println!("ratio 100,000 / 10: {:.2} (target <= 1.5)", ratio(deepest));
    });
}
