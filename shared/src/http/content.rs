//! Content customizations (content-customization-api.md): create, merge-patch update, list,
//! retrieve, plus version history and restore. Tenant-scoped admin calls (see [`Tenant`]); every
//! answer past authentication carries the tenant's rate-limit headers.

use super::extract::{ApiJson, ApiPath, ApiQuery, Tenant};
use super::problem::{codes, Problem};
use super::AppState;
use crate::domain::content::{self, DescriptionChange};
use crate::domain::time::iso8601;
use crate::http::cc::ListParams;
use crate::repo::content::{ContentRecord, Contents};
use crate::repo::ratelimit::{self, Decision};
use axum::extract::{FromRequestParts, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};

/// `/content-customization`
pub fn collection_router(state: &AppState) -> Router<AppState> {
    gated(Router::new().route("/content-customization", get(list).post(create)), state)
}

/// `/content-customization/{id}`
pub fn item_router(state: &AppState) -> Router<AppState> {
    gated(Router::new().route("/content-customization/{id}", get(retrieve).post(update)), state)
}

/// `/content-customization/{id}/versions`
pub fn versions_router(state: &AppState) -> Router<AppState> {
    gated(Router::new().route("/content-customization/{id}/versions", get(list_versions)), state)
}

/// `/content-customization/{id}/versions/{version}`
pub fn version_router(state: &AppState) -> Router<AppState> {
    gated(Router::new().route("/content-customization/{id}/versions/{version}", get(get_version)), state)
}

/// `/content-customization/{id}/versions/{version}/restore`
pub fn restore_router(state: &AppState) -> Router<AppState> {
    gated(Router::new().route("/content-customization/{id}/versions/{version}/restore", post(restore)), state)
}

fn gated(router: Router<AppState>, state: &AppState) -> Router<AppState> {
    router.route_layer(middleware::from_fn_with_state(state.clone(), rate_limit_gate))
}

/// Resolves the tenant, counts the request against its budget and stamps the headers.
async fn rate_limit_gate(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let (mut parts, body) = request.into_parts();
    let tenant = match Tenant::from_request_parts(&mut parts, &state).await {
        Ok(tenant) => tenant,
        Err(problem) => return problem.into_response(),
    };
    let now = state.backend.clock.epoch_secs();
    let rule = &tenant.app.rate_limit;
    let decision = match ratelimit::hit(state.backend.store.as_ref(), tenant.id(), "content", rule, now).await
    {
        Ok(decision) => decision,
        Err(e) => return Problem::from(e).into_response(),
    };
    let mut response = if decision.allowed {
        next.run(Request::from_parts(parts, body)).await
    } else {
        let wait = (decision.reset - now).max(1) as u64;
        let mut problem = Problem::new(
            StatusCode::TOO_MANY_REQUESTS,
            codes::RATE_LIMITED,
            "rate-limited",
            "Too many requests",
        )
        .detail(format!(
            "the tenant's limit of {} requests per {} s is used up; retry in {wait} s",
            rule.limit, rule.window_secs
        ));
        problem.retry_after = Some(wait);
        problem.into_response()
    };
    stamp(response.headers_mut(), &decision);
    response
}

fn stamp(headers: &mut HeaderMap, decision: &Decision) {
    headers.insert("x-ratelimit-limit", HeaderValue::from(decision.limit));
    headers.insert("x-ratelimit-remaining", HeaderValue::from(decision.remaining));
    headers.insert("x-ratelimit-reset", HeaderValue::from(decision.reset));
}

fn parse_positive(field: &str, text: &str) -> Result<i64, Problem> {
    match text.parse::<i64>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(Problem::invalid(field, "must be a positive integer")),
    }
}

fn not_found(id: i64) -> Problem {
    Problem::not_found(
        codes::CONTENT_NOT_FOUND,
        "content-customization-not-found",
        "Content customization not found",
        format!("id: no content customization {id}"),
    )
    .field("id")
}

fn full(record: &ContentRecord) -> Value {
    json!({
        "id": record.id,
        "displayName": record.display_name,
        "description": record.description,
        "contentMap": record.content_map,
        "createdAt": iso8601(record.created_at),
        "updatedAt": iso8601(record.updated_at),
    })
}

fn summary(record: &ContentRecord) -> Value {
    json!({
        "id": record.id,
        "displayName": record.display_name,
        "description": record.description,
        "createdAt": iso8601(record.created_at),
        "updatedAt": iso8601(record.updated_at),
    })
}

async fn create(
    State(state): State<AppState>,
    tenant: Tenant,
    ApiJson(body): ApiJson<Value>,
) -> Result<Response, Problem> {
    let new = content::parse_create(&body)?;
    let now = state.backend.clock.epoch_millis();
    let contents = Contents::new(state.backend.store.as_ref(), tenant.id());
    let created = contents.create(new.display_name, new.description, new.content_map, now).await?;
    tracing::info!(tenant = %tenant.id(), id = created.id, "content customization created");
    let location = format!("/content-customization/{}", created.id);
    Ok((StatusCode::CREATED, [(header::LOCATION, location)], Json(full(&created))).into_response())
}

