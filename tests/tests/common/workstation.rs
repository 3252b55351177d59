//! Registration, enrollment, pairing and events cases, ending in the full flow: admin link →
//! QR page → device registration → enroll → complete → pairing → the queued certificate
//! request in the store.

use super::certificates::{as_device, issued_token, refresh};
use super::Harness;
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use p256::elliptic_curve::sec1::ToEncodedPoint;
use rp_shared::domain::apps::AppId;
use rp_shared::domain::certificates::{RequestKind, RequestState};
use rp_shared::http::problem::codes;
use rp_shared::http::HttpConfig;
use rp_shared::ports::{Index, Query};
use rp_shared::repo::workstations::Workstations;
use serde_json::{json, Value};
use std::time::Duration;

pub fn public_key_b64(compressed: bool) -> String {
    let secret = p256::SecretKey::random(&mut rand::rngs::OsRng);
    STANDARD.encode(secret.public_key().to_encoded_point(compressed).as_bytes())
}

/// A registration link for `user` of `app`, optionally with a workstation alias.
pub async fn link(h: &Harness, app: &str, user: &str, body: Option<Value>) -> Value {
    let r = h.admin("POST", &format!("/cc/api/apps/{app}/users/{user}/registration-links"), body).await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    r.json()
}

pub fn registration(code: &str, device_id: &str) -> Value {
    json!({
        "code": code, "deviceId": device_id, "friendlyName": "Alice's phone", "modelNumber": "Pixel 9",
        "signingPublicKey": public_key_b64(false), "keyAgreementPublicKey": public_key_b64(true),
    })
}

/// A user with one registered device; returns the device id.
pub async fn registered_user(h: &Harness, app: &str, user: &str, alias: Option<&str>) -> String {
    let body = alias.map(|a| json!({"machineUserNameWS": a}));
    let code = link(h, app, user, body).await["code"].as_str().unwrap().to_owned();
    let device_id = Harness::unique("dev");
    let r = h
        .client
        .send("POST", "/rp/versioned/device/registrations", None, Some(registration(&code, &device_id)))
        .await;
    assert_eq!(r.status, 201, "{}", r.json());
    device_id
}

/// A link points at the configured public base URL (its trailing `/` dropped); without one, at
/// the request's own host, over HTTPS unless the proxy in front says otherwise.
async fn link_points_at_the_public_base_url(h: &Harness, app: &str) {
    let configured = |base: &str| HttpConfig { public_base_url: base.into(), ..HttpConfig::default() };
    let public = h.configured(configured("https://rp.example.com/")).await;
    let created = link(&public, app, "alice@example.com", None).await;
    assert_eq!(
        created["url"],
        format!("https://rp.example.com/rp/register/{}", created["code"].as_str().unwrap())
    );
    let unset = h.configured(configured("")).await;
    let path = format!("/cc/api/apps/{app}/users/alice@example.com/registration-links");
    for (headers, base) in [
        (&[("host", "rp.internal:9000")][..], "https://rp.internal:9000"),
        (&[("host", "rp.internal:9000"), ("x-forwarded-proto", "http")][..], "http://rp.internal:9000"),
    ] {
        let created = unset.client.send_with("POST", &path, Some(&unset.admin), headers, None).await.json();
        assert_eq!(created["url"], format!("{base}/rp/register/{}", created["code"].as_str().unwrap()));
    }
}

pub async fn registration_links_and_qr_page(h: Harness) {
    let app = h.app().await;
    let created = link(&h, &app, "alice@example.com", None).await;
    let code = created["code"].as_str().unwrap();
    let base = HttpConfig::default().public_base_url;
    assert_eq!(created["url"], format!("{base}/rp/register/{code}"));
    assert!(created["expiresAt"].as_str().unwrap().ends_with('Z'));
    link_points_at_the_public_base_url(&h, &app).await;

    let page = h.client.send("GET", &format!("/rp/register/{code}"), None, None).await;
    assert_eq!(page.status, 200);
    assert!(page.header("content-type").unwrap().starts_with("text/html"));
    assert_eq!(page.header("cache-control"), Some("no-store"));
    assert_eq!(page.header("referrer-policy"), Some("no-referrer"));
    let html = String::from_utf8_lossy(&page.body).to_string();
    assert!(html.contains("<svg") && html.contains("alice@example.com") && html.contains(&app));

    // User-supplied text is escaped on the page.
    let sneaky = link(&h, &app, "%3Cb%20onclick%3Dx%3Ebob", None).await;
    let page =
        h.client.send("GET", &format!("/rp/register/{}", sneaky["code"].as_str().unwrap()), None, None).await;
    let html = String::from_utf8_lossy(&page.body).to_string();
    assert!(html.contains("&lt;b onclick=x&gt;bob") && !html.contains("<b onclick"));

    let unknown = h.client.send("GET", "/rp/register/AAAAAAAAAAAAAAAAAAAAAA", None, None).await;
    assert_eq!(unknown.status, 404);
    assert!(String::from_utf8_lossy(&unknown.body).contains("not found"));
    assert_eq!(h.client.send("GET", "/rp/register/x", None, None).await.status, 404);
    // A link is valid 15 minutes by default, and not a second more.
    h.clock.advance(Duration::from_secs(15 * 60 - 1));
    assert_eq!(h.client.send("GET", &format!("/rp/register/{code}"), None, None).await.status, 200);
    h.clock.advance(Duration::from_secs(2));
    let expired = h.client.send("GET", &format!("/rp/register/{code}"), None, None).await;
    assert_eq!(expired.status, 410);
    assert!(String::from_utf8_lossy(&expired.body).contains("expired"));

    h.admin("POST", "/cc/api/apps/noSuchApp/users/alice/registration-links", None)
        .await
        .problem(404, codes::APP_NOT_FOUND);
    let links = format!("/cc/api/apps/{app}/users/alice/registration-links");
    let week = 7 * 24 * 3600;
    for (body, field) in [
        (json!({"expiresInSecs": 59}), "expiresInSecs"),
        (json!({"expiresInSecs": week + 1}), "expiresInSecs"),
        (json!({"color": 1}), "color"),
    ] {
        let r = h.admin("POST", &links, Some(body)).await;
        assert_eq!(r.problem(400, codes::INVALID_FIELD)["field"], field);
    }
    // A link may be valid from a minute to a week.
    for secs in [60, week] {
        let r = h.admin("POST", &links, Some(json!({"expiresInSecs": secs}))).await;
        assert_eq!(r.status, 201, "{secs}: {}", r.json());
    }
    let access = h.access_token(&app).await;
    let r = h.client.send("POST", &links, Some(&access), None).await;
    r.problem(403, codes::WRONG_TOKEN_KIND);
}

