//! How many round trips a request waits for, one after another (its *waves*, `testing::trips`):
//! each sample of `events/` sent through its function's router on the embedded backend, every
//! backend call recorded and held for 20 ms. Reads that do not depend on one another go at once.
//!
//! The tests run on tokio's paused clock, so the 20 ms are the clock's own: it moves only when
//! every task waits on it, never while the embedded store works on its blocking pool. A slow
//! machine, or a commit that waits on the disk, cannot then move a call to another wave. On the
//! wall clock a loaded CI machine once answered one of two key-budget counts more than 20 ms after
//! the other, and the key call behind it counted a wave late. A test that runs the sandbox stays
//! on the wall clock: the sandbox's watchdog is a tokio timer, which paused time would fire at
//! once, and a run cut off so marks its tenant as overrunning for the rest of the process.

use rp_shared::backend::{self, Backend};
use rp_shared::http::{self, AppState, HttpConfig};
use rp_shared::testing::events::{raise_rate_limit, samples, send, set_rate_limit, Sample};
use rp_shared::testing::trips::{recorded, Tally};
use std::time::Duration;

/// The first call of sample `stem` on freshly seeded samples: its status and what it sent.
async fn first_call(stem: &str) -> (u16, Tally) {
    calls(stem, 1).await.remove(0)
}

/// The waves of `call`; for `store.get APP`, only the use case's reads of the app. Each key call
/// an instance makes for an app with no figure kept (none read in
/// [`FIGURE_KEPT_SECS`](rp_shared::app::keybudget::FIGURE_KEPT_SECS)) reads the
/// app's key budget beside its count (`store.increment RL`, the wave before the key call's): no
/// wave of its own, and not the use case's read.
fn waves_of(tally: &Tally, call: &str) -> Vec<usize> {
    let mut waves = tally.waves_of(call);
    if call == "store.get APP" {
        let keys: Vec<usize> =
            tally.calls.iter().filter(|(_, c)| c.starts_with("keys.")).map(|(w, _)| *w).collect();
        let counts = tally.waves_of("store.increment RL");
        for wave in 1..=tally.waves {
            let key_calls = keys.iter().filter(|k| **k == wave + 1).count();
            let budget_reads = key_calls.min(counts.iter().filter(|c| **c == wave).count());
            for _ in 0..budget_reads {
                if let Some(at) = waves.iter().position(|w| *w == wave) {
                    waves.remove(at);
                }
            }
        }
    }
    waves
}

/// An embedded backend seeded with the sample fixtures (and the directory it lives in).
async fn seeded() -> (tempfile::TempDir, Backend) {
    let dir = tempfile::tempdir().unwrap();
    let backend = backend::embedded(dir.path()).unwrap();
    rp_shared::samples::seed(&backend).await.expect("the samples seed");
    (dir, backend)
}

fn sample(stem: &str) -> Sample {
    samples().into_iter().find(|s| s.stem == stem).expect("the sample exists")
}

/// Sample `stem` sent `times` times on freshly seeded samples: each call's status and what it sent.
async fn calls(stem: &str, times: usize) -> Vec<(u16, Tally)> {
    calls_of(sample(stem), times).await
}

/// Sample `stem` with its body replaced by `body`, sent once on freshly seeded samples.
async fn first_call_with(stem: &str, body: serde_json::Value) -> (u16, Tally) {
    let mut sample = sample(stem);
    sample.event = with_body(&sample.event, |b| *b = body);
    calls_of(sample, 1).await.remove(0)
}

async fn calls_of(sample: Sample, times: usize) -> Vec<(u16, Tally)> {
    let (_dir, backend) = seeded().await;
    calls_on(&backend, sample, times).await
}

/// `sample` sent `times` times on `backend` as it stands.
async fn calls_on(backend: &Backend, sample: Sample, times: usize) -> Vec<(u16, Tally)> {
    raise_rate_limit(AppState::new(backend.clone(), HttpConfig::default())).await;
    let (traced, trips) = recorded(backend, Duration::from_millis(20));
    let router = http::function(&sample.function, AppState::new(traced, HttpConfig::default())).unwrap();
    trips.take();
    let mut outcomes = Vec::new();
    for _ in 0..times {
        let status = send(&router, &sample.event).await;
        outcomes.push((status, trips.take()));
    }
    outcomes
}

/// The wave `call` went out in (1 for the first), for every time it was made.
#[tokio::test(start_paused = true)]
async fn a_tenant_and_its_app_are_read_at_once() {
    let (status, tally) = first_call("content-customization.get").await;
    assert_eq!(status, 200);
    assert_eq!(tally.waves_of("store.get TOKEN"), [1], "{tally}");
    assert_eq!(waves_of(&tally, "store.get APP"), [1], "{tally}");
    // The token and the app, then the customization beside the rate limit's counter.
    assert_eq!(tally.waves, 2, "{tally}");
}

