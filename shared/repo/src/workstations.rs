//! Enrollment sessions, enrollments and pairings: persistence only (the rules are
//! [`rp_domain::enrollment`] and [`rp_domain::pairing`]). Layout:
//!
//! | pk | sk | item |
//! |---|---|---|
//! | `ENRSESSION#<app>#<sessionId>` | `SESSION` | an enrollment session; TTL its expiry (a day once closed) |
//! | `ENROLL#<app>#<machineId>` | `ENROLL` | the machine's enrollment |
//! | `PAIR#<app>#<machineId>` | `DEVICE#<deviceId>` | a workstation–device pairing; `gsi2` `DEVPAIR#<app>#<deviceId>` / `<machineId>` finds a device's pairings, `gsi1` `APPPAIR#<app>` / `<machineId>#<deviceId>` the app's |
//! | `PAIRED#<app>#<deviceId>` | `<machineId>` | the device's pairing on that machine, written and removed with it: read with a strongly consistent query, so a device's removal finds every pairing made before it froze the device (pairings stored before this item existed are found through `gsi2`) |
//! | `OFFLINEFAIL#<app>#<machineId>#<deviceId>` | `<window start>` | wrong offline attempts in a fixed window of `lockoutSecs`; TTL a minute after it |
//! | `ENCCTR#<app>#<deviceId>` | `COUNTER` | the device's encryption counter |

use super::certificates::enqueue_ops;
use super::devices::Devices;
use crate::events::{self};
use rp_domain::apps::AppId;
use rp_domain::certificates::CertRequest;
use rp_domain::enrollment::{EnrollmentRecord, EnrollmentSession, SessionState, CLOSED_SESSION_KEPT_SECS};
use rp_domain::events::EventRecord;
use rp_domain::pairing::Pairing;
use rp_domain::time::EpochMillis;
use rp_ports::{Condition, Increment, Index, Item, ItemKey, ItemStore, Query, StoreError, WriteOp};

fn session_key(app: &AppId, session_id: &str) -> ItemKey {
    ItemKey::new(format!("ENRSESSION#{app}#{session_id}"), "SESSION")
}

/// An open session lives until it expires; a closed one a day longer, to recognise repeats.
fn session_item(session: &EnrollmentSession) -> Result<Item, StoreError> {
    let ttl = match session.state {
        SessionState::Open => session.expires_at.as_secs(),
        SessionState::Completed | SessionState::Failed => {
            session.expires_at.plus_secs(CLOSED_SESSION_KEPT_SECS).as_secs()
        }
    };
    Ok(Item::new(session_key(&session.app_id, &session.session_id), session)?.with_ttl(Some(ttl)))
}

fn enrollment_key(app: &AppId, machine_id: &str) -> ItemKey {
    ItemKey::new(format!("ENROLL#{app}#{machine_id}"), "ENROLL")
}

fn pairing_key(app: &AppId, machine_id: &str, device_id: &str) -> ItemKey {
    ItemKey::new(format!("PAIR#{app}#{machine_id}"), format!("DEVICE#{device_id}"))
}

fn device_pairings(app: &AppId, device_id: &str) -> String {
    format!("DEVPAIR#{app}#{device_id}")
}

/// The partition that lists the device's pairings, one item a machine.
fn device_links(app: &AppId, device_id: &str) -> String {
    format!("PAIRED#{app}#{device_id}")
}

/// Where the pairing of `device_id` on `machine_id` is listed under its device.
fn device_link_key(app: &AppId, device_id: &str, machine_id: &str) -> ItemKey {
    ItemKey::new(device_links(app, device_id), machine_id)
}

fn device_link(pairing: &Pairing) -> Result<Item, StoreError> {
    let key = device_link_key(&pairing.app_id, &pairing.device_id, &pairing.machine_id);
    Item::new(key, &serde_json::json!({ "machineId": pairing.machine_id }))
}

fn app_pairings(app: &AppId) -> String {
    format!("APPPAIR#{app}")
}

fn pairing_item(pairing: &Pairing) -> Result<Item, StoreError> {
    let key = pairing_key(&pairing.app_id, &pairing.machine_id, &pairing.device_id);
    let by_app =
        ItemKey::new(app_pairings(&pairing.app_id), format!("{}#{}", pairing.machine_id, pairing.device_id));
    Ok(Item::new(key, pairing)?
        .with_index(
            Index::Gsi2,
            ItemKey::new(device_pairings(&pairing.app_id, &pairing.device_id), pairing.machine_id.clone()),
        )
        .with_index(Index::Gsi1, by_app))
}

fn counter_key(app: &AppId, device_id: &str) -> ItemKey {
    ItemKey::new(format!("ENCCTR#{app}#{device_id}"), "COUNTER")
}

