//! The DynamoDB adapter of the storage port.
//!
//! One table: `pk`/`sk` strings, the version `v`, the TTL attribute `ttl` (epoch seconds), the
//! index keys `gsi1pk`/`gsi1sk` and `gsi2pk`/`gsi2sk` (two GSIs projecting all attributes), the
//! record itself under `d`, a counter's value under `n`, and the token of the write that last
//! put or updated the item under `w`. Every conditional write carries its condition expression;
//! expired items (which DynamoDB deletes lazily) count as absent.
//!
//! A reply can be lost after DynamoDB applied the write (the SDK gives up on an attempt at the
//! per-attempt limit of [`crate::aws::call_timeouts`], or the connection drops), and the SDK
//! then sends the same call again. Each put and update carries a token of its own for that: the
//! resent call fails its condition (an update carries one that refuses its own token) and,
//! asked for the item as it stands, DynamoDB shows the token; the write is then reported as
//! done, once, not as a conflict, and a counter is not raised twice.

use async_trait::async_trait;
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{
    AttributeValue, ConditionCheck, Delete, Put, ReturnValue, ReturnValuesOnConditionCheckFailure,
    TransactWriteItem, Update,
};
use aws_sdk_dynamodb::Client;
use rp_ports::iam::dynamodb::{CONDITION_CHECK_ITEM, DELETE_ITEM, PUT_ITEM, UPDATE_ITEM};
use rp_ports::store::*;
use rp_ports::Clock;
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
        let mut d = (*item.attrs).clone();
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
            attrs: attrs.into(),
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

/// A condition expression with the names and values it (and an update expression) uses.
#[derive(Debug, Default, Clone, PartialEq)]
struct Expr {
    condition: Option<String>,
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
    e.condition = Some(text);
    e
}

fn opt<T>(map: HashMap<String, T>) -> Option<HashMap<String, T>> {
    (!map.is_empty()).then_some(map)
}

/// The IAM action DynamoDB authorizes `op` by, as this adapter sends it (alone, or as an item of
/// a transaction, where each item needs its own): what the role of a function that writes it must
/// allow. `None` for a check of nothing, which is left out.
pub fn iam_action(op: &WriteOp) -> Option<&'static str> {
    Some(match op {
        WriteOp::Put { condition: Condition::Absent | Condition::Version(_), .. } => PUT_ITEM,
        WriteOp::Put { .. } | WriteOp::Increment(_) => UPDATE_ITEM,
        WriteOp::Delete { .. } => DELETE_ITEM,
        WriteOp::Check { condition: Condition::Any, .. } => return None,
        WriteOp::Check { .. } => CONDITION_CHECK_ITEM,
    })
}

/// One write, built once from a [`WriteOp`]: sent as its own call, or as one item of a
/// `TransactWriteItems`.
#[derive(Debug, Clone, PartialEq)]
enum Write {
    Put { item: Attrs, expr: Expr },
    Update { key: Attrs, expression: String, expr: Expr },
    Delete { key: Attrs, expr: Expr },
    Check { key: Attrs, expr: Expr },
}

/// A write and the version the item will have, where that is known before the call: a put
/// under `Absent` ([`Item::first_version`]) or `Version(n)` (n + 1). Under `Exists`/`Any` the
/// write is an update that adds 1 to whatever version is stored (a new item's is its first),
/// learnt from the response.
fn plan(op: WriteOp, now: i64) -> Result<(Write, Option<u64>), StoreError> {
    Ok(match op {
        WriteOp::Put { mut item, condition } => {
            let expr = condition_expr(condition, now);
            match condition {
                Condition::Absent | Condition::Version(_) => {
                    let version = match condition {
                        Condition::Version(v) => v + 1,
                        _ => item.first_version(),
                    };
                    item.version = version;
                    let mut attrs = to_attrs(&item)?;
                    attrs.insert(TOKEN_ATTR.to_owned(), write_token());
                    (Write::Put { item: attrs, expr }, Some(version))
                }
                Condition::Exists | Condition::Any => (update_of(&item, expr)?, None),
            }
        }
        WriteOp::Delete { key, condition } => {
            (Write::Delete { key: key_attrs(&key), expr: condition_expr(condition, now) }, None)
        }
        WriteOp::Check { key, condition } => {
            (Write::Check { key: key_attrs(&key), expr: condition_expr(condition, now) }, None)
        }
        WriteOp::Increment(increment) => (increment_of(&increment), None),
    })
}

/// `ADD` to the counter and 1 to the version (setting the TTL and a fresh version of a new
/// counter), on condition that the result stays within the limit.
fn increment_of(increment: &Increment) -> Write {
    let mut expr = Expr::default();
    expr.names.insert("#n".to_owned(), COUNTER_ATTR.to_owned());
    expr.values.insert(":by".to_owned(), n(increment.by));
    let mut sets = vec![next_version(&mut expr, fresh_version())];
    sets.push(tokened(&mut expr));
    if let Some(ttl) = increment.expires_at {
        expr.names.insert("#ttl".into(), "ttl".into());
        expr.values.insert(":ttl".into(), n(ttl));
        sets.push("#ttl = if_not_exists(#ttl, :ttl)".to_owned());
    }
    let expression = format!("SET {} ADD #n :by", sets.join(", "));
    if let Some(limit) = increment.limit {
        expr.values.insert(":max".into(), n(limit - increment.by));
        // A missing counter counts as 0.
        let text =
            if increment.by <= limit { "attribute_not_exists(#n) OR #n <= :max" } else { "#n <= :max" };
        and_condition(&mut expr, text);
    }
    Write::Update { key: key_attrs(&increment.key), expression, expr }
}

/// The `SET` term that raises the stored version by 1, a new item's starting at `first`, with
/// its names and values added to `expr`.
fn next_version(expr: &mut Expr, first: u64) -> String {
    expr.names.insert("#v".into(), "v".into());
    expr.values.insert(":one".into(), n(1));
    expr.values.insert(":fresh".into(), n(first - 1));
    "#v = if_not_exists(#v, :fresh) + :one".to_owned()
}

/// The attribute a put or an update leaves its write token in.
const TOKEN_ATTR: &str = "w";
/// The expression value that holds an update's write token.
const TOKEN_VALUE: &str = ":w";

/// A write's token: random, one for each write (and the same in each of the SDK's attempts).
fn write_token() -> AttributeValue {
    s(&uuid::Uuid::new_v4().simple().to_string())
}

