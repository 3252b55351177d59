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
        poll_batch: env_number("CERT_POLL_BATCH", crate::repo::certificates::DEFAULT_BATCH)?,
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
    let max_attempts = env_number("CERT_MAX_ATTEMPTS", crate::repo::certificates::DEFAULT_MAX_ATTEMPTS)?;
    let dispatcher = Arc::new(Dispatcher::new(backend).with_max_attempts(max_attempts));
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

/// A positive number from the environment, or `default` when unset.
pub fn env_number<T: std::str::FromStr + PartialOrd + Default>(name: &str, default: T) -> Result<T, String> {
    match std::env::var(name) {
        Err(_) => Ok(default),
        Ok(text) => match text.parse::<T>() {
            Ok(n) if n > T::default() => Ok(n),
            _ => Err(format!("{name} must be a positive number, not '{text}'")),
        },
    }
}
