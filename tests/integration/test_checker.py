"""The independent checker must catch every kind of violation (fed hand-broken outputs)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from eos_etl.checker import check_shop


def _headers(shop, offset: int, partition: int = 0):
    return [("source_topic", shop.topics.purchases.encode()), ("source_partition", str(partition).encode()),
            ("source_offset", str(offset).encode()), ("run_id", b"hand")]


@pytest.fixture
def world(shop_factory):
    """Input: offsets 0-5 committed records, an aborted transaction (6-7 + marker),
    then 9-10 committed; the group's committed offset is 11. Outputs correct so far."""
    shop = shop_factory(partitions=1)
    conf = shop.connection.client_config()
    p = Producer({**conf, "transactional.id": f"in-{shop.group}"})
    p.init_transactions(30)
    for batch, commit in (([b"a"] * 6, True), ([b"x"] * 2, False), ([b"b"] * 2, True)):
        p.begin_transaction()
        for v in batch:
            p.produce(shop.topics.purchases, v)
        p.flush(10)
        (p.commit_transaction if commit else p.abort_transaction)(30)
    # offsets: 0..5 records, 6 commit marker, 7..8 aborted, 9 abort marker, 10..11 records, 12 marker
    committed_inputs = [0, 1, 2, 3, 4, 5, 10, 11]
    out = Producer({**conf, "transactional.id": f"out-{shop.group}"})
    out.init_transactions(30)
    out.begin_transaction()
    for off in committed_inputs:
        out.produce(shop.topics.invoices, b"{}", b"k", headers=_headers(shop, off))
        out.produce(shop.topics.shipments, b"{}", b"k", headers=_headers(shop, off))
    group = Consumer({**conf, "group.id": shop.group})
    out.send_offsets_to_transaction([TopicPartition(shop.topics.purchases, 0, 13)], group.consumer_group_metadata(), 30)
    out.commit_transaction(30)
    return shop, Producer(conf)


def test_clean_world_passes(world):
    shop, _ = world
    report = check_shop(shop, expected_ends={0: 13})
    assert report.ok, report.to_dict()
    assert report.partitions[0].committed_inputs == 8


@pytest.mark.parametrize("defect, kind", [
    ("duplicate", "duplicate"),
    ("orphan_invoice", "torn"),
    ("beyond_commit", "beyond_commit"),
    ("from_aborted", "from_aborted_input"),
    ("out_of_order", "order"),
])
def test_each_violation_is_reported(world, defect, kind):
    shop, p = world
    t = shop.topics
    if defect == "duplicate":
        p.produce(t.invoices, b"{}", b"k", headers=_headers(shop, 3))
    elif defect == "orphan_invoice":
        # input 4 gets a dead letter too: a pair plus a dead letter is torn
        p.produce(t.dead_letters, b"{}", b"k", headers=_headers(shop, 4))
    elif defect == "beyond_commit":
        p.produce(t.invoices, b"{}", b"k", headers=_headers(shop, 20))
    elif defect == "from_aborted":
        p.produce(t.invoices, b"{}", b"k", headers=_headers(shop, 7))
    elif defect == "out_of_order":
        p.produce(t.shipments, b"{}", b"k", headers=_headers(shop, 1))
    p.flush(10)
    report = check_shop(shop, expected_ends={0: 13})
    assert not report.ok
    assert report.violations[kind] >= 1, report.to_dict()


def test_lost_input_and_offset_mismatch(shop_factory):
    shop = shop_factory(partitions=1)
    conf = shop.connection.client_config()
    p = Producer({**conf, "transactional.id": f"t-{shop.group}"})
    p.init_transactions(30)
    p.begin_transaction()
    for _ in range(3):
        p.produce(shop.topics.purchases, b"a")
    p.flush(10)
    p.commit_transaction(30)
    p.begin_transaction()
    # only input 0 gets outputs, but offsets claim all of 0..2 are done
    p.produce(shop.topics.invoices, b"{}", headers=_headers(shop, 0))
    p.produce(shop.topics.shipments, b"{}", headers=_headers(shop, 0))
    group = Consumer({**conf, "group.id": shop.group})
    p.send_offsets_to_transaction([TopicPartition(shop.topics.purchases, 0, 3)], group.consumer_group_metadata(), 30)
    p.commit_transaction(30)
    report = check_shop(shop, expected_ends={0: 4})
    assert report.violations["lost"] == 2
    assert report.violations["offset_mismatch"] == 1


def test_check_cli_exits_non_zero_on_violations(world):
    shop, p = world
    args = [sys.executable, "-m", "eos_etl", "check", "--bootstrap-servers", shop.connection.bootstrap_servers,
            "--input-topic", shop.topics.purchases, "--invoices-topic", shop.topics.invoices,
            "--shipments-topic", shop.topics.shipments, "--dlq-topic", shop.topics.dead_letters,
            "--group", shop.group, "--expected-ends", '{"0": 13}']
    ok = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr[-2000:]
    assert json.loads(ok.stdout)["ok"] is True
    p.produce(shop.topics.invoices, b"{}", b"k", headers=_headers(shop, 3))
    p.flush(10)
    bad = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1 and "duplicate" in bad.stderr


def test_a_commit_between_the_offsets_and_the_outputs_is_read_again_not_reported(world, monkeypatch):
    """An orphaned task (a killed Spark Connect client's, still on the server) commits outputs and offsets
    in one transaction while the checker reads: between its read of the offsets and its read of the outputs.
    Its outputs are not beyond the commit: the checker sees the offsets move and judges again."""
    from eos_etl import checker

    shop, _ = world
    conf = shop.connection.client_config()
    inp = Producer({**conf, "transactional.id": f"in2-{shop.group}"})
    inp.init_transactions(30)
    inp.begin_transaction()
    for v in (b"c", b"d"):  # offsets 13, 14, then the marker at 15
        inp.produce(shop.topics.purchases, v)
    inp.commit_transaction(30)
    orphan = Producer({**conf, "transactional.id": f"out-{shop.group}"})
    orphan.init_transactions(30)
    real_read, commits = checker._OutputScan.read, []

    def read_after_a_commit(self, connection, topic, start=None):
        if not commits:  # once: after the checker read the offsets (13), before it reads any output
            orphan.begin_transaction()
            for off in (13, 14):
                for out in (shop.topics.invoices, shop.topics.shipments):
                    orphan.produce(out, b"{}", b"k", headers=_headers(shop, off))
            group = Consumer({**conf, "group.id": shop.group})
            orphan.send_offsets_to_transaction([TopicPartition(shop.topics.purchases, 0, 16)],
                                               group.consumer_group_metadata(), 30)
            orphan.commit_transaction(30)
            group.close()
            commits.append(1)
        return real_read(self, connection, topic, start)

    monkeypatch.setattr(checker._OutputScan, "read", read_after_a_commit)
    report = check_shop(shop, expected_ends={0: 16})
    assert commits and report.ok, report.to_dict()
    assert report.partitions[0].committed_offset == 16 and report.partitions[0].committed_inputs == 10
