//! Tenant records kept with their version history: content customizations and code
//! customizations, one implementation for both. Layout, all in the tenant's partition
//! `<KIND>#<tenant>` (`CONTENT#…`, `CODE#…`):
//!
//! | sk | item |
//! |---|---|
//! | `META` | `{nextId, count, index}`: id allocation, the list's `total`, the ids each index lists |
//! | `ITEM#<id, 19 digits>` | the current record; its store version is its version |
//! | `VER#<id, 19 digits>#<version, 10 digits>` | each earlier version, as it was |
//! | `KEY#<idempotency key>` | `{id, fingerprint}`: what the create sent with that key made, and its request's fingerprint; written in the create's transaction, absent-conditioned, with a TTL of a day |
//!
//! A create writes the item and advances `META` in one transaction conditional on `META`'s
//! version, so ids are gap-free and increasing and `total` is exact under concurrent creates. An
//! update writes the new item (conditional on the version it read) and the old one's snapshot in
//! one transaction, and drops the snapshot that falls out of the retention in the same write.
//!
//! `META`'s `index` lists, under a name, the ids of the records [`Versioned::index`] puts there:
//! the enabled code customizations by trigger, so that an OOB start reads `META` and the
//! customizations it runs, not every customization the tenant has (disabled ones and their
//! sources included). A write that changes which index lists a record changes `META` in its
//! transaction, conditional on `META`'s version, so the index is never behind the records. A
//! `META` written before the index existed has none: the first read builds it from the records
//! (see [`Records::index`]).

use crate::Order;
use rp_domain::apps::AppId;
use rp_domain::code::{CodeRecord, Trigger};
use rp_domain::content::ContentRecord;
use rp_domain::idempotency::{FirstCreate, IdempotencyKey, SentAgain};
use rp_domain::time::EpochMillis;
use rp_ports::{
    retry_on_conflict, retry_on_conflict_from, Condition, Cursor, Item, ItemKey, ItemStore, Listed,
    MaybeConflict, Query, SortKey, StoreError, WriteOp,
};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A record kept with its history: an id per tenant, creation and update times, and the store
/// version (set when read, not stored).
pub trait Versioned: Serialize + DeserializeOwned + Clone {
    /// The partition prefix of this kind of record.
    const KIND: &'static str;
    fn id(&self) -> i64;
    fn version(&self) -> u64;
    fn set_version(&mut self, version: u64);
    fn created_at(&self) -> EpochMillis;
    fn updated_at(&self) -> EpochMillis;
    /// Keeps the identity of the record it replaces: its id and creation time, and an update
    /// time that never goes back.
    fn replacing(&mut self, current: &Self, now: EpochMillis);
    /// The index of `META` that lists this record, if any.
    fn index(&self) -> Option<&'static str>;
}

macro_rules! versioned {
    ($record:ty, $kind:literal, $index:expr) => {
        impl Versioned for $record {
            const KIND: &'static str = $kind;
            fn id(&self) -> i64 {
                self.id
            }
            fn version(&self) -> u64 {
                self.version
            }
            fn set_version(&mut self, version: u64) {
                self.version = version;
            }
            fn created_at(&self) -> EpochMillis {
                self.created_at
            }
            fn updated_at(&self) -> EpochMillis {
                self.updated_at
            }
            fn replacing(&mut self, current: &Self, now: EpochMillis) {
                self.id = current.id;
                self.created_at = current.created_at;
                self.updated_at = now.max(current.updated_at);
            }
            fn index(&self) -> Option<&'static str> {
                ($index)(self)
            }
        }
    };
}

versioned!(ContentRecord, "CONTENT", |_: &ContentRecord| None);
// Enabled code customizations, by trigger: what an OOB start runs.
versioned!(CodeRecord, "CODE", |r: &CodeRecord| r.hook().map(Trigger::name));

/// A tenant's content customizations.
pub type Contents<'a> = Records<'a, ContentRecord>;
/// A tenant's code customizations.
pub type CodeRecords<'a> = Records<'a, CodeRecord>;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Meta {
    next_id: i64,
    count: i64,
    /// Index name → the ids it lists, ascending. `None` in a `META` written before the index
    /// existed, until [`Records::index`] builds it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    index: Option<BTreeMap<String, Vec<i64>>>,
}

