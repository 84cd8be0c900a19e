from ..errors import EosEtlError


class KafkaSetupError(EosEtlError):
    """Kafka is misconfigured or unreachable: broker down, topic missing, bad credentials."""


class BrokerUnreachableError(KafkaSetupError):
    pass


class MissingTopicError(KafkaSetupError):
    pass


class AuthenticationError(KafkaSetupError):
    pass


class AuthorizationError(KafkaSetupError):
    """The principal logged in but lacks an ACL; the message names the resource kind."""


class UnstableOffsetsError(KafkaSetupError):
    """The group's committed offsets belong to a transaction that has not completed."""


class TopicMismatchError(KafkaSetupError):
    """An existing topic has fewer partitions, replicas or in-sync replicas than asked."""
