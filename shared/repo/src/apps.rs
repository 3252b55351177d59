//! RP apps. Layout: pk `APP`, sk `<appId>`; one partition, listed in app-id order.

use rp_domain::apps::{AppId, RateLimit, WorkstationSettings};
use rp_domain::time::EpochMillis;
use rp_ports::{Condition, Cursor, Item, ItemKey, ItemStore, Listed, Query, StoreError};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AppRecord {
    pub app_id: AppId,
    pub display_name: String,
    pub created_at: EpochMillis,
    pub updated_at: EpochMillis,
    pub workstation: WorkstationSettings,
    #[serde(default)]
    pub rate_limit: RateLimit,
    /// The app's own key-service budget, calls a second; `None`: the deployment's
    /// (`KMS_CALLS_PER_APP`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_calls_per_sec: Option<u32>,
    /// The app's own cap on open login-certificate requests; `None`: the deployment's
    /// (`CERT_MAX_OPEN_PER_APP`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_open_requests: Option<u32>,
}

impl AppRecord {
    /// The open login-certificate requests the app may have: its own cap, or else `deployment`'s.
    pub fn open_requests_cap(&self, deployment: u32) -> u32 {
        self.max_open_requests.unwrap_or(deployment)
    }

    /// A new app with default settings.
    pub fn new(app_id: AppId, display_name: String, now: EpochMillis) -> Self {
        Self {
            app_id,
            display_name,
            created_at: now,
            updated_at: now,
            workstation: WorkstationSettings::default(),
            rate_limit: RateLimit::default(),
            key_calls_per_sec: None,
            max_open_requests: None,
        }
    }
}

pub(crate) const PARTITION: &str = "APP";

fn key(app_id: &AppId) -> ItemKey {
    ItemKey::new(PARTITION, app_id.as_str())
}

#[derive(Clone, Copy)]
pub struct Apps<'a> {
    store: &'a dyn ItemStore,
}

impl<'a> Apps<'a> {
    pub fn new(store: &'a dyn ItemStore) -> Self {
        Self { store }
    }

    /// Creates the app; [`StoreError::Conflict`] if the id is taken.
    pub async fn create(&self, app: &AppRecord) -> Result<(), StoreError> {
        self.store.put(Item::new(key(&app.app_id), app)?, Condition::Absent).await?;
        Ok(())
    }

    pub async fn get(&self, app_id: &AppId) -> Result<Option<(AppRecord, u64)>, StoreError> {
        super::get_versioned(self.store, &key(app_id)).await
    }

    /// [`get`](Self::get) of the app a request may name: `None` if it names none.
    pub async fn named(self, app_id: Option<AppId>) -> Option<Result<Option<(AppRecord, u64)>, StoreError>> {
        match &app_id {
            Some(app_id) => Some(self.get(app_id).await),
            None => None,
        }
    }

    pub async fn list(&self, limit: usize, cursor: Option<Cursor>) -> Listed<AppRecord> {
        let page = self.store.query(Query::table(PARTITION).limit(limit).after(cursor)).await?;
        let apps = page.items.iter().map(Item::data).collect::<Result<_, _>>()?;
        Ok((apps, page.cursor))
    }

    /// Replaces the app's record if it is still at `version` ([`StoreError::Conflict`] if not).
    pub async fn replace(&self, app: &AppRecord, version: u64) -> Result<(), StoreError> {
        self.store.put(Item::new(key(&app.app_id), app)?, Condition::Version(version)).await?;
        Ok(())
    }

    pub fn query_partition() -> Query {
        Query::table(PARTITION)
    }
}
