//! Apps: the record every use case of an app starts from, and the API tokens.

use crate::{AppError, HasClock, HasStore};
use rp_domain::apps::{AppId, ControlError, RateLimit, WorkstationSettings};
use rp_domain::tokens::{admitted, TokenHash, TokenKind, TokenRecord, TokenRefusal, TokenSecret};
use rp_domain::{validate, FieldError};
use rp_ports::{retry_on_conflict_from, Cursor, Listed, StoreError};
use rp_repo::apps::{AppRecord, Apps};
use rp_repo::tokens::{self, Tokens};

/// The app at `app_id` with its version, or 404.
pub async fn load_app(state: &impl HasStore, app_id: &str) -> Result<(AppRecord, u64), ControlError> {
    let id = AppId::parse("appId", app_id)?;
    Apps::new(state.store()).get(&id).await?.ok_or_else(|| ControlError::AppNotFound(app_id.to_owned()))
}

/// An app a request names, read ahead (beside the caller's token): `None` when it names none.
pub type NamedRead = Option<Result<Option<(AppRecord, u64)>, StoreError>>;

/// Reads the app `app_id`, with its version.
pub async fn app(state: &impl HasStore, app_id: &AppId) -> Result<Option<(AppRecord, u64)>, StoreError> {
    Apps::new(state.store()).get(app_id).await
}

/// Reads the app a request names, if it names one.
pub async fn named(state: &impl HasStore, app_id: Option<AppId>) -> NamedRead {
    Apps::new(state.store()).named(app_id).await
}

/// A page of every app.
pub async fn list_apps(state: &impl HasStore, limit: usize, cursor: Option<Cursor>) -> Listed<AppRecord> {
    Apps::new(state.store()).list(limit, cursor).await
}

/// The API token `presented` is, admitted now: `Ok(Err(_))` says why it is refused.
pub async fn admit_token(
    state: &(impl HasClock + HasStore),
    presented: &TokenHash,
) -> Result<Result<TokenRecord, TokenRefusal>, StoreError> {
    let found = Tokens::new(state.store()).find(presented).await?;
    Ok(admitted(found, presented, state.clock().now_millis()))
}

/// A page of the API tokens (never their secrets).
pub async fn list_tokens(state: &impl HasStore, limit: usize, cursor: Option<Cursor>) -> Listed<TokenRecord> {
    Tokens::new(state.store()).list(limit, cursor).await
}

/// An API token as read (with its version), for [`revoke_token`] to start from.
pub type TokenRead = Result<Option<(TokenRecord, u64)>, StoreError>;

/// Reads the API token `token_id`.
pub async fn token(state: &impl HasStore, token_id: &str) -> TokenRead {
    Tokens::new(state.store()).read(token_id).await
}

/// Longest token lifetime: two years.
pub const MAX_TOKEN_LIFETIME_SECS: i64 = 2 * 366 * 24 * 3600;

/// A new API token of `kind` for `app_id` (required for an access token, a scope for an admin
/// token; read ahead as `named`): its secret, shown only here, and its record.
pub async fn create_token(
    state: &(impl HasClock + HasStore),
    kind: TokenKind,
    app_id: Option<AppId>,
    named: NamedRead,
    description: Option<String>,
    expires_in_secs: Option<i64>,
) -> Result<(TokenSecret, TokenRecord), AppError> {
    let app_id = match (kind, app_id) {
        (TokenKind::Access, None) => {
            return Err(FieldError::new("appId", "is required for an access token").into())
        }
        (_, Some(id)) if named.transpose()?.flatten().is_none() => {
            return Err(FieldError::new("appId", format!("no app with appId '{id}'")).into())
        }
        (_, app_id) => app_id,
    };
    if let Some(description) = &description {
        validate::text("description", description, 1, 500)?;
    }
    if let Some(secs) = expires_in_secs {
        validate::range("expiresInSecs", secs, 60, MAX_TOKEN_LIFETIME_SECS)?;
    }
    let now = state.clock().now_millis();
    let store = state.store();
    let (secret, record) = tokens::issue(store, now, kind, app_id, description, expires_in_secs).await?;
    tracing::info!(token_id = %record.token_id, kind = ?record.kind, "token created");
    Ok((secret, record))
}

/// Installs an admin token whose secret the operator chose (`LOCAL_ADMIN_TOKEN`, `rp-admin
/// create-admin-token --token`), described as `description`, if it is not stored yet: `Ok(true)`
/// if it was created now.
pub async fn install_admin_token(
    state: &(impl HasClock + HasStore),
    secret: &TokenSecret,
    description: &str,
) -> Result<bool, StoreError> {
    let now = state.clock().now_millis();
    let kind = TokenKind::ControlCenterAdmin;
    let created = tokens::install(state.store(), now, secret, kind, None, description).await?;
    if created {
        tracing::info!(token_id = %secret.hash().token_id(), kind = ?kind, "token installed");
    }
    Ok(created)
}

