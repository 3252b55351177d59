"""Cold starts, warm invocations and binary sizes of every function, against a hello-world
`lambda_http` binary built in the same run (python3 with boto3 and moto's server, which CI's venv
does not have: `python3 -m venv .ci/cache/bench && .ci/cache/bench/bin/pip install 'moto[server]==5.*' boto3`).

    .ci/cache/bench/bin/python tests/bench/cold_start.py            # builds, then measures
    .ci/cache/bench/bin/python tests/bench/cold_start.py --no-build --runs 12 --warm 30

It builds the release binaries (`cargo build --release`: every function and `hello-lambda`),
starts moto on loopback (or uses `AWS_ENDPOINT_URL` if it names 127.0.0.1; the table goes to
`AWS_ENDPOINT_URL_DYNAMODB` instead if that names 127.0.0.1, e.g. DynamoDB Local), creates the queue,
the KMS keys and the table, and seeds the sample fixtures (`rp-admin --backend aws
seed-samples`). Then, for each function, `--runs` times: it starts the binary under a Lambda
Runtime API of its own on loopback, with the Lambda environment and every AWS client pointed at
moto, and hands it the function's sample event (`events/<function>.json`) `1 + --warm` times.
Each of those starts follows one of hello-world's, and a function's ratios are to the
hello-world starts made beside its own, so that the machine's drift over a run cancels out.
Every function is first started once unmeasured, so that the emulators have compiled their
request paths (DynamoDB Local is a JVM) before any function is measured.

- init: process start to the runtime's first request for an event (the cold start's own work);
- cold start: process start to the first response (init plus the first invocation, with the
  store calls it makes);
- warm: the Runtime API handing out an event to its response, over the later invocations;
- first invocation: the runtime handing out the first event to its response (cold start less
  init, medians): the store calls, plus the one-off work of a first request (the first
  connection to each service, the SDK's lazy set-up);
- floor × hello: each start's init plus its warm p50, median, over hello-world's cold start: the
  least the cold start could be if the first invocation cost no more than a warm one. A function
  whose floor is over 2× cannot meet the 2× cold-start target on these emulators, whatever its
  start-up does, because its warm calls to them already take the difference (printed after the
  table, with how many meet the target);
- size: the stripped binary.

`--phases` also reads each process's minor page faults and on-CPU time (`/proc/<pid>/stat` and
each thread's `schedstat`) when it asks for an event and when it answers, and prints them per
phase (init; the first invocation; the second, a warm one), medians: what a first invocation
costs the process itself, as against what it waits for. Each read (about 25 µs here) is made
while the process waits for the Runtime API, so it adds to the measured times: compare the main
table of a `--phases` run only with another `--phases` run.

The samples change state (a lease, a registration), so after their first success some answer
4xx on later runs; every answer's status is reported. The OOB start sample gets a fresh session
nonce at every invocation, so that its rows time starts, not replays. Prints a Markdown table
(medians, p90, and the cold-start ratio to hello-world), then which heavy crates (redb, rcgen, qrcode, QuickJS,
the AWS SDK's services) each function links; `--links-only` prints only that, from the binaries
already built, in a second."""

import argparse
import http.server
import json
import os
import pathlib
import queue
import re
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parents[2]
# Where `cargo build --release` puts the binaries (`--binaries` names another directory).
RELEASE = ROOT / "target" / "release"


def process_counters(pid):
    """Minor page faults and on-CPU milliseconds (over the threads alive now) of `pid`."""
    with open(f"/proc/{pid}/stat") as f:
        faults = int(f.read().rsplit(")", 1)[1].split()[7])
    cpu_ns = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                cpu_ns += int(f.read().split()[0])
        except FileNotFoundError:  # the thread ended between the listing and the read
            pass
    return faults, cpu_ns / 1e6


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(port, seconds=30):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"nothing listens on 127.0.0.1:{port}")


