//! Lambda function for GET /problems/{slug}: the shared router of that path behind `lambda_http`.
//! It needs no backing service, so it builds no AWS client and links none. Written from the endpoint table (`rp_shared::http::ENDPOINTS`).

use rp_shared::http::problems::router;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    rp_shared::lambda::serve_stateless(router).await
}
