//! The storage port: keyed items with DynamoDB semantics.
//!
//! Items live under a partition key and a sort key, carry a version for optimistic concurrency and
//! an optional expiry (TTL), and can be found through two secondary indexes. Repositories
//! (`rp-repo`) are written once against this trait; the embedded (redb) and DynamoDB adapters
//! implement it, and one contract suite (`rp_shared::testing::contract`) holds both to it.

use async_trait::async_trait;
use base64::Engine as _;
use serde::{de::DeserializeOwned, Deserialize, Serialize};
use serde_json::{Map, Value};

pub use rp_domain::boundary::{
    Invalid, MaybeConflict, StoreError, MAX_ITEM_BYTES, MAX_PARTITION_KEY_BYTES, MAX_SORT_KEY_BYTES,
    MAX_TRANSACTION_BYTES, MAX_TRANSACTION_ITEMS,
};

/// Address of one item: partition key and sort key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ItemKey {
    pub pk: String,
    pub sk: String,
}

impl ItemKey {
    pub fn new(pk: impl Into<String>, sk: impl Into<String>) -> Self {
        Self { pk: pk.into(), sk: sk.into() }
    }

    /// Whether a table can hold this key: DynamoDB takes a partition key of 1 to
    /// [`MAX_PARTITION_KEY_BYTES`] and a sort key of 1 to [`MAX_SORT_KEY_BYTES`], and refuses any
    /// other as a bad request.
    pub fn holdable(&self) -> bool {
        (1..=MAX_PARTITION_KEY_BYTES).contains(&self.pk.len())
            && (1..=MAX_SORT_KEY_BYTES).contains(&self.sk.len())
    }
}

/// The secondary indexes every backend provides (DynamoDB GSIs `gsi1` and `gsi2`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Index {
    Gsi1,
    Gsi2,
}

impl Index {
    pub const ALL: [Index; 2] = [Index::Gsi1, Index::Gsi2];

    pub fn name(self) -> &'static str {
        match self {
            Index::Gsi1 => "gsi1",
            Index::Gsi2 => "gsi2",
        }
    }
}

/// The version a new item starts at: a fresh random number from 2^40 (far above the versions of
/// items stored when every item started at 1) to below 2^52 (exact in every number type the
/// stores use). A key's versions then do not repeat across its removal: a write conditioned on
/// a version read before an item was removed cannot land on the item stored again at that key.
pub fn fresh_version() -> u64 {
    (rand::random::<u64>() >> 12) | (1 << 40)
}

/// One stored item. `version` is maintained by the store: [`Item::first_version`] on create, +1
/// on every update.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Item {
    pub key: ItemKey,
    /// As read, the stored version. As written, ignored, except that a create starts at it when
    /// the writer set it ([`Item::numbered_from`]).
    pub version: u64,
    /// Epoch seconds after which the item counts as absent (DynamoDB TTL semantics).
    pub expires_at: Option<i64>,
    pub gsi1: Option<ItemKey>,
    pub gsi2: Option<ItemKey>,
    pub attrs: Attrs,
}

/// An item's attributes, a JSON object. Read back from storage they stay as the stored text until
/// something asks for the map, so that a record is decoded once, straight into its own type
/// ([`Item::data`]): a status poll reads two items, and decoding each twice was most of its cost.
#[derive(Default)]
pub struct Attrs {
    raw: Option<Box<serde_json::value::RawValue>>,
    map: std::sync::OnceLock<Map<String, Value>>,
}

impl Attrs {
    fn parsed(&self) -> &Map<String, Value> {
        self.map.get_or_init(|| {
            // The text was written from a map by this crate; anything else reads as empty.
            self.raw.as_ref().and_then(|raw| serde_json::from_str(raw.get()).ok()).unwrap_or_default()
        })
    }
}

impl From<Map<String, Value>> for Attrs {
    fn from(map: Map<String, Value>) -> Self {
        Self { raw: None, map: std::sync::OnceLock::from(map) }
    }
}

impl std::ops::Deref for Attrs {
    type Target = Map<String, Value>;
    fn deref(&self) -> &Map<String, Value> {
        self.parsed()
    }
}

impl std::ops::DerefMut for Attrs {
    fn deref_mut(&mut self) -> &mut Map<String, Value> {
        self.parsed();
        self.raw = None; // the map is the truth once it may change
        self.map.get_mut().expect("parsed above")
    }
}

