//! Lambda function for POST /cc/api/apps/{appId}/users/{namedUser}/registration-links: the shared router of that path behind `lambda_http`.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    rp_shared::lambda::serve_endpoint(env!("CARGO_PKG_NAME")).await
}
