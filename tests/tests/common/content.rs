//! Content customization cases: every row of the endpoint table, validation with field paths,
//! tenancy, rate limits, version history, races, and property tests of the content map.

use super::Harness;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use rp_shared::domain::content::{PARTS, SCREENS};
use rp_shared::http::problem::codes;
use serde_json::{json, Map, Value};
use std::time::Duration;

const PATH: &str = "/content-customization";

fn sample_map() -> Value {
    json!({
        "consentScreen": {
            "cardHeader": {"title": "Before you start", "description": "We need your consent"},
            "buttonLabels": {"accept": "I agree", "decline": "No thanks"}
        },
        "otpScreen": {"cardContent": {"mainContent": "Enter the code", "extraContent": "Check your SMS"}}
    })
}

/// A tenant with a budget large enough never to get in a case's way.
async fn tenant(h: &Harness) -> String {
    let app = h.app().await;
    let r = h
        .admin(
            "PUT",
            &format!("/cc/api/apps/{app}/rate-limit"),
            Some(json!({"limit": 10000, "windowSecs": 60})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.json());
    app
}

async fn create(h: &Harness, t: &str, body: Value) -> Value {
    let r = h.as_tenant(t, "POST", PATH, Some(body)).await;
    assert_eq!(r.status, 201, "{}", r.json());
    r.json()
}

pub async fn content_customizations_round_trip(h: Harness) {
    let t = tenant(&h).await;
    let r = h
        .as_tenant(
            &t,
            "POST",
            PATH,
            Some(
                json!({"displayName": "Spring", "description": "Campaign texts", "contentMap": sample_map()}),
            ),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.json());
    let created = r.json();
    let id = created["id"].as_i64().unwrap();
    assert_eq!(r.header("location"), Some(format!("{PATH}/{id}").as_str()));
    assert_eq!(created["displayName"], "Spring");
    assert_eq!(created["description"], "Campaign texts");
    assert_eq!(created["contentMap"], sample_map());
    assert_eq!(created["createdAt"], created["updatedAt"]);
    assert!(created["createdAt"].as_str().unwrap().ends_with('Z'));
    let keys: Vec<_> = created.as_object().unwrap().keys().cloned().collect();
    assert_eq!(keys.len(), 6, "exactly the documented fields: {keys:?}");

    let got = h.as_tenant(&t, "GET", &format!("{PATH}/{id}"), None).await;
    assert_eq!((got.status.as_u16(), got.json()), (200, created.clone()));

    h.clock.advance(Duration::from_secs(5));
    let patch = json!({"contentMap": {"otpScreen": {"cardContent": {"extraContent": null}, "cardFooter": {"caption1": "5 minutes"}}, "consentScreen": {"buttonLabels": {"decline": "Later"}}}});
    let r = h.as_tenant(&t, "POST", &format!("{PATH}/{id}"), Some(patch)).await;
    assert_eq!(r.status, 200, "{}", r.json());
    let updated = r.json();
    assert_eq!(updated["displayName"], "Spring", "omitted fields keep their values");
    assert_eq!(updated["description"], "Campaign texts");
    assert_eq!(updated["createdAt"], created["createdAt"]);
    assert_ne!(updated["updatedAt"], created["updatedAt"]);
    assert_eq!(
        updated["contentMap"],
        json!({
            "consentScreen": {
                "cardHeader": {"title": "Before you start", "description": "We need your consent"},
                "buttonLabels": {"accept": "I agree", "decline": "Later"}
            },
            "otpScreen": {"cardContent": {"mainContent": "Enter the code"}, "cardFooter": {"caption1": "5 minutes"}}
        })
    );
    let r = h
        .as_tenant(
            &t,
            "POST",
            &format!("{PATH}/{id}"),
            Some(json!({"displayName": "Summer", "description": null})),
        )
        .await;
    // Cleared: an empty string, never null (the seed types it as a string).
    assert_eq!(
        (r.json()["displayName"].as_str(), r.json()["description"].as_str()),
        (Some("Summer"), Some(""))
    );
    assert_eq!(r.json()["contentMap"], updated["contentMap"]);
    assert_eq!(h.as_tenant(&t, "GET", &format!("{PATH}/{id}"), None).await.json(), r.json());
}

pub async fn content_lists_page_and_count(h: Harness) {
    let t = tenant(&h).await;
    let empty = h.as_tenant(&t, "GET", PATH, None).await.json();
    assert_eq!(empty, json!({"contentCustomizations": [], "total": 0, "nextCursor": null}));
    let mut ids = Vec::new();
    for i in 0..5 {
        let c = create(&h, &t, json!({"displayName": format!("n{i}"), "contentMap": sample_map()})).await;
        ids.push(c["id"].as_i64().unwrap());
    }
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids increase: {ids:?}");
    let mut seen = Vec::new();
    let mut path = format!("{PATH}?limit=2");
    loop {
        let page = h.as_tenant(&t, "GET", &path, None).await.json();
        assert_eq!(page["total"], 5);
        for item in page["contentCustomizations"].as_array().unwrap() {
            assert!(item.get("contentMap").is_none(), "no contentMap in the list");
            assert_eq!(item.as_object().unwrap().len(), 5);
            seen.push(item["id"].as_i64().unwrap());
        }
        match page["nextCursor"].as_str() {
            Some(c) => path = format!("{PATH}?limit=2&cursor={c}"),
            None => break,
        }
    }
    assert_eq!(seen, ids, "ordered by id, each once");
    let r = h.as_tenant(&t, "GET", &format!("{PATH}?limit=201"), None).await;
    assert_eq!(r.problem(400, codes::INVALID_FIELD)["field"], "limit");
}

pub async fn content_input_is_validated_with_paths(h: Harness) {
    let t = tenant(&h).await;
    let creates = [
        (json!({}), "displayName"),
        (json!({"displayName": null}), "displayName"),
        (json!({"displayName": ""}), "displayName"),
        (json!({"displayName": "d".repeat(256)}), "displayName"),
        (json!({"displayName": 7}), "displayName"),
        (json!({"displayName": "x", "description": "d".repeat(2001)}), "description"),
        (json!({"displayName": "x", "owner": "me"}), "owner"),
        (json!({"displayName": "x", "contentMap": {"homeScreen": {}}}), "contentMap.homeScreen"),
        (
            json!({"displayName": "x", "contentMap": {"otpScreen": {"cardHeader": {"title": 1}}}}),
            "contentMap.otpScreen.cardHeader.title",
        ),
        (
            json!({"displayName": "x", "contentMap": {"otpScreen": {"cardHeader": {"title": null}}}}),
            "contentMap.otpScreen.cardHeader.title",
        ),
        (
            json!({"displayName": "x", "contentMap": {"otpScreen": {"cardHeader": {"title": "t".repeat(5001)}}}}),
            "contentMap.otpScreen.cardHeader.title",
        ),
        (
            json!({"displayName": "x", "contentMap": {"otpScreen": {"cardSide": {}}}}),
            "contentMap.otpScreen.cardSide",
        ),
        (
            json!({"displayName": "x", "contentMap": {"deniedScreen": {"cardFooter": {"caption3": "c"}}}}),
            "contentMap.deniedScreen.cardFooter.caption3",
        ),
        (
            json!({"displayName": "x", "contentMap": {"consentScreen": {"buttonLabels": {"accept": ["x"]}}}}),
            "contentMap.consentScreen.buttonLabels.accept",
        ),
        (json!({"displayName": "x", "contentMap": "all"}), "contentMap"),
        (json!(["displayName"]), "body"),
    ];
    for (body, field) in creates {
        let problem =
            h.as_tenant(&t, "POST", PATH, Some(body.clone())).await.problem(400, codes::INVALID_FIELD);
        assert_eq!(problem["field"], field, "{body} -> {problem}");
    }
    assert_eq!(h.as_tenant(&t, "GET", PATH, None).await.json()["total"], 0, "refused creates wrote nothing");

    let id =
        create(&h, &t, json!({"displayName": "x", "contentMap": sample_map()})).await["id"].as_i64().unwrap();
    let item = format!("{PATH}/{id}");
    let updates = [
        (json!({}), "body"),
        (json!({"displayName": null}), "displayName"),
        (json!({"contentMap": null}), "contentMap"),
        (
            json!({"contentMap": {"otpScreen": {"cardHeader": {"title": false}}}}),
            "contentMap.otpScreen.cardHeader.title",
        ),
        (json!({"contentMap": {"nopeScreen": null}}), "contentMap.nopeScreen"),
        (json!({"id": 5}), "id"),
    ];
    for (body, field) in updates {
        let problem =
            h.as_tenant(&t, "POST", &item, Some(body.clone())).await.problem(400, codes::INVALID_FIELD);
        assert_eq!(problem["field"], field, "{body} -> {problem}");
    }
    assert_eq!(
        h.as_tenant(&t, "GET", &item, None).await.json()["contentMap"],
        sample_map(),
        "refused updates changed nothing"
    );
    for bad in ["abc", "0", "-1", "1.5", "01", "+1"] {
        let r = h.as_tenant(&t, "GET", &format!("{PATH}/{bad}"), None).await;
        assert_eq!(r.problem(400, codes::INVALID_FIELD)["field"], "id", "{bad}");
    }
    let r = h.as_tenant(&t, "GET", &format!("{PATH}/999999"), None).await;
    assert_eq!(r.problem(404, codes::CONTENT_NOT_FOUND)["field"], "id");
    h.as_tenant(&t, "POST", &format!("{PATH}/999999"), Some(json!({"displayName": "y"})))
        .await
        .problem(404, codes::CONTENT_NOT_FOUND);
    let r =
        h.client.send_raw("POST", PATH, Some(&h.admin), Some("application/json"), "{\"displayName\":").await;
    r.problem(400, codes::INVALID_FIELD);
}

pub async fn content_is_isolated_per_tenant(h: Harness) {
    let (a, b) = (tenant(&h).await, tenant(&h).await);
    create(&h, &a, json!({"displayName": "A's first"})).await;
    let id = create(&h, &a, json!({"displayName": "A's", "contentMap": sample_map()})).await["id"]
        .as_i64()
        .unwrap();
    assert_eq!(id, 2);
    let item = format!("{PATH}/{id}");
    h.as_tenant(&b, "GET", &item, None).await.problem(404, codes::CONTENT_NOT_FOUND);
    h.as_tenant(&b, "POST", &item, Some(json!({"displayName": "stolen"})))
        .await
        .problem(404, codes::CONTENT_NOT_FOUND);
    let listed = h.as_tenant(&b, "GET", PATH, None).await.json();
    assert_eq!(
        (listed["total"].as_i64(), listed["contentCustomizations"].as_array().unwrap().len()),
        (Some(0), 0)
    );
    // Ids are per tenant: B's first customization may share A's id and is B's own.
    let b_first = create(&h, &b, json!({"displayName": "B's"})).await;
    let got = h.as_tenant(&b, "GET", &format!("{PATH}/{}", b_first["id"]), None).await.json();
    assert_eq!(got["displayName"], "B's");
    assert_eq!(h.as_tenant(&a, "GET", &item, None).await.json()["displayName"], "A's");

    // A token scoped to B acts for B, and only for B.
    let b_admin = h.token_for("controlCenterAdmin", &b).await;
    let r = h.client.send("GET", &item, Some(&b_admin), None).await;
    r.problem(404, codes::CONTENT_NOT_FOUND);
    let r = h.client.send_with("GET", &item, Some(&b_admin), &[("x-tenant-id", a.as_str())], None).await;
    r.problem(403, codes::OTHER_TENANT);
    let r = h.client.send("GET", PATH, Some(&b_admin), None).await;
    assert_eq!(r.json()["total"], 1);
    let r = h.client.send_with("GET", PATH, Some(&b_admin), &[("x-tenant-id", b.as_str())], None).await;
    assert_eq!(r.json()["total"], 1, "a scoped token may name its own app");
    h.client.send("GET", "/cc/api/apps", Some(&b_admin), None).await.problem(403, codes::TENANT_SCOPED_TOKEN);
    h.client
        .send("POST", "/cc/api/tokens", Some(&b_admin), Some(json!({"kind": "controlCenterAdmin"})))
        .await
        .problem(403, codes::TENANT_SCOPED_TOKEN);

    // The global admin must name a tenant; access tokens are the wrong kind; no token is 401.
    let r = h.admin("GET", PATH, None).await;
    assert_eq!(r.problem(400, codes::INVALID_FIELD)["field"], "X-Tenant-Id");
    let r = h.as_tenant("noSuchTenant", "GET", PATH, None).await;
    assert_eq!(r.problem(400, codes::INVALID_FIELD)["field"], "X-Tenant-Id");
    let r = h.as_tenant("bad tenant", "GET", PATH, None).await;
    assert_eq!(r.problem(400, codes::INVALID_FIELD)["field"], "X-Tenant-Id");
    // Two tenants named: neither is taken, whichever comes first.
    let twice = [("x-tenant-id", a.as_str()), ("x-tenant-id", b.as_str())];
    let r = h.client.send_with("GET", PATH, Some(&h.admin), &twice, None).await;
    let problem = r.problem(400, codes::INVALID_FIELD);
    assert_eq!(problem["field"], "X-Tenant-Id");
    assert!(
        problem["detail"].as_str().unwrap().starts_with("X-Tenant-Id: is given more than once"),
        "{problem}"
    );
    let access = h.access_token(&a).await;
    h.client.send("GET", PATH, Some(&access), None).await.problem(403, codes::WRONG_TOKEN_KIND);
    let r = h.client.send("GET", PATH, None, None).await;
    r.problem(401, codes::MISSING_CREDENTIALS);
    // Every answer carries the headers; one refused before the tenant is known spends nothing.
    let refused = [
        h.client.send("GET", PATH, None, None).await,
        h.client.send("GET", PATH, Some(&access), None).await,
        h.admin("GET", PATH, None).await,
        h.as_tenant("noSuchTenant", "GET", PATH, None).await,
    ];
    for r in &refused {
        assert_eq!(r.header("x-ratelimit-limit"), Some("120"), "{:?}", r.status);
        assert_eq!(r.header("x-ratelimit-remaining"), Some("120"), "nothing counted");
        assert!(r.header("x-ratelimit-reset").is_some());
    }
}

pub async fn content_rate_limit_headers_and_429(h: Harness) {
    let t = h.app().await;
    let r = h
        .admin("PUT", &format!("/cc/api/apps/{t}/rate-limit"), Some(json!({"limit": 3, "windowSecs": 60})))
        .await;
    // Left out, the key-service budget and the certificate-request cap are the deployment's.
    let limits =
        json!({"limit": 3, "windowSecs": 60, "keyCallsPerSec": null, "maxOpenCertificateRequests": null});
    assert_eq!(r.json(), limits);
    assert_eq!(h.admin("GET", &format!("/cc/api/apps/{t}/rate-limit"), None).await.json(), limits);
    assert_eq!(h.admin("GET", &format!("/cc/api/apps/{t}"), None).await.json()["rateLimit"], limits);
    let bad = h.admin("PUT", &format!("/cc/api/apps/{t}/rate-limit"), Some(json!({"limit": 0}))).await;
    assert_eq!(bad.problem(400, codes::INVALID_FIELD)["field"], "limit");
    for (field, most) in [("keyCallsPerSec", 1000), ("maxOpenCertificateRequests", 100_000)] {
        for value in [json!(0), json!(most + 1), json!(-1), json!("5"), json!(2.5)] {
            let sent = json!({"limit": 3, "windowSecs": 60, field: value});
            let bad = h.admin("PUT", &format!("/cc/api/apps/{t}/rate-limit"), Some(sent)).await;
            assert_eq!(bad.problem(400, codes::INVALID_FIELD)["field"], field, "{value}");
        }
    }
    let own =
        json!({"limit": 3, "windowSecs": 60, "keyCallsPerSec": 1000, "maxOpenCertificateRequests": 100_000});
    assert_eq!(h.admin("PUT", &format!("/cc/api/apps/{t}/rate-limit"), Some(own.clone())).await.json(), own);
    assert_eq!(h.admin("GET", &format!("/cc/api/apps/{t}/rate-limit"), None).await.json(), own);

    let mut resets = Vec::new();
    for expected in [2, 1, 0] {
        let r = h.as_tenant(&t, "GET", &format!("{PATH}/424242"), None).await;
        assert_eq!(r.status, 404, "errors are counted and carry the headers too");
        assert_eq!(r.header("x-ratelimit-limit"), Some("3"));
        assert_eq!(r.header("x-ratelimit-remaining").unwrap(), expected.to_string());
        resets.push(r.header("x-ratelimit-reset").unwrap().parse::<i64>().unwrap());
    }
    let over = h.as_tenant(&t, "POST", PATH, Some(json!({"displayName": "too many"}))).await;
    let body = over.problem(429, codes::RATE_LIMITED);
    assert!(body["detail"].as_str().unwrap().contains("3 requests per 60 s"));
    assert_eq!(over.header("x-ratelimit-remaining"), Some("0"));
    let retry: i64 = over.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=60).contains(&retry), "{retry}");
    assert!(resets.iter().all(|r| *r == resets[0]), "one window: {resets:?}");
    // A read over the limit, served beside the count, is refused whatever it found.
    let over_read = h.as_tenant(&t, "GET", &format!("{PATH}/424242"), None).await;
    over_read.problem(429, codes::RATE_LIMITED);
    assert_eq!(over_read.header("x-ratelimit-remaining"), Some("0"));
    h.clock.advance(Duration::from_secs(retry as u64));
    let next = h.as_tenant(&t, "GET", PATH, None).await;
    assert_eq!(next.status, 200, "a new window");
    assert_eq!(next.json()["total"], 0, "the refused create wrote nothing");
    assert_eq!(next.header("x-ratelimit-remaining"), Some("2"));
    assert!(next.header("x-ratelimit-reset").unwrap().parse::<i64>().unwrap() > resets[0]);
    // Budgets are per tenant.
    let other = tenant(&h).await;
    assert_eq!(h.as_tenant(&other, "GET", PATH, None).await.header("x-ratelimit-limit"), Some("10000"));
}

