//! Signing in and out, and who a console request is from. A session stands for an admin token:
//! the browser holds only the session's random id, in an `HttpOnly`, `SameSite=Strict` cookie
//! (`Secure` except on the loopback local server); the token itself is typed into the sign-in
//! form once and never reaches a page, its script or its storage. Every state-changing form
//! carries the session's CSRF token, compared in constant time.

use super::operator::Operator;
use super::view::{Page, Refusal};
use crate::extract::{ApiPath, ApiQuery};
use crate::problem::Problem;
use axum::extract::{FromRequest, FromRequestParts, Request, State};
use axum::http::{header, request::Parts, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use maud::html;
use rp_app::console::ConsoleError;
use rp_app::AppState;
use rp_domain::apps::AppId;
use rp_repo::apps::AppRecord;
use serde::de::DeserializeOwned;
use serde::Deserialize;

/// The session cookie's name.
pub const COOKIE: &str = "rp_console";
/// Largest form a console page posts: a code customization's source, each byte of which
/// form-encoding may triple, and room for the other fields.
pub const FORM_LIMIT: usize = 3 * rp_domain::code::MAX_SOURCE_BYTES + 64 * 1024;

impl Operator {
    /// 403 unless a global admin: what the API allows only a global admin token.
    pub fn require_global(&self) -> Result<(), Refusal> {
        match self.is_global() {
            true => Ok(()),
            false => {
                Err(Refusal::Forbidden("This page is for a global admin; your token is scoped to one app."))
            }
        }
    }

    /// The app `app_id` names, with its version, if this admin may act for it: a global admin
    /// for any; a scoped one for its own, and only where the API lets a scoped token in
    /// (`global_only` false: the customizations).
    pub async fn app(
        &self,
        state: &AppState,
        app_id: &str,
        global_only: bool,
    ) -> Result<(AppRecord, u64), Refusal> {
        let id = AppId::parse("appId", app_id)?;
        if global_only {
            self.require_global()?;
        } else if !self.session.may_act_for(&id) {
            return Err(Refusal::Forbidden("Your token is scoped to another app."));
        }
        Ok(rp_app::apps::load_app(state, app_id).await?)
    }
}

impl FromRequestParts<AppState> for Operator {
    type Rejection = Refusal;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Refusal> {
        if let Some(op) = parts.extensions.get::<Operator>() {
            return Ok(op.clone());
        }
        let id = session_cookie(&parts.headers).ok_or(Refusal::SignIn)?;
        let (session, token) = rp_app::console::session(state, &id).await?.ok_or(Refusal::SignIn)?;
        tracing::Span::current().record("token_id", token.token_id.as_str());
        let op = Operator { session, token };
        parts.extensions.insert(op.clone());
        Ok(op)
    }
}

/// The session id of the request's cookie, if it has one.
fn session_cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.to_owned())
}

/// Who may act on a console page, resolved from the signed-in [`Operator`]: the operator
/// itself, a [`Global`] admin, or an operator of the app the path names ([`AppOf`]).
pub trait Acting: Sized {
    fn resolve(
        op: Operator,
        parts: &mut Parts,
        state: &AppState,
    ) -> impl std::future::Future<Output = Result<Self, Refusal>> + Send;
}

impl Acting for Operator {
    async fn resolve(op: Operator, _: &mut Parts, _: &AppState) -> Result<Self, Refusal> {
        Ok(op)
    }
}

/// A global admin: a scoped admin gets 403.
pub struct Global(pub Operator);

impl Acting for Global {
    async fn resolve(op: Operator, _: &mut Parts, _: &AppState) -> Result<Self, Refusal> {
        op.require_global()?;
        Ok(Global(op))
    }
}

/// The app a console path names (`{app_id}`), read once the operator may act for it: an admin
/// scoped to it or a global admin, or with `GLOBAL` a global admin only.
pub struct AppOf<const GLOBAL: bool> {
    pub op: Operator,
    pub app: AppRecord,
    pub version: u64,
}

/// An app its own scoped admins may act on (its customizations).
pub type ScopedApp = AppOf<false>;
/// An app only a global admin may act on (its settings, users and workstations).
pub type GlobalApp = AppOf<true>;

