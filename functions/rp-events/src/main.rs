//! Lambda function for GET, POST /rp/api/events: the shared router of that path behind `lambda_http`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    rp_shared::lambda::serve(rp_shared::http::events::router, rp_shared::lambda::ClientSet::STORE).await
}
