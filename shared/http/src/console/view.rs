//! The console's pages: one layout, the answer of a refused or failed request, and small
//! formatting helpers. Every value is spliced through maud, which escapes it; the only markup
//! spliced raw is an SVG this code draws.

use super::operator::Operator;
use crate::problem::Problem;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use maud::{html, Markup, DOCTYPE};
use rp_domain::time::EpochMillis;
use rp_ports::{Cursor, Query};

/// A page of the console.
pub struct Page {
    status: StatusCode,
    markup: Markup,
}

impl Page {
    /// A page titled `title` for `op` (`None` before sign-in).
    pub fn new(op: Option<&Operator>, title: &str, body: Markup) -> Self {
        Self { status: StatusCode::OK, markup: layout(op, title, body) }
    }

    pub fn status(mut self, status: StatusCode) -> Self {
        self.status = status;
        self
    }
}

impl IntoResponse for Page {
    fn into_response(self) -> Response {
        let html = HeaderValue::from_static("text/html; charset=utf-8");
        (self.status, [(header::CONTENT_TYPE, html)], self.markup.into_string()).into_response()
    }
}

fn layout(op: Option<&Operator>, title: &str, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · RP console" }
                // No icon to fetch: the browser would ask for /favicon.ico otherwise.
                link rel="icon" href="data:,";
                link rel="stylesheet" href="/console/assets/console.css";
                script src="/console/assets/console.js" defer {}
            }
            body {
                header {
                    a.brand href="/console" { "RP console" }
                    @if let Some(op) = op {
                        nav {
                            a href="/console/apps" { "Apps" }
                            @if op.is_global() {
                                a href="/console/tokens" { "Tokens" }
                                a href="/console/certificates" { "Certificates" }
                                a href="/console/events" { "Events" }
                            }
                        }
                        span.who { (op.describe()) }
                        form.inline method="post" action="/console/sign-out" {
                            (csrf(op))
                            button type="submit" { "Sign out" }
                        }
                    }
                }
                main {
                    h1 { (title) }
                    (body)
                }
            }
        }
    }
}

/// The hidden CSRF field every state-changing form of `op`'s carries.
pub fn csrf(op: &Operator) -> Markup {
    html! { input type="hidden" name="csrf" value=(op.session.csrf); }
}

/// A one-line notice at the top of a page, from a fixed list (never the request's own text).
pub fn notice(code: Option<&str>) -> Markup {
    let text = match code {
        Some("created") => "Created.",
        Some("saved") => "Saved.",
        Some("revoked") => "Revoked.",
        Some("removed") => "Removed: its pairings are gone and its certificates are being revoked.",
        Some("ended") => "The device's token has ended.",
        Some("unpaired") => "Unpaired: the pairing's certificate is being revoked.",
        Some("restored") => "Restored as the current version.",
        _ => return html! {},
    };
    html! { p.notice role="status" { (text) } }
}

/// What a console request answers when it cannot do what was asked.
#[derive(Debug)]
pub enum Refusal {
    /// Not signed in, or the session ended: to the sign-in page.
    SignIn,
    /// Signed in, but not allowed this.
    Forbidden(&'static str),
    /// A refusal or failure of a use case, shown as its problem says.
    Told(Problem),
}

impl<E: Into<Problem>> From<E> for Refusal {
    fn from(e: E) -> Self {
        Refusal::Told(e.into())
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        match self {
            Refusal::SignIn => Redirect::to("/console/sign-in").into_response(),
            Refusal::Forbidden(why) => error_page(StatusCode::FORBIDDEN, "Not allowed", why, None),
            Refusal::Told(problem) => {
                let told = problem.tell();
                error_page(told.status, told.title, &told.detail, told.retry_after)
            }
        }
    }
}

fn error_page(status: StatusCode, title: &str, detail: &str, retry_after: Option<u64>) -> Response {
    let body = html! {
        p.error role="alert" { (detail) }
        p { a href="/console" { "Back to the console" } }
    };
    let mut response = Page::new(None, title, body).status(status).into_response();
    if let Some(secs) = retry_after {
        response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    response
}

/// `2026-11-27 08:22:26 UTC`.
pub fn when(at: EpochMillis) -> String {
    let text = at.iso8601();
    format!("{} {} UTC", &text[..10], &text[11..19])
}

/// A query value, percent-encoded for a link.
pub fn query_value(value: &str) -> String {
    form_urlencoded::byte_serialize(value.as_bytes()).collect()
}

/// The cursor a "next page" link carried, checked against the list it pages.
pub fn cursor(text: Option<&str>, query: &Query) -> Result<Option<Cursor>, Problem> {
    match text.filter(|t| !t.is_empty()) {
        None => Ok(None),
        Some(text) => match Cursor::decode(text) {
            Some(cursor) if cursor.belongs_to(query) => Ok(Some(cursor)),
            _ => Err(Problem::invalid("cursor", "is not a cursor of this list")),
        },
    }
}

/// An optional whole number of a form, named `field` when it is not one.
pub fn number(field: &str, text: Option<&str>) -> Result<Option<i64>, Problem> {
    match text.map(str::trim).filter(|t| !t.is_empty()) {
        None => Ok(None),
        Some(text) => text.parse().map(Some).map_err(|_| Problem::invalid(field, "must be a whole number")),
    }
}

/// A required whole number of a form.
pub fn required_number(field: &str, text: Option<&str>) -> Result<i64, Problem> {
    number(field, text)?.ok_or_else(|| Problem::invalid(field, "is required"))
}

/// An optional text of a form: `None` when left empty.
pub fn given(text: Option<String>) -> Option<String> {
    text.filter(|t| !t.trim().is_empty())
}
