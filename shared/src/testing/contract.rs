//! The port contract suite, written once. Every adapter runs it: the embedded backend in
//! `tests/tests/embedded.rs`, the AWS adapters against emulators in `tests/tests/aws.rs`.
//!
//! Each case works in partitions of its own (a random namespace), so cases can share one table
//! and one queue and run in parallel. Queue cases need a queue of their own, empty, with
//! `max_receive_count` = [`QUEUE_MAX_RECEIVE`].

use crate::ports::keys::{open, seal};
use crate::ports::queue::{MAX_DELAY, MAX_RECEIVE_BATCH};
use crate::ports::store::{Invalid, MAX_ITEM_BYTES, MAX_TRANSACTION_BYTES, MAX_TRANSACTION_ITEMS};
use crate::ports::*;
use std::sync::Arc;
use std::time::Duration;

/// The `max_receive_count` the queue cases expect.
pub const QUEUE_MAX_RECEIVE: u32 = 2;

fn ns() -> String {
    format!("t{}", &uuid::Uuid::new_v4().simple().to_string()[..12])
}

fn item(pk: &str, sk: &str, value: i64) -> Item {
    Item::new(ItemKey::new(pk, sk), &serde_json::json!({ "value": value, "text": "x" })).unwrap()
}

fn value(item: &Item) -> i64 {
    item.attrs["value"].as_i64().unwrap()
}

pub async fn store_create_is_conditional(store: Arc<dyn ItemStore>) {
    let pk = ns();
    let created = store.put(item(&pk, "a", 1), Condition::Absent).await.unwrap();
    assert!(created.version >= 1 << 40, "a new item's version starts fresh: {}", created.version);
    let again = store.put(item(&pk, "a", 2), Condition::Absent).await;
    assert!(matches!(again, Err(StoreError::Conflict)), "{again:?}");
    let got = store.get(&ItemKey::new(&pk, "a")).await.unwrap().unwrap();
    assert_eq!((value(&got), got.version), (1, created.version));
    assert_eq!(got.attrs["text"], "x");
    assert!(store.get(&ItemKey::new(&pk, "b")).await.unwrap().is_none());
    // A record that numbers its own versions starts where it says.
    let numbered = store.put(item(&pk, "n", 1).numbered_from(1), Condition::Absent).await.unwrap();
    assert_eq!(numbered.version, 1);
    let next = store.put(item(&pk, "n", 2), Condition::Version(1)).await.unwrap();
    assert_eq!(store.get(&next.key).await.unwrap().unwrap().version, 2);
    // So does one a write that may create or update makes (DynamoDB sends it as an update).
    let any = store.put(item(&pk, "m", 1).numbered_from(1), Condition::Any).await.unwrap();
    assert_eq!(any.version, 1);
    assert_eq!(store.get(&any.key).await.unwrap().unwrap().version, 1);
}

pub async fn store_update_checks_version(store: Arc<dyn ItemStore>) {
    let pk = ns();
    let v = store.put(item(&pk, "a", 1), Condition::Absent).await.unwrap().version;
    let updated = store.put(item(&pk, "a", 2), Condition::Version(v)).await.unwrap();
    assert_eq!(updated.version, v + 1);
    let stale = store.put(item(&pk, "a", 3), Condition::Version(v)).await;
    assert!(matches!(stale, Err(StoreError::Conflict)));
    let missing = store.put(item(&pk, "zz", 3), Condition::Version(v)).await;
    assert!(matches!(missing, Err(StoreError::Conflict)));
    let exists = store.put(item(&pk, "zz", 3), Condition::Exists).await;
    assert!(matches!(exists, Err(StoreError::Conflict)));
    let got = store.get(&ItemKey::new(&pk, "a")).await.unwrap().unwrap();
    assert_eq!((value(&got), got.version), (2, v + 1));
    let next = store.put(item(&pk, "a", 4), Condition::Exists).await.unwrap();
    assert_eq!(next.version, v + 2);
}