/// Adds `condition` to the expression's, both to hold.
fn and_condition(expr: &mut Expr, condition: &str) {
    expr.condition = Some(match expr.condition.take() {
        Some(before) => format!("({before}) AND ({condition})"),
        None => condition.to_owned(),
    });
}

/// The `SET` term that leaves a fresh write token on the item, with the condition that refuses
/// the update where the item already carries it: a resent update that landed the first time
/// fails instead of applying twice, and shows its token ([`landed`]).
fn tokened(expr: &mut Expr) -> String {
    expr.names.insert("#w".into(), TOKEN_ATTR.into());
    expr.values.insert(TOKEN_VALUE.into(), write_token());
    and_condition(expr, "attribute_not_exists(#w) OR #w <> :w");
    "#w = :w".to_owned()
}

/// Whether the item a failed condition returned carries `token`: the write being sent landed
/// at an earlier attempt whose reply was lost.
fn landed(old: Option<&Attrs>, token: Option<&AttributeValue>) -> bool {
    matches!((old.and_then(|o| o.get(TOKEN_ATTR)), token), (Some(stored), Some(ours)) if stored == ours)
}

/// The item as it stood when a put's condition failed.
fn put_refused_by<R>(err: &SdkError<PutItemError, R>) -> Option<&Attrs> {
    match err.as_service_error() {
        Some(PutItemError::ConditionalCheckFailedException(e)) => e.item.as_ref(),
        _ => None,
    }
}

/// The item as it stood when an update's condition failed.
fn update_refused_by<R>(err: &SdkError<UpdateItemError, R>) -> Option<&Attrs> {
    match err.as_service_error() {
        Some(UpdateItemError::ConditionalCheckFailedException(e)) => e.item.as_ref(),
        _ => None,
    }
}

/// `SET` every attribute of `item` and its next version ([`next_version`]), `REMOVE` the unset
/// optional ones.
fn update_of(item: &Item, mut expr: Expr) -> Result<Write, StoreError> {
    let dynamo = DynamoItem::from(item);
    let attrs: Attrs = serde_dynamo::to_item(&dynamo).map_err(StoreError::encoding)?;
    let mut sets = Vec::new();
    let mut names: Vec<_> = attrs.into_iter().filter(|(k, _)| k != "pk" && k != "sk" && k != "v").collect();
    names.sort_by(|a, b| a.0.cmp(&b.0));
    for (i, (name, value)) in names.into_iter().enumerate() {
        expr.names.insert(format!("#a{i}"), name);
        expr.values.insert(format!(":a{i}"), value);
        sets.push(format!("#a{i} = :a{i}"));
    }
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
            expr.names.insert(format!("#r_{name}"), name.to_owned());
            removes.push(format!("#r_{name}"));
        }
    }
    sets.push(next_version(&mut expr, item.first_version()));
    sets.push(tokened(&mut expr));
    let mut expression = format!("SET {}", sets.join(", "));
    if !removes.is_empty() {
        expression.push_str(&format!(" REMOVE {}", removes.join(", ")));
    }
    Ok(Write::Update { key: key_attrs(&item.key), expression, expr })
}

/// The condition, names and values of an [`Expr`], set on any of the SDK's write builders.
trait Conditioned: Sized {
    fn set_condition_expression(self, condition: Option<String>) -> Self;
    fn set_expression_attribute_names(self, names: Option<HashMap<String, String>>) -> Self;
    fn set_expression_attribute_values(self, values: Option<Attrs>) -> Self;

    fn conditioned(self, expr: Expr) -> Self {
        self.set_condition_expression(expr.condition)
            .set_expression_attribute_names(opt(expr.names))
            .set_expression_attribute_values(opt(expr.values))
    }
}

macro_rules! conditioned {
    ($($builder:ty),*) => {$(
        impl Conditioned for $builder {
            fn set_condition_expression(self, condition: Option<String>) -> Self {
                <$builder>::set_condition_expression(self, condition)
            }
            fn set_expression_attribute_names(self, names: Option<HashMap<String, String>>) -> Self {
                <$builder>::set_expression_attribute_names(self, names)
            }
            fn set_expression_attribute_values(self, values: Option<Attrs>) -> Self {
                <$builder>::set_expression_attribute_values(self, values)
            }
        }
    )*};
}

conditioned!(
    aws_sdk_dynamodb::types::builders::PutBuilder,
    aws_sdk_dynamodb::types::builders::UpdateBuilder,
    aws_sdk_dynamodb::types::builders::DeleteBuilder,
    aws_sdk_dynamodb::types::builders::ConditionCheckBuilder,
    aws_sdk_dynamodb::operation::put_item::builders::PutItemFluentBuilder,
    aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder,
    aws_sdk_dynamodb::operation::delete_item::builders::DeleteItemFluentBuilder
);

impl Write {
    /// The write token a put or an update carries ([`write_token`]).
    fn token(&self) -> Option<&AttributeValue> {
        match self {
            Write::Put { item, .. } => item.get(TOKEN_ATTR),
            Write::Update { expr, .. } => expr.values.get(TOKEN_VALUE),
            Write::Delete { .. } | Write::Check { .. } => None,
        }
    }

    /// The write as one item of a transaction. `None` for a check under no condition.
    fn transact_item(self, table: &str) -> Result<Option<TransactWriteItem>, StoreError> {
        let item = match self {
            Write::Put { item, expr } => TransactWriteItem::builder().put(
                Put::builder()
                    .table_name(table)
                    .set_item(Some(item))
                    .conditioned(expr)
                    .build()
                    .map_err(StoreError::encoding)?,
            ),
            Write::Update { key, expression, expr } => TransactWriteItem::builder().update(
                Update::builder()
                    .table_name(table)
                    .set_key(Some(key))
                    .update_expression(expression)
                    .conditioned(expr)
                    .build()
                    .map_err(StoreError::encoding)?,
            ),
            Write::Delete { key, expr } => TransactWriteItem::builder().delete(
                Delete::builder()
                    .table_name(table)
                    .set_key(Some(key))
                    .conditioned(expr)
                    .build()
                    .map_err(StoreError::encoding)?,
            ),
            Write::Check { expr: Expr { condition: None, .. }, .. } => return Ok(None),
            Write::Check { key, expr } => TransactWriteItem::builder().condition_check(
                ConditionCheck::builder()
                    .table_name(table)
                    .set_key(Some(key))
                    .conditioned(expr)
                    .build()
                    .map_err(StoreError::encoding)?,
            ),
        };
        Ok(Some(item.build()))
    }

