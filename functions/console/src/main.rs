//! Lambda function for GET, POST /console, /console/{proxy+}: the shared router of that path behind `lambda_http`.
//! It builds the clients of the services its endpoint declares, and links only those. Written from the endpoint table (`rp_shared::http::ENDPOINTS`).

use rp_shared::http::console::router;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    rp_shared::lambda::serve(router, rp_shared::lambda::ClientSet::KEYS_PUSH).await
}
