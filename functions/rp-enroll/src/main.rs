//! Lambda function for POST /rp/wsapi/client/enroll: the shared router of that path behind `lambda_http`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    rp_shared::lambda::serve(rp_shared::http::workstation::enroll_router, rp_shared::lambda::ClientSet::STORE)
        .await
}
