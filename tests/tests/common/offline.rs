//! Offline PIN cases: who sees the PINs, the device's single fetch, used PINs, the low-token
//! warning, the wrong-attempt lock, unpairing with its revocation, and removing a device.

use super::certificates::{
    agent_for, as_device, device, enroll, first_serial, issued_token, pair, refresh, TestDevice,
};
use super::Harness;
use rp_shared::http::problem::codes;
use serde_json::{json, Value};
use std::time::Duration;

/// An app with offline access on (PINs of 8, sets of 10, warning at 20 %, lock after 3), a
/// device, and a workstation (access token) paired with it with `pins` offline PINs.
async fn offline_pairing(h: &Harness, user: &str, pins: usize) -> (String, String, TestDevice, String) {
    let app = h.app().await;
    let settings = json!({"offlineAccess": {"enabled": true, "tokenCount": 10, "tokenLowWarningThresholdPercentage": 20,
        "maxWrongAttempts": 3, "lockoutSecs": 600}});
    let r = h.admin("PUT", &format!("/cc/api/apps/{app}/workstation"), Some(settings)).await;
    assert_eq!(r.status, 200, "{}", r.json());
    let access = h.access_token(&app).await;
    let dev = device(h, &app, user, None).await;
    let machine = Harness::unique("m");
    super::certificates::enroll(h, &access, &app, user, &machine).await;
    let body = json!({"machineId": machine, "deviceId": dev.device_id,
        "offline": {"tokens": tokens(pins), "tokensAuth": "YXV0aA=="}});
    let r = h.client.send("POST", "/rp/api/client/reg", Some(&access), Some(body)).await;
    assert_eq!(r.status, 201, "{}", r.json());
    assert_eq!(r.header("cache-control"), Some("no-store"));
    assert_eq!(r.json()["workstation"]["offline"]["tokens"], tokens(pins), "the owner sees its PINs");
    (app, access, dev, machine)
}

fn tokens(n: usize) -> String {
    (1..=n).map(|i| format!("pin-{i:02}:{:08}", 40_000_000 + i * 7919)).collect::<Vec<_>>().join(",")
}

fn reg_path(machine: &str, dev: &TestDevice) -> String {
    format!("/rp/api/client/reg?machineId={machine}&deviceId={}", dev.device_id)
}

/// The workstation (`token`) updates its pairing.
async fn patch(h: &Harness, token: &str, body: Value) -> rp_shared::testing::http::TestResponse {
    h.client.send("PATCH", "/rp/api/client/reg", Some(token), Some(body)).await
}

async fn setup(h: &Harness, dev: &TestDevice, machine: &str) -> rp_shared::testing::http::TestResponse {
    h.client
        .send("POST", "/rp/versioned/device/setup", Some(&dev.token), Some(json!({"machineId": machine})))
        .await
}

/// How the device `dev` lists its workstation `machine`.
async fn listed_workstation(h: &Harness, dev: &TestDevice, machine: &str) -> Value {
    let listed =
        h.client.send("GET", "/rp/versioned/device/workstations", Some(&dev.token), None).await.json();
    let workstations = listed["workstations"].as_array().unwrap_or_else(|| panic!("a list: {listed}"));
    workstations.iter().find(|w| w["machineId"] == machine).unwrap_or_else(|| panic!("{listed}")).clone()
}

/// The pairing of `dev` with `machine` in `app`, as stored.
async fn stored_pairing(
    h: &Harness,
    app: &str,
    machine: &str,
    dev: &TestDevice,
) -> rp_shared::domain::pairing::Pairing {
    let app_id = rp_shared::domain::apps::AppId::parse("appId", app).unwrap();
    let workstations = rp_shared::repo::workstations::Workstations::new(h.backend.store.as_ref());
    workstations.pairing(&app_id, machine, &dev.device_id).await.unwrap().expect("the pairing").0
}

/// The end of a device's token wins over its fetch of the PINs in flight: a fetch let in before
/// the end, held before its write while the admin ends the token, hands nothing over.
pub async fn a_token_end_wins_over_a_pin_fetch_in_flight(h: Harness) {
    use rp_shared::domain::apps::AppId;
    let (app, _access, dev, machine) = offline_pairing(&h, "tess@example.com", 5).await;
    let app_id = AppId::parse("appId", &app).unwrap();
    let (device_id, machine_id) = (dev.device_id.clone(), machine.clone());
    let token = format!("/cc/api/apps/{app}/devices/{}/token", dev.device_id);
    let refused = h
        .held_past_removal(&token, move |held| async move {
            rp_shared::app::offline::deliver(&held, &app_id, &machine_id, &device_id)
                .await
                .map(|delivered| delivered.pins.0.len())
                .map_err(|e| e.to_string())
        })
        .await;
    assert!(
        refused.as_ref().is_err_and(|e| e.contains("no pairing")),
        "the PINs went to a device whose token ended, or it was not told 404: {refused:?}"
    );
    let pairing = stored_pairing(&h, &app, &machine, &dev).await;
    assert_eq!(pairing.offline_set.and_then(|set| set.delivered_at), None);
}

