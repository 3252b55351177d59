"""`sam build` from a clean checkout, and every artifact it made started under a Lambda Runtime API
(python3; `sam`, `cargo-lambda` and `ziglang` from PyPI on the PATH, e.g. `.ci/cache/venv`).

    .ci/cache/venv/bin/pip install cargo-lambda ziglang     # aws-sam-cli is already there
    PATH=.ci/cache/venv/bin:$PATH .ci/cache/venv/bin/python tests/sam_build.py

It runs `sam build --parameter-overrides Architecture=x86_64` in infra/ (this machine has no
aarch64 target; the template's default is arm64) into a fresh build directory, timed, then
checks that each function of the template has its `bootstrap`, and starts each one once under a
Runtime API of its own on loopback (tests/bench/cold_start.py's) with the Lambda environment of
the template and every AWS endpoint on a closed loopback port: it must come up and answer an
event that needs no AWS call (`GET /health` for the HTTP functions: 200 from `health`, 404 from
the others' routers, and 405 from `no-route`, which refuses what no route takes and where API
Gateway never sends it; an empty batch for the queue consumer). Prints the build time, each
artifact's size and init, and exits 0 when every function built and answered."""

import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "bench"))
from cold_start import measure  # noqa: E402


# What a function answers to the event it is sent, where that is not 404 to `GET /health`.
EXPECTED = {"HealthFunction": {200}, "CertTimeoutConsumerFunction": {"sqs-ok"}, "NoRouteFunction": {405}}


def functions_in_template():
    """The logical ids of the template's cargo-lambda functions."""
    text = (ROOT / "infra" / "template.yaml").read_text()
    ids, current = [], None
    for line in text.split("\n"):
        if m := re.match(r"^  ([A-Za-z0-9]+):$", line):
            current = m.group(1)
        elif line.strip() == "BuildMethod: rust-cargolambda":
            ids.append(current)
    return ids


def main():
    for tool in ("sam", "cargo-lambda"):
        if not shutil.which(tool):
            sys.exit(f"{tool} is not on the PATH (pip install aws-sam-cli cargo-lambda ziglang)")
    ids = functions_in_template()
    scratch = pathlib.Path(tempfile.mkdtemp(prefix="sam-build-"))
    build_dir, cache_dir = scratch / "build", scratch / "cache"
    started = time.monotonic()
    subprocess.run(["sam", "build", "--parameter-overrides", "Architecture=x86_64",
                    "--build-dir", str(build_dir), "--cache-dir", str(cache_dir)],
                   cwd=ROOT / "infra", check=True, env=dict(os.environ, SAM_CLI_TELEMETRY="0"))
    took = time.monotonic() - started
    print(f"sam build (x86_64): {took / 60:.1f} min for {len(ids)} functions")

    # Every endpoint on a closed port of loopback: nothing an event might reach leaves the machine.
    closed = "http://127.0.0.1:9"
    env = {
        "PATH": os.environ["PATH"], "AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test", "AWS_EC2_METADATA_DISABLED": "true", "AWS_ENDPOINT_URL": closed,
        "TABLE_NAME": "rp", "QUEUE_URL": f"{closed}/000000000000/rp", "DEAD_LETTER_QUEUE_URL": f"{closed}/000000000000/rp-dlq",
        "KMS_ENVELOPE_KEY_ID": "alias/rp-envelope",
        "PUBLIC_BASE_URL": "https://rp.example.test", "TLS_TRUST_ROOTS": "amazon",
        "AWS_LAMBDA_HTTP_IGNORE_STAGE_IN_PATH": "true", "AWS_LAMBDA_LOG_LEVEL": "WARN",
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "256", "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
    }
    health = (ROOT / "events" / "health.json").read_bytes()
    batch = json.dumps({"Records": []}).encode()
    problems = []
    print("| function | bootstrap (MB) | init | answer |")
    print("|---|---|---|---|")
    for logical_id in ids:
        bootstrap = build_dir / logical_id / "bootstrap"
        if not bootstrap.exists():
            problems.append(f"{logical_id}: no bootstrap in {bootstrap.parent}")
            continue
        consumer = logical_id == "CertTimeoutConsumerFunction"
        inits, _, _, statuses, _, _ = measure(bootstrap, batch if consumer else health,
                                              dict(env, AWS_LAMBDA_FUNCTION_NAME=logical_id), 1, 0)
        status = ",".join(str(s) for s in sorted(statuses, key=str))
        expected = EXPECTED.get(logical_id, {404})
        ok = bool(statuses) and statuses <= expected
        print(f"| {logical_id} | {bootstrap.stat().st_size / 1e6:.1f} | {inits[0]:.1f} ms | {status} |")
        if not ok:
            problems.append(f"{logical_id}: answered {status}")
    shutil.rmtree(scratch, ignore_errors=True)
    if problems:
        sys.exit("sam build: " + "; ".join(problems))
    print(f"sam build: all {len(ids)} functions built and answered")


if __name__ == "__main__":
    main()
