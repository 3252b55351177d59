//! The error tables: for each area, every error it can answer with its status, `errorCode`, type
//! slug, title and meaning, and the one `From` impl that turns the area's error enum into a
//! [`Problem`] by picking its row. The error-code list in `docs/errors.md` is rendered from these
//! tables ([`markdown_table`]) and a test holds the page to it. The rows every endpoint shares are
//! [`crate::problem`]'s, listed here as [`GENERAL`].

use super::problem::{codes, row, Problem, ProblemType};
pub use super::problem::{
    BODY_TOO_LARGE, CONFLICT, HEADERS_TOO_LARGE, IDEMPOTENCY_KEY_REUSED, INTERNAL, INVALID_FIELD,
    MALFORMED_BODY, MALFORMED_REQUEST, METHOD_NOT_ALLOWED, REJECTED_BY_STORE, ROUTE_NOT_FOUND, UNAVAILABLE,
    UNSUPPORTED_MEDIA_TYPE, URI_TOO_LONG,
};
use axum::http::StatusCode;
use rp_app::AppError;
use rp_domain::apps::ControlError;
use rp_domain::apps::RateLimit;
use rp_domain::certificates::CertError;
use rp_domain::code::CodeError;
use rp_domain::content::ContentError;
use rp_domain::devices::{RegistrationError, REPEAT_AFTER_SECS};
use rp_domain::enrollment::EnrollError;
use rp_domain::events::EventError;
use rp_domain::idempotency;
use rp_domain::offline::OfflineError;
use rp_domain::oob::OobError;
use rp_domain::pairing::PairingError;
use rp_domain::pki::PkiError;
use rp_domain::signing::SigningKeyError;
use rp_domain::time::EpochMillis;
use rp_repo::ratelimit::Decision;

pub const GENERAL: &[&ProblemType] = &[
    &INVALID_FIELD,
    &MALFORMED_BODY,
    &BODY_TOO_LARGE,
    &UNSUPPORTED_MEDIA_TYPE,
    &ROUTE_NOT_FOUND,
    &METHOD_NOT_ALLOWED,
    &REJECTED_BY_STORE,
    &MALFORMED_REQUEST,
    &URI_TOO_LONG,
    &HEADERS_TOO_LARGE,
    &CONFLICT,
    &IDEMPOTENCY_KEY_REUSED,
    &INTERNAL,
    &UNAVAILABLE,
];

// The control center.
pub const APP_NOT_FOUND: ProblemType =
    row(StatusCode::NOT_FOUND, codes::APP_NOT_FOUND, "app-not-found", "App not found", "No such app");
pub const APP_EXISTS: ProblemType = row(
    StatusCode::CONFLICT,
    codes::APP_EXISTS,
    "app-exists",
    "App already exists",
    "The app already exists",
);
pub const TOKEN_NOT_FOUND: ProblemType =
    row(StatusCode::NOT_FOUND, codes::TOKEN_NOT_FOUND, "token-not-found", "Token not found", "No such token");
pub const CONTROL: &[&ProblemType] = &[&APP_NOT_FOUND, &APP_EXISTS, &TOKEN_NOT_FOUND];

// Authentication.
pub const MISSING_CREDENTIALS: ProblemType = row(
    StatusCode::UNAUTHORIZED,
    codes::MISSING_CREDENTIALS,
    "unauthorized",
    "Authentication required",
    "`Authorization` header missing or not `Bearer <token>`",
);
pub const INVALID_TOKEN: ProblemType = row(
    StatusCode::UNAUTHORIZED,
    codes::INVALID_TOKEN,
    "unauthorized",
    "Authentication required",
    "Unknown, expired or revoked token",
);
pub const WRONG_TOKEN_KIND: ProblemType = row(
    StatusCode::FORBIDDEN,
    codes::WRONG_TOKEN_KIND,
    "forbidden",
    "Insufficient permissions",
    "Token of the wrong kind for this endpoint",
);
pub const OTHER_TENANT: ProblemType = row(
    StatusCode::FORBIDDEN,
    codes::OTHER_TENANT,
    "forbidden",
    "Insufficient permissions",
    "Token of another app (tenant)",
);
pub const TENANT_SCOPED_TOKEN: ProblemType = row(
    StatusCode::FORBIDDEN,
    codes::TENANT_SCOPED_TOKEN,
    "forbidden",
    "Insufficient permissions",
    "A tenant-scoped admin token on a global endpoint",
);
pub const AUTH: &[&ProblemType] =
    &[&MISSING_CREDENTIALS, &INVALID_TOKEN, &WRONG_TOKEN_KIND, &OTHER_TENANT, &TENANT_SCOPED_TOKEN];

