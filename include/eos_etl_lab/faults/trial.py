"""One fault trial's set-up, shared by every scenario family (broker, Spark, Connect, cluster,
network partitions): the trial's result and its timing, fresh topics with purchases, a failpoint
that fires once."""

from __future__ import annotations

import logging
import tempfile
import time
import uuid
from contextlib import contextmanager

from eos_etl.shop.generator import generate

from .lab import Lab, TrialResult

log = logging.getLogger(__name__)


@contextmanager
def trial(scenario: str, name: str):
    """The :class:`TrialResult` of one trial; an exception of the harness becomes its ``error``."""
    result = TrialResult(scenario=scenario, trial=name)
    t0 = time.monotonic()
    log.info("trial %s/%s: start", scenario, name)
    try:
        yield result
    except Exception as exc:  # noqa: BLE001 - a broken trial is a failed trial, reported, not a crashed soak
        log.exception("trial %s/%s could not be carried out", scenario, name)
        result.error = f"{type(exc).__name__}: {exc}"[:500]
    result.seconds = round(time.monotonic() - t0, 1)
    log.info("trial %s/%s: %s in %.1fs violations=%s settled=%s %s", scenario, name,
             "ok" if result.ok else "FAILED", result.seconds, result.violations, result.lso_settled, result.detail)


def written(stats) -> int:
    """Records a generator run put in the log: committed and aborted ones."""
    return stats.produced + stats.aborted


def shop_with_purchases(lab: Lab, result: TrialResult, partitions: int, name: str, count: int, **generate_options):
    """Fresh topics with ``count`` purchases written (counted in ``result``); returns (shop, the input's ends)."""
    shop = lab.make_shop(partitions, name=name)
    result.records = written(generate(shop.connection, shop.topics.purchases, count, **generate_options))
    return shop, lab.input_ends(shop)


def once(tag: str) -> str:
    """Failpoint option making it fire in one process, once: a resumed or retried attempt goes on."""
    return f"once={tempfile.gettempdir()}/eos-etl-failpoint-{tag}-{uuid.uuid4().hex}"
