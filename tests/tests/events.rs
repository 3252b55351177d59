//! The sample events in `events/` are real inputs: each API Gateway event is parsed as the Lambda
//! runtime parses it and run through its function's router on the embedded backend; the SQS event
//! goes through the consumer. The events, `functions/`, the SAM template and the routers must
//! name the same endpoints.

use aws_lambda_events::event::sqs::SqsEvent;
use rp_shared::backend::{self, Backend, Services};
use rp_shared::consumer::{process_batch, Dispatcher};
use rp_shared::domain::apps::AppId;
use rp_shared::domain::certificates::{RequestKind, RequestState};
use rp_shared::domain::messages::{LeaseRef, QueueMessage};
use rp_shared::domain::EpochMillis;
use rp_shared::http::{self, AppState, HttpConfig};
use rp_shared::ports::{Condition, Increment, Item, ItemKey, ItemStore, Page, Query, StoreError, WriteOp};
use rp_shared::repo::certificates::{request_item, Certificates};
use rp_shared::samples::{self, TIMED_OUT_REQUEST};
use rp_shared::testing::http::TestClient;
use rp_shared::testing::iam;
use rp_shared::worker::MessageHandler as _;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_owned()
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Every HTTP function, with the status its sample event answers after `seed-samples`.
const REPLAY: [(&str, u16); 53] = [
    ("health", 200),
    ("console", 200),
    ("problems", 200),
    ("cc-apps", 201),
    ("cc-app", 200),
    ("cc-app-workstation", 200),
    ("cc-app-rate-limit", 200),
    ("cc-tokens", 201),
    ("cc-token", 204),
    ("cc-registration-links", 201),
    ("rp-register-page", 200),
    ("rp-device-registrations", 201),
    ("rp-enroll", 200),
    ("rp-client-registrations", 200),
    ("rp-enroll-complete", 200),
    ("rp-client-reg", 200),
    ("rp-certificate-requests", 200),
    ("rp-certificate", 204),
    ("rp-certificate-revoke", 204),
    ("cc-certificate-revoke", 202),
    ("rp-pki-crl", 200),
    ("rp-pki-ca", 200),
    ("rp-device-certificates", 200),
    ("rp-oob-requests", 200),
    ("rp-oob-devices", 200),
    ("rp-oob-request", 200),
    ("rp-device-oob-requests", 200),
    ("rp-device-oob-request", 200),
    ("rp-device-setup", 200),
    ("rp-device-workstations", 200),
    ("rp-device-offline-used", 200),
    ("rp-events", 201),
    ("content-customizations", 201),
    ("content-customization", 200),
    ("content-customization-versions", 200),
    ("content-customization-version", 200),
    ("content-customization-restore", 200),
    ("code-customization-env-var", 200),
    ("code-customization-env", 200),
    ("code-customizations", 201),
    ("code-customization", 200),
    ("code-customization-versions", 200),
    ("code-customization-version", 200),
    ("code-customization-restore", 200),
    ("code-customization-test", 200),
    ("code-customization-signing-keys", 201),
    ("code-customization-signing-key", 204),
    ("rp-app-jwks", 200),
    ("cc-app-user-devices", 200),
    ("rp-device-push", 200),
    ("rp-device-token", 201),
    ("cc-app-device-token", 204),
    ("cc-app-device", 204),
];

/// The samples of a function's other methods and query strings: (file, function, status).
const MORE: [(&str, &str, u16); 16] = [
    ("cc-apps.get", "cc-apps", 200),
    ("cc-app-workstation.get", "cc-app-workstation", 200),
    ("cc-tokens.get", "cc-tokens", 200),
    ("cc-app-rate-limit.get", "cc-app-rate-limit", 200),
    ("content-customizations.get", "content-customizations", 200),
    ("content-customization.get", "content-customization", 200),
    ("code-customizations.get", "code-customizations", 200),
    ("code-customization.get", "code-customization", 200),
    ("code-customization.delete", "code-customization", 204),
    ("code-customization-env-var.delete", "code-customization-env-var", 204),
    ("code-customization-signing-keys.get", "code-customization-signing-keys", 200),
    ("rp-client-reg.get", "rp-client-reg", 200),
    ("rp-client-reg.patch", "rp-client-reg", 200),
    ("rp-client-reg.delete", "rp-client-reg", 204),
    ("rp-events.get", "rp-events", 200),
    ("rp-pki-crl.get", "rp-pki-crl", 200),
];

