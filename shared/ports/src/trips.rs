//! Round trips: a backend whose store, key service and queue record every call and hold each for a
//! fixed latency, as a network would. What one request sends, and how many of those calls wait on
//! one another, is then counted rather than guessed: on AWS each wave is a round trip of a few
//! milliseconds, whatever the emulators here take.
//!
//! A call's *wave* is one more than the highest wave among the calls answered before it was sent
//! (1 if none was): calls sent together share a wave, and a call sent on another's answer is in
//! the next. The request's waves, the highest of them, is its longest chain of calls each waiting
//! for the one before, however its independent chains overlap.

use crate::backend::Backend;
use crate::keys::DataKey;
use crate::push::{EndpointRequest, Platform, Push, PushError, WakeUp};
use crate::store::{Increment, Page, Query, WriteOp};
use crate::{
    Condition, EncryptionContext, Item, ItemKey, ItemStore, KeyError, KeyService, Queue, QueueError,
    ReceivedMessage, StoreError,
};
use async_trait::async_trait;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the calls since the last [`Trips::take`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tally {
    /// Each call, in the order they started, with the wave it belongs to (from 1): the port's
    /// method, and for the store the kind of item (its partition key up to the first `#`):
    /// `store.get TOKEN`, `keys.decrypt_data_key`.
    pub calls: Vec<(usize, String)>,
    /// The highest wave: the round trips the request waits for one after another.
    pub waves: usize,
    /// How many items the store's queries answered, all pages together: what they cost in
    /// read units grows with it.
    pub items_read: usize,
}

impl Tally {
    /// The wave of each call named `call` (`store.get TOKEN`), in the order they started.
    pub fn waves_of(&self, call: &str) -> Vec<usize> {
        self.calls.iter().filter(|(_, c)| c == call).map(|(wave, _)| *wave).collect()
    }
}

impl std::fmt::Display for Tally {
    /// The calls wave by wave: `store.get TOKEN → store.get APP, store.query DEVICE → ...`,
    /// a call that several times in one wave as `×n`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut waves: Vec<Vec<(&str, usize)>> = Vec::new();
        for (wave, call) in &self.calls {
            waves.resize_with(waves.len().max(*wave), Vec::new);
            let calls = &mut waves[wave - 1];
            match calls.iter_mut().find(|(c, _)| c == call) {
                Some((_, n)) => *n += 1,
                None => calls.push((call, 1)),
            }
        }
        let waves = waves.iter().map(|calls| {
            let calls = calls.iter().map(|(call, n)| match n {
                1 => call.to_string(),
                n => format!("{call} ×{n}"),
            });
            calls.collect::<Vec<_>>().join(", ")
        });
        f.write_str(&waves.collect::<Vec<_>>().join(" → "))
    }
}

#[derive(Default)]
struct State {
    /// The highest wave among the calls answered so far.
    answered: usize,
    tally: Tally,
}

/// The shared record of a [`recorded`] backend's calls.
#[derive(Default)]
pub struct Trips {
    state: Mutex<State>,
    latency: Duration,
}

impl Trips {
    /// The calls since the last take, and a fresh count.
    pub fn take(&self) -> Tally {
        std::mem::take(&mut *self.state.lock().unwrap()).tally
    }

    async fn around<T>(&self, name: String, call: impl std::future::Future<Output = T>) -> T {
        let wave = {
            let mut state = self.state.lock().unwrap();
            let wave = state.answered + 1;
            state.tally.waves = state.tally.waves.max(wave);
            state.tally.calls.push((wave, name));
            wave
        };
        // Held before the call, so calls joined by the caller overlap here whether or not the
        // adapter underneath ever yields.
        tokio::time::sleep(self.latency).await;
        let out = call.await;
        let mut state = self.state.lock().unwrap();
        state.answered = state.answered.max(wave);
        out
    }
}

/// `backend` with every store, key and queue call recorded in the returned [`Trips`] and held for
/// `latency` first.
pub fn recorded(backend: &Backend, latency: Duration) -> (Backend, Arc<Trips>) {
    let trips = Arc::new(Trips { latency, ..Trips::default() });
    let backend = Backend {
        store: Arc::new(Recorded { inner: backend.store.clone(), trips: trips.clone() }),
        keys: Arc::new(Recorded { inner: backend.keys.clone(), trips: trips.clone() }),
        queue: Arc::new(Recorded { inner: backend.queue.clone(), trips: trips.clone() }),
        push: Arc::new(Recorded { inner: backend.push.clone(), trips: trips.clone() }),
        clock: backend.clock.clone(),
    };
    (backend, trips)
}

