//! Users, devices and their registration (DECISIONS §4).

use super::apps::AppId;
use super::time::EpochMillis;
use super::tokens::{Credential, TokenHash};
use super::validate::{self, FieldError};
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine as _;
use rand::RngCore;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// [`named_user`]'s rule (but its length) as the document states it, a pattern that reads the
/// same to JSON Schema (ECMA-262), Python and Rust regular expressions.
pub const NAMED_USER_PATTERN: &str = r"^[^\s\uFEFF#/\x00-\x08\x0B-\x0C\x0E-\x1F\x7F-\x9F]([^#/\x00-\x08\x0B-\x0C\x0E-\x1F\x7F-\x9F]*[^\s\uFEFF#/\x00-\x08\x0B-\x0C\x0E-\x1F\x7F-\x9F])?$";

/// A user name as registered (`alice@example.com`): 1 to 255 characters, no control characters,
/// no `/`, `#` or whitespace at either end.
pub fn named_user(field: &str, value: &str) -> Result<String, FieldError> {
    validate::text(field, value, 1, 255)?;
    // White space as the document's pattern (`\s`, ECMA-262) reads it: U+FEFF is.
    if value.trim_matches(validate::is_js_whitespace) != value {
        return Err(FieldError::new(field, "must not start or end with white space"));
    }
    if value.contains(['#', '/']) {
        return Err(FieldError::new(field, "must not contain '#' or '/'"));
    }
    Ok(value.to_owned())
}

/// A device or machine identifier: 1 to 128 of letters, digits, `.`, `_`, `-`, `:`.
pub fn identifier(field: &str, value: &str) -> Result<String, FieldError> {
    let ok = !value.is_empty()
        && value.len() <= 128
        && value.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b':'));
    if ok {
        Ok(value.to_owned())
    } else {
        Err(FieldError::new(field, "must be 1 to 128 letters, digits, '.', '_', '-' or ':'"))
    }
}

/// A P-256 public key, SEC1 (compressed or uncompressed) in standard base64; checked to be a
/// point on the curve. Returns the key and its canonical uncompressed base64 form.
pub fn public_key(field: &str, value: &str) -> Result<(p256::PublicKey, String), FieldError> {
    let bytes = STANDARD
        .decode(value)
        .map_err(|_| FieldError::new(field, "must be a base64 SEC1 P-256 public key"))?;
    let key = p256::PublicKey::from_sec1_bytes(&bytes)
        .map_err(|_| FieldError::new(field, "is not a valid P-256 point"))?;
    Ok((key, encode_public_key(&key)))
}

pub fn encode_public_key(key: &p256::PublicKey) -> String {
    use p256::elliptic_curve::sec1::ToEncodedPoint;
    STANDARD.encode(key.to_encoded_point(false).as_bytes())
}

/// A key's fingerprint (the enroll response's `authenticationKey`): base64url (no padding) of
/// the SHA-256 of the key's canonical text, i.e. of the ASCII bytes of the standard base64 of
/// its uncompressed SEC1 form, exactly as `deviceKey` carries it; not of the SEC1 bytes.
pub fn fingerprint(key_b64: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(key_b64.as_bytes()))
}

/// A one-time registration code: 128 random bits, base64url. Stored only as its hash.
pub struct RegistrationCode(String);

impl RegistrationCode {
    pub fn generate() -> Self {
        let mut bytes = [0u8; 16];
        rand::rngs::OsRng.fill_bytes(&mut bytes);
        Self(URL_SAFE_NO_PAD.encode(bytes))
    }

    /// A presented code of plausible shape.
    pub fn parse(field: &str, value: &str) -> Result<Self, FieldError> {
        let ok = (16..=64).contains(&value.len())
            && value.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if ok {
            Ok(Self(value.to_owned()))
        } else {
            Err(FieldError::new(field, "is not a registration code"))
        }
    }

    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The key it is stored under.
    pub fn digest(&self) -> String {
        hex::encode(Sha256::digest(self.0.as_bytes()))
    }
}

/// A one-time registration link for `(app, namedUser)`; stored under its code's hash.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LinkRecord {
    pub app_id: AppId,
    pub named_user: String,
    pub machine_user_name_ws: Option<String>,
    pub created_at: EpochMillis,
    pub expires_at: EpochMillis,
    pub used_at: Option<EpochMillis>,
    pub device_id: Option<String>,
    /// The token the registration gave the device (or gave it again, [`LinkUse::Again`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_id: Option<String>,
}

