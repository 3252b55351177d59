//! The embedded storage adapter: one redb database file in the data directory.
//!
//! redb runs one write transaction at a time, so every conditional write is checked and applied
//! atomically; each commit is durable before the call returns. Secondary indexes are kept in a
//! second table, updated in the same transaction as the item.

use super::db::{db_err, EmbeddedDb, INDEX, ITEMS};
use async_trait::async_trait;
use redb::ReadableTable;
use rp_ports::store::*;
use rp_ports::Clock;
use std::collections::HashSet;
use std::ops::Bound;
use std::sync::Arc;

const SEP: char = '\0';

#[derive(Clone)]
pub struct EmbeddedStore {
    db: EmbeddedDb,
    clock: Arc<dyn Clock>,
}

impl EmbeddedStore {
    pub fn new(db: EmbeddedDb, clock: Arc<dyn Clock>) -> Self {
        Self { db, clock }
    }

    async fn blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce(&redb::Database, i64) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let db = self.db.clone();
        let now = self.clock.epoch_secs();
        tokio::task::spawn_blocking(move || work(db.database(), now))
            .await
            .map_err(StoreError::unavailable)?
    }

    /// A point read on the calling thread: a redb read transaction is a snapshot of mapped
    /// pages, done in microseconds, less than the hop to the blocking pool costs.
    fn inline<T>(
        &self,
        work: impl FnOnce(&redb::Database, i64) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        work(self.db.database(), self.clock.epoch_secs())
    }
}

fn index_partition(index: Index, pk: &str) -> String {
    format!("{}{SEP}{pk}", index.name())
}

fn index_sort(index_sk: &str, key: &ItemKey) -> String {
    format!("{index_sk}{SEP}{}{SEP}{}", key.pk, key.sk)
}

/// An item's key: one DynamoDB would refuse (empty, or longer than it holds) is refused as it
/// refuses it, as input; NUL, which this store's own index entries use, as malformed.
fn check_key(key: &ItemKey) -> Result<(), StoreError> {
    if !key.holdable() {
        return Err(Invalid::Rejected(format!(
            "a key of {} and {} bytes: a partition key takes 1 to {MAX_PARTITION_KEY_BYTES}, a sort key 1 to {MAX_SORT_KEY_BYTES}",
            key.pk.len(),
            key.sk.len()
        ))
        .into());
    }
    check_index_key(key)
}

/// An index key: DynamoDB refuses an empty one as it refuses an empty table key.
fn check_index_key(key: &ItemKey) -> Result<(), StoreError> {
    if key.pk.is_empty() || key.sk.is_empty() {
        return Err(Invalid::Rejected("a key attribute cannot hold an empty string".into()).into());
    }
    if key.pk.contains(SEP) || key.sk.contains(SEP) {
        return Err(Invalid::MalformedKey.into());
    }
    Ok(())
}

fn decode(bytes: &[u8]) -> Result<Item, StoreError> {
    serde_json::from_slice(bytes).map_err(StoreError::encoding)
}

type Items<'t> = redb::Table<'t, (&'static str, &'static str), &'static [u8]>;

fn read_item(items: &Items<'_>, key: &ItemKey) -> Result<Option<Item>, StoreError> {
    match items.get((key.pk.as_str(), key.sk.as_str())).map_err(db_err)? {
        Some(bytes) => decode(bytes.value()).map(Some),
        None => Ok(None),
    }
}

/// The live item, if any: an expired one counts as absent.
fn live(existing: Option<Item>, now: i64) -> Option<Item> {
    existing.filter(|item| !item.is_expired(now))
}

fn holds(condition: Condition, current: Option<&Item>) -> bool {
    match condition {
        Condition::Any => true,
        Condition::Absent => current.is_none(),
        Condition::Exists => current.is_some(),
        Condition::Version(v) => current.is_some_and(|item| item.version == v),
    }
}

fn next_version(condition: Condition, current: Option<&Item>, written: &Item) -> u64 {
    match condition {
        Condition::Absent => written.first_version(),
        Condition::Version(v) => v + 1,
        Condition::Exists | Condition::Any => {
            current.map_or_else(|| written.first_version(), |c| c.version + 1)
        }
    }
}

fn remove_item(items: &mut Items<'_>, index: &mut Items<'_>, key: &ItemKey) -> Result<(), StoreError> {
    if let Some(old) = read_item(items, key)? {
        for idx in Index::ALL {
            if let Some(ik) = old.index_key(idx) {
                let part = index_partition(idx, &ik.pk);
                let sort = index_sort(&ik.sk, key);
                index.remove((part.as_str(), sort.as_str())).map_err(db_err)?;
            }
        }
        items.remove((key.pk.as_str(), key.sk.as_str())).map_err(db_err)?;
    }
    Ok(())
}

