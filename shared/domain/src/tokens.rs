//! Opaque bearer tokens (DECISIONS §2).
//!
//! A token is `rpt_` followed by 32 random bytes in base64url (256 bits). Only its SHA-256 is
//! stored. Its id is the first 16 hex digits of that hash, so a presented token is found with one
//! key lookup and then compared in full, in constant time. The id is public (it is listed and
//! used to revoke); it reveals nothing that helps guess the token.

use super::apps::AppId;
use super::time::EpochMillis;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use rand::RngCore;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum TokenKind {
    /// Global: certificate queue, RP apps, tokens, customizations, events.
    ControlCenterAdmin,
    /// Scoped to one RP app: OOB, client registration, enrollment.
    Access,
}

/// A token's secret, as presented by a caller. Never logged: `Debug` hides it.
pub struct TokenSecret(String);

impl std::fmt::Debug for TokenSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenSecret(..)")
    }
}

pub const TOKEN_PREFIX: &str = "rpt_";
/// Shortest token a caller may present.
pub const MIN_TOKEN_LEN: usize = 16;
/// Shortest token an operator may choose (`LOCAL_ADMIN_TOKEN`, `rp-admin --token`): tokens are
/// stored as an unsalted SHA-256, which is sound for the 256 random bits of a generated token
/// (no table or guess reaches them) but not for a short chosen one.
pub const MIN_CHOSEN_TOKEN_LEN: usize = 32;
pub const MAX_TOKEN_LEN: usize = 512;

impl TokenSecret {
    pub fn generate() -> Self {
        Self::generate_with_prefix(TOKEN_PREFIX)
    }

    /// A token of the same strength with another prefix (`rpd_` for device tokens).
    pub fn generate_with_prefix(prefix: &str) -> Self {
        let mut bytes = [0u8; 32];
        rand::rngs::OsRng.fill_bytes(&mut bytes);
        Self(format!("{prefix}{}", URL_SAFE_NO_PAD.encode(bytes)))
    }

    /// Accepts a presented token of plausible shape (printable ASCII, sane length).
    pub fn parse(value: &str) -> Option<Self> {
        let ok_len = (MIN_TOKEN_LEN..=MAX_TOKEN_LEN).contains(&value.len());
        let ok_chars = value.bytes().all(|b| b.is_ascii_graphic());
        (ok_len && ok_chars).then(|| Self(value.to_owned()))
    }

    /// Accepts an operator-chosen token: at least [`MIN_CHOSEN_TOKEN_LEN`] characters.
    pub fn parse_chosen(value: &str) -> Option<Self> {
        Self::parse(value).filter(|t| t.0.len() >= MIN_CHOSEN_TOKEN_LEN)
    }

    pub fn expose(&self) -> &str {
        &self.0
    }

    pub fn hash(&self) -> TokenHash {
        TokenHash(Sha256::digest(self.0.as_bytes()).into())
    }
}

/// SHA-256 of a token: what is stored.
#[derive(Clone, PartialEq, Eq)]
pub struct TokenHash([u8; 32]);

impl TokenHash {
    pub fn token_id(&self) -> String {
        hex::encode(&self.0[..8])
    }

    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }

    pub fn from_hex(text: &str) -> Option<Self> {
        let bytes = hex::decode(text).ok()?;
        Some(Self(bytes.try_into().ok()?))
    }

    /// Constant-time comparison.
    pub fn matches(&self, other: &TokenHash) -> bool {
        self.0.ct_eq(&other.0).into()
    }

    /// Whether this (presented) hash is the one a record stores as `hex`, compared in constant
    /// time; a stored value that is no hash matches nothing.
    pub fn is_stored_as(&self, hex: &str) -> bool {
        Self::from_hex(hex).is_some_and(|stored| stored.matches(self))
    }
}

/// A stored token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenRecord {
    pub token_id: String,
    pub kind: TokenKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_id: Option<AppId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Hex SHA-256 of the token.
    pub hash: String,
    pub created_at: EpochMillis,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<EpochMillis>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_at: Option<EpochMillis>,
}

