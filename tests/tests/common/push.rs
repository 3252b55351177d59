//! Waking devices: a device registers its push token, and an OOB start, a workstation's offline
//! PINs and an issued certificate each wake it with only a kind and an id; a device without a
//! registration is not woken, and a failed wake-up never fails the call. On the AWS backend the
//! wake-ups go through SNS on the emulator (LocalStack or moto), whose own record is checked too.

use super::certificates::{agent_for, device, TestDevice};
use super::oob::{start, start_body};
use super::Harness;
use rp_shared::domain::push::{Platform, WakeKind};
use serde_json::{json, Value};

/// An SNS platform application for the case's app: on the AWS backend, made on the emulator's
/// SNS; on the embedded backend, any well-formed ARN (it only records).
async fn apns_application(h: &Harness, name: &str) -> String {
    platform_application(h, name, Platform::Apns).await
}

/// [`apns_application`], for `platform`.
async fn platform_application(h: &Harness, name: &str, platform: Platform) -> String {
    let platform = platform.sns_key();
    if h.backend.store.kind() != "dynamodb" {
        return format!("arn:aws:sns:us-east-1:123456789012:app/{platform}/{name}");
    }
    let clients = rp_shared::testing::aws::clients().await.expect("the AWS suite runs on emulators");
    let created = clients
        .sns
        .create_platform_application()
        .name(name)
        .platform(platform)
        .attributes("PlatformCredential", "test-credential")
        .attributes("PlatformPrincipal", "test-principal")
        .send()
        .await
        .expect("moto creates the platform application");
    created.platform_application_arn.expect("an ARN")
}

async fn register_push(h: &Harness, dev: &TestDevice, body: Value) -> rp_shared::testing::http::TestResponse {
    h.client.send("PUT", "/rp/versioned/device/push", Some(&dev.token), Some(body)).await
}

/// The wake-ups asked for the device's endpoint, as (kind, id, delivered).
fn woken(h: &Harness, endpoint: &str) -> Vec<(WakeKind, String, bool)> {
    h.pushes
        .asked()
        .into_iter()
        .filter(|a| a.endpoint == endpoint)
        .map(|a| (a.wake.kind, a.wake.id, a.delivered))
        .collect()
}

/// An app whose workstation settings name an APNS platform application.
async fn app_with_push(h: &Harness) -> String {
    let app = h.app().await;
    let arn = apns_application(h, &app).await;
    let r = h
        .admin("PUT", &format!("/cc/api/apps/{app}/workstation"), Some(json!({"push": {"apns": arn}})))
        .await;
    assert_eq!(r.status, 200, "{}", r.json());
    app
}

/// The device as stored.
async fn record_of(h: &Harness, dev: &TestDevice) -> rp_shared::domain::devices::DeviceRecord {
    let app = rp_shared::domain::apps::AppId::parse("appId", &dev.app).unwrap();
    let devices = rp_shared::repo::devices::Devices::new(h.backend.store.as_ref());
    devices.device(&app, &dev.device_id).await.unwrap().expect("the device").0
}

/// The device's push endpoint, as stored with it.
async fn endpoint_of(h: &Harness, dev: &TestDevice) -> (String, bool) {
    let push = record_of(h, dev).await.push.expect("a push registration");
    assert_eq!(push.platform, Platform::Apns);
    (push.endpoint, push.enabled)
}

