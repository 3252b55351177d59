//! Queue messages and their dispatch: one code path behind the SQS consumer function and the
//! local server's queue worker. Handlers are idempotent (delivery is at least once).

use crate::backend::Backend;
use crate::domain::certificates::{CertError, Expiry, DEFAULT_MAX_ATTEMPTS};
use crate::domain::messages::{LeaseRef, QueueMessage};
use crate::ports::retry_on_conflict;
use crate::repo::certificates::Certificates;
use crate::worker::MessageHandler;
use async_trait::async_trait;
use aws_lambda_events::event::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent};

/// What handling an expired lease did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseOutcome {
    Requeued,
    /// The request died of it now.
    Dead,
    /// The request had died of it already (its dead letter is sent again).
    AlreadyDead,
    Ignored,
}

/// Dispatches a message to the handler of its kind.
pub struct Dispatcher {
    backend: Backend,
    /// Leases a certificate request gets before it is DEAD.
    max_attempts: u32,
}

impl Dispatcher {
    pub fn new(backend: Backend) -> Self {
        Self { backend, max_attempts: DEFAULT_MAX_ATTEMPTS }
    }

    pub fn with_max_attempts(mut self, max_attempts: u32) -> Self {
        self.max_attempts = max_attempts.max(1);
        self
    }

    /// Ends a certificate request's lease if it is still current: back to PENDING, or DEAD
    /// when out of attempts. Idempotent.
    pub async fn lease_expired(&self, request_id: &str, lease_id: &str) -> Result<LeaseOutcome, CertError> {
        let certs = Certificates::new(self.backend.store.as_ref());
        retry_on_conflict(|| async {
            let Some((request, version)) = certs.request(request_id).await? else {
                return Ok(LeaseOutcome::Ignored);
            };
            let now = self.backend.clock.now_millis();
            let expiry = request.expire(lease_id, self.max_attempts, now);
            certs.persist_expiry(&expiry, version, now).await?;
            Ok(match expiry {
                Expiry::Requeued(_) => {
                    crate::metrics::count(crate::metrics::Metric::Requeued, 1, None);
                    LeaseOutcome::Requeued
                }
                Expiry::Dead(..) => {
                    crate::metrics::count(crate::metrics::Metric::DeadRequests, 1, None);
                    LeaseOutcome::Dead
                }
                Expiry::AlreadyDead => LeaseOutcome::AlreadyDead,
                Expiry::Ignored => LeaseOutcome::Ignored,
            })
        })
        .await
    }
}

/// How many of a message's leases are ended at once.
const LEASES_IN_FLIGHT: usize = 16;

#[async_trait]
impl MessageHandler for Dispatcher {
    /// Ends each lease the message names (16 at a time). If any fails, the message fails and is
    /// delivered again: the leases already ended are then ignored.
    async fn handle(&self, body: &str) -> anyhow::Result<()> {
        use futures_util::stream::{self, StreamExt};
        // An unparsable message is retried and then dead-lettered, where an operator sees it.
        let leases = QueueMessage::parse(body)?.into_leases();
        let total = leases.len();
        let failures: Vec<anyhow::Error> = stream::iter(leases)
            .map(|lease| async move { self.end_lease(&lease).await.err() })
            .buffer_unordered(LEASES_IN_FLIGHT)
            .filter_map(|failure| async move { failure })
            .collect()
            .await;
        let failed = failures.len();
        match failures.into_iter().next() {
            None => Ok(()),
            Some(first) => Err(first.context(format!("ending {total} leases: {failed} failed, the first"))),
        }
    }
}

impl Dispatcher {
    /// Ends one lease of a message; the lease a request died of goes to the dead-letter queue,
    /// at least once: if sending it fails, the message fails, and its next delivery finds the
    /// request dead of this lease and sends it again.
    async fn end_lease(&self, lease: &LeaseRef) -> anyhow::Result<()> {
        let request_id = &lease.request_id;
        match self.lease_expired(request_id, &lease.lease_id).await? {
            LeaseOutcome::Requeued => {
                tracing::info!(%request_id, "lease ended; request re-queued");
                return Ok(());
            }
            LeaseOutcome::Ignored => return Ok(()),
            LeaseOutcome::Dead => tracing::warn!(%request_id, "request out of attempts; dead"),
            LeaseOutcome::AlreadyDead => {
                tracing::info!(%request_id, "request dead of this lease; dead letter again")
            }
        }
        self.backend.queue.dead_letter(&QueueMessage::single(lease).body()).await?;
        Ok(())
    }
}