impl Meta {
    /// Record `id` moves from index `from` to index `to` (either may be none).
    fn reindex(&mut self, id: i64, from: Option<&str>, to: Option<&str>) {
        let Some(index) = self.index.as_mut() else {
            return;
        };
        if let Some(ids) = from.and_then(|name| index.get_mut(name)) {
            ids.retain(|listed| *listed != id);
        }
        if let Some(name) = to {
            let ids = index.entry(name.to_owned()).or_default();
            if let Err(at) = ids.binary_search(&id) {
                ids.insert(at, id);
            }
        }
        index.retain(|_, ids| !ids.is_empty());
    }
}

pub struct Records<'a, R> {
    store: &'a dyn ItemStore,
    partition: String,
    /// Earlier versions kept per record; an update drops the one that falls out.
    keep: u64,
    kind: std::marker::PhantomData<R>,
}

/// Earlier versions kept per record unless configured otherwise (`CONTENT_VERSIONS_KEPT`).
pub const DEFAULT_VERSIONS_KEPT: u64 = 50;

/// How many earlier versions a delete takes in the record's own transaction: all it holds but
/// the record and `META`.
const DELETE_ROOM: usize = rp_ports::store::MAX_TRANSACTION_ITEMS - 2;

fn item_sk(id: i64) -> String {
    format!("ITEM#{id:019}")
}

fn key_sk(key: &IdempotencyKey) -> String {
    format!("KEY#{}", key.as_str())
}

/// A create under an idempotency key: the key, its request's fingerprint, and when the key
/// lapses (epoch seconds).
pub struct Once<'k> {
    pub key: &'k IdempotencyKey,
    pub fingerprint: String,
    pub expires_at: i64,
}

/// What a create did: made the record, or found its key holding an earlier create, judged
/// against this one's request.
#[derive(Debug)]
pub enum Created<R> {
    New(R),
    Before(SentAgain),
}

fn version_sk(id: i64, version: u64) -> String {
    format!("VER#{id:019}#{version:010}")
}

fn record<R: Versioned>(item: &Item) -> Result<R, StoreError> {
    let mut record: R = item.data()?;
    record.set_version(item.version);
    Ok(record)
}

impl<'a, R: Versioned> Records<'a, R> {
    pub fn new(store: &'a dyn ItemStore, tenant: &AppId) -> Self {
        Self {
            store,
            partition: format!("{}#{tenant}", R::KIND),
            keep: DEFAULT_VERSIONS_KEPT,
            kind: std::marker::PhantomData,
        }
    }

    /// Keeps the last `keep` earlier versions of each record.
    pub fn keeping(mut self, keep: u64) -> Self {
        self.keep = keep.max(1);
        self
    }

    fn key(&self, sk: String) -> ItemKey {
        ItemKey::new(self.partition.clone(), sk)
    }

    /// The write of `meta`, conditional on `META` being at `version` (absent if `None`): the
    /// condition every change of `META` carries.
    fn put_meta(&self, meta: &Meta, version: Option<u64>) -> Result<WriteOp, StoreError> {
        Ok(WriteOp::Put {
            item: Item::new(self.key("META".into()), meta)?,
            condition: version.map_or(Condition::Absent, Condition::Version),
        })
    }

    async fn meta(&self) -> Result<(Meta, Option<u64>), StoreError> {
        match self.store.get(&self.key("META".into())).await? {
            Some(item) => Ok((item.data()?, Some(item.version))),
            None => Ok((Meta { next_id: 1, count: 0, index: Some(BTreeMap::new()) }, None)),
        }
    }

    /// Stores `make(id)` under the next id and returns it; under `once`'s key, only if the key
    /// holds nothing yet, and then the key with it: else what the key holds, and nothing is
    /// stored.
    pub async fn create(
        &self,
        once: Option<&Once<'_>>,
        make: impl Fn(i64) -> R,
    ) -> Result<Created<R>, StoreError> {
        let make = &make;
        retry_on_conflict(|| async move {
            let key_read = async {
                let Some(once) = once else { return Ok(None) };
                let held = self.store.get(&self.key(key_sk(once.key))).await?;
                let first = held.map(|held| held.data::<FirstCreate>()).transpose()?;
                Ok::<_, StoreError>(first.map(|first| first.judge(&once.fingerprint)))
            };
            let (meta, held) = tokio::join!(self.meta(), key_read);
            if let Some(judged) = held? {
                return Ok(Created::Before(judged));
            }
            let (meta, meta_version) = meta?;
            let created = make(meta.next_id);
            let mut next = Meta { next_id: meta.next_id + 1, count: meta.count + 1, ..meta };
            next.reindex(created.id(), None, created.index());
            let mut ops = vec![
                // Its store version is its version, 1 to start with: ids are never used again.
                WriteOp::Put {
                    item: Item::new(self.key(item_sk(created.id())), &created)?.numbered_from(1),
                    condition: Condition::Absent,
                },
                self.put_meta(&next, meta_version)?,
            ];
            if let Some(once) = once {
                let first = FirstCreate { id: created.id(), fingerprint: once.fingerprint.clone() };
                let item = Item::new(self.key(key_sk(once.key)), &first)?.with_ttl(Some(once.expires_at));
                ops.push(WriteOp::Put { item, condition: Condition::Absent });
            }
            self.store.transact(ops).await?;
            Ok(Created::New(created))
        })
        .await
    }

