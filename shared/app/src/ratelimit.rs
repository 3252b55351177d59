//! The tenant's rate limit, as a use case counts a request against it.

use crate::capabilities::{HasClock, HasStore};
use crate::error::AppError;
use rp_domain::apps::{AppId, RateLimit};
use rp_ports::StoreError;
use rp_repo::apps::AppRecord;
use rp_repo::ratelimit::Decision;

/// Counts one request of `app` against `rule` in `scope` at `now` (epoch seconds): the decision,
/// allowed or not, for the caller to answer with.
pub async fn count_request(
    state: &impl HasStore,
    app: &AppId,
    scope: &str,
    rule: &RateLimit,
    now: i64,
) -> Result<Decision, StoreError> {
    rp_repo::ratelimit::hit(state.store(), app, scope, rule, now).await
}

/// Counts one request of the app against its budget in `scope`: an error when it is used up.
pub async fn within_rate_limit(
    state: &(impl HasClock + HasStore),
    app: &AppRecord,
    scope: &str,
) -> Result<(), AppError> {
    let now = state.clock().epoch_secs();
    let rule = &app.rate_limit;
    let decision = count_request(state, &app.app_id, scope, rule, now).await?;
    match decision.allowed {
        true => Ok(()),
        false => Err(AppError::RateLimited { rule: rule.clone(), decision, now }),
    }
}
