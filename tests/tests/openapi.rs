//! The OpenAPI document: generated from the handlers, checked in as `openapi.json`, served by
//! the local server, and naming exactly the routes the functions serve.
//!
//! `UPDATE_OPENAPI=1 cargo test -p rp-tests --test openapi` rewrites the checked-in copy.

use rp_shared::backend;
use rp_shared::domain::{devices, validate};
use rp_shared::http::{self, openapi, AppState, HttpConfig};
use rp_shared::testing::http::TestClient;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_owned()
}

fn document() -> Value {
    serde_json::from_str(openapi::json()).expect("the document is JSON")
}

const METHODS: [&str; 5] = ["get", "put", "post", "delete", "patch"];

/// Every (method, path, operation) of the document.
fn operations(doc: &Value) -> Vec<(String, String, Value)> {
    let mut all = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in METHODS {
            if let Some(operation) = item.get(method) {
                all.push((method.to_uppercase(), path.clone(), operation.clone()));
            }
        }
    }
    all
}

#[test]
fn the_checked_in_document_is_the_generated_one() {
    let path = root().join("openapi.json");
    let generated = openapi::json();
    if std::env::var_os("UPDATE_OPENAPI").is_some() {
        std::fs::write(&path, generated).unwrap();
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == generated,
        "openapi.json differs from the document the code generates; \
         run `UPDATE_OPENAPI=1 cargo test -p rp-tests --test openapi` and commit it"
    );
}

#[test]
fn the_document_names_exactly_the_routes_the_functions_serve() {
    // `[workspace.metadata.lambda.watch]`'s router routes every method of every function (and
    // the others to `no-route`), and a test in events.rs holds it to the functions, the
    // template and the sample events. The console's HTML pages are routed too, and are not in
    // the document.
    let pages: BTreeSet<&str> =
        http::ENDPOINTS.iter().filter(|e| e.pages.is_some()).map(|e| e.name).collect();
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let mut routed = BTreeSet::new();
    for route in rp_tests::watch_routes(&manifest) {
        if route.function == "no-route" || pages.contains(route.function.as_str()) {
            continue;
        }
        routed.extend(route.methods.into_iter().map(|method| (method, route.path.clone())));
    }
    let documented: BTreeSet<_> =
        operations(&document()).into_iter().map(|(method, path, _)| (method, path)).collect();
    assert_eq!(documented, routed, "the document and the routes differ");
    assert_eq!(documented.len(), 68, "every method of every endpoint");
}

#[test]
fn every_operation_is_complete() {
    let doc = document();
    assert_eq!(doc["openapi"], "3.1.0");
    let schemes = doc["components"]["securitySchemes"].as_object().unwrap();
    for scheme in ["admin", "tenantAdmin", "access", "device"] {
        assert_eq!(schemes[scheme]["scheme"], "bearer", "{scheme}");
    }
    let mut ids = BTreeSet::new();
    for (method, path, mut operation) in operations(&doc) {
        let at = format!("{method} {path}");
        let id = operation["operationId"].as_str().unwrap().to_owned();
        assert!(ids.insert(id.clone()), "{at}: operationId {id} is used twice");
        // Problem answers are shared: read them where they are referred to.
        for response in operation["responses"].as_object_mut().unwrap().values_mut() {
            if let Some(name) =
                response["$ref"].as_str().and_then(|r| r.strip_prefix("#/components/responses/"))
            {
                *response = doc["components"]["responses"][name].clone();
            }
        }
        let responses = operation["responses"].as_object().unwrap();
        assert!(responses.keys().any(|s| s.starts_with('2')), "{at} documents its success");
        assert!(responses.contains_key("500"), "{at} documents 500");
        let secured = operation.get("security").is_some_and(|s| !s.as_array().unwrap().is_empty());
        for status in ["401", "403"] {
            assert_eq!(responses.contains_key(status), secured, "{at}: {status} iff it takes a token");
        }
        if secured {
            let examples =
                responses["401"]["content"]["application/problem+json"]["examples"].as_object().unwrap();
            assert!(examples.contains_key("1100001") && examples.contains_key("1100002"), "{at}");
        }
        if operation.get("requestBody").is_some() {
            assert!(responses.contains_key("415"), "{at} documents 415");
        }
        let tenant =
            operation["security"].to_string().contains("tenantAdmin") && path.contains("customization");
        if tenant {
            for (status, response) in responses {
                assert!(response["headers"].get("X-RateLimit-Remaining").is_some(), "{at} {status}");
            }
            assert!(responses.contains_key("429"), "{at} documents 429");
        }
    }
    // The seed's names and types, as a typed client reads them.
    let schemas = &doc["components"]["schemas"];
    let enrolled = &schemas["EnrolledDeviceResponse"];
    assert!(enrolled["required"].as_array().unwrap().contains(&"sessionId".into()));
    assert_eq!(schemas["LoginCertRequest"]["properties"]["machineUserNameWS"]["type"], "string");
    assert_eq!(schemas["ContentView"]["properties"]["description"]["type"], "string");
    let problem = &schemas["Problem"]["properties"];
    assert!(problem["errorCode"].is_object() && problem["type"].is_object());
}

/// Every 409 refuses a write: an operation documents 409 only when its function may write the
/// table (the endpoint table's grants, which the IAM suite holds to the calls each function
/// makes) and, for a GET, when the table says its GET writes (which the IAM suite holds to what
/// each GET writes), and then with `1000409`, a concurrent update won.
#[test]
fn only_an_operation_that_may_write_documents_409() {
    use rp_shared::ports::iam::dynamodb::{DELETE_ITEM, PUT_ITEM, UPDATE_ITEM};
    let doc = document();
    let mut read_only = Vec::new();
    for (method, path, operation) in operations(&doc) {
        let at = format!("{method} {path}");
        let endpoint = http::ENDPOINTS.iter().find(|e| e.path == path).unwrap_or_else(|| panic!("{at}"));
        let writes = endpoint.grants.table.iter().any(|a| [PUT_ITEM, UPDATE_ITEM, DELETE_ITEM].contains(a))
            && (!method.eq_ignore_ascii_case("get") || endpoint.get_writes());
        let conflict = operation["responses"].get("409").map(|r| {
            let name = r["$ref"].as_str().and_then(|r| r.strip_prefix("#/components/responses/"));
            let content =
                &doc["components"]["responses"][name.unwrap()]["content"]["application/problem+json"];
            content["examples"].get("1000409").is_some()
        });
        let stateless = endpoint.grants.table.is_empty();
        assert_eq!(conflict, writes.then_some(true), "{at}: 409, with 1000409, iff it may write");
        if !writes && !stateless {
            read_only.push(at);
        }
    }
    assert!(read_only.len() >= 5, "read-only operations: {read_only:?}");
}

#[test]
fn a_code_customizations_schema_has_the_bounds_the_api_checks() {
    use rp_shared::domain::code::{MAX_DISPLAY_NAME, MAX_SOURCE_BYTES, MAX_TIMEOUT_MS};
    let doc = document();
    let schemas = &doc["components"]["schemas"];
    assert_eq!(schemas["CreateCode"]["required"], serde_json::json!(["displayName", "trigger", "source"]));
    assert_eq!(schemas["UpdateCode"]["minProperties"], 1, "an update gives at least one field");
    assert!(schemas["UpdateCode"].get("required").is_none());
    for body in ["CreateCode", "UpdateCode"] {
        let fields = &schemas[body]["properties"];
        assert_eq!(fields["displayName"]["maxLength"], MAX_DISPLAY_NAME, "{body}");
        // Characters, where the API counts bytes: the schema's bound is the loose one.
        assert_eq!(fields["source"]["maxLength"], MAX_SOURCE_BYTES, "{body}");
        assert_eq!(fields["timeoutMs"]["maximum"], MAX_TIMEOUT_MS, "{body}");
        assert_eq!(fields["trigger"]["$ref"], "#/components/schemas/Trigger", "{body}");
    }
}

