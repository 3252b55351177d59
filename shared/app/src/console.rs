//! The operator console's own use cases: signing in and out, the session behind each page, and
//! the reads its pages make that no API endpoint makes (a queue's counts, an app's pairings, a
//! window of events). What a page changes goes through the same use cases as the API.

use crate::{HasClock, HasStore};
use rp_domain::apps::AppId;
use rp_domain::boundary::Failure;
use rp_domain::console::{self, ConsoleSession, SignInRefusal, SIGN_IN_FAILURES};
use rp_domain::events::EventRecord;
use rp_domain::pairing::Pairing;
use rp_domain::time::EpochMillis;
use rp_domain::tokens::{TokenRecord, TokenSecret};
use rp_ports::{retry_on_conflict, Cursor, Listed, StoreError};
use rp_repo::apps::AppRecord;
use rp_repo::certificates::{Certificates, QueueCounts};
use rp_repo::console::ConsoleSessions;
use rp_repo::events::{EventFilter, Events};
use rp_repo::tokens::Tokens;
use rp_repo::workstations::Workstations;
use rp_repo::Order;

#[derive(Debug, thiserror::Error)]
pub enum ConsoleError {
    /// The client failed to sign in too often lately; the token was not looked at.
    #[error("too many failed sign-ins; try again in a few minutes")]
    TooManyFailures,
    #[error("the token was refused ({})", .0.reason())]
    Refused(SignInRefusal),
    #[error(transparent)]
    Failed(#[from] Failure),
}

rp_domain::shares_failures!(@from ConsoleError);

/// Signs in `client` (its address, for counting failures) with `presented`, the token as typed:
/// the new session's id (for the cookie) and its record. A failure is counted and logged with
/// its reason and the client, never the token; past [`SIGN_IN_FAILURES`] in a window the client
/// is refused before its token is read.
pub async fn sign_in(
    state: &(impl HasClock + HasStore),
    client: &str,
    presented: &str,
) -> Result<(TokenSecret, ConsoleSession), ConsoleError> {
    let sessions = ConsoleSessions::new(state.store());
    let now = state.clock().now_millis();
    if sessions.failures(client, now.as_secs()).await? >= SIGN_IN_FAILURES {
        tracing::warn!(client, "console sign-in refused: too many failures");
        return Err(ConsoleError::TooManyFailures);
    }
    let admitted = match TokenSecret::parse(presented.trim()) {
        Some(secret) => {
            let presented = secret.hash();
            let record = Tokens::new(state.store()).find(&presented).await?;
            console::admit(record, &presented, now)
        }
        None => Err(SignInRefusal::Unknown),
    };
    let token = match admitted {
        Ok(token) => token,
        Err(refusal) => {
            let failures = sessions.count_failure(client, now.as_secs()).await?;
            tracing::warn!(client, reason = refusal.reason(), failures, "console sign-in refused");
            return Err(ConsoleError::Refused(refusal));
        }
    };
    let (secret, session) = retry_on_conflict(|| async {
        let (secret, session) = ConsoleSession::open(&token, now);
        sessions.create(&session).await?;
        Ok::<_, StoreError>((secret, session))
    })
    .await?;
    tracing::info!(token_id = %token.token_id, session_id = %session.session_id, "console session opened");
    Ok((secret, session))
}

/// The live session a cookie's id names, with its token: `None` when there is none, it
/// expired, or its token was revoked or expired meanwhile (a session stands for its token).
pub async fn session(
    state: &(impl HasClock + HasStore),
    presented: &str,
) -> Result<Option<(ConsoleSession, TokenRecord)>, StoreError> {
    let Some(secret) = TokenSecret::parse(presented) else {
        return Ok(None);
    };
    let presented = secret.hash();
    let now = state.clock().now_millis();
    let Some(session) = ConsoleSessions::new(state.store()).find(&presented).await? else {
        return Ok(None);
    };
    if !session.admits(&presented, now) {
        return Ok(None);
    }
    match Tokens::new(state.store()).get(&session.token_id).await? {
        Some(token) if token.live_at(now).is_ok() => Ok(Some((session, token))),
        _ => Ok(None),
    }
}

/// Ends the session.
pub async fn sign_out(state: &impl HasStore, session: &ConsoleSession) -> Result<(), StoreError> {
    ConsoleSessions::new(state.store()).end(&session.session_id).await?;
    tracing::info!(token_id = %session.token_id, session_id = %session.session_id, "console session ended");
    Ok(())
}

/// The apps `session` may see: a page of every app for a global admin, its own for a scoped one.
pub async fn apps(
    state: &impl HasStore,
    session: &ConsoleSession,
    limit: usize,
    cursor: Option<Cursor>,
) -> Listed<AppRecord> {
    match &session.app_id {
        None => crate::apps::list_apps(state, limit, cursor).await,
        Some(own) => {
            Ok((crate::apps::app(state, own).await?.map(|(app, _)| app).into_iter().collect(), None))
        }
    }
}

/// A page of the app's workstation pairings.
pub async fn pairings_of_app(
    state: &impl HasStore,
    app: &AppId,
    limit: usize,
    cursor: Option<Cursor>,
) -> Listed<Pairing> {
    Workstations::new(state.store()).pairings_of_app(app, limit, cursor).await
}

/// Pending requests counted per app at most; past it a page says "more than".
pub const QUEUE_COUNT_CAP: usize = 1000;

/// The app's certificate queue: pending, leased and dead.
pub async fn queue(state: &impl HasStore, app: &AppId) -> Result<QueueCounts, StoreError> {
    Certificates::new(state.store()).queue_counts(app, QUEUE_COUNT_CAP).await
}

/// How many apps' queues one page reads at once.
pub const QUEUES_AT_ONCE: usize = 16;

/// The queue counts of `apps`, in their order: read [`QUEUES_AT_ONCE`] at a time, so that a
/// page over many apps puts a bounded load on the store.
pub async fn queues(state: &impl HasStore, apps: &[AppId]) -> Vec<Result<QueueCounts, StoreError>> {
    let mut counts = Vec::with_capacity(apps.len());
    for chunk in apps.chunks(QUEUES_AT_ONCE) {
        counts.extend(futures_util::future::join_all(chunk.iter().map(|app| queue(state, app))).await);
    }
    counts
}

/// Most events the console's events page counts on its timeline.
pub const EVENTS_COUNTED: usize = 5000;
/// How many of the newest events it shows.
pub const EVENTS_SHOWN: usize = 200;

/// The first `cap` events `filter` selects in `order`, and whether more were left unread.
pub async fn events(
    state: &impl HasStore,
    filter: &EventFilter,
    cap: usize,
    order: Order,
) -> Result<(Vec<EventRecord>, bool), StoreError> {
    Events::new(state.store()).first(filter, cap, order).await
}

/// The newest certificate issuances and revocations of `app` since `since`, newest first.
pub async fn recent_certificates(
    state: &impl HasStore,
    app: &AppId,
    since: EpochMillis,
    cap: usize,
) -> Result<Vec<EventRecord>, StoreError> {
    let named = |name: &str| EventFilter {
        name: Some(name.to_owned()),
        app_id: Some(app.clone()),
        from: Some(since),
        to: None,
    };
    let (issued, revoked) = (named("WORKSTATION_CERTIFICATE_ISSUED"), named("WS_CERTIFICATE_REVOKED"));
    let newest = |filter| events(state, filter, cap, Order::NewestFirst);
    let (issued, revoked) = tokio::join!(newest(&issued), newest(&revoked));
    let mut all: Vec<EventRecord> = issued?.0.into_iter().chain(revoked?.0).collect();
    all.sort_by_key(|event| std::cmp::Reverse(event.at));
    all.truncate(cap);
    Ok(all)
}
