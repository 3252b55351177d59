//! The KMS adapter of the key port: `GenerateDataKey`/`Decrypt` with an encryption context.

use super::lazy::LazyClient;
use async_trait::async_trait;
use aws_sdk_kms::error::{ProvideErrorMetadata, SdkError};
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
            .map_err(classify)?;
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
        let out = self
            .client
            .decrypt()
            .key_id(&self.envelope_key_id)
            .ciphertext_blob(Blob::new(wrapped))
            .set_encryption_context(Some(context.0.clone().into_iter().collect()))
            .send()
            .await
            .map_err(classify)?;
        out.plaintext.as_ref().and_then(|b| b.as_ref().try_into().ok()).ok_or(KeyError::Decrypt)
    }
}

/// A ciphertext that does not open (tampered, another context's, another key's) is
/// [`KeyError::Decrypt`]; KMS refusing the call for its request rate is throttling (a 503 with
/// `Retry-After`); anything else means the key service is unavailable.
fn classify<E, R>(err: SdkError<E, R>) -> KeyError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    match err.as_service_error().and_then(|e| e.code()) {
        Some("InvalidCiphertextException" | "IncorrectKeyException") => KeyError::Decrypt,
        Some("ThrottlingException") => KeyError::Throttled(Box::new(err)),
        _ => KeyError::unavailable(err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kms(answers: Vec<(u16, String)>) -> (KmsKeys, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
        let (config, calls) = crate::aws::standin::answering(answers);
        (KmsKeys::new(Client::new(&config), "alias/envelope"), calls)
    }

    fn refusal(status: u16, kind: &str) -> (u16, String) {
        (status, serde_json::json!({"__type": kind, "message": "refused"}).to_string())
    }

    /// KMS refusing a call for its request rate is throttling (the API answers 503 with
    /// `Retry-After`), after the SDK's own retries; a ciphertext KMS does not open is a
    /// decryption failure; any other refusal, unavailable. No emulator here throttles: a
    /// stand-in on loopback answers for KMS.
    #[tokio::test]
    async fn kms_refusals_are_told_apart() {
        let context = EncryptionContext::new("app", "purpose");
        let (keys, calls) = kms(vec![refusal(400, "ThrottlingException")]);
        let throttled = keys.generate_data_key(&context).await.err();
        assert!(matches!(throttled, Some(KeyError::Throttled(_))), "{throttled:?}");
        assert_eq!(calls.lock().unwrap().len(), 3, "the SDK's retries came first");
        let (keys, _) = kms(vec![refusal(400, "ThrottlingException")]);
        let throttled = keys.decrypt_data_key(b"wrapped", &context).await;
        assert!(matches!(throttled, Err(KeyError::Throttled(_))), "{throttled:?}");

        let (keys, calls) = kms(vec![refusal(400, "InvalidCiphertextException")]);
        let refused = keys.decrypt_data_key(b"wrapped", &context).await;
        assert!(matches!(refused, Err(KeyError::Decrypt)), "{refused:?}");
        assert_eq!(calls.lock().unwrap().len(), 1);

        let (keys, _) = kms(vec![refusal(400, "DisabledException")]);
        let disabled = keys.generate_data_key(&context).await.err();
        assert!(matches!(disabled, Some(KeyError::Unavailable(_))), "{disabled:?}");
    }
}