#[test]
fn the_event_names_are_the_documents_enums() {
    use rp_shared::domain::events::{NAMES, SERVER_NAMES};
    let doc = document();
    let reported = &doc["components"]["schemas"]["EventReport"]["properties"]["name"]["enum"];
    assert_eq!(*reported, serde_json::json!(NAMES), "a client reports only these");
    let filter = doc["paths"]["/rp/api/events"]["get"]["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "name")
        .unwrap()["schema"]["enum"]
        .clone();
    let listed: Vec<&str> = NAMES.iter().chain(SERVER_NAMES.iter()).copied().collect();
    assert_eq!(filter, serde_json::json!(listed), "a listing filters on these");
}

/// Every schema name `value` refers to.
fn refers_to(value: &Value, into: &mut BTreeSet<String>) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                match inner.as_str().and_then(|r| r.strip_prefix("#/components/schemas/")) {
                    Some(name) if key == "$ref" => {
                        into.insert(name.to_owned());
                    }
                    _ => refers_to(inner, into),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|item| refers_to(item, into)),
        _ => {}
    }
}

/// Every schema a request body refers to, and those they refer to, all the way down.
fn request_schemas(doc: &Value) -> BTreeSet<String> {
    let mut bodies = BTreeSet::new();
    for (_, _, operation) in operations(doc) {
        refers_to(&operation["requestBody"], &mut bodies);
    }
    let mut seen = BTreeSet::new();
    while let Some(name) = bodies.iter().find(|n| !seen.contains(*n)).cloned() {
        refers_to(&doc["components"]["schemas"][&name], &mut bodies);
        seen.insert(name);
    }
    seen
}

#[test]
fn every_identifier_a_request_names_has_the_pattern_the_api_checks() {
    // `AppId::parse` and `devices::identifier`.
    let app = "^[A-Za-z][A-Za-z0-9_.-]{0,63}$";
    let device = "^[A-Za-z0-9._:-]{1,128}$";
    let wanted = |name: &str| match name {
        "appId" | "rpAppId" | "X-Tenant-Id" => Some(app),
        "deviceId" | "machineId" => Some(device),
        _ => None,
    };
    // In a path or a query only: `devices::named_user` (a body's `namedUser` is looked up, as
    // free text) and `Cursor::encode` (base64url).
    let parameter_only = |name: &str| match name {
        "namedUser" => Some(devices::NAMED_USER_PATTERN),
        "cursor" => Some("^[A-Za-z0-9_-]+$"),
        _ => None,
    };
    let doc = document();
    let mut checked = 0;
    for (method, path, operation) in operations(&doc) {
        for parameter in operation["parameters"].as_array().into_iter().flatten() {
            let name = parameter["name"].as_str().unwrap();
            if let Some(pattern) = wanted(name).or_else(|| parameter_only(name)) {
                assert_eq!(parameter["schema"]["pattern"], pattern, "{method} {path} {}", parameter["name"]);
                checked += 1;
            }
        }
    }
    // And the schemas request bodies carry.
    for name in request_schemas(&doc) {
        for (field, schema) in
            doc["components"]["schemas"][&name]["properties"].as_object().into_iter().flatten()
        {
            // An OOB start's machineId is free text: the server never looks it up.
            if let Some(pattern) =
                wanted(field).filter(|_| (name.as_str(), field.as_str()) != ("OobStartRequest", "machineId"))
            {
                assert_eq!(schema["pattern"], pattern, "{name}.{field}");
                checked += 1;
            }
        }
    }
    assert!(checked > 30, "{checked} identifiers checked");
}

/// The pattern the document states for a user name in a path is `devices::named_user`'s rule:
/// each character alone, and at the start, the end and in the middle of a name, is allowed by
/// both or refused by both.
#[test]
fn the_user_name_pattern_is_the_rule_the_api_checks() {
    let pattern = regex::Regex::new(devices::NAMED_USER_PATTERN).unwrap();
    let (mut wrong, mut checked) = (Vec::new(), 0);
    let odd = ['\u{feff}', '\u{2028}', '\u{3000}', '\u{1f600}', '\u{10ffff}'];
    for c in (0..0x3100).filter_map(char::from_u32).chain(odd) {
        for name in [c.to_string(), format!("a{c}"), format!("{c}a"), format!("a{c}b")] {
            let (documented, checks) =
                (pattern.is_match(&name), devices::named_user("namedUser", &name).is_ok());
            if documented != checks {
                wrong.push(format!("{name:?}: the document {documented}, the API {checks}"));
            }
            checked += 1;
        }
    }
    assert_eq!(wrong, Vec::<String>::new());
    assert!(checked > 40_000, "{checked} names checked");
}

/// `schema` with its `$ref`s followed and its `allOf` parts merged into one object schema.
fn resolved(doc: &Value, schema: &Value) -> serde_json::Map<String, Value> {
    if let Some(name) = schema["$ref"].as_str().and_then(|r| r.strip_prefix("#/components/schemas/")) {
        return resolved(doc, &doc["components"]["schemas"][name]);
    }
    let mut whole = schema.as_object().cloned().unwrap_or_default();
    for part in schema["allOf"].as_array().into_iter().flatten() {
        let part = resolved(doc, part);
        let properties = part.get("properties").and_then(Value::as_object).cloned().unwrap_or_default();
        let into = whole.entry("properties").or_insert_with(|| Value::Object(Default::default()));
        into.as_object_mut().unwrap().extend(properties);
    }
    whole
}

#[test]
fn every_link_leads_from_a_value_the_answer_has_to_a_parameter_the_operation_takes() {
    let doc = document();
    let by_id: std::collections::BTreeMap<String, Value> = operations(&doc)
        .into_iter()
        .map(|(_, _, operation)| (operation["operationId"].as_str().unwrap().to_owned(), operation))
        .collect();
    let mut count = 0;
    for openapi::OperationLink { from, status, value, to: targets, parameter } in openapi::LINKS {
        let answer =
            &by_id.get(*from).unwrap_or_else(|| panic!("{from} is an operation"))["responses"][status];
        // The value is a property of the answer's body, at that pointer.
        let pointer = value.strip_prefix("$response.body#/").expect("a pointer into the body");
        let mut schema = answer["content"]["application/json"]["schema"].clone();
        for name in pointer.split('/') {
            schema = resolved(&doc, &schema)
                .get("properties")
                .and_then(|p| p.get(name))
                .cloned()
                .unwrap_or_else(|| panic!("{from} {status}: its body has no {pointer}"));
        }
        for target in *targets {
            let link = &answer["links"][target];
            assert_eq!(link["operationId"], *target, "{from} {status} links to {target}");
            assert_eq!(link["parameters"][parameter], *value, "{from} → {target}");
            let takes = by_id[*target]["parameters"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["name"] == *parameter && p["in"] == "path");
            assert!(takes, "{target} takes {parameter} in its path");
            count += 1;
        }
        assert_eq!(answer["links"].as_object().unwrap().len(), targets.len(), "{from}: no other links");
    }
    assert_eq!(count, 18, "every link of the table is in the document");
}

