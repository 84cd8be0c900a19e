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

from .pipeline import PipelineConfig
from .producer import TransactionalProducer

log = logging.getLogger(__name__)


def fence_transactional_ids(config: PipelineConfig, partitions: list[int]) -> None:
    def fence(partition: int) -> None:
        producer = TransactionalProducer(config.producer_settings(partition), retry_deadline_s=config.retry_deadline_s)
        try:
            producer.init_transactions()
            log.info("fenced %s (open transaction aborted, zombies fenced)", config.transactional_id(partition))
        finally:
            producer.close()

    with ThreadPoolExecutor(max_workers=min(8, max(1, len(partitions)))) as pool:
        list(pool.map(fence, partitions))
