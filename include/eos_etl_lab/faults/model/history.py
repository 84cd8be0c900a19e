"""The model soak's histories: drawn from a seed (:func:`draw_history`), and described (:func:`describe`).

A history is its input partitions and a list of :class:`~.registry.Op`, reproducible from its
seed (``random.Random(seed)``): the shrinker and a replay (``--seed-list``) draw it again.
"""

from __future__ import annotations

import random

from .operations import BROKER_OPS, CONNECT_OPS, OPERATIONS, RUN_OPS, WEIGHTS
from .registry import Op

#: Where a run's Spark is: a spark-submit of its own, or a client of the lab's Spark Connect server.
ROUTES = ("local", "connect")


def draw_op(rng: random.Random, kind: str, *, connect: bool = False) -> Op:
    """One operation of ``kind`` with its parameters drawn from ``rng``; with ``connect``, a run's route too."""
    registered = OPERATIONS[kind]
    args = tuple(registered.draw(rng).items()) if registered.draw is not None else ()
    if connect and registered.routed:
        args += (("route", rng.choice(ROUTES)),)
    return Op(kind, args)


def draw_history(seed: int, length: int, *, broker_ops: bool = True, connect: bool = False) -> tuple[int, list[Op]]:
    """(input partitions, ``length`` operations), reproducible from ``seed``. The history starts with
    purchases, holds at least one run; ``broker_ops``/``connect``: the kinds that need the lab's own
    broker or a Spark Connect server may be drawn (and, with ``connect``, every run's route)."""
    rng = random.Random(seed)
    kinds = [k for k in WEIGHTS if (broker_ops or k not in BROKER_OPS) and (connect or k not in CONNECT_OPS)]
    weights = [WEIGHTS[k] for k in kinds]
    partitions = rng.choice((1, 2, 2, 3))
    ops = [draw_op(rng, "produce")]
    while len(ops) < length:
        ops.append(draw_op(rng, rng.choices(kinds, weights)[0], connect=connect))
    if not any(o.kind in RUN_OPS for o in ops):
        ops[-1] = draw_op(rng, "run", connect=connect)
    return partitions, ops


def describe(seed: int, partitions: int, ops: list[Op]) -> str:
    """The history as a numbered list, headed by its seed: what reproduces it."""
    lines = [f"seed {seed}: {partitions} input partition(s), {len(ops)} operations"]
    lines += [f"  {i}. {op.describe()}" for i, op in enumerate(ops, 1)]
    return "\n".join(lines)