pub async fn device_registration_validates_and_is_single_use(h: Harness) {
    let app = h.app().await;
    let code = link(&h, &app, "alice@example.com", None).await["code"].as_str().unwrap().to_owned();
    let mut off_curve = STANDARD.decode(public_key_b64(false)).unwrap();
    off_curve[64] ^= 1;
    for (change, field) in [
        (json!({"signingPublicKey": "not base64!"}), "signingPublicKey"),
        (json!({"signingPublicKey": STANDARD.encode(&off_curve)}), "signingPublicKey"),
        (json!({"keyAgreementPublicKey": STANDARD.encode([4u8; 65])}), "keyAgreementPublicKey"),
        (json!({"deviceId": "has space"}), "deviceId"),
        (json!({"friendlyName": ""}), "friendlyName"),
        (json!({"code": "short"}), "code"),
        (json!({"extra": true}), "extra"),
    ] {
        let mut body = registration(&code, "dev-validate");
        for (k, v) in change.as_object().unwrap() {
            body[k] = v.clone();
        }
        let r = h.client.send("POST", "/rp/versioned/device/registrations", None, Some(body.clone())).await;
        assert_eq!(r.problem(400, codes::INVALID_FIELD)["field"], field, "{change}");
    }
    let r = h
        .client
        .send(
            "POST",
            "/rp/versioned/device/registrations",
            None,
            Some(registration("AAAAAAAAAAAAAAAAAAAAAA", "d1")),
        )
        .await;
    assert_eq!(r.problem(404, codes::LINK_NOT_FOUND)["field"], "code");

    let Some(h) = h.for_races() else { return };
    // Racing registrations with one code: exactly one wins.
    let h = std::sync::Arc::new(h);
    let tasks: Vec<_> = (0..4)
        .map(|i| {
            let (h, code) = (h.clone(), code.clone());
            tokio::spawn(async move {
                let r = h
                    .client
                    .send(
                        "POST",
                        "/rp/versioned/device/registrations",
                        None,
                        Some(registration(&code, &format!("race-{i}"))),
                    )
                    .await;
                (r.status.as_u16(), r.json())
            })
        })
        .collect();
    let mut wins = Vec::new();
    for t in tasks {
        let (status, body) = t.await.unwrap();
        match status {
            201 => wins.push(body),
            410 => assert_eq!(body["errorCode"], codes::LINK_USED),
            other => panic!("unexpected {other}: {body}"),
        }
    }
    assert_eq!(wins.len(), 1, "one registration per code");
    let won = &wins[0];
    assert!(won["deviceToken"].as_str().unwrap().starts_with("rpd_"));
    assert_eq!(won["namedUser"], "alice@example.com");
    assert_eq!(won["appId"], app.as_str());
    let page = h.client.send("GET", &format!("/rp/register/{code}"), None, None).await;
    assert_eq!(page.status, 410, "a used link's page says so");

    // A device id is registered once per app.
    let second = link(&h, &app, "bob@example.com", None).await["code"].as_str().unwrap().to_owned();
    let taken = won["deviceId"].as_str().unwrap();
    let r = h
        .client
        .send("POST", "/rp/versioned/device/registrations", None, Some(registration(&second, taken)))
        .await;
    assert_eq!(r.problem(409, codes::DEVICE_EXISTS)["field"], "deviceId");
    let again = h
        .client
        .send("POST", "/rp/versioned/device/registrations", None, Some(registration(&second, "bobs-phone")))
        .await;
    assert_eq!(again.status, 201, "the failed attempt did not use up the code: {}", again.json());
    h.clock.advance(Duration::from_secs(16 * 60));
    let third = link(&h, &app, "carol@example.com", None).await["code"].as_str().unwrap().to_owned();
    h.clock.advance(Duration::from_secs(16 * 60));
    let r = h
        .client
        .send("POST", "/rp/versioned/device/registrations", None, Some(registration(&third, "carols-phone")))
        .await;
    r.problem(410, codes::LINK_EXPIRED);
    // An expired link is kept, and told expired, for a day; then it is gone.
    let register = || {
        let body = registration(&third, "carols-phone");
        h.client.send("POST", "/rp/versioned/device/registrations", None, Some(body))
    };
    h.clock.advance(Duration::from_secs(23 * 3600));
    register().await.problem(410, codes::LINK_EXPIRED);
    h.clock.advance(Duration::from_secs(2 * 3600));
    register().await.problem(404, codes::LINK_NOT_FOUND);
}

