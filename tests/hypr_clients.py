"""Two public HYPR RP API clients, replayed on the wire against a running server, end to end.

    pip install 'cryptography>=42'
    RP_BASE_URL=http://127.0.0.1:8080 RP_ADMIN_TOKEN=<an admin token> python3 tests/hypr_clients.py

- WSO2 Identity Server's HYPR connector (`wso2-extensions/identity-outbound-auth-hypr`): it lists
  the user's devices with the app's access token (an empty array means "no such user", a 401 a
  bad token), takes the first entry's `machineId`, starts with `{namedUser, machine: "WEB",
  machineId, appId, sessionNonce, deviceNonce, serviceNonce, serviceHmac}` (each nonce the
  uppercase hex SHA-256 of a random PIN), reads `response.requestId`, and polls the status reading
  `requestId`, `namedUser` and the last `state` entry's `value`.
- A Go MFA strategy on the same API: the same device list (it needs only a non-empty array), a
  start with `machine: "WEB"`, a random 6-letter `machineId` that names no device and
  `"additionalDetails": null`, then a poll every 2 s for up to 120 s until any state entry is
  COMPLETED, CANCELED or FAILED. Its requests go as Go writes them: the user name in the path as
  it is (`fmt.Sprintf`), each body with the trailing newline of Go's `json.Encoder`, and
  `Content-Type: application/json` on the GETs too.

The phones are played here with real P-256 keys (the `cryptography` package, independent of the
server's code): each registers through a registration link, fetches its pending requests and
approves with a signature over the documented message (docs/api/oob.md). The user has two
phones; each client's request must reach the phone the rules of docs/api/oob.md choose, and only
that one. `.ci/run` runs it against the local server on the embedded backend and on the AWS
adapters. Exit status 0 when every step passed."""

import base64
import hashlib
import json
import os
import secrets
import string
import struct
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

BASE = os.environ.get("RP_BASE_URL", "http://127.0.0.1:8080").rstrip("/")
ADMIN = os.environ["RP_ADMIN_TOKEN"]
FINAL = {"COMPLETED", "CANCELED", "FAILED"}


def send(request):
    """(status, parsed JSON body or None)."""
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            text = response.read()
            return response.status, json.loads(text) if text else None
    except urllib.error.HTTPError as e:
        text = e.read()
        return e.code, json.loads(text) if text else None


