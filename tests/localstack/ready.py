"""Waits until LocalStack at $1 answers a real call on each service the backend uses.

Its health endpoint says "running" even when DynamoDB Local failed to start, so this asks each
service something: DynamoDB ListTables (answered by DynamoDB Local), SQS ListQueues, KMS ListKeys,
SNS ListTopics. Exits 0 when all four answered, 1 after the time-out ($2 seconds, default 120).
"""

import sys
import time

import boto3
from botocore.config import Config

url = sys.argv[1]
deadline = time.monotonic() + float(sys.argv[2] if len(sys.argv) > 2 else 120)
config = Config(retries={"max_attempts": 1}, connect_timeout=2, read_timeout=30)
session = boto3.session.Session(aws_access_key_id="test", aws_secret_access_key="test", region_name="us-east-1")
calls = {
    "dynamodb": lambda c: c.list_tables(Limit=1),
    "sqs": lambda c: c.list_queues(MaxResults=1),
    "kms": lambda c: c.list_keys(Limit=1),
    "sns": lambda c: c.list_topics(),
}
pending = dict(calls)
last = {}
while pending and time.monotonic() < deadline:
    for name, call in list(pending.items()):
        try:
            call(session.client(name, endpoint_url=url, config=config))
            del pending[name]
        except Exception as e:  # not up yet: the gateway, or the service behind it
            last[name] = f"{type(e).__name__}: {e}"
    if pending:
        time.sleep(0.5)
if pending:
    for name in pending:
        print(f"LocalStack's {name} did not answer: {last.get(name)}", file=sys.stderr)
    sys.exit(1)