/// How a link takes a registration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkUse {
    /// It registers the device.
    Fresh,
    /// It registered this device, which sends the registration again because the reply was lost.
    Again,
}

impl LinkRecord {
    /// Whether the link can still register a device at `now`.
    pub fn check_usable(&self, now: EpochMillis) -> Result<(), RegistrationError> {
        if self.used_at.is_some() {
            return Err(RegistrationError::LinkUsed);
        }
        if self.expires_at <= now {
            return Err(RegistrationError::LinkExpired);
        }
        Ok(())
    }

    /// How the link takes a registration of `device_id` at `now`: anew while unused and live, or
    /// again while live if it registered that device.
    pub fn take(&self, device_id: &str, now: EpochMillis) -> Result<LinkUse, RegistrationError> {
        match self.check_usable(now) {
            Err(RegistrationError::LinkUsed)
                if self.device_id.as_deref() == Some(device_id) && now < self.expires_at =>
            {
                Ok(LinkUse::Again)
            }
            checked => checked.map(|()| LinkUse::Fresh),
        }
    }

    /// The link as used at `now` by `device_id`, given the token `token_id`.
    pub fn used_by(&self, device_id: &str, token_id: &str, now: EpochMillis) -> LinkRecord {
        LinkRecord {
            used_at: Some(now),
            device_id: Some(device_id.to_owned()),
            token_id: Some(token_id.to_owned()),
            ..self.clone()
        }
    }

