//! The two public HYPR RP API clients of `tests/hypr_clients.py` (WSO2 Identity Server's HYPR
//! connector and a Go MFA strategy), replayed through the Lambda functions: every call is an API
//! Gateway (HTTP API) event, parsed as the Lambda runtime parses it, and run through the router
//! of the function API Gateway routes its path to (the most specific route, as API Gateway picks
//! it), over only the services that function declares. On the embedded backend, and on the AWS
//! adapters when an emulator endpoint is set (skipped, saying so, when none is).

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use p256::ecdsa::signature::Signer;
use p256::ecdsa::{Signature, SigningKey};
use p256::elliptic_curve::sec1::ToEncodedPoint;
use rp_shared::backend::{self, Backend};
use rp_shared::domain::oob::{answer_message, Decision, Nonces};
use rp_shared::http::{self, AppState, HttpConfig, ENDPOINTS};
use rp_shared::ports::{Clock, SystemClock};
use rp_shared::testing::http::{TestClient, TestResponse};
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};
use std::sync::Arc;

/// API Gateway in front of the functions.
struct Gateway {
    state: AppState,
}

impl Gateway {
    async fn new(backend: Backend) -> (Self, String) {
        let admin =
            rp_shared::testing::fixtures::admin_token(backend.store.as_ref(), SystemClock.now_millis()).await;
        (Self { state: AppState::new(backend, HttpConfig::default()) }, admin)
    }

    /// `method path` as an HTTP API event to the function whose route matches `path`.
    async fn call(&self, method: &str, path: &str, token: Option<&str>, body: Option<Value>) -> TestResponse {
        let (function, route, params) = route(path);
        let mut headers =
            json!({"host": "abc123.execute-api.eu-west-1.amazonaws.com", "x-forwarded-proto": "https"});
        if let Some(token) = token {
            headers["authorization"] = json!(format!("Bearer {token}"));
        }
        let mut event = json!({
            "version": "2.0",
            "routeKey": format!("{method} {route}"),
            "rawPath": path,
            "rawQueryString": "",
            "headers": headers,
            "requestContext": {
                "accountId": "123456789012", "apiId": "abc123", "stage": "$default",
                "domainName": "abc123.execute-api.eu-west-1.amazonaws.com", "domainPrefix": "abc123",
                "http": {"method": method, "path": path, "protocol": "HTTP/1.1", "sourceIp": "198.51.100.7", "userAgent": "replay"},
                "requestId": format!("replay-{function}"), "routeKey": format!("{method} {route}"),
                "time": "26/Nov/2026:14:00:00 +0000", "timeEpoch": 1_795_356_000_000u64,
            },
            "pathParameters": params,
            "isBase64Encoded": false,
        });
        if let Some(body) = body {
            event["headers"]["content-type"] = json!("application/json");
            event["body"] = json!(body.to_string());
        }
        let router = http::function(function, self.state.clone()).expect("a function for the route");
        TestClient::new(router).event(&event.to_string()).await
    }
}

/// The function API Gateway routes `path` to, its route and the path parameters: of the routes
/// that match, the one with the most literal segments.
fn route(path: &str) -> (&'static str, &'static str, Map<String, Value>) {
    let segments: Vec<&str> = path.split('/').collect();
    let mut best: Option<(usize, &'static str, &'static str, Map<String, Value>)> = None;
    for endpoint in ENDPOINTS {
        let pattern: Vec<&str> = endpoint.path.split('/').collect();
        if pattern.len() != segments.len() {
            continue;
        }
        let mut params = Map::new();
        let mut literals = 0;
        let matched = pattern.iter().zip(&segments).all(|(p, s)| match p.strip_prefix('{') {
            Some(name) => {
                params.insert(name.trim_end_matches('}').to_owned(), json!(s));
                !s.is_empty()
            }
            None => {
                literals += 1;
                p == s
            }
        });
        if matched && best.as_ref().is_none_or(|(n, ..)| literals > *n) {
            best = Some((literals, endpoint.name, endpoint.path, params));
        }
    }
    let (_, name, route, params) = best.unwrap_or_else(|| panic!("no route for {path}"));
    (name, route, params)
}

