"""Fast subset of the fault-injection suite (the soak, ``make soak``, runs all of it at scale).

Real processes, real broker: each trial kills or freezes ``python -m eos_etl
run-window`` process groups (CLI, Spark JVM, Python workers), lets a new run
finish the window, and asks the independent checker. A trial passes only if
the fault really landed, the checker reports zero violations and no output
transaction is left hanging.
"""

from __future__ import annotations

import pytest

from eos_etl_lab.faults import Lab
from eos_etl_lab.faults import broker_scenarios as sc

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.fixture(scope="module")
def lab(kafka_broker, connection) -> Lab:
    return Lab(connection)


def assert_passed(result):
    assert not result.error, result.error
    assert result.kills >= 1, f"the fault never landed: {result}"
    assert result.violations == {}, result
    assert result.lso_settled, "an output partition's last stable offset stays below its high watermark"


# The steps where a kill leaves the most undecided: offsets sent, all acked before commit
# (a kill mid-produce is the zombie test's and the cluster smoke's). Every step with several
# seeds, and broker SIGKILL + restart mid-run, run in `make soak`; a broker killed while a run
# starts is tests/integration/kafka/test_start_phase.py, a node killed mid-transaction
# tests/lab/faults/test_cluster_faults.py.
@pytest.mark.parametrize("point", ["after_send_offsets", "before_commit"])
def test_kill_at_step_boundary_then_recover_exactly_once(lab, point):
    assert_passed(sc.kill_at_step(lab, point, seed=1))


def test_zombie_resumed_after_takeover_is_fenced_and_adds_nothing(lab):
    result = sc.zombie(lab, seed=1)
    assert_passed(result)
    assert "fenced=True" in result.detail


def test_transaction_outliving_its_timeout_is_aborted_by_the_broker_and_recovered(lab):
    assert_passed(sc.transaction_timeout(lab, seed=1))