impl Clone for Attrs {
    fn clone(&self) -> Self {
        Self { raw: self.raw.clone(), map: self.map.clone() }
    }
}

impl PartialEq for Attrs {
    fn eq(&self, other: &Self) -> bool {
        self.parsed() == other.parsed()
    }
}

impl std::fmt::Debug for Attrs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.parsed().fmt(f)
    }
}

impl Serialize for Attrs {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match &self.raw {
            Some(raw) => raw.serialize(s),
            None => self.parsed().serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for Attrs {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = Box::<serde_json::value::RawValue>::deserialize(d)?;
        if !raw.get().trim_start().starts_with('{') {
            return Err(serde::de::Error::custom("item attributes must be a JSON object"));
        }
        Ok(Self { raw: Some(raw), map: std::sync::OnceLock::new() })
    }
}

impl Item {
    /// A counter item's value ([`COUNTER_ATTR`]); `None` when it holds none.
    pub fn counter(&self) -> Option<i64> {
        self.attrs.get(COUNTER_ATTR).and_then(|v| v.as_i64())
    }

    /// An item whose attributes are `data` serialized as a JSON object.
    pub fn new<T: Serialize>(key: ItemKey, data: &T) -> Result<Self, StoreError> {
        let attrs = match serde_json::to_value(data).map_err(StoreError::encoding)? {
            Value::Object(map) => map,
            other => {
                return Err(StoreError::Encoding(format!(
                    "item data must serialize to an object, not {other}"
                )))
            }
        };
        Ok(Self { key, version: 0, expires_at: None, gsi1: None, gsi2: None, attrs: attrs.into() })
    }

    /// A create of this item starts at `version` instead of a fresh one: for a record whose
    /// versions are its own numbering (shown to its users), at a key never used again once removed.
    pub fn numbered_from(mut self, version: u64) -> Self {
        self.version = version;
        self
    }

    /// The version a create of this item gives it: the one its writer set
    /// ([`Item::numbered_from`]), else a fresh one ([`fresh_version`]).
    pub fn first_version(&self) -> u64 {
        match self.version {
            0 => fresh_version(),
            set => set,
        }
    }

    pub fn with_ttl(mut self, expires_at: Option<i64>) -> Self {
        self.expires_at = expires_at;
        self
    }

    pub fn with_index(mut self, index: Index, key: ItemKey) -> Self {
        match index {
            Index::Gsi1 => self.gsi1 = Some(key),
            Index::Gsi2 => self.gsi2 = Some(key),
        }
        self
    }

    pub fn index_key(&self, index: Index) -> Option<&ItemKey> {
        match index {
            Index::Gsi1 => self.gsi1.as_ref(),
            Index::Gsi2 => self.gsi2.as_ref(),
        }
    }

    /// The attributes read back as a domain record.
    pub fn data<T: DeserializeOwned>(&self) -> Result<T, StoreError> {
        match &self.attrs.raw {
            Some(raw) => serde_json::from_str(raw.get()).map_err(StoreError::encoding),
            None => T::deserialize(self.attrs.parsed()).map_err(StoreError::encoding),
        }
    }

    /// Whether the item has expired at `now` (epoch seconds).
    pub fn is_expired(&self, now: i64) -> bool {
        self.expires_at.is_some_and(|at| at <= now)
    }
}

/// The precondition of a write. A write whose condition does not hold fails with
/// [`StoreError::Conflict`] and changes nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Condition {
    /// Unconditional. The new version is the live item's +1, or 1.
    Any,
    /// Only if no live item has the key (an expired one counts as absent). The new version is 1.
    Absent,
    /// Only if a live item with the key exists, whatever its version. The new version is +1.
    Exists,
    /// Only if a live item with the key exists at exactly this version. The new version is +1.
    Version(u64),
}

/// One write of an all-or-nothing transaction.
#[derive(Debug, Clone)]
pub enum WriteOp {
    Put {
        item: Item,
        condition: Condition,
    },
    Delete {
        key: ItemKey,
        condition: Condition,
    },
    Check {
        key: ItemKey,
        condition: Condition,
    },
    /// A counter update ([`ItemStore::increment`]'s), here with the rest: a limit it would pass
    /// fails the transaction with [`StoreError::Conflict`] like any other condition.
    Increment(Increment),
}