/// A device whose reply to its registration was lost sends it again: while the link is live the
/// same registration (same device, same keys) gets another token, and the one it never
/// received stops working; sent again at once, it is told to retry (409) and the first's token
/// stands. Anything else stays refused as a used code: other keys, another
/// device, a device that refreshed its token since, one whose token an admin ended or that was
/// removed, and any past the link's expiry.
pub async fn a_registration_whose_reply_was_lost_can_be_sent_again(h: Harness) {
    use rp_shared::domain::devices::REPEAT_AFTER_SECS;
    let app = h.app().await;
    let register = |body: &Value| {
        let (client, body) = (h.client.clone(), body.clone());
        async move { client.send("POST", "/rp/versioned/device/registrations", None, Some(body)).await }
    };
    let fresh_link =
        || async { link(&h, &app, "lou@example.com", None).await["code"].as_str().unwrap().to_owned() };
    let repeat_after = Duration::from_secs(u64::try_from(REPEAT_AFTER_SECS).unwrap());
    let body = registration(&fresh_link().await, "lous-phone");
    let lost = issued_token(register(&body).await);
    // Sent again at once, it was sent beside the first: retry later, and the first's token stands.
    let soon = register(&body).await;
    assert_eq!(soon.header("retry-after"), Some(REPEAT_AFTER_SECS.to_string().as_str()));
    soon.problem(409, codes::CONFLICT);
    assert_eq!(as_device(&h.client, &lost).await.status, 200);
    h.clock.advance(repeat_after);
    let kept = issued_token(register(&body).await);
    as_device(&h.client, &lost).await.problem(401, codes::INVALID_TOKEN);
    assert_eq!(as_device(&h.client, &kept).await.status, 200);
    h.clock.advance(repeat_after);
    let kept = issued_token(register(&body).await);
    assert_eq!(as_device(&h.client, &kept).await.status, 200, "as often as it is sent");
    let listed =
        h.admin("GET", &format!("/cc/api/apps/{app}/users/lou@example.com/devices"), None).await.json();
    assert_eq!(listed["devices"].as_array().unwrap().len(), 1, "one device: {listed}");
    // Other keys, or another device, with the used code.
    for (field, value) in
        [("signingPublicKey", public_key_b64(false)), ("deviceId", "lous-other-phone".into())]
    {
        let mut other = body.clone();
        other[field] = json!(value);
        register(&other).await.problem(410, codes::LINK_USED);
    }
    assert_eq!(as_device(&h.client, &kept).await.status, 200);
    // Once the device refreshed its token, the registration is not its own any more.
    let refreshed = issued_token(refresh(&h.client, &kept).await);
    register(&body).await.problem(410, codes::LINK_USED);
    assert_eq!(as_device(&h.client, &refreshed).await.status, 200);
    // Ended, removed, or past the link's expiry: a used code.
    for (n, ending) in ["token", "device", "expiry"].into_iter().enumerate() {
        let device_id = format!("lous-phone-{n}");
        let body = registration(&fresh_link().await, &device_id);
        let token = issued_token(register(&body).await);
        match ending {
            "token" => {
                let path = format!("/cc/api/apps/{app}/devices/{device_id}/token");
                assert_eq!(h.admin("DELETE", &path, None).await.status, 204);
            }
            "device" => {
                let path = format!("/cc/api/apps/{app}/devices/{device_id}");
                assert_eq!(h.admin("DELETE", &path, None).await.status, 204);
            }
            _ => h.clock.advance(Duration::from_secs(16 * 60)),
        }
        register(&body).await.problem(410, codes::LINK_USED);
        let live = as_device(&h.client, &token).await.status;
        assert_eq!(live, if ending == "expiry" { 200 } else { 401 }, "{ending}");
    }

    // The same registration sent twice at once (a client that resends without waiting): one
    // registers, the other is told to retry, as one sent again at once is.
    let body = registration(&fresh_link().await, "twin-phone");
    let Some(h) = h.for_races() else { return };
    let racing: Vec<_> = (0..4)
        .map(|_| {
            let (client, body) = (h.client.clone(), body.clone());
            tokio::spawn(async move {
                client.send("POST", "/rp/versioned/device/registrations", None, Some(body)).await
            })
        })
        .collect();
    let mut registered = Vec::new();
    for task in racing {
        let r = task.await.unwrap();
        if r.status == 201 {
            registered.push(issued_token(r));
        } else {
            assert_eq!(r.header("retry-after"), Some(REPEAT_AFTER_SECS.to_string().as_str()));
            r.problem(409, codes::CONFLICT);
        }
    }
    assert_eq!(registered.len(), 1, "one registers");
    assert_eq!(as_device(&h.client, &registered[0]).await.status, 200, "and its token stands");
}

fn enroll_body(app: &str, user: &str, session: Option<&str>) -> Value {
    let mut body = json!({"rpAppId": app, "machineUserNameWS": user});
    if let Some(s) = session {
        body["sessionId"] = json!(s);
    }
    body
}

fn complete_body(session: &str, user: &str, error_code: i64) -> Value {
    json!({
        "errorCode": error_code, "sessionId": session, "signingCert": "MIIBszCCAVmgAwIBAgIU",
        "machineName": "WS-0042", "machineId": "machine-42", "machineUserName": user, "machineVersion": "10.0.22631",
    })
}

/// The registration of `device_id` by the link `code`, held past its reads ([`Harness::held`]):
/// the gate, and the registration's outcome (an error as text).
async fn held_registration(
    h: &Harness,
    code: &str,
    device_id: &str,
) -> (rp_shared::ports::held::Gate, tokio::task::JoinHandle<Result<(), String>>) {
    use rp_shared::domain::devices::{Registration, RegistrationCode};
    let body = registration(code, device_id);
    let text = |k: &str| body[k].as_str().unwrap().to_owned();
    let registration = Registration {
        code: RegistrationCode::parse("code", code).unwrap(),
        device_id: text("deviceId"),
        friendly_name: text("friendlyName"),
        model_number: text("modelNumber"),
        signing_public_key: text("signingPublicKey"),
        key_agreement_public_key: text("keyAgreementPublicKey"),
    };
    h.held(move |held| async move {
        rp_shared::app::devices::register(&held, registration).await.map(drop).map_err(|e| e.to_string())
    })
    .await
}

/// The aliases stored for `user` of `app`, in the order they were learnt.
pub async fn aliases_of(h: &Harness, app: &str, user: &str) -> Vec<String> {
    let devices = rp_shared::repo::devices::Devices::new(h.backend.store.as_ref());
    let app = AppId::parse("appId", app).unwrap();
    devices.user(&app, user).await.unwrap().expect("the user is stored").aliases
}

/// A registration and an issued certificate that each teach the server a name of one user at
/// once: the user keeps both. The registration's write is held after its reads while the
/// certificate's name lands.
pub async fn a_registration_keeps_a_name_learnt_while_it_ran(h: Harness) {
    use rp_shared::repo::devices::Devices;
    let app = h.app().await;
    let user = "una@example.com";
    registered_user(&h, &app, user, None).await;
    let code = link(&h, &app, user, Some(json!({"machineUserNameWS": "CORP\\una"}))).await["code"]
        .as_str()
        .unwrap()
        .to_owned();
    let (gate, registering) = held_registration(&h, &code, &Harness::unique("dev")).await;
    let app_id = AppId::parse("appId", &app).unwrap();
    let devices = Devices::new(h.backend.store.as_ref());
    let learnt = ["una@corp.example".to_owned()];
    assert_eq!(devices.add_aliases(&app_id, user, &learnt).await.unwrap(), Vec::new());
    gate.open(true);
    registering.await.unwrap().unwrap();
    let names = aliases_of(&h, &app, user).await;
    assert!(names.contains(&"CORP\\una".to_owned()) && names.contains(&learnt[0]), "{names:?}");
}

