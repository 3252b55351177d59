//! Events (DECISIONS §9): agents (admin token) and workstations (access token) report theirs;
//! global admins list them by name, app and time range.

use super::errors;
use super::extract::{beside_input, named_app, Admin, ApiJson, ApiQuery, Caller, NamedApp};
use super::problem::Problem;
use crate::params::ListParams;
use axum::extract::State;
use axum::http::{request::Parts, StatusCode};
use axum::routing::get;
use axum::Json;
use rp_app::events::Report;
use rp_app::AppState;
use rp_domain::apps::AppId;
use rp_domain::events::{self, EventRecord, NAMES, SERVER_NAMES};
use rp_domain::time::EpochMillis;
use rp_domain::validate;
use rp_repo::events::{EventCursor, EventFilter};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

routers! { crate::routing::plain;
    router("/rp/api/events") = get(list).post(report);
}

const MAX_ATTRIBUTES: usize = 32;

/// The body of `POST /rp/api/events`.
#[derive(Debug, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EventReport {
    #[schema(schema_with = reported_names)]
    pub name: String,
    #[schema(pattern = "^[A-Za-z][A-Za-z0-9_.-]{0,63}$")]
    pub app_id: Option<String>,
    /// The reporter's own id for this event. A report sent again with the same id (after a
    /// lost answer) is answered with the event stored the first time, and stores nothing.
    #[schema(pattern = "^[A-Za-z0-9._:-]{1,128}$")]
    pub event_id: Option<String>,
    #[serde(default)]
    #[schema(schema_with = attributes_schema)]
    pub attributes: Map<String, Value>,
}

/// Longest attribute name, and longest text value.
const MAX_ATTRIBUTE_NAME: usize = 64;
const MAX_ATTRIBUTE_TEXT: usize = 5000;

/// The document's schema of what [`check_attributes`] accepts: a map of texts, numbers and
/// booleans.
fn attributes_schema() -> utoipa::openapi::Object {
    use utoipa::openapi::{ObjectBuilder, OneOfBuilder, Type};
    let value = OneOfBuilder::new()
        .item(crate::wire::text_schema(0, MAX_ATTRIBUTE_TEXT))
        .item(ObjectBuilder::new().schema_type(Type::Number))
        .item(ObjectBuilder::new().schema_type(Type::Boolean));
    crate::wire::map_schema(MAX_ATTRIBUTES, MAX_ATTRIBUTE_NAME, value).build()
}

/// A stored event's id and time.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EventStored {
    pub event_id: String,
    #[schema(format = DateTime)]
    pub timestamp: String,
}

/// An event as listed.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EventView {
    pub event_id: String,
    pub name: String,
    #[schema(value_type = Option<String>)]
    pub app_id: Option<AppId>,
    pub source: String,
    #[schema(format = DateTime)]
    pub timestamp: String,
    pub attributes: Map<String, Value>,
}

