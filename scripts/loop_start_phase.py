"""Repeat the two start-phase broker faults that once aborted librdkafka, on one three-node cluster.

* ``dead-bootstrap``: the first node of the bootstrap list SIGKILLed (still in the metadata, KRaft
  fences it after 9 s), then ``run-window`` over 300 purchases: it must exit 0, with no ``error:``
  line and no traceback, and the checker must be exact; the node is restarted after each run.
* ``early-kill``: a random node SIGKILLed at a random moment of a run's first 10 s (the lab's
  ``start_phase_broker_kill``, seeds 1..N): exit 0 or one clear error, never a signal, checker exact.

A run that ends by a signal (SIGABRT is -6) counts as an abort. Prints one line per run and a table::

    .venv/bin/python scripts/loop_start_phase.py --runs 30
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from eos_etl.checker import check_shop
from eos_etl.embedded.kafka_cluster import KafkaCluster
from eos_etl.kafka.admin import ClusterAdmin
from eos_etl.kafka.connection import KafkaConnection
from eos_etl.kafka.topics import ensure_topics
from eos_etl.shop.generator import generate
from eos_etl.shop.schema import ShopTopics
from eos_etl.shop.settings import ShopSettings
from eos_etl_lab.faults import Lab
from eos_etl_lab.faults import broker_scenarios as sc


def _shop(cluster: KafkaCluster) -> ShopSettings:
    connection = KafkaConnection(cluster.bootstrap_servers)
    tag = f"loop-{uuid.uuid4().hex[:10]}"
    topics = ShopTopics(purchases=f"purchases-{tag}", invoices=f"invoices-{tag}", shipments=f"shipments-{tag}",
                        dead_letters=f"purchases-{tag}.dlq")
    shop = ShopSettings(connection=connection, topics=topics, group=f"group-{tag}", transactional_id_prefix=tag)
    ensure_topics(ClusterAdmin(connection), shop.specs(2))
    return shop


def dead_bootstrap(cluster: KafkaCluster, run: int) -> tuple[bool, str]:
    shop = _shop(cluster)
    generate(shop.connection, shop.topics.purchases, 300, seed=run)
    dead = cluster.nodes[0]
    dead.kill()
    try:
        t = shop.topics
        res = subprocess.run(
            [sys.executable, "-m", "eos_etl", "run-window", "--bootstrap-servers", cluster.bootstrap_servers,
             "--input-topic", t.purchases, "--invoices-topic", t.invoices, "--shipments-topic", t.shipments,
             "--dlq-topic", t.dead_letters, "--group", shop.group, "--transactional-id-prefix",
             shop.transactional_id_prefix, "--compact"],
            capture_output=True, text=True, timeout=300, env=os.environ.copy())
    finally:
        dead.start(timeout=300)
        cluster.wait_in_sync()
    errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    ok = res.returncode == 0 and not errors and "Traceback" not in res.stderr and check_shop(shop).ok
    return ok, f"exit={res.returncode}" + (f" {errors[0]}" if errors else "")


def early_kill(cluster: KafkaCluster, run: int, log_dir: Path) -> tuple[bool, str]:
    cluster.wait_in_sync()
    lab = Lab(KafkaConnection(cluster.bootstrap_servers), broker=cluster, log_dir=log_dir)
    result = sc.start_phase_broker_kill(lab, run, records=300)
    ok = not result.error and result.kills == 1 and result.violations == {} and result.lso_settled
    return ok, f"exit={result.exit_code} {result.error or ''} {result.detail[:160]}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--only", choices=("dead-bootstrap", "early-kill"))
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="loop-start-phase-"))
    cluster = KafkaCluster(home=home / "kafka", size=3)
    cluster.start()
    tally: dict[str, list[int]] = {}
    try:
        for name in ("dead-bootstrap", "early-kill"):
            if args.only and name != args.only:
                continue
            passed = aborted = 0
            for run in range(1, args.runs + 1):
                started = time.monotonic()
                ok, detail = (dead_bootstrap(cluster, run) if name == "dead-bootstrap"
                              else early_kill(cluster, run, home / "logs"))
                aborted += "exit=-" in detail  # ended by a signal
                passed += ok
                print(f"{name} {run:>3}: {'pass' if ok else 'FAIL'} {time.monotonic() - started:5.1f}s {detail}",
                      flush=True)
            tally[name] = [passed, aborted]
    finally:
        cluster.stop()
    print("\n| loop | runs | passed | ended by a signal |\n|---|--:|--:|--:|")
    for name, (passed, aborted) in tally.items():
        print(f"| {name} | {args.runs} | {passed} | {aborted} |")
    return 0 if all(p == args.runs and a == 0 for p, a in tally.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
