//! RFC 7807 `application/problem+json`: the one error mapping every endpoint uses (DECISIONS §1).
//!
//! `detail` ends with ` (exceptionId: <uuid>)`; the same id is on the log line. Server-side
//! failures keep their source chain for the log and show the client a fixed text.
//!
//! The rows every endpoint can answer with (a bad field, a body that is not JSON, a store that
//! is down, ...) are here, beside the type; each area's own rows are in [`crate::errors`].

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use rp_domain::boundary::Failure;
use rp_domain::FieldError;
use rp_ports::{Invalid, KeyError, PushError, QueueError, StoreError};
use serde::Serialize;

/// The project's error codes, grouped per area (listed in `docs/errors.md`).
pub mod codes {
    pub const INVALID_FIELD: u32 = 1_000_001;
    pub const MALFORMED_BODY: u32 = 1_000_002;
    pub const BODY_TOO_LARGE: u32 = 1_000_003;
    pub const UNSUPPORTED_MEDIA_TYPE: u32 = 1_000_004;
    pub const ROUTE_NOT_FOUND: u32 = 1_000_005;
    pub const METHOD_NOT_ALLOWED: u32 = 1_000_006;
    pub const REJECTED_BY_STORE: u32 = 1_000_007;
    pub const MALFORMED_REQUEST: u32 = 1_000_008;
    pub const URI_TOO_LONG: u32 = 1_000_009;
    pub const HEADERS_TOO_LARGE: u32 = 1_000_010;
    pub const CONFLICT: u32 = 1_000_409;
    pub const IDEMPOTENCY_KEY_REUSED: u32 = 1_000_422;
    pub const INTERNAL: u32 = 1_000_500;
    pub const UNAVAILABLE: u32 = 1_000_503;
    pub const MISSING_CREDENTIALS: u32 = 1_100_001;
    pub const INVALID_TOKEN: u32 = 1_100_002;
    pub const WRONG_TOKEN_KIND: u32 = 1_100_003;
    pub const OTHER_TENANT: u32 = 1_100_004;
    pub const TENANT_SCOPED_TOKEN: u32 = 1_100_005;
    pub const OOB_UNKNOWN_USER: u32 = 1_200_001;
    pub const OOB_NO_DEVICE: u32 = 1_200_002;
    pub const OOB_UNKNOWN_DEVICE: u32 = 1_200_009;
    pub const NONCE_REUSED: u32 = 1_200_003;
    pub const OOB_ANSWERED: u32 = 1_200_004;
    pub const BAD_SIGNATURE: u32 = 1_200_005;
    pub const WRONG_AMOUNT: u32 = 1_200_006;
    /// The seed's own code: the OOB request could not be found.
    pub const OOB_NOT_FOUND: u32 = 1_201_013;
    pub const CERT_REQUEST_NOT_FOUND: u32 = 1_300_001;
    pub const LEASE_ENDED: u32 = 1_300_002;
    pub const RESULT_DIFFERS: u32 = 1_300_003;
    pub const CERT_NOT_FOUND: u32 = 1_300_004;
    pub const SERIAL_TAKEN: u32 = 1_300_005;
    pub const CERT_REVOKED: u32 = 1_300_006;
    pub const REQUEST_DEAD: u32 = 1_300_007;
    pub const CERT_QUEUE_FULL: u32 = 1_300_008;
    pub const CA_NOT_PUBLISHED: u32 = 1_300_009;
    pub const CRL_OUTDATED: u32 = 1_300_011;
    pub const LINK_NOT_FOUND: u32 = 1_400_001;
    pub const LINK_EXPIRED: u32 = 1_400_002;
    pub const LINK_USED: u32 = 1_400_003;
    pub const DEVICE_EXISTS: u32 = 1_400_004;
    pub const UNKNOWN_USER: u32 = 1_400_005;
    pub const NO_DEVICE: u32 = 1_400_006;
    pub const SESSION_NOT_FOUND: u32 = 1_400_007;
    pub const CROSS_CHECK_FAILED: u32 = 1_400_008;
    pub const SESSION_CONFLICT: u32 = 1_400_009;
    pub const UNKNOWN_DEVICE: u32 = 1_400_010;
    pub const PAIRING_NOT_FOUND: u32 = 1_400_011;
    pub const DEVICE_NOT_FOUND: u32 = 1_400_012;
    pub const NOT_ENROLLED: u32 = 1_400_013;
    pub const NAME_OF_ANOTHER_USER: u32 = 1_400_014;
    pub const ALIAS_TAKEN: u32 = 1_400_015;
    pub const NO_DEVICE_TOKEN: u32 = 1_400_016;
    pub const MACHINE_TAKEN: u32 = 1_400_017;
    pub const OFFLINE_DISABLED: u32 = 1_500_001;
    pub const NOT_PAIRING_OWNER: u32 = 1_500_002;
    pub const OFFLINE_DELIVERED: u32 = 1_500_003;
    pub const PIN_GONE: u32 = 1_500_004;
    pub const OFFLINE_LOCKED: u32 = 1_500_005;
    pub const NO_OFFLINE_SET: u32 = 1_500_006;
    pub const CONTENT_NOT_FOUND: u32 = 1_600_001;
    pub const CONTENT_VERSION_NOT_FOUND: u32 = 1_600_002;
    pub const CONTENT_TOO_LARGE: u32 = 1_600_003;
    pub const CODE_NOT_FOUND: u32 = 1_700_001;
    pub const CODE_VERSION_NOT_FOUND: u32 = 1_700_002;
    pub const ENV_NOT_FOUND: u32 = 1_700_003;
    pub const TOO_MANY_ENV_VARS: u32 = 1_700_004;
    pub const SIGNING_KEY_NOT_FOUND: u32 = 1_700_005;
    pub const SIGNING_KEY_ACTIVE: u32 = 1_700_006;
    pub const TOO_MANY_SIGNING_KEYS: u32 = 1_700_007;
    pub const OOB_DENIED: u32 = 1_200_007;
    pub const OOB_HOOK_FAILED: u32 = 1_200_008;
    pub const EVENT_ID_TAKEN: u32 = 1_800_001;
    pub const RATE_LIMITED: u32 = 1_900_001;
    pub const APP_NOT_FOUND: u32 = 1_050_001;
    pub const APP_EXISTS: u32 = 1_050_002;
    pub const TOKEN_NOT_FOUND: u32 = 1_050_003;
}

