"""Preflight: fail a run before anything is read or published if it cannot work.

:func:`preflight`, in order; each failure is one clear error and nothing after it runs:

1. the cluster answers (``ClusterAdmin.check_reachable``);
2. the principal holds every ACL the run needs (:func:`require_grants`); first, because without
   Read or Write a topic looks missing, and the error should say why;
3. the input and output topics exist, and the checkpoint topic is there for the input
   (:func:`~eos_etl.engine.checkpoint_log.require_topic`);
4. the output topics take writes (:func:`~eos_etl.engine.planning.replicas.require_writable`):
   two of three brokers gone would otherwise surface as a misleading timeout, minutes later;
5. the pipeline's transaction timeout is within the brokers' ``transaction.max.timeout.ms``.

Between 4 and 5 it gathers warnings, logged and returned, never failures: output topics that
may lose acknowledged records (:func:`~eos_etl.kafka.topics.durability_warnings`) and committed
offsets that may expire before the next run (:mod:`.offsets_retention`); it logs the cluster's
finalised features (:func:`cluster_features`). A question only a warning depends on that gets
no answer is itself a warning.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from confluent_kafka import KafkaException

from ...errors import ConfigurationError
from ...kafka.acls import missing_grants
from ...kafka.admin import ClusterAdmin
from ...kafka.errors import AuthenticationError, AuthorizationError, BrokerUnreachableError, KafkaSetupError
from ...kafka.features import FinalizedFeatures, finalized_features
from ...kafka.topics import durability_warnings
from .. import checkpoint_log, offsets_retention
from ..pipeline import PipelineConfig
from .recovery import prove_transactional_id_access
from .replicas import require_writable

log = logging.getLogger(__name__)


def require_grants(config: PipelineConfig) -> None:
    """Fail, naming every missing permission, when the principal lacks an ACL the run needs:
    on its topics and group (the brokers' authorized operations), and on its transactional
    ids (an ``init_transactions`` under their stem, see :func:`prove_transactional_id_access`)."""
    try:
        missing = missing_grants(config.connection, config.resources().needed_to_run())
    except (KafkaException, TimeoutError) as exc:
        # Only the check failed (a leader moving, a broker lost); the run's own requests,
        # retried within their bounds, still fail with one clear error if it lacks an ACL.
        log.warning("could not check the principal's ACLs up front: %s",
                    exc.args[0].str() if isinstance(exc, KafkaException) else "no answer in time")
        return
    if missing:
        user = config.connection.sasl_username or "ANONYMOUS"
        raise AuthorizationError(
            f"user {user!r} lacks {'; '.join(map(str, missing))}: nothing was read or published; grant the "
            f"pipeline's ACLs with `python -m eos_etl acl grant --principal {user} --role pipeline`")
    if config.connection.sasl_username:  # the PLAINTEXT principal is the super-user: nothing to prove
        prove_transactional_id_access(config)


def cluster_features(config: PipelineConfig) -> FinalizedFeatures | None:
    """The cluster's finalised ``transaction.version`` and ``metadata.version``, logged (None if unreadable)."""
    try:
        features = finalized_features(config.connection)
    except KafkaSetupError as exc:
        log.warning("could not read the cluster's finalised features: %s", exc)
        return None
    # librdkafka speaks the version-1 transaction protocol whatever the cluster finalised; the leaders'
    # partition verification (KIP-890 part 1) guards it against late writes on either.
    log.info("cluster: %s; this producer (librdkafka) uses the version-1 transaction protocol",
             features.describe())
    return features


@dataclass
class Preflight:
    """What a passed preflight learnt: the warnings it logged (a weak output topic, offsets that may
    expire before the next run), the cluster's finalised features and the brokers' offsets retention
    in minutes (None: unreadable)."""

    warnings: list[str]
    features: FinalizedFeatures | None
    offsets_retention_minutes: int | None = None


def preflight(config: PipelineConfig, admin: ClusterAdmin | None = None, *,
              schedule_interval_s: float | None = None) -> Preflight:
    """Fail fast, before anything is read or published, if the run cannot work; return the
    warnings it logged and the cluster's finalised features (:class:`Preflight`).

    Every question goes to whichever broker answers and is retried on retriable
    failures (a broker lost, leaders and coordinators moving) for at most
    ``ClusterAdmin.retry_deadline_s`` (30 s) each; an unreachable cluster fails in
    ``ClusterAdmin.timeout`` (10 s). Failures are one :class:`KafkaSetupError` line.
    ``schedule_interval_s``: how often the pipeline runs, when it runs on a schedule.
    """
    admin = admin or ClusterAdmin(config.connection)
    admin.check_reachable()
    require_grants(config)  # first: without Read or Write a topic looks missing, and the error should say why
    admin.require_topics(config.input_topic, *config.output_topics)
    checkpoint_log.require_topic(admin, config.checkpoint_topic, config.input_topic)
    # Two of three brokers gone would otherwise surface as a misleading timeout, minutes later.
    require_writable(config.connection, config.output_topics)

    warnings: list[str] = []
    try:
        warnings += durability_warnings(admin, list(config.output_topics))
    except BrokerUnreachableError as exc:
        # Only a warning was at stake: the run itself needs the partition leaders, not this answer.
        log.warning("could not check the output topics' durability: %s", exc)
    features = cluster_features(config)
    try:
        brokers = admin.broker_configs("transaction.max.timeout.ms", offsets_retention.SETTING)
    except (AuthenticationError, AuthorizationError):
        log.warning("not allowed to read broker configs; cannot check transaction.max.timeout.ms and "
                    "%s up front", offsets_retention.SETTING)
        brokers = {}
    if brokers:
        try:
            warnings += offsets_retention.check(admin, brokers[offsets_retention.SETTING], config.checkpoint_topic,
                                                topic=config.input_topic, group=config.group,
                                                schedule_interval_s=schedule_interval_s)
        except BrokerUnreachableError as exc:
            log.warning("could not read when the pipeline last committed: %s", exc)
    for warning in warnings:
        log.warning(warning)
    max_timeout = brokers.get("transaction.max.timeout.ms")
    if max_timeout is not None and int(max_timeout) < config.transaction_timeout_ms:
        raise ConfigurationError(
            f"transaction_timeout_ms={config.transaction_timeout_ms} exceeds the broker's "
            f"transaction.max.timeout.ms={max_timeout}; lower the pipeline's transaction timeout "
            "(and chunk_seconds) or raise the broker setting"
        )
    retention = brokers.get(offsets_retention.SETTING)
    return Preflight(warnings, features, int(retention) if retention is not None else
                     (offsets_retention.KAFKA_DEFAULT_MINUTES if brokers else None))
