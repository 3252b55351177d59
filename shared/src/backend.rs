//! The set of adapters one process runs on: embedded or AWS, chosen once at start-up.

use crate::adapters::absent::Absent;
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

    /// This backend as an endpoint that uses `services` sees it: the queue and the key service
    /// it leaves out are [`Absent`], as in a Lambda function built for that endpoint alone.
    pub fn only(&self, services: Services) -> Self {
        Self {
            store: self.store.clone(),
            queue: if services.queue { self.queue.clone() } else { Arc::new(Absent) },
            keys: if services.keys { self.keys.clone() } else { Arc::new(Absent) },
            clock: self.clock.clone(),
        }
    }
}

/// The backing services an endpoint calls besides the store and the clock, which every one
/// uses. Its Lambda function builds (and links) the clients of these only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Services {
    pub queue: bool,
    pub keys: bool,
}

impl Services {
    pub const STORE: Self = Self { queue: false, keys: false };
    pub const KEYS: Self = Self { queue: false, keys: true };
    pub const QUEUE: Self = Self { queue: true, keys: false };
    pub const ALL: Self = Self { queue: true, keys: true };

    /// The constant's name, as each function's `main` spells it.
    pub fn name(self) -> &'static str {
        match (self.queue, self.keys) {
            (false, false) => "STORE",
            (false, true) => "KEYS",
            (true, false) => "QUEUE",
            (true, true) => "ALL",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_endpoint_sees_the_services_it_declares_and_absent_ones_for_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let backend = Backend::embedded(dir.path()).unwrap();
        let all = backend.only(Services::ALL);
        assert!(Arc::ptr_eq(&all.queue, &backend.queue) && Arc::ptr_eq(&all.keys, &backend.keys));
        let keys = backend.only(Services::KEYS);
        assert!(Arc::ptr_eq(&keys.keys, &backend.keys) && Arc::ptr_eq(&keys.store, &backend.store));
        assert!(keys.queue.send("{}", std::time::Duration::ZERO).await.is_err(), "no queue");
        assert!(backend.queue.send("{}", std::time::Duration::ZERO).await.is_ok());
        let queue = backend.only(Services::QUEUE);
        assert!(Arc::ptr_eq(&queue.queue, &backend.queue));
        assert!(queue.keys.sign_es256(b"m").await.is_err(), "no key service");
        assert!(backend.keys.sign_es256(b"m").await.is_ok());
        assert_eq!(
            [Services::STORE, Services::KEYS, Services::QUEUE, Services::ALL].map(Services::name),
            ["STORE", "KEYS", "QUEUE", "ALL"]
        );
    }
}
