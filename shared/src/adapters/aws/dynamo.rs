//! The DynamoDB adapter of the storage port.
//!
//! One table: `pk`/`sk` strings, the version `v`, the TTL attribute `ttl` (epoch seconds), the
//! index keys `gsi1pk`/`gsi1sk` and `gsi2pk`/`gsi2sk` (two GSIs projecting all attributes), the
//! record itself under `d`, and a counter's value under `n`. Every conditional write carries its
//! condition expression; expired items (which DynamoDB deletes lazily) count as absent.

use crate::ports::store::*;
use crate::ports::Clock;
use async_trait::async_trait;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, ConditionCheck, Delete, GlobalSecondaryIndex,
    KeySchemaElement, KeyType, Projection, ProjectionType, Put, ReturnValue, ScalarAttributeType,
    TimeToLiveSpecification, TransactWriteItem, Update,
};
use aws_sdk_dynamodb::Client;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// The item as DynamoDB holds it. Private: the rest of the crate sees [`Item`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct DynamoItem {
    pk: String,
    sk: String,
    v: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ttl: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    gsi1pk: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    gsi1sk: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    gsi2pk: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    gsi2sk: Option<String>,
    #[serde(default)]
    d: Map<String, Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    n: Option<i64>,
}

impl From<&Item> for DynamoItem {
    fn from(item: &Item) -> Self {
        let mut d = item.attrs.clone();
        let n = d.remove(COUNTER_ATTR).and_then(|v| v.as_i64());
        let split =
            |k: &Option<ItemKey>| (k.as_ref().map(|k| k.pk.clone()), k.as_ref().map(|k| k.sk.clone()));
        let (gsi1pk, gsi1sk) = split(&item.gsi1);
        let (gsi2pk, gsi2sk) = split(&item.gsi2);
        Self {
            pk: item.key.pk.clone(),
            sk: item.key.sk.clone(),
            v: item.version,
            ttl: item.expires_at,
            gsi1pk,
            gsi1sk,
            gsi2pk,
            gsi2sk,
            d,
            n,
        }
    }
}

impl TryFrom<DynamoItem> for Item {
    type Error = StoreError;

    fn try_from(raw: DynamoItem) -> Result<Self, StoreError> {
        let join = |pk: Option<String>, sk: Option<String>| match (pk, sk) {
            (Some(pk), Some(sk)) => Ok(Some(ItemKey { pk, sk })),
            (None, None) => Ok(None),
            _ => Err(StoreError::Encoding("an index key is half-set".into())),
        };
        let mut attrs = raw.d;
        if let Some(n) = raw.n {
            attrs.insert(COUNTER_ATTR.into(), n.into());
        }
        Ok(Item {
            key: ItemKey { pk: raw.pk, sk: raw.sk },
            version: raw.v,
            expires_at: raw.ttl,
            gsi1: join(raw.gsi1pk, raw.gsi1sk)?,
            gsi2: join(raw.gsi2pk, raw.gsi2sk)?,
            attrs,
        })
    }
}

type Attrs = HashMap<String, AttributeValue>;

fn to_attrs(item: &Item) -> Result<Attrs, StoreError> {
    serde_dynamo::to_item(DynamoItem::from(item)).map_err(StoreError::encoding)
}

fn from_attrs(attrs: Attrs) -> Result<Item, StoreError> {
    let raw: DynamoItem = serde_dynamo::from_item(attrs).map_err(StoreError::encoding)?;
    raw.try_into()
}

fn s(value: &str) -> AttributeValue {
    AttributeValue::S(value.to_owned())
}

fn n(value: impl ToString) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

fn key_attrs(key: &ItemKey) -> Attrs {
    HashMap::from([("pk".to_owned(), s(&key.pk)), ("sk".to_owned(), s(&key.sk))])
}

/// A condition expression with its names and values.
#[derive(Default)]
struct Expr {
    text: Option<String>,
    names: HashMap<String, String>,
    values: Attrs,
}