#[tokio::test]
async fn the_local_server_serves_it() {
    let dir = tempfile::tempdir().unwrap();
    let state = AppState::new(backend::embedded(dir.path()).unwrap(), HttpConfig::default());
    let client = TestClient::new(http::app(state));
    let response = client.send("GET", "/openapi.json", None, None).await;
    assert_eq!(response.status, 200);
    assert_eq!(response.header("content-type"), Some("application/json"));
    assert_eq!(response.text(), openapi::json());
    // A function serves only its own endpoint.
    let state =
        AppState::new(backend::embedded(dir.path().join("f").as_path()).unwrap(), HttpConfig::default());
    let health = TestClient::new(http::function("health", state).unwrap());
    health.send("GET", "/openapi.json", None, None).await.problem(404, 1_000_005);
}

#[test]
fn every_string_and_integer_a_request_body_carries_is_bounded() {
    let doc = document();
    let (mut unbounded, mut checked) = (Vec::new(), 0);
    for name in request_schemas(&doc) {
        bounded(&doc["components"]["schemas"][&name], &name, &mut unbounded, &mut checked);
    }
    assert_eq!(unbounded, Vec::<String>::new(), "request values the document leaves unbounded");
    assert!(checked > 100, "{checked} strings and integers checked");
}

#[test]
fn every_parameter_a_request_names_is_bounded() {
    let doc = document();
    let (mut unbounded, mut checked) = (Vec::new(), 0);
    for (method, path, operation) in operations(&doc) {
        for parameter in operation["parameters"].as_array().into_iter().flatten() {
            let name = parameter["name"].as_str().unwrap();
            bounded(&parameter["schema"], &format!("{method} {path} {name}"), &mut unbounded, &mut checked);
        }
    }
    // A list's cursor is opaque (the API refuses one it did not hand out), and a customization's
    // id and version count up from 1.
    let open = |at: &String| {
        at.ends_with(" cursor") || at.ends_with(" id: its range") || at.ends_with(" version: its range")
    };
    unbounded.retain(|at| !open(at));
    assert_eq!(unbounded, Vec::<String>::new(), "parameters the document leaves unbounded");
    assert!(checked > 80, "{checked} parameters checked");
}

