//! The fixtures behind `events/`: `rp-admin seed-samples` puts them in a store (the embedded one
//! or DynamoDB), after which every sample event answers 2xx through its function, in any order,
//! once each (`cargo lambda invoke --data-file events/<function>.json`).
//!
//! What the API can create is created through the API (the in-process router, with the sample
//! admin token): the app, its users' devices, an enrollment, a pairing with offline PINs, a
//! content and a code customization with one earlier version each. What the samples name by a
//! fixed value is written directly: the sample tokens, two registration codes, three leased
//! certificate requests, an issued certificate, and the OOB request the answer sample is
//! signed over.

use crate::backend::Backend;
use crate::domain::apps::AppId;
use crate::domain::certificates::{CertRequest, IssuedCert, RequestKind, RequestState};
use crate::domain::devices::{DeviceTokenRecord, LinkRecord, RegistrationCode, TokenTrade};
use crate::domain::oob::{Nonces, OobDevice, OobRequest, OobStart};
use crate::domain::tokens::{TokenKind, TokenSecret};
use crate::domain::EpochMillis;
use crate::http::{self, AppState, HttpConfig};
use crate::ports::Condition;
use crate::repo::certificates::{issued_items, request_item};
use crate::repo::devices::Devices;
use crate::repo::oob::OobRequests;
use crate::repo::signing_keys::SigningKeys;
use crate::repo::tokens;
use anyhow::{ensure, Context as _};
use axum::body::Body;
use axum::http::Request;
use serde_json::{json, Value};
use tower::ServiceExt as _;

pub const APP: &str = "workstationDemo";
pub const ADMIN_TOKEN: &str = "rpt_sample-admin-token-for-local-invoke-only";
/// Revoked by the `cc-token` sample.
pub const TOKEN_TO_REVOKE: &str = "rpt_sample-token-to-revoke-in-the-cc-token-event";
pub const ACCESS_TOKEN: &str = "rpt_sample-access-token-for-workstationDemo";
/// `alice-pixel-9`'s token: the device samples use it.
pub const DEVICE_TOKEN: &str = "rpd_sample-device-token-replace-with-yours";
/// `alice-watch`'s token: the `rp-device-token` sample refreshes it (and so ends it).
pub const WATCH_TOKEN: &str = "rpd_sample-watch-token-refreshed-by-rp-device-token";
/// Shown by the `rp-register-page` sample (never used).
pub const PAGE_CODE: &str = "SampleRegistrationCode01";
/// Used by the `rp-device-registrations` sample.
pub const REGISTRATION_CODE: &str = "SampleRegistrationCode02";
pub const SERIAL: &str = "0a1b2c3d4e5f60718293a4b5c6d7e8f9";
pub const LOGIN_REQUEST: &str = "00000000-0000-4000-8000-000000000001";
pub const REVOKE_REQUEST: &str = "00000000-0000-4000-8000-000000000002";
/// Leased like the two above; the `cert-timeout-consumer` sample ends its lease. A request of its
/// own, so that the time-out sample cannot take the result sample's request back to PENDING.
pub const TIMED_OUT_REQUEST: &str = "00000000-0000-4000-8000-000000000003";
pub const LEASE: &str = "5b0e9a52-8d2c-4c6e-9f1c-0d7f3f1b2a44";
pub const OOB_REQUEST: &str = "00000000-0000-4000-8000-0000000000a1";
/// The P-256 generator (private key 1), SEC1 uncompressed: the sample devices' signing key, so
/// the OOB answer sample carries a real signature.
pub const SIGNING_KEY: &str =
    "BGsX0fLhLEJH+Lzm5WOkQPJ3A32BLeszoPShOUXYmMKWT+NC4v4af5uO5+tKfA+eFivOM1drMV7Oy7ZAaDe/UfU=";
/// 2·G: the sample devices' key-agreement key.
pub const AGREEMENT_KEY: &str =
    "BHzyexiNA09+ilI4AwS1GsPAiWnid/IbNaYLSPxHZpl4B3dVENuO0EApPZrGn3Qw27p9reY86YIpngS3nSJ4c9E=";

