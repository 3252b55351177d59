//! Extractors whose every rejection is a [`Problem`] naming the field or header at fault.

use super::errors;
use super::problem::Problem;
use super::strict_json::Strict;
use axum::extract::{FromRequest, FromRequestParts, RawPathParams, Request};
use axum::http::{header, request::Parts, HeaderMap, StatusCode};
use bytes::Bytes;
use rp_app::apps::load_app;
use rp_app::AppState;
use rp_domain::apps::{AppId, ControlError};
use rp_domain::devices::{DeviceTokenRecord, DeviceTokenRefusal};
use rp_domain::tokens::{TokenKind, TokenRecord, TokenRefusal, TokenSecret};
use rp_repo::apps::AppRecord;
use serde::de::DeserializeOwned;

/// A JSON body: `Content-Type: application/json`, within the body limit, every field known.
pub struct ApiJson<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for ApiJson<T> {
    type Rejection = Problem;

    async fn from_request(req: Request, state: &S) -> Result<Self, Problem> {
        let (json, bytes) = read_body(req, state).await?;
        if !json {
            return Err(Problem::unsupported_media_type());
        }
        parse_json(&bytes).map(ApiJson)
    }
}

/// An optional JSON body: none at all, or `null`, is `None`; anything else is held to
/// [`ApiJson`]'s rules.
pub struct MaybeJson<T>(pub Option<T>);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for MaybeJson<T> {
    type Rejection = Problem;

    async fn from_request(req: Request, state: &S) -> Result<Self, Problem> {
        let (json, bytes) = read_body(req, state).await?;
        if bytes.is_empty() {
            return Ok(MaybeJson(None));
        }
        if !json {
            return Err(Problem::unsupported_media_type());
        }
        parse_json(&bytes).map(MaybeJson)
    }
}

/// The body within the limit, and whether it is declared JSON.
async fn read_body<S: Send + Sync>(req: Request, state: &S) -> Result<(bool, Bytes), Problem> {
    let json = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|v| v.trim().to_ascii_lowercase())
        .is_some_and(|v| v == "application/json" || (v.starts_with("application/") && v.ends_with("+json")));
    let encoded = req.headers().get_all(header::CONTENT_ENCODING).iter().any(|v| !is_identity(v.as_bytes()));
    let limit = req.extensions().get::<BodyLimit>().map_or(usize::MAX, |l| l.0);
    let bytes = Bytes::from_request(req, state).await.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            Problem::body_too_large(limit)
        } else {
            Problem::malformed_body("could not be read")
        }
    })?;
    // A compressed body would be read as the bytes it was sent as, and refused as malformed
    // JSON; a content coding is refused by name instead (RFC 9110, 15.5.16).
    if encoded && !bytes.is_empty() {
        return Err(Problem::unsupported_encoding());
    }
    Ok((json, bytes))
}

/// A `Content-Encoding` value that leaves the body as it is: `identity`, or nothing.
fn is_identity(value: &[u8]) -> bool {
    value.split(|b| *b == b',').all(|coding| {
        let coding = coding.trim_ascii();
        coding.is_empty() || coding.eq_ignore_ascii_case(b"identity")
    })
}

/// The UTF-8 encoding of U+FEFF, the byte order mark.
const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// The configured body limit, put in request extensions so rejections can name it.
#[derive(Clone, Copy)]
pub struct BodyLimit(pub usize);

