//! The OpenAPI 3.1 document, derived from the code: each handler's `#[utoipa::path]` gives its
//! method, path, parameters, body and success answers, the request and response types give the
//! schemas, and the error tables in [`super::errors`] give every operation its problem+json
//! answers, grouped by status, each `errorCode` an example. The local server serves it at
//! `GET /openapi.json`; `openapi.json` at the top of the repository is a copy a test holds to it.

use super::endpoints::ENDPOINTS;
use super::errors::{self, TABLES};
use super::problem::ProblemType;
use super::{
    cc, certificates, code, content, events, health, offline, oob, pki, problems, registration, workstation,
};
use axum::http::StatusCode;
use rp_domain::apps::AppId;
use rp_domain::validate;
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::OnceLock;
use utoipa::openapi::content::ContentBuilder;
use utoipa::openapi::example::ExampleBuilder;
use utoipa::openapi::header::HeaderBuilder;
use utoipa::openapi::link::LinkBuilder;
use utoipa::openapi::path::{Operation, Parameter, ParameterBuilder, ParameterIn, PathItem};
use utoipa::openapi::schema::{AdditionalProperties, ArrayItems, SchemaType};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{
    ObjectBuilder, OpenApi as Document, Ref, RefOr, Required, Response, ResponseBuilder, Schema, Type,
};
use utoipa::{Modify, OpenApi};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Passwordless workstation login: relying-party API",
        description = "The relying-party backend: control center, device registration, workstation enrollment and \
                       pairing, the enrollment agent's certificate queue, out-of-band authentication, offline PINs, \
                       and content and code customizations. Errors are `application/problem+json`; `errorCode` \
                       is the project's code (docs/errors.md lists them all).",
        license(name = "Apache-2.0", identifier = "Apache-2.0"),
    ),
    paths(
        health::health, problems::page,
        cc::list_apps, cc::create_app, cc::get_app, cc::get_workstation, cc::put_workstation,
        cc::get_rate_limit, cc::put_rate_limit, cc::list_tokens, cc::create_token, cc::revoke_token,
        registration::create_link, registration::page, registration::register, registration::refresh_token,
        registration::register_push,
        registration::list_devices, registration::revoke_token,
        workstation::enroll, workstation::complete,
        workstation::pair, workstation::read_pairing, workstation::update_pairing, workstation::unpair,
        events::list, events::report,
        certificates::poll, certificates::post_issuance, certificates::post_revocation,
        certificates::queue_revocation, certificates::device_certificates, pki::put_crl, pki::get_crl, pki::get_ca,
        oob::start, oob::user_devices, oob::status, oob::device_requests, oob::device_answer,
        offline::device_setup, offline::device_workstations, offline::device_used, offline::revoke_device,
        content::list, content::create, content::retrieve, content::update, content::list_versions,
        content::get_version, content::restore,
        code::list, code::create, code::retrieve, code::update, code::remove, code::list_versions,
        code::get_version, code::restore, code::test_run, code::list_env, code::put_env, code::delete_env,
        code::list_signing_keys, code::rotate_signing_key, code::retire_signing_key, code::jwks,
    ),
    components(schemas(super::problem::ProblemBody)),
    modifiers(&Security, &Texts, &Problems, &Links),
    tags(
        (name = "health", description = "Liveness"),
        (name = "problems", description = "What each problem `type` means, for a person"),
        (name = "control", description = "The control center: apps, workstation settings, rate limits, tokens"),
        (name = "registration", description = "Registration links, device registration and device tokens"),
        (name = "enrollment", description = "Workstation enrollment and pairing (access tokens)"),
        (name = "events", description = "Audit events"),
        (name = "certificates", description = "The enrollment agent's certificate queue and results"),
        (name = "oob", description = "Out-of-band authentication"),
        (name = "offline", description = "Offline PINs on the paired device"),
        (name = "content", description = "Content customizations (screen texts)"),
        (name = "code", description = "Code customizations: JavaScript hooks in a sandbox"),
    ),
)]
struct Api;

/// The document.
pub fn document() -> Document {
    let mut api = Api::openapi();
    // The versioned alias is the enroll handler itself, so it is the enroll operation too.
    if let Some(mut alias) = api.paths.paths.get("/rp/wsapi/client/enroll").cloned() {
        if let Some(operation) = alias.post.as_mut() {
            operation.operation_id = Some("enrollment_client_registrations".to_owned());
            operation.description =
                Some("The enroll operation under its versioned name (an alias).".to_owned());
        }
        api.paths.paths.insert(workstation::CLIENT_REGISTRATIONS.to_owned(), alias);
    }
    api
}