const LIVE: &str = "(attribute_not_exists(#ttl) OR #ttl > :now)";

fn condition_expr(condition: Condition, now: i64) -> Expr {
    let mut e = Expr::default();
    let text = match condition {
        Condition::Any => return e,
        Condition::Absent => "attribute_not_exists(pk) OR #ttl <= :now".to_owned(),
        Condition::Exists => format!("attribute_exists(pk) AND {LIVE}"),
        Condition::Version(v) => {
            e.names.insert("#v".into(), "v".into());
            e.values.insert(":expected".into(), n(v));
            format!("#v = :expected AND {LIVE}")
        }
    };
    e.names.insert("#ttl".into(), "ttl".into());
    e.values.insert(":now".into(), n(now));
    e.text = Some(text);
    e
}

fn opt<T>(map: HashMap<String, T>) -> Option<HashMap<String, T>> {
    (!map.is_empty()).then_some(map)
}

#[derive(Clone)]
pub struct DynamoStore {
    client: Client,
    table: String,
    clock: Arc<dyn Clock>,
}

impl DynamoStore {
    pub fn new(client: Client, table: impl Into<String>, clock: Arc<dyn Clock>) -> Self {
        Self { client, table: table.into(), clock }
    }

    /// The write for `item` under `condition`, with the version it will have (`None`: the
    /// store decides, for `Exists`/`Any`, which become an update that adds 1).
    fn write_op(
        &self,
        mut item: Item,
        condition: Condition,
        now: i64,
    ) -> Result<TransactWriteItem, StoreError> {
        let cond = condition_expr(condition, now);
        match condition {
            Condition::Absent | Condition::Version(_) => {
                item.version = match condition {
                    Condition::Version(v) => v + 1,
                    _ => 1,
                };
                let put = Put::builder()
                    .table_name(&self.table)
                    .set_item(Some(to_attrs(&item)?))
                    .set_condition_expression(cond.text)
                    .set_expression_attribute_names(opt(cond.names))
                    .set_expression_attribute_values(opt(cond.values))
                    .build()
                    .map_err(StoreError::encoding)?;
                Ok(TransactWriteItem::builder().put(put).build())
            }
            Condition::Exists | Condition::Any => {
                let update = self.update_parts(&item, cond)?;
                let update = Update::builder()
                    .table_name(&self.table)
                    .set_key(Some(key_attrs(&item.key)))
                    .update_expression(update.text.clone().expect("an update has an expression"))
                    .set_condition_expression(update.condition)
                    .set_expression_attribute_names(opt(update.names))
                    .set_expression_attribute_values(opt(update.values))
                    .build()
                    .map_err(StoreError::encoding)?;
                Ok(TransactWriteItem::builder().update(update).build())
            }
        }
    }

    /// `SET` every attribute of `item`, `REMOVE` the unset optional ones, `ADD` 1 to the version.
    fn update_parts(&self, item: &Item, cond: Expr) -> Result<UpdateParts, StoreError> {
        let attrs = to_attrs(item)?;
        let mut names = cond.names;
        let mut values = cond.values;
        let mut sets = Vec::new();
        for (i, (name, value)) in
            attrs.into_iter().filter(|(k, _)| k != "pk" && k != "sk" && k != "v").enumerate()
        {
            names.insert(format!("#a{i}"), name);
            values.insert(format!(":a{i}"), value);
            sets.push(format!("#a{i} = :a{i}"));
        }
        let dynamo = DynamoItem::from(item);
        let mut removes = Vec::new();
        for (name, unset) in [
            ("ttl", dynamo.ttl.is_none()),
            ("gsi1pk", dynamo.gsi1pk.is_none()),
            ("gsi1sk", dynamo.gsi1sk.is_none()),
            ("gsi2pk", dynamo.gsi2pk.is_none()),
            ("gsi2sk", dynamo.gsi2sk.is_none()),
            ("n", dynamo.n.is_none()),
        ] {
            if unset {
                names.insert(format!("#r_{name}"), name.to_owned());
                removes.push(format!("#r_{name}"));
            }
        }
        names.insert("#v".into(), "v".into());
        values.insert(":one".into(), n(1));
        let mut text = format!("SET {}", sets.join(", "));
        if !removes.is_empty() {
            text.push_str(&format!(" REMOVE {}", removes.join(", ")));
        }
        text.push_str(" ADD #v :one");
        Ok(UpdateParts { text: Some(text), condition: cond.text, names, values })
    }

