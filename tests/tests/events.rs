//! The sample events in `events/` are real inputs: each API Gateway event is parsed as the Lambda
//! runtime parses it and run through its function's router on the embedded backend; the SQS event
//! goes through the consumer. The events, `functions/`, the SAM template and the routers must
//! name the same endpoints.

use aws_lambda_events::event::sqs::SqsEvent;
use rp_shared::backend::Backend;
use rp_shared::consumer::{process_batch, Dispatcher};
use rp_shared::domain::apps::AppId;
use rp_shared::domain::certificates::{CertRequest, IssuedCert, RequestKind, RequestState};
use rp_shared::domain::devices::RegistrationCode;
use rp_shared::domain::devices::{DeviceTokenRecord, LinkRecord};
use rp_shared::domain::oob::{Nonces, OobDevice, OobRequest, OobStart};
use rp_shared::domain::tokens::{TokenKind, TokenSecret};
use rp_shared::domain::EpochMillis;
use rp_shared::http::{self, AppState, HttpConfig};
use rp_shared::ports::{Condition, Item, ItemKey};
use rp_shared::repo::certificates::{cert_item, request_item, Certificates};
use rp_shared::repo::devices::Devices;
use rp_shared::repo::oob::OobRequests;
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
const REPLAY: [(&str, u16); 44] = [
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
    ("rp-certificate-requests", 200),
    ("rp-certificate", 204),
    ("rp-certificate-revoke", 204),
    ("cc-certificate-revoke", 202),
    ("rp-device-certificates", 200),
    ("rp-oob-requests", 200),
    ("rp-oob-request", 200),
    ("rp-device-oob-requests", 200),
    ("rp-device-oob-request", 200),
    ("rp-device-setup", 200),
    ("rp-device-workstations", 200),
    ("rp-device-offline-used", 200),
    ("rp-events", 201),
    ("content-customizations", 201),
    ("content-customization", 200),
    ("content-customization-versions", 200),
    ("content-customization-version", 200),
    ("content-customization-restore", 200),
    ("code-customization-env-var", 200),
    ("code-customization-env", 200),
    ("code-customizations", 201),
    ("code-customization", 200),
    ("code-customization-versions", 200),
    ("code-customization-version", 200),
    ("code-customization-restore", 200),
    ("code-customization-test", 200),
    ("rp-app-jwks", 200),
    ("cc-app-user-devices", 200),
    ("rp-device-token", 201),
    ("cc-app-device-token", 204),
    ("cc-app-device", 204),
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
        tokens::install(backend.store.as_ref(), EpochMillis(0), &secret, kind, None, "sample").await.unwrap();
    }
    for (name, expected) in REPLAY {
        if name == "rp-certificate" {
            certificate_fixtures(&backend).await;
        }
        if name == "rp-oob-request" {
            oob_fixture(&backend).await;
        }
        if name == "rp-register-page" {
            // The sample events carry a fixed registration code and access token; put them in
            // place as the admin's link and token calls would.
            let app = AppId::parse("appId", "workstationDemo").unwrap();
            let access = TokenSecret::parse(SAMPLE_ACCESS).unwrap();
            tokens::install(
                backend.store.as_ref(),
                EpochMillis(0),
                &access,
                TokenKind::Access,
                Some(app.clone()),
                "sample",
            )
            .await
            .unwrap();
            let code = RegistrationCode::parse("code", SAMPLE_CODE).unwrap();
            let now = EpochMillis::from_datetime(time::OffsetDateTime::now_utc());
            let link = LinkRecord {
                app_id: app,
                named_user: "alice@example.com".into(),
                machine_user_name_ws: Some("CORP\\alice".into()),
                created_at: now,
                expires_at: now.plus_secs(900),
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

/// What the certificate samples refer to: two leased requests with the samples' ids, an issued
/// certificate with the sample serial, and the sample device token.
async fn certificate_fixtures(backend: &Backend) {
    let app = AppId::parse("appId", "workstationDemo").unwrap();
    let now = EpochMillis::from_datetime(time::OffsetDateTime::now_utc());
    for (id, kind) in [(LOGIN_REQUEST, RequestKind::LoginCert), (REVOKE_REQUEST, RequestKind::Revocation)] {
        let request = leased_fixture(id, kind, app.clone(), now, now.plus_secs(300));
        backend.store.put(request_item(&request).unwrap(), Condition::Absent).await.unwrap();
    }
    let cert = IssuedCert {
        cert_serial_number: SAMPLE_SERIAL.into(),
        app_id: app.clone(),
        request_id: "earlier".into(),
        device_id: "alice-pixel-9".into(),
        named_user: "alice@example.com".into(),
        machine_user_name_ws: None,
        machine_user_names: vec!["alice@example.com".into()],
        login_cert: "c2VhbGVk".into(),
        iv_login_cert: "aXY=".into(),
        login_cert_auth: "YXV0aA==".into(),
        issuer_key_agreement_public_key: "a2V5".into(),
        issuer_key_agreement_public_key_auth: "YXV0aA==".into(),
        login_cert_expiry_date: now.plus_secs(86_400),
        signing_cert: "Y2E=".into(),
        envelope_version: 1,
        login_cert_signature: None,
        enc_counter: Some("1".into()),
        issued_at: now,
        revoked_at: None,
        revocation_request_id: None,
    };
    backend.store.put(cert_item(&cert).unwrap(), Condition::Absent).await.unwrap();
    let secret = TokenSecret::parse(SAMPLE_DEVICE_TOKEN).unwrap();
    let record = DeviceTokenRecord {
        token_id: secret.hash().token_id(),
        app_id: app,
        named_user: "alice@example.com".into(),
        device_id: "alice-pixel-9".into(),
        hash: secret.hash().to_hex(),
        created_at: now,
        expires_at: None,
    };
    let item = Item::new(ItemKey::new("DEVTOKEN", record.token_id.clone()), &record).unwrap();
    backend.store.put(item, Condition::Absent).await.unwrap();
}

/// A request of the samples, leased under the samples' lease until `leased_until`.
fn leased_fixture(
    id: &str,
    kind: RequestKind,
    app: AppId,
    now: EpochMillis,
    leased_until: EpochMillis,
) -> CertRequest {
    CertRequest {
        request_id: id.into(),
        state: RequestState::Leased,
        machine_user_name: Some("alice@example.com".into()),
        device_id: Some("alice-pixel-9".into()),
        enc_counter: Some("1".into()),
        attempts: 1,
        lease_id: Some(SAMPLE_LEASE.into()),
        leased_until: Some(leased_until),
        ..CertRequest::new(kind, app, 300, now)
    }
}

/// The OOB request the status and answer samples name, sent to the sample device (whose signing
/// key is the curve's generator, so the answer sample carries a real signature by key 1).
async fn oob_fixture(backend: &Backend) {
    let start = OobStart {
        app_id: AppId::parse("appId", "workstationDemo").unwrap(),
        named_user: "alice@example.com".into(),
        nonces: Nonces {
            session_nonce: "1".repeat(64),
            device_nonce: "2".repeat(64),
            service_nonce: "3".repeat(64),
            service_hmac: "4".repeat(64),
        },
        machine: Some("WS-0042".into()),
        machine_id: None,
        transaction_text: Some("Sign in to WS-0042?".into()),
        transaction_type: None,
        extras: None,
        additional_details: Default::default(),
    };
    let device = Devices::new(backend.store.as_ref())
        .device(&start.app_id, "alice-pixel-9")
        .await
        .unwrap()
        .expect("the sample device is registered");
    let device = OobDevice {
        device_id: device.device_id,
        friendly_name: device.friendly_name,
        model_number: device.model_number,
        signing_public_key: device.signing_public_key,
    };
    let now = EpochMillis::from_datetime(time::OffsetDateTime::now_utc());
    let request = OobRequest { request_id: OOB_REQUEST.into(), ..OobRequest::start(start, device, 300, now) };
    OobRequests::new(backend.store.as_ref()).create(&request).await.unwrap();
}

const OOB_REQUEST: &str = "00000000-0000-4000-8000-0000000000a1";
const LOGIN_REQUEST: &str = "00000000-0000-4000-8000-000000000001";
const REVOKE_REQUEST: &str = "00000000-0000-4000-8000-000000000002";
const SAMPLE_LEASE: &str = "5b0e9a52-8d2c-4c6e-9f1c-0d7f3f1b2a44";
const SAMPLE_SERIAL: &str = "0a1b2c3d4e5f60718293a4b5c6d7e8f9";
const SAMPLE_DEVICE_TOKEN: &str = "rpd_sample-device-token-replace-with-yours";

#[tokio::test]
async fn the_sqs_event_requeues_and_reports_only_failed_messages() {
    let dir = tempfile::tempdir().unwrap();
    let backend = Backend::embedded(dir.path()).unwrap();
    let app = AppId::parse("appId", "workstationDemo").unwrap();
    let now = EpochMillis::from_datetime(time::OffsetDateTime::now_utc());
    let leased = leased_fixture(LOGIN_REQUEST, RequestKind::LoginCert, app, now, now);
    backend.store.put(request_item(&leased).unwrap(), Condition::Absent).await.unwrap();
    let mut event: SqsEvent = serde_json::from_str(&read("events/cert-timeout-consumer.json")).unwrap();
    let mut garbage = event.records[0].clone();
    garbage.message_id = Some("garbage".into());
    garbage.body = Some("not json".into());
    event.records.push(garbage);
    let dispatcher = Dispatcher::new(backend.clone());
    let response = process_batch(&dispatcher, event.clone()).await;
    let failed: Vec<_> = response.batch_item_failures.iter().map(|f| f.item_identifier.clone()).collect();
    assert_eq!(failed, ["garbage"], "only the bad message is retried");
    let (request, _) =
        Certificates::new(backend.store.as_ref()).request(LOGIN_REQUEST).await.unwrap().unwrap();
    assert_eq!(request.state, RequestState::Pending, "the sample's lease ended: re-queued");
    let again = process_batch(&dispatcher, event).await;
    assert_eq!(again.batch_item_failures.len(), 1, "redelivery is idempotent");
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