/// Notes in `unbounded` each string (by length, an enum, a pattern of bounded repeats or a date),
/// integer (by a minimum and a maximum), list (by items) and map (by entries and name length) of
/// `schema`, at `at`, that has no bound; counts the strings and integers in `checked`. `$ref`s
/// are the caller's to follow.
fn bounded(schema: &Value, at: &str, unbounded: &mut Vec<String>, checked: &mut usize) {
    let types: Vec<&str> = match &schema["type"] {
        Value::String(kind) => vec![kind.as_str()],
        Value::Array(kinds) => kinds.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if types.contains(&"string") {
        *checked += 1;
        let pattern = schema["pattern"].as_str().unwrap_or_default();
        let repeats_bounded = pattern.starts_with('^')
            && pattern.ends_with('$')
            && !pattern.contains(['*', '+'])
            && !pattern.contains(",}");
        let dated = schema["format"] == "date-time";
        if schema["maxLength"].is_null() && schema["enum"].is_null() && !repeats_bounded && !dated {
            unbounded.push(at.to_owned());
        }
    }
    if types.contains(&"integer") {
        *checked += 1;
        // An agent's error code, and a time in epoch milliseconds, may be any int64 above
        // their minimum.
        let open_above = [".errorCode", ".loginCertExpiryDate"].iter().any(|name| at.ends_with(name));
        if schema["minimum"].is_null() || (schema["maximum"].is_null() && !open_above) {
            unbounded.push(format!("{at}: its range"));
        }
    }
    if types.contains(&"array") {
        if schema["maxItems"].is_null() {
            unbounded.push(format!("{at}: its items"));
        }
        bounded(&schema["items"], &format!("{at}[]"), unbounded, checked);
    }
    if types.contains(&"object") && schema["additionalProperties"].is_object() {
        // A screen's button labels are as many as fit in a content customization's 100 KiB.
        if schema["maxProperties"].is_null() && !at.ends_with(".buttonLabels") {
            unbounded.push(format!("{at}: its entries"));
        }
        match &schema["propertyNames"] {
            Value::Null => unbounded.push(format!("{at}: its names")),
            names => bounded(names, &format!("{at} (a name)"), unbounded, checked),
        }
        bounded(&schema["additionalProperties"], &format!("{at}.*"), unbounded, checked);
    }
    for (name, property) in schema["properties"].as_object().into_iter().flatten() {
        bounded(property, &format!("{at}.{name}"), unbounded, checked);
    }
    for part in ["oneOf", "anyOf", "allOf"].iter().flat_map(|k| schema[*k].as_array().into_iter().flatten()) {
        bounded(part, at, unbounded, checked);
    }
}

/// A value the document bounds, in (or, where the sample leaves it out, beside) a sample event's
/// body: a string by length (and by nothing the other tests hold: a format, an enum, a pattern
/// other than a text's), an integer by range, an array by how many items it holds. Where it is
/// or goes (`pointer`), what a refusal names it (`field`), its bounds.
struct Bounded {
    pointer: String,
    field: String,
    kind: Kind,
    min: Option<i64>,
    max: Option<i64>,
    /// A map's entry name (`pointer` is the entry's, `field` the map's), not a value.
    name: bool,
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Integer,
    /// A string, with the text pattern (no control characters) or without it.
    Text {
        controls_refused: bool,
    },
    /// An array of strings, by how many it holds.
    Items,
}

impl Bounded {
    /// The value of this kind with `n` as its length or its value.
    fn of(&self, n: i64) -> Value {
        match self.kind {
            Kind::Integer => Value::from(n),
            Kind::Text { .. } => Value::String("a".repeat(n as usize)),
            Kind::Items => (0..n).map(|i| Value::String(format!("a{i}"))).collect(),
        }
    }

    /// The values to send, each with whether the API must refuse it naming the field: one past
    /// either bound (refused), exactly at each (not refused for its form, unless `parsed`: no run
    /// of `a`s is valid), and for a text a control character within its bounds (refused if the
    /// document says so, else not).
    fn variants(&self, parsed: bool) -> Vec<(Value, bool)> {
        let mut variants = Vec::new();
        if let Some(max) = self.max {
            variants.push((self.of(max + 1), true));
            variants.extend((!parsed).then(|| (self.of(max), false)));
        }
        if let Some(min) = self.min.filter(|&min| self.kind == Kind::Integer || min > 0) {
            variants.push((self.of(min - 1), true));
            variants.extend((!parsed).then(|| (self.of(min), false)));
        }
        if let Kind::Text { controls_refused } = self.kind {
            let length = self.min.unwrap_or(0).max(1) as usize;
            let text = format!("\u{1}{}", "a".repeat(length - 1));
            variants.extend((controls_refused || !parsed).then_some((Value::String(text), controls_refused)));
        }
        variants
    }
}

/// `schema` (a property's) with a `$ref` followed and a nullable `oneOf` reduced to its
/// non-null part.
fn concrete(doc: &Value, schema: &Value) -> Value {
    if let Some(parts) = schema["oneOf"].as_array() {
        if let Some(part) = parts.iter().find(|p| p["type"] != "null") {
            return concrete(doc, part);
        }
    }
    Value::Object(resolved(doc, schema))
}

/// Every bounded value of `value` (a body, or a part of it; `None` where the body leaves a
/// property out) against `schema`.
fn bounded_values(
    doc: &Value,
    value: Option<&Value>,
    schema: &Value,
    at: (&str, &str),
    into: &mut Vec<Bounded>,
) {
    let (pointer, field) = at;
    let schema = concrete(doc, schema);
    let is = |kind: &str| match &schema["type"] {
        Value::Array(kinds) => kinds.iter().any(|k| k == kind),
        one => one == kind,
    };
    let bound = |key: &str| schema[key].as_i64();
    let at = |kind, min, max| {
        let (pointer, field) = (pointer.to_owned(), field.to_owned());
        Bounded { pointer, field, kind, min, max, name: false }
    };
    if let (Some(Value::Array(_)) | None, true, Some(max)) = (value, is("array"), bound("maxItems")) {
        // The variants' items are strings: a bounded array of anything else needs its own.
        let items = concrete(doc, &schema["items"]);
        assert_eq!(
            items["type"], "string",
            "{pointer}: a bounded array of {items}: say how to build its items"
        );
        into.push(at(Kind::Items, Some(bound("minItems").unwrap_or(0)), Some(max)));
    }
    match value {
        Some(Value::String(_)) | None if is("string") => {
            if let (Some(max), true) =
                (bound("maxLength"), schema["format"].is_null() && schema["enum"].is_null())
            {
                let min = bound("minLength").unwrap_or(0);
                let text = validate::text_pattern();
                match schema["pattern"].as_str() {
                    None => into.push(at(Kind::Text { controls_refused: false }, Some(min), Some(max))),
                    Some(pattern) if pattern == text => {
                        into.push(at(Kind::Text { controls_refused: true }, Some(min), Some(max)))
                    }
                    Some(_) => {}
                }
            }
        }
        Some(Value::Number(_)) | None
            if is("integer") && (bound("minimum").is_some() || bound("maximum").is_some()) =>
        {
            into.push(at(Kind::Integer, bound("minimum"), bound("maximum")));
        }
        Some(Value::Object(members)) => {
            let properties = schema["properties"].as_object().cloned().unwrap_or_default();
            let entry_names = concrete(doc, &schema["propertyNames"]);
            let entry = members.keys().find(|name| !properties.contains_key(*name));
            if let (Some(entry), Some(max)) = (entry, entry_names["maxLength"].as_i64()) {
                let controls_refused =
                    entry_names["pattern"].as_str() == Some(validate::text_pattern().as_str());
                into.push(Bounded {
                    pointer: format!("{pointer}/{entry}"),
                    field: field.to_owned(),
                    kind: Kind::Text { controls_refused },
                    min: Some(entry_names["minLength"].as_i64().unwrap_or(0)),
                    max: Some(max),
                    name: true,
                });
            }
            let names: BTreeSet<&String> = members.keys().chain(properties.keys()).collect();
            for name in names {
                let of = properties.get(name).unwrap_or(&schema["additionalProperties"]);
                let at = (
                    format!("{pointer}/{name}"),
                    if field.is_empty() { name.clone() } else { format!("{field}.{name}") },
                );
                bounded_values(doc, members.get(name), of, (&at.0, &at.1), into);
            }
        }
        Some(Value::Array(items)) => {
            if let Some(first) = items.first() {
                bounded_values(doc, Some(first), &schema["items"], (&format!("{pointer}/0"), field), into);
            }
        }
        _ => {}
    }
}

/// `body` with the map entry at `pointer` renamed `name`.
fn with_name(body: &Value, pointer: &str, name: &str) -> Value {
    let mut body = body.clone();
    let (map, old) = pointer.rsplit_once('/').unwrap();
    let entries = body.pointer_mut(map).and_then(Value::as_object_mut).unwrap();
    let value = entries.remove(old).unwrap();
    entries.insert(name.to_owned(), value);
    body
}

/// `body` with `value` at `pointer`, the last step of which may be a property `body` lacks.
fn with_value(body: &Value, pointer: &str, value: Value) -> Value {
    let mut body = body.clone();
    let (parent, name) = pointer.rsplit_once('/').unwrap();
    match body.pointer_mut(parent).unwrap() {
        Value::Object(members) => {
            members.insert(name.to_owned(), value);
        }
        Value::Array(items) => items[name.parse::<usize>().unwrap()] = value,
        other => panic!("{pointer}: {other} holds nothing"),
    }
    body
}

/// Strings the API parses (a signature, a P-256 key, base64 of at most 8 KiB): no run of `a`s
/// is one at every length within the bounds.
const PARSED: [&str; 4] = ["signature", "signingPublicKey", "keyAgreementPublicKey", "recoveryKeys"];

/// The document states the bounds the API checks. For every bounded string, integer, array and
/// map entry name in (or beside) a sample event's body (events/), the sample with that value one
/// past either bound answers 400 naming the field; with it exactly at each bound it answers
/// anything but an invalid-field 400 naming it (it may still be refused for what it names: no
/// user is called `aaa`); and with a control character in a text, it is refused where the
/// document's pattern says so and not refused where it does not. Each variant runs through the
/// function's router, as the Lambda runtime parses the event, on a copy of one store seeded by
/// `seed-samples`.
#[tokio::test]
async fn every_bound_the_document_states_is_the_one_the_api_checks() {
    let doc = document();
    let seeded = seeded_store().await;
    let (mut wrong, mut checked) = (Vec::new(), 0);
    for Sample { name, event, function, body, body_schema, .. } in request_samples(&doc) {
        let Some(body) = body else { continue };
        let (name, function) = (name.as_str(), function.as_str());
        let mut values = Vec::new();
        bounded_values(&doc, Some(&body), &body_schema, ("", ""), &mut values);
        for value in values {
            for (sent, refused) in value.variants(PARSED.contains(&value.field.as_str())) {
                let mut event = event.clone();
                let changed = match (&sent, value.name) {
                    (Value::String(name), true) => with_name(&body, &value.pointer, name),
                    _ => with_value(&body, &value.pointer, sent.clone()),
                };
                event["body"] = Value::String(changed.to_string());
                let (status, answer) = run_event(seeded.path(), function, &event).await;
                let names_it = status == 400
                    && (refused || answer["type"] == "/problems/invalid-field")
                    && answer["field"].as_str().is_some_and(|f| same_field(f, &value.field));
                if names_it != refused {
                    let (min, max) = (value.min.map(|n| n.to_string()), value.max.map(|n| n.to_string()));
                    let sent = match &sent {
                        Value::String(text) if text.starts_with('a') => format!("{} characters", text.len()),
                        Value::Array(items) => format!("{} items", items.len()),
                        other => format!("{other:.40}"),
                    };
                    wrong.push(format!(
                        "{name} {}{}: {sent} (document: {}..={}): {status} {answer}",
                        value.field,
                        if value.name { " (an entry's name)" } else { "" },
                        min.unwrap_or_default(),
                        max.unwrap_or_default(),
                    ));
                }
                checked += 1;
            }
        }
    }
    assert_eq!(wrong, Vec::<String>::new(), "bounds the document and the API disagree on");
    assert!(checked > 60, "{checked} variants checked");
}

/// Whether a refusal's `field` names the string at `field`: the same, or one of the two is the
/// other's list or map (`pinIds` for `pinIds[0]`, `additionalDetails` for
/// `additionalDetails.reason`).
fn same_field(refused: &str, field: &str) -> bool {
    within(refused, field) || within(field, refused)
}

/// Whether the field `inner` is `outer` or lies within it (`offline.tokens`, `pinIds[0]`).
fn within(inner: &str, outer: &str) -> bool {
    inner.strip_prefix(outer).is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
}

/// A sample event (events/) of an API Gateway request: its file name, the event, the function
/// it is for, and the document's path template and operation that serve it.
struct Sample {
    name: String,
    event: Value,
    function: String,
    template: String,
    operation: Value,
    /// The event's body, parsed: every sample body is JSON, sent as text.
    body: Option<Value>,
    /// The schema of the operation's JSON request body (`null` where it takes none).
    body_schema: Value,
}

/// Every sample event of an API Gateway request to a route, in name order; each is an HTTP API
/// (v2) event of an operation of `doc`.
fn request_samples(doc: &Value) -> Vec<Sample> {
    let mut samples: Vec<Sample> = std::fs::read_dir(root().join("events"))
        .unwrap()
        .filter_map(|entry| {
            let path = entry.unwrap().path();
            let event: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let method = event.get("requestContext")?["http"]["method"].as_str()?.to_owned();
            assert_eq!(event["version"], "2.0", "{name}: an API Gateway v2 event");
            // A request no route takes (the no-route function's) is no operation's.
            if event["routeKey"] == "$default" {
                return None;
            }
            let path = event["rawPath"].as_str().unwrap();
            // The console's pages are HTML, not in the document.
            let page = |e: &&http::Endpoint| {
                e.pages.is_some() && (path == e.path || path.starts_with(&format!("{}/", e.path)))
            };
            if http::ENDPOINTS.iter().any(|e| page(&e)) {
                return None;
            }
            let template = template_of(doc, &method, path).unwrap_or_else(|| panic!("{name}: no operation"));
            let operation = doc["paths"][&template][method.to_lowercase()].clone();
            let function = name.split('.').next().unwrap().to_owned();
            assert_ne!(event["isBase64Encoded"], true, "{name}: a JSON sample body is sent as text");
            let body = event["body"].as_str().map(|text| serde_json::from_str(text).expect("a JSON body"));
            let body_schema = operation["requestBody"]["content"]["application/json"]["schema"].clone();
            Some(Sample { name, event, function, template, operation, body, body_schema })
        })
        .collect();
    samples.sort_by(|a, b| a.name.cmp(&b.name));
    samples
}

/// An embedded store's directory after `seed-samples`, closed.
async fn seeded_store() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    rp_shared::samples::seed(&backend::embedded(dir.path()).unwrap()).await.expect("seed-samples");
    dir
}

