from ..errors import EosEtlError


class EngineError(EosEtlError):
    """The exactly-once engine could not complete a window."""


class WindowMismatchError(EngineError):
    """The group's committed offset is outside the window (offsets were reset or
    another pipeline shares the group); publishing would lose or repeat data."""


class InputDataLossError(EngineError):
    """Input records below the group's committed position are gone (retention)."""


class PublishError(EngineError):
    """A transaction could not be completed after the allowed retries."""


class ProducerFencedError(PublishError):
    """Another attempt with the same transactional.id took over; this attempt must stop."""


class TransactionalIdNotAuthorizedError(PublishError):
    """The principal has no Write ACL on the pipeline's transactional id."""


class TransformContractError(EngineError):
    """The transform's output does not have the columns the engine publishes."""


class NotEnoughReplicasError(PublishError):
    """Too few of an output partition's replicas are on answering brokers for an acks=all write
    (below ``min.insync.replicas``): nothing can commit until brokers come back."""


class PositionLostError(EngineError):
    """A partition has no committed offset and no checkpoint record, but the pipeline already
    published: starting from the start policy would publish those records again."""
