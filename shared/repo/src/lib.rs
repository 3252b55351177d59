//! Repositories: the domain's records mapped onto the storage port, written once for every
//! backend. Each module documents its item layout (partition key, sort key, indexes, TTL).

pub mod apps;
pub mod certificates;
pub mod code_env;
pub mod console;
pub mod devices;
pub mod events;
pub mod oob;
pub mod pki;
pub mod ratelimit;
pub mod signing_keys;
pub mod tokens;
pub mod versioned;
pub mod workstations;

use rp_ports::{Item, ItemKey, ItemStore, Query, StoreError};
use serde::de::DeserializeOwned;

/// Which end of a time-ordered range (events by time, versions by number) a read starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    OldestFirst,
    NewestFirst,
}

impl Order {
    /// `query`, read in this order.
    pub fn of(self, query: Query) -> Query {
        match self {
            Order::OldestFirst => query,
            Order::NewestFirst => query.descending(),
        }
    }
}

/// How many independent reads one request has in flight at most (a user's device tokens, a
/// device's pairings).
const READS_AT_ONCE: usize = 16;

/// Runs independent `reads` [`READS_AT_ONCE`] at a time and answers their outcomes in their
/// order; the first failure fails them all.
pub(crate) async fn at_once<T, F>(reads: Vec<F>) -> Result<Vec<T>, StoreError>
where
    F: std::future::Future<Output = Result<T, StoreError>>,
{
    use futures_util::stream::{self, StreamExt, TryStreamExt};
    stream::iter(reads).buffered(READS_AT_ONCE).try_collect().await
}

/// `item`'s record with its version, the one a conditional write on it names.
pub(crate) fn versioned<T: DeserializeOwned>(item: &Item) -> Result<(T, u64), StoreError> {
    Ok((item.data()?, item.version))
}

/// The record at `key` with its version, if there is one.
pub(crate) async fn get_versioned<T: DeserializeOwned>(
    store: &dyn ItemStore,
    key: &ItemKey,
) -> Result<Option<(T, u64)>, StoreError> {
    store.get(key).await?.as_ref().map(versioned).transpose()
}

/// Every item `query` matches, page after page (its limit is the page size).
pub(crate) async fn query_all(store: &dyn ItemStore, query: Query) -> Result<Vec<Item>, StoreError> {
    let mut all = Vec::new();
    let mut cursor = None;
    loop {
        let page = store.query(query.clone().after(cursor)).await?;
        all.extend(page.items);
        match page.cursor {
            Some(next) => cursor = Some(next),
            None => return Ok(all),
        }
    }
}

/// Up to `limit` items of the table partition `partition` in sort-key order, starting after the
/// sort key `after` and wrapping around to the partition's start: a round-robin page. Both
/// reads go at once, so a short page costs no round trip of its own.
pub(crate) async fn ring(
    store: &dyn ItemStore,
    partition: &str,
    after: Option<&str>,
    limit: usize,
) -> Result<Vec<Item>, StoreError> {
    let first_page = Query::table(partition).limit(limit);
    let Some(after) = after else {
        return Ok(store.query(first_page).await?.items);
    };
    let cursor = rp_ports::Cursor { key: ItemKey::new(partition, after), index_key: None, scope: None };
    let (rest, from_start) = futures_util::future::join(
        store.query(first_page.clone().after(Some(cursor))),
        store.query(first_page),
    )
    .await;
    let mut items = rest?.items;
    let seen: std::collections::HashSet<_> = items.iter().map(|i| i.key.sk.clone()).collect();
    items.extend(from_start?.items.into_iter().filter(|i| !seen.contains(&i.key.sk)));
    items.truncate(limit);
    Ok(items)
}

/// The items of `lists` rank by rank (every list's first, then every list's second, …), each
/// with the index of its list, so that a cut anywhere shares fairly between the lists.
pub(crate) fn interleaved(lists: &[Vec<Item>]) -> impl Iterator<Item = (usize, &Item)> {
    let deepest = lists.iter().map(Vec::len).max().unwrap_or(0);
    (0..deepest).flat_map(move |rank| {
        lists.iter().enumerate().filter_map(move |(i, list)| list.get(rank).map(|item| (i, item)))
    })
}

/// An embedded store behind the port set, with no queue or key service, in a directory of its
/// own for as long as it lives: what the repositories' own tests read and write through.
#[cfg(test)]
pub(crate) struct TestBackend {
    backend: rp_ports::Backend,
    _dir: tempfile::TempDir,
}

#[cfg(test)]
impl TestBackend {
    pub(crate) fn new() -> Self {
        Self::with_clock(std::sync::Arc::new(rp_ports::SystemClock))
    }

    /// The store on `clock`, which a case moves on to see what has expired.
    pub(crate) fn on_clock(clock: &rp_ports::ManualClock) -> Self {
        Self::with_clock(std::sync::Arc::new(clock.clone()))
    }

    /// The store on `clock`, which decides what has expired.
    fn with_clock(clock: std::sync::Arc<dyn rp_ports::Clock>) -> Self {
        use std::sync::Arc;
        let dir = tempfile::tempdir().unwrap();
        let db = rp_adapters::embedded::EmbeddedDb::open(dir.path()).unwrap();
        let absent = Arc::new(rp_ports::absent::Absent);
        let backend = rp_ports::Backend {
            store: Arc::new(rp_adapters::embedded::EmbeddedStore::new(db, clock.clone())),
            queue: absent.clone(),
            keys: absent.clone(),
            push: absent,
            clock,
        };
        Self { backend, _dir: dir }
    }
}

/// Asserts that the item at `key` stays in `store` for `secs` more seconds of `clock`, to the
/// last one, and is gone at the next: its TTL, as every store reads it.
#[cfg(test)]
pub(crate) async fn assert_kept_for(
    store: &dyn ItemStore,
    clock: &rp_ports::ManualClock,
    key: &ItemKey,
    secs: u64,
) {
    clock.advance(std::time::Duration::from_secs(secs - 1));
    assert!(store.get(key).await.unwrap().is_some(), "{key:?} is kept {secs} s");
    clock.advance(std::time::Duration::from_secs(1));
    assert!(store.get(key).await.unwrap().is_none(), "{key:?} is gone after {secs} s");
}

#[cfg(test)]
impl std::ops::Deref for TestBackend {
    type Target = rp_ports::Backend;

    fn deref(&self) -> &rp_ports::Backend {
        &self.backend
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rp_ports::Condition;

    #[tokio::test]
    async fn query_all_reads_every_page_in_order() {
        let backend = crate::TestBackend::new();
        let store = backend.store.as_ref();
        for i in 0..250 {
            let item = Item::new(ItemKey::new("P", format!("{i:04}")), &serde_json::json!({"i": i})).unwrap();
            store.put(item, Condition::Absent).await.unwrap();
        }
        store
            .put(Item::new(ItemKey::new("Q", "x"), &serde_json::json!({})).unwrap(), Condition::Absent)
            .await
            .unwrap();
        let all = query_all(store, Query::table("P").limit(100)).await.unwrap();
        let sks: Vec<String> = all.iter().map(|item| item.key.sk.clone()).collect();
        assert_eq!(
            sks,
            (0..250).map(|i| format!("{i:04}")).collect::<Vec<_>>(),
            "three pages, in order, no other partition"
        );
        assert!(query_all(store, Query::table("none").limit(100)).await.unwrap().is_empty());
    }
}
