"""Runs the README's walkthrough as written (python3, stdlib only).

    python3 tests/walkthrough.py

Takes the shell blocks between `<!-- walkthrough -->` and `<!-- /walkthrough -->` in README.md,
runs them in one bash (`set -euo pipefail`) from the repository root on a free port, and checks
what the README says they print: the agent issues one certificate and the login ends COMPLETED.
Everything the walkthrough starts is stopped afterwards. Exit status 0 when it all held."""

import os
import pathlib
import re
import signal
import socket
import subprocess
import sys
import tempfile

root = pathlib.Path(__file__).resolve().parent.parent
readme = (root / "README.md").read_text()
section = re.search(r"<!-- walkthrough -->(.*?)<!-- /walkthrough -->", readme, re.S)
if not section:
    sys.exit("README.md has no <!-- walkthrough --> section")
blocks = re.findall(r"```sh\n(.*?)```", section.group(1), re.S)
# Whatever the blocks start in the background (the server) is stopped when the script ends, as
# it ends: a failed step then ends the run at once, with its output, instead of leaving the
# server holding the output pipe open until the time-out.
script = "set -euo pipefail\ntrap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n" + "\n".join(blocks) + "\n"

with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
scratch = tempfile.TemporaryDirectory()
env = dict(os.environ, PORT=str(port), TMPDIR=scratch.name)
for name in ("RP_BASE_URL", "RP_ADMIN_TOKEN", "RP_DEVICE_STATE", "DATA_DIR", "LOCAL_ADMIN_TOKEN"):
    env.pop(name, None)
process = subprocess.Popen(["bash", "-c", script], cwd=root, env=env, text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
problems = []
try:
    output, _ = process.communicate(timeout=600)
except subprocess.TimeoutExpired:
    problems.append("the walkthrough took over 600 s")
    os.killpg(process.pid, signal.SIGTERM)
    output, _ = process.communicate()
finally:
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    scratch.cleanup()

lines = output.strip().splitlines()
if process.returncode != 0:
    problems.append(f"the walkthrough exited with {process.returncode}")
if not any(line.startswith("issued 1 ") for line in lines):
    problems.append("the agent did not print `issued 1 ...`")
if not any(line.startswith("approve ") and " 200 " in line for line in lines):
    problems.append("the device's approval was not answered 200")
if not lines or lines[-1] != "COMPLETED":
    problems.append("the last line is not COMPLETED")
if problems:
    print(output)
    sys.exit("walkthrough: " + "; ".join(problems))
print(f"walkthrough: {len(blocks)} blocks ran as written; the agent issued one certificate, the login COMPLETED")
