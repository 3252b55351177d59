//! Router cases: every endpoint, every documented error.

use super::Harness;
use rp_shared::http::problem::codes;
use serde_json::{json, Value};
use std::time::Duration;

pub async fn health_needs_no_token(h: Harness) {
    let r = h.client.send("GET", "/health", None, None).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json(), json!({"status": "ok"}));
}

pub async fn unknown_routes_and_methods_are_problems(h: Harness) {
    let r = h.client.send("GET", "/no/such/route", None, None).await;
    let body = r.problem(404, codes::ROUTE_NOT_FOUND);
    assert!(body["detail"].as_str().unwrap().contains("/no/such/route"));
    h.client.send("DELETE", "/health", None, None).await.problem(405, codes::METHOD_NOT_ALLOWED);
    h.admin("PATCH", "/cc/api/apps", None).await.problem(405, codes::METHOD_NOT_ALLOWED);
}

pub async fn every_response_has_a_request_id(h: Harness) {
    for r in [
        h.client.send("GET", "/health", None, None).await,
        h.client.send("GET", "/cc/api/apps", None, None).await,
        h.client.send("GET", "/nowhere", None, None).await,
    ] {
        let id = r.header("x-request-id").expect("x-request-id");
        assert_eq!(id.len(), 36, "a UUID: {id}");
    }
}

pub async fn missing_or_malformed_authorization_is_401(h: Harness) {
    let r = h.client.send("GET", "/cc/api/apps", None, None).await;
    let body = r.problem(401, codes::MISSING_CREDENTIALS);
    assert_eq!(body["field"], "Authorization");
    assert_eq!(r.header("www-authenticate"), Some("Bearer"));
    for value in [
        "Basic abc",
        "Bearer",
        "Bearer short",
        "Token rpt_aaaaaaaaaaaaaaaaaaaaaaaa",
        "Bearer a b c d e f g h i j",
    ] {
        let request = axum::http::Request::get("/cc/api/apps")
            .header("authorization", value)
            .body(axum::body::Body::empty())
            .unwrap();
        let r = h.client.request(request).await;
        let body = r.problem(401, codes::MISSING_CREDENTIALS);
        assert!(body["detail"].as_str().unwrap().starts_with("Authorization:"), "{value}: {body}");
    }
    let request = axum::http::Request::get("/cc/api/apps")
        .header("authorization", axum::http::HeaderValue::from_bytes(b"Bearer \xff\xfe").unwrap())
        .body(axum::body::Body::empty())
        .unwrap();
    h.client.request(request).await.problem(401, codes::MISSING_CREDENTIALS);
    // A valid token given twice is refused, as two headers and as API Gateway joins them.
    let valid = format!("Bearer {}", h.admin);
    let request = axum::http::Request::get("/cc/api/apps")
        .header("authorization", &valid)
        .header("authorization", &valid)
        .body(axum::body::Body::empty())
        .unwrap();
    let body = h.client.request(request).await.problem(401, codes::MISSING_CREDENTIALS);
    assert_eq!(
        body["detail"].as_str().unwrap().split(" (").next(),
        Some("Authorization: is given more than once")
    );
    let request = axum::http::Request::get("/cc/api/apps")
        .header("authorization", format!("{valid}, {valid}"))
        .body(axum::body::Body::empty())
        .unwrap();
    h.client.request(request).await.problem(401, codes::MISSING_CREDENTIALS);
}

pub async fn unknown_expired_and_revoked_tokens_are_401(h: Harness) {
    let fake = "rpt_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
    let r = h.client.send("GET", "/cc/api/apps", Some(fake), None).await;
    r.problem(401, codes::INVALID_TOKEN);

    let r = h
        .admin("POST", "/cc/api/tokens", Some(json!({"kind": "controlCenterAdmin", "expiresInSecs": 60})))
        .await;
    assert_eq!(r.status, 201);
    let short = r.json()["token"].as_str().unwrap().to_owned();
    assert_eq!(h.client.send("GET", "/cc/api/apps", Some(&short), None).await.status, 200);
    h.clock.advance(Duration::from_secs(61));
    let body =
        h.client.send("GET", "/cc/api/apps", Some(&short), None).await.problem(401, codes::INVALID_TOKEN);
    assert!(body["detail"].as_str().unwrap().contains("expired"));

    let r = h.admin("POST", "/cc/api/tokens", Some(json!({"kind": "controlCenterAdmin"}))).await;
    let (token, id) =
        (r.json()["token"].as_str().unwrap().to_owned(), r.json()["tokenId"].as_str().unwrap().to_owned());
    assert_eq!(h.admin("DELETE", &format!("/cc/api/tokens/{id}"), None).await.status, 204);
    let body =
        h.client.send("GET", "/cc/api/apps", Some(&token), None).await.problem(401, codes::INVALID_TOKEN);
    assert!(body["detail"].as_str().unwrap().contains("revoked"));
    // A token differing only in its tail from a real one is still unknown.
    let mut near = h.admin.clone();
    let last = near.pop().unwrap();
    near.push(if last == 'A' { 'B' } else { 'A' });
    h.client.send("GET", "/cc/api/apps", Some(&near), None).await.problem(401, codes::INVALID_TOKEN);
}

