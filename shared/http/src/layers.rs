//! What every endpoint's router shares, locally and in each Lambda function: problem+json
//! fallbacks (from the route table, not the endpoint table, so that a function links no other
//! endpoint's code), HEAD refused, the body limit, panic catching, the Lambda deadline, request
//! ids and the request span.

use crate::extract::BodyLimit;
use crate::no_route;
use crate::problem::{self, Problem};
use axum::extract::{DefaultBodyLimit, Request};
use axum::http::{Method, Uri};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Router};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::request_id::{MakeRequestId, PropagateRequestIdLayer, RequestId, SetRequestIdLayer};
use tower_http::trace::{DefaultOnResponse, TraceLayer};
use tracing::Level;

/// Adds what every endpoint shares: problem+json fallbacks, body limit, panic catching, the
/// Lambda deadline, request ids and the request span.
pub(crate) fn finish<S: Clone + Send + Sync + 'static>(router: Router<S>, state: S, limit: usize) -> Router {
    router
        .fallback(route_not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::middleware::from_fn(no_head))
        .layer(DefaultBodyLimit::max(limit))
        .layer(Extension(BodyLimit(limit)))
        .layer(CatchPanicLayer::custom(|_: Box<dyn std::any::Any + Send>| {
            Problem::internal(Panicked).into_response()
        }))
        .layer(axum::middleware::from_fn(within_deadline))
        .layer(
            TraceLayer::new_for_http()
                .make_span_with(|req: &Request| {
                    let request_id =
                        req.headers().get("x-request-id").and_then(|v| v.to_str().ok()).unwrap_or_default();
                    tracing::info_span!(
                        "request",
                        request_id,
                        method = %req.method(),
                        path = loggable_path(req.uri().path()),
                        token_id = tracing::field::Empty,
                    )
                })
                .on_request(())
                .on_response(DefaultOnResponse::new().level(Level::INFO)),
        )
        .layer(PropagateRequestIdLayer::x_request_id())
        .layer(SetRequestIdLayer::x_request_id(GatewayRequestId))
        .with_state(state)
}

/// What a request keeps of its invocation's time to send its answer.
const ANSWER_MARGIN: Duration = Duration::from_millis(500);

/// On Lambda, a request still running [`ANSWER_MARGIN`] before its invocation's deadline is
/// ended with a 503 problem. Each AWS call has its own limits, but several in a row, or one
/// after a long code customization (a sandbox function has 25 s, a customization up to 20 s),
/// can outlast the invocation; Lambda would then end it with no answer, and API Gateway would
/// give the client an error that is not a problem document. What the request had written
/// stays written, as when Lambda ends it. Outside Lambda (no invocation context) nothing
/// changes.
async fn within_deadline(request: Request, next: axum::middleware::Next) -> Response {
    use lambda_http::RequestExt as _;
    let deadline = request.lambda_context_ref().map(|context| context.deadline);
    let Some(left) = deadline.map(|deadline| time_left(deadline, SystemTime::now())) else {
        return next.run(request).await;
    };
    match tokio::time::timeout(left, next.run(request)).await {
        Ok(response) => response,
        Err(_) => Problem::of(&problem::UNAVAILABLE)
            .detail("The request ran out of time; try again shortly.")
            .source(OutOfTime)
            .into_response(),
    }
}

/// The time a request (or the queue consumer's batch) may run before an invocation's
/// `deadline` (epoch milliseconds): up to `ANSWER_MARGIN` before it, none once that has passed.
pub fn time_left(deadline: u64, now: SystemTime) -> Duration {
    let deadline = UNIX_EPOCH + Duration::from_millis(deadline);
    deadline.duration_since(now).unwrap_or_default().saturating_sub(ANSWER_MARGIN)
}

#[derive(Debug, thiserror::Error)]
#[error("the request ran until its Lambda invocation's deadline")]
struct OutOfTime;

/// The request id a request without `x-request-id` gets: API Gateway's
/// `requestContext.requestId` on Lambda (so a log line and the gateway's access log meet), a
/// fresh UUID elsewhere.
#[derive(Clone, Copy)]
struct GatewayRequestId;

