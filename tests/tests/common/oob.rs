//! OOB authentication cases: the relying party's start and status, the device's fetch and signed
//! answer (with a real P-256 key), number matching, expiry, nonce reuse, tenancy and races.

use super::certificates::{device, device_with_id, enroll_as, TestDevice};
use super::Harness;
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use p256::ecdsa::signature::Signer;
use p256::ecdsa::{Signature, SigningKey};
use rp_shared::domain::oob::{canonical_bytes, Decision, Extras, Nonces, OobDevice, OobRequest};
use rp_shared::http::problem::codes;
use serde_json::{json, Value};
use std::time::Duration;

pub(super) use rp_shared::testing::fixtures::nonce;

pub(crate) fn start_body(app: &str, user: &str) -> Value {
    json!({
        "appId": app, "namedUser": user,
        "sessionNonce": nonce(), "deviceNonce": nonce(), "serviceNonce": nonce(), "serviceHmac": nonce(),
        "machine": "WS-0042", "transactionText": "Sign in to WS-0042?", "transactionType": "login",
    })
}

/// An app with a registered user and device, and the app's access token.
async fn setup(h: &Harness, user: &str) -> (String, String, TestDevice) {
    let app = h.app().await;
    let access = h.access_token(&app).await;
    let dev = device(h, &app, user, None).await;
    (app, access, dev)
}

pub(crate) async fn start(h: &Harness, access: &str, body: Value) -> String {
    let r =
        h.client.send("POST", "/rp/api/oob/client/authentication/requests", Some(access), Some(body)).await;
    assert_eq!(r.status, 200, "{}", r.json());
    assert_eq!(r.json()["status"]["responseCode"], 200);
    r.json()["response"]["requestId"].as_str().unwrap().to_owned()
}

async fn status(h: &Harness, access: &str, id: &str) -> rp_shared::testing::http::TestResponse {
    h.client
        .send("GET", &format!("/rp/api/oob/client/authentication/requests/{id}"), Some(access), None)
        .await
}

fn states(status: &Value) -> Vec<String> {
    status["state"].as_array().unwrap().iter().map(|s| s["value"].as_str().unwrap().to_owned()).collect()
}

/// The device's pending requests, as the phone fetches them.
pub(super) async fn fetch(h: &Harness, dev: &TestDevice) -> Vec<Value> {
    let r = h.client.send("GET", "/rp/versioned/device/oob/requests", Some(&dev.token), None).await;
    assert_eq!(r.status, 200, "{}", r.json());
    r.json()["requests"].as_array().unwrap().clone()
}

/// The request as the device sees it, rebuilt to sign from its own fields, exactly as a phone
/// written from docs/api/oob.md would.
fn signed(key: &p256::SecretKey, seen: &Value, decision: &str, amount: Option<&str>) -> Value {
    let text = |k: &str| seen[k].as_str().unwrap_or_default().to_owned();
    let request = OobRequest {
        request_id: text("requestId"),
        nonces: Nonces {
            session_nonce: text("sessionNonce"),
            device_nonce: text("deviceNonce"),
            service_nonce: text("serviceNonce"),
            service_hmac: text("serviceHmac"),
        },
        transaction_text: seen["transactionText"].as_str().map(str::to_owned),
        extras: seen["extras"]["amount"].as_str().map(|a| Extras { amount: Some(a.to_owned()) }),
        ..placeholder()
    };
    let decision_value = if decision == "approve" { Decision::Approve } else { Decision::Decline };
    let signature: Signature = SigningKey::from(key).sign(&canonical_bytes(&request, decision_value, amount));
    let mut body = json!({"decision": decision, "signature": STANDARD.encode(signature.to_der().as_bytes())});
    if let Some(amount) = amount {
        body["amount"] = json!(amount);
    }
    body
}

/// The fields the signature does not cover.
fn placeholder() -> OobRequest {
    OobRequest {
        request_id: String::new(),
        app_id: rp_shared::domain::apps::AppId::parse("appId", "x").unwrap(),
        named_user: String::new(),
        machine: None,
        machine_id: None,
        device: OobDevice {
            device_id: String::new(),
            friendly_name: String::new(),
            model_number: String::new(),
            signing_public_key: String::new(),
        },
        nonces: Nonces {
            session_nonce: String::new(),
            device_nonce: String::new(),
            service_nonce: String::new(),
            service_hmac: String::new(),
        },
        transaction_text: None,
        transaction_type: None,
        extras: None,
        additional_details: Default::default(),
        created_at: rp_shared::domain::EpochMillis(0),
        expires_at: rp_shared::domain::EpochMillis(0),
        state: Vec::new(),
    }
}

async fn answer(
    h: &Harness,
    dev: &TestDevice,
    id: &str,
    body: Value,
) -> rp_shared::testing::http::TestResponse {
    h.client
        .send("POST", &format!("/rp/versioned/device/oob/requests/{id}"), Some(&dev.token), Some(body))
        .await
}