    /// The write as its own call; an update returns the item as stored. A write refused only
    /// because a transaction is writing its item goes again ([`resend_while_contended`]).
    async fn send(self, client: &Client, table: &str) -> Result<Option<Item>, StoreError> {
        let token = self.token().cloned();
        match self {
            Write::Put { item, expr } => {
                let call = client
                    .put_item()
                    .table_name(table)
                    .set_item(Some(item))
                    .conditioned(expr)
                    .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
                match resend_while_contended(|| call.clone().send(), in_transaction).await {
                    Ok(_) => Ok(None),
                    Err(err) if landed(put_refused_by(&err), token.as_ref()) => Ok(None),
                    Err(err) => Err(classify(err)),
                }
            }
            Write::Update { key, expression, expr } => {
                let call = client
                    .update_item()
                    .table_name(table)
                    .set_key(Some(key))
                    .update_expression(expression)
                    .conditioned(expr)
                    .return_values(ReturnValue::AllNew)
                    .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
                match resend_while_contended(|| call.clone().send(), in_transaction).await {
                    Ok(out) => out.attributes.map(from_attrs).transpose(),
                    // The item as the landed update left it.
                    Err(err) => match update_refused_by(&err) {
                        Some(stored) if landed(Some(stored), token.as_ref()) => {
                            from_attrs(stored.clone()).map(Some)
                        }
                        _ => Err(classify(err)),
                    },
                }
            }
            // A delete leaves no token to know it by: a conditioned one goes as a transaction of
            // one, whose idempotency token makes a resend after a lost reply succeed, where a
            // resent `DeleteItem` would fail its condition on the item it deleted.
            delete @ Write::Delete { expr: Expr { condition: Some(_), .. }, .. } => {
                let Some(item) = delete.transact_item(table)? else { return Ok(None) };
                transact_items(client, vec![item]).await.map(|_| None)
            }
            Write::Delete { key, expr } => {
                let call = client.delete_item().table_name(table).set_key(Some(key)).conditioned(expr);
                resend_while_contended(|| call.clone().send(), in_transaction).await.map_err(classify)?;
                Ok(None)
            }
            // A condition on its own exists only inside a transaction.
            check @ Write::Check { .. } => {
                let Some(item) = check.transact_item(table)? else { return Ok(None) };
                transact_items(client, vec![item]).await.map(|_| None)
            }
        }
    }
}

/// Sends `items` as one transaction; one cancelled only by contention goes again
/// ([`resend_while_contended`]).
async fn transact_items(client: &Client, items: Vec<TransactWriteItem>) -> Result<(), StoreError> {
    let call = client.transact_write_items().set_transact_items(Some(items));
    let contended = |err: &SdkError<TransactWriteItemsError, _>| {
        cancellation_reasons(err).is_some_and(|reasons| only_contention(&reasons))
    };
    match resend_while_contended(|| call.clone().send(), contended).await {
        Ok(_) => Ok(()),
        Err(err) => match cancellation_reasons(&err) {
            Some(reasons) => Err(cancelled(&reasons, err)),
            None => Err(classify(err)),
        },
    }
}

/// How many times a write is sent while it is refused only by contention.
const CONTENDED_ATTEMPTS: usize = 8;

/// Sends `call` again, after a jittered pause, while its error is `contended`: DynamoDB refused
/// it only because another transaction was writing one of its items at that moment (two
/// revocations of one app each touching the app's ready marker, or a poll deleting the marker
/// an enqueue writes). Such a write changed nothing, and its conditions are judged afresh each
/// time; after [`CONTENDED_ATTEMPTS`] sends the error stands (a 503). The SDK retries neither
/// `TransactionConflictException` nor a cancelled transaction, and no emulator here refuses a
/// write this way: a stand-in endpoint on loopback tests it.
async fn resend_while_contended<T, E, Fut>(
    mut call: impl FnMut() -> Fut,
    contended: impl Fn(&E) -> bool,
) -> Result<T, E>
where
    Fut: std::future::Future<Output = Result<T, E>>,
{
    retry_while(CONTENDED_ATTEMPTS, contended, (), || std::future::ready(()), |()| call()).await
}

/// A single write refused because a transaction is writing its item.
fn in_transaction<E: ProvideErrorMetadata, R>(err: &SdkError<E, R>) -> bool {
    err.as_service_error().and_then(|e| e.code()) == Some("TransactionConflictException")
}

/// Whether a cancellation's reasons say only that another transaction held one of its items:
/// no condition failed, nothing was throttled or refused.
fn only_contention(reasons: &[String]) -> bool {
    reasons.iter().any(|r| r == "TransactionConflict")
        && reasons.iter().all(|r| r == "TransactionConflict" || r == "None")
}

/// A cancelled transaction's reason code for each of its writes (`None` for one that stood), or
/// `None` when the error is not a cancellation.
fn cancellation_reasons<R>(err: &SdkError<TransactWriteItemsError, R>) -> Option<Vec<String>> {
    match err.as_service_error() {
        Some(TransactWriteItemsError::TransactionCanceledException(e)) => {
            Some(e.cancellation_reasons().iter().map(|r| r.code().unwrap_or("None").to_owned()).collect())
        }
        _ => None,
    }
}

/// DynamoDB error codes that mean "slow down", not "no".
const THROTTLING: [&str; 5] = [
    "ProvisionedThroughputExceededException",
    "ThrottlingException",
    "RequestLimitExceeded",
    "TransactionConflictException",
    "TransactionInProgressException",
];

/// A failed condition is a conflict; throttling and refused values have their own variants;
/// anything else means the store is unavailable.
fn classify<E, R>(err: SdkError<E, R>) -> StoreError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    let code = err.as_service_error().and_then(|e| e.code()).unwrap_or_default().to_owned();
    match code.as_str() {
        "ConditionalCheckFailedException" => StoreError::Conflict,
        "ValidationException" => {
            let message = err.as_service_error().and_then(|e| e.message()).unwrap_or("invalid request");
            Invalid::Rejected(message.to_owned()).into()
        }
        c if THROTTLING.contains(&c) => StoreError::Throttled(Box::new(err)),
        _ => StoreError::unavailable(err),
    }
}

/// A cancelled transaction, by its per-item reasons: a failed condition anywhere is a conflict
/// (so is an emulator that gives no reasons); a concurrent transaction or throttling is
/// throttling; refused values are invalid input.
fn cancelled<E>(reasons: &[String], err: E) -> StoreError
where
    E: std::error::Error + Send + Sync + 'static,
{
    let any = |code: &str| reasons.iter().any(|r| r == code);
    if reasons.is_empty() || any("ConditionalCheckFailed") {
        StoreError::Conflict
    } else if any("TransactionConflict") || any("ThrottlingError") || any("ProvisionedThroughputExceeded") {
        StoreError::Throttled(Box::new(err))
    } else if any("ValidationError") {
        Invalid::Rejected("a write of the transaction was refused".into()).into()
    } else {
        StoreError::unavailable(err)
    }
}