/// Every sample: (file, function, status).
fn all_samples() -> Vec<(&'static str, &'static str, u16)> {
    REPLAY.iter().map(|(name, status)| (*name, *name, *status)).chain(MORE).collect()
}

/// Runs `event` (a file of `events/`) through `function`'s router, parsed as the Lambda runtime
/// parses it; the status.
async fn replay(backend: &Backend, function: &str, event: &str) -> (u16, String) {
    let event = read(&format!("events/{event}.json"));
    let router = http::function(function, AppState::new(backend.clone(), HttpConfig::default()))
        .unwrap_or_else(|| panic!("no router for {function}"));
    let response = TestClient::new(router).event(&event).await;
    (response.status.as_u16(), String::from_utf8_lossy(&response.body).into_owned())
}

/// Runs the SQS sample through the consumer, as `cert-timeout-consumer` does; every message of
/// it must be handled.
async fn replay_sqs_sample(backend: &Backend) {
    let event: SqsEvent = serde_json::from_str(&read("events/cert-timeout-consumer.json")).unwrap();
    let response = process_batch(&Dispatcher::new(backend.clone()), event, None).await;
    assert_eq!(response.batch_item_failures.len(), 0, "cert-timeout-consumer: a message failed");
}

/// The local-invoke walkthrough: after `seed-samples` on an empty store, every sample event
/// answers its 2xx, once each, in the order docs/deploying.md lists them and in the reverse order, so no sample
/// depends on another having run. The SQS sample runs just before the result sample in one order
/// and just after it in the other: the request whose lease it ends must not be the one the result
/// sample answers.
#[tokio::test]
async fn every_sample_event_answers_2xx_after_seed_samples() {
    const SQS: &str = "cert-timeout-consumer";
    for order in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let backend = backend::embedded(dir.path()).unwrap();
        samples::seed(&backend).await.expect("seed-samples");
        let mut sequence = all_samples();
        let result = sequence.iter().position(|(file, ..)| *file == "rp-certificate").unwrap();
        sequence.insert(result, (SQS, SQS, 0));
        if order {
            sequence.reverse();
        }
        for (file, function, expected) in sequence {
            if file == SQS {
                replay_sqs_sample(&backend).await;
                continue;
            }
            let (status, body) = replay(&backend, function, file).await;
            assert!((200..300).contains(&status), "{file} (reversed: {order}): {status} {body}");
            assert_eq!(status, expected, "{file}: {body}");
        }
        // The time-out sample ended the seeded lease (the poll sample may have leased the
        // request again since, under a lease of its own).
        let (timed_out, _) =
            Certificates::new(backend.store.as_ref()).request(TIMED_OUT_REQUEST).await.unwrap().unwrap();
        assert_ne!(timed_out.lease_id.as_deref(), Some(samples::LEASE), "reversed: {order}");
        // The revoked sample token is refused now.
        let app = TestClient::new(http::app(AppState::new(backend, HttpConfig::default())));
        assert_eq!(app.send("GET", "/cc/api/apps", Some(samples::TOKEN_TO_REVOKE), None).await.status, 401);
    }
}

#[tokio::test]
async fn the_sqs_event_requeues_and_reports_only_failed_messages() {
    let dir = tempfile::tempdir().unwrap();
    let backend = backend::embedded(dir.path()).unwrap();
    let app = AppId::parse("appId", "workstationDemo").unwrap();
    let now = EpochMillis::from_datetime(time::OffsetDateTime::now_utc());
    let leased = samples::leased(TIMED_OUT_REQUEST, RequestKind::LoginCert, app, now, now);
    backend.store.put(request_item(&leased).unwrap(), Condition::Absent).await.unwrap();
    let mut event: SqsEvent = serde_json::from_str(&read("events/cert-timeout-consumer.json")).unwrap();
    let mut garbage = event.records[0].clone();
    garbage.message_id = Some("garbage".into());
    garbage.body = Some("not json".into());
    event.records.push(garbage);
    let dispatcher = Dispatcher::new(backend.clone());
    let response = process_batch(&dispatcher, event.clone(), None).await;
    let failed: Vec<_> = response.batch_item_failures.iter().map(|f| f.item_identifier.clone()).collect();
    assert_eq!(failed, ["garbage"], "only the bad message is retried");
    let (request, _) =
        Certificates::new(backend.store.as_ref()).request(TIMED_OUT_REQUEST).await.unwrap().unwrap();
    assert_eq!(request.state, RequestState::Pending, "the sample's lease ended: re-queued");
    let again = process_batch(&dispatcher, event, None).await;
    assert_eq!(again.batch_item_failures.len(), 1, "redelivery is idempotent");
}