async fn list(
    State(state): State<AppState>,
    tenant: Tenant,
    ApiQuery(params): ApiQuery<ListParams>,
) -> Result<Json<Value>, Problem> {
    let contents = Contents::new(state.backend.store.as_ref(), tenant.id());
    let (limit, cursor) = params.page(&contents.list_query())?;
    let (items, next, total) = contents.list(limit, cursor).await?;
    Ok(Json(json!({
        "contentCustomizations": items.iter().map(summary).collect::<Vec<_>>(),
        "total": total,
        "nextCursor": next.map(|c| c.encode()),
    })))
}

async fn retrieve(
    State(state): State<AppState>,
    tenant: Tenant,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<Value>, Problem> {
    let id = parse_positive("id", &id)?;
    let contents = Contents::new(state.backend.store.as_ref(), tenant.id());
    let record = contents.get(id).await?.ok_or_else(|| not_found(id))?;
    Ok(Json(full(&record)))
}

async fn update(
    State(state): State<AppState>,
    tenant: Tenant,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<Value>,
) -> Result<Json<Value>, Problem> {
    let id = parse_positive("id", &id)?;
    let patch = content::parse_patch(&body)?;
    let now = state.backend.clock.epoch_millis();
    let contents = Contents::new(state.backend.store.as_ref(), tenant.id());
    let updated = contents
        .update(id, now, |current| {
            let mut next = current.clone();
            if let Some(name) = &patch.display_name {
                next.display_name = name.clone();
            }
            match &patch.description {
                DescriptionChange::Keep => {}
                DescriptionChange::Clear => next.description = None,
                DescriptionChange::Set(text) => next.description = Some(text.clone()),
            }
            if let Some(map_patch) = &patch.content_map {
                next.content_map = content::merge_content_map(&current.content_map, map_patch);
                content::validate_content_map(&next.content_map, content::Mode::Whole)
                    .map_err(Problem::from)?;
            }
            Ok::<_, Problem>(next)
        })
        .await?
        .ok_or_else(|| not_found(id))?;
    tracing::info!(tenant = %tenant.id(), id, version = updated.version, "content customization updated");
    Ok(Json(full(&updated)))
}

async fn list_versions(
    State(state): State<AppState>,
    tenant: Tenant,
    ApiPath(id): ApiPath<String>,
    ApiQuery(params): ApiQuery<ListParams>,
) -> Result<Json<Value>, Problem> {
    let id = parse_positive("id", &id)?;
    let contents = Contents::new(state.backend.store.as_ref(), tenant.id());
    let current = contents.get(id).await?.ok_or_else(|| not_found(id))?;
    let (limit, cursor) = params.page(&contents.versions_query(id))?;
    let (versions, next) = contents.versions(id, limit, cursor).await?;
    Ok(Json(json!({
        "id": id,
        "currentVersion": current.version,
        "versions": versions.iter().map(|v| {
            let mut entry = summary(v);
            entry["version"] = json!(v.version);
            entry
        }).collect::<Vec<_>>(),
        "nextCursor": next.map(|c| c.encode()),
    })))
}

async fn load_version(
    state: &AppState,
    tenant: &Tenant,
    id: &str,
    version: &str,
) -> Result<(i64, ContentRecord), Problem> {
    let id = parse_positive("id", id)?;
    let version = parse_positive("version", version)? as u64;
    let contents = Contents::new(state.backend.store.as_ref(), tenant.id());
    contents.get(id).await?.ok_or_else(|| not_found(id))?;
    let snapshot = contents.version(id, version).await?.ok_or_else(|| {
        Problem::not_found(
            codes::CONTENT_VERSION_NOT_FOUND,
            "content-customization-version-not-found",
            "Version not found",
            format!("version: content customization {id} has no earlier version {version}"),
        )
        .field("version")
    })?;
    Ok((id, snapshot))
}

async fn get_version(
    State(state): State<AppState>,
    tenant: Tenant,
    ApiPath((id, version)): ApiPath<(String, String)>,
) -> Result<Json<Value>, Problem> {
    let (_, snapshot) = load_version(&state, &tenant, &id, &version).await?;
    let mut body = full(&snapshot);
    body["version"] = json!(snapshot.version);
    Ok(Json(body))
}

async fn restore(
    State(state): State<AppState>,
    tenant: Tenant,
    ApiPath((id, version)): ApiPath<(String, String)>,
) -> Result<Json<Value>, Problem> {
    let (id, snapshot) = load_version(&state, &tenant, &id, &version).await?;
    let now = state.backend.clock.epoch_millis();
    let contents = Contents::new(state.backend.store.as_ref(), tenant.id());
    let restored = contents
        .update(id, now, |current| {
            Ok::<_, Problem>(ContentRecord {
                display_name: snapshot.display_name.clone(),
                description: snapshot.description.clone(),
                content_map: snapshot.content_map.clone(),
                ..current.clone()
            })
        })
        .await?
        .ok_or_else(|| not_found(id))?;
    tracing::info!(tenant = %tenant.id(), id, from = snapshot.version, version = restored.version, "content customization restored");
    Ok(Json(full(&restored)))
}
