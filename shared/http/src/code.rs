//! Code customizations (DECISIONS §8): CRUD with version history and restore (the repository
//! content customizations use), a test run, the tenant's environment variables, the hook that
//! runs enabled customizations on their trigger, and the tenant's JWKS. Tenant-scoped admin
//! calls under the same rules and rate limit as content customizations, each path its own
//! budget scope (`code`).

use super::extract::{ApiJson, ApiPath, ApiQuery, Tenant};
use super::problem::Problem;
use crate::params::{AppIdPath, Checked, ItemId, ItemVersion, ListParams, OnceKey};
use crate::ratelimit::Counted;
use crate::wire::code::{CreateCode, EnvValue, RunReport, Trigger, UpdateCode};
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post, put};
use axum::{Json, Router};
use rp_app::customizations;
use rp_app::AppState;
use rp_domain::apps::AppId;
use rp_domain::code::{self, CodePatch, CodeRecord, EnvEntry, NewCode};
use rp_domain::signing;
use rp_repo::signing_keys::PublishedKey;
use rp_repo::Order;
use rp_sandbox::helpers;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The body limit of the paths that take a `source` (100 kB, which JSON escaping can
/// multiply); the rest keep the server's.
pub const SOURCE_BODY_LIMIT: usize = 512 * 1024;

routers! { takes_source;
    collection_router("/code-customization") = get(list).post(create);
    item_router("/code-customization/{id}") = get(retrieve).post(update).delete(remove);
}

routers! { gated;
    versions_router("/code-customization/{id}/versions") = get(list_versions);
    version_router("/code-customization/{id}/versions/{version}") = get(get_version);
    restore_router("/code-customization/{id}/versions/{version}/restore") = post(restore);
    test_router("/code-customization/{id}/test") = post(test_run);
    env_router("/code-customization/env") = get(list_env);
    env_var_router("/code-customization/env/{name}") = put(put_env).delete(delete_env);
    signing_keys_router("/code-customization/signing-keys") = get(list_signing_keys).post(rotate_signing_key);
    signing_key_router("/code-customization/signing-keys/{kid}") = delete(retire_signing_key);
}

routers! { crate::routing::plain;
    /// No authentication: it is public by design
    jwks_router("/rp/api/apps/{app_id}/jwks.json") = get(jwks);
}

fn gated(router: Router<AppState>, state: &AppState) -> Router<AppState> {
    crate::ratelimit::gated_as(router, state, "code")
}

/// Gated, with the larger body limit of the paths that take a `source`.
fn takes_source(router: Router<AppState>, state: &AppState) -> Router<AppState> {
    crate::routing::body_limit(gated(router, state), SOURCE_BODY_LIMIT)
}

/// A code customization: in full, or as listed (without its source).
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CodeView {
    pub id: i64,
    pub display_name: String,
    pub trigger: Trigger,
    /// Left out of lists.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    pub timeout_ms: u32,
    pub enabled: bool,
    #[schema(format = DateTime)]
    pub created_at: String,
    #[schema(format = DateTime)]
    pub updated_at: String,
    /// The current version, or the earlier one shown.
    pub version: u64,
}

impl From<CodeRecord> for CodeView {
    fn from(r: CodeRecord) -> Self {
        Self {
            id: r.id,
            display_name: r.display_name,
            trigger: r.trigger.into(),
            source: Some(r.source),
            timeout_ms: r.timeout_ms,
            enabled: r.enabled,
            created_at: r.created_at.iso8601(),
            updated_at: r.updated_at.iso8601(),
            version: r.version,
        }
    }
}

impl CodeView {
    /// The customization as a list shows it: no source.
    fn listed(record: CodeRecord) -> Self {
        Self { source: None, ..Self::from(record) }
    }
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CodeList {
    pub code_customizations: Vec<CodeView>,
    pub total: i64,
    pub next_cursor: Option<String>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CodeVersionList {
    pub id: i64,
    pub current_version: u64,
    pub versions: Vec<CodeView>,
    pub next_cursor: Option<String>,
}

#[utoipa::path(post, path = "/code-customization", tag = "code", security(("tenantAdmin" = [])), params(crate::params::IdempotencyKeyHeader), request_body = CreateCode,
    responses((status = 201, description = "Created", body = CodeView)))]
async fn create(
    Counted(state, _): Counted,
    tenant: Tenant,
    OnceKey(once): OnceKey,
    ApiJson(body): ApiJson<CreateCode>,
) -> Result<Response, Problem> {
    let new = NewCode::try_from(body)?;
    let created =
        customizations::create(&state, tenant.id(), once.as_ref(), |id, now| new.record(id, now)).await?;
    let location = format!("/code-customization/{}", created.id);
    Ok((StatusCode::CREATED, [(header::LOCATION, location)], Json(CodeView::from(created))).into_response())
}

#[utoipa::path(get, path = "/code-customization", tag = "code", security(("tenantAdmin" = [])), params(ListParams),
    responses((status = 200, description = "A page of the tenant's customizations, without their source", body = CodeList)))]