/// The tenant's first token-signing key, the private scalar 3 (for local invoke only): the
/// `code-customization-signing-key` sample retires it, by the id [`SAMPLE_SIGNING_KID`].
pub const SAMPLE_SIGNING_SCALAR: u8 = 3;
/// The RFC 7638 thumbprint of 3·G.
pub const SAMPLE_SIGNING_KID: &str = "B3zQUJfL8WPQJT3fRc_9F85aNjqoqRkk-HMzwyAp7WU";

/// A CA the samples publish (made once by `LocalCa`, for local invoke only): its id, its
/// certificate and a CRL of it revoking [`SERIAL`], DER, base64. `seed` publishes them, so the
/// `rp-pki-*` samples find them.
pub const SAMPLE_CA_ID: &str = "1c9e1822c296cd09";
pub const SAMPLE_CA_CERTIFICATE: &str = "MIIB0DCCAXegAwIBAgIUdBxmyfgCdtUa5MIhllFT5wTjKKEwCgYIKoZIzj0EAwIwRTEfMB0GA1UEAwwWUlAgRW5yb2xsbWVudCBBZ2VudCBDQTEiMCAGA1UECgwZV29ya3N0YXRpb24gcmVseWluZyBwYXJ0eTAeFw0yNjExMjYwMTEzMTZaFw0zNjExMjQwMTEzMTZaMEUxHzAdBgNVBAMMFlJQIEVucm9sbG1lbnQgQWdlbnQgQ0ExIjAgBgNVBAoMGVdvcmtzdGF0aW9uIHJlbHlpbmcgcGFydHkwWTATBgcqhkjOPQIBBggqhkjOPQMBBwNCAAT2+1XwqAcZ4HhukFSf1MuwIX4zM5Z3/xtNsRQ99egIah5Ql10xoTtFgA2JNbDbbB/718zE6wwXZh8G2BjMyyWno0UwQzAOBgNVHQ8BAf8EBAMCAYYwHQYDVR0OBBYEFJ16l0HWCdMgmOhHIiAOdSNGwuDZMBIGA1UdEwEB/wQIMAYBAf8CAQAwCgYIKoZIzj0EAwIDRwAwRAIgWuUylfZFErxtQXqsxK0ZeYQ24VLv3tSuHJGIwtpFQG8CIGTVIX8xDBOoPmmQyyICPeX5VqBGBTMDaHpYHEurm68K";
pub const SAMPLE_CRL: &str = "MIIBJTCBzQIBATAKBggqhkjOPQQDAjBFMR8wHQYDVQQDDBZSUCBFbnJvbGxtZW50IEFnZW50IENBMSIwIAYDVQQKDBlXb3Jrc3RhdGlvbiByZWx5aW5nIHBhcnR5Fw0yNjExMjcwMTEzMTZaFw0zNjExMjQwMTEzMTZaMCMwIQIQChssPU5fYHGCk6S1xtfo+RcNMjYxMTI3MDExMzE2WqAyMDAwHwYDVR0jBBgwFoAUnXqXQdYJ0yCY6EciIA51I0bC4NkwDQYDVR0UBAYCBGsI2SwwCgYIKoZIzj0EAwIDRwAwRAIgU+aMABBDbUguVd1siNEIPbcNER5dhKivulDDx8VWtf8CICbILCtU8Ltzt4u1rRe8JwSmibuk4XQMvV3/7rzWOC3e";

/// The devices the samples name: the main one, one the `cc-app-device` sample removes, one
/// whose token the `cc-app-device-token` sample ends, and one whose token `rp-device-token`
/// refreshes.
pub const DEVICES: [&str; 4] = ["alice-pixel-9", "alice-old-phone", "alice-tablet", "alice-watch"];

