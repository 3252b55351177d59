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

#[cfg(test)]
mod tests {
    use super::*;

    /// An empty poll waits `idle` before the next: the local server does not spin on an empty
    /// queue. At 100 ms a pause, that is one poll per 100 ms the worker ran, and one more (counted
    /// from the time it ran, so a slow machine does not fail it). The polls are counted by the
    /// round-trip recorder, over the embedded backend the local server runs on.
    /// (Two threads: a worker that spun without pausing would never let a one-thread test go on.)
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_empty_queue_is_polled_once_per_idle_pause() {
        let dir = tempfile::tempdir().unwrap();
        let embedded = crate::backend::embedded(dir.path()).unwrap();
        let (backend, trips) = crate::ports::trips::recorded(&embedded, Duration::ZERO);
        let worker = QueueWorker {
            queue: backend.queue.clone(),
            handler: Arc::new(crate::consumer::Dispatcher::new(backend)),
            visibility: Duration::from_secs(30),
            idle: Duration::from_millis(100),
        };
        let (stop, stopped) = watch::channel(false);
        let started = std::time::Instant::now();
        let running = tokio::spawn(worker.run(stopped));
        tokio::time::sleep(Duration::from_millis(300)).await;
        stop.send(true).unwrap();
        running.await.unwrap();
        let ran = started.elapsed();
        let polls = trips.take().calls.iter().filter(|(_, call)| call == "queue.receive").count();
        assert!(polls >= 1 && polls as u128 <= ran.as_millis() / 100 + 1, "{polls} polls in {ran:?}");
    }
}