pub async fn content_versions_and_restore(h: Harness) {
    let t = tenant(&h).await;
    let v1 = create(&h, &t, json!({"displayName": "v1", "description": "first", "contentMap": sample_map()}))
        .await;
    let id = v1["id"].as_i64().unwrap();
    let item = format!("{PATH}/{id}");
    h.clock.advance(Duration::from_secs(1));
    h.as_tenant(&t, "POST", &item, Some(json!({"displayName": "v2", "contentMap": {"otpScreen": null}})))
        .await;
    h.clock.advance(Duration::from_secs(1));
    h.as_tenant(&t, "POST", &item, Some(json!({"displayName": "v3"}))).await;

    let versions = h.as_tenant(&t, "GET", &format!("{item}/versions"), None).await.json();
    assert_eq!(versions["currentVersion"], 3);
    let listed: Vec<_> = versions["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| (v["version"].as_i64().unwrap(), v["displayName"].as_str().unwrap().to_owned()))
        .collect();
    assert_eq!(listed, vec![(1, "v1".to_owned()), (2, "v2".to_owned())]);

    let first = h.as_tenant(&t, "GET", &format!("{item}/versions/1"), None).await.json();
    assert_eq!(first["contentMap"], sample_map());
    assert_eq!(first["version"], 1);

    h.clock.advance(Duration::from_secs(1));
    let restored = h.as_tenant(&t, "POST", &format!("{item}/versions/1/restore"), None).await;
    assert_eq!(restored.status, 200, "{}", restored.json());
    let restored = restored.json();
    assert_eq!(
        (restored["displayName"].as_str(), restored["description"].as_str()),
        (Some("v1"), Some("first"))
    );
    assert_eq!(restored["contentMap"], sample_map());
    assert_eq!(restored["createdAt"], v1["createdAt"]);
    assert_ne!(restored["updatedAt"], v1["updatedAt"]);
    let versions = h.as_tenant(&t, "GET", &format!("{item}/versions"), None).await.json();
    assert_eq!(versions["currentVersion"], 4, "a restore is a new version");
    assert_eq!(versions["versions"].as_array().unwrap().len(), 3);

    let r = h.as_tenant(&t, "GET", &format!("{item}/versions/9"), None).await;
    assert_eq!(r.problem(404, codes::CONTENT_VERSION_NOT_FOUND)["field"], "version");
    h.as_tenant(&t, "POST", &format!("{item}/versions/4/restore"), None)
        .await
        .problem(404, codes::CONTENT_VERSION_NOT_FOUND);
    let r = h.as_tenant(&t, "GET", &format!("{item}/versions/x"), None).await;
    assert_eq!(r.problem(400, codes::INVALID_FIELD)["field"], "version");
    h.as_tenant(&t, "GET", &format!("{PATH}/777777/versions"), None)
        .await
        .problem(404, codes::CONTENT_NOT_FOUND);
    // A bad page of versions is a 400 naming it; of a customization that is not there, a 404.
    let r = h.as_tenant(&t, "GET", &format!("{item}/versions?cursor=nonsense"), None).await;
    assert_eq!(r.problem(400, codes::INVALID_FIELD)["field"], "cursor");
    h.as_tenant(&t, "GET", &format!("{PATH}/777777/versions?cursor=nonsense"), None)
        .await
        .problem(404, codes::CONTENT_NOT_FOUND);
}

pub async fn content_races_lose_nothing(h: Harness) {
    let Some(h) = h.for_races() else { return };
    let t = tenant(&h).await;
    let h = std::sync::Arc::new(h);
    let creates: Vec<_> = (0..6)
        .map(|i| {
            let (h, t) = (h.clone(), t.clone());
            tokio::spawn(async move {
                create(&h, &t, json!({"displayName": format!("c{i}")})).await["id"].as_i64().unwrap()
            })
        })
        .collect();
    let mut ids = Vec::new();
    for c in creates {
        ids.push(c.await.unwrap());
    }
    ids.sort();
    assert_eq!(ids, (1..=6).collect::<Vec<_>>(), "distinct, gap-free ids");
    assert_eq!(h.as_tenant(&t, "GET", PATH, None).await.json()["total"], 6);

    let item = format!("{PATH}/1");
    let updates: Vec<_> = (0..4)
        .map(|i| {
            let (h, t, item) = (h.clone(), t.clone(), item.clone());
            tokio::spawn(async move {
                let patch = json!({"contentMap": {SCREENS[i]: {"cardHeader": {"title": format!("t{i}")}}}});
                h.as_tenant(&t, "POST", &item, Some(patch)).await.status.as_u16()
            })
        })
        .collect();
    for u in updates {
        assert_eq!(u.await.unwrap(), 200);
    }
    let current = h.as_tenant(&t, "GET", &item, None).await.json();
    let screens = current["contentMap"].as_object().unwrap();
    assert_eq!(screens.len(), 4, "every concurrent patch was merged: {screens:?}");
    let versions = h.as_tenant(&t, "GET", &format!("{item}/versions"), None).await.json();
    assert_eq!(versions["currentVersion"], 5);
    assert_eq!(versions["versions"].as_array().unwrap().len(), 4);
}

fn text() -> impl Strategy<Value = String> {
    "[ -~äéßü€🙂\n]{0,40}"
}

fn content_map() -> impl Strategy<Value = Value> {
    let part = |fields: [&'static str; 2]| {
        proptest::collection::btree_map(proptest::sample::select(fields.to_vec()), text(), 0..=2).prop_map(
            |m| Value::Object(m.into_iter().map(|(k, v)| (k.to_owned(), Value::String(v))).collect()),
        )
    };
    let buttons = proptest::collection::btree_map("[a-zA-Z]{1,12}", text(), 0..3)
        .prop_map(|m| Value::Object(m.into_iter().map(|(k, v)| (k, Value::String(v))).collect()));
    let screen = (
        proptest::option::of(part(PARTS[0].1)),
        proptest::option::of(part(PARTS[1].1)),
        proptest::option::of(part(PARTS[2].1)),
        proptest::option::of(buttons),
    )
        .prop_map(|(h, c, f, b)| {
            let mut map = Map::new();
            for (name, value) in
                [("cardHeader", h), ("cardContent", c), ("cardFooter", f), ("buttonLabels", b)]
            {
                if let Some(value) = value {
                    map.insert(name.to_owned(), value);
                }
            }
            Value::Object(map)
        });
    proptest::collection::btree_map(proptest::sample::select(SCREENS.to_vec()), screen, 0..5)
        .prop_map(|m| Value::Object(m.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()))
}

/// A merge patch of a content map: values, nulls and nested objects at every level.
fn content_patch() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![text().prop_map(Value::String), Just(Value::Null)];
    let part = |fields: [&'static str; 2]| {
        proptest::collection::btree_map(proptest::sample::select(fields.to_vec()), leaf.clone(), 0..=2)
            .prop_map(|m| Value::Object(m.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()))
    };
    let part_or_null = move |fields| prop_oneof![3 => part(fields), 1 => Just(Value::Null)];
    let screen = (part_or_null(PARTS[0].1), part_or_null(PARTS[2].1))
        .prop_map(|(h, f)| json!({"cardHeader": h, "cardFooter": f}));
    let screen_or_null = prop_oneof![3 => screen, 1 => Just(Value::Null)];
    proptest::collection::btree_map(proptest::sample::select(SCREENS.to_vec()), screen_or_null, 0..4)
        .prop_map(|m| Value::Object(m.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()))
}