/// One row of an area's error table (see [`super::errors`]): what an error answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProblemType {
    pub status: StatusCode,
    pub code: u32,
    /// Slug of the problem type; `type` is `/problems/<slug>`.
    pub slug: &'static str,
    pub title: &'static str,
    /// What it means, as `docs/errors.md` says it.
    pub meaning: &'static str,
}

/// A row of an error table.
pub(crate) const fn row(
    status: StatusCode,
    code: u32,
    slug: &'static str,
    title: &'static str,
    meaning: &'static str,
) -> ProblemType {
    ProblemType { status, code, slug, title, meaning }
}

// Every endpoint.
pub const INVALID_FIELD: ProblemType = row(
    StatusCode::BAD_REQUEST,
    codes::INVALID_FIELD,
    "invalid-field",
    "Invalid request field",
    "A request field (body, path or query) is invalid; `field` names it",
);
pub const MALFORMED_BODY: ProblemType = row(
    StatusCode::BAD_REQUEST,
    codes::MALFORMED_BODY,
    "malformed-body",
    "Malformed request body",
    "The body is not valid JSON",
);
pub const BODY_TOO_LARGE: ProblemType = row(
    StatusCode::PAYLOAD_TOO_LARGE,
    codes::BODY_TOO_LARGE,
    "body-too-large",
    "Request body too large",
    "The body exceeds the limit",
);
pub const UNSUPPORTED_MEDIA_TYPE: ProblemType = row(
    StatusCode::UNSUPPORTED_MEDIA_TYPE,
    codes::UNSUPPORTED_MEDIA_TYPE,
    "unsupported-media-type",
    "Unsupported media type",
    "The body is not `application/json`, or is compressed",
);
pub const ROUTE_NOT_FOUND: ProblemType = row(
    StatusCode::NOT_FOUND,
    codes::ROUTE_NOT_FOUND,
    "route-not-found",
    "No such endpoint",
    "No such endpoint",
);
pub const METHOD_NOT_ALLOWED: ProblemType = row(
    StatusCode::METHOD_NOT_ALLOWED,
    codes::METHOD_NOT_ALLOWED,
    "method-not-allowed",
    "Method not allowed",
    "The endpoint does not accept this method",
);
pub const REJECTED_BY_STORE: ProblemType = row(
    StatusCode::BAD_REQUEST,
    codes::REJECTED_BY_STORE,
    "rejected-by-store",
    "Input refused by the store",
    "The store refused a value the request carried (DynamoDB validation)",
);
pub const MALFORMED_REQUEST: ProblemType = row(
    StatusCode::BAD_REQUEST,
    codes::MALFORMED_REQUEST,
    "malformed-request",
    "Malformed request",
    "The request line or a header is not valid HTTP/1.1; no endpoint saw the request",
);
pub const URI_TOO_LONG: ProblemType = row(
    StatusCode::URI_TOO_LONG,
    codes::URI_TOO_LONG,
    "uri-too-long",
    "Request target too long",
    "The path and query string are longer than the server reads (64 KiB on the local server)",
);
pub const HEADERS_TOO_LARGE: ProblemType = row(
    StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
    codes::HEADERS_TOO_LARGE,
    "headers-too-large",
    "Request headers too large",
    "The request's headers are larger than the server reads",
);
pub const CONFLICT: ProblemType = row(
    StatusCode::CONFLICT,
    codes::CONFLICT,
    "conflict",
    "Concurrent update",
    "A concurrent update won; retry",
);
pub const IDEMPOTENCY_KEY_REUSED: ProblemType = row(
    StatusCode::UNPROCESSABLE_ENTITY,
    codes::IDEMPOTENCY_KEY_REUSED,
    "idempotency-key-reused",
    "Idempotency key reused",
    "The `Idempotency-Key` came with another request within the last day; nothing is written",
);
pub const INTERNAL: ProblemType = row(
    StatusCode::INTERNAL_SERVER_ERROR,
    codes::INTERNAL,
    "internal",
    "Internal server error",
    "Internal error",
);
pub const UNAVAILABLE: ProblemType = row(StatusCode::SERVICE_UNAVAILABLE, codes::UNAVAILABLE, "unavailable", "Service unavailable", "A backing service (store, queue, keys) is unavailable or throttling; `Retry-After` when it is throttling");

