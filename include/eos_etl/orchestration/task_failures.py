"""Which failed tries Airflow retries: runtime failures yes, bad configuration no.

The job's exit code says which it was (:mod:`eos_etl.errors`): 1, the world failed under a run
that was set up right (brokers lost, outputs below ``min.insync.replicas``, fenced): the task's
retries run it again; 2, bad configuration or arguments: nothing was published, and running it
unchanged fails the same way, so the try fails for good (``AirflowFailException``) and the run's
one failure alert goes out at once instead of after every retry. Errors the task process
diagnoses itself (an :class:`~eos_etl.errors.EosEtlError`) follow their own ``exit_code``.
Anything else (a signal, a crash) is retried.
"""

from __future__ import annotations

from airflow.sdk.exceptions import AirflowException, AirflowFailException

from ..errors import EXIT_CONFIGURATION, EosEtlError
from .alerts import record_error


def for_exit_code(code: int | None, message: str) -> AirflowException:
    """What a task raises for a job that ended with ``code`` (not 0): no retry for exit code 2."""
    if code == EXIT_CONFIGURATION:
        return AirflowFailException(f"{message} (exit code 2: bad configuration or arguments; not retried, "
                                    "fix it and clear the task)")
    return AirflowException(message)


def for_error(exc: BaseException) -> BaseException | None:
    """The exception to raise instead of ``exc``, or None to re-raise ``exc`` itself (it is retried)."""
    if isinstance(exc, EosEtlError) and exc.exit_code == EXIT_CONFIGURATION:
        return AirflowFailException(f"{exc} (bad configuration; not retried, fix it and clear the task)")
    return None


def recording_errors(context, task_id: str, work, *args):
    """``work(*args)``; if it fails, keep the error with the run (for the run's alert,
    :func:`~.alerts.record_error`) and raise what Airflow should see (:func:`for_error`)."""
    try:
        return work(*args)
    except Exception as exc:
        record_error(context, task_id, exc)
        if (instead := for_error(exc)) is not None:  # bad configuration: no retry
            raise instead from exc
        raise
