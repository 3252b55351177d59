//! The embedded queue: messages in the data directory's database, keyed by the time they become
//! visible, so a receive is one ordered range scan. Semantics follow SQS: delays, a visibility
//! timeout, redelivery until acknowledged, and a dead-letter table after `max_receive_count`.

use super::db::{EmbeddedDb, DEAD, MESSAGES};
use async_trait::async_trait;
use redb::{ReadableTable, TableDefinition};
use rp_ports::queue::*;
use rp_ports::Clock;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;

#[derive(Serialize, Deserialize)]
struct StoredMessage {
    body: String,
    receive_count: u32,
}

#[derive(Clone)]
pub struct EmbeddedQueue {
    db: EmbeddedDb,
    clock: Arc<dyn Clock>,
    name: String,
    max_receive_count: u32,
}

fn err(e: impl Into<redb::Error>) -> QueueError {
    QueueError::unavailable(e.into())
}

fn decode(bytes: &[u8]) -> Result<StoredMessage, QueueError> {
    serde_json::from_slice(bytes).map_err(|e| QueueError::Invalid(format!("stored message: {e}")))
}

fn encode(message: &StoredMessage) -> Vec<u8> {
    serde_json::to_vec(message).expect("a message always serializes")
}

impl EmbeddedQueue {
    pub fn new(db: EmbeddedDb, clock: Arc<dyn Clock>, name: &str, max_receive_count: u32) -> Self {
        Self { db, clock, name: name.to_owned(), max_receive_count: max_receive_count.max(1) }
    }

    fn now_ms(&self) -> u64 {
        self.clock.now_millis().as_millis().max(0) as u64
    }

    /// Runs `work` on the blocking pool, with the database and this queue's name.
    async fn blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce(&redb::Database, &str) -> Result<T, QueueError> + Send + 'static,
    ) -> Result<T, QueueError> {
        let (db, name) = (self.db.clone(), self.name.clone());
        tokio::task::spawn_blocking(move || work(db.database(), &name))
            .await
            .map_err(QueueError::unavailable)?
    }

    /// Stores a message of `body`, never received, in `table` under `at` and `id`.
    async fn insert_new(
        &self,
        table: TableDefinition<'static, (&'static str, u64, &'static str), &'static [u8]>,
        at: u64,
        id: String,
        body: &str,
    ) -> Result<(), QueueError> {
        let message = encode(&StoredMessage { body: body.to_owned(), receive_count: 0 });
        self.blocking(move |db, name| {
            let tx = db.begin_write().map_err(err)?;
            tx.open_table(table)
                .map_err(err)?
                .insert((name, at, id.as_str()), message.as_slice())
                .map_err(err)?;
            tx.commit().map_err(err)
        })
        .await
    }
}

#[async_trait]
impl Queue for EmbeddedQueue {
    async fn send(&self, body: &str, delay: Duration) -> Result<String, QueueError> {
        check_delay(delay)?;
        let id = uuid::Uuid::new_v4().to_string();
        let visible_at = self.now_ms() + delay.as_millis() as u64;
        self.insert_new(MESSAGES, visible_at, id.clone(), body).await?;
        Ok(id)
    }

    async fn receive(&self, max: usize, visibility: Duration) -> Result<Vec<ReceivedMessage>, QueueError> {
        if max == 0 || max > MAX_RECEIVE_BATCH {
            return Err(QueueError::Invalid(format!("receive takes 1 to {MAX_RECEIVE_BATCH}")));
        }
        let now = self.now_ms();
        let hidden_until = now + visibility.as_millis() as u64;
        let max_receive = self.max_receive_count;
        self.blocking(move |db, name| {
            let tx = db.begin_write().map_err(err)?;
            let mut delivered = Vec::new();
            {
                let mut messages = tx.open_table(MESSAGES).map_err(err)?;
                let mut dead = tx.open_table(DEAD).map_err(err)?;
                let mut due = Vec::new();
                for entry in messages.range((name, 0u64, "")..).map_err(err)? {
                    let (key, value) = entry.map_err(err)?;
                    let (queue, visible_at, id) = key.value();
                    if queue != name || visible_at > now || due.len() == max {
                        break;
                    }
                    due.push((visible_at, id.to_owned(), decode(value.value())?));
                }
                for (visible_at, id, mut message) in due {
                    messages.remove((name, visible_at, id.as_str())).map_err(err)?;
                    if message.receive_count >= max_receive {
                        dead.insert((name, now, id.as_str()), encode(&message).as_slice()).map_err(err)?;
                        continue;
                    }
                    message.receive_count += 1;
                    messages
                        .insert((name, hidden_until, id.as_str()), encode(&message).as_slice())
                        .map_err(err)?;
                    delivered.push(ReceivedMessage {
                        receipt: format!("{hidden_until}:{id}"),
                        message_id: id,
                        body: message.body,
                        receive_count: message.receive_count,
                    });
                }
            }
            tx.commit().map_err(err)?;
            Ok(delivered)
        })
        .await
    }

    async fn ack(&self, receipt: &str) -> Result<(), QueueError> {
        let (at, id) = receipt
            .split_once(':')
            .and_then(|(at, id)| Some((at.parse::<u64>().ok()?, id.to_owned())))
            .ok_or_else(|| QueueError::Invalid("malformed receipt".into()))?;
        self.blocking(move |db, name| {
            let tx = db.begin_write().map_err(err)?;
            tx.open_table(MESSAGES).map_err(err)?.remove((name, at, id.as_str())).map_err(err)?;
            tx.commit().map_err(err)
        })
        .await
    }

    async fn dead_letter(&self, body: &str) -> Result<(), QueueError> {
        self.insert_new(DEAD, self.now_ms(), uuid::Uuid::new_v4().to_string(), body).await
    }

    async fn dead_letters(&self, max: usize) -> Result<Vec<ReceivedMessage>, QueueError> {
        self.blocking(move |db, name| {
            let tx = db.begin_read().map_err(err)?;
            let dead = tx.open_table(DEAD).map_err(err)?;
            let mut out = Vec::new();
            for entry in dead.range((name, 0u64, "")..).map_err(err)? {
                let (key, value) = entry.map_err(err)?;
                let (queue, at, id) = key.value();
                if queue != name || out.len() == max {
                    break;
                }
                let message = decode(value.value())?;
                out.push(ReceivedMessage {
                    message_id: id.to_owned(),
                    receipt: format!("dead:{at}:{id}"),
                    body: message.body,
                    receive_count: message.receive_count,
                });
            }
            Ok(out)
        })
        .await
    }
}
