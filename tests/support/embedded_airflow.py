"""An embedded Airflow on free ports, for tests/unit/embedded/test_airflow.py (a start that fails) and
tests/integration/embedded/test_airflow.py (a start that succeeds)."""

from __future__ import annotations

from pathlib import Path

from eos_etl.embedded.airflow import EmbeddedAirflow
from eos_etl.host.ports import free_port


def _free_ports_airflow(home: Path, **kwargs) -> EmbeddedAirflow:
    """An embedded Airflow that collides with nothing else on this machine (dev Airflow, other tests)."""
    return EmbeddedAirflow(
        home=home,
        port=free_port(),
        worker_log_server_port=free_port(),
        trigger_log_server_port=free_port(),
        parallelism=2,
        **kwargs,
    )