/// A fetch of the PINs that loses its race to another change of the pairing (its workstation
/// renames it between the fetch's read and its write) reads the pairing again and hands the
/// PINs over: only a device's removal or the end of its token refuses it.
pub async fn a_pin_fetch_that_loses_a_race_to_a_rename_reads_again(h: Harness) {
    use rp_shared::domain::apps::AppId;
    let (app, access, dev, machine) = offline_pairing(&h, "ines@example.com", 5).await;
    let app_id = AppId::parse("appId", &app).unwrap();
    let (device_id, machine_id) = (dev.device_id.clone(), machine.clone());
    let (gate, fetch) = h
        .held(move |held| async move {
            rp_shared::app::offline::deliver(&held, &app_id, &machine_id, &device_id)
                .await
                .map(|delivered| (delivered.pairing.machine_name, delivered.pins.0.len()))
                .map_err(|e| e.to_string())
        })
        .await;
    let rename = json!({"machineId": machine, "deviceId": dev.device_id, "machineName": "desk-7"});
    assert_eq!(patch(&h, &access, rename).await.status, 200);
    gate.open(true);
    let fetched = fetch.await.unwrap();
    assert_eq!(fetched, Ok((Some("desk-7".to_owned()), 5)), "the PINs, from the pairing as renamed");
    setup(&h, &dev, &machine).await.problem(410, codes::OFFLINE_DELIVERED);
}

pub async fn offline_pins_go_to_the_owner_and_the_device_once(h: Harness) {
    let (app, access, dev, machine) = offline_pairing(&h, "olga@example.com", 5).await;
    // Another workstation of the same app sees the pairing, not the PINs, and is told why.
    let other = h.access_token(&app).await;
    let seen = h.client.send("GET", &reg_path(&machine, &dev), Some(&other), None).await;
    assert_eq!(seen.status, 200);
    assert_eq!(seen.json()["workstation"]["offline"], json!({"tokens": "", "tokensAuth": ""}));
    assert_eq!(seen.json()["offlineStatus"]["hiddenReason"], "notOwner");
    assert_eq!(seen.json()["offlineStatus"]["tokensRemaining"], 5);
    let again = h
        .client
        .send(
            "POST",
            "/rp/api/client/reg",
            Some(&other),
            Some(json!({"machineId": machine, "deviceId": dev.device_id})),
        )
        .await;
    assert_eq!(
        (again.status.as_u16(), again.json()["workstation"]["offline"]["tokens"].as_str()),
        (200, Some(""))
    );
    // Nor may it use a PIN, or rename the pairing.
    for change in [json!({"usedTokenIds": ["pin-01"]}), json!({"machineName": "not-yours"})] {
        let mut body = json!({"machineId": machine, "deviceId": dev.device_id});
        body.as_object_mut().unwrap().extend(change.as_object().unwrap().clone());
        patch(&h, &other, body).await.problem(403, codes::NOT_PAIRING_OWNER);
    }
    let own = h.client.send("GET", &reg_path(&machine, &dev), Some(&access), None).await.json();
    assert_ne!(own["machineName"], "not-yours", "{own}");
    assert_eq!(
        (
            own["offlineStatus"]["tokensVisible"].as_bool(),
            own["offlineStatus"]["tokenEntryTimeoutSecs"].as_i64()
        ),
        (Some(true), Some(180))
    );

    // The device fetches the set once.
    let r = setup(&h, &dev, &machine).await;
    assert_eq!(r.status, 200, "{}", r.json());
    assert_eq!(r.header("cache-control"), Some("no-store"));
    assert_eq!(
        (r.json()["tokens"].as_str(), r.json()["tokensAuth"].as_str()),
        (Some(tokens(5).as_str()), Some("YXV0aA=="))
    );
    assert_eq!(r.json()["offlineAccess"]["tokenCount"], 10);
    setup(&h, &dev, &machine).await.problem(410, codes::OFFLINE_DELIVERED);
    let mine = listed_workstation(&h, &dev, &machine).await;
    assert_eq!((mine["active"].as_bool(), mine["tokensRemaining"].as_u64()), (Some(true), Some(5)));
    let own = h.client.send("GET", &reg_path(&machine, &dev), Some(&access), None).await.json();
    assert_eq!(own["offlineStatus"]["deliveredToDevice"], true);
    // A new set from the workstation can be fetched once again.
    let renew = json!({"machineId": machine, "deviceId": dev.device_id, "offline": {"tokens": tokens(10), "tokensAuth": "bmV3"}});
    assert_eq!(patch(&h, &access, renew).await.status, 200);
    assert_eq!(setup(&h, &dev, &machine).await.json()["tokensRemaining"], 10);

    // Input against the app's settings.
    for (tokens, field) in [
        ("pin-1:1234567", "offline.tokens[0]"),
        ("nocolon", "offline.tokens[0]"),
        ("a:12345678,a:87654321", "offline.tokens[1]"),
        ("a:12345678,b:12345678", "offline.tokens[1]"),
    ] {
        let body = json!({"machineId": machine, "deviceId": dev.device_id, "offline": {"tokens": tokens, "tokensAuth": "x"}});
        let r = patch(&h, &access, body).await;
        assert_eq!(r.problem(400, codes::INVALID_FIELD)["field"], field);
    }
    let too_many = json!({"machineId": machine, "deviceId": dev.device_id, "offline": {"tokens": tokens(11), "tokensAuth": "x"}});
    let r = patch(&h, &access, too_many).await;
    assert_eq!(r.problem(400, codes::INVALID_FIELD)["field"], "offline.tokens");
    // A member missing inside the set is named by its full path.
    let no_mac = json!({"machineId": machine, "deviceId": dev.device_id, "offline": {"tokens": tokens(5)}});
    let r = patch(&h, &access, no_mac).await;
    assert_eq!(r.problem(400, codes::INVALID_FIELD)["field"], "offline.tokensAuth");

    // Offline access off: the offline calls are refused and nothing is shown.
    h.admin(
        "PUT",
        &format!("/cc/api/apps/{app}/workstation"),
        Some(json!({"offlineAccess": {"enabled": false}})),
    )
    .await;
    let own = h.client.send("GET", &reg_path(&machine, &dev), Some(&access), None).await.json();
    assert_eq!(
        (own["workstation"]["offline"]["tokens"].as_str(), own["offlineStatus"]["hiddenReason"].as_str()),
        (Some(""), Some("offlineDisabled"))
    );
    setup(&h, &dev, &machine).await.problem(403, codes::OFFLINE_DISABLED);
    let used = json!({"machineId": machine, "deviceId": dev.device_id, "usedTokenIds": ["pin-01"]});
    patch(&h, &access, used).await.problem(403, codes::OFFLINE_DISABLED);
}

