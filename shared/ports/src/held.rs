//! A store and a key service that hold back every write, and every call to the key service,
//! until a go-ahead: a rate-limited request reads beside its count, and changes nothing (nor
//! spends a key operation) before the count has allowed it. Reads go through at once.

use super::keys::{Checked, KeyCall, KeyCheck};
use super::store::{Increment, Page, Query, WriteOp};
use super::{Condition, EncryptionContext, Item, ItemKey, ItemStore, KeyError, StoreError};
use async_trait::async_trait;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokio::sync::watch;

/// The go-ahead's sending side: [`Gate::open`] lets the held calls through or refuses them.
/// Dropped unopened, it refuses them.
pub struct Gate(watch::Sender<Option<bool>>, Arc<AtomicBool>);

/// The go-ahead's receiving side, one per held port.
#[derive(Clone)]
pub struct Pass(watch::Receiver<Option<bool>>, Arc<AtomicBool>);

impl Gate {
    pub fn new() -> (Gate, Pass) {
        let (tx, rx) = watch::channel(None);
        let reached = Arc::new(AtomicBool::new(false));
        (Gate(tx, reached.clone()), Pass(rx, reached))
    }

    /// Whether a held call has come to the gate: what the caller did before its first write or
    /// key call is done.
    pub fn is_reached(&self) -> bool {
        self.1.load(Ordering::SeqCst)
    }

    /// Lets the held calls through (`allowed`), or fails each with an error.
    pub fn open(self, allowed: bool) {
        // No receiver left: nothing was held.
        let _ = self.0.send(Some(allowed));
    }
}

impl Pass {
    /// Waits for the go-ahead: `Ok` once the held calls may go, the refusal's error if not.
    pub async fn go_ahead(&self) -> Result<(), StoreError> {
        self.1.store(true, Ordering::SeqCst);
        let mut rx = self.0.clone();
        let seen = rx.wait_for(Option::is_some).await.map(|open| *open);
        match seen {
            Ok(Some(true)) => Ok(()),
            _ => Err(StoreError::Unavailable(Box::new(Refused))),
        }
    }
}

/// The error a refused call fails with: the caller's answer is replaced by the refusal's.
#[derive(Debug, thiserror::Error)]
#[error("held: the request was not allowed to go ahead")]
struct Refused;

/// `inner` with its writes held by `pass`.
pub struct HeldStore {
    inner: Arc<dyn ItemStore>,
    pass: Pass,
}

impl HeldStore {
    pub fn new(inner: Arc<dyn ItemStore>, pass: Pass) -> Self {
        Self { inner, pass }
    }

    async fn through(&self) -> Result<(), StoreError> {
        self.pass.go_ahead().await
    }
}

#[async_trait]
impl ItemStore for HeldStore {
    fn kind(&self) -> &'static str {
        self.inner.kind()
    }

    async fn get(&self, key: &ItemKey) -> Result<Option<Item>, StoreError> {
        self.inner.get(key).await
    }

    async fn query(&self, query: Query) -> Result<Page, StoreError> {
        self.inner.query(query).await
    }

    async fn put(&self, item: Item, condition: Condition) -> Result<Item, StoreError> {
        self.through().await?;
        self.inner.put(item, condition).await
    }

    async fn delete(&self, key: &ItemKey, condition: Condition) -> Result<(), StoreError> {
        self.through().await?;
        self.inner.delete(key, condition).await
    }

    async fn transact(&self, ops: Vec<WriteOp>) -> Result<(), StoreError> {
        self.through().await?;
        self.inner.transact(ops).await
    }

    async fn increment(&self, increment: Increment) -> Result<i64, StoreError> {
        self.through().await?;
        self.inner.increment(increment).await
    }

    async fn put_each(&self, puts: Vec<(Item, Condition)>) -> Vec<Result<Item, StoreError>> {
        match self.through().await {
            Ok(()) => self.inner.put_each(puts).await,
            Err(_) => puts.iter().map(|_| Err(StoreError::Unavailable(Box::new(Refused)))).collect(),
        }
    }
}

/// A key service with every call held by a [`Pass`]: `Checked::new(inner, pass)`.
pub type HeldKeys = Checked<Pass>;

#[async_trait]
impl KeyCheck for Pass {
    async fn check(&self, _: KeyCall, _: &EncryptionContext) -> Result<(), KeyError> {
        self.go_ahead().await.map_err(|_| KeyError::unavailable(Refused))
    }
}
