//! Certificate requests and issued certificates: persistence only (the lifecycle is
//! [`rp_domain::certificates`]). Layout:
//!
//! | pk | sk | item |
//! |---|---|---|
//! | `CERTREQ#<requestId>` | `REQUEST` | a certificate request; while PENDING also in `gsi1` under its app's shard `CERTQ#PENDING#<appId>`, by creation time |
//! | `CERTQ#READY` | `<appId>` | the app has (or recently had) PENDING requests: written with every request that becomes PENDING, deleted by a poll that finds the shard empty |
//! | `CERTQ#ROUND` | `LAST` | the last app the previous poll served: the next poll starts after it (round robin) |
//! | `CERTQ#OPEN#<appId>` | `COUNT` | the app's open (PENDING or LEASED) login-certificate requests: a counter raised under the cap in the transaction that queues one, lowered in the one that settles it |
//! | `CERTQ#DEAD#<app>` | `COUNT` | the app's requests that ran out of attempts (DEAD): raised in the transaction that makes one so |
//! | `DEVCERT#<app>#<deviceId>` | `CERT#<serial>` | an issued (device-encrypted) login certificate; `gsi2` `SERIAL#<serial>` finds it by serial; until it is revoked or replaced also in `gsi1` under its app's renewal partition `CERTRENEW#<appId>`, by when the renewal sweep is to look at it next |
//! | `CERTRENEW#ROUND` | `LAST` | where the previous renewal sweep ended: the last app it took in turn (the next sweep goes on after it: round robin over the apps) and the apps it left due certificates in (the next sweep looks at them again first) |
//! | `SERIAL#<serial>` | `SERIAL` | the serial taken, pointing at its certificate: written with an absent-condition in the issuing transaction, so a serial is issued once |
//!
//! A poll reads at most `batch` ready markers starting after the round-robin pointer, then each
//! of those apps' shards with a `Limit` of its fair share: O(batch) items whatever the depth
//! of any one app's queue, and never a scan. Its renewal sweep likewise reads a few apps (those
//! it left unfinished, then the next in turn), then each one's due certificates with a `Limit`.
//!
//! Every write is conditional on the version the request was read at, so of two callers that
//! decided on the same state only one persists; the other reloads and decides again.

use super::devices::Devices;
use super::events::{self};
use rp_domain::apps::AppId;
use rp_domain::certificates::{fair_share, first_round_reads, CertRequest, Expiry, IssuedCert, RequestState};
use rp_domain::events::EventRecord;
use rp_domain::time::EpochMillis;
use rp_ports::{
    Condition, Cursor, Increment, Index, Item, ItemKey, ItemStore, Listed, Query, SortKey, StoreError,
    WriteOp,
};
use serde::{Deserialize, Serialize};

pub const DEFAULT_BATCH: usize = 50;
/// The partition of the ready markers, one per app with pending requests.
pub const READY_APPS: &str = "CERTQ#READY";
/// The renewal index's partition of one app: its certificates that may still need renewing.
fn renewals(app: &str) -> String {
    format!("CERTRENEW#{app}")
}
/// The renewal index's one partition for every app, before it was kept per app: still swept,
/// so that a certificate indexed there is renewed (its next write moves it to its app's).
const RENEWALS_OF_EVERY_APP: &str = "CERTRENEW";
/// How long a ready marker outlives the last request that made its app ready, however empty
/// its shard looks: DynamoDB's indexes lag their table by moments, and a marker deleted while
/// its newest request was not yet in the shard would strand that request.
pub const READY_GRACE_SECS: i64 = 60;
/// Pages of ready markers one poll reads at most when every app on a page is found empty.
const MARKER_PAGES: usize = 4;

fn request_key(request_id: &str) -> ItemKey {
    ItemKey::new(format!("CERTREQ#{request_id}"), "REQUEST")
}

/// The app's shard of the pending index.
fn shard(app: &AppId) -> String {
    format!("CERTQ#PENDING#{app}")
}

fn ready_key(app: &AppId) -> ItemKey {
    ItemKey::new(READY_APPS, app.as_str())
}

fn round_key() -> ItemKey {
    ItemKey::new("CERTQ#ROUND", "LAST")
}

fn renewal_round_key() -> ItemKey {
    ItemKey::new("CERTRENEW#ROUND", "LAST")
}

fn open_key(app: &AppId) -> ItemKey {
    ItemKey::new(format!("CERTQ#OPEN#{app}"), "COUNT")
}

fn dead_key(app: &AppId) -> ItemKey {
    ItemKey::new(format!("CERTQ#DEAD#{app}"), "COUNT")
}

/// An app's certificate queue as an operator sees it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueCounts {
    /// PENDING login-certificate requests (of the first `cap` pending requests read).
    pub pending_logins: usize,
    /// PENDING revocation requests (likewise).
    pub pending_revocations: usize,
    /// More requests are pending than were read.
    pub more: bool,
    /// Open (PENDING or LEASED) login-certificate requests.
    pub open: i64,
    /// Requests that ran out of attempts.
    pub dead: i64,
}

impl QueueCounts {
    /// LEASED login-certificate requests: the open ones not pending.
    pub fn leased_logins(&self) -> i64 {
        (self.open - self.pending_logins as i64).max(0)
    }
}