/// A device lists a workstation as active (offline login works on it) only once it has fetched
/// the workstation's PINs, and only until they are no longer valid.
pub async fn a_workstation_is_active_only_while_its_delivered_pins_are_valid(h: Harness) {
    let (_app, _access, dev, machine) = offline_pairing(&h, "ada@example.com", 5).await;
    let before = listed_workstation(&h, &dev, &machine).await;
    assert_eq!((before["active"].as_bool(), before["tokensRemaining"].as_u64()), (Some(false), Some(5)));
    assert_eq!(setup(&h, &dev, &machine).await.status, 200);
    let delivered = listed_workstation(&h, &dev, &machine).await;
    assert_eq!(delivered["active"], true, "{delivered}");
    let valid_until = delivered["validUntil"].as_i64().unwrap_or_else(|| panic!("{delivered}"));
    assert_eq!(before["validUntil"], valid_until, "set when the workstation sent them");
    let now = rp_shared::ports::Clock::now_millis(&h.clock).as_millis();
    h.clock.advance(Duration::from_millis((valid_until - now) as u64));
    let ended = listed_workstation(&h, &dev, &machine).await;
    assert_eq!((ended["active"].as_bool(), ended["validUntil"].as_i64()), (Some(false), Some(valid_until)));
}

pub async fn used_pins_are_deleted_and_warn_when_low(h: Harness) {
    let (app, access, dev, machine) = offline_pairing(&h, "pia@example.com", 10).await;
    let used = |ids: Value| json!({"machineId": machine, "deviceId": dev.device_id, "usedTokenIds": ids});
    let r = patch(&h, &access, used(json!(["pin-01"]))).await;
    assert_eq!(r.status, 200, "{}", r.json());
    assert!(
        !r.json()["workstation"]["offline"]["tokens"].as_str().unwrap().contains("pin-01:"),
        "deleted from the set"
    );
    assert_eq!(
        (
            r.json()["offlineStatus"]["tokensUsed"].as_u64(),
            r.json()["offlineStatus"]["lowTokenWarning"].as_bool()
        ),
        (Some(1), Some(false))
    );
    let replay = patch(&h, &access, used(json!(["pin-01"]))).await;
    assert_eq!(replay.problem(409, codes::PIN_GONE)["field"], "tokenId");
    // An update that reports a gone PIN changes nothing else it names either.
    let mut renamed = used(json!(["pin-03", "pin-01"]));
    renamed["machineName"] = json!("desk-renamed");
    patch(&h, &access, renamed).await.problem(409, codes::PIN_GONE);
    let own = h.client.send("GET", &reg_path(&machine, &dev), Some(&access), None).await.json();
    assert_ne!(own["machineName"], "desk-renamed", "the name is not half-written: {own}");
    assert_eq!(own["offlineStatus"]["tokensRemaining"], 9, "pin-03 is not used either: {own}");
    // The phone reports the next one; at 2 of 10 (20 %) the warning is on, on both sides.
    let phone_used = |id: &str| {
        let body = json!({"machineId": machine, "tokenIds": [id]});
        h.client.send("POST", "/rp/versioned/device/offline/used", Some(&dev.token), Some(body))
    };
    let r = phone_used("pin-02").await;
    assert_eq!(r.json(), json!({"machineId": machine, "tokensRemaining": 8, "lowTokenWarning": true}));
    phone_used("pin-02").await.problem(409, codes::PIN_GONE);
    let own = h.client.send("GET", &reg_path(&machine, &dev), Some(&access), None).await.json();
    assert_eq!(own["offlineStatus"]["lowTokenWarning"], true);
    let pins = own["workstation"]["offline"]["tokens"].as_str().unwrap().to_owned();
    assert!(!pins.contains("pin-02:") && pins.contains("pin-03:"));
    let raw = h
        .backend
        .store
        .get(&rp_shared::ports::ItemKey::new(
            format!("PAIR#{app}#{machine}"),
            format!("DEVICE#{}", dev.device_id),
        ))
        .await
        .unwrap()
        .unwrap();
    let stored = serde_json::to_string(&raw.attrs).unwrap();
    assert!(!stored.contains(&format!("{:08}", 40_000_000 + 3 * 7919)), "PINs are sealed at rest");
    // Deleted from the sealed set itself, not only from its list of ids: opened at rest, it
    // holds neither used PIN.
    let pairing = stored_pairing(&h, &app, &machine, &dev).await;
    let app_id = rp_shared::domain::apps::AppId::parse("appId", &app).unwrap();
    let context = rp_shared::app::offline::context(&app_id, &machine, &dev.device_id);
    let sealed = &pairing.offline_set.expect("a set").sealed;
    let plain = rp_shared::ports::keys::open(h.backend.keys.as_ref(), &context, sealed).await.unwrap();
    let at_rest: rp_shared::domain::offline::SealedTokens = serde_json::from_slice(&plain).unwrap();
    let held = at_rest.tokens;
    assert!(!held.contains("pin-01:") && !held.contains("pin-02:") && held.contains("pin-03:"));
}