/// Runs a sample `event` through `function`'s router on a copy of the `seeded` store; the
/// status and the answer's JSON (its text, where it is not JSON).
async fn run_event(seeded: &Path, function: &str, event: &Value) -> (u16, Value) {
    let dir = tempfile::tempdir().unwrap();
    for file in std::fs::read_dir(seeded).unwrap() {
        let file = file.unwrap();
        std::fs::copy(file.path(), dir.path().join(file.file_name())).unwrap();
    }
    let backend = backend::embedded(dir.path()).unwrap();
    let router = http::function(function, AppState::new(backend, HttpConfig::default())).expect("a router");
    let response = TestClient::new(router).event(&event.to_string()).await;
    let json = response.header("content-type").is_some_and(|kind| kind.contains("json"));
    (response.status.as_u16(), if json { response.json() } else { Value::from(response.text()) })
}

/// The document's path template of `method` on the concrete `path`.
fn template_of(doc: &Value, method: &str, path: &str) -> Option<String> {
    let segments: Vec<&str> = path.split('/').collect();
    doc["paths"].as_object()?.iter().find_map(|(template, item)| {
        let parts: Vec<&str> = template.split('/').collect();
        let matches = parts.len() == segments.len()
            && parts.iter().zip(&segments).all(|(t, s)| t == s || (t.starts_with('{') && !s.is_empty()));
        (matches && item.get(method.to_lowercase()).is_some()).then(|| template.clone())
    })
}

/// Whether `c` is in the regex character class `class` (the part between the brackets: single
/// characters and `x-y` ranges; a `-` first or last is itself).
fn in_class(class: &str, c: char) -> bool {
    let chars: Vec<char> = class.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        if i + 2 < chars.len() && chars[i + 1] == '-' {
            if (chars[i]..=chars[i + 2]).contains(&c) {
                return true;
            }
            i += 3;
        } else {
            if chars[i] == c {
                return true;
            }
            i += 1;
        }
    }
    false
}

/// A string parameter's form: an optional first character's class, then `min..=max` characters
/// of another, as a pattern `^[first][rest]{min,max}$` or `^[rest]{n}$` states it, or a plain
/// length (also beside a pattern of another shape: the text's, a user name's).
struct Form {
    first: Option<String>,
    rest: String,
    min: usize,
    max: usize,
}

impl Form {
    fn of(schema: &Value) -> Option<Form> {
        let by_pattern = |pattern: &str| {
            let inner = pattern.strip_prefix('^')?.strip_suffix('$')?;
            let (classes, counts) = inner.strip_suffix('}')?.rsplit_once('{')?;
            let (min, max) = match counts.split_once(',') {
                Some((min, max)) => (min.parse().ok()?, max.parse().ok()?),
                None => (counts.parse().ok()?, counts.parse().ok()?),
            };
            let classes: Vec<&str> = classes.strip_prefix('[')?.strip_suffix(']')?.split("][").collect();
            match classes[..] {
                [rest] => Some(Form { first: None, rest: rest.to_owned(), min, max }),
                [first, rest] => {
                    Some(Form { first: Some(first.to_owned()), rest: rest.to_owned(), min, max })
                }
                _ => None,
            }
        };
        if let Some(form) = schema["pattern"].as_str().and_then(by_pattern) {
            return Some(form);
        }
        let max = schema["maxLength"].as_u64()? as usize;
        let min = schema["minLength"].as_u64().unwrap_or(0) as usize;
        Some(Form { first: None, rest: String::new(), min, max })
    }

    /// A value of this form with `n` characters after the first.
    fn value(&self, n: usize) -> String {
        let pick = |class: &str| {
            ['a', '0', 'A', '_'].into_iter().find(|&c| class.is_empty() || in_class(class, c)).unwrap()
        };
        let first = self.first.as_deref().map(|class| pick(class).to_string()).unwrap_or_default();
        first + &pick(&self.rest).to_string().repeat(n)
    }

    /// The values to send, each with what the API must answer: one past either bound, refused;
    /// exactly at each, as it answers a value between them; and for a pattern, a character
    /// outside it, refused. No value is empty (an empty path segment names another route).
    fn variants(&self) -> Vec<(String, Expect)> {
        let prefix = usize::from(self.first.is_some());
        let like = (self.max - self.min >= 2).then(|| self.value((self.min + self.max) / 2));
        let within = || Expect::WellFormed { like: like.clone() };
        let mut variants =
            vec![(self.value(self.max + 1), Expect::Refused), (self.value(self.max), within())];
        if self.min + prefix > 0 {
            variants.push((self.value(self.min), within()));
        }
        if self.min + prefix > 1 {
            variants.push((self.value(self.min - 1), Expect::Refused));
        }
        if !self.rest.is_empty() {
            let mut outside = self.value(self.min.max(1));
            outside.pop();
            variants.push((outside + "!", Expect::Refused));
        }
        variants
    }
}