/// Two links may give one free alias; the first registration to take it keeps it, and the other
/// user's is refused, though it found the alias free before its write (held there). The
/// holder's own links keep giving it, in any case, and it stays one alias.
pub async fn a_free_alias_goes_to_the_first_registration(h: Harness) {
    let app = h.app().await;
    let alias = Some(json!({"machineUserNameWS": "CORP\\Åsa"}));
    let code = |created: Value| created["code"].as_str().unwrap().to_owned();
    let asa = code(link(&h, &app, "asa@example.com", alias.clone()).await);
    let bo = code(link(&h, &app, "bo@example.com", alias).await);
    let register = |code: String, device: &'static str| {
        let body = registration(&code, device);
        h.client.send("POST", "/rp/versioned/device/registrations", None, Some(body))
    };
    let (gate, bo_registers) = held_registration(&h, &bo, "bo-phone").await;
    assert_eq!(register(asa, "asa-phone").await.status, 201);
    gate.open(true);
    let refused = bo_registers.await.unwrap().unwrap_err();
    assert_eq!(refused, "machineUserNameWS: 'CORP\\Åsa' is a name of another user");
    register(bo, "bo-phone").await.problem(409, codes::ALIAS_TAKEN);
    let again =
        code(link(&h, &app, "asa@example.com", Some(json!({"machineUserNameWS": "corp\\åSA"}))).await);
    let r = register(again, "asa-tablet").await;
    assert_eq!(r.status, 201, "her own alias: {}", r.json());
    assert_eq!(aliases_of(&h, &app, "asa@example.com").await, ["CORP\\Åsa"]);
}

pub async fn enrollment_ties_enroll_to_complete(h: Harness) {
    let app = h.app().await;
    let device_id = registered_user(&h, &app, "alice@example.com", Some("CORP\\alice")).await;
    let access = h.access_token(&app).await;
    let post = |path: &'static str, body: Value| {
        let (h, access) = (&h, access.clone());
        async move { h.client.send("POST", path, Some(&access), Some(body)).await }
    };

    // The enroll response is exactly the seed's shape; the alias finds the user.
    let r = post("/rp/wsapi/client/enroll", enroll_body(&app, "corp\\ALICE", Some("fido-session-1"))).await;
    assert_eq!(r.status, 200, "{}", r.json());
    assert_eq!(r.header("x-enrollment-session-id"), Some("fido-session-1"));
    let body = r.json();
    assert_eq!(body["response"]["sessionId"], "fido-session-1", "the session is in the body too");
    assert_eq!(body["status"], json!({"responseCode": 200, "responseMessage": "Success"}));
    let device = body["response"]["device"].as_object().unwrap();
    let mut keys: Vec<_> = device.keys().cloned().collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "authenticationKey",
            "deviceId",
            "deviceKey",
            "encCounter",
            "friendlyName",
            "keyAgreementPublicKey",
            "modelNumber"
        ]
    );
    assert_eq!(device["deviceId"], device_id.as_str());
    assert_eq!(device["encCounter"], "0");
    assert_eq!(body.as_object().unwrap().len(), 2);

    // Cross-checks name the field; an unknown session is refused.
    let r =
        post("/rp/wasapi/client/enroll/complete", complete_body("fido-session-1", "mallory@example.com", 0))
            .await;
    assert_eq!(r.problem(400, codes::CROSS_CHECK_FAILED)["field"], "machineUserName");
    let r =
        post("/rp/wasapi/client/enroll/complete", complete_body("no-such-session", "alice@example.com", 0))
            .await;
    assert_eq!(r.problem(400, codes::SESSION_NOT_FOUND)["field"], "sessionId");
    let mut incomplete = complete_body("fido-session-1", "alice@example.com", 0);
    incomplete.as_object_mut().unwrap().remove("machineVersion");
    let r = post("/rp/wasapi/client/enroll/complete", incomplete).await;
    assert_eq!(r.problem(400, codes::INVALID_FIELD)["field"], "machineVersion");

    let r =
        post("/rp/wasapi/client/enroll/complete", complete_body("fido-session-1", "alice@example.com", 0))
            .await;
    assert_eq!(r.status, 200, "{}", r.json());
    assert_eq!(r.json()["status"]["responseCode"], 200);
    let again =
        post("/rp/wasapi/client/enroll/complete", complete_body("fido-session-1", "alice@example.com", 0))
            .await;
    assert_eq!(again.status, 200, "re-completing is idempotent");
    let mut other = complete_body("fido-session-1", "alice@example.com", 0);
    other["machineVersion"] = json!("11.0");
    let r = post("/rp/wasapi/client/enroll/complete", other).await;
    assert_eq!(r.problem(400, codes::CROSS_CHECK_FAILED)["field"], "machineVersion", "the machine is pinned");
    let stored = Workstations::new(h.backend.store.as_ref())
        .enrollment(&AppId::parse("a", &app).unwrap(), "machine-42")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (stored.named_user.as_str(), stored.device_id.as_str(), stored.machine_name.as_str()),
        ("alice@example.com", device_id.as_str(), "WS-0042")
    );
    let events =
        h.admin("GET", &format!("/rp/api/events?appId={app}&name=WORKSTATION_ENROLL"), None).await.json();
    assert_eq!(events["events"].as_array().unwrap().len(), 1, "one event for one enrollment: {events}");

    // The seed's versioned name for the workstation's registration is the same handler.
    let r =
        post("/rp/versioned/client/registrations", enroll_body(&app, "corp\\ALICE", Some("fido-session-2")))
            .await;
    assert_eq!(r.status, 200, "{}", r.json());
    assert_eq!(r.json()["response"]["sessionId"], "fido-session-2");
    assert_eq!(r.json()["response"]["device"], body["response"]["device"], "the same answer as enroll");

    // The password path: no sessionId, a server-issued one in the body (a workstation built to
    // the seed reads only the body) and the header; a failure is recorded.
    let r = post("/rp/wsapi/client/enroll", enroll_body(&app, "alice@example.com", None)).await;
    let issued = r.json()["response"]["sessionId"].as_str().unwrap().to_owned();
    assert_eq!(r.header("x-enrollment-session-id"), Some(issued.as_str()));
    assert!(issued.starts_with("ens-"));
    let r =
        post("/rp/wasapi/client/enroll/complete", complete_body(&issued, "alice@example.com", 1207)).await;
    assert_eq!(r.status, 200, "{}", r.json());
    let failed =
        h.admin("GET", &format!("/rp/api/events?appId={app}&name=OOB_WORKSTATION_REG"), None).await.json();
    let event = &failed["events"][0];
    assert_eq!(
        (event["attributes"]["success"].as_bool(), event["attributes"]["errorCode"].as_i64()),
        (Some(false), Some(1207))
    );

    // The same user may enroll again on a session while it is open: the second enroll's data
    // replaces the first's (here, the machine it pins). Another user may not take the session,
    // and no one may enroll on it once it is completed (409, naming sessionId).
    registered_user(&h, &app, "bob@example.com", None).await;
    let pinning = |user: &str, machine: Option<&str>| {
        let mut body = enroll_body(&app, user, Some("fido-session-3"));
        if let Some(machine) = machine {
            body["machineId"] = json!(machine);
        }
        body
    };
    assert_eq!(
        post("/rp/wsapi/client/enroll", pinning("alice@example.com", Some("machine-7"))).await.status,
        200
    );
    assert_eq!(
        post("/rp/wsapi/client/enroll", pinning("alice@example.com", Some("machine-42"))).await.status,
        200
    );
    let r = post("/rp/wsapi/client/enroll", pinning("bob@example.com", None)).await;
    assert_eq!(r.problem(409, codes::SESSION_CONFLICT)["field"], "sessionId");
    let r =
        post("/rp/wasapi/client/enroll/complete", complete_body("fido-session-3", "alice@example.com", 0))
            .await;
    assert_eq!(r.status, 200, "on the machine the second enroll pinned: {}", r.json());
    let r = post("/rp/wsapi/client/enroll", pinning("alice@example.com", None)).await;
    assert_eq!(r.problem(409, codes::SESSION_CONFLICT)["field"], "sessionId");

    // Other apps, unknown users, expired sessions.
    let other_app = h.app().await;
    let r = post("/rp/wsapi/client/enroll", enroll_body(&other_app, "alice@example.com", None)).await;
    r.problem(403, codes::OTHER_TENANT);
    let r = post("/rp/wsapi/client/enroll", enroll_body(&app, "nobody@example.com", None)).await;
    assert_eq!(r.problem(400, codes::UNKNOWN_USER)["field"], "machineUserNameWS");
    let r =
        post("/rp/wsapi/client/enroll", enroll_body(&app, "alice@example.com", Some("late-session"))).await;
    assert_eq!(r.status, 200);
    h.clock.advance(Duration::from_secs(11 * 60));
    let r = post("/rp/wasapi/client/enroll/complete", complete_body("late-session", "alice@example.com", 0))
        .await;
    r.problem(400, codes::SESSION_NOT_FOUND);
    let r = h
        .client
        .send(
            "POST",
            "/rp/wsapi/client/enroll",
            Some(&h.admin),
            Some(enroll_body(&app, "alice@example.com", None)),
        )
        .await;
    r.problem(403, codes::WRONG_TOKEN_KIND);
}

