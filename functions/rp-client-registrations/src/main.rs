//! Lambda function for POST /rp/versioned/client/registrations: the shared router of that path behind `lambda_http`.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    rp_shared::lambda::serve_endpoint(env!("CARGO_PKG_NAME")).await
}