/// What the API must answer a parameter's value with.
#[derive(Clone, PartialEq)]
enum Expect {
    /// An answer in the 400s.
    Refused,
    /// The answer it gives `like` (a value of the same form between the bounds): the same
    /// status, problem type and error code. Without one, anything but a 5xx or an invalid-field
    /// 400 naming the parameter.
    WellFormed { like: Option<String> },
}

/// The values to send for a parameter of `schema`, each with what the API must answer: for an
/// enum each of its values and one outside it, for a date-time two RFC 3339 times and a date
/// and a word that are not; none for an opaque cursor.
fn parameter_variants(schema: &Value) -> Vec<(String, Expect)> {
    if schema["type"] == "integer" {
        let (min, max) = (schema["minimum"].as_i64(), schema["maximum"].as_i64());
        let like = match (min, max) {
            (Some(min), Some(max)) if max - min >= 2 => Some(((min + max) / 2).to_string()),
            _ => None,
        };
        let mut variants = Vec::new();
        for (bound, past) in [(min, min.map(|n| n - 1)), (max, max.map(|n| n + 1))] {
            if let (Some(bound), Some(past)) = (bound, past) {
                variants.push((past.to_string(), Expect::Refused));
                variants.push((bound.to_string(), Expect::WellFormed { like: like.clone() }));
            }
        }
        return variants;
    }
    let well_formed = |value: &str| (value.to_owned(), Expect::WellFormed { like: None });
    let refused = |value: &str| (value.to_owned(), Expect::Refused);
    if let Some(names) = schema["enum"].as_array() {
        let mut variants: Vec<_> = names.iter().map(|name| well_formed(name.as_str().unwrap())).collect();
        variants.push(refused("NOT_ONE_OF_THEM"));
        return variants;
    }
    match schema["format"].as_str() {
        Some("date-time") => {
            vec![
                well_formed("2026-11-24T09:30:00Z"),
                well_formed("2026-11-24T09:30:00.250+01:00"),
                refused("2026-11-24"),
                refused("yesterday"),
            ]
        }
        Some(other) => panic!("a parameter of format {other}: say what bounds it"),
        None => Form::of(schema).map(|form| form.variants()).unwrap_or_default(),
    }
}

/// `event` (an API Gateway v2 event) with its parameter `name` in `location` set to `value`;
/// `template` is its path's.
fn with_parameter(event: &Value, template: &str, location: &str, name: &str, value: &str) -> Value {
    let mut event = event.clone();
    match location {
        "path" => {
            let path = event["rawPath"].as_str().unwrap().to_owned();
            let segments: Vec<&str> = path
                .split('/')
                .zip(template.split('/'))
                .map(|(segment, part)| if part == format!("{{{name}}}") { value } else { segment })
                .collect();
            let path = segments.join("/");
            event["rawPath"] = Value::from(path.clone());
            event["requestContext"]["http"]["path"] = Value::from(path);
            event["pathParameters"][name] = Value::from(value);
        }
        "query" => {
            let raw = event["rawQueryString"].as_str().unwrap_or_default();
            let mut pairs: Vec<(String, String)> = raw
                .split('&')
                .filter(|pair| !pair.is_empty())
                .map(|pair| {
                    let (key, v) = pair.split_once('=').unwrap_or((pair, ""));
                    (key.to_owned(), v.to_owned())
                })
                .filter(|(key, _)| key != name)
                .collect();
            pairs.push((name.to_owned(), value.to_owned()));
            // The values sent are URL-safe but for a time's `+` (a space in a query).
            let raw: Vec<String> =
                pairs.iter().map(|(key, v)| format!("{key}={}", v.replace('+', "%2B"))).collect();
            event["rawQueryString"] = Value::from(raw.join("&"));
            let parameters: serde_json::Map<String, Value> =
                pairs.into_iter().map(|(key, v)| (key, Value::from(v))).collect();
            event["queryStringParameters"] = Value::Object(parameters);
        }
        "header" => {
            event["headers"][name.to_lowercase()] = Value::from(value);
        }
        other => panic!("a parameter in {other}"),
    }
    event
}

/// The document states the bounds the API checks on parameters too. For every bounded path,
/// query and header parameter of a sample event's operation (events/), the sample with that
/// parameter one past either bound, or with a character its pattern leaves out, is refused (an
/// answer in the 400s); with it exactly at each bound it is answered as a value between the
/// bounds is (the same status, problem type and error code: no app is called `a` nor `aaaa`, so
/// both may be refused for what they name), or where the bounds leave nothing between them,
/// with anything but a 5xx or an invalid-field 400 naming it. An enum's values and a
/// date-time's times are sent likewise, with values outside them. Run as the body bounds are,
/// through the function's router on a seeded store.
#[tokio::test]
async fn every_bound_the_document_states_on_a_parameter_is_the_one_the_api_checks() {
    let doc = document();
    let seeded = seeded_store().await;
    let (mut wrong, mut checked) = (Vec::new(), 0);
    for Sample { name, event, function, template, operation, .. } in request_samples(&doc) {
        let (name, function) = (name.as_str(), function.as_str());
        for parameter in operation["parameters"].as_array().into_iter().flatten() {
            let (location, parameter_name) =
                (parameter["in"].as_str().unwrap(), parameter["name"].as_str().unwrap());
            let answer_to = |value: &str| {
                let event = with_parameter(&event, &template, location, parameter_name, value);
                let seeded = seeded.path().to_owned();
                async move { run_event(&seeded, function, &event).await }
            };
            let mut likes: BTreeMap<String, (u16, Value)> = BTreeMap::new();
            for (sent, expect) in parameter_variants(&parameter["schema"]) {
                let (status, answer) = answer_to(&sent).await;
                let names_it = status == 400
                    && answer["type"] == "/problems/invalid-field"
                    && answer["field"].as_str().is_some_and(|f| f.eq_ignore_ascii_case(parameter_name));
                let kind = |(status, answer): &(u16, Value)| {
                    (*status, answer["type"].clone(), answer["errorCode"].clone())
                };
                let (right, beside) = match &expect {
                    Expect::Refused => ((400..500).contains(&status), String::new()),
                    Expect::WellFormed { like: None } => (status < 500 && !names_it, String::new()),
                    Expect::WellFormed { like: Some(like) } => {
                        if !likes.contains_key(like) {
                            likes.insert(like.clone(), answer_to(like).await);
                        }
                        let other = &likes[like];
                        let right = kind(other) == kind(&(status, answer.clone())) && status < 500;
                        (right, format!(", where {} characters got {} {}", like.len(), other.0, other.1))
                    }
                };
                if !right {
                    let shown =
                        if sent.len() > 12 { format!("{} characters", sent.len()) } else { sent.clone() };
                    let expected =
                        if expect == Expect::Refused { "must be refused" } else { "within the bounds" };
                    wrong.push(format!(
                        "{name} {location} {parameter_name} = {shown} ({expected}): {status} {answer}{beside}"
                    ));
                }
                checked += 1;
            }
        }
    }
    assert_eq!(wrong, Vec::<String>::new(), "parameter bounds the document and the API disagree on");
    assert!(checked > 200, "{checked} variants checked");
}