// Out-of-band authentication.
pub const OOB_NOT_FOUND: ProblemType = row(
    StatusCode::BAD_REQUEST,
    codes::OOB_NOT_FOUND,
    "oob-request-not-found",
    "The request could not be found",
    "The OOB request could not be found: unknown, another app's or device's, or expired (the seed's code)",
);
pub const OOB_UNKNOWN_USER: ProblemType = row(
    StatusCode::BAD_REQUEST,
    codes::OOB_UNKNOWN_USER,
    "unknown-user",
    "Unknown user",
    "No registered user has this name or alias (`namedUser`)",
);
pub const OOB_NO_DEVICE: ProblemType = row(
    StatusCode::BAD_REQUEST,
    codes::OOB_NO_DEVICE,
    "no-device",
    "No registered device",
    "The user (`namedUser`) has no registered device that can answer (none whose token is live)",
);
pub const OOB_UNKNOWN_DEVICE: ProblemType = row(
    StatusCode::BAD_REQUEST,
    codes::OOB_UNKNOWN_DEVICE,
    "unknown-device",
    "Unknown device",
    "The start's `deviceId` names none of the user's registered devices, or one whose token ended or expired",
);
pub const NONCE_REUSED: ProblemType = row(
    StatusCode::CONFLICT,
    codes::NONCE_REUSED,
    "nonce-reused",
    "Session nonce used before",
    "The app used this `sessionNonce` before",
);
pub const OOB_ANSWERED: ProblemType = row(
    StatusCode::CONFLICT,
    codes::OOB_ANSWERED,
    "oob-request-answered",
    "Request answered already",
    "The OOB request was answered already",
);
pub const BAD_SIGNATURE: ProblemType = row(
    StatusCode::BAD_REQUEST,
    codes::BAD_SIGNATURE,
    "bad-signature",
    "Signature not valid",
    "The answer's signature does not verify with the device's registered key; the request is FAILED",
);
pub const WRONG_AMOUNT: ProblemType = row(
    StatusCode::BAD_REQUEST,
    codes::WRONG_AMOUNT,
    "wrong-amount",
    "Code does not match",
    "The approval's `amount` is not the service's `extras.amount`; the request is FAILED",
);
pub const OOB_DENIED: ProblemType = row(
    StatusCode::FORBIDDEN,
    codes::OOB_DENIED,
    "oob-denied-by-customization",
    "Denied by a code customization",
    "An enabled `oob.start` code customization called `api.deny(reason)`; `detail` gives the reason",
);
pub const OOB_HOOK_FAILED: ProblemType = row(
    StatusCode::FORBIDDEN,
    codes::OOB_HOOK_FAILED,
    "oob-customization-failed",
    "A code customization failed",
    "An enabled `oob.start` code customization threw, timed out or hit a limit: the start fails closed",
);
pub const OOB: &[&ProblemType] = &[
    &OOB_DENIED,
    &OOB_HOOK_FAILED,
    &OOB_UNKNOWN_USER,
    &OOB_NO_DEVICE,
    &OOB_UNKNOWN_DEVICE,
    &NONCE_REUSED,
    &OOB_ANSWERED,
    &BAD_SIGNATURE,
    &WRONG_AMOUNT,
    &OOB_NOT_FOUND,
];

