"""The embedded stack's errors: a broker that would not start, an Airflow that did not answer."""

from ..errors import StackError


class BrokerStartError(StackError):
    """The broker process exited or did not become ready in time."""


class AirflowUnansweredError(StackError, TimeoutError):
    """Airflow's API server did not answer a call in time; says which process holds its SQLite
    database's lock when one does (the usual reason on the embedded stack). A retry may find it
    answering (exit code 1)."""

    exit_code = 1
