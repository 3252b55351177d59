//! Operator console sessions (docs/console.md): an admin signs in with an admin token once and
//! gets a session for a few hours. The browser holds only the session's random id (in an
//! `HttpOnly` cookie); the store holds only its SHA-256, found by the hash's prefix and compared
//! in full in constant time, as API tokens are. A session stands for its token: it ends when the
//! token is revoked or expires, and it never outlives it.

use crate::apps::AppId;
use crate::time::EpochMillis;
use crate::tokens::{admitted, TokenHash, TokenKind, TokenRecord, TokenRefusal, TokenSecret};
use serde::{Deserialize, Serialize};
use subtle::ConstantTimeEq;

/// The prefix of a session id (`rps_` and 32 random bytes, base64url).
pub const SESSION_PREFIX: &str = "rps_";
/// How long a session lasts at most.
pub const SESSION_SECS: i64 = 8 * 3600;
/// Failed sign-ins one client may make in a window; the next ones are refused unread.
pub const SIGN_IN_FAILURES: i64 = 5;
/// The window of [`SIGN_IN_FAILURES`].
pub const SIGN_IN_WINDOW_SECS: i64 = 300;

/// A console session as stored: never the id itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConsoleSession {
    /// The first 16 hex digits of the id's SHA-256: the key it is found by.
    pub session_id: String,
    /// Hex SHA-256 of the id.
    pub hash: String,
    /// The admin token the session stands for.
    pub token_id: String,
    /// The token's scope: `None` for a global admin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_id: Option<AppId>,
    /// The token every state-changing form of this session carries.
    pub csrf: String,
    pub created_at: EpochMillis,
    pub expires_at: EpochMillis,
}

/// Why a sign-in was refused; the token is never part of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignInRefusal {
    /// Not a token, or no token like it.
    Unknown,
    Expired,
    Revoked,
    /// An access token: the console is for admins.
    NotAdmin,
}

impl SignInRefusal {
    /// The reason as a log line gives it.
    pub fn reason(self) -> &'static str {
        match self {
            Self::Unknown => "unknown token",
            Self::Expired => "expired token",
            Self::Revoked => "revoked token",
            Self::NotAdmin => "not an admin token",
        }
    }
}

impl From<TokenRefusal> for SignInRefusal {
    fn from(refusal: TokenRefusal) -> Self {
        match refusal {
            TokenRefusal::Unknown => Self::Unknown,
            TokenRefusal::Expired => Self::Expired,
            TokenRefusal::Revoked => Self::Revoked,
        }
    }
}

/// Whether `record` (found for `presented`) may sign in to the console at `now`: a live admin
/// token whose hash matches in full.
pub fn admit(
    record: Option<TokenRecord>,
    presented: &TokenHash,
    now: EpochMillis,
) -> Result<TokenRecord, SignInRefusal> {
    let record = admitted(record, presented, now)?;
    match record.kind {
        TokenKind::ControlCenterAdmin => Ok(record),
        TokenKind::Access => Err(SignInRefusal::NotAdmin),
    }
}

impl ConsoleSession {
    /// A new session for `token` at `now`: its id (for the cookie, never stored) and its record.
    /// It ends after [`SESSION_SECS`], or when the token does if that is sooner.
    pub fn open(token: &TokenRecord, now: EpochMillis) -> (TokenSecret, Self) {
        let secret = TokenSecret::generate_with_prefix(SESSION_PREFIX);
        let hash = secret.hash();
        let longest = now.plus_secs(SESSION_SECS);
        let expires_at = token.expires_at.map_or(longest, |at| at.min(longest));
        let csrf = TokenSecret::generate_with_prefix("").expose().to_owned();
        let session = Self {
            session_id: hash.token_id(),
            hash: hash.to_hex(),
            token_id: token.token_id.clone(),
            app_id: token.app_id.clone(),
            csrf,
            created_at: now,
            expires_at,
        };
        (secret, session)
    }

    /// Whether `presented` (a cookie's id, hashed) is this session's, and the session is live at
    /// `now`: the whole hash is compared, in constant time.
    pub fn admits(&self, presented: &TokenHash, now: EpochMillis) -> bool {
        presented.is_stored_as(&self.hash) && now < self.expires_at
    }

    /// Whether a form's CSRF token is this session's, compared in constant time.
    pub fn csrf_matches(&self, presented: &str) -> bool {
        let (ours, theirs) = (self.csrf.as_bytes(), presented.as_bytes());
        ours.len() == theirs.len() && bool::from(ours.ct_eq(theirs))
    }

