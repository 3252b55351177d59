//! Each tenant's share of the key service. KMS's request quota belongs to the account and region,
//! so one tenant's flood of key calls would throttle every tenant's. Every call is counted
//! against its tenant's budget before it is sent: the app's own figure (`keyCallsPerSec`, set
//! with the control API's rate limit), or else the deployment's (`KMS_CALLS_PER_APP`) calls a
//! second, in a fixed window held in the store, so it holds across Lambda instances. A call past
//! the budget is refused as the key service refuses one past its quota, without reaching it.

use async_trait::async_trait;
use rp_domain::apps::{AppId, RateLimit};
use rp_ports::keys::{Checked, KeyCall, KeyCheck};
use rp_ports::{Clock, EncryptionContext, ItemStore, KeyError, KeyService, StoreError};
use rp_repo::apps::Apps;
use rp_repo::ratelimit::Decision;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

pub use rp_domain::apps::{DEFAULT_KEY_CALLS_PER_APP, MAX_KEY_CALLS_PER_APP};

/// How long an instance keeps an app's figure before it reads the app again: a new figure
/// reaches every instance within this.
pub const FIGURE_KEPT_SECS: i64 = 10;

/// Apps whose figures an instance keeps at most; past it, it forgets them all and reads again.
const FIGURES_KEPT: usize = 10_000;

/// The counter's scope (`RL#<app>#kms`), beside the customization APIs' and the OOB start's.
const SCOPE: &str = "kms";

/// Each tenant's budget, as the check of a key service that [`budgeted`] wraps.
pub struct KeyBudget {
    store: Arc<dyn ItemStore>,
    clock: Arc<dyn Clock>,
    /// The deployment's figure, for an app that has none of its own.
    calls_per_sec: u32,
    /// Each app's figure as this instance last read it, and when (epoch seconds).
    figures: Mutex<HashMap<AppId, (u32, i64)>>,
}

/// Why a call was refused unsent: its tenant spent its share of the key service this second.
#[derive(Debug, thiserror::Error)]
#[error(
    "app '{app}' made its {limit} key-service calls of this second (keyCallsPerSec or KMS_CALLS_PER_APP)"
)]
pub struct OverBudget {
    pub app: String,
    pub limit: i64,
}

/// The tenant an encryption context names ([`EncryptionContext::new`] names one always).
#[derive(Debug, thiserror::Error)]
#[error("the encryption context names no tenant")]
struct NoTenant;

/// `inner` with each call counted against its tenant's budget, in `store`, before it is sent:
/// the app's own figure, or else `calls_per_sec` calls a second.
pub fn budgeted(
    inner: Arc<dyn KeyService>,
    store: Arc<dyn ItemStore>,
    clock: Arc<dyn Clock>,
    calls_per_sec: u32,
) -> Checked<KeyBudget> {
    Checked::new(inner, KeyBudget { store, clock, calls_per_sec, figures: Mutex::default() })
}

fn per_second(calls: u32) -> RateLimit {
    RateLimit { limit: i64::from(calls), window_secs: 1 }
}

/// A store's failure as the key call's: throttled stays throttled (503 with `Retry-After`).
fn refusal(e: StoreError) -> KeyError {
    match e {
        StoreError::Throttled(e) => KeyError::Throttled(e),
        e => KeyError::unavailable(e),
    }
}

impl KeyBudget {
    /// `app`'s figure as this instance kept it, if it is recent.
    fn kept(&self, app: &AppId, now: i64) -> Option<u32> {
        let figures = self.figures.lock().expect("the figures' lock is never poisoned");
        figures.get(app).filter(|(_, read_at)| now - read_at < FIGURE_KEPT_SECS).map(|(calls, _)| *calls)
    }

    fn keep(&self, app: AppId, calls: u32, now: i64) {
        let mut figures = self.figures.lock().expect("the figures' lock is never poisoned");
        if figures.len() >= FIGURES_KEPT {
            figures.clear();
        }
        figures.insert(app, (calls, now));
    }

