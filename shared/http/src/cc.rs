//! Control-center API (DECISIONS §2): apps, workstation settings and tokens. Admin tokens only.

use super::extract::{beside_input, Admin, AdminOfApp, ApiJson, ApiPath, ApiQuery};
use super::problem::Problem;
use crate::params::{AppIdPath, ListParams};
use crate::wire::apps::{RateLimit, TokenKind, WorkstationSettings};
use axum::extract::State;
use axum::http::{header, request::Parts, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get};
use axum::Json;
use rp_app::AppState;
use rp_domain::apps::{self, AppId};
use rp_domain::tokens::TokenRecord;
use rp_ports::{Cursor, Listed, Query};
use rp_repo::apps::{AppRecord, Apps};
use rp_repo::tokens::Tokens;
use serde::{Deserialize, Serialize};

routers! { crate::routing::plain;
    apps_router("/cc/api/apps") = get(list_apps).post(create_app);
    app_router("/cc/api/apps/{app_id}") = get(get_app);
    workstation_router("/cc/api/apps/{app_id}/workstation") = get(get_workstation).put(put_workstation);
    rate_limit_router("/cc/api/apps/{app_id}/rate-limit") = get(get_rate_limit).put(put_rate_limit);
    tokens_router("/cc/api/tokens") = get(list_tokens).post(create_token);
    token_router("/cc/api/tokens/{token_id}") = delete(revoke_token);
}

/// An app as the control center shows it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AppView {
    #[schema(value_type = String)]
    pub app_id: AppId,
    pub display_name: String,
    #[schema(format = DateTime)]
    pub created_at: String,
    #[schema(format = DateTime)]
    pub updated_at: String,
    pub workstation: WorkstationSettings,
    pub rate_limit: RateLimit,
}

impl From<AppRecord> for AppView {
    fn from(app: AppRecord) -> Self {
        let limits = rp_app::apps::Limits::of(&app);
        Self {
            app_id: app.app_id,
            display_name: app.display_name,
            created_at: app.created_at.iso8601(),
            updated_at: app.updated_at.iso8601(),
            workstation: app.workstation.into(),
            rate_limit: limits.into(),
        }
    }
}

/// A page of a list, `nextCursor` `null` on the last.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AppList {
    pub apps: Vec<AppView>,
    pub next_cursor: Option<String>,
}

#[derive(Debug, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateApp {
    #[schema(pattern = "^[A-Za-z][A-Za-z0-9_.-]{0,63}$")]
    pub app_id: String,
    #[schema(min_length = 1, max_length = 255)]
    pub display_name: String,
}

#[utoipa::path(post, path = "/cc/api/apps", tag = "control", security(("admin" = [])), request_body = CreateApp,
    responses((status = 201, description = "Created", body = AppView)))]
async fn create_app(
    State(state): State<AppState>,
    _admin: Admin,
    ApiJson(body): ApiJson<CreateApp>,
) -> Result<Response, Problem> {
    let app_id = AppId::parse("appId", &body.app_id)?;
    apps::display_name("displayName", &body.display_name)?;
    let app = rp_app::apps::create_app(&state, app_id, body.display_name).await?;
    let location = format!("/cc/api/apps/{}", app.app_id);
    Ok((StatusCode::CREATED, [(header::LOCATION, location)], Json(AppView::from(app))).into_response())
}

#[utoipa::path(get, path = "/cc/api/apps", tag = "control", security(("admin" = [])), params(ListParams),
    responses((status = 200, description = "A page of apps", body = AppList)))]
async fn list_apps(
    State(state): State<AppState>,
    mut parts: Parts,
    params: Result<ApiQuery<ListParams>, Problem>,
) -> Result<Json<AppList>, Problem> {
    let list = |limit, cursor| rp_app::apps::list_apps(&state, limit, cursor);
    let (apps, next) = admin_page(&mut parts, &state, params, &Apps::query_partition(), list).await?;
    Ok(Json(AppList {
        apps: apps.into_iter().map(AppView::from).collect(),
        next_cursor: next.map(|c| c.encode()),
    }))
}