    /// Whether the session may act for `app`: a global admin's for every app, a scoped admin's
    /// for its own only.
    pub fn may_act_for(&self, app: &AppId) -> bool {
        self.app_id.as_ref().is_none_or(|own| own == app)
    }
}

/// The start of the sign-in window holding `now` (epoch seconds), and its end.
pub fn sign_in_window(now_secs: i64) -> (i64, i64) {
    let start = now_secs - now_secs.rem_euclid(SIGN_IN_WINDOW_SECS);
    (start, start + SIGN_IN_WINDOW_SECS)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: EpochMillis = EpochMillis(1_800_000_000_000);

    fn token(kind: TokenKind, secret: &TokenSecret) -> TokenRecord {
        let hash = secret.hash();
        TokenRecord {
            token_id: hash.token_id(),
            kind,
            app_id: None,
            description: None,
            hash: hash.to_hex(),
            created_at: NOW,
            expires_at: None,
            revoked_at: None,
        }
    }

    #[test]
    fn only_a_live_admin_token_signs_in() {
        let secret = TokenSecret::generate();
        let admin = token(TokenKind::ControlCenterAdmin, &secret);
        assert_eq!(admit(Some(admin.clone()), &secret.hash(), NOW), Ok(admin.clone()));
        assert_eq!(admit(None, &secret.hash(), NOW), Err(SignInRefusal::Unknown));
        let other = TokenSecret::generate();
        assert_eq!(admit(Some(admin.clone()), &other.hash(), NOW), Err(SignInRefusal::Unknown));
        let access = token(TokenKind::Access, &secret);
        assert_eq!(admit(Some(access), &secret.hash(), NOW), Err(SignInRefusal::NotAdmin));
        let revoked = TokenRecord { revoked_at: Some(NOW), ..admin.clone() };
        assert_eq!(admit(Some(revoked), &secret.hash(), NOW), Err(SignInRefusal::Revoked));
        let expired = TokenRecord { expires_at: Some(NOW), ..admin };
        assert_eq!(admit(Some(expired), &secret.hash(), NOW), Err(SignInRefusal::Expired));
    }

    #[test]
    fn a_session_admits_its_own_id_until_it_expires() {
        let admin = token(TokenKind::ControlCenterAdmin, &TokenSecret::generate());
        let (id, session) = ConsoleSession::open(&admin, NOW);
        assert!(id.expose().starts_with(SESSION_PREFIX));
        assert_eq!(session.session_id, id.hash().token_id());
        assert!(!session.hash.contains(id.expose()), "the id itself is not stored");
        assert!(session.admits(&id.hash(), NOW));
        assert!(!session.admits(&TokenSecret::generate_with_prefix(SESSION_PREFIX).hash(), NOW));
        assert!(!session.admits(&id.hash(), NOW.plus_secs(SESSION_SECS)));
        assert_eq!(session.expires_at, NOW.plus_secs(SESSION_SECS));
    }

    #[test]
    fn a_session_never_outlives_its_token() {
        let mut admin = token(TokenKind::ControlCenterAdmin, &TokenSecret::generate());
        admin.expires_at = Some(NOW.plus_secs(60));
        let (_, session) = ConsoleSession::open(&admin, NOW);
        assert_eq!(session.expires_at, NOW.plus_secs(60));
    }

    #[test]
    fn csrf_tokens_compare_in_full() {
        let admin = token(TokenKind::ControlCenterAdmin, &TokenSecret::generate());
        let (_, session) = ConsoleSession::open(&admin, NOW);
        assert!(session.csrf.len() >= 40);
        assert!(session.csrf_matches(&session.csrf.clone()));
        assert!(!session.csrf_matches(""));
        assert!(!session.csrf_matches(&session.csrf[..10]));
        let (_, other) = ConsoleSession::open(&admin, NOW);
        assert!(!session.csrf_matches(&other.csrf));
    }

    #[test]
    fn a_scoped_session_acts_for_its_app_only() {
        let mut admin = token(TokenKind::ControlCenterAdmin, &TokenSecret::generate());
        let (_, global) = ConsoleSession::open(&admin, NOW);
        let (acme, other) = (AppId::parse("appId", "acme").unwrap(), AppId::parse("appId", "other").unwrap());
        assert!(global.may_act_for(&acme) && global.may_act_for(&other));
        admin.app_id = Some(acme.clone());
        let (_, scoped) = ConsoleSession::open(&admin, NOW);
        assert!(scoped.may_act_for(&acme));
        assert!(!scoped.may_act_for(&other));
    }

    #[test]
    fn sign_in_windows_are_fixed() {
        assert_eq!(sign_in_window(600), (600, 900));
        assert_eq!(sign_in_window(899), (600, 900));
    }
}
