//! Lambda function for GET /cc/api/apps/{appId}/users/{namedUser}/devices: the shared router of that path behind `lambda_http`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    rp_shared::lambda::serve(
        rp_shared::http::registration::user_devices_router,
        rp_shared::lambda::ClientSet::STORE,
    )
    .await
}