/// A key's versions do not repeat across its removal, however the item is made again: a write
/// conditioned on a version read before the removal cannot land on what is stored after it.
pub async fn store_versions_do_not_repeat_after_a_removal(store: Arc<dyn ItemStore>) {
    let pk = ns();
    let key = ItemKey::new(&pk, "a");
    let created = store.put(item(&pk, "a", 1), Condition::Absent).await.unwrap();
    let updated = store.put(item(&pk, "a", 2), Condition::Version(created.version)).await.unwrap();
    let mut seen = vec![created.version, updated.version];
    let counter = |by| Increment { key: key.clone(), by, limit: None, expires_at: None };
    let remakes: [WriteOp; 3] = [
        WriteOp::Put { item: item(&pk, "a", 3), condition: Condition::Absent },
        WriteOp::Put { item: item(&pk, "a", 4), condition: Condition::Any },
        WriteOp::Increment(counter(1)),
    ];
    for remake in remakes {
        store.delete(&key, Condition::Any).await.unwrap();
        store.transact(vec![remake]).await.unwrap();
        let now = store.get(&key).await.unwrap().unwrap();
        assert!(!seen.contains(&now.version), "version {} again after a removal: {seen:?}", now.version);
        assert!(now.version >= 1 << 40, "a remade item's version starts fresh: {}", now.version);
        for stale in &seen {
            let late = store.put(item(&pk, "a", 9), Condition::Version(*stale)).await;
            assert!(matches!(late, Err(StoreError::Conflict)), "a write read at {stale} landed: {late:?}");
        }
        seen.push(now.version);
    }
}

pub async fn store_delete_is_conditional(store: Arc<dyn ItemStore>) {
    let pk = ns();
    let key = ItemKey::new(&pk, "a");
    let created = store.put(item(&pk, "a", 1), Condition::Absent).await.unwrap();
    assert!(matches!(store.delete(&key, Condition::Version(7)).await, Err(StoreError::Conflict)));
    store.delete(&key, Condition::Version(created.version)).await.unwrap();
    assert!(store.get(&key).await.unwrap().is_none());
    store.delete(&key, Condition::Any).await.unwrap();
    assert!(matches!(store.delete(&key, Condition::Exists).await, Err(StoreError::Conflict)));
}

pub async fn store_expired_items_count_as_absent(store: Arc<dyn ItemStore>, now_secs: i64) {
    let pk = ns();
    let key = ItemKey::new(&pk, "a");
    store.put(item(&pk, "a", 1).with_ttl(Some(now_secs - 10)), Condition::Any).await.unwrap();
    store.put(item(&pk, "b", 2).with_ttl(Some(now_secs + 3600)), Condition::Any).await.unwrap();
    assert!(store.get(&key).await.unwrap().is_none());
    let page = store.query(Query::table(&pk)).await.unwrap();
    assert_eq!(page.items.iter().map(value).collect::<Vec<_>>(), vec![2]);
    assert!(matches!(store.put(item(&pk, "a", 3), Condition::Exists).await, Err(StoreError::Conflict)));
    let recreated = store.put(item(&pk, "a", 3), Condition::Absent).await.unwrap();
    assert!(recreated.version >= 1 << 40, "a new item's version starts fresh: {}", recreated.version);
    assert_eq!(value(&store.get(&key).await.unwrap().unwrap()), 3);
    // A page is filled past expired items (DynamoDB counts them against its limit, then
    // filters them out), to its limit exactly.
    let pk = ns();
    for i in 0..6 {
        let ttl = if i == 1 || i == 2 { now_secs - 10 } else { now_secs + 3600 };
        store.put(item(&pk, &format!("k{i}"), i).with_ttl(Some(ttl)), Condition::Absent).await.unwrap();
    }
    let first = store.query(Query::table(&pk).limit(2)).await.unwrap();
    assert_eq!(first.items.iter().map(value).collect::<Vec<_>>(), [0, 3]);
    let rest = store.query(Query::table(&pk).limit(2).after(first.cursor)).await.unwrap();
    assert_eq!(rest.items.iter().map(value).collect::<Vec<_>>(), [4, 5]);
}