/// Notes in `into` each member of `value` (at `at`) that `schema` does not state: an object's
/// property that is neither among its `properties` (of every `allOf`, `oneOf` or `anyOf` part)
/// nor an entry of a map it states (`additionalProperties`). An object schema that states no
/// properties and no map is free-form.
fn undocumented(doc: &Value, value: &Value, schema: &Value, at: &str, into: &mut Vec<String>) {
    let schema = Value::Object(resolved(doc, schema));
    let parts: Vec<Value> = ["allOf", "oneOf", "anyOf"]
        .iter()
        .flat_map(|key| schema[*key].as_array().cloned().unwrap_or_default())
        .map(|part| Value::Object(resolved(doc, &part)))
        .chain([schema.clone()])
        .collect();
    match value {
        Value::Object(members) => {
            let of_object =
                |part: &&Value| part["properties"].is_object() || part["additionalProperties"].is_object();
            let stating: Vec<&Value> = parts.iter().filter(of_object).collect();
            if stating.is_empty() {
                return;
            }
            for (name, member) in members {
                let at = format!("{at}.{name}");
                let property = stating.iter().find_map(|part| part["properties"].get(name));
                let entry = stating.iter().find(|part| part["additionalProperties"].is_object());
                match (property, entry) {
                    (Some(property), _) => undocumented(doc, member, property, &at, into),
                    (None, Some(map)) => undocumented(doc, member, &map["additionalProperties"], &at, into),
                    (None, None) => into.push(at),
                }
            }
        }
        Value::Array(items) => {
            if let Some(items_schema) = parts.iter().find_map(|part| part.get("items")) {
                for (i, item) in items.iter().enumerate() {
                    undocumented(doc, item, items_schema, &format!("{at}[{i}]"), into);
                }
            }
        }
        _ => {}
    }
}

/// The document states all an answer carries: every sample event's answer (events/, run as the
/// drift tests run them, once each on a copy of the seeded store), success or problem, has no
/// member its status's schema leaves out, at any depth. Schemathesis checks that an answer is
/// valid against its schema, which an undocumented member passes where a schema does not close
/// its object; this closes them all.
#[tokio::test]
async fn every_answer_carries_only_what_the_document_states() {
    let doc = document();
    let seeded = seeded_store().await;
    let (mut wrong, mut checked) = (Vec::new(), 0);
    for Sample { name, event, function, operation, .. } in request_samples(&doc) {
        let (status, answer) = run_event(seeded.path(), &function, &event).await;
        if !answer.is_object() && !answer.is_array() {
            continue;
        }
        let response = Value::Object(resolved(&doc, &operation["responses"][status.to_string()]));
        let content = &response["content"];
        let schema = ["application/json", "application/problem+json"]
            .iter()
            .find_map(|kind| content.get(*kind).map(|c| c["schema"].clone()))
            .unwrap_or_else(|| panic!("{name}: no schema for its {status}"));
        let mut found = Vec::new();
        undocumented(&doc, &answer, &schema, "", &mut found);
        wrong.extend(found.into_iter().map(|at| format!("{name} ({status}): {at}")));
        // And the walk sees a member the document does not state, where the schema states any.
        if let Value::Object(members) = &answer {
            let mut more = members.clone();
            more.insert("notInTheDocument".into(), Value::Bool(true));
            let mut found = Vec::new();
            undocumented(&doc, &Value::Object(more), &schema, "", &mut found);
            if found != [".notInTheDocument"] {
                wrong.push(format!("{name} ({status}): an added member was not seen: {found:?}"));
            }
        }
        checked += 1;
    }
    assert_eq!(wrong, Vec::<String>::new(), "answer members the document does not state");
    assert!(checked > 40, "{checked} answers checked");
}

/// A value in a request body, where it is, and what the document says of it.
struct Node {
    pointer: String,
    /// Its name as a refusal names it (`offline.tokens`, `pinIds[0]`).
    field: String,
    value: Value,
    /// Its schema, a `$ref` followed and a nullable `oneOf` reduced.
    schema: Value,
    /// As its object states it, where it is a property: the property's schema and whether the
    /// object requires it (`None` for the body itself, a map's entry, a list's item).
    stated: Option<(Value, bool)>,
}

impl Node {
    /// An object with stated properties: whether its schema closes it (`additionalProperties:
    /// false`). `None` for anything else (a map of entries of a stated schema is neither).
    fn closed(&self) -> Option<bool> {
        let properties = self.schema["properties"].as_object().is_some_and(|p| !p.is_empty());
        (self.value.is_object() && properties).then(|| self.schema["additionalProperties"] == false)
    }

    /// A property: whether its object requires it and its schema allows `null` (a type list
    /// with it, a `oneOf` part of it, or a schema that constrains nothing, `{}`). `None` for
    /// anything else, and for a property whose description makes it required on a condition
    /// ("Required for an `access` token"): that is the description's to state.
    fn member(&self) -> Option<(bool, bool)> {
        let (property, required) = self.stated.as_ref()?;
        if property["description"].as_str().is_some_and(|text| text.starts_with("Required for")) {
            return None;
        }
        let constrains = ["type", "$ref", "oneOf", "anyOf", "allOf", "enum", "const"]
            .iter()
            .any(|key| property.get(*key).is_some());
        let nullable = property["type"].as_array().is_some_and(|kinds| kinds.iter().any(|k| k == "null"))
            || property["oneOf"].as_array().is_some_and(|parts| parts.iter().any(|p| p["type"] == "null"))
            || !constrains;
        Some((*required, nullable))
    }
}

