"""Root of the project's exception tree.

Every error the product raises on purpose derives from :class:`EosEtlError`,
so callers (CLI, DAG tasks) can tell "we diagnosed this" from a bug. Each
sub-package adds a small ``errors`` module with its own subclasses.
"""


class EosEtlError(Exception):
    """Base class for all errors raised by eos_etl."""

    #: The command line's exit code for this error: 2, "fix something before running again",
    #: unless a subclass says otherwise.
    exit_code = 2


class ConfigurationError(EosEtlError):
    """The configuration cannot work; the message says what to change."""