impl From<EventRecord> for EventView {
    fn from(e: EventRecord) -> Self {
        Self {
            event_id: e.event_id,
            name: e.name,
            app_id: e.app_id,
            source: e.source,
            timestamp: e.at.iso8601(),
            attributes: e.attributes,
        }
    }
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EventList {
    pub events: Vec<EventView>,
    pub next_cursor: Option<String>,
}

/// The names a client may report ([`NAMES`]), as the document's enum.
fn reported_names() -> utoipa::openapi::Object {
    names_enum(NAMES)
}

/// The names a listing may filter on: the reported ones and the server's own.
fn listed_names() -> utoipa::openapi::Object {
    names_enum(NAMES.into_iter().chain(SERVER_NAMES))
}

fn names_enum(names: impl IntoIterator<Item = &'static str>) -> utoipa::openapi::Object {
    utoipa::openapi::ObjectBuilder::new()
        .schema_type(utoipa::openapi::Type::String)
        .enum_values(Some(names))
        .build()
}

fn check_name(field: &str, name: &str) -> Result<(), Problem> {
    if NAMES.contains(&name) {
        Ok(())
    } else {
        Err(Problem::invalid(field, format!("must be one of {}", NAMES.join(", "))))
    }
}

fn check_attributes(attributes: &Map<String, Value>) -> Result<(), Problem> {
    if attributes.len() > MAX_ATTRIBUTES {
        return Err(Problem::invalid("attributes", format!("at most {MAX_ATTRIBUTES} attributes")));
    }
    for (key, value) in attributes {
        let path = format!("attributes.{key}");
        validate::text(&path, key, 1, MAX_ATTRIBUTE_NAME)?;
        match value {
            Value::String(text) => validate::text(&path, text, 0, MAX_ATTRIBUTE_TEXT)?,
            // DynamoDB holds numbers of magnitude 1e-130 to 1e126: refuse the rest here, on every
            // backend, rather than let the store refuse them.
            Value::Number(n)
                if n.as_f64().is_some_and(|x| x != 0.0 && !(1e-130..1e126).contains(&x.abs())) =>
            {
                return Err(Problem::invalid(path, "must be a number of magnitude 1e-130 to 1e126, or 0"))
            }
            Value::Number(_) | Value::Bool(_) => {}
            _ => return Err(Problem::invalid(path, "must be a string, number or boolean")),
        }
    }
    Ok(())
}

#[utoipa::path(post, path = "/rp/api/events", tag = "events", security(("access" = []), ("admin" = []), ("tenantAdmin" = [])),
    request_body = EventReport, responses((status = 201, description = "Stored", body = EventStored)))]
async fn report(
    State(state): State<AppState>,
    mut parts: Parts,
    body: Result<ApiJson<EventReport>, Problem>,
) -> Result<(StatusCode, Json<EventStored>), Problem> {
    let body = body.and_then(|ApiJson(body)| {
        check_name("name", &body.name)?;
        let event_id = body.event_id.as_deref().map(|id| events::reported_id("eventId", id)).transpose()?;
        check_attributes(&body.attributes)?;
        let named = named_app(&parts.headers, body.app_id.as_deref())?;
        Ok((Report { name: body.name, event_id, attributes: body.attributes }, named))
    });
    // The app the body names is read beside the token; the token's own app, if it names none,
    // after it.
    let early = |(_, named): &(Report, Option<NamedApp>)| {
        rp_app::apps::named(&state, named.clone().map(|n| n.app_id))
    };
    let (caller, (body, named), early) =
        beside_input::<Caller, _, _>(&mut parts, &state, body, early).await?;
    let (named, field) = match named {
        Some(NamedApp { app_id, field }) => (Some(app_id), field),
        None => (None, "appId"),
    };
    let (app_id, source) = reporter(&caller, named.as_ref())?;
    let early = early.filter(|_| named.is_some() && named == app_id);
    let event = rp_app::events::report(&state, body, app_id, early, field, source).await?;
    Ok((StatusCode::CREATED, Json(EventStored { event_id: event.event_id, timestamp: event.at.iso8601() })))
}

/// The app an event is reported for and its source: a workstation reports for its own app; an
/// agent for the app it names, or the one its token is scoped to (or none).
fn reporter(caller: &Caller, named: Option<&AppId>) -> Result<(Option<AppId>, String), Problem> {
    match caller {
        Caller::Access { app_id, token } => match named {
            Some(named) if named != app_id => {
                Err(Problem::of(&errors::OTHER_TENANT).detail("appId: the token belongs to another app"))
            }
            _ => Ok((Some(app_id.clone()), format!("workstation:{}", token.token_id))),
        },
        Caller::Admin { token, app_id: scope } => match (named, scope) {
            (Some(named), Some(scope)) if named != scope => {
                Err(Problem::of(&errors::OTHER_TENANT).detail("appId: the token is scoped to another app"))
            }
            _ => Ok((named.cloned().or(scope.clone()), format!("agent:{}", token.token_id))),
        },
    }
}

