//! Lambda function for PUT, DELETE /code-customization/env/{name}: the shared router of that path behind `lambda_http`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    rp_shared::lambda::serve(rp_shared::http::code::env_var_router, rp_shared::lambda::ClientSet::KEYS).await
}
