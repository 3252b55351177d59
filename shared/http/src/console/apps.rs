//! Apps (list, create, settings, rate limit) and API tokens (create, list, revoke).

use super::auth::{AppOf, Global, GlobalApp, PageQuery, Posted, ScopedApp};
use super::operator::Operator;
use super::view::{self, csrf, notice, when, Page, Refusal};
use crate::problem::Problem;
use axum::extract::State;
use axum::response::{IntoResponse, Redirect, Response};
use maud::{html, Markup};
use rp_app::AppState;
use rp_app::HasClock;
use rp_domain::apps::{self, AppId, RateLimit};
use rp_domain::time::EpochMillis;
use rp_domain::tokens::{TokenKind, TokenRecord};
use rp_repo::apps::{AppRecord, Apps};
use rp_repo::tokens::Tokens;
use serde::Deserialize;
use std::collections::HashMap;

/// `?cursor=&notice=` of a listing page.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Listing {
    pub cursor: Option<String>,
    pub notice: Option<String>,
}

pub fn on_off(on: bool) -> Markup {
    html! {
        @if on { span.tag.on { "on" } } @else { span.tag.off { "off" } }
    }
}

/// `GET /console/apps`
pub async fn list(
    State(state): State<AppState>,
    op: Operator,
    PageQuery(query): PageQuery<Listing>,
) -> Result<Page, Refusal> {
    let cursor = view::cursor(query.cursor.as_deref(), &Apps::query_partition())?;
    let (apps, next) = rp_app::console::apps(&state, &op.session, 50, cursor).await?;
    let body = html! {
        (notice(query.notice.as_deref()))
        @if apps.is_empty() { p.muted { "No apps yet." } } @else {
            table #apps {
                thead { tr { th { "App" } th { "Name" } th { "Offline access" } th { "Created" } } }
                tbody {
                    @for app in &apps {
                        tr {
                            td { a href={ "/console/apps/" (app.app_id) } { (app.app_id) } }
                            td { (app.display_name) }
                            td { (on_off(app.workstation.offline_access.enabled)) }
                            td { (when(app.created_at)) }
                        }
                    }
                }
            }
        }
        @if let Some(next) = next { p { a href={ "/console/apps?cursor=" (view::query_value(&next.encode())) } { "Next page" } } }
        @if op.is_global() {
            h2 { "Create an app" }
            form.card.row method="post" action="/console/apps" {
                (csrf(&op))
                div { label for="appId" { "App id" } input #appId type="text" name="appId" required; }
                div { label for="displayName" { "Display name" } input #displayName type="text" name="displayName" required; }
                button type="submit" { "Create app" }
            }
        }
    };
    Ok(Page::new(Some(&op), "Apps", body))
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct NewApp {
    app_id: String,
    display_name: String,
}

/// `POST /console/apps`
pub async fn create(
    State(state): State<AppState>,
    Posted { form, .. }: Posted<NewApp, Global>,
) -> Result<Response, Refusal> {
    let app_id = AppId::parse("appId", form.app_id.trim())?;
    apps::display_name("displayName", &form.display_name)?;
    let app = rp_app::apps::create_app(&state, app_id, form.display_name).await?;
    Ok(Redirect::to(&format!("/console/apps/{}?notice=created", app.app_id)).into_response())
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Notice {
    pub notice: Option<String>,
}

/// `GET /console/apps/{appId}`
pub async fn show(
    AppOf { op, app, .. }: ScopedApp,
    PageQuery(query): PageQuery<Notice>,
) -> Result<Page, Refusal> {
    let base = format!("/console/apps/{}", app.app_id);
    let body = html! {
        (notice(query.notice.as_deref()))
        p.muted { "App id " code { (app.app_id) } ", created " (when(app.created_at)) ", changed " (when(app.updated_at)) "." }
        p.links {
            @if op.is_global() {
                a href={ (base) "/users" } { "Users and devices" }
                a href={ (base) "/workstations" } { "Workstations" }
                a href={ "/console/certificates?app=" (app.app_id) } { "Certificates" }
                a href={ "/console/events?app=" (app.app_id) } { "Events" }
            }
            a href={ (base) "/content" } { "Content customizations" }
            a href={ (base) "/code" } { "Code customizations" }
        }
        @if op.is_global() {
            (workstation_form(&op, &app))
            (rate_limit_form(&op, &app))
        }
    };
    Ok(Page::new(Some(&op), &format!("App {}", app.display_name), body))
}

/// The settings of a workstation form: name, label, and the value now.
fn workstation_fields(app: &AppRecord) -> [(&'static str, &'static str, i64); 11] {
    let (w, o) = (&app.workstation, &app.workstation.offline_access);
    [
        ("tokenLength", "PIN length", o.token_length),
        ("tokenCount", "PINs per set", o.token_count),
        ("tokenEntryTimeoutSecs", "PIN entry time-out (s)", o.token_entry_timeout_secs),
        ("offlineAccessDays", "Offline access (days)", o.offline_access_days),
        ("offlinePINPromptSecs", "PIN prompt (s)", o.offline_pin_prompt_secs),
        (
            "tokenLowWarningThresholdPercentage",
            "Low-PIN warning (%)",
            o.token_low_warning_threshold_percentage,
        ),
        ("maxWrongAttempts", "Wrong attempts before lock", o.max_wrong_attempts),
        ("lockoutSecs", "Lock (s)", o.lockout_secs),
        ("requestTimeoutInSecs", "Certificate lease (s)", w.request_timeout_in_secs),
        ("oobRequestTimeoutInSecs", "OOB request time-out (s)", w.oob_request_timeout_in_secs),
        ("certificateValidityDays", "Certificate validity (days)", w.certificate_validity_days),
    ]
}

fn workstation_form(op: &Operator, app: &AppRecord) -> Markup {
    html! {
        h2 { "Workstation settings" }
        form.card #workstation method="post" action={ "/console/apps/" (app.app_id) "/workstation" } {
            (csrf(op))
            label {
                input #offlineEnabled type="checkbox" name="offlineEnabled" checked[app.workstation.offline_access.enabled];
                " Offline access: paired workstations get PINs to log in without the phone"
            }
            div.grid {
                @for (name, label, value) in workstation_fields(app) {
                    div { label for=(name) { (label) } input id=(name) type="number" name=(name) value=(value); }
                }
            }
            button type="submit" { "Save settings" }
        }
    }
}

fn rate_limit_form(op: &Operator, app: &AppRecord) -> Markup {
    html! {
        h2 { "Limits" }
        form.card.row #rate-limit method="post" action={ "/console/apps/" (app.app_id) "/rate-limit" } {
            (csrf(op))
            div { label for="limit" { "Customization API requests" } input #limit type="number" name="limit" value=(app.rate_limit.limit); }
            div { label for="windowSecs" { "per seconds" } input #windowSecs type="number" name="windowSecs" value=(app.rate_limit.window_secs); }
            div {
                label for="keyCallsPerSec" { "Key-service calls a second" }
                input #keyCallsPerSec type="number" min="1" max="1000" name="keyCallsPerSec"
                    value=[app.key_calls_per_sec] placeholder="deployment's";
            }
            div {
                label for="maxOpenCertificateRequests" { "Open certificate requests" }
                input #maxOpenCertificateRequests type="number" min="1" max="100000" name="maxOpenCertificateRequests"
                    value=[app.max_open_requests] placeholder="deployment's";
            }
            button type="submit" { "Save limits" }
        }
    }
}

/// `POST /console/apps/{appId}/workstation`
pub async fn put_workstation(
    State(state): State<AppState>,
    Posted { by: AppOf { app, version, .. }, form }: Posted<HashMap<String, String>, GlobalApp>,
) -> Result<Response, Refusal> {
    let value = |name: &str| view::required_number(name, form.get(name).map(String::as_str));
    let mut settings = app.workstation.clone();
    let offline = &mut settings.offline_access;
    offline.enabled = form.contains_key("offlineEnabled");
    offline.token_length = value("tokenLength")?;
    offline.token_count = value("tokenCount")?;
    offline.token_entry_timeout_secs = value("tokenEntryTimeoutSecs")?;
    offline.offline_access_days = value("offlineAccessDays")?;
    offline.offline_pin_prompt_secs = value("offlinePINPromptSecs")?;
    offline.token_low_warning_threshold_percentage = value("tokenLowWarningThresholdPercentage")?;
    offline.max_wrong_attempts = value("maxWrongAttempts")?;
    offline.lockout_secs = value("lockoutSecs")?;
    settings.request_timeout_in_secs = value("requestTimeoutInSecs")?;
    settings.oob_request_timeout_in_secs = value("oobRequestTimeoutInSecs")?;
    settings.certificate_validity_days = value("certificateValidityDays")?;
    let app_id = app.app_id.to_string();
    rp_app::apps::replace_workstation(&state, &app_id, Ok((app, version)), settings).await?;
    Ok(Redirect::to(&format!("/console/apps/{app_id}?notice=saved")).into_response())
}

/// `POST /console/apps/{appId}/rate-limit`
pub async fn put_rate_limit(
    State(state): State<AppState>,
    Posted { by: AppOf { app, version, .. }, form }: Posted<HashMap<String, String>, GlobalApp>,
) -> Result<Response, Refusal> {
    let value = |name: &str| view::required_number(name, form.get(name).map(String::as_str));
    let rule = RateLimit { limit: value("limit")?, window_secs: value("windowSecs")? };
    // Left empty: the deployment's figure.
    let own = |name: &str, most: u32| {
        let number = view::number(name, form.get(name).map(String::as_str))?;
        let refused = || Problem::invalid(name, format!("must be 1 to {most}"));
        number.map(|n| u32::try_from(n).map_err(|_| refused())).transpose()
    };
    let key_calls_per_sec = own("keyCallsPerSec", apps::MAX_KEY_CALLS_PER_APP)?;
    let max_open_requests = own("maxOpenCertificateRequests", apps::MAX_OPEN_REQUESTS_CAP)?;
    let app_id = app.app_id.to_string();
    let limits = rp_app::apps::Limits { rule, key_calls_per_sec, max_open_requests };
    rp_app::apps::replace_limits(&state, &app_id, Ok((app, version)), limits).await?;
    Ok(Redirect::to(&format!("/console/apps/{app_id}?notice=saved")).into_response())
}

fn token_state(token: &TokenRecord, now: rp_domain::EpochMillis) -> Markup {
    html! {
        @match token.live_at(now) {
            Ok(()) => span.tag.on { "live" },
            Err(rp_domain::tokens::TokenRefusal::Revoked) => span.tag.bad { "revoked" },
            Err(_) => span.tag.off { "expired" },
        }
    }
}

/// `GET /console/tokens`
pub async fn tokens(
    State(state): State<AppState>,
    Global(op): Global,
    PageQuery(query): PageQuery<Listing>,
) -> Result<Page, Refusal> {
    let cursor = view::cursor(query.cursor.as_deref(), &Tokens::query_partition())?;
    let (tokens, next) = rp_app::apps::list_tokens(&state, 50, cursor).await?;
    let now = state.clock().now_millis();
    let body = html! {
        (notice(query.notice.as_deref()))
        (token_table(&tokens, &op, now))
        @if let Some(next) = next { p { a href={ "/console/tokens?cursor=" (view::query_value(&next.encode())) } { "Next page" } } }
        (new_token_form(&op))
    };
    Ok(Page::new(Some(&op), "Tokens", body))
}

/// The tokens of a page, each with its state and, while live, a revoke button.
fn token_table(tokens: &[TokenRecord], op: &Operator, now: EpochMillis) -> Markup {
    html! {
        table #tokens {
            thead { tr { th { "Token id" } th { "Kind" } th { "App" } th { "Description" } th { "Created" } th { "Expires" } th { "State" } th {} } }
            tbody {
                @for token in tokens {
                    tr {
                        td { code { (token.token_id) } }
                        td { (kind_name(token.kind)) }
                        td { @if let Some(app) = &token.app_id { (app) } }
                        td { (token.description.as_deref().unwrap_or("")) }
                        td { (when(token.created_at)) }
                        td { @if let Some(at) = token.expires_at { (when(at)) } @else { "never" } }
                        td { (token_state(token, now)) }
                        td {
                            @if token.revoked_at.is_none() {
                                form.inline method="post" action="/console/tokens/revoke" data-confirm={ "Revoke token " (token.token_id) "? Whatever uses it is refused from now on; this cannot be undone." } {
                                    (csrf(op))
                                    input type="hidden" name="tokenId" value=(token.token_id);
                                    button.danger type="submit" { "Revoke" }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The form that creates a token.
fn new_token_form(op: &Operator) -> Markup {
    html! {
        h2 { "Create a token" }
        form.card #new-token-form method="post" action="/console/tokens" {
            (csrf(op))
            div.grid {
                div {
                    label for="kind" { "Kind" }
                    select #kind name="kind" {
                        option value="access" { "access (a workstation or server of one app)" }
                        option value="controlCenterAdmin" { "controlCenterAdmin (an admin)" }
                    }
                }
                div { label for="tokenApp" { "App id (required for access; scopes an admin)" } input #tokenApp type="text" name="appId"; }
                div { label for="description" { "Description" } input #description type="text" name="description"; }
                div { label for="expiresInSecs" { "Expires in (s, empty: never)" } input #expiresInSecs type="number" name="expiresInSecs"; }
            }
            button type="submit" { "Create token" }
        }
    }
}

fn kind_name(kind: TokenKind) -> &'static str {
    match kind {
        TokenKind::Access => "access",
        TokenKind::ControlCenterAdmin => "controlCenterAdmin",
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct NewToken {
    kind: String,
    app_id: Option<String>,
    description: Option<String>,
    expires_in_secs: Option<String>,
}

/// `POST /console/tokens`: the new token's secret, shown once.
pub async fn create_token(
    State(state): State<AppState>,
    Posted { by: Global(op), form }: Posted<NewToken, Global>,
) -> Result<Page, Refusal> {
    let kind = match form.kind.as_str() {
        "access" => TokenKind::Access,
        "controlCenterAdmin" => TokenKind::ControlCenterAdmin,
        _ => return Err(Problem::invalid("kind", "must be access or controlCenterAdmin").into()),
    };
    let app_id = view::given(form.app_id).map(|id| AppId::parse("appId", id.trim())).transpose()?;
    let expires = view::number("expiresInSecs", form.expires_in_secs.as_deref())?;
    let named = rp_app::apps::named(&state, app_id.clone()).await;
    let description = view::given(form.description);
    let (secret, record) =
        rp_app::apps::create_token(&state, kind, app_id, named, description, expires).await?;
    let body = html! {
        p.notice role="status" { "Token " code { (record.token_id) } " (" (kind_name(record.kind)) ") created. Copy it now: it is shown only once." }
        p.secret { code #new-token { (secret.expose()) } }
        p { button.quiet type="button" data-copy="new-token" { "Copy token" } }
        p { a href="/console/tokens" { "Back to the tokens" } }
    };
    Ok(Page::new(Some(&op), "Token created", body))
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct TokenForm {
    token_id: String,
}

/// `POST /console/tokens/revoke`
pub async fn revoke_token(
    State(state): State<AppState>,
    Posted { form, .. }: Posted<TokenForm, Global>,
) -> Result<Response, Refusal> {
    let token_id = form.token_id.trim();
    if token_id.len() != 16 || !token_id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(Problem::invalid("tokenId", "must be 16 hexadecimal digits").into());
    }
    let found = rp_app::apps::token(&state, token_id).await;
    rp_app::apps::revoke_token(&state, token_id, found).await?;
    Ok(Redirect::to("/console/tokens?notice=revoked").into_response())
}