    async fn apply_single(&self, op: TransactWriteItem) -> Result<Option<Item>, StoreError> {
        if let Some(put) = op.put {
            let result = self
                .client
                .put_item()
                .table_name(put.table_name)
                .set_item(Some(put.item))
                .set_condition_expression(put.condition_expression)
                .set_expression_attribute_names(put.expression_attribute_names)
                .set_expression_attribute_values(put.expression_attribute_values)
                .send()
                .await;
            result.map_err(map_conditional)?;
            return Ok(None);
        }
        if let Some(update) = op.update {
            let result = self
                .client
                .update_item()
                .table_name(update.table_name)
                .set_key(Some(update.key))
                .update_expression(update.update_expression)
                .set_condition_expression(update.condition_expression)
                .set_expression_attribute_names(update.expression_attribute_names)
                .set_expression_attribute_values(update.expression_attribute_values)
                .return_values(ReturnValue::AllNew)
                .send()
                .await
                .map_err(map_conditional)?;
            return result.attributes.map(from_attrs).transpose();
        }
        if let Some(delete) = op.delete {
            self.client
                .delete_item()
                .table_name(delete.table_name)
                .set_key(Some(delete.key))
                .set_condition_expression(delete.condition_expression)
                .set_expression_attribute_names(delete.expression_attribute_names)
                .set_expression_attribute_values(delete.expression_attribute_values)
                .send()
                .await
                .map_err(map_conditional)?;
        }
        Ok(None)
    }
}

struct UpdateParts {
    text: Option<String>,
    condition: Option<String>,
    names: HashMap<String, String>,
    values: Attrs,
}

/// A failed condition is a conflict; anything else means the store is unavailable.
fn map_conditional<E, R>(err: SdkError<E, R>) -> StoreError
where
    E: aws_sdk_dynamodb::error::ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    let code = err.as_service_error().and_then(|e| e.code()).unwrap_or_default();
    match code {
        "ConditionalCheckFailedException" | "TransactionConflictException" => StoreError::Conflict,
        "ValidationException" => StoreError::Invalid(
            err.as_service_error().and_then(|e| e.message()).unwrap_or("invalid request").to_owned(),
        ),
        _ => StoreError::unavailable(err),
    }
}

