//! The port contract suite and the router suite on the embedded backend.

#[macro_use]
mod common;

use rp_shared::adapters::embedded::{EmbeddedDb, EmbeddedQueue, EmbeddedStore, LocalKeyFile};
use rp_shared::backend::Backend;
use rp_shared::ports::{ItemStore, KeyService, Queue, SystemClock};
use rp_shared::testing::contract::QUEUE_MAX_RECEIVE;
use std::sync::Arc;

fn data_dir() -> std::path::PathBuf {
    tempfile::Builder::new().prefix("rp-test-").tempdir().expect("temp dir").keep()
}

async fn store() -> Option<Arc<dyn ItemStore>> {
    let db = EmbeddedDb::open(&data_dir()).unwrap();
    Some(Arc::new(EmbeddedStore::new(db, Arc::new(SystemClock))))
}

async fn queue() -> Option<Arc<dyn Queue>> {
    let db = EmbeddedDb::open(&data_dir()).unwrap();
    Some(Arc::new(EmbeddedQueue::new(db, Arc::new(SystemClock), "contract", QUEUE_MAX_RECEIVE)))
}

async fn keys() -> Option<Arc<dyn KeyService>> {
    Some(Arc::new(LocalKeyFile::open_or_create(&data_dir().join("keys.json")).unwrap()))
}

fn now() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

rp_shared::store_contract_tests!(store(), now());
rp_shared::queue_contract_tests!(queue());
rp_shared::keys_contract_tests!(keys());

/// A fresh embedded backend for each router case, on a clock the case can move.
async fn backend(clock: rp_shared::ports::ManualClock) -> Option<Backend> {
    Some(Backend::embedded_with_clock(&data_dir(), Arc::new(clock)).unwrap())
}

router_tests!(backend);

#[tokio::test]
async fn key_file_is_private_and_stable() {
    let dir = data_dir();
    let path = dir.join("keys.json");
    let first = LocalKeyFile::open_or_create(&path).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
    let second = LocalKeyFile::open_or_create(&path).unwrap();
    assert_eq!(first.signing_key_id(), second.signing_key_id());
    let ctx = rp_shared::ports::EncryptionContext::new("t", "p");
    let sealed = rp_shared::ports::keys::seal(&first, &ctx, b"x").await.unwrap();
    assert_eq!(rp_shared::ports::keys::open(&second, &ctx, &sealed).await.unwrap(), b"x");
}

#[tokio::test]
async fn data_survives_reopening_the_database() {
    let dir = data_dir();
    {
        let backend = Backend::embedded(&dir).unwrap();
        let item = rp_shared::ports::Item::new(
            rp_shared::ports::ItemKey::new("P", "S"),
            &serde_json::json!({"v": 1}),
        )
        .unwrap();
        backend.store.put(item, rp_shared::ports::Condition::Absent).await.unwrap();
        backend.queue.send("m", std::time::Duration::ZERO).await.unwrap();
    }
    let backend = Backend::embedded(&dir).unwrap();
    let got = backend.store.get(&rp_shared::ports::ItemKey::new("P", "S")).await.unwrap().unwrap();
    assert_eq!(got.attrs["v"], 1);
    let messages = backend.queue.receive(10, std::time::Duration::from_secs(5)).await.unwrap();
    assert_eq!(messages.len(), 1);
}
