//! Users and their devices (registration links with their QR code, removing a device, ending
//! its token) and an app's workstation pairings (offline status, unpairing).

use super::apps::Listing;
use super::auth::{AppOf, GlobalApp, PageQuery, Posted};
use super::operator::Operator;
use super::view::{self, csrf, notice, query_value, when, Page, Refusal};
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Redirect, Response};
use maud::{html, Markup, PreEscaped};
use rp_app::devices;
use rp_app::AppState;
use rp_app::HasClock;
use rp_domain::apps::AppId;
use rp_domain::devices::{identifier, named_user, DeviceRecord, DeviceTokenRecord};
use rp_domain::pairing::{Pairing, PairingKey};
use rp_domain::EpochMillis;
use rp_repo::workstations::Workstations;
use serde::Deserialize;

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct UserQuery {
    user: Option<String>,
    notice: Option<String>,
}

/// `GET /console/apps/{appId}/users?user=`: a user's devices, and registration links.
pub async fn show(
    State(state): State<AppState>,
    AppOf { op, app, .. }: GlobalApp,
    PageQuery(query): PageQuery<UserQuery>,
) -> Result<Page, Refusal> {
    let user = view::given(query.user).map(|u| named_user("user", u.trim())).transpose()?;
    let devices = match &user {
        Some(user) => rp_app::devices::devices_of_user(&state, &app.app_id, user).await?,
        None => Vec::new(),
    };
    let base = format!("/console/apps/{}", app.app_id);
    let body = html! {
        (notice(query.notice.as_deref()))
        p { a href=(base) { "Back to " (app.display_name) } }
        form.card.row method="get" action={ (base) "/users" } {
            div { label for="user" { "User" } input #user type="text" name="user" value=[user.as_deref()] required; }
            button type="submit" { "Find devices" }
        }
        @if let Some(user) = &user { (device_table(&op, &base, user, &devices)) }
        (link_form(&op, &base, user.as_deref()))
    };
    Ok(Page::new(Some(&op), &format!("Users of {}", app.display_name), body))
}

/// The devices of `user`, each with its token's end and the actions on it.
fn device_table(
    op: &Operator,
    base: &str,
    user: &str,
    devices: &[(DeviceRecord, Option<DeviceTokenRecord>)],
) -> Markup {
    html! {
        h2 { "Devices of " (user) }
        @if devices.is_empty() { p.muted #no-devices { "No device registered." } } @else {
            table #devices {
                thead { tr { th { "Device" } th { "Name" } th { "Model" } th { "Registered" } th { "Token" } th {} } }
                tbody {
                    @for (device, token) in devices {
                        tr {
                            td { code { (device.device_id) } }
                            td { (device.friendly_name) }
                            td { (device.model_number) }
                            td { (when(device.registered_at)) }
                            td { @if let Some(token) = token { "until " (when(token.expiry())) } @else { span.tag.off { "ended" } } }
                            td {
                                @if token.is_some() { (device_action(op, base, "end-token", &device.device_id, user, "End token", Some(END_TOKEN_QUESTION))) }
                                (device_action(op, base, "remove", &device.device_id, user, "Remove device", Some(REMOVE_QUESTION)))
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The form that creates a registration link, for `user` if one is selected.
fn link_form(op: &Operator, base: &str, user: Option<&str>) -> Markup {
    html! {
        h2 { "Send a registration link" }
        form.card #link-form method="post" action={ (base) "/registration-links" } {
            (csrf(op))
            div.grid {
                div { label for="namedUser" { "User" } input #namedUser type="text" name="namedUser" value=[user] required; }
                div { label for="machineUserNameWs" { "Workstation user name (optional)" } input #machineUserNameWs type="text" name="machineUserNameWs"; }
                div { label for="linkExpires" { "Valid for (s, default 900)" } input #linkExpires type="number" name="expiresInSecs"; }
            }
            button type="submit" { "Create link" }
        }
    }
}

/// What removing a device asks first: it cannot be undone.
const REMOVE_QUESTION: &str =
    "Remove this device? Its pairings end and their certificates are revoked; this cannot be undone.";

/// What ending a device's token asks first: the device must register again.
const END_TOKEN_QUESTION: &str =
    "End this device's token? It answers no request until it registers again; this cannot be undone.";

/// A device's button. One that cannot be undone (`confirm`, its question) is shown as a danger
/// and asks first.
fn device_action(
    op: &Operator,
    base: &str,
    action: &str,
    device: &str,
    user: &str,
    label: &str,
    confirm: Option<&str>,
) -> Markup {
    html! {
        form.inline method="post" action={ (base) "/devices/" (action) } data-confirm=[confirm] {
            (csrf(op))
            input type="hidden" name="deviceId" value=(device);
            input type="hidden" name="namedUser" value=(user);
            @if confirm.is_some() { button.danger type="submit" { (label) } } @else { button.quiet type="submit" { (label) } }
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct NewLink {
    named_user: String,
    machine_user_name_ws: Option<String>,
    expires_in_secs: Option<String>,
}

/// `POST /console/apps/{appId}/registration-links`: the link and its QR code, shown once.
pub async fn create_link(
    State(state): State<AppState>,
    headers: HeaderMap,
    Posted { by: AppOf { op, app, .. }, form }: Posted<NewLink, GlobalApp>,
) -> Result<Page, Refusal> {
    let user = named_user("namedUser", form.named_user.trim())?;
    let alias = view::given(form.machine_user_name_ws).map(|a| a.trim().to_owned());
    let ttl = view::number("expiresInSecs", form.expires_in_secs.as_deref())?;
    let holder = devices::alias_holder(&state, app.app_id.clone(), alias.as_deref()).await;
    let (code, link) =
        devices::create_link(&state, &app, &op.source(), user.clone(), alias, ttl, holder).await?;
    let url = crate::links::registration_url(&state, &headers, code.expose());
    let svg = crate::links::qr_svg(&url)?;
    let body = html! {
        p.notice role="status" { "A one-time registration link for " strong { (user) } " of " strong { (app.display_name) } ", valid until " (when(link.expires_at)) ". The user scans the code with the mobile app, or opens the link on the phone." }
        // The SVG is drawn here from the link, not taken from the request.
        div.qr #link-qr { (PreEscaped(svg)) }
        p.secret { code #link-url { (url) } }
        p { button.quiet type="button" data-copy="link-url" { "Copy link" } }
        p { a href={ "/console/apps/" (app.app_id) "/users?user=" (query_value(&user)) } { "Back to " (user) } }
    };
    Ok(Page::new(Some(&op), "Registration link", body))
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct DeviceForm {
    device_id: String,
    named_user: String,
}

fn back_to_user(app: &AppId, user: &str, notice: &str) -> Response {
    Redirect::to(&format!("/console/apps/{app}/users?user={}&notice={notice}", query_value(user)))
        .into_response()
}

/// `POST /console/apps/{appId}/devices/remove`: the device goes, with its pairings; its
/// certificates are revoked and its token ends.
pub async fn remove_device(
    State(state): State<AppState>,
    Posted { by: AppOf { op, app, .. }, form }: Posted<DeviceForm, GlobalApp>,
) -> Result<Response, Refusal> {
    let device_id = identifier("deviceId", form.device_id.trim())?;
    let reads = devices::removal_reads(&state, app.app_id.clone(), &device_id).await;
    devices::remove(&state, &app, &op.source(), &device_id, reads).await?;
    Ok(back_to_user(&app.app_id, &form.named_user, "removed"))
}

/// `POST /console/apps/{appId}/devices/end-token`: the device must register again.
pub async fn end_token(
    State(state): State<AppState>,
    Posted { by: AppOf { app, .. }, form }: Posted<DeviceForm, GlobalApp>,
) -> Result<Response, Refusal> {
    let device_id = identifier("deviceId", form.device_id.trim())?;
    let first = devices::device(&state, &app.app_id, &device_id).await;
    devices::end_token(&state, &app.app_id, &device_id, first).await?;
    tracing::info!(app_id = %app.app_id, %device_id, "device token revoked");
    Ok(back_to_user(&app.app_id, &form.named_user, "ended"))
}

fn offline_status(pairing: &Pairing, now: EpochMillis) -> Markup {
    html! {
        @match &pairing.offline_set {
            None => span.tag.off { "no PINs" },
            Some(set) if set.valid_until <= now => span.tag.off { "PINs expired" },
            Some(set) => {
                span.tag.on { (set.remaining.len()) " of " (set.issued_count) " PINs left" }
                " until " (when(set.valid_until))
                @if set.delivered_at.is_none() { " (not fetched yet)" }
            },
        }
        @if let Some(until) = pairing.lock.in_force(now) {
            " " span.tag.bad { "locked until " (when(until)) }
        }
    }
}

/// `GET /console/apps/{appId}/workstations`: the app's pairings.
pub async fn workstations(
    State(state): State<AppState>,
    AppOf { op, app, .. }: GlobalApp,
    PageQuery(query): PageQuery<Listing>,
) -> Result<Page, Refusal> {
    let cursor = view::cursor(query.cursor.as_deref(), &Workstations::app_query(&app.app_id))?;
    let (pairings, next) = rp_app::console::pairings_of_app(&state, &app.app_id, 50, cursor).await?;
    let now = state.clock().now_millis();
    let base = format!("/console/apps/{}", app.app_id);
    let body = html! {
        (notice(query.notice.as_deref()))
        p { a href=(base) { "Back to " (app.display_name) } " · offline access is " (super::apps::on_off(app.workstation.offline_access.enabled)) }
        @if pairings.is_empty() { p.muted { "No workstation is paired." } } @else {
            table #pairings {
                thead { tr { th { "Workstation" } th { "User" } th { "Device" } th { "Paired" } th { "Offline" } th {} } }
                tbody {
                    @for pairing in &pairings {
                        tr {
                            td { (pairing.machine_name.as_deref().unwrap_or("")) br; code { (pairing.machine_id) } }
                            td { (pairing.named_user) @if let Some(ws) = &pairing.machine_user_name_ws { br; span.muted { (ws) } } }
                            td { code { (pairing.device_id) } }
                            td { (when(pairing.created_at)) }
                            td { (offline_status(pairing, now)) }
                            td {
                                form.inline method="post" action={ (base) "/workstations/unpair" } data-confirm="Unpair this workstation? Its certificate is revoked; pairing again takes the phone." {
                                    (csrf(&op))
                                    input type="hidden" name="machineId" value=(pairing.machine_id);
                                    input type="hidden" name="deviceId" value=(pairing.device_id);
                                    button.danger type="submit" { "Unpair" }
                                }
                            }
                        }
                    }
                }
            }
        }
        @if let Some(next) = next { p { a href={ (base) "/workstations?cursor=" (query_value(&next.encode())) } { "Next page" } } }
    };
    Ok(Page::new(Some(&op), &format!("Workstations of {}", app.display_name), body))
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PairingForm {
    machine_id: String,
    device_id: String,
}

/// `POST /console/apps/{appId}/workstations/unpair`: the pairing goes and its certificate is
/// revoked.
pub async fn unpair(
    State(state): State<AppState>,
    Posted { by: AppOf { op, app, .. }, form }: Posted<PairingForm, GlobalApp>,
) -> Result<Response, Refusal> {
    let key = PairingKey {
        machine_id: identifier("machineId", form.machine_id.trim())?,
        device_id: identifier("deviceId", form.device_id.trim())?,
    };
    rp_app::pairing::unpair(&state, &app.app_id, &key, None, &op.source()).await?;
    Ok(Redirect::to(&format!("/console/apps/{}/workstations?notice=unpaired", app.app_id)).into_response())
}
