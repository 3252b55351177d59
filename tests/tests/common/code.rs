//! Code-customization cases: the API (create, update, versions, restore, delete, test runs),
//! environment variables (names only, never values), the tenant's JWKS, and the `oob.start`
//! hook allowing, denying, rewriting and failing closed.

use super::certificates::{device, TestDevice};
use super::oob::{fetch, nonce, start_body};
use super::Harness;
use rp_shared::http::problem::codes;
use rp_shared::http::{AppState, HttpConfig};
use serde_json::{json, Value};
use std::time::Duration;

/// An OOB start for `user` with `details` as its `additionalDetails`.
fn oob_body(app: &str, user: &str, details: Value) -> Value {
    let mut body = start_body(app, user);
    body["additionalDetails"] = details;
    body
}

/// The code a tenant would write: verify the risk engine's HS256 token (issuer and key held in
/// env vars); deny without a valid one; otherwise show the score on the phone.
const RISK_CHECK: &str = r#"
async function handler(event, api) {
  const token = event.additionalDetails.riskToken;
  if (!token || !jwtVerify(token, {issuer: env.RISK_ISSUER, secret: env.RISK_SECRET, algorithms: ['HS256']})) {
    console.log('no valid risk token for', event.namedUser);
    api.deny('the risk engine did not vouch for this login');
    return {allowed: false};
  }
  const score = jwtDecodeJwt(token).payload.score;
  api.setTransactionText('Sign in to ' + event.machine + '? (risk score ' + score + ')');
  return {allowed: true, score};
}"#;

fn risk_token(issuer: &str, secret: &str) -> String {
    let exp = jsonwebtoken::get_current_timestamp() + 600;
    jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &json!({"iss": issuer, "exp": exp, "score": 7}),
        &jsonwebtoken::EncodingKey::from_secret(secret.as_bytes()),
    )
    .unwrap()
}

async fn create(h: &Harness, app: &str, body: Value) -> Value {
    let r = h.as_tenant(app, "POST", "/code-customization", Some(body)).await;
    assert_eq!(r.status, 201, "{}", r.json());
    r.json()
}

/// Creates an enabled `oob.start` customization of `app` named `name` that runs `source`.
async fn start_hook(h: &Harness, app: &str, name: &str, source: &str) -> Value {
    create(h, app, json!({"displayName": name, "trigger": "oob.start", "enabled": true, "source": source}))
        .await
}

