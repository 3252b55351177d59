//! Control-center API (DECISIONS §2): apps, workstation settings and tokens. Admin tokens only.

use super::extract::{Admin, ApiJson, ApiPath, ApiQuery};
use super::problem::{codes, Problem};
use super::AppState;
use crate::domain::apps::{self, AppId, RateLimit, WorkstationSettings};
use crate::domain::time::iso8601;
use crate::domain::tokens::{TokenKind, TokenRecord};
use crate::domain::validate;
use crate::ports::{Cursor, Query, StoreError};
use crate::repo::apps::{AppRecord, Apps};
use crate::repo::tokens::{self, Tokens};
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// `/cc/api/apps`
pub fn apps_router(_state: &AppState) -> Router<AppState> {
    Router::new().route("/cc/api/apps", get(list_apps).post(create_app))
}

/// `/cc/api/apps/{appId}`
pub fn app_router(_state: &AppState) -> Router<AppState> {
    Router::new().route("/cc/api/apps/{app_id}", get(get_app))
}

/// `/cc/api/apps/{appId}/workstation`
pub fn workstation_router(_state: &AppState) -> Router<AppState> {
    Router::new().route("/cc/api/apps/{app_id}/workstation", get(get_workstation).put(put_workstation))
}

/// `/cc/api/apps/{appId}/rate-limit`
pub fn rate_limit_router(_state: &AppState) -> Router<AppState> {
    Router::new().route("/cc/api/apps/{app_id}/rate-limit", get(get_rate_limit).put(put_rate_limit))
}

/// `/cc/api/tokens`
pub fn tokens_router(_state: &AppState) -> Router<AppState> {
    Router::new().route("/cc/api/tokens", get(list_tokens).post(create_token))
}

/// `/cc/api/tokens/{tokenId}`
pub fn token_router(_state: &AppState) -> Router<AppState> {
    Router::new().route("/cc/api/tokens/{token_id}", delete(revoke_token))
}

/// `?limit=&cursor=` of every list.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListParams {
    pub limit: Option<String>,
    pub cursor: Option<String>,
}

pub const DEFAULT_PAGE: usize = 50;
pub const MAX_PAGE: usize = 200;

impl ListParams {
    /// The page size and the decoded cursor, checked against the partition `query` reads.
    pub fn page(&self, query: &Query) -> Result<(usize, Option<Cursor>), Problem> {
        let limit = match &self.limit {
            None => DEFAULT_PAGE,
            Some(text) => match text.parse::<usize>() {
                Ok(n) if (1..=MAX_PAGE).contains(&n) => n,
                _ => {
                    return Err(Problem::invalid("limit", format!("must be an integer from 1 to {MAX_PAGE}")))
                }
            },
        };
        let cursor = match &self.cursor {
            None => None,
            Some(text) => match Cursor::decode(text) {
                Some(c) if c.belongs_to(query) => Some(c),
                _ => return Err(Problem::invalid("cursor", "is not a cursor returned by this list")),
            },
        };
        Ok((limit, cursor))
    }
}

fn app_not_found(app_id: &str) -> Problem {
    Problem::not_found(
        codes::APP_NOT_FOUND,
        "app-not-found",
        "App not found",
        format!("no app with appId '{app_id}'"),
    )
}

fn parse_app_id(value: &str) -> Result<AppId, Problem> {
    Ok(AppId::parse("appId", value)?)
}

