//! Lambda function for API Gateway's `$default` route: a request no route takes gets the problem
//! document the local server answers it with (405 with `Allow`, or 404), not API Gateway's own
//! 404. It needs no backing service, so it builds no AWS client and links none.

use rp_shared::http::no_route::router;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    rp_shared::lambda::serve_stateless(router).await
}