/// An app with pending requests, as of `enqueued_at`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ReadyMarker {
    app_id: AppId,
    enqueued_at: EpochMillis,
}

/// Where the previous poll stopped.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RoundPointer {
    app_id: String,
}

/// A request as an item; a PENDING one is also in its app's shard of the pending index,
/// oldest first.
pub fn request_item(request: &CertRequest) -> Result<Item, StoreError> {
    let item = Item::new(request_key(&request.request_id), request)?;
    Ok(match request.state {
        RequestState::Pending => item.with_index(
            Index::Gsi1,
            ItemKey::new(
                shard(&request.app_id),
                format!("{:013}#{}", request.created_at.as_millis(), request.request_id),
            ),
        ),
        _ => item,
    })
}

/// The marker that puts the request's app in the next polls' round, written with every
/// request that becomes PENDING. Unconditional: a marker that exists only gets a newer time,
/// and the new version makes a poll's delete of it (conditional on the version it read) fail.
fn ready_op(request: &CertRequest, now: EpochMillis) -> Result<WriteOp, StoreError> {
    let marker = ReadyMarker { app_id: request.app_id.clone(), enqueued_at: now };
    Ok(WriteOp::Put { item: Item::new(ready_key(&request.app_id), &marker)?, condition: Condition::Any })
}

/// The writes that queue a new request, to join the caller's transaction: the request, its
/// app's ready marker and, for a request that counts against the cap, one more open request,
/// refused (the transaction fails with a conflict) past `cap`.
pub fn enqueue_ops(request: &CertRequest, cap: u32, now: EpochMillis) -> Result<Vec<WriteOp>, StoreError> {
    let mut ops = vec![
        WriteOp::Put { item: request_item(request)?, condition: Condition::Absent },
        ready_op(request, now)?,
    ];
    if request.counts_against_cap() {
        ops.push(WriteOp::Increment(Increment {
            key: open_key(&request.app_id),
            by: 1,
            limit: Some(i64::from(cap)),
            expires_at: None,
        }));
    }
    Ok(ops)
}

/// An issued certificate as an item, findable by serial and, until it is revoked or replaced,
/// in the renewal index by when the sweep is to look at it next.
pub fn cert_item(cert: &IssuedCert) -> Result<Item, StoreError> {
    let key = cert_key(&cert.app_id, &cert.device_id, &cert.cert_serial_number);
    let item = Item::new(key, cert)?
        .with_index(Index::Gsi2, ItemKey::new(format!("SERIAL#{}", cert.cert_serial_number), "CERT"));
    Ok(match cert.renewal_check() {
        Some(at) => {
            item.with_index(Index::Gsi1, renewal_index_key(&cert.app_id, at, &cert.cert_serial_number))
        }
        None => item,
    })
}

/// Where a certificate waits in the renewal index: in its app's partition, by the time its
/// sweep is due, then serial.
fn renewal_index_key(app: &AppId, at: EpochMillis, serial: &str) -> ItemKey {
    ItemKey::new(renewals(app.as_str()), format!("{:013}#{serial}", at.as_millis().max(0)))
}

/// The writes of a queued revocation, to join another transaction: the certificate (read at
/// `version`) pointing at the new request, and the request.
pub fn revocation_ops(
    marked: &IssuedCert,
    version: u64,
    request: &CertRequest,
) -> Result<Vec<WriteOp>, StoreError> {
    let mut ops = vec![WriteOp::Put { item: cert_item(marked)?, condition: Condition::Version(version) }];
    // Revocations never count against the cap.
    ops.extend(enqueue_ops(request, u32::MAX, request.created_at)?);
    Ok(ops)
}

/// Where a certificate is filed: under its device, by serial.
fn cert_key(app: &AppId, device_id: &str, serial: &str) -> ItemKey {
    ItemKey::new(format!("DEVCERT#{app}#{device_id}"), format!("CERT#{serial}"))
}

/// The app a certificate's key files it under (see [`cert_key`]).
fn app_of_cert_key(key: &ItemKey) -> Option<AppId> {
    let app = key.pk.strip_prefix("DEVCERT#")?.split('#').next()?;
    AppId::parse("appId", app).ok()
}

fn serial_key(serial: &str) -> ItemKey {
    ItemKey::new(format!("SERIAL#{serial}"), "SERIAL")
}

/// A new certificate's items: the certificate, and its serial's owner item (which takes the
/// serial, and finds the certificate by it in one read).
pub fn issued_items(cert: &IssuedCert) -> Result<Vec<Item>, StoreError> {
    let item = cert_item(cert)?;
    let owner = SerialOwner { pk: item.key.pk.clone(), sk: item.key.sk.clone() };
    Ok(vec![item, Item::new(serial_key(&cert.cert_serial_number), &owner)?])
}

/// A taken serial and where its certificate is.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct SerialOwner {
    pk: String,
    sk: String,
}

/// What a settled result writes besides the request and its event.
#[derive(Debug, Clone)]
pub enum Effect {
    None,
    /// A new certificate for the device.
    Issue(IssuedCert),
    /// The revoked certificate, read at this version.
    Revoke(IssuedCert, u64),
}

