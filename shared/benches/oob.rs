//! OOB status cost and the device-signature check: `cargo bench -p rp-shared --bench oob`.
//!
//! 1. A status call (`GET /rp/api/oob/client/authentication/requests/{id}`: auth, one read, the
//!    view) against `GET /health`, both through the in-process router on the embedded backend,
//!    in the same run; prints the medians and their ratio (target: ≤ 3).
//! 2. Verifying a device's ECDSA P-256 answer signature with `p256` against `aws-lc-rs` (which
//!    the server uses since this measured it faster); prints the time per check and the ratio.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use p256::ecdsa::signature::{Signer, Verifier};
use p256::ecdsa::{Signature, SigningKey, VerifyingKey};
use p256::elliptic_curve::sec1::ToEncodedPoint;
use rp_shared::backend;
use rp_shared::domain::oob::verify;
use rp_shared::http::{self, AppState, HttpConfig};
use rp_shared::ports::{Clock, SystemClock};
use rp_shared::testing::fixtures;
use rp_shared::testing::http::TestClient;
use serde_json::json;
use std::time::{Duration, Instant};

const ROUNDS: usize = 2_000;

/// The server's check done with `p256` instead, to measure the two against each other.
fn verify_with_p256(public_key_b64: &str, message: &[u8], signature: &Signature) -> bool {
    let Ok(bytes) = STANDARD.decode(public_key_b64) else { return false };
    let Ok(key) = VerifyingKey::from_sec1_bytes(&bytes) else { return false };
    key.verify(message, signature).is_ok()
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

async fn timed(client: &TestClient, path: &str, token: Option<&str>) -> Duration {
    let mut samples = Vec::with_capacity(ROUNDS);
    for round in 0..ROUNDS + 50 {
        let started = Instant::now();
        let r = client.send("GET", path, token, None).await;
        let elapsed = started.elapsed();
        assert_eq!(r.status, 200, "{path}: {}", r.json());
        if round >= 50 {
            samples.push(elapsed);
        }
    }
    median(samples)
}

async fn status_against_health() {
    let dir = tempfile::tempdir().unwrap();
    let backend = backend::embedded(dir.path()).unwrap();
    let admin = fixtures::admin_token(backend.store.as_ref(), SystemClock.now_millis()).await;
    let client = TestClient::new(http::app(AppState::new(backend, HttpConfig::default())));
    let admin = admin.as_str();
    let send = |method: &'static str, path: String, token: Option<String>, body: serde_json::Value| {
        let client = client.clone();
        async move {
            let r = client.send(method, &path, token.as_deref(), Some(body)).await;
            assert!(r.status.is_success(), "{path}: {}", r.json());
            r.json()
        }
    };
    send(
        "POST",
        "/cc/api/apps".into(),
        Some(admin.into()),
        json!({"appId": "bench", "displayName": "Bench"}),
    )
    .await;
    let access = send(
        "POST",
        "/cc/api/tokens".into(),
        Some(admin.into()),
        json!({"kind": "access", "appId": "bench"}),
    )
    .await["token"]
        .as_str()
        .unwrap()
        .to_owned();
    let link = send(
        "POST",
        "/cc/api/apps/bench/users/alice/registration-links".into(),
        Some(admin.into()),
        json!({}),
    )
    .await;
    let key = |k: &p256::SecretKey| STANDARD.encode(k.public_key().to_encoded_point(false).as_bytes());
    let (signing, agreement) =
        (p256::SecretKey::random(&mut rand::rngs::OsRng), p256::SecretKey::random(&mut rand::rngs::OsRng));
    send(
        "POST",
        "/rp/versioned/device/registrations".into(),
        None,
        json!({"code": link["code"], "deviceId": "phone", "friendlyName": "phone", "modelNumber": "m",
               "signingPublicKey": key(&signing), "keyAgreementPublicKey": key(&agreement)}),
    )
    .await;
    let nonce = "ab".repeat(32);
    let started = send(
        "POST",
        "/rp/api/oob/client/authentication/requests".into(),
        Some(access.clone()),
        json!({"appId": "bench", "namedUser": "alice", "sessionNonce": nonce, "deviceNonce": nonce,
               "serviceNonce": nonce, "serviceHmac": nonce, "transactionText": "Sign in?"}),
    )
    .await;
    let id = started["response"]["requestId"].as_str().unwrap().to_owned();
    let health = timed(&client, "/health", None).await;
    let status =
        timed(&client, &format!("/rp/api/oob/client/authentication/requests/{id}"), Some(&access)).await;
    println!("GET /health:      median {health:?} over {ROUNDS} calls");
    println!("GET OOB status:   median {status:?} over {ROUNDS} calls");
    println!("ratio status / health: {:.2} (target <= 3)", status.as_secs_f64() / health.as_secs_f64());
}

fn signature_checks() {
    let key = SigningKey::random(&mut rand::rngs::OsRng);
    let public = key.verifying_key().to_encoded_point(false);
    let public_b64 = STANDARD.encode(public.as_bytes());
    let message = vec![7u8; 400];
    let signature: Signature = key.sign(&message);
    let each = |f: &dyn Fn() -> bool| {
        let started = Instant::now();
        for _ in 0..ROUNDS {
            assert!(f());
        }
        started.elapsed() / ROUNDS as u32
    };
    let p256_time = each(&|| verify_with_p256(&public_b64, &message, &signature));
    let lc_time = each(&|| verify(&public_b64, &message, &signature));
    println!("p256 verify (with key decoding):     {p256_time:?} per check");
    println!("aws-lc-rs verify (with key decoding): {lc_time:?} per check");
    println!("ratio p256 / aws-lc-rs: {:.2}", p256_time.as_secs_f64() / lc_time.as_secs_f64());
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    runtime.block_on(status_against_health());
    signature_checks();
}
