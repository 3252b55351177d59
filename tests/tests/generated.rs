//! What the endpoint table (`rp_shared::http::ENDPOINTS`) writes: each endpoint's function
//! crate under `functions/`, its part of `infra/template.yaml` (function, role, routes, logs,
//! alarm) and its routes in `Cargo.toml`'s `cargo lambda watch` router. Each test fails when a
//! checked-in file differs from what the table writes; `UPDATE_GENERATED=1` rewrites them:
//!
//! ```text
//! UPDATE_GENERATED=1 cargo test -p rp-tests --test generated
//! ```
//!
//! The routes' methods come from the OpenAPI document, which documents each operation of each
//! endpoint's router.

use rp_shared::http::{Endpoint, ENDPOINTS};
use rp_shared::ports::iam::{sns::CREATE_PLATFORM_ENDPOINT, sqs::SEND_MESSAGE};
use rp_tests::watch_path;
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_owned()
}

/// Checks that `path` (from the repository's root) reads `expected`, or writes it there under
/// `UPDATE_GENERATED`; the name of a file that differed.
fn check(path: &str, expected: &str) -> Option<String> {
    let file = root().join(path);
    let found = std::fs::read_to_string(&file).unwrap_or_default();
    if found == expected {
        return None;
    }
    if std::env::var_os("UPDATE_GENERATED").is_some() {
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, expected).unwrap();
        return None;
    }
    Some(path.to_owned())
}

fn assert_all_current(stale: Vec<String>) {
    assert!(
        stale.is_empty(),
        "these files differ from what the endpoint table writes (UPDATE_GENERATED=1 cargo test -p rp-tests \
         --test generated rewrites them): {stale:?}"
    );
}

/// `GET, POST /cc/api/apps`: the methods in alphabetical order, then the paths.
fn routes(e: &Endpoint) -> String {
    let sorted: BTreeSet<_> = e.methods().into_iter().collect();
    format!("{} {}", sorted.into_iter().collect::<Vec<_>>().join(", "), e.paths().join(", "))
}

/// `rp-enroll-complete` → `RpEnrollComplete`.
fn logical_id(name: &str) -> String {
    name.split('-').map(|part| part[..1].to_ascii_uppercase() + &part[1..]).collect()
}

fn manifest(e: &Endpoint) -> String {
    format!(
        r#"[package]
name = "{name}"
version = "0.1.0"
description = "Lambda function: {routes}"
edition.workspace = true
rust-version.workspace = true
license.workspace = true
publish.workspace = true

[[bin]]
name = "{name}"
path = "src/main.rs"
test = false
doctest = false

[dependencies]
rp-shared.workspace = true
tokio.workspace = true
lambda_http.workspace = true
"#,
        name = e.name,
        routes = routes(e),
    )
}

fn main_rs(e: &Endpoint) -> String {
    let routes = routes(e);
    let (what, serve) = match e.name {
        _ if e.grants.table.is_empty() => (
            "It needs no backing service, so it builds no AWS client and links none.",
            "rp_shared::lambda::serve_stateless(router)".to_owned(),
        ),
        _ => (
            "It builds the clients of the services its endpoint declares, and links only those.",
            format!(
                "rp_shared::lambda::serve(router, rp_shared::lambda::ClientSet::{})",
                e.services().name()
            ),
        ),
    };
    // `use ...::router as router` is what rustfmt shortens to `use ...::router`.
    let import = match e.router_name.strip_suffix("::router") {
        Some(_) => e.router_name.to_owned(),
        None => format!("{} as router", e.router_name),
    };
    format!(
        r#"//! Lambda function for {routes}: the shared router of that path behind `lambda_http`.
//! {what} Written from the endpoint table (`rp_shared::http::ENDPOINTS`).

use rp_shared::http::{import};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {{
    {serve}.await
}}
"#
    )
}