#[derive(Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[into_params(parameter_in = Query)]
struct ListQuery {
    /// Only events of this name.
    #[param(schema_with = listed_names)]
    name: Option<String>,
    /// Only events of this app.
    #[param(pattern = "^[A-Za-z][A-Za-z0-9_.-]{0,63}$")]
    app_id: Option<String>,
    /// Events at or after this time (RFC 3339, any year: before 1970 is from the first); not
    /// after `to`.
    #[param(format = DateTime)]
    from: Option<String>,
    /// Events before this time (RFC 3339, any year: after 2286 is to the last).
    #[param(format = DateTime)]
    to: Option<String>,
    /// Page size, 1 to 200 (default 50).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 200)]
    limit: Option<String>,
    /// The `nextCursor` of the page before.
    #[param(min_length = 1, pattern = "^[A-Za-z0-9_-]+$")]
    cursor: Option<String>,
}

/// Event times are keyed by 13-digit epoch milliseconds: 1970-01-01 to 2286-11-20.
const LATEST_EVENT_TIME: EpochMillis = EpochMillis(9_999_999_999_999);

/// A `from` or `to` time, as given.
fn time_param(field: &str, value: Option<&str>) -> Result<Option<EpochMillis>, Problem> {
    value
        .map(|text| {
            EpochMillis::parse_iso8601(text).ok_or_else(|| {
                Problem::invalid(field, "must be an RFC 3339 timestamp (2026-11-22T14:00:00Z)")
            })
        })
        .transpose()
}

/// A time brought within those an event can have: no event is older than 1970 nor newer than
/// 2286, so the list is the same, and no key out of range reaches the store.
fn within_event_times(at: Option<EpochMillis>) -> Option<EpochMillis> {
    at.map(|at| at.clamp(EpochMillis(0), LATEST_EVENT_TIME))
}

#[utoipa::path(get, path = "/rp/api/events", tag = "events", security(("admin" = [])), params(ListQuery),
    responses((status = 200, description = "A page of events, oldest first", body = EventList)))]
async fn list(
    State(state): State<AppState>,
    mut parts: Parts,
    query: Result<ApiQuery<ListQuery>, Problem>,
) -> Result<Json<EventList>, Problem> {
    let page = query.and_then(|ApiQuery(query)| {
        if let Some(name) = query.name.as_deref().filter(|n| !SERVER_NAMES.contains(n)) {
            check_name("name", name)?;
        }
        let app_id = query.app_id.as_deref().map(|id| AppId::parse("appId", id)).transpose()?;
        let from = time_param("from", query.from.as_deref())?;
        let to = time_param("to", query.to.as_deref())?;
        // Compared as given: two times past 2286 would be equal once brought within range.
        if from.zip(to).is_some_and(|(from, to)| from > to) {
            return Err(Problem::invalid("from", "must not be after 'to'"));
        }
        let filter = EventFilter {
            name: query.name.clone(),
            app_id,
            from: within_event_times(from),
            to: within_event_times(to),
        };
        let params = ListParams { limit: query.limit, cursor: query.cursor };
        let (limit, cursor) = params.page_of(|token| filter.cursor(token))?;
        Ok((filter, limit, cursor))
    });
    // The page is read beside the token.
    let read = |(filter, limit, cursor): &(EventFilter, usize, Option<EventCursor>)| {
        let (state, filter, limit, cursor) = (&state, filter.clone(), *limit, cursor.clone());
        async move { rp_app::events::list(state, &filter, limit, cursor).await }
    };
    let (_admin, _, page) = beside_input::<Admin, _, _>(&mut parts, &state, page, read).await?;
    let (events, next) = page?;
    Ok(Json(EventList {
        events: events.into_iter().map(EventView::from).collect(),
        next_cursor: next.map(|c| c.encode()),
    }))
}
