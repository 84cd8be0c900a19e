"""Root of the project's exception tree.

Every error the product raises on purpose derives from :class:`EosEtlError`,
so callers (CLI, DAG tasks) can tell "we diagnosed this" from a bug. Each
sub-package adds a small ``errors`` module with its own subclasses.

Each class says which exit code the command line ends with (one ``error:`` line either way):

* :data:`EXIT_CONFIGURATION` (2): the configuration or the arguments cannot work (an address
  that never answered, a missing topic or ACL, a bad value): fix something before running
  again; nothing was published. Retrying unchanged cannot help.
* :data:`EXIT_RUNTIME` (1): the run was set up right but the world failed under it (brokers it
  reached stopped answering, outputs below ``min.insync.replicas``, a transaction that would
  not complete, fenced by a newer attempt): running again once the cause is gone can succeed.
"""

#: Bad configuration or arguments: fix something before running again.
EXIT_CONFIGURATION = 2
#: A run that failed at runtime because something it depends on failed: a retry may succeed.
EXIT_RUNTIME = 1


class EosEtlError(Exception):
    """Base class for all errors raised by eos_etl."""

    #: The command line's exit code for this error: :data:`EXIT_CONFIGURATION` unless a
    #: subclass says the run failed at runtime (:data:`EXIT_RUNTIME`).
    exit_code = EXIT_CONFIGURATION


class ConfigurationError(EosEtlError):
    """The configuration cannot work; the message says what to change."""


class StackError(EosEtlError):
    """The stack the product runs on (a broker, jars, a JVM, a Spark server, Airflow) could not be set up or
    run. Each package that starts or reaches a piece of it (``host``, ``jars``, ``jvm``, ``spark``,
    ``embedded``) raises its own subclasses."""