fn app_json(app: &AppRecord) -> Value {
    json!({
        "appId": app.app_id,
        "displayName": app.display_name,
        "createdAt": iso8601(app.created_at),
        "updatedAt": iso8601(app.updated_at),
        "workstation": app.workstation,
        "rateLimit": app.rate_limit,
    })
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CreateApp {
    app_id: String,
    display_name: String,
}

async fn create_app(
    State(state): State<AppState>,
    _admin: Admin,
    ApiJson(body): ApiJson<CreateApp>,
) -> Result<Response, Problem> {
    let app_id = parse_app_id(&body.app_id)?;
    apps::display_name("displayName", &body.display_name)?;
    let now = state.backend.clock.epoch_millis();
    let app = AppRecord::new(app_id, body.display_name, now);
    match Apps::new(state.backend.store.as_ref()).create(&app).await {
        Ok(()) => {}
        Err(StoreError::Conflict) => {
            return Err(Problem::conflict(
                codes::APP_EXISTS,
                "app-exists",
                "App already exists",
                format!("an app with appId '{}' already exists", app.app_id),
            )
            .field("appId"))
        }
        Err(e) => return Err(e.into()),
    }
    tracing::info!(app_id = %app.app_id, "app created");
    let location = format!("/cc/api/apps/{}", app.app_id);
    Ok((StatusCode::CREATED, [(header::LOCATION, location)], Json(app_json(&app))).into_response())
}

async fn list_apps(
    State(state): State<AppState>,
    _admin: Admin,
    ApiQuery(params): ApiQuery<ListParams>,
) -> Result<Json<Value>, Problem> {
    let (limit, cursor) = params.page(&Apps::query_partition())?;
    let (apps, next) = Apps::new(state.backend.store.as_ref()).list(limit, cursor).await?;
    Ok(Json(json!({
        "apps": apps.iter().map(app_json).collect::<Vec<_>>(),
        "nextCursor": next.map(|c| c.encode()),
    })))
}

/// The app at `app_id` with its version, or 404.
pub async fn load_app(state: &AppState, app_id: &str) -> Result<(AppRecord, u64), Problem> {
    let id = parse_app_id(app_id)?;
    Apps::new(state.backend.store.as_ref()).get(&id).await?.ok_or_else(|| app_not_found(app_id))
}

async fn get_app(
    State(state): State<AppState>,
    _admin: Admin,
    ApiPath(app_id): ApiPath<String>,
) -> Result<Json<Value>, Problem> {
    let (app, _) = load_app(&state, &app_id).await?;
    Ok(Json(app_json(&app)))
}

async fn get_workstation(
    State(state): State<AppState>,
    _admin: Admin,
    ApiPath(app_id): ApiPath<String>,
) -> Result<Json<WorkstationSettings>, Problem> {
    let (app, _) = load_app(&state, &app_id).await?;
    Ok(Json(app.workstation))
}

async fn put_workstation(
    State(state): State<AppState>,
    _admin: Admin,
    ApiPath(app_id): ApiPath<String>,
    ApiJson(settings): ApiJson<WorkstationSettings>,
) -> Result<Json<WorkstationSettings>, Problem> {
    settings.validate()?;
    update_app(&state, &app_id, |app| app.workstation = settings.clone()).await?;
    tracing::info!(%app_id, "workstation settings replaced");
    Ok(Json(settings))
}

async fn get_rate_limit(
    State(state): State<AppState>,
    _admin: Admin,
    ApiPath(app_id): ApiPath<String>,
) -> Result<Json<RateLimit>, Problem> {
    let (app, _) = load_app(&state, &app_id).await?;
    Ok(Json(app.rate_limit))
}

async fn put_rate_limit(
    State(state): State<AppState>,
    _admin: Admin,
    ApiPath(app_id): ApiPath<String>,
    ApiJson(rule): ApiJson<RateLimit>,
) -> Result<Json<RateLimit>, Problem> {
    rule.validate()?;
    update_app(&state, &app_id, |app| app.rate_limit = rule.clone()).await?;
    tracing::info!(%app_id, limit = rule.limit, window_secs = rule.window_secs, "rate limit replaced");
    Ok(Json(rule))
}

/// Changes one part of an app's record, retrying on a concurrent change so that the other parts
/// are never lost.
async fn update_app(state: &AppState, app_id: &str, change: impl Fn(&mut AppRecord)) -> Result<(), Problem> {
    let apps = Apps::new(state.backend.store.as_ref());
    for _ in 0..5 {
        let (mut app, version) = load_app(state, app_id).await?;
        change(&mut app);
        app.updated_at = state.backend.clock.epoch_millis();
        match apps.replace(&app, version).await {
            Ok(()) => return Ok(()),
            Err(StoreError::Conflict) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(StoreError::Conflict.into())
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CreateToken {
    kind: TokenKind,
    app_id: Option<String>,
    description: Option<String>,
    expires_in_secs: Option<i64>,
}

/// Longest token lifetime: two years.
const MAX_TOKEN_LIFETIME_SECS: i64 = 2 * 366 * 24 * 3600;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct TokenView<'a> {
    token_id: &'a str,
    kind: TokenKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    app_id: Option<&'a AppId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<&'a str>,
    created_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    expires_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    revoked_at: Option<String>,
}

impl<'a> From<&'a TokenRecord> for TokenView<'a> {
    fn from(t: &'a TokenRecord) -> Self {
        TokenView {
            token_id: &t.token_id,
            kind: t.kind,
            app_id: t.app_id.as_ref(),
            description: t.description.as_deref(),
            created_at: iso8601(t.created_at),
            expires_at: t.expires_at.map(iso8601),
            revoked_at: t.revoked_at.map(iso8601),
        }
    }
}

async fn create_token(
    State(state): State<AppState>,
    _admin: Admin,
    ApiJson(body): ApiJson<CreateToken>,
) -> Result<Response, Problem> {
    let app_id = match (body.kind, body.app_id.as_deref()) {
        (TokenKind::Access, None) => {
            return Err(Problem::invalid("appId", "is required for an access token"))
        }
        (_, Some(id)) => {
            let id = parse_app_id(id)?;
            if Apps::new(state.backend.store.as_ref()).get(&id).await?.is_none() {
                return Err(Problem::invalid("appId", format!("no app with appId '{id}'")));
            }
            Some(id)
        }
        (TokenKind::ControlCenterAdmin, None) => None,
    };
    if let Some(description) = &body.description {
        validate::text("description", description, 1, 500)?;
    }
    if let Some(secs) = body.expires_in_secs {
        validate::range("expiresInSecs", secs, 60, MAX_TOKEN_LIFETIME_SECS)?;
    }
    let now = state.backend.clock.epoch_millis();
    let (secret, record) = tokens::issue(
        state.backend.store.as_ref(),
        now,
        body.kind,
        app_id,
        body.description,
        body.expires_in_secs,
    )
    .await?;
    tracing::info!(token_id = %record.token_id, kind = ?record.kind, "token created");
    let mut view = serde_json::to_value(TokenView::from(&record)).expect("a view serializes");
    view["token"] = Value::String(secret.expose().to_owned());
    Ok((StatusCode::CREATED, [(header::CACHE_CONTROL, "no-store")], Json(view)).into_response())
}

async fn list_tokens(
    State(state): State<AppState>,
    _admin: Admin,
    ApiQuery(params): ApiQuery<ListParams>,
) -> Result<Json<Value>, Problem> {
    let (limit, cursor) = params.page(&Tokens::query_partition())?;
    let (tokens, next) = Tokens::new(state.backend.store.as_ref()).list(limit, cursor).await?;
    Ok(Json(json!({
        "tokens": tokens.iter().map(TokenView::from).collect::<Vec<_>>(),
        "nextCursor": next.map(|c| c.encode()),
    })))
}

async fn revoke_token(
    State(state): State<AppState>,
    _admin: Admin,
    ApiPath(token_id): ApiPath<String>,
) -> Result<StatusCode, Problem> {
    if token_id.len() != 16 || !token_id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(Problem::invalid("tokenId", "must be 16 hexadecimal digits"));
    }
    let now = state.backend.clock.epoch_millis();
    if Tokens::new(state.backend.store.as_ref()).revoke(&token_id, now).await? {
        tracing::info!(%token_id, "token revoked");
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(Problem::not_found(
            codes::TOKEN_NOT_FOUND,
            "token-not-found",
            "Token not found",
            format!("no token with tokenId '{token_id}'"),
        ))
    }
}
