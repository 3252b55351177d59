//! The tenant's rate limit, as a use case counts a request against it.

use crate::capabilities::{HasClock, HasStore};
use crate::error::AppError;
use rp_repo::apps::AppRecord;

/// Counts one request of the app against its budget in `scope`: an error when it is used up.
pub async fn within_rate_limit(
    state: &(impl HasClock + HasStore),
    app: &AppRecord,
    scope: &str,
) -> Result<(), AppError> {
    let now = state.clock().epoch_secs();
    let rule = &app.rate_limit;
    let decision = rp_repo::ratelimit::hit(state.store(), &app.app_id, scope, rule, now).await?;
    match decision.allowed {
        true => Ok(()),
        false => Err(AppError::RateLimited { rule: rule.clone(), decision, now }),
    }
}