/// `store.get TOKEN`: the call, and the kind of item its partition key `pk` names.
fn on(call: &str, pk: &str) -> String {
    format!("{call} {}", pk.split('#').next().unwrap_or_default())
}

struct Recorded<T: ?Sized> {
    inner: Arc<T>,
    trips: Arc<Trips>,
}

#[async_trait]
impl ItemStore for Recorded<dyn ItemStore> {
    fn kind(&self) -> &'static str {
        self.inner.kind()
    }

    async fn get(&self, key: &ItemKey) -> Result<Option<Item>, StoreError> {
        self.trips.around(on("store.get", &key.pk), self.inner.get(key)).await
    }

    async fn put(&self, item: Item, condition: Condition) -> Result<Item, StoreError> {
        self.trips.around(on("store.put", &item.key.pk), self.inner.put(item, condition)).await
    }

    async fn delete(&self, key: &ItemKey, condition: Condition) -> Result<(), StoreError> {
        self.trips.around(on("store.delete", &key.pk), self.inner.delete(key, condition)).await
    }

    async fn transact(&self, ops: Vec<WriteOp>) -> Result<(), StoreError> {
        self.trips.around(format!("store.transact ({} items)", ops.len()), self.inner.transact(ops)).await
    }

    async fn query(&self, query: Query) -> Result<Page, StoreError> {
        let page = self.trips.around(on("store.query", &query.pk), self.inner.query(query)).await?;
        self.trips.state.lock().unwrap().tally.items_read += page.items.len();
        Ok(page)
    }

    async fn increment(&self, increment: Increment) -> Result<i64, StoreError> {
        self.trips.around(on("store.increment", &increment.key.pk), self.inner.increment(increment)).await
    }

    async fn put_each(&self, puts: Vec<(Item, Condition)>) -> Vec<Result<Item, StoreError>> {
        self.trips.around(format!("store.put_each ({} items)", puts.len()), self.inner.put_each(puts)).await
    }
}

#[async_trait]
impl KeyService for Recorded<dyn KeyService> {
    async fn generate_data_key(&self, context: &EncryptionContext) -> Result<DataKey, KeyError> {
        self.trips.around("keys.generate_data_key".to_owned(), self.inner.generate_data_key(context)).await
    }

    async fn decrypt_data_key(
        &self,
        wrapped: &[u8],
        context: &EncryptionContext,
    ) -> Result<[u8; 32], KeyError> {
        self.trips
            .around("keys.decrypt_data_key".to_owned(), self.inner.decrypt_data_key(wrapped, context))
            .await
    }
}

#[async_trait]
impl Queue for Recorded<dyn Queue> {
    async fn send(&self, body: &str, delay: Duration) -> Result<String, QueueError> {
        self.trips.around("queue.send".to_owned(), self.inner.send(body, delay)).await
    }

    async fn receive(&self, max: usize, visibility: Duration) -> Result<Vec<ReceivedMessage>, QueueError> {
        self.trips.around("queue.receive".to_owned(), self.inner.receive(max, visibility)).await
    }

    async fn ack(&self, receipt: &str) -> Result<(), QueueError> {
        self.trips.around("queue.ack".to_owned(), self.inner.ack(receipt)).await
    }

    async fn send_batch(&self, messages: &[(String, Duration)]) -> Result<Vec<String>, QueueError> {
        self.trips.around("queue.send_batch".to_owned(), self.inner.send_batch(messages)).await
    }

    async fn dead_letter(&self, body: &str) -> Result<(), QueueError> {
        self.trips.around("queue.dead_letter".to_owned(), self.inner.dead_letter(body)).await
    }

    async fn dead_letters(&self, max: usize) -> Result<Vec<ReceivedMessage>, QueueError> {
        self.trips.around("queue.dead_letters".to_owned(), self.inner.dead_letters(max)).await
    }
}

#[async_trait]
impl Push for Recorded<dyn Push> {
    async fn register(&self, request: EndpointRequest<'_>) -> Result<String, PushError> {
        self.trips.around("push.register".to_owned(), self.inner.register(request)).await
    }

    async fn send(&self, endpoint: &str, platform: Platform, wake: &WakeUp) -> Result<(), PushError> {
        self.trips.around("push.send".to_owned(), self.inner.send(endpoint, platform, wake)).await
    }

    async fn remove(&self, endpoint: &str) -> Result<(), PushError> {
        self.trips.around("push.remove".to_owned(), self.inner.remove(endpoint)).await
    }
}
