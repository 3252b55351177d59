//! Lambda function for GET /rp/api/apps/{appId}/jwks.json: the shared router of that path behind `lambda_http`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    rp_shared::lambda::serve(rp_shared::http::code::jwks_router, rp_shared::lambda::ClientSet::KEYS).await
}
