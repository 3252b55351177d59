//! Registration (DECISIONS §4): an admin creates a one-time link for a user; the link's page
//! shows a QR code; the mobile app registers the device with the code and its P-256 keys and
//! receives a device token.

use super::extract::{AdminOfApp, ApiJson, ApiPath, MaybeJson, RefreshingDevice};
use super::links;
use super::problem::Problem;
use crate::params::UserPath;
use crate::wire::apps::Platform;
use crate::wire::devices::{PushTokenRequest, RegistrationRequest};
use axum::extract::State;
use axum::http::{header, request::Parts, HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{delete, get, post, put};
use axum::Json;
use rp_app::devices;
use rp_app::AppState;
use rp_domain::apps::AppId;
use rp_domain::devices::{identifier, named_user, Registration, RegistrationCode, RegistrationError};
use rp_domain::push::PushToken;
use serde::{Deserialize, Serialize};

routers! { crate::routing::plain;
    links_router("/cc/api/apps/{app_id}/users/{named_user}/registration-links") = post(create_link);
    page_router("/rp/register/{code}") = get(page);
    registrations_router("/rp/versioned/device/registrations") = post(register);
    push_router("/rp/versioned/device/push") = put(register_push);
    token_router("/rp/versioned/device/token") = post(refresh_token);
    user_devices_router("/cc/api/apps/{app_id}/users/{named_user}/devices") = get(list_devices);
    device_token_router("/cc/api/apps/{app_id}/devices/{device_id}/token") = delete(revoke_token);
}

/// The optional body of a link creation.
#[derive(Debug, Default, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LinkOptions {
    /// The user's workstation name (`CORP\alice`), if the directory knows it.
    #[serde(rename = "machineUserNameWS")]
    #[schema(min_length = 1, max_length = 255)]
    pub machine_user_name_ws: Option<String>,
    #[schema(minimum = 60, maximum = 604800)]
    pub expires_in_secs: Option<i64>,
}

/// A created link; the code is shown only here.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LinkCreated {
    pub code: String,
    pub url: String,
    #[schema(format = DateTime)]
    pub expires_at: String,
}

/// A registered device and its device token, shown only here.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeviceRegistered {
    pub device_id: String,
    #[schema(value_type = String)]
    pub app_id: AppId,
    pub named_user: String,
    pub device_token: String,
}

#[utoipa::path(post, path = "/cc/api/apps/{appId}/users/{namedUser}/registration-links", tag = "registration",
    security(("admin" = [])), params(crate::params::UserPath), request_body(content = Option<LinkOptions>),
    responses((status = 201, description = "Created; the code is shown only here", body = LinkCreated)))]
async fn create_link(
    State(state): State<AppState>,
    mut parts: Parts,
    headers: HeaderMap,
    path: Result<ApiPath<UserPath>, Problem>,
    options: Result<MaybeJson<LinkOptions>, Problem>,
) -> Result<Response, Problem> {
    // Whoever holds the alias the body names is read beside the token and the app.
    let options = options.map(|MaybeJson(options)| options.unwrap_or_default());
    let holder = |app, options: &LinkOptions| {
        devices::alias_holder(&state, app, options.machine_user_name_ws.as_deref())
    };
    let (admin, holder) = AdminOfApp::beside(&mut parts, &state, &options, holder).await?;
    let LinkOptions { machine_user_name_ws: alias, expires_in_secs: ttl } = options?;
    let ApiPath(UserPath { named_user: user, .. }) = path?;
    let user = named_user("namedUser", &user)?;
    let (app, _) = admin.app?;
    let source = format!("admin:{}", admin.token.token_id);
    let (code, link) =
        devices::create_link(&state, &app, &source, user, alias, ttl, holder.flatten()).await?;
    let url = links::registration_url(&state, &headers, code.expose());
    let body = LinkCreated { code: code.expose().to_owned(), url, expires_at: link.expires_at.iso8601() };
    Ok((StatusCode::CREATED, [(header::CACHE_CONTROL, "no-store")], Json(body)).into_response())
}

fn html_page(status: StatusCode, title: &str, body: &str) -> Response {
    let title = html_escape::encode_text(title);
    let page = format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{title}</title><style>body{{font-family:system-ui,sans-serif;max-width:32rem;margin:2rem auto;\
         padding:0 1rem;color:#1b1b1b}}svg{{width:18rem;height:18rem}}.muted{{color:#555}}</style></head>\
         <body><h1>{title}</h1>{body}</body></html>\n"
    );
    let mut response = (status, Html(page)).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, "no-store".parse().expect("static"));
    headers.insert(header::REFERRER_POLICY, "no-referrer".parse().expect("static"));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        "default-src 'none'; style-src 'unsafe-inline'; img-src data:; frame-ancestors 'none'"
            .parse()
            .expect("static"),
    );
    response
}