#[async_trait]
impl ItemStore for DynamoStore {
    fn kind(&self) -> &'static str {
        "dynamodb"
    }

    async fn get(&self, key: &ItemKey) -> Result<Option<Item>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(key_attrs(key)))
            .consistent_read(true)
            .send()
            .await
            .map_err(map_conditional)?;
        let now = self.clock.epoch_secs();
        match out.item {
            Some(attrs) => Ok(Some(from_attrs(attrs)?).filter(|i| !i.is_expired(now))),
            None => Ok(None),
        }
    }

    async fn put(&self, item: Item, condition: Condition) -> Result<Item, StoreError> {
        let now = self.clock.epoch_secs();
        let mut stored = item.clone();
        let op = self.write_op(item, condition, now)?;
        match condition {
            Condition::Absent => stored.version = 1,
            Condition::Version(v) => stored.version = v + 1,
            _ => {}
        }
        match self.apply_single(op).await? {
            Some(updated) => Ok(updated),
            None => Ok(stored),
        }
    }

    async fn delete(&self, key: &ItemKey, condition: Condition) -> Result<(), StoreError> {
        let cond = condition_expr(condition, self.clock.epoch_secs());
        self.client
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(key_attrs(key)))
            .set_condition_expression(cond.text)
            .set_expression_attribute_names(opt(cond.names))
            .set_expression_attribute_values(opt(cond.values))
            .send()
            .await
            .map_err(map_conditional)?;
        Ok(())
    }

    async fn transact(&self, ops: Vec<WriteOp>) -> Result<(), StoreError> {
        if ops.is_empty() || ops.len() > MAX_TRANSACTION_ITEMS {
            return Err(StoreError::Invalid(format!(
                "a transaction takes 1 to {MAX_TRANSACTION_ITEMS} operations"
            )));
        }
        let now = self.clock.epoch_secs();
        let mut seen = HashSet::new();
        let mut items = Vec::with_capacity(ops.len());
        for op in ops {
            let key = match &op {
                WriteOp::Put { item, .. } => item.key.clone(),
                WriteOp::Delete { key, .. } | WriteOp::Check { key, .. } => key.clone(),
            };
            if !seen.insert(key.clone()) {
                return Err(StoreError::Invalid("a transaction may touch an item only once".into()));
            }
            items.push(match op {
                WriteOp::Put { item, condition } => self.write_op(item, condition, now)?,
                WriteOp::Delete { key, condition } => {
                    let cond = condition_expr(condition, now);
                    let delete = Delete::builder()
                        .table_name(&self.table)
                        .set_key(Some(key_attrs(&key)))
                        .set_condition_expression(cond.text)
                        .set_expression_attribute_names(opt(cond.names))
                        .set_expression_attribute_values(opt(cond.values))
                        .build()
                        .map_err(StoreError::encoding)?;
                    TransactWriteItem::builder().delete(delete).build()
                }
                WriteOp::Check { key, condition } => {
                    let cond = condition_expr(condition, now);
                    let Some(text) = cond.text else { continue };
                    let check = ConditionCheck::builder()
                        .table_name(&self.table)
                        .set_key(Some(key_attrs(&key)))
                        .condition_expression(text)
                        .set_expression_attribute_names(opt(cond.names))
                        .set_expression_attribute_values(opt(cond.values))
                        .build()
                        .map_err(StoreError::encoding)?;
                    TransactWriteItem::builder().condition_check(check).build()
                }
            });
        }
        if items.len() == 1 {
            // DynamoDB wants a transaction of at least one write; a single op is a plain write.
            return self.apply_single(items.pop().expect("one op")).await.map(|_| ());
        }
        match self.client.transact_write_items().set_transact_items(Some(items)).send().await {
            Ok(_) => Ok(()),
            Err(err) => match err.as_service_error() {
                Some(TransactWriteItemsError::TransactionCanceledException(_)) => Err(StoreError::Conflict),
                _ => Err(map_conditional(err)),
            },
        }
    }

    async fn query(&self, query: Query) -> Result<Page, StoreError> {
        if query.limit == 0 {
            return Err(StoreError::Invalid("a query limit must be at least 1".into()));
        }
        if let Some(cursor) = &query.cursor {
            if !cursor.belongs_to(&query) {
                return Err(StoreError::Invalid("the cursor belongs to another query".into()));
            }
        }
        let (pk_attr, sk_attr) = match query.index {
            None => ("pk", "sk"),
            Some(Index::Gsi1) => ("gsi1pk", "gsi1sk"),
            Some(Index::Gsi2) => ("gsi2pk", "gsi2sk"),
        };
        let mut names =
            HashMap::from([("#pk".to_owned(), pk_attr.to_owned()), ("#ttl".to_owned(), "ttl".to_owned())]);
        let mut values = HashMap::from([(":pk".to_owned(), s(&query.pk))]);
        values.insert(":now".into(), n(self.clock.epoch_secs()));
        let mut key_condition = "#pk = :pk".to_owned();
        match &query.sort {
            SortKey::All => {}
            SortKey::BeginsWith(prefix) => {
                names.insert("#sk".into(), sk_attr.into());
                values.insert(":prefix".into(), s(prefix));
                key_condition.push_str(" AND begins_with(#sk, :prefix)");
            }
            SortKey::Between(lo, hi) => {
                names.insert("#sk".into(), sk_attr.into());
                values.insert(":lo".into(), s(lo));
                values.insert(":hi".into(), s(hi));
                key_condition.push_str(" AND #sk BETWEEN :lo AND :hi");
            }
        }
        let mut start = query.cursor.as_ref().map(|c| {
            let mut key = key_attrs(&c.key);
            if let Some(ik) = &c.index_key {
                key.insert(pk_attr.to_owned(), s(&ik.pk));
                key.insert(sk_attr.to_owned(), s(&ik.sk));
            }
            key
        });
        let mut page = Page::default();
        loop {
            let remaining = query.limit - page.items.len();
            let out = self
                .client
                .query()
                .table_name(&self.table)
                .set_index_name(query.index.map(|i| i.name().to_owned()))
                .key_condition_expression(&key_condition)
                .filter_expression(LIVE)
                .set_expression_attribute_names(Some(names.clone()))
                .set_expression_attribute_values(Some(values.clone()))
                .set_exclusive_start_key(start.take())
                .limit(remaining.min(1000) as i32)
                .consistent_read(query.index.is_none())
                .send()
                .await
                .map_err(map_conditional)?;
            for attrs in out.items.unwrap_or_default() {
                page.items.push(from_attrs(attrs)?);
            }
            match out.last_evaluated_key {
                Some(next) if page.items.len() < query.limit => start = Some(next),
                Some(_) => {
                    let last = page.items.last().expect("a full page has a last item");
                    page.cursor = Some(Cursor {
                        key: last.key.clone(),
                        index_key: query.index.and_then(|i| last.index_key(i).cloned()),
                    });
                    break;
                }
                None => break,
            }
        }
        Ok(page)
    }

    async fn increment(&self, increment: Increment) -> Result<i64, StoreError> {
        let mut names = HashMap::from([("#n".to_owned(), "n".to_owned()), ("#v".to_owned(), "v".to_owned())]);
        let mut values = HashMap::from([(":by".to_owned(), n(increment.by)), (":one".to_owned(), n(1))]);
        let mut update = "ADD #n :by, #v :one".to_owned();
        if let Some(ttl) = increment.expires_at {
            names.insert("#ttl".into(), "ttl".into());
            values.insert(":ttl".into(), n(ttl));
            update = format!("SET #ttl = if_not_exists(#ttl, :ttl) {update}");
        }
        if increment.limit.is_some_and(|limit| increment.by > limit) {
            return Err(StoreError::LimitReached);
        }
        let condition = increment.limit.map(|limit| {
            values.insert(":max".into(), n(limit - increment.by));
            "attribute_not_exists(#n) OR #n <= :max".to_owned()
        });
        let out = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key_attrs(&increment.key)))
            .update_expression(update)
            .set_condition_expression(condition)
            .set_expression_attribute_names(Some(names))
            .set_expression_attribute_values(Some(values))
            .return_values(ReturnValue::AllNew)
            .send()
            .await
            .map_err(|e| match map_conditional(e) {
                StoreError::Conflict => StoreError::LimitReached,
                other => other,
            })?;
        let value = out.attributes.as_ref().and_then(|a| a.get("n")).and_then(|v| v.as_n().ok());
        value
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| StoreError::Encoding("the counter has no value".into()))
    }
}

