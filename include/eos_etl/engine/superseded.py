"""A fenced task attempt steps aside for the attempt that fenced it.

With ``spark.speculation`` on (or a retried task racing its slow original), two
attempts of one publishing task run at once. The later attempt's
``init_transactions`` fences the earlier one, which is what keeps the output
exact. If the fenced attempt then simply failed, Spark would queue yet another
attempt of the task, whose ``init_transactions`` would fence the attempt doing
the work, and so on until the task's failure limit aborts the job.

So a fenced attempt waits, bounded, until the partition's committed offset
reaches the window end: the attempt that fenced it has finished. By then Spark
has usually taken that attempt's result and killed this redundant copy (a kill
is not counted as a task failure). If the end is not reached within the bound
(the other attempt died too), it fails as fenced and Spark's next attempt
resumes from the committed offset. Exactly-once never depends on this; only
whether a run with speculation finishes does.
"""

from __future__ import annotations

import logging
import time

from ..kafka.errors import KafkaSetupError
from .checkpoint import PartitionCheckpoint
from .pipeline import PipelineConfig

log = logging.getLogger(__name__)

# After the window end is committed: time for the attempt that did it to report to the driver first.
REPORT_GRACE_S = 5.0


def wait_for_successor(config: PipelineConfig, partition: int, end: int, timeout_s: float,
                       poll_s: float = 1.0) -> bool:
    """True once the group's committed offset for ``partition`` reaches ``end`` (within ``timeout_s``)."""
    deadline = time.monotonic() + timeout_s
    checkpoint = PartitionCheckpoint(config, partition, timeout_s=max(1.0, min(10.0, timeout_s)))
    log.warning("%s was fenced by another attempt; waiting up to %.0fs for it to commit %s[%d] up to %d",
                config.transactional_id(partition), timeout_s, config.input_topic, partition, end)
    try:
        while True:
            try:
                committed = checkpoint.committed()
            except KafkaSetupError as exc:  # a broker moving under us: keep asking until the deadline
                log.info("reading the committed offset while stepping aside: %s", exc)
                committed = None
            if committed is not None and committed >= end:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(poll_s)
    finally:
        checkpoint.close()


def step_aside(config: PipelineConfig, partition: int, end: int) -> None:
    """Called with a fenced attempt's error in flight; the caller re-raises it afterwards."""
    if wait_for_successor(config, partition, end, config.effective_stall_timeout_s):
        log.warning("%s[%d] was completed by the attempt that fenced this one; this copy stands down",
                    config.input_topic, partition)
        time.sleep(REPORT_GRACE_S)
