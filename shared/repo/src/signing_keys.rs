//! A tenant's token-signing keys: one item, `SIGNKEYS#<tenant>` / `KEYS`, listing the keys oldest
//! first (the last is active), each with its public point in the clear and its private scalar
//! sealed under a data key of its own (context {tenant, purpose: signing-key, kid}). Reading the
//! JWKS opens nothing; a run that signs opens the active key once (one KMS `Decrypt`). A change
//! rewrites the item on the version it read.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use p256::ecdsa::SigningKey;
use rp_domain::apps::AppId;
use rp_domain::signing::{self, SigningKeyError};
use rp_domain::time::EpochMillis;
use rp_ports::keys::{open, seal, Sealed};
use rp_ports::{Condition, EncryptionContext, Item, ItemKey, ItemStore, KeyError, KeyService, StoreError};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct KeysItem {
    keys: Vec<StoredKey>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct StoredKey {
    kid: String,
    created_at: EpochMillis,
    /// SEC1 uncompressed, base64.
    public: String,
    private: Sealed,
}

/// A published key: what the JWKS and the control center show.
#[derive(Debug, Clone, PartialEq)]
pub struct PublishedKey {
    pub kid: String,
    pub created_at: EpochMillis,
    pub public: p256::PublicKey,
    /// Whether tokens are signed with it now (the newest key).
    pub active: bool,
}

pub struct SigningKeys<'a> {
    store: &'a dyn ItemStore,
    keys: &'a dyn KeyService,
    tenant: AppId,
}

fn context(tenant: &AppId, kid: &str) -> EncryptionContext {
    EncryptionContext::new(tenant.as_str(), "signing-key").with("kid", kid)
}

impl<'a> SigningKeys<'a> {
    pub fn new(store: &'a dyn ItemStore, keys: &'a dyn KeyService, tenant: &AppId) -> Self {
        Self { store, keys, tenant: tenant.clone() }
    }

    fn key(&self) -> ItemKey {
        ItemKey::new(format!("SIGNKEYS#{}", self.tenant), "KEYS")
    }

    async fn read(&self) -> Result<(Vec<StoredKey>, Condition), StoreError> {
        match self.store.get(&self.key()).await? {
            Some(item) => Ok((item.data::<KeysItem>()?.keys, Condition::Version(item.version))),
            None => Ok((Vec::new(), Condition::Absent)),
        }
    }

    async fn write(&self, keys: Vec<StoredKey>, condition: Condition) -> Result<(), StoreError> {
        let item = Item::new(self.key(), &KeysItem { keys })?;
        self.store.put(item, condition).await?;
        Ok(())
    }

    /// The published keys, oldest first, without opening any.
    pub async fn published(&self) -> Result<Vec<PublishedKey>, StoreError> {
        let (stored, _) = self.read().await?;
        let last = stored.len().saturating_sub(1);
        stored
            .into_iter()
            .enumerate()
            .map(|(at, key)| {
                let bytes = STANDARD.decode(&key.public).map_err(StoreError::encoding)?;
                let public = p256::PublicKey::from_sec1_bytes(&bytes).map_err(StoreError::encoding)?;
                Ok(PublishedKey { kid: key.kid, created_at: key.created_at, public, active: at == last })
            })
            .collect()
    }

    /// The active key, opened, and its id; the tenant's first key is made here when it has
    /// none. [`StoreError::Conflict`] when another caller made it first: read again.
    pub async fn active(&self, now: EpochMillis) -> Result<(String, SigningKey), SigningKeyError> {
        let (mut stored, condition) = self.read().await?;
        let Some(active) = stored.pop() else {
            let (fresh, key) = self.seal(SigningKey::random(&mut rand::rngs::OsRng), now).await?;
            let kid = fresh.kid.clone();
            self.write(vec![fresh], condition).await?;
            return Ok((kid, key));
        };
        let mut scalar = open(self.keys, &context(&self.tenant, &active.kid), &active.private).await?;
        let key = SigningKey::from_slice(&scalar).map_err(|_| KeyError::Decrypt);
        scalar.fill(0);
        Ok((active.kid, key?))
    }

    /// Adds a new random key, which becomes the active one; the others stay published.
    pub async fn rotate(&self, now: EpochMillis) -> Result<PublishedKey, SigningKeyError> {
        self.add(SigningKey::random(&mut rand::rngs::OsRng), now).await
    }

    /// Adds `key`, which becomes the active one ([`Self::rotate`] with a key of the caller's:
    /// the samples' fixed keys).
    pub async fn add(&self, key: SigningKey, now: EpochMillis) -> Result<PublishedKey, SigningKeyError> {
        let (mut stored, condition) = self.read().await?;
        signing::may_add(stored.len())?;
        let (fresh, key) = self.seal(key, now).await?;
        let public = p256::PublicKey::from(key.verifying_key());
        let published = PublishedKey { kid: fresh.kid.clone(), created_at: now, public, active: true };
        stored.push(fresh);
        self.write(stored, condition).await?;
        Ok(published)
    }

    /// Removes key `kid` from the JWKS and destroys its sealed private half.
    pub async fn retire(&self, kid: &str) -> Result<(), SigningKeyError> {
        let (mut stored, condition) = self.read().await?;
        let kids: Vec<&str> = stored.iter().map(|k| k.kid.as_str()).collect();
        let at = signing::retirement(&kids, kid)?;
        stored.remove(at);
        self.write(stored, condition).await?;
        Ok(())
    }

    /// `key` sealed for storage, and its private half for use.
    async fn seal(
        &self,
        key: SigningKey,
        now: EpochMillis,
    ) -> Result<(StoredKey, SigningKey), SigningKeyError> {
        let public = p256::PublicKey::from(key.verifying_key());
        let kid = signing::key_id(&public);
        let mut scalar = key.to_bytes();
        let sealed = seal(self.keys, &context(&self.tenant, &kid), &scalar).await;
        scalar.fill(0);
        let encoded = {
            use p256::elliptic_curve::sec1::ToEncodedPoint;
            STANDARD.encode(public.to_encoded_point(false).as_bytes())
        };
        Ok((StoredKey { kid, created_at: now, public: encoded, private: sealed? }, key))
    }
}