#[derive(Debug)]
pub struct Problem {
    pub kind: &'static ProblemType,
    pub detail: String,
    /// The request field or header at fault, when there is one.
    pub field: Option<String>,
    pub retry_after: Option<u64>,
    /// Why a 5xx happened: logged, never sent.
    pub source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

/// An `application/problem+json` body (RFC 7807).
#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = Problem)]
pub(crate) struct ProblemBody<'a> {
    /// `/problems/<slug>`.
    #[serde(rename = "type")]
    kind: String,
    title: &'a str,
    status: u16,
    /// What went wrong, ending with ` (exceptionId: <uuid>)`, the id on the server's log line.
    detail: String,
    /// The project's error code (`docs/errors.md`).
    error_code: u32,
    /// The request field or header at fault, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    field: Option<&'a str>,
}

impl Problem {
    /// A problem of `kind`, its title as the detail until one is given.
    pub fn of(kind: &'static ProblemType) -> Self {
        Self { kind, detail: kind.title.to_owned(), field: None, retry_after: None, source: None }
    }

    /// A problem of `kind` about `field`, with a detail that names it.
    pub fn about(kind: &'static ProblemType, field: &str, detail: impl std::fmt::Display) -> Self {
        Self::of(kind).detail(detail.to_string()).field(field)
    }

    pub fn status(&self) -> StatusCode {
        self.kind.status
    }

    pub fn code(&self) -> u32 {
        self.kind.code
    }

    pub fn detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = detail.into();
        self
    }

    pub fn field(mut self, field: impl Into<String>) -> Self {
        self.field = Some(field.into());
        self
    }

    pub fn retry_after(mut self, secs: u64) -> Self {
        self.retry_after = Some(secs);
        self
    }

    pub fn source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(Box::new(source));
        self
    }

    /// 400 naming the field at fault.
    pub fn invalid(field: impl Into<String>, message: impl std::fmt::Display) -> Self {
        let field = field.into();
        Self::of(&INVALID_FIELD).detail(format!("{field}: {message}")).field(field)
    }

    pub fn malformed_body(message: impl std::fmt::Display) -> Self {
        Self::about(&MALFORMED_BODY, "body", format!("body: {message}"))
    }

    pub fn body_too_large(limit: usize) -> Self {
        Self::about(&BODY_TOO_LARGE, "body", format!("body: the request body exceeds {limit} bytes"))
    }

    pub fn unsupported_media_type() -> Self {
        Self::about(
            &UNSUPPORTED_MEDIA_TYPE,
            "Content-Type",
            "Content-Type: the request body must be sent as application/json",
        )
    }

    pub fn unsupported_encoding() -> Self {
        Self::about(
            &UNSUPPORTED_MEDIA_TYPE,
            "Content-Encoding",
            "Content-Encoding: the request body must be sent uncompressed",
        )
    }

    pub fn route_not_found(path: &str) -> Self {
        Self::of(&ROUTE_NOT_FOUND).detail(format!("no endpoint at {path}"))
    }

    pub fn method_not_allowed(method: &str, path: &str) -> Self {
        Self::of(&METHOD_NOT_ALLOWED).detail(format!("{path} does not accept {method}"))
    }

    /// 401 naming the `Authorization` header.
    pub fn unauthorized(kind: &'static ProblemType, detail: impl Into<String>) -> Self {
        Self::of(kind).detail(detail).field("Authorization")
    }

    pub fn internal(source: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::of(&INTERNAL).detail("The request could not be processed.").source(source)
    }

    pub fn unavailable(source: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::of(&UNAVAILABLE).detail("A backing service is unavailable; try again shortly.").source(source)
    }
}

