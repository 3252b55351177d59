//! The Lambda front doors: each function's `main` calls one of these. Clients are built once per
//! cold start and borrowed by every invocation.

use crate::backend::Backend;
use crate::consumer::{process_batch, Dispatcher};
use crate::http::{self, AppState, HttpConfig};
use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use lambda_runtime::{service_fn, LambdaEvent};
use std::sync::Arc;

/// Serves the router of endpoint `name` (the function's package name).
pub async fn serve_endpoint(name: &str) -> Result<(), lambda_http::Error> {
    crate::telemetry::init();
    let backend = Backend::aws_from_env().await?;
    let config = HttpConfig {
        public_base_url: std::env::var("PUBLIC_BASE_URL").unwrap_or_default(),
        ..HttpConfig::default()
    };
    let router = http::function(name, AppState::new(backend, config))
        .ok_or_else(|| format!("no endpoint named '{name}'"))?;
    lambda_http::run(router).await
}

/// Consumes the certificate re-queue (an SQS event source with `ReportBatchItemFailures`).
pub async fn serve_queue_consumer() -> Result<(), lambda_runtime::Error> {
    crate::telemetry::init();
    let backend = Backend::aws_from_env().await?;
    let dispatcher = Arc::new(Dispatcher::new(backend));
    lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| {
        let dispatcher = dispatcher.clone();
        async move {
            Ok::<SqsBatchResponse, lambda_runtime::Error>(
                process_batch(dispatcher.as_ref(), event.payload).await,
            )
        }
    }))
    .await
}