/// Seed pairing rule 6: the workstation deposits its recovery keys at enroll-complete, sealed
/// at rest; the device it enrolled for gets them in the authentication flow (with the OOB
/// requests that name the machine), and nobody else does.
pub async fn recovery_keys_reach_the_enrolled_device_in_authentication(h: Harness) {
    use base64::Engine as _;
    let (app, access, dev) = setup(&h, "rita@example.com").await;
    let blob = base64::engine::general_purpose::STANDARD
        .encode(b"workstation recovery keys, encrypted for the device");
    let complete = |keys: Value| {
        let (h, access, app) = (&h, &access, &app);
        async move {
            let extra = json!({"recoveryKeys": keys, "machineName": "WS-R"});
            enroll_as(h, access, app, "rita@example.com", "rita@example.com", "m-recovery", extra).await
        }
    };
    let r = complete(json!("not base64!")).await;
    assert_eq!(r.problem(400, codes::INVALID_FIELD)["field"], "recoveryKeys");
    let r = complete(json!(blob)).await;
    assert_eq!(r.status, 200, "{}", r.json());
    // Sealed at rest: the stored enrollment does not hold the blob.
    let key = rp_shared::ports::ItemKey::new(format!("ENROLL#{app}#m-recovery"), "ENROLL");
    let stored = h.backend.store.get(&key).await.unwrap().expect("the enrollment");
    let text = serde_json::to_string(&stored).unwrap();
    assert!(text.contains("recoveryKeys") && !text.contains(&blob), "{text}");

    let mut body = start_body(&app, "rita@example.com");
    body["machineId"] = json!("m-recovery");
    let id = start(&h, &access, body).await;
    let shown = fetch(&h, &dev).await;
    let mine = shown.iter().find(|r| r["requestId"] == id.as_str()).unwrap();
    assert_eq!(mine["recoveryKeys"], blob.as_str());
    // A request naming no machine carries none; another user's device sees none of it.
    let other = start(&h, &access, start_body(&app, "rita@example.com")).await;
    let shown = fetch(&h, &dev).await;
    assert!(shown.iter().find(|r| r["requestId"] == other.as_str()).unwrap().get("recoveryKeys").is_none());
    let stranger = device(&h, &app, "sam@example.com", None).await;
    let mut body = start_body(&app, "sam@example.com");
    body["machineId"] = json!("m-recovery");
    start(&h, &access, body).await;
    assert!(fetch(&h, &stranger).await.iter().all(|r| r.get("recoveryKeys").is_none()));
}

pub async fn oob_login_completes_with_a_signed_approval(h: Harness) {
    let (app, access, dev) = setup(&h, "alice@example.com").await;
    let id = start(&h, &access, start_body(&app, "alice@example.com")).await;
    let r = status(&h, &access, &id).await;
    assert_eq!(r.status, 200, "{}", r.json());
    let body = r.json();
    assert_eq!(
        (body["requestId"].as_str(), body["namedUser"].as_str()),
        (Some(id.as_str()), Some("alice@example.com"))
    );
    assert_eq!(body["machine"], "WS-0042");
    assert_eq!(
        body["device"],
        json!({"deviceId": dev.device_id, "friendlyName": "phone", "modelNumber": "m1"})
    );
    assert_eq!(states(&body), ["REQUEST_SENT"]);
    assert!(body["state"][0]["timestamp"].is_i64());

    let seen = fetch(&h, &dev).await;
    let mine = seen.iter().find(|r| r["requestId"] == id.as_str()).expect("the device sees it").clone();
    assert_eq!(
        (mine["transactionText"].as_str(), mine["transactionType"].as_str()),
        (Some("Sign in to WS-0042?"), Some("login"))
    );
    assert!(mine["expiresInSecs"].as_u64().unwrap() <= 300);
    assert_eq!(states(&status(&h, &access, &id).await.json()), ["REQUEST_SENT", "INITIATED"]);
    fetch(&h, &dev).await;
    assert_eq!(
        states(&status(&h, &access, &id).await.json()),
        ["REQUEST_SENT", "INITIATED"],
        "INITIATED once"
    );

    let approval = signed(&dev.signing, &mine, "approve", None);
    let r = answer(&h, &dev, &id, approval.clone()).await;
    assert_eq!(r.status, 200, "{}", r.json());
    assert_eq!(r.json(), json!({"requestId": id, "state": "COMPLETED"}));
    let done = status(&h, &access, &id).await.json();
    assert_eq!(states(&done), ["REQUEST_SENT", "INITIATED", "INITIATED_RESPONSE", "COMPLETED"]);
    assert!(
        fetch(&h, &dev).await.iter().all(|r| r["requestId"] != id.as_str()),
        "finished requests leave the list"
    );
    // The same answer again (its reply was lost) is told the outcome again; any other is refused.
    for again in [approval, signed(&dev.signing, &mine, "approve", None)] {
        let r = answer(&h, &dev, &id, again).await;
        assert_eq!((r.status.as_u16(), r.json()), (200, json!({"requestId": id, "state": "COMPLETED"})));
    }
    answer(&h, &dev, &id, signed(&dev.signing, &mine, "decline", None))
        .await
        .problem(409, codes::OOB_ANSWERED);
    let other_key = p256::SecretKey::random(&mut rand::rngs::OsRng);
    answer(&h, &dev, &id, signed(&other_key, &mine, "approve", None)).await.problem(409, codes::OOB_ANSWERED);
    assert_eq!(states(&status(&h, &access, &id).await.json()).len(), 4, "nothing changed");
    let events =
        h.admin("GET", &format!("/rp/api/events?appId={app}&name=OOB_AUTHENTICATION"), None).await.json();
    let answered: Vec<_> = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["attributes"]["requestId"] == id.as_str())
        .collect();
    assert_eq!(answered.len(), 1, "one event: {events}");
    assert_eq!(answered[0]["attributes"]["state"], "COMPLETED", "{events}");
}

