//! Operator console sessions and failed sign-ins. Layout:
//!
//! | pk | sk | item |
//! |---|---|---|
//! | `CONSOLESESSION#<sessionId>` | `SESSION` | a session (its id's hash, never the id); TTL its expiry |
//! | `CONSOLEFAIL#<client>` | `<window start>` | failed sign-ins of one client in a fixed window; TTL a minute after it |

use rp_domain::console::{sign_in_window, ConsoleSession};
use rp_domain::tokens::TokenHash;
use rp_ports::{Condition, Increment, Item, ItemKey, ItemStore, StoreError};

fn session_key(session_id: &str) -> ItemKey {
    ItemKey::new(format!("CONSOLESESSION#{session_id}"), "SESSION")
}

fn failures_key(client: &str, window_start: i64) -> ItemKey {
    ItemKey::new(format!("CONSOLEFAIL#{client}"), window_start.to_string())
}

#[derive(Clone, Copy)]
pub struct ConsoleSessions<'a> {
    store: &'a dyn ItemStore,
}

impl<'a> ConsoleSessions<'a> {
    pub fn new(store: &'a dyn ItemStore) -> Self {
        Self { store }
    }

    /// Stores a new session; [`StoreError::Conflict`] if its id is taken.
    pub async fn create(&self, session: &ConsoleSession) -> Result<(), StoreError> {
        let item = Item::new(session_key(&session.session_id), session)?
            .with_ttl(Some(session.expires_at.as_secs() + 1));
        self.store.put(item, Condition::Absent).await?;
        Ok(())
    }

    /// The session a presented id would be, found by its hash's prefix (the caller compares the
    /// whole hash).
    pub async fn find(&self, presented: &TokenHash) -> Result<Option<ConsoleSession>, StoreError> {
        match self.store.get(&session_key(&presented.token_id())).await? {
            Some(item) => Ok(Some(item.data()?)),
            None => Ok(None),
        }
    }

    /// Ends a session; ending one that is gone already is no error.
    pub async fn end(&self, session_id: &str) -> Result<(), StoreError> {
        match self.store.delete(&session_key(session_id), Condition::Any).await {
            Ok(()) | Err(StoreError::Conflict) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// The failed sign-ins of `client` in the window holding `now_secs`.
    pub async fn failures(&self, client: &str, now_secs: i64) -> Result<i64, StoreError> {
        let (start, _) = sign_in_window(now_secs);
        let item = self.store.get(&failures_key(client, start)).await?;
        Ok(item.and_then(|i| i.counter()).unwrap_or(0))
    }

    /// Counts one failed sign-in of `client`; returns the window's count.
    pub async fn count_failure(&self, client: &str, now_secs: i64) -> Result<i64, StoreError> {
        let (start, end) = sign_in_window(now_secs);
        let increment =
            Increment { key: failures_key(client, start), by: 1, limit: None, expires_at: Some(end + 60) };
        self.store.increment(increment).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rp_domain::console::SESSION_SECS;
    use rp_domain::time::EpochMillis;
    use rp_domain::tokens::{TokenKind, TokenRecord, TokenSecret};
    use rp_ports::{Clock, ManualClock};
    use std::time::Duration;

    /// A control-center admin token that does not expire.
    fn admin_token() -> TokenRecord {
        let hash = TokenSecret::generate().hash();
        TokenRecord {
            token_id: hash.token_id(),
            kind: TokenKind::ControlCenterAdmin,
            app_id: None,
            description: None,
            hash: hash.to_hex(),
            created_at: EpochMillis(0),
            expires_at: None,
            revoked_at: None,
        }
    }

    #[tokio::test]
    async fn sessions_are_found_by_their_id_and_end() {
        let backend = crate::TestBackend::new();
        let sessions = ConsoleSessions::new(backend.store.as_ref());
        let now =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
        let (id, session) = ConsoleSession::open(&admin_token(), EpochMillis(now));
        sessions.create(&session).await.unwrap();
        assert_eq!(sessions.find(&id.hash()).await.unwrap(), Some(session.clone()));
        sessions.end(&session.session_id).await.unwrap();
        assert_eq!(sessions.find(&id.hash()).await.unwrap(), None);
        sessions.end(&session.session_id).await.unwrap();
    }

    #[tokio::test]
    async fn a_session_stays_in_the_store_until_it_ends() {
        // Half a second into a second, so that the session ends between two whole seconds.
        let clock = ManualClock::at(
            time::OffsetDateTime::from_unix_timestamp_nanos(1_800_000_000_500_000_000).unwrap(),
        );
        let backend = crate::TestBackend::on_clock(&clock);
        let sessions = ConsoleSessions::new(backend.store.as_ref());
        let (id, session) = ConsoleSession::open(&admin_token(), clock.now_millis());
        sessions.create(&session).await.unwrap();
        clock.advance(Duration::from_millis(SESSION_SECS as u64 * 1000 - 1));
        assert_eq!(
            sessions.find(&id.hash()).await.unwrap(),
            Some(session),
            "found until its last millisecond"
        );
        clock.advance(Duration::from_millis(1001));
        assert_eq!(sessions.find(&id.hash()).await.unwrap(), None, "gone from the store a second after");
    }

    #[tokio::test]
    async fn a_windows_failures_stay_a_minute_past_the_window() {
        let clock = ManualClock::at(time::OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap());
        let backend = crate::TestBackend::on_clock(&clock);
        let sessions = ConsoleSessions::new(backend.store.as_ref());
        let (start, end) = sign_in_window(1_800_000_000);
        assert_eq!(start, 1_800_000_000, "the case starts at a window's start");
        sessions.count_failure("203.0.113.7", start).await.unwrap();
        let key = failures_key("203.0.113.7", start);
        // Until a minute past the window.
        crate::assert_kept_for(backend.store.as_ref(), &clock, &key, (end - start + 60) as u64).await;
    }

    #[tokio::test]
    async fn failures_count_per_client_and_window() {
        let backend = crate::TestBackend::new();
        let sessions = ConsoleSessions::new(backend.store.as_ref());
        // Now, as the store's clock has it (its TTLs are real), at a window's start.
        let now =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
        let (start, end) = sign_in_window(now);
        assert_eq!(sessions.failures("203.0.113.7", start).await.unwrap(), 0);
        assert_eq!(sessions.count_failure("203.0.113.7", start).await.unwrap(), 1);
        assert_eq!(sessions.count_failure("203.0.113.7", start + 1).await.unwrap(), 2);
        assert_eq!(sessions.failures("203.0.113.7", end - 1).await.unwrap(), 2);
        assert_eq!(sessions.failures("198.51.100.1", start).await.unwrap(), 0);
        assert_eq!(sessions.failures("203.0.113.7", end).await.unwrap(), 0, "a new window");
    }
}
