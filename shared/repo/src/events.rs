//! Events (DECISIONS §9): stored with time, RP app, source and attributes, and written as one
//! structured log line each.
//!
//! Layout: pk `EVENT#<appId>` (`EVENT#-` for an event of no app), so one tenant's events never
//! share a partition with another's; sk `<epoch ms, 13 digits>#<eventId>`. The listings across
//! apps read two indexes whose writes are spread over [`SHARDS`] partitions by the event id:
//! `gsi1` holds every event (`EVENTS#<shard>`), `gsi2` every event of a name
//! (`EVENTNAME#<name>#<shard>`); both sort by the same time key. A listing reads its partitions
//! at once and merges them by that key. TTL 90 days.
//!
//! A report that names its own id (`eventId`) also writes, in the same transaction, a marker
//! `EVENTID#<appId>#<eventId>` / `REPORT` holding the event, kept as long as the event: a report
//! sent again finds it and is answered with the event stored the first time.
//!
//! Events stored before this layout sit in one partition for all apps (pk `EVENT`, `gsi1`
//! `EVENTAPP#<appId>`, `gsi2` `EVENTNAME#<name>`); every listing reads the matching one of
//! those too, until they expire.

use rp_domain::apps::AppId;
use rp_domain::time::EpochMillis;
use rp_ports::{
    Condition, Cursor, Index, Item, ItemKey, ItemStore, Listed, Query, SortKey, StoreError, WriteOp,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::Order;
use std::collections::VecDeque;

pub const RETENTION_SECS: i64 = 90 * 24 * 3600;

/// How many partitions each cross-app index spreads its writes over: one busy tenant's events
/// land on all of them evenly instead of filling one.
pub const SHARDS: u32 = 8;

/// The most events one query of [`Events::merge`] reads from a partition.
const MAX_PAGE: usize = 200;

pub use rp_domain::events::{EventRecord, NAMES};

fn sort_key(event: &EventRecord) -> String {
    format!("{:013}#{}", event.at.as_millis(), event.event_id)
}

/// The app's own partition.
fn partition(app: Option<&AppId>) -> String {
    format!("EVENT#{}", app.map_or("-", AppId::as_str))
}

/// The marker of the report of `app` whose reporter named it `event_id`.
fn reported(app: Option<&AppId>, event_id: &str) -> ItemKey {
    ItemKey::new(format!("EVENTID#{}#{event_id}", app.map_or("-", AppId::as_str)), "REPORT")
}

/// The index partition `event_id` is written to: FNV-1a of the id, so the spread is even and
/// the same event always lands in the same place.
fn shard(event_id: &str) -> u32 {
    let hash = event_id.bytes().fold(0x811c_9dc5_u32, |h, b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193));
    hash % SHARDS
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
    /// The partitions that hold the events this filter selects, each with how many partitions
    /// its events are spread over evenly: the app's own (and its old index partition) if one
    /// is named, else the name's index shards, else all of the index's shards; each with the
    /// old partition it replaces, which holds every event of its time alone.
    fn partitions(&self) -> Vec<(Query, usize)> {
        let shards = SHARDS as usize;
        match (&self.app_id, &self.name) {
            (Some(app), _) => vec![
                (Query::table(partition(Some(app))), 1),
                (Query::index(Index::Gsi1, format!("EVENTAPP#{app}")), 1),
            ],
            (None, Some(name)) => (0..SHARDS)
                .map(|k| (Query::index(Index::Gsi2, format!("EVENTNAME#{name}#{k}")), shards))
                .chain([(Query::index(Index::Gsi2, format!("EVENTNAME#{name}")), 1)])
                .collect(),
            (None, None) => (0..SHARDS)
                .map(|k| (Query::index(Index::Gsi1, format!("EVENTS#{k}")), shards))
                .chain([(Query::table("EVENT"), 1)])
                .collect(),
        }
    }

    /// The sort keys to read: the filter's times, and only after `after` if a page came before;
    /// `None` when nothing can match.
    fn range(&self, after: Option<&str>) -> Option<SortKey> {
        let from = format!("{:013}", self.from.map_or(0, |t| t.as_millis()).max(0));
        let lower = match after {
            // The first key above `after`: event ids hold no character below a space.
            Some(after) => format!("{after} ").max(from),
            None => from,
        };
        let upper = format!("{:013}~", self.to.map_or(9_999_999_999_999, |t| t.as_millis()));
        (lower <= upper).then_some(SortKey::Between(lower, upper))
    }

    /// Whether `event`, read from one of the filter's partitions, is one it selects: an app's
    /// partition holds every name.
    fn keeps(&self, event: &EventRecord) -> bool {
        self.app_id.is_none() || self.name.as_ref().is_none_or(|name| *name == event.name)
    }

    /// What a cursor of this listing must carry: another filter's cursor is refused.
    fn scope(&self) -> String {
        let time = |t: Option<EpochMillis>| t.map(|t| t.as_millis().to_string()).unwrap_or_default();
        format!(
            "{}|{}|{}|{}",
            self.app_id.as_ref().map_or("", AppId::as_str),
            self.name.as_deref().unwrap_or_default(),
            time(self.from),
            time(self.to)
        )
    }

    /// The cursor `token` a client sent, if it is one this listing gave out.
    pub fn cursor(&self, token: &str) -> Option<EventCursor> {
        let cursor: EventCursor = rp_ports::from_opaque_token(token)?;
        // An event's sort key: a store refuses a longer key than it keeps as a bad request.
        let (at, id) = cursor.after.split_at_checked(13)?;
        let key = at.bytes().all(|b| b.is_ascii_digit()) && id.starts_with('#') && id.len() <= 65;
        (key && cursor.scope == self.scope()).then_some(cursor)
    }
}

