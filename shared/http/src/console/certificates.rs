//! The certificate queue per app, recent issuances and revocations, revoking a certificate by
//! serial number, and the state of a CA's published CRL.

use super::auth::{Global, PageQuery, Posted};
use super::operator::Operator;
use super::view::{self, csrf, when, Page, Refusal};
use crate::problem::Problem;
use axum::extract::State;
use futures_util::future::OptionFuture;
use maud::{html, Markup};
use rp_app::revocation;
use rp_app::AppState;
use rp_app::HasClock;
use rp_domain::apps::AppId;
use rp_domain::certificates::MAX_SERIAL_NUMBER;
use rp_domain::events::EventRecord;
use rp_domain::pki::{self, PublishedCrl};
use rp_domain::{validate, EpochMillis};
use rp_repo::certificates::QueueCounts;
use serde::Deserialize;

/// How far back "recent" reaches.
const RECENT_SECS: i64 = 7 * 24 * 3600;

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct CertQuery {
    app: Option<String>,
    ca: Option<String>,
}

/// `GET /console/certificates?app=&ca=`
pub async fn show(
    State(state): State<AppState>,
    Global(op): Global,
    PageQuery(query): PageQuery<CertQuery>,
) -> Result<Page, Refusal> {
    let selected = view::given(query.app).map(|a| AppId::parse("app", a.trim())).transpose()?;
    let ca = view::given(query.ca).map(|ca| ca_id(ca.trim())).transpose()?;
    let now = state.clock().now_millis();
    let (apps, more_apps) = rp_app::console::apps(&state, &op.session, 100, None).await?;
    let ids: Vec<AppId> = apps.iter().map(|app| app.app_id.clone()).collect();
    let counts = rp_app::console::queues(&state, &ids);
    let since = now.plus_secs(-RECENT_SECS);
    let recent = OptionFuture::from(
        selected.as_ref().map(|app| rp_app::console::recent_certificates(&state, app, since, 50)),
    );
    let crl = OptionFuture::from(ca.as_deref().map(|ca| rp_app::pki::published(&state, ca)));
    let (counts, recent, crl) = tokio::join!(counts, recent, crl);
    let counts = counts.into_iter().collect::<Result<Vec<_>, _>>()?;
    let recent = recent.transpose()?;
    let crl = match crl {
        Some(Ok(published)) => Some(Some(published)),
        Some(Err(pki::PkiError::NotFound(_))) => Some(None),
        Some(Err(e)) => return Err(e.into()),
        None => None,
    };
    let body = html! {
        (queue_table(apps.iter().map(|app| &app.app_id).zip(&counts), more_apps.is_some()))
        (recent_section(selected.as_ref(), recent.as_deref()))
        (revoke_form(&op))
        (crl_section(ca.as_deref(), crl.as_ref(), now))
    };
    Ok(Page::new(Some(&op), "Certificates", body))
}

/// The `ca` asked for, checked as the CRL's path checks a CA id (nothing else can be
/// published), and named as the form names it.
fn ca_id(text: &str) -> Result<String, Problem> {
    pki::check_ca_id(text).map(str::to_owned).map_err(|e| Problem::invalid("ca", e.message))
}

/// Each app's queue, the first 100 apps (`more`: there are more).
fn queue_table<'a>(rows: impl Iterator<Item = (&'a AppId, &'a QueueCounts)>, more: bool) -> Markup {
    html! {
        h2 { "Queue" }
        table #queue {
            thead { tr { th { "App" } th.num { "Pending logins" } th.num { "Pending revocations" } th.num { "Leased logins" } th.num { "Dead" } } }
            tbody {
                @for (app, counts) in rows {
                    @let more = if counts.more { "+" } else { "" };
                    tr {
                        td { a href={ "/console/certificates?app=" (app) } { (app) } }
                        td.num { (counts.pending_logins) (more) }
                        td.num { (counts.pending_revocations) (more) }
                        td.num { (counts.leased_logins()) }
                        td.num { (counts.dead) }
                    }
                }
            }
        }
        @if more { p.muted { "The first 100 apps." } }
        p.muted { "Pending and leased requests wait for the enrollment agent's poll; dead ones ran out of attempts (counted since this version)." }
    }
}