pub async fn code_customizations_keep_versions_and_env_values_stay_secret(h: Harness) {
    let app = h.app().await;
    let other = h.app().await;
    // Bad input names the field.
    for (body, field) in [
        (json!({"trigger": "oob.start", "source": "function handler(){}"}), "displayName"),
        (json!({"displayName": "x", "trigger": "login", "source": "function handler(){}"}), "trigger"),
        (json!({"displayName": "x", "trigger": "oob.start", "source": "x".repeat(100 * 1024 + 1)}), "source"),
        (
            json!({"displayName": "x", "trigger": "oob.start", "source": "s", "timeoutMs": 20_001}),
            "timeoutMs",
        ),
        (json!({"displayName": "x", "trigger": "oob.start", "source": "s", "extra": 1}), "extra"),
    ] {
        let r = h.as_tenant(&app, "POST", "/code-customization", Some(body)).await;
        assert_eq!(r.problem(400, codes::INVALID_FIELD)["field"], field);
        assert!(r.header("x-ratelimit-remaining").is_some(), "rate-limit headers on errors too");
    }
    let created = create(
        &h,
        &app,
        json!({"displayName": "v1", "trigger": "oob.start", "source": "function handler() { return 1; }"}),
    )
    .await;
    let id = created["id"].as_i64().unwrap();
    assert_eq!((created["timeoutMs"].as_u64(), created["enabled"].as_bool()), (Some(5000), Some(false)));
    let path = format!("/code-customization/{id}");
    let r = h
        .as_tenant(
            &app,
            "POST",
            &path,
            Some(json!({"source": "function handler() { return 2; }", "displayName": "v2"})),
        )
        .await;
    assert_eq!((r.status.as_u16(), r.json()["version"].as_u64()), (200, Some(2)));
    h.as_tenant(&app, "POST", &path, Some(json!({}))).await.problem(400, codes::INVALID_FIELD);
    let list = h.as_tenant(&app, "GET", "/code-customization", None).await.json();
    assert_eq!(list["total"], 1);
    assert!(list["codeCustomizations"][0].get("source").is_none(), "the list leaves the source out");
    let versions = h.as_tenant(&app, "GET", &format!("{path}/versions"), None).await.json();
    assert_eq!(
        (versions["currentVersion"].as_u64(), versions["versions"][0]["version"].as_u64()),
        (Some(2), Some(1))
    );
    let v1 = h.as_tenant(&app, "GET", &format!("{path}/versions/1"), None).await.json();
    assert_eq!(v1["displayName"], "v1");
    let restored = h.as_tenant(&app, "POST", &format!("{path}/versions/1/restore"), None).await.json();
    assert_eq!((restored["displayName"].as_str(), restored["version"].as_u64()), (Some("v1"), Some(3)));
    h.as_tenant(&app, "GET", &format!("{path}/versions/9"), None)
        .await
        .problem(404, codes::CODE_VERSION_NOT_FOUND);
    // Another tenant sees nothing of it.
    h.as_tenant(&other, "GET", &path, None).await.problem(404, codes::CODE_NOT_FOUND);
    h.as_tenant(&other, "POST", &format!("{path}/test"), Some(json!({})))
        .await
        .problem(404, codes::CODE_NOT_FOUND);
    let access = h.access_token(&app).await;
    h.client.send("GET", &path, Some(&access), None).await.problem(403, codes::WRONG_TOKEN_KIND);
    h.client.send("GET", &path, None, None).await.problem(401, codes::MISSING_CREDENTIALS);

    // Environment variables: set, listed by name only, visible to a run, scrubbed from its
    // output; deleted.
    let r = put_env(&h, &app, "API_KEY", "sk_live_abcdef123456").await;
    assert_eq!(r.status, 200, "{}", r.json());
    assert!(!r.text().contains("sk_live"), "the value is never returned");
    put_env(&h, &app, "bad-name", "x").await.problem(400, codes::INVALID_FIELD);
    let names = h.as_tenant(&app, "GET", "/code-customization/env", None).await;
    assert_eq!(names.json()["variables"][0]["name"], "API_KEY");
    assert!(!names.text().contains("sk_live"));
    assert!(h.as_tenant(&other, "GET", "/code-customization/env", None).await.json()["variables"]
        .as_array()
        .unwrap()
        .is_empty());
    let source = "function handler(e) { console.log('key', env.API_KEY); return {len: env.API_KEY.length, echo: env.API_KEY}; }";
    h.as_tenant(&app, "POST", &path, Some(json!({"source": source}))).await;
    let run = h.as_tenant(&app, "POST", &format!("{path}/test"), Some(json!({"event": {"a": 1}}))).await;
    assert_eq!(run.status, 200, "{}", run.json());
    assert_eq!(run.json()["result"]["len"], 20);
    assert!(!run.text().contains("sk_live"), "scrubbed from result and logs: {}", run.text());
    assert_eq!(run.json()["logs"][0], "key [env.API_KEY]");
    // A failing run is a 200 that says why.
    let spins = json!({"source": "function handler() { while (true) {} }", "timeoutMs": 100});
    h.as_tenant(&app, "POST", &path, Some(spins)).await;
    let run = h.as_tenant(&app, "POST", &format!("{path}/test"), Some(json!({}))).await;
    assert_eq!((run.status.as_u16(), run.json()["error"].as_str()), (200, Some("timed out after 100 ms")));
    h.as_tenant(&app, "DELETE", "/code-customization/env/API_KEY", None).await;
    h.as_tenant(&app, "DELETE", "/code-customization/env/API_KEY", None)
        .await
        .problem(404, codes::ENV_NOT_FOUND);
    // Deleted with its versions.
    assert_eq!(h.as_tenant(&app, "DELETE", &path, None).await.status, 204);
    h.as_tenant(&app, "GET", &path, None).await.problem(404, codes::CODE_NOT_FOUND);
    h.as_tenant(&app, "GET", &format!("{path}/versions/1"), None).await.problem(404, codes::CODE_NOT_FOUND);
    assert_eq!(h.as_tenant(&app, "GET", "/code-customization", None).await.json()["total"], 0);
}