pub async fn devices_are_woken_when_there_is_something_to_fetch(h: Harness) {
    let app = h.app().await;
    let arn = apns_application(&h, &app).await;
    let settings = json!({"offlineAccess": {"enabled": true, "tokenCount": 10}, "push": {"apns": arn}});
    let r = h.admin("PUT", &format!("/cc/api/apps/{app}/workstation"), Some(settings)).await;
    assert_eq!(r.status, 200, "{}", r.json());
    assert_eq!(r.json()["push"]["apns"], arn.as_str());
    let access = h.access_token(&app).await;
    let dev = device(&h, &app, "ivy@example.com", None).await;
    let quiet = device(&h, &app, "jon@example.com", None).await;

    // Registering: a platform the app has no application for, and a malformed token, are 400s.
    let r = register_push(&h, &dev, json!({"platform": "APNS_SANDBOX", "token": "ab12"})).await;
    assert_eq!(r.problem(400, rp_shared::http::problem::codes::INVALID_FIELD)["field"], "platform");
    let r = register_push(&h, &dev, json!({"platform": "APNS", "token": "not a token"})).await;
    assert_eq!(r.problem(400, rp_shared::http::problem::codes::INVALID_FIELD)["field"], "token");
    let r = h
        .client
        .send("PUT", "/rp/versioned/device/push", None, Some(json!({"platform": "APNS", "token": "ab12"})))
        .await;
    assert_eq!(r.status, 401);
    let token = hex::encode(rand::random::<[u8; 32]>());
    let r = register_push(&h, &dev, json!({"platform": "APNS", "token": token})).await;
    assert_eq!(r.status, 200, "{}", r.json());
    assert_eq!((r.json()["platform"].as_str(), r.json()["enabled"].as_bool()), (Some("APNS"), Some(true)));
    let (endpoint, _) = endpoint_of(&h, &dev).await;
    // The same token again keeps the endpoint: a retry changes nothing.
    assert_eq!(register_push(&h, &dev, json!({"platform": "APNS", "token": token})).await.status, 200);
    assert_eq!(endpoint_of(&h, &dev).await.0, endpoint);
    // A new token (the platform issued the phone another) is set on the same endpoint: no second
    // endpoint is left holding the old one.
    let token = hex::encode(rand::random::<[u8; 32]>());
    assert_eq!(register_push(&h, &dev, json!({"platform": "APNS", "token": token})).await.status, 200);
    assert_eq!(endpoint_of(&h, &dev).await.0, endpoint);

    // An OOB start wakes the device with the request's id alone.
    let request_id = start(&h, &access, start_body(&app, "ivy@example.com")).await;
    assert_eq!(woken(&h, &endpoint), [(WakeKind::Oob, request_id.clone(), true)]);
    // A user whose device never registered a token is not woken; the start succeeds.
    start(&h, &access, start_body(&app, "jon@example.com")).await;
    assert!(
        h.pushes.asked().iter().all(|a| a.endpoint == endpoint),
        "{quiet:?} has no endpoint",
        quiet = quiet.device_id
    );

    // A pairing with offline PINs wakes it for their setup; the issued certificate, for its fetch.
    let machine = Harness::unique("m");
    super::certificates::enroll(&h, &access, &app, "ivy@example.com", &machine).await;
    let body = json!({"machineId": machine, "deviceId": dev.device_id,
        "offline": {"tokens": "pin-01:40007919,pin-02:40015838", "tokensAuth": "YXV0aA=="}});
    let r = h.client.send("POST", "/rp/api/client/reg", Some(&access), Some(body)).await;
    assert_eq!(r.status, 201, "{}", r.json());
    let cert_request = r.json()["certificateRequestId"].as_str().unwrap().to_owned();
    assert_eq!(woken(&h, &endpoint)[1], (WakeKind::OfflineSetup, machine.clone(), true));
    let (agent, _ca, _server) = agent_for(&h).await;
    assert!(agent.run_once().await.unwrap().issued.contains(&cert_request));
    assert_eq!(woken(&h, &endpoint)[2], (WakeKind::Certificate, cert_request, true));

    if h.backend.store.kind() == "dynamodb" {
        sns_received_and_gone_endpoints_are_handled(&h, &app, &access, &dev, &endpoint, &request_id, &token)
            .await;
    }
}

