//! Logging: one JSON object per line through `tracing`, for every binary.
//!
//! Each line carries its event's fields and the fields of every span it is in, flattened to the
//! top level. On Lambda, that means the runtime's span `requestId` and `xrayTraceId`, plus the
//! request span's `method`, `path`, `request_id` (API Gateway's `requestContext.requestId`
//! unless the caller sent `x-request-id`) and `token_id`. Lambda lines also carry `function`
//! (`AWS_LAMBDA_FUNCTION_NAME`) and `coldStart`, true for the init phase and the instance's
//! first invocation. The level comes from `AWS_LAMBDA_LOG_LEVEL` (Lambda's advanced logging
//! controls), else `RUST_LOG`, else `info`.

use serde_json::{Map, Value};
use std::fmt;
use std::sync::OnceLock;
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::{JsonFields, Writer};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, FormattedFields, MakeWriter};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::EnvFilter;

/// Installs the JSON log subscriber, writing to stderr. Safe to call twice.
pub fn init() {
    init_with_writer(std::io::stderr);
}

/// Installs the subscriber with another writer (a test's capture). Safe to call twice: the
/// first one installed stays.
pub fn init_with_writer<W>(writer: W)
where
    W: for<'a> MakeWriter<'a> + Send + Sync + 'static,
{
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter(|name| std::env::var(name).ok()))
        .fmt_fields(JsonFields::new())
        .event_format(LambdaJson { function: std::env::var("AWS_LAMBDA_FUNCTION_NAME").ok() })
        .with_writer(writer)
        .try_init();
}

/// The level filter: `AWS_LAMBDA_LOG_LEVEL` (TRACE, DEBUG, INFO, WARN, ERROR, FATAL) first,
/// then `RUST_LOG`, then `info`.
fn filter(get: impl Fn(&str) -> Option<String>) -> EnvFilter {
    let lambda = get("AWS_LAMBDA_LOG_LEVEL").map(|level| match level.to_ascii_lowercase().as_str() {
        "fatal" => "error".to_owned(),
        other => other.to_owned(),
    });
    lambda
        .or_else(|| get("RUST_LOG"))
        .and_then(|directives| EnvFilter::try_new(directives).ok())
        .unwrap_or_else(|| EnvFilter::new("info"))
}

/// The first Lambda request id this process logged: lines of that invocation (and of the init
/// phase, before any) are the cold start's.
static FIRST_REQUEST: OnceLock<String> = OnceLock::new();

struct LambdaJson {
    function: Option<String>,
}

impl<S, N> FormatEvent<S, N> for LambdaJson
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut line = Map::new();
        let now = time::OffsetDateTime::now_utc();
        let timestamp = now.format(&time::format_description::well_known::Rfc3339).unwrap_or_default();
        line.insert("timestamp".into(), timestamp.into());
        line.insert("level".into(), event.metadata().level().as_str().into());
        if let Some(scope) = ctx.event_scope() {
            for span in scope.from_root() {
                let extensions = span.extensions();
                let Some(fields) = extensions.get::<FormattedFields<N>>() else { continue };
                if let Ok(Value::Object(map)) = serde_json::from_str::<Value>(fields.as_str()) {
                    line.extend(map);
                }
            }
        }
        event.record(&mut Fields(&mut line));
        if let Some(function) = &self.function {
            line.insert("function".into(), function.clone().into());
            let cold = match line.get("requestId").and_then(Value::as_str) {
                Some(id) => FIRST_REQUEST.get_or_init(|| id.to_owned()) == id,
                None => FIRST_REQUEST.get().is_none(),
            };
            line.insert("coldStart".into(), cold.into());
        }
        writeln!(writer, "{}", Value::Object(line))
    }
}

/// Collects an event's fields into the line.
struct Fields<'a>(&'a mut Map<String, Value>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.0.insert(field.name().into(), value.to_string().into());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.insert(field.name().into(), format!("{value:?}").into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lambda_log_level_wins_over_rust_log() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| (*v).to_owned())
        };
        let shown = |f: EnvFilter| f.max_level_hint().map(|l| l.to_string());
        assert_eq!(
            shown(filter(env(&[("AWS_LAMBDA_LOG_LEVEL", "DEBUG"), ("RUST_LOG", "error")]))).as_deref(),
            Some("debug")
        );
        assert_eq!(shown(filter(env(&[("AWS_LAMBDA_LOG_LEVEL", "FATAL")]))).as_deref(), Some("error"));
        assert_eq!(shown(filter(env(&[("RUST_LOG", "warn")]))).as_deref(), Some("warn"));
        assert_eq!(shown(filter(env(&[]))).as_deref(), Some("info"));
    }
}
