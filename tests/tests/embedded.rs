//! The port contract suite and the router suite on the embedded backend.

#[macro_use]
mod common;

use rp_shared::adapters::embedded::{EmbeddedDb, EmbeddedQueue, EmbeddedStore, LocalKeyFile};
use rp_shared::backend::{self, Backend};
use rp_shared::ports::{
    Condition, Increment, Item, ItemKey, ItemStore, KeyService, Page, Query, Queue, StoreError, SystemClock,
    WriteOp,
};
use rp_shared::testing::contract::QUEUE_MAX_RECEIVE;
use std::sync::Arc;

/// A fresh temporary directory, removed when it is dropped.
fn data_dir() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("rp-test-").tempdir().expect("temp dir")
}

// A contract case's port outlives the directory it was opened in: the database keeps its open
// file after its name is removed (POSIX), and the key file is read once, so a case leaves
// nothing behind.

async fn store() -> Option<Arc<dyn ItemStore>> {
    let dir = data_dir();
    let db = EmbeddedDb::open(dir.path()).unwrap();
    Some(Arc::new(EmbeddedStore::new(db, Arc::new(SystemClock))))
}

async fn queue() -> Option<Arc<dyn Queue>> {
    let dir = data_dir();
    let db = EmbeddedDb::open(dir.path()).unwrap();
    Some(Arc::new(EmbeddedQueue::new(db, Arc::new(SystemClock), "contract", QUEUE_MAX_RECEIVE)))
}

async fn keys() -> Option<Arc<dyn KeyService>> {
    let dir = data_dir();
    Some(Arc::new(LocalKeyFile::open_or_create(&dir.path().join("keys.json")).unwrap()))
}

fn now() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

rp_shared::store_contract_tests!(store(), now());
rp_shared::queue_contract_tests!(queue());
rp_shared::keys_contract_tests!(keys());

/// A fresh embedded backend for each router case, on a clock the case can move, and its data
/// directory: removed when the case ends (a wake-up's record is written there as it goes).
async fn backend(clock: rp_shared::ports::ManualClock) -> Option<(Backend, tempfile::TempDir)> {
    let dir = data_dir();
    Some((backend::embedded_with_clock(dir.path(), Arc::new(clock)).unwrap(), dir))
}

router_tests!(backend);

#[tokio::test]
async fn key_file_is_private_and_stable() {
    let dir = data_dir();
    let path = dir.path().join("keys.json");
    let first = LocalKeyFile::open_or_create(&path).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
    let second = LocalKeyFile::open_or_create(&path).unwrap();
    let ctx = rp_shared::ports::EncryptionContext::new("t", "p");
    let sealed = rp_shared::ports::keys::seal(&first, &ctx, b"x").await.unwrap();
    assert_eq!(rp_shared::ports::keys::open(&second, &ctx, &sealed).await.unwrap(), b"x");
}

#[tokio::test]
async fn data_survives_reopening_the_database() {
    let dir = data_dir();
    {
        let backend = backend::embedded(dir.path()).unwrap();
        let item = rp_shared::ports::Item::new(
            rp_shared::ports::ItemKey::new("P", "S"),
            &serde_json::json!({"v": 1}),
        )
        .unwrap();
        backend.store.put(item, rp_shared::ports::Condition::Absent).await.unwrap();
        backend.queue.send("m", std::time::Duration::ZERO).await.unwrap();
    }
    let backend = backend::embedded(dir.path()).unwrap();
    let got = backend.store.get(&rp_shared::ports::ItemKey::new("P", "S")).await.unwrap().unwrap();
    assert_eq!(got.attrs["v"], 1);
    let messages = backend.queue.receive(10, std::time::Duration::from_secs(5)).await.unwrap();
    assert_eq!(messages.len(), 1);
}