    /// The used link, having given its device the token `token_id` again.
    pub fn gave_again(&self, token_id: &str) -> LinkRecord {
        LinkRecord { token_id: Some(token_id.to_owned()), ..self.clone() }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UserRecord {
    pub app_id: AppId,
    pub named_user: String,
    /// Other names the directory knows the user by (workstation names, e-mails).
    #[serde(default)]
    pub aliases: Vec<String>,
    pub created_at: EpochMillis,
}

impl UserRecord {
    /// Whether `name` is the user's own name or one of its aliases ([`same_name`]).
    pub fn is_known_as(&self, name: &str) -> bool {
        same_name(name, &self.named_user) || self.has_alias(name)
    }

    /// Whether `name` is one of the user's aliases ([`same_name`]).
    pub fn has_alias(&self, name: &str) -> bool {
        self.aliases.iter().any(|a| same_name(a, name))
    }
}

/// The form a user name has whatever its case (`CORP\Zoë`, `corp\ZOË`): lowercase, in full
/// Unicode, as Windows and directories take user names regardless of case. Aliases are filed
/// under it, so two names are one alias exactly when they are the same name here.
pub fn folded_name(name: &str) -> String {
    name.to_lowercase()
}

/// Whether `a` and `b` name the same user name ([`folded_name`]).
pub fn same_name(a: &str, b: &str) -> bool {
    a == b || folded_name(a) == folded_name(b)
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceRecord {
    pub app_id: AppId,
    pub named_user: String,
    pub device_id: String,
    pub friendly_name: String,
    pub model_number: String,
    /// Canonical (uncompressed SEC1, base64) P-256 keys.
    pub signing_public_key: String,
    pub key_agreement_public_key: String,
    pub registered_at: EpochMillis,
    pub token_id: String,
    /// When the device's token stops working: its expiry, or when an admin ended it. Absent on
    /// records from before it was kept: listing a user's devices learns it from the token then,
    /// and a device still without it counts as able to answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_ends_at: Option<EpochMillis>,
    /// Where a wake-up reaches the device, once it registered a push token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub push: Option<crate::push::PushRegistration>,
    /// The token the device traded last for its current one, which may still trade again (see
    /// [`SUPERSEDED_TOKEN_GRACE_SECS`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub superseded_token_id: Option<String>,
    /// When the device's current token was issued. Absent on records from before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_issued_at: Option<EpochMillis>,
}

impl DeviceRecord {
    /// Whether the device can call in at `now` (to fetch and answer a request, to claim a
    /// pairing): its token has not ended or expired. A device that cannot stays listed until it
    /// is removed, but no request goes to it unnamed.
    pub fn can_answer(&self, now: EpochMillis) -> bool {
        self.token_ends_at.is_none_or(|end| now < end)
    }

    /// The device with `token` as its token.
    pub fn with_token(self, token: &DeviceTokenRecord) -> Self {
        Self {
            token_id: token.token_id.clone(),
            token_ends_at: Some(token.expiry()),
            token_issued_at: Some(token.created_at),
            ..self
        }
    }

    /// Refuses, at `now`, a request that would replace the device's current token as sent again
    /// after a lost reply, when that token is too new for it ([`REPEAT_AFTER_SECS`]).
    fn repeat_allowed(&self, now: EpochMillis) -> Result<(), RegistrationError> {
        match self.token_issued_at {
            Some(at) if now < at.plus_secs(REPEAT_AFTER_SECS) => Err(RegistrationError::RepeatedTooSoon),
            _ => Ok(()),
        }
    }

    /// The device with its token ended at `now`.
    pub fn token_ended(self, now: EpochMillis) -> Self {
        Self { token_ends_at: Some(now), ..self }
    }

    /// Whether `registration`, taken again by `link` at `now` ([`LinkUse::Again`]), is the one
    /// that registered this device, sent again after a lost reply: the same keys, and the device
    /// still holds the token the link gave it (it did not refresh it since), issued long enough
    /// ago. Else the code is used (or, too soon, to be retried).
    pub fn registered_again(
        &self,
        link: &LinkRecord,
        registration: &Registration,
        now: EpochMillis,
    ) -> Result<(), RegistrationError> {
        let same = self.signing_public_key == registration.signing_public_key
            && self.key_agreement_public_key == registration.key_agreement_public_key
            && link.token_id.as_deref() == Some(self.token_id.as_str());
        if !same {
            return Err(RegistrationError::LinkUsed);
        }
        self.repeat_allowed(now)
    }

    /// How a refresh presented with `presented` (admitted for a refresh at `now`, see
    /// [`DeviceTokenRecord::admit_for_refresh`]) trades the device's token: its current token is
    /// superseded; the one it traded last, sent again because the reply was lost, replaces the
    /// current one (which never reached the device), once that one is old enough. Any other
    /// token has no token of the device to trade.
    pub fn trade_for(
        &self,
        presented: &DeviceTokenRecord,
        now: EpochMillis,
    ) -> Result<TokenTrade, RegistrationError> {
        if presented.token_id == self.token_id && presented.superseded_until.is_none() {
            Ok(TokenTrade::Supersede(presented.clone().superseded(now)))
        } else if self.superseded_token_id.as_deref() == Some(presented.token_id.as_str()) {
            self.repeat_allowed(now).map(|()| TokenTrade::Replace)
        } else {
            Err(RegistrationError::NoDeviceToken(self.device_id.clone()))
        }
    }

    /// The device with `new` as its token, traded by `trade`.
    pub fn traded(self, trade: &TokenTrade, new: &DeviceTokenRecord) -> Self {
        let superseded_token_id = match trade {
            TokenTrade::Supersede(old) => Some(old.token_id.clone()),
            TokenTrade::Replace => self.superseded_token_id.clone(),
        };
        Self { superseded_token_id, ..self.with_token(new) }
    }
}

/// What trading a device's token for a fresh one does to the token it holds now.
#[derive(Debug, Clone, PartialEq)]
pub enum TokenTrade {
    /// It stays, as this record, able to trade again until its grace ends; the token it
    /// superseded before goes.
    Supersede(DeviceTokenRecord),
    /// It goes.
    Replace,
}

/// How long a device token traded for a fresh one may still trade again, and do nothing else:
/// a device whose reply to its refresh was lost sends the refresh again with the token it
/// holds, and gets another fresh token in place of the lost one.
pub const SUPERSEDED_TOKEN_GRACE_SECS: i64 = 600;

/// How old the token a request would replace, as sent again after a lost reply (a registration,
/// a refresh), must be. One sent sooner was sent beside the first, not after losing its reply:
/// it is told to retry, and the token the first gave stands.
pub const REPEAT_AFTER_SECS: i64 = 5;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceTokenRecord {
    pub token_id: String,
    pub app_id: AppId,
    pub named_user: String,
    pub device_id: String,
    pub hash: String,
    pub created_at: EpochMillis,
    /// After this the token is refused; tokens from before lifetimes count from `created_at`.
    pub expires_at: Option<EpochMillis>,
    /// Once the token was traded for a fresh one: until when it may trade again (and do
    /// nothing else).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub superseded_until: Option<EpochMillis>,
}

/// How long a device token is valid; the device refreshes it before then.
pub const DEVICE_TOKEN_LIFETIME_SECS: i64 = 90 * 24 * 3600;

impl DeviceTokenRecord {
    /// When the token stops being accepted.
    pub fn expiry(&self) -> EpochMillis {
        self.expires_at.unwrap_or(self.created_at.plus_secs(DEVICE_TOKEN_LIFETIME_SECS))
    }

    /// The token as traded for a fresh one at `now`.
    pub fn superseded(self, now: EpochMillis) -> Self {
        Self { superseded_until: Some(now.plus_secs(SUPERSEDED_TOKEN_GRACE_SECS)), ..self }
    }

    /// Checks a presented token for a refresh at `now`: a token the device holds, or the one it
    /// traded last, within the grace (even past its lifetime, which a refresh just before it
    /// may have reached).
    pub fn admit_for_refresh(
        &self,
        presented: &TokenHash,
        now: EpochMillis,
    ) -> Result<(), DeviceTokenRefusal> {
        match self.superseded_until {
            Some(until) if presented.is_stored_as(&self.hash) && now < until => Ok(()),
            Some(_) => Err(DeviceTokenRefusal::Invalid),
            None => self.admit(presented, now),
        }
    }
}

impl Credential for DeviceTokenRecord {
    type Refusal = DeviceTokenRefusal;
    const UNKNOWN: DeviceTokenRefusal = DeviceTokenRefusal::Invalid;
    fn admit(&self, presented: &TokenHash, now: EpochMillis) -> Result<(), DeviceTokenRefusal> {
        if !presented.is_stored_as(&self.hash) || self.superseded_until.is_some() {
            return Err(DeviceTokenRefusal::Invalid);
        }
        if self.expiry() <= now {
            return Err(DeviceTokenRefusal::Expired);
        }
        Ok(())
    }
}

/// Why a presented device token was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceTokenRefusal {
    /// Unknown, or not the token stored under its id.
    Invalid,
    Expired,
}

/// Registration's errors (DECISIONS §4).
#[derive(Debug, thiserror::Error)]
pub enum RegistrationError {
    #[error("code: no such registration code")]
    LinkNotFound,
    #[error("code: the registration code has expired")]
    LinkExpired,
    #[error("code: the registration code was used already")]
    LinkUsed,
    #[error("deviceId: device '{0}' is registered already")]
    DeviceExists(String),
    #[error("machineUserNameWS: '{0}' is a name of another user")]
    AliasTaken(String),
    #[error("deviceId: no device '{0}' in this app")]
    DeviceNotFound(String),
    #[error("deviceId: device '{0}' has no device token")]
    NoDeviceToken(String),
    /// A request sent again sooner than [`REPEAT_AFTER_SECS`] after the one that gave the token.
    #[error(
        "a request like this one gave the device its token less than {REPEAT_AFTER_SECS} s ago; if its reply was lost, send it again later"
    )]
    RepeatedTooSoon,
    /// A bad field, or a failure of the store, the key service or the queue.
    #[error(transparent)]
    Failed(#[from] crate::boundary::Failure),
}

crate::shares_failures!(RegistrationError);

/// A registration, checked: both keys are P-256 points, kept in canonical form.
pub struct Registration {
    pub code: RegistrationCode,
    pub device_id: String,
    pub friendly_name: String,
    pub model_number: String,
    pub signing_public_key: String,
    pub key_agreement_public_key: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use p256::elliptic_curve::sec1::ToEncodedPoint;

