//! Requests that no route takes. Locally, the one router answers them with its fallbacks. On
//! AWS, API Gateway's `$default` route sends them to the `no-route` function, which answers
//! from the route table as those fallbacks do: 405 with `Allow` where a route has the path
//! but not the method (HEAD included: no route takes it), 404 where none has the path. Without
//! it, API Gateway itself would answer 404 `{"message":"Not Found"}`, which is not a problem
//! document.

use crate::problem::Problem;
use crate::routes::{route_of, Route};
use axum::http::{header, HeaderValue, Method, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use axum::Router;

/// Needs no state: the function serves it without a backend, as `/health`.
pub fn router<S: Clone + Send + Sync + 'static>(_state: &S) -> Router<S> {
    Router::new().route("/", any(answer)).route("/{*rest}", any(answer))
}

async fn answer(method: Method, uri: Uri) -> Response {
    refusal(&method, uri.path())
}

/// The answer to `method` at `path` where no route takes it: 405 naming the methods of the
/// route that has the path, or 404.
pub fn refusal(method: &Method, path: &str) -> Response {
    match route_of(path) {
        Some(route) => refused(method, path, Some(route)),
        None => Problem::route_not_found(path).into_response(),
    }
}

/// 405 for `method` at `path`, with `Allow` naming the methods of the route that has the path
/// where the route table has one (the local server's own pages, such as `/openapi.json`,
/// are not in it).
pub fn method_refused(method: &Method, path: &str) -> Response {
    refused(method, path, route_of(path))
}

fn refused(method: &Method, path: &str, route: Option<&Route>) -> Response {
    let mut response = Problem::method_not_allowed(method.as_str(), path).into_response();
    let allow = route.and_then(|r| HeaderValue::from_str(&r.methods.join(",")).ok());
    if let Some(allow) = allow {
        response.headers_mut().insert(header::ALLOW, allow);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::StatusCode;

    fn allow(response: &Response) -> Option<&str> {
        response.headers().get(header::ALLOW).map(|v| v.to_str().unwrap())
    }

    #[test]
    fn a_known_path_names_its_methods_and_an_unknown_one_is_not_found() {
        let wrong = refusal(&Method::PUT, "/cc/api/apps");
        assert_eq!((wrong.status(), allow(&wrong)), (StatusCode::METHOD_NOT_ALLOWED, Some("GET,POST")));
        let head = refusal(&Method::HEAD, "/health");
        assert_eq!((head.status(), allow(&head)), (StatusCode::METHOD_NOT_ALLOWED, Some("GET")));
        let page = refusal(&Method::DELETE, "/console/apps/demo");
        assert_eq!(page.status(), StatusCode::METHOD_NOT_ALLOWED, "the console's greedy path");
        for unknown in ["/", "/nowhere", "/cc/api/apps/demo/nowhere", "/cc/api//workstation"] {
            let missing = refusal(&Method::GET, unknown);
            assert_eq!((missing.status(), allow(&missing)), (StatusCode::NOT_FOUND, None), "{unknown}");
        }
    }
}
