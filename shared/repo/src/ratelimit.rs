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

#[cfg(test)]
mod tests {
    use super::*;
    use rp_ports::{Clock, ManualClock};

    /// A window's counter outlives the window by a minute (a request at its last second is
    /// still counted in it), and is then gone from the store.
    #[tokio::test]
    async fn a_windows_counter_expires_a_minute_after_the_window() {
        let clock = ManualClock::at(time::OffsetDateTime::from_unix_timestamp(1_800_000_030).unwrap());
        let backend = crate::TestBackend::on_clock(&clock);
        let store = backend.store.as_ref();
        let tenant = AppId::parse("appId", "limitedApp").unwrap();
        let rule = RateLimit { limit: 5, window_secs: 60 };
        let now = clock.epoch_secs();
        let decision = hit(store, &tenant, "api", &rule, now).await.unwrap();
        assert_eq!((decision.allowed, decision.remaining, decision.reset), (true, 4, 1_800_000_060));
        let key = ItemKey::new("RL#limitedApp#api", "1800000000");
        // Until a minute past the window.
        crate::assert_kept_for(store, &clock, &key, 30 + 60).await;
    }
}
