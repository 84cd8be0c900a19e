from ..errors import EXIT_RUNTIME, EosEtlError


class KafkaSetupError(EosEtlError):
    """Kafka is misconfigured or unreachable: broker down, topic missing, bad credentials."""


class BrokerUnreachableError(KafkaSetupError):
    """No broker of the bootstrap list answered, and none ever did in this process: the address,
    port or security protocol is wrong, or the cluster is not running (exit code 2)."""


class BrokerLostError(BrokerUnreachableError):
    """The bootstrap list answered earlier in this process and no broker answers any more: the
    brokers or the network failed under a run that was set up right (exit code 1, :mod:`.reachability`)."""

    exit_code = EXIT_RUNTIME


class MissingTopicError(KafkaSetupError):
    pass


class AuthenticationError(KafkaSetupError):
    pass


class AuthorizationError(KafkaSetupError):
    """The principal logged in but lacks an ACL; the message names the resource kind."""


class UnstableOffsetsError(KafkaSetupError):
    """The group's committed offsets belong to a transaction that has not completed.

    A state of the cluster, not of the configuration: the transaction completes, or the
    broker aborts it at its timeout, and the next attempt reads stable offsets (exit code 1)."""

    exit_code = EXIT_RUNTIME


class TopicMismatchError(KafkaSetupError):
    """An existing topic has fewer partitions, replicas or in-sync replicas than asked."""
