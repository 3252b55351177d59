//! The tenant's rate limit at the HTTP edge: the gate a router goes behind, the handler's counted
//! state, the `X-RateLimit-*` headers and the 429.

use crate::errors;
use crate::extract::Tenant;
use crate::problem::Problem;
use axum::extract::{FromRequestParts, Request, State};
use axum::http::{request::Parts, HeaderMap, HeaderValue};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::Router;
use rp_app::{AppState, HasClock};
use rp_domain::apps::RateLimit;
use rp_ports::held::{Gate, Pass};
use rp_repo::ratelimit::Decision;

/// `router` behind the tenant's rate limit, counted under `scope`.
pub fn gated_as(router: Router<AppState>, state: &AppState, scope: &'static str) -> Router<AppState> {
    router.route_layer(middleware::from_fn_with_state((state.clone(), scope), rate_limit_gate))
}

/// Resolves the tenant, counts the request against its budget and stamps the headers. The
/// handler runs beside the count: its reads go at once, while its store and key service
/// ([`Counted`]) hold every write and every key call until the count has allowed the request. A
/// refused request's answer is dropped for the 429 (or the 503 of a count that failed), having
/// changed nothing.
async fn rate_limit_gate(
    State((state, scope)): State<(AppState, &'static str)>,
    request: Request,
    next: Next,
) -> Response {
    let (mut parts, body) = request.into_parts();
    let now = state.clock().epoch_secs();
    // Refused before a tenant is known (401, 403, a bad X-Tenant-Id): nothing is counted.
    let tenant = match Tenant::from_request_parts(&mut parts, &state).await {
        Ok(tenant) => tenant,
        Err(problem) => return uncounted(problem, &RateLimit::default(), now),
    };
    let rule = &tenant.app.rate_limit;
    let (gate, pass) = Gate::new();
    parts.extensions.insert(Counted(state.held(&pass), pass));
    let count = async {
        let decision = rp_app::count_request(&state, tenant.id(), scope, rule, now).await;
        gate.open(decision.as_ref().is_ok_and(|d| d.allowed));
        decision
    };
    let (decision, response) = tokio::join!(count, next.run(Request::from_parts(parts, body)));
    let decision = match decision {
        Ok(decision) => decision,
        // The counter cannot be read (503): nothing is counted either.
        Err(e) => return uncounted(Problem::from(e), rule, now),
    };
    let mut response =
        if decision.allowed { response } else { errors::over_limit(rule, &decision, now).into_response() };
    stamp(response.headers_mut(), &decision);
    response
}

/// The answer of a request refused before it was counted: the headers show `rule`'s budget
/// untouched.
fn uncounted(problem: Problem, rule: &RateLimit, now: i64) -> Response {
    let mut response = problem.into_response();
    let untouched =
        Decision { allowed: true, limit: rule.limit, remaining: rule.limit, reset: rule.window(now).1 };
    stamp(response.headers_mut(), &untouched);
    response
}

/// The app's state as a handler behind the rate limit ([`gated_as`]) takes it: its store holds
/// every write, and its key service every call, until the tenant's count has allowed the
/// request (reads go at once). A handler whose work is costly without any write (a test run)
/// waits for the [`Pass`] itself. Outside [`gated_as`] it is a 500, never an ungated state.
#[derive(Clone)]
pub struct Counted(pub AppState, pub Pass);

impl FromRequestParts<AppState> for Counted {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, _state: &AppState) -> Result<Self, Problem> {
        parts.extensions.get::<Counted>().cloned().ok_or_else(|| {
            Problem::internal(std::io::Error::other(
                "the handler takes Counted but is not behind the rate limit",
            ))
        })
    }
}

pub fn stamp(headers: &mut HeaderMap, decision: &Decision) {
    headers.insert("x-ratelimit-limit", HeaderValue::from(decision.limit));
    headers.insert("x-ratelimit-remaining", HeaderValue::from(decision.remaining));
    headers.insert("x-ratelimit-reset", HeaderValue::from(decision.reset));
}
