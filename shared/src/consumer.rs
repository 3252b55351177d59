//! Queue messages and their dispatch: one code path behind the SQS consumer function and the
//! local server's queue worker. Handlers are idempotent (delivery is at least once).

use crate::backend::Backend;
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
    #[allow(dead_code)]
    backend: Backend,
}

impl Dispatcher {
    pub fn new(backend: Backend) -> Self {
        Self { backend }
    }
}

#[async_trait]
impl MessageHandler for Dispatcher {
    async fn handle(&self, body: &str) -> anyhow::Result<()> {
        let envelope: Envelope = serde_json::from_str(body)?;
        // No message kinds are produced yet; an unknown kind is retried and then dead-lettered,
        // where an operator can see it.
        anyhow::bail!("no handler for message kind '{}'", envelope.kind)
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
