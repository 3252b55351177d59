//! The key port: envelope encryption, as KMS provides.
//!
//! Secrets are sealed with a fresh 256-bit data key each (AES-256-GCM); the data key is wrapped by
//! the key service under an encryption context naming the tenant and the purpose, so a sealed
//! secret cannot be opened for another tenant or another purpose.

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Nonce};
use async_trait::async_trait;
use rand::RngCore;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub use rp_domain::boundary::{KeyError, Sealed};

/// The encryption context bound to a wrapped data key (KMS `EncryptionContext`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EncryptionContext(pub BTreeMap<String, String>);

impl EncryptionContext {
    pub fn new(tenant: &str, purpose: &str) -> Self {
        let mut map = BTreeMap::new();
        map.insert("tenant".to_owned(), tenant.to_owned());
        map.insert("purpose".to_owned(), purpose.to_owned());
        Self(map)
    }

    /// The context with one more entry (a machine, a device).
    pub fn with(mut self, key: &str, value: &str) -> Self {
        self.0.insert(key.to_owned(), value.to_owned());
        self
    }

    /// A canonical byte form (sorted keys), used as AES-GCM associated data.
    pub fn canonical(&self) -> Vec<u8> {
        serde_json::to_vec(&self.0).expect("a string map always serializes")
    }
}

/// A fresh data key: the plaintext for one use, and its wrapped form to store.
pub struct DataKey {
    pub plaintext: [u8; 32],
    pub wrapped: Vec<u8>,
}

impl Drop for DataKey {
    fn drop(&mut self) {
        self.plaintext = [0; 32];
    }
}

#[async_trait]
pub trait KeyService: Send + Sync {
    async fn generate_data_key(&self, context: &EncryptionContext) -> Result<DataKey, KeyError>;

    async fn decrypt_data_key(
        &self,
        wrapped: &[u8],
        context: &EncryptionContext,
    ) -> Result<[u8; 32], KeyError>;
}

/// Which call a key service is asked to make.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyCall {
    GenerateDataKey,
    Decrypt,
}

/// What a [`Checked`] key service runs before each call: `Ok` lets the call go, an error fails
/// it unsent.
#[async_trait]
pub trait KeyCheck: Send + Sync {
    async fn check(&self, call: KeyCall, context: &EncryptionContext) -> Result<(), KeyError>;
}

/// `inner` with `check` run before each call: how a request's calls are held for its rate
/// limit ([`crate::held`]), counted against its tenant's share, or noted for IAM in tests.
pub struct Checked<C> {
    inner: std::sync::Arc<dyn KeyService>,
    check: C,
}

impl<C> Checked<C> {
    pub fn new(inner: std::sync::Arc<dyn KeyService>, check: C) -> Self {
        Self { inner, check }
    }
}

#[async_trait]
impl<C: KeyCheck> KeyService for Checked<C> {
    async fn generate_data_key(&self, context: &EncryptionContext) -> Result<DataKey, KeyError> {
        self.check.check(KeyCall::GenerateDataKey, context).await?;
        self.inner.generate_data_key(context).await
    }

    async fn decrypt_data_key(
        &self,
        wrapped: &[u8],
        context: &EncryptionContext,
    ) -> Result<[u8; 32], KeyError> {
        self.check.check(KeyCall::Decrypt, context).await?;
        self.inner.decrypt_data_key(wrapped, context).await
    }
}

/// Encrypts `plaintext` under a fresh data key bound to `context`.
pub async fn seal(
    keys: &dyn KeyService,
    context: &EncryptionContext,
    plaintext: &[u8],
) -> Result<Sealed, KeyError> {
    seal_under(keys.generate_data_key(context).await?, context, plaintext)
}

/// Encrypts `plaintext` under `data_key`, a fresh one generated for `context`: what [`seal`]
/// does once it has the key. A change to a sealed secret fetches the key beside its other reads
/// and seals with this, so it waits for the key service once rather than twice. The key is taken,
/// so it seals one secret only.
pub fn seal_under(
    data_key: DataKey,
    context: &EncryptionContext,
    plaintext: &[u8],
) -> Result<Sealed, KeyError> {
    let cipher = Aes256Gcm::new_from_slice(&data_key.plaintext).expect("a data key is 32 bytes");
    let mut nonce = [0u8; 12];
    rand::rngs::OsRng.fill_bytes(&mut nonce);
    let aad = context.canonical();
    let ciphertext = cipher
        .encrypt(Nonce::from_slice(&nonce), Payload { msg: plaintext, aad: &aad })
        .map_err(|_| KeyError::Decrypt)?;
    Ok(Sealed { wrapped_key: data_key.wrapped.clone(), nonce: nonce.to_vec(), ciphertext })
}

/// Decrypts a [`Sealed`] secret; fails with [`KeyError::Decrypt`] under any other context.
pub async fn open(
    keys: &dyn KeyService,
    context: &EncryptionContext,
    sealed: &Sealed,
) -> Result<Vec<u8>, KeyError> {
    if sealed.nonce.len() != 12 {
        return Err(KeyError::Decrypt);
    }
    let mut data_key = keys.decrypt_data_key(&sealed.wrapped_key, context).await?;
    let cipher = Aes256Gcm::new_from_slice(&data_key).expect("a data key is 32 bytes");
    data_key = [0; 32];
    let _ = data_key;
    let aad = context.canonical();
    cipher
        .decrypt(Nonce::from_slice(&sealed.nonce), Payload { msg: &sealed.ciphertext, aad: &aad })
        .map_err(|_| KeyError::Decrypt)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A key service that hands out one data key whatever the context: what a wrapping that
    /// forgot its context would do. The sealed bytes must still be bound to it.
    struct OneDataKey;

    #[async_trait]
    impl KeyService for OneDataKey {
        async fn generate_data_key(&self, _: &EncryptionContext) -> Result<DataKey, KeyError> {
            Ok(DataKey { plaintext: [7; 32], wrapped: b"wrapped".to_vec() })
        }

        async fn decrypt_data_key(&self, _: &[u8], _: &EncryptionContext) -> Result<[u8; 32], KeyError> {
            Ok([7; 32])
        }
    }

    #[tokio::test]
    async fn a_sealed_secret_is_bound_to_its_context_by_the_cipher_too() {
        let alice = EncryptionContext::new("app-a", "offline-tokens").with("device", "d-1");
        let sealed = seal(&OneDataKey, &alice, b"pins").await.unwrap();
        assert_eq!(open(&OneDataKey, &alice, &sealed).await.unwrap(), b"pins");
        for other in [
            EncryptionContext::new("app-b", "offline-tokens").with("device", "d-1"),
            EncryptionContext::new("app-a", "signing-key").with("device", "d-1"),
            EncryptionContext::new("app-a", "offline-tokens").with("device", "d-2"),
            EncryptionContext::new("app-a", "offline-tokens"),
        ] {
            assert!(matches!(open(&OneDataKey, &other, &sealed).await, Err(KeyError::Decrypt)), "{other:?}");
        }
        let short_nonce = Sealed { nonce: vec![0; 11], ..sealed.clone() };
        assert!(matches!(open(&OneDataKey, &alice, &short_nonce).await, Err(KeyError::Decrypt)));
    }
}