/// RFC 7396, section 2, as written there.
fn merge_patch(target: &Value, patch: &Value) -> Value {
    let Value::Object(patch) = patch else { return patch.clone() };
    let mut target = match target {
        Value::Object(map) => map.clone(),
        _ => Map::new(),
    };
    for (name, value) in patch {
        if value.is_null() {
            target.remove(name);
        } else {
            let merged = merge_patch(target.get(name).unwrap_or(&Value::Null), value);
            target.insert(name.clone(), merged);
        }
    }
    Value::Object(target)
}

pub async fn content_maps_round_trip_and_merge_per_rfc_7396(h: Harness) {
    let t = tenant(&h).await;
    let handle = tokio::runtime::Handle::current();
    let mut runner = TestRunner::new(Config { cases: 24, failure_persistence: None, ..Config::default() });
    tokio::task::block_in_place(|| {
        runner
            .run(&(content_map(), content_patch()), |(map, patch)| {
                handle.block_on(async {
                    let created = create(&h, &t, json!({"displayName": "prop", "contentMap": map})).await;
                    prop_assert_eq!(&created["contentMap"], &map, "created as sent");
                    let id = created["id"].as_i64().unwrap();
                    let got = h.as_tenant(&t, "GET", &format!("{PATH}/{id}"), None).await.json();
                    prop_assert_eq!(&got["contentMap"], &map, "read back unchanged");
                    let r = h
                        .as_tenant(&t, "POST", &format!("{PATH}/{id}"), Some(json!({"contentMap": patch})))
                        .await;
                    prop_assert_eq!(r.status.as_u16(), 200, "{}", r.json());
                    prop_assert_eq!(
                        &r.json()["contentMap"],
                        &merge_patch(&map, &patch),
                        "merged per RFC 7396"
                    );
                    Ok(())
                })
            })
            .unwrap();
    });
}

