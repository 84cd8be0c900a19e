"""Recovery: take over a pipeline's transactional ids before planning.

``init_transactions`` with a partition's transactional.id bumps the epoch,
fences any attempt still holding the id (a paused zombie) and aborts the
transaction it left open, including its pending offset commit. The
publisher does this per partition anyway; the planner needs it earlier when
a dead attempt's offset commit leaves the group's offsets unstable.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor

from ...kafka.retry import START_PHASE_DEADLINE_S
from ..errors import ProducerFencedError, PublishError, TransactionalIdNotAuthorizedError
from ..pipeline import PipelineConfig
from ..publishing.producer import TransactionalProducer

log = logging.getLogger(__name__)

#: One InitProducerId attempt; librdkafka finds the (possibly moved) coordinator within it.
_INIT_ATTEMPT_S = 10.0


def fence_transactional_ids(config: PipelineConfig, partitions: list[int]) -> None:
    """init_transactions for the transactional.id of every partition's writer slot, in parallel.

    Bounded like every start-phase step: retriable failures (the transaction
    coordinator lost with its broker, still loading on its new one) are retried
    for ``START_PHASE_DEADLINE_S``; then one :class:`PublishError` names the id
    whose coordinator did not answer.
    """
    def fence(partition: int) -> None:  # the id of the partition's writer slot (once per slot, below)
        tid = config.transactional_id(partition)
        producer = TransactionalProducer(config.producer_settings(partition),
                                         retry_deadline_s=min(config.retry_deadline_s, START_PHASE_DEADLINE_S),
                                         op_timeout_s=_INIT_ATTEMPT_S)
        try:
            producer.init_transactions()
            log.info("fenced %s (open transaction aborted, zombies fenced)", tid)
        except (ProducerFencedError, TransactionalIdNotAuthorizedError):
            raise
        except PublishError as exc:
            raise PublishError(f"cannot take over {tid} before planning (no transaction coordinator completed "
                               f"init_transactions within {START_PHASE_DEADLINE_S + _INIT_ATTEMPT_S:.0f}s): "
                               f"{exc}") from exc
        finally:
            producer.close()

    one_per_slot = list({config.slot_of(p): p for p in sorted(partitions, reverse=True)}.values())
    with ThreadPoolExecutor(max_workers=min(8, max(1, len(one_per_slot)))) as pool:
        list(pool.map(fence, one_per_slot))


#: The transactional id (under the pipeline's stem, never a partition's) that proves the ACL.
PROBE_SUFFIX = "acl-probe"


def prove_transactional_id_access(config: PipelineConfig) -> None:
    """init_transactions once with ``<stem>acl-probe``: raises
    :class:`TransactionalIdNotAuthorizedError` when the principal has no Write on the
    pipeline's transactional ids, before anything is read or published.

    The probe never uses a partition's id, so it fences no running attempt (a dry run
    or a second run planning alongside a live one must not abort its transactions).
    """
    settings = config.producer_settings_as(config.transactional_id_stem + PROBE_SUFFIX)
    producer = TransactionalProducer(settings, retry_deadline_s=min(config.retry_deadline_s, START_PHASE_DEADLINE_S),
                                     op_timeout_s=_INIT_ATTEMPT_S)
    try:
        producer.init_transactions()
    finally:
        producer.close()