/// The phone and the workstation report PINs at once, with machine-name changes among them (two
/// of them renames alone): each write starts from the pairing read beside the app, the losers of
/// a race read it again, and every report lands. Each workstation answer shows the PINs of the
/// set its write left, never those it read before losing a race (a rename opens the PINs beside
/// its write, and keeps them only if the set is unchanged). Each of the 8 racers writes once (a
/// name and its PINs go in one write), so a racer loses at most 7 races, each to another's
/// write: fewer than `CONFLICT_ATTEMPTS`, so none can run out of attempts. (When the name was a
/// write of its own, 9 writes let one racer lose 8 times, and about one run in 30 ended in a
/// 409.)
pub async fn racing_pin_reports_all_land(h: Harness) {
    let (_app, access, dev, machine) = offline_pairing(&h, "rosa@example.com", 10).await;
    let h = std::sync::Arc::new(h);
    let racers: Vec<_> = (1..=8)
        .map(|i| {
            let (h, access, machine) = (h.clone(), access.clone(), machine.clone());
            let (device_id, device_token) = (dev.device_id.clone(), dev.token.clone());
            tokio::spawn(async move {
                let pin = format!("pin-{i:02}");
                let mut body = json!({"machineId": machine, "deviceId": device_id,
                    "machineName": format!("desk-{i}")});
                let r = if i < 3 {
                    patch(&h, &access, body).await
                } else if i % 2 == 0 {
                    let body = json!({"machineId": machine, "tokenIds": [pin]});
                    h.client
                        .send("POST", "/rp/versioned/device/offline/used", Some(&device_token), Some(body))
                        .await
                } else {
                    body["usedTokenIds"] = json!([pin]);
                    patch(&h, &access, body).await
                };
                (r.status.as_u16(), r.json())
            })
        })
        .collect();
    for racer in racers {
        let (status, body) = racer.await.unwrap();
        assert_eq!(status, 200, "{body}");
        if let Some(pins) = body["workstation"]["offline"]["tokens"].as_str() {
            let shown = pins.split(',').filter(|p| !p.is_empty()).count();
            assert_eq!(Value::from(shown), body["offlineStatus"]["tokensRemaining"], "{body}");
        }
    }
    let own = h.client.send("GET", &reg_path(&machine, &dev), Some(&access), None).await.json();
    let pins = own["workstation"]["offline"]["tokens"].as_str().unwrap().to_owned();
    assert_eq!(own["offlineStatus"]["tokensRemaining"], 4, "{own}");
    for i in 3..=8 {
        assert!(!pins.contains(&format!("pin-{i:02}:")), "pin-{i:02} is gone: {pins}");
    }
    assert!(pins.contains("pin-01:") && pins.contains("pin-10:"));
    let names = ["desk-1", "desk-2", "desk-3", "desk-5", "desk-7"];
    assert!(names.contains(&own["machineName"].as_str().unwrap()), "{own}");
}

pub async fn wrong_attempts_lock_offline_access(h: Harness) {
    let (app, access, dev, machine) = offline_pairing(&h, "quinn@example.com", 5).await;
    let failed = |n: i64| json!({"machineId": machine, "deviceId": dev.device_id, "failedAttempts": n});
    let own = h.client.send("GET", &reg_path(&machine, &dev), Some(&access), None).await.json();
    let r = patch(&h, &access, failed(2)).await;
    assert_eq!(r.json()["offlineStatus"]["lockedUntil"], Value::Null);
    // Counted, not yet locked: the owner still sees its PINs.
    assert_eq!(r.json()["workstation"]["offline"], own["workstation"]["offline"], "{}", r.json());
    let r = patch(&h, &access, failed(1)).await;
    assert_eq!(r.status, 200, "{}", r.json());
    assert!(r.json()["offlineStatus"]["lockedUntil"].is_i64(), "the third wrong attempt locks");
    assert_eq!(r.json()["offlineStatus"]["hiddenReason"], "locked");
    assert_eq!(r.json()["workstation"]["offline"]["tokens"], "", "locked: no PINs shown: {}", r.json());
    let until = r.json()["offlineStatus"]["lockedUntil"].clone();
    assert_eq!(listed_workstation(&h, &dev, &machine).await["lockedUntil"], until, "the phone sees it too");
    let locked = setup(&h, &dev, &machine).await;
    locked.problem(423, codes::OFFLINE_LOCKED);
    assert!(locked.header("retry-after").is_some());
    let used = json!({"machineId": machine, "deviceId": dev.device_id, "usedTokenIds": ["pin-01"]});
    patch(&h, &access, used).await.problem(423, codes::OFFLINE_LOCKED);
    let events =
        h.admin("GET", &format!("/rp/api/events?appId={app}&name=OFFLINE_ACCESS_LOCKED"), None).await.json();
    assert_eq!(events["events"][0]["attributes"]["machineId"], machine.as_str(), "{events}");
    h.clock.advance(Duration::from_secs(601));
    assert_eq!(listed_workstation(&h, &dev, &machine).await["lockedUntil"], Value::Null);
    assert_eq!(setup(&h, &dev, &machine).await.status, 200, "the lock ends");
}