/// Hostile bodies: every field of the OOB and offline endpoints replaced by arbitrary JSON gets
/// a 4xx problem, never a 5xx or a panic.
#[test]
fn hostile_bodies_get_4xx_never_5xx() {
    use proptest::prelude::*;
    use serde_json::{json, Value};
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let (h, access, device_token, _data) = runtime.block_on(async {
        let clock = rp_shared::ports::ManualClock::starting_now();
        let (backend, data) = backend(clock.clone()).await.unwrap();
        let h = common::Harness::new(backend, clock).await;
        let app = h.app().await;
        h.admin(
            "PUT",
            &format!("/cc/api/apps/{app}/workstation"),
            Some(json!({"offlineAccess": {"enabled": true}})),
        )
        .await;
        let access = h.access_token(&app).await;
        let dev = common::device(&h, &app, "zed@example.com", None).await;
        common::pair(&h, &access, &dev, "m-hostile").await;
        (h, access, dev.token, data)
    });
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Value::from),
        ".{0,80}".prop_map(Value::from),
        "[0-9a-f]{60,70}".prop_map(Value::from),
    ];
    let value = leaf.prop_recursive(2, 8, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            proptest::collection::btree_map("[a-z]{1,6}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    });
    let targets: Vec<(&str, &str, bool, Value)> = vec![
        (
            "POST",
            "/rp/api/oob/client/authentication/requests",
            false,
            json!({"appId": "x", "namedUser": "zed@example.com",
            "sessionNonce": "a", "deviceNonce": "b", "serviceNonce": "c", "serviceHmac": "d", "extras": {"amount": "1"}}),
        ),
        (
            "POST",
            "/rp/versioned/device/oob/requests/some-id",
            true,
            json!({"decision": "approve", "signature": "AA==", "amount": "1"}),
        ),
        (
            "POST",
            "/rp/api/client/reg",
            false,
            json!({"machineId": "m-hostile", "deviceId": "d", "offline": {"tokens": "a:12345678", "tokensAuth": "x"}}),
        ),
        (
            "PATCH",
            "/rp/api/client/reg",
            false,
            json!({"machineId": "m-hostile", "deviceId": "d", "usedTokenIds": ["a"], "failedAttempts": 1}),
        ),
        ("POST", "/rp/versioned/device/setup", true, json!({"machineId": "m-hostile"})),
        (
            "POST",
            "/rp/versioned/device/offline/used",
            true,
            json!({"machineId": "m-hostile", "tokenIds": ["a"]}),
        ),
    ];
    let mut runner = proptest::test_runner::TestRunner::new(proptest::test_runner::Config {
        cases: 48,
        ..Default::default()
    });
    for (method, path, as_device, template) in targets {
        let fields: Vec<String> = template.as_object().unwrap().keys().cloned().collect();
        let strategy = (proptest::sample::select(fields), value.clone());
        runner
            .run(&strategy, |(field, replacement)| {
                let mut body = template.clone();
                body[field.as_str()] = replacement;
                let token = if as_device { &device_token } else { &access };
                let r = runtime.block_on(h.client.send(method, path, Some(token), Some(body.clone())));
                prop_assert!(
                    r.status.as_u16() < 500,
                    "{method} {path} {body}: {} {}",
                    r.status,
                    String::from_utf8_lossy(&r.body)
                );
                Ok(())
            })
            .unwrap();
    }
}

/// The data directory and the database are private to the user, and a key file others can read
/// is refused on every open.
#[cfg(unix)]
#[test]
fn local_data_is_private() {
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("data");
    let _backend = backend::embedded(&dir).unwrap();
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&dir.join("rp.redb")), 0o600);
    assert_eq!(mode(&dir.join("keys.json")), 0o600);
    let keys = dir.join("keys.json");
    std::fs::set_permissions(&keys, std::fs::Permissions::from_mode(0o644)).unwrap();
    let refused = LocalKeyFile::open_or_create(&keys).err().expect("a readable key file is refused");
    assert!(refused.to_string().contains("chmod 600"), "{refused}");
}

/// The embedded store with every write's condition taken as the weakest that still writes:
/// absence asked for as anything, a version asked for as any version. What two racing writers
/// would do to each other without their conditions.
struct Unguarded(Arc<dyn ItemStore>);

fn loosened(condition: Condition) -> Condition {
    match condition {
        Condition::Absent => Condition::Any,
        Condition::Version(_) => Condition::Exists,
        other => other,
    }
}