/// The names of the tenant's environment variables, as listed.
async fn env_names(h: &Harness, app: &str) -> Vec<String> {
    let list = h.as_tenant(app, "GET", "/code-customization/env", None).await.json();
    list["variables"].as_array().unwrap().iter().map(|v| v["name"].as_str().unwrap().to_owned()).collect()
}

async fn put_env(h: &Harness, app: &str, name: &str, value: &str) -> rp_shared::testing::http::TestResponse {
    h.as_tenant(app, "PUT", &format!("/code-customization/env/{name}"), Some(json!({"value": value}))).await
}

/// Each app's share of the key service (`KMS_CALLS_PER_APP`): a request whose key call would
/// pass it answers 503 with `Retry-After`, as a throttled KMS does, and changes nothing; another
/// app's calls go on; the next second brings a fresh share.
pub async fn an_app_past_its_key_budget_is_refused_and_no_other_is(h: Harness) {
    let h = h.configured(HttpConfig { key_calls_per_app: 3, ..HttpConfig::default() }).await;
    let (app, other) = (h.app().await, h.app().await);
    // The first variable asks for a fresh data key; the second also opens the first's.
    assert_eq!(put_env(&h, &app, "FIRST", "v").await.status, 200);
    assert_eq!(put_env(&h, &app, "SECOND", "v").await.status, 200);
    let refused = put_env(&h, &app, "THIRD", "v").await;
    refused.problem(503, codes::UNAVAILABLE);
    assert_eq!(refused.header("retry-after"), Some("1"));
    assert_eq!(env_names(&h, &app).await, ["FIRST", "SECOND"], "nothing written");
    assert_eq!(put_env(&h, &other, "FIRST", "v").await.status, 200, "another app's share is its own");
    h.clock.advance(Duration::from_secs(1));
    assert_eq!(put_env(&h, &app, "THIRD", "v").await.status, 200, "a new second, a new share");
    assert_eq!(env_names(&h, &app).await, ["FIRST", "SECOND", "THIRD"]);

    // An app's own figure replaces the deployment's, smaller or larger, once the figure an
    // instance keeps is as old as it may be.
    for (tenant, calls) in [(&other, 1), (&app, 5)] {
        let limits = json!({"limit": 120, "windowSecs": 60, "keyCallsPerSec": calls});
        let r = h.admin("PUT", &format!("/cc/api/apps/{tenant}/rate-limit"), Some(limits)).await;
        assert_eq!(r.json()["keyCallsPerSec"], calls);
    }
    h.clock.advance(Duration::from_secs(rp_shared::app::keybudget::FIGURE_KEPT_SECS as u64));
    // Adding a variable opens the set's data key and seals it under a fresh one: two calls.
    put_env(&h, &other, "SECOND", "v").await.problem(503, codes::UNAVAILABLE);
    assert_eq!(env_names(&h, &other).await, ["FIRST"], "nothing written");
    for name in ["FOURTH", "FIFTH"] {
        assert_eq!(put_env(&h, &app, name, "v").await.status, 200, "four calls of five in one second");
    }
    put_env(&h, &app, "SIXTH", "v").await.problem(503, codes::UNAVAILABLE);
}