/// Where an event listing stopped: the sort key of the last event it read. Every partition the
/// listing reads resumes after it, as a merged page returns events in that key's order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventCursor {
    after: String,
    scope: String,
}

impl EventCursor {
    /// Rendered to clients as an opaque base64url token.
    pub fn encode(&self) -> String {
        rp_ports::opaque_token(self)
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
        let shard = shard(&event.event_id);
        Ok(Item::new(ItemKey::new(partition(event.app_id.as_ref()), sk.clone()), event)?
            .with_ttl(Some(event.at.plus_secs(RETENTION_SECS).as_secs()))
            .with_index(Index::Gsi1, ItemKey::new(format!("EVENTS#{shard}"), sk.clone()))
            .with_index(Index::Gsi2, ItemKey::new(format!("EVENTNAME#{}#{shard}", event.name), sk)))
    }

    /// Stores the event and writes its log line.
    pub async fn record(&self, event: &EventRecord) -> Result<(), StoreError> {
        self.store.put(Self::item(event)?, Condition::Absent).await?;
        log(event);
        Ok(())
    }

    /// Stores the event under its reporter's own id ([`EventRecord::event_id`]) once: `None` when
    /// this call stored it (and wrote its log line), or the event an earlier report of that id
    /// stored, as it was stored.
    pub async fn record_once(&self, event: &EventRecord) -> Result<Option<EventRecord>, StoreError> {
        let key = reported(event.app_id.as_ref(), &event.event_id);
        let expires = Some(event.at.plus_secs(RETENTION_SECS).as_secs());
        let marker = Item::new(key.clone(), event)?.with_ttl(expires);
        let ops = vec![WriteOp::Put { item: marker, condition: Condition::Absent }];
        match transact_with(self.store, ops, event).await {
            Ok(()) => Ok(None),
            // The marker is written with its event, so an earlier report's event is there.
            Err(StoreError::Conflict) => match self.store.get(&key).await? {
                Some(earlier) => earlier.data().map(Some),
                None => Err(StoreError::Conflict),
            },
            Err(e) => Err(e),
        }
    }