pub async fn pairing_queues_one_certificate_request(h: Harness) {
    let app = h.app().await;
    let device_id = registered_user(&h, &app, "alice@example.com", Some("CORP\\alice")).await;
    let access = h.access_token(&app).await;
    super::certificates::enroll(&h, &access, &app, "CORP\\alice", "machine-7").await;
    let body = json!({"machineId": "machine-7", "deviceId": device_id, "machineName": "WS-7", "machineUserNameWS": "CORP\\alice"});
    let r = h.client.send("POST", "/rp/api/client/reg", Some(&access), Some(body.clone())).await;
    assert_eq!(r.status, 201, "{}", r.json());
    let pairing = r.json();
    assert_eq!(pairing["rpConfig"]["workstation"]["offlineAccess"]["tokenCount"], 25);
    assert_eq!(pairing["workstation"]["offline"], json!({"tokens": "", "tokensAuth": ""}));
    let request_id = pairing["certificateRequestId"].as_str().unwrap().to_owned();

    let request = h.request(&request_id).await;
    assert_eq!((request.kind, request.state), (RequestKind::LoginCert, RequestState::Pending));
    assert_eq!(request.request_timeout_in_secs, 300);
    assert_eq!(request.machine_user_name_ws.as_deref(), Some("CORP\\alice"));
    assert_eq!(request.machine_user_name.as_deref(), Some("alice@example.com"));
    assert_eq!(request.device_id.as_deref(), Some(device_id.as_str()));
    assert!(request.device_key_agreement_public_key.as_ref().is_some_and(|k| STANDARD
        .decode(k)
        .unwrap()
        .len()
        == 65));
    assert_eq!(request.enc_counter.as_deref(), Some("1"));
    // The workstation's next enroll reads the device's counter where the pairing left it.
    let enroll = enroll_body(&app, "CORP\\alice", None);
    let r = h.client.send("POST", "/rp/wsapi/client/enroll", Some(&access), Some(enroll)).await;
    assert_eq!(r.json()["response"]["device"]["encCounter"], "1", "{}", r.json());

    // Seed rule 4: the same machine and device again returns the pairing and queues nothing.
    let again = h.client.send("POST", "/rp/api/client/reg", Some(&access), Some(body)).await;
    assert_eq!(again.status, 200);
    assert_eq!(again.json()["certificateRequestId"], request_id.as_str());
    let shard = format!("CERTQ#PENDING#{app}");
    let queued = h.backend.store.query(Query::index(Index::Gsi1, shard).limit(1000)).await.unwrap();
    let mine = queued.items.iter().filter(|i| i.attrs["deviceId"] == device_id.as_str()).count();
    assert_eq!(mine, 1, "one request per pairing");

    let path = format!("/rp/api/client/reg?machineId=machine-7&deviceId={device_id}");
    let read = h.client.send("GET", &path, Some(&access), None).await;
    assert_eq!((read.status.as_u16(), read.json()["machineName"].as_str()), (200, Some("WS-7")));
    let r = h.client.send("GET", "/rp/api/client/reg?machineId=machine-7", Some(&access), None).await;
    assert_eq!(r.problem(400, codes::INVALID_FIELD)["field"], "deviceId");
    h.client
        .send("GET", "/rp/api/client/reg?machineId=other&deviceId=x1", Some(&access), None)
        .await
        .problem(404, codes::PAIRING_NOT_FOUND);
    let r = h
        .client
        .send(
            "POST",
            "/rp/api/client/reg",
            Some(&access),
            Some(json!({"machineId": "m", "deviceId": "ghost"})),
        )
        .await;
    assert_eq!(r.problem(400, codes::UNKNOWN_DEVICE)["field"], "deviceId");

    // Offline tokens: refused while offline access is off, sealed at rest once on.
    let offline = json!({"machineId": "machine-7", "deviceId": device_id, "offline": {"tokens": "p1:12345678,p2:87654321", "tokensAuth": "c2lnbmF0dXJl"}});
    let r = h.client.send("PATCH", "/rp/api/client/reg", Some(&access), Some(offline.clone())).await;
    r.problem(403, codes::OFFLINE_DISABLED);
    h.admin(
        "PUT",
        &format!("/cc/api/apps/{app}/workstation"),
        Some(json!({"offlineAccess": {"enabled": true}})),
    )
    .await;
    let r = h.client.send("PATCH", "/rp/api/client/reg", Some(&access), Some(offline)).await;
    assert_eq!(r.status, 200, "{}", r.json());
    assert_eq!(r.json()["workstation"]["offline"]["tokens"], "p1:12345678,p2:87654321");
    assert_eq!(r.header("cache-control"), Some("no-store"));
    assert_eq!(r.json()["rpConfig"]["workstation"]["offlineAccess"]["enabled"], true);
    let raw = h
        .backend
        .store
        .get(&rp_shared::ports::ItemKey::new(format!("PAIR#{app}#machine-7"), format!("DEVICE#{device_id}")))
        .await
        .unwrap()
        .unwrap();
    assert!(!serde_json::to_string(&raw.attrs).unwrap().contains("12345678"), "tokens are encrypted at rest");
    assert_eq!(
        h.client.send("GET", &path, Some(&access), None).await.json()["workstation"]["offline"]["tokensAuth"],
        "c2lnbmF0dXJl"
    );
    let r = h
        .client
        .send(
            "PATCH",
            "/rp/api/client/reg",
            Some(&access),
            Some(json!({"machineId": "machine-7", "deviceId": device_id})),
        )
        .await;
    assert_eq!(r.problem(400, codes::INVALID_FIELD)["field"], "body");

    // Another app's token sees nothing of it.
    let other = h.access_token(&h.app().await).await;
    h.client.send("GET", &path, Some(&other), None).await.problem(404, codes::PAIRING_NOT_FOUND);
}

