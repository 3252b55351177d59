//! The set of adapters one process runs on: embedded or AWS, chosen once at start-up.

use crate::adapters::embedded::{EmbeddedDb, EmbeddedQueue, EmbeddedStore, LocalKeyFile, OpenError};
use crate::ports::{Clock, ItemStore, KeyService, Queue, SystemClock};
use std::path::Path;
use std::sync::Arc;

/// The name of the certificate re-queue (the SQS queue on AWS).
pub const CERT_QUEUE: &str = "cert-timeouts";
/// Deliveries before a message goes to the dead-letter queue (SQS `maxReceiveCount`).
pub const MAX_RECEIVE_COUNT: u32 = 5;

#[derive(Clone)]
pub struct Backend {
    pub store: Arc<dyn ItemStore>,
    pub queue: Arc<dyn Queue>,
    pub keys: Arc<dyn KeyService>,
    pub clock: Arc<dyn Clock>,
}

impl Backend {
    /// The embedded backend in `data_dir`: redb database, local queue, local key file.
    pub fn embedded(data_dir: &Path) -> Result<Self, OpenError> {
        Self::embedded_with_clock(data_dir, Arc::new(SystemClock))
    }

    pub fn embedded_with_clock(data_dir: &Path, clock: Arc<dyn Clock>) -> Result<Self, OpenError> {
        let db = EmbeddedDb::open(data_dir)?;
        let key_path = data_dir.join("keys.json");
        let keys = LocalKeyFile::open_or_create(&key_path)
            .map_err(|source| OpenError::Keys { path: key_path, source })?;
        Ok(Self {
            store: Arc::new(EmbeddedStore::new(db.clone(), clock.clone())),
            queue: Arc::new(EmbeddedQueue::new(db, clock.clone(), CERT_QUEUE, MAX_RECEIVE_COUNT)),
            keys: Arc::new(keys),
            clock,
        })
    }
}
