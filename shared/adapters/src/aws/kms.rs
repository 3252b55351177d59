//! The KMS adapter of the key port: `GenerateDataKey`/`Decrypt` with an encryption context.

use super::lazy::LazyClient;
use async_trait::async_trait;
use aws_sdk_kms::primitives::Blob;
use aws_sdk_kms::types::DataKeySpec;
use aws_sdk_kms::Client;
use rp_ports::keys::*;

pub struct KmsKeys {
    client: LazyClient<Client>,
    envelope_key_id: String,
}

impl KmsKeys {
    pub fn new(client: impl Into<LazyClient<Client>>, envelope_key_id: impl Into<String>) -> Self {
        Self { client: client.into(), envelope_key_id: envelope_key_id.into() }
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
}