impl WriteOp {
    /// The item the op writes or checks.
    pub fn key(&self) -> &ItemKey {
        match self {
            WriteOp::Put { item, .. } => &item.key,
            WriteOp::Delete { key, .. } | WriteOp::Check { key, .. } => key,
            WriteOp::Increment(increment) => &increment.key,
        }
    }
}

/// Which sort keys a query returns.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum SortKey {
    #[default]
    All,
    BeginsWith(String),
    /// Inclusive on both ends, as DynamoDB's `BETWEEN`.
    Between(String, String),
}

/// A query over one partition of the table or of an index, in ascending sort-key order unless
/// it is `descending`.
#[derive(Debug, Clone)]
pub struct Query {
    pub index: Option<Index>,
    pub pk: String,
    pub sort: SortKey,
    pub limit: usize,
    pub cursor: Option<Cursor>,
    /// Greatest sort key first (DynamoDB's `ScanIndexForward = false`); a cursor resumes in the
    /// same direction.
    pub descending: bool,
}

impl Query {
    pub fn table(pk: impl Into<String>) -> Self {
        Self { index: None, pk: pk.into(), sort: SortKey::All, limit: 100, cursor: None, descending: false }
    }

    pub fn index(index: Index, pk: impl Into<String>) -> Self {
        Self { index: Some(index), ..Self::table(pk) }
    }

    pub fn sort(mut self, sort: SortKey) -> Self {
        self.sort = sort;
        self
    }

    pub fn limit(mut self, limit: usize) -> Self {
        self.limit = limit;
        self
    }

    pub fn after(mut self, cursor: Option<Cursor>) -> Self {
        self.cursor = cursor;
        self
    }

    /// The partition read from its greatest sort key down.
    pub fn descending(mut self) -> Self {
        self.descending = true;
        self
    }
}

/// A page of records as a list reads them: the records, and where the next page starts (`None`
/// after the last).
pub type Listed<T, C = Cursor> = Result<(Vec<T>, Option<C>), StoreError>;

/// Where a query stopped: the last item's table key and, for an index query, its index key.
/// Rendered to clients as an opaque base64url token; a cursor is only accepted for the partition
/// it came from, so one tenant's cursor cannot walk another tenant's partition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cursor {
    pub key: ItemKey,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index_key: Option<ItemKey>,
    /// The sort-key condition of the query that produced it: a cursor from another list of the
    /// same partition (content items vs. their versions) is refused too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
}

impl Cursor {
    /// Where `query` stopped at the item `last`.
    pub fn after_item(query: &Query, last: &Item) -> Self {
        Self {
            key: last.key.clone(),
            index_key: query.index.and_then(|i| last.index_key(i).cloned()),
            scope: Some(Self::scope_of(query)),
        }
    }

    fn scope_of(query: &Query) -> String {
        match &query.sort {
            SortKey::All => "all".to_owned(),
            SortKey::BeginsWith(prefix) => format!("begins:{prefix}"),
            SortKey::Between(lo, hi) => format!("between:{lo}:{hi}"),
        }
    }

    pub fn encode(&self) -> String {
        opaque_token(self)
    }

    /// Parses a client-supplied cursor; `None` for anything malformed.
    pub fn decode(token: &str) -> Option<Self> {
        from_opaque_token(token)
    }

    /// Whether this cursor was produced by a query over the partition and sort condition
    /// `query` reads, with keys a store can hold (DynamoDB refuses an empty key, a partition key
    /// over 2,048 bytes and a sort key over 1,024 as a bad request, not as a foreign cursor), and
    /// a sort key inside the condition (DynamoDB refuses a start key outside it as a bad request;
    /// a cursor the list gave out always stops at an item the condition took).
    pub fn belongs_to(&self, query: &Query) -> bool {
        if !self.key.holdable() || !self.index_key.as_ref().is_none_or(ItemKey::holdable) {
            return false;
        }
        let resumed = match (query.index, &self.index_key) {
            (None, None) if self.key.pk == query.pk => &self.key.sk,
            (Some(_), Some(index_key)) if index_key.pk == query.pk => &index_key.sk,
            _ => return false,
        };
        let in_range = match &query.sort {
            SortKey::All => true,
            SortKey::BeginsWith(prefix) => resumed.starts_with(prefix.as_str()),
            SortKey::Between(lo, hi) => (lo..=hi).contains(&resumed),
        };
        in_range && self.scope.as_ref().is_none_or(|scope| *scope == Self::scope_of(query))
    }
}