/// The document as the server serves it and the repository keeps it: pretty JSON and a newline.
pub fn json() -> &'static str {
    static JSON: OnceLock<String> = OnceLock::new();
    JSON.get_or_init(|| {
        let mut text = document().to_pretty_json().expect("the OpenAPI document serializes");
        text.push('\n');
        text
    })
}

/// The bearer tokens, one scheme per kind an operation may ask for.
pub const SCHEMES: &[(&str, &str)] = &[
    ("admin", "A global `controlCenterAdmin` token (`POST /cc/api/tokens`)."),
    (
        "tenantAdmin",
        "A `controlCenterAdmin` token scoped to the app, or a global one that names the app in `X-Tenant-Id`.",
    ),
    ("access", "An `access` token of the app (the workstation's, or the server's that starts OOB)."),
    ("device", "The device token a registered device got at registration (`POST /rp/versioned/device/token` renews it)."),
];

struct Security;

impl Modify for Security {
    fn modify(&self, api: &mut Document) {
        let components = api.components.get_or_insert_with(Default::default);
        for (name, description) in SCHEMES {
            let scheme =
                HttpBuilder::new().scheme(HttpAuthScheme::Bearer).description(Some(*description)).build();
            components.add_security_scheme(*name, SecurityScheme::Http(scheme));
        }
    }
}

/// States the rule [`validate::text`] holds every bounded text to: each string schema with a
/// length and no pattern, format or enum, of a body or a parameter, gets the pattern of a text
/// without the refused control characters (`validate::text_pattern`). Every such schema is one
/// a request can carry, and the API refuses a control character in each (`validate::text`, a
/// stricter parser: a key's, a registration code's, or as an id no request has: an OOB
/// request's), but in the ones named here.
struct Texts;

/// Bounded strings that may hold any character: an environment variable's value (a code
/// customization reads it; 4 KiB, counted in bytes).
const FREE_TEXTS: [&str; 1] = ["EnvValue.value"];

impl Modify for Texts {
    fn modify(&self, api: &mut Document) {
        for (name, schema) in api.components.iter_mut().flat_map(|c| c.schemas.iter_mut()) {
            if let RefOr::T(schema) = schema {
                add_text_patterns(schema, name);
            }
        }
        for operation in operations_mut(api) {
            for parameter in operation.parameters.iter_mut().flatten() {
                let RefOr::T(parameter) = parameter else { continue };
                if let Some(RefOr::T(schema)) = &mut parameter.schema {
                    add_text_patterns(schema, &parameter.name);
                }
            }
        }
    }
}

/// [`Texts`] for `schema`, at `at` (`Schema.property`), and every schema inside it.
fn add_text_patterns(schema: &mut Schema, at: &str) {
    let inner = |of: &mut RefOr<Schema>, at: &str| {
        if let RefOr::T(schema) = of {
            add_text_patterns(schema, at);
        }
    };
    match schema {
        Schema::Object(object) => {
            let string = match &object.schema_type {
                SchemaType::Type(kind) => *kind == Type::String,
                SchemaType::Array(kinds) => kinds.contains(&Type::String),
                SchemaType::AnyValue => false,
            };
            let plain = object.pattern.is_none() && object.format.is_none() && object.enum_values.is_none();
            if string && plain && object.max_length.is_some() && !FREE_TEXTS.contains(&at) {
                object.pattern = Some(validate::text_pattern());
            }
            for (name, property) in object.properties.iter_mut() {
                inner(property, &format!("{at}.{name}"));
            }
            if let Some(AdditionalProperties::RefOr(values)) = object.additional_properties.as_deref_mut() {
                inner(values, &format!("{at}.*"));
            }
            if let Some(names) = object.property_names.as_deref_mut() {
                add_text_patterns(names, at);
            }
        }
        Schema::Array(array) => {
            if let ArrayItems::RefOrSchema(items) = &mut array.items {
                inner(items, &format!("{at}[]"));
            }
        }
        Schema::OneOf(one) => one.items.iter_mut().for_each(|item| inner(item, at)),
        Schema::AllOf(all) => all.items.iter_mut().for_each(|item| inner(item, at)),
        Schema::AnyOf(any) => any.items.iter_mut().for_each(|item| inner(item, at)),
        _ => {}
    }
}