pub async fn oob_declines_bad_signatures_and_wrong_numbers(h: Harness) {
    let (app, access, dev) = setup(&h, "bob@example.com").await;
    let declined = start(&h, &access, start_body(&app, "bob@example.com")).await;
    let seen = fetch(&h, &dev).await.into_iter().find(|r| r["requestId"] == declined.as_str()).unwrap();
    let r = answer(&h, &dev, &declined, signed(&dev.signing, &seen, "decline", None)).await;
    assert_eq!(r.json()["state"], "CANCELED");
    assert_eq!(states(&status(&h, &access, &declined).await.json()).last().unwrap(), "CANCELED");

    let forged = start(&h, &access, start_body(&app, "bob@example.com")).await;
    let seen = fetch(&h, &dev).await.into_iter().find(|r| r["requestId"] == forged.as_str()).unwrap();
    let other_key = p256::SecretKey::random(&mut rand::rngs::OsRng);
    answer(&h, &dev, &forged, signed(&other_key, &seen, "approve", None))
        .await
        .problem(400, codes::BAD_SIGNATURE);
    assert_eq!(states(&status(&h, &access, &forged).await.json()).last().unwrap(), "FAILED");

    let mut numbered = start_body(&app, "bob@example.com");
    numbered["extras"] = json!({"amount": "4271"});
    let matched = start(&h, &access, numbered.clone()).await;
    numbered["sessionNonce"] = json!(nonce());
    let mismatched = start(&h, &access, numbered).await;
    let list = fetch(&h, &dev).await;
    let pick = |id: &str| list.iter().find(|r| r["requestId"] == id).unwrap().clone();
    assert_eq!(pick(&matched)["extras"]["amount"], "4271", "the phone shows the code");
    let r = answer(&h, &dev, &mismatched, signed(&dev.signing, &pick(&mismatched), "approve", Some("4270")))
        .await;
    assert_eq!(r.problem(400, codes::WRONG_AMOUNT)["field"], "amount");
    assert_eq!(states(&status(&h, &access, &mismatched).await.json()).last().unwrap(), "FAILED");
    let r = answer(&h, &dev, &matched, signed(&dev.signing, &pick(&matched), "approve", Some("4271"))).await;
    assert_eq!(r.json()["state"], "COMPLETED", "{}", r.json());

    let r = answer(&h, &dev, &matched, json!({"decision": "approve", "signature": "not base64!"})).await;
    assert_eq!(r.problem(400, codes::INVALID_FIELD)["field"], "signature");
    let r = answer(&h, &dev, &matched, json!({"decision": "maybe", "signature": "AA=="})).await;
    assert_eq!(r.problem(400, codes::INVALID_FIELD)["field"], "decision");
}

/// Sets `app`'s OOB requests to expire `secs` after their start.
async fn expiring_after(h: &Harness, app: &str, secs: u64) {
    let settings = json!({"oobRequestTimeoutInSecs": secs});
    let r = h.admin("PUT", &format!("/cc/api/apps/{app}/workstation"), Some(settings)).await;
    assert_eq!(r.status, 200, "{}", r.json());
}

pub async fn oob_requests_expire_and_nonces_are_spent(h: Harness) {
    let (app, access, dev) = setup(&h, "carol@example.com").await;
    expiring_after(&h, &app, 2).await;
    let body = start_body(&app, "carol@example.com");
    let id = start(&h, &access, body.clone()).await;
    let seen = fetch(&h, &dev).await.into_iter().find(|r| r["requestId"] == id.as_str()).unwrap();
    h.clock.advance(Duration::from_secs(3));
    let r = status(&h, &access, &id).await;
    let problem = r.problem(400, codes::OOB_NOT_FOUND);
    assert!(problem["title"].as_str().unwrap().contains("could not be found"), "{problem}");
    answer(&h, &dev, &id, signed(&dev.signing, &seen, "approve", None))
        .await
        .problem(400, codes::OOB_NOT_FOUND);
    assert!(fetch(&h, &dev).await.is_empty(), "an expired request is not shown");

    let r =
        h.client.send("POST", "/rp/api/oob/client/authentication/requests", Some(&access), Some(body)).await;
    assert_eq!(r.problem(409, codes::NONCE_REUSED)["field"], "sessionNonce", "a nonce is spent for good");
    status(&h, &access, "no-such-request").await.problem(400, codes::OOB_NOT_FOUND);
}

/// Requests that expired unanswered stay in the device's index until the store's TTL sweep
/// (DynamoDB's may lag two days): a request started after a page of them still reaches the
/// device.
pub async fn a_new_request_reaches_the_device_past_expired_ones(h: Harness) {
    let (app, access, dev) = setup(&h, "cora@example.com").await;
    expiring_after(&h, &app, 2).await;
    let ignored = rp_shared::repo::oob::DEVICE_PAGE + 5;
    for _ in 0..ignored {
        start(&h, &access, start_body(&app, "cora@example.com")).await;
        h.clock.advance(Duration::from_millis(10));
    }
    h.clock.advance(Duration::from_secs(3));
    let id = start(&h, &access, start_body(&app, "cora@example.com")).await;
    let seen = fetch(&h, &dev).await;
    assert_eq!(seen.len(), 1, "only the live request: {seen:?}");
    assert_eq!(seen[0]["requestId"], id.as_str());
    let r = answer(&h, &dev, &id, signed(&dev.signing, &seen[0], "approve", None)).await;
    assert_eq!(r.status, 200, "{}", r.json());
}

/// A device whose token an admin ended, or whose token expired, could never fetch a request:
/// a start (and an enrollment) that names no device goes to the newest device that can answer,
/// the device list leaves it out, and a start that names it is refused.
pub async fn requests_go_past_devices_whose_token_ended(h: Harness) {
    let (user, starts) = ("olga@example.com", "/rp/api/oob/client/authentication/requests");
    let (app, access, older) = setup(&h, user).await;
    h.clock.advance(Duration::from_secs(1));
    let newer = device(&h, &app, user, None).await;
    let path = format!("/cc/api/apps/{app}/devices/{}/token", newer.device_id);
    assert_eq!(h.admin("DELETE", &path, None).await.status, 204);

    let id = start(&h, &access, start_body(&app, user)).await;
    let seen = fetch(&h, &older).await;
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0]["requestId"], id.as_str());
    let listed = h
        .client
        .send("GET", &format!("/rp/api/oob/client/authentication/{app}/{user}/devices"), Some(&access), None)
        .await
        .json();
    let ids: Vec<&str> = listed.as_array().unwrap().iter().map(|d| d["deviceId"].as_str().unwrap()).collect();
    assert_eq!(ids, [older.device_id.as_str()]);
    let mut named = start_body(&app, user);
    named["deviceId"] = json!(newer.device_id);
    let r =
        h.client.send("POST", "/rp/api/oob/client/authentication/requests", Some(&access), Some(named)).await;
    let problem = r.problem(400, codes::OOB_UNKNOWN_DEVICE);
    assert_eq!(problem["field"], "deviceId");
    assert!(problem["detail"].as_str().unwrap().contains("ended or expired"), "{problem}");
    let enrolled = enroll_as(&h, &access, &app, user, user, "WS-OLGA", json!({})).await;
    assert_eq!(enrolled.status, 200, "{}", enrolled.json());
    let r = h
        .client
        .send(
            "POST",
            "/rp/wsapi/client/enroll",
            Some(&access),
            Some(json!({"rpAppId": app, "machineUserNameWS": user})),
        )
        .await;
    assert_eq!(r.json()["response"]["device"]["deviceId"], older.device_id.as_str(), "{}", r.json());

    // A refreshed token lives on past the first one's lifetime; once it expires too, no device
    // of the user can answer.
    h.clock.advance(Duration::from_secs(60 * 24 * 3600));
    let r = h.client.send("POST", "/rp/versioned/device/token", Some(&older.token), None).await;
    assert_eq!(r.status, 201, "{}", r.json());
    h.clock.advance(Duration::from_secs(40 * 24 * 3600));
    let access = h.access_token(&app).await;
    start(&h, &access, start_body(&app, user)).await;
    h.clock.advance(Duration::from_secs(60 * 24 * 3600));
    let access = h.access_token(&app).await;
    let r = h.client.send("POST", starts, Some(&access), Some(start_body(&app, user))).await;
    assert_eq!(r.problem(400, codes::OOB_NO_DEVICE)["field"], "namedUser");
}

