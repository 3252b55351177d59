//! The endpoint table: every endpoint path, its Lambda function, its router and what its
//! function may do in AWS. It is the one place an endpoint is declared: the function crates
//! under `functions/`, their entries in `infra/template.yaml` (role, routes, logs, alarm), the
//! route table of [`crate::routes`] and the `cargo lambda watch` router in `Cargo.toml` are
//! written from it
//! (`UPDATE_GENERATED=1 cargo test -p rp-tests --test generated`), and a test fails when a
//! checked-in file differs from what it writes.

use crate::{
    cc, certificates, code, console, content, events, health, offline, oob, pki, problems, registration,
    workstation,
};
use axum::Router;
use rp_app::AppState;
use rp_ports::iam::dynamodb::*;
use rp_ports::iam::kms::{DECRYPT, GENERATE_DATA_KEY};
use rp_ports::iam::sns::*;
use rp_ports::Services;

/// A function that only reads the table.
pub const READ: &[&str] = &[GET_ITEM, QUERY];
/// A function that writes it: every write action. Which of them a use case sends depends on its
/// path (a put under a version is a `PutItem`, one under no condition an `UpdateItem`, a removal
/// racing it adds a condition check), and one table with no per-key conditions gives a function
/// that may put an item no less power than one that may also update or delete it: a narrower
/// list only adds a way to fail in production that no emulator shows (none enforces IAM).
pub const WRITE: &[&str] = &[GET_ITEM, QUERY, PUT_ITEM, UPDATE_ITEM, DELETE_ITEM, CONDITION_CHECK_ITEM];

/// The endpoints whose GET writes the table beyond a budget's counter: the agent's poll, which
/// leases the requests it answers, and a phone's fetch of its OOB requests, which marks each
/// as fetched. Every other GET reads, and at most counts against a budget (whose refusal is a
/// 429 or a 503), so it answers no 409. The IAM suite notes each GET's writes and fails on one
/// whose path is not listed here.
pub const GETS_THAT_WRITE: &[&str] = &["/rp/api/certificate/requests", "/rp/versioned/device/oob/requests"];

/// What an endpoint's function may do in AWS besides writing its logs: its IAM role, and the
/// clients its binary builds (a function that may not call a service does not link its client).
#[derive(Debug, Clone, Copy)]
pub struct Grants {
    /// DynamoDB actions on the table: none, [`READ`] or [`WRITE`].
    pub table: &'static [&'static str],
    /// The same on the table's indexes.
    pub indexes: bool,
    /// KMS actions on the envelope key, and why, when the template should say.
    pub envelope: &'static [&'static str],
    pub envelope_why: Option<&'static str>,
    /// It sends the certificate time-out messages.
    pub queue: bool,
    /// SNS actions on the account's platform applications and endpoints (mobile push).
    pub push: &'static [&'static str],
    /// It runs tenant code in the sandbox: a longer time-out and more memory, and why.
    pub sandbox: Option<&'static str>,
}

impl Grants {
    /// Whether it may write the table: any action beyond [`READ`].
    pub fn writes_table(&self) -> bool {
        self.table.iter().any(|action| !READ.contains(action))
    }

    pub const NONE: Self = Self {
        table: &[],
        indexes: false,
        envelope: &[],
        envelope_why: None,
        queue: false,
        push: &[],
        sandbox: None,
    };
}

/// One endpoint path: the Lambda function's package name, the path, its router (and the
/// router's name in this crate, which the function's `main` calls) and its grants.
pub struct Endpoint {
    pub name: &'static str,
    pub path: &'static str,
    pub router: fn(&AppState) -> Router<AppState>,
    pub router_name: &'static str,
    pub grants: Grants,
    /// Pages the OpenAPI document does not list (the console's): the methods they answer, and
    /// the paths besides `path` that reach them. `None` for an API endpoint, whose methods are
    /// the document's.
    pub pages: Option<Pages>,
}

/// The methods and further paths of an endpoint of HTML pages.
#[derive(Debug, Clone, Copy)]
pub struct Pages {
    pub methods: &'static [&'static str],
    /// API Gateway paths (`/console/{proxy+}`: every path under it).
    pub also: &'static [&'static str],
}

