//! Content customizations (content-customization-api.md): create, merge-patch update, list,
//! retrieve, plus version history and restore. Tenant-scoped admin calls (see [`Tenant`]); every
//! answer past authentication carries the tenant's rate-limit headers.

use super::extract::{ApiJson, ApiQuery, Tenant};
use super::problem::Problem;
use crate::params::{Checked, ItemId, ItemVersion, ListParams, OnceKey};
use crate::ratelimit::{gated_as, Counted};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use rp_app::customizations;
use rp_app::AppState;
use rp_domain::content::{self, ContentRecord};
use rp_repo::Order;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::openapi::schema::{AdditionalProperties, ObjectBuilder, OneOfBuilder, Schema, Type};
use utoipa::openapi::RefOr;

routers! { gated;
    collection_router("/content-customization") = get(list).post(create);
    item_router("/content-customization/{id}") = get(retrieve).post(update);
    versions_router("/content-customization/{id}/versions") = get(list_versions);
    version_router("/content-customization/{id}/versions/{version}") = get(get_version);
    restore_router("/content-customization/{id}/versions/{version}/restore") = post(restore);
}

fn gated(router: Router<AppState>, state: &AppState) -> Router<AppState> {
    gated_as(router, state, "content")
}

/// The body of a create: a display name, and optionally a description and the screen texts.
// Each field is read as JSON, so that `content::parse_create` tells one left out from one sent
// as `null`, and checks it.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContentCreate {
    #[serde(default, deserialize_with = "crate::wire::present")]
    #[schema(value_type = String, required = true, min_length = 1, max_length = 255)]
    display_name: Option<Value>,
    #[serde(default, deserialize_with = "crate::wire::present")]
    #[schema(value_type = Option<String>, max_length = 2000)]
    description: Option<Value>,
    #[serde(default, deserialize_with = "crate::wire::present")]
    #[schema(value_type = Option<ContentMap>, nullable = false)]
    content_map: Option<Value>,
}

/// The body of an update (a merge): at least one field. `description: null` clears it; in
/// `contentMap`, `null` removes a screen, part or field.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(min_properties = 1)]
pub struct ContentUpdate {
    #[serde(default, deserialize_with = "crate::wire::present")]
    #[schema(value_type = Option<String>, min_length = 1, max_length = 255, nullable = false)]
    display_name: Option<Value>,
    #[serde(default, deserialize_with = "crate::wire::present")]
    #[schema(value_type = Option<String>, max_length = 2000)]
    description: Option<Value>,
    #[serde(default, deserialize_with = "crate::wire::present")]
    #[schema(value_type = Option<ContentMapPatch>, nullable = false)]
    content_map: Option<Value>,
}

/// Screen texts: each key a screen (`consentScreen`, `instructionsScreen`,
/// `loginIdentifierScreen`, ...), each screen an object of parts (`cardHeader` with `title` and
/// `description`, `cardContent` with `mainContent` and `extraContent`, `cardFooter` with
/// `caption1` and `caption2`, and `buttonLabels`, keys of 1 to 64 characters), each field a
/// string. As a create sends it and every answer carries it: no `null` anywhere.
pub struct ContentMap;

/// Screen texts as an update merges them ([`ContentMap`]'s shape), where `null` removes a
/// screen, part or field.
pub struct ContentMapPatch;

/// The schema of the screen texts; with `null` allowed for every screen, part and field where
/// `removable` (an update's merge).
fn content_map_schema(removable: bool) -> RefOr<Schema> {
    let text = || {
        let text = crate::wire::text_schema(0, content::MAX_TEXT);
        if removable {
            text.schema_type(crate::wire::or_null(Type::String))
        } else {
            text
        }
    };
    let closed = || {
        ObjectBuilder::new()
            .schema_type(Type::Object)
            .additional_properties(Some(AdditionalProperties::<Schema>::FreeForm(false)))
    };
    // An object, or where `removable` also `null` (which removes it).
    let or_null = |object: ObjectBuilder| -> Schema {
        if removable {
            OneOfBuilder::new().item(object).item(ObjectBuilder::new().schema_type(Type::Null)).into()
        } else {
            object.into()
        }
    };
    let labels = ObjectBuilder::new()
        .schema_type(Type::Object)
        .property_names(Some(crate::wire::text_schema(1, content::MAX_BUTTON_KEY)))
        .additional_properties(Some(text()));
    let mut screen = closed().property("buttonLabels", or_null(labels));
    for (part, fields) in content::PARTS {
        let part_schema = fields.iter().fold(closed(), |o, field| o.property(*field, text()));
        screen = screen.property(part, or_null(part_schema));
    }
    let screen = or_null(screen);
    let map = content::SCREENS.iter().fold(closed(), |o, name| o.property(*name, screen.clone()));
    let description = if removable {
        "Screen texts to merge: screens, their parts, each field a string; `null` removes one"
    } else {
        "Screen texts: screens, their parts, each field a string"
    };
    RefOr::T(Schema::Object(map.description(Some(description)).build()))
}