pub async fn oob_input_and_tenancy_are_checked(h: Harness) {
    let (app, access, dev) = setup(&h, "dave@example.com").await;
    let path = "/rp/api/oob/client/authentication/requests";
    for (field, value) in [
        ("sessionNonce", json!("abc")),
        ("deviceNonce", json!("z".repeat(64))),
        ("serviceNonce", json!(5)),
        ("serviceHmac", json!("a".repeat(65))),
        ("transactionText", json!("x".repeat(1001))),
        ("appId", json!("not an app id")),
    ] {
        let mut body = start_body(&app, "dave@example.com");
        body[field] = value;
        let r = h.client.send("POST", path, Some(&access), Some(body)).await;
        assert_eq!(r.problem(400, codes::INVALID_FIELD)["field"], field);
    }
    let mut body = start_body(&app, "dave@example.com");
    body.as_object_mut().unwrap().remove("serviceHmac");
    let r = h.client.send("POST", path, Some(&access), Some(body)).await;
    assert_eq!(r.problem(400, codes::INVALID_FIELD)["field"], "serviceHmac");
    let r = h.client.send("POST", path, Some(&access), Some(start_body(&app, "nobody@example.com"))).await;
    assert_eq!(r.problem(400, codes::OOB_UNKNOWN_USER)["field"], "namedUser");

    // Another tenant: its token may not start for this app, nor read this app's requests.
    let (other_app, other_access, other_dev) = setup(&h, "dave@example.com").await;
    h.client
        .send("POST", path, Some(&other_access), Some(start_body(&app, "dave@example.com")))
        .await
        .problem(403, codes::OTHER_TENANT);
    let id = start(&h, &access, start_body(&app, "dave@example.com")).await;
    status(&h, &other_access, &id).await.problem(400, codes::OOB_NOT_FOUND);
    h.client
        .send("GET", &format!("{path}/{id}"), Some(&h.admin), None)
        .await
        .problem(403, codes::WRONG_TOKEN_KIND);
    h.client.send("GET", &format!("{path}/{id}"), None, None).await.problem(401, codes::MISSING_CREDENTIALS);
    h.client
        .send("POST", path, Some(&h.admin), Some(start_body(&app, "dave@example.com")))
        .await
        .problem(403, codes::WRONG_TOKEN_KIND);
    // Another device, even of a user of the same name, neither sees nor answers it.
    assert!(fetch(&h, &other_dev).await.is_empty());
    let seen = fetch(&h, &dev).await.into_iter().find(|r| r["requestId"] == id.as_str()).unwrap();
    answer(&h, &other_dev, &id, signed(&other_dev.signing, &seen, "approve", None))
        .await
        .problem(400, codes::OOB_NOT_FOUND);
    // Nor does a device of another app registered under the same id: it cannot fail the
    // request with an answer that does not verify.
    let twin = device_with_id(&h, &other_app, "dave@example.com", None, &dev.device_id).await;
    answer(&h, &twin, &id, signed(&twin.signing, &seen, "approve", None))
        .await
        .problem(400, codes::OOB_NOT_FOUND);
    assert_eq!(states(&status(&h, &access, &id).await.json()), ["REQUEST_SENT", "INITIATED"]);
    // An id longer than any request's (and than DynamoDB takes in a key) is not found, on every
    // backend, before any store call.
    let long = "r".repeat(3000);
    answer(&h, &dev, &long, signed(&dev.signing, &seen, "approve", None))
        .await
        .problem(400, codes::OOB_NOT_FOUND);
    status(&h, &access, &long).await.problem(400, codes::OOB_NOT_FOUND);
    h.client
        .send("GET", "/rp/versioned/device/oob/requests", Some(&access), None)
        .await
        .problem(401, codes::INVALID_TOKEN);
    // HEAD never marks anything fetched.
    let head = h.client.send("HEAD", "/rp/versioned/device/oob/requests", Some(&dev.token), None).await;
    assert_eq!(head.status, 405);
    let head = h.admin("HEAD", "/rp/api/certificate/requests", None).await;
    assert_eq!(head.status, 405, "a poll leases: HEAD must not");

    h.admin("PUT", &format!("/cc/api/apps/{app}/rate-limit"), Some(json!({"limit": 1, "windowSecs": 60})))
        .await;
    h.clock.advance(Duration::from_secs(61)); // a fresh window: the starts above counted in this one
    start(&h, &access, start_body(&app, "dave@example.com")).await;
    let r = h.client.send("POST", path, Some(&access), Some(start_body(&app, "dave@example.com"))).await;
    r.problem(429, codes::RATE_LIMITED);
    assert!(r.header("retry-after").is_some());
    // Over the limit, nothing of the start is judged: an unknown user is a 429 too.
    let unknown =
        h.client.send("POST", path, Some(&access), Some(start_body(&app, "nobody@example.com"))).await;
    unknown.problem(429, codes::RATE_LIMITED);
}

