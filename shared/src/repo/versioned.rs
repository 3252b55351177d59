//! Tenant records kept with their version history: content customizations and code
//! customizations, one implementation for both. Layout, all in the tenant's partition
//! `<KIND>#<tenant>` (`CONTENT#…`, `CODE#…`):
//!
//! | sk | item |
//! |---|---|
//! | `META` | `{nextId, count}`: id allocation and the list's `total` |
//! | `ITEM#<id, 19 digits>` | the current record; its store version is its version |
//! | `VER#<id, 19 digits>#<version, 10 digits>` | each earlier version, as it was |
//!
//! A create writes the item and advances `META` in one transaction conditional on `META`'s
//! version, so ids are gap-free and increasing and `total` is exact under concurrent creates. An
//! update writes the new item (conditional on the version it read) and the old one's snapshot in
//! one transaction, and drops the snapshot that falls out of the retention in the same write.

use crate::domain::apps::AppId;
use crate::domain::code::CodeRecord;
use crate::domain::content::ContentRecord;
use crate::domain::time::EpochMillis;
use crate::ports::{
    retry_on_conflict, Condition, Cursor, Item, ItemKey, ItemStore, MaybeConflict, Query, SortKey,
    StoreError, WriteOp,
};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

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
}

macro_rules! versioned {
    ($record:ty, $kind:literal) => {
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
        }
    };
}

versioned!(ContentRecord, "CONTENT");
versioned!(CodeRecord, "CODE");

/// A tenant's content customizations.
pub type Contents<'a> = Records<'a, ContentRecord>;
/// A tenant's code customizations.
pub type CodeRecords<'a> = Records<'a, CodeRecord>;

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Meta {
    next_id: i64,
    count: i64,
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

fn item_sk(id: i64) -> String {
    format!("ITEM#{id:019}")
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

    async fn meta(&self) -> Result<(Meta, Option<u64>), StoreError> {
        match self.store.get(&self.key("META".into())).await? {
            Some(item) => Ok((item.data()?, Some(item.version))),
            None => Ok((Meta { next_id: 1, count: 0 }, None)),
        }
    }

    /// Stores `make(id)` under the next id and returns it.
    pub async fn create(&self, make: impl Fn(i64) -> R) -> Result<R, StoreError> {
        let make = &make;
        retry_on_conflict(|| async move {
            let (meta, meta_version) = self.meta().await?;
            let created = make(meta.next_id);
            let next = Meta { next_id: meta.next_id + 1, count: meta.count + 1 };
            let ops = vec![
                WriteOp::Put {
                    item: Item::new(self.key(item_sk(created.id())), &created)?,
                    condition: Condition::Absent,
                },
                WriteOp::Put {
                    item: Item::new(self.key("META".into()), &next)?,
                    condition: meta_version.map_or(Condition::Absent, Condition::Version),
                },
            ];
            self.store.transact(ops).await?;
            Ok(created)
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
        let page = self.store.query(self.list_query().limit(limit).after(cursor)).await?;
        let items = page.items.iter().map(record).collect::<Result<_, _>>()?;
        let (meta, _) = self.meta().await?;
        Ok((items, page.cursor, meta.count))
    }

    pub fn list_query(&self) -> Query {
        Query::table(self.partition.clone()).sort(SortKey::BeginsWith("ITEM#".into()))
    }

    /// Replaces record `id` with `change(current)`, keeping the current one as a version.
    /// `Ok(None)` if there is no such record; `change`'s error is passed through.
    pub async fn update<E: From<StoreError> + MaybeConflict>(
        &self,
        id: i64,
        now: EpochMillis,
        change: impl Fn(&R) -> Result<R, E>,
    ) -> Result<Option<R>, E> {
        let change = &change;
        retry_on_conflict(|| async move {
            let Some(current) = self.get(id).await? else {
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
            self.store.transact(ops).await?;
            next.set_version(current.version() + 1);
            Ok(Some(next))
        })
        .await
    }

    /// Deletes record `id` with its earlier versions, and counts it out of the total;
    /// `false` if there is no such record.
    pub async fn delete(&self, id: i64) -> Result<bool, StoreError> {
        let deleted = retry_on_conflict(|| async move {
            let Some(current) = self.get(id).await? else {
                return Ok(false);
            };
            let (meta, meta_version) = self.meta().await?;
            let next = Meta { count: (meta.count - 1).max(0), ..meta };
            let mut ops = vec![
                WriteOp::Delete {
                    key: self.key(item_sk(id)),
                    condition: Condition::Version(current.version()),
                },
                WriteOp::Put {
                    item: Item::new(self.key("META".into()), &next)?,
                    condition: meta_version.map_or(Condition::Absent, Condition::Version),
                },
            ];
            let room = crate::ports::store::MAX_TRANSACTION_ITEMS - ops.len();
            let versions = self.store.query(self.versions_query(id).limit(room)).await?;
            ops.extend(
                versions.items.into_iter().map(|v| WriteOp::Delete { key: v.key, condition: Condition::Any }),
            );
            self.store.transact(ops).await?;
            Ok::<_, StoreError>(true)
        })
        .await?;
        // Versions beyond one transaction's room (a retention over 98) go afterwards.
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

    /// Earlier versions of record `id`, oldest first.
    pub async fn versions(
        &self,
        id: i64,
        limit: usize,
        cursor: Option<Cursor>,
    ) -> Result<(Vec<R>, Option<Cursor>), StoreError> {
        let page = self.store.query(self.versions_query(id).limit(limit).after(cursor)).await?;
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
