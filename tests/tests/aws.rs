//! The port contract suite and the router suite on the AWS adapters, against emulators
//! (moto, DynamoDB Local, or LocalStack). Skipped, with a notice, when no endpoint is set.

#[macro_use]
mod common;

use rp_shared::adapters::aws::{DynamoStore, KmsKeys, SqsQueue};
use rp_shared::backend::{self, Backend};
use rp_shared::ports::{Condition, Increment, Item, ItemKey, WriteOp};
use rp_shared::ports::{ItemStore, KeyService, ManualClock, Queue, SystemClock};
use rp_shared::testing::aws::{
    clients, dynamo_losing_first_reply, fresh_config, fresh_key, fresh_queue_with, fresh_table,
    shared_sdk_config,
};
use rp_shared::testing::contract::QUEUE_MAX_RECEIVE;
use std::sync::Arc;

async fn store() -> Option<Arc<dyn ItemStore>> {
    let clients = clients().await?;
    let table = fresh_table(&clients).await;
    Some(Arc::new(DynamoStore::new(clients.dynamo, table, Arc::new(SystemClock))))
}

async fn queue() -> Option<Arc<dyn Queue>> {
    let clients = clients().await?;
    let (url, dlq) = fresh_queue_with(&clients, QUEUE_MAX_RECEIVE).await;
    Some(Arc::new(SqsQueue::new(clients.sqs, url, Some(dlq))))
}

async fn keys() -> Option<Arc<dyn KeyService>> {
    let clients = clients().await?;
    let envelope = fresh_key(&clients).await;
    Some(Arc::new(KmsKeys::new(clients.kms, envelope)))
}

fn now() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

rp_shared::store_contract_tests!(store(), now());
rp_shared::queue_contract_tests!(queue());
rp_shared::keys_contract_tests!(keys());

async fn backend(clock: ManualClock) -> Option<Backend> {
    let clients = clients().await?;
    let config = fresh_config(&clients).await;
    // Built as a Lambda cold start builds it: one SDK config, each service's endpoint from the
    // environment, and the queue's and the keys' clients made at their first call.
    let sdk = shared_sdk_config().await?;
    Some(backend::aws(&config, &sdk, Arc::new(clock)))
}

router_tests!(backend);

/// A write DynamoDB applied but whose reply was lost is sent again by the SDK; it is reported
/// as done (not as a conflict) and applied once: a create, a put at a version, an update of an
/// existing item, a counter, a delete at a version and a transaction, each through a proxy that
/// loses its first reply.
#[tokio::test]
async fn a_write_whose_reply_is_lost_is_done_once() {
    let Some(clients) = clients().await else { return };
    let table = fresh_table(&clients).await;
    let direct = DynamoStore::new(clients.dynamo, table.clone(), Arc::new(SystemClock));
    let lossy = || async {
        let client = dynamo_losing_first_reply().await.expect("configured");
        DynamoStore::new(client, table.clone(), Arc::new(SystemClock))
    };
    let item =
        |sk: &str, n: i64| Item::new(ItemKey::new("LOST", sk), &serde_json::json!({ "n": n })).unwrap();
    let at_version = direct.put(item("version", 1), Condition::Absent).await.unwrap();
    let existing = direct.put(item("exists", 1), Condition::Absent).await.unwrap();
    let doomed = direct.put(item("doomed", 1), Condition::Absent).await.unwrap();
    let counter = Increment { key: ItemKey::new("LOST", "counter"), by: 1, limit: Some(5), expires_at: None };
    let pair = vec![
        WriteOp::Put { item: item("pair-a", 1), condition: Condition::Absent },
        WriteOp::Put { item: item("pair-b", 1), condition: Condition::Absent },
    ];

    let (create, versioned, updated, counted, deleted, transacted) = tokio::join!(
        async { lossy().await.put(item("create", 1), Condition::Absent).await },
        async { lossy().await.put(item("version", 2), Condition::Version(at_version.version)).await },
        async { lossy().await.put(item("exists", 2), Condition::Exists).await },
        async { lossy().await.increment(counter.clone()).await },
        async { lossy().await.delete(&doomed.key, Condition::Version(doomed.version)).await },
        async { lossy().await.transact(pair).await },
    );

    let create = create.expect("a create whose reply was lost is done, not a conflict");
    let stored = direct.get(&ItemKey::new("LOST", "create")).await.unwrap().unwrap();
    assert_eq!((stored.version, stored.attrs["n"].clone()), (create.version, 1.into()));
    let versioned = versioned.expect("a put at a version whose reply was lost is done");
    assert_eq!(versioned.version, at_version.version + 1);
    let stored = direct.get(&ItemKey::new("LOST", "version")).await.unwrap().unwrap();
    assert_eq!((stored.version, stored.attrs["n"].clone()), (at_version.version + 1, 2.into()));
    let updated = updated.expect("an update whose reply was lost is done");
    assert_eq!(updated.version, existing.version + 1, "applied once");
    let stored = direct.get(&ItemKey::new("LOST", "exists")).await.unwrap().unwrap();
    assert_eq!(stored.version, existing.version + 1, "applied once");
    assert_eq!(counted.expect("a counter whose reply was lost is raised"), 1, "raised once");
    assert_eq!(direct.increment(Increment { by: 0, ..counter }).await.unwrap(), 1, "raised once");
    deleted.expect("a delete at a version whose reply was lost is done, not a conflict");
    assert!(direct.get(&doomed.key).await.unwrap().is_none());
    transacted.expect("a transaction whose reply was lost is done, not a conflict");
    assert!(direct.get(&ItemKey::new("LOST", "pair-b")).await.unwrap().is_some());
}
