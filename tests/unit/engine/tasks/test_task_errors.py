"""A Spark job whose tasks ended in one of the project's errors fails the run with that error: the
diagnosis from an error's text. A real Spark job: tests/integration/engine/tasks/test_task_errors.py."""

from __future__ import annotations

from eos_etl.engine.errors import PublishError, TaskProcessLostError
from eos_etl.engine.tasks.task_errors import diagnosed


def test_the_last_named_project_error_of_the_text_is_the_tasks():
    text = ("Job aborted due to stage failure: Task 0 in stage 3.0 failed 4 times, most recent failure: "
            "org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n"
            "  File \"/w/include/eos_etl/engine/tasks/runner.py\", line 369, in publish\n"
            "eos_etl.engine.errors.ProducerFencedError: abort_transaction failed for transactional.id t-0: fenced\n"
            "\nDuring handling of the above exception, another exception occurred:\n\n"
            "eos_etl.engine.errors.PublishError: t-0: giving up after 5 aborted transactions; last: timed out\n"
            "\tat org.apache.spark.api.python.BasePythonRunner...\n")
    error = diagnosed(RuntimeError(text))
    assert type(error) is PublishError and error.exit_code == 1
    assert str(error).endswith("giving up after 5 aborted transactions; last: timed out")


def test_a_task_whose_process_died_is_a_runtime_failure_in_one_line():
    text = ("Job aborted due to stage failure: Task 1 in stage 2.0 failed 1 times, most recent failure: Lost task 1.0 "
            "in stage 2.0 (TID 5) (127.0.0.2 executor 1): ExecutorLostFailure (executor 1 exited caused by one of "
            "the running tasks) Reason: Command exited with code 137\nDriver stacktrace:\n\tat org.apache...\n"
            "\tat org.apache.spark.scheduler.DAGScheduler...")
    error = diagnosed(RuntimeError(text))
    assert type(error) is TaskProcessLostError and error.exit_code == 1
    message = str(error)
    assert "\n" not in message and "Lost task 1.0 in stage 2.0" in message and "Command exited with code 137" in message
    assert "Job aborted" not in message  # Spark's preamble left out: the task's own failure is the reason
    crashed = diagnosed(RuntimeError("Python worker exited unexpectedly (crashed)"))
    assert type(crashed) is TaskProcessLostError and "Python worker exited unexpectedly (crashed)" in str(crashed)


def test_nothing_else_is_diagnosed():
    assert diagnosed(RuntimeError("TypeError: a bug\n")) is None
    assert diagnosed(RuntimeError("eos_etl.nothing_here.Missing: x\n")) is None  # a module not imported
    assert diagnosed(RuntimeError("eos_etl.engine.errors.log: not a class\n")) is None
