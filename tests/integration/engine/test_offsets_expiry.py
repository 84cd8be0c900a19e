"""A pipeline paused longer than the broker keeps its group's offsets publishes nothing twice.

A real broker of its own deletes a group's committed offsets one minute after
their last commit (``offsets.retention.minutes=1``, Kafka's least, checked every
2 s): the scenarios wait until Kafka really deleted them, then run on, all of them
after one shared wait (the scheduled DAG's too). The pipeline's position comes
from its checkpoint topic (written in every transaction), a pipeline that keeps
running keeps its offsets alive, and a position that is gone for good stops the
run with one error line instead of republishing.
"""

from __future__ import annotations

import json
import time

import pytest

from eos_etl.checker import check_shop, read_topic
from eos_etl.embedded.kafka_cluster import KafkaCluster
from eos_etl.engine.errors import PositionLostError
from eos_etl.engine.planning.planner import with_committed_grouping
from eos_etl.engine.planning.recovery import fence_transactional_ids
from eos_etl.host.ports import free_port
from eos_etl.kafka.admin import ClusterAdmin
from eos_etl.kafka.connection import KafkaConnection
from eos_etl.kafka.group_offsets import GroupOffsetsReader
from eos_etl.kafka.topics import ensure_topics
from eos_etl.shop.generator import generate
from eos_etl.shop.pipeline import run_shop_window
from eos_etl.shop.settings import ShopSettings
from eos_etl_lab.faults import Lab
from eos_etl_lab.faults.soak import SHORT_RETENTION
from tests.conftest import SASL_PASSWORD, SASL_USER
from tests.support.cli import cli, shop_args

# One worker runs the module: its scenarios share one broker and one wait past the retention.
pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.xdist_group("offsets-expiry")]


@pytest.fixture(scope="module")
def short_broker(tmp_path_factory):
    broker = KafkaCluster(home=tmp_path_factory.mktemp("kafka-short-retention"), port=free_port(),
                          overrides=SHORT_RETENTION, sasl_users={SASL_USER: SASL_PASSWORD})
    broker.start()
    yield broker
    broker.stop()


@pytest.fixture(scope="module")
def lab(short_broker) -> Lab:
    return Lab(KafkaConnection(short_broker.bootstrap_servers))


def group_offsets(shop: ShopSettings) -> dict[int, int | None]:
    """The group's committed offsets as the broker has them now (not waiting for a pending commit)."""
    parts = ClusterAdmin(shop.connection).partitions(shop.topics.purchases)
    with GroupOffsetsReader(shop.connection.client_config(), shop.group) as reader:
        return reader.unstable(shop.topics.purchases, parts, 10)


def run_cli(shop: ShopSettings) -> tuple[dict, str]:
    res = cli("run-window", "--bootstrap-servers", shop.connection.bootstrap_servers, *shop_args(shop),
              "--chunk-records", "500", "--compact")
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1]), res.stderr


@pytest.fixture(scope="module")
def scheduled_then_paused(lab, short_broker, spark_connect_server, tmp_path_factory):
    """The DAG scenario's first half, before the shared wait: Airflow's scheduler (every minute) publishes
    the backlog and the DAG is paused. Airflow keeps running through the wait (paused, it schedules
    nothing) until the scenario's test unpauses it."""
    from tests.integration.orchestration.test_dag import _api, _unpause, airflow_for

    shop = lab.make_shop(2, name="dag-pause")
    first = generate(shop.connection, shop.topics.purchases, 600, invalid_share=0.05, seed=51,
                     transaction_size=100, abort_share=0.1)
    af = airflow_for(shop, tmp_path_factory.mktemp("af"), short_broker, overrides={"EOS_ETL_SCHEDULE": "* * * * *"},
                     spark_connect=spark_connect_server)
    af.start()
    try:
        token = af.rest.token()
        _unpause(af, token, "shop_invoicing")
        _wait_published(af, token, shop, first.valid, 600)
        _api(af, "PATCH", "/api/v2/dags/shop_invoicing", {"is_paused": True}, token)
        assert None not in group_offsets(shop).values()  # the runs renewed the group's commits until the pause
        yield {"af": af, "token": token, "shop": shop, "first": first}
    finally:
        af.stop()


