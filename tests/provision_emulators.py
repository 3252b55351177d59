"""Creates what the AWS backend needs on emulators, and prints it as shell `export` lines.

    eval "$(AWS_ENDPOINT_URL=http://127.0.0.1:5000 python tests/provision_emulators.py)"
    rp-admin --backend aws create-table
    RP_BACKEND=aws rp-local

A queue with its dead-letter queue (the template's redrive: five receives), the envelope key
(symmetric) and the signing key (ECC_NIST_P256), the sample app's SNS platform application
(`app/APNS/workstationDemo`, which `rp-admin seed-samples` names), and a fresh table name; `rp-admin create-table`
then creates the table with its indexes. The endpoints come from `AWS_ENDPOINT_URL_<SERVICE>` or
`AWS_ENDPOINT_URL` and must be on the loopback interface: this never talks to an AWS account.
The region, dummy credentials and `AWS_EC2_METADATA_DISABLED` are set here, whatever the shell
has, and printed with the rest. Needs boto3 (moto's venv has it).
"""

import ipaddress
import json
import os
import shlex
import sys
import time
import urllib.parse

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


def provision(urls, prefix="rp-local"):
    """Creates the queues and keys on the emulators at `urls` (by service) and returns the
    variables the AWS backend reads, with the fixed region and credentials and the endpoints."""
    os.environ.pop("AWS_PROFILE", None)
    os.environ.pop("AWS_SESSION_TOKEN", None)
    os.environ.update(FIXED)
    import boto3

    name = f"{prefix}-{os.getpid()}-{int(time.time())}"
    sqs = boto3.client("sqs", endpoint_url=urls["SQS"])
    dead = sqs.create_queue(QueueName=f"{name}-dlq")["QueueUrl"]
    dead_arn = sqs.get_queue_attributes(QueueUrl=dead, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    redrive = json.dumps({"deadLetterTargetArn": dead_arn, "maxReceiveCount": "5"})
    queue = sqs.create_queue(QueueName=name, Attributes={"RedrivePolicy": redrive})["QueueUrl"]
    kms = boto3.client("kms", endpoint_url=urls["KMS"])
    envelope = kms.create_key(Description=f"{name} envelope")["KeyMetadata"]["KeyId"]
    signing = kms.create_key(Description=f"{name} signing", KeySpec="ECC_NIST_P256",
                             KeyUsage="SIGN_VERIFY")["KeyMetadata"]["KeyId"]
    sns = boto3.client("sns", endpoint_url=urls["SNS"])
    sns.create_platform_application(Name="workstationDemo", Platform="APNS",
                                    Attributes={"PlatformCredential": "emulator", "PlatformPrincipal": "emulator"})
    values = dict(FIXED)
    values.update({f"AWS_ENDPOINT_URL_{service}": url for service, url in urls.items()})
    values.update(TABLE_NAME=name, QUEUE_URL=queue, DEAD_LETTER_QUEUE_URL=dead,
                  KMS_ENVELOPE_KEY_ID=envelope, KMS_SIGNING_KEY_ID=signing)
    return values


def main():
    values = provision({service: endpoint(service) for service in SERVICES})
    for key, value in values.items():
        print(f"export {key}={shlex.quote(value)}")


if __name__ == "__main__":
    main()