# The OOB start sample's session nonce. Each invocation gets a fresh one, so that a start is
# measured rather than a replay (refused with 409 before the tenant's customizations run).
SAMPLE_NONCE = b"5" * 64


def fresh_nonce(event):
    return event.replace(SAMPLE_NONCE, secrets.token_hex(32).encode()) if SAMPLE_NONCE in event else event


class RuntimeApi(http.server.ThreadingHTTPServer):
    """The Lambda Runtime API of one process: hands out `event` `count` times, then holds the
    next request until `close`. A server per process, so that nothing a killed process left
    in flight reaches the next one."""

    daemon_threads = True

    def __init__(self, event, count, phases=False):
        super().__init__(("127.0.0.1", 0), Handler)
        self.event, self.left, self.answers, self.handed = event, count, queue.Queue(), {}
        self.done = threading.Event()
        # With `phases`: the process's counters at each request for an event and each answer.
        self.phases, self.pid, self.counters = phases, None, []
        self.started = threading.Event()
        threading.Thread(target=self.serve_forever, daemon=True).start()

    def handle_error(self, request, client_address):
        # A process is killed while it holds a request for its next event: the reset that
        # follows is expected, not worth a traceback.
        pass

    def close(self):
        self.done.set()
        self.shutdown()
        self.server_close()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def count(self):
        api = self.server
        if api.phases:
            api.started.wait()  # the pid is known once Popen returned
            api.counters.append(process_counters(api.pid))

    def do_GET(self):
        self.count()
        api = self.server
        if api.left <= 0:
            api.done.wait()
            return
        api.left -= 1
        request_id = f"invocation-{api.left}"
        body = fresh_nonce(api.event)
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.send_header("lambda-runtime-aws-request-id", request_id)
        self.send_header("lambda-runtime-deadline-ms", str(int(time.time() * 1000) + 30_000))
        self.send_header("lambda-runtime-invoked-function-arn", "arn:aws:lambda:us-east-1:123456789012:function:bench")
        self.end_headers()
        api.handed[request_id] = time.perf_counter()
        self.wfile.write(body)

    def do_POST(self):
        at = time.perf_counter()
        self.count()
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            body = b""
            while size := int(self.rfile.readline().split(b";")[0], 16):
                body += self.rfile.read(size)
                self.rfile.readline()
            self.rfile.readline()
        else:
            body = self.rfile.read(int(self.headers.get("content-length", 0)))
        request_id = self.path.split("/")[-2]
        try:
            answer = json.loads(body)
        except ValueError:
            answer = None
        if self.path.endswith("/error") or not isinstance(answer, dict):
            status = "error"
        elif "batchItemFailures" in answer:
            # The queue consumer: an SQS batch response.
            status = "sqs-failed" if answer["batchItemFailures"] else "sqs-ok"
        else:
            status = answer.get("statusCode", "?")
        self.send_response(202)
        self.send_header("content-length", "2")
        self.end_headers()
        self.wfile.write(b"{}")
        self.server.answers.put((request_id, at, status))


# The crates whose presence in a binary is worth reporting: the ones the issue asked functions
# not to carry unless they need them, and the AWS SDK's service crates.
HEAVY = re.compile(rb"(redb|rcgen|qrcode|rquickjs-core|aws-sdk-[a-z]+)-[0-9]+\.[0-9]+\.[0-9]+")


def linked_crates(binary):
    """The heavy crates `binary` links, found by the source paths of their panic locations (a
    stripped binary keeps them): a crate none of whose code is linked leaves no such path."""
    return sorted({m.group(1).decode() for m in HEAVY.finditer(binary.read_bytes())})