/// Where a poll's round starts: after the app the previous round served last (the round-robin
/// pointer), or at the first app. [`Certificates::round_start`] reads it, so that a poll can
/// read it beside its caller's token.
#[derive(Debug, Clone, Default)]
pub struct RoundStart {
    after: Option<String>,
}

/// Where a renewal sweep starts: the apps the previous sweep left due certificates in, then
/// the apps in turn after the last one it took, or from the first app.
/// [`Certificates::renewal_start`] reads it, so that a poll can read it beside its caller's
/// token.
#[derive(Debug, Clone, Default)]
pub struct RenewalStart {
    after: Option<String>,
    unfinished: Vec<String>,
}

/// What a renewal sweep leaves to write: where its turn over the apps ended, and the apps it
/// left due certificates in. [`Certificates::end_sweep`] writes it.
#[derive(Debug, Default)]
pub struct SweepEnd {
    pointer: Option<SweepPointer>,
}

/// Where the previous renewal sweep stopped.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SweepPointer {
    app_id: String,
    #[serde(default)]
    unfinished: Vec<String>,
}

/// What a poll's round leaves to write once its requests are found: the apps it served (the
/// pointer moves past the last) and, for each, whether its shard may hold more (if not, its
/// ready marker goes). [`Certificates::end_round`] writes it.
#[derive(Debug, Default)]
pub struct RoundEnd {
    apps: Vec<(ReadyMarker, u64)>,
    more: Vec<Option<Cursor>>,
}

#[derive(Clone, Copy)]
pub struct Certificates<'a> {
    store: &'a dyn ItemStore,
}

impl<'a> Certificates<'a> {
    pub fn new(store: &'a dyn ItemStore) -> Self {
        Self { store }
    }

    /// Up to `batch` pending requests, shared fairly between the apps that have some, with the
    /// versions they were read at; each app's come oldest first. The apps are taken round robin
    /// from the ready markers, starting after the app the previous poll served last; each gets
    /// an equal share of the batch, and what an app with fewer leaves goes to the others: from
    /// what the first round read beyond their shares (`first_round_reads`), and only if that
    /// falls short, from a second round. Markers of apps found empty (past
    /// [`READY_GRACE_SECS`]) are deleted. The index may lag a lease by moments;
    /// [`persist_leases`](Self::persist_leases)'s condition settles that.
    ///
    /// With requests found, the round's end (the pointer's move, the markers' deletes) is left to
    /// the caller, [`end_round`](Self::end_round), so that it can go beside the poll's other
    /// writes; it depends on nothing they do.
    pub async fn pending(
        &self,
        batch: usize,
        now: EpochMillis,
        mut start: RoundStart,
    ) -> Result<(Vec<(CertRequest, u64)>, RoundEnd), StoreError> {
        // A page of markers can be all apps drained within their grace period (a small batch,
        // many apps): then the next page is tried, a few at most, so a poll stays O(batch).
        for _ in 0..MARKER_PAGES {
            let apps = self.ready_apps(batch, &start).await?;
            if apps.is_empty() {
                return Ok((Vec::new(), RoundEnd::default()));
            }
            let full_page = apps.len() == batch;
            let (pending, end) = self.pending_of(apps, batch).await?;
            if !pending.is_empty() {
                return Ok((pending, end));
            }
            // The next page starts after this one's last app, where this round moves the pointer.
            start =
                RoundStart { after: end.apps.last().map(|(marker, _)| marker.app_id.as_str().to_owned()) };
            self.end_round(end, now).await?;
            if !full_page {
                break;
            }
        }
        Ok((Vec::new(), RoundEnd::default()))
    }

    /// One round over the ready apps `apps`: their shares of `batch`, and the round's end.
    async fn pending_of(
        &self,
        apps: Vec<(ReadyMarker, u64)>,
        batch: usize,
    ) -> Result<(Vec<(CertRequest, u64)>, RoundEnd), StoreError> {
        // Round 1: an equal share each, read with room to spare (`first_round_reads`), so that
        // an app that comes up short rarely costs the others a second round.
        let reads = first_round_reads(batch, apps.len());
        let first = futures_util::future::join_all(apps.iter().map(|(marker, _)| {
            self.store.query(Query::index(Index::Gsi1, shard(&marker.app_id)).limit(reads))
        }))
        .await;
        let mut found: Vec<Vec<Item>> = Vec::with_capacity(apps.len());
        let mut more: Vec<Option<Cursor>> = Vec::with_capacity(apps.len());
        for page in first {
            let page = page?;
            found.push(page.items);
            more.push(page.cursor);
        }
        // Round 2: what is left of the batch, shared between the apps that may have more.
        let left = batch.saturating_sub(found.iter().map(Vec::len).sum());
        let hungry: Vec<usize> = (0..apps.len()).filter(|&i| more[i].is_some()).collect();
        if left > 0 && !hungry.is_empty() {
            let share = fair_share(left, hungry.len());
            let second = futures_util::future::join_all(hungry.iter().map(|&i| {
                let query = Query::index(Index::Gsi1, shard(&apps[i].0.app_id)).limit(share);
                self.store.query(query.after(more[i].clone()))
            }))
            .await;
            for (&i, page) in hungry.iter().zip(second) {
                found[i].extend(page?.items);
            }
        }
        // The batch, interleaved app by app so that a cut keeps it fair.
        let mut pending = Vec::with_capacity(batch);
        for (_, item) in super::interleaved(&found) {
            let request: CertRequest = item.data()?;
            if request.state == RequestState::Pending && pending.len() < batch {
                pending.push((request, item.version));
            }
        }
        Ok((pending, RoundEnd { apps, more }))
    }