/// Parses JSON, naming the failing field by its path (`offlineAccess.tokenCount`). A leading
/// UTF-8 byte order mark is passed over, as RFC 8259 (8.1) lets a reader do and as Java's and
/// .NET's common stream readers (Jackson, System.Text.Json) do: a client whose writer puts one
/// there (a .NET `StreamWriter` with `Encoding.UTF8` does) works unchanged.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, Problem> {
    let bytes = bytes.strip_prefix(UTF8_BOM).unwrap_or(bytes);
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(Problem::malformed_body("a JSON object is required"));
    }
    // JSON is UTF-8 (RFC 8259, 8.1). serde_json checks it only in what it keeps, so a stray
    // byte in a member name or a value passed over would be told as something else. Checked
    // once here, the text is read as a `str`, which serde_json checks no further.
    let text = std::str::from_utf8(bytes).map_err(|e| {
        Problem::malformed_body(format!("not valid JSON (not UTF-8 at byte {})", e.valid_up_to()))
    })?;
    if let Some(path) = crate::strict_json::duplicate_member(bytes) {
        return Err(Problem::invalid(path, "appears twice in its object"));
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let value = match serde_path_to_error::deserialize::<_, T>(Strict(&mut de)) {
        Ok(value) => value,
        Err(err) => {
            let path = err.path().to_string();
            let inner = err.into_inner();
            // serde_json reports some values of the wrong kind (a `null` or a number where an
            // enum's name goes) as a syntax error; the body is valid JSON all the same.
            let valid = serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok();
            return Err(json_problem(&path, &inner, valid));
        }
    };
    de.end().map_err(|_| Problem::malformed_body("unexpected data after the JSON value"))?;
    Ok(value)
}

fn json_problem(path: &str, err: &serde_json::Error, valid_json: bool) -> Problem {
    use serde_json::error::Category;
    let mut message = err.to_string();
    if let Some(at) = message.rfind(" at line ") {
        message.truncate(at);
    }
    for rust_type in ["i64", "u64", "i32", "u32", "usize", "u16", "u8"] {
        message = message.replace(&format!("expected {rust_type}"), "expected an integer");
    }
    // "expected struct LinkOptions": the body's type is ours, not the caller's.
    if let Some(at) = message.find("expected struct ") {
        message.replace_range(at.., "expected an object");
    }
    match err.classify() {
        Category::Syntax if valid_json => {
            let field = if path == "." { "body" } else { path };
            // JSON's grammar lets a `\u` escape name half a surrogate pair, and a number be
            // larger than any double: neither is a value of the wrong kind, so say which.
            let what = if message.contains("surrogate") || message.contains("hex escape") {
                "is not text: a \\u escape names half a surrogate pair"
            } else if message.starts_with("number out of range") {
                "is a number out of range"
            } else {
                "is a value of the wrong kind"
            };
            Problem::invalid(field, what)
        }
        Category::Syntax | Category::Eof | Category::Io => {
            Problem::malformed_body(format!("not valid JSON ({message})"))
        }
        Category::Data => {
            let parent = if path == "." { String::new() } else { path.to_owned() };
            // serde names unknown and missing fields in the message, at the parent's path.
            let field = match serde_named_field(&message) {
                Some(name) if parent.is_empty() => name,
                Some(name) if !parent.ends_with(&name) => format!("{parent}.{name}"),
                _ if parent.is_empty() => "body".to_owned(),
                _ => parent,
            };
            if message.starts_with("unknown field") {
                message = "is not a known field".to_owned();
            } else if message.starts_with("missing field") {
                message = "is required".to_owned();
            }
            Problem::invalid(field, message)
        }
    }
}

/// The field serde names in an "unknown field `x`" or "missing field `x`" message.
fn serde_named_field(message: &str) -> Option<String> {
    ["unknown field `", "missing field `"].iter().find_map(|lead| field_after(message, lead))
}

/// The field a serde message that starts with `lead` names (`lead` ends with the backtick).
fn field_after(message: &str, lead: &str) -> Option<String> {
    let rest = message.strip_prefix(lead)?;
    Some(rest[..rest.find('`')?].to_owned())
}

/// Path parameters; a rejection names the parameter.
pub struct ApiPath<T>(pub T);

impl<T, S> FromRequestParts<S> for ApiPath<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Problem> {
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|p| ApiPath(p.0))
            .map_err(|rejection| path_problem(parts, rejection.body_text()))
    }
}

