"""Schemathesis hooks for `.ci/run`: the fixtures `rp-admin seed-samples` wrote give each
operation a valid token for the scheme it declares, and the path parameters that name fixtures
(the sample app, its devices and users) are used often enough to reach past the 404s."""

import hashlib
import json
import os
import random
import urllib.request

import schemathesis

# The sample fixtures (shared/src/samples.rs).
APP = "workstationDemo"
TOKENS = {
    "admin": os.environ.get("RP_ADMIN_TOKEN", "rpt_sample-admin-token-for-local-invoke-only"),
    "access": "rpt_sample-access-token-for-workstationDemo",
    "device": "rpd_sample-device-token-replace-with-yours",
}
# The sample token meant to be revoked (`TOKEN_TO_REVOKE` in samples.rs).
TOKEN_TO_REVOKE = "rpt_sample-token-to-revoke-in-the-cc-token-event"


def token_id(secret):
    """A token's id, as the API lists it: the first 8 bytes of its SHA-256, in hex."""
    return hashlib.sha256(secret.encode()).hexdigest()[:16]


KNOWN = {
    "appId": [APP],
    "namedUser": ["alice@example.com"],
    "deviceId": ["alice-tablet", "alice-old-phone"],
    # As integers, as the document types them: a negative case whose id this replaces is then
    # seen as made valid again, not as an invalid id the API took.
    "id": [1, 2],
    "version": [1],
}
# The phone the sample device token belongs to, paired with both sample workstations.
PHONE = "alice-pixel-9"
# The sample pairings (machine, phone): the workstation pairing API's query names one.
PAIRINGS = [("machine-42", PHONE), ("machine-43", PHONE)]


def scheme_of(case):
    """The first security scheme the operation declares, or None."""
    for requirement in case.operation.definition.raw.get("security") or []:
        for name in requirement:
            return name
    return None


@schemathesis.auth()
class FixtureTokens:
    # Schemathesis caches what `get` returns for every operation, so `get` returns the tokens
    # and `set` picks the one the operation's scheme asks for.
    def get(self, case, ctx):
        return TOKENS

    def set(self, case, data, ctx):
        scheme = scheme_of(case)
        if scheme is None:
            return
        case.headers = case.headers or {}
        if scheme == "tenantAdmin":
            case.headers["Authorization"] = f"Bearer {data['admin']}"
            case.headers["X-Tenant-Id"] = APP
        else:
            case.headers["Authorization"] = f"Bearer {data[scheme]}"


# Fields of a body that name the app: half the time, the sample app.
APP_FIELDS = ("rpAppId", "appId")
# Fields of a body that name a fixture, by path: half the time, one that exists (samples.rs's
# leased login and revocation requests, and the pairing with offline PINs), so that the result
# reports and the used-PIN report reach past their 404s. The first report of a request ends
# its lease; the later ones meet that state.
BODY_FIXTURES = {
    "/rp/api/certificate": {"requestId": ["00000000-0000-4000-8000-000000000001"]},
    "/rp/api/certificate/revoke": {"requestId": ["00000000-0000-4000-8000-000000000002"]},
    "/rp/versioned/device/offline/used": {"machineId": ["machine-42"]},
}


@schemathesis.hook
def map_body(ctx, body):
    if isinstance(body, dict):
        for field in APP_FIELDS:
            if field in body and random.random() < 0.5:
                body[field] = APP
        for field, values in BODY_FIXTURES.get(ctx.operation.path, {}).items():
            if field in body and random.random() < 0.5:
                body[field] = random.choice(values)
    return body


def raise_rate_limit(base_url):
    """The sample app's customization budget, raised so the fuzzing is not all 429s."""
    request = urllib.request.Request(
        f"{base_url}/cc/api/apps/{APP}/rate-limit",
        data=json.dumps({"limit": 100000, "windowSecs": 60}).encode(),
        method="PUT",
        headers={"authorization": f"Bearer {TOKENS['admin']}", "content-type": "application/json"},
    )
    urllib.request.urlopen(request, timeout=10).read()


