from ..errors import EosEtlError


class StackError(EosEtlError):
    """The local stack (broker, jars, Airflow) could not be set up or run."""


class MissingToolError(StackError):
    """A required program (java, mvn) is not installed."""


class MavenFetchError(StackError):
    """Maven could not fetch the artifacts; carries Maven's own error lines."""


class PortInUseError(StackError):
    """A port the stack wants is already taken by another process."""


class BrokerStartError(StackError):
    """The broker process exited or did not become ready in time."""


class SparkServerLostError(StackError):
    """The Spark server a run used (a Spark Connect server) went away or stopped answering mid-run:
    the run failed, not its configuration (exit code 1); its retry runs on the restarted server."""

    exit_code = 1


class AirflowUnansweredError(StackError, TimeoutError):
    """Airflow's API server did not answer a call in time; says which process holds its SQLite
    database's lock when one does (the usual reason on the embedded stack). A retry may find it
    answering (exit code 1)."""

    exit_code = 1