    /// A page of events in time order: the filter's partitions merged by time and cut at
    /// `limit`, each read only as far as the merge takes from it (`Events::merge`). With both
    /// an app and a name, the app's partition is read and the name filtered here, so a page may
    /// hold fewer than `limit` events.
    pub async fn list(
        &self,
        filter: &EventFilter,
        limit: usize,
        cursor: Option<EventCursor>,
    ) -> Listed<EventRecord, EventCursor> {
        let Some(range) = filter.range(cursor.as_ref().map(|c| c.after.as_str())) else {
            return Ok((Vec::new(), None));
        };
        let mut items = Vec::new();
        let more = self
            .merge(filter, range, limit, Order::OldestFirst, |item| {
                items.push(item);
                Ok(items.len() >= limit)
            })
            .await?;
        let next = match items.last() {
            Some(last) if more => Some(EventCursor { after: last.key.sk.clone(), scope: filter.scope() }),
            _ => None,
        };
        let mut events = Vec::with_capacity(items.len());
        for item in items {
            let event: EventRecord = item.data()?;
            if filter.keeps(&event) {
                events.push(event);
            }
        }
        Ok((events, next))
    }

    /// The first `cap` events `filter` selects in `order`, and whether more were left unread.
    /// Unlike paging through [`Events::list`], which reads every partition afresh for each page,
    /// this merges the partitions once, as far as `cap` takes it.
    pub async fn first(
        &self,
        filter: &EventFilter,
        cap: usize,
        order: Order,
    ) -> Result<(Vec<EventRecord>, bool), StoreError> {
        let Some(range) = filter.range(None) else {
            return Ok((Vec::new(), false));
        };
        let mut events = Vec::new();
        let more = self
            .merge(filter, range, cap, order, |item| {
                let event: EventRecord = item.data()?;
                if filter.keeps(&event) {
                    events.push(event);
                }
                Ok(events.len() >= cap)
            })
            .await?;
        Ok((events, more))
    }

    /// Hands the items of `filter`'s partitions in `range` to `take` in `order` of their sort
    /// keys until it answers that it has enough (about `wanted` of them), and answers whether
    /// any were left unread. Each partition is read a page at a time, only as far as the merge
    /// takes from it: a partition whose page ran dry is read again before the merge goes on. A
    /// page is the partition's share of `wanted` ([`page_size`]): an index shard's, as the
    /// shards share the events evenly, so that a listing reads about its size once, not its size
    /// from every shard; all of it for a partition that holds its events alone.
    async fn merge(
        &self,
        filter: &EventFilter,
        range: SortKey,
        wanted: usize,
        order: Order,
        mut take: impl FnMut(Item) -> Result<bool, StoreError>,
    ) -> Result<bool, StoreError> {
        if wanted == 0 {
            return Ok(true);
        }
        let queries: Vec<Query> = filter
            .partitions()
            .into_iter()
            .map(|(query, spread)| order.of(query.sort(range.clone()).limit(page_size(wanted, spread))))
            .collect();
        let mut read: Vec<VecDeque<Item>> = vec![VecDeque::new(); queries.len()];
        // Where each partition's next page starts (`Some(None)`: at its first), `None` once it is
        // read to its end.
        let mut next: Vec<Option<Option<Cursor>>> = vec![Some(None); queries.len()];
        loop {
            let starved: Vec<usize> =
                (0..queries.len()).filter(|&i| read[i].is_empty() && next[i].is_some()).collect();
            if !starved.is_empty() {
                let reads = starved
                    .iter()
                    .map(|&i| self.store.query(queries[i].clone().after(next[i].clone().flatten())));
                for (&i, page) in starved.iter().zip(crate::at_once(reads.collect()).await?) {
                    read[i].extend(page.items);
                    next[i] = page.cursor.map(Some);
                }
                continue;
            }
            // The next in the merge's order: the earliest of the partitions' heads, or the latest.
            let heads = (0..queries.len()).filter_map(|i| read[i].front().map(|item| (i, &item.key.sk)));
            let next_head = match order {
                Order::OldestFirst => heads.min_by_key(|(_, sk)| *sk),
                Order::NewestFirst => heads.max_by_key(|(_, sk)| *sk),
            };
            let Some((i, _)) = next_head else {
                return Ok(false);
            };
            if take(read[i].pop_front().expect("the next head is read"))? {
                return Ok(read.iter().any(|items| !items.is_empty()) || next.iter().any(Option::is_some));
            }
        }
    }
}