/// A phone: its P-256 signing key and device token.
struct Phone {
    device_id: String,
    token: String,
    key: SigningKey,
}

impl Phone {
    async fn register(api: &Gateway, admin: &str, app: &str, user: &str, name: &str) -> Self {
        let path = format!("/cc/api/apps/{app}/users/{user}/registration-links");
        let link = api.call("POST", &path, Some(admin), None).await;
        assert_eq!(link.status, 201, "{}", link.text());
        let key = SigningKey::random(&mut rand::rngs::OsRng);
        let agreement = p256::SecretKey::random(&mut rand::rngs::OsRng);
        let device_id = format!("{name}-{}", uuid::Uuid::new_v4().simple());
        let point = |k: &p256::PublicKey| STANDARD.encode(k.to_encoded_point(false).as_bytes());
        let body = json!({
            "code": link.json()["code"], "deviceId": device_id, "friendlyName": name, "modelNumber": "Pixel 9",
            "signingPublicKey": point(&p256::PublicKey::from(key.verifying_key())),
            "keyAgreementPublicKey": point(&agreement.public_key()),
        });
        let r = api.call("POST", "/rp/versioned/device/registrations", None, Some(body)).await;
        assert_eq!(r.status, 201, "{}", r.text());
        Self { device_id, token: r.json()["deviceToken"].as_str().unwrap().to_owned(), key }
    }

    async fn pending(&self, api: &Gateway) -> Vec<Value> {
        let r = api.call("GET", "/rp/versioned/device/oob/requests", Some(&self.token), None).await;
        assert_eq!(r.status, 200, "{}", r.text());
        r.json()["requests"].as_array().unwrap().clone()
    }

    /// Fetches `request_id` (which must be pending for this phone alone of `others`) and approves it.
    async fn approve(&self, api: &Gateway, others: &[&Phone], request_id: &str) {
        let seen = self.pending(api).await;
        let mine =
            seen.iter().find(|r| r["requestId"] == request_id).expect("the request reaches the chosen phone");
        for other in others {
            let theirs = other.pending(api).await;
            assert!(theirs.iter().all(|r| r["requestId"] != request_id), "only the chosen phone sees it");
        }
        let text = |k: &str| mine[k].as_str().unwrap_or_default().to_owned();
        let nonces = Nonces {
            session_nonce: text("sessionNonce"),
            device_nonce: text("deviceNonce"),
            service_nonce: text("serviceNonce"),
            service_hmac: text("serviceHmac"),
        };
        let message = answer_message(request_id, &nonces, mine["transactionText"].as_str(), None)
            .signed(Decision::Approve, None);
        let signature: Signature = self.key.sign(&message);
        let body =
            json!({"decision": "approve", "signature": STANDARD.encode(signature.to_der().as_bytes())});
        let r = api
            .call(
                "POST",
                &format!("/rp/versioned/device/oob/requests/{request_id}"),
                Some(&self.token),
                Some(body),
            )
            .await;
        assert_eq!((r.status.as_u16(), r.json()["state"].as_str()), (200, Some("COMPLETED")), "{}", r.text());
    }
}

/// `HYPRWebUtils.doSha256(String.valueOf(generateRandomPIN()))`: uppercase hex.
fn pin_nonce() -> String {
    let pin = 100_000 + rand::random::<u32>() % 900_000;
    hex::encode_upper(Sha256::digest(pin.to_string().as_bytes()))
}