/// A harness that keeps `kept` earlier versions of a content customization, a new app, and one
/// customization of it, just created (its id).
pub async fn keeping_versions(h: &Harness, kept: u64) -> (Harness, String, i64) {
    let config = rp_shared::http::HttpConfig { content_versions_kept: kept, ..Default::default() };
    let h = h.configured(config).await;
    let app = h.app().await;
    let created =
        h.as_tenant(&app, "POST", "/content-customization", Some(json!({"displayName": "v1"}))).await;
    assert_eq!(created.status, 201, "{}", created.json());
    let id = created.json()["id"].as_i64().unwrap();
    (h, app, id)
}

/// A customization cannot outgrow 100 KB (413, nothing written), and only the last
/// `CONTENT_VERSIONS_KEPT` earlier versions are kept.
pub async fn content_size_is_capped_and_versions_are_retained(h: Harness) {
    let (h, app, id) = keeping_versions(&h, 2).await;
    let path = format!("/content-customization/{id}");
    // Each update adds about 30 KB of button labels; the fourth would pass 100 KB.
    let mut last_ok = Value::Null;
    for round in 0..4 {
        let labels: serde_json::Map<String, Value> =
            (0..6).map(|i| (format!("r{round}b{i}"), json!("x".repeat(4900)))).collect();
        let body = json!({"contentMap": {"consentScreen": {"buttonLabels": labels}}});
        let r = h.as_tenant(&app, "POST", &path, Some(body)).await;
        if round < 3 {
            assert_eq!(r.status, 200, "round {round}: {}", r.json());
            last_ok = r.json();
        } else {
            assert_eq!(r.problem(413, codes::CONTENT_TOO_LARGE)["field"], "contentMap");
        }
    }
    assert_eq!(
        h.as_tenant(&app, "GET", &path, None).await.json(),
        last_ok,
        "a refused update writes nothing"
    );
    // Four versions exist (1 to 4); the earlier ones kept are the last two.
    let versions = h.as_tenant(&app, "GET", &format!("{path}/versions"), None).await.json();
    let kept: Vec<_> =
        versions["versions"].as_array().unwrap().iter().map(|v| v["version"].as_u64().unwrap()).collect();
    assert_eq!((versions["currentVersion"].as_u64(), kept), (Some(4), vec![2, 3]));
    h.as_tenant(&app, "GET", &format!("{path}/versions/1"), None)
        .await
        .problem(404, codes::CONTENT_VERSION_NOT_FOUND);
}

