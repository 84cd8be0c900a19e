"""Connect windows whose client dies mid-window: the shared server outlives it, nothing committed goes unpublished.

Three client SIGKILLs in a row on one server (the soak's ``connect_client_kills``, 300 of them in
``make soak-connect-kills``), each while the window's tasks stream records at full speed: a task fails at
its first commit once its client's lease expired (``engine.publishing.client_lease``), Spark retries it and,
when it gave up, kills the stage's other tasks with a thread interrupt, which used to free a task's Arrow
buffer under its copy (a SIGSEGV of the whole server) and to leave each failed attempt's input batch
allocated (Arrow's direct memory ran out after a few kills): both fixed by the project's Spark patches
(``eos_etl.jvm.spark_patches``, docs/spark-python-task-kill.md). The server's heap (and so Arrow's direct
memory) is half its default here: without the second fix it runs out within these three kills.

And the operator's ``on_kill`` (SIGTERM) while the client's tasks stream, on a window that is small but slowed
down: every record of a publishing task sleeps 2 ms (failpoint ``mid_produce=throttle``) and Spark sends it
in Arrow batches of 200, so a task is still streaming when the fault lands. A terminated client's operations
are interrupted, and an interrupted task, with well under a second of work per batch, reaches its stream's
end before Spark destroys its worker: the case where a task that treats the end of its stream as the end of
its window commits records it never read.

Each kill is asserted to have landed on work in progress; the independent checker runs before any retry
(every committed input has its outputs; the committed offsets may be short of the input's ends), then a
retry and the checker again (exact).
"""

from __future__ import annotations

import pytest

from eos_etl.embedded.spark_connect import MEMORY_ENV, SparkConnectServer
from eos_etl.host.ports import free_port
from eos_etl_lab.faults.connect_client_kills import client_kills
from eos_etl_lab.faults.connect_scenarios import ORPHAN_BOUND_S, MidStream, connect_client_term_midstream
from eos_etl_lab.faults.lab import Lab

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.xdist_group("spark-connect-faults")]

#: Two partitions (both tasks run at once on local[2]) of 30,000 purchases at about 400 a second per
#: task: still streaming when the client's interrupt lands.
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


def test_client_sigkills_mid_window_leave_the_server_up_and_every_input_published(tmp_path, connection,
                                                                                   monkeypatch):
    monkeypatch.setenv(MEMORY_ENV, "512m")
    server = SparkConnectServer(home=tmp_path / "spark-connect", port=free_port(), master="local[2,4]")
    try:
        server.start()
        result = client_kills(Lab(connection, connect=server, log_dir=tmp_path / "logs"), 7, kills=3,
                              shop_purchases=400_000, check_every=1)
        pid_after = server.pid()
    finally:
        server.stop()
    assert not result.error, result.error
    counts = result.counters
    assert counts["patched"], "the server's JVM does not have the Spark patches first on its class path"
    # Every kill landed on running tasks; they were stopped by their lease and by Spark's kills of a failed
    # stage's other tasks, the path that interrupts a task's thread.
    assert counts["landed_mid_window"] == 3 and counts["tasks_killed_by_spark"] >= 1, result.detail
    assert counts["lease_refusals_logged"] > 0, result.detail
    # The same server all along, answering the next window each time: no crash, no restart.
    assert counts["server_crashes"] == 0 and counts["crash_files"] == [] and pid_after is not None, result.detail
    # Each kill's tasks ended (their job aborted once the refused task used up its retries, or the server
    # cancelled the orphan) within the orphan's bound.
    assert counts["tasks_ended_max_s"] <= ORPHAN_BOUND_S, result.detail
    # The checker before each retry (3 times) and after the last window: exact, nothing hanging.
    assert counts["checked_before_retry"] == 3
    assert result.ok, (result.violations, result.lso_settled, result.detail)


def test_a_client_terminated_while_its_tasks_stream_leaves_no_committed_input_unpublished(lab):
    result = connect_client_term_midstream(lab, 7, THROTTLED)
    assert not result.error, result.error
    counts = result.counters
    # The fault landed on work in progress: part of a range committed, records to come, tasks killed by Spark
    # (the client interrupts them).
    assert counts["published_before_fault"] > 0 and counts["to_come_at_fault"] > 0, result.detail
    assert counts["tasks_at_fault"] > 0 and counts["tasks_killed"] > 0, result.detail
    assert "fault_not_mid_stream" not in result.violations, result.detail
    # Before any retry: every committed input has its outputs (the committed offsets may stop short).
    assert counts["lost_before_retry"] == 0, result.detail
    assert counts["published_before_retry"] == counts["committed_before_retry"], result.detail
    # The retry: exact, committed offsets at the input's ends, no transaction left hanging.
    assert result.ok, (result.violations, result.lso_settled, result.detail)
