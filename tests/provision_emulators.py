"""Creates what the AWS backend needs on emulators, and prints it as shell `export` lines.

    eval "$(AWS_ENDPOINT_URL=http://127.0.0.1:4566 python tests/provision_emulators.py)"
    RP_BACKEND=aws rp-local

The table (indexes and TTL), the time-out queue with its dead-letter queue and the two keys, each
as `infra/template.yaml` defines it (its properties read from the template, as the Rust test
harness and `rp-admin create-table` read them), the sample app's SNS platform application
(`app/APNS/workstationDemo`, which `rp-admin seed-samples` names). Names are fresh each run. The endpoints come from `AWS_ENDPOINT_URL_<SERVICE>` or
`AWS_ENDPOINT_URL` and must be on the loopback interface: this never talks to an AWS account.
The region, dummy credentials and `AWS_EC2_METADATA_DISABLED` are set here, whatever the shell
has, and printed with the rest. Needs boto3 and PyYAML (CI's tools venv has both).
"""

import ipaddress
import json
import os
import shlex
import sys
import time
import urllib.parse
from pathlib import Path

TEMPLATE = Path(__file__).resolve().parent.parent / "infra" / "template.yaml"

SERVICES = ("DYNAMODB", "SQS", "KMS", "SNS")
FIXED = {
    "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "test",
    "AWS_SECRET_ACCESS_KEY": "test",
    "AWS_EC2_METADATA_DISABLED": "true",
}


def endpoint(service):
    url = os.environ.get(f"AWS_ENDPOINT_URL_{service}") or os.environ.get("AWS_ENDPOINT_URL")
    if not url:
        sys.exit(f"no endpoint for {service}: set AWS_ENDPOINT_URL (or AWS_ENDPOINT_URL_{service}) to an emulator")
    if not is_loopback(url):
        sys.exit(f"refusing {url}: only emulators on the loopback interface")
    return url


def is_loopback(url):
    """As `config::is_loopback_url`: `localhost`, `[::1]` or 127.0.0.0/8, no user info."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if "@" in parts.netloc:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def template_properties():
    """The `Properties` of each resource in the template, by logical id. CloudFormation's tags
    (`!Ref`, `!Sub`, ...) load as None: what is read here uses none."""
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("!", lambda loader, suffix, node: None)
    resources = yaml.load(TEMPLATE.read_text(), Loader=Loader)["Resources"]
    return {name: resource.get("Properties") or {} for name, resource in resources.items()}


QUEUE_ATTRIBUTES = ("VisibilityTimeout", "MessageRetentionPeriod", "DelaySeconds", "ReceiveMessageWaitTimeSeconds")


def queue_attributes(properties, dead_letter_arn=None):
    """CreateQueue attributes for a template queue (those a client can see)."""
    attributes = {name: str(properties[name]) for name in QUEUE_ATTRIBUTES if name in properties}
    if "RedrivePolicy" in properties:
        count = properties["RedrivePolicy"]["maxReceiveCount"]
        attributes["RedrivePolicy"] = json.dumps({"deadLetterTargetArn": dead_letter_arn, "maxReceiveCount": str(count)})
    return attributes


TABLE_ARGUMENTS = ("AttributeDefinitions", "KeySchema", "GlobalSecondaryIndexes", "BillingMode")


def create_table(dynamodb, name, properties):
    """Creates a template table (CloudFormation's property names are CreateTable's) and its TTL."""
    dynamodb.create_table(TableName=name, **{k: properties[k] for k in TABLE_ARGUMENTS if k in properties})
    dynamodb.get_waiter("table_exists").wait(TableName=name, WaiterConfig={"Delay": 0.25, "MaxAttempts": 240})
    ttl = properties.get("TimeToLiveSpecification")
    if ttl and ttl.get("Enabled"):
        dynamodb.update_time_to_live(TableName=name, TimeToLiveSpecification=ttl)


def key_arguments(properties):
    """CreateKey arguments for a template key."""
    return {name: properties[name] for name in ("Description", "KeySpec", "KeyUsage") if name in properties}


def provision(urls, prefix="rp-local"):
    """Creates the queues and keys on the emulators at `urls` (by service) and returns the
    variables the AWS backend reads, with the fixed region and credentials and the endpoints."""
    os.environ.pop("AWS_PROFILE", None)
    os.environ.pop("AWS_SESSION_TOKEN", None)
    os.environ.update(FIXED)
    import boto3

    name = f"{prefix}-{os.getpid()}-{int(time.time())}"
    template = template_properties()
    sqs = boto3.client("sqs", endpoint_url=urls["SQS"])
    dead = sqs.create_queue(QueueName=f"{name}-dlq",
                            Attributes=queue_attributes(template["CertTimeoutDeadLetterQueue"]))["QueueUrl"]
    dead_arn = sqs.get_queue_attributes(QueueUrl=dead, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    queue = sqs.create_queue(QueueName=name,
                             Attributes=queue_attributes(template["CertTimeoutQueue"], dead_arn))["QueueUrl"]
    kms = boto3.client("kms", endpoint_url=urls["KMS"])
    envelope = kms.create_key(**key_arguments(template["EnvelopeKey"]))["KeyMetadata"]["KeyId"]
    create_table(boto3.client("dynamodb", endpoint_url=urls["DYNAMODB"]), name, template["Table"])
    sns = boto3.client("sns", endpoint_url=urls["SNS"])
    sns.create_platform_application(Name="workstationDemo", Platform="APNS",
                                    Attributes={"PlatformCredential": "emulator", "PlatformPrincipal": "emulator"})
    values = dict(FIXED)
    values.update({f"AWS_ENDPOINT_URL_{service}": url for service, url in urls.items()})
    values.update(TABLE_NAME=name, QUEUE_URL=queue, DEAD_LETTER_QUEUE_URL=dead,
                  KMS_ENVELOPE_KEY_ID=envelope)
    return values


def main():
    values = provision({service: endpoint(service) for service in SERVICES})
    for key, value in values.items():
        print(f"export {key}={shlex.quote(value)}")


if __name__ == "__main__":
    main()