impl Endpoint {
    /// The services besides the store that its handlers call: those its grants allow.
    pub const fn services(&self) -> Services {
        let keys = !self.grants.envelope.is_empty();
        Services { queue: self.grants.queue, keys, push: !self.grants.push.is_empty() }
    }

    /// Whether its GET may write the table beyond a budget's counter ([`GETS_THAT_WRITE`]).
    pub fn get_writes(&self) -> bool {
        GETS_THAT_WRITE.contains(&self.path)
    }

    /// Every path API Gateway routes to it: its own, and its pages' further ones.
    pub fn paths(&self) -> Vec<&'static str> {
        std::iter::once(self.path).chain(self.pages.iter().flat_map(|p| p.also.iter().copied())).collect()
    }

    /// The methods it answers, in `GET, POST, PUT, PATCH, DELETE` order: its pages', or the
    /// operations the OpenAPI document lists at its path.
    pub fn methods(&self) -> Vec<&'static str> {
        if let Some(pages) = self.pages {
            return pages.methods.to_vec();
        }
        static DOCUMENT: std::sync::OnceLock<serde_json::Value> = std::sync::OnceLock::new();
        let document = DOCUMENT
            .get_or_init(|| serde_json::from_str(crate::openapi::json()).expect("the document is JSON"));
        let operations = document["paths"][self.path].as_object();
        let operations = operations.unwrap_or_else(|| panic!("{} is documented", self.path));
        ["GET", "POST", "PUT", "PATCH", "DELETE"]
            .into_iter()
            .filter(|m| operations.contains_key(&m.to_ascii_lowercase()))
            .collect()
    }
}

macro_rules! endpoint {
    ($name:literal, $path:literal, $area:ident::$router:ident, $grants:expr) => {
        Endpoint {
            name: $name,
            path: $path,
            router: $area::$router,
            router_name: concat!(stringify!($area), "::", stringify!($router)),
            grants: $grants,
            pages: None,
        }
    };
}

