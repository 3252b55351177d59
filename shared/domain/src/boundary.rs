//! What the domain shares with its ports: the ways a store, a queue and a key service can fail,
//! and a secret sealed by the key service. The lifecycles never call a port; these types are
//! here so that an area's error can carry a port's failure without the domain depending on the
//! ports (the ports crate re-exports them where their traits are).

use serde::{Deserialize, Serialize};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A write's condition did not hold (or a transaction was cancelled by one).
    #[error("the write's condition did not hold")]
    Conflict,
    /// A counter is at its limit.
    #[error("the counter is at its limit")]
    LimitReached,
    /// The request itself is invalid; see [`Invalid`] for which way.
    #[error("invalid store request: {0}")]
    Invalid(#[from] Invalid),
    /// The store is shedding load (DynamoDB throttling, a transaction in progress on the item)
    /// and the SDK's own retries did not get through: worth retrying a little later.
    #[error("the store is throttling requests")]
    Throttled(#[source] Box<dyn std::error::Error + Send + Sync>),
    #[error("stored data could not be encoded or decoded: {0}")]
    Encoding(String),
    #[error("the store is unavailable")]
    Unavailable(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// Why the store refused a request as invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Invalid {
    /// A cursor from another partition (another list, another tenant).
    #[error("the cursor belongs to another query")]
    ForeignCursor,
    #[error("a query limit must be at least 1")]
    ZeroLimit,
    #[error("a transaction takes 1 to {MAX_TRANSACTION_ITEMS} operations")]
    TransactionSize,
    #[error("a transaction may touch an item only once")]
    RepeatedKey,
    #[error("keys must be free of NUL")]
    MalformedKey,
    /// The store refused values the request carried (DynamoDB `ValidationException`): caused by
    /// input, so the caller gets a 400, never a 500.
    #[error("the store refused the request's values: {0}")]
    Rejected(String),
}

impl StoreError {
    pub fn encoding(err: impl std::fmt::Display) -> Self {
        StoreError::Encoding(err.to_string())
    }
}

/// An error that may be a lost optimistic race, which `rp_ports::retry_on_conflict` retries.
pub trait MaybeConflict {
    fn is_conflict(&self) -> bool;
}

impl MaybeConflict for StoreError {
    fn is_conflict(&self) -> bool {
        matches!(self, StoreError::Conflict)
    }
}

/// A failure every area shares: a bad field, or the store's, the key service's or the queue's.
/// Each area's error carries it as its `Failed` variant ([`shares_failures!`](crate::shares_failures)).
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    #[error(transparent)]
    Invalid(#[from] crate::validate::FieldError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Keys(#[from] KeyError),
    #[error(transparent)]
    Queue(#[from] QueueError),
}

impl MaybeConflict for Failure {
    fn is_conflict(&self) -> bool {
        matches!(self, Failure::Store(e) if e.is_conflict())
    }
}

/// An area error's `Failed(Failure)` variant, reached with `?` from a field error and each
/// port's: the area is a lost race exactly when the store's failure is one. One line per area,
/// so the ten area enums share one shape. `@from` gives the conversions alone (for an error
/// that decides its lost races itself, as the application layer's does).
#[macro_export]
macro_rules! shares_failures {
    (@from $area:ident) => {
        $crate::shares_failures!(@from $area: $crate::validate::FieldError, $crate::boundary::StoreError,
            $crate::boundary::KeyError, $crate::boundary::QueueError);
    };
    (@from $area:ident: $($failure:ty),+) => {$(
        impl From<$failure> for $area {
            fn from(e: $failure) -> Self {
                $area::Failed(e.into())
            }
        }
    )+};
    ($($area:ident),* $(,)?) => {$(
        $crate::shares_failures!(@from $area);

        impl $crate::boundary::MaybeConflict for $area {
            fn is_conflict(&self) -> bool {
                matches!(self, $area::Failed(f) if $crate::boundary::MaybeConflict::is_conflict(f))
            }
        }
    )*};
}

/// Most items a transaction may write, as in DynamoDB's `TransactWriteItems`.
pub const MAX_TRANSACTION_ITEMS: usize = 100;

/// The largest item a store keeps, as DynamoDB counts it (names and values, keys included):
/// 400 KB.
pub const MAX_ITEM_BYTES: usize = 400 * 1024;

/// The most a transaction may write, its items' sizes together, as in DynamoDB's
/// `TransactWriteItems`: 4 MB.
pub const MAX_TRANSACTION_BYTES: usize = 4 * 1024 * 1024;

/// The longest partition key a store holds, in bytes, as DynamoDB bounds it (on a table; its
/// sort key: [`MAX_SORT_KEY_BYTES`]). Neither may be empty.
pub const MAX_PARTITION_KEY_BYTES: usize = 2048;

/// The longest sort key a store holds, in bytes, as DynamoDB bounds it.
pub const MAX_SORT_KEY_BYTES: usize = 1024;

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The wrapped key or ciphertext does not open under this context (tampered, or another
    /// tenant's or purpose's secret).
    #[error("the secret could not be decrypted")]
    Decrypt,
    /// The key service refused the call for the request rate (KMS's request quotas) and the
    /// SDK's own retries did not get through: worth retrying a little later.
    #[error("the key service is throttling requests")]
    Throttled(#[source] Box<dyn std::error::Error + Send + Sync>),
    #[error("the key service is unavailable")]
    Unavailable(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// A push platform's answer (SNS mobile push).
#[derive(Debug, thiserror::Error)]
pub enum PushError {
    /// The endpoint is disabled or deleted: the token is no longer valid.
    #[error("the push endpoint is disabled or gone")]
    Gone,
    /// The platform refused the token.
    #[error("the push platform refused: {0}")]
    Refused(String),
    /// The platform application does not exist or is disabled.
    #[error("the platform application does not exist or is disabled")]
    NoApplication,
    #[error("the push service is unavailable")]
    Unavailable(#[source] Box<dyn std::error::Error + Send + Sync>),
}

#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    #[error("invalid queue request: {0}")]
    Invalid(String),
    #[error("the queue is unavailable")]
    Unavailable(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// A secret sealed under a data key of its own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Sealed {
    #[serde(with = "b64")]
    pub wrapped_key: Vec<u8>,
    #[serde(with = "b64")]
    pub nonce: Vec<u8>,
    #[serde(with = "b64")]
    pub ciphertext: Vec<u8>,
}

mod b64 {
    use base64::engine::general_purpose::STANDARD;
    use base64::Engine as _;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&STANDARD.encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        STANDARD.decode(text).map_err(serde::de::Error::custom)
    }
}

/// `E::unavailable(err)`: the service did not answer (a transport or server failure), the
/// cause kept as the error's source.
macro_rules! unavailable_from {
    ($($error:ident),+) => {$(
        impl $error {
            pub fn unavailable(err: impl std::error::Error + Send + Sync + 'static) -> Self {
                $error::Unavailable(Box::new(err))
            }
        }
    )+};
}

unavailable_from!(StoreError, KeyError, PushError, QueueError);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_condition_that_did_not_hold_is_a_lost_race() {
        assert!(StoreError::Conflict.is_conflict());
        assert!(Failure::Store(StoreError::Conflict).is_conflict());
        let others = [
            Failure::Store(StoreError::LimitReached),
            Failure::Store(StoreError::encoding("x")),
            Failure::Store(StoreError::Invalid(Invalid::ZeroLimit)),
            Failure::Invalid(crate::FieldError::new("f", "bad")),
            Failure::Keys(KeyError::Decrypt),
            Failure::Queue(QueueError::Invalid("x".into())),
        ];
        for other in others {
            assert!(!other.is_conflict(), "{other:?}");
        }
    }

    #[test]
    fn a_sealed_secret_keeps_its_bytes_as_base64_and_refuses_other_text() {
        let sealed = Sealed { wrapped_key: vec![0, 255], nonce: vec![1; 12], ciphertext: b"secret".to_vec() };
        let json = serde_json::to_value(&sealed).unwrap();
        assert_eq!(json["wrappedKey"], "AP8=");
        assert_eq!(serde_json::from_value::<Sealed>(json).unwrap(), sealed);
        let bad = serde_json::json!({"wrappedKey": "not base64!", "nonce": "", "ciphertext": ""});
        assert!(serde_json::from_value::<Sealed>(bad).is_err());
    }
}