/// Creates the app `app_id`, named `display_name` (checked by the caller), with default
/// settings: the app as stored.
pub async fn create_app(
    state: &(impl HasClock + HasStore),
    app_id: AppId,
    display_name: String,
) -> Result<AppRecord, ControlError> {
    let app = AppRecord::new(app_id, display_name, state.clock().now_millis());
    match Apps::new(state.store()).create(&app).await {
        Ok(()) => {}
        Err(StoreError::Conflict) => return Err(ControlError::AppExists(app.app_id)),
        Err(e) => return Err(e.into()),
    }
    tracing::info!(app_id = %app.app_id, "app created");
    Ok(app)
}

/// Replaces the app's workstation settings, checked first.
pub async fn replace_workstation(
    state: &(impl HasClock + HasStore),
    app_id: &str,
    read: Result<(AppRecord, u64), ControlError>,
    settings: WorkstationSettings,
) -> Result<WorkstationSettings, ControlError> {
    settings.validate()?;
    update_app(state, app_id, read, |app| app.workstation = settings.clone()).await?;
    tracing::info!(%app_id, "workstation settings replaced");
    Ok(settings)
}

/// An app's limits as the control API and the console replace them, whole: the customization
/// APIs' request budget, and the app's own key-service budget and cap on open login-certificate
/// requests (`None`: the deployment's).
#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    pub rule: RateLimit,
    pub key_calls_per_sec: Option<u32>,
    pub max_open_requests: Option<u32>,
}

impl Limits {
    /// The limits `app` has.
    pub fn of(app: &AppRecord) -> Self {
        let (key_calls_per_sec, max_open_requests) = (app.key_calls_per_sec, app.max_open_requests);
        Self { rule: app.rate_limit.clone(), key_calls_per_sec, max_open_requests }
    }
}

/// Replaces the app's limits, each checked first. A new key-service budget reaches every
/// instance within [`crate::keybudget::FIGURE_KEPT_SECS`].
pub async fn replace_limits(
    state: &(impl HasClock + HasStore),
    app_id: &str,
    read: Result<(AppRecord, u64), ControlError>,
    limits: Limits,
) -> Result<Limits, ControlError> {
    limits.rule.validate()?;
    rp_domain::apps::check_key_calls_per_sec(limits.key_calls_per_sec)?;
    rp_domain::apps::check_max_open_requests(limits.max_open_requests)?;
    update_app(state, app_id, read, |app| {
        app.rate_limit = limits.rule.clone();
        app.key_calls_per_sec = limits.key_calls_per_sec;
        app.max_open_requests = limits.max_open_requests;
    })
    .await?;
    let Limits { rule: RateLimit { limit, window_secs }, key_calls_per_sec, max_open_requests } = &limits;
    tracing::info!(%app_id, limit, window_secs, ?key_calls_per_sec, ?max_open_requests, "limits replaced");
    Ok(limits)
}

/// Changes one part of an app's record, retrying on a concurrent change so that the other parts
/// are never lost. The first attempt changes `read` (the app as the caller read it beside its
/// token); a retry reads the app again.
async fn update_app(
    state: &(impl HasClock + HasStore),
    app_id: &str,
    read: Result<(AppRecord, u64), ControlError>,
    change: impl Fn(&mut AppRecord),
) -> Result<(), ControlError> {
    let apps = &Apps::new(state.store());
    let change = &change;
    retry_on_conflict_from(
        read,
        || load_app(state, app_id),
        |read| async move {
            let (mut app, version) = read?;
            change(&mut app);
            app.updated_at = state.clock().now_millis();
            apps.replace(&app, version).await?;
            Ok(())
        },
    )
    .await
}

/// Revokes the API token `token_id`, from `found` (it as [`token`] read it, ahead); revoking a
/// revoked one again is no error. Sessions of the console that stand for it end with it.
pub async fn revoke_token(
    state: &(impl HasClock + HasStore),
    token_id: &str,
    found: TokenRead,
) -> Result<(), ControlError> {
    if Tokens::new(state.store()).revoke(found?, state.clock().now_millis()).await? {
        tracing::info!(%token_id, "token revoked");
        Ok(())
    } else {
        Err(ControlError::TokenNotFound(token_id.to_owned()))
    }
}