/// A customization a console path names (`{app_id}` and `{id}`), of an app the operator may
/// act for (as [`ScopedApp`]).
pub struct ItemOf {
    pub op: Operator,
    pub app: AppRecord,
    pub id: i64,
}

#[derive(Deserialize)]
struct AppPath {
    app_id: String,
    id: Option<String>,
}

impl<const GLOBAL: bool> Acting for AppOf<GLOBAL> {
    async fn resolve(op: Operator, parts: &mut Parts, state: &AppState) -> Result<Self, Refusal> {
        let ApiPath(AppPath { app_id, .. }) = ApiPath::from_request_parts(parts, state).await?;
        let (app, version) = op.app(state, &app_id, GLOBAL).await?;
        Ok(AppOf { op, app, version })
    }
}

impl Acting for ItemOf {
    async fn resolve(op: Operator, parts: &mut Parts, state: &AppState) -> Result<Self, Refusal> {
        let ApiPath(AppPath { app_id, id }) = ApiPath::from_request_parts(parts, state).await?;
        let (app, _) = op.app(state, &app_id, false).await?;
        let id = rp_domain::validate::positive_id("id", id.as_deref().unwrap_or_default())?;
        Ok(ItemOf { op, app, id })
    }
}

/// Extracts each of these as the signed-in operator, then resolves who acts from it.
macro_rules! extracted_by_acting {
    ($([$($generics:tt)*] $ty:ty),+ $(,)?) => {$(
        impl<$($generics)*> FromRequestParts<AppState> for $ty {
            type Rejection = Refusal;

            async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Refusal> {
                let op = Operator::from_request_parts(parts, state).await?;
                Self::resolve(op, parts, state).await
            }
        }
    )+};
}

extracted_by_acting!([const GLOBAL: bool] AppOf<GLOBAL>, [] ItemOf, [] Global);

/// A page's query-string parameters; a bad one is shown on the page, as a use case's refusal is.
pub struct PageQuery<T>(pub T);

impl<T: DeserializeOwned + Send> FromRequestParts<AppState> for PageQuery<T> {
    type Rejection = Refusal;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Refusal> {
        let ApiQuery(query) = ApiQuery::from_request_parts(parts, state).await?;
        Ok(PageQuery(query))
    }
}

/// A form a signed-in admin posted from a console page, its CSRF token checked before anything
/// else is read; then who acts (`by`, see [`Acting`]) is resolved and the form parsed. Its
/// fields are read by name; others (`csrf`) are ignored.
pub struct Posted<T, A = Operator> {
    pub by: A,
    pub form: T,
}

impl<T: DeserializeOwned + Send, A: Acting + Send> FromRequest<AppState> for Posted<T, A> {
    type Rejection = Refusal;

    async fn from_request(request: Request, state: &AppState) -> Result<Self, Refusal> {
        let (mut parts, body) = request.into_parts();
        let op = Operator::from_request_parts(&mut parts, state).await?;
        let bytes = form_bytes(&parts.headers, body, FORM_LIMIT).await?;
        let csrf =
            form_urlencoded::parse(&bytes).find(|(name, _)| name == "csrf").map(|(_, v)| v.into_owned());
        if !csrf.is_some_and(|presented| op.session.csrf_matches(&presented)) {
            tracing::warn!(token_id = %op.token.token_id, path = %parts.uri.path(), "console form refused: CSRF token");
            return Err(Refusal::Forbidden(
                "The form is stale or was not sent from this console. Reload the page and try again.",
            ));
        }
        let by = A::resolve(op, &mut parts, state).await?;
        let form = serde_urlencoded::from_bytes(&bytes).map_err(|e| Problem::invalid("form", e))?;
        Ok(Posted { by, form })
    }
}

async fn form_bytes(
    headers: &HeaderMap,
    body: axum::body::Body,
    limit: usize,
) -> Result<bytes::Bytes, Problem> {
    let form = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"));
    if !form {
        return Err(Problem::invalid("Content-Type", "must be application/x-www-form-urlencoded"));
    }
    axum::body::to_bytes(body, limit).await.map_err(|_| Problem::body_too_large(limit))
}

/// `GET /console/sign-in`: the form, or on to the apps for a signed-in admin.
pub async fn sign_in_page(State(state): State<AppState>, mut parts: Parts) -> Response {
    match Operator::from_request_parts(&mut parts, &state).await {
        Ok(_) => Redirect::to("/console/apps").into_response(),
        Err(_) => sign_in_form(None).into_response(),
    }
}