/// A tenant's variables stay within their caps: 50 of them, a name of 64 characters, a value of
/// 4 KiB, 64 KiB of values in all. What passes one is refused naming its field, and nothing of
/// it is stored.
pub async fn environment_variables_stay_within_their_caps(h: Harness) {
    let app = h.app().await;
    for i in 0..50 {
        assert_eq!(put_env(&h, &app, &format!("V{i:02}"), "v").await.status, 200);
    }
    put_env(&h, &app, "V50", "v").await.problem(409, codes::TOO_MANY_ENV_VARS);
    assert_eq!(put_env(&h, &app, "V07", "changed").await.status, 200, "replacing one adds none");
    let names = env_names(&h, &app).await;
    assert_eq!((names.len(), names.contains(&"V50".to_owned())), (50, false));

    let sizes = h.app().await;
    assert_eq!(put_env(&h, &sizes, &"N".repeat(64), "v").await.status, 200);
    assert_eq!(
        put_env(&h, &sizes, &"N".repeat(65), "v").await.problem(400, codes::INVALID_FIELD)["field"],
        "name"
    );
    assert_eq!(
        put_env(&h, &sizes, "BIG", &"x".repeat(4097)).await.problem(400, codes::INVALID_FIELD)["field"],
        "value"
    );
    h.as_tenant(&sizes, "DELETE", &format!("/code-customization/env/{}", "N".repeat(64)), None).await;
    for i in 0..16 {
        assert_eq!(
            put_env(&h, &sizes, &format!("K{i:02}"), &"x".repeat(4096)).await.status,
            200,
            "64 KiB in all"
        );
    }
    assert_eq!(
        put_env(&h, &sizes, "ONE_MORE", "x").await.problem(400, codes::INVALID_FIELD)["field"],
        "value"
    );
    assert_eq!(put_env(&h, &sizes, "K03", &"y".repeat(4096)).await.status, 200, "the total stays");
    assert_eq!(env_names(&h, &sizes).await, (0..16).map(|i| format!("K{i:02}")).collect::<Vec<_>>());
}

async fn setup_hook(h: &Harness) -> (String, String, TestDevice) {
    let app = h.app().await;
    let access = h.access_token(&app).await;
    let dev = device(h, &app, "alice@example.com", None).await;
    for (name, value) in
        [("RISK_ISSUER", "https://risk.example.com"), ("RISK_SECRET", "risk-shared-secret-0123")]
    {
        assert_eq!(put_env(h, &app, name, value).await.status, 200);
    }
    (app, access, dev)
}

async fn oob_start(h: &Harness, access: &str, body: Value) -> rp_shared::testing::http::TestResponse {
    h.client.send("POST", "/rp/api/oob/client/authentication/requests", Some(access), Some(body)).await
}

/// The hook: an enabled `oob.start` customization verifies the risk engine's JWT with an
/// issuer held in an env var, denies without it, and rewrites the text the phone shows with it.
pub async fn the_oob_start_hook_allows_denies_and_rewrites(h: Harness) {
    let (app, access, dev) = setup_hook(&h).await;
    let code =
        create(&h, &app, json!({"displayName": "risk", "trigger": "oob.start", "source": RISK_CHECK})).await;
    // Disabled: it does not run.
    let r = oob_start(&h, &access, oob_body(&app, "alice@example.com", json!({}))).await;
    assert_eq!(r.status, 200, "{}", r.json());
    let path = format!("/code-customization/{}", code["id"]);
    h.as_tenant(&app, "POST", &path, Some(json!({"enabled": true}))).await;

    // No token, or one from another issuer: denied, and nothing is stored or sent.
    let before = fetch(&h, &dev).await;
    for details in
        [json!({}), json!({"riskToken": risk_token("https://evil.example.com", "risk-shared-secret-0123")})]
    {
        let r = oob_start(&h, &access, oob_body(&app, "alice@example.com", details)).await;
        let problem = r.problem(403, codes::OOB_DENIED);
        assert!(problem["detail"].as_str().unwrap().contains("did not vouch"), "{problem}");
    }
    assert_eq!(fetch(&h, &dev).await.len(), before.len(), "a denied start reaches no phone");
    let events =
        h.admin("GET", &format!("/rp/api/events?appId={app}&name=CODE_CUSTOMIZATION_RUN"), None).await.json();
    assert_eq!(events["events"][0]["attributes"]["outcome"], "denied", "{events}");

    // A valid token: allowed, and the phone shows the rewritten text.
    let token = risk_token("https://risk.example.com", "risk-shared-secret-0123");
    let r = oob_start(&h, &access, oob_body(&app, "alice@example.com", json!({"riskToken": token}))).await;
    assert_eq!(r.status, 200, "{}", r.json());
    let id = r.json()["response"]["requestId"].as_str().unwrap().to_owned();
    let shown = fetch(&h, &dev).await;
    let mine = shown.iter().find(|s| s["requestId"] == id.as_str()).expect("the phone sees the request");
    assert_eq!(mine["transactionText"], "Sign in to WS-0042? (risk score 7)");

    // A customization that throws fails closed, with its own code, and is an event.
    let broken = "function handler() { throw new Error('bug'); }";
    h.as_tenant(&app, "POST", &path, Some(json!({"source": broken}))).await;
    let r = oob_start(&h, &access, oob_body(&app, "alice@example.com", json!({"riskToken": token}))).await;
    let problem = r.problem(403, codes::OOB_HOOK_FAILED);
    assert!(!problem["detail"].as_str().unwrap().contains("bug"), "the tenant's error stays in the event");
    let events =
        h.admin("GET", &format!("/rp/api/events?appId={app}&name=CODE_CUSTOMIZATION_RUN"), None).await.json();
    let failed = events["events"].as_array().unwrap().iter().find(|e| e["attributes"]["outcome"] == "failed");
    assert!(failed.is_some_and(|e| e["attributes"]["detail"] == "Error: bug"), "{events}");
    // So does one that times out.
    let spins = json!({"source": "function handler() { for (;;) {} }", "timeoutMs": 50});
    h.as_tenant(&app, "POST", &path, Some(spins)).await;
    let r = oob_start(&h, &access, oob_body(&app, "alice@example.com", json!({}))).await;
    r.problem(403, codes::OOB_HOOK_FAILED);
    // Another tenant's starts are not touched by this one's customization.
    let (other, other_access, _) = setup_hook(&h).await;
    let r = oob_start(&h, &other_access, oob_body(&other, "alice@example.com", json!({}))).await;
    assert_eq!(r.status, 200, "{}", r.json());
}