def call(method, path, token=None, body=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(BASE + path, data=data, method=method)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    return send(request)


def go_call(method, path, token, payload=None):
    """`call` as the Go strategy's performRequest sends it: `json.Encoder`'s body (with its
    trailing newline), and `Content-Type: application/json` on every request, GETs included."""
    data = None if payload is None else (json.dumps(payload) + "\n").encode()
    request = urllib.request.Request(BASE + path, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    request.add_header("Authorization", f"Bearer {token}")
    return send(request)


def expect(step, ok, detail=""):
    if not ok:
        print(f"FAIL {step}: {detail}")
        sys.exit(1)
    print(f"ok   {step}")


def must(step, status, wanted, body):
    expect(step, status == wanted, f"{status} {body}")
    return body


class Phone:
    """A registered device: its P-256 signing key and its device token."""

    def __init__(self, app_id, user, name):
        link = call("POST", f"/cc/api/apps/{app_id}/users/{urllib.parse.quote(user)}/registration-links", ADMIN)
        code = must(f"a registration link for {name}", link[0], 201, link[1])["code"]
        self.key = ec.generate_private_key(ec.SECP256R1())
        agreement = ec.generate_private_key(ec.SECP256R1())
        self.device_id = f"{name}-{secrets.token_hex(4)}"
        body = {
            "code": code,
            "deviceId": self.device_id,
            "friendlyName": name,
            "modelNumber": "Pixel 9",
            "signingPublicKey": point(self.key),
            "keyAgreementPublicKey": point(agreement),
        }
        status, registered = call("POST", "/rp/versioned/device/registrations", body=body)
        self.token = must(f"{name} registers", status, 201, registered)["deviceToken"]

    def pending(self):
        status, body = call("GET", "/rp/versioned/device/oob/requests", self.token)
        return must("the phone fetches its requests", status, 200, body)["requests"]

    def approve(self, request):
        """Signs and posts an approval of `request`, as fetched."""
        fields = [
            request["requestId"],
            request["sessionNonce"],
            request["deviceNonce"],
            request["serviceNonce"],
            request["serviceHmac"],
            request.get("transactionText") or "",
            "",  # the amount shown (no number matching here)
            "",  # the amount typed
            "approve",
        ]
        message = b"rp-oob-v1" + b"".join(struct.pack(">I", len(f.encode())) + f.encode() for f in fields)
        signature = self.key.sign(message, ec.ECDSA(hashes.SHA256()))
        body = {"decision": "approve", "signature": base64.b64encode(signature).decode()}
        return call("POST", f"/rp/versioned/device/oob/requests/{request['requestId']}", self.token, body)


def point(key):
    raw = key.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    return base64.b64encode(raw).decode()


def pin_nonce():
    """HYPRWebUtils.doSha256(String.valueOf(generateRandomPIN())): uppercase hex."""
    return hashlib.sha256(str(secrets.randbelow(900000) + 100000).encode()).hexdigest().upper()


def devices(app_id, token, user):
    return call("GET", f"/rp/api/oob/client/authentication/{app_id}/{urllib.parse.quote(user)}/devices", token)


def status_of(token, request_id):
    return call("GET", f"/rp/api/oob/client/authentication/requests/{request_id}", token)


def the_phone_approves(phone, others, request_id):
    seen = [r for r in phone.pending() if r["requestId"] == request_id]
    expect(f"the request reaches {phone.device_id}", len(seen) == 1, json.dumps(seen))
    for other in others:
        mine = [r for r in other.pending() if r["requestId"] == request_id]
        expect(f"and not {other.device_id}", not mine, json.dumps(mine))
    status, answered = phone.approve(seen[0])
    must("the phone approves with a valid signature", status, 200, answered)
    expect("the answer completes it", answered["state"] == "COMPLETED", json.dumps(answered))


def wso2(app_id, access, user, phones):
    print("-- WSO2 Identity Server's HYPR connector")
    status, body = devices(app_id, "rpt_" + "A" * 43, user)
    must("a bad token: 401, which the connector reads as a bad token", status, 401, body)
    status, body = devices(app_id, access, "nobody@example.com")
    expect("an unknown user: an empty array", (status, body) == (200, []), f"{status} {body}")
    status, listed = devices(app_id, access, user)
    must("the user's devices", status, 200, listed)
    expect("a JSON array of {deviceId, protocolVersion, modelNumber, machineId, namedUser}",
           isinstance(listed, list) and listed
           and all({"deviceId", "protocolVersion", "modelNumber", "machineId", "namedUser"} <= set(d) for d in listed),
           json.dumps(listed))
    machine_id = listed[0]["machineId"]
    start = {
        "namedUser": user,
        "machine": "WEB",
        "machineId": machine_id,
        "appId": app_id,
        "sessionNonce": pin_nonce(),
        "deviceNonce": pin_nonce(),
        "serviceNonce": pin_nonce(),
        "serviceHmac": pin_nonce(),
    }
    status, started = call("POST", "/rp/api/oob/client/authentication/requests", access, start)
    request_id = must("the start (uppercase nonces)", status, 200, started)["response"]["requestId"]
    chosen = next(p for p in phones if p.device_id == machine_id)
    the_phone_approves(chosen, [p for p in phones if p is not chosen], request_id)
    for _ in range(50):
        status, polled = status_of(access, request_id)
        must("the status", status, 200, polled)
        if polled["state"][-1]["value"] in FINAL:
            break
        time.sleep(0.2)
    expect("the poll reads requestId and namedUser",
           (polled["requestId"], polled["namedUser"]) == (request_id, user), json.dumps(polled))
    expect("the last state entry's value is COMPLETED", polled["state"][-1]["value"] == "COMPLETED", json.dumps(polled))


def go_strategy(app_id, access, user, phones):
    print("-- a Go MFA strategy")
    status, listed = go_call("GET", f"/rp/api/oob/client/authentication/{app_id}/{user}/devices", access)
    expect("the device list is a non-empty array", status == 200 and isinstance(listed, list) and listed,
           f"{status} {listed}")
    start = {
        "appId": app_id,
        "namedUser": user,
        "machine": "WEB",
        "machineId": "".join(secrets.choice(string.ascii_letters) for _ in range(6)),
        "sessionNonce": pin_nonce(),
        "deviceNonce": pin_nonce(),
        "serviceNonce": pin_nonce(),
        "serviceHmac": pin_nonce(),
        "additionalDetails": None,
    }
    status, started = go_call("POST", "/rp/api/oob/client/authentication/requests", access, start)
    request_id = must("the start (random machineId, additionalDetails null)", status, 200, started)["response"]["requestId"]
    # A machineId that names no device: the most recently registered phone.
    newest = phones[-1]
    the_phone_approves(newest, phones[:-1], request_id)
    deadline = time.monotonic() + 120
    while True:
        time.sleep(2)
        status, polled = go_call("GET", f"/rp/api/oob/client/authentication/requests/{request_id}", access)
        must("the status", status, 200, polled)
        values = {entry["value"] for entry in polled["state"]}
        if values & FINAL or time.monotonic() > deadline:
            break
    expect("a state entry is COMPLETED within 120 s", "COMPLETED" in values, json.dumps(polled))


def main():
    app_id = "hypr" + secrets.token_hex(4)
    status, body = call("POST", "/cc/api/apps", ADMIN, {"appId": app_id, "displayName": "HYPR clients"})
    must("create the app", status, 201, body)
    status, body = call("POST", "/cc/api/tokens", ADMIN, {"kind": "access", "appId": app_id})
    access = must("its access token", status, 201, body)["token"]
    user = "alice@example.com"
    # Registered a second apart, so that "most recent" is unambiguous on any store.
    phones = [Phone(app_id, user, "older-phone")]
    time.sleep(1.1)
    phones.append(Phone(app_id, user, "newer-phone"))
    wso2(app_id, access, user, phones)
    go_strategy(app_id, access, user, phones)
    print("both clients completed")


main()
