//! The port contract suite and the router suite on the AWS adapters, against emulators
//! (moto, DynamoDB Local, or LocalStack). Skipped, with a notice, when no endpoint is set.

#[macro_use]
mod common;

use rp_shared::adapters::aws::{DynamoStore, KmsKeys, SqsQueue};
use rp_shared::backend::{self, Backend};
use rp_shared::ports::{ItemStore, KeyService, ManualClock, Queue, SystemClock};
use rp_shared::testing::aws::{
    clients, fresh_config, fresh_key, fresh_queue_with, fresh_table, shared_sdk_config,
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