# Calls that would end a fixture the rest of the run needs, by operation: the path parameter,
# the values it must not name, and the sample that the same call may end instead.
SPARED = {
    ("DELETE", "/cc/api/tokens/{tokenId}"): (
        "tokenId",
        {token_id(TOKENS["admin"]), token_id(TOKENS["access"])},
        token_id(TOKEN_TO_REVOKE),
    ),
    ("DELETE", "/cc/api/apps/{appId}/devices/{deviceId}"): ("deviceId", {PHONE}, "alice-old-phone"),
    ("DELETE", "/cc/api/apps/{appId}/devices/{deviceId}/token"): ("deviceId", {PHONE}, "alice-tablet"),
}


def spare_fixtures(case):
    """Links hand the fixtures' own ids to the calls that end them (the token listing's to the
    revocation, a user's device list to the device's removal): once the sample access token is
    revoked, or the phone removed, every operation that needs it answers 401 or 404 for the rest
    of the run. Such a call ends the sample meant for it instead."""
    spared = SPARED.get((case.method.upper(), case.operation.path))
    if spared is None or not case.path_parameters:
        return
    name, keep, instead = spared
    if case.path_parameters.get(name) in keep:
        case.path_parameters[name] = instead


def valid_beyond_the_document(case):
    """Two rules of a query the document cannot state, which a valid case is made to keep so that
    the acceptance check judges the rest of it (an invalid case is sent as generated):
    - a list's `cursor` is one a page of that list returned; any other is refused (400), though
      the document can only say it is base64url. A valid case carries none.
    - the events' `from` must not be after their `to` (400). A valid case carries one of them."""
    if not (case.query and case.meta and case.meta.generation.mode.is_positive):
        return
    case.query.pop("cursor", None)
    if case.operation.path == "/rp/api/events" and "from" in case.query:
        case.query.pop("to", None)


@schemathesis.hook
def before_call(ctx, case, kwargs):
    spare_fixtures(case)
    valid_beyond_the_document(case)
    # Schemathesis infers some links on its own, and one of them carries a new customization's
    # numeric `id` into the `X-Tenant-Id` header: `requests` then refuses to send the call (a
    # run's "Network Error"). The tenant is the token's business, not a link's: put back the one
    # the auth gave, and send any other non-text header value as text.
    for name, value in list((case.headers or {}).items()):
        if isinstance(value, (str, bytes)):
            continue
        case.headers[name] = APP if name == "X-Tenant-Id" else str(value)


@schemathesis.hook
def after_call(ctx, case, response):
    # Refreshing the device token ends the one used: carry on with the fresh one.
    if case.path == "/rp/versioned/device/token" and response.status_code == 201:
        TOKENS["device"] = response.json()["deviceToken"]
    # A fuzzed budget for the sample app (reached through a link) is put back at once.
    if case.method == "PUT" and response.request.url.endswith(f"/cc/api/apps/{APP}/rate-limit"):
        raise_rate_limit(os.environ["RP_BASE_URL"])


@schemathesis.hook
def map_path_parameters(ctx, path_parameters):
    # Half the time, a parameter that names a fixture names one that exists.
    # The sample app's rate limit stays as the run set it: a fuzzed one would throttle the rest.
    if not path_parameters or ctx.operation.path.endswith("/rate-limit"):
        return path_parameters
    for name, values in KNOWN.items():
        if name in path_parameters and random.random() < 0.5:
            path_parameters[name] = random.choice(values)
    return path_parameters


@schemathesis.hook
def map_query(ctx, query):
    # Half the time, a pairing query names a sample pairing. An unpairing only ever names the
    # second, so that the first stays for the reads and updates.
    if ctx.operation.path != "/rp/api/client/reg" or not isinstance(query, dict):
        return query
    if random.random() < 0.5:
        pairings = PAIRINGS[1:] if ctx.operation.method.upper() == "DELETE" else PAIRINGS
        query["machineId"], query["deviceId"] = random.choice(pairings)
    return query
