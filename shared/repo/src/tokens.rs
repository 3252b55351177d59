//! Bearer tokens. Layout: pk `TOKEN`, sk `<tokenId>`; TTL a week after expiry, so expired tokens
//! stay listable for a while and then disappear.

use rp_domain::apps::AppId;
use rp_domain::time::EpochMillis;
use rp_domain::tokens::{TokenHash, TokenKind, TokenRecord, TokenSecret};
use rp_ports::{retry_on_conflict, Condition, Cursor, Item, ItemKey, ItemStore, Listed, Query, StoreError};

const PARTITION: &str = "TOKEN";
const KEEP_AFTER_EXPIRY_SECS: i64 = 7 * 24 * 3600;

fn key(token_id: &str) -> ItemKey {
    ItemKey::new(PARTITION, token_id)
}

#[derive(Clone, Copy)]
pub struct Tokens<'a> {
    store: &'a dyn ItemStore,
}

impl<'a> Tokens<'a> {
    pub fn new(store: &'a dyn ItemStore) -> Self {
        Self { store }
    }

    fn item(record: &TokenRecord) -> Result<Item, StoreError> {
        let ttl = record.expires_at.map(|at| at.plus_secs(KEEP_AFTER_EXPIRY_SECS).as_secs());
        Ok(Item::new(key(&record.token_id), record)?.with_ttl(ttl))
    }

    /// Stores a new token; [`StoreError::Conflict`] if its id is taken.
    pub async fn create(&self, record: &TokenRecord) -> Result<(), StoreError> {
        self.store.put(Self::item(record)?, Condition::Absent).await?;
        Ok(())
    }

    /// The record a presented token would match, found by the id its hash gives.
    pub async fn find(&self, presented: &TokenHash) -> Result<Option<TokenRecord>, StoreError> {
        self.get(&presented.token_id()).await
    }

    pub async fn get(&self, token_id: &str) -> Result<Option<TokenRecord>, StoreError> {
        Ok(self.read(token_id).await?.map(|(record, _)| record))
    }

    /// The token with its version, for [`Tokens::revoke`].
    pub async fn read(&self, token_id: &str) -> Result<Option<(TokenRecord, u64)>, StoreError> {
        super::get_versioned(self.store, &key(token_id)).await
    }

    pub async fn list(&self, limit: usize, cursor: Option<Cursor>) -> Listed<TokenRecord> {
        let page = self.store.query(Self::query_partition().limit(limit).after(cursor)).await?;
        let tokens = page.items.iter().map(Item::data).collect::<Result<_, _>>()?;
        Ok((tokens, page.cursor))
    }

    /// Marks `found` revoked (a token with its version, as [`Tokens::read`] found it); `Ok(false)`
    /// if there is no such token. Revoking twice is a no-op.
    pub async fn revoke(
        &self,
        found: Option<(TokenRecord, u64)>,
        now: EpochMillis,
    ) -> Result<bool, StoreError> {
        let Some((mut record, version)) = found else {
            return Ok(false);
        };
        if record.revoked_at.is_some() {
            return Ok(true);
        }
        record.revoked_at = Some(now);
        match self.store.put(Self::item(&record)?, Condition::Version(version)).await {
            // Someone else changed it meanwhile: only revocation changes a token, so it is revoked.
            Ok(_) | Err(StoreError::Conflict) => Ok(true),
            Err(e) => Err(e),
        }
    }

    pub fn query_partition() -> Query {
        Query::table(PARTITION)
    }
}

/// Creates a token and returns its secret (to be shown once) and its record. A fresh token
/// whose id is taken (a 64-bit prefix collision) is simply drawn again.
pub async fn issue(
    store: &dyn ItemStore,
    now: EpochMillis,
    kind: TokenKind,
    app_id: Option<AppId>,
    description: Option<String>,
    expires_in_secs: Option<i64>,
) -> Result<(TokenSecret, TokenRecord), StoreError> {
    retry_on_conflict(|| async {
        let secret = TokenSecret::generate();
        let record = record_for(&secret, now, kind, app_id.clone(), description.clone(), expires_in_secs);
        Tokens::new(store).create(&record).await?;
        Ok((secret, record))
    })
    .await
}

/// Installs a given token (a `LOCAL_ADMIN_TOKEN`) if it is not stored yet; `Ok(true)` if it was
/// created now.
pub async fn install(
    store: &dyn ItemStore,
    now: EpochMillis,
    secret: &TokenSecret,
    kind: TokenKind,
    app_id: Option<AppId>,
    description: &str,
) -> Result<bool, StoreError> {
    let record = record_for(secret, now, kind, app_id, Some(description.to_owned()), None);
    match Tokens::new(store).create(&record).await {
        Ok(()) => Ok(true),
        Err(StoreError::Conflict) => Ok(false),
        Err(e) => Err(e),
    }
}

fn record_for(
    secret: &TokenSecret,
    now: EpochMillis,
    kind: TokenKind,
    app_id: Option<AppId>,
    description: Option<String>,
    expires_in_secs: Option<i64>,
) -> TokenRecord {
    let hash = secret.hash();
    TokenRecord {
        token_id: hash.token_id(),
        kind,
        app_id,
        description,
        hash: hash.to_hex(),
        created_at: now,
        expires_at: expires_in_secs.map(|secs| now.plus_secs(secs)),
        revoked_at: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rp_ports::{Clock, ManualClock};
    use std::time::Duration;

    /// An expired token stays listed for a week (an admin sees what stopped working), and is
    /// then gone; a token that does not expire stays.
    #[tokio::test]
    async fn an_expired_token_is_listed_for_a_week_then_gone() {
        let clock = ManualClock::starting_now();
        let backend = crate::TestBackend::on_clock(&clock);
        let store = backend.store.as_ref();
        let now = clock.now_millis();
        let (_, expiring) = issue(store, now, TokenKind::Access, None, None, Some(3600)).await.unwrap();
        let (_, lasting) = issue(store, now, TokenKind::Access, None, None, None).await.unwrap();
        let listed = || async {
            let (tokens, _) = Tokens::new(store).list(10, None).await.unwrap();
            tokens.into_iter().map(|t| t.token_id).collect::<std::collections::BTreeSet<_>>()
        };
        let day = Duration::from_secs(24 * 3600);
        clock.advance(Duration::from_secs(3600) + 7 * day - Duration::from_secs(1));
        assert!(listed().await.contains(&expiring.token_id), "listed until a week past its expiry");
        clock.advance(Duration::from_secs(1));
        let left = listed().await;
        assert!(!left.contains(&expiring.token_id), "gone a week past its expiry");
        assert!(left.contains(&lasting.token_id), "a token that does not expire stays");
    }
}