/// Why a presented token was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenRefusal {
    Unknown,
    Expired,
    Revoked,
}

/// A stored record a presented token is checked against: an API token, a device token.
pub trait Credential: Sized {
    type Refusal;
    /// The refusal of a token that no record stands for.
    const UNKNOWN: Self::Refusal;
    /// Checks a presented token against this record at `now`.
    fn admit(&self, presented: &TokenHash, now: EpochMillis) -> Result<(), Self::Refusal>;
}

/// The record `found` under a presented token's id, if it admits that token at `now`.
pub fn admitted<C: Credential>(
    found: Option<C>,
    presented: &TokenHash,
    now: EpochMillis,
) -> Result<C, C::Refusal> {
    let record = found.ok_or(C::UNKNOWN)?;
    record.admit(presented, now)?;
    Ok(record)
}

impl Credential for TokenRecord {
    type Refusal = TokenRefusal;
    const UNKNOWN: TokenRefusal = TokenRefusal::Unknown;
    fn admit(&self, presented: &TokenHash, now: EpochMillis) -> Result<(), TokenRefusal> {
        if !presented.is_stored_as(&self.hash) {
            return Err(TokenRefusal::Unknown);
        }
        self.live_at(now)
    }
}

impl TokenRecord {
    /// Whether the token still admits its holder at `now`: not revoked, not expired.
    pub fn live_at(&self, now: EpochMillis) -> Result<(), TokenRefusal> {
        if self.revoked_at.is_some() {
            return Err(TokenRefusal::Revoked);
        }
        if self.expires_at.is_some_and(|at| at <= now) {
            return Err(TokenRefusal::Expired);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(secret: &TokenSecret) -> TokenRecord {
        let hash = secret.hash();
        TokenRecord {
            token_id: hash.token_id(),
            kind: TokenKind::Access,
            app_id: None,
            description: None,
            hash: hash.to_hex(),
            created_at: EpochMillis(0),
            expires_at: Some(EpochMillis(1_000)),
            revoked_at: None,
        }
    }

    #[test]
    fn generated_tokens_carry_256_bits() {
        let a = TokenSecret::generate();
        let b = TokenSecret::generate();
        assert!(a.expose().starts_with(TOKEN_PREFIX));
        assert_eq!(a.expose().len(), TOKEN_PREFIX.len() + 43);
        assert_ne!(a.expose(), b.expose());
        assert_eq!(a.hash().token_id().len(), 16);
    }

    #[test]
    fn admit_checks_hash_expiry_and_revocation() {
        let secret = TokenSecret::generate();
        let mut rec = record(&secret);
        assert_eq!(rec.admit(&secret.hash(), EpochMillis(999)), Ok(()));
        assert_eq!(rec.admit(&secret.hash(), EpochMillis(1_000)), Err(TokenRefusal::Expired));
        assert_eq!(rec.admit(&TokenSecret::generate().hash(), EpochMillis(0)), Err(TokenRefusal::Unknown));
        rec.revoked_at = Some(EpochMillis(5));
        assert_eq!(rec.admit(&secret.hash(), EpochMillis(0)), Err(TokenRefusal::Revoked));
    }

    #[test]
    fn presented_tokens_are_shape_checked() {
        assert!(TokenSecret::parse("short").is_none());
        assert!(TokenSecret::parse("has a space in the token").is_none());
        assert!(TokenSecret::parse(&"x".repeat(MAX_TOKEN_LEN + 1)).is_none());
        assert!(TokenSecret::parse("local-dev-admin-token").is_some());
        assert!(TokenSecret::parse_chosen("local-dev-admin-token").is_none(), "chosen tokens are longer");
        assert!(TokenSecret::parse_chosen("local-dev-admin-token-0123456789").is_some());
        assert_eq!(format!("{:?}", TokenSecret::generate()), "TokenSecret(..)");
    }
}