def _dag_runs(af, token: str) -> list[dict]:
    from tests.integration.orchestration.test_dag import _api

    return _api(af, "GET", "/api/v2/dags/shop_invoicing/dagRuns?order_by=-logical_date", None, token)["dag_runs"]


def _wait_published(af, token: str, shop: ShopSettings, count: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while len(read_topic(shop.connection, shop.topics.invoices)) < count:
        assert time.monotonic() < deadline, f"{count} invoices not published in {timeout_s}s: {_dag_runs(af, token)}"
        time.sleep(5)


@pytest.fixture(scope="module")
def past_the_retention(lab, scheduled_then_paused) -> dict:
    """Five pipelines brought to where each scenario waits past the retention, then one wait for all:

    * ``paused``, the scenario as a new user met it: 3,000 purchases, a run, a pause until Kafka deleted
      the group's offsets (through the CLI);
    * ``open``: an attempt killed after sending its offsets leaves a transaction open; the broker keeps
      the group's older commit while a transactional commit is pending;
    * ``living``: a pipeline that runs no-op windows every 15 s keeps its offsets through the same minute;
    * ``lost``: outputs published, then the checkpoint topic deleted, so that once the group's offsets
      expire neither source of its position is left;
    * the paused DAG (:func:`scheduled_then_paused`).

    The wait lasts until the paused, lost and DAG groups' offsets are gone and the living pipeline has
    run for longer than the retention; what each test checks after it is its own.
    """
    dag_shop = scheduled_then_paused["shop"]
    paused, open_, living, lost = (lab.make_shop(2, name=n) for n in ("paused", "open", "living", "lost"))
    first = generate(paused.connection, paused.topics.purchases, 3000, invalid_share=0.05, seed=31,
                     transaction_size=100, abort_share=0.1)
    summary, _ = run_cli(paused)
    paused_at = time.monotonic()  # its last commit
    assert summary["invoices"] == first.valid and summary["records_read"] == first.produced

    generate(open_.connection, open_.topics.purchases, 600, invalid_share=0.05, seed=32)
    lab.recover(open_, ["--chunk-records", "100"])
    generate(open_.connection, open_.topics.purchases, 300, invalid_share=0.05, seed=33)
    # The open transaction must outlive the shared wait (up to 4 minutes): the broker aborts it after its
    # timeout, and the group's older commit then expires before the scenario checks it.
    extra = ["--chunk-records", "10000", "--transaction-timeout-ms", "600000", "--chunk-seconds", "50"]
    attempt = lab.job(open_, extra, failpoints="after_send_offsets=stop,partition=0").start()
    assert attempt.wait_for_failpoint_stop(240), attempt.tail()
    attempt.kill()
    held = group_offsets(open_)

    lost_first = generate(lost.connection, lost.topics.purchases, 400, invalid_share=0.1, seed=41)
    lab.recover(lost)
    lab.admin.delete_topics([lost.pipeline().checkpoint_topic])

    generate(living.connection, living.topics.purchases, 200, seed=34)
    lab.recover(living)
    living_since, refreshes = time.monotonic(), 0
    gone = {0: None, 1: None}
    while (group_offsets(paused) != gone or group_offsets(lost) != gone or group_offsets(dag_shop) != gone
           or time.monotonic() - living_since < 75):
        assert time.monotonic() - paused_at < 240, "the broker never deleted the paused, lost and DAG groups' offsets"
        run_shop_window(None, living, living.plan())  # nothing new: only renews the commit
        refreshes += 1
        assert None not in group_offsets(living).values(), "a living pipeline lost its offsets"
        time.sleep(15)
    return {"paused": (paused, first, paused_at), "open": (open_, held), "living": (living, refreshes),
            "lost": (lost, lost_first)}


def test_pauses_past_the_offsets_retention_publish_nothing_twice(lab, past_the_retention):
    """After the wait: the paused pipeline runs with nothing new (it planned the whole topic again
    before), then over 500 more: 3,500 purchases published once each; the open transaction's next run
    fences it, its old commit expires and the run after resumes from the checkpoint topic; the living
    pipeline kept its offsets throughout."""
    paused, first, paused_at = past_the_retention["paused"]
    open_, held = past_the_retention["open"]
    living, refreshes = past_the_retention["living"]
    assert time.monotonic() - paused_at >= 55 and refreshes >= 5
    assert None not in group_offsets(living).values()

    # paused: nothing new, nothing published again; the warning says why.
    again, log = run_cli(paused)
    assert (again["records_published"], again["invoices"], again["shipments"], again["dead_letters"]) == (0, 0, 0, 0)
    assert "has their positions" in log  # planned from the checkpoint topic, said in one line
    assert [line for line in log.splitlines() if "more than half of the brokers' offsets.retention.minutes" in line]
    assert None not in group_offsets(paused).values()  # the run committed the position to the group again
    more = generate(paused.connection, paused.topics.purchases, 500, invalid_share=0.05, seed=35)
    last, _ = run_cli(paused)
    assert last["invoices"] == more.valid and last["records_published"] == more.produced
    report = check_shop(paused, expected_ends=lab.input_ends(paused))
    assert report.ok, report.to_dict()["violations"]
    assert len(read_topic(paused.connection, paused.topics.invoices)) == first.valid + more.valid

    # open: its old commit outlived the retention while the transaction held it.
    assert held[0] is not None and group_offsets(open_)[0] == held[0]
    # What the next run's planner does: aborts it (with the ids of the grouping the positions name).
    fence_transactional_ids(with_committed_grouping(lab.admin, open_.pipeline()), [0, 1])
    lab.wait_for_expired_offsets(open_, 60)
    lab.recover(open_, ["--chunk-records", "100"])
    report = check_shop(open_, expected_ends=lab.input_ends(open_))
    assert report.ok, report.to_dict()["violations"]


def test_a_lost_position_stops_the_run_and_offsets_restore_brings_it_back(lab, past_the_retention):
    """Outputs published, but neither group offsets nor checkpoint records (the checkpoint topic was
    recreated empty): the run refuses with one error line naming the partitions and the command; that
    command restores the position from the outputs' lineage and the next run publishes only what is new."""
    shop, first = past_the_retention["lost"]
    admin = lab.admin
    assert group_offsets(shop) == {0: None, 1: None}
    ensure_topics(admin, shop.specs(2), allow_existing=True)
    with pytest.raises(PositionLostError):
        shop.plan()
    res = cli("run-window", "--bootstrap-servers", shop.connection.bootstrap_servers, *shop_args(shop))
    errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert res.returncode == 2 and len(errors) == 1, res.stderr[-2000:]
    assert f"{shop.topics.purchases}[0], {shop.topics.purchases}[1]" in errors[0]
    assert "offsets restore --from-lineage" in errors[0] and "Traceback" not in res.stderr
    assert len(read_topic(shop.connection, shop.topics.invoices)) == first.valid  # nothing published

    restored = cli("offsets", "restore", "--from-lineage", "--bootstrap-servers", shop.connection.bootstrap_servers,
                   *shop_args(shop))
    assert restored.returncode == 0, restored.stderr[-2000:]
    rows = json.loads(restored.stdout)["partitions"]
    ends = lab.input_ends(shop)
    assert {int(p): r["from"] for p, r in rows.items()} == {0: "lineage", 1: "lineage"}
    # One past the last purchase with an output; aborted records and markers after it are read again
    # (they produce nothing), so the restored position is at most the true end.
    assert all(r["position"] <= ends[int(p)] for p, r in rows.items())
    more = generate(shop.connection, shop.topics.purchases, 100, invalid_share=0.0, seed=42)
    lab.recover(shop)
    assert len(read_topic(shop.connection, shop.topics.invoices)) == first.valid + more.valid
    assert check_shop(shop, expected_ends=lab.input_ends(shop)).ok


def test_a_first_run_and_a_new_partition_still_start_from_the_start_policy(lab):
    """No flag needed on fresh topics; a partition added to the input later starts at its earliest offset
    (the checkpoint records say the pipeline's runs knew only the older partitions)."""
    from confluent_kafka.admin import AdminClient, NewPartitions

    shop = lab.make_shop(2, name="fresh")
    first = generate(shop.connection, shop.topics.purchases, 200, invalid_share=0.0, seed=43)
    window = shop.plan()
    assert {p: r.start for p, r in window.ranges.items()} == {0: 0, 1: 0}
    lab.recover(shop)
    admin = AdminClient(shop.connection.client_config())
    for fut in admin.create_partitions([NewPartitions(shop.topics.purchases, 3),
                                        NewPartitions(shop.pipeline().checkpoint_topic, 3)]).values():
        fut.result(30)
    time.sleep(2)  # the new partitions reach every client's metadata
    more = generate(shop.connection, shop.topics.purchases, 300, invalid_share=0.0, seed=44)
    window = shop.plan()
    assert window.ranges[2].start == 0 and window.ranges[2].end > 0
    lab.recover(shop)
    assert len(read_topic(shop.connection, shop.topics.invoices)) == first.valid + more.valid
    assert check_shop(shop, expected_ends=lab.input_ends(shop)).ok


def test_a_scheduled_run_after_a_pause_past_the_retention_publishes_only_what_is_new(lab, scheduled_then_paused,
                                                                                   past_the_retention):
    """Through Airflow's scheduler (every minute): the first scheduled run published the backlog; the DAG
    was paused until Kafka deleted the group's offsets (the shared wait); purchases arrive; the first
    scheduled run after the unpause publishes exactly those. The plan task warns that the retention
    (1 minute) is shorter than twice the schedule's interval."""
    from tests.integration.orchestration.test_dag import _api, task_logs

    af, token, shop = scheduled_then_paused["af"], scheduled_then_paused["token"], scheduled_then_paused["shop"]
    first = scheduled_then_paused["first"]
    assert all(r["run_type"] == "scheduled" for r in _dag_runs(af, token))
    assert group_offsets(shop) == {0: None, 1: None}  # the shared wait outlived the group's offsets
    more = generate(shop.connection, shop.topics.purchases, 300, invalid_share=0.05, seed=52)
    unpaused = {r["dag_run_id"] for r in _dag_runs(af, token)}
    _api(af, "PATCH", "/api/v2/dags/shop_invoicing", {"is_paused": False}, token)
    _wait_published(af, token, shop, first.valid + more.valid, 600)
    deadline = time.monotonic() + 300
    while not [r for r in _dag_runs(af, token) if r["dag_run_id"] not in unpaused and r["state"] == "success"]:
        assert time.monotonic() < deadline, _dag_runs(af, token)
        time.sleep(5)
    _api(af, "PATCH", "/api/v2/dags/shop_invoicing", {"is_paused": True}, token)
    logs = task_logs(af)
    assert len(read_topic(shop.connection, shop.topics.invoices)) == first.valid + more.valid
    report = check_shop(shop, expected_ends=lab.input_ends(shop))
    assert report.ok, report.to_dict()["violations"]
    assert "offsets.retention.minutes=1" in logs and "this pipeline runs every 1 minute:" in logs
    assert "has their positions" in logs  # the run after the pause planned from the checkpoint topic