async fn both_clients_complete(backend: Backend) {
    let (api, admin) = Gateway::new(backend).await;
    let app = format!("hypr{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    let r = api
        .call("POST", "/cc/api/apps", Some(&admin), Some(json!({"appId": app, "displayName": "HYPR"})))
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let r =
        api.call("POST", "/cc/api/tokens", Some(&admin), Some(json!({"kind": "access", "appId": app}))).await;
    let access = r.json()["token"].as_str().unwrap().to_owned();
    let user = "alice@example.com";
    let older = Phone::register(&api, &admin, &app, user, "older").await;
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let newer = Phone::register(&api, &admin, &app, user, "newer").await;
    let devices_path = format!("/rp/api/oob/client/authentication/{app}/{user}/devices");
    let status_of = |id: String| {
        let (api, access) = (&api, &access);
        async move {
            let path = format!("/rp/api/oob/client/authentication/requests/{id}");
            let r = api.call("GET", &path, Some(access), None).await;
            assert_eq!(r.status, 200, "{}", r.text());
            r.json()
        }
    };

    // WSO2: the device list (401 for a bad token, [] for an unknown user), the first entry's
    // machineId, the start, the poll's last state entry.
    let bad =
        api.call("GET", &devices_path, Some("rpt_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"), None).await;
    assert_eq!(bad.status, 401);
    let unknown = format!("/rp/api/oob/client/authentication/{app}/nobody/devices");
    assert_eq!(api.call("GET", &unknown, Some(&access), None).await.json(), json!([]));
    let listed = api.call("GET", &devices_path, Some(&access), None).await.json();
    let machine_id = listed[0]["machineId"].as_str().expect("the first entry's machineId").to_owned();
    for field in ["deviceId", "protocolVersion", "modelNumber", "machineId", "namedUser"] {
        assert!(listed[0][field].is_string(), "{field}: {listed}");
    }
    let start = json!({
        "namedUser": user, "machine": "WEB", "machineId": machine_id, "appId": app,
        "sessionNonce": pin_nonce(), "deviceNonce": pin_nonce(), "serviceNonce": pin_nonce(), "serviceHmac": pin_nonce(),
    });
    let r = api.call("POST", "/rp/api/oob/client/authentication/requests", Some(&access), Some(start)).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let id = r.json()["response"]["requestId"].as_str().unwrap().to_owned();
    let (chosen, other) = if machine_id == newer.device_id { (&newer, &older) } else { (&older, &newer) };
    chosen.approve(&api, &[other], &id).await;
    let polled = status_of(id.clone()).await;
    assert_eq!((polled["requestId"].as_str(), polled["namedUser"].as_str()), (Some(id.as_str()), Some(user)));
    assert_eq!(polled["state"].as_array().unwrap().last().unwrap()["value"], "COMPLETED", "{polled}");

    // The Go strategy: a non-empty list, a random 6-letter machineId, additionalDetails null; the
    // newest phone is asked; any state entry COMPLETED.
    assert!(!api.call("GET", &devices_path, Some(&access), None).await.json().as_array().unwrap().is_empty());
    let start = json!({
        "appId": app, "namedUser": user, "machine": "WEB", "machineId": "QxWvTz", "additionalDetails": null,
        "sessionNonce": pin_nonce(), "deviceNonce": pin_nonce(), "serviceNonce": pin_nonce(), "serviceHmac": pin_nonce(),
    });
    let r = api.call("POST", "/rp/api/oob/client/authentication/requests", Some(&access), Some(start)).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let id = r.json()["response"]["requestId"].as_str().unwrap().to_owned();
    newer.approve(&api, &[&older], &id).await;
    let polled = status_of(id).await;
    assert!(polled["state"].as_array().unwrap().iter().any(|s| s["value"] == "COMPLETED"), "{polled}");
}

#[tokio::test]
async fn both_public_clients_complete_through_the_functions_on_the_embedded_backend() {
    let dir = tempfile::tempdir().unwrap();
    both_clients_complete(backend::embedded(dir.path()).unwrap()).await;
}

#[tokio::test]
async fn both_public_clients_complete_through_the_functions_on_the_aws_adapters() {
    let Some(clients) = rp_shared::testing::aws::clients().await else {
        eprintln!("skipped: no AWS emulator endpoint is set (AWS_ENDPOINT_URL)");
        return;
    };
    let config = rp_shared::testing::aws::fresh_config(&clients).await;
    both_clients_complete(backend::aws_with_clients(&config, clients, Arc::new(SystemClock))).await;
}

#[test]
fn api_gateway_picks_the_most_specific_route() {
    assert_eq!(route("/rp/api/oob/client/authentication/requests/abc").0, "rp-oob-request");
    assert_eq!(route("/rp/api/oob/client/authentication/app1/alice/devices").0, "rp-oob-devices");
    assert_eq!(route("/code-customization/env/NAME").0, "code-customization-env-var");
    assert_eq!(route("/code-customization/7/versions").0, "code-customization-versions");
}