    #[test]
    fn public_keys_must_be_points_on_the_curve() {
        let secret = p256::SecretKey::random(&mut rand::rngs::OsRng);
        let public = secret.public_key();
        let compressed = STANDARD.encode(public.to_encoded_point(true).as_bytes());
        let uncompressed = STANDARD.encode(public.to_encoded_point(false).as_bytes());
        let (_, canonical) = public_key("k", &compressed).unwrap();
        assert_eq!(canonical, uncompressed, "stored in one canonical form");
        let mut off_curve = public.to_encoded_point(false).as_bytes().to_vec();
        off_curve[64] ^= 1;
        assert_eq!(
            public_key("k", &STANDARD.encode(off_curve)).unwrap_err().message,
            "is not a valid P-256 point"
        );
        assert!(public_key("k", "not base64!").is_err());
        assert!(public_key("k", &STANDARD.encode([4u8; 10])).is_err());
    }

    #[test]
    fn device_tokens_admit_their_holder_until_they_expire() {
        let secret = crate::tokens::TokenSecret::generate();
        let presented = secret.hash();
        let record = DeviceTokenRecord {
            token_id: presented.token_id(),
            app_id: AppId::parse("appId", "app").unwrap(),
            named_user: "alice".into(),
            device_id: "d1".into(),
            hash: presented.to_hex(),
            created_at: EpochMillis(0),
            expires_at: Some(EpochMillis(1_000)),
            superseded_until: None,
        };
        assert_eq!(record.admit(&presented, EpochMillis(999)), Ok(()));
        assert_eq!(record.admit(&presented, EpochMillis(1_000)), Err(DeviceTokenRefusal::Expired));
        let other = crate::tokens::TokenSecret::generate().hash();
        assert_eq!(record.admit(&other, EpochMillis(0)), Err(DeviceTokenRefusal::Invalid));
        let garbled = DeviceTokenRecord { hash: "not hex".into(), ..record.clone() };
        assert_eq!(garbled.admit(&presented, EpochMillis(0)), Err(DeviceTokenRefusal::Invalid));
        let lifetime = DeviceTokenRecord { expires_at: None, ..record.clone() };
        let end = EpochMillis(0).plus_secs(DEVICE_TOKEN_LIFETIME_SECS);
        assert_eq!(lifetime.admit(&presented, end), Err(DeviceTokenRefusal::Expired));
        // A refresh admits what any call admits.
        assert_eq!(record.admit_for_refresh(&presented, EpochMillis(999)), Ok(()));
        assert_eq!(
            record.admit_for_refresh(&presented, EpochMillis(1_000)),
            Err(DeviceTokenRefusal::Expired)
        );
        assert_eq!(record.admit_for_refresh(&other, EpochMillis(0)), Err(DeviceTokenRefusal::Invalid));
    }

