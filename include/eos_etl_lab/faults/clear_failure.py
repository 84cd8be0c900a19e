"""One verdict for how a faulted run ended: it finished, or it failed clearly.

A failed run is clear iff its exit code is one the product gives a diagnosed failure
(1: the world failed at runtime; 2: bad configuration or arguments, see
:mod:`eos_etl.errors`), stderr holds exactly one ``error:`` line and no Python traceback,
no signal ended it, and it ended within its bound. A finished run (exit 0) prints no
``error:`` line. A traceback is the process's own: Python's report of an uncaught exception
starts a line; Spark's log lines about a lost task attempt quote the task's traceback after
their prefix (``... PythonException: Traceback ...``), and a retried attempt is not the
run's failure. Every soak that judges how runs end uses this module (the single-node
start-phase kills, the cluster and the partition scenarios, and their tables).
"""

from __future__ import annotations

from eos_etl.errors import EXIT_CONFIGURATION, EXIT_RUNTIME

#: The exit codes of a run that failed with one diagnosed error.
CLEAR_EXITS = (EXIT_RUNTIME, EXIT_CONFIGURATION)
TRACEBACK = "Traceback (most recent call last)"

#: Violation keys of :func:`run_violations` (and of the older verdicts kept in soak results).
UNCLEAR_KEYS = frozenset({"hung", "killed_by_signal", "unexpected_exit", "traceback", "not_one_error_line",
                          "over_bound", "no_clear_error", "unclear_failure"})


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


def has_traceback(stderr: str) -> bool:
    """The process's own Python traceback (an uncaught exception), not one quoted in a log line."""
    return any(line.startswith(TRACEBACK) for line in stderr.splitlines())


def by_signal(code: int | None) -> bool:
    """Ended by a signal: negative from Popen, or 128 + the signal from a shell."""
    return code is not None and (code < 0 or code >= 128)


def run_violations(code: int | None, stderr: str, *, took_s: float | None = None,
                   bound_s: float | None = None) -> dict[str, int]:
    """Violations of "finishes, or fails with one clear error within its bound" (empty: it did).

    ``code``: the exit code, None if the run was still going at its bound (it hung);
    ``took_s`` / ``bound_s``: how long it ran and its bound, when the caller timed it.
    """
    violations: dict[str, int] = {}
    if code is None:
        violations["hung"] = 1
    elif by_signal(code):
        violations["killed_by_signal"] = 1
    elif code != 0 and code not in CLEAR_EXITS:
        violations["unexpected_exit"] = 1
    if has_traceback(stderr):
        violations["traceback"] = 1
    errors = len(error_lines(stderr))
    if (code in CLEAR_EXITS and errors != 1) or (code == 0 and errors):
        violations["not_one_error_line"] = 1
    if code is not None and took_s is not None and bound_s is not None and took_s > bound_s:
        violations["over_bound"] = 1
    return violations


def failed_clearly(code: int | None, stderr: str, **bound) -> bool:
    """The run failed (not 0) and clearly: exit 1 or 2, one ``error:`` line, no traceback, in its bound."""
    return code in CLEAR_EXITS and not run_violations(code, stderr, **bound)


def trial_failed_clearly(result) -> bool:
    """A soak trial (:class:`~eos_etl_lab.faults.lab.TrialResult`) whose faulted run failed clearly, from what
    the trial kept: its exit code and the verdict's violations (older results included)."""
    return result.exit_code in CLEAR_EXITS and not result.hung and not UNCLEAR_KEYS & set(result.violations)
