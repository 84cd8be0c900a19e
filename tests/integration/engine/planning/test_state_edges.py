"""States a pipeline reaches at its edges, and how it leaves them, through the CLI on a real broker.

* a first run killed while it committed the partitions' starts (some have a start, some not);
* a first run killed while some input partitions are still empty;
* a partition added to the input while a run is in flight;
* an input topic deleted and created again (the checkpoint records name the old topic's id; the
  new log shorter, then longer, than the old positions): exit 2 with one line naming the command
  that recovers, that command, then exact again;
* ``plan-window`` while a transaction holds the group's offsets: it writes and fences nothing.

Broker-free rules of the same: tests/unit/engine/planning/test_state_edges.py.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace

import pytest
from confluent_kafka.admin import AdminClient, NewPartitions

from eos_etl.checker import check_shop, read_topic
from eos_etl.engine import checkpoint_log
from eos_etl.engine.planning.planner import with_committed_grouping
from eos_etl.engine.publishing.checkpoint import PartitionCheckpoint
from eos_etl.engine.publishing.producer import TransactionalProducer
from eos_etl.engine.publishing.publisher import publish_without_spark
from eos_etl.engine.window import OffsetRange
from eos_etl.kafka.admin import ClusterAdmin
from eos_etl.kafka.group_offsets import GroupOffsetsReader
from eos_etl.shop.generator import generate
from eos_etl.shop.settings import ShopSettings
from eos_etl_lab.faults import Lab
from tests.support.cli import cli, shop_args

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.fixture
def lab(connection) -> Lab:
    return Lab(connection)


def group_offsets(shop: ShopSettings) -> dict[int, int | None]:
    """The group's last completed commits as the broker has them now (a pending one not waited for)."""
    parts = ClusterAdmin(shop.connection).partitions(shop.topics.purchases)
    with GroupOffsetsReader(shop.connection.client_config(), shop.group) as reader:
        return reader.unstable(shop.topics.purchases, parts, 10)


def run_window(shop: ShopSettings, *extra: str, env: dict | None = None):
    return cli("run-window", "--bootstrap-servers", shop.connection.bootstrap_servers, *shop_args(shop),
               "--compact", *extra, env=env, timeout=600)


def summary_of(res) -> dict:
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


def error_lines(res) -> list[str]:
    return [line for line in res.stderr.splitlines() if line.startswith("error:")]


def checkpoint_records(shop: ShopSettings) -> dict[int, checkpoint_log.CheckpointEntry]:
    pipeline = shop.pipeline()
    return checkpoint_log.read_entries(shop.connection, pipeline.checkpoint_topic, shop.group, pipeline.input_topic)


def add_partitions(shop: ShopSettings, count: int, *, checkpoint_too: bool = True) -> None:
    admin = AdminClient(shop.connection.client_config())
    grow = [NewPartitions(shop.topics.purchases, count)]
    if checkpoint_too:
        grow.append(NewPartitions(shop.pipeline().checkpoint_topic, count))
    for fut in admin.create_partitions(grow).values():
        fut.result(30)


def assert_exact(lab: Lab, shop: ShopSettings, valid: int) -> None:
    report = check_shop(shop, expected_ends=lab.input_ends(shop))
    assert report.ok, report.to_dict()["violations"]
    assert len(read_topic(shop.connection, shop.topics.invoices)) == valid


def test_a_first_run_killed_while_committing_the_starts_is_a_fresh_start(lab):
    """The state a first run leaves when it dies while it commits the partitions' starts: partitions 0
    and 2 have their start committed and checkpointed (the same call the run makes), partition 1 has
    neither, and nothing was published. The next run starts partition 1 from its start: exit 0, exact."""
    shop = lab.make_shop(3, name="killed-starts")
    stats = generate(shop.connection, shop.topics.purchases, 6000, invalid_share=0.05, seed=61)
    publish_without_spark(replace(with_committed_grouping(lab.admin, shop.pipeline(run_id="killed-first-run")),
                                  input_topic_id=lab.admin.topic_id(shop.topics.purchases)),
                          {0: OffsetRange(0, 0), 2: OffsetRange(0, 0)})
    assert group_offsets(shop) == {0: 0, 1: None, 2: 0}
    assert {p: (e.next_offset, e.input_partitions) for p, e in checkpoint_records(shop).items()} == {
        0: (0, 3), 2: (0, 3)}

    res = run_window(shop)
    summary = summary_of(res)
    assert summary["invoices"] == stats.valid and summary["records_read"] == stats.produced
    assert_exact(lab, shop, stats.valid)


