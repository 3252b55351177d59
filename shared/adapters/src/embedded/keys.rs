//! The local key file: an AES-256 master key that wraps data keys.
//!
//! Created on first start with mode 0600 (written to a temporary file, then linked into place so
//! two processes starting at once agree on one key file). Wrapped data keys are
//! `nonce (12) || AES-256-GCM(master, data key, aad = encryption context)`, so a data key only
//! unwraps under the context it was made for, as with KMS.

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Nonce};
use async_trait::async_trait;
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use rand::RngCore;
use rp_ports::keys::*;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::Path;

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
// A file written before signing left the key port also holds a `signingKey`: it is read past.
struct KeyFileContents {
    version: u8,
    master_key: String,
}

pub struct LocalKeyFile {
    master: Aes256Gcm,
}

impl LocalKeyFile {
    /// Loads `path`, creating it (mode 0600) with fresh keys if it does not exist.
    pub fn open_or_create(path: &Path) -> std::io::Result<Self> {
        match std::fs::read(path) {
            Ok(bytes) => {
                Self::check_private(path)?;
                Self::parse(&bytes)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Self::create(path)?;
                Self::parse(&std::fs::read(path)?)
            }
            Err(e) => Err(e),
        }
    }

    /// Refuses a key file that others than its owner can read or write.
    fn check_private(path: &Path) -> std::io::Result<()> {
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(path)?.permissions().mode() & 0o777;
            if mode & 0o077 != 0 {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::PermissionDenied,
                    format!("{} is open to others (mode {mode:o}); run chmod 600 on it", path.display()),
                ));
            }
        }
        let _ = path;
        Ok(())
    }

    fn create(path: &Path) -> std::io::Result<()> {
        let mut master = [0u8; 32];
        rand::rngs::OsRng.fill_bytes(&mut master);
        let contents = KeyFileContents { version: 1, master_key: STANDARD.encode(master) };
        let json = serde_json::to_vec_pretty(&contents).expect("key file serializes");
        let tmp = path.with_extension(format!("tmp-{}", uuid::Uuid::new_v4()));
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut file = options.open(&tmp)?;
        file.write_all(&json)?;
        file.sync_all()?;
        drop(file);
        // A hard link fails if the target exists: whoever links first wins, the other reads it.
        let linked = std::fs::hard_link(&tmp, path);
        std::fs::remove_file(&tmp)?;
        match linked {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => Err(e),
            _ => Ok(()),
        }
    }

    fn parse(bytes: &[u8]) -> std::io::Result<Self> {
        let invalid = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_owned());
        let contents: KeyFileContents =
            serde_json::from_slice(bytes).map_err(|_| invalid("key file is not valid JSON"))?;
        let master = STANDARD.decode(contents.master_key).map_err(|_| invalid("bad master key"))?;
        let master = Aes256Gcm::new_from_slice(&master).map_err(|_| invalid("bad master key"))?;
        Ok(Self { master })
    }
}

#[async_trait]
impl KeyService for LocalKeyFile {
    async fn generate_data_key(&self, context: &EncryptionContext) -> Result<DataKey, KeyError> {
        let mut plaintext = [0u8; 32];
        rand::rngs::OsRng.fill_bytes(&mut plaintext);
        let mut nonce = [0u8; 12];
        rand::rngs::OsRng.fill_bytes(&mut nonce);
        let aad = context.canonical();
        let sealed = self
            .master
            .encrypt(Nonce::from_slice(&nonce), Payload { msg: &plaintext, aad: &aad })
            .map_err(|_| KeyError::Decrypt)?;
        let mut wrapped = nonce.to_vec();
        wrapped.extend_from_slice(&sealed);
        Ok(DataKey { plaintext, wrapped })
    }

    async fn decrypt_data_key(
        &self,
        wrapped: &[u8],
        context: &EncryptionContext,
    ) -> Result<[u8; 32], KeyError> {
        if wrapped.len() < 12 {
            return Err(KeyError::Decrypt);
        }
        let (nonce, sealed) = wrapped.split_at(12);
        let aad = context.canonical();
        let plain = self
            .master
            .decrypt(Nonce::from_slice(nonce), Payload { msg: sealed, aad: &aad })
            .map_err(|_| KeyError::Decrypt)?;
        plain.try_into().map_err(|_| KeyError::Decrypt)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_key_file_written_with_a_signing_key_still_opens() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys.json");
        let master = STANDARD.encode([7u8; 32]);
        let earlier = format!(r#"{{"version": 1, "masterKey": "{master}", "signingKey": "AAAA"}}"#);
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        options.open(&path).unwrap().write_all(earlier.as_bytes()).unwrap();
        let keys = LocalKeyFile::open_or_create(&path).unwrap();
        let context = EncryptionContext::new("app", "purpose");
        let key = keys.generate_data_key(&context).await.unwrap();
        assert_eq!(keys.decrypt_data_key(&key.wrapped, &context).await.unwrap(), key.plaintext);
    }

    #[tokio::test]
    async fn a_new_key_file_holds_the_master_key_alone_and_opens_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys.json");
        let first = LocalKeyFile::open_or_create(&path).unwrap();
        let written: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        let fields: Vec<&str> = written.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(fields, ["masterKey", "version"]);
        let context = EncryptionContext::new("app", "purpose");
        let key = first.generate_data_key(&context).await.unwrap();
        let again = LocalKeyFile::open_or_create(&path).unwrap();
        assert_eq!(again.decrypt_data_key(&key.wrapped, &context).await.unwrap(), key.plaintext);
        let other = EncryptionContext::new("other", "purpose");
        assert!(matches!(again.decrypt_data_key(&key.wrapped, &other).await, Err(KeyError::Decrypt)));
    }

    /// Two starts at once: the one that links its key file second keeps the first one's, so
    /// both wrap and unwrap under one master key.
    #[tokio::test]
    async fn a_start_that_loses_the_race_for_the_key_file_takes_the_winners() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys.json");
        let first = LocalKeyFile::open_or_create(&path).unwrap();
        let written = std::fs::read(&path).unwrap();
        LocalKeyFile::create(&path).expect("losing the race is not an error");
        assert_eq!(std::fs::read(&path).unwrap(), written, "the winner's key file stays");
        let leftovers = std::fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(leftovers, 1, "the loser's temporary file is removed");
        let context = EncryptionContext::new("app", "purpose");
        let key = first.generate_data_key(&context).await.unwrap();
        let second = LocalKeyFile::open_or_create(&path).unwrap();
        assert_eq!(second.decrypt_data_key(&key.wrapped, &context).await.unwrap(), key.plaintext);
    }
}
