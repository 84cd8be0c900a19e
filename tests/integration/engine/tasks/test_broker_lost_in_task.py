"""A broker lost while a publishing task runs is a runtime failure (exit code 1, retried), on a real broker.

Only the driver's process used to remember that the cluster answered this run: a task that
found no broker any more raised "cannot reach Kafka" as if the address had never worked
(:class:`~eos_etl.kafka.errors.BrokerUnreachableError`, exit code 2, never retried by Airflow).
The driver now hands the task what it knows (:func:`eos_etl.engine.tasks.publish_task.publish_task`),
so the task's error is :class:`~eos_etl.kafka.errors.BrokerLostError`, as on the driver.

The run: ``python -m eos_etl run-window`` against a broker of this module; its task pauses
right after ``init_transactions`` (a failpoint), the broker is stopped, the task's read of its
committed position finds no broker. Spark does not retry the task (``local[2,1]``): the run's
exit code is the task's own diagnosis. After the broker is back the next run publishes the
window exactly once.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid

import pytest

from eos_etl.checker import check_shop
from eos_etl.embedded.kafka_cluster import KafkaCluster
from eos_etl.host.ports import free_port
from eos_etl.kafka.admin import ClusterAdmin
from eos_etl.kafka.connection import KafkaConnection
from eos_etl.kafka.topics import ensure_topics
from eos_etl.shop.generator import generate
from eos_etl.shop.schema import ShopTopics
from eos_etl.shop.settings import ShopSettings
from tests.support.cli import shop_args

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.fixture
def own_broker(tmp_path):
    """A broker of this test alone: it gets stopped."""
    broker = KafkaCluster(home=tmp_path / "kafka", port=free_port(), heap="512m")
    try:
        broker.start()
        yield broker
    finally:
        broker.stop()


def test_a_broker_lost_under_a_running_task_fails_the_run_with_exit_1_and_the_next_run_is_exact(own_broker, tmp_path):
    connection = KafkaConnection(own_broker.bootstrap_servers)
    tag = uuid.uuid4().hex[:10]
    shop = ShopSettings(connection=connection, topics=ShopTopics(purchases=f"purchases-{tag}",
                                                                 invoices=f"invoices-{tag}",
                                                                 shipments=f"shipments-{tag}",
                                                                 dead_letters=f"purchases-{tag}.dlq"),
                        group=f"shop-{tag}", transactional_id_prefix=f"shop-{tag}")
    ensure_topics(ClusterAdmin(connection), shop.specs(1))
    generate(connection, shop.topics.purchases, 200, seed=3)
    paused = tmp_path / "task-paused"
    env = {**os.environ, "EOS_ETL_SPARK_MASTER": "local[2,1]",  # no task retry: the run ends in the task's error
           "EOS_ETL_FAILPOINTS": f"after_init=sleep:15,once={paused}"}
    run = subprocess.Popen([sys.executable, "-m", "eos_etl", "run-window", "--bootstrap-servers",
                            own_broker.bootstrap_servers, *shop_args(shop), "--compact"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 240
        while not paused.exists():
            assert run.poll() is None, f"the run ended before its task started: {run.communicate()[1][-3000:]}"
            assert time.monotonic() < deadline, "the task never reached its failpoint"
            time.sleep(0.2)
        own_broker.stop()  # planned, preflighted, the task's producer initialised: the broker goes away
        _, stderr = run.communicate(timeout=300)
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert run.returncode == 1, f"exit code {run.returncode}: {errors or stderr[-3000:]}"
    assert len(errors) == 1, stderr[-3000:]
    assert f"cannot reach Kafka at {own_broker.bootstrap_servers} (PLAINTEXT) any more" in errors[0], errors
    # No traceback of the command's own (Spark's log quotes the failed task's, as "PythonException: Traceback").
    assert not any(line.startswith("Traceback") for line in stderr.splitlines()), stderr[-3000:]

    own_broker.start()
    again = subprocess.run([sys.executable, "-m", "eos_etl", "run-window", "--bootstrap-servers",
                            own_broker.bootstrap_servers, *shop_args(shop), "--compact"],
                           capture_output=True, text=True, timeout=300, env={**os.environ})
    assert again.returncode == 0, again.stderr[-3000:]
    report = check_shop(shop)
    assert report.ok, report.to_dict()