    pub async fn get(&self, id: i64) -> Result<Option<R>, StoreError> {
        self.store.get(&self.key(item_sk(id))).await?.as_ref().map(record).transpose()
    }

    /// The tenant's records in id order, and the tenant's total.
    pub async fn list(
        &self,
        limit: usize,
        cursor: Option<Cursor>,
    ) -> Result<(Vec<R>, Option<Cursor>, i64), StoreError> {
        // The page and the count (in `META`) are read at once.
        let (page, meta) =
            tokio::join!(self.store.query(self.list_query().limit(limit).after(cursor)), self.meta());
        let page = page?;
        let items = page.items.iter().map(record).collect::<Result<_, _>>()?;
        Ok((items, page.cursor, meta?.0.count))
    }

    pub fn list_query(&self) -> Query {
        Query::table(self.partition.clone()).sort(SortKey::BeginsWith("ITEM#".into()))
    }

    /// The ids index `name` lists, in id order, from `META` (built first for a `META` that has
    /// none). [`Self::listed_in`] reads their records, so that a caller can make each read
    /// beside its own.
    pub async fn index(&self, name: &str) -> Result<Vec<i64>, StoreError> {
        let (mut meta, meta_version) = self.meta().await?;
        Ok(match (meta.index.take(), meta_version) {
            (Some(mut index), _) => index.remove(name),
            (None, Some(version)) => self.build_index(meta, version).await?.remove(name),
            (None, None) => None,
        }
        .unwrap_or_default())
    }

    /// The records `ids` (from [`Self::index`]), read at once, in id order. A record changed
    /// since `META` was read is taken as it is now, and left out if it is no longer listed there.
    pub async fn listed_in(&self, name: &str, ids: Vec<i64>) -> Result<Vec<R>, StoreError> {
        let records = super::at_once(ids.into_iter().map(|id| self.get(id)).collect()).await?;
        Ok(records.into_iter().flatten().filter(|r| r.index() == Some(name)).collect())
    }

    /// Builds `META`'s index from the records, for a `META` written before it existed, and
    /// stores it if `META` is still at `version`: a write that moved a record between indexes
    /// since has changed `META` too, and the next read builds it again.
    async fn build_index(&self, meta: Meta, version: u64) -> Result<BTreeMap<String, Vec<i64>>, StoreError> {
        let mut meta = Meta { index: Some(BTreeMap::new()), ..meta };
        for item in &super::query_all(self.store, self.list_query().limit(100)).await? {
            let record: R = record(item)?;
            meta.reindex(record.id(), None, record.index());
        }
        match self.store.put(Item::new(self.key("META".into()), &meta)?, Condition::Version(version)).await {
            Ok(_) | Err(StoreError::Conflict) => {}
            Err(e) => return Err(e),
        }
        Ok(meta.index.unwrap_or_default())
    }

    /// Replaces record `id` with `change(current)`, keeping the current one as a version.
    /// `Ok(None)` if there is no such record; `change`'s error is passed through.
    pub async fn update<E: From<StoreError> + MaybeConflict>(
        &self,
        id: i64,
        now: EpochMillis,
        change: impl Fn(&R) -> Result<R, E>,
    ) -> Result<Option<R>, E> {
        let current = self.get(id).await?;
        self.update_from(id, now, current, change).await
    }