async fn list(
    Counted(state, _): Counted,
    tenant: Tenant,
    ApiQuery(params): ApiQuery<ListParams>,
) -> Result<Json<CodeList>, Problem> {
    let page = |query: &_| Ok::<_, Problem>(params.page(query)?);
    let (items, next, total) = customizations::list::<CodeRecord, _>(&state, tenant.id(), page).await?;
    Ok(Json(CodeList {
        code_customizations: items.into_iter().map(CodeView::listed).collect(),
        total,
        next_cursor: next.map(|c| c.encode()),
    }))
}

#[utoipa::path(get, path = "/code-customization/{id}", tag = "code", security(("tenantAdmin" = [])), params(crate::params::IdPath),
    responses((status = 200, description = "The customization, with its source", body = CodeView)))]
async fn retrieve(
    Counted(state, _): Counted,
    tenant: Tenant,
    Checked(id): ItemId,
) -> Result<Json<CodeView>, Problem> {
    Ok(Json(customizations::get::<CodeRecord>(&state, tenant.id(), id).await?.into()))
}

#[utoipa::path(post, path = "/code-customization/{id}", tag = "code", security(("tenantAdmin" = [])), params(crate::params::IdPath), request_body = UpdateCode,
    responses((status = 200, description = "Updated; the version before is kept", body = CodeView)))]
async fn update(
    Counted(state, _): Counted,
    tenant: Tenant,
    Checked(id): ItemId,
    ApiJson(body): ApiJson<UpdateCode>,
) -> Result<Json<CodeView>, Problem> {
    let patch = CodePatch::try_from(body)?;
    let change = |current: &CodeRecord| Ok(current.patched(&patch));
    Ok(Json(customizations::update(&state, tenant.id(), id, change).await?.into()))
}

#[utoipa::path(delete, path = "/code-customization/{id}", tag = "code", security(("tenantAdmin" = [])), params(crate::params::IdPath),
    responses((status = 204, description = "Deleted, with its versions")))]
async fn remove(
    Counted(state, _): Counted,
    tenant: Tenant,
    Checked(id): ItemId,
) -> Result<StatusCode, Problem> {
    customizations::remove::<CodeRecord>(&state, tenant.id(), id).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(get, path = "/code-customization/{id}/versions", tag = "code", security(("tenantAdmin" = [])), params(crate::params::IdPath, ListParams),
    responses((status = 200, description = "A page of earlier versions", body = CodeVersionList)))]
async fn list_versions(
    Counted(state, _): Counted,
    tenant: Tenant,
    Checked(id): ItemId,
    ApiQuery(params): ApiQuery<ListParams>,
) -> Result<Json<CodeVersionList>, Problem> {
    let page = |query: &_| params.page(query);
    let (current, versions, next) =
        customizations::versions::<CodeRecord>(&state, tenant.id(), id, Order::OldestFirst, page).await?;
    Ok(Json(CodeVersionList {
        id: current.id,
        current_version: current.version,
        versions: versions.into_iter().map(CodeView::listed).collect(),
        next_cursor: next.map(|c| c.encode()),
    }))
}

#[utoipa::path(get, path = "/code-customization/{id}/versions/{version}", tag = "code", security(("tenantAdmin" = [])), params(crate::params::VersionPath),
    responses((status = 200, description = "An earlier version", body = CodeView)))]
async fn get_version(
    Counted(state, _): Counted,
    tenant: Tenant,
    Checked((id, version)): ItemVersion,
) -> Result<Json<CodeView>, Problem> {
    let (_, snapshot) = customizations::version::<CodeRecord>(&state, tenant.id(), id, version).await?;
    Ok(Json(snapshot.into()))
}