/// The APNs payloads SNS on the emulator holds for `endpoint`, and each message as recorded:
/// moto keeps each whole message, every platform's part (`/moto-api/data.json`), LocalStack the
/// platform's part only (`/_aws/sns/platform-endpoint-messages`). `None` from an emulator that
/// keeps neither.
async fn apns_payloads_at_sns(endpoint: &str) -> Option<(Vec<Value>, Vec<String>)> {
    let base = rp_shared::testing::aws::endpoint("SNS").expect("an SNS endpoint");
    let read = |url: String| async move {
        let r = reqwest::get(url).await.ok().filter(|r| r.status().is_success())?;
        r.json::<Value>().await.ok()
    };
    let text = |v: &Value| serde_json::from_str::<Value>(v.as_str().expect("a JSON text")).unwrap();
    if let Some(data) = read(format!("{base}/moto-api/data.json")).await {
        let endpoints = data["sns"]["PlatformEndpoint"].as_array().cloned().unwrap_or_default();
        let mine = endpoints.iter().find(|e| e["arn"] == endpoint).expect("moto holds the endpoint");
        let messages: Vec<&Value> = mine["messages"].as_object().unwrap().values().collect();
        let recorded = messages.iter().map(|m| m.as_str().unwrap().to_owned()).collect();
        return Some((messages.iter().map(|m| text(&text(m)["APNS"])).collect(), recorded));
    }
    let url = format!("{base}/_aws/sns/platform-endpoint-messages?endpointArn={endpoint}");
    let data = read(url).await?;
    let messages = data["platform_endpoint_messages"][endpoint].as_array().cloned().unwrap_or_default();
    let recorded = messages.iter().map(|m| m["Message"].as_str().unwrap().to_owned()).collect();
    Some((messages.iter().map(|m| text(&text(&m["Message"]))).collect(), recorded))
}

/// On the emulator: SNS holds the published wake-up, with nothing but the kind and id; an
/// endpoint disabled at SNS fails the wake-up, not the start, and is marked disabled until the
/// device registers its token again.
async fn sns_received_and_gone_endpoints_are_handled(
    h: &Harness,
    app: &str,
    access: &str,
    dev: &TestDevice,
    endpoint: &str,
    request_id: &str,
    token: &str,
) {
    let Some((payloads, recorded)) = apns_payloads_at_sns(endpoint).await else {
        eprintln!("the SNS emulator keeps no record of what it published: the wake-up is not checked there");
        return;
    };
    let oob = payloads.iter().find(|p| p["id"] == request_id).expect("the OOB wake-up reached SNS");
    assert_eq!(oob, &json!({"aps": {"content-available": 1}, "kind": "oob", "id": request_id}));
    assert!(recorded.iter().all(|m| !m.contains("Sign in to")), "no transaction text leaves: {recorded:?}");

    let clients = rp_shared::testing::aws::clients().await.unwrap();
    clients
        .sns
        .set_endpoint_attributes()
        .endpoint_arn(endpoint)
        .attributes("Enabled", "false")
        .send()
        .await
        .unwrap();
    // A failed wake-up never fails the start (`start` holds it to 200).
    start(h, access, start_body(app, &dev.user)).await;
    assert!(!woken(h, endpoint).last().unwrap().2, "the disabled endpoint refused it");
    assert_eq!(endpoint_of(h, dev).await, (endpoint.to_owned(), false), "and is marked disabled");
    let r = register_push(h, dev, json!({"platform": "APNS", "token": token})).await;
    assert_eq!(r.status, 200, "{}", r.json());
    assert_eq!(endpoint_of(h, dev).await, (endpoint.to_owned(), true), "registering again enables it");
}

/// A new APNs token of `dev` (in `app`) registered through the use case, held past its reads
/// while the admin's `DELETE path` runs to its 204: its outcome.
async fn registered_past(
    h: &Harness,
    app: &str,
    dev: &TestDevice,
    path: &str,
) -> Result<rp_shared::domain::push::PushRegistration, String> {
    let app_id = rp_shared::domain::apps::AppId::parse("appId", app).unwrap();
    let (user, device_id) = (dev.user.clone(), dev.device_id.clone());
    let token = hex::encode(rand::random::<[u8; 32]>());
    let request = rp_shared::domain::push::PushToken::parse(Platform::Apns, token).unwrap();
    h.held_past_removal(path, move |held| async move {
        rp_shared::app::push::register_token(&held, &app_id, &user, &device_id, request)
            .await
            .map_err(|e| e.to_string())
    })
    .await
}