pub async fn unpairing_queues_the_revocation_the_agent_carries_out(h: Harness) {
    let (app, access, dev, machine) = offline_pairing(&h, "rita@example.com", 5).await;
    // The pairing's certificate is issued first.
    let (agent, ca, _server) = agent_for(&h).await;
    let issued = agent.run_once().await.unwrap();
    assert_eq!(issued.issued.len(), 1, "{issued:?}");
    let serial = first_serial(&h, &dev).await;
    let other = h.access_token(&app).await;
    let pairing = reg_path(&machine, &dev);
    h.client.send("DELETE", &pairing, Some(&other), None).await.problem(403, codes::NOT_PAIRING_OWNER);
    let r = h.client.send("DELETE", &pairing, Some(&access), None).await;
    assert_eq!(r.status, 204, "{}", String::from_utf8_lossy(&r.body));
    h.client.send("DELETE", &pairing, Some(&access), None).await.problem(404, codes::PAIRING_NOT_FOUND);
    h.client.send("GET", &pairing, Some(&access), None).await.problem(404, codes::PAIRING_NOT_FOUND);
    let revoked = agent.run_once().await.unwrap();
    assert_eq!(revoked.revoked.len(), 1, "{revoked:?}");
    assert!(ca.is_revoked(&serial));
    let events =
        h.admin("GET", &format!("/rp/api/events?appId={app}&name=WORKSTATION_UNPAIRED"), None).await.json();
    assert_eq!(events["events"][0]["attributes"]["revocationsQueued"], 1, "{events}");
    // An admin unpairs by naming the app.
    let second = Harness::unique("m");
    pair(&h, &access, &dev, &second).await;
    let path = format!("{}&appId={app}", reg_path(&second, &dev));
    assert_eq!(h.admin("DELETE", &path, None).await.status, 204);
    let r = h.admin("DELETE", &reg_path(&second, &dev), None).await;
    assert_eq!(r.problem(400, codes::INVALID_FIELD)["field"], "appId");
    // An admin token scoped to the app unpairs in it, naming it or not, and refuses another.
    let scoped = h.token_for("controlCenterAdmin", &app).await;
    let elsewhere = h.app().await;
    for named in [format!("&appId={elsewhere}"), format!("&appId={app}"), String::new()] {
        let machine = Harness::unique("m");
        pair(&h, &access, &dev, &machine).await;
        let path = reg_path(&machine, &dev);
        let r = h.client.send("DELETE", &format!("{path}{named}"), Some(&scoped), None).await;
        let refused = named.contains(&elsewhere);
        if refused {
            r.problem(403, codes::OTHER_TENANT);
        } else {
            assert_eq!(r.status, 204, "{named}: {}", r.text());
        }
        let left = h.client.send("GET", &path, Some(&access), None).await.status;
        assert_eq!(left, if refused { 200 } else { 404 }, "{named}");
    }
    // Or by naming it in `X-Tenant-Id`, as on the tenant-scoped endpoints; the two must agree.
    let third = Harness::unique("m");
    pair(&h, &access, &dev, &third).await;
    let path = reg_path(&third, &dev);
    let r = h.as_tenant(&app, "DELETE", &format!("{path}&appId=otherApp"), None).await;
    assert_eq!(r.problem(400, codes::INVALID_FIELD)["field"], "X-Tenant-Id");
    let r = h.as_tenant("no such app", "DELETE", &path, None).await;
    assert_eq!(r.problem(400, codes::INVALID_FIELD)["field"], "X-Tenant-Id");
    // A workstation's header or appId must name its own app, and be an app id.
    let with = |tenant: &'static str| [("x-tenant-id", tenant)];
    let r = h.client.send_with("DELETE", &path, Some(&access), &with("a!"), None).await;
    assert_eq!(r.problem(400, codes::INVALID_FIELD)["field"], "X-Tenant-Id");
    h.client
        .send_with("DELETE", &path, Some(&access), &with("otherApp"), None)
        .await
        .problem(403, codes::OTHER_TENANT);
    for query in ["&appId=otherApp", ""] {
        let r = h.client.send("GET", &format!("{path}{query}"), Some(&access), None).await;
        assert_eq!(r.status, if query.is_empty() { 200 } else { 403 }, "GET {query}: {}", r.json());
    }
    let r = h.client.send("GET", &format!("{path}&appId=a!"), Some(&access), None).await;
    assert_eq!(r.problem(400, codes::INVALID_FIELD)["field"], "appId");
    assert_eq!(h.client.send("GET", &format!("{path}&appId={app}"), Some(&access), None).await.status, 200);
    assert_eq!(h.as_tenant(&app, "DELETE", &path, None).await.status, 204);
    h.client.send("GET", &path, Some(&access), None).await.problem(404, codes::PAIRING_NOT_FOUND);
}