#[derive(Clone)]
pub struct DynamoStore {
    client: Client,
    table: String,
    clock: Arc<dyn Clock>,
}

impl DynamoStore {
    /// Sends `puts` as one transaction, and again, after a jittered pause ([`retry_while`]),
    /// without those whose condition failed, while the cancellation's reasons say the rest
    /// stood or met a concurrent transaction, up to [`TRANSACTION_TRIES`] times: the outcomes
    /// settled, and the puts left to send alone.
    async fn transact_puts(
        &self,
        puts: Vec<GroupedPut>,
    ) -> (Vec<(usize, Result<Item, StoreError>)>, Vec<GroupedPut>) {
        // Held only between the sends, never across one.
        let state = std::sync::Mutex::new((puts, Vec::new()));
        let (state_of, client) = (&state, &self.client);
        let send = move || async move {
            let writes =
                state_of.lock().expect("not poisoned").0.iter().map(|put| put.write.clone()).collect();
            let result = client.transact_write_items().set_transact_items(Some(writes)).send().await;
            let mut state = state_of.lock().expect("not poisoned");
            let (pending, settled) = &mut *state;
            let reasons = match result {
                Ok(_) => {
                    let stored = |put: GroupedPut| (put.index, Ok(Item { version: put.version, ..put.item }));
                    settled.extend(pending.drain(..).map(stored));
                    return Ok(());
                }
                Err(err) => per_put_reasons(&err, pending.len()).ok_or(Unsent::Alone)?,
            };
            for (put, reason) in std::mem::take(pending).into_iter().zip(reasons) {
                match reason {
                    PutReason::ConditionFailed => settled.push((put.index, Err(StoreError::Conflict))),
                    PutReason::Retry => pending.push(put),
                }
            }
            if pending.is_empty() {
                Ok(())
            } else {
                Err(Unsent::Again)
            }
        };
        let again = |unsent: &Unsent| matches!(unsent, Unsent::Again);
        // Whatever is still pending after the last send goes alone.
        let _ = retry_while(TRANSACTION_TRIES, again, (), || std::future::ready(()), |()| send()).await;
        let (left, settled) = state.into_inner().expect("not poisoned");
        (settled, left)
    }

    pub fn new(client: Client, table: impl Into<String>, clock: Arc<dyn Clock>) -> Self {
        Self { client, table: table.into(), clock }
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
            .map_err(classify)?;
        let now = self.clock.epoch_secs();
        match out.item {
            Some(attrs) => Ok(Some(from_attrs(attrs)?).filter(|i| !i.is_expired(now))),
            None => Ok(None),
        }
    }

    async fn put(&self, item: Item, condition: Condition) -> Result<Item, StoreError> {
        let mut stored = item.clone();
        let (write, version) = plan(WriteOp::Put { item, condition }, self.clock.epoch_secs())?;
        let returned = write.send(&self.client, &self.table).await?;
        match (returned, version) {
            (Some(updated), _) => Ok(updated),
            (None, Some(version)) => {
                stored.version = version;
                Ok(stored)
            }
            (None, None) => Err(StoreError::Encoding("the update returned no item".into())),
        }
    }

    async fn delete(&self, key: &ItemKey, condition: Condition) -> Result<(), StoreError> {
        let (write, _) = plan(WriteOp::Delete { key: key.clone(), condition }, self.clock.epoch_secs())?;
        write.send(&self.client, &self.table).await.map(|_| ())
    }

    async fn transact(&self, ops: Vec<WriteOp>) -> Result<(), StoreError> {
        if ops.is_empty() || ops.len() > MAX_TRANSACTION_ITEMS {
            return Err(Invalid::TransactionSize.into());
        }
        let now = self.clock.epoch_secs();
        let mut seen = HashSet::new();
        let mut writes = Vec::with_capacity(ops.len());
        for op in ops {
            if !seen.insert(op.key().clone()) {
                return Err(Invalid::RepeatedKey.into());
            }
            writes.push(plan(op, now)?.0);
        }
        if let [_] = writes.as_slice() {
            // One write is a plain call: half the cost of a transaction.
            return writes.pop().expect("one write").send(&self.client, &self.table).await.map(|_| ());
        }
        let mut items = Vec::with_capacity(writes.len());
        for write in writes {
            items.extend(write.transact_item(&self.table)?);
        }
        if items.is_empty() {
            return Ok(());
        }
        transact_items(&self.client, items).await
    }