def test_a_first_run_killed_with_empty_partitions_is_a_fresh_start(lab):
    """4 input partitions, 2 purchases (two or more partitions empty); the first run is killed while a
    partition's task publishes. The next run goes on (exit 0), as does the one after 400 more."""
    shop = lab.make_shop(4, name="killed-empty")
    first = generate(shop.connection, shop.topics.purchases, 2, invalid_share=0.0, seed=62)
    nonempty = sorted(p for p, o in lab.admin.offsets(shop.topics.purchases, [0, 1, 2, 3]).items()
                      if o.last_stable > 0)
    assert 1 <= len(nonempty) <= 2
    job = lab.job(shop, failpoints=f"after_init=stop,partition={nonempty[0]}").start()
    try:
        assert job.wait_for_failpoint_stop(300), job.tail(30)
    finally:
        job.kill()
    starts = group_offsets(shop)

    res = run_window(shop)
    assert res.returncode == 0, (starts, res.stderr[-3000:])
    summary = summary_of(res)
    # The other non-empty partition's task may have published before the kill: together, every purchase.
    published_before = sum(c or 0 for p, c in starts.items() if p != nonempty[0])
    assert summary["invoices"] + published_before == first.valid, (starts, summary)
    # Every partition the killed run planned had its start committed before any task published.
    assert None not in starts.values(), starts
    more = generate(shop.connection, shop.topics.purchases, 400, invalid_share=0.0, seed=63)
    summary_of(run_window(shop))
    assert_exact(lab, shop, first.valid + more.valid)


def test_a_partition_added_while_a_run_is_in_flight_starts_from_its_start(lab):
    """A run pauses in its task of partition 0 while the input topic gets a third partition; its
    records say the 2 partitions its window was planned on (partition 2 stays one added after the
    pipeline's last commit). The next run stops (exit 2) until the checkpoint topic has a
    partition for it too, naming the pipeline's command that grows it; after that command it picks
    partition 2 up from offset 0."""
    shop = lab.make_shop(2, name="added-in-flight")
    first = generate(shop.connection, shop.topics.purchases, 200, invalid_share=0.0, seed=64)
    job = lab.job(shop, failpoints="after_init=sleep:10,partition=0").start()
    try:
        assert job.wait_for("fired:", 300), job.tail(30)
        add_partitions(shop, 3, checkpoint_too=False)
        assert job.wait(300) == 0, job.tail(30)
    finally:
        job.kill()
    assert {e.input_partitions for e in checkpoint_records(shop).values()} == {2}
    more = generate(shop.connection, shop.topics.purchases, 300, invalid_share=0.0, seed=65)
    assert lab.admin.offsets(shop.topics.purchases, [2])[2].last_stable > 0

    res = run_window(shop)
    errors = error_lines(res)
    assert res.returncode == 2 and len(errors) == 1, res.stderr[-3000:]
    command = "create-topics --allow-existing"
    assert f"`python -m eos_etl {command}" in errors[0] and shop.pipeline().checkpoint_topic in errors[0]
    grow = cli(*command.split(), "--bootstrap-servers", shop.connection.bootstrap_servers, *shop_args(shop))
    assert grow.returncode == 0, grow.stderr[-3000:]
    assert len(lab.admin.partitions(shop.pipeline().checkpoint_topic)) == 3

    summary = summary_of(run_window(shop))
    assert summary["window"]["partitions"]["2"][0] == 0
    assert_exact(lab, shop, first.valid + more.valid)


