//! What operators read, captured in a process of its own: the logs of a whole offline lifecycle
//! (a thread-local subscriber misses callsites that concurrent tests cached while no subscriber
//! was set), and the metrics docs/deploying.md lists (their sink is the process's).

#[allow(dead_code, unused_imports)] // only the harness and a few helpers of the shared cases are used here
#[macro_use]
mod common;

use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

/// An embedded backend in a temporary directory, removed when the directory is dropped.
fn backend(clock: rp_shared::ports::ManualClock) -> (rp_shared::backend::Backend, tempfile::TempDir) {
    let dir = tempfile::Builder::new().prefix("rp-logs-").tempdir().expect("temp dir");
    (rp_shared::backend::embedded_with_clock(dir.path(), Arc::new(clock)).unwrap(), dir)
}

/// Collects every log line of the test's thread.
use rp_tests::Captured;

/// One case at a time: a metric line names no case, and each case reads the lines it caused.
fn one_at_a_time() -> MutexGuard<'static, ()> {
    static CASES: Mutex<()> = Mutex::new(());
    CASES.lock().unwrap_or_else(|e| e.into_inner())
}

/// A whole offline lifecycle, logged at TRACE: no PIN, authorization code or token is in the logs.
#[test]
fn offline_secrets_never_reach_the_logs() {
    use serde_json::json;
    let _alone = one_at_a_time();
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
    let mut stored = Vec::new();
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
        let listed = h.admin("GET", &format!("/rp/api/events?appId={app}&limit=200"), None).await.json();
        let fields = |e: &serde_json::Value| ["eventId", "name", "appId", "source"].map(|f| e[f].as_str().unwrap().to_owned());
        stored = listed["events"].as_array().unwrap().iter().map(|e| (fields(e), e["attributes"].clone())).collect();
        vec!["73910428".to_owned(), "58203947".into(), "90817263".into(), auth.into(), access, dev.token, h.admin.clone()]
    });
    let logs = captured.text();
    assert!(logs.lines().count() > 20, "the flow was logged: {logs}");
    assert!(logs.contains("offline PINs delivered to the device") && logs.contains("OFFLINE_ACCESS_LOCKED"));
    for secret in secrets {
        assert!(!logs.contains(&secret), "a secret reached the logs");
    }
    // Each stored event, and only those, is one structured line with its id, name, app, source
    // and attributes (DECISIONS §9).
    let mut logged: Vec<_> = logs
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|line| line["fields"]["message"] == "event")
        .map(|line| {
            let f = &line["fields"];
            let fields = ["event_id", "event", "app_id", "source"].map(|k| f[k].as_str().unwrap().to_owned());
            (fields, serde_json::from_str(f["attributes"].as_str().unwrap()).unwrap())
        })
        .collect();
    let mut names: Vec<_> = stored.iter().map(|(fields, _)| fields[1].as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["OFFLINE_ACCESS_LOCKED", "WORKSTATION_ENROLL", "WORKSTATION_UNPAIRED"]);
    stored.sort_by(|a, b| a.0.cmp(&b.0));
    logged.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(logged, stored);
}

/// Every metric line written since the last call, as (name, value, the extra dimension's value,
/// an `Outcome` or a `CaId`): the sink is installed on the first call, before any case runs a
/// use case.
fn metrics_since() -> Vec<(String, u64, Option<String>)> {
    static LINES: OnceLock<Mutex<Vec<String>>> = OnceLock::new();
    let lines = LINES.get_or_init(|| {
        rp_shared::metrics::set_sink(|line| LINES.get().unwrap().lock().unwrap().push(line.to_owned()));
        Mutex::default()
    });
    let taken = std::mem::take(&mut *lines.lock().unwrap());
    taken
        .iter()
        .map(|line| {
            let line: serde_json::Value = serde_json::from_str(line).unwrap();
            let name =
                line["_aws"]["CloudWatchMetrics"][0]["Metrics"][0]["Name"].as_str().unwrap().to_owned();
            let value = line[&name].as_u64().unwrap();
            // The extra dimension's value (an outcome, a CA), from the last dimension set.
            let sets = line["_aws"]["CloudWatchMetrics"][0]["Dimensions"].as_array().unwrap();
            let extra = sets.last().and_then(|set| set.get(1)).and_then(|n| n.as_str());
            (name, value, extra.map(|n| line[n].as_str().unwrap().to_owned()))
        })
        .collect()
}