/// The app picker, and the selected app's recent issuances and revocations.
fn recent_section(selected: Option<&AppId>, recent: Option<&[EventRecord]>) -> Markup {
    html! {
        h2 { "Recent issuances and revocations" }
        form.row method="get" action="/console/certificates" {
            div { label for="app" { "App" } input #app type="text" name="app" value=[selected.map(AppId::as_str)]; }
            button type="submit" { "Show the last 7 days" }
        }
        @if let Some(recent) = recent { (recent_table(recent)) }
    }
}

fn revoke_form(op: &Operator) -> Markup {
    html! {
        h2 { "Revoke a certificate" }
        form.card.row #revoke-form method="post" action="/console/certificates/revoke" data-confirm="Revoke the certificate with this serial number? This cannot be undone." {
            (csrf(op))
            div { label for="certSerialNumber" { "Serial number" } input #certSerialNumber type="text" name="certSerialNumber" required; }
            button.danger type="submit" { "Revoke" }
        }
    }
}

/// The CA picker, and the selected CA's CRL (`None` inside: nothing published).
fn crl_section(ca: Option<&str>, crl: Option<&Option<PublishedCrl>>, now: EpochMillis) -> Markup {
    html! {
        h2 { "CRL" }
        form.row method="get" action="/console/certificates" {
            div { label for="ca" { "CA id" } input #ca type="text" name="ca" value=[ca]; }
            button type="submit" { "Show its CRL" }
        }
        @if let (Some(ca), Some(crl)) = (ca, crl) { (crl_state(ca, crl.as_ref(), now)) }
    }
}

fn recent_table(events: &[EventRecord]) -> Markup {
    let text = |event: &EventRecord, name: &str| {
        event.attributes.get(name).map(|v| match v {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        })
    };
    html! {
        @if events.is_empty() { p.muted { "None in the last 7 days." } } @else {
            table #recent {
                thead { tr { th { "At" } th { "Event" } th { "Serial" } th { "Request" } th { "Result" } } }
                tbody {
                    @for event in events {
                        tr {
                            td { (when(event.at)) }
                            td { (event.name) }
                            td { code { (text(event, "certSerialNumber").unwrap_or_default()) } }
                            td { code { (text(event, "requestId").unwrap_or_default()) } }
                            td {
                                @match text(event, "errorCode").as_deref() {
                                    Some("0") => span.tag.on { "ok" },
                                    Some(code) => span.tag.bad { "error " (code) },
                                    None => "",
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn crl_state(ca: &str, crl: Option<&PublishedCrl>, now: EpochMillis) -> Markup {
    html! {
        @match crl {
            None => p.muted #crl { "Nothing is published for CA " code { (ca) } " yet: the enrollment agent publishes its CA and CRL." },
            Some(crl) => section.card #crl {
                p { "CRL number " code { (crl.number_hex()) } ", issued " (when(crl.this_update)) }
                p {
                    @match crl.next_update {
                        Some(next) if next <= now => span.tag.bad { "outdated since " (when(next)) },
                        Some(next) => span.tag.on { "current until " (when(next)) },
                        None => span.tag.off { "no next update given" },
                    }
                }
                p.links {
                    a href={ "/rp/pki/" (view::query_value(ca)) "/crl" } { "CRL (DER)" }
                    a href={ "/rp/pki/" (view::query_value(ca)) "/ca.crt" } { "CA certificate" }
                }
            },
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct RevokeForm {
    cert_serial_number: String,
}

/// `POST /console/certificates/revoke`: a revocation request for the agent.
pub async fn revoke(
    State(state): State<AppState>,
    Posted { by: Global(op), form }: Posted<RevokeForm, Global>,
) -> Result<Page, Refusal> {
    let serial = form.cert_serial_number.trim().to_owned();
    validate::text("certSerialNumber", &serial, 1, MAX_SERIAL_NUMBER)?;
    let first = revocation::serial_read(&state, &serial).await;
    let request_id = revocation::revoke_serial(&state, &serial, first).await?;
    let body = html! {
        p.notice role="status" { "The revocation of " code { (serial) } " is queued as request " code { (request_id) } ": the enrollment agent revokes it at its next poll." }
        p { a href="/console/certificates" { "Back to the certificates" } }
    };
    Ok(Page::new(Some(&op), "Revocation queued", body))
}
