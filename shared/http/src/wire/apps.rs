//! The control center's bodies: an app's workstation settings (offline access, push) and its
//! rate limit, token kinds and push platforms.

use super::{mirror_enum, mirror_fields};
use rp_app::apps::Limits;
use rp_domain::apps::{self as domain, DEFAULT_CERTIFICATE_VALIDITY_DAYS};
use rp_domain::push::{Platform as DomainPlatform, PushApplications as DomainPush};
use rp_domain::tokens::TokenKind as DomainTokenKind;
use serde::{Deserialize, Serialize};

mirror_enum! {
    /// What a token may do.
    #[serde(rename_all = "camelCase")]
    pub enum TokenKind for DomainTokenKind {
        /// Global: certificate queue, RP apps, tokens, customizations, events.
        ControlCenterAdmin,
        /// Scoped to one RP app: OOB, client registration, enrollment.
        Access,
    }
}

mirror_enum! {
    /// A push platform, as SNS names its platform applications.
    #[serde(rename_all = "SCREAMING_SNAKE_CASE")]
    pub enum Platform for DomainPlatform {
        /// Apple Push Notification service.
        Apns,
        /// APNs' development environment.
        ApnsSandbox,
        /// Firebase Cloud Messaging (SNS's `GCM` platform).
        Fcm,
    }
}

/// Offline access configuration (DECISIONS §5): defaults and bounds.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct OfflineAccess {
    pub enabled: bool,
    #[schema(minimum = 6, maximum = 13)]
    pub token_length: i64,
    #[schema(minimum = 10, maximum = 100)]
    pub token_count: i64,
    #[schema(minimum = 30, maximum = 3600)]
    pub token_entry_timeout_secs: i64,
    #[schema(minimum = 7, maximum = 90)]
    pub offline_access_days: i64,
    #[serde(rename = "offlinePINPromptSecs")]
    #[schema(minimum = 0, maximum = 300)]
    pub offline_pin_prompt_secs: i64,
    #[schema(minimum = 0, maximum = 100)]
    pub token_low_warning_threshold_percentage: i64,
    /// Wrong offline attempts, reported by the workstation, before offline access is locked.
    #[schema(minimum = 1, maximum = 20)]
    pub max_wrong_attempts: i64,
    /// How long such a lock lasts.
    #[schema(minimum = 60, maximum = 86400)]
    pub lockout_secs: i64,
}

impl Default for OfflineAccess {
    fn default() -> Self {
        domain::OfflineAccess::default().into()
    }
}

mirror_fields!(
    OfflineAccess,
    domain::OfflineAccess {
        enabled,
        token_length,
        token_count,
        token_entry_timeout_secs,
        offline_access_days,
        offline_pin_prompt_secs,
        token_low_warning_threshold_percentage,
        max_wrong_attempts,
        lockout_secs,
    }
);

/// The app's SNS platform applications (ARNs), one per platform it serves; in the app's
/// workstation settings as `push`. A device of a platform the app has none for cannot register
/// for push, and is reached by its long-poll alone.
#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PushApplications {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(
        max_length = 1024,
        pattern = "^arn:[A-Za-z0-9-]+:sns:[a-z0-9-]+:[0-9]{12}:app/APNS/[A-Za-z0-9._-]{1,256}$"
    )]
    pub apns: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(
        max_length = 1024,
        pattern = "^arn:[A-Za-z0-9-]+:sns:[a-z0-9-]+:[0-9]{12}:app/APNS_SANDBOX/[A-Za-z0-9._-]{1,256}$"
    )]
    pub apns_sandbox: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(
        max_length = 1024,
        pattern = "^arn:[A-Za-z0-9-]+:sns:[a-z0-9-]+:[0-9]{12}:app/GCM/[A-Za-z0-9._-]{1,256}$"
    )]
    pub fcm: Option<String>,
}

mirror_fields!(PushApplications, DomainPush { apns, apns_sandbox, fcm });

/// An app's workstation settings. Omitted fields take their defaults.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkstationSettings {
    // Field by field rather than the container's `default`: the OpenAPI document then gives no
    // default object for a nested model, which client generators refuse.
    #[serde(default)]
    pub offline_access: OfflineAccess,
    /// How long an agent's lease on a certificate request lasts. At most 900 s, the longest
    /// delay of the re-queue message (SQS `DelaySeconds`).
    #[serde(default = "default_request_timeout")]
    #[schema(default = default_request_timeout, minimum = 1, maximum = 900)]
    pub request_timeout_in_secs: i64,
    /// How long an OOB authentication request can be answered and read.
    #[serde(default = "default_oob_timeout")]
    #[schema(default = default_oob_timeout, minimum = 1, maximum = 3600)]
    pub oob_request_timeout_in_secs: i64,
    /// The app's SNS platform applications, for waking its users' devices.
    #[serde(default)]
    pub push: PushApplications,
    /// How long the login certificates issued for the app's pairings are valid, in days.
    #[serde(default = "default_certificate_validity")]
    #[schema(default = default_certificate_validity, minimum = 1, maximum = 365)]
    pub certificate_validity_days: i64,
}

fn default_certificate_validity() -> i64 {
    DEFAULT_CERTIFICATE_VALIDITY_DAYS
}

fn default_request_timeout() -> i64 {
    domain::WorkstationSettings::default().request_timeout_in_secs
}

fn default_oob_timeout() -> i64 {
    domain::WorkstationSettings::default().oob_request_timeout_in_secs
}

mirror_fields!(
    WorkstationSettings,
    domain::WorkstationSettings {
        offline_access,
        request_timeout_in_secs,
        oob_request_timeout_in_secs,
        push,
        certificate_validity_days,
    }
);

/// A tenant's limits: its request budget on the customization APIs, `limit` requests per fixed
/// window of `windowSecs`; its own budget of key-service calls a second; its own cap on open
/// login-certificate requests. Each is counted in the backend, so it holds across Lambda
/// instances.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct RateLimit {
    #[schema(minimum = 1, maximum = 100000)]
    pub limit: i64,
    #[schema(minimum = 1, maximum = 86400)]
    pub window_secs: i64,
    /// Key-service calls the app may make a second; `null` or left out: the deployment's
    /// (`KMS_CALLS_PER_APP`). A change reaches every instance within 10 seconds.
    #[schema(minimum = 1, maximum = 1000)]
    pub key_calls_per_sec: Option<u32>,
    /// Login-certificate requests the app may have open (pending or leased); `null` or left out:
    /// the deployment's (`CERT_MAX_OPEN_PER_APP`). A pairing past it answers 429.
    #[schema(minimum = 1, maximum = 100000)]
    pub max_open_certificate_requests: Option<u32>,
}

impl Default for RateLimit {
    fn default() -> Self {
        Limits { rule: domain::RateLimit::default(), key_calls_per_sec: None, max_open_requests: None }.into()
    }
}

impl From<Limits> for RateLimit {
    fn from(Limits { rule, key_calls_per_sec, max_open_requests }: Limits) -> Self {
        let (limit, window_secs) = (rule.limit, rule.window_secs);
        Self { limit, window_secs, key_calls_per_sec, max_open_certificate_requests: max_open_requests }
    }
}

impl From<RateLimit> for Limits {
    fn from(wire: RateLimit) -> Self {
        let RateLimit { limit, window_secs, key_calls_per_sec, max_open_certificate_requests } = wire;
        let rule = domain::RateLimit { limit, window_secs };
        Limits { rule, key_calls_per_sec, max_open_requests: max_open_certificate_requests }
    }
}