/// What an OOB start runs follows every write to the customizations: enabling, disabling,
/// restoring an enabled version, deleting. The disabled ones the tenant keeps (each would fail
/// the start if it ran) are never run.
pub async fn the_oob_start_hook_follows_enable_restore_and_delete(h: Harness) {
    let (app, access, _) = setup_hook(&h).await;
    let gate =
        start_hook(&h, &app, "gate", "function handler(event, api) { api.deny('closed for maintenance'); }")
            .await;
    for _ in 0..3 {
        let off = json!({"displayName": "off", "trigger": "oob.start",
            "source": "function handler() { throw new Error('a disabled customization ran'); }"});
        assert_eq!(create(&h, &app, off).await["enabled"], false);
    }
    let path = format!("/code-customization/{}", gate["id"]);
    let start = || oob_start(&h, &access, oob_body(&app, "alice@example.com", json!({})));
    start().await.problem(403, codes::OOB_DENIED);
    assert_eq!(h.as_tenant(&app, "POST", &path, Some(json!({"enabled": false}))).await.status, 200);
    let r = start().await;
    assert_eq!(r.status, 200, "disabled: {}", r.json());
    // Version 1 was enabled: restoring it turns the gate back on.
    assert_eq!(h.as_tenant(&app, "POST", &format!("{path}/versions/1/restore"), None).await.status, 200);
    start().await.problem(403, codes::OOB_DENIED);
    assert_eq!(h.as_tenant(&app, "DELETE", &path, None).await.status, 204);
    let r = start().await;
    assert_eq!(r.status, 200, "deleted: {}", r.json());
}

