//! The queue consumer loop of the local server: what the SQS event source mapping and the
//! consumer function do on AWS. Messages are handled at least once; a handler error leaves the
//! message for redelivery (and, after the receive limit, the dead-letter queue).

use crate::ports::Queue;
use async_trait::async_trait;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

#[async_trait]
pub trait MessageHandler: Send + Sync {
    /// Handles one message body; must be idempotent.
    async fn handle(&self, body: &str) -> anyhow::Result<()>;
}

pub struct QueueWorker {
    pub queue: Arc<dyn Queue>,
    pub handler: Arc<dyn MessageHandler>,
    /// How long a received message stays hidden while it is handled.
    pub visibility: Duration,
    /// Pause between empty polls.
    pub idle: Duration,
}

impl QueueWorker {
    /// Polls until `stop` turns true, then finishes the batch in hand and returns.
    pub async fn run(self, mut stop: watch::Receiver<bool>) {
        loop {
            if *stop.borrow() {
                return;
            }
            match self.queue.receive(10, self.visibility).await {
                Ok(batch) if !batch.is_empty() => {
                    for message in batch {
                        match self.handler.handle(&message.body).await {
                            Ok(()) => {
                                if let Err(e) = self.queue.ack(&message.receipt).await {
                                    tracing::warn!(message_id = %message.message_id, error = %e, "ack failed; the message will come again");
                                }
                            }
                            Err(e) => tracing::warn!(
                                message_id = %message.message_id,
                                receive_count = message.receive_count,
                                error = %e,
                                "message handling failed; it will be redelivered"
                            ),
                        }
                    }
                    continue;
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "queue receive failed"),
            }
            tokio::select! {
                _ = tokio::time::sleep(self.idle) => {}
                _ = stop.changed() => {}
            }
        }
    }
}