/// Adds each operation's problem+json answers, and the headers some answers carry.
struct Problems;

impl Modify for Problems {
    fn modify(&self, api: &mut Document) {
        let mut shared = Shared::default();
        for (path, item) in api.paths.paths.iter_mut() {
            let (writes, get_writes) = writes_table(path);
            for (get, operation) in operations_of(item) {
                complete(operation, if get { get_writes } else { writes }, &mut shared);
            }
        }
        let components = api.components.get_or_insert_with(Default::default);
        components.responses.extend(shared.responses);
    }
}

/// Every operation of the document.
fn operations_mut(api: &mut Document) -> impl Iterator<Item = &mut Operation> {
    api.paths.paths.values_mut().flat_map(operations_of).map(|(_, operation)| operation)
}

/// The operations at one path, each with whether it is the GET.
fn operations_of(item: &mut PathItem) -> impl Iterator<Item = (bool, &mut Operation)> {
    let others = [&mut item.put, &mut item.post, &mut item.delete, &mut item.patch];
    let get = item.get.as_mut().map(|operation| (true, operation));
    get.into_iter().chain(others.into_iter().flatten().map(|operation| (false, operation)))
}

/// Whether the function serving `path` may write the table (its IAM grants, from the endpoint
/// table), and whether its GET may ([`get_writes`](super::endpoints::Endpoint::get_writes)). An
/// operation that may not answers no 409: every 409 refuses a write (one that lost its race, or
/// one the state it would change does not allow).
fn writes_table(path: &str) -> (bool, bool) {
    match ENDPOINTS.iter().find(|endpoint| endpoint.path == path) {
        Some(endpoint) => {
            let writes = endpoint.grants.writes_table();
            (writes, writes && endpoint.get_writes())
        }
        None => (true, true),
    }
}

/// What an answer names that other operations take (OpenAPI `links`), so that a client, or the
/// fuzzer's stateful phase, can go from a thing just made to the calls on it.
pub struct OperationLink {
    /// The operation whose answer holds the value, and that answer's status.
    pub from: &'static str,
    pub status: &'static str,
    /// Where in the answer the value is (a runtime expression).
    pub value: &'static str,
    /// The operations that take it, as which path parameter.
    pub to: &'static [&'static str],
    pub parameter: &'static str,
}

pub const LINKS: &[OperationLink] = &[
    OperationLink {
        from: "control_create_app",
        status: "201",
        value: "$response.body#/appId",
        to: &[
            "control_get_app",
            "control_get_workstation",
            "control_put_workstation",
            "control_get_rate_limit",
            "control_put_rate_limit",
            "code_jwks",
        ],
        parameter: "appId",
    },
    OperationLink {
        from: "code_rotate_signing_key",
        status: "201",
        value: "$response.body#/kid",
        to: &["code_retire_signing_key"],
        parameter: "kid",
    },
    OperationLink {
        from: "control_create_token",
        status: "201",
        value: "$response.body#/tokenId",
        to: &["control_revoke_token"],
        parameter: "tokenId",
    },
    OperationLink {
        from: "registration_create_link",
        status: "201",
        value: "$response.body#/code",
        to: &["registration_page"],
        parameter: "code",
    },
    OperationLink {
        from: "oob_start",
        status: "200",
        value: "$response.body#/response/requestId",
        to: &["oob_status"],
        parameter: "sessionId",
    },
    OperationLink {
        from: "code_create",
        status: "201",
        value: "$response.body#/id",
        to: &["code_retrieve", "code_update", "code_remove", "code_test_run", "code_list_versions"],
        parameter: "id",
    },
    OperationLink {
        from: "content_create",
        status: "201",
        value: "$response.body#/id",
        to: &["content_retrieve", "content_update", "content_list_versions"],
        parameter: "id",
    },
];

/// Adds [`LINKS`] to the answers they start from (after [`Problems`], which gives the
/// operations their final ids).
struct Links;