#[test]
fn routers_functions_events_and_template_agree() {
    let template = read("infra/template.yaml");
    let watch = rp_tests::watch_routes(&read("Cargo.toml"));
    let endpoints: Vec<_> = http::ENDPOINTS.iter().map(|e| e.name).collect();
    // What each function's crate, main and template entry say is written from the table and
    // checked in `generated.rs`; here, that the samples reach them.
    // The template grants each function KMS and SQS exactly when its endpoint calls them, the
    // services its `main` builds clients for.
    let services = http::ENDPOINTS.iter().map(|e| (e.name, e.services()));
    let others = [("cert-timeout-consumer", Services::QUEUE), ("no-route", Services::STORE)];
    for (name, services) in services.chain(others) {
        let function = function_entry(&template, name);
        assert_eq!(
            function.contains("- kms:"),
            services.keys,
            "the template grants {name} KMS iff it uses keys"
        );
        assert_eq!(
            function.contains("- sqs:"),
            services.queue,
            "the template grants {name} SQS iff it queues"
        );
        assert_eq!(
            function.contains("- sns:"),
            services.push,
            "the template grants {name} SNS iff it wakes devices"
        );
    }
    for name in endpoints.iter().copied().chain(others.map(|(name, _)| name)) {
        let main: String = read(&format!("functions/{name}/src/main.rs")).split_whitespace().collect();
        assert!(
            main.contains("#[tokio::main(flavor=\"current_thread\")]"),
            "functions/{name}/src/main.rs runs on a current-thread runtime (see `lambda`'s docs)"
        );
        assert!(template.contains(&format!("Binary: {name}\n")), "the template builds {name}");
        assert!(root().join(format!("events/{name}.json")).exists(), "events/{name}.json exists");
    }
    let functions = std::fs::read_dir(root().join("functions")).unwrap().count();
    assert_eq!(functions, endpoints.len() + 2, "one function per endpoint, the consumer and no-route");
    assert_eq!(REPLAY.len(), endpoints.len(), "every endpoint has a replayed event");
    let files = std::fs::read_dir(root().join("events")).unwrap().count();
    assert_eq!(
        files,
        all_samples().len() + 2,
        "every event file is replayed (and the SQS and no-route ones)"
    );
    for (file, name, _) in all_samples() {
        let event: serde_json::Value = serde_json::from_str(&read(&format!("events/{file}.json"))).unwrap();
        let route = event["routeKey"].as_str().unwrap();
        let (method, path) = route.split_once(' ').unwrap();
        assert!(
            template.contains(&format!("Path: {path}\n            Method: {method}\n")),
            "{route} is in the template"
        );
        // And `cargo lambda watch` routes it to the same function.
        let routed = watch.iter().any(|r| {
            r.path == rp_tests::watch_path(path)
                && r.methods.iter().any(|m| m == method)
                && r.function == name
        });
        assert!(routed, "{route} is in [workspace.metadata.lambda.watch]'s router");
    }
}

/// Function `name`'s entry in the template text, from its binary's name to the blank line that
/// ends it (its role and its routes).
fn function_entry<'t>(template: &'t str, name: &str) -> &'t str {
    let start = template.find(&format!("Binary: {name}\n")).unwrap_or_else(|| panic!("{name} is built"));
    &template[start..start + template[start..].find("\n\n").unwrap()]
}

/// What each sample asks of AWS, its function's role allows ([`rp_shared::testing::iam`]): every
/// action its calls are authorized by is among what the endpoint table grants its function.
/// LocalStack enforces no IAM: this is where a missing grant shows before a deployment does.
#[tokio::test]
async fn every_samples_calls_are_allowed_by_its_functions_role() {
    let dir = tempfile::tempdir().unwrap();
    let embedded = backend::embedded(dir.path()).unwrap();
    samples::seed(&embedded).await.expect("seed-samples");
    let needed = std::sync::Arc::new(iam::Needed::default());
    let backend = iam::noting(&embedded, &needed);
    for (file, function, _) in all_samples() {
        replay(&backend, function, file).await;
    }
    let refused = needed.refused();
    assert!(refused.is_empty(), "calls the function's role does not allow:\n{}", refused.join("\n"));
}