    /// [`update`](Self::update) from `current`, record `id` as the caller has read it (beside
    /// another read): a lost race reads it again.
    pub async fn update_from<E: From<StoreError> + MaybeConflict>(
        &self,
        id: i64,
        now: EpochMillis,
        current: Option<R>,
        change: impl Fn(&R) -> Result<R, E>,
    ) -> Result<Option<R>, E> {
        let change = &change;
        retry_on_conflict_from(
            Ok(current),
            || self.get(id),
            |current| async move {
                let Some(current) = current? else {
                    return Ok(None);
                };
                let mut next = change(&current)?;
                next.replacing(&current, now);
                let mut ops = vec![
                    WriteOp::Put {
                        item: Item::new(self.key(item_sk(id)), &next)?,
                        condition: Condition::Version(current.version()),
                    },
                    WriteOp::Put {
                        item: Item::new(self.key(version_sk(id, current.version())), &current)?,
                        condition: Condition::Absent,
                    },
                ];
                // Retention: the version that falls out of the last `keep` goes in the same write.
                if current.version() > self.keep {
                    let oldest = self.key(version_sk(id, current.version() - self.keep));
                    ops.push(WriteOp::Delete { key: oldest, condition: Condition::Any });
                }
                // Listed elsewhere now: `META`'s index follows in the same write. Without an index
                // yet, `META` is written as it is, so that an index being built from the records
                // read before this write cannot be stored (its write is conditional on `META`).
                if next.index() != current.index() {
                    let (mut meta, meta_version) = self.meta().await?;
                    meta.reindex(id, current.index(), next.index());
                    ops.push(self.put_meta(&meta, meta_version)?);
                }
                self.store.transact(ops).await?;
                next.set_version(current.version() + 1);
                Ok(Some(next))
            },
        )
        .await
    }

    /// Deletes record `id` with its earlier versions, and counts it out of the total;
    /// `false` if there is no such record.
    pub async fn delete(&self, id: i64) -> Result<bool, StoreError> {
        // The record, `META` and the first versions are read at once; a lost race reads all three
        // again. Whether the transaction took every version comes back with the outcome.
        let (deleted, whole) = retry_on_conflict(|| async move {
            let (current, meta, versions) = tokio::join!(
                self.get(id),
                self.meta(),
                self.store.query(self.versions_query(id).limit(DELETE_ROOM)),
            );
            let Some(current) = current? else {
                return Ok((false, true));
            };
            let (meta, meta_version) = meta?;
            let versions = versions?;
            let mut next = Meta { count: (meta.count - 1).max(0), ..meta };
            next.reindex(id, current.index(), None);
            let mut ops = vec![
                WriteOp::Delete {
                    key: self.key(item_sk(id)),
                    condition: Condition::Version(current.version()),
                },
                self.put_meta(&next, meta_version)?,
            ];
            let whole = versions.cursor.is_none();
            ops.extend(
                versions.items.into_iter().map(|v| WriteOp::Delete { key: v.key, condition: Condition::Any }),
            );
            self.store.transact(ops).await?;
            Ok::<_, StoreError>((true, whole))
        })
        .await?;
        // Versions beyond one transaction's room (a retention over 98) go afterwards. None can
        // be added meanwhile: a new version is written only beside its record, which is gone.
        if whole {
            return Ok(deleted);
        }
        loop {
            let rest = self.store.query(self.versions_query(id).limit(100)).await?;
            if rest.items.is_empty() {
                return Ok(deleted);
            }
            for v in rest.items {
                self.store.delete(&v.key, Condition::Any).await?;
            }
        }
    }

    /// Earlier versions of record `id`, in `order`.
    pub async fn versions(&self, id: i64, order: Order, limit: usize, cursor: Option<Cursor>) -> Listed<R> {
        let page = self.store.query(order.of(self.versions_query(id)).limit(limit).after(cursor)).await?;
        let mut versions = Vec::with_capacity(page.items.len());
        for item in &page.items {
            let mut snapshot: R = item.data()?;
            snapshot.set_version(version_of(&item.key.sk));
            versions.push(snapshot);
        }
        Ok((versions, page.cursor))
    }

    pub fn versions_query(&self, id: i64) -> Query {
        Query::table(self.partition.clone()).sort(SortKey::BeginsWith(format!("VER#{id:019}#")))
    }

    /// The record `id` as it is now and its earlier `version`, read at once.
    pub async fn with_version(&self, id: i64, version: u64) -> Result<(Option<R>, Option<R>), StoreError> {
        let (current, snapshot) = tokio::join!(self.get(id), self.version(id, version));
        Ok((current?, snapshot?))
    }

    /// One earlier version of record `id`.
    pub async fn version(&self, id: i64, version: u64) -> Result<Option<R>, StoreError> {
        match self.store.get(&self.key(version_sk(id, version))).await? {
            Some(item) => {
                let mut snapshot: R = item.data()?;
                snapshot.set_version(version);
                Ok(Some(snapshot))
            }
            None => Ok(None),
        }
    }
}