pub async fn access_tokens_are_403_on_admin_routes(h: Harness) {
    let app = h.app().await;
    let access = h.access_token(&app).await;
    for (method, path, body) in [
        ("GET", "/cc/api/apps".to_owned(), None),
        ("POST", "/cc/api/apps".to_owned(), Some(json!({"appId": "other", "displayName": "x"}))),
        ("GET", format!("/cc/api/apps/{app}"), None),
        ("GET", format!("/cc/api/apps/{app}/workstation"), None),
        ("PUT", format!("/cc/api/apps/{app}/workstation"), Some(json!({}))),
        ("GET", "/cc/api/tokens".to_owned(), None),
        ("POST", "/cc/api/tokens".to_owned(), Some(json!({"kind": "controlCenterAdmin"}))),
        ("DELETE", "/cc/api/tokens/0123456789abcdef".to_owned(), None),
    ] {
        let r = h.client.send(method, &path, Some(&access), body).await;
        r.problem(403, codes::WRONG_TOKEN_KIND);
    }
}

pub async fn apps_are_created_read_and_listed(h: Harness) {
    let id = Harness::unique("demo");
    let r =
        h.admin("POST", "/cc/api/apps", Some(json!({"appId": id, "displayName": "Workstation demo"}))).await;
    assert_eq!(r.status, 201, "{}", r.json());
    assert_eq!(r.header("location"), Some(format!("/cc/api/apps/{id}").as_str()));
    let created = r.json();
    assert_eq!(created["appId"], id.as_str());
    assert_eq!(created["displayName"], "Workstation demo");
    assert_eq!(created["workstation"]["offlineAccess"]["enabled"], false);
    assert!(created["createdAt"].as_str().unwrap().ends_with('Z'));

    let r = h.admin("GET", &format!("/cc/api/apps/{id}"), None).await;
    assert_eq!((r.status.as_u16(), r.json()), (200, created.clone()));
    let body = h.admin("GET", "/cc/api/apps/noSuchApp", None).await.problem(404, codes::APP_NOT_FOUND);
    assert!(body["detail"].as_str().unwrap().contains("noSuchApp"));

    let duplicate = h.admin("POST", "/cc/api/apps", Some(json!({"appId": id, "displayName": "again"}))).await;
    duplicate.problem(409, codes::APP_EXISTS);

    // Paging walks every app exactly once, in id order.
    let mine = [h.app().await, h.app().await, h.app().await];
    let mut seen = Vec::new();
    let mut path = "/cc/api/apps?limit=2".to_owned();
    loop {
        let page = h.admin("GET", &path, None).await.json();
        let apps = page["apps"].as_array().unwrap();
        assert!(apps.len() <= 2);
        seen.extend(apps.iter().map(|a| a["appId"].as_str().unwrap().to_owned()));
        match page["nextCursor"].as_str() {
            Some(cursor) => path = format!("/cc/api/apps?limit=2&cursor={cursor}"),
            None => break,
        }
    }
    for app in mine.iter().chain([&id]) {
        assert_eq!(seen.iter().filter(|s| *s == app).count(), 1, "{app} in {seen:?}");
    }
    let mut sorted = seen.clone();
    sorted.sort();
    assert_eq!(seen, sorted);
}

pub async fn app_ids_are_unique_even_under_races(h: Harness) {
    let id = Harness::unique("race");
    let h = std::sync::Arc::new(h);
    let tasks: Vec<_> = (0..6)
        .map(|i| {
            let h = h.clone();
            let id = id.clone();
            tokio::spawn(async move {
                h.admin("POST", "/cc/api/apps", Some(json!({"appId": id, "displayName": format!("n{i}")})))
                    .await
                    .status
                    .as_u16()
            })
        })
        .collect();
    let mut statuses = Vec::new();
    for t in tasks {
        statuses.push(t.await.unwrap());
    }
    statuses.sort();
    assert_eq!(statuses, vec![201, 409, 409, 409, 409, 409]);
}

