"""The model soak's shrinker: the shortest history that still fails as a failing one did.

:func:`shortest_failing` knows histories only as lists of :class:`~.registry.Op` and executes
each candidate through the callable it is given (the soak's executor on fresh topics, or a fake).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from .operations import RUN_OPS
from .outcome import Outcome
from .registry import Op

log = logging.getLogger(__name__)


def shortest_failing(failing: Outcome, execute: Callable[[list[Op]], Outcome], *, budget: int = 8,
                     repeats: int = 1) -> Outcome:
    """The smallest history found within ``budget`` executions (``execute(ops)``) that still shows
    ``failing``'s first violation kind: first the history cut after the step that failed (what came
    later cannot have caused it), then delta debugging (ddmin) over the operations. A candidate that
    does not fail is executed again up to ``repeats`` times in all: a kill lands a little differently
    each time, so one clean execution does not clear it."""
    target = failing.first_kind
    best = failing
    tries = 0

    def fails(candidate: list[Op]) -> Outcome | None:
        nonlocal tries
        for _ in range(repeats):
            if tries >= budget:
                return None
            tries += 1
            log.info("shrinking seed %s: try %d, %d of %d operations", failing.seed, tries, len(candidate),
                     len(best.ops))
            outcome = execute(candidate)
            if any(v.kind == target for v in outcome.violations):
                return outcome
        return None

    step = failing.violations[0].step if failing.violations else 0
    if 0 < step < len(best.ops) and any(o.kind in RUN_OPS for o in best.ops[:step]):
        best = fails(best.ops[:step]) or best
    n = 2
    while len(best.ops) > 1 and tries < budget:
        ops = best.ops
        size = max(1, len(ops) // n)
        chunks = [ops[i:i + size] for i in range(0, len(ops), size)]
        reduced = False
        for i in range(len(chunks)):
            candidate = [o for j, c in enumerate(chunks) if j != i for o in c]
            if not candidate or not any(o.kind in RUN_OPS for o in candidate) or tries >= budget:
                continue
            if (outcome := fails(candidate)) is not None:
                best, reduced = outcome, True
                n = max(n - 1, 2)
                break
        if not reduced:
            if size == 1:
                break
            n = min(n * 2, len(ops))
    return best
