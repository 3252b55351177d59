"""Schemathesis hooks for `.ci/run`: the fixtures `rp-admin seed-samples` wrote give each
operation a valid token for the scheme it declares, and the path parameters that name fixtures
(the sample app, its devices and users) are used often enough to reach past the 404s."""

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
KNOWN = {
    "appId": [APP],
    "namedUser": ["alice@example.com"],
    "deviceId": ["alice-tablet", "alice-old-phone"],
    "id": ["1", "2"],
    "version": ["1"],
}


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


@schemathesis.hook
def map_body(ctx, body):
    if isinstance(body, dict):
        for field in APP_FIELDS:
            if field in body and random.random() < 0.5:
                body[field] = APP
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


@schemathesis.hook
def before_call(ctx, case, kwargs):
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
