//! The sample events in `events/` are real inputs: each API Gateway event is parsed as the Lambda
//! runtime parses it and run through its function's router on the embedded backend; the SQS event
//! goes through the consumer. The events, `functions/`, the SAM template and the routers must
//! name the same endpoints.

use aws_lambda_events::event::sqs::SqsEvent;
use rp_shared::backend::Backend;
use rp_shared::consumer::{process_batch, Dispatcher};
use rp_shared::domain::apps::AppId;
use rp_shared::domain::devices::RegistrationCode;
use rp_shared::domain::tokens::{TokenKind, TokenSecret};
use rp_shared::http::{self, AppState, HttpConfig};
use rp_shared::repo::devices::{Devices, LinkRecord};
use rp_shared::repo::tokens;
use rp_shared::testing::http::TestClient;
use std::path::{Path, PathBuf};

const SAMPLE_ADMIN: &str = "rpt_sample-admin-token-for-local-invoke-only";
const SAMPLE_REVOKED: &str = "rpt_sample-token-to-revoke-in-the-cc-token-event";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_owned()
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The HTTP functions, in the order their sample events make sense to replay.
const REPLAY: [(&str, u16); 19] = [
    ("health", 200),
    ("cc-apps", 201),
    ("cc-app", 200),
    ("cc-app-workstation", 200),
    ("cc-app-rate-limit", 200),
    ("cc-tokens", 201),
    ("cc-token", 204),
    ("cc-registration-links", 201),
    ("rp-register-page", 200),
    ("rp-device-registrations", 201),
    ("rp-enroll", 200),
    ("rp-enroll-complete", 200),
    ("rp-client-reg", 201),
    ("rp-events", 201),
    ("content-customizations", 201),
    ("content-customization", 200),
    ("content-customization-versions", 200),
    ("content-customization-version", 200),
    ("content-customization-restore", 200),
];

const SAMPLE_ACCESS: &str = "rpt_sample-access-token-for-workstationDemo";
const SAMPLE_CODE: &str = "SampleRegistrationCode01";

#[tokio::test]
async fn every_http_event_runs_through_its_function() {
    let dir = tempfile::tempdir().unwrap();
    let backend = Backend::embedded(dir.path()).unwrap();
    for (token, kind) in
        [(SAMPLE_ADMIN, TokenKind::ControlCenterAdmin), (SAMPLE_REVOKED, TokenKind::ControlCenterAdmin)]
    {
        let secret = TokenSecret::parse(token).unwrap();
        tokens::install(backend.store.as_ref(), 0, &secret, kind, None, "sample").await.unwrap();
    }
    for (name, expected) in REPLAY {
        if name == "rp-register-page" {
            // The sample events carry a fixed registration code and access token; put them in
            // place as the admin's link and token calls would.
            let app = AppId::parse("appId", "workstationDemo").unwrap();
            let access = TokenSecret::parse(SAMPLE_ACCESS).unwrap();
            tokens::install(
                backend.store.as_ref(),
                0,
                &access,
                TokenKind::Access,
                Some(app.clone()),
                "sample",
            )
            .await
            .unwrap();
            let code = RegistrationCode::parse("code", SAMPLE_CODE).unwrap();
            let now = time::OffsetDateTime::now_utc().unix_timestamp() * 1000;
            let link = LinkRecord {
                app_id: app,
                named_user: "alice@example.com".into(),
                machine_user_name_ws: Some("CORP\\alice".into()),
                created_at: now,
                expires_at: now + 900_000,
                used_at: None,
                device_id: None,
            };
            Devices::new(backend.store.as_ref()).create_link(&code.digest(), &link).await.unwrap();
        }
        let event = read(&format!("events/{name}.json"));
        let request = lambda_http::request::from_str(&event).unwrap_or_else(|e| panic!("{name}: {e}"));
        let request = request.map(|body| axum::body::Body::from(body.to_vec()));
        let router = http::function(name, AppState::new(backend.clone(), HttpConfig::default()))
            .unwrap_or_else(|| panic!("no router for {name}"));
        let response = TestClient::new(router).request(request).await;
        assert_eq!(response.status.as_u16(), expected, "{name}: {}", String::from_utf8_lossy(&response.body));
    }
    // The revoked sample token is refused now.
    let app = TestClient::new(http::app(AppState::new(backend, HttpConfig::default())));
    assert_eq!(app.send("GET", "/cc/api/apps", Some(SAMPLE_REVOKED), None).await.status, 401);
}

#[tokio::test]
async fn the_sqs_event_reports_failed_messages_for_retry() {
    let dir = tempfile::tempdir().unwrap();
    let backend = Backend::embedded(dir.path()).unwrap();
    let event: SqsEvent = serde_json::from_str(&read("events/cert-timeout-consumer.json")).unwrap();
    let ids: Vec<_> = event.records.iter().map(|r| r.message_id.clone().unwrap()).collect();
    let response = process_batch(&Dispatcher::new(backend), event).await;
    // The sample's kind has no handler, so it is reported failed (and SQS retries, then
    // dead-letters it) rather than silently dropped.
    let failed: Vec<_> = response.batch_item_failures.iter().map(|f| f.item_identifier.clone()).collect();
    assert_eq!(failed, ids);
}

#[test]
fn routers_functions_events_and_template_agree() {
    let template = read("infra/template.yaml");
    let endpoints: Vec<_> = http::ENDPOINTS.iter().map(|e| e.name).collect();
    for name in endpoints.iter().copied().chain(["cert-timeout-consumer"]) {
        let manifest = read(&format!("functions/{name}/Cargo.toml"));
        assert!(manifest.contains(&format!("name = \"{name}\"")), "functions/{name} is package {name}");
        assert!(template.contains(&format!("Binary: {name}\n")), "the template builds {name}");
        assert!(root().join(format!("events/{name}.json")).exists(), "events/{name}.json exists");
    }
    let functions = std::fs::read_dir(root().join("functions")).unwrap().count();
    assert_eq!(functions, endpoints.len() + 1, "one function per endpoint, plus the consumer");
    assert_eq!(REPLAY.len(), endpoints.len(), "every endpoint has a replayed event");
    for (name, _) in REPLAY {
        let event: serde_json::Value = serde_json::from_str(&read(&format!("events/{name}.json"))).unwrap();
        let route = event["routeKey"].as_str().unwrap();
        let (method, path) = route.split_once(' ').unwrap();
        assert!(
            template.contains(&format!("Path: {path}\n            Method: {method}\n")),
            "{route} is in the template"
        );
    }
}
