"""The peers' bench cases (:mod:`..cases` runs them): each starts its peer in a process of its own, with the
spec the peer reads, and returns the peer's own result."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

from eos_etl.kafka.admin import ClusterAdmin
from eos_etl.kafka.connection import KafkaConnection

from . import kafka_streams
from .contract import LINEAGE_HEADERS, shop_contract
from .environment import HERE, peer_python, write_private


def case_q(spec) -> dict:
    """quixstreams, ``processing_guarantee="exactly-once"``, in its own environment (:mod:`.environment`)."""
    connection, topics = KafkaConnection.from_json(spec["connection"]), spec["topics"]
    client = {k: v for k, v in connection.client_config().items() if k != "bootstrap.servers"}
    app_spec = {"bootstrap_servers": connection.bootstrap_servers, "client_config": client, "group": spec["group"],
                "contract": shop_contract(spec["input_topic"], topics["invoices"], topics["shipments"],
                                          topics["dead_letters"]),
                "lineage_headers": LINEAGE_HEADERS, "run_id": spec["run_id"],
                "topic_id": ClusterAdmin(connection).topic_id(spec["input_topic"]),
                "expected_purchases": spec["expected_purchases"],
                "commit_interval_s": spec.get("commit_interval_s", 5.0)}
    work = Path(spec["work_dir"])
    app_spec_path, result_path = work / f"{spec['group']}.quix.json", work / f"{spec['group']}.quix.result.json"
    write_private(app_spec_path, json.dumps(app_spec))  # the client config may hold the password
    t0 = time.monotonic()
    python = peer_python("quixstreams")
    startup = time.monotonic() - t0
    subprocess.run([str(python), str(HERE / "quix_app.py"), str(app_spec_path), str(result_path)], check=True,
                   timeout=spec.get("timeout_s", 3600))
    result = json.loads(result_path.read_text())
    return {**result, "startup_s": startup + result.get("first_message_s", 0.0)}


def case_ks(spec) -> dict:
    """Kafka Streams, ``processing.guarantee=exactly_once_v2``, a thread per core (:mod:`.kafka_streams`)."""
    connection, topics = KafkaConnection.from_json(spec["connection"]), spec["topics"]
    contract = shop_contract(spec["input_topic"], topics["invoices"], topics["shipments"], topics["dead_letters"])
    work = Path(spec["work_dir"])
    spec_path, result_path = work / f"{spec['group']}.streams.properties", work / f"{spec['group']}.streams.json"
    t0 = time.monotonic()
    classpath = kafka_streams.classpath()
    kafka_streams.write_spec(spec_path, contract, LINEAGE_HEADERS, {
        "run_id": spec["run_id"], "topic_id": ClusterAdmin(connection).topic_id(spec["input_topic"]),
        "group": spec["group"], "expected_purchases": spec["expected_purchases"], "threads": os.cpu_count(),
        "state_dir": str(work / f"{spec['group']}.streams-state"), "timeout_s": spec.get("timeout_s", 3600)},
        connection)
    startup = time.monotonic() - t0
    subprocess.run(["java", "-cp", classpath, "ShopStreams", str(spec_path), str(result_path)], check=True,
                   timeout=spec.get("timeout_s", 3600) + 120)
    return {**json.loads(result_path.read_text()), "startup_s": startup}