/// A global admin's page of `partition`, listed by `list` beside the token: the token is judged
/// first, then the query (`limit`, `cursor`), then the read.
async fn admin_page<T, F>(
    parts: &mut Parts,
    state: &AppState,
    params: Result<ApiQuery<ListParams>, Problem>,
    partition: &Query,
    list: impl FnOnce(usize, Option<Cursor>) -> F,
) -> Result<(Vec<T>, Option<Cursor>), Problem>
where
    F: std::future::Future<Output = Listed<T>>,
{
    let page = params.and_then(|ApiQuery(params)| Ok(params.page(partition)?));
    let read = |(limit, cursor): &(usize, Option<Cursor>)| list(*limit, cursor.clone());
    let (_admin, _, page) = beside_input::<Admin, _, _>(parts, state, page, read).await?;
    Ok(page?)
}

pub use rp_app::apps::load_app;

#[utoipa::path(get, path = "/cc/api/apps/{appId}", tag = "control", security(("admin" = [])), params(AppIdPath),
    responses((status = 200, description = "The app", body = AppView)))]
async fn get_app(admin: AdminOfApp) -> Result<Json<AppView>, Problem> {
    let (app, _) = admin.app?;
    Ok(Json(AppView::from(app)))
}

#[utoipa::path(get, path = "/cc/api/apps/{appId}/workstation", tag = "control", security(("admin" = [])), params(AppIdPath),
    responses((status = 200, description = "The app's workstation settings", body = WorkstationSettings)))]
async fn get_workstation(admin: AdminOfApp) -> Result<Json<WorkstationSettings>, Problem> {
    let (app, _) = admin.app?;
    Ok(Json(app.workstation.into()))
}

#[utoipa::path(put, path = "/cc/api/apps/{appId}/workstation", tag = "control", security(("admin" = [])), params(AppIdPath),
    request_body = WorkstationSettings, responses((status = 200, description = "Stored", body = WorkstationSettings)))]
async fn put_workstation(
    State(state): State<AppState>,
    admin: AdminOfApp,
    ApiPath(AppIdPath { app_id }): ApiPath<AppIdPath>,
    ApiJson(settings): ApiJson<WorkstationSettings>,
) -> Result<Json<WorkstationSettings>, Problem> {
    let settings = rp_app::apps::replace_workstation(&state, &app_id, admin.app, settings.into()).await?;
    Ok(Json(settings.into()))
}

#[utoipa::path(get, path = "/cc/api/apps/{appId}/rate-limit", tag = "control", security(("admin" = [])), params(AppIdPath),
    responses((status = 200, description = "The app's customization-API rate limit and key-service budget", body = RateLimit)))]
async fn get_rate_limit(admin: AdminOfApp) -> Result<Json<RateLimit>, Problem> {
    let (app, _) = admin.app?;
    Ok(Json(rp_app::apps::Limits::of(&app).into()))
}

#[utoipa::path(put, path = "/cc/api/apps/{appId}/rate-limit", tag = "control", security(("admin" = [])), params(AppIdPath),
    request_body = RateLimit, responses((status = 200, description = "Stored", body = RateLimit)))]
async fn put_rate_limit(
    State(state): State<AppState>,
    admin: AdminOfApp,
    ApiPath(AppIdPath { app_id }): ApiPath<AppIdPath>,
    ApiJson(limits): ApiJson<RateLimit>,
) -> Result<Json<RateLimit>, Problem> {
    let limits = rp_app::apps::replace_limits(&state, &app_id, admin.app, limits.into()).await?;
    Ok(Json(limits.into()))
}

#[derive(Debug, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateToken {
    pub kind: TokenKind,
    /// Required for an `access` token; scopes a `controlCenterAdmin` token to one app.
    #[schema(pattern = "^[A-Za-z][A-Za-z0-9_.-]{0,63}$")]
    pub app_id: Option<String>,
    #[schema(min_length = 1, max_length = 500)]
    pub description: Option<String>,
    #[schema(minimum = 60, maximum = 63244800)]
    pub expires_in_secs: Option<i64>,
}