impl Modify for Links {
    fn modify(&self, api: &mut Document) {
        for operation in operations_mut(api) {
            let id = operation.operation_id.clone().unwrap_or_default();
            for link in LINKS.iter().filter(|link| link.from == id) {
                let Some(RefOr::T(answer)) = operation.responses.responses.get_mut(link.status) else {
                    continue;
                };
                for target in link.to {
                    let built =
                        LinkBuilder::new().operation_id(*target).parameter(link.parameter, link.value);
                    answer.links.insert((*target).to_owned(), RefOr::T(built.build()));
                }
            }
        }
    }
}

/// The problem answers, each kept once under `components/responses` and referred to.
#[derive(Default)]
struct Shared {
    names: BTreeMap<(Vec<u32>, bool), String>,
    responses: BTreeMap<String, RefOr<Response>>,
}

impl Shared {
    /// A reference to the answer listing `kinds` (all of one status), added when new.
    fn refer(&mut self, tag: &str, kinds: &[&ProblemType], tenant: bool) -> RefOr<Response> {
        let key = (kinds.iter().map(|k| k.code).collect::<Vec<_>>(), tenant);
        let name = match self.names.get(&key) {
            Some(name) => name.clone(),
            None => {
                let base = format!("{tag}-{}", kinds[0].status.as_u16());
                let taken = |n: &String| self.responses.contains_key(n);
                let name = std::iter::once(base.clone())
                    .chain((2..).map(|i| format!("{base}-{i}")))
                    .find(|n| !taken(n))
                    .expect("a free name");
                let mut response = problem_response(kinds);
                if tenant {
                    add_rate_limit_headers(&mut response);
                }
                self.responses.insert(name.clone(), RefOr::T(response));
                self.names.insert(key, name.clone());
                name
            }
        };
        RefOr::Ref(Ref::new(format!("#/components/responses/{name}")))
    }
}

fn complete(operation: &mut Operation, writes: bool, shared: &mut Shared) {
    let tag = operation.tags.as_ref().and_then(|t| t.first()).cloned().unwrap_or_default();
    // Handler names repeat across areas (`list`, `create`): the area makes them unique.
    if let Some(id) = operation.operation_id.as_mut() {
        *id = format!("{tag}_{id}");
    }
    let schemes: Vec<String> = operation
        .security
        .iter()
        .flatten()
        .filter_map(|requirement| serde_json::to_value(requirement).ok())
        .filter_map(|value| value.as_object().and_then(|o| o.keys().next().cloned()))
        .collect();
    let tenant = schemes.iter().any(|s| s == "tenantAdmin");
    if tenant {
        operation.parameters.get_or_insert_with(Vec::new).push(RefOr::T(tenant_header()));
    }
    let mut kinds = problems_of(&tag, operation.request_body.is_some(), !schemes.is_empty(), tenant);
    let named = |p: &RefOr<Parameter>| matches!(p, RefOr::T(p) if p.name == rp_domain::idempotency::HEADER);
    let once = operation.parameters.iter().flatten().any(named);
    if once {
        kinds.push(&errors::IDEMPOTENCY_KEY_REUSED);
    }
    if !writes {
        kinds.retain(|kind| kind.status != StatusCode::CONFLICT);
    }
    let mut by_status: BTreeMap<u16, Vec<&ProblemType>> = BTreeMap::new();
    for kind in kinds {
        by_status.entry(kind.status.as_u16()).or_default().push(kind);
    }
    if tenant {
        // Customization answers carry the rate-limit headers, successes included.
        for response in operation.responses.responses.values_mut() {
            if let RefOr::T(response) = response {
                add_rate_limit_headers(response);
            }
        }
    }
    for (status, kinds) in by_status {
        let answer = shared.refer(&tag, &kinds, tenant);
        operation.responses.responses.entry(status.to_string()).or_insert(answer);
    }
}

/// `X-Tenant-Id`, the header a tenant admin's operation takes.
fn tenant_header() -> utoipa::openapi::path::Parameter {
    ParameterBuilder::new()
        .name("X-Tenant-Id")
        .parameter_in(ParameterIn::Header)
        .required(Required::False)
        .description(Some(
            "Required for a global admin token where the operation takes no `appId`: the app it acts for. A token \
             of one app (a scoped admin's, an access token) must be that app's; where the operation also takes an \
             `appId`, the two must agree.",
        ))
        .schema(Some(ObjectBuilder::new().schema_type(Type::String).pattern(Some(AppId::PATTERN))))
    .build()
}

