//! A tenant's token-signing keys: the JWKS, rotation and retirement, and the signer a sandbox
//! run mints tokens with.

use crate::{AppState, HasClock, HasKeys, HasStore};
use p256::ecdsa::SigningKey;
use rp_domain::apps::AppId;
use rp_domain::signing::SigningKeyError;
use rp_ports::retry_on_conflict;
use rp_repo::signing_keys::{PublishedKey, SigningKeys};

fn keys<'a>(state: &'a (impl HasKeys + HasStore), tenant: &AppId) -> SigningKeys<'a> {
    SigningKeys::new(state.store(), state.keys(), tenant)
}

/// The tenant's published keys, oldest first; none until its first token or rotation.
pub async fn published(
    state: &(impl HasKeys + HasStore),
    tenant: &AppId,
) -> Result<Vec<PublishedKey>, SigningKeyError> {
    Ok(keys(state, tenant).published().await?)
}

/// A new active key for the tenant; the earlier ones stay published until retired.
pub async fn rotate(
    state: &(impl HasClock + HasKeys + HasStore),
    tenant: &AppId,
) -> Result<PublishedKey, SigningKeyError> {
    let keys = &keys(state, tenant);
    let key = retry_on_conflict(|| async move { keys.rotate(state.clock().now_millis()).await }).await?;
    tracing::info!(tenant = %tenant, kid = %key.kid, "signing key rotated");
    Ok(key)
}

/// Takes key `kid` out of the tenant's JWKS; tokens it signed no longer verify.
pub async fn retire(
    state: &(impl HasKeys + HasStore),
    tenant: &AppId,
    kid: &str,
) -> Result<(), SigningKeyError> {
    let keys = &keys(state, tenant);
    retry_on_conflict(|| async move { keys.retire(kid).await }).await?;
    tracing::info!(tenant = %tenant, kid = %kid, "signing key retired");
    Ok(())
}

/// What a tenant's sandbox runs sign with: its active key, made on first use.
pub struct TenantSigner {
    state: AppState,
    tenant: AppId,
}

impl TenantSigner {
    pub fn new(state: &AppState, tenant: &AppId) -> std::sync::Arc<Self> {
        std::sync::Arc::new(Self { state: state.clone(), tenant: tenant.clone() })
    }
}

#[async_trait::async_trait]
impl rp_sandbox::JwtSigner for TenantSigner {
    async fn signing_key(&self) -> Result<(String, SigningKey), String> {
        let keys = &keys(&self.state, &self.tenant);
        let now = self.state.clock().now_millis();
        retry_on_conflict(|| async move { keys.active(now).await }).await.map_err(|e| {
            tracing::warn!(tenant = %self.tenant, error = %e, "the tenant's signing key could not be read");
            "the tenant's signing key is unavailable".to_owned()
        })
    }
}
