//! A sample event replayed through a function's real Lambda front door (`lambda::serve_stateless`,
//! the `lambda_http` runtime loop, as `/health` runs), against a Lambda Runtime API of our own on loopback: the log
//! lines carry Lambda's request id and X-Ray trace id, the function name and the cold-start flag,
//! and the answer's `x-request-id` is API Gateway's `requestContext.requestId`.
//!
//! In a process of its own (its own test binary): it sets the Lambda environment variables.

use serde_json::Value;
use std::sync::{Arc, Mutex};

use rp_tests::Captured;

mod runtime_api;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replayed_event_logs_lambdas_request_id() {
    let captured = Captured::default();
    let writer = captured.clone();
    // Lambda's environment, with every AWS client pointed at loopback (none is called).
    let own = [("AWS_LAMBDA_FUNCTION_NAME", "health"), ("AWS_LAMBDA_LOG_LEVEL", "DEBUG")];
    for (name, value) in runtime_api::LAMBDA_ENV.into_iter().chain(own) {
        std::env::set_var(name, value);
    }
    rp_shared::telemetry::init_with_writer(move || writer.clone());
    let metrics = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = metrics.clone();
    rp_shared::metrics::set_sink(move |line| sink.lock().unwrap().push(line.to_owned()));

    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../events/health.json");
    let event = std::fs::read_to_string(root).unwrap();
    let events =
        vec![("second-invocation".into(), event.clone()), ("first-invocation".into(), event.clone())];
    let (address, mut answers) = runtime_api::start("health", events).await;
    // The health function's own front door, which builds no AWS client.
    runtime_api::run_front_door(address, || {
        rp_shared::lambda::serve_stateless(rp_shared::http::health::router)
    });

    let mut seen = Vec::new();
    for _ in 0..2 {
        let (id, answer) = tokio::time::timeout(std::time::Duration::from_secs(30), answers.recv())
            .await
            .expect("the function answered")
            .unwrap();
        assert_eq!(answer["statusCode"], 200, "{answer}");
        let request_id = &answer["headers"]["x-request-id"];
        assert_eq!(request_id, "sample-health", "x-request-id is API Gateway's requestContext.requestId");
        seen.push(id);
    }
    assert_eq!(seen, ["first-invocation", "second-invocation"]);
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;

    let text = captured.text();
    let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let of = |id: &str| lines.iter().filter(|l| l["requestId"] == id).cloned().collect::<Vec<_>>();
    let first = of("first-invocation");
    let second = of("second-invocation");
    assert!(!first.is_empty() && !second.is_empty(), "{text}");
    for line in first.iter().chain(&second) {
        assert_eq!(line["function"], "health", "{line}");
        assert!(line["xrayTraceId"].as_str().is_some_and(|t| t.starts_with("Root=1-")), "{line}");
        assert!(line["timestamp"].is_string() && line["level"].is_string(), "{line}");
    }
    assert!(first.iter().all(|l| l["coldStart"] == true), "the first invocation is the cold start");
    assert!(second.iter().all(|l| l["coldStart"] == false), "the second is warm");
    let response =
        first.iter().find(|l| l["request_id"] == "sample-health").expect("the request span's line");
    assert_eq!(response["path"], "/health");
    assert!(lines.iter().any(|l| l["level"] == "DEBUG"), "AWS_LAMBDA_LOG_LEVEL=DEBUG is honoured");
    println!("{}", serde_json::to_string(response).unwrap());
    // One cold start, as an EMF line CloudWatch turns into a metric.
    let metrics: Vec<Value> =
        metrics.lock().unwrap().iter().map(|l| serde_json::from_str(l).unwrap()).collect();
    let cold: Vec<_> = metrics.iter().filter(|m| m["ColdStart"] == 1).collect();
    assert_eq!(cold.len(), 1, "{metrics:?}");
    assert_eq!(cold[0]["Function"], "health");
    assert_eq!(cold[0]["_aws"]["CloudWatchMetrics"][0]["Metrics"][0]["Name"], "ColdStart");
}
