"""The engine's errors, each with its exit code (:mod:`eos_etl.errors`).

A window the engine could not complete because the world failed under it (brokers, replicas,
a transaction that would not complete, a newer attempt) ends with exit code 1: a retry may
succeed. What no retry can fix (offsets that do not fit the window, input lost to retention,
a transform that breaks its contract, a lost position, a missing ACL) keeps exit code 2.
"""

from ..errors import EXIT_CONFIGURATION, EXIT_RUNTIME, EosEtlError


class EngineError(EosEtlError):
    """The exactly-once engine could not complete a window."""

    exit_code = EXIT_RUNTIME


class WindowMismatchError(EngineError):
    """The group's committed offset is outside the window (offsets were reset or another pipeline shares the
    group); publishing would lose or repeat data. Re-plan the window or fix the group: exit code 2."""

    exit_code = EXIT_CONFIGURATION


class InputDataLossError(EngineError):
    """Input records below the group's committed position are gone (retention); someone must decide
    what to do about the lost records before the pipeline goes on: exit code 2."""

    exit_code = EXIT_CONFIGURATION


class PublishError(EngineError):
    """A transaction could not be completed after the allowed retries (exit code 1)."""


class ProducerFencedError(PublishError):
    """Another attempt with the same transactional.id took over, or the coordinator aborted this
    attempt's transaction at its timeout; this attempt must stop (exit code 1).

    What the attempt knew when it was fenced, for :mod:`.superseded` (None: not known):
    ``transaction_age_s``, how long its transaction had been open (None: none was);
    ``transaction_timeout_s``, the transaction's timeout; ``position``, the committed position
    it last knew, and ``partition``, the input partition it was publishing (both set by the publisher).
    """

    def __init__(self, message: str, *, transaction_age_s: float | None = None,
                 transaction_timeout_s: float | None = None):
        super().__init__(message)
        self.transaction_age_s = transaction_age_s
        self.transaction_timeout_s = transaction_timeout_s
        self.position: int | None = None
        self.partition: int | None = None


class WindowEndNotReachedError(PublishError):
    """A publishing task's input stopped short of its window end and the rest of the range holds
    records to publish (or could not be read): Spark interrupted or killed the task, so its stream
    ended early. The attempt committed nothing more and aborted its open transaction; a retry
    resumes from the committed position (exit code 1)."""


class TaskProcessLostError(EngineError):
    """Spark gave up on the publishing job because a task's process died under it (an executor or a
    Python worker lost): each partition committed only what it had published; a retry resumes."""


class TransactionalIdNotAuthorizedError(PublishError):
    """The principal has no Write ACL on the pipeline's transactional id: grant it (exit code 2)."""

    exit_code = EXIT_CONFIGURATION


class TransformContractError(EngineError):
    """The transform's output does not have the columns the engine publishes: fix the transform (exit code 2)."""

    exit_code = EXIT_CONFIGURATION


class NotEnoughReplicasError(PublishError):
    """Too few of an output partition's replicas are on answering brokers for an acks=all write
    (below ``min.insync.replicas``): nothing can commit until brokers come back (exit code 1)."""


class CommitNotVisibleError(EngineError):
    """A run committed its transactions, but a read_committed reader still did not see everything they wrote
    in some output or checkpoint partition within the bound (the transactions' markers not written: a leader
    moving, brokers down). Nothing is lost or doubled; the run does not say it is done (exit code 1)."""


class PositionLostError(EngineError):
    """A partition has no committed offset and no checkpoint record, but the pipeline already
    published: starting from the start policy would publish those records again. An operator
    recovers the position first (exit code 2)."""

    exit_code = EXIT_CONFIGURATION


class PositionBeyondLogError(EngineError):
    """A partition's committed position (the group's offset or its checkpoint record) lies beyond the
    partition's log end: the input topic was deleted and created again, or truncated. Planning from it
    would skip every record up to it without a word. An operator decides where the pipeline goes on
    from (``offsets reset``) before anything is published (exit code 2)."""

    exit_code = EXIT_CONFIGURATION


class WriterSlotsChangedError(EngineError):
    """The pipeline's positions were committed under another grouping of its partitions into writer slots
    (:mod:`.slots`) than this run's: publishing now would let two transactional ids commit one partition.
    An operator changes the grouping with ``offsets reslot`` (exit code 2)."""

    exit_code = EXIT_CONFIGURATION


class IdentityMismatchError(EngineError):
    """A run's settings (transactional-id prefix, writer slots, output topics) disagree with the pipeline's
    recorded identity (:mod:`.identity`): its ids would not fence the pipeline's. Nothing is read, published
    or fenced; an operator runs with the recorded settings or changes the pipeline (exit code 2)."""

    exit_code = EXIT_CONFIGURATION


class IdentityChangedError(PublishError):
    """The pipeline's identity changed after this attempt's window was planned (a reslot, a prefix change):
    the attempt stops before it produces anything; the next run plans with the new identity (exit code 1)."""


class ClientLeaseError(EngineError):
    """On the Spark Connect route, the run's client lease (:mod:`.publishing.client_lease`) is gone or could not be
    taken: a task whose client is gone aborted its open transaction and committed nothing more; the next run
    fences what is left and resumes (exit code 1)."""


class TransactionAbortable(Exception):
    """The current transaction must be aborted; the producer itself is still usable (a signal inside the
    engine: :mod:`.transaction_loop` aborts and replays on it, up to ``max_abort_retries``)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class TransactionOutcomeUnknown(PublishError):
    """A commit or abort got no answer within its retries: it may or may not have taken effect.

    The producer must not be used for another transaction: :meth:`~.producer.TransactionalProducer.reinitialise`.
    """