/// Writes `item`; its size as stored (its JSON, keys included: a little above what DynamoDB
/// counts), refused past [`MAX_ITEM_BYTES`] as DynamoDB refuses it.
fn write_item(items: &mut Items<'_>, index: &mut Items<'_>, item: &Item) -> Result<usize, StoreError> {
    let bytes = serde_json::to_vec(item).map_err(StoreError::encoding)?;
    if bytes.len() > MAX_ITEM_BYTES {
        return Err(Invalid::Rejected("Item size has exceeded the maximum allowed size".into()).into());
    }
    remove_item(items, index, &item.key)?;
    for idx in Index::ALL {
        if let Some(ik) = item.index_key(idx) {
            check_index_key(ik)?;
            let part = index_partition(idx, &ik.pk);
            let sort = index_sort(&ik.sk, &item.key);
            index.insert((part.as_str(), sort.as_str()), &[][..]).map_err(db_err)?;
        }
    }
    items.insert((item.key.pk.as_str(), item.key.sk.as_str()), bytes.as_slice()).map_err(db_err)?;
    Ok(bytes.len())
}

/// Applies `ops` inside one write transaction; the caller commits only on `Ok`.
fn apply(
    items: &mut Items<'_>,
    index: &mut Items<'_>,
    ops: Vec<WriteOp>,
    now: i64,
) -> Result<Vec<Item>, StoreError> {
    let mut seen = HashSet::new();
    let mut staged = Vec::with_capacity(ops.len());
    for op in &ops {
        let key = op.key();
        check_key(key)?;
        if !seen.insert(key.clone()) {
            return Err(Invalid::RepeatedKey.into());
        }
        let current = live(read_item(items, key)?, now);
        let holds = match op {
            WriteOp::Put { condition, .. }
            | WriteOp::Delete { condition, .. }
            | WriteOp::Check { condition, .. } => holds(*condition, current.as_ref()),
            WriteOp::Increment(increment) => {
                increment.limit.is_none_or(|limit| counter_value(current.as_ref()) + increment.by <= limit)
            }
        };
        if !holds {
            return Err(StoreError::Conflict);
        }
        staged.push(current);
    }
    let mut written = Vec::new();
    let mut size = 0;
    for (op, current) in ops.into_iter().zip(staged) {
        match op {
            WriteOp::Put { mut item, condition } => {
                item.version = next_version(condition, current.as_ref(), &item);
                size += write_item(items, index, &item)?;
                written.push(item);
            }
            WriteOp::Delete { key, .. } => remove_item(items, index, &key)?,
            WriteOp::Check { .. } => {}
            WriteOp::Increment(increment) => {
                let value = counter_value(current.as_ref()) + increment.by;
                let mut item = match current {
                    Some(mut item) => {
                        item.version += 1;
                        item
                    }
                    None => Item {
                        version: fresh_version(),
                        ..Item::new(increment.key, &serde_json::json!({}))?.with_ttl(increment.expires_at)
                    },
                };
                item.attrs.insert(COUNTER_ATTR.into(), value.into());
                size += write_item(items, index, &item)?;
                written.push(item);
            }
        }
    }
    if size > MAX_TRANSACTION_BYTES {
        return Err(Invalid::Rejected("Transaction request cannot be larger than 4 MB".into()).into());
    }
    Ok(written)
}

/// A counter item's value; 0 when there is none.
fn counter_value(item: Option<&Item>) -> i64 {
    item.and_then(Item::counter).unwrap_or(0)
}

/// Where `sk` stands against the query's sort condition: (within it, past it in the walk's
/// direction).
fn in_sort_range(query: &Query, sk: &str) -> (bool, bool) {
    let (matches, above, below) = match &query.sort {
        SortKey::All => (true, false, false),
        SortKey::BeginsWith(prefix) => {
            let m = sk.starts_with(prefix.as_str());
            (m, !m && sk > prefix.as_str(), !m && sk < prefix.as_str())
        }
        SortKey::Between(lo, hi) => {
            (sk >= lo.as_str() && sk <= hi.as_str(), sk > hi.as_str(), sk < lo.as_str())
        }
    };
    (matches, if query.descending { below } else { above })
}

/// One end of a walk over a table keyed by (partition, sort key).
type End<'a> = Bound<(&'a str, &'a str)>;