/// The problems an operation of this area may answer.
fn problems_of(tag: &str, body: bool, authenticated: bool, tenant: bool) -> Vec<&'static ProblemType> {
    let mut kinds: Vec<&'static ProblemType> = vec![&errors::INTERNAL];
    if tag == "health" {
        return kinds;
    }
    if tag == "problems" {
        // A slug no problem type has, or one that is not UTF-8 once percent-decoded.
        kinds.extend([&errors::ROUTE_NOT_FOUND, &errors::INVALID_FIELD]);
        kinds.sort_by_key(|k| k.code);
        return kinds;
    }
    kinds.extend([
        &errors::INVALID_FIELD,
        &errors::REJECTED_BY_STORE,
        &errors::CONFLICT,
        &errors::UNAVAILABLE,
    ]);
    if body {
        kinds.extend([&errors::MALFORMED_BODY, &errors::BODY_TOO_LARGE, &errors::UNSUPPORTED_MEDIA_TYPE]);
    }
    if authenticated {
        kinds.extend(errors::AUTH.iter().copied());
    }
    let areas: &[&[&'static ProblemType]] = match tag {
        "control" => &[errors::CONTROL],
        "registration" => &[errors::CONTROL, errors::REGISTRATION],
        "enrollment" => &[errors::CONTROL, errors::ENROLLMENT, errors::PAIRING, errors::CERTIFICATES],
        "certificates" => &[errors::CONTROL, errors::CERTIFICATES],
        "oob" => &[errors::CONTROL, errors::OOB],
        "offline" => &[errors::CONTROL, errors::PAIRING],
        "content" => &[errors::CONTENT],
        "code" => &[errors::CONTROL, errors::CODE],
        "events" if body => &[errors::EVENTS],
        _ => &[],
    };
    kinds.extend(areas.iter().flat_map(|t| t.iter().copied()));
    if tenant {
        kinds.push(&errors::RATE_LIMITED);
    }
    debug_assert!(kinds.iter().all(|k| TABLES.iter().any(|t| t.contains(k))));
    kinds.sort_by_key(|k| k.code);
    kinds.dedup();
    kinds
}

fn problem_response(kinds: &[&ProblemType]) -> Response {
    let lines: Vec<String> =
        kinds.iter().map(|k| format!("- `{}` {}: {}", k.code, k.slug, k.meaning)).collect();
    let examples = kinds.iter().map(|kind| {
        let example = ExampleBuilder::new()
            .summary(kind.title)
            .value(Some(json!({
                "type": format!("/problems/{}", kind.slug),
                "title": kind.title,
                "status": kind.status.as_u16(),
                "detail": format!("{} (exceptionId: 00000000-0000-4000-8000-000000000000)", kind.title),
                "errorCode": kind.code,
            })))
            .build();
        (kind.code.to_string(), example)
    });
    let content =
        ContentBuilder::new().schema(Some(Ref::from_schema_name("Problem"))).examples_from_iter(examples);
    let status = kinds[0].status;
    let mut response = ResponseBuilder::new()
        .description(format!("{}\n\n{}", status.canonical_reason().unwrap_or("Error"), lines.join("\n")))
        .content("application/problem+json", content.build());
    let retry = [StatusCode::SERVICE_UNAVAILABLE, StatusCode::TOO_MANY_REQUESTS, StatusCode::LOCKED];
    if retry.contains(&status) {
        response = response.header("Retry-After", integer_header("Seconds to wait before trying again"));
    }
    if status == StatusCode::UNAUTHORIZED {
        response = response.header("WWW-Authenticate", string_header("`Bearer`"));
    }
    response.build()
}

fn add_rate_limit_headers(response: &mut Response) {
    for (name, description) in [
        ("X-RateLimit-Limit", "Requests the tenant may make in the window"),
        ("X-RateLimit-Remaining", "Requests left in the window"),
        ("X-RateLimit-Reset", "When the window resets, in epoch seconds"),
    ] {
        response.headers.insert(name.to_owned(), RefOr::T(integer_header(description)));
    }
}

fn integer_header(description: &str) -> utoipa::openapi::header::Header {
    HeaderBuilder::new()
        .schema(Some(ObjectBuilder::new().schema_type(Type::Integer)))
        .description(Some(description))
        .build()
}

fn string_header(description: &str) -> utoipa::openapi::header::Header {
    HeaderBuilder::new()
        .schema(Some(ObjectBuilder::new().schema_type(Type::String)))
        .description(Some(description))
        .build()
}
