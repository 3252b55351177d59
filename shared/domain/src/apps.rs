//! RP applications (the tenant unit) and their workstation settings.

use super::validate::{self, FieldError};
use serde::{Deserialize, Serialize};
use std::fmt;

/// An RP application id, camel-case as in the control center (`workstationDemo`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct AppId(String);

impl AppId {
    pub const MAX_LEN: usize = 64;
    /// The document's pattern of what [`AppId::parse`] accepts.
    pub const PATTERN: &'static str = "^[A-Za-z][A-Za-z0-9_.-]{0,63}$";

    pub fn parse(field: &str, value: &str) -> Result<Self, FieldError> {
        validate::identifier(field, value, Self::MAX_LEN)?;
        Ok(Self(value.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for AppId {
    type Error = FieldError;
    fn try_from(value: String) -> Result<Self, FieldError> {
        Self::parse("appId", &value)
    }
}

impl From<AppId> for String {
    fn from(id: AppId) -> String {
        id.0
    }
}

impl fmt::Display for AppId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Offline access configuration (DECISIONS §5): defaults and bounds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct OfflineAccess {
    pub enabled: bool,
    pub token_length: i64,
    pub token_count: i64,
    pub token_entry_timeout_secs: i64,
    pub offline_access_days: i64,
    #[serde(rename = "offlinePINPromptSecs")]
    pub offline_pin_prompt_secs: i64,
    pub token_low_warning_threshold_percentage: i64,
    /// Wrong offline attempts, reported by the workstation, before offline access is locked.
    pub max_wrong_attempts: i64,
    /// How long such a lock lasts.
    pub lockout_secs: i64,
}

impl Default for OfflineAccess {
    fn default() -> Self {
        Self {
            enabled: false,
            token_length: 8,
            token_count: 25,
            token_entry_timeout_secs: 180,
            offline_access_days: 30,
            offline_pin_prompt_secs: 5,
            token_low_warning_threshold_percentage: 20,
            max_wrong_attempts: 5,
            lockout_secs: 900,
        }
    }
}

impl OfflineAccess {
    pub fn validate(&self) -> Result<(), FieldError> {
        validate::range("tokenLength", self.token_length, 6, 13)?;
        validate::range("tokenCount", self.token_count, 10, 100)?;
        validate::range("tokenEntryTimeoutSecs", self.token_entry_timeout_secs, 30, 3600)?;
        validate::range("offlineAccessDays", self.offline_access_days, 7, 90)?;
        validate::range("offlinePINPromptSecs", self.offline_pin_prompt_secs, 0, 300)?;
        validate::range(
            "tokenLowWarningThresholdPercentage",
            self.token_low_warning_threshold_percentage,
            0,
            100,
        )?;
        validate::range("maxWrongAttempts", self.max_wrong_attempts, 1, 20)?;
        validate::range("lockoutSecs", self.lockout_secs, 60, 86_400)
    }
}

/// An app's workstation settings. Omitted fields take their defaults.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkstationSettings {
    // Field by field rather than the container's `default`: the OpenAPI document then gives no
    // default object for a nested model, which client generators refuse.
    #[serde(default)]
    pub offline_access: OfflineAccess,
    /// How long an agent's lease on a certificate request lasts. At most 900 s, the longest
    /// delay of the re-queue message (SQS `DelaySeconds`).
    #[serde(default = "default_request_timeout")]
    pub request_timeout_in_secs: i64,
    /// How long an OOB authentication request can be answered and read.
    #[serde(default = "default_oob_timeout")]
    pub oob_request_timeout_in_secs: i64,
    /// The app's SNS platform applications, for waking its users' devices.
    #[serde(default)]
    pub push: super::push::PushApplications,
    /// How long the login certificates issued for the app's pairings are valid, in days.
    #[serde(default = "default_certificate_validity")]
    pub certificate_validity_days: i64,
}

/// The default validity of a login certificate: 90 days, as public CAs and Vault's PKI examples
/// go for short-lived leaf certificates (renewal is automatic), well under a year.
pub const DEFAULT_CERTIFICATE_VALIDITY_DAYS: i64 = 90;
/// The longest validity an app may set: no login certificate outlives its issue by more.
pub const MAX_CERTIFICATE_VALIDITY_DAYS: i64 = 365;

fn default_certificate_validity() -> i64 {
    DEFAULT_CERTIFICATE_VALIDITY_DAYS
}

fn default_request_timeout() -> i64 {
    WorkstationSettings::default().request_timeout_in_secs
}

fn default_oob_timeout() -> i64 {
    WorkstationSettings::default().oob_request_timeout_in_secs
}

/// How long an OOB request stays answerable and readable unless the app says otherwise.
pub const DEFAULT_OOB_TIMEOUT_SECS: i64 = 300;

impl Default for WorkstationSettings {
    fn default() -> Self {
        Self {
            offline_access: OfflineAccess::default(),
            request_timeout_in_secs: 300,
            oob_request_timeout_in_secs: DEFAULT_OOB_TIMEOUT_SECS,
            push: super::push::PushApplications::default(),
            certificate_validity_days: DEFAULT_CERTIFICATE_VALIDITY_DAYS,
        }
    }
}

impl WorkstationSettings {
    pub fn validate(&self) -> Result<(), FieldError> {
        self.offline_access.validate().map_err(|e| e.under("offlineAccess"))?;
        validate::range("requestTimeoutInSecs", self.request_timeout_in_secs, 1, 900)?;
        validate::range("oobRequestTimeoutInSecs", self.oob_request_timeout_in_secs, 1, 3600)?;
        validate::range(
            "certificateValidityDays",
            self.certificate_validity_days,
            1,
            MAX_CERTIFICATE_VALIDITY_DAYS,
        )?;
        self.push.validate().map_err(|e| e.under("push"))
    }
}

/// A tenant's request budget on the customization APIs: `limit` requests per fixed window of
/// `windowSecs`, counted in the backend so it holds across Lambda instances.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct RateLimit {
    pub limit: i64,
    pub window_secs: i64,
}

impl Default for RateLimit {
    fn default() -> Self {
        Self { limit: 120, window_secs: 60 }
    }
}

impl RateLimit {
    pub fn validate(&self) -> Result<(), FieldError> {
        validate::range("limit", self.limit, 1, 100_000)?;
        validate::range("windowSecs", self.window_secs, 1, 86_400)
    }

    /// The window holding `now` (epoch seconds): its start and its end (the reset time).
    pub fn window(&self, now: i64) -> (i64, i64) {
        let start = now - now.rem_euclid(self.window_secs);
        (start, start + self.window_secs)
    }
}

/// Key-service calls an app may make a second unless the deployment (`KMS_CALLS_PER_APP`) or the
/// app itself says otherwise.
pub const DEFAULT_KEY_CALLS_PER_APP: u32 = 500;
/// The most a key-service budget may be: the store takes at most 1,000 writes a second to one
/// counter (a DynamoDB partition), so a larger budget would be refused by the counter, not by
/// the rule.
pub const MAX_KEY_CALLS_PER_APP: u32 = 1_000;

/// An app's own key-service budget (`keyCallsPerSec`): 1 to [`MAX_KEY_CALLS_PER_APP`] calls a
/// second. `None` leaves the app on the deployment's.
pub fn check_key_calls_per_sec(value: Option<u32>) -> Result<(), FieldError> {
    own_figure("keyCallsPerSec", value, MAX_KEY_CALLS_PER_APP)
}

/// The most open login-certificate requests an app's own cap may allow.
pub const MAX_OPEN_REQUESTS_CAP: u32 = 100_000;

/// An app's own cap on open login-certificate requests (`maxOpenCertificateRequests`): 1 to
/// [`MAX_OPEN_REQUESTS_CAP`]. `None` leaves the app on the deployment's
/// (`CERT_MAX_OPEN_PER_APP`).
pub fn check_max_open_requests(value: Option<u32>) -> Result<(), FieldError> {
    own_figure("maxOpenCertificateRequests", value, MAX_OPEN_REQUESTS_CAP)
}

/// An app's own figure in place of the deployment's, if it has one: 1 to `most`.
fn own_figure(field: &str, value: Option<u32>, most: u32) -> Result<(), FieldError> {
    value.map_or(Ok(()), |figure| validate::range(field, i64::from(figure), 1, i64::from(most)))
}

/// A display name: 1 to 255 characters.
pub fn display_name(field: &str, value: &str) -> Result<(), FieldError> {
    validate::text(field, value, 1, 255)
}

/// The control center's errors (apps and tokens).
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error("no app with appId '{0}'")]
    AppNotFound(String),
    #[error("an app with appId '{0}' already exists")]
    AppExists(AppId),
    #[error("no token with tokenId '{0}'")]
    TokenNotFound(String),
    /// A bad field, or a failure of the store, the key service or the queue.
    #[error(transparent)]
    Failed(#[from] crate::boundary::Failure),
}

crate::shares_failures!(ControlError);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_app_id_reads_and_prints_as_given_and_a_name_is_held_to_its_bounds() {
        let id = AppId::parse("appId", "workstationDemo").unwrap();
        assert_eq!((id.as_str(), id.to_string()), ("workstationDemo", "workstationDemo".to_owned()));
        assert_eq!(serde_json::to_value(&id).unwrap(), "workstationDemo");
        assert_eq!(String::from(id), "workstationDemo");
        assert_eq!(AppId::try_from("1bad".to_owned()).unwrap_err().field, "appId");
        assert!(display_name("displayName", &"n".repeat(255)).is_ok());
        for bad in [String::new(), "n".repeat(256)] {
            assert_eq!(display_name("displayName", &bad).unwrap_err().field, "displayName", "{bad:?}");
        }
    }

