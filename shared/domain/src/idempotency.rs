//! A create sent again under its `Idempotency-Key` (the IETF draft
//! `draft-ietf-httpapi-idempotency-key-header`): the key, checked, and what the first create under
//! it keeps, so that the same request sent again is answered with what the first made, and
//! another request under the same key is refused.

use crate::FieldError;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The request header.
pub const HEADER: &str = "Idempotency-Key";
/// The longest key.
pub const MAX_KEY: usize = 255;
/// How long a key holds after its first create.
pub const KEPT_SECS: i64 = 24 * 3600;

/// A client's key for one create: 1 to 255 visible ASCII characters but `"` and `\`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    /// The header's value, as the draft writes it (a structured-field string, `"…"`) or bare (as
    /// most clients send it).
    pub fn parse(value: &str) -> Result<Self, FieldError> {
        let key = value.strip_prefix('"').and_then(|v| v.strip_suffix('"')).unwrap_or(value);
        let allowed = |c: char| c.is_ascii_graphic() && c != '"' && c != '\\';
        if key.is_empty() || key.len() > MAX_KEY || !key.chars().all(allowed) {
            return Err(FieldError::new(
                HEADER,
                format!(
                    "must be 1 to {MAX_KEY} visible ASCII characters (no quote or backslash), quoted or not"
                ),
            ));
        }
        Ok(Self(key.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// What the first create under a key made, and the fingerprint of its request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FirstCreate {
    pub id: i64,
    pub fingerprint: String,
}

/// What a create under a key finds the key holding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SentAgain {
    /// The same request: answer with what the first made (`id`).
    Same(i64),
    /// Another request under a key already used: refused.
    Other,
}

impl FirstCreate {
    /// A create whose request has `fingerprint`, under the key this holds.
    pub fn judge(&self, fingerprint: &str) -> SentAgain {
        if self.fingerprint == fingerprint {
            SentAgain::Same(self.id)
        } else {
            SentAgain::Other
        }
    }
}

/// A request's fingerprint: the SHA-256 of `made`, what it would make with no id and no time
/// (every field the client gave, nothing the server adds), as JSON, whose maps are in key order.
pub fn fingerprint(made: &impl Serialize) -> String {
    let json = serde_json::to_vec(made).expect("a record serializes");
    hex::encode(Sha256::digest(json))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_taken_quoted_or_bare_and_checked() {
        for (sent, key) in
            [("\"8e03978e-40d5\"", "8e03978e-40d5"), ("8e03978e-40d5", "8e03978e-40d5"), ("a", "a")]
        {
            assert_eq!(IdempotencyKey::parse(sent).unwrap().as_str(), key, "{sent}");
        }
        assert!(IdempotencyKey::parse(&"k".repeat(MAX_KEY)).is_ok());
        for bad in ["", "\"\"", "a b", "a\\b", "a\"b", "é", "\"a", &"k".repeat(MAX_KEY + 1)] {
            assert_eq!(IdempotencyKey::parse(bad).unwrap_err().field, HEADER, "{bad:?}");
        }
    }

    #[test]
    fn the_same_request_is_answered_with_the_first_create_and_another_refused() {
        let first = FirstCreate { id: 7, fingerprint: fingerprint(&serde_json::json!({"b": 1, "a": [2]})) };
        let same = fingerprint(&serde_json::json!({"a": [2], "b": 1}));
        assert_eq!(first.judge(&same), SentAgain::Same(7), "a map's order does not matter");
        assert_eq!(first.judge(&fingerprint(&serde_json::json!({"a": [2], "b": 2}))), SentAgain::Other);
    }
}
