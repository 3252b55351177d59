//! Content customizations of one tenant. Layout, all in the tenant's partition `CONTENT#<tenant>`:
//!
//! | sk | item |
//! |---|---|
//! | `META` | `{nextId, count}`: id allocation and the list's `total` |
//! | `ITEM#<id, 19 digits>` | the current customization; its store version is its version |
//! | `VER#<id, 19 digits>#<version, 10 digits>` | each earlier version, as it was |
//!
//! A create writes the item and advances `META` in one transaction conditional on `META`'s
//! version, so ids are gap-free and increasing and `total` is exact under concurrent creates. An
//! update writes the new item (conditional on the version it read) and the old one's snapshot in
//! one transaction.

use crate::domain::apps::AppId;
use crate::domain::content::{ContentRecord, NewContent};
use crate::domain::time::EpochMillis;
use crate::ports::{
    retry_on_conflict, Condition, Cursor, Item, ItemKey, ItemStore, MaybeConflict, Query, SortKey,
    StoreError, WriteOp,
};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Meta {
    next_id: i64,
    count: i64,
}

pub struct Contents<'a> {
    store: &'a dyn ItemStore,
    partition: String,
    /// Earlier versions kept per customization; an update drops the one that falls out.
    keep: u64,
}

/// Earlier versions kept per customization unless `CONTENT_VERSIONS_KEPT` says otherwise.
pub const DEFAULT_VERSIONS_KEPT: u64 = 50;

fn item_sk(id: i64) -> String {
    format!("ITEM#{id:019}")
}

fn version_sk(id: i64, version: u64) -> String {
    format!("VER#{id:019}#{version:010}")
}

fn record(item: &Item) -> Result<ContentRecord, StoreError> {
    let mut record: ContentRecord = item.data()?;
    record.version = item.version;
    Ok(record)
}

impl<'a> Contents<'a> {
    pub fn new(store: &'a dyn ItemStore, tenant: &AppId) -> Self {
        Self { store, partition: format!("CONTENT#{tenant}"), keep: DEFAULT_VERSIONS_KEPT }
    }

    /// Keeps the last `keep` earlier versions of each customization.
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

    /// Stores a new customization under the next id and returns it.
    pub async fn create(&self, new: &NewContent, now: EpochMillis) -> Result<ContentRecord, StoreError> {
        retry_on_conflict(|| async {
            let (meta, meta_version) = self.meta().await?;
            let created = new.record(meta.next_id, now);
            let next = Meta { next_id: meta.next_id + 1, count: meta.count + 1 };
            let ops = vec![
                WriteOp::Put {
                    item: Item::new(self.key(item_sk(created.id)), &created)?,
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

    pub async fn get(&self, id: i64) -> Result<Option<ContentRecord>, StoreError> {
        self.store.get(&self.key(item_sk(id))).await?.as_ref().map(record).transpose()
    }

    /// The tenant's customizations in id order, and the tenant's total.
    pub async fn list(
        &self,
        limit: usize,
        cursor: Option<Cursor>,
    ) -> Result<(Vec<ContentRecord>, Option<Cursor>, i64), StoreError> {
        let page = self.store.query(self.list_query().limit(limit).after(cursor)).await?;
        let items = page.items.iter().map(record).collect::<Result<_, _>>()?;
        let (meta, _) = self.meta().await?;
        Ok((items, page.cursor, meta.count))
    }

    pub fn list_query(&self) -> Query {
        Query::table(self.partition.clone()).sort(SortKey::BeginsWith("ITEM#".into()))
    }

    /// Replaces customization `id` with `change(current)`, keeping the current one as a version.
    /// `Ok(None)` if there is no such customization; `change`'s error is passed through.
    pub async fn update<E: From<StoreError> + MaybeConflict>(
        &self,
        id: i64,
        now: EpochMillis,
        change: impl Fn(&ContentRecord) -> Result<ContentRecord, E>,
    ) -> Result<Option<ContentRecord>, E> {
        let change = &change;
        retry_on_conflict(|| async move {
            let Some(current) = self.get(id).await? else {
                return Ok(None);
            };
            let mut next = change(&current)?;
            next.id = current.id;
            next.created_at = current.created_at;
            next.updated_at = now.max(current.updated_at);
            let mut ops = vec![
                WriteOp::Put {
                    item: Item::new(self.key(item_sk(id)), &next)?,
                    condition: Condition::Version(current.version),
                },
                WriteOp::Put {
                    item: Item::new(self.key(version_sk(id, current.version)), &current)?,
                    condition: Condition::Absent,
                },
            ];
            // Retention: the version that falls out of the last `keep` goes in the same write.
            if current.version > self.keep {
                let oldest = self.key(version_sk(id, current.version - self.keep));
                ops.push(WriteOp::Delete { key: oldest, condition: Condition::Any });
            }
            self.store.transact(ops).await?;
            next.version = current.version + 1;
            Ok(Some(next))
        })
        .await
    }

    /// Earlier versions of customization `id`, oldest first.
    pub async fn versions(
        &self,
        id: i64,
        limit: usize,
        cursor: Option<Cursor>,
    ) -> Result<(Vec<ContentRecord>, Option<Cursor>), StoreError> {
        let page = self.store.query(self.versions_query(id).limit(limit).after(cursor)).await?;
        let mut versions = Vec::with_capacity(page.items.len());
        for item in &page.items {
            let mut snapshot: ContentRecord = item.data()?;
            snapshot.version = version_of(&item.key.sk);
            versions.push(snapshot);
        }
        Ok((versions, page.cursor))
    }

    pub fn versions_query(&self, id: i64) -> Query {
        Query::table(self.partition.clone()).sort(SortKey::BeginsWith(format!("VER#{id:019}#")))
    }

    /// One earlier version of customization `id`.
    pub async fn version(&self, id: i64, version: u64) -> Result<Option<ContentRecord>, StoreError> {
        match self.store.get(&self.key(version_sk(id, version))).await? {
            Some(item) => {
                let mut snapshot: ContentRecord = item.data()?;
                snapshot.version = version;
                Ok(Some(snapshot))
            }
            None => Ok(None),
        }
    }
}

fn version_of(sk: &str) -> u64 {
    sk.rsplit('#').next().and_then(|v| v.parse().ok()).unwrap_or_default()
}