/// The HTML page a user opens from the link: a QR code for the mobile app to scan.
#[utoipa::path(get, path = "/rp/register/{code}", tag = "registration", params(("code" = String, Path, description = "The link's registration code", pattern = "^[A-Za-z0-9_-]{16,64}$")),
    responses(
        (status = 200, description = "The registration page, a QR code for the mobile app", content_type = "text/html", body = String),
        (status = 404, description = "No such link", content_type = "text/html", body = String),
        (status = 410, description = "The link expired or was used", content_type = "text/html", body = String),
    ))]
async fn page(
    State(state): State<AppState>,
    headers: HeaderMap,
    ApiPath(code): ApiPath<String>,
) -> Result<Response, Problem> {
    let Ok(code) = RegistrationCode::parse("code", &code) else {
        return unusable_page(RegistrationError::LinkNotFound);
    };
    let link = match devices::usable_link(&state, &code).await {
        Ok((link, _)) => link,
        Err(unusable) => return unusable_page(unusable),
    };
    let url = links::registration_url(&state, &headers, code.expose());
    let svg = links::qr_svg(&url)?;
    let body = format!(
        "<p>Scan this code with the mobile app to register your device for <strong>{app}</strong> as <strong>{user}</strong>.</p>\
         {svg}<ol><li>Open the mobile app and choose <em>Add account</em>.</li><li>Point the camera at the code.</li>\
         <li>Confirm the registration in the app.</li></ol><p class=\"muted\">The code works once and expires at {expires}.</p>",
        app = html_escape::encode_text(link.app_id.as_str()),
        user = html_escape::encode_text(&link.named_user),
        expires = link.expires_at.iso8601(),
    );
    Ok(html_page(StatusCode::OK, "Register your device", &body))
}

/// The page of a link that cannot register a device: 404 for none, 410 for one expired or
/// used; a failure to read it is a problem.
fn unusable_page(unusable: RegistrationError) -> Result<Response, Problem> {
    let (status, title, text) = match unusable {
        RegistrationError::LinkNotFound => (
            StatusCode::NOT_FOUND,
            "Registration link not found",
            "<p>This registration link does not exist. Ask your administrator for a new one.</p>",
        ),
        RegistrationError::LinkExpired => (
            StatusCode::GONE,
            "Registration link expired",
            "<p>This registration link has expired. Ask your administrator for a new one.</p>",
        ),
        RegistrationError::LinkUsed => (
            StatusCode::GONE,
            "Registration link already used",
            "<p>This registration link has been used to register a device already. Each link works once.</p>",
        ),
        other => return Err(other.into()),
    };
    Ok(html_page(status, title, text))
}

#[utoipa::path(post, path = "/rp/versioned/device/registrations", tag = "registration", request_body = RegistrationRequest,
    responses((status = 201, description = "Registered; the device token is shown only here. The same registration sent again while the code is live (the reply was lost) gets another token, and the one before stops working", body = DeviceRegistered)))]
async fn register(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<RegistrationRequest>,
) -> Result<(StatusCode, [(header::HeaderName, &'static str); 1], Json<DeviceRegistered>), Problem> {
    let registration = Registration::try_from(body)?;
    let (device, secret) = devices::register(&state, registration).await?;
    let body = DeviceRegistered {
        device_id: device.device_id,
        app_id: device.app_id,
        named_user: device.named_user,
        device_token: secret.expose().to_owned(),
    };
    Ok((StatusCode::CREATED, [(header::CACHE_CONTROL, "no-store")], Json(body)))
}

/// A fresh device token, shown only here.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeviceTokenIssued {
    pub device_token: String,
    #[schema(format = DateTime)]
    pub expires_at: String,
}

/// The device trades its (still valid) token for a fresh one; the old one stops working but to
/// trade again for a while, in case the reply was lost.
#[utoipa::path(post, path = "/rp/versioned/device/token", tag = "registration", security(("device" = [])),
    responses((status = 201, description = "A fresh device token; the old one stops working, but for this call within 10 minutes (the reply was lost: the fresh token it gave stops working instead)", body = DeviceTokenIssued)))]
