//! The SQS adapter of the queue port. The dead-letter queue and `maxReceiveCount` are the queue's
//! redrive policy (set in `infra/template.yaml`), so SQS itself moves a message that keeps failing.

use super::lazy::LazyClient;
use async_trait::async_trait;
use aws_sdk_sqs::types::MessageSystemAttributeName;
use aws_sdk_sqs::Client;
use rp_ports::queue::*;
use std::time::Duration;

/// How many times a batch's messages that SQS failed on its own side are sent.
const SEND_ATTEMPTS: usize = 4;

#[derive(Clone)]
pub struct SqsQueue {
    client: LazyClient<Client>,
    queue_url: String,
    dead_letter_url: Option<String>,
}

impl SqsQueue {
    /// One `SendMessageBatch` of at most ten messages; their ids, in order. SQS answers each
    /// entry on its own: one refused as the sender's fault fails the batch (as invalid); ones it
    /// failed on its side are sent again, alone, after a jittered pause, up to
    /// [`SEND_ATTEMPTS`] sends (then the queue is unavailable).
    async fn send_ten(&self, chunk: &[(String, Duration)]) -> Result<Vec<String>, QueueError> {
        let mut entries = Vec::with_capacity(chunk.len());
        for (i, (body, delay)) in chunk.iter().enumerate() {
            let entry = aws_sdk_sqs::types::SendMessageBatchRequestEntry::builder()
                .id(i.to_string())
                .message_body(body)
                .delay_seconds(delay.as_secs() as i32)
                .build()
                .map_err(QueueError::unavailable)?;
            entries.push(entry);
        }
        let mut ids: Vec<Option<String>> = vec![None; chunk.len()];
        for tries in 1.. {
            let out = self
                .client
                .send_message_batch()
                .queue_url(&self.queue_url)
                .set_entries(Some(entries.clone()))
                .send()
                .await
                .map_err(QueueError::unavailable)?;
            for sent in out.successful {
                if let Some(slot) = sent.id.parse::<usize>().ok().and_then(|i| ids.get_mut(i)) {
                    *slot = Some(sent.message_id);
                }
            }
            if let Some(refused) = out.failed.iter().find(|f| f.sender_fault) {
                return Err(QueueError::Invalid(format!("a batched message was refused: {}", refused.code)));
            }
            let Some(first) = out.failed.first() else { break };
            if tries == SEND_ATTEMPTS {
                let failed = format!("SQS failed a batched message {tries} times: {}", first.code);
                return Err(QueueError::unavailable(std::io::Error::other(failed)));
            }
            entries.retain(|entry| out.failed.iter().any(|f| f.id == entry.id()));
            tokio::time::sleep(rp_ports::store::backoff(tries)).await;
        }
        ids.into_iter().collect::<Option<Vec<_>>>().ok_or_else(|| {
            QueueError::unavailable(std::io::Error::other("SQS answered a batch without every message"))
        })
    }

    pub fn new(
        client: impl Into<LazyClient<Client>>,
        queue_url: impl Into<String>,
        dead_letter_url: Option<String>,
    ) -> Self {
        Self { client: client.into(), queue_url: queue_url.into(), dead_letter_url }
    }

    async fn receive_from(
        &self,
        url: &str,
        max: usize,
        visibility: Duration,
    ) -> Result<Vec<ReceivedMessage>, QueueError> {
        let out = self
            .client
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(max as i32)
            .visibility_timeout(visibility.as_secs() as i32)
            .wait_time_seconds(0)
            .message_system_attribute_names(MessageSystemAttributeName::ApproximateReceiveCount)
            .send()
            .await
            .map_err(QueueError::unavailable)?;
        Ok(out
            .messages
            .unwrap_or_default()
            .into_iter()
            .map(|m| ReceivedMessage {
                receive_count: m
                    .attributes
                    .as_ref()
                    .and_then(|a| a.get(&MessageSystemAttributeName::ApproximateReceiveCount))
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(1),
                message_id: m.message_id.unwrap_or_default(),
                body: m.body.unwrap_or_default(),
                receipt: m.receipt_handle.unwrap_or_default(),
            })
            .collect())
    }
}

#[async_trait]
impl Queue for SqsQueue {
    async fn send(&self, body: &str, delay: Duration) -> Result<String, QueueError> {
        check_delay(delay)?;
        let out = self
            .client
            .send_message()
            .queue_url(&self.queue_url)
            .message_body(body)
            .delay_seconds(delay.as_secs() as i32)
            .send()
            .await
            .map_err(QueueError::unavailable)?;
        Ok(out.message_id.unwrap_or_default())
    }

    async fn receive(&self, max: usize, visibility: Duration) -> Result<Vec<ReceivedMessage>, QueueError> {
        if max == 0 || max > MAX_RECEIVE_BATCH {
            return Err(QueueError::Invalid(format!("receive takes 1 to {MAX_RECEIVE_BATCH}")));
        }
        self.receive_from(&self.queue_url, max, visibility).await
    }

    async fn ack(&self, receipt: &str) -> Result<(), QueueError> {
        match self.client.delete_message().queue_url(&self.queue_url).receipt_handle(receipt).send().await {
            Ok(_) => Ok(()),
            // A receipt from an earlier delivery: the message is someone else's now.
            Err(e) if e.as_service_error().is_some_and(|s| s.is_receipt_handle_is_invalid()) => Ok(()),
            Err(e) => Err(QueueError::unavailable(e)),
        }
    }

