//! `GET /problems/{slug}`: what a problem's `type` points at. Every problem the API answers has
//! `type: /problems/<slug>`; this page describes that type for a person, from the same error
//! tables that map the codes ([`errors::TABLES`]). A slug that more than one code shares lists
//! them all. No token: the descriptions are public, as the codes are.

use crate::errors;
use crate::extract::ApiPath;
use crate::problem::{Problem, ProblemType};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

/// Needs no state, as `/health`: the function serves it without a backend.
pub fn router<S: Clone + Send + Sync + 'static>(_state: &S) -> Router<S> {
    Router::new().route("/problems/{slug}", get(page))
}

/// The rows of the error tables whose type is `slug`, in code order.
pub fn rows_of(slug: &str) -> Vec<&'static ProblemType> {
    let mut rows: Vec<_> =
        errors::TABLES.iter().flat_map(|t| t.iter().copied()).filter(|p| p.slug == slug).collect();
    rows.sort_by_key(|p| p.code);
    rows
}

#[utoipa::path(get, path = "/problems/{slug}", tag = "problems",
    params(("slug" = String, Path, description = "The part of a problem's `type` after `/problems/`", pattern = "^[a-z0-9-]{1,64}$")),
    responses((status = 200, description = "A short description of the problem type, for a person", content_type = "text/html")))]
async fn page(ApiPath(slug): ApiPath<String>) -> Response {
    let rows = rows_of(&slug);
    let Some(first) = rows.first() else {
        return Problem::route_not_found(&format!("/problems/{slug}")).into_response();
    };
    let mut body = format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{title}</title></head>\n\
         <body>\n<h1>{title}</h1>\n<p>Problem type <code>/problems/{slug}</code>, answered as \
         <code>application/problem+json</code>. <code>errorCode</code> says which case it is:</p>\n\
         <table>\n<tr><th>errorCode</th><th>HTTP status</th><th>Meaning</th></tr>\n",
        title = escape(first.title),
        slug = escape(&slug),
    );
    for row in &rows {
        body.push_str(&format!(
            "<tr><td>{}</td><td>{} {}</td><td>{}</td></tr>\n",
            row.code,
            row.status.as_u16(),
            row.status.canonical_reason().unwrap_or_default(),
            inline_code(&escape(row.meaning)),
        ));
    }
    body.push_str("</table>\n");
    body.push_str("<p><code>detail</code> says what happened in this instance, and <code>field</code> (where present) names the request field.</p>\n</body></html>\n");
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], body).into_response()
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// The table's `backticks` as `<code>`.
fn inline_code(text: &str) -> String {
    let mut out = String::new();
    for (i, part) in text.split('`').enumerate() {
        if i % 2 == 1 {
            out.push_str("<code>");
            out.push_str(part);
            out.push_str("</code>");
        } else {
            out.push_str(part);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_of_the_tables_has_rows() {
        for row in errors::TABLES.iter().flat_map(|t| t.iter()) {
            assert!(rows_of(row.slug).iter().any(|r| r.code == row.code), "{}", row.slug);
        }
    }

    #[test]
    fn text_is_escaped_and_backticks_become_code() {
        assert_eq!(inline_code(&escape("a `<b>` c")), "a <code>&lt;b&gt;</code> c");
    }
}
