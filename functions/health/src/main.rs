//! Lambda function for GET /health: the shared router of that path behind `lambda_http`. It needs
//! no backing service, so it builds no AWS client and links none.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    rp_shared::lambda::serve_stateless(rp_shared::http::health::router).await
}
