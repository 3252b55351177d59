//! Enrollment and pairing: the envelope context of a machine's recovery keys, and the event of
//! a refused claim to another user's name.

use crate::AppState;
use rp_domain::apps::AppId;
use rp_ports::{EncryptionContext, StoreError};

/// The context recovery keys are sealed under: they open for that app, machine and device only.
pub fn recovery_context(app: &AppId, machine_id: &str, device_id: &str) -> EncryptionContext {
    crate::pairing_context(app, "recovery-keys", machine_id, device_id)
}

/// Records that `name` was claimed for `claimed_for` while it stands for `holder` (or nobody).
pub async fn refuse_name_claim(
    state: &AppState,
    app: &AppId,
    name: &str,
    claimed_for: &str,
    holder: Option<&str>,
    source: &str,
) -> Result<(), StoreError> {
    let mut attrs = rp_domain::events::attributes(&[("name", name), ("claimedFor", claimed_for)]);
    attrs.insert("heldBy".into(), holder.map_or(serde_json::Value::Null, |h| h.into()));
    let event = rp_domain::events::EventRecord::new(
        rp_domain::pairing::NAME_CLAIM_REFUSED_EVENT,
        Some(app.clone()),
        source,
        state.backend.clock.now_millis(),
        attrs,
    );
    tracing::warn!(app_id = %app, "a name claim for another user was refused");
    rp_repo::events::Events::new(state.backend.store.as_ref()).record(&event).await
}