#[derive(Clone, Copy)]
pub struct Workstations<'a> {
    store: &'a dyn ItemStore,
}

impl<'a> Workstations<'a> {
    pub fn new(store: &'a dyn ItemStore) -> Self {
        Self { store }
    }

    /// Stores a new session; [`StoreError::Conflict`] if the id is taken.
    pub async fn create_session(&self, session: &EnrollmentSession) -> Result<(), StoreError> {
        self.store.put(session_item(session)?, Condition::Absent).await.map(|_| ())
    }

    /// Replaces the session read at `version`.
    pub async fn replace_session(&self, session: &EnrollmentSession, version: u64) -> Result<(), StoreError> {
        self.store.put(session_item(session)?, Condition::Version(version)).await.map(|_| ())
    }

    pub async fn session(
        &self,
        app: &AppId,
        session_id: &str,
    ) -> Result<Option<(EnrollmentSession, u64)>, StoreError> {
        super::get_versioned(self.store, &session_key(app, session_id)).await
    }

    /// Stores a closed session (read at `version`), the enrollment it produced if any, and its
    /// event in one transaction.
    pub async fn close_session(
        &self,
        session: &EnrollmentSession,
        version: u64,
        enrollment: Option<(&EnrollmentRecord, Option<u64>)>,
        event: &EventRecord,
    ) -> Result<(), StoreError> {
        let mut ops =
            vec![WriteOp::Put { item: session_item(session)?, condition: Condition::Version(version) }];
        // The enrollment replaces the one read (at its version), or none.
        if let Some((enrollment, replaces)) = enrollment {
            ops.push(WriteOp::Put {
                item: Item::new(enrollment_key(&enrollment.app_id, &enrollment.machine_id), enrollment)?,
                condition: replaces.map_or(Condition::Absent, Condition::Version),
            });
        }
        events::transact_with(self.store, ops, event).await
    }

    pub async fn enrollment(
        &self,
        app: &AppId,
        machine_id: &str,
    ) -> Result<Option<EnrollmentRecord>, StoreError> {
        self.store.get(&enrollment_key(app, machine_id)).await?.map(|i| i.data()).transpose()
    }

    /// The machine's enrollment with its version.
    pub async fn enrollment_versioned(
        &self,
        app: &AppId,
        machine_id: &str,
    ) -> Result<Option<(EnrollmentRecord, u64)>, StoreError> {
        super::get_versioned(self.store, &enrollment_key(app, machine_id)).await
    }

    /// The device's next encryption counter value.
    pub async fn next_enc_counter(&self, app: &AppId, device_id: &str) -> Result<i64, StoreError> {
        let increment = Increment { key: counter_key(app, device_id), by: 1, limit: None, expires_at: None };
        self.store.increment(increment).await
    }

    /// The device's current encryption counter value (0 before the first request).
    pub async fn enc_counter(&self, app: &AppId, device_id: &str) -> Result<i64, StoreError> {
        let item = self.store.get(&counter_key(app, device_id)).await?;
        Ok(item.and_then(|i| i.counter()).unwrap_or(0))
    }

    /// Creates the pairing, lists it under its device and queues its certificate request in one
    /// transaction; [`StoreError::Conflict`] if the pairing exists already (nothing is written
    /// then). Also [`StoreError::Conflict`], with nothing written, if the request would take the
    /// app past `cap` open login-certificate requests, or once the device is frozen (its removal
    /// has begun, or its token was ended).
    pub async fn pair(
        &self,
        pairing: &Pairing,
        request: &CertRequest,
        cap: u32,
        now: EpochMillis,
    ) -> Result<(), StoreError> {
        let mut ops = vec![
            WriteOp::Put { item: pairing_item(pairing)?, condition: Condition::Absent },
            WriteOp::Put { item: device_link(pairing)?, condition: Condition::Any },
            Devices::unfrozen(&pairing.app_id, &pairing.device_id),
        ];
        ops.extend(enqueue_ops(request, cap, now)?);
        self.store.transact(ops).await
    }

    pub async fn pairing(
        &self,
        app: &AppId,
        machine_id: &str,
        device_id: &str,
    ) -> Result<Option<(Pairing, u64)>, StoreError> {
        super::get_versioned(self.store, &pairing_key(app, machine_id, device_id)).await
    }

    /// Stores a pairing read at `version`, if it is still at it; returns its new version.
    pub async fn replace_pairing(&self, pairing: &Pairing, version: u64) -> Result<u64, StoreError> {
        self.store.put(pairing_item(pairing)?, Condition::Version(version)).await.map(|item| item.version)
    }

