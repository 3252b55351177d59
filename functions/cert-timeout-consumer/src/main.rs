//! Lambda function for the SQS consumer of the certificate re-queue: reports partial batch failures.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_runtime::Error> {
    rp_shared::lambda::serve_queue_consumer().await
}