/// Every value of `value` (a body, or a part of it, at `pointer`, named `field`) against
/// `schema` (`stated` by its object, if a property), itself first, at any depth; a list's first
/// item stands for all.
fn nodes(
    doc: &Value,
    value: &Value,
    schema: &Value,
    at: (&str, &str),
    stated: Option<(Value, bool)>,
    into: &mut Vec<Node>,
) {
    let (pointer, field) = at;
    let schema = concrete(doc, schema);
    into.push(Node {
        pointer: pointer.to_owned(),
        field: field.to_owned(),
        value: value.clone(),
        schema: schema.clone(),
        stated,
    });
    match value {
        Value::Object(members) => {
            let properties = schema["properties"].as_object().cloned().unwrap_or_default();
            let required: BTreeSet<&str> =
                schema["required"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
            for (name, member) in members {
                let at = (
                    format!("{pointer}/{name}"),
                    if field.is_empty() { name.clone() } else { format!("{field}.{name}") },
                );
                let (of, stated) = match properties.get(name) {
                    Some(property) => (property, Some((property.clone(), required.contains(name.as_str())))),
                    None => (&schema["additionalProperties"], None),
                };
                nodes(doc, member, of, (&at.0, &at.1), stated, into);
            }
        }
        Value::Array(items) => {
            if let Some(first) = items.first() {
                nodes(
                    doc,
                    first,
                    &schema["items"],
                    (&format!("{pointer}/0"), &format!("{field}[0]")),
                    None,
                    into,
                );
            }
        }
        _ => {}
    }
}

/// The document says which request objects are closed, and the API holds to it: every sample
/// event's body (events/) with a member added to one of its objects (each in turn, at any depth)
/// is refused naming that member (a 400) where the object's schema closes it
/// (`additionalProperties: false`), and not refused for it where the schema leaves it open.
#[tokio::test]
async fn a_request_body_is_closed_where_the_document_says_so() {
    let doc = document();
    let seeded = seeded_store().await;
    let (mut wrong, mut checked) = (Vec::new(), 0);
    const ADDED: &str = "notInTheDocument";
    for Sample { name, event, function, body, body_schema, .. } in request_samples(&doc) {
        let Some(body) = body else { continue };
        let mut found = Vec::new();
        nodes(&doc, &body, &body_schema, ("", ""), None, &mut found);
        for (pointer, closed) in
            found.into_iter().filter_map(|node| Some((node.pointer.clone(), node.closed()?)))
        {
            let mut event = event.clone();
            let changed = with_value(&body, &format!("{pointer}/{ADDED}"), Value::Bool(true));
            event["body"] = Value::String(changed.to_string());
            let (status, answer) = run_event(seeded.path(), &function, &event).await;
            let refused = status == 400 && answer["field"].as_str().is_some_and(|f| f.contains(ADDED));
            if refused != closed {
                let document = if closed { "closed" } else { "open" };
                wrong.push(format!("{name} at '{pointer}' (the document: {document}): {status} {answer}"));
            }
            checked += 1;
        }
    }
    assert_eq!(wrong, Vec::<String>::new(), "request objects the document and the API close differently");
    assert!(checked > 30, "{checked} objects checked");
}

/// `body` without the member at `pointer`.
fn without(body: &Value, pointer: &str) -> Value {
    let mut body = body.clone();
    let (parent, name) = pointer.rsplit_once('/').unwrap();
    body.pointer_mut(parent).and_then(Value::as_object_mut).unwrap().remove(name);
    body
}

/// The document says which members a request must carry and which may be `null`, and the API
/// holds to it: every member a sample event's body carries (events/, at any depth), left out,
/// is refused naming it (a 400) where its object's schema requires it and not refused for it
/// where it does not; set to `null`, it is refused naming it where its schema does not allow
/// `null`, and not refused for it where it does (an update's `null` that clears or removes).
#[tokio::test]
async fn what_a_request_must_carry_and_may_leave_null_is_what_the_document_says() {
    let doc = document();
    let seeded = seeded_store().await;
    let (mut wrong, mut checked) = (Vec::new(), 0);
    for Sample { name, event, function, body, body_schema, .. } in request_samples(&doc) {
        let Some(body) = body else { continue };
        let mut found = Vec::new();
        nodes(&doc, &body, &body_schema, ("", ""), None, &mut found);
        for (member, (required, nullable)) in found.iter().filter_map(|node| Some((node, node.member()?))) {
            for (change, sent, refused) in [
                ("left out", without(&body, &member.pointer), required),
                ("null", with_value(&body, &member.pointer, Value::Null), !nullable),
            ] {
                let mut event = event.clone();
                event["body"] = Value::String(sent.to_string());
                let (status, answer) = run_event(seeded.path(), &function, &event).await;
                let named = answer["field"].as_str().unwrap_or_default();
                let names_it = status == 400
                    && answer["type"] == "/problems/invalid-field"
                    && if refused { same_field(named, &member.field) } else { within(named, &member.field) };
                if names_it != refused {
                    let document = match change {
                        "left out" if required => "required",
                        "left out" => "optional",
                        _ if nullable => "nullable",
                        _ => "not nullable",
                    };
                    wrong.push(format!(
                        "{name} {} {change} (the document: {document}): {status} {answer}",
                        member.field
                    ));
                }
                checked += 1;
            }
        }
    }
    assert_eq!(
        wrong,
        Vec::<String>::new(),
        "members the document and the API require or allow null differently"
    );
    assert!(checked > 100, "{checked} variants checked");
}

/// `event` without its `location` (`query` or `header`) parameter `name`; `None` where it does
/// not carry it.
fn without_parameter(event: &Value, location: &str, name: &str) -> Option<Value> {
    let mut event = event.clone();
    match location {
        "query" => {
            let raw = event["rawQueryString"].as_str().unwrap_or_default().to_owned();
            let pairs: Vec<&str> = raw.split('&').filter(|pair| !pair.is_empty()).collect();
            let kept: Vec<&str> =
                pairs.iter().copied().filter(|pair| pair.split('=').next() != Some(name)).collect();
            if kept.len() == pairs.len() {
                return None;
            }
            event["rawQueryString"] = Value::from(kept.join("&"));
            event["queryStringParameters"].as_object_mut()?.remove(name);
        }
        "header" => {
            event["headers"].as_object_mut()?.remove(&name.to_lowercase())?;
        }
        _ => return None,
    }
    Some(event)
}

/// The document says which parameters a request must carry, and the API holds to it: every
/// query and header parameter a sample event carries (events/), left out, is refused naming it
/// (a 400) where the document requires it, and not refused for it where it does not, but one
/// whose description makes it required on a condition ("Required for a global admin token").
#[tokio::test]
async fn a_parameter_is_required_where_the_document_says_so() {
    let doc = document();
    let seeded = seeded_store().await;
    let (mut wrong, mut checked) = (Vec::new(), 0);
    for Sample { name, event, function, operation, .. } in request_samples(&doc) {
        for parameter in operation["parameters"].as_array().into_iter().flatten() {
            let (location, parameter_name) =
                (parameter["in"].as_str().unwrap(), parameter["name"].as_str().unwrap());
            let conditional =
                parameter["description"].as_str().is_some_and(|text| text.starts_with("Required for"));
            let Some(event) = without_parameter(&event, location, parameter_name).filter(|_| !conditional)
            else {
                continue;
            };
            let required = parameter["required"] == true;
            let (status, answer) = run_event(seeded.path(), &function, &event).await;
            let names_it = status == 400
                && answer["field"].as_str().is_some_and(|field| field.eq_ignore_ascii_case(parameter_name));
            if names_it != required {
                let document = if required { "required" } else { "optional" };
                wrong.push(format!("{name} {location} {parameter_name} left out (the document: {document}): {status} {answer}"));
            }
            checked += 1;
        }
    }
    assert_eq!(wrong, Vec::<String>::new(), "parameters the document and the API require differently");
    assert!(checked >= 8, "{checked} parameters checked");
}

/// Every problem `type` the API answers is a page: `GET /problems/{slug}`, through its own
/// function, describes each row of the error tables, without a token.
#[tokio::test]
async fn every_problem_type_has_its_page() {
    let dir = tempfile::tempdir().unwrap();
    let state = AppState::new(backend::embedded(dir.path()).unwrap(), HttpConfig::default());
    let problems = TestClient::new(http::function("problems", state).unwrap());
    for row in http::errors::TABLES.iter().flat_map(|t| t.iter()) {
        let r = problems.send("GET", &format!("/problems/{}", row.slug), None, None).await;
        assert_eq!(r.status, 200, "{}", row.slug);
        assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
        let page = r.text();
        assert!(page.contains(&format!("<td>{}</td>", row.code)), "{}: {page}", row.slug);
        assert!(page.contains("<h1>"), "{page}");
    }
    problems.send("GET", "/problems/no-such-problem", None, None).await.problem(404, 1_000_005);
}