/// Every endpoint path. The name is the Lambda function's package name.
#[rustfmt::skip]
pub const ENDPOINTS: &[Endpoint] = &[
    endpoint!("health", "/health", health::router, Grants { table: &[], ..Grants::NONE }),
    endpoint!("problems", "/problems/{slug}", problems::router, Grants { table: &[], ..Grants::NONE }),
    endpoint!("cc-apps", "/cc/api/apps", cc::apps_router, Grants { table: WRITE, indexes: true, ..Grants::NONE }),
    endpoint!("cc-app", "/cc/api/apps/{appId}", cc::app_router, Grants { table: READ, ..Grants::NONE }),
    endpoint!("cc-app-workstation", "/cc/api/apps/{appId}/workstation", cc::workstation_router, Grants { table: WRITE, ..Grants::NONE }),
    endpoint!("cc-app-rate-limit", "/cc/api/apps/{appId}/rate-limit", cc::rate_limit_router, Grants { table: WRITE, ..Grants::NONE }),
    endpoint!("cc-tokens", "/cc/api/tokens", cc::tokens_router, Grants { table: WRITE, indexes: true, ..Grants::NONE }),
    endpoint!("cc-token", "/cc/api/tokens/{tokenId}", cc::token_router, Grants { table: WRITE, ..Grants::NONE }),
    endpoint!("cc-registration-links", "/cc/api/apps/{appId}/users/{namedUser}/registration-links", registration::links_router, Grants { table: WRITE, ..Grants::NONE }),
    endpoint!("rp-register-page", "/rp/register/{code}", registration::page_router, Grants { table: READ, ..Grants::NONE }),
    endpoint!("rp-device-registrations", "/rp/versioned/device/registrations", registration::registrations_router, Grants { table: WRITE, ..Grants::NONE }),
    endpoint!("rp-enroll", "/rp/wsapi/client/enroll", workstation::enroll_router, Grants { table: WRITE, indexes: true, ..Grants::NONE }),
    endpoint!("rp-client-registrations", "/rp/versioned/client/registrations", workstation::client_registrations_router, Grants { table: WRITE, indexes: true, ..Grants::NONE }),
    endpoint!("rp-enroll-complete", "/rp/wasapi/client/enroll/complete", workstation::complete_router, Grants { table: WRITE, envelope: &[GENERATE_DATA_KEY], envelope_why: Some("Seals the recovery keys for the enrolled device."), ..Grants::NONE }),
    endpoint!("rp-client-reg", "/rp/api/client/reg", workstation::client_reg_router, Grants { table: WRITE, indexes: true, envelope: &[GENERATE_DATA_KEY, DECRYPT], push: &[PUBLISH], ..Grants::NONE }),
    endpoint!("rp-events", "/rp/api/events", events::router, Grants { table: WRITE, indexes: true, ..Grants::NONE }),
    endpoint!("rp-certificate-requests", "/rp/api/certificate/requests", certificates::requests_router, Grants { table: WRITE, indexes: true, queue: true, ..Grants::NONE }),
    endpoint!("rp-certificate", "/rp/api/certificate", certificates::issued_router, Grants { table: WRITE, indexes: true, push: &[PUBLISH], ..Grants::NONE }),
    endpoint!("rp-certificate-revoke", "/rp/api/certificate/revoke", certificates::revoked_router, Grants { table: WRITE, indexes: true, ..Grants::NONE }),
    endpoint!("cc-certificate-revoke", "/cc/api/certificates/{certSerialNumber}/revoke", certificates::admin_revoke_router, Grants { table: WRITE, indexes: true, ..Grants::NONE }),
    endpoint!("rp-pki-crl", "/rp/pki/{caId}/crl", pki::crl_router, Grants { table: WRITE, ..Grants::NONE }),
    endpoint!("rp-pki-ca", "/rp/pki/{caId}/ca.crt", pki::ca_router, Grants { table: READ, ..Grants::NONE }),
    endpoint!("rp-device-certificates", "/rp/versioned/device/certificates", certificates::device_router, Grants { table: READ, indexes: true, ..Grants::NONE }),
    endpoint!("rp-oob-requests", "/rp/api/oob/client/authentication/requests", oob::start_router, Grants { table: WRITE, envelope: &[DECRYPT, GENERATE_DATA_KEY], envelope_why: Some("Opens the tenant's environment and signing key; seals its first signing key."), push: &[PUBLISH], sandbox: Some("The tenant's oob.start code customizations run here (each at most 20 s)."), ..Grants::NONE }),
    endpoint!("rp-oob-devices", "/rp/api/oob/client/authentication/{appId}/{namedUser}/devices", oob::devices_router, Grants { table: READ, ..Grants::NONE }),
    endpoint!("rp-oob-request", "/rp/api/oob/client/authentication/requests/{sessionId}", oob::status_router, Grants { table: READ, ..Grants::NONE }),
    endpoint!("rp-device-oob-requests", "/rp/versioned/device/oob/requests", oob::device_requests_router, Grants { table: WRITE, indexes: true, envelope: &[DECRYPT], envelope_why: Some("Opens the recovery keys sealed for the device."), ..Grants::NONE }),
    endpoint!("rp-device-oob-request", "/rp/versioned/device/oob/requests/{requestId}", oob::device_answer_router, Grants { table: WRITE, ..Grants::NONE }),
    endpoint!("rp-device-setup", "/rp/versioned/device/setup", offline::setup_router, Grants { table: WRITE, envelope: &[DECRYPT], ..Grants::NONE }),
    endpoint!("rp-device-workstations", "/rp/versioned/device/workstations", offline::workstations_router, Grants { table: READ, indexes: true, ..Grants::NONE }),
    endpoint!("rp-device-offline-used", "/rp/versioned/device/offline/used", offline::used_router, Grants { table: WRITE, envelope: &[DECRYPT, GENERATE_DATA_KEY], ..Grants::NONE }),
    endpoint!("cc-app-device", "/cc/api/apps/{appId}/devices/{deviceId}", offline::admin_device_router, Grants { table: WRITE, indexes: true, push: &[DELETE_ENDPOINT], ..Grants::NONE }),
    endpoint!("rp-device-push", "/rp/versioned/device/push", registration::push_router, Grants { table: WRITE, push: &[CREATE_PLATFORM_ENDPOINT, GET_ENDPOINT_ATTRIBUTES, SET_ENDPOINT_ATTRIBUTES, DELETE_ENDPOINT], ..Grants::NONE }),
    endpoint!("rp-device-token", "/rp/versioned/device/token", registration::token_router, Grants { table: WRITE, ..Grants::NONE }),
    endpoint!("cc-app-user-devices", "/cc/api/apps/{appId}/users/{namedUser}/devices", registration::user_devices_router, Grants { table: READ, ..Grants::NONE }),
    endpoint!("cc-app-device-token", "/cc/api/apps/{appId}/devices/{deviceId}/token", registration::device_token_router, Grants { table: WRITE, ..Grants::NONE }),
    endpoint!("content-customizations", "/content-customization", content::collection_router, Grants { table: WRITE, indexes: true, ..Grants::NONE }),
    endpoint!("content-customization", "/content-customization/{id}", content::item_router, Grants { table: WRITE, indexes: true, ..Grants::NONE }),
    endpoint!("content-customization-versions", "/content-customization/{id}/versions", content::versions_router, Grants { table: WRITE, indexes: true, ..Grants::NONE }),
    endpoint!("content-customization-version", "/content-customization/{id}/versions/{version}", content::version_router, Grants { table: WRITE, indexes: true, ..Grants::NONE }),
    endpoint!("content-customization-restore", "/content-customization/{id}/versions/{version}/restore", content::restore_router, Grants { table: WRITE, indexes: true, ..Grants::NONE }),
    endpoint!("code-customizations", "/code-customization", code::collection_router, Grants { table: WRITE, ..Grants::NONE }),
    endpoint!("code-customization", "/code-customization/{id}", code::item_router, Grants { table: WRITE, ..Grants::NONE }),
    endpoint!("code-customization-versions", "/code-customization/{id}/versions", code::versions_router, Grants { table: WRITE, ..Grants::NONE }),
    endpoint!("code-customization-version", "/code-customization/{id}/versions/{version}", code::version_router, Grants { table: WRITE, ..Grants::NONE }),
    endpoint!("code-customization-restore", "/code-customization/{id}/versions/{version}/restore", code::restore_router, Grants { table: WRITE, ..Grants::NONE }),
    endpoint!("code-customization-test", "/code-customization/{id}/test", code::test_router, Grants { table: WRITE, envelope: &[DECRYPT, GENERATE_DATA_KEY], envelope_why: Some("Opens the tenant's environment and signing key; seals its first signing key."), sandbox: Some("A run's wall clock (at most 20 s) plus the watchdog's second, and room to answer."), ..Grants::NONE }),
    endpoint!("code-customization-env", "/code-customization/env", code::env_router, Grants { table: WRITE, ..Grants::NONE }),
    endpoint!("code-customization-env-var", "/code-customization/env/{name}", code::env_var_router, Grants { table: WRITE, envelope: &[GENERATE_DATA_KEY, DECRYPT], ..Grants::NONE }),
    endpoint!("code-customization-signing-keys", "/code-customization/signing-keys", code::signing_keys_router, Grants { table: WRITE, envelope: &[GENERATE_DATA_KEY], envelope_why: Some("Seals the private half of a new signing key."), ..Grants::NONE }),
    endpoint!("code-customization-signing-key", "/code-customization/signing-keys/{kid}", code::signing_key_router, Grants { table: WRITE, ..Grants::NONE }),
    endpoint!("rp-app-jwks", "/rp/api/apps/{appId}/jwks.json", code::jwks_router, Grants { table: READ, ..Grants::NONE }),
    Endpoint {
        name: "console",
        path: "/console",
        router: console::router,
        router_name: "console::router",
        grants: Grants { table: WRITE, indexes: true, envelope: &[DECRYPT, GENERATE_DATA_KEY], envelope_why: Some("Opens the tenant's environment for a test run; seals a tenant's first signing key."), push: &[DELETE_ENDPOINT], sandbox: Some("A code customization's test run (at most 20 s) plus the watchdog's second, and room to answer."), ..Grants::NONE },
        pages: Some(Pages { methods: &["GET", "POST"], also: &["/console/{proxy+}"] }),
    },
];
