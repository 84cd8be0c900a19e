"""Who may commit a partition (docs/pipeline-identity.md): the recipes of the defects the pipeline's
recorded identity closed, on a real broker, through the CLI and Kafka's own API.

* a run of another writer-slots grouping, paused (SIGSTOP) after it read "no position" and before its
  start commit while the scheduled run publishes the window, must publish nothing once resumed; after
  the scheduled run, it is refused;
* offsets written by hand (Kafka's own API, as ``kafka-consumer-groups --reset-offsets`` writes them:
  no metadata) are a position to start from, forwards or backwards, never a stall;
* partitions added between a window's plan and its run start from their beginning;
* a new pipeline on shared output topics that lost records to retention starts alone;
* a run with another transactional-id prefix on the same group is refused.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions

from eos_etl.checker import check_shop, read_topic
from eos_etl.engine import slots
from eos_etl.engine.errors import ProducerFencedError
from eos_etl.engine.planning.planner import with_committed_grouping
from eos_etl.engine.publishing.producer import TransactionalProducer
from eos_etl.host.process import wait_stopped
from eos_etl.shop.generator import generate
from eos_etl.shop.schema import ShopTopics
from eos_etl.shop.settings import ShopSettings
from eos_etl_lab.faults import Lab
from tests.integration.engine.planning.test_state_edges import (
    checkpoint_records,
    error_lines,
    group_offsets,
    run_window,
    summary_of,
)
from tests.integration.engine.test_position_recipes import delete_records, offsets_cli, output_ends
from tests.support.cli import cli, shop_args

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.fixture
def lab(connection) -> Lab:
    return Lab(connection)


@pytest.fixture
def connect_route(spark_connect_server, monkeypatch):
    """The CLI's windows on the worker's shared Spark Connect server, the default route (a window there
    costs no Spark application's start)."""
    for name, value in spark_connect_server.client_env().items():
        monkeypatch.setenv(name, value)


def new_shop(lab: Lab, partitions: int, name: str) -> ShopSettings:
    """A new pipeline run as scheduled: no ``--writer-slots`` (the default, whatever the lab's env says)."""
    return lab.make_shop(partitions, name=name, writer_slots=slots.AS_COMMITTED)


def state(shop: ShopSettings) -> tuple:
    """What a refused run must leave as it was: the group's offsets, the checkpoint records, the outputs."""
    return (group_offsets(shop), checkpoint_records(shop),
            [len(read_topic(shop.connection, t, isolation="read_uncommitted")) for t in shop.topics.outputs])


def outcome(res) -> str:
    """How a command ended, for an assertion's message: its exit code, its error lines, else its stderr's end."""
    errors = error_lines(res)
    if res.returncode == 0:
        summary = json.loads(res.stdout.strip().splitlines()[-1])
        return f"exit 0, published {summary['records_published']} of {summary['records_read']} records read"
    return f"exit {res.returncode}: " + ("\n".join(errors) if errors else res.stderr[-2000:])


def assert_refused(res, *, says: str = "") -> str:
    errors = error_lines(res)
    assert res.returncode == 2 and len(errors) == 1, outcome(res)
    assert says in errors[0] and "Traceback" not in res.stderr, errors[0]
    return errors[0]


def assert_exact(lab: Lab, shop: ShopSettings, outputs_from: dict | None = None) -> None:
    report = check_shop(shop, expected_ends=lab.input_ends(shop), outputs_from=outputs_from)
    assert report.ok, report.to_dict()["violations"]


def hand_reset(shop: ShopSettings, offsets: dict[int, int]) -> None:
    """The group's offsets written with Kafka's own API, as ``kafka-consumer-groups --reset-offsets``
    writes them: offsets, no metadata."""
    client = AdminClient(shop.connection.client_config())
    request = ConsumerGroupTopicPartitions(shop.group, [TopicPartition(shop.topics.purchases, p, o)
                                                        for p, o in offsets.items()])
    for fut in client.alter_consumer_group_offsets([request]).values():
        fut.result(30)


#: The start commit of a new pipeline's run logs each partition's position as it read it (none yet: the
#: start, 0); on 2 partitions and one writer slot, its commit follows the second line by about 20 ms.
READ_NO_POSITION = "window [0,0) from committed position 0"

#: A ``sitecustomize`` that makes a process SIGSTOP itself right after it logged ``needle`` ``times`` times:
#: a GC pause (a frozen VM, a coordinator move during its retries) at that very point, with no race against
#: a signal sent from outside.
PAUSE_AFTER_LOG = """
import logging, os, signal
_seen = 0
_handle = logging.Logger.handle
def _handle_then_pause(self, record):
    global _seen
    _handle(self, record)
    if {needle!r} in record.getMessage():
        _seen += 1
        if _seen == {times}:
            os.kill(os.getpid(), signal.SIGSTOP)
logging.Logger.handle = _handle_then_pause
"""


def pausing_env(where: Path, needle: str, times: int) -> dict:
    """The environment of a process that pauses itself after it logged ``needle`` ``times`` times."""
    where.mkdir()
    (where / "sitecustomize.py").write_text(PAUSE_AFTER_LOG.format(needle=needle, times=times))
    return {"PYTHONPATH": os.pathsep.join(filter(None, [str(where), os.environ.get("PYTHONPATH")]))}


def test_a_paused_run_with_another_grouping_never_publishes_a_window_twice(lab, tmp_path: Path):
    """A new pipeline, 2,000 purchases. A hand run ``run-window --writer-slots 1`` pauses (SIGSTOP) right
    after it read "no position" on both partitions, before its start commit; the scheduled run (the
    default grouping) publishes the window and exits 0, exact. Resumed, the hand run must publish
    nothing more: exit 2 with one error line, exit 1 with one line saying it was fenced, or exit 0 having
    published nothing; the checker stays clean. Before: it committed its starts at 0 under ``s0of1`` (the
    ids of another grouping, never fenced) and published all 2,000 again, exit 0, 2,000 duplicates. (Paused
    right after its plan instead, the hand run's start commit reads the scheduled run's positions, and it
    stops.)

    And the other order: after the scheduled run, a run of another grouping is refused (exit 2, one
    line naming ``offsets reslot``), publishes nothing and moves no offset."""
    after = new_shop(lab, 2, "grouping-after")
    generate(after.connection, after.topics.purchases, 1000, invalid_share=0.05, seed=671)
    summary_of(run_window(after))
    before = state(after)
    assert_refused(run_window(after, "--writer-slots", "1"), says="offsets reslot")
    assert state(after) == before
    assert_exact(lab, after)

    shop = new_shop(lab, 2, "paused-grouping")
    stats = generate(shop.connection, shop.topics.purchases, 2000, invalid_share=0.05, seed=672)
    hand = lab.job(shop, ["--writer-slots", "1"], env=pausing_env(tmp_path / "hook", READ_NO_POSITION, 2)).start()
    try:
        assert hand.wait_for(READ_NO_POSITION, 300, occurrences=2) and wait_stopped(hand.pid), hand.tail(30)
        assert group_offsets(shop) == {0: None, 1: None}
        scheduled = summary_of(run_window(shop))
        assert scheduled["invoices"] == stats.valid
        assert_exact(lab, shop)
        published = [len(read_topic(shop.connection, t)) for t in shop.topics.outputs]
        hand.resume()
        code = hand.wait(300)
    finally:
        hand.kill()
    errors = [line for line in hand.stderr.splitlines() if line.startswith("error:")]
    ended = f"the resumed run: exit {code}, " + (
        "; ".join(errors) if errors or code != 0 else
        f"published {json.loads(hand.stdout.strip().splitlines()[-1])['records_published']} records")
    report = check_shop(shop, expected_ends=lab.input_ends(shop))
    assert report.ok, f"{ended}; checker: {report.to_dict()['violations']}"
    assert [len(read_topic(shop.connection, t)) for t in shop.topics.outputs] == published, ended  # not one more
    # Published nothing more, and said why in one line: refused (exit 2), or fenced by the scheduled run's
    # takeover of the id both runs' recorded identity names (exit 1: a retry finds the window committed).
    assert code == 0 or (len(errors) == 1 and "Traceback" not in hand.stderr and
                         (code == 2 or (code == 1 and "fenced" in errors[0]))), f"{ended}\n{hand.tail(30)}"


def test_a_hand_reset_of_the_group_offsets_is_a_position_not_a_stall(lab, connect_route):
    """One exact window (1,000 purchases, the default grouping); the group's offsets written again at
    their values with Kafka's own API (no metadata, as ``kafka-consumer-groups --reset-offsets``);
    500 new purchases: the next run exits 0 and publishes exactly those 500 (docs/how-it-works.md:
    "if the group's offsets are reset by hand, the next window starts there"). Before: every run
    exited 2 ("committed with one transactional id per partition, this run has 2 writer slots").

    A hand reset backwards (partition 0 to offset 0) is a position too: the next run publishes
    partition 0 again from 0, as the operator asked, and partition 1 not at all. And a hand-written
    position is committed to the checkpoint record by the next run, even one with nothing to publish,
    so it outlives the group's offsets."""
    shop = new_shop(lab, 2, "hand-reset")
    first = generate(shop.connection, shop.topics.purchases, 1000, invalid_share=0.05, seed=673)
    summary_of(run_window(shop))
    positions = group_offsets(shop)
    assert sum(positions.values()) == first.produced
    hand_reset(shop, positions)
    assert group_offsets(shop) == positions

    more = generate(shop.connection, shop.topics.purchases, 500, invalid_share=0.05, seed=674)
    res = run_window(shop)
    assert res.returncode == 0, outcome(res)
    summary = summary_of(res)
    assert summary["records_read"] == more.produced and summary["invoices"] == more.valid
    assert_exact(lab, shop)

    ends = lab.input_ends(shop)
    outputs_before = output_ends(lab, shop)
    hand_reset(shop, {0: 0})
    summary = summary_of(run_window(shop))
    assert {int(p): r[0] for p, r in summary["window"]["partitions"].items()} == {0: 0, 1: ends[1]}
    assert summary["records_read"] == ends[0]
    assert group_offsets(shop) == ends
    # A hand-written position outlives the group's offsets: the next run (here a window with nothing before
    # --until, which publishes nothing) commits it to the checkpoint record too, where a plan finds it after
    # the offsets expire. Then back where it was.
    for offset in (ends[1] - 5, ends[1]):
        hand_reset(shop, {1: offset})
        assert summary_of(run_window(shop, "--until", "1"))["records_read"] == 0
        assert (group_offsets(shop)[1], checkpoint_records(shop)[1].next_offset) == (offset, offset)
    # Judged from the outputs before that run: partition 0 published once more, whole; partition 1's
    # inputs (published before) trimmed from the judgement.
    delete_records(shop, shop.topics.purchases, {1: ends[1]})
    report = check_shop(shop, expected_ends=ends, outputs_from=outputs_before)
    assert report.ok, report.to_dict()["violations"]
    assert report.partitions[0].covered_inputs == ends[0]


def test_partitions_added_between_a_plan_and_its_run_start_from_their_beginning(lab, tmp_path: Path, connect_route):
    """A 2-partition shop publishes a window; retention deletes its first invoices record. The next
    window is planned (``plan-window``, saved as the DAG's plan task does); the input grows to 4
    partitions and ``create-topics --allow-existing`` runs (docs/operations.md); the planned window
    runs (``--window-json @file``): exit 0. Purchases then land in partitions 2 and 3: the next plain
    run exits 0 and publishes them, from offset 0 ("the new partitions start from their beginning").
    Before: the planned run's records said ``input_partitions 4`` (read at commit time, not the
    plan's), partitions 2 and 3 read as ``unprovable`` and the next run exited 2."""
    shop = new_shop(lab, 2, "grown-after-plan")
    generate(shop.connection, shop.topics.purchases, 1000, invalid_share=0.05, seed=675)
    summary_of(run_window(shop))
    first_ends, outputs_before = lab.input_ends(shop), output_ends(lab, shop)
    delete_records(shop, shop.topics.invoices, {0: 1})

    planned = generate(shop.connection, shop.topics.purchases, 400, invalid_share=0.05, seed=676)
    plan = cli("plan-window", "--bootstrap-servers", shop.connection.bootstrap_servers, *shop_args(shop),
               "--compact")
    assert plan.returncode == 0, plan.stderr[-3000:]
    window_file = tmp_path / "window.json"
    window_file.write_text(plan.stdout)
    assert sorted(json.loads(plan.stdout)["partitions"]) == ["0", "1"]

    client = AdminClient(shop.connection.client_config())
    client.create_partitions([NewPartitions(shop.topics.purchases, 4)])[shop.topics.purchases].result(30)
    grow = cli("create-topics", "--allow-existing", "--bootstrap-servers", shop.connection.bootstrap_servers,
               *shop_args(shop))
    assert grow.returncode == 0, grow.stderr[-3000:]
    assert len(lab.admin.partitions(shop.pipeline().checkpoint_topic)) == 4
    summary = summary_of(run_window(shop, "--window-json", f"@{window_file}"))
    assert summary["records_read"] == planned.produced

    more = generate(shop.connection, shop.topics.purchases, 400, invalid_share=0.05, seed=677)
    ends = lab.input_ends(shop)
    assert ends[2] > 0 and ends[3] > 0, ends
    res = run_window(shop)
    assert res.returncode == 0, outcome(res)
    summary = summary_of(res)
    assert {int(p): r[0] for p, r in summary["window"]["partitions"].items() if int(p) >= 2} == {2: 0, 3: 0}
    assert summary["records_read"] == more.produced
    # Judged from the outputs after the first window (its inputs trimmed: one of its invoices is gone).
    delete_records(shop, shop.topics.purchases, first_ends)
    assert_exact(lab, shop, outputs_from=outputs_before)


def test_a_new_pipeline_on_shared_retained_outputs_starts_alone(lab, connect_route):
    """Pipeline A publishes 500 purchases; pipeline B (its own input, group and transactional-id
    prefix, A's output topics) is made with ``create-topics --allow-existing``; retention deletes one
    of A's invoices. B's first run exits 0 and publishes its 100 purchases exactly once: its birth
    proves it never published. A's records stay as they were. Before: exit 2 (``unprovable``, naming
    ``offsets reset --to earliest``): a new pipeline needed an operator at birth."""
    a = new_shop(lab, 2, "shared-a")
    a_stats = generate(a.connection, a.topics.purchases, 500, invalid_share=0.05, seed=678)
    summary_of(run_window(a))
    tag = a.topics.purchases.removeprefix("purchases-")
    b = ShopSettings(connection=a.connection, group=f"group-b-{tag}", transactional_id_prefix=f"txn-b-{tag}",
                     topics=ShopTopics(purchases=f"purchases-b-{tag}", invoices=a.topics.invoices,
                                       shipments=a.topics.shipments, dead_letters=a.topics.dead_letters))
    made = cli("create-topics", "--allow-existing", "--partitions", "2", "--bootstrap-servers",
               b.connection.bootstrap_servers, *shop_args(b))
    assert made.returncode == 0, made.stderr[-3000:]
    b_stats = generate(b.connection, b.topics.purchases, 100, invalid_share=0.0, seed=679)
    delete_records(a, a.topics.invoices, {0: 1})

    res = run_window(b)
    assert res.returncode == 0, outcome(res)
    assert summary_of(res)["invoices"] == b_stats.valid == 100
    assert_exact(lab, b)
    invoices = read_topic(a.connection, a.topics.invoices)
    by_pipeline = {g: sum(r.headers.get("pipeline") == g.encode() for r in invoices) for g in (a.group, b.group)}
    assert by_pipeline == {a.group: a_stats.valid - 1, b.group: b_stats.valid}


def test_a_run_with_another_transactional_id_prefix_is_refused(lab, connect_route):
    """After one run of a shop, ``run-window`` with the same group and input but another
    ``--transactional-id-prefix`` exits 2 with one error line, before it publishes or moves anything:
    its ids are not the ones that committed the positions, and nothing fences them. Before: it ran
    unfenced beside the first, exit 0.

    Then the prefix is changed the one way there is, ``offsets reslot --transactional-id-prefix``: a
    zombie of the old prefix, initialised and mid-transaction, is fenced by it; the old prefix is the
    refused one from then on; the new one publishes the 200 new purchases, exact."""
    shop = new_shop(lab, 2, "other-prefix")
    generate(shop.connection, shop.topics.purchases, 500, invalid_share=0.05, seed=680)
    summary_of(run_window(shop))
    generate(shop.connection, shop.topics.purchases, 200, invalid_share=0.05, seed=681)
    before = state(shop)
    other = dataclasses.replace(shop, transactional_id_prefix=f"{shop.transactional_id_prefix}-other")
    line = assert_refused(run_window(other), says=f"transactional-id prefix '{other.transactional_id_prefix}' "
                                                  f"(recorded: '{shop.transactional_id_prefix}')")
    assert "offsets reslot" in line and "nothing was read, published or fenced" in line
    assert state(shop) == before

    zombie = TransactionalProducer(with_committed_grouping(lab.admin, shop.pipeline()).producer_settings(1))
    zombie.init_transactions()
    zombie.begin_transaction()
    zombie.produce(shop.topics.invoices, b"zombie", b"{}", [])
    moved = offsets_cli(other, "reslot")
    assert moved.returncode == 0, moved.stderr[-3000:]
    recorded = json.loads(moved.stdout)["identity"]
    assert (recorded["transactional_id_prefix"], recorded["version"], recorded["state"]) == \
        (other.transactional_id_prefix, 2, "ready")
    assert [shop.transactional_id_prefix, recorded["writer_slots"]] in recorded["retired"]
    with pytest.raises(ProducerFencedError):
        zombie.flush()
        zombie.commit_transaction()
    zombie.close()
    assert state(shop)[:2] == before[:2]  # a change of the identity moves no position (the zombie's record: aborted)
    assert_refused(run_window(shop), says=f"(recorded: '{other.transactional_id_prefix}')")
    summary = summary_of(run_window(other))
    assert summary["records_read"] == summary["records_published"] > 0
    now = with_committed_grouping(lab.admin, other.pipeline())
    assert {r["transactional_id"] for r in summary["partitions"]} == {now.transactional_id(p) for p in (0, 1)}
    assert_exact(lab, other)
