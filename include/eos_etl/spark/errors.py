"""Spark's errors as a run meets them: the server it used went away."""

from ..errors import StackError


class SparkServerLostError(StackError):
    """The Spark server a run used (a Spark Connect server) went away or stopped answering mid-run:
    the run failed, not its configuration (exit code 1); its retry runs on the restarted server."""

    exit_code = 1