// The certificate queue.
pub const CERT_REQUEST_NOT_FOUND: ProblemType = row(
    StatusCode::NOT_FOUND,
    codes::CERT_REQUEST_NOT_FOUND,
    "certificate-request-not-found",
    "Certificate request not found",
    "No such certificate request (of this kind)",
);
pub const LEASE_ENDED: ProblemType = row(
    StatusCode::CONFLICT,
    codes::LEASE_ENDED,
    "lease-ended",
    "Result outside the timeout window",
    "The result came after the lease ended; the request is re-queued",
);
pub const RESULT_DIFFERS: ProblemType = row(
    StatusCode::CONFLICT,
    codes::RESULT_DIFFERS,
    "result-differs",
    "Another result was stored",
    "A different result for the request was stored already",
);
pub const CERT_NOT_FOUND: ProblemType = row(
    StatusCode::NOT_FOUND,
    codes::CERT_NOT_FOUND,
    "certificate-not-found",
    "Certificate not found",
    "No certificate with this serial number",
);
pub const SERIAL_TAKEN: ProblemType = row(
    StatusCode::CONFLICT,
    codes::SERIAL_TAKEN,
    "serial-taken",
    "Serial number already issued",
    "A certificate with this serial number exists",
);
pub const CERT_REVOKED: ProblemType = row(
    StatusCode::CONFLICT,
    codes::CERT_REVOKED,
    "certificate-revoked",
    "Certificate already revoked",
    "The certificate is revoked already",
);
pub const REQUEST_DEAD: ProblemType = row(
    StatusCode::GONE,
    codes::REQUEST_DEAD,
    "certificate-request-dead",
    "Certificate request dead",
    "The request ran out of attempts (DEAD); no result is accepted for it any more",
);
pub const CERT_QUEUE_FULL: ProblemType = row(
    StatusCode::TOO_MANY_REQUESTS,
    codes::CERT_QUEUE_FULL,
    "certificate-queue-full",
    "Too many open certificate requests",
    concat!(
        "The app has `CERT_MAX_OPEN_PER_APP` (or its own `maxOpenCertificateRequests`) ",
        "login-certificate requests pending or leased; nothing is written"
    ),
);
pub const CA_NOT_PUBLISHED: ProblemType = row(
    StatusCode::NOT_FOUND,
    codes::CA_NOT_PUBLISHED,
    "ca-not-published",
    "Nothing published for this CA",
    "The agent has published no CRL (and so no certificate) for this CA id",
);
pub const CRL_OUTDATED: ProblemType = row(
    StatusCode::CONFLICT,
    codes::CRL_OUTDATED,
    "crl-outdated",
    "CRL older than the published one",
    "The CRL's number is not above the published CRL's; nothing is written",
);
pub const CERTIFICATES: &[&ProblemType] = &[
    &CERT_QUEUE_FULL,
    &CERT_REQUEST_NOT_FOUND,
    &LEASE_ENDED,
    &RESULT_DIFFERS,
    &CERT_NOT_FOUND,
    &SERIAL_TAKEN,
    &CERT_REVOKED,
    &REQUEST_DEAD,
    &CA_NOT_PUBLISHED,
    &CRL_OUTDATED,
];

// Registration.
pub const LINK_NOT_FOUND: ProblemType = row(
    StatusCode::NOT_FOUND,
    codes::LINK_NOT_FOUND,
    "registration-code-not-found",
    "Registration code not found",
    "No such registration code",
);
pub const LINK_EXPIRED: ProblemType = row(
    StatusCode::GONE,
    codes::LINK_EXPIRED,
    "registration-code-gone",
    "Registration code no longer valid",
    "The registration code has expired",
);
pub const LINK_USED: ProblemType = row(
    StatusCode::GONE,
    codes::LINK_USED,
    "registration-code-gone",
    "Registration code no longer valid",
    "The registration code was used already",
);
pub const DEVICE_EXISTS: ProblemType = row(
    StatusCode::CONFLICT,
    codes::DEVICE_EXISTS,
    "device-exists",
    "Device already registered",
    "The device id is registered already in this app",
);
pub const ALIAS_TAKEN: ProblemType = row(
    StatusCode::CONFLICT,
    codes::ALIAS_TAKEN,
    "alias-taken",
    "Name of another user",
    "The link's `machineUserNameWS` is already a name of another user",
);
pub const NO_DEVICE_TOKEN: ProblemType = row(
    StatusCode::NOT_FOUND,
    codes::NO_DEVICE_TOKEN,
    "no-device-token",
    "No device token",
    "The device has no token (revoked already)",
);
pub const REGISTRATION: &[&ProblemType] =
    &[&LINK_NOT_FOUND, &LINK_EXPIRED, &LINK_USED, &DEVICE_EXISTS, &ALIAS_TAKEN, &NO_DEVICE_TOKEN];

