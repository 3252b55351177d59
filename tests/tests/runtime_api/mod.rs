//! A Lambda Runtime API of our own on loopback, for tests that run a function's real front door:
//! it hands out queued events one by one (the last pushed first), then makes the runtime wait,
//! and passes on every answer (`response`, or `error` as `{"invocationError": ...}`).

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde_json::Value;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;

/// Lambda's environment for a function under test, with every AWS client pointed at a closed
/// loopback port (none is called); the function's name, the Runtime API's address and the log
/// level are added by each test.
pub const LAMBDA_ENV: [(&str, &str); 10] = [
    ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256"),
    ("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST"),
    ("AWS_REGION", "eu-west-1"),
    ("AWS_ACCESS_KEY_ID", "test"),
    ("AWS_SECRET_ACCESS_KEY", "test"),
    ("AWS_EC2_METADATA_DISABLED", "true"),
    ("AWS_ENDPOINT_URL", "http://127.0.0.1:9"),
    ("TABLE_NAME", "rp"),
    ("QUEUE_URL", "http://127.0.0.1:9/000000000000/rp"),
    ("KMS_ENVELOPE_KEY_ID", "envelope"),
];

/// The time an invocation has, unless a test gives its event another.
pub const INVOCATION_TIME: Duration = Duration::from_secs(30);

#[derive(Clone)]
struct Api {
    events: Arc<Mutex<Vec<(String, String, Duration)>>>,
    answers: mpsc::UnboundedSender<(String, Value)>,
    function: &'static str,
}

async fn next(State(api): State<Api>) -> Response {
    let event = api.events.lock().unwrap().pop();
    let Some((id, body, time)) = event else {
        return std::future::pending().await;
    };
    let deadline = (std::time::SystemTime::now() + time)
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
        .to_string();
    let mut headers = HeaderMap::new();
    headers.insert("lambda-runtime-aws-request-id", id.parse().unwrap());
    headers.insert("lambda-runtime-deadline-ms", deadline.parse().unwrap());
    let arn = format!("arn:aws:lambda:eu-west-1:123456789012:function:{}", api.function);
    headers.insert("lambda-runtime-invoked-function-arn", arn.parse().unwrap());
    headers.insert(
        "lambda-runtime-trace-id",
        format!("Root=1-6740a0c0-{id};Parent=53995c3f42cd8ad8;Sampled=1").parse().unwrap(),
    );
    (headers, body).into_response()
}

async fn response(State(api): State<Api>, Path(id): Path<String>, body: String) -> &'static str {
    let _ = api.answers.send((id, serde_json::from_str(&body).unwrap_or(Value::String(body))));
    "{}"
}

async fn error(State(api): State<Api>, Path(id): Path<String>, body: String) -> &'static str {
    let _ = api.answers.send((id, serde_json::json!({ "invocationError": body })));
    "{}"
}

/// Serves `events` (`(request id, event)`, handed out last first) to function `function`, each
/// with [`INVOCATION_TIME`]; returns the address for `AWS_LAMBDA_RUNTIME_API` and the answers,
/// `(request id, answer)`.
#[allow(dead_code)] // `lambda_stalled` gives its events their own times.
pub async fn start(
    function: &'static str,
    events: Vec<(String, String)>,
) -> (SocketAddr, mpsc::UnboundedReceiver<(String, Value)>) {
    start_timed(function, events.into_iter().map(|(id, body)| (id, body, INVOCATION_TIME)).collect()).await
}

/// [`start`], with each event's time to its deadline: `(request id, event, time)`.
pub async fn start_timed(
    function: &'static str,
    events: Vec<(String, String, Duration)>,
) -> (SocketAddr, mpsc::UnboundedReceiver<(String, Value)>) {
    let (tx, answers) = mpsc::unbounded_channel();
    let api = Api { events: Arc::new(Mutex::new(events)), answers: tx, function };
    let app = Router::new()
        .route("/2018-06-01/runtime/invocation/next", get(next))
        .route("/2018-06-01/runtime/invocation/{id}/response", post(response))
        .route("/2018-06-01/runtime/invocation/{id}/error", post(error))
        .with_state(api);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (address, answers)
}

/// Runs a function's real front door (`lambda::serve`, `serve_stateless` or
/// `serve_queue_consumer`, as `front_door` calls it) against the Runtime API at `address`, as its
/// `main` does: on a current-thread runtime, here on a thread of its own (the front door's future
/// is not `Send`). It ends when the test does and the Runtime API goes away.
#[allow(dead_code)] // `release_panic` starts its function as a process of its own instead.
pub fn run_front_door<F: Future + 'static>(
    address: SocketAddr,
    front_door: impl FnOnce() -> F + Send + 'static,
) {
    std::env::set_var("AWS_LAMBDA_RUNTIME_API", address.to_string());
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(front_door());
    });
}