/// The key range a query walks in partition `part` of its table: from the sort condition's
/// first key up, or from `top` down, or from `resume` (a cursor's entry, excluded) on in the
/// query's direction.
fn walk_bounds<'a>(
    query: &'a Query,
    part: &'a str,
    resume: Option<&'a str>,
    top: &'a Bound<(String, String)>,
) -> (End<'a>, End<'a>) {
    match (query.descending, resume) {
        (false, Some(after)) => (Bound::Excluded((part, after)), Bound::Unbounded),
        (false, None) => (Bound::Included((part, sort_start(&query.sort))), Bound::Unbounded),
        (true, Some(before)) => (Bound::Included((part, "")), Bound::Excluded((part, before))),
        (true, None) => (Bound::Included((part, "")), top.as_ref().map(|(p, sk)| (p.as_str(), sk.as_str()))),
    }
}

/// Where a descending walk of partition `part` starts: at a `Between`'s upper end (in an index,
/// above every entry of that sort key, as entries append `SEP` and the item's key to it), else
/// at the partition's end.
fn walk_top(part: &str, sort: &SortKey, indexed: bool) -> Bound<(String, String)> {
    match sort {
        SortKey::Between(_, hi) if indexed => Bound::Excluded((part.to_owned(), format!("{hi}\u{1}"))),
        SortKey::Between(_, hi) => Bound::Included((part.to_owned(), hi.clone())),
        _ => Bound::Excluded((format!("{part}{SEP}"), String::new())),
    }
}

fn sort_start(sort: &SortKey) -> &str {
    match sort {
        SortKey::All => "",
        SortKey::BeginsWith(prefix) => prefix,
        SortKey::Between(lo, _) => lo,
    }
}

fn run_query(
    items: &impl ReadableTable<(&'static str, &'static str), &'static [u8]>,
    index: &impl ReadableTable<(&'static str, &'static str), &'static [u8]>,
    query: &Query,
    now: i64,
) -> Result<Page, StoreError> {
    if query.limit == 0 {
        return Err(Invalid::ZeroLimit.into());
    }
    if let Some(cursor) = &query.cursor {
        if !cursor.belongs_to(query) {
            return Err(Invalid::ForeignCursor.into());
        }
    }
    let mut page = Page::default();
    match query.index {
        None => {
            let top = walk_top(&query.pk, &query.sort, false);
            let resume = query.cursor.as_ref().map(|c| c.key.sk.as_str());
            let range = items.range(walk_bounds(query, &query.pk, resume, &top)).map_err(db_err)?;
            let range: Box<dyn Iterator<Item = _>> =
                if query.descending { Box::new(range.rev()) } else { Box::new(range) };
            for entry in range {
                let (key, value) = entry.map_err(db_err)?;
                let (pk, sk) = key.value();
                if pk != query.pk {
                    break;
                }
                if let Walk::Stop = take(query, &mut page, now, sk, || decode(value.value()).map(Some))? {
                    break;
                }
            }
        }
        Some(idx) => {
            let part = index_partition(idx, &query.pk);
            let top = walk_top(&part, &query.sort, true);
            let resume = query.cursor.as_ref().map(|c| {
                let ik = c.index_key.as_ref().expect("checked by belongs_to");
                index_sort(&ik.sk, &c.key)
            });
            let range = index.range(walk_bounds(query, &part, resume.as_deref(), &top)).map_err(db_err)?;
            let range: Box<dyn Iterator<Item = _>> =
                if query.descending { Box::new(range.rev()) } else { Box::new(range) };
            for entry in range {
                let (key, _) = entry.map_err(db_err)?;
                let (p, composite) = key.value();
                if p != part {
                    break;
                }
                let mut parts = composite.splitn(3, SEP);
                let (Some(isk), Some(pk), Some(sk)) = (parts.next(), parts.next(), parts.next()) else {
                    return Err(StoreError::Encoding("malformed index entry".into()));
                };
                let load =
                    || items.get((pk, sk)).map_err(db_err)?.map(|bytes| decode(bytes.value())).transpose();
                if let Walk::Stop = take(query, &mut page, now, isk, load)? {
                    break;
                }
            }
        }
    }
    Ok(page)
}

/// Whether a query's walk over its range goes on.
enum Walk {
    Next,
    Stop,
}

/// One entry of a query's range, whose sort key there is `sort_key`: past the query's sort
/// condition the walk stops; outside it, or gone (`load` finds nothing), or expired, it is
/// skipped; on a full page it stops with the cursor; else the item joins the page. The one rule
/// of both walks, over the table and over an index.
fn take(
    query: &Query,
    page: &mut Page,
    now: i64,
    sort_key: &str,
    load: impl FnOnce() -> Result<Option<Item>, StoreError>,
) -> Result<Walk, StoreError> {
    let (matches, past) = in_sort_range(query, sort_key);
    if past {
        return Ok(Walk::Stop);
    }
    if !matches {
        return Ok(Walk::Next);
    }
    let Some(item) = load()?.filter(|item| !item.is_expired(now)) else {
        return Ok(Walk::Next);
    };
    if page.items.len() == query.limit {
        let last = page.items.last().expect("limit is at least 1");
        page.cursor = Some(Cursor::after_item(query, last));
        return Ok(Walk::Stop);
    }
    page.items.push(item);
    Ok(Walk::Next)
}

