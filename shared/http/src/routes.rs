//! The routes API Gateway has: each path, the methods its route takes and the function it
//! goes to. Data alone, written from the endpoint table (`ENDPOINTS`, by
//! `UPDATE_GENERATED=1 cargo test -p rp-tests --test generated`; a test fails when it differs):
//! every function answers a request no route of its own takes from it (a 405's `Allow`), and
//! the table of routers and the OpenAPI document the endpoint table reads would link every
//! endpoint's code into every function.

/// One path API Gateway routes, to one function.
#[derive(Debug, PartialEq, Eq)]
pub struct Route {
    /// The Lambda function's package name.
    pub function: &'static str,
    /// As API Gateway writes it: `{name}` a segment, `{name+}` every remaining one.
    pub path: &'static str,
    /// In `GET, POST, PUT, PATCH, DELETE` order.
    pub methods: &'static [&'static str],
}

/// The route API Gateway takes for `path` among those that match it: the one that matches by
/// the most literal segments (a literal segment wins over a parameter). Allocates nothing: the
/// IAM check of the router tests looks up a request's function with it for every call it notes.
pub fn route_of(path: &str) -> Option<&'static Route> {
    let path = path.split('?').next().unwrap_or_default();
    let mut best: Option<(usize, &'static Route)> = None;
    for route in ROUTES {
        if let Some(literals) = matches(route.path, path) {
            if best.is_none_or(|(most, _)| literals > most) {
                best = Some((literals, route));
            }
        }
    }
    best.map(|(_, route)| route)
}

/// How many literal segments route `template` matched `path` by, if it matches it. A
/// parameter takes one segment that is not empty; `{name+}` (the last) every remaining one,
/// one at least.
fn matches(template: &str, path: &str) -> Option<usize> {
    let mut segments = path.split('/');
    let mut literals = 0;
    for part in template.split('/') {
        if part.ends_with("+}") {
            return segments.next().map(|_| literals);
        }
        let segment = segments.next()?;
        if part.starts_with('{') {
            if segment.is_empty() {
                return None;
            }
        } else if part == segment {
            literals += 1;
        } else {
            return None;
        }
    }
    segments.next().is_none().then_some(literals)
}