pub async fn app_input_is_validated_field_by_field(h: Harness) {
    let cases: Vec<(Value, &str)> = vec![
        (json!({"displayName": "x"}), "appId"),
        (json!({"appId": "ok1"}), "displayName"),
        (json!({"appId": "", "displayName": "x"}), "appId"),
        (json!({"appId": "has space", "displayName": "x"}), "appId"),
        (json!({"appId": "a".repeat(65), "displayName": "x"}), "appId"),
        (json!({"appId": 12, "displayName": "x"}), "appId"),
        (json!({"appId": null, "displayName": "x"}), "appId"),
        (json!({"appId": "ok2", "displayName": ""}), "displayName"),
        (json!({"appId": "ok3", "displayName": "d".repeat(256)}), "displayName"),
        (json!({"appId": "ok4", "displayName": ["x"]}), "displayName"),
        (json!({"appId": "ok5", "displayName": "x", "color": "red"}), "color"),
    ];
    for (body, field) in cases {
        let r = h.admin("POST", "/cc/api/apps", Some(body.clone())).await;
        let problem = r.problem(400, codes::INVALID_FIELD);
        assert_eq!(problem["field"], field, "{body} -> {problem}");
        assert!(problem["detail"].as_str().unwrap().starts_with(field), "{problem}");
    }
    // Nothing was written by the refused requests.
    for id in ["ok1", "ok2", "ok3", "ok4", "ok5"] {
        assert_eq!(h.admin("GET", &format!("/cc/api/apps/{id}"), None).await.status, 404);
    }
    h.admin("GET", "/cc/api/apps/9bad", None).await.problem(400, codes::INVALID_FIELD);
}