/// A path whose parameters did not decode. One that is not UTF-8 once percent-decoded is named
/// as the document names it (`certSerialNumber`): by its place in the route API Gateway takes
/// for the path ([`route_of`](crate::routes::route_of)), or as `path` where that route takes
/// every remaining segment.
fn path_problem(parts: &Parts, text: String) -> Problem {
    let path = parts.uri.path();
    let undecodable = |segment: &str| {
        let decoded: Vec<u8> = percent_encoding::percent_decode_str(segment).collect();
        std::str::from_utf8(&decoded).is_err()
    };
    if !path.split('/').any(undecodable) {
        return Problem::invalid("path", text);
    }
    let named = crate::routes::route_of(path).and_then(|route| {
        route.path.split('/').zip(path.split('/')).find_map(|(part, segment)| {
            let name = part.strip_prefix('{')?.strip_suffix('}')?;
            (!name.ends_with('+') && undecodable(segment)).then_some(name)
        })
    });
    Problem::invalid(named.unwrap_or("path"), "is not UTF-8 once percent-decoded")
}

/// Query-string parameters; unknown ones are refused.
pub struct ApiQuery<T>(pub T);

impl<T, S> FromRequestParts<S> for ApiQuery<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Problem> {
        let query = parts.uri.query().unwrap_or_default();
        let de = serde_urlencoded::Deserializer::new(form_urlencoded::parse(query.as_bytes()));
        serde_path_to_error::deserialize(de).map(ApiQuery).map_err(|err| {
            let path = err.path().to_string();
            let message = err.into_inner().to_string();
            let repeated = field_after(&message, "duplicate field `");
            match (repeated, serde_named_field(&message)) {
                (Some(name), _) => Problem::invalid(name, "is given more than once"),
                (None, Some(name)) => Problem::invalid(name, "is not a known query parameter"),
                (None, None) if path != "." => Problem::invalid(path, message),
                (None, None) => Problem::invalid("query", message),
            }
        })
    }
}

/// The token of an `Authorization: Bearer <token>` header; 401 naming the header otherwise.
pub fn bearer(parts: &Parts) -> Result<TokenSecret, Problem> {
    let mut given = parts.headers.get_all(header::AUTHORIZATION).iter();
    let header = given.next().ok_or_else(|| {
        Problem::unauthorized(&errors::MISSING_CREDENTIALS, "Authorization: a Bearer token is required")
    })?;
    // Two credentials are one too many: neither is taken. API Gateway joins repeated headers
    // with a comma, which the token's check refuses, so this holds on both sides.
    if given.next().is_some() {
        return Err(Problem::unauthorized(
            &errors::MISSING_CREDENTIALS,
            "Authorization: is given more than once",
        ));
    }
    let malformed =
        || Problem::unauthorized(&errors::MISSING_CREDENTIALS, "Authorization: must be 'Bearer <token>'");
    let value = header.to_str().map_err(|_| malformed())?;
    let (scheme, token) = value.split_once(' ').ok_or_else(malformed)?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(malformed());
    }
    TokenSecret::parse(token.trim()).ok_or_else(malformed)
}

/// An authenticated caller. An admin token may be scoped to one app (a tenant's own admin);
/// a global one is the control center's.
#[derive(Debug, Clone)]
pub enum Caller {
    Admin { token: TokenRecord, app_id: Option<AppId> },
    Access { app_id: AppId, token: TokenRecord },
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Problem> {
        if let Some(caller) = parts.extensions.get::<Caller>() {
            return Ok(caller.clone());
        }
        let secret = bearer(parts)?;
        let presented = secret.hash();
        let refused = |why: TokenRefusal| {
            let detail = match why {
                TokenRefusal::Unknown => "Authorization: the token is not valid",
                TokenRefusal::Expired => "Authorization: the token has expired",
                TokenRefusal::Revoked => "Authorization: the token has been revoked",
            };
            Problem::unauthorized(&errors::INVALID_TOKEN, detail)
        };
        let record = rp_app::apps::admit_token(state, &presented).await?.map_err(refused)?;
        tracing::Span::current().record("token_id", record.token_id.as_str());
        let caller = match (record.kind, record.app_id.clone()) {
            (TokenKind::ControlCenterAdmin, app_id) => Caller::Admin { token: record, app_id },
            (TokenKind::Access, Some(app_id)) => Caller::Access { app_id, token: record },
            (TokenKind::Access, None) => return Err(refused(TokenRefusal::Unknown)),
        };
        parts.extensions.insert(caller.clone());
        Ok(caller)
    }
}