#[async_trait]
impl ItemStore for EmbeddedStore {
    fn kind(&self) -> &'static str {
        "embedded"
    }

    async fn get(&self, key: &ItemKey) -> Result<Option<Item>, StoreError> {
        check_key(key)?;
        self.inline(|db, now| {
            let tx = db.begin_read().map_err(db_err)?;
            let items = tx.open_table(ITEMS).map_err(db_err)?;
            let found = match items.get((key.pk.as_str(), key.sk.as_str())).map_err(db_err)? {
                Some(bytes) => Some(decode(bytes.value())?),
                None => None,
            };
            Ok(live(found, now))
        })
    }

    async fn put(&self, item: Item, condition: Condition) -> Result<Item, StoreError> {
        let mut written = self.transact_returning(vec![WriteOp::Put { item, condition }]).await?;
        Ok(written.pop().expect("one put writes one item"))
    }

    /// One write transaction for all of them (one durable commit, where separate puts take
    /// one each); each put's condition is checked on its own.
    async fn put_each(&self, puts: Vec<(Item, Condition)>) -> Vec<Result<Item, StoreError>> {
        let count = puts.len();
        let outcome = self
            .blocking(move |db, now| {
                let tx = db.begin_write().map_err(db_err)?;
                let outcomes = {
                    let mut items = tx.open_table(ITEMS).map_err(db_err)?;
                    let mut index = tx.open_table(INDEX).map_err(db_err)?;
                    let mut outcomes = Vec::with_capacity(puts.len());
                    for (item, condition) in puts {
                        outcomes.push(match check_key(&item.key) {
                            Err(e) => Err(e),
                            Ok(()) => {
                                apply(&mut items, &mut index, vec![WriteOp::Put { item, condition }], now)
                                    .map(|mut written| written.pop().expect("one put writes one item"))
                            }
                        });
                    }
                    outcomes
                };
                tx.commit().map_err(db_err)?;
                Ok(outcomes)
            })
            .await;
        match outcome {
            Ok(outcomes) => outcomes,
            // The transaction itself failed: nothing was written.
            Err(e) => {
                let text = e.to_string();
                (0..count).map(|_| Err(StoreError::Unavailable(text.clone().into()))).collect()
            }
        }
    }

    async fn delete(&self, key: &ItemKey, condition: Condition) -> Result<(), StoreError> {
        self.transact_returning(vec![WriteOp::Delete { key: key.clone(), condition }]).await?;
        Ok(())
    }

    async fn transact(&self, ops: Vec<WriteOp>) -> Result<(), StoreError> {
        if ops.is_empty() || ops.len() > MAX_TRANSACTION_ITEMS {
            return Err(Invalid::TransactionSize.into());
        }
        self.transact_returning(ops).await.map(|_| ())
    }

    async fn query(&self, query: Query) -> Result<Page, StoreError> {
        self.blocking(move |db, now| {
            let tx = db.begin_read().map_err(db_err)?;
            let items = tx.open_table(ITEMS).map_err(db_err)?;
            let index = tx.open_table(INDEX).map_err(db_err)?;
            run_query(&items, &index, &query, now)
        })
        .await
    }

    async fn increment(&self, increment: Increment) -> Result<i64, StoreError> {
        let written = match self.transact_returning(vec![WriteOp::Increment(increment)]).await {
            Err(StoreError::Conflict) => return Err(StoreError::LimitReached),
            other => other?,
        };
        rp_ports::store::incremented(written.first())
    }
}

impl EmbeddedStore {
    async fn transact_returning(&self, ops: Vec<WriteOp>) -> Result<Vec<Item>, StoreError> {
        self.blocking(move |db, now| {
            let tx = db.begin_write().map_err(db_err)?;
            let written = {
                let mut items = tx.open_table(ITEMS).map_err(db_err)?;
                let mut index = tx.open_table(INDEX).map_err(db_err)?;
                apply(&mut items, &mut index, ops, now)?
            };
            // On error above the transaction is dropped uncommitted, so nothing is half-written.
            tx.commit().map_err(db_err)?;
            Ok(written)
        })
        .await
    }
}
