"""The position table's states as operators and faults produce them, on a real broker through the CLI.

Each recipe reaches a state of docs/positions.md the way a user does (an idle tick of the DAG, a
re-created input topic with the group and checkpoint topic deleted, outputs emptied by retention, a
second pipeline on shared outputs, a window-end proof whose records were deleted), checks the run's
decision (exit code, the one error line and its command, nothing published or moved on a stop),
runs the command the line names, and judges the outputs with the independent checker.

The decisions for every combination of the states: tests/unit/engine/test_position_table.py.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from eos_etl.checker import check_shop, read_topic
from eos_etl.engine.errors import IdentityChangedError
from eos_etl.engine.planning.planner import with_committed_grouping
from eos_etl.engine.publishing.checkpoint import PartitionCheckpoint
from eos_etl.engine.publishing.publisher import publish_without_spark, renew_positions
from eos_etl.errors import ConfigurationError
from eos_etl.kafka.reader import RangeDeletedError, first_visible_offset
from eos_etl.kafka.topics import ensure_topics
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
from tests.support.cli import cli, shop_args

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.fixture
def lab(connection) -> Lab:
    return Lab(connection)


def offsets_cli(shop: ShopSettings, *args: str):
    return cli("offsets", *args, "--bootstrap-servers", shop.connection.bootstrap_servers, *shop_args(shop))


def output_ends(lab: Lab, shop: ShopSettings) -> dict[str, dict[int, int]]:
    admin = lab.admin
    return {t: {p: o.last_stable for p, o in admin.offsets(t, admin.partitions(t)).items()}
            for t in shop.topics.outputs}


def recreate(lab: Lab, topic: str, partitions: int) -> None:
    admin = lab.admin
    admin.delete_topics([topic])
    deadline = time.monotonic() + 60
    while True:  # the deletion completes in the background
        try:
            admin.create_topics({topic: partitions})
            admin.partitions(topic)
            return
        except Exception:  # noqa: BLE001 - any refusal until the deadline, which names it
            assert time.monotonic() < deadline, f"{topic} was not created again within 60s"
            time.sleep(1)


def delete_group(shop: ShopSettings) -> None:
    client = AdminClient(shop.connection.client_config())
    client.delete_consumer_groups([shop.group])[shop.group].result(30)


def delete_records(shop: ShopSettings, topic: str, upto: dict[int, int]) -> None:
    client = AdminClient(shop.connection.client_config())
    for fut in client.delete_records([TopicPartition(topic, p, o) for p, o in upto.items()]).values():
        fut.result(30)


def refused(shop: ShopSettings, *, command: str, says: str, not_says: str = ""):
    """plan-window and run-window both stop (exit 2, one error line naming ``command``); nothing moves."""
    before = (group_offsets(shop), checkpoint_records(shop),
              [len(read_topic(shop.connection, t)) for t in shop.topics.outputs])
    plan = cli("plan-window", "--bootstrap-servers", shop.connection.bootstrap_servers, *shop_args(shop))
    run = run_window(shop)
    for res in (plan, run):
        errors = error_lines(res)
        assert res.returncode == 2 and len(errors) == 1, res.stderr[-3000:]
        assert command in errors[0] and says in errors[0] and "Traceback" not in res.stderr, errors[0]
        if not_says:
            assert not_says not in errors[0]
    assert (group_offsets(shop), checkpoint_records(shop),
            [len(read_topic(shop.connection, t)) for t in shop.topics.outputs]) == before
    return error_lines(run)[0]


def test_an_idle_tick_keeps_the_topic_id_so_a_recreated_topic_is_never_skipped(lab):
    """1,000 purchases run; one idle tick of the DAG's plan path renews both records; the input is
    deleted and created again and 3,000 purchases arrive (the new log longer than the old positions).
    Before: the tick wrote records without a topic id and the next run skipped the new topic's first
    1,000 purchases. Now the tick's records name the topic (a config not bound to it cannot even build
    the writer), the run stops naming the reset, and after it all 3,000 are published exactly once."""
    shop = lab.make_shop(2, name="idle-tick")
    first = generate(shop.connection, shop.topics.purchases, 1000, invalid_share=0.05, seed=531)
    summary_of(run_window(shop))
    old_id = lab.admin.topic_id(shop.topics.purchases)

    window = shop.plan()
    assert window.is_empty
    # The old tick's call: a config bound to no plan names neither the topic id nor the identity's version.
    with pytest.raises(IdentityChangedError, match="planned: version 0"):
        publish_without_spark(replace(shop.pipeline(run_id="unbound-tick"), writer_slots=window.writer_slots),
                              window.ranges)
    with pytest.raises(ConfigurationError, match="needs the input topic's id"):
        publish_without_spark(replace(shop.pipeline(run_id="unbound-tick"), writer_slots=window.writer_slots,
                                      identity_version=window.identity_version), window.ranges)
    renew_positions(shop.pipeline(run_id="tick-1"), window)  # the DAG's idle tick (dag_factory._plan)
    records = checkpoint_records(shop)
    assert {e.run_id for e in records.values()} == {"tick-1"} and {e.topic_id for e in records.values()} == {old_id}
    positions = {p: e.next_offset for p, e in records.items()}

    recreate(lab, shop.topics.purchases, 2)
    second = generate(shop.connection, shop.topics.purchases, 3000, invalid_share=0.05, seed=532)
    assert all(end > positions[p] for p, end in lab.input_ends(shop).items())  # the log-end check cannot tell
    outputs_before = output_ends(lab, shop)
    line = refused(shop, command="offsets reset --to earliest --partitions 0,1", says="deleted and created again")
    assert old_id in line

    reset = offsets_cli(shop, "reset", "--to", "earliest", "--partitions", "0,1")
    assert reset.returncode == 0, reset.stderr[-3000:]
    summary = summary_of(run_window(shop))
    assert summary["invoices"] == second.valid and summary["records_read"] == second.produced
    report = check_shop(shop, expected_ends=lab.input_ends(shop), outputs_from=outputs_before)
    assert report.ok, report.to_dict()["violations"]
    assert len(read_topic(shop.connection, shop.topics.invoices)) == first.valid + second.valid


def test_a_recreation_with_group_and_checkpoint_topic_deleted_starts_the_new_topic_from_its_start(lab):
    """1,000 published; the input, the group's offsets and the checkpoint topic deleted together (as
    docs/operations.md advised for a re-creation); 3,000 new purchases. Before: the run named
    ``offsets restore --from-lineage``, which wrote the old topic's positions under the new id, and the
    next run skipped the new topic's first 1,000. Now the old outputs name the old topic's id: they
    are not this topic's lineage, restore has nothing to restore, and the run publishes all 3,000."""
    shop = lab.make_shop(2, name="recreated-all")
    first = generate(shop.connection, shop.topics.purchases, 1000, invalid_share=0.05, seed=533)
    summary_of(run_window(shop))
    outputs_before = output_ends(lab, shop)
    checkpoint = shop.pipeline().checkpoint_topic

    lab.admin.delete_topics([checkpoint])
    recreate(lab, shop.topics.purchases, 2)
    delete_group(shop)
    time.sleep(2)  # the checkpoint topic's deletion completes
    ensure_topics(lab.admin, shop.specs(2), allow_existing=True)  # create-topics: what is missing
    second = generate(shop.connection, shop.topics.purchases, 3000, invalid_share=0.05, seed=534)

    restore = offsets_cli(shop, "restore", "--from-lineage")
    assert restore.returncode == 0, restore.stderr[-3000:]
    rows = json.loads(restore.stdout)["partitions"]
    assert {r["row"] for r in rows.values()} == {"never-published"} and group_offsets(shop) == {0: None, 1: None}
    summary = summary_of(run_window(shop))
    assert summary["invoices"] == second.valid and summary["records_read"] == second.produced
    report = check_shop(shop, expected_ends=lab.input_ends(shop), outputs_from=outputs_before)
    assert report.ok, report.to_dict()["violations"]
    assert len(read_topic(shop.connection, shop.topics.invoices)) == first.valid + second.valid