/// A caller holding a global `controlCenterAdmin` token.
pub struct Admin(pub TokenRecord);

impl FromRequestParts<AppState> for Admin {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Problem> {
        match Caller::from_request_parts(parts, state).await? {
            Caller::Admin { token, app_id: None } => Ok(Admin(token)),
            Caller::Admin { app_id: Some(app_id), .. } => Err(Problem::of(&errors::TENANT_SCOPED_TOKEN).detail(
                format!("this endpoint requires a global controlCenterAdmin token; this one is scoped to app '{app_id}'"),
            )),
            Caller::Access { .. } => Err(wrong_kind("a controlCenterAdmin")),
        }
    }
}

/// Judges the caller (`C`: [`Admin`], [`Access`], [`Caller`]) beside `read`, a read that does not
/// depend on who calls, so that the two cost one wait. The caller is judged first: a refused
/// caller's read is dropped unseen, so `read` must not write.
pub async fn beside<C, T>(
    parts: &mut Parts,
    state: &AppState,
    read: impl std::future::Future<Output = T>,
) -> Result<(C, T), Problem>
where
    C: FromRequestParts<AppState, Rejection = Problem>,
{
    let (caller, read) = tokio::join!(C::from_request_parts(parts, state), read);
    Ok((caller?, read))
}

/// [`beside`] for a read keyed by what the request names: `input`, its path or body as its
/// extractor left it. The caller is judged first and then `input`, in the order an extractor
/// placed after the caller's would judge them; only a valid `input` is read for. `read` takes
/// what it needs of `input` (its future cannot borrow it).
pub async fn beside_input<C, I, F>(
    parts: &mut Parts,
    state: &AppState,
    input: Result<I, Problem>,
    read: impl FnOnce(&I) -> F,
) -> Result<(C, I, F::Output), Problem>
where
    C: FromRequestParts<AppState, Rejection = Problem>,
    F: std::future::Future,
{
    match input {
        Ok(input) => {
            let (caller, read) = beside(parts, state, read(&input)).await?;
            Ok((caller, input, read))
        }
        Err(problem) => {
            C::from_request_parts(parts, state).await?;
            Err(problem)
        }
    }
}

/// A global admin's call on one app's path (`/cc/api/apps/{appId}/...`): the token is checked
/// and, beside it, the app the path names is read ([`load_app`]), so the two reads cost one
/// wait. The app's outcome is kept, not raised: the handler takes it (`admin.app?`) where it
/// would have read the app, so every error keeps its place. An app read for a refused caller
/// is dropped unseen.
pub struct AdminOfApp {
    pub token: TokenRecord,
    pub app: Result<(AppRecord, u64), ControlError>,
}

impl FromRequestParts<AppState> for AdminOfApp {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Problem> {
        let app_id = Self::path_app_id(parts, state).await?;
        let (admin, app) = beside::<Admin, _>(parts, state, load_app(state, &app_id)).await?;
        Ok(Self { token: admin.0, app })
    }
}

impl AdminOfApp {
    /// [`AdminOfApp`] with `read` beside the token and the app: a read keyed by the path's app
    /// and `input` (what else the request names, as its extractor left it), made only when both
    /// are valid, and `None` when not. Only the token is judged here: the app (`admin.app?`)
    /// and `input` keep their places in the handler. `read` takes what it needs of `input` (its
    /// future cannot borrow it).
    pub async fn beside<I, F>(
        parts: &mut Parts,
        state: &AppState,
        input: &Result<I, Problem>,
        read: impl FnOnce(AppId, &I) -> F,
    ) -> Result<(Self, Option<F::Output>), Problem>
    where
        F: std::future::Future,
    {
        let app_id = Self::path_app_id(parts, state).await?;
        let extra = match (AppId::parse("appId", &app_id), input) {
            (Ok(app), Ok(input)) => Some(read(app, input)),
            _ => None,
        };
        let reads = async {
            let extra = async {
                match extra {
                    Some(read) => Some(read.await),
                    None => None,
                }
            };
            tokio::join!(load_app(state, &app_id), extra)
        };
        let (admin, (app, extra)) = beside::<Admin, _>(parts, state, reads).await?;
        Ok((Self { token: admin.0, app }, extra))
    }