    async fn query(&self, query: Query) -> Result<Page, StoreError> {
        if query.limit == 0 {
            return Err(Invalid::ZeroLimit.into());
        }
        if let Some(cursor) = &query.cursor {
            if !cursor.belongs_to(&query) {
                return Err(Invalid::ForeignCursor.into());
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
                .scan_index_forward(!query.descending)
                .limit(remaining.min(1000) as i32)
                .consistent_read(query.index.is_none())
                .send()
                .await
                .map_err(classify)?;
            for attrs in out.items.unwrap_or_default() {
                page.items.push(from_attrs(attrs)?);
            }
            match out.last_evaluated_key {
                Some(next) if page.items.len() < query.limit => start = Some(next),
                Some(_) => {
                    let last = page.items.last().expect("a full page has a last item");
                    page.cursor = Some(Cursor::after_item(&query, last));
                    break;
                }
                None => break,
            }
        }
        Ok(page)
    }

    async fn increment(&self, increment: Increment) -> Result<i64, StoreError> {
        let written = match increment_of(&increment).send(&self.client, &self.table).await {
            Err(StoreError::Conflict) => return Err(StoreError::LimitReached),
            other => other?,
        };
        rp_ports::store::incremented(written.as_ref())
    }

    /// The puts in `TransactWriteItems` of up to 100: one round trip for a poll's leases
    /// instead of one per lease (at twice the write units). A cancelled transaction's per-put
    /// reasons say which puts failed their condition (those are conflicts); the others are sent
    /// again without them, after a jittered pause, up to `TRANSACTION_TRIES` times. Whatever is left after that, or
    /// after a failure without per-put reasons, goes as separate puts, each with its own
    /// outcome; so do puts under `Exists`/`Any` (their version is learnt from the response) and
    /// repeated keys.
    async fn put_each(&self, puts: Vec<(Item, Condition)>) -> Vec<Result<Item, StoreError>> {
        use futures_util::stream::{self, StreamExt};
        let mut outcomes: Vec<Option<Result<Item, StoreError>>> = (0..puts.len()).map(|_| None).collect();
        let now = self.clock.epoch_secs();
        let mut alone: Vec<(usize, Item, Condition)> = Vec::new();
        let mut grouped: Vec<GroupedPut> = Vec::new();
        let mut keys = HashSet::new();
        for (index, (item, condition)) in puts.into_iter().enumerate() {
            let versioned = matches!(condition, Condition::Absent | Condition::Version(_));
            if !versioned || !keys.insert(item.key.clone()) {
                alone.push((index, item, condition));
                continue;
            }
            let planned = plan(WriteOp::Put { item: item.clone(), condition }, now)
                .and_then(|(write, version)| Ok((write.transact_item(&self.table)?, version)));
            match planned {
                Ok((Some(write), Some(version))) => {
                    grouped.push(GroupedPut { index, item, condition, version, write })
                }
                Ok(_) => alone.push((index, item, condition)),
                Err(e) => outcomes[index] = Some(Err(e)),
            }
        }
        if let [_] = grouped.as_slice() {
            // One put is a plain call: half the cost of a transaction.
            alone.extend(grouped.drain(..).map(|put| (put.index, put.item, put.condition)));
        }
        let mut grouped = grouped.into_iter().peekable();
        while grouped.peek().is_some() {
            let puts = grouped.by_ref().take(MAX_TRANSACTION_ITEMS).collect();
            let (settled, left) = self.transact_puts(puts).await;
            for (index, outcome) in settled {
                outcomes[index] = Some(outcome);
            }
            alone.extend(left.into_iter().map(|put| (put.index, put.item, put.condition)));
        }
        let separate: Vec<(usize, Result<Item, StoreError>)> = stream::iter(alone)
            .map(|(index, item, condition)| async move { (index, self.put(item, condition).await) })
            .buffer_unordered(PUT_EACH_CONCURRENCY)
            .collect()
            .await;
        for (index, outcome) in separate {
            outcomes[index] = Some(outcome);
        }
        outcomes
            .into_iter()
            .map(|outcome| outcome.unwrap_or_else(|| Err(StoreError::Encoding("a put was not sent".into()))))
            .collect()
    }
}

/// Why [`DynamoStore::transact_puts`] left puts unsent: they stand, to send in the transaction
/// again, or the cancellation said nothing of them, and they go alone.
enum Unsent {
    Again,
    Alone,
}

/// How many times [`DynamoStore::put_each`] sends a transaction whose puts still stand.
const TRANSACTION_TRIES: usize = 3;

/// One put of [`DynamoStore::put_each`]'s transactions: where its outcome goes, the put itself
/// (to send alone if the transaction gives up), the version it stores, and its transaction write.
struct GroupedPut {
    index: usize,
    item: Item,
    condition: Condition,
    version: u64,
    write: TransactWriteItem,
}

/// What a cancelled transaction says of one of its puts.
#[derive(Debug, PartialEq, Eq)]
enum PutReason {
    /// Its condition failed: a conflict, final.
    ConditionFailed,
    /// It stood (or met a concurrent transaction): send it again.
    Retry,
}

/// A cancelled transaction's reason for each of its `count` puts; `None` when the error is
/// something else, or a reason is one a put cannot be retried on (throttling, a refused value).
fn per_put_reasons<R>(err: &SdkError<TransactWriteItemsError, R>, count: usize) -> Option<Vec<PutReason>> {
    let codes = cancellation_reasons(err)?;
    put_reasons(codes.iter().map(String::as_str), count)
}

fn put_reasons<'a>(codes: impl Iterator<Item = &'a str>, count: usize) -> Option<Vec<PutReason>> {
    let reasons: Vec<PutReason> = codes
        .map(|code| match code {
            "ConditionalCheckFailed" => Some(PutReason::ConditionFailed),
            "None" | "TransactionConflict" => Some(PutReason::Retry),
            _ => None,
        })
        .collect::<Option<_>>()?;
    (reasons.len() == count).then_some(reasons)
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
        assert_eq!(e.condition.as_deref(), Some("attribute_not_exists(pk) OR #ttl <= :now"));
        let e = condition_expr(Condition::Version(3), 100);
        assert!(e.condition.unwrap().starts_with("#v = :expected AND (attribute_not_exists(#ttl)"));
        assert_eq!(e.values[":expected"], AttributeValue::N("3".into()));
        assert!(condition_expr(Condition::Any, 100).condition.is_none());
    }

    fn record() -> Item {
        Item::new(ItemKey::new("P", "S"), &serde_json::json!({"a": 1})).unwrap()
    }

    #[test]
    fn a_create_is_a_put_only_if_absent_or_expired() {
        let (write, version) =
            plan(WriteOp::Put { item: record(), condition: Condition::Absent }, 100).unwrap();
        let version = version.expect("a create knows its version");
        assert!(version >= 1 << 40, "a fresh version: {version}");
        let Write::Put { item, expr } = write else { panic!("a put: {write:?}") };
        assert_eq!(item["v"], AttributeValue::N(version.to_string()));
        let (_, again) = plan(WriteOp::Put { item: record(), condition: Condition::Absent }, 100).unwrap();
        assert_ne!(again, Some(version), "each create starts at a version of its own");
        assert_eq!(expr.condition.as_deref(), Some("attribute_not_exists(pk) OR #ttl <= :now"));
        assert_eq!(expr.values[":now"], AttributeValue::N("100".into()));
    }

    #[test]
    fn a_put_at_a_version_writes_the_next_version_once() {
        let (write, version) =
            plan(WriteOp::Put { item: record(), condition: Condition::Version(3) }, 100).unwrap();
        assert_eq!(version, Some(4));
        let Write::Put { item, expr } = write else { panic!("a put: {write:?}") };
        assert_eq!(item["v"], AttributeValue::N("4".into()));
        assert_eq!(
            expr.condition.as_deref(),
            Some("#v = :expected AND (attribute_not_exists(#ttl) OR #ttl > :now)")
        );
        assert_eq!(expr.values[":expected"], AttributeValue::N("3".into()));
        assert_eq!(expr.names["#v"], "v");
    }

    #[test]
    fn exists_and_any_are_updates_that_add_one_to_the_stored_version_or_start_fresh() {
        let (write, version) =
            plan(WriteOp::Put { item: record(), condition: Condition::Exists }, 7).unwrap();
        assert_eq!(version, None, "the store knows the version");
        let Write::Update { key, expression, expr } = write else { panic!("an update: {write:?}") };
        assert_eq!(key, key_attrs(&ItemKey::new("P", "S")));
        assert!(expression.starts_with("SET #a0 = :a0"), "{expression}");
        assert!(
            expression.contains("REMOVE #r_ttl, #r_gsi1pk, #r_gsi1sk, #r_gsi2pk, #r_gsi2sk, #r_n"),
            "{expression}"
        );
        assert!(
            expression.contains(", #v = if_not_exists(#v, :fresh) + :one, #w = :w REMOVE"),
            "{expression}"
        );
        assert_eq!(
            expr.condition.as_deref(),
            Some(
                "(attribute_exists(pk) AND (attribute_not_exists(#ttl) OR #ttl > :now)) \
                 AND (attribute_not_exists(#w) OR #w <> :w)"
            )
        );
        let (write, _) = plan(WriteOp::Put { item: record(), condition: Condition::Any }, 7).unwrap();
        let Write::Update { expr: any, .. } = write else { panic!("an update") };
        assert_eq!(
            any.condition.as_deref(),
            Some("attribute_not_exists(#w) OR #w <> :w"),
            "only its own token"
        );
        assert_ne!(any.values[TOKEN_VALUE], expr.values[TOKEN_VALUE], "each update has a token of its own");
    }

    #[test]
    fn each_put_and_update_carries_a_token_of_its_own_and_a_resend_that_landed_is_told_by_it() {
        let token = |condition| {
            let (write, _) = plan(WriteOp::Put { item: record(), condition }, 7).unwrap();
            write.token().expect("a put or an update carries a token").clone()
        };
        let tokens: HashSet<_> =
            [Condition::Absent, Condition::Absent, Condition::Version(1), Condition::Exists]
                .into_iter()
                .map(|c| token(c).as_s().unwrap().clone())
                .collect();
        assert_eq!(tokens.len(), 4, "{tokens:?}");
        let increment = Increment { key: ItemKey::new("C", "C"), by: 1, limit: None, expires_at: None };
        let Write::Update { expression, expr, .. } = increment_of(&increment) else { panic!("an update") };
        assert!(expression.contains("#w = :w"), "{expression}");
        assert_eq!(expr.condition.as_deref(), Some("attribute_not_exists(#w) OR #w <> :w"));
        let ours = s("t1");
        let stored = |w: &str| HashMap::from([(TOKEN_ATTR.to_owned(), s(w))]);
        assert!(landed(Some(&stored("t1")), Some(&ours)));
        assert!(!landed(Some(&stored("t2")), Some(&ours)), "another write's token");
        assert!(!landed(Some(&HashMap::new()), Some(&ours)), "an item no put or update left");
        assert!(!landed(None, Some(&ours)), "no item");
        assert!(!landed(Some(&stored("t1")), None), "a write without a token");
    }

    #[test]
    fn deletes_and_checks_carry_their_condition() {
        let key = ItemKey::new("P", "S");
        let (write, _) =
            plan(WriteOp::Delete { key: key.clone(), condition: Condition::Version(2) }, 5).unwrap();
        let Write::Delete { expr, .. } = &write else { panic!("a delete") };
        assert!(expr.condition.as_deref().unwrap().starts_with("#v = :expected"));
        assert!(write.transact_item("t").unwrap().unwrap().delete.is_some());
        let (write, _) = plan(WriteOp::Check { key: key.clone(), condition: Condition::Exists }, 5).unwrap();
        assert!(write.transact_item("t").unwrap().unwrap().condition_check.is_some());
        let (write, _) = plan(WriteOp::Check { key, condition: Condition::Any }, 5).unwrap();
        assert!(write.transact_item("t").unwrap().is_none(), "a check of nothing is left out");
    }

    #[test]
    fn each_writes_iam_action_is_the_call_it_is_sent_as() {
        let item = || Item::new(ItemKey::new("p", "s"), &serde_json::json!({})).unwrap();
        let key = ItemKey::new("p", "s");
        let increment = Increment { key: key.clone(), by: 1, limit: None, expires_at: None };
        let ops = [
            WriteOp::Put { item: item(), condition: Condition::Absent },
            WriteOp::Put { item: item(), condition: Condition::Version(3) },
            WriteOp::Put { item: item(), condition: Condition::Exists },
            WriteOp::Put { item: item(), condition: Condition::Any },
            WriteOp::Delete { key: key.clone(), condition: Condition::Any },
            WriteOp::Check { key: key.clone(), condition: Condition::Exists },
            WriteOp::Check { key, condition: Condition::Any },
            WriteOp::Increment(increment),
        ];
        for op in ops {
            let (write, _) = plan(op.clone(), 5).unwrap();
            let sent = write.transact_item("t").unwrap().map(|item| {
                if item.put.is_some() {
                    PUT_ITEM
                } else if item.update.is_some() {
                    UPDATE_ITEM
                } else if item.delete.is_some() {
                    DELETE_ITEM
                } else {
                    CONDITION_CHECK_ITEM
                }
            });
            assert_eq!(iam_action(&op), sent, "{op:?}");
        }
    }

    /// A client of the loopback stand-in answering with `answers` ([`crate::aws::standin`]).
    fn answering(answers: Vec<(u16, String)>) -> (Client, Arc<std::sync::Mutex<Vec<String>>>) {
        let (config, calls) = crate::aws::standin::answering(answers);
        (Client::new(&config), calls)
    }

    /// DynamoDB's answer to a transaction of two writes it cancelled, for `reasons`.
    fn cancellation(reasons: [&str; 2]) -> (u16, String) {
        let codes: Vec<Value> = reasons.iter().map(|code| serde_json::json!({"Code": code})).collect();
        let body = serde_json::json!({"__type": "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
            "Message": "Transaction cancelled", "CancellationReasons": codes});
        (400, body.to_string())
    }

    /// A transaction cancelled only because another held one of its items is sent again, as
    /// it is, until it stands; one whose condition failed is a conflict at once; contention
    /// that never ends is reported as throttling after [`CONTENDED_ATTEMPTS`] sends. A single
    /// write that met a transaction on its item goes again too.
    #[tokio::test]
    async fn a_write_refused_by_contention_alone_is_sent_again() {
        let two = || {
            let put = |sk: &str| WriteOp::Put {
                item: Item::new(ItemKey::new("P", sk), &serde_json::json!({})).unwrap(),
                condition: Condition::Any,
            };
            vec![put("a"), put("b")]
        };
        let contended = cancellation(["TransactionConflict", "None"]);
        let store = |answers| {
            let (client, calls) = answering(answers);
            (DynamoStore::new(client, "t", Arc::new(rp_ports::SystemClock)), calls)
        };

        let (dynamo, calls) = store(vec![contended.clone(), contended.clone(), (200, "{}".into())]);
        dynamo.transact(two()).await.unwrap();
        assert_eq!(calls.lock().unwrap().len(), 3);
        let both = cancellation(["TransactionConflict", "TransactionConflict"]);
        let (dynamo, calls) = store(vec![both, (200, "{}".into())]);
        dynamo.transact(two()).await.unwrap();
        assert_eq!(calls.lock().unwrap().len(), 2, "every write contended");

        let (dynamo, calls) = store(vec![cancellation(["ConditionalCheckFailed", "TransactionConflict"])]);
        assert!(matches!(dynamo.transact(two()).await, Err(StoreError::Conflict)));
        assert_eq!(calls.lock().unwrap().len(), 1, "a failed condition is final");

        let (dynamo, calls) = store(vec![cancellation(["ThrottlingError", "TransactionConflict"])]);
        assert!(matches!(dynamo.transact(two()).await, Err(StoreError::Throttled(_))));
        assert_eq!(calls.lock().unwrap().len(), 1, "throttling is the SDK's to retry");

        let (dynamo, calls) = store(vec![contended]);
        assert!(matches!(dynamo.transact(two()).await, Err(StoreError::Throttled(_))));
        assert_eq!(calls.lock().unwrap().len(), CONTENDED_ATTEMPTS);

        // A single write that met a transaction on its item, and one whose condition failed.
        let refused = |code: &str| {
            let body = serde_json::json!({"__type": format!("com.amazonaws.dynamodb.v20120810#{code}"), "message": code});
            (400, body.to_string())
        };
        let in_transaction = refused("TransactionConflictException");
        let (dynamo, calls) = store(vec![in_transaction.clone(), in_transaction, (200, "{}".into())]);
        dynamo.delete(&ItemKey::new("P", "a"), Condition::Any).await.unwrap();
        assert_eq!(calls.lock().unwrap().len(), 3);
        let (dynamo, calls) = store(vec![refused("ConditionalCheckFailedException")]);
        let item = Item::new(ItemKey::new("P", "a"), &serde_json::json!({})).unwrap();
        assert!(matches!(dynamo.put(item, Condition::Version(3)).await, Err(StoreError::Conflict)));
        assert_eq!(calls.lock().unwrap().len(), 1);
    }

    /// A put or an update whose reply was lost is sent again by the SDK, and then fails its
    /// condition on the item it wrote itself. The item carries the write's token, so the write
    /// is taken as done (an update answers the item as it left it); an item with another
    /// write's token is a conflict.
    #[tokio::test]
    async fn a_resend_that_meets_its_own_write_is_taken_as_written() {
        // The first call lands but its reply is lost (a 500, which the SDK sends again); the
        // second fails its condition on the item as the first left it, or as `other` wrote it.
        let store = |other: bool| {
            let (config, calls) = crate::aws::standin::replying(move |n, body| {
                if n == 0 {
                    return (500, serde_json::json!({"__type": "InternalServerError"}).to_string());
                }
                let sent: Value = serde_json::from_str(body).unwrap();
                let mut item = match sent.get("Item") {
                    Some(put) => put.clone(),
                    None => {
                        let mut updated = sent["Key"].clone();
                        updated["v"] = serde_json::json!({"N": "8"});
                        updated[TOKEN_ATTR] = sent["ExpressionAttributeValues"][TOKEN_VALUE].clone();
                        updated
                    }
                };
                if other {
                    item[TOKEN_ATTR] = serde_json::json!({"S": "another write"});
                }
                let failed = "com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException";
                (400, serde_json::json!({"__type": failed, "message": "failed", "Item": item}).to_string())
            });
            (DynamoStore::new(Client::new(&config), "t", Arc::new(rp_ports::SystemClock)), calls)
        };
        let item = || Item::new(ItemKey::new("P", "a"), &serde_json::json!({"x": 1})).unwrap();

        let (dynamo, calls) = store(false);
        let put = dynamo.put(item().numbered_from(5), Condition::Absent).await.unwrap();
        assert_eq!((put.version, calls.lock().unwrap().len()), (5, 2), "the put stands, sent twice");
        let (dynamo, _) = store(false);
        assert_eq!(dynamo.put(item(), Condition::Any).await.unwrap().version, 8, "as the update left it");

        for condition in [Condition::Absent, Condition::Any] {
            let (dynamo, _) = store(true);
            let refused = dynamo.put(item(), condition).await;
            assert!(matches!(refused, Err(StoreError::Conflict)), "{condition:?}: {refused:?}");
        }
    }

    /// A delete with a condition goes as a transaction of one, under an idempotency token (a
    /// resend after a lost reply is answered as the first call was); its failed condition is a
    /// conflict. A delete without one is a plain `DeleteItem`.
    #[tokio::test]
    async fn a_conditioned_delete_goes_as_a_transaction_of_one() {
        let store = |answers| {
            let (client, calls) = answering(answers);
            (DynamoStore::new(client, "t", Arc::new(rp_ports::SystemClock)), calls)
        };
        let key = ItemKey::new("P", "a");
        let (dynamo, calls) = store(vec![(200, "{}".into())]);
        dynamo.delete(&key, Condition::Version(3)).await.unwrap();
        dynamo.delete(&key, Condition::Any).await.unwrap();
        let bodies: Vec<Value> =
            calls.lock().unwrap().iter().map(|b| serde_json::from_str(b).unwrap()).collect();
        let [conditioned, plain] = bodies.as_slice() else { panic!("two calls: {bodies:?}") };
        let delete = &conditioned["TransactItems"][0]["Delete"];
        assert!(
            delete["ConditionExpression"].as_str().unwrap().starts_with("#v = :expected"),
            "{conditioned}"
        );
        assert!(conditioned["ClientRequestToken"].as_str().is_some_and(|t| !t.is_empty()), "{conditioned}");
        assert!(
            plain.get("TransactItems").is_none() && plain.get("ConditionExpression").is_none(),
            "{plain}"
        );

        let failed = serde_json::json!({"__type": "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
            "Message": "Transaction cancelled", "CancellationReasons": [{"Code": "ConditionalCheckFailed"}]});
        let (dynamo, _) = store(vec![(400, failed.to_string())]);
        assert!(matches!(dynamo.delete(&key, Condition::Exists).await, Err(StoreError::Conflict)));
    }

    /// `put_each`'s transaction is sent again without the puts whose condition failed, and
    /// while contention alone refuses it; after [`TRANSACTION_TRIES`] sends, the puts left go
    /// alone, each with its own outcome.
    #[tokio::test]
    async fn a_put_each_transaction_is_sent_again_without_its_failed_puts() {
        let puts = || {
            let put = |sk: &str| {
                (Item::new(ItemKey::new("P", sk), &serde_json::json!({})).unwrap(), Condition::Absent)
            };
            vec![put("a"), put("b")]
        };
        let store = |answers| {
            let (client, calls) = answering(answers);
            (DynamoStore::new(client, "t", Arc::new(rp_ports::SystemClock)), calls)
        };
        let sent = |calls: &Arc<std::sync::Mutex<Vec<String>>>| {
            let calls = calls.lock().unwrap();
            let bodies = calls.iter().map(|b| serde_json::from_str::<Value>(b).unwrap());
            bodies
                .map(|b| b.get("TransactItems").map_or(0, |items| items.as_array().unwrap().len()))
                .collect::<Vec<_>>()
        };
        let ok = (200, "{}".to_owned());

        let (dynamo, calls) = store(vec![cancellation(["TransactionConflict", "None"]), ok.clone()]);
        let outcomes = dynamo.put_each(puts()).await;
        assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
        assert_eq!(sent(&calls), [2, 2], "contention: both again");

        let (dynamo, calls) = store(vec![cancellation(["ConditionalCheckFailed", "None"]), ok.clone()]);
        let outcomes = dynamo.put_each(puts()).await;
        assert!(matches!(outcomes.as_slice(), [Err(StoreError::Conflict), Ok(_)]), "{outcomes:?}");
        assert_eq!(sent(&calls), [2, 1], "the one that stood, again");

        let contended = cancellation(["TransactionConflict", "TransactionConflict"]);
        let mut answers = vec![contended; TRANSACTION_TRIES];
        answers.push(ok);
        let (dynamo, calls) = store(answers);
        let outcomes = dynamo.put_each(puts()).await;
        assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
        let mut expected = vec![2; TRANSACTION_TRIES];
        expected.extend([0, 0]);
        assert_eq!(sent(&calls), expected, "then alone");
    }

    #[test]
    fn a_cancelled_put_each_transaction_is_read_put_by_put() {
        use PutReason::*;
        let reasons = |codes: &[&'static str], count| put_reasons(codes.iter().copied(), count);
        assert_eq!(
            reasons(&["None", "ConditionalCheckFailed", "TransactionConflict"], 3),
            Some(vec![Retry, ConditionFailed, Retry])
        );
        assert_eq!(reasons(&["None", "ConditionalCheckFailed"], 3), None, "reasons for every put");
        assert_eq!(reasons(&["ThrottlingError", "None"], 2), None, "throttling goes to separate puts");
        assert_eq!(reasons(&["ValidationError"], 1), None);
        assert_eq!(reasons(&[], 0), Some(vec![]));
    }

    #[test]
    fn cancellations_are_classified_by_their_reasons() {
        let io = || std::io::Error::other("x");
        let reasons = |r: &[&str]| r.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(matches!(
            cancelled(&reasons(&["None", "ConditionalCheckFailed"]), io()),
            StoreError::Conflict
        ));
        assert!(matches!(cancelled(&reasons(&[]), io()), StoreError::Conflict));
        assert!(matches!(
            cancelled(&reasons(&["None", "TransactionConflict"]), io()),
            StoreError::Throttled(_)
        ));
        for throttled in ["ThrottlingError", "ProvisionedThroughputExceeded"] {
            let reasons = reasons(&["None", throttled]);
            assert!(matches!(cancelled(&reasons, io()), StoreError::Throttled(_)), "{throttled}");
        }
        assert!(matches!(
            cancelled(&reasons(&["ValidationError"]), io()),
            StoreError::Invalid(Invalid::Rejected(_))
        ));
        assert!(matches!(
            cancelled(&reasons(&["ItemCollectionSizeLimitExceeded"]), io()),
            StoreError::Unavailable(_)
        ));
    }

    /// Two puts of one item in one `put_each` never share a transaction (DynamoDB refuses one
    /// that names an item twice): each goes alone.
    #[tokio::test]
    async fn puts_of_one_item_go_alone() {
        let (client, calls) = answering(vec![(200, "{}".into())]);
        let dynamo = DynamoStore::new(client, "t", Arc::new(rp_ports::SystemClock));
        let put =
            || (Item::new(ItemKey::new("P", "a"), &serde_json::json!({})).unwrap(), Condition::Version(3));
        let outcomes = dynamo.put_each(vec![put(), put()]).await;
        assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
        let calls = calls.lock().unwrap();
        assert_eq!(calls.len(), 2);
        assert!(calls.iter().all(|call| !call.contains("TransactItems")), "{calls:?}");
    }

    /// A single call's refusal, likewise: a failed condition is a conflict, a refusal for the
    /// request rate throttling, a refused value invalid input, and anything else (here a table
    /// that is not there) the store being unavailable. The SDK's own retries (which come first
    /// in the functions) are off here: they only wait.
    #[tokio::test]
    async fn refusals_are_classified_by_their_code() {
        let get = |code: &str| {
            let body = serde_json::json!({"__type": format!("com.amazonaws.dynamodb.v20120810#{code}"), "message": code});
            let (config, _) = crate::aws::standin::answering(vec![(400, body.to_string())]);
            let once = aws_sdk_dynamodb::config::Builder::from(&config)
                .retry_config(aws_config::retry::RetryConfig::disabled());
            let client = Client::from_conf(once.build());
            async move {
                let dynamo = DynamoStore::new(client, "t", Arc::new(rp_ports::SystemClock));
                dynamo.get(&ItemKey::new("P", "a")).await
            }
        };
        let conflict = get("ConditionalCheckFailedException").await;
        assert!(matches!(conflict, Err(StoreError::Conflict)), "{conflict:?}");
        for code in THROTTLING {
            let throttled = get(code).await;
            assert!(matches!(throttled, Err(StoreError::Throttled(_))), "{code}: {throttled:?}");
        }
        let invalid = get("ValidationException").await;
        assert!(matches!(invalid, Err(StoreError::Invalid(Invalid::Rejected(_)))), "{invalid:?}");
        let missing = get("ResourceNotFoundException").await;
        assert!(matches!(missing, Err(StoreError::Unavailable(_))), "{missing:?}");
    }
}
