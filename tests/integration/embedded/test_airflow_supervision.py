"""The embedded Airflow is supervised: a component that dies is restarted, and the schedule goes on.

The scheduler is SIGKILLed while a scheduled run's ``run_window`` task runs; supervisord restarts it at
once, ``status`` names the death, the reaper takes down what the dead one left, and within the stated
bound the interrupted run succeeds on its retry and the next scheduled run succeeds too, exactly once.
"""

from __future__ import annotations

import os
import signal
import time
from datetime import datetime

import pytest

from eos_etl.checker import check_shop, read_topic
from eos_etl.embedded.airflow import DUE_RUN_BOUND_S
from eos_etl.host.process import ProcStat, all_pids
from eos_etl.shop.generator import generate
from tests.integration.orchestration.test_dag import _api, _unpause, airflow_for

pytestmark = [pytest.mark.spark, pytest.mark.slow]

DAG = "shop_invoicing"
# A window of this many purchases keeps run_window busy for seconds on the Connect server: the kill lands in it.
PURCHASES = 50_000
# How long a window's retry may take on 2 busy cores after the scheduler is back.
WINDOW_S = 180


def _ti(af, token, run_id: str, task: str) -> dict:
    return _api(af, "GET", f"/api/v2/dags/{DAG}/dagRuns/{run_id}/taskInstances/{task}", None, token)


def _runs(af, token) -> list[dict]:
    return _api(af, "GET", f"/api/v2/dags/{DAG}/dagRuns?order_by=logical_date", None, token)["dag_runs"]


def _scheduler(af):
    return next(c for c in af.components() if c.name == "scheduler")


def test_a_scheduler_killed_mid_run_is_restarted_and_the_due_runs_still_succeed(shop_factory, kafka_broker,
                                                                                 spark_connect_server, tmp_path):
    shop = shop_factory(partitions=2)
    stats = generate(shop.connection, shop.topics.purchases, PURCHASES, invalid_share=0.01, seed=91)
    af = airflow_for(shop, tmp_path / "af", kafka_broker, overrides={"EOS_ETL_SCHEDULE": "* * * * *"},
                     spark_connect=spark_connect_server)
    af.start()
    try:
        token = af.rest.token()
        _unpause(af, token, DAG)
        deadline = time.monotonic() + 300
        while True:  # a scheduled run's window in progress
            running = [r for r in _runs(af, token) if r["state"] == "running"]
            if running and _ti(af, token, running[0]["dag_run_id"], "run_window")["state"] == "running":
                victim = running[0]
                break
            assert time.monotonic() < deadline, _runs(af, token)
            time.sleep(0.5)
        old = _scheduler(af)
        workers = [pid for pid in all_pids() if (s := ProcStat.read(pid)) is not None and s.pgrp == old.pid]
        os.kill(old.pid, signal.SIGKILL)
        killed_at, killed_wall = time.monotonic(), datetime.now().astimezone()
        # Nothing the killed attempt left is visible without its offsets (checked before any retry).
        assert check_shop(shop).ok

        while not ((new := _scheduler(af)).running and new.pid != old.pid):
            assert time.monotonic() - killed_at < 30, af.status().describe()
            time.sleep(0.5)
        status = af.status()
        assert status.deaths["scheduler"].how == "terminated by SIGKILL", status.deaths
        assert "scheduler: running" in status.describe() and "last died" in status.describe()
        # The reaper killed the dead scheduler's LocalExecutor workers and log server (they ignore SIGTERM).
        while any(ProcStat.read(pid) is not None and ProcStat.read(pid).state != "Z" for pid in workers):
            assert time.monotonic() - killed_at < 30, [(p, ProcStat.read(p)) for p in workers]
            time.sleep(0.5)

        # The interrupted run and the next one that falls due both succeed within the bound.
        bound = DUE_RUN_BOUND_S + 60 + 2 * WINDOW_S
        while True:
            runs = _runs(af, token)
            ended = {r["dag_run_id"]: r for r in runs if r["state"] in ("success", "failed")}
            later = [r for r in runs if datetime.fromisoformat(r["logical_date"]) > killed_wall
                     or datetime.fromisoformat(r["run_after"]) > killed_wall]
            if victim["dag_run_id"] in ended and any(r["dag_run_id"] in ended for r in later):
                break
            assert time.monotonic() - killed_at < bound, runs
            time.sleep(2)
        print(f"both runs ended {time.monotonic() - killed_at:.0f} s after the kill (bound {bound} s)")
        assert ended[victim["dag_run_id"]]["state"] == "success", ended
        assert all(ended[r["dag_run_id"]]["state"] == "success" for r in later if r["dag_run_id"] in ended)
        # The kill landed on the window: it took another try.
        assert _ti(af, token, victim["dag_run_id"], "run_window")["try_number"] >= 2
        _api(af, "PATCH", f"/api/v2/dags/{DAG}", {"is_paused": True}, token)
    finally:
        af.stop()
    assert len(read_topic(shop.connection, shop.topics.invoices)) == stats.valid
    report = check_shop(shop)
    assert report.ok, report.to_dict()["violations"]