/// `position` as an opaque base64url token, for a client to send back for the next page.
pub fn opaque_token<T: Serialize>(position: &T) -> String {
    let json = serde_json::to_vec(position).expect("a list position always serializes");
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json)
}

/// What [`opaque_token`] wrote; `None` for anything malformed.
pub fn from_opaque_token<T: DeserializeOwned>(token: &str) -> Option<T> {
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(token).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// One page of a query. `cursor` is set when more items may follow.
#[derive(Debug, Clone, Default)]
pub struct Page {
    pub items: Vec<Item>,
    pub cursor: Option<Cursor>,
}

/// How many times [`retry_on_conflict`] runs an attempt that keeps losing races. Twenty writers
/// of one tenant's environment variables ran out of 12 on LocalStack (2 in 20, every run) once
/// each attempt's two key calls waited for the tenant's key budget to be counted: the count
/// widens the time between the read and the write. With 16, all got through in five runs of
/// five.
pub const CONFLICT_ATTEMPTS: usize = 16;

/// The pause before the `retry`-th retry: a random time up to 2 ms doubled per retry, at most
/// 250 ms ("full jitter"), so that writers that lost to one another do not meet again at once.
/// Twenty writers racing on one item then all get through, on the embedded backend and on
/// DynamoDB Local (without it, 4 or 5 in 20 ran out of attempts); the longest total pause is
/// under three seconds, the usual one far less.
pub fn backoff(retry: usize) -> std::time::Duration {
    use rand::Rng as _;
    let ceiling_ms = (2u64 << retry.saturating_sub(1).min(7)).min(250);
    std::time::Duration::from_micros(rand::thread_rng().gen_range(0..=ceiling_ms * 1000))
}

/// Runs `attempt` (read, decide, conditional write) again while it fails with a lost race, up
/// to [`CONFLICT_ATTEMPTS`] times, after a jittered pause ([`backoff`]); the last conflict is
/// returned if every attempt lost. Each attempt must read afresh, so that a retry decides on
/// what the winner wrote.
pub async fn retry_on_conflict<T, E, F, Fut>(mut attempt: F) -> Result<T, E>
where
    E: MaybeConflict,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, E>>,
{
    retry_on_conflict_from((), || std::future::ready(()), |()| attempt()).await
}

/// [`retry_on_conflict`] for an attempt that is handed its read: the first attempt gets `first`
/// (read ahead, beside other reads, so that it costs no wait of its own), and each retry reads
/// afresh with `read`, so that it decides on what the winner wrote.
pub async fn retry_on_conflict_from<R, RFut, T, E, F, Fut>(
    first: R,
    read: impl FnMut() -> RFut,
    attempt: F,
) -> Result<T, E>
where
    E: MaybeConflict,
    RFut: std::future::Future<Output = R>,
    F: FnMut(R) -> Fut,
    Fut: std::future::Future<Output = Result<T, E>>,
{
    retry_while(CONFLICT_ATTEMPTS, E::is_conflict, first, read, attempt).await
}

/// Runs `attempt` again while it fails with an error that is `retryable`, up to `attempts`
/// times, after a jittered pause ([`backoff`]); the last error is returned if every attempt
/// failed so. The first attempt gets `first`, each retry what `read` reads afresh. The loop of
/// [`retry_on_conflict`], and of an adapter that sends a refused call again as it is.
pub async fn retry_while<R, RFut, T, E, F, Fut>(
    attempts: usize,
    retryable: impl Fn(&E) -> bool,
    first: R,
    mut read: impl FnMut() -> RFut,
    mut attempt: F,
) -> Result<T, E>
where
    RFut: std::future::Future<Output = R>,
    F: FnMut(R) -> Fut,
    Fut: std::future::Future<Output = Result<T, E>>,
{
    let mut tries = 1;
    let mut current = first;
    loop {
        match attempt(current).await {
            Err(e) if retryable(&e) && tries < attempts => {
                tokio::time::sleep(backoff(tries)).await;
                tries += 1;
                current = read().await;
            }
            other => return other,
        }
    }
}

/// A counter update: add `by` to the numeric attribute `n` of the item at `key`, creating it
/// (with `expires_at`) if absent, but only while the result stays at or below `limit`.
#[derive(Debug, Clone)]
pub struct Increment {
    pub key: ItemKey,
    pub by: i64,
    pub limit: Option<i64>,
    pub expires_at: Option<i64>,
}

#[async_trait]
pub trait ItemStore: Send + Sync {
    /// Which adapter this is (`embedded`, `dynamodb`), for logs and diagnostics.
    fn kind(&self) -> &'static str;

    /// The live item at `key`, if any.
    async fn get(&self, key: &ItemKey) -> Result<Option<Item>, StoreError>;

    /// Writes `item` if `condition` holds and returns it as stored (with its new version).
    async fn put(&self, item: Item, condition: Condition) -> Result<Item, StoreError>;

    /// Deletes the item at `key` if `condition` holds. Deleting an absent item under
    /// [`Condition::Any`] succeeds.
    async fn delete(&self, key: &ItemKey, condition: Condition) -> Result<(), StoreError>;

    /// Applies every op or none: one failed condition fails the whole transaction with
    /// [`StoreError::Conflict`].
    async fn transact(&self, ops: Vec<WriteOp>) -> Result<(), StoreError>;

    /// One page of live items in ascending sort-key order.
    async fn query(&self, query: Query) -> Result<Page, StoreError>;

    /// Atomically adds to a counter; [`StoreError::LimitReached`] (and no change) if the result
    /// would exceed the limit. Returns the new value.
    async fn increment(&self, increment: Increment) -> Result<i64, StoreError>;

    /// Independent conditional puts, not a transaction: each succeeds or fails on its own
    /// condition, and the answer holds each outcome in order. By default they run as separate
    /// puts, [`PUT_EACH_CONCURRENCY`] at a time; DynamoDB sends them in transactions of up to
    /// 100, sent again without the puts whose condition failed; the embedded store writes them
    /// all in one write transaction.
    async fn put_each(&self, puts: Vec<(Item, Condition)>) -> Vec<Result<Item, StoreError>> {
        use futures_util::stream::{self, StreamExt};
        stream::iter(puts)
            .map(|(item, condition)| self.put(item, condition))
            .buffered(PUT_EACH_CONCURRENCY)
            .collect()
            .await
    }
}

/// How many of [`ItemStore::put_each`]'s puts are in flight at once by default.
pub const PUT_EACH_CONCURRENCY: usize = 16;

/// The attribute that holds a counter's value.
pub const COUNTER_ATTR: &str = "n";

/// What [`ItemStore::increment`] answers: the counter's value in the item it wrote.
pub fn incremented(written: Option<&Item>) -> Result<i64, StoreError> {
    written.and_then(Item::counter).ok_or_else(|| StoreError::Encoding("the counter has no value".into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The read handed over is used once; a lost race reads afresh, and a race lost on every
    /// attempt ends after [`CONFLICT_ATTEMPTS`] with the conflict.
    #[tokio::test]
    async fn a_read_ahead_serves_the_first_attempt_only() {
        let reads = std::cell::Cell::new(0);
        let seen = std::cell::RefCell::new(Vec::new());
        let outcome = retry_on_conflict_from(
            "ahead",
            || {
                reads.set(reads.get() + 1);
                std::future::ready("fresh")
            },
            |read| {
                seen.borrow_mut().push(read);
                let lost = seen.borrow().len() < 3;
                async move {
                    if lost {
                        Err(StoreError::Conflict)
                    } else {
                        Ok(read)
                    }
                }
            },
        )
        .await;
        assert_eq!(outcome.unwrap(), "fresh");
        assert_eq!(*seen.borrow(), ["ahead", "fresh", "fresh"]);
        assert_eq!(reads.get(), 2);

        let tries = std::cell::Cell::new(0);
        let outcome: Result<(), _> = retry_on_conflict(|| {
            tries.set(tries.get() + 1);
            std::future::ready(Err(StoreError::Conflict))
        })
        .await;
        assert!(matches!(outcome, Err(StoreError::Conflict)));
        assert_eq!(tries.get(), CONFLICT_ATTEMPTS);
    }

    /// The pause before a retry is random up to 2 ms doubled per retry, at most 250 ms, and it
    /// spreads over that range. Draws that all stay in the lower half of their range would come
    /// 1 time in 2^200.
    #[test]
    fn a_retrys_pause_grows_to_its_cap_and_spreads_below_it() {
        for retry in 1..=CONFLICT_ATTEMPTS {
            let ceiling = std::time::Duration::from_millis((2u64 << (retry - 1).min(7)).min(250));
            let draws: Vec<_> = (0..200).map(|_| backoff(retry)).collect();
            assert!(draws.iter().all(|d| *d <= ceiling), "retry {retry}: over {ceiling:?}");
            let longest = draws.iter().max().unwrap();
            assert!(*longest > ceiling / 2, "retry {retry}: the longest of 200 is {longest:?}");
        }
    }

    #[test]
    fn a_cursor_whose_keys_no_store_holds_belongs_to_no_query() {
        let query = Query::index(Index::Gsi1, "P");
        let cursor = |pk: usize, sk: usize, index_sk: usize| Cursor {
            key: ItemKey::new("T".repeat(pk), "s".repeat(sk)),
            index_key: Some(ItemKey::new("P", "i".repeat(index_sk))),
            scope: None,
        };
        assert!(cursor(2048, 1024, 1024).belongs_to(&query));
        for (pk, sk, index_sk) in [(2049, 1, 1), (1, 1025, 1), (1, 1, 1025), (0, 1, 1), (1, 0, 1), (1, 1, 0)]
        {
            assert!(!cursor(pk, sk, index_sk).belongs_to(&query), "{pk} {sk} {index_sk}");
        }
    }

    /// A cursor resumes where its list's sort condition holds: one forged to stop before or
    /// after the range (or, on an index, with only its table key in it) belongs to no page of it.
    #[test]
    fn a_cursor_outside_its_querys_sort_condition_belongs_to_no_query() {
        let cursor = |sk: &str, index_key: Option<&str>| Cursor {
            key: ItemKey::new("P", sk),
            index_key: index_key.map(|isk| ItemKey::new("P", isk)),
            scope: None,
        };
        let prefixed = Query::table("P").sort(SortKey::BeginsWith("V#".into()));
        for sk in ["V#", "V#1", "V#~"] {
            assert!(cursor(sk, None).belongs_to(&prefixed), "{sk}");
        }
        for sk in ["A", "V", "W#1", "~"] {
            assert!(!cursor(sk, None).belongs_to(&prefixed), "{sk}");
        }
        let window = Query::index(Index::Gsi1, "P").sort(SortKey::Between("B".into(), "D".into()));
        for isk in ["B", "C#9", "D"] {
            assert!(cursor("Z", Some(isk)).belongs_to(&window), "{isk}");
        }
        for isk in ["A", "D#", "E"] {
            assert!(!cursor("C", Some(isk)).belongs_to(&window), "{isk}");
        }
        assert!(cursor("anything", None).belongs_to(&Query::table("P")));
    }

    #[test]
    fn stored_attributes_decode_once_and_stay_exact() {
        let item = Item::new(ItemKey::new("P", "S"), &json!({"a": 1, "b": {"c": "d"}})).unwrap();
        let stored = serde_json::to_vec(&item).unwrap();
        let read: Item = serde_json::from_slice(&stored).unwrap();
        assert!(read.attrs.raw.is_some() && read.attrs.map.get().is_none(), "nothing parsed on read");
        assert_eq!(read.data::<serde_json::Value>().unwrap(), json!({"a": 1, "b": {"c": "d"}}));
        assert_eq!(serde_json::to_vec(&read).unwrap(), stored, "re-encoded as read");
        assert!(read.attrs.map.get().is_none(), "decoded and re-encoded from the text, not the map");
        assert_eq!(read.attrs["a"], 1, "the map is there on demand");
        assert_eq!(read, item);
    }

    /// A fresh version is from 2^40 to below 2^52, and drawn anew each time. (Without the floor,
    /// one draw in 4,096 would fall below it: 20,000 draws miss that 1 time in 130.)
    #[test]
    fn fresh_versions_stay_in_their_range_and_differ() {
        let drawn: std::collections::BTreeSet<u64> = (0..20_000).map(|_| fresh_version()).collect();
        assert!(drawn.iter().all(|v| (1 << 40..1 << 52).contains(v)), "out of range");
        assert!(drawn.len() > 19_990, "{} of 20,000 differ", drawn.len());
        assert!(drawn.last().unwrap() - drawn.first().unwrap() > 1 << 50, "they spread over the range");
    }

    /// Items are equal when their attributes are, whether read back as text or built as a map,
    /// and a clone keeps them.
    #[test]
    fn items_compare_and_clone_by_their_attributes() {
        let item = |data| Item::new(ItemKey::new("P", "S"), &data).unwrap();
        let read = |item: &Item| serde_json::from_slice::<Item>(&serde_json::to_vec(item).unwrap()).unwrap();
        let (one, two) = (item(json!({"n": 1})), item(json!({"n": 2})));
        assert_ne!(one, two);
        assert_ne!(read(&one), two);
        assert_eq!(read(&one), one);
        // As text or as a map (the DynamoDB adapter writes clones).
        for item in [read(&two), two.clone()] {
            assert_eq!(item.clone().attrs["n"], 2);
        }
    }

    /// A store that only puts, each `s<i>` after a pause that shortens as `i` grows (so that
    /// later puts finish first); an absent-only put of the key `taken` loses its race. It counts
    /// the most puts in flight at once.
    #[derive(Default)]
    struct PutOnly {
        in_flight: std::sync::atomic::AtomicUsize,
        most: std::sync::atomic::AtomicUsize,
    }

    #[async_trait]
    impl ItemStore for PutOnly {
        fn kind(&self) -> &'static str {
            "put-only"
        }
        async fn get(&self, _: &ItemKey) -> Result<Option<Item>, StoreError> {
            unreachable!("put_each only puts")
        }
        async fn put(&self, item: Item, condition: Condition) -> Result<Item, StoreError> {
            use std::sync::atomic::Ordering::SeqCst;
            let i: u64 = item.key.sk.trim_start_matches('s').parse().unwrap_or(0);
            self.most.fetch_max(self.in_flight.fetch_add(1, SeqCst) + 1, SeqCst);
            tokio::time::sleep(std::time::Duration::from_millis(40u64.saturating_sub(i))).await;
            self.in_flight.fetch_sub(1, SeqCst);
            match (item.key.sk.as_str(), condition) {
                ("taken", Condition::Absent) => Err(StoreError::Conflict),
                _ => Ok(item),
            }
        }
        async fn delete(&self, _: &ItemKey, _: Condition) -> Result<(), StoreError> {
            unreachable!("put_each only puts")
        }
        async fn transact(&self, _: Vec<WriteOp>) -> Result<(), StoreError> {
            unreachable!("put_each only puts")
        }
        async fn query(&self, _: Query) -> Result<Page, StoreError> {
            unreachable!("put_each only puts")
        }
        async fn increment(&self, _: Increment) -> Result<i64, StoreError> {
            unreachable!("put_each only puts")
        }
    }

    /// The default `put_each`: one outcome a put, in the puts' order, each on its own condition,
    /// [`PUT_EACH_CONCURRENCY`] at a time.
    #[tokio::test]
    async fn each_put_gets_its_own_outcome_in_order() {
        let sks = (0..40).map(|i| if i % 7 == 3 { "taken".to_owned() } else { format!("s{i}") });
        let puts = sks.map(|sk| (Item::new(ItemKey::new("P", sk), &json!({})).unwrap(), Condition::Absent));
        let store = PutOnly::default();
        let outcomes = store.put_each(puts.collect()).await;
        assert_eq!(store.most.into_inner(), PUT_EACH_CONCURRENCY);
        assert_eq!(outcomes.len(), 40);
        for (i, outcome) in outcomes.iter().enumerate() {
            match outcome {
                Ok(item) => assert_eq!(item.key.sk, format!("s{i}")),
                Err(e) => assert!(i % 7 == 3 && matches!(e, StoreError::Conflict), "{i}: {e:?}"),
            }
        }
    }

    #[test]
    fn a_changed_map_is_what_is_stored() {
        let item = Item::new(ItemKey::new("P", "S"), &json!({"n": 1})).unwrap();
        let mut read: Item = serde_json::from_slice(&serde_json::to_vec(&item).unwrap()).unwrap();
        read.attrs.insert("n".into(), 2.into());
        let again: Item = serde_json::from_slice(&serde_json::to_vec(&read).unwrap()).unwrap();
        assert_eq!(again.attrs["n"], 2);
        assert_eq!(again.data::<serde_json::Value>().unwrap(), json!({"n": 2}));
    }

    #[test]
    fn attributes_must_be_an_object() {
        let bad = r#"{"key":{"pk":"P","sk":"S"},"version":1,"expires_at":null,"gsi1":null,"gsi2":null,"attrs":[1]}"#;
        assert!(serde_json::from_str::<Item>(bad).is_err());
    }
}