pub async fn racing_oob_answers_have_one_winner(h: Harness) {
    let Some(h) = h.for_races() else { return };
    let (app, access, dev) = setup(&h, "erin@example.com").await;
    let id = start(&h, &access, start_body(&app, "erin@example.com")).await;
    let seen = fetch(&h, &dev).await.into_iter().find(|r| r["requestId"] == id.as_str()).unwrap();
    let racers: Vec<_> = (0..8)
        .map(|i| {
            let client = h.client.clone();
            let decision = if i % 2 == 0 { "approve" } else { "decline" };
            let body = signed(&dev.signing, &seen, decision, None);
            let (path, token) = (format!("/rp/versioned/device/oob/requests/{id}"), dev.token.clone());
            tokio::spawn(async move {
                let r = client.send("POST", &path, Some(&token), Some(body)).await;
                (decision, r.status.as_u16(), r.json()["state"].clone())
            })
        })
        .collect();
    let answers = super::joined(racers).await;
    let finals = states(&status(&h, &access, &id).await.json());
    let settled: Vec<_> =
        finals.iter().filter(|s| ["COMPLETED", "CANCELED", "FAILED"].contains(&s.as_str())).collect();
    assert_eq!(settled.len(), 1, "{finals:?}");
    // One answer wins; those of its decision are told its outcome (a repeat), the others refused.
    let winner = if settled[0] == "COMPLETED" { "approve" } else { "decline" };
    for (decision, status, state) in &answers {
        let expected = if *decision == winner { (200, json!(settled[0])) } else { (409, Value::Null) };
        assert_eq!((*status, state.clone()), expected, "{answers:?}");
    }
}

/// The answer `decision` by `dev` to request `seen` of `app`, made through the use case on `held`
/// (a held state, [`Harness::held`]): the request's state after it, or why it was refused.
async fn answer_on(
    held: rp_shared::http::AppState,
    app: String,
    dev: (String, p256::SecretKey),
    seen: Value,
    decision: Decision,
) -> Result<rp_shared::domain::oob::OobState, String> {
    use rp_shared::domain::apps::AppId;
    use rp_shared::domain::oob::OobAnswer;
    let name = if decision == Decision::Approve { "approve" } else { "decline" };
    let body = signed(&dev.1, &seen, name, None);
    let answer = OobAnswer::parse(decision, body["signature"].as_str().unwrap(), None).unwrap();
    let (app_id, request_id) = (AppId::parse("appId", &app).unwrap(), seen["requestId"].as_str().unwrap());
    let first = rp_shared::app::oob::request(&held, request_id).await;
    rp_shared::app::oob::answer(&held, &app_id, &dev.0, request_id, &answer, first)
        .await
        .map(|answered| answered.current())
        .map_err(|e| e.to_string())
}

/// A device's removal wins over its answer in flight: an approval let in before the removal,
/// held between its read and its write while the admin removes the device, is refused, and the
/// login does not complete.
pub async fn a_removal_wins_over_an_answer_in_flight(h: Harness) {
    let (app, access, dev) = setup(&h, "rita@example.com").await;
    let id = start(&h, &access, start_body(&app, "rita@example.com")).await;
    let seen = fetch(&h, &dev).await.into_iter().find(|r| r["requestId"] == id.as_str()).unwrap();
    let (answerer, named) = ((dev.device_id.clone(), dev.signing.clone()), app.clone());
    let refused = h
        .held_past_removal(&format!("/cc/api/apps/{app}/devices/{}", dev.device_id), move |held| {
            answer_on(held, named, answerer, seen, Decision::Approve)
        })
        .await;
    assert!(refused.as_ref().is_err_and(|e| e.contains("could not be found")), "{refused:?}");
    assert_eq!(states(&status(&h, &access, &id).await.json()), ["REQUEST_SENT", "INITIATED"]);
}

/// An answer that loses its race (held between its read and its write while another answer
/// settles the request) reads the request again and decides anew: the same decision is told the
/// request as settled, the other is refused as answered already. Neither is taken for an answer
/// whose device is being removed.
pub async fn an_answer_that_loses_its_race_decides_again(h: Harness) {
    use rp_shared::domain::oob::OobState;
    let (app, access, dev) = setup(&h, "lena@example.com").await;
    let id = start(&h, &access, start_body(&app, "lena@example.com")).await;
    let seen = fetch(&h, &dev).await.into_iter().find(|r| r["requestId"] == id.as_str()).unwrap();
    let held_answer = |decision: Decision| {
        let (answerer, named, seen) =
            ((dev.device_id.clone(), dev.signing.clone()), app.clone(), seen.clone());
        h.held(move |held| answer_on(held, named, answerer, seen, decision))
    };
    let (same_gate, same) = held_answer(Decision::Approve).await;
    let (other_gate, other) = held_answer(Decision::Decline).await;
    let path = format!("/rp/versioned/device/oob/requests/{id}");
    let body = signed(&dev.signing, &seen, "approve", None);
    let won = h.client.send("POST", &path, Some(&dev.token), Some(body)).await;
    assert_eq!(won.status, 200, "{}", won.json());
    same_gate.open(true);
    other_gate.open(true);
    assert_eq!(same.await.unwrap(), Ok(OobState::Completed), "the same decision is told the outcome");
    let refused = other.await.unwrap();
    assert!(refused.as_ref().is_err_and(|e| e.contains("answered already")), "{refused:?}");
    assert_eq!(states(&status(&h, &access, &id).await.json()).last().unwrap(), "COMPLETED");
}

