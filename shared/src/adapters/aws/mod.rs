//! AWS adapters: DynamoDB (store), SQS (queue), KMS (keys). Clients are built once per process
//! (per Lambda cold start) from one `SdkConfig`.

mod dynamo;
mod kms;
mod sqs;
mod tls;

pub use dynamo::{create_table, DynamoStore};
pub use kms::KmsKeys;
pub use sqs::SqsQueue;
pub use tls::{https_client, sdk_config, TrustRoots, AMAZON_TRUST_ROOTS};

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
    pub trust_roots: TrustRoots,
}

impl AwsConfig {
    /// Reads `TABLE_NAME`, `QUEUE_URL`, `KMS_ENVELOPE_KEY_ID`, `KMS_SIGNING_KEY_ID` (required),
    /// `DEAD_LETTER_QUEUE_URL` and `TLS_TRUST_ROOTS` (optional); every problem is named in one
    /// error.
    pub fn from_env() -> Result<Self, AwsConfigError> {
        Self::from_lookup(&|name| std::env::var(name).ok())
    }

    pub fn from_lookup(get: &impl Fn(&str) -> Option<String>) -> Result<Self, AwsConfigError> {
        let mut problems = Vec::new();
        let mut required = |name: &'static str| {
            get(name).filter(|v| !v.is_empty()).unwrap_or_else(|| {
                problems.push(format!("{name} is not set"));
                String::new()
            })
        };
        let config = Self {
            table_name: required("TABLE_NAME"),
            queue_url: required("QUEUE_URL"),
            envelope_key_id: required("KMS_ENVELOPE_KEY_ID"),
            signing_key_id: required("KMS_SIGNING_KEY_ID"),
            dead_letter_queue_url: get("DEAD_LETTER_QUEUE_URL").filter(|v| !v.is_empty()),
            trust_roots: TrustRoots::from_lookup(get).unwrap_or_else(|problem| {
                problems.push(problem);
                TrustRoots::default()
            }),
        };
        if problems.is_empty() {
            Ok(config)
        } else {
            Err(AwsConfigError(problems))
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[error("invalid AWS configuration: {}", .0.join("; "))]
pub struct AwsConfigError(pub Vec<String>);

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

    /// The AWS backend over clients from the environment's SDK configuration and
    /// `config.trust_roots`, as a Lambda cold start builds it.
    pub async fn aws_from_config(
        config: &AwsConfig,
    ) -> Result<Self, aws_smithy_http_client::HttpClientError> {
        let sdk = sdk_config(config.trust_roots).await?;
        Ok(Self::aws(config, &sdk, Arc::new(crate::ports::SystemClock)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_missing_variable_is_reported_at_once() {
        let get = |name: &str| match name {
            "QUEUE_URL" => Some("q".to_owned()),
            "TLS_TRUST_ROOTS" => Some("all".to_owned()),
            _ => None,
        };
        let err = AwsConfig::from_lookup(&get).unwrap_err();
        assert_eq!(
            err.0,
            vec![
                "TABLE_NAME is not set",
                "KMS_ENVELOPE_KEY_ID is not set",
                "KMS_SIGNING_KEY_ID is not set",
                "TLS_TRUST_ROOTS must be 'amazon' or 'system', not 'all'",
            ]
        );
        let ok = AwsConfig::from_lookup(&|name| (name != "TLS_TRUST_ROOTS").then(|| format!("{name}-value")))
            .unwrap();
        assert_eq!(ok.table_name, "TABLE_NAME-value");
        assert_eq!(ok.trust_roots, TrustRoots::Amazon);
    }
}
