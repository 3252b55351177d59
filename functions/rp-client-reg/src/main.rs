//! Lambda function for DELETE, GET, PATCH, POST /rp/api/client/reg: the shared router of that path behind `lambda_http`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    rp_shared::lambda::serve(
        rp_shared::http::workstation::client_reg_router,
        rp_shared::lambda::ClientSet::KEYS,
    )
    .await
}
