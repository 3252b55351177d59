"""Every sample event's request body is valid against the OpenAPI document: the examples the
repository ships (`events/`, for `cargo lambda invoke --data-file` and the benchmarks) send
nothing the document's schemas refuse, and the document refuses nothing they send.

    python3 tests/sample_bodies.py        # needs jsonschema (schemathesis brings it)

Each event's route (API Gateway HTTP API v2 or REST v1 shape) is matched to the document's
operation by method and path template, and its JSON body validated against that operation's
request schema (JSON Schema 2020-12, `$ref`s resolved in the document). Exit status 0 when every
body with a schema is valid; a body without one is an error too."""

import base64
import json
import pathlib
import re
import sys

import jsonschema
import referencing
import referencing.jsonschema

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCUMENT = json.loads((ROOT / "openapi.json").read_text())
BASE = "urn:rp:openapi"
REGISTRY = referencing.Registry().with_resource(
    BASE, referencing.Resource.from_contents(DOCUMENT, default_specification=referencing.jsonschema.DRAFT202012)
)


def operation(method, path):
    """The document's operation serving `method` on the concrete `path`, or None."""
    for template, item in DOCUMENT["paths"].items():
        pattern = "^" + re.sub(r"\{[^}/]+\}", "[^/]+", template) + "$"
        if re.match(pattern, path) and method.lower() in item:
            return item[method.lower()]
    return None


def anchored(schema):
    """`schema` with its document-relative `$ref`s made absolute, so the registry resolves them."""
    if isinstance(schema, dict):
        return {k: (BASE + v if k == "$ref" and v.startswith("#") else anchored(v)) for k, v in schema.items()}
    if isinstance(schema, list):
        return [anchored(v) for v in schema]
    return schema


def main():
    checked, failed = 0, 0
    for sample in sorted((ROOT / "events").glob("*.json")):
        event = json.loads(sample.read_text())
        context = event.get("requestContext")
        if context is None or not event.get("body"):
            continue  # an SQS event, or a call without a body
        method = context["http"]["method"] if "http" in context else event["httpMethod"]
        path = event.get("rawPath") or event["path"]
        body = event["body"]
        if event.get("isBase64Encoded"):
            body = base64.b64decode(body).decode()
        found = operation(method, path)
        content = ((found or {}).get("requestBody") or {}).get("content", {}).get("application/json")
        if content is None:
            print(f"FAIL {sample.name}: {method} {path} has no JSON request body in the document")
            failed += 1
            continue
        validator = jsonschema.Draft202012Validator(anchored(content["schema"]), registry=REGISTRY)
        errors = sorted(validator.iter_errors(json.loads(body)), key=lambda e: list(e.absolute_path))
        checked += 1
        if errors:
            failed += 1
            for error in errors:
                where = "/".join(str(p) for p in error.absolute_path) or "(body)"
                print(f"FAIL {sample.name}: {where}: {error.message[:200]}")
        else:
            print(f"ok   {sample.name}")
    print(f"{checked} sample bodies checked against openapi.json, {failed} failed")
    return 1 if failed or checked == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
