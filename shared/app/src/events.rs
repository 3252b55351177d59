//! Events (DECISIONS §9): what an agent or a workstation reports is stored as an event.

use crate::apps::NamedRead;
use crate::{AppError, HasClock, HasStore};
use rp_domain::apps::AppId;
use rp_domain::events::{EventError, EventRecord};
use rp_domain::FieldError;
use rp_ports::{Listed, StoreError};
use rp_repo::apps::Apps;
use rp_repo::certificates::Certificates;
use rp_repo::events::{EventCursor, EventFilter, Events};
use serde_json::{Map, Value};

/// A page of the events `filter` selects, oldest first.
pub async fn list(
    state: &impl HasStore,
    filter: &EventFilter,
    limit: usize,
    cursor: Option<EventCursor>,
) -> Listed<EventRecord, EventCursor> {
    Events::new(state.store()).list(filter, limit, cursor).await
}

/// An event as its reporter sends it.
pub struct Report {
    pub name: String,
    /// The reporter's own id for it ([`rp_domain::events::reported_id`]): a report sent again
    /// with the same id is stored once.
    pub event_id: Option<String>,
    pub attributes: Map<String, Value>,
}

/// Stores `report`, reported by `source`, for `app` (which must exist; `field` is where the
/// request named it): the event. `early` is `app`, if it was read ahead (beside the caller's
/// token). A report that names its id and was stored before is answered with the event stored
/// then, and stores nothing; one that names the id of another report is refused.
pub async fn report(
    state: &(impl HasClock + HasStore),
    report: Report,
    app: Option<AppId>,
    early: NamedRead,
    field: &str,
    source: String,
) -> Result<EventRecord, AppError> {
    let Report { name, event_id, attributes } = report;
    let name = name.as_str();
    if let Some(app) = &app {
        let found = match early {
            Some(read) => read,
            _ => Apps::new(state.store()).get(app).await,
        };
        if found?.is_none() {
            return Err(FieldError::new(field, format!("no app with appId '{app}'")).into());
        }
    }
    let app = match app {
        Some(app) => Some(app),
        None => app_of_certificate_request(state, name, &attributes).await?,
    };
    let mut event = EventRecord::new(name, app, source, state.clock().now_millis(), attributes);
    let events = Events::new(state.store());
    let Some(id) = event_id else {
        events.record(&event).await?;
        return Ok(event);
    };
    event.event_id = id;
    match events.record_once(&event).await? {
        None => Ok(event),
        Some(earlier) if earlier.same_report(&event) => Ok(earlier),
        Some(_) => Err(EventError::IdTaken(event.event_id).into()),
    }
}

/// The app of the certificate request an agent's event names (`attributes.requestId`), for an
/// event that names no app: the reference agent reports a failed issuance or revocation by the
/// request alone, and the event belongs with its app (DECISIONS §9).
async fn app_of_certificate_request(
    state: &impl HasStore,
    name: &str,
    attributes: &Map<String, Value>,
) -> Result<Option<AppId>, StoreError> {
    if !CERTIFICATE_EVENTS.contains(&name) {
        return Ok(None);
    }
    let Some(request_id) = attributes.get("requestId").and_then(Value::as_str) else {
        return Ok(None);
    };
    let request = Certificates::new(state.store()).request(request_id).await?;
    Ok(request.map(|(request, _)| request.app_id))
}

/// The events an enrollment agent reports about a certificate request.
const CERTIFICATE_EVENTS: [&str; 2] = ["WORKSTATION_CERTIFICATE_ISSUED", "WORKSTATION_CERTIFICATE_REVOKED"];