impl From<Failure> for Problem {
    fn from(e: Failure) -> Self {
        match e {
            Failure::Invalid(e) => e.into(),
            Failure::Store(e) => e.into(),
            Failure::Keys(e) => e.into(),
            Failure::Queue(e) => e.into(),
        }
    }
}

impl From<FieldError> for Problem {
    fn from(e: FieldError) -> Self {
        Problem::invalid(e.field, e.message)
    }
}

impl From<StoreError> for Problem {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Conflict => Problem::of(&CONFLICT)
                .detail("the resource changed while the request was processed; retry it"),
            StoreError::Invalid(Invalid::ForeignCursor) => {
                Problem::invalid("cursor", "is not a cursor returned by this list")
            }
            // The store's own words name its attributes and may quote the value: the log
            // gets them, the client a fixed text.
            StoreError::Invalid(Invalid::Rejected(_)) => Problem::about(
                &REJECTED_BY_STORE,
                "body",
                "body: a value the request carried is not one the store accepts (too long, or empty)",
            )
            .source(e),
            StoreError::Throttled(_) => Problem::unavailable(e).retry_after(1),
            StoreError::Unavailable(_) => Problem::unavailable(e),
            other => Problem::internal(other),
        }
    }
}

impl From<QueueError> for Problem {
    fn from(e: QueueError) -> Self {
        match e {
            QueueError::Unavailable(_) => Problem::unavailable(e),
            other => Problem::internal(other),
        }
    }
}

impl From<PushError> for Problem {
    fn from(e: PushError) -> Self {
        match e {
            PushError::Unavailable(_) => Problem::unavailable(e),
            other => Problem::internal(other),
        }
    }
}

impl From<KeyError> for Problem {
    fn from(e: KeyError) -> Self {
        match e {
            KeyError::Throttled(_) => Problem::unavailable(e).retry_after(1),
            KeyError::Unavailable(_) => Problem::unavailable(e),
            other => Problem::internal(other),
        }
    }
}

fn chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut next = err.source();
    while let Some(e) = next {
        text.push_str(": ");
        text.push_str(&e.to_string());
        next = e.source();
    }
    text
}

/// A problem as told to a client (after [`Problem::tell`] logged it): what a console page shows.
#[derive(Debug)]
pub struct Told {
    pub status: StatusCode,
    pub title: &'static str,
    /// The detail, ending with ` (exceptionId: <uuid>)`.
    pub detail: String,
    pub code: u32,
    pub slug: &'static str,
    pub field: Option<String>,
    pub retry_after: Option<u64>,
}

impl Problem {
    /// Logs the refusal or failure once, and says what the client is told.
    pub fn tell(self) -> Told {
        let exception_id = uuid::Uuid::new_v4();
        let (status, code) = (self.kind.status, self.kind.code);
        if status == StatusCode::TOO_MANY_REQUESTS {
            rp_ports::metrics::count(rp_ports::metrics::Metric::TooManyRequests, 1, None);
        }
        let cause = self.source.as_deref().map(|e| chain(e));
        if status.is_server_error() {
            let cause = cause.unwrap_or_default();
            tracing::error!(%exception_id, error_code = code, status = status.as_u16(), cause, "request failed");
        } else {
            // Bad input is the caller's problem, not ours: recorded, not raised as an error.
            tracing::info!(%exception_id, error_code = code, status = status.as_u16(), field = self.field.as_deref(), cause, "request refused");
        }
        Told {
            status,
            title: self.kind.title,
            detail: format!("{} (exceptionId: {exception_id})", self.detail),
            code,
            slug: self.kind.slug,
            field: self.field,
            retry_after: self.retry_after,
        }
    }

