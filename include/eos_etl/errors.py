"""Root of the project's exception tree.

Every error the product raises on purpose derives from :class:`EosEtlError`,
so callers (CLI, DAG tasks) can tell "we diagnosed this" from a bug. Each
sub-package adds a small ``errors`` module with its own subclasses.
"""


class EosEtlError(Exception):
    """Base class for all errors raised by eos_etl."""


class ConfigurationError(EosEtlError):
    """The configuration cannot work; the message says what to change."""