/// An OOB start's customizations share one time budget (the function's time-out bounds the
/// start, not each run): two that each finish well within their own time-out but not within the
/// budget together fail the start closed; with room for both, it goes through.
pub async fn the_oob_start_hooks_share_one_time_budget(h: Harness) {
    use rp_shared::domain::oob::OobStart;
    use rp_shared::http::wire::oob::OobStartRequest;
    let (app, _, _) = setup_hook(&h).await;
    for name in ["first", "second"] {
        let busy = json!({"displayName": name, "trigger": "oob.start", "enabled": true, "timeoutMs": 2000,
            "source": "function handler() { const end = Date.now() + 300; while (Date.now() < end) {} }"});
        create(&h, &app, busy).await;
    }
    let start = |budget_ms: u64| {
        let config = HttpConfig { hook_budget: Duration::from_millis(budget_ms), ..HttpConfig::default() };
        let state = AppState::new(h.backend.clone(), config);
        let body: OobStartRequest =
            serde_json::from_value(oob_body(&app, "alice@example.com", json!({}))).unwrap();
        let start = OobStart::try_from(body).unwrap();
        async move {
            let reads = rp_shared::app::oob::start_reads(&state, &start).await;
            rp_shared::app::oob::start(&state, start, reads).await.map_err(|e| e.to_string())
        }
    };
    let refused = start(450).await;
    assert!(refused.as_ref().is_err_and(|e| e.contains("failed; the start is refused")), "{refused:?}");
    let started = start(5000).await;
    assert!(started.is_ok(), "{started:?}");
}

/// An OOB start runs the tenant's customizations in id order and stops at the first that denies
/// or fails: the ones after it do not run. Here the one after would mint the tenant's first
/// token, which would publish a signing key.
pub async fn an_oob_start_runs_no_customization_past_a_refusal(h: Harness) {
    let (app, access, _) = setup_hook(&h).await;
    let first = start_hook(&h, &app, "gate", "function handler(event, api) { api.deny('closed'); }").await;
    let gate = format!("/code-customization/{}", first["id"]);
    let mints = "function handler() { jwtCreateSignedJwt({sub: 'after'}, {audience: 'crm'}); }";
    start_hook(&h, &app, "after", mints).await;
    let jwks = format!("/rp/api/apps/{app}/jwks.json");
    for (source, code) in [
        (None, codes::OOB_DENIED),
        (Some("function handler() { throw new Error('bug'); }"), codes::OOB_HOOK_FAILED),
    ] {
        if let Some(source) = source {
            assert_eq!(h.as_tenant(&app, "POST", &gate, Some(json!({"source": source}))).await.status, 200);
        }
        oob_start(&h, &access, oob_body(&app, "alice@example.com", json!({}))).await.problem(403, code);
        assert_eq!(h.client.send("GET", &jwks, None, None).await.json(), json!({"keys": []}), "{code}");
    }
    // Allowed, the next one runs.
    let allows = json!({"source": "function handler() {}"});
    assert_eq!(h.as_tenant(&app, "POST", &gate, Some(allows)).await.status, 200);
    assert_eq!(oob_start(&h, &access, oob_body(&app, "alice@example.com", json!({}))).await.status, 200);
    assert_eq!(
        h.client.send("GET", &jwks, None, None).await.json()["keys"].as_array().map(Vec::len),
        Some(1)
    );
}

/// A replayed start is refused (409) before the tenant's customizations run: a gate enabled
/// after the first start would deny it (403) if it ran.
pub async fn a_replayed_oob_start_is_refused_before_the_hook_runs(h: Harness) {
    let (app, access, _) = setup_hook(&h).await;
    let body = oob_body(&app, "alice@example.com", json!({}));
    let r = oob_start(&h, &access, body.clone()).await;
    assert_eq!(r.status, 200, "{}", r.json());
    start_hook(&h, &app, "gate", "function handler(event, api) { api.deny('closed for maintenance'); }")
        .await;
    let replay = oob_start(&h, &access, body.clone()).await;
    assert_eq!(replay.problem(409, codes::NONCE_REUSED)["field"], "sessionNonce");
    // A fresh nonce still meets the gate.
    let mut fresh = body;
    fresh["sessionNonce"] = json!(nonce());
    oob_start(&h, &access, fresh).await.problem(403, codes::OOB_DENIED);
}

/// A token a test run of `app` mints for `user`.
async fn mint(h: &Harness, app: &str, user: &str) -> String {
    let code = create(
        h,
        app,
        json!({"displayName": "mint", "trigger": "oob.start",
        "source": "function handler(e) { return jwtCreateSignedJwt({sub: e.user}, {audience: 'crm'}); }"}),
    )
    .await;
    let path = format!("/code-customization/{}/test", code["id"]);
    let run = h.as_tenant(app, "POST", &path, Some(json!({"event": {"user": user}}))).await;
    run.json()["result"].as_str().unwrap_or_else(|| panic!("{}", run.json())).to_owned()
}