/// Twenty updates of one content customization, and twenty of one environment variable, at
/// once: each is retried past the races it loses and answered 200; none is lost.
pub async fn twenty_concurrent_updates_each_succeed(h: Harness) {
    let Some(h) = h.for_races() else { return };
    let t = tenant(&h).await;
    let id = create(&h, &t, json!({"displayName": "busy"})).await["id"].as_i64().unwrap();
    let h = std::sync::Arc::new(h);
    let item = format!("{PATH}/{id}");
    let racers: Vec<_> = (0..20)
        .map(|i| {
            let (h, t, item) = (h.clone(), t.clone(), item.clone());
            tokio::spawn(async move {
                let r = h.as_tenant(&t, "POST", &item, Some(json!({"description": format!("d{i}")}))).await;
                (r.status.as_u16(), r.json()["errorCode"].clone())
            })
        })
        .collect();
    let answers = super::joined(racers).await;
    assert!(answers.iter().all(|(status, _)| *status == 200), "{answers:?}");
    let versions = h.as_tenant(&t, "GET", &format!("{item}/versions"), None).await.json();
    assert_eq!(versions["currentVersion"], 21, "every update is a version");
    let kept: Vec<_> =
        versions["versions"].as_array().unwrap().iter().map(|v| v["description"].clone()).collect();
    let distinct: std::collections::BTreeSet<_> = kept.iter().map(Value::to_string).collect();
    assert_eq!((kept.len(), distinct.len()), (20, 20), "each update kept the one before it: {kept:?}");

    let racers: Vec<_> = (0..20)
        .map(|i| {
            let (h, t) = (h.clone(), t.clone());
            tokio::spawn(async move {
                let r = h
                    .as_tenant(
                        &t,
                        "PUT",
                        "/code-customization/env/BUSY",
                        Some(json!({"value": format!("v{i}")})),
                    )
                    .await;
                (r.status.as_u16(), r.json()["errorCode"].clone())
            })
        })
        .collect();
    let answers = super::joined(racers).await;
    assert!(answers.iter().all(|(status, _)| *status == 200), "{answers:?}");
}