// Enrollment.
pub const UNKNOWN_USER: ProblemType = row(
    StatusCode::BAD_REQUEST,
    codes::UNKNOWN_USER,
    "unknown-user",
    "Unknown user",
    "No registered user has this name (`machineUserNameWS`)",
);
pub const NO_DEVICE: ProblemType = row(
    StatusCode::BAD_REQUEST,
    codes::NO_DEVICE,
    "no-device",
    "No registered device",
    "The user has no registered device that can answer (none whose token is live)",
);
pub const SESSION_NOT_FOUND: ProblemType = row(
    StatusCode::BAD_REQUEST,
    codes::SESSION_NOT_FOUND,
    "enrollment-session-not-found",
    "Enrollment session not found",
    "No open enrollment session with this `sessionId`",
);
pub const CROSS_CHECK_FAILED: ProblemType = row(
    StatusCode::BAD_REQUEST,
    codes::CROSS_CHECK_FAILED,
    "cross-check-failed",
    "Enrollment cross-check failed",
    "A cross-checked field does not match the enrollment session",
);
pub const SESSION_CONFLICT: ProblemType = row(
    StatusCode::CONFLICT,
    codes::SESSION_CONFLICT,
    "enrollment-session-conflict",
    "Enrollment session conflict",
    "The enrollment session belongs to another enrollment, or was completed with other data",
);
pub const MACHINE_TAKEN: ProblemType = row(
    StatusCode::CONFLICT,
    codes::MACHINE_TAKEN,
    "machine-enrolled-by-another",
    "Machine enrolled by another workstation",
    "The `machineId` is enrolled by another workstation whose access token is still valid; revoking that token frees it",
);
pub const ENROLLMENT: &[&ProblemType] =
    &[&UNKNOWN_USER, &NO_DEVICE, &SESSION_NOT_FOUND, &CROSS_CHECK_FAILED, &SESSION_CONFLICT, &MACHINE_TAKEN];

// Pairing and offline access.
pub const UNKNOWN_DEVICE: ProblemType = row(
    StatusCode::BAD_REQUEST,
    codes::UNKNOWN_DEVICE,
    "unknown-device",
    "Unknown device",
    "No registered device of this app has this `deviceId`, or its removal began or its token was ended",
);
pub const PAIRING_NOT_FOUND: ProblemType = row(
    StatusCode::NOT_FOUND,
    codes::PAIRING_NOT_FOUND,
    "pairing-not-found",
    "Pairing not found",
    "No pairing of this machine and device",
);
pub const OFFLINE_DISABLED: ProblemType = row(
    StatusCode::FORBIDDEN,
    codes::OFFLINE_DISABLED,
    "offline-disabled",
    "Offline access disabled",
    "Offline access is disabled for the app",
);
pub const DEVICE_NOT_FOUND: ProblemType = row(
    StatusCode::NOT_FOUND,
    codes::DEVICE_NOT_FOUND,
    "device-not-found",
    "Device not found",
    "No device with this id in the app (or it was removed)",
);
pub const NOT_PAIRING_OWNER: ProblemType = row(
    StatusCode::FORBIDDEN,
    codes::NOT_PAIRING_OWNER,
    "not-pairing-owner",
    "Not the pairing's workstation",
    "Only the workstation (access token) that created the pairing may change it or unpair it",
);
pub const OFFLINE_DELIVERED: ProblemType = row(
    StatusCode::GONE,
    codes::OFFLINE_DELIVERED,
    "offline-tokens-delivered",
    "Offline PINs no longer available",
    "The pairing's offline PINs were handed to the device already, or have expired",
);
pub const PIN_GONE: ProblemType = row(
    StatusCode::CONFLICT,
    codes::PIN_GONE,
    "pin-gone",
    "PIN used already",
    "A reported PIN id was used already or is not in the set",
);
pub const OFFLINE_LOCKED: ProblemType = row(
    StatusCode::LOCKED,
    codes::OFFLINE_LOCKED,
    "offline-locked",
    "Offline access locked",
    "The pairing's offline access is locked after repeated wrong attempts; `Retry-After` says for how long",
);
pub const NO_OFFLINE_SET: ProblemType = row(
    StatusCode::NOT_FOUND,
    codes::NO_OFFLINE_SET,
    "no-offline-tokens",
    "No offline PINs",
    "The pairing has no offline PINs",
);
pub const NOT_ENROLLED: ProblemType = row(
    StatusCode::CONFLICT,
    codes::NOT_ENROLLED,
    "not-enrolled",
    "Machine not enrolled",
    "Pairing needs a completed enrollment of the machine for the device's user",
);
pub const NAME_OF_ANOTHER_USER: ProblemType = row(
    StatusCode::CONFLICT,
    codes::NAME_OF_ANOTHER_USER,
    "name-of-another-user",
    "Name of another user",
    "The pairing's `machineUserNameWS` is not a name of the device's user",
);
pub const PAIRING: &[&ProblemType] = &[
    &UNKNOWN_DEVICE,
    &NOT_ENROLLED,
    &NAME_OF_ANOTHER_USER,
    &PAIRING_NOT_FOUND,
    &DEVICE_NOT_FOUND,
    &OFFLINE_DISABLED,
    &NOT_PAIRING_OWNER,
    &OFFLINE_DELIVERED,
    &PIN_GONE,
    &OFFLINE_LOCKED,
    &NO_OFFLINE_SET,
];

