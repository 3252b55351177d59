//! Repositories: the domain's records mapped onto the storage port, written once for every
//! backend. Each module documents its item layout (partition key, sort key, indexes, TTL).

pub mod apps;
pub mod certificates;
pub mod code_env;
pub mod devices;
pub mod events;
pub mod oob;
pub mod ratelimit;
pub mod tokens;
pub mod versioned;
pub mod workstations;

use crate::ports::{Item, ItemKey, ItemStore, StoreError};
use serde::de::DeserializeOwned;

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