impl utoipa::PartialSchema for ContentMap {
    fn schema() -> RefOr<Schema> {
        content_map_schema(false)
    }
}

impl utoipa::PartialSchema for ContentMapPatch {
    fn schema() -> RefOr<Schema> {
        content_map_schema(true)
    }
}

impl utoipa::ToSchema for ContentMapPatch {}
impl utoipa::ToSchema for ContentMap {}

/// A content customization in full.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContentView {
    pub id: i64,
    pub display_name: String,
    /// A string, as the seed types it: empty when unset.
    pub description: String,
    #[schema(value_type = ContentMap)]
    pub content_map: Value,
    #[schema(format = DateTime)]
    pub created_at: String,
    #[schema(format = DateTime)]
    pub updated_at: String,
    /// Only on an earlier version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<u64>,
}

impl ContentView {
    fn of(record: ContentRecord) -> Self {
        Self {
            id: record.id,
            display_name: record.display_name,
            description: record.description.unwrap_or_default(),
            content_map: record.content_map,
            created_at: record.created_at.iso8601(),
            updated_at: record.updated_at.iso8601(),
            version: None,
        }
    }

    fn version(record: ContentRecord) -> Self {
        let version = record.version;
        Self { version: Some(version), ..Self::of(record) }
    }
}

/// A customization as listed: no content map.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContentSummary {
    pub id: i64,
    pub display_name: String,
    /// Empty when unset.
    pub description: String,
    #[schema(format = DateTime)]
    pub created_at: String,
    #[schema(format = DateTime)]
    pub updated_at: String,
    /// Only in the list of versions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<u64>,
}

impl ContentSummary {
    fn of(record: &ContentRecord, version: Option<u64>) -> Self {
        Self {
            id: record.id,
            display_name: record.display_name.clone(),
            description: record.description.clone().unwrap_or_default(),
            created_at: record.created_at.iso8601(),
            updated_at: record.updated_at.iso8601(),
            version,
        }
    }
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContentList {
    pub content_customizations: Vec<ContentSummary>,
    pub total: i64,
    pub next_cursor: Option<String>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct VersionList {
    pub id: i64,
    pub current_version: u64,
    pub versions: Vec<ContentSummary>,
    pub next_cursor: Option<String>,
}

#[utoipa::path(post, path = "/content-customization", tag = "content", security(("tenantAdmin" = [])), params(crate::params::IdempotencyKeyHeader), request_body = ContentCreate,
    responses((status = 201, description = "Created", body = ContentView)))]
async fn create(
    Counted(state, _): Counted,
    tenant: Tenant,
    OnceKey(once): OnceKey,
    ApiJson(body): ApiJson<ContentCreate>,
) -> Result<Response, Problem> {
    let new = content::parse_create(
        body.display_name.as_ref(),
        body.description.as_ref(),
        body.content_map.as_ref(),
    )?;
    let created =
        customizations::create(&state, tenant.id(), once.as_ref(), |id, now| new.record(id, now)).await?;
    let location = format!("/content-customization/{}", created.id);
    Ok((StatusCode::CREATED, [(header::LOCATION, location)], Json(ContentView::of(created))).into_response())
}

#[utoipa::path(get, path = "/content-customization", tag = "content", security(("tenantAdmin" = [])), params(ListParams),
    responses((status = 200, description = "A page of the tenant's customizations", body = ContentList)))]