#[async_trait::async_trait]
impl ItemStore for Unguarded {
    fn kind(&self) -> &'static str {
        self.0.kind()
    }
    async fn get(&self, key: &ItemKey) -> Result<Option<Item>, StoreError> {
        self.0.get(key).await
    }
    async fn put(&self, item: Item, condition: Condition) -> Result<Item, StoreError> {
        self.0.put(item, loosened(condition)).await
    }
    async fn delete(&self, key: &ItemKey, condition: Condition) -> Result<(), StoreError> {
        self.0.delete(key, loosened(condition)).await
    }
    async fn transact(&self, ops: Vec<WriteOp>) -> Result<(), StoreError> {
        let loosened = ops.into_iter().map(|op| match op {
            WriteOp::Put { item, condition } => WriteOp::Put { item, condition: loosened(condition) },
            WriteOp::Delete { key, condition } => WriteOp::Delete { key, condition: loosened(condition) },
            WriteOp::Check { key, condition } => WriteOp::Check { key, condition: loosened(condition) },
            increment @ WriteOp::Increment(_) => increment,
        });
        self.0.transact(loosened.collect()).await
    }
    async fn query(&self, query: Query) -> Result<Page, StoreError> {
        self.0.query(query).await
    }
    async fn increment(&self, increment: Increment) -> Result<i64, StoreError> {
        self.0.increment(increment).await
    }
}

/// Every race case can fail: on a store that ignores write conditions ([`Unguarded`]), each one
/// does, so each catches the lost update it is there for. Left out: the eight racing OOB answers,
/// which seldom interleave on this store, and the unpairings racing an agent's pass; the held
/// cases here pin their windows open. The unheld ones race for real, and on a loaded machine
/// their racers may run one after another: a case counts as caught when it fails in any of
/// four runs (CI saw the 50 racing results pass once in a run). Each failing run prints
/// its panic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_race_case_fails_on_a_store_that_ignores_write_conditions() {
    use futures_util::FutureExt;
    type Case = fn(common::Harness) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()>>>;
    macro_rules! cases {
        ($($name:ident),* $(,)?) => { [$((stringify!($name), (|h| Box::pin(common::$name(h))) as Case)),*] };
    }
    let cases = cases![
        app_ids_are_unique_even_under_races,
        content_races_lose_nothing,
        twenty_concurrent_updates_each_succeed,
        racing_rotations_lose_no_key,
        racing_results_with_one_serial_store_it_once,
        concurrent_pollers_issue_each_request_once,
        an_unpairing_that_read_before_the_issue_revokes_it,
        a_rename_read_before_a_new_pairing_keeps_the_new_pairing,
        an_answer_that_loses_its_race_decides_again,
        a_removal_wins_over_an_answer_in_flight,
        a_removal_wins_over_a_start_in_flight,
        a_registration_that_loses_a_race_reads_the_device_again,
        a_registration_keeps_a_name_learnt_while_it_ran,
        a_token_end_wins_over_a_pin_fetch_in_flight,
        a_pin_fetch_that_loses_a_race_to_a_rename_reads_again,
        racing_pin_reports_all_land,
        removal_wins_over_pairings_made_while_it_runs,
        removal_and_token_end_win_over_token_rotations,
        a_report_held_while_its_repeat_lands_stores_one_event,
    ];
    const ATTEMPTS: usize = 4;
    let mut passed = Vec::new();
    for (name, case) in cases {
        let mut caught = false;
        for _ in 0..ATTEMPTS {
            let clock = rp_shared::ports::ManualClock::starting_now();
            let (made, _data) = backend(clock.clone()).await.unwrap();
            let unguarded = Backend { store: Arc::new(Unguarded(made.store.clone())), ..made };
            let run = std::panic::AssertUnwindSafe(case(common::Harness::new(unguarded, clock).await));
            let limit = std::time::Duration::from_secs(60);
            if !matches!(tokio::time::timeout(limit, run.catch_unwind()).await, Ok(Ok(()))) {
                caught = true;
                break;
            }
        }
        if !caught {
            passed.push(name);
        }
    }
    assert!(passed.is_empty(), "race cases that pass {ATTEMPTS} runs without write conditions: {passed:?}");
}