/// `token`'s claims if it verifies (ES256, audience `crm`, issued for `app`) against the JWKS
/// `app_jwks` serves, checked with `jsonwebtoken`, not our helper.
async fn verified(h: &Harness, token: &str, issuer_app: &str, jwks_app: &str) -> Option<Value> {
    let jwks = h.client.send("GET", &format!("/rp/api/apps/{jwks_app}/jwks.json"), None, None).await;
    assert_eq!(jwks.status, 200, "{}", jwks.text());
    let set: jsonwebtoken::jwk::JwkSet = serde_json::from_value(jwks.json()).unwrap();
    let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::ES256);
    validation.set_audience(&["crm"]);
    validation.set_issuer(&[format!("http://127.0.0.1:8080/rp/api/apps/{issuer_app}")]);
    // Every key of the set is tried, not only the one the header names: a token of another
    // tenant must fail on the signature, whatever `kid` it claims.
    set.keys.iter().find_map(|jwk| {
        let key = jsonwebtoken::DecodingKey::from_jwk(jwk).unwrap();
        jsonwebtoken::decode::<Value>(token, &key, &validation).ok().map(|data| data.claims)
    })
}

/// The tenant's JWKS is public, 404 for an unknown app, empty until the tenant's first token,
/// and verifies a token a test run mints.
pub async fn a_tenants_jwks_verifies_the_tokens_it_mints(h: Harness) {
    let app = h.app().await;
    let jwks = h.client.send("GET", &format!("/rp/api/apps/{app}/jwks.json"), None, None).await;
    assert_eq!(jwks.json(), json!({"keys": []}));
    h.client
        .send("GET", "/rp/api/apps/no-such-app/jwks.json", None, None)
        .await
        .problem(404, codes::APP_NOT_FOUND);
    let token = mint(&h, &app, "bob").await;
    let header = jsonwebtoken::decode_header(&token).unwrap();
    let jwks = h.client.send("GET", &format!("/rp/api/apps/{app}/jwks.json"), None, None).await.json();
    assert_eq!(jwks["keys"].as_array().unwrap().len(), 1);
    assert_eq!(jwks["keys"][0]["kid"], header.kid.unwrap().as_str());
    let claims = verified(&h, &token, &app, &app).await.expect("our token verifies against our JWKS");
    assert_eq!(claims["sub"], "bob");
    // The next token is signed with the same key.
    let again = jsonwebtoken::decode_header(&mint(&h, &app, "carol").await).unwrap();
    assert_eq!(again.kid.as_deref(), jwks["keys"][0]["kid"].as_str());
}

/// Each tenant signs with a key of its own: a token of one does not verify with another's JWKS,
/// even when the verifier forgets to check `iss`.
pub async fn each_tenant_signs_with_a_key_of_its_own(h: Harness) {
    let (a, b) = (h.app().await, h.app().await);
    let (token_a, token_b) = (mint(&h, &a, "bob").await, mint(&h, &b, "bob").await);
    let kid = |t: &str| jsonwebtoken::decode_header(t).unwrap().kid.unwrap();
    assert_ne!(kid(&token_a), kid(&token_b));
    assert!(verified(&h, &token_a, &a, &a).await.is_some());
    assert!(verified(&h, &token_a, &a, &b).await.is_none(), "A's token verifies with B's JWKS");
    assert!(verified(&h, &token_b, &b, &a).await.is_none(), "B's token verifies with A's JWKS");
}