pub async fn events_are_reported_and_listed(h: Harness) {
    let app = h.app().await;
    let access = h.access_token(&app).await;
    let r = h
        .client
        .send(
            "POST",
            "/rp/api/events",
            Some(&access),
            Some(json!({"name": "OOB_WORKSTATION_REG", "attributes": {"success": false, "machineId": "m1"}})),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.json());
    let start = {
        use rp_shared::ports::Clock;
        h.clock.now_millis()
    };
    h.clock.advance(Duration::from_secs(60));
    let r = h.admin("POST", "/rp/api/events", Some(json!({"name": "WORKSTATION_CERTIFICATE_ISSUED", "appId": app, "attributes": {"isSuccessful": false, "errorCode": 17}}))).await;
    assert_eq!(r.status, 201, "{}", r.json());
    for (body, field) in [
        (json!({"name": "SOMETHING_ELSE"}), "name"),
        (json!({"name": "WORKSTATION_ENROLL", "attributes": {"nested": {"a": 1}}}), "attributes.nested"),
        (json!({"name": "WORKSTATION_ENROLL", "appId": "noSuchApp"}), "appId"),
        (json!({"attributes": {}}), "name"),
    ] {
        let r = h.admin("POST", "/rp/api/events", Some(body.clone())).await;
        assert_eq!(r.problem(400, codes::INVALID_FIELD)["field"], field, "{body}");
    }
    // At most 32 attributes, the document's `maxProperties` (an event of no app, listed apart).
    let with = |n: usize| {
        let attributes: serde_json::Map<String, Value> =
            (0..n).map(|i| (format!("a{i}"), json!(i))).collect();
        json!({"name": "WORKSTATION_ENROLL", "attributes": attributes})
    };
    let r = h.admin("POST", "/rp/api/events", Some(with(33))).await;
    assert_eq!(r.problem(400, codes::INVALID_FIELD)["field"], "attributes");
    let r = h.admin("POST", "/rp/api/events", Some(with(32))).await;
    assert_eq!(r.status, 201, "{}", r.json());
    let r = h
        .client
        .send(
            "POST",
            "/rp/api/events",
            Some(&access),
            Some(json!({"name": "WORKSTATION_ENROLL", "appId": "otherApp"})),
        )
        .await;
    r.problem(403, codes::OTHER_TENANT);

    let all = h.admin("GET", &format!("/rp/api/events?appId={app}"), None).await.json();
    let names: Vec<_> =
        all["events"].as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap().to_owned()).collect();
    assert_eq!(names, ["OOB_WORKSTATION_REG", "WORKSTATION_CERTIFICATE_ISSUED"], "in time order");
    let first = &all["events"][0];
    assert!(first["source"].as_str().unwrap().starts_with("workstation:"));
    assert_eq!(all["events"][1]["attributes"]["errorCode"], 17);
    let by_name = h
        .admin("GET", &format!("/rp/api/events?appId={app}&name=WORKSTATION_CERTIFICATE_ISSUED"), None)
        .await
        .json();
    assert_eq!(by_name["events"].as_array().unwrap().len(), 1);
    let cutoff = rp_shared::domain::EpochMillis(start.as_millis() - 1).iso8601();
    let later = h.admin("GET", &format!("/rp/api/events?appId={app}&to={cutoff}"), None).await.json();
    assert_eq!(later["events"].as_array().unwrap().len(), 0, "nothing before the first event");
    let from_second = rp_shared::domain::EpochMillis(start.as_millis() + 1).iso8601();
    let tail = h.admin("GET", &format!("/rp/api/events?appId={app}&from={from_second}"), None).await.json();
    assert_eq!(tail["events"].as_array().unwrap().len(), 1, "only the later event");
    let paged = h.admin("GET", &format!("/rp/api/events?appId={app}&limit=1"), None).await.json();
    assert_eq!(paged["events"].as_array().unwrap().len(), 1);
    let next = paged["nextCursor"].as_str().expect("a second page");
    let second =
        h.admin("GET", &format!("/rp/api/events?appId={app}&limit=1&cursor={next}"), None).await.json();
    assert_eq!(second["events"][0]["name"], "WORKSTATION_CERTIFICATE_ISSUED");
    let r = h.admin("GET", "/rp/api/events?from=yesterday", None).await;
    assert_eq!(r.problem(400, codes::INVALID_FIELD)["field"], "from");
    h.client.send("GET", "/rp/api/events", Some(&access), None).await.problem(403, codes::WRONG_TOKEN_KIND);

    // A global admin may name the app in `X-Tenant-Id` instead, as on the tenant-scoped
    // endpoints; the header and `appId` must agree, and the header must name an app.
    let enroll = json!({"name": "WORKSTATION_ENROLL"});
    assert_eq!(h.as_tenant(&app, "POST", "/rp/api/events", Some(enroll.clone())).await.status, 201);
    let listed =
        h.admin("GET", &format!("/rp/api/events?appId={app}&name=WORKSTATION_ENROLL"), None).await.json();
    assert_eq!(listed["events"].as_array().unwrap().len(), 1, "stored under the app the header names");
    let agreeing = json!({"name": "WORKSTATION_ENROLL", "appId": app});
    assert_eq!(
        h.as_tenant(&app, "POST", "/rp/api/events", Some(agreeing)).await.status,
        201,
        "both, agreeing"
    );
    for (tenant, body) in [
        ("noSuchApp", enroll.clone()),
        ("a!", enroll.clone()),
        (app.as_str(), json!({"name": "WORKSTATION_ENROLL", "appId": "otherApp"})),
    ] {
        let r = h.as_tenant(tenant, "POST", "/rp/api/events", Some(body)).await;
        assert_eq!(r.problem(400, codes::INVALID_FIELD)["field"], "X-Tenant-Id", "{tenant}");
    }
    let other = [("x-tenant-id", "otherApp")];
    h.client
        .send_with("POST", "/rp/api/events", Some(&access), &other, Some(enroll))
        .await
        .problem(403, codes::OTHER_TENANT);
    // A workstation, or an admin token scoped to the app, may name its own app, and no other.
    let scoped = h.token_for("controlCenterAdmin", &app).await;
    let named = json!({"name": "WORKSTATION_ENROLL", "appId": app});
    for token in [&access, &scoped] {
        let r = h.client.send("POST", "/rp/api/events", Some(token), Some(named.clone())).await;
        assert_eq!(r.status, 201, "{}", r.json());
    }
    let elsewhere = json!({"name": "WORKSTATION_ENROLL", "appId": h.app().await});
    let r = h.client.send("POST", "/rp/api/events", Some(&scoped), Some(elsewhere)).await;
    r.problem(403, codes::OTHER_TENANT);
}

