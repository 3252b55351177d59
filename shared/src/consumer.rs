//! Queue messages and their dispatch: one code path behind the SQS consumer function and the
//! local server's queue worker. Handlers are idempotent (delivery is at least once).

use crate::backend::Backend;
use crate::repo::certificates::{Certificates, Expiry, LeaseExpired, DEFAULT_MAX_ATTEMPTS};
use crate::worker::MessageHandler;
use async_trait::async_trait;
use aws_lambda_events::event::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent};
use serde::Deserialize;

/// Every message names its kind; the rest of the body belongs to that kind.
#[derive(Debug, Deserialize)]
struct Envelope {
    kind: String,
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

    /// Ends a certificate request's lease: back to PENDING, or DEAD (and into the dead-letter
    /// queue) when out of attempts. Idempotent.
    async fn lease_expired(&self, body: &str) -> anyhow::Result<()> {
        let expired: LeaseExpired = serde_json::from_str(body)?;
        let now = self.backend.clock.epoch_millis();
        let outcome = Certificates::new(self.backend.store.as_ref())
            .expire_lease(&expired, self.max_attempts, now)
            .await?;
        match outcome {
            Expiry::Requeued => {
                tracing::info!(request_id = %expired.request_id, "lease ended; request re-queued")
            }
            Expiry::Dead => {
                tracing::warn!(request_id = %expired.request_id, "request out of attempts; dead");
                self.backend.queue.dead_letter(body).await?;
            }
            Expiry::Ignored => {}
        }
        Ok(())
    }
}

#[async_trait]
impl MessageHandler for Dispatcher {
    async fn handle(&self, body: &str) -> anyhow::Result<()> {
        let envelope: Envelope = serde_json::from_str(body)?;
        match envelope.kind.as_str() {
            LeaseExpired::KIND => self.lease_expired(body).await,
            // Unknown kinds are retried and then dead-lettered, where an operator sees them.
            other => anyhow::bail!("no handler for message kind '{other}'"),
        }
    }
}

/// Handles an SQS batch and reports the messages that failed, so only they are retried
/// (`ReportBatchItemFailures`).
pub async fn process_batch(handler: &dyn MessageHandler, event: SqsEvent) -> SqsBatchResponse {
    let mut response = SqsBatchResponse::default();
    for record in event.records {
        let id = record.message_id.clone().unwrap_or_default();
        let outcome = match record.body.as_deref() {
            Some(body) => handler.handle(body).await,
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