    /// The `{app_id}` of the path; a path that does not decode is refused after the token, as
    /// `ApiPath` refuses it.
    async fn path_app_id(parts: &mut Parts, state: &AppState) -> Result<String, Problem> {
        match RawPathParams::from_request_parts(parts, state).await {
            Ok(params) => params
                .iter()
                .find(|(name, _)| *name == "app_id")
                .map(|(_, value)| value.to_owned())
                .ok_or_else(|| Problem::internal(std::io::Error::other("the route has no {app_id}"))),
            Err(rejection) => {
                Admin::from_request_parts(parts, state).await?;
                Err(path_problem(parts, rejection.body_text()))
            }
        }
    }
}

/// The header a global admin token names its tenant with on tenant-scoped endpoints.
pub const TENANT_HEADER: &str = "x-tenant-id";

/// The app `X-Tenant-Id` names, if the request carries the header; a 400 naming the header if
/// it is not an app id or is given more than once.
pub fn tenant_header(headers: &HeaderMap) -> Result<Option<AppId>, Problem> {
    let mut given = headers.get_all(TENANT_HEADER).iter();
    let Some(value) = given.next() else { return Ok(None) };
    // Two tenants are one too many: neither is taken, as API Gateway's joining of the two with
    // a comma is no app id either.
    if given.next().is_some() {
        return Err(Problem::invalid("X-Tenant-Id", "is given more than once"));
    }
    let text = value.to_str().map_err(|_| Problem::invalid("X-Tenant-Id", "must be an app id"))?;
    Ok(Some(AppId::parse("X-Tenant-Id", text)?))
}

/// An app a request names, and the field that names it (`X-Tenant-Id` or `appId`).
#[derive(Debug, Clone, PartialEq)]
pub struct NamedApp {
    pub app_id: AppId,
    pub field: &'static str,
}

/// The app a request names on an endpoint that also takes an `appId` of its own (a query's or a
/// body's `app_id`): by `X-Tenant-Id`, as on the tenant-scoped endpoints, or by that `appId`.
/// Each is checked as an app id, and where both are given they must name the same app.
pub fn named_app(headers: &HeaderMap, app_id: Option<&str>) -> Result<Option<NamedApp>, Problem> {
    let header = tenant_header(headers)?;
    let field = app_id.map(|id| AppId::parse("appId", id)).transpose()?;
    match (header, field) {
        (Some(header), Some(field)) if header != field => {
            Err(Problem::invalid("X-Tenant-Id", "names another app than appId"))
        }
        (Some(app_id), _) => Ok(Some(NamedApp { app_id, field: "X-Tenant-Id" })),
        (None, field) => Ok(field.map(|app_id| NamedApp { app_id, field: "appId" })),
    }
}

/// The tenant (RP app) a tenant-scoped admin call acts for: the app an admin token is scoped to,
/// or, for a global admin token, the app named in `X-Tenant-Id`. The app must exist.
#[derive(Debug, Clone)]
pub struct Tenant {
    pub app: AppRecord,
}

impl Tenant {
    pub fn id(&self) -> &AppId {
        &self.app.app_id
    }
}