// Content customizations and their rate limit.
pub const CONTENT_NOT_FOUND: ProblemType = row(
    StatusCode::NOT_FOUND,
    codes::CONTENT_NOT_FOUND,
    "content-customization-not-found",
    "Content customization not found",
    "No such content customization",
);
pub const CONTENT_VERSION_NOT_FOUND: ProblemType = row(
    StatusCode::NOT_FOUND,
    codes::CONTENT_VERSION_NOT_FOUND,
    "content-customization-version-not-found",
    "Version not found",
    "No such earlier version",
);
pub const RATE_LIMITED: ProblemType = row(
    StatusCode::TOO_MANY_REQUESTS,
    codes::RATE_LIMITED,
    "rate-limited",
    "Too many requests",
    "The tenant's rate limit is used up",
);
pub const CONTENT_TOO_LARGE: ProblemType = row(
    StatusCode::PAYLOAD_TOO_LARGE,
    codes::CONTENT_TOO_LARGE,
    "content-customization-too-large",
    "Content customization too large",
    "The customization would exceed 100 KB as stored; nothing is written",
);
pub const CONTENT: &[&ProblemType] =
    &[&CONTENT_NOT_FOUND, &CONTENT_VERSION_NOT_FOUND, &CONTENT_TOO_LARGE, &RATE_LIMITED];

// Code customizations.
pub const CODE_NOT_FOUND: ProblemType = row(
    StatusCode::NOT_FOUND,
    codes::CODE_NOT_FOUND,
    "code-customization-not-found",
    "Code customization not found",
    "No such code customization",
);
pub const CODE_VERSION_NOT_FOUND: ProblemType = row(
    StatusCode::NOT_FOUND,
    codes::CODE_VERSION_NOT_FOUND,
    "code-customization-version-not-found",
    "Version not found",
    "No such earlier version of the code customization",
);
pub const ENV_NOT_FOUND: ProblemType = row(
    StatusCode::NOT_FOUND,
    codes::ENV_NOT_FOUND,
    "environment-variable-not-found",
    "Environment variable not found",
    "The tenant has no environment variable of this name",
);
pub const TOO_MANY_ENV_VARS: ProblemType = row(
    StatusCode::CONFLICT,
    codes::TOO_MANY_ENV_VARS,
    "too-many-environment-variables",
    "Too many environment variables",
    "The tenant has 50 environment variables, the most it may have; nothing is written",
);
pub const SIGNING_KEY_NOT_FOUND: ProblemType = row(
    StatusCode::NOT_FOUND,
    codes::SIGNING_KEY_NOT_FOUND,
    "signing-key-not-found",
    "Signing key not found",
    "The tenant publishes no signing key of this id",
);
pub const SIGNING_KEY_ACTIVE: ProblemType = row(
    StatusCode::CONFLICT,
    codes::SIGNING_KEY_ACTIVE,
    "signing-key-active",
    "Signing key is active",
    "The key is the tenant's active signing key: rotate to a new key before retiring it",
);
pub const TOO_MANY_SIGNING_KEYS: ProblemType = row(
    StatusCode::CONFLICT,
    codes::TOO_MANY_SIGNING_KEYS,
    "too-many-signing-keys",
    "Too many signing keys",
    "The tenant publishes 5 signing keys, the most it may; retire one before rotating",
);
pub const CODE: &[&ProblemType] = &[
    &CODE_NOT_FOUND,
    &CODE_VERSION_NOT_FOUND,
    &ENV_NOT_FOUND,
    &TOO_MANY_ENV_VARS,
    &SIGNING_KEY_NOT_FOUND,
    &SIGNING_KEY_ACTIVE,
    &TOO_MANY_SIGNING_KEYS,
];

// Events.
pub const EVENT_ID_TAKEN: ProblemType = row(
    StatusCode::CONFLICT,
    codes::EVENT_ID_TAKEN,
    "event-id-taken",
    "Event id used by another report",
    "The report's `eventId` names an event reported before with another name, app, reporter or attributes",
);
pub const EVENTS: &[&ProblemType] = &[&EVENT_ID_TAKEN];

/// Every area's table.
pub const TABLES: &[&[&ProblemType]] =
    &[GENERAL, CONTROL, AUTH, OOB, CERTIFICATES, REGISTRATION, ENROLLMENT, PAIRING, CONTENT, CODE, EVENTS];