    fn token(id: &str, secret: &crate::tokens::TokenSecret) -> DeviceTokenRecord {
        DeviceTokenRecord {
            token_id: id.into(),
            app_id: AppId::parse("appId", "app").unwrap(),
            named_user: "alice".into(),
            device_id: "d1".into(),
            hash: secret.hash().to_hex(),
            created_at: EpochMillis(0),
            expires_at: Some(EpochMillis(1_000_000)),
            superseded_until: None,
        }
    }

    #[test]
    fn a_device_answers_until_its_token_expires_or_is_ended() {
        let secret = crate::tokens::TokenSecret::generate();
        let holding = device().with_token(&token("t1", &secret));
        assert_eq!((holding.token_id.as_str(), holding.token_ends_at), ("t1", Some(EpochMillis(1_000_000))));
        assert!(holding.can_answer(EpochMillis(999_999)) && !holding.can_answer(EpochMillis(1_000_000)));
        let ended = holding.token_ended(EpochMillis(5));
        assert!(ended.can_answer(EpochMillis(4)) && !ended.can_answer(EpochMillis(5)));
        assert!(device().can_answer(EpochMillis(i64::MAX)), "a record from before the end was kept");
    }

    #[test]
    fn a_traded_token_admits_only_a_refresh_and_only_within_its_grace() {
        let secret = crate::tokens::TokenSecret::generate();
        let presented = secret.hash();
        let at = EpochMillis(500_000);
        let old = token("t1", &secret).superseded(at);
        let grace_end = at.plus_secs(SUPERSEDED_TOKEN_GRACE_SECS);
        assert_eq!(old.superseded_until, Some(grace_end));
        assert_eq!(old.admit(&presented, at), Err(DeviceTokenRefusal::Invalid), "no other call");
        assert_eq!(old.admit_for_refresh(&presented, EpochMillis(grace_end.as_millis() - 1)), Ok(()));
        assert_eq!(old.admit_for_refresh(&presented, grace_end), Err(DeviceTokenRefusal::Invalid));
        let other = crate::tokens::TokenSecret::generate().hash();
        assert_eq!(old.admit_for_refresh(&other, at), Err(DeviceTokenRefusal::Invalid));
        // Past its lifetime, within the grace: it was live when it was traded.
        let late = DeviceTokenRecord { expires_at: Some(at), ..old };
        assert_eq!(late.admit_for_refresh(&presented, at.plus_secs(1)), Ok(()));
    }