/// A create sent again under its `Idempotency-Key` (both kinds: content and code): the same
/// request gets the first create's record and stores nothing; another request under the key
/// is refused (422, naming the header) and stores nothing; ten at once store one; the key is
/// the tenant's and the kind's own; a bad key is a 400 naming the header; without one, every
/// create stores.
pub async fn a_create_sent_again_under_its_key_is_stored_once(h: Harness) {
    use rp_shared::domain::idempotency::HEADER;
    let t = tenant(&h).await;
    let other = tenant(&h).await;
    let code = |name: &str| json!({"displayName": name, "trigger": "oob.start", "source": "async function handler() {}"});
    for (path, body, changed) in [
        (PATH, json!({"displayName": "Spring"}), json!({"displayName": "Summer"})),
        ("/code-customization", code("Spring"), code("Summer")),
    ] {
        let send = |t: String, key: &str, body: Value| {
            let (h, key) = (&h, key.to_owned());
            async move {
                h.client
                    .send_with(
                        "POST",
                        path,
                        Some(&h.admin),
                        &[("x-tenant-id", &t), (HEADER, &key)],
                        Some(body),
                    )
                    .await
            }
        };
        let total = |t: String| {
            let h = &h;
            async move { h.as_tenant(&t, "GET", path, None).await.json()["total"].as_i64().unwrap() }
        };
        let first = send(t.clone(), "\"order-1\"", body.clone()).await;
        assert_eq!(first.status, 201, "{path}: {}", first.json());
        let id = first.json()["id"].as_i64().unwrap();
        for key in ["\"order-1\"", "order-1"] {
            let again = send(t.clone(), key, body.clone()).await;
            assert_eq!(again.status, 201, "{path}, {key}: {}", again.json());
            assert_eq!(again.json()["id"], id, "{path}, {key}: the first create's record");
            assert_eq!(again.header("location"), first.header("location"), "{path}");
        }
        let refused = send(t.clone(), "order-1", changed.clone()).await;
        assert_eq!(refused.problem(422, codes::IDEMPOTENCY_KEY_REUSED)["field"], HEADER, "{path}");
        assert_eq!(total(t.clone()).await, 1, "{path}: one stored");

        // Another tenant's key of the same name is its own.
        let elsewhere = send(other.clone(), "order-1", changed.clone()).await;
        assert_eq!(elsewhere.status, 201, "{path}: {}", elsewhere.json());

        // Bad keys name the header and store nothing; no key, a create each time.
        for bad in ["", "a b", "\"open", &"k".repeat(256)] {
            let r = send(t.clone(), bad, body.clone()).await;
            assert_eq!(r.problem(400, codes::INVALID_FIELD)["field"], HEADER, "{path}: {bad:?}");
        }
        for _ in 0..2 {
            assert_eq!(h.as_tenant(&t, "POST", path, Some(body.clone())).await.status, 201, "{path}");
        }
        assert_eq!(total(t.clone()).await, 3, "{path}: two more without a key");

        // Ten at once under one new key: one stored, every answer its record.
        if !rp_shared::testing::aws::transactions_race_unsafely(h.backend.store.as_ref()) {
            let sends = (0..10).map(|_| send(t.clone(), "burst", body.clone()));
            let answers = futures_util::future::join_all(sends).await;
            let ids: std::collections::BTreeSet<_> = answers
                .iter()
                .map(|r| {
                    assert_eq!(r.status, 201, "{path}: {}", r.json());
                    r.json()["id"].as_i64().unwrap()
                })
                .collect();
            assert_eq!(ids.len(), 1, "{path}: one record for the key: {ids:?}");
            assert_eq!(total(t.clone()).await, 4, "{path}: one stored");
        }
    }
}
