"""The quixstreams peer: the shop's transform as a quixstreams Application with
``processing_guarantee="exactly-once"`` (its transactional producer commits the outputs and the consumer
group's offsets together at each checkpoint), over the bench's purchases, from the group's start.

    <peers venv>/bin/python quix_app.py SPEC.json RESULT.json

Run by the bench's ``Q`` case in the peers' own environment (quixstreams pins a confluent-kafka older than
the project's): standard library, quixstreams and :mod:`shop_python` only. The app stops once it has
processed the purchases the spec says the input holds (a bounded backfill, as a user would run one) and
writes ``{"job_s", "purchases", "outputs", "first_message_s", "commit_interval_s"}``: ``job_s`` from
``run()`` to its return after the last checkpoint's commit, the consumer group's join included
(``first_message_s`` says how much of it that was).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # shop_python, beside this file

from quixstreams import Application, message_context  # noqa: E402 - after the path
from quixstreams.models.serializers import Serializer  # noqa: E402
from shop_python import Contract, outputs  # noqa: E402


class _ValueOf(Serializer):
    """An output's value bytes, as the transform made them (the row is the whole output)."""

    def __call__(self, value, ctx) -> bytes | None:
        return value[2]


def main(spec_path: str, result_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
    contract = Contract.from_json(spec["contract"])
    expected = spec["expected_purchases"]
    app = Application(broker_address=spec["bootstrap_servers"], consumer_group=spec["group"],
                      processing_guarantee="exactly-once", auto_offset_reset="earliest", auto_create_topics=False,
                      use_changelog_topics=False, loglevel="WARNING",
                      consumer_extra_config=spec["client_config"], producer_extra_config=spec["client_config"],
                      commit_interval=spec.get("commit_interval_s", 5.0))
    purchases = app.topic(contract.input_topic, key_deserializer="bytes", value_deserializer="bytes")
    out_topics = {name: app.topic(name, key_serializer="bytes", value_serializer=_ValueOf())
                  for name in contract.topics}
    names, run_id = spec["lineage_headers"], spec["run_id"]
    fixed_tail = [(names[4], spec["topic_id"].encode()), (names[5], spec["group"].encode())]
    seen = {"purchases": 0, "outputs": 0, "first": None}

    def transform(value, key, timestamp, _headers):
        ctx = message_context()
        if seen["first"] is None:
            seen["first"] = time.monotonic()
        lineage = [(names[0], contract.input_topic.encode()), (names[1], str(ctx.partition).encode()),
                   (names[2], str(ctx.offset).encode()), (names[3], run_id.encode()), *fixed_tail]
        made = [(topic, k, v, lineage + own) for topic, k, v, own in
                outputs(key, value, ctx.partition, ctx.offset, timestamp, contract)]
        seen["purchases"] += 1
        seen["outputs"] += len(made)
        if seen["purchases"] == expected:
            app.stop()  # the checkpoint in progress commits on the way out
        return made

    sdf = app.dataframe(purchases)
    sdf = sdf.apply(transform, metadata=True, expand=True)
    sdf = sdf.set_headers(lambda value, _key, _timestamp, _headers: value[3])
    sdf.to_topic(lambda value, _key, _timestamp, _headers: out_topics[value[0]], key=lambda value: value[1])
    t0 = time.monotonic()
    app.run()
    job = time.monotonic() - t0
    Path(result_path).write_text(json.dumps({
        "job_s": job, "purchases": seen["purchases"], "outputs": seen["outputs"],
        "first_message_s": round(seen["first"] - t0, 3) if seen["first"] else None,
        "commit_interval_s": spec.get("commit_interval_s", 5.0)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
