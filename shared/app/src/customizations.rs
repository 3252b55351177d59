//! The use cases both kinds of customization share (content: screen texts; code: JavaScript
//! hooks): create, read, change, delete, page the earlier versions, read one and restore it.
//! One implementation over `rp_repo::versioned`'s records; each kind says its errors, its noun
//! for the log lines, and what a storable record is.

use crate::{HasClock, HasSettings, HasStore};
use rp_domain::apps::AppId;
use rp_domain::boundary::MaybeConflict;
use rp_domain::code::{CodeError, CodeRecord};
use rp_domain::content::{ContentError, ContentRecord};
use rp_domain::idempotency::{self, IdempotencyKey, SentAgain};
use rp_domain::time::EpochMillis;
use rp_domain::FieldError;
use rp_ports::{Cursor, Query, StoreError};
use rp_repo::versioned::{Created, Once, Records, Versioned};
use rp_repo::Order;

/// A kind of customization: a versioned record of a tenant.
pub trait Customization: Versioned + Send + Sync + 'static {
    type Error: From<StoreError> + From<FieldError> + MaybeConflict + Send + 'static;
    /// How log lines name the kind.
    const NOUN: &'static str;
    fn not_found(id: i64) -> Self::Error;
    fn version_not_found(id: i64, version: u64) -> Self::Error;
    /// A create under an idempotency key an earlier, other create used.
    fn key_reused() -> Self::Error;
    /// The record as it may be stored (a content customization is bounded in size).
    fn storable(self) -> Result<Self, Self::Error>;
    /// The current record with an earlier version's contents, as its next version.
    fn restore(&self, earlier: &Self) -> Self;
}

impl Customization for ContentRecord {
    type Error = ContentError;
    const NOUN: &'static str = "content customization";
    fn not_found(id: i64) -> ContentError {
        ContentError::NotFound(id)
    }
    fn version_not_found(id: i64, version: u64) -> ContentError {
        ContentError::VersionNotFound { id, version }
    }
    fn key_reused() -> ContentError {
        ContentError::KeyReused
    }
    fn storable(self) -> Result<Self, ContentError> {
        self.within_size()
    }
    fn restore(&self, earlier: &Self) -> Self {
        self.restored_from(earlier)
    }
}

impl Customization for CodeRecord {
    type Error = CodeError;
    const NOUN: &'static str = "code customization";
    fn not_found(id: i64) -> CodeError {
        CodeError::NotFound(id)
    }
    fn version_not_found(id: i64, version: u64) -> CodeError {
        CodeError::VersionNotFound { id, version }
    }
    fn key_reused() -> CodeError {
        CodeError::KeyReused
    }
    fn storable(self) -> Result<Self, CodeError> {
        Ok(self)
    }
    fn restore(&self, earlier: &Self) -> Self {
        self.restored_from(earlier)
    }
}

/// The tenant's customizations of kind `R`, with the configured version retention.
pub(crate) fn records<'a, R: Customization>(
    state: &'a (impl HasSettings + HasStore),
    tenant: &AppId,
) -> Records<'a, R> {
    Records::new(state.store(), tenant).keeping(state.settings().content_versions_kept)
}

/// A page of the tenant's customizations of kind `R` and how many it has; `page` gives the size
/// and the cursor, checked against the partition the list reads.
pub async fn list<R: Customization, E: From<StoreError>>(
    state: &(impl HasSettings + HasStore),
    tenant: &AppId,
    page: impl FnOnce(&Query) -> Result<(usize, Option<Cursor>), E>,
) -> Result<(Vec<R>, Option<Cursor>, i64), E> {
    let records = records::<R>(state, tenant);
    let (limit, cursor) = page(&records.list_query())?;
    Ok(records.list(limit, cursor).await?)
}

