//! Lambda function for GET /content-customization/{id}/versions/{version}: the shared router of that path behind `lambda_http`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    rp_shared::lambda::serve(rp_shared::http::content::version_router, rp_shared::lambda::ClientSet::STORE)
        .await
}