    /// Where the next round starts: the pointer the last round left.
    pub async fn round_start(&self) -> Result<RoundStart, StoreError> {
        let pointer = self.store.get(&round_key()).await?.map(|item| item.data::<RoundPointer>());
        Ok(RoundStart { after: pointer.transpose()?.map(|p| p.app_id) })
    }

    /// Up to `batch` ready markers (with their versions), starting after the round-robin pointer
    /// and wrapping around.
    async fn ready_apps(
        &self,
        batch: usize,
        start: &RoundStart,
    ) -> Result<Vec<(ReadyMarker, u64)>, StoreError> {
        let items = super::ring(self.store, READY_APPS, start.after.as_deref(), batch).await?;
        items.iter().map(super::versioned).collect()
    }

    /// After a poll: the pointer moves to the last app served, and the markers of apps whose
    /// shard came back exhausted go, unless a request made them ready within the grace period
    /// (or since they were read: the delete is conditional on the version).
    /// The deletes and the pointer's move touch different items: they go at once.
    pub async fn end_round(&self, end: RoundEnd, now: EpochMillis) -> Result<(), StoreError> {
        let exhausted = end.apps.iter().zip(&end.more).filter(|((marker, _), more)| {
            more.is_none() && marker.enqueued_at.plus_secs(READY_GRACE_SECS) < now
        });
        let deletes = exhausted.map(|((marker, version), _)| async move {
            match self.store.delete(&ready_key(&marker.app_id), Condition::Version(*version)).await {
                Ok(()) | Err(StoreError::Conflict) => Ok(()),
                Err(e) => Err(e),
            }
        });
        let pointer = async {
            let Some((last, _)) = end.apps.last() else { return Ok(()) };
            let pointer = RoundPointer { app_id: last.app_id.as_str().to_owned() };
            self.store.put(Item::new(round_key(), &pointer)?, Condition::Any).await.map(drop)
        };
        let (deleted, moved) = tokio::join!(super::at_once(deletes.collect()), pointer);
        deleted.and(moved)
    }

    /// The app's open (PENDING or LEASED) login-certificate requests.
    pub async fn open_requests(&self, app: &AppId) -> Result<i64, StoreError> {
        self.counter(&open_key(app)).await
    }

    async fn counter(&self, key: &ItemKey) -> Result<i64, StoreError> {
        let item = self.store.get(key).await?;
        Ok(item.and_then(|i| i.counter()).unwrap_or(0))
    }

    /// The app's queue: its pending requests by kind (the first `cap` read), its open
    /// login-certificate requests and its dead ones; three reads at once.
    pub async fn queue_counts(&self, app: &AppId, cap: usize) -> Result<QueueCounts, StoreError> {
        let pending = self.store.query(Query::index(Index::Gsi1, shard(app)).limit(cap));
        let (open, dead) = (open_key(app), dead_key(app));
        let (pending, open, dead) = tokio::join!(pending, self.counter(&open), self.counter(&dead));
        let page = pending?;
        let mut counts =
            QueueCounts { more: page.cursor.is_some(), open: open?, dead: dead?, ..Default::default() };
        for item in &page.items {
            let request: CertRequest = item.data()?;
            match (request.state, request.counts_against_cap()) {
                (RequestState::Pending, true) => counts.pending_logins += 1,
                (RequestState::Pending, false) => counts.pending_revocations += 1,
                _ => {}
            }
        }
        Ok(counts)
    }

    /// The transaction step that holds only while the request `request_id` stands at `version`:
    /// an unpairing that found its pairing's certificate not yet issued carries it, so that a
    /// result stored meanwhile makes the unpairing read again (and revoke what was issued).
    pub fn unchanged(request_id: &str, version: u64) -> WriteOp {
        WriteOp::Check { key: request_key(request_id), condition: Condition::Version(version) }
    }

    pub async fn request(&self, request_id: &str) -> Result<Option<(CertRequest, u64)>, StoreError> {
        super::get_versioned(self.store, &request_key(request_id)).await
    }

    /// Writes the leases of one poll, each decided on the request read at its version, at once
    /// (transactions of up to 100 on DynamoDB, one write transaction embedded), each on its own
    /// condition; for each, whether it was taken (`false`: another poll leased it first).
    pub async fn persist_leases(&self, leases: &[(CertRequest, u64)]) -> Result<Vec<bool>, StoreError> {
        let puts = leases
            .iter()
            .map(|(leased, version)| Ok((request_item(leased)?, Condition::Version(*version))))
            .collect::<Result<Vec<_>, StoreError>>()?;
        self.store
            .put_each(puts)
            .await
            .into_iter()
            .map(|outcome| match outcome {
                Ok(_) => Ok(true),
                Err(StoreError::Conflict) => Ok(false),
                Err(e) => Err(e),
            })
            .collect()
    }