/// Stores the record `make` builds under the next id, checked before an id is allocated. Under
/// an idempotency key (`once`), the same request sent again within a day gets the record the
/// first made (as it is now), and another request under the key is refused; nothing is stored
/// for either.
pub async fn create<R: Customization>(
    state: &(impl HasClock + HasSettings + HasStore),
    tenant: &AppId,
    once: Option<&IdempotencyKey>,
    make: impl Fn(i64, EpochMillis) -> R,
) -> Result<R, R::Error> {
    let now = state.clock().now_millis();
    // Checked before an id is allocated; the id's digits are a few bytes against any bound.
    make(0, now).storable()?;
    let once = once.map(|key| Once {
        key,
        fingerprint: idempotency::fingerprint(&make(0, EpochMillis(0))),
        expires_at: now.as_secs() + idempotency::KEPT_SECS,
    });
    match records::<R>(state, tenant).create(once.as_ref(), |id| make(id, now)).await? {
        Created::New(created) => {
            tracing::info!(tenant = %tenant, id = created.id(), "{} created", R::NOUN);
            Ok(created)
        }
        Created::Before(SentAgain::Same(id)) => {
            tracing::info!(tenant = %tenant, id, "{} create sent again: answered with the first", R::NOUN);
            get(state, tenant, id).await
        }
        Created::Before(SentAgain::Other) => Err(R::key_reused()),
    }
}

/// Customization `id`.
pub async fn get<R: Customization>(
    state: &(impl HasSettings + HasStore),
    tenant: &AppId,
    id: i64,
) -> Result<R, R::Error> {
    records::<R>(state, tenant).get(id).await?.ok_or_else(|| R::not_found(id))
}

/// Customization `id` after `change`, its version before kept; retried on a concurrent change.
pub async fn update<R: Customization>(
    state: &(impl HasClock + HasSettings + HasStore),
    tenant: &AppId,
    id: i64,
    change: impl Fn(&R) -> Result<R, R::Error>,
) -> Result<R, R::Error> {
    let now = state.clock().now_millis();
    let updated = records::<R>(state, tenant)
        .update(id, now, |current| change(current)?.storable())
        .await?
        .ok_or_else(|| R::not_found(id))?;
    tracing::info!(tenant = %tenant, id, version = updated.version(), "{} updated", R::NOUN);
    Ok(updated)
}

/// Deletes customization `id` with its versions.
pub async fn remove<R: Customization>(
    state: &(impl HasSettings + HasStore),
    tenant: &AppId,
    id: i64,
) -> Result<(), R::Error> {
    if !records::<R>(state, tenant).delete(id).await? {
        return Err(R::not_found(id));
    }
    tracing::info!(tenant = %tenant, id, "{} deleted", R::NOUN);
    Ok(())
}

/// A page of customization `id`'s earlier versions in `order`, with the customization as it is
/// now; `page` checks the caller's page size and cursor against the versions' partition.
pub async fn versions<R: Customization>(
    state: &(impl HasSettings + HasStore),
    tenant: &AppId,
    id: i64,
    order: Order,
    page: impl FnOnce(&Query) -> Result<(usize, Option<Cursor>), FieldError>,
) -> Result<(R, Vec<R>, Option<Cursor>), R::Error> {
    let records = records::<R>(state, tenant);
    let current = || async { records.get(id).await?.ok_or_else(|| R::not_found(id)) };
    // A customization that is not there is a 404 before a bad page is a 400.
    let (limit, cursor) = match page(&records.versions_query(id)) {
        Ok(page) => page,
        Err(bad_page) => {
            current().await?;
            return Err(bad_page.into());
        }
    };
    // The customization and the page of its versions are read at once.
    let (current, listed) = tokio::join!(current(), records.versions(id, order, limit, cursor));
    let current = current?;
    let (versions, next) = listed?;
    Ok((current, versions, next))
}

/// Version `version` of customization `id`, with the customization as it is now.
pub async fn version<R: Customization>(
    state: &(impl HasSettings + HasStore),
    tenant: &AppId,
    id: i64,
    version: u64,
) -> Result<(R, R), R::Error> {
    let (current, snapshot) = records::<R>(state, tenant).with_version(id, version).await?;
    let current = current.ok_or_else(|| R::not_found(id))?;
    Ok((current, snapshot.ok_or_else(|| R::version_not_found(id, version))?))
}

/// Restores version `version` of customization `id` as its next version; the restored record.
pub async fn restore<R: Customization>(
    state: &(impl HasClock + HasSettings + HasStore),
    tenant: &AppId,
    id: i64,
    version: u64,
) -> Result<R, R::Error> {
    let (current, snapshot) = self::version::<R>(state, tenant, id, version).await?;
    let now = state.clock().now_millis();
    let restored = records::<R>(state, tenant)
        .update_from(id, now, Some(current), |current| current.restore(&snapshot).storable())
        .await?
        .ok_or_else(|| R::not_found(id))?;
    tracing::info!(tenant = %tenant, id, from = version, version = restored.version(), "{} restored", R::NOUN);
    Ok(restored)
}
