//! The deployment's stateful resources as `infra/template.yaml` defines them: the table, the
//! time-out queue with its dead-letter queue, and the two keys.
//!
//! The emulators get them from here (the AWS suites, `rp-admin create-table`,
//! `tests/provision_emulators.py` through the same template), so what the tests run on is what
//! a deployment gets. The template is compiled in: `rp-admin` needs no checkout beside it.

use crate::adapters::aws::provision::{KmsKeySpec, QueueSpec, TableSpec};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::sync::OnceLock;

/// The template, as deployed.
pub const TEMPLATE: &str = include_str!("../../infra/template.yaml");

/// The logical ids of the stateful resources in the template.
pub const TABLE: &str = "Table";
pub const QUEUE: &str = "CertTimeoutQueue";
pub const DEAD_LETTER_QUEUE: &str = "CertTimeoutDeadLetterQueue";
pub const ENVELOPE_KEY: &str = "EnvelopeKey";

/// The template's stateful resources.
#[derive(Debug, Clone)]
pub struct Stateful {
    pub table: TableSpec,
    pub queue: QueueSpec,
    pub dead_letter_queue: QueueSpec,
    pub envelope_key: KmsKeySpec,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Template {
    resources: BTreeMap<String, Resource>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Resource {
    #[serde(rename = "Type")]
    kind: String,
    #[serde(default)]
    properties: yaml_serde::Value,
}

impl Template {
    fn properties<T: DeserializeOwned>(&self, id: &str, kind: &str) -> Result<T, String> {
        let resource = self.resources.get(id).ok_or_else(|| format!("the template has no resource {id}"))?;
        if resource.kind != kind {
            return Err(format!("the template's {id} is a {}, not a {kind}", resource.kind));
        }
        yaml_serde::from_value(resource.properties.clone()).map_err(|e| format!("the template's {id}: {e}"))
    }
}

/// Reads the stateful resources from template text.
pub fn parse(text: &str) -> Result<Stateful, String> {
    let template: Template = yaml_serde::from_str(text).map_err(|e| format!("the template: {e}"))?;
    Ok(Stateful {
        table: template.properties(TABLE, "AWS::DynamoDB::Table")?,
        queue: template.properties(QUEUE, "AWS::SQS::Queue")?,
        dead_letter_queue: template.properties(DEAD_LETTER_QUEUE, "AWS::SQS::Queue")?,
        envelope_key: template.properties(ENVELOPE_KEY, "AWS::KMS::Key")?,
    })
}

/// The compiled-in template's stateful resources.
pub fn stateful() -> &'static Stateful {
    static STATEFUL: OnceLock<Stateful> = OnceLock::new();
    STATEFUL.get_or_init(|| parse(TEMPLATE).expect("infra/template.yaml defines the stateful resources"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_template_defines_what_the_adapters_use() {
        let stateful = stateful();
        let table = &stateful.table;
        let keys: Vec<_> =
            table.key_schema.iter().map(|k| (k.attribute_name.as_str(), k.key_type.as_str())).collect();
        assert_eq!(keys, [("pk", "HASH"), ("sk", "RANGE")]);
        let indexes: Vec<_> = table.global_secondary_indexes.iter().map(|i| i.index_name.as_str()).collect();
        assert_eq!(indexes, ["gsi1", "gsi2"]);
        assert_eq!(table.time_to_live_specification.as_ref().map(|t| t.attribute_name.as_str()), Some("ttl"));
        // The embedded queue dead-letters after as many receives as the deployed one.
        let redrive =
            stateful.queue.redrive_policy.as_ref().expect("the time-out queue has a redrive policy");
        assert_eq!(redrive.max_receive_count, crate::backend::MAX_RECEIVE_COUNT);
        assert!(stateful.dead_letter_queue.redrive_policy.is_none());
        assert_eq!(stateful.envelope_key.key_spec, None, "the envelope key is symmetric");
    }

    #[test]
    fn a_resource_of_another_type_or_a_missing_one_is_named() {
        let text = TEMPLATE.replacen("Type: AWS::DynamoDB::Table", "Type: AWS::S3::Bucket", 1);
        assert_eq!(
            parse(&text).unwrap_err(),
            "the template's Table is a AWS::S3::Bucket, not a AWS::DynamoDB::Table"
        );
        let text = TEMPLATE.replacen("  EnvelopeKey:\n", "  OtherKey:\n", 1);
        assert_eq!(parse(&text).unwrap_err(), "the template has no resource EnvelopeKey");
    }
}