/// A token as listed: never its secret.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TokenView {
    pub token_id: String,
    pub kind: TokenKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub app_id: Option<AppId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[schema(format = DateTime)]
    pub created_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(format = DateTime)]
    pub expires_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(format = DateTime)]
    pub revoked_at: Option<String>,
}

impl From<TokenRecord> for TokenView {
    fn from(t: TokenRecord) -> Self {
        TokenView {
            token_id: t.token_id,
            kind: t.kind.into(),
            app_id: t.app_id,
            description: t.description,
            created_at: t.created_at.iso8601(),
            expires_at: t.expires_at.map(|at| at.iso8601()),
            revoked_at: t.revoked_at.map(|at| at.iso8601()),
        }
    }
}

/// A created token: the view, and the secret, shown only here.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct TokenCreated {
    #[serde(flatten)]
    pub view: TokenView,
    pub token: String,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TokenList {
    pub tokens: Vec<TokenView>,
    pub next_cursor: Option<String>,
}

#[utoipa::path(post, path = "/cc/api/tokens", tag = "control", security(("admin" = [])), request_body = CreateToken,
    responses((status = 201, description = "Created; `token` is the secret, shown only here", body = TokenCreated)))]
async fn create_token(
    State(state): State<AppState>,
    mut parts: Parts,
    body: Result<ApiJson<CreateToken>, Problem>,
) -> Result<Response, Problem> {
    let body = body.and_then(|ApiJson(body)| {
        let app_id = body.app_id.as_deref().map(|id| AppId::parse("appId", id)).transpose()?;
        Ok((body, app_id))
    });
    // The app the body names is read beside the token.
    let named = |(_, app_id): &(CreateToken, Option<AppId>)| rp_app::apps::named(&state, app_id.clone());
    let (_admin, (body, app_id), named) =
        beside_input::<Admin, _, _>(&mut parts, &state, body, named).await?;
    let (kind, description, expires) = (body.kind.into(), body.description, body.expires_in_secs);
    let (secret, record) =
        rp_app::apps::create_token(&state, kind, app_id, named, description, expires).await?;
    let body = TokenCreated { view: TokenView::from(record), token: secret.expose().to_owned() };
    Ok((StatusCode::CREATED, [(header::CACHE_CONTROL, "no-store")], Json(body)).into_response())
}

#[utoipa::path(get, path = "/cc/api/tokens", tag = "control", security(("admin" = [])), params(ListParams),
    responses((status = 200, description = "A page of tokens, never their secrets", body = TokenList)))]
async fn list_tokens(
    State(state): State<AppState>,
    mut parts: Parts,
    params: Result<ApiQuery<ListParams>, Problem>,
) -> Result<Json<TokenList>, Problem> {
    let list = |limit, cursor| rp_app::apps::list_tokens(&state, limit, cursor);
    let (tokens, next) = admin_page(&mut parts, &state, params, &Tokens::query_partition(), list).await?;
    Ok(Json(TokenList {
        tokens: tokens.into_iter().map(TokenView::from).collect(),
        next_cursor: next.map(|c| c.encode()),
    }))
}

#[utoipa::path(delete, path = "/cc/api/tokens/{tokenId}", tag = "control", security(("admin" = [])),
    params(("tokenId" = String, Path, description = "16 hexadecimal digits", pattern = "^[0-9a-fA-F]{16}$")),
    responses((status = 204, description = "Revoked")))]
async fn revoke_token(
    State(state): State<AppState>,
    mut parts: Parts,
    path: Result<ApiPath<String>, Problem>,
) -> Result<StatusCode, Problem> {
    let token_id = path.and_then(|ApiPath(token_id)| {
        if token_id.len() != 16 || !token_id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(rp_domain::FieldError::new("tokenId", "must be 16 hexadecimal digits").into());
        }
        Ok(token_id)
    });
    // The token to revoke is read beside the caller's.
    let read = |token_id: &String| {
        let (state, token_id) = (&state, token_id.clone());
        async move { rp_app::apps::token(state, &token_id).await }
    };
    let (_admin, token_id, found) = beside_input::<Admin, _, _>(&mut parts, &state, token_id, read).await?;
    rp_app::apps::revoke_token(&state, &token_id, found).await?;
    Ok(StatusCode::NO_CONTENT)
}