impl MakeRequestId for GatewayRequestId {
    fn make_request_id<B>(&mut self, request: &axum::http::Request<B>) -> Option<RequestId> {
        use lambda_http::request::RequestContext;
        use lambda_http::RequestExt as _;
        let gateway = request.request_context_ref().and_then(|context| match context {
            RequestContext::ApiGatewayV2(c) => c.request_id.clone(),
            RequestContext::ApiGatewayV1(c) => c.request_id.clone(),
            _ => None,
        });
        let id = gateway.unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        axum::http::HeaderValue::from_str(&id).ok().map(RequestId::new)
    }
}

/// The path as it may be logged: a registration code in it is a live secret.
fn loggable_path(path: &str) -> &str {
    if path.starts_with("/rp/register/") {
        "/rp/register/{code}"
    } else {
        path
    }
}

#[derive(Debug, thiserror::Error)]
#[error("a handler panicked")]
struct Panicked;

/// HEAD is refused as API Gateway leaves it, with no route of its own: to the `no-route`
/// function, which answers 405 (404 where no route has the path). So a HEAD does nothing (the
/// certificate poll and the device's OOB fetch mark what a GET hands out), and the local
/// server answers it as a deployment does.
async fn no_head(request: Request, next: axum::middleware::Next) -> Response {
    if request.method() == Method::HEAD {
        return no_route::refusal(&Method::HEAD, request.uri().path());
    }
    next.run(request).await
}

async fn route_not_found(uri: Uri) -> Response {
    Problem::route_not_found(uri.path()).into_response()
}

/// 405, with `Allow` from the route table, as the `no-route` function answers (axum's own
/// would list HEAD beside GET).
async fn method_not_allowed(method: Method, uri: Uri) -> Response {
    no_route::method_refused(&method, uri.path())
}

#[cfg(test)]
mod tests {
    #[test]
    fn registration_codes_stay_out_of_the_logs() {
        assert_eq!(super::loggable_path("/rp/register/SampleRegistrationCode01"), "/rp/register/{code}");
        assert_eq!(super::loggable_path("/cc/api/apps"), "/cc/api/apps");
    }

    #[test]
    fn a_request_runs_until_shortly_before_its_invocations_deadline() {
        use super::{time_left, ANSWER_MARGIN};
        use std::time::{Duration, UNIX_EPOCH};
        let now = UNIX_EPOCH + Duration::from_millis(1_000_000);
        assert_eq!(time_left(1_010_000, now), Duration::from_secs(10) - ANSWER_MARGIN);
        assert_eq!(time_left(1_000_400, now), Duration::ZERO, "inside the margin");
        assert_eq!(time_left(999_000, now), Duration::ZERO, "past the deadline");
    }

    #[test]
    fn a_request_id_is_api_gateways_own_where_it_gave_one() {
        use lambda_http::aws_lambda_events::apigw::{
            ApiGatewayProxyRequestContext, ApiGatewayV2httpRequestContext,
        };
        use lambda_http::request::RequestContext;
        use lambda_http::RequestExt as _;
        use tower_http::request_id::MakeRequestId as _;
        let id_of = |context: Option<RequestContext>| {
            let request = axum::http::Request::new(());
            let request = match context {
                Some(context) => request.with_request_context(context),
                None => request,
            };
            let id = super::GatewayRequestId.make_request_id(&request).expect("an id");
            id.header_value().to_str().unwrap().to_owned()
        };
        // An HTTP API (payload 2.0, as `infra/` deploys), and a REST API (payload 1.0).
        // Both contexts are `non_exhaustive`: made by default, then given an id.
        let mut v2 = ApiGatewayV2httpRequestContext::default();
        v2.request_id = Some("v2-id".into());
        assert_eq!(id_of(Some(RequestContext::ApiGatewayV2(v2))), "v2-id");
        let mut v1 = ApiGatewayProxyRequestContext::default();
        v1.request_id = Some("v1-id".into());
        assert_eq!(id_of(Some(RequestContext::ApiGatewayV1(v1))), "v1-id");
        // Elsewhere (the local server), a fresh UUID each time.
        let (first, second) = (id_of(None), id_of(None));
        assert!(uuid::Uuid::parse_str(&first).is_ok() && first != second, "{first} {second}");
    }
}