/// Seeds every fixture; fails if a step does. Meant for an empty store: on one seeded already,
/// the API steps answer conflicts and it stops.
pub async fn seed(backend: &Backend) -> anyhow::Result<Value> {
    let store = backend.store.as_ref();
    let now = EpochMillis::from_datetime(time::OffsetDateTime::now_utc());
    let app = AppId::parse("appId", APP)?;
    for (token, kind, app_id) in [
        (ADMIN_TOKEN, TokenKind::ControlCenterAdmin, None),
        (TOKEN_TO_REVOKE, TokenKind::ControlCenterAdmin, None),
        (ACCESS_TOKEN, TokenKind::Access, Some(app.clone())),
    ] {
        let secret = TokenSecret::parse(token).context("a sample token")?;
        tokens::install(store, now, &secret, kind, app_id, "sample").await?;
    }
    let api = Api(http::app(AppState::new(backend.clone(), HttpConfig::default())));
    api.expect(
        201,
        "POST",
        "/cc/api/apps",
        ADMIN_TOKEN,
        None,
        json!({"appId": APP, "displayName": "Workstation demo"}),
    )
    .await?;
    let settings = json!({"offlineAccess": {"enabled": true, "tokenCount": 30}, "requestTimeoutInSecs": 120,
        "push": {"apns": SAMPLE_APNS_APPLICATION}});
    api.expect(200, "PUT", &format!("/cc/api/apps/{APP}/workstation"), ADMIN_TOKEN, None, settings).await?;

    // The devices, registered as a phone registers: a link, then the registration.
    for (i, device) in DEVICES.iter().enumerate() {
        let alias = if i == 0 { json!({"machineUserNameWS": "CORP\\alice"}) } else { json!({}) };
        let link_path = format!("/cc/api/apps/{APP}/users/alice@example.com/registration-links");
        let link = api.expect(201, "POST", &link_path, ADMIN_TOKEN, None, alias).await?;
        let body = json!({"code": link["code"], "deviceId": device, "friendlyName": "Alice's phone", "modelNumber": "Pixel 9",
            "signingPublicKey": SIGNING_KEY, "keyAgreementPublicKey": AGREEMENT_KEY});
        api.expect(201, "POST", "/rp/versioned/device/registrations", "", None, body).await?;
    }
    for (token, device) in [(DEVICE_TOKEN, "alice-pixel-9"), (WATCH_TOKEN, "alice-watch")] {
        install_device_token(backend, &app, token, device, now).await?;
    }
    for code in [PAGE_CODE, REGISTRATION_CODE] {
        let link = LinkRecord {
            app_id: app.clone(),
            named_user: "alice@example.com".into(),
            machine_user_name_ws: None,
            created_at: now,
            expires_at: now.plus_secs(7 * 86_400),
            used_at: None,
            device_id: None,
            token_id: None,
        };
        let code = RegistrationCode::parse("code", code)?;
        Devices::new(store).create_link(&code.digest(), &link).await?;
    }

    // machine-42 enrolled for Alice and paired with her phone, with offline PINs; machine-43
    // too (the `rp-client-reg.delete` sample unpairs it); the session the enroll-complete
    // sample names is left open, and so is the one the enroll samples reopen.
    for (machine, name) in [("machine-42", "WS-0042"), ("machine-43", "WS-0043")] {
        api.enroll(machine, name, json!({})).await?;
    }
    for session in ["sample-session-1", "sample-session-2"] {
        let open = json!({"rpAppId": APP, "machineUserNameWS": "CORP\\alice", "sessionId": session});
        api.expect(200, "POST", "/rp/wsapi/client/enroll", ACCESS_TOKEN, None, open).await?;
    }
    let pair = json!({"machineId": "machine-42", "deviceId": "alice-pixel-9", "machineName": "WS-0042", "machineUserNameWS": "CORP\\alice",
        "offline": {"tokens": "pin-01:48213095,pin-02:77120384,pin-03:90318422", "tokensAuth": "c2FtcGxlLWF1dGg="}});
    api.expect(201, "POST", "/rp/api/client/reg", ACCESS_TOKEN, None, pair).await?;
    let pair = json!({"machineId": "machine-43", "deviceId": "alice-pixel-9", "machineName": "WS-0043"});
    api.expect(201, "POST", "/rp/api/client/reg", ACCESS_TOKEN, None, pair).await?;

    certificate_fixtures(backend, &app, now).await?;
    oob_fixture(backend, &app, now).await?;

    // A content and a code customization, each with one earlier version.
    let content = json!({"displayName": "Spring campaign", "contentMap": {}});
    api.expect(201, "POST", "/content-customization", ADMIN_TOKEN, Some(APP), content).await?;
    let update = json!({"description": "first revision"});
    api.expect(200, "POST", "/content-customization/1", ADMIN_TOKEN, Some(APP), update).await?;
    let code = json!({"displayName": "Log the start", "trigger": "oob.start",
        "source": "function handler(event) { console.log('OOB start for', event.namedUser); return {seen: true}; }"});
    api.expect(201, "POST", "/code-customization", ADMIN_TOKEN, Some(APP), code).await?;
    api.expect(200, "POST", "/code-customization/1", ADMIN_TOKEN, Some(APP), json!({"timeoutMs": 1000}))
        .await?;
    // What the `code-customization.delete` and `code-customization-env-var.delete` samples remove.
    let retired =
        json!({"displayName": "Retired", "trigger": "oob.start", "source": "function handler() {}"});
    api.expect(201, "POST", "/code-customization", ADMIN_TOKEN, Some(APP), retired).await?;
    let old = json!({"value": "https://hooks.example.com/old"});
    api.expect(200, "PUT", "/code-customization/env/OLD_WEBHOOK_URL", ADMIN_TOKEN, Some(APP), old).await?;
    // Two signing keys: the fixed one the `code-customization-signing-key` sample retires, and
    // the active one after it.
    let mut scalar = [0u8; 32];
    scalar[31] = SAMPLE_SIGNING_SCALAR;
    let fixed = p256::ecdsa::SigningKey::from_slice(&scalar)?;
    SigningKeys::new(store, backend.keys.as_ref(), &app).add(fixed, now).await?;
    api.expect(201, "POST", "/code-customization/signing-keys", ADMIN_TOKEN, Some(APP), Value::Null).await?;
    let crl = json!({"crl": SAMPLE_CRL, "caCertificate": SAMPLE_CA_CERTIFICATE});
    api.expect(200, "PUT", &format!("/rp/pki/{SAMPLE_CA_ID}/crl"), ADMIN_TOKEN, None, crl).await?;
    Ok(json!({"seeded": APP, "devices": DEVICES, "adminToken": ADMIN_TOKEN, "accessToken": ACCESS_TOKEN}))
}

