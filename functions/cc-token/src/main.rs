//! Lambda function for DELETE /cc/api/tokens/{tokenId}: the shared router of that path behind `lambda_http`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    rp_shared::lambda::serve(rp_shared::http::cc::token_router, rp_shared::lambda::ClientSet::STORE).await
}
