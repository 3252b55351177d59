//! How fast polls lease: `cargo bench -p rp-shared --bench leases`.
//!
//! 1. **Drain** (embedded backend): 8 concurrent pollers drain 400 pending requests through the
//!    in-process router (batch 50). Once with a poll's leases written one conditional put after
//!    another (how polls leased before `put_each`), once as the server does now (all of a poll's
//!    leases in one write transaction). Prints leases per second for each, and the speed-up.
//! 2. **Batch latency** (DynamoDB, when an emulator endpoint is set as for the AWS test suites,
//!    else skipped, saying so): a poll leasing 50 requests against one leasing 1, medians over
//!    20 polls each. A poll's leases go out in one `TransactWriteItems` and their time-outs in
//!    one SQS message; docs/performance.md's target for the ratio is 3 or less.

use async_trait::async_trait;
use rp_shared::backend::{self, Backend};
use rp_shared::domain::apps::AppId;
use rp_shared::domain::certificates::{CertRequest, RequestKind};
use rp_shared::domain::EpochMillis;
use rp_shared::http::{self, AppState, HttpConfig};
use rp_shared::ports::*;
use rp_shared::testing::fixtures;
use rp_shared::testing::http::TestClient;
use std::sync::Arc;
use std::time::{Duration, Instant};

const PENDING: usize = 400;
const POLLERS: usize = 8;

/// The store with `put_each` as separate puts, one after another: how a poll leased before.
struct OneByOne(Arc<dyn ItemStore>);

#[async_trait]
impl ItemStore for OneByOne {
    fn kind(&self) -> &'static str {
        self.0.kind()
    }
    async fn get(&self, key: &ItemKey) -> Result<Option<Item>, StoreError> {
        self.0.get(key).await
    }
    async fn put(&self, item: Item, condition: Condition) -> Result<Item, StoreError> {
        self.0.put(item, condition).await
    }
    async fn delete(&self, key: &ItemKey, condition: Condition) -> Result<(), StoreError> {
        self.0.delete(key, condition).await
    }
    async fn transact(&self, ops: Vec<WriteOp>) -> Result<(), StoreError> {
        self.0.transact(ops).await
    }
    async fn query(&self, query: Query) -> Result<Page, StoreError> {
        self.0.query(query).await
    }
    async fn increment(&self, increment: Increment) -> Result<i64, StoreError> {
        self.0.increment(increment).await
    }
    async fn put_each(&self, puts: Vec<(Item, Condition)>) -> Vec<Result<Item, StoreError>> {
        let mut outcomes = Vec::with_capacity(puts.len());
        for (item, condition) in puts {
            outcomes.push(self.0.put(item, condition).await);
        }
        outcomes
    }
}

fn request(app: &AppId, i: usize) -> CertRequest {
    CertRequest {
        machine_user_name: Some(format!("user{i}@example.com")),
        device_id: Some(format!("device-{i}")),
        ..CertRequest::new(RequestKind::LoginCert, app.clone(), 300, EpochMillis(1_000 + i as i64))
    }
}

/// `count` pending requests of a new app, queued as pairings queue them (the first with its
/// ready marker), and an admin token.
async fn fill(backend: &Backend, count: usize) -> String {
    let app = AppId::parse("appId", &format!("bench{}", uuid::Uuid::new_v4().simple())).unwrap();
    fill_app(backend, &app, count).await
}

async fn fill_app(backend: &Backend, app: &AppId, count: usize) -> String {
    let requests: Vec<_> = (0..count).map(|i| request(app, i)).collect();
    fixtures::queue_in_bulk(backend.store.as_ref(), &requests, backend.clock.now_millis()).await;
    fixtures::admin_token(backend.store.as_ref(), EpochMillis(0)).await
}

async fn poll(client: &TestClient, token: &str) -> usize {
    let r = client.send("GET", "/rp/api/certificate/requests", Some(token), None).await;
    assert_eq!(r.status, 200, "{}", r.json());
    r.json()["loginCerts"].as_array().unwrap().len()
}

/// Leases per second for 8 pollers draining the queue.
async fn drain(backend: Backend) -> f64 {
    let token = fill(&backend, PENDING).await;
    let client = TestClient::new(http::app(AppState::new(backend, HttpConfig::default())));
    let started = Instant::now();
    let pollers: Vec<_> = (0..POLLERS)
        .map(|_| {
            let (client, token) = (client.clone(), token.clone());
            tokio::spawn(async move {
                let mut leased = 0;
                loop {
                    match poll(&client, &token).await {
                        0 => return leased,
                        n => leased += n,
                    }
                }
            })
        })
        .collect();
    let mut total = 0;
    for p in pollers {
        total += p.await.unwrap();
    }
    assert_eq!(total, PENDING, "every request leased once");
    total as f64 / started.elapsed().as_secs_f64()
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// Median latency of a poll of `batch` on `backend`: one app, refilled with `batch` requests
/// before each poll.
async fn poll_latency(backend: &Backend, batch: usize) -> Duration {
    let app = AppId::parse("appId", &format!("lat{}", uuid::Uuid::new_v4().simple())).unwrap();
    let mut samples = Vec::new();
    for _ in 0..20 {
        let token = fill_app(backend, &app, batch).await;
        let config = HttpConfig { poll_batch: batch, ..HttpConfig::default() };
        let client = TestClient::new(http::app(AppState::new(backend.clone(), config)));
        let started = Instant::now();
        let leased = poll(&client, &token).await;
        samples.push(started.elapsed());
        assert_eq!(leased, batch, "the poll leased its whole batch");
    }
    median(samples)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let dir = tempfile::tempdir().unwrap();
    let before = {
        let backend = backend::embedded(&dir.path().join("one-by-one")).unwrap();
        let store: Arc<dyn ItemStore> = Arc::new(OneByOne(backend.store.clone()));
        drain(Backend { store, ..backend }).await
    };
    let after = drain(backend::embedded(&dir.path().join("put-each")).unwrap()).await;
    println!("drain of {PENDING} by {POLLERS} pollers, leases one put after another: {before:.0} leases/s");
    println!(
        "drain of {PENDING} by {POLLERS} pollers, a poll's leases in one transaction: {after:.0} leases/s"
    );
    println!(
        "speed-up {:.1}; target >= 1000 leases/s: {}",
        after / before,
        if after >= 1000.0 { "met" } else { "missed" }
    );

    let Some(clients) = rp_shared::testing::aws::clients().await else {
        println!("batch latency on DynamoDB: skipped (no emulator endpoint set; see docs/testing.md)");
        return;
    };
    let config = rp_shared::testing::aws::fresh_config(&clients).await;
    let backend = backend::aws_with_clients(&config, clients, Arc::new(SystemClock));
    let one = poll_latency(&backend, 1).await;
    let fifty = poll_latency(&backend, 50).await;
    println!("poll on DynamoDB, batch 1: median {one:?}; batch 50: median {fifty:?}");
    println!("ratio 50 / 1: {:.2} (target <= 3)", fifty.as_secs_f64() / one.as_secs_f64());
}