/// A removed device's push endpoint goes with it, so that no push token of a device that is
/// gone stays with the platform; a registration still running when the removal began deletes
/// the endpoint it made, and answers as for a device that is gone.
pub async fn removing_a_device_deletes_its_push_endpoint(h: Harness) {
    let app = app_with_push(&h).await;
    let (dev, racer) =
        (device(&h, &app, "kay@example.com", None).await, device(&h, &app, "lee@example.com", None).await);
    let token = hex::encode(rand::random::<[u8; 32]>());
    assert_eq!(register_push(&h, &dev, json!({"platform": "APNS", "token": token})).await.status, 200);
    let (endpoint, _) = endpoint_of(&h, &dev).await;
    let removed = h.admin("DELETE", &format!("/cc/api/apps/{app}/devices/{}", dev.device_id), None).await;
    assert_eq!(removed.status, 204, "{}", removed.json());
    assert_eq!(h.pushes.removed(), [endpoint]);

    // A registration whose write waits past the removal of its device.
    let refused =
        registered_past(&h, &app, &racer, &format!("/cc/api/apps/{app}/devices/{}", racer.device_id)).await;
    assert!(refused.as_ref().is_err_and(|e| e.contains(&racer.device_id)), "{refused:?}");
    let forgotten = h.pushes.removed();
    assert_eq!(forgotten.len(), 2, "the racing registration's endpoint went too: {forgotten:?}");

    if h.backend.store.kind() == "dynamodb" {
        let clients = rp_shared::testing::aws::clients().await.unwrap();
        for gone in forgotten {
            let read = clients.sns.get_endpoint_attributes().endpoint_arn(&gone).send().await;
            assert!(read.is_err(), "SNS no longer has {gone}: {read:?}");
        }
    }
}

/// A registration whose write waits past the end of its device's token finds the device kept
/// but frozen: it is refused as for a removed device, at once, and the endpoint it made goes
/// (retried, it would make endpoints until its retries ran out, and leave them all).
pub async fn a_registration_past_the_end_of_its_token_leaves_no_endpoint(h: Harness) {
    let app = app_with_push(&h).await;
    let dev = device(&h, &app, "max@example.com", None).await;
    let refused =
        registered_past(&h, &app, &dev, &format!("/cc/api/apps/{app}/devices/{}/token", dev.device_id)).await;
    assert!(refused.as_ref().is_err_and(|e| e.contains(&dev.device_id)), "{refused:?}");
    assert_eq!(record_of(&h, &dev).await.push, None, "the device is kept, with no endpoint");
    assert_eq!(h.pushes.removed().len(), 1, "the endpoint it made went: {:?}", h.pushes.removed());
}

