//! Fixed-window request counters. Layout: pk `RL#<tenant>#<scope>`, sk `<window start>`, the
//! count in the counter attribute, TTL a minute after the window ends. The increment is
//! conditional on the limit, so concurrent callers on any number of instances never exceed it.

use rp_domain::apps::{AppId, RateLimit};
use rp_ports::{Increment, ItemKey, ItemStore, StoreError};

/// The outcome of one counted request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    pub limit: i64,
    pub remaining: i64,
    /// Epoch seconds at which the window resets.
    pub reset: i64,
}

/// Counts one request of `tenant` in `scope` at `now` (epoch seconds).
pub async fn hit(
    store: &dyn ItemStore,
    tenant: &AppId,
    scope: &str,
    rule: &RateLimit,
    now: i64,
) -> Result<Decision, StoreError> {
    let (start, reset) = rule.window(now);
    let increment = Increment {
        key: ItemKey::new(format!("RL#{tenant}#{scope}"), start.to_string()),
        by: 1,
        limit: Some(rule.limit),
        expires_at: Some(reset + 60),
    };
    match store.increment(increment).await {
        Ok(count) => Ok(Decision { allowed: true, limit: rule.limit, remaining: rule.limit - count, reset }),
        Err(StoreError::LimitReached) => {
            Ok(Decision { allowed: false, limit: rule.limit, remaining: 0, reset })
        }
        Err(e) => Err(e),
    }
}