async fn install_device_token(
    backend: &Backend,
    app: &AppId,
    token: &str,
    device: &str,
    now: EpochMillis,
) -> anyhow::Result<()> {
    let secret = TokenSecret::parse(token).context("a sample device token")?;
    let record = DeviceTokenRecord {
        token_id: secret.hash().token_id(),
        app_id: app.clone(),
        named_user: "alice@example.com".into(),
        device_id: device.into(),
        hash: secret.hash().to_hex(),
        created_at: now,
        expires_at: None,
        superseded_until: None,
    };
    // It becomes the device's one token, in place of the one its registration gave it.
    let devices = Devices::new(backend.store.as_ref());
    let (registered, version) = devices
        .device_of(app, &record.named_user, device)
        .await?
        .context("the sample device is registered")?;
    devices.trade_token(&registered, version, &TokenTrade::Replace, &record).await?;
    Ok(())
}

/// Three requests leased under the samples' lease (the result samples answer two, the time-out
/// sample ends the third's lease) and a certificate with the sample serial (the revocation and
/// device-certificate samples).
async fn certificate_fixtures(backend: &Backend, app: &AppId, now: EpochMillis) -> anyhow::Result<()> {
    for (id, kind) in [
        (LOGIN_REQUEST, RequestKind::LoginCert),
        (REVOKE_REQUEST, RequestKind::Revocation),
        (TIMED_OUT_REQUEST, RequestKind::LoginCert),
    ] {
        let request = leased(id, kind, app.clone(), now, now.plus_secs(300));
        backend.store.put(request_item(&request)?, Condition::Absent).await?;
    }
    let cert = IssuedCert {
        cert_serial_number: SERIAL.into(),
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
        renewal_request_id: None,
        renewal_check_at: None,
        renewed_by: None,
    };
    for item in issued_items(&cert)? {
        backend.store.put(item, Condition::Absent).await?;
    }
    Ok(())
}

/// Enrolls one more workstation `machine` (named `name`) for the samples' Alice through
/// `router` (the API over a seeded backend), as her workstation does: for tests that need more
/// than the samples hold. `extra` is added to the completion (`recoveryKeys`, say).
pub async fn enroll(router: axum::Router, machine: &str, name: &str, extra: Value) -> anyhow::Result<()> {
    Api(router).enroll(machine, name, extra).await
}

/// A request of the samples, leased under the samples' lease until `leased_until`.
pub fn leased(
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
        lease_id: Some(LEASE.into()),
        leased_until: Some(leased_until),
        ..CertRequest::new(kind, app, 300, now)
    }
}