/// Handles an SQS batch and reports the messages that failed, so only they are retried
/// (`ReportBatchItemFailures`). With a `deadline` (the invocation's, less the time to answer), a
/// message still running then is ended and the ones not started are not started: all of them
/// are reported failed, and the answer goes out in time. Otherwise Lambda would end the
/// invocation and SQS retry the whole batch, counting a receive against each message (five of
/// them send it to the dead-letter queue) even where it was handled.
pub async fn process_batch(
    handler: &dyn MessageHandler,
    event: SqsEvent,
    deadline: Option<tokio::time::Instant>,
) -> SqsBatchResponse {
    let mut response = SqsBatchResponse::default();
    for record in event.records {
        let id = record.message_id.clone().unwrap_or_default();
        let outcome = match record.body.as_deref() {
            Some(body) => before(deadline, handler.handle(body)).await,
            None => Err(anyhow::anyhow!("the message has no body")),
        };
        if let Err(e) = outcome {
            tracing::warn!(message_id = %id, error = %e, "message failed; SQS will retry it");
            let mut failure = BatchItemFailure::default();
            failure.item_identifier = id;
            response.batch_item_failures.push(failure);
        }
    }
    response
}

/// Runs `handling` (not yet started) to its end, or with a `deadline` until then: not started
/// once it has passed, ended when it comes.
async fn before(
    deadline: Option<tokio::time::Instant>,
    handling: impl std::future::Future<Output = anyhow::Result<()>>,
) -> anyhow::Result<()> {
    let Some(deadline) = deadline else { return handling.await };
    if tokio::time::Instant::now() >= deadline {
        anyhow::bail!("not started: the invocation's deadline is near");
    }
    let ended = |_| Err(anyhow::anyhow!("ended at the invocation's deadline"));
    tokio::time::timeout_at(deadline, handling).await.unwrap_or_else(ended)
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_lambda_events::event::sqs::SqsMessage;
    use std::time::Duration;

    /// Handles `ok` at once, fails `bad`, and never finishes `hang`.
    struct Scripted;

    #[async_trait]
    impl MessageHandler for Scripted {
        async fn handle(&self, body: &str) -> anyhow::Result<()> {
            match body {
                "ok" => Ok(()),
                "hang" => std::future::pending().await,
                other => Err(anyhow::anyhow!("{other}")),
            }
        }
    }

    fn batch(bodies: &[&str]) -> SqsEvent {
        let mut event = SqsEvent::default();
        for (i, body) in bodies.iter().enumerate() {
            let mut record = SqsMessage::default();
            record.message_id = Some(format!("m{i}"));
            record.body = Some((*body).to_owned());
            event.records.push(record);
        }
        event
    }

    fn failed(response: &SqsBatchResponse) -> Vec<&str> {
        response.batch_item_failures.iter().map(|f| f.item_identifier.as_str()).collect()
    }

    #[tokio::test(start_paused = true)]
    async fn a_batch_reports_only_its_failed_messages() {
        let response = process_batch(&Scripted, batch(&["ok", "bad", "ok"]), None).await;
        assert_eq!(failed(&response), ["m1"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_batch_is_answered_at_its_deadline_with_what_was_not_done() {
        let started = tokio::time::Instant::now();
        let deadline = started + Duration::from_secs(5);
        let response = process_batch(&Scripted, batch(&["ok", "hang", "ok", "bad"]), Some(deadline)).await;
        assert_eq!(started.elapsed(), Duration::from_secs(5), "answered at the deadline");
        assert_eq!(failed(&response), ["m1", "m2", "m3"], "the one it ended and the ones it did not start");
    }
}