/// Rotation adds a key and keeps the old one published until it is retired; the active key
/// cannot be retired; a tenant publishes at most five; another tenant's key is not found.
pub async fn a_tenant_rotates_and_retires_its_signing_keys(h: Harness) {
    let (app, other) = (h.app().await, h.app().await);
    let keys = |app: &str| {
        let h = &h;
        let app = app.to_owned();
        async move {
            let r = h.as_tenant(&app, "GET", "/code-customization/signing-keys", None).await;
            assert_eq!(r.status, 200, "{}", r.text());
            r.json()["keys"].as_array().unwrap().clone()
        }
    };
    assert!(keys(&app).await.is_empty());
    let old = mint(&h, &app, "bob").await;
    let first = keys(&app).await;
    assert_eq!(first.len(), 1);
    assert_eq!(first[0]["active"], true);
    let old_kid = first[0]["kid"].as_str().unwrap().to_owned();

    let rotated = h.as_tenant(&app, "POST", "/code-customization/signing-keys", None).await;
    assert_eq!(rotated.status, 201, "{}", rotated.text());
    let new_kid = rotated.json()["kid"].as_str().unwrap().to_owned();
    assert_eq!(
        rotated.header("location"),
        Some(format!("/code-customization/signing-keys/{new_kid}").as_str())
    );
    assert_eq!(rotated.json()["jwk"]["kid"], new_kid.as_str());
    let listed = keys(&app).await;
    assert_eq!(
        listed
            .iter()
            .map(|k| (k["kid"].as_str().unwrap(), k["active"].as_bool().unwrap()))
            .collect::<Vec<_>>(),
        vec![(old_kid.as_str(), false), (new_kid.as_str(), true)]
    );
    // New tokens carry the new key; the old token still verifies while its key is published.
    let new = mint(&h, &app, "carol").await;
    assert_eq!(jsonwebtoken::decode_header(&new).unwrap().kid.as_deref(), Some(new_kid.as_str()));
    assert!(verified(&h, &old, &app, &app).await.is_some());

    let retire = |app: &str, kid: &str| {
        let (h, app, path) = (&h, app.to_owned(), format!("/code-customization/signing-keys/{kid}"));
        async move { h.as_tenant(&app, "DELETE", &path, None).await }
    };
    retire(&app, &new_kid).await.problem(409, codes::SIGNING_KEY_ACTIVE);
    retire(&other, &old_kid).await.problem(404, codes::SIGNING_KEY_NOT_FOUND);
    assert_eq!(retire(&app, "not-a-kid").await.problem(400, codes::INVALID_FIELD)["field"], "kid");
    assert_eq!(retire(&app, &old_kid).await.status, 204);
    retire(&app, &old_kid).await.problem(404, codes::SIGNING_KEY_NOT_FOUND);
    assert!(verified(&h, &old, &app, &app).await.is_none(), "a retired key's token no longer verifies");
    assert!(verified(&h, &new, &app, &app).await.is_some());

    for _ in 0..4 {
        assert_eq!(h.as_tenant(&app, "POST", "/code-customization/signing-keys", None).await.status, 201);
    }
    h.as_tenant(&app, "POST", "/code-customization/signing-keys", None)
        .await
        .problem(409, codes::TOO_MANY_SIGNING_KEYS);
    assert_eq!(keys(&app).await.len(), 5);
}

/// Concurrent rotations each add a key or are refused at the cap; none is lost.
pub async fn racing_rotations_lose_no_key(h: Harness) {
    let app = h.app().await;
    let rotations = (0..8).map(|_| h.as_tenant(&app, "POST", "/code-customization/signing-keys", None));
    let answers = futures_util::future::join_all(rotations).await;
    let created: Vec<String> = answers
        .iter()
        .filter(|r| r.status == 201)
        .map(|r| r.json()["kid"].as_str().unwrap().to_owned())
        .collect();
    for r in answers.iter().filter(|r| r.status != 201) {
        r.problem(409, codes::TOO_MANY_SIGNING_KEYS);
    }
    assert_eq!(created.len(), 5, "five rotations win, the rest meet the cap");
    let r = h.as_tenant(&app, "GET", "/code-customization/signing-keys", None).await;
    let mut listed: Vec<String> =
        r.json()["keys"].as_array().unwrap().iter().map(|k| k["kid"].as_str().unwrap().to_owned()).collect();
    let mut created = created;
    listed.sort();
    created.sort();
    assert_eq!(listed, created, "every key a rotation answered with is published");
}
