//! Business metrics in CloudWatch Embedded Metric Format (EMF): one JSON object per line on
//! stdout, which CloudWatch Logs turns into metrics without any API call from the function.
//!
//! A small writer of our own rather than a crate: the format is one documented JSON shape
//! (<https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch_Embedded_Metric_Format_Specification.html>),
//! and the crates that write it pull in a metrics facade and its registry for a few counters.
//!
//! Metrics go to the namespace `METRICS_NAMESPACE` (default `RelyingParty`), with the
//! dimension `Function` (the Lambda function's name) and at most one more; a metric counted per
//! CA is counted under `Function` alone as well. Off Lambda (the local server, tests) nothing is
//! written unless a sink is installed.

use serde_json::{json, Map, Value};
use std::sync::OnceLock;

/// Where metric lines go.
type Sink = Box<dyn Fn(&str) + Send + Sync>;

static SINK: OnceLock<Option<Sink>> = OnceLock::new();

/// Sends metric lines to `sink` instead (tests). Only the first call takes effect, and only
/// before the first metric.
pub fn set_sink(sink: impl Fn(&str) + Send + Sync + 'static) {
    let _ = SINK.set(Some(Box::new(sink)));
}

fn sink() -> Option<&'static Sink> {
    SINK.get_or_init(|| {
        std::env::var_os("AWS_LAMBDA_FUNCTION_NAME")
            .map(|_| Box::new(|line: &str| println!("{line}")) as Sink)
    })
    .as_ref()
}

/// The metrics this service emits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    /// A Lambda instance started (once per cold start).
    ColdStart,
    /// Certificate requests handed out by one poll.
    Leases,
    /// A lease ended without a result and its request went back to PENDING.
    Requeued,
    /// A request ran out of attempts.
    DeadRequests,
    /// An answer of 429 (a tenant's rate limit, a full certificate queue).
    TooManyRequests,
    /// An OOB request reached a final state, or a start was refused by a customization
    /// (dimension `Outcome`).
    OobOutcome,
    /// A code-customization run hit its wall-clock limit.
    SandboxTimeouts,
    /// A wake-up was sent, failed, or found its endpoint gone (dimension `Outcome`).
    PushOutcome,
    /// An agent's new CRL was stored: what verifiers fetch is fresh again (dimension `CaId`,
    /// and also under `Function` alone, which the template's alarm watches).
    CrlPublished,
}

impl Metric {
    pub fn name(self) -> &'static str {
        match self {
            Metric::ColdStart => "ColdStart",
            Metric::Leases => "Leases",
            Metric::Requeued => "Requeued",
            Metric::DeadRequests => "DeadRequests",
            Metric::TooManyRequests => "TooManyRequests",
            Metric::OobOutcome => "OobOutcome",
            Metric::SandboxTimeouts => "SandboxTimeouts",
            Metric::PushOutcome => "PushOutcome",
            Metric::CrlPublished => "CrlPublished",
        }
    }

    /// Whether a count with an extra dimension is also a count under `Function` alone: one
    /// alarm then watches the sum (every CA's CRLs), and another can watch one CA's.
    fn also_by_function_alone(self) -> bool {
        matches!(self, Metric::CrlPublished)
    }
}

/// Counts `value` of `metric`, with an optional extra dimension.
pub fn count(metric: Metric, value: u64, dimension: Option<(&str, &str)>) {
    let Some(sink) = sink() else { return };
    let (function, namespace) = labels();
    sink(&line(metric, value, dimension, function, namespace, now_millis()).to_string());
}

/// The function name and namespace, read from the environment once per process.
fn labels() -> &'static (String, String) {
    static LABELS: OnceLock<(String, String)> = OnceLock::new();
    LABELS.get_or_init(|| {
        let function = std::env::var("AWS_LAMBDA_FUNCTION_NAME").unwrap_or_else(|_| "local".into());
        let namespace = std::env::var("METRICS_NAMESPACE").ok().filter(|n| !n.is_empty());
        (function, namespace.unwrap_or_else(|| "RelyingParty".into()))
    })
}

fn now_millis() -> i64 {
    (time::OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000) as i64
}

/// One EMF line.
fn line(
    metric: Metric,
    value: u64,
    dimension: Option<(&str, &str)>,
    function: &str,
    namespace: &str,
    at: i64,
) -> Value {
    let mut dimensions = vec![vec!["Function"]];
    let mut root = Map::new();
    root.insert("Function".into(), function.into());
    if let Some((name, value)) = dimension {
        if metric.also_by_function_alone() {
            dimensions.push(vec!["Function", name]);
        } else {
            dimensions[0].push(name);
        }
        root.insert(name.into(), value.into());
    }
    root.insert(metric.name().into(), value.into());
    root.insert(
        "_aws".into(),
        json!({
            "Timestamp": at,
            "CloudWatchMetrics": [{
                "Namespace": namespace,
                "Dimensions": dimensions,
                "Metrics": [{"Name": metric.name(), "Unit": "Count"}],
            }],
        }),
    );
    Value::Object(root)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_follows_the_emf_specification() {
        let line = line(
            Metric::OobOutcome,
            1,
            Some(("Outcome", "APPROVED")),
            "rp-device-oob-request",
            "RelyingParty/prod",
            1_700_000_000_000,
        );
        assert_eq!(
            line,
            json!({
                "_aws": {"Timestamp": 1_700_000_000_000_i64, "CloudWatchMetrics": [{
                    "Namespace": "RelyingParty/prod",
                    "Dimensions": [["Function", "Outcome"]],
                    "Metrics": [{"Name": "OobOutcome", "Unit": "Count"}]}]},
                "Function": "rp-device-oob-request", "Outcome": "APPROVED", "OobOutcome": 1,
            })
        );
        let plain = super::line(Metric::Leases, 12, None, "f", "n", 1);
        assert_eq!(plain["_aws"]["CloudWatchMetrics"][0]["Dimensions"], json!([["Function"]]));
        assert_eq!(plain["Leases"], 12);
        // Per CA, and under the function alone for the alarm on every CA's sum.
        let crl = super::line(Metric::CrlPublished, 1, Some(("CaId", "5c1f0e9a7b3d2c48")), "f", "n", 1);
        let sets = json!([["Function"], ["Function", "CaId"]]);
        assert_eq!(crl["_aws"]["CloudWatchMetrics"][0]["Dimensions"], sets);
        assert_eq!((&crl["CaId"], &crl["CrlPublished"]), (&json!("5c1f0e9a7b3d2c48"), &json!(1)));
    }
}