    fn device() -> DeviceRecord {
        DeviceRecord {
            app_id: AppId::parse("appId", "app").unwrap(),
            named_user: "alice".into(),
            device_id: "d1".into(),
            friendly_name: "phone".into(),
            model_number: "m".into(),
            signing_public_key: String::new(),
            key_agreement_public_key: String::new(),
            registered_at: EpochMillis(0),
            token_id: String::new(),
            token_ends_at: None,
            push: None,
            superseded_token_id: None,
            token_issued_at: None,
        }
    }

    #[test]
    fn a_refresh_supersedes_the_current_token_and_a_repeat_replaces_the_lost_one() {
        let at = EpochMillis(500_000);
        let secret = crate::tokens::TokenSecret::generate;
        let (s1, s2, s3) = (secret(), secret(), secret());
        let (t1, t2, t3) = (token("t1", &s1), token("t2", &s2), token("t3", &s3));
        let device = DeviceRecord { app_id: t1.app_id.clone(), ..device() }.with_token(&t1);
        let trade = device.trade_for(&t1, at).unwrap();
        assert_eq!(trade, TokenTrade::Supersede(t1.clone().superseded(at)));
        let t2 = DeviceTokenRecord { created_at: at, ..t2 };
        let refreshed = device.traded(&trade, &t2);
        assert_eq!(
            (
                refreshed.token_id.as_str(),
                refreshed.superseded_token_id.as_deref(),
                refreshed.token_issued_at
            ),
            ("t2", Some("t1"), Some(at))
        );
        // t1 sent again at once was sent beside the first refresh: retry, and t2 stands.
        let traded_t1 = t1.clone().superseded(at);
        let soon = at.plus_secs(REPEAT_AFTER_SECS - 1);
        assert!(matches!(refreshed.trade_for(&traded_t1, soon), Err(RegistrationError::RepeatedTooSoon)));
        // Later, the reply was lost: t3 takes the place of t2.
        let later = at.plus_secs(REPEAT_AFTER_SECS);
        assert_eq!(refreshed.trade_for(&traded_t1, later).unwrap(), TokenTrade::Replace);
        let again = refreshed.clone().traded(&TokenTrade::Replace, &t3);
        assert_eq!((again.token_id.as_str(), again.superseded_token_id.as_deref()), ("t3", Some("t1")));
        // t3's refresh supersedes it, and t1 is no longer the device's to trade.
        let next = again.trade_for(&t3, later).unwrap();
        let moved_on = again.traded(&next, &t2);
        assert_eq!(moved_on.superseded_token_id.as_deref(), Some("t3"));
        let none =
            |r: Result<TokenTrade, RegistrationError>| matches!(r, Err(RegistrationError::NoDeviceToken(_)));
        assert!(none(moved_on.trade_for(&traded_t1, later)));
        assert!(none(refreshed.trade_for(&t3, later)), "a token the device never had");
    }