    /// Writes an ended lease (with the death event, in the same transaction).
    pub async fn persist_expiry(
        &self,
        expiry: &Expiry,
        version: u64,
        now: EpochMillis,
    ) -> Result<(), StoreError> {
        match expiry {
            Expiry::AlreadyDead | Expiry::Ignored => Ok(()),
            Expiry::Requeued(request) => {
                self.store
                    .transact(vec![
                        WriteOp::Put { item: request_item(request)?, condition: Condition::Version(version) },
                        ready_op(request, now)?,
                    ])
                    .await
            }
            Expiry::Dead(request, event) => self.write_with_event(request, version, Vec::new(), event).await,
        }
    }

    /// Stores an accepted result: the settled request, what it produced, and its event, all
    /// conditional on the version the request was read at.
    pub async fn settle(
        &self,
        request: &CertRequest,
        version: u64,
        effect: Effect,
        event: &EventRecord,
    ) -> Result<(), StoreError> {
        let produced = match effect {
            Effect::None => Vec::new(),
            Effect::Issue(cert) => issued_items(&cert)?
                .into_iter()
                .map(|item| WriteOp::Put { item, condition: Condition::Absent })
                .collect(),
            Effect::Revoke(cert, cert_version) => {
                vec![WriteOp::Put { item: cert_item(&cert)?, condition: Condition::Version(cert_version) }]
            }
        };
        self.write_with_event(request, version, produced, event).await
    }

    async fn write_with_event(
        &self,
        request: &CertRequest,
        version: u64,
        mut ops: Vec<WriteOp>,
        event: &EventRecord,
    ) -> Result<(), StoreError> {
        ops.push(WriteOp::Put { item: request_item(request)?, condition: Condition::Version(version) });
        if request.is_closed() && request.counts_against_cap() {
            let key = open_key(&request.app_id);
            ops.push(WriteOp::Increment(Increment { key, by: -1, limit: None, expires_at: None }));
        }
        if request.state == RequestState::Dead {
            let key = dead_key(&request.app_id);
            ops.push(WriteOp::Increment(Increment { key, by: 1, limit: None, expires_at: None }));
        }
        events::transact_with(self.store, ops, event).await
    }

    /// The certificate with this serial: found through its serial item (a consistent read), or
    /// through the index for certificates issued before serial items existed.
    pub async fn by_serial(&self, serial: &str) -> Result<Option<(IssuedCert, u64)>, StoreError> {
        let found = self.by_serial_beside(serial, |_| std::future::ready(())).await?;
        Ok(found.map(|(cert, version, ())| (cert, version)))
    }

    /// [`Self::by_serial`], with `beside` run for the certificate's app beside the read of the
    /// certificate itself: where it is filed names the app, so what the caller needs of that app
    /// costs no wait of its own.
    pub async fn by_serial_beside<T, F>(
        &self,
        serial: &str,
        beside: impl FnOnce(AppId) -> F,
    ) -> Result<Option<(IssuedCert, u64, T)>, StoreError>
    where
        F: std::future::Future<Output = T>,
    {
        let cert_key = match self.store.get(&serial_key(serial)).await? {
            Some(owner) => {
                let owner: SerialOwner = owner.data()?;
                ItemKey::new(owner.pk, owner.sk)
            }
            None => {
                let page =
                    self.store.query(Query::index(Index::Gsi2, format!("SERIAL#{serial}")).limit(1)).await?;
                let Some(found) = page.items.first() else { return Ok(None) };
                found.key.clone()
            }
        };
        // Read the item itself: the index may lag.
        let (item, early) = match app_of_cert_key(&cert_key) {
            Some(app) => {
                let (item, done) = tokio::join!(self.store.get(&cert_key), beside(app));
                (item?, Ok(done))
            }
            None => (self.store.get(&cert_key).await?, Err(beside)),
        };
        let Some(item) = item else { return Ok(None) };
        let cert: IssuedCert = item.data()?;
        let done = match early {
            Ok(done) => done,
            Err(beside) => beside(cert.app_id.clone()).await,
        };
        Ok(Some((cert, item.version, done)))
    }

    /// The certificate with this serial among `device_id`'s (of `app`): one read, where the
    /// serial, the app and the device are known (a certificate read before, or the one issued
    /// for a login request, which is filed under its request's app and device).
    pub async fn issued(
        &self,
        app: &AppId,
        device_id: &str,
        serial: &str,
    ) -> Result<Option<(IssuedCert, u64)>, StoreError> {
        super::get_versioned(self.store, &cert_key(app, device_id, serial)).await
    }

    /// The query over a device's certificates (for checking a client's cursor).
    pub fn device_query(app: &AppId, device_id: &str) -> Query {
        Query::table(format!("DEVCERT#{app}#{device_id}"))
    }

    /// A page of the device's certificates, in serial order.
    pub async fn of_device(
        &self,
        app: &AppId,
        device_id: &str,
        limit: usize,
        cursor: Option<Cursor>,
    ) -> Listed<IssuedCert> {
        let page = self.store.query(Self::device_query(app, device_id).limit(limit).after(cursor)).await?;
        let certs = page.items.iter().map(Item::data).collect::<Result<_, _>>()?;
        Ok((certs, page.cursor))
    }