/// Codes that are not answers but attributes of events, listed with the rest.
pub const EVENT_CODES: &[(i64, &str)] = &[(
    rp_domain::certificates::DEAD_ERROR_CODE,
    "errorCode of the event logged when a request dies (out of attempts)",
)];

/// The error-code list of `docs/errors.md`, in code order.
pub fn markdown_table() -> String {
    let mut rows: Vec<(i64, String, &str)> = TABLES
        .iter()
        .flat_map(|t| t.iter())
        .map(|p| (i64::from(p.code), p.status.as_u16().to_string(), p.meaning))
        .chain(EVENT_CODES.iter().map(|(code, meaning)| (*code, "—".to_owned(), *meaning)))
        .collect();
    rows.sort_by_key(|r| r.0);
    let mut out = String::from("| errorCode | HTTP | Meaning |\n|---|---|---|\n");
    for (code, status, meaning) in rows {
        out.push_str(&format!("| {code} | {status} | {meaning} |\n"));
    }
    out
}

impl From<AppError> for Problem {
    fn from(e: AppError) -> Self {
        match e {
            AppError::Control(e) => e.into(),
            AppError::Enroll(e) => e.into(),
            AppError::Pairing(e) => e.into(),
            AppError::Offline(e) => e.into(),
            AppError::Cert(e) => e.into(),
            AppError::Oob(e) => e.into(),
            AppError::Registration(e) => e.into(),
            AppError::Code(e) => e.into(),
            AppError::Content(e) => e.into(),
            AppError::Event(e) => e.into(),
            AppError::Failed(e) => e.into(),
            AppError::Push(e) => e.into(),
            AppError::RateLimited { rule, decision, now } => over_limit(&rule, &decision, now),
        }
    }
}

/// 429: the tenant's budget `rule` is used up until the window resets.
pub fn over_limit(rule: &RateLimit, decision: &Decision, now: i64) -> Problem {
    let wait = (decision.reset - now).max(1) as u64;
    Problem::of(&RATE_LIMITED)
        .detail(format!(
            "the tenant's limit of {} requests per {} s is used up; retry in {wait} s",
            rule.limit, rule.window_secs
        ))
        .retry_after(wait)
}

impl From<EventError> for Problem {
    fn from(e: EventError) -> Self {
        let detail = e.to_string();
        match e {
            EventError::IdTaken(_) => Problem::about(&EVENT_ID_TAKEN, "eventId", detail),
        }
    }
}

impl From<PkiError> for Problem {
    fn from(e: PkiError) -> Self {
        let detail = e.to_string();
        match e {
            PkiError::NotFound(_) => Problem::about(&CA_NOT_PUBLISHED, "caId", detail),
            PkiError::Outdated { .. } => Problem::about(&CRL_OUTDATED, "crl", detail),
            PkiError::Failed(e) => e.into(),
        }
    }
}

impl From<SigningKeyError> for Problem {
    fn from(e: SigningKeyError) -> Self {
        let detail = e.to_string();
        match e {
            SigningKeyError::NotFound(_) => Problem::about(&SIGNING_KEY_NOT_FOUND, "kid", detail),
            SigningKeyError::Active(_) => Problem::about(&SIGNING_KEY_ACTIVE, "kid", detail),
            SigningKeyError::TooMany => Problem::about(&TOO_MANY_SIGNING_KEYS, "kid", detail),
            SigningKeyError::Failed(e) => e.into(),
        }
    }
}

impl From<CodeError> for Problem {
    fn from(e: CodeError) -> Self {
        let detail = e.to_string();
        match e {
            CodeError::NotFound(_) => Problem::about(&CODE_NOT_FOUND, "id", detail),
            CodeError::KeyReused => Problem::about(&IDEMPOTENCY_KEY_REUSED, idempotency::HEADER, detail),
            CodeError::VersionNotFound { .. } => Problem::about(&CODE_VERSION_NOT_FOUND, "version", detail),
            CodeError::EnvNotFound(_) => Problem::about(&ENV_NOT_FOUND, "name", detail),
            CodeError::TooManyEnvVars => Problem::about(&TOO_MANY_ENV_VARS, "name", detail),
            CodeError::BadSource(_) => Problem::invalid("source", detail),
            CodeError::Failed(e) => e.into(),
        }
    }
}