    #[test]
    fn a_used_link_takes_its_own_devices_registration_again_while_live() {
        let link = LinkRecord {
            app_id: AppId::parse("appId", "app").unwrap(),
            named_user: "alice".into(),
            machine_user_name_ws: None,
            created_at: EpochMillis(0),
            expires_at: EpochMillis(1_000),
            used_at: None,
            device_id: None,
            token_id: None,
        };
        assert_eq!(link.take("d1", EpochMillis(999)).unwrap(), LinkUse::Fresh);
        assert!(matches!(link.take("d1", EpochMillis(1_000)), Err(RegistrationError::LinkExpired)));
        let used = link.used_by("d1", "t1", EpochMillis(10));
        assert_eq!(used.take("d1", EpochMillis(999)).unwrap(), LinkUse::Again);
        assert!(matches!(used.take("d2", EpochMillis(999)), Err(RegistrationError::LinkUsed)));
        assert!(matches!(used.take("d1", EpochMillis(1_000)), Err(RegistrationError::LinkUsed)));
        assert_eq!(used.gave_again("t2").token_id.as_deref(), Some("t2"));

        // Taken again, it is the registration that made the device, sent again after a lost
        // reply, only with the same keys, while the device holds the link's token, 5 s on.
        let registered = DeviceRecord {
            signing_public_key: "sk".into(),
            key_agreement_public_key: "ka".into(),
            token_id: "t1".into(),
            token_issued_at: Some(EpochMillis(10)),
            ..device()
        };
        let sent = |signing: &str, agreement: &str| Registration {
            code: RegistrationCode::generate(),
            device_id: "d1".into(),
            friendly_name: "phone".into(),
            model_number: "m".into(),
            signing_public_key: signing.into(),
            key_agreement_public_key: agreement.into(),
        };
        let later = EpochMillis(10).plus_secs(REPEAT_AFTER_SECS);
        assert!(registered.registered_again(&used, &sent("sk", "ka"), later).is_ok());
        let soon = EpochMillis(later.as_millis() - 1);
        assert!(matches!(
            registered.registered_again(&used, &sent("sk", "ka"), soon),
            Err(RegistrationError::RepeatedTooSoon)
        ));
        for (link, registration) in [
            (&used, sent("other", "ka")),
            (&used, sent("sk", "other")),
            (&used.gave_again("t2"), sent("sk", "ka")),
        ] {
            let again = registered.registered_again(link, &registration, later);
            assert!(matches!(again, Err(RegistrationError::LinkUsed)), "{again:?}");
        }
    }

    #[test]
    fn a_user_is_known_by_its_name_and_aliases_in_any_case() {
        let user = UserRecord {
            app_id: AppId::parse("appId", "app").unwrap(),
            named_user: "alice@example.com".into(),
            aliases: vec!["CORP\\alice".into()],
            created_at: EpochMillis(0),
        };
        assert!(user.is_known_as("Alice@Example.com") && user.is_known_as("corp\\ALICE"));
        assert!(!user.is_known_as("bob@example.com") && !user.is_known_as("CORP\\bob"));
        // Beyond ASCII too: the alias index files a name lowercased in full Unicode.
        let zoe =
            UserRecord { named_user: "Zoë@example.com".into(), aliases: vec!["CORP\\Zoë".into()], ..user };
        assert!(
            zoe.is_known_as("ZOË@EXAMPLE.COM") && zoe.is_known_as("corp\\ZOË") && zoe.has_alias("Corp\\zoË")
        );
        assert!(!zoe.is_known_as("CORP\\Zoe") && !zoe.has_alias("zoë@example.com"));
        assert_eq!(folded_name("CORP\\ZOË"), "corp\\zoë");
    }

    #[test]
    fn codes_and_names() {
        let code = RegistrationCode::generate();
        assert_eq!(code.expose().len(), 22);
        assert!(RegistrationCode::parse("code", code.expose()).is_ok());
        assert!(RegistrationCode::parse("code", "base64url-_alphabet").is_ok());
        // The key's text as sent is hashed, not its SEC1 bytes (computed with Python's hashlib).
        assert_eq!(fingerprint("BAAA"), "SePNRSfJbNwBAWD_CFIODLY8bvjE59SGCJlTQ3-DoVk");
        assert!(RegistrationCode::parse("code", "short").is_err());
        assert!(RegistrationCode::parse("code", "has space in it!!!!!").is_err());
        assert_ne!(code.digest(), RegistrationCode::generate().digest());
        assert!(named_user("namedUser", "alice@example.com").is_ok());
        assert!(named_user("namedUser", " alice").is_err());
        assert!(named_user("namedUser", "\u{FEFF}alice").is_err());
        assert!(named_user("namedUser", "alice\u{3000}").is_err());
        assert!(named_user("namedUser", "al ice").is_ok());
        assert!(named_user("namedUser", "a/b").is_err());
        assert!(identifier("deviceId", "iphone-15.A1:2").is_ok());
        assert!(identifier("deviceId", "bad id").is_err());
    }
}
