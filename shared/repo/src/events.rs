//! Events (DECISIONS §9): stored with time, RP app, source and attributes, and written as one
//! structured log line each. Layout: pk `EVENT`, sk `<epoch ms, 13 digits>#<eventId>`; index
//! `gsi1` by app (`EVENTAPP#<appId>`), index `gsi2` by name (`EVENTNAME#<name>`), both sorted by
//! the same time key; TTL 90 days.

use rp_domain::apps::AppId;
use rp_domain::time::EpochMillis;
use rp_ports::{
    Condition, Cursor, Index, Item, ItemKey, ItemStore, Listed, Query, SortKey, StoreError, WriteOp,
};
use serde_json::Value;

pub const RETENTION_SECS: i64 = 90 * 24 * 3600;

pub use rp_domain::events::{EventRecord, NAMES};

fn sort_key(event: &EventRecord) -> String {
    format!("{:013}#{}", event.at.as_millis(), event.event_id)
}

/// Which events a listing returns.
#[derive(Debug, Clone, Default)]
pub struct EventFilter {
    pub name: Option<String>,
    pub app_id: Option<AppId>,
    /// Inclusive.
    pub from: Option<EpochMillis>,
    pub to: Option<EpochMillis>,
}

impl EventFilter {
    /// The query that serves this filter: by app if one is named, else by name, else all.
    pub fn query(&self) -> Query {
        let sort = match (self.from, self.to) {
            (None, None) => SortKey::All,
            (from, to) => SortKey::Between(
                format!("{:013}", from.map_or(0, |t| t.as_millis()).max(0)),
                format!("{:013}~", to.map_or(9_999_999_999_999, |t| t.as_millis())),
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

/// Writes `ops` and `event` in one transaction, and logs the event once it is stored: a change
/// and the event that reports it land together or not at all.
pub async fn transact_with(
    store: &dyn ItemStore,
    mut ops: Vec<WriteOp>,
    event: &EventRecord,
) -> Result<(), StoreError> {
    ops.push(WriteOp::Put { item: Events::item(event)?, condition: Condition::Absent });
    store.transact(ops).await?;
    log(event);
    Ok(())
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

#[derive(Clone, Copy)]
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
        let sk = sort_key(event);
        let mut item = Item::new(ItemKey::new("EVENT", sk.clone()), event)?
            .with_ttl(Some(event.at.plus_secs(RETENTION_SECS).as_secs()))
            .with_index(Index::Gsi2, ItemKey::new(format!("EVENTNAME#{}", event.name), sk.clone()));
        if let Some(app) = &event.app_id {
            item = item.with_index(Index::Gsi1, ItemKey::new(format!("EVENTAPP#{app}"), sk));
        }
        Ok(item)
    }

    /// Stores the event and writes its log line.
    pub async fn record(&self, event: &EventRecord) -> Result<(), StoreError> {
        self.store.put(Self::item(event)?, rp_ports::Condition::Absent).await?;
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
    ) -> Listed<EventRecord> {
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
