//! The composition root: which adapters stand behind the ports ([`Backend`]), chosen once at
//! start-up. Embedded (no AWS) or AWS; a Lambda function builds the AWS clients of the services
//! its endpoint declares only.

use crate::adapters::aws::{
    kms_over, sdk_config, sqs_over, AwsClients, AwsConfig, Built, ClientSet, DynamoStore, SnsPush,
};
use crate::adapters::embedded::{
    EmbeddedDb, EmbeddedPush, EmbeddedQueue, EmbeddedStore, LocalKeyFile, OpenError,
};
use crate::ports::{Clock, SystemClock};
use std::path::Path;
use std::sync::Arc;

pub use crate::ports::backend::{Backend, Services};

/// The name of the certificate re-queue (the SQS queue on AWS).
pub const CERT_QUEUE: &str = "cert-timeouts";
/// Deliveries before a message goes to the dead-letter queue (SQS `maxReceiveCount`).
pub const MAX_RECEIVE_COUNT: u32 = 5;

/// The embedded backend in `data_dir`: redb database, local queue, local key file, and a push
/// recorder.
pub fn embedded(data_dir: &Path) -> Result<Backend, OpenError> {
    embedded_with_clock(data_dir, Arc::new(SystemClock))
}

pub fn embedded_with_clock(data_dir: &Path, clock: Arc<dyn Clock>) -> Result<Backend, OpenError> {
    let db = EmbeddedDb::open(data_dir)?;
    let key_path = data_dir.join("keys.json");
    let keys = LocalKeyFile::open_or_create(&key_path)
        .map_err(|source| OpenError::Keys { path: key_path, source })?;
    Ok(Backend {
        store: Arc::new(EmbeddedStore::new(db.clone(), clock.clone())),
        queue: Arc::new(EmbeddedQueue::new(db, clock.clone(), CERT_QUEUE, MAX_RECEIVE_COUNT)),
        keys: Arc::new(keys),
        push: Arc::new(EmbeddedPush::new(data_dir)),
        clock,
    })
}

/// The AWS backend over clients built from `sdk`: DynamoDB's now, SQS's and KMS's at their
/// first call.
pub fn aws(config: &AwsConfig, sdk: &aws_config::SdkConfig, clock: Arc<dyn Clock>) -> Backend {
    aws_for(config, sdk, clock, ClientSet::ALL)
}

/// The AWS backend of a Lambda function: DynamoDB's client now, and those that `clients`
/// names at their first call; a service it leaves out is absent
/// ([`crate::ports::absent::Absent`]).
pub fn aws_for(
    config: &AwsConfig,
    sdk: &aws_config::SdkConfig,
    clock: Arc<dyn Clock>,
    clients: ClientSet,
) -> Backend {
    aws_over(config, aws_sdk_dynamodb::Client::new(sdk), clients.build(config, sdk), clock)
}

/// The AWS backend over given clients (each may point at its own endpoint).
pub fn aws_with_clients(config: &AwsConfig, clients: AwsClients, clock: Arc<dyn Clock>) -> Backend {
    let AwsClients { dynamo, sqs, kms, sns } = clients;
    let built = Built {
        queue: sqs_over(config, sqs.into()),
        keys: kms_over(config, kms.into()),
        push: Arc::new(SnsPush::new(sns)),
    };
    aws_over(config, dynamo, built, clock)
}

fn aws_over(
    config: &AwsConfig,
    dynamo: aws_sdk_dynamodb::Client,
    built: Built,
    clock: Arc<dyn Clock>,
) -> Backend {
    let store = Arc::new(DynamoStore::new(dynamo, &config.table_name, clock.clone()));
    let Built { queue, keys, push } = built;
    Backend { store, queue, keys, push, clock }
}

/// The AWS backend over clients from the environment's SDK configuration and
/// `config.trust_roots`, as a Lambda cold start builds it: the clients `clients` names.
pub async fn aws_from_config(
    config: &AwsConfig,
    clients: ClientSet,
) -> Result<Backend, aws_smithy_http_client::HttpClientError> {
    let sdk = sdk_config(config.trust_roots).await?;
    Ok(aws_for(config, &sdk, Arc::new(SystemClock), clients))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_endpoint_sees_the_services_it_declares_and_absent_ones_for_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let backend = embedded(dir.path()).unwrap();
        let all = backend.only(Services::ALL);
        assert!(Arc::ptr_eq(&all.queue, &backend.queue) && Arc::ptr_eq(&all.keys, &backend.keys));
        let keys = backend.only(Services::KEYS);
        assert!(Arc::ptr_eq(&keys.keys, &backend.keys) && Arc::ptr_eq(&keys.store, &backend.store));
        assert!(keys.queue.send("{}", std::time::Duration::ZERO).await.is_err(), "no queue");
        assert!(backend.queue.send("{}", std::time::Duration::ZERO).await.is_ok());
        let queue = backend.only(Services::QUEUE);
        assert!(Arc::ptr_eq(&queue.queue, &backend.queue));
        let context = rp_ports::EncryptionContext::new("app", "purpose");
        assert!(queue.keys.generate_data_key(&context).await.is_err(), "no key service");
        assert!(backend.keys.generate_data_key(&context).await.is_ok());
        assert_eq!(
            [
                Services::STORE,
                Services::KEYS,
                Services::QUEUE,
                Services::PUSH,
                Services::KEYS_PUSH,
                Services::ALL
            ]
            .map(Services::name),
            ["STORE", "KEYS", "QUEUE", "PUSH", "KEYS_PUSH", "ALL"]
        );
    }
}