/// Creates the table with its two GSIs and TTL (for emulators and `rp-admin create-table`; on
/// AWS the SAM template creates it). Waits until it is active. An existing table is left as is.
pub async fn create_table(client: &Client, table: &str) -> Result<(), StoreError> {
    let attr = |name: &str| {
        AttributeDefinition::builder()
            .attribute_name(name)
            .attribute_type(ScalarAttributeType::S)
            .build()
            .expect("attribute definition is complete")
    };
    let key = |name: &str, kind: KeyType| {
        KeySchemaElement::builder()
            .attribute_name(name)
            .key_type(kind)
            .build()
            .expect("key schema is complete")
    };
    let gsi = |index: Index| {
        let (pk, sk) = match index {
            Index::Gsi1 => ("gsi1pk", "gsi1sk"),
            Index::Gsi2 => ("gsi2pk", "gsi2sk"),
        };
        GlobalSecondaryIndex::builder()
            .index_name(index.name())
            .key_schema(key(pk, KeyType::Hash))
            .key_schema(key(sk, KeyType::Range))
            .projection(Projection::builder().projection_type(ProjectionType::All).build())
            .build()
            .expect("index is complete")
    };
    let created = client
        .create_table()
        .table_name(table)
        .billing_mode(BillingMode::PayPerRequest)
        .set_attribute_definitions(Some(
            ["pk", "sk", "gsi1pk", "gsi1sk", "gsi2pk", "gsi2sk"].into_iter().map(attr).collect(),
        ))
        .key_schema(key("pk", KeyType::Hash))
        .key_schema(key("sk", KeyType::Range))
        .global_secondary_indexes(gsi(Index::Gsi1))
        .global_secondary_indexes(gsi(Index::Gsi2))
        .send()
        .await;
    match created {
        Ok(_) => {}
        Err(e) if e.as_service_error().is_some_and(|s| s.is_resource_in_use_exception()) => return Ok(()),
        Err(e) => return Err(StoreError::unavailable(e)),
    }
    for _ in 0..120 {
        let described =
            client.describe_table().table_name(table).send().await.map_err(StoreError::unavailable)?;
        let active = described
            .table
            .and_then(|t| t.table_status)
            .is_some_and(|s| s == aws_sdk_dynamodb::types::TableStatus::Active);
        if active {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    client
        .update_time_to_live()
        .table_name(table)
        .time_to_live_specification(
            TimeToLiveSpecification::builder().attribute_name("ttl").enabled(true).build().expect("ttl spec"),
        )
        .send()
        .await
        .map_err(StoreError::unavailable)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_round_trip_through_dynamodb_attributes() {
        let item = Item::new(
            ItemKey::new("APP", "demo"),
            &serde_json::json!({
                "appId": "demo", "count": 3, "big": 9_007_199_254_740_993_i64, "ratio": 0.5,
                "nested": {"list": [1, "two", null, true], "empty": ""}, "n2": null
            }),
        )
        .unwrap()
        .with_ttl(Some(1_800_000_000))
        .with_index(Index::Gsi2, ItemKey::new("X", "y"));
        let mut item = item;
        item.version = 7;
        let attrs = to_attrs(&item).unwrap();
        assert_eq!(attrs["v"], AttributeValue::N("7".into()));
        assert_eq!(attrs["ttl"], AttributeValue::N("1800000000".into()));
        assert!(!attrs.contains_key("gsi1pk"));
        assert_eq!(from_attrs(attrs).unwrap(), item);
    }

    #[test]
    fn counters_live_at_the_top_level() {
        let mut item = Item::new(ItemKey::new("RL", "w1"), &serde_json::json!({})).unwrap();
        item.attrs.insert(COUNTER_ATTR.into(), 4.into());
        item.version = 1;
        let attrs = to_attrs(&item).unwrap();
        assert_eq!(attrs["n"], AttributeValue::N("4".into()));
        assert_eq!(from_attrs(attrs).unwrap(), item);
    }

    #[test]
    fn conditions_treat_expired_items_as_absent() {
        let e = condition_expr(Condition::Absent, 100);
        assert_eq!(e.text.as_deref(), Some("attribute_not_exists(pk) OR #ttl <= :now"));
        let e = condition_expr(Condition::Version(3), 100);
        assert!(e.text.unwrap().starts_with("#v = :expected AND (attribute_not_exists(#ttl)"));
        assert_eq!(e.values[":expected"], AttributeValue::N("3".into()));
        assert!(condition_expr(Condition::Any, 100).text.is_none());
    }
}
