//! AWS adapters: DynamoDB (store), SQS (queue), KMS (keys). Clients are built once per process
//! (per Lambda cold start) from one `SdkConfig`.

mod dynamo;
mod kms;
mod sqs;

pub use dynamo::{create_table, DynamoStore};
pub use kms::KmsKeys;
pub use sqs::SqsQueue;

use crate::backend::Backend;
use crate::ports::Clock;
use std::sync::Arc;

/// One client per service.
#[derive(Clone)]
pub struct AwsClients {
    pub dynamo: aws_sdk_dynamodb::Client,
    pub sqs: aws_sdk_sqs::Client,
    pub kms: aws_sdk_kms::Client,
}

/// Where the AWS resources are: names and ids come from the environment the SAM template sets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AwsConfig {
    pub table_name: String,
    pub queue_url: String,
    pub dead_letter_queue_url: Option<String>,
    pub envelope_key_id: String,
    pub signing_key_id: String,
}

impl AwsConfig {
    /// Reads `TABLE_NAME`, `QUEUE_URL`, `KMS_ENVELOPE_KEY_ID`, `KMS_SIGNING_KEY_ID` (required) and
    /// `DEAD_LETTER_QUEUE_URL` (optional); every missing one is named in one error.
    pub fn from_env() -> Result<Self, MissingConfig> {
        Self::from_lookup(&|name| std::env::var(name).ok())
    }

    pub fn from_lookup(get: &impl Fn(&str) -> Option<String>) -> Result<Self, MissingConfig> {
        let mut missing = Vec::new();
        let mut required = |name: &'static str| {
            get(name).filter(|v| !v.is_empty()).unwrap_or_else(|| {
                missing.push(name);
                String::new()
            })
        };
        let config = Self {
            table_name: required("TABLE_NAME"),
            queue_url: required("QUEUE_URL"),
            envelope_key_id: required("KMS_ENVELOPE_KEY_ID"),
            signing_key_id: required("KMS_SIGNING_KEY_ID"),
            dead_letter_queue_url: get("DEAD_LETTER_QUEUE_URL").filter(|v| !v.is_empty()),
        };
        if missing.is_empty() {
            Ok(config)
        } else {
            Err(MissingConfig(missing))
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[error("missing configuration: {}", .0.join(", "))]
pub struct MissingConfig(pub Vec<&'static str>);

impl Backend {
    /// The AWS backend over clients built from `sdk`.
    pub fn aws(config: &AwsConfig, sdk: &aws_config::SdkConfig, clock: Arc<dyn Clock>) -> Self {
        let clients = AwsClients {
            dynamo: aws_sdk_dynamodb::Client::new(sdk),
            sqs: aws_sdk_sqs::Client::new(sdk),
            kms: aws_sdk_kms::Client::new(sdk),
        };
        Self::aws_with_clients(config, clients, clock)
    }

    /// The AWS backend over given clients (each may point at its own endpoint).
    pub fn aws_with_clients(config: &AwsConfig, clients: AwsClients, clock: Arc<dyn Clock>) -> Self {
        let AwsClients { dynamo, sqs, kms } = clients;
        Self {
            store: Arc::new(DynamoStore::new(dynamo, &config.table_name, clock.clone())),
            queue: Arc::new(SqsQueue::new(sqs, &config.queue_url, config.dead_letter_queue_url.clone())),
            keys: Arc::new(KmsKeys::new(kms, &config.envelope_key_id, &config.signing_key_id)),
            clock,
        }
    }

    /// The AWS backend over clients from the default SDK configuration, as a Lambda cold start
    /// builds it.
    pub async fn aws_from_config(config: &AwsConfig) -> Self {
        let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
        Self::aws(config, &sdk, Arc::new(crate::ports::SystemClock))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_missing_variable_is_reported_at_once() {
        let err = AwsConfig::from_lookup(&|name| (name == "QUEUE_URL").then(|| "q".to_owned())).unwrap_err();
        assert_eq!(err.0, vec!["TABLE_NAME", "KMS_ENVELOPE_KEY_ID", "KMS_SIGNING_KEY_ID"]);
        assert_eq!(
            err.to_string(),
            "missing configuration: TABLE_NAME, KMS_ENVELOPE_KEY_ID, KMS_SIGNING_KEY_ID"
        );
        let ok = AwsConfig::from_lookup(&|name| Some(format!("{name}-value"))).unwrap();
        assert_eq!(ok.table_name, "TABLE_NAME-value");
    }
}
