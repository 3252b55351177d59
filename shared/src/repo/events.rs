//! Events (DECISIONS §9): stored with time, RP app, source and attributes, and written as one
//! structured log line each. Layout: pk `EVENT`, sk `<epoch ms, 13 digits>#<eventId>`; index
//! `gsi1` by app (`EVENTAPP#<appId>`), index `gsi2` by name (`EVENTNAME#<name>`), both sorted by
//! the same time key; TTL 90 days.

use crate::domain::apps::AppId;
use crate::ports::{Cursor, Index, Item, ItemKey, ItemStore, Query, SortKey, StoreError};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub const RETENTION_SECS: i64 = 90 * 24 * 3600;

/// The events the contract names.
pub const NAMES: [&str; 5] = [
    "WORKSTATION_CERTIFICATE_ISSUED",
    "WORKSTATION_CERTIFICATE_REVOKED",
    "WS_CERTIFICATE_REVOKED",
    "WORKSTATION_ENROLL",
    "OOB_WORKSTATION_REG",
];

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventRecord {
    pub event_id: String,
    pub name: String,
    #[serde(default)]
    pub app_id: Option<AppId>,
    /// Who reported it: `server`, `agent:<tokenId>` or `workstation:<tokenId>`.
    pub source: String,
    pub at: i64,
    pub attributes: Map<String, Value>,
}

impl EventRecord {
    pub fn new(
        name: &str,
        app_id: Option<AppId>,
        source: impl Into<String>,
        at: i64,
        attributes: Map<String, Value>,
    ) -> Self {
        Self {
            event_id: uuid::Uuid::new_v4().to_string(),
            name: name.to_owned(),
            app_id,
            source: source.into(),
            at,
            attributes,
        }
    }

    fn sort_key(&self) -> String {
        format!("{:013}#{}", self.at, self.event_id)
    }
}

/// Which events a listing returns.
#[derive(Debug, Clone, Default)]
pub struct EventFilter {
    pub name: Option<String>,
    pub app_id: Option<AppId>,
    /// Epoch ms, inclusive.
    pub from: Option<i64>,
    pub to: Option<i64>,
}

impl EventFilter {
    /// The query that serves this filter: by app if one is named, else by name, else all.
    pub fn query(&self) -> Query {
        let sort = match (self.from, self.to) {
            (None, None) => SortKey::All,
            (from, to) => SortKey::Between(
                format!("{:013}", from.unwrap_or(0).max(0)),
                format!("{:013}~", to.unwrap_or(9_999_999_999_999)),
            ),
        };
        let query = match (&self.app_id, &self.name) {
            (Some(app), _) => Query::index(Index::Gsi1, format!("EVENTAPP#{app}")),
            (None, Some(name)) => Query::index(Index::Gsi2, format!("EVENTNAME#{name}")),
            (None, None) => Query::table("EVENT"),
        };
        query.sort(sort)
    }
}

/// The event's structured log line (attributes carry no secrets by contract).
pub fn log(event: &EventRecord) {
    let attributes = Value::Object(event.attributes.clone()).to_string();
    tracing::info!(
        event = %event.name,
        event_id = %event.event_id,
        app_id = event.app_id.as_ref().map(|a| a.as_str()),
        source = %event.source,
        attributes,
        "event"
    );
}

pub struct Events<'a> {
    store: &'a dyn ItemStore,
}

impl<'a> Events<'a> {
    pub fn new(store: &'a dyn ItemStore) -> Self {
        Self { store }
    }

    /// The event as an item, to write in a transaction with what it reports; call [`log`]
    /// after the commit.
    pub fn item(event: &EventRecord) -> Result<Item, StoreError> {
        let sk = event.sort_key();
        let mut item = Item::new(ItemKey::new("EVENT", sk.clone()), event)?
            .with_ttl(Some(event.at / 1000 + RETENTION_SECS))
            .with_index(Index::Gsi2, ItemKey::new(format!("EVENTNAME#{}", event.name), sk.clone()));
        if let Some(app) = &event.app_id {
            item = item.with_index(Index::Gsi1, ItemKey::new(format!("EVENTAPP#{app}"), sk));
        }
        Ok(item)
    }

    /// Stores the event and writes its log line.
    pub async fn record(&self, event: &EventRecord) -> Result<(), StoreError> {
        self.store.put(Self::item(event)?, crate::ports::Condition::Absent).await?;
        log(event);
        Ok(())
    }

    /// A page of events in time order. With both an app and a name, the app's index is read
    /// and the name filtered here, so a page may hold fewer than `limit` events.
    pub async fn list(
        &self,
        filter: &EventFilter,
        limit: usize,
        cursor: Option<Cursor>,
    ) -> Result<(Vec<EventRecord>, Option<Cursor>), StoreError> {
        let page = self.store.query(filter.query().limit(limit).after(cursor)).await?;
        let mut events = Vec::with_capacity(page.items.len());
        for item in &page.items {
            let event: EventRecord = item.data()?;
            if filter.app_id.is_some() && filter.name.as_ref().is_some_and(|n| *n != event.name) {
                continue;
            }
            events.push(event);
        }
        Ok((events, page.cursor))
    }
}
