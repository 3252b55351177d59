//! The KMS adapter of the key port: `GenerateDataKey`/`Decrypt` with an encryption context for
//! envelopes, `Sign` (`ECDSA_SHA_256` over a SHA-256 digest) and `GetPublicKey` for ES256.

use super::lazy::LazyClient;
use async_trait::async_trait;
use aws_sdk_kms::primitives::Blob;
use aws_sdk_kms::types::{DataKeySpec, MessageType, SigningAlgorithmSpec};
use aws_sdk_kms::Client;
use p256::pkcs8::DecodePublicKey;
use rp_ports::keys::*;
use sha2::{Digest, Sha256};
use tokio::sync::OnceCell;

/// Longest message KMS signs as RAW.
const KMS_RAW_LIMIT: usize = 4096;

pub struct KmsKeys {
    client: LazyClient<Client>,
    envelope_key_id: String,
    signing_key_id: String,
    public_key: OnceCell<p256::PublicKey>,
}

impl KmsKeys {
    pub fn new(
        client: impl Into<LazyClient<Client>>,
        envelope_key_id: impl Into<String>,
        signing_key_id: impl Into<String>,
    ) -> Self {
        Self {
            client: client.into(),
            envelope_key_id: envelope_key_id.into(),
            signing_key_id: signing_key_id.into(),
            public_key: OnceCell::new(),
        }
    }
}

#[async_trait]
impl KeyService for KmsKeys {
    async fn generate_data_key(&self, context: &EncryptionContext) -> Result<DataKey, KeyError> {
        let out = self
            .client
            .generate_data_key()
            .key_id(&self.envelope_key_id)
            .key_spec(DataKeySpec::Aes256)
            .set_encryption_context(Some(context.0.clone().into_iter().collect()))
            .send()
            .await
            .map_err(KeyError::unavailable)?;
        let plaintext: [u8; 32] =
            out.plaintext.as_ref().and_then(|b| b.as_ref().try_into().ok()).ok_or(KeyError::Decrypt)?;
        let wrapped = out.ciphertext_blob.map(Blob::into_inner).ok_or(KeyError::Decrypt)?;
        Ok(DataKey { plaintext, wrapped })
    }

    async fn decrypt_data_key(
        &self,
        wrapped: &[u8],
        context: &EncryptionContext,
    ) -> Result<[u8; 32], KeyError> {
        let result = self
            .client
            .decrypt()
            .key_id(&self.envelope_key_id)
            .ciphertext_blob(Blob::new(wrapped))
            .set_encryption_context(Some(context.0.clone().into_iter().collect()))
            .send()
            .await;
        let out = match result {
            Ok(out) => out,
            Err(e) => {
                let refused = e
                    .as_service_error()
                    .is_some_and(|s| s.is_invalid_ciphertext_exception() || s.is_incorrect_key_exception());
                return Err(if refused { KeyError::Decrypt } else { KeyError::unavailable(e) });
            }
        };
        out.plaintext.as_ref().and_then(|b| b.as_ref().try_into().ok()).ok_or(KeyError::Decrypt)
    }

    async fn sign_es256(&self, message: &[u8]) -> Result<Vec<u8>, KeyError> {
        // KMS hashes a RAW message itself (up to 4096 bytes); longer ones go as their digest.
        // (moto 5.2 hashes DIGEST messages again, so RAW is also what keeps the emulators honest.)
        let (payload, kind) = if message.len() <= KMS_RAW_LIMIT {
            (message.to_vec(), MessageType::Raw)
        } else {
            (Sha256::digest(message).to_vec(), MessageType::Digest)
        };
        let out = self
            .client
            .sign()
            .key_id(&self.signing_key_id)
            .message(Blob::new(payload))
            .message_type(kind)
            .signing_algorithm(SigningAlgorithmSpec::EcdsaSha256)
            .send()
            .await
            .map_err(KeyError::unavailable)?;
        let der = out.signature.ok_or(KeyError::Decrypt)?;
        // KMS answers DER; JWS wants the fixed-size r || s.
        let signature = p256::ecdsa::Signature::from_der(der.as_ref()).map_err(|_| KeyError::Decrypt)?;
        Ok(signature.to_bytes().to_vec())
    }

    async fn signing_public_key(&self) -> Result<p256::PublicKey, KeyError> {
        self.public_key
            .get_or_try_init(|| async {
                let out = self
                    .client
                    .get_public_key()
                    .key_id(&self.signing_key_id)
                    .send()
                    .await
                    .map_err(KeyError::unavailable)?;
                let der = out.public_key.ok_or(KeyError::Decrypt)?;
                p256::PublicKey::from_public_key_der(der.as_ref()).map_err(|_| KeyError::Decrypt)
            })
            .await
            .copied()
    }

    fn signing_key_id(&self) -> String {
        self.signing_key_id.clone()
    }
}