impl FromRequestParts<AppState> for Tenant {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Problem> {
        if let Some(tenant) = parts.extensions.get::<Tenant>() {
            return Ok(tenant.clone());
        }
        let named = tenant_header(&parts.headers);
        // The app the header names is read beside the token, so the two reads cost one wait.
        // Whatever the token turns out to be, the checks below run in the same order, and an app
        // read for a refused caller is dropped unseen.
        let early = named.as_ref().ok().cloned().flatten();
        let (caller, early_read) =
            tokio::join!(Caller::from_request_parts(parts, state), rp_app::apps::named(state, early.clone()));
        let scope = match caller? {
            Caller::Admin { app_id, .. } => app_id,
            Caller::Access { .. } => return Err(wrong_kind("a controlCenterAdmin")),
        };
        let app_id = match (scope, named?) {
            (Some(scoped), Some(named)) if scoped != named => {
                return Err(Problem::of(&errors::OTHER_TENANT).detail("the token is scoped to another app"))
            }
            (Some(scoped), _) => scoped,
            (None, Some(named)) => named,
            (None, None) => {
                return Err(Problem::invalid("X-Tenant-Id", "is required with a global admin token"))
            }
        };
        let read = match early_read {
            Some(read) if early.as_ref() == Some(&app_id) => read,
            _ => rp_app::apps::app(state, &app_id).await,
        };
        let (app, _) =
            read?.ok_or_else(|| Problem::invalid("X-Tenant-Id", format!("no app with appId '{app_id}'")))?;
        let tenant = Tenant { app };
        parts.extensions.insert(tenant.clone());
        Ok(tenant)
    }
}

/// A caller holding an `access` token, bound to one app.
pub struct Access {
    pub app_id: AppId,
    pub token: TokenRecord,
}

impl Access {
    /// 403 unless the token belongs to `app_id`.
    pub fn require_app(&self, app_id: &str) -> Result<(), Problem> {
        require_own_app(&self.app_id, app_id)
    }
}

/// 403 (1100004) unless `app_id` is `own`, the app of the caller's access token.
pub fn require_own_app(own: &AppId, app_id: &str) -> Result<(), Problem> {
    if own.as_str() == app_id {
        Ok(())
    } else {
        Err(Problem::of(&errors::OTHER_TENANT).detail("the access token belongs to another app"))
    }
}

impl FromRequestParts<AppState> for Access {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Problem> {
        match Caller::from_request_parts(parts, state).await? {
            Caller::Access { app_id, token } => Ok(Access { app_id, token }),
            Caller::Admin { .. } => Err(wrong_kind("an access")),
        }
    }
}

/// 403: the endpoint wants a token of another kind.
fn wrong_kind(wanted: &str) -> Problem {
    Problem::of(&errors::WRONG_TOKEN_KIND).detail(format!("this endpoint requires {wanted} token"))
}

/// A registered device, authenticated by its device token.
pub struct DeviceCaller {
    pub app_id: AppId,
    pub device_id: String,
    pub named_user: String,
    pub token_id: String,
}

impl FromRequestParts<AppState> for DeviceCaller {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Problem> {
        let presented = bearer(parts)?.hash();
        let record = rp_app::devices::admit_token(state, &presented).await?.map_err(device_refusal)?;
        Ok(DeviceCaller {
            app_id: record.app_id,
            device_id: record.device_id,
            named_user: record.named_user,
            token_id: record.token_id,
        })
    }
}

/// A device's bearer token, admitted to trade for a fresh one: the device's token, or the one it
/// traded last, sent again within the grace because the reply was lost.
pub struct RefreshingDevice(pub DeviceTokenRecord);

impl FromRequestParts<AppState> for RefreshingDevice {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Problem> {
        let presented = bearer(parts)?.hash();
        let admitted = rp_app::devices::admit_token_for_refresh(state, &presented).await?;
        Ok(RefreshingDevice(admitted.map_err(device_refusal)?))
    }
}

/// The 401 of a refused device token, saying why.
fn device_refusal(why: DeviceTokenRefusal) -> Problem {
    let detail = match why {
        DeviceTokenRefusal::Invalid => "Authorization: the device token is not valid",
        DeviceTokenRefusal::Expired => {
            "Authorization: the device token has expired; refresh it before it expires, or register again"
        }
    };
    Problem::unauthorized(&errors::INVALID_TOKEN, detail)
}
