"""A DAG parse is light: Airflow's DAG processor parses every file in dags/ (and loads plugins/)
every 30 s; what they import at module level loads neither Spark nor a Kafka client nor Great
Expectations, and reads no Variable or Connection (those are task-time work).

Each file is parsed in a fresh interpreter (tests/dag_parse_probe.py), so nothing another test
imported hides what the parse loads. Broker-free.

``shop_invoicing_on_arrival``'s AssetWatcher exists at parse time, but its trigger carries only the
names of the Variable and the Connection and reads them in the triggerer.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.support import ROOT

PROBE = ROOT / "tests" / "support" / "dag_parse_probe.py"
HEAVY = ("pyspark", "py4j", "confluent_kafka", "great_expectations", "pandas", "pyarrow", "numpy")
#: The bound of one file's parse after Airflow's import (measured 0.6-0.9 s on the 2-core CI machine).
PARSE_BOUND_S = 5.0
LIGHT = ["dags/shop_invoicing.py", "dags/shop_invoicing_replay.py", "dags/shop_revenue.py",
         "dags/shop_invoicing_on_arrival.py", "plugins/eos_etl_reports.py"]


def parse(relative: str) -> dict:
    res = subprocess.run([sys.executable, str(PROBE), str(ROOT / relative)], capture_output=True, text=True,
                         timeout=120, cwd=ROOT)
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_every_dag_and_plugin_file_is_covered():
    files = {str(p.relative_to(ROOT)) for d in ("dags", "plugins") for p in (ROOT / d).glob("*.py")}
    assert files == set(LIGHT)


@pytest.mark.parametrize("relative", LIGHT)
def test_a_parse_loads_no_spark_kafka_client_or_great_expectations_and_reads_nothing(relative):
    found = parse(relative)
    assert [m for m in found["modules"] if m in HEAVY] == []
    assert found["reads"] == []
    assert found["seconds"] < PARSE_BOUND_S, found["seconds"]


def test_the_arrivals_trigger_carries_names_only_and_comes_back_from_its_serialized_form():
    from airflow.triggers.base import BaseEventTrigger

    from eos_etl.orchestration import arrivals_watch
    from eos_etl.orchestration.arrivals import WATCH_CONN_ID

    asset = arrivals_watch.arrivals_asset(quiet_s=2.0)
    (watcher,) = asset.watchers
    classpath, kwargs = watcher.trigger.serialize()
    assert kwargs == {"variable": "eos_etl_shop", "kafka_config_id": WATCH_CONN_ID, "quiet_s": 2.0,
                      "max_batch_s": 60.0}
    module, name = classpath.rsplit(".", 1)
    again = getattr(__import__(module, fromlist=[name]), name)(**kwargs)  # as the triggerer rebuilds it
    assert again.serialize() == (classpath, kwargs)
    # Airflow identifies a watcher's trigger by this hash: it must not change from one parse to the next.
    assert BaseEventTrigger.hash(classpath, kwargs) == BaseEventTrigger.hash(*again.serialize())