    /// The answer's status and problem+json body, the refusal or failure logged once.
    fn answer(self) -> (StatusCode, String, Option<u64>) {
        let told = self.tell();
        let body = ProblemBody {
            kind: format!("/problems/{}", told.slug),
            title: told.title,
            status: told.status.as_u16(),
            detail: told.detail,
            error_code: told.code,
            field: told.field.as_deref(),
        };
        let json = serde_json::to_string(&body).expect("a problem serializes");
        (told.status, json, told.retry_after)
    }

    /// The problem for a request the HTTP/1 parser refused before any handler saw it, by the
    /// status the parser answers with (hyper answers those itself, with no body): a request
    /// line or header that is not HTTP (400), a target over its limit (414), headers over
    /// theirs (431).
    pub fn unparsed(status: u16) -> Option<Problem> {
        let kind = match status {
            400 => &MALFORMED_REQUEST,
            414 => &URI_TOO_LONG,
            431 => &HEADERS_TOO_LARGE,
            _ => return None,
        };
        Some(Problem::of(kind).detail(kind.meaning))
    }

    /// The whole HTTP/1.1 answer, closing the connection: for the server's own answers to what
    /// its parser refused ([`Problem::unparsed`]).
    pub fn http1(self) -> Vec<u8> {
        let (status, json, _) = self.answer();
        let reason = status.canonical_reason().unwrap_or("");
        let head = format!(
            "HTTP/1.1 {} {reason}\r\ncontent-type: application/problem+json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            status.as_u16(),
            json.len()
        );
        [head.into_bytes(), json.into_bytes()].concat()
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let (status, json, retry_after) = self.answer();
        let mut response = (status, json).into_response();
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/problem+json"));
        if status == StatusCode::UNAUTHORIZED {
            headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        if let Some(secs) = retry_after {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("refused")]
    struct Refused;

    /// A store or key service shedding load is a 503 worth retrying in a second (`Retry-After`);
    /// one that is down or did not answer in time is a 503 without it.
    #[test]
    fn throttling_is_told_apart_from_unavailability() {
        let told = |problem: Problem| {
            let response = problem.into_response();
            let retry = response.headers().get(header::RETRY_AFTER).map(|v| v.to_str().unwrap().to_owned());
            (response.status().as_u16(), retry)
        };
        let throttled = (503, Some("1".to_owned()));
        let unavailable = (503, None);
        assert_eq!(told(StoreError::Throttled(Box::new(Refused)).into()), throttled);
        assert_eq!(told(KeyError::Throttled(Box::new(Refused)).into()), throttled);
        assert_eq!(told(StoreError::unavailable(Refused).into()), unavailable);
        assert_eq!(told(KeyError::unavailable(Refused).into()), unavailable);
        assert_eq!(told(QueueError::unavailable(Refused).into()), unavailable);
    }

    /// The log of a failure carries its whole cause, each error and what it came from, for the
    /// operator; the client is told none of it.
    #[test]
    fn a_failure_is_logged_with_its_whole_cause_and_told_without_it() {
        let failure = StoreError::unavailable(std::io::Error::other("the volume is gone"));
        assert_eq!(chain(&failure), "the store is unavailable: the volume is gone");
        assert_eq!(chain(&Refused), "refused", "an error with no source is itself");
        let told = Problem::from(failure).tell();
        assert_eq!(told.status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(!told.detail.contains("volume"), "{}", told.detail);
    }

    /// A value the store refuses is the caller's fault, a 400 naming the body; the store's own
    /// message (which names its attributes and may quote the value) goes to the log only.
    #[test]
    fn a_refused_value_is_told_without_the_stores_words() {
        let words = "One or more parameter values were invalid: Key: sk, value hunter2";
        let problem = Problem::from(StoreError::from(Invalid::Rejected(words.into())));
        let logged = problem.source.as_deref().map(|e| chain(e)).unwrap_or_default();
        assert!(logged.contains(words), "{logged}");
        let told = problem.tell();
        assert_eq!(
            (told.status, told.code, told.field.as_deref()),
            (StatusCode::BAD_REQUEST, codes::REJECTED_BY_STORE, Some("body"))
        );
        assert!(told.detail.starts_with("body: a value the request carried"), "{}", told.detail);
        assert!(!told.detail.contains("hunter2") && !told.detail.contains("sk"), "{}", told.detail);
    }
}