fn sign_in_form(error: Option<&str>) -> Page {
    let body = html! {
        @if let Some(error) = error { p.error role="alert" { (error) } }
        form.card method="post" action="/console/sign-in" {
            label for="token" { "Admin token" }
            input #token type="password" name="token" autocomplete="off" required;
            p.muted { "A controlCenterAdmin token (rp-admin create-token, or the local server's first line). It is exchanged for a session; the page never keeps it." }
            button type="submit" { "Sign in" }
        }
    };
    Page::new(None, "Sign in", body)
}

#[derive(Deserialize)]
pub struct SignInForm {
    #[serde(default)]
    token: String,
}

/// `POST /console/sign-in`: exchanges an admin token for a session cookie.
pub async fn sign_in(State(state): State<AppState>, parts: Parts, body: axum::body::Body) -> Response {
    if !same_origin(&parts.headers) {
        return Refusal::Forbidden("The sign-in was not sent from this console.").into_response();
    }
    // A token is at most 512 characters: the server's own body limit is plenty.
    let form = match form_bytes(&parts.headers, body, state.config.body_limit).await {
        Ok(bytes) => {
            serde_urlencoded::from_bytes::<SignInForm>(&bytes).unwrap_or(SignInForm { token: String::new() })
        }
        Err(problem) => return Refusal::from(problem).into_response(),
    };
    let client = client_address(&parts);
    match rp_app::console::sign_in(&state, &client, &form.token).await {
        Ok((id, session)) => {
            let max_age = session.expires_at.as_secs() - session.created_at.as_secs();
            let cookie = cookie_header(id.expose(), max_age, state.config.secure_cookies);
            let mut response = Redirect::to("/console/apps").into_response();
            response.headers_mut().insert(header::SET_COOKIE, cookie);
            response
        }
        Err(ConsoleError::TooManyFailures) => {
            let error = "Too many failed sign-ins from here. Wait a few minutes and try again.";
            sign_in_form(Some(error)).status(StatusCode::TOO_MANY_REQUESTS).into_response()
        }
        Err(ConsoleError::Refused(_)) => {
            let error = "That is not a valid admin token.";
            sign_in_form(Some(error)).status(StatusCode::UNAUTHORIZED).into_response()
        }
        Err(ConsoleError::Failed(failure)) => Refusal::from(failure).into_response(),
    }
}

/// `POST /console/sign-out`: ends the session and clears the cookie.
pub async fn sign_out(
    State(state): State<AppState>,
    posted: Posted<serde::de::IgnoredAny>,
) -> Result<Response, Refusal> {
    rp_app::console::sign_out(&state, &posted.by.session).await?;
    let mut response = Redirect::to("/console/sign-in").into_response();
    response.headers_mut().insert(header::SET_COOKIE, cookie_header("", 0, state.config.secure_cookies));
    Ok(response)
}

fn cookie_header(value: &str, max_age: i64, secure: bool) -> HeaderValue {
    let secure = if secure { "; Secure" } else { "" };
    let cookie =
        format!("{COOKIE}={value}; Path=/console; HttpOnly; SameSite=Strict; Max-Age={max_age}{secure}");
    HeaderValue::from_str(&cookie).expect("a session id is a header value")
}

/// Whether a request without a session yet (the sign-in) comes from a page of this server: its
/// `Origin`, when the browser sends one, names this host.
fn same_origin(headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) else {
        return true;
    };
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok()).unwrap_or_default();
    let origin_host = origin.split_once("://").map_or("", |(_, rest)| rest);
    !host.is_empty() && origin_host.eq_ignore_ascii_case(host)
}

/// Where a sign-in comes from, for counting failures: the source address API Gateway saw, or
/// `local` on the local server (loopback only).
fn client_address(parts: &Parts) -> String {
    use lambda_http::request::RequestContext;
    let address = match parts.extensions.get::<RequestContext>() {
        Some(RequestContext::ApiGatewayV2(context)) => context.http.source_ip.clone(),
        Some(RequestContext::ApiGatewayV1(context)) => context.identity.source_ip.clone(),
        _ => None,
    };
    address.unwrap_or_else(|| "local".to_owned())
}
