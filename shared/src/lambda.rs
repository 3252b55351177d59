//! The Lambda front doors: each function's `main` calls one of these. Configuration is read and
//! clients are built at most once per cold start (the queue's and the keys' at their first
//! call), then borrowed by every invocation. A function builds, and links, only the clients its
//! `main` names in a [`ClientSet`].
//!
//! Every function's `main` runs these on a current-thread Tokio runtime
//! (`#[tokio::main(flavor = "current_thread")]`; a test holds every `main` to it). A Lambda
//! instance handles one event at a time, so worker threads would only add their start to the
//! cold start and a hand-off between threads to every store call: side by side on the
//! cold-start benchmark, the current-thread runtime took 0.2-0.6 ms off init and up to a quarter
//! off the first invocation (docs/performance.md). What runs off the runtime still works: a
//! code customization runs on a thread of its own, and its `jwtCreateSignedJwt` calls KMS
//! through the runtime's handle while the runtime's thread waits for the run, driving that
//! call's I/O (`tests/tests/lambda_kms.rs` runs it through this front door on moto).

pub use crate::adapters::aws::ClientSet;
use crate::backend::{self, Backend};
use crate::config::{BackendKind, Config};
use crate::consumer::{process_batch, Dispatcher};
use crate::http::{self, AppState, HttpConfig};
use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use axum::Router;
use lambda_runtime::{service_fn, LambdaEvent};
use rp_app::LAMBDA_MAX_WAIT_SECS;
use std::sync::Arc;

/// What every cold start does first: logging, and the cold-start metric.
fn begin_cold_start() {
    crate::telemetry::init();
    crate::metrics::count(crate::metrics::Metric::ColdStart, 1, None);
}

/// The configuration and backend of a cold start; fails naming every bad variable.
async fn cold_start(clients: ClientSet) -> Result<(Config, Backend), lambda_runtime::Error> {
    begin_cold_start();
    let config = Config::from_env(BackendKind::Aws)?;
    let aws = config.aws.as_ref().expect("the AWS configuration is read for BackendKind::Aws");
    let backend = backend::aws_from_config(aws, clients).await?;
    Ok((config, backend))
}

/// Serves one endpoint's router over the clients it uses: each function's `main` names both
/// (`http::ENDPOINTS` maps the function's name to the same router and to the services of the
/// same name), so its binary links only that endpoint's code and those clients.
pub async fn serve(
    router: fn(&AppState) -> Router<AppState>,
    clients: ClientSet,
) -> Result<(), lambda_http::Error> {
    let (config, backend) = cold_start(clients).await?;
    lambda_http::run(http::single(router, AppState::new(backend, function_settings(&config)))).await
}

/// What a function's router runs with: the configuration's settings, links to the host a request
/// came to where `PUBLIC_BASE_URL` is unset, and the shorter long-poll of a function, whose
/// seconds are paid.
fn function_settings(config: &Config) -> HttpConfig {
    HttpConfig { max_wait_secs: LAMBDA_MAX_WAIT_SECS, ..config.http("") }
}

/// Serves a router that needs no backing service (`/health`): the cold start reads no AWS
/// configuration and builds no client, so the binary links none.
pub async fn serve_stateless(router: fn(&()) -> Router<()>) -> Result<(), lambda_http::Error> {
    begin_cold_start();
    lambda_http::run(http::stateless(router, &http::HttpConfig::default())).await
}

/// Consumes the certificate re-queue (an SQS event source with `ReportBatchItemFailures`): it
/// ends leases in the store and dead-letters through SQS, and signs nothing. Each batch is
/// answered before its invocation's deadline ([`process_batch`]).
pub async fn serve_queue_consumer() -> Result<(), lambda_runtime::Error> {
    let (config, backend) = cold_start(ClientSet::QUEUE).await?;
    let dispatcher = Arc::new(Dispatcher::new(backend).with_max_attempts(config.max_attempts));
    lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| {
        let dispatcher = dispatcher.clone();
        let left = http::time_left(event.context.deadline, std::time::SystemTime::now());
        let deadline = tokio::time::Instant::now() + left;
        async move {
            Ok::<SqsBatchResponse, lambda_runtime::Error>(
                process_batch(dispatcher.as_ref(), event.payload, Some(deadline)).await,
            )
        }
    }))
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_function_long_polls_for_five_seconds_at_most_and_links_to_the_requests_host() {
        let config = Config::from_lookup(|_| None, BackendKind::Embedded).unwrap();
        let settings = function_settings(&config);
        assert_eq!((settings.max_wait_secs, settings.public_base_url.as_str()), (LAMBDA_MAX_WAIT_SECS, ""));
        assert_eq!(LAMBDA_MAX_WAIT_SECS, 5, "as docs/api/oob.md states");
    }
}
