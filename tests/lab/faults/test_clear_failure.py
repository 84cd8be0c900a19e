"""The one verdict every soak uses for how a faulted run ended (broker-free)."""

from __future__ import annotations

import pytest

from eos_etl_lab.faults import broker_scenarios as sc
from eos_etl_lab.faults.clear_failure import failed_clearly, run_violations, trial_failed_clearly
from eos_etl_lab.faults.lab import TrialResult
from eos_etl_lab.faults.partition_soak import summarize

ONE_ERROR = "some log line\nerror: cannot reach Kafka at x (PLAINTEXT) any more: no broker answered\n"
TRACEBACK = "Traceback (most recent call last):\n  File \"x\", line 1\nTimeoutError\n"


@pytest.mark.parametrize("code", [1, 2])
def test_exit_1_or_2_with_one_error_line_is_a_clear_failure(code):
    assert run_violations(code, ONE_ERROR) == {}
    assert failed_clearly(code, ONE_ERROR)


def test_what_is_not_a_clear_failure():
    assert run_violations(0, "all fine\n") == {} and not failed_clearly(0, "all fine\n")  # finished
    assert run_violations(None, "") == {"hung": 1}
    assert run_violations(-9, "") == {"killed_by_signal": 1}
    assert run_violations(137, ONE_ERROR) == {"killed_by_signal": 1}  # 128 + SIGKILL from a shell
    assert run_violations(3, ONE_ERROR) == {"unexpected_exit": 1}
    # Python's own exit code for an uncaught exception is 1 too: the traceback and the missing line tell.
    assert run_violations(1, TRACEBACK) == {"traceback": 1, "not_one_error_line": 1}
    assert not failed_clearly(1, TRACEBACK)
    assert run_violations(2, ONE_ERROR + "error: a second one\n") == {"not_one_error_line": 1}
    assert run_violations(0, ONE_ERROR) == {"not_one_error_line": 1}  # finished, yet printed an error
    assert run_violations(1, ONE_ERROR, took_s=61.0, bound_s=60.0) == {"over_bound": 1}
    assert failed_clearly(1, ONE_ERROR, took_s=59.0, bound_s=60.0)


def test_the_start_phase_verdict_is_the_shared_one():
    assert sc.start_phase_verdict(1, ONE_ERROR) == {}
    assert sc.start_phase_verdict(2, ONE_ERROR) == {}
    assert sc.START_PHASE_EXITS == (0, 1, 2)


def test_a_trial_failed_clearly_from_what_its_results_kept():
    assert trial_failed_clearly(TrialResult("s", "1", exit_code=1))
    assert trial_failed_clearly(TrialResult("s", "1", exit_code=2, violations={"lost": 1}))  # checker: another matter
    assert not trial_failed_clearly(TrialResult("s", "1", exit_code=0))
    assert not trial_failed_clearly(TrialResult("s", "1", exit_code=1, violations={"no_clear_error": 1}))
    assert not trial_failed_clearly(TrialResult("s", "1", exit_code=2, violations={"not_one_error_line": 1}))
    assert not trial_failed_clearly(TrialResult("s", "1", exit_code=None, hung=True))
    assert not trial_failed_clearly(TrialResult("s", "1", exit_code=-11))


def test_the_partition_table_counts_exit_1_and_2_as_failed_clearly():
    trials = [TrialResult("split_job_on_minority", f"seed={i}", exit_code=code, violations=v, variant="tv1")
              for i, (code, v) in enumerate([(1, {}), (2, {}), (0, {}), (1, {"no_clear_error": 1})])]
    [row] = summarize(trials)
    assert row["failed_clearly"] == 2


def test_a_task_attempts_traceback_in_sparks_log_is_not_the_runs():
    spark_warning = ("26/11/26 05:29:00 WARN TaskSetManager: Lost task 0.0 in stage 3.0 (TID 5): "
                     "org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n"
                     "  File \"/x/runner.py\", line 369, in publish\n"
                     "eos_etl.engine.errors.ProducerFencedError: abort_transaction failed\n")
    assert run_violations(1, spark_warning + ONE_ERROR) == {}
    assert run_violations(0, spark_warning) == {}
    assert run_violations(1, spark_warning + TRACEBACK) == {"traceback": 1, "not_one_error_line": 1}
