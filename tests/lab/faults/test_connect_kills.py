"""A Connect window whose client dies while its tasks stream records: nothing committed goes unpublished.

The soak's client-kill scenarios (``connect_client_kill_midstream``, ``connect_client_term_midstream``)
on a window that is small but slowed down: every record of a publishing task sleeps 2 ms (failpoint
``mid_produce=throttle``) and Spark sends it in Arrow batches of 200, so a task is still streaming
when the fault lands. A terminated client's operations are interrupted, and an interrupted task, with
well under a second of work per batch, reaches its stream's end before Spark destroys its worker: the
case where a task that treats the end of its stream as the end of its window commits records it never
read. A SIGKILLed client's tasks fail at their first commit once its lease expired
(``engine.publishing.client_lease``), long before the server cancels the orphan (up to
``ORPHAN_BOUND_S``). Each trial asserts where the fault landed (the run had committed part of a
partition's range, records were still to come, Spark killed the tasks or their lease stopped them),
runs the independent checker before any retry (every committed input has its outputs; the committed
offsets may be short of the input's ends), then a retry and the checker again (exact).
"""

from __future__ import annotations

import pytest

from eos_etl.embedded.spark_connect import SparkConnectServer
from eos_etl.engine.publishing.client_lease import LEASE_TTL_S
from eos_etl.host.ports import free_port
from eos_etl_lab.faults.connect_scenarios import (
    MidStream,
    connect_client_kill_midstream,
    connect_client_term_midstream,
)
from eos_etl_lab.faults.lab import Lab

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.xdist_group("spark-connect-faults")]

#: Two partitions (both tasks run at once on local[2]) of 30,000 purchases at about 400 a second per
#: task: still streaming when the orphan of a killed client is cancelled.
THROTTLED = MidStream(purchases=60_000, partitions=2, chunk_records=1000, fault_after_s=2.0, throttle_s=0.002,
                      arrow_batch=200, transaction_size=1000)


@pytest.fixture(scope="module")
def lab(tmp_path_factory, connection):
    server = SparkConnectServer(home=tmp_path_factory.mktemp("spark-connect-kills"), port=free_port(),
                                master="local[2,4]")
    try:
        server.start()
        yield Lab(connection, connect=server, log_dir=tmp_path_factory.mktemp("kill-logs"))
    finally:
        server.stop()


@pytest.mark.parametrize("scenario", [connect_client_kill_midstream, connect_client_term_midstream],
                         ids=["SIGKILL", "SIGTERM"])
def test_a_client_ended_while_its_tasks_stream_leaves_no_committed_input_unpublished(lab, scenario):
    result = scenario(lab, 7, THROTTLED)
    assert not result.error, result.error
    counts = result.counters
    # The fault landed on work in progress: part of a range committed, records to come, tasks stopped: killed
    # by Spark (SIGTERM: the client interrupts them), or at a commit by their client's expired lease (SIGKILL).
    assert counts["published_before_fault"] > 0 and counts["to_come_at_fault"] > 0, result.detail
    stopped = "lease_refusals_logged" if scenario is connect_client_kill_midstream else "tasks_killed"
    assert counts["tasks_at_fault"] > 0 and counts[stopped] > 0, result.detail
    if scenario is connect_client_kill_midstream:  # the lease ended them, not the server's orphan clean-up
        assert result.fail_s <= LEASE_TTL_S + 10, result.detail
    assert "fault_not_mid_stream" not in result.violations, result.detail
    # Before any retry: every committed input has its outputs (the committed offsets may stop short).
    assert counts["lost_before_retry"] == 0, result.detail
    assert counts["published_before_retry"] == counts["committed_before_retry"], result.detail
    # The retry: exact, committed offsets at the input's ends, no transaction left hanging.
    assert result.ok, (result.violations, result.lso_settled, result.detail)