#[utoipa::path(post, path = "/code-customization/{id}/versions/{version}/restore", tag = "code", security(("tenantAdmin" = [])), params(crate::params::VersionPath),
    responses((status = 200, description = "Restored as the current version", body = CodeView)))]
async fn restore(
    Counted(state, _): Counted,
    tenant: Tenant,
    Checked((id, version)): ItemVersion,
) -> Result<Json<CodeView>, Problem> {
    Ok(Json(customizations::restore::<CodeRecord>(&state, tenant.id(), id, version).await?.into()))
}

/// The body of a test run.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TestRun {
    /// The event the customization's handler gets; `{}` when left out or `null`.
    #[schema(value_type = Option<Object>)]
    pub event: Option<Value>,
}

/// Runs one customization, enabled or not, on the given event: a thrown error, a time-out
/// or the memory limit is a 200 whose `error` says so.
#[utoipa::path(post, path = "/code-customization/{id}/test", tag = "code", security(("tenantAdmin" = [])), params(crate::params::IdPath), request_body = TestRun,
    responses((status = 200, description = "What the run produced; a throw, time-out or limit is a 200 whose `error` says so", body = RunReport)))]
async fn test_run(
    Counted(state, pass): Counted,
    tenant: Tenant,
    Checked(id): ItemId,
    ApiJson(body): ApiJson<TestRun>,
) -> Result<Json<RunReport>, Problem> {
    let report = rp_app::code::test_run(&state, tenant.id(), id, body.event, pass.go_ahead()).await?;
    Ok(Json(report.into()))
}

/// The names of the tenant's variables, with their update times: never a value.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EnvList {
    pub variables: Vec<EnvView>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EnvView {
    pub name: String,
    #[schema(format = DateTime)]
    pub updated_at: String,
}

impl From<EnvEntry> for EnvView {
    fn from(e: EnvEntry) -> Self {
        Self { name: e.name, updated_at: e.updated_at.iso8601() }
    }
}

#[utoipa::path(get, path = "/code-customization/env", tag = "code", security(("tenantAdmin" = [])),
    responses((status = 200, description = "The variables' names, never their values", body = EnvList)))]
async fn list_env(Counted(state, _): Counted, tenant: Tenant) -> Result<Json<EnvList>, Problem> {
    let names = rp_app::code::env_names(&state, tenant.id()).await?;
    Ok(Json(EnvList { variables: names.into_iter().map(EnvView::from).collect() }))
}

/// `{name}` of an environment variable in a path, as [`code::env_name`] checks it.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
struct EnvNamePath {
    #[param(pattern = "^[A-Za-z_][A-Za-z0-9_]{0,63}$")]
    name: String,
}

/// Sets a variable; 200 with its name and update time, never its value.
#[utoipa::path(put, path = "/code-customization/env/{name}", tag = "code", security(("tenantAdmin" = [])), params(EnvNamePath),
    request_body = EnvValue, responses((status = 200, description = "Set; never echoes the value", body = EnvView)))]
async fn put_env(
    Counted(state, _): Counted,
    tenant: Tenant,
    ApiPath(EnvNamePath { name }): ApiPath<EnvNamePath>,
    ApiJson(body): ApiJson<EnvValue>,
) -> Result<Json<EnvView>, Problem> {
    let name = code::env_name(&name)?;
    let set_at = rp_app::code::set_env(&state, tenant.id(), name, body.checked()?).await?;
    Ok(Json(EnvView { name: name.to_owned(), updated_at: set_at.iso8601() }))
}

#[utoipa::path(delete, path = "/code-customization/env/{name}", tag = "code", security(("tenantAdmin" = [])), params(EnvNamePath),
    responses((status = 204, description = "Deleted")))]
async fn delete_env(
    Counted(state, _): Counted,
    tenant: Tenant,
    ApiPath(EnvNamePath { name }): ApiPath<EnvNamePath>,
) -> Result<StatusCode, Problem> {
    rp_app::code::remove_env(&state, tenant.id(), code::env_name(&name)?).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// A JWK set (RFC 7517 §5): the app's token-signing keys.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Jwks {
    pub keys: Vec<helpers::Jwk>,
}