    /// Every certificate of the device, page by page.
    pub async fn all_of_device(&self, app: &AppId, device_id: &str) -> Result<Vec<IssuedCert>, StoreError> {
        let items = super::query_all(self.store, Self::device_query(app, device_id).limit(100)).await?;
        items.iter().map(Item::data).collect()
    }

    /// Where the next renewal sweep starts: the pointer the last sweep left.
    pub async fn renewal_start(&self) -> Result<RenewalStart, StoreError> {
        let pointer = self.store.get(&renewal_round_key()).await?.map(|item| item.data::<SweepPointer>());
        Ok(match pointer.transpose()? {
            Some(pointer) => RenewalStart { after: Some(pointer.app_id), unfinished: pointer.unfinished },
            None => RenewalStart::default(),
        })
    }

    /// Up to `limit` certificates whose renewal check is due at `now`, with the versions they
    /// were read at, shared fairly between apps. A sweep looks at `apps` apps at most: those the
    /// last one left due certificates in (`start`, up to half of them), then the others in turn
    /// after the last one it took, wrapping around. Each app's due certificates come soonest
    /// first, interleaved app by app, so that no app's backlog holds back another's, and an app
    /// with a backlog is looked at again by the next sweep however many apps there are. The
    /// due certificates of the index's partition from before it was kept per app come as one
    /// more app. Where the sweep ended is for [`end_sweep`](Self::end_sweep) to write.
    pub async fn due_for_renewal(
        &self,
        start: &RenewalStart,
        apps: usize,
        limit: usize,
        now: EpochMillis,
    ) -> Result<(Vec<(IssuedCert, u64)>, SweepEnd), StoreError> {
        let again: Vec<&str> = start.unfinished.iter().map(String::as_str).take(apps / 2).collect();
        let ring = super::ring(self.store, super::apps::PARTITION, start.after.as_deref(), apps).await?;
        let turn: Vec<&str> = ring
            .iter()
            .map(|app| app.key.sk.as_str())
            .filter(|app| !again.contains(app))
            .take(apps - again.len())
            .collect();
        let visited: Vec<&str> = again.iter().chain(&turn).copied().collect();
        let until = format!("{:013}$", now.as_millis().max(0));
        let partitions = visited.iter().map(|app| renewals(app)).chain([RENEWALS_OF_EVERY_APP.to_owned()]);
        let reads = partitions.map(|partition| {
            let query =
                Query::index(Index::Gsi1, partition).sort(SortKey::Between("0".into(), until.clone()));
            self.store.query(query.limit(limit))
        });
        let pages = super::at_once(reads.collect()).await?;
        let more: Vec<bool> = pages.iter().map(|page| page.cursor.is_some()).collect();
        let found: Vec<Vec<Item>> = pages.into_iter().map(|page| page.items).collect();
        let mut taken = vec![0; found.len()];
        let mut due = Vec::with_capacity(limit);
        for (list, item) in super::interleaved(&found).take(limit) {
            taken[list] += 1;
            due.push(super::versioned(item)?);
        }
        // An app is unfinished if the cut left some of its due certificates, or its page was full.
        let unfinished = (0..visited.len())
            .filter(|&i| more[i] || taken[i] < found[i].len())
            .map(|i| visited[i].to_owned())
            .take(apps / 2)
            .collect();
        let after = turn.last().map(|app| app.to_string()).or_else(|| start.after.clone());
        let pointer = after.map(|app_id| SweepPointer { app_id, unfinished });
        Ok((due, SweepEnd { pointer }))
    }

    /// After a sweep: the pointer moves to where it ended.
    pub async fn end_sweep(&self, end: SweepEnd) -> Result<(), StoreError> {
        match end.pointer {
            Some(pointer) => {
                self.store.put(Item::new(renewal_round_key(), &pointer)?, Condition::Any).await.map(drop)
            }
            None => Ok(()),
        }
    }

    /// Writes `cert` (read at `version`) back, conditionally: a renewal check moved on.
    pub async fn put_cert(&self, cert: &IssuedCert, version: u64) -> Result<(), StoreError> {
        self.store.put(cert_item(cert)?, Condition::Version(version)).await.map(drop)
    }

    /// Queues the renewal `request` of the certificate `marked` (read at `version`), in one
    /// transaction: a conflict when the certificate changed or the app's queue is full (`cap`).
    pub async fn queue_renewal(
        &self,
        marked: &IssuedCert,
        version: u64,
        request: &CertRequest,
        cap: u32,
        now: EpochMillis,
    ) -> Result<(), StoreError> {
        let mut ops = vec![WriteOp::Put { item: cert_item(marked)?, condition: Condition::Version(version) }];
        ops.extend(enqueue_ops(request, cap, now)?);
        self.store.transact(ops).await
    }