async fn list(
    Counted(state, _): Counted,
    tenant: Tenant,
    ApiQuery(params): ApiQuery<ListParams>,
) -> Result<Json<ContentList>, Problem> {
    let page = |query: &_| Ok::<_, Problem>(params.page(query)?);
    let (items, next, total) = customizations::list::<ContentRecord, _>(&state, tenant.id(), page).await?;
    Ok(Json(ContentList {
        content_customizations: items.iter().map(|r| ContentSummary::of(r, None)).collect(),
        total,
        next_cursor: next.map(|c| c.encode()),
    }))
}

#[utoipa::path(get, path = "/content-customization/{id}", tag = "content", security(("tenantAdmin" = [])),
    params(crate::params::IdPath), responses((status = 200, description = "The customization", body = ContentView)))]
async fn retrieve(
    Counted(state, _): Counted,
    tenant: Tenant,
    Checked(id): ItemId,
) -> Result<Json<ContentView>, Problem> {
    Ok(Json(ContentView::of(customizations::get(&state, tenant.id(), id).await?)))
}

#[utoipa::path(post, path = "/content-customization/{id}", tag = "content", security(("tenantAdmin" = [])),
    params(crate::params::IdPath), request_body = ContentUpdate,
    responses((status = 200, description = "Updated; the version before is kept", body = ContentView)))]
async fn update(
    Counted(state, _): Counted,
    tenant: Tenant,
    Checked(id): ItemId,
    ApiJson(body): ApiJson<ContentUpdate>,
) -> Result<Json<ContentView>, Problem> {
    let patch = content::parse_patch(
        body.display_name.as_ref(),
        body.description.as_ref(),
        body.content_map.as_ref(),
    )?;
    let change = |current: &ContentRecord| Ok(current.patched(&patch)?);
    Ok(Json(ContentView::of(customizations::update(&state, tenant.id(), id, change).await?)))
}

#[utoipa::path(get, path = "/content-customization/{id}/versions", tag = "content", security(("tenantAdmin" = [])),
    params(crate::params::IdPath, ListParams), responses((status = 200, description = "A page of earlier versions", body = VersionList)))]
async fn list_versions(
    Counted(state, _): Counted,
    tenant: Tenant,
    Checked(id): ItemId,
    ApiQuery(params): ApiQuery<ListParams>,
) -> Result<Json<VersionList>, Problem> {
    let page = |query: &_| params.page(query);
    let (current, versions, next) =
        customizations::versions::<ContentRecord>(&state, tenant.id(), id, Order::OldestFirst, page).await?;
    Ok(Json(VersionList {
        id,
        current_version: current.version,
        versions: versions.iter().map(|v| ContentSummary::of(v, Some(v.version))).collect(),
        next_cursor: next.map(|c| c.encode()),
    }))
}

#[utoipa::path(get, path = "/content-customization/{id}/versions/{version}", tag = "content", security(("tenantAdmin" = [])),
    params(crate::params::VersionPath),
    responses((status = 200, description = "An earlier version", body = ContentView)))]
async fn get_version(
    Counted(state, _): Counted,
    tenant: Tenant,
    Checked((id, version)): ItemVersion,
) -> Result<Json<ContentView>, Problem> {
    let (_, snapshot) = customizations::version::<ContentRecord>(&state, tenant.id(), id, version).await?;
    Ok(Json(ContentView::version(snapshot)))
}

#[utoipa::path(post, path = "/content-customization/{id}/versions/{version}/restore", tag = "content", security(("tenantAdmin" = [])),
    params(crate::params::VersionPath),
    responses((status = 200, description = "Restored as the current version", body = ContentView)))]
async fn restore(
    Counted(state, _): Counted,
    tenant: Tenant,
    Checked((id, version)): ItemVersion,
) -> Result<Json<ContentView>, Problem> {
    Ok(Json(ContentView::of(
        customizations::restore::<ContentRecord>(&state, tenant.id(), id, version).await?,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_body_tells_a_field_left_out_from_one_sent_as_null_and_refuses_others() {
        let update: ContentUpdate = serde_json::from_value(json!({"description": null})).unwrap();
        assert_eq!((update.description, update.display_name), (Some(Value::Null), None));
        let unknown = serde_json::from_value::<ContentCreate>(json!({"displayName": "x", "extra": 1}));
        assert!(unknown.unwrap_err().to_string().starts_with("unknown field `extra`"));
    }
}
