"""The replica guard cancels its own run's Spark work, never what runs beside it, on real Spark.

When the outputs stay below ``min.insync.replicas`` the guard (a driver thread) cancels the run's
Spark job. It used to cancel everything: ``cancelAllJobs`` on a classic application, and on
Spark Connect ``interruptAll`` on the pipeline's daily session, which its other clients share (a
replay of the same pipeline, a validation). Now it cancels only the run's job group, or its
operation tag (:attr:`~eos_etl.engine.tasks.task_attempts.AttemptTracker.group`).

Two operations run side by side on one session, each in its own thread and tracker; the guard
of one trips: that one is cancelled, the other one completes. The shortfall itself comes from a
stand-in probe (what the guard detects against real brokers is tested in
tests/lab/faults/test_cluster_faults.py); what is real here is Spark and what the guard cancels.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from eos_etl.engine.errors import NotEnoughReplicasError
from eos_etl.engine.planning.replicas import Shortfall
from eos_etl.engine.tasks.replica_guard import ReplicaGuard
from eos_etl.engine.tasks.task_attempts import AttemptTracker
from eos_etl.kafka.connection import KafkaConnection
from eos_etl.spark.config import TOKEN_ENV
from tests.support import ROOT

#: The guarded operation would run this long; the other one runs OTHER_S, both from the same moment.
GUARDED_S = 40.0
OTHER_S = 12.0
#: The guard trips this long after it starts (the shortfall is there from its first probe).
GRACE_S = 4.0

pytestmark = [pytest.mark.spark]


class ShortOutputs:
    """The guard's probe: one output partition short of its min ISR from the first probe on."""

    def min_insync_replicas(self) -> dict[str, int]:
        return {"out": 2}

    def shortfalls(self):
        return [Shortfall("out", 0, (1, 2, 3), (1,), 2)], [1], [2, 3]


def sleeping_job(spark, seconds: float):
    """One task that sleeps in the JVM (no Python worker: runs the same on a Connect server)."""
    return spark.range(1, numPartitions=1).selectExpr(
        f"reflect('java.lang.Thread', 'sleep', cast({int(seconds * 1000)} + id as bigint)) AS slept").collect()


def side_by_side(spark) -> dict:
    """Run the guarded operation and the other one at once; what each ended with, and when."""
    outcome: dict = {}
    started = threading.Barrier(2)

    def guarded() -> None:
        with AttemptTracker(spark, "guarded") as attempts:
            guard = ReplicaGuard(spark, KafkaConnection("127.0.0.1:9"), ["out"], group=attempts.group,
                                 grace_s=GRACE_S, interval_s=0.5)
            guard._probe = ShortOutputs()
            with guard:
                started.wait()
                t0 = time.monotonic()
                try:
                    outcome["guarded"] = sleeping_job(spark, GUARDED_S)
                except Exception as exc:  # noqa: BLE001 - the cancellation, as Spark reports it
                    outcome["guarded"] = exc
                outcome["guarded_s"] = time.monotonic() - t0
                outcome["tripped"] = guard.tripped

    def other() -> None:
        with AttemptTracker(spark, "beside"):
            started.wait()
            t0 = time.monotonic()
            try:
                outcome["other"] = sleeping_job(spark, OTHER_S)
            except Exception as exc:  # noqa: BLE001 - cancelled too: the bug
                outcome["other"] = exc
            outcome["other_s"] = time.monotonic() - t0

    threads = [threading.Thread(target=guarded), threading.Thread(target=other)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(GUARDED_S + 60)
    return outcome


def assert_only_the_guarded_one_cancelled(outcome: dict) -> None:
    assert isinstance(outcome["tripped"], NotEnoughReplicasError), outcome
    assert isinstance(outcome["guarded"], Exception) and outcome["guarded_s"] < GUARDED_S - 10, \
        f"the guarded operation was not cancelled: {outcome}"
    assert not isinstance(outcome["other"], Exception), f"the operation beside it was cancelled too: {outcome['other']}"
    assert len(outcome["other"]) == 1 and outcome["other_s"] >= OTHER_S - 1, outcome


def test_a_tripped_guard_cancels_its_own_job_group_only(spark):
    sleeping_job(spark, 0.01)  # the session warm: both jobs start at once, well before the guard trips
    assert_only_the_guarded_one_cancelled(side_by_side(spark))


@pytest.mark.slow
def test_on_spark_connect_a_tripped_guard_interrupts_its_own_operations_only(connect_server):
    # A client process of its own: a Connect session in this process would turn the session-wide builder
    # (and the suite's classic `spark`) into a Connect one.
    env = {**os.environ, TOKEN_ENV: connect_server.token(), "EOS_ETL_GUARD_SCOPE_REMOTE": connect_server.url}
    res = subprocess.run([sys.executable, "-c", f"import {__name__} as t; t.on_connect()"], env=env,
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert res.returncode == 0, res.stderr[-4000:]


def on_connect() -> None:
    """The Connect side, in the client process: the pipeline's daily session, shared by its clients (a
    window's and, beside it, a validation's), two operations on it at once."""
    from eos_etl.spark.connect_client import close_session, connect_session

    session = connect_session(os.environ["EOS_ETL_GUARD_SCOPE_REMOTE"], "eos-etl-guard-scope")
    try:
        sleeping_job(session, 0.01)
        assert_only_the_guarded_one_cancelled(side_by_side(session))
    finally:
        close_session(session)


@pytest.fixture(scope="module")
def connect_server(tmp_path_factory):
    from eos_etl.embedded.spark_connect import SparkConnectServer
    from eos_etl.host.ports import free_port

    server = SparkConnectServer(home=tmp_path_factory.mktemp("spark-connect-guard"), port=free_port(),
                                master="local[2,4]")
    try:
        server.start()
        yield server
    finally:
        server.stop()
