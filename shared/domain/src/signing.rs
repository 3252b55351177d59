//! A tenant's token-signing keys: the P-256 keys its code customizations sign with
//! (`jwtCreateSignedJwt`, DECISIONS §8), each published in the tenant's own JWKS under its own
//! `kid`. The newest key is the active one; older keys stay published until an admin retires
//! them, so that tokens signed before a rotation keep verifying until they lapse.

use crate::validate::FieldError;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use p256::elliptic_curve::sec1::ToEncodedPoint;
use sha2::{Digest, Sha256};

/// Most keys one tenant publishes at once (the active one included).
pub const MAX_SIGNING_KEYS: usize = 5;

#[derive(Debug, thiserror::Error)]
pub enum SigningKeyError {
    #[error("kid: the app has no signing key {0}")]
    NotFound(String),
    #[error("kid: {0} is the app's active signing key; rotate to a new key before retiring it")]
    Active(String),
    #[error("the app publishes {MAX_SIGNING_KEYS} signing keys, the most it may; retire one first")]
    TooMany,
    /// A bad field, or a failure of the store, the key service or the queue.
    #[error(transparent)]
    Failed(#[from] crate::boundary::Failure),
}

crate::shares_failures!(SigningKeyError);

/// The key's id: its RFC 7638 JWK thumbprint (SHA-256 over the required members, in order),
/// base64url. The same key always gets the same id, and the id names nothing but the key.
pub fn key_id(public: &p256::PublicKey) -> String {
    let point = public.to_encoded_point(false);
    let coordinate = |c: Option<&p256::FieldBytes>| URL_SAFE_NO_PAD.encode(c.expect("an uncompressed point"));
    let members = format!(
        r#"{{"crv":"P-256","kty":"EC","x":"{}","y":"{}"}}"#,
        coordinate(point.x()),
        coordinate(point.y())
    );
    URL_SAFE_NO_PAD.encode(Sha256::digest(members.as_bytes()))
}

/// A `kid` as a request names it: a thumbprint ([`key_id`]), 43 base64url characters.
pub fn kid(value: &str) -> Result<&str, FieldError> {
    if value.len() != 43 || !value.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
        return Err(FieldError::new("kid", "must be a key id: 43 characters of base64url"));
    }
    Ok(value)
}

/// Whether a tenant that publishes `published` keys may add one.
pub fn may_add(published: usize) -> Result<(), SigningKeyError> {
    if published >= MAX_SIGNING_KEYS {
        return Err(SigningKeyError::TooMany);
    }
    Ok(())
}

/// Where `kid` is among `kids` (oldest first, the last active), if it may be retired: the
/// active key may not, since the tenant's tokens would then have no key to be signed with.
pub fn retirement(kids: &[&str], kid: &str) -> Result<usize, SigningKeyError> {
    let at = kids.iter().position(|k| *k == kid).ok_or_else(|| SigningKeyError::NotFound(kid.to_owned()))?;
    if at + 1 == kids.len() {
        return Err(SigningKeyError::Active(kid.to_owned()));
    }
    Ok(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_id_is_the_rfc_7638_thumbprint() {
        // RFC 7638 §3.1 computes it for an RSA key; for P-256 the members are crv, kty, x, y.
        // The key is the JWK of RFC 7515 appendix A.3; the value was computed apart from this code.
        let x = URL_SAFE_NO_PAD.decode("f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU").unwrap();
        let y = URL_SAFE_NO_PAD.decode("x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0").unwrap();
        let mut sec1 = vec![4u8];
        sec1.extend(x);
        sec1.extend(y);
        let key = p256::PublicKey::from_sec1_bytes(&sec1).unwrap();
        assert_eq!(key_id(&key), "oKIywvGUpTVTyxMQ3bwIIeQUudfr_CkLMjCE19ECD-U");
    }

    #[test]
    fn the_active_key_is_not_retired_and_an_unknown_one_is_not_found() {
        let kids = ["a", "b", "c"];
        assert_eq!(retirement(&kids, "a").unwrap(), 0);
        assert_eq!(retirement(&kids, "b").unwrap(), 1);
        assert!(matches!(retirement(&kids, "c"), Err(SigningKeyError::Active(k)) if k == "c"));
        assert!(matches!(retirement(&kids, "z"), Err(SigningKeyError::NotFound(k)) if k == "z"));
        assert!(matches!(retirement(&[], "z"), Err(SigningKeyError::NotFound(_))));
    }

    #[test]
    fn a_kid_is_43_characters_of_base64url() {
        assert!(kid("oKIywvGUpTVTyxMQ3bwIIeQUudfr_CkLMjCE19ECD-U").is_ok());
        for bad in [
            "",
            "short",
            "oKIywvGUpTVTyxMQ3bwIIeQUudfr_CkLMjCE19ECD-U=",
            "oKIywvGUpTVTyxMQ3bwIIeQUudfr/CkLMjCE19ECD-U",
        ] {
            assert_eq!(kid(bad).unwrap_err().field, "kid", "{bad}");
        }
    }

    #[test]
    fn a_tenant_publishes_at_most_five_keys() {
        assert!(may_add(0).is_ok());
        assert!(may_add(MAX_SIGNING_KEYS - 1).is_ok());
        assert!(matches!(may_add(MAX_SIGNING_KEYS), Err(SigningKeyError::TooMany)));
    }
}