/// One phone's token is one endpoint of a platform application, so each device record made on
/// that phone holds the same endpoint: in one app, or in several apps (tenants) naming the same
/// platform application. Removing one device, or moving one to another platform, leaves the
/// endpoint to the others; it goes with the last, as one a device moves off alone goes.
pub async fn a_push_endpoint_stays_while_another_device_holds_it(h: Harness) {
    let (tenant, other) = (h.app().await, h.app().await);
    let arn = apns_application(&h, &tenant).await;
    let sandbox = platform_application(&h, &format!("{tenant}-sandbox"), Platform::ApnsSandbox).await;
    let push = json!({"push": {"apns": arn, "apnsSandbox": sandbox}});
    for app in [&tenant, &other] {
        let r = h.admin("PUT", &format!("/cc/api/apps/{app}/workstation"), Some(push.clone())).await;
        assert_eq!(r.status, 200, "{}", r.json());
    }
    let phone = [
        device(&h, &tenant, "ora@example.com", None).await,
        device(&h, &tenant, "ora@example.com", None).await,
        device(&h, &other, "ora@example.com", None).await,
    ];
    let token = hex::encode(rand::random::<[u8; 32]>());
    for dev in &phone {
        assert_eq!(register_push(&h, dev, json!({"platform": "APNS", "token": token})).await.status, 200);
    }
    let (endpoint, _) = endpoint_of(&h, &phone[0]).await;
    for dev in &phone[1..] {
        assert_eq!(endpoint_of(&h, dev).await.0, endpoint, "one endpoint for the phone's token");
    }

    let remove = |dev: &TestDevice| {
        let path = format!("/cc/api/apps/{}/devices/{}", dev.app, dev.device_id);
        let h = &h;
        async move { h.admin("DELETE", &path, None).await }
    };
    assert_eq!(remove(&phone[0]).await.status, 204);
    let sandbox_token = hex::encode(rand::random::<[u8; 32]>());
    let moved =
        register_push(&h, &phone[1], json!({"platform": "APNS_SANDBOX", "token": sandbox_token})).await;
    assert_eq!(moved.status, 200, "{}", moved.json());
    assert_eq!(h.pushes.removed(), Vec::<String>::new(), "the other tenant's device still holds it");
    start(&h, &h.access_token(&other).await, start_body(&other, "ora@example.com")).await;
    let wakes = woken(&h, &endpoint);
    assert!(!wakes.is_empty() && wakes.iter().all(|(_, _, delivered)| *delivered), "{wakes:?}");

    assert_eq!(remove(&phone[2]).await.status, 204);
    assert_eq!(h.pushes.removed(), std::slice::from_ref(&endpoint), "its last holder went");
    let sandboxed = record_of(&h, &phone[1]).await.push.expect("its registration").endpoint;
    let back = register_push(&h, &phone[1], json!({"platform": "APNS", "token": token})).await;
    assert_eq!(back.status, 200, "{}", back.json());
    assert_eq!(h.pushes.removed(), [endpoint.clone(), sandboxed], "it held the one it moved off alone");
    if h.backend.store.kind() == "dynamodb" {
        let clients = rp_shared::testing::aws::clients().await.unwrap();
        let read = clients.sns.get_endpoint_attributes().endpoint_arn(&endpoint).send().await;
        assert!(read.is_err(), "SNS no longer has {endpoint}: {read:?}");
    }
}

/// A wake-up that finds the device's endpoint gone marks it disabled, and the device is not
/// woken again until it registers its token anew; one that finds gone an endpoint the device
/// has since moved off (it read the device before) leaves the device's current one alone.
pub async fn a_gone_endpoint_is_disabled_unless_the_device_moved_on(h: Harness) {
    use rp_shared::domain::devices::DeviceRecord;
    use rp_shared::ports::PushError;
    let app = app_with_push(&h).await;
    let access = h.access_token(&app).await;
    let dev = device(&h, &app, "max@example.com", None).await;
    let token = hex::encode(rand::random::<[u8; 32]>());
    assert_eq!(register_push(&h, &dev, json!({"platform": "APNS", "token": token})).await.status, 200);
    let (endpoint, _) = endpoint_of(&h, &dev).await;
    let record = record_of(&h, &dev).await;
    let state = rp_shared::http::AppState::new(h.backend.clone(), rp_shared::http::HttpConfig::default());

    let earlier = format!("{endpoint}-earlier");
    let before = DeviceRecord {
        push: record
            .push
            .clone()
            .map(|push| rp_shared::domain::push::PushRegistration { endpoint: earlier, ..push }),
        ..record.clone()
    };
    h.pushes.fail_next([PushError::Gone]);
    rp_shared::app::push::wake(&state, &before, WakeKind::Oob, "r-earlier").await;
    assert_eq!(endpoint_of(&h, &dev).await, (endpoint.clone(), true), "the endpoint it moved to stays");

    h.clock.advance(std::time::Duration::from_secs(5));
    h.pushes.fail_next([PushError::Gone]);
    rp_shared::app::push::wake(&state, &record, WakeKind::Oob, "r-gone").await;
    assert_eq!(endpoint_of(&h, &dev).await, (endpoint.clone(), false));
    assert_eq!(
        record_of(&h, &dev).await.push.map(|p| p.updated_at),
        Some(rp_shared::ports::Clock::now_millis(&h.clock)),
        "when it was marked"
    );
    start(&h, &access, start_body(&app, "max@example.com")).await;
    let only_the_gone_one = [(WakeKind::Oob, "r-gone".to_owned(), false)];
    assert_eq!(woken(&h, &endpoint), only_the_gone_one, "not woken past its endpoint's end");
    assert_eq!(register_push(&h, &dev, json!({"platform": "APNS", "token": token})).await.status, 200);
    assert_eq!(endpoint_of(&h, &dev).await, (endpoint.clone(), true), "registering again enables it");
}

