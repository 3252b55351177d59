//! Lambda function for GET /rp/versioned/device/oob/requests: the shared router of that path behind `lambda_http`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    rp_shared::lambda::serve(rp_shared::http::oob::device_requests_router, rp_shared::lambda::ClientSet::KEYS)
        .await
}