impl From<OobError> for Problem {
    fn from(e: OobError) -> Self {
        let detail = e.to_string();
        match e {
            OobError::NotFound => Problem::of(&OOB_NOT_FOUND).detail(detail),
            OobError::Denied(_) => Problem::of(&OOB_DENIED).detail(detail),
            OobError::HookFailed { .. } => Problem::of(&OOB_HOOK_FAILED).detail(detail),
            OobError::UnknownUser => Problem::about(&OOB_UNKNOWN_USER, "namedUser", detail),
            OobError::NoDevice => Problem::about(&OOB_NO_DEVICE, "namedUser", detail),
            OobError::UnknownDevice | OobError::DeviceCannotAnswer => {
                Problem::about(&OOB_UNKNOWN_DEVICE, "deviceId", detail)
            }
            OobError::NonceReused => Problem::about(&NONCE_REUSED, "sessionNonce", detail),
            OobError::AlreadyAnswered => Problem::of(&OOB_ANSWERED).detail(detail),
            OobError::BadSignature => Problem::about(&BAD_SIGNATURE, "signature", detail),
            OobError::WrongAmount => Problem::about(&WRONG_AMOUNT, "amount", detail),
            OobError::Failed(e) => e.into(),
        }
    }
}

impl From<ControlError> for Problem {
    fn from(e: ControlError) -> Self {
        let detail = e.to_string();
        match e {
            ControlError::AppNotFound(_) => Problem::of(&APP_NOT_FOUND).detail(detail),
            ControlError::AppExists(_) => Problem::about(&APP_EXISTS, "appId", detail),
            ControlError::TokenNotFound(_) => Problem::of(&TOKEN_NOT_FOUND).detail(detail),
            ControlError::Failed(e) => e.into(),
        }
    }
}

impl From<CertError> for Problem {
    fn from(e: CertError) -> Self {
        let detail = e.to_string();
        match e {
            CertError::RequestNotFound { .. } => Problem::about(&CERT_REQUEST_NOT_FOUND, "requestId", detail),
            CertError::LeaseEnded => Problem::about(&LEASE_ENDED, "requestId", detail),
            CertError::Dead => Problem::about(&REQUEST_DEAD, "requestId", detail),
            CertError::ResultDiffers => Problem::about(&RESULT_DIFFERS, "requestId", detail),
            CertError::CertNotFound(_) => Problem::about(&CERT_NOT_FOUND, "certSerialNumber", detail),
            CertError::SerialTaken => Problem::about(&SERIAL_TAKEN, "loginCertSerialNumber", detail),
            CertError::AlreadyRevoked(_) => Problem::about(&CERT_REVOKED, "certSerialNumber", detail),
            CertError::QueueFull { .. } => Problem::of(&CERT_QUEUE_FULL).detail(detail).retry_after(15),
            CertError::Failed(e) => e.into(),
        }
    }
}

impl From<RegistrationError> for Problem {
    fn from(e: RegistrationError) -> Self {
        let detail = e.to_string();
        match e {
            RegistrationError::LinkNotFound => Problem::about(&LINK_NOT_FOUND, "code", detail),
            RegistrationError::LinkExpired => Problem::about(&LINK_EXPIRED, "code", detail),
            RegistrationError::LinkUsed => Problem::about(&LINK_USED, "code", detail),
            RegistrationError::DeviceExists(_) => Problem::about(&DEVICE_EXISTS, "deviceId", detail),
            RegistrationError::DeviceNotFound(_) => Problem::about(&DEVICE_NOT_FOUND, "deviceId", detail),
            RegistrationError::NoDeviceToken(_) => Problem::about(&NO_DEVICE_TOKEN, "deviceId", detail),
            RegistrationError::RepeatedTooSoon => {
                Problem::of(&CONFLICT).detail(detail).retry_after(REPEAT_AFTER_SECS as u64)
            }
            RegistrationError::AliasTaken(_) => Problem::about(&ALIAS_TAKEN, "machineUserNameWS", detail),
            RegistrationError::Failed(e) => e.into(),
        }
    }
}

impl From<EnrollError> for Problem {
    fn from(e: EnrollError) -> Self {
        let detail = e.to_string();
        match e {
            EnrollError::UnknownUser => Problem::about(&UNKNOWN_USER, "machineUserNameWS", detail),
            EnrollError::NoDevice => Problem::about(&NO_DEVICE, "machineUserNameWS", detail),
            EnrollError::SessionNotFound => Problem::about(&SESSION_NOT_FOUND, "sessionId", detail),
            EnrollError::MachineTaken => Problem::about(&MACHINE_TAKEN, "machineId", detail),
            EnrollError::CrossCheck { field, .. } => Problem::about(&CROSS_CHECK_FAILED, field, detail),
            EnrollError::SessionInUse | EnrollError::SessionClosed => {
                Problem::about(&SESSION_CONFLICT, "sessionId", detail)
            }
            EnrollError::Failed(e) => e.into(),
        }
    }
}