/// A start whose device's removal begins while it runs goes to the user's other device, or,
/// when it named that device, is refused as one naming a device that cannot answer: no request
/// is left for a removed device.
pub async fn a_removal_wins_over_a_start_in_flight(h: Harness) {
    use rp_shared::app::oob;
    use rp_shared::domain::oob::OobStart;
    use rp_shared::http::wire::oob::OobStartRequest;
    let (app, access, older) = setup(&h, "sam@example.com").await;
    h.clock.advance(Duration::from_secs(1));
    let newer = device(&h, &app, "sam@example.com", None).await;
    let held_start = |body: Value| {
        let parsed: OobStartRequest = serde_json::from_value(body).unwrap();
        let start = OobStart::try_from(parsed).unwrap();
        h.held(move |held| async move {
            let reads = oob::start_reads(&held, &start).await;
            oob::start(&held, start, reads).await.map_err(|e| e.to_string())
        })
    };
    let (unnamed_gate, unnamed) = held_start(start_body(&app, "sam@example.com")).await;
    let mut named_body = start_body(&app, "sam@example.com");
    named_body["deviceId"] = json!(newer.device_id);
    let (named_gate, named) = held_start(named_body).await;
    let removed = h.admin("DELETE", &format!("/cc/api/apps/{app}/devices/{}", newer.device_id), None).await;
    assert_eq!(removed.status, 204, "{}", removed.json());
    unnamed_gate.open(true);
    named_gate.open(true);
    let id = unnamed.await.unwrap().expect("the start goes to the other device");
    assert_eq!(states(&status(&h, &access, &id).await.json()), ["REQUEST_SENT"]);
    let ids: Vec<_> =
        fetch(&h, &older).await.iter().map(|r| r["requestId"].as_str().unwrap().to_owned()).collect();
    assert_eq!(ids, [id], "the older device has the request");
    let refused = named.await.unwrap();
    assert!(refused.as_ref().is_err_and(|e| e.contains("cannot answer")), "{refused:?}");
    let pending = rp_shared::repo::oob::OobRequests::new(h.backend.store.as_ref());
    let app_id = rp_shared::domain::apps::AppId::parse("appId", &app).unwrap();
    assert_eq!(
        pending.pending_for_device(&app_id, &newer.device_id).await.unwrap(),
        [],
        "nothing for the removed device"
    );
}

async fn user_devices(h: &Harness, access: &str, app: &str, user: &str) -> Vec<Value> {
    let path = format!("/rp/api/oob/client/authentication/{app}/{user}/devices");
    let r = h.client.send("GET", &path, Some(access), None).await;
    assert_eq!(r.status, 200, "{}", r.json());
    r.json().as_array().expect("a JSON array").clone()
}

/// `GET /rp/api/oob/client/authentication/{appId}/{namedUser}/devices`, as HYPR-speaking
/// clients read it.
pub async fn the_device_list_answers_what_hypr_clients_read(h: Harness) {
    let (app, access, first) = setup(&h, "dana@example.com").await;
    assert_eq!(
        user_devices(&h, &access, &app, "nobody@example.com").await,
        Vec::<Value>::new(),
        "unknown user"
    );
    h.clock.advance(Duration::from_secs(1));
    let second = device(&h, &app, "dana@example.com", Some("CORP\\dana")).await;
    let listed = user_devices(&h, &access, &app, "dana@example.com").await;
    let ids: Vec<_> = listed.iter().map(|d| d["deviceId"].as_str().unwrap()).collect();
    assert_eq!(ids, [second.device_id.as_str(), first.device_id.as_str()], "newest first");
    let entry = &listed[0];
    assert_eq!(entry["machineId"], second.device_id.as_str(), "a device's machineId is its id");
    assert_eq!(entry["namedUser"], "dana@example.com");
    assert_eq!((entry["protocolVersion"].as_str(), entry["modelNumber"].as_str()), (Some("1"), Some("m1")));
    assert_eq!(entry["friendlyName"], "phone");
    assert!(entry["registeredAt"].as_str().unwrap().ends_with('Z'), "{entry}");
    // An alias names the same user.
    let by_alias = user_devices(&h, &access, &app, "CORP%5Cdana").await;
    assert_eq!(by_alias, listed);
    // Another app's token learns nothing: the answer of an unknown user.
    let other = h.app().await;
    let other_access = h.access_token(&other).await;
    assert_eq!(user_devices(&h, &other_access, &app, "dana@example.com").await, Vec::<Value>::new());
    // A user without devices.
    let r =
        h.admin("POST", &format!("/cc/api/apps/{app}/users/erin@example.com/registration-links"), None).await;
    assert_eq!(r.status, 201, "{}", r.json());
    assert_eq!(user_devices(&h, &access, &app, "erin@example.com").await, Vec::<Value>::new());
    // A bad token is 401, as the connector expects; a bad app id or user name is 400.
    let path = format!("/rp/api/oob/client/authentication/{app}/dana@example.com/devices");
    h.client
        .send("GET", &path, Some("rpt_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"), None)
        .await
        .problem(401, codes::INVALID_TOKEN);
    h.client.send("GET", &path, None, None).await.problem(401, codes::MISSING_CREDENTIALS);
    let r = h
        .client
        .send("GET", "/rp/api/oob/client/authentication/9bad/dana/devices", Some(&access), None)
        .await;
    assert_eq!((r.status.as_u16(), r.json()["field"].as_str()), (400, Some("appId")), "{}", r.json());
    let r = h
        .client
        .send("GET", &format!("/rp/api/oob/client/authentication/{app}/%20x/devices"), Some(&access), None)
        .await;
    assert_eq!((r.status.as_u16(), r.json()["field"].as_str()), (400, Some("namedUser")), "{}", r.json());
    // The list's admin token is not an access token.
    let r = h.admin("GET", &path, None).await;
    assert_eq!(r.status, 403, "{}", r.json());
}