/// How many items one query of a merge reads from a partition, for `wanted` items spread evenly
/// over `spread` partitions: half as much again as an even share, and four more, so that one
/// round of queries usually suffices (a shard holding more than that is read again); never more
/// than `wanted`, nor than [`MAX_PAGE`].
fn page_size(wanted: usize, spread: usize) -> usize {
    let share = wanted.div_ceil(spread.max(1));
    (share + share / 2 + 4).min(wanted).clamp(1, MAX_PAGE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Map;

    struct Fixture {
        backend: crate::TestBackend,
    }

    /// Now, about: the embedded store hides an event once its time to live is over.
    const T0: i64 = 1_795_000_000_000;

    impl Fixture {
        fn new() -> Self {
            Self { backend: crate::TestBackend::new() }
        }

        fn events(&self) -> Events<'_> {
            Events::new(self.backend.store.as_ref())
        }

        /// Records `name` for `app` at `at` ms after [`T0`]; answers its id.
        async fn record(&self, name: &str, app: Option<&str>, at: i64) -> String {
            let app = app.map(|a| AppId::parse("appId", a).unwrap());
            let event = EventRecord::new(name, app, "server", EpochMillis(T0 + at), Map::new());
            self.events().record(&event).await.unwrap();
            event.event_id
        }

        /// Stores `name` for `app` at `at` ms after [`T0`] as the layout before wrote it, in one
        /// partition for every app; answers its id.
        async fn record_old(&self, name: &str, app_id: &str, at: i64) -> String {
            let old = EventRecord::new(name, app(app_id), "server", EpochMillis(T0 + at), Map::new());
            let sk = sort_key(&old);
            let item = Item::new(ItemKey::new("EVENT", sk.clone()), &old)
                .unwrap()
                .with_index(Index::Gsi1, ItemKey::new(format!("EVENTAPP#{app_id}"), sk.clone()))
                .with_index(Index::Gsi2, ItemKey::new(format!("EVENTNAME#{name}"), sk));
            self.backend.store.put(item, Condition::Absent).await.unwrap();
            old.event_id
        }

        /// Every event `filter` lists, `limit` a page, cursor after cursor: their ids and how
        /// many pages it took.
        async fn all(&self, filter: &EventFilter, limit: usize) -> (Vec<String>, usize) {
            let (mut ids, mut pages, mut cursor) = (Vec::new(), 0, None);
            loop {
                let (events, next) = self.events().list(filter, limit, cursor).await.unwrap();
                ids.extend(events.into_iter().map(|e| e.event_id));
                pages += 1;
                assert!(pages <= 100, "the cursor moves on");
                match next.map(|next| filter.cursor(&next.encode()).expect("its own cursor is taken")) {
                    Some(next) => cursor = Some(next),
                    None => return (ids, pages),
                }
            }
        }
    }

    fn app(id: &str) -> Option<AppId> {
        Some(AppId::parse("appId", id).unwrap())
    }

    #[tokio::test]
    async fn each_apps_events_are_stored_in_its_own_partition() {
        let f = Fixture::new();
        let a = f.record("WORKSTATION_ENROLL", Some("a"), 1).await;
        let b = f.record("WORKSTATION_ENROLL", Some("b"), 2).await;
        let none = f.record("WORKSTATION_ENROLL", None, 3).await;
        let store = f.backend.store.as_ref();
        let ids = |pk: &'static str| async move {
            let page = store.query(Query::table(pk)).await.unwrap();
            page.items.iter().map(|i| i.data::<EventRecord>().unwrap().event_id).collect::<Vec<_>>()
        };
        assert_eq!(ids("EVENT#a").await, [a]);
        assert_eq!(ids("EVENT#b").await, [b]);
        assert_eq!(ids("EVENT#-").await, [none]);
        assert!(ids("EVENT").await.is_empty(), "nothing in the one partition all apps shared");
    }

    #[test]
    fn the_index_shards_share_the_events_evenly() {
        let mut counts = [0u32; SHARDS as usize];
        for i in 0..8000 {
            counts[shard(&format!("{:08x}-0000-4000-8000-{i:012x}", i * 7919)) as usize] += 1;
        }
        assert!(counts.iter().all(|&n| (800..=1200).contains(&n)), "{counts:?}");
    }

    #[tokio::test]
    async fn every_listing_pages_through_all_its_partitions_in_time_order() {
        let f = Fixture::new();
        let names = ["WORKSTATION_ENROLL", "OOB_WORKSTATION_REG"];
        let apps = [Some("a"), Some("b"), Some("c"), None];
        let mut stored = Vec::new();
        for i in 0..60 {
            let (name, app) = (names[i % 2], apps[i % 4]);
            // Two events share each millisecond, so the order within one is the id's.
            stored.push((i as i64 / 2, f.record(name, app, i as i64 / 2).await, name, app));
        }
        let expected = |keep: &dyn Fn(&str, Option<&str>) -> bool| {
            let mut kept: Vec<_> = stored.iter().filter(|(_, _, n, a)| keep(n, *a)).collect();
            kept.sort_by_key(|(at, id, _, _)| format!("{at:013}#{id}"));
            kept.into_iter().map(|(_, id, _, _)| id.clone()).collect::<Vec<_>>()
        };
        let everything = EventFilter::default();
        let (ids, pages) = f.all(&everything, 7).await;
        assert_eq!(ids, expected(&|_, _| true));
        assert_eq!(pages, 9, "60 events, 7 a page");
        let by_name = EventFilter { name: Some(names[1].into()), ..Default::default() };
        assert_eq!(f.all(&by_name, 4).await.0, expected(&|n, _| n == names[1]));
        let by_app = EventFilter { app_id: app("b"), ..Default::default() };
        assert_eq!(f.all(&by_app, 5).await.0, expected(&|_, a| a == Some("b")));
        let both = EventFilter { app_id: app("a"), name: Some(names[0].into()), ..Default::default() };
        assert_eq!(f.all(&both, 3).await.0, expected(&|n, a| a == Some("a") && n == names[0]));
        let window = EventFilter {
            from: Some(EpochMillis(T0 + 10)),
            to: Some(EpochMillis(T0 + 19)),
            ..Default::default()
        };
        let (ids, _) = f.all(&window, 6).await;
        assert_eq!(ids, expected(&|_, _| true)[20..40], "from and to are inclusive");
    }

    /// The shards share a listing's events evenly, so a page reads about its share of each:
    /// about its size in all, where reading its size from every shard would read nine times it.
    #[tokio::test]
    async fn a_page_across_apps_reads_about_its_size_not_its_size_from_every_shard() {
        let f = Fixture::new();
        let mut stored = Vec::new();
        for at in 0..400 {
            let app = ["a", "b"][at % 2];
            stored.push((at, f.record("WORKSTATION_ENROLL", Some(app), at as i64).await));
        }
        let limit = 20;
        for filter in [
            EventFilter::default(),
            EventFilter { name: Some("WORKSTATION_ENROLL".into()), ..Default::default() },
        ] {
            let (backend, trips) = rp_ports::trips::recorded(&f.backend, std::time::Duration::ZERO);
            let events = Events::new(backend.store.as_ref());
            let (page, next) = events.list(&filter, limit, None).await.unwrap();
            let ids: Vec<_> = page.into_iter().map(|e| e.event_id).collect();
            assert_eq!(ids, stored[..limit].iter().map(|(_, id)| id.clone()).collect::<Vec<_>>());
            let tally = trips.take();
            assert!(tally.items_read <= 5 * limit, "{} items read: {tally}", tally.items_read);
            let (page, _) = events.list(&filter, limit, next).await.unwrap();
            assert_eq!(page.first().map(|e| &e.event_id), Some(&stored[limit].1), "the next page goes on");
        }
    }

    #[tokio::test]
    async fn the_first_events_are_merged_reading_each_partition_only_as_far_as_needed() {
        let f = Fixture::new();
        let mut stored = Vec::new();
        for at in 0..60 {
            let (name, app) = match at % 6 {
                0 => ("OOB_WORKSTATION_REG", "a"),
                3 => ("WORKSTATION_ENROLL", "a"),
                _ => ("WORKSTATION_ENROLL", "b"),
            };
            stored.push((at, f.record(name, Some(app), at).await, name, app));
        }
        let events = |filter: EventFilter, cap: usize| {
            let f = &f;
            async move {
                let (backend, trips) = rp_ports::trips::recorded(&f.backend, std::time::Duration::ZERO);
                let (events, more) = Events::new(backend.store.as_ref())
                    .first(&filter, cap, Order::OldestFirst)
                    .await
                    .unwrap();
                (events.into_iter().map(|e| e.event_id).collect::<Vec<_>>(), more, trips.take())
            }
        };
        let ids = |keep: &dyn Fn(&str, &str) -> bool| {
            stored
                .iter()
                .filter(|(_, _, n, a)| keep(n, a))
                .map(|(_, id, _, _)| id.clone())
                .collect::<Vec<_>>()
        };
        let (first, more, tally) = events(EventFilter::default(), 25).await;
        assert_eq!(first, ids(&|_, _| true)[..25]);
        assert!(more);
        // One query of each index shard and of the old partition at once: ten or so events a
        // shard, where paging 25 at a time would read every shard again for each of three
        // pages. A shard that happens to hold more than its page (10) among the first 25 is
        // read once more.
        assert_eq!(tally.waves_of("store.query EVENTS").iter().filter(|w| **w == 1).count(), SHARDS as usize);
        assert_eq!(tally.waves_of("store.query EVENT"), [1], "{tally}");
        assert!(tally.waves <= 2, "{tally}");
        let (all, more, _) = events(EventFilter::default(), 100).await;
        assert_eq!((all, more), (ids(&|_, _| true), false));
        let name = EventFilter { name: Some("WORKSTATION_ENROLL".into()), ..Default::default() };
        let (first, more, _) = events(name, 3).await;
        assert_eq!((first, more), (ids(&|n, _| n == "WORKSTATION_ENROLL")[..3].to_vec(), true));
        // Half of what the app's partition holds is the name asked for: a page runs dry before
        // the cap is reached, and the partition is read again.
        let both = || EventFilter {
            app_id: app("a"),
            name: Some("OOB_WORKSTATION_REG".into()),
            ..Default::default()
        };
        let (first, more, tally) = events(both(), 5).await;
        assert_eq!((first, more), (ids(&|n, a| a == "a" && n == "OOB_WORKSTATION_REG")[..5].to_vec(), true));
        assert!(tally.waves > 1, "{tally}");
        let (all, more, _) = events(both(), 20).await;
        assert_eq!((all, more), (ids(&|n, a| a == "a" && n == "OOB_WORKSTATION_REG"), false));
    }

    #[tokio::test]
    async fn the_newest_events_are_merged_from_the_top_down_to_the_start_of_the_range() {
        let f = Fixture::new();
        let mut ours = Vec::new();
        for at in 0..40 {
            let (name, app) =
                if at % 4 == 0 { ("OOB_WORKSTATION_REG", "a") } else { ("WORKSTATION_ENROLL", "a") };
            let id = f.record(name, Some(app), 100 + at).await;
            f.record(name, Some("b"), 100 + at).await;
            ours.push((100 + at, id, name));
        }
        // Older events of the app, in the layout before: still merged in, in time order.
        let old = f.record_old("OOB_WORKSTATION_REG", "a", 50).await;
        ours.insert(0, (50, old, "OOB_WORKSTATION_REG"));
        let newest = |filter: EventFilter, cap: usize| {
            let f = &f;
            async move {
                let (events, more) = f.events().first(&filter, cap, Order::NewestFirst).await.unwrap();
                (events.into_iter().map(|e| e.event_id).collect::<Vec<_>>(), more)
            }
        };
        let down = |keep: &dyn Fn(i64, &str) -> bool| {
            ours.iter()
                .rev()
                .filter(|(at, _, n)| keep(*at, n))
                .map(|(_, id, _)| id.clone())
                .collect::<Vec<_>>()
        };
        let of_a = || EventFilter { app_id: app("a"), ..Default::default() };
        assert_eq!(newest(of_a(), 5).await, (down(&|_, _| true)[..5].to_vec(), true));
        assert_eq!(newest(of_a(), 100).await, (down(&|_, _| true), false));
        let named = EventFilter { name: Some("OOB_WORKSTATION_REG".into()), ..of_a() };
        assert_eq!(
            newest(named.clone(), 3).await,
            (down(&|_, n| n == "OOB_WORKSTATION_REG")[..3].to_vec(), true)
        );
        assert_eq!(newest(named.clone(), 100).await.0, down(&|_, n| n == "OOB_WORKSTATION_REG"));
        // Down to the range's start and no further: the old event is before it.
        let since = EventFilter { from: Some(EpochMillis(T0 + 120)), ..named };
        assert_eq!(newest(since, 100).await, (down(&|at, n| at >= 120 && n == "OOB_WORKSTATION_REG"), false));
    }

    #[tokio::test]
    async fn a_partition_read_dry_is_read_again_before_the_merge_goes_on() {
        let f = Fixture::new();
        let mut kept = Vec::new();
        for at in 0..20 {
            let name = if at % 2 == 0 { "OOB_WORKSTATION_REG" } else { "WORKSTATION_ENROLL" };
            let id = f.record(name, Some("a"), at).await;
            if at % 2 == 0 && at < 16 {
                kept.push(id);
            }
        }
        f.record_old("OOB_WORKSTATION_REG", "a", 15).await;
        // The app's first page (8 events, half of them the name) runs dry while the old
        // partition still holds a later one: the next page comes first.
        let filter =
            EventFilter { app_id: app("a"), name: Some("OOB_WORKSTATION_REG".into()), ..Default::default() };
        let (events, more) = f.events().first(&filter, 8, Order::OldestFirst).await.unwrap();
        assert_eq!(events.into_iter().map(|e| e.event_id).collect::<Vec<_>>(), kept);
        assert!(more);
    }

    #[tokio::test]
    async fn events_stored_in_the_old_shared_partition_are_still_listed() {
        let f = Fixture::new();
        let first = f.record("WORKSTATION_ENROLL", Some("a"), 1).await;
        let old = f.record_old("WORKSTATION_ENROLL", "a", 2).await;
        let last = f.record("WORKSTATION_ENROLL", Some("a"), 3).await;
        let expected = [first, old, last];
        for filter in [
            EventFilter::default(),
            EventFilter { app_id: app("a"), ..Default::default() },
            EventFilter { name: Some("WORKSTATION_ENROLL".into()), ..Default::default() },
            EventFilter { app_id: app("a"), name: Some("WORKSTATION_ENROLL".into()), ..Default::default() },
        ] {
            assert_eq!(f.all(&filter, 1).await.0, expected, "{filter:?}");
        }
    }

    #[tokio::test]
    async fn a_cursor_is_taken_only_by_the_listing_that_gave_it_out() {
        let f = Fixture::new();
        for at in 0..3 {
            f.record("WORKSTATION_ENROLL", Some("a"), at).await;
        }
        let by_app = EventFilter { app_id: app("a"), ..Default::default() };
        let (_, next) = f.events().list(&by_app, 1, None).await.unwrap();
        let token = next.expect("more to read").encode();
        assert!(by_app.cursor(&token).is_some());
        for other in [
            EventFilter { app_id: app("b"), ..Default::default() },
            EventFilter::default(),
            EventFilter { app_id: app("a"), name: Some("WORKSTATION_ENROLL".into()), ..Default::default() },
            EventFilter { app_id: app("a"), from: Some(EpochMillis(T0)), ..Default::default() },
        ] {
            assert!(other.cursor(&token).is_none(), "{other:?}");
        }
        assert!(by_app.cursor("not-a-cursor").is_none());
        let forged = |after: String| EventCursor { after, scope: by_app.scope() }.encode();
        assert!(by_app.cursor(&forged(format!("{:013}#{}", T0, "e".repeat(64)))).is_some());
        for after in
            [String::new(), "123#id".into(), format!("{:013}#{}", T0, "e".repeat(65)), format!("{:013}x", T0)]
        {
            assert!(by_app.cursor(&forged(after.clone())).is_none(), "{after}");
        }
    }
}