#[tokio::test(start_paused = true)]
async fn a_version_and_its_record_are_read_at_once() {
    for stem in ["content-customization-version", "code-customization-version"] {
        let (status, tally) = first_call(stem).await;
        assert_eq!(status, 200, "{stem}");
        let kind = if stem.starts_with("code") { "CODE" } else { "CONTENT" };
        assert_eq!(tally.waves_of(&format!("store.get {kind}")), [2, 2], "{stem}: {tally}");
        assert_eq!(tally.waves, 2, "{stem}: {tally}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_changed_environment_waits_for_the_key_service_once() {
    for stem in ["code-customization-env-var", "code-customization-env-var.delete"] {
        let (status, tally) = first_call(stem).await;
        assert!(status == 200 || status == 204, "{stem}: {status}");
        // The read goes beside the count; the key service is asked nothing before the count
        // allows it, and then, once the app's key budget has counted both calls, for both keys
        // at once (a fresh one, the old one opened); then the write.
        assert_eq!(tally.waves_of("store.get CODEENV"), [2], "{tally}");
        assert_eq!(
            tally.waves_of("store.increment RL"),
            [2, 3, 3],
            "the request, then each key call: {tally}"
        );
        let fresh = tally.waves_of("keys.generate_data_key");
        assert_eq!(fresh, tally.waves_of("keys.decrypt_data_key"), "{tally}");
        assert_eq!(fresh, [4], "{tally}");
        assert_eq!(tally.waves, 5, "{stem}: {tally}");
    }
}

#[tokio::test(start_paused = true)]
async fn used_pins_are_opened_and_resealed_in_one_wait() {
    let (status, tally) = first_call("rp-device-offline-used").await;
    assert_eq!(status, 200);
    let opened = tally.waves_of("keys.decrypt_data_key");
    assert_eq!(opened.len(), 1, "{tally}");
    assert_eq!(tally.waves_of("keys.generate_data_key"), opened, "{tally}");
}

#[tokio::test(start_paused = true)]
async fn a_repeated_pin_report_asks_the_key_service_nothing() {
    let outcomes = calls("rp-device-offline-used", 2).await;
    assert_eq!(outcomes[0].0, 200);
    let (status, again) = &outcomes[1];
    assert_eq!(*status, 409, "the PINs are gone");
    assert!(again.calls.iter().all(|(_, call)| !call.starts_with("keys.")), "{again}");
}

#[tokio::test(start_paused = true)]
async fn a_users_device_tokens_are_read_at_once() {
    let (status, tally) = first_call("cc-app-user-devices").await;
    assert_eq!(status, 200);
    let tokens = tally.waves_of("store.get DEVTOKEN");
    assert!(tokens.len() > 1, "the sample user has several devices: {tally}");
    assert!(tokens.iter().all(|&w| w == tally.waves), "{tally}");
    // The token, the app and the user's devices; their tokens.
    assert_eq!(tally.waves_of("store.query USER"), [1], "{tally}");
    assert_eq!(tally.waves, 2, "{tally}");
}

/// A device recorded before its token's end was kept learns it from its token, which the list
/// reads anyway: each token is read once, all at once, legacy records or not.
#[tokio::test(start_paused = true)]
async fn a_users_device_tokens_are_read_once_when_a_record_is_legacy() {
    use rp_shared::ports::{Condition, Query, SortKey};
    let (_dir, backend) = seeded().await;
    let query =
        Query::table("USER#workstationDemo#alice@example.com").sort(SortKey::BeginsWith("DEVICE#".into()));
    let devices = backend.store.query(query).await.unwrap().items;
    let count = devices.len();
    assert!(count > 1, "the sample user has several devices");
    for mut device in devices {
        // As a release from before wrote it.
        assert!(device.attrs.remove("tokenEndsAt").is_some(), "{:?}", device.attrs);
        let version = device.version;
        backend.store.put(device, Condition::Version(version)).await.unwrap();
    }
    let (status, tally) = calls_on(&backend, sample("cc-app-user-devices"), 1).await.remove(0);
    assert_eq!(status, 200);
    let tokens = tally.waves_of("store.get DEVTOKEN");
    assert_eq!(tokens, vec![2; count], "each device's token once, at once: {tally}");
    assert_eq!(tally.waves, 2, "{tally}");
}

#[tokio::test(start_paused = true)]
async fn a_listing_is_read_beside_the_token_and_the_jwks_key_beside_the_app() {
    for (stem, read) in [
        ("cc-apps.get", "store.query APP"),
        ("cc-tokens.get", "store.query TOKEN"),
        ("rp-events.get", "store.query EVENT"),
        ("rp-app-jwks", "store.get SIGNKEYS"),
    ] {
        let (status, tally) = first_call(stem).await;
        assert_eq!(status, 200, "{stem}");
        assert_eq!(tally.waves_of(read), [1], "{stem}: {tally}");
        assert_eq!(tally.waves, 1, "{stem}: {tally}");
    }
}

#[tokio::test(start_paused = true)]
async fn an_enrollment_reads_what_it_can_at_once() {
    for stem in ["rp-enroll", "rp-client-registrations"] {
        let (status, tally) = first_call(stem).await;
        assert_eq!(status, 200, "{stem}");
        // Beside the token, the name is tried as a user (with its devices) and as an alias at
        // once, and the session the request names is read; the alias's user is read with its
        // devices; the device's counter is read while the session is written.
        assert_eq!(tally.waves_of("store.get ALIAS"), [1], "{stem}: {tally}");
        assert_eq!(tally.waves_of("store.get USER"), [1, 2], "{stem}: {tally}");
        assert_eq!(tally.waves_of("store.query USER"), [1, 2], "{stem}: {tally}");
        assert_eq!(tally.waves_of("store.get ENRSESSION"), [1], "{stem}: {tally}");
        assert_eq!(tally.waves_of("store.get ENCCTR"), tally.waves_of("store.put ENRSESSION"), "{tally}");
        assert_eq!(tally.waves, 3, "{stem}: {tally}");
    }
}

#[tokio::test(start_paused = true)]
async fn an_oob_start_reads_what_it_needs_at_once_and_its_devices_beside_the_count() {
    let (status, tally) = first_call("rp-oob-requests").await;
    assert_eq!(status, 200);
    // Beside the token: the app, the user, the nonce and the customizations at once.
    for read in ["store.get TOKEN", "store.get APP", "store.get USER", "store.get OOBNONCE", "store.get CODE"]
    {
        assert_eq!(waves_of(&tally, read), [1], "{read}: {tally}");
    }
    assert_eq!(tally.waves_of("store.increment RL"), [2], "{tally}");
    assert_eq!(tally.waves_of("store.query USER"), [2], "{tally}");
    // Then the request is stored.
    assert_eq!(tally.waves, 3, "{tally}");
}

/// The samples with their `oob.start` customization created enabled (the sample creates it
/// disabled).
async fn with_a_start_hook() -> (tempfile::TempDir, Backend) {
    let (dir, backend) = seeded().await;
    let mut create = sample("code-customizations");
    create.event = with_body(&create.event, |b| b["enabled"] = true.into());
    let (status, _) = calls_on(&backend, create, 1).await.remove(0);
    assert_eq!(status, 201);
    (dir, backend)
}

// On the wall clock: it runs the sandbox, whose watchdog paused time would fire at once.
#[tokio::test]
async fn an_oob_start_reads_its_customization_and_variables_beside_the_count() {
    let (_dir, backend) = with_a_start_hook().await;
    let (status, tally) = calls_on(&backend, sample("rp-oob-requests"), 1).await.remove(0);
    assert_eq!(status, 200, "{tally}");
    // Beside the token, which customizations are enabled (`META`); beside the count, the one
    // enabled and the tenant's variables, sealed; then the variables opened for the run (the
    // app's key budget counted first), and the request stored.
    assert_eq!(tally.waves_of("store.get CODE"), [1, 2], "{tally}");
    assert_eq!(tally.waves_of("store.get CODEENV"), [2], "{tally}");
    assert_eq!(tally.waves_of("store.increment RL"), [2, 3], "the request, then the key call: {tally}");
    assert_eq!(tally.waves_of("keys.decrypt_data_key"), [4], "{tally}");
    assert_eq!(tally.waves, 5, "{tally}");
}

// On the wall clock: it runs the sandbox, whose watchdog paused time would fire at once.
#[tokio::test]
async fn a_refused_oob_start_opens_no_variables() {
    // A replayed nonce: refused before the customization runs.
    let (_dir, backend) = with_a_start_hook().await;
    let outcomes = calls_on(&backend, sample("rp-oob-requests"), 2).await;
    assert_eq!(outcomes[0].0, 200);
    let (status, again) = &outcomes[1];
    assert_eq!(*status, 409, "{again}");
    assert!(again.calls.iter().all(|(_, call)| !call.starts_with("keys.")), "{again}");
    // Over the tenant's limit: refused before anything is judged of the user.
    let (_dir, backend) = with_a_start_hook().await;
    set_rate_limit(AppState::new(backend.clone(), HttpConfig::default()), 1, 3600).await;
    let (traced, trips) = recorded(&backend, Duration::from_millis(1));
    let router = http::function("rp-oob-requests", AppState::new(traced, HttpConfig::default())).unwrap();
    assert_eq!(send(&router, &sample("rp-oob-requests").event).await, 200);
    trips.take();
    let status = send(&router, &sample("rp-oob-requests").event).await;
    let tally = trips.take();
    assert_eq!(status, 429, "{tally}");
    assert!(tally.calls.iter().all(|(_, call)| !call.starts_with("keys.")), "{tally}");
}

#[tokio::test(start_paused = true)]
async fn a_device_answer_reads_its_request_beside_its_token() {
    let (status, tally) = first_call("rp-device-oob-request").await;
    assert_eq!(status, 200, "{tally}");
    assert_eq!(tally.waves_of("store.get DEVTOKEN"), [1], "{tally}");
    assert_eq!(tally.waves_of("store.get OOB"), [1], "{tally}");
    // Then the answer is stored.
    assert_eq!(tally.waves, 2, "{tally}");
}

#[tokio::test(start_paused = true)]
async fn a_pairing_and_its_app_are_read_at_once() {
    for stem in ["rp-client-reg", "rp-client-reg.get"] {
        let (status, tally) = first_call(stem).await;
        assert_eq!(status, 200, "{stem}");
        assert_eq!(waves_of(&tally, "store.get APP"), [2], "{stem}: {tally}");
        assert_eq!(tally.waves_of("store.get PAIR"), [2], "{stem}: {tally}");
    }
    // Its own workstation's read: the certificate request beside the opening of the PINs (the
    // key budget's count, then the key).
    let (_, tally) = first_call("rp-client-reg.get").await;
    assert_eq!(tally.waves_of("store.get CERTREQ"), [3], "{tally}");
    assert_eq!(tally.waves_of("store.increment RL"), [3], "{tally}");
    assert_eq!(tally.waves_of("keys.decrypt_data_key"), [4], "{tally}");
    assert_eq!(tally.waves, 4, "{tally}");
    let (status, tally) = first_call("rp-device-workstations").await;
    assert_eq!(status, 200);
    assert_eq!(tally.waves_of("store.query DEVPAIR"), waves_of(&tally, "store.get APP"), "{tally}");
    assert_eq!(tally.waves, 3, "{tally}");
}

/// A new pairing reads all it is judged on beside the app and the pairing: only the device's own
/// record and the user an alias names wait for a read before them. A pairing that exists is
/// answered without waiting for any of it.
#[tokio::test(start_paused = true)]
async fn a_new_pairing_reads_what_it_is_judged_on_beside_the_pairing() {
    use serde_json::json;
    let (_dir, backend) = seeded().await;
    // As the sample pairs: a workstation name (an alias of alice) and an offline PIN set.
    enroll(&backend, "machine-900", json!({})).await;
    let mut pair = sample("rp-client-reg");
    pair.event = with_body(&pair.event, |b| b["machineId"] = json!("machine-900"));
    let outcomes = calls_on(&backend, pair, 2).await;
    let (status, tally) = &outcomes[0];
    assert_eq!(*status, 201, "{tally}");
    let beside = [
        "store.get DEVICEID",
        "store.get DEVFROZEN",
        "store.get ENROLL",
        "store.get ALIAS",
        "store.get CERTQ",
    ];
    for read in ["store.get APP", "store.get PAIR"].into_iter().chain(beside) {
        assert_eq!(waves_of(tally, read), [2], "{read}: {tally}");
    }
    // Then the device's record and the alias's user, the key budget's count, the PIN set's key,
    // the counter, the write.
    assert_eq!(tally.waves_of("store.increment RL"), [4], "{tally}");
    assert_eq!(tally.waves_of("keys.generate_data_key"), [5], "{tally}");
    assert_eq!(tally.waves, 7, "{tally}");
    // Sent again: the pairing is answered (its PINs opened) without reading the device's record
    // or the alias's user.
    let (status, tally) = &outcomes[1];
    assert_eq!(*status, 200, "{tally}");
    assert_eq!(tally.waves_of("store.get USER"), [2], "{tally}");
    assert_eq!(tally.waves_of("keys.decrypt_data_key"), [4], "{tally}");
    assert_eq!(tally.waves, 4, "{tally}");
    // With neither: the device's record, the counter, the write.
    enroll(&backend, "machine-901", json!({})).await;
    let mut pair = sample("rp-client-reg");
    let body = json!({"machineId": "machine-901", "deviceId": "alice-pixel-9", "machineName": "WS-0901"});
    pair.event = with_body(&pair.event, |b| *b = body);
    let (status, tally) = calls_on(&backend, pair, 1).await.remove(0);
    assert_eq!(status, 201, "{tally}");
    assert_eq!(tally.waves_of("store.get DEVICEID"), [2], "{tally}");
    assert_eq!(tally.waves, 5, "{tally}");
}

#[tokio::test(start_paused = true)]
async fn a_poll_moves_its_pointer_beside_the_time_out_message() {
    let (status, tally) = first_call("rp-certificate-requests").await;
    assert_eq!(status, 200);
    let sent = tally.waves_of("queue.send_batch");
    assert_eq!(sent.len(), 1, "{tally}");
    assert_eq!(tally.waves_of("store.put CERTQ"), sent, "{tally}");
    // The leases come after both: no lease exists without the message that ends it.
    let leased: Vec<_> = tally.calls.iter().filter(|(_, c)| c.starts_with("store.put_each")).collect();
    assert_eq!(leased.len(), 1, "{tally}");
    assert_eq!(leased[0].0, sent[0] + 1, "{tally}");
    // Both pointers, the round's and the renewal sweep's, are read beside the token, and both
    // written beside the message; the sweep (its apps, then their due certificates) waits for
    // no more than the pending requests.
    assert_eq!(tally.waves_of("store.get CERTRENEW"), tally.waves_of("store.get TOKEN"), "{tally}");
    assert_eq!(tally.waves_of("store.put CERTRENEW"), sent, "{tally}");
    assert_eq!(tally.waves, 5, "{tally}");
}

#[tokio::test(start_paused = true)]
async fn an_admin_token_and_the_app_of_its_path_are_read_at_once() {
    let (status, tally) = first_call("cc-app").await;
    assert_eq!(status, 200);
    assert_eq!(tally.waves_of("store.get TOKEN"), [1], "{tally}");
    assert_eq!(waves_of(&tally, "store.get APP"), [1], "{tally}");
    assert_eq!(tally.waves, 1, "{tally}");
}

/// Reading the app beside the token changes no answer: a refused token is refused first, and
/// an app that does not exist is a 404 only for an admin.
#[tokio::test(start_paused = true)]
async fn the_token_is_still_judged_before_the_app() {
    let (_dir, backend) = seeded().await;
    let sample = sample("cc-app");
    let router = http::function(&sample.function, AppState::new(backend, HttpConfig::default())).unwrap();
    let other_app = sample.event.replace(rp_shared::samples::APP, "noSuchApp");
    let bad_token = |event: &str| event.replace(rp_shared::samples::ADMIN_TOKEN, "rpt_not-a-token");
    assert_eq!(send(&router, &other_app).await, 404);
    assert_eq!(send(&router, &bad_token(&other_app)).await, 401);
    assert_eq!(send(&router, &bad_token(&sample.event)).await, 401);
}

// On the wall clock: it runs the sandbox, whose watchdog paused time would fire at once.
#[tokio::test]
async fn a_test_run_reads_its_environment_beside_the_customization() {
    let (status, tally) = first_call("code-customization-test").await;
    assert_eq!(status, 200);
    assert_eq!(tally.waves_of("store.get CODEENV"), tally.waves_of("store.get CODE"), "{tally}");
    assert_eq!(tally.waves_of("store.increment RL"), [2, 3], "the request, then the key call: {tally}");
    assert_eq!(tally.waves_of("store.get CODE"), [2], "{tally}");
    // The token and the app, the count beside the reads, the key budget's count, the
    // environment opened.
    assert_eq!(tally.waves, 4, "{tally}");
}

#[tokio::test(start_paused = true)]
async fn an_app_change_starts_from_the_app_read_beside_the_token() {
    for stem in ["cc-app-rate-limit", "cc-app-workstation"] {
        let (status, tally) = first_call(stem).await;
        assert_eq!(status, 200, "{stem}");
        assert_eq!(waves_of(&tally, "store.get APP"), [1], "{stem}: {tally}");
        // The token and the app, then the write.
        assert_eq!(tally.waves, 2, "{stem}: {tally}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_pairings_settings_and_the_pairing_are_read_at_once() {
    for stem in ["rp-device-setup", "rp-device-offline-used", "rp-client-reg.patch"] {
        let (status, tally) = first_call(stem).await;
        assert_eq!(status, 200, "{stem}");
        let app = waves_of(&tally, "store.get APP");
        assert_eq!(app.len(), 1, "{stem}: {tally}");
        // Read once, beside the app: the write starts from that read.
        assert_eq!(tally.waves_of("store.get PAIR"), app, "{stem}: {tally}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_pairing_update_writes_once_and_reads_nothing_back() {
    // A new name and a used PIN: one write, after the key service (its budget counted, then
    // open and reseal, at once); the answer shows what is left of the PINs as they were
    // resealed, not opened again.
    let body = serde_json::json!({"machineId": "machine-42", "deviceId": "alice-pixel-9",
        "machineName": "WS-0042-renamed", "usedTokenIds": ["pin-02"]});
    let (status, tally) = first_call_with("rp-client-reg.patch", body).await;
    assert_eq!(status, 200, "{tally}");
    assert_eq!(tally.waves_of("store.get PAIR"), [2], "read once, beside the app: {tally}");
    assert_eq!(tally.waves_of("store.increment RL"), [3, 3], "{tally}");
    assert_eq!(tally.waves_of("store.put PAIR"), [5], "{tally}");
    assert_eq!(tally.waves, 5, "{tally}");
    // A wrong attempt: counted against the pairing read beside the app, nothing read back.
    let body =
        serde_json::json!({"machineId": "machine-42", "deviceId": "alice-pixel-9", "failedAttempts": 1});
    let (status, tally) = first_call_with("rp-client-reg.patch", body).await;
    assert_eq!(status, 200, "{tally}");
    assert_eq!(tally.waves_of("store.get PAIR"), [2], "{tally}");
    // The token; the app and the pairing; the count, and beside it the PINs opened for the
    // owner's view (the key budget's count, then the key).
    assert_eq!(
        tally.waves_of("store.increment RL"),
        tally.waves_of("store.increment OFFLINEFAIL"),
        "{tally}"
    );
    assert_eq!(tally.waves_of("keys.decrypt_data_key"), [4], "{tally}");
    assert_eq!(tally.waves, 4, "{tally}");
}

#[tokio::test(start_paused = true)]
async fn a_renamed_pairings_pins_are_opened_beside_the_write() {
    let (status, tally) = first_call("rp-client-reg.patch").await;
    assert_eq!(status, 200, "{tally}");
    // The token; the app and the pairing; the new name written and, beside it, the PINs (which
    // the name does not change) opened for the answer, after the key budget's count.
    assert_eq!(tally.waves_of("store.increment RL"), [3], "{tally}");
    assert_eq!(tally.waves_of("keys.decrypt_data_key"), [4], "{tally}");
    assert_eq!(tally.waves_of("store.put PAIR"), [3], "{tally}");
    assert_eq!(tally.waves, 4, "{tally}");
}

/// A renamed pairing whose PINs the answer would not show (its app turned offline access off)
/// has nothing opened for it, beside the write or after it.
#[tokio::test(start_paused = true)]
async fn a_renamed_pairings_hidden_pins_are_not_opened() {
    use serde_json::json;
    let (_dir, backend) = seeded().await;
    let mut off = sample("cc-app-workstation");
    off.event = with_body(&off.event, |b| b["offlineAccess"]["enabled"] = json!(false));
    assert_eq!(calls_on(&backend, off, 1).await[0].0, 200);
    let (status, tally) = calls_on(&backend, sample("rp-client-reg.patch"), 1).await.remove(0);
    assert_eq!(status, 200, "{tally}");
    assert_eq!(tally.waves_of("store.put PAIR"), [3], "{tally}");
    assert!(tally.calls.iter().all(|(_, call)| !call.starts_with("keys.")), "{tally}");
}

/// A list of customizations reads its page beside its count (`META`), and a list of versions
/// beside the customization: at once, and beside the rate limit's counter.
#[tokio::test(start_paused = true)]
async fn a_list_reads_its_page_beside_what_it_answers_with() {
    for (stem, kind) in [
        ("code-customizations.get", "CODE"),
        ("content-customizations.get", "CONTENT"),
        ("code-customization-versions", "CODE"),
        ("content-customization-versions", "CONTENT"),
    ] {
        let (status, tally) = first_call(stem).await;
        assert_eq!(status, 200, "{stem}");
        assert_eq!(tally.waves_of(&format!("store.query {kind}")), [2], "{stem}: {tally}");
        assert_eq!(tally.waves_of(&format!("store.get {kind}")), [2], "{stem}: {tally}");
        assert_eq!(tally.waves, 2, "{stem}: {tally}");
    }
}

#[tokio::test(start_paused = true)]
async fn an_unpairing_reads_its_certificate_where_its_request_filed_it() {
    use rp_shared::domain::certificates::RequestState;
    use rp_shared::domain::pairing::PairingKey;
    use rp_shared::ports::Condition;
    use rp_shared::repo::certificates::{request_item, Certificates};
    use rp_shared::repo::workstations::Workstations;
    let (_dir, backend) = seeded().await;
    // machine-43 (which the sample unpairs) got its login certificate: the samples' serial.
    let store = backend.store.as_ref();
    let app = rp_shared::domain::apps::AppId::parse("appId", rp_shared::samples::APP).unwrap();
    let key = PairingKey { machine_id: "machine-43".into(), device_id: "alice-pixel-9".into() };
    let (pairing, _) =
        Workstations::new(store).pairing(&app, &key.machine_id, &key.device_id).await.unwrap().unwrap();
    let certs = Certificates::new(store);
    let (mut request, version) = certs.request(&pairing.certificate_request_id).await.unwrap().unwrap();
    request.state = RequestState::Done;
    request.cert_serial_number = Some(rp_shared::samples::SERIAL.into());
    store.put(request_item(&request).unwrap(), Condition::Version(version)).await.unwrap();
    let (status, tally) = calls_on(&backend, sample("rp-client-reg.delete"), 1).await.remove(0);
    assert_eq!(status, 204, "{tally}");
    // The token; the pairing; its request; the certificate and the app's time-out at once; the
    // unpairing with the revocation.
    assert_eq!(tally.waves_of("store.get DEVCERT"), waves_of(&tally, "store.get APP"), "{tally}");
    assert!(tally.waves_of("store.get SERIAL").is_empty(), "{tally}");
    assert_eq!(tally.waves, 5, "{tally}");
    let (cert, _) = certs.by_serial(rp_shared::samples::SERIAL).await.unwrap().unwrap();
    assert!(cert.revocation_request_id.is_some(), "the revocation is queued");
}

#[tokio::test(start_paused = true)]
async fn a_removed_device_is_frozen_before_its_pairings_are_listed() {
    let (status, tally) = first_call("cc-app-device").await;
    assert_eq!(status, 204);
    let device = tally.waves_of("store.get DEVICEID");
    assert_eq!(tally.waves_of("store.query DEVCERT"), device, "{tally}");
    assert_eq!(device, [1], "{tally}");
    // The token, the app, the device and its certificates; its user; the freeze; then its
    // pairings, listed once no new one can be made (both lists at once); the removal.
    let frozen = tally.waves_of("store.put DEVFROZEN");
    assert_eq!(frozen, [3], "{tally}");
    assert_eq!(tally.waves_of("store.query PAIRED"), [4], "{tally}");
    assert_eq!(tally.waves_of("store.query DEVPAIR"), [4], "{tally}");
    assert_eq!(tally.waves, 5, "{tally}");
}

#[tokio::test(start_paused = true)]
async fn what_an_admins_app_path_names_is_read_beside_the_token_and_the_app() {
    // A device whose token ends; whoever holds the alias a registration link names.
    for (stem, read) in
        [("cc-app-device-token", "store.get DEVICEID"), ("cc-registration-links", "store.get ALIAS")]
    {
        let (status, tally) = first_call(stem).await;
        assert!(status == 201 || status == 204, "{stem}: {status}");
        assert_eq!(tally.waves_of(read), [1], "{stem}: {tally}");
        assert_eq!(waves_of(&tally, "store.get APP"), [1], "{stem}: {tally}");
        assert_eq!(tally.waves, 3, "{stem}: {tally}");
    }
}

#[tokio::test(start_paused = true)]
async fn an_admins_first_read_goes_beside_the_token() {
    // A poll reads where its round starts; a revocation reads the certificate of its path, and
    // the app (for the request's time-out) beside the certificate its serial's item points at.
    for (stem, read, waves) in
        [("rp-certificate-requests", "store.get CERTQ", 5), ("cc-certificate-revoke", "store.get SERIAL", 3)]
    {
        let (status, tally) = first_call(stem).await;
        assert!(status == 200 || status == 202, "{stem}: {status}");
        assert_eq!(tally.waves_of("store.get TOKEN"), [1], "{stem}: {tally}");
        assert_eq!(tally.waves_of(read), [1], "{stem}: {tally}");
        assert_eq!(tally.waves, waves, "{stem}: {tally}");
    }
    let (_, tally) = first_call("cc-certificate-revoke").await;
    assert_eq!(waves_of(&tally, "store.get APP"), tally.waves_of("store.get DEVCERT"), "{tally}");
}

/// A refused token is refused before the path is judged, and the path before the certificate.
#[tokio::test(start_paused = true)]
async fn a_revocations_token_is_judged_before_its_path() {
    let (_dir, backend) = seeded().await;
    let sample = sample("cc-certificate-revoke");
    let router = http::function(&sample.function, AppState::new(backend, HttpConfig::default())).unwrap();
    let serial = rp_shared::samples::SERIAL;
    let bad_token = |event: &str| event.replace(rp_shared::samples::ADMIN_TOKEN, "rpt_not-a-token");
    let too_long = sample.event.replace(serial, &"f".repeat(129));
    let unknown = sample.event.replace(serial, "ffff");
    assert_eq!(send(&router, &bad_token(&too_long)).await, 401);
    assert_eq!(send(&router, &bad_token(&unknown)).await, 401);
    assert_eq!(send(&router, &too_long).await, 400);
    assert_eq!(send(&router, &unknown).await, 404);
    assert_eq!(send(&router, &sample.event).await, 202);
}

#[tokio::test(start_paused = true)]
async fn a_customizations_reads_go_beside_the_count_and_its_writes_after_it() {
    for (stem, kind) in [
        ("content-customization.get", "CONTENT"),
        ("code-customization.get", "CODE"),
        ("content-customization", "CONTENT"),
        ("code-customization", "CODE"),
        ("content-customizations", "CONTENT"),
        ("code-customizations", "CODE"),
    ] {
        let (status, tally) = first_call(stem).await;
        assert!(status == 200 || status == 201, "{stem}: {status}");
        let counted = tally.waves_of("store.increment RL");
        assert_eq!(counted, [2], "{stem}: {tally}");
        assert_eq!(tally.waves_of(&format!("store.get {kind}")), counted, "{stem}: {tally}");
        let written = tally.calls.iter().filter(|(_, c)| c.starts_with("store.transact"));
        assert!(written.map(|(wave, _)| *wave).all(|w| w > counted[0]), "{stem}: {tally}");
    }
}

/// Every customization sample over the limit: its reads may have gone beside the count, but it
/// writes nothing, asks the key service nothing and answers 429.
// On the wall clock: its test run runs the sandbox, whose watchdog paused time would fire at once.
#[tokio::test]
async fn a_refused_customization_request_writes_nothing_and_asks_no_key() {
    let gated = samples().into_iter().filter(|s| {
        s.function.starts_with("content-customization") || s.function.starts_with("code-customization")
    });
    let mut seen = 0;
    for sample in gated {
        let (_dir, backend) = seeded().await;
        set_rate_limit(AppState::new(backend.clone(), HttpConfig::default()), 1, 3600).await;
        let (traced, trips) = recorded(&backend, Duration::from_millis(1));
        let router = http::function(&sample.function, AppState::new(traced, HttpConfig::default())).unwrap();
        send(&router, &sample.event).await;
        trips.take();
        let status = send(&router, &sample.event).await;
        let tally = trips.take();
        assert_eq!(status, 429, "{}: {tally}", sample.stem);
        let reads_or_count = |call: &str| {
            call.starts_with("store.get")
                || call.starts_with("store.query")
                || call.starts_with("store.increment RL")
        };
        assert!(tally.calls.iter().all(|(_, call)| reads_or_count(call)), "{}: {tally}", sample.stem);
        seen += 1;
    }
    assert!(seen >= 15, "every customization sample: {seen}");
}

#[tokio::test(start_paused = true)]
async fn a_restore_starts_from_the_record_read_beside_its_version() {
    for (stem, kind) in [("content-customization-restore", "CONTENT"), ("code-customization-restore", "CODE")]
    {
        let (status, tally) = first_call(stem).await;
        assert_eq!(status, 200, "{stem}");
        assert_eq!(tally.waves_of(&format!("store.get {kind}")).len(), 2, "read once each: {tally}");
        // The token and the app, the count beside the version and the record, the write.
        assert_eq!(tally.waves, 3, "{stem}: {tally}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_delete_reads_its_record_meta_and_versions_at_once() {
    let (status, tally) = first_call("code-customization.delete").await;
    assert_eq!(status, 204);
    let reads = tally.waves_of("store.get CODE");
    assert_eq!(reads.len(), 2, "the record and META: {tally}");
    assert_eq!(tally.waves_of("store.query CODE"), reads[..1], "{tally}");
    // Beside the count; the versions fitted in the transaction: nothing is left to look for
    // after it.
    assert_eq!(tally.waves_of("store.increment RL"), reads[..1], "{tally}");
    assert_eq!(tally.waves, 3, "{tally}");
}

#[tokio::test(start_paused = true)]
async fn an_enrollments_completion_reads_its_session_beside_the_user() {
    let (status, tally) = first_call("rp-enroll-complete").await;
    assert_eq!(status, 200);
    assert_eq!(tally.waves_of("store.get ENRSESSION"), tally.waves_of("store.get USER"), "{tally}");
    // The token, the user and the session, the transaction.
    assert_eq!(tally.waves, 3, "{tally}");
}

#[tokio::test(start_paused = true)]
async fn what_a_request_names_is_read_beside_its_token() {
    // A result's request; the token to revoke; a new token's app; an OOB request; an event's app.
    for (stem, read, waves) in [
        ("rp-certificate", "store.get CERTREQ", 2),
        ("rp-certificate-revoke", "store.get CERTREQ", 2),
        ("cc-token", "store.get TOKEN", 2),
        ("cc-tokens", "store.get APP", 2),
        ("rp-oob-request", "store.get OOB", 1),
        ("rp-events", "store.get APP", 2),
    ] {
        let (status, tally) = first_call(stem).await;
        assert!((200..300).contains(&status), "{stem}: {status}");
        assert!(tally.waves_of("store.get TOKEN").contains(&1), "{stem}: {tally}");
        assert_eq!(tally.waves_of(read).first(), Some(&1), "{stem}: {tally}");
        assert_eq!(tally.waves, waves, "{stem}: {tally}");
    }
}

/// `event` with its JSON body changed by `change`.
fn with_body(event: &str, change: impl FnOnce(&mut serde_json::Value)) -> String {
    let mut event: serde_json::Value = serde_json::from_str(event).unwrap();
    let mut body: serde_json::Value = serde_json::from_str(event["body"].as_str().unwrap()).unwrap();
    change(&mut body);
    event["body"] = body.to_string().into();
    event.to_string()
}

/// What the path or body names is judged after the token, however early it is read: a refused
/// token is a 401 whatever the request names, and a bad name is a 400 (or 404) for a good token
/// (an unknown OOB request is the seed's 400).
#[tokio::test(start_paused = true)]
async fn what_a_request_names_is_still_judged_after_its_token() {
    use rp_shared::samples::{ACCESS_TOKEN, ADMIN_TOKEN, DEVICE_TOKEN};
    let (_dir, backend) = seeded().await;
    let state = AppState::new(backend, HttpConfig::default());
    let unknown_app = |body: &mut serde_json::Value| body["appId"] = "noSuchApp".into();
    let bad_app = |body: &mut serde_json::Value| body["appId"] = "not an app id!".into();
    let cases: Vec<(&str, String, u16)> = vec![
        (
            "rp-certificate",
            with_body(&sample("rp-certificate").event, |b| b["errorCode"] = "seven".into()),
            400,
        ),
        (
            "rp-certificate",
            with_body(&sample("rp-certificate").event, |b| b["requestId"] = "nope".into()),
            404,
        ),
        (
            "rp-certificate-revoke",
            with_body(&sample("rp-certificate-revoke").event, |b| b["x"] = 1.into()),
            400,
        ),
        ("cc-token", sample("cc-token").event.replace("b5050ed12fd33ea4", "b5050ed12fd33ea"), 400),
        ("cc-token", sample("cc-token").event.replace("b5050ed12fd33ea4", "0000000000000000"), 404),
        ("cc-tokens", with_body(&sample("cc-tokens").event, bad_app), 400),
        ("cc-tokens", with_body(&sample("cc-tokens").event, unknown_app), 400),
        ("rp-events", with_body(&sample("rp-events").event, bad_app), 400),
        ("rp-events", with_body(&sample("rp-events").event, unknown_app), 400),
        ("rp-oob-requests", with_body(&sample("rp-oob-requests").event, unknown_app), 403),
        (
            "rp-oob-requests",
            with_body(&sample("rp-oob-requests").event, |b| b["sessionNonce"] = "x".into()),
            400,
        ),
        (
            "rp-oob-requests",
            with_body(&sample("rp-oob-requests").event, |b| b["namedUser"] = "nobody".into()),
            400,
        ),
        ("rp-enroll", with_body(&sample("rp-enroll").event, |b| b["rpAppId"] = "noSuchApp".into()), 403),
        ("rp-enroll", with_body(&sample("rp-enroll").event, |b| b["machineUserNameWS"] = 7.into()), 400),
        (
            "rp-enroll",
            with_body(&sample("rp-enroll").event, |b| b["machineUserNameWS"] = "CORP\\nobody".into()),
            400,
        ),
        ("cc-app-device", sample("cc-app-device").event.replace("/devices/", "/devices/%20"), 400),
        (
            "cc-app-device",
            sample("cc-app-device").event.replace("/apps/workstationDemo/", "/apps/noSuchApp/"),
            404,
        ),
        (
            "cc-app-device-token",
            sample("cc-app-device-token").event.replace("/devices/", "/devices/%20"),
            400,
        ),
        ("cc-app-device-token", sample("cc-app-device-token").event.replace("/devices/", "/devices/x"), 404),
        (
            "cc-registration-links",
            with_body(&sample("cc-registration-links").event, |b| b["x"] = 1.into()),
            400,
        ),
        (
            "cc-registration-links",
            with_body(&sample("cc-registration-links").event, |b| b["machineUserNameWS"] = "".into()),
            400,
        ),
        (
            "cc-registration-links",
            sample("cc-registration-links").event.replace("/apps/workstationDemo/", "/apps/noSuchApp/"),
            404,
        ),
        ("cc-apps.get", sample("cc-apps.get").event.replace("limit=10", "limit=0"), 400),
        ("cc-tokens.get", sample("cc-tokens.get").event.replace("limit=10", "limit=10&x=1"), 400),
        (
            "rp-events.get",
            sample("rp-events.get").event.replace("appId=workstationDemo", "appId=no%20app"),
            400,
        ),
        (
            "cc-app-user-devices",
            sample("cc-app-user-devices").event.replace("/apps/workstationDemo/", "/apps/noSuchApp/"),
            404,
        ),
        ("rp-oob-request", sample("rp-oob-request").event.replace("0000000000a1", "0000000000a9"), 400),
        ("rp-oob-request", sample("rp-oob-request").event.replace("0000000000a1", &"a".repeat(70)), 400),
        (
            "rp-device-oob-request",
            sample("rp-device-oob-request").event.replace("0000000000a1", "0000000000a9"),
            400,
        ),
        (
            "rp-device-oob-request",
            with_body(&sample("rp-device-oob-request").event, |b| b["decision"] = "maybe".into()),
            400,
        ),
    ];
    for (stem, event, status) in cases {
        let router = http::function(&sample(stem).function, state.clone()).unwrap();
        let refused = event
            .replace(ADMIN_TOKEN, "rpt_not-a-token")
            .replace(ACCESS_TOKEN, "rpt_not-a-token")
            .replace(DEVICE_TOKEN, "rpd_not-a-token");
        assert_eq!(send(&router, &refused).await, 401, "{stem}: {event}");
        assert_eq!(send(&router, &event).await, status, "{stem}: {event}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_token_refresh_reads_the_device_where_its_token_says_it_is() {
    let (status, tally) = first_call("rp-device-token").await;
    assert_eq!(status, 201);
    assert!(tally.waves_of("store.get DEVICEID").is_empty(), "{tally}");
    // The token, the device, the swap.
    assert_eq!(tally.waves, 3, "{tally}");
}

#[tokio::test(start_paused = true)]
async fn a_poll_reads_past_an_app_that_comes_up_short_in_one_round() {
    use rp_shared::domain::apps::AppId;
    use rp_shared::domain::certificates::{CertRequest, RequestKind};
    use rp_shared::domain::EpochMillis;
    use rp_shared::testing::{fixtures, http::TestClient};
    let dir = tempfile::tempdir().unwrap();
    let backend = backend::embedded(dir.path()).unwrap();
    let store = backend.store.as_ref();
    // Two ready apps: one with a single pending request, one with more than a batch.
    let pending = |app: &str, count: i64| {
        let app = AppId::parse("appId", app).unwrap();
        (0..count)
            .map(|i| CertRequest {
                device_id: Some(format!("{app}-{i}")),
                ..CertRequest::new(RequestKind::LoginCert, app.clone(), 300, EpochMillis(1_000 + i))
            })
            .collect::<Vec<_>>()
    };
    let short = pending("shortApp", 1);
    for requests in [&short, &pending("deepApp", 60)] {
        fixtures::queue_in_bulk(store, requests, backend.clock.now_millis()).await;
    }
    let token = fixtures::admin_token(store, EpochMillis(0)).await;
    let (traced, trips) = recorded(&backend, Duration::from_millis(20));
    let client = TestClient::new(http::app(AppState::new(traced, HttpConfig::default())));
    trips.take();
    let polled = client.send("GET", "/rp/api/certificate/requests", Some(&token), None).await;
    let tally = trips.take();
    assert_eq!(polled.status, 200, "{}", polled.json());
    let leased = polled.json()["loginCerts"].as_array().unwrap().clone();
    assert_eq!(leased.len(), 50, "the batch is full");
    assert!(leased.iter().any(|r| r["requestId"] == short[0].request_id), "the short app's request too");
    // The token and the round's start; the ready markers; both apps' shards, the deep one read
    // beyond its share (no second round); the time-out message and the pointer; the leases.
    assert_eq!(tally.waves_of("store.query CERTQ"), [2, 3, 3], "{tally}");
    assert_eq!(tally.waves, 5, "{tally}");
}

/// `machine` enrolled for Alice as her workstation enrolls, `extra` added to the completion.
async fn enroll(backend: &Backend, machine: &str, extra: serde_json::Value) {
    let router = http::app(AppState::new(backend.clone(), HttpConfig::default()));
    rp_shared::samples::enroll(router, machine, machine, extra).await.expect("the machine enrolls");
}

/// alice-pixel-9 paired with `more` workstations beside machine-42 and machine-43, each
/// enrolled and paired as its workstation does; the sample that removes it.
async fn paired_with_many(backend: &Backend, more: usize) -> Sample {
    use rp_shared::samples::ACCESS_TOKEN;
    use rp_shared::testing::http::TestClient;
    use serde_json::json;
    let client = TestClient::new(http::app(AppState::new(backend.clone(), HttpConfig::default())));
    for i in 0..more {
        let machine = format!("machine-{}", 100 + i);
        enroll(backend, &machine, json!({})).await;
        let pair =
            json!({"machineId": machine, "deviceId": "alice-pixel-9", "machineName": format!("WS-{i}")});
        let paired = client.send("POST", "/rp/api/client/reg", Some(ACCESS_TOKEN), Some(pair)).await;
        assert_eq!(paired.status, 201, "{}", paired.text());
    }
    let mut removal = sample("cc-app-device");
    removal.event = removal.event.replace("alice-old-phone", "alice-pixel-9");
    removal
}

/// alice-pixel-9's pairings as stored, and whether it is frozen.
async fn pairings_left(backend: &Backend) -> (usize, bool) {
    use rp_shared::repo::{devices::Devices, workstations::Workstations};
    let store = backend.store.as_ref();
    let app = rp_shared::domain::apps::AppId::parse("appId", rp_shared::samples::APP).unwrap();
    let pairings = Workstations::new(store).pairings_of_device(&app, "alice-pixel-9").await.unwrap();
    (pairings.len(), Devices::new(store).is_frozen(&app, "alice-pixel-9").await.unwrap())
}

/// A device paired with many workstations is removed in a few rounds, not one round trip after
/// another per pairing: its pairings (and then its certificates) end several at once.
#[tokio::test(start_paused = true)]
async fn a_removed_devices_pairings_end_several_at_once() {
    use rp_shared::app::devices::REMOVALS_AT_ONCE;
    let (_dir, backend) = seeded().await;
    let pairings = 24;
    let removal = paired_with_many(&backend, pairings - 2).await;
    let (status, tally) = calls_on(&backend, removal, 1).await.remove(0);
    assert_eq!(status, 204, "{tally}");
    // Each unpairing reads its certificate request, then writes: two waves. One after another
    // they would take two waves a pairing; several at once, about two a round of them (15 waves
    // in all here, typically). How far apart the windows' waves drift depends on the order the
    // store answers in, so the checks are what holds in any order: the first round's reads go
    // out together, and the whole takes at most half the waves of one pairing after another.
    let reads = tally.waves_of("store.get CERTREQ");
    assert_eq!(reads.len(), pairings, "{tally}");
    assert!(reads[..REMOVALS_AT_ONCE].iter().all(|wave| *wave == reads[0]), "{reads:?}: {tally}");
    let one_by_one = 10 + 2 * pairings;
    assert!(2 * tally.waves <= one_by_one, "{} waves: {tally}", tally.waves);
    assert_eq!(pairings_left(&backend).await.0, 0);
}

/// A removal cut off part-way (the function's time-out) leaves its device frozen with what it
/// did not reach; sent again, it ends the rest.
#[tokio::test(start_paused = true)]
async fn a_removal_cut_off_part_way_is_finished_by_sending_it_again() {
    let (_dir, backend) = seeded().await;
    let removal = paired_with_many(&backend, 22).await;
    let (traced, _trips) = recorded(&backend, Duration::from_millis(20));
    let router = http::function(&removal.function, AppState::new(traced, HttpConfig::default())).unwrap();
    // 24 pairings take at least 15 waves of 20 ms: cut off after 220 ms, some are left.
    let cut = tokio::time::timeout(Duration::from_millis(220), send(&router, &removal.event)).await;
    assert!(cut.is_err(), "the removal was cut off");
    let (left, frozen) = pairings_left(&backend).await;
    assert!(left > 0, "some pairings are left");
    assert!(left == 24 || frozen, "no pairing ends before the device is frozen: {left} left");
    let router =
        http::function(&removal.function, AppState::new(backend.clone(), HttpConfig::default())).unwrap();
    assert_eq!(send(&router, &removal.event).await, 204);
    assert_eq!(pairings_left(&backend).await.0, 0);
    assert_eq!(send(&router, &removal.event).await, 404, "removed");
}

/// A phone's fetch of its pending OOB requests marks each fetched and opens the recovery keys of
/// each one's machine at once, not one request after another; each request's mark goes beside
/// its machine's enrollment read.
#[tokio::test(start_paused = true)]
async fn a_devices_pending_requests_are_marked_and_opened_at_once() {
    use rp_shared::samples::{ACCESS_TOKEN, APP, WATCH_TOKEN};
    use rp_shared::testing::http::TestClient;
    use serde_json::json;
    let (_dir, backend) = seeded().await;
    let client = TestClient::new(http::app(AppState::new(backend.clone(), HttpConfig::default())));
    enroll(&backend, "machine-r", json!({"recoveryKeys": "cmVjb3Zlcnkga2V5cw=="})).await;
    // Three requests that name the machine, enrolled for Alice's newest device.
    for i in 5..8 {
        let start = json!({"appId": APP, "namedUser": "alice@example.com", "machineId": "machine-r", "deviceId": "alice-watch",
            "sessionNonce": i.to_string().repeat(64), "deviceNonce": "2".repeat(64), "serviceNonce": "3".repeat(64), "serviceHmac": "4".repeat(64)});
        let started = client
            .send("POST", "/rp/api/oob/client/authentication/requests", Some(ACCESS_TOKEN), Some(start))
            .await;
        assert_eq!(started.status, 200, "{}", started.text());
    }
    let (traced, trips) = recorded(&backend, Duration::from_millis(20));
    let client = TestClient::new(http::app(AppState::new(traced, HttpConfig::default())));
    trips.take();
    let fetched = client.send("GET", "/rp/versioned/device/oob/requests", Some(WATCH_TOKEN), None).await;
    let tally = trips.take();
    assert_eq!(fetched.status, 200, "{}", fetched.text());
    let requests = fetched.json()["requests"].as_array().unwrap().clone();
    assert_eq!(requests.len(), 3, "{tally}");
    let opened = requests.iter().filter(|r| r["recoveryKeys"] == "cmVjb3Zlcnkga2V5cw==").count();
    assert_eq!(opened, 3, "{tally}");
    assert_eq!(tally.waves_of("store.put OOB"), [3; 3], "{tally}");
    assert_eq!(tally.waves_of("store.get ENROLL"), [3; 3], "{tally}");
    assert_eq!(tally.waves_of("store.increment RL"), [4; 3], "{tally}");
    assert_eq!(tally.waves_of("keys.decrypt_data_key"), [5; 3], "{tally}");
    // The token; the requests; the marks and the enrollments; the key budget's counts; the keys.
    assert_eq!(tally.waves, 5, "{tally}");
}