    /// Stores a pairing read at `version`, if it is still at it and its device is not frozen:
    /// what the device takes of it (its PINs) is not handed over once its removal, or the end
    /// of its token, has begun.
    pub async fn replace_pairing_for_device(
        &self,
        pairing: &Pairing,
        version: u64,
    ) -> Result<(), StoreError> {
        self.store
            .transact(vec![
                WriteOp::Put { item: pairing_item(pairing)?, condition: Condition::Version(version) },
                Devices::unfrozen(&pairing.app_id, &pairing.device_id),
            ])
            .await
    }

    /// Stores a pairing (read at `version`) with the event that reports the change.
    pub async fn replace_pairing_with_event(
        &self,
        pairing: &Pairing,
        version: u64,
        event: &EventRecord,
    ) -> Result<(), StoreError> {
        let put = WriteOp::Put { item: pairing_item(pairing)?, condition: Condition::Version(version) };
        events::transact_with(self.store, vec![put], event).await
    }

    /// Every pairing of the device, on every workstation, page by page: a removal that missed
    /// one would leave it pairing a removed device. The device's own list is read strongly
    /// consistent, beside the index that lists pairings stored before it.
    pub async fn pairings_of_device(
        &self,
        app: &AppId,
        device_id: &str,
    ) -> Result<Vec<(Pairing, u64)>, StoreError> {
        let listed = Query::table(device_links(app, device_id)).limit(100);
        let indexed = Query::index(Index::Gsi2, device_pairings(app, device_id)).limit(100);
        let (listed, indexed) =
            tokio::join!(super::query_all(self.store, listed), super::query_all(self.store, indexed));
        let mut machines: Vec<String> = listed?.into_iter().map(|link| link.key.sk).collect();
        for pairing in indexed? {
            machines.push(pairing.data::<Pairing>()?.machine_id);
        }
        machines.sort();
        machines.dedup();
        // Read the pairings themselves (the index may lag), several at once.
        let keys: Vec<ItemKey> =
            machines.iter().map(|machine| pairing_key(app, machine, device_id)).collect();
        let items = super::at_once(keys.iter().map(|key| self.store.get(key)).collect()).await?;
        items.iter().flatten().map(super::versioned).collect()
    }

    /// The query over the app's pairings, by machine and device.
    pub fn app_query(app: &AppId) -> Query {
        Query::index(Index::Gsi1, app_pairings(app))
    }

    /// A page of the app's pairings, by machine and device (as the index has them: it may lag a
    /// change by moments).
    pub async fn pairings_of_app(
        &self,
        app: &AppId,
        limit: usize,
        cursor: Option<rp_ports::Cursor>,
    ) -> Result<(Vec<Pairing>, Option<rp_ports::Cursor>), StoreError> {
        let page = self.store.query(Self::app_query(app).limit(limit).after(cursor)).await?;
        let pairings = page.items.iter().map(Item::data).collect::<Result<_, _>>()?;
        Ok((pairings, page.cursor))
    }

    /// Removes the pairing (read at `version`), with what goes with it (queued revocations) and
    /// its event, in one transaction.
    pub async fn unpair(
        &self,
        pairing: &Pairing,
        version: u64,
        mut with: Vec<WriteOp>,
        event: &EventRecord,
    ) -> Result<(), StoreError> {
        let key = pairing_key(&pairing.app_id, &pairing.machine_id, &pairing.device_id);
        with.push(WriteOp::Delete { key, condition: Condition::Version(version) });
        let link = device_link_key(&pairing.app_id, &pairing.device_id, &pairing.machine_id);
        with.push(WriteOp::Delete { key: link, condition: Condition::Any });
        events::transact_with(self.store, with, event).await
    }