/// The two public clients docs/api/oob.md ("Clients") lists as not running unchanged are refused
/// as it says: a start as Bravura Safe's HYPR two-factor sends it is refused for each of its
/// three departures from the contract in turn, and taken without them; FusionAuth's paths, and
/// the control-center call Bravura Safe checks its settings with, are no endpoints.
pub async fn the_clients_the_docs_list_as_refused_are_refused_as_they_say(h: Harness) {
    let (app, access, _) = setup(&h, "gil@example.com").await;
    let path = "/rp/api/oob/client/authentication/requests";
    let sha1 = "AB".repeat(20);
    let mut body = json!({
        "actionId": "defaultAuthAction", "appId": app, "machineId": "push-notif-request",
        "namedUser": "gil@example.com", "machine": "WEB", "sessionNonce": sha1, "deviceNonce": sha1,
        "serviceNonce": sha1, "serviceHmac": sha1, "additionalDetails": {"mobileBrowser": false},
    });
    // Each departure is named in turn, then left out for the next.
    for (named, left_out) in
        [("actionId", "actionId"), ("additionalDetails.mobileBrowser", "additionalDetails")]
    {
        let r = h.client.send("POST", path, Some(&access), Some(body.clone())).await;
        assert_eq!(r.problem(400, codes::INVALID_FIELD)["field"], named);
        body.as_object_mut().unwrap().remove(left_out);
    }
    let r = h.client.send("POST", path, Some(&access), Some(body.clone())).await;
    assert_eq!(r.problem(400, codes::INVALID_FIELD)["field"], "sessionNonce", "a SHA-1's 40 characters");
    for nonce_field in ["sessionNonce", "deviceNonce", "serviceNonce", "serviceHmac"] {
        body[nonce_field] = json!(nonce());
    }
    start(&h, &access, body).await;
    let anonymous = [
        ("POST", "/rp/oob/client/authentication/requests".to_owned()),
        ("GET", format!("/rp/oob/client/authentication/{app}/gil@example.com/devices")),
    ];
    for (method, fusionauth) in anonymous {
        h.client.send(method, &fusionauth, None, None).await.problem(404, codes::ROUTE_NOT_FOUND);
    }
    let rp_user = h.client.send("GET", "/cc/api/versioned/rpUser", Some(&access), None).await;
    rp_user.problem(404, codes::ROUTE_NOT_FOUND);
}

pub async fn a_start_goes_to_the_device_the_caller_names(h: Harness) {
    let (app, access, older) = setup(&h, "fay@example.com").await;
    h.clock.advance(Duration::from_secs(1));
    let newer = device(&h, &app, "fay@example.com", None).await;
    let asked = |id: String| {
        let (h, access) = (&h, &access);
        async move { status(h, access, &id).await.json()["device"]["deviceId"].as_str().unwrap().to_owned() }
    };
    // Nothing named, or a machineId that names no device (a workstation's, a random one): the newest.
    let id = start(&h, &access, start_body(&app, "fay@example.com")).await;
    assert_eq!(asked(id).await, newer.device_id);
    let mut body = start_body(&app, "fay@example.com");
    body["machineId"] = json!("QWERTY");
    assert_eq!(asked(start(&h, &access, body).await).await, newer.device_id);
    // A machineId from the device list, or a deviceId: that device.
    let mut body = start_body(&app, "fay@example.com");
    body["machineId"] = json!(older.device_id);
    let id = start(&h, &access, body).await;
    assert_eq!(asked(id.clone()).await, older.device_id);
    assert!(fetch(&h, &older).await.iter().any(|r| r["requestId"] == id.as_str()));
    assert!(
        fetch(&h, &newer).await.iter().all(|r| r["requestId"] != id.as_str()),
        "only the named device sees it"
    );
    let mut body = start_body(&app, "fay@example.com");
    body["deviceId"] = json!(older.device_id);
    body["machineId"] = json!(newer.device_id);
    assert_eq!(asked(start(&h, &access, body).await).await, older.device_id, "deviceId wins over machineId");
    // A deviceId that names none of the user's devices is refused, even another user's.
    let stranger = device(&h, &app, "gus@example.com", None).await;
    for named in [stranger.device_id.as_str(), "no-such-device"] {
        let mut body = start_body(&app, "fay@example.com");
        body["deviceId"] = json!(named);
        let r = h
            .client
            .send("POST", "/rp/api/oob/client/authentication/requests", Some(&access), Some(body))
            .await;
        r.problem(400, codes::OOB_UNKNOWN_DEVICE);
    }
    let mut body = start_body(&app, "fay@example.com");
    body["deviceId"] = json!("bad id");
    let r =
        h.client.send("POST", "/rp/api/oob/client/authentication/requests", Some(&access), Some(body)).await;
    assert_eq!((r.status.as_u16(), r.json()["field"].as_str()), (400, Some("deviceId")), "{}", r.json());
}

/// The device approves the request `id`, as a phone does: fetch, sign, answer.
pub(crate) async fn approve(h: &Harness, dev: &TestDevice, id: &str) {
    let seen = fetch(h, dev).await;
    let mine = seen.iter().find(|r| r["requestId"] == id).expect("the device sees it").clone();
    let r = answer(h, dev, id, signed(&dev.signing, &mine, "approve", None)).await;
    assert_eq!(r.status, 200, "{}", r.json());
}

/// A workstation that logged in with the phone enrolls with that authentication's id as its
/// `sessionId` and no `machineUserNameWS`: the session names the user, and the device that
/// approved it. Without either, or with a session that names nobody, the 400 names the field.
pub async fn an_enroll_named_by_its_session_needs_no_workstation_name(h: Harness) {
    let (app, access, older) = setup(&h, "hal@example.com").await;
    h.clock.advance(Duration::from_secs(1));
    let _newer = device(&h, &app, "hal@example.com", Some("CORP\\hal")).await;
    let enroll = |body: Value| {
        let (h, access) = (&h, &access);
        async move { h.client.send("POST", "/rp/wsapi/client/enroll", Some(access), Some(body)).await }
    };
    let refused = |r: rp_shared::testing::http::TestResponse| {
        assert_eq!(r.problem(400, codes::INVALID_FIELD)["field"], "machineUserNameWS");
    };
    refused(enroll(json!({"rpAppId": app})).await);
    refused(enroll(json!({"rpAppId": app, "sessionId": "no-such-session"})).await);
    // A started, not yet approved, authentication names nobody yet.
    let mut body = start_body(&app, "hal@example.com");
    body["deviceId"] = json!(older.device_id);
    let id = start(&h, &access, body).await;
    refused(enroll(json!({"rpAppId": app, "sessionId": id})).await);
    approve(&h, &older, &id).await;
    let r = enroll(json!({"rpAppId": app, "sessionId": id})).await;
    assert_eq!(r.status, 200, "{}", r.json());
    assert_eq!(r.json()["response"]["device"]["deviceId"], older.device_id.as_str(), "the approving device");
    assert_eq!(r.json()["response"]["sessionId"], id.as_str());
    // The session it opened names the user again.
    let r = enroll(json!({"rpAppId": app, "sessionId": id})).await;
    assert_eq!(r.status, 200, "{}", r.json());
    // Another app's approved authentication names nobody here.
    let (other, other_access, other_dev) = setup(&h, "hal@example.com").await;
    let foreign = start(&h, &other_access, start_body(&other, "hal@example.com")).await;
    approve(&h, &other_dev, &foreign).await;
    refused(enroll(json!({"rpAppId": app, "sessionId": foreign})).await);
}

