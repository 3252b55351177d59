//! The held store ([`rp_shared::ports::held`]) over a real one: reads go through, writes wait for
//! the go-ahead (the gate knows when one does), and a refused or dropped go-ahead writes nothing.

use rp_shared::backend;
use rp_shared::ports::held::{Gate, HeldStore};
use rp_shared::ports::{Condition, Item, ItemKey, ItemStore, StoreError, WriteOp};

fn item(sk: &str) -> Item {
    Item::new(ItemKey::new("T", sk), &serde_json::json!({ "n": 1 })).unwrap()
}

#[tokio::test]
async fn reads_go_through_and_writes_wait_for_the_go_ahead() {
    let dir = tempfile::tempdir().unwrap();
    let inner = backend::embedded(dir.path()).unwrap().store;
    inner.put(item("a"), Condition::Any).await.unwrap();
    let (gate, pass) = Gate::new();
    let held = HeldStore::new(inner.clone(), pass);
    // A read answers while the gate is shut.
    assert!(held.get(&ItemKey::new("T", "a")).await.unwrap().is_some());
    assert!(!gate.is_reached(), "a read does not come to the gate");
    let write = held.put(item("b"), Condition::Absent);
    let opened = async {
        tokio::task::yield_now().await;
        assert!(gate.is_reached(), "the write waits at the gate");
        assert!(inner.get(&ItemKey::new("T", "b")).await.unwrap().is_none(), "written before the go-ahead");
        gate.open(true);
    };
    let (written, ()) = tokio::join!(write, opened);
    written.unwrap();
    assert!(inner.get(&ItemKey::new("T", "b")).await.unwrap().is_some());
}

#[tokio::test]
async fn a_refused_or_dropped_gate_fails_every_write_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let inner = backend::embedded(dir.path()).unwrap().store;
    for open in [Some(false), None] {
        let (gate, pass) = Gate::new();
        let held = HeldStore::new(inner.clone(), pass);
        match open {
            Some(allowed) => gate.open(allowed),
            None => drop(gate),
        }
        assert!(matches!(held.put(item("c"), Condition::Any).await, Err(StoreError::Unavailable(_))));
        assert!(held
            .transact(vec![WriteOp::Delete { key: ItemKey::new("T", "c"), condition: Condition::Any }])
            .await
            .is_err());
        let each = held.put_each(vec![(item("c"), Condition::Any), (item("d"), Condition::Any)]).await;
        assert!(each.iter().all(Result::is_err));
        assert!(inner.get(&ItemKey::new("T", "c")).await.unwrap().is_none());
        assert!(inner.get(&ItemKey::new("T", "d")).await.unwrap().is_none());
    }
}