/// A report that names its own id (`eventId`) is stored once: sent again after a lost answer,
/// it is answered as the first time and stores nothing; the id of another report's content is
/// refused; ids are each app's own.
pub async fn a_reported_event_sent_again_is_stored_once(h: Harness) {
    let app = h.app().await;
    let access = h.access_token(&app).await;
    let id = "3f1c9a52-7d3e-4b8a-9c1e-5a2f6b7d8e90";
    let report = json!({"name": "OOB_WORKSTATION_REG", "eventId": id, "attributes": {"success": false, "machineId": "m1"}});
    let post = |token: &str, body: &Value| {
        let (token, body) = (token.to_owned(), body.clone());
        let client = h.client.clone();
        async move { client.send("POST", "/rp/api/events", Some(&token), Some(body)).await }
    };
    let first = post(&access, &report).await;
    assert_eq!(first.status, 201, "{}", first.json());
    assert_eq!(first.json()["eventId"], id, "the reporter's id is the event's");
    h.clock.advance(Duration::from_secs(5));
    let again = post(&access, &report).await;
    assert_eq!((again.status.as_u16(), again.json()), (201, first.json()), "answered as the first time");
    let mut other = report.clone();
    other["attributes"]["machineId"] = json!("m2");
    assert_eq!(post(&access, &other).await.problem(409, codes::EVENT_ID_TAKEN)["field"], "eventId");
    let another_workstation = h.access_token(&app).await;
    post(&another_workstation, &report).await.problem(409, codes::EVENT_ID_TAKEN);
    let other_app = h.app().await;
    let r = post(&h.access_token(&other_app).await, &report).await;
    assert_eq!(r.status, 201, "another app's id: {}", r.json());
    let plain = json!({"name": "WORKSTATION_ENROLL"});
    for _ in 0..2 {
        assert_eq!(post(&access, &plain).await.status, 201);
    }
    let listed = h.admin("GET", &format!("/rp/api/events?appId={app}"), None).await.json();
    let events = listed["events"].as_array().unwrap();
    let names: Vec<_> = events.iter().map(|e| e["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["OOB_WORKSTATION_REG", "WORKSTATION_ENROLL", "WORKSTATION_ENROLL"],
        "without an id, each is one"
    );
    assert_eq!((&events[0]["eventId"], &events[0]["timestamp"]), (&json!(id), &first.json()["timestamp"]));
    for bad in [json!(""), json!("a#b"), json!("x".repeat(129)), json!(7)] {
        let body = json!({"name": "WORKSTATION_ENROLL", "eventId": bad});
        assert_eq!(
            post(&access, &body).await.problem(400, codes::INVALID_FIELD)["field"],
            "eventId",
            "{bad}"
        );
    }
}

/// A report held at its write while the same report, sent again, lands: the held one finds it
/// and answers with it, and one event is stored.
pub async fn a_report_held_while_its_repeat_lands_stores_one_event(h: Harness) {
    use rp_shared::app::events::{report, Report};
    use rp_shared::domain::events::attributes;
    let app = h.app().await;
    let app_id = AppId::parse("appId", &app).unwrap();
    let sent = || Report {
        name: "WORKSTATION_ENROLL".into(),
        event_id: Some("held-report-1".into()),
        attributes: attributes(&[("machineId", "m1")]),
    };
    let held_app = app_id.clone();
    let (gate, held) = h
        .held(move |held| async move {
            report(&held, sent(), Some(held_app), None, "appId", "agent:a1".into())
                .await
                .map_err(|e| e.to_string())
        })
        .await;
    h.clock.advance(Duration::from_secs(1));
    let state = rp_shared::http::AppState::new(h.backend.clone(), HttpConfig::default());
    let landed = report(&state, sent(), Some(app_id), None, "appId", "agent:a1".into()).await.unwrap();
    gate.open(true);
    assert_eq!(held.await.unwrap(), Ok(landed.clone()), "the held report is answered with the stored one");
    let listed = h.admin("GET", &format!("/rp/api/events?appId={app}"), None).await.json();
    let ids: Vec<_> = listed["events"].as_array().unwrap().iter().map(|e| e["eventId"].clone()).collect();
    assert_eq!(ids, [json!("held-report-1")], "{listed}");
    assert_eq!(listed["events"][0]["timestamp"], json!(landed.at.iso8601()));
}

/// Each app's events are stored in that app's own partition, so one tenant's events never load
/// another's; the listings across apps still find every app's events, in time order, page by
/// page.
pub async fn each_apps_events_are_stored_apart_and_listed_across_apps(h: Harness) {
    let (a, b) = (h.app().await, h.app().await);
    let from = {
        use rp_shared::ports::Clock;
        h.clock.now_millis()
    };
    let mut posted = Vec::new();
    for app in [&a, &b, &a] {
        let body = json!({"name": "WORKSTATION_ENROLL", "appId": app});
        let r = h.admin("POST", "/rp/api/events", Some(body)).await;
        assert_eq!(r.status, 201, "{}", r.json());
        posted.push(r.json()["eventId"].as_str().unwrap().to_owned());
        h.clock.advance(Duration::from_millis(5));
    }
    let stored = |app: &str| {
        let query = Query::table(format!("EVENT#{app}"));
        let store = h.backend.store.clone();
        async move {
            let page = store.query(query).await.unwrap();
            page.items
                .iter()
                .map(|i| i.data::<Value>().unwrap()["eventId"].as_str().unwrap().to_owned())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(stored(&a).await, [posted[0].clone(), posted[2].clone()]);
    assert_eq!(stored(&b).await, [posted[1].clone()]);

    // Other tests write events in the same window on a shared table: ours must be among those
    // listed, in their order, and the whole listing in time order.
    let window = format!("from={}&to={}", from.iso8601(), from.plus_secs(1).iso8601());
    for filter in [format!("name=WORKSTATION_ENROLL&{window}"), window.clone()] {
        let (mut listed, mut cursor, mut pages) = (Vec::<Value>::new(), None::<String>, 0);
        loop {
            let after = cursor.map(|c| format!("&cursor={c}")).unwrap_or_default();
            let page = h.admin("GET", &format!("/rp/api/events?{filter}&limit=2{after}"), None).await.json();
            listed.extend(page["events"].as_array().unwrap().iter().cloned());
            pages += 1;
            assert!(pages < 500, "the cursor moves on");
            match page["nextCursor"].as_str() {
                Some(next) => cursor = Some(next.to_owned()),
                None => break,
            }
        }
        let times: Vec<&str> = listed.iter().map(|e| e["timestamp"].as_str().unwrap()).collect();
        assert!(times.windows(2).all(|w| w[0] <= w[1]), "{filter}: in time order");
        let ours: Vec<&str> = listed
            .iter()
            .map(|e| e["eventId"].as_str().unwrap())
            .filter(|id| posted.iter().any(|p| p == id))
            .collect();
        assert_eq!(ours, posted, "{filter}");
    }

    // A cursor of one listing is refused by another.
    let page = h.admin("GET", &format!("/rp/api/events?appId={a}&limit=1"), None).await.json();
    let next = page["nextCursor"].as_str().expect("a second page");
    let r = h.admin("GET", &format!("/rp/api/events?appId={b}&limit=1&cursor={next}"), None).await;
    assert_eq!(r.problem(400, codes::INVALID_FIELD)["field"], "cursor");
}

pub async fn link_to_queued_certificate_request_end_to_end(h: Harness) {
    let app = h.app().await;
    h.admin("PUT", &format!("/cc/api/apps/{app}/workstation"), Some(json!({"requestTimeoutInSecs": 2})))
        .await;
    let created = link(&h, &app, "dave@example.com", Some(json!({"machineUserNameWS": "CORP\\dave"}))).await;
    let code = created["code"].as_str().unwrap().to_owned();
    let page = h.client.send("GET", &format!("/rp/register/{code}"), None, None).await;
    assert_eq!(page.status, 200);
    let registered = h
        .client
        .send("POST", "/rp/versioned/device/registrations", None, Some(registration(&code, "daves-phone")))
        .await;
    assert_eq!(registered.status, 201);
    let access = h.access_token(&app).await;
    let enrolled = h
        .client
        .send("POST", "/rp/wsapi/client/enroll", Some(&access), Some(enroll_body(&app, "CORP\\dave", None)))
        .await;
    let session = enrolled.header("x-enrollment-session-id").unwrap().to_owned();
    let done = h
        .client
        .send(
            "POST",
            "/rp/wasapi/client/enroll/complete",
            Some(&access),
            Some(complete_body(&session, "dave@example.com", 0)),
        )
        .await;
    assert_eq!(done.status, 200, "{}", done.json());
    let paired = h.client.send("POST", "/rp/api/client/reg", Some(&access), Some(json!({"machineId": "machine-42", "deviceId": "daves-phone", "machineUserNameWS": "CORP\\dave"}))).await;
    assert_eq!(paired.status, 201);
    let request_id = paired.json()["certificateRequestId"].as_str().unwrap().to_owned();
    let request = h.request(&request_id).await;
    assert_eq!(request.state, RequestState::Pending);
    assert_eq!(request.request_timeout_in_secs, 2);
    assert_eq!(request.machine_user_name.as_deref(), Some("dave@example.com"));
}