    /// Records the names the directory found for the user (machineUserNames) as aliases;
    /// returns those that are another user's, with that user.
    pub async fn remember_names(
        &self,
        app: &AppId,
        named_user: &str,
        names: &[String],
    ) -> Result<Vec<(String, String)>, StoreError> {
        Devices::new(self.store).add_aliases(app, named_user, names).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_certificates_key_names_its_app() {
        let app = AppId::parse("appId", "workstation.Demo-1_a").unwrap();
        assert_eq!(app_of_cert_key(&cert_key(&app, "alice-pixel-9", "0a1b")), Some(app));
        // Anything else names no app: the caller reads the certificate first, then its app.
        assert_eq!(app_of_cert_key(&ItemKey::new("CERTREQ#x", "CERTREQ")), None);
        assert_eq!(app_of_cert_key(&ItemKey::new("DEVCERT#", "CERT#0a1b")), None);
    }

    const DAY_MS: i64 = 86_400_000;

    /// A day's certificate of `app` stored at `at` (due for renewal 80 % of a day later), as the
    /// issuing transaction writes it.
    async fn stored_cert(store: &dyn ItemStore, app: &AppId, serial: &str, at: EpochMillis) {
        use rp_domain::certificates::{LoginCertIssued, RequestKind};
        let request = CertRequest::new(RequestKind::LoginCert, app.clone(), 300, at);
        let issued = LoginCertIssued {
            login_cert: "c2VhbGVk".into(),
            iv_login_cert: "aXY=".into(),
            login_cert_auth: "YXV0aA==".into(),
            login_cert_serial_number: serial.into(),
            issuer_key_agreement_public_key: "a2V5".into(),
            issuer_key_agreement_public_key_auth: "YXV0aA==".into(),
            signing_cert: "Y2E=".into(),
            login_cert_expiry_date: EpochMillis(at.as_millis() + DAY_MS),
            machine_user_name_ws: None,
            machine_user_names: Vec::new(),
            envelope_version: 1,
            login_cert_signature: None,
        };
        let cert = IssuedCert::new(&request, &issued, at);
        store.put(cert_item(&cert).unwrap(), Condition::Absent).await.unwrap();
    }

    struct Fixture {
        backend: crate::TestBackend,
    }

    impl Fixture {
        fn new() -> Self {
            Self { backend: crate::TestBackend::new() }
        }

        fn store(&self) -> &dyn ItemStore {
            self.backend.store.as_ref()
        }

        /// The app `id` with `count` day certificates, serials `<id><i>`, the i-th stored at
        /// `from` + i ms.
        async fn app(&self, id: &str, count: i64, from: i64) -> AppId {
            let app = AppId::parse("appId", id).unwrap();
            let record = crate::apps::AppRecord::new(app.clone(), id.into(), EpochMillis(0));
            crate::apps::Apps::new(self.store()).create(&record).await.unwrap();
            for i in 0..count {
                stored_cert(self.store(), &app, &format!("{id}{i}"), EpochMillis(from + i)).await;
            }
            app
        }
    }

    fn serials(due: &[(IssuedCert, u64)]) -> Vec<&str> {
        due.iter().map(|(cert, _)| cert.cert_serial_number.as_str()).collect()
    }

    /// A poll that finds every ready app drained deletes their markers, and moves the pointer,
    /// in one round trip however many apps there are.
    #[tokio::test]
    async fn a_rounds_end_deletes_the_drained_markers_at_once() {
        let f = Fixture::new();
        for id in ["a", "b", "c", "d"] {
            let marker =
                ReadyMarker { app_id: AppId::parse("appId", id).unwrap(), enqueued_at: EpochMillis(0) };
            f.store()
                .put(Item::new(ready_key(&marker.app_id), &marker).unwrap(), Condition::Any)
                .await
                .unwrap();
        }
        let (traced, trips) = rp_ports::trips::recorded(&f.backend, std::time::Duration::from_millis(5));
        let certs = Certificates::new(traced.store.as_ref());
        let (pending, _) = certs.pending(10, EpochMillis(DAY_MS), RoundStart::default()).await.unwrap();
        assert!(pending.is_empty());
        let tally = trips.take();
        let deletes = tally.waves_of("store.delete CERTQ");
        assert_eq!(deletes.len(), 4, "{tally}");
        assert!(deletes.iter().all(|w| *w == deletes[0]), "{tally}");
        assert_eq!(tally.waves_of("store.put CERTQ"), deletes[..1], "{tally}");
        assert!(certs.ready_apps(10, &RoundStart::default()).await.unwrap().is_empty());
    }

    /// One app's backlog of due certificates (here twelve, all due before the other app's one)
    /// does not keep the other's out of a sweep: the apps' certificates are interleaved.
    #[tokio::test]
    async fn one_apps_backlog_holds_back_no_other_apps_renewal() {
        let f = Fixture::new();
        f.app("busy", 12, 0).await;
        f.app("quiet", 1, 1_000).await;
        let certs = Certificates::new(f.store());
        let (due, _) =
            certs.due_for_renewal(&RenewalStart::default(), 10, 10, EpochMillis(DAY_MS)).await.unwrap();
        let busy: Vec<String> = (1..9).map(|i| format!("busy{i}")).collect();
        let expected: Vec<&str> =
            ["busy0", "quiet0"].into_iter().chain(busy.iter().map(String::as_str)).collect();
        assert_eq!(serials(&due), expected);
        // Nothing is due before its window opens.
        let early = EpochMillis(DAY_MS * 79 / 100);
        assert!(certs.due_for_renewal(&RenewalStart::default(), 10, 10, early).await.unwrap().0.is_empty());
    }

    /// A sweep looks at a few apps at a time, after the one the last sweep looked at last, and
    /// wraps around: every app gets its turn.
    #[tokio::test]
    async fn sweeps_take_the_apps_in_turn() {
        let f = Fixture::new();
        for id in ["a", "b", "c"] {
            f.app(id, 1, 0).await;
        }
        assert_eq!(sweeps(f.store(), 3, 2).await, ["a0,b0", "c0,a0", "b0,c0"]);
    }

    /// What `count` sweeps of `apps` apps and 3 certificates each find, one after another.
    async fn sweeps(store: &dyn ItemStore, count: usize, apps: usize) -> Vec<String> {
        let certs = Certificates::new(store);
        let mut seen = Vec::new();
        for _ in 0..count {
            let start = certs.renewal_start().await.unwrap();
            let (due, end) = certs.due_for_renewal(&start, apps, 3, EpochMillis(DAY_MS)).await.unwrap();
            certs.end_sweep(end).await.unwrap();
            seen.push(serials(&due).join(","));
        }
        seen
    }

    /// An app left with due certificates is looked at again by the next sweep, beside the
    /// others' turn, however many apps there are; once it has none left, it waits its turn.
    #[tokio::test]
    async fn an_app_with_a_backlog_is_looked_at_again_by_the_next_sweep() {
        let f = Fixture::new();
        f.app("a", 5, 0).await;
        for id in ["b", "c", "d"] {
            f.app(id, 1, 0).await;
        }
        // Two apps a sweep, three certificates: the busy app's backlog goes on being read
        // (the store here does not move what a sweep found), and b, c and d each get their turn.
        assert_eq!(sweeps(f.store(), 4, 2).await, ["a0,b0,a1", "a0,c0,a1", "a0,d0,a1", "a0,b0,a1"]);
    }

    /// An app whose due certificates the sweep's cut left behind is unfinished too, though its
    /// page was not full: the next sweep reads it again first.
    #[tokio::test]
    async fn an_app_the_cut_left_is_looked_at_again() {
        let f = Fixture::new();
        for (id, count) in [("a", 2), ("b", 2), ("c", 1)] {
            f.app(id, count, 0).await;
        }
        // Two apps, three certificates a sweep: b1 is cut, so b goes on before c's turn.
        assert_eq!(sweeps(f.store(), 2, 2).await, ["a0,b0,a1", "b0,c0,b1"]);
    }

    /// A pointer that lists more unfinished apps than this sweep's share of them (left by a
    /// sweep of more apps: another version, another setting) costs it no more reads: half its
    /// apps at most are taken again, the rest in turn.
    #[tokio::test]
    async fn a_sweep_takes_at_most_half_its_apps_again() {
        let f = Fixture::new();
        for id in ["a", "b", "c", "d", "e", "f"] {
            f.app(id, 1, 0).await;
        }
        let unfinished = ["a", "c", "d", "e"].map(String::from).to_vec();
        let start = RenewalStart { after: Some("a".into()), unfinished };
        let certs = Certificates::new(f.store());
        let (due, _) = certs.due_for_renewal(&start, 2, 10, EpochMillis(DAY_MS)).await.unwrap();
        assert_eq!(serials(&due), ["a0", "b0"], "a again, then b in turn");
    }

    /// A certificate indexed in the one partition of every app (before the index was kept per
    /// app) is still found, and its next write moves it to its app's partition.
    #[tokio::test]
    async fn a_certificate_indexed_before_the_index_was_per_app_is_still_due() {
        let f = Fixture::new();
        let store = f.store();
        let app = f.app("older", 1, 0).await;
        let certs = Certificates::new(store);
        let (cert, _) = certs.by_serial("older0").await.unwrap().unwrap();
        let at = cert.renewal_check().unwrap();
        let before = Item::new(cert_key(&app, &cert.device_id, "older0"), &cert).unwrap().with_index(
            Index::Gsi1,
            ItemKey::new(RENEWALS_OF_EVERY_APP, format!("{:013}#older0", at.as_millis())),
        );
        store.put(before, Condition::Any).await.unwrap();
        let (due, _) =
            certs.due_for_renewal(&RenewalStart::default(), 10, 10, EpochMillis(DAY_MS)).await.unwrap();
        assert_eq!(serials(&due), ["older0"], "found once, in the old partition");
        let (cert, version) = &due[0];
        certs.put_cert(&cert.check_again_at(EpochMillis(DAY_MS)), *version).await.unwrap();
        let old = Query::index(Index::Gsi1, RENEWALS_OF_EVERY_APP).limit(10);
        assert!(store.query(old).await.unwrap().items.is_empty(), "moved out of the old partition");
        let (due, _) =
            certs.due_for_renewal(&RenewalStart::default(), 10, 10, EpochMillis(DAY_MS)).await.unwrap();
        assert_eq!(serials(&due), ["older0"], "and into its app's");
    }
}
