//! Events (DECISIONS §9): what an agent or a workstation reports is stored as an event.

use crate::apps::NamedRead;
use crate::{AppError, AppState};
use rp_domain::apps::AppId;
use rp_domain::events::EventRecord;
use rp_domain::FieldError;
use rp_repo::apps::Apps;
use rp_repo::events::Events;
use serde_json::{Map, Value};

/// Stores the event `name` with `attributes`, reported by `source`, for `app` (which must
/// exist; `field` is where the request named it): the event. `early` is `app`, if it was read
/// ahead (beside the caller's token).
pub async fn report(
    state: &AppState,
    name: &str,
    app: Option<AppId>,
    early: NamedRead,
    field: &str,
    source: String,
    attributes: Map<String, Value>,
) -> Result<EventRecord, AppError> {
    if let Some(app) = &app {
        let found = match early {
            Some(read) => read,
            _ => Apps::new(state.backend.store.as_ref()).get(app).await,
        };
        if found?.is_none() {
            return Err(FieldError::new(field, format!("no app with appId '{app}'")).into());
        }
    }
    let event = EventRecord::new(name, app, source, state.backend.clock.now_millis(), attributes);
    Events::new(state.backend.store.as_ref()).record(&event).await?;
    Ok(event)
}
