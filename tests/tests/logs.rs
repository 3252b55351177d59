//! The logs of a whole offline lifecycle, captured in a process of its own (a thread-local
//! subscriber misses callsites that concurrent tests cached while no subscriber was set).

#[allow(dead_code, unused_imports)] // only the harness and a few helpers of the shared cases are used here
#[macro_use]
mod common;

use std::sync::Arc;

/// An embedded backend in a temporary directory, removed when the directory is dropped.
fn backend(clock: rp_shared::ports::ManualClock) -> (rp_shared::backend::Backend, tempfile::TempDir) {
    let dir = tempfile::Builder::new().prefix("rp-logs-").tempdir().expect("temp dir");
    (rp_shared::backend::embedded_with_clock(dir.path(), Arc::new(clock)).unwrap(), dir)
}

/// Collects every log line of the test's thread.
use rp_tests::Captured;

/// A whole offline lifecycle, logged at TRACE: no PIN, authorization code or token is in the logs.
#[test]
fn offline_secrets_never_reach_the_logs() {
    use serde_json::json;
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .json()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    tracing::callsite::rebuild_interest_cache();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let secrets = runtime.block_on(async {
        let clock = rp_shared::ports::ManualClock::starting_now();
        let (backend, _data) = backend(clock.clone());
        let h = common::Harness::new(backend, clock).await;
        let app = h.app().await;
        h.admin("PUT", &format!("/cc/api/apps/{app}/workstation"), Some(json!({"offlineAccess": {"enabled": true, "tokenCount": 10, "maxWrongAttempts": 2}}))).await;
        let access = h.access_token(&app).await;
        let dev = common::device(&h, &app, "tess@example.com", None).await;
        common::enroll(&h, &access, &app, "tess@example.com", "m-logs").await;
        let pins = ["pin-a:73910428", "pin-b:58203947", "pin-c:90817263"];
        let auth = "c2VjcmV0LWF1dGgtY29kZQ==";
        let pair = json!({"machineId": "m-logs", "deviceId": dev.device_id, "offline": {"tokens": pins.join(","), "tokensAuth": auth}});
        assert_eq!(h.client.send("POST", "/rp/api/client/reg", Some(&access), Some(pair)).await.status, 201);
        let path = format!("/rp/api/client/reg?machineId=m-logs&deviceId={}", dev.device_id);
        assert_eq!(h.client.send("GET", &path, Some(&access), None).await.status, 200);
        let setup = h.client.send("POST", "/rp/versioned/device/setup", Some(&dev.token), Some(json!({"machineId": "m-logs"}))).await;
        assert_eq!(setup.status, 200);
        let used = json!({"machineId": "m-logs", "deviceId": dev.device_id, "usedTokenIds": ["pin-a"]});
        assert_eq!(h.client.send("PATCH", "/rp/api/client/reg", Some(&access), Some(used)).await.status, 200);
        let used = json!({"machineId": "m-logs", "tokenIds": ["pin-b"]});
        assert_eq!(h.client.send("POST", "/rp/versioned/device/offline/used", Some(&dev.token), Some(used)).await.status, 200);
        let failed = json!({"machineId": "m-logs", "deviceId": dev.device_id, "failedAttempts": 2});
        assert_eq!(h.client.send("PATCH", "/rp/api/client/reg", Some(&access), Some(failed)).await.status, 200);
        assert_eq!(h.client.send("DELETE", &path, Some(&access), None).await.status, 204);
        vec!["73910428".to_owned(), "58203947".into(), "90817263".into(), auth.into(), access, dev.token, h.admin.clone()]
    });
    let logs = captured.text();
    assert!(logs.lines().count() > 20, "the flow was logged: {logs}");
    assert!(logs.contains("offline PINs delivered to the device") && logs.contains("OFFLINE_ACCESS_LOCKED"));
    for secret in secrets {
        assert!(!logs.contains(&secret), "a secret reached the logs");
    }
}
