//! A code customization that mints a JWT, run through `code-customization-test`'s real front door
//! (`lambda::serve`, the `lambda_http` runtime loop) on the runtime every function's `main` uses
//! (current-thread), with the AWS backend on the emulators. The run has a thread of its own, and
//! its `jwtCreateSignedJwt` calls KMS through the runtime's handle while the runtime's one thread
//! awaits the run: that thread must still drive the call's I/O, or the run hangs until its
//! backstop. The token must verify against the tenant's JWKS (KMS's public key).
//!
//! In a process of its own (its own test binary): it sets the Lambda environment variables.
//! Skipped, saying so, when no emulator endpoint is set.

use rp_shared::backend;
use rp_shared::http::{self, AppState, HttpConfig};
use rp_shared::ports::SystemClock;
use rp_shared::samples::{ADMIN_TOKEN, APP};
use rp_shared::testing::aws::{clients, fresh_config};
use rp_shared::testing::http::TestClient;
use serde_json::{json, Value};
use std::sync::Arc;

mod runtime_api;

#[tokio::test]
async fn a_customization_signs_through_kms_on_the_functions_runtime() {
    let Some(clients) = clients().await else { return };
    let config = fresh_config(&clients).await;
    let backend = backend::aws_with_clients(&config, clients, Arc::new(SystemClock));
    rp_shared::samples::seed(&backend).await.expect("the samples are seeded");
    let api = TestClient::new(http::app(AppState::new(backend, HttpConfig::default())));
    let tenant = [("x-tenant-id", APP)];
    let source = "function handler(e) { return jwtCreateSignedJwt({sub: e.user}, {audience: 'crm'}); }";
    let created = api
        .send_with(
            "POST",
            "/code-customization",
            Some(ADMIN_TOKEN),
            &tenant,
            Some(json!({"displayName": "mint", "trigger": "oob.start", "source": source})),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.text());
    let id = created.json()["id"].to_string();

    // The sample event, pointed at this customization.
    let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/../events/code-customization-test.json");
    let mut event: Value = serde_json::from_str(&std::fs::read_to_string(sample).unwrap()).unwrap();
    let path = format!("/code-customization/{id}/test");
    event["rawPath"] = json!(path);
    event["requestContext"]["http"]["path"] = json!(path);
    event["pathParameters"]["id"] = json!(id);
    event["body"] = json!(json!({"event": {"user": "bob"}}).to_string());

    // Lambda's environment, but with the emulators' endpoints that the harness checked, in the
    // region it made the keys in, and this run's table, queue and keys.
    let own = [
        ("AWS_REGION", "us-east-1"),
        ("AWS_LAMBDA_FUNCTION_NAME", "code-customization-test"),
        ("TABLE_NAME", &config.table_name),
        ("QUEUE_URL", &config.queue_url),
        ("KMS_ENVELOPE_KEY_ID", &config.envelope_key_id),
    ];
    let lambda = runtime_api::LAMBDA_ENV.into_iter().filter(|(name, _)| *name != "AWS_ENDPOINT_URL");
    for (name, value) in lambda.chain(own) {
        std::env::set_var(name, value);
    }
    let events = vec![("mint".to_owned(), event.to_string())];
    let (address, mut answers) = runtime_api::start("code-customization-test", events).await;
    runtime_api::run_front_door(address, || {
        rp_shared::lambda::serve(http::code::test_router, rp_shared::lambda::ClientSet::KEYS)
    });

    let (id, answer) = tokio::time::timeout(std::time::Duration::from_secs(30), answers.recv())
        .await
        .expect("the function answered")
        .unwrap();
    assert_eq!(id, "mint");
    assert_eq!(answer["statusCode"], 200, "{answer}");
    let body: Value = serde_json::from_str(answer["body"].as_str().expect("a text body")).unwrap();
    assert!(body["error"].is_null(), "the run succeeded: {body}");
    let token = body["result"].as_str().unwrap_or_else(|| panic!("a token: {body}"));

    let jwks = api.send("GET", &format!("/rp/api/apps/{APP}/jwks.json"), None, None).await;
    assert_eq!(jwks.status, 200, "{}", jwks.text());
    let set: jsonwebtoken::jwk::JwkSet = serde_json::from_value(jwks.json()).unwrap();
    let header = jsonwebtoken::decode_header(token).unwrap();
    let jwk = set.find(header.kid.as_deref().unwrap()).expect("the token's kid is in the set");
    let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::ES256);
    validation.set_audience(&["crm"]);
    let claims =
        jsonwebtoken::decode::<Value>(token, &jsonwebtoken::DecodingKey::from_jwk(jwk).unwrap(), &validation)
            .expect("the tenant's key, sealed under KMS, signed it: it verifies against the tenant's JWKS")
            .claims;
    assert_eq!(claims["sub"], "bob");
    assert!(claims["iss"].as_str().unwrap().ends_with(&format!("/rp/api/apps/{APP}")), "{claims}");
}