pub async fn malformed_bodies_are_refused_cleanly(h: Harness) {
    let admin = Some(h.admin.as_str());
    let json = Some("application/json");
    let r = h.client.send_raw("POST", "/cc/api/apps", admin, json, "{\"appId\": ").await;
    assert_eq!(r.problem(400, codes::MALFORMED_BODY)["field"], "body");
    let r = h.client.send_raw("POST", "/cc/api/apps", admin, json, "").await;
    r.problem(400, codes::MALFORMED_BODY);
    let r = h.client.send_raw("POST", "/cc/api/apps", admin, json, "[1,2]").await;
    r.problem(400, codes::INVALID_FIELD);
    let r = h
        .client
        .send_raw("POST", "/cc/api/apps", admin, json, "{\"appId\":\"a1\",\"displayName\":\"x\"} trailing")
        .await;
    r.problem(400, codes::MALFORMED_BODY);
    let r = h.client.send_raw("POST", "/cc/api/apps", admin, json, vec![0xffu8, 0xfe, 0x00]).await;
    r.problem(400, codes::MALFORMED_BODY);
    // A member named twice is refused wherever it is, in a typed body as in a free-form map.
    let twice = "{\"appId\":\"a1\",\"displayName\":\"x\",\"appId\":\"a2\"}";
    let r = h.client.send_raw("POST", "/cc/api/apps", admin, json, twice).await;
    assert_eq!(r.problem(400, codes::INVALID_FIELD)["field"], "appId");
    let app = h.app().await;
    let content = r#"{"displayName":"x","contentMap":{"login":{"title":"a"},"login":{"title":"b"}}}"#;
    let tenant = [("x-tenant-id", app.as_str())];
    let r = h.client.send_raw_with("POST", "/content-customization", admin, &tenant, json, content).await;
    assert_eq!(r.problem(400, codes::INVALID_FIELD)["field"], "contentMap.login");
    let r = h.client.send_raw("POST", "/cc/api/apps", admin, Some("text/plain"), "{}").await;
    assert_eq!(r.problem(415, codes::UNSUPPORTED_MEDIA_TYPE)["field"], "Content-Type");
    let r = h.client.send_raw("POST", "/cc/api/apps", admin, None, "{}").await;
    r.problem(415, codes::UNSUPPORTED_MEDIA_TYPE);
    // Another application/ type is not JSON unless it says so with +json.
    let form = Some("application/x-www-form-urlencoded");
    h.client
        .send_raw("POST", "/cc/api/apps", admin, form, "{}")
        .await
        .problem(415, codes::UNSUPPORTED_MEDIA_TYPE);
    // A compressed body is refused by its coding, before it could be misread as malformed JSON;
    // `identity` is no coding.
    let gzip = [("content-encoding", "gzip")];
    let r = h.client.send_raw_with("POST", "/cc/api/apps", admin, &gzip, json, vec![0x1f, 0x8b, 8, 0]).await;
    assert_eq!(r.problem(415, codes::UNSUPPORTED_MEDIA_TYPE)["field"], "Content-Encoding");
    let identity = [("content-encoding", "Identity")];
    let r = h.client.send_raw_with("POST", "/cc/api/apps", admin, &identity, json, "{}").await;
    assert_eq!(r.problem(400, codes::INVALID_FIELD)["field"], "appId", "read as JSON");
    let plus_json = Some("Application/Vnd.Example+JSON; charset=utf-8");
    let r = h.client.send_raw("POST", "/cc/api/apps", admin, plus_json, "{}").await;
    assert_eq!(r.problem(400, codes::INVALID_FIELD)["field"], "appId", "read as JSON");
    let huge = format!("{{\"appId\":\"big\",\"displayName\":\"{}\"}}", "x".repeat(32 * 1024));
    let r = h.client.send_raw("POST", "/cc/api/apps", admin, json, huge).await;
    assert_eq!(r.problem(413, codes::BODY_TOO_LARGE)["field"], "body");
    let r = h
        .client
        .send_raw(
            "POST",
            "/cc/api/apps",
            admin,
            Some("application/json; charset=utf-8"),
            "{\"appId\":\"ctok\",\"displayName\":\"x\"}",
        )
        .await;
    assert_eq!(r.status, 201, "charset parameter is fine");
    // A leading UTF-8 byte order mark is passed over (RFC 8259, 8.1); one anywhere else, or a
    // mark with no JSON after it, is no JSON.
    let bom = "\u{feff}";
    let marked = format!("{bom}{{\"appId\":\"bom1\",\"displayName\":\"x\"}}");
    let r = h.client.send_raw("POST", "/cc/api/apps", admin, json, marked).await;
    assert_eq!(r.status, 201, "a leading byte order mark: {}", r.text());
    assert_eq!(h.client.send("GET", "/cc/api/apps/bom1", admin, None).await.json()["appId"], "bom1");
    for body in [bom.to_owned(), format!("{bom}{bom}{{}}"), format!(" {bom}{{}}"), format!("{{{bom}}}")] {
        let r = h.client.send_raw("POST", "/cc/api/apps", admin, json, body).await;
        r.problem(400, codes::MALFORMED_BODY);
    }
    // Auth is checked before the body: a bad body without a token is still a 401.
    let r = h.client.send_raw("POST", "/cc/api/apps", None, json, "{").await;
    r.problem(401, codes::MISSING_CREDENTIALS);
    // Valid JSON with a value of the wrong kind where an enum's name goes is no malformed body:
    // serde_json calls it a syntax error, the answer names the member.
    for kind in ["null", "7", "[]"] {
        let body = format!("{{\"kind\": {kind}}}");
        let r = h.client.send_raw("POST", "/cc/api/tokens", admin, json, body).await;
        assert_eq!(r.problem(400, codes::INVALID_FIELD)["field"], "kind", "kind: {kind}");
    }
    // JSON is UTF-8: a stray byte anywhere, in a name or a value, is no JSON.
    for body in [
        &b"{\"appId\": \"u8\", \"displayName\": \"\xff\"}"[..],
        b"{\"appId\": \"u8\", \"\xc3\x28\": 1}",
        b"{\"appId\": \"u8\", \"displayName\": \"\xed\xa0\x80\"}",
    ] {
        let r = h.client.send_raw("POST", "/cc/api/apps", admin, json, body.to_vec()).await;
        let problem = r.problem(400, codes::MALFORMED_BODY);
        assert!(problem["detail"].as_str().unwrap().contains("not UTF-8 at byte"), "{problem}");
    }
    // Valid JSON that names half a surrogate pair, or a number past any double, is told as such.
    const HALF_A_PAIR: &str = "is not text: a \\u escape names half a surrogate pair";
    let told = [
        ("/cc/api/apps", r#"{"appId": "sur1", "displayName": "\ud800"}"#, HALF_A_PAIR),
        ("/cc/api/apps", r#"{"appId": "sur2", "displayName": "a\udc00b"}"#, HALF_A_PAIR),
        ("/cc/api/apps", r#"{"appId": "sur3", "displayName": "\ud800\u0041"}"#, HALF_A_PAIR),
        (
            "/cc/api/tokens",
            r#"{"kind": "access", "appId": "x", "expiresInSecs": 1e400}"#,
            "is a number out of range",
        ),
    ];
    for (path, body, detail) in told {
        let r = h.client.send_raw("POST", path, admin, json, body).await;
        let problem = r.problem(400, codes::INVALID_FIELD);
        assert!(problem["detail"].as_str().unwrap().contains(detail), "{body}: {problem}");
    }
    assert_eq!(h.admin("GET", "/cc/api/apps/sur1", None).await.status, 404);
    // A member the document does not allow `null` for is refused as `null`, not taken for left out.
    let tenant = h.app().await;
    let create = json!({"displayName": "n", "trigger": "oob.start", "source": "async function handler() {}"});
    for member in ["timeoutMs", "enabled", "displayName"] {
        let mut body = create.clone();
        body[member] = Value::Null;
        let r = h.as_tenant(&tenant, "POST", "/code-customization", Some(body)).await;
        assert_eq!(r.problem(400, codes::INVALID_FIELD)["field"], member);
    }
    assert_eq!(h.as_tenant(&tenant, "POST", "/code-customization", Some(create)).await.status, 201);
    let r = h.as_tenant(&tenant, "POST", "/code-customization/1", Some(json!({"timeoutMs": null}))).await;
    assert_eq!(r.problem(400, codes::INVALID_FIELD)["field"], "timeoutMs");
    // An object is no array, though serde reads a struct from one by position; at any depth.
    let r = h.client.send_raw("POST", "/cc/api/apps", admin, json, r#"["byPosition", "x"]"#).await;
    let problem = r.problem(400, codes::INVALID_FIELD);
    assert_eq!(problem["field"], "body");
    assert!(problem["detail"]
        .as_str()
        .unwrap()
        .starts_with("body: invalid type: sequence, expected an object"));
    assert_eq!(h.admin("GET", "/cc/api/apps/byPosition", None).await.status, 404);
    let settings = format!("/cc/api/apps/{tenant}/workstation");
    let r = h.admin("PUT", &settings, Some(json!({"offlineAccess": []}))).await;
    assert_eq!(r.problem(400, codes::INVALID_FIELD)["field"], "offlineAccess");
    assert_eq!(h.admin("PUT", &settings, Some(json!({"offlineAccess": {}}))).await.status, 200);
    // An optional body may be `null`, as the document allows: no options.
    let link = format!("/cc/api/apps/{tenant}/users/alice%40example.com/registration-links");
    let r = h.client.send_raw("POST", &link, admin, json, "null").await;
    assert_eq!(r.status, 201, "{}", r.text());
    let r = h.client.send_raw("POST", &link, admin, json, "[null, null]").await;
    assert_eq!(r.problem(400, codes::INVALID_FIELD)["field"], "body");
}

/// A path parameter that is not UTF-8 once percent-decoded is a 400 naming it as the document
/// does (`certSerialNumber`, not the route's own name for it), on every route, and as a
/// problem document on the routes that need no token too.
pub async fn undecodable_path_parameters_are_named_as_documented(h: Harness) {
    let tenant = h.app().await;
    let access = h.access_token(&tenant).await;
    let admin = Some(h.admin.as_str());
    let undecodable = [
        ("GET", "/cc/api/apps/%ff".to_owned(), admin, "appId"),
        ("POST", "/cc/api/certificates/%ff/revoke".to_owned(), admin, "certSerialNumber"),
        ("GET", format!("/cc/api/apps/{tenant}/users/%C3%28/devices"), admin, "namedUser"),
        ("DELETE", format!("/cc/api/apps/{tenant}/devices/%ff"), admin, "deviceId"),
        ("DELETE", "/cc/api/tokens/%ff".to_owned(), admin, "tokenId"),
        (
            "GET",
            "/rp/api/oob/client/authentication/requests/%ff".to_owned(),
            Some(access.as_str()),
            "sessionId",
        ),
        ("GET", "/problems/%ff".to_owned(), None, "slug"),
        ("GET", "/rp/register/%ff".to_owned(), None, "code"),
        ("GET", "/console/assets/%ff".to_owned(), None, "path"),
    ];
    for (method, path, token, field) in undecodable {
        let r = h.client.send(method, &path, token, None).await;
        let problem = r.problem(400, codes::INVALID_FIELD);
        assert_eq!(problem["field"], field, "{method} {path}: {problem}");
        assert!(
            problem["detail"].as_str().unwrap().contains("is not UTF-8 once percent-decoded"),
            "{path}: {problem}"
        );
    }
    let r = h.as_tenant(&tenant, "GET", "/content-customization/%ff", None).await;
    assert_eq!(r.problem(400, codes::INVALID_FIELD)["field"], "id");
}

pub async fn workstation_settings_have_defaults_and_bounds(h: Harness) {
    let app = h.app().await;
    let path = format!("/cc/api/apps/{app}/workstation");
    let defaults = h.admin("GET", &path, None).await.json();
    assert_eq!(
        defaults,
        json!({
            "offlineAccess": {"enabled": false, "tokenLength": 8, "tokenCount": 25, "tokenEntryTimeoutSecs": 180,
                "offlineAccessDays": 30, "offlinePINPromptSecs": 5, "tokenLowWarningThresholdPercentage": 20,
                "maxWrongAttempts": 5, "lockoutSecs": 900},
            "requestTimeoutInSecs": 300,
            "oobRequestTimeoutInSecs": 300,
            "push": {},
            "certificateValidityDays": 90
        })
    );
    let long = json!({"certificateValidityDays": 366});
    assert_eq!(
        h.admin("PUT", &path, Some(long)).await.problem(400, codes::INVALID_FIELD)["field"],
        "certificateValidityDays"
    );
    let bad = json!({"push": {"fcm": "arn:aws:sns:us-east-1:123456789012:app/APNS/wrong-platform"}});
    assert_eq!(
        h.admin("PUT", &path, Some(bad)).await.problem(400, codes::INVALID_FIELD)["field"],
        "push.fcm"
    );
    let r = h
        .admin(
            "PUT",
            &path,
            Some(json!({"offlineAccess": {"enabled": true, "tokenCount": 50}, "requestTimeoutInSecs": 2})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.json());
    let stored = h.admin("GET", &path, None).await.json();
    assert_eq!(stored["offlineAccess"]["enabled"], true);
    assert_eq!(stored["offlineAccess"]["tokenCount"], 50);
    assert_eq!(stored["offlineAccess"]["tokenLength"], 8);
    assert_eq!(stored["requestTimeoutInSecs"], 2);
    // The app record around the settings is intact.
    assert_eq!(h.admin("GET", &format!("/cc/api/apps/{app}"), None).await.json()["workstation"], stored);

    for (body, field) in [
        (json!({"offlineAccess": {"tokenLength": 5}}), "offlineAccess.tokenLength"),
        (json!({"offlineAccess": {"tokenLength": 14}}), "offlineAccess.tokenLength"),
        (json!({"offlineAccess": {"tokenCount": 101}}), "offlineAccess.tokenCount"),
        (json!({"offlineAccess": {"offlineAccessDays": 6}}), "offlineAccess.offlineAccessDays"),
        (json!({"offlineAccess": {"offlineAccessDays": 91}}), "offlineAccess.offlineAccessDays"),
        (
            json!({"offlineAccess": {"tokenLowWarningThresholdPercentage": 101}}),
            "offlineAccess.tokenLowWarningThresholdPercentage",
        ),
        (json!({"offlineAccess": {"enabled": "yes"}}), "offlineAccess.enabled"),
        (json!({"offlineAccess": {"pinColor": 1}}), "offlineAccess.pinColor"),
        (json!({"requestTimeoutInSecs": 0}), "requestTimeoutInSecs"),
        (json!({"requestTimeoutInSecs": 901}), "requestTimeoutInSecs"),
        (json!({"requestTimeoutInSecs": 1.5}), "requestTimeoutInSecs"),
        (json!({"oobRequestTimeoutInSecs": 0}), "oobRequestTimeoutInSecs"),
        (json!({"oobRequestTimeoutInSecs": 3601}), "oobRequestTimeoutInSecs"),
    ] {
        let problem = h.admin("PUT", &path, Some(body.clone())).await.problem(400, codes::INVALID_FIELD);
        assert_eq!(problem["field"], field, "{body}");
    }
    assert_eq!(h.admin("GET", &path, None).await.json(), stored, "refused updates change nothing");
    // A number with no fraction is an integer, as JSON Schema counts: `2.0` is `2`.
    let admin = Some(h.admin.as_str());
    let body = r#"{"offlineAccess": {"enabled": true, "tokenCount": 5e1}, "requestTimeoutInSecs": 2.0}"#;
    let r = h.client.send_raw("PUT", &path, admin, Some("application/json"), body).await;
    assert_eq!(r.json(), stored, "the same settings, as integers");
    h.admin("GET", "/cc/api/apps/noSuchApp/workstation", None).await.problem(404, codes::APP_NOT_FOUND);
    h.admin("PUT", "/cc/api/apps/noSuchApp/workstation", Some(json!({})))
        .await
        .problem(404, codes::APP_NOT_FOUND);
}

pub async fn tokens_are_created_listed_and_revoked(h: Harness) {
    let app = h.app().await;
    let r = h
        .admin(
            "POST",
            "/cc/api/tokens",
            Some(json!({"kind": "access", "appId": app, "description": "OOB server", "expiresInSecs": 3600})),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.json());
    assert_eq!(r.header("cache-control"), Some("no-store"));
    let created = r.json();
    let token = created["token"].as_str().unwrap();
    let token_id = created["tokenId"].as_str().unwrap();
    assert!(token.starts_with("rpt_") && token.len() >= 47);
    assert_eq!(created["kind"], "access");
    assert_eq!(created["appId"], app.as_str());
    assert!(created["expiresAt"].is_string());

    // The listing shows the token but never its secret or hash.
    let mut found = None;
    let mut path = "/cc/api/tokens?limit=200".to_owned();
    loop {
        let page = h.admin("GET", &path, None).await;
        assert_eq!(page.status, 200);
        let text = String::from_utf8_lossy(&page.body).to_string();
        assert!(!text.contains(token) && !text.contains("\"hash\"") && !text.contains("\"token\""));
        let page = page.json();
        if let Some(t) = page["tokens"].as_array().unwrap().iter().find(|t| t["tokenId"] == token_id) {
            found = Some(t.clone());
        }
        match page["nextCursor"].as_str() {
            Some(c) => path = format!("/cc/api/tokens?limit=200&cursor={c}"),
            None => break,
        }
    }
    let listed = found.expect("the new token is listed");
    assert_eq!(listed["description"], "OOB server");
    assert!(listed.get("revokedAt").is_none());

    assert_eq!(h.admin("DELETE", &format!("/cc/api/tokens/{token_id}"), None).await.status, 204);
    assert_eq!(
        h.admin("DELETE", &format!("/cc/api/tokens/{token_id}"), None).await.status,
        204,
        "idempotent"
    );
    h.admin("DELETE", "/cc/api/tokens/0000000000000000", None).await.problem(404, codes::TOKEN_NOT_FOUND);
    let body = h.admin("DELETE", "/cc/api/tokens/not-an-id", None).await.problem(400, codes::INVALID_FIELD);
    assert_eq!(body["field"], "tokenId");
}

pub async fn token_input_is_validated(h: Harness) {
    let app = h.app().await;
    for (body, field) in [
        (json!({}), "kind"),
        (json!({"kind": "root"}), "kind"),
        // serde's other form of a variant: the document's enums are strings.
        (json!({"kind": {"access": null}, "appId": app}), "kind"),
        (json!({"kind": "access"}), "appId"),
        (json!({"kind": "access", "appId": "noSuchApp"}), "appId"),
        (json!({"kind": "access", "appId": "bad id"}), "appId"),
        (json!({"kind": "controlCenterAdmin", "description": ""}), "description"),
        (json!({"kind": "controlCenterAdmin", "description": "d".repeat(501)}), "description"),
        (json!({"kind": "controlCenterAdmin", "expiresInSecs": 59}), "expiresInSecs"),
        (json!({"kind": "controlCenterAdmin", "expiresInSecs": "soon"}), "expiresInSecs"),
        (json!({"kind": "controlCenterAdmin", "scope": "all"}), "scope"),
    ] {
        let problem =
            h.admin("POST", "/cc/api/tokens", Some(body.clone())).await.problem(400, codes::INVALID_FIELD);
        assert_eq!(problem["field"], field, "{body} -> {problem}");
    }
    // An admin token may be scoped to one app: a tenant's own admin.
    let r =
        h.admin("POST", "/cc/api/tokens", Some(json!({"kind": "controlCenterAdmin", "appId": app}))).await;
    assert_eq!(r.status, 201, "{}", r.json());
    assert_eq!(r.json()["appId"], app.as_str());
}

pub async fn lists_reject_foreign_cursors_and_bad_limits(h: Harness) {
    h.app().await;
    h.app().await;
    let apps = h.admin("GET", "/cc/api/apps?limit=1", None).await.json();
    let app_cursor = apps["nextCursor"].as_str().expect("more than one app").to_owned();
    let r = h.admin("GET", &format!("/cc/api/tokens?cursor={app_cursor}"), None).await;
    assert_eq!(r.problem(400, codes::INVALID_FIELD)["field"], "cursor");
    let r = h.admin("GET", "/cc/api/apps?cursor=garbage!", None).await;
    assert_eq!(r.problem(400, codes::INVALID_FIELD)["field"], "cursor");
    // A cursor of this list, forged with a key longer than any store holds.
    let mut forged = rp_shared::ports::Cursor::decode(&app_cursor).unwrap();
    forged.key.sk = "a".repeat(1025);
    let r = h.admin("GET", &format!("/cc/api/apps?cursor={}", forged.encode()), None).await;
    assert_eq!(r.problem(400, codes::INVALID_FIELD)["field"], "cursor");
    for limit in ["0", "201", "-1", "ten"] {
        let r = h.admin("GET", &format!("/cc/api/apps?limit={limit}"), None).await;
        assert_eq!(r.problem(400, codes::INVALID_FIELD)["field"], "limit");
    }
    let r = h.admin("GET", "/cc/api/apps?sort=desc", None).await;
    assert_eq!(r.problem(400, codes::INVALID_FIELD)["field"], "sort");
    // A parameter given twice is named, as a member named twice in a body is.
    let r = h.admin("GET", "/cc/api/apps?limit=1&limit=2", None).await;
    assert_eq!(r.problem(400, codes::INVALID_FIELD)["field"], "limit");
    let r = h.admin("GET", "/rp/api/events?cursor=a&cursor=b", None).await;
    assert_eq!(r.problem(400, codes::INVALID_FIELD)["field"], "cursor");
}

/// Inputs DynamoDB would refuse are refused (400 naming the field) or brought within its bounds
/// first, the same on every backend: never a 500, never a different answer per backend.
pub async fn inputs_dynamodb_would_refuse_never_reach_it(h: Harness) {
    let app = h.app().await;
    let event = json!({"name": "WORKSTATION_ENROLL", "appId": app, "attributes": {"big": 1e200}});
    let r = h.admin("POST", "/rp/api/events", Some(event)).await;
    assert_eq!(r.problem(400, codes::INVALID_FIELD)["field"], "attributes.big");
    let event = json!({"name": "WORKSTATION_ENROLL", "appId": app, "attributes": {"ok": 1e100, "zero": 0}});
    assert_eq!(h.admin("POST", "/rp/api/events", Some(event)).await.status, 201);
    // A time no event key can hold (before 1970, after 2286) is brought to the nearest one
    // that can: the same list, and no key out of range sent to the store.
    for (query, listed) in [
        ("to=1960-01-01T00:00:00Z", 0),
        ("from=1960-01-01T00:00:00Z", 1),
        ("from=0001-01-01T00:00:00Z&to=9999-12-31T23:59:59Z", 1),
        ("from=2300-01-01T00:00:00Z", 0),
        ("to=2300-01-01T00:00:00Z", 1),
        // `to` is exclusive: `from` equal to it is an empty window, not a refusal.
        ("from=2026-11-22T14:00:00Z&to=2026-11-22T14:00:00Z", 0),
    ] {
        let r = h.admin("GET", &format!("/rp/api/events?appId={app}&{query}"), None).await;
        assert_eq!(r.status, 200, "{query}: {}", r.text());
        assert_eq!(r.json()["events"].as_array().unwrap().len(), listed, "{query}");
    }
    // `from` after `to` is refused as given, even where both are past the last time a key
    // can hold (or before the first), and so would be equal once brought within it.
    for query in [
        "from=2026-11-22T14:00:01Z&to=2026-11-22T14:00:00Z",
        "from=2301-01-01T00:00:00Z&to=2300-01-01T00:00:00Z",
        "from=1960-01-02T00:00:00Z&to=1960-01-01T00:00:00Z",
    ] {
        let r = h.admin("GET", &format!("/rp/api/events?appId={app}&{query}"), None).await;
        assert_eq!(r.problem(400, codes::INVALID_FIELD)["field"], "from", "{query}");
    }
    // A cursor of another list in the same partition: a customization's versions, on the list.
    let created =
        h.as_tenant(&app, "POST", "/content-customization", Some(json!({"displayName": "v1"}))).await;
    let id = created.json()["id"].as_i64().unwrap();
    for name in ["v2", "v3"] {
        let r = h
            .as_tenant(
                &app,
                "POST",
                &format!("/content-customization/{id}"),
                Some(json!({"displayName": name})),
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.json());
    }
    let versions =
        h.as_tenant(&app, "GET", &format!("/content-customization/{id}/versions?limit=1"), None).await.json();
    let cursor = versions["nextCursor"].as_str().expect("a second page").to_owned();
    let r = h.as_tenant(&app, "GET", &format!("/content-customization?cursor={cursor}"), None).await;
    assert_eq!(r.problem(400, codes::INVALID_FIELD)["field"], "cursor");
    // A cursor of this very list, forged to resume before or past the versions it pages
    // (DynamoDB refuses a start key outside the query's sort condition): refused by name too.
    let versions_path = format!("/content-customization/{id}/versions");
    let r = h.as_tenant(&app, "GET", &format!("{versions_path}?cursor={cursor}"), None).await;
    assert_eq!(r.status, 200, "the cursor as given is this list's: {}", r.text());
    let given = rp_shared::ports::Cursor::decode(&cursor).unwrap();
    for sk in ["ITEM#", "VER#", "VER#9999999999999999999#1", "~"] {
        let mut forged = given.clone();
        forged.key.sk = sk.to_owned();
        let r = h.as_tenant(&app, "GET", &format!("{versions_path}?cursor={}", forged.encode()), None).await;
        assert_eq!(r.problem(400, codes::INVALID_FIELD)["field"], "cursor", "{sk}");
    }
}