    /// Adds `by` wrong offline attempts to the pairing's counter of the fixed window of
    /// `window_secs` that holds `now`; returns the window's count. The window is in the key, as
    /// for rate limits: DynamoDB sweeps expired items lazily, and an expired counter that kept
    /// counting would lock a pairing on old failures.
    pub async fn count_wrong_attempts(
        &self,
        pairing: &Pairing,
        by: i64,
        window_secs: i64,
        now: EpochMillis,
    ) -> Result<i64, StoreError> {
        let secs = now.as_secs();
        let start = secs - secs.rem_euclid(window_secs.max(1));
        let key = ItemKey::new(
            format!("OFFLINEFAIL#{}#{}#{}", pairing.app_id, pairing.machine_id, pairing.device_id),
            start.to_string(),
        );
        let expires_at = Some(start + window_secs + 60);
        self.store.increment(Increment { key, by, limit: None, expires_at }).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rp_domain::pairing::{NewPairing, PairedDevice};
    use rp_ports::{Clock, ManualClock};

    /// A pairing of device `d1` of `app` on `machine`, and its certificate request.
    fn pairing(app: &AppId, machine: &str) -> (Pairing, CertRequest) {
        let device = PairedDevice {
            device_id: "d1".into(),
            named_user: "ann".into(),
            key_agreement_public_key: String::new(),
        };
        let request = NewPairing {
            machine_id: machine.into(),
            device_id: "d1".into(),
            machine_name: None,
            machine_user_name_ws: None,
            offline: None,
        };
        Pairing::create(app.clone(), &request, &device, "owner", 1, 60, EpochMillis(1_000))
    }

    #[tokio::test]
    async fn a_devices_pairings_are_found_listed_under_it_or_only_in_the_index() {
        let backend = crate::TestBackend::new();
        let workstations = Workstations::new(backend.store.as_ref());
        let app = AppId::parse("appId", "pairedApp").unwrap();
        // One paired now; one stored before pairings were listed under their device.
        let (listed, request) = pairing(&app, "ws-new");
        workstations.pair(&listed, &request, 10, EpochMillis(1_000)).await.unwrap();
        // As a table written then holds it: the pairing, indexed under its device, by the
        // layout's own names (a renamed index partition would lose every such pairing).
        let (legacy, _) = pairing(&app, "ws-old");
        let stored_then = Item::new(ItemKey::new("PAIR#pairedApp#ws-old", "DEVICE#d1"), &legacy)
            .unwrap()
            .with_index(Index::Gsi2, ItemKey::new("DEVPAIR#pairedApp#d1", "ws-old"));
        backend.store.put(stored_then, Condition::Absent).await.unwrap();
        let found = workstations.pairings_of_device(&app, "d1").await.unwrap();
        let machines: Vec<&str> = found.iter().map(|(p, _)| p.machine_id.as_str()).collect();
        assert_eq!(machines, ["ws-new", "ws-old"]);
        // Both unpair, the legacy one with no list entry to remove.
        for (pairing, version) in &found {
            let event = EventRecord::new(
                "WORKSTATION_UNPAIRED",
                Some(app.clone()),
                "test",
                EpochMillis(2_000),
                Default::default(),
            );
            workstations.unpair(pairing, *version, Vec::new(), &event).await.unwrap();
        }
        assert!(workstations.pairings_of_device(&app, "d1").await.unwrap().is_empty());
        let links = backend.store.query(Query::table(device_links(&app, "d1"))).await.unwrap();
        assert!(links.items.is_empty(), "the list goes with the pairing");
        // A frozen device takes no pairing, and nothing of it is written.
        Devices::new(backend.store.as_ref()).freeze(&app, "d1").await.unwrap();
        let (late, request) = pairing(&app, "ws-late");
        assert!(matches!(
            workstations.pair(&late, &request, 10, EpochMillis(3_000)).await,
            Err(StoreError::Conflict)
        ));
        assert!(workstations.pairings_of_device(&app, "d1").await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_windows_wrong_attempts_stay_a_minute_past_the_window() {
        // Ten seconds into a window of 300 that starts at 1,800,000,000.
        let clock = ManualClock::at(time::OffsetDateTime::from_unix_timestamp(1_800_000_010).unwrap());
        let backend = crate::TestBackend::on_clock(&clock);
        let workstations = Workstations::new(backend.store.as_ref());
        let (locked, _) = pairing(&AppId::parse("appId", "pairedApp").unwrap(), "ws-1");
        let now = clock.now_millis();
        assert_eq!(workstations.count_wrong_attempts(&locked, 2, 300, now).await.unwrap(), 2);
        assert_eq!(workstations.count_wrong_attempts(&locked, 1, 300, now).await.unwrap(), 3);
        let key = ItemKey::new("OFFLINEFAIL#pairedApp#ws-1#d1", "1800000000");
        // Until a minute past the window.
        crate::assert_kept_for(backend.store.as_ref(), &clock, &key, 290 + 60).await;
    }

    #[tokio::test]
    async fn an_apps_pairings_list_only_its_own() {
        let backend = crate::TestBackend::new();
        let workstations = Workstations::new(backend.store.as_ref());
        for (app, machine) in [("appOne", "ws-1"), ("appTwo", "ws-2"), ("appOne", "ws-3")] {
            let (pairing, request) = pairing(&AppId::parse("appId", app).unwrap(), machine);
            workstations.pair(&pairing, &request, 10, EpochMillis(1_000)).await.unwrap();
        }
        let listed = |app: &str| {
            let app = AppId::parse("appId", app).unwrap();
            async move {
                let (pairings, next) = workstations.pairings_of_app(&app, 10, None).await.unwrap();
                assert!(next.is_none());
                pairings.into_iter().map(|p| p.machine_id).collect::<Vec<_>>()
            }
        };
        assert_eq!(listed("appOne").await, ["ws-1", "ws-3"]);
        assert_eq!(listed("appTwo").await, ["ws-2"]);
    }
}
