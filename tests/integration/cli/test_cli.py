"""The command line as an operator uses it: real processes, real broker."""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime, timedelta, timezone

import pytest

from eos_etl.checker import check_shop, read_topic
from eos_etl.host.ports import free_port
from eos_etl.shop.generator import generate
from tests.conftest import SASL_PASSWORD
from tests.support.cli import assert_untouched, cli, sasl_args, shop_args


def test_unreachable_broker_fails_fast_with_one_clear_message(shop_factory, admin):
    shop = shop_factory(partitions=1)
    generate(shop.connection, shop.topics.purchases, 10)
    port = free_port()  # nothing listens there
    res = cli("run-window", "--bootstrap-servers", f"127.0.0.1:{port}", *shop_args(shop), timeout=120)
    assert res.returncode == 2, res.stderr
    assert f"cannot reach Kafka at 127.0.0.1:{port}" in res.stderr
    assert "Traceback" not in res.stderr
    assert_untouched(shop, admin)


def test_missing_topic_fails_fast_and_moves_nothing(shop_factory, admin, connection):
    shop = shop_factory(partitions=1)
    generate(shop.connection, shop.topics.purchases, 10)
    args = shop_args(shop)
    args[args.index("--shipments-topic") + 1] = "no-such-topic"
    res = cli("run-window", "--bootstrap-servers", connection.bootstrap_servers, *args)
    assert res.returncode == 2
    assert "topic 'no-such-topic' does not exist" in res.stderr and "Traceback" not in res.stderr
    assert_untouched(shop, admin)
    # and the topic was not auto-created by anyone
    with pytest.raises(Exception, match="does not exist"):
        admin.partitions("no-such-topic")


@pytest.mark.parametrize("pair, says", [
    ("spark.speculation", "expected spark.KEY=VALUE"),
    ("speculation=true", "expected spark.KEY=VALUE"),
    ("spark.sql.session.timeZone=Europe/Berlin", "is fixed at 'UTC'"),
])
def test_a_malformed_spark_conf_is_one_clear_error_and_moves_nothing(shop_factory, admin, connection, pair, says):
    shop = shop_factory(partitions=1)
    generate(shop.connection, shop.topics.purchases, 10)
    res = cli("run-window", "--bootstrap-servers", connection.bootstrap_servers, *shop_args(shop),
              "--spark-conf", pair, timeout=120)
    assert res.returncode == 2, res.stderr
    errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and says in errors[0], res.stderr
    assert "Traceback" not in res.stderr
    assert_untouched(shop, admin)


def test_wrong_credentials_fail_fast(shop_factory, admin, sasl_connection):
    shop = shop_factory(partitions=1)
    res = cli("plan-window", *sasl_args(sasl_connection), *shop_args(shop),
              env={"EOS_ETL_KAFKA_PASSWORD": "wrong-password"}, timeout=120)
    assert res.returncode == 2
    assert "rejected the credentials" in res.stderr and "wrong-password" not in res.stderr + res.stdout
    assert_untouched(shop, admin)


@pytest.mark.spark
def test_plan_then_run_window_over_sasl_prints_json_summary(shop_factory, sasl_connection, connection, tmp_path):
    """Over SASL_SSL with SCRAM, as a principal holding only the pipeline role's ACLs: that is enough."""
    shop = shop_factory(partitions=2, conn=sasl_connection, roles=("pipeline",))
    stats = generate(connection, shop.topics.purchases, 500, invalid_share=0.1, seed=21)  # the shop's own writer
    sasl = sasl_args(sasl_connection)
    env = {"EOS_ETL_KAFKA_PASSWORD": SASL_PASSWORD}
    plan = cli("plan-window", *sasl, *shop_args(shop), "--compact", env=env)
    assert plan.returncode == 0, plan.stderr
    window = json.loads(plan.stdout)
    assert window["partitions"] == {"0": [0, window["partitions"]["0"][1]], "1": [0, window["partitions"]["1"][1]]}
    window_file = tmp_path / "window.json"
    window_file.write_text(plan.stdout)

    run = cli("run-window", *sasl, *shop_args(shop), "--window-json", f"@{window_file}", "--chunk-records", "100",
              "--run-id", "cli-run-1", "--compact", env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    summary = json.loads(run.stdout)
    invalid = sum(stats.invalid.values())
    assert (summary["records_read"], summary["invoices"], summary["shipments"], summary["dead_letters"]) == (
        500, stats.valid, stats.valid, invalid)
    assert summary["transactions"] >= 5 and summary["window"] == window and summary["run_id"] == "cli-run-1"
    assert summary["route"] == "spark-submit"  # its own local Spark application
    # Read over SASL_SSL before any login (ApiVersions): the session broker is formatted by Kafka 4.x's defaults.
    assert summary["cluster_features"]["transaction.version"] == 2, summary["cluster_features"]
    assert SASL_PASSWORD not in run.stderr + run.stdout  # never logged
    report = check_shop(dataclasses.replace(shop, connection=connection),
                        expected_ends={int(p): se[1] for p, se in window["partitions"].items()})
    assert report.ok, report.to_dict()

    again = cli("run-window", *sasl, *shop_args(shop), "--compact", env=env)
    assert again.returncode == 0, again.stderr[-2000:]
    assert json.loads(again.stdout)["records_read"] == 0  # planned from committed offsets: empty


def test_generate_stamps_every_purchase_with_the_given_record_time(shop_factory, connection):
    """`generate --timestamp`: late arrivals for an hour a scheduled run or a backfill covers (CreateTime)."""
    from confluent_kafka import TIMESTAMP_CREATE_TIME, Consumer, TopicPartition

    shop = shop_factory(partitions=1)
    common = ["--bootstrap-servers", connection.bootstrap_servers, "--input-topic", shop.topics.purchases,
              "--count", "7", "--no-progress"]
    # Two hours ago, not a fixed date: records stamped past the topic's retention (the broker's 7 days) are
    # deleted at its next retention check, under the read below.
    stamp = (datetime.now(timezone(timedelta(hours=1))) - timedelta(hours=2)).replace(second=0, microsecond=0)
    res = cli("generate", *common, "--timestamp", stamp.isoformat())
    assert res.returncode == 0, res.stderr
    consumer = Consumer({**connection.client_config(), "group.id": "stamp-check", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(shop.topics.purchases, 0, 0)])
        messages = []
        while len(messages) < 7:
            msg = consumer.poll(10)
            assert msg is not None, f"only {len(messages)} of 7 purchases"
            assert msg.error() is None, msg.error()
            messages.append(msg)
    finally:
        consumer.close()
    assert {m.timestamp() for m in messages} == {(TIMESTAMP_CREATE_TIME, int(stamp.timestamp()) * 1000)}

    naive = stamp.replace(tzinfo=None).isoformat()  # no timezone: refused, nothing written
    bad = cli("generate", *common, "--timestamp", naive)
    assert bad.returncode == 2 and bad.stderr.startswith("error:") and "has no timezone" in bad.stderr
    assert len(read_topic(shop.connection, shop.topics.purchases)) == 7


def test_transaction_timeout_above_broker_maximum_fails_fast(shop_factory, connection):
    shop = shop_factory(partitions=1)
    res = cli("run-window", "--bootstrap-servers", connection.bootstrap_servers, *shop_args(shop),
              "--transaction-timeout-ms", "1000000", "--chunk-seconds", "10")
    assert res.returncode == 2
    assert "exceeds the broker's transaction.max.timeout.ms=900000" in res.stderr