def print_links(release, names):
    """Which functions (binaries in `release`) link which heavy crates, one row per distinct set."""
    groups = {}
    for name in names:
        binary = release / name
        crates = tuple(linked_crates(binary)) if binary.exists() else ("(not built)",)
        groups.setdefault(crates, []).append(name)
    print("| heavy crates linked | functions |")
    print("|---|---|")
    for crates, group in sorted(groups.items(), key=lambda g: (-len(g[1]), g[0])):
        listed = ", ".join(group) if len(group) <= 10 else f"the other {len(group)}"
        print(f"| {', '.join(crates) or '(none)'} | {listed} |")


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def no_samples():
    """What `measure` returns, before any start: init, cold-start and warm times, the statuses
    seen, the `--phases` counters, and each start's floor (its init plus its warm p50)."""
    return [], [], [], set(), [], []


def measure(binary, event, env, runs, warm, phases=False):
    inits, colds, warms, statuses, counted, floors = no_samples()
    for _ in range(runs):
        api = RuntimeApi(event, 1 + warm, phases)
        env = dict(env, AWS_LAMBDA_RUNTIME_API=f"127.0.0.1:{api.server_address[1]}")
        with tempfile.TemporaryFile() as log:
            started = time.perf_counter()
            process = subprocess.Popen([str(binary)], env=env, stdout=subprocess.DEVNULL, stderr=log)
            api.pid = process.pid
            api.started.set()
            try:
                for i in range(1 + warm):
                    request_id, at, status = api.answers.get(timeout=30)
                    statuses.add(status)
                    if i == 0:
                        inits.append((min(api.handed.values()) - started) * 1000)
                        colds.append((at - started) * 1000)
                    else:
                        warms.append((at - api.handed[request_id]) * 1000)
                if warm:
                    floors.append(inits[-1] + statistics.median(warms[-warm:]))
                if phases and warm:
                    # Requests and answers alternate: init ends at the first request, the first
                    # invocation at the first answer; the second runs from the second request.
                    (f0, c0), (f1, c1), (f2, c2), (f3, c3) = api.counters[:4]
                    counted.append((f0, c0, f1 - f0, c1 - c0, f3 - f2, c3 - c2))
            except queue.Empty:
                process.kill()
                process.wait()
                log.seek(0)
                raise SystemExit(f"{binary.name} did not answer:\n{log.read().decode()[-2000:]}")
            finally:
                process.kill()
                process.wait()
                api.close()
    return inits, colds, warms, statuses, counted, floors


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=12, help="cold starts per function")
    parser.add_argument("--warm", type=int, default=20, help="warm invocations after each cold start")
    parser.add_argument("--no-build", action="store_true", help="use the release binaries already built")
    parser.add_argument("--only", help="comma-separated functions to measure (default: all)")
    parser.add_argument("--links-only", action="store_true",
                        help="only report which heavy crates each built function links, starting nothing")
    parser.add_argument("--binaries", type=pathlib.Path, default=RELEASE,
                        help="where the release binaries are (another target dir's, e.g. an unstripped build "
                             "to profile); implies --no-build")
    parser.add_argument("--phases", action="store_true",
                        help="also report page faults and CPU time per phase (the reads add to the times)")
    args = parser.parse_args()
    release = args.binaries.resolve()

    functions = sorted(p.name for p in (ROOT / "functions").iterdir())
    if args.only:
        functions = [f for f in functions if f in args.only.split(",")]
    if args.links_only:
        print_links(release, functions)
        return
    if not args.no_build and release == RELEASE:
        # Beside the functions measured: the baseline, `rp-admin` (which seeds the table) and
        # `cc-app-rate-limit` (which lifts the sample app's limit before each function).
        helpers = ["hello-lambda", "rp-shared", "cc-app-rate-limit"]
        packages = [a for f in sorted(set(functions + helpers)) for a in ("-p", f)]
        subprocess.run(["cargo", "build", "--release", "-q", *packages], cwd=ROOT, check=True)

    # Nothing reaches AWS: dummy credentials, no instance metadata, every endpoint on loopback.
    aws = {
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_EC2_METADATA_DISABLED": "true",
        "PATH": os.environ["PATH"],
    }
    # Where the functions' TLS client finds its roots, if the caller says (as on Lambda).
    aws.update({k: os.environ[k] for k in ("SSL_CERT_FILE", "SSL_CERT_DIR", "TLS_TRUST_ROOTS") if k in os.environ})
    moto = None
    endpoint = os.environ.get("AWS_ENDPOINT_URL", "")
    if not endpoint.startswith("http://127.0.0.1:"):
        port = free_port()
        moto_server = pathlib.Path(sys.executable).with_name("moto_server")
        moto = subprocess.Popen([str(moto_server), "-H", "127.0.0.1", "-p", str(port)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(port)
        endpoint = f"http://127.0.0.1:{port}"
    aws["AWS_ENDPOINT_URL"] = endpoint
    # DynamoDB Local (or another emulator) for the table, if the caller names one on loopback.
    dynamodb = os.environ.get("AWS_ENDPOINT_URL_DYNAMODB", "")
    if dynamodb.startswith("http://127.0.0.1:"):
        aws["AWS_ENDPOINT_URL_DYNAMODB"] = dynamodb
    os.environ.update(aws)
    try:
        # The queues, keys and table name, as `tests/provision_emulators.py` makes them.
        sys.path.insert(0, str(ROOT / "tests"))
        from provision_emulators import SERVICES, provision

        urls = {service: aws.get(f"AWS_ENDPOINT_URL_{service}", endpoint) for service in SERVICES}
        lambda_env = dict(aws, **provision(urls, prefix="rp-bench"))
        lambda_env.update(AWS_LAMBDA_FUNCTION_MEMORY_SIZE="1024",
                          AWS_LAMBDA_FUNCTION_VERSION="$LATEST",
                          AWS_LAMBDA_LOG_LEVEL=os.environ.get("AWS_LAMBDA_LOG_LEVEL", "WARN"))
        admin = [str(release / "rp-admin"), "--backend", "aws"]
        subprocess.run(admin + ["create-table"], env=lambda_env, check=True, stdout=subprocess.DEVNULL)
        subprocess.run(admin + ["seed-samples"], env=lambda_env, check=True, stdout=subprocess.DEVNULL)

        # The samples share one app, whose customization calls are rate-limited (the
        # cc-app-rate-limit sample sets 600 a minute): before each function, the limit goes to the
        # most the API allows, so that no sample answers 429 for the calls the others made.
        unlimit = json.loads((ROOT / "events" / "cc-app-rate-limit.json").read_text())
        unlimit["body"] = json.dumps({"limit": 100_000, "windowSecs": 60})
        unlimit = json.dumps(unlimit).encode()
        unlimit_env = dict(lambda_env, AWS_LAMBDA_FUNCTION_NAME="cc-app-rate-limit")

        health_event = (ROOT / "events" / "health.json").read_bytes()

        def event_of(name):
            return health_event if name == "hello-lambda" else (ROOT / "events" / f"{name}.json").read_bytes()

        def start(name):
            """One cold start of `name` and its warm invocations."""
            env = dict(lambda_env, AWS_LAMBDA_FUNCTION_NAME=name)
            return measure(release / name, event_of(name), env, 1, args.warm, args.phases)

        # One unmeasured start of every function first: the emulators (DynamoDB Local is a JVM)
        # compile their request paths during their first calls, which would otherwise land on
        # the functions measured first. Their answers count among the statuses seen.
        # Per function (hello-world's row first): init, cold start and warm samples, and the
        # statuses seen; and per function, the hello-world samples taken beside its own.
        samples = {"hello-lambda": no_samples()}
        beside = {}
        start("hello-lambda")
        for name in functions:
            measure(release / "cc-app-rate-limit", unlimit, unlimit_env, 1, 0)
            samples.setdefault(name, no_samples())[3].update(start(name)[3])

        # Each start of a function follows a start of hello-world, so that every ratio compares
        # starts made side by side: the machine's pace drifts over a run (hello-world's init has
        # been 2.2-2.9 ms in separate runs here), and a baseline taken once would carry that
        # drift into every ratio.
        def add(into, got):
            for mine, new in zip(into, got):
                if isinstance(mine, set):
                    mine |= new
                else:
                    mine += new

        for name in functions:
            measure(release / "cc-app-rate-limit", unlimit, unlimit_env, 1, 0)
            mine, hello = samples[name], beside.setdefault(name, no_samples())
            for _ in range(args.runs):
                got_hello = start("hello-lambda")
                add(hello, got_hello)
                add(samples["hello-lambda"], got_hello)
                add(mine, start(name))
            print(f"{name}: cold {statistics.median(mine[1]):.1f} ms, hello-world beside it "
                  f"{statistics.median(hello[1]):.1f} ms", file=sys.stderr)
    finally:
        if moto:
            moto.terminate()

    rows = []
    for name, (inits, colds, warms, statuses, _, floors) in samples.items():
        # The ratios: to the hello-world starts made beside this function's.
        base_inits, base_colds = beside.get(name, samples["hello-lambda"])[:2]
        rows.append((name, statistics.median(inits), statistics.median(inits) / statistics.median(base_inits),
                     statistics.median(colds), percentile(colds, 90),
                     statistics.median(colds) / statistics.median(base_colds),
                     statistics.median(c - i for c, i in zip(colds, inits)),
                     statistics.median(warms) if warms else float("nan"),
                     statistics.median(floors) / statistics.median(base_colds) if floors else float("nan"),
                     (release / name).stat().st_size / 1e6, ",".join(str(s) for s in sorted(statuses, key=str))))
    store = f", DynamoDB at {aws['AWS_ENDPOINT_URL_DYNAMODB']}" if "AWS_ENDPOINT_URL_DYNAMODB" in aws else ""
    print(f"\n{args.runs} cold starts and {args.runs * args.warm} warm invocations per function, each start "
          f"after one of hello-world's; moto at {endpoint}{store}\n")
    print("| function | init, median | × hello | cold start, median | p90 | × hello | first invocation "
          "| warm, p50 | floor × hello | size (MB) | statuses |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    # The functions that link an AWS client, against the 2× cold-start target, and which of them
    # no start-up work could bring to it on these emulators: their floor is over 2× already.
    backed, met, out_of_reach = [], [], []
    for name, init, init_ratio, cold, p90, cold_ratio, first, warm, floor, size, statuses in rows:
        print(f"| {name} | {init:.1f} ms | {init_ratio:.2f} | {cold:.1f} ms | {p90:.1f} ms | {cold_ratio:.2f} "
              f"| {first:.1f} ms | {warm:.2f} ms | {floor:.2f} | {size:.1f} | {statuses} |")
        if any(crate.startswith("aws-sdk-") for crate in linked_crates(release / name)):
            backed.append(name)
            if cold_ratio <= 2:
                met.append(name)
            if floor > 2:
                out_of_reach.append(name)
    if backed and args.warm:
        print(f"\nCold start ≤ 2× hello-world: {len(met)} of {len(backed)} AWS-backed functions. "
              f"Floor over 2× (out of reach on these emulators): {len(out_of_reach)}"
              + (f" ({', '.join(out_of_reach)})" if out_of_reach else "") + ".")
    if args.phases:
        print("\nWhat each phase costs the process itself (medians): minor page faults and on-CPU time over "
              "its threads; the rest of a phase's time is waiting (for the emulators, the Runtime API)\n")
        print("| function | init: faults | init: CPU | first invocation: faults | CPU | warm invocation: faults "
              "| CPU |")
        print("|---|---|---|---|---|---|---|")
        for name, sample in samples.items():
            if sample[4]:
                f0, c0, f1, c1, f2, c2 = (statistics.median(column) for column in zip(*sample[4]))
                print(f"| {name} | {f0:.0f} | {c0:.2f} ms | {f1:.0f} | {c1:.2f} ms | {f2:.0f} | {c2:.2f} ms |")
    print()
    print_links(release, functions)


if __name__ == "__main__":
    main()