/// What the time-out consumer asks of AWS, its role in the template allows: ending a lease that
/// re-queues its request, one that kills it (with the dead letter), and the same again (the
/// dead letter once more). Its role is written by hand, not from the endpoint table.
#[tokio::test]
async fn the_consumers_calls_are_allowed_by_its_role() {
    const CONSUMER: &str = "cert-timeout-consumer";
    let dir = tempfile::tempdir().unwrap();
    let embedded = backend::embedded(dir.path()).unwrap();
    samples::seed(&embedded).await.expect("seed-samples");
    let needed = std::sync::Arc::new(iam::Needed::default());
    let backend = iam::noting(&embedded, &needed);
    let app = AppId::parse("appId", "workstationDemo").unwrap();
    let now = EpochMillis::from_datetime(time::OffsetDateTime::now_utc());
    let last = samples::leased("last-attempt", RequestKind::LoginCert, app, now, now);
    embedded.store.put(request_item(&last).unwrap(), Condition::Absent).await.unwrap();
    let last = LeaseRef { request_id: last.request_id, lease_id: samples::LEASE.into() };
    let sample: SqsEvent = serde_json::from_str(&read("events/cert-timeout-consumer.json")).unwrap();
    let requeue = Dispatcher::new(backend.clone());
    let kill = Dispatcher::new(backend.clone()).with_max_attempts(1);
    iam::as_function(CONSUMER, async {
        assert!(process_batch(&requeue, sample, None).await.batch_item_failures.is_empty());
        for _ in 0..2 {
            kill.handle(&QueueMessage::single(&last).body()).await.unwrap();
        }
    })
    .await;
    assert_eq!(embedded.queue.dead_letters(10).await.unwrap().len(), 2, "it died, and was told again");

    let template = read("infra/template.yaml");
    let function = function_entry(&template, CONSUMER);
    let mut granted = std::collections::BTreeSet::new();
    for statement in function.split("- Effect: Allow").skip(1) {
        let resource = statement.lines().find_map(|l| l.trim().strip_prefix("Resource: ")).unwrap();
        let actions = statement.lines().filter_map(|l| l.trim().strip_prefix("- "));
        granted.extend(actions.map(|action| format!("{action} on {resource}")));
    }
    let noted = needed.take_of(CONSUMER);
    assert!(noted.contains("sqs:SendMessage to the dead-letter queue"), "{noted:?}");
    let refused: Vec<_> = noted
        .into_iter()
        .map(|action| match action {
            "sqs:SendMessage to the dead-letter queue" => {
                "sqs:SendMessage on !GetAtt CertTimeoutDeadLetterQueue.Arn".to_owned()
            }
            "sqs:SendMessage" => "sqs:SendMessage on !GetAtt CertTimeoutQueue.Arn".to_owned(),
            action if action.starts_with("dynamodb:") && !action.contains(' ') => {
                format!("{action} on !GetAtt Table.Arn")
            }
            other => other.to_owned(),
        })
        .filter(|needs| !granted.contains(needs))
        .collect();
    assert!(
        refused.is_empty(),
        "calls the consumer's role does not allow: {refused:?} (it allows {granted:?})"
    );
}

/// A store whose reads of one item fail while `broken` is set.
struct OneItemUnreadable {
    inner: std::sync::Arc<dyn ItemStore>,
    pk_part: String,
    broken: std::sync::atomic::AtomicBool,
}

#[async_trait::async_trait]
impl ItemStore for OneItemUnreadable {
    fn kind(&self) -> &'static str {
        self.inner.kind()
    }
    async fn get(&self, key: &ItemKey) -> Result<Option<Item>, StoreError> {
        if self.broken.load(std::sync::atomic::Ordering::SeqCst) && key.pk.contains(&self.pk_part) {
            return Err(StoreError::unavailable(std::io::Error::other("the item's partition is down")));
        }
        self.inner.get(key).await
    }
    async fn put(&self, item: Item, condition: Condition) -> Result<Item, StoreError> {
        self.inner.put(item, condition).await
    }
    async fn delete(&self, key: &ItemKey, condition: Condition) -> Result<(), StoreError> {
        self.inner.delete(key, condition).await
    }
    async fn transact(&self, ops: Vec<WriteOp>) -> Result<(), StoreError> {
        self.inner.transact(ops).await
    }
    async fn query(&self, query: Query) -> Result<Page, StoreError> {
        self.inner.query(query).await
    }
    async fn increment(&self, increment: Increment) -> Result<i64, StoreError> {
        self.inner.increment(increment).await
    }
}

