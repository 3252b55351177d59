//! Creating the stateful resources (table, queue with its dead-letter queue, keys) on an
//! emulator, from their CloudFormation definitions.
//!
//! On AWS the SAM template creates them. For emulators (the AWS suites, `rp-admin create-table`,
//! the local server on the AWS adapters) they are created from the same template's properties,
//! deserialized into the specs below (CloudFormation's own property names), so a wrong key
//! schema, index or redrive setting in the template fails the tests that run on them. What an
//! emulator cannot show (encryption at rest, point-in-time recovery, key policies, deletion
//! protection) is not read.

use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection,
    ProjectionType, ScalarAttributeType, TableStatus, TimeToLiveSpecification,
};
use aws_sdk_sqs::types::QueueAttributeName;
use rp_ports::store::StoreError;
use serde::Deserialize;
use std::time::Duration;

/// `AWS::DynamoDB::Table` properties.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct TableSpec {
    pub attribute_definitions: Vec<AttributeSpec>,
    pub key_schema: Vec<KeySpec>,
    #[serde(default)]
    pub global_secondary_indexes: Vec<IndexSpec>,
    pub billing_mode: Option<String>,
    pub time_to_live_specification: Option<TtlSpec>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct AttributeSpec {
    pub attribute_name: String,
    pub attribute_type: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct KeySpec {
    pub attribute_name: String,
    pub key_type: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct IndexSpec {
    pub index_name: String,
    pub key_schema: Vec<KeySpec>,
    pub projection: ProjectionSpec,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ProjectionSpec {
    pub projection_type: String,
    #[serde(default)]
    pub non_key_attributes: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct TtlSpec {
    pub attribute_name: String,
    pub enabled: bool,
}

/// `AWS::SQS::Queue` properties (those that change what a client sees).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct QueueSpec {
    pub visibility_timeout: Option<u32>,
    pub message_retention_period: Option<u32>,
    pub delay_seconds: Option<u32>,
    pub receive_message_wait_time_seconds: Option<u32>,
    /// The target is the template's other queue (an ARN only a deployment knows).
    pub redrive_policy: Option<RedriveSpec>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RedriveSpec {
    pub max_receive_count: u32,
}

/// `AWS::KMS::Key` properties.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct KmsKeySpec {
    pub description: Option<String>,
    /// `SYMMETRIC_DEFAULT` when absent, as in CloudFormation.
    pub key_spec: Option<String>,
    /// `ENCRYPT_DECRYPT` when absent.
    pub key_usage: Option<String>,
}

fn key(spec: &KeySpec) -> KeySchemaElement {
    KeySchemaElement::builder()
        .attribute_name(&spec.attribute_name)
        .key_type(KeyType::from(spec.key_type.as_str()))
        .build()
        .expect("attribute name and key type are set")
}

/// Creates table `name` as `spec` defines it, waits until it is active and turns on its TTL. An
/// existing table is left as it is.
pub async fn create_table(
    client: &aws_sdk_dynamodb::Client,
    name: &str,
    spec: &TableSpec,
) -> Result<(), StoreError> {
    let attributes = spec.attribute_definitions.iter().map(|a| {
        AttributeDefinition::builder()
            .attribute_name(&a.attribute_name)
            .attribute_type(ScalarAttributeType::from(a.attribute_type.as_str()))
            .build()
            .expect("attribute name and type are set")
    });
    let indexes = spec.global_secondary_indexes.iter().map(|i| {
        let projection = Projection::builder()
            .projection_type(ProjectionType::from(i.projection.projection_type.as_str()))
            .set_non_key_attributes(
                (!i.projection.non_key_attributes.is_empty())
                    .then(|| i.projection.non_key_attributes.clone()),
            )
            .build();
        GlobalSecondaryIndex::builder()
            .index_name(&i.index_name)
            .set_key_schema(Some(i.key_schema.iter().map(key).collect()))
            .projection(projection)
            .build()
            .expect("index name and key schema are set")
    });
    let created = client
        .create_table()
        .table_name(name)
        .set_billing_mode(spec.billing_mode.as_deref().map(BillingMode::from))
        .set_attribute_definitions(Some(attributes.collect()))
        .set_key_schema(Some(spec.key_schema.iter().map(key).collect()))
        .set_global_secondary_indexes(Some(indexes.collect()).filter(|i: &Vec<_>| !i.is_empty()))
        .send()
        .await;
    match created {
        Ok(_) => {}
        Err(e) if e.as_service_error().is_some_and(|s| s.is_resource_in_use_exception()) => return Ok(()),
        Err(e) => return Err(StoreError::unavailable(e)),
    }
    for _ in 0..120 {
        let described =
            client.describe_table().table_name(name).send().await.map_err(StoreError::unavailable)?;
        if described.table.and_then(|t| t.table_status).is_some_and(|s| s == TableStatus::Active) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    if let Some(ttl) = spec.time_to_live_specification.as_ref().filter(|t| t.enabled) {
        let ttl = TimeToLiveSpecification::builder()
            .attribute_name(&ttl.attribute_name)
            .enabled(true)
            .build()
            .expect("attribute name and state are set");
        client
            .update_time_to_live()
            .table_name(name)
            .time_to_live_specification(ttl)
            .send()
            .await
            .map_err(StoreError::unavailable)?;
    }
    Ok(())
}

/// Why a queue or key could not be created.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ProvisionError(String);

fn failed(what: &str, e: impl std::fmt::Display) -> ProvisionError {
    ProvisionError(format!("{what}: {e}"))
}

/// Creates queue `name` as `spec` defines it; `dead_letter_arn` is the target of its redrive
/// policy, if it has one. Returns its URL.
pub async fn create_queue(
    client: &aws_sdk_sqs::Client,
    name: &str,
    spec: &QueueSpec,
    dead_letter_arn: Option<&str>,
) -> Result<String, ProvisionError> {
    let mut request = client.create_queue().queue_name(name);
    let numbers = [
        (QueueAttributeName::VisibilityTimeout, spec.visibility_timeout),
        (QueueAttributeName::MessageRetentionPeriod, spec.message_retention_period),
        (QueueAttributeName::DelaySeconds, spec.delay_seconds),
        (QueueAttributeName::ReceiveMessageWaitTimeSeconds, spec.receive_message_wait_time_seconds),
    ];
    for (attribute, value) in numbers {
        if let Some(value) = value {
            request = request.attributes(attribute, value.to_string());
        }
    }
    if let Some(redrive) = &spec.redrive_policy {
        let target =
            dead_letter_arn.ok_or_else(|| failed(name, "its redrive policy needs a dead-letter queue"))?;
        let policy = serde_json::json!({ "deadLetterTargetArn": target, "maxReceiveCount": redrive.max_receive_count });
        request = request.attributes(QueueAttributeName::RedrivePolicy, policy.to_string());
    }
    let created =
        request.send().await.map_err(|e| failed(name, aws_sdk_sqs::error::DisplayErrorContext(e)))?;
    created.queue_url.ok_or_else(|| failed(name, "no queue URL in the answer"))
}

/// The ARN of the queue at `url`.
pub async fn queue_arn(client: &aws_sdk_sqs::Client, url: &str) -> Result<String, ProvisionError> {
    let attributes = client
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .map_err(|e| failed(url, aws_sdk_sqs::error::DisplayErrorContext(e)))?;
    attributes
        .attributes
        .and_then(|mut a| a.remove(&QueueAttributeName::QueueArn))
        .ok_or_else(|| failed(url, "no QueueArn attribute"))
}

/// Creates a key as `spec` defines it; returns its id.
pub async fn create_key(client: &aws_sdk_kms::Client, spec: &KmsKeySpec) -> Result<String, ProvisionError> {
    use aws_sdk_kms::types::{KeySpec, KeyUsageType};
    let created = client
        .create_key()
        .set_description(spec.description.clone())
        .set_key_spec(spec.key_spec.as_deref().map(KeySpec::from))
        .set_key_usage(spec.key_usage.as_deref().map(KeyUsageType::from))
        .send()
        .await
        .map_err(|e| failed("CreateKey", aws_sdk_kms::error::DisplayErrorContext(e)))?;
    created.key_metadata.map(|m| m.key_id).ok_or_else(|| failed("CreateKey", "no key metadata in the answer"))
}
