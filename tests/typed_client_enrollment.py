"""A typed client generated from `openapi.json` completes an enrollment against a running server,
reading the enrollment session id from the enroll response's body alone.

    pip install 'openapi-python-client==0.29.*'
    RP_BASE_URL=http://127.0.0.1:8080 RP_ADMIN_TOKEN=<an admin token> python3 tests/typed_client_enrollment.py

It generates the client (`openapi-python-client generate`) into a temporary directory, then, only
through it: creates an app and its access token, registers a user's device through a
registration link, enrolls on the user-name-and-password path (no `sessionId` sent), completes
the enrollment with `response.sessionId` from the parsed body, and pairs the device, which the
server allows only for a completed enrollment. `.ci/run` runs it on every stop. Exit status 0
when every step passed."""

import os
import pathlib
import secrets
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
BASE = os.environ.get("RP_BASE_URL", "http://127.0.0.1:8080").rstrip("/")
ADMIN = os.environ["RP_ADMIN_TOKEN"]
# P-256 points (the generator and its double, SEC1 uncompressed): the device's public keys.
SIGNING_KEY = "BGsX0fLhLEJH+Lzm5WOkQPJ3A32BLeszoPShOUXYmMKWT+NC4v4af5uO5+tKfA+eFivOM1drMV7Oy7ZAaDe/UfU="
AGREEMENT_KEY = "BHzyexiNA09+ilI4AwS1GsPAiWnid/IbNaYLSPxHZpl4B3dVENuO0EApPZrGn3Qw27p9reY86YIpngS3nSJ4c9E="

# The generated client lives in a temporary directory, removed when the script ends.
generated = tempfile.TemporaryDirectory(prefix="rp-typed-client-")
out = pathlib.Path(generated.name)
subprocess.run(
    ["openapi-python-client", "generate", "--path", str(ROOT / "openapi.json"), "--meta", "none",
     "--output-path", str(out / "rp_client")],
    check=True,
    capture_output=True,
)
sys.path.insert(0, str(out))

from rp_client import AuthenticatedClient, Client  # noqa: E402
from rp_client.api.control import control_create_app, control_create_token  # noqa: E402
from rp_client.api.enrollment import enrollment_complete, enrollment_enroll, enrollment_pair  # noqa: E402
from rp_client.api.registration import registration_create_link, registration_register  # noqa: E402
from rp_client.models import (  # noqa: E402
    AppView,
    CompleteRequest,
    CreateApp,
    CreateToken,
    DeviceRegistered,
    EnrollRequest,
    EnrollResponse,
    LinkCreated,
    LinkOptions,
    PairingView,
    PairRequest,
    RegistrationRequest,
    StatusResponse,
    TokenCreated,
    TokenKind,
)


def expect(step, value, kind):
    """The typed answer of `step`, which must be a `kind` (a Problem or None fails the run)."""
    if not isinstance(value, kind):
        print(f"FAIL {step}: {value!r}")
        sys.exit(1)
    print(f"ok   {step}")
    return value


admin = AuthenticatedClient(base_url=BASE, token=ADMIN, raise_on_unexpected_status=True)
app_id = "typed-" + secrets.token_hex(4)
user = "bob@example.com"
alias = "CORP\\bob"

expect("create the app", control_create_app.sync(client=admin, body=CreateApp(app_id=app_id, display_name="Typed client")), AppView)
created = control_create_token.sync(client=admin, body=CreateToken(kind=TokenKind.ACCESS, app_id=app_id))
access = AuthenticatedClient(base_url=BASE, token=expect("create its access token", created, TokenCreated).token,
                             raise_on_unexpected_status=True)
link = registration_create_link.sync(app_id, user, client=admin, body=LinkOptions(machine_user_name_ws=alias))
code = expect("create a registration link", link, LinkCreated).code
device = registration_register.sync(
    client=Client(base_url=BASE, raise_on_unexpected_status=True),
    body=RegistrationRequest(code=code, device_id="bob-phone", friendly_name="Bob's phone", model_number="Pixel 9",
                             signing_public_key=SIGNING_KEY, key_agreement_public_key=AGREEMENT_KEY),
)
expect("register the device", device, DeviceRegistered)

# The user-name-and-password path: no sessionId sent, so the server issues one.
enrolled = enrollment_enroll.sync(client=access, body=EnrollRequest(rp_app_id=app_id, machine_user_name_ws=alias))
session_id = expect("enroll (no sessionId sent)", enrolled, EnrollResponse).response.session_id
assert session_id, "the body names the session"
assert enrolled.response.device.device_id == "bob-phone", enrolled
complete = enrollment_complete.sync(
    client=access,
    body=CompleteRequest(error_code=0, session_id=session_id, signing_cert="MIIBszCCAVmgAwIBAgIU",
                         machine_name="WS-0042", machine_id="machine-42", machine_user_name=alias,
                         machine_version="10.0.22631"),
)
status = expect("complete with the body's sessionId", complete, StatusResponse).status
assert status.response_code == 200, status
# Pairing needs the completed enrollment of the machine for the device's user.
pairing = enrollment_pair.sync(client=access, body=PairRequest(machine_id="machine-42", device_id="bob-phone"))
paired = expect("pair: the enrollment is stored", pairing, PairingView)
assert paired.named_user == user and paired.machine_id == "machine-42", paired
print("typed client: enrollment completed from the enroll response's body")