pub async fn store_query_pages_in_order(store: Arc<dyn ItemStore>) {
    let pk = ns();
    let other = ns();
    for i in 0..25 {
        store.put(item(&pk, &format!("k{i:03}"), i), Condition::Absent).await.unwrap();
    }
    store.put(item(&other, "k000", 99), Condition::Absent).await.unwrap();
    let mut seen = Vec::new();
    let mut cursor = None;
    loop {
        let page = store.query(Query::table(&pk).limit(10).after(cursor)).await.unwrap();
        assert!(page.items.len() <= 10);
        seen.extend(page.items.iter().map(value));
        match page.cursor {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    assert_eq!(seen, (0..25).collect::<Vec<_>>());

    let prefix = store.query(Query::table(&pk).sort(SortKey::BeginsWith("k01".into()))).await.unwrap();
    assert_eq!(prefix.items.iter().map(value).collect::<Vec<_>>(), (10..20).collect::<Vec<_>>());
    let between =
        store.query(Query::table(&pk).sort(SortKey::Between("k005".into(), "k007".into()))).await.unwrap();
    assert_eq!(between.items.iter().map(value).collect::<Vec<_>>(), vec![5, 6, 7]);
    assert!(between.cursor.is_none());

    // A cursor only works for the partition it came from.
    let first = store.query(Query::table(&pk).limit(2)).await.unwrap();
    let foreign = store.query(Query::table(&other).after(first.cursor)).await;
    assert!(matches!(foreign, Err(StoreError::Invalid(_))), "{foreign:?}");
}

pub async fn store_index_queries_follow_updates(store: Arc<dyn ItemStore>) {
    let owner = ns();
    let index_pk = ns();
    let mut versions = Vec::new();
    for i in 0..12 {
        let it = item(&format!("{owner}-{i}"), "meta", i)
            .with_index(Index::Gsi1, ItemKey::new(&index_pk, format!("s{:02}", 11 - i)));
        versions.push(store.put(it, Condition::Absent).await.unwrap().version);
    }
    let mut seen = Vec::new();
    let mut cursor = None;
    loop {
        let page = store.query(Query::index(Index::Gsi1, &index_pk).limit(5).after(cursor)).await.unwrap();
        seen.extend(page.items.iter().map(value));
        match page.cursor {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    assert_eq!(seen, (0..12).rev().collect::<Vec<_>>(), "index order is by index sort key");

    // Moving an item's index key moves it in the index; deleting removes it.
    let moved = item(&format!("{owner}-0"), "meta", 0).with_index(Index::Gsi1, ItemKey::new(&index_pk, "a"));
    store.put(moved, Condition::Version(versions[0])).await.unwrap();
    store.delete(&ItemKey::new(format!("{owner}-1"), "meta"), Condition::Any).await.unwrap();
    let page = store.query(Query::index(Index::Gsi1, &index_pk).limit(100)).await.unwrap();
    let values: Vec<_> = page.items.iter().map(value).collect();
    assert_eq!(values.first(), Some(&0));
    assert!(!values.contains(&1));
    assert_eq!(values.len(), 11);

    let range = store
        .query(Query::index(Index::Gsi1, &index_pk).sort(SortKey::BeginsWith("s0".into())))
        .await
        .unwrap();
    assert_eq!(range.items.len(), 10, "s00..s09: items 2 to 11");
    let gsi2 = store.query(Query::index(Index::Gsi2, &index_pk)).await.unwrap();
    assert!(gsi2.items.is_empty(), "indexes are separate");
}

pub async fn store_descending_queries_page_from_the_top(store: Arc<dyn ItemStore>) {
    let pk = ns();
    let (index_pk, neighbour) = (ns(), ns());
    for i in 0..25 {
        let it = item(&pk, &format!("k{i:03}"), i)
            .with_index(Index::Gsi1, ItemKey::new(&index_pk, format!("s{i:03}")));
        store.put(it, Condition::Absent).await.unwrap();
    }
    // Partitions beside it, in both key orders, are never walked into.
    for (n, sk) in [(90, "k000"), (91, "k999")] {
        store.put(item(&format!("{pk}0"), sk, n), Condition::Absent).await.unwrap();
        let indexed = item(&format!("{neighbour}-{n}"), "meta", n)
            .with_index(Index::Gsi1, ItemKey::new(format!("{index_pk}0"), sk));
        store.put(indexed, Condition::Absent).await.unwrap();
    }
    let walk = |query: Query| {
        let store = store.clone();
        async move {
            let (mut seen, mut cursor) = (Vec::new(), None);
            loop {
                let page = store.query(query.clone().limit(7).after(cursor)).await.unwrap();
                assert!(page.items.len() <= 7);
                seen.extend(page.items.iter().map(value));
                match page.cursor {
                    Some(c) => cursor = Some(c),
                    None => break seen,
                }
            }
        }
    };
    let down: Vec<i64> = (0..25).rev().collect();
    assert_eq!(walk(Query::table(&pk).descending()).await, down);
    assert_eq!(walk(Query::index(Index::Gsi1, &index_pk).descending()).await, down);

    let between = |lo: &str, hi: &str| SortKey::Between(lo.into(), hi.into());
    let table = walk(Query::table(&pk).sort(between("k005", "k017")).descending()).await;
    assert_eq!(table, (5..=17).rev().collect::<Vec<_>>());
    let index = walk(Query::index(Index::Gsi1, &index_pk).sort(between("s005", "s017")).descending()).await;
    assert_eq!(index, (5..=17).rev().collect::<Vec<_>>());
    let prefix = walk(Query::table(&pk).sort(SortKey::BeginsWith("k01".into())).descending()).await;
    assert_eq!(prefix, (10..20).rev().collect::<Vec<_>>());
    let prefix =
        walk(Query::index(Index::Gsi1, &index_pk).sort(SortKey::BeginsWith("s01".into())).descending()).await;
    assert_eq!(prefix, (10..20).rev().collect::<Vec<_>>());
}

pub async fn store_transactions_are_all_or_nothing(store: Arc<dyn ItemStore>) {
    let pk = ns();
    let taken = store.put(item(&pk, "taken", 0), Condition::Absent).await.unwrap();
    let failing = store
        .transact(vec![
            WriteOp::Put { item: item(&pk, "new", 1), condition: Condition::Absent },
            WriteOp::Put { item: item(&pk, "taken", 1), condition: Condition::Absent },
        ])
        .await;
    assert!(matches!(failing, Err(StoreError::Conflict)), "{failing:?}");
    assert!(store.get(&ItemKey::new(&pk, "new")).await.unwrap().is_none(), "nothing half-written");

    store
        .transact(vec![
            WriteOp::Put { item: item(&pk, "new", 1), condition: Condition::Absent },
            WriteOp::Delete { key: ItemKey::new(&pk, "taken"), condition: Condition::Version(taken.version) },
            WriteOp::Check { key: ItemKey::new(&pk, "never"), condition: Condition::Absent },
        ])
        .await
        .unwrap();
    assert!(store.get(&ItemKey::new(&pk, "taken")).await.unwrap().is_none());
    assert!(store.get(&ItemKey::new(&pk, "new")).await.unwrap().unwrap().version >= 1 << 40);

    let check_fails = store
        .transact(vec![
            WriteOp::Put { item: item(&pk, "other", 1), condition: Condition::Absent },
            WriteOp::Check { key: ItemKey::new(&pk, "new"), condition: Condition::Version(9) },
        ])
        .await;
    assert!(matches!(check_fails, Err(StoreError::Conflict)));
    assert!(store.get(&ItemKey::new(&pk, "other")).await.unwrap().is_none());

    // One to a hundred operations, as DynamoDB takes.
    let puts = |n: usize| -> Vec<WriteOp> {
        (0..n)
            .map(|i| WriteOp::Put {
                item: item(&pk, &format!("many{i:03}"), 0),
                condition: Condition::Absent,
            })
            .collect()
    };
    for n in [0, MAX_TRANSACTION_ITEMS + 1] {
        let refused = store.transact(puts(n)).await;
        assert!(
            matches!(refused, Err(StoreError::Invalid(Invalid::TransactionSize))),
            "{n} operations: {refused:?}"
        );
    }
    assert!(store.get(&ItemKey::new(&pk, "many000")).await.unwrap().is_none());
    store.transact(puts(MAX_TRANSACTION_ITEMS)).await.unwrap();
    let page =
        store.query(Query::table(&pk).sort(SortKey::BeginsWith("many".into())).limit(200)).await.unwrap();
    assert_eq!(page.items.len(), MAX_TRANSACTION_ITEMS);
}

/// An item over [`MAX_ITEM_BYTES`], or a transaction over [`MAX_TRANSACTION_BYTES`], is refused
/// as invalid, with nothing written: what DynamoDB refuses, the embedded store refuses too.
pub async fn store_refuses_what_is_too_large(store: Arc<dyn ItemStore>) {
    let pk = ns();
    let sized = |sk: &str, chars: usize| {
        Item::new(ItemKey::new(&pk, sk), &serde_json::json!({ "data": "x".repeat(chars) })).unwrap()
    };
    let refused = store.put(sized("big", MAX_ITEM_BYTES + 1), Condition::Any).await;
    assert!(matches!(refused, Err(StoreError::Invalid(_))), "{refused:?}");
    assert!(store.get(&ItemKey::new(&pk, "big")).await.unwrap().is_none());
    store.put(sized("fits", 390_000), Condition::Absent).await.unwrap();
    // Eleven items that each fit, 4.3 MB together.
    const { assert!(11 * 390_000 > MAX_TRANSACTION_BYTES && 10 * 390_000 < MAX_TRANSACTION_BYTES) };
    let parts: Vec<WriteOp> = (0..11)
        .map(|at| WriteOp::Put { item: sized(&format!("part{at}"), 390_000), condition: Condition::Any })
        .collect();
    let refused = store.transact(parts).await;
    assert!(matches!(refused, Err(StoreError::Invalid(_))), "{refused:?}");
    assert!(store.get(&ItemKey::new(&pk, "part0")).await.unwrap().is_none(), "nothing half-written");
    let parts: Vec<WriteOp> = (0..10)
        .map(|at| WriteOp::Put { item: sized(&format!("part{at}"), 390_000), condition: Condition::Any })
        .collect();
    store.transact(parts).await.unwrap();
}

/// What a key may hold, as DynamoDB bounds it: a partition key of 1 to 2,048 bytes and a sort
/// key of 1 to 1,024 (an index key: neither part empty). An empty key or a longer one is
/// refused on every call as input the store rejects (a 400, never a 500), the same on every
/// backend, with nothing written, not even beside it in a transaction.
pub async fn store_holds_keys_up_to_dynamodbs_sizes(store: Arc<dyn ItemStore>) {
    fn rejected<T>(outcome: &Result<T, StoreError>) -> bool {
        matches!(outcome, Err(StoreError::Invalid(Invalid::Rejected(_))))
    }
    let pk = ns();
    let longest_pk = format!("{pk}{}", "p".repeat(2048 - pk.len()));
    let longest_sk = "s".repeat(1024);
    let at_most = store.put(item(&longest_pk, &longest_sk, 1), Condition::Absent).await.unwrap();
    assert_eq!(value(&store.get(&at_most.key).await.unwrap().unwrap()), 1);
    let listed = store.query(Query::table(&longest_pk)).await.unwrap();
    assert_eq!(listed.items.len(), 1);
    let indexed = item(&pk, "indexed", 2).with_index(Index::Gsi1, ItemKey::new(&longest_pk, &longest_sk));
    store.put(indexed, Condition::Absent).await.unwrap();
    for (key_pk, key_sk) in [
        (format!("{longest_pk}p"), "a".to_owned()),
        (pk.clone(), format!("{longest_sk}s")),
        (String::new(), "a".to_owned()),
        (pk.clone(), String::new()),
    ] {
        let key = ItemKey::new(&key_pk, &key_sk);
        let what = format!("a key of {} and {} bytes", key_pk.len(), key_sk.len());
        let put = store.put(item(&key_pk, &key_sk, 3), Condition::Any).await;
        assert!(rejected(&put), "put, {what}: {put:?}");
        let got = store.get(&key).await;
        assert!(rejected(&got), "get, {what}: {got:?}");
        let deleted = store.delete(&key, Condition::Any).await;
        assert!(rejected(&deleted), "delete, {what}: {deleted:?}");
        let written = store
            .transact(vec![
                WriteOp::Put { item: item(&pk, "beside", 4), condition: Condition::Absent },
                WriteOp::Check { key: key.clone(), condition: Condition::Absent },
            ])
            .await;
        assert!(rejected(&written), "transaction, {what}: {written:?}");
        // An index key is held to not being empty only: DynamoDB Local takes a longer one,
        // and this suite cannot show what DynamoDB itself does with it.
        if key_pk.is_empty() || key_sk.is_empty() {
            let put = store.put(item(&pk, "index", 5).with_index(Index::Gsi1, key), Condition::Any).await;
            assert!(rejected(&put), "index key, {what}: {put:?}");
        }
    }
    assert!(store.get(&ItemKey::new(&pk, "beside")).await.unwrap().is_none(), "nothing half-written");
    assert!(store.get(&ItemKey::new(&pk, "index")).await.unwrap().is_none(), "nothing written");
}

pub async fn store_concurrent_creates_have_one_winner(store: Arc<dyn ItemStore>) {
    let pk = ns();
    let tasks: Vec<_> = (0..8)
        .map(|i| {
            let store = store.clone();
            let pk = pk.clone();
            tokio::spawn(async move { store.put(item(&pk, "race", i), Condition::Absent).await })
        })
        .collect();
    let mut wins = 0;
    for task in tasks {
        match task.await.unwrap() {
            Ok(_) => wins += 1,
            Err(StoreError::Conflict) => {}
            Err(e) => panic!("unexpected {e:?}"),
        }
    }
    assert_eq!(wins, 1);
}

pub async fn store_counters_are_atomic_and_bounded(store: Arc<dyn ItemStore>) {
    let pk = ns();
    let key = ItemKey::new(&pk, "counter");
    let inc = |by, limit| Increment { key: key.clone(), by, limit, expires_at: None };
    assert_eq!(store.increment(inc(1, None)).await.unwrap(), 1);
    let tasks: Vec<_> = (0..10)
        .map(|_| {
            let store = store.clone();
            let i = inc(1, None);
            tokio::spawn(async move { store.increment(i).await })
        })
        .collect();
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    assert_eq!(store.increment(inc(0, None)).await.unwrap(), 11);
    assert!(matches!(store.increment(inc(1, Some(11))).await, Err(StoreError::LimitReached)));
    assert_eq!(store.increment(inc(1, Some(12))).await.unwrap(), 12);
    assert!(matches!(store.increment(inc(1, Some(12))).await, Err(StoreError::LimitReached)));
    assert_eq!(store.increment(inc(0, None)).await.unwrap(), 12, "a refused increment changes nothing");

    // An increment is a write: one conditioned on the version read before it does not land.
    let read = store.get(&key).await.unwrap().unwrap();
    store.increment(inc(1, None)).await.unwrap();
    let late = store.put(item(&pk, "counter", 0), Condition::Version(read.version)).await;
    assert!(matches!(late, Err(StoreError::Conflict)), "{late:?}");
    assert_eq!(store.get(&key).await.unwrap().unwrap().version, read.version + 1);
}

pub async fn store_counters_join_transactions(store: Arc<dyn ItemStore>) {
    let pk = ns();
    let key = ItemKey::new(&pk, "counter");
    let inc = |by, limit| WriteOp::Increment(Increment { key: key.clone(), by, limit, expires_at: None });
    let value = |store: Arc<dyn ItemStore>, key: ItemKey| async move {
        store.get(&key).await.unwrap().and_then(|i| i.counter())
    };
    store
        .transact(vec![
            inc(1, Some(2)),
            WriteOp::Put { item: item(&pk, "a", 1), condition: Condition::Absent },
        ])
        .await
        .unwrap();
    assert_eq!(value(store.clone(), key.clone()).await, Some(1), "a new counter starts from 0");
    let refused = store
        .transact(vec![
            inc(2, Some(2)),
            WriteOp::Put { item: item(&pk, "b", 1), condition: Condition::Absent },
        ])
        .await;
    assert!(matches!(refused, Err(StoreError::Conflict)), "past the limit: {refused:?}");
    assert!(store.get(&ItemKey::new(&pk, "b")).await.unwrap().is_none(), "nothing half-written");
    let other_fails = store
        .transact(vec![
            inc(1, Some(2)),
            WriteOp::Put { item: item(&pk, "a", 2), condition: Condition::Absent },
        ])
        .await;
    assert!(matches!(other_fails, Err(StoreError::Conflict)));
    assert_eq!(value(store.clone(), key.clone()).await, Some(1), "a failed transaction adds nothing");
    store
        .transact(vec![
            inc(-1, None),
            WriteOp::Delete { key: ItemKey::new(&pk, "a"), condition: Condition::Any },
        ])
        .await
        .unwrap();
    assert_eq!(value(store.clone(), key.clone()).await, Some(0));
    let repeated = store.transact(vec![inc(1, None), inc(1, None)]).await;
    assert!(matches!(repeated, Err(StoreError::Invalid(Invalid::RepeatedKey))), "{repeated:?}");
}

pub async fn store_puts_each_stand_alone(store: Arc<dyn ItemStore>) {
    let pk = ns();
    let taken = store.put(item(&pk, "taken", 0), Condition::Absent).await.unwrap();
    let versioned = store.put(item(&pk, "versioned", 0), Condition::Absent).await.unwrap();
    let outcomes = store
        .put_each(vec![
            (item(&pk, "new", 1), Condition::Absent),
            (item(&pk, "taken", 1), Condition::Absent),
            (item(&pk, "versioned", 1), Condition::Version(versioned.version)),
            (item(&pk, "versioned-stale", 1), Condition::Version(7)),
        ])
        .await;
    assert_eq!(outcomes.len(), 4);
    assert!(outcomes[0].as_ref().is_ok_and(|i| i.version >= 1 << 40), "{outcomes:?}");
    assert!(matches!(outcomes[1], Err(StoreError::Conflict)), "{outcomes:?}");
    assert!(outcomes[2].as_ref().is_ok_and(|i| i.version == versioned.version + 1), "{outcomes:?}");
    assert!(matches!(outcomes[3], Err(StoreError::Conflict)), "{outcomes:?}");
    let read = |sk: &'static str| {
        let (store, pk) = (store.clone(), pk.clone());
        async move { store.get(&ItemKey::new(&pk, sk)).await.unwrap() }
    };
    assert!(read("new").await.is_some(), "a put stands even when another fails");
    assert_eq!(read("taken").await.unwrap().version, taken.version, "a failed put changes nothing");
    assert!(store.put_each(Vec::new()).await.is_empty());
}

pub async fn queue_delivers_and_acks(queue: Arc<dyn Queue>) {
    let id = queue.send("hello", Duration::ZERO).await.unwrap();
    let visibility = Duration::from_secs(1);
    let got = receive_until(&queue, 1, visibility, Duration::from_secs(5)).await;
    assert_eq!(got.len(), 1);
    assert_eq!(
        (got[0].message_id.as_str(), got[0].body.as_str(), got[0].receive_count),
        (id.as_str(), "hello", 1)
    );
    queue.ack(&got[0].receipt).await.unwrap();
    // Past its visibility timeout an acknowledged message is gone, not delivered again.
    tokio::time::sleep(visibility * 2).await;
    assert!(queue.receive(10, Duration::from_secs(30)).await.unwrap().is_empty());
}

pub async fn queue_delays_delivery(queue: Arc<dyn Queue>) {
    queue.send("later", Duration::from_secs(2)).await.unwrap();
    assert!(queue.receive(10, Duration::from_secs(30)).await.unwrap().is_empty(), "not before its delay");
    let got = receive_until(&queue, 1, Duration::from_secs(30), Duration::from_secs(6)).await;
    assert_eq!(got[0].body, "later");
    queue.ack(&got[0].receipt).await.unwrap();
}

pub async fn queue_redelivers_until_dead_letter(queue: Arc<dyn Queue>) {
    queue.send("stubborn", Duration::ZERO).await.unwrap();
    let visibility = Duration::from_secs(1);
    let first = receive_until(&queue, 1, visibility, Duration::from_secs(5)).await;
    assert_eq!(first[0].receive_count, 1);
    let second = receive_until(&queue, 1, visibility, Duration::from_secs(6)).await;
    assert_eq!((second[0].body.as_str(), second[0].receive_count), ("stubborn", 2));
    // After QUEUE_MAX_RECEIVE deliveries without an ack it moves to the dead-letter queue.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let redelivered = queue.receive(10, visibility).await.unwrap();
        assert!(redelivered.is_empty(), "delivered past its max receive count: {redelivered:?}");
        let dead = queue.dead_letters(10).await.unwrap();
        if dead.iter().any(|m| m.body == "stubborn") {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "never reached the dead-letter queue");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

pub async fn queue_batches_and_dead_letters(queue: Arc<dyn Queue>) {
    let messages: Vec<_> = (0..13).map(|i| (format!("m{i}"), Duration::ZERO)).collect();
    let ids = queue.send_batch(&messages).await.unwrap();
    assert_eq!(ids.len(), 13);
    let mut got = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while got.len() < 13 && tokio::time::Instant::now() < deadline {
        for m in queue.receive(10, Duration::from_secs(30)).await.unwrap() {
            queue.ack(&m.receipt).await.unwrap();
            got.push(m.body);
        }
    }
    got.sort();
    let mut expected: Vec<_> = messages.into_iter().map(|(b, _)| b).collect();
    expected.sort();
    assert_eq!(got, expected, "every batched message once");
    queue.dead_letter("given up").await.unwrap();
    queue.dead_letter("given up too").await.unwrap();
    let dead = queue.dead_letters(10).await.unwrap();
    assert!(dead.iter().any(|m| m.body == "given up"));
    assert_eq!(queue.dead_letters(1).await.unwrap().len(), 1, "no more than asked for");
}

/// A delivered message stays hidden from every receive until its visibility timeout ends, even
/// one asking for more than is there; an acknowledgement with the receipt of an earlier delivery
/// is not an error.
pub async fn queue_hides_what_it_delivers(queue: Arc<dyn Queue>) {
    queue.send("once", Duration::ZERO).await.unwrap();
    let first = receive_until(&queue, 1, Duration::from_secs(3), Duration::from_secs(5)).await;
    let hidden = queue.receive(MAX_RECEIVE_BATCH, Duration::from_secs(30)).await.unwrap();
    assert!(hidden.is_empty(), "delivered again while hidden: {hidden:?}");
    let second = receive_until(&queue, 1, Duration::from_secs(30), Duration::from_secs(8)).await;
    assert_eq!((second[0].message_id.as_str(), second[0].receive_count), (first[0].message_id.as_str(), 2));
    queue.ack(&first[0].receipt).await.unwrap();
    queue.ack(&second[0].receipt).await.unwrap();
    assert!(queue.receive(MAX_RECEIVE_BATCH, Duration::from_secs(30)).await.unwrap().is_empty());
}

/// What SQS refuses, every queue refuses as invalid, sending nothing: a delay past
/// [`MAX_DELAY`] (alone or in a batch), a receive of none or of more than
/// [`MAX_RECEIVE_BATCH`]. The bounds themselves are taken.
pub async fn queue_refuses_what_sqs_refuses(queue: Arc<dyn Queue>) {
    let past = MAX_DELAY + Duration::from_secs(1);
    assert!(matches!(queue.send("late", past).await, Err(QueueError::Invalid(_))));
    let batch = [("first".to_owned(), Duration::ZERO), ("late".to_owned(), past)];
    assert!(matches!(queue.send_batch(&batch).await, Err(QueueError::Invalid(_))));
    for max in [0, MAX_RECEIVE_BATCH + 1] {
        let refused = queue.receive(max, Duration::from_secs(30)).await;
        assert!(matches!(refused, Err(QueueError::Invalid(_))), "receive of {max}: {refused:?}");
    }
    queue.send("latest", MAX_DELAY).await.unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let sent = queue.receive(MAX_RECEIVE_BATCH, Duration::from_secs(30)).await.unwrap();
    assert!(sent.is_empty(), "a refused message was sent, or a delayed one came early: {sent:?}");
}

async fn receive_until(
    queue: &Arc<dyn Queue>,
    n: usize,
    visibility: Duration,
    within: Duration,
) -> Vec<ReceivedMessage> {
    let deadline = tokio::time::Instant::now() + within;
    let mut got = Vec::new();
    while got.len() < n {
        got.extend(queue.receive(10, visibility).await.unwrap());
        if got.len() >= n {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "only {} of {n} messages arrived", got.len());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    got
}

pub async fn keys_seal_and_open_under_context(keys: Arc<dyn KeyService>) {
    let ctx = EncryptionContext::new("tenantA", "offline-tokens");
    let sealed = seal(keys.as_ref(), &ctx, b"secret PINs").await.unwrap();
    assert_ne!(sealed.ciphertext, b"secret PINs");
    assert_eq!(open(keys.as_ref(), &ctx, &sealed).await.unwrap(), b"secret PINs");

    let other_tenant = EncryptionContext::new("tenantB", "offline-tokens");
    assert!(matches!(open(keys.as_ref(), &other_tenant, &sealed).await, Err(KeyError::Decrypt)));
    let other_purpose = EncryptionContext::new("tenantA", "env-vars");
    assert!(matches!(open(keys.as_ref(), &other_purpose, &sealed).await, Err(KeyError::Decrypt)));

    let mut tampered = sealed.clone();
    tampered.ciphertext[0] ^= 1;
    assert!(matches!(open(keys.as_ref(), &ctx, &tampered).await, Err(KeyError::Decrypt)));

    // A wrapped key cut short, or with a bit turned, opens nothing (and fails as a refusal).
    let mut short = sealed.clone();
    short.wrapped_key.truncate(5);
    assert!(matches!(open(keys.as_ref(), &ctx, &short).await, Err(KeyError::Decrypt)));
    let mut turned = sealed.clone();
    let last = turned.wrapped_key.len() - 1;
    turned.wrapped_key[last] ^= 1;
    assert!(matches!(open(keys.as_ref(), &ctx, &turned).await, Err(KeyError::Decrypt)));

    let again = seal(keys.as_ref(), &ctx, b"secret PINs").await.unwrap();
    assert_ne!(again.wrapped_key, sealed.wrapped_key, "a data key per secret");
}

/// Every store case as a `#[tokio::test]`; `$make` is an async expression giving
/// `Option<Arc<dyn ItemStore>>` (`None` skips: the backend is not configured).
#[macro_export]
macro_rules! store_contract_tests {
    ($make:expr, $now:expr) => {
        $crate::__contract_case!(store_create_is_conditional, $make);
        $crate::__contract_case!(store_update_checks_version, $make);
        $crate::__contract_case!(store_delete_is_conditional, $make);
        $crate::__contract_case!(store_versions_do_not_repeat_after_a_removal, $make);
        $crate::__contract_case!(store_query_pages_in_order, $make);
        $crate::__contract_case!(store_index_queries_follow_updates, $make);
        $crate::__contract_case!(store_descending_queries_page_from_the_top, $make);
        $crate::__contract_case!(store_transactions_are_all_or_nothing, $make);
        $crate::__contract_case!(store_refuses_what_is_too_large, $make);
        $crate::__contract_case!(store_holds_keys_up_to_dynamodbs_sizes, $make);
        $crate::__contract_case!(store_concurrent_creates_have_one_winner, $make);
        $crate::__contract_case!(store_counters_are_atomic_and_bounded, $make);
        $crate::__contract_case!(store_counters_join_transactions, $make);
        $crate::__contract_case!(store_puts_each_stand_alone, $make);
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn store_expired_items_count_as_absent() {
            if let Some(port) = $make.await {
                $crate::testing::contract::store_expired_items_count_as_absent(port, $now).await;
            }
        }
    };
}

/// Every queue case; `$make` gives `Option<Arc<dyn Queue>>`, a fresh empty queue each call.
#[macro_export]
macro_rules! queue_contract_tests {
    ($make:expr) => {
        $crate::__contract_case!(queue_delivers_and_acks, $make);
        $crate::__contract_case!(queue_delays_delivery, $make);
        $crate::__contract_case!(queue_redelivers_until_dead_letter, $make);
        $crate::__contract_case!(queue_batches_and_dead_letters, $make);
        $crate::__contract_case!(queue_hides_what_it_delivers, $make);
        $crate::__contract_case!(queue_refuses_what_sqs_refuses, $make);
    };
}

/// Every key case; `$make` gives `Option<Arc<dyn KeyService>>`.
#[macro_export]
macro_rules! keys_contract_tests {
    ($make:expr) => {
        $crate::__contract_case!(keys_seal_and_open_under_context, $make);
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __contract_case {
    ($name:ident, $make:expr) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            if let Some(port) = $make.await {
                $crate::testing::contract::$name(port).await;
            }
        }
    };
}
