//! A tenant's code-customization environment variables: one item, `CODEENV#<tenant>` / `ENV`,
//! holding the names with their update times in the clear and every value in one sealed
//! blob (a data key of its own, wrapped under the context {tenant, purpose: code-env}). A
//! run opens the blob once (one KMS `Decrypt`); a change rewrites it conditionally on the
//! version it read, so concurrent changes are serialized, never lost.

use rp_domain::apps::AppId;
use rp_domain::code::{EnvEntry, EnvVars};
use rp_ports::keys::{open, seal_under, DataKey, Sealed};
use rp_ports::{Condition, EncryptionContext, Item, ItemKey, ItemStore, KeyError, KeyService, StoreError};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct EnvItem {
    entries: Vec<EnvEntry>,
    values: Sealed,
}

#[derive(Debug, thiserror::Error)]
pub enum EnvError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Keys(#[from] KeyError),
}

/// A tenant's variables as stored ([`CodeEnv::read`]), sealed until [`CodeEnv::open`].
#[derive(Debug, Clone)]
pub struct SealedEnv {
    stored: EnvItem,
    version: u64,
}

pub struct CodeEnv<'a> {
    store: &'a dyn ItemStore,
    keys: &'a dyn KeyService,
    tenant: AppId,
}

fn context(tenant: &AppId) -> EncryptionContext {
    EncryptionContext::new(tenant.as_str(), "code-env")
}

impl<'a> CodeEnv<'a> {
    pub fn new(store: &'a dyn ItemStore, keys: &'a dyn KeyService, tenant: &AppId) -> Self {
        Self { store, keys, tenant: tenant.clone() }
    }

    fn key(&self) -> ItemKey {
        ItemKey::new(format!("CODEENV#{}", self.tenant), "ENV")
    }

    /// The names and update times, without opening anything.
    pub async fn names(&self) -> Result<Vec<EnvEntry>, StoreError> {
        match self.store.get(&self.key()).await? {
            Some(item) => Ok(item.data::<EnvItem>()?.entries),
            None => Ok(Vec::new()),
        }
    }

    /// Every variable, opened (for a run, or to change one), and the version read.
    pub async fn load(&self) -> Result<(EnvVars, Option<u64>), EnvError> {
        let sealed = self.read().await?;
        let version = sealed.as_ref().map(|s| s.version);
        Ok((self.open(sealed).await?, version))
    }

    /// The variables as stored, still sealed: a read that can go beside others, before
    /// [`Self::open`] asks the key service.
    pub async fn read(&self) -> Result<Option<SealedEnv>, StoreError> {
        match self.store.get(&self.key()).await? {
            Some(item) => Ok(Some(SealedEnv { stored: item.data()?, version: item.version })),
            None => Ok(None),
        }
    }

    /// The variables `sealed` holds (none when nothing is stored), opened.
    pub async fn open(&self, sealed: Option<SealedEnv>) -> Result<EnvVars, EnvError> {
        let Some(SealedEnv { stored, .. }) = sealed else {
            return Ok(EnvVars::default());
        };
        let plain = open(self.keys, &context(&self.tenant), &stored.values).await?;
        let values = serde_json::from_slice(&plain).map_err(StoreError::encoding)?;
        Ok(EnvVars { entries: stored.entries, values })
    }

    /// [`Self::load`], and beside it a fresh data key for the changed set: a change then waits for
    /// the key service once (the read's `Decrypt` and the `GenerateDataKey` at once), not twice.
    pub async fn load_to_change(&self) -> Result<(EnvVars, Option<u64>, DataKey), EnvError> {
        let context = context(&self.tenant);
        let (loaded, fresh) = tokio::join!(self.load(), self.keys.generate_data_key(&context));
        let (vars, version) = loaded?;
        Ok((vars, version, fresh?))
    }

    /// Writes `set`, sealed under `fresh` (from [`Self::load_to_change`]), if the stored variables
    /// are still at `version`; [`StoreError::Conflict`] otherwise. An empty set deletes the item.
    pub async fn save(&self, set: &EnvVars, version: Option<u64>, fresh: DataKey) -> Result<(), EnvError> {
        let condition = version.map_or(Condition::Absent, Condition::Version);
        if set.entries.is_empty() {
            return Ok(self.store.delete(&self.key(), condition).await?);
        }
        let plain = serde_json::to_vec(&set.values).map_err(StoreError::encoding)?;
        let values = seal_under(fresh, &context(&self.tenant), &plain)?;
        let item = Item::new(self.key(), &EnvItem { entries: set.entries.clone(), values })?;
        self.store.put(item, condition).await?;
        Ok(())
    }
}

impl From<EnvError> for rp_domain::code::CodeError {
    fn from(e: EnvError) -> Self {
        match e {
            EnvError::Store(e) => e.into(),
            EnvError::Keys(e) => e.into(),
        }
    }
}