impl From<PairingError> for Problem {
    fn from(e: PairingError) -> Self {
        let detail = e.to_string();
        match e {
            PairingError::UnknownDevice => Problem::about(&UNKNOWN_DEVICE, "deviceId", detail),
            PairingError::NotFound => Problem::of(&PAIRING_NOT_FOUND).detail(detail),
            PairingError::DeviceNotFound(_) => Problem::about(&DEVICE_NOT_FOUND, "deviceId", detail),
            PairingError::NotEnrolled => Problem::about(&NOT_ENROLLED, "machineId", detail),
            PairingError::NameOfAnotherUser(_) => {
                Problem::about(&NAME_OF_ANOTHER_USER, "machineUserNameWS", detail)
            }
            PairingError::Offline(e) => e.into(),
            PairingError::Cert(e) => e.into(),
            PairingError::Failed(e) => e.into(),
        }
    }
}

impl From<OfflineError> for Problem {
    fn from(e: OfflineError) -> Self {
        let detail = e.to_string();
        match e {
            OfflineError::Disabled => Problem::of(&OFFLINE_DISABLED).detail(detail),
            OfflineError::NotOwner => Problem::of(&NOT_PAIRING_OWNER).detail(detail),
            OfflineError::Delivered => Problem::of(&OFFLINE_DELIVERED).detail(detail),
            OfflineError::PinGone(_) => Problem::about(&PIN_GONE, "tokenId", detail),
            OfflineError::NoSet => Problem::of(&NO_OFFLINE_SET).detail(detail),
            OfflineError::Locked { until } => {
                let wait =
                    EpochMillis::from_datetime(time::OffsetDateTime::now_utc()).until(until).as_secs().max(1);
                Problem::of(&OFFLINE_LOCKED).detail(format!("{detail} until {until}")).retry_after(wait)
            }
        }
    }
}

impl From<ContentError> for Problem {
    fn from(e: ContentError) -> Self {
        let detail = e.to_string();
        match e {
            ContentError::NotFound(_) => Problem::about(&CONTENT_NOT_FOUND, "id", detail),
            ContentError::KeyReused => Problem::about(&IDEMPOTENCY_KEY_REUSED, idempotency::HEADER, detail),
            ContentError::VersionNotFound { .. } => {
                Problem::about(&CONTENT_VERSION_NOT_FOUND, "version", detail)
            }
            ContentError::TooLarge { .. } => Problem::about(&CONTENT_TOO_LARGE, "contentMap", detail),
            ContentError::Failed(e) => e.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    /// Each code means one thing: no two problems, nor a problem and an event's code, share one.
    #[test]
    fn codes_are_unique_and_grouped_by_area() {
        let mut seen = HashSet::new();
        for table in TABLES {
            for p in *table {
                assert!(seen.insert(i64::from(p.code)), "{} appears twice", p.code);
                assert!((1_000_000..2_000_000).contains(&p.code));
            }
        }
        for (code, _) in EVENT_CODES {
            assert!(seen.insert(*code), "{code} is an event's code and a problem's");
        }
    }

    /// `UPDATE_DOCS=1 cargo test -p rp-http --lib the_errors_page_lists` rewrites the table.
    #[test]
    fn the_errors_page_lists_exactly_these_codes() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/errors.md");
        let mut page = std::fs::read_to_string(path).unwrap();
        let table = markdown_table();
        // The page's table, from its header to the blank line after it (or the page's end): all
        // of it is compared, so a row the code no longer has is stale too.
        let table_in = |page: &str| {
            let start = page.find("| errorCode | HTTP | Meaning |").expect("docs/errors.md has the table");
            start..page[start..].find("\n\n").map_or(page.len(), |n| start + n + 1)
        };
        let range = table_in(&page);
        if std::env::var_os("UPDATE_DOCS").is_some() && page[range.clone()] != table {
            page.replace_range(range, &table);
            std::fs::write(path, &page).unwrap();
        }
        assert!(
            page[table_in(&page)] == table,
            "docs/errors.md's error-code table is out of date (UPDATE_DOCS=1 rewrites it); it should read:\n{table}"
        );
    }
}