    #[test]
    fn omitted_workstation_settings_read_as_their_defaults() {
        let read: WorkstationSettings = serde_json::from_value(serde_json::json!({})).unwrap();
        assert_eq!(read, WorkstationSettings::default());
        assert_eq!(
            (read.request_timeout_in_secs, read.oob_request_timeout_in_secs, read.certificate_validity_days),
            (300, DEFAULT_OOB_TIMEOUT_SECS, DEFAULT_CERTIFICATE_VALIDITY_DAYS)
        );
        let some: WorkstationSettings =
            serde_json::from_value(serde_json::json!({"requestTimeoutInSecs": 60})).unwrap();
        assert_eq!(
            some,
            WorkstationSettings { request_timeout_in_secs: 60, ..WorkstationSettings::default() }
        );
    }

    #[test]
    fn defaults_match_decisions() {
        let s = WorkstationSettings::default();
        assert!(s.validate().is_ok());
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "offlineAccess": {
                    "enabled": false, "tokenLength": 8, "tokenCount": 25,
                    "tokenEntryTimeoutSecs": 180, "offlineAccessDays": 30,
                    "offlinePINPromptSecs": 5, "tokenLowWarningThresholdPercentage": 20,
                    "maxWrongAttempts": 5, "lockoutSecs": 900
                },
                "requestTimeoutInSecs": 300,
                "oobRequestTimeoutInSecs": 300,
                "push": {},
                "certificateValidityDays": 90
            })
        );
    }

    #[test]
    fn out_of_range_values_name_their_field() {
        let mut s = WorkstationSettings::default();
        s.offline_access.token_count = 9;
        assert_eq!(s.validate().unwrap_err().field, "offlineAccess.tokenCount");
        s.offline_access.token_count = 100;
        s.offline_access.token_length = 14;
        assert_eq!(s.validate().unwrap_err().field, "offlineAccess.tokenLength");
        let s = WorkstationSettings { request_timeout_in_secs: 0, ..Default::default() };
        assert_eq!(s.validate().unwrap_err().field, "requestTimeoutInSecs");
    }

    #[test]
    fn partial_settings_fill_defaults() {
        let s: WorkstationSettings = serde_json::from_str(r#"{"offlineAccess":{"enabled":true}}"#).unwrap();
        assert!(s.offline_access.enabled);
        assert_eq!(s.offline_access.token_count, 25);
        assert_eq!(s.request_timeout_in_secs, 300);
    }

    #[test]
    fn rate_limit_windows_are_fixed_and_bounded() {
        let rl = RateLimit { limit: 5, window_secs: 60 };
        assert_eq!(rl.window(120), (120, 180));
        assert_eq!(rl.window(179), (120, 180));
        assert_eq!(rl.window(180), (180, 240));
        assert_eq!(RateLimit { limit: 0, window_secs: 60 }.validate().unwrap_err().field, "limit");
        assert_eq!(RateLimit { limit: 1, window_secs: 0 }.validate().unwrap_err().field, "windowSecs");
        for fine in [None, Some(1), Some(MAX_KEY_CALLS_PER_APP)] {
            assert!(check_key_calls_per_sec(fine).is_ok(), "{fine:?}");
        }
        for bad in [Some(0), Some(MAX_KEY_CALLS_PER_APP + 1)] {
            assert_eq!(check_key_calls_per_sec(bad).unwrap_err().field, "keyCallsPerSec", "{bad:?}");
        }
        for fine in [None, Some(1), Some(MAX_OPEN_REQUESTS_CAP)] {
            assert!(check_max_open_requests(fine).is_ok(), "{fine:?}");
        }
        for bad in [Some(0), Some(MAX_OPEN_REQUESTS_CAP + 1)] {
            let field = check_max_open_requests(bad).unwrap_err().field;
            assert_eq!(field, "maxOpenCertificateRequests", "{bad:?}");
        }
    }

    #[test]
    fn app_ids_parse() {
        assert!(AppId::parse("appId", "workstationDemo").is_ok());
        assert_eq!(AppId::parse("appId", "").unwrap_err().field, "appId");
        assert!(serde_json::from_str::<AppId>("\"bad id\"").is_err());
    }
}