def test_outputs_emptied_by_retention_never_read_as_never_published(lab):
    """1,000 published; every output record deleted (retention), the group's offsets and the checkpoint
    topic gone. Before: the run read "all outputs empty" as "never published" and published all 1,000
    again. Now nothing proves a first run: plan, run and restore stop (exit 2, nothing moved); the
    operator, who knows the pipeline had published them, resets to the end; 200 new purchases are
    then published exactly once."""
    shop = lab.make_shop(2, name="aged-out")
    generate(shop.connection, shop.topics.purchases, 1000, invalid_share=0.05, seed=535)
    summary_of(run_window(shop))
    for topic, ends in output_ends(lab, shop).items():
        delete_records(shop, topic, ends)
    lab.admin.delete_topics([shop.pipeline().checkpoint_topic])
    delete_group(shop)
    time.sleep(2)
    ensure_topics(lab.admin, shop.specs(2), allow_existing=True)

    line = refused(shop, command="offsets reset --to latest --partitions 0,1", says="records were deleted from the "
                   "outputs", not_says="outputs hold records")
    assert "offsets reset --to earliest --partitions 0,1" in line
    restore = offsets_cli(shop, "restore", "--from-lineage")
    assert restore.returncode == 2 and "records were deleted from the outputs" in restore.stderr
    assert group_offsets(shop) == {0: None, 1: None}

    reset = offsets_cli(shop, "reset", "--to", "latest", "--partitions", "0,1")
    assert reset.returncode == 0, reset.stderr[-3000:]
    ends = lab.input_ends(shop)
    assert group_offsets(shop) == ends
    delete_records(shop, shop.topics.purchases, ends)  # the input aged out too: the checker judges what is left
    outputs_before = output_ends(lab, shop)
    more = generate(shop.connection, shop.topics.purchases, 200, invalid_share=0.0, seed=536)
    summary = summary_of(run_window(shop))
    assert summary["invoices"] == more.valid == 200
    report = check_shop(shop, expected_ends=lab.input_ends(shop), outputs_from=outputs_before)
    assert report.ok, report.to_dict()["violations"]