async fn refresh_token(
    State(state): State<AppState>,
    RefreshingDevice(presented): RefreshingDevice,
) -> Result<(StatusCode, [(header::HeaderName, &'static str); 1], Json<DeviceTokenIssued>), Problem> {
    let (secret, token) = devices::refresh_token(&state, &presented).await?;
    let body =
        DeviceTokenIssued { device_token: secret.expose().to_owned(), expires_at: token.expiry().iso8601() };
    Ok((StatusCode::CREATED, [(header::CACHE_CONTROL, "no-store")], Json(body)))
}

/// A device's push registration, as the device sees it (the endpoint stays on the server).
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PushRegistered {
    pub platform: Platform,
    /// False once the platform reported the endpoint disabled or gone; registering again
    /// turns it back on.
    pub enabled: bool,
    #[schema(format = DateTime)]
    pub updated_at: String,
}

/// The device registers (or replaces) its push token: from then on it is woken when there is
/// something to fetch (docs/api/devices.md, "Wake-up").
#[utoipa::path(put, path = "/rp/versioned/device/push", tag = "registration", security(("device" = [])),
    request_body = PushTokenRequest, responses((status = 200, description = "Registered", body = PushRegistered)))]
async fn register_push(
    State(state): State<AppState>,
    caller: super::extract::DeviceCaller,
    ApiJson(body): ApiJson<PushTokenRequest>,
) -> Result<Json<PushRegistered>, Problem> {
    let (app, user, device) = (&caller.app_id, &caller.named_user, &caller.device_id);
    let registered =
        rp_app::push::register_token(&state, app, user, device, PushToken::try_from(body)?).await?;
    Ok(Json(PushRegistered {
        platform: registered.platform.into(),
        enabled: registered.enabled,
        updated_at: registered.updated_at.iso8601(),
    }))
}

/// A user's device as an admin sees it: never its token.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeviceView {
    pub device_id: String,
    pub friendly_name: String,
    pub model_number: String,
    #[schema(format = DateTime)]
    pub registered_at: String,
    /// `null` when the device has no token (revoked): it must register again.
    #[schema(format = DateTime)]
    pub token_expires_at: Option<String>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct DeviceList {
    pub devices: Vec<DeviceView>,
}

#[utoipa::path(get, path = "/cc/api/apps/{appId}/users/{namedUser}/devices", tag = "registration", security(("admin" = [])),
    params(crate::params::UserPath),
    responses((status = 200, description = "The user's devices, never their tokens", body = DeviceList)))]
async fn list_devices(
    State(state): State<AppState>,
    mut parts: Parts,
    path: Result<ApiPath<UserPath>, Problem>,
) -> Result<Json<DeviceList>, Problem> {
    let named_user =
        path.and_then(|ApiPath(UserPath { named_user: name, .. })| Ok(named_user("namedUser", &name)?));
    // The user's devices, then their tokens, are read beside the token and the app.
    let reads = |app: AppId, named_user: &String| {
        let (state, named_user) = (&state, named_user.clone());
        async move { rp_app::devices::devices_of_user(state, &app, &named_user).await }
    };
    let (admin, read) = AdminOfApp::beside(&mut parts, &state, &named_user, reads).await?;
    let named_user = named_user?;
    let (app, _) = admin.app?;
    let devices = match read {
        Some(read) => read?,
        None => reads(app.app_id.clone(), &named_user).await?,
    };
    let devices = devices
        .into_iter()
        .map(|(device, token)| DeviceView {
            device_id: device.device_id,
            friendly_name: device.friendly_name,
            model_number: device.model_number,
            registered_at: device.registered_at.iso8601(),
            token_expires_at: token.map(|t| t.expiry().iso8601()),
        })
        .collect();
    Ok(Json(DeviceList { devices }))
}

/// Ends a device's token; the device keeps its pairings but must register again to call in.
#[utoipa::path(delete, path = "/cc/api/apps/{appId}/devices/{deviceId}/token", tag = "registration", security(("admin" = [])),
    params(crate::params::AppIdPath, ("deviceId" = String, Path, pattern = "^[A-Za-z0-9._:-]{1,128}$")), responses((status = 204, description = "Revoked")))]
async fn revoke_token(
    State(state): State<AppState>,
    mut parts: Parts,
    path: Result<ApiPath<(String, String)>, Problem>,
) -> Result<StatusCode, Problem> {
    let device_id = path.and_then(|ApiPath((_, id))| Ok(identifier("deviceId", &id)?));
    // The device is read beside the token and the app.
    let device = |app: AppId, device_id: &String| {
        let (state, device_id) = (&state, device_id.clone());
        async move { rp_app::devices::device(state, &app, &device_id).await }
    };
    let (admin, device) = AdminOfApp::beside(&mut parts, &state, &device_id, device).await?;
    let (app, _) = admin.app?;
    let device_id = device_id?;
    let first = match device {
        Some(read) => read,
        None => rp_app::devices::device(&state, &app.app_id, &device_id).await,
    };
    rp_app::devices::end_token(&state, &app.app_id, &device_id, first).await?;
    tracing::info!(app_id = %app.app_id, %device_id, "device token revoked");
    Ok(StatusCode::NO_CONTENT)
}