/// The public keys our customizations' tokens are signed with, as a JWK set: the app's own keys,
/// each under its own `kid`, the active one last. Empty until the app's first token (or first
/// rotation). 404 for an unknown app, so the set only exists where tokens can be minted.
#[utoipa::path(get, path = "/rp/api/apps/{appId}/jwks.json", tag = "code", params(crate::params::AppIdPath),
    responses((status = 200, description = "The JWKS that verifies tokens the app's customizations mint", content_type = "application/json", body = Jwks)))]
async fn jwks(
    State(state): State<AppState>,
    ApiPath(AppIdPath { app_id }): ApiPath<AppIdPath>,
) -> Result<Response, Problem> {
    // The keys are read beside the app (when the id is one); the app is judged first.
    let keys = async {
        match AppId::parse("appId", &app_id) {
            Ok(tenant) => Some(rp_app::signing::published(&state, &tenant).await),
            Err(_) => None,
        }
    };
    let (app, keys) = tokio::join!(rp_app::apps::load_app(&state, &app_id), keys);
    let (app, _) = app?;
    let keys = keys.expect("a loaded app has a valid id")?;
    let body = Jwks { keys: keys.iter().map(|k| helpers::jwk(&k.public, &k.kid)).collect() };
    tracing::debug!(app_id = %app.app_id, keys = body.keys.len(), "jwks served");
    Ok(([(header::CACHE_CONTROL, "public, max-age=300")], Json(body)).into_response())
}

/// One of the tenant's token-signing keys, as the control center shows it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SigningKeyView {
    /// The key's id: the `kid` of the tokens it signs and of its entry in the JWKS.
    pub kid: String,
    #[schema(format = DateTime)]
    pub created_at: String,
    /// Whether new tokens are signed with it (the newest key).
    pub active: bool,
    /// Its public half.
    pub jwk: helpers::Jwk,
}

impl From<&PublishedKey> for SigningKeyView {
    fn from(k: &PublishedKey) -> Self {
        Self {
            kid: k.kid.clone(),
            created_at: k.created_at.iso8601(),
            active: k.active,
            jwk: helpers::jwk(&k.public, &k.kid),
        }
    }
}

/// The tenant's published signing keys, oldest first.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct SigningKeyList {
    pub keys: Vec<SigningKeyView>,
}

#[utoipa::path(get, path = "/code-customization/signing-keys", tag = "code", security(("tenantAdmin" = [])),
    responses((status = 200, description = "The tenant's published signing keys, oldest first; the last is active", body = SigningKeyList)))]
async fn list_signing_keys(
    Counted(state, _): Counted,
    tenant: Tenant,
) -> Result<Json<SigningKeyList>, Problem> {
    let keys = rp_app::signing::published(&state, tenant.id()).await?;
    Ok(Json(SigningKeyList { keys: keys.iter().map(SigningKeyView::from).collect() }))
}

/// Rotates: a new key becomes the active one; the earlier ones stay in the JWKS until retired.
#[utoipa::path(post, path = "/code-customization/signing-keys", tag = "code", security(("tenantAdmin" = [])),
    responses((status = 201, description = "The new active key", body = SigningKeyView)))]
async fn rotate_signing_key(Counted(state, _): Counted, tenant: Tenant) -> Result<Response, Problem> {
    let key = rp_app::signing::rotate(&state, tenant.id()).await?;
    let location = format!("/code-customization/signing-keys/{}", key.kid);
    Ok((StatusCode::CREATED, [(header::LOCATION, location)], Json(SigningKeyView::from(&key)))
        .into_response())
}

/// `{kid}` of a signing key in a path: an RFC 7638 thumbprint, base64url of 32 bytes.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
struct KidPath {
    #[param(pattern = "^[A-Za-z0-9_-]{43}$")]
    kid: String,
}

/// Retires a key: it leaves the JWKS and its private half is destroyed; tokens it signed no
/// longer verify. The active key cannot be retired (rotate first).
#[utoipa::path(delete, path = "/code-customization/signing-keys/{kid}", tag = "code", security(("tenantAdmin" = [])), params(KidPath),
    responses((status = 204, description = "Retired")))]
async fn retire_signing_key(
    Counted(state, _): Counted,
    tenant: Tenant,
    ApiPath(KidPath { kid }): ApiPath<KidPath>,
) -> Result<StatusCode, Problem> {
    let kid = signing::kid(&kid)?;
    rp_app::signing::retire(&state, tenant.id(), kid).await?;
    Ok(StatusCode::NO_CONTENT)
}