/// The metrics as [`metrics_since`] gives them, from `(name, value, extra dimension's value)`.
fn expected(metrics: &[(&str, u64, Option<&str>)]) -> Vec<(String, u64, Option<String>)> {
    metrics.iter().map(|(n, v, o)| (n.to_string(), *v, o.map(str::to_owned))).collect()
}

/// Each metric docs/deploying.md lists is counted when it says, once, with its value and
/// outcome: a poll's leases; a lease that ends without a result (re-queued, then dead), both as a
/// late result finds it and as its time-out message does; an OOB request that ends, and a start
/// a customization refuses or fails (a run out of time); a wake-up sent, failed or gone; a 429;
/// a new CRL stored (not the same one again, nor one refused).
#[test]
fn the_documented_metrics_are_counted() {
    use rp_shared::ports::PushError;
    use serde_json::json;
    let _alone = one_at_a_time();
    metrics_since();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let clock = rp_shared::ports::ManualClock::starting_now();
        let (backend, _data) = backend(clock.clone());
        let config = rp_shared::http::HttpConfig { max_attempts: 2, ..Default::default() };
        let h = common::Harness::with_config(backend, clock, config).await;
        let app = h.app().await;
        let apns = format!("arn:aws:sns:us-east-1:123456789012:app/APNS/{app}");
        let settings = json!({"requestTimeoutInSecs": 1, "push": {"apns": apns}});
        h.admin("PUT", &format!("/cc/api/apps/{app}/workstation"), Some(settings)).await;
        let access = h.access_token(&app).await;
        let dev = common::certificates::device(&h, &app, "mo@example.com", None).await;
        let push = json!({"platform": "APNS", "token": "ab".repeat(32)});
        let r = h.client.send("PUT", "/rp/versioned/device/push", Some(&dev.token), Some(push)).await;
        assert_eq!(r.status, 200, "{}", r.json());
        let late = common::certificates::pair(&h, &access, &dev, "m-late").await;
        let timed_out = common::certificates::pair(&h, &access, &dev, "m-timed-out").await;
        assert_eq!(metrics_since(), [], "nothing is counted before a poll");

        // Two leases ended twice each: by a late result, and by their time-out messages.
        let dispatcher = rp_shared::consumer::Dispatcher::new(h.backend.clone()).with_max_attempts(2);
        for (attempt, ended) in [(1, "Requeued"), (2, "DeadRequests")] {
            assert_eq!(h.poll().await.login_certs.len(), 2, "lease {attempt}");
            assert_eq!(metrics_since(), expected(&[("Leases", 2, None)]), "lease {attempt}");
            h.clock.advance(std::time::Duration::from_secs(2));
            let r = h.post_issuance(json!({"errorCode": 9, "errorMessage": "late", "requestId": late})).await;
            assert_eq!(r.status.as_u16(), if attempt == 1 { 409 } else { 410 }, "{}", r.json());
            assert_eq!(metrics_since(), expected(&[(ended, 1, None)]), "a late result, lease {attempt}");
            let lease = h.request(&timed_out).await.lease_id.expect("leased");
            dispatcher.lease_expired(&timed_out, &lease).await.unwrap();
            assert_eq!(metrics_since(), expected(&[(ended, 1, None)]), "a time-out, lease {attempt}");
        }
        assert_eq!(h.poll().await.login_certs.len(), 0);
        assert_eq!(metrics_since(), [], "a poll that leases nothing counts nothing");

        // An OOB login: woken, approved. Wake-ups that fail, then one that finds the endpoint
        // gone (and marks it so: no wake-up is tried after it).
        let id = common::oob::start(&h, &access, common::oob::start_body(&app, "mo@example.com")).await;
        assert_eq!(metrics_since(), expected(&[("PushOutcome", 1, Some("SENT"))]));
        common::oob::approve(&h, &dev, &id).await;
        assert_eq!(metrics_since(), expected(&[("OobOutcome", 1, Some("COMPLETED"))]));
        h.pushes.fail_next([PushError::Unavailable("the platform is down".into()), PushError::Gone]);
        for outcome in ["FAILED", "ENDPOINT_GONE"] {
            common::oob::start(&h, &access, common::oob::start_body(&app, "mo@example.com")).await;
            assert_eq!(metrics_since(), expected(&[("PushOutcome", 1, Some(outcome))]));
        }
        common::oob::start(&h, &access, common::oob::start_body(&app, "mo@example.com")).await;
        assert_eq!(metrics_since(), [], "a gone endpoint is not woken again");

        // Customizations that refuse a start: one that runs out of time, one that denies.
        let spins = json!({"displayName": "spins", "trigger": "oob.start", "enabled": true, "timeoutMs": 50,
            "source": "function handler() { for (;;) {} }"});
        let spins = h.as_tenant(&app, "POST", "/code-customization", Some(spins)).await.json();
        let path = "/rp/api/oob/client/authentication/requests";
        let start = || {
            h.client.send("POST", path, Some(&access), Some(common::oob::start_body(&app, "mo@example.com")))
        };
        let r = start().await;
        r.problem(403, rp_shared::http::problem::codes::OOB_HOOK_FAILED);
        let failed =
            expected(&[("SandboxTimeouts", 1, None), ("OobOutcome", 1, Some("CUSTOMIZATION_FAILED"))]);
        assert_eq!(metrics_since(), failed);
        let denies = json!({"source": "function handler(event, api) { api.deny('no'); }", "timeoutMs": 1000});
        h.as_tenant(&app, "POST", &format!("/code-customization/{}", spins["id"]), Some(denies)).await;
        let r = start().await;
        r.problem(403, rp_shared::http::problem::codes::OOB_DENIED);
        assert_eq!(metrics_since(), expected(&[("OobOutcome", 1, Some("DENIED_BY_CUSTOMIZATION"))]));

        // Past the app's rate limit.
        h.admin(
            "PUT",
            &format!("/cc/api/apps/{app}/rate-limit"),
            Some(json!({"limit": 1, "windowSecs": 60})),
        )
        .await;
        h.clock.advance(std::time::Duration::from_secs(61));
        for status in [403, 429] {
            let r = start().await;
            assert_eq!(r.status.as_u16(), status, "{}", r.json());
        }
        let limited =
            expected(&[("OobOutcome", 1, Some("DENIED_BY_CUSTOMIZATION")), ("TooManyRequests", 1, None)]);
        assert_eq!(metrics_since(), limited);

        // The agent's CRL: stored, then the same one again, then one its CA did not sign.
        use base64::{engine::general_purpose::STANDARD, Engine};
        let dir = tempfile::tempdir().unwrap();
        let (ca, crl) = common::certificates::ca_with_revocations(dir.path(), 1);
        let ca_id = ca.id();
        let path = format!("/rp/pki/{ca_id}/crl");
        let upload = |crl: &[u8], ca: &[u8]| json!({"crl": STANDARD.encode(crl), "caCertificate": STANDARD.encode(ca)});
        let body = upload(&crl, ca.certificate_der());
        for (attempt, counted) in [(1, expected(&[("CrlPublished", 1, Some(ca_id.as_str()))])), (2, vec![])] {
            let r = h.admin("PUT", &path, Some(body.clone())).await;
            assert_eq!(r.status, 200, "{}", r.text());
            assert_eq!(metrics_since(), counted, "CRL upload {attempt}");
        }
        let other = tempfile::tempdir().unwrap();
        let (stranger, _) = common::certificates::ca_with_revocations(other.path(), 1);
        let r = h.admin("PUT", &path, Some(upload(&crl, stranger.certificate_der()))).await;
        assert_eq!(r.status, 400, "{}", r.text());
        assert_eq!(metrics_since(), [], "a refused CRL counts nothing");
    });
}
