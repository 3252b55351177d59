//! A function whose store stops answering: its sample event replayed through the real front door
//! (`lambda::serve`, with the SDK configuration a cold start loads) against a DynamoDB endpoint on
//! loopback that takes every call and never answers. The call gives up inside the function's
//! time-out and the request gets a 503 problem, rather than running until Lambda ends it (when
//! API Gateway would answer with an error that is not a problem document); so does a request
//! whose invocation has less time left than the call's limits.
//!
//! The queue consumer, against the same store, answers its batch before its invocation's
//! deadline, with every message it did not finish reported failed.
//!
//! In a process of its own (its own test binary): it sets the Lambda environment variables, one
//! test at a time.

use serde_json::Value;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

mod runtime_api;

/// Held by each test while it sets the environment and its function starts.
static ENVIRONMENT: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// An AWS endpoint on loopback that takes every connection and never answers; the count of
/// connections made to it.
async fn stalled_endpoint() -> (String, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let connections = Arc::new(AtomicUsize::new(0));
    let count = connections.clone();
    tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            open.push(stream);
        }
    });
    (endpoint, connections)
}

/// Lambda's environment for `function`, every AWS client pointed at `endpoint`.
fn lambda_environment(function: &str, endpoint: &str) {
    let own = [("AWS_LAMBDA_FUNCTION_NAME", function), ("AWS_ENDPOINT_URL", endpoint)];
    let lambda = runtime_api::LAMBDA_ENV.into_iter().filter(|(name, _)| *name != "AWS_ENDPOINT_URL");
    for (name, value) in lambda.chain(own) {
        std::env::set_var(name, value);
    }
}

#[tokio::test]
async fn a_stalled_store_costs_a_request_a_503_problem_inside_the_function_time_out() {
    let _environment = ENVIRONMENT.lock().await;
    let (endpoint, connections) = stalled_endpoint().await;
    lambda_environment("rp-app-jwks", &endpoint);
    let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/../events/rp-app-jwks.json");
    let sample = std::fs::read_to_string(sample).unwrap();
    // Handed out last first: "stalled" with the usual time, then "short" with 2 s to its deadline.
    let short = Duration::from_secs(2);
    let events = vec![
        ("short".to_owned(), sample.clone(), short),
        ("stalled".to_owned(), sample, runtime_api::INVOCATION_TIME),
    ];
    let (address, mut answers) = runtime_api::start_timed("rp-app-jwks", events).await;
    runtime_api::run_front_door(address, || {
        rp_shared::lambda::serve(rp_shared::http::code::jwks_router, rp_shared::lambda::ClientSet::STORE)
    });

    let function_time_out = globals_time_out();
    assert!(rp_shared::adapters::aws::CALL_TIMEOUT < function_time_out);
    let problem = unavailable(&mut answers, "stalled", function_time_out).await;
    assert!(problem["detail"].as_str().unwrap().contains("unavailable"), "{problem}");
    assert!(connections.load(Ordering::SeqCst) >= 2, "a stalled attempt is sent again on a new connection");

    let started = std::time::Instant::now();
    let problem = unavailable(&mut answers, "short", short).await;
    assert!(problem["detail"].as_str().unwrap().contains("ran out of time"), "{problem}");
    assert!(started.elapsed() >= Duration::from_millis(1200), "it ran until shortly before the deadline");
}

#[tokio::test]
async fn a_stalled_store_costs_the_queue_consumer_its_batch_not_its_invocation() {
    let _environment = ENVIRONMENT.lock().await;
    let (endpoint, _) = stalled_endpoint().await;
    lambda_environment("cert-timeout-consumer", &endpoint);
    let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/../events/cert-timeout-consumer.json");
    let mut event: Value = serde_json::from_str(&std::fs::read_to_string(sample).unwrap()).unwrap();
    let record = event["Records"][0].clone();
    let ids = ["first", "second", "third"];
    event["Records"] = ids
        .iter()
        .map(|id| {
            Value::Object({
                let mut record = record.as_object().unwrap().clone();
                record.insert("messageId".into(), (*id).into());
                record
            })
        })
        .collect();
    // Less time than one stalled call's limit (7 s), let alone three.
    let time = Duration::from_secs(4);
    assert!(time < rp_shared::adapters::aws::CALL_TIMEOUT);
    let (address, mut answers) =
        runtime_api::start_timed("cert-timeout-consumer", vec![("batch".into(), event.to_string(), time)])
            .await;
    runtime_api::run_front_door(address, rp_shared::lambda::serve_queue_consumer);

    let started = std::time::Instant::now();
    // The deadline runs from when the event is handed out, after the cold start; the wait
    // allows for a slow one and still ends before one stalled call would give up.
    let wait = time + Duration::from_secs(2);
    assert!(wait < rp_shared::adapters::aws::CALL_TIMEOUT);
    let (answered, answer) =
        tokio::time::timeout(wait, answers.recv()).await.expect("the consumer answered in time").unwrap();
    assert_eq!(answered, "batch");
    let failed: Vec<_> = answer["batchItemFailures"].as_array().expect("a batch response").iter().collect();
    let failed: Vec<_> = failed.iter().map(|f| f["itemIdentifier"].as_str().unwrap()).collect();
    assert_eq!(failed, ids, "the message it ended and the two it did not start: {answer}");
    assert!(started.elapsed() >= Duration::from_millis(3000), "it ran until shortly before the deadline");
}

/// The next answer, which must come within `time`, be to `id` and be a 503 problem of a service
/// unavailable; the problem.
async fn unavailable(
    answers: &mut tokio::sync::mpsc::UnboundedReceiver<(String, Value)>,
    id: &str,
    time: Duration,
) -> Value {
    let (answered, answer) =
        tokio::time::timeout(time, answers.recv()).await.expect("the function answered in time").unwrap();
    assert_eq!(answered, id);
    assert_eq!(answer["statusCode"], 503, "{answer}");
    assert_eq!(answer["headers"]["content-type"], "application/problem+json", "{answer}");
    let problem: Value = serde_json::from_str(answer["body"].as_str().unwrap()).unwrap();
    assert_eq!(problem["status"], 503, "{problem}");
    assert_eq!(problem["errorCode"], rp_shared::http::problem::codes::UNAVAILABLE, "{problem}");
    problem
}

/// The functions' time-out in `infra/template.yaml` (`Globals`; only the sandbox's functions
/// have a longer one).
fn globals_time_out() -> Duration {
    let template =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../infra/template.yaml")).unwrap();
    let globals = template.split_once("\nGlobals:\n").expect("the template has Globals").1;
    let seconds = globals.lines().find_map(|line| line.trim().strip_prefix("Timeout: ")).expect("a Timeout");
    Duration::from_secs(seconds.parse().unwrap())
}