pub async fn removing_a_device_ends_its_token_pairings_and_certificates(h: Harness) {
    let (app, access, dev, machine) = offline_pairing(&h, "sam@example.com", 5).await;
    let (agent, ca, _server) = agent_for(&h).await;
    assert_eq!(agent.run_once().await.unwrap().issued.len(), 1);
    let serial = first_serial(&h, &dev).await;
    let path = format!("/cc/api/apps/{app}/devices/{}", dev.device_id);
    h.client.send("DELETE", &path, Some(&access), None).await.problem(403, codes::WRONG_TOKEN_KIND);
    let r = h.admin("DELETE", &path, None).await;
    assert_eq!(r.status, 204, "{}", String::from_utf8_lossy(&r.body));
    h.client
        .send("GET", "/rp/versioned/device/workstations", Some(&dev.token), None)
        .await
        .problem(401, codes::INVALID_TOKEN);
    let pairing = reg_path(&machine, &dev);
    h.client.send("GET", &pairing, Some(&access), None).await.problem(404, codes::PAIRING_NOT_FOUND);
    let revoked = agent.run_once().await.unwrap();
    assert_eq!(
        revoked.revoked.len(),
        1,
        "one revocation, though the pairing and the device both named it: {revoked:?}"
    );
    assert!(ca.is_revoked(&serial));
    h.admin("DELETE", &path, None).await.problem(404, codes::DEVICE_NOT_FOUND);
    let events =
        h.admin("GET", &format!("/rp/api/events?appId={app}&name=DEVICE_REVOKED"), None).await.json();
    assert_eq!(events["events"].as_array().unwrap().len(), 1);
}

/// A certificate whose revocation failed (the agent reported the CA's error) is still valid at
/// the CA: removing its device queues its revocation again, and the agent carries it out.
pub async fn removing_a_device_queues_again_a_revocation_that_failed(h: Harness) {
    let (app, access, dev, machine) = offline_pairing(&h, "uma@example.com", 5).await;
    let (agent, ca, _server) = agent_for(&h).await;
    assert_eq!(agent.run_once().await.unwrap().issued.len(), 1);
    let serial = first_serial(&h, &dev).await;
    let r = h.client.send("DELETE", &reg_path(&machine, &dev), Some(&access), None).await;
    assert_eq!(r.status, 204, "{}", String::from_utf8_lossy(&r.body));
    let polled = h.admin("GET", "/rp/api/certificate/requests", None).await.json();
    let revocation =
        polled["revokedCerts"].as_array().unwrap().iter().find(|r| r["certSerialNumber"] == serial.as_str());
    let request_id =
        revocation.unwrap_or_else(|| panic!("the unpairing's revocation: {polled}"))["requestId"].clone();
    let failed = json!({"errorCode": 7, "errorMessage": "CA unreachable", "requestId": request_id});
    assert_eq!(h.post_revocation(failed).await.status, 204);
    assert!(!ca.is_revoked(&serial));

    let r = h.admin("DELETE", &format!("/cc/api/apps/{app}/devices/{}", dev.device_id), None).await;
    assert_eq!(r.status, 204, "{}", String::from_utf8_lossy(&r.body));
    let pass = agent.run_once().await.unwrap();
    assert_eq!(pass.revoked.len(), 1, "{pass:?}");
    assert_ne!(pass.revoked[0], request_id.as_str().unwrap(), "a new request");
    assert!(ca.is_revoked(&serial));
}

/// A device paired on more workstations than one page of its pairings holds: it lists them all,
/// and its removal unpairs them all.
pub async fn removing_a_device_unpairs_it_everywhere_past_one_page(h: Harness) {
    let app = h.app().await;
    let access = h.access_token(&app).await;
    let dev = device(&h, &app, "tim@example.com", None).await;
    let machines: Vec<String> = (0..105).map(|i| format!("ws-many-{i:03}")).collect();
    for machine in &machines {
        pair(&h, &access, &dev, machine).await;
    }
    let listed = h.client.send("GET", "/rp/versioned/device/workstations", Some(&dev.token), None).await;
    assert_eq!(listed.json()["workstations"].as_array().map(Vec::len), Some(105));
    let r = h.admin("DELETE", &format!("/cc/api/apps/{app}/devices/{}", dev.device_id), None).await;
    assert_eq!(r.status, 204, "{}", String::from_utf8_lossy(&r.body));
    for machine in &machines {
        let pairing = reg_path(machine, &dev);
        h.client.send("GET", &pairing, Some(&access), None).await.problem(404, codes::PAIRING_NOT_FOUND);
    }
}

