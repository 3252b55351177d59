//! Apps: the record every use case of an app starts from.

use crate::AppState;
use rp_domain::apps::{AppId, ControlError};
use rp_repo::apps::{AppRecord, Apps};

/// The app at `app_id` with its version, or 404.
pub async fn load_app(state: &AppState, app_id: &str) -> Result<(AppRecord, u64), ControlError> {
    let id = AppId::parse("appId", app_id)?;
    Apps::new(state.backend.store.as_ref())
        .get(&id)
        .await?
        .ok_or_else(|| ControlError::AppNotFound(app_id.to_owned()))
}