#[test]
fn the_function_crates_are_what_the_table_writes() {
    let mut stale = Vec::new();
    for e in ENDPOINTS {
        stale.extend(check(&format!("functions/{}/Cargo.toml", e.name), &manifest(e)));
        stale.extend(check(&format!("functions/{}/src/main.rs", e.name), &main_rs(e)));
    }
    let mut names: Vec<String> = std::fs::read_dir(root().join("functions"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let mut expected: Vec<String> = every_function().map(str::to_owned).collect();
    expected.sort();
    assert_eq!(
        names, expected,
        "one function per endpoint, plus the queue consumer and the $default route's"
    );
    assert_all_current(stale);
}

/// A statement of a role's policy: `actions` on `resources`, after a comment if there is one.
fn statement(out: &mut String, why: Option<&str>, actions: &[&str], resources: &[&str]) {
    if let Some(why) = why {
        writeln!(out, "            # {why}").unwrap();
    }
    out.push_str("            - Effect: Allow\n              Action:\n");
    for action in actions {
        writeln!(out, "                - {action}").unwrap();
    }
    match resources {
        [one] => writeln!(out, "              Resource: {one}").unwrap(),
        many => {
            out.push_str("              Resource:\n");
            for resource in many {
                writeln!(out, "                - {resource}").unwrap();
            }
        }
    }
}

fn policies(e: &Endpoint) -> String {
    let g = &e.grants;
    if g.table.is_empty() {
        return "      Policies: []\n".to_owned();
    }
    let mut out = String::from("      Policies:\n        - Version: \"2012-10-17\"\n          Statement:\n");
    let index = r#"!Sub "${Table.Arn}/index/*""#;
    let table: &[&str] = if g.indexes { &["!GetAtt Table.Arn", index] } else { &["!GetAtt Table.Arn"] };
    statement(&mut out, None, g.table, table);
    if !g.envelope.is_empty() {
        statement(&mut out, g.envelope_why, g.envelope, &["!GetAtt EnvelopeKey.Arn"]);
    }
    if g.queue {
        statement(&mut out, None, &[SEND_MESSAGE], &["!GetAtt CertTimeoutQueue.Arn"]);
    }
    if !g.push.is_empty() {
        let endpoints = r#"!Sub "arn:${AWS::Partition}:sns:${AWS::Region}:${AWS::AccountId}:endpoint/*""#;
        let applications = r#"!Sub "arn:${AWS::Partition}:sns:${AWS::Region}:${AWS::AccountId}:app/*""#;
        let resources: &[&str] = if g.push.contains(&CREATE_PLATFORM_ENDPOINT) {
            &[applications, endpoints]
        } else {
            &[endpoints]
        };
        statement(
            &mut out,
            Some("Mobile push: the apps' SNS platform applications and their endpoints."),
            g.push,
            resources,
        );
    }
    out
}

/// The function, its role, its routes and its log group.
fn function(e: &Endpoint) -> String {
    let id = logical_id(e.name);
    let mut out = format!(
        "  {id}Function:\n    Type: AWS::Serverless::Function\n    Metadata:\n      BuildMethod: rust-cargolambda\n      \
         BuildProperties:\n        Binary: {name}\n    Properties:\n      Description: {routes}\n      CodeUri: ..\n",
        name = e.name,
        routes = routes(e),
    );
    if let Some(why) = e.grants.sandbox {
        writeln!(out, "      # {why}\n      Timeout: 25\n      MemorySize: 512").unwrap();
    }
    out.push_str(&policies(e));
    out.push_str("      Events:\n");
    for (n, path) in e.paths().into_iter().enumerate() {
        for method in e.methods() {
            // `Get`, then `GetProxy` for the pages' greedy path.
            let suffix = if n == 0 { "" } else { "Proxy" };
            let event = method[..1].to_owned() + &method[1..].to_ascii_lowercase() + suffix;
            write!(
                out,
                "        {event}:\n          Type: HttpApi\n          Properties:\n            ApiId: !Ref HttpApi\n            \
                 Path: {path}\n            Method: {method}\n",
            )
            .unwrap();
        }
    }
    write!(
        out,
        "\n  {id}FunctionLogs:\n    Type: AWS::Logs::LogGroup\n    # Logs are kept for their retention while the stack \
         lives, and go with it.\n    DeletionPolicy: Delete\n    UpdateReplacePolicy: Delete\n    Properties:\n      \
         LogGroupName: !Sub \"/aws/lambda/${{{id}Function}}\"\n      RetentionInDays: !Ref LogRetentionInDays\n\n"
    )
    .unwrap();
    out
}

/// The functions that serve no endpoint of the table: the time-out queue's consumer and the
/// `$default` route's.
const NOT_ENDPOINTS: [&str; 2] = ["cert-timeout-consumer", "no-route"];

/// Every function's name: each endpoint's, then the others.
fn every_function() -> impl Iterator<Item = &'static str> {
    ENDPOINTS.iter().map(|e| e.name).chain(NOT_ENDPOINTS)
}

/// A function's alarm: any error or throttle in five minutes.
fn alarm(name: &str) -> String {
    let id = logical_id(name);
    let metric = |metric_id: &str, name: &str| {
        format!(
            "        - Id: {metric_id}\n          ReturnData: false\n          MetricStat:\n            Metric:\n              \
             Namespace: AWS/Lambda\n              MetricName: {name}\n              Dimensions:\n                \
             - Name: FunctionName\n                  Value: !Ref {id}Function\n            Period: 300\n            \
             Stat: Sum\n"
        )
    };
    format!(
        "  {id}FunctionErrorsAlarm:\n    Type: AWS::CloudWatch::Alarm\n    Properties:\n      AlarmDescription: !Sub \
         \"${{{id}Function}} had errors or throttles in 5 minutes.\"\n      Metrics:\n{errors}{throttles}        \
         - Id: total\n          Expression: errors + throttles\n          Label: errors and throttles\n          \
         ReturnData: true\n      EvaluationPeriods: 1\n      Threshold: 0\n      ComparisonOperator: GreaterThanThreshold\n      \
         TreatMissingData: notBreaching\n      AlarmActions:\n        - !If [CreateAlarmTopic, !Ref AlarmTopic, !Ref \
         AlarmTopicArn]\n      OKActions:\n        - !If [CreateAlarmTopic, !Ref AlarmTopic, !Ref AlarmTopicArn]\n\n",
        errors = metric("errors", "Errors"),
        throttles = metric("throttles", "Throttles"),
    )
}

/// `text` with what stands between the lines `begin` and `end` replaced by `body`.
fn between(text: &str, begin: &str, end: &str, body: &str) -> String {
    let start = text.find(begin).unwrap_or_else(|| panic!("the file has the line {begin:?}")) + begin.len();
    let stop = start + text[start..].find(end).unwrap_or_else(|| panic!("the file has the line {end:?}"));
    format!("{}{body}{}", &text[..start], &text[stop..])
}

const FUNCTIONS_BEGIN: &str = "  # Written from the endpoint table: one function per endpoint.\n\n";
const FUNCTIONS_END: &str = "  # End of the functions written from the endpoint table.\n";
const ALARMS_BEGIN: &str = "  # Written from the endpoint table: one alarm per function.\n\n";
const ALARMS_END: &str = "  # End of the alarms written from the endpoint table.\n";

#[test]
fn the_template_declares_what_the_table_writes() {
    let template = std::fs::read_to_string(root().join("infra/template.yaml")).unwrap();
    let functions: String = ENDPOINTS.iter().map(function).collect();
    let alarms: String = every_function().map(alarm).collect();
    let expected = between(&template, FUNCTIONS_BEGIN, FUNCTIONS_END, &functions);
    let expected = between(&expected, ALARMS_BEGIN, ALARMS_END, &alarms);
    assert_all_current(check("infra/template.yaml", &expected).into_iter().collect());
}

/// The alarm on lapsing CRLs watches what the code counts: the metric's name, in the namespace
/// every function writes to, with the `Function` dimension of the function that stores CRLs;
/// and docs/deploying.md's alarm for one CA has the same settings.
#[test]
fn the_crl_alarm_watches_the_metric_the_crl_function_counts() {
    use rp_shared::ports::metrics::Metric;
    let template = std::fs::read_to_string(root().join("infra/template.yaml")).unwrap();
    let start = template.find("\n  CrlNotPublishedAlarm:\n").expect("the CRL alarm");
    let end = template[start + 1..].find("\n\n").map_or(template.len(), |n| start + 1 + n);
    let alarm = &template[start..end];
    let namespace = "!Sub \"RelyingParty/${Stage}\"";
    assert!(template.contains(&format!("METRICS_NAMESPACE: {namespace}")), "the functions' namespace");
    let crl = ENDPOINTS.iter().find(|e| e.path == "/rp/pki/{caId}/crl").expect("the CRL endpoint");
    for line in [
        format!("Namespace: {namespace}"),
        format!("MetricName: {}", Metric::CrlPublished.name()),
        "- Name: Function".to_owned(),
        format!("Value: !Ref {}Function", logical_id(crl.name)),
        "TreatMissingData: breaching".to_owned(),
    ] {
        assert!(alarm.lines().any(|l| l.trim() == line), "the CRL alarm has {line:?}:\n{alarm}");
    }
    // docs/deploying.md's alarm for one CA: the same settings, on the metric's `CaId` too.
    let setting = |name: &str| {
        let line = alarm.lines().map(str::trim).find_map(|l| l.strip_prefix(&format!("{name}: ")));
        line.unwrap_or_else(|| panic!("the CRL alarm's {name}")).to_owned()
    };
    let docs = std::fs::read_to_string(root().join("docs/deploying.md")).unwrap();
    let recipe = docs.split("aws cloudwatch put-metric-alarm").nth(1).expect("the per-CA alarm");
    let recipe = &recipe[..recipe.find("```").unwrap()];
    for flag in [
        format!("--metric-name {}", Metric::CrlPublished.name()),
        format!("--logical-resource-id {}Function", logical_id(crl.name)),
        "Name=CaId,Value=".to_owned(),
        format!("--statistic {}", setting("Statistic")),
        format!("--period {}", setting("Period")),
        format!("--threshold {}", setting("Threshold")),
        format!("--comparison-operator {}", setting("ComparisonOperator")),
        format!("--treat-missing-data {}", setting("TreatMissingData")),
    ] {
        assert!(recipe.contains(&flag), "docs/deploying.md's per-CA alarm has {flag:?}:\n{recipe}");
    }
}

/// `methods` as both generated lists write them: `"GET", "POST"`.
fn quoted(methods: &[&str]) -> String {
    methods.iter().map(|m| format!("\"{m}\"")).collect::<Vec<_>>().join(", ")
}

const ROUTES_BEGIN: &str = "// Written from the endpoint table: every path, its methods and its function.\n";
const ROUTES_END: &str = "// End of the routes written from the endpoint table.\n";

#[test]
fn the_route_table_is_what_the_endpoint_table_writes() {
    let file = "shared/http/src/routes.rs";
    let text = std::fs::read_to_string(root().join(file)).unwrap();
    let mut rows = String::from("#[rustfmt::skip]\npub const ROUTES: &[Route] = &[\n");
    for e in ENDPOINTS {
        let methods = quoted(&e.methods());
        for path in e.paths() {
            let name = e.name;
            writeln!(rows, "    Route {{ function: \"{name}\", path: \"{path}\", methods: &[{methods}] }},")
                .unwrap();
        }
    }
    rows.push_str("];\n");
    assert_all_current(check(file, &between(&text, ROUTES_BEGIN, ROUTES_END, &rows)).into_iter().collect());
}

const WATCH_BEGIN: &str = "[workspace.metadata.lambda.watch]\nrouter = [\n";
const WATCH_END: &str = "]\n";

/// The methods an HTTP API routes: a path's route takes some, and `$default` (the `no-route`
/// function) every other, HEAD included.
const API_METHODS: [&str; 7] = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"];

/// Routes as API Gateway does: each path's methods to its function, its other methods to
/// `no-route`, and every other path to `no-route` too (the `$default` route), so that `cargo
/// lambda watch` answers an unrouted request with the problem document AWS would.
#[test]
fn the_watch_router_routes_what_the_table_declares() {
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let mut routes = String::new();
    for e in ENDPOINTS {
        let own = e.methods();
        let others: Vec<&str> = API_METHODS.into_iter().filter(|m| !own.contains(m)).collect();
        let (own, others) = (quoted(&own), quoted(&others));
        for path in e.paths().into_iter().map(watch_path) {
            writeln!(routes, "  {{ path = \"{path}\", methods = [{own}], function = \"{}\" }},", e.name)
                .unwrap();
            writeln!(routes, "  {{ path = \"{path}\", methods = [{others}], function = \"no-route\" }},")
                .unwrap();
        }
    }
    routes.push_str("  { path = \"/{*path}\", function = \"no-route\" },\n");
    let expected = between(&manifest, WATCH_BEGIN, WATCH_END, &routes);
    assert_all_current(check("Cargo.toml", &expected).into_iter().collect());
}