    /// Counts one call of `app` at `now`: its figure, and the count's decision. With the figure
    /// kept, the count is conditional on it. Without, the app is read beside a count conditional
    /// on the most any figure may be, and the call is allowed if its count is within the figure
    /// read: one round trip either way, and never more calls allowed than the figure.
    async fn count(&self, app: &AppId, now: i64) -> Result<(u32, bool), StoreError> {
        let store = self.store.as_ref();
        let hit =
            |calls| async move { rp_repo::ratelimit::hit(store, app, SCOPE, &per_second(calls), now).await };
        if let Some(calls) = self.kept(app, now) {
            return Ok((calls, hit(calls).await?.allowed));
        }
        let apps = Apps::new(store);
        let (read, counted) = tokio::join!(apps.get(app), hit(MAX_KEY_CALLS_PER_APP));
        let calls = read?.and_then(|(record, _)| record.key_calls_per_sec).unwrap_or(self.calls_per_sec);
        self.keep(app.clone(), calls, now);
        let Decision { allowed, limit, remaining, .. } = counted?;
        Ok((calls, allowed && limit - remaining <= i64::from(calls)))
    }
}

#[async_trait]
impl KeyCheck for KeyBudget {
    /// Counts one call of the context's tenant: `Ok` when it may go to the key service.
    async fn check(&self, _: KeyCall, context: &EncryptionContext) -> Result<(), KeyError> {
        let tenant = context.0.get("tenant").ok_or_else(|| KeyError::unavailable(NoTenant))?;
        // A context's tenant is an app id: a context that names none, or something else, is
        // refused, never counted as some app's.
        let app = AppId::parse("tenant", tenant).map_err(|_| KeyError::unavailable(NoTenant))?;
        match self.count(&app, self.clock.epoch_secs()).await.map_err(refusal)? {
            (_, true) => Ok(()),
            (calls, false) => Err(KeyError::Throttled(Box::new(OverBudget {
                app: app.to_string(),
                limit: i64::from(calls),
            }))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rp_ports::held::{Gate, HeldStore};
    use rp_ports::keys::DataKey;
    use rp_ports::ManualClock;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    /// A key service that counts the calls that reach it.
    #[derive(Default)]
    struct Reached(AtomicUsize);

    #[async_trait]
    impl KeyService for Reached {
        async fn generate_data_key(&self, _: &EncryptionContext) -> Result<DataKey, KeyError> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Ok(DataKey { plaintext: [7; 32], wrapped: b"wrapped".to_vec() })
        }

        async fn decrypt_data_key(&self, _: &[u8], _: &EncryptionContext) -> Result<[u8; 32], KeyError> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Ok([7; 32])
        }
    }

    struct Budgeted {
        keys: Checked<KeyBudget>,
        store: Arc<dyn ItemStore>,
        reached: Arc<Reached>,
        clock: ManualClock,
        _dir: tempfile::TempDir,
    }

    fn on(calls_per_sec: u32, store: impl FnOnce(Arc<dyn ItemStore>) -> Arc<dyn ItemStore>) -> Budgeted {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::at(time::OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap());
        let db = rp_adapters::embedded::EmbeddedDb::open(dir.path()).unwrap();
        let embedded = Arc::new(rp_adapters::embedded::EmbeddedStore::new(db, Arc::new(clock.clone())));
        let reached = Arc::new(Reached::default());
        let store = store(embedded);
        let keys = budgeted(reached.clone(), store.clone(), Arc::new(clock.clone()), calls_per_sec);
        Budgeted { keys, store, reached, clock, _dir: dir }
    }

    fn of(app: &str) -> EncryptionContext {
        EncryptionContext::new(app, "offline-tokens").with("device", "d-1")
    }

    fn over_budget(result: Result<[u8; 32], KeyError>) -> OverBudget {
        let Err(KeyError::Throttled(source)) = result else { panic!("refused as throttled: {result:?}") };
        *source.downcast::<OverBudget>().expect("the budget's refusal")
    }

    /// Both kinds of call count; the one past the budget is refused as a throttled key service
    /// is, without reaching it; another tenant's calls go on; the next second has a fresh budget.
    #[tokio::test]
    async fn a_tenant_past_its_budget_is_refused_unsent_and_no_other_is() {
        let b = on(3, |store| store);
        b.keys.generate_data_key(&of("loud")).await.unwrap();
        b.keys.decrypt_data_key(b"w", &of("loud")).await.unwrap();
        b.keys.decrypt_data_key(b"w", &of("loud")).await.unwrap();
        let refused = over_budget(b.keys.decrypt_data_key(b"w", &of("loud")).await);
        assert_eq!((refused.app.as_str(), refused.limit), ("loud", 3));
        let generated = b.keys.generate_data_key(&of("loud")).await;
        assert!(matches!(generated, Err(KeyError::Throttled(_))), "every kind of call counts");
        assert_eq!(b.reached.0.load(Ordering::SeqCst), 3, "refused calls never reach the key service");

        b.keys.decrypt_data_key(b"w", &of("quiet")).await.expect("another tenant's budget is its own");
        b.clock.advance(Duration::from_secs(1));
        b.keys.decrypt_data_key(b"w", &of("loud")).await.expect("a new second, a new budget");
        assert_eq!(b.reached.0.load(Ordering::SeqCst), 5);
    }

    /// Stores app `id` with its own figure (`None`: the deployment's), or replaces its figure.
    async fn set_figure(store: &dyn ItemStore, id: &str, calls: Option<u32>) {
        let apps = Apps::new(store);
        let id = AppId::parse("appId", id).unwrap();
        match apps.get(&id).await.unwrap() {
            Some((mut app, version)) => {
                app.key_calls_per_sec = calls;
                apps.replace(&app, version).await.unwrap();
            }
            None => {
                let mut app =
                    rp_repo::apps::AppRecord::new(id, "app".into(), rp_domain::time::EpochMillis(0));
                app.key_calls_per_sec = calls;
                apps.create(&app).await.unwrap();
            }
        }
    }

    /// An app's own figure is its budget, smaller or larger than the deployment's; an app
    /// without one has the deployment's. A new figure is read again once the one kept is
    /// [`FIGURE_KEPT_SECS`] old, not before.
    #[tokio::test]
    async fn an_apps_own_figure_is_its_budget_and_a_new_one_is_read_within_the_kept_time() {
        let b = on(3, |store| store);
        set_figure(b.store.as_ref(), "small", Some(2)).await;
        set_figure(b.store.as_ref(), "large", Some(5)).await;
        set_figure(b.store.as_ref(), "plain", None).await;
        for (app, figure) in [("small", 2), ("large", 5), ("plain", 3), ("unknown", 3)] {
            for _ in 0..figure {
                b.keys.decrypt_data_key(b"w", &of(app)).await.unwrap_or_else(|e| panic!("{app}: {e}"));
            }
            let refused = over_budget(b.keys.decrypt_data_key(b"w", &of(app)).await);
            assert_eq!((refused.app.as_str(), refused.limit), (app, figure));
        }
        assert_eq!(b.reached.0.load(Ordering::SeqCst), 13);

        set_figure(b.store.as_ref(), "small", Some(4)).await;
        let spend = |calls: usize| {
            let keys = &b.keys;
            async move {
                let mut allowed = 0;
                for _ in 0..calls {
                    allowed += usize::from(keys.decrypt_data_key(b"w", &of("small")).await.is_ok());
                }
                allowed
            }
        };
        b.clock.advance(Duration::from_secs(FIGURE_KEPT_SECS as u64 - 1));
        assert_eq!(spend(5).await, 2, "the figure kept still holds");
        b.clock.advance(Duration::from_secs(1));
        assert_eq!(spend(5).await, 4, "then the new one");
        set_figure(b.store.as_ref(), "small", None).await;
        b.clock.advance(Duration::from_secs(FIGURE_KEPT_SECS as u64));
        assert_eq!(spend(5).await, 3, "back on the deployment's");
    }

    /// Callers racing for the last of a budget never get past it together, the deployment's or
    /// an app's own, each of them read by every racer (none has a figure kept yet).
    #[tokio::test]
    async fn racing_calls_spend_the_budget_once() {
        let b = Arc::new(on(5, |store| store));
        set_figure(b.store.as_ref(), "own", Some(2)).await;
        for (app, figure, reached) in [("racing", 5, 5), ("own", 2, 7)] {
            let racers = (0..20).map(|_| {
                let b = b.clone();
                tokio::spawn(async move { b.keys.decrypt_data_key(b"w", &of(app)).await.is_ok() })
            });
            let mut allowed = 0;
            for racer in racers.collect::<Vec<_>>() {
                allowed += usize::from(racer.await.unwrap());
            }
            assert_eq!((allowed, b.reached.0.load(Ordering::SeqCst)), (figure, reached), "{app}");
        }
    }

    /// A budget of 0 is none: the state's key service is the backend's own, uncounted.
    #[tokio::test]
    async fn a_budget_of_0_leaves_the_key_service_uncounted() {
        let b = on(1, |store| store);
        let absent = Arc::new(rp_ports::absent::Absent);
        let backend = rp_ports::Backend {
            store: b.store.clone(),
            queue: absent.clone(),
            keys: b.reached.clone(),
            push: absent,
            clock: Arc::new(b.clock.clone()),
        };
        let with = |calls| {
            crate::AppState::new(
                backend.clone(),
                crate::HttpConfig { key_calls_per_app: calls, ..Default::default() },
            )
        };
        assert!(Arc::ptr_eq(&with(0).backend.keys, &backend.keys));
        let counted = with(1).backend.keys;
        assert!(!Arc::ptr_eq(&counted, &backend.keys));
        counted.decrypt_data_key(b"w", &of("app")).await.unwrap();
        assert!(counted.decrypt_data_key(b"w", &of("app")).await.is_err(), "the budget of the config");
    }

    /// A store that refuses every call for its request rate, as DynamoDB does past a partition's.
    struct Throttling;

    #[derive(Debug, thiserror::Error)]
    #[error("ProvisionedThroughputExceededException")]
    struct Busy;

    #[async_trait]
    impl ItemStore for Throttling {
        fn kind(&self) -> &'static str {
            "throttling"
        }
        async fn get(&self, _: &rp_ports::ItemKey) -> Result<Option<rp_ports::Item>, StoreError> {
            Err(StoreError::Throttled(Box::new(Busy)))
        }
        async fn put(&self, _: rp_ports::Item, _: rp_ports::Condition) -> Result<rp_ports::Item, StoreError> {
            Err(StoreError::Throttled(Box::new(Busy)))
        }
        async fn delete(&self, _: &rp_ports::ItemKey, _: rp_ports::Condition) -> Result<(), StoreError> {
            Err(StoreError::Throttled(Box::new(Busy)))
        }
        async fn transact(&self, _: Vec<rp_ports::WriteOp>) -> Result<(), StoreError> {
            Err(StoreError::Throttled(Box::new(Busy)))
        }
        async fn query(&self, _: rp_ports::Query) -> Result<rp_ports::Page, StoreError> {
            Err(StoreError::Throttled(Box::new(Busy)))
        }
        async fn increment(&self, _: rp_ports::Increment) -> Result<i64, StoreError> {
            Err(StoreError::Throttled(Box::new(Busy)))
        }
    }