/// A token the platform refuses is a 400 naming `token`, told in fixed words: the platform's own
/// (which can name the account's resources) go to the log only. A platform application the
/// platform finds missing or disabled is a 400 naming `platform`. Neither keeps an endpoint.
pub async fn a_token_the_platform_refuses_is_told_without_its_words(h: Harness) {
    use rp_shared::http::problem::codes::INVALID_FIELD;
    use rp_shared::ports::PushError;
    let app = app_with_push(&h).await;
    let dev = device(&h, &app, "nia@example.com", None).await;
    let token = hex::encode(rand::random::<[u8; 32]>());
    let words = "InvalidParameter: arn:aws:sns:us-east-1:123456789012:app/APNS/secret-app";
    h.pushes.refuse_next_registrations([PushError::Refused(words.into()), PushError::NoApplication]);
    let r = register_push(&h, &dev, json!({"platform": "APNS", "token": token})).await;
    let problem = r.problem(400, INVALID_FIELD);
    assert_eq!(problem["field"], "token");
    let detail = problem["detail"].as_str().unwrap();
    assert!(
        detail.starts_with("token: refused by the push platform") && !detail.contains("arn:"),
        "{detail}"
    );
    let r = register_push(&h, &dev, json!({"platform": "APNS", "token": token})).await;
    assert_eq!(r.problem(400, INVALID_FIELD)["field"], "platform");
    assert!(record_of(&h, &dev).await.push.is_none());
    assert_eq!(register_push(&h, &dev, json!({"platform": "APNS", "token": token})).await.status, 200);
}

/// A registration that loses its race to another change of the device (another registration,
/// between its read and its write) reads the device again and stores its own: only the device's
/// removal refuses it. The endpoint its first attempt made for the token is deleted: no second
/// endpoint holds it, and the device's own stays.
pub async fn a_registration_that_loses_a_race_reads_the_device_again(h: Harness) {
    use rp_shared::domain::push::PushToken;
    let app = app_with_push(&h).await;
    let dev = device(&h, &app, "ned@example.com", None).await;
    let app_id = rp_shared::domain::apps::AppId::parse("appId", &app).unwrap();
    let (user, device_id) = (dev.user.clone(), dev.device_id.clone());
    let held_token = hex::encode(rand::random::<[u8; 32]>());
    let request = PushToken::parse(Platform::Apns, held_token.clone()).unwrap();
    let (gate, held) = h
        .held(move |held| async move {
            rp_shared::app::push::register_token(&held, &app_id, &user, &device_id, request)
                .await
                .map_err(|e| e.to_string())
        })
        .await;
    let token = hex::encode(rand::random::<[u8; 32]>());
    assert_eq!(register_push(&h, &dev, json!({"platform": "APNS", "token": token})).await.status, 200);
    let (endpoint, _) = endpoint_of(&h, &dev).await;
    gate.open(true);
    let registered = held.await.unwrap();
    assert!(registered.as_ref().is_ok_and(|r| r.endpoint == endpoint), "{registered:?}");
    assert_eq!(endpoint_of(&h, &dev).await, (endpoint.clone(), true));
    let removed = h.pushes.removed();
    assert!(removed.len() == 1 && removed[0] != endpoint, "{removed:?}, the device's {endpoint}");
    if h.backend.store.kind() == "dynamodb" {
        let clients = rp_shared::testing::aws::clients().await.unwrap();
        let gone = clients.sns.get_endpoint_attributes().endpoint_arn(&removed[0]).send().await;
        assert!(gone.is_err(), "SNS no longer has the endpoint of the lost attempt: {gone:?}");
        let kept = clients.sns.get_endpoint_attributes().endpoint_arn(&endpoint).send().await.unwrap();
        assert_eq!(kept.attributes.unwrap()["Token"], held_token);
    }
}
