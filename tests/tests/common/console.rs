//! The operator console, through its router: sign-in and sessions, CSRF, authorization per app,
//! escaping, and each operator task from a form to its effect. The same tasks in a real browser
//! are `tests/console/console.test.mjs`.

use super::certificates::{agent_for, device, enroll, pair};
use super::Harness;
use axum::body::Body;
use axum::http::{header, Request};
use rp_shared::ports::Clock as _;
use rp_shared::testing::http::TestResponse;
use serde_json::json;
use std::time::Duration;

/// A browser's view of the console: its session cookie and the page's CSRF token.
pub struct Console<'h> {
    h: &'h Harness,
    pub cookie: String,
    pub csrf: String,
}

pub fn html(r: &TestResponse) -> String {
    String::from_utf8_lossy(&r.body).into_owned()
}

fn form(fields: &[(&str, &str)]) -> String {
    let mut serializer = form_urlencoded::Serializer::new(String::new());
    for (name, value) in fields {
        serializer.append_pair(name, value);
    }
    serializer.finish()
}

/// Posts a form with no session, as the sign-in page does.
pub async fn post_sign_in(h: &Harness, token: &str) -> TestResponse {
    post_sign_in_with(h, token, |request| request).await
}

/// [`post_sign_in`], its request first given what `with` adds (headers, API Gateway's context).
async fn post_sign_in_with(
    h: &Harness,
    token: &str,
    with: impl FnOnce(axum::http::request::Builder) -> axum::http::request::Builder,
) -> TestResponse {
    let request =
        Request::post("/console/sign-in").header(header::CONTENT_TYPE, "application/x-www-form-urlencoded");
    h.client.request(with(request).body(Body::from(form(&[("token", token)]))).unwrap()).await
}

/// Posts a sign-in as API Gateway passes it on from a client at `source_ip`: through an HTTP
/// API (v2), or with `rest`, a REST API (v1).
async fn post_sign_in_from(h: &Harness, token: &str, source_ip: &str, rest: bool) -> TestResponse {
    use aws_lambda_events::apigw::{ApiGatewayProxyRequestContext, ApiGatewayV2httpRequestContext};
    use lambda_http::request::RequestContext;
    let context = if rest {
        let mut context = ApiGatewayProxyRequestContext::default();
        context.identity.source_ip = Some(source_ip.to_owned());
        RequestContext::ApiGatewayV1(context)
    } else {
        let mut context = ApiGatewayV2httpRequestContext::default();
        context.http.source_ip = Some(source_ip.to_owned());
        RequestContext::ApiGatewayV2(context)
    };
    post_sign_in_with(h, token, |request| request.extension(context)).await
}

/// The value of `name="csrf"` on a page.
fn csrf_of(page: &str) -> String {
    let at = page.find("name=\"csrf\" value=\"").expect("the page has a CSRF field") + 19;
    page[at..at + page[at..].find('"').unwrap()].to_owned()
}

/// The opening tag and the body of the first form on `page` whose opening tag holds `which`; it
/// must post.
fn posted_form<'p>(page: &'p str, which: &str) -> (&'p str, &'p str) {
    let at = page.find(which).unwrap_or_else(|| panic!("the page has no form with {which}: {page}"));
    let start = page[..at].rfind("<form").expect("a form");
    let end = start + page[start..].find("</form>").expect("the form's end");
    let (tag, body) = page[start..end].split_once('>').unwrap();
    assert!(tag.contains(which) && tag.contains("method=\"post\""), "not a posted form: {tag}");
    (tag, body)
}

/// The question the form [`posted_form`] finds asks before it is sent (`data-confirm`), if any:
/// the console's script puts it to the operator, and a "no" sends nothing.
fn question_of(page: &str, which: &str) -> Option<String> {
    attribute(posted_form(page, which).0, "data-confirm")
}

/// The value of attribute `name` in an element's opening `tag`, as the templates write it.
fn attribute(tag: &str, name: &str) -> Option<String> {
    let at = tag.find(&format!(" {name}=\""))? + name.len() + 3;
    Some(tag[at..at + tag[at..].find('"')?].to_owned())
}

/// The first form on `page` whose opening tag holds `which` (`id="…"`, `action="…"`), as a
/// browser reads it: its action (it must post), its hidden fields with their values, and the
/// names of all its fields.
fn form_on(page: &str, which: &str) -> (String, Vec<(String, String)>, Vec<String>) {
    let (tag, body) = posted_form(page, which);
    let action = attribute(tag, "action").expect("the form's action");
    let (mut hidden, mut names) = (Vec::new(), Vec::new());
    for field in
        body.split('<').filter(|t| ["input ", "textarea ", "select "].iter().any(|k| t.starts_with(k)))
    {
        let Some(name) = attribute(field, "name") else { continue };
        if field.contains("type=\"hidden\"") {
            hidden.push((name.clone(), attribute(field, "value").unwrap_or_default()));
        }
        names.push(name);
    }
    (action, hidden, names)
}

impl<'h> Console<'h> {
    /// Fills in the form of `page` that [`form_on`] finds by `which` and sends it, as a browser
    /// would: to its own action, with its hidden fields (the CSRF token among them) and
    /// `fields`, each of which it must have.
    pub async fn submit(&self, page: &str, which: &str, fields: &[(&str, &str)]) -> TestResponse {
        let (action, hidden, names) = form_on(page, which);
        for (name, _) in fields {
            assert!(names.iter().any(|n| n == name), "the form has no field {name}: {names:?}");
        }
        let mut all: Vec<(&str, &str)> = hidden.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
        all.extend_from_slice(fields);
        self.post_raw(&action, &form(&all)).await
    }