    /// A counter the store throttles refuses the call as throttled (503 with `Retry-After`),
    /// unsent.
    #[tokio::test]
    async fn a_call_whose_count_is_throttled_is_throttled_unsent() {
        let b = on(3, |_| Arc::new(Throttling));
        let Err(KeyError::Throttled(source)) = b.keys.decrypt_data_key(b"w", &of("app")).await else {
            panic!("refused as throttled")
        };
        assert!(source.downcast_ref::<Busy>().is_some(), "the store's own refusal: {source}");
        assert_eq!(b.reached.0.load(Ordering::SeqCst), 0);
    }

    /// A counter the store cannot keep refuses the call as unavailable (503), unsent: a budget
    /// that cannot be read is not a budget that allows everything.
    #[tokio::test]
    async fn a_call_whose_count_fails_is_not_sent() {
        let (gate, pass) = Gate::new();
        drop(gate);
        let b = on(3, |store| Arc::new(HeldStore::new(store, pass)));
        let failed = b.keys.decrypt_data_key(b"w", &of("app")).await;
        assert!(matches!(failed, Err(KeyError::Unavailable(_))), "{failed:?}");
        let failed = b.keys.generate_data_key(&of("app")).await.map(|_| ());
        assert!(matches!(failed, Err(KeyError::Unavailable(_))), "{failed:?}");
        let nameless = EncryptionContext(Default::default());
        assert!(matches!(b.keys.decrypt_data_key(b"w", &nameless).await, Err(KeyError::Unavailable(_))));
        assert_eq!(b.reached.0.load(Ordering::SeqCst), 0);
    }
}