def test_a_second_pipeline_on_shared_outputs_never_takes_the_first_ones_lineage_for_its_own(lab):
    """Pipeline A publishes 500 purchases; pipeline B (its own input, group and transactional ids)
    writes to A's output topics. While no output record was deleted, B's first plan starts at 0: A's
    outputs name A. After retention deleted one invoices record, nothing proves B never published:
    it stops with a line that says so (before: "the outputs hold records published from them", which
    they did not), names the reset, and after it B publishes its 100 purchases exactly once; A stays exact."""
    a = lab.make_shop(2, name="pipeline-a")
    a_stats = generate(a.connection, a.topics.purchases, 500, invalid_share=0.05, seed=537)
    summary_of(run_window(a))
    tag = a.topics.purchases.removeprefix("purchases-")
    b = ShopSettings(connection=a.connection, group=f"group-eu-{tag}", transactional_id_prefix=f"txn-eu-{tag}",
                     topics=ShopTopics(purchases=f"purchases-eu-{tag}", invoices=a.topics.invoices,
                                       shipments=a.topics.shipments, dead_letters=a.topics.dead_letters))
    ensure_topics(lab.admin, b.specs(2), allow_existing=True)
    b_stats = generate(b.connection, b.topics.purchases, 100, invalid_share=0.0, seed=538)

    plan = cli("plan-window", "--bootstrap-servers", b.connection.bootstrap_servers, *shop_args(b))
    assert plan.returncode == 0, plan.stderr[-3000:]
    assert {p: r[0] for p, r in json.loads(plan.stdout)["partitions"].items()} == {"0": 0, "1": 0}

    delete_records(a, a.topics.invoices, {0: 1})
    refused(b, command="offsets reset --to earliest --partitions 0,1", says="records were deleted from the outputs",
            not_says="outputs hold records")
    reset = offsets_cli(b, "reset", "--to", "earliest", "--partitions", "0,1")
    assert reset.returncode == 0, reset.stderr[-3000:]
    summary = summary_of(run_window(b))
    assert summary["invoices"] == b_stats.valid == 100
    report = check_shop(b, expected_ends=lab.input_ends(b))
    assert report.ok, report.to_dict()["violations"]
    invoices = read_topic(a.connection, a.topics.invoices)
    by_pipeline = {g: sum(r.headers.get("pipeline") == g.encode() for r in invoices) for g in (a.group, b.group)}
    assert by_pipeline == {a.group: a_stats.valid - 1, b.group: b_stats.valid}  # A's: all but the deleted one


def test_a_window_end_proof_below_the_log_start_fails_instead_of_proving_an_end(lab):
    """A publishing task's proof that [after, end) holds nothing to publish, started below the log
    start (retention deleted records while the task ran). librdkafka's default reset jumps to the
    log end, and the first live record after it ends the range as empty, proving an end over
    records never published; the checkpoint's consumer resets to an error instead (without a
    record past the end, the old proof only timed out), and the proof fails (the attempt commits
    nothing more; the next plan stops with the loss)."""
    shop = lab.make_shop(1, name="proof-deleted")
    generate(shop.connection, shop.topics.purchases, 100, invalid_share=0.0, seed=539)
    end = lab.input_ends(shop)[0]
    delete_records(shop, shop.topics.purchases, {0: 60})
    default = Consumer({**shop.pipeline().consumer_settings(), "log_level": 0})
    try:  # the proof as it was: no auto.offset.reset, librdkafka's "largest"
        with ThreadPoolExecutor(1) as pool:
            proof = pool.submit(first_visible_offset, default, shop.topics.purchases, 0, 10, end, timeout_s=30)
            time.sleep(3)  # the consumer was reset to the log end; then a live record arrives past it
            generate(shop.connection, shop.topics.purchases, 1, invalid_share=0.0, seed=540)
            assert proof.result() is None
    finally:
        default.close()
    config = replace(with_committed_grouping(lab.admin, shop.pipeline()),
                     input_topic_id=lab.admin.topic_id(shop.topics.purchases))
    checkpoint = PartitionCheckpoint(config, 0)
    try:
        with pytest.raises(RangeDeletedError, match="no longer holds offset 10"):
            checkpoint.first_visible(10, end)
        assert checkpoint.first_visible(60, end) == 60  # a range the log still holds reads as before
    finally:
        checkpoint.close()