/// A device paired on many workstations, each with its login certificate: its removal ends
/// the pairings several at once, each queueing its certificate's revocation in the app's queue,
/// and every one of them is revoked.
pub async fn removing_a_device_revokes_the_certificate_of_every_pairing(h: Harness) {
    let app = h.app().await;
    let access = h.access_token(&app).await;
    let dev = device(&h, &app, "vic@example.com", None).await;
    for i in 0..20 {
        pair(&h, &access, &dev, &format!("ws-cert-{i:02}")).await;
    }
    let (agent, ca, _server) = agent_for(&h).await;
    let mut issued = Vec::new();
    while issued.len() < 20 {
        let pass = agent.run_once().await.unwrap();
        assert!(!pass.issued.is_empty(), "the agent issues them all: {issued:?}");
        issued.extend(pass.issued);
    }
    let listed =
        h.client.send("GET", "/rp/versioned/device/certificates?limit=50", Some(&dev.token), None).await;
    let serials: Vec<String> = listed.json()["certificates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["certSerialNumber"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(serials.len(), 20);
    let r = h.admin("DELETE", &format!("/cc/api/apps/{app}/devices/{}", dev.device_id), None).await;
    assert_eq!(r.status, 204, "{}", String::from_utf8_lossy(&r.body));
    let mut revoked = Vec::new();
    while revoked.len() < 20 {
        let pass = agent.run_once().await.unwrap();
        assert!(!pass.revoked.is_empty(), "the agent revokes them all: {revoked:?}");
        revoked.extend(pass.revoked);
    }
    assert!(serials.iter().all(|serial| ca.is_revoked(serial)));
}

/// Removal wins over pairing: workstations pairing a device while an admin removes it each get
/// their pairing (and lose it to the removal) or are refused as naming an unknown device; after
/// the 204 the device is paired nowhere. A device whose token was ended is not paired either.
pub async fn removal_wins_over_pairings_made_while_it_runs(h: Harness) {
    let Some(h) = h.for_races() else { return };
    let app = h.app().await;
    let access = h.access_token(&app).await;
    for trial in 0..6usize {
        let dev = device(&h, &app, &format!("pairrace{trial}@example.com"), None).await;
        let machines: Vec<String> = (0..8).map(|i| format!("ws-race-{trial}-{i}")).collect();
        for machine in &machines {
            enroll(&h, &access, &app, &dev.user, machine).await;
        }
        pair(&h, &access, &dev, &machines[0]).await;
        let pairings: Vec<_> = machines[1..]
            .iter()
            .map(|machine| {
                let (client, access) = (h.client.clone(), access.clone());
                let body =
                    json!({"machineId": machine, "deviceId": dev.device_id, "machineUserNameWS": dev.user});
                tokio::spawn(async move {
                    client.send("POST", "/rp/api/client/reg", Some(&access), Some(body)).await
                })
            })
            .collect();
        for _ in 0..trial * 4 {
            tokio::task::yield_now().await;
        }
        let r = h.admin("DELETE", &format!("/cc/api/apps/{app}/devices/{}", dev.device_id), None).await;
        assert_eq!(r.status, 204, "trial {trial}: {}", String::from_utf8_lossy(&r.body));
        for answer in pairings {
            let answer = answer.await.unwrap();
            match answer.status.as_u16() {
                201 => {}
                _ => assert_eq!(answer.problem(400, codes::UNKNOWN_DEVICE)["field"], "deviceId"),
            }
        }
        for machine in &machines {
            let pairing = reg_path(machine, &dev);
            h.client.send("GET", &pairing, Some(&access), None).await.problem(404, codes::PAIRING_NOT_FOUND);
        }
    }
    let dev = device(&h, &app, "ended@example.com", None).await;
    enroll(&h, &access, &app, &dev.user, "ws-ended").await;
    let ended = h.admin("DELETE", &format!("/cc/api/apps/{app}/devices/{}/token", dev.device_id), None).await;
    assert_eq!(ended.status, 204);
    let body = json!({"machineId": "ws-ended", "deviceId": dev.device_id, "machineUserNameWS": dev.user});
    let r = h.client.send("POST", "/rp/api/client/reg", Some(&access), Some(body)).await;
    r.problem(400, codes::UNKNOWN_DEVICE);
}

/// Device tokens live 90 days; a device refreshes its token (the old one stops working), and an
/// admin lists a user's devices and can end a device's token.
pub async fn device_tokens_expire_refresh_and_can_be_revoked(h: Harness) {
    let app = h.app().await;
    let dev = device(&h, &app, "wes@example.com", None).await;
    assert_eq!(as_device(&h.client, &dev.token).await.status, 200);
    let listed =
        h.admin("GET", &format!("/cc/api/apps/{app}/users/wes@example.com/devices"), None).await.json();
    assert_eq!(listed["devices"][0]["deviceId"], dev.device_id.as_str(), "{listed}");
    assert!(listed["devices"][0]["tokenExpiresAt"].is_string());
    // Refresh: a new token, the old one refused.
    let fresh = issued_token(refresh(&h.client, &dev.token).await);
    as_device(&h.client, &dev.token).await.problem(401, codes::INVALID_TOKEN);
    assert_eq!(as_device(&h.client, &fresh).await.status, 200);
    // A token past its lifetime is refused, saying so.
    h.clock.advance(Duration::from_secs(91 * 24 * 3600));
    let expired = as_device(&h.client, &fresh).await.problem(401, codes::INVALID_TOKEN);
    assert!(expired["detail"].as_str().unwrap().contains("expired"), "{expired}");
    // An admin ends a token; again is a 404; the device stays listed, without a token.
    let second = device(&h, &app, "wes@example.com", None).await;
    let path = format!("/cc/api/apps/{app}/devices/{}/token", second.device_id);
    assert_eq!(h.admin("DELETE", &path, None).await.status, 204);
    as_device(&h.client, &second.token).await.problem(401, codes::INVALID_TOKEN);
    h.admin("DELETE", &path, None).await.problem(404, codes::NO_DEVICE_TOKEN);
    let listed =
        h.admin("GET", &format!("/cc/api/apps/{app}/users/wes@example.com/devices"), None).await.json();
    let row = listed["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["deviceId"] == second.device_id.as_str())
        .unwrap()
        .clone();
    assert_eq!(row["tokenExpiresAt"], Value::Null);
    h.admin("DELETE", &format!("/cc/api/apps/{app}/devices/ghost/token"), None)
        .await
        .problem(404, codes::DEVICE_NOT_FOUND);
}

/// A device whose reply to its refresh was lost sends it again with the token it holds: within
/// the grace it gets another fresh token, and the one it never received stops working. Sent
/// again at once, it was sent beside the first, not after losing its reply: 409, retry, and the
/// first's token stands. The traded token does nothing but trade; past the grace, or once its
/// device's token is ended or the device removed, it does not even that.
pub async fn a_refresh_whose_reply_was_lost_can_be_sent_again(h: Harness) {
    use rp_shared::domain::devices::{REPEAT_AFTER_SECS, SUPERSEDED_TOKEN_GRACE_SECS};
    let repeat_after = Duration::from_secs(u64::try_from(REPEAT_AFTER_SECS).unwrap());
    let app = h.app().await;
    let client = &h.client.clone();
    for ending in ["token", "device"] {
        let dev = device(&h, &app, &format!("lost-{ending}@example.com"), None).await;
        let lost = issued_token(refresh(client, &dev.token).await);
        as_device(client, &dev.token).await.problem(401, codes::INVALID_TOKEN);
        // Sent again at once: retry later; the first's token stands.
        let soon = refresh(client, &dev.token).await;
        assert_eq!(soon.header("retry-after"), Some(REPEAT_AFTER_SECS.to_string().as_str()));
        soon.problem(409, codes::CONFLICT);
        assert_eq!(as_device(client, &lost).await.status, 200);
        // Sent again later: another token, and the lost one stops working.
        h.clock.advance(repeat_after);
        let kept = issued_token(refresh(client, &dev.token).await);
        as_device(client, &lost).await.problem(401, codes::INVALID_TOKEN);
        refresh(client, &lost).await.problem(401, codes::INVALID_TOKEN);
        assert_eq!(as_device(client, &kept).await.status, 200);
        // The kept token trades on; the first one then may trade no more.
        h.clock.advance(Duration::from_secs(60));
        let next = issued_token(refresh(client, &kept).await);
        refresh(client, &dev.token).await.problem(401, codes::INVALID_TOKEN);
        // Within its grace the kept one trades again; past it, it does not.
        h.clock.advance(repeat_after);
        let last = issued_token(refresh(client, &kept).await);
        as_device(client, &next).await.problem(401, codes::INVALID_TOKEN);
        let grace = u64::try_from(SUPERSEDED_TOKEN_GRACE_SECS).unwrap();
        h.clock.advance(Duration::from_secs(grace));
        refresh(client, &kept).await.problem(401, codes::INVALID_TOKEN);
        assert_eq!(as_device(client, &last).await.status, 200);
        // Traded within the grace when an admin ends the device's token or removes the device:
        // the traded token cannot bring it back.
        let newest = issued_token(refresh(client, &last).await);
        let path = match ending {
            "token" => format!("/cc/api/apps/{app}/devices/{}/token", dev.device_id),
            _ => format!("/cc/api/apps/{app}/devices/{}", dev.device_id),
        };
        assert_eq!(h.admin("DELETE", &path, None).await.status, 204);
        for token in [&last, &newest] {
            refresh(client, token).await.problem(401, codes::INVALID_TOKEN);
            as_device(client, token).await.problem(401, codes::INVALID_TOKEN);
        }
    }
    // Two refreshes sent at once with one token: one trades, the other is told to retry, and the
    // token the first gave works.
    let Some(h) = h.for_races() else { return };
    let dev = device(&h, &app, "lost-twice@example.com", None).await;
    let (a, b) = tokio::join!(refresh(client, &dev.token), refresh(client, &dev.token));
    let (traded, told) = if a.status == 201 { (a, b) } else { (b, a) };
    told.problem(409, codes::CONFLICT);
    assert_eq!(as_device(client, &issued_token(traded)).await.status, 200);
}

/// Removal and a token's end win over rotations (security round two, items 2 and 3): twenty
/// rotations sent at once with the device's token race one removal (or one end of the token), and
/// the rotation that wins goes on rotating with each token it is given. After the 204, no token
/// the device was ever given works. The race starts at a different point in each trial.
pub async fn removal_and_token_end_win_over_token_rotations(h: Harness) {
    let Some(h) = h.for_races() else { return };
    let app = h.app().await;
    for trial in 0..8usize {
        let dev = device(&h, &app, &format!("race{trial}@example.com"), None).await;
        let path = match trial % 2 {
            0 => format!("/cc/api/apps/{app}/devices/{}", dev.device_id),
            _ => format!("/cc/api/apps/{app}/devices/{}/token", dev.device_id),
        };
        let rotations: Vec<_> = (0..20)
            .map(|_| {
                let (client, mut token) = (h.client.clone(), dev.token.clone());
                tokio::spawn(async move {
                    let mut given = Vec::new();
                    for _ in 0..20 {
                        let r = client.send("POST", "/rp/versioned/device/token", Some(&token), None).await;
                        if r.status != 201 {
                            break;
                        }
                        token = r.json()["deviceToken"].as_str().unwrap().to_owned();
                        given.push(token.clone());
                    }
                    given
                })
            })
            .collect();
        for _ in 0..trial * 3 {
            tokio::task::yield_now().await;
        }
        let r = h.admin("DELETE", &path, None).await;
        assert_eq!(r.status, 204, "trial {trial}: {}", String::from_utf8_lossy(&r.body));
        let mut tokens = vec![dev.token.clone()];
        for rotation in rotations {
            tokens.extend(rotation.await.unwrap());
        }
        for token in &tokens {
            h.client
                .send("GET", "/rp/versioned/device/workstations", Some(token), None)
                .await
                .problem(401, codes::INVALID_TOKEN);
        }
    }
}
