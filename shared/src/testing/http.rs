//! Drives a router in-process, as API Gateway or the local server would.

use axum::body::Body;
use axum::http::{header, HeaderMap, Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt;
use serde_json::Value;
use tower::ServiceExt;

#[derive(Clone)]
pub struct TestClient {
    router: Router,
}

#[derive(Debug)]
pub struct TestResponse {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: bytes::Bytes,
}

impl TestResponse {
    /// The body as JSON (`Value::Null` when empty).
    pub fn json(&self) -> Value {
        if self.body.is_empty() {
            return Value::Null;
        }
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// Asserts a problem+json answer with `status` and `error_code`, and returns its body.
    #[track_caller]
    pub fn problem(&self, status: u16, error_code: u32) -> Value {
        let body = self.json();
        assert_eq!(self.status.as_u16(), status, "{body}");
        assert_eq!(self.header("content-type"), Some("application/problem+json"), "{body}");
        assert_eq!(body["status"], status, "{body}");
        assert_eq!(body["errorCode"], error_code, "{body}");
        let detail = body["detail"].as_str().unwrap_or_default();
        assert!(detail.contains("(exceptionId: "), "{body}");
        let slug = body["type"].as_str().unwrap_or_default().strip_prefix("/problems/");
        let described = slug.is_some_and(|slug| !crate::http::problems::rows_of(slug).is_empty());
        assert!(described, "`type` is a /problems/ page that describes it: {body}");
        assert!(body["title"].is_string(), "{body}");
        body
    }
}

impl TestClient {
    pub fn new(router: Router) -> Self {
        Self { router }
    }

    pub async fn request(&self, request: Request<Body>) -> TestResponse {
        let (method, path) = (request.method().clone(), request.uri().path().to_owned());
        let response = super::iam::within(&method, path, self.router.clone().oneshot(request))
            .await
            .expect("routers are infallible");
        let (parts, body) = response.into_parts();
        let body = body.collect().await.expect("body collects").to_bytes();
        TestResponse { status: parts.status, headers: parts.headers, body }
    }

    /// An API Gateway event (a sample of `events/`, say), parsed as the Lambda runtime parses it.
    pub async fn event(&self, event: &str) -> TestResponse {
        let request = lambda_http::request::from_str(event).expect("an API Gateway event");
        self.request(request.map(|body| Body::from(body.to_vec()))).await
    }

    /// A request with an optional bearer token and an optional JSON body.
    pub async fn send(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> TestResponse {
        self.send_with(method, path, token, &[], body).await
    }

    /// [`send`](Self::send) with extra headers.
    pub async fn send_with(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        headers: &[(&str, &str)],
        body: Option<Value>,
    ) -> TestResponse {
        let (content_type, body) = match body {
            Some(json) => (Some("application/json"), Body::from(json.to_string())),
            None => (None, Body::empty()),
        };
        self.send_raw_with(method, path, token, headers, content_type, body).await
    }

    /// A request with a raw body and content type, for malformed-input tests.
    pub async fn send_raw(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        content_type: Option<&str>,
        body: impl Into<Body>,
    ) -> TestResponse {
        self.send_raw_with(method, path, token, &[], content_type, body).await
    }

    /// [`send_raw`](Self::send_raw) with extra headers.
    pub async fn send_raw_with(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        headers: &[(&str, &str)],
        content_type: Option<&str>,
        body: impl Into<Body>,
    ) -> TestResponse {
        let mut builder = Request::builder().method(method).uri(path);
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        if let Some(token) = token {
            builder = builder.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        if let Some(content_type) = content_type {
            builder = builder.header(header::CONTENT_TYPE, content_type);
        }
        self.request(builder.body(body.into()).expect("a valid request")).await
    }
}

/// Serves `router` on a free port of 127.0.0.1 until the returned handle is dropped or aborted;
/// returns the base URL.
pub async fn serve(router: Router) -> (String, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await.expect("a free loopback port");
    let address = listener.local_addr().expect("a bound address");
    let handle = tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    (format!("http://{address}"), handle)
}
