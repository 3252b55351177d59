"""Smoke test of a running deployment (python3, stdlib only).

    RP_BASE_URL=$(aws cloudformation describe-stacks --stack-name rp-staging \
        --query "Stacks[0].Outputs[?OutputKey=='ApiUrl'].OutputValue" --output text) \
    RP_ADMIN_TOKEN=<an admin token> python3 tests/smoke.py

Checks, in order: /health; creating an app and an access token; a registration link and its
page; a certificate poll. The app it creates (`smoke-<random>`) stays: name a staging stack,
not production. The poll leases up to a batch of pending requests, which go back to the queue
when their lease times out, so run it where that delay does not matter. `.ci/run` runs this
against the local server on every stop. Exit status 0 when every check passed."""

import json
import os
import secrets
import sys
import urllib.error
import urllib.request

BASE = os.environ.get("RP_BASE_URL", "http://127.0.0.1:8080").rstrip("/")
ADMIN = os.environ["RP_ADMIN_TOKEN"]
failures = []


def call(method, path, token=None, body=None):
    headers = {"content-type": "application/json"} if body is not None else {}
    if token:
        headers["authorization"] = f"Bearer {token}"
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(BASE + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as r:
            return r.status, r.headers, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read().decode()


def check(name, status, expected, body=""):
    ok = status == expected
    print(f"{'ok  ' if ok else 'FAIL'} {name}: {status}" + ("" if ok else f" (expected {expected}) {body[:300]}"))
    if not ok:
        failures.append(name)
    return ok


status, headers, body = call("GET", "/health")
check("GET /health", status, 200, body)
check("  it carries x-request-id", 200 if headers.get("x-request-id") else 0, 200)
app = "smoke-" + secrets.token_hex(4)
status, _, body = call("POST", "/cc/api/apps", ADMIN, {"appId": app, "displayName": "Smoke test"})
if check("POST /cc/api/apps", status, 201, body):
    status, _, body = call("POST", "/cc/api/tokens", ADMIN, {"kind": "access", "appId": app, "description": "smoke"})
    check("POST /cc/api/tokens (access)", status, 201, body)
    path = f"/cc/api/apps/{app}/users/smoke@example.com/registration-links"
    status, _, body = call("POST", path, ADMIN, {})
    if check("POST registration link", status, 201, body):
        code = json.loads(body)["code"]
        status, headers, page = call("GET", f"/rp/register/{code}")
        check("GET /rp/register/{code}", status, 200, page)
        check("  it is HTML with the QR code", 200 if "<svg" in page else 0, 200)
status, _, body = call("GET", "/rp/api/certificate/requests", ADMIN)
if check("GET /rp/api/certificate/requests (poll)", status, 200, body):
    answer = json.loads(body)
    check("  it has loginCerts and revokedCerts", 200 if {"loginCerts", "revokedCerts"} <= answer.keys() else 0, 200)
status, _, body = call("GET", "/cc/api/apps", "rpt_not-a-token-of-this-deployment-000000")
check("a wrong token is refused", status, 401, body)
print(f"smoke: {'all checks passed' if not failures else 'FAILED: ' + ', '.join(failures)} against {BASE}")
sys.exit(1 if failures else 0)