/// A phone without push long-polls: `?waitSecs=` holds its fetch until a request arrives (seen
/// within about half a second), or the wait ends with an empty list; the bound is checked.
pub async fn a_device_fetch_waits_for_a_request_to_arrive(h: Harness) {
    let (app, access, dev) = setup(&h, "kim@example.com").await;
    let fetch_waiting = |secs: &str| {
        let path = format!("/rp/versioned/device/oob/requests?waitSecs={secs}");
        let (h, token) = (&h, dev.token.clone());
        async move { h.client.send("GET", &path, Some(&token), None).await }
    };
    for bad in ["26", "-1", "abc", "+3", "03", ""] {
        let r = fetch_waiting(bad).await;
        assert_eq!(r.problem(400, codes::INVALID_FIELD)["field"], "waitSecs", "{bad}");
    }
    let began = std::time::Instant::now();
    let r = fetch_waiting("1").await;
    assert_eq!((r.status.as_u16(), r.json()["requests"].as_array().map(Vec::len)), (200, Some(0)));
    assert!(began.elapsed() >= Duration::from_millis(900), "it waited: {:?}", began.elapsed());

    let began = std::time::Instant::now();
    let waiting = fetch_waiting("20");
    let starting = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        start(&h, &access, start_body(&app, "kim@example.com")).await
    };
    let (r, id) = tokio::join!(waiting, starting);
    assert_eq!(r.status, 200, "{}", r.json());
    assert_eq!(r.json()["requests"][0]["requestId"], id.as_str());
    assert!(
        began.elapsed() < Duration::from_secs(5),
        "seen at once, not at the end of the wait: {:?}",
        began.elapsed()
    );
    // A pending request answers at once, whatever the wait.
    let r = fetch_waiting("20").await;
    assert_eq!(r.json()["requests"][0]["requestId"], id.as_str());
}

/// Another workstation of the app cannot re-enroll a machine and replace the recovery keys its
/// own workstation deposited, while that workstation's token is valid; the owner can; once an
/// admin revokes the owner's token, the new workstation may take the machine over.
pub async fn a_machine_stays_with_the_workstation_that_enrolled_it(h: Harness) {
    use base64::Engine as _;
    let (app, owner, dev) = setup(&h, "tia@example.com").await;
    let created = h.admin("POST", "/cc/api/tokens", Some(json!({"kind": "access", "appId": app}))).await;
    let (intruder, intruder_id) = (
        created.json()["token"].as_str().unwrap().to_owned(),
        created.json()["tokenId"].as_str().unwrap().to_owned(),
    );
    let blob =
        |who: &str| base64::engine::general_purpose::STANDARD.encode(format!("recovery keys of {who}"));
    let complete = |access: String, keys: String| {
        let (h, app) = (&h, &app);
        async move {
            let extra = json!({"recoveryKeys": keys, "machineName": "WS-T"});
            enroll_as(h, &access, app, "tia@example.com", "tia@example.com", "m-owned", extra).await
        }
    };
    let shown_keys = || {
        let (h, access, app, dev) = (&h, &owner, &app, &dev);
        async move {
            let mut body = start_body(app, "tia@example.com");
            body["machineId"] = json!("m-owned");
            let id = start(h, access, body).await;
            let seen = fetch(h, dev).await;
            seen.iter().find(|r| r["requestId"] == id.as_str()).unwrap()["recoveryKeys"]
                .as_str()
                .map(str::to_owned)
        }
    };
    assert_eq!(complete(owner.clone(), blob("the owner")).await.status, 200);
    let r = complete(intruder.clone(), blob("an intruder")).await;
    assert_eq!(r.problem(409, codes::MACHINE_TAKEN)["field"], "machineId");
    assert_eq!(shown_keys().await, Some(blob("the owner")), "the deposited keys stay");
    // The owner may enroll its machine again.
    assert_eq!(complete(owner.clone(), blob("the owner, again")).await.status, 200);
    assert_eq!(shown_keys().await, Some(blob("the owner, again")));
    // The admin hands the machine over by revoking the owner's token.
    let owner_id = h.admin("GET", "/cc/api/tokens?limit=200", None).await.json()["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["appId"] == app.as_str() && t["tokenId"] != intruder_id.as_str())
        .map(|t| t["tokenId"].as_str().unwrap().to_owned())
        .expect("the owner's token");
    assert_eq!(h.admin("DELETE", &format!("/cc/api/tokens/{owner_id}"), None).await.status, 204);
    assert_eq!(complete(intruder.clone(), blob("the new workstation")).await.status, 200);
    let stored = rp_shared::repo::workstations::Workstations::new(h.backend.store.as_ref())
        .enrollment(&rp_shared::domain::apps::AppId::parse("appId", &app).unwrap(), "m-owned")
        .await
        .unwrap()
        .expect("the enrollment");
    assert_eq!(stored.owner.as_deref(), Some(intruder_id.as_str()));
}