// Written from the endpoint table: every path, its methods and its function.
#[rustfmt::skip]
pub const ROUTES: &[Route] = &[
    Route { function: "health", path: "/health", methods: &["GET"] },
    Route { function: "problems", path: "/problems/{slug}", methods: &["GET"] },
    Route { function: "cc-apps", path: "/cc/api/apps", methods: &["GET", "POST"] },
    Route { function: "cc-app", path: "/cc/api/apps/{appId}", methods: &["GET"] },
    Route { function: "cc-app-workstation", path: "/cc/api/apps/{appId}/workstation", methods: &["GET", "PUT"] },
    Route { function: "cc-app-rate-limit", path: "/cc/api/apps/{appId}/rate-limit", methods: &["GET", "PUT"] },
    Route { function: "cc-tokens", path: "/cc/api/tokens", methods: &["GET", "POST"] },
    Route { function: "cc-token", path: "/cc/api/tokens/{tokenId}", methods: &["DELETE"] },
    Route { function: "cc-registration-links", path: "/cc/api/apps/{appId}/users/{namedUser}/registration-links", methods: &["POST"] },
    Route { function: "rp-register-page", path: "/rp/register/{code}", methods: &["GET"] },
    Route { function: "rp-device-registrations", path: "/rp/versioned/device/registrations", methods: &["POST"] },
    Route { function: "rp-enroll", path: "/rp/wsapi/client/enroll", methods: &["POST"] },
    Route { function: "rp-client-registrations", path: "/rp/versioned/client/registrations", methods: &["POST"] },
    Route { function: "rp-enroll-complete", path: "/rp/wasapi/client/enroll/complete", methods: &["POST"] },
    Route { function: "rp-client-reg", path: "/rp/api/client/reg", methods: &["GET", "POST", "PATCH", "DELETE"] },
    Route { function: "rp-events", path: "/rp/api/events", methods: &["GET", "POST"] },
    Route { function: "rp-certificate-requests", path: "/rp/api/certificate/requests", methods: &["GET"] },
    Route { function: "rp-certificate", path: "/rp/api/certificate", methods: &["POST"] },
    Route { function: "rp-certificate-revoke", path: "/rp/api/certificate/revoke", methods: &["POST"] },
    Route { function: "cc-certificate-revoke", path: "/cc/api/certificates/{certSerialNumber}/revoke", methods: &["POST"] },
    Route { function: "rp-pki-crl", path: "/rp/pki/{caId}/crl", methods: &["GET", "PUT"] },
    Route { function: "rp-pki-ca", path: "/rp/pki/{caId}/ca.crt", methods: &["GET"] },
    Route { function: "rp-device-certificates", path: "/rp/versioned/device/certificates", methods: &["GET"] },
    Route { function: "rp-oob-requests", path: "/rp/api/oob/client/authentication/requests", methods: &["POST"] },
    Route { function: "rp-oob-devices", path: "/rp/api/oob/client/authentication/{appId}/{namedUser}/devices", methods: &["GET"] },
    Route { function: "rp-oob-request", path: "/rp/api/oob/client/authentication/requests/{sessionId}", methods: &["GET"] },
    Route { function: "rp-device-oob-requests", path: "/rp/versioned/device/oob/requests", methods: &["GET"] },
    Route { function: "rp-device-oob-request", path: "/rp/versioned/device/oob/requests/{requestId}", methods: &["POST"] },
    Route { function: "rp-device-setup", path: "/rp/versioned/device/setup", methods: &["POST"] },
    Route { function: "rp-device-workstations", path: "/rp/versioned/device/workstations", methods: &["GET"] },
    Route { function: "rp-device-offline-used", path: "/rp/versioned/device/offline/used", methods: &["POST"] },
    Route { function: "cc-app-device", path: "/cc/api/apps/{appId}/devices/{deviceId}", methods: &["DELETE"] },
    Route { function: "rp-device-push", path: "/rp/versioned/device/push", methods: &["PUT"] },
    Route { function: "rp-device-token", path: "/rp/versioned/device/token", methods: &["POST"] },
    Route { function: "cc-app-user-devices", path: "/cc/api/apps/{appId}/users/{namedUser}/devices", methods: &["GET"] },
    Route { function: "cc-app-device-token", path: "/cc/api/apps/{appId}/devices/{deviceId}/token", methods: &["DELETE"] },
    Route { function: "content-customizations", path: "/content-customization", methods: &["GET", "POST"] },
    Route { function: "content-customization", path: "/content-customization/{id}", methods: &["GET", "POST"] },
    Route { function: "content-customization-versions", path: "/content-customization/{id}/versions", methods: &["GET"] },
    Route { function: "content-customization-version", path: "/content-customization/{id}/versions/{version}", methods: &["GET"] },
    Route { function: "content-customization-restore", path: "/content-customization/{id}/versions/{version}/restore", methods: &["POST"] },
    Route { function: "code-customizations", path: "/code-customization", methods: &["GET", "POST"] },
    Route { function: "code-customization", path: "/code-customization/{id}", methods: &["GET", "POST", "DELETE"] },
    Route { function: "code-customization-versions", path: "/code-customization/{id}/versions", methods: &["GET"] },
    Route { function: "code-customization-version", path: "/code-customization/{id}/versions/{version}", methods: &["GET"] },
    Route { function: "code-customization-restore", path: "/code-customization/{id}/versions/{version}/restore", methods: &["POST"] },
    Route { function: "code-customization-test", path: "/code-customization/{id}/test", methods: &["POST"] },
    Route { function: "code-customization-env", path: "/code-customization/env", methods: &["GET"] },
    Route { function: "code-customization-env-var", path: "/code-customization/env/{name}", methods: &["PUT", "DELETE"] },
    Route { function: "code-customization-signing-keys", path: "/code-customization/signing-keys", methods: &["GET", "POST"] },
    Route { function: "code-customization-signing-key", path: "/code-customization/signing-keys/{kid}", methods: &["DELETE"] },
    Route { function: "rp-app-jwks", path: "/rp/api/apps/{appId}/jwks.json", methods: &["GET"] },
    Route { function: "console", path: "/console", methods: &["GET", "POST"] },
    Route { function: "console", path: "/console/{proxy+}", methods: &["GET", "POST"] },
];
// End of the routes written from the endpoint table.