    /// Signs in with `token` and reads the CSRF token off the apps page.
    pub async fn sign_in(h: &'h Harness, token: &str) -> Console<'h> {
        let r = post_sign_in(h, token).await;
        assert_eq!(r.status, 303, "{}", html(&r));
        assert_eq!(r.header("location"), Some("/console/apps"));
        let set = r.header("set-cookie").expect("a session cookie").to_owned();
        let cookie = set.split(';').next().unwrap().to_owned();
        let mut console = Console { h, cookie, csrf: String::new() };
        let apps = console.get("/console/apps").await;
        assert_eq!(apps.status, 200, "{}", html(&apps));
        console.csrf = csrf_of(&html(&apps));
        console
    }

    pub async fn get(&self, path: &str) -> TestResponse {
        let request = Request::get(path).header(header::COOKIE, &self.cookie).body(Body::empty()).unwrap();
        self.h.client.request(request).await
    }

    /// Posts `fields` with this session's CSRF token.
    pub async fn post(&self, path: &str, fields: &[(&str, &str)]) -> TestResponse {
        self.post_raw(path, &self.form(fields)).await
    }

    /// The form body of `fields` with this session's CSRF token, as [`Self::post`] sends it.
    pub fn form(&self, fields: &[(&str, &str)]) -> String {
        let mut all = vec![("csrf", self.csrf.as_str())];
        all.extend_from_slice(fields);
        form(&all)
    }

    pub async fn post_raw(&self, path: &str, body: &str) -> TestResponse {
        let request = Request::post(path)
            .header(header::COOKIE, &self.cookie)
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(Body::from(body.to_owned()))
            .unwrap();
        self.h.client.request(request).await
    }

    /// Follows a 303 to the page it names.
    pub async fn follow(&self, r: &TestResponse) -> TestResponse {
        assert_eq!(r.status, 303, "{}", html(r));
        self.get(r.header("location").unwrap()).await
    }
}

pub async fn console_sessions_are_strict_cookies_that_stand_for_the_token(h: Harness) {
    let to_sign_in = h.client.send("GET", "/console", None, None).await;
    assert_eq!((to_sign_in.status.as_u16(), to_sign_in.header("location")), (303, Some("/console/sign-in")));
    let page = h.client.send("GET", "/console/sign-in", None, None).await;
    assert_eq!(page.status, 200);
    let csp = page.header("content-security-policy").unwrap();
    assert!(
        csp.contains("default-src 'none'")
            && csp.contains("script-src 'self'")
            && !csp.contains("unsafe-inline")
    );
    assert_eq!(page.header("x-frame-options"), Some("DENY"));
    assert_eq!(page.header("cache-control"), Some("no-store"));
    assert!(html(&page).contains("type=\"password\""));
    // Anything else under /console wants a session.
    assert_eq!(
        h.client.send("GET", "/console/apps", None, None).await.header("location"),
        Some("/console/sign-in")
    );

    let r = post_sign_in(&h, &h.admin).await;
    let set = r.header("set-cookie").unwrap().to_owned();
    for attribute in ["HttpOnly", "SameSite=Strict", "Secure", "Path=/console", "Max-Age=28800"] {
        assert!(set.contains(attribute), "{attribute} in {set}");
    }
    assert!(set.starts_with("rp_console=rps_") && !set.contains(&h.admin), "{set}");
    let console = Console::sign_in(&h, &h.admin).await;
    let apps = console.get("/console/apps").await;
    assert!(!html(&apps).contains(&h.admin), "the token never reaches a page");
    assert!(html(&apps).contains("(global)"));
    // The style sheet and the script are served here, and nothing else under their path.
    for (name, kind) in [("console.css", "text/css"), ("console.js", "text/javascript")] {
        let r = h.client.send("GET", &format!("/console/assets/{name}"), None, None).await;
        assert_eq!(r.status, 200, "{name}");
        assert!(r.header("content-type").unwrap().starts_with(kind) && r.body.len() > 100, "{name}");
    }
    let r = h.client.send("GET", "/console/assets/other.js", None, None).await;
    assert_eq!(r.status, 404);

    // A sign-in posted from another site's page is refused. One posted from this console's own
    // page (a browser names its origin on every POST) is taken, whatever the case of the host;
    // an origin with no host to match is not.
    for (host, origin, status) in [
        (Some("rp.example.com"), "https://evil.example.net", 403),
        (Some("rp.example.com"), "https://rp.example.com", 303),
        (Some("RP.example.com"), "https://rp.EXAMPLE.com", 303),
        (Some("rp.example.com:8443"), "https://rp.example.com:8443", 303),
        (Some("rp.example.com"), "https://rp.example.com.evil.example.net", 403),
        (None, "https://rp.example.com", 403),
    ] {
        let r = post_sign_in_with(&h, &h.admin, |request| {
            let request = request.header(header::ORIGIN, origin);
            match host {
                Some(host) => request.header(header::HOST, host),
                None => request,
            }
        })
        .await;
        assert_eq!(r.status, status, "{host:?} {origin}: {}", html(&r));
        assert_eq!(r.header("set-cookie").is_some(), status == 303, "{host:?} {origin}");
    }

    // Sign-out ends the session: the cookie no longer opens a page.
    let out = console.post("/console/sign-out", &[]).await;
    assert_eq!(out.header("location"), Some("/console/sign-in"));
    assert!(out.header("set-cookie").unwrap().contains("Max-Age=0"));
    assert_eq!(console.get("/console/apps").await.header("location"), Some("/console/sign-in"));

    // A session stands for its token: revoking the token ends it.
    let admin = h.token_for("controlCenterAdmin", &h.app().await).await;
    let scoped = Console::sign_in(&h, &admin).await;
    let token_id =
        html(&scoped.get("/console/apps").await).split("admin token ").nth(1).unwrap()[..16].to_owned();
    let r = h.admin("DELETE", &format!("/cc/api/tokens/{token_id}"), None).await;
    assert_eq!(r.status, 204, "{}", r.json());
    assert_eq!(scoped.get("/console/apps").await.header("location"), Some("/console/sign-in"));
}

pub async fn console_sign_in_refuses_bad_tokens_and_limits_failures(h: Harness) {
    let app = h.app().await;
    let access = h.access_token(&app).await;
    for token in ["rpt_not-a-token-at-all-000000000000", &access, "short", ""] {
        let r = post_sign_in(&h, token).await;
        assert_eq!(r.status, 401, "{token}: {}", html(&r));
        assert!(r.header("set-cookie").is_none());
        assert!(html(&r).contains("not a valid admin token"));
        assert!(!html(&r).contains(token) || token.is_empty(), "the token is not echoed");
    }
    // The fifth failure in the window is the last one looked at: then even the right token waits.
    let r = post_sign_in(&h, "rpt_still-not-a-token-0000000000000").await;
    assert_eq!(r.status, 401);
    let r = post_sign_in(&h, &h.admin).await;
    assert_eq!(r.status, 429, "{}", html(&r));
    assert!(r.header("set-cookie").is_none());
    // Failures count per client: others, behind API Gateway, still sign in, and a client
    // there is held back by its own failures alone.
    assert_eq!(post_sign_in_from(&h, &h.admin, "203.0.113.7", false).await.status, 303);
    assert_eq!(post_sign_in_from(&h, &h.admin, "203.0.113.8", true).await.status, 303);
    for (held_back, other, rest) in
        [("198.51.100.1", "198.51.100.2", false), ("198.51.100.3", "198.51.100.4", true)]
    {
        for _ in 0..5 {
            assert_eq!(post_sign_in_from(&h, "short", held_back, rest).await.status, 401);
        }
        assert_eq!(post_sign_in_from(&h, &h.admin, held_back, rest).await.status, 429);
        assert_eq!(post_sign_in_from(&h, &h.admin, other, rest).await.status, 303);
    }
    h.clock.advance(std::time::Duration::from_secs(301));
    assert_eq!(post_sign_in(&h, &h.admin).await.status, 303);
}

pub async fn console_forms_need_the_sessions_csrf_token(h: Harness) {
    let console = Console::sign_in(&h, &h.admin).await;
    let id = Harness::unique("app");
    let fields = form(&[("appId", id.as_str()), ("displayName", "Demo")]);
    for body in [fields.clone(), format!("csrf=wrong&{fields}"), format!("csrf=&{fields}")] {
        let r = console.post_raw("/console/apps", &body).await;
        assert_eq!(r.status, 403, "{}", html(&r));
    }
    let other = Console::sign_in(&h, &h.admin).await;
    let r = console.post_raw("/console/apps", &format!("csrf={}&{fields}", other.csrf)).await;
    assert_eq!(r.status, 403, "another session's token");
    assert_eq!(h.admin("GET", &format!("/cc/api/apps/{id}"), None).await.status, 404, "nothing was created");
    let r = console.post("/console/apps", &[("appId", &id), ("displayName", "Demo")]).await;
    assert_eq!(r.header("location"), Some(format!("/console/apps/{id}?notice=created").as_str()));
    assert_eq!(h.admin("GET", &format!("/cc/api/apps/{id}"), None).await.status, 200);
    // Bad input names its field.
    let r = console.post("/console/apps", &[("appId", "1bad"), ("displayName", "Demo")]).await;
    assert_eq!(r.status, 400);
    assert!(html(&r).contains("appId"));
}

/// A code form carries the largest source and display name the API stores, even when every
/// byte of them is percent-encoded (three characters a byte); a form past the console's limit is
/// refused whole (413) and creates nothing.
pub async fn console_forms_carry_the_largest_source_and_no_more(h: Harness) {
    use rp_shared::domain::code::{MAX_DISPLAY_NAME, MAX_SOURCE_BYTES};
    use rp_shared::http::console::auth::FORM_LIMIT;
    let console = Console::sign_in(&h, &h.admin).await;
    let app = Harness::unique("app");
    console.post("/console/apps", &[("appId", &app), ("displayName", "Acme")]).await;
    let head = "function handler() { return 1; }\n//";
    let filler = MAX_SOURCE_BYTES - head.len();
    let source = format!("{head}{}{}", "\u{e9}".repeat(filler / 2), "~".repeat(filler % 2));
    assert_eq!(source.len(), MAX_SOURCE_BYTES);
    let name = "\u{1f511}".repeat(MAX_DISPLAY_NAME);
    let fields = [
        ("displayName", name.as_str()),
        ("trigger", "oob.start"),
        ("timeoutMs", "20000"),
        ("enabled", "on"),
        ("source", source.as_str()),
    ];
    let largest = console.form(&fields);
    assert!(largest.len() > 3 * MAX_SOURCE_BYTES - 64 && largest.len() <= FORM_LIMIT, "{}", largest.len());
    let r = console.post_raw(&format!("/console/apps/{app}/code"), &largest).await;
    assert_eq!(r.status, 303, "{}", html(&r));
    let location = r.header("location").unwrap().split('?').next().unwrap().to_owned();
    let page = html(&console.get(&location).await);
    assert!(page.contains(&name) && page.contains(&"\u{e9}".repeat(64)), "both are stored whole");

    // The limit itself: a form of exactly that many bytes is read, one byte more is not.
    const { assert!(FORM_LIMIT < 1024 * 1024, "a form is read into memory whole") };
    let at = format!("{largest}&pad={}", "x".repeat(FORM_LIMIT - largest.len() - 5));
    assert_eq!(at.len(), FORM_LIMIT);
    let r = console.post_raw(&format!("/console/apps/{app}/code"), &at).await;
    assert_eq!(r.status, 303, "{}", html(&r));
    let r = console.post_raw(&format!("/console/apps/{app}/code"), &format!("{at}x")).await;
    assert_eq!(r.status, 413, "{}", html(&r));
    let listed = h.as_tenant(&app, "GET", "/code-customization", None).await.json();
    assert_eq!(listed["total"], 2, "the form past the limit created nothing: {listed}");
}

pub async fn console_operator_tasks_reach_the_api(h: Harness) {
    let console = Console::sign_in(&h, &h.admin).await;
    let app = Harness::unique("app");
    let r = console.post("/console/apps", &[("appId", &app), ("displayName", "Acme")]).await;
    assert!(html(&console.follow(&r).await).contains("Created."));

    // Offline access on, through the settings form.
    let page = html(&console.get(&format!("/console/apps/{app}")).await);
    assert!(page.contains("Workstation settings"));
    let mut settings: Vec<(String, String)> = [
        "tokenLength",
        "tokenCount",
        "tokenEntryTimeoutSecs",
        "offlineAccessDays",
        "offlinePINPromptSecs",
        "tokenLowWarningThresholdPercentage",
        "maxWrongAttempts",
        "lockoutSecs",
        "requestTimeoutInSecs",
        "oobRequestTimeoutInSecs",
        "certificateValidityDays",
    ]
    .iter()
    .map(|name| {
        let at = page.find(&format!("name=\"{name}\" value=\"")).unwrap() + name.len() + 15;
        (name.to_string(), page[at..at + page[at..].find('"').unwrap()].to_owned())
    })
    .collect();
    settings.push(("offlineEnabled".into(), "on".into()));
    let fields: Vec<(&str, &str)> = settings.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
    let r = console.post(&format!("/console/apps/{app}/workstation"), &fields).await;
    assert!(html(&console.follow(&r).await).contains("Saved."));
    let stored = h.admin("GET", &format!("/cc/api/apps/{app}/workstation"), None).await.json();
    assert_eq!(stored["offlineAccess"]["enabled"], json!(true));
    let limits = [
        ("limit", "30"),
        ("windowSecs", "60"),
        ("keyCallsPerSec", "40"),
        ("maxOpenCertificateRequests", "50"),
    ];
    let r = console.post(&format!("/console/apps/{app}/rate-limit"), &limits).await;
    let page = html(&console.follow(&r).await);
    for (name, value) in limits {
        assert!(page.contains(&format!("name=\"{name}\" value=\"{value}\"")), "{name}");
    }
    assert_eq!(
        h.admin("GET", &format!("/cc/api/apps/{app}/rate-limit"), None).await.json(),
        json!({"limit": 30, "windowSecs": 60, "keyCallsPerSec": 40, "maxOpenCertificateRequests": 50})
    );
    // Left empty (as a browser sends the form), each is the deployment's; out of range, it is
    // refused.
    let on_deployments =
        [("limit", "30"), ("windowSecs", "60"), ("keyCallsPerSec", ""), ("maxOpenCertificateRequests", "")];
    console.post(&format!("/console/apps/{app}/rate-limit"), &on_deployments).await;
    let stored = h.admin("GET", &format!("/cc/api/apps/{app}/rate-limit"), None).await.json();
    assert_eq!(
        (&stored["keyCallsPerSec"], &stored["maxOpenCertificateRequests"]),
        (&json!(null), &json!(null))
    );
    for (field, most) in [("keyCallsPerSec", "1001"), ("maxOpenCertificateRequests", "100001")] {
        for bad in ["0", most, "-1", "4294967296"] {
            let sent = [("limit", "30"), ("windowSecs", "60"), (field, bad)];
            let r = console.post(&format!("/console/apps/{app}/rate-limit"), &sent).await;
            assert_eq!(r.status, 400, "{field}: {bad}");
        }
    }
    assert_eq!(h.admin("GET", &format!("/cc/api/apps/{app}/rate-limit"), None).await.json(), stored);

    // An access token, shown once, that works against the API.
    let r =
        console.post("/console/tokens", &[("kind", "access"), ("appId", &app), ("description", "ws")]).await;
    let (_, access) = new_token(&r);
    assert_eq!(r.header("cache-control"), Some("no-store"));
    assert!(!html(&console.get("/console/tokens").await).contains(&access), "listed without its secret");

    // A registration link with its QR code; the device it registers appears, then goes.
    let r = console.post(&format!("/console/apps/{app}/registration-links"), &[("namedUser", "alice")]).await;
    let page = html(&r);
    assert!(page.contains("<svg") && page.contains("id=\"link-qr\""), "{page}");
    let at = page.find("id=\"link-url\">").unwrap() + 14;
    let url = &page[at..at + page[at..].find('<').unwrap()];
    assert!(url.contains("/rp/register/"), "{url}");
    let phone = device(&h, &app, "alice", None).await;
    let users = html(&console.get(&format!("/console/apps/{app}/users?user=alice")).await);
    assert!(users.contains(&phone.device_id) && users.contains("until "), "{users}");
    // Each device's buttons are forms that carry the device and its user; both cannot be undone,
    // and each asks first.
    let end_token = format!("action=\"/console/apps/{app}/devices/end-token\"");
    let remove = format!("action=\"/console/apps/{app}/devices/remove\"");
    assert!(question_of(&users, &end_token).is_some_and(|q| q.starts_with("End this device's token?")));
    assert!(question_of(&users, &remove).is_some_and(|q| q.starts_with("Remove this device?")));
    let r = console.submit(&users, &end_token, &[]).await;
    let users = html(&console.follow(&r).await);
    assert!(
        users.contains("token has ended.") && users.contains(&phone.device_id),
        "back at alice's devices: {users}"
    );
    let r = h.client.send("POST", "/rp/versioned/device/token", Some(&phone.token), None).await;
    assert_eq!(r.status, 401, "the ended token no longer works");
    let r = console.submit(&users, &remove, &[]).await;
    let users = html(&console.follow(&r).await);
    assert!(users.contains("Removed: its pairings are gone") && users.contains("No device registered."));

    // A paired workstation is listed with its offline status, and unpaired.
    let phone = device(&h, &app, "bob", None).await;
    enroll(&h, &access, &app, "bob", "ws-1").await;
    pair(&h, &access, &phone, "ws-1").await;
    let page = html(&console.get(&format!("/console/apps/{app}/workstations")).await);
    assert!(page.contains("ws-1") && page.contains(&phone.device_id), "{page}");
    assert!(page.contains("no PINs"), "offline access is off: {page}");
    let unpair = format!("action=\"/console/apps/{app}/workstations/unpair\"");
    assert!(question_of(&page, &unpair).is_some_and(|q| q.starts_with("Unpair this workstation?")));
    let r = console.submit(&page, &unpair, &[]).await;
    let page = html(&console.follow(&r).await);
    assert!(page.contains("Unpaired: the pairing") && page.contains("No workstation is paired."), "{page}");

    // The queue, the events and a revocation by an unknown serial.
    let page = html(&console.get(&format!("/console/certificates?app={app}")).await);
    assert!(page.contains("id=\"queue\"") && page.contains(&app), "{page}");
    let r = console.post("/console/certificates/revoke", &[("certSerialNumber", "0badc0ffee")]).await;
    assert_eq!(r.status, 404, "{}", html(&r));
    let page = html(&console.get(&format!("/console/events?app={app}")).await);
    assert!(page.contains("<svg") && page.contains("id=\"timeline\""), "{page}");
    assert!(page.contains("WORKSTATION_ENROLL"), "{page}");
    // What the console did is on record as the signed-in admin's doing.
    let apps = html(&console.get("/console/apps").await);
    let at = apps.find("admin token ").expect("who is signed in") + 12;
    let token_id = &apps[at..at + apps[at..].find(' ').unwrap()];
    assert!(page.contains(&format!("<code>admin:{token_id}</code>")), "{page}");
    let r = console.get("/console/events?from=yesterday").await;
    assert_eq!(r.status, 400);
    // The filter's fields show the window asked for; an event name is checked before any read
    // (up to 64 letters, digits, `_`, `.` and `-`).
    let page = html(&console.get("/console/events?from=2026-11-27T08:00&to=2026-11-28T09:30").await);
    let shown = ["name=\"from\" value=\"2026-11-27T08:00\"", "name=\"to\" value=\"2026-11-28T09:30\""];
    assert!(shown.iter().all(|field| page.contains(field)), "{page}");
    let longest = format!("x_y.z-{}", "a".repeat(58));
    for (name, taken) in
        [(longest.as_str(), true), (&"a".repeat(65), false), ("two words", false), ("a<b", false)]
    {
        let query: String = form_urlencoded::byte_serialize(name.as_bytes()).collect();
        let r = console.get(&format!("/console/events?name={query}")).await;
        match taken {
            true => assert_eq!(r.status, 200, "{name}: {}", html(&r)),
            false => {
                assert_eq!(r.status, 400, "{name}");
                assert!(html(&r).contains("name: is not an event name"), "{}", html(&r));
            }
        }
    }

    // A code customization: created, test-run with its logs, result and error.
    let source =
        "async function handler(event) { console.log('hi', event.user); return { user: event.user }; }";
    let r = console
        .post(
            &format!("/console/apps/{app}/code"),
            &[
                ("displayName", "Greeter"),
                ("trigger", "oob.start"),
                ("source", source),
                ("timeoutMs", "1000"),
                ("enabled", "on"),
            ],
        )
        .await;
    let location = r.header("location").unwrap().split('?').next().unwrap().to_owned();
    let greeter = location.clone();
    let r = console.post(&format!("{location}/test"), &[("event", "{\"user\": \"alice\"}")]).await;
    let page = html(&r);
    assert!(
        page.contains("succeeded")
            && page.contains("hi alice")
            && page.contains("&quot;user&quot;: &quot;alice&quot;"),
        "{page}"
    );
    let r = console
        .post(
            &format!("/console/apps/{app}/code"),
            &[
                ("displayName", "Thrower"),
                ("trigger", "oob.start"),
                ("source", "function handler() { throw new Error('boom'); }"),
            ],
        )
        .await;
    let location = r.header("location").unwrap().split('?').next().unwrap().to_owned();
    let page = html(&console.post(&format!("{location}/test"), &[("event", "")]).await);
    assert!(page.contains("failed") && page.contains("boom"), "{page}");
    // The list shows which of them run on their trigger.
    let list = html(&console.get(&format!("/console/apps/{app}/code")).await);
    let row = |name: &str| {
        let at = list.find(&format!(">{name}</a>")).unwrap_or_else(|| panic!("{name} listed: {list}"));
        list[at..at + list[at..].find("</tr>").unwrap()].to_owned()
    };
    assert!(row("Greeter").contains(">on<") && row("Thrower").contains(">off<"), "{list}");
    // The tenant's environment variables by name; their values never reach a page.
    let put = h
        .as_tenant(&app, "PUT", "/code-customization/env/API_KEY", Some(json!({"value": "s3cr3t-v4lue"})))
        .await;
    assert_eq!(put.status, 200, "{}", put.json());
    let list = html(&console.get(&format!("/console/apps/{app}/code")).await);
    let env = &list[list.find("id=\"env\"").expect("the variables' table")..];
    assert!(env.contains("<code>API_KEY</code>") && !list.contains("s3cr3t-v4lue"), "{list}");
    // Edited through its form (renamed, turned off), then its first version restored.
    let page = html(&console.get(&greeter).await);
    let edited =
        [("displayName", "Greeter 2"), ("trigger", "oob.start"), ("source", source), ("timeoutMs", "900")];
    let r = console.submit(&page, "id=\"code-form\"", &edited).await;
    assert!(html(&console.follow(&r).await).contains("Saved."));
    let api = format!("/code-customization/{}", greeter.rsplit('/').next().unwrap());
    let code = h.as_tenant(&app, "GET", &api, None).await.json();
    let shown = |code: &serde_json::Value| json!([code["displayName"], code["enabled"], code["timeoutMs"]]);
    assert_eq!(shown(&code), json!(["Greeter 2", false, 900]), "{code}");
    let r = console.post(&format!("{greeter}/restore"), &[("version", "1")]).await;
    assert!(html(&console.follow(&r).await).contains("Restored"));
    let code = h.as_tenant(&app, "GET", &api, None).await.json();
    assert_eq!(shown(&code), json!(["Greeter", true, 1000]), "{code}");

    // A content customization: created, edited (a key left out is removed), restored.
    let r = console
        .post(
            &format!("/console/apps/{app}/content"),
            &[
                ("displayName", "Login"),
                ("description", " The welcome screen "),
                (
                    "contentMap",
                    "{\"consentScreen\": {\"cardHeader\": {\"title\": \"Hi\", \"description\": \"Scan\"}}}",
                ),
            ],
        )
        .await;
    let location = r.header("location").unwrap().split('?').next().unwrap().to_owned();
    let id = location.rsplit('/').next().unwrap().to_owned();
    let stored = h.as_tenant(&app, "GET", &format!("/content-customization/{id}"), None).await.json();
    assert_eq!(stored["description"], "The welcome screen", "trimmed: {stored}");
    let r = console
        .post(
            &location,
            &[
                ("displayName", "Login"),
                ("contentMap", "{\"consentScreen\": {\"cardHeader\": {\"title\": \"Hello\"}}}"),
            ],
        )
        .await;
    assert_eq!(r.status, 303, "{}", html(&r));
    let stored = h.as_tenant(&app, "GET", &format!("/content-customization/{id}"), None).await.json();
    assert_eq!(stored["contentMap"], json!({"consentScreen": {"cardHeader": {"title": "Hello"}}}));
    assert_eq!(stored["description"], "", "a description left empty is cleared: {stored}");
    let r = console.post(&format!("{location}/restore"), &[("version", "1")]).await;
    assert!(html(&console.follow(&r).await).contains("Restored"));
    let stored = h.as_tenant(&app, "GET", &format!("/content-customization/{id}"), None).await.json();
    assert_eq!(
        stored["contentMap"],
        json!({"consentScreen": {"cardHeader": {"title": "Hi", "description": "Scan"}}})
    );
}

/// The id and the secret of the token a `POST /console/tokens` created, off the page it answered.
fn new_token(r: &TestResponse) -> (String, String) {
    assert_eq!(r.status, 200, "{}", html(r));
    let page = html(r);
    let at = page.find("Token <code>").expect("the new token's id") + 12;
    let id = page[at..at + page[at..].find('<').unwrap()].to_owned();
    let at = page.find("id=\"new-token\">").expect("the new token") + 15;
    let secret = page[at..at + page[at..].find('<').unwrap()].to_owned();
    assert!(secret.starts_with("rpt_"), "{secret}");
    (id, secret)
}

/// The console's tokens pages from `first` on, each "Next page" link followed as an operator
/// would, to the last page (one with no such link). A link back to a page already shown fails.
async fn token_pages(console: &Console<'_>, first: &str) -> Vec<String> {
    let (mut pages, mut paths) = (Vec::new(), vec![first.to_owned()]);
    loop {
        let path = paths.last().unwrap();
        let r = console.get(path).await;
        assert_eq!(r.status, 200, "{path}: {}", html(&r));
        let page = html(&r);
        let next = page.find("href=\"/console/tokens?cursor=").map(|at| {
            let at = at + 6;
            page[at..at + page[at..].find('"').unwrap()].to_owned()
        });
        pages.push(page);
        match next {
            Some(next) if paths.contains(&next) => panic!("the pages run in a circle: {paths:?}"),
            Some(next) => paths.push(next),
            None => return pages,
        }
    }
}

/// The row of token `id` on the console's tokens pages.
async fn token_row(console: &Console<'_>, id: &str) -> String {
    let pages = token_pages(console, "/console/tokens").await;
    let code = format!("<code>{id}</code>");
    let page = pages.iter().find(|page| page.contains(&code)).unwrap_or_else(|| panic!("{id} is on no page"));
    let at = page.find(&code).unwrap();
    let start = page[..at].rfind("<tr>").expect("a table row");
    page[start..at + page[at..].find("</tr>").unwrap()].to_owned()
}

/// The tokens page: each token with its kind, app, description and state (live, expired,
/// revoked), and a revoke button while it is not revoked. The button revokes the token for good
/// (the API refuses it from then on); a second press changes nothing, an unknown id is 404, and
/// an id that is not 16 hexadecimal digits is refused by name.
pub async fn console_tokens_show_their_state_and_their_revoke_button_works(h: Harness) {
    const NEW: &str = "id=\"new-token-form\"";
    let console = Console::sign_in(&h, &h.admin).await;
    let app = h.app().await;
    let form = html(&console.get("/console/tokens").await);
    let access_fields = [("kind", "access"), ("appId", app.as_str()), ("description", "front desk")];
    let (access_id, access) = new_token(&console.submit(&form, NEW, &access_fields).await);
    let admin_fields = [
        ("kind", "controlCenterAdmin"),
        ("appId", &app),
        ("description", "helpdesk"),
        ("expiresInSecs", "60"),
    ];
    let created = h.clock.now_millis();
    let (admin_id, _) = new_token(&console.submit(&form, NEW, &admin_fields).await);
    h.clock.advance(Duration::from_secs(61));
    // Times show to the second, in UTC.
    let shown_at = |at: rp_shared::domain::EpochMillis| {
        let iso = at.iso8601();
        format!("<td>{} {} UTC</td>", &iso[..10], &iso[11..19])
    };

    // A token's revoke button carries its id and asks first, naming it.
    let revoke_button = |row: &str, id: &str| {
        let question = format!("Revoke token {id}? Whatever uses it is refused from now on;");
        row.contains(&format!("name=\"tokenId\" value=\"{id}\"")) && row.contains(&question)
    };
    let row = token_row(&console, &access_id).await;
    let shown =
        ["<td>access</td>", &format!("<td>{app}</td>"), "<td>front desk</td>", "<td>never</td>", ">live<"];
    assert!(shown.iter().all(|s| row.contains(s)) && revoke_button(&row, &access_id), "{row}");
    let row = token_row(&console, &admin_id).await;
    let shown = ["<td>controlCenterAdmin</td>", "<td>helpdesk</td>", ">expired<"];
    assert!(shown.iter().all(|s| row.contains(s)) && revoke_button(&row, &admin_id), "{row}");
    let expires = rp_shared::domain::EpochMillis(created.as_millis() + 60_000);
    assert!(row.contains(&shown_at(created)) && row.contains(&shown_at(expires)), "{row}");

    let apps = format!("/rp/api/oob/client/authentication/{app}/nobody/devices");
    assert_ne!(h.client.send("GET", &apps, Some(&access), None).await.status, 401, "live");
    let r = console.post("/console/tokens/revoke", &[("tokenId", &access_id)]).await;
    assert!(html(&console.follow(&r).await).contains("Revoked."));
    assert_eq!(h.client.send("GET", &apps, Some(&access), None).await.status, 401, "revoked");
    let row = token_row(&console, &access_id).await;
    assert!(row.contains(">revoked<") && !row.contains("name=\"tokenId\""), "{row}");
    let again = console.post("/console/tokens/revoke", &[("tokenId", &access_id)]).await;
    assert_eq!(again.status, 303, "revoked already: {}", html(&again));
    assert!(token_row(&console, &access_id).await.contains(">revoked<"));

    let unknown = console.post("/console/tokens/revoke", &[("tokenId", "0123456789abcdef")]).await;
    assert_eq!(unknown.status, 404, "{}", html(&unknown));
    for bad in ["abc", "0123456789abcdef0", "zzzzzzzzzzzzzzzz", ""] {
        let r = console.post("/console/tokens/revoke", &[("tokenId", bad)]).await;
        assert_eq!(r.status, 400, "{bad:?}: {}", html(&r));
        assert!(html(&r).contains("tokenId: must be 16 hexadecimal digits"), "{}", html(&r));
    }
}

/// The console's lists page 50 at a time: each "Next page" link carries the cursor of the list it
/// pages, and following them shows every item once. A cursor left empty is the first page; one
/// that is not a cursor, or is another list's, is refused by name.
pub async fn console_lists_page_with_their_own_cursors(h: Harness) {
    let app = h.app().await;
    h.app().await;
    let mut made = Vec::new();
    for _ in 0..55 {
        let r = h.admin("POST", "/cc/api/tokens", Some(json!({"kind": "access", "appId": app}))).await;
        made.push(r.json()["tokenId"].as_str().expect("a token id").to_owned());
    }
    let console = Console::sign_in(&h, &h.admin).await;
    let pages = token_pages(&console, "/console/tokens?cursor=").await;
    assert!(pages.len() >= 2, "55 tokens and more take two pages of 50");
    let seen: Vec<&str> = pages
        .iter()
        .flat_map(|page| page.split("<td><code>").skip(1).map(|cell| &cell[..cell.find('<').unwrap()]))
        .collect();
    for id in &made {
        assert_eq!(seen.iter().filter(|s| *s == id).count(), 1, "{id} once in {seen:?}");
    }
    let apps = h.admin("GET", "/cc/api/apps?limit=1", None).await.json();
    let foreign: String =
        form_urlencoded::byte_serialize(apps["nextCursor"].as_str().expect("a second page").as_bytes())
            .collect();
    for cursor in ["abc", foreign.as_str()] {
        let r = console.get(&format!("/console/tokens?cursor={cursor}")).await;
        assert_eq!(r.status, 400, "{cursor}");
        assert!(html(&r).contains("cursor: is not a cursor of this list"), "{}", html(&r));
    }
}

/// A create form sent twice (a double click, a resend after a lost answer) creates once: the
/// page drew a key for it. Sent again with other contents it is refused; a page drawn afresh
/// creates another; an edit form carries no key.
pub async fn console_create_forms_sent_twice_create_once(h: Harness) {
    let app = h.app().await;
    let console = Console::sign_in(&h, &h.admin).await;
    let content: &[(&str, &str)] = &[("displayName", "Login"), ("contentMap", "{}")];
    let code: &[(&str, &str)] =
        &[("displayName", "Login"), ("trigger", "oob.start"), ("source", "function handler() {}")];
    for (kind, which, fields) in
        [("content", "id=\"content-form\"", content), ("code", "id=\"code-form\"", code)]
    {
        let list = format!("/console/apps/{app}/{kind}");
        let page = html(&console.get(&list).await);
        let first = console.submit(&page, which, fields).await;
        assert_eq!(first.status, 303, "{kind}: {}", html(&first));
        let again = console.submit(&page, which, fields).await;
        assert_eq!(again.status, 303, "{kind}: {}", html(&again));
        assert_eq!(again.header("location"), first.header("location"), "{kind}: on to what the first made");
        let mut other = fields.to_vec();
        other[0] = ("displayName", "Other");
        let r = console.submit(&page, which, &other).await;
        assert_eq!(r.status, 422, "{kind}: {}", html(&r));
        assert!(html(&r).contains("Reload the page to create another"), "{}", html(&r));
        let fresh = html(&console.get(&list).await);
        let r = console.submit(&fresh, which, fields).await;
        assert_eq!(r.status, 303, "{kind}: {}", html(&r));
        assert_ne!(r.header("location"), first.header("location"), "{kind}: a fresh page creates another");
        let listed = h.as_tenant(&app, "GET", &format!("/{kind}-customization"), None).await.json();
        assert_eq!(listed["total"], 2, "{kind}: {listed}");
        let edit = html(&console.follow(&first).await);
        assert!(!posted_form(&edit, which).1.contains("name=\"once\""), "{kind}: {edit}");
    }
    let hostile = [("once", "a b"), ("displayName", "x"), ("contentMap", "{}")];
    let r = console.post(&format!("/console/apps/{app}/content"), &hostile).await;
    assert_eq!(r.status, 400, "{}", html(&r));
    assert!(html(&r).contains("once: must be"), "{}", html(&r));
}

pub async fn console_scoped_admins_see_only_their_app(h: Harness) {
    let (own, other) = (h.app().await, h.app().await);
    let admin = h.token_for("controlCenterAdmin", &own).await;
    let console = Console::sign_in(&h, &admin).await;
    let apps = html(&console.get("/console/apps").await);
    assert!(apps.contains(&own) && !apps.contains(&other), "{apps}");
    assert!(!apps.contains("Create an app") && !apps.contains("/console/tokens"));
    for path in [
        format!("/console/apps/{other}"),
        format!("/console/apps/{other}/content"),
        format!("/console/apps/{other}/code"),
        format!("/console/apps/{own}/users"),
        format!("/console/apps/{own}/workstations"),
        "/console/tokens".to_owned(),
        "/console/certificates".to_owned(),
        "/console/events".to_owned(),
    ] {
        assert_eq!(console.get(&path).await.status, 403, "{path}");
    }
    for path in [
        format!("/console/apps/{own}"),
        format!("/console/apps/{own}/content"),
        format!("/console/apps/{own}/code"),
    ] {
        assert_eq!(console.get(&path).await.status, 200, "{path}");
    }
    let r = console
        .post(&format!("/console/apps/{other}/content"), &[("displayName", "x"), ("contentMap", "{}")])
        .await;
    assert_eq!(r.status, 403);
    let r = console
        .post(&format!("/console/apps/{own}/content"), &[("displayName", "x"), ("contentMap", "{}")])
        .await;
    assert_eq!(r.status, 303, "{}", html(&r));
    let r = console.post("/console/apps", &[("appId", &Harness::unique("app")), ("displayName", "x")]).await;
    assert_eq!(r.status, 403);
}

pub async fn console_renders_hostile_values_as_text(h: Harness) {
    let console = Console::sign_in(&h, &h.admin).await;
    let app = Harness::unique("app");
    let script = "<script>alert(1)</script>";
    console.post("/console/apps", &[("appId", &app), ("displayName", script)]).await;
    let r = console.post(&format!("/console/apps/{app}/content"), &[("displayName", script), ("description", "\"><img src=x onerror=alert(2)>"), ("contentMap", "{\"consentScreen\": {\"cardHeader\": {\"title\": \"</textarea><script>alert(3)</script>\"}}}")]).await;
    let content =
        r.header("location").unwrap_or_else(|| panic!("{}", html(&r))).split('?').next().unwrap().to_owned();
    let user = "<b onclick=alert(4)>eve";
    let link =
        html(&console.post(&format!("/console/apps/{app}/registration-links"), &[("namedUser", user)]).await);
    let pages = [
        html(&console.get("/console/apps").await),
        html(&console.get(&format!("/console/apps/{app}")).await),
        html(&console.get(&format!("/console/apps/{app}/content")).await),
        html(&console.get(&content).await),
        link,
    ];
    for page in &pages {
        assert!(
            !page.contains("<script>alert") && !page.contains("<img src=x") && !page.contains("<b onclick"),
            "{page}"
        );
    }
    assert!(pages[0].contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(pages[3].contains("&lt;/textarea&gt;&lt;script&gt;alert(3)"), "{}", pages[3]);
    assert!(pages[4].contains("&lt;b onclick=alert(4)&gt;eve"));
}

/// The numbers of the queue table's row for `app`: pending logins, pending revocations, leased
/// logins, dead.
fn queue_row(page: &str, app: &str) -> Vec<String> {
    let at = page.find(&format!("?app={app}\">")).expect("the app's row");
    let row = &page[at..at + page[at..].find("</tr>").unwrap()];
    row.split("<td class=\"num\">").skip(1).map(|cell| cell[..cell.find('<').unwrap()].to_owned()).collect()
}

pub async fn console_watches_the_queue_and_revokes_a_certificate(h: Harness) {
    let console = Console::sign_in(&h, &h.admin).await;
    let app = h.app().await;
    let access = h.access_token(&app).await;
    let phone = device(&h, &app, "carol", None).await;
    enroll(&h, &access, &app, "carol", "ws-cert").await;
    pair(&h, &access, &phone, "ws-cert").await;
    // More apps than one batch of queue reads (QUEUES_AT_ONCE): each row is still its own app's.
    let mut others = Vec::new();
    for _ in 0..rp_shared::app::console::QUEUES_AT_ONCE + 4 {
        others.push(h.app().await);
    }
    let page = html(&console.get("/console/certificates").await);
    assert_eq!(queue_row(&page, &app), ["1", "0", "0", "0"], "one pending login certificate");
    for other in &others {
        assert_eq!(queue_row(&page, other), ["0", "0", "0", "0"], "{other}");
    }

    let (agent, ca, _server) = agent_for(&h).await;
    assert_eq!(agent.run_once().await.unwrap().issued.len(), 1);
    let page = html(&console.get(&format!("/console/certificates?app={app}")).await);
    assert_eq!(queue_row(&page, &app), ["0", "0", "0", "0"]);
    assert!(page.contains("WORKSTATION_CERTIFICATE_ISSUED"), "{page}");
    let serial = super::certificates::first_serial(&h, &phone).await;
    assert!(page.contains(&serial), "the issuance names its serial");

    assert!(question_of(&page, "id=\"revoke-form\"").is_some_and(|q| q.starts_with("Revoke the certificate")));
    let r = console.submit(&page, "id=\"revoke-form\"", &[("certSerialNumber", &serial)]).await;
    assert_eq!(r.status, 200, "{}", html(&r));
    assert!(html(&r).contains("Revocation queued"));
    let page = html(&console.get("/console/certificates").await);
    assert_eq!(queue_row(&page, &app), ["0", "1", "0", "0"], "one pending revocation");
    assert_eq!(agent.run_once().await.unwrap().revoked.len(), 1);
    assert!(ca.is_revoked(&serial));
    let page = html(&console.get(&format!("/console/certificates?app={app}&ca={}", ca.id())).await);
    assert!(page.contains("WS_CERTIFICATE_REVOKED") && page.contains("CRL number"), "{page}");
    assert!(page.contains("current until"), "a fresh CRL");
    let again = console.post("/console/certificates/revoke", &[("certSerialNumber", &serial)]).await;
    assert_eq!(again.status, 409, "revoked already");
    let page = html(&console.get("/console/certificates?ca=00000000000000ff").await);
    assert!(page.contains("Nothing is published for CA"));
    // What cannot be a CA id is refused before any read, naming the field (DynamoDB would refuse
    // a key over 2 KiB as the store's input, naming the body).
    for bad in ["no-such-ca".to_owned(), "0".repeat(4000), "00000000000000FF".to_owned()] {
        let r = console.get(&format!("/console/certificates?ca={bad}")).await;
        assert_eq!(r.status, 400, "{bad:.20}");
        assert!(html(&r).contains("ca: must be a CA id"), "{}", html(&r));
    }
}

pub async fn console_shows_the_newest_certificate_events_of_the_week(h: Harness) {
    let app = h.app().await;
    // 100 issuances and revocations, two hours apart: 84 in the last 7 days, of which more
    // issuances alone than the page shows.
    let mut serials = Vec::new();
    for i in 0..100 {
        let name = if i % 5 == 4 { "WS_CERTIFICATE_REVOKED" } else { "WORKSTATION_CERTIFICATE_ISSUED" };
        let serial = format!("5e{i:04}");
        let attributes = json!({"certSerialNumber": serial, "errorCode": 0});
        let body = json!({"name": name, "appId": app, "attributes": attributes});
        let r = h.admin("POST", "/rp/api/events", Some(body)).await;
        assert_eq!(r.status, 201, "{}", r.json());
        serials.push(serial);
        h.clock.advance(Duration::from_secs(2 * 3600));
    }
    let console = Console::sign_in(&h, &h.admin).await;
    let page = html(&console.get(&format!("/console/certificates?app={app}")).await);
    let cell = |s: &str| page.find(&format!("<code>{s}</code>"));
    let shown: Vec<&String> = serials.iter().filter(|s| cell(s).is_some()).collect();
    assert_eq!(shown, serials[50..].iter().collect::<Vec<_>>(), "the newest 50 of either kind");
    assert!(
        cell(&serials[99]) < cell(&serials[98]) && cell(&serials[51]) < cell(&serials[50]),
        "newest first"
    );
}

pub async fn console_events_table_shows_the_newest_past_the_timelines_count(h: Harness) {
    use rp_shared::app::console::{EVENTS_COUNTED, EVENTS_SHOWN};
    use rp_shared::domain::{apps::AppId, events::EventRecord};
    use rp_shared::ports::{Condition, WriteOp};
    use rp_shared::repo::events::Events;
    let app = h.app().await;
    let app_id = AppId::parse("appId", &app).unwrap();
    // More events in the last day than the timeline counts, 10 ms apart, stored 100 a transaction.
    let total = EVENTS_COUNTED + 50;
    let start = h.clock.now_millis().as_millis() - 20 * 3600 * 1000;
    let mark = |i: usize| format!("m{i:05}");
    for chunk in (0..total).collect::<Vec<_>>().chunks(100) {
        let mut ops = Vec::new();
        for &i in chunk {
            let attributes = json!({"mark": mark(i)}).as_object().unwrap().clone();
            let at = rp_shared::domain::EpochMillis(start + 10 * i as i64);
            let event =
                EventRecord::new("WORKSTATION_ENROLL", Some(app_id.clone()), "server", at, attributes);
            ops.push(WriteOp::Put { item: Events::item(&event).unwrap(), condition: Condition::Absent });
        }
        h.backend.store.transact(ops).await.unwrap();
    }
    let console = Console::sign_in(&h, &h.admin).await;
    let page = html(&console.get(&format!("/console/events?app={app}")).await);
    assert!(page.contains(&format!("Events found: {EVENTS_COUNTED}+")), "{page}");
    let shown = |i: usize| page.find(&format!("&quot;{}&quot;", mark(i)));
    // The table: the newest of them all (past those counted), newest first.
    let newest = total - EVENTS_SHOWN;
    assert!((newest..total).all(|i| shown(i).is_some()), "{page}");
    assert!(shown(newest - 1).is_none(), "{page}");
    assert!(shown(total - 1) < shown(newest), "newest first");
}

pub async fn console_shows_a_customizations_newest_versions_first(h: Harness) {
    // More earlier versions kept than the page shows.
    let (h, app, id) = super::content::keeping_versions(&h, 60).await;
    for n in 2..=56 {
        let body = json!({"displayName": format!("n{n}")});
        let r = h.as_tenant(&app, "POST", &format!("/content-customization/{id}"), Some(body)).await;
        assert_eq!(r.status, 200, "{}", r.json());
        if n % 50 == 0 {
            h.clock.advance(Duration::from_secs(61)); // a fresh window of the tenant's rate limit
        }
    }
    let console = Console::sign_in(&h, &h.admin).await;
    let page = html(&console.get(&format!("/console/apps/{app}/content/{id}")).await);
    let table = &page[page.find("id=\"versions\"").expect("the versions table")..];
    let shown: Vec<u64> = table
        .split("<td class=\"num\">")
        .skip(1)
        .map(|cell| cell[..cell.find('<').unwrap()].parse().unwrap())
        .collect();
    // Versions 1 to 55 are kept (56 is current): the newest 50 show, newest first.
    assert_eq!(shown, (6..=55).rev().collect::<Vec<_>>());
}