    /// Batches of ten, sent at once (a poll of 50 is five `SendMessageBatch` calls in flight
    /// together); the ids come back in the messages' order.
    async fn send_batch(&self, messages: &[(String, Duration)]) -> Result<Vec<String>, QueueError> {
        messages.iter().try_for_each(|(_, delay)| check_delay(*delay))?;
        let batches =
            futures_util::future::try_join_all(messages.chunks(10).map(|chunk| self.send_ten(chunk))).await?;
        Ok(batches.into_iter().flatten().collect())
    }

    async fn dead_letter(&self, body: &str) -> Result<(), QueueError> {
        let Some(url) = &self.dead_letter_url else {
            return Err(QueueError::Invalid("no dead-letter queue is configured".into()));
        };
        self.client
            .send_message()
            .queue_url(url)
            .message_body(body)
            .send()
            .await
            .map_err(QueueError::unavailable)?;
        Ok(())
    }

    async fn dead_letters(&self, max: usize) -> Result<Vec<ReceivedMessage>, QueueError> {
        let Some(url) = &self.dead_letter_url else {
            return Err(QueueError::Invalid("no dead-letter queue is configured".into()));
        };
        // Visibility 0: looking does not hide them from the next look.
        self.receive_from(url, max.clamp(1, MAX_RECEIVE_BATCH), Duration::ZERO).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(sent: &[usize], failed: &[(usize, bool)]) -> (u16, String) {
        let sent: Vec<_> = sent
            .iter()
            .map(|i| serde_json::json!({"Id": i.to_string(), "MessageId": format!("m{i}"), "MD5OfMessageBody": "x"}))
            .collect();
        let failed: Vec<_> = failed
            .iter()
            .map(|(i, sender)| serde_json::json!({"Id": i.to_string(), "SenderFault": sender, "Code": "InternalError"}))
            .collect();
        (200, serde_json::json!({"Successful": sent, "Failed": failed}).to_string())
    }

    fn queue(answers: Vec<(u16, String)>) -> (SqsQueue, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
        let (config, calls) = crate::aws::standin::answering(answers);
        (SqsQueue::new(Client::new(&config), "http://127.0.0.1/queue", None), calls)
    }

    /// A message SQS failed on its side goes again, alone, and the ids come back in order; one
    /// refused as the sender's fault fails the batch at once; a failure that does not pass is
    /// the queue's being unavailable.
    #[tokio::test]
    async fn a_batch_sends_again_only_what_sqs_failed_on_its_side() {
        let messages: Vec<(String, Duration)> =
            (0..3).map(|i| (format!("body {i}"), Duration::ZERO)).collect();

        let (sqs, calls) = queue(vec![batch(&[0, 2], &[(1, false)]), batch(&[1], &[])]);
        assert_eq!(sqs.send_batch(&messages).await.unwrap(), ["m0", "m1", "m2"]);
        let sent = calls.lock().unwrap().clone();
        assert_eq!(sent.len(), 2);
        let again: serde_json::Value = serde_json::from_str(&sent[1]).unwrap();
        let ids: Vec<&str> =
            again["Entries"].as_array().unwrap().iter().map(|e| e["Id"].as_str().unwrap()).collect();
        assert_eq!(ids, ["1"], "only the failed message goes again: {again}");

        let (sqs, calls) = queue(vec![batch(&[0, 2], &[(1, true)])]);
        assert!(matches!(sqs.send_batch(&messages).await, Err(QueueError::Invalid(_))));
        assert_eq!(calls.lock().unwrap().len(), 1);

        let (sqs, calls) = queue(vec![batch(&[0, 2], &[(1, false)]), batch(&[], &[(1, false)])]);
        assert!(matches!(sqs.send_batch(&messages).await, Err(QueueError::Unavailable(_))));
        assert_eq!(calls.lock().unwrap().len(), SEND_ATTEMPTS);
    }

    /// An acknowledgement SQS refuses because the receipt is no longer valid (the message was
    /// delivered again, or the receipt expired) changed nothing that matters: the message is
    /// another delivery's now. Any other refusal is the queue being unavailable. No emulator
    /// here refuses a receipt so (LocalStack takes a stale one): a stand-in answers for SQS.
    #[tokio::test]
    async fn an_invalid_receipt_is_acknowledged_and_a_refusal_is_not() {
        let refusal = |kind: &str| {
            (
                400,
                serde_json::json!({"__type": format!("com.amazonaws.sqs#{kind}"), "message": "no"})
                    .to_string(),
            )
        };
        let (sqs, calls) = queue(vec![refusal("ReceiptHandleIsInvalid")]);
        assert!(sqs.ack("stale-receipt").await.is_ok());
        assert!(calls.lock().unwrap()[0].contains("stale-receipt"));
        let (sqs, _) = queue(vec![refusal("QueueDoesNotExist")]);
        let refused = sqs.ack("receipt").await;
        assert!(matches!(refused, Err(QueueError::Unavailable(_))), "{refused:?}");
    }
}