fn version_of(sk: &str) -> u64 {
    sk.rsplit('#').next().and_then(|v| v.parse().ok()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn code(id: i64, enabled: bool) -> CodeRecord {
        CodeRecord {
            id,
            display_name: format!("c{id}"),
            trigger: Trigger::OobStart,
            source: "function handler() {}".into(),
            timeout_ms: 1000,
            enabled,
            created_at: EpochMillis(1),
            updated_at: EpochMillis(1),
            version: 0,
        }
    }

    /// The records index `name` lists, as an OOB start reads them: `META`, then each of them.
    async fn indexed<R: Versioned>(records: &Records<'_, R>, name: &str) -> Result<Vec<R>, StoreError> {
        let ids = records.index(name).await?;
        records.listed_in(name, ids).await
    }

    fn ids(records: &[CodeRecord]) -> Vec<i64> {
        records.iter().map(|r| r.id).collect()
    }

    async fn meta_json(records: &CodeRecords<'_>) -> Value {
        records.store.get(&records.key("META".into())).await.unwrap().unwrap().data().unwrap()
    }

    fn enable(on: bool) -> impl Fn(&CodeRecord) -> Result<CodeRecord, StoreError> {
        move |r| Ok(CodeRecord { enabled: on, ..r.clone() })
    }

    /// An empty embedded store (kept while the directory lives) and a tenant.
    fn fixture() -> (crate::TestBackend, AppId) {
        (crate::TestBackend::new(), AppId::parse("appId", "tenant").unwrap())
    }

    #[tokio::test]
    async fn the_index_lists_the_enabled_customizations_through_every_write() {
        let (backend, tenant) = fixture();
        let records = CodeRecords::new(backend.store.as_ref(), &tenant);
        let hooks = || indexed(&records, "oob.start");
        assert!(hooks().await.unwrap().is_empty(), "no META yet");
        for enabled in [true, false, true] {
            records.create(None, |id| code(id, enabled)).await.unwrap();
        }
        assert_eq!(ids(&hooks().await.unwrap()), [1, 3]);
        assert_eq!(meta_json(&records).await["index"], json!({"oob.start": [1, 3]}));
        records.update(3, EpochMillis(2), enable(false)).await.unwrap();
        records.update(2, EpochMillis(2), enable(true)).await.unwrap();
        assert_eq!(ids(&hooks().await.unwrap()), [1, 2]);
        // An update that leaves it where it was does not touch META.
        let before = records.meta().await.unwrap().1;
        records
            .update(2, EpochMillis(3), |r| {
                Ok::<_, StoreError>(CodeRecord { source: "x".into(), ..r.clone() })
            })
            .await
            .unwrap();
        assert_eq!(records.meta().await.unwrap().1, before);
        assert_eq!(hooks().await.unwrap()[1].source, "x", "the record as it is now");
        assert!(records.delete(1).await.unwrap());
        assert_eq!(ids(&hooks().await.unwrap()), [2]);
        records.update(2, EpochMillis(4), enable(false)).await.unwrap();
        assert!(hooks().await.unwrap().is_empty());
        assert_eq!(meta_json(&records).await["index"], json!({}));
        assert!(indexed(&records, "another").await.unwrap().is_empty());
        // Content customizations are in no index.
        let contents = Contents::new(backend.store.as_ref(), &tenant);
        assert!(indexed(&contents, "oob.start").await.unwrap().is_empty());
    }

    /// However many records an index names, a read has at most `READS_AT_ONCE` (16) of them
    /// in flight, and answers them in the index's order.
    #[tokio::test]
    async fn an_index_is_read_a_bounded_number_at_once() {
        let (backend, tenant) = fixture();
        for _ in 0..40 {
            CodeRecords::new(backend.store.as_ref(), &tenant)
                .create(None, |id| code(id, true))
                .await
                .unwrap();
        }
        let (traced, trips) = rp_ports::trips::recorded(&backend, std::time::Duration::from_millis(5));
        let records = CodeRecords::new(traced.store.as_ref(), &tenant);
        assert_eq!(ids(&indexed(&records, "oob.start").await.unwrap()), (1..=40).collect::<Vec<_>>());
        let tally = trips.take();
        // META, then the 40 records in waves of 16, 16 and 8.
        let per_wave = |wave| tally.calls.iter().filter(|(w, _)| *w == wave).count();
        assert_eq!((1..=tally.waves).map(per_wave).collect::<Vec<_>>(), [1, 16, 16, 8], "{tally}");
    }

    /// A tenant whose META predates the index: the first read builds it from the records.
    #[tokio::test]
    async fn a_meta_without_the_index_has_it_built_once_and_not_over_a_newer_write() {
        let (backend, tenant) = fixture();
        let records = CodeRecords::new(backend.store.as_ref(), &tenant);
        let store = backend.store.as_ref();
        // 150 customizations (more than a page), every tenth enabled, as written before.
        for id in 1..=150 {
            let item = Item::new(records.key(item_sk(id)), &code(id, id % 10 == 0)).unwrap();
            store.put(item, Condition::Absent).await.unwrap();
        }
        let legacy = json!({"nextId": 151, "count": 150});
        let meta = store.put(Item::new(records.key("META".into()), &legacy).unwrap(), Condition::Absent);
        let version = meta.await.unwrap().version;

        // An index built from a read that a later write overtook is not stored.
        records.update(5, EpochMillis(2), enable(true)).await.unwrap();
        assert_eq!(meta_json(&records).await, legacy, "the write moved META on, index-less");
        let stale = records.build_index(records.meta().await.unwrap().0, version).await.unwrap();
        assert_eq!(stale["oob.start"].len(), 16, "what it read");
        assert_eq!(meta_json(&records).await.get("index"), None, "but did not store");

        let expected: Vec<i64> = std::iter::once(5).chain((1..=15).map(|i| i * 10)).collect();
        assert_eq!(ids(&indexed(&records, "oob.start").await.unwrap()), expected);
        assert_eq!(meta_json(&records).await["index"], json!({"oob.start": expected}));
        assert_eq!(meta_json(&records).await["count"], 150);
        // From now on, the index is kept by the writes.
        records.update(10, EpochMillis(3), enable(false)).await.unwrap();
        assert_eq!(ids(&indexed(&records, "oob.start").await.unwrap())[..2], [5, 20]);
    }

    /// Each update drops the earlier version that falls out of the last `keep`, however many
    /// updates came before.
    #[tokio::test]
    async fn only_the_last_kept_versions_stay() {
        let (backend, tenant) = fixture();
        let keep = 3;
        let records = CodeRecords::new(backend.store.as_ref(), &tenant).keeping(keep);
        records.create(None, |id| code(id, false)).await.unwrap();
        for at in 0..10 {
            records.update(1, EpochMillis(2 + at), enable(at % 2 == 0)).await.unwrap();
            let (kept, _) = records.versions(1, Order::OldestFirst, 200, None).await.unwrap();
            let kept: Vec<u64> = kept.iter().map(|v| v.version).collect();
            let current = at as u64 + 2;
            assert_eq!(
                kept,
                (current.saturating_sub(keep).max(1)..current).collect::<Vec<_>>(),
                "at {current}"
            );
        }
    }

    /// A delete takes every earlier version: those beyond one transaction's room after it, and
    /// all of a record with as many as the room holds (98) in its one transaction.
    #[tokio::test]
    async fn a_delete_takes_every_version_however_many() {
        let (backend, tenant) = fixture();
        let records = CodeRecords::new(backend.store.as_ref(), &tenant).keeping(500);
        let versions = |id| records.versions(id, Order::OldestFirst, 200, None);
        for (id, updates) in [(1, 130), (2, 3), (3, DELETE_ROOM as i64)] {
            records.create(None, |id| code(id, false)).await.unwrap();
            for at in 0..updates {
                records.update(id, EpochMillis(2 + at), enable(at % 2 == 0)).await.unwrap();
            }
            assert_eq!(versions(id).await.unwrap().0.len(), updates as usize);
        }
        let (traced, trips) = rp_ports::trips::recorded(&backend, std::time::Duration::ZERO);
        let traced = CodeRecords::new(traced.store.as_ref(), &tenant);
        assert!(traced.delete(3).await.unwrap());
        let tally = trips.take();
        assert_eq!(tally.waves_of("store.transact (100 items)"), [2], "{tally}");
        assert!(tally.waves_of("store.delete CODE").is_empty(), "nothing after it: {tally}");
        assert!(versions(3).await.unwrap().0.is_empty());
        for id in [1, 2] {
            assert!(records.delete(id).await.unwrap());
            assert!(versions(id).await.unwrap().0.is_empty(), "record {id}'s versions are gone");
            assert!(records.get(id).await.unwrap().is_none());
            assert!(!records.delete(id).await.unwrap(), "and it is gone");
        }
        assert_eq!(records.meta().await.unwrap().0.count, 0);
    }
}
