"""A walk through code customizations against a running local server (python3, stdlib only):

    cargo run -p rp-shared --bin rp-local        # with LOCAL_ADMIN_TOKEN set, or note the printed one
    RP_BASE_URL=http://127.0.0.1:8080 RP_ADMIN_TOKEN=<admin token> python3 tests/code_customization_demo.py

It creates an app, a user with a registered device, the env vars RISK_ISSUER and RISK_SECRET, and
an enabled oob.start customization that verifies the risk engine's JWT (issuer from env) and
denies the login without a valid one. It then starts OOB authentications with a token from
the wrong issuer (denied, 403) and from the right one (allowed, 200). Prints every exchange."""

import base64
import hashlib
import hmac
import json
import os
import secrets
import time
import urllib.error
import urllib.request

BASE = os.environ.get("RP_BASE_URL", "http://127.0.0.1:8080").rstrip("/")
ADMIN = os.environ["RP_ADMIN_TOKEN"]
APP = "demo" + secrets.token_hex(3)
# The P-256 generator, SEC1 uncompressed: a valid public key for the demo device.
POINT = "BGsX0fLhLEJH+Lzm5WOkQPJ3A32BLeszoPShOUXYmMKWT+NC4v4af5uO5+tKfA+eFivOM1drMV7Oy7ZAaDe/UfU="
SOURCE = """
async function handler(event, api) {
  const token = (event.additionalDetails || {}).riskToken;
  const ok = token && jwtVerify(token, {issuer: env.RISK_ISSUER, secret: env.RISK_SECRET, algorithms: ['HS256']});
  console.log('risk token for', event.namedUser, ok ? 'verified' : 'refused');
  if (!ok) api.deny('the risk engine did not vouch for this login');
  return {ok};
}
"""


def call(method, path, token=None, body=None, tenant=None):
    headers = {"content-type": "application/json"}
    if token:
        headers["authorization"] = f"Bearer {token}"
    if tenant:
        headers["x-tenant-id"] = tenant
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(BASE + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req) as r:
            status, text = r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read().decode()
    print(f"{method} {path} -> {status} {text[:400]}")
    return status, (json.loads(text) if text else None)


def hs256(claims, secret):
    enc = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=").decode()
    signing_input = enc(json.dumps({"alg": "HS256", "typ": "JWT"}).encode()) + "." + enc(json.dumps(claims).encode())
    signature = hmac.new(secret.encode(), signing_input.encode(), hashlib.sha256).digest()
    return signing_input + "." + enc(signature)


def oob(access, risk_token):
    nonce = lambda: secrets.token_hex(32)
    body = {"appId": APP, "namedUser": "alice@example.com", "sessionNonce": nonce(), "deviceNonce": nonce(),
            "serviceNonce": nonce(), "serviceHmac": nonce(), "machine": "WS-0042",
            "transactionText": "Sign in to WS-0042?", "additionalDetails": {"riskToken": risk_token}}
    return call("POST", "/rp/api/oob/client/authentication/requests", access, body)


assert call("POST", "/cc/api/apps", ADMIN, {"appId": APP, "displayName": "Demo"})[0] == 201
_, token = call("POST", "/cc/api/tokens", ADMIN, {"kind": "access", "appId": APP})
access = token["token"]
_, link = call("POST", f"/cc/api/apps/{APP}/users/alice@example.com/registration-links", ADMIN, {})
device = {"code": link["code"], "deviceId": "alice-phone", "friendlyName": "Alice's phone", "modelNumber": "demo",
          "signingPublicKey": POINT, "keyAgreementPublicKey": POINT}
assert call("POST", "/rp/versioned/device/registrations", None, device)[0] == 201
for name, value in [("RISK_ISSUER", "https://risk.example.com"), ("RISK_SECRET", "risk-shared-secret-0123")]:
    assert call("PUT", f"/code-customization/env/{name}", ADMIN, {"value": value}, APP)[0] == 200
call("GET", "/code-customization/env", ADMIN, None, APP)
_, code = call("POST", "/code-customization", ADMIN,
               {"displayName": "Risk check", "trigger": "oob.start", "source": SOURCE, "enabled": True}, APP)
claims = lambda iss: {"iss": iss, "exp": int(time.time()) + 600, "score": 7}
wrong = hs256(claims("https://evil.example.com"), "risk-shared-secret-0123")
right = hs256(claims("https://risk.example.com"), "risk-shared-secret-0123")
call("POST", f"/code-customization/{code['id']}/test", ADMIN,
     {"event": {"namedUser": "alice@example.com", "additionalDetails": {"riskToken": wrong}}}, APP)
denied, problem = oob(access, wrong)
allowed, _ = oob(access, right)
_, events = call("GET", f"/rp/api/events?appId={APP}&name=CODE_CUSTOMIZATION_RUN", ADMIN)
assert denied == 403 and problem["errorCode"] == 1200007, problem
assert allowed == 200
print("demo: the wrong issuer was denied (403, 1200007), the right one allowed (200)")
