"""librdkafka aborts (SIGABRT) when a group-coordinator admin request times out before its
coordinator is found and the client lives on until the coordinator is found:

    rdkafka_queue.h:1086: rd_kafka_enq_once_del_source_return: Assertion `eonce->refcnt > 0' failed.

Needs only confluent-kafka and one live broker. One thread, one client, no destroy:
``describe_consumer_groups`` with a request timeout shorter than the FindCoordinator round trip
(or than a dead coordinator's fail-over), then the client is kept for a few seconds::

    python scripts/repro_enq_once_abort.py --bootstrap 127.0.0.1:9092            # aborts
    python scripts/repro_enq_once_abort.py --bootstrap 127.0.0.1:9092 --runs 30  # counts aborts
    python scripts/repro_enq_once_abort.py --bootstrap 127.0.0.1:9092 --workaround --runs 30

``--workaround`` is what eos-etl does instead: librdkafka's own request timeout far beyond the
caller's wait, the wait bounded by the future, and the client destroyed right after it, so the
request never times out inside a living client. See docs/librdkafka-enq-once-abort.md.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

from confluent_kafka import libversion, version
from confluent_kafka.admin import AdminClient


def attempt(args) -> None:
    print(f"confluent-kafka {version()}, librdkafka {libversion()[0]}", flush=True)
    client = AdminClient({"bootstrap.servers": args.bootstrap, "log_level": 0})
    request_timeout = 600.0 if args.workaround else args.request_timeout
    future = client.describe_consumer_groups([args.group], request_timeout=request_timeout)[args.group]
    try:
        future.result(timeout=args.request_timeout if args.workaround else None)
        print("answered (the coordinator was found within the timeout: try a shorter --request-timeout)")
    except Exception as exc:  # noqa: BLE001 - librdkafka's _TIMED_OUT, or the future's own TimeoutError
        print(f"request failed: {exc!r}", flush=True)
    if args.workaround:
        del client  # destroyed while its request is still pending: safe
    time.sleep(args.keep)  # the coordinator is found meanwhile: without the workaround, SIGABRT here
    print("survived", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", required=True, help="bootstrap.servers (may name a dead node first)")
    parser.add_argument("--group", default="repro-enq-once")
    parser.add_argument("--request-timeout", type=float, default=0.001,
                        help="seconds; shorter than the coordinator lookup (default 0.001)")
    parser.add_argument("--keep", type=float, default=3.0, help="seconds the client lives on afterwards")
    parser.add_argument("--workaround", action="store_true", help="long request timeout, client destroyed")
    parser.add_argument("--runs", type=int, default=0, help="run N attempts, each in a child process, and count")
    args = parser.parse_args()
    if not args.runs:
        attempt(args)
        return 0
    child = [sys.executable, __file__, "--bootstrap", args.bootstrap, "--group", args.group,
             "--request-timeout", str(args.request_timeout), "--keep", str(args.keep)]
    child += ["--workaround"] if args.workaround else []
    outcomes = []
    for i in range(args.runs):
        proc = subprocess.run(child, capture_output=True, text=True)
        assertion = [line for line in proc.stderr.splitlines() if "Assertion" in line]
        outcome = ("aborted" if proc.returncode == -6 else "answered" if "answered" in proc.stdout
                   else "failed, survived" if proc.returncode == 0 else f"exit {proc.returncode}")
        outcomes.append(outcome)
        print(f"run {i + 1}: {outcome} {assertion[0] if assertion else ''}", flush=True)
    print(f"{args.runs} runs: " + ", ".join(f"{outcomes.count(o)} {o}" for o in dict.fromkeys(outcomes)))
    return 1 if "aborted" in outcomes else 0


if __name__ == "__main__":
    sys.exit(main())