/// The SNS platform application the sample app wakes iPhones through (on an emulator, the
/// samples create it; the embedded backend only records).
pub const SAMPLE_APNS_APPLICATION: &str = "arn:aws:sns:us-east-1:123456789012:app/APNS/workstationDemo";

/// The OOB request the status and answer samples name, sent to `alice-pixel-9`; the answer
/// sample's signature (by key 1) is over exactly these fields.
async fn oob_fixture(backend: &Backend, app: &AppId, now: EpochMillis) -> anyhow::Result<()> {
    let start = OobStart {
        app_id: app.clone(),
        named_user: "alice@example.com".into(),
        nonces: Nonces {
            session_nonce: "1".repeat(64),
            device_nonce: "2".repeat(64),
            service_nonce: "3".repeat(64),
            service_hmac: "4".repeat(64),
        },
        machine: Some("WS-0042".into()),
        machine_id: None,
        device_id: None,
        transaction_text: Some("Sign in to WS-0042?".into()),
        transaction_type: None,
        extras: None,
        additional_details: Default::default(),
    };
    let device = Devices::new(backend.store.as_ref())
        .device(app, "alice-pixel-9")
        .await?
        .context("the sample device is registered")?
        .0;
    let device = OobDevice {
        device_id: device.device_id,
        friendly_name: device.friendly_name,
        model_number: device.model_number,
        signing_public_key: device.signing_public_key,
    };
    let request =
        OobRequest { request_id: OOB_REQUEST.into(), ..OobRequest::start(start, device, 3600, now) };
    OobRequests::new(backend.store.as_ref()).create(&request).await?;
    Ok(())
}

/// The API, in process.
struct Api(axum::Router);

struct Answer {
    status: u16,
    headers: axum::http::HeaderMap,
    body: Value,
}

impl Answer {
    fn header(&self, name: &str) -> Option<String> {
        self.headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned)
    }
}

impl Api {
    async fn call(
        &self,
        method: &str,
        path: &str,
        token: &str,
        tenant: Option<&str>,
        body: Value,
    ) -> anyhow::Result<Answer> {
        let mut request =
            Request::builder().method(method).uri(path).header("content-type", "application/json");
        if !token.is_empty() {
            request = request.header("authorization", format!("Bearer {token}"));
        }
        if let Some(tenant) = tenant {
            request = request.header("x-tenant-id", tenant);
        }
        let response = self.0.clone().oneshot(request.body(Body::from(body.to_string()))?).await?;
        let (parts, body) = response.into_parts();
        let bytes = axum::body::to_bytes(body, 1 << 20).await?;
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).unwrap_or(Value::Null)
        };
        Ok(Answer { status: parts.status.as_u16(), headers: parts.headers, body })
    }

    /// Enrolls `machine` for Alice (enroll, then complete), as her workstation does, with
    /// `extra` added to the completion.
    async fn enroll(&self, machine: &str, name: &str, extra: Value) -> anyhow::Result<()> {
        let body = json!({"rpAppId": APP, "machineUserNameWS": "CORP\\alice"});
        let started = self.call("POST", "/rp/wsapi/client/enroll", ACCESS_TOKEN, None, body).await?;
        ensure!(started.status == 200, "enroll answered {}: {}", started.status, started.body);
        let session =
            started.header("x-enrollment-session-id").context("the enroll answer names its session")?;
        let mut complete = json!({"errorCode": 0, "sessionId": session, "signingCert": "MIIBszCCAVmgAwIBAgIUSampleSigningCertificate",
            "machineName": name, "machineId": machine, "machineUserName": "alice@example.com", "machineVersion": "10.0.22631"});
        if let (Some(complete), Value::Object(extra)) = (complete.as_object_mut(), extra) {
            complete.extend(extra);
        }
        self.expect(200, "POST", "/rp/wasapi/client/enroll/complete", ACCESS_TOKEN, None, complete).await?;
        Ok(())
    }

    async fn expect(
        &self,
        status: u16,
        method: &str,
        path: &str,
        token: &str,
        tenant: Option<&str>,
        body: Value,
    ) -> anyhow::Result<Value> {
        let answer = self.call(method, path, token, tenant, body).await?;
        ensure!(answer.status == status, "{method} {path} answered {}: {}", answer.status, answer.body);
        Ok(answer.body)
    }
}