#[tokio::test]
async fn a_grouped_message_fails_while_one_lease_cannot_be_ended_and_completes_when_redelivered() {
    let dir = tempfile::tempdir().unwrap();
    let embedded = backend::embedded(dir.path()).unwrap();
    let store = std::sync::Arc::new(OneItemUnreadable {
        inner: embedded.store.clone(),
        pk_part: "broken-request".into(),
        broken: true.into(),
    });
    let backend = Backend { store: store.clone(), ..embedded };
    let app = AppId::parse("appId", "workstationDemo").unwrap();
    let now = EpochMillis::from_datetime(time::OffsetDateTime::now_utc());
    let ids = ["fine-request-1", "broken-request", "fine-request-2"];
    for id in ids {
        let leased = samples::leased(id, RequestKind::LoginCert, app.clone(), now, now);
        backend.store.put(request_item(&leased).unwrap(), Condition::Absent).await.unwrap();
    }
    let leases = ids.iter().map(|id| LeaseRef { request_id: (*id).into(), lease_id: samples::LEASE.into() });
    let body = QueueMessage::LeasesExpired { leases: leases.collect() }.body();
    let dispatcher = Dispatcher::new(backend.clone());
    let state = |id: &'static str| {
        let store = store.inner.clone();
        async move { Certificates::new(store.as_ref()).request(id).await.unwrap().unwrap().0.state }
    };

    let failed = dispatcher.handle(&body).await.expect_err("one lease could not be ended");
    assert!(format!("{failed:#}").contains("ending 3 leases"), "{failed:#}");
    assert_eq!(state("fine-request-1").await, RequestState::Pending, "the others were ended");
    assert_eq!(state("fine-request-2").await, RequestState::Pending);
    assert_eq!(state("broken-request").await, RequestState::Leased);

    store.broken.store(false, std::sync::atomic::Ordering::SeqCst);
    dispatcher.handle(&body).await.expect("redelivered, it completes");
    assert_eq!(state("broken-request").await, RequestState::Pending);
    assert_eq!(state("fine-request-1").await, RequestState::Pending, "ended once, ignored after");
}

/// The console through its own function, as API Gateway's HTTP API hands it requests (the cookie
/// in the event's `cookies`, the form as its body): sign in, read a page, post a form; failed
/// sign-ins are counted per source address the gateway saw.
#[tokio::test]
async fn the_console_signs_in_and_acts_through_its_function() {
    use serde_json::json;
    let dir = tempfile::tempdir().unwrap();
    let backend = backend::embedded(dir.path()).unwrap();
    let now = EpochMillis::from_datetime(time::OffsetDateTime::now_utc());
    let admin = rp_shared::testing::fixtures::admin_token(backend.store.as_ref(), now).await;
    let router = http::function("console", AppState::new(backend, HttpConfig::default())).unwrap();
    let client = TestClient::new(router);
    let sample: serde_json::Value = serde_json::from_str(&read("events/console.json")).unwrap();
    let event = |method: &str, path: &str, cookie: Option<&str>, body: Option<String>, source: &str| {
        let mut e = sample.clone();
        e["rawPath"] = json!(path);
        e["routeKey"] = json!(format!("{method} /console/{{proxy+}}"));
        e["pathParameters"] = json!({"proxy": path.trim_start_matches("/console/")});
        e["requestContext"]["http"]["method"] = json!(method);
        e["requestContext"]["http"]["path"] = json!(path);
        e["requestContext"]["http"]["sourceIp"] = json!(source);
        if let Some(cookie) = cookie {
            e["cookies"] = json!([cookie]);
        }
        if let Some(body) = body {
            e["body"] = json!(body);
            e["headers"]["content-type"] = json!("application/x-www-form-urlencoded");
            e["headers"]["origin"] =
                json!(format!("https://{}", sample["headers"]["host"].as_str().unwrap()));
        }
        e.to_string()
    };
    let sign_in = |token: &str, source: &str| {
        event("POST", "/console/sign-in", None, Some(format!("token={token}")), source)
    };

    let signed_in = client.event(&sign_in(&admin, "198.51.100.7")).await;
    assert_eq!(signed_in.status, 303, "{}", String::from_utf8_lossy(&signed_in.body));
    let set = signed_in.header("set-cookie").unwrap();
    assert!(set.contains("Secure") && set.contains("HttpOnly") && set.contains("SameSite=Strict"), "{set}");
    let cookie = set.split(';').next().unwrap();
    let apps = client.event(&event("GET", "/console/apps", Some(cookie), None, "198.51.100.7")).await;
    assert_eq!(apps.status, 200);
    let page = String::from_utf8_lossy(&apps.body).into_owned();
    let at = page.find("name=\"csrf\" value=\"").unwrap() + 19;
    let csrf = &page[at..at + page[at..].find('"').unwrap()];
    let form = format!("csrf={csrf}&appId=viaLambda&displayName=Lambda");
    let created =
        client.event(&event("POST", "/console/apps", Some(cookie), Some(form), "198.51.100.7")).await;
    assert_eq!(created.header("location"), Some("/console/apps/viaLambda?notice=created"));
    let app =
        client.event(&event("GET", "/console/apps/viaLambda", Some(cookie), None, "198.51.100.7")).await;
    assert!(String::from_utf8_lossy(&app.body).contains("Workstation settings"));

    for _ in 0..5 {
        assert_eq!(
            client.event(&sign_in("rpt_not-a-token-0000000000000000", "203.0.113.9")).await.status,
            401
        );
    }
    assert_eq!(client.event(&sign_in(&admin, "203.0.113.9")).await.status, 429, "that address waits");
    assert_eq!(client.event(&sign_in(&admin, "198.51.100.7")).await.status, 303, "another does not");
}

