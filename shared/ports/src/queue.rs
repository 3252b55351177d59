//! The queue port: delayed delivery and at-least-once redelivery, as SQS provides.
//!
//! A message sent with a delay becomes visible after it. A received message stays invisible for
//! the visibility timeout; unless it is acknowledged by then it is delivered again, and after
//! `max_receive_count` deliveries it moves to the dead-letter queue instead.

use async_trait::async_trait;
use std::time::Duration;

pub use rp_domain::boundary::QueueError;

/// Most messages one receive returns, and the longest delay, as in SQS.
pub const MAX_RECEIVE_BATCH: usize = 10;
pub const MAX_DELAY: Duration = Duration::from_secs(900);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceivedMessage {
    pub message_id: String,
    pub body: String,
    /// Handle for [`Queue::ack`]; valid only for this delivery.
    pub receipt: String,
    /// How many times the message has been delivered, this time included.
    pub receive_count: u32,
}

#[async_trait]
pub trait Queue: Send + Sync {
    /// Enqueues `body`, visible after `delay` (at most [`MAX_DELAY`]). Returns the message id.
    async fn send(&self, body: &str, delay: Duration) -> Result<String, QueueError>;

    /// Up to `max` visible messages, each hidden for `visibility` after delivery.
    async fn receive(&self, max: usize, visibility: Duration) -> Result<Vec<ReceivedMessage>, QueueError>;

    /// Removes a delivered message for good. A stale receipt (the message was delivered again
    /// since) is ignored, as SQS does.
    async fn ack(&self, receipt: &str) -> Result<(), QueueError>;

    /// Enqueues several messages; the SQS adapter sends them ten to a call. A delay past
    /// [`MAX_DELAY`] refuses the whole batch before any of it is sent.
    async fn send_batch(&self, messages: &[(String, Duration)]) -> Result<Vec<String>, QueueError> {
        messages.iter().try_for_each(|(_, delay)| check_delay(*delay))?;
        let mut ids = Vec::with_capacity(messages.len());
        for (body, delay) in messages {
            ids.push(self.send(body, *delay).await?);
        }
        Ok(ids)
    }

    /// Puts a message straight into the dead-letter queue (a consumer that gives up on it).
    async fn dead_letter(&self, body: &str) -> Result<(), QueueError>;

    /// Messages moved to the dead-letter queue, oldest first (for operators and tests).
    async fn dead_letters(&self, max: usize) -> Result<Vec<ReceivedMessage>, QueueError>;
}

/// A delay past [`MAX_DELAY`] refused as SQS refuses it.
pub fn check_delay(delay: Duration) -> Result<(), QueueError> {
    if delay > MAX_DELAY {
        return Err(QueueError::Invalid(format!("delay is at most {}s", MAX_DELAY.as_secs())));
    }
    Ok(())
}
