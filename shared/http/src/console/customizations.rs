//! Content and code customizations of an app: list, create, edit, version history with
//! restore, a code customization's test run, and the names (never the values) of the tenant's
//! environment variables. A scoped admin reaches its own app's; each change counts against the
//! app's rate limit, as the API's do.

use super::apps::Listing;
use super::auth::{AppOf, ItemOf, PageQuery, Posted, ScopedApp};
use super::operator::Operator;
use super::view::{self, csrf, notice, when, Page, Refusal};
use crate::problem::{codes, Problem};
use axum::extract::State;
use axum::response::{IntoResponse, Redirect, Response};
use maud::{html, Markup};
use rp_app::customizations::{self, Customization};
use rp_app::AppState;
use rp_domain::code::{CodeFields, CodePatch, CodeRecord, EnvEntry, NewCode, Trigger, DEFAULT_TIMEOUT_MS};
use rp_domain::content::{self, ContentRecord};
use rp_domain::idempotency::IdempotencyKey;
use rp_domain::{validate, FieldError};
use rp_repo::apps::AppRecord;
use rp_repo::Order;
use serde::Deserialize;
use serde_json::{Map, Value};

/// The budget scope the console's changes count in.
const SCOPE: &str = "console";

fn versions_table<R>(
    op: &Operator,
    action: &str,
    versions: &[R],
    row: impl Fn(&R) -> (u64, String, String),
) -> Markup {
    html! {
        h2 { "Earlier versions" }
        @if versions.is_empty() { p.muted { "None yet: each change keeps the version before it." } } @else {
            table #versions {
                thead { tr { th.num { "Version" } th { "Name" } th { "Changed" } th {} } }
                tbody {
                    @for version in versions {
                        @let (number, name, changed) = row(version);
                        tr {
                            td.num { (number) }
                            td { (name) }
                            td { (changed) }
                            td {
                                form.inline method="post" action=(action) {
                                    (csrf(op))
                                    input type="hidden" name="version" value=(number);
                                    button.quiet type="submit" { "Restore" }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct RestoreForm {
    version: String,
}

/// What a customization's form does: create one, or save the one shown.
#[derive(Debug, Clone, Copy)]
enum Submit {
    Create,
    Save,
}

impl Submit {
    /// The form's button; a create form's also carries a key made as the page is drawn, so that
    /// the form sent twice (a double click, a resend after a lost answer) creates once.
    fn button(self) -> Markup {
        match self {
            Submit::Create => html! {
                input type="hidden" name="once" value=(uuid::Uuid::new_v4());
                p { button type="submit" { "Create" } }
            },
            Submit::Save => html! { p { button type="submit" { "Save" } } },
        }
    }
}

/// Creates a customization of `kind` (`content`, `code`) that `make` builds, counted against the
/// app's rate limit: on to its page. Under the create form's key (`once`, as the API's
/// `Idempotency-Key`), the form sent again goes on to what it created the first time; sent
/// with other contents, it is refused.
async fn create<R: Customization>(
    state: &AppState,
    app: &AppRecord,
    kind: &str,
    once: &str,
    make: impl Fn(i64, rp_domain::EpochMillis) -> R,
) -> Result<Response, Refusal>
where
    Problem: From<R::Error>,
{
    let once = match once {
        "" => None,
        key => Some(IdempotencyKey::parse(key).map_err(|e| FieldError::new("once", e.message))?),
    };
    rp_app::within_rate_limit(state, app, SCOPE).await?;
    let created = customizations::create(state, &app.app_id, once.as_ref(), make).await.map_err(|e| {
        let problem = Problem::from(e);
        match problem.code() {
            codes::IDEMPOTENCY_KEY_REUSED => problem
                .detail("This form was sent before with other contents. Reload the page to create another."),
            _ => problem,
        }
    })?;
    let page = format!("/console/apps/{}/{kind}/{}?notice=created", app.app_id, created.id());
    Ok(Redirect::to(&page).into_response())
}

/// Changes customization `id` of `kind` with `change`, counted against the app's rate limit:
/// back to its page.
async fn update<R: Customization>(
    state: &AppState,
    app: &AppRecord,
    kind: &str,
    id: i64,
    change: impl Fn(&R) -> Result<R, R::Error>,
) -> Result<Response, Refusal>
where
    Problem: From<R::Error>,
{
    rp_app::within_rate_limit(state, app, SCOPE).await?;
    customizations::update(state, &app.app_id, id, change).await?;
    Ok(Redirect::to(&format!("/console/apps/{}/{kind}/{id}?notice=saved", app.app_id)).into_response())
}

/// Customization `id` with its newest 50 earlier versions, newest first.
async fn with_versions<R: Customization>(
    state: &AppState,
    app: &AppRecord,
    id: i64,
) -> Result<(R, Vec<R>), Refusal>
where
    Problem: From<R::Error>,
{
    let page = |_: &_| Ok((50, None));
    let (record, versions, _) =
        customizations::versions::<R>(state, &app.app_id, id, Order::NewestFirst, page).await?;
    Ok((record, versions))
}

async fn restore<R: Customization>(
    state: &AppState,
    item: ItemOf,
    form: &RestoreForm,
    kind: &str,
) -> Result<Response, Refusal>
where
    Problem: From<R::Error>,
{
    let ItemOf { app, id, .. } = item;
    let version = validate::positive_id("version", &form.version)? as u64;
    rp_app::within_rate_limit(state, &app, SCOPE).await?;
    customizations::restore::<R>(state, &app.app_id, id, version).await?;
    Ok(Redirect::to(&format!("/console/apps/{}/{kind}/{id}?notice=restored", app.app_id)).into_response())
}

// Content customizations.

/// `GET /console/apps/{appId}/content`
pub async fn content_list(
    State(state): State<AppState>,
    AppOf { op, app, .. }: ScopedApp,
    PageQuery(query): PageQuery<Listing>,
) -> Result<Page, Refusal> {
    let page = |partition: &_| Ok::<_, Refusal>((50, view::cursor(query.cursor.as_deref(), partition)?));
    let (items, next, total) = customizations::list::<ContentRecord, _>(&state, &app.app_id, page).await?;
    let base = format!("/console/apps/{}/content", app.app_id);
    let body = html! {
        (notice(query.notice.as_deref()))
        p { a href={ "/console/apps/" (app.app_id) } { "Back to " (app.display_name) } " · " (total) " in all" }
        @if !items.is_empty() {
            table #content {
                thead { tr { th.num { "Id" } th { "Name" } th { "Description" } th { "Changed" } th.num { "Version" } } }
                tbody {
                    @for record in &items {
                        tr {
                            td.num { a href={ (base) "/" (record.id) } { (record.id) } }
                            td { a href={ (base) "/" (record.id) } { (record.display_name) } }
                            td { (record.description.as_deref().unwrap_or("")) }
                            td { (when(record.updated_at)) }
                            td.num { (record.version) }
                        }
                    }
                }
            }
        }
        @if let Some(next) = next { p { a href={ (base) "?cursor=" (view::query_value(&next.encode())) } { "Next page" } } }
        h2 { "Create a content customization" }
        (content_form(&op, &base, "", "", "{\n  \n}", Submit::Create))
    };
    Ok(Page::new(Some(&op), &format!("Content customizations of {}", app.display_name), body))
}

fn content_form(
    op: &Operator,
    action: &str,
    name: &str,
    description: &str,
    map: &str,
    submit: Submit,
) -> Markup {
    html! {
        form.card #content-form method="post" action=(action) {
            (csrf(op))
            label for="displayName" { "Name" }
            input #displayName type="text" name="displayName" value=(name) required;
            label for="description" { "Description" }
            input #description type="text" name="description" value=(description);
            label for="contentMap" { "Screen texts (a JSON object)" }
            textarea #contentMap name="contentMap" spellcheck="false" { (map) }
            (submit.button())
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ContentForm {
    /// A create form's key ([`Submit::button`]); none on an edit form.
    once: String,
    display_name: String,
    description: String,
    content_map: String,
}

impl ContentForm {
    fn map(&self) -> Result<Value, FieldError> {
        serde_json::from_str(&self.content_map)
            .map_err(|e| FieldError::new("contentMap", format!("is not JSON: {e}")))
    }

    fn description(&self) -> Value {
        match self.description.trim() {
            "" => Value::Null,
            text => Value::String(text.to_owned()),
        }
    }
}

/// `POST /console/apps/{appId}/content`
pub async fn content_create(
    State(state): State<AppState>,
    Posted { by: AppOf { app, .. }, form }: Posted<ContentForm, ScopedApp>,
) -> Result<Response, Refusal> {
    let name = Value::String(form.display_name.clone());
    let new = content::parse_create(Some(&name), Some(&form.description()), Some(&form.map()?))?;
    create(&state, &app, "content", &form.once, |id, now| new.record(id, now)).await
}

/// `GET /console/apps/{appId}/content/{id}`
pub async fn content_show(
    State(state): State<AppState>,
    ItemOf { op, app, id }: ItemOf,
    PageQuery(query): PageQuery<Listing>,
) -> Result<Page, Refusal> {
    let (record, versions) = with_versions::<ContentRecord>(&state, &app, id).await?;
    let base = format!("/console/apps/{}/content/{id}", app.app_id);
    let map = serde_json::to_string_pretty(&record.content_map).map_err(Problem::internal)?;
    let description = record.description.as_deref().unwrap_or("");
    let body = html! {
        (notice(query.notice.as_deref()))
        p { a href={ "/console/apps/" (app.app_id) "/content" } { "Back to the content customizations" } " · version " (record.version) ", changed " (when(record.updated_at)) }
        (content_form(&op, &base, &record.display_name, description, &map, Submit::Save))
        (versions_table(&op, &format!("{base}/restore"), &versions, |v| (v.version, v.display_name.clone(), when(v.updated_at))))
    };
    Ok(Page::new(Some(&op), &format!("Content customization {}", record.display_name), body))
}

/// The merge patch (RFC 7396) that turns `from` into `to`: what the form replaces is replaced,
/// and what it left out is removed.
fn replacing(from: &Value, to: &Value) -> Value {
    match (from, to) {
        (Value::Object(from), Value::Object(to)) => {
            let mut patch: Map<String, Value> =
                from.keys().filter(|k| !to.contains_key(*k)).map(|k| (k.clone(), Value::Null)).collect();
            for (key, value) in to {
                patch.insert(
                    key.clone(),
                    from.get(key).map_or_else(|| value.clone(), |old| replacing(old, value)),
                );
            }
            Value::Object(patch)
        }
        (_, to) => to.clone(),
    }
}

/// `POST /console/apps/{appId}/content/{id}`: the form's contents replace the customization's.
pub async fn content_update(
    State(state): State<AppState>,
    Posted { by: ItemOf { app, id, .. }, form }: Posted<ContentForm, ItemOf>,
) -> Result<Response, Refusal> {
    let (name, description, map) =
        (Value::String(form.display_name.clone()), form.description(), form.map()?);
    // Checked before the rate limit counts it: the patch against an empty map has its shape.
    content::parse_patch(
        Some(&name),
        Some(&description),
        Some(&replacing(&Value::Object(Map::new()), &map)),
    )?;
    let change = |current: &ContentRecord| {
        let patch = content::parse_patch(
            Some(&name),
            Some(&description),
            Some(&replacing(&current.content_map, &map)),
        )?;
        Ok(current.patched(&patch)?)
    };
    update(&state, &app, "content", id, change).await
}

/// `POST /console/apps/{appId}/content/{id}/restore`
pub async fn content_restore(
    State(state): State<AppState>,
    Posted { by, form }: Posted<RestoreForm, ItemOf>,
) -> Result<Response, Refusal> {
    restore::<ContentRecord>(&state, by, &form, "content").await
}

// Code customizations.

/// `GET /console/apps/{appId}/code`
pub async fn code_list(
    State(state): State<AppState>,
    AppOf { op, app, .. }: ScopedApp,
    PageQuery(query): PageQuery<Listing>,
) -> Result<Page, Refusal> {
    let page = |partition: &_| Ok::<_, Refusal>((50, view::cursor(query.cursor.as_deref(), partition)?));
    let (listed, names) = tokio::join!(
        customizations::list::<CodeRecord, _>(&state, &app.app_id, page),
        rp_app::code::env_names(&state, &app.app_id)
    );
    let ((items, next, total), names) = (listed?, names?);
    let base = format!("/console/apps/{}/code", app.app_id);
    let body = html! {
        (notice(query.notice.as_deref()))
        p { a href={ "/console/apps/" (app.app_id) } { "Back to " (app.display_name) } " · " (total) " in all" }
        @if !items.is_empty() { (code_table(&base, &items)) }
        @if let Some(next) = next { p { a href={ (base) "?cursor=" (view::query_value(&next.encode())) } { "Next page" } } }
        (env_table(&names))
        h2 { "Create a code customization" }
        (code_form(&op, &base, None, Submit::Create))
    };
    Ok(Page::new(Some(&op), &format!("Code customizations of {}", app.display_name), body))
}

/// A page of the tenant's code customizations.
fn code_table(base: &str, items: &[CodeRecord]) -> Markup {
    html! {
        table #code {
            thead { tr { th.num { "Id" } th { "Name" } th { "Trigger" } th { "Enabled" } th { "Changed" } th.num { "Version" } } }
            tbody {
                @for record in items {
                    tr {
                        td.num { a href={ (base) "/" (record.id) } { (record.id) } }
                        td { a href={ (base) "/" (record.id) } { (record.display_name) } }
                        td { code { (record.trigger.name()) } }
                        td { (super::apps::on_off(record.enabled)) }
                        td { (when(record.updated_at)) }
                        td.num { (record.version) }
                    }
                }
            }
        }
    }
}

/// The names of the tenant's environment variables (their values are never shown).
fn env_table(names: &[EnvEntry]) -> Markup {
    html! {
        h2 { "Environment variables" }
        @if names.is_empty() { p.muted { "None. They are set through the API (PUT /code-customization/env/{name}); values are never shown." } } @else {
            table #env {
                thead { tr { th { "Name" } th { "Set" } } }
                tbody { @for entry in names { tr { td { code { (entry.name) } } td { (when(entry.updated_at)) } } } }
            }
            p.muted { "Values are sealed and never shown." }
        }
    }
}

const SAMPLE_SOURCE: &str =
    "async function handler(event, api) {\n  console.log('user', event.user);\n  return { ok: true };\n}\n";

fn code_form(op: &Operator, action: &str, record: Option<&CodeRecord>, submit: Submit) -> Markup {
    let name = record.map_or("", |r| r.display_name.as_str());
    let source = record.map_or(SAMPLE_SOURCE, |r| r.source.as_str());
    let timeout = record.map_or(DEFAULT_TIMEOUT_MS, |r| r.timeout_ms);
    let enabled = record.is_some_and(|r| r.enabled);
    html! {
        form.card #code-form method="post" action=(action) {
            (csrf(op))
            div.grid {
                div { label for="displayName" { "Name" } input #displayName type="text" name="displayName" value=(name) required; }
                div {
                    label for="trigger" { "Trigger" }
                    select #trigger name="trigger" {
                        @for trigger in Trigger::ALL {
                            option value=(trigger.name()) selected[record.is_some_and(|r| r.trigger == trigger)] { (trigger.name()) }
                        }
                    }
                }
                div { label for="timeoutMs" { "Time-out (ms)" } input #timeoutMs type="number" name="timeoutMs" value=(timeout); }
            }
            label { input #enabled type="checkbox" name="enabled" checked[enabled]; " Enabled: runs on its trigger" }
            label for="source" { "Source (JavaScript)" }
            textarea #source name="source" spellcheck="false" { (source) }
            (submit.button())
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct CodeForm {
    /// A create form's key ([`Submit::button`]); none on an edit form.
    once: String,
    display_name: String,
    trigger: String,
    timeout_ms: Option<String>,
    enabled: Option<String>,
    source: String,
}

impl CodeForm {
    /// The form's fields: each is sent; `enabled` is a checkbox, sent only when checked.
    fn fields(self) -> Result<CodeFields, Problem> {
        Ok(CodeFields {
            timeout_ms: view::number("timeoutMs", self.timeout_ms.as_deref())?,
            enabled: Some(self.enabled.is_some()),
            display_name: Some(self.display_name),
            trigger: Some(self.trigger),
            source: Some(self.source),
        })
    }
}

/// `POST /console/apps/{appId}/code`
pub async fn code_create(
    State(state): State<AppState>,
    Posted { by: AppOf { app, .. }, mut form }: Posted<CodeForm, ScopedApp>,
) -> Result<Response, Refusal> {
    let once = std::mem::take(&mut form.once);
    let new = NewCode::parse(form.fields()?)?;
    create(&state, &app, "code", &once, |id, now| new.record(id, now)).await
}

/// `GET /console/apps/{appId}/code/{id}`
pub async fn code_show(
    State(state): State<AppState>,
    ItemOf { op, app, id }: ItemOf,
    PageQuery(query): PageQuery<Listing>,
) -> Result<Page, Refusal> {
    let (record, versions) = with_versions::<CodeRecord>(&state, &app, id).await?;
    let body = code_page(&op, &app, &record, &versions, query.notice.as_deref(), None);
    Ok(Page::new(Some(&op), &format!("Code customization {}", record.display_name), body))
}

fn code_page(
    op: &Operator,
    app: &AppRecord,
    record: &CodeRecord,
    versions: &[CodeRecord],
    notice_code: Option<&str>,
    run: Option<&rp_domain::code::RunReport>,
) -> Markup {
    let base = format!("/console/apps/{}/code/{}", app.app_id, record.id);
    html! {
        (notice(notice_code))
        p { a href={ "/console/apps/" (app.app_id) "/code" } { "Back to the code customizations" } " · version " (record.version) ", changed " (when(record.updated_at)) }
        (code_form(op, &base, Some(record), Submit::Save))
        h2 { "Test run" }
        form.card #test-form method="post" action={ (base) "/test" } {
            (csrf(op))
            label for="event" { "Event (a JSON object; the run sees it as its handler's event)" }
            textarea #event name="event" spellcheck="false" { "{\n  \"user\": \"alice\"\n}" }
            p { button type="submit" { "Run" } }
        }
        @if let Some(run) = run { (run_report(run)) }
        (versions_table(op, &format!("{base}/restore"), versions, |v| (v.version, v.display_name.clone(), when(v.updated_at))))
    }
}

fn run_report(run: &rp_domain::code::RunReport) -> Markup {
    html! {
        section.card #run {
            @match &run.error {
                None => p { span.tag.on { "succeeded" } " in " (run.duration_ms) " ms" },
                Some(error) => p { span.tag.bad { "failed" } " in " (run.duration_ms) " ms: " code #run-error { (error) } },
            }
            @if let Some(reason) = &run.actions.denied { p { "Denied the flow: " code { (reason) } } }
            @if let Some(text) = &run.actions.transaction_text { p { "Transaction text: " code { (text) } } }
            h3 { "Result" }
            pre #run-result { (serde_json::to_string_pretty(&run.result).unwrap_or_default()) }
            h3 { "Logs" }
            pre #run-logs { @for line in &run.logs { (line) "\n" } }
        }
    }
}

/// `POST /console/apps/{appId}/code/{id}`
pub async fn code_update(
    State(state): State<AppState>,
    Posted { by: ItemOf { app, id, .. }, form }: Posted<CodeForm, ItemOf>,
) -> Result<Response, Refusal> {
    let patch = CodePatch::parse(form.fields()?)?;
    update(&state, &app, "code", id, |current: &CodeRecord| Ok(current.patched(&patch))).await
}

/// `POST /console/apps/{appId}/code/{id}/restore`
pub async fn code_restore(
    State(state): State<AppState>,
    Posted { by, form }: Posted<RestoreForm, ItemOf>,
) -> Result<Response, Refusal> {
    restore::<CodeRecord>(&state, by, &form, "code").await
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct TestForm {
    event: String,
}

/// `POST /console/apps/{appId}/code/{id}/test`: the page again, with what the run produced.
pub async fn code_test(
    State(state): State<AppState>,
    Posted { by: ItemOf { op, app, id }, form }: Posted<TestForm, ItemOf>,
) -> Result<Page, Refusal> {
    let event = match form.event.trim() {
        "" => None,
        text => Some(
            serde_json::from_str::<Value>(text)
                .map_err(|e| FieldError::new("event", format!("is not JSON: {e}")))?,
        ),
    };
    rp_app::within_rate_limit(&state, &app, SCOPE).await?;
    let report = rp_app::code::test_run(&state, &app.app_id, id, event, std::future::ready(Ok(()))).await?;
    let (record, versions) = with_versions::<CodeRecord>(&state, &app, id).await?;
    let body = code_page(&op, &app, &record, &versions, None, Some(&report));
    Ok(Page::new(Some(&op), &format!("Code customization {}", record.display_name), body))
}