/// What the `no-route` function answers (on AWS, every request API Gateway's routes leave to
/// `$default`) is what the local server's one router answers the same request with: the same
/// status, problem and `Allow`. HEAD, which no route takes on AWS, is refused locally too.
#[tokio::test]
async fn requests_no_route_takes_are_answered_as_the_local_server_answers_them() {
    let dir = tempfile::tempdir().unwrap();
    let backend = backend::embedded(dir.path()).unwrap();
    let local = TestClient::new(http::app(AppState::new(backend, HttpConfig::default())));
    let fallback = TestClient::new(http::stateless(http::no_route::router, &HttpConfig::default()));
    let requests = [
        ("PUT", "/cc/api/apps"),
        ("DELETE", "/health"),
        ("HEAD", "/health"),
        ("HEAD", "/rp/api/certificate/requests"),
        ("PATCH", "/rp/api/apps/workstationDemo/jwks.json"),
        ("POST", "/problems/route-not-found"),
        ("DELETE", "/console/apps/workstationDemo"),
        ("GET", "/nowhere"),
        ("GET", "/"),
        ("POST", "/cc/api/apps/workstationDemo/nowhere"),
    ];
    for (method, path) in requests {
        let answers =
            [local.send(method, path, None, None).await, fallback.send(method, path, None, None).await];
        let [local, fallback] = answers.map(|r| {
            let allow = r.headers.get("allow").map(|v| v.to_str().unwrap().replace(' ', ""));
            let problem = (method != "HEAD").then(|| r.json());
            // The detail but its exception id, which each answer has its own of.
            let detail = |p: &serde_json::Value| {
                p["detail"].as_str().unwrap().split(" (exceptionId").next().unwrap().to_owned()
            };
            let problem = problem.map(|p| (p["type"].clone(), p["errorCode"].clone(), detail(&p)));
            (r.status.as_u16(), r.headers["content-type"].clone(), allow, problem)
        });
        assert_eq!(local, fallback, "{method} {path}");
        assert!(matches!(fallback.0, 404 | 405), "{method} {path}: {fallback:?}");
    }
    // Its sample event, as the Lambda runtime hands it over: PUT on a path that takes GET and POST.
    let sample = TestClient::new(http::stateless(http::no_route::router, &HttpConfig::default()))
        .event(&read("events/no-route.json"))
        .await;
    assert_eq!((sample.status.as_u16(), sample.headers["allow"].to_str().unwrap()), (405, "GET,POST"));
    assert_eq!(sample.json()["errorCode"], 1000006);
}