def test_a_recreated_input_topic_stops_the_run_and_offsets_reset_brings_it_back(lab):
    """3,000 purchases run; the input topic is deleted and created again; 1,000 new purchases. The run
    refuses (exit 2, one line: partition, position, both topic ids, cause, command), publishes and
    moves nothing; so it does once the new log is longer than the old positions (3,000 more: only
    the topic id tells the logs apart then). The command it names (the one docs/operations.md
    gives) resets the positions; the next run publishes the 4,000 exactly once."""
    shop = lab.make_shop(2, name="recreated")
    first = generate(shop.connection, shop.topics.purchases, 3000, invalid_share=0.05, seed=66)
    summary_of(run_window(shop))
    positions = {p: e.next_offset for p, e in checkpoint_records(shop).items()}
    assert sum(positions.values()) == first.produced
    admin = lab.admin
    old_id = admin.topic_id(shop.topics.purchases)
    assert {e.topic_id for e in checkpoint_records(shop).values()} == {old_id}

    admin.delete_topics([shop.topics.purchases])
    deadline = time.monotonic() + 60
    while True:  # the deletion completes in the background
        try:
            admin.create_topics({shop.topics.purchases: 2})
            admin.partitions(shop.topics.purchases)
            break
        except Exception:  # noqa: BLE001 - any refusal until the deadline, which names it
            assert time.monotonic() < deadline, "the input topic was not created again within 60s"
            time.sleep(1)
    new_id = admin.topic_id(shop.topics.purchases)
    assert new_id != old_id
    second = generate(shop.connection, shop.topics.purchases, 1000, invalid_share=0.05, seed=67)
    ends = lab.input_ends(shop)
    assert all(ends[p] < positions[p] for p in ends), (ends, positions)
    held_offsets, held_records = group_offsets(shop), checkpoint_records(shop)
    invoices_before = len(read_topic(shop.connection, shop.topics.invoices))
    command = "offsets reset --to earliest --partitions 0,1"

    def refused() -> None:
        res = run_window(shop)
        errors = error_lines(res)
        assert res.returncode == 2 and len(errors) == 1, res.stderr[-3000:]
        assert "Traceback" not in res.stderr
        for p in (0, 1):
            assert f"{shop.topics.purchases}[{p}] position {positions[p]}" in errors[0]
        assert old_id in errors[0] and new_id in errors[0] and "deleted and created again" in errors[0]
        assert command in errors[0]
        assert len(read_topic(shop.connection, shop.topics.invoices)) == invoices_before  # nothing published
        assert group_offsets(shop) == held_offsets and checkpoint_records(shop) == held_records  # nothing moved

    refused()
    # The new log grows past the old positions: a log-end check alone would resume there, skipping.
    third = generate(shop.connection, shop.topics.purchases, 3000, invalid_share=0.05, seed=68)
    ends = lab.input_ends(shop)
    assert all(ends[p] > positions[p] for p in ends), (ends, positions)
    refused()

    output_ends = {t: {p: o.last_stable for p, o in admin.offsets(t, admin.partitions(t)).items()}
                   for t in shop.topics.outputs}
    reset = cli(*command.split(), "--bootstrap-servers", shop.connection.bootstrap_servers, *shop_args(shop))
    assert reset.returncode == 0, reset.stderr[-3000:]
    rows = json.loads(reset.stdout)["partitions"]
    assert {int(p): r["position"] for p, r in rows.items()} == {0: 0, 1: 0}
    assert group_offsets(shop) == {0: 0, 1: 0}

    assert {e.topic_id for e in checkpoint_records(shop).values()} == {new_id}

    summary = summary_of(run_window(shop))
    assert summary["invoices"] == second.valid + third.valid
    assert summary["records_read"] == second.produced + third.produced
    # The new topic's outputs, judged alone: the old topic's outputs carry the same source offsets.
    report = check_shop(shop, expected_ends=lab.input_ends(shop), outputs_from=output_ends)
    assert report.ok, report.to_dict()["violations"]
    assert sum(p.covered_inputs for p in report.partitions.values()) == second.produced + third.produced
    assert len(read_topic(shop.connection, shop.topics.invoices)) == first.valid + second.valid + third.valid


def test_plan_window_fences_nothing_while_a_transaction_holds_the_offsets(lab):
    """A transaction of the pipeline's own transactional id holds partition 0's offsets (sent, not
    committed). plan-window exits 0 naming partition 0 as held, writes nothing (no checkpoint record,
    no group offset), and the holder can still commit afterwards: it was not fenced."""
    shop = lab.make_shop(2, name="plan-held")
    generate(shop.connection, shop.topics.purchases, 100, invalid_share=0.0, seed=68)
    pipeline = replace(with_committed_grouping(lab.admin, shop.pipeline(run_id="holder")),
                       input_topic_id=lab.admin.topic_id(shop.topics.purchases))
    holder = TransactionalProducer(pipeline.producer_settings(0), retry_deadline_s=30)
    checkpoint = PartitionCheckpoint(pipeline, 0)
    try:
        holder.init_transactions()
        holder.begin_transaction()
        checkpoint.stage(holder, 10)
        holder.flush()
        checkpoint_end = lab.admin.offsets(pipeline.checkpoint_topic, [0, 1])

        res = cli("plan-window", "--bootstrap-servers", shop.connection.bootstrap_servers, *shop_args(shop),
                  "--compact", timeout=120)
        assert res.returncode == 0, res.stderr[-3000:]
        assert "open transaction aborted" not in res.stderr, res.stderr[-3000:]  # recovery's own log line
        plan = json.loads(res.stdout.strip().splitlines()[-1])
        assert plan.get("held") == [0], plan
        assert lab.admin.offsets(pipeline.checkpoint_topic, [0, 1]) == checkpoint_end  # wrote nothing
        assert group_offsets(shop) == {0: None, 1: None}

        holder.commit_transaction()  # not fenced: the holder's transaction is still its own
    finally:
        holder.close()
        checkpoint.close()
    assert group_offsets(shop) == {0: 10, 1: None}
